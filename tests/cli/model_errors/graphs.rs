//! Graphs that are invalid as a whole: impossible sizes, declarations the computed types
//! contradict, dims no size can be.

use super::*;

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
