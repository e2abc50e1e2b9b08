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
            env.insert(crate::loops::DIM_VAR, s);
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
        other: None,
    };
    let w = |multiple| RunTimeDim {
        name: "w".into(),
        least: 1,
        bound: 512,
        multiple,
    };
    assert_eq!(
        (r.at(&[7]), r.show(&[w(1)]), r.solve(13)),
        (13, "3*(w+1)/2+1".into(), None)
    );
    let a = RunDim::affine(0, 2, 1);
    assert_eq!(
        (a.at(&[7]), a.show(&[w(1)]), a.solve(15)),
        (15, "2*w+1".into(), Some(7))
    );
    // Taken in multiples of 2, its value is w / 2.
    assert_eq!(RunDim::affine(0, 4, 0).show(&[w(2)]), "2*w");
    // A sum of two run-time dims gives neither.
    let past = RunTimeDim {
        name: "past".into(),
        ..w(1)
    };
    let s = RunDim {
        other: Some(crate::loops::Other {
            dim: 0,
            mul: 1,
            pre: 0,
            div: 1,
            prod: 0,
        }),
        ..RunDim::affine(1, 1, 0)
    };
    assert_eq!(
        (s.at(&[5, 1]), s.show(&[past.clone(), w(1)]), s.solve(6)),
        (6, "w+past".into(), None)
    );
    // A product of two dims taken in multiples of 32 (a detector's anchors, `21 · h · w`),
    // and of a step of each.
    let (h, w32) = (
        RunTimeDim {
            name: "H".into(),
            ..w(32)
        },
        RunTimeDim {
            name: "W".into(),
            ..w(32)
        },
    );
    let product = |pre, div, prod| RunDim {
        mul: 0,
        other: Some(crate::loops::Other {
            dim: 1,
            mul: 0,
            pre,
            div,
            prod,
        }),
        ..RunDim::affine(0, 0, 0)
    };
    let anchors = product(0, 1, 21);
    assert_eq!(
        (
            anchors.at(&[2, 3]),
            anchors.show(&[h.clone(), w32.clone()]),
            anchors.solve(126)
        ),
        (126, "21*(H/32)*(W/32)".into(), None)
    );
    let halves = RunDim {
        add: 1,
        ..product(1, 2, 1)
    };
    assert_eq!(
        (halves.at(&[4, 7]), halves.show(&[past, w(1)])),
        (4 * 4 + 1, "past*((w+1)/2)+1".into())
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
        env.insert(crate::loops::DIM_VAR, s);
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
            env.insert(crate::loops::DIM_VAR, a);
            env.insert(crate::loops::DIM_VAR + 1, b);
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
