//! Dims a model pins (`driver::pinned`): exported with a dynamic axis, valid at one value
//! of it only.

use super::*;

/// `x` `[n, 4]` reshaped to the constant `[2, 8]` and doubled: valid at `n = 4` only (a
/// graph traced at one batch and exported with a dynamic axis). With `cols` 8 instead of 4
/// and a second symbol in `x`'s columns, it leaves two dims unbound.
fn model_with_fixed_rows(cols: D) -> onnxc_proto::ModelProto {
    model(
        vec![
            node("Reshape", "flat", &["x", "shape"], &["r"]),
            node("Mul", "double", &["r", "two"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::S("n"), cols])],
        vec![value_info("y", 1, &[D::N(2), D::N(8)])],
        vec![
            int_tensor("shape", 7, &[2], &[2, 8]),
            f32_tensor("two", &[], &[2.0]),
        ],
        13,
    )
}

/// A model valid at one value of its only symbolic dim compiles with no flag, fixed at that
/// value, with a warning that names it and what fails at the next value; it runs there and
/// refuses other sizes. With a second symbolic dim it is refused as before: which value
/// one dim is valid at depends on the other's.
#[test]
fn a_dim_the_model_is_valid_at_one_value_of_is_fixed_there() {
    let d = scratch("run_time_dims_pinned");
    let p = d.join("rows.onnx");
    save(&model_with_fixed_rows(D::N(4)), &p);
    let warning = compiles(&p, &d.join("cli.o"), &[]);
    assert!(warning.contains("dim 'n' is fixed at 4"), "{warning}");
    assert!(warning.contains("at 5: node 'flat' (Reshape"), "{warning}");
    let c = compile_unflagged(&p);
    assert!(c.program.run_dims.is_empty(), "{}", c.header);
    assert!(c.header.contains("float32 [4, 4]"), "{}", c.header);
    let exe = executable(&c, &d, "pinned");
    let x: Vec<f32> = (0..16).map(|k| k as f32 - 7.5).collect();
    let got = outputs(&exe, &write_input(&d, 4, &x), &d.join("out4"), 1, 1);
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(floats(&got[0]), want);
    let o = run(&exe, &write_input(&d, 3, &x[..12]), &d.join("out3"));
    assert!(!o.status.success(), "3 rows ran on an object fixed at 4");
    // Two symbols: refused, the error naming the batch as before.
    let q = d.join("two.onnx");
    save(&model_with_fixed_rows(D::S("c")), &q);
    let e = fails(onnxc().arg(&q).arg("-o").arg(d.join("two.o")));
    assert!(!e.contains("is fixed at"), "{e}");
}

/// An LSTM over `x [seq, batch, 4]` whose initial states are constants of one item (as
/// exporters trace `torch.zeros(1, 1, hidden)`): valid at batch 1 only, at any length.
fn model_with_constant_state() -> onnxc_proto::ModelProto {
    let w: Vec<f32> = (0..32 * 4)
        .map(|k| ((k * 7 % 13) as f32 - 6.0) / 20.0)
        .collect();
    let r: Vec<f32> = (0..32 * 8)
        .map(|k| ((k * 5 % 11) as f32 - 5.0) / 20.0)
        .collect();
    model(
        vec![with_int(
            node(
                "LSTM",
                "lstm",
                &["x", "w", "r", "", "", "h0", "h0"],
                &["", "h"],
            ),
            "hidden_size",
            8,
        )],
        vec![value_info("x", 1, &[D::S("seq"), D::S("batch"), D::N(4)])],
        vec![value_info("h", 1, &[D::N(1), D::S("batch"), D::N(8)])],
        vec![
            f32_tensor("w", &[1, 32, 4], &w),
            f32_tensor("r", &[1, 32, 8], &r),
            f32_tensor("h0", &[1, 1, 8], &[0.0; 8]),
        ],
        14,
    )
}

/// With several symbolic dims, one the model is valid at one value of (the others at 8
/// while it is tried) is fixed there, and the others are taken as before: the LSTM's batch
/// is fixed at 1 and its sequence taken at run time, each length's state the specialized
/// object's.
#[test]
fn a_pinned_dim_leaves_the_others_at_run_time() {
    let d = scratch("run_time_dims_pinned_state");
    let p = d.join("lstm.onnx");
    save(&model_with_constant_state(), &p);
    let warning = compiles(&p, &d.join("cli.o"), &[]);
    assert!(
        warning.contains("dim 'batch' is fixed at 1") && warning.contains("with 'seq' at 8"),
        "{warning}"
    );
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for seq in [1usize, 5, 40] {
        let x: Vec<f32> = (0..seq * 4)
            .map(|k| ((k * 3 % 17) as f32 - 8.0) / 9.0)
            .collect();
        let input = write_input(&d, seq, &x);
        let got = outputs_at(&exe, &input, &d.join(format!("dyn{seq}")), 1, 1, &[seq]);
        let want = specialized(&p, &d, "seq", seq, &input, 1);
        assert_eq!(got, want, "seq {seq}");
    }
}

/// `x [batch, 1, W]` max-pooled by an unpadded window of 16, then split into one item:
/// valid at batch 1 only, and at widths of 16 or more.
fn model_with_wide_window() -> onnxc_proto::ModelProto {
    model(
        vec![
            with_ints(
                node("MaxPool", "pool", &["x"], &["p"]),
                "kernel_shape",
                &[16],
            ),
            with_int(node("Split", "one", &["p", "sizes"], &["y"]), "axis", 0),
        ],
        vec![value_info("x", 1, &[D::S("batch"), D::N(1), D::S("W")])],
        vec![value_info("y", 1, &[D::N(1), D::N(1), D::S("V")])],
        vec![int_tensor("sizes", 7, &[1], &[1])],
        13,
    )
}

/// Where the dim tried is valid at no value with the others at 8 (a width below the
/// window), they are tried at 64: the batch is fixed at 1 and the width taken at run time
/// from 16.
#[test]
fn a_dim_is_pinned_with_the_others_at_a_size_they_need() {
    let d = scratch("run_time_dims_pinned_window");
    let p = d.join("window.onnx");
    save(&model_with_wide_window(), &p);
    let warning = compiles(&p, &d.join("cli.o"), &[]);
    assert!(
        warning.contains("dim 'batch' is fixed at 1") && warning.contains("with 'W' at 64"),
        "{warning}"
    );
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("W", 16, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for w in [16usize, 40] {
        let x: Vec<f32> = (0..w).map(|k| ((k * 7 % 19) as f32 - 9.0) / 4.0).collect();
        let got = outputs_at(
            &exe,
            &write_input(&d, w, &x),
            &d.join(format!("dyn{w}")),
            1,
            1,
            &[w],
        );
        let want: Vec<f32> = (0..=w - 16)
            .map(|k| x[k..k + 16].iter().copied().fold(f32::MIN, f32::max))
            .collect();
        assert_eq!(floats(&got[0]), want, "width {w}");
    }
}
