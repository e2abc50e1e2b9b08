//! 2-D pooling over blocked planes (`[planes][h][w][8]`): max, average (with or without the
//! padding in the divisor) and Lp, one 8-channel vector per tap. Each output reads only the
//! taps inside the input (the valid window rows and columns are a contiguous range), so
//! nothing is padded or copied; outputs whose whole window is inside take a loop with the
//! tap ranges fixed.

use super::CB;
use crate::pool::PoolGeometry;

/// Valid tap range `[k0, k1)` of output `o` along dim `d`, and the taps counted by the
/// average's divisor.
fn taps(g: &PoolGeometry, d: usize, o: i64) -> (usize, usize, usize) {
    let (s, dl, pb, pe, k, n) = (
        g.strides[d],
        g.dilations[d],
        g.pads_begin[d],
        g.pads_end[d],
        g.kernel[d],
        g.input[d],
    );
    let start = o * s - pb;
    // First k with start + k·dl ≥ lim.
    let first_at = |lim: i64| {
        if start >= lim {
            0
        } else {
            (lim - start + dl - 1) / dl
        }
    };
    let k0 = first_at(0).min(k);
    let k1 = first_at(n).min(k).max(k0);
    let counted = if g.count_include_pad {
        let p0 = first_at(-pb).min(k);
        let p1 = first_at(n + pe).min(k).max(p0);
        p1 - p0
    } else {
        k1 - k0
    };
    (k0 as usize, k1 as usize, counted as usize)
}

/// Per output position along one dim: where its window starts in the input (may be
/// negative) and its valid taps.
struct Axis {
    start: Vec<i64>,
    taps: Vec<(usize, usize, usize)>,
}

fn axis(g: &PoolGeometry, d: usize) -> Axis {
    let n = g.output[d].max(0);
    Axis {
        start: (0..n).map(|o| o * g.strides[d] - g.pads_begin[d]).collect(),
        taps: (0..n).map(|o| taps(g, d, o)).collect(),
    }
}

/// Pools `g.planes` blocked planes (`planes` counts blocks of 8 channels).
///
/// # Safety
/// `x` holds `planes × ih × iw × 8` floats, `y` `planes × oh × ow × 8`.
pub unsafe fn pool(g: &PoolGeometry, x: *const f32, y: *mut f32) {
    let (rows, cols) = (axis(g, 0), axis(g, 1));
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    for plane in 0..g.planes.max(0) as usize {
        // SAFETY: plane `plane` of input and output.
        unsafe {
            let xp = x.add(plane * (ih * iw) as usize * CB);
            let yp = y.add(plane * (oh * ow) as usize * CB);
            #[cfg(target_arch = "x86_64")]
            if g.kind != 2 && crate::isa::avx2() {
                avx2::plane(g, &rows, &cols, xp, yp);
                continue;
            }
            portable_plane(g, &rows, &cols, xp, yp);
        }
    }
}

/// # Safety
/// `xp`/`yp` are one input and one output plane.
unsafe fn portable_plane(g: &PoolGeometry, rows: &Axis, cols: &Axis, xp: *const f32, yp: *mut f32) {
    let iw = g.input[1] as usize;
    let ow = g.output[1] as usize;
    let (dh, dw) = (g.dilations[0] as usize, g.dilations[1] as usize);
    for (oy, &(ky0, ky1, rc)) in rows.taps.iter().enumerate() {
        for (ox, &(kx0, kx1, cc)) in cols.taps.iter().enumerate() {
            let mut acc = [if g.kind == 0 { f32::NEG_INFINITY } else { 0.0 }; CB];
            for ky in ky0..ky1 {
                let iy = (rows.start[oy] + (ky * dh) as i64) as usize;
                for kx in kx0..kx1 {
                    let ix = (cols.start[ox] + (kx * dw) as i64) as usize;
                    for (l, a) in acc.iter_mut().enumerate() {
                        // SAFETY: the tap is inside the plane.
                        let v = unsafe { *xp.add((iy * iw + ix) * CB + l) };
                        *a = match g.kind {
                            0 => {
                                if v > *a || v.is_nan() {
                                    v
                                } else {
                                    *a
                                }
                            }
                            1 => *a + v,
                            _ => *a + v.abs().powi(g.p as i32),
                        };
                    }
                }
            }
            for (l, a) in acc.iter().enumerate() {
                let v = match g.kind {
                    0 => *a,
                    1 => *a * (1.0 / (rc * cc) as f32),
                    _ => a.powf(1.0 / g.p as f32),
                };
                // SAFETY: inside the output plane.
                unsafe { *yp.add((oy * ow + ox) * CB + l) = v };
            }
        }
    }
}

/// C ABI entry point (`planes` in the geometry counts blocks).
///
/// # Safety
/// As `pool`; `params` from `PoolGeometry::encode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool_nchwc_f32(params: *const i64, x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { pool(&PoolGeometry::decode(params), x, y) }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Axis, CB, PoolGeometry};
    use std::arch::x86_64::*;

    /// Max (kind 0) or average (kind 1) of one plane.
    ///
    /// # Safety
    /// AVX2 present; `xp`/`yp` are one input and one output plane.
    #[target_feature(enable = "avx2")]
    pub unsafe fn plane(g: &PoolGeometry, rows: &Axis, cols: &Axis, xp: *const f32, yp: *mut f32) {
        if g.kind == 0 {
            // SAFETY: forwarded.
            unsafe { plane_of::<true>(g, rows, cols, xp, yp) }
        } else {
            // SAFETY: forwarded.
            unsafe { plane_of::<false>(g, rows, cols, xp, yp) }
        }
    }

    #[inline(always)]
    fn fold<const MAX: bool>(acc: __m256, v: __m256) -> __m256 {
        // SAFETY: AVX2 is enabled in every caller.
        unsafe {
            if MAX {
                // NaN wins: max(v, acc) keeps a NaN acc; the blend keeps a NaN v.
                let m = _mm256_max_ps(v, acc);
                _mm256_blendv_ps(m, v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v))
            } else {
                _mm256_add_ps(acc, v)
            }
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn plane_of<const MAX: bool>(
        g: &PoolGeometry,
        rows: &Axis,
        cols: &Axis,
        xp: *const f32,
        yp: *mut f32,
    ) {
        let iw = g.input[1] as usize;
        let ow = g.output[1] as usize;
        let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
        let (dh, dw) = (
            g.dilations[0] as usize * iw * CB,
            g.dilations[1] as usize * CB,
        );
        let sw = g.strides[1] as usize * CB;
        let init = if MAX {
            _mm256_set1_ps(f32::NEG_INFINITY)
        } else {
            _mm256_setzero_ps()
        };
        // Output columns whose windows lie inside the input: [c0, c1).
        let full = |t: &(usize, usize, usize), k: usize| t.0 == 0 && t.1 == k;
        let c0 = cols.taps.iter().position(|t| full(t, kw)).unwrap_or(ow);
        let c1 = c0 + cols.taps[c0..].iter().take_while(|t| full(t, kw)).count();
        // SAFETY: every tap read is inside the plane (its row and column ranges are the
        // valid ones); outputs inside the output plane.
        unsafe {
            for (oy, &(ky0, ky1, rc)) in rows.taps.iter().enumerate() {
                let row0 = rows.start[oy] + (ky0 * g.dilations[0] as usize) as i64;
                let yrow = yp.add(oy * ow * CB);
                let generic = |ox: usize| {
                    let (kx0, kx1, cc) = cols.taps[ox];
                    let mut acc = init;
                    let mut p = xp.add(((row0 as usize) * iw) * CB).offset(
                        ((cols.start[ox] + (kx0 * g.dilations[1] as usize) as i64) as isize)
                            * CB as isize,
                    );
                    for _ in ky0..ky1 {
                        let mut q = p;
                        for _ in kx0..kx1 {
                            acc = fold::<MAX>(acc, _mm256_loadu_ps(q));
                            q = q.add(dw);
                        }
                        p = p.add(dh);
                    }
                    if !MAX {
                        acc = _mm256_mul_ps(acc, _mm256_set1_ps(1.0 / (rc * cc) as f32));
                    }
                    _mm256_storeu_ps(yrow.add(ox * CB), acc);
                };
                for ox in (0..c0).chain(c1..ow) {
                    generic(ox);
                }
                if c0 >= c1 {
                    continue;
                }
                // Interior columns: all kw taps; the divisor depends on the rows only
                // (count_include_pad windows inside the input count every tap).
                let cc = cols.taps[c0].2;
                let scale = _mm256_set1_ps(1.0 / (rc * cc) as f32);
                let mut base = xp
                    .add(((row0 as usize) * iw) * CB)
                    .offset((cols.start[c0] as isize) * CB as isize);
                let nrows = ky1 - ky0;
                for ox in c0..c1 {
                    let mut acc = init;
                    let mut p = base;
                    for _ in 0..nrows {
                        let mut q = p;
                        for _ in 0..kw {
                            acc = fold::<MAX>(acc, _mm256_loadu_ps(q));
                            q = q.add(dw);
                        }
                        p = p.add(dh);
                    }
                    if !MAX {
                        acc = _mm256_mul_ps(acc, scale);
                    }
                    _mm256_storeu_ps(yrow.add(ox * CB), acc);
                    base = base.add(sw);
                }
                let _ = kh;
            }
        }
    }
}
