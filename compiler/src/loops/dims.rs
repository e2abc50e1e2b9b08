//! One program for every value of a run-time dim, from programs lowered at several values.
//!
//! The stages before this one know dims as integers only. A model whose dim `seq` is to be
//! taken at run time is lowered at a few values of it (`PROBES`, and its bound); if the
//! programs differ only in integer constants (loop extents, strides and offsets inside
//! index expressions, kernel arguments and parameters, buffer sizes) and each such constant
//! is the same polynomial of degree two at most in `seq` at every value, the program with
//! those polynomials over the run-time value (`DIM_VAR`) computes the model at any value.
//! Layout is the bound's: every buffer, the arena and the workspace are planned at the bound,
//! where each size is largest (checked), so a run at a smaller value uses a prefix of each.
//!
//! Anything else that differs — a decision taken by size (a kernel, a fusion, a layout), a
//! constant table, a dim that is not a polynomial (`seq / 2`) — makes `generalize` fail,
//! saying where; the caller then asks for the dim to be fixed at compile time.

use super::{Arg, Buffer, Count, Func, IoDesc, Loc, Program, RunDim, RunTimeDim, Stmt};
use crate::ir::DType;
use crate::ir::expr::{self, E, Expr, ExprKind};
use crate::ir::tensor::Scalar;
use std::sync::Arc;

/// Part of `generalize`'s error when a constant is no polynomial of a step of the dims.
pub const NOT_POLYNOMIAL: &str = "not a polynomial of the dim";

/// `generalize`'s error when a constant table the compiler folded differs with the dims.
pub const FOLDED_TABLE: &str =
    "a constant it computes from the dims (a folded Range, Shape or table) differs with them";

/// Values of the run-time dim a model is lowered at besides its bound, when they lie in
/// its range: three to fit each constant's polynomial and the rest to check it. Far from
/// the powers of two and from one another, so that no size-based choice or coincidence of
/// two dims is likely to hold at all of them and not in general; and they take every
/// remainder modulo 2, 3 and 4 (37, 42, 47, 28: 1, 2, 3, 0 modulo 4), so that a size that
/// is a polynomial only on one remainder class (`4 · (seq / 4)` is `seq - 1` at 37, 41, 53
/// and 29, all 1 modulo 4) is not taken for one.
pub const PROBES: [i64; 4] = [37, 42, 47, 28];

/// The fewest values a program is checked at (three to fit, two to check).
const MIN_PROBES: usize = PROBES.len() + 1;

/// Smallest bound a run-time dim may have: below it there are too few probe values.
pub const MIN_BOUND: i64 = 16;

/// The values to lower a model at for a run-time dim in `least..=bound`: `PROBES` when
/// they lie in the range, else four values spread over it (`b`, `b + 5`,
/// `b + 10`, `b + 15`: each remainder modulo 2, 3 and 4 again), or in a range narrower
/// than 16 the four values below the bound; then the bound itself. None when fewer than
/// four values lie below the bound.
pub fn probe_sizes(least: i64, bound: i64) -> Option<Vec<i64>> {
    let least = least.max(1);
    let mut v = if PROBES.iter().all(|p| (least..bound).contains(p)) {
        PROBES.to_vec()
    } else if bound - least >= 16 {
        // Near the least value (smaller programs), clear of it.
        let b = least + ((bound - least - 16) / 2).min(9);
        vec![b, b + 5, b + 10, b + 15]
    } else if bound - least >= 4 {
        (bound - 4..bound).collect()
    } else {
        return None;
    };
    v.push(bound);
    Some(v)
}

/// `a0 + a1·d + a2·d²`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Poly([i64; 3]);

impl Poly {
    fn at(self, d: i64) -> Option<i64> {
        let [a0, a1, a2] = self.0.map(i128::from);
        let d = i128::from(d);
        i64::try_from(a0 + a1 * d + a2 * d * d).ok()
    }

    /// The polynomial through the first three points, if its coefficients are integers,
    /// when it passes through every point.
    fn fit(sizes: &[i64], vals: &[i64]) -> Option<Poly> {
        let (x, y): (Vec<i128>, Vec<i128>) = (
            sizes[..3].iter().map(|&v| v.into()).collect(),
            vals[..3].iter().map(|&v| v.into()).collect(),
        );
        // Newton's divided differences.
        let d01 = y[1] - y[0];
        let (h01, h12, h02) = (x[1] - x[0], x[2] - x[1], x[2] - x[0]);
        if h01 == 0 || h12 == 0 || h02 == 0 {
            return None;
        }
        let d12 = y[2] - y[1];
        // a2 = ((d12/h12) - (d01/h01)) / h02, in integers.
        let num = d12 * h01 - d01 * h12;
        let den = h01 * h12 * h02;
        if num % den != 0 {
            return None;
        }
        let a2 = num / den;
        // a1 from the first two points: (y1 - y0) = a1 (x1 - x0) + a2 (x1² - x0²).
        let r = d01 - a2 * (x[1] * x[1] - x[0] * x[0]);
        if r % h01 != 0 {
            return None;
        }
        let a1 = r / h01;
        let a0 = y[0] - a1 * x[0] - a2 * x[0] * x[0];
        let p = Poly([
            i64::try_from(a0).ok()?,
            i64::try_from(a1).ok()?,
            i64::try_from(a2).ok()?,
        ]);
        sizes
            .iter()
            .zip(vals)
            .all(|(&s, &v)| p.at(s) == Some(v))
            .then_some(p)
    }

    /// The expression over `d`.
    fn expr(self, d: E) -> E {
        let [a0, a1, a2] = self.0;
        let mut e = expr::i(a0);
        if a1 != 0 {
            e = expr::add(e, expr::mul(expr::i(a1), d.clone()));
        }
        if a2 != 0 {
            e = expr::add(e, expr::mul(expr::i(a2), expr::mul(d.clone(), d)));
        }
        e
    }

    /// Its least and largest values for dims in `least..=bound`, when it has no other
    /// extremum there than at the ends (`a2 ≥ 0`: convex) and its least value is not
    /// negative.
    fn range(self, least: i64, bound: i64) -> Option<(i64, i64)> {
        let [_, a1, a2] = self.0;
        if a2 < 0 {
            return None;
        }
        let hi = self.at(least)?.max(self.at(bound)?);
        // A convex polynomial's least value is at its vertex or an end.
        let mut lo = self.at(least)?.min(self.at(bound)?);
        if a2 > 0 {
            let v = (-a1) / (2 * a2);
            for d in [v, v + 1] {
                if (least..=bound).contains(&d) {
                    lo = lo.min(self.at(d)?);
                }
            }
        }
        (lo >= 0).then_some((lo, hi))
    }
}

/// The steps a constant may follow the dim by: `t = (d + pre) / div`, rounding down. A
/// window of stride `s` makes `(d + pre) / s` of the dim (a 3-wide convolution of stride 2
/// with padding 1 gives `(d - 1) / 2 + 1`, which is `(d + 1) / 2`; two of stride 2 give
/// `(d + pre) / 4`); strides whose product is above 4 (`d / 8`) are not taken.
const STEPS: [(i64, i64); 10] = [
    (1, 0),
    (2, 0),
    (2, 1),
    (3, 0),
    (3, 1),
    (3, 2),
    (4, 0),
    (4, 1),
    (4, 2),
    (4, 3),
];

/// A constant as a polynomial of a step of the dim: `poly((d + pre) / div)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fit {
    poly: Poly,
    pre: i64,
    div: i64,
}

impl Fit {
    fn step(&self, d: i64) -> i64 {
        (d + self.pre).div_euclid(self.div)
    }

    /// The polynomial of the first step of `STEPS` that passes through every point: the
    /// dim itself when one does.
    fn through(sizes: &[i64], vals: &[i64]) -> Option<Fit> {
        STEPS.iter().find_map(|&(div, pre)| {
            let steps: Vec<i64> = sizes.iter().map(|&d| (d + pre).div_euclid(div)).collect();
            Poly::fit(&steps, vals).map(|poly| Fit { poly, pre, div })
        })
    }

    /// The expression over run-time dim `dim` (`least ≥ 1`, so the division's dividend is
    /// positive and truncation rounds down).
    fn expr(self, dim: u32) -> E {
        let d = super::dim(dim);
        let t = if self.pre == 0 {
            d
        } else {
            expr::add(d, expr::i(self.pre))
        };
        self.poly.expr(expr::idiv(t, self.div))
    }

    /// Its least and largest values for dims in `least..=bound` (`Poly::range` over the
    /// steps, which take every integer between theirs at the ends).
    fn range(self, least: i64, bound: i64) -> Option<(i64, i64)> {
        self.poly.range(self.step(least), self.step(bound))
    }
}

/// A constant that follows the run-time dims: a polynomial of a step of one of them, or with
/// two dims a bilinear form of a step of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    One(u32, Fit),
    /// `c[0] + c[1]·s + c[2]·t + c[3]·s·t` for `s` the step `(d0 + pre) / div` of dim 0
    /// (`sa`: `(div, pre)`) and `t` that of dim 1 (`sb`).
    Two {
        sa: (i64, i64),
        sb: (i64, i64),
        c: [i64; 4],
    },
    /// `Σ c[3i + j]·sⁱ·tʲ` (`i, j ≤ 2`) for steps `s`, `t` as in `Two`, every coefficient
    /// non-negative (so it grows with each dim): an attention's scores, `batch · heads ·
    /// seq²`, with batch and seq both taken at run time.
    Quad {
        sa: (i64, i64),
        sb: (i64, i64),
        c: [i64; 9],
    },
}

/// An exact fraction (`Form::quad`'s fits), its denominator positive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ratio(i128, i128);

impl Ratio {
    fn int(v: i128) -> Ratio {
        Ratio(v, 1)
    }

    fn new(n: i128, d: i128) -> Option<Ratio> {
        if d == 0 {
            return None;
        }
        let (mut a, mut b) = (n.unsigned_abs(), d.unsigned_abs());
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let g = (a.max(1)) as i128 * d.signum();
        Some(Ratio(n / g, d / g))
    }

    fn sub(self, o: Ratio) -> Option<Ratio> {
        let n = self
            .0
            .checked_mul(o.1)?
            .checked_sub(o.0.checked_mul(self.1)?)?;
        Ratio::new(n, self.1.checked_mul(o.1)?)
    }

    fn mul(self, o: Ratio) -> Option<Ratio> {
        Ratio::new(self.0.checked_mul(o.0)?, self.1.checked_mul(o.1)?)
    }

    fn div(self, o: Ratio) -> Option<Ratio> {
        Ratio::new(self.0.checked_mul(o.1)?, self.1.checked_mul(o.0)?)
    }

    /// The quadratic `[c0, c1, c2]` (`c0 + c1·x + c2·x²`) through three points of distinct
    /// `x` (Newton's divided differences).
    fn quadratic(x: [i128; 3], y: [Ratio; 3]) -> Option<[Ratio; 3]> {
        let x = x.map(Ratio::int);
        let d01 = y[1].sub(y[0])?.div(x[1].sub(x[0])?)?;
        let d02 = y[2].sub(y[0])?.div(x[2].sub(x[0])?)?;
        let c2 = d02.sub(d01)?.div(x[2].sub(x[1])?)?;
        // y0 + d01·(x − x0) + c2·(x − x0)(x − x1).
        let c1 = d01.sub(c2.mul(Ratio::int(x[0].0 + x[1].0))?)?;
        let c0 = y[0]
            .sub(d01.mul(x[0])?)?
            .sub(Ratio(-1, 1).mul(c2)?.mul(x[0].mul(x[1])?)?)?;
        Some([c0, c1, c2])
    }
}

/// A step `(div, pre)` of a dim: `(d + pre) / div` (`STEPS`).
type Step = (i64, i64);

/// `(d + pre) / div` for a step `(div, pre)`.
fn step_of((div, pre): Step, d: i64) -> i64 {
    (d + pre).div_euclid(div)
}

/// The expression of `(dim + pre) / div`.
fn step_expr((div, pre): (i64, i64), dim: u32) -> E {
    let d = super::dim(dim);
    let t = if pre == 0 {
        d
    } else {
        expr::add(d, expr::i(pre))
    };
    if div == 1 { t } else { expr::idiv(t, div) }
}

impl Form {
    fn at2(c: [i64; 4], s: i64, t: i64) -> Option<i64> {
        let [c0, c1, c2, c3] = c.map(i128::from);
        let (s, t) = (i128::from(s), i128::from(t));
        i64::try_from(c0 + c1 * s + c2 * t + c3 * s * t).ok()
    }

    /// Each pair of steps of the two dims (`STEPS`), with the points in those steps.
    fn step_pairs(points: &[Vec<i64>]) -> impl Iterator<Item = (Step, Step, Vec<(i64, i64)>)> {
        let pairs = STEPS
            .iter()
            .flat_map(|&sa| STEPS.iter().map(move |&sb| (sa, sb)));
        pairs.map(|(sa, sb)| {
            let st = (points.iter())
                .map(|p| (step_of(sa, p[0]), step_of(sb, p[1])))
                .collect();
            (sa, sb, st)
        })
    }

    /// The bilinear form of a step of each of two dims through every point, if one is.
    fn two(points: &[Vec<i64>], vals: &[i64]) -> Option<Form> {
        for (sa, sb, st) in Form::step_pairs(points) {
            // A rectangle of points: (s0, t0), (s1, t0), (s0, t1), (s1, t1).
            let (s0, t0) = st[0];
            let Some(i1) = st.iter().position(|&(s, t)| t == t0 && s != s0) else {
                continue;
            };
            let Some(i2) = st.iter().position(|&(s, t)| s == s0 && t != t0) else {
                continue;
            };
            let (s1, t1) = (st[i1].0, st[i2].1);
            let Some(i3) = st.iter().position(|&x| x == (s1, t1)) else {
                continue;
            };
            let v = |i: usize| i128::from(vals[i]);
            let (ds, dt) = (i128::from(s1 - s0), i128::from(t1 - t0));
            let num = v(i3) - v(i1) - v(i2) + v(0);
            if num % (ds * dt) != 0 {
                continue;
            }
            let c3 = num / (ds * dt);
            let (b1, b2) = (v(i1) - v(0), v(i2) - v(0));
            // v(s, t0) − v(s0, t0) = (c1 + c3·t0)(s − s0); likewise in t.
            if b1 % ds != 0 || b2 % dt != 0 {
                continue;
            }
            let c1 = b1 / ds - c3 * i128::from(t0);
            let c2 = b2 / dt - c3 * i128::from(s0);
            let (s0w, t0w) = (i128::from(s0), i128::from(t0));
            let c0 = v(0) - c1 * s0w - c2 * t0w - c3 * s0w * t0w;
            let c = [
                i64::try_from(c0).ok()?,
                i64::try_from(c1).ok()?,
                i64::try_from(c2).ok()?,
                i64::try_from(c3).ok()?,
            ];
            if st
                .iter()
                .zip(vals)
                .all(|(&(s, t), &v)| Form::at2(c, s, t) == Some(v))
            {
                return Some(Form::Two { sa, sb, c });
            }
        }
        None
    }

    fn at9(c: [i64; 9], s: i64, t: i64) -> Option<i64> {
        let (s, t) = (i128::from(s), i128::from(t));
        let mut v: i128 = 0;
        for (k, &ck) in c.iter().enumerate() {
            let term = i128::from(ck)
                .checked_mul(s.checked_pow(k as u32 / 3)?)?
                .checked_mul(t.checked_pow(k as u32 % 3)?)?;
            v = v.checked_add(term)?;
        }
        i64::try_from(v).ok()
    }

    /// The form of degree two at most in a step of each of two dims, with non-negative
    /// integer coefficients, through every point, if one is: fitted on the first three
    /// values of each step whose nine pairs are among the points, checked on them all.
    fn quad(points: &[Vec<i64>], vals: &[i64]) -> Option<Form> {
        for (sa, sb, st) in Form::step_pairs(points) {
            let mut ss: Vec<i64> = Vec::new();
            let mut ts: Vec<i64> = Vec::new();
            for &(s, t) in &st {
                if !ss.contains(&s) && ss.len() < 3 {
                    ss.push(s);
                }
                if !ts.contains(&t) && ts.len() < 3 {
                    ts.push(t);
                }
            }
            if ss.len() < 3 || ts.len() < 3 {
                continue;
            }
            let at = |s: i64, t: i64| {
                (st.iter().position(|&q| q == (s, t))).map(|k| Ratio::int(vals[k].into()))
            };
            let xs = [ss[0], ss[1], ss[2]].map(i128::from);
            let yt = [ts[0], ts[1], ts[2]].map(i128::from);
            // Per value of t, the quadratic in s; then each of its coefficients in t.
            let mut by_t = Vec::new();
            for &t in &ts {
                let ys = [at(ss[0], t), at(ss[1], t), at(ss[2], t)];
                let [Some(a), Some(b), Some(c)] = ys else {
                    break;
                };
                by_t.push(Ratio::quadratic(xs, [a, b, c]));
            }
            let [Some(q0), Some(q1), Some(q2)] = by_t[..] else {
                continue;
            };
            let mut c = [0i64; 9];
            let mut whole = true;
            for i in 0..3 {
                let Some(ci) = Ratio::quadratic(yt, [q0[i], q1[i], q2[i]]) else {
                    whole = false;
                    break;
                };
                for (j, r) in ci.iter().enumerate() {
                    match (r.1 == 1).then(|| i64::try_from(r.0).ok()).flatten() {
                        Some(v) if v >= 0 => c[3 * i + j] = v,
                        _ => whole = false,
                    }
                }
            }
            if whole
                && st
                    .iter()
                    .zip(vals)
                    .all(|(&(s, t), &v)| Form::at9(c, s, t) == Some(v))
            {
                return Some(Form::Quad { sa, sb, c });
            }
        }
        None
    }

    fn expr(self) -> E {
        match self {
            Form::One(d, fit) => fit.expr(d),
            Form::Quad { sa, sb, c } => {
                let (s, t) = (step_expr(sa, 0), step_expr(sb, 1));
                let power = |x: &E, n: usize| match n {
                    0 => None,
                    1 => Some(x.clone()),
                    _ => Some(expr::mul(x.clone(), x.clone())),
                };
                let mut e = expr::i(c[0]);
                for (k, &ck) in c.iter().enumerate().skip(1) {
                    if ck == 0 {
                        continue;
                    }
                    let term = match (power(&s, k / 3), power(&t, k % 3)) {
                        (Some(a), Some(b)) => expr::mul(a, b),
                        (Some(a), None) | (None, Some(a)) => a,
                        (None, None) => unreachable!("k ≥ 1"),
                    };
                    e = expr::add(e, expr::mul(expr::i(ck), term));
                }
                e
            }
            Form::Two { sa, sb, c } => {
                let (s, t) = (step_expr(sa, 0), step_expr(sb, 1));
                let mut e = expr::i(c[0]);
                for (k, term) in [
                    (c[1], s.clone()),
                    (c[2], t.clone()),
                    (c[3], expr::mul(s, t)),
                ] {
                    if k != 0 {
                        e = expr::add(e, expr::mul(expr::i(k), term));
                    }
                }
                e
            }
        }
    }

    /// Its least and largest values for dims in `least..=bound` (each), when its least
    /// value is not negative.
    fn range(self, least: &[i64], bound: &[i64]) -> Option<(i64, i64)> {
        match self {
            Form::One(d, fit) => fit.range(least[d as usize], bound[d as usize]),
            // Bilinear in steps that take every integer between their ends: its extremes
            // lie at the corners.
            Form::Two { sa, sb, c } => {
                let mut vals = Vec::new();
                for a in [least[0], bound[0]] {
                    for b in [least[1], bound[1]] {
                        vals.push(Form::at2(c, step_of(sa, a), step_of(sb, b))?);
                    }
                }
                let (lo, hi) = (*vals.iter().min()?, *vals.iter().max()?);
                (lo >= 0).then_some((lo, hi))
            }
            // Non-negative coefficients over non-negative steps: least at the least
            // values, largest at the bounds.
            Form::Quad { sa, sb, c } => {
                let (a, b) = (step_of(sa, least[0]), step_of(sb, least[1]));
                if a < 0 || b < 0 {
                    return None;
                }
                let hi = Form::at9(c, step_of(sa, bound[0]), step_of(sb, bound[1]))?;
                Some((Form::at9(c, a, b)?, hi))
            }
        }
    }
}

/// The programs for each value of `sizes` (the last the bound), as one program taking run-time
/// dim `name` (`Program::run_dims`) at any value from `least` (the model's least valid value)
/// to the bound, or why they are not one.
pub fn generalize(
    name: &str,
    least: i64,
    sizes: &[i64],
    programs: &[&Program],
) -> Result<Program, String> {
    let points: Vec<Vec<i64>> = sizes.iter().map(|&s| vec![s]).collect();
    generalize_dims(&[name], &[least], &points, programs)
}

/// `generalize` for one or two run-time dims `names`: the programs lowered at `points` (a
/// value of each dim; the last the bounds), as one program taking the dims at any values
/// from `least` to the bounds.
pub fn generalize_dims(
    names: &[&str],
    least: &[i64],
    points: &[Vec<i64>],
    programs: &[&Program],
) -> Result<Program, String> {
    assert!(points.len() >= MIN_PROBES && points.len() == programs.len());
    assert!((1..=2).contains(&names.len()) && least.len() == names.len());
    let name = names.join("' and '");
    let name = name.as_str();
    let u = Unify {
        points,
        least,
        bound: points.last().expect("probes"),
    };
    let ps = programs;
    let last = *ps.last().expect("probes");
    if ps.iter().any(|p| !p.chunks.is_empty()) {
        return Err("the model also carries chunk programs".into());
    }
    let same = |what: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!("its {what} differ with '{name}'"))
        }
    };
    same(
        "steps",
        ps.iter().all(|p| p.funcs.len() == last.funcs.len()),
    )?;
    same(
        "buffers",
        ps.iter().all(|p| p.buffers.len() == last.buffers.len()),
    )?;
    same(
        "inputs and outputs",
        ps.iter()
            .all(|p| p.inputs.len() == last.inputs.len() && p.outputs.len() == last.outputs.len()),
    )?;
    // The bound's workspace layout serves every smaller value.
    let fits = ps.iter().all(|p| {
        p.workspace_size <= last.workspace_size
            && p.scratch_base <= last.scratch_base
            && p.scratch_shared <= last.scratch_shared
            && p.scratch_per_worker <= last.scratch_per_worker
            && p.string_bytes <= last.string_bytes
    });
    same("workspace layouts (not largest at the bound)", fits)?;
    let buffers = (0..last.buffers.len())
        .map(|k| {
            u.buffer(&ps.iter().map(|p| &p.buffers[k]).collect::<Vec<_>>())
                .map_err(|e| format!("{e} (buffer {k})"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut funcs = Vec::new();
    for k in 0..last.funcs.len() {
        let fs: Vec<&Func> = ps.iter().map(|p| &p.funcs[k]).collect();
        let f = u
            .func(&fs)
            .map_err(|e| format!("{e}, in {} ({})", last.funcs[k].name, last.funcs[k].origin))?;
        funcs.push(f);
    }
    let io = |get: &dyn Fn(&Program) -> &[IoDesc], input: bool| {
        (0..get(last).len())
            .map(|k| u.io(&ps.iter().map(|p| &get(p)[k]).collect::<Vec<_>>(), input))
            .collect::<Result<Vec<IoDesc>, String>>()
    };
    let inputs = io(&|p| &p.inputs, true)?;
    let outputs = io(&|p| &p.outputs, false)?;
    for (k, n) in names.iter().enumerate() {
        if !inputs.iter().any(|d| {
            d.run_dims
                .iter()
                .any(|r| r.is_some_and(|r| r.dim as usize == k && r.mul > 0 && r.div == 1))
        }) {
            return Err(format!("no input carries '{n}'"));
        }
    }
    Ok(Program {
        buffers,
        funcs,
        inputs,
        outputs,
        run_dims: (names.iter().enumerate())
            .map(|(k, n)| RunTimeDim {
                name: n.to_string(),
                least: least[k],
                bound: u.bound[k],
                multiple: 1,
            })
            .collect(),
        ..last.clone()
    })
}

/// Why `p`, the model's program lowered at the values `at` of the run-time dims
/// (`Fixed::at`), cannot run for those values in place of `general` (the generalized
/// program; `Program::fixed`): it must take and give the same tensors, at the dims
/// `general`'s formulas give there. Where `at` leaves a dim to `p` (its only run-time dim,
/// of the same name, multiple and bound), that is checked at `p`'s least value of it, its
/// bound and between.
pub fn fixed_fits(general: &Program, at: &[Option<i64>], p: &Program) -> Result<(), String> {
    let free: Vec<usize> = (0..at.len()).filter(|&k| at[k].is_none()).collect();
    let takes = match (&free[..], &p.run_dims[..]) {
        ([], []) => true,
        ([j], [d]) => {
            let g = &general.run_dims[*j];
            d.name == g.name && d.multiple == g.multiple && d.bound == g.bound
        }
        _ => false,
    };
    if at.len() != general.run_dims.len()
        || !takes
        || !p.chunks.is_empty()
        || !p.fixed.is_empty()
        || p.dynamic()
    {
        return Err("it is not one plain program".into());
    }
    let same = |g: &[IoDesc], q: &[IoDesc], what: &str, values: &[i64], x: i64| {
        if g.len() != q.len() {
            return Err(format!("its {what} differ in number"));
        }
        let at = |t: &IoDesc, value: &dyn Fn(&RunDim) -> i64| -> Vec<i64> {
            (t.shape.iter().enumerate())
                .map(|(k, &d)| match t.run_dims.get(k) {
                    Some(Some(r)) => value(r),
                    _ => d,
                })
                .collect()
        };
        for (a, b) in g.iter().zip(q) {
            let dims = at(a, &|r| r.at(values[r.dim as usize]));
            let theirs = at(b, &|r| r.at(x));
            if a.dtype != b.dtype
                || dims != theirs
                || a.batched != b.batched
                || a.hidden != b.hidden
                || a.map_key != b.map_key
                || a.dims_at != b.dims_at
            {
                return Err(format!(
                    "its {what} '{}' is {theirs:?} at {values:?}, where the formulas give \
                     {dims:?}",
                    b.name
                ));
            }
        }
        Ok(())
    };
    let xs = match p.run_dims.first() {
        Some(d) => vec![d.least, (d.least + d.bound) / 2, d.bound],
        None => vec![0],
    };
    for x in xs {
        let values: Vec<i64> = at.iter().map(|v| v.unwrap_or(x)).collect();
        same(&general.inputs, &p.inputs, "input", &values, x)?;
        same(&general.outputs, &p.outputs, "output", &values, x)?;
    }
    Ok(())
}

struct Unify<'a> {
    /// Each program's values of the run-time dims.
    points: &'a [Vec<i64>],
    /// The run-time dims' ranges of values.
    least: &'a [i64],
    bound: &'a [i64],
}

/// A constant of the programs: the same everywhere, or a function of the run-time dims.
enum Int {
    Same(i64),
    Poly(Form),
}

impl Unify<'_> {
    fn int(&self, vals: &[i64]) -> Result<Int, String> {
        if vals.iter().all(|&v| v == vals[0]) {
            return Ok(Int::Same(vals[0]));
        }
        // A function of one dim: the same wherever that dim is, then a polynomial of a step
        // of it through its values in the order they come.
        for d in 0..self.least.len() {
            let mut xs: Vec<i64> = Vec::new();
            let mut ys: Vec<i64> = Vec::new();
            let mut one = true;
            for (p, &v) in self.points.iter().zip(vals) {
                match xs.iter().position(|&x| x == p[d]) {
                    Some(i) => one &= ys[i] == v,
                    None => {
                        xs.push(p[d]);
                        ys.push(v);
                    }
                }
            }
            if one
                && xs.len() >= 4
                && let Some(fit) = Fit::through(&xs, &ys)
            {
                return Ok(Int::Poly(Form::One(d as u32, fit)));
            }
        }
        if self.least.len() == 2
            && let Some(f) = Form::two(self.points, vals).or_else(|| Form::quad(self.points, vals))
        {
            return Ok(Int::Poly(f));
        }
        Err(format!(
            "a constant takes the values {vals:?} at {:?}, {NOT_POLYNOMIAL} or of \
             its step by a stride up to 4",
            self.points
        ))
    }

    /// Ok when every program has the same `vals`.
    fn equal<T: PartialEq + std::fmt::Debug>(
        &self,
        what: &str,
        vals: impl IntoIterator<Item = T>,
    ) -> Result<(), String> {
        let vals: Vec<T> = vals.into_iter().collect();
        if vals.iter().all(|v| *v == vals[0]) {
            Ok(())
        } else {
            Err(format!(
                "its {what} differ: {:?} and {:?}",
                vals[0],
                vals[vals.len() - 1]
            ))
        }
    }

    fn count(&self, cs: &[&Count]) -> Result<Count, String> {
        let vals: Vec<i64> = cs
            .iter()
            .map(|c| c.fixed().ok_or("a count is already run-time"))
            .collect::<Result<_, _>>()?;
        Ok(match self.int(&vals)? {
            Int::Same(n) => Count::Fixed(n),
            Int::Poly(p) => {
                let (_, max) = p.range(self.least, self.bound).ok_or_else(|| {
                    format!("a count {vals:?} would be negative or not largest at the bound")
                })?;
                Count::Dyn { e: p.expr(), max }
            }
        })
    }

    fn buffer(&self, bs: &[&Buffer]) -> Result<Buffer, String> {
        let last = bs[bs.len() - 1];
        self.equal("buffer types", bs.iter().map(|b| b.dtype))?;
        // Lengths: the bound's, largest.
        let lens: Vec<i64> = bs.iter().map(|b| b.len).collect();
        if let Int::Poly(p) = self.int(&lens)? {
            p.range(self.least, self.bound)
                .filter(|&(_, hi)| hi == last.len)
                .ok_or_else(|| format!("a buffer's length {lens:?} is not largest at the bound"))?;
        }
        // A slice's offset: the same everywhere, or a function of the dims (a slice past
        // channels whose planes they size), not negative.
        let offsets: Vec<i64> = (bs.iter())
            .map(|b| i64::try_from(b.offset).map_err(|_| "a slice offset is too large"))
            .collect::<Result<_, _>>()?;
        let offset_at = match self
            .int(&offsets)
            .map_err(|e| format!("{e} (a slice offset)"))?
        {
            Int::Same(_) => None,
            Int::Poly(p) => {
                p.range(self.least, self.bound)
                    .ok_or_else(|| format!("a slice offset {offsets:?} would be negative"))?;
                Some(p.expr())
            }
        };
        let loc = match &last.loc {
            Loc::Input(_) | Loc::Output(_) => {
                self.equal("buffer places", bs.iter().map(|b| format!("{:?}", b.loc)))?;
                last.loc.clone()
            }
            Loc::Const(d) => {
                let same = bs.iter().all(|b| match &b.loc {
                    Loc::Const(e) => Arc::ptr_eq(d, e) || d == e,
                    _ => false,
                });
                if !same {
                    return Err(FOLDED_TABLE.into());
                }
                last.loc.clone()
            }
            // The bound's arena plan: every buffer is largest there.
            Loc::Arena(o) => {
                if !bs.iter().all(|b| matches!(b.loc, Loc::Arena(_))) {
                    return Err("a buffer's place differs".into());
                }
                Loc::Arena(*o)
            }
        };
        Ok(Buffer {
            dtype: last.dtype,
            len: last.len,
            loc,
            offset: last.offset,
            offset_at,
        })
    }

    /// An input (`input`: its dims must give the run-time dim's value) or output.
    fn io(&self, ds: &[&IoDesc], input: bool) -> Result<IoDesc, String> {
        let last = ds[ds.len() - 1];
        self.equal("input or output names", ds.iter().map(|d| &d.name))?;
        self.equal("input or output types", ds.iter().map(|d| d.dtype))?;
        self.equal("input or output ranks", ds.iter().map(|d| d.shape.len()))?;
        if ds.iter().any(|d| d.map_key.is_some() || d.keys.is_some()) {
            return Err(format!("'{}' is a map", last.name));
        }
        if ds.iter().any(|d| d.dims_at.is_some()) {
            return self.data_dependent(ds);
        }
        let mut run_dims = Vec::new();
        for k in 0..last.shape.len() {
            let vals: Vec<i64> = ds.iter().map(|d| d.shape[k]).collect();
            run_dims.push(match self.int(&vals)? {
                Int::Same(_) => None,
                Int::Poly(Form::One(
                    dim,
                    Fit {
                        poly: Poly([add, mul, 0]),
                        pre,
                        div,
                    },
                )) if mul > 0 && (div == 1 || !input) => Some(RunDim {
                    dim,
                    mul,
                    add,
                    pre,
                    div,
                }),
                Int::Poly(_) => {
                    return Err(format!(
                        "dim {k} of '{}' takes the values {vals:?} (onnxc takes input dims of \
                         the form a·N + b and output dims of the form a·((N + c) / s) + b, each \
                         of one run-time dim)",
                        last.name
                    ));
                }
            });
        }
        let any = run_dims.iter().any(Option::is_some);
        // The ABI sizes a tensor at the run-time dims from its bytes per element.
        if any && last.dtype.packed_bits().is_some() {
            return Err(format!(
                "'{}' is {}, packed several elements to a byte, and its dims follow the dim",
                last.name, last.dtype
            ));
        }
        Ok(IoDesc {
            run_dims: if any { run_dims } else { vec![] },
            ..last.clone()
        })
    }

    /// An output whose dims depend on the data (`IoDesc::dims_at`): its bound is the one at
    /// the run-time dims' bounds, where it is largest, and only its leading dim may follow
    /// them (`NAME_run_shaped` stages it at that bound and takes its rows from the front:
    /// a trailing dim's bound would set every row's place).
    fn data_dependent(&self, ds: &[&IoDesc]) -> Result<IoDesc, String> {
        let last = ds[ds.len() - 1];
        self.equal("dims' places", ds.iter().map(|d| d.dims_at))?;
        self.equal(
            "trailing dims",
            ds.iter().map(|d| d.shape.get(1..).map(<[i64]>::to_vec)),
        )?;
        let rows: Vec<i64> = ds
            .iter()
            .map(|d| d.shape.first().copied().unwrap_or(1))
            .collect();
        if rows.iter().any(|&r| r > rows[rows.len() - 1]) {
            return Err(format!(
                "'{}' has as many rows as the data selects, at most {rows:?}: not most at \
                 the bound",
                last.name
            ));
        }
        Ok(last.clone())
    }

    fn func(&self, fs: &[&Func]) -> Result<Func, String> {
        let last = fs[fs.len() - 1];
        self.equal("step names", fs.iter().map(|f| &f.name))?;
        self.equal("parallel flags", fs.iter().map(|f| f.parallel))?;
        let bodies: Vec<&[Stmt]> = fs.iter().map(|f| &f.body[..]).collect();
        Ok(Func {
            body: self.stmts(&bodies)?,
            ..last.clone()
        })
    }

    fn stmts(&self, bodies: &[&[Stmt]]) -> Result<Vec<Stmt>, String> {
        let n = bodies[0].len();
        if bodies.iter().any(|b| b.len() != n) {
            return Err("its statements differ".into());
        }
        (0..n)
            .map(|k| self.stmt(&bodies.iter().map(|b| &b[k]).collect::<Vec<_>>()))
            .collect()
    }

    fn stmt(&self, ss: &[&Stmt]) -> Result<Stmt, String> {
        let differ = || Err("its statements differ".to_string());
        macro_rules! all {
            ($pat:pat => $out:expr) => {
                ss.iter()
                    .map(|s| match s {
                        $pat => Ok($out),
                        _ => Err("its statements differ".to_string()),
                    })
                    .collect::<Result<Vec<_>, String>>()?
            };
        }
        Ok(match ss[0] {
            Stmt::For { .. } => {
                let parts = all!(Stmt::For { var, extent, vector, body } => (*var, extent, *vector, &body[..]));
                self.equal("loops", parts.iter().map(|p| p.0))?;
                // Whether a loop is vectorized follows its length (short ones are not); the
                // bound's choice serves every length (codegen runs the remainder scalar).
                Stmt::For {
                    var: parts[0].0,
                    extent: self.count(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    vector: parts[parts.len() - 1].2,
                    body: self.stmts(&parts.iter().map(|p| p.3).collect::<Vec<_>>())?,
                }
            }
            Stmt::Store { .. } => {
                let parts = all!(Stmt::Store { buf, offset, value } => (*buf, offset, value));
                self.equal("stores", parts.iter().map(|p| p.0))?;
                Stmt::Store {
                    buf: parts[0].0,
                    offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    value: self.expr(&parts.iter().map(|p| p.2).collect::<Vec<_>>())?,
                }
            }
            Stmt::Reduce { .. } => {
                let parts = all!(Stmt::Reduce { buf, offset, kind, loops, body, epilogue } =>
                    (*buf, offset, *kind, loops, body, epilogue));
                self.equal(
                    "reductions",
                    parts
                        .iter()
                        .map(|p| (p.0, format!("{:?}", p.2), p.3.len(), p.5.is_some())),
                )?;
                let mut loops = Vec::new();
                for k in 0..parts[0].3.len() {
                    let vars: Vec<u32> = parts.iter().map(|p| p.3[k].0).collect();
                    self.equal("reduction loops", &vars)?;
                    let c = self.count(&parts.iter().map(|p| &p.3[k].1).collect::<Vec<_>>())?;
                    loops.push((vars[0], c));
                }
                let epilogue = match parts[0].5 {
                    Some(_) => Some(
                        self.expr(
                            &parts
                                .iter()
                                .map(|p| p.5.as_ref().expect("checked"))
                                .collect::<Vec<_>>(),
                        )?,
                    ),
                    None => None,
                };
                Stmt::Reduce {
                    buf: parts[0].0,
                    offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    kind: parts[0].2,
                    loops,
                    body: self.expr(&parts.iter().map(|p| p.4).collect::<Vec<_>>())?,
                    epilogue,
                }
            }
            Stmt::Copy { .. } => {
                let parts = all!(Stmt::Copy { dst, dst_offset, src, src_offset, elems } =>
                    (*dst, dst_offset, *src, src_offset, elems));
                self.equal("copies", parts.iter().map(|p| (p.0, p.2)))?;
                Stmt::Copy {
                    dst: parts[0].0,
                    dst_offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    src: parts[0].2,
                    src_offset: self.expr(&parts.iter().map(|p| p.3).collect::<Vec<_>>())?,
                    elems: self.count(&parts.iter().map(|p| p.4).collect::<Vec<_>>())?,
                }
            }
            Stmt::Check { .. } => {
                let parts = all!(Stmt::Check { cond, code } => (cond, *code));
                self.equal("checks", parts.iter().map(|p| p.1))?;
                Stmt::Check {
                    cond: self.expr(&parts.iter().map(|p| p.0).collect::<Vec<_>>())?,
                    code: parts[0].1,
                }
            }
            Stmt::Call { kernel, .. } => {
                let parts = all!(Stmt::Call { kernel, args } => (kernel.symbol, args));
                self.equal("kernels", parts.iter().map(|p| p.0))?;
                let n = parts[0].1.len();
                if parts.iter().any(|p| p.1.len() != n) {
                    return differ();
                }
                let mut args = Vec::new();
                for k in 0..n {
                    let a: Vec<&Arg> = parts.iter().map(|p| &p.1[k]).collect();
                    args.push(
                        self.arg(&a)
                            .map_err(|e| format!("{e} (argument {k} of {})", kernel.symbol))?,
                    );
                }
                Stmt::Call { kernel, args }
            }
        })
    }

    fn arg(&self, args: &[&Arg]) -> Result<Arg, String> {
        let last = args[args.len() - 1];
        let differ = || Err("its kernel arguments differ".to_string());
        Ok(match last {
            Arg::Ptr { buf, .. } => {
                let mut offs = Vec::new();
                for a in args {
                    match a {
                        Arg::Ptr { buf: b, offset } if b == buf => offs.push(offset),
                        _ => return differ(),
                    }
                }
                Arg::Ptr {
                    buf: *buf,
                    offset: self.expr(&offs)?,
                }
            }
            Arg::Int(_) => {
                let mut es = Vec::new();
                for a in args {
                    match a {
                        Arg::Int(e) => es.push(e),
                        _ => return differ(),
                    }
                }
                Arg::Int(self.expr(&es)?)
            }
            Arg::Params(p) => {
                let mut ps = Vec::new();
                for a in args {
                    match a {
                        Arg::Params(q) if q.len() == p.len() => ps.push(q),
                        _ => return differ(),
                    }
                }
                let mut dynamic = false;
                let mut out = Vec::new();
                for k in 0..p.len() {
                    let vals: Vec<i64> = ps.iter().map(|q| q[k]).collect();
                    out.push(match self.int(&vals)? {
                        Int::Same(v) => expr::i(v),
                        Int::Poly(poly) => {
                            dynamic = true;
                            poly.expr()
                        }
                    });
                }
                if dynamic {
                    Arg::DynParams(out)
                } else {
                    last.clone()
                }
            }
            // The bound's scratch layout.
            Arg::Scratch { .. } => {
                if !args.iter().all(|a| matches!(a, Arg::Scratch { .. })) {
                    return differ();
                }
                last.clone()
            }
            Arg::Null | Arg::Threads | Arg::Floats(_) | Arg::Blob(_) | Arg::DynParams(_) => {
                let texts: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
                if texts.iter().any(|t| *t != texts[0]) {
                    return Err("a kernel's constant table differs with the dims".into());
                }
                last.clone()
            }
        })
    }

    fn expr(&self, es: &[&E]) -> Result<E, String> {
        let first = es[0];
        if es.iter().all(|e| Arc::ptr_eq(e, first) || ***e == **first) {
            return Ok(first.clone());
        }
        let dtype = first.dtype;
        if es.iter().any(|e| e.dtype != dtype) {
            return Err("an expression's type differs".into());
        }
        let differ = || "its expressions differ".to_string();
        let kids = |k: usize| -> Result<E, String> {
            let cs: Vec<&E> = es.iter().map(|e| e.children()[k]).collect();
            self.expr(&cs)
        };
        let same_shape = es.iter().all(|e| {
            std::mem::discriminant(&e.kind) == std::mem::discriminant(&first.kind)
                && e.children().len() == first.children().len()
        });
        if !same_shape {
            return Err(differ());
        }
        let kind = match &first.kind {
            ExprKind::Const(_) => return self.constant(es),
            ExprKind::Var(_) => return Err(differ()),
            ExprKind::Load { input, index } => {
                let mut out = Vec::new();
                for k in 0..index.len() {
                    let mut cs = Vec::new();
                    for e in es {
                        match &e.kind {
                            ExprKind::Load {
                                input: i2,
                                index: ix,
                            } if i2 == input => cs.push(&ix[k]),
                            _ => return Err(differ()),
                        }
                    }
                    out.push(self.expr(&cs)?);
                }
                ExprKind::Load {
                    input: *input,
                    index: out,
                }
            }
            ExprKind::Unary(op, _) => {
                if es
                    .iter()
                    .any(|e| !matches!(&e.kind, ExprKind::Unary(o, _) if o == op))
                {
                    return Err(differ());
                }
                ExprKind::Unary(*op, kids(0)?)
            }
            ExprKind::Binary(op, _, _) => {
                if es
                    .iter()
                    .any(|e| !matches!(&e.kind, ExprKind::Binary(o, _, _) if o == op))
                {
                    return Err(differ());
                }
                ExprKind::Binary(*op, kids(0)?, kids(1)?)
            }
            ExprKind::Select(..) => ExprKind::Select(kids(0)?, kids(1)?, kids(2)?),
            ExprKind::Cast(_) => ExprKind::Cast(kids(0)?),
            ExprKind::CheckIndex { bound, .. } => {
                let bounds: Vec<i64> = (es.iter())
                    .map(|e| match &e.kind {
                        ExprKind::CheckIndex { bound, .. } => Ok(*bound),
                        _ => Err(differ()),
                    })
                    .collect::<Result<_, _>>()?;
                let index = kids(0)?;
                match self.int(&bounds) {
                    Ok(Int::Same(_)) => ExprKind::CheckIndex {
                        index,
                        bound: *bound,
                    },
                    Ok(Int::Poly(p)) => return self.checked_index(index, p, &bounds),
                    Err(_) => return Err("a checked index's bound depends on the dims".into()),
                }
            }
        };
        Ok(Arc::new(Expr { dtype, kind }))
    }

    /// An index checked against a bound `p` of the dims (rows gathered from a tensor the
    /// dims size; `bounds` at the programs' values): wrapped and checked against `p` at run
    /// time, then against the bound at the dims' bounds, `b`, which an index out of `p`'s
    /// range is made to fail (`b` is out of `[-b, b)`), so the run fails as the
    /// specialized one would.
    fn checked_index(&self, index: E, p: Form, bounds: &[i64]) -> Result<E, String> {
        let b = bounds[bounds.len() - 1];
        match p.range(self.least, self.bound) {
            Some((lo, hi)) if lo >= 0 && hi == b => {}
            _ => {
                return Err(format!(
                    "a checked index's bound {bounds:?} is not largest at the bound"
                ));
            }
        }
        let n = p.expr();
        let negative = expr::lt(index.clone(), expr::i(0));
        let wrapped = expr::select(negative, expr::add(index.clone(), n.clone()), index.clone());
        let inside = expr::and(
            expr::ge(index.clone(), expr::sub(expr::i(0), n.clone())),
            expr::lt(index, n),
        );
        Ok(expr::check_index(
            expr::select(inside, wrapped, expr::i(b)),
            b,
        ))
    }

    /// A float constant that differs as `1/n` for an integer polynomial `n` of the dims,
    /// positive at every value (a mean's 1/N): the division done in float64 and rounded to
    /// the constant's type, as the compiler folded it, so every value gets the bits its own
    /// compile would.
    fn reciprocal(&self, es: &[&E]) -> Option<E> {
        let dtype = es[0].dtype;
        if !dtype.is_float() {
            return None;
        }
        let ns: Vec<i64> = es
            .iter()
            .map(|e| match e.as_const()? {
                Scalar::F(v) if v > 0.0 && v <= 1.0 => {
                    let n = (1.0 / v).round();
                    let same = Scalar::F(1.0 / n).cast(dtype) == Scalar::F(v);
                    (same && n < 2f64.powi(53)).then_some(n as i64)
                }
                _ => None,
            })
            .collect::<Option<_>>()?;
        let Ok(Int::Poly(p)) = self.int(&ns) else {
            return None;
        };
        let (lo, _) = p.range(self.least, self.bound)?;
        if lo < 1 {
            return None;
        }
        let n = expr::cast(p.expr(), DType::F64);
        let r = expr::binary(expr::BinOp::Div, expr::f(DType::F64, 1.0), n);
        Some(if dtype == DType::F64 {
            r
        } else {
            expr::cast(r, dtype)
        })
    }

    /// A constant that differs: an integer polynomial, converted to the constant's type.
    fn constant(&self, es: &[&E]) -> Result<E, String> {
        let dtype = es[0].dtype;
        let vals: Option<Vec<i64>> = es
            .iter()
            .map(|e| match e.as_const()? {
                Scalar::I(v) => Some(v),
                Scalar::U(v) => i64::try_from(v).ok(),
                Scalar::F(v) if v.fract() == 0.0 && v.abs() < 2f64.powi(53) => Some(v as i64),
                _ => None,
            })
            .collect();
        let Some(vals) = vals else {
            return self.reciprocal(es).ok_or_else(|| {
                "a constant that is neither an integer nor one over an integer (a scale) \
                 depends on the dims"
                    .to_string()
            });
        };
        let Int::Poly(p) = self.int(&vals)? else {
            unreachable!("the constants differ")
        };
        let e = p.expr();
        Ok(if dtype == DType::I64 {
            e
        } else {
            expr::cast(e, dtype)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_integer_polynomials_and_refuses_the_rest() {
        let sizes = probe_sizes(1, 512).unwrap();
        assert_eq!(sizes, vec![37, 42, 47, 28, 512]);
        let vals = |f: &dyn Fn(i64) -> i64| sizes.iter().map(|&s| f(s)).collect::<Vec<_>>();
        assert_eq!(
            Poly::fit(&sizes, &vals(&|s| 16 * s)),
            Some(Poly([0, 16, 0]))
        );
        assert_eq!(
            Poly::fit(&sizes, &vals(&|s| 4 * s * s + 3)),
            Some(Poly([3, 0, 4]))
        );
        assert_eq!(
            Poly::fit(&sizes, &vals(&|s| 2 * s - 1)),
            Some(Poly([-1, 2, 0]))
        );
        // Not polynomials of degree 2 at most, or not with integer coefficients.
        assert_eq!(Poly::fit(&sizes, &vals(&|s| s / 2)), None);
        assert_eq!(Poly::fit(&sizes, &vals(&|s| s * s * s)), None);
        // Polynomials on one remainder class only: the probes take every remainder.
        for m in [2, 3, 4] {
            assert_eq!(Poly::fit(&sizes, &vals(&|s| m * (s / m))), None, "{m}");
            assert_eq!(
                Poly::fit(&sizes, &vals(&|s| (s / m) * (s / m))),
                None,
                "{m}"
            );
        }
        assert_eq!(
            Poly::fit(&sizes, &vals(&|s| if s < 500 { s } else { 7 })),
            None
        );
    }

    #[test]
    fn strided_sizes_fit_polynomials_of_a_step_of_the_dim() {
        let sizes = probe_sizes(3, 512).unwrap();
        let vals = |f: &dyn Fn(i64) -> i64| sizes.iter().map(|&s| f(s)).collect::<Vec<_>>();
        // A 3-wide window of stride 2 with padding 1: (s - 1) / 2 + 1 = (s + 1) / 2.
        let f = Fit::through(&sizes, &vals(&|s| (s - 1) / 2 + 1)).unwrap();
        assert_eq!((f.pre, f.div), (1, 2));
        // Two of them, squared (an output of h = w = s, 8 channels).
        let g = Fit::through(&sizes, &vals(&|s| 8 * ((s + 3) / 4) * ((s + 3) / 4))).unwrap();
        assert_eq!((g.pre, g.div), (3, 4));
        // The dim itself is preferred to a step of it.
        assert_eq!(Fit::through(&sizes, &vals(&|s| 2 * s)).unwrap().div, 1);
        // Strides above 4 (stacked strides: s / 8) are not taken.
        assert_eq!(Fit::through(&sizes, &vals(&|s| s / 8)), None);
        for (fit, want) in [
            (f, &(|s: i64| (s - 1) / 2 + 1) as &dyn Fn(i64) -> i64),
            (g, &|s: i64| 8 * ((s + 3) / 4) * ((s + 3) / 4)),
        ] {
            for s in [3i64, 4, 5, 6, 7, 100, 511, 512] {
                let mut env = std::collections::HashMap::new();
                env.insert(super::super::DIM_VAR, s);
                assert_eq!(eval(&fit.expr(0), &env), want(s), "{fit:?} at {s}");
            }
        }
        assert_eq!(f.range(3, 512), Some((2, 256)));
        // An output dim follows it as mul · ((d + pre) / div) + add.
        let r = RunDim {
            dim: 0,
            mul: 3,
            add: 1,
            pre: 1,
            div: 2,
        };
        assert_eq!(
            (r.at(7), r.show("w"), r.solve(13)),
            (13, "3*(w+1)/2+1".into(), None)
        );
        let a = RunDim::affine(0, 2, 1);
        assert_eq!(
            (a.at(7), a.show("w"), a.solve(15)),
            (15, "2*w+1".into(), Some(7))
        );
    }

    #[test]
    fn probes_lie_in_the_dims_range() {
        assert_eq!(probe_sizes(1, 512), Some(vec![37, 42, 47, 28, 512]));
        assert_eq!(probe_sizes(1, 48), Some(vec![37, 42, 47, 28, 48]));
        assert_eq!(probe_sizes(1, 40), Some(vec![10, 15, 20, 25, 40]));
        assert_eq!(probe_sizes(1, 16), Some(vec![12, 13, 14, 15, 16]));
        // From the least valid value on.
        assert_eq!(probe_sizes(30, 512), Some(vec![39, 44, 49, 54, 512]));
        assert_eq!(probe_sizes(100, 110), Some(vec![106, 107, 108, 109, 110]));
        assert_eq!(probe_sizes(12, 16), Some(vec![12, 13, 14, 15, 16]));
        assert_eq!(probe_sizes(13, 16), None);
        assert_eq!(probe_sizes(61, 64), None);
        // The probes take each remainder modulo 2, 3 and 4.
        for (least, bound) in [
            (1, 16),
            (1, 24),
            (1, 40),
            (1, 64),
            (1, 512),
            (30, 512),
            (7, 33),
        ] {
            let v = probe_sizes(least, bound).unwrap();
            for m in [2, 3, 4] {
                let mut seen: Vec<i64> = v[..4].iter().map(|p| p % m).collect();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len() as i64, m, "{least}..{bound}, modulo {m}: {v:?}");
            }
        }
    }

    #[test]
    fn ranges_are_checked_over_every_value() {
        // s - 30 is negative for small s.
        assert_eq!(Poly([-30, 1, 0]).range(1, 512), None);
        assert_eq!(Poly([-30, 1, 0]).range(30, 512), Some((0, 482)));
        assert_eq!(Poly([0, 16, 0]).range(1, 512), Some((16, 8192)));
        // s² - 10 s + 30: least at s = 5 (5), largest at the bound.
        assert_eq!(Poly([30, -10, 1]).range(1, 100), Some((5, 9030)));
        assert_eq!(Poly([0, 0, -1]).range(1, 100), None);
    }

    #[test]
    fn expressions_become_polynomials_of_the_run_time_dim() {
        let sizes = probe_sizes(1, 64).unwrap();
        let points: Vec<Vec<i64>> = sizes.iter().map(|&s| vec![s]).collect();
        let u = Unify {
            points: &points,
            least: &[1],
            bound: &[64],
        };
        let es: Vec<E> = sizes
            .iter()
            .map(|&s| expr::add(expr::mul(expr::var(1), expr::i(s * s)), expr::var(2)))
            .collect();
        let refs: Vec<&E> = es.iter().collect();
        let e = u.expr(&refs).unwrap();
        for &s in &[1i64, 7, 64] {
            let mut env = std::collections::HashMap::new();
            env.insert(super::super::DIM_VAR, s);
            env.insert(1, 3);
            env.insert(2, 5);
            assert_eq!(eval(&e, &env), 3 * s * s + 5);
        }
        // One over a polynomial of the dim (a mean's 1/N) follows it, as a float64
        // division rounded to the constant's type; other floats do not.
        let fs: Vec<E> = sizes
            .iter()
            .map(|&s| expr::f(DType::F32, 1.0 / (3 * s) as f64))
            .collect();
        let e = u.expr(&fs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(e.dtype, DType::F32);
        assert!(
            matches!(&e.kind, ExprKind::Cast(d) if matches!(&d.kind, ExprKind::Binary(expr::BinOp::Div, ..))),
            "{e:?}"
        );
        let fs: Vec<E> = sizes
            .iter()
            .map(|&s| expr::f(DType::F32, 0.3 * s as f64))
            .collect();
        assert!(u.expr(&fs.iter().collect::<Vec<_>>()).is_err());
    }

    fn eval(e: &E, env: &std::collections::HashMap<u32, i64>) -> i64 {
        match &e.kind {
            ExprKind::Var(v) => env[v],
            ExprKind::Const(Scalar::I(v)) => *v,
            ExprKind::Binary(expr::BinOp::Add, a, b) => eval(a, env) + eval(b, env),
            ExprKind::Binary(expr::BinOp::Mul, a, b) => eval(a, env) * eval(b, env),
            // Codegen's integer division truncates (the dividends here are positive).
            ExprKind::Binary(expr::BinOp::Div, a, b) => eval(a, env) / eval(b, env),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn two_dims_take_bilinear_forms_of_their_steps() {
        // A grid of the probes of each dim, then the bounds.
        let mut points: Vec<Vec<i64>> = Vec::new();
        for &a in &PROBES {
            for &b in &PROBES {
                points.push(vec![a, b]);
            }
        }
        points.push(vec![320, 640]);
        let u = Unify {
            points: &points,
            least: &[28, 28],
            bound: &[320, 640],
        };
        let check = |f: &dyn Fn(i64, i64) -> i64| {
            let vals: Vec<i64> = points.iter().map(|p| f(p[0], p[1])).collect();
            let Ok(Int::Poly(form)) = u.int(&vals) else {
                panic!("no form for {vals:?}");
            };
            for (a, b) in [(28, 28), (29, 333), (100, 101), (319, 640), (320, 640)] {
                let mut env = std::collections::HashMap::new();
                env.insert(super::super::DIM_VAR, a);
                env.insert(super::super::DIM_VAR + 1, b);
                assert_eq!(eval(&form.expr(), &env), f(a, b), "{form:?} at {a}, {b}");
            }
            form
        };
        // A plane of a strided map: ((h + 1) / 2) · ((w + 1) / 2) · 16.
        let plane = check(&|h, w| 16 * ((h + 1) / 2) * ((w + 1) / 2));
        assert!(matches!(plane, Form::Two { .. }), "{plane:?}");
        assert_eq!(
            plane.range(&[28, 28], &[320, 640]),
            Some((16 * 14 * 14, 16 * 160 * 320))
        );
        // A row of one dim: 3 · w + 2; a height: (h + 3) / 4.
        assert!(matches!(check(&|_, w| 3 * w + 2), Form::One(1, _)));
        assert!(matches!(check(&|h, _| (h + 3) / 4), Form::One(0, _)));
        // Offsets that mix both: h · w + h.
        check(&|h, w| h * w + h);
        // Not bilinear, of degree two in each: an attention's scores, batch · 4 · seq², and
        // h² · w + 3 · h.
        assert!(matches!(check(&|b, s| 4 * b * s * s), Form::Quad { .. }));
        let quad = check(&|h, w| h * h * w + 3 * h);
        assert_eq!(
            quad.range(&[28, 28], &[320, 640]),
            Some((28 * 28 * 28 + 84, 320 * 320 * 640 + 960))
        );
        // Of degree three, or with a negative coefficient: no form.
        for f in [
            &(|h: i64, w: i64| h * h * h + w) as &dyn Fn(i64, i64) -> i64,
            &|h, w| 1_000_000_000 - h * h * w,
        ] {
            let vals: Vec<i64> = points.iter().map(|p| f(p[0], p[1])).collect();
            assert!(u.int(&vals).is_err(), "{vals:?}");
        }
    }
}
