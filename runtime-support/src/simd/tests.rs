//! Every implementation of `Simd` against the semantics the module documents: each
//! operation applied to the same inputs (including NaN, ±∞, ±0 and subnormals) must give the
//! lane values a scalar definition gives, on every implementation this machine can run.

use super::*;

/// Inputs: 64 floats with special values among seeded random ones.
fn inputs() -> Vec<f32> {
    let mut v = crate::test_rand(64, 7);
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        1.0,
        -1.0,
        3.5,
        -2.5,
        0.5,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    for (i, s) in specials.iter().enumerate() {
        v[3 * i + 1] = *s;
    }
    v
}

/// Bitwise equality, all NaNs equal.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[derive(Clone)]
struct Ops<'a> {
    a: &'a [f32],
    b: &'a [f32],
}

/// Per operation, its lane values.
type Results = Vec<(&'static str, Vec<f32>)>;

/// A masked access's expected lane `j`: (inside the mask, outside).
type LaneValues<'a> = &'a dyn Fn(usize) -> (f32, f32);

/// Per operation, the results over `a` and `b` processed a vector at a time.
impl Walk for Ops<'_> {
    type Out = Results;
    unsafe fn run<S: Simd>(self, s: S) -> Self::Out {
        let l = S::LANES;
        let n = self.a.len() / l * l;
        let mut out: Results = Vec::new();
        let mut put = |name: &'static str, v: S::F| {
            let mut buf = [0f32; 16];
            // SAFETY: buf holds 16 ≥ LANES floats.
            unsafe { s.store(buf.as_mut_ptr(), v) };
            match out.iter_mut().find(|(k, _)| *k == name) {
                Some((_, vals)) => vals.extend_from_slice(&buf[..l]),
                None => out.push((name, buf[..l].to_vec())),
            }
        };
        for i in (0..n).step_by(l) {
            // SAFETY: i + LANES ≤ n ≤ len; masked and gathered lanes stay inside the slices.
            unsafe {
                let a = s.load(self.a.as_ptr().add(i));
                let b = s.load(self.b.as_ptr().add(i));
                put("add", s.add(a, b));
                put("sub", s.sub(a, b));
                put("mul", s.mul(a, b));
                put("div", s.div(a, b));
                put("mul_add", s.mul_add(a, b, a));
                put("neg_mul_add", s.neg_mul_add(a, b, a));
                put("min", s.min(a, b));
                put("max", s.max(a, b));
                put("max_nan", s.max_nan(a, b));
                put("select_lt", s.select(s.lt(a, b), a, b));
                put("select_gt", s.select(s.gt(a, b), a, b));
                put("select_nan", s.select(s.is_nan(a), b, a));
                put("and", s.and(a, b));
                put("or", s.or(a, b));
                put("andnot", s.andnot(a, b));
                put("round", s.round(s.mul(a, s.splat(7.0))));
                // scale2's contract: a normal p and an integral n in range.
                let one = s.splat(1.0);
                let p = s.add(
                    one,
                    s.mul(s.splat(0.25), s.max(s.splat(-1.0), s.min(one, a))),
                );
                let bn = s.select(s.is_nan(b), s.zero(), b);
                let n = s.round(s.mul(s.max(s.splat(-1.0), s.min(one, bn)), s.splat(120.0)));
                put("scale2", s.scale2(p, n));
                for k in [0, 1, l / 2, l - 1, l] {
                    put("shift", s.shift(a, b, s.shifter(k)));
                }
                let (e, o) = s.deinterleave(a, b);
                put("deinterleave", e);
                put("deinterleave", o);
                let (lo, hi) = s.interleave(a, b);
                put("interleave", lo);
                put("interleave", hi);
                for (lo, hi) in [(0, l), (1, l - 1), (3, 2), (l / 2, l + 4), (0, 0)] {
                    let m = s.lanes(lo, hi);
                    put("load_masked", s.load_masked(self.a.as_ptr().add(i), m, b));
                    put("load_or_zero", s.load_or_zero(self.a.as_ptr().add(i), m));
                    let stride = if i + 2 * l <= self.a.len() { 2 } else { 1 };
                    put(
                        "gather_masked",
                        s.gather_masked(self.a.as_ptr().add(i), stride, m, b),
                    );
                    // Lane j reads element i + (j·7 mod LANES), indices past the mask unread.
                    let idx: Vec<i32> = (0..l).map(|j| (j * 7 % l) as i32).collect();
                    put(
                        "gather_index",
                        s.gather_index(self.a.as_ptr().add(i), idx.as_ptr(), m, b),
                    );
                    let mut buf = [1.5f32; 16];
                    s.store_masked(buf.as_mut_ptr(), m, a);
                    put("store_masked", s.load(buf.as_ptr()));
                    put("any", s.splat(s.any(m) as u8 as f32));
                }
                for lo in 0..=l {
                    for hi in lo..=l {
                        let mut buf = [1.5f32; 16];
                        s.store_range(buf.as_mut_ptr(), lo, hi, a);
                        put("store_range", s.load(buf.as_ptr()));
                    }
                }
                put(
                    "reduce_add",
                    s.splat(s.reduce_add(s.max(s.splat(-1e3), s.min(s.splat(1e3), a)))),
                );
                put("exp", math::exp(s, s.mul(a, s.splat(40.0))));
                let neg = s.mul(s.andnot(s.splat(-0.0), a), s.splat(-100.0));
                put("exp_nonpositive", math::exp_nonpositive(s, neg));
                put("exp_of_nonpositive", math::exp(s, neg));
                put("tanh", math::tanh(s, s.mul(a, s.splat(4.0))));
                put("erf", math::erf(s, s.mul(a, s.splat(3.0))));
            }
        }
        out
    }
}

/// The scalar definitions, lane `j` of a vector of `l` lanes starting at element `i`.
fn expected(name: &str, a: &[f32], b: &[f32], l: usize) -> Vec<f32> {
    let n = a.len() / l * l;
    let max = |x: f32, y: f32| if x > y { x } else { y };
    let min = |x: f32, y: f32| if x < y { x } else { y };
    let bits = |x: f32, y: f32, f: fn(u32, u32) -> u32| f32::from_bits(f(x.to_bits(), y.to_bits()));
    let mut out = Vec::new();
    for i in (0..n).step_by(l) {
        let (va, vb) = (&a[i..i + l], &b[i..i + l]);
        let lane =
            |f: &dyn Fn(f32, f32) -> f32| -> Vec<f32> { (0..l).map(|j| f(va[j], vb[j])).collect() };
        match name {
            "add" => out.extend(lane(&|x, y| x + y)),
            "sub" => out.extend(lane(&|x, y| x - y)),
            "mul" => out.extend(lane(&|x, y| x * y)),
            "div" => out.extend(lane(&|x, y| x / y)),
            "min" => out.extend(lane(&min)),
            "max" => out.extend(lane(&max)),
            "max_nan" => out.extend(lane(&|x, y| {
                if x.is_nan() || y.is_nan() {
                    f32::NAN
                } else {
                    max(x, y)
                }
            })),
            "select_lt" => out.extend(lane(&|x, y| if x < y { x } else { y })),
            "select_gt" => out.extend(lane(&|x, y| if x > y { x } else { y })),
            "select_nan" => out.extend(lane(&|x, y| if x.is_nan() { y } else { x })),
            "and" => out.extend(lane(&|x, y| bits(x, y, |p, q| p & q))),
            "or" => out.extend(lane(&|x, y| bits(x, y, |p, q| p | q))),
            "andnot" => out.extend(lane(&|x, y| bits(x, y, |p, q| !p & q))),
            "round" => out.extend(lane(&|x, _| (x * 7.0).round_ties_even())),
            "scale2" => out.extend(lane(&|x, y| {
                let p = 1.0 + 0.25 * if x.is_nan() { x } else { x.clamp(-1.0, 1.0) };
                let y = if y.is_nan() { 0.0 } else { y.clamp(-1.0, 1.0) };
                let n = (y * 120.0).round_ties_even();
                (p as f64 * 2f64.powi(n as i32)) as f32
            })),
            "shift" => {
                for k in [0, 1, l / 2, l - 1, l] {
                    out.extend((0..l).map(|j| if j + k < l { va[j + k] } else { vb[j + k - l] }));
                }
            }
            "deinterleave" => {
                let cat: Vec<f32> = va.iter().chain(vb).copied().collect();
                out.extend((0..l).map(|j| cat[2 * j]));
                out.extend((0..l).map(|j| cat[2 * j + 1]));
            }
            "interleave" => {
                let z: Vec<f32> = (0..l).flat_map(|j| [va[j], vb[j]]).collect();
                out.extend(z);
            }
            _ => return Vec::new(),
        }
    }
    out
}

#[test]
fn every_implementation_keeps_the_documented_semantics() {
    let a = inputs();
    let mut b = crate::test_rand(64, 11);
    b[2] = f32::NAN;
    b[5] = 0.0;
    b[9] = -0.0;
    b[13] = f32::INFINITY;
    let mut results: Vec<(String, Results)> = Vec::new();
    // SAFETY: the walk reads only its two slices.
    unsafe {
        for_each_isa(Ops { a: &a, b: &b }, |isa, r| {
            results.push((isa.to_string(), r))
        });
    }
    for (isa, ops) in &results {
        let l = match isa.as_str() {
            "avx512" | "lanes16" => 16,
            "avx2" | "lanes8" => 8,
            _ => 4,
        };
        for (name, got) in ops {
            let want = expected(name, &a, &b, l);
            if want.is_empty() {
                continue;
            }
            assert_eq!(got.len(), want.len(), "{isa} {name}");
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    same(*g, *w),
                    "{isa} {name} element {j}: got {g:e}, want {w:e}"
                );
            }
        }
        let find = |k: &str| &ops.iter().find(|(n, _)| *n == k).unwrap().1;
        // mul_add: fused or not, within one rounding of the exact value (NaN where it is).
        for (j, (g, u)) in find("mul_add").iter().zip(find("neg_mul_add")).enumerate() {
            let (x, y) = (a[j] as f64, b[j] as f64);
            for (got, exact) in [(*g, x * y + x), (*u, x - x * y)] {
                if exact.is_nan() {
                    assert!(got.is_nan(), "{isa} mul_add {j}");
                } else if exact.is_finite() && exact.abs() < 1e30 {
                    assert!(
                        (got as f64 - exact).abs()
                            <= ((x * y).abs() + exact.abs()) * 1.2e-7 + 1e-38,
                        "{isa} mul_add {j}: {got} vs {exact}"
                    );
                }
            }
        }
        // Masked loads and stores against lane sets.
        let ranges = [(0, l), (1, l - 1), (3, 2), (l / 2, l + 4), (0, 0)];
        let an = find("any");
        let mut k = 0;
        for i in (0..a.len() / l * l).step_by(l) {
            for (lo, hi) in ranges {
                let stride = if i + 2 * l <= a.len() { 2 } else { 1 };
                // Per operation, the value of lane j inside the mask and outside it.
                let lanes: [(&str, LaneValues); 5] = [
                    ("load_masked", &|j| (a[i + j], b[i + j])),
                    ("load_or_zero", &|j| (a[i + j], 0.0)),
                    ("gather_masked", &|j| (a[i + j * stride], b[i + j])),
                    ("gather_index", &|j| (a[i + j * 7 % l], b[i + j])),
                    ("store_masked", &|j| (a[i + j], 1.5)),
                ];
                for (name, want) in lanes {
                    let got = find(name);
                    for j in 0..l {
                        let (inside, outside) = want(j);
                        let want = if j >= lo && j < hi.min(l) {
                            inside
                        } else {
                            outside
                        };
                        assert!(
                            same(got[k * l + j], want),
                            "{isa} {name} {i} {lo}..{hi} lane {j}"
                        );
                    }
                }
                assert_eq!(an[k * l] != 0.0, lo < hi.min(l), "{isa} any {lo}..{hi}");
                k += 1;
            }
        }
        // Range stores, every lo ≤ hi ≤ LANES.
        let mut sr = find("store_range").chunks(l);
        for i in (0..a.len() / l * l).step_by(l) {
            for lo in 0..=l {
                for hi in lo..=l {
                    let got = sr.next().unwrap();
                    for (j, g) in got.iter().enumerate() {
                        let want = if j >= lo && j < hi { a[i + j] } else { 1.5 };
                        assert!(same(*g, want), "{isa} store_range {i} {lo}..{hi} lane {j}");
                    }
                }
            }
        }
        // Reductions and vector math against f64.
        for (j, r) in find("reduce_add").chunks(l).enumerate() {
            let exact: f64 = a[j * l..(j + 1) * l]
                .iter()
                .map(|&x| x.clamp(-1e3, 1e3) as f64)
                .filter(|x| !x.is_nan())
                .sum();
            let mag: f64 = a[j * l..(j + 1) * l]
                .iter()
                .map(|&x| x.clamp(-1e3, 1e3).abs() as f64)
                .sum();
            if !a[j * l..(j + 1) * l].iter().any(|x| x.is_nan()) {
                assert!(
                    (r[0] as f64 - exact).abs() <= mag * 1e-6,
                    "{isa} reduce_add"
                );
            }
        }
        // exp_nonpositive: exp's bits down to EXP_NORMAL_MIN, +0 below it, NaN through.
        for (j, (g, e)) in find("exp_nonpositive")
            .iter()
            .zip(find("exp_of_nonpositive"))
            .enumerate()
        {
            let x = -100.0 * a[j].abs();
            let want = if x < math::EXP_NORMAL_MIN { 0.0 } else { *e };
            assert!(
                same(*g, want),
                "{isa} exp_nonpositive({x}) = {g}, want {want}"
            );
        }
        for (name, f, tol, abs) in [
            (
                "exp",
                (|x: f32| ((40.0 * x) as f64).exp()) as fn(f32) -> f64,
                5e-7,
                1e-44,
            ),
            ("tanh", |x: f32| ((4.0 * x) as f64).tanh(), 1e-6, 1e-44),
            ("erf", |x: f32| crate::erf_f64((3.0 * x) as f64), 0.0, 1e-6),
        ] {
            for (j, g) in find(name).iter().enumerate() {
                let x = a[j];
                let want = f(x);
                if want.is_nan() {
                    assert!(g.is_nan(), "{isa} {name}({x}): {g}");
                } else if want.is_infinite() || want.abs() > f32::MAX as f64 {
                    assert_eq!(
                        *g as f64,
                        want.signum() * f64::INFINITY,
                        "{isa} {name}({x})"
                    );
                } else {
                    let err = (*g as f64 - want).abs();
                    assert!(
                        err <= want.abs() * tol + abs,
                        "{isa} {name}({x}) = {g}, want {want}"
                    );
                }
            }
        }
    }
}

/// `join4` undoes `split4`, and `split4` puts column `c` of tile `k` in one lane of `out[c]`
/// for all four columns alike, each aligned block of 8 lanes staying in place.
#[test]
fn split4_join4_round_trip() {
    #[derive(Clone)]
    struct RoundTrip;
    impl Walk for RoundTrip {
        type Out = ();
        unsafe fn run<S: Simd>(self, s: S) {
            let l = S::LANES;
            let x: Vec<f32> = (0..4 * l).map(|i| i as f32).collect();
            let mut cols = [[0f32; 16]; 4];
            let mut back = vec![0f32; 4 * l];
            // SAFETY: x and back hold 4·LANES floats, each cols row 16 ≥ LANES.
            unsafe {
                let v = std::array::from_fn(|i| s.load(x.as_ptr().add(i * l)));
                let c = s.split4(v);
                for (i, ci) in c.iter().enumerate() {
                    s.store(cols[i].as_mut_ptr(), *ci);
                }
                for (i, vi) in s.join4(c).iter().enumerate() {
                    s.store(back.as_mut_ptr().add(i * l), *vi);
                }
            }
            assert_eq!(back, x);
            for lam in 0..l {
                let k = cols[0][lam] as usize / 4;
                assert_eq!(k / 8, lam / 8, "lane {lam} holds tile {k}");
                for (c, col) in cols.iter().enumerate() {
                    assert_eq!(col[lam], (4 * k + c) as f32);
                }
            }
        }
    }
    // SAFETY: no pointers.
    unsafe { for_each_isa(RoundTrip, |_, ()| ()) };
}
