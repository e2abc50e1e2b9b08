//! GELU: ONNX Gelu and the Erf decompositions exporters write (`passes::gelu` turns them into
//! one runtime kernel call at -O2; a near miss, dividing by 1.5 and not √2, stays as written:
//! tests/filetests/gelu_forms.onnxt) against an f64 reference, at -O2 and -O0.

use onnxc_tests::model::{D, f32_tensor, model, node, save, save_tensor, value_info};

/// erf in f64: Taylor series below 3, erfc's continued fraction above.
fn erf64(x: f64) -> f64 {
    if x.is_infinite() {
        return x.signum();
    }
    let t = x.abs();
    let r = if t < 3.0 {
        let (mut sum, mut term) = (0.0, t);
        for n in 0..200 {
            let v = term / (2 * n + 1) as f64;
            sum += v;
            term *= -t * t / (n + 1) as f64;
            if v.abs() < 1e-18 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut f = 0.0;
        for k in (1..80).rev() {
            f = (k as f64 / 2.0) / (t + f);
        }
        1.0 - (-t * t).exp() / (std::f64::consts::PI.sqrt() * (t + f))
    };
    r.copysign(x)
}

#[test]
fn gelu_forms_match_reference() {
    let d = std::env::temp_dir().join(format!("onnxc-gelu-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let mut xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 60.0).collect();
    xs.extend([0.0, -0.0, 1e-20, 20.0, f32::NAN, f32::INFINITY]);
    let n = xs.len() as i64;
    let scalar = |name: &str, v: f32| f32_tensor(name, &[], &[v]);
    let inits = vec![
        scalar("sqrt2", std::f32::consts::SQRT_2),
        scalar("rsqrt2", std::f32::consts::FRAC_1_SQRT_2),
        scalar("half", 0.5),
        scalar("one", 1.0),
        scalar("c15", 1.5),
    ];
    let nodes = vec![
        // (x·½)·(1 + erf(x/√2)): the PyTorch F.gelu export.
        node("Div", "a_div", &["x", "sqrt2"], &["a_d"]),
        node("Erf", "a_erf", &["a_d"], &["a_e"]),
        node("Add", "a_add", &["a_e", "one"], &["a_a"]),
        node("Mul", "a_half", &["x", "half"], &["a_h"]),
        node("Mul", "a_mul", &["a_h", "a_a"], &["y_a"]),
        // (x·(1 + erf(x·(1/√2))))·½, constants first where commutative.
        node("Mul", "b_mul0", &["rsqrt2", "x"], &["b_d"]),
        node("Erf", "b_erf", &["b_d"], &["b_e"]),
        node("Add", "b_add", &["one", "b_e"], &["b_a"]),
        node("Mul", "b_mul1", &["x", "b_a"], &["b_m"]),
        node("Mul", "b_mul2", &["b_m", "half"], &["y_b"]),
        // x·((1 + erf(x/√2))·½)
        node("Div", "c_div", &["x", "sqrt2"], &["c_d"]),
        node("Erf", "c_erf", &["c_d"], &["c_e"]),
        node("Add", "c_add", &["c_e", "one"], &["c_a"]),
        node("Mul", "c_half", &["c_a", "half"], &["c_h"]),
        node("Mul", "c_mul", &["x", "c_h"], &["y_c"]),
        // ONNX Gelu (opset 20).
        node("Gelu", "d_gelu", &["x"], &["y_d"]),
        // Not GELU: x·½·(1 + erf(x/1.5)).
        node("Div", "e_div", &["x", "c15"], &["e_d"]),
        node("Erf", "e_erf", &["e_d"], &["e_e"]),
        node("Add", "e_add", &["e_e", "one"], &["e_a"]),
        node("Mul", "e_half", &["x", "half"], &["e_h"]),
        node("Mul", "e_mul", &["e_h", "e_a"], &["y_e"]),
    ];
    let names = ["y_a", "y_b", "y_c", "y_d", "y_e"];
    let outs: Vec<_> = names.iter().map(|o| value_info(o, 1, &[D::N(n)])).collect();
    let m = model(nodes, vec![value_info("x", 1, &[D::N(n)])], outs, inits, 20);
    let p = d.join("m.onnx");
    save(&m, &p);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[n], &xs), &x);

    for opt in ["--O2", "--O0"] {
        let outs = onnxc_tests::run_model(
            &[std::ffi::OsStr::new(opt), p.as_os_str(), x.as_os_str()],
            &d.join(format!("out{opt}")),
        );
        for (k, name) in names.iter().enumerate() {
            let got = outs[k].to_f64s();
            let div = if *name == "y_e" {
                1.5
            } else {
                std::f64::consts::SQRT_2
            };
            for (i, &xv) in xs.iter().enumerate() {
                let v = xv as f64;
                let want = 0.5 * v * (1.0 + erf64(v / div));
                let g = got[i];
                let ok = if xv.is_nan() {
                    g.is_nan()
                } else if want.is_infinite() {
                    g == want
                } else {
                    (g - want).abs() <= 1e-6 * want.abs() + 2e-6
                };
                assert!(ok, "{opt} {name}: gelu({xv}) = {g}, expected {want}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(d);
}
