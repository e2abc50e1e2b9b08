//! The commands and their flags: help, compile (object, headers, `--name`, `--emit`),
//! `run`, `bench --json`, `inspect`, files that are not models, external data, symbolic dims
//! that need `--shape`/`--dim`, and warnings.

use super::{batch_sum, fails, onnxc, small_model, stderr};
use onnxc_tests::model::{
    D, f32_tensor, importing, map_sequence_info, model, node, save, save_tensor, value_info,
    with_int, with_ints,
};
use onnxc_tests::{run_model, scratch};

#[test]
fn help_for_every_subcommand() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["bench", "--help"],
        vec!["inspect", "--help"],
    ] {
        let o = onnxc().args(&args).output().unwrap();
        assert!(o.status.success(), "{args:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("Usage"), "{args:?}: {out}");
    }
}

#[test]
fn compile_writes_object_and_headers() {
    let d = scratch("compile");
    let m = small_model(&d);
    let o = onnxc()
        .arg(&m)
        .arg("-o")
        .arg(d.join("net.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("net.h")).unwrap();
    assert!(
        h.contains(
            "int net_run(const void *const *inputs, void *const *outputs, void *workspace);"
        ),
        "{h}"
    );
    assert!(h.contains("size_t net_workspace_size(void);"));
    assert!(h.contains("const onnxc_model_info *net_info(void);"));
    assert!(h.contains("input 0: \"x\", float32 [1, 4]"), "{h}");
    assert!(h.contains("output 0: \"y\", float32 [1, 4]"), "{h}");
    assert!(d.join("onnxc_runtime.h").is_file());
    assert!(std::fs::metadata(d.join("net.o")).unwrap().len() > 0);
    // --name overrides the prefix.
    let o = onnxc()
        .arg(&m)
        .arg("-o")
        .arg(d.join("other.o"))
        .args(["--name", "custom"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        std::fs::read_to_string(d.join("other.h"))
            .unwrap()
            .contains("custom_run(")
    );
}

/// `-O0` and `-O2` as the README and compilers spell them, beside `--O0`/`--O2`, for
/// compile and `run`; `-O0` really disables fusion.
#[test]
fn optimization_levels_as_compilers_spell_them() {
    let d = scratch("opt_levels");
    let m = small_model(&d);
    let schedule = |flag: &str| {
        let o = onnxc()
            .arg(&m)
            .args([flag, "--emit", "schedule"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert_eq!(schedule("-O0"), schedule("--O0"));
    assert_eq!(schedule("-O2"), schedule("--O2"));
    assert_ne!(schedule("-O0"), schedule("-O2"));
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 4], &[1.0, 1.0, -5.0, 4.0]), &x);
    let y = &run_model(
        &[m.as_os_str(), x.as_os_str(), "-O0".as_ref()],
        &d.join("out"),
    )[0];
    assert_eq!(y.to_f64s(), vec![1.5, 0.0, 0.0, 1.0]);
}

#[test]
fn emit_every_stage() {
    let d = scratch("emit");
    let m = small_model(&d);
    for (stage, marker) in [
        ("graph", "graph \""),
        ("schedule", "schedule \""),
        ("loops", "program \""),
        ("clif", "function "),
    ] {
        let o = onnxc()
            .arg(&m)
            .args(["-o", "/dev/null", "--emit", stage])
            .output()
            .unwrap();
        assert!(o.status.success(), "{stage}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(marker), "{stage}: {out}");
        // --emit prints: no -o needed, the same dump.
        let o2 = onnxc().arg(&m).args(["--emit", stage]).output().unwrap();
        assert!(o2.status.success(), "{stage}: {}", stderr(&o2));
        if stage != "clif" {
            assert_eq!(o.stdout, o2.stdout, "{stage}");
        }
    }
    // Without --emit, -o is required.
    let e = stderr(&onnxc().arg(&m).output().unwrap());
    assert!(e.contains("--output"), "{e}");
    // A reader that closes the pipe first (`onnxc --emit loops | head`) ends the command
    // quietly; printing to the closed stdout panicked.
    for stage in ["loops", "clif"] {
        let mut child = onnxc()
            .arg(&m)
            .args(["--emit", stage])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{stage}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{stage}: {}", stderr(&o));
    }
}

#[test]
fn run_writes_outputs_as_tensor_protos() {
    let d = scratch("run");
    let m = small_model(&d);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 4], &[1.0, 1.0, -5.0, 4.0]), &x);
    let out = d.join("out");
    let y = &run_model(&[&m, &x], &out)[0];
    let vals: Vec<f64> = y.to_f64s();
    assert_eq!(vals, vec![1.5, 0.0, 0.0, 1.0]);
    // NAME=FILE binding works too.
    run_model(
        &[m.as_os_str(), format!("x={}", x.display()).as_ref()],
        &out,
    );
}

/// A ZipMap output leaves `run` as ONNX test data holds it: a SequenceProto of maps from
/// the class labels to each row's values (the ABI returns the tensor of their values).
#[test]
fn run_writes_zipmap_outputs_as_sequences_of_maps() {
    use prost::Message;
    let d = scratch("run_zipmap");
    let m = importing(
        model(
            vec![onnxc_proto::NodeProto {
                domain: Some("ai.onnx.ml".into()),
                ..with_ints(
                    node("ZipMap", "zip", &["x"], &["z"]),
                    "classlabels_int64s",
                    &[3, 7],
                )
            }],
            vec![value_info("x", 1, &[D::N(2), D::N(2)])],
            vec![map_sequence_info("z", 7)],
            vec![],
            17,
        ),
        "ai.onnx.ml",
        1,
    );
    let p = d.join("zipmap.onnx");
    save(&m, &p);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[2, 2], &[0.25, 0.75, 1.0, 0.0]), &x);
    let out = d.join("out");
    let o = onnxc()
        .arg("run")
        .args([&p, &x])
        .arg("--output-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(out.join("output_0.pb")).unwrap();
    let s = onnxc_proto::SequenceProto::decode(&bytes[..]).unwrap();
    assert_eq!(s.name.as_deref(), Some("z"));
    assert_eq!(s.elem_type, Some(4), "a sequence of maps");
    let rows: Vec<(Vec<i64>, Vec<f32>)> = s
        .map_values
        .iter()
        .map(|m| {
            assert_eq!(m.key_type, Some(7));
            let vals = m.values.as_ref().unwrap().tensor_values.iter();
            let vals = vals.map(|t| {
                assert!(t.dims.is_empty(), "scalar values");
                f32::from_le_bytes(t.raw_data.as_ref().unwrap()[..4].try_into().unwrap())
            });
            (m.keys.clone(), vals.collect())
        })
        .collect();
    assert_eq!(
        rows,
        vec![(vec![3, 7], vec![0.25, 0.75]), (vec![3, 7], vec![1.0, 0.0])]
    );
}

#[test]
fn bench_json_has_the_documented_fields() {
    let d = scratch("bench");
    let m = small_model(&d);
    let o = onnxc()
        .arg("bench")
        .arg(&m)
        .args(["--iterations", "5", "--warmup", "1", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().unwrap();
    for k in ["median_ms", "min_ms", "p90_ms", "compile_ms", "peak_rss_kb"] {
        assert!(last.contains(&format!("\"{k}\"")), "{k} missing in {last}");
    }
}

#[test]
fn truncated_and_non_onnx_files_are_rejected() {
    let d = scratch("malformed");
    let good = std::fs::read(small_model(&d)).unwrap();
    let t = d.join("truncated.onnx");
    std::fs::write(&t, &good[..good.len() / 2]).unwrap();
    let e = fails(onnxc().arg(&t).arg("-o").arg(d.join("t.o")));
    assert!(e.contains("not a valid ONNX model"), "{e}");
    let j = d.join("junk.onnx");
    std::fs::write(&j, b"this is a text file, not protobuf\n").unwrap();
    let e = fails(onnxc().arg(&j).arg("-o").arg(d.join("j.o")));
    assert!(e.contains("not a valid ONNX model"), "{e}");
    let e = fails(
        onnxc()
            .arg(d.join("does-not-exist.onnx"))
            .arg("-o")
            .arg(d.join("x.o")),
    );
    assert!(e.contains("does-not-exist.onnx"), "{e}");
}

#[test]
fn external_data_is_loaded_and_a_missing_file_is_reported() {
    let d = scratch("external");
    let mut b = f32_tensor("b", &[4], &[0.0; 4]);
    b.raw_data = None;
    b.data_location = Some(1);
    b.external_data = vec![
        onnxc_proto::StringStringEntryProto {
            key: Some("location".into()),
            value: Some("weights.bin".into()),
        },
        onnxc_proto::StringStringEntryProto {
            key: Some("offset".into()),
            value: Some("4".into()),
        },
        onnxc_proto::StringStringEntryProto {
            key: Some("length".into()),
            value: Some("16".into()),
        },
    ];
    let m = model(
        vec![node("Add", "add", &["x", "b"], &["y"])],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![b],
        17,
    );
    let p = d.join("ext.onnx");
    save(&m, &p);
    let e = fails(onnxc().arg(&p).arg("-o").arg(d.join("e.o")));
    assert!(e.contains("weights.bin"), "{e}");
    let mut w: Vec<u8> = vec![0xff; 4];
    for v in [1.0f32, 2.0, 3.0, 4.0] {
        w.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(d.join("weights.bin"), w).unwrap();
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[4], &[10.0, 20.0, 30.0, 40.0]), &x);
    let y = &run_model(&[&p, &x], &d.join("out"))[0];
    assert_eq!(y.to_f64s(), vec![11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn symbolic_dims_need_shape_and_the_error_says_so() {
    let d = scratch("symbolic");
    // Summing each row: the batch is a run-time dim, no flag needed.
    let p = d.join("rows.onnx");
    save(&batch_sum(1, &[D::S("batch"), D::N(1)]), &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("r.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("r.h")).unwrap();
    assert!(h.contains("float32 [n, 3], n the run-time batch"), "{h}");
    assert!(h.contains("int r_run_shaped("), "{h}");
    // Summing over the batch: no run-time batch, the dim is taken at run time up to the
    // default bound, with a warning naming the flags that bound or fix it.
    let m = batch_sum(0, &[D::N(1), D::N(3)]);
    let p = d.join("sym.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("s.o"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("warning") && e.contains("--dim SYMBOL=..N"),
        "{e}"
    );
    let h = std::fs::read_to_string(d.join("s.h")).unwrap();
    assert!(h.contains("int s_run_shaped("), "{h}");
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("s.o"))
        .args(["--shape", "x=2,3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        std::fs::read_to_string(d.join("s.h"))
            .unwrap()
            .contains("float32 [1, 3]")
    );
    // A bad --shape is a usage error.
    let e = fails(
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("s.o"))
            .args(["--shape", "x=2,4"]),
    );
    assert!(e.contains("dim 1 is fixed to 3"), "{e}");
    let e = fails(
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("s.o"))
            .args(["--shape", "nope=1"]),
    );
    assert!(e.contains("no runtime input of that name"), "{e}");
    // --dim binds a symbol by name, in every input that uses it.
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("s.o"))
        .args(["--dim", "batch=5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        std::fs::read_to_string(d.join("s.h"))
            .unwrap()
            .contains("\"x\", float32 [5, 3]")
    );
    let e = fails(
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("s.o"))
            .args(["--dim", "nope=1"]),
    );
    assert!(
        e.contains("no graph input has a symbolic dim of that name (symbols: batch)"),
        "{e}"
    );
    // A misspelt --dim is the command line's fault, not the run-time batch's.
    assert!(!e.contains("run-time batch"), "{e}");
    // A --shape binds its input's dims whatever their names: one that contradicts a --dim
    // is a warning, and the input takes the --shape.
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("s.o"))
        .args(["--dim", "batch=5", "--shape", "x=2,3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--shape x: dim 0 is 2, but symbol 'batch' is 5"),
        "{}",
        stderr(&o)
    );
    let e = fails(
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("s.o"))
            .args(["--dim", "batch=-1"]),
    );
    assert!(e.contains("non-negative"), "{e}");
    // run and bench take the symbolic dims from the input files (no --shape).
    let x = d.join("x.pb");
    save_tensor(
        &f32_tensor(
            "x",
            &[4, 3],
            &[1., 2., 3., 4., 5., 6., 7., 8., 9., 1., 1., 1.],
        ),
        &x,
    );
    let y = &run_model(&[&p, &x], &d.join("out"))[0];
    assert_eq!(y.shape, vec![1, 3]);
    assert_eq!(y.to_f64s(), vec![13.0, 16.0, 19.0]);
    let o = onnxc()
        .arg("bench")
        .arg(&p)
        .arg(&x)
        .args(["--iterations", "2", "--warmup", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // A --dim the file disagrees with is the error it was.
    let mut cmd = onnxc();
    cmd.arg("run")
        .arg(&p)
        .arg(&x)
        .args(["--dim", "batch=5", "--output-dir"])
        .arg(d.join("out"));
    let e = fails(&mut cmd);
    assert!(e.contains("has 4 in dim 0, but --dim batch=5"), "{e}");
}

/// Unnamed dims (`?` as PaddlePaddle writes them, an empty name, -1, no value) are each an
/// unknown of their own: a --shape binds them to different values, and the error for an
/// unbound one names its input and axis.
#[test]
fn unnamed_dims_are_unknowns_of_their_own() {
    use onnxc_proto::tensor_shape_proto::{Dimension, dimension::Value};
    let d = scratch("unnamed_dims");
    let mut m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(3), D::S("?"), D::S("?")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(3), D::S("?"), D::S("?")],
        )],
        vec![],
        13,
    );
    // The batch as -1, as PaddlePaddle declares it.
    let x = &mut m.graph.as_mut().unwrap().input[0];
    if let Some(onnxc_proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape.as_mut().unwrap().dim[0] = Dimension {
            value: Some(Value::DimValue(-1)),
            ..Default::default()
        };
    }
    let p = d.join("paddle.onnx");
    save(&m, &p);
    // Each `?` an unknown of its own: both are taken at run time, with no flag.
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("p.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("p.h")).unwrap();
    assert!(
        h.contains("Dims taken at run time: x:2 (1 to 512), x:3 (1 to 512)"),
        "{h}"
    );
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("p.o"))
        .args(["--shape", "x=1,3,48,192"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("p.h")).unwrap();
    assert!(h.contains("float32 [1, 3, 48, 192]"), "{h}");
}

/// A graph output declared with another shape than its operators compute compiles (as
/// onnxruntime runs it) with a warning naming the output and the node; the header gives the
/// computed shape.
#[test]
fn a_wrongly_declared_output_shape_is_a_warning() {
    let d = scratch("declared");
    let m = model(
        vec![node("Relu", "act", &["x"], &["y"])],
        vec![value_info("x", 1, &[D::N(1), D::N(4)])],
        vec![value_info("y", 1, &[D::N(1), D::N(5)])],
        vec![],
        13,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("m.o"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("onnxc: warning: graph output 'y' is declared [1, 5] but computes [1, 4]")
            && e.contains("'act'"),
        "{e}"
    );
    assert!(
        std::fs::read_to_string(d.join("m.h"))
            .unwrap()
            .contains("float32 [1, 4]")
    );
}

#[test]
fn inspect_describes_a_model_without_compiling_it() {
    let d = scratch("inspect");
    // y = Relu(Conv(x, w)) over x [batch, 3, 8, 8], w [4, 3, 3, 3]: 4·6·6 outputs per image,
    // 27 products each.
    let m = model(
        vec![
            node("Conv", "conv", &["x", "w"], &["c"]),
            node("Relu", "relu", &["c"], &["y"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::S("batch"), D::N(3), D::N(8), D::N(8)],
        )],
        vec![value_info(
            "y",
            1,
            &[D::S("batch"), D::N(4), D::N(6), D::N(6)],
        )],
        vec![f32_tensor("w", &[4, 3, 3, 3], &[0.5; 108])],
        17,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let text = |args: &[&str]| {
        let o = onnxc().arg("inspect").arg(&p).args(args).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = text(&[]);
    for want in [
        "opsets:         ai.onnx 17",
        "inputs:         x  float32[batch, 3, 8, 8]",
        "outputs:        y  float32[batch, 4, 6, 6]",
        "symbols:        batch (the leading ones a run-time batch",
        "nodes:          2 (Conv 1, Relu 1)",
        "parameters:     108 in 1 initializers",
        "multiply-adds:  3888 (0.000 G, in matrix products and convolutions, per item)",
        "imports:        yes, its symbolic leading input dims as a run-time batch",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    let out = text(&["--dim", "batch=2"]);
    for want in ["multiply-adds:  7776 ", "imports:        yes"] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    // --json: one object with every field, of the documented types.
    let j: serde_json::Value = serde_json::from_str(&text(&["--json"])).expect("valid JSON");
    assert_eq!(j["ir_version"], 8);
    assert_eq!(j["opsets"]["ai.onnx"], 17);
    assert_eq!(
        j["inputs"],
        serde_json::json!([{"name": "x", "type": "float32", "dims": ["batch", 3, 8, 8], "optional": false}])
    );
    assert_eq!(
        j["outputs"][0]["dims"],
        serde_json::json!(["batch", 4, 6, 6])
    );
    assert_eq!(j["symbols"], serde_json::json!(["batch"]));
    assert_eq!(j["nodes"], 2);
    assert_eq!(
        j["ops"],
        serde_json::json!([
            {"domain": "", "op_type": "Conv", "count": 1},
            {"domain": "", "op_type": "Relu", "count": 1}
        ])
    );
    assert_eq!(j["initializers"], 1);
    assert_eq!(j["parameters"], 108);
    assert_eq!(j["parameter_bytes"], 432);
    assert_eq!(j["multiply_adds"], 3888);
    assert_eq!(j["no_builder"], serde_json::json!([]));
    assert_eq!(j["imports"], true);
    assert_eq!(j["run_time_batch"], true);
    assert!(j["import_error"].is_null());
    assert!(j["warnings"].is_array());
    assert!(j["model"].is_string() && j["producer"].is_string());
    let j: serde_json::Value =
        serde_json::from_str(&text(&["--json", "--dim", "batch=2"])).expect("valid JSON");
    assert_eq!(j["multiply_adds"], 7776);
    assert_eq!(j["imports"], true);
    assert_eq!(j["run_time_batch"], false);
    assert!(j["import_error"].is_null());
    // An op type without a builder is named (and nothing is compiled).
    let m = model(
        vec![node("NoSuchOp", "n", &["x"], &["y"])],
        vec![value_info("x", 1, &[D::N(2)])],
        vec![value_info("y", 1, &[D::N(2)])],
        vec![],
        17,
    );
    save(&m, &p);
    let out = text(&[]);
    assert!(out.contains("no builder for: NoSuchOp"), "{out}");
    assert!(out.contains("imports:        no:"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&text(&["--json"])).expect("valid JSON");
    assert_eq!(
        j["no_builder"],
        serde_json::json!([{"domain": "", "op_type": "NoSuchOp"}])
    );
}

/// A 4-bit input and output travel packed (two per byte, the first in the low nibble), a
/// float8 output as one code per byte: the header says so, and `run` reads and writes
/// ONNX tensor files of those types.
#[test]
fn low_precision_inputs_and_outputs() {
    let d = scratch("lowp_io");
    // y = x (int4 [5], packed into 3 bytes); f = Cast<float8e4m3fn>(Cast<float>(x) * 2).
    let two = f32_tensor("two", &[], &[2.0]);
    let nodes = vec![
        node("Identity", "id", &["x"], &["y"]),
        with_int(node("Cast", "tofloat", &["x"], &["xf"]), "to", 1),
        node("Mul", "twice", &["xf", "two"], &["x2"]),
        with_int(node("Cast", "tof8", &["x2"], &["f"]), "to", 17),
    ];
    let m = model(
        nodes,
        vec![value_info("x", 22, &[D::N(5)])],
        vec![
            value_info("y", 22, &[D::N(5)]),
            value_info("f", 17, &[D::N(5)]),
        ],
        vec![two],
        21,
    );
    let path = d.join("lowp.onnx");
    save(&m, &path);
    let o = onnxc()
        .arg(&path)
        .arg("-o")
        .arg(d.join("lowp.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("lowp.h")).unwrap();
    assert!(
        h.contains("input 0: \"x\", int4 [5] = 5 elements of uint8_t (3 bytes)"),
        "{h}"
    );
    assert!(h.contains("packed: 2 elements per byte"), "{h}");
    assert!(h.contains("one float8e4m3fn code per byte"), "{h}");
    // x = [-8, 7, -1, 3, 5]: packed low nibble first, the last high nibble 0.
    let x = onnxc_proto::TensorProto {
        name: Some("x".into()),
        dims: vec![5],
        data_type: Some(22),
        raw_data: Some(vec![0x78, 0x3F, 0x05]),
        ..Default::default()
    };
    let xp = d.join("x.pb");
    save_tensor(&x, &xp);
    let out = run_model(&[path.as_os_str(), xp.as_os_str()], &d.join("out"));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].dtype.name(), "int4");
    let y: Vec<i64> = (0..5).map(|i| out[0].get(i).as_i64()).collect();
    assert_eq!(y, [-8, 7, -1, 3, 5]);
    let f: Vec<f64> = (0..5).map(|i| out[1].get(i).as_f64()).collect();
    assert_eq!(f, [-16.0, 14.0, -2.0, 6.0, 10.0]);
    // The output file holds the packed bytes, as ONNX stores int4.
    let raw = std::fs::read(d.join("out/output_0.pb")).unwrap();
    let t = <onnxc_proto::TensorProto as prost::Message>::decode(raw.as_slice()).unwrap();
    assert_eq!(t.raw_data.as_deref(), Some(&[0x78u8, 0x3F, 0x05][..]));
}

/// A --shape binds its input's symbols in every input (so no dim stays symbolic), while a
/// --dim for the sequence leaves the batch to run time.
#[test]
fn shapes_and_dims_bind_symbols_before_the_run_time_batch() {
    let d = scratch("batch_binding");
    let m = model(
        vec![node("Add", "add", &["a", "b"], &["y"])],
        vec![
            value_info("a", 1, &[D::S("batch"), D::S("seq")]),
            value_info("b", 1, &[D::S("batch"), D::S("seq")]),
        ],
        vec![value_info("y", 1, &[D::S("batch"), D::S("seq")])],
        vec![],
        17,
    );
    let p = d.join("add.onnx");
    save(&m, &p);
    let header = |args: &[&str]| {
        let o = onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("add.o"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        std::fs::read_to_string(d.join("add.h")).unwrap()
    };
    let h = header(&["--shape", "a=2,5"]);
    assert!(h.contains("\"b\", float32 [2, 5] ="), "{h}");
    let h = header(&["--dim", "seq=5"]);
    assert!(
        h.contains("\"b\", float32 [n, 5], n the run-time batch"),
        "{h}"
    );
    // Neither fixed: the batch and the sequence are both taken at run time (at 1 the
    // map's loop of extent 1 drops out: a program of its own).
    let h = header(&[]);
    assert!(h.contains("Dims taken at run time: seq (1 to 512)"), "{h}");
    assert!(
        h.contains("At seq 1 the model runs a program compiled for that value"),
        "{h}"
    );
    assert!(!h.contains("add_run takes one item"), "{h}");
    assert!(
        h.contains("\"b\", float32 [n, seq], n the run-time batch"),
        "{h}"
    );
}
