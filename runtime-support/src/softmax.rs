//! Softmax of f32 rows (the last axis, contiguous) of `s·x` for a positive scale `s` (the
//! `1/√d` of attention scores, folded in by the compiler):
//! `y = exp(s·(x - max(x))) / sum(exp(s·(x - max(x))))` in three passes over a row while it
//! is in L1 — max, exponentials stored and summed,
//! scaling by the reciprocal of the sum. The compiler's decomposition into max, exp, sum and
//! divide steps makes four passes over the whole tensor in 128-bit generated code; in a
//! transformer encoder's attention (4×128 rows of 128) that took ~0.11 ms where this takes
//! a fraction (see docs/performance.md, design history).
//!
//! The exponentials are `math::exp_nonpositive`: e^x's bits, except that a term below
//! e^−86.9 (2.9e−38 of the row's largest) is 0 instead of subnormal, which both saves AVX2
//! the gradual-underflow scaling and keeps masked scores (−10⁴ added) off the cores' slow
//! subnormal path.
//!
//! Special values follow the definition: a NaN anywhere in a row makes the whole row NaN
//! (through its exponential and the sum), so does +inf (inf − inf); a row of −inf is NaN, or
//! zeros when asked (`zero_inf_rows`: ONNX Attention's fully masked rows).

pub use crate::simd::math::{EXP_POLY, LN2_HI, LN2_LO};
use crate::simd::{self, Simd, Walk, math};

/// Softmax of `scale`·x over `rows` rows of `n` floats; `scale` is positive and finite.
/// `zero_inf_rows`: a row whose elements are all −inf gives zeros (instead of NaN).
///
/// # Safety
/// `x` and `y` are valid for `rows · n` floats; they may be the same buffer.
pub unsafe fn softmax_f32(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    n: usize,
    scale: f32,
    zero_inf_rows: bool,
) {
    if n == 0 {
        return;
    }
    // SAFETY: forwarded.
    unsafe {
        simd::dispatch(Softmax {
            x,
            y,
            rows,
            n,
            scale,
            zero_inf_rows,
        })
    }
}

#[derive(Clone, Copy)]
struct Softmax {
    x: *const f32,
    y: *mut f32,
    rows: usize,
    n: usize,
    scale: f32,
    zero_inf_rows: bool,
}

impl Walk for Softmax {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        for r in 0..self.rows {
            let at = r * self.n;
            // SAFETY: row r of both (caller).
            unsafe {
                row(
                    s,
                    self.x.add(at),
                    self.y.add(at),
                    self.n,
                    self.scale,
                    self.zero_inf_rows,
                )
            };
        }
    }
}

/// One row: a max pass (four accumulators; a NaN makes the max NaN), an exponential pass
/// that stores and sums (four accumulators), and a scaling pass, the tails masked. A row of
/// −inf is stored as zeros when `zero_inf_rows`.
///
/// # Safety
/// `x`, `y` valid for `n` floats.
#[inline(always)]
pub(crate) unsafe fn row<S: Simd>(
    s: S,
    x: *const f32,
    y: *mut f32,
    n: usize,
    scale: f32,
    zero_inf_rows: bool,
) {
    let l = S::LANES;
    let tail = s.lanes(0, n % l);
    let ninf = s.splat(f32::NEG_INFINITY);
    // SAFETY: (whole body) x and y hold n floats (contract); full vectors end at or below n; the
    // tails are masked to it.
    unsafe {
        // `max(acc, v)` returns v when either is NaN, so NaNs are tracked apart.
        let mut acc = [ninf; 4];
        let mut nan = s.lanes(0, 0);
        let mut i = 0;
        while i + 4 * l <= n {
            for (j, a) in acc.iter_mut().enumerate() {
                let v = s.load(x.add(i + j * l));
                nan = s.mask_or(nan, s.is_nan(v));
                *a = s.max(*a, v);
            }
            i += 4 * l;
        }
        while i + l <= n {
            let v = s.load(x.add(i));
            nan = s.mask_or(nan, s.is_nan(v));
            acc[0] = s.max(acc[0], v);
            i += l;
        }
        if i < n {
            let v = s.load_masked(x.add(i), tail, ninf);
            nan = s.mask_or(nan, s.is_nan(v));
            acc[0] = s.max(acc[0], v);
        }
        let a = s.max(s.max(acc[0], acc[1]), s.max(acc[2], acc[3]));
        let m = if s.any(nan) {
            f32::NAN
        } else {
            s.reduce_max(a)
        };
        if zero_inf_rows && m == f32::NEG_INFINITY {
            let mut i = 0;
            while i + l <= n {
                s.store(y.add(i), s.zero());
                i += l;
            }
            if i < n {
                s.store_masked(y.add(i), tail, s.zero());
            }
            return;
        }
        let (mv, sv) = (s.splat(m), s.splat(scale));
        let e = {
            #[inline(always)]
            |v| math::exp_nonpositive(s, s.mul(s.sub(v, mv), sv))
        };
        let mut sum = [s.zero(); 4];
        let mut i = 0;
        while i + 4 * l <= n {
            for (j, a) in sum.iter_mut().enumerate() {
                let v = e(s.load(x.add(i + j * l)));
                s.store(y.add(i + j * l), v);
                *a = s.add(*a, v);
            }
            i += 4 * l;
        }
        while i + l <= n {
            let v = e(s.load(x.add(i)));
            s.store(y.add(i), v);
            sum[0] = s.add(sum[0], v);
            i += l;
        }
        if i < n {
            let v = e(s.load_masked(x.add(i), tail, mv));
            s.store_masked(y.add(i), tail, v);
            sum[0] = s.add(sum[0], s.select(tail, v, s.zero()));
        }
        let total = s.add(s.add(sum[0], sum[1]), s.add(sum[2], sum[3]));
        let inv = s.splat(1.0 / s.reduce_add(total));
        let mut i = 0;
        while i + l <= n {
            s.store(y.add(i), s.mul(s.load(y.add(i)), inv));
            i += l;
        }
        if i < n {
            let v = s.load_masked(y.add(i), tail, s.zero());
            s.store_masked(y.add(i), tail, s.mul(v, inv));
        }
    }
}

/// C ABI entry point: softmax of `scale`·x (`scale` null: 1) over `rows` rows of `n` floats,
/// the rows split over the run's `threads`; `flags` bit 0: rows of −inf give zeros.
///
/// # Safety
/// As `softmax_f32`; `rows` and `n` non-negative, `scale` null or one positive finite float;
/// `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_softmax_f32(
    x: *const f32,
    y: *mut f32,
    rows: i64,
    n: i64,
    scale: *const f32,
    flags: i64,
    threads: *const crate::par::Threads,
) {
    let s = if scale.is_null() {
        1.0
    } else {
        // SAFETY: scale is non-null here, and then points to one float (the contract).
        unsafe { *scale }
    };
    let (rows, n) = (rows.max(0) as usize, n.max(0) as usize);
    // SAFETY: forwarded contract; each task computes its own rows.
    unsafe {
        crate::par::Par::from_raw(threads).for_ranges(rows, n * 4, &|r, _| {
            softmax_f32(
                x.add(r.start * n),
                y.add(r.start * n),
                r.len(),
                n,
                s,
                flags & 1 != 0,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 reference with NumPy's special-value behaviour.
    fn reference(x: &[f32], scale: f32) -> Vec<f32> {
        let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| {
            let v = v as f64;
            if v > m || v.is_nan() || m.is_nan() {
                if m.is_nan() { m } else { v }
            } else {
                m
            }
        });
        let e: Vec<f64> = x
            .iter()
            .map(|&v| ((v as f64 - m) * scale as f64).exp())
            .collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| (v / s) as f32).collect()
    }

    fn check(x: &[f32], n: usize) {
        check_scaled(x, n, 1.0)
    }

    fn check_scaled(x: &[f32], n: usize, scale: f32) {
        check_rows(x, n, scale, false)
    }

    /// As `check_scaled`; with `zero_inf_rows`, a row of −inf must come out as zeros.
    fn check_rows(x: &[f32], n: usize, scale: f32, zero_inf_rows: bool) {
        let rows = x.len() / n;
        let mut y = vec![0f32; x.len()];
        let w = Softmax {
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            rows,
            n,
            scale,
            zero_inf_rows,
        };
        let mut ys = Vec::new();
        // SAFETY: rows · n floats each.
        unsafe { simd::for_each_isa(w, |isa, ()| ys.push((isa, y.clone()))) };
        for (isa, y) in ys {
            for r in 0..rows {
                let row = &x[r * n..(r + 1) * n];
                let want = if zero_inf_rows && row.iter().all(|&v| v == f32::NEG_INFINITY) {
                    vec![0.0; n]
                } else {
                    reference(row, scale)
                };
                for (i, (&g, &w)) in y[r * n..(r + 1) * n].iter().zip(&want).enumerate() {
                    let ok = if w.is_nan() {
                        g.is_nan()
                    } else {
                        (g - w).abs() <= 1e-5 * w.abs() + 1e-30
                    };
                    assert!(
                        ok,
                        "{isa} n={n} scale {scale} row {r} [{i}]: got {g}, want {w}"
                    );
                }
            }
        }
    }

    fn data(len: usize, seed: u32, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * scale
            })
            .collect()
    }

    #[test]
    fn rows_of_every_tail_length() {
        for n in [
            1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 1000,
        ] {
            check(&data(3 * n, n as u32, 20.0), n);
        }
    }

    #[test]
    fn wide_ranges_underflow_to_zero() {
        // Spreads of hundreds: most exponentials underflow (some to denormals).
        for n in [5, 16, 37, 128] {
            check(&data(2 * n, 7 + n as u32, 400.0), n);
        }
        let mut x = vec![0f32; 40];
        x[3] = 120.0;
        x[30] = -1e30;
        check(&x, 40);
    }

    #[test]
    fn special_values() {
        for n in [3, 16, 21, 70] {
            // A NaN, a +inf, all -inf, and a -inf among finite values, each in its own row.
            let mut x = data(4 * n, 3, 4.0);
            x[n / 2] = f32::NAN;
            x[n + n - 1] = f32::INFINITY;
            for v in &mut x[2 * n..3 * n] {
                *v = f32::NEG_INFINITY;
            }
            x[3 * n] = f32::NEG_INFINITY;
            check(&x, n);
            // Asked to, the row of -inf gives zeros; the others are unchanged.
            check_rows(&x, n, 1.0, true);
        }
    }

    #[test]
    fn scaled_scores() {
        // Attention's 1/√d folded in, a scale above one, and special values under a scale.
        for scale in [0.125f32, 0.036, 3.0] {
            for n in [1, 7, 8, 33, 128, 200] {
                check_scaled(&data(3 * n, 5 + n as u32, 60.0), n, scale);
            }
            let mut x = data(3 * 16, 9, 4.0);
            x[5] = f32::NAN;
            x[16 + 3] = f32::INFINITY;
            x[32] = f32::NEG_INFINITY;
            check_scaled(&x, 16, scale);
        }
    }

    /// The entry point on 2, 3 and 5 threads gives the sequential run's bits.
    #[test]
    fn threads_give_the_same_bits() {
        for (rows, n) in [(1usize, 7usize), (37, 16), (200, 33), (5, 1000)] {
            let x: Vec<f32> = (0..rows * n)
                .map(|i| (i as f32 * 0.11).cos() * 4.0)
                .collect();
            crate::par::same_bits_on_every_pool(&format!("{rows}x{n}"), |_, threads| {
                let mut y = vec![f32::NAN; rows * n];
                // SAFETY: x and y hold rows·n floats; the scale is one float.
                unsafe {
                    onnxc_softmax_f32(
                        x.as_ptr(),
                        y.as_mut_ptr(),
                        rows as i64,
                        n as i64,
                        &0.5,
                        0,
                        threads,
                    )
                };
                y
            });
        }
    }
}
