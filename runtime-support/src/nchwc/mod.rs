//! Kernels over channel-blocked tensors (NCHWc, blocks of `CB` = 8 channels): a float tensor
//! `[n][c][h][w]` is stored as `[n][c/8][h][w][8]`, so the 8 channels of one position are one
//! 256-bit vector (two 128-bit ones).
//!
//! Convolution (`conv`): a GEMM per group whose A operand (output positions × input channels
//! and taps) is read in place — the 8 channels of a position are contiguous and the
//! positions of an output row are a fixed stride apart — and whose B operand is the weights,
//! packed at compile time in panels of 16 output channels. Every output position is written
//! as whole vectors; nothing is packed, transposed or gathered at run time (a zero-padded
//! copy of the input is made when taps reach the padding). Depthwise convolutions and
//! pooling (`pool`) are vertical SIMD over the 8 channels of a block.
//!
//! `out[m][oy][ox] = Σ_{c in group, ky, kx} x[c][oy·sh + ky·dh − ph][ox·sw + kx·dw − pw] ·
//! w[m][c][ky][kx]`, then the epilogue `clamp(acc + bias[m] + residual[m][oy][ox], lo, hi)`
//! (NaN passes the clamp, as everywhere in the runtime).

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod pool;
mod reorder;

pub use reorder::{from_blocked, onnxc_nchw_to_nchwc, onnxc_nchwc_to_nchw, to_blocked};

/// Channels per block.
pub const CB: usize = 8;
/// Output channels per weight panel (two blocks).
pub const PANEL: usize = 16;
/// Output positions per register tile.
pub const ROWS: usize = 6;
/// Depth (input channels × taps) per pass over the output: the A rows of a tile (6 positions
/// × this many floats) stay in L1 while every panel of a group passes over them.
const KC: usize = 256;
/// Weight bytes of one group of panels, kept in L2 while the output positions stream by.
const PANEL_GROUP_BYTES: usize = 160 << 10;

/// Geometry of one 2-D convolution over blocked tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockedConv {
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    pub group: usize,
    pub input: [usize; 2],
    pub output: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding at the start of each spatial dim (the end padding follows from the output).
    pub pads: [usize; 2],
}

impl BlockedConv {
    /// Whether the blocked kernels compute this convolution: depthwise over whole blocks, or
    /// groups of whole blocks of input and output channels.
    pub fn supported(&self) -> bool {
        let dims_ok = self.input.iter().chain(&self.output).all(|&d| d > 0)
            && self.kernel.iter().all(|&k| k > 0)
            && self.strides.iter().chain(&self.dilations).all(|&s| s > 0);
        dims_ok
            && self.group > 0
            && self.c.is_multiple_of(self.group)
            && self.m.is_multiple_of(self.group)
            && (self.is_depthwise() && self.c.is_multiple_of(CB)
                || self.cg().is_multiple_of(CB) && self.mg().is_multiple_of(CB))
    }

    pub fn is_depthwise(&self) -> bool {
        self.group == self.c && self.group == self.m
    }
    fn cg(&self) -> usize {
        self.c / self.group
    }
    fn mg(&self) -> usize {
        self.m / self.group
    }
    fn ksize(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }
    /// GEMM depth per group: input channels × taps.
    fn kdim(&self) -> usize {
        self.cg() * self.ksize()
    }
    /// Weight panels per group.
    fn panels(&self) -> usize {
        self.mg().div_ceil(PANEL)
    }
    /// Rows and columns of the input plane the taps read, padding included.
    fn padded_plane(&self) -> [usize; 2] {
        let need = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                .max(self.input[d] + self.pads[d])
        };
        [need(0), need(1)]
    }
    /// Every tap of every output reads inside the input: no padded copy.
    fn reads_in_place(&self) -> bool {
        self.pads == [0, 0] && self.padded_plane() == self.input
    }
    /// `[n, c, m, group, ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw]`.
    pub fn encode(&self) -> Vec<i64> {
        let mut v: Vec<i64> = vec![self.n, self.c, self.m, self.group]
            .into_iter()
            .map(|x| x as i64)
            .collect();
        for a in [
            self.input,
            self.output,
            self.kernel,
            self.strides,
            self.dilations,
            self.pads,
        ] {
            v.extend(a.iter().map(|&x| x as i64));
        }
        v
    }

    /// # Safety
    /// `p` points to an array written by `encode`.
    pub unsafe fn decode(p: *const i64) -> BlockedConv {
        // SAFETY: caller contract.
        let v = unsafe { std::slice::from_raw_parts(p, 16) };
        let u = |i: usize| v[i] as usize;
        let pair = |i: usize| [u(i), u(i + 1)];
        BlockedConv {
            n: u(0),
            c: u(1),
            m: u(2),
            group: u(3),
            input: pair(4),
            output: pair(6),
            kernel: pair(8),
            strides: pair(10),
            dilations: pair(12),
            pads: pair(14),
        }
    }

    /// Floats of packed weights.
    pub fn packed_weights_len(&self) -> usize {
        if self.is_depthwise() {
            self.c * self.ksize()
        } else {
            self.group * self.panels() * PANEL * self.kdim()
        }
    }

    /// Packs OIHW weights (`m × c/group × kh × kw`). Depthwise: `[c/8][tap][8]`. Otherwise
    /// per group, per panel of 16 output channels (zero beyond the group's channels): for
    /// each (input block, tap, channel in block) the panel's 16 weights.
    pub fn pack_weights(&self, w: &[f32]) -> Vec<f32> {
        let ks = self.ksize();
        let mut out = vec![0f32; self.packed_weights_len()];
        if self.is_depthwise() {
            for ch in 0..self.c {
                for t in 0..ks {
                    out[((ch / CB) * ks + t) * CB + ch % CB] = w[ch * ks + t];
                }
            }
            return out;
        }
        let (cg, mg, kd) = (self.cg(), self.mg(), self.kdim());
        for gi in 0..self.group {
            for p in 0..self.panels() {
                let base = (gi * self.panels() + p) * PANEL * kd;
                for cb in 0..cg / CB {
                    for t in 0..ks {
                        for ci in 0..CB {
                            let k = (cb * ks + t) * CB + ci;
                            for j in 0..PANEL {
                                let mo = p * PANEL + j;
                                if mo < mg {
                                    let mo = gi * mg + mo;
                                    out[base + k * PANEL + j] =
                                        w[(mo * cg + cb * CB + ci) * ks + t];
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Scratch floats: a zero-padded copy of one image's input (depthwise: of one block)
    /// when the taps leave the plane.
    pub fn scratch_floats(&self) -> usize {
        if self.reads_in_place() {
            0
        } else {
            let [ph, pw] = self.padded_plane();
            let chans = if self.is_depthwise() { CB } else { self.c };
            chans * ph * pw
        }
    }
}

/// The epilogue of a blocked kernel: per-channel bias (or null), a residual laid out like
/// the output (or null), a clamp.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    pub bias: *const f32,
    pub residual: *const f32,
    pub lo: f32,
    pub hi: f32,
}

/// One register tile's operands: `rows` output positions (≤ `ROWS`, consecutive in the
/// output plane, possibly across output rows) × `blocks` (1 or 2) output blocks, over the A
/// rows `x + pos[r] + offs[g] + ci` and the packed panel `w`.
#[derive(Clone, Copy)]
struct Tile<'a> {
    rows: usize,
    blocks: usize,
    offs: &'a [isize],
    x: *const f32,
    pos: [isize; ROWS],
    w: *const f32,
    /// Output block 0 of the tile (block 1 is `oplane` floats further).
    y: *mut f32,
    oplane: usize,
    /// Add the tile's current contents (a previous depth pass).
    accumulate: bool,
    /// The epilogue, on the last depth pass: bias already offset to the tile's first channel,
    /// residual to the tile's first element.
    ep: Option<Epilogue>,
}

/// Runs the convolution. `w` is `pack_weights`' layout.
///
/// # Safety
/// `g.supported()`; `x` holds the blocked input (`n × c/8 × ih × iw × 8`), `y` the blocked
/// output, `ep.residual` (if not null) is laid out like `y`, `ep.bias` (if not null) holds
/// `m` floats, `scratch` holds `scratch_floats()`; y does not alias x, w or scratch.
pub unsafe fn conv(
    g: &BlockedConv,
    x: *const f32,
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
    scratch: *mut f32,
) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let iplane = ih * iw * CB;
    let oplane = oh * ow * CB;
    for img in 0..g.n {
        // SAFETY: image img of each tensor.
        unsafe {
            let xi = x.add(img * g.c * ih * iw);
            let yi = y.add(img * g.m * oh * ow);
            let ri = if ep.residual.is_null() {
                ep.residual
            } else {
                ep.residual.add(img * g.m * oh * ow)
            };
            let epi = Epilogue {
                residual: ri,
                ..*ep
            };
            if g.is_depthwise() {
                depthwise(g, xi, iplane, w, &epi, yi, oplane, scratch);
            } else {
                let (src, plane) = padded_input(g, xi, g.c / CB, scratch);
                gemm_image(g, src, plane, w, &epi, yi);
            }
        }
    }
}

/// The input of one image as the taps read it: in place, or zero-padded into `scratch`.
/// Returns the planes and their (rows, columns).
///
/// # Safety
/// `x` holds `blocks` blocked planes of the input; scratch as `scratch_floats`.
unsafe fn padded_input(
    g: &BlockedConv,
    x: *const f32,
    blocks: usize,
    scratch: *mut f32,
) -> (*const f32, [usize; 2]) {
    if g.reads_in_place() {
        return (x, g.input);
    }
    let [ih, iw] = g.input;
    let [ph, pw] = g.padded_plane();
    let [pt, pl] = g.pads;
    // SAFETY: scratch holds blocks × ph × pw × 8 floats; rows pt..pt+ih, columns pl..pl+iw
    // of each padded plane receive the input; the rest is zeroed.
    unsafe {
        for b in 0..blocks {
            let dst = scratch.add(b * ph * pw * CB);
            std::ptr::write_bytes(dst, 0, pt * pw * CB);
            for r in 0..ih {
                let row = dst.add((pt + r) * pw * CB);
                std::ptr::write_bytes(row, 0, pl * CB);
                std::ptr::copy_nonoverlapping(
                    x.add((b * ih + r) * iw * CB),
                    row.add(pl * CB),
                    iw * CB,
                );
                std::ptr::write_bytes(row.add((pl + iw) * CB), 0, (pw - pl - iw) * CB);
            }
            std::ptr::write_bytes(dst.add((pt + ih) * pw * CB), 0, (ph - pt - ih) * pw * CB);
        }
    }
    (scratch, [ph, pw])
}

/// The grouped GEMM of one image over its (padded) input planes.
///
/// # Safety
/// As `conv`, with `src` the image's input planes of `plane` rows × columns.
unsafe fn gemm_image(
    g: &BlockedConv,
    src: *const f32,
    plane: [usize; 2],
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
) {
    let [ph, pw] = plane;
    let [oh, ow] = g.output;
    let oplane = oh * ow * CB;
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let ks = kh * kw;
    let (cgb, mg, kd) = (g.cg() / CB, g.mg(), g.kdim());
    let panels = g.panels();
    // Input blocks per depth pass, and panels per group of panels (by the pass's weights).
    let chunk = (KC / (CB * ks)).clamp(1, cgb);
    // Window origin of every output position, in tiles of ROWS consecutive positions (a
    // tile may span output rows, so narrow outputs do not leave short tiles at row ends).
    let npos = oh * ow;
    let origin = |p: usize| ((p / ow * g.strides[0] * pw + p % ow * g.strides[1]) * CB) as isize;
    let mut offs = Vec::with_capacity(chunk * ks);
    for gi in 0..g.group {
        let mut c0 = 0;
        while c0 < cgb {
            let c1 = (c0 + chunk).min(cgb);
            offs.clear();
            for cb in gi * cgb + c0..gi * cgb + c1 {
                for ky in 0..kh {
                    for kx in 0..kw {
                        offs.push(
                            (((cb * ph + ky * g.dilations[0]) * pw + kx * g.dilations[1]) * CB)
                                as isize,
                        );
                    }
                }
            }
            let pass_floats = (c1 - c0) * ks * CB * PANEL;
            let group = (PANEL_GROUP_BYTES / (pass_floats * 4)).clamp(1, panels);
            let (first, last) = (c0 == 0, c1 == cgb);
            let mut p0 = 0;
            while p0 < panels {
                let p1 = (p0 + group).min(panels);
                let mut q = 0;
                while q < npos {
                    let rows = ROWS.min(npos - q);
                    let base = origin(q);
                    let pos: [isize; ROWS] =
                        std::array::from_fn(|r| origin(q + r.min(rows - 1)) - base);
                    for p in p0..p1 {
                        let chan = gi * mg + p * PANEL;
                        let yoff = (chan / CB) * oplane + q * CB;
                        // SAFETY: the tile's positions and blocks lie inside the output;
                        // its taps inside the padded input; the pass's rows inside the panel.
                        unsafe {
                            let t = Tile {
                                rows,
                                blocks: (mg - p * PANEL).min(PANEL) / CB,
                                offs: &offs,
                                x: src.offset(base),
                                pos,
                                w: w.add((gi * panels + p) * PANEL * kd + c0 * ks * CB * PANEL),
                                y: y.add(yoff),
                                oplane,
                                accumulate: !first,
                                ep: last.then(|| Epilogue {
                                    bias: if ep.bias.is_null() {
                                        ep.bias
                                    } else {
                                        ep.bias.add(chan)
                                    },
                                    residual: if ep.residual.is_null() {
                                        ep.residual
                                    } else {
                                        ep.residual.add(yoff)
                                    },
                                    ..*ep
                                }),
                            };
                            tile(&t);
                        }
                    }
                    q += rows;
                }
                p0 = p1;
            }
            c0 = c1;
        }
    }
}

/// # Safety
/// As `Tile`'s fields say.
unsafe fn tile(t: &Tile) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 and FMA detected.
        unsafe { avx2::tile(t) };
        return;
    }
    let mut acc = [[0f32; PANEL]; ROWS];
    let cols = t.blocks * CB;
    for (gi, &o) in t.offs.iter().enumerate() {
        for ci in 0..CB {
            let k = gi * CB + ci;
            for (r, accr) in acc.iter_mut().enumerate().take(t.rows) {
                // SAFETY: caller contract.
                let a = unsafe { *t.x.offset(o + t.pos[r]).add(ci) };
                for (j, v) in accr.iter_mut().enumerate().take(cols) {
                    // SAFETY: the panel holds the pass's rows of 16.
                    *v += a * unsafe { *t.w.add(k * PANEL + j) };
                }
            }
        }
    }
    for (r, accr) in acc.iter().enumerate().take(t.rows) {
        for (j, &a) in accr.iter().enumerate().take(cols) {
            let at = (j / CB) * t.oplane + r * CB + j % CB;
            // SAFETY: caller contract.
            unsafe {
                let mut v = a;
                if t.accumulate {
                    v += *t.y.add(at);
                }
                if let Some(e) = &t.ep {
                    if !e.bias.is_null() {
                        v += *e.bias.add(j);
                    }
                    if !e.residual.is_null() {
                        v += *e.residual.add(at);
                    }
                    v = crate::clamp_ep(v, e.lo, e.hi);
                }
                *t.y.add(at) = v;
            }
        }
    }
}

/// Depthwise convolution of one image, block by block.
///
/// # Safety
/// As `conv` for one image (`iplane`/`oplane`: floats per blocked plane).
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
unsafe fn depthwise(
    g: &BlockedConv,
    x: *const f32,
    iplane: usize,
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
    oplane: usize,
    scratch: *mut f32,
) {
    let ks = g.ksize();
    for b in 0..g.c / CB {
        // SAFETY: block b of input, weights, bias, residual and output.
        unsafe {
            let (src, plane) = padded_input(g, x.add(b * iplane), 1, scratch);
            let e = Epilogue {
                bias: if ep.bias.is_null() {
                    ep.bias
                } else {
                    ep.bias.add(b * CB)
                },
                residual: if ep.residual.is_null() {
                    ep.residual
                } else {
                    ep.residual.add(b * oplane)
                },
                ..*ep
            };
            depthwise_block(g, src, plane, w.add(b * ks * CB), &e, y.add(b * oplane));
        }
    }
}

/// # Safety
/// `src` is one block's (padded) plane of `plane` rows × columns; `w` its `ks` weight
/// vectors; the epilogue pointers are offset to the block.
unsafe fn depthwise_block(
    g: &BlockedConv,
    src: *const f32,
    plane: [usize; 2],
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 and FMA detected.
        unsafe { avx2::depthwise_block(g, src, plane, w, ep, y) };
        return;
    }
    let [oh, ow] = g.output;
    let pw = plane[1];
    for oy in 0..oh {
        for ox in 0..ow {
            let mut acc = [0f32; CB];
            for ky in 0..g.kernel[0] {
                for kx in 0..g.kernel[1] {
                    let iy = oy * g.strides[0] + ky * g.dilations[0];
                    let ix = ox * g.strides[1] + kx * g.dilations[1];
                    for (l, a) in acc.iter_mut().enumerate() {
                        // SAFETY: inside the padded plane and the weights.
                        unsafe {
                            *a += *src.add((iy * pw + ix) * CB + l)
                                * *w.add((ky * g.kernel[1] + kx) * CB + l);
                        }
                    }
                }
            }
            for (l, a) in acc.iter().enumerate() {
                let at = (oy * ow + ox) * CB + l;
                // SAFETY: inside the output block.
                unsafe {
                    let mut v = *a;
                    if !ep.bias.is_null() {
                        v += *ep.bias.add(l);
                    }
                    if !ep.residual.is_null() {
                        v += *ep.residual.add(at);
                    }
                    *y.add(at) = crate::clamp_ep(v, ep.lo, ep.hi);
                }
            }
        }
    }
}

/// C ABI entry point. `clamp` points to `[lo, hi]` or is null; `bias` and `residual`
/// (blocked like y) may be null.
///
/// # Safety
/// As `conv`; `params` from `BlockedConv::encode`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe extern "C" fn onnxc_conv_nchwc_f32(
    params: *const i64,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    clamp: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: forwarded contract.
    unsafe {
        let g = BlockedConv::decode(params);
        let (lo, hi) = if clamp.is_null() {
            (f32::NEG_INFINITY, f32::INFINITY)
        } else {
            (*clamp, *clamp.add(1))
        };
        conv(
            &g,
            x,
            w,
            &Epilogue {
                bias,
                residual,
                lo,
                hi,
            },
            y,
            scratch,
        )
    }
}

#[cfg(test)]
mod tests;
