//! Generates the prost types for `onnx.proto` without a `protoc` binary:
//! `protox` parses the schema in-process and hands prost-build a descriptor set.
fn main() {
    println!("cargo:rerun-if-changed=onnx.proto");
    let fds = protox::compile(["onnx.proto"], ["."]).expect("proto/onnx.proto must parse");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("prost-build code generation for onnx.proto");
}
