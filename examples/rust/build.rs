//! Compiles `../models/tiny_cnn.onnx` with onnxc into a static library this crate links.
//! `ONNXC` names the onnxc binary (default: the workspace's release build).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let onnxc = std::env::var("ONNXC").map(PathBuf::from).unwrap_or_else(|_| manifest.join("../../target/release/onnxc"));
    let model = manifest.join("../models/tiny_cnn.onnx");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let obj = out.join("tiny_cnn.o");
    let status = Command::new(&onnxc)
        .arg(&model)
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); build onnxc first or set ONNXC", onnxc.display()));
    assert!(status.success(), "onnxc failed to compile {}", model.display());
    let status = Command::new("ar").arg("crs").arg(out.join("libtiny_cnn.a")).arg(&obj).status().expect("ar");
    assert!(status.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=tiny_cnn");
    println!("cargo:rerun-if-changed={}", model.display());
    println!("cargo:rerun-if-changed={}", onnxc.display());
    println!("cargo:rerun-if-env-changed=ONNXC");
}
