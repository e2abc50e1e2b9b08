//! The pooling kernel against a direct definition, and the refusal of corrupt parameters.

use super::*;

/// A pooling case: kind, count_include_pad, p, input, kernel, strides, dilations, pads
/// begin, pads end.
pub(crate) type Case = (
    i64,
    bool,
    i64,
    [i64; 2],
    [i64; 2],
    [i64; 2],
    [i64; 2],
    [i64; 2],
    [i64; 2],
);

/// The cases of this test and the blocked (NCHWc) pool's, which runs them against this
/// kernel.
#[rustfmt::skip]
pub(crate) const CASES: &[Case] = &[
(0, false, 0, [111, 111], [3, 3], [2, 2], [1, 1], [0, 0], [0, 0]),
(0, false, 0, [14, 14], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
(1, false, 0, [28, 28], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
(1, true, 0, [9, 13], [3, 2], [2, 3], [1, 1], [1, 0], [2, 1]),
(0, false, 0, [10, 12], [2, 3], [1, 2], [2, 2], [1, 2], [0, 1]),
(2, false, 2, [8, 9], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
(2, false, 3, [7, 7], [2, 2], [1, 2], [1, 1], [0, 0], [1, 1]),
(2, false, 3, [7, 7], [2, 2], [2, 2], [1, 1], [0, 0], [1, 1]),
(1, false, 0, [7, 7], [7, 7], [1, 1], [1, 1], [0, 0], [0, 0]),
(0, false, 0, [5, 6], [3, 3], [1, 3], [1, 1], [0, 0], [2, 1]),
// Row by row: strided, large outputs.
(0, false, 0, [112, 112], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
(1, true, 0, [70, 70], [3, 3], [2, 2], [1, 1], [1, 1], [2, 2]),
(1, false, 0, [70, 70], [3, 3], [2, 2], [1, 1], [1, 1], [2, 2]),
// The AVX-512 row kernel: horizontal stride 1 under a vertical stride, vertical
// dilation, outputs narrower than a vector, 2×2/2, extra end padding (ceil mode).
(0, false, 0, [20, 37], [3, 3], [2, 1], [1, 1], [1, 1], [1, 1]),
(0, false, 0, [21, 40], [3, 3], [2, 2], [2, 1], [0, 1], [0, 1]),
(0, false, 0, [13, 13], [3, 3], [2, 2], [1, 1], [0, 0], [0, 0]),
(0, false, 0, [16, 34], [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
(1, false, 0, [27, 27], [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
(1, true, 0, [33, 50], [5, 4], [3, 2], [1, 1], [2, 1], [2, 2]),
// The register row kernels: the widest taps they take (9 at stride 1, 17 at
// stride 2), windows taller than wide and the reverse, padding on both sides of
// rows that end inside a vector, windows whose rows are all padding at the top.
(1, true, 0, [12, 40], [3, 9], [1, 1], [1, 1], [1, 4], [1, 4]),
(0, false, 0, [11, 45], [2, 17], [2, 2], [1, 1], [0, 8], [1, 8]),
(1, false, 0, [30, 19], [5, 1], [1, 2], [1, 1], [2, 0], [2, 0]),
(0, false, 0, [9, 23], [1, 5], [1, 1], [1, 1], [0, 2], [0, 2]),
(1, true, 0, [6, 17], [4, 4], [2, 2], [1, 1], [3, 3], [3, 3]),
// From the blocked (NCHWc) pool's test: max, average (with padding counted) and Lp
// pools, dilation; Inception's stride-1 max pools; rows wider than one chunk of columns
// (several chunks per row, stride 1 and 2); stride above the kernel (not separable);
// windows wholly in the padding (pads ≥ kernel); a kernel wider than a chunk.
(0, false, 0, [13, 13], [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
(1, false, 0, [14, 14], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
(1, true, 0, [9, 7], [3, 2], [2, 1], [1, 1], [1, 0], [1, 1]),
(0, false, 0, [10, 10], [3, 3], [1, 1], [2, 2], [2, 2], [2, 2]),
(2, false, 2, [8, 8], [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
(0, false, 0, [28, 28], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
(0, false, 0, [5, 600], [3, 3], [1, 2], [1, 1], [1, 1], [1, 1]),
(1, false, 0, [4, 530], [2, 3], [1, 1], [1, 1], [0, 1], [1, 1]),
(1, true, 0, [4, 530], [2, 3], [1, 1], [1, 1], [0, 1], [1, 1]),
(0, false, 0, [9, 9], [2, 2], [3, 3], [1, 1], [0, 0], [1, 1]),
(0, false, 0, [6, 6], [2, 2], [1, 1], [2, 1], [3, 3], [3, 3]),
(1, true, 0, [6, 6], [2, 2], [1, 1], [1, 1], [3, 3], [3, 3]),
(0, false, 0, [2, 300], [1, 280], [1, 7], [1, 1], [0, 0], [0, 0]),
];

/// The geometry of `case` over `planes` planes.
pub(crate) fn geometry(case: &Case, planes: i64) -> PoolGeometry {
    let &(kind, count_include_pad, p, input, kernel, strides, dilations, pads_begin, pads_end) =
        case;
    let out = |d: usize| {
        (input[d] + pads_begin[d] + pads_end[d] - (kernel[d] - 1) * dilations[d] - 1) / strides[d]
            + 1
    };
    PoolGeometry {
        kind,
        count_include_pad,
        p,
        planes,
        input,
        output: [out(0), out(1)],
        kernel,
        strides,
        dilations,
        pads_begin,
        pads_end,
    }
}

fn reference(g: &PoolGeometry, x: &[f32]) -> Vec<f32> {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let mut y = Vec::new();
    for plane in 0..g.planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let (mut acc, mut count) = (if g.kind == 0 { f32::NEG_INFINITY } else { 0.0 }, 0);
                for ky in 0..g.kernel[0] {
                    for kx in 0..g.kernel[1] {
                        let iy = oy * g.strides[0] + ky * g.dilations[0] - g.pads_begin[0];
                        let ix = ox * g.strides[1] + kx * g.dilations[1] - g.pads_begin[1];
                        let inside = iy >= 0 && iy < ih && ix >= 0 && ix < iw;
                        let in_pads = iy >= -g.pads_begin[0]
                            && iy < ih + g.pads_end[0]
                            && ix >= -g.pads_begin[1]
                            && ix < iw + g.pads_end[1];
                        if inside || (g.count_include_pad && in_pads) {
                            count += 1;
                        }
                        if inside {
                            let v = x[((plane * ih + iy) * iw + ix) as usize];
                            match g.kind {
                                // NaN propagates (unlike `f32::max`).
                                0 if v > acc || v.is_nan() => acc = v,
                                0 => {}
                                1 => acc += v,
                                _ => acc += v.abs().powi(g.p as i32),
                            }
                        }
                    }
                }
                y.push(match g.kind {
                    0 => acc,
                    1 => acc / count as f32,
                    _ => acc.powf(1.0 / g.p as f32),
                });
            }
        }
    }
    y
}

#[test]
fn pick_even_every_length() {
    for n in 0..70 {
        for extra in 0..2 {
            let len = if n == 0 {
                extra
            } else {
                2 * (n - 1) + 1 + extra
            };
            let src: Vec<f32> = (0..len).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; n];
            let w = PickEven {
                src: src.as_ptr(),
                dst: dst.as_mut_ptr(),
                n,
            };
            let d = dst.as_ptr();
            // SAFETY: src holds len ≥ 2(n-1)+1 floats and dst n; d points to dst.
            unsafe {
                simd::for_each_isa(w, |isa, ()| {
                    for j in 0..n {
                        assert_eq!(*d.add(j), (2 * j) as f32, "{isa} n {n} len {len} [{j}]");
                    }
                })
            };
        }
    }
}

#[test]
fn matches_direct_pooling() {
    assert!(
        CASES.iter().filter(|c| c.5[0] > 1).count() >= 4
            && CASES.iter().filter(|c| c.5[0] == 1).count() >= 4,
        "both paths covered"
    );
    for case in CASES {
        let g = geometry(case, 3);
        let (kind, input) = (g.kind, g.input);
        let mut x: Vec<f32> = (0..3 * input[0] * input[1])
            .map(|i| ((i * 7919 % 1013) as f32 / 1013.0) - 0.5)
            .collect();
        if kind == 0 {
            // A window with a NaN tap is NaN, whichever tap of the window it is.
            for v in x.iter_mut().skip(5).step_by(41) {
                *v = f32::NAN;
            }
        }
        let want = reference(&g, &x);
        let mut y = vec![f32::NAN; want.len()];
        let mut scratch = vec![f32::NAN; g.scratch_floats()];
        let check = |isa: &str, y: &[f32]| {
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert!(
                    a == b
                        || (a.is_nan() && b.is_nan())
                        || (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "{isa} {g:?} [{i}]: {a} vs {b}"
                );
            }
        };
        // Through the C entry point, the geometry encoded and decoded.
        let p = g.encode();
        assert_eq!(PoolGeometry::decode(&p), Ok(g.clone()));
        // SAFETY: p is a sealed blob; x, y and scratch are sized from g (scratch_floats()).
        let status = unsafe {
            onnxc_pool2d_f32(
                p.as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, ONNXC_OK);
        check("dispatched", &y);
        // On 2, 3 and 5 threads: the same bits.
        let need = g.scratch().rounded();
        for (workers, threads) in crate::par::test_threads().into_iter().skip(1) {
            let mut yt = vec![f32::NAN; want.len()];
            let mut st = vec![f32::NAN; (need.shared + workers * need.per_worker) / 4];
            // SAFETY: as above, the scratch sized for the workers.
            let status = unsafe {
                onnxc_pool2d_f32(
                    p.as_ptr(),
                    x.as_ptr(),
                    yt.as_mut_ptr(),
                    st.as_mut_ptr(),
                    threads,
                )
            };
            assert_eq!(status, ONNXC_OK);
            assert!(
                y.iter().zip(&yt).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{g:?}: {workers} threads differ from one"
            );
        }
        // The row walk on every implementation of 8 lanes or more.
        if g.rows_kernel_applies() {
            let (yp, sp) = (y.as_mut_ptr(), scratch.as_mut_ptr());
            let w = PoolRows::<0, 0> {
                g: &g,
                x: x.as_ptr(),
                y: yp,
                scratch: sp,
            };
            // SAFETY: as above; yp points to y's want.len() floats.
            unsafe {
                simd::for_each_isa_in(8..=16, w, |isa, ()| {
                    check(isa, std::slice::from_raw_parts(yp, want.len()))
                })
            };
        }
        if kind == 0 {
            assert!(want.iter().any(|v| v.is_nan()), "{g:?}: NaN windows tested");
        }
    }
}

/// Corrupt blobs are refused by `decode` and by the entry point, which then writes nothing.
#[test]
fn refuses_corrupt_blobs() {
    let g = geometry(&CASES[3], 2);
    let good = g.encode();
    assert_eq!(PoolGeometry::decode(&good), Ok(g.clone()));
    // Word k of the body (after the length word) set to v.
    let with = |k: usize, v: i64| crate::params::with_word(&good, k, v);
    // Body words: kind, count_include_pad, p, planes, input 4-5, output 6-7, kernel 8-9,
    // strides 10-11, dilations 12-13, pads_begin 14-15, pads_end 16-17.
    let bad = [
        crate::params::short_blob(&good),
        crate::params::long_blob(&good),
        with(0, 3),
        with(0, -1),
        with(1, 2),
        with(2, 2),
        with(3, -1),
        with(4, 0),
        with(5, -7),
        with(6, g.output[0] + 2),
        with(7, g.output[1] - 1),
        with(8, 0),
        with(10, 0),
        with(13, 0),
        with(14, -1),
        with(17, 1 << 40),
        with(3, 1 << 62),
    ];
    for (i, b) in bad.iter().enumerate() {
        assert!(PoolGeometry::decode(b).is_err(), "case {i}: {b:?}");
    }
    assert!(
        PoolGeometry::decode(&good[..good.len() - 1]).is_err(),
        "truncated"
    );
    let mut lp = g.clone();
    (lp.kind, lp.p) = (2, 0);
    assert!(lp.validate().is_err(), "Lp pool without an exponent");
    let x = vec![1f32; 2 * 9 * 13];
    let mut y = vec![5f32; 2 * 64];
    let mut scratch = vec![0f32; 1 << 14];
    for b in &bad {
        // SAFETY: b is a sealed blob; the buffers are never touched (the blob is refused).
        let status = unsafe {
            onnxc_pool2d_f32(
                b.as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS);
    }
    assert!(y.iter().all(|&v| v == 5.0), "the output was written");
}
