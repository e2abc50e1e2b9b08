//! onnxc runtime support: the small static library (`libonnxc_runtime.a`, C ABI) that
//! onnxc-compiled models link against, and its Rust API for the compiler.
//!
//! Contents: workspace allocation, GEMM and convolution kernels, half-precision conversion,
//! error strings, and the driver used by `onnxc run` / `onnxc bench`.
//! **Invariant:** no global mutable state; every entry point is reentrant.

/// Runs `$body` (an unsafe expression) compiled for the best of AVX-512 / AVX2+FMA / baseline
/// this CPU supports, so plain-Rust loops in it are auto-vectorized for that width.
/// `$f` is a `#[inline(always)]` function; `$args` its arguments.
macro_rules! multiversion {
    ($f:ident($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
            unsafe fn v512<T>(f: impl FnOnce() -> T) -> T { f() }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn v256<T>(f: impl FnOnce() -> T) -> T { f() }
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512dq") && std::is_x86_feature_detected!("avx512vl") {
                // SAFETY: the features were detected.
                unsafe { v512(|| $f($($arg),*)) }
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                // SAFETY: the features were detected.
                unsafe { v256(|| $f($($arg),*)) }
            } else {
                $f($($arg),*)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $f($($arg),*)
        }
    }};
}
pub(crate) use multiversion;

pub mod abi;
pub mod conv;
pub mod driver;
pub mod gemm;
pub mod pool;
pub mod winograd;
