//! onnxc runtime support: the small static library (`libonnxc_runtime.a`, C ABI) that
//! onnxc-compiled models link against, and its Rust API for the compiler.
//!
//! Contents: workspace allocation, GEMM and convolution kernels, half-precision conversion,
//! error strings, and the driver used by `onnxc run` / `onnxc bench`.
//! **Invariant:** no global mutable state; every entry point is reentrant.

// Every unsafe block states why it is sound (a `// SAFETY:` comment), as Cranelift and
// rust-analyzer require.
#![warn(clippy::undocumented_unsafe_blocks)]

/// Instruction-set levels the kernels can use, capped by the environment variable
/// `ONNXC_RUNTIME_ISA` (`baseline`, `avx2` or `avx512`; read once per process). The cap exists
/// so that the AVX2+FMA and portable kernels can be tested on a machine that has AVX-512; an
/// unset or unknown value means no cap.
pub mod isa {
    /// 0 baseline, 1 AVX2+FMA, 2 AVX-512.
    pub fn cap() -> u8 {
        static CAP: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
        *CAP.get_or_init(|| match std::env::var("ONNXC_RUNTIME_ISA").as_deref() {
            Ok("baseline") => 0,
            Ok("avx2") => 1,
            _ => 2,
        })
    }

    /// The level this process uses: the CPU's best, capped by `cap()`; detected once (the
    /// kernels ask per call, so this is one relaxed load after the first).
    #[cfg(target_arch = "x86_64")]
    fn level() -> u8 {
        use std::sync::atomic::{AtomicU8, Ordering};
        // u8::MAX: not detected yet.
        static LEVEL: AtomicU8 = AtomicU8::new(u8::MAX);
        let l = LEVEL.load(Ordering::Relaxed);
        if l != u8::MAX {
            return l;
        }
        let has512 = std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("fma");
        let has2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        let hw = if has512 {
            2
        } else if has2 {
            1
        } else {
            0
        };
        let l = hw.min(cap());
        LEVEL.store(l, Ordering::Relaxed);
        l
    }

    /// AVX-512 (F, BW, DQ, VL) and FMA are present and allowed.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn avx512() -> bool {
        level() >= 2
    }

    /// AVX2 and FMA are present and allowed.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn avx2() -> bool {
        level() >= 1
    }

    /// Whether this CPU runs the 512-bit kernels: the `ConvGeometry::wide_simd` layout
    /// choice for a model compiled for the host.
    pub fn wide_simd() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            avx512()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The CPU is an AMD one (CPUID vendor "AuthenticAMD"); detected once. Some schedule
    /// choices that do not change any data layout were measured to go opposite ways on
    /// AMD (Zen 3/5) and Intel (Sapphire/Emerald Rapids) cores and follow the vendor, as
    /// onnxruntime's MLAS does for some of its kernels.
    #[cfg(target_arch = "x86_64")]
    pub fn amd() -> bool {
        static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AMD.get_or_init(|| {
            let r = std::arch::x86_64::__cpuid(0);
            // "AuthenticAMD" as EBX, EDX, ECX.
            (r.ebx, r.edx, r.ecx) == (0x6874_7541, 0x6974_6E65, 0x444D_4163)
        })
    }
}

/// `v` clamped to [lo, hi] with NaN passing through, as ONNX Relu and Clip (and the generated
/// code's own `select`-based clamps) define it; every kernel epilogue uses this order (the
/// SIMD ones as `min(hi, max(lo, v))`, whose second operand wins on NaN).
#[inline(always)]
pub(crate) fn clamp_ep(v: f32, lo: f32, hi: f32) -> f32 {
    let t = if v < lo { lo } else { v };
    if t > hi { hi } else { t }
}

/// The optional operand `p` (null: none, as a kernel's bias or residual) advanced by `n`
/// elements; null stays null.
///
/// # Safety
/// As `p.add(n)` when `p` is not null.
#[inline(always)]
pub(crate) unsafe fn opt_add<T>(p: *const T, n: usize) -> *const T {
    if p.is_null() {
        p
    } else {
        // SAFETY: the caller's contract.
        unsafe { p.add(n) }
    }
}

/// The `[lo, hi]` a kernel entry point's `clamp` argument points to; null: no clamp.
///
/// # Safety
/// `clamp` is null or points to two floats.
pub(crate) unsafe fn clamp_bounds(clamp: *const f32) -> (f32, f32) {
    if clamp.is_null() {
        (f32::NEG_INFINITY, f32::INFINITY)
    } else {
        // SAFETY: caller contract.
        unsafe { (*clamp, *clamp.add(1)) }
    }
}

/// Seeded pseudo-random test data in [-1, 1) (xorshift), shared by the kernels' tests.
#[cfg(test)]
pub(crate) fn test_rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The test binary's allocator: the system's, counting each thread's allocations, so a test
/// can check that a kernel call allocates nothing (`allocations_during`).
#[cfg(test)]
mod counting_alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNT: Cell<usize> = const { Cell::new(0) };
    }

    fn count() {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }

    struct Counting;

    // SAFETY: every method forwards to the system allocator with the caller's arguments.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            count();
            // SAFETY: forwarded.
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            count();
            // SAFETY: forwarded.
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            count();
            // SAFETY: forwarded.
            unsafe { System.realloc(p, l, new) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: forwarded.
            unsafe { System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static ALLOC: Counting = Counting;

    /// `f()`'s result and the allocations the calling thread made while it ran.
    pub(crate) fn allocations_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
        let before = COUNT.with(Cell::get);
        let r = f();
        (r, COUNT.with(Cell::get) - before)
    }
}
#[cfg(test)]
pub(crate) use counting_alloc::allocations_during;

/// erf in f64: Taylor series below 3, erfc's continued fraction above.
#[cfg(test)]
pub(crate) fn erf_f64(x: f64) -> f64 {
    if x.is_infinite() {
        return x.signum();
    }
    let t = x.abs();
    let r = if t < 3.0 {
        // Taylor series: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)).
        let mut sum = 0.0;
        let mut term = t;
        let mut n = 0.0;
        while term.abs() > 1e-17 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -t * t / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // Continued fraction for erfc.
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (t + f);
        }
        1.0 - (-t * t).exp() / (std::f64::consts::PI.sqrt() * (t + f))
    };
    r.copysign(x)
}

macro_rules! multiversion {
    ($f:ident($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
            unsafe fn v512<T>(f: impl FnOnce() -> T) -> T { f() }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn v256<T>(f: impl FnOnce() -> T) -> T { f() }
            if $crate::isa::avx512() {
                // SAFETY: the features were detected.
                unsafe { v512(|| $f($($arg),*)) }
            } else if $crate::isa::avx2() {
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
pub mod activation;
pub mod attention;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
pub mod conv;
pub mod det;
pub mod driver;
pub mod gather;
pub mod gelu;
pub mod gemm;
pub mod inverse;
pub mod kernels;
pub mod linear_attention;
pub mod lookup;
pub mod lowp;
pub mod map;
pub mod model;
pub mod nchwc;
pub mod par;
pub mod params;
pub mod pool;
pub mod qadd;
pub mod qconv;
pub mod quantize;
pub mod recurrent;
pub mod regex;
pub mod requantize;
pub mod resize;
pub mod roi_align;
pub mod select;
pub mod shaped;
pub mod simd;
pub mod softmax;
pub mod string_make;
pub mod strings;
pub mod subbyte;
pub mod svm;
pub mod text_tfidf;
pub mod tfidf;
pub mod tokenize;
pub mod topk;
pub mod tree;
pub mod winograd;
