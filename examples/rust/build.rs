//! Compiles `../models/tiny_cnn.onnx`, `../models/tiny_cnn_batch.onnx` (the same model with
//! a dynamic batch axis) and `../models/tiny_detector.onnx` (outputs with as many rows as
//! boxes survive NonMaxSuppression) into `OUT_DIR` and generates their Rust modules
//! (`tiny_cnn.rs`, …): one call of onnxc-build each, which also links them.
fn main() {
    for model in [
        "../models/tiny_cnn.onnx",
        "../models/tiny_cnn_batch.onnx",
        "../models/tiny_detector.onnx",
    ] {
        onnxc_build::Model::new(model)
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
