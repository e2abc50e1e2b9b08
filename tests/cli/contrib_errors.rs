//! Errors of onnxruntime's contrib ops (domain `com.microsoft` and its NCHWc layout):
//! parameters outside what an op takes and ops onnxc does not build name the node and say
//! what to do; run-time ids outside a table fail the run.

use super::{compile_error, run_fails};
use onnxc_tests::model::{
    D, f32_tensor, importing, int_tensor, model, node, save, save_tensor, value_info, with_int,
    with_ints,
};
use onnxc_tests::{run_model, scratch};

/// onnxruntime's com.microsoft QOperator ops: a per-channel scale where the op takes one
/// value, and a contrib op onnxc does not build, are clear errors naming the node; the
/// unsupported ones are all reported at once with their domain.
#[test]
fn contrib_quantized_ops_report_bad_parameters_and_unsupported_ops() {
    let d = scratch("contrib");
    let ms = |mut n: onnxc_proto::NodeProto| {
        n.domain = Some("com.microsoft".into());
        n
    };
    let with_ms = |m| importing(m, "com.microsoft", 1);
    let xq = value_info("xq", 2, &[D::N(1), D::N(4), D::N(2), D::N(2)]);
    let params = vec![
        f32_tensor("s", &[], &[0.1]),
        f32_tensor("s4", &[4], &[0.1, 0.2, 0.3, 0.4]),
        int_tensor("z", 2, &[], &[3]),
    ];
    let m = with_ms(model(
        vec![ms(node(
            "QLinearSigmoid",
            "sig",
            &["xq", "s4", "z", "s", "z"],
            &["y"],
        ))],
        vec![xq.clone()],
        vec![value_info("y", 2, &[D::N(1), D::N(4), D::N(2), D::N(2)])],
        params.clone(),
        13,
    ));
    compile_error(
        &d,
        "per_channel",
        &m,
        &["'sig'", "QLinearSigmoid", "shape [4]", "per-tensor"],
    );
    let m = with_ms(model(
        vec![
            ms(node("QOrderedGelu", "ordered", &["xq", "s", "s"], &["a"])),
            ms(node("MatMulBnb4", "bnb", &["a", "xq", "s"], &["y"])),
        ],
        vec![xq.clone()],
        vec![value_info("y", 2, &[D::N(1)])],
        params.clone(),
        13,
    ));
    compile_error(
        &d,
        "unsupported",
        &m,
        &[
            "'ordered'",
            "QOrderedGelu",
            "'bnb'",
            "MatMulBnb4",
            "com.microsoft",
        ],
    );
    // Attribute combinations onnxc does not implement name the node, the op, the domain and
    // what to do instead.
    let x = value_info("x", 1, &[D::N(1), D::N(4), D::N(16)]);
    let w = f32_tensor("w", &[16, 48], &[0.01; 16 * 48]);
    let m = with_ms(model(
        vec![with_int(
            with_int(
                ms(node("Attention", "att", &["x", "w"], &["y"])),
                "num_heads",
                4,
            ),
            "do_rotary",
            1,
        )],
        vec![x.clone()],
        vec![value_info("y", 1, &[D::N(1), D::N(4), D::N(16)])],
        vec![w],
        13,
    ));
    compile_error(
        &d,
        "rotary",
        &m,
        &[
            "'att'",
            "Attention",
            "com.microsoft",
            "do_rotary=1",
            "RotaryEmbedding node",
        ],
    );
    let nbits = |bits: i64| {
        let mut n = ms(node("MatMulNBits", "nbits", &["x", "b", "sc"], &["y"]));
        for (k, v) in [("K", 16), ("N", 2), ("bits", bits), ("block_size", 16)] {
            n = with_int(n, k, v);
        }
        n
    };
    let m = with_ms(model(
        vec![nbits(3)],
        vec![x.clone()],
        vec![value_info("y", 1, &[D::N(1), D::N(4), D::N(2)])],
        vec![
            int_tensor("b", 2, &[2, 1, 6], &[0; 12]),
            f32_tensor("sc", &[2, 1], &[1.0, 1.0]),
        ],
        13,
    ));
    compile_error(&d, "nbits", &m, &["'nbits'", "MatMulNBits", "bits=3"]);
    let m = with_ms(model(
        vec![with_int(
            ms(node("MultiHeadAttention", "mha", &["qkv"], &["y"])),
            "num_heads",
            2,
        )],
        vec![value_info(
            "qkv",
            1,
            &[D::N(1), D::N(4), D::N(2), D::N(3), D::N(8)],
        )],
        vec![value_info("y", 1, &[D::N(1), D::N(4), D::N(16)])],
        vec![],
        13,
    ));
    compile_error(
        &d,
        "packed",
        &m,
        &["'mha'", "MultiHeadAttention", "packed QKV"],
    );
}

/// EmbedLayerNormalization gathers embedding rows at the ids its inputs hold: an id outside
/// a table fails the run with ONNXC_ERR_INDEX instead of reading past it.
#[test]
fn embedding_ids_outside_the_tables_fail_the_run() {
    let d = scratch("embed");
    let mut n = node(
        "EmbedLayerNormalization",
        "embed",
        &["ids", "", "word", "pos", "", "g", "b"],
        &["y"],
    );
    n.domain = Some("com.microsoft".into());
    let m = importing(
        model(
            vec![n],
            vec![value_info("ids", 6, &[D::N(1), D::N(2)])],
            vec![value_info("y", 1, &[D::N(1), D::N(2), D::N(2)])],
            vec![
                f32_tensor("word", &[3, 2], &[1.0, 2.0, 3.0, 5.0, 4.0, 8.0]),
                f32_tensor("pos", &[2, 2], &[0.0; 4]),
                f32_tensor("g", &[2], &[1.0, 1.0]),
                f32_tensor("b", &[2], &[0.0, 0.0]),
            ],
            13,
        ),
        "com.microsoft",
        1,
    );
    let p = d.join("embed.onnx");
    save(&m, &p);
    let ids = d.join("ids.pb");
    save_tensor(&int_tensor("ids", 6, &[1, 2], &[2, 0]), &ids);
    // Each row normalized over its two values: (−1, 1).
    let out = run_model(&[p.as_os_str(), ids.as_os_str()], &d.join("ok"));
    let y = out[0].to_f64s();
    assert!(
        y.iter()
            .zip([-1.0, 1.0, -1.0, 1.0])
            .all(|(a, b)| (a - b).abs() < 1e-5),
        "{y:?}"
    );
    for bad in [3, -1] {
        save_tensor(&int_tensor("ids", 6, &[1, 2], &[0, bad]), &ids);
        let e = run_fails(&p, &[&ids], &d.join("bad"));
        assert!(e.contains("index"), "{e}");
    }
}

/// Models onnxruntime saved at ORT_ENABLE_ALL: its NCHWc ops (weights in machine-dependent
/// blocks) are refused, saying how to save the model instead; its channels-last QLinearConv
/// and NhwcMaxPool compile and compute what the NCHW ops compute.
#[test]
fn ort_enable_all_layouts_are_built_or_refused_by_name() {
    let d = scratch("contrib_layouts");
    let mut reorder = with_int(
        node("ReorderOutput", "out_reorder", &["x"], &["y"]),
        "channels",
        3,
    );
    reorder.domain = Some("com.microsoft.nchwc".into());
    let m = importing(
        model(
            vec![reorder],
            vec![value_info("x", 1, &[D::N(1), D::N(8), D::N(2), D::N(2)])],
            vec![value_info("y", 1, &[D::N(1), D::N(3), D::N(2), D::N(2)])],
            vec![],
            13,
        ),
        "com.microsoft.nchwc",
        1,
    );
    compile_error(
        &d,
        "nchwc",
        &m,
        &["'out_reorder'", "NCHWc layout", "ORT_ENABLE_EXTENDED"],
    );
    // NhwcMaxPool of a 1×3×4×2 uint8 NHWC input (2 channels) with a 2×2 window, stride 2.
    let mut pool = with_ints(
        with_ints(
            node("NhwcMaxPool", "pool", &["x"], &["y"]),
            "kernel_shape",
            &[2, 2],
        ),
        "strides",
        &[2, 2],
    );
    pool.domain = Some("com.microsoft".into());
    let m = importing(
        model(
            vec![pool],
            vec![value_info("x", 2, &[D::N(1), D::N(3), D::N(4), D::N(2)])],
            vec![value_info("y", 2, &[D::N(1), D::N(1), D::N(2), D::N(2)])],
            vec![],
            13,
        ),
        "com.microsoft",
        1,
    );
    let p = d.join("nhwc_pool.onnx");
    save(&m, &p);
    let x = d.join("x.pb");
    // x[h, w, c] = 10·h + 3·w + c (h < 3, w < 4, c < 2).
    let vals: Vec<i64> = (0..24)
        .map(|i| 10 * (i / 8) + 3 * (i / 2 % 4) + i % 2)
        .collect();
    save_tensor(&int_tensor("x", 2, &[1, 3, 4, 2], &vals), &x);
    let y = run_model(&[&p, &x], &d.join("out"))[0].to_f64s();
    // Window (0..2, 2j..2j+2): its maximum is at h = 1, w = 2j + 1.
    assert_eq!(y, vec![13.0, 14.0, 19.0, 20.0]);
}

/// A contrib op in a model that does not import `com.microsoft` (invalid ONNX, which tools
/// inserting contrib ops write and onnxruntime runs) compiles at version 1 with a warning
/// saying how to fix the model; an op of an unknown domain that is not imported is refused
/// saying so, with no made-up opset.
#[test]
fn a_contrib_op_without_its_domain_import_compiles_as_onnxruntime_runs_it() {
    let d = scratch("no_import");
    // y = OP(x) over two floats, the node in `domain`, only the default domain imported.
    let unary = |op: &str, name: &str, domain: &str| {
        let mut n = node(op, name, &["x"], &["y"]);
        n.domain = Some(domain.into());
        model(
            vec![n],
            vec![value_info("x", 1, &[D::N(2)])],
            vec![value_info("y", 1, &[D::N(2)])],
            vec![],
            17,
        )
    };
    let m = unary("Gelu", "gelu", "com.microsoft");
    let p = d.join("gelu.onnx");
    save(&m, &p);
    let o = super::onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("gelu.o"))
        .output()
        .unwrap();
    let e = super::stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("warning") && e.contains("'com.microsoft'") && e.contains("opset_import"),
        "{e}"
    );
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[2], &[0.0, 1.0]), &x);
    let y = run_model(&[p.as_os_str(), x.as_os_str()], &d.join("out"))[0].to_f64s();
    // gelu(1) = 0.5 (1 + erf(1/√2)).
    assert!(
        y[0].abs() < 1e-6 && (y[1] - 0.841_344_7).abs() < 1e-5,
        "{y:?}"
    );

    let m = unary("Frobnicate", "frob", "com.example");
    let e = compile_error(
        &d,
        "unknown",
        &m,
        &[
            "'frob'",
            "Frobnicate",
            "domain 'com.example' is not imported",
        ],
    );
    assert!(!e.contains("opset 0") && !e.contains("-0"), "{e}");
}
