//! The integer convolution against a direct reference (int64 sums, the reference's float64
//! requantization), on every tier the CPU has and every test pool, bit for bit.

use super::*;
use crate::conv::tests::{index, tap_offset};
use crate::par::test_threads;

struct Case {
    n: i64,
    c: i64,
    m: i64,
    group: i64,
    input: Vec<i64>,
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
}

impl Case {
    /// `[n, c, m, group]`, then the spatial input, kernel, strides, dilations and pads.
    fn new(
        [n, c, m, group]: [i64; 4],
        input: &[i64],
        kernel: &[i64],
        strides: &[i64],
        dilations: &[i64],
        pads: &[i64],
    ) -> Case {
        Case {
            n,
            c,
            m,
            group,
            input: input.to_vec(),
            kernel: kernel.to_vec(),
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            pads: pads.to_vec(),
        }
    }

    fn geometry(&self) -> ConvGeometry<'static> {
        let output: Vec<i64> = (0..self.input.len())
            .map(|d| {
                let span = (self.kernel[d] - 1) * self.dilations[d] + 1;
                (self.input[d] + 2 * self.pads[d] - span) / self.strides[d] + 1
            })
            .collect();
        ConvGeometry {
            n: self.n,
            c: self.c,
            m: self.m,
            group: self.group,
            input: self.input.as_slice().into(),
            kernel: self.kernel.as_slice().into(),
            output: output.as_slice().into(),
            strides: self.strides.as_slice().into(),
            dilations: self.dilations.as_slice().into(),
            pads: self.pads.as_slice().into(),
            wide_simd: false,
            no_winograd: true,
            input_planes: Default::default(),
            path: Default::default(),
        }
    }
}

/// A small deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// The exact sums `Σ (w − zw)(x − zx) + bias` of every output, by direct convolution.
#[allow(clippy::too_many_arguments)]
fn reference_sums(
    g: &ConvGeometry,
    x: &[i64],
    zx: i64,
    w: &[i64],
    wzp: &[i64],
    bias: &[i64],
) -> Vec<i64> {
    let (group, c, m) = (g.group as usize, g.c as usize, g.m as usize);
    let (cg, mg) = (c / group, m / group);
    let taps: usize = g.kernel.iter().product::<i64>() as usize;
    let isize: usize = g.input.iter().product::<i64>() as usize;
    let osize: usize = g.output.iter().product::<i64>() as usize;
    let mut y = vec![0i64; g.n as usize * m * osize];
    for b in 0..g.n as usize {
        for ch in 0..m {
            let gi = ch / mg;
            for o in 0..osize {
                let oc = index(o, &g.output);
                let mut s = bias[ch];
                for ci in 0..cg {
                    for t in 0..taps {
                        let xv = match tap_offset(g, &oc, t) {
                            Some(off) => x[(b * c + gi * cg + ci) * isize + off],
                            None => zx,
                        };
                        let wv = w[(ch * cg + ci) * taps + t];
                        s += (wv - wzp[ch]) * (xv - zx);
                    }
                }
                y[(b * m + ch) * osize + o] = s;
            }
        }
    }
    y
}

fn tiers() -> Vec<Tier> {
    let mut t = vec![Tier::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            t.push(Tier::Avx2);
        }
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
        {
            t.push(Tier::Vnni512 { vbmi: false });
            if std::is_x86_feature_detected!("avx512vbmi") {
                t.push(Tier::Vnni512 { vbmi: true });
            }
        }
    }
    t
}

/// Runs `run(tier, y, shared scratch, worker slots, threads)` on every tier the CPU has and
/// every test pool, each time into a fresh output of `want`'s size, and requires `want`.
fn on_every_tier_and_pool(
    what: &str,
    need: crate::par::ScratchNeed,
    want: &[u8],
    run: impl Fn(Tier, *mut u8, *mut f32, crate::par::Slots, Par),
) {
    for tier in tiers() {
        for (workers, threads) in test_threads() {
            let mut y = vec![0xa5u8; want.len()];
            let mut scratch =
                vec![0f32; (need.single() + workers * need.rounded().per_worker) / 4 + 16];
            let (shared, slots) = need.layout(scratch.as_mut_ptr());
            // SAFETY: the pool is a test pool.
            run(tier, y.as_mut_ptr(), shared, slots, unsafe {
                Par::from_raw(threads)
            });
            assert!(y == want, "{what}: {tier:?} on {workers} workers");
        }
    }
}

/// `len` weights: full-range, or in a reduced range ([-64, 63]) whose pairs keep
/// `vpmaddubsw` exact (`seven_bit`).
fn weights(rng: &mut Lcg, len: usize, seven_bit: bool) -> Vec<i8> {
    (0..len)
        .map(|_| {
            if seven_bit {
                (rng.next() % 128) as i8 - 64
            } else {
                (rng.next() % 256) as u8 as i8
            }
        })
        .collect()
}

/// The output bytes of `q.out` for the exact `sums`, sum `i` in row `row(i)` (its scale and
/// float32 bias): the int32 sum, the float32 epilogue, or the reference's requantization.
fn expected(
    q: &QScalars,
    sums: &[i64],
    row: impl Fn(usize) -> usize,
    scale: &[f32],
    fbias: &[f32],
) -> Vec<u8> {
    let (lo, hi, y_zp) = (q.lo as f64, q.hi as f64, q.y_zp as f64);
    sums.iter()
        .enumerate()
        .flat_map(|(i, &s)| {
            let r = row(i);
            match q.out {
                QOut::I32 => (s as i32).to_le_bytes().to_vec(),
                QOut::F32 => ((s as i32) as f32 * scale[r] + fbias[r])
                    .to_le_bytes()
                    .to_vec(),
                _ => {
                    let v = (s as f64 * scale[r] as f64).round_ties_even() + y_zp;
                    vec![v.clamp(lo, hi) as i32 as u8]
                }
            }
        })
        .collect()
}

/// Runs `case` with every output kind, on every tier and pool, against the reference.
fn check(case: &Case, x_signed: bool, with_wzp: bool, seven_bit: bool, seed: u64) {
    let g = case.geometry();
    let mut rng = Lcg(seed);
    let (m, c) = (case.m as usize, case.c as usize);
    let taps: usize = case.kernel.iter().product::<i64>() as usize;
    let isize: usize = case.input.iter().product::<i64>() as usize;
    let osize: usize = g.output.iter().product::<i64>() as usize;
    let klen = (c / case.group as usize) * taps;
    let xs: Vec<i64> = (0..case.n as usize * c * isize)
        .map(|_| {
            let v = (rng.next() % 256) as i64;
            if x_signed { v - 128 } else { v }
        })
        .collect();
    let zx: i64 = if x_signed { -5 } else { 131 };
    let w = weights(&mut rng, m * klen, seven_bit);
    let wzp: Vec<i32> = (0..m)
        .map(|ch| if with_wzp { (ch as i32 % 7) - 3 } else { 0 })
        .collect();
    let bias: Vec<i32> = (0..m)
        .map(|_| (rng.next() % 20001) as i32 - 10000)
        .collect();
    let scale: Vec<f32> = (0..m).map(|ch| 0.0007 * (1.0 + ch as f32 * 0.13)).collect();
    let fbias: Vec<f32> = (0..m).map(|ch| ch as f32 * 0.25 - 1.0).collect();
    let sums = reference_sums(
        &g,
        &xs,
        zx,
        &w.iter().map(|&v| v as i64).collect::<Vec<_>>(),
        &wzp.iter().map(|&v| v as i64).collect::<Vec<_>>(),
        &bias.iter().map(|&v| v as i64).collect::<Vec<_>>(),
    );
    let xb: Vec<u8> = xs.iter().map(|&v| v as u8).collect();
    for out in [QOut::I32, QOut::F32, QOut::U8, QOut::I8] {
        let (lo, hi, y_zp) = match out {
            QOut::U8 => (3, 250, 7),
            QOut::I8 => (-128, 127, -2),
            _ => (0, 0, 0),
        };
        let q = QScalars {
            out,
            x_signed,
            x_zp: zx as i32,
            y_zp,
            lo,
            hi,
        };
        let blob = QConvParams::encode(&g, q, &w, &wzp, Some(&bias), &scale, &fbias);
        let p = QConvParams::decode(&blob).expect("the blob decodes");
        assert_eq!(
            p.short_pairs, seven_bit,
            "pairs flagged by the weights' range"
        );
        let want = expected(&q, &sums, |i| (i / osize) % m, &scale, &fbias);
        let what = format!(
            "{out:?}: x_signed {x_signed}, wzp {with_wzp}, 7-bit {seven_bit}, geometry {g:?}"
        );
        on_every_tier_and_pool(&what, p.scratch(), &want, |tier, y, _, slots, par| {
            // SAFETY: x, y and the scratch hold what the geometry asks for.
            unsafe { qconv_on(tier, &p, xb.as_ptr(), y, slots, par) }
        });
        // The blob without its sizes, given them by a geometry of their own (the compiled
        // call, `onnxc_qconv`'s `geometry`): the same outputs.
        let sizeless = QConvParams::sizeless(&blob).expect("the blob has sizes to take out");
        assert_ne!(sizeless, blob, "{what}: sizes taken out");
        let bare = QConvParams::decode(&sizeless).expect("the sizeless blob decodes");
        let sized = bare
            .with_sizes(g.clone())
            .expect("the geometry is the blob's");
        let what_sized = format!("{what}, sizes given apart");
        on_every_tier_and_pool(
            &what_sized,
            sized.scratch(),
            &want,
            |tier, y, _, slots, par| {
                // SAFETY: x, y and the scratch hold what the geometry asks for.
                unsafe { qconv_on(tier, &sized, xb.as_ptr(), y, slots, par) }
            },
        );
        // The zero point given at run time (`with_x_zp`, a dynamically quantized input) to a
        // blob encoded with another one: the same outputs, padding included.
        let other = QScalars {
            x_zp: if x_signed { 60 } else { 3 },
            ..q
        };
        let blob = QConvParams::encode(&g, other, &w, &wzp, Some(&bias), &scale, &fbias);
        let p = QConvParams::decode(&blob).expect("the blob decodes");
        let what = format!("{what}, zero point at run time");
        on_every_tier_and_pool(&what, p.scratch(), &want, |tier, y, shared, slots, par| {
            // SAFETY: the shared scratch holds one i32 per output channel (`scratch`).
            let corr = unsafe { std::slice::from_raw_parts_mut(shared as *mut i32, m) };
            let p = p.with_x_zp(zx as i32, corr);
            // SAFETY: x, y and the scratch hold what the geometry asks for.
            unsafe { qconv_on(tier, &p, xb.as_ptr(), y, slots, par) }
        });
    }
}

#[test]
fn matches_the_reference_on_every_tier() {
    let cases = [
        // Pointwise, more lanes than a panel, channels not a multiple of the block.
        Case::new([2, 13, 11, 1], &[5, 9], &[1, 1], &[1, 1], &[1, 1], &[0, 0]),
        // 3×3 padded, K not a multiple of 4.
        Case::new([1, 3, 17, 1], &[7, 6], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        // Strided, dilated, grouped.
        Case::new([1, 8, 12, 2], &[11, 10], &[3, 2], &[2, 3], &[2, 1], &[2, 1]),
        // Depthwise: unit stride with padding, then strided (rows wider than a panel).
        Case::new([2, 5, 5, 5], &[9, 40], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        Case::new([1, 3, 3, 3], &[10, 11], &[5, 3], &[2, 2], &[1, 2], &[2, 2]),
        // 1-D and 3-D.
        Case::new([1, 5, 9, 1], &[40], &[4], &[1], &[1], &[2]),
        Case::new(
            [1, 4, 8, 1],
            &[3, 4, 5],
            &[2, 3, 2],
            &[1, 1, 2],
            &[1, 1, 1],
            &[1, 0, 1],
        ),
        // One output column: a run per lane, more (tap, run) spans than the span table
        // holds (the packers' general path).
        Case::new([1, 2, 5, 1], &[40, 11], &[9, 11], &[1, 1], &[1, 1], &[0, 0]),
    ];
    for (i, case) in cases.iter().enumerate() {
        for (x_signed, with_wzp) in [(false, false), (true, false), (false, true), (true, true)] {
            for seven_bit in [false, true] {
                check(case, x_signed, with_wzp, seven_bit, i as u64 * 31 + 7);
            }
        }
    }
}

#[test]
fn blobs_are_validated() {
    let case = Case::new([1, 4, 8, 1], &[4, 4], &[3, 3], &[1, 1], &[1, 1], &[1, 1]);
    let g = case.geometry();
    let q = QScalars {
        out: QOut::U8,
        x_signed: false,
        x_zp: 0,
        y_zp: 0,
        lo: 0,
        hi: 255,
    };
    let w = vec![1i8; 8 * 4 * 9];
    let z = vec![0i32; 8];
    let f = vec![1f32; 8];
    let blob = QConvParams::encode(&g, q, &w, &z, None, &f, &f);
    assert!(QConvParams::decode(&blob).is_ok());
    // Truncated, extended, or with a bad header word: refused.
    let mut short = blob[..blob.len() - 1].to_vec();
    short[0] -= 1;
    assert!(QConvParams::decode(&short).is_err());
    let mut long = blob.clone();
    long.push(0);
    long[0] += 1;
    assert!(QConvParams::decode(&long).is_err());
    for (at, v) in [(1, 9), (2, 16), (3, 300), (5, -1), (6, 999), (7, -1)] {
        let mut b = blob.clone();
        b[at] = v;
        assert!(QConvParams::decode(&b).is_err(), "word {at} = {v}");
    }
    // Sizes given apart must come with the weights' convolution: other channels, window,
    // strides or padding are refused, by the entry point too.
    let p = QConvParams::decode(&blob).unwrap();
    assert!(p.with_sizes(g.clone()).is_ok());
    let others = [
        Case::new([1, 4, 9, 1], &[4, 4], &[3, 3], &[1, 1], &[1, 1], &[1, 1]),
        Case::new([1, 4, 8, 1], &[4, 4], &[3, 1], &[1, 1], &[1, 1], &[1, 1]),
        Case::new([1, 4, 8, 1], &[4, 4], &[3, 3], &[2, 1], &[1, 1], &[1, 1]),
        Case::new([1, 4, 8, 1], &[4, 4], &[3, 3], &[1, 1], &[1, 1], &[0, 1]),
    ];
    for other in &others {
        assert!(
            p.with_sizes(other.geometry()).is_err(),
            "{:?}",
            other.geometry()
        );
    }
    let sizeless = QConvParams::sizeless(&blob).unwrap();
    let (x, mut y) = (vec![3u8; 2 * 4 * 6 * 5], vec![0u8; 2 * 8 * 6 * 5]);
    let mut scratch = vec![0f32; p.scratch().single() / 4 + 16];
    let call = |geometry: &[i64], y: &mut [u8], scratch: &mut [f32]| {
        // SAFETY: the blobs are sealed; x and y hold the [2, 4, 6, 5] input and [2, 8, 6, 5]
        // output of the larger geometry, the scratch one worker's.
        unsafe {
            onnxc_qconv(
                sizeless.as_ptr(),
                geometry.as_ptr(),
                x.as_ptr(),
                std::ptr::null(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                std::ptr::null(),
            )
        }
    };
    let larger = Case::new([2, 4, 8, 1], &[6, 5], &[3, 3], &[1, 1], &[1, 1], &[1, 1]);
    assert_eq!(
        call(&larger.geometry().encode(), &mut y, &mut scratch),
        ONNXC_OK
    );
    // Weights of one against inputs of 3 (zero points 0, scale 1, no bias): 3 per tap
    // inside, over 4 channels.
    assert_eq!(y[0], 3 * 4 * 4, "a corner has 4 taps inside");
    assert_eq!(y[6], 3 * 9 * 4, "an inner position has 9");
    assert_eq!(y[2 * 8 * 30 - 1], 3 * 4 * 4, "the last image's last corner");
    let refused = call(&others[0].geometry().encode(), &mut y, &mut scratch);
    assert_eq!(refused, crate::abi::ONNXC_ERR_PARAMS);
}

/// The matrix product against int64 sums, every output kind, tier and pool, with the
/// activations' zero point from the blob and from the call.
#[test]
fn matmul_matches_the_reference_on_every_tier() {
    use super::matmul::{QMatMulParams, qmatmul_on};
    // The last flag: weights in a reduced range ([-64, 63]), whose pairs keep `vpmaddubsw`
    // exact.
    for (batch, m, k, n, x_signed, with_wzp, seven_bit) in [
        (1, 1, 7, 5, false, false, false),
        (2, 37, 70, 19, true, false, false),
        (1, 64, 33, 16, false, true, false),
        (3, 5, 4, 9, true, true, false),
        // Several weight panels, the last one partial.
        (1, 9, 40, 70, false, true, false),
        (2, 37, 70, 19, true, false, true),
        (1, 9, 40, 70, false, true, true),
    ] {
        let mut rng = Lcg((m * 131 + k * 7 + n) as u64);
        let a: Vec<u8> = (0..batch * m * k)
            .map(|_| (rng.next() % 256) as u8)
            .collect();
        let w = weights(&mut rng, k * n, seven_bit);
        let wzp: Vec<i32> = (0..n)
            .map(|j| if with_wzp { (j as i32 % 5) - 2 } else { 0 })
            .collect();
        let bias: Vec<i32> = (0..n).map(|_| (rng.next() % 2001) as i32 - 1000).collect();
        let scale: Vec<f32> = (0..n).map(|j| 0.001 * (1.0 + j as f32 * 0.2)).collect();
        let fbias: Vec<f32> = (0..n).map(|j| j as f32 * 0.5 - 2.0).collect();
        let xv = |v: u8| if x_signed { v as i8 as i64 } else { v as i64 };
        for (blob_zp, call_zp) in [(3i32, None), (0, Some(if x_signed { -7i32 } else { 200 }))] {
            let zx = call_zp.unwrap_or(blob_zp) as i64;
            let sums: Vec<i64> = (0..batch * m * n)
                .map(|i| {
                    let (row, j) = (i / n, i % n);
                    bias[j] as i64
                        + (0..k)
                            .map(|t| {
                                (w[t * n + j] as i64 - wzp[j] as i64) * (xv(a[row * k + t]) - zx)
                            })
                            .sum::<i64>()
                })
                .collect();
            for out in [QOut::I32, QOut::F32, QOut::U8, QOut::I8] {
                let (lo, hi, y_zp) = match out {
                    QOut::U8 => (0, 255, 9),
                    QOut::I8 => (-100, 127, 3),
                    _ => (0, 0, 0),
                };
                let q = QScalars {
                    out,
                    x_signed,
                    x_zp: blob_zp,
                    y_zp,
                    lo,
                    hi,
                };
                let blob = QMatMulParams::encode(q, k, n, &w, &wzp, Some(&bias), &scale, &fbias);
                let p = QMatMulParams::decode(&blob).expect("the blob decodes");
                let p = p.with_rows((batch * m) as i64).expect("the rows fit");
                assert_eq!(
                    p.short_pairs, seven_bit,
                    "pairs flagged by the weights' range"
                );
                let want = expected(&q, &sums, |i| i % n, &scale, &fbias);
                let what = format!("{out:?}: {batch}x{m}x{k}x{n} signed {x_signed} wzp {with_wzp}");
                on_every_tier_and_pool(&what, p.scratch(), &want, |tier, y, shared, slots, par| {
                    // SAFETY: a, y and the scratch hold what the blob asks for.
                    unsafe {
                        qmatmul_on(
                            tier,
                            &p,
                            zx as i32,
                            a.as_ptr(),
                            y,
                            shared as *mut i32,
                            slots,
                            par,
                        )
                    }
                });
            }
        }
    }
}
