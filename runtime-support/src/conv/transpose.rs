//! 2-D transposed convolution (ONNX ConvTranspose, f32) as a GEMM and a col2im:
//! per group, `cols[(m, ky, kx), p] = Σ_c w[c, m, ky, kx] · x[c, p]` over the input
//! positions `p` — one packed-A GEMM whose A is the group's weights transposed (packed at
//! compile time) and whose B is the input planes read in place — then every column adds
//! into the output position it lands on, `y[m, iy·sh − ph + ky·dh, ix·sw − pw + kx·dw]`
//! (outside the output: dropped). The output starts as the bias and is clamped at the end
//! (a fused Relu/Clip). Input rows go in chunks whose columns fit in `CHUNK_FLOATS` of
//! scratch, so the scratch does not grow with the image.
//!
//! It replaced a per-output reduction over channels and taps with an integer division and
//! a test per tap in generated scalar code: a UNet's 128→64 2×2/2 up-convolution at 64×64
//! took 2.75 s.

use crate::gemm::{self, BSource, Epilogue, pack};

/// Floats of the column buffer per chunk of input rows (1 MB).
const CHUNK_FLOATS: usize = 256 * 1024;

/// Geometry of one 2-D transposed convolution (NCHW input `[n, c, ih, iw]`, weights
/// `[c, m/group, kh, kw]`, output `[n, m, oh, ow]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTransposeGeometry {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub input: [usize; 2],
    pub kernel: [usize; 2],
    pub output: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding at the start of each spatial dim (the output's offset into the full result).
    pub pads: [usize; 2],
}

impl ConvTransposeGeometry {
    /// `[n, c, m, group, ih, iw, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw]`.
    pub fn encode(&self) -> Vec<i64> {
        let mut p = vec![self.n, self.c, self.m, self.group];
        for v in [
            self.input,
            self.kernel,
            self.output,
            self.strides,
            self.dilations,
            self.pads,
        ] {
            p.extend_from_slice(&v);
        }
        p.into_iter().map(|v| v as i64).collect()
    }

    /// # Safety
    /// `p` points to an array written by `encode`.
    pub unsafe fn decode(p: *const i64) -> ConvTransposeGeometry {
        // SAFETY: the caller's contract.
        let v = unsafe { std::slice::from_raw_parts(p, 16) };
        let u = |i: usize| v[i] as usize;
        let pair = |i: usize| [u(i), u(i + 1)];
        ConvTransposeGeometry {
            n: u(0),
            c: u(1),
            m: u(2),
            group: u(3),
            input: pair(4),
            kernel: pair(6),
            output: pair(8),
            strides: pair(10),
            dilations: pair(12),
            pads: pair(14),
        }
    }

    fn cg(&self) -> usize {
        self.c / self.group
    }
    fn mg(&self) -> usize {
        self.m / self.group
    }
    /// Rows of a group's column matrix: its output channels × taps.
    fn mk(&self) -> usize {
        self.mg() * self.kernel[0] * self.kernel[1]
    }
    fn isize(&self) -> usize {
        self.input[0] * self.input[1]
    }
    fn osize(&self) -> usize {
        self.output[0] * self.output[1]
    }

    /// Input rows per chunk: as many as keep the columns within `CHUNK_FLOATS` (at least one).
    fn chunk_rows(&self) -> usize {
        (CHUNK_FLOATS / (self.mk() * self.input[1]).max(1)).clamp(1, self.input[0].max(1))
    }

    /// Floats of the packed weights: each group's transposed weights as A panels.
    pub fn packed_weights_len(&self) -> usize {
        self.group * pack::packed_a_len(self.mk(), self.cg())
    }

    /// Weights `[c, m/group, kh, kw]` packed as `onnxc_conv_transpose_f32` reads them.
    pub fn pack_weights(&self, w: &[f32]) -> Vec<f32> {
        assert_eq!(
            w.len(),
            self.c * self.mk(),
            "ConvTranspose weights of the wrong size"
        );
        let per = pack::packed_a_len(self.mk(), self.cg());
        let mut out = vec![0f32; self.group * per];
        for g in 0..self.group {
            // Group g's weights are rows g·cg.. of the [c, mk] matrix: A = (that block)ᵀ.
            // SAFETY: the block has cg rows of mk floats; out holds `per` floats per group.
            unsafe {
                pack::pack_a(
                    w.as_ptr().add(g * self.cg() * self.mk()),
                    self.mk(),
                    true,
                    self.mk(),
                    self.cg(),
                    out.as_mut_ptr().add(g * per),
                )
            };
        }
        out
    }

    /// Scratch floats: one chunk's columns and the GEMM's own scratch, after the packed
    /// weights when they are packed at run time (`weights_packed` false: weights that are a
    /// model input).
    pub fn scratch_floats(&self, weights_packed: bool) -> usize {
        let cols = self.mk() * self.chunk_rows() * self.input[1];
        let w = if weights_packed {
            0
        } else {
            self.packed_weights_len().next_multiple_of(16)
        };
        w + cols.next_multiple_of(16) + gemm::scratch_len(self.chunk_rows() * self.input[1], false)
    }

    /// Packs raw weights `[c, m/group, kh, kw]` into `dst` (`packed_weights_len()` floats).
    ///
    /// # Safety
    /// `w` holds `c·(m/group)·kh·kw` floats, `dst` `packed_weights_len()`.
    unsafe fn pack_weights_into(&self, w: *const f32, dst: *mut f32) {
        let per = pack::packed_a_len(self.mk(), self.cg());
        for g in 0..self.group {
            // SAFETY: the caller's contract (as `pack_weights`).
            unsafe {
                pack::pack_a(
                    w.add(g * self.cg() * self.mk()),
                    self.mk(),
                    true,
                    self.mk(),
                    self.cg(),
                    dst.add(g * per),
                )
            };
        }
    }
}

/// The transposed convolution.
///
/// # Safety
/// `x` holds `[n, c, ih, iw]`, `w` `packed_weights_len()` packed floats (or the raw
/// `[c, m/group, kh, kw]` weights when `!weights_packed`), `bias` null or `m` floats, `y`
/// `[n, m, oh, ow]`, `scratch` `scratch_floats(weights_packed)` floats (64-byte aligned).
#[allow(clippy::too_many_arguments, reason = "a kernel with an epilogue")]
pub unsafe fn conv_transpose_f32(
    g: &ConvTransposeGeometry,
    x: *const f32,
    w: *const f32,
    weights_packed: bool,
    bias: *const f32,
    lo: f32,
    hi: f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    let (cg, mg, mk) = (g.cg(), g.mg(), g.mk());
    let (ih, iw) = (g.input[0], g.input[1]);
    let (isz, osz) = (g.isize(), g.osize());
    let per = pack::packed_a_len(mk, cg);
    let rows_per_chunk = g.chunk_rows();
    let cols_len = (mk * rows_per_chunk * iw).next_multiple_of(16);
    // SAFETY (whole body): offsets inside the tensors the geometry describes and the
    // scratch `scratch_floats()` sizes; col2im writes only positions inside the output.
    unsafe {
        let (w, scratch) = if weights_packed {
            (w, scratch)
        } else {
            g.pack_weights_into(w, scratch);
            (
                scratch as *const f32,
                scratch.add(g.packed_weights_len().next_multiple_of(16)),
            )
        };
        let cols = scratch;
        let gemm_scratch = scratch.add(cols_len);
        for b in 0..g.n {
            for grp in 0..g.group {
                let xg = x.add((b * g.c + grp * cg) * isz);
                let yg = y.add((b * g.m + grp * mg) * osz);
                for m in 0..mg {
                    let v = if bias.is_null() {
                        0.0
                    } else {
                        *bias.add(grp * mg + m)
                    };
                    std::slice::from_raw_parts_mut(yg.add(m * osz), osz).fill(v);
                }
                let mut r0 = 0;
                while r0 < ih {
                    let rows = rows_per_chunk.min(ih - r0);
                    let np = rows * iw;
                    gemm::gemm_packed_a(
                        mk,
                        np,
                        cg,
                        w.add(grp * per),
                        BSource::Matrix {
                            b: xg.add(r0 * iw),
                            ldb: isz,
                            trans: false,
                        },
                        cols,
                        np,
                        &Epilogue::NONE,
                        gemm_scratch,
                    );
                    col2im(g, cols, np, r0, rows, yg);
                    r0 += rows;
                }
                if lo > f32::NEG_INFINITY || hi < f32::INFINITY {
                    for v in std::slice::from_raw_parts_mut(yg, mg * osz) {
                        *v = crate::clamp_ep(*v, lo, hi);
                    }
                }
            }
        }
    }
}

/// Adds the columns of input rows `r0..r0+rows` (`cols`: `[mk, rows·iw]`, row pitch `np`)
/// into the group's output planes `yg`.
///
/// # Safety
/// As `conv_transpose_f32` for one group and chunk.
unsafe fn col2im(
    g: &ConvTransposeGeometry,
    cols: *const f32,
    np: usize,
    r0: usize,
    rows: usize,
    yg: *mut f32,
) {
    let (iw, osz) = (g.input[1], g.osize());
    let (oh, ow) = (g.output[0] as isize, g.output[1] as isize);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0] as isize, g.strides[1] as isize);
    let (dh, dw) = (g.dilations[0] as isize, g.dilations[1] as isize);
    let (ph, pw) = (g.pads[0] as isize, g.pads[1] as isize);
    for m in 0..g.mg() {
        // SAFETY: plane m of the group's output.
        let plane = unsafe { yg.add(m * osz) };
        for ky in 0..kh {
            for kx in 0..kw {
                let row = (m * kh + ky) * kw + kx;
                // Input columns ix whose output column ix·sw − pw + kx·dw is in [0, ow).
                let off = kx as isize * dw - pw;
                let ix_lo = if off >= 0 { 0 } else { ((-off) + sw - 1) / sw };
                let ix_hi = if ow - off <= 0 {
                    0
                } else {
                    ((ow - off - 1) / sw + 1).min(iw as isize)
                };
                if ix_lo >= ix_hi {
                    continue;
                }
                for r in 0..rows {
                    let oy = (r0 + r) as isize * sh - ph + ky as isize * dh;
                    if oy < 0 || oy >= oh {
                        continue;
                    }
                    // SAFETY: column row `row`, input row r of the chunk; output row oy.
                    unsafe {
                        let src = cols.add(row * np + r * iw);
                        let dst = plane.offset(oy * ow + off);
                        if sw == 1 {
                            for ix in ix_lo..ix_hi {
                                *dst.offset(ix) += *src.offset(ix);
                            }
                        } else {
                            for ix in ix_lo..ix_hi {
                                *dst.offset(ix * sw) += *src.offset(ix);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// C ABI entry point (`Kernel::ConvTransposeF32`): `w_packed` 1 for weights packed at
/// compile time, 0 for raw ones; `clamp` null or `[lo, hi]`.
///
/// # Safety
/// `params` was written by `ConvTransposeGeometry::encode`; otherwise as
/// `conv_transpose_f32`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_conv_transpose_f32(
    params: *const i64,
    x: *const f32,
    w: *const f32,
    w_packed: i64,
    bias: *const f32,
    clamp: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: forwarded.
    unsafe {
        let g = ConvTransposeGeometry::decode(params);
        let (lo, hi) = crate::clamp_bounds(clamp);
        conv_transpose_f32(&g, x, w, w_packed != 0, bias, lo, hi, y, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rand as rand;

    /// The definition: every input position scatters its kernel into the output.
    fn reference(g: &ConvTransposeGeometry, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let (cg, mg) = (g.cg(), g.mg());
        let (ih, iw) = (g.input[0], g.input[1]);
        let (oh, ow) = (g.output[0] as isize, g.output[1] as isize);
        let (kh, kw) = (g.kernel[0], g.kernel[1]);
        let mut y = vec![0f64; g.n * g.m * g.osize()];
        for b in 0..g.n {
            for m in 0..g.m {
                for v in &mut y[(b * g.m + m) * g.osize()..][..g.osize()] {
                    *v = bias[m] as f64;
                }
            }
            for c in 0..g.c {
                let grp = c / cg;
                for mm in 0..mg {
                    let m = grp * mg + mm;
                    for iy in 0..ih {
                        for ix in 0..iw {
                            let xv = x[((b * g.c + c) * ih + iy) * iw + ix] as f64;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let oy = (iy * g.strides[0] + ky * g.dilations[0]) as isize
                                        - g.pads[0] as isize;
                                    let ox = (ix * g.strides[1] + kx * g.dilations[1]) as isize
                                        - g.pads[1] as isize;
                                    if (0..oh).contains(&oy) && (0..ow).contains(&ox) {
                                        let wv = w[((c * mg + mm) * kh + ky) * kw + kx] as f64;
                                        y[(b * g.m + m) * g.osize() + (oy * ow + ox) as usize] +=
                                            xv * wv;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        y.into_iter().map(|v| v as f32).collect()
    }

    #[allow(clippy::too_many_arguments, reason = "test geometry")]
    fn geom(
        n: usize,
        c: usize,
        m: usize,
        group: usize,
        input: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        p: [usize; 2],
        out_pad: [usize; 2],
    ) -> ConvTransposeGeometry {
        let output = std::array::from_fn(|i| {
            (input[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 + out_pad[i] - 2 * p[i]
        });
        ConvTransposeGeometry {
            n,
            c,
            m,
            group,
            input,
            kernel: k,
            output,
            strides: s,
            dilations: d,
            pads: p,
        }
    }

    #[test]
    fn matches_the_definition() {
        let cases = [
            // UNet's 2×2/2 up-convolution; GAN-style 4×4/2 with padding 1; 3×3/2 with an
            // output padding; stride 1 (a flipped conv); dilation; groups; batch; a
            // 1-pixel input; many rows over several chunks.
            geom(1, 16, 8, 1, [9, 7], [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
            geom(1, 8, 12, 1, [6, 5], [4, 4], [2, 2], [1, 1], [1, 1], [0, 0]),
            geom(2, 6, 4, 1, [5, 8], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
            geom(1, 5, 7, 1, [6, 6], [3, 3], [1, 1], [1, 1], [1, 1], [0, 0]),
            geom(1, 4, 6, 2, [5, 5], [3, 2], [2, 3], [2, 1], [0, 1], [0, 0]),
            geom(1, 3, 3, 1, [1, 1], [3, 3], [2, 2], [1, 1], [0, 0], [0, 0]),
            geom(
                1,
                64,
                64,
                1,
                [80, 40],
                [3, 3],
                [2, 2],
                [1, 1],
                [1, 1],
                [1, 1],
            ),
        ];
        for g in &cases {
            let x = rand(g.n * g.c * g.isize(), 1);
            let w = rand(g.c * g.mk(), 2);
            let bias = rand(g.m, 3);
            let want = reference(g, &x, &w, &bias);
            let wp = g.pack_weights(&w);
            assert_eq!(
                unsafe { ConvTransposeGeometry::decode(g.encode().as_ptr()) },
                *g
            );
            for packed in [true, false] {
                let mut scratch = vec![0f32; g.scratch_floats(packed) + 64];
                let mut y = vec![f32::NAN; want.len()];
                let wsrc = if packed { &wp } else { &w };
                unsafe {
                    conv_transpose_f32(
                        g,
                        x.as_ptr(),
                        wsrc.as_ptr(),
                        packed,
                        bias.as_ptr(),
                        f32::NEG_INFINITY,
                        f32::INFINITY,
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                };
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() < 1e-3 * b.abs().max(1.0),
                        "{g:?} packed={packed} [{i}]: {a} vs {b}"
                    );
                }
            }
            let mut scratch = vec![0f32; g.scratch_floats(true) + 64];
            let mut y = vec![f32::NAN; want.len()];
            // A fused clamp.
            unsafe {
                conv_transpose_f32(
                    g,
                    x.as_ptr(),
                    wp.as_ptr(),
                    true,
                    bias.as_ptr(),
                    0.0,
                    0.5,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            for (a, b) in y.iter().zip(&want) {
                assert!(
                    (a - b.clamp(0.0, 0.5)).abs() < 1e-3,
                    "{g:?} clamped: {a} vs {b}"
                );
            }
        }
    }
}
