//! 2-D pooling over blocked planes (`[planes][h][w][8]`): max, average (with or without the
//! padding in the divisor) and Lp, one 8-channel vector per tap. Each output reads only the
//! taps inside the input (the valid window rows and columns are a contiguous range), so
//! nothing is padded or copied; outputs whose whole window is inside take a loop with the
//! tap ranges fixed.

use super::CB;
use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params::{self, decoded};
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

/// C ABI entry point (`planes` in the geometry counts blocks). Returns `ONNXC_ERR_PARAMS`,
/// touching nothing, when `params` is not a valid `PoolGeometry::encode` blob.
///
/// The planes are split over the run's `threads`.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); `threads` as `Par::from_raw`;
/// otherwise as `pool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool_nchwc_f32(
    params: *const i64,
    x: *const f32,
    y: *mut f32,
    threads: *const crate::par::Threads,
) -> Status {
    let g = params::decode_blob!(params, PoolGeometry::decode);
    // The blocked planes: 8 floats per position.
    decoded!(params::product(
        [g.planes, g.input[0], g.input[1], CB as i64],
        "too large"
    ));
    decoded!(params::product(
        [g.planes, g.output[0], g.output[1], CB as i64],
        "too large"
    ));
    let isz = (g.input[0] * g.input[1]) as usize * CB;
    let osz = (g.output[0] * g.output[1]) as usize * CB;
    let cost = osz * (g.kernel[0] * g.kernel[1]).max(1) as usize + isz;
    // SAFETY: forwarded contract, the geometry validated; each task pools its own planes.
    unsafe {
        crate::par::Par::from_raw(threads).for_ranges(g.planes as usize, cost, &|p, _| {
            let gp = PoolGeometry {
                planes: p.len() as i64,
                ..g.clone()
            };
            pool(&gp, x.add(p.start * isz), y.add(p.start * osz))
        })
    };
    ONNXC_OK
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
        match (g.kind == 0, separable(g), g.kernel) {
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm and the kernel is 3×3.
            (true, true, [3, 3]) => unsafe { separable_plane::<true, 3, 3>(g, rows, cols, xp, yp) },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm and the kernel is 2×2.
            (true, true, [2, 2]) => unsafe { separable_plane::<true, 2, 2>(g, rows, cols, xp, yp) },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm; KH = KW = 0.
            (true, true, _) => unsafe { separable_plane::<true, 0, 0>(g, rows, cols, xp, yp) },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm and the kernel is 3×3.
            (false, true, [3, 3]) => unsafe {
                separable_plane::<false, 3, 3>(g, rows, cols, xp, yp)
            },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm and the kernel is 2×2.
            (false, true, [2, 2]) => unsafe {
                separable_plane::<false, 2, 2>(g, rows, cols, xp, yp)
            },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract); `separable(g)` holds in this arm; KH = KW = 0.
            (false, true, _) => unsafe { separable_plane::<false, 0, 0>(g, rows, cols, xp, yp) },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract).
            (true, false, _) => unsafe { plane_of::<true>(g, rows, cols, xp, yp) },
            // SAFETY: AVX2 is present and xp/yp are one input and one output plane (this function's
            // contract).
            (false, false, _) => unsafe { plane_of::<false>(g, rows, cols, xp, yp) },
        }
    }

    /// Column vectors `separable_plane` keeps on the stack per chunk of outputs (8 KB).
    const CHUNK_COLS: usize = 256;

    /// Whether `separable_plane` computes this pool: undilated columns, every input column
    /// between a row's first and last tap is a tap of some output (stride ≤ kernel), and a
    /// window's columns fit a chunk.
    fn separable(g: &PoolGeometry) -> bool {
        let (kw, sw) = (g.kernel[1], g.strides[1]);
        g.dilations[1] == 1 && sw <= kw && (kw + sw) as usize <= CHUNK_COLS
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

    /// Max or average of one plane in two passes per output row: the window's valid input
    /// rows are reduced into one vector per input column (each column read once per output
    /// row, and no loop-carried chain longer than the kernel's height), then each output
    /// reduces its valid columns of those. A 3×3/2 window costs 6 reductions instead of 9
    /// and a 3×3/1 window 4. The columns of a chunk of outputs go through an 8 KB stack
    /// array; each is written and read back as one whole aligned vector, so the loads are
    /// forwarded from the stores.
    ///
    /// Max propagates NaN, as `fold` does; the average sums the window in a different order
    /// than `plane_of` (rows first), so results may differ in the last bits.
    ///
    /// `KH`/`KW` (0: any) fix the tap loops of whole windows at compile time, so they are
    /// unrolled; windows cut by the padding take the counted loops.
    ///
    /// # Safety
    /// AVX2 present; `separable(g)`; `KH`/`KW` are 0 or the kernel; `xp`/`yp` are one input
    /// and one output plane.
    #[target_feature(enable = "avx2")]
    unsafe fn separable_plane<const MAX: bool, const KH: usize, const KW: usize>(
        g: &PoolGeometry,
        rows: &Axis,
        cols: &Axis,
        xp: *const f32,
        yp: *mut f32,
    ) {
        let iw = g.input[1];
        let ow = g.output[1] as usize;
        let (kw, sw) = (g.kernel[1], g.strides[1]);
        let row_step = g.dilations[0] as usize * iw as usize * CB;
        // Outputs per chunk: their columns span (n − 1)·sw + kw ≤ CHUNK_COLS.
        let per_chunk = ((CHUNK_COLS as i64 - kw) / sw + 1).max(1) as usize;
        let mut colv = [const { std::mem::MaybeUninit::<__m256>::uninit() }; CHUNK_COLS];
        // SAFETY: rows and columns read are the valid taps of some output (inside the
        // plane); `colv` indices are below `hi − lo ≤ CHUNK_COLS`, and an output reads only
        // columns of its valid taps, which the chunk wrote; outputs inside the plane.
        unsafe {
            for (oy, &(ky0, ky1, rc)) in rows.taps.iter().enumerate() {
                let yrow = yp.add(oy * ow * CB);
                let nrows = ky1 - ky0;
                if nrows == 0 {
                    // No valid row: max gives −∞ and the average 0 over its divisor (taps
                    // counted with the padding), as `plane_of` does.
                    for ox in 0..ow {
                        let v = if MAX {
                            _mm256_set1_ps(f32::NEG_INFINITY)
                        } else {
                            _mm256_set1_ps(0.0 * (1.0 / (rc * cols.taps[ox].2) as f32))
                        };
                        _mm256_storeu_ps(yrow.add(ox * CB), v);
                    }
                    continue;
                }
                let row0 = rows.start[oy] + (ky0 * g.dilations[0] as usize) as i64;
                let top = xp.add(row0 as usize * iw as usize * CB);
                let mut a = 0;
                while a < ow {
                    let b = (a + per_chunk).min(ow);
                    // Input columns [lo, hi) hold every valid tap of outputs a..b (windows
                    // wholly in the padding may point outside the plane: clamp).
                    let lo = (cols.start[a] + cols.taps[a].0 as i64).clamp(0, iw);
                    let hi = (cols.start[b - 1] + cols.taps[b - 1].1 as i64).clamp(lo, iw);
                    let colp = colv.as_mut_ptr() as *mut f32;
                    if KH != 0 && nrows == KH {
                        for c in lo..hi {
                            let v = fold_run::<MAX>(top.add(c as usize * CB), KH, row_step);
                            _mm256_storeu_ps(colp.add((c - lo) as usize * CB), v);
                        }
                    } else {
                        for c in lo..hi {
                            let v = fold_run::<MAX>(top.add(c as usize * CB), nrows, row_step);
                            _mm256_storeu_ps(colp.add((c - lo) as usize * CB), v);
                        }
                    }
                    for ox in a..b {
                        let (kx0, kx1, cc) = cols.taps[ox];
                        let n = kx1 - kx0;
                        let first = (cols.start[ox] + kx0 as i64 - lo) as usize;
                        let first = colp.wrapping_add(first.wrapping_mul(CB)) as *const f32;
                        let mut acc = if KW != 0 && n == KW {
                            fold_run::<MAX>(first, KW, CB)
                        } else if n > 0 {
                            fold_run::<MAX>(first, n, CB)
                        } else if MAX {
                            _mm256_set1_ps(f32::NEG_INFINITY)
                        } else {
                            _mm256_setzero_ps()
                        };
                        if !MAX {
                            acc = _mm256_mul_ps(acc, _mm256_set1_ps(1.0 / (rc * cc) as f32));
                        }
                        _mm256_storeu_ps(yrow.add(ox * CB), acc);
                    }
                    a = b;
                }
            }
        }
    }

    /// Folds the `n ≥ 1` vectors `step` floats apart from `p`. Inlined where `n` is a
    /// constant (`KH`/`KW`), its loop is unrolled.
    ///
    /// # Safety
    /// AVX2 present; the `n` vectors are readable.
    #[inline(always)]
    unsafe fn fold_run<const MAX: bool>(p: *const f32, n: usize, step: usize) -> __m256 {
        // SAFETY: forwarded.
        unsafe {
            let mut acc = _mm256_loadu_ps(p);
            for k in 1..n {
                acc = fold::<MAX>(acc, _mm256_loadu_ps(p.add(k * step)));
            }
            acc
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
