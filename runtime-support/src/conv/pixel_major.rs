//! Pixel-major convolution (`ConvGeometry::pixel_major`): C^T[positions × channels] =
//! cols^T · W^T, with the output positions as the rows of the register tile and the output
//! channels as its columns, then a transposing store with the epilogue.
//!
//! The A operand (cols^T, packed MR positions wide) is gathered per block from the input
//! through two offset tables built once per call: `pos[i]`, the offset of output position
//! i's window origin within a source plane, and `tap[t]`, the offset of kernel tap t from
//! that origin. The source planes are the input itself when no tap of any output falls in
//! the padding (1×1 convs, unpadded strided convs), and otherwise a zero-padded copy of it,
//! so the packer never tests bounds: each panel row is one masked gather (one masked load
//! when the panel's positions are contiguous, as in every panel of a pointwise conv).

use super::ConvGeometry;
use crate::gemm::{self, Epilogue, MR};
use crate::par::{Par, Slots};
use crate::simd::{self, Simd, Walk};

/// Where `pack_block` reads: `base` holds `cg` planes of `plane` floats; `pos` has
/// `osz + MR` entries (zeros past `osz`), `tap` has `ksize`.
pub(super) struct PmSource<'a> {
    base: *const f32,
    plane: usize,
    pos: &'a [i32],
    tap: &'a [i32],
}

impl ConvGeometry<'_> {
    /// (rows, columns) of the zero-padded planes the pixel-major packer reads, or None when
    /// every tap of every output lies inside the input (the input is read in place).
    pub(super) fn pm_padded_dims(&self) -> Option<(usize, usize)> {
        let ext = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                as usize
        };
        let inside =
            self.pads.iter().all(|&p| p == 0) && self.pad_end_2d(0) == 0 && self.pad_end_2d(1) == 0;
        if inside { None } else { Some((ext(0), ext(1))) }
    }

    /// Scratch floats of the pixel-major path, shared: C^T of one group, the padded planes
    /// when needed, the two offset tables.
    pub(super) fn pm_scratch(&self) -> usize {
        let ct = (self.osize() * self.mg()).next_multiple_of(16);
        let pin = self
            .pm_padded_dims()
            .map_or(0, |(hp, wp)| (self.cg() * hp * wp).next_multiple_of(16));
        let tables = (self.osize() + MR + self.ksize()).next_multiple_of(16);
        ct + pin + tables
    }

    /// Scratch floats of the pixel-major path for each worker: one packed A block (with
    /// slack).
    pub(super) fn pm_worker_scratch(&self) -> usize {
        gemm::packed_b_scratch_len() + 16
    }

    /// Whether the offsets of the pixel-major packer fit its 32-bit gather indices.
    pub(super) fn pm_offsets_fit(&self) -> bool {
        let plane = match self.pm_padded_dims() {
            Some((hp, wp)) => hp * wp,
            None => self.isize(),
        };
        plane < i32::MAX as usize / 2
    }
}

/// One group's convolution, pixel-major.
///
/// # Safety
/// As `conv_f32` for one group of a geometry with `pixel_major()`: `xg` the group's input
/// planes, `b` its packed weights (`pack_b` of W^T), `yg` its output planes, `scratch` at
/// least `pm_scratch()` floats, each of `par`'s workers' `slots` `pm_worker_scratch()`.
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) unsafe fn conv_pixel_major(
    par: Par,
    g: &ConvGeometry,
    xg: *const f32,
    b: *const f32,
    yg: *mut f32,
    ep: &Epilogue,
    scratch: *mut f32,
    slots: Slots,
) {
    let (cg, mg, kd, osz) = (g.cg(), g.mg(), g.kdim(), g.osize());
    let (ih, iw) = (g.input[0] as usize, g.input[1] as usize);
    let (ow, ks, kw) = (g.output[1] as usize, g.ksize(), g.kernel[1] as usize);
    let (sh, sw) = (g.strides[0] as usize, g.strides[1] as usize);
    let (dh, dw) = (g.dilations[0] as usize, g.dilations[1] as usize);
    let ct_len = (osz * mg).next_multiple_of(16);
    let padded = g.pm_padded_dims();
    let pin_len = padded.map_or(0, |(hp, wp)| (cg * hp * wp).next_multiple_of(16));
    // SAFETY: the regions are disjoint parts of scratch (`pm_scratch`).
    let (ct, pin, tables) = unsafe {
        (
            scratch,
            scratch.add(ct_len),
            std::slice::from_raw_parts_mut(
                scratch.add(ct_len + pin_len).cast::<i32>(),
                osz + MR + ks,
            ),
        )
    };
    let (base, pitch, plane) = match padded {
        Some((hp, wp)) => {
            let (ph, pw) = (g.pads[0] as usize, g.pads[1] as usize);
            // Padded columns [pw, pw + iw) ∩ [0, wp) hold input columns from 0.
            let cols = iw.min(wp.saturating_sub(pw));
            let pad = |cs: std::ops::Range<usize>, _| {
                for c in cs {
                    // SAFETY: pin holds cg planes of hp × wp floats; plane c is this task's.
                    let pin_s =
                        unsafe { std::slice::from_raw_parts_mut(pin.add(c * hp * wp), hp * wp) };
                    pin_s.fill(0.0);
                    for r in ph..hp.min(ph + ih) {
                        let iy = r - ph;
                        // SAFETY: row iy of input channel c, its first `cols` floats.
                        let src =
                            unsafe { std::slice::from_raw_parts(xg.add((c * ih + iy) * iw), cols) };
                        let d = r * wp + pw;
                        pin_s[d..d + cols].copy_from_slice(src);
                    }
                }
            };
            // SAFETY: each task writes its own channels' padded planes.
            unsafe { par.for_ranges(cg, hp * wp, &pad) };
            (pin as *const f32, wp, hp * wp)
        }
        None => (xg, iw, ih * iw),
    };
    let (pos, tap) = tables.split_at_mut(osz + MR);
    for (i, o) in pos.iter_mut().enumerate() {
        *o = if i < osz {
            ((i / ow) * sh * pitch + (i % ow) * sw) as i32
        } else {
            0
        };
    }
    for (t, o) in tap.iter_mut().enumerate() {
        *o = ((t / kw) * dh * pitch + (t % kw) * dw) as i32;
    }
    let src = PmSource {
        base,
        plane,
        pos,
        tap,
    };
    let packer = |i0: usize, mc: usize, k0: usize, kc: usize, dst: *mut f32| {
        // SAFETY: the block lies inside the geometry's cols^T; dst is the A block.
        unsafe { pack_block(&src, osz, i0, mc, k0, kc, dst) }
    };
    // SAFETY: forwarded; ct holds osz × mg floats, each worker's slot one packed A block.
    unsafe {
        gemm::gemm_packed_b(par, osz, mg, kd, &packer, b, ct, mg, slots);
        // The transposition by blocks of 16 output channels (the AVX-512 kernel's), split
        // over the workers.
        let store = |r: std::ops::Range<usize>, _| {
            let (c0, c1) = (r.start * 16, (r.end * 16).min(mg));
            let epc = Epilogue {
                bias_row: crate::opt_add(ep.bias_row, c0),
                residual: crate::opt_add(ep.residual, c0 * osz),
                ..*ep
            };
            store_transposed(ct.add(c0), osz, c1 - c0, mg, yg.add(c0 * osz), &epc);
        };
        par.for_ranges(mg.div_ceil(16), 16 * osz, &store);
    }
}

/// Packs rows `i0..i0+mc` (output positions) × columns `k0..k0+kc` of cols^T into MR-wide
/// A panels (`(panel·kc + k)·MR + lane`); lanes past the last position are zero.
///
/// # Safety
/// Every offset `pos[i] + tap[t]` (i < osz) plus `c · plane` lies inside the source;
/// dst holds ⌈mc/MR⌉·MR·kc floats.
unsafe fn pack_block(
    s: &PmSource<'_>,
    osz: usize,
    i0: usize,
    mc: usize,
    k0: usize,
    kc: usize,
    dst: *mut f32,
) {
    let block = PackBlock {
        s,
        osz,
        rows: i0..i0 + mc,
        cols: k0..k0 + kc,
        dst,
    };
    // SAFETY: forwarded.
    unsafe { simd::dispatch8(block) }
}

/// `pack_block`'s walk (8 lanes, MR of them stored): per panel row one masked load of the
/// panel's positions when they are contiguous (every panel of a pointwise conv), two when
/// they are two runs (a stride-1 panel across the end of an output row), else one masked
/// gather through the position table.
#[derive(Clone)]
struct PackBlock<'a> {
    s: &'a PmSource<'a>,
    osz: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    dst: *mut f32,
}

impl Walk for PackBlock<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        assert!(MR <= S::LANES);
        let src = self.s;
        let (ks, kc) = (src.tap.len(), self.cols.len());
        for p in 0..self.rows.len().div_ceil(MR) {
            let r0 = self.rows.start + p * MR;
            let valid = MR.min(self.osz - r0);
            let m = s.lanes(0, valid);
            // The panel's positions as runs of consecutive offsets: one (every panel of a
            // pointwise conv), two (a stride-1 panel across the end of an output row: lanes
            // `a..` start the next row), or more (strided convs, rows narrower than a panel).
            let pos = &src.pos[r0..r0 + valid];
            let run_end = |from: usize| {
                (from + 1..valid)
                    .find(|&j| pos[j] != pos[from] + (j - from) as i32)
                    .unwrap_or(valid)
            };
            let a = run_end(0);
            let (contiguous, two_runs) = (a == valid, a < valid && run_end(a) == valid);
            let (first, second) = (pos[0] as usize, pos[a.min(valid - 1)] as usize);
            let (m1, m2) = (s.lanes(0, a), s.lanes(a, valid));
            let (mut c, mut t) = (self.cols.start / ks, self.cols.start % ks);
            // SAFETY: the valid lanes read in-bounds offsets (contract), the others are not
            // accessed; each panel row's MR floats lie inside the block.
            unsafe {
                let mut d = self.dst.add(p * kc * MR);
                for _ in 0..kc {
                    let rowp = src.base.add(c * src.plane + src.tap[t] as usize);
                    let v = if contiguous {
                        s.load_or_zero(rowp.add(first), m)
                    } else if two_runs {
                        // Two masked loads, the second's lanes `a..` from the next run
                        // (lane l reads `second + l - a`): a gather costs several times more.
                        let v = s.load_or_zero(rowp.add(first), m1);
                        s.load_masked(rowp.wrapping_add(second).wrapping_sub(a), m2, v)
                    } else {
                        s.gather_index(rowp, src.pos.as_ptr().add(r0), m, s.zero())
                    };
                    s.store_range(d, 0, MR, v);
                    d = d.add(MR);
                    t += 1;
                    if t == ks {
                        (c, t) = (c + 1, 0);
                    }
                }
            }
        }
    }
}

/// y[co, p] = epilogue(ct[p, co]) for the `n` × `m` pixel-major result `ct` (row stride `ld`).
///
/// # Safety
/// `ct` holds n rows of `ld` ≥ m floats, `y` (and the epilogue's operands) an m × n matrix.
pub(super) unsafe fn store_transposed(
    ct: *const f32,
    n: usize,
    m: usize,
    ld: usize,
    y: *mut f32,
    ep: &Epilogue,
) {
    debug_assert!(ep.bias_col.is_null(), "convolutions have no column bias");
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: AVX-512 detected; forwarded.
        unsafe { store_transposed_avx512(ct, n, m, ld, y, ep) };
        return;
    }
    // Transpose in 8×8 blocks (full blocks through a register-sized local), then apply the
    // epilogue along y's contiguous rows.
    const B: usize = 8;
    let mut c0 = 0;
    while c0 < m {
        let w = B.min(m - c0);
        let mut p0 = 0;
        while p0 < n {
            let h = B.min(n - p0);
            if w == B && h == B {
                let mut blk = [[0f32; B]; B];
                for (i, row) in blk.iter_mut().enumerate() {
                    // SAFETY: row p0+i, columns c0..c0+8 of ct.
                    *row = unsafe {
                        ct.add((p0 + i) * ld + c0)
                            .cast::<[f32; B]>()
                            .read_unaligned()
                    };
                }
                #[allow(clippy::needless_range_loop, reason = "j indexes blk's columns")]
                for j in 0..B {
                    let col: [f32; B] = std::array::from_fn(|i| blk[i][j]);
                    // SAFETY: row c0+j, columns p0..p0+8 of y.
                    unsafe {
                        y.add((c0 + j) * n + p0)
                            .cast::<[f32; B]>()
                            .write_unaligned(col)
                    };
                }
            } else {
                for j in 0..w {
                    for i in 0..h {
                        // SAFETY: (p0+i, c0+j) inside ct; (c0+j, p0+i) inside y.
                        unsafe { *y.add((c0 + j) * n + p0 + i) = *ct.add((p0 + i) * ld + c0 + j) };
                    }
                }
            }
            p0 += h;
        }
        c0 += w;
    }
    for co in 0..m {
        // SAFETY: row co of y, and of the residual (laid out like y).
        let row = unsafe { std::slice::from_raw_parts_mut(y.add(co * n), n) };
        let bias = if ep.bias_row.is_null() {
            0.0
        } else {
            // SAFETY: a non-null bias_row holds m floats; co < m.
            unsafe { *ep.bias_row.add(co) }
        };
        if ep.residual.is_null() {
            for v in row.iter_mut() {
                *v = crate::clamp_ep(*v + bias, ep.lo, ep.hi);
            }
        } else {
            // SAFETY: as above.
            let res = unsafe { std::slice::from_raw_parts(ep.residual.add(co * n), n) };
            for (v, r) in row.iter_mut().zip(res) {
                *v = crate::clamp_ep(*v + bias + r, ep.lo, ep.hi);
            }
        }
    }
}

/// `store_transposed` in 16×16 register transposes, the epilogue applied to each transposed
/// row before its (masked) store.
///
/// # Safety
/// As `store_transposed`; AVX-512 present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn store_transposed_avx512(
    ct: *const f32,
    n: usize,
    m: usize,
    ld: usize,
    y: *mut f32,
    ep: &Epilogue,
) {
    use std::arch::x86_64::*;
    let (lo, hi) = (_mm512_set1_ps(ep.lo), _mm512_set1_ps(ep.hi));
    let mask = |k: usize| -> __mmask16 { if k >= 16 { 0xFFFF } else { (1u16 << k) - 1 } };
    let mut c0 = 0;
    while c0 < m {
        let w = 16.min(m - c0);
        let cmask = mask(w);
        let mut p0 = 0;
        while p0 < n {
            let h = 16.min(n - p0);
            let pmask = mask(h);
            let mut r = [_mm512_setzero_ps(); 16];
            for (i, ri) in r.iter_mut().enumerate().take(h) {
                // SAFETY: row p0+i of ct, columns c0..c0+w.
                *ri = unsafe { _mm512_maskz_loadu_ps(cmask, ct.add((p0 + i) * ld + c0)) };
            }
            super::depthwise::transpose16(&mut r);
            for (j, rj) in r.iter().enumerate().take(w) {
                let co = c0 + j;
                let mut v = *rj;
                if !ep.bias_row.is_null() {
                    // SAFETY: bias of channel co.
                    v = _mm512_add_ps(v, _mm512_set1_ps(unsafe { *ep.bias_row.add(co) }));
                }
                // SAFETY: row co, positions p0..p0+h of y and of the residual.
                unsafe {
                    if !ep.residual.is_null() {
                        let rv = _mm512_maskz_loadu_ps(pmask, ep.residual.add(co * n + p0));
                        v = _mm512_add_ps(v, rv);
                    }
                    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                    _mm512_mask_storeu_ps(y.add(co * n + p0), pmask, v);
                }
            }
            p0 += h;
        }
        c0 += w;
    }
}
