//! Elementwise activations over float32 buffers (`onnxc_activation_f32`), written once over
//! the SIMD layer: `sigmoid(αx)`, SiLU/Swish `x·sigmoid(αx)` (QuickGELU with α = 1.702),
//! `tanh(x)`, HardSigmoid `clamp(αx + β, 0, 1)`, HardSwish `x·clamp(αx + β, 0, 1)` and
//! GELU's tanh approximation `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`. The
//! compiler calls it for maps that are exactly one of these forms over one contiguous
//! operand (`loops::lower`), where 128-bit generated code would be several times slower;
//! anything fused around them stays generated code. Same formulas and constants as
//! `codegen::vmath` (`simd::math`), so results agree with the generated code's to a few ulp;
//! NaN propagates, ±∞ give the limits the formulas give (`x·sigmoid(x)` at −∞ is −∞·0 = NaN,
//! as written).

use crate::par::{Par, Threads};
use crate::simd::{self, Simd, Walk, math};

/// `y = sigmoid(α·x) = 1 / (1 + e^{−αx})`.
pub const SIGMOID: i64 = 0;
/// `y = x·sigmoid(α·x)`.
pub const SILU: i64 = 1;
/// `y = tanh(x)` (α unused).
pub const TANH: i64 = 2;
/// `y = max(0, min(1, α·x + β))` (the product and the sum rounded apart, as the generated
/// code computes them; NaN propagates).
pub const HARDSIGMOID: i64 = 3;
/// `y = x·max(0, min(1, α·x + β))`.
pub const HARDSWISH: i64 = 4;
/// `y = ½·x·(1 + erf(x/√2))` (α, β unused): `gelu::gelu_f32`'s walk, not a C ABI kind.
pub(crate) const GELU: i64 = 5;
/// `y = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` (α, β unused; `math::gelu_tanh`): GPT-2's
/// GELU, onnxruntime's FastGelu, ONNX Gelu with `approximate = "tanh"`.
pub const GELU_TANH: i64 = 6;

/// `y[i] = act(x[i])` for `i < n`; `x` and `y` may be the same buffer. `p` holds α (and β
/// for the hard kinds).
///
/// # Safety
/// `x` and `y` hold `n` floats; `kind` is one of the constants above.
pub unsafe fn activation_f32(kind: i64, p: [f32; 2], x: *const f32, y: *mut f32, n: usize) {
    // SAFETY: forwarded.
    unsafe { simd::dispatch(Activation { kind, p, x, y, n }) }
}

/// `activation_f32` over `par`'s workers, in chunks of whole 64-byte lines (so every chunk
/// but the last is whole vectors, and the last ends where the whole buffer does).
///
/// # Safety
/// As `activation_f32`.
pub unsafe fn activation_par(
    par: Par,
    kind: i64,
    p: [f32; 2],
    x: *const f32,
    y: *mut f32,
    n: usize,
) {
    const LINE: usize = 16;
    // SAFETY: each task reads and writes its own elements.
    unsafe {
        par.for_ranges(n.div_ceil(LINE), LINE * 8, &|r, _| {
            let (a, b) = (r.start * LINE, (r.end * LINE).min(n));
            activation_f32(kind, p, x.add(a), y.add(a), b - a)
        })
    }
}

/// C ABI entry point (`kernels::ACTIVATION_F32`): `params` points to `[α, β]`.
///
/// # Safety
/// As `activation_f32`; `params` points to two floats; `n ≥ 0`; `threads` as
/// `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_activation_f32(
    kind: i64,
    params: *const f32,
    x: *const f32,
    y: *mut f32,
    n: i64,
    threads: *const Threads,
) {
    // SAFETY: forwarded.
    unsafe {
        activation_par(
            Par::from_raw(threads),
            kind,
            [*params, *params.add(1)],
            x,
            y,
            n.max(0) as usize,
        )
    }
}

/// The walk: one loop per kind, each over `simd::unary`.
#[derive(Clone, Copy)]
pub(crate) struct Activation {
    pub kind: i64,
    pub p: [f32; 2],
    pub x: *const f32,
    pub y: *mut f32,
    pub n: usize,
}

impl Walk for Activation {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let Activation { kind, p, x, y, n } = self;
        let (alpha, beta) = (s.splat(p[0]), s.splat(p[1]));
        // Constants first: `min`/`max` return their second operand on NaN.
        let hard = {
            #[inline(always)]
            |v| s.max(s.zero(), s.min(s.splat(1.0), s.add(s.mul(v, alpha), beta)))
        };
        // SAFETY: every arm reads x and writes y, which hold n floats each (the caller's
        // contract); `simd::unary` stays inside them.
        unsafe {
            match kind {
                SIGMOID => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| math::sigmoid(s, alpha, v),
                ),
                SILU => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| s.mul(v, math::sigmoid(s, alpha, v)),
                ),
                HARDSIGMOID => simd::unary(s, x, y, n, hard),
                GELU_TANH => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| math::gelu_tanh(s, v),
                ),
                GELU => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| math::gelu(s, v),
                ),
                HARDSWISH => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| s.mul(v, hard(v)),
                ),
                _ => simd::unary(
                    s,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |v| math::tanh(s, v),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In f64, from the float32 product α·x the kernel (and any float32 evaluation) starts
    /// from: its rounding is amplified by e^t's slope, not the kernel's error.
    fn reference(kind: i64, [alpha, beta]: [f32; 2], v: f32) -> f64 {
        let x = v as f64;
        let t = (alpha * v) as f64;
        let s = 1.0 / (1.0 + (-t).exp());
        let h = || ((alpha * v + beta) as f64).clamp(0.0, 1.0);
        match kind {
            SIGMOID => s,
            SILU => x * s,
            HARDSIGMOID => h(),
            HARDSWISH => x * h(),
            GELU_TANH => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
            _ => x.tanh(),
        }
    }

    /// Against f64 formulas on every ISA path (through the ISA cap in `make test`): a
    /// dense sweep with every tail length, the saturating ranges, and special values.
    #[test]
    fn matches_reference() {
        let mut xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) / 150.0).collect();
        xs.extend([
            0.0, -0.0, 1e-30, -1e-30, 0.6249, 0.6251, 9.0, 9.2, -9.2, 50.0, -50.0,
        ]);
        xs.extend([
            88.0, -88.0, 89.0, -89.0, 104.0, -104.0, 1e30, -1e30, 3.0, -3.0, 2.5,
        ]);
        let kinds = [
            (SIGMOID, [1.0f32, 0.0]),
            (SILU, [1.0, 0.0]),
            (SILU, [1.702, 0.0]),
            (TANH, [1.0, 0.0]),
            (HARDSIGMOID, [0.2, 0.5]),
            (HARDSIGMOID, [1.0 / 6.0, 0.5]),
            (HARDSWISH, [1.0 / 6.0, 0.5]),
            (GELU_TANH, [0.0, 0.0]),
        ];
        for &(kind, p) in &kinds {
            for n in [xs.len(), 1, 7, 8, 15, 17, 33] {
                let x = &xs[..n];
                for (isa, got) in run_all(kind, p, x) {
                    for (i, (&v, &got)) in x.iter().zip(&got).enumerate() {
                        let want = reference(kind, p, v);
                        let err = (got as f64 - want).abs();
                        // Without FMA (the portable lanes) the polynomials round twice.
                        let tol = if isa.starts_with("lanes") { 8e-7 } else { 4e-7 };
                        // GELU's `1 + tanh(…)` cancels for negative x: its error is tanh's
                        // (an ulp of 1) times ½|x|, not relative to the result.
                        let floor = if kind == GELU_TANH {
                            2e-7 * (1.0 + v.abs() as f64)
                        } else {
                            1e-37
                        };
                        assert!(
                            err <= tol * want.abs().max(1e-30) + floor,
                            "{isa} kind {kind} {p:?} [{i}] x = {v}: {got} vs {want}"
                        );
                    }
                }
            }
            // Special values, as the formulas give them.
            let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
            for (isa, y) in run_all(kind, p, &sp) {
                assert!(y[0].is_nan(), "{isa} kind {kind}: NaN gives {}", y[0]);
                match kind {
                    SIGMOID | HARDSIGMOID => assert_eq!((y[1], y[2]), (1.0, 0.0)),
                    SILU => assert!(y[1] == f32::INFINITY && y[2].is_nan(), "{y:?}"),
                    HARDSWISH => assert!(y[1] == f32::INFINITY && y[2].is_nan(), "{y:?}"),
                    // ½·(−∞)·(1 + tanh(−∞)) = −∞·0, as written.
                    GELU_TANH => assert!(y[1] == f32::INFINITY && y[2].is_nan(), "{y:?}"),
                    _ => assert_eq!((y[1], y[2]), (1.0, -1.0)),
                }
            }
        }
    }

    /// The activation of `x` by every implementation this machine runs.
    fn run_all(kind: i64, p: [f32; 2], x: &[f32]) -> Vec<(String, Vec<f32>)> {
        let mut out = Vec::new();
        let mut y = vec![f32::NAN; x.len()];
        let w = Activation {
            kind,
            p,
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            n: x.len(),
        };
        // SAFETY: x and y hold n floats.
        unsafe { simd::for_each_isa(w, |isa, ()| out.push((isa.to_string(), y.clone()))) };
        out
    }

    /// In place (`x` and `y` the same buffer), as the compiler may call it.
    #[test]
    fn in_place() {
        let mut v: Vec<f32> = (0..100).map(|i| i as f32 / 10.0 - 5.0).collect();
        let want: Vec<f32> = v
            .iter()
            .map(|&x| reference(SILU, [1.0, 0.0], x) as f32)
            .collect();
        let p = v.as_mut_ptr();
        // SAFETY: p points to v's v.len() floats, used as both x and y.
        unsafe { activation_f32(SILU, [1.0, 0.0], p, p, v.len()) };
        for (g, w) in v.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{g} vs {w}");
        }
    }

    /// The entry point on 2, 3 and 5 threads gives the sequential run's bits, for every kind
    /// and lengths around the 64-byte chunk boundaries.
    #[test]
    fn threads_give_the_same_bits() {
        for n in [1usize, 15, 16, 17, 100, 1000, 4099] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 6.0).collect();
            for kind in [SIGMOID, SILU, TANH, HARDSIGMOID, HARDSWISH, GELU_TANH] {
                let p = [1.3f32, 0.5];
                crate::par::same_bits_on_every_pool(&format!("kind {kind} n {n}"), |_, threads| {
                    let mut y = vec![f32::NAN; n];
                    // SAFETY: x and y hold n floats, p two.
                    unsafe {
                        onnxc_activation_f32(
                            kind,
                            p.as_ptr(),
                            x.as_ptr(),
                            y.as_mut_ptr(),
                            n as i64,
                            threads,
                        )
                    };
                    y
                });
            }
        }
    }
}
