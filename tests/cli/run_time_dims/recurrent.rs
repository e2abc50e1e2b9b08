//! Recurrences over a run-time sequence (and batch): LSTM, DynamicQuantizeLSTM and GRU
//! exports, a leading sequence dim taken at run time with no flag.

use super::*;

/// A bidirectional LSTM (hidden 16, with bias and peepholes) over `[S, 1, 8]`, its outputs
/// every step's h `[S, 2, 1, 16]` and the last ones `[2, 1, 16]`.
fn model_with_lstm() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 17) as f32 - 8.0) / 24.0).collect()
    };
    model(
        vec![with_int(
            with_str(
                node(
                    "LSTM",
                    "lstm",
                    &["x", "w", "r", "b", "", "", "", "p"],
                    &["y", "yh"],
                ),
                "direction",
                "bidirectional",
            ),
            "hidden_size",
            16,
        )],
        vec![value_info("x", 1, &[D::S("S"), D::N(1), D::N(8)])],
        vec![
            value_info("y", 1, &[D::S("S"), D::N(2), D::N(1), D::N(16)]),
            value_info("yh", 1, &[D::N(2), D::N(1), D::N(16)]),
        ],
        vec![
            f32_tensor("w", &[2, 64, 8], &v(2 * 64 * 8, 5)),
            f32_tensor("r", &[2, 64, 16], &v(2 * 64 * 16, 7)),
            f32_tensor("b", &[2, 128], &v(2 * 128, 3)),
            f32_tensor("p", &[2, 48], &v(2 * 48, 11)),
        ],
        14,
    )
}

#[test]
fn an_lstm_runs_over_a_sequence_taken_at_run_time() {
    let d = scratch("run_time_dims_lstm");
    let p = d.join("lstm.onnx");
    save(&model_with_lstm(), &p);
    // The runtime's recurrence takes the length as a parameter: one program for every S.
    let c = compile_dynamic(&p, "S", 256);
    assert_eq!(c.program.run_dims[0].least, 1, "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 2, 3, 17, 64, 200, 256] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 13 % 31) as f32 - 15.0) / 10.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{s}t2")), 2, 2);
        assert_eq!(got, two, "S {s}: 2 threads");
        let want = specialized(&p, &d, "S", s, &input, 2);
        assert_eq!(got[0].len(), s * 2 * 16 * 4, "S {s}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "S {s}, output {k}: the same program at S as the specialized one"
            );
        }
    }
    // Longer than the 4096 steps onnxc unrolls: the recurrence takes any length.
    let long = Options {
        dims: vec![("S".into(), 6000)],
        ..Options::default()
    };
    driver::compile_file(&p, "model", &long, None).unwrap();
}

#[test]
fn a_leading_sequence_dim_is_taken_at_run_time_with_no_flag() {
    // `[S, 1, 8]`, S leading as PyTorch exports a recurrence's input: no run-time batch
    // (the steps depend on each other), so S is taken at run time up to the default bound.
    let d = scratch("run_time_dims_leading_seq");
    let p = d.join("lstm.onnx");
    save(&model_with_lstm(), &p);
    let c = compile_unflagged(&p);
    let dims = run_dims_of(&c);
    assert_eq!(dims, [("S", 1, driver::DEFAULT_DIM_BOUND)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 5, 300] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 11 % 29) as f32 - 14.0) / 10.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        assert_eq!(
            got,
            specialized(&p, &d, "S", s, &input, 2),
            "S {s}: the same program at S as the specialized one"
        );
    }
    // Past the bound: refused, nothing written.
    let input = write_input(&d, 513, &vec![0.5; 513 * 8]);
    let o = run(&dynamic, &input, &d.join("over"));
    assert!(!o.status.success(), "S 513 ran past the bound");
    // The same leading dim bound on the command line is taken as given.
    let bounded = compile_dynamic(&p, "S", 64);
    assert_eq!(bounded.program.run_dims[0].bound, 64);
}

/// onnxruntime's DynamicQuantizeLSTM as `quantize_dynamic` writes it, over `x [S, 1, 8]`:
/// int8 weights `W [1, 8, 64]` and `R [1, 16, 64]` (transposed) with a scale and zero point
/// each, hidden 16.
fn model_with_quantized_lstm() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<i64> { (0..n).map(|k| (k * m % 61) as i64 - 30).collect() };
    let mut lstm = node(
        "DynamicQuantizeLSTM",
        "qlstm",
        &["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"],
        &["y", "yh"],
    );
    lstm.domain = Some("com.microsoft".into());
    let b: Vec<f32> = (0..128)
        .map(|k| ((k * 7 % 13) as f32 - 6.0) / 20.0)
        .collect();
    onnxc_tests::model::importing(
        model(
            vec![with_int(lstm, "hidden_size", 16)],
            vec![value_info("x", 1, &[D::S("S"), D::N(1), D::N(8)])],
            vec![
                value_info("y", 1, &[D::S("S"), D::N(1), D::N(1), D::N(16)]),
                value_info("yh", 1, &[D::N(1), D::N(1), D::N(16)]),
            ],
            vec![
                int_tensor("w", 3, &[1, 8, 64], &v(8 * 64, 7)),
                int_tensor("r", 3, &[1, 16, 64], &v(16 * 64, 11)),
                f32_tensor("b", &[1, 128], &b),
                f32_tensor("ws", &[1], &[0.01]),
                int_tensor("wz", 3, &[1], &[0]),
                f32_tensor("rs", &[1], &[0.008]),
                int_tensor("rz", 3, &[1], &[1]),
            ],
            14,
        ),
        "com.microsoft",
        1,
    )
}

#[test]
fn a_dynamically_quantized_lstm_runs_over_a_sequence_taken_at_run_time() {
    // The recurrence kernel quantizes the state at every step (its input projection is the
    // integer product of the quantized input, whose rows are a call argument): one program
    // for every length, no longer unrolled.
    let d = scratch("run_time_dims_qlstm");
    let p = d.join("qlstm.onnx");
    save(&model_with_quantized_lstm(), &p);
    let c = compile_unflagged(&p);
    let dims = run_dims_of(&c);
    assert_eq!(dims, [("S", 1, driver::DEFAULT_DIM_BOUND)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 2, 7, 40, 300] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 13 % 31) as f32 - 15.0) / 9.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        assert_eq!(
            got,
            specialized(&p, &d, "S", s, &input, 2),
            "S {s}: the specialized object's outputs"
        );
    }
}

/// A GRU as PyTorch exports one with dynamic axes: `x [S, B, 8]` and `h0 [1, B, 16]` to
/// `y [S, 1, B, 16]` and `yh [1, B, 16]`, both dims symbolic.
fn model_with_gru() -> onnxc_proto::ModelProto {
    model_with_gru_giving(true)
}

/// `model_with_gru`, its sequence of states an output or only its last state (`y`: both).
fn model_with_gru_giving(y: bool) -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 17) as f32 - 8.0) / 24.0).collect()
    };
    model(
        vec![with_int(
            with_int(
                node("GRU", "gru", &["x", "w", "r", "b", "", "h0"], &["y", "yh"]),
                "linear_before_reset",
                1,
            ),
            "hidden_size",
            16,
        )],
        vec![
            value_info("x", 1, &[D::S("S"), D::S("B"), D::N(8)]),
            value_info("h0", 1, &[D::N(1), D::S("B"), D::N(16)]),
        ],
        [
            value_info("y", 1, &[D::S("S"), D::N(1), D::S("B"), D::N(16)]),
            value_info("yh", 1, &[D::N(1), D::S("B"), D::N(16)]),
        ]
        .into_iter()
        .skip(if y { 0 } else { 1 })
        .collect(),
        vec![
            f32_tensor("w", &[1, 48, 8], &v(48 * 8, 5)),
            f32_tensor("r", &[1, 48, 16], &v(48 * 16, 7)),
            f32_tensor("b", &[1, 96], &v(96, 3)),
        ],
        14,
    )
}

/// `model_with_gru`'s inputs `x [s, b, 8]` and `h0 [1, b, 16]`, written to `d`.
fn gru_inputs(d: &Path, b: usize, s: usize) -> [PathBuf; 2] {
    let x: Vec<f32> = (0..s * b * 8)
        .map(|k| ((k * 11 % 29) as f32 - 14.0) / 10.0)
        .collect();
    let h: Vec<f32> = (0..b * 16)
        .map(|k| ((k * 5 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let at = 1000 * b + s;
    [write_input(d, at, &x), write_input(d, 1_000_000 + at, &h)]
}

#[test]
fn a_recurrence_takes_its_batch_and_sequence_at_run_time_from_one() {
    // Two dims at run time: S (leading, no run-time batch: the steps depend on each other)
    // and B. Each takes every value from 1: the values below the formulas' (B 1, where the
    // batch's loops of extent 1 fall away) run programs of their own that take the other
    // dim at run time.
    let d = scratch("run_time_dims_gru");
    let p = d.join("gru.onnx");
    save(&model_with_gru(), &p);
    let c = compile_unflagged(&p);
    let dims = run_dims_of(&c);
    let bound = driver::DEFAULT_DIM_BOUND;
    assert_eq!(dims, [("B", 1, bound), ("S", 1, bound)], "{}", c.header);
    assert!(!c.program.fixed.is_empty(), "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (b, s) in [
        (1usize, 1usize),
        (1, 2),
        (2, 1),
        (1, 40),
        (3, 5),
        (27, 1),
        (16, 30),
    ] {
        let inputs = gru_inputs(&d, b, s);
        let out = d.join(format!("dyn{b}x{s}"));
        let got = outputs_of(&dynamic, &inputs, &out, 2, &[b, s]);
        let got = got.unwrap_or_else(|| panic!("B {b}, S {s} does not run"));
        let want = specialized_files(&p, &d, &[("B", b), ("S", s)], &inputs, 2);
        assert_eq!(got, want, "B {b}, S {s}: the specialized object's outputs");
    }
    // Past either bound: refused.
    let inputs = [
        write_input(&d, 2, &vec![0.5; (bound as usize + 1) * 8]),
        write_input(&d, 3, &[0.5; 16]),
    ];
    let out = d.join("over");
    assert!(outputs_of(&dynamic, &inputs, &out, 2, &[1, bound as usize + 1]).is_none());
}

#[test]
fn a_recurrence_giving_only_its_last_state_takes_both_dims_from_one() {
    // With Y no output, B 1 and S 1 together lower to another program (the input
    // projection of one row) than the formulas' at either alone: that corner gets a program
    // of its own, and each dim still takes every value from 1 (it took both from 28).
    let d = scratch("run_time_dims_gru_last");
    let p = d.join("gru.onnx");
    save(&model_with_gru_giving(false), &p);
    let c = compile_unflagged(&p);
    let bound = driver::DEFAULT_DIM_BOUND;
    assert_eq!(
        run_dims_of(&c),
        [("B", 1, bound), ("S", 1, bound)],
        "{}",
        c.header
    );
    let dynamic = executable(&c, &d, "dynamic");
    for (b, s) in [(1usize, 1usize), (1, 2), (2, 1), (1, 40), (3, 5), (27, 1)] {
        let inputs = gru_inputs(&d, b, s);
        let out = d.join(format!("dyn{b}x{s}"));
        let got = outputs_of(&dynamic, &inputs, &out, 1, &[b, s]);
        let got = got.unwrap_or_else(|| panic!("B {b}, S {s} does not run"));
        let want = specialized_files(&p, &d, &[("B", b), ("S", s)], &inputs, 1);
        assert_eq!(
            got, want,
            "B {b}, S {s}: the specialized object's last state"
        );
    }
}
