//! Compiles `../models/tiny_cnn.onnx` and `../models/tiny_cnn_batch.onnx` (the same model
//! with a dynamic batch axis) into `OUT_DIR` and generates their Rust modules
//! (`tiny_cnn.rs`, `tiny_cnn_batch.rs`): one call of onnxc-build each, which also links them.
fn main() {
    for model in ["../models/tiny_cnn.onnx", "../models/tiny_cnn_batch.onnx"] {
        onnxc_build::Model::new(model)
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
