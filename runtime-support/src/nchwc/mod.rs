//! Kernels over channel-blocked tensors (NCHWc, blocks of `CB` = 8 channels): a float tensor
//! `[n][c][h][w]` is stored as `[n][c/8][h][w][8]`, so the 8 channels of one position are one
//! 256-bit vector (two 128-bit ones).
//!
//! Convolution (`conv`): a GEMM per group whose A operand (output positions × input channels
//! and taps) is read in place — the 8 channels of a position are contiguous and the
//! positions of an output row are a fixed stride apart — and whose B operand is the weights,
//! packed at compile time in panels of 16 output channels (`avx2.rs`: register tiles of 6
//! positions × one panel; `avx512.rs`: 6 positions × two panels or 12 × one, each zmm two
//! blocks). Every output position is written
//! as whole vectors; nothing is packed, transposed or gathered at run time (a zero-padded
//! copy of the input is made when taps reach the padding, except for strided convolutions
//! over a blocked input, whose tiles touching the padding skip those taps). Depthwise convolutions
//! (`depthwise.rs`, over the SIMD layer with 8 lanes) and pooling (`pool`) are vertical SIMD
//! over the 8 channels of a block.
//!
//! `out[m][oy][ox] = Σ_{c in group, ky, kx} x[c][oy·sh + ky·dh − ph][ox·sw + kx·dw − pw] ·
//! w[m][c][ky][kx]`, then the epilogue `clamp(acc + bias[m] + residual[m][oy][ox], lo, hi)`
//! (NaN passes the clamp, as everywhere in the runtime).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod depthwise;
pub mod pool;
pub mod reorder;

use crate::abi::ONNXC_OK;
use crate::gemm::MIN_TASK_MACS;
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Threads};
use crate::params;
use crate::simd::Dispatch8;
use depthwise::depthwise;
pub use reorder::{
    from_blocked, onnxc_nchw_to_nchwc, onnxc_nchwc_to_nchw, to_blocked, to_blocked_gather,
};
use std::ops::Range;

/// Channels per block.
pub const CB: usize = 8;
/// Output channels per weight panel (two blocks).
pub const PANEL: usize = 16;
/// Output positions per register tile.
pub const ROWS: usize = 6;
/// Depth (input channels × taps) per pass over the output: the A rows of a tile (6 positions
/// × this many floats) stay in L1 while every panel of a group passes over them.
const KC: usize = 256;
/// Bytes of A rows (output positions × depth pass) per chunk of positions, kept in L2
/// while every weight panel passes over them.
const A_CHUNK_BYTES: usize = 128 << 10;
/// Most positions per chunk (its window origins live on the stack).
const MAX_CHUNK: usize = 2048;
/// Most entries of a depth pass (`pass_k` / run ≤ `KC`; their offsets live on the stack).
const MAX_PASS_ENTRIES: usize = KC;
/// Floats copied below which a copy task is not worth a thread.
const MIN_TASK_COPY: usize = 1 << 15;

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
    /// The input is plain NCHW (any channel count; group 1), the output blocked: a network's
    /// first convolution, whose input has 1-4 channels.
    pub plain_input: bool,
    /// Depthwise: a plane of at most `DEPTHWISE_PAD_BYTES` is zero-padded into per-worker
    /// scratch first (larger ones read in place, their borders' taps checked). Off, every
    /// plane reads in place: the choice may not follow the size when the compiled program
    /// takes its dims at run time (its workspace is planned at their bounds).
    pub pad_planes: bool,
}

/// Largest padded plane of a block (bytes) the depthwise kernel pads into scratch
/// (`BlockedConv::pad_planes`).
pub const DEPTHWISE_PAD_BYTES: usize = 64 << 10;

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
            && if self.plain_input {
                self.group == 1 && self.m.is_multiple_of(CB)
            } else {
                self.is_depthwise() && self.c.is_multiple_of(CB)
                    || self.cg().is_multiple_of(CB) && self.mg().is_multiple_of(CB)
            }
    }

    pub fn is_depthwise(&self) -> bool {
        self.group == self.c && self.group == self.m && !self.plain_input
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
    /// k steps per entry of the depth walk (`gemm_image`): 8 channels of a blocked input,
    /// the kw taps of a plain one.
    fn run(&self) -> usize {
        if self.plain_input { self.kernel[1] } else { CB }
    }
    /// Depth per pass: whole entries, about `KC`.
    fn pass_k(&self) -> usize {
        let run = self.run();
        (KC / run).clamp(1, self.kdim() / run) * run
    }
    /// Offset of panel `p`'s weights for the pass starting at depth `k0` of group `gi`: the
    /// packed weights are ordered [group][pass][panel][k in pass][16], so one pass over all
    /// panels reads them sequentially.
    fn panel_at(&self, gi: usize, k0: usize, p: usize) -> usize {
        let kd = self.kdim();
        let pass = self.pass_k().min(kd - k0);
        (gi * kd + k0) * self.panels() * PANEL + p * pass * PANEL
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
    /// A strided grouped GEMM over a blocked input whose taps leave the plane reads the
    /// input in place and skips those taps (`Border`) instead of copying the input
    /// zero-padded. The copy is a pass over stride² input positions per output position:
    /// a 16→32 3×3/2 layer at 320×320 ran 10% faster without it (Zen 3). At stride 1 the
    /// copy is cheaper against the product and the padded plane reads faster: 32→32 and
    /// 32→64 3×3 layers at 160×160 ran 2.5% slower in place (the tiles crossing row ends
    /// checked; the four 800 KB planes a whole number of pages apart).
    fn pads_in_kernel(&self) -> bool {
        !self.plain_input
            && !self.is_depthwise()
            && !self.reads_in_place()
            && self.strides != [1, 1]
    }
    /// The sealed blob (`params::seal`) `[len, n, c, m, group, ih, iw, oh, ow, kh, kw, sh,
    /// sw, dh, dw, ph, pw, plain_input, pad_planes]`.
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
        v.push(self.plain_input as i64);
        v.push(self.pad_planes as i64);
        params::seal(v)
    }

    /// The geometry `encode` wrote into `blob`, validated (`validate`).
    pub fn decode(blob: &[i64]) -> params::Result<BlockedConv> {
        let mut r = params::Reader::new(blob)?;
        let v: [i64; 16] = r.array()?;
        let plain_input = params::flag(r.word()?, "plain_input is not 0 or 1")?;
        let pad_planes = params::flag(r.word()?, "pad_planes is not 0 or 1")?;
        r.finish()?;
        params::ensure(
            v.iter().all(|&x| (0..=params::MAX_EXTENT).contains(&x)),
            "a count or extent is out of range",
        )?;
        let u = |i: usize| v[i] as usize;
        let pair = |i: usize| [u(i), u(i + 1)];
        let g = BlockedConv {
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
            plain_input,
            pad_planes,
        };
        g.validate()?;
        Ok(g)
    }

    /// Checks what the kernels rely on: a `supported` geometry whose dims are consistent
    /// (`params::conv_dim`: the padding at the end follows from the output), counts within
    /// `MAX_EXTENT`, tensors, packed weights and the padded input planes of sizes that fit
    /// in memory.
    pub fn validate(&self) -> params::Result<()> {
        use params::{ensure, product};
        let max = params::MAX_EXTENT as usize;
        ensure(
            [self.n, self.c, self.m, self.group]
                .iter()
                .all(|&v| v <= max),
            "a batch or channel count is out of range",
        )?;
        for d in 0..2 {
            let i = |a: [usize; 2]| a[d] as i64;
            params::conv_dim(
                i(self.input),
                i(self.kernel),
                i(self.output),
                i(self.strides),
                i(self.dilations),
                i(self.pads),
            )?;
        }
        ensure(
            self.supported(),
            "a geometry the blocked kernels do not take",
        )?;
        let too_big = "a tensor is too large";
        let [ih, iw] = self.input.map(|v| v as i64);
        let [oh, ow] = self.output.map(|v| v as i64);
        let [ph, pw] = self.padded_plane().map(|v| v as i64);
        let (n, c, m) = (self.n as i64, self.c as i64, self.m as i64);
        let blocks = self.c.next_multiple_of(CB) as i64;
        product([n, product([blocks, ih, iw], too_big)?], too_big)?;
        product([n, product([m, oh, ow], too_big)?], too_big)?;
        product([c, ph, pw], too_big)?;
        product(
            [m, c, self.kernel[0] as i64, self.kernel[1] as i64, 2],
            too_big,
        )?;
        Ok(())
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
                for k in 0..kd {
                    // The (input channel, tap) of depth k: entries of `run` steps, blocked
                    // (block, tap) entries of 8 channels or plain (channel, ky) ones of kw taps.
                    let (c, t) = if self.plain_input {
                        (k / ks, k % ks)
                    } else {
                        let e = k / CB;
                        (e / ks * CB + k % CB, e % ks)
                    };
                    let k0 = k / self.pass_k() * self.pass_k();
                    let at = self.panel_at(gi, k0, p) + (k - k0) * PANEL;
                    for j in 0..PANEL.min(mg - p * PANEL) {
                        let mo = gi * mg + p * PANEL + j;
                        out[at + j] = w[(mo * cg + c) * ks + t];
                    }
                }
            }
        }
        out
    }

    /// The scratch `onnxc_conv_nchwc_f32` needs (bytes): a zero-padded copy of one image's
    /// input, shared, when the taps of a plain input leave the plane, or a subsampled one for
    /// a strided 1×1; depthwise, a padded block per worker for small planes.
    pub fn scratch(&self) -> ScratchNeed {
        let [ph, pw] = self.padded_plane();
        if self.is_depthwise() {
            ScratchNeed {
                shared: 0,
                per_worker: if self.depthwise_pads() {
                    CB * ph * pw * 4
                } else {
                    0
                },
            }
        } else {
            ScratchNeed::shared(self.shared_floats() * 4)
        }
    }

    /// Floats of scratch a call with one worker needs.
    pub fn scratch_floats(&self) -> usize {
        self.scratch().single() / 4
    }

    /// Floats of the shared copy of one image's input a non-depthwise convolution makes.
    fn shared_floats(&self) -> usize {
        let [ph, pw] = self.padded_plane();
        if self.subsamples() {
            self.c * self.output[0] * self.output[1]
        } else if self.reads_in_place() || self.pads_in_kernel() {
            0
        } else {
            self.c * ph * pw
        }
    }

    /// A strided 1×1 convolution over a blocked input reads the positions it uses into
    /// scratch first and runs at stride 1: read in place, its tiles would touch a cache line
    /// per position (or per two) and use a quarter or half of each.
    /// Only when every position it reads is inside the input: with padding at the end
    /// (`pads` holds the start only, the output extent implies the end) the last positions
    /// lie in the padding and take the zero-padded copy instead.
    fn subsamples(&self) -> bool {
        !self.plain_input
            && !self.is_depthwise()
            && self.kernel == [1, 1]
            && self.reads_in_place()
            && self.strides != [1, 1]
    }

    /// The depthwise path pads each block's plane into scratch (planes of ≤ 64 KB).
    fn depthwise_pads(&self) -> bool {
        let [ph, pw] = self.padded_plane();
        self.pad_planes
            && self.is_depthwise()
            && !self.reads_in_place()
            && CB * ph * pw * 4 <= DEPTHWISE_PAD_BYTES
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

/// A run of consecutive output positions (possibly across output rows) × one weight panel
/// (`blocks`, 1 or 2, output blocks) or, for the AVX-512 kernels (`paired_panels`), two
/// (`blocks` 3 or 4), computed in register tiles: over the A values `x + origins[q] +
/// offs[e] + i·step` (entry e, i < run) and the packed panels `w` and `w2`.
#[derive(Clone, Copy)]
struct Run<'a> {
    blocks: usize,
    offs: &'a [isize],
    /// k steps per entry of `offs`, and floats between them.
    run: usize,
    step: usize,
    x: *const f32,
    /// Window origin of each position of the run, from `x`.
    origins: &'a [isize],
    w: *const f32,
    /// The second panel (its blocks 2 and 3) when `blocks` > 2, else unused.
    w2: *const f32,
    /// Output block 0 at the run's first position (block 1 is `oplane` floats further).
    y: *mut f32,
    oplane: usize,
    /// Add the outputs' current contents (a previous depth pass).
    accumulate: bool,
    /// The epilogue, on the last depth pass: bias already offset to the panel's first
    /// channel, residual to the run's first element.
    ep: Option<Epilogue>,
    /// Where taps may leave the input (a blocked input read in place with padding): the
    /// tiles with such positions read zeros for them.
    border: Option<Border<'a>>,
}

/// What the kernels need to find the taps of a position that fall outside the input: the
/// run's first position (`q0`, row-major over the output of `ow` columns), each entry's
/// tap offset (rows, columns) from the window's corner, and the input plane.
#[derive(Clone, Copy)]
struct Border<'a> {
    q0: usize,
    ow: usize,
    strides: [usize; 2],
    pads: [usize; 2],
    input: [usize; 2],
    /// Whether each position's window lies inside the input (all its taps read).
    inside: &'a [bool],
    taps: &'a [[usize; 2]],
}

impl Border<'_> {
    /// The window corner (row, column, relative to the input; negative in the padding)
    /// of run position `q`.
    #[inline(always)]
    fn corner(&self, q: usize) -> [isize; 2] {
        let p = self.q0 + q;
        let (oy, ox) = (p / self.ow, p % self.ow);
        [
            (oy * self.strides[0]) as isize - self.pads[0] as isize,
            (ox * self.strides[1]) as isize - self.pads[1] as isize,
        ]
    }

    /// Whether entry `e`'s tap of the window at `corner` lies inside the input.
    #[inline(always)]
    fn tap_inside(&self, corner: [isize; 2], e: usize) -> bool {
        let [ty, tx] = self.taps[e];
        ((corner[0] + ty as isize) as usize) < self.input[0]
            && ((corner[1] + tx as isize) as usize) < self.input[1]
    }
}

/// Eight zeros (one 8-channel entry) that the taps outside the input read instead.
static ZEROS: [f32; CB] = [0.0; CB];

/// Runs the convolution over `par`'s workers. `w` is `pack_weights`' layout.
///
/// Per image: the input planes are copied (zero-padded, or subsampled) in parallel by plane
/// where the taps need it (a strided convolution over a blocked input reads it in place,
/// skipping the taps outside: `pads_in_kernel`), then the GEMM's tasks each take a chunk of output positions and a range of weight
/// panels (`gemm_image`); depthwise convolutions split their channel blocks.
///
/// # Safety
/// `g.supported()`; `x` holds the blocked input (`n × c/8 × ih × iw × 8`), `y` the blocked
/// output, `ep.residual` (if not null) is laid out like `y`, `ep.bias` (if not null) holds
/// `m` floats, `scratch` holds `scratch()` for `par`'s workers; y does not alias x, w or
/// scratch.
pub unsafe fn conv(
    par: Par,
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
    let (shared, slots) = g.scratch().layout(scratch);
    for img in 0..g.n {
        // SAFETY: image img of each tensor.
        unsafe {
            let xi = x.add(img * g.c * ih * iw);
            let yi = y.add(img * g.m * oh * ow);
            let ri = crate::opt_add(ep.residual, img * g.m * oh * ow);
            let epi = Epilogue {
                residual: ri,
                ..*ep
            };
            if g.is_depthwise() {
                let blocks = g.c / CB;
                let t = par.tasks(g.c * oh * ow * g.ksize(), MIN_TASK_MACS, 2, blocks);
                par.run_ranges(blocks, t, &|bs, wk| {
                    depthwise(
                        g,
                        bs,
                        xi,
                        iplane,
                        w,
                        &epi,
                        yi,
                        oplane,
                        slots.at(wk),
                        &Dispatch8,
                    )
                });
            } else if g.subsamples() {
                subsample(&par, g, xi, shared);
                let dense = BlockedConv {
                    input: g.output,
                    strides: [1, 1],
                    ..g.clone()
                };
                gemm_image(&par, &dense, shared, Some(g.output), w, &epi, yi);
            } else if g.pads_in_kernel() {
                gemm_image(&par, g, xi, None, w, &epi, yi);
            } else {
                let (src, plane) = if g.plain_input {
                    padded_input(&par, g, xi, g.c, 1, shared)
                } else {
                    padded_input(&par, g, xi, g.c / CB, CB, shared)
                };
                gemm_image(&par, g, src, Some(plane), w, &epi, yi);
            }
        }
    }
}

/// The positions a strided 1×1 convolution reads, `[c/8][oh][ow][8]` in `scratch`, a block
/// per task.
///
/// # Safety
/// `x` holds the image's blocked input; scratch as `scratch`'s shared area.
unsafe fn subsample(par: &Par, g: &BlockedConv, x: *const f32, scratch: *mut f32) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let [sh, sw] = g.strides;
    let blocks = g.c / CB;
    let t = par.tasks(g.c * oh * ow, MIN_TASK_COPY, 1, blocks);
    // SAFETY: (oy·sh, ox·sw) lies inside the input plane for every output position
    // (`subsamples` requires `reads_in_place`, a 1×1 kernel); the destination is block b's
    // oh × ow plane of scratch, each written by one task.
    unsafe {
        par.run_ranges(blocks, t, &|bs, _| {
            for b in bs {
                let src = x.add(b * ih * iw * CB);
                let dst = scratch.add(b * oh * ow * CB);
                for oy in 0..oh {
                    let row = src.add(oy * sh * iw * CB);
                    let out = dst.add(oy * ow * CB);
                    for ox in 0..ow {
                        std::ptr::copy_nonoverlapping(row.add(ox * sw * CB), out.add(ox * CB), CB);
                    }
                }
            }
        })
    };
}

/// The input of one image as the taps read it: in place, or zero-padded into `scratch`
/// (a range of planes per task). `planes` planes of `lane` floats per position (blocked:
/// blocks × 8; plain: channels × 1). Returns the planes and their (rows, columns).
///
/// # Safety
/// `x` holds the planes; scratch as `scratch`'s shared area.
unsafe fn padded_input(
    par: &Par,
    g: &BlockedConv,
    x: *const f32,
    planes: usize,
    lane: usize,
    scratch: *mut f32,
) -> (*const f32, [usize; 2]) {
    if g.reads_in_place() {
        return (x, g.input);
    }
    let [ph, pw] = g.padded_plane();
    let t = par.tasks(planes * ph * pw * lane, MIN_TASK_COPY, 1, planes);
    // SAFETY: forwarded; each task writes its own planes.
    unsafe { par.run_ranges(planes, t, &|ps, _| pad_planes(g, x, ps, lane, scratch)) };
    (scratch, [ph, pw])
}

/// Planes `planes` of `padded_input`.
///
/// # Safety
/// As `padded_input`.
unsafe fn pad_planes(
    g: &BlockedConv,
    x: *const f32,
    planes: Range<usize>,
    lane: usize,
    scratch: *mut f32,
) {
    let [ih, iw] = g.input;
    let [ph, pw] = g.padded_plane();
    let [pt, pl] = g.pads;
    // SAFETY: scratch holds planes × ph × pw × lane floats; rows pt..pt+ih, columns
    // pl..pl+iw of each padded plane receive the input; the rest is zeroed.
    unsafe {
        for b in planes {
            let dst = scratch.add(b * ph * pw * lane);
            std::ptr::write_bytes(dst, 0, pt * pw * lane);
            for r in 0..ih {
                let row = dst.add((pt + r) * pw * lane);
                std::ptr::write_bytes(row, 0, pl * lane);
                std::ptr::copy_nonoverlapping(
                    x.add((b * ih + r) * iw * lane),
                    row.add(pl * lane),
                    iw * lane,
                );
                std::ptr::write_bytes(row.add((pl + iw) * lane), 0, (pw - pl - iw) * lane);
            }
            std::ptr::write_bytes(
                dst.add((pt + ih) * pw * lane),
                0,
                (ph - pt - ih) * pw * lane,
            );
        }
    }
}

/// The grouped GEMM of one image over its input planes: `plane` rows × columns that every
/// tap reads inside (the input, or a padded copy), or with `plane` None the input itself,
/// whose taps outside the plane read zeros (`Border`; blocked input only).
///
/// The depth (K) is walked as *entries* of `run` consecutive k steps `step` floats apart:
/// blocked input — one entry per (input block, ky, kx), its 8 channels at stride 1; plain
/// input — one entry per (channel, ky), its kx taps at stride `dilation`.
///
/// Work is cut into *chunks* of output positions whose A rows (positions × a depth pass)
/// stay in L2 while every weight panel passes over them with its weights in L1; a task
/// takes one chunk of one group and a range of its panels, and walks the depth passes in
/// order, so each output element sums its passes in the same order whatever the split.
///
/// # Safety
/// As `conv`, with `src` the image's input planes of `plane` rows × columns (None:
/// `g.input`, and `g` not a plain input).
unsafe fn gemm_image(
    par: &Par,
    g: &BlockedConv,
    src: *const f32,
    plane: Option<[usize; 2]>,
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
) {
    let [oh, ow] = g.output;
    let npos = oh * ow;
    let (mg, kd) = (g.mg(), g.kdim());
    // The cut is in units of the panels a run takes (two for the AVX-512 kernels), so that
    // no task's range splits a pair.
    let unit = if paired_panels() { 2 } else { 1 };
    let panels = g.panels().div_ceil(unit);
    let pass_k = g.pass_k();
    let max_chunk = (A_CHUNK_BYTES / (pass_k * 4)).clamp(ROWS, MAX_CHUNK) / ROWS * ROWS;
    let macs = npos * kd * mg * g.group;
    let most = g.group * npos.div_ceil(ROWS) * panels;
    let t = par.tasks(macs, MIN_TASK_MACS, 2, most);
    let ImageCut {
        chunk_pos,
        chunks,
        splits,
        per,
    } = ImageCut::of(npos, max_chunk, g.group, panels, t, par.workers());
    let units = g.group * chunks;
    let tile = ImageTile {
        g,
        src,
        plane,
        w,
        ep,
        y,
        chunk_pos,
    };
    // SAFETY: each task writes its chunk's positions of its panels' output blocks.
    unsafe {
        par.run(units * splits, &|t, _| {
            let (u, sp) = (t / splits, t % splits);
            let (gi, chunk) = (u / chunks, u % chunks);
            let all = g.panels();
            tile.run(
                gi,
                chunk,
                (sp * per * unit).min(all)..((sp + 1) * per * unit).min(all),
            );
        })
    };
}

/// How `gemm_image` cuts one image's work into tasks: every (group, chunk of `chunk_pos`
/// positions), times `splits` ranges of `per` weight panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ImageCut {
    chunk_pos: usize,
    chunks: usize,
    splits: usize,
    per: usize,
}

impl ImageCut {
    /// The cut of `npos` positions of `group` groups of `panels` panels into about `t`
    /// tasks of like cost for `workers` workers, chunks at most `max_chunk` positions (a
    /// multiple of `ROWS`). The panels are split only when the (group, chunk) units are
    /// fewer than `t`. The chunks are as even as whole tiles of `ROWS` allow, and when the
    /// work is split, as many as make the task count a multiple of the workers (where the
    /// positions allow): the pool gives each worker a block of consecutive tasks, so uneven
    /// tasks or blocks left one worker idle for the last part of the call (a 1×1 convolution
    /// over 14 × 14 positions cut into chunks of 126 and 70: 1.46× on 2 threads).
    fn of(
        npos: usize,
        max_chunk: usize,
        group: usize,
        panels: usize,
        t: usize,
        workers: usize,
    ) -> ImageCut {
        let tiles = npos.div_ceil(ROWS).max(1);
        // Even chunks of whole tiles, about `n` of them (the last may be shorter by up to a
        // tile per chunk).
        let even = |n: usize| tiles.div_ceil(n) * ROWS;
        let least = npos.div_ceil(max_chunk).max(1);
        let mut chunk_pos = even(least);
        let (mut splits, mut per) = (1, panels);
        if t > 1 {
            if group * least < t {
                splits = t.div_ceil(group * least).min(panels).max(1);
                per = panels.div_ceil(splits);
                splits = panels.div_ceil(per);
            }
            // Smaller chunks when the panels run out before the tasks reach `t`; a few more
            // if that makes the tasks a multiple of the workers.
            let want = least.max(t.div_ceil(group * splits)).min(tiles);
            chunk_pos = even(want);
            if let Some(pos) = (want..=tiles.min(want + 4 * workers))
                .map(even)
                .find(|&pos| (group * npos.div_ceil(pos) * splits).is_multiple_of(workers))
            {
                chunk_pos = pos;
            }
        }
        ImageCut {
            chunk_pos,
            chunks: npos.div_ceil(chunk_pos),
            splits,
            per,
        }
    }
}

/// One image's convolution as `gemm_image` cuts it.
struct ImageTile<'a> {
    g: &'a BlockedConv,
    src: *const f32,
    /// The planes' rows and columns; None: the input read in place with `Border` checks.
    plane: Option<[usize; 2]>,
    w: *const f32,
    ep: &'a Epilogue,
    y: *mut f32,
    chunk_pos: usize,
}

impl ImageTile<'_> {
    /// Chunk `chunk` of group `gi`'s output positions for the panels `panels`, every depth
    /// pass in order.
    ///
    /// # Safety
    /// As `gemm_image`.
    unsafe fn run(&self, gi: usize, chunk: usize, panels: Range<usize>) {
        let g = self.g;
        let [ph, pw] = self.plane.unwrap_or(g.input);
        // Reading the input in place, window corners lie up to the padding before it.
        let [pt, pl] = if self.plane.is_some() { [0, 0] } else { g.pads };
        let [oh, ow] = g.output;
        let oplane = oh * ow * CB;
        let [kh, kw] = g.kernel;
        let [dh, dw] = g.dilations;
        let (mg, kd) = (g.mg(), g.kdim());
        // Floats per input position (the plain layout has one channel per plane).
        let (lane, run, step) = if g.plain_input {
            (1, kw, dw)
        } else {
            (CB, CB, 1)
        };
        let offsets = |e: usize| -> isize {
            if g.plain_input {
                let (c, ky) = (e / kh, e % kh);
                ((c * ph + ky * dh) * pw) as isize
            } else {
                let (cb, t) = (e / (kh * kw), e % (kh * kw));
                (((cb * ph + t / kw * dh) * pw + t % kw * dw) * CB) as isize
            }
        };
        // A blocked entry's tap, (rows, columns) from the window's corner.
        let tap = |e: usize| -> [usize; 2] {
            let t = e % (kh * kw);
            [t / kw * dh, t % kw * dw]
        };
        let entries = kd / run;
        // Entries per depth pass.
        let pass = g.pass_k() / run;
        let q0 = chunk * self.chunk_pos;
        let q1 = (q0 + self.chunk_pos).min(oh * ow);
        // Window origin of every position of the chunk, in tiles of ROWS consecutive
        // positions (a tile may span output rows, so narrow outputs do not leave short tiles
        // at row ends).
        let mut origins = [0isize; MAX_CHUNK];
        for (q, o) in (q0..q1).zip(origins.iter_mut()) {
            let (oy, ox) = (q / ow, q % ow);
            let row = (oy * g.strides[0]) as isize - pt as isize;
            let col = (ox * g.strides[1]) as isize - pl as isize;
            *o = (row * pw as isize + col) * lane as isize;
        }
        let origins = &origins[..q1 - q0];
        // Reading in place, which positions' windows lie inside the input.
        let mut inside = [true; MAX_CHUNK];
        if self.plane.is_none() {
            let reach = [(kh - 1) * dh, (kw - 1) * dw];
            for (q, i) in (q0..q1).zip(inside.iter_mut()) {
                let (oy, ox) = (q / ow, q % ow);
                let fits = |o: usize, d: usize| {
                    let start = o * g.strides[d];
                    start >= g.pads[d] && start - g.pads[d] + reach[d] < g.input[d]
                };
                *i = fits(oy, 0) && fits(ox, 1);
            }
        }
        let inside = &inside[..q1 - q0];
        let mut offs = [0isize; MAX_PASS_ENTRIES];
        let mut taps = [[0usize; 2]; MAX_PASS_ENTRIES];
        let mut e0 = 0;
        while e0 < entries {
            let e1 = (e0 + pass).min(entries);
            for ((o, t), e) in offs
                .iter_mut()
                .zip(taps.iter_mut())
                .zip(gi * entries + e0..gi * entries + e1)
            {
                *o = offsets(e);
                *t = tap(e);
            }
            let border = self.plane.is_none().then(|| Border {
                q0,
                ow,
                strides: g.strides,
                pads: g.pads,
                input: g.input,
                inside,
                taps: &taps[..e1 - e0],
            });
            let (first, last) = (e0 == 0, e1 == entries);
            let per_run = if paired_panels() { 2 } else { 1 };
            for p in panels.clone().step_by(per_run) {
                let chan = gi * mg + p * PANEL;
                let yoff = (chan / CB) * oplane + q0 * CB;
                let width = (panels.end - p).min(per_run) * PANEL;
                // SAFETY: the run's positions and blocks lie inside the output; its taps
                // inside the padded input, or inside the input where `border` says so; the
                // pass's rows inside the panels.
                unsafe {
                    let r = Run {
                        blocks: (mg - p * PANEL).min(width) / CB,
                        offs: &offs[..e1 - e0],
                        run,
                        step,
                        x: self.src,
                        origins,
                        w: self.w.add(g.panel_at(gi, e0 * run, p)),
                        w2: if width > PANEL {
                            self.w.add(g.panel_at(gi, e0 * run, p + 1))
                        } else {
                            std::ptr::null()
                        },
                        y: self.y.add(yoff),
                        oplane,
                        accumulate: !first,
                        ep: last.then(|| Epilogue {
                            bias: crate::opt_add(self.ep.bias, chan),
                            residual: crate::opt_add(self.ep.residual, yoff),
                            ..*self.ep
                        }),
                        border,
                    };
                    positions(&r);
                }
            }
            e0 = e1;
        }
    }
}

/// Whether the runs take two panels at once (`Run::w2`): the AVX-512 kernels do.
fn paired_panels() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::isa::avx512()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// # Safety
/// As `Run`'s fields say (`blocks` > 2 only where `paired_panels`).
unsafe fn positions(t: &Run) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: forwarded; AVX-512 F/DQ and FMA detected.
        unsafe { avx512::positions(t) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 and FMA detected.
        unsafe { avx2::positions(t) };
        return;
    }
    let cols = t.blocks * CB;
    for (q0, tile) in t
        .origins
        .chunks(ROWS)
        .enumerate()
        .map(|(i, c)| (i * ROWS, c))
    {
        let mut acc = [[0f32; PANEL]; ROWS];
        let corners: [[isize; 2]; ROWS] = std::array::from_fn(|r| {
            t.border
                .as_ref()
                .map_or([0, 0], |b| b.corner((q0 + r).min(t.origins.len() - 1)))
        });
        for (e, &o) in t.offs.iter().enumerate() {
            for i in 0..t.run {
                let k = e * t.run + i;
                for ((accr, &pos), &corner) in acc.iter_mut().zip(tile).zip(&corners) {
                    if t.border.as_ref().is_some_and(|b| !b.tap_inside(corner, e)) {
                        continue;
                    }
                    // SAFETY: caller contract (a tap outside the input is skipped above).
                    let a = unsafe { *t.x.offset(o + pos).add(i * t.step) };
                    for (j, v) in accr.iter_mut().enumerate().take(cols) {
                        // SAFETY: the panel holds the pass's rows of 16.
                        *v += a * unsafe { *t.w.add(k * PANEL + j) };
                    }
                }
            }
        }
        for (r, accr) in acc.iter().enumerate().take(tile.len()) {
            for (j, &a) in accr.iter().enumerate().take(cols) {
                let at = (j / CB) * t.oplane + (q0 + r) * CB + j % CB;
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
}

/// Taps `[k0, k1)` of a window starting at `start` (may be negative) with `k` taps `dil`
/// apart that fall inside `0..n`.
pub(crate) fn valid_taps(start: i64, k: usize, dil: usize, n: usize) -> (usize, usize) {
    let first_at = |lim: i64| -> usize {
        if start >= lim {
            0
        } else {
            ((lim - start) as usize).div_ceil(dil)
        }
    };
    let k0 = first_at(0).min(k);
    (k0, first_at(n as i64).min(k).max(k0))
}

/// C ABI entry point. `clamp` points to `[lo, hi]` or is null; `bias` and `residual`
/// (blocked like y) may be null. Returns `ONNXC_ERR_PARAMS`, touching nothing, when `params`
/// is not a valid `BlockedConv::encode` blob.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); `threads` as `Par::from_raw`;
/// otherwise as `conv`.
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
    threads: *const Threads,
) -> Status {
    let g = params::decode_blob!(params, BlockedConv::decode);
    // SAFETY: forwarded contract, the geometry validated.
    unsafe {
        let (lo, hi) = crate::clamp_bounds(clamp);
        conv(
            Par::from_raw(threads),
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
    ONNXC_OK
}

#[cfg(test)]
mod tests;
