//! Requantization of exact accumulators to 8 bits: the QLinearConv and QLinearMatMul
//! results onnxc computes through the float32 convolution and GEMM kernels
//! (`frontend::ops::qlinear`, whose accumulators are integers below 2^24). Per element,
//!
//! `y = max(min(round_half_even(acc · f) + zp, hi), lo)`,
//!
//! with `f` the float32 factor `x_scale · w_scale / y_scale` of the element's channel (or
//! one for the tensor) and the product exact: 24 by 24 significant bits fit float64's 53,
//! so the rounding is the real product's, as the reference evaluator computes it in
//! float64. The walk computes sixteen elements at a time in float32, which gives the same
//! result unless the clamped float32 product is a tie (see `qconv/requant.rs`); a chunk
//! with a tie is redone in float64. It is scalar code over contiguous runs that share a
//! factor, compiled once per instruction set by `simd::dispatch` (the compiler vectorizes
//! it to the CPU's widest vectors); runs are split over the run's threads.

use crate::par::{Par, Threads};
use crate::quantize::{byte_range, walk_slices};
use crate::simd::{self, Simd, Walk};

/// Flag bit of the C entry point's `flags`: int8 results (else uint8).
pub const SIGNED: i64 = 1;

/// The layout `[outer, channels, inner]` of the accumulators and results; `factors` holds
/// one factor per channel, or one for every element.
#[derive(Copy, Clone, Debug)]
pub struct Layout {
    pub outer: usize,
    pub channels: usize,
    pub inner: usize,
}

/// One accumulator requantized by the factor `f`.
#[inline(always)]
fn requantize_one(a: f32, f: f64, zp: f64, lo: f64, hi: f64) -> u8 {
    let v = ((a as f64 * f).round_ties_even() + zp).min(hi).max(lo);
    // An integral value in the type's range: adding 1.5·2^52 puts it in the low bits of the
    // mantissa, whose low byte is the value's two's-complement byte (bit operations, which
    // vectorize; `as` saturates and does not).
    (v + 6_755_399_441_055_744.0).to_bits() as u8
}

/// The float32 bounds of `round(acc · f)` (the type's range less the zero point) and the
/// zero point.
#[derive(Copy, Clone)]
struct Bounds32 {
    lo: f32,
    hi: f32,
    zp: f32,
}

impl Bounds32 {
    fn new(zp: f64, lo: f64, hi: f64) -> Bounds32 {
        // Integers below 2^9 in magnitude: exact.
        Bounds32 {
            lo: (lo - zp) as f32,
            hi: (hi - zp) as f32,
            zp: zp as f32,
        }
    }
}

/// Elements computed in float32 before the chunk's ties are looked at.
const CHUNK: usize = 64;

/// One output in float32 (`requantize_slice`): its byte, and whether the clamped product
/// was a tie (then the byte may not be the exact product's).
#[inline(always)]
fn requantize_f32(a: f32, f: f32, b: Bounds32) -> (u8, bool) {
    let p = a * f;
    // min then max, with the bound chosen when the product is NaN: as `requantize_one`.
    let p = if p < b.hi { p } else { b.hi };
    let p = if p > b.lo { p } else { b.lo };
    let r = p.round_ties_even();
    // An integer in [-128, 255] plus 1.5·2^23: its two's-complement byte is the low byte of
    // the mantissa.
    (
        (r + b.zp + 12_582_912.0).to_bits() as u8,
        (p - r).abs() == 0.5,
    )
}

/// The factors of a run: one for all its elements, or one each.
#[derive(Copy, Clone)]
enum Factors<'a> {
    One(f32),
    Each(&'a [f32]),
}

/// `y[i] = requantize_one(x[i], f[i], …)`, `CHUNK` elements at a time in float32: the
/// clamped product rounded to nearest, ties to even, is the exact product's rounding unless
/// it is a tie, and a chunk with a tie is redone in float64.
#[inline(always)]
fn requantize_slice(x: &[f32], y: &mut [u8], f: Factors, b: Bounds32, zp: f64, lo: f64, hi: f64) {
    for (c, (xc, yc)) in x.chunks(CHUNK).zip(y.chunks_mut(CHUNK)).enumerate() {
        let mut tie = false;
        match f {
            Factors::One(f) => {
                for (o, &a) in yc.iter_mut().zip(xc) {
                    let (v, t) = requantize_f32(a, f, b);
                    (*o, tie) = (v, tie | t);
                }
            }
            Factors::Each(fs) => {
                for ((o, &a), &f) in yc.iter_mut().zip(xc).zip(&fs[c * CHUNK..]) {
                    let (v, t) = requantize_f32(a, f, b);
                    (*o, tie) = (v, tie | t);
                }
            }
        }
        if tie {
            for (i, (o, &a)) in yc.iter_mut().zip(xc).enumerate() {
                let f = match f {
                    Factors::One(f) => f,
                    Factors::Each(fs) => fs[c * CHUNK + i],
                };
                *o = requantize_one(a, f as f64, zp, lo, hi);
            }
        }
    }
}

/// One run of `n` elements sharing the factor `f`.
#[derive(Copy, Clone)]
struct Run {
    x: *const f32,
    y: *mut u8,
    n: usize,
    f: f32,
    zp: f64,
    lo: f64,
    hi: f64,
}

impl Walk for Run {
    type Out = ();

    #[inline(always)]
    unsafe fn run<S: Simd>(self, _: S) {
        // SAFETY: `x` and `y` hold `n` elements (the walk's contract).
        let (x, y) = unsafe { walk_slices(self.x, self.y, self.n) };
        let b = Bounds32::new(self.zp, self.lo, self.hi);
        requantize_slice(x, y, Factors::One(self.f), b, self.zp, self.lo, self.hi);
    }
}

/// The channel runs `k0 .. k1` of a `[outer, channels, inner]` layout (run `k`: channel
/// `k % channels`, the `inner` elements from `k · inner`), each by its channel's factor.
#[derive(Copy, Clone)]
struct Runs {
    x: *const f32,
    y: *mut u8,
    factors: *const f32,
    channels: usize,
    inner: usize,
    k0: usize,
    k1: usize,
    zp: f64,
    lo: f64,
    hi: f64,
}

impl Walk for Runs {
    type Out = ();

    #[inline(always)]
    unsafe fn run<S: Simd>(self, _: S) {
        let (zp, lo, hi) = (self.zp, self.lo, self.hi);
        let b = Bounds32::new(zp, lo, hi);
        if self.inner == 1 {
            // One element a channel (factors along the last axis): a row's elements meet
            // its factors in order, so the loop is over both.
            let mut k = self.k0;
            while k < self.k1 {
                let c0 = k % self.channels;
                let len = (self.channels - c0).min(self.k1 - k);
                // SAFETY: elements k .. k + len lie in x and y, factors c0 .. c0 + len in
                // `factors` (the walk's contract).
                let (x, y, f) = unsafe {
                    (
                        std::slice::from_raw_parts(self.x.add(k), len),
                        std::slice::from_raw_parts_mut(self.y.add(k), len),
                        std::slice::from_raw_parts(self.factors.add(c0), len),
                    )
                };
                requantize_slice(x, y, Factors::Each(f), b, zp, lo, hi);
                k += len;
            }
        } else {
            for k in self.k0..self.k1 {
                // SAFETY: run k lies in x and y, its channel's factor in `factors`.
                let (x, y, f) = unsafe {
                    (
                        std::slice::from_raw_parts(self.x.add(k * self.inner), self.inner),
                        std::slice::from_raw_parts_mut(self.y.add(k * self.inner), self.inner),
                        *self.factors.add(k % self.channels),
                    )
                };
                requantize_slice(x, y, Factors::One(f), b, zp, lo, hi);
            }
        }
    }
}

/// Requantizes `l.outer · l.channels · l.inner` accumulators.
///
/// # Safety
/// `x` holds that many floats, `y` that many bytes; `factors` one float per channel, or one
/// when `per_tensor`; `par` as `Par::for_ranges`.
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
pub unsafe fn requantize(
    x: *const f32,
    factors: *const f32,
    per_tensor: bool,
    l: Layout,
    zp: i64,
    signed: bool,
    y: *mut u8,
    par: Par,
) {
    let (lo, hi) = byte_range(signed);
    let (lo, hi) = (f64::from(lo), f64::from(hi));
    let (xa, ya, fa) = (x as usize, y as usize, factors as usize);
    let zp = zp as f64;
    if per_tensor {
        // SAFETY: one factor (caller).
        let f = unsafe { *(fa as *const f32) };
        // SAFETY: each range's elements lie in x and y (caller), and only its walk writes
        // them.
        unsafe {
            simd::dispatch_ranges(par, l.outer * l.channels * l.inner, 4, |r| Run {
                x: (xa as *const f32).wrapping_add(r.start),
                y: (ya as *mut u8).wrapping_add(r.start),
                n: r.len(),
                f,
                zp,
                lo,
                hi,
            })
        };
    } else {
        // SAFETY: each range's runs lie in x and y and their channels' factors in
        // `factors` (caller), and only its walk writes them.
        unsafe {
            simd::dispatch_ranges(par, l.outer * l.channels, 4 * l.inner.max(1), |r| Runs {
                x: xa as *const f32,
                y: ya as *mut u8,
                factors: fa as *const f32,
                channels: l.channels,
                inner: l.inner,
                k0: r.start,
                k1: r.end,
                zp,
                lo,
                hi,
            })
        };
    }
}

/// C entry point: `y = requantize(x)` over `[outer, channels, inner]` accumulators, with
/// `factors` per channel (`n_factors` = `channels`) or per tensor (`n_factors` = 1), the
/// result's zero point `zp` and `flags` `SIGNED` (int8 results, else uint8).
///
/// # Safety
/// `x` holds `outer · channels · inner` floats, `y` as many bytes, `factors` `n_factors`
/// floats; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
pub unsafe extern "C" fn onnxc_requantize_f32_8(
    x: *const f32,
    factors: *const f32,
    n_factors: i64,
    outer: i64,
    channels: i64,
    inner: i64,
    zp: i64,
    flags: i64,
    y: *mut u8,
    threads: *const Threads,
) {
    let l = Layout {
        outer: outer.max(0) as usize,
        channels: channels.max(0) as usize,
        inner: inner.max(0) as usize,
    };
    let signed = flags & SIGNED != 0;
    // SAFETY: caller contract.
    unsafe {
        requantize(
            x,
            factors,
            n_factors == 1,
            l,
            zp,
            signed,
            y,
            Par::from_raw(threads),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::test_threads;

    /// The reference's arithmetic: the product in float64, rounded half to even.
    fn reference(a: f32, f: f32, zp: i64, signed: bool) -> u8 {
        let (lo, hi) = byte_range(signed);
        let q = ((a as f64 * f as f64).round_ties_even() + zp as f64).clamp(lo.into(), hi.into());
        if signed { q as i8 as u8 } else { q as u8 }
    }

    /// Accumulators at ties, near ties, at the float32-exact bound and past the range, per
    /// tensor and per channel, on every instruction set and pool size.
    #[test]
    fn matches_the_float64_product() {
        let (outer, channels, inner) = (3usize, 5usize, 37usize);
        let n = outer * channels * inner;
        let mut x = Vec::with_capacity(n);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for i in 0..n {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = match i % 5 {
                0 => (s % 2001) as f32 - 1000.0,
                1 => ((s % (1 << 24)) as f32) - 8_388_608.0,
                2 => 16_777_215.0 * if s & 1 == 0 { 1.0 } else { -1.0 },
                // Odd multiples of 7: times fl32(2.5 / 7) they are near half-integers, and
                // the float32 product of some rounds onto one (a tie the exact product is not).
                3 => (7 * (2 * (s % 64) as i64 + 1) * if s & 64 == 0 { 1 } else { -1 }) as f32,
                _ => ((s % 40_001) as f32) - 20_000.0,
            };
            x.push(v);
        }
        // Factors that make ties: 0.5 (k + ½ for odd accumulators), 0.25, and factors
        // whose float32 product with some accumulator rounds to a tie the exact product
        // is not.
        let factors = [
            0.5f32,
            0.25,
            1.0 / 3.0,
            0.007_812_5 * 1.000_000_1,
            3.0e-5,
            2.5 / 7.0,
        ];
        for (signed, zp) in [(false, 128), (false, 3), (true, -7)] {
            // Every instruction set's walk (and the portable one at 4, 8 and 16 lanes), one
            // factor at a time over the whole buffer.
            for &f in &factors {
                let want: Vec<u8> = x.iter().map(|&a| reference(a, f, zp, signed)).collect();
                let mut y = vec![0xa5u8; n];
                let yp = y.as_mut_ptr();
                let (lo, hi) = byte_range(signed);
                let w = Run {
                    x: x.as_ptr(),
                    y: yp,
                    n,
                    f,
                    zp: zp as f64,
                    lo: lo.into(),
                    hi: hi.into(),
                };
                // SAFETY: x holds n floats and y n bytes; each check reads y after its walk.
                unsafe {
                    simd::for_each_isa(w, |isa, ()| {
                        let got = std::slice::from_raw_parts_mut(yp, n);
                        assert!(got == &want[..], "{isa}: factor {f}, signed {signed}");
                        got.fill(0xa5);
                    })
                };
            }
            // Per tensor and per channel (runs of a channel, and factors along the last axis:
            // one element a channel), split over every test pool.
            for (per_tensor, (outer, channels, inner)) in [
                (true, (outer, channels, inner)),
                (false, (outer, channels, inner)),
                (false, (n / channels, channels, 1)),
            ] {
                let want: Vec<u8> = (0..n)
                    .map(|i| {
                        let f = if per_tensor {
                            factors[0]
                        } else {
                            factors[(i / inner) % channels]
                        };
                        reference(x[i], f, zp, signed)
                    })
                    .collect();
                for (workers, threads) in test_threads() {
                    let mut y = vec![0xa5u8; n];
                    // SAFETY: x holds n floats, y n bytes, factors one per channel; the pool
                    // is a test pool.
                    unsafe {
                        requantize(
                            x.as_ptr(),
                            factors.as_ptr(),
                            per_tensor,
                            Layout {
                                outer,
                                channels,
                                inner,
                            },
                            zp,
                            signed,
                            y.as_mut_ptr(),
                            Par::from_raw(threads),
                        )
                    };
                    assert_eq!(
                        y, want,
                        "{workers} workers, per tensor {per_tensor}, inner {inner}"
                    );
                }
            }
        }
    }
}
