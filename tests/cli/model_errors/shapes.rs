//! Shapes known only when the model runs: run-time operands checked against what the
//! model declares, symbolic dims that must be fixed, rows sized by the data.

use super::*;

/// A run-time Reshape's shape input is checked when the model runs: one -1 computes, two
/// fail the run with ONNXC_ERR_SHAPE (as onnxruntime refuses them), even where the declared
/// output shape would let them through.
#[test]
fn a_run_time_reshape_with_two_minus_ones_fails_the_run() {
    let d = scratch("reshape-neg2");
    let m = model(
        vec![node("Reshape", "rs", &["x", "s"], &["y"])],
        vec![
            value_info("x", 1, &[D::N(2), D::N(3), D::N(4)]),
            value_info("s", 7, &[D::N(2)]),
        ],
        vec![value_info("y", 1, &[D::N(4), D::N(6)])],
        vec![],
        18,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let x = d.join("x.pb");
    let vals: Vec<f32> = (0..24).map(|v| v as f32).collect();
    save_tensor(&f32_tensor("x", &[2, 3, 4], &vals), &x);
    let s = d.join("s.pb");
    for ok in [[-1, 6], [4, -1]] {
        save_tensor(&int_tensor("s", 7, &[2], &ok), &s);
        let y = run_model(
            &[p.as_os_str(), x.as_os_str(), s.as_os_str()],
            &d.join("ok"),
        );
        assert_eq!(y[0].shape, [4, 6]);
    }
    save_tensor(&int_tensor("s", 7, &[2], &[-1, -1]), &s);
    let e = run_fails(&p, &[&x, &s], &d.join("bad"));
    assert!(
        e.contains("error 3: an input's dims or values imply a shape the model does not allow"),
        "{e}"
    );
}

/// A run-time Range whose result reaches a declared output only through broadcasting ops
/// (an expanded window function's shape) takes that shape as a guess, checked when the
/// model runs: the right length computes, another fails the run with ONNXC_ERR_SHAPE.
#[test]
fn a_shape_guessed_through_broadcasting_ops_is_checked_at_run_time() {
    let d = scratch("guessed");
    let m = model(
        vec![
            node("Range", "steps", &["zero", "n", "one"], &["r"]),
            node("Mul", "twice", &["r", "two"], &["m"]),
            node("Add", "shifted", &["m", "b"], &["y"]),
        ],
        vec![value_info("n", 1, &[]), value_info("b", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![
            f32_tensor("zero", &[], &[0.0]),
            f32_tensor("one", &[], &[1.0]),
            f32_tensor("two", &[], &[2.0]),
        ],
        13,
    );
    let p = d.join("range.onnx");
    save(&m, &p);
    let (nin, bin) = (d.join("n.pb"), d.join("b.pb"));
    save_tensor(&f32_tensor("b", &[4], &[0.5, 0.25, 0.0, -1.0]), &bin);
    save_tensor(&f32_tensor("n", &[], &[4.0]), &nin);
    let out = run_model(
        &[p.as_os_str(), nin.as_os_str(), bin.as_os_str()],
        &d.join("ok"),
    );
    assert_eq!(out[0].shape, [4]);
    assert_eq!(out[0].to_f64s(), [0.5, 2.25, 4.0, 5.0]);
    save_tensor(&f32_tensor("n", &[], &[3.0]), &nin);
    let e = run_fails(&p, &[&nin, &bin], &d.join("short"));
    assert!(
        e.contains("an input's dims or values imply a shape the model does not allow"),
        "{e}"
    );
}

/// A symbolic leading input dim compiles as a run-time batch where the model computes each
/// item on its own, and otherwise as a dim taken at run time up to the default bound, with
/// a warning that says so and names the flags that bound or fix it. Where the model is valid
/// at one size only, it is fixed there with a warning that names the dim, the node that
/// fails at another size and the flag that fixes it elsewhere. Any other symbolic dim
/// beyond two must be fixed.
#[test]
fn symbolic_dims_that_are_not_a_run_time_batch_are_reported() {
    let d = scratch("batch_dims");
    let x = value_info("x", 1, &[D::S("batch"), D::N(4)]);
    let y = |dims: &[D]| vec![value_info("y", 1, dims)];
    // A sum over the batch, a row picked from it: the items are not computed on their own,
    // and the dim is taken at run time instead.
    let sum = with_ints(node("ReduceSum", "total", &["x"], &["y"]), "axes", &[0]);
    let pick = node("Gather", "first", &["x", "i"], &["y"]);
    let i = int_tensor("i", 7, &[1], &[0]);
    for (name, m) in [
        (
            "sum",
            model(
                vec![sum],
                vec![x.clone()],
                y(&[D::N(1), D::N(4)]),
                vec![],
                11,
            ),
        ),
        (
            "gather",
            model(
                vec![pick],
                vec![x.clone()],
                y(&[D::N(1), D::N(4)]),
                vec![i],
                13,
            ),
        ),
    ] {
        let p = d.join(format!("{name}.onnx"));
        save(&m, &p);
        let o = onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join(format!("{name}.o")))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert!(o.status.success(), "{name}: {e}");
        for want in [
            "warning",
            "'batch'",
            "cannot be a run-time batch",
            "up to 512",
            "--dim",
        ] {
            assert!(e.contains(want), "{name}: {want:?} not in {e}");
        }
        // Their workspace is a few KB at the bound: the warning does not dwell on it.
        assert!(e.contains("the workspace sized for that;"), "{name}: {e}");
        let h = std::fs::read_to_string(d.join(format!("{name}.h"))).unwrap();
        assert!(h.contains("run_shaped"), "{name}: {h}");
    }
    // Scores of every item against every other, [batch, batch] in the workspace: 1 MB or
    // more at the bound of 512, which the warning names.
    let scores = vec![
        with_ints(node("Transpose", "t", &["x"], &["xt"]), "perm", &[1, 0]),
        node("MatMul", "scores", &["x", "xt"], &["s"]),
        with_int(node("Softmax", "norm", &["s"], &["p"]), "axis", 1),
        with_ints(node("ReduceMax", "top", &["p"], &["y"]), "axes", &[1]),
    ];
    let m = model(
        scores,
        vec![x.clone()],
        y(&[D::S("batch"), D::N(1)]),
        vec![],
        13,
    );
    let p = d.join("scores.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("scores.o"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "scores: {e}");
    let size = e
        .split("the workspace sized for that: ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_default();
    assert!(size.ends_with(" MB"), "scores: no workspace size in {e}");
    let mb: f64 = size.trim_end_matches(" MB").parse().unwrap();
    // The workspace the compile reports, at least the 1 MB of scores at the bound.
    let bytes: f64 = e
        .split("workspace ")
        .last()
        .and_then(|r| r.split(" bytes").next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(bytes >= (1 << 20) as f64, "scores: {e}");
    assert!(
        (mb - bytes / (1 << 20) as f64).abs() < 0.01,
        "scores: {size} in {e}"
    );
    // A shape that hard-codes one item: the batch is fixed at 1 (`driver::pinned`).
    let flat = node("Reshape", "flatten", &["x", "s"], &["y"]);
    let s = int_tensor("s", 7, &[1], &[4]);
    let m = model(vec![flat], vec![x.clone()], y(&[D::N(4)]), vec![s], 13);
    let p = d.join("reshape.onnx");
    save(&m, &p);
    let e = compiles(&p, &d.join("reshape.o"), &[]);
    for want in [
        "warning: dim 'batch' is fixed at 1",
        "at 2: node 'flatten' (Reshape, opset 13)",
        "--dim batch=VALUE",
    ] {
        assert!(e.contains(want), "reshape: {want:?} not in {e}");
    }
    // A shape no batch size fits: the error is the model's, and says which batch size its
    // shapes were taken at.
    let flat = node("Reshape", "thirds", &["x", "s"], &["y"]);
    let s = int_tensor("s", 7, &[2], &[3, -1]);
    let m = model(vec![flat], vec![x], y(&[D::N(3)]), vec![s], 13);
    let e = compile_error(
        &d,
        "no_batch",
        &m,
        &[
            "'thirds' (Reshape, opset 13)",
            "cannot reshape [2, 4]",
            "'batch' (dim 0 of input 'x') as 2",
            "at batch size 1 too",
        ],
    );
    assert!(!e.contains("--dim"), "{e}");
    // Unnamed dims the model needs equal (dim 0 of `x` and dim 1 of `s`, as a VAD exports
    // its input and its state with every dim unknown): each is a dim of its own, so the model
    // fails whatever the batch; the note says what the other dim was taken as, and how to
    // fix both.
    let x = value_info("x", 1, &[D::N(-1), D::N(4)]);
    let state = value_info("s", 1, &[D::N(4), D::N(-1)]);
    let m = model(
        vec![
            with_ints(node("Transpose", "turn", &["s"], &["t"]), "perm", &[1, 0]),
            with_int(node("Concat", "join", &["x", "t"], &["y"]), "axis", 1),
        ],
        vec![x, state],
        y(&[D::N(-1), D::N(8)]),
        vec![],
        13,
    );
    compile_error(
        &d,
        "unnamed",
        &m,
        &[
            "'join' (Concat, opset 13)",
            "'x:0' (dim 0 of input 'x') as 2",
            "'s:1' as ",
            "--shape INPUT=D0,D1,…",
        ],
    );
    // Three symbolic dims that are not leading ones: two may be taken at run time, not
    // three.
    let three = value_info(
        "x",
        1,
        &[D::N(1), D::S("depth"), D::S("height"), D::S("width")],
    );
    let m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![three],
        y(&[D::N(1), D::S("depth"), D::S("height"), D::S("width")]),
        vec![],
        13,
    );
    compile_error(
        &d,
        "three",
        &m,
        &[
            "'depth', 'height', 'width' must be fixed",
            "two dims at run time",
            "--dim",
        ],
    );
    // A run-time dim whose model is not one program for every value: a Slice to a fifth of
    // it (a step of the dim by 5, which the probes do not tell apart, nor do multiples of 8
    // or 32 make it a polynomial).
    let seq = value_info("x", 1, &[D::N(1), D::S("seq")]);
    let half = node("Slice", "half", &["x", "zero", "mid", "one"], &["y"]);
    let mid = node("Div", "mid_of", &["len", "two"], &["mid"]);
    let len = node("Shape", "len_of", &["x"], &["shape"]);
    let pick = node("Gather", "pick_len", &["shape", "one"], &["len"]);
    let m = model(
        vec![len, pick, mid, half],
        vec![seq],
        y(&[D::N(1), D::S("half")]),
        vec![
            int_tensor("zero", 7, &[1], &[0]),
            int_tensor("one", 7, &[1], &[1]),
            int_tensor("two", 7, &[1], &[5]),
        ],
        13,
    );
    compile_error(
        &d,
        "seq",
        &m,
        &[
            "dim 'seq'",
            "not one program for all its values",
            "--dim seq=N",
        ],
    );
    // To an eighth of it: taken in multiples of 8, which the compile warns of.
    let mut eighth = m.clone();
    let graph = eighth.graph.as_mut().unwrap();
    let two = graph
        .initializer
        .iter_mut()
        .find(|t| t.name() == "two")
        .unwrap();
    *two = int_tensor("two", 7, &[1], &[8]);
    let p = d.join("eighth.onnx");
    save(&eighth, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("eighth.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("taken in multiples of 8") && stderr(&o).contains("--dim NAME=N"),
        "{}",
        stderr(&o)
    );
    let header = std::fs::read_to_string(d.join("eighth.h")).unwrap();
    assert!(header.contains("a multiple of 8"), "{header}");
    // A model that fails at every value of the dim: its own error, not the bound's advice.
    let m = model(
        vec![node("MatMul", "proj", &["x", "w"], &["y"])],
        vec![value_info("x", 1, &[D::N(1), D::S("seq"), D::N(8)])],
        y(&[D::N(1), D::S("seq"), D::N(4)]),
        vec![f32_tensor("w", &[8, 4], &[0.5; 8])],
        13,
    );
    let e = compile_error(&d, "bad_weights", &m, &["initializer 'w'"]);
    assert!(!e.contains("taken at run time"), "{e}");
    // A cache and new tokens, both at run time, after a leading batch that mixes its items
    // (a quantization over the whole tensor): a third dim at run time is refused, and the
    // batch's error names the flag that fixes it, not the bounds of the other two.
    let m = model(
        vec![
            with_int(
                node("Concat", "append", &["cache", "x"], &["all"]),
                "axis",
                1,
            ),
            node(
                "DynamicQuantizeLinear",
                "quantize",
                &["all"],
                &["q", "s", "z"],
            ),
            node("DequantizeLinear", "dequantize", &["q", "s", "z"], &["y"]),
        ],
        vec![
            value_info("cache", 1, &[D::S("batch"), D::S("past"), D::N(4)]),
            value_info("x", 1, &[D::S("batch"), D::S("seq"), D::N(4)]),
        ],
        y(&[D::S("batch"), D::S("total"), D::N(4)]),
        vec![],
        17,
    );
    let e = compile_error(
        &d,
        "mixed_batch",
        &m,
        &[
            "'quantize' (DynamicQuantizeLinear, opset 17)",
            "changes with the batch size",
            "--dim batch=N",
        ],
    );
    assert!(!e.contains("smaller bounds"), "{e}");
}

/// Rows a NonZero selects: `onnxc run` returns as many as the data has; an op that counts
/// them, takes their Shape or mixes them with another selection's rows is refused by name.
#[test]
fn data_dependent_rows_run_and_their_misuse_is_refused_by_name() {
    let d = scratch("data_dependent_rows");
    let x = value_info("x", 1, &[D::N(2), D::N(3)]);
    let zero = f32_tensor("zero", &[], &[0.0]);
    let positions = |tail: Vec<onnxc_proto::NodeProto>, out: &str, ty: i32| {
        let mut nodes = vec![
            node("Greater", "gt", &["x", "zero"], &["mask"]),
            node("NonZero", "nz", &["mask"], &["pos"]),
        ];
        nodes.extend(tail);
        model(
            nodes,
            vec![x.clone()],
            vec![value_info(out, ty, &[])],
            vec![zero.clone()],
            17,
        )
    };
    // The positions themselves: [2, count], count from the data.
    let p = d.join("pos.onnx");
    save(&positions(vec![], "pos", 7), &p);
    let input = d.join("x.pb");
    save_tensor(
        &f32_tensor("x", &[2, 3], &[1.0, -1.0, 2.0, 0.0, 0.0, 3.0]),
        &input,
    );
    let out = run_model(&[&p, &input], &d.join("out"));
    assert_eq!(out[0].shape, [2, 3]);
    assert_eq!(out[0].to_i64s(), [0, 0, 1, 0, 2, 2]);
    // `inspect` names such outputs.
    let o = onnxc()
        .arg("inspect")
        .arg(&p)
        .arg("--json")
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(j["data_dependent_outputs"], serde_json::json!(["pos"]));
    // A sum over the rows counts them.
    let m = positions(
        vec![node("ReduceSum", "sum_rows", &["pos"], &["total"])],
        "total",
        7,
    );
    compile_error(
        &d,
        "sum",
        &m,
        &[
            "sum_rows",
            "ReduceSum",
            "rows depend on the data",
            "each row on its own",
        ],
    );
    // Shape would read their bound as their count.
    let m = positions(
        vec![node("Shape", "dims_of", &["pos"], &["dims"])],
        "dims",
        7,
    );
    compile_error(
        &d,
        "shape",
        &m,
        &["dims_of", "Shape", "depends on the data"],
    );
    // Two selections' rows may differ in number.
    let m = positions(
        vec![
            node("Less", "lt", &["x", "zero"], &["neg"]),
            node("NonZero", "nz2", &["neg"], &["pos2"]),
            node("Add", "mix", &["pos", "pos2"], &["both"]),
        ],
        "both",
        7,
    );
    compile_error(
        &d,
        "mix",
        &m,
        &["mix", "Add", "two results whose row counts"],
    );
}
