//! Values computed by optimized code against references computed here: the rewrites and
//! kernels the filetests (tests/filetests) show being chosen compute what the graph says.
//! Each model goes through `onnxc run` (the whole AOT path).

use onnxc_tests::model::{
    D, f32_tensor, int_tensor, model, node, save, save_tensor, value_info, with_ints,
};
use onnxc_tests::{run_model, scratch};

/// A 3×3 conv (48→48 channels, 24×24) that runs Winograd F(4×4, 3×3) by default: its error
/// against a float64 direct convolution stays within 1e-4 of the output's RMS, and with
/// `--no-winograd` within that of a direct f32 convolution (1e-5; measured ~2e-6, against
/// ~3e-5 with Winograd).
#[test]
fn no_winograd_flag_gives_direct_convolution_accuracy() {
    let (c, m, hw) = (48usize, 48usize, 24usize);
    // Deterministic values in [-1, 1) that are not uniform in any pattern the kernels see.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let w: Vec<f32> = (0..m * c * 9).map(|_| next() * 0.2).collect();
    let x: Vec<f32> = (0..c * hw * hw).map(|_| next()).collect();
    let conv = with_ints(
        node("Conv", "conv", &["x", "w"], &["y"]),
        "pads",
        &[1, 1, 1, 1],
    );
    let n = |v: usize| D::N(v as i64);
    let mdl = model(
        vec![conv],
        vec![value_info("x", 1, &[n(1), n(c), n(hw), n(hw)])],
        vec![value_info("y", 1, &[n(1), n(m), n(hw), n(hw)])],
        vec![f32_tensor("w", &[m as i64, c as i64, 3, 3], &w)],
        17,
    );
    let d = scratch("no-winograd");
    let p = d.join("conv.onnx");
    save(&mdl, &p);
    let xp = d.join("x.pb");
    save_tensor(
        &f32_tensor("x", &[1, c as i64, hw as i64, hw as i64], &x),
        &xp,
    );
    // float64 direct convolution, zero padding 1.
    let mut want = vec![0f64; m * hw * hw];
    for o in 0..m {
        for oy in 0..hw {
            for ox in 0..hw {
                let mut acc = 0f64;
                for i in 0..c {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = ((oy + ky) as i64 - 1, (ox + kx) as i64 - 1);
                            if (0..hw as i64).contains(&iy) && (0..hw as i64).contains(&ix) {
                                acc += w[((o * c + i) * 3 + ky) * 3 + kx] as f64
                                    * x[(i * hw + iy as usize) * hw + ix as usize] as f64;
                            }
                        }
                    }
                }
                want[(o * hw + oy) * hw + ox] = acc;
            }
        }
    }
    let rms = (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt();
    let err = |flags: &[&str]| {
        let mut args = vec![p.as_os_str(), xp.as_os_str()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let got = run_model(&args, &d.join(format!("out{}", flags.len())))[0].to_f64s();
        assert_eq!(got.len(), want.len());
        got.iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f64, f64::max)
            / rms
    };
    let winograd = err(&[]);
    let direct = err(&["--no-winograd"]);
    assert!(winograd < 1e-4, "Winograd error {winograd:e} of the RMS");
    assert!(direct < 1e-5, "--no-winograd error {direct:e} of the RMS");
}

/// A chain of thousands of elementwise ops compiles in linear time (fused bodies are capped
/// in size, so the chain becomes several fused steps) and computes the right values.
#[test]
fn long_elementwise_chains_compile_and_run() {
    let d = scratch("chain");
    let n = 3000;
    let nodes: Vec<_> = (0..n)
        .map(|i| {
            let src = if i == 0 {
                "x".to_string()
            } else {
                format!("t{}", i - 1)
            };
            node("Add", &format!("add{i}"), &[&src, "x"], &[&format!("t{i}")])
        })
        .collect();
    let last = format!("t{}", n - 1);
    let m = model(
        nodes,
        vec![value_info("x", 1, &[D::N(1), D::N(4)])],
        vec![value_info(&last, 1, &[D::N(1), D::N(4)])],
        vec![],
        17,
    );
    let p = d.join("chain.onnx");
    save(&m, &p);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 4], &[1.0, -2.0, 0.5, 0.0]), &x);
    let y = &run_model(&[&p, &x], &d.join("out"))[0];
    let k = (n + 1) as f64;
    assert_eq!(y.to_f64s(), vec![k, -2.0 * k, 0.5 * k, 0.0]);
}

/// A squeeze-excitation block over a SiLU (EfficientNet: `h = x·sigmoid(x)`, then a global
/// average pool of `h` and `h` scaled by it), whose SiLU is computed once through the
/// activation kernel (filetests/silu_two_consumers.onnxt): the results are right.
#[test]
fn a_silu_read_by_two_consumers_computes_the_block() {
    let d = scratch("silu-se");
    let (c, hw) = (8usize, 16usize);
    let m = model(
        vec![
            node("Sigmoid", "sig", &["x"], &["s"]),
            node("Mul", "silu", &["x", "s"], &["h"]),
            node("GlobalAveragePool", "gap", &["h"], &["p"]),
            node("Mul", "scale", &["h", "p"], &["y"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(c as i64), D::N(hw as i64), D::N(hw as i64)],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(c as i64), D::N(hw as i64), D::N(hw as i64)],
        )],
        vec![],
        17,
    );
    let p = d.join("se.onnx");
    save(&m, &p);
    // Values: y = h · mean(h) per channel, h = x·sigmoid(x).
    let n = c * hw * hw;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 101) as f32 / 10.0 - 5.0)
        .collect();
    let xin = d.join("x.pb");
    save_tensor(
        &f32_tensor("x", &[1, c as i64, hw as i64, hw as i64], &x),
        &xin,
    );
    let y = run_model(&[&p, &xin], &d.join("out"))[0].to_f64s();
    let h: Vec<f64> = x
        .iter()
        .map(|&v| v as f64 / (1.0 + (-(v as f64)).exp()))
        .collect();
    for ch in 0..c {
        let plane = &h[ch * hw * hw..(ch + 1) * hw * hw];
        let mean = plane.iter().sum::<f64>() / plane.len() as f64;
        for (i, hv) in plane.iter().enumerate() {
            let (got, want) = (y[ch * hw * hw + i], hv * mean);
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "[{ch}, {i}]: {got} vs {want}"
            );
        }
    }
}

/// A sigmoid between QDQ pairs (quantized YOLO/EfficientNet activations), computed once
/// per quantized value as a 257-entry table the map reads per element (`schedule::lut`,
/// filetests/qdq_sigmoid_table.onnxt): the results are those of the direct computation,
/// NaN and infinities included.
#[test]
fn a_quantized_activation_table_gives_the_direct_results() {
    let d = scratch("qdq-lut");
    let (s, z) = (0.05f32, 120u8);
    let m = model(
        vec![
            node("QuantizeLinear", "q", &["x", "s", "z"], &["xq"]),
            node("DequantizeLinear", "dq", &["xq", "s", "z"], &["xd"]),
            node("Sigmoid", "sig", &["xd"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(8), D::N(16), D::N(16)])],
        vec![value_info("y", 1, &[D::N(1), D::N(8), D::N(16), D::N(16)])],
        vec![
            f32_tensor("s", &[], &[s]),
            int_tensor("z", 2, &[], &[z as i64]),
        ],
        13,
    );
    let p = d.join("qdq.onnx");
    save(&m, &p);
    let n = 8 * 16 * 16;
    let mut x: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 401) as f32 / 20.0 - 10.0)
        .collect();
    x[..5].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -0.025]);
    let xin = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 8, 16, 16], &x), &xin);
    let got = run_model(&[&p, &xin], &d.join("out"))[0].to_f64s();
    for (i, &v) in x.iter().enumerate() {
        // QuantizeLinear: round half to even, saturate (NaN converts to 0); then back.
        let q = if v.is_nan() {
            0.0
        } else {
            ((v / s).round_ties_even() + z as f32).clamp(0.0, 255.0)
        };
        let d = (q - z as f32) * s;
        let want = 1.0 / (1.0 + (-(d as f64)).exp());
        assert!(
            (got[i] - want).abs() <= 1e-6,
            "x = {v}: got {}, want {want}",
            got[i]
        );
    }
}

/// QLinearMatMul requantizes in float32 with an error-free product (`quant::requantize_f32`):
/// the result must equal rounding the exact product `acc · (a_scale·b_scale/y_scale)` half
/// to even — on exact ties (factor ½, odd acc) and on products a float32 multiply rounds
/// onto a tie (factors one ulp above and below ½ and ¾), at -O2 (vector code) and -O0.
#[test]
fn quantized_products_round_like_the_exact_product() {
    let d = scratch("requant");
    let factors = [
        0.5f32,
        f32::from_bits(0.5f32.to_bits() + 1),
        f32::from_bits(0.5f32.to_bits() - 1),
        f32::from_bits(0.75f32.to_bits() + 1),
        f32::from_bits(0.75f32.to_bits() - 1),
        0.3,
        1.0 / 3.0,
        0.996_093_75,
    ];
    let (mut nodes, mut inits, mut outs) = (Vec::new(), Vec::new(), Vec::new());
    inits.push(int_tensor("b", 2, &[1, 1], &[1]));
    inits.push(int_tensor("z", 2, &[], &[0]));
    inits.push(f32_tensor("one", &[], &[1.0]));
    for (k, f) in factors.iter().enumerate() {
        inits.push(f32_tensor(&format!("s{k}"), &[], &[*f]));
        let y = format!("y{k}");
        nodes.push(node(
            "QLinearMatMul",
            &format!("qmm{k}"),
            &["a", &format!("s{k}"), "z", "b", "one", "z", "one", "z"],
            &[&y],
        ));
        outs.push(value_info(&y, 2, &[D::N(256), D::N(1)]));
    }
    let m = model(
        nodes,
        vec![value_info("a", 2, &[D::N(256), D::N(1)])],
        outs,
        inits,
        13,
    );
    let p = d.join("qmm.onnx");
    save(&m, &p);
    let a: Vec<i64> = (0..256).collect();
    let ain = d.join("a.pb");
    save_tensor(&int_tensor("a", 2, &[256, 1], &a), &ain);
    for opt in ["--O2", "--O0"] {
        let args = [p.as_os_str(), ain.as_os_str(), std::ffi::OsStr::new(opt)];
        let outs = run_model(&args, &d.join(format!("out{opt}")));
        for (k, f) in factors.iter().enumerate() {
            let got = outs[k].to_f64s();
            // a_scale · b_scale / y_scale in float32 (b and y scales are 1).
            let factor = (*f * 1.0) / 1.0;
            for (i, &av) in a.iter().enumerate() {
                let want = ((av as f64) * factor as f64)
                    .round_ties_even()
                    .clamp(0.0, 255.0);
                assert_eq!(got[i], want, "{opt}: {av} x {factor:e}");
            }
        }
    }
}

/// The random ops' counter-based generator (`frontend::ops::random`): uniform and normal
/// draws have the moments they should, Bernoulli hits at its probability, training-mode
/// Dropout keeps 1 − ratio of the elements scaled by 1 / (1 − ratio); the values folded at
/// compile time (constant shapes) equal the ones the generated code draws (`*Like` of a
/// run-time input), and -O0 gives the -O2 bits.
#[test]
fn random_ops_draw_what_they_should() {
    let n = 20_000i64;
    let float = |name: &str, v: f32| onnxc_proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(1),
        f: Some(v),
        ..Default::default()
    };
    let with = |mut nd: onnxc_proto::NodeProto, attrs: Vec<onnxc_proto::AttributeProto>| {
        nd.attribute.extend(attrs);
        nd
    };
    let mdl = model(
        vec![
            with(
                with_ints(node("RandomUniform", "u", &[], &["u"]), "shape", &[n]),
                vec![float("seed", 3.0)],
            ),
            with(
                node("RandomUniformLike", "ul", &["x"], &["ul"]),
                vec![float("seed", 3.0)],
            ),
            with(
                node("RandomNormalLike", "z", &["x"], &["z"]),
                vec![float("mean", 2.0), float("scale", 3.0), float("seed", 1.0)],
            ),
            node("Bernoulli", "b", &["p"], &["b"]),
            node("Dropout", "d", &["x", "r", "t"], &["dy", "dm"]),
        ],
        vec![
            value_info("x", 1, &[D::N(n)]),
            value_info("p", 1, &[D::N(n)]),
        ],
        ["u", "ul", "z", "b", "dy"]
            .iter()
            .map(|o| value_info(o, 1, &[D::N(n)]))
            .chain([value_info("dm", 9, &[D::N(n)])])
            .collect(),
        vec![f32_tensor("r", &[], &[0.25]), int_tensor("t", 9, &[], &[1])],
        22,
    );
    let d = scratch("random");
    let p = d.join("random.onnx");
    save(&mdl, &p);
    let (xp, pp) = (d.join("x.pb"), d.join("p.pb"));
    save_tensor(&f32_tensor("x", &[n], &vec![1.0; n as usize]), &xp);
    save_tensor(&f32_tensor("p", &[n], &vec![0.3; n as usize]), &pp);
    let run = |flags: &[&str], out: &str| {
        let mut args = vec![p.as_os_str(), xp.as_os_str(), pp.as_os_str()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        run_model(&args, &d.join(out))
    };
    let outs = run(&[], "o2");
    let v: Vec<Vec<f64>> = outs.iter().map(|t| t.to_f64s()).collect();
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let var = |x: &[f64]| {
        let m = mean(x);
        x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / x.len() as f64
    };
    // Uniform on [0, 1): mean 1/2, variance 1/12 (standard errors ~0.002 and ~0.0006).
    assert!(v[0].iter().all(|&u| (0.0..1.0).contains(&u)));
    assert!((mean(&v[0]) - 0.5).abs() < 0.01, "{}", mean(&v[0]));
    assert!((var(&v[0]) - 1.0 / 12.0).abs() < 0.003, "{}", var(&v[0]));
    // Folded at compile time and drawn at run time: the same bits.
    assert_eq!(v[0], v[1]);
    // Normal(2, 3²).
    assert!((mean(&v[2]) - 2.0).abs() < 0.1, "{}", mean(&v[2]));
    assert!(
        (var(&v[2]).sqrt() - 3.0).abs() < 0.1,
        "{}",
        var(&v[2]).sqrt()
    );
    // Bernoulli(0.3).
    assert!(v[3].iter().all(|&b| b == 0.0 || b == 1.0));
    assert!((mean(&v[3]) - 0.3).abs() < 0.015, "{}", mean(&v[3]));
    // Dropout(0.25) in training mode: kept elements are 1 / 0.75, the rest 0, mask agrees.
    let kept: Vec<bool> = v[5].iter().map(|&m| m != 0.0).collect();
    for (y, k) in v[4].iter().zip(&kept) {
        assert_eq!(*y, if *k { (1.0f32 / 0.75) as f64 } else { 0.0 });
    }
    let rate = kept.iter().filter(|&&k| k).count() as f64 / n as f64;
    assert!((rate - 0.75).abs() < 0.015, "{rate}");
    // Deterministic: -O0 draws the same values.
    let o0: Vec<Vec<f64>> = run(&["--O0"], "o0").iter().map(|t| t.to_f64s()).collect();
    assert_eq!(o0, v);
}

/// Multinomial (`frontend::ops::random::multinomial`): samples fall in every class at its
/// probability (softmax of the logits), the int32 and int64 forms draw the same indices,
/// the values folded at compile time (constant logits) equal the ones drawn at run time, and
/// -O0 gives the -O2 indices.
#[test]
fn multinomial_samples_at_the_softmax_probabilities() {
    let (rows, samples) = (2usize, 20_000i64);
    let probs = [[0.2f32, 0.5, 0.3], [0.7, 0.1, 0.2]];
    let logits: Vec<f32> = probs.iter().flatten().map(|p| p.ln()).collect();
    let attrs = |dtype: Option<i64>| {
        let mut a = vec![
            onnxc_proto::AttributeProto {
                name: Some("sample_size".into()),
                r#type: Some(2),
                i: Some(samples),
                ..Default::default()
            },
            onnxc_proto::AttributeProto {
                name: Some("seed".into()),
                r#type: Some(1),
                f: Some(5.0),
                ..Default::default()
            },
        ];
        if let Some(t) = dtype {
            a.push(onnxc_proto::AttributeProto {
                name: Some("dtype".into()),
                r#type: Some(2),
                i: Some(t),
                ..Default::default()
            });
        }
        a
    };
    let sample = |name: &str, input: &str, dtype: Option<i64>| {
        let mut n = node("Multinomial", name, &[input], &[name]);
        n.attribute.extend(attrs(dtype));
        n
    };
    let mdl = model(
        vec![
            sample("i32", "x", None),
            sample("i64", "x", Some(7)),
            sample("folded", "c", None),
        ],
        vec![value_info("x", 1, &[D::N(rows as i64), D::N(3)])],
        vec![
            value_info("i32", 6, &[D::N(rows as i64), D::N(samples)]),
            value_info("i64", 7, &[D::N(rows as i64), D::N(samples)]),
            value_info("folded", 6, &[D::N(rows as i64), D::N(samples)]),
        ],
        vec![f32_tensor("c", &[rows as i64, 3], &logits)],
        7,
    );
    let d = scratch("multinomial");
    let p = d.join("multinomial.onnx");
    save(&mdl, &p);
    let xp = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[rows as i64, 3], &logits), &xp);
    let run = |opt: &str| -> Vec<Vec<f64>> {
        let args = [p.as_os_str(), xp.as_os_str(), std::ffi::OsStr::new(opt)];
        run_model(&args, &d.join(opt))
            .iter()
            .map(|t| t.to_f64s())
            .collect()
    };
    let v = run("--O2");
    assert_eq!(v[0], v[1], "int32 and int64 draw the same indices");
    assert_eq!(v[0], v[2], "folded at compile time and drawn at run time");
    for (r, want) in probs.iter().enumerate() {
        let row = &v[0][r * samples as usize..(r + 1) * samples as usize];
        for (class, &p) in want.iter().enumerate() {
            let freq = row.iter().filter(|&&c| c == class as f64).count() as f64 / samples as f64;
            // Standard error at most 0.0036.
            assert!(
                (freq - p as f64).abs() < 0.015,
                "row {r} class {class}: {freq}"
            );
        }
    }
    assert_eq!(run("--O0"), v);
}

/// A run-time batch of a model whose items stream its weights (an MLP: one multiply-add
/// per weight per item) gets chunk programs of 64 and 8 items; a run of 77 items (one chunk
/// of 64, one of 8, five single items) computes every item as a float64 reference does, on
/// one and two threads. A model whose items reuse each weight over many rows (a 128-row
/// product per item) gets none.
#[test]
fn run_time_batch_chunks_compute_every_item() {
    use onnxc::driver::{self, Options};
    use onnxc_tests::{Outcome, Symbolic, run_case_as};
    let (k, h, o, n) = (64usize, 96usize, 10usize, 77usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let w1: Vec<f32> = (0..k * h).map(|_| next() * 0.2).collect();
    let b1: Vec<f32> = (0..h).map(|_| next()).collect();
    let w2: Vec<f32> = (0..h * o).map(|_| next() * 0.2).collect();
    let x: Vec<f32> = (0..n * k).map(|_| next()).collect();
    let mlp = |rows: i64| {
        model(
            vec![
                node("MatMul", "fc1", &["x", "w1"], &["h"]),
                node("Add", "bias", &["h", "b1"], &["hb"]),
                node("Relu", "relu", &["hb"], &["r"]),
                node("MatMul", "fc2", &["r", "w2"], &["y"]),
            ],
            vec![value_info("x", 1, &[D::S("N"), D::N(rows), D::N(k as i64)])],
            vec![value_info("y", 1, &[D::S("N"), D::N(rows), D::N(o as i64)])],
            vec![
                f32_tensor("w1", &[k as i64, h as i64], &w1),
                f32_tensor("b1", &[h as i64], &b1),
                f32_tensor("w2", &[h as i64, o as i64], &w2),
            ],
            17,
        )
    };
    let d = scratch("batch-chunks");
    save(&mlp(1), &d.join("model.onnx"));
    let set = d.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    save_tensor(
        &f32_tensor("x", &[n as i64, 1, k as i64], &x),
        &set.join("input_0.pb"),
    );
    let mut want = vec![0f32; n * o];
    for i in 0..n {
        let r: Vec<f64> = (0..h)
            .map(|j| {
                let s: f64 = (0..k)
                    .map(|c| x[i * k + c] as f64 * w1[c * h + j] as f64)
                    .sum();
                (s + b1[j] as f64).max(0.0)
            })
            .collect();
        for c in 0..o {
            want[i * o + c] = (0..h).map(|j| r[j] * w2[j * o + c] as f64).sum::<f64>() as f32;
        }
    }
    save_tensor(
        &f32_tensor("y", &[n as i64, 1, o as i64], &want),
        &set.join("output_0.pb"),
    );
    let opts = Options::default();
    let bytes = std::fs::read(d.join("model.onnx")).unwrap();
    let dir = onnxc::frontend::tensor::DataDir::new(d.to_path_buf());
    let c = driver::compile_bytes(&bytes, &dir, "model.onnx", "mlp", &opts, None).unwrap();
    let chunks: Vec<i64> = c.program.chunks.iter().map(|c| c.items).collect();
    assert_eq!(chunks, [64, 8], "an MLP's items share its weights' traffic");
    let outcome = run_case_as(&d, &opts, 1e-5, 1e-5, None, &[1, 2], Symbolic::Batch);
    assert!(matches!(outcome, Outcome::Pass), "{outcome:?}");

    // 128 rows an item: each weight is used 128 times per item already.
    let wide = mlp(128);
    let mut bytes = Vec::new();
    prost::Message::encode(&wide, &mut bytes).unwrap();
    let c = driver::compile_bytes(&bytes, &dir, "model.onnx", "wide", &opts, None).unwrap();
    assert!(
        c.program.chunks.is_empty(),
        "items that reuse their weights"
    );
}

/// A concat along the last axis of byte parts of 1 to 65 bytes (slices of the input, in
/// reverse order): copies of up to 64 bytes are loads and stores of 16, 8, 4, 2 and 1 bytes
/// (`codegen::func::inline_copy`), longer ones a `memcpy`; each part lands where it should.
#[test]
fn short_copies_move_exactly_their_bytes() {
    let d = scratch("short_copies");
    let widths = [1i64, 2, 3, 7, 15, 16, 33, 64, 65];
    let w: i64 = widths.iter().sum();
    let (rows, mut nodes, mut inits, mut parts) = (3i64, Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    for (k, &n) in widths.iter().enumerate() {
        let (s, e, a) = (format!("s{k}"), format!("e{k}"), format!("a{k}"));
        inits.push(int_tensor(&s, 7, &[1], &[at]));
        inits.push(int_tensor(&e, 7, &[1], &[at + n]));
        inits.push(int_tensor(&a, 7, &[1], &[1]));
        let part = format!("p{k}");
        nodes.push(node("Slice", &part, &["x", &s, &e, &a], &[&part]));
        parts.push(part);
        at += n;
    }
    parts.reverse();
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    nodes.push(onnxc_tests::model::with_int(
        node("Concat", "cat", &refs, &["y"]),
        "axis",
        1,
    ));
    let m = model(
        nodes,
        vec![value_info("x", 2, &[D::N(rows), D::N(w)])],
        vec![value_info("y", 2, &[D::N(rows), D::N(w)])],
        inits,
        13,
    );
    let p = d.join("cat.onnx");
    save(&m, &p);
    let x: Vec<i64> = (0..rows * w).map(|k| k * 37 % 251).collect();
    let xf = d.join("x.pb");
    save_tensor(&int_tensor("x", 2, &[rows, w], &x), &xf);
    let y = run_model(&[&p, &xf], &d.join("out"))[0].to_f64s();
    let mut want = Vec::new();
    for r in 0..rows {
        let row = &x[(r * w) as usize..((r + 1) * w) as usize];
        let mut ends: Vec<(i64, i64)> = Vec::new();
        let mut at = 0;
        for &n in &widths {
            ends.push((at, at + n));
            at += n;
        }
        for &(s, e) in ends.iter().rev() {
            want.extend(row[s as usize..e as usize].iter().map(|&v| v as f64));
        }
    }
    assert_eq!(y, want);
}

/// A Slice whose starts, ends and steps are inputs (run-time parameters; its output's
/// length a data-dependent dim) takes the elements
/// numpy's slicing takes, at steps of every magnitude up to i64::MAX and i64::MIN (whose
/// length arithmetic overflowed: step i64::MAX took nothing).
#[test]
fn run_time_slices_take_numpys_elements_at_extreme_steps() {
    let d = scratch("slice-steps");
    let m = model(
        vec![node("Slice", "sl", &["x", "s", "e", "a", "p"], &["y"])],
        vec![
            value_info("x", 1, &[D::N(6)]),
            value_info("s", 7, &[D::N(1)]),
            value_info("e", 7, &[D::N(1)]),
            value_info("p", 7, &[D::N(1)]),
        ],
        vec![value_info("y", 1, &[D::S("n")])],
        vec![int_tensor("a", 7, &[1], &[0])],
        18,
    );
    let p = d.join("slice.onnx");
    save(&m, &p);
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let xp = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[6], &x), &xp);
    let one = |name: &str, v: i64| {
        let f = d.join(format!("{name}{v}.pb"));
        save_tensor(&int_tensor(name, 7, &[1], &[v]), &f);
        f
    };
    // (start, end, step) and numpy's x[start:end:step] (ends past the axis clamp).
    let cases: [(i64, i64, i64, &[f32]); 8] = [
        (0, 6, i64::MAX, &[0.0]),
        (1, 6, i64::MAX, &[1.0]),
        (5, -7, i64::MIN, &[5.0]),
        (3, -7, i64::MIN, &[3.0]),
        (0, 6, 1 << 62, &[0.0]),
        (0, 6, 4, &[0.0, 4.0]),
        (5, -7, -4, &[5.0, 1.0]),
        (4, 2, i64::MAX, &[]),
    ];
    for (k, (s, e, st, want)) in cases.into_iter().enumerate() {
        let args = [
            p.clone(),
            xp.clone(),
            one("s", s),
            one("e", e),
            one("p", st),
        ];
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let got = run_model(&args, &d.join(format!("out{k}")))[0].to_f64s();
        let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        assert_eq!(got, want, "x[{s}:{e}:{st}]");
    }
}

/// A select on a bool mask read along the loop (`Where(mask, x / 4, -1e9)` plus a row bias,
/// as an attention mask is applied) runs as vector code that loads four mask bytes at a
/// time, with the division by 4 a product: every length from 1 to 13 (tails of each
/// remainder) gives the elements the formula gives.
#[test]
fn selects_on_bool_masks_take_each_element() {
    let d = scratch("bool-mask");
    for n in 1usize..=13 {
        let m = model(
            vec![
                node("Div", "scale", &["x", "four"], &["s"]),
                node("Where", "mask", &["c", "s", "low"], &["w"]),
                node("Add", "bias", &["w", "b"], &["y"]),
            ],
            vec![
                value_info("c", 9, &[D::N(3), D::N(n as i64)]),
                value_info("x", 1, &[D::N(3), D::N(n as i64)]),
                value_info("b", 1, &[D::N(3), D::N(1)]),
            ],
            vec![value_info("y", 1, &[D::N(3), D::N(n as i64)])],
            vec![
                f32_tensor("four", &[], &[4.0]),
                f32_tensor("low", &[], &[-1e9]),
            ],
            17,
        );
        let p = d.join(format!("mask{n}.onnx"));
        save(&m, &p);
        let c: Vec<i64> = (0..3 * n)
            .map(|k| ((k * 7 + k / n) % 3 != 0) as i64)
            .collect();
        let x: Vec<f32> = (0..3 * n).map(|k| k as f32 * 1.5 - 7.0).collect();
        let b = [0.25f32, -0.5, 3.0];
        let files = [
            (int_tensor("c", 9, &[3, n as i64], &c), "c"),
            (f32_tensor("x", &[3, n as i64], &x), "x"),
            (f32_tensor("b", &[3, 1], &b), "b"),
        ];
        let mut args = vec![p.clone()];
        for (t, name) in files {
            let f = d.join(format!("{name}{n}.pb"));
            save_tensor(&t, &f);
            args.push(f);
        }
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let got = run_model(&args, &d.join(format!("out{n}")))[0].to_f64s();
        let want: Vec<f64> = (0..3 * n)
            .map(|k| {
                let w = if c[k] != 0 { x[k] / 4.0 } else { -1e9 };
                (w + b[k / n]) as f64
            })
            .collect();
        assert_eq!(got, want, "length {n}");
    }
}
