//! Channel-blocked depthwise convolution for small planes: blocks of 16 channels transposed
//! into a zero-padded channel-last buffer, every output position accumulating its taps as
//! channel vectors, transposed back with the epilogue (AVX2 in two 8-channel halves with the
//! 3×3 weights in registers; portable otherwise).

use super::DW_BLOCK;
use crate::conv::{Call, ConvGeometry};

/// 2-D depthwise convolution over blocks of 16 channels stored channel-last: the block's
/// planes are transposed into a zero-padded [row][column][16] buffer, every output position
/// accumulates its taps as 16-channel vectors, and the result is transposed back with the
/// epilogue. Small planes then cost a few vector operations per output instead of per-plane
/// setup.
///
/// # Safety
/// As `conv_f32` for a depthwise geometry with `dims = depthwise_blocked_dims()`.
pub(in crate::conv) unsafe fn depthwise_blocked(g: &ConvGeometry, c: Call, dims: (usize, usize)) {
    crate::multiversion!(depthwise_blocked_body(g, c, dims))
}

#[inline(always)]
pub(in crate::conv) fn depthwise_blocked_body(g: &ConvGeometry, c: Call, (hp, wp): (usize, usize)) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y, scratch) = (c.lo, c.hi, c.y, c.scratch);
    const B: usize = DW_BLOCK;
    let [[ih, iw], [oh, ow], [kh, kw], [s0, s1], [d0, d1], [p0, p1]] = g.plane2();
    let (isz, osz, ks) = (g.isize(), g.osize(), g.ksize());
    let chans = g.m as usize;
    // SAFETY: scratch holds (hp·wp + osz + ks)·B floats (depthwise_scratch()).
    let (xc, yc, wt) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, hp * wp * B),
            std::slice::from_raw_parts_mut(scratch.add(hp * wp * B), osz * B),
            std::slice::from_raw_parts_mut(scratch.add((hp * wp + osz) * B).cast::<[f32; B]>(), ks),
        )
    };
    // Input rows and columns inside the padded extents.
    let rows = ih.min(hp.saturating_sub(p0));
    let cols = iw.min(wp.saturating_sub(p1));
    xc.fill(0.0);
    for b in 0..g.n as usize {
        let mut c0 = 0;
        while c0 < chans {
            let nc = B.min(chans - c0);
            let bv = block_weights(w, bias, c0, nc, wt);
            // Transpose the block's planes into the padded channel-last buffer (padding cells
            // stay zero from the fill; lanes ≥ nc too, as every block writes the same cells).
            for c in 0..nc {
                // SAFETY: input plane (b, c0+c).
                let plane = unsafe {
                    std::slice::from_raw_parts(x.add(g.depthwise_input_plane(b, c0 + c)), isz)
                };
                for r in 0..rows {
                    let src = &plane[r * iw..r * iw + cols];
                    let d = ((r + p0) * wp + p1) * B + c;
                    for (j, v) in src.iter().enumerate() {
                        xc[d + j * B] = *v;
                    }
                }
            }
            if nc < B {
                // Lanes of absent channels: clear what an earlier full block left there.
                for r in 0..rows {
                    for j in 0..cols {
                        let d = ((r + p0) * wp + p1 + j) * B;
                        xc[d + nc..d + B].fill(0.0);
                    }
                }
            }
            // Every output: its taps as 16-channel multiply-adds.
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bv;
                    for ky in 0..kh {
                        let row = (oy * s0 + ky * d0) * wp;
                        for kx in 0..kw {
                            let at = (row + ox * s1 + kx * d1) * B;
                            debug_assert!(at + B <= xc.len());
                            // SAFETY: every tap of every output lies inside the padded extents.
                            let v =
                                unsafe { xc.as_ptr().add(at).cast::<[f32; B]>().read_unaligned() };
                            let wv = wt[ky * kw + kx];
                            acc = std::array::from_fn(|c| acc[c] + wv[c] * v[c]);
                        }
                    }
                    let o = (oy * ow + ox) * B;
                    yc[o..o + B].copy_from_slice(&acc);
                }
            }
            // Back to planes, with the epilogue.
            for c in 0..nc {
                let plane = b * chans + c0 + c;
                // SAFETY: output plane `plane` (and the residual's).
                let (dst, res) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(y.add(plane * osz), osz),
                        if residual.is_null() {
                            None
                        } else {
                            Some(std::slice::from_raw_parts(residual.add(plane * osz), osz))
                        },
                    )
                };
                match res {
                    None => {
                        for (p, d) in dst.iter_mut().enumerate() {
                            *d = crate::clamp_ep(yc[p * B + c], lo, hi);
                        }
                    }
                    Some(r) => {
                        for (p, d) in dst.iter_mut().enumerate() {
                            *d = crate::clamp_ep(yc[p * B + c] + r[p], lo, hi);
                        }
                    }
                }
            }
            c0 += B;
        }
    }
}

/// The weights of channels c0..c0+nc (nc ≤ DW_BLOCK) as one channel vector per kernel tap
/// into `wt` (`wt.len()` taps), lanes past nc zero; returns their bias the same way. The
/// block setup of both channel-blocked depthwise kernels.
pub(in crate::conv) fn block_weights(
    w: *const f32,
    bias: *const f32,
    c0: usize,
    nc: usize,
    wt: &mut [[f32; DW_BLOCK]],
) -> [f32; DW_BLOCK] {
    let ks = wt.len();
    for (t, wv) in wt.iter_mut().enumerate() {
        *wv = std::array::from_fn(|c| {
            if c < nc {
                // SAFETY: c < nc, so channel c0 + c < c0 + nc ≤ the channel count, and t < ks:
                // inside the caller's weights (ks floats per channel).
                unsafe { *w.add((c0 + c) * ks + t) }
            } else {
                0.0
            }
        });
    }
    std::array::from_fn(|c| {
        if c < nc && !bias.is_null() {
            // SAFETY: bias is non-null here, and then holds one float per channel; c0 + c < c0 +
            // nc.
            unsafe { *bias.add(c0 + c) }
        } else {
            0.0
        }
    })
}

/// Transposes a 16×16 block of floats held as 16 row vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(in crate::conv) fn transpose16(r: &mut [std::arch::x86_64::__m512; 16]) {
    use std::arch::x86_64::*;
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for i in 0..4 {
        u[4 * i] = _mm512_shuffle_ps::<0x44>(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_shuffle_ps::<0xEE>(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_shuffle_ps::<0x44>(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_shuffle_ps::<0xEE>(t[4 * i + 1], t[4 * i + 3]);
    }
    let mut v = [_mm512_setzero_ps(); 16];
    for i in 0..2 {
        for j in 0..4 {
            v[8 * i + j] = _mm512_shuffle_f32x4::<0x88>(u[8 * i + j], u[8 * i + 4 + j]);
            v[8 * i + 4 + j] = _mm512_shuffle_f32x4::<0xDD>(u[8 * i + j], u[8 * i + 4 + j]);
        }
    }
    for j in 0..8 {
        r[j] = _mm512_shuffle_f32x4::<0x88>(v[j], v[8 + j]);
        r[8 + j] = _mm512_shuffle_f32x4::<0xDD>(v[j], v[8 + j]);
    }
}

/// `depthwise_blocked` with AVX2: the 16-channel block as two 8-channel halves,
/// planes to channel-last and back through 8×8 register transposes, each half's output
/// positions with its kernel taps' weight vectors in registers (3×3).
///
/// # Safety
/// As `conv_f32` for a depthwise geometry with `dims = depthwise_blocked_dims()`; AVX2 and
/// FMA present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(in crate::conv) unsafe fn depthwise_blocked_avx2(
    g: &ConvGeometry,
    c: Call,
    (hp, wp): (usize, usize),
) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y, scratch) = (c.lo, c.hi, c.y, c.scratch);
    use std::arch::x86_64::*;
    const B: usize = DW_BLOCK;
    let [[ih, iw], [oh, ow], [kh, kw], [s0, s1], [d0, d1], [p0, p1]] = g.plane2();
    let (osz, ks) = (g.osize(), g.ksize());
    let chans = g.m as usize;
    let (xc, yc, wt) = (
        scratch,
        scratch.wrapping_add(hp * wp * B),
        scratch.wrapping_add((hp * wp + osz) * B),
    );
    // Input rows and columns inside the padded extents.
    let rows = ih.min(hp.saturating_sub(p0));
    let cols = iw.min(wp.saturating_sub(p1));
    let lanes = crate::avx2::first_lanes;
    let (lo_v, hi_v) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
    // SAFETY: (whole body) xc holds hp·wp, yc osz and wt ks 16-float cells (scratch sized by
    // depthwise_scratch()); planes are read and written only at positions inside them (the
    // last vector of a row or plane masked); every tap of every output lies inside the
    // padded extents.
    unsafe {
        // Padding cells stay zero for every block; interior cells are rewritten per block.
        std::slice::from_raw_parts_mut(xc, hp * wp * B).fill(0.0);
        for b in 0..g.n as usize {
            let mut c0 = 0;
            while c0 < chans {
                let nc = B.min(chans - c0);
                let bv = block_weights(
                    w,
                    bias,
                    c0,
                    nc,
                    std::slice::from_raw_parts_mut(wt.cast::<[f32; B]>(), ks),
                );
                // 1. Planes → channel-last, 8 columns × 8 channels at a time.
                for r in 0..rows {
                    let mut j = 0;
                    while j < cols {
                        let n = (cols - j).min(8);
                        let m = lanes(n);
                        let d = xc.add(((r + p0) * wp + p1 + j) * B);
                        for h in 0..2 {
                            let mut v = [_mm256_setzero_ps(); 8];
                            for (c, vc) in v.iter_mut().enumerate() {
                                if 8 * h + c < nc {
                                    *vc = _mm256_maskload_ps(
                                        x.add(
                                            g.depthwise_input_plane(b, c0 + 8 * h + c) + r * iw + j,
                                        ),
                                        m,
                                    );
                                }
                            }
                            v = crate::avx2::transpose8(v);
                            for (q, vq) in v.iter().enumerate().take(n) {
                                _mm256_storeu_ps(d.add(q * B + 8 * h), *vq);
                            }
                        }
                        j += n;
                    }
                }
                // 2. Every output position, one 8-channel half at a time: its taps as FMAs
                //    (3×3: the nine weight vectors stay in registers).
                for h in 0..2 {
                    if 8 * h >= nc {
                        break;
                    }
                    let bias_v = _mm256_loadu_ps(bv.as_ptr().add(8 * h));
                    let (xh, yh, wh) = (xc.add(8 * h), yc.add(8 * h), wt.add(8 * h));
                    if (kh, kw) == (3, 3) {
                        let wv: [__m256; 9] =
                            std::array::from_fn(|t| _mm256_loadu_ps(wh.add(t * B)));
                        for oy in 0..oh {
                            let rows3: [*const f32; 3] = std::array::from_fn(|ky| {
                                xh.add((oy * s0 + ky * d0) * wp * B).cast_const()
                            });
                            for ox in 0..ow {
                                let mut acc = bias_v;
                                for (ky, r) in rows3.iter().enumerate() {
                                    for kx in 0..3 {
                                        let v = _mm256_loadu_ps(r.add((ox * s1 + kx * d1) * B));
                                        acc = _mm256_fmadd_ps(wv[ky * 3 + kx], v, acc);
                                    }
                                }
                                _mm256_storeu_ps(yh.add((oy * ow + ox) * B), acc);
                            }
                        }
                    } else {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let mut acc = bias_v;
                                for ky in 0..kh {
                                    let row = (oy * s0 + ky * d0) * wp + ox * s1;
                                    for kx in 0..kw {
                                        let v = _mm256_loadu_ps(xh.add((row + kx * d1) * B));
                                        let wv = _mm256_loadu_ps(wh.add((ky * kw + kx) * B));
                                        acc = _mm256_fmadd_ps(wv, v, acc);
                                    }
                                }
                                _mm256_storeu_ps(yh.add((oy * ow + ox) * B), acc);
                            }
                        }
                    }
                }
                // 3. Channel-last → planes with the epilogue, 8 positions × 8 channels at a
                //    time.
                let yb = y.add((b * chans + c0) * osz);
                let rb = crate::opt_add(residual, (b * chans + c0) * osz);
                let mut p = 0;
                while p < osz {
                    let n = (osz - p).min(8);
                    let m = lanes(n);
                    for h in 0..2 {
                        if 8 * h >= nc {
                            break;
                        }
                        let mut v = [_mm256_setzero_ps(); 8];
                        for (q, vq) in v.iter_mut().enumerate().take(n) {
                            *vq = _mm256_loadu_ps(yc.add((p + q) * B + 8 * h));
                        }
                        v = crate::avx2::transpose8(v);
                        for (c, vc) in v.iter().enumerate().take(nc - 8 * h) {
                            let ch = 8 * h + c;
                            let mut o = *vc;
                            if !rb.is_null() {
                                o = _mm256_add_ps(o, _mm256_maskload_ps(rb.add(ch * osz + p), m));
                            }
                            // max(lo, o) / min(hi, o): a NaN goes through (`crate::clamp_ep`).
                            o = _mm256_min_ps(hi_v, _mm256_max_ps(lo_v, o));
                            if n == 8 {
                                _mm256_storeu_ps(yb.add(ch * osz + p), o);
                            } else {
                                _mm256_maskstore_ps(yb.add(ch * osz + p), m, o);
                            }
                        }
                    }
                    p += n;
                }
                c0 += B;
            }
        }
    }
}
