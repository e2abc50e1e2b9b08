//! onnxc runtime support: the small static library (`libonnxc_runtime.a`, C ABI) that
//! onnxc-compiled models link against, and its Rust API for the compiler.
//!
//! Contents: workspace allocation, GEMM and convolution kernels, half-precision conversion,
//! error strings, and the driver used by `onnxc run` / `onnxc bench`.
//! **Invariant:** no global mutable state; every entry point is reentrant.

pub mod abi;
pub mod conv;
pub mod driver;
pub mod gemm;
pub mod pool;
pub mod winograd;
