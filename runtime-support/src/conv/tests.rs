//! Convolution against a direct float64 reference on every path (the ISA cap selects the
//! tiers in CI), with epilogues, packed and raw weights, scratch guards.

use super::*;

use crate::test_rand as rand;

/// Element `i` of a row-major array of extents `dims` as one index per dim.
pub(crate) fn index(i: usize, dims: &[i64]) -> Vec<i64> {
    let mut r = i as i64;
    let mut at = vec![0; dims.len()];
    for (a, &e) in at.iter_mut().zip(dims).rev() {
        *a = r % e;
        r /= e;
    }
    at
}

/// The offset in an input plane of the element that tap `t` of the output at `op` (one
/// index per dim) reads; None in the padding.
pub(crate) fn tap_offset(g: &ConvGeometry, op: &[i64], t: usize) -> Option<usize> {
    let tp = index(t, &g.kernel);
    let mut off = 0i64;
    let mut inside = true;
    for d in 0..g.input.len() {
        let q = op[d] * g.strides[d] + tp[d] * g.dilations[d] - g.pads[d];
        inside &= q >= 0 && q < g.input[d];
        off = off * g.input[d] + q;
    }
    inside.then_some(off as usize)
}

/// Direct convolution: the oracle.
pub(crate) fn reference(g: &ConvGeometry, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
    let (cg, mg, ks, osz, isz) = (g.cg(), g.mg(), g.ksize(), g.osize(), g.isize());
    let mut y = vec![0f32; g.n as usize * g.m as usize * osz];
    for b in 0..g.n as usize {
        for m in 0..g.m as usize {
            let grp = m / mg;
            for o in 0..osz {
                let op = index(o, &g.output);
                let mut acc = bias[m] as f64;
                for c in 0..cg {
                    for t in 0..ks {
                        if let Some(off) = tap_offset(g, &op, t) {
                            acc += x[(b * g.c as usize + grp * cg + c) * isz + off] as f64
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
) -> ConvGeometry<'static> {
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
        output: output.into(),
        strides: strides.into(),
        dilations: dil.into(),
        pads: pads.into(),
        wide_simd: crate::isa::wide_simd(),
        no_winograd: false,
        input_planes: std::borrow::Cow::Borrowed(&[]),
        path: Default::default(),
    }
}

/// `g` with its weights laid out for 512-bit vectors (so Winograd F(4×4, 3×3) for 32-63
/// output channels whatever the running CPU).
fn wide(g: ConvGeometry) -> ConvGeometry {
    ConvGeometry {
        wide_simd: true,
        ..g
    }
}

/// `conv_f32` of `g` into a new output of `len` floats, weights `w` (`packed` or raw),
/// epilogue: `resid` (or null) and the clamp `lo..hi`.
#[allow(clippy::too_many_arguments, reason = "conv_f32's operands")]
fn run(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    packed: bool,
    bias: &[f32],
    resid: *const f32,
    (lo, hi): (f32, f32),
    scratch: &mut [f32],
    len: usize,
) -> Vec<f32> {
    assert!(scratch.len() >= g.scratch_floats(packed));
    // Through the C entry point, the geometry encoded and decoded.
    let p = g.encode();
    assert_eq!(ConvGeometry::decode(&p).as_ref(), Ok(g));
    let clamp = [lo, hi];
    let need = g.scratch(packed).rounded();
    // Sequentially in the caller's scratch, then on 2, 3 and 5 threads: the same bits.
    crate::par::same_bits_on_every_pool(&format!("{g:?}"), |workers, threads| {
        let mut y = vec![f32::NAN; len];
        let mut own = vec![0f32; (need.shared + workers * need.per_worker) / 4];
        let s = if threads.is_null() {
            scratch.as_mut_ptr()
        } else {
            own.as_mut_ptr()
        };
        // SAFETY: p is a sealed blob; x, the weights, bias, y (and residual) are sized from
        // the geometry by the callers; the scratch holds what the workers need (checked).
        let (status, allocations) = crate::allocations_during(|| unsafe {
            onnxc_conv_f32(
                p.as_ptr(),
                x.as_ptr(),
                w.as_ptr(),
                packed as i64,
                bias.as_ptr(),
                resid,
                clamp.as_ptr(),
                y.as_mut_ptr(),
                s,
                threads,
            )
        });
        assert_eq!(status, crate::abi::ONNXC_OK);
        // A convolution of any rank allocates nothing on the calling thread: decoding,
        // scratch, the kernels' tables (a channel-permuted depthwise geometry's plane table
        // too) and weights packed at run time live in the blob and the workspace.
        assert_eq!(
            allocations, 0,
            "{g:?} (packed {packed}): the call allocated"
        );
        y
    })
}

const NO_CLAMP: (f32, f32) = (f32::NEG_INFINITY, f32::INFINITY);

#[test]
fn matches_direct_convolution() {
    // One geometry a line: `geom(n, c, m, group, input, kernel, strides, dilations, pads)`.
    #[rustfmt::skip]
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
        // Past the stack's 7×7 tap table (large-kernel nets): 9×9/1, 13×13/2 (its table in
        // the scratch).
        geom(1, 4, 4, 4, &[20, 24], &[9, 9], &[1, 1], &[1, 1], &[4, 4]),
        geom(1, 3, 3, 3, &[31, 29], &[13, 13], &[2, 2], &[1, 1], &[6, 6]),
        // 5×5/2 (blocked, EfficientNet): partial strips, odd sizes, no padding.
        geom(2, 6, 6, 6, &[23, 41], &[5, 5], &[2, 2], &[1, 1], &[2, 2]),
        geom(1, 3, 3, 3, &[12, 35], &[5, 5], &[2, 2], &[1, 1], &[0, 0]),
        geom(1, 6, 6, 6, &[13, 13], &[3, 3], &[3, 3], &[1, 1], &[1, 1]),
        // Groups as tasks (at least two per worker): pointwise, and 3-D im2col with batch.
        geom(1, 32, 64, 8, &[9, 10], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
        geom(2, 12, 24, 4, &[5, 9, 11], &[3, 3, 3], &[1, 2, 1], &[1, 1, 1], &[1, 1, 0]),
        geom(1, 4, 5, 1, &[30], &[5], &[2], &[1], &[2]),
        geom(1, 2, 3, 1, &[5, 6, 4], &[3, 3, 2], &[1, 2, 1], &[1, 1, 1], &[1, 1, 0]),
        geom(1, 300, 7, 1, &[5, 5], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        // Depthwise in 1-D and 4-D (the plane-by-plane loops of any rank).
        geom(1, 6, 6, 6, &[30], &[5], &[2], &[2], &[3]),
        geom(2, 3, 3, 3, &[3, 4, 5, 6], &[2, 2, 2, 2], &[1, 1, 2, 1], &[1, 2, 1, 1], &[1, 0, 0, 1]),
        // Row-wise im2col beyond 2-D: 3-D with K over two blocks and rows crossing
        // panels, 3-D strided and dilated with batch, 3-D groups with a stride wider
        // than the kernel; 1-D strided and dilated (as run by the runtime's own callers;
        // compiled models run 1-D convs as 2-D ones over one row: the next ones);
        // 4-D (the element-wise packer).
        geom(1, 12, 16, 1, &[6, 9, 21], &[3, 3, 3], &[1, 1, 1], &[1, 1, 1], &[1, 1, 1]),
        geom(2, 5, 8, 1, &[9, 11, 37], &[3, 2, 3], &[2, 1, 2], &[1, 2, 1], &[1, 0, 1]),
        geom(1, 8, 12, 2, &[5, 6, 7], &[2, 3, 3], &[1, 2, 3], &[1, 1, 1], &[0, 1, 1]),
        // 3-D depthwise (2-D slices): 3×3×3, strided and dilated with batch, output
        // slices whose depth taps all fall in the padding.
        geom(1, 5, 5, 5, &[6, 9, 21], &[3, 3, 3], &[1, 1, 1], &[1, 1, 1], &[1, 1, 1]),
        geom(2, 4, 4, 4, &[5, 11, 37], &[3, 3, 3], &[2, 2, 2], &[2, 1, 1], &[3, 1, 1]),
        geom(1, 3, 3, 3, &[3, 8, 8], &[2, 3, 3], &[1, 1, 1], &[1, 1, 1], &[4, 1, 1]),
        geom(1, 16, 24, 1, &[200], &[3], &[2], &[1], &[1]),
        geom(1, 8, 8, 1, &[50], &[3], &[1], &[3], &[3]),
        geom(1, 16, 24, 1, &[1, 200], &[1, 3], &[1, 2], &[1, 1], &[0, 1]),
        geom(1, 8, 8, 8, &[1, 100], &[1, 31], &[1, 1], &[1, 1], &[0, 15]),
        geom(1, 2, 3, 1, &[3, 4, 5, 6], &[2, 2, 2, 2], &[1, 1, 2, 1], &[1, 1, 1, 1], &[1, 0, 0, 1]),
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
        wide(geom(1, 32, 64, 1, &[29, 45], &[3, 3], &[1, 1], &[1, 1], &[1, 1])),
        wide(geom(2, 64, 128, 2, &[30, 33], &[3, 3], &[1, 1], &[1, 1], &[0, 0])),
        wide(geom(1, 40, 70, 1, &[28, 28], &[3, 3], &[1, 1], &[1, 1], &[1, 1])),
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
            output: [4, 4].into(),
            ..geom(1, 24, 64, 1, &[8, 8], &[3, 3], &[2, 2], &[1, 1], &[0, 0])
        },
        // Strided 1×1 as the pointwise convolution of the subsampled input
        // (`ConvGeometry::subsampled`): batch and groups with odd sizes, stride 3 and
        // (2, 1), 1-D and 3-D, a 7×7 output (pixel-major); then an end padding the last
        // output reads (the packing path).
        geom(2, 24, 40, 2, &[15, 13], &[1, 1], &[2, 2], &[1, 1], &[0, 0]),
        geom(1, 16, 24, 1, &[17, 20], &[1, 1], &[3, 2], &[1, 1], &[0, 0]),
        geom(1, 8, 12, 1, &[9, 11], &[1, 1], &[2, 1], &[1, 1], &[0, 0]),
        geom(1, 12, 20, 1, &[41], &[1], &[2], &[1], &[0]),
        geom(2, 6, 10, 1, &[5, 9, 11], &[1, 1, 1], &[2, 3, 2], &[1, 1, 1], &[0, 0, 0]),
        geom(1, 64, 96, 1, &[13, 14], &[1, 1], &[2, 2], &[1, 1], &[0, 0]),
        ConvGeometry {
            output: [5, 5].into(),
            ..geom(1, 8, 16, 1, &[8, 8], &[1, 1], &[2, 2], &[1, 1], &[0, 0])
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
    // Each path is taken by enough cases (on this CPU's tier, where it depends on it).
    let covered = |min: usize, what: &str, pred: &dyn Fn(&ConvGeometry) -> bool| {
        let n = cases.iter().filter(|g| pred(g)).count();
        assert!(n >= min, "{what} is covered ({n} cases, want {min})");
    };
    covered(2, "the channel-major im2col path", &|g| {
        !g.use_winograd()
            && !g.pixel_major()
            && !g.uses_indirect()
            && !g.is_pointwise()
            && !g.is_depthwise()
    });
    let (indirect, wide_tiles) = (gemm::indirect_b_available(), gemm::indirect_wide_tiles());
    if indirect && !wide_tiles {
        covered(4, "the stride-phase indirect path", &|g| {
            g.uses_indirect() && g.strides != [1, 1]
        });
    }
    if indirect {
        covered(4, "the indirect path", &|g| g.indirect_dims().is_some());
    }
    if indirect && wide_tiles {
        covered(3, "the 8 × 48 indirect layout", &|g| {
            g.indirect_dims()
                .is_some_and(|(_, wp, _)| gemm::indirect_rows8(g.mg(), g.output[0] as usize * wp))
        });
    }
    covered(3, "the Winograd path", &|g| g.use_winograd());
    covered(3, "Winograd F(4×4, 3×3)", &|g| {
        g.use_winograd() && g.winograd_variant() == crate::winograd::Variant::F4
    });
    covered(8, "the pixel-major path", &|g| g.pixel_major());
    covered(2, "pixel-major from the input in place", &|g| {
        g.pixel_major() && g.pm_padded_dims().is_none()
    });
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
            let null = std::ptr::null();
            let y = run(
                g,
                &x,
                &wp,
                packed,
                &bias,
                null,
                NO_CLAMP,
                &mut scratch,
                want.len(),
            );
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
        let len = want.len();
        let with_residual = |resid: &[f32], scratch: &mut [f32]| {
            run(
                g,
                &x,
                &wp,
                true,
                &bias,
                resid.as_ptr(),
                (0.0, 0.5),
                scratch,
                len,
            )
        };
        let y = with_residual(&resid, &mut scratch);
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
        let y = with_residual(&resid, &mut scratch);
        for (i, v) in y.iter().enumerate() {
            assert_eq!(v.is_nan(), i % 7 == 3, "{g:?} NaN epilogue [{i}]: {v}");
        }
    }
}

/// A path chosen at compile time (`ConvGeometry::path`: the bound's, for a dim taken at
/// run time) is taken at any size where it applies, and computes the convolution there too:
/// Winograd on maps of one row or a few columns, pixel-major on long rows, the indirect
/// product where it pads many columns. Where it does not apply the blob is refused.
#[test]
fn every_path_a_compiler_may_choose_matches_direct_convolution() {
    use super::ConvPath::*;
    #[rustfmt::skip]
    let cases = [
        geom(1, 32, 64, 1, &[4, 5], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        geom(1, 64, 128, 1, &[2, 7], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        geom(1, 32, 64, 1, &[1, 9], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        geom(1, 40, 64, 1, &[3, 150], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        geom(1, 16, 32, 1, &[8, 3], &[3, 3], &[2, 2], &[1, 1], &[1, 1]),
        geom(1, 24, 40, 1, &[9, 13], &[1, 1], &[2, 2], &[1, 1], &[0, 0]),
        geom(1, 40, 64, 1, &[6, 30], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
        geom(1, 8, 20, 1, &[12, 40], &[3, 3], &[1, 1], &[2, 2], &[2, 2]),
    ];
    let mut taken = std::collections::HashMap::new();
    for g in &cases {
        let x = rand((g.n * g.c) as usize * g.isize(), 1);
        let w = rand(g.m as usize * g.kdim(), 2);
        let bias = rand(g.m as usize, 3);
        let want = reference(g, &x, &w, &bias);
        for path in [WinogradF2, WinogradF4, PixelMajor, Indirect, Packed] {
            let g = ConvGeometry { path, ..g.clone() };
            if g.validate().is_err() {
                assert!(
                    matches!(path, WinogradF2 | WinogradF4 | PixelMajor),
                    "{g:?}"
                );
                continue;
            }
            // The indirect product does not apply to every geometry; the packed path it
            // falls back to reads the same weights.
            let chosen = g.chosen_path();
            assert!(
                chosen == path || (path, chosen) == (Indirect, Packed),
                "{g:?}"
            );
            *taken.entry(format!("{chosen:?}")).or_insert(0) += 1;
            for packed in [true, false] {
                let wp = if packed {
                    g.pack_weights(&w)
                } else {
                    w.clone()
                };
                let mut scratch = vec![0f32; g.scratch_floats(packed) + 64];
                let n = scratch.len();
                scratch[n - 64..].fill(1234.5);
                let y = run(
                    &g,
                    &x,
                    &wp,
                    packed,
                    &bias,
                    std::ptr::null(),
                    NO_CLAMP,
                    &mut scratch,
                    want.len(),
                );
                assert!(
                    scratch[n - 64..].iter().all(|&v| v == 1234.5),
                    "{g:?} wrote past its scratch"
                );
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() < 1e-3,
                        "{g:?} packed={packed} [{i}]: {a} vs {b}"
                    );
                }
            }
        }
    }
    // Every path ran on several geometries (Winograd on a map of one row among them).
    for (path, min) in [
        ("WinogradF2", 4),
        ("WinogradF4", 4),
        ("PixelMajor", 4),
        ("Indirect", 4),
        ("Packed", 8),
    ] {
        assert!(
            taken.get(path).copied().unwrap_or(0) >= min,
            "{path}: {taken:?}"
        );
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
            input_planes: perm
                .iter()
                .map(|&p| (p * isz) as i64)
                .collect::<Vec<_>>()
                .into(),
            ..g.clone()
        };
        assert_eq!(ConvGeometry::decode(&gp.encode()), Ok(gp.clone()));
        let mut scratch = vec![0f32; gp.scratch_floats(true)];
        let (wp, null) = (gp.pack_weights(&w), std::ptr::null());
        let y = run(
            &gp,
            &x,
            &wp,
            true,
            &bias,
            null,
            NO_CLAMP,
            &mut scratch,
            want.len(),
        );
        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-3, "{gp:?} [{i}]: {a} vs {b}");
        }
    }
}

/// Corrupt blobs are refused by `decode` and by the entry point, which then writes nothing.
#[test]
fn refuses_corrupt_blobs() {
    let g = geom(1, 4, 6, 2, &[5, 7], &[3, 3], &[2, 1], &[1, 2], &[1, 1]);
    let good = g.encode();
    assert_eq!(ConvGeometry::decode(&good), Ok(g.clone()));
    // Word k of the body (after the length word) set to v. Body: nsp, n, c, m, group, flags,
    // then input, kernel, output, strides, dilations, pads (2 words each).
    let with = |k: usize, v: i64| crate::params::with_word(&good, k, v);
    let (input, kernel, output, strides, dilations, pads) = (6, 8, 10, 12, 14, 16);
    // Depthwise with channel planes: the planes must lie inside the image.
    let dw = ConvGeometry {
        input_planes: vec![0, 35, 70, 105].into(),
        ..geom(1, 4, 4, 4, &[5, 7], &[3, 3], &[1, 1], &[1, 1], &[1, 1])
    };
    let dw_good = dw.encode();
    assert_eq!(ConvGeometry::decode(&dw_good), Ok(dw.clone()));
    let dw_with = |k: usize, v: i64| {
        let mut b = dw_good.clone();
        b[1 + k] = v;
        b
    };
    let bad = [
        crate::params::short_blob(&good),
        crate::params::long_blob(&good),
        with(0, 0),
        with(0, 9),
        with(0, -1),
        with(0, 3),
        with(1, -1),
        with(2, -4),
        with(4, 0),
        with(4, 3),
        with(5, 8),
        with(5, 4),
        with(input, 0),
        with(input + 1, -7),
        with(kernel, 0),
        with(output, 1),
        with(output + 1, 0),
        with(strides, 0),
        with(dilations + 1, 0),
        with(pads, -1),
        with(pads + 1, 1 << 40),
        with(input, 1 << 30),
        // Consistent dims whose planes do not fit in memory (4 channels of 2^62 floats).
        {
            let mut b = good.clone();
            let max = crate::params::MAX_EXTENT;
            for (at, v) in [
                (input, max),
                (kernel, 1),
                (output, max),
                (strides, 1),
                (pads, 0),
            ] {
                b[1 + at] = v;
                b[1 + at + 1] = v;
            }
            b
        },
        dw_with(6 + 12, 36 * 4),
        dw_with(6 + 12 + 3, -1),
        crate::params::short_blob(&dw_good),
        {
            let mut b = good.clone();
            b[1 + 5] = 4;
            b.extend([0, 1, 2, 3]);
            b[0] += 4;
            b
        },
    ];
    for (i, b) in bad.iter().enumerate() {
        assert!(ConvGeometry::decode(b).is_err(), "case {i}: {b:?}");
    }
    assert!(
        ConvGeometry::decode(&good[..good.len() - 1]).is_err(),
        "truncated"
    );
    let x = [1f32; 4 * 35];
    let w = [1f32; 6 * 2 * 9];
    let mut y = [8f32; 6 * 64];
    let mut scratch = vec![0f32; 1 << 16];
    for (i, b) in bad.iter().enumerate() {
        // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
        let status = unsafe {
            onnxc_conv_f32(
                b.as_ptr(),
                x.as_ptr(),
                w.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS, "case {i}");
    }
    assert!(y.iter().all(|&v| v == 8.0), "the output was written");
}
