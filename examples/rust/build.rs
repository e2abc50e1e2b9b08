//! Compiles `../models/tiny_cnn.onnx` into `OUT_DIR` and generates its Rust module
//! (`tiny_cnn.rs`): one call of onnxc-build, which also links the model.
fn main() {
    onnxc_build::Model::new("../models/tiny_cnn.onnx")
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
}
