//! `ConvGeometry`: one convolution's shape (shared with the compiler, which encodes it into
//! the kernel's parameter blob and sizes the scratch from it), its derived extents, and the
//! choice of path (`conv_f32` dispatches on it): indirect, pixel-major, depthwise variants,
//! Winograd, packed weights.

use super::depthwise::{DW_BLOCK, DW_INLINE_TAPS};
use super::indirect::INDIRECT_MAX_RESULT;
use crate::gemm::{self, MR, NR, pack};
use crate::par::ScratchNeed;
use crate::params;

/// Most spatial dims a convolution may have (the generic im2col packer takes any number;
/// ONNX models have 1 to 3).
pub const MAX_SPATIAL: usize = 8;

/// Per-spatial-dim values of a convolution (1 to `MAX_SPATIAL` of them), held inline so that
/// decoding a geometry on every kernel call allocates nothing. Reads as a slice.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    len: u8,
    /// The values, then zeros.
    v: [i64; MAX_SPATIAL],
}

impl Dims {
    /// # Panics
    /// With more than `MAX_SPATIAL` values (decoders check the rank first).
    pub fn new(values: &[i64]) -> Dims {
        assert!(
            values.len() <= MAX_SPATIAL,
            "more than {MAX_SPATIAL} spatial dims"
        );
        let mut v = [0; MAX_SPATIAL];
        v[..values.len()].copy_from_slice(values);
        Dims {
            len: values.len() as u8,
            v,
        }
    }
}

impl std::ops::Deref for Dims {
    type Target = [i64];
    fn deref(&self) -> &[i64] {
        &self.v[..self.len as usize]
    }
}

impl std::ops::DerefMut for Dims {
    fn deref_mut(&mut self) -> &mut [i64] {
        &mut self.v[..self.len as usize]
    }
}

impl std::fmt::Debug for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl From<Vec<i64>> for Dims {
    fn from(v: Vec<i64>) -> Dims {
        Dims::new(&v)
    }
}

impl From<&[i64]> for Dims {
    fn from(v: &[i64]) -> Dims {
        Dims::new(v)
    }
}

impl<const N: usize> From<[i64; N]> for Dims {
    fn from(v: [i64; N]) -> Dims {
        Dims::new(&v)
    }
}

impl<'a> IntoIterator for &'a Dims {
    type Item = &'a i64;
    type IntoIter = std::slice::Iter<'a, i64>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<const N: usize> PartialEq<[i64; N]> for Dims {
    fn eq(&self, o: &[i64; N]) -> bool {
        **self == o[..]
    }
}

impl PartialEq<[i64]> for Dims {
    fn eq(&self, o: &[i64]) -> bool {
        **self == *o
    }
}

/// The path a convolution takes where its sizes would choose one (`ConvGeometry::path`).
/// The compiler writes the one it chose at compile time, so that the weights it packed
/// match and a program taking a dim at run time keeps the path at every value
/// (`ConvGeometry::chosen_path`); 0 (`BySize`) lets the kernel choose from the geometry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvPath {
    #[default]
    BySize = 0,
    WinogradF2 = 1,
    WinogradF4 = 2,
    PixelMajor = 3,
    /// The indirect product: stride 1, or strided where the running CPU takes it.
    Indirect = 4,
    /// None of those: packed weights through im2col, the pointwise product or a subsample.
    Packed = 5,
}

impl ConvPath {
    fn from_code(v: i64) -> Option<ConvPath> {
        use ConvPath::*;
        [BySize, WinogradF2, WinogradF4, PixelMajor, Indirect, Packed]
            .get(usize::try_from(v).ok()?)
            .copied()
    }
}

/// Geometry of one convolution (NC[spatial] layout).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGeometry<'a> {
    pub n: i64,
    pub c: i64,
    pub m: i64,
    pub group: i64,
    pub input: Dims,
    pub kernel: Dims,
    pub output: Dims,
    pub strides: Dims,
    pub dilations: Dims,
    /// Padding at the start of each spatial dim.
    pub pads: Dims,
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
    /// absorbed by the compiler). Empty: plane `ch`, as usual. Borrowed from the parameter
    /// blob when decoded for a call (which then allocates nothing), owned by the compiler.
    pub input_planes: std::borrow::Cow<'a, [i64]>,
    /// The path taken where the sizes would choose (`ConvPath`).
    pub path: ConvPath,
}

impl<'a> ConvGeometry<'a> {
    /// The sealed blob (`params::seal`) `[len, nsp, n, c, m, group, flags, input..,
    /// kernel.., output.., strides.., dilations.., pads.., input_planes..]`; flags: bit 0
    /// `wide_simd`, bit 1 `no_winograd`, bit 2 `input_planes` present (`c` of them), bits
    /// 3-5 `path`.
    pub fn encode(&self) -> Vec<i64> {
        let mut p = vec![
            self.input.len() as i64,
            self.n,
            self.c,
            self.m,
            self.group,
            self.wide_simd as i64
                | (self.no_winograd as i64) << 1
                | (!self.input_planes.is_empty() as i64) << 2
                | (self.path as i64) << 3,
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
        params::seal(p)
    }

    /// The geometry `encode` wrote into `blob`, validated (`validate`).
    pub fn decode(blob: &'a [i64]) -> params::Result<ConvGeometry<'a>> {
        let mut r = params::Reader::new(blob)?;
        let nsp = params::in_range(
            r.word()?,
            1,
            MAX_SPATIAL as i64,
            "spatial rank out of range",
        )? as usize;
        let [n, c, m, group, flags] = r.array()?;
        params::ensure(flags & !63 == 0, "unknown flag bits")?;
        let path = ConvPath::from_code(flags >> 3)
            .ok_or(params::ParamError("unknown convolution path"))?;
        let mut part = || r.words(nsp).map(Dims::new);
        let (input, kernel, output) = (part()?, part()?, part()?);
        let (strides, dilations, pads) = (part()?, part()?, part()?);
        let input_planes = if flags & 4 != 0 {
            let c = params::in_range(c, 0, params::MAX_WORDS, "channels out of range")?;
            std::borrow::Cow::Borrowed(r.words(c as usize)?)
        } else {
            std::borrow::Cow::Borrowed(&[][..])
        };
        r.finish()?;
        let g = ConvGeometry {
            n,
            c,
            m,
            group,
            input,
            kernel,
            output,
            strides,
            dilations,
            pads,
            wide_simd: flags & 1 != 0,
            no_winograd: flags & 2 != 0,
            input_planes,
            path,
        };
        g.validate()?;
        Ok(g)
    }

    /// Checks what the kernels rely on: 1 to `MAX_SPATIAL` spatial dims, each consistent
    /// (`params::conv_dim`); `n`, `c` and `m` not negative, the group at least 1 and
    /// dividing `c` and `m`; tensors, weights and padded planes whose sizes fit in memory;
    /// `input_planes` (depthwise only) one plane inside the image per channel.
    pub fn validate(&self) -> params::Result<()> {
        use params::{ensure, in_range, product};
        let nsp = self.input.len();
        ensure(
            (1..=MAX_SPATIAL).contains(&nsp),
            "spatial rank out of range",
        )?;
        ensure(
            [
                &self.kernel,
                &self.output,
                &self.strides,
                &self.dilations,
                &self.pads,
            ]
            .iter()
            .all(|v| v.len() == nsp),
            "spatial dims of different ranks",
        )?;
        for d in 0..nsp {
            params::conv_dim(
                self.input[d],
                self.kernel[d],
                self.output[d],
                self.strides[d],
                self.dilations[d],
                self.pads[d],
            )?;
        }
        for v in [self.n, self.c, self.m] {
            in_range(
                v,
                0,
                params::MAX_EXTENT,
                "a batch or channel count is out of range",
            )?;
        }
        in_range(self.group, 1, params::MAX_EXTENT, "group out of range")?;
        ensure(
            self.c % self.group == 0 && self.m % self.group == 0,
            "the group does not divide the channels",
        )?;
        let too_big = "a tensor is too large";
        let isize = product(self.input.iter().copied(), too_big)?;
        let osize = product(self.output.iter().copied(), too_big)?;
        product([self.n, product([self.c, isize], too_big)?], too_big)?;
        product([self.n, product([self.m, osize], too_big)?], too_big)?;
        product(
            [
                self.m,
                self.c / self.group,
                product(self.kernel.iter().copied(), too_big)?,
            ],
            too_big,
        )?;
        // The padded planes the depthwise and indirect paths copy into scratch: every tap of
        // every output inside.
        product(
            (0..nsp).map(|d| {
                let reach = (self.output[d] - 1) * self.strides[d]
                    + params::window_span(self.kernel[d], self.dilations[d]);
                reach.max(self.input[d] + self.pads[d])
            }),
            too_big,
        )?;
        if !self.input_planes.is_empty() {
            ensure(
                self.is_depthwise(),
                "input planes of a conv that is not depthwise",
            )?;
            ensure(
                self.input_planes.len() == self.c as usize,
                "not one input plane per channel",
            )?;
            let last = (self.c - 1) * isize;
            ensure(
                self.input_planes.iter().all(|&p| (0..=last).contains(&p)),
                "an input plane lies outside the image",
            )?;
        }
        // A path chosen at compile time must apply: its weights were packed for it.
        match self.path {
            ConvPath::WinogradF2 | ConvPath::WinogradF4 => {
                ensure(self.winograd_applies(), "Winograd does not apply")?
            }
            ConvPath::PixelMajor => ensure(
                self.subsampled()
                    .map_or_else(|| self.pixel_major_applies(), |v| v.pixel_major_applies()),
                "the pixel-major product does not apply",
            )?,
            _ => {}
        }
        Ok(())
    }

    /// The path the kernel takes where the sizes would choose (`path` if set): what the
    /// compiler writes into `path` for the weights it packs.
    pub fn chosen_path(&self) -> ConvPath {
        if self.use_winograd() {
            match self.winograd_variant() {
                crate::winograd::Variant::F2 => ConvPath::WinogradF2,
                crate::winograd::Variant::F4 => ConvPath::WinogradF4,
            }
        } else if self.pixel_major() {
            ConvPath::PixelMajor
        } else if self
            .indirect_dims()
            .or(self.strided_indirect_dims())
            .is_some()
        {
            ConvPath::Indirect
        } else {
            ConvPath::Packed
        }
    }

    /// Element offset of the input plane that output channel `ch` of image `b` reads
    /// (depthwise; `input_planes` applied).
    #[inline]
    pub(super) fn depthwise_input_plane(&self, b: usize, ch: usize) -> usize {
        let image = b * self.c as usize * self.isize();
        match self.input_planes.get(ch) {
            Some(&off) => image + off as usize,
            None => image + ch * self.isize(),
        }
    }

    /// The first two spatial dims as `usize` (a 2-D kernel's loop bounds and steps):
    /// `[input, output, kernel, strides, dilations, pads]`, each `[dim 0, dim 1]`.
    pub(super) fn plane2(&self) -> [[usize; 2]; 6] {
        [
            &self.input,
            &self.output,
            &self.kernel,
            &self.strides,
            &self.dilations,
            &self.pads,
        ]
        .map(|v| [v[0] as usize, v[1] as usize])
    }

    pub(super) fn cg(&self) -> usize {
        (self.c / self.group) as usize
    }
    pub(super) fn mg(&self) -> usize {
        (self.m / self.group) as usize
    }
    pub(super) fn ksize(&self) -> usize {
        self.kernel.iter().product::<i64>() as usize
    }
    pub(super) fn osize(&self) -> usize {
        self.output.iter().product::<i64>() as usize
    }
    pub(super) fn isize(&self) -> usize {
        self.input.iter().product::<i64>() as usize
    }
    /// K of the per-group GEMM.
    pub(super) fn kdim(&self) -> usize {
        self.cg() * self.ksize()
    }

    pub fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pads.iter().all(|&p| p == 0)
            && self.input == self.output
    }

    /// A strided 1×1 convolution without padding reads every `stride`-th input element
    /// only: it is the pointwise convolution of the subsampled input, whose geometry this
    /// returns (input dims = output dims, strides 1), for `conv_f32` to run on a copy of
    /// those elements. None for other geometries (and depthwise ones, which keep their
    /// direct kernel).
    ///
    /// The copy is a plain strided read of a quarter of the input, and the product then
    /// reads its B in place; packed from the input by the im2col packer, the B blocks cost
    /// more than the copy (ResNet-50's 1×1/2 layers alone, Zen 4: 256→512 at 56² median
    /// 2.8 → 2.2 ms, 512→1024 at 28² 2.9 → 2.3, 1024→2048 at 14² 2.7 → 2.4 ms).
    pub(super) fn subsampled(&self) -> Option<ConvGeometry<'static>> {
        let nsp = self.input.len();
        let inside = (0..nsp).all(|d| (self.output[d] - 1) * self.strides[d] < self.input[d]);
        if self.strides.iter().all(|&s| s == 1)
            || self.kernel.iter().any(|&k| k != 1)
            || self.pads.iter().any(|&p| p != 0)
            || self.output.iter().any(|&o| o < 1)
            || !inside
            || self.is_depthwise()
            || !self.input_planes.is_empty()
        {
            return None;
        }
        let ones = Dims::new(&[1; MAX_SPATIAL][..nsp]);
        Some(ConvGeometry {
            n: self.n,
            c: self.c,
            m: self.m,
            group: self.group,
            input: self.output,
            kernel: self.kernel,
            output: self.output,
            strides: ones,
            dilations: ones,
            pads: Dims::new(&[0; MAX_SPATIAL][..nsp]),
            wide_simd: self.wide_simd,
            no_winograd: self.no_winograd,
            input_planes: std::borrow::Cow::Borrowed(&[]),
            path: self.path,
        })
    }

    /// The subsampled input `subsampled` runs on: floats of every image's channels.
    pub(super) fn subsampled_len(&self) -> usize {
        self.n as usize * self.c as usize * self.osize()
    }

    /// One input and one output channel per group: a direct kernel, weights unpacked.
    pub fn is_depthwise(&self) -> bool {
        self.cg() == 1 && self.mg() == 1
    }

    /// Padded-plane geometry of the depthwise path: (stride phases' rows, columns, slack).
    pub(super) fn depthwise_dims(&self) -> Option<(usize, usize, usize)> {
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
    pub(super) fn pad_end_2d(&self, d: usize) -> usize {
        ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1
            - self.input[d]
            - self.pads[d])
            .max(0) as usize
    }

    /// The 2-D depthwise convolution of one depth slice of one plane, through which a 3-D
    /// depthwise convolution runs (`depthwise_3d`); None for other geometries.
    pub(super) fn depthwise_slice(&self) -> Option<ConvGeometry<'static>> {
        if self.input.len() != 3 || !self.is_depthwise() {
            return None;
        }
        Some(ConvGeometry {
            n: 1,
            c: 1,
            m: 1,
            group: 1,
            input: Dims::new(&self.input[1..]),
            kernel: Dims::new(&self.kernel[1..]),
            output: Dims::new(&self.output[1..]),
            strides: Dims::new(&self.strides[1..]),
            dilations: Dims::new(&self.dilations[1..]),
            pads: Dims::new(&self.pads[1..]),
            wide_simd: self.wide_simd,
            no_winograd: self.no_winograd,
            input_planes: std::borrow::Cow::Borrowed(&[]),
            path: self.path,
        })
    }

    pub(super) fn depthwise_scratch(&self) -> usize {
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
                // A kernel of more taps than the stack table holds keeps its (offset,
                // weight) table here, 16 bytes a tap, 8-byte aligned.
                let taps = if self.ksize() > DW_INLINE_TAPS {
                    (padded + phases) % 2 + 4 * self.ksize()
                } else {
                    0
                };
                padded + phases + taps
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
    pub(super) fn depthwise_blocked_dims(&self) -> Option<(usize, usize)> {
        if self.input.len() != 2 || !self.is_depthwise() || self.m < DW_BLOCK as i64 / 2 {
            return None;
        }
        let span = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                as usize
        };
        Some((span(0), span(1)))
    }

    /// Whether the running CPU computes this layer through the channel-major im2col packer
    /// over output rows shorter than 16 positions (a 2-D k×k conv on a small map that no
    /// other plain path takes). The packer then sets up each output row and kernel tap for
    /// less than one 512-bit vector of positions, and that setup, not the product, bounds
    /// the layer (Zen 4, `cargo bench --bench gemm`: 16→32 3×3/2 at 16×16 30 GFLOP/s,
    /// 32→64 3×3/2 at 16×16 37, 64→64 3×3 at 8×8 48, against 101-112 for the blocked
    /// kernel, whose packing is per block of channels). `schedule::layout` runs such layers
    /// blocked on every CPU.
    pub fn im2col_short_rows(&self) -> bool {
        if self.input.len() != 2
            || self.subsampled().is_some()
            || self.is_depthwise()
            || self.is_pointwise()
            || self.use_winograd()
            || self.kdim() == 0
            || self.pixel_major()
            || self.run_indirect_dims().is_some()
        {
            return false;
        }
        self.output[1] < 16
    }

    /// Compute the product pixel-major (C^T = cols^T · W^T: output positions as the rows of the
    /// register tile, output channels as its columns) rather than channel-major. Pays when the
    /// output has few positions (7×7, 14×14 maps): a 12×32 tile then wastes fewer lanes along
    /// the positions (49 = 4·12 + 1 rather than 2·32 − 15), and the weights become the packed
    /// B operand, streamed once in long contiguous panels. The result goes through a
    /// transposing store with the epilogue, so it is limited to small outputs.
    pub fn pixel_major(&self) -> bool {
        if let Some(v) = self.subsampled() {
            return v.pixel_major();
        }
        if !self.pixel_major_applies() {
            return false;
        }
        match self.path {
            ConvPath::BySize => {}
            p => return p == ConvPath::PixelMajor,
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

    /// Whether the pixel-major product can compute this geometry (not whether it pays).
    fn pixel_major_applies(&self) -> bool {
        self.input.len() == 2
            && !self.is_depthwise()
            && !self.use_winograd()
            && self.kdim() > 0
            && self.pm_offsets_fit()
    }

    /// Implicit GEMM over shifted views of a zero-padded input (stride-1 2-D convs with a
    /// kernel wider than 1×1): output positions are computed in the padded input's row
    /// pitch, so row (c, ty, tx) of the im2col matrix is the padded plane of channel c read
    /// from offset ty·pitch + tx — no im2col packing at all. Returns (padded rows, pitch,
    /// columns computed) or None when the layer takes another path.
    pub(super) fn indirect_dims(&self) -> Option<(usize, usize, usize)> {
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
    pub(super) fn strided_indirect_dims(&self) -> Option<(usize, usize, usize)> {
        if self.strides == [1, 1] || self.pixel_major() {
            return None;
        }
        self.phase_dims()
    }

    /// (phase plane rows, pitch, columns computed) of the indirect path for this geometry's
    /// strides (a single phase at stride 1), or None when it does not apply.
    pub(super) fn phase_dims(&self) -> Option<(usize, usize, usize)> {
        if self.input.len() != 2
            || self.is_pointwise()
            || self.is_depthwise()
            || self.use_winograd()
            || self.kdim() == 0
            || self.strides.iter().any(|&s| s < 1)
            || !matches!(self.path, ConvPath::BySize | ConvPath::Indirect)
        {
            return None;
        }
        // Chosen at compile time: taken whatever the sizes (the rules below are speed's).
        let by_size = self.path == ConvPath::BySize;
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
        if by_size
            && 100 * (oh * qw).next_multiple_of(2 * NR) > 125 * (oh * ow).next_multiple_of(2 * NR)
        {
            return None;
        }
        // The result's pitch: whole tiles of either GEMM layout (which one runs is decided
        // on the CPU that runs the model; the workspace is sized where it is compiled).
        let cols = gemm::indirect_cols(oh * qw);
        // The result goes through a buffer in the padded pitch and is compacted afterwards:
        // beyond L2 that extra pass costs what skipping im2col saves (measured: neutral at
        // 64×56×56, a loss for larger outputs).
        if by_size && self.mg().next_multiple_of(MR) * cols > INDIRECT_MAX_RESULT {
            return None;
        }
        Some((qh, qw, cols))
    }

    /// Whether `conv_f32` takes the indirect path on this CPU.
    pub fn uses_indirect(&self) -> bool {
        self.run_indirect_dims().is_some()
    }

    /// The indirect path's dims when `conv_f32` takes it on this CPU.
    pub(super) fn run_indirect_dims(&self) -> Option<(usize, usize, usize)> {
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
    pub(super) fn indirect_scratch(&self) -> usize {
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
    pub(super) fn packed_weights_per_group(&self) -> usize {
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
    pub(super) unsafe fn pack_gemm_weights(&self, w: *const f32, dst: *mut f32) {
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

    /// The scratch `onnxc_conv_f32` needs (`ScratchNeed`, bytes): shared, the weights when
    /// they are packed at run time, then what the path shares; per worker, what each of the
    /// path's workers packs.
    pub fn scratch(&self, weights_packed: bool) -> ScratchNeed {
        if let Some(v) = self.subsampled() {
            // The subsampled input, then the pointwise convolution's scratch after it.
            let inner = v.scratch(weights_packed);
            return ScratchNeed {
                shared: crate::par::slot_bytes(self.subsampled_len() * 4) + inner.shared,
                per_worker: inner.per_worker,
            };
        }
        let w = if weights_packed {
            0
        } else if self.use_winograd() {
            // The packed weights, and the transformed kernels on the way.
            self.packed_weights_len() + self.winograd_pack_temp()
        } else {
            self.packed_weights_len()
        };
        let (shared, per_worker) = if self.use_winograd() {
            (self.winograd_scratch(), 0)
        } else if self.is_depthwise() {
            (0, self.depthwise_scratch())
        } else if self.pixel_major() {
            (self.pm_scratch(), self.pm_worker_scratch())
        } else {
            // The run-time CPU decides between the indirect and the packing path.
            (
                self.indirect_scratch(),
                gemm::scratch_len(self.osize(), false),
            )
        };
        ScratchNeed {
            shared: (w + shared) * 4,
            per_worker: per_worker * 4,
        }
    }

    /// Floats of scratch a call with one worker needs (`scratch(..).single()`).
    pub fn scratch_floats(&self, weights_packed: bool) -> usize {
        self.scratch(weights_packed).single() / 4
    }
}

/// Whether the stride-phase indirect path (`strided_indirect_dims`) beats im2col packing on
/// this CPU. With AVX2 alone (Zen 3) it does for every strided layer measured (ResNet-50's
/// and Inception v2's stride-2 3×3 convs: see docs/performance.md). With AVX-512 it depends on
/// the core: on Intel (Emerald Rapids) the AVX-512 im2col packer beat it by 25-40%; on AMD
/// Zen 5 it wins for kernels wider than 1×1 (ResNet-50's stride-2 3×3 convs 1.59 → 1.35
/// and 1.58 → 1.38 ms in the model) and loses for 1×1 ones (512→1024 at 28→14: 1.24 →
/// 1.32 ms), whose im2col is a plain subsampling copy.
pub(super) fn strided_indirect_pays(g: &ConvGeometry) -> bool {
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
