//! Compiles ONNX models from a Cargo build script and generates a typed Rust module for
//! each: one call in `build.rs`, no onnxc binary, no hand-written `unsafe`.
//!
//! ```no_run
//! // build.rs (with `onnxc-build` under [build-dependencies] and `onnxc-runtime` under
//! // [dependencies])
//! fn main() {
//!     onnxc_build::Model::new("models/tiny_cnn.onnx")
//!         .shape("input", &[1, 3, 32, 32])
//!         .compile()
//!         .unwrap_or_else(|e| panic!("{e}"));
//! }
//! ```
//!
//! The model's object is archived into `OUT_DIR` and linked; the runtime's kernels come
//! from the `onnxc-runtime` crate, which the generated code uses. The module, written to
//! `OUT_DIR/NAME.rs`, is included where the program wants it:
//!
//! ```ignore
//! mod tiny_cnn {
//!     include!(concat!(env!("OUT_DIR"), "/tiny_cnn.rs"));
//! }
//!
//! let mut model = tiny_cnn::TinyCnn::new()?; // owns its workspace; Send
//! let out = model.run(&image)?;              // inputs as slices, lengths checked
//! println!("{:?}", out.probs);               // outputs as Vecs, one field each
//! ```
//!
//! Each input is a slice of its element type (`f32`, `i64`, `u8`, `bool`, …; float16 and
//! bfloat16 as their `u16` bits) holding the tensor row-major; `run_into` writes into the
//! caller's output slices; `run_threaded` takes `onnxc_runtime::par::Threads` (the
//! runtime's `Pool` or the application's own) and gives the same bits as `run`. Errors are
//! `onnxc_runtime::model::Error`: a slice of the wrong length, or the run's status with
//! the runtime's message. String tensors are refused (use the C ABI). A model with a
//! run-time batch also gets `run_batch(items, …)`; one whose outputs have as many rows as
//! the data selects (NonZero, NonMaxSuppression, …) gets `run` and `run_threaded` only,
//! each such output truncated to the rows found and its dims in a `NAME_dims` field.

#![allow(
    clippy::needless_doctest_main,
    reason = "the example is a build script, whose main is the point"
)]

mod bindings;

use onnxc::driver::{self, OptLevel, Options};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A model to compile, with its options.
#[derive(Clone, Debug)]
pub struct Model {
    path: PathBuf,
    name: Option<String>,
    opts: Options,
    out_dir: Option<PathBuf>,
    cargo: bool,
}

/// What `compile` wrote.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The C symbol prefix and the module's file stem.
    pub name: String,
    /// The generated Rust module (`include!` it).
    pub module: PathBuf,
    /// The C header, for reference (the module does not need it).
    pub header: PathBuf,
    /// The static library holding the model's object.
    pub library: PathBuf,
}

/// Why a model did not compile or its files could not be written.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl Model {
    /// The model at `path` (relative paths are the build script's: the package root).
    pub fn new(path: impl AsRef<Path>) -> Model {
        Model {
            path: path.as_ref().to_path_buf(),
            name: None,
            opts: Options::default(),
            out_dir: None,
            cargo: true,
        }
    }

    /// The symbol prefix and module name (default: the model file's stem, as a C
    /// identifier). Models linked into one program need distinct names.
    pub fn name(mut self, name: &str) -> Model {
        self.name = Some(name.to_string());
        self
    }

    /// Fixes an input's shape (as `onnxc --shape INPUT=D0,D1,…`).
    pub fn shape(mut self, input: &str, dims: &[i64]) -> Model {
        self.opts.shapes.push((input.to_string(), dims.to_vec()));
        self
    }

    /// Binds a named symbolic dim in every input (as `onnxc --dim SYMBOL=N`).
    pub fn dim(mut self, symbol: &str, value: i64) -> Model {
        self.opts.dims.push((symbol.to_string(), value));
        self
    }

    /// No optimization (`-O0`); the default is full optimization.
    pub fn unoptimized(mut self) -> Model {
        self.opts.opt = OptLevel::O0;
        self
    }

    /// 3×3 convolutions without Winograd transforms (`--no-winograd`).
    pub fn no_winograd(mut self) -> Model {
        self.opts.no_winograd = true;
        self
    }

    /// Writes into `dir` instead of `OUT_DIR`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Model {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print the `cargo:` directives that link the library and rerun the build
    /// script when the model changes (default: yes; off for use outside build scripts).
    pub fn cargo_directives(mut self, on: bool) -> Model {
        self.cargo = on;
        self
    }

    /// Compiles the model for the host (the CPU features the runtime dispatches on are
    /// picked at run time), writes `NAME.rs`, `NAME.h` and `libonnxc_model_NAME.a`, and
    /// prints the `cargo:` directives.
    pub fn compile(self) -> Result<Compiled, Error> {
        let out = match &self.out_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| {
                Error(
                    "OUT_DIR is not set: call compile() from a build script, or set out_dir()"
                        .into(),
                )
            })?),
        };
        let stem = self
            .path
            .file_stem()
            .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
        let name = onnxc::codegen::c_ident(self.name.as_deref().unwrap_or(&stem));
        let c = driver::compile_file(&self.path, &name, &self.opts, None)
            .map_err(|e| Error(format!("{}: {e}", self.path.display())))?;
        let module = bindings::module(&name, &self.path.display().to_string(), &c.program)
            .map_err(|e| Error(format!("{}: {e}", self.path.display())))?;
        std::fs::create_dir_all(&out).map_err(|e| io(&out, e))?;
        let object = out.join(format!("{name}.o"));
        let header = out.join(format!("{name}.h"));
        let rust = out.join(format!("{name}.rs"));
        let library = out.join(format!("libonnxc_model_{name}.a"));
        write(&object, &c.object)?;
        write(&header, c.header.as_bytes())?;
        write(&rust, module.as_bytes())?;
        archive(&library, &object)?;
        if self.cargo {
            println!("cargo:rustc-link-search=native={}", out.display());
            println!("cargo:rustc-link-lib=static=onnxc_model_{name}");
            println!("cargo:rerun-if-changed={}", self.path.display());
        }
        Ok(Compiled {
            name,
            module: rust,
            header,
            library,
        })
    }
}

fn io(p: &Path, e: std::io::Error) -> Error {
    Error(format!("{}: {e}", p.display()))
}

fn write(p: &Path, data: &[u8]) -> Result<(), Error> {
    std::fs::write(p, data).map_err(|e| io(p, e))
}

/// A static library of one object, made by the system archiver (`$AR`, default `ar`).
fn archive(library: &Path, object: &Path) -> Result<(), Error> {
    let _ = std::fs::remove_file(library);
    let ar = std::env::var_os("AR").unwrap_or_else(|| "ar".into());
    let status = Command::new(&ar)
        .arg("crs")
        .arg(library)
        .arg(object)
        .status()
        .map_err(|e| {
            Error(format!(
                "cannot run the archiver {} ({e}); install binutils or set AR",
                Path::new(&ar).display()
            ))
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error(format!(
            "{} failed ({status}) archiving {}",
            Path::new(&ar).display(),
            object.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_the_example_model_into_a_directory() {
        let dir = std::env::temp_dir().join(format!("onnxc-build-{}", std::process::id()));
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/models/tiny_cnn.onnx");
        let c = Model::new(&model)
            .name("tiny")
            .out_dir(&dir)
            .cargo_directives(false)
            .compile()
            .unwrap();
        assert_eq!(c.name, "tiny");
        let module = std::fs::read_to_string(&c.module).unwrap();
        for want in [
            "pub struct Tiny {",
            "pub const IMAGE: &[usize] = &[1, 3, 32, 32];",
            "pub probs: Vec<f32>,",
            "pub fn run(&mut self, image: &[f32]) -> Result<Outputs, Error>",
            "fn tiny_run_threaded(",
        ] {
            assert!(module.contains(want), "{want}\n{module}");
        }
        assert!(std::fs::metadata(&c.library).unwrap().len() > 0);
        assert!(
            std::fs::read_to_string(&c.header)
                .unwrap()
                .contains("tiny_run")
        );
        // A bad shape is the compiler's error, naming the model.
        let e = Model::new(&model)
            .shape("image", &[1, 3, 32])
            .out_dir(&dir)
            .cargo_directives(false)
            .compile()
            .unwrap_err();
        assert!(
            e.0.contains("tiny_cnn.onnx") && e.0.contains("--shape image"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
