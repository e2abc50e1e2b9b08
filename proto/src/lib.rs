//! ONNX protobuf types (`onnx.proto`, proto2), generated at build time by prost.
//!
//! Only `onnxc::frontend` uses these types; the rest of the compiler sees its own IR.
#![allow(clippy::all, reason = "generated code")]
include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
