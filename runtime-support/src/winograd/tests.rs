//! The tile transforms against direct correlation; the panel walks on every implementation
//! against the tile transforms in scalar arithmetic, lane by lane in each implementation's
//! lane order; whole convolutions with each implementation's transforms against direct
//! convolution.

use super::*;
use crate::simd::{self, Lanes, On};

/// `X d Xᵀ` of one tile in scalar arithmetic (`Lanes<1>`, which rounds multiply-adds twice)
/// for a column transform `x` (`bt` or `at` of a variant).
fn tile<const N: usize, const K: usize>(
    d: [[f32; N]; N],
    x: impl Fn(Lanes<1>, [[f32; 1]; N]) -> [[f32; 1]; K],
) -> [[f32; K]; K] {
    let s = Lanes::<1>::new();
    let mut v = [[0.0; K]; K];
    sandwich(
        |c| d.map(|r| [r[c]]),
        |col| x(s, col),
        |i, r| v[i] = r.map(|e| e[0]),
    );
    v
}

/// The input transform `Bᵀ d B` of a variant's tile whose element (r, c) is `d(r, c)`, row
/// by row.
fn input_tile(v: Variant, d: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    match v {
        Variant::F2 => tile(
            std::array::from_fn(|r| std::array::from_fn(|c| d(r, c))),
            bt,
        )
        .concat(),
        Variant::F4 => tile(
            std::array::from_fn(|r| std::array::from_fn(|c| d(r, c))),
            f4::bt,
        )
        .concat(),
    }
}

/// The output transform `Aᵀ M A` of a variant's products `m(r, c)`, row by row.
fn output_tile(v: Variant, m: impl Fn(usize, usize) -> f32) -> Vec<Vec<f32>> {
    match v {
        Variant::F2 => tile(
            std::array::from_fn(|r| std::array::from_fn(|c| m(r, c))),
            at,
        )
        .map(|r| r.to_vec())
        .to_vec(),
        Variant::F4 => tile(
            std::array::from_fn(|r| std::array::from_fn(|c| m(r, c))),
            f4::at,
        )
        .map(|r| r.to_vec())
        .to_vec(),
    }
}

/// The transforms compose to direct correlation of a tile with a 3×3 kernel.
#[test]
fn transforms_match_direct_correlation() {
    let g: [f32; 9] = std::array::from_fn(|i| ((i * 5) % 7) as f32 * 0.25 - 0.7);
    for v in [Variant::F2, Variant::F4] {
        let (m, n) = (v.m(), v.m() + 2);
        let d = |r: usize, c: usize| ((r * 7 + c * 3) % 11) as f32 - 5.0;
        let u = match v {
            Variant::F2 => transform_kernel(&g).to_vec(),
            Variant::F4 => f4::transform_kernel(&g).to_vec(),
        };
        let t = input_tile(v, d);
        let y = output_tile(v, |r, c| u[r * n + c] * t[r * n + c]);
        for (r, yr) in y.iter().enumerate() {
            for (c, got) in yr.iter().enumerate() {
                let want: f32 = (0..9).map(|k| d(r + k / 3, c + k % 3) * g[k]).sum();
                assert!((got - want).abs() < 1e-3, "F{m} ({r},{c}): {got} vs {want}");
            }
        }
    }
}

/// A panel walk and, from the same implementation, the lane of tile `k` of a lane group
/// (`split4`'s π for F(4,3); natural order for F(2,3)).
#[derive(Clone)]
struct WithOrder<W> {
    w: W,
    four: bool,
}

impl<W: Walk> Walk for WithOrder<W> {
    type Out = Vec<usize>;
    unsafe fn run<S: Simd>(self, s: S) -> Vec<usize> {
        let l = S::LANES;
        // SAFETY: the walk's contract (the test's buffers).
        unsafe { self.w.run(s) };
        if !self.four {
            return (0..l).collect();
        }
        let iota: Vec<f32> = (0..4 * l).map(|i| i as f32).collect();
        let mut buf = [0f32; 16];
        // SAFETY: iota holds 4·LANES floats; buf 16 ≥ LANES.
        unsafe {
            let c0 = s.split4(std::array::from_fn(|i| s.load(iota.as_ptr().add(i * l))))[0];
            s.store(buf.as_mut_ptr(), c0);
        }
        // Lane λ holds float 4k of tile k.
        let mut lane = vec![0; l];
        for (lam, v) in buf[..l].iter().enumerate() {
            lane[*v as usize / 4] = lam;
        }
        lane
    }
}

/// Panel lane of tile `j` of the panel, given the lane order within a group.
fn panel_lane(j: usize, lane: &[usize]) -> usize {
    let l = lane.len();
    j / l * l + lane[j % l]
}

/// Plane sides, padding and tile columns (`tw`, a multiple of 8) exercising: groups
/// straddling two tile rows (tw = 8 with 16 lanes), panels past the last tile row, planes
/// narrower than a vector, and interior rows with whole vectors.
const PLANES: [(usize, usize, i64, usize); 5] = [
    (9, 13, 1, 8),
    (7, 30, 1, 16),
    (40, 61, 1, 16),
    (21, 5, 0, 8),
    (30, 70, 2, 24),
];

/// Equal bits where the walk's arithmetic is the scalar transform's (F(2,3) everywhere,
/// F(4,3) on the portable implementations), else within rounding.
fn close(v: Variant, isa: &str, a: f32, b: f32) -> bool {
    if v == Variant::F2 || isa.starts_with("lanes") {
        a.to_bits() == b.to_bits()
    } else {
        (a - b).abs() <= 1e-5 * (1.0 + b.abs())
    }
}

/// Each tile of each panel of `PLANES` for each variant: `(variant, plane shape and padding,
/// tile columns, first tile)`.
fn panels() -> impl Iterator<Item = (Variant, (usize, usize, i64), usize, usize)> {
    [Variant::F2, Variant::F4].into_iter().flat_map(|v| {
        PLANES.into_iter().flat_map(move |(ih, iw, pad, tw)| {
            let th = (ih + 2 * pad as usize - 2).div_ceil(v.m());
            (0..(th + 1) * tw)
                .step_by(NR)
                .map(move |t0| (v, (ih, iw, pad), tw, t0))
        })
    })
}

#[test]
fn input_panels_match_scalar_transform() {
    for (v, (ih, iw, pad), tw, t0) in panels() {
        let (m, n) = (v.m(), v.m() + 2);
        let plane = crate::test_rand(ih * iw, (ih * iw) as u64);
        let (bsz, off) = (NR * n * n + 7, 3);
        let mut vbuf = vec![f32::NAN; n * n * bsz];
        let panel = InputPanel {
            plane: plane.as_ptr(),
            ih: ih as i64,
            iw: iw as i64,
            ph: pad,
            pw: pad,
            t0,
            tw,
            vbuf: vbuf.as_mut_ptr(),
            bsz,
            off,
        };
        let vp = vbuf.as_ptr();
        let check = |isa: &str, lane: Vec<usize>| {
            for j in 0..NR {
                let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
                let want = input_tile(v, |r, c| {
                    let (y, x) = ((m * ty + r) as i64 - pad, (m * tx + c) as i64 - pad);
                    if y >= 0 && y < ih as i64 && x >= 0 && x < iw as i64 {
                        plane[y as usize * iw + x as usize]
                    } else {
                        0.0
                    }
                });
                for (xi, w) in want.iter().enumerate() {
                    // SAFETY: inside vbuf.
                    let got = unsafe { *vp.add(xi * bsz + off + panel_lane(j, &lane)) };
                    assert!(
                        close(v, isa, got, *w),
                        "{isa} F{m} plane {ih}x{iw} tw {tw} tile {} ξ {xi}: {got} vs {w}",
                        t0 + j
                    );
                }
            }
        };
        let w = WithOrder {
            w: Input(panel, v),
            four: v == Variant::F4,
        };
        // SAFETY: plane and vbuf hold what the panel reads and writes.
        unsafe { simd::for_each_isa(w, check) };
    }
}

#[test]
fn output_panels_match_scalar_transform() {
    for ((v, (ih, iw, pad), tw, t0), with_resid) in panels().flat_map(|p| [(p, false), (p, true)]) {
        let (m, n) = (v.m(), v.m() + 2);
        let (oh, ow) = (ih + 2 * pad as usize - 2, iw + 2 * pad as usize - 2);
        let stride = NR + 5;
        let prods = crate::test_rand(n * n * stride, (oh * 31 + ow) as u64);
        let resid = crate::test_rand(oh * ow, 5);
        let mut out = vec![-7.0f32; oh * ow];
        let panel = OutputPanel {
            mrow: prods.as_ptr(),
            stride,
            t0,
            tw,
            oh,
            ow,
            out: out.as_mut_ptr(),
            resid: if with_resid {
                resid.as_ptr()
            } else {
                std::ptr::null()
            },
            bias: 0.25,
            lo: -1.5,
            hi: 2.0,
        };
        let op = out.as_mut_ptr();
        let check = |isa: &str, lane: Vec<usize>| {
            // SAFETY: out's buffer, not otherwise borrowed during the check.
            let got = unsafe { std::slice::from_raw_parts_mut(op, oh * ow) };
            let mut want = vec![-7.0f32; oh * ow];
            for j in 0..NR {
                let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
                let y = output_tile(v, |r, c| prods[(r * n + c) * stride + panel_lane(j, &lane)]);
                for (r, row) in y.iter().enumerate() {
                    for (c, y) in row.iter().enumerate() {
                        let (oy, ox) = (m * ty + r, m * tx + c);
                        if oy < oh && ox < ow {
                            let o = oy * ow + ox;
                            let rv = if with_resid { resid[o] } else { 0.0 };
                            want[o] = crate::clamp_ep(y + 0.25 + rv, -1.5, 2.0);
                        }
                    }
                }
            }
            for (o, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    close(v, isa, *g, *w),
                    "{isa} F{m} {oh}x{ow} tw {tw} t0 {t0} resid {with_resid} ({}, {}): {g} vs {w}",
                    o / ow,
                    o % ow
                );
            }
            got.fill(-7.0);
        };
        let w = WithOrder {
            w: Output(panel, v),
            four: v == Variant::F4,
        };
        // SAFETY: prods, out and resid hold what the panel reads and writes.
        unsafe { simd::for_each_isa(w, check) };
    }
}

/// A whole convolution (its buffers but the output and scratch) whose transforms run on the
/// walk's implementation (the GEMMs on the CPU's).
#[derive(Clone)]
struct Whole<'a>(&'a ConvGeometry<'a>, Call);

impl Walk for Whole<'_> {
    type Out = Vec<f32>;
    unsafe fn run<S: Simd>(self, s: S) -> Vec<f32> {
        let Whole(g, c) = self;
        // Sequentially and on pools of 2, 3 and 5 workers: the same bits.
        crate::par::same_bits_on_every_pool(&format!("{g:?}"), |_, threads| {
            let mut y = vec![f32::NAN; (g.n * g.m * g.output[0] * g.output[1]) as usize];
            let mut scratch = vec![f32::NAN; g.winograd_scratch()];
            let c = Call {
                y: y.as_mut_ptr(),
                scratch: scratch.as_mut_ptr(),
                ..c
            };
            // SAFETY: the buffers hold the geometry's tensors and scratch; threads is null or
            // a live test pool.
            unsafe { conv_with(crate::par::Par::from_raw(threads), &On(s), g, c) };
            y
        })
    }
}

/// Whole convolutions with each implementation's transforms against direct convolution,
/// and bit for bit against each other where the arithmetic is the same: F(2,3) adds and
/// subtracts only, F(4,3) fuses its multiply-adds on the native implementations and rounds
/// them twice on the portable ones.
#[test]
fn convolutions_match_direct_on_every_isa() {
    use crate::conv::tests::{geom, reference};
    // (batch, channels in and out, groups, input, padding): for F(2,3) 7 tiles a row (16
    // lanes straddle two tile rows) with tiles past the last row, no padding with groups
    // and batch, a plane narrower than a vector; for F(4,3) 8 tiles a row, odd sizes with
    // groups and batch, a wide plane with whole vectors.
    for (n, c, m, group, hw, pad) in [
        (1, 24, 40, 1, [14, 14], 1),
        (2, 16, 24, 2, [9, 35], 0),
        (1, 8, 8, 1, [5, 7], 1),
        (1, 16, 24, 1, [30, 30], 1),
        (2, 16, 16, 2, [23, 41], 0),
        (1, 8, 8, 1, [20, 150], 1),
    ] {
        let g = &geom(n, c, m, group, &hw, &[3, 3], &[1, 1], &[1, 1], &[pad, pad]);
        let four = g.winograd_variant() == Variant::F4;
        let osz = (n * m * g.output[0] * g.output[1]) as usize;
        let x = crate::test_rand((n * c * hw[0] * hw[1]) as usize, 1);
        let w = crate::test_rand((m * c / group * 9) as usize, 2);
        let bias = crate::test_rand(m as usize, 3);
        let resid = crate::test_rand(osz, 4);
        let want = reference(g, &x, &w, &bias);
        let wp = g.winograd_pack(&w);
        let mut seen: Vec<(&str, Vec<f32>)> = Vec::new();
        let check = |isa: &'static str, y: Vec<f32>| {
            for (i, (got, (want, r))) in y.iter().zip(want.iter().zip(&resid)).enumerate() {
                let want = (want + r).clamp(-0.5, 0.6);
                assert!(
                    (got - want).abs() < 1e-3,
                    "{isa} {g:?} [{i}]: {got} vs {want}"
                );
            }
            let portable = isa.starts_with("lanes");
            if let Some((other, first)) = seen
                .iter()
                .find(|(o, _)| !four || o.starts_with("lanes") == portable)
            {
                let same = y.iter().zip(first).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa} and {other} differ on {g:?}");
            }
            seen.push((isa, y));
        };
        let whole = Whole(
            g,
            Call {
                x: x.as_ptr(),
                w: wp.as_ptr(),
                bias: bias.as_ptr(),
                residual: resid.as_ptr(),
                lo: -0.5,
                hi: 0.6,
                y: std::ptr::null_mut(),
                scratch: std::ptr::null_mut(),
            },
        );
        // SAFETY: the walk's buffers are its own.
        unsafe { simd::for_each_isa(whole, check) };
    }
}

#[test]
fn variant_follows_the_padded_tiles() {
    let variant = |h: i64, w: i64| {
        crate::conv::tests::geom(1, 64, 128, 1, &[h, w], &[3, 3], &[1, 1], &[1, 1], &[1, 1])
            .winograd_variant()
    };
    // Every map whose sides are 20 or more runs F(4,3), as the former side rule had it.
    for h in 20..=80 {
        for w in 20..=80 {
            assert_eq!(variant(h, w), Variant::F4, "{h}×{w}");
        }
    }
    // Small maps whose F(4,3) tiles pad a row to 8 tiles stay F(2,3).
    for (h, w) in [(14, 14), (13, 13), (16, 16), (7, 7), (8, 8), (2, 250)] {
        assert_eq!(variant(h, w), Variant::F2, "{h}×{w}");
    }
    // Short, wide maps (a text line's 4 or 8 rows) run F(4,3): its tiles cover them whole.
    for (h, w) in [(4, 250), (8, 250), (16, 500), (4, 64), (17, 17)] {
        assert_eq!(variant(h, w), Variant::F4, "{h}×{w}");
    }
}
