//! Model errors: each names the node, its op type and opset and what to do; every
//! unsupported op is reported at once; parameters that are run-time inputs are checked
//! against the declared shape when the model runs.

use super::{compile_error, fails, onnxc, run_fails, stderr};
use onnxc_tests::model::{
    D, f32_tensor, graph, importing, int_tensor, model, node, save, save_tensor, sequence_info,
    value_info, with_graph, with_int, with_ints, with_str,
};
use onnxc_tests::{run_model, scratch};

#[test]
fn unsupported_ops_are_all_reported_at_once() {
    let d = scratch("unsupported");
    let m = model(
        vec![
            node("FancyOp", "first_bad", &["x"], &["a"]),
            node("Relu", "ok", &["a"], &["b"]),
            node("OtherMissingOp", "second_bad", &["b"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(2)])],
        vec![value_info("y", 1, &[D::N(2)])],
        vec![],
        17,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let e = fails(onnxc().arg(&p).arg("-o").arg(d.join("m.o")));
    assert!(
        e.contains("node 'first_bad': FancyOp (domain ai.onnx, opset 17)"),
        "{e}"
    );
    assert!(
        e.contains("node 'second_bad': OtherMissingOp (domain ai.onnx, opset 17)"),
        "{e}"
    );
    assert!(e.contains("2 node(s)"), "{e}");
    // --error-format json: one object on stderr, every node listed.
    let compile_json = || {
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("m.o"))
            .args(["--error-format", "json"])
            .output()
            .unwrap()
    };
    let o = compile_json();
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(j["level"], "error");
    assert_eq!(j["kind"], "unsupported");
    assert!(j["message"].as_str().unwrap().contains("2 node(s)"));
    assert_eq!(
        j["nodes"],
        serde_json::json!([
            {"node": "first_bad", "op_type": "FancyOp", "domain": "", "opset": 17,
             "reason": "no implementation of this op"},
            {"node": "second_bad", "op_type": "OtherMissingOp", "domain": "", "opset": 17,
             "reason": "no implementation of this op"}
        ])
    );
    // A warning is a JSON line too (an output declared with another shape), on success.
    let m = model(
        vec![node("Relu", "act", &["x"], &["y"])],
        vec![value_info("x", 1, &[D::N(1), D::N(4)])],
        vec![value_info("y", 1, &[D::N(1), D::N(5)])],
        vec![],
        13,
    );
    save(&m, &p);
    let o = compile_json();
    assert!(o.status.success(), "{}", stderr(&o));
    let warning = stderr(&o)
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .expect("a JSON warning line");
    assert_eq!(warning["level"], "warning");
    // A command-line error too (found before the flags are known).
    let o = onnxc()
        .args(["--error-format", "json", "--no-such-flag"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let j: serde_json::Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(j["kind"], "usage");
    assert!(
        j["message"].as_str().unwrap().contains("--no-such-flag"),
        "{j}"
    );
    assert!(
        warning["message"].as_str().unwrap().contains("'y'"),
        "{warning}"
    );
}

#[test]
fn bad_attributes_name_the_node() {
    let d = scratch("badattr");
    let m = model(
        vec![with_ints(
            node("Transpose", "tp", &["x"], &["y"]),
            "perm",
            &[0, 0],
        )],
        vec![value_info("x", 1, &[D::N(2), D::N(3)])],
        vec![value_info("y", 1, &[D::N(3), D::N(2)])],
        vec![],
        17,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let e = fails(onnxc().arg(&p).arg("-o").arg(d.join("m.o")));
    assert!(e.contains("node 'tp' (Transpose, opset 17)"), "{e}");
    assert!(e.contains("not a permutation"), "{e}");
    // A node without a name is named by its position in the graph, op type and output.
    let unnamed = |nodes| {
        model(
            nodes,
            vec![value_info("x", 1, &[D::N(2), D::N(3)])],
            vec![value_info("y", 1, &[D::N(3), D::N(2)])],
            vec![],
            17,
        )
    };
    let m = unnamed(vec![
        node("Relu", "", &["x"], &["r"]),
        with_ints(node("Transpose", "", &["r"], &["y"]), "perm", &[0, 0]),
    ]);
    compile_error(
        &d,
        "unnamed-attr",
        &m,
        &["node #1 'Transpose_y' (Transpose, opset 17)"],
    );
    // An Einsum output label given twice (numpy and the reference evaluator refuse it).
    let m = unnamed(vec![with_str(
        node("Einsum", "es", &["x"], &["y"]),
        "equation",
        "ij->jii",
    )]);
    compile_error(
        &d,
        "einsum-dup",
        &m,
        &[
            "node 'es' (Einsum, opset 17)",
            "output label 'i' appears more than once",
        ],
    );
    let m = unnamed(vec![node("Relu", "", &["nowhere"], &["y"])]);
    compile_error(&d, "unnamed-input", &m, &["node #0 'Relu_y' (Relu) reads"]);
    // The list of unsupported nodes names them by position too.
    let m = unnamed(vec![
        node("Relu", "", &["x"], &["r"]),
        node("NoSuchOp", "", &["r"], &["y"]),
    ]);
    compile_error(&d, "unnamed-op", &m, &["node '#1 NoSuchOp_y': NoSuchOp"]);
}

/// Models that are not valid ONNX in ways the checker would catch, or that ask for tensors
/// no process can hold, get an error naming the node (and never a crash or an abort).
#[test]
fn invalid_graphs_and_impossible_sizes_are_errors() {
    let d = scratch("invalid");
    let check = |name: &str, m: &onnxc_proto::ModelProto, wants: &[&str]| {
        compile_error(&d, name, m, wants);
    };
    let f = |name: &str, dims: &[i64]| {
        value_info(name, 1, &dims.iter().map(|&v| D::N(v)).collect::<Vec<_>>())
    };
    // Two nodes assign 'y'.
    check(
        "dup",
        &model(
            vec![
                node("Relu", "first", &["x"], &["y"]),
                node("Neg", "second", &["x"], &["y"]),
            ],
            vec![f("x", &[2])],
            vec![f("y", &[2])],
            vec![],
            17,
        ),
        &[
            "node 'second' (Neg, opset 17) writes 'y', which node 'first' (Relu, opset 17) \
             writes too",
            "assigned once",
        ],
    );
    // A node writes a graph input, or an initializer: the node is named, not its readers.
    let writes = |name: &str, inits| {
        model(
            vec![
                node("Add", "add", &["x", "w"], &["y"]),
                node("Relu", "relu2", &["y"], &[name]),
            ],
            vec![f("x", &[2])],
            vec![f("y", &[2])],
            inits,
            17,
        )
    };
    check(
        "writes_input",
        &writes("x", vec![f32_tensor("w", &[2], &[1.0, 2.0])]),
        &[
            "node 'relu2' (Relu, opset 17) writes 'x', which is a graph input",
            "assigned once",
        ],
    );
    check(
        "writes_init",
        &writes("w", vec![f32_tensor("w", &[2], &[1.0, 2.0])]),
        &["node 'relu2' (Relu, opset 17) writes 'w', which is an initializer"],
    );
    // Likewise inside a subgraph: a Loop body's node writing the body's input.
    let body = graph(
        vec![
            node("Identity", "id", &["c"], &["co"]),
            node("Neg", "neg", &["v"], &["vo"]),
            node("Relu", "clobber", &["v"], &["v"]),
        ],
        vec![
            value_info("i", 7, &[]),
            value_info("c", 9, &[]),
            f("v", &[2]),
        ],
        vec![value_info("co", 9, &[]), f("vo", &[2])],
    );
    check(
        "body_writes_input",
        &model(
            vec![with_graph(
                node("Loop", "loop", &["n", "", "x"], &["y"]),
                "body",
                body,
            )],
            vec![f("x", &[2])],
            vec![f("y", &[2])],
            vec![int_tensor("n", 7, &[], &[2])],
            17,
        ),
        &["node 'clobber' (Relu, opset 17) writes 'v', which is a graph input"],
    );
    // A convolution over an empty spatial dim, padded: every output reads only padding
    // (the runtime's geometry check refused it as an internal error before).
    check(
        "conv_empty",
        &model(
            vec![with_ints(
                node("Conv", "c", &["x", "w"], &["y"]),
                "pads",
                &[1, 1, 1, 1],
            )],
            vec![f("x", &[1, 1, 0, 0])],
            vec![f("y", &[1, 1, 2, 2])],
            vec![f32_tensor("w", &[1, 1, 1, 1], &[1.0])],
            17,
        ),
        &["node 'c' (Conv, opset 17)", "spatial dim 2 is empty"],
    );
    // A graph input listed twice.
    check(
        "dup_input",
        &model(
            vec![node("Relu", "r", &["x"], &["y"])],
            vec![f("x", &[2]), f("x", &[2])],
            vec![f("y", &[2])],
            vec![],
            17,
        ),
        &["graph input 'x' is listed twice", "assigned once"],
    );
    // An initializer listed twice: a warning, and the last one is used (as onnxruntime).
    let m = model(
        vec![node("Add", "add", &["x", "w"], &["y"])],
        vec![f("x", &[2])],
        vec![f("y", &[2])],
        vec![
            f32_tensor("w", &[2], &[5.0, 5.0]),
            f32_tensor("w", &[2], &[1.0, 2.0]),
        ],
        17,
    );
    let p = d.join("dup_init.onnx");
    save(&m, &p);
    let x = d.join("dup_init_x.pb");
    save_tensor(&f32_tensor("x", &[2], &[10.0, 20.0]), &x);
    let o = onnxc()
        .arg("run")
        .args([&p, &x])
        .arg("--output-dir")
        .arg(d.join("dup_init_out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("initializer 'w' is listed more than once"),
        "{}",
        stderr(&o)
    );
    let y = run_model(&[p.as_os_str(), x.as_os_str()], &d.join("dup_init_out"));
    assert_eq!(y[0].to_f64s(), vec![11.0, 22.0]);
    // IR version 8 without opset_import (the IR spec requires one).
    let mut m = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![f("x", &[2])],
        vec![f("y", &[2])],
        vec![],
        17,
    );
    m.opset_import.clear();
    check(
        "no_opset",
        &m,
        &["IR version 8 but no opset_import", "make_opsetid"],
    );
    // Opsets that do not exist.
    for (opset, tag) in [(0, "opset 0"), (99, "opset 99")] {
        check(
            &format!("opset{opset}"),
            &model(
                vec![node("Relu", "r", &["x"], &["y"])],
                vec![f("x", &[2])],
                vec![f("y", &[2])],
                vec![],
                opset,
            ),
            &[tag, "supports opsets 1 to"],
        );
    }
    // A graph input of about 2^62 floats (each axis within the 2^31 - 1 limit), and a
    // Reshape/Expand/ConstantOfShape asked for more than 2^32 elements (the fill would
    // have been folded at compile time).
    check(
        "huge_input",
        &model(
            vec![node("Relu", "r", &["x"], &["y"])],
            vec![f("x", &[(1 << 31) - 1, (1 << 31) - 1])],
            vec![f("y", &[(1 << 31) - 1, (1 << 31) - 1])],
            vec![],
            17,
        ),
        &[
            "graph input 'x'",
            "would have 4611686014132420609 elements, more than the 4294967296 (2^32)",
        ],
    );
    let i64s = |name: &str, v: &[i64]| onnxc_proto::TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(7),
        int64_data: v.to_vec(),
        ..Default::default()
    };
    for (op, node_name) in [("Reshape", "reshape"), ("Expand", "expand")] {
        check(
            node_name,
            &model(
                vec![node(op, node_name, &["x", "s"], &["y"])],
                vec![f("x", &[4])],
                vec![value_info("y", 1, &[D::S("a"), D::S("b")])],
                vec![i64s("s", &[1 << 62, 4])],
                17,
            ),
            &[
                &format!("node '{node_name}' ({op}, opset 17)"),
                "4611686018427387904, longer than the 2147483647 (2^31 - 1) onnxc takes per axis",
            ],
        );
    }
    check(
        "fill",
        &model(
            vec![node("ConstantOfShape", "fill", &["s"], &["y"])],
            vec![],
            vec![value_info("y", 1, &[D::S("a"), D::S("b")])],
            vec![i64s("s", &[1 << 30, 1 << 30])],
            17,
        ),
        &["node 'fill' (ConstantOfShape, opset 17)", "more than the"],
    );
}

/// Resize: bad scales, sizes and attributes are compile errors naming the node; run-time
/// scales need the declared output shape, and values that disagree with it fail the run
/// with the shape error (never a crash or an out-of-bounds read).
#[test]
fn resize_errors_name_the_node_and_runtime_scales_are_checked() {
    use onnxc_proto::{AttributeProto, attribute_proto::AttributeType};
    let d = scratch("resize");
    let s_attr = |name: &str, v: &str| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    };
    let i_attr = |name: &str, v: i64| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    };
    let x = value_info("x", 1, &[D::N(1), D::N(1), D::N(4), D::N(4)]);
    let resize = |attrs: Vec<AttributeProto>, inputs: &[&str]| {
        let mut n = node("Resize", "up", inputs, &["y"]);
        n.attribute = attrs;
        n
    };
    let compile_fails = |name: &str, m: &onnxc_proto::ModelProto, wants: &[&str]| {
        let e = compile_error(&d, name, m, wants);
        assert!(e.contains("'up'") && e.contains("Resize"), "{name}: {e}");
    };
    let y_any = value_info("y", 1, &[D::S("a"), D::S("b"), D::S("c"), D::S("d")]);
    let with_scales = |s: &[f32], attrs: Vec<AttributeProto>| {
        model(
            vec![resize(attrs, &["x", "", "s"])],
            vec![x.clone()],
            vec![y_any.clone()],
            vec![f32_tensor("s", &[s.len() as i64], s)],
            19,
        )
    };
    compile_fails(
        "negative",
        &with_scales(&[1.0, 1.0, -2.0, 2.0], vec![]),
        &["scales must be positive and finite, got -2"],
    );
    compile_fails(
        "huge",
        &with_scales(&[1.0, 1.0, 1e30, 1.0], vec![]),
        &["axis 2 would be", "more than onnxc resizes"],
    );
    compile_fails(
        "short",
        &with_scales(&[2.0, 2.0], vec![]),
        &["scales/sizes have 2 values for 4 axes"],
    );
    compile_fails(
        "mode",
        &with_scales(&[1.0, 1.0, 2.0, 2.0], vec![s_attr("mode", "bicubic")]),
        &["unknown mode 'bicubic'"],
    );
    compile_fails(
        "antialias_nearest",
        &with_scales(&[1.0, 1.0, 0.5, 0.5], vec![i_attr("antialias", 1)]),
        &["antialias applies to linear and cubic"],
    );
    let mut wide = with_scales(
        &[1.0, 1.0, 0.002, 1.0],
        vec![i_attr("antialias", 1), s_attr("mode", "linear")],
    );
    wide.graph.as_mut().unwrap().input =
        vec![value_info("x", 1, &[D::N(1), D::N(1), D::N(1000), D::N(1)])];
    compile_fails("antialias_wide", &wide, &["reads 1000 inputs per output"]);
    compile_fails(
        "crop_without_roi",
        &with_scales(
            &[1.0, 1.0, 2.0, 2.0],
            vec![s_attr(
                "coordinate_transformation_mode",
                "tf_crop_and_resize",
            )],
        ),
        &["needs the roi input"],
    );

    // Run-time scales: the output shape must be declared, and is checked when the model runs.
    let runtime = |y| {
        model(
            vec![resize(vec![s_attr("mode", "linear")], &["x", "", "s"])],
            vec![x.clone(), value_info("s", 1, &[D::N(4)])],
            vec![y],
            vec![],
            19,
        )
    };
    compile_fails(
        "undeclared",
        &runtime(y_any.clone()),
        &["declare the output shape"],
    );
    let p = d.join("runtime.onnx");
    save(
        &runtime(value_info("y", 1, &[D::N(1), D::N(1), D::N(8), D::N(6)])),
        &p,
    );
    let xin = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 1, 4, 4], &[1.0; 16]), &xin);
    let sin = d.join("s.pb");
    save_tensor(&f32_tensor("s", &[4], &[1.0, 1.0, 2.0, 1.5]), &sin);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), sin.as_os_str()],
        &d.join("ok"),
    );
    assert_eq!(out[0].shape, vec![1, 1, 8, 6]);
    assert!(out[0].to_f64s().iter().all(|&v| (v - 1.0).abs() < 1e-6));
    save_tensor(&f32_tensor("s", &[4], &[1.0, 1.0, 3.0, 1.5]), &sin);
    let e = run_fails(&p, &[&xin, &sin], &d.join("bad"));
    assert!(
        e.contains("an input's dims or values imply a shape the model does not allow"),
        "{e}"
    );
}

/// QuantizeLinear/DequantizeLinear: scale shapes that fit no granularity and types onnxc
/// does not store are errors naming the node.
#[test]
fn quantize_errors_name_the_node() {
    let d = scratch("quant");
    let x = value_info("x", 1, &[D::N(2), D::N(3)]);
    let y = value_info("y", 0, &[]);
    let u8_zero = |name: &str, n: i64| onnxc_proto::TensorProto {
        name: Some(name.into()),
        dims: if n == 0 { vec![] } else { vec![n] },
        data_type: Some(2),
        raw_data: Some(vec![0; n.max(1) as usize]),
        ..Default::default()
    };
    let cases = [
        (
            "wrong_axis_len",
            vec![f32_tensor("s", &[2], &[0.1, 0.2])],
            &["s"][..],
            vec!["has shape [2]", "along axis 1 of input [2, 3] needs [3]"],
        ),
        (
            "blocked_shape",
            vec![f32_tensor("s", &[2, 2], &[0.1; 4]), u8_zero("z", 0)],
            &["s", "z"][..],
            vec!["y_scale has shape [2, 2]", "per-axis quantization"],
        ),
    ];
    for (name, inits, params, wants) in cases {
        let mut inputs = vec!["x"];
        inputs.extend_from_slice(params);
        let m = model(
            vec![node("QuantizeLinear", "q", &inputs, &["y"])],
            vec![x.clone()],
            vec![y.clone()],
            inits,
            13,
        );
        let e = compile_error(&d, name, &m, &wants);
        assert!(
            e.contains("'q'") && e.contains("QuantizeLinear"),
            "{name}: {e}"
        );
    }
    // A complex64 zero point: a type onnxc does not store.
    let mut z = u8_zero("z", 0);
    z.data_type = Some(14);
    let m = model(
        vec![node("QuantizeLinear", "q", &["x", "s", "z"], &["y"])],
        vec![x.clone()],
        vec![y.clone()],
        vec![f32_tensor("s", &[], &[0.1]), z],
        19,
    );
    let e = compile_error(&d, "c64", &m, &[]);
    assert!(e.contains("COMPLEX64"), "{e}");
}

/// Operands whose types do not fit together are model errors naming the node and the
/// operand, whichever builder reads them (found by tests/fuzz/mutate_fuzz.py: these reached
/// codegen, which panicked).
#[test]
fn mismatched_operand_types_name_the_operand() {
    let d = scratch("types");
    let f = |name: &str, elem: i32, dims: &[i64]| {
        value_info(
            name,
            elem,
            &dims.iter().map(|&v| D::N(v)).collect::<Vec<_>>(),
        )
    };
    let cases: [(&str, onnxc_proto::ModelProto, &[&str]); 3] = [
        (
            "scatter",
            model(
                vec![node("ScatterND", "s", &["x", "i", "u"], &["y"])],
                vec![f("x", 1, &[4]), f("i", 7, &[1, 1]), f("u", 9, &[1])],
                vec![f("y", 1, &[4])],
                vec![],
                18,
            ),
            &["node 's' (ScatterND, opset 18)", "input 2 ('u') is bool"],
        ),
        (
            "clip",
            model(
                vec![node("Clip", "c", &["x", "lo"], &["y"])],
                vec![f("x", 1, &[4]), f("lo", 10, &[])],
                vec![f("y", 1, &[4])],
                vec![],
                13,
            ),
            &["node 'c' (Clip, opset 13)", "input 1 (min) is float16"],
        ),
        (
            "convtranspose",
            model(
                vec![node("ConvTranspose", "t", &["x", "w"], &["y"])],
                vec![f("x", 1, &[1, 2, 3, 3]), f("w", 6, &[2, 2, 1, 1])],
                vec![f("y", 1, &[1, 2, 3, 3])],
                vec![],
                17,
            ),
            &[
                "node 't' (ConvTranspose, opset 17)",
                "input 1 ('w') is int32",
            ],
        ),
    ];
    for (name, m, wants) in cases {
        let e = compile_error(&d, name, &m, wants);
        assert!(!e.contains("internal compiler error"), "{name}: {e}");
    }
}

/// Loops onnxc cannot unroll are reported as unsupported, naming the node and why; loops too
/// long to unroll (a huge trip count, a condition that stays true, loops nested to multiply)
/// are refused quickly instead of compiling for ever; malformed Scans are model errors.
#[test]
fn loops_that_cannot_be_unrolled_are_reported() {
    let d = scratch("loops");
    let x = value_info("x", 1, &[D::N(4)]);
    let y = value_info("y", 1, &[D::N(4)]);
    let scalar = |name: &str, elem: i32| value_info(name, elem, &[]);
    // Body: y_out = x_in · 0.5 + outer x; the condition passes through.
    let body = |tag: &str| {
        graph(
            vec![
                node("Identity", &format!("{tag}_c"), &["c_in"], &["c_out"]),
                node("Mul", &format!("{tag}_m"), &["v_in", "half"], &["h"]),
                node("Add", &format!("{tag}_a"), &["h", "x"], &["v_out"]),
            ],
            vec![
                scalar("i", 7),
                scalar("c_in", 9),
                value_info("v_in", 1, &[D::N(4)]),
            ],
            vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
        )
    };
    let half = f32_tensor("half", &[], &[0.5]);
    let truth = int_tensor("t", 9, &[], &[1]);
    let loop_model =
        |inputs: &[&str], extra_in: Vec<onnxc_proto::ValueInfoProto>, inits: Vec<_>| {
            let mut ins = vec![x.clone()];
            ins.extend(extra_in);
            model(
                vec![with_graph(
                    node("Loop", "lp", inputs, &["y"]),
                    "body",
                    body("b"),
                )],
                ins,
                vec![y.clone()],
                inits,
                13,
            )
        };
    let t0 = std::time::Instant::now();
    let m = loop_model(
        &["m", "t", "x"],
        vec![scalar("m", 7)],
        vec![half.clone(), truth.clone()],
    );
    compile_error(
        &d,
        "runtime_trip",
        &m,
        &["'lp'", "Loop", "trip count is computed at run time"],
    );
    let m = loop_model(
        &["m", "t", "x"],
        vec![],
        vec![
            half.clone(),
            truth.clone(),
            int_tensor("m", 7, &[], &[1_000_000_000_000]),
        ],
    );
    compile_error(&d, "huge_trip", &m, &["'lp'", "at most 4096 iterations"]);
    let m = loop_model(&["", "t", "x"], vec![], vec![half.clone(), truth.clone()]);
    compile_error(&d, "endless", &m, &["'lp'", "at most 4096 iterations"]);
    let m = loop_model(&["", "", "x"], vec![], vec![half.clone()]);
    compile_error(&d, "no_bound", &m, &["'lp'", "never ends"]);
    // A run-time condition is if-converted up to a constant trip count; without one, or
    // with a body that can fail, it cannot be.
    let m = loop_model(&["", "t", "x"], vec![scalar("t", 9)], vec![half.clone()]);
    compile_error(&d, "runtime_cond_unbounded", &m, &["'lp'", "no trip count"]);
    let m = loop_model(
        &["m", "t", "x"],
        vec![scalar("t", 9)],
        vec![half.clone(), int_tensor("m", 7, &[], &[3])],
    );
    let p = d.join("runtime_cond.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("runtime_cond.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let fallible = graph(
        vec![
            node("Identity", "fc", &["c_in"], &["c_out"]),
            node("Gather", "pick", &["v_in", "idx"], &["v_out"]),
        ],
        vec![
            scalar("i", 7),
            scalar("c_in", 9),
            value_info("v_in", 1, &[D::N(4)]),
        ],
        vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
    );
    let m = model(
        vec![with_graph(
            node("Loop", "lp", &["m", "t", "x"], &["y"]),
            "body",
            fallible,
        )],
        vec![x.clone(), scalar("t", 9), value_info("idx", 7, &[D::N(4)])],
        vec![y.clone()],
        vec![int_tensor("m", 7, &[], &[3])],
        13,
    );
    // Its gather fails the run only in iterations the loop runs.
    let p = d.join("runtime_cond_fallible.onnx");
    save(&m, &p);
    let (xin, tin, iin) = (d.join("lx.pb"), d.join("lt.pb"), d.join("li.pb"));
    save_tensor(&f32_tensor("x", &[4], &[1.0, 2.0, 3.0, 4.0]), &xin);
    save_tensor(&int_tensor("idx", 7, &[4], &[9, 9, 9, 9]), &iin);
    save_tensor(&int_tensor("t", 9, &[], &[0]), &tin);
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            tin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("stopped"),
    );
    assert_eq!(out[0].to_f64s(), [1.0, 2.0, 3.0, 4.0]);
    save_tensor(&int_tensor("t", 9, &[], &[1]), &tin);
    let e = run_fails(&p, &[&xin, &tin, &iin], &d.join("runs"));
    assert!(e.contains("index"), "{e}");
    save_tensor(&int_tensor("idx", 7, &[4], &[1, 0, 3, 2]), &iin);
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            tin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("three"),
    );
    // Three gathers by the permutation [1, 0, 3, 2] (the condition passes through).
    assert_eq!(out[0].to_f64s(), [2.0, 1.0, 4.0, 3.0]);
    // 4000 × 4000 iterations: the outer body's inner loop takes the model past the limit.
    let inner = with_graph(
        node("Loop", "inner", &["n", "", "v_in"], &["v_out"]),
        "body",
        body("i"),
    );
    let outer_body = graph(
        vec![node("Identity", "oc", &["c_in"], &["c_out"]), inner],
        vec![
            scalar("i", 7),
            scalar("c_in", 9),
            value_info("v_in", 1, &[D::N(4)]),
        ],
        vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
    );
    let m = model(
        vec![with_graph(
            node("Loop", "outer", &["n", "", "x"], &["y"]),
            "body",
            outer_body,
        )],
        vec![x.clone()],
        vec![y.clone()],
        vec![half.clone(), int_tensor("n", 7, &[], &[4000])],
        13,
    );
    compile_error(&d, "nested", &m, &["Loop", "past 200000 nodes"]);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(60),
        "refusing the loops took {:?}",
        t0.elapsed()
    );
    // A Scan whose inputs differ in length, and one whose body reads an undefined value.
    let sbody = |reads: &str| {
        graph(
            vec![
                node("Add", "sa", &["s_in", reads], &["s_out"]),
                node("Identity", "si", &["b_t"], &["e"]),
            ],
            vec![
                value_info("s_in", 1, &[D::N(2)]),
                value_info("a_t", 1, &[D::N(2)]),
                value_info("b_t", 1, &[D::N(2)]),
            ],
            vec![
                value_info("s_out", 1, &[D::N(2)]),
                value_info("e", 1, &[D::N(2)]),
            ],
        )
    };
    let scan_model = |b_len: i64, reads: &str| {
        model(
            vec![with_int(
                with_graph(
                    node("Scan", "sc", &["s", "a", "b"], &["s_final", "es"]),
                    "body",
                    sbody(reads),
                ),
                "num_scan_inputs",
                2,
            )],
            vec![
                value_info("s", 1, &[D::N(2)]),
                value_info("a", 1, &[D::N(3), D::N(2)]),
                value_info("b", 1, &[D::N(b_len), D::N(2)]),
            ],
            vec![value_info("s_final", 1, &[D::N(2)])],
            vec![],
            11,
        )
    };
    compile_error(
        &d,
        "scan_lengths",
        &scan_model(5, "a_t"),
        &["'sc'", "same length"],
    );
    compile_error(
        &d,
        "scan_undefined",
        &scan_model(3, "nowhere"),
        &["nowhere"],
    );
}

/// An If on a run-time condition computes both branches and selects: a branch's checked
/// gather fails the run only where the branch is taken; branches that give an output
/// different shapes are refused, naming the node.
#[test]
fn run_time_ifs_that_cannot_be_if_converted_are_reported() {
    let d = scratch("ifs");
    let x = value_info("x", 1, &[D::N(4)]);
    let branch =
        |nodes, out: &str, n: i64| graph(nodes, vec![], vec![value_info(out, 1, &[D::N(n)])]);
    let if_model = |then_g, else_g, inits| {
        model(
            vec![
                node("ReduceSum", "sum", &["x"], &["s"]),
                node("Greater", "gt", &["s", "zero"], &["c"]),
                with_graph(
                    with_graph(node("If", "branchy", &["c"], &["y"]), "then_branch", then_g),
                    "else_branch",
                    else_g,
                ),
            ],
            vec![x.clone(), value_info("idx", 7, &[D::N(4)])],
            vec![value_info("y", 1, &[D::N(4)])],
            inits,
            13,
        )
    };
    let zero = || f32_tensor("zero", &[], &[0.0]);
    // A gather at indices read from an input fails the run (ONNXC_ERR_INDEX) only where
    // its branch is taken.
    let m = if_model(
        branch(vec![node("Gather", "pick", &["x", "idx"], &["t"])], "t", 4),
        branch(vec![node("Neg", "neg", &["x"], &["e"])], "e", 4),
        vec![zero()],
    );
    let p = d.join("fallible.onnx");
    save(&m, &p);
    let (xin, iin) = (d.join("x.pb"), d.join("idx.pb"));
    let feed = |x: &[f32], idx: &[i64]| {
        save_tensor(&f32_tensor("x", &[4], x), &xin);
        save_tensor(&int_tensor("idx", 7, &[4], idx), &iin);
    };
    feed(&[1.0, 2.0, 3.0, 4.0], &[3, 2, 1, -4]);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), iin.as_os_str()],
        &d.join("taken"),
    );
    assert_eq!(out[0].to_f64s(), [4.0, 3.0, 2.0, 1.0]);
    feed(&[-1.0, -2.0, -3.0, -4.0], &[9, 9, 9, 9]);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), iin.as_os_str()],
        &d.join("untaken"),
    );
    assert_eq!(out[0].to_f64s(), [1.0, 2.0, 3.0, 4.0]);
    feed(&[1.0, 2.0, 3.0, 4.0], &[9, 0, 0, 0]);
    let e = run_fails(&p, &[&xin, &iin], &d.join("bad"));
    assert!(e.contains("index"), "{e}");
    // Branch outputs of different shapes.
    let m = if_model(
        branch(vec![node("Neg", "neg", &["x"], &["t"])], "t", 4),
        branch(vec![node("Concat", "cat", &["x", "x"], &["e"])], "e", 8),
        vec![zero()],
    );
    let m = {
        let mut m = m;
        let g = m.graph.as_mut().unwrap();
        let cat = g.node[2].attribute[1].g.as_mut().unwrap();
        cat.node[0] = with_int(cat.node[0].clone(), "axis", 0);
        m
    };
    compile_error(
        &d,
        "shapes",
        &m,
        &["'branchy'", "output 0 is float32 [4]", "[8]"],
    );
}

/// TopK: a k beyond the axis is a model error naming the node; a run-time K without a
/// declared output shape gives the first K rows (K beyond the axis fails the run with
/// ONNXC_ERR_SHAPE), and a K that disagrees with a declared shape fails it too.
#[test]
fn topk_k_is_checked_at_compile_and_run_time() {
    let d = scratch("topk");
    let x = value_info("x", 1, &[D::N(2), D::N(5)]);
    let topk = |k_in: Vec<onnxc_proto::ValueInfoProto>, inits, y: onnxc_proto::ValueInfoProto| {
        let mut inputs = vec![x.clone()];
        inputs.extend(k_in);
        model(
            vec![node("TopK", "best", &["x", "k"], &["y", "i"])],
            inputs,
            vec![y, value_info("i", 7, &[D::S("a"), D::S("b")])],
            inits,
            11,
        )
    };
    let y_any = value_info("y", 1, &[D::S("a"), D::S("b")]);
    let m = topk(vec![], vec![int_tensor("k", 7, &[1], &[6])], y_any.clone());
    compile_error(&d, "too_big", &m, &["'best'", "TopK", "k is 6", "(5)"]);
    let k_in = || vec![value_info("k", 7, &[D::N(1)])];
    // Undeclared: the first K of the sorted rows, K a data-dependent dim in 0..=5.
    let undeclared = d.join("undeclared.onnx");
    save(&topk(k_in(), vec![], y_any), &undeclared);
    let xin = d.join("x.pb");
    save_tensor(
        &f32_tensor(
            "x",
            &[2, 5],
            &[1.0, 5.0, 3.0, 5.0, 2.0, -1.0, -2.0, 0.0, 7.0, 7.0],
        ),
        &xin,
    );
    let kin = d.join("k.pb");
    save_tensor(&int_tensor("k", 7, &[1], &[2]), &kin);
    let out = run_model(
        &[undeclared.as_os_str(), xin.as_os_str(), kin.as_os_str()],
        &d.join("rows"),
    );
    assert_eq!(out[0].shape, [2, 2]);
    assert_eq!(out[0].to_f64s(), [5.0, 5.0, 7.0, 7.0]);
    assert_eq!(out[1].to_f64s(), [1.0, 3.0, 3.0, 4.0]);
    save_tensor(&int_tensor("k", 7, &[1], &[6]), &kin);
    let e = run_fails(&undeclared, &[&xin, &kin], &d.join("too_many"));
    assert!(
        e.contains("an input's dims or values imply a shape the model does not allow"),
        "{e}"
    );
    // Declared [2, 3]: K must be 3 when the model runs.
    let p = d.join("runtime.onnx");
    save(
        &topk(k_in(), vec![], value_info("y", 1, &[D::N(2), D::N(3)])),
        &p,
    );
    save_tensor(&int_tensor("k", 7, &[1], &[3]), &kin);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), kin.as_os_str()],
        &d.join("ok"),
    );
    assert_eq!(out[0].to_f64s(), [5.0, 5.0, 3.0, 7.0, 7.0, 0.0]);
    assert_eq!(out[1].to_f64s(), [1.0, 3.0, 2.0, 3.0, 4.0, 2.0]);
    save_tensor(&int_tensor("k", 7, &[1], &[2]), &kin);
    let e = run_fails(&p, &[&xin, &kin], &d.join("bad"));
    assert!(
        e.contains("an input's dims or values imply a shape the model does not allow"),
        "{e}"
    );
}

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

/// Sequences exist only at compile time: a position computed at run time, a sequence as a
/// graph output and a sequence read by an op that takes tensors are reported clearly.
#[test]
fn sequences_need_constant_positions_and_stay_inside_the_graph() {
    let d = scratch("seq");
    let x = value_info("x", 1, &[D::N(2), D::N(3)]);
    let y = value_info("y", 1, &[D::N(2), D::N(3)]);
    let seq_model = |nodes, inputs, inits| model(nodes, inputs, vec![y.clone()], inits, 13);
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x", "x"], &["s"]),
            node("SequenceAt", "at", &["s", "p"], &["y"]),
        ],
        vec![x.clone(), value_info("p", 7, &[])],
        vec![],
    );
    compile_error(
        &d,
        "runtime_pos",
        &m,
        &["'at'", "SequenceAt", "position is computed at run time"],
    );
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x"], &["s"]),
            node("Relu", "act", &["s"], &["y"]),
        ],
        vec![x.clone()],
        vec![],
    );
    compile_error(
        &d,
        "seq_as_tensor",
        &m,
        &["'act'", "input 's' is a sequence"],
    );
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x"], &["s"]),
            node("SequenceAt", "at", &["s", "p"], &["y"]),
        ],
        vec![x.clone()],
        vec![int_tensor("p", 7, &[], &[3])],
    );
    compile_error(
        &d,
        "out_of_range",
        &m,
        &["'at'", "position 3 is outside a sequence of 1"],
    );
    // A sequence carried through a Loop that stops on a run-time condition: its length
    // would depend on the data (sequences as graph inputs and outputs, and carried through
    // Loops of a known trip count, are tests/cli/sequences.rs's and the backend suite's).
    let body = graph(
        vec![
            node("Identity", "c", &["cond_in"], &["cond_out"]),
            node("Identity", "keep", &["s_in"], &["s_out"]),
        ],
        vec![
            value_info("i", 7, &[]),
            value_info("cond_in", 9, &[]),
            sequence_info("s_in", 1, &[D::N(2)]),
        ],
        vec![
            value_info("cond_out", 9, &[]),
            sequence_info("s_out", 1, &[D::N(2)]),
        ],
    );
    let m = model(
        vec![
            node("SequenceConstruct", "mk", &["x", "x"], &["s"]),
            with_graph(
                node("Loop", "loop", &["n", "go", "s"], &["t"]),
                "body",
                body,
            ),
            node("ConcatFromSequence", "cat", &["t"], &["y"]),
        ],
        vec![x.clone(), value_info("go", 9, &[])],
        vec![value_info("y", 1, &[])],
        vec![int_tensor("n", 7, &[], &[2])],
        13,
    );
    compile_error(
        &d,
        "seq_loop",
        &m,
        &[
            "'loop'",
            "carries a sequence",
            "cannot depend on when the loop stops",
        ],
    );
}

/// A run-time shape operand is checked against the declared shape element by element; one
/// with fewer values than the declared rank would have been read past its end, so it is a
/// model error naming the node.
#[test]
fn a_shape_operand_shorter_than_the_declared_rank_is_an_error() {
    let d = scratch("shortshape");
    let m = model(
        vec![node("ConstantOfShape", "fill", &["s"], &["y"])],
        vec![value_info("s", 7, &[D::N(2)])],
        vec![value_info("y", 1, &[D::N(2), D::N(3), D::N(4)])],
        vec![],
        13,
    );
    compile_error(&d, "short", &m, &["'fill'", "holds 2 values", "needs 3"]);
}

#[test]
fn flex_attention_modifiers_must_keep_type_and_shape() {
    let d = scratch("flex_attention");
    let qkv: Vec<_> = ["q", "k", "v"]
        .iter()
        .map(|n| value_info(n, 1, &[D::N(1), D::N(2), D::N(3), D::N(4)]))
        .collect();
    let y = value_info("y", 1, &[D::N(1), D::N(2), D::N(3), D::N(4)]);
    let flex = |attr: &str, g| {
        let mut n = with_graph(
            node("FlexAttention", "fa", &["q", "k", "v"], &["y"]),
            attr,
            g,
        );
        n.domain = Some("ai.onnx.preview".into());
        importing(
            model(vec![n], qkv.clone(), vec![y.clone()], vec![], 26),
            "ai.onnx.preview",
            1,
        )
    };
    // A score_mod that drops the key axis: the softmax would see another shape.
    let reduce = graph(
        vec![with_int(
            node("ReduceMax", "r", &["s"], &["t"]),
            "keepdims",
            0,
        )],
        vec![value_info("s", 1, &[])],
        vec![value_info("t", 1, &[])],
    );
    compile_error(
        &d,
        "shape",
        &flex("score_mod", reduce),
        &[
            "node 'fa'",
            "score_mod gives",
            "must keep its input's type and shape",
        ],
    );
    // A prob_mod with two inputs.
    let two = graph(
        vec![node("Add", "a", &["p", "p2"], &["o"])],
        vec![value_info("p", 1, &[]), value_info("p2", 1, &[])],
        vec![value_info("o", 1, &[])],
    );
    compile_error(
        &d,
        "arity",
        &flex("prob_mod", two),
        &["prob_mod declares 2 inputs"],
    );
}

/// RegexFullMatch compiles its pattern into an automaton: one whose automaton would be huge
/// is refused quickly with the reason, not after minutes or gigabytes.
#[test]
fn regex_patterns_with_huge_automata_are_refused() {
    let d = scratch("regex");
    for (name, pattern, why) in [
        ("blowup", "(a|b)*a(a|b){24}", "exceeded size limit"),
        ("states", "((a{100}){100}){100}", "more than 65536 states"),
        ("backref", "(a)\\1", "does not compile"),
        // The NFA alone would take 10^10 states (24 GB before the limit).
        ("nfa", "a{100000}{100000}", "NFA compilation exceeded limit"),
    ] {
        let mut n = node("RegexFullMatch", "re", &["x"], &["y"]);
        n.attribute.push(onnxc_proto::AttributeProto {
            name: Some("pattern".into()),
            r#type: Some(3),
            s: Some(pattern.as_bytes().to_vec()),
            ..Default::default()
        });
        let m = model(
            vec![n],
            vec![value_info("x", 8, &[D::N(2)])],
            vec![value_info("y", 9, &[D::N(2)])],
            vec![],
            20,
        );
        compile_error(&d, name, &m, &["node 're'", "RegexFullMatch", why]);
    }
}

/// A symbolic leading input dim compiles as a run-time batch where the model computes each
/// item on its own, and otherwise as a dim taken at run time up to the default bound, with
/// a warning that says so and names the flags that bound or fix it. Where the model is valid
/// at one size only, the error names the dim, the node and the flag that fixes it. Any other
/// symbolic dim beyond two must be fixed.
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
    // A shape that hard-codes one item.
    let flat = node("Reshape", "flatten", &["x", "s"], &["y"]);
    let s = int_tensor("s", 7, &[1], &[4]);
    let m = model(vec![flat], vec![x.clone()], y(&[D::N(4)]), vec![s], 13);
    compile_error(
        &d,
        "reshape",
        &m,
        &["at batch size 2", "'flatten' (Reshape, opset 13)", "--dim"],
    );
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

/// A graph output declared with another element type than the graph computes is refused
/// (as onnxruntime refuses it), with or without a declared shape.
#[test]
fn a_graph_output_declared_with_another_type_is_an_error() {
    let d = scratch("output-type");
    let out = |shape: Option<&[D]>| {
        let mut vi = value_info("y", 7, shape.unwrap_or(&[]));
        if shape.is_none()
            && let Some(onnxc_proto::type_proto::Value::TensorType(tt)) =
                vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            tt.shape = None;
        }
        model(
            vec![node("Add", "add", &["x", "w"], &["y"])],
            vec![value_info("x", 1, &[D::N(2)])],
            vec![vi],
            vec![f32_tensor("w", &[2], &[1.0, 1.0])],
            18,
        )
    };
    for (name, shape) in [("no-shape", None), ("shape", Some(&[D::N(2)][..]))] {
        compile_error(
            &d,
            name,
            &out(shape),
            &[
                "graph output 'y' is declared int64 but computes float32 (from node 'add' \
                 (Add, opset 18))",
                "declare 'y' as float32, or cast it to int64",
            ],
        );
    }
}

/// A dim_value of -1 is an unknown size (exporters write it); any other negative value is
/// an error naming the input, axis and value, unless the options give the dim.
#[test]
fn a_negative_input_dim_other_than_minus_one_is_an_error() {
    let d = scratch("negdim");
    let m = |dim: i64| {
        model(
            vec![node("Add", "add", &["x", "w"], &["y"])],
            vec![value_info("x", 1, &[D::N(dim), D::N(2)])],
            vec![value_info("y", 1, &[D::N(2), D::N(2)])],
            vec![f32_tensor("w", &[2, 2], &[1.0; 4])],
            18,
        )
    };
    let e = compile_error(
        &d,
        "neg3",
        &m(-3),
        &[
            "graph input 'x' declares dim 0 as -3, which is no size",
            "--dim x:0=N or --shape x=D0,D1",
        ],
    );
    assert!(!e.contains("batch size"), "{e}");
    let p = d.join("neg3.onnx");
    for flags in [["--dim", "x:0=2"], ["--shape", "x=2,2"]] {
        let o = onnxc()
            .arg(&p)
            .args(flags)
            .arg("-o")
            .arg(d.join("neg3.o"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{flags:?}: {}", stderr(&o));
    }
    // -1 stays symbolic: the model's own error is about its shapes.
    let e = compile_error(&d, "neg1", &m(-1), &["'x:0' (dim 0 of input 'x')"]);
    assert!(!e.contains("no size"), "{e}");
}

/// Nodes that break their op's schema (a data type code that names no type, more outputs
/// than the op has) are invalid models: a model error naming the node and the value, not
/// an entry in the list of features onnxc lacks.
#[test]
fn nodes_that_break_their_schema_are_model_errors() {
    let d = scratch("schema");
    let cast = |to: i64| {
        model(
            vec![with_int(node("Cast", "c", &["x"], &["y"]), "to", to)],
            vec![value_info("x", 1, &[D::N(2)])],
            vec![value_info("y", 7, &[D::N(2)])],
            vec![],
            18,
        )
    };
    let e = compile_error(
        &d,
        "cast99",
        &cast(99),
        &[
            "node 'c' (Cast, opset 18)",
            "attribute 'to' is 99, which is not an ONNX TensorProto data type",
        ],
    );
    assert!(!e.contains("cannot compile"), "{e}");
    // A code past i32 is not read as its low 32 bits (2^32 + 7 is not INT64).
    compile_error(
        &d,
        "cast-wide",
        &cast((1 << 32) + 7),
        &["attribute 'to' is 4294967303, which is not"],
    );
    compile_error(
        &d,
        "cast0",
        &cast(0),
        &["attribute 'to' is 0, which is not"],
    );
    // A data type onnxc has no tensors of is a missing feature, listed as unsupported.
    compile_error(
        &d,
        "cast-complex",
        &cast(14),
        &["cannot compile", "attribute 'to' is 14 (COMPLEX64)"],
    );
    // Relu has one output; a second is an invalid model.
    let x = || vec![value_info("x", 1, &[D::N(6)])];
    let m = model(
        vec![node("Relu", "r", &["x"], &["y", "z"])],
        x(),
        vec![
            value_info("y", 1, &[D::N(6)]),
            value_info("z", 1, &[D::N(6)]),
        ],
        vec![],
        18,
    );
    let e = compile_error(
        &d,
        "relu2",
        &m,
        &[
            "node 'r' (Relu, opset 18) declares 2 outputs, but Relu has 1 at opset 18",
            "[\"z\"]",
            "remove the extra outputs",
        ],
    );
    assert!(!e.contains("not implemented"), "{e}");
    // Split's outputs must match num_outputs, or the sizes of 'split'.
    let three = || {
        ["y0", "y1", "y2"]
            .iter()
            .map(|n| value_info(n, 1, &[D::N(2)]))
            .collect::<Vec<_>>()
    };
    let m = model(
        vec![with_int(
            node("Split", "s", &["x"], &["y0", "y1", "y2"]),
            "num_outputs",
            2,
        )],
        x(),
        three(),
        vec![],
        18,
    );
    compile_error(
        &d,
        "split-count",
        &m,
        &[
            "node 's' (Split, opset 18)",
            "attribute 'num_outputs' is 2, but the node declares 3 outputs",
        ],
    );
    let m = model(
        vec![node("Split", "s", &["x", "sizes"], &["y0", "y1", "y2"])],
        x(),
        three(),
        vec![int_tensor("sizes", 7, &[2], &[3, 3])],
        18,
    );
    compile_error(
        &d,
        "split-sizes",
        &m,
        &[
            "node 's' (Split, opset 18)",
            "'split' has 2 sizes, but the node declares 3 outputs",
        ],
    );
    // An optional output the schema has and onnxc does not compute (BatchNormalization-9's
    // training statistics) is still a missing feature.
    let m = model(
        vec![node(
            "BatchNormalization",
            "bn",
            &["x", "s", "b", "m", "v"],
            &["y", "rm"],
        )],
        vec![value_info("x", 1, &[D::N(1), D::N(2), D::N(3)])],
        vec![
            value_info("y", 1, &[D::N(1), D::N(2), D::N(3)]),
            value_info("rm", 1, &[D::N(2)]),
        ],
        ["s", "b", "m", "v"]
            .iter()
            .map(|n| f32_tensor(n, &[2], &[1.0, 1.0]))
            .collect(),
        9,
    );
    compile_error(
        &d,
        "bn-stats",
        &m,
        &["cannot compile", "output 1 ('rm') is not implemented"],
    );
}
