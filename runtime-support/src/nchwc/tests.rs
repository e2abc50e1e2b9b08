use super::*;
use crate::pool::PoolGeometry;
use crate::simd::{self, On, Simd, Walk};

use crate::test_rand as rand;

/// Direct grouped NCHW convolution in f64 with the epilogue: the oracle.
fn reference(
    g: &BlockedConv,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    res: &[f32],
    lo: f32,
    hi: f32,
) -> Vec<f32> {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let mut y = vec![0f32; g.n * g.m * oh * ow];
    for img in 0..g.n {
        for m in 0..g.m {
            let gi = m / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias[m] as f64;
                    for c in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * g.strides[0] + ky * g.dilations[0]) as i64
                                    - g.pads[0] as i64;
                                let ix = (ox * g.strides[1] + kx * g.dilations[1]) as i64
                                    - g.pads[1] as i64;
                                if iy < 0 || ix < 0 || iy >= ih as i64 || ix >= iw as i64 {
                                    continue;
                                }
                                let ch = gi * cg + c;
                                acc += x[((img * g.c + ch) * ih + iy as usize) * iw + ix as usize]
                                    as f64
                                    * w[((m * cg + c) * kh + ky) * kw + kx] as f64;
                            }
                        }
                    }
                    let o = ((img * g.m + m) * oh + oy) * ow + ox;
                    y[o] = crate::clamp_ep(acc as f32 + res[o], lo, hi);
                }
            }
        }
    }
    y
}

/// A geometry of `[n, c, m, group]` over an `hw` input (the output follows).
fn geom(
    [n, c, m, group]: [usize; 4],
    hw: [usize; 2],
    k: [usize; 2],
    s: usize,
    pad: usize,
    dil: usize,
) -> BlockedConv {
    let out = |d: usize| (hw[d] + 2 * pad - (k[d] - 1) * dil - 1) / s + 1;
    BlockedConv {
        n,
        c,
        m,
        group,
        input: hw,
        output: [out(0), out(1)],
        kernel: k,
        strides: [s, s],
        dilations: [dil, dil],
        pads: [pad, pad],
        plain_input: false,
        pad_planes: true,
    }
}

/// `g` reading a plain NCHW input.
fn plain_input(g: BlockedConv) -> BlockedConv {
    BlockedConv {
        plain_input: true,
        ..g
    }
}

fn check(g: &BlockedConv) {
    assert!(g.supported(), "{g:?}");
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let x = rand(g.n * g.c * ih * iw, 1);
    let w = rand(g.m * g.c / g.group * g.ksize(), 2);
    let bias = rand(g.m, 3);
    let res = rand(g.n * g.m * oh * ow, 4);
    let want = reference(g, &x, &w, &bias, &res, -0.5, 3.0);
    let mut xb = if g.plain_input {
        x.clone()
    } else {
        vec![0f32; x.len()]
    };
    let mut rb = vec![0f32; res.len()];
    let mut yb = vec![f32::NAN; res.len()];
    let wp = g.pack_weights(&w);
    assert_eq!(wp.len(), g.packed_weights_len());
    let need = g.scratch().rounded();
    // SAFETY: every buffer is sized from the geometry (blocked ones rounded up to CB channels);
    // scratch holds what the workers need; p is a sealed blob.
    unsafe {
        if !g.plain_input {
            to_blocked(x.as_ptr(), g.n, g.c, ih * iw, xb.as_mut_ptr());
        }
        to_blocked(res.as_ptr(), g.n, g.m, oh * ow, rb.as_mut_ptr());
        // Through the C entry point, the geometry encoded and decoded, sequentially and on
        // 2, 3 and 5 threads: the same bits.
        let p = g.encode();
        assert_eq!(BlockedConv::decode(&p).as_ref(), Ok(g));
        for (workers, threads) in crate::par::test_threads() {
            let mut scratch = vec![f32::NAN; (need.shared + workers * need.per_worker) / 4];
            let mut y = vec![f32::NAN; res.len()];
            let status = onnxc_conv_nchwc_f32(
                p.as_ptr(),
                xb.as_ptr(),
                wp.as_ptr(),
                bias.as_ptr(),
                rb.as_ptr(),
                [-0.5f32, 3.0].as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                threads,
            );
            assert_eq!(status, crate::abi::ONNXC_OK);
            if threads.is_null() {
                yb = y;
            } else {
                assert!(
                    yb.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{g:?}: {workers} threads differ from one"
                );
            }
        }
    }
    let compare = |isa: &str, yb: &[f32]| {
        let mut y = vec![0f32; yb.len()];
        // SAFETY: yb holds the blocked output of g, y its plain form.
        unsafe { from_blocked(yb.as_ptr(), g.n, g.m, oh * ow, y.as_mut_ptr()) };
        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{isa} {g:?}: element {i}: got {a}, want {b}"
            );
        }
    };
    compare("dispatched", &yb);
    if g.is_depthwise() {
        let images = Images {
            g,
            x: &xb,
            w: &wp,
            bias: &bias,
            residual: &rb,
        };
        // SAFETY: the walk's buffers are its own.
        unsafe { simd::for_each_isa_in(8..=8, images, |isa, yb| compare(isa, &yb)) };
    }
}

/// The depthwise convolution of every image with its walk on the implementation `run` is
/// given (the epilogue `check`'s).
#[derive(Clone)]
struct Images<'a> {
    g: &'a BlockedConv,
    x: &'a [f32],
    w: &'a [f32],
    bias: &'a [f32],
    residual: &'a [f32],
}

impl Walk for Images<'_> {
    type Out = Vec<f32>;
    unsafe fn run<S: Simd>(self, s: S) -> Vec<f32> {
        let g = self.g;
        let (iplane, oplane) = (g.input[0] * g.input[1] * CB, g.output[0] * g.output[1] * CB);
        let mut y = vec![f32::NAN; self.residual.len()];
        let mut scratch = vec![f32::NAN; g.scratch_floats()];
        for img in 0..g.n {
            let ep = Epilogue {
                bias: self.bias.as_ptr(),
                residual: self.residual[img * g.m / CB * oplane..].as_ptr(),
                lo: -0.5,
                hi: 3.0,
            };
            // SAFETY: image img of each buffer.
            unsafe {
                depthwise(
                    g,
                    0..g.c / CB,
                    self.x[img * g.c / CB * iplane..].as_ptr(),
                    iplane,
                    self.w.as_ptr(),
                    &ep,
                    y[img * g.m / CB * oplane..].as_mut_ptr(),
                    oplane,
                    scratch.as_mut_ptr(),
                    &On(s),
                )
            };
        }
        y
    }
}

#[test]
fn matches_direct_convolution() {
    for g in [
        geom([1, 8, 8, 1], [5, 7], [1, 1], 1, 0, 1),
        geom([1, 16, 24, 1], [9, 9], [1, 1], 1, 0, 1),
        geom([2, 32, 16, 1], [13, 11], [3, 3], 1, 1, 1),
        geom([1, 16, 40, 1], [14, 14], [1, 1], 2, 0, 1),
        // Strided 1×1 convolutions run on a subsampled copy: odd planes, stride 3, batch 2.
        geom([1, 16, 24, 1], [15, 13], [1, 1], 2, 0, 1),
        geom([1, 8, 16, 1], [10, 10], [1, 1], 3, 0, 1),
        geom([2, 16, 16, 1], [9, 9], [1, 1], 2, 0, 1),
        // …but not when the last positions fall in padding at the end (found by the fuzz:
        // the copy read past the plane): strides 2×3, grouped, one column of end padding.
        BlockedConv {
            strides: [2, 3],
            output: [11, 8],
            ..geom([2, 32, 16, 2], [21, 21], [1, 1], 1, 0, 1)
        },
        geom([1, 24, 32, 1], [15, 15], [3, 3], 2, 1, 1),
        geom([1, 8, 16, 1], [12, 12], [3, 3], 1, 2, 2),
        geom([1, 16, 8, 1], [7, 7], [5, 5], 1, 2, 1),
        geom([1, 8, 16, 1], [20, 20], [7, 7], 2, 3, 1),
        geom([1, 16, 16, 1], [6, 9], [1, 3], 1, 1, 1),
        // Last tiles rebalanced: 20 positions (6+6+4+4), 49 (…+4+3), 81 (…+5+4); and 2
        // positions, a single short tile.
        geom([1, 16, 16, 1], [5, 4], [1, 1], 1, 0, 1),
        geom([1, 16, 24, 1], [7, 7], [3, 3], 1, 1, 1),
        geom([1, 8, 16, 1], [1, 2], [1, 1], 1, 0, 1),
        // Several depth passes (K = 80·9 > 256) and panel groups.
        geom([1, 80, 48, 1], [10, 10], [3, 3], 1, 1, 1),
        geom([1, 512, 40, 1], [4, 4], [1, 1], 1, 0, 1),
        // Several chunks of positions per pass (900 positions, 128 per chunk) and a
        // shallow one (1600 positions in chunks of 1024).
        geom([1, 64, 16, 1], [30, 30], [3, 3], 1, 1, 1),
        geom([1, 32, 24, 1], [40, 40], [1, 1], 1, 0, 1),
        // Strided convolutions over padded blocked inputs read them in place, the taps
        // outside skipped per tile (`Border`): planes in several chunks, tiles spanning row
        // ends, odd planes, padding wider than the window's reach (windows with one valid
        // tap), end padding beyond the start's (the output implies more), dilation, depth
        // passes, groups and batch 2, a stride in one dim only.
        geom([1, 16, 32, 1], [80, 81], [3, 3], 2, 1, 1),
        geom([1, 16, 32, 1], [41, 39], [3, 3], 2, 1, 1),
        geom([1, 8, 16, 1], [9, 11], [3, 3], 2, 2, 1),
        BlockedConv {
            output: [9, 10],
            ..geom([1, 8, 16, 1], [15, 17], [3, 3], 2, 1, 1)
        },
        geom([1, 16, 8, 1], [17, 17], [3, 3], 2, 3, 3),
        geom([1, 40, 24, 1], [23, 23], [3, 3], 2, 1, 1),
        geom([2, 32, 32, 2], [19, 19], [5, 5], 2, 2, 1),
        BlockedConv {
            strides: [1, 2],
            output: [15, 8],
            ..geom([1, 16, 16, 1], [15, 15], [3, 3], 1, 1, 1)
        },
        // Groups of whole blocks (ShuffleNet-style), with an odd number of blocks per group.
        geom([1, 48, 48, 3], [9, 9], [1, 1], 1, 0, 1),
        geom([2, 16, 32, 2], [8, 8], [3, 3], 2, 1, 1),
        // Depthwise, strides 1 and 2, dilation, no padding.
        geom([1, 16, 16, 16], [11, 11], [3, 3], 1, 1, 1),
        geom([2, 24, 24, 24], [14, 13], [3, 3], 2, 1, 1),
        geom([1, 8, 8, 8], [9, 9], [5, 5], 1, 4, 2),
        geom([1, 8, 8, 8], [9, 9], [3, 3], 1, 0, 1),
        // Depthwise planes too large to pad into scratch: border outputs read their valid
        // taps, interior ones the 3x3 row kernel.
        geom([1, 16, 16, 16], [48, 50], [3, 3], 1, 1, 1),
        geom([1, 8, 8, 8], [49, 47], [3, 3], 2, 1, 1),
        geom([1, 8, 8, 8], [46, 46], [5, 5], 2, 2, 1),
        geom([1, 8, 8, 8], [46, 46], [3, 3], 1, 2, 2),
        // First convolutions reading plain NCHW input: RGB stems of several shapes, a
        // single channel, a dilated one, depth passes (5·81 > 256) and batch 2.
        plain_input(geom([1, 3, 16, 1], [23, 23], [7, 7], 2, 3, 1)),
        plain_input(geom([2, 3, 24, 1], [20, 19], [3, 3], 2, 1, 1)),
        plain_input(geom([1, 1, 8, 1], [12, 12], [3, 3], 1, 1, 1)),
        plain_input(geom([1, 3, 32, 1], [31, 31], [11, 11], 4, 2, 1)),
        plain_input(geom([1, 5, 16, 1], [15, 15], [9, 9], 1, 4, 1)),
        plain_input(geom([1, 4, 8, 1], [13, 13], [3, 3], 1, 2, 2)),
        plain_input(geom([1, 12, 16, 1], [9, 9], [1, 1], 1, 0, 1)),
    ] {
        check(&g);
    }
}

#[test]
fn encode_round_trips() {
    let g = geom([2, 16, 32, 2], [8, 9], [3, 1], 2, 1, 1);
    assert_eq!(BlockedConv::decode(&g.encode()), Ok(g));
}

/// Corrupt blobs are refused by `decode` and by the entry points, which then write nothing.
#[test]
fn refuses_corrupt_blobs() {
    let g = geom([1, 16, 16, 1], [9, 9], [3, 3], 2, 1, 1);
    let good = g.encode();
    // Body: n, c, m, group, ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw, plain_input.
    let with = |k: usize, v: i64| crate::params::with_word(&good, k, v);
    let max = crate::params::MAX_EXTENT;
    let bad = [
        crate::params::short_blob(&good),
        crate::params::long_blob(&good),
        with(0, -1),
        with(1, 12),
        with(3, 0),
        with(3, 3),
        with(4, 0),
        with(6, 3),
        with(7, 0),
        with(8, 0),
        with(10, 0),
        with(12, 0),
        with(14, -1),
        with(16, 2),
        with(0, max + 1),
        {
            let mut b = good.clone();
            for (at, v) in [(4, max), (6, max), (8, 1), (10, 1), (14, 0)] {
                b[1 + at] = v;
                b[1 + at + 1] = v;
            }
            b
        },
    ];
    let x = [1f32; 16 * 81];
    let w = [1f32; 16 * 16 * 9];
    let mut y = [6f32; 16 * 64];
    let mut scratch = vec![0f32; 1 << 16];
    for (i, b) in bad.iter().enumerate() {
        assert!(BlockedConv::decode(b).is_err(), "case {i}");
        // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
        let status = unsafe {
            onnxc_conv_nchwc_f32(
                b.as_ptr(),
                x.as_ptr(),
                w.as_ptr(),
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
    // The blocked pool refuses what the plain one does (`pool::tests`), and blocked planes
    // too large for memory.
    let pg = crate::pool::tests::geometry(&crate::pool::tests::CASES[0], 2);
    // 4 blocks of 2^60 positions: 2^62 floats as plain planes, 2^65 blocked.
    let too_many = PoolGeometry {
        kind: 0,
        count_include_pad: false,
        p: 0,
        planes: 4,
        input: [1 << 30, 1 << 30],
        output: [1 << 30, 1 << 30],
        kernel: [1, 1],
        strides: [1, 1],
        dilations: [1, 1],
        pads_begin: [0, 0],
        pads_end: [0, 0],
    };
    assert_eq!(too_many.validate(), Ok(()));
    for b in [
        crate::params::seal(pg.encode()[1..].iter().copied().chain([0])),
        {
            let mut b = pg.encode();
            b[1] = 5;
            b
        },
        too_many.encode(),
    ] {
        // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
        let status = unsafe {
            pool::onnxc_pool_nchwc_f32(b.as_ptr(), x.as_ptr(), y.as_mut_ptr(), std::ptr::null())
        };
        assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS);
    }
    // The reorder's planes: one per channel, each inside the image; counts not negative.
    let planes = [0i64, 9, 18];
    assert_eq!(
        reorder::decode_planes(&reorder::encode_planes(&planes), 3, 9),
        Ok(&planes[..])
    );
    for (p, n, c, hw) in [
        (&[0i64, 9][..], 1, 3, 9),
        (&[0, 9, 19], 1, 3, 9),
        (&[0, -1, 18], 1, 3, 9),
        (&planes, -1, 3, 9),
        (&planes, 1, 3, -9),
        (&planes, 1 << 40, 3, 1 << 30),
    ] {
        let b = reorder::encode_planes(p);
        // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
        let status = unsafe {
            onnxc_nchw_to_nchwc(
                x.as_ptr(),
                n,
                c,
                hw,
                y.as_mut_ptr(),
                b.as_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS, "{p:?} {n} {c} {hw}");
    }
    assert!(y.iter().all(|&v| v == 6.0), "the output was written");
}

#[test]
fn supported_geometries() {
    assert!(!geom([1, 3, 64, 1], [9, 9], [3, 3], 1, 1, 1).supported());
    assert!(!geom([1, 12, 16, 1], [9, 9], [1, 1], 1, 0, 1).supported());
    assert!(!geom([1, 24, 24, 6], [9, 9], [1, 1], 1, 0, 1).supported());
    assert!(geom([1, 24, 24, 3], [9, 9], [1, 1], 1, 0, 1).supported());
    assert!(!geom([1, 8, 16, 8], [9, 9], [3, 3], 1, 1, 1).supported());
    assert!(geom([1, 8, 8, 8], [9, 9], [3, 3], 1, 1, 1).supported());
    assert!(plain_input(geom([1, 3, 64, 1], [9, 9], [3, 3], 1, 1, 1)).supported());
    assert!(!plain_input(geom([1, 3, 60, 1], [9, 9], [3, 3], 1, 1, 1)).supported());
    assert!(!plain_input(geom([1, 16, 16, 2], [9, 9], [3, 3], 1, 1, 1)).supported());
}

#[test]
fn gathering_reorder_permutes_channels() {
    // A ShuffleNet channel shuffle (groups 4 × 6 channels, transposed) and a reversal of 13
    // channels (a partial block), batch 2.
    for (n, c, hw, perm) in [
        (
            1,
            24,
            50,
            (0..24).map(|i| (i % 4) * 6 + i / 4).collect::<Vec<usize>>(),
        ),
        (2, 13, 17, (0..13).rev().collect()),
    ] {
        let x = rand(n * c * hw, 11);
        let planes: Vec<i64> = perm.iter().map(|&p| (p * hw) as i64).collect();
        let mut permuted = vec![0f32; x.len()];
        for img in 0..n {
            for (ci, &p) in perm.iter().enumerate() {
                for q in 0..hw {
                    permuted[(img * c + ci) * hw + q] = x[(img * c + p) * hw + q];
                }
            }
        }
        let len = n * c.div_ceil(CB) * CB * hw;
        let (mut got, mut want) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        let blob = reorder::encode_planes(&planes);
        // SAFETY: x and permuted hold n·c·hw floats, got and want len = n·⌈c/CB⌉·CB·hw; blob is
        // the sealed blob of c planes inside the image.
        unsafe {
            let (n, c, hw) = (n as i64, c as i64, hw as i64);
            // Sequentially and on 2, 3 and 5 threads.
            for (_, threads) in crate::par::test_threads() {
                got.fill(f32::NAN);
                let status = onnxc_nchw_to_nchwc(
                    x.as_ptr(),
                    n,
                    c,
                    hw,
                    got.as_mut_ptr(),
                    blob.as_ptr(),
                    threads,
                );
                assert_eq!(status, crate::abi::ONNXC_OK);
            }
            to_blocked(
                permuted.as_ptr(),
                n as usize,
                c as usize,
                hw as usize,
                want.as_mut_ptr(),
            );
        }
        assert_eq!(got, want, "n={n} c={c} hw={hw}");
    }
}

#[test]
fn reorders_round_trip_with_partial_blocks() {
    for (n, c, hw) in [(1, 8, 64), (2, 13, 37), (1, 3, 5), (1, 24, 49)] {
        let x = rand(n * c * hw, 7);
        let mut b = vec![f32::NAN; n * c.div_ceil(CB) * CB * hw];
        let mut y = vec![f32::NAN; x.len()];
        // SAFETY: x and y hold n·c·hw floats, b n·⌈c/CB⌉·CB·hw.
        unsafe {
            to_blocked(x.as_ptr(), n, c, hw, b.as_mut_ptr());
            from_blocked(b.as_ptr(), n, c, hw, y.as_mut_ptr());
        }
        assert_eq!(x, y);
        let cb = c.div_ceil(CB);
        for img in 0..n {
            for ch in 0..cb * CB {
                for p in 0..hw {
                    let got = b[((img * cb + ch / CB) * hw + p) * CB + ch % CB];
                    let want = if ch < c {
                        x[(img * c + ch) * hw + p]
                    } else {
                        0.0
                    };
                    assert_eq!(got, want, "n={n} c={c} hw={hw} ch={ch} p={p}");
                }
            }
        }
    }
}

#[test]
fn pooling_matches_the_plain_kernel() {
    for case in crate::pool::tests::CASES {
        let (n, c) = (2usize, 16usize);
        let plain = crate::pool::tests::geometry(case, (n * c) as i64);
        let blocked = PoolGeometry {
            planes: (n * c / CB) as i64,
            ..plain.clone()
        };
        let kind = plain.kind;
        let [input, output, kernel, strides, dilations, pads_begin] = plain.window();
        let (ihw, ohw) = (
            (input[0] * input[1]) as usize,
            (output[0] * output[1]) as usize,
        );
        let mut x = rand(n * c * ihw, 9);
        if kind == 0 {
            // NaN taps make their windows NaN.
            for v in x.iter_mut().step_by(37) {
                *v = f32::NAN;
            }
        }
        let mut want = vec![0f32; n * c * ohw];
        let mut scratch = vec![0f32; plain.scratch_floats()];
        // SAFETY: x and want are sized from plain, scratch holds plain.scratch_floats().
        unsafe {
            crate::pool::pool2d_f32(
                crate::par::Par::SEQ,
                &plain,
                x.as_ptr(),
                want.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        let mut xb = vec![0f32; x.len()];
        let mut yb = vec![f32::NAN; want.len()];
        let mut y = vec![0f32; want.len()];
        // SAFETY: x, xb, yb, y and want are sized from the geometries (c a multiple of CB here);
        // p is a sealed blob.
        unsafe {
            to_blocked(x.as_ptr(), n, c, ihw, xb.as_mut_ptr());
            let p = blocked.encode();
            // Sequentially and on 2, 3 and 5 threads: the same bits.
            for (workers, threads) in crate::par::test_threads() {
                let mut yt = vec![f32::NAN; want.len()];
                let status =
                    pool::onnxc_pool_nchwc_f32(p.as_ptr(), xb.as_ptr(), yt.as_mut_ptr(), threads);
                assert_eq!(status, crate::abi::ONNXC_OK);
                if threads.is_null() {
                    yb = yt;
                } else {
                    assert!(
                        yb.iter().zip(&yt).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{blocked:?}: {workers} threads differ from one"
                    );
                }
            }
            from_blocked(yb.as_ptr(), n, c, ohw, y.as_mut_ptr());
        }
        // Max: a window with a NaN tap is NaN, in both kernels; checked here independently.
        let window_nan = |i: usize| {
            let (pl, o) = (i / ohw, (i % ohw) as i64);
            let (oy, ox) = (o / output[1], o % output[1]);
            (0..kernel[0]).any(|ky| {
                let iy = oy * strides[0] - pads_begin[0] + ky * dilations[0];
                (0..kernel[1]).any(|kx| {
                    let ix = ox * strides[1] - pads_begin[1] + kx * dilations[1];
                    (0..input[0]).contains(&iy)
                        && (0..input[1]).contains(&ix)
                        && x[pl * ihw + (iy * input[1] + ix) as usize].is_nan()
                })
            })
        };
        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
            let nan = kind == 0 && window_nan(i);
            assert!(
                if nan {
                    a.is_nan() && b.is_nan()
                } else {
                    // Equal infinities: windows wholly in the padding.
                    a == b || (a - b).abs() <= 1e-5 * (1.0 + b.abs())
                },
                "{plain:?}: element {i}: got {a}, want {} {b}",
                if nan { "NaN, not" } else { "" }
            );
        }
    }
}

#[test]
fn image_cuts_cover_the_work_in_even_tasks() {
    for npos in [1, 5, 6, 49, 196, 784, 3136, 12100] {
        for max_chunk in [6, 126, 252, 510, 2046] {
            for (group, panels) in [(1, 1), (1, 4), (1, 16), (2, 8), (3, 2), (32, 1)] {
                for workers in [1, 2, 3, 4, 16] {
                    let t = if workers == 1 { 1 } else { 2 * workers };
                    let c = ImageCut::of(npos, max_chunk, group, panels, t, workers);
                    let case = format!("{npos} {max_chunk} {group} {panels} {workers}: {c:?}");
                    // Chunks of whole tiles, no longer than the bound, covering the positions.
                    assert!(
                        c.chunk_pos.is_multiple_of(ROWS) && c.chunk_pos <= max_chunk,
                        "{case}"
                    );
                    assert!(c.chunks * c.chunk_pos >= npos, "{case}");
                    assert!((c.chunks - 1) * c.chunk_pos < npos, "{case}");
                    assert!(c.splits * c.per >= panels && (c.splits - 1) * c.per < panels);
                    if workers == 1 {
                        assert_eq!(
                            (c.chunks, c.splits),
                            (npos.div_ceil(max_chunk), 1),
                            "{case}"
                        );
                        continue;
                    }
                    // The pool runs each worker's block of consecutive tasks: the largest
                    // block's positions × panels against an even share of the work.
                    let tasks = group * c.chunks * c.splits;
                    let cost = |i: usize| {
                        let (chunk, sp) = (i / c.splits % c.chunks, i % c.splits);
                        let q = c.chunk_pos.min(npos - chunk * c.chunk_pos);
                        q * c.per.min(panels - sp * c.per)
                    };
                    let block = |w: usize| {
                        (w * tasks).div_ceil(workers)..((w + 1) * tasks).div_ceil(workers)
                    };
                    let most = (0..workers)
                        .map(|w| block(w).map(cost).sum::<usize>())
                        .max();
                    let share = (group * npos * panels) as f64 / workers as f64;
                    let imbalance = most.unwrap() as f64 / share;
                    // The worst of these: 49 positions of one panel as 3 chunks of
                    // 18, 18 and 13 on 2 workers (1.47); 17 tasks on 16 workers (1.96).
                    let bound = if workers == 2 { 1.5 } else { 2.0 };
                    assert!(tasks < workers || imbalance <= bound, "{case}: {imbalance}");
                }
            }
        }
    }
    // ResNet-50's 1×1 convolutions over 14 × 14 positions on 2 workers: four tasks of 102
    // or 94 positions × 8 panels, not 126, 126 | 70, 70.
    let c = ImageCut::of(196, 126, 1, 16, 4, 2);
    assert_eq!((c.chunk_pos, c.chunks, c.splits, c.per), (102, 2, 2, 8));
}
