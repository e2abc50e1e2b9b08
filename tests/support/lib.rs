//! Shared helpers for onnxc's integration tests and the conformance runner: running a test
//! case (model + `test_data_set_*`) through the real AOT path and comparing outputs the way
//! onnx's backend test runner does.

pub mod model;
pub mod text;

use onnxc::driver::{self, Options, TempDir};
use onnxc::ir::{DType, Tensor};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass,
    /// Ran but an output differs.
    Mismatch(String),
    /// onnxc refused the model (unsupported op, symbolic dims, …).
    Rejected(String),
    /// The compiled program failed, crashed or timed out.
    RunFailed(String),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Mismatch(_) => "mismatch",
            Outcome::Rejected(_) => "rejected",
            Outcome::RunFailed(_) => "run-failed",
        }
    }
    pub fn message(&self) -> &str {
        match self {
            Outcome::Pass => "",
            Outcome::Mismatch(m) | Outcome::Rejected(m) | Outcome::RunFailed(m) => m,
        }
    }
}

/// `np.testing.assert_allclose` semantics (NaN equal to NaN) for floats, exact otherwise.
pub fn compare(actual: &Tensor, expected: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if actual.dtype != expected.dtype {
        return Err(format!(
            "dtype {} != expected {}",
            actual.dtype, expected.dtype
        ));
    }
    if actual.shape != expected.shape {
        return Err(format!(
            "shape {:?} != expected {:?}",
            actual.shape, expected.shape
        ));
    }
    if actual.dtype == DType::Str {
        let (a, e) = (actual.to_strings(), expected.to_strings());
        return match a.iter().zip(&e).position(|(x, y)| x != y) {
            None => Ok(()),
            Some(i) => Err(format!(
                "at flat index {i}: got {:?}, expected {:?}",
                String::from_utf8_lossy(&a[i]),
                String::from_utf8_lossy(&e[i])
            )),
        };
    }
    let rtol = if actual.dtype == DType::BF16 {
        rtol.max(2f64.powi(-6))
    } else {
        rtol
    };
    let mut bad = 0usize;
    let mut first = None;
    for i in 0..actual.len() {
        let (a, e) = (actual.get(i), expected.get(i));
        let ok = if actual.dtype.is_float() {
            let (a, e) = (a.as_f64(), e.as_f64());
            if a.is_nan() || e.is_nan() {
                a.is_nan() && e.is_nan()
            } else if a.is_infinite() || e.is_infinite() {
                a == e
            } else {
                (a - e).abs() <= atol + rtol * e.abs()
            }
        } else {
            a == e
        };
        if !ok {
            bad += 1;
            if first.is_none() {
                first = Some(format!("at flat index {i}: got {a}, expected {e}"));
            }
        }
    }
    match first {
        None => Ok(()),
        Some(f) => Err(format!(
            "{bad} of {} elements differ (rtol {rtol}, atol {atol}); first {f}",
            actual.len()
        )),
    }
}

/// `compare` over values: sequences element by element, optionals by what they hold.
pub fn compare_values(
    actual: &onnxc::ir::Value,
    expected: &onnxc::ir::Value,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    use onnxc::ir::Value;
    match (actual.content(), expected.content()) {
        (None, None) => Ok(()),
        (Some(Value::Tensor(a)), Some(Value::Tensor(e))) => compare(a, e, rtol, atol),
        (Some(Value::Sequence { items: a, .. }), Some(Value::Sequence { items: e, .. })) => {
            if a.len() != e.len() {
                return Err(format!("{} tensors, expected {}", a.len(), e.len()));
            }
            for (k, (a, e)) in a.iter().zip(e).enumerate() {
                compare(a, e, rtol, atol).map_err(|m| format!("tensor {k}: {m}"))?;
            }
            Ok(())
        }
        (a, e) => Err(format!("got {}, expected {}", kind(a), kind(e))),
    }
}

fn kind(v: Option<&onnxc::ir::Value>) -> &'static str {
    match v {
        None => "an empty optional",
        Some(onnxc::ir::Value::Tensor(_)) => "a tensor",
        Some(onnxc::ir::Value::Sequence { .. }) => "a sequence",
        Some(onnxc::ir::Value::Optional(_)) => "an optional",
    }
}

fn read_pb(path: &Path) -> Result<Tensor, String> {
    driver::read_tensor(path)
        .map(|(_, t)| t)
        .map_err(|e| e.to_string())
}

fn sorted_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let k = name
                        .strip_prefix(prefix)?
                        .strip_suffix(".pb")?
                        .parse()
                        .ok()?;
                    Some((k, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|x| x.1).collect()
}

/// Runs `exe args…` with a timeout.
fn run_with_timeout(exe: &Path, args: &[String], timeout: Duration) -> Result<(), String> {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the compiled model: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    return Ok(());
                }
                let mut err = String::new();
                if let Some(mut s) = child.stderr.take() {
                    use std::io::Read;
                    let _ = s.read_to_string(&mut err);
                }
                return Err(match status.code() {
                    Some(c) => format!("exit {c}: {}", err.trim()),
                    None => format!("crashed ({status}): {}", err.trim()),
                });
            }
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Compiles `dir/model.onnx`, links it and checks every `test_data_set_*` in `dir`.
/// With `keep`, artifacts stay in that directory.
/// Compiles, links and runs one backend-suite case and compares its outputs with the
/// expected ones. The executable runs once per entry of `threads` (1: `NAME_run`, more:
/// `NAME_run_threaded` on that many threads); the first run is compared with the expected
/// outputs, every other one must give the same bytes.
pub fn run_case(
    dir: &Path,
    opts: &Options,
    rtol: f64,
    atol: f64,
    keep: Option<&Path>,
    threads: &[usize],
) -> Outcome {
    run_case_as(dir, opts, rtol, atol, keep, threads, Symbolic::No)
}

/// Which input dims a conformance run makes symbolic (`run_case_as`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symbolic {
    /// Every dim as the model declares it; symbolic ones fixed by the test data.
    No,
    /// The leading dims: a run-time batch (`with_symbolic_dims`).
    Batch,
    /// One dim (and each input dim of the same value), taken at run time up to `SEQ_BOUND`.
    Seq,
}

/// The symbol `Symbolic::Seq` gives its dim, and that dim's least bound (else twice the
/// data's value).
pub const SEQ_SYMBOL: &str = "S";
pub const SEQ_BOUND: i64 = 64;

/// The model of `dir` with symbolic input dims, as exporters' dynamic axes leave it; no
/// intermediate shapes declared.
///
/// `Symbolic::Batch`: the leading dim of every runtime input whose test data
/// (`test_data_set_0`) has the same leading dim as the first input's, and of every output
/// declared with that dim.
///
/// `Symbolic::Seq`: one dim, as a dynamic sequence or width axis. The last dim of at least
/// 2 of the first input's data is `v`; every input dim that is `v` in its data becomes
/// `SEQ_SYMBOL`, every other symbolic input dim takes its data's value, and outputs' dims
/// declared `v` become unknown (the compiler infers them). Only the symbolic dims are fixed
/// when the first input has no such dim. Returns the model and the bounds of the dims it
/// takes at run time (`Options::dim_bounds`): `SEQ_BOUND`, or `2v` above it.
pub fn with_symbolic_dims(
    dir: &Path,
    symbolic: Symbolic,
) -> Result<(Vec<u8>, Vec<(String, i64)>), String> {
    use onnxc_proto::tensor_shape_proto::dimension::Value;
    use prost::Message;
    let model = dir.join("model.onnx");
    let bytes = std::fs::read(&model).map_err(|e| format!("{}: {e}", model.display()))?;
    let mut m = onnxc_proto::ModelProto::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
    let g = m.graph.as_mut().ok_or("no graph")?;
    let inits: std::collections::HashSet<String> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    // Map inputs (MapProto files) have no dims.
    let tensor_inputs: Vec<bool> = g
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_deref().unwrap_or_default()))
        .map(|v| {
            !matches!(
                v.r#type.as_ref().and_then(|t| t.value.as_ref()),
                Some(onnxc_proto::type_proto::Value::MapType(_))
            )
        })
        .collect();
    // Each runtime input's shape in the test data (None: a map).
    let shapes: Vec<Option<Vec<i64>>> = sorted_files(&dir.join("test_data_set_0"), "input_")
        .iter()
        .zip(tensor_inputs.iter().chain(std::iter::repeat(&true)))
        .map(|(p, &tensor)| match tensor {
            true => read_pb(p).map(|t| Some(t.shape)),
            false => Ok(None),
        })
        .collect::<Result<_, _>>()?;
    let first = shapes.first().cloned().flatten().unwrap_or_default();
    let (batch, seq) = match symbolic {
        Symbolic::No => (None, None),
        Symbolic::Batch => (first.first().copied(), None),
        Symbolic::Seq => (None, first.iter().rev().copied().find(|&d| d >= 2)),
    };
    let symbolic_leading = |d: &onnxc_proto::tensor_shape_proto::Dimension| {
        batch.is_some() && d.value == batch.map(Value::DimValue)
            || d.value.is_none()
            || matches!(d.value, Some(Value::DimParam(_)))
    };
    g.value_info.clear();
    let inputs = g
        .input
        .iter_mut()
        .filter(|v| !inits.contains(v.name.as_deref().unwrap_or_default()));
    for (vi, data) in inputs.zip(shapes.iter().chain(std::iter::repeat(&None))) {
        let Some(onnxc_proto::type_proto::Value::TensorType(tt)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        let Some(shape) = tt.shape.as_mut() else {
            continue;
        };
        match (symbolic, data) {
            (Symbolic::Batch, Some(data)) => {
                if let Some(d) = shape.dim.first_mut()
                    && batch.is_some()
                    && data.first().copied() == batch
                    && symbolic_leading(d)
                {
                    d.value = Some(Value::DimParam("N".into()));
                }
            }
            (Symbolic::Seq, Some(data)) if data.len() == shape.dim.len() => {
                // One dim at run time: the others are fixed as the data has them.
                for (d, &x) in shape.dim.iter_mut().zip(data) {
                    if Some(x) == seq {
                        d.value = Some(Value::DimParam(SEQ_SYMBOL.into()));
                    } else if !matches!(d.value, Some(Value::DimValue(_))) {
                        d.value = Some(Value::DimValue(x));
                    }
                }
            }
            _ => {}
        }
    }
    for vi in g.output.iter_mut() {
        if let Some(onnxc_proto::type_proto::Value::TensorType(tt)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
            && let Some(shape) = tt.shape.as_mut()
        {
            if let Some(d) = shape.dim.first_mut()
                && symbolic == Symbolic::Batch
                && symbolic_leading(d)
            {
                d.value = Some(Value::DimParam("N".into()));
            }
            if let Some(v) = seq {
                for d in shape.dim.iter_mut() {
                    if d.value == Some(Value::DimValue(v)) {
                        d.value = None;
                    }
                }
            }
        }
    }
    let bounds = seq
        .map(|v| (SEQ_SYMBOL.to_string(), SEQ_BOUND.max(2 * v)))
        .into_iter()
        .collect();
    Ok((m.encode_to_vec(), bounds))
}

/// `run_case`; with `symbolic`, the model is compiled once with input dims symbolic
/// (`with_symbolic_dims`), so that it runs through `NAME_run_shaped` on the test data's
/// batch (a model computing its items independently) and, with `Symbolic::Seq`, on the
/// data's value of the dim taken at run time.
pub fn run_case_as(
    dir: &Path,
    opts: &Options,
    rtol: f64,
    atol: f64,
    keep: Option<&Path>,
    threads: &[usize],
    symbolic: Symbolic,
) -> Outcome {
    let mut tmp = match TempDir::new("case") {
        Ok(t) => t,
        Err(e) => return Outcome::RunFailed(e.to_string()),
    };
    if let Some(k) = keep {
        let _ = std::fs::create_dir_all(k);
        tmp.path = k.to_path_buf();
        tmp.keep = true;
    }
    let opts = Options {
        emit_main: true,
        ..opts.clone()
    };
    let compiled = if symbolic != Symbolic::No {
        match with_symbolic_dims(dir, symbolic) {
            Ok((bytes, dim_bounds)) => driver::compile_bytes(
                &bytes,
                &onnxc::frontend::tensor::DataDir::new(dir.to_path_buf()),
                "model.onnx",
                "model",
                &Options {
                    dim_bounds,
                    ..opts.clone()
                },
                None,
            ),
            Err(e) => return Outcome::Rejected(format!("cannot rewrite the model: {e}")),
        }
    } else {
        // Sequence and optional inputs (and symbolic dims) are fixed as the first data set's
        // files have them, as `onnxc run` fixes them.
        let model = dir.join("model.onnx");
        let args: Vec<driver::InputArg> = sorted_files(&dir.join("test_data_set_0"), "input_")
            .into_iter()
            .map(driver::InputArg::Positional)
            .collect();
        match driver::shapes_from_inputs(&model, &args, &opts) {
            Ok(opts) => driver::compile_file(&model, "model", &opts, None),
            Err(e) => Err(e),
        }
    };
    let c = match compiled {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Rejected(
                e.to_string()
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
        }
    };
    let obj = tmp.path.join("model.o");
    if let Err(e) = std::fs::write(&obj, &c.object) {
        return Outcome::RunFailed(e.to_string());
    }
    let exe = tmp.path.join("model");
    if let Err(e) = driver::link(&[obj], &exe) {
        return Outcome::RunFailed(e.to_string());
    }
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    for set in sets {
        let inputs = sorted_files(&set, "input_");
        let expected = sorted_files(&set, "output_");
        let args: Vec<driver::InputArg> = inputs
            .iter()
            .map(|p| driver::InputArg::Positional(p.clone()))
            .collect();
        let tensors = match driver::bind_inputs(&c.program, &args) {
            Ok(t) => t,
            Err(e) => return Outcome::Rejected(format!("inputs: {e}")),
        };
        let items = driver::batch_items(&c.program.inputs, &tensors);
        let mut argv = vec!["run".to_string(), "--items".into(), items.to_string()];
        let dims = driver::run_dim_values(&c.program, &tensors);
        // A value below the dim's least (where the compiled program is not the model's) is
        // refused by NAME_run_shaped: the model is not compiled for this data.
        if let Some((d, v)) = c
            .program
            .run_dims
            .iter()
            .zip(&dims)
            .find(|(d, v)| **v < d.least)
        {
            return Outcome::Rejected(format!(
                "dim '{}' is taken at run time from {} to {}; the data has {v}",
                d.name, d.least, d.bound
            ));
        }
        if !dims.is_empty() {
            let values: Vec<String> = dims.iter().map(i64::to_string).collect();
            argv.extend(["--dims".to_string(), values.join(",")]);
        }
        for (k, t) in tensors.iter().enumerate() {
            let p = tmp.path.join(format!("input_{k}.bin"));
            if let Err(e) = std::fs::write(&p, t.abi_bytes()) {
                return Outcome::RunFailed(e.to_string());
            }
            argv.push(p.display().to_string());
        }
        argv.push("--out".into());
        let mut first: Option<Vec<onnxc::ir::Tensor>> = None;
        for &t in threads {
            let out_dir = tmp.path.join(format!("threads{t}"));
            if let Err(e) = std::fs::create_dir_all(&out_dir) {
                return Outcome::RunFailed(e.to_string());
            }
            let mut argv = argv.clone();
            argv.push(out_dir.display().to_string());
            argv.push("--threads".into());
            argv.push(t.to_string());
            if let Err(e) = run_with_timeout(&exe, &argv, Duration::from_secs(120)) {
                return Outcome::RunFailed(format!("{t} threads: {e}"));
            }
            let mut outs = Vec::new();
            for (k, d) in c.program.public_outputs().iter().enumerate() {
                match driver::read_output(&out_dir, k, d, items) {
                    Ok(t) => outs.push(t),
                    Err(e) => return Outcome::RunFailed(e.to_string()),
                }
            }
            match &first {
                None => first = Some(outs),
                Some(f) => {
                    let same = |a: &onnxc::ir::Tensor, b: &onnxc::ir::Tensor| {
                        a.shape == b.shape && a.data == b.data
                    };
                    if let Some(k) = (0..outs.len()).find(|&k| !same(&outs[k], &f[k])) {
                        return Outcome::Mismatch(format!(
                            "output {k} with {t} threads differs from {} thread(s)",
                            threads[0]
                        ));
                    }
                }
            }
        }
        let Some(first) = first else {
            return Outcome::RunFailed("no thread count to run".into());
        };
        let groups = &c.program.output_groups;
        if expected.len() != groups.len() {
            return Outcome::Mismatch(format!(
                "{} outputs, expected {}",
                groups.len(),
                expected.len()
            ));
        }
        let actual = driver::group_outputs(&c.program, first);
        for (k, ((g, e), (_, actual))) in groups.iter().zip(&expected).zip(actual).enumerate() {
            let sequence = matches!(g.kind, onnxc::ir::graph::IoKind::Sequence(_));
            let exp = match driver::read_value(e, g.optional, sequence) {
                Ok(v) => v,
                Err(m) => return Outcome::Rejected(format!("expected output: {m}")),
            };
            if let Err(m) = compare_values(&actual, &exp, rtol, atol) {
                return Outcome::Mismatch(format!("output {k} '{}': {m}", g.name));
            }
        }
    }
    Outcome::Pass
}

/// One line of the suite index written by `tests/conformance/gen_suite.py`.
#[derive(Clone, Debug)]
pub struct Case {
    pub kind: String,
    pub name: String,
    pub dir: PathBuf,
    pub rtol: f64,
    pub atol: f64,
}

impl Case {
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

pub fn load_cases(suite: &Path) -> Result<Vec<Case>, String> {
    let index = suite.join("cases.tsv");
    let text = std::fs::read_to_string(&index).map_err(|e| {
        format!(
            "{}: {e} (generate the suite with `make suite`)",
            index.display()
        )
    })?;
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() != 5 {
                return Err(format!("bad line in {}: {l}", index.display()));
            }
            Ok(Case {
                kind: f[0].into(),
                name: f[1].into(),
                dir: PathBuf::from(f[2]),
                rtol: f[3].parse().map_err(|_| format!("bad rtol in {l}"))?,
                atol: f[4].parse().map_err(|_| format!("bad atol in {l}"))?,
            })
        })
        .collect()
}

/// An empty scratch directory for one test: `$TMPDIR/onnxc-test-PID-NAME`, removed when the
/// returned guard drops. A test that panics keeps its directory (and says where) so the
/// objects and outputs it left can be inspected.
pub fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("onnxc-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create a scratch directory");
    Scratch(d)
}

/// A test's scratch directory; see [`scratch`].
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch directory kept: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

/// The workspace root (this package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the generated suite lives: `$ONNXC_SUITE` or `.cache/onnx-suite`.
pub fn suite_dir() -> PathBuf {
    std::env::var_os("ONNXC_SUITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/onnx-suite"))
}

/// The `onnxc` binary built alongside the tests (`target/<profile>/onnxc`).
/// `onnxc run ARGS… --output-dir OUT` (OUT emptied first), which must succeed; returns the
/// outputs in graph order.
pub fn run_model<S: AsRef<std::ffi::OsStr>>(args: &[S], out: &Path) -> Vec<Tensor> {
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(onnxc_bin())
        .arg("run")
        .args(args)
        .arg("--output-dir")
        .arg(out)
        .output()
        .expect("spawn onnxc");
    assert!(
        o.status.success(),
        "onnxc run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (0..)
        .map(|k| out.join(format!("output_{k}.pb")))
        .take_while(|p| p.exists())
        .map(|p| driver::read_tensor(&p).expect("read an output").1)
        .collect()
}

pub fn onnxc_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = dir.join(format!("onnxc{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run the tests with `cargo test --workspace` (or build onnxc first)",
        bin.display()
    );
    bin
}

/// Element types onnxc stores, by their ONNX schema names.
const STORABLE: &[&str] = &[
    "float",
    "double",
    "float16",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "float8e4m3fn",
    "float8e4m3fnuz",
    "float8e5m2",
    "float8e5m2fnuz",
    "float8e8m0",
    "float4e2m1",
    "int4",
    "uint4",
    "int2",
    "uint2",
];

/// Renders `docs/supported-ops.md` from the onnx schemas and case/op tables of the generated
/// suite, onnxc's op table and the committed manifest.
pub fn supported_ops_markdown(
    suite: &Path,
    manifest: &std::collections::BTreeSet<String>,
) -> Result<String, String> {
    use std::collections::BTreeMap;
    use std::fmt::Write;
    let read = |name: &str| {
        std::fs::read_to_string(suite.join(name))
            .map_err(|e| format!("{}: {e} (run `make suite`)", suite.join(name).display()))
    };
    let ops_tsv = read("ops.tsv")?;
    let case_ops = read("case_ops.tsv")?;
    // (passing, total) per "domain:op".
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut total_cases = 0;
    for line in case_ops.lines() {
        let (case, ops) = line.split_once('\t').unwrap_or((line, ""));
        // The project's own cases (kind `onnxc`) are not part of the ONNX suite's counts.
        if case.starts_with("onnxc/") {
            continue;
        }
        total_cases += 1;
        let pass = manifest.contains(case);
        for op in ops.split(',').filter(|o| !o.is_empty()) {
            let e = counts.entry(op.to_string()).or_default();
            e.1 += 1;
            if pass {
                e.0 += 1;
            }
        }
    }
    let notes: BTreeMap<&str, &str> = onnxc::frontend::registry::NOTES.iter().copied().collect();
    let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut with_schema = std::collections::BTreeSet::new();
    let mut supported = 0;
    let mut in_default = 0;
    for line in ops_tsv.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 6 {
            return Err(format!(
                "bad ops.tsv line: {line} (regenerate the suite: make clean-suite suite)"
            ));
        }
        let (domain, name, first, latest, types, deprecated) =
            (f[0], f[1], f[2], f[3], f[4], f[5] == "1");
        let dom = if domain == "ai.onnx" { "" } else { domain };
        if dom.is_empty() {
            with_schema.insert(name.to_string());
        }
        let ok = onnxc::frontend::registry::lookup(dom, name).is_some();
        if domain == "ai.onnx" {
            in_default += 1;
            if ok {
                supported += 1;
            }
        }
        let stored: Vec<&str> = types.split(',').filter(|t| STORABLE.contains(t)).collect();
        let (p, t) = counts
            .get(&format!("{domain}:{name}"))
            .copied()
            .unwrap_or((0, 0));
        let row = format!(
            "| {name}{} | {} | {} | {} | {} |",
            if deprecated { " (deprecated)" } else { "" },
            if ok {
                format!("{first}–{latest}")
            } else {
                "—".into()
            },
            if ok { stored.join(", ") } else { String::new() },
            if t == 0 {
                "—".into()
            } else {
                format!("{p}/{t}")
            },
            notes
                .get(name)
                .copied()
                .unwrap_or(if ok { "" } else { "not supported" })
        );
        rows.entry(domain.to_string()).or_default().push(row);
    }
    let passing = manifest.iter().filter(|c| !c.starts_with("onnxc/")).count();
    let own = manifest.len() - passing;
    let mut md = String::new();
    let _ = writeln!(md, "# Supported ONNX operators\n");
    let _ = writeln!(
        md,
        "Generated by `cargo run --release --bin conformance -- --docs` from the schemas of the pinned onnx \
         package, onnxc's op table (`compiler/src/frontend/registry.rs`) and `tests/conformance/manifest.txt`. \
         Do not edit by hand: `tests/docs.rs` fails when this file is stale.\n"
    );
    let _ = writeln!(
        md,
        "- {supported} of {in_default} operators of the default domain (`ai.onnx`) are supported."
    );
    let _ = writeln!(
        md,
        "- {passing} of {total_cases} ONNX backend test cases pass (at -O2 and -O0), and the \
         project's {own} own cases (`tests/conformance/onnxc_cases.py`)."
    );
    let _ = writeln!(
        md,
        "- *Opsets*: every version of the operator is accepted; semantics follow the model's `opset_import`.\n\
         - *Element types*: those the operator allows that onnxc can store, strings left out (the string and ONNX-ML operators that take them say so in their notes); no complex types.\n\
         - *Cases*: suite cases using the operator that pass / all suite cases using it.\n"
    );
    // Ops onnxc builds that the pinned onnx no longer describes: the experimental ops of
    // opsets 1-9.
    let legacy: Vec<&str> = onnxc::frontend::registry::ONNX_OPS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !with_schema.contains(*n))
        .collect();
    for (domain, list) in &rows {
        let _ = writeln!(md, "## {domain}\n");
        let _ = writeln!(
            md,
            "| Operator | Opsets | Element types | Cases | Notes |\n|---|---|---|---|---|"
        );
        for r in list {
            let _ = writeln!(md, "{r}");
        }
        md.push('\n');
    }
    if !legacy.is_empty() {
        let _ = writeln!(
            md,
            "## Experimental ops of opsets 1–9\n\nRemoved from ONNX in opset 10 and without a schema in \
             the pinned onnx package, but used by exports of that time (the model zoo's Tiny YOLOv2 \
             starts with ImageScaler); onnxc builds them as onnxruntime runs them (own case \
             `test_experimental_ops`): {}.\n",
            legacy.join(", ")
        );
    }
    let ms_notes: BTreeMap<&str, &str> = onnxc::frontend::registry::MICROSOFT_NOTES
        .iter()
        .copied()
        .collect();
    let _ = writeln!(
        md,
        "## onnxruntime's contrib ops (`com.microsoft`)\n\nThe ops onnxruntime's quantizer \
         (QOperator format, dynamic quantization), its transformer optimizer and its graph \
         optimizations write, and the attention and block-quantized ops of LLM exports, \
         decomposed into onnxc's core ops with the semantics of onnxruntime's operator \
         documentation and CPU kernels. Own cases `test_qoperator_contrib` and `test_ms_*` \
         (each op, its attributes and optional inputs), `test_bert_*`/`test_gpt2_optimized` \
         (models fused by `onnxruntime.transformers.optimizer`, dynamically quantized, or saved \
         after onnxruntime's extended optimizations) and `test_light_*_{{qop,qdq,dyn}}` (zoo CNNs \
         quantized by onnxruntime's quantizer). Quantized results are the documented formulas, \
         exact (round half to even, saturated); onnxruntime's x86 kernels approximate some in \
         fixed point or float32, off by one step at some values.\n"
    );
    let _ = writeln!(md, "| Operator | Notes |\n|---|---|");
    let ops = onnxc::frontend::registry::MICROSOFT_OPS
        .iter()
        .chain(onnxc::frontend::registry::ORT_DEFAULT_DOMAIN_OPS);
    // SimplifiedLayerNormalization is in both tables: listed once.
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in ops.filter(|(n, _)| seen.insert(*n)) {
        let _ = writeln!(
            md,
            "| {name} | {} |",
            ms_notes.get(name).copied().unwrap_or("")
        );
    }
    Ok(md)
}

/// The manifest of passing cases: `$ONNXC_MANIFEST` or `tests/conformance/manifest.txt`.
pub fn manifest_path() -> PathBuf {
    std::env::var_os("ONNXC_MANIFEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("tests/conformance/manifest.txt"))
}

/// The manifest of passing cases (`manifest_path`). A missing or unreadable manifest is an
/// error, never an empty set: checking against nothing would pass.
pub fn load_manifest() -> Result<std::collections::BTreeSet<String>, String> {
    let path = manifest_path();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the manifest {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}
