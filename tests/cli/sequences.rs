//! Sequence and optional graph inputs and outputs: their length (or emptiness) is fixed at
//! compile time (`--sequence`, `--absent`, or the files `onnxc run` is given), each tensor
//! is an ABI input or output of its own, and data files are `SequenceProto`s and
//! `OptionalProto`s.

use super::{fails, onnxc};
use onnxc::driver;
use onnxc::ir::Value;
use onnxc_tests::model::{
    D, f32_tensor, model, node, optional_info, save, save_optional, save_sequence, sequence_info,
    value_info,
};
use onnxc_tests::scratch;

/// ys = SequenceInsert(xs, t) (at the back); total = ConcatFromSequence(ys).
fn insert_model(dir: &std::path::Path) -> std::path::PathBuf {
    let mut cat = node("ConcatFromSequence", "cat", &["ys"], &["total"]);
    cat = onnxc_tests::model::with_int(cat, "axis", 0);
    let m = model(
        vec![node("SequenceInsert", "insert", &["xs", "t"], &["ys"]), cat],
        vec![
            sequence_info("xs", 1, &[D::S("n")]),
            value_info("t", 1, &[D::N(2)]),
        ],
        vec![
            sequence_info("ys", 1, &[D::S("n")]),
            value_info("total", 1, &[D::S("m")]),
        ],
        vec![],
        17,
    );
    let p = dir.join("insert.onnx");
    save(&m, &p);
    p
}

fn read(path: &std::path::Path, optional: bool, sequence: bool) -> Value {
    driver::read_value(path, optional, sequence).expect("read an output file")
}

fn floats(v: &Value) -> Vec<Vec<f32>> {
    let items = match v.content() {
        Some(Value::Sequence { items, .. }) => items.clone(),
        Some(Value::Tensor(t)) => vec![t.clone()],
        other => panic!("not a tensor or sequence: {other:?}"),
    };
    items
        .iter()
        .map(|t| {
            t.data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect()
        })
        .collect()
}

#[test]
fn a_sequence_input_and_output_run_from_sequence_files() {
    let d = scratch("seq_run");
    let m = insert_model(&d);
    let xs = d.join("xs.pb");
    save_sequence(
        "xs",
        vec![
            f32_tensor("", &[3], &[1.0, 2.0, 3.0]),
            f32_tensor("", &[1], &[4.0]),
        ],
        &xs,
    );
    let t = d.join("t.pb");
    onnxc_tests::model::save_tensor(&f32_tensor("t", &[2], &[5.0, 6.0]), &t);
    let out = d.join("out");
    let o = onnxc()
        .arg("run")
        .arg(&m)
        .arg(&xs)
        .arg(&t)
        .arg("--output-dir")
        .arg(&out)
        .output()
        .expect("spawn onnxc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ys = read(&out.join("output_0.pb"), false, true);
    assert_eq!(
        floats(&ys),
        vec![vec![1.0, 2.0, 3.0], vec![4.0], vec![5.0, 6.0]]
    );
    let total = read(&out.join("output_1.pb"), false, false);
    assert_eq!(floats(&total), vec![vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]);

    // A sequence of another length than the one compiled is refused by name.
    let c = driver::compile_file(
        &m,
        "insert",
        &driver::Options {
            sequences: vec![("xs".into(), vec![vec![3]])],
            ..Default::default()
        },
        None,
    )
    .expect("compiles with --sequence");
    let e = driver::bind_inputs(
        &c.program,
        &[
            driver::InputArg::Positional(xs.clone()),
            driver::InputArg::Positional(t.clone()),
        ],
    )
    .expect_err("two tensors where one was compiled")
    .to_string();
    assert!(
        e.contains("is a sequence of 2 tensors but the model was compiled for 1"),
        "{e}"
    );
    // Each tensor is an ABI input and output of its own, named by its position.
    let names: Vec<&str> = c.program.inputs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["xs[0]", "t"]);
    let names: Vec<&str> = c.program.outputs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ys[0]", "ys[1]", "total"]);
    assert!(
        c.header
            .contains("The model's output \"ys\": a sequence of 2 float32 tensors"),
        "{}",
        c.header
    );
}

#[test]
fn sequence_inputs_need_their_tensors_at_compile_time() {
    let d = scratch("seq_flags");
    let m = insert_model(&d);
    let o = d.join("m.o");
    // `onnxc MODEL -o m.o ARGS…`, which must fail: its message.
    let error = |args: &[&str]| fails(onnxc().arg(&m).arg("-o").arg(&o).args(args));
    let e = error(&[]);
    assert!(
        e.contains("graph input 'xs' is a sequence") && e.contains("--sequence xs=[D0,D1,…]"),
        "{e}"
    );
    let e = error(&["--sequence", "xs=[2"]);
    assert!(e.contains("expected NAME=[D0,D1,…][D0,…]…"), "{e}");
    let e = error(&["--sequence", "xs=[2]", "--sequence", "t=[2]"]);
    assert!(
        e.contains("--sequence t: the model has no sequence input"),
        "{e}"
    );
    let e = error(&["--sequence", "xs=[2,2]"]);
    assert!(e.contains("tensor 0 has rank 2"), "{e}");
    let many = format!("xs={}", "[1]".repeat(4097));
    let e = error(&["--sequence", &many]);
    assert!(
        e.contains("has 4097 tensors; onnxc takes at most 4096"),
        "{e}"
    );
    let e = error(&["--sequence", "xs=[2]", "--absent", "t"]);
    assert!(
        e.contains("--absent t: the model has no optional input"),
        "{e}"
    );
    // An empty sequence compiles: its ConcatFromSequence holds only t.
    let st = onnxc()
        .arg(&m)
        .arg("-o")
        .arg(&o)
        .args(["--sequence", "xs="])
        .status()
        .expect("spawn onnxc");
    assert!(st.success());
}

#[test]
fn an_optional_input_is_compiled_holding_its_tensor_or_empty() {
    let d = scratch("opt_run");
    let m = model(
        vec![node("OptionalHasElement", "has", &["x"], &["y"])],
        vec![optional_info(value_info("x", 1, &[D::N(2)]))],
        vec![value_info("y", 9, &[])],
        vec![],
        18,
    );
    let p = d.join("has.onnx");
    save(&m, &p);
    for (t, expect) in [(Some(f32_tensor("", &[2], &[1.0, 2.0])), 1u8), (None, 0)] {
        let x = d.join("x.pb");
        save_optional("x", t, &x);
        let out = d.join("out");
        let o = onnxc()
            .arg("run")
            .arg(&p)
            .arg(&x)
            .arg("--output-dir")
            .arg(&out)
            .output()
            .expect("spawn onnxc");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        match read(&out.join("output_0.pb"), false, false) {
            Value::Tensor(y) => assert_eq!(*y.data, vec![expect]),
            other => panic!("{other:?}"),
        }
    }
    // Compiled empty, the model has no ABI input, and the header says why.
    let c = driver::compile_file(
        &p,
        "has",
        &driver::Options {
            absent: vec!["x".into()],
            ..Default::default()
        },
        None,
    )
    .expect("compiles with --absent");
    assert!(c.program.inputs.is_empty());
    assert!(
        c.header
            .contains("The model's input \"x\" (an optional): compiled as empty"),
        "{}",
        c.header
    );
}

#[test]
fn an_empty_optional_node_is_an_omitted_value() {
    let d = scratch("opt_empty");
    let m = model(
        vec![
            node("Optional", "none", &[], &["e"]),
            node("Identity", "pass", &["e"], &["o"]),
            node("OptionalHasElement", "has", &["e"], &["h"]),
        ],
        vec![],
        vec![
            optional_info(value_info("o", 1, &[D::N(2)])),
            value_info("h", 9, &[]),
        ],
        vec![],
        18,
    );
    let p = d.join("empty.onnx");
    save(&m, &p);
    let c = driver::compile_file(&p, "empty", &driver::Options::default(), None)
        .expect("an empty optional compiles");
    // The empty optional has no ABI output; OptionalHasElement is a constant false.
    assert_eq!(c.program.public_outputs().len(), 1);
    assert!(
        c.header
            .contains("The model's output \"o\" (an optional): compiled as empty"),
        "{}",
        c.header
    );
    let out = d.join("out");
    let o = onnxc()
        .arg("run")
        .arg(&p)
        .arg("--output-dir")
        .arg(&out)
        .output()
        .expect("spawn onnxc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        read(&out.join("output_0.pb"), true, false),
        Value::Optional(None)
    );
    match read(&out.join("output_1.pb"), false, false) {
        Value::Tensor(h) => assert_eq!(*h.data, vec![0u8]),
        other => panic!("{other:?}"),
    }
}
