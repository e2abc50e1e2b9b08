//! im2col packing: the K×N blocks of a group's im2col matrix written straight into the GEMM's
//! B panels (never materialized whole). Row-wise packers for 1-D to 3-D convolutions (the
//! `Im2colPanels` walk over the SIMD layer for NR-wide panels, a portable row builder for
//! the pixel-major A panels and the baseline tier) and an element-wise one for more
//! spatial dims.

use super::ConvGeometry;
use crate::gemm::{self, BSource, Epilogue, MR, NR};
use crate::par::{Par, Slots};
use crate::simd::{self, Simd};

/// Most leading spatial dims (all but the last) the row-wise im2col packers take: 2-D and
/// 3-D convolutions (1-D ones are compiled as 2-D ones over a single row); more go through
/// the element-wise `pack_im2col`.
/// One group's convolution as a GEMM of its packed weights `a` with the im2col matrix packed
/// block by block, the blocks of output positions split over `par`'s workers (the
/// element-wise packer of convolutions past 3-D runs on one thread).
///
/// # Safety
/// As `conv_f32` for one group: `xg` the group's input planes, `a` its packed weights, `yg`
/// its output planes, `slots` the GEMM's per-worker scratch.
pub(super) unsafe fn conv_group(
    par: Par,
    g: &ConvGeometry,
    xg: *const f32,
    a: *const f32,
    yg: *mut f32,
    ep: &Epilogue,
    slots: Slots,
) {
    let (mg, osz, kd) = (g.mg(), g.osize(), g.kdim());
    // SAFETY: (both) the packers write the GEMM's B blocks from the group's planes.
    unsafe {
        let block = |k0, kc, n0, nc, dst| Im2colPanels {
            g,
            xg,
            k0,
            kc,
            n0,
            nc,
            dst,
        };
        // The product with B packed block by block by `packer`.
        let product = |par: Par, packer: &dyn Fn(usize, usize, usize, usize, *mut f32)| {
            gemm::gemm_packed_a(
                par,
                mg,
                osz,
                kd,
                a,
                BSource::Custom(packer),
                yg,
                osz,
                ep,
                slots,
            )
        };
        if row_packable(g) {
            product(par, &|k0, kc, n0, nc, dst| {
                pack_im2col_2d(block(k0, kc, n0, nc, dst), NR)
            });
        } else {
            product(par, &|k0, kc, n0, nc, dst| {
                pack_im2col(block(k0, kc, n0, nc, dst))
            });
        }
    }
}

pub(super) const MAX_LEAD: usize = 2;

/// Whether the row-wise packers (`pack_im2col_2d` and its SIMD versions) take `g`.
pub(super) fn row_packable(g: &ConvGeometry) -> bool {
    (1..=MAX_LEAD + 1).contains(&g.input.len())
}

/// How the row-wise im2col packers walk a convolution: the output is a sequence of rows
/// (runs along the last spatial dim, one per combination of the leading output
/// coordinates), and a kernel tap of an output row reads one input row (or lies in the
/// padding).
#[derive(Clone, Copy)]
pub(super) struct Rows {
    /// Number of leading spatial dims (0 to `MAX_LEAD`).
    lead: usize,
    out: [i64; MAX_LEAD],
    input: [i64; MAX_LEAD],
    strides: [i64; MAX_LEAD],
}

impl Rows {
    fn new(g: &ConvGeometry) -> Rows {
        let lead = g.input.len() - 1;
        debug_assert!(lead <= MAX_LEAD);
        let mut r = Rows {
            lead,
            out: [1; MAX_LEAD],
            input: [1; MAX_LEAD],
            strides: [1; MAX_LEAD],
        };
        for d in 0..lead {
            r.out[d] = g.output[d];
            r.input[d] = g.input[d];
            r.strides[d] = g.strides[d];
        }
        r
    }

    /// Per leading dim, where output row `oy` (its leading coordinates flattened) starts
    /// reading the input, before a tap's offset is added.
    #[inline]
    fn origin(&self, mut oy: i64) -> [i64; MAX_LEAD] {
        let mut o = [0; MAX_LEAD];
        for d in (0..self.lead).rev() {
            o[d] = (oy % self.out[d]) * self.strides[d];
            oy /= self.out[d];
        }
        o
    }

    /// The input row (leading coordinates flattened) that a tap with leading offsets `lead`
    /// reads for an output row starting at `origin`; None where it lies in the padding.
    #[inline]
    fn row(&self, origin: &[i64; MAX_LEAD], lead: &[i64; MAX_LEAD]) -> Option<i64> {
        let mut r = 0;
        for d in 0..self.lead {
            let i = origin[d] + lead[d];
            if i < 0 || i >= self.input[d] {
                return None;
            }
            r = r * self.input[d] + i;
        }
        Some(r)
    }
}

/// Row-wise case of `pack_im2col` (2-D and 3-D convolutions, see `Rows`): each K row of the
/// block is first built contiguously in a local row (runs of output positions along an
/// output row: zeros where the tap falls in the padding, a contiguous copy at stride 1, a
/// vectorized even-lane pick at stride 2), then split into the panels with fixed-size
/// moves. Panels are `width` positions wide: NR for the B operand of the channel-major
/// product, MR for the A operand of the pixel-major one (`ConvGeometry::pixel_major`).
/// `nc` is at most `gemm::NC`.
///
/// # Safety
/// As `pack_im2col`; `row_packable(g)`.
pub(super) unsafe fn pack_im2col_2d(b: Im2colPanels, width: usize) {
    debug_assert!(width == NR || width == MR);
    if width == NR && b.kc <= gemm::KC {
        // SAFETY: forwarded contract; native vectors of 8 or 16 lanes divide NR.
        if unsafe { simd::dispatch_native(b) }.is_some() {
            return;
        }
    }
    let (g, xg, k0, kc, n0, nc, dst) = (b.g, b.xg, b.k0, b.kc, b.n0, b.nc, b.dst);
    let last = g.input.len() - 1;
    let iw = g.input[last];
    let ow = g.output[last];
    let sw = g.strides[last];
    let rows = Rows::new(g);
    let panels = nc.div_ceil(width);
    // The K row of the block, padded with zeros to whole panels.
    let mut row_buf = [0f32; gemm::NC + NR];
    assert!(nc <= gemm::NC, "im2col block wider than the GEMM's N block");
    let padded = panels * width;
    for kx in 0..kc {
        let tap = im2col_tap(g, k0 + kx);
        let (shift, lo, hi) = (tap.shift, tap.lo, tap.hi);
        // SAFETY: channel plane of the group.
        let plane = unsafe { xg.add(tap.plane) };
        let out = &mut row_buf[..padded];
        let mut n = n0;
        while n < n0 + nc {
            let oy = n as i64 / ow;
            let ox0 = n as i64 % ow;
            let len = ((ow - ox0) as usize).min(n0 + nc - n);
            let run = &mut out[n - n0..n - n0 + len];
            let Some(iy) = rows.row(&rows.origin(oy), &tap.lead) else {
                run.fill(0.0);
                n += len;
                continue;
            };
            // Output columns whose input column lies inside the row: [lo, hi).
            let (a, b) = (ox0, ox0 + len as i64);
            let ia = a.max(lo).min(b);
            let ib = b.min(hi).max(ia);
            let (za, zb) = ((ia - a) as usize, (ib - a) as usize);
            run[..za].fill(0.0);
            run[zb..].fill(0.0);
            if ib > ia {
                let cnt = (ib - ia) as usize;
                let first = (iy * iw + ia * sw + shift) as usize;
                // The input columns ia*sw+shift .. (ib-1)*sw+shift of row iy: inside the row.
                let span = (cnt - 1) * sw as usize + 1;
                // SAFETY: the span lies inside row iy of the plane.
                let src = unsafe { std::slice::from_raw_parts(plane.add(first), span) };
                let dstr = &mut run[za..zb];
                match sw {
                    1 => dstr.copy_from_slice(src),
                    2 => crate::pool::pick_even(src, dstr),
                    s => {
                        for (j, d) in dstr.iter_mut().enumerate() {
                            *d = src[j * s as usize];
                        }
                    }
                }
            }
            n += len;
        }
        out[nc..].fill(0.0);
        // Split the row into the panels.
        for p in 0..panels {
            // SAFETY: panel p, row kx of the block lies inside dst.
            unsafe {
                let d = dst.add((p * kc + kx) * width);
                let s = out.as_ptr().add(p * width);
                if width == NR {
                    d.cast::<[f32; NR]>()
                        .write_unaligned(s.cast::<[f32; NR]>().read_unaligned());
                } else {
                    d.cast::<[f32; MR]>()
                        .write_unaligned(s.cast::<[f32; MR]>().read_unaligned());
                }
            }
        }
    }
}

/// `pack_im2col_2d` for NR-wide B panels, written panel by panel: each panel row (NR output
/// positions, one kernel tap) is assembled in registers from at most a few output-row
/// segments — unaligned loads at stride 1, pairs of loads de-interleaved at stride 2, masked
/// loads at the row's ends, a masked gather at larger strides — and stored once, so the
/// writes run sequentially through each panel instead of scattering a K row across all
/// panels (ResNet-50's 7×7/2 stem: packing went from ~1 float per cycle to several).
/// Whole panels whose lanes all read inside the row are a tight loop of plain loads.
///
/// Also the block every packer takes: rows `k0..k0+kc` × columns `n0..n0+nc` of the im2col
/// matrix of the group whose input planes start at `xg`, packed into panels at `dst`.
#[derive(Clone, Copy)]
pub(super) struct Im2colPanels<'a> {
    g: &'a ConvGeometry<'a>,
    xg: *const f32,
    k0: usize,
    kc: usize,
    n0: usize,
    nc: usize,
    dst: *mut f32,
}

impl simd::Walk for Im2colPanels<'_> {
    type Out = ();
    /// # Safety
    /// As `pack_im2col`; `kc <= gemm::KC`; `S::LANES` divides NR.
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let b = self;
        let (g, xg, k0, kc, n0, nc, dst) = (b.g, b.xg, b.k0, b.kc, b.n0, b.nc, b.dst);
        let l = S::LANES;
        let vectors = NR / l;
        debug_assert_eq!(vectors * l, NR);
        let last = g.input.len() - 1;
        let iw = g.input[last];
        let ow = g.output[last];
        let sw = g.strides[last];
        let plane_len = g.isize();
        let rows = Rows::new(g);
        let taps = im2col_taps(g, k0, kc);
        let xend = xg.wrapping_add((g.c / g.group) as usize * plane_len);
        // SAFETY: panel writes stay inside dst's kc × ⌈nc/NR⌉·NR block; input reads are of
        // lanes whose row and column lie inside the channel plane (masked-off lanes are not
        // accessed, so their addresses may lie outside; whole-panel loads are checked to
        // stay inside x).
        unsafe {
            let mut col = 0;
            while col < nc {
                let q = (n0 + col) as i64;
                let (oy, ox0) = (q / ow, q % ow);
                let origin = rows.origin(oy);
                let len = ((ow - ox0) as usize).min(nc - col);
                let end = col + len;
                for (kx, tap) in taps.iter().enumerate().take(kc) {
                    let (iy, inside) = match rows.row(&origin, &tap.lead) {
                        Some(iy) => (iy, true),
                        None => (0, false),
                    };
                    // Output columns [va, vb) of the run read inside the row.
                    let (va, vb) = if inside {
                        let va = tap.lo.max(ox0);
                        (va, tap.hi.min(ox0 + len as i64).max(va))
                    } else {
                        (0, 0)
                    };
                    let row = xg
                        .wrapping_add(tap.plane)
                        .wrapping_offset((iy * iw + tap.shift) as isize);
                    let mut c = col;
                    while c < end {
                        // Whole panels whose lanes all read inside the row: a tight loop.
                        if c % NR == 0 && sw <= 2 {
                            let oxl = ox0 + (c - col) as i64;
                            let mut full = if oxl >= va && vb > oxl {
                                (((vb - oxl) as usize) / NR).min((end - c) / NR)
                            } else {
                                0
                            };
                            let mut src = row.wrapping_offset((oxl * sw) as isize);
                            if sw == 2 {
                                // The 2·NR-float window of the last full panel stays inside x.
                                while full > 0 && src.wrapping_add(2 * NR * full) > xend {
                                    full -= 1;
                                }
                            }
                            if full > 0 {
                                let mut d = dst.add((c / NR * kc + kx) * NR);
                                for _ in 0..full {
                                    for h in 0..vectors {
                                        let v = if sw == 1 {
                                            s.load(src.add(h * l))
                                        } else {
                                            let p = src.add(2 * h * l);
                                            s.deinterleave(s.load(p), s.load(p.add(l))).0
                                        };
                                        s.store(d.add(h * l), v);
                                    }
                                    src = src.add(NR * sw as usize);
                                    d = d.add(kc * NR);
                                }
                                c += full * NR;
                                continue;
                            }
                        }
                        let (pn, l0) = (c / NR, c % NR);
                        let l1 = NR.min(l0 + end - c);
                        // The block's last panel: lanes past nc are zero.
                        let store_to = if c + (l1 - l0) == nc { NR } else { l1 };
                        // Output column of lane j: oxl + j.
                        let oxl = ox0 + (c - col) as i64 - l0 as i64;
                        let a = (va - oxl).clamp(l0 as i64, l1 as i64) as usize;
                        let b = (vb - oxl).clamp(a as i64, l1 as i64) as usize;
                        // Lane j reads row[(oxl + j)·sw] = base[j·sw].
                        let base = row.wrapping_offset((oxl * sw) as isize);
                        let d = dst.add((pn * kc + kx) * NR);
                        for h in 0..vectors {
                            let (lo, hi) = (h * l, (h + 1) * l);
                            if store_to <= lo || l0 >= hi {
                                continue;
                            }
                            // Lanes [a, b) of the panel read the row: those of this vector.
                            let (va_h, vb_h) = (a.clamp(lo, hi) - lo, b.clamp(lo, hi) - lo);
                            let vbase = base.wrapping_offset((lo as i64 * sw) as isize);
                            let m = s.lanes(va_h, vb_h);
                            // Plain loads where the window lies inside x (measured on a Xeon:
                            // masked loads cost several times more here), masked ones at its
                            // ends.
                            let window = if sw == 2 { 2 * l } else { l };
                            let plain = vbase >= xg && vbase.wrapping_add(window) <= xend;
                            let v = if va_h >= vb_h {
                                s.zero()
                            } else if sw == 1 && plain {
                                s.select(m, s.load(vbase), s.zero())
                            } else if sw == 1 {
                                s.load_masked(vbase, m, s.zero())
                            } else if sw == 2 && plain {
                                let e = s.deinterleave(s.load(vbase), s.load(vbase.add(l))).0;
                                s.select(m, e, s.zero())
                            } else if sw == 2 {
                                // Window elements 2·va_h ..= 2·(vb_h − 1) hold the lanes' values.
                                let (w0, w1) = (2 * va_h, 2 * vb_h - 1);
                                let e = s.load_masked(vbase, s.lanes(w0, w1), s.zero());
                                let f = s.load_masked(
                                    vbase.wrapping_add(l),
                                    s.lanes(w0.saturating_sub(l), w1.saturating_sub(l)),
                                    s.zero(),
                                );
                                s.deinterleave(e, f).0
                            } else {
                                s.gather_masked(vbase, sw as isize, m, s.zero())
                            };
                            let (s0, s1) = (l0.clamp(lo, hi) - lo, store_to.clamp(lo, hi) - lo);
                            if s0 == 0 && s1 == l {
                                s.store(d.add(lo), v);
                            } else {
                                s.store_range(d.add(lo), s0, s1, v);
                            }
                        }
                        c += l1 - l0;
                    }
                }
                col = end;
            }
        }
    }
}

/// Per kernel tap of an im2col block (row-wise packers): channel plane offset, offset per
/// leading spatial dim (`Rows::row`), shift along the row, and the range `[lo, hi)` of
/// output columns whose input column lies inside the row.
#[derive(Clone, Copy, Default)]
pub(super) struct Tap {
    plane: usize,
    lead: [i64; MAX_LEAD],
    shift: i64,
    lo: i64,
    hi: i64,
}

/// The tap of im2col row `kk` (`row_packable(g)`).
pub(super) fn im2col_tap(g: &ConvGeometry, kk: usize) -> Tap {
    let last = g.input.len() - 1;
    let (iw, kw, sw) = (g.input[last], g.kernel[last], g.strides[last]);
    let ks = g.ksize();
    let t = (kk % ks) as i64;
    let shift = (t % kw) * g.dilations[last] - g.pads[last];
    let mut lead = [0; MAX_LEAD];
    let mut r = t / kw;
    for d in (0..last).rev() {
        lead[d] = (r % g.kernel[d]) * g.dilations[d] - g.pads[d];
        r /= g.kernel[d];
    }
    Tap {
        plane: (kk / ks) * g.isize(),
        lead,
        shift,
        lo: if shift >= 0 {
            0
        } else {
            (-shift + sw - 1) / sw
        },
        hi: if iw - shift <= 0 {
            0
        } else {
            (iw - shift + sw - 1) / sw
        },
    }
}

/// The taps of im2col rows `k0..k0+kc` (`kc <= gemm::KC`, `row_packable(g)`).
pub(super) fn im2col_taps(g: &ConvGeometry, k0: usize, kc: usize) -> [Tap; gemm::KC] {
    let mut taps = [Tap::default(); gemm::KC];
    for (kx, tap) in taps.iter_mut().enumerate().take(kc) {
        *tap = im2col_tap(g, k0 + kx);
    }
    taps
}

/// Packs block `b` (rows `k0..k0+kc` × columns `n0..n0+nc` of one group's im2col matrix)
/// into B panels. Allocates nothing: each row walks the block's output positions with an
/// odometer over the spatial dims (inline `Dims`).
///
/// # Safety
/// `xg` holds the group's `cg` input channel planes; `dst` has room for the block.
/// Any number of spatial dims (`pack_im2col_2d` is the fast path for 1 to 3).
pub(super) unsafe fn pack_im2col(b: Im2colPanels) {
    let (g, xg, k0, kc, n0, nc, dst) = (b.g, b.xg, b.k0, b.kc, b.n0, b.nc, b.dst);
    let nsp = g.input.len();
    let ks = g.ksize();
    let isz = g.isize();
    // Output coordinates of the block's first column.
    let mut first = g.output;
    let mut rem = n0 as i64;
    for d in (0..nsp).rev() {
        first[d] = rem % g.output[d];
        rem /= g.output[d];
    }
    let mut tap = g.kernel;
    for kx in 0..kc {
        let kk = k0 + kx;
        let c = kk / ks;
        let mut r = (kk % ks) as i64;
        for d in (0..nsp).rev() {
            tap[d] = (r % g.kernel[d]) * g.dilations[d];
            r /= g.kernel[d];
        }
        // SAFETY: channel plane c of the group.
        let plane = unsafe { xg.add(c * isz) };
        let mut pos = first;
        for p in 0..nc.div_ceil(NR) {
            // SAFETY: panel p, row kx of the block.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.add((p * kc + kx) * NR), NR) };
            for (j, o) in out.iter_mut().enumerate() {
                if p * NR + j >= nc {
                    *o = 0.0;
                    continue;
                }
                let mut off = 0i64;
                let mut inside = true;
                for d in 0..nsp {
                    let q = pos[d] * g.strides[d] - g.pads[d] + tap[d];
                    inside &= q >= 0 && q < g.input[d];
                    off = off * g.input[d] + q;
                }
                *o = if inside {
                    // SAFETY: inside means 0 ≤ q < input[d] in every dim, so off indexes the
                    // channel plane.
                    unsafe { *plane.add(off as usize) }
                } else {
                    0.0
                };
                // The next output position.
                for d in (0..nsp).rev() {
                    pos[d] += 1;
                    if pos[d] < g.output[d] {
                        break;
                    }
                    pos[d] = 0;
                }
            }
        }
    }
}

/// Packs the whole im2col matrix of a 2-D, one-group convolution block by block (`nc`
/// columns each, all into `dst`): the packing cost alone, for `benches/gemm/`.
#[doc(hidden)]
pub fn bench_im2col(g: &ConvGeometry, x: &[f32], dst: &mut [f32], nc: usize) {
    let osz: usize = g.output.iter().product::<i64>() as usize;
    let kd = g.kdim();
    assert!(
        g.input.len() == 2 && g.group == 1 && kd <= gemm::KC && nc <= gemm::NC,
        "bench_im2col: one 2-D group, K within one block"
    );
    assert!(x.len() >= g.c as usize * g.isize() && dst.len() >= kd * nc.next_multiple_of(NR));
    let mut n0 = 0;
    while n0 < osz {
        let w = nc.min(osz - n0);
        let block = Im2colPanels {
            g,
            xg: x.as_ptr(),
            k0: 0,
            kc: kd,
            n0,
            nc: w,
            dst: dst.as_mut_ptr(),
        };
        // SAFETY: checked above: x holds the planes, dst one block.
        unsafe { pack_im2col_2d(block, NR) };
        n0 += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::geom;
    use crate::test_rand as rand;

    /// The panel walk of the row-wise im2col packer, on every implementation of the SIMD
    /// layer, equals the element-wise packer: strides 1-3 (plain, de-interleaved and
    /// gathered reads), padding at both ends of rows, blocks starting mid-row and mid-panel,
    /// 1-D to 3-D.
    #[test]
    fn im2col_panels_match_elementwise_packing() {
        for g in [
            geom(1, 3, 8, 1, &[9, 37], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 4, 8, 1, &[11, 45], &[3, 5], &[2, 2], &[1, 1], &[1, 2]),
            geom(1, 2, 4, 1, &[10, 50], &[3, 3], &[2, 3], &[1, 1], &[0, 1]),
            geom(1, 3, 4, 1, &[23, 23], &[7, 7], &[2, 2], &[1, 1], &[3, 3]),
            geom(1, 2, 4, 1, &[1, 61], &[1, 5], &[1, 1], &[1, 2], &[0, 4]),
            geom(
                1,
                2,
                4,
                1,
                &[4, 6, 20],
                &[3, 3, 3],
                &[1, 2, 1],
                &[1, 1, 1],
                &[1, 1, 1],
            ),
        ] {
            assert!(row_packable(&g));
            let cg = g.cg();
            let x = rand(cg * g.isize(), 3);
            let k = cg * g.ksize();
            let n = g.osize();
            for (k0, kc, n0, nc) in [
                (0, k.min(gemm::KC), 0, n.min(gemm::NC)),
                (
                    1,
                    (k - 1).min(7),
                    5,
                    n.min(gemm::NC).saturating_sub(9).max(1),
                ),
                (k / 2, k - k / 2, n / 3, (n - n / 3).min(gemm::NC)),
            ] {
                if kc == 0 || nc == 0 || kc > gemm::KC {
                    continue;
                }
                let len = nc.div_ceil(NR) * kc * NR;
                let mut want = vec![f32::NAN; len];
                let mut got = vec![f32::NAN; len];
                let block = |dst| Im2colPanels {
                    g: &g,
                    xg: x.as_ptr(),
                    k0,
                    kc,
                    n0,
                    nc,
                    dst,
                };
                // SAFETY: x holds the geometry's input and want the len floats of ⌈nc/NR⌉ panels of
                // kc·NR.
                unsafe { pack_im2col(block(want.as_mut_ptr())) };
                let w = block(got.as_mut_ptr());
                let gp = got.as_ptr();
                // SAFETY: the walk writes got's len floats from x; gp points to got, read after
                // each run.
                unsafe {
                    simd::for_each_isa(w, |isa, ()| {
                        let got = std::slice::from_raw_parts(gp, len);
                        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                a.to_bits() == b.to_bits(),
                                "{isa} {g:?} block {k0}+{kc} x {n0}+{nc} [{i}]: {a} vs {b}"
                            );
                        }
                    })
                };
            }
        }
    }
}
