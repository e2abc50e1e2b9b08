//! The blocked depthwise convolution, written once over the SIMD layer with 8-lane vectors,
//! a block of channels each (`simd::dispatch8`: AVX2, else the portable `Lanes<8>`).

use super::{BlockedConv, CB, Epilogue, pad_planes, valid_taps};
use crate::simd::{Runner, Simd, Walk};

/// Depthwise convolution of one image, block by block, reading only the taps inside the
/// input (no padded copy), its walk run by `r`.
///
/// # Safety
/// As `conv` for one image (`iplane`/`oplane`: floats per blocked plane).
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub(super) unsafe fn depthwise(
    g: &BlockedConv,
    blocks: std::ops::Range<usize>,
    x: *const f32,
    iplane: usize,
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
    oplane: usize,
    scratch: *mut f32,
    r: &impl Runner,
) {
    // Small planes are zero-padded into scratch first (it stays in L1/L2), so every output
    // takes the fast interior loop; large ones read only the valid taps of border outputs.
    let padded = g.depthwise_pads();
    let gp = if padded {
        let [ph, pw] = g.padded_plane();
        BlockedConv {
            input: [ph, pw],
            pads: [0, 0],
            ..g.clone()
        }
    } else {
        g.clone()
    };
    let image = Image {
        g,
        blocks: (blocks.start, blocks.end),
        gp: &gp,
        plan: &DwPlan::new(&gp),
        padded,
        x,
        iplane,
        w,
        ep: *ep,
        y,
        oplane,
        scratch,
    };
    // SAFETY: forwarded.
    unsafe { r.run(image) }
}

/// Where the depthwise windows fall, per output row and column: the window's first input
/// row/column (may be negative) and its taps inside the input; `[c0, c1)` are the columns
/// whose every tap is inside.
struct DwPlan {
    rows: Vec<(i64, usize, usize)>,
    cols: Vec<(i64, usize, usize)>,
    c0: usize,
    c1: usize,
}

impl DwPlan {
    fn new(g: &BlockedConv) -> DwPlan {
        let axis = |d: usize| -> Vec<(i64, usize, usize)> {
            (0..g.output[d])
                .map(|o| {
                    let s = (o * g.strides[d]) as i64 - g.pads[d] as i64;
                    let (k0, k1) = valid_taps(s, g.kernel[d], g.dilations[d], g.input[d]);
                    (s, k0, k1)
                })
                .collect()
        };
        let cols = axis(1);
        let kw = g.kernel[1];
        let full = |t: &(i64, usize, usize)| t.1 == 0 && t.2 == kw;
        let c0 = cols.iter().position(full).unwrap_or(cols.len());
        let c1 = c0 + cols[c0..].iter().take_while(|t| full(t)).count();
        DwPlan {
            rows: axis(0),
            cols,
            c0,
            c1,
        }
    }
}

/// `depthwise`'s walk: every block of the image (`gp`, `plan`: the plane the blocks are read
/// as, the input or its padded copy).
#[derive(Clone, Copy)]
struct Image<'a> {
    g: &'a BlockedConv,
    /// The channel blocks to compute, `[start, end)`.
    blocks: (usize, usize),
    gp: &'a BlockedConv,
    plan: &'a DwPlan,
    padded: bool,
    x: *const f32,
    iplane: usize,
    w: *const f32,
    ep: Epilogue,
    y: *mut f32,
    oplane: usize,
    scratch: *mut f32,
}

impl Walk for Image<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        assert_eq!(S::LANES, CB, "a vector per block");
        let (g, ep, ks) = (self.g, self.ep, self.g.ksize());
        for b in self.blocks.0..self.blocks.1 {
            // SAFETY: block b of input, weights, bias, residual and output.
            unsafe {
                let ep = EpVec {
                    bias: if ep.bias.is_null() {
                        s.zero()
                    } else {
                        s.load(ep.bias.add(b * CB))
                    },
                    lo: s.splat(ep.lo),
                    hi: s.splat(ep.hi),
                    residual: crate::opt_add(ep.residual, b * self.oplane),
                };
                let x = self.x.add(b * self.iplane);
                let src = if self.padded {
                    pad_planes(g, x, 0..1, CB, self.scratch);
                    self.scratch
                } else {
                    x
                };
                let (w, y) = (self.w.add(b * ks * CB), self.y.add(b * self.oplane));
                block(s, self.gp, self.plan, src, w, &ep, y);
            }
        }
    }
}

/// Depthwise convolution of one block over the unpadded plane: the interior columns of
/// output rows whose window rows are all inside go 4 outputs at a time (3×3 windows at
/// stride 1 or 2: weights in registers, taps at constant offsets from three row pointers);
/// every other output reads only its valid taps.
///
/// # Safety
/// `src` is the block's input plane as `g` says; `w` its `ks` weight vectors; `y` its output
/// plane (and `ep`'s residual, unless null).
#[inline(always)]
unsafe fn block<S: Simd>(
    s: S,
    g: &BlockedConv,
    plan: &DwPlan,
    src: *const f32,
    w: *const f32,
    ep: &EpVec<S>,
    y: *mut f32,
) {
    let [_, ow] = g.output;
    let [kh, kw] = g.kernel;
    let iw = g.input[1];
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (c0, c1) = (plan.c0, plan.c1);
    let k3 = kh == 3 && kw == 3 && dh == 1 && dw == 1 && g.strides[1] <= 2;
    // SAFETY: taps inside the plane, ks weight vectors, outputs inside the block.
    unsafe {
        let mut w3 = [s.zero(); 9];
        if k3 {
            for (t, v) in w3.iter_mut().enumerate() {
                *v = s.load(w.add(t * CB));
            }
        }
        for (oy, &(sy, ky0, ky1)) in plan.rows.iter().enumerate() {
            let yrow = oy * ow * CB;
            let generic = {
                #[inline(always)]
                |ox: usize| {
                    let (sx, kx0, kx1) = plan.cols[ox];
                    let mut a = s.zero();
                    for ky in ky0..ky1 {
                        let rp = src.add((sy + (ky * dh) as i64) as usize * iw * CB);
                        for kx in kx0..kx1 {
                            let ix = (sx + (kx * dw) as i64) as usize;
                            let wv = s.load(w.add((ky * kw + kx) * CB));
                            a = s.mul_add(s.load(rp.add(ix * CB)), wv, a);
                        }
                    }
                    ep.store(s, y, yrow + ox * CB, a);
                }
            };
            if (ky0, ky1) != (0, kh) || c0 >= c1 {
                for ox in 0..ow {
                    generic(ox);
                }
                continue;
            }
            for ox in (0..c0).chain(c1..ow) {
                generic(ox);
            }
            let mut ox = c0;
            if k3 {
                let mut rows = [src; 3];
                for (ky, r) in rows.iter_mut().enumerate() {
                    *r = src
                        .add(((sy as usize + ky) * iw) * CB)
                        .offset(plan.cols[c0].0 as isize * CB as isize);
                }
                let n = c1 - c0;
                if g.strides[1] == 1 {
                    row3x3::<S, 1>(s, rows, &w3, n, y, ep, yrow + c0 * CB);
                } else {
                    row3x3::<S, 2>(s, rows, &w3, n, y, ep, yrow + c0 * CB);
                }
                ox += n;
            }
            while ox < c1 {
                generic(ox);
                ox += 1;
            }
        }
    }
}

/// A depthwise epilogue with its vectors loaded once.
#[derive(Clone, Copy)]
struct EpVec<S: Simd> {
    bias: S::F,
    lo: S::F,
    hi: S::F,
    residual: *const f32,
}

impl<S: Simd> EpVec<S> {
    /// Stores `v` plus the epilogue at `plane + at` (the residual is laid out like the
    /// block's output plane).
    ///
    /// # Safety
    /// `at` is inside the output plane.
    #[inline(always)]
    unsafe fn store(&self, s: S, plane: *mut f32, at: usize, v: S::F) {
        // SAFETY: caller contract.
        unsafe {
            let mut v = s.add(v, self.bias);
            if !self.residual.is_null() {
                v = s.add(v, s.load(self.residual.add(at)));
            }
            // max/min with the value second: NaN passes through the clamp.
            s.store(plane.add(at), s.min(self.hi, s.max(self.lo, v)));
        }
    }
}

/// `n` outputs of a 3×3 depthwise row at stride `ST`, four at a time, then one at a time:
/// input rows `rows` start at the first output's window, which goes to `plane + at0`.
///
/// # Safety
/// Every window is inside the rows; `n` outputs from `at0`.
#[inline(always)]
unsafe fn row3x3<S: Simd, const ST: usize>(
    s: S,
    rows: [*const f32; 3],
    w: &[S::F; 9],
    n: usize,
    plane: *mut f32,
    ep: &EpVec<S>,
    at0: usize,
) {
    let mut r = rows;
    let mut j = 0;
    // SAFETY: caller contract.
    unsafe {
        while j + 4 <= n {
            let mut acc = [s.zero(); 4];
            for (ky, rp) in r.iter().enumerate() {
                for kx in 0..3 {
                    for (o, a) in acc.iter_mut().enumerate() {
                        *a = s.mul_add(s.load(rp.add((o * ST + kx) * CB)), w[ky * 3 + kx], *a);
                    }
                }
            }
            for (o, a) in acc.iter().enumerate() {
                ep.store(s, plane, at0 + (j + o) * CB, *a);
            }
            for rp in r.iter_mut() {
                *rp = rp.add(4 * ST * CB);
            }
            j += 4;
        }
        while j < n {
            let mut a = s.zero();
            for (ky, rp) in r.iter().enumerate() {
                for kx in 0..3 {
                    a = s.mul_add(s.load(rp.add(kx * CB)), w[ky * 3 + kx], a);
                }
            }
            ep.store(s, plane, at0 + j * CB, a);
            for rp in r.iter_mut() {
                *rp = rp.add(ST * CB);
            }
            j += 1;
        }
    }
}
