//! 2-D depthwise convolution in AVX-512 registers, reading the input planes in place: no
//! zero-padded copy and no transposes. Padding columns are handled by masked loads (an
//! AVX-512 load suppresses faults on masked-off lanes, so a vector that starts before or
//! ends after a row reads only its valid lanes), padding rows by skipping them, and the
//! epilogue (bias, residual, clamp) is applied on the way out.
//!
//! Outputs go 16 columns of a row per vector, strip by strip (the strip's column masks
//! computed once). The common kernels — 3×3, 5×5 and 7×7 (ConvNeXt) at stride 1, 3×3 and
//! 5×5 at stride 2,
//! undilated — are register-blocked over several output rows: each input row vector is
//! loaded once per block and feeds every output row whose window covers it (3×3 at stride
//! 1 over 8 rows: 30 loads for 72 FMAs instead of one load per FMA), weights stay in
//! registers, and blocks whose rows are all inside the plane skip the row checks. At
//! stride 2 (3×3 and 5×5) the even and odd input columns come from three loaded vectors
//! through lane permutes. Each plane's blocks prefetch a slice of the next plane, so a
//! layer whose input is in L3 is not bound by its latency. Other kernels, strides (horizontal 1 or 2) and dilations take a one-row loop
//! with a load per tap.
//!
//! Zen 5, one channel plane after another (µs per layer, onnxruntime's NCHWc kernels in
//! MobileNet/ShuffleNet in brackets): 3×3/1 32×112² 70 (96), 128×56² 69 (95), 256×28² 31
//! (55), 512×14² 18 (35), 136×28² 16 (25), 544×7² 12 (11); 3×3/2 64×112² 68 (64), 128×56²
//! 29 (34), 112×56² 25 (24), 256×28² 14 (21). The transposing channel-blocked kernel it
//! replaces ran 1.4-3× slower (it stays for AVX2). Narrow planes waste lanes (7 of 16 at
//! 7×7), which is where it is weakest.

use super::ConvGeometry;
use std::arch::x86_64::*;

const L: usize = 16;
/// Output rows per register block of the stride-2 kernel (more spilled registers).
const R: usize = 4;
/// Widest kernel row at horizontal stride 2 (its taps come from three loaded vectors).
const MAX_KW_S2: usize = 17;

/// Whether the in-place kernels take this geometry (2-D depthwise, horizontal stride 1 —
/// any dilation — or 2 — undilated, kernel rows up to `MAX_KW_S2`).
pub(super) fn supported(g: &ConvGeometry) -> bool {
    if g.input.len() != 2 || !g.is_depthwise() || g.ksize() == 0 {
        return false;
    }
    if g.output.iter().chain(&g.input).any(|&d| d <= 0)
        || g.strides[0] < 1
        || g.dilations.iter().any(|&d| d < 1)
        || g.pads.iter().any(|&p| p < 0)
    {
        return false;
    }
    match g.strides[1] {
        1 => true,
        2 => g.dilations[1] == 1 && g.kernel[1] as usize <= MAX_KW_S2,
        _ => false,
    }
}

#[inline(always)]
fn lanes(n: usize) -> __mmask16 {
    if n >= L {
        0xFFFF
    } else {
        ((1u32 << n) - 1) as u16
    }
}

/// Lanes `l` of a vector starting at column `c` (of a row of `w` columns) with `0 ≤ c + l < w`.
#[inline(always)]
fn col_mask(c: isize, w: isize) -> __mmask16 {
    let lo = (-c).clamp(0, L as isize) as u32;
    let hi = (w - c).clamp(0, L as isize) as u32;
    if hi <= lo {
        0
    } else {
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16
    }
}

/// The convolution (every batch and channel).
///
/// # Safety
/// AVX-512F/BW/DQ/VL and FMA present; `supported(g)`; `x`, `y` (and `residual` unless null)
/// hold the geometry's tensors, `w` `m·ksize` weights, `bias` null or `m` floats.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn depthwise(g: &ConvGeometry, c: super::Call) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y) = (c.lo, c.hi, c.y);
    let (osz, ks) = (g.osize(), g.ksize());
    let chans = g.m as usize;
    let undilated = g.dilations == [1, 1];
    let k = (g.kernel[0], g.kernel[1]);
    let s = (g.strides[0], g.strides[1]);
    // SAFETY: AVX-512F/BW/DQ/VL and FMA are present and `supported(g)` holds (the caller's
    // contract); plane b·chans + ch of x, y and a non-null residual, and channel ch's ks
    // weights and bias, lie inside the tensors the contract describes.
    unsafe {
        for b in 0..g.n as usize {
            for ch in 0..chans {
                let plane = b * chans + ch;
                let ep = Ep {
                    bias: _mm512_set1_ps(if bias.is_null() { 0.0 } else { *bias.add(ch) }),
                    lo: _mm512_set1_ps(lo),
                    hi: _mm512_set1_ps(hi),
                    resid: crate::opt_add(residual, plane * osz),
                };
                let xp = x.add(g.depthwise_input_plane(b, ch));
                let wp = w.add(ch * ks);
                let yp = y.add(plane * osz);
                // The input plane after this one, prefetched a slice per register block.
                let next = if ch + 1 < chans {
                    x.add(g.depthwise_input_plane(b, ch + 1))
                } else if b + 1 < g.n as usize {
                    x.add(g.depthwise_input_plane(b + 1, 0))
                } else {
                    std::ptr::null()
                };
                let ahead = Ahead {
                    next,
                    floats: g.isize(),
                };
                match (undilated, k, s) {
                    (true, (3, 3), (1, 1)) => plane_s1::<3, 2, 8>(g, xp, wp, yp, &ep, ahead),
                    (true, (5, 5), (1, 1)) => plane_s1::<5, 2, 4>(g, xp, wp, yp, &ep, ahead),
                    (true, (7, 7), (1, 1)) => plane_s1::<7, 2, 4>(g, xp, wp, yp, &ep, ahead),
                    (true, (3, 3), (2, 2)) => plane_s2::<3>(g, xp, wp, yp, &ep, ahead),
                    (true, (5, 5), (2, 2)) => plane_s2::<5>(g, xp, wp, yp, &ep, ahead),
                    _ if g.strides[1] == 2 => rows_s2_plane(g, xp, wp, yp, &ep, ahead),
                    _ => rows_s1_plane(g, xp, wp, yp, &ep, ahead),
                }
            }
        }
    }
}

/// Per-plane epilogue: bias, residual plane (or null), clamp bounds.
struct Ep {
    bias: __m512,
    lo: __m512,
    hi: __m512,
    resid: *const f32,
}

impl Ep {
    /// Stores chunk `acc` (bias already in it) at `y + at` for the lanes of `m`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    unsafe fn store(&self, y: *mut f32, at: usize, m: __mmask16, acc: __m512) {
        // SAFETY: the caller's lanes are inside the output (and residual) plane.
        unsafe {
            let mut v = acc;
            if !self.resid.is_null() {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, self.resid.add(at)));
            }
            // max(lo, v) / min(hi, v): a NaN in v goes through (`crate::clamp_ep`).
            v = _mm512_min_ps(self.hi, _mm512_max_ps(self.lo, v));
            _mm512_mask_storeu_ps(y.add(at), m, v);
        }
    }
}

/// Weights of a K×K kernel as broadcast vectors.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn kernel_vectors<const K: usize>(w: *const f32) -> [[__m512; K]; K] {
    std::array::from_fn(|ky| {
        // SAFETY: ky, kx < K and w holds K·K taps (the caller's contract); AVX-512F is enabled on
        // this function.
        std::array::from_fn(|kx| unsafe { _mm512_set1_ps(*w.add(ky * K + kx)) })
    })
}

/// A plane of a K×K, stride-1, undilated depthwise conv: per block of `RB` output rows and
/// strip of 16 columns, each of the `RB + K − 1` input rows is loaded once per tap column
/// and accumulated into every output row it reaches. 3×3 runs 8-row blocks (8 rows ×
/// 2 accumulators + 9 weights stay in registers; 15% faster than 4 rows × 3).
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn plane_s1<const K: usize, const NA: usize, const RB: usize>(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    ep: &Ep,
    ahead: Ahead,
) {
    let (ih, iw) = (g.input[0] as isize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (p0, p1) = (g.pads[0] as isize, g.pads[1] as isize);
    // SAFETY: the caller's contract (w holds the channel's K·K taps).
    let wv = unsafe { kernel_vectors::<K>(w) };
    let mut pf = ahead.per_block(ow.div_ceil(L) * oh.div_ceil(RB));
    for ox in (0..ow).step_by(L) {
        let m: [__mmask16; K] =
            std::array::from_fn(|kx| col_mask(ox as isize - p1 + kx as isize, iw as isize));
        let out_m = lanes(ow - ox);
        let mut oy = 0;
        while oy < oh {
            let rows = RB.min(oh - oy);
            let iy0 = oy as isize - p0;
            let blk = Blk {
                x,
                iw,
                ih,
                iy0,
                c0: ox as isize - p1,
                y,
                at: oy * ow + ox,
                ow,
                out_m,
            };
            // Every tap row of the block inside the plane: no row checks.
            let interior = iy0 >= 0 && iy0 + (rows + K - 1) as isize <= ih;
            pf.issue();
            // SAFETY: the block's rows and lanes are inside the planes (masks, row checks).
            unsafe {
                if rows == RB && interior {
                    block_s1::<K, RB, NA, false>(&blk, &m, &wv, ep)
                } else if rows == RB {
                    block_s1::<K, RB, NA, true>(&blk, &m, &wv, ep)
                } else {
                    // The last block of the plane.
                    match rows {
                        7 => block_s1::<K, 7, NA, true>(&blk, &m, &wv, ep),
                        6 => block_s1::<K, 6, NA, true>(&blk, &m, &wv, ep),
                        5 => block_s1::<K, 5, NA, true>(&blk, &m, &wv, ep),
                        4 => block_s1::<K, 4, NA, true>(&blk, &m, &wv, ep),
                        3 => block_s1::<K, 3, NA, true>(&blk, &m, &wv, ep),
                        2 => block_s1::<K, 2, NA, true>(&blk, &m, &wv, ep),
                        _ => block_s1::<K, 1, NA, true>(&blk, &m, &wv, ep),
                    }
                }
            }
            oy += rows;
        }
    }
}

/// The next input plane to prefetch while this one computes. Blocks walk down 16-column
/// strips a row pitch apart and issue few loads at a time, so a plane in L3 (a layer after
/// the one that wrote it) kept most of their loads waiting on its latency: 96×112²
/// stride 2 ran at 15 GFLOP/s from L3 against 50 from L2. Spread over the blocks, the
/// prefetches bring the next plane in ahead of its loads.
#[derive(Clone, Copy)]
struct Ahead {
    /// The next plane's first float, or null (the last plane).
    next: *const f32,
    floats: usize,
}

impl Ahead {
    /// The prefetch cursor for a plane of `blocks` register blocks.
    fn per_block(self, blocks: usize) -> Prefetch {
        let lines = if self.next.is_null() {
            0
        } else {
            self.floats.div_ceil(16)
        };
        Prefetch {
            at: self.next,
            left: lines,
            per_block: lines.div_ceil(blocks.max(1)),
        }
    }
}

/// A prefetch cursor over the next plane: `per_block` lines at each `issue`.
struct Prefetch {
    at: *const f32,
    left: usize,
    per_block: usize,
}

impl Prefetch {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    fn issue(&mut self) {
        let n = self.per_block.min(self.left);
        for _ in 0..n {
            _mm_prefetch::<_MM_HINT_T0>(self.at as *const i8);
            self.at = self.at.wrapping_add(16);
        }
        self.left -= n;
    }
}

/// Where one register block reads and writes.
struct Blk {
    /// Input plane, its width and height.
    x: *const f32,
    iw: usize,
    ih: isize,
    /// Input row of the block's first tap row (may be negative: padding).
    iy0: isize,
    /// Input column of the strip's first tap (may be negative: padding).
    c0: isize,
    /// Output plane, offset of the block's first output, row pitch, lanes of the strip.
    y: *mut f32,
    at: usize,
    ow: usize,
    out_m: __mmask16,
}

/// `RR` output rows × 16 columns of a K×K stride-1 conv. Each output row sums into `NA`
/// accumulators (tap column mod NA), so no FMA chain is longer than ⌈K/NA⌉·K: with one
/// accumulator per row, a 3×3 block's chains (9 FMAs of 4 cycles) bounded it at half the
/// FMA rate.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn block_s1<const K: usize, const RR: usize, const NA: usize, const CHECK: bool>(
    b: &Blk,
    m: &[__mmask16; K],
    wv: &[[__m512; K]; K],
    ep: &Ep,
) {
    // SAFETY: (whole body) AVX-512F (the callers' features); row iy of the plane, lanes
    // outside it masked off; the strip's lanes of each output row.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); NA]; RR];
        for a in acc.iter_mut() {
            a[0] = ep.bias;
        }
        // Input row i of the block feeds output row r through kernel row i − r.
        for i in 0..RR + K - 1 {
            let iy = b.iy0 + i as isize;
            if CHECK && (iy < 0 || iy >= b.ih) {
                continue;
            }
            let row = b.x.wrapping_offset(iy * b.iw as isize + b.c0);
            for kx in 0..K {
                let v = _mm512_maskz_loadu_ps(m[kx], row.wrapping_add(kx));
                for (r, a) in acc.iter_mut().enumerate() {
                    if i >= r && i - r < K {
                        a[kx % NA] = _mm512_fmadd_ps(wv[i - r][kx], v, a[kx % NA]);
                    }
                }
            }
        }
        for (r, a) in acc.into_iter().enumerate() {
            let mut sum = a[0];
            for &p in &a[1..] {
                sum = _mm512_add_ps(sum, p);
            }
            ep.store(b.y, b.at + r * b.ow, b.out_m, sum);
        }
    }
}

/// A plane of a K×K (3 or 5), stride-2, undilated depthwise conv: per block of `R` output
/// rows and strip of 16 columns, each of the `2R + K − 2` input rows is three masked loads
/// (the strip's 30 + K input columns), split into even and odd columns shifted by up to
/// ⌊K/2⌋ lanes (the taps) by lane permutes, and accumulated into the output rows it
/// reaches. 5×5/2 (EfficientNet) took the one-row loop before: 144×56² 0.183 → 0.066 ms.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn plane_s2<const K: usize>(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    ep: &Ep,
    ahead: Ahead,
) {
    let (ih, iw) = (g.input[0] as isize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (p0, p1) = (g.pads[0] as isize, g.pads[1] as isize);
    // SAFETY: the caller's contract (w holds the channel's K·K taps).
    let wv = unsafe { kernel_vectors::<K>(w) };
    let mut pf = ahead.per_block(ow.div_ceil(L) * oh.div_ceil(R));
    for ox in (0..ow).step_by(L) {
        let c0 = 2 * ox as isize - p1;
        // The third vector contributes its first K − 2 columns.
        let m = [
            col_mask(c0, iw as isize),
            col_mask(c0 + L as isize, iw as isize),
            col_mask(c0 + 2 * L as isize, iw as isize) & ((1 << (K - 2)) - 1),
        ];
        let out_m = lanes(ow - ox);
        let mut oy = 0;
        while oy < oh {
            let rows = R.min(oh - oy);
            let iy0 = 2 * oy as isize - p0;
            let blk = Blk {
                x,
                iw,
                ih,
                iy0,
                c0,
                y,
                at: oy * ow + ox,
                ow,
                out_m,
            };
            let interior = iy0 >= 0 && iy0 + (2 * rows + K - 2) as isize <= ih;
            pf.issue();
            // SAFETY: the block's rows and lanes are inside the planes (masks, row checks).
            unsafe {
                match (rows, interior) {
                    (4, true) => block_s2::<K, 4, false>(&blk, &m, &wv, ep),
                    (4, _) => block_s2::<K, 4, true>(&blk, &m, &wv, ep),
                    (3, _) => block_s2::<K, 3, true>(&blk, &m, &wv, ep),
                    (2, _) => block_s2::<K, 2, true>(&blk, &m, &wv, ep),
                    _ => block_s2::<K, 1, true>(&blk, &m, &wv, ep),
                }
            }
            oy += rows;
        }
    }
}

/// `RR` output rows × 16 columns of a K×K stride-2 conv, K odd ≤ 5 (input rows outside
/// the plane skipped when `CHECK`). Tap kx reads input columns 2l + kx of the strip: the
/// even (kx even) or odd run of the first 32 columns, shifted by ⌊kx/2⌋ lanes into the
/// same run of the third vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn block_s2<const K: usize, const RR: usize, const CHECK: bool>(
    b: &Blk,
    m: &[__mmask16; 3],
    wv: &[[__m512; K]; K],
    ep: &Ep,
) {
    let split = Split2::<3>::new();
    let mut acc = [ep.bias; RR];
    // Input row i of the block feeds output row r through kernel row i − 2r.
    for i in 0..2 * RR + K - 2 {
        let iy = b.iy0 + i as isize;
        if CHECK && (iy < 0 || iy >= b.ih) {
            continue;
        }
        // SAFETY: row iy of the plane; lanes outside it are masked off.
        let [v0, v1, v2] = unsafe { load3(b.x.wrapping_offset(iy * b.iw as isize + b.c0), m) };
        let (e, o) = split.split(v0, v1);
        // The third vector's even and odd columns continue the runs (v2 itself for 3×3,
        // whose shifted tap needs only its first column).
        let (e_hi, o_hi) = if K > 3 {
            split.split(v2, _mm512_setzero_ps())
        } else {
            (v2, v2)
        };
        let taps: [__m512; K] = std::array::from_fn(|kx| split.tap(kx, (e, e_hi), (o, o_hi)));
        for (r, a) in acc.iter_mut().enumerate() {
            if i >= 2 * r && i - 2 * r < K {
                for (kx, t) in taps.iter().enumerate() {
                    *a = _mm512_fmadd_ps(wv[i - 2 * r][kx], *t, *a);
                }
            }
        }
    }
    for (r, a) in acc.into_iter().enumerate() {
        // SAFETY: the strip's lanes of output row r.
        unsafe { ep.store(b.y, b.at + r * b.ow, b.out_m, a) };
    }
}

/// Input row `iy` of output row `oy`'s tap row `ky`, if inside the plane.
#[inline(always)]
fn tap_row(g: &ConvGeometry, oy: usize, ky: usize) -> Option<usize> {
    let iy =
        (oy * g.strides[0] as usize + ky * g.dilations[0] as usize) as isize - g.pads[0] as isize;
    (0..g.input[0] as isize)
        .contains(&iy)
        .then_some(iy as usize)
}

/// One output vector of the one-row kernels at output row `oy`: `bias` plus, for every
/// kernel row inside the plane (input row `iy`), each tap `tap(&row(iy), kx)` times its
/// weight, alternate taps summed in two accumulators (so no FMA waits on the previous
/// one's result).
///
/// # Safety
/// AVX-512F and FMA (the callers' target features); `w` holds the channel's kernel.
#[inline(always)]
unsafe fn row_taps<R>(
    g: &ConvGeometry,
    w: *const f32,
    oy: usize,
    bias: __m512,
    row: impl Fn(usize) -> R,
    tap: impl Fn(&R, usize) -> __m512,
) -> __m512 {
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    // SAFETY: the caller's contract (tap (ky, kx) of the channel's kernel).
    unsafe {
        let (mut acc0, mut acc1) = (bias, _mm512_setzero_ps());
        for ky in 0..kh {
            let Some(iy) = tap_row(g, oy, ky) else {
                continue;
            };
            let r = row(iy);
            for kx in 0..kw {
                let (wt, v) = (_mm512_set1_ps(*w.add(ky * kw + kx)), tap(&r, kx));
                if kx % 2 == 0 {
                    acc0 = _mm512_fmadd_ps(wt, v, acc0);
                } else {
                    acc1 = _mm512_fmadd_ps(wt, v, acc1);
                }
            }
        }
        _mm512_add_ps(acc0, acc1)
    }
}

/// `Rows` at horizontal stride 1: per output row, 16 outputs per vector, one masked load
/// per tap.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn rows_s1_plane(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    ep: &Ep,
    ahead: Ahead,
) {
    let iw = g.input[1] as usize;
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let d1 = g.dilations[1] as isize;
    let p1 = g.pads[1] as isize;
    let per_row = ow.div_ceil(L);
    let mut pf = ahead.per_block(oh * per_row);
    for oy in 0..oh {
        for c in 0..per_row {
            let ox = c * L;
            let out_m = lanes(ow - ox);
            pf.issue();
            // SAFETY: row iy of the plane, tap kx's lanes outside [0, iw) masked off; the
            // channel's kernel; lanes of out_m are inside the output row.
            unsafe {
                let v = row_taps(
                    g,
                    w,
                    oy,
                    ep.bias,
                    |iy| x.add(iy * iw),
                    |row, kx| {
                        let c0 = ox as isize + kx as isize * d1 - p1;
                        let m = col_mask(c0, iw as isize) & out_m;
                        _mm512_maskz_loadu_ps(m, row.wrapping_offset(c0))
                    },
                );
                ep.store(y, oy * ow + ox, out_m, v)
            };
        }
    }
}

/// `Rows` at horizontal stride 2: per output row, 16 outputs per vector; the 32 + kw input
/// columns they read are three masked loads, split into even and odd columns by lane
/// permutes, and tap kx takes the even (kx even) or odd run shifted by ⌊kx/2⌋ lanes.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn rows_s2_plane(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    ep: &Ep,
    ahead: Ahead,
) {
    let iw = g.input[1] as isize;
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let p1 = g.pads[1] as isize;
    let split = Split2::<{ MAX_KW_S2 / 2 + 1 }>::new();
    let per_row = ow.div_ceil(L);
    let mut pf = ahead.per_block(oh * per_row);
    for c in 0..per_row {
        let ox = c * L;
        let out_m = lanes(ow - ox);
        // Input columns 2·ox − p1 .. + 48 in three vectors; only those inside the row load.
        let c0 = 2 * ox as isize - p1;
        let m: [__mmask16; 3] = std::array::from_fn(|k| col_mask(c0 + (k * L) as isize, iw));
        for oy in 0..oh {
            pf.issue();
            // SAFETY: row iy, lanes outside it masked off; the channel's kernel; lanes of
            // out_m are inside the output row.
            unsafe {
                let v = row_taps(
                    g,
                    w,
                    oy,
                    ep.bias,
                    |iy| {
                        let [v0, v1, v2] = load3(x.add(iy * iw as usize).wrapping_offset(c0), &m);
                        let (e_lo, o_lo) = split.split(v0, v1);
                        let (e_hi, o_hi) = split.split(v2, _mm512_setzero_ps());
                        ((e_lo, e_hi), (o_lo, o_hi))
                    },
                    |&(even, odd), kx| split.tap(kx, even, odd),
                );
                ep.store(y, oy * ow + ox, out_m, v)
            };
        }
    }
}

/// The three vectors of 16 columns from `row` that a stride-2 strip reads, each masked by
/// its `m` (masked-off lanes are not read).
///
/// # Safety
/// AVX-512F (the callers' target features); the lanes of `m` lie inside the input.
#[inline(always)]
unsafe fn load3(row: *const f32, m: &[__mmask16; 3]) -> [__m512; 3] {
    // SAFETY: the caller's contract.
    unsafe {
        [
            _mm512_maskz_loadu_ps(m[0], row),
            _mm512_maskz_loadu_ps(m[1], row.wrapping_add(L)),
            _mm512_maskz_loadu_ps(m[2], row.wrapping_add(2 * L)),
        ]
    }
}

/// The lane permutes of the stride-2 kernels: the even and odd columns of two vectors, and
/// a run shifted by `j < J` lanes into the next.
struct Split2<const J: usize> {
    even: __m512i,
    odd: __m512i,
    /// Shift by j lanes across (lo, hi): lanes j..j+16 of their concatenation.
    shift: [__m512i; J],
}

impl<const J: usize> Split2<J> {
    /// The permute indices (made once per kernel call, kept in registers).
    #[inline(always)]
    fn new() -> Self {
        // SAFETY: AVX-512F (the callers' target features).
        unsafe {
            Split2 {
                even: _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                odd: _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
                shift: std::array::from_fn(|j| {
                    _mm512_add_epi32(_mm512_set1_epi32(j as i32), lane_ids())
                }),
            }
        }
    }

    /// The even and odd columns of the 32 columns `(a, b)`.
    #[inline(always)]
    fn split(&self, a: __m512, b: __m512) -> (__m512, __m512) {
        // SAFETY: AVX-512F (the callers' target features).
        unsafe {
            (
                _mm512_permutex2var_ps(a, self.even, b),
                _mm512_permutex2var_ps(a, self.odd, b),
            )
        }
    }

    /// Tap `kx`'s columns: the even (kx even) or odd run, each given as its first vector and
    /// the next, shifted by ⌊kx/2⌋ lanes.
    #[inline(always)]
    fn tap(&self, kx: usize, even: (__m512, __m512), odd: (__m512, __m512)) -> __m512 {
        let (lo, hi) = if kx.is_multiple_of(2) { even } else { odd };
        let j = kx / 2;
        if j == 0 {
            lo
        } else {
            // SAFETY: AVX-512F (the callers' target features).
            unsafe { _mm512_permutex2var_ps(lo, self.shift[j], hi) }
        }
    }
}

#[inline(always)]
fn lane_ids() -> __m512i {
    // SAFETY: AVX-512F (the callers' target features).
    unsafe { _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) }
}
