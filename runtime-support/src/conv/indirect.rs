//! The indirect convolution: stride-1 (and, where it pays, stride-phase) convolutions whose
//! im2col rows are shifted views of a zero-padded copy of the input, read in place by the
//! GEMM through a per-k row offset table (`gemm::gemm_indirect_b`); outputs are computed in
//! the padded row pitch and compacted with the epilogue.

use super::ConvGeometry;
use crate::gemm::{self, Epilogue, MR};
use crate::par::Par;

/// Largest result (floats, one group) the indirect convolution buffers before compacting it.
pub(super) const INDIRECT_MAX_RESULT: usize = 256 * 1024;

/// One group's convolution through `gemm_indirect_b` (see `ConvGeometry::indirect_dims`).
///
/// # Safety
/// As `conv_f32` for one group: `xg` the group's input planes, `a` its packed weights, `yg`
/// its output planes, `scratch` at least `indirect_scratch()` floats (shared by `par`'s
/// workers, which split the padding by channel, the product by columns and the compaction
/// by output channel).
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) unsafe fn conv_indirect(
    par: Par,
    g: &ConvGeometry,
    (qh, qw, cols): (usize, usize, usize),
    xg: *const f32,
    a: *const f32,
    yg: *mut f32,
    ep: &Epilogue,
    scratch: *mut f32,
) {
    let (cg, mg, kd) = (g.cg(), g.mg(), g.kdim());
    let (ih, iw) = (g.input[0] as usize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (ph, pw) = (g.pads[0] as usize, g.pads[1] as usize);
    let (sh, sw) = (g.strides[0] as usize, g.strides[1] as usize);
    let plane = qh * qw;
    let pin_len = (cg * sh * sw * plane + plane + cols).next_multiple_of(16);
    let c_len = (mg.next_multiple_of(MR) * cols).next_multiple_of(16);
    // SAFETY: the three regions are disjoint parts of scratch (indirect_scratch()).
    let (pin, cbuf, offs) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, pin_len),
            scratch.add(pin_len),
            std::slice::from_raw_parts_mut(scratch.add(pin_len + c_len).cast::<isize>(), kd),
        )
    };
    // Zero-padded input planes split into stride phases (one phase at stride 1): phase
    // (pa, pb) of channel c holds padded row i·sh + pa, column j·sw + pb at (i, j), i.e.
    // input (i·sh + pa - ph, j·sw + pb - pw); cells outside the input (and the slack) are 0.
    let per_channel = sh * sw * plane;
    pin[cg * per_channel..].fill(0.0);
    let pin_ptr = pin.as_mut_ptr();
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    let (dh, dw) = (g.dilations[0] as usize, g.dilations[1] as usize);
    // Phases no tap reads (a 1×1 kernel at stride 2 reads one of four) are left zero.
    let row_used = |pa: usize| (0..kh).any(|t| t * dh % sh == pa);
    let col_used = |pb: usize| (0..kw).any(|t| t * dw % sw == pb);
    let pad = |cs: std::ops::Range<usize>, _| {
        for c in cs {
            // SAFETY: channel c's phases, a part of pin no other task touches.
            let pin = unsafe {
                std::slice::from_raw_parts_mut(pin_ptr.add(c * per_channel), per_channel)
            };
            pin.fill(0.0);
            for pa in (0..sh).filter(|&pa| row_used(pa)) {
                for pb in (0..sw).filter(|&pb| col_used(pb)) {
                    let dst = (pa * sw + pb) * plane;
                    // Phase columns j whose input column j·sw + pb - pw lies in [0, iw).
                    let j0 = pw.saturating_sub(pb).div_ceil(sw);
                    let j1 = (iw + pw).saturating_sub(pb).div_ceil(sw).min(qw);
                    if j1 <= j0 {
                        continue;
                    }
                    for i in 0..qh {
                        let py = i * sh + pa;
                        if py < ph || py - ph >= ih {
                            continue;
                        }
                        let x0 = j0 * sw + pb - pw;
                        // SAFETY: columns x0 .. x0 + (j1-j0-1)·sw of input row py - ph.
                        let src = unsafe {
                            std::slice::from_raw_parts(
                                xg.add((c * ih + py - ph) * iw + x0),
                                (j1 - j0 - 1) * sw + 1,
                            )
                        };
                        let d = &mut pin[dst + i * qw + j0..dst + i * qw + j1];
                        match sw {
                            1 => d.copy_from_slice(src),
                            2 => crate::pool::pick_even(src, d),
                            _ => {
                                for (k, v) in d.iter_mut().enumerate() {
                                    *v = src[k * sw];
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    // SAFETY: each task writes its own channels' phases.
    unsafe { par.for_ranges(cg, per_channel, &pad) };
    for (kk, o) in offs.iter_mut().enumerate() {
        let (c, t) = (kk / (kh * kw), kk % (kh * kw));
        let (ty, tx) = ((t / kw) * dh, (t % kw) * dw);
        let phase = (c * sh + ty % sh) * sw + tx % sw;
        *o = (phase * plane + (ty / sh) * qw + tx / sw) as isize;
    }
    // SAFETY: every row offset plus `cols` stays inside pin (its slack covers the last
    // kernel row and tile); cbuf holds ⌈mg/MR⌉·MR rows of `cols`.
    unsafe { gemm::gemm_indirect_b(par, mg, oh * qw, kd, a, pin.as_ptr(), offs, cbuf, cols) };
    // Drop the padding columns and apply the epilogue.
    debug_assert!(ep.bias_col.is_null(), "convolutions have no column bias");
    let osz = oh * ow;
    let compact = |ms: std::ops::Range<usize>, _| {
        for co in ms {
            let bias = if ep.bias_row.is_null() {
                0.0
            } else {
                // SAFETY: a non-null bias_row holds one float per output channel of the group; co < mg.
                unsafe { *ep.bias_row.add(co) }
            };
            for oy in 0..oh {
                // SAFETY: row co of the result and of y (and the residual, laid out like y).
                unsafe {
                    let src = std::slice::from_raw_parts(cbuf.add(co * cols + oy * qw), ow);
                    let dst = std::slice::from_raw_parts_mut(yg.add(co * osz + oy * ow), ow);
                    if ep.residual.is_null() {
                        for (d, v) in dst.iter_mut().zip(src) {
                            *d = crate::clamp_ep(*v + bias, ep.lo, ep.hi);
                        }
                    } else {
                        let res =
                            std::slice::from_raw_parts(ep.residual.add(co * osz + oy * ow), ow);
                        for ((d, v), r) in dst.iter_mut().zip(src).zip(res) {
                            *d = crate::clamp_ep(*v + bias + r, ep.lo, ep.hi);
                        }
                    }
                }
            }
        }
    };
    // SAFETY: each task writes its own output channels' planes.
    unsafe { par.for_ranges(mg, osz * 2, &compact) };
}
