//! Winograd F(2×2, 3×3) for 3×3, stride-1, undilated 2-D convolutions: each 2×2 output tile
//! comes from a 4×4 input tile through 16 elementwise products in the transformed domain,
//! i.e. 16 GEMMs `U_ξ[M×C] · V_ξ[C×tiles]` — 2.25× fewer multiplies than direct convolution.
//! Weights are transformed (`U = G g Gᵀ`) and packed once; input tiles are transformed
//! (`V = Bᵀ d B`) straight into packed B panels, block by block; the output transform
//! (`Y = Aᵀ M A`) applies the epilogue. Large maps (20×20 and up) run F(4×4, 3×3)
//! instead (`f4.rs`: 36 products per 4×4 tile, 4× fewer multiplies) through the same blocks
//! and GEMMs (`Variant`).

use crate::conv::ConvGeometry;
use crate::gemm::{self, BSource, Epilogue, NR, pack};

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

/// Smallest output side that runs F(4×4, 3×3).
const F4_MIN_SIDE: i64 = 20;

/// Transformed weights of one 3×3 kernel: `U = G g Gᵀ`.
fn transform_kernel(g: &[f32; 9]) -> [f32; 16] {
    // G = [[1,0,0],[½,½,½],[½,-½,½],[0,0,1]]
    let gk = |r: usize, c: usize| g[r * 3 + c];
    let mut t = [[0f32; 3]; 4]; // G g
    for c in 0..3 {
        let (a, b, d) = (gk(0, c), gk(1, c), gk(2, c));
        t[0][c] = a;
        t[1][c] = 0.5 * (a + b + d);
        t[2][c] = 0.5 * (a - b + d);
        t[3][c] = d;
    }
    let mut u = [0f32; 16]; // (G g) Gᵀ
    for r in 0..4 {
        let (a, b, d) = (t[r][0], t[r][1], t[r][2]);
        u[r * 4] = a;
        u[r * 4 + 1] = 0.5 * (a + b + d);
        u[r * 4 + 2] = 0.5 * (a - b + d);
        u[r * 4 + 3] = d;
    }
    u
}

/// `V = Bᵀ d B` of a 4×4 input tile.
#[inline]
fn transform_input(d: &[[f32; 4]; 4]) -> [f32; 16] {
    // Bᵀ = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]
    let mut t = [[0f32; 4]; 4];
    for c in 0..4 {
        t[0][c] = d[0][c] - d[2][c];
        t[1][c] = d[1][c] + d[2][c];
        t[2][c] = d[2][c] - d[1][c];
        t[3][c] = d[1][c] - d[3][c];
    }
    let mut v = [0f32; 16];
    for r in 0..4 {
        let x = t[r];
        v[r * 4] = x[0] - x[2];
        v[r * 4 + 1] = x[1] + x[2];
        v[r * 4 + 2] = x[2] - x[1];
        v[r * 4 + 3] = x[1] - x[3];
    }
    v
}

/// `Y = Aᵀ M A` (2×2) from the 16 products of one tile.
#[inline]
fn transform_output(m: &[f32; 16]) -> [[f32; 2]; 2] {
    // Aᵀ = [[1,1,1,0],[0,1,-1,-1]]
    let mut t = [[0f32; 4]; 2];
    for c in 0..4 {
        t[0][c] = m[c] + m[4 + c] + m[8 + c];
        t[1][c] = m[4 + c] - m[8 + c] - m[12 + c];
    }
    let mut y = [[0f32; 2]; 2];
    for r in 0..2 {
        y[r][0] = t[r][0] + t[r][1] + t[r][2];
        y[r][1] = t[r][1] - t[r][2] - t[r][3];
    }
    y
}

impl ConvGeometry {
    /// 3×3, stride 1, no dilation, 2-D, and enough channels for the transforms to pay off
    /// (and not `no_winograd`).
    pub fn use_winograd(&self) -> bool {
        let applies = !self.no_winograd
            && self.input.len() == 2
            && self.kernel == [3, 3]
            && self.strides == [1, 1]
            && self.dilations == [1, 1]
            && !self.is_depthwise()
            && self.output[0] >= 2;
        if !applies {
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

    /// Tile rows and columns; columns are padded to a multiple of 8 so that each half of a
    /// panel (8 tiles, the AVX2 transforms' width) lies in one tile row. A panel spans two
    /// tile rows when a row holds 8 (mod 16) tiles — 14×14 outputs keep 7 of 8 lanes busy
    /// instead of 7 of 16. Padding tiles compute zeros that are never stored.
    fn tiles(&self) -> (usize, usize) {
        let m = self.winograd_variant().m();
        (
            (self.output[0] as usize).div_ceil(m),
            (self.output[1] as usize).div_ceil(m).next_multiple_of(8),
        )
    }

    /// F(4×4, 3×3) for maps of 20×20 and more, F(2×2, 3×3) below. F(4,3) does 4× fewer
    /// multiplies than direct convolution (F(2,3): 2.25×) but has 2.25× the transformed
    /// weights and costlier transforms, and its tiles pad small maps more. Zen 5, effective
    /// GFLOP/s F(2,3) → F(4,3) with AVX-512: 32→128 at 27×27 271 → 380, 128→128 at 28×28
    /// 259 → 480, 64→192 at 56×56 275 → 536; at 14×14 level (256→256: 289 vs 292), at
    /// 13×13 mixed (48→192 254 → 179, 64→256 197 → 225). With the AVX2 kernels (same core,
    /// `ONNXC_RUNTIME_ISA=avx2`): 64→64 at 56×56 108 → 224, 128→128 at 28×28 145 → 246,
    /// 128→32 at 56×56 76 → 168.
    pub fn winograd_variant(&self) -> Variant {
        if self.output.len() == 2 && self.output[0] >= F4_MIN_SIDE && self.output[1] >= F4_MIN_SIDE
        {
            Variant::F4
        } else {
            Variant::F2
        }
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

    pub(crate) fn winograd_weights_len(&self) -> usize {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        self.group as usize * self.winograd_variant().points() * pack::packed_a_len(mg, cg)
    }

    /// `[group][ξ][packed A of U_ξ (M/g × C/g)]` from weights `[M, C/g, 3, 3]`.
    pub(crate) fn winograd_pack(&self, w: &[f32]) -> Vec<f32> {
        let (cg, mg) = (
            (self.c / self.group) as usize,
            (self.m / self.group) as usize,
        );
        let per = pack::packed_a_len(mg, cg);
        let variant = self.winograd_variant();
        let pts = variant.points();
        let mut out = vec![0f32; self.group as usize * pts * per];
        let mut u = vec![0f32; pts * mg * cg];
        for grp in 0..self.group as usize {
            for m in 0..mg {
                for c in 0..cg {
                    let base = ((grp * mg + m) * cg + c) * 9;
                    let k: [f32; 9] = w[base..base + 9].try_into().expect("3×3 kernel");
                    let t = match variant {
                        Variant::F2 => transform_kernel(&k).to_vec(),
                        Variant::F4 => f4::transform_kernel(&k).to_vec(),
                    };
                    for (xi, v) in t.iter().enumerate() {
                        u[(xi * mg + m) * cg + c] = *v;
                    }
                }
            }
            for xi in 0..pts {
                // SAFETY: u holds 16 mg×cg matrices; out holds their packed forms.
                unsafe {
                    pack::pack_a(
                        u.as_ptr().add(xi * mg * cg),
                        cg,
                        false,
                        mg,
                        cg,
                        out.as_mut_ptr().add((grp * pts + xi) * per),
                    )
                };
            }
        }
        out
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

/// Input transform of one panel (tiles `t0..t0+16` in row-major order over `tw` tile
/// columns; each half of 8 lies in one tile row) of one channel plane into the 16 B
/// matrices: `vbuf + ξ·bsz + off` gets the panel's 16 values.
///
/// # Safety
/// `plane` is an ih × iw plane; the 16 destinations are inside their B matrices.
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
unsafe fn input_panel(
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
) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() && t0 % tw + NR <= tw {
        // SAFETY: forwarded; AVX-512F checked; the 16 tiles share a tile row.
        unsafe { avx512::input_panel(plane, ih, iw, ph, pw, t0 / tw, t0 % tw, vbuf, bsz, off) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 checked. Two halves of 8 tiles, each within a tile row.
        unsafe {
            for h in 0..2 {
                let t = t0 + 8 * h;
                avx2::input_panel(
                    plane,
                    ih,
                    iw,
                    ph,
                    pw,
                    t / tw,
                    t % tw,
                    vbuf,
                    bsz,
                    off + 8 * h,
                );
            }
        }
        return;
    }
    for j in 0..NR {
        let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
        let (y0, x0) = (2 * ty as i64 - ph, 2 * tx as i64 - pw);
        let mut d = [[0f32; 4]; 4];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            for (cc, dv) in dr.iter_mut().enumerate() {
                let xx = x0 + cc as i64;
                if yy >= 0 && yy < ih && xx >= 0 && xx < iw {
                    // SAFETY: (yy, xx) inside the plane.
                    *dv = unsafe { *plane.add((yy * iw + xx) as usize) };
                }
            }
        }
        for (xi, v) in transform_input(&d).iter().enumerate() {
            // SAFETY: lane j of panel destination ξ.
            unsafe { *vbuf.add(xi * bsz + off + j) = *v };
        }
    }
}

/// Output transform of one panel (tiles `t0..t0+16`, as for `input_panel`) of one output
/// channel: the 16 product vectors at `mrow + ξ·stride` become the 2×2 outputs of 16 tiles,
/// with the epilogue.
///
/// # Safety
/// Products and output/residual planes in bounds; stores are cropped to oh × ow.
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
unsafe fn output_panel(
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
) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() && t0 % tw + NR <= tw {
        // SAFETY: forwarded; AVX-512F checked; the 16 tiles share a tile row.
        unsafe {
            avx512::output_panel(
                mrow,
                stride,
                t0 / tw,
                t0 % tw,
                oh,
                ow,
                out,
                resid,
                bias,
                lo,
                hi,
            )
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: forwarded; AVX2 checked. Two halves of 8 tiles, each within a tile row.
        unsafe {
            for h in 0..2 {
                let t = t0 + 8 * h;
                avx2::output_panel(
                    mrow.add(8 * h),
                    stride,
                    t / tw,
                    t % tw,
                    oh,
                    ow,
                    out,
                    resid,
                    bias,
                    lo,
                    hi,
                );
            }
        }
        return;
    }
    for j in 0..NR {
        let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
        let mut mv = [0f32; 16];
        for (xi, v) in mv.iter_mut().enumerate() {
            // SAFETY: product lane j of ξ.
            *v = unsafe { *mrow.add(xi * stride + j) };
        }
        let y = transform_output(&mv);
        for (r, row) in y.iter().enumerate() {
            let oy = 2 * ty + r;
            for (cc, val) in row.iter().enumerate() {
                let ox = 2 * tx + cc;
                if oy < oh && ox < ow {
                    let o = oy * ow + ox;
                    let rv = if resid.is_null() {
                        0.0
                    } else {
                        unsafe { *resid.add(o) }
                    };
                    // SAFETY: inside the output plane.
                    unsafe { *out.add(o) = crate::clamp_ep(val + bias + rv, lo, hi) };
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Lanes of a 16-wide load starting at column `x` that lie inside `[0, iw)`.
    #[inline(always)]
    fn col_mask(x: i64, iw: i64) -> __mmask16 {
        let a = (-x).clamp(0, 16) as u32;
        let b = (iw - x).clamp(a as i64, 16) as u32;
        ((((1u64 << b) - 1) as u32) & !((1u32 << a) - 1)) as __mmask16
    }

    /// # Safety
    /// See `super::input_panel`; AVX-512F available.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn input_panel(
        plane: *const f32,
        ih: i64,
        iw: i64,
        ph: i64,
        pw: i64,
        ty: usize,
        tx0: usize,
        vbuf: *mut f32,
        bsz: usize,
        off: usize,
    ) {
        let y0 = 2 * ty as i64 - ph;
        let x0 = 2 * tx0 as i64 - pw;
        // Columns x0 .. x0+34 cover the 16 tiles; evens/odds of [x0, x0+32) and [x0+2, x0+34).
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let (m0, m1, m2) = (
            col_mask(x0, iw),
            col_mask(x0 + 16, iw),
            col_mask(x0 + 32, iw),
        );
        let mut d = [[_mm512_setzero_ps(); 4]; 4];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            if yy < 0 || yy >= ih {
                continue;
            }
            // SAFETY: masked lanes lie inside row yy; masked-off lanes are not accessed.
            unsafe {
                // The panel may start left of the row or end past it: wrapping arithmetic, and
                // only in-row lanes are loaded.
                let row = plane.wrapping_offset((yy * iw + x0) as isize);
                let a = _mm512_maskz_loadu_ps(m0, row);
                let b = _mm512_maskz_loadu_ps(m1, row.wrapping_add(16));
                let c = _mm512_maskz_loadu_ps(m2, row.wrapping_add(32));
                dr[0] = _mm512_permutex2var_ps(a, even, b);
                dr[1] = _mm512_permutex2var_ps(a, odd, b);
                // Shift by two columns: [x0+2, x0+34) from a|b and b|c.
                let a2 = _mm512_castsi512_ps(_mm512_alignr_epi32(
                    _mm512_castps_si512(b),
                    _mm512_castps_si512(a),
                    2,
                ));
                let b2 = _mm512_castsi512_ps(_mm512_alignr_epi32(
                    _mm512_castps_si512(c),
                    _mm512_castps_si512(b),
                    2,
                ));
                dr[2] = _mm512_permutex2var_ps(a2, even, b2);
                dr[3] = _mm512_permutex2var_ps(a2, odd, b2);
            }
        }
        // Bᵀ d B, lane-wise.
        let mut t = [[_mm512_setzero_ps(); 4]; 4];
        for c in 0..4 {
            t[0][c] = _mm512_sub_ps(d[0][c], d[2][c]);
            t[1][c] = _mm512_add_ps(d[1][c], d[2][c]);
            t[2][c] = _mm512_sub_ps(d[2][c], d[1][c]);
            t[3][c] = _mm512_sub_ps(d[1][c], d[3][c]);
        }
        for (r, x) in t.iter().enumerate() {
            let v = [
                _mm512_sub_ps(x[0], x[2]),
                _mm512_add_ps(x[1], x[2]),
                _mm512_sub_ps(x[2], x[1]),
                _mm512_sub_ps(x[1], x[3]),
            ];
            for (cc, vv) in v.iter().enumerate() {
                // SAFETY: panel destination ξ = 4r + cc.
                unsafe { _mm512_storeu_ps(vbuf.add((r * 4 + cc) * bsz + off), *vv) };
            }
        }
    }

    /// # Safety
    /// See `super::output_panel`; AVX-512F available.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn output_panel(
        mrow: *const f32,
        stride: usize,
        ty: usize,
        tx0: usize,
        oh: usize,
        ow: usize,
        out: *mut f32,
        resid: *const f32,
        bias: f32,
        lo: f32,
        hi: f32,
    ) {
        let mut m = [_mm512_setzero_ps(); 16];
        for (xi, v) in m.iter_mut().enumerate() {
            // SAFETY: 16 products of ξ.
            *v = unsafe { _mm512_loadu_ps(mrow.add(xi * stride)) };
        }
        let add3 = |a, b, c| _mm512_add_ps(_mm512_add_ps(a, b), c);
        let mut t = [[_mm512_setzero_ps(); 4]; 2];
        for c in 0..4 {
            t[0][c] = add3(m[c], m[4 + c], m[8 + c]);
            t[1][c] = _mm512_sub_ps(_mm512_sub_ps(m[4 + c], m[8 + c]), m[12 + c]);
        }
        let (bv, lov, hiv) = (_mm512_set1_ps(bias), _mm512_set1_ps(lo), _mm512_set1_ps(hi));
        // Interleave (y0, y1) of 16 tiles into 32 consecutive output columns.
        let lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let hi_idx =
            _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        let x0 = 2 * tx0;
        let (n0, n1) = (
            ow.saturating_sub(x0).min(16),
            ow.saturating_sub(x0 + 16).min(16),
        );
        let mk = |n: usize| {
            if n >= 16 {
                0xFFFFu16
            } else {
                ((1u32 << n) - 1) as u16
            }
        };
        let (k0, k1) = (mk(n0), mk(n1));
        for (r, x) in t.iter().enumerate() {
            let oy = 2 * ty + r;
            if oy >= oh {
                continue;
            }
            let y0 = add3(x[0], x[1], x[2]);
            let y1 = _mm512_sub_ps(_mm512_sub_ps(x[1], x[2]), x[3]);
            let mut a = _mm512_permutex2var_ps(y0, lo_idx, y1);
            let mut b = _mm512_permutex2var_ps(y0, hi_idx, y1);
            // SAFETY: masked to the columns inside the output row.
            unsafe {
                let o = out.add(oy * ow).wrapping_add(x0);
                a = _mm512_add_ps(a, bv);
                b = _mm512_add_ps(b, bv);
                if !resid.is_null() {
                    let rp = resid.add(oy * ow).wrapping_add(x0);
                    a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(k0, rp));
                    b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(k1, rp.wrapping_add(16)));
                }
                a = _mm512_min_ps(hiv, _mm512_max_ps(lov, a));
                b = _mm512_min_ps(hiv, _mm512_max_ps(lov, b));
                _mm512_mask_storeu_ps(o, k0, a);
                _mm512_mask_storeu_ps(o.wrapping_add(16), k1, b);
            }
        }
    }
}

/// The transforms for 8 tiles at a time (half a panel) with 256-bit vectors; lanes outside
/// the input row are masked off (`vmaskmovps` does not touch masked-off memory).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Lanes of an 8-wide access starting at column `x` that lie inside `[0, w)`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn col_mask(x: i64, w: i64) -> __m256i {
        let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let xv = _mm256_add_epi32(_mm256_set1_epi32(x.clamp(-64, w) as i32), idx);
        // 0 <= x + lane < w
        let ge0 = _mm256_cmpgt_epi32(xv, _mm256_set1_epi32(-1));
        let ltw = _mm256_cmpgt_epi32(_mm256_set1_epi32(w.min(i32::MAX as i64) as i32), xv);
        _mm256_and_si256(ge0, ltw)
    }

    /// Input transform of 8 tiles (tile row `ty`, tile columns `tx0..tx0+8`): see
    /// `super::input_panel`, with `off` the destination of lane 0.
    ///
    /// # Safety
    /// AVX2 available; the 8 destinations of each ξ are inside their B matrices.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn input_panel(
        plane: *const f32,
        ih: i64,
        iw: i64,
        ph: i64,
        pw: i64,
        ty: usize,
        tx0: usize,
        vbuf: *mut f32,
        bsz: usize,
        off: usize,
    ) {
        let y0 = 2 * ty as i64 - ph;
        let x0 = 2 * tx0 as i64 - pw;
        // Columns x0 .. x0+18 cover the 8 tiles: evens/odds of [x0, x0+16) and [x0+2, x0+18).
        let masks = [
            col_mask(x0, iw),
            col_mask(x0 + 8, iw),
            col_mask(x0 + 2, iw),
            col_mask(x0 + 10, iw),
        ];
        let mut d = [[_mm256_setzero_ps(); 4]; 4];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            if yy < 0 || yy >= ih {
                continue;
            }
            // SAFETY: masked lanes lie inside row yy; masked-off lanes are not accessed (the
            // row pointer may lie outside the plane: wrapping arithmetic).
            unsafe {
                let row = plane.wrapping_offset((yy * iw + x0) as isize);
                let a = _mm256_maskload_ps(row, masks[0]);
                let b = _mm256_maskload_ps(row.wrapping_add(8), masks[1]);
                let a2 = _mm256_maskload_ps(row.wrapping_add(2), masks[2]);
                let b2 = _mm256_maskload_ps(row.wrapping_add(10), masks[3]);
                (dr[0], dr[1]) = crate::avx2::deinterleave(a, b);
                (dr[2], dr[3]) = crate::avx2::deinterleave(a2, b2);
            }
        }
        // Bᵀ d B, lane-wise.
        let mut t = [[_mm256_setzero_ps(); 4]; 4];
        for c in 0..4 {
            t[0][c] = _mm256_sub_ps(d[0][c], d[2][c]);
            t[1][c] = _mm256_add_ps(d[1][c], d[2][c]);
            t[2][c] = _mm256_sub_ps(d[2][c], d[1][c]);
            t[3][c] = _mm256_sub_ps(d[1][c], d[3][c]);
        }
        for (r, x) in t.iter().enumerate() {
            let v = [
                _mm256_sub_ps(x[0], x[2]),
                _mm256_add_ps(x[1], x[2]),
                _mm256_sub_ps(x[2], x[1]),
                _mm256_sub_ps(x[1], x[3]),
            ];
            for (cc, vv) in v.iter().enumerate() {
                // SAFETY: destination ξ = 4r + cc.
                unsafe { _mm256_storeu_ps(vbuf.add((r * 4 + cc) * bsz + off), *vv) };
            }
        }
    }

    /// Output transform of 8 tiles: see `super::output_panel`.
    ///
    /// # Safety
    /// AVX2 available; 8 products of each ξ at `mrow + ξ·stride`; stores are cropped to the
    /// oh × ow plane.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn output_panel(
        mrow: *const f32,
        stride: usize,
        ty: usize,
        tx0: usize,
        oh: usize,
        ow: usize,
        out: *mut f32,
        resid: *const f32,
        bias: f32,
        lo: f32,
        hi: f32,
    ) {
        let x0 = 2 * tx0;
        if x0 >= ow {
            return;
        }
        let mut m = [_mm256_setzero_ps(); 16];
        for (xi, v) in m.iter_mut().enumerate() {
            // SAFETY: 8 products of ξ.
            *v = unsafe { _mm256_loadu_ps(mrow.add(xi * stride)) };
        }
        let add3 = |a, b, c| _mm256_add_ps(_mm256_add_ps(a, b), c);
        let mut t = [[_mm256_setzero_ps(); 4]; 2];
        for c in 0..4 {
            t[0][c] = add3(m[c], m[4 + c], m[8 + c]);
            t[1][c] = _mm256_sub_ps(_mm256_sub_ps(m[4 + c], m[8 + c]), m[12 + c]);
        }
        let (bv, lov, hiv) = (_mm256_set1_ps(bias), _mm256_set1_ps(lo), _mm256_set1_ps(hi));
        let (w, x) = (ow as i64, x0 as i64);
        let (k0, k1) = (col_mask(x, w), col_mask(x + 8, w));
        let full = x0 + 16 <= ow;
        for (r, xr) in t.iter().enumerate() {
            let oy = 2 * ty + r;
            if oy >= oh {
                continue;
            }
            let y0 = add3(xr[0], xr[1], xr[2]);
            let y1 = _mm256_sub_ps(_mm256_sub_ps(xr[1], xr[2]), xr[3]);
            // Interleave (y0, y1) of 8 tiles into 16 consecutive output columns.
            let lo4 = _mm256_unpacklo_ps(y0, y1); // tiles 0,1 | 4,5
            let hi4 = _mm256_unpackhi_ps(y0, y1); // tiles 2,3 | 6,7
            let mut a = _mm256_permute2f128_ps::<0x20>(lo4, hi4);
            let mut b = _mm256_permute2f128_ps::<0x31>(lo4, hi4);
            // SAFETY: masked (or, for a whole 16 columns, plain) accesses inside row oy.
            unsafe {
                let o = out.add(oy * ow + x0);
                a = _mm256_add_ps(a, bv);
                b = _mm256_add_ps(b, bv);
                if !resid.is_null() {
                    let rp = resid.add(oy * ow + x0);
                    if full {
                        a = _mm256_add_ps(a, _mm256_loadu_ps(rp));
                        b = _mm256_add_ps(b, _mm256_loadu_ps(rp.add(8)));
                    } else {
                        a = _mm256_add_ps(a, _mm256_maskload_ps(rp, k0));
                        b = _mm256_add_ps(b, _mm256_maskload_ps(rp.wrapping_add(8), k1));
                    }
                }
                // max/min with the value second: NaN passes through the clamp.
                a = _mm256_min_ps(hiv, _mm256_max_ps(lov, a));
                b = _mm256_min_ps(hiv, _mm256_max_ps(lov, b));
                if full {
                    _mm256_storeu_ps(o, a);
                    _mm256_storeu_ps(o.add(8), b);
                } else {
                    _mm256_maskstore_ps(o, k0, a);
                    _mm256_maskstore_ps(o.wrapping_add(8), k1, b);
                }
            }
        }
    }
}

/// # Safety
/// As `conv::conv_f32` for a geometry with `use_winograd()`; `w` from `winograd_pack`;
/// `scratch` holds `winograd_scratch()` floats.
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe fn conv_winograd(
    g: &ConvGeometry,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    lo: f32,
    hi: f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    let (cg, mg) = ((g.c / g.group) as usize, (g.m / g.group) as usize);
    let (ih, iw) = (g.input[0], g.input[1]);
    let (oh, ow) = (g.output[0] as usize, g.output[1] as usize);
    let (ph, pw) = (g.pads[0], g.pads[1]);
    let tw = g.tiles().1;
    let tiles = g.tile_count();
    let tb = g.winograd_block();
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
            let rg = if residual.is_null() {
                residual
            } else {
                unsafe { residual.add((b * g.m as usize + grp * mg) * osz) }
            };
            let mut t0 = 0;
            while t0 < tiles {
                let nt = tb.min(tiles - t0);
                // 1. Input transform, a panel (16 tiles of one tile row) at a time.
                for c in 0..cg {
                    // SAFETY: channel plane c of the group.
                    let plane = unsafe { xg.add(c * isz) };
                    for p in 0..nt / NR {
                        let t = t0 + p * NR;
                        // SAFETY: panel p of every B matrix of the block.
                        unsafe {
                            let off = pack::b_row_at(nt, cg, c, p);
                            match variant {
                                Variant::F2 => {
                                    input_panel(plane, ih, iw, ph, pw, t, tw, vbuf, bsz, off)
                                }
                                Variant::F4 => {
                                    f4::input_panel(plane, ih, iw, ph, pw, t, tw, vbuf, bsz, off)
                                }
                            }
                        };
                    }
                }
                // 2. The products, each a GEMM through the packed kernel.
                for xi in 0..pts {
                    // SAFETY: U_ξ of this group; product block ξ in scratch.
                    unsafe {
                        let a = w.add((grp * pts + xi) * per);
                        gemm::gemm_packed_a(
                            mg,
                            nt,
                            cg,
                            a,
                            BSource::Packed(vbuf.add(xi * bsz)),
                            mbuf.add(xi * mg * tb),
                            tb,
                            &Epilogue::NONE,
                            std::ptr::null_mut(),
                        );
                    }
                }
                // 3. Output transform with the epilogue, a panel at a time.
                for m in 0..mg {
                    let ch = grp * mg + m;
                    let bv = if bias.is_null() {
                        0.0
                    } else {
                        unsafe { *bias.add(ch) }
                    };
                    for p in 0..nt / NR {
                        let t = t0 + p * NR;
                        // SAFETY: products (m, panel p) of each ξ; output channel plane m.
                        unsafe {
                            let r = if rg.is_null() { rg } else { rg.add(m * osz) };
                            let (mrow, ym) = (mbuf.add(m * tb + p * NR), yg.add(m * osz));
                            match variant {
                                Variant::F2 => {
                                    output_panel(mrow, mg * tb, t, tw, oh, ow, ym, r, bv, lo, hi)
                                }
                                Variant::F4 => f4::output_panel(
                                    mrow,
                                    mg * tb,
                                    t,
                                    tw,
                                    oh,
                                    ow,
                                    ym,
                                    r,
                                    bv,
                                    lo,
                                    hi,
                                ),
                            }
                        }
                    }
                }
                t0 += nt;
            }
        }
    }
}
