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
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("cli.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let warning = stderr(&o);
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
