//! Nodes whose attributes, operands or schema are wrong: each error names the node, its op
//! type and opset and what to do.

use super::*;

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
