//! Convolution (f32, N-d, grouped) as implicit GEMM: C[M×N] = W[M×K] · cols[K×N] per group,
//! where cols (the im2col matrix) is never materialized: each K×N block is packed straight
//! from the input into the GEMM's B panels. Weights are packed into A panels once (at compile
//! time). Pointwise convolutions read the input as B directly; depthwise convolutions use a
//! direct kernel. The geometry is shared with the compiler, which sizes the scratch.

use crate::gemm::{self, BSource, Epilogue, MR, NR, pack};
use crate::simd::{self, Simd};

#[cfg(target_arch = "x86_64")]
mod depthwise512;
mod pixel_major;
pub mod transpose;

/// Geometry of one convolution (NC[spatial] layout).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGeometry {
    pub n: i64,
    pub c: i64,
    pub m: i64,
    pub group: i64,
    pub input: Vec<i64>,
    pub kernel: Vec<i64>,
    pub output: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    /// Padding at the start of each spatial dim.
    pub pads: Vec<i64>,
    /// The weights are laid out for a target with 512-bit vectors (AVX-512). Layout choices
    /// made where the model is compiled whose best answer depends on the vector width
    /// follow it (`use_winograd` for 32-63 output channels); the kernels run correctly on
    /// any CPU either way.
    pub wide_simd: bool,
    /// Never use Winograd (`onnxc --no-winograd`): direct convolution's rounding error
    /// (F(4×4, 3×3) has about 15× more, ~3e-5 of the output's RMS against ~2e-6).
    pub no_winograd: bool,
    /// Depthwise only: channel `ch` of every image reads the input plane at element offset
    /// `input_planes[ch]` of the image (a channel permutation — ShuffleNet's shuffle —
    /// absorbed by the compiler). Empty: plane `ch`, as usual.
    pub input_planes: Vec<i64>,
}

impl ConvGeometry {
    /// `[nsp, n, c, m, group, flags, input.., kernel.., output.., strides.., dilations..,
    /// pads.., input_planes..]`; flags: bit 0 `wide_simd`, bit 1 `no_winograd`, bit 2
    /// `input_planes` present (`c` of them).
    pub fn encode(&self) -> Vec<i64> {
        let mut p = vec![
            self.input.len() as i64,
            self.n,
            self.c,
            self.m,
            self.group,
            self.wide_simd as i64
                | (self.no_winograd as i64) << 1
                | (!self.input_planes.is_empty() as i64) << 2,
        ];
        for v in [
            &self.input,
            &self.kernel,
            &self.output,
            &self.strides,
            &self.dilations,
            &self.pads,
        ] {
            p.extend_from_slice(v);
        }
        p.extend_from_slice(&self.input_planes);
        p
    }

    /// # Safety
    /// `p` must point to an array written by `encode`.
    pub unsafe fn decode(p: *const i64) -> ConvGeometry {
        // SAFETY: the caller guarantees the layout of `encode`.
        unsafe {
            let nsp = *p as usize;
            let hdr = std::slice::from_raw_parts(p, 6);
            let rest = std::slice::from_raw_parts(p.add(6), 6 * nsp);
            let part = |i: usize| rest[i * nsp..(i + 1) * nsp].to_vec();
            let input_planes = if hdr[5] & 4 != 0 {
                std::slice::from_raw_parts(p.add(6 + 6 * nsp), hdr[2] as usize).to_vec()
            } else {
                Vec::new()
            };
            ConvGeometry {
                n: hdr[1],
                c: hdr[2],
                m: hdr[3],
                group: hdr[4],
                wide_simd: hdr[5] & 1 != 0,
                no_winograd: hdr[5] & 2 != 0,
                input: part(0),
                kernel: part(1),
                output: part(2),
                strides: part(3),
                dilations: part(4),
                pads: part(5),
                input_planes,
            }
        }
    }

    /// Element offset of the input plane that output channel `ch` of image `b` reads
    /// (depthwise; `input_planes` applied).
    #[inline]
    fn depthwise_input_plane(&self, b: usize, ch: usize) -> usize {
        let image = b * self.c as usize * self.isize();
        match self.input_planes.get(ch) {
            Some(&off) => image + off as usize,
            None => image + ch * self.isize(),
        }
    }

    fn cg(&self) -> usize {
        (self.c / self.group) as usize
    }
    fn mg(&self) -> usize {
        (self.m / self.group) as usize
    }
    fn ksize(&self) -> usize {
        self.kernel.iter().product::<i64>() as usize
    }
    fn osize(&self) -> usize {
        self.output.iter().product::<i64>() as usize
    }
    fn isize(&self) -> usize {
        self.input.iter().product::<i64>() as usize
    }
    /// K of the per-group GEMM.
    fn kdim(&self) -> usize {
        self.cg() * self.ksize()
    }

    pub fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pads.iter().all(|&p| p == 0)
            && self.input == self.output
    }

    /// One input and one output channel per group: a direct kernel, weights unpacked.
    pub fn is_depthwise(&self) -> bool {
        self.cg() == 1 && self.mg() == 1
    }

    /// Padded-plane geometry of the depthwise path: (stride phases' rows, columns, slack).
    fn depthwise_dims(&self) -> Option<(usize, usize, usize)> {
        if self.input.len() != 2 {
            return None;
        }
        let s = |d: usize| self.strides[d] as usize;
        let ph = (self.input[0] + self.pads[0]) as usize + self.pad_end_2d(0);
        let pw = (self.input[1] + self.pads[1]) as usize + self.pad_end_2d(1);
        let (qh, qw) = (ph.div_ceil(s(0)), pw.div_ceil(s(1)));
        let slack = qw * ((self.kernel[0] * self.dilations[0]) as usize / s(0) + 1)
            + (self.kernel[1] * self.dilations[1]) as usize
            + 16;
        Some((qh, qw, slack))
    }

    /// Bottom/right padding needed so that every tap of every output is inside the plane.
    fn pad_end_2d(&self, d: usize) -> usize {
        ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1
            - self.input[d]
            - self.pads[d])
            .max(0) as usize
    }

    /// The 2-D depthwise convolution of one depth slice of one plane, through which a 3-D
    /// depthwise convolution runs (`depthwise_3d`); None for other geometries.
    fn depthwise_slice(&self) -> Option<ConvGeometry> {
        if self.input.len() != 3 || !self.is_depthwise() {
            return None;
        }
        Some(ConvGeometry {
            n: 1,
            c: 1,
            m: 1,
            group: 1,
            input: self.input[1..].to_vec(),
            kernel: self.kernel[1..].to_vec(),
            output: self.output[1..].to_vec(),
            strides: self.strides[1..].to_vec(),
            dilations: self.dilations[1..].to_vec(),
            pads: self.pads[1..].to_vec(),
            wide_simd: self.wide_simd,
            no_winograd: self.no_winograd,
            input_planes: Vec::new(),
        })
    }

    fn depthwise_scratch(&self) -> usize {
        if let Some(g2) = self.depthwise_slice() {
            return g2.depthwise_scratch();
        }
        // Whichever path the running CPU takes (`conv_f32`): in place (AVX-512, horizontal
        // stride 1 or 2: no scratch), channel-blocked (AVX2, small planes otherwise) or
        // plane by plane.
        let blocked = match self.depthwise_blocked_dims() {
            Some((hp, wp)) => (hp * wp + self.osize() + self.ksize()) * DW_BLOCK,
            None => 0,
        };
        let planes = match self.depthwise_dims() {
            Some((qh, qw, slack)) => {
                let (s0, s1) = (self.strides[0] as usize, self.strides[1] as usize);
                let padded = qh * s0 * qw * s1;
                let phases = s0 * s1 * (qh * qw + slack);
                padded + phases
            }
            None => 0,
        };
        blocked.max(planes)
    }

    /// Padded extents (rows, columns) of the channel-blocked depthwise path
    /// (`depthwise_blocked`), for 2-D depthwise convs with at least half a block of
    /// channels. `conv_f32` takes it with AVX2 (8×8 register transposes in and out) while
    /// its buffer fits in L2, and for small planes otherwise, where per-plane setup would
    /// dominate their few outputs.
    fn depthwise_blocked_dims(&self) -> Option<(usize, usize)> {
        if self.input.len() != 2 || !self.is_depthwise() || self.m < DW_BLOCK as i64 / 2 {
            return None;
        }
        let span = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                as usize
        };
        Some((span(0), span(1)))
    }

    /// Compute the product pixel-major (C^T = cols^T · W^T: output positions as the rows of the
    /// register tile, output channels as its columns) rather than channel-major. Pays when the
    /// output has few positions (7×7, 14×14 maps): a 12×32 tile then wastes fewer lanes along
    /// the positions (49 = 4·12 + 1 rather than 2·32 − 15), and the weights become the packed
    /// B operand, streamed once in long contiguous panels. The result goes through a
    /// transposing store with the epilogue, so it is limited to small outputs.
    pub fn pixel_major(&self) -> bool {
        if self.input.len() != 2
            || self.is_depthwise()
            || self.use_winograd()
            || self.kdim() == 0
            || !self.pm_offsets_fit()
        {
            return false;
        }
        let (n, m) = (self.osize(), self.mg());
        if n > 512 {
            return false;
        }
        // Pointwise and stride-1 k×k convs read their input in place channel-major (the
        // indirect path); pixel-major they gather it into A panels (`pixel_major.rs`), which
        // pays only where the lane gain is large: 7×7 maps (Zen 5, AVX-512: ResNet-50's
        // 2048→512 1×1 170 → 208 GFLOP/s, 512→512 3×3 168 → 206; its AVX2 kernels 85 → 97
        // and 76 → 86), not 14×14 (1024→128 1×1 190 → 168, DenseNet's 128→32 3×3 163 → 115).
        if (self.is_pointwise() || self.indirect_dims().is_some()) && n > 100 {
            return false;
        }
        // Fraction of each tile's lanes doing useful work in either orientation; the switch
        // needs a clear gain: 7×7 outputs (0.91 vs 0.76) run 15-23% faster; 14×14 ones (0.99
        // vs 0.87) of strided convs, which pack their input either way, 6-20% (Zen 5:
        // ResNet-50's 256→256 3×3/2 165-175 → 193-197 GFLOP/s, its 512→256 1×1/2 166 → 177;
        // 512→1024 1×1/2 level).
        let eff = |rows: usize, cols: usize| {
            (rows as f64 / rows.next_multiple_of(MR) as f64)
                * (cols as f64 / cols.next_multiple_of(2 * NR) as f64)
        };
        eff(n, m) > 1.1 * eff(m, n)
    }

    /// Implicit GEMM over shifted views of a zero-padded input (stride-1 2-D convs with a
    /// kernel wider than 1×1): output positions are computed in the padded input's row
    /// pitch, so row (c, ty, tx) of the im2col matrix is the padded plane of channel c read
    /// from offset ty·pitch + tx — no im2col packing at all. Returns (padded rows, pitch,
    /// columns computed) or None when the layer takes another path.
    fn indirect_dims(&self) -> Option<(usize, usize, usize)> {
        if self.strides != [1, 1] {
            return None;
        }
        self.phase_dims()
    }

    /// The indirect path for strided 2-D convs, through stride phases: the padded input is
    /// split into sh·sw phase planes (phase (a, b) holds padded rows a, a+sh, … and columns
    /// b, b+sw, …), so every tap reads a contiguous shifted view of one phase plane and the
    /// outputs come out in the phase pitch. Whether the running CPU takes it is
    /// `strided_indirect_pays`. Layers that go pixel-major keep that path.
    fn strided_indirect_dims(&self) -> Option<(usize, usize, usize)> {
        if self.strides == [1, 1] || self.pixel_major() {
            return None;
        }
        self.phase_dims()
    }

    /// (phase plane rows, pitch, columns computed) of the indirect path for this geometry's
    /// strides (a single phase at stride 1), or None when it does not apply.
    fn phase_dims(&self) -> Option<(usize, usize, usize)> {
        if self.input.len() != 2
            || self.is_pointwise()
            || self.is_depthwise()
            || self.use_winograd()
            || self.kdim() == 0
            || self.strides.iter().any(|&s| s < 1)
        {
            return None;
        }
        let ext = |d: usize| ((self.kernel[d] - 1) * self.dilations[d] + 1) as usize;
        let (oh, ow) = (self.output[0] as usize, self.output[1] as usize);
        let (sh, sw) = (self.strides[0] as usize, self.strides[1] as usize);
        let (qh, qw) = (oh + (ext(0) - 1) / sh, ow + (ext(1) - 1) / sw);
        if oh == 0 || ow == 0 {
            return None;
        }
        // The padding columns are computed too: worth it while the tiles computed stay within
        // 25% of the packing path's (which pays for im2col instead). Measured in SqueezeNet
        // on Zen 3: its 13×13 3×3 expands (17% more tiles) ran 0.60 → 0.30 and 1.00 → 0.68 ms
        // in the model, though equal in the warm layer benchmark.
        if 100 * (oh * qw).next_multiple_of(2 * NR) > 125 * (oh * ow).next_multiple_of(2 * NR) {
            return None;
        }
        // The result's pitch: whole tiles of either GEMM layout (which one runs is decided
        // on the CPU that runs the model; the workspace is sized where it is compiled).
        let cols = gemm::indirect_cols(oh * qw);
        // The result goes through a buffer in the padded pitch and is compacted afterwards:
        // beyond L2 that extra pass costs what skipping im2col saves (measured: neutral at
        // 64×56×56, a loss for larger outputs).
        if self.mg().next_multiple_of(MR) * cols > INDIRECT_MAX_RESULT {
            return None;
        }
        Some((qh, qw, cols))
    }

    /// Whether `conv_f32` takes the indirect path on this CPU.
    pub fn uses_indirect(&self) -> bool {
        self.run_indirect_dims().is_some()
    }

    /// The indirect path's dims when `conv_f32` takes it on this CPU.
    fn run_indirect_dims(&self) -> Option<(usize, usize, usize)> {
        if !gemm::indirect_b_available() {
            return None;
        }
        match self.indirect_dims() {
            Some(d) => Some(d),
            None if strided_indirect_pays(self) => self.strided_indirect_dims(),
            None => None,
        }
    }

    /// Scratch floats of the indirect path: padded input planes (with slack for the last
    /// tile's reads), the result in the padded pitch, the row offsets.
    fn indirect_scratch(&self) -> usize {
        match self.indirect_dims().or(self.strided_indirect_dims()) {
            Some((qh, qw, cols)) => {
                let phases = (self.strides[0] * self.strides[1]) as usize;
                let plane = qh * qw;
                let pin = (self.cg() * phases * plane + plane + cols).next_multiple_of(16);
                let c = (self.mg().next_multiple_of(MR) * cols).next_multiple_of(16);
                pin + c + 2 * self.kdim() + 16
            }
            None => 0,
        }
    }

    /// Floats of the packed weights of one group.
    fn packed_weights_per_group(&self) -> usize {
        if self.pixel_major() {
            pack::packed_b_len(self.kdim(), self.mg())
        } else {
            pack::packed_a_len(self.mg(), self.kdim())
        }
    }

    /// Floats of the packed weights (`pack_weights`).
    pub fn packed_weights_len(&self) -> usize {
        if self.use_winograd() {
            return self.winograd_weights_len();
        }
        if self.is_depthwise() {
            self.m as usize * self.ksize()
        } else {
            self.group as usize * self.packed_weights_per_group()
        }
    }

    /// Packs each group's `[mg, kd]` weight matrix: as A panels (channel-major) or, transposed,
    /// as B panels (pixel-major).
    ///
    /// # Safety
    /// `w` holds the `[M, kd]` weights, `dst` `packed_weights_len()` floats.
    unsafe fn pack_gemm_weights(&self, w: *const f32, dst: *mut f32) {
        let (mg, kd) = (self.mg(), self.kdim());
        let per = self.packed_weights_per_group();
        for g in 0..self.group as usize {
            // SAFETY: group g's weights are rows g*mg.. of the [M, kd] matrix.
            unsafe {
                if self.pixel_major() {
                    pack::pack_b(w.add(g * mg * kd), kd, true, kd, mg, dst.add(g * per));
                } else {
                    pack::pack_a(w.add(g * mg * kd), kd, false, mg, kd, dst.add(g * per));
                }
            }
        }
    }

    /// Weights `[M, C/group, kernel…]` in the layout `onnxc_conv_f32` reads.
    pub fn pack_weights(&self, w: &[f32]) -> Vec<f32> {
        if self.use_winograd() {
            return self.winograd_pack(w);
        }
        if self.is_depthwise() {
            return w.to_vec();
        }
        assert_eq!(
            w.len(),
            self.m as usize * self.kdim(),
            "conv weights of the wrong size"
        );
        let mut out = vec![0f32; self.packed_weights_len()];
        // SAFETY: sizes checked above.
        unsafe { self.pack_gemm_weights(w.as_ptr(), out.as_mut_ptr()) };
        out
    }

    /// Scratch floats `onnxc_conv_f32` needs (plus the packed weights when they are packed at
    /// run time).
    pub fn scratch_floats(&self, weights_packed: bool) -> usize {
        let w = if weights_packed {
            0
        } else {
            self.packed_weights_len()
        };
        let b = if self.use_winograd() {
            self.winograd_scratch()
        } else if self.is_depthwise() {
            self.depthwise_scratch()
        } else if self.pixel_major() {
            self.pm_scratch()
        } else {
            // The run-time CPU decides between the indirect and the packing path.
            (gemm::scratch_len(self.osize(), false) + self.osize() * 2).max(self.indirect_scratch())
        };
        w + b
    }
}

/// Whether the stride-phase indirect path (`strided_indirect_dims`) beats im2col packing on
/// this CPU. With AVX2 alone (Zen 3) it does for every strided layer measured (ResNet-50's
/// and Inception v2's stride-2 3×3 convs: see ARCHITECTURE.md). With AVX-512 it depends on
/// the core: on Intel (Emerald Rapids) the AVX-512 im2col packer beat it by 25-40%; on AMD
/// Zen 5 it wins for kernels wider than 1×1 (ResNet-50's stride-2 3×3 convs 1.59 → 1.35
/// and 1.58 → 1.38 ms in the model) and loses for 1×1 ones (512→1024 at 28→14: 1.24 →
/// 1.32 ms), whose im2col is a plain subsampling copy.
fn strided_indirect_pays(g: &ConvGeometry) -> bool {
    if !gemm::indirect_wide_tiles() {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        crate::isa::amd() && g.kernel.iter().any(|&k| k > 1)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// Most leading spatial dims (all but the last) the row-wise im2col packers take: 2-D and
/// 3-D convolutions (1-D ones are compiled as 2-D ones over a single row); more go through
/// the element-wise `pack_im2col`.
const MAX_LEAD: usize = 2;

/// Whether the row-wise packers (`pack_im2col_2d` and its SIMD versions) take `g`.
fn row_packable(g: &ConvGeometry) -> bool {
    (1..=MAX_LEAD + 1).contains(&g.input.len())
}

/// How the row-wise im2col packers walk a convolution: the output is a sequence of rows
/// (runs along the last spatial dim, one per combination of the leading output
/// coordinates), and a kernel tap of an output row reads one input row (or lies in the
/// padding).
#[derive(Clone, Copy)]
struct Rows {
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
#[allow(clippy::too_many_arguments, reason = "block coordinates")]
unsafe fn pack_im2col_2d(
    g: &ConvGeometry,
    xg: *const f32,
    k0: usize,
    kc: usize,
    n0: usize,
    nc: usize,
    dst: *mut f32,
    width: usize,
) {
    debug_assert!(width == NR || width == MR);
    if width == NR && kc <= gemm::KC {
        let w = Im2colPanels {
            g,
            xg,
            k0,
            kc,
            n0,
            nc,
            dst,
        };
        // SAFETY: forwarded contract; native vectors of 8 or 16 lanes divide NR.
        if unsafe { simd::dispatch_native(w) }.is_some() {
            return;
        }
    }
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
#[derive(Clone, Copy)]
struct Im2colPanels<'a> {
    g: &'a ConvGeometry,
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
        let Im2colPanels {
            g,
            xg,
            k0,
            kc,
            n0,
            nc,
            dst,
        } = self;
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
struct Tap {
    plane: usize,
    lead: [i64; MAX_LEAD],
    shift: i64,
    lo: i64,
    hi: i64,
}

/// The tap of im2col row `kk` (`row_packable(g)`).
fn im2col_tap(g: &ConvGeometry, kk: usize) -> Tap {
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
fn im2col_taps(g: &ConvGeometry, k0: usize, kc: usize) -> [Tap; gemm::KC] {
    let mut taps = [Tap::default(); gemm::KC];
    for (kx, tap) in taps.iter_mut().enumerate().take(kc) {
        *tap = im2col_tap(g, k0 + kx);
    }
    taps
}

/// Packs rows `k0..k0+kc` × columns `n0..n0+nc` of one group's im2col matrix into B panels.
///
/// # Safety
/// `xg` holds the group's `cg` input channel planes; `dst` has room for the block;
/// `base` is scratch for the spatial origin (per dim) of every output position of the block.
/// Any number of spatial dims (`pack_im2col_2d` is the fast path for 1 to 3).
#[allow(clippy::too_many_arguments, reason = "block coordinates")]
unsafe fn pack_im2col(
    g: &ConvGeometry,
    xg: *const f32,
    k0: usize,
    kc: usize,
    n0: usize,
    nc: usize,
    dst: *mut f32,
    base: &mut Vec<i64>,
) {
    let nsp = g.input.len();
    let ks = g.ksize();
    let isz = g.isize();
    // Spatial origin (before adding the kernel tap) of each output position in the block,
    // nsp values per position.
    base.clear();
    let mut pos = vec![0i64; nsp];
    let mut rem = n0 as i64;
    for d in (0..nsp).rev() {
        pos[d] = rem % g.output[d];
        rem /= g.output[d];
    }
    for _ in 0..nc {
        for ((p, s), pad) in pos.iter().zip(&g.strides).zip(&g.pads) {
            base.push(p * s - pad);
        }
        for d in (0..nsp).rev() {
            pos[d] += 1;
            if pos[d] < g.output[d] {
                break;
            }
            pos[d] = 0;
        }
    }
    let mut tap = vec![0i64; nsp];
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
        for p in 0..nc.div_ceil(NR) {
            // SAFETY: panel p, row kx of the block.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.add((p * kc + kx) * NR), NR) };
            for (j, o) in out.iter_mut().enumerate() {
                let col = p * NR + j;
                if col >= nc {
                    *o = 0.0;
                    continue;
                }
                let b = &base[col * nsp..(col + 1) * nsp];
                let mut off = 0i64;
                let mut inside = true;
                for d in 0..nsp {
                    let q = b[d] + tap[d];
                    inside &= q >= 0 && q < g.input[d];
                    off = off * g.input[d] + q;
                }
                // SAFETY: inside means the tap lies in the channel plane.
                *o = if inside {
                    unsafe { *plane.add(off as usize) }
                } else {
                    0.0
                };
            }
        }
    }
}

/// Largest result (floats, one group) the indirect convolution buffers before compacting it.
const INDIRECT_MAX_RESULT: usize = 256 * 1024;

/// Channels per block of the channel-blocked depthwise kernel (one AVX-512 vector).
const DW_BLOCK: usize = 16;
/// Largest output plane that goes channel-blocked. Its scalar transposes cost about what
/// plane-by-plane setup costs at 14×14, so only smaller planes gain (measured: 7×7 outputs
/// 1.8× faster, 14×14 equal, 28×28 2× slower).
const DW_BLOCKED_MAX_OUT: usize = 100;

/// Largest channel-last buffer (padded input plus output cells of 16 channels) the AVX2
/// channel-blocked kernel takes. Measured on Zen 3 (512 KB L2) against the plane path, in
/// MobileNet: 56×56 stride 1 (6500 cells) 0.35 → 0.28 ms, 28×28 and smaller 1.5-3× faster,
/// 112×112 → 56×56 stride 2 (15900 cells, 1 MB) 5% slower.
const DW_BLOCKED_MAX_CELLS_AVX2: usize = 8192;

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

/// 2-D depthwise convolution over blocks of 16 channels stored channel-last: the block's
/// planes are transposed into a zero-padded [row][column][16] buffer, every output position
/// accumulates its taps as 16-channel vectors, and the result is transposed back with the
/// epilogue. Small planes then cost a few vector operations per output instead of per-plane
/// setup.
///
/// # Safety
/// As `conv_f32` for a depthwise geometry with `dims = depthwise_blocked_dims()`.
unsafe fn depthwise_blocked(g: &ConvGeometry, c: Call, dims: (usize, usize)) {
    crate::multiversion!(depthwise_blocked_body(g, c, dims))
}

#[inline(always)]
fn depthwise_blocked_body(g: &ConvGeometry, c: Call, (hp, wp): (usize, usize)) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y, scratch) = (c.lo, c.hi, c.y, c.scratch);
    const B: usize = DW_BLOCK;
    let (ih, iw) = (g.input[0] as usize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    let (s0, s1) = (g.strides[0] as usize, g.strides[1] as usize);
    let (d0, d1) = (g.dilations[0] as usize, g.dilations[1] as usize);
    let (p0, p1) = (g.pads[0] as usize, g.pads[1] as usize);
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
fn block_weights(
    w: *const f32,
    bias: *const f32,
    c0: usize,
    nc: usize,
    wt: &mut [[f32; DW_BLOCK]],
) -> [f32; DW_BLOCK] {
    let ks = wt.len();
    for (t, wv) in wt.iter_mut().enumerate() {
        // SAFETY: channel c0+c's kernel tap t (the caller's weights hold every channel).
        *wv = std::array::from_fn(|c| {
            if c < nc {
                unsafe { *w.add((c0 + c) * ks + t) }
            } else {
                0.0
            }
        });
    }
    // SAFETY: bias, when present, has an entry per channel.
    std::array::from_fn(|c| {
        if c < nc && !bias.is_null() {
            unsafe { *bias.add(c0 + c) }
        } else {
            0.0
        }
    })
}

/// Transposes a 16×16 block of floats held as 16 row vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose16(r: &mut [std::arch::x86_64::__m512; 16]) {
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

/// Transposes an 8×8 block of floats held as 8 row vectors.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(r: &mut [std::arch::x86_64::__m256; 8]) {
    use std::arch::x86_64::*;
    let t: [__m256; 8] = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let u: [__m256; 8] = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    for j in 0..4 {
        r[j] = _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j]);
        r[4 + j] = _mm256_permute2f128_ps::<0x31>(u[j], u[4 + j]);
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
unsafe fn depthwise_blocked_avx2(g: &ConvGeometry, c: Call, (hp, wp): (usize, usize)) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y, scratch) = (c.lo, c.hi, c.y, c.scratch);
    use std::arch::x86_64::*;
    const B: usize = DW_BLOCK;
    let (ih, iw) = (g.input[0] as usize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    let (s0, s1) = (g.strides[0] as usize, g.strides[1] as usize);
    let (d0, d1) = (g.dilations[0] as usize, g.dilations[1] as usize);
    let (p0, p1) = (g.pads[0] as usize, g.pads[1] as usize);
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
    // SAFETY (whole body): xc holds hp·wp, yc osz and wt ks 16-float cells (scratch sized by
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
                            transpose8(&mut v);
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
                let rb = if residual.is_null() {
                    residual
                } else {
                    residual.add((b * chans + c0) * osz)
                };
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
                        transpose8(&mut v);
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

/// 2-D depthwise convolution: each plane is zero-padded and split into stride phases, so
/// every kernel tap reads a contiguous run of a phase for 16 outputs at a time (computed in
/// the phases' row pitch, cropped while applying the epilogue).
///
/// # Safety
/// As `conv_f32` for a depthwise geometry with `dims = depthwise_dims()`.
unsafe fn depthwise_2d(g: &ConvGeometry, c: Call, dims: (usize, usize, usize)) {
    crate::multiversion!(depthwise_2d_planes(g, c, dims))
}

/// Every plane of a 2-D depthwise convolution (one ISA dispatch for all of them).
#[inline(always)]
fn depthwise_2d_planes(g: &ConvGeometry, c: Call, (qh, qw, slack): (usize, usize, usize)) {
    // A plain loop, not a closure: a closure body is compiled as its own function without
    // the ISA features `multiversion!` enables (measured: the plane kernel ran in SSE
    // registers without FMA, 3× slower than onnxruntime's depthwise convs).
    for plane in 0..depthwise_planes(g) {
        let (xp, wp, yp, bv, r) = depthwise_plane_ptrs(g, c, plane);
        depthwise_body(g, xp, wp, yp, bv, r, c.lo, c.hi, c.scratch, qh, qw, slack)
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
unsafe fn depthwise_3d(g: &ConvGeometry, g2: &ConvGeometry, c: Call) {
    let (lo, hi, scratch) = (c.lo, c.hi, c.scratch);
    let (id, od, kd) = (g.input[0], g.output[0], g.kernel[0] as usize);
    let (islice, oslice, kslice) = (g2.isize(), g2.osize(), g2.ksize());
    for plane in 0..depthwise_planes(g) {
        let (xp, wp, yp, bv, r) = depthwise_plane_ptrs(g, c, plane);
        for o in 0..od {
            let taps: Vec<(usize, usize)> = (0..kd)
                .filter_map(|k| {
                    let i = o * g.strides[0] + k as i64 * g.dilations[0] - g.pads[0];
                    (0..id).contains(&i).then_some((k, i as usize))
                })
                .collect();
            // SAFETY: slice `o` of the output plane (and of the residual plane).
            let (ys, rs) = unsafe {
                let ys = yp.add(o as usize * oslice);
                (
                    ys,
                    if r.is_null() {
                        r
                    } else {
                        r.add(o as usize * oslice)
                    },
                )
            };
            if taps.is_empty() {
                for j in 0..oslice {
                    // SAFETY: inside the output slice (and the residual slice).
                    unsafe {
                        let rv = if rs.is_null() { 0.0 } else { *rs.add(j) };
                        *ys.add(j) = crate::clamp_ep(bv + rv, lo, hi);
                    }
                }
                continue;
            }
            for (t, &(k, i)) in taps.iter().enumerate() {
                let (first, last) = (t == 0, t + 1 == taps.len());
                // SAFETY: input slice i, kernel slice k and output slice o of the plane;
                // scratch holds what the 2-D geometry needs (`depthwise_scratch`).
                unsafe {
                    conv_f32(
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
fn depthwise_planes(g: &ConvGeometry) -> usize {
    (g.n * g.m) as usize
}

/// (input plane, kernel, output plane, bias, residual plane or null) of depthwise plane
/// `plane` (batch-major, as `depthwise_planes` counts them).
#[inline(always)]
fn depthwise_plane_ptrs(
    g: &ConvGeometry,
    c: Call,
    plane: usize,
) -> (*const f32, *const f32, *mut f32, f32, *const f32) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let y = c.y;
    let osz = g.osize();
    let (b, ch) = (plane / g.m as usize, plane % g.m as usize);
    // SAFETY: plane offsets inside x, y, the residual and the weights.
    unsafe {
        let bv = if bias.is_null() { 0.0 } else { *bias.add(ch) };
        let r = if residual.is_null() {
            residual
        } else {
            residual.add(plane * osz)
        };
        (
            x.add(g.depthwise_input_plane(b, ch)),
            w.add(ch * g.ksize()),
            y.add(plane * osz),
            bv,
            r,
        )
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
fn depthwise_body(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    bias: f32,
    resid: *const f32,
    lo: f32,
    hi: f32,
    scratch: *mut f32,
    qh: usize,
    qw: usize,
    slack: usize,
) {
    let (s0, s1) = (g.strides[0] as usize, g.strides[1] as usize);
    let (d0, d1) = (g.dilations[0] as usize, g.dilations[1] as usize);
    let (ih, iw) = (g.input[0] as usize, g.input[1] as usize);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    let (p0, p1) = (g.pads[0] as usize, g.pads[1] as usize);
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
    let mut taps = [(0usize, 0f32); 49];
    let mut tap_vec = Vec::new();
    let ntaps = kh * kw;
    let taps: &mut [(usize, f32)] = if ntaps <= taps.len() {
        &mut taps[..ntaps]
    } else {
        tap_vec.resize(ntaps, (0usize, 0f32));
        &mut tap_vec
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
unsafe fn depthwise_chunks_avx512(
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
    // SAFETY (both closures and the loop): caller contract.
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
unsafe fn store_chunk(
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
unsafe fn depthwise_plane(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    bias: f32,
    resid: *const f32,
    lo: f32,
    hi: f32,
) {
    let nsp = g.input.len();
    // Ranks other than 2 (2-D goes through `depthwise_2d`): straightforward loops.
    let osz = g.osize();
    let ks = g.ksize();
    let mut opos = vec![0i64; nsp];
    let mut tap = vec![0i64; nsp];
    for o in 0..osz {
        let mut r = o as i64;
        for d in (0..nsp).rev() {
            opos[d] = r % g.output[d];
            r /= g.output[d];
        }
        let mut acc = bias;
        for t in 0..ks {
            let mut rr = t as i64;
            for d in (0..nsp).rev() {
                tap[d] = rr % g.kernel[d];
                rr /= g.kernel[d];
            }
            let mut off = 0i64;
            let mut inside = true;
            for d in 0..nsp {
                let q = opos[d] * g.strides[d] + tap[d] * g.dilations[d] - g.pads[d];
                inside &= q >= 0 && q < g.input[d];
                off = off * g.input[d] + q;
            }
            if inside {
                // SAFETY: inside the plane and the kernel.
                acc += unsafe { *x.add(off as usize) * *w.add(t) };
            }
        }
        let r = if resid.is_null() {
            0.0
        } else {
            unsafe { *resid.add(o) }
        };
        // SAFETY: inside the output plane.
        unsafe { *y.add(o) = crate::clamp_ep(acc + r, lo, hi) };
    }
}

/// # Safety
/// Buffers valid for the geometry; `w` packed by `pack_weights` (or raw `[M, C/g, k…]` weights
/// when `!weights_packed`); `scratch` holds `scratch_floats(weights_packed)` floats.
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe fn conv_f32(
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
    let (cg, mg, isz, osz) = (g.cg(), g.mg(), g.isize(), g.osize());
    let c = Call {
        x,
        w,
        bias,
        residual,
        lo,
        hi,
        y,
        scratch,
    };
    if g.is_depthwise() {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::avx512() && depthwise512::supported(g) {
            // SAFETY: AVX-512 detected; forwarded contract.
            unsafe { depthwise512::depthwise(g, c) };
            return;
        }
        if let Some(dims) = g.depthwise_blocked_dims() {
            #[cfg(target_arch = "x86_64")]
            if crate::isa::avx2() && dims.0 * dims.1 + g.osize() <= DW_BLOCKED_MAX_CELLS_AVX2 {
                // SAFETY: AVX2 and FMA detected; forwarded contract.
                unsafe { depthwise_blocked_avx2(g, c, dims) };
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
            let (xp, wp, yp, bv, r) = depthwise_plane_ptrs(g, c, plane);
            // SAFETY: one plane of the geometry and its kernel.
            unsafe { depthwise_plane(g, xp, wp, yp, bv, r, lo, hi) }
        }
        return;
    }
    let kd = g.kdim();
    let per = g.packed_weights_per_group();
    if g.use_winograd() {
        // SAFETY: forwarded; run-time weights are transformed into scratch first.
        unsafe {
            let (wp, rest) = if weights_packed {
                (w, scratch)
            } else {
                let raw = std::slice::from_raw_parts(w, g.m as usize * kd);
                let packed = g.pack_weights(raw);
                std::ptr::copy_nonoverlapping(packed.as_ptr(), scratch, packed.len());
                (scratch as *const f32, scratch.add(packed.len()))
            };
            let c = Call {
                w: wp,
                scratch: rest,
                ..c
            };
            crate::winograd::conv_winograd(g, c);
        }
        return;
    }
    let (wp, rest) = if weights_packed {
        (w, scratch)
    } else {
        // SAFETY: the first packed_weights_len floats of scratch hold the packed weights.
        unsafe {
            g.pack_gemm_weights(w, scratch);
            (scratch as *const f32, scratch.add(g.packed_weights_len()))
        }
    };
    let mut base = Vec::with_capacity(gemm::NC * g.input.len());
    for b in 0..g.n as usize {
        for grp in 0..g.group as usize {
            // SAFETY: offsets inside the tensors described by the geometry.
            unsafe {
                let xg = x.add((b * g.c as usize + grp * cg) * isz);
                let yg = y.add((b * g.m as usize + grp * mg) * osz);
                let ep = Epilogue {
                    bias_row: if bias.is_null() {
                        bias
                    } else {
                        bias.add(grp * mg)
                    },
                    bias_col: std::ptr::null(),
                    residual: if residual.is_null() {
                        residual
                    } else {
                        residual.add((b * g.m as usize + grp * mg) * osz)
                    },
                    lo,
                    hi,
                };
                let a = wp.add(grp * per);
                if g.pixel_major() {
                    pixel_major::conv_pixel_major(g, xg, a, yg, &ep, rest);
                } else if let Some(dims) = g.run_indirect_dims() {
                    conv_indirect(g, dims, xg, a, yg, &ep, rest);
                } else if g.is_pointwise() {
                    gemm::gemm_packed_a(
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
                        rest,
                    );
                } else {
                    if row_packable(g) {
                        let packer = |k0: usize, kc: usize, n0: usize, nc: usize, dst: *mut f32| {
                            pack_im2col_2d(g, xg, k0, kc, n0, nc, dst, NR)
                        };
                        gemm::gemm_packed_a(
                            mg,
                            osz,
                            kd,
                            a,
                            BSource::Custom(&packer),
                            yg,
                            osz,
                            &ep,
                            rest,
                        );
                    } else {
                        let base_ref = std::cell::RefCell::new(&mut base);
                        let packer = |k0: usize, kc: usize, n0: usize, nc: usize, dst: *mut f32| {
                            pack_im2col(g, xg, k0, kc, n0, nc, dst, &mut base_ref.borrow_mut())
                        };
                        gemm::gemm_packed_a(
                            mg,
                            osz,
                            kd,
                            a,
                            BSource::Custom(&packer),
                            yg,
                            osz,
                            &ep,
                            rest,
                        );
                    }
                }
            }
        }
    }
}

/// One group's convolution through `gemm_indirect_b` (see `ConvGeometry::indirect_dims`).
///
/// # Safety
/// As `conv_f32` for one group: `xg` the group's input planes, `a` its packed weights, `yg`
/// its output planes, `scratch` at least `indirect_scratch()` floats.
unsafe fn conv_indirect(
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
    pin.fill(0.0);
    let (kh, kw) = (g.kernel[0] as usize, g.kernel[1] as usize);
    let (dh, dw) = (g.dilations[0] as usize, g.dilations[1] as usize);
    // Phases no tap reads (a 1×1 kernel at stride 2 reads one of four) are left zero.
    let row_used: Vec<bool> = (0..sh)
        .map(|pa| (0..kh).any(|t| t * dh % sh == pa))
        .collect();
    let col_used: Vec<bool> = (0..sw)
        .map(|pb| (0..kw).any(|t| t * dw % sw == pb))
        .collect();
    for c in 0..cg {
        for pa in (0..sh).filter(|&pa| row_used[pa]) {
            for pb in (0..sw).filter(|&pb| col_used[pb]) {
                let dst = ((c * sh + pa) * sw + pb) * plane;
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
    for (kk, o) in offs.iter_mut().enumerate() {
        let (c, t) = (kk / (kh * kw), kk % (kh * kw));
        let (ty, tx) = ((t / kw) * dh, (t % kw) * dw);
        let phase = (c * sh + ty % sh) * sw + tx % sw;
        *o = (phase * plane + (ty / sh) * qw + tx / sw) as isize;
    }
    // SAFETY: every row offset plus `cols` stays inside pin (its slack covers the last
    // kernel row and tile); cbuf holds ⌈mg/MR⌉·MR rows of `cols`.
    unsafe { gemm::gemm_indirect_b(mg, oh * qw, kd, a, pin.as_ptr(), offs, cbuf, cols) };
    // Drop the padding columns and apply the epilogue.
    debug_assert!(ep.bias_col.is_null(), "convolutions have no column bias");
    let osz = oh * ow;
    for co in 0..mg {
        let bias = if ep.bias_row.is_null() {
            0.0
        } else {
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
                    let res = std::slice::from_raw_parts(ep.residual.add(co * osz + oy * ow), ow);
                    for ((d, v), r) in dst.iter_mut().zip(src).zip(res) {
                        *d = crate::clamp_ep(*v + bias + r, ep.lo, ep.hi);
                    }
                }
            }
        }
    }
}

/// C ABI entry point. `clamp` points to `[lo, hi]` or is null (no clamping); `bias` and
/// `residual` (laid out like y) may be null.
///
/// # Safety
/// As `conv_f32`.
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
) {
    // SAFETY: forwarded contract.
    unsafe {
        let g = ConvGeometry::decode(params);
        let (lo, hi) = crate::clamp_bounds(clamp);
        conv_f32(
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
}

/// Packs the whole im2col matrix of a 2-D, one-group convolution block by block (`nc`
/// columns each, all into `dst`): the packing cost alone, for `benches/gemm.rs`.
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
        // SAFETY: checked above: x holds the planes, dst one block.
        unsafe { pack_im2col_2d(g, x.as_ptr(), 0, kd, n0, w, dst.as_mut_ptr(), NR) };
        n0 += w;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::test_rand as rand;

    /// Direct convolution: the oracle.
    pub(crate) fn reference(g: &ConvGeometry, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let nsp = g.input.len();
        let (cg, mg, ks, osz, isz) = (g.cg(), g.mg(), g.ksize(), g.osize(), g.isize());
        let mut y = vec![0f32; g.n as usize * g.m as usize * osz];
        for b in 0..g.n as usize {
            for m in 0..g.m as usize {
                let grp = m / mg;
                for o in 0..osz {
                    let mut op = vec![0i64; nsp];
                    let mut r = o as i64;
                    for d in (0..nsp).rev() {
                        op[d] = r % g.output[d];
                        r /= g.output[d];
                    }
                    let mut acc = bias[m] as f64;
                    for c in 0..cg {
                        for t in 0..ks {
                            let mut tp = vec![0i64; nsp];
                            let mut rr = t as i64;
                            for d in (0..nsp).rev() {
                                tp[d] = rr % g.kernel[d];
                                rr /= g.kernel[d];
                            }
                            let mut off = 0i64;
                            let mut inside = true;
                            for d in 0..nsp {
                                let q = op[d] * g.strides[d] + tp[d] * g.dilations[d] - g.pads[d];
                                inside &= q >= 0 && q < g.input[d];
                                off = off * g.input[d] + q;
                            }
                            if inside {
                                acc += x[(b * g.c as usize + grp * cg + c) * isz + off as usize]
                                    as f64
                                    * w[(m * cg + c) * ks + t] as f64;
                            }
                        }
                    }
                    y[(b * g.m as usize + m) * osz + o] = acc as f32;
                }
            }
        }
        y
    }

    #[allow(clippy::too_many_arguments, reason = "test geometry")]
    pub(crate) fn geom(
        n: i64,
        c: i64,
        m: i64,
        group: i64,
        input: &[i64],
        kernel: &[i64],
        strides: &[i64],
        dil: &[i64],
        pads: &[i64],
    ) -> ConvGeometry {
        let output: Vec<i64> = (0..input.len())
            .map(|d| (input[d] + 2 * pads[d] - (kernel[d] - 1) * dil[d] - 1) / strides[d] + 1)
            .collect();
        ConvGeometry {
            n,
            c,
            m,
            group,
            input: input.into(),
            kernel: kernel.into(),
            output,
            strides: strides.into(),
            dilations: dil.into(),
            pads: pads.into(),
            wide_simd: crate::isa::wide_simd(),
            no_winograd: false,
            input_planes: Vec::new(),
        }
    }

    #[test]
    fn matches_direct_convolution() {
        let cases = [
            geom(1, 3, 8, 1, &[9, 11], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(2, 16, 20, 1, &[7, 7], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
            geom(1, 8, 12, 2, &[10, 9], &[3, 2], &[2, 1], &[1, 2], &[1, 0]),
            geom(1, 6, 6, 6, &[13, 13], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 6, 6, 6, &[13, 12], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            // Channel-blocked depthwise: a partial block, strides, dilation, 5×5, batch.
            geom(2, 40, 40, 40, &[7, 7], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 24, 24, 24, &[15, 13], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 16, 16, 16, &[8, 9], &[3, 3], &[1, 1], &[2, 2], &[2, 2]),
            geom(1, 20, 20, 20, &[9, 9], &[5, 5], &[2, 2], &[1, 1], &[2, 2]),
            // Plane by plane: rows wider than a vector at stride 2, rows of whole vectors.
            geom(1, 32, 32, 32, &[40, 37], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 16, 16, 16, &[32, 32], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // In place (AVX-512, `depthwise512`): 3×3/1 with partial strips and a last block
            // of 3 rows, output wider than the input (padding 2), 5×5/1, 3×3/2 with a partial
            // last strip and odd heights, unpadded; the one-row loops: 3×5, vertical stride
            // 2, 1×1 and 7×7 at stride 2; stride 3 (the phase path).
            geom(1, 20, 20, 20, &[19, 37], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(2, 5, 5, 5, &[9, 18], &[3, 3], &[1, 1], &[1, 1], &[2, 2]),
            geom(1, 8, 8, 8, &[23, 17], &[5, 5], &[1, 1], &[1, 1], &[2, 2]),
            geom(1, 8, 8, 8, &[57, 50], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 4, 4, 4, &[9, 40], &[3, 3], &[2, 2], &[1, 1], &[0, 0]),
            geom(1, 6, 6, 6, &[11, 21], &[3, 5], &[1, 1], &[1, 1], &[1, 2]),
            geom(1, 4, 4, 4, &[10, 20], &[3, 3], &[2, 1], &[1, 1], &[1, 1]),
            geom(1, 16, 16, 16, &[9, 33], &[1, 1], &[2, 2], &[1, 1], &[0, 0]),
            geom(1, 4, 4, 4, &[30, 40], &[7, 7], &[2, 2], &[1, 1], &[3, 3]),
            // 7×7/1 (blocked, ConvNeXt): partial strips, a last block of 1-3 rows.
            geom(1, 5, 5, 5, &[13, 21], &[7, 7], &[1, 1], &[1, 1], &[3, 3]),
            // 5×5/2 (blocked, EfficientNet): partial strips, odd sizes, no padding.
            geom(2, 6, 6, 6, &[23, 41], &[5, 5], &[2, 2], &[1, 1], &[2, 2]),
            geom(1, 3, 3, 3, &[12, 35], &[5, 5], &[2, 2], &[1, 1], &[0, 0]),
            geom(1, 6, 6, 6, &[13, 13], &[3, 3], &[3, 3], &[1, 1], &[1, 1]),
            geom(1, 4, 5, 1, &[30], &[5], &[2], &[1], &[2]),
            geom(
                1,
                2,
                3,
                1,
                &[5, 6, 4],
                &[3, 3, 2],
                &[1, 2, 1],
                &[1, 1, 1],
                &[1, 1, 0],
            ),
            geom(1, 300, 7, 1, &[5, 5], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Row-wise im2col beyond 2-D: 3-D with K over two blocks and rows crossing
            // panels, 3-D strided and dilated with batch, 3-D groups with a stride wider
            // than the kernel; 1-D strided and dilated (as run by the runtime's own callers;
            // compiled models run 1-D convs as 2-D ones over one row: the next ones);
            // 4-D (the element-wise packer).
            geom(
                1,
                12,
                16,
                1,
                &[6, 9, 21],
                &[3, 3, 3],
                &[1, 1, 1],
                &[1, 1, 1],
                &[1, 1, 1],
            ),
            geom(
                2,
                5,
                8,
                1,
                &[9, 11, 37],
                &[3, 2, 3],
                &[2, 1, 2],
                &[1, 2, 1],
                &[1, 0, 1],
            ),
            geom(
                1,
                8,
                12,
                2,
                &[5, 6, 7],
                &[2, 3, 3],
                &[1, 2, 3],
                &[1, 1, 1],
                &[0, 1, 1],
            ),
            // 3-D depthwise (2-D slices): 3×3×3, strided and dilated with batch, output
            // slices whose depth taps all fall in the padding.
            geom(
                1,
                5,
                5,
                5,
                &[6, 9, 21],
                &[3, 3, 3],
                &[1, 1, 1],
                &[1, 1, 1],
                &[1, 1, 1],
            ),
            geom(
                2,
                4,
                4,
                4,
                &[5, 11, 37],
                &[3, 3, 3],
                &[2, 2, 2],
                &[2, 1, 1],
                &[3, 1, 1],
            ),
            geom(
                1,
                3,
                3,
                3,
                &[3, 8, 8],
                &[2, 3, 3],
                &[1, 1, 1],
                &[1, 1, 1],
                &[4, 1, 1],
            ),
            geom(1, 16, 24, 1, &[200], &[3], &[2], &[1], &[1]),
            geom(1, 8, 8, 1, &[50], &[3], &[1], &[3], &[3]),
            geom(1, 16, 24, 1, &[1, 200], &[1, 3], &[1, 2], &[1, 1], &[0, 1]),
            geom(1, 8, 8, 8, &[1, 100], &[1, 31], &[1, 1], &[1, 1], &[0, 15]),
            geom(
                1,
                2,
                3,
                1,
                &[3, 4, 5, 6],
                &[2, 2, 2, 2],
                &[1, 1, 2, 1],
                &[1, 1, 1, 1],
                &[1, 0, 0, 1],
            ),
            // Winograd: 3×3 stride 1 with enough channels (odd sizes, pads, groups).
            geom(1, 32, 64, 1, &[9, 30], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(2, 64, 128, 2, &[8, 35], &[3, 3], &[1, 1], &[1, 1], &[0, 0]),
            geom(1, 40, 65, 1, &[5, 61], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Panels spanning two tile rows (7 tiles per row padded to 8), tiles past the
            // last row (7 rows: 56 tiles in 4 panels).
            geom(1, 32, 64, 1, &[14, 14], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 48, 70, 1, &[13, 13], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Winograd F(4×4, 3×3) (maps of 20 and more; AVX-512, AVX2 or portable transforms
            // by the ISA cap): odd sizes with tiles past the edges, no padding with groups
            // and batch, 28×28.
            ConvGeometry {
                wide_simd: true,
                no_winograd: false,
                ..geom(1, 32, 64, 1, &[29, 45], &[3, 3], &[1, 1], &[1, 1], &[1, 1])
            },
            ConvGeometry {
                wide_simd: true,
                no_winograd: false,
                ..geom(2, 64, 128, 2, &[30, 33], &[3, 3], &[1, 1], &[1, 1], &[0, 0])
            },
            ConvGeometry {
                wide_simd: true,
                no_winograd: false,
                ..geom(1, 40, 70, 1, &[28, 28], &[3, 3], &[1, 1], &[1, 1], &[1, 1])
            },
            // Input channels over two K blocks of the packed transformed input.
            geom(1, 260, 40, 1, &[10, 14], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Pixel-major: small strided outputs, many output channels (edges in both tile
            // dims, K above one block, groups).
            geom(1, 40, 64, 1, &[8, 8], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(2, 300, 64, 1, &[13, 13], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 16, 128, 2, &[7, 7], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 24, 70, 1, &[5, 21], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 64, 256, 1, &[14, 14], &[1, 1], &[2, 2], &[1, 1], &[0, 0]),
            geom(1, 64, 128, 1, &[7, 7], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
            // Pixel-major from the input in place (7×7 pointwise, batch and groups) and from
            // zero-padded planes (a 3×3 and a dilated 3×3 the indirect path would take
            // elsewhere).
            geom(2, 48, 128, 2, &[7, 7], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
            geom(1, 40, 96, 1, &[7, 7], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 20, 64, 1, &[8, 9], &[3, 3], &[1, 1], &[2, 2], &[2, 2]),
            // Padding at the end only (SAME_UPPER at stride 2: outputs 4 = ⌈8/2⌉).
            ConvGeometry {
                output: vec![4, 4],
                ..geom(1, 24, 64, 1, &[8, 8], &[3, 3], &[2, 2], &[1, 1], &[0, 0])
            },
            // More output channels than one column block of the packed weights.
            geom(1, 8, 1100, 1, &[6, 6], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            // Indirect (padded-pitch implicit GEMM): dilation, 5×5, asymmetric padding via
            // the output size, groups, K over several blocks.
            geom(1, 8, 20, 1, &[12, 40], &[3, 3], &[1, 1], &[2, 2], &[2, 2]),
            geom(2, 6, 13, 1, &[17, 40], &[5, 5], &[1, 1], &[1, 1], &[2, 1]),
            geom(1, 20, 30, 2, &[9, 16], &[3, 3], &[1, 1], &[1, 1], &[0, 1]),
            geom(1, 31, 64, 1, &[11, 12], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Indirect in 8 × 48 tiles: 32 and 16 output channels, K over two blocks, groups.
            geom(1, 16, 32, 1, &[20, 22], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 40, 16, 1, &[12, 30], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(2, 32, 64, 2, &[15, 14], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            // Channel-major im2col (the panel packer): a stem-like 7×7/2 whose 19-wide output
            // rows cross panels, an AlexNet-like 11×11/4 (gathered lanes), stride 3×2 with
            // dilation, K over two blocks, outputs narrower than a panel.
            geom(1, 3, 16, 1, &[35, 37], &[7, 7], &[2, 2], &[1, 1], &[3, 3]),
            geom(1, 3, 8, 1, &[45, 47], &[11, 11], &[4, 4], &[1, 1], &[2, 2]),
            geom(1, 5, 8, 1, &[20, 23], &[3, 3], &[3, 2], &[2, 2], &[1, 1]),
            geom(1, 40, 8, 1, &[40, 34], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 4, 8, 1, &[9, 9], &[3, 3], &[2, 2], &[1, 1], &[0, 0]),
            // Strided with a result too large for the indirect path: im2col on every CPU.
            geom(1, 3, 64, 1, &[130, 130], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 3, 72, 1, &[120, 118], &[5, 5], &[2, 3], &[1, 1], &[2, 1]),
        ];
        let im2col = |g: &ConvGeometry| {
            !g.use_winograd()
                && !g.pixel_major()
                && !g.uses_indirect()
                && !g.is_pointwise()
                && !g.is_depthwise()
        };
        assert!(
            cases.iter().filter(|g| im2col(g)).count() >= 2,
            "the channel-major im2col path is covered"
        );
        if gemm::indirect_b_available() && !gemm::indirect_wide_tiles() {
            assert!(
                cases
                    .iter()
                    .filter(|g| g.uses_indirect() && g.strides != [1, 1])
                    .count()
                    >= 4,
                "the stride-phase indirect path is covered"
            );
        }
        if gemm::indirect_b_available() {
            assert!(
                cases.iter().filter(|g| g.indirect_dims().is_some()).count() >= 4,
                "the indirect path is covered"
            );
            let rows8 = |g: &&ConvGeometry| {
                g.indirect_dims().is_some_and(|(_, wp, _)| {
                    gemm::indirect_rows8(g.mg(), g.output[0] as usize * wp)
                })
            };
            if gemm::indirect_wide_tiles() {
                assert!(
                    cases.iter().filter(rows8).count() >= 3,
                    "the 8 × 48 indirect layout is covered"
                );
            }
        }
        assert!(
            cases.iter().filter(|g| g.use_winograd()).count() >= 3,
            "the Winograd path is covered"
        );
        assert!(
            cases
                .iter()
                .filter(|g| g.use_winograd()
                    && g.winograd_variant() == crate::winograd::Variant::F4)
                .count()
                >= 3,
            "Winograd F(4×4, 3×3) is covered"
        );
        assert!(
            cases.iter().filter(|g| g.pixel_major()).count() >= 8,
            "the pixel-major path is covered"
        );
        assert!(
            cases
                .iter()
                .filter(|g| g.pixel_major() && g.pm_padded_dims().is_none())
                .count()
                >= 2,
            "pixel-major from the input in place is covered"
        );
        // Past the scratch a kernel may use: a guard that must stay untouched.
        const GUARD: usize = 64;
        let guarded = |len: usize| {
            let mut v = vec![0f32; len + GUARD];
            v[len..].fill(1234.5);
            v
        };
        let check_guard = |v: &[f32], g: &ConvGeometry| {
            assert!(
                v[v.len() - GUARD..].iter().all(|&x| x == 1234.5),
                "{g:?} wrote past its scratch"
            );
        };
        for g in &cases {
            let x = rand((g.n * g.c) as usize * g.isize(), 1);
            let w = rand(g.m as usize * g.kdim(), 2);
            let bias = rand(g.m as usize, 3);
            let want = reference(g, &x, &w, &bias);
            for packed in [true, false] {
                let wp = if packed {
                    g.pack_weights(&w)
                } else {
                    w.clone()
                };
                let mut scratch = guarded(g.scratch_floats(packed));
                let mut y = vec![f32::NAN; want.len()];
                unsafe {
                    conv_f32(
                        g,
                        x.as_ptr(),
                        wp.as_ptr(),
                        packed,
                        bias.as_ptr(),
                        std::ptr::null(),
                        f32::NEG_INFINITY,
                        f32::INFINITY,
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                };
                check_guard(&scratch, g);
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() < 1e-3,
                        "{g:?} packed={packed} [{i}]: {a} vs {b}"
                    );
                }
            }
            // Epilogue: residual add and clamp.
            let resid = rand(want.len(), 4);
            let wp = g.pack_weights(&w);
            let mut scratch = guarded(g.scratch_floats(true));
            let mut y = vec![f32::NAN; want.len()];
            unsafe {
                conv_f32(
                    g,
                    x.as_ptr(),
                    wp.as_ptr(),
                    true,
                    bias.as_ptr(),
                    resid.as_ptr(),
                    0.0,
                    0.5,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            check_guard(&scratch, g);
            for i in 0..y.len() {
                let e = (want[i] + resid[i]).clamp(0.0, 0.5);
                assert!(
                    (y[i] - e).abs() < 1e-3,
                    "{g:?} epilogue [{i}]: {} vs {e}",
                    y[i]
                );
            }
            // A NaN reaching the epilogue survives the clamp (ONNX Relu/Clip), on every path.
            let resid: Vec<f32> = resid
                .iter()
                .enumerate()
                .map(|(i, v)| if i % 7 == 3 { f32::NAN } else { *v })
                .collect();
            unsafe {
                conv_f32(
                    g,
                    x.as_ptr(),
                    wp.as_ptr(),
                    true,
                    bias.as_ptr(),
                    resid.as_ptr(),
                    0.0,
                    0.5,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            for (i, v) in y.iter().enumerate() {
                assert_eq!(v.is_nan(), i % 7 == 3, "{g:?} NaN epilogue [{i}]: {v}");
            }
        }
    }

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
                let mut base = Vec::new();
                unsafe {
                    pack_im2col(&g, x.as_ptr(), k0, kc, n0, nc, want.as_mut_ptr(), &mut base)
                };
                let mut got = vec![f32::NAN; len];
                let w = Im2colPanels {
                    g: &g,
                    xg: x.as_ptr(),
                    k0,
                    kc,
                    n0,
                    nc,
                    dst: got.as_mut_ptr(),
                };
                let gp = got.as_ptr();
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

    /// A depthwise conv with `input_planes` (an absorbed channel shuffle) equals the plain
    /// conv of the permuted input, on every depthwise path (in place, channel-blocked,
    /// phases; the ISA cap selects the others in CI).
    #[test]
    fn depthwise_reads_permuted_planes() {
        for g in [
            geom(2, 24, 24, 24, &[9, 13], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
            geom(1, 40, 40, 40, &[28, 30], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
            geom(1, 12, 12, 12, &[11, 11], &[5, 5], &[3, 3], &[1, 1], &[2, 2]),
            geom(1, 16, 16, 16, &[40, 40], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        ] {
            let (c, isz) = (g.c as usize, g.isize());
            // The shuffle of 4 groups: channel ch reads (ch % 4)·(c/4) + ch / 4.
            let perm: Vec<usize> = (0..c).map(|ch| (ch % 4) * (c / 4) + ch / 4).collect();
            let x = rand(g.n as usize * c * isz, 5);
            let mut xp = x.clone();
            for b in 0..g.n as usize {
                for (ch, &src) in perm.iter().enumerate() {
                    let (d, s) = ((b * c + ch) * isz, (b * c + src) * isz);
                    xp[d..d + isz].copy_from_slice(&x[s..s + isz]);
                }
            }
            let w = rand(g.m as usize * g.kdim(), 6);
            let bias = rand(g.m as usize, 7);
            let want = reference(&g, &xp, &w, &bias);
            let gp = ConvGeometry {
                input_planes: perm.iter().map(|&p| (p * isz) as i64).collect(),
                ..g.clone()
            };
            assert_eq!(unsafe { ConvGeometry::decode(gp.encode().as_ptr()) }, gp);
            let mut scratch = vec![0f32; gp.scratch_floats(true)];
            let mut y = vec![f32::NAN; want.len()];
            unsafe {
                conv_f32(
                    &gp,
                    x.as_ptr(),
                    gp.pack_weights(&w).as_ptr(),
                    true,
                    bias.as_ptr(),
                    std::ptr::null(),
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert!((a - b).abs() < 1e-3, "{gp:?} [{i}]: {a} vs {b}");
            }
        }
    }
}
