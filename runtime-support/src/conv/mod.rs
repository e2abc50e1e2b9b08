//! Convolution (f32, N-d, grouped) as implicit GEMM: C[M×N] = W[M×K] · cols[K×N] per group,
//! where cols (the im2col matrix) is never materialized: each K×N block is packed straight
//! from the input into the GEMM's B panels. Weights are packed into A panels once (at compile
//! time). Pointwise convolutions read the input as B directly; depthwise convolutions use a
//! direct kernel. The geometry is shared with the compiler, which sizes the scratch.

use crate::abi::ONNXC_OK;
use crate::gemm::{self, BSource, Epilogue};
use crate::kernels::Status;
use crate::par::{Par, Slots, Threads, slot_bytes};
use crate::params;

mod depthwise;
mod geometry;
mod im2col;
mod indirect;
mod pixel_major;
pub mod qdepthwise;
pub mod transpose;

pub use geometry::{ConvGeometry, ConvPath, Dims, MAX_SPATIAL};
pub use im2col::bench_im2col;

/// The buffers and epilogue of one convolution call (`conv_f32`'s arguments past the
/// geometry, the weights packed): input, weights, bias (null: none), residual (null: none),
/// the clamp `[lo, hi]`, output and scratch.
#[derive(Clone, Copy)]
pub(crate) struct Call {
    pub x: *const f32,
    pub w: *const f32,
    pub bias: *const f32,
    pub residual: *const f32,
    pub lo: f32,
    pub hi: f32,
    pub y: *mut f32,
    pub scratch: *mut f32,
}

/// # Safety
/// Buffers valid for the geometry; `w` packed by `pack_weights` (or raw `[M, C/g, k…]` weights
/// when `!weights_packed`); `scratch` holds `scratch(weights_packed)` for `par`'s workers
/// (`ScratchNeed::layout`).
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe fn conv_f32(
    par: Par,
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    weights_packed: bool,
    bias: *const f32,
    residual: *const f32,
    lo: f32,
    hi: f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    if let Some(v) = g.subsampled() {
        // SAFETY: forwarded; the scratch holds the subsampled input, then `v`'s scratch
        // (`ConvGeometry::scratch`).
        unsafe {
            subsample(par, g, x, scratch);
            let rest = scratch.byte_add(slot_bytes(g.subsampled_len() * 4));
            conv_f32(
                par,
                &v,
                scratch,
                w,
                weights_packed,
                bias,
                residual,
                lo,
                hi,
                y,
                rest,
            );
        }
        return;
    }
    let (shared, slots) = g.scratch(weights_packed).layout(scratch);
    let c = Call {
        x,
        w,
        bias,
        residual,
        lo,
        hi,
        y,
        scratch: shared,
    };
    if g.is_depthwise() {
        // SAFETY: forwarded contract.
        unsafe { depthwise::depthwise_par(par, g, c, slots) };
        return;
    }
    let (cg, mg, isz, osz) = (g.cg(), g.mg(), g.isize(), g.osize());
    let kd = g.kdim();
    let per = g.packed_weights_per_group();
    if g.use_winograd() {
        // SAFETY: forwarded; run-time weights are transformed into scratch first.
        unsafe {
            let (wp, rest) = if weights_packed {
                (w, shared)
            } else {
                // Packed into the scratch, through the transformed kernels after them
                // (`scratch(false)` holds both).
                let len = g.packed_weights_len();
                g.winograd_pack_into(w, shared, shared.add(len));
                (
                    shared as *const f32,
                    shared.add(len + g.winograd_pack_temp()),
                )
            };
            let c = Call {
                w: wp,
                scratch: rest,
                ..c
            };
            crate::winograd::conv_winograd(par, g, c);
        }
        return;
    }
    let (wp, rest) = if weights_packed {
        (w, shared)
    } else {
        // SAFETY: the first packed_weights_len floats of scratch hold the packed weights.
        unsafe {
            g.pack_gemm_weights(w, shared);
            (shared as *const f32, shared.add(g.packed_weights_len()))
        }
    };
    // One group of one image, on `par` with scratch `slots`.
    let group = |par: Par, slots: Slots, b: usize, grp: usize| {
        // SAFETY: offsets inside the tensors described by the geometry.
        unsafe {
            let xg = x.add((b * g.c as usize + grp * cg) * isz);
            let yg = y.add((b * g.m as usize + grp * mg) * osz);
            let ep = Epilogue {
                bias_row: crate::opt_add(bias, grp * mg),
                bias_col: std::ptr::null(),
                residual: crate::opt_add(residual, (b * g.m as usize + grp * mg) * osz),
                lo,
                hi,
            };
            let a = wp.add(grp * per);
            if g.pixel_major() {
                pixel_major::conv_pixel_major(par, g, xg, a, yg, &ep, rest, slots);
            } else if let Some(dims) = g.run_indirect_dims() {
                indirect::conv_indirect(par, g, dims, xg, a, yg, &ep, rest);
            } else if g.is_pointwise() {
                gemm::gemm_packed_a(
                    par,
                    mg,
                    osz,
                    kd,
                    a,
                    BSource::Matrix {
                        b: xg,
                        ldb: osz,
                        trans: false,
                    },
                    yg,
                    osz,
                    &ep,
                    slots,
                );
            } else {
                im2col::conv_group(par, g, xg, a, yg, &ep, slots);
            }
        }
    };
    let units = g.n as usize * g.group as usize;
    if group_tasks(&par, g, units) {
        // Whole groups as tasks, each sequential in its worker's slot: one fork and join
        // for the convolution instead of one per group.
        // SAFETY: each task writes its own group's output planes.
        unsafe {
            par.run(units, &|u, w| {
                let gs = g.group as usize;
                group(Par::SEQ, Slots::single(slots.at(w)), u / gs, u % gs)
            })
        };
    } else {
        for u in 0..units {
            let gs = g.group as usize;
            group(par, slots, u / gs, u % gs);
        }
    }
}

/// Copies the input elements a strided 1×1 convolution reads (`ConvGeometry::subsampled`)
/// into `xs`, as its pointwise convolution's input `[n, c, output…]`, output rows split
/// over `par`'s workers.
///
/// # Safety
/// `x` holds the geometry's input, `xs` `subsampled_len()` floats; `g.subsampled()` is
/// Some (so every element read lies inside its plane).
unsafe fn subsample(par: Par, g: &ConvGeometry, x: *const f32, xs: *mut f32) {
    let last = g.input.len() - 1;
    let (ow, sw) = (g.output[last] as usize, g.strides[last] as usize);
    let plane_rows = g.osize() / ow;
    let (rows, isz) = (g.n as usize * g.c as usize * plane_rows, g.isize());
    // SAFETY: every row is copied by one task, into its own part of `xs`.
    unsafe {
        par.for_ranges(rows, ow, &|range, _| {
            for row in range {
                // The input row under output row `row`: its leading output coordinates times
                // their strides.
                let (plane, mut rest) = (row / plane_rows, row % plane_rows);
                let (mut off, mut pitch) = (0, g.input[last] as usize);
                for d in (0..last).rev() {
                    let od = g.output[d] as usize;
                    off += rest % od * g.strides[d] as usize * pitch;
                    rest /= od;
                    pitch *= g.input[d] as usize;
                }
                // SAFETY: output coordinate o reads input o·stride < the input's extent
                // (`subsampled`), so the row's reads stay in its plane; `xs` row `row` holds
                // `ow` floats.
                let (src, dst) = (x.add(plane * isz + off), xs.add(row * ow));
                if sw == 2 {
                    for j in 0..ow {
                        *dst.add(j) = *src.add(2 * j);
                    }
                } else {
                    for j in 0..ow {
                        *dst.add(j) = *src.add(sw * j);
                    }
                }
            }
        })
    };
}

/// Whether a convolution runs its `units` (images × groups) as tasks, each computed
/// sequentially: when there are at least two per worker and each is worth a task.
/// Otherwise each unit is split over the workers in turn, a fork and join per unit
/// (ShuffleNet's 4-group pointwise layers split each group's 0.9 M multiply-adds four ways
/// and scaled 1.45× on 2 threads). Paths whose workers share the call's scratch (indirect,
/// pixel-major) keep the split inside each unit.
fn group_tasks(par: &Par, g: &ConvGeometry, units: usize) -> bool {
    let w = par.workers();
    if w == 1 || units < 2 * w || g.pixel_major() || g.run_indirect_dims().is_some() {
        return false;
    }
    let macs = (g.m as usize)
        .saturating_mul(g.osize())
        .saturating_mul(g.kdim())
        .saturating_mul(g.n as usize);
    // The kernels' unit tests take this path on their small cases too.
    macs / units >= if cfg!(test) { 1 } else { gemm::MIN_TASK_MACS }
}

/// C ABI entry point. `clamp` points to `[lo, hi]` or is null (no clamping); `bias` and
/// `residual` (laid out like y) may be null. Returns `ONNXC_ERR_PARAMS`, touching nothing,
/// when `params` is not a valid `ConvGeometry::encode` blob.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); `threads` as `Par::from_raw`;
/// otherwise as `conv_f32`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe extern "C" fn onnxc_conv_f32(
    params: *const i64,
    x: *const f32,
    w: *const f32,
    weights_packed: i64,
    bias: *const f32,
    residual: *const f32,
    clamp: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let g = params::decode_blob!(params, ConvGeometry::decode);
    // SAFETY: forwarded contract, the geometry validated.
    unsafe {
        let (lo, hi) = crate::clamp_bounds(clamp);
        conv_f32(
            Par::from_raw(threads),
            &g,
            x,
            w,
            weights_packed != 0,
            bias,
            residual,
            lo,
            hi,
            y,
            scratch,
        )
    }
    ONNXC_OK
}

#[cfg(test)]
pub(crate) mod tests;
