//! Depthwise convolution (one input channel per output channel): planes read in place with
//! AVX-512 (`in_place`), small planes channel-blocked (`blocked`), others zero-padded and
//! split into stride phases (`depthwise_2d`); 3-D depthwise as 2-D slices (`depthwise_3d`).

use super::{Call, ConvGeometry, conv_f32};
use crate::par::{Par, Slots};

mod blocked;
#[cfg(target_arch = "x86_64")]
pub(super) mod in_place;

use blocked::depthwise_blocked;
#[cfg(target_arch = "x86_64")]
pub(super) use blocked::transpose16;

/// A depthwise convolution split over `par`'s workers: 2-D ones by (image, channel chunk),
/// the chunks whole blocks of `DW_BLOCK` channels (the last of an image taking the rest), so
/// every chunk takes the path the whole convolution would and computes each channel in the
/// same block position. Each task works in its worker's scratch slot.
///
/// # Safety
/// As `conv_f32` for a depthwise geometry; each of `par`'s workers' `slots` holds
/// `depthwise_scratch()` floats.
pub(super) unsafe fn depthwise_par(par: Par, g: &ConvGeometry, c: Call, slots: Slots) {
    let (n, ch) = (g.n as usize, g.c as usize);
    let per_image = (ch / DW_BLOCK).max(1);
    let units = n * per_image;
    if par.workers() == 1 || units == 1 || g.input.len() != 2 {
        // SAFETY: forwarded; worker 0's slot holds the scratch.
        unsafe {
            depthwise(
                g,
                Call {
                    scratch: slots.at(0),
                    ..c
                },
            )
        };
        return;
    }
    let (isz, osz, ks) = (g.isize(), g.osize(), g.ksize());
    let chunks = |r: std::ops::Range<usize>, w: usize| {
        let mut u = r.start;
        while u < r.end {
            let img = u / per_image;
            let u1 = r.end.min((img + 1) * per_image);
            let (k0, k1) = (u - img * per_image, u1 - img * per_image);
            let c0 = k0 * DW_BLOCK;
            let c1 = if k1 == per_image { ch } else { k1 * DW_BLOCK };
            let len = (c1 - c0) as i64;
            let gc = ConvGeometry {
                n: 1,
                c: len,
                m: len,
                group: len,
                // Borrowed: the chunk allocates nothing.
                input_planes: std::borrow::Cow::Borrowed(if g.input_planes.is_empty() {
                    &[]
                } else {
                    &g.input_planes[c0..c1]
                }),
                ..g.clone()
            };
            // SAFETY: the chunk's planes of x (its image, from channel c0 unless the planes
            // are given relative to the image), weights, bias, residual and y.
            let cc = unsafe {
                Call {
                    x: if g.input_planes.is_empty() {
                        c.x.add((img * ch + c0) * isz)
                    } else {
                        c.x.add(img * ch * isz)
                    },
                    w: c.w.add(c0 * ks),
                    bias: crate::opt_add(c.bias, c0),
                    residual: crate::opt_add(c.residual, (img * ch + c0) * osz),
                    y: c.y.add((img * ch + c0) * osz),
                    scratch: slots.at(w),
                    ..c
                }
            };
            // SAFETY: a depthwise geometry of the chunk's planes, its buffers.
            unsafe { depthwise(&gc, cc) };
            u = u1;
        }
    };
    // SAFETY: each task writes its own chunks' output planes, in its worker's slot.
    unsafe { par.for_ranges(units, DW_BLOCK * osz * ks, &chunks) };
}

/// Runs a depthwise convolution on the best path for its geometry and the CPU.
///
/// # Safety
/// As `conv_f32` for a depthwise geometry.
pub(super) unsafe fn depthwise(g: &ConvGeometry, c: Call) {
    let (lo, hi) = (c.lo, c.hi);
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() && in_place::supported(g) {
        // SAFETY: AVX-512 detected; forwarded contract.
        unsafe { in_place::depthwise(g, c) };
        return;
    }
    if let Some(dims) = g.depthwise_blocked_dims() {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::avx2() && dims.0 * dims.1 + g.osize() <= DW_BLOCKED_MAX_CELLS_AVX2 {
            // SAFETY: AVX2 and FMA detected; forwarded contract.
            unsafe { blocked::depthwise_blocked_avx2(g, c, dims) };
            return;
        }
        if g.osize() <= DW_BLOCKED_MAX_OUT {
            // SAFETY: forwarded contract.
            unsafe { depthwise_blocked(g, c, dims) };
            return;
        }
    }
    if let (2, Some(dims)) = (g.input.len(), g.depthwise_dims()) {
        // SAFETY: forwarded contract.
        unsafe { depthwise_2d(g, c, dims) };
        return;
    }
    if let Some(g2) = g.depthwise_slice() {
        // SAFETY: forwarded contract (scratch sized for the slices).
        unsafe { depthwise_3d(g, &g2, c) };
        return;
    }
    for plane in 0..depthwise_planes(g) {
        // SAFETY: one plane of the geometry and its kernel.
        unsafe { depthwise_plane(g, depthwise_plane_ptrs(g, c, plane), lo, hi) }
    }
}

/// Channels per block of the channel-blocked depthwise kernel (one AVX-512 vector).
pub(super) const DW_BLOCK: usize = 16;
/// Taps of a depthwise kernel whose table the plane-by-plane path keeps on the stack (7×7);
/// larger kernels keep it in the scratch after the phases (`depthwise_scratch`).
pub(super) const DW_INLINE_TAPS: usize = 49;
/// Largest output plane that goes channel-blocked. Its scalar transposes cost about what
/// plane-by-plane setup costs at 14×14, so only smaller planes gain (measured: 7×7 outputs
/// 1.8× faster, 14×14 equal, 28×28 2× slower).
pub(super) const DW_BLOCKED_MAX_OUT: usize = 100;

/// Largest channel-last buffer (padded input plus output cells of 16 channels) the AVX2
/// channel-blocked kernel takes. Measured on Zen 3 (512 KB L2) against the plane path, in
/// MobileNet: 56×56 stride 1 (6500 cells) 0.35 → 0.28 ms, 28×28 and smaller 1.5-3× faster,
/// 112×112 → 56×56 stride 2 (15900 cells, 1 MB) 5% slower.
pub(super) const DW_BLOCKED_MAX_CELLS_AVX2: usize = 8192;

/// 2-D depthwise convolution: each plane is zero-padded and split into stride phases, so
/// every kernel tap reads a contiguous run of a phase for 16 outputs at a time (computed in
/// the phases' row pitch, cropped while applying the epilogue).
///
/// # Safety
/// As `conv_f32` for a depthwise geometry with `dims = depthwise_dims()`.
pub(super) unsafe fn depthwise_2d(g: &ConvGeometry, c: Call, dims: (usize, usize, usize)) {
    crate::multiversion!(depthwise_2d_planes(g, c, dims))
}

/// Every plane of a 2-D depthwise convolution (one ISA dispatch for all of them).
#[inline(always)]
pub(super) fn depthwise_2d_planes(
    g: &ConvGeometry,
    c: Call,
    (qh, qw, slack): (usize, usize, usize),
) {
    // A plain loop, not a closure: a closure body is compiled as its own function without
    // the ISA features `multiversion!` enables (measured: the plane kernel ran in SSE
    // registers without FMA, 3× slower than onnxruntime's depthwise convs).
    for plane in 0..depthwise_planes(g) {
        let p = depthwise_plane_ptrs(g, c, plane);
        depthwise_body(g, p, c.lo, c.hi, c.scratch, qh, qw, slack)
    }
}

/// 3-D depthwise convolution as 2-D ones (X3D's and MoViNet's 3×3×3 layers): output slice
/// `od` of a plane accumulates, for every depth tap whose input slice lies inside the input,
/// the 2-D depthwise convolution of that input slice with that kernel slice (`g2`, run by
/// `conv_f32` on the CPU's best 2-D path), the bias and residual coming in with the first
/// tap and the clamp going out with the last; a slice with no tap inside is bias (and
/// residual) alone. The 2-D kernel's residual operand is the accumulator: it reads each
/// output's residual just before writing that output.
///
/// # Safety
/// As `conv_f32` for a 3-D depthwise geometry whose `depthwise_slice()` is `g2`.
pub(super) unsafe fn depthwise_3d(g: &ConvGeometry, g2: &ConvGeometry, c: Call) {
    let (lo, hi, scratch) = (c.lo, c.hi, c.scratch);
    let (id, od, kd) = (g.input[0], g.output[0], g.kernel[0] as usize);
    let (islice, oslice, kslice) = (g2.isize(), g2.osize(), g2.ksize());
    for plane in 0..depthwise_planes(g) {
        let Plane {
            x: xp,
            w: wp,
            y: yp,
            bias: bv,
            resid: r,
        } = depthwise_plane_ptrs(g, c, plane);
        for o in 0..od {
            // The depth taps whose input slice lies inside: a contiguous run of k, as the
            // input slice o·stride + k·dilation − pad grows with k.
            let slice = |k: usize| o * g.strides[0] + k as i64 * g.dilations[0] - g.pads[0];
            let inside = |k: &usize| (0..id).contains(&slice(*k));
            let (k0, k1) = match ((0..kd).find(inside), (0..kd).rev().find(inside)) {
                (Some(a), Some(b)) => (a, b + 1),
                _ => (0, 0),
            };
            // SAFETY: slice `o` of the output plane (and of the residual plane).
            let (ys, rs) = unsafe {
                let ys = yp.add(o as usize * oslice);
                (ys, crate::opt_add(r, o as usize * oslice))
            };
            if k0 == k1 {
                for j in 0..oslice {
                    // SAFETY: inside the output slice (and the residual slice).
                    unsafe {
                        let rv = if rs.is_null() { 0.0 } else { *rs.add(j) };
                        *ys.add(j) = crate::clamp_ep(bv + rv, lo, hi);
                    }
                }
                continue;
            }
            for k in k0..k1 {
                let i = slice(k) as usize;
                let (first, last) = (k == k0, k + 1 == k1);
                // SAFETY: input slice i, kernel slice k and output slice o of the plane;
                // scratch holds what the 2-D geometry needs (`depthwise_scratch`).
                unsafe {
                    conv_f32(
                        crate::par::Par::SEQ,
                        g2,
                        xp.add(i * islice),
                        wp.add(k * kslice),
                        true,
                        if first { &bv } else { std::ptr::null() },
                        if first { rs } else { ys },
                        if last { lo } else { f32::NEG_INFINITY },
                        if last { hi } else { f32::INFINITY },
                        ys,
                        scratch,
                    )
                };
            }
        }
    }
}

/// Number of (batch, channel) planes of a depthwise convolution.
pub(super) fn depthwise_planes(g: &ConvGeometry) -> usize {
    (g.n * g.m) as usize
}

/// One (batch, channel) plane of a depthwise convolution: its input plane, kernel, output
/// plane, bias and residual plane (or null).
#[derive(Clone, Copy)]
pub(super) struct Plane {
    pub x: *const f32,
    pub w: *const f32,
    pub y: *mut f32,
    pub bias: f32,
    pub resid: *const f32,
}

/// The operands of depthwise plane `plane` (batch-major, as `depthwise_planes` counts
/// them).
#[inline(always)]
pub(super) fn depthwise_plane_ptrs(g: &ConvGeometry, c: Call, plane: usize) -> Plane {
    let (x, w, bias, residual, y) = (c.x, c.w, c.bias, c.residual, c.y);
    let osz = g.osize();
    let (b, ch) = (plane / g.m as usize, plane % g.m as usize);
    // SAFETY: plane offsets inside x, y, the residual and the weights.
    unsafe {
        let bv = if bias.is_null() { 0.0 } else { *bias.add(ch) };
        let r = crate::opt_add(residual, plane * osz);
        Plane {
            x: x.add(g.depthwise_input_plane(b, ch)),
            w: w.add(ch * g.ksize()),
            y: y.add(plane * osz),
            bias: bv,
            resid: r,
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) fn depthwise_body(
    g: &ConvGeometry,
    Plane {
        x,
        w,
        y,
        bias,
        resid,
    }: Plane,
    lo: f32,
    hi: f32,
    scratch: *mut f32,
    qh: usize,
    qw: usize,
    slack: usize,
) {
    let [[ih, iw], [oh, ow], [kh, kw], [s0, s1], [d0, d1], [p0, p1]] = g.plane2();
    let phase_len = qh * qw + slack;
    // Scratch: the phases (s0·s1 planes of qh × qw, zero-padded, with slack).
    // SAFETY: within the scratch sized by depthwise_scratch().
    let phases = unsafe {
        let padded_len = qh * s0 * qw * s1;
        std::slice::from_raw_parts_mut(scratch.add(padded_len), s0 * s1 * phase_len)
    };
    phases.fill(0.0);
    for r in 0..ih {
        // SAFETY: input row r.
        let src = unsafe { std::slice::from_raw_parts(x.add(r * iw), iw) };
        let pr = r + p0;
        let (py, qy) = (pr % s0, pr / s0);
        if s1 == 2 {
            // Deinterleave the row into the two column phases in one pass.
            let (ev, od) = if p1 % 2 == 0 { (0, 1) } else { (1, 0) };
            let (qe, qo) = (p1 / 2, p1.div_ceil(2));
            let base_e = (py * s1 + ev) * phase_len + qy * qw;
            let base_o = (py * s1 + od) * phase_len + qy * qw;
            let (ne, no) = (iw.div_ceil(2), iw / 2);
            crate::pool::pick_even(src, &mut phases[base_e + qe..base_e + qe + ne]);
            if no > 0 {
                crate::pool::pick_even(&src[1..], &mut phases[base_o + qo..base_o + qo + no]);
            }
            continue;
        }
        // Phase px holds padded columns px, px + s1, …: input columns c ≡ px - p1 (mod s1).
        for px in 0..s1 {
            let first_c = (px + s1 * p1.div_ceil(s1) - p1) % s1; // first c with (c + p1) % s1 == px
            if first_c >= iw {
                continue;
            }
            let qx0 = (first_c + p1) / s1;
            let row = &mut phases[(py * s1 + px) * phase_len + qy * qw + qx0..];
            if s1 == 1 {
                row[..iw].copy_from_slice(src);
            } else {
                for (d, v) in row.iter_mut().zip(src[first_c..].iter().step_by(s1)) {
                    *d = *v;
                }
            }
        }
    }
    // Taps: (phase offset, weight), the phase offset already shifted by the tap's row and
    // column inside its phase.
    let mut inline = [(0usize, 0f32); DW_INLINE_TAPS];
    let ntaps = kh * kw;
    let taps: &mut [(usize, f32)] = if ntaps <= DW_INLINE_TAPS {
        &mut inline[..ntaps]
    } else {
        // SAFETY: depthwise_scratch() reserves 16 bytes per tap after the phases, 8-byte
        // aligned, for kernels of more than DW_INLINE_TAPS taps; any bits are a valid
        // (usize, f32), and every entry is written below before it is read.
        unsafe {
            let at = (qh * s0 * qw * s1 + s0 * s1 * phase_len).next_multiple_of(2);
            std::slice::from_raw_parts_mut(scratch.add(at) as *mut (usize, f32), ntaps)
        }
    };
    for ky in 0..kh {
        let (py, dy) = ((ky * d0) % s0, (ky * d0) / s0);
        for kx in 0..kw {
            let (px, dx) = ((kx * d1) % s1, (kx * d1) / s1);
            // SAFETY: kernel tap (ky, kx).
            let wv = unsafe { *w.add(ky * kw + kx) };
            taps[ky * kw + kx] = ((py * s1 + px) * phase_len + dy * qw + dx, wv);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: AVX-512 detected; taps and phases as built above.
        unsafe {
            depthwise_chunks_avx512(phases.as_ptr(), taps, qw, oh, ow, bias, y, resid, lo, hi)
        };
        return;
    }
    // 16 outputs at a time with all taps accumulated in registers; the epilogue on the way
    // out. Reads past a row's end stay inside the phase (its slack) and feed only lanes
    // that are not stored.
    const L: usize = 16;
    // Four chunks at a time (independent accumulator chains: one chain would wait on the
    // add latency at every tap).
    const U: usize = 4;
    let ph = phases.as_ptr();
    let store = |oy: usize, ox: usize, acc: &[f32; L]| {
        // SAFETY: output row oy, columns ox..min(ox+L, ow) (and the residual's).
        unsafe { store_chunk(y, resid, oy * ow + ox, L.min(ow - ox), acc, lo, hi) }
    };
    let chunks_per_row = ow.div_ceil(L);
    let total = oh * chunks_per_row;
    let pos = |i: usize| (i / chunks_per_row, (i % chunks_per_row) * L);
    let mut i = 0;
    while i + U <= total {
        let p: [(usize, usize); U] = std::array::from_fn(|u| pos(i + u));
        let at: [usize; U] = std::array::from_fn(|u| p[u].0 * qw + p[u].1);
        let mut acc = [[bias; L]; U];
        for &(base, wv) in taps.iter() {
            for u in 0..U {
                // SAFETY: base + at + L ≤ phases.len() (the phase's slack).
                let src = unsafe { ph.add(base + at[u]).cast::<[f32; L]>().read_unaligned() };
                acc[u] = std::array::from_fn(|l| acc[u][l] + wv * src[l]);
            }
        }
        for u in 0..U {
            store(p[u].0, p[u].1, &acc[u]);
        }
        i += U;
    }
    while i < total {
        let (oy, ox) = pos(i);
        let at = oy * qw + ox;
        let mut acc = [bias; L];
        for &(base, wv) in taps.iter() {
            // SAFETY: as above.
            let src = unsafe { ph.add(base + at).cast::<[f32; L]>().read_unaligned() };
            acc = std::array::from_fn(|l| acc[l] + wv * src[l]);
        }
        store(oy, ox, &acc);
        i += 1;
    }
}

/// The output loop of `depthwise_body` in AVX-512 registers: four 16-output chunks at a
/// time accumulate every tap with FMAs (the portable loop's `a + w·x` stays a separate
/// multiply and add), and each chunk is stored with the epilogue in one vector, the last
/// of a row masked.
///
/// # Safety
/// AVX-512F present; `ph + base + oy·qw + ox` is readable for 16 floats for every tap
/// `(base, _)` and chunk (the phases' slack); `y` (and `resid` unless null) hold oh·ow
/// floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) unsafe fn depthwise_chunks_avx512(
    ph: *const f32,
    taps: &[(usize, f32)],
    qw: usize,
    oh: usize,
    ow: usize,
    bias: f32,
    y: *mut f32,
    resid: *const f32,
    lo: f32,
    hi: f32,
) {
    use std::arch::x86_64::*;
    const L: usize = 16;
    const U: usize = 4;
    let per_row = ow.div_ceil(L);
    let total = oh * per_row;
    let tail: __mmask16 = if ow.is_multiple_of(L) {
        0xFFFF
    } else {
        ((1u32 << (ow % L)) - 1) as u16
    };
    let (lo_v, hi_v, bias_v) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi), _mm512_set1_ps(bias));
    // SAFETY: AVX-512F is enabled here (the caller's contract); chunk i is row oy < oh,
    // columns ox..ox+16 of y (and of a non-null resid, laid out like y): oh·ow floats, the
    // lanes past ow masked off.
    let store = |i: usize, acc: __m512| unsafe {
        let (oy, ox) = (i / per_row, (i % per_row) * L);
        let at = oy * ow + ox;
        let m = if ox + L <= ow { 0xFFFF } else { tail };
        let mut v = acc;
        if !resid.is_null() {
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, resid.add(at)));
        }
        // max(lo, v) / min(hi, v): a NaN in v goes through (`crate::clamp_ep`).
        v = _mm512_min_ps(hi_v, _mm512_max_ps(lo_v, v));
        _mm512_mask_storeu_ps(y.add(at), m, v);
    };
    let offset = |i: usize| (i / per_row) * qw + (i % per_row) * L;
    let mut i = 0;
    // SAFETY: AVX-512F (this function's target features); each load reads 16 floats at ph + base +
    // offset(i), readable for every tap and chunk i < total (the contract: the phases' slack);
    // `store` as above.
    unsafe {
        while i + U <= total {
            let at: [usize; U] = std::array::from_fn(|u| offset(i + u));
            let mut acc = [bias_v; U];
            for &(base, wv) in taps {
                let wv = _mm512_set1_ps(wv);
                let p = ph.add(base);
                for u in 0..U {
                    acc[u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p.add(at[u])), acc[u]);
                }
            }
            for (u, a) in acc.into_iter().enumerate() {
                store(i + u, a);
            }
            i += U;
        }
        while i < total {
            let at = offset(i);
            let mut acc = bias_v;
            for &(base, wv) in taps {
                acc = _mm512_fmadd_ps(_mm512_set1_ps(wv), _mm512_loadu_ps(ph.add(base + at)), acc);
            }
            store(i, acc);
            i += 1;
        }
    }
}

/// y[at..at+cnt] = clamp(acc (+ residual)), cnt ≤ 16: full chunks as one vector store,
/// partial ones lane by lane (a variable-length copy would be a memmove call).
///
/// # Safety
/// `y` (and `resid` unless null) valid for positions at..at+cnt.
#[inline(always)]
pub(super) unsafe fn store_chunk(
    y: *mut f32,
    resid: *const f32,
    at: usize,
    cnt: usize,
    acc: &[f32; 16],
    lo: f32,
    hi: f32,
) {
    const L: usize = 16;
    // SAFETY: caller contract.
    unsafe {
        if cnt == L {
            let res = if resid.is_null() {
                [0f32; L]
            } else {
                resid.add(at).cast::<[f32; L]>().read_unaligned()
            };
            let v: [f32; L] = std::array::from_fn(|l| crate::clamp_ep(acc[l] + res[l], lo, hi));
            y.add(at).cast::<[f32; L]>().write_unaligned(v);
        } else {
            for (l, a) in acc.iter().enumerate().take(cnt) {
                let r = if resid.is_null() {
                    0.0
                } else {
                    *resid.add(at + l)
                };
                *y.add(at + l) = crate::clamp_ep(a + r, lo, hi);
            }
        }
    }
}

/// Direct depthwise convolution of one channel plane.
///
/// # Safety
/// `x`/`y` are one input/output plane, `w` the channel's kernel.
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) unsafe fn depthwise_plane(g: &ConvGeometry, p: Plane, lo: f32, hi: f32) {
    // Ranks other than 2 (2-D goes through `depthwise_2d`): straightforward loops.
    let nsp = g.input.len();
    // Index `i` of a row-major array of extents `dims`, as one index per dim.
    let unravel = |mut i: usize, dims: &[i64], out: &mut [i64]| {
        for (o, &e) in out.iter_mut().zip(dims).rev() {
            *o = i as i64 % e;
            i /= e as usize;
        }
    };
    // The window origin and a tap's offset from it, per dim (inline: no allocation).
    let mut origin = g.output;
    let mut tap = g.kernel;
    for o in 0..g.osize() {
        unravel(o, &g.output, &mut origin);
        for (d, q) in origin.iter_mut().enumerate() {
            *q = *q * g.strides[d] - g.pads[d];
        }
        let mut acc = p.bias;
        for t in 0..g.ksize() {
            unravel(t, &g.kernel, &mut tap);
            let mut off = 0i64;
            let inside = (0..nsp).all(|d| {
                let q = origin[d] + tap[d] * g.dilations[d];
                off = off * g.input[d] + q;
                (0..g.input[d]).contains(&q)
            });
            if inside {
                // SAFETY: inside the plane and the kernel.
                acc += unsafe { *p.x.add(off as usize) * *p.w.add(t) };
            }
        }
        let r = if p.resid.is_null() {
            0.0
        } else {
            // SAFETY: the residual is non-null here, and then laid out like y, whose plane
            // holds osize() floats; o < osize().
            unsafe { *p.resid.add(o) }
        };
        // SAFETY: inside the output plane.
        unsafe { *p.y.add(o) = crate::clamp_ep(acc + r, lo, hi) };
    }
}
