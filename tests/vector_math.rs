//! The vectorized exp/tanh/erf/sigmoid that compiled elementwise loops use, against f64
//! references over a wide range of inputs (including infinities, NaN and exp's subnormal
//! range), through the CLI.

use onnxc_tests::model::{D, f32_tensor, model, node, save, save_tensor, value_info};

fn erf64(x: f64) -> f64 {
    // erf via the complementary error function's continued fraction is overkill here: use the
    // series for |x| < 3 and 1 beyond (f32 precision).
    if x.abs() >= 4.0 {
        return x.signum();
    }
    let mut sum = 0.0;
    let mut term = x;
    let mut n = 0;
    while n < 200 {
        let t = term / (2 * n + 1) as f64;
        sum += t;
        n += 1;
        term *= -x * x / n as f64;
        if t.abs() < 1e-18 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// Compiles and runs `m` on the float32 input `x = xs` in a scratch folder of its own.
fn run_on(tag: &str, m: &onnxc_proto::ModelProto, xs: &[f32]) -> Vec<onnxc::ir::Tensor> {
    let d = std::env::temp_dir().join(format!("onnxc-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("m.onnx");
    save(m, &p);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[xs.len() as i64], xs), &x);
    let outs = onnxc_tests::run_model(&[&p, &x], &d.join("out"));
    let _ = std::fs::remove_dir_all(&d);
    outs
}

#[test]
fn vector_math_matches_f64_references() {
    let mut xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) / 40.0).collect();
    xs.extend([
        0.0,
        -0.0,
        1e-20,
        -1e-20,
        1e-7,
        88.0,
        89.0,
        -87.0,
        -88.0,
        -95.5,
        -103.0,
        -104.0,
        88.7,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    while !xs.len().is_multiple_of(8) {
        xs.push(0.5);
    }
    let n = xs.len() as i64;
    let ops = ["Exp", "Tanh", "Erf", "Sigmoid"];
    let nodes: Vec<_> = ops
        .iter()
        .map(|op| node(op, op, &["x"], &[&format!("y_{op}")]))
        .collect();
    let outs: Vec<_> = ops
        .iter()
        .map(|op| value_info(&format!("y_{op}"), 1, &[D::N(n)]))
        .collect();
    let m = model(
        nodes,
        vec![value_info("x", 1, &[D::N(n)])],
        outs,
        vec![],
        17,
    );
    let outs = run_on("vmath", &m, &xs);
    let refs: [fn(f64) -> f64; 4] = [f64::exp, f64::tanh, erf64, |v| 1.0 / (1.0 + (-v).exp())];
    for (k, op) in ops.iter().enumerate() {
        let got = outs[k].to_f64s();
        for (i, &xv) in xs.iter().enumerate() {
            let want = refs[k](xv as f64) as f32 as f64;
            let g = got[i];
            let ok = if want.is_nan() {
                g.is_nan()
            } else if want.is_infinite() || want.abs() == 1.0 {
                // Saturated tanh/erf/sigmoid are exactly ±1 (Ceil or 1 ± y would see an ulp).
                g == want
            } else {
                (g - want).abs()
                    <= 4e-7 * want.abs().max(if *op == "Exp" { 0.0 } else { 1e-3 })
                        // Exp underflows gradually: within a subnormal ulp below 2^-126.
                        + if *op == "Exp" { 1.5e-45 } else { 0.0 }
            };
            assert!(ok, "{op}({xv}) = {g}, expected {want}");
        }
    }
}

/// `Pow` by a constant exponent (vectorized as products of square roots for multiples of
/// 1/4, exp·log otherwise) against C `powf` over the special bases: ±0, ±inf, negative
/// finite bases, NaN — signs of zeros and infinities included — and infinite and NaN
/// exponents (pow(1, y) = 1 for every y).
#[test]
fn pow_by_constants_matches_powf() {
    let mut xs: Vec<f32> = (0..400).map(|i| (i as f32 - 200.0) / 13.0).collect();
    xs.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        1e30,
    ]);
    while !xs.len().is_multiple_of(8) {
        xs.push(0.5);
    }
    let n = xs.len() as i64;
    let ys = [
        0.5f32, 0.25, 0.75, -0.25, -1.5, 1.385, -1.385, 3.0, -3.0, 5.0, -5.0, 6.0, -4.0, 2.2,
    ];
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut outs = Vec::new();
    for (k, y) in ys.iter().enumerate() {
        inits.push(f32_tensor(&format!("e{k}"), &[], &[*y]));
        nodes.push(node(
            "Pow",
            &format!("pow{k}"),
            &["x", &format!("e{k}")],
            &[&format!("y{k}")],
        ));
        outs.push(value_info(&format!("y{k}"), 1, &[D::N(n)]));
    }
    let m = model(nodes, vec![value_info("x", 1, &[D::N(n)])], outs, inits, 17);
    let got = run_on("vpow", &m, &xs);
    for (k, &y) in ys.iter().enumerate() {
        let got = got[k].to_f64s();
        for (i, &xv) in xs.iter().enumerate() {
            let want = xv.powf(y) as f64;
            let g = got[i];
            let ok = if want.is_nan() {
                g.is_nan()
            } else if want == 0.0 || want.is_infinite() {
                g.to_bits() == want.to_bits()
            } else {
                (g - want).abs() <= 2e-6 * want.abs() || (want.abs() < 1e-37 && g.abs() < 1e-37)
            };
            assert!(ok, "pow({xv}, {y}) = {g}, expected {want}");
        }
    }
}

/// Max/Min against a constant (one maxps/minps or maxss/minsd with the constant first in
/// generated code) keep fmax/fmin's semantics: NaN propagates from x, and zeros order -0 below
/// +0 — float32 in vector loops, float64 in scalar ones, constants ±0, ±1.5 and ±inf.
#[test]
fn clamps_against_constants_propagate_nan_and_order_zeros() {
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.5,
        -1.5,
        2.0,
        -2.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        -1e-40,
    ];
    while !xs.len().is_multiple_of(8) {
        xs.push(0.25);
    }
    let n = xs.len() as i64;
    let cs = [0.0f32, -0.0, 1.5, -1.5, f32::INFINITY, f32::NEG_INFINITY];
    let (mut nodes, mut inits, mut outs) = (Vec::new(), Vec::new(), Vec::new());
    nodes.push(node("Cast", "to64", &["x"], &["x64"]));
    nodes[0].attribute.push(onnxc_proto::AttributeProto {
        name: Some("to".into()),
        r#type: Some(2),
        i: Some(11),
        ..Default::default()
    });
    let mut names = Vec::new();
    for (k, c) in cs.iter().enumerate() {
        inits.push(f32_tensor(&format!("c{k}"), &[], &[*c]));
        let mut c64 = f32_tensor(&format!("d{k}"), &[], &[]);
        c64.data_type = Some(11);
        c64.raw_data = Some((*c as f64).to_le_bytes().to_vec());
        inits.push(c64);
        for (op, f64_) in [("Max", false), ("Min", false), ("Max", true), ("Min", true)] {
            let (x, cn) = if f64_ {
                ("x64".to_string(), format!("d{k}"))
            } else {
                ("x".to_string(), format!("c{k}"))
            };
            let y = format!("y{}", names.len());
            nodes.push(node(op, &y, &[&x, &cn], &[&y]));
            outs.push(value_info(&y, if f64_ { 11 } else { 1 }, &[D::N(n)]));
            names.push((op, *c, f64_));
        }
    }
    let m = model(nodes, vec![value_info("x", 1, &[D::N(n)])], outs, inits, 13);
    let got = run_on("clamp", &m, &xs);
    for (k, (op, c, f64_)) in names.iter().enumerate() {
        let got = got[k].to_f64s();
        for (i, &xv) in xs.iter().enumerate() {
            let (xv, c) = (xv as f64, *c as f64);
            let want = if xv.is_nan() {
                f64::NAN
            } else if xv == 0.0 && c == 0.0 {
                // -0 < +0 for the ordering of zeros.
                let neg = if *op == "Max" {
                    xv.is_sign_negative() && c.is_sign_negative()
                } else {
                    xv.is_sign_negative() || c.is_sign_negative()
                };
                if neg { -0.0 } else { 0.0 }
            } else if *op == "Max" {
                xv.max(c)
            } else {
                xv.min(c)
            };
            let g = got[i];
            let ok = if want.is_nan() {
                g.is_nan()
            } else {
                g.to_bits() == want.to_bits()
            };
            assert!(
                ok,
                "{op}({xv}, {c}) in {} = {g}, expected {want}",
                if *f64_ { "f64" } else { "f32" }
            );
        }
    }
}
