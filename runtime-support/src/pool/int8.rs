//! Max pooling of uint8 and int8 planes (MaxPool of QOperator models and of the quantized
//! values of QDQ models): 2-D windows of a `PoolGeometry` of kind max, planes split over the
//! run's threads. Padding never wins a window (ONNX pads are smaller than the kernel), so
//! it is skipped rather than materialized; each tap's valid output columns are computed
//! once per row, and unit-stride taps are an elementwise maximum of two byte runs, which
//! vectorizes.

use super::PoolGeometry;
use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK};
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params;

/// Longest padded row `pool_plane`'s separable pass keeps on the stack.
const ROW: usize = 4096;

/// The separable pass's two padded rows, made once per task (every row is filled before
/// it is read: making them per plane cost more than pooling a small plane).
struct Rows<T>([T; ROW], [T; ROW]);

/// One plane of `T` (`u8` or `i8`). Separably when a padded row fits in `ROW`: per output
/// row, the maximum over the window's rows (contiguous passes), padded with `lowest` on
/// both sides; the maximum over the window's columns at every position (contiguous
/// passes); then every stride-th of those. Padding holds the type's lowest value, which
/// never changes a maximum of real values. Otherwise tap by tap.
fn pool_plane<T: Copy + Ord>(
    g: &PoolGeometry,
    x: &[T],
    y: &mut [T],
    lowest: T,
    rows: &mut Rows<T>,
) {
    let [[ih, iw], [oh, ow], [kh, kw], [sh, sw], [dh, dw], [ph, pw]] = g.window();
    let (oh, ow) = (oh as usize, ow as usize);
    // Columns the windows reach, from -pw: positions 0 .. (ow-1)·sw + (kw-1)·dw + 1.
    let span = (ow as i64 - 1) * sw + (kw - 1) * dw + 1;
    let width = span.max(pw + iw) as usize;
    if width <= ROW {
        let Rows(vrow, hrow) = rows;
        let hn = ((ow as i64 - 1) * sw + 1) as usize;
        for oy in 0..oh {
            vrow[..width].fill(lowest);
            for ky in 0..kh {
                let iy = oy as i64 * sh + ky * dh - ph;
                if iy < 0 || iy >= ih {
                    continue;
                }
                let row = &x[(iy * iw) as usize..((iy + 1) * iw) as usize];
                for (v, &r) in vrow[pw as usize..(pw + iw) as usize].iter_mut().zip(row) {
                    *v = (*v).max(r);
                }
            }
            hrow[..hn].fill(lowest);
            for kx in 0..kw {
                let off = (kx * dw) as usize;
                for (h, &v) in hrow[..hn].iter_mut().zip(&vrow[off..off + hn]) {
                    *h = (*h).max(v);
                }
            }
            let out = &mut y[oy * ow..(oy + 1) * ow];
            for (ox, o) in out.iter_mut().enumerate() {
                *o = hrow[ox * sw as usize];
            }
        }
        return;
    }
    for oy in 0..oh {
        let out = &mut y[oy * ow..(oy + 1) * ow];
        out.fill(lowest);
        for ky in 0..kh {
            let iy = oy as i64 * sh + ky * dh - ph;
            if iy < 0 || iy >= ih {
                continue;
            }
            let row = &x[(iy * iw) as usize..((iy + 1) * iw) as usize];
            for kx in 0..kw {
                // Column of output ox: ox·sw + off, inside [0, iw) for ox in ox0..ox1.
                let off = kx * dw - pw;
                let ox0 = if off < 0 { (-off + sw - 1) / sw } else { 0 };
                let ox1 = if iw - 1 - off < 0 {
                    0
                } else {
                    ((iw - 1 - off) / sw + 1).min(ow as i64)
                };
                if ox0 >= ox1 {
                    continue;
                }
                let (ox0, ox1) = (ox0 as usize, ox1 as usize);
                if sw == 1 {
                    let src = &row[(ox0 as i64 + off) as usize..][..ox1 - ox0];
                    for (o, &v) in out[ox0..ox1].iter_mut().zip(src) {
                        *o = (*o).max(v);
                    }
                } else {
                    for (ox, o) in out.iter_mut().enumerate().take(ox1).skip(ox0) {
                        *o = (*o).max(row[(ox as i64 * sw + off) as usize]);
                    }
                }
            }
        }
    }
}

/// `pool_plane`'s separable pass on AVX-512 BW, for bytes of either signedness (`SIGNED`:
/// int8): 64 bytes a step, each input row's tail by masked loads and stores (no scalar
/// remainder: the generic loops, compiled for SSE2, spent most of QDQ SqueezeNet's pools in
/// their remainders), the stride-2 subsampling by narrowing 16-bit lanes to their low
/// bytes. False (nothing written) when the padded rows and their 64 bytes of slack do not
/// fit in `ROW`.
///
/// # Safety
/// AVX-512 F, BW and VL are present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn separable_avx512<const SIGNED: bool>(
    g: &PoolGeometry,
    x: &[u8],
    y: &mut [u8],
    rows: &mut Rows<u8>,
) -> bool {
    use std::arch::x86_64::*;
    let [ih, iw] = g.input.map(|v| v as usize);
    let [oh, ow] = g.output.map(|v| v as usize);
    let [kh, kw] = g.kernel.map(|v| v as usize);
    let [sh, sw] = g.strides.map(|v| v as usize);
    let [dh, dw] = g.dilations.map(|v| v as usize);
    let [ph, pw] = g.pads_begin.map(|v| v as usize);
    if oh == 0 || ow == 0 || kw == 0 {
        // Nothing to pool here; the generic path handles empty planes.
        return false;
    }
    let hn = (ow - 1).saturating_mul(sw).saturating_add(1);
    let span = ((kw - 1).saturating_mul(dw)).saturating_add(hn);
    let width = span.max(pw.saturating_add(iw));
    // The column pass reads vrow to width + 63 and writes hrow to hn + 63; the stride-2
    // narrowing reads hrow to 2·ow + 62 < hn + 64.
    if width.saturating_add(64) > ROW || x.len() < ih * iw || y.len() < oh * ow {
        return false;
    }
    let lowest: u8 = if SIGNED { i8::MIN as u8 } else { 0 };
    let max = |a: __m512i, b: __m512i| {
        if SIGNED {
            _mm512_max_epi8(a, b)
        } else {
            _mm512_max_epu8(a, b)
        }
    };
    let lo = _mm512_set1_epi8(lowest as i8);
    let Rows(vrow, hrow) = rows;
    // Outside [pw, pw + iw) the padded row holds `lowest` for the whole plane.
    vrow[..width + 64].fill(lowest);
    let (vp, hp) = (vrow.as_mut_ptr(), hrow.as_mut_ptr());
    for oy in 0..oh {
        let mut c = 0;
        while c < iw {
            let n = (iw - c).min(64);
            let m: __mmask64 = if n == 64 { !0 } else { (1u64 << n) - 1 };
            let mut acc = lo;
            for ky in 0..kh {
                let iy = (oy * sh + ky * dh).wrapping_sub(ph);
                if iy >= ih {
                    continue;
                }
                // SAFETY: the masked bytes are row iy's columns c..c+n, inside x (checked
                // above); masked-off bytes are not read.
                let v = unsafe { _mm512_maskz_loadu_epi8(m, x.as_ptr().add(iy * iw + c).cast()) };
                acc = max(acc, v);
            }
            // SAFETY: pw + c + n ≤ pw + iw ≤ width, inside vrow.
            unsafe { _mm512_mask_storeu_epi8(vp.add(pw + c).cast(), m, acc) };
            c += 64;
        }
        let mut i = 0;
        while i < hn {
            let mut acc = lo;
            for kx in 0..kw {
                // SAFETY: i + kx·dw + 64 ≤ hn + 63 + (kw - 1)·dw < width + 64 ≤ ROW.
                acc = max(acc, unsafe {
                    _mm512_loadu_si512(vp.add(i + kx * dw).cast())
                });
            }
            // SAFETY: i + 64 < hn + 64 ≤ width + 64 ≤ ROW.
            unsafe { _mm512_storeu_si512(hp.add(i).cast(), acc) };
            i += 64;
        }
        let out = &mut y[oy * ow..(oy + 1) * ow];
        match sw {
            1 => out.copy_from_slice(&hrow[..ow]),
            2 => {
                let mut ox = 0;
                while ox < ow {
                    let n = (ow - ox).min(32);
                    // SAFETY: 2·ox + 64 ≤ 2·ow + 62 < hn + 64 ≤ ROW (hn = 2·ow - 1).
                    let v = unsafe { _mm512_loadu_si512(hp.add(2 * ox).cast()) };
                    let m: __mmask32 = if n == 32 { !0 } else { (1u32 << n) - 1 };
                    // SAFETY: outputs ox..ox+n of the row.
                    unsafe {
                        _mm256_mask_storeu_epi8(
                            out.as_mut_ptr().add(ox).cast(),
                            m,
                            _mm512_cvtepi16_epi8(v),
                        )
                    };
                    ox += 32;
                }
            }
            _ => {
                for (ox, o) in out.iter_mut().enumerate() {
                    *o = hrow[ox * sw];
                }
            }
        }
    }
    true
}

/// Max pooling of `planes` planes of bytes, int8 (`signed`) or uint8.
///
/// # Safety
/// `x` and `y` hold the planes the geometry describes (`planes · input` and `planes ·
/// output` bytes); `par` as `Par::for_ranges`.
pub unsafe fn max_pool_i8(g: &PoolGeometry, signed: bool, x: *const u8, y: *mut u8, par: Par) {
    let isz = (g.input[0] * g.input[1]) as usize;
    let osz = (g.output[0] * g.output[1]) as usize;
    let (xa, ya) = (x as usize, y as usize);
    let cost = osz * (g.kernel[0] * g.kernel[1]) as usize;
    let job = |planes: std::ops::Range<usize>, _: usize| {
        let mut rows_u8 = Rows([0u8; ROW], [0u8; ROW]);
        let mut rows_i8 = Rows([i8::MIN; ROW], [i8::MIN; ROW]);
        for p in planes {
            // SAFETY: plane p of x and y lies inside them (caller); each plane is written
            // by one task.
            unsafe {
                let xs = std::slice::from_raw_parts((xa as *const u8).add(p * isz), isz);
                let ys = std::slice::from_raw_parts_mut((ya as *mut u8).add(p * osz), osz);
                #[cfg(target_arch = "x86_64")]
                if crate::isa::avx512()
                    && if signed {
                        separable_avx512::<true>(g, xs, ys, &mut rows_u8)
                    } else {
                        separable_avx512::<false>(g, xs, ys, &mut rows_u8)
                    }
                {
                    continue;
                }
                if signed {
                    let xs = std::slice::from_raw_parts(xs.as_ptr() as *const i8, isz);
                    let ys = std::slice::from_raw_parts_mut(ys.as_mut_ptr() as *mut i8, osz);
                    pool_plane(g, xs, ys, i8::MIN, &mut rows_i8);
                } else {
                    pool_plane(g, xs, ys, 0u8, &mut rows_u8);
                }
            }
        }
    };
    // SAFETY: tasks write disjoint planes.
    unsafe { par.for_ranges(g.planes as usize, cost, &job) };
}

/// C ABI entry point: max pooling of bytes; `signed` 1 for int8, 0 for uint8. Returns
/// `ONNXC_ERR_PARAMS`, touching nothing, for a blob that is not a valid max-pool
/// `PoolGeometry`.
///
/// # Safety
/// `params` points to a sealed blob; `x`, `y` as `max_pool_i8`; `threads` as
/// `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_max_pool_i8(
    params: *const i64,
    x: *const u8,
    y: *mut u8,
    signed: i64,
    threads: *const Threads,
) -> Status {
    let g = params::decode_blob!(params, PoolGeometry::decode);
    if g.kind != 0 {
        return ONNXC_ERR_PARAMS;
    }
    // SAFETY: forwarded contract, the geometry validated.
    unsafe { max_pool_i8(&g, signed != 0, x, y, Par::from_raw(threads)) };
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;

    /// Against a direct reference (padding skipped, as ONNX's -inf padding never wins).
    #[test]
    fn matches_a_direct_reference() {
        // The last row is wider than a stack row: the direct path.
        for ((ih, iw), kernel, strides, dilations, pads) in [
            ((9i64, 11i64), [3, 3], [2, 2], [1, 1], [1, 1]),
            ((9, 11), [2, 2], [2, 2], [1, 1], [0, 0]),
            ((9, 11), [3, 2], [1, 3], [2, 1], [2, 1]),
            ((9, 11), [1, 1], [1, 1], [1, 1], [0, 0]),
            // Rows of several 64-byte steps and a partial one (AVX-512): stride 2, stride 1,
            // stride 3 with dilation, an output row of more than 32 at stride 2.
            ((20, 150), [3, 3], [2, 2], [1, 1], [1, 1]),
            ((7, 130), [3, 3], [1, 1], [1, 1], [1, 1]),
            ((11, 200), [2, 3], [2, 3], [1, 2], [0, 1]),
            ((5, 64), [3, 3], [2, 2], [1, 1], [0, 0]),
            ((3, ROW as i64 + 7), [2, 3], [1, 2], [1, 1], [1, 1]),
        ] {
            let out = |d: usize, i: i64| {
                (i + 2 * pads[d] - ((kernel[d] - 1) * dilations[d] + 1)) / strides[d] + 1
            };
            let g = PoolGeometry {
                kind: 0,
                count_include_pad: false,
                p: 0,
                planes: 5,
                input: [ih, iw],
                output: [out(0, ih), out(1, iw)],
                kernel,
                strides,
                dilations,
                pads_begin: pads,
                pads_end: pads,
            };
            g.validate().expect("valid geometry");
            let n = (5 * ih * iw) as usize;
            let x: Vec<u8> = (0..n).map(|i| (i * 7919 % 251) as u8).collect();
            let [oh, ow] = g.output;
            for signed in [false, true] {
                let key = |v: u8| if signed { v as i8 as i32 } else { v as i32 };
                let mut want = vec![0u8; (5 * oh * ow) as usize];
                for p in 0..5 {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut best: Option<u8> = None;
                            for ky in 0..kernel[0] {
                                for kx in 0..kernel[1] {
                                    let iy = oy * strides[0] + ky * dilations[0] - pads[0];
                                    let ix = ox * strides[1] + kx * dilations[1] - pads[1];
                                    if (0..ih).contains(&iy) && (0..iw).contains(&ix) {
                                        let v = x[(p * ih * iw + iy * iw + ix) as usize];
                                        if best.is_none_or(|b| key(v) > key(b)) {
                                            best = Some(v);
                                        }
                                    }
                                }
                            }
                            want[(p * oh * ow + oy * ow + ox) as usize] = best.expect("a tap");
                        }
                    }
                }
                let got = same_bits_on_every_pool(&"max_pool_i8", |_, threads| {
                    let mut y = vec![0u8; want.len()];
                    // SAFETY: x and y hold the planes; the pool is a test pool.
                    unsafe {
                        max_pool_i8(
                            &g,
                            signed,
                            x.as_ptr(),
                            y.as_mut_ptr(),
                            Par::from_raw(threads),
                        )
                    };
                    y.iter().map(|&v| v as f32).collect()
                });
                let got: Vec<u8> = got.iter().map(|&v| v as u8).collect();
                assert_eq!(got, want, "{g:?} signed {signed}");
            }
        }
    }
}
