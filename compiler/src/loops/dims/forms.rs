//! The closed forms a constant of the programs may take over the run-time dims: a polynomial
//! of degree two at most in a step of one dim (`Poly`, `Fit`), and bilinear or degree-two
//! forms in steps of two (`Form`), fitted exactly (`Ratio`) and turned into expressions.

use crate::ir::expr::{self, E};

/// `a0 + a1·d + a2·d²`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Poly(pub(super) [i64; 3]);

impl Poly {
    pub(super) fn at(self, d: i64) -> Option<i64> {
        let [a0, a1, a2] = self.0.map(i128::from);
        let d = i128::from(d);
        i64::try_from(a0 + a1 * d + a2 * d * d).ok()
    }

    /// The polynomial through the first three points, if its coefficients are integers,
    /// when it passes through every point.
    pub(super) fn fit(sizes: &[i64], vals: &[i64]) -> Option<Poly> {
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
    pub(super) fn expr(self, d: E) -> E {
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
    pub(super) fn range(self, least: i64, bound: i64) -> Option<(i64, i64)> {
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
pub(super) const STEPS: [(i64, i64); 10] = [
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
pub(super) struct Fit {
    pub(super) poly: Poly,
    pub(super) pre: i64,
    pub(super) div: i64,
}

impl Fit {
    pub(super) fn step(&self, d: i64) -> i64 {
        (d + self.pre).div_euclid(self.div)
    }

    /// The polynomial of the first step of `STEPS` that passes through every point: the
    /// dim itself when one does.
    pub(super) fn through(sizes: &[i64], vals: &[i64]) -> Option<Fit> {
        STEPS.iter().find_map(|&(div, pre)| {
            let steps: Vec<i64> = sizes.iter().map(|&d| (d + pre).div_euclid(div)).collect();
            Poly::fit(&steps, vals).map(|poly| Fit { poly, pre, div })
        })
    }

    /// The expression over run-time dim `dim` (`least ≥ 1`, so the division's dividend is
    /// positive and truncation rounds down).
    pub(super) fn expr(self, dim: u32) -> E {
        let d = crate::loops::dim(dim);
        let t = if self.pre == 0 {
            d
        } else {
            expr::add(d, expr::i(self.pre))
        };
        self.poly.expr(expr::idiv(t, self.div))
    }

    /// Its least and largest values for dims in `least..=bound` (`Poly::range` over the
    /// steps, which take every integer between theirs at the ends).
    pub(super) fn range(self, least: i64, bound: i64) -> Option<(i64, i64)> {
        self.poly.range(self.step(least), self.step(bound))
    }
}

/// A constant that follows the run-time dims: a polynomial of a step of one of them, or with
/// two dims a bilinear form of a step of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
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
pub(super) struct Ratio(i128, i128);

impl Ratio {
    pub(super) fn int(v: i128) -> Ratio {
        Ratio(v, 1)
    }

    pub(super) fn new(n: i128, d: i128) -> Option<Ratio> {
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

    pub(super) fn sub(self, o: Ratio) -> Option<Ratio> {
        let n = self
            .0
            .checked_mul(o.1)?
            .checked_sub(o.0.checked_mul(self.1)?)?;
        Ratio::new(n, self.1.checked_mul(o.1)?)
    }

    pub(super) fn mul(self, o: Ratio) -> Option<Ratio> {
        Ratio::new(self.0.checked_mul(o.0)?, self.1.checked_mul(o.1)?)
    }

    pub(super) fn div(self, o: Ratio) -> Option<Ratio> {
        Ratio::new(self.0.checked_mul(o.1)?, self.1.checked_mul(o.0)?)
    }

    /// The quadratic `[c0, c1, c2]` (`c0 + c1·x + c2·x²`) through three points of distinct
    /// `x` (Newton's divided differences).
    pub(super) fn quadratic(x: [i128; 3], y: [Ratio; 3]) -> Option<[Ratio; 3]> {
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
pub(super) type Step = (i64, i64);

/// `(d + pre) / div` for a step `(div, pre)`.
pub(super) fn step_of((div, pre): Step, d: i64) -> i64 {
    (d + pre).div_euclid(div)
}

/// The expression of `(dim + pre) / div`.
pub(super) fn step_expr((div, pre): (i64, i64), dim: u32) -> E {
    let d = crate::loops::dim(dim);
    let t = if pre == 0 {
        d
    } else {
        expr::add(d, expr::i(pre))
    };
    if div == 1 { t } else { expr::idiv(t, div) }
}

impl Form {
    pub(super) fn at2(c: [i64; 4], s: i64, t: i64) -> Option<i64> {
        let [c0, c1, c2, c3] = c.map(i128::from);
        let (s, t) = (i128::from(s), i128::from(t));
        i64::try_from(c0 + c1 * s + c2 * t + c3 * s * t).ok()
    }

    /// Each pair of steps of the two dims (`STEPS`), with the points in those steps.
    pub(super) fn step_pairs(
        points: &[Vec<i64>],
    ) -> impl Iterator<Item = (Step, Step, Vec<(i64, i64)>)> {
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
    pub(super) fn two(points: &[Vec<i64>], vals: &[i64]) -> Option<Form> {
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

    pub(super) fn at9(c: [i64; 9], s: i64, t: i64) -> Option<i64> {
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
    pub(super) fn quad(points: &[Vec<i64>], vals: &[i64]) -> Option<Form> {
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

    pub(super) fn expr(self) -> E {
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
    pub(super) fn range(self, least: &[i64], bound: &[i64]) -> Option<(i64, i64)> {
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
