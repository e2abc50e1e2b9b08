//! Sum of two quantized tensors of the same shape, requantized: QLinearAdd, and the
//! DequantizeLinear → Add (→ Relu) → QuantizeLinear groups of QDQ models (a residual
//! connection). Per element, in float32, the operations of the graph it replaces in their
//! order, each rounded as IEEE float32 rounds it:
//!
//! `v = (a − z_a)·s_a + (b − z_b)·s_b`, with Relu `v < 0 ? 0 : v`, then
//! `y = max(min(round_half_even(v / s_y) + z_y, hi), lo)`,
//!
//! so the result is bit for bit the generated map's (and the reference's). The walk is
//! written once over the SIMD layer (`simd`): bytes are widened to float32 and narrowed
//! back a block at a time through the stack, the arithmetic runs on the CPU's widest
//! vectors. Elements are split over the run's threads.

use crate::par::{Par, Threads};
use crate::quantize::byte_range;
use crate::simd::{self, Simd, Walk};

/// The constants of one sum.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QAddParams {
    pub sa: f32,
    pub sb: f32,
    pub sy: f32,
    pub za: f32,
    pub zb: f32,
    pub zy: f32,
    /// int8 operands and result (else uint8).
    pub signed: bool,
    /// A Relu before the quantization.
    pub relu: bool,
}

/// Flag bits of the C entry point's `flags`.
pub const SIGNED: i64 = 1;
pub const RELU: i64 = 2;

/// Elements widened per block (three float32 blocks on the stack); a multiple of every
/// implementation's lane count.
const BLOCK: usize = 256;

#[derive(Copy, Clone)]
struct Sum {
    a: *const u8,
    b: *const u8,
    y: *mut u8,
    n: usize,
    p: QAddParams,
}

impl Walk for Sum {
    type Out = ();

    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let p = self.p;
        let (lo, hi) = byte_range(p.signed);
        let (sa, sb, sy) = (s.splat(p.sa), s.splat(p.sb), s.splat(p.sy));
        let (za, zb, zy) = (s.splat(p.za), s.splat(p.zb), s.splat(p.zy));
        let (lo, hi, zero) = (s.splat(lo), s.splat(hi), s.zero());
        const { assert!(BLOCK.is_multiple_of(16)) };
        assert!(BLOCK.is_multiple_of(S::LANES));
        let mut fa = [0f32; BLOCK];
        let mut fb = [0f32; BLOCK];
        let mut fy = [0f32; BLOCK];
        let mut start = 0;
        while start < self.n {
            let len = BLOCK.min(self.n - start);
            // SAFETY: elements start .. start + len lie in a, b and y (the walk's contract).
            let (a, b, y) = unsafe {
                (
                    std::slice::from_raw_parts(self.a.add(start), len),
                    std::slice::from_raw_parts(self.b.add(start), len),
                    std::slice::from_raw_parts_mut(self.y.add(start), len),
                )
            };
            widen(a, &mut fa[..len], p.signed);
            widen(b, &mut fb[..len], p.signed);
            // Whole vectors over the blocks (BLOCK is a multiple of every lane count; lanes
            // past `len` hold stale values, never narrowed into `y`).
            let mut i = 0;
            while i < len {
                // SAFETY: lanes i .. i + LANES lie in the blocks (i < len ≤ BLOCK).
                unsafe {
                    let va = s.load(fa.as_ptr().add(i));
                    let vb = s.load(fb.as_ptr().add(i));
                    let mut v = s.add(s.mul(s.sub(va, za), sa), s.mul(s.sub(vb, zb), sb));
                    if p.relu {
                        v = s.select(s.lt(v, zero), zero, v);
                    }
                    let q = s.add(s.round(s.div(v, sy)), zy);
                    let q = s.max(s.min(q, hi), lo);
                    s.store(fy.as_mut_ptr().add(i), q);
                }
                i += S::LANES;
            }
            // Integral values in the type's range: adding 1.5·2^23 puts each in the low bits
            // of the mantissa, whose low byte is the value's (two's complement) byte. Plain
            // bit operations, which vectorize; `as i32` saturates and does not.
            for (o, &v) in y.iter_mut().zip(&fy[..len]) {
                *o = (v + 12_582_912.0).to_bits() as u8;
            }
            start += len;
        }
    }
}

/// `out[i] = x[i]` as float32 (the bytes as int8 when `signed`).
#[inline(always)]
fn widen(x: &[u8], out: &mut [f32], signed: bool) {
    if signed {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v as i8 as f32;
        }
    } else {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v as f32;
        }
    }
}

/// Runs the sum of `n` elements.
///
/// # Safety
/// `a`, `b` and `y` hold `n` bytes; `par` as `Par::for_ranges`.
pub unsafe fn qadd(p: &QAddParams, a: *const u8, b: *const u8, y: *mut u8, n: usize, par: Par) {
    let (aa, ba, ya) = (a as usize, b as usize, y as usize);
    let p = *p;
    // SAFETY: each range's elements lie in a, b and y (caller), and only its walk writes
    // them.
    unsafe {
        simd::dispatch_ranges(par, n, 16, |r| Sum {
            a: (aa + r.start) as *const u8,
            b: (ba + r.start) as *const u8,
            y: (ya + r.start) as *mut u8,
            n: r.len(),
            p,
        })
    };
}

/// C entry point: `y = requantize((a − z_a)·s_a + (b − z_b)·s_b)` over `n` elements;
/// `scales` holds `[s_a, s_b, s_y]`; `flags` `SIGNED` (int8 tensors) | `RELU`.
///
/// # Safety
/// `a`, `b` and `y` hold `n` bytes, `scales` three floats; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
pub unsafe extern "C" fn onnxc_qadd_u8(
    a: *const u8,
    b: *const u8,
    y: *mut u8,
    n: i64,
    scales: *const f32,
    za: i64,
    zb: i64,
    zy: i64,
    flags: i64,
    threads: *const Threads,
) {
    // SAFETY: `scales` holds three floats (caller).
    let s = unsafe { std::slice::from_raw_parts(scales, 3) };
    let p = QAddParams {
        sa: s[0],
        sb: s[1],
        sy: s[2],
        za: za as f32,
        zb: zb as f32,
        zy: zy as f32,
        signed: flags & SIGNED != 0,
        relu: flags & RELU != 0,
    };
    // SAFETY: caller contract.
    unsafe { qadd(&p, a, b, y, n.max(0) as usize, Par::from_raw(threads)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::test_threads;

    /// The graph's arithmetic, element by element.
    fn reference(p: &QAddParams, a: u8, b: u8) -> u8 {
        let f = |x: u8| if p.signed { x as i8 as f32 } else { x as f32 };
        let mut v = (f(a) - p.za) * p.sa + (f(b) - p.zb) * p.sb;
        if p.relu && v < 0.0 {
            v = 0.0;
        }
        let (lo, hi) = byte_range(p.signed);
        let q = ((v / p.sy).round_ties_even() + p.zy).min(hi).max(lo);
        if p.signed { q as i8 as u8 } else { q as u8 }
    }

    #[test]
    fn matches_the_graph_arithmetic_on_every_isa_and_pool() {
        // Every pair of values (65,536 elements: whole blocks) and a ragged length.
        let pairs = 1usize << 16;
        let a: Vec<u8> = (0..pairs).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..pairs).map(|i| (i >> 8) as u8).collect();
        for (signed, relu) in [(false, false), (false, true), (true, false), (true, true)] {
            let p = QAddParams {
                sa: 0.0173,
                sb: 0.0411,
                sy: 0.0529,
                za: if signed { -3.0 } else { 131.0 },
                zb: if signed { 5.0 } else { 117.0 },
                zy: if signed { -7.0 } else { 12.0 },
                signed,
                relu,
            };
            for n in [pairs, 1000 + 7] {
                let want: Vec<u8> = (0..n).map(|i| reference(&p, a[i], b[i])).collect();
                // Every instruction set's walk (and the portable one at 4, 8 and 16 lanes).
                let mut y = vec![0xa5u8; n];
                let yp = y.as_mut_ptr();
                let w = Sum {
                    a: a.as_ptr(),
                    b: b.as_ptr(),
                    y: yp,
                    n,
                    p,
                };
                // SAFETY: a, b and y hold n bytes; each check reads y after its walk ends.
                unsafe {
                    simd::for_each_isa(w, |isa, ()| {
                        let got = std::slice::from_raw_parts_mut(yp, n);
                        assert!(
                            got == &want[..],
                            "{isa}: signed {signed}, relu {relu}, n {n}"
                        );
                        got.fill(0xa5);
                    })
                };
                // Split over every test pool.
                for (workers, threads) in test_threads() {
                    let mut y = vec![0xa5u8; n];
                    // SAFETY: a, b and y hold n bytes; the pool is a test pool.
                    unsafe {
                        qadd(
                            &p,
                            a.as_ptr(),
                            b.as_ptr(),
                            y.as_mut_ptr(),
                            n,
                            Par::from_raw(threads),
                        )
                    };
                    assert!(
                        y == want,
                        "{workers} workers: signed {signed}, relu {relu}, n {n}"
                    );
                }
            }
        }
    }
}
