//! 2-D pooling over blocked planes (`[planes][h][w][8]`): max, average (with or without the
//! padding in the divisor) and Lp, one 8-channel vector per tap. Each output reads only the
//! taps inside the input (the valid window rows and columns are a contiguous range), so
//! nothing is padded or copied.

use super::CB;
use crate::pool::PoolGeometry;

/// Valid tap range `[k0, k1)` of output `o` along dim `d`, and the taps counted by the
/// average's divisor.
fn taps(g: &PoolGeometry, d: usize, o: i64) -> (i64, i64, i64) {
    let (s, dl, pb, pe, k, n) = (
        g.strides[d],
        g.dilations[d],
        g.pads_begin[d],
        g.pads_end[d],
        g.kernel[d],
        g.input[d],
    );
    let start = o * s - pb;
    // First k with start + k·dl ≥ 0, first k with start + k·dl ≥ n.
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
    (k0, k1, counted)
}

/// Pools `g.planes` blocked planes (`planes` counts blocks of 8 channels).
///
/// # Safety
/// `x` holds `planes × ih × iw × 8` floats, `y` `planes × oh × ow × 8`.
pub unsafe fn pool(g: &PoolGeometry, x: *const f32, y: *mut f32) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let cols: Vec<(i64, i64, i64)> = (0..ow).map(|ox| taps(g, 1, ox)).collect();
    for plane in 0..g.planes {
        // SAFETY: plane `plane` of input and output.
        let (xp, yp) = unsafe {
            (
                x.add((plane * ih * iw) as usize * CB),
                y.add((plane * oh * ow) as usize * CB),
            )
        };
        for oy in 0..oh {
            let rows = taps(g, 0, oy);
            let iy0 = oy * g.strides[0] - g.pads_begin[0];
            for (ox, &colr) in cols.iter().enumerate() {
                let ix0 = ox as i64 * g.strides[1] - g.pads_begin[1];
                // SAFETY: the taps' rows and columns are inside the plane.
                unsafe {
                    window(
                        g,
                        xp,
                        iw,
                        (iy0, rows),
                        (ix0, colr),
                        yp.add(((oy * ow) as usize + ox) * CB),
                    )
                };
            }
        }
    }
}

/// One output vector from its window: rows `iy0 + ky·dh` for ky in `rows.0..rows.1`, columns
/// likewise.
///
/// # Safety
/// Every tap in the ranges lies inside the plane `xp` (`iw` columns); `out` holds 8 floats.
#[inline]
unsafe fn window(
    g: &PoolGeometry,
    xp: *const f32,
    iw: i64,
    rows: (i64, (i64, i64, i64)),
    cols: (i64, (i64, i64, i64)),
    out: *mut f32,
) {
    #[cfg(target_arch = "x86_64")]
    if g.kind != 2 && crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 detected.
        unsafe { avx2::window(g, xp, iw, rows, cols, out) };
        return;
    }
    let (iy0, (ky0, ky1, rc)) = rows;
    let (ix0, (kx0, kx1, cc)) = cols;
    let mut acc = [if g.kind == 0 { f32::NEG_INFINITY } else { 0.0 }; CB];
    for ky in ky0..ky1 {
        let iy = iy0 + ky * g.dilations[0];
        for kx in kx0..kx1 {
            let ix = ix0 + kx * g.dilations[1];
            for (l, a) in acc.iter_mut().enumerate() {
                // SAFETY: caller contract.
                let v = unsafe { *xp.add(((iy * iw + ix) as usize) * CB + l) };
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
        // SAFETY: caller contract.
        unsafe { *out.add(l) = v };
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
    use super::{CB, PoolGeometry};
    use std::arch::x86_64::*;

    /// Max (kind 0) or average (kind 1) of one window.
    ///
    /// # Safety
    /// AVX2 present; as `super::window`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn window(
        g: &PoolGeometry,
        xp: *const f32,
        iw: i64,
        rows: (i64, (i64, i64, i64)),
        cols: (i64, (i64, i64, i64)),
        out: *mut f32,
    ) {
        let (iy0, (ky0, ky1, rc)) = rows;
        let (ix0, (kx0, kx1, cc)) = cols;
        let max = g.kind == 0;
        let dx = (g.dilations[1] as usize) * CB;
        // SAFETY: caller contract.
        unsafe {
            let mut acc = if max {
                _mm256_set1_ps(f32::NEG_INFINITY)
            } else {
                _mm256_setzero_ps()
            };
            for ky in ky0..ky1 {
                let iy = iy0 + ky * g.dilations[0];
                let mut p = xp.add(((iy * iw + ix0 + kx0 * g.dilations[1]) as usize) * CB);
                for _ in kx0..kx1 {
                    let v = _mm256_loadu_ps(p);
                    acc = if max {
                        // NaN wins: max(v, acc) returns acc when either is NaN, so NaN in acc
                        // stays; a NaN v is kept by the blend.
                        let m = _mm256_max_ps(v, acc);
                        _mm256_blendv_ps(m, v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v))
                    } else {
                        _mm256_add_ps(acc, v)
                    };
                    p = p.add(dx);
                }
            }
            if !max {
                acc = _mm256_mul_ps(acc, _mm256_set1_ps(1.0 / (rc * cc) as f32));
            }
            _mm256_storeu_ps(out, acc);
        }
    }
}
