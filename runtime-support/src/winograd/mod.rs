//! Winograd F(2×2, 3×3) for 3×3, stride-1, undilated 2-D convolutions: each 2×2 output tile
//! comes from a 4×4 input tile through 16 elementwise products in the transformed domain,
//! i.e. 16 GEMMs `U_ξ[M×C] · V_ξ[C×tiles]` — 2.25× fewer multiplies than direct convolution.
//! Weights are transformed (`U = G g Gᵀ`) and packed once; input tiles are transformed
//! (`V = Bᵀ d B`) straight into packed B panels, block by block; the output transform
//! (`Y = Aᵀ M A`) applies the epilogue. Large maps (20×20 and up) run F(4×4, 3×3)
//! instead (`f4.rs`: 36 products per 4×4 tile, 4× fewer multiplies) through the same blocks
//! and GEMMs (`Variant`).

use crate::conv::{Call, ConvGeometry};
use crate::gemm::{self, BSource, Epilogue, NR, pack};
use crate::par::Par;
use crate::simd::{Dispatch, Runner, Simd, Walk};

mod f4;

/// The Winograd algorithm a geometry runs (`ConvGeometry::winograd_variant`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Variant {
    /// F(2×2, 3×3): 16 products per 2×2 output tile.
    F2,
    /// F(4×4, 3×3) (`f4.rs`): 36 products per 4×4 output tile.
    F4,
}

impl Variant {
    /// Output tile side.
    fn m(self) -> usize {
        match self {
            Variant::F2 => 2,
            Variant::F4 => 4,
        }
    }
    /// Transformed points (elementwise products) per tile.
    fn points(self) -> usize {
        match self {
            Variant::F2 => 16,
            Variant::F4 => 36,
        }
    }
}

/// The transformed inputs and products one pass keeps in the core's cache
/// (`ConvGeometry::winograd_chunk`): half of Zen 3's 512 KB L2.
const CHUNK_BYTES: usize = 256 << 10;

/// The most transformed weights (bytes) a pass may stream again for each chunk: beyond
/// them (VGG-19's 512-channel layers hold 37 MB) a block's tiles run in one pass. Streamed
/// from L3 again, a few MB of weights per pass cost less than the block's transformed
/// inputs and products written to L3 and read back: a 64→192 layer at 56×56 (1.8 MB of
/// weights) ran 1.35× faster in passes (Zen 3), Inception v1 15% faster with 8 MB than 1.
const CHUNK_WEIGHTS: usize = 8 << 20;

/// F(4×4, 3×3) runs where its products, padded tiles included, are at most this share of
/// F(2×2, 3×3)'s (`ConvGeometry::winograd_variant`).
const F4_MAX_WORK: f64 = 0.85;

/// Transformed weights of one 3×3 kernel: `U = G g Gᵀ`.
fn transform_kernel(g: &[f32; 9]) -> [f32; 16] {
    // G = [[1,0,0],[½,½,½],[½,-½,½],[0,0,1]] applied to a column of three.
    let gv = |[a, b, d]: [f32; 3]| [a, 0.5 * (a + b + d), 0.5 * (a - b + d), d];
    // Column c of G g.
    let t = [0, 1, 2].map(|c| gv([g[c], g[3 + c], g[6 + c]]));
    let mut u = [0f32; 16]; // (G g) Gᵀ, row r from row r of G g
    for (r, ur) in u.chunks_exact_mut(4).enumerate() {
        ur.copy_from_slice(&gv([t[0][r], t[1][r], t[2][r]]));
    }
    u
}

/// Bᵀ applied to one column of four values: Bᵀ = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]].
#[inline(always)]
fn bt<S: Simd>(s: S, d: [S::F; 4]) -> [S::F; 4] {
    [
        s.sub(d[0], d[2]),
        s.add(d[1], d[2]),
        s.sub(d[2], d[1]),
        s.sub(d[1], d[3]),
    ]
}

/// Aᵀ applied to one column of four products: Aᵀ = [[1,1,1,0],[0,1,-1,-1]].
#[inline(always)]
fn at<S: Simd>(s: S, m: [S::F; 4]) -> [S::F; 2] {
    [
        s.add(s.add(m[0], m[1]), m[2]),
        s.sub(s.sub(m[1], m[2]), m[3]),
    ]
}

/// `X d Xᵀ` for a column transform `x` (`d` N×N, the result K×K), columns first: `col(j)`
/// is column `j` of `d`, and each row of the result goes to `row` as soon as it is computed
/// (a vector walk stores its results as it goes, with fewer live registers). Both Winograd
/// variants' input (`Bᵀ d B`) and output (`Aᵀ M A`) transforms, in the order of operations
/// they always had.
#[inline(always)]
fn sandwich<T: Copy, const N: usize, const K: usize>(
    mut col: impl FnMut(usize) -> [T; N],
    x: impl Fn([T; N]) -> [T; K],
    mut row: impl FnMut(usize, [T; K]),
) {
    // Loops, not `array::from_fn`: its closures stay calls in the vector walks.
    let t0 = x(col(0));
    let mut t = [t0; N];
    for (j, tj) in t.iter_mut().enumerate().skip(1) {
        *tj = x(col(j));
    }
    for i in 0..K {
        let mut v = [t0[0]; N];
        for (vj, tj) in v.iter_mut().zip(&t) {
            *vj = tj[i];
        }
        row(i, x(v));
    }
}

impl ConvGeometry<'_> {
    /// 3×3, stride 1, no dilation, 2-D, and enough channels for the transforms to pay off
    /// (and not `no_winograd`).
    pub fn use_winograd(&self) -> bool {
        use crate::conv::ConvPath;
        match self.path {
            ConvPath::BySize => {}
            ConvPath::WinogradF2 | ConvPath::WinogradF4 => return self.winograd_applies(),
            _ => return false,
        }
        if !self.winograd_applies() || self.output[0] < 2 {
            return false;
        }
        let (cg, mg) = (self.c / self.group, self.m / self.group);
        match self.winograd_variant() {
            // Zen 5 against the implicit GEMM: SqueezeNet's 16→64 expands at 55×55 200 → 318
            // GFLOP/s effective, DenseNet's 128→32 growth convs 217 → 286 (56×56) and
            // 203 → 260 (28×28), ResNet-50's 64→64 at 56×56 208 → 408.
            Variant::F4 => cg >= 16 && mg >= 32,
            Variant::F2 => {
                // With fewer input channels the 16 transformed products are too shallow
                // (K < 32) for the GEMM to amortize the transforms (measured: SqueezeNet's
                // 16→64 expands ran 1.5× slower through F(2,3) than the implicit GEMM).
                cg >= 32
                // The transforms cost per input and per output channel while the products
                // shrink with fewer output channels. With 32 (DenseNet's growth convs), on
                // Zen 3 (AVX2) F(2,3) wins over the implicit GEMM (128→32: 76 → 96 GFLOP/s
                // at 56×56 and 28×28, 68 → 84 at 14×14); with AVX-512 the implicit GEMM's
                // 8×48 tiles win (Zen 5: 159 vs 101 at 14×14). The weights' layout follows
                // the target the model is compiled for (`wide_simd`).
                && mg >= if self.wide_simd { 64 } else { 32 }
                // Tile rows are padded to 8 tiles: 13-14 wide outputs keep 7 of 8 lanes
                // busy (Zen 3: 256→256 at 14×14 80 → 144 GFLOP/s effective, 64→256 at 13×13
                // 75 → 98, 32→128 at 27×27 83 → 95 over the implicit GEMM), 7×7 only half
                // (break-even).
                && self.output[1] >= 13
            }
        }
    }

    /// Whether the Winograd kernels can compute this geometry (not whether they pay): 3×3,
    /// stride 1, no dilation, 2-D, not depthwise (and not `no_winograd`).
    pub(crate) fn winograd_applies(&self) -> bool {
        !self.no_winograd
            && self.input.len() == 2
            && self.kernel == [3, 3]
            && self.strides == [1, 1]
            && self.dilations == [1, 1]
            && !self.is_depthwise()
    }

    /// Tile rows and columns; columns are padded to a multiple of 8 so that each half of a
    /// panel (8 tiles, the AVX2 transforms' width) lies in one tile row. A panel spans two
    /// tile rows when a row holds 8 (mod 16) tiles — 14×14 outputs keep 7 of 8 lanes busy
    /// instead of 7 of 16. Padding tiles compute zeros that are never stored.
    fn tiles(&self) -> (usize, usize) {
        self.tiles_of(self.winograd_variant())
    }

    /// `tiles` for `variant`.
    fn tiles_of(&self, variant: Variant) -> (usize, usize) {
        let m = variant.m();
        (
            (self.output[0] as usize).div_ceil(m),
            (self.output[1] as usize).div_ceil(m).next_multiple_of(8),
        )
    }

    /// F(4×4, 3×3) where its padded tiles multiply at most `F4_MAX_WORK` of F(2×2, 3×3)'s
    /// points: every map whose sides are 20 or more, and short wide maps such as a text
    /// line's 4 × 250 or 8 × 250, which the earlier rule (both sides at least 20) left to
    /// F(2,3) or the blocked kernels (Zen 3, AVX2, a CRNN at width 1000: 64→128 at 8 × 250
    /// blocked 4.12 → 2.59 ms, 128→128 at 4 × 250 F(2,3) 3.60 → 2.34 ms); F(2,3) on small
    /// square maps, where F(4,3)'s rows of 4 or fewer tiles are padded to 8. F(4,3) does 4×
    /// fewer multiplies than direct convolution (F(2,3): 2.25×) but has 2.25× the transformed
    /// weights and costlier transforms, and its tiles pad small maps more. Zen 5, effective
    /// GFLOP/s F(2,3) → F(4,3) with AVX-512: 32→128 at 27×27 271 → 380, 128→128 at 28×28
    /// 259 → 480, 64→192 at 56×56 275 → 536; at 14×14 level (256→256: 289 vs 292), at
    /// 13×13 mixed (48→192 254 → 179, 64→256 197 → 225). With the AVX2 kernels (same core,
    /// `ONNXC_RUNTIME_ISA=avx2`): 64→64 at 56×56 108 → 224, 128→128 at 28×28 145 → 246,
    /// 128→32 at 56×56 76 → 168.
    pub fn winograd_variant(&self) -> Variant {
        use crate::conv::ConvPath;
        match self.path {
            ConvPath::WinogradF2 => return Variant::F2,
            ConvPath::WinogradF4 => return Variant::F4,
            _ => {}
        }
        if self.output.len() == 2
            && (self.tile_points(Variant::F4) as f64)
                <= F4_MAX_WORK * self.tile_points(Variant::F2) as f64
        {
            Variant::F4
        } else {
            Variant::F2
        }
    }

    /// The transformed points `variant` multiplies per channel pair, its padded tiles
    /// included (`tiles`).
    fn tile_points(&self, variant: Variant) -> usize {
        let (th, tw) = self.tiles_of(variant);
        th * tw * variant.points()
    }

    /// Tiles computed: all tile rows, rounded up to whole panels (the tiles past the last
    /// row read zeros and store nothing).
    fn tile_count(&self) -> usize {
        let (th, tw) = self.tiles();
        (th * tw).next_multiple_of(NR)
    }

    /// Tiles transformed per block: the packed input matrices stay within ~2 MB for F(2,3),
    /// ~6 MB for F(4,3). Every block streams all the transformed weights once, and F(4,3)'s
    /// are 2.25× larger: with 2 MB, VGG-19's 512-channel layers at 28×28 ran in blocks of
    /// 16 tiles, re-reading 38 MB of weights per block from DRAM (VGG-19 152 → 116 ms with
    /// 6 MB; 12 MB no better).
    fn winograd_block(&self) -> usize {
        let cg = (self.c / self.group) as usize;
        let variant = self.winograd_variant();
        let budget = match variant {
            Variant::F2 => 2 << 20,
            Variant::F4 => 6 << 20,
        };
        let want = (budget / (4 * variant.points() * cg)).max(NR) / NR * NR;
        want.min(self.tile_count())
    }

    /// Panels (of `NR` tiles) that one pass of the three phases takes at a time inside a
    /// block, on one core: as many as keep their transformed inputs and products within
    /// `CHUNK_BYTES` (in the core's L2), when the transformed weights, which each pass
    /// streams again, are at most `CHUNK_WEIGHTS` (cached); else the whole block. Zen 3
    /// (AVX2, 512 KB L2), against whole blocks of up to ~6 MB (which sit in L3): the text
    /// detector's 32→32 and 32→64 layers at 80×80 and 160×160 go from ~45-60 to ~75-85
    /// GFLOP/s effective; model figures in docs/performance.md ("Winograd"). The
    /// tiles a pass computes, and every value, are the same whatever the pass size.
    fn winograd_chunk(&self) -> usize {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        let pts = self.winograd_variant().points();
        if 4 * pts * cg * mg > CHUNK_WEIGHTS {
            return usize::MAX;
        }
        (CHUNK_BYTES / (4 * pts * (cg + mg) * NR)).max(1)
    }

    pub(crate) fn winograd_weights_len(&self) -> usize {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        self.group as usize * self.winograd_variant().points() * pack::packed_a_len(mg, cg)
    }

    /// `[group][ξ][packed A of U_ξ (M/g × C/g)]` from weights `[M, C/g, 3, 3]`.
    pub(crate) fn winograd_pack(&self, w: &[f32]) -> Vec<f32> {
        let cg = (self.c / self.group) as usize;
        assert_eq!(
            w.len(),
            self.m as usize * cg * 9,
            "3×3 weights of the wrong size"
        );
        let mut out = vec![0f32; self.winograd_weights_len()];
        let mut u = vec![0f32; self.winograd_pack_temp()];
        // SAFETY: w holds the weights (checked); out and u are sized as the packer needs.
        unsafe { self.winograd_pack_into(w.as_ptr(), out.as_mut_ptr(), u.as_mut_ptr()) };
        out
    }

    /// Floats of the transformed kernels of one group, before packing (`winograd_pack_into`'s
    /// `u`).
    pub(crate) fn winograd_pack_temp(&self) -> usize {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        self.winograd_variant().points() * mg * cg
    }

    /// `winograd_pack` into `dst` (`winograd_weights_len()` floats), with `u`
    /// (`winograd_pack_temp()` floats) for the transformed kernels: allocates nothing.
    ///
    /// # Safety
    /// `w` holds the `[M, C/g, 3, 3]` weights; `dst` and `u` the floats above, disjoint.
    pub(crate) unsafe fn winograd_pack_into(&self, w: *const f32, dst: *mut f32, u: *mut f32) {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        let per = pack::packed_a_len(mg, cg);
        let variant = self.winograd_variant();
        let pts = variant.points();
        for grp in 0..self.group as usize {
            for m in 0..mg {
                for c in 0..cg {
                    let base = ((grp * mg + m) * cg + c) * 9;
                    // SAFETY: kernel (grp·mg + m, c) of the weights.
                    let k: [f32; 9] = unsafe { w.add(base).cast::<[f32; 9]>().read_unaligned() };
                    let put = |xi: usize, v: f32| {
                        // SAFETY: xi < pts, m < mg, c < cg: inside u.
                        unsafe { *u.add((xi * mg + m) * cg + c) = v };
                    };
                    match variant {
                        Variant::F2 => transform_kernel(&k)
                            .iter()
                            .enumerate()
                            .for_each(|(xi, &v)| put(xi, v)),
                        Variant::F4 => f4::transform_kernel(&k)
                            .iter()
                            .enumerate()
                            .for_each(|(xi, &v)| put(xi, v)),
                    }
                }
            }
            for xi in 0..pts {
                // SAFETY: u holds pts mg×cg matrices; dst their packed forms, per group.
                unsafe {
                    pack::pack_a(
                        u.add(xi * mg * cg),
                        cg,
                        false,
                        mg,
                        cg,
                        dst.add((grp * pts + xi) * per),
                    )
                };
            }
        }
    }

    pub(crate) fn winograd_scratch(&self) -> usize {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        let tb = self.winograd_block();
        let pts = self.winograd_variant().points();
        pts * pack::packed_b_len(cg, tb) + pts * mg * tb
    }
}

/// One panel of the input transform: tiles `t0..t0+NR` (row-major over `tw` tile columns;
/// `t0` and `tw` multiples of 8, so each 8 lie in one tile row) of one ih × iw channel plane
/// (padded by `ph`, `pw`) into the B matrices: `vbuf + ξ·bsz + off` gets the panel's NR
/// values of transformed point ξ.
///
/// # Safety
/// The panel's contract, which every `unsafe fn` of the panel relies on: `plane` is readable
/// for `ih·iw` floats; `vbuf + ξ·bsz + off .. + NR` is writable for every point ξ of the
/// variant (`N·N` of them); `t0 + NR` tiles fit the B matrices' `bsz` columns (`off + NR ≤
/// bsz`). Tiles past the plane read zeros; no other memory is touched.
#[derive(Clone, Copy)]
struct InputPanel {
    plane: *const f32,
    ih: i64,
    iw: i64,
    ph: i64,
    pw: i64,
    t0: usize,
    tw: usize,
    vbuf: *mut f32,
    bsz: usize,
    off: usize,
}

/// The input transform of a panel. F(2×2, 3×3): per lane group, each input row's columns
/// `2j..2j+4` of its tiles are the even and odd lanes of the row from the first tile's
/// column and of the row two columns on. F(4×4, 3×3): columns `4j..4j+4` are the `split4` of
/// the row from the first tile's column, columns `4j+4, 4j+5` the first two of the split four
/// columns on, in the lane order of the instruction set's `split4` (`Output` undoes it).
#[derive(Clone, Copy)]
struct Input(InputPanel, Variant);

/// One panel of the output transform: the NR products of each point ξ at `mrow + ξ·stride`
/// (tiles `t0..t0+NR`, as in `InputPanel`) become the tiles' outputs in the oh × ow plane
/// `out`, with the epilogue `clamp(y + bias + resid, lo, hi)` (`resid` may be null).
///
/// # Safety
/// The panel's contract, which every `unsafe fn` of the panel relies on: `mrow + ξ·stride ..
/// + NR` is readable for every point ξ (`N·N` of them); `out` is writable, and a non-null
/// `resid` readable, for `oh·ow` floats. Only outputs of tiles inside the plane are written.
#[derive(Clone, Copy)]
struct OutputPanel {
    mrow: *const f32,
    stride: usize,
    t0: usize,
    tw: usize,
    oh: usize,
    ow: usize,
    out: *mut f32,
    resid: *const f32,
    bias: f32,
    lo: f32,
    hi: f32,
}

/// The output transform of a panel: each output row's two (F(2×2, 3×3): interleaved) or four
/// (F(4×4, 3×3): `join4`) columns of the group's tiles into consecutive columns.
#[derive(Clone, Copy)]
struct Output(OutputPanel, Variant);

/// Where the tiles of a lane group lie: tile row `ty` from tile column `tx` on, or with
/// `split` only in the first half of the lanes, the second half holding tile row `ty + 1`
/// from column 0. Groups start at multiples of 8 tiles and tile rows hold multiples of 8, so
/// only groups of 16 split, where a row holds 8 (mod 16) tiles.
#[derive(Clone, Copy)]
struct Group {
    ty: usize,
    tx: usize,
    split: bool,
}

impl Group {
    /// The group of `l` tiles from tile `t` over `tw` tile columns.
    #[inline(always)]
    fn at(t: usize, tw: usize, l: usize) -> Group {
        let (ty, tx) = (t / tw, t % tw);
        Group {
            ty,
            tx,
            split: l > 8 && tx + l > tw,
        }
    }
}

impl InputPanel {
    /// The transform of the panel, whose tiles (output side `m`, at stride `m`) are `N`×`N`,
    /// a lane group at a time: the group's input rows (`rows`) are transformed by `bt`,
    /// columns first (as `Bᵀ d B` is read), and the results go to the B matrices.
    ///
    /// # Safety
    /// The panel's contract.
    #[inline(always)]
    unsafe fn transform<S: Simd, const N: usize, const K: usize>(
        &self,
        s: S,
        m: usize,
        offs: [usize; K],
        cols: impl Fn([S::F; K]) -> [S::F; N] + Copy,
        bt: impl Fn([S::F; N]) -> [S::F; N] + Copy,
    ) {
        // Closures by value: calls through references stay calls, outside the features.
        for g in (0..NR).step_by(S::LANES) {
            // SAFETY: the panel's contract.
            unsafe { self.group(s, g, m, offs, cols, bt) };
        }
    }

    /// `transform` of the lane group at panel lane `g`.
    ///
    /// # Safety
    /// The panel's contract.
    #[inline(always)]
    unsafe fn group<S: Simd, const N: usize, const K: usize>(
        &self,
        s: S,
        g: usize,
        m: usize,
        offs: [usize; K],
        cols: impl Fn([S::F; K]) -> [S::F; N] + Copy,
        bt: impl Fn([S::F; N]) -> [S::F; N],
    ) {
        let l = S::LANES;
        let grp = Group::at(self.t0 + g, self.tw, l);
        // SAFETY: the panel's contract.
        let mut d = unsafe { self.rows(s, grp.ty, grp.tx as i64, m, offs, cols) };
        if grp.split {
            // The next tile row's tiles, in the second half of the lanes: as if that row
            // started LANES/2 tiles to the left.
            // SAFETY: as above.
            let d1 = unsafe { self.rows(s, grp.ty + 1, -((l / 2) as i64), m, offs, cols) };
            let hi = s.lanes(l / 2, l);
            for (dr, d1r) in d.iter_mut().zip(d1) {
                for (v, v1) in dr.iter_mut().zip(d1r) {
                    *v = s.select(hi, v1, *v);
                }
            }
        }
        sandwich(
            #[inline(always)]
            |c| {
                let mut col = [s.zero(); N];
                for (v, dr) in col.iter_mut().zip(&d) {
                    *v = dr[c];
                }
                col
            },
            bt,
            #[inline(always)]
            |i, v| {
                for (c, vc) in v.iter().enumerate() {
                    // SAFETY: lanes g..g+LANES of the panel's destination ξ = N·i + c.
                    unsafe { s.store(self.vbuf.add((i * N + c) * self.bsz + self.off + g), *vc) };
                }
            },
        );
    }

    /// The `N` input rows of the tiles whose first lies in lane 0 at tile column `tx` (less
    /// than 0: the lanes before column 0 hold no tiles of this row) of tile row `ty`, each
    /// as the tiles' `N` columns: `cols` of the `K` vectors at column offsets `offs` from the
    /// first tile's first column. Rows and columns outside the plane read as 0.
    ///
    /// # Safety
    /// The panel's contract.
    #[inline(always)]
    unsafe fn rows<S: Simd, const N: usize, const K: usize>(
        &self,
        s: S,
        ty: usize,
        tx: i64,
        m: usize,
        offs: [usize; K],
        cols: impl Fn([S::F; K]) -> [S::F; N],
    ) -> [[S::F; N]; N] {
        let y0 = (m * ty) as i64 - self.ph;
        let x = m as i64 * tx - self.pw;
        // Each load's lanes inside [0, iw) (`lanes` clamps to LANES).
        let mut masks = [s.lanes(0, 0); K];
        for (mk, o) in masks.iter_mut().zip(offs) {
            let xo = x + o as i64;
            *mk = s.lanes((-xo).max(0) as usize, (self.iw - xo).max(0) as usize);
        }
        let mut d = [[s.zero(); N]; N];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            if yy < 0 || yy >= self.ih {
                continue;
            }
            // The row may start left of the plane's row or end past it: wrapping
            // arithmetic, and only in-row lanes are loaded.
            let row = self.plane.wrapping_offset((yy * self.iw + x) as isize);
            let mut v = [s.zero(); K];
            for ((vi, o), mk) in v.iter_mut().zip(offs).zip(masks) {
                // SAFETY: the lanes in mk lie inside row yy; the others are not accessed.
                *vi = unsafe { s.load_or_zero(row.wrapping_add(o), mk) };
            }
            *dr = cols(v);
        }
        d
    }
}

impl OutputPanel {
    /// The transform of the panel (tiles of output side `M`, from `N`×`N` products), a lane
    /// group at a time: `at` transforms the products, columns first, and `join` turns each
    /// output row of the group's tiles into `M·LANES` consecutive columns, stored with the
    /// epilogue. Groups of padding tiles only (no output inside the plane) are skipped.
    ///
    /// # Safety
    /// The panel's contract.
    #[inline(always)]
    unsafe fn transform<S: Simd, const N: usize, const M: usize>(
        &self,
        s: S,
        at: impl Fn([S::F; N]) -> [S::F; M] + Copy,
        join: impl Fn([S::F; M]) -> [S::F; M] + Copy,
    ) {
        // Closures by value: calls through references stay calls, outside the features.
        for g in (0..NR).step_by(S::LANES) {
            // SAFETY: the panel's contract.
            unsafe { self.group(s, g, at, join) };
        }
    }

    /// `transform` of the lane group at panel lane `g`.
    ///
    /// # Safety
    /// The panel's contract.
    #[inline(always)]
    unsafe fn group<S: Simd, const N: usize, const M: usize>(
        &self,
        s: S,
        g: usize,
        at: impl Fn([S::F; N]) -> [S::F; M],
        join: impl Fn([S::F; M]) -> [S::F; M],
    ) {
        let l = S::LANES;
        let grp = Group::at(self.t0 + g, self.tw, l);
        let inside = |ty: usize, tx: usize| M * ty < self.oh && M * tx < self.ow;
        if !(inside(grp.ty, grp.tx) || grp.split && inside(grp.ty + 1, 0)) {
            return;
        }
        let (bv, lov, hiv) = (s.splat(self.bias), s.splat(self.lo), s.splat(self.hi));
        // clamp(v + bias + resid) to elements o..o+n of the plane (n ≤ LANES).
        let put = {
            #[inline(always)]
            |o: usize, n: usize, v: S::F| {
                let mut v = s.add(v, bv);
                // SAFETY: elements o..o+n of the output plane (and of the residual's).
                unsafe {
                    if !self.resid.is_null() {
                        let rp = self.resid.add(o);
                        let rv = if n == l {
                            s.load(rp)
                        } else {
                            s.load_or_zero(rp, s.lanes(0, n))
                        };
                        v = s.add(v, rv);
                    }
                    // max/min with the value second: NaN passes through the clamp.
                    v = s.min(hiv, s.max(lov, v));
                    if n == l {
                        s.store(self.out.add(o), v);
                    } else {
                        s.store_range(self.out.add(o), 0, n, v);
                    }
                }
            }
        };
        // Tiles of one row whose columns all lie inside the plane: whole vectors.
        let whole = !grp.split && M * (grp.tx + l) <= self.ow;
        sandwich(
            #[inline(always)]
            |c| {
                let mut p = [s.zero(); N];
                for (r, pr) in p.iter_mut().enumerate() {
                    // SAFETY: LANES products of ξ = N·r + c from lane g.
                    *pr = unsafe { s.load(self.mrow.add((r * N + c) * self.stride + g)) };
                }
                p
            },
            at,
            #[inline(always)]
            |r, y| {
                let y = join(y);
                if whole {
                    let oy = M * grp.ty + r;
                    if oy < self.oh {
                        for (i, v) in y.iter().enumerate() {
                            put(oy * self.ow + M * grp.tx + i * l, l, *v);
                        }
                    }
                    return;
                }
                for (i, v) in y.iter().enumerate() {
                    // With `split`, the second half of the columns (lanes LANES/2 on) is the
                    // next tile row's from column 0.
                    let (ty, x) = if grp.split && i >= M / 2 {
                        (grp.ty + 1, (i - M / 2) * l)
                    } else {
                        (grp.ty, M * grp.tx + i * l)
                    };
                    let oy = M * ty + r;
                    if oy < self.oh && x < self.ow {
                        put(oy * self.ow + x, (self.ow - x).min(l), *v);
                    }
                }
            },
        );
    }
}

impl Walk for Input {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let l = S::LANES;
        match self.1 {
            // SAFETY: the panel (built by `conv_with` from the geometry) holds NR tiles of one
            // padded input plane and NR slots of each B matrix; the Simd token exists only for a
            // detected ISA.
            Variant::F2 => unsafe {
                self.0.transform(
                    s,
                    2,
                    [0, l, 2, l + 2],
                    #[inline(always)]
                    |[a, b, a2, b2]| {
                        let (c0, c1) = s.deinterleave(a, b);
                        let (c2, c3) = s.deinterleave(a2, b2);
                        [c0, c1, c2, c3]
                    },
                    #[inline(always)]
                    |d| bt(s, d),
                )
            },
            // SAFETY: the panel (built by `conv_with` from the geometry) holds NR tiles of one
            // padded input plane and NR slots of each B matrix; the Simd token exists only for a
            // detected ISA.
            Variant::F4 => unsafe {
                self.0.transform(
                    s,
                    4,
                    [0, l, 2 * l, 3 * l, 4, 4 + l, 4 + 2 * l, 4 + 3 * l],
                    #[inline(always)]
                    |v| {
                        let a = s.split4([v[0], v[1], v[2], v[3]]);
                        let b = s.split4([v[4], v[5], v[6], v[7]]);
                        [a[0], a[1], a[2], a[3], b[0], b[1]]
                    },
                    #[inline(always)]
                    |d| f4::bt(s, d),
                )
            },
        }
    }
}

impl Walk for Output {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        match self.1 {
            // SAFETY: the panel (built by `conv_with`) reads NR products per point and writes tiles
            // inside the oh × ow plane `out` (and a non-null resid like it); the Simd token exists
            // only for a detected ISA.
            Variant::F2 => unsafe {
                self.0.transform(
                    s,
                    #[inline(always)]
                    |m| at(s, m),
                    #[inline(always)]
                    |[y0, y1]| {
                        let (a, b) = s.interleave(y0, y1);
                        [a, b]
                    },
                )
            },
            // SAFETY: the panel (built by `conv_with`) reads NR products per point and writes tiles
            // inside the oh × ow plane `out` (and a non-null resid like it); the Simd token exists
            // only for a detected ISA.
            Variant::F4 => unsafe {
                self.0.transform(
                    s,
                    #[inline(always)]
                    |m| f4::at(s, m),
                    #[inline(always)]
                    |y| s.join4(y),
                )
            },
        }
    }
}

/// Tiles `t0 .. t0 + nt` (`nt` a multiple of NR) of a block and where their data lies in
/// scratch: transformed inputs as `points` packed B matrices `bsz` floats apart, products as
/// `points` matrices of `mg` rows of `ld` floats, `mg·ld` apart.
#[derive(Clone, Copy)]
struct Span {
    t0: usize,
    nt: usize,
    vbuf: *mut f32,
    bsz: usize,
    mbuf: *mut f32,
    ld: usize,
}

impl Span {
    /// Panels `ps` of this block as a span of their own, packed into the part of the block's
    /// scratch their tiles take (the parts of disjoint panel ranges are disjoint: a packed B
    /// matrix of n columns takes n·cg floats, a product matrix n·mg).
    fn part(self, ps: std::ops::Range<usize>, cg: usize, mg: usize, pts: usize) -> Span {
        let (start, nt) = (ps.start * NR, ps.len() * NR);
        Span {
            t0: self.t0 + start,
            nt,
            vbuf: self.vbuf.wrapping_add(pts * pack::packed_b_len(cg, start)),
            bsz: pack::packed_b_len(cg, nt),
            mbuf: self.mbuf.wrapping_add(pts * mg * start),
            ld: nt,
        }
    }
}

/// # Safety
/// As `conv::conv_f32` for a geometry with `use_winograd()`; `c.w` from `winograd_pack`;
/// `c.scratch` holds `winograd_scratch()` floats (shared by `par`'s workers).
pub(crate) unsafe fn conv_winograd(par: Par, g: &ConvGeometry, c: Call) {
    // SAFETY: forwarded.
    unsafe { conv_with(par, &Dispatch, g, c) }
}

/// `conv_winograd` with the transforms run by `r`. Each block of tiles runs in three
/// phases: the input transform, the products (one GEMM per transformed point ξ), the output
/// transform, on one core a cache-sized pass of panels at a time (`winograd_chunk`). With
/// several workers, either each takes whole panels of tiles through all three, in such
/// passes (when the transformed weights, which each then reads, are the smaller traffic), or
/// each phase is split (by input channels, by ξ, by output channels) and joined before the
/// next. Every value is computed by the same operations whatever the split (a GEMM's column
/// does not depend on the others), so the result does not depend on the thread count.
///
/// # Safety
/// As `conv_winograd`.
unsafe fn conv_with(par: Par, r: &impl Runner, g: &ConvGeometry, c: Call) {
    let (x, w, bias, residual) = (c.x, c.w, c.bias, c.residual);
    let (lo, hi, y, scratch) = (c.lo, c.hi, c.y, c.scratch);
    let (cg, mg) = ((g.c / g.group) as usize, (g.m / g.group) as usize);
    let (ih, iw) = (g.input[0], g.input[1]);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (ph, pw) = (g.pads[0], g.pads[1]);
    let tw = g.tiles().1;
    let tiles = g.tile_count();
    let tb = g.winograd_block();
    let chunk = g.winograd_chunk();
    let bsz = pack::packed_b_len(cg, tb);
    let per = pack::packed_a_len(mg, cg);
    let variant = g.winograd_variant();
    let pts = variant.points();
    let isz = (ih * iw) as usize;
    let osz = oh * ow;
    // SAFETY: scratch layout: `pts` packed B blocks, then `pts` product blocks (mg × tb
    // each).
    let (vbuf, mbuf) = unsafe { (scratch, scratch.add(pts * bsz)) };
    for b in 0..g.n as usize {
        for grp in 0..g.group as usize {
            // SAFETY: offsets inside the tensors described by the geometry.
            let (xg, yg) = unsafe {
                (
                    x.add((b * g.c as usize + grp * cg) * isz),
                    y.add((b * g.m as usize + grp * mg) * osz),
                )
            };
            // SAFETY: a non-null residual is laid out like y; as above.
            let rg = unsafe { crate::opt_add(residual, (b * g.m as usize + grp * mg) * osz) };
            let mut t0 = 0;
            while t0 < tiles {
                let nt = tb.min(tiles - t0);
                // 1. Input transform, a panel (16 tiles of one tile row) at a time: channels
                //    `cs` of every B matrix of the span.
                let input = |cs: std::ops::Range<usize>, sp: Span| {
                    for c in cs {
                        // SAFETY: channel plane c of the group.
                        let plane = unsafe { xg.add(c * isz) };
                        for p in 0..sp.nt / NR {
                            // SAFETY: panel p of every B matrix of the span.
                            unsafe {
                                let panel = InputPanel {
                                    plane,
                                    ih,
                                    iw,
                                    ph,
                                    pw,
                                    t0: sp.t0 + p * NR,
                                    tw,
                                    vbuf: sp.vbuf,
                                    bsz: sp.bsz,
                                    off: pack::b_row_at(sp.nt, cg, c, p),
                                };
                                r.run(Input(panel, variant));
                            };
                        }
                    }
                };
                // 2. The products `xs`, each a GEMM through the packed kernel.
                let products = |xs: std::ops::Range<usize>, sp: Span| {
                    for xi in xs {
                        // SAFETY: U_ξ of this group; product ξ of the span.
                        unsafe {
                            let a = w.add((grp * pts + xi) * per);
                            gemm::gemm_packed_a(
                                Par::SEQ,
                                mg,
                                sp.nt,
                                cg,
                                a,
                                BSource::Packed(sp.vbuf.add(xi * sp.bsz)),
                                sp.mbuf.add(xi * mg * sp.ld),
                                sp.ld,
                                &Epilogue::NONE,
                                crate::par::Slots::single(std::ptr::null_mut()),
                            );
                        }
                    }
                };
                // 3. Output transform with the epilogue, a panel at a time: the planes of
                //    output channels `ms`.
                let output = |ms: std::ops::Range<usize>, sp: Span| {
                    for m in ms {
                        let ch = grp * mg + m;
                        let bv = if bias.is_null() {
                            0.0
                        } else {
                            // SAFETY: a non-null bias holds m floats; ch < m.
                            unsafe { *bias.add(ch) }
                        };
                        for p in 0..sp.nt / NR {
                            // SAFETY: products (m, panel p) of each ξ; output channel plane m.
                            unsafe {
                                let rm = if rg.is_null() { rg } else { rg.add(m * osz) };
                                let panel = OutputPanel {
                                    mrow: sp.mbuf.add(m * sp.ld + p * NR),
                                    stride: mg * sp.ld,
                                    t0: sp.t0 + p * NR,
                                    tw,
                                    oh,
                                    ow,
                                    out: yg.add(m * osz),
                                    resid: rm,
                                    bias: bv,
                                    lo,
                                    hi,
                                };
                                r.run(Output(panel, variant));
                            }
                        }
                    }
                };
                let block = Span {
                    t0,
                    nt,
                    vbuf,
                    bsz,
                    mbuf,
                    ld: tb,
                };
                let (panels, workers) = (nt / NR, par.workers());
                // The three phases over panels `ps`, a cache-sized pass at a time.
                let passes = |ps: std::ops::Range<usize>| {
                    let mut p0 = ps.start;
                    while p0 < ps.end {
                        let p1 = ps.end.min(p0.saturating_add(chunk));
                        let sp = block.part(p0..p1, cg, mg, pts);
                        input(0..cg, sp);
                        products(0..pts, sp);
                        output(0..mg, sp);
                        p0 = p1;
                    }
                };
                if workers == 1 {
                    passes(0..panels);
                } else if workers > 1
                    && (panels >= 2 * workers || panels % workers == 0)
                    && (workers - 1) * pts * mg * cg < pts * nt * (cg + mg)
                {
                    // Each task runs the three phases on its own panels, in its own part of
                    // the block's scratch: no join between phases and no transformed data
                    // crossing cores, for each worker reading all the transformed weights
                    // (hence only where they are smaller than the data they spare).
                    let job = |ps: std::ops::Range<usize>, _| passes(ps);
                    // SAFETY: the tasks' parts of the scratch and their output tiles are
                    // disjoint.
                    unsafe { par.for_ranges(panels, NR * pts * mg * cg, &job) };
                } else {
                    // Each phase split over the workers and joined before the next: by input
                    // channels, by transformed point (whole GEMMs), by output channels.
                    // SAFETY: the tasks write disjoint rows of the B matrices, their own
                    // product matrices, disjoint output planes.
                    unsafe {
                        par.for_ranges(cg, nt * pts * 4, &|cs, _| input(cs, block));
                        par.for_ranges(pts, mg * nt * cg, &|xs, _| products(xs, block));
                        par.for_ranges(mg, nt * pts * 2, &|ms, _| output(ms, block));
                    }
                }
                t0 += nt;
            }
        }
    }
}

#[cfg(test)]
mod tests;
