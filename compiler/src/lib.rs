//! onnxc: an ahead-of-time compiler from ONNX models to native object files.
//!
//! Pipeline (one type per stage, each dumpable with `--emit`):
//! bytes → `onnxc_proto::ModelProto` (frontend) → `ir::Graph` (passes) → `schedule::Schedule`
//! → `loops::Program` → Cranelift → object file + C header (codegen).

pub mod error;
pub mod frontend;
pub mod ir;
pub mod kernels;
pub mod passes;

pub use error::{Error, Result};
pub mod codegen;
pub mod driver;
pub mod loops;
pub mod schedule;
