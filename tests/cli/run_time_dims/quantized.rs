//! Quantized layers over a run-time dim: QOperator convolutions and a global pool at any
//! width, a QDQ linear layer and a quantized embedding at any sequence length, and a
//! quantized product whose depth is the dim; each value's outputs are the specialized
//! object's, byte for byte.

use super::*;

/// QOperator convolutions over `[1, 3, 8, w]`: QuantizeLinear, a padded 3×3 QLinearConv
/// of 4 channels (int8 weights, int32 bias), a padded 3×3 depthwise one, DequantizeLinear.
fn model_with_quantized_conv() -> onnxc_proto::ModelProto {
    let w: Vec<i64> = (0..4 * 3 * 9).map(|k| (k * 37 % 255) - 127).collect();
    let dw: Vec<i64> = (0..4 * 9).map(|k| (k * 53 % 201) - 100).collect();
    model(
        vec![
            node("QuantizeLinear", "q", &["x", "xs", "xz"], &["xq"]),
            with_ints(
                node(
                    "QLinearConv",
                    "conv",
                    &["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                    &["yq"],
                ),
                "pads",
                &[1, 1, 1, 1],
            ),
            with_int(
                with_ints(
                    node(
                        "QLinearConv",
                        "depthwise",
                        &["yq", "ys", "yz", "dw", "ws", "wz", "ys", "yz"],
                        &["zq"],
                    ),
                    "pads",
                    &[1, 1, 1, 1],
                ),
                "group",
                4,
            ),
            node("DequantizeLinear", "dq", &["zq", "ys", "yz"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(3), D::N(8), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::N(4), D::N(8), D::S("w")])],
        vec![
            f32_tensor("xs", &[], &[0.02]),
            int_tensor("xz", 2, &[], &[128]),
            int_tensor("w", 3, &[4, 3, 3, 3], &w),
            f32_tensor("ws", &[], &[0.01]),
            int_tensor("wz", 3, &[], &[0]),
            f32_tensor("ys", &[], &[0.05]),
            int_tensor("yz", 2, &[], &[120]),
            int_tensor("b", 6, &[4], &[100, -200, 300, 0]),
            int_tensor("dw", 3, &[4, 1, 3, 3], &dw),
        ],
        13,
    )
}

/// The integer convolution takes its sizes apart from its packed weights
/// (`QConvParams::sizeless`) and the depthwise one as parameters, so a quantized model's
/// width is taken at run time: each width's outputs are the specialized object's, byte
/// for byte.
#[test]
fn a_quantized_convolution_takes_its_width_at_run_time() {
    let d = scratch("run_time_qconv");
    let p = d.join("qconv.onnx");
    save(&model_with_quantized_conv(), &p);
    let c = compile_dynamic(&p, "w", 100);
    assert_eq!(run_dims_of(&c).len(), 1, "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for w in [1usize, 2, 5, 16, 37, 64, 100] {
        let x: Vec<f32> = (0..3 * 8 * w)
            .map(|k| ((k * 13 % 41) as f32 - 20.0) / 9.0)
            .collect();
        let (got, want, input) = at_width(&p, &d, &dynamic, w, &x);
        assert_eq!(got, want, "width {w}");
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{w}t2")), 1, 2);
        assert_eq!(got, two, "width {w}: 2 threads");
    }
}

/// `[1, 4, 3, w]` quantized, averaged by onnxruntime's QLinearGlobalAveragePool (which
/// scales the integer sum by `x_scale / (y_scale · N)`, `N = 3w`), dequantized.
fn model_with_quantized_global_pool() -> onnxc_proto::ModelProto {
    let mut pool = node(
        "QLinearGlobalAveragePool",
        "pool",
        &["xq", "xs", "xz", "ys", "yz"],
        &["pq"],
    );
    pool.domain = Some("com.microsoft".into());
    let m = model(
        vec![
            node("QuantizeLinear", "q", &["x", "xs", "xz"], &["xq"]),
            pool,
            node("DequantizeLinear", "dq", &["pq", "ys", "yz"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(4), D::N(3), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::N(4), D::N(1), D::N(1)])],
        vec![
            f32_tensor("xs", &[], &[0.0173]),
            int_tensor("xz", 2, &[], &[121]),
            f32_tensor("ys", &[], &[0.0061]),
            int_tensor("yz", 2, &[], &[97]),
        ],
        13,
    );
    onnxc_tests::model::importing(m, "com.microsoft", 1)
}

/// The pool's scale folds the count of the width into one constant, no formula of it: the
/// retry keeps the scales loaded (`ImportOptions::keep_scales`), so the count stays a
/// literal of its own, which follows the width. Each width's outputs are the specialized
/// object's (which folds the scale), byte for byte.
#[test]
fn a_quantized_global_pool_scales_by_the_run_time_count() {
    let d = scratch("run_time_qpool");
    let p = d.join("qpool.onnx");
    save(&model_with_quantized_global_pool(), &p);
    let c = compile_dynamic(&p, "w", 300);
    assert_eq!(run_dims_of(&c), [("w", 1, 300)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for w in [1usize, 2, 7, 37, 100, 299, 300] {
        let x: Vec<f32> = (0..4 * 3 * w)
            .map(|k| ((k * 13 % 41) as f32 - 17.0) / 11.0)
            .collect();
        let (got, want, _) = at_width(&p, &d, &dynamic, w, &x);
        assert_eq!(got, want, "width {w}");
    }
}

/// A linear layer as onnxruntime's `quantize_static` writes it (QDQ, per-channel int8
/// weights) over `x: [batch, seq, 16]`: Q → DQ → MatMul(DQ(w)) → Q → DQ → Add(bias) → Q,
/// a uint8 output. Its last requantization, a per-channel function of a byte, is a table.
fn model_with_qdq_linear() -> onnxc_proto::ModelProto {
    let w: Vec<i64> = (0..16 * 16).map(|k| (k * 37 % 255) - 127).collect();
    let ws: Vec<f32> = (0..16).map(|k| 0.002 + 0.0003 * k as f32).collect();
    let bias: Vec<f32> = (0..16).map(|k| (k as f32 - 8.0) / 10.0).collect();
    let dq_axis = |n| with_int(n, "axis", 1);
    model(
        vec![
            node("QuantizeLinear", "q_x", &["x", "sx", "zx"], &["xq"]),
            node("DequantizeLinear", "dq_x", &["xq", "sx", "zx"], &["xd"]),
            dq_axis(node(
                "DequantizeLinear",
                "dq_w",
                &["w", "sw", "zw"],
                &["wd"],
            )),
            node("MatMul", "mm", &["xd", "wd"], &["m"]),
            node("QuantizeLinear", "q_m", &["m", "sm", "zm"], &["mq"]),
            node("DequantizeLinear", "dq_m", &["mq", "sm", "zm"], &["md"]),
            node("Add", "bias", &["md", "b"], &["a"]),
            node("QuantizeLinear", "q_y", &["a", "sy", "zy"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::S("batch"), D::S("seq"), D::N(16)])],
        vec![value_info("y", 2, &[D::S("batch"), D::S("seq"), D::N(16)])],
        vec![
            f32_tensor("sx", &[], &[0.05]),
            int_tensor("zx", 2, &[], &[128]),
            int_tensor("w", 3, &[16, 16], &w),
            f32_tensor("sw", &[16], &ws),
            int_tensor("zw", 3, &[16], &[0; 16]),
            f32_tensor("sm", &[], &[0.04]),
            int_tensor("zm", 2, &[], &[120]),
            f32_tensor("b", &[16], &bias),
            f32_tensor("sy", &[], &[0.05]),
            int_tensor("zy", 2, &[], &[128]),
        ],
        13,
    )
}

/// The table of a per-channel requantization is chosen by the map's size in a static
/// compile; with seq taken at run time, every value lowers it alike (tables computed when
/// the model compiles, whatever the size), so the batch stays a run-time batch, seq runs
/// from 1, and each size gives the specialized object's bytes.
#[test]
fn a_quantized_linear_layer_takes_its_sequence_at_run_time() {
    let d = scratch("run_time_dims_qdq_linear");
    let p = d.join("qdq.onnx");
    save(&model_with_qdq_linear(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for (b, s) in [(1usize, 1usize), (2, 7), (1, 40), (3, 300)] {
        let x: Vec<f32> = (0..b * s * 16)
            .map(|k| ((k * 29 % 97) as f32 - 48.0) / 9.0)
            .collect();
        let input = write_input(&d, b * 1000 + s, &x);
        // The batch is the program's run-time batch (items), seq its run-time dim.
        let got = item_output(&exe, &input, &d.join(format!("dyn{b}x{s}")), b, s);
        let want = specialized(&p, &d, "seq", s, &input, 1);
        assert_eq!(got.len(), b * s * 16);
        assert_eq!(got, want[0], "batch {b}, seq {s}");
    }
}

/// A token and position embedding as onnxruntime's `quantize_static` writes it in QOperator
/// form: ids `[batch, seq]`; the int8 rows of a word table `[100, 16]` and of a position
/// table `[64, 16]` (Gathered at `Range(0, seq)`), summed by a `QLinearAdd`, then
/// dequantized.
fn model_with_quantized_embedding() -> onnxc_proto::ModelProto {
    let words: Vec<i64> = (0..100 * 16).map(|k| (k * 37 % 255) - 127).collect();
    let positions: Vec<i64> = (0..64 * 16).map(|k| (k * 53 % 251) - 125).collect();
    let konst = |name: &str, v: i64| {
        with_tensor(
            node("Constant", name, &[], &[name]),
            "value",
            int_tensor(name, 7, &[], &[v]),
        )
    };
    let add = onnxc_proto::NodeProto {
        domain: Some("com.microsoft".into()),
        ..node(
            "QLinearAdd",
            "sum",
            &["wq", "ws", "wz", "pq", "ps", "pz", "ys", "yz"],
            &["yq"],
        )
    };
    let m = model(
        vec![
            node("Gather", "word_rows", &["words", "ids"], &["wq"]),
            node("Shape", "ids_shape", &["ids"], &["shape"]),
            konst("zero", 0),
            konst("one", 1),
            with_int(
                node("Gather", "seq", &["shape", "one"], &["seq"]),
                "axis",
                0,
            ),
            node("Range", "positions", &["zero", "seq", "one"], &["pos"]),
            node("Gather", "position_rows", &["table", "pos"], &["pq"]),
            add,
            node("DequantizeLinear", "dq", &["yq", "ys", "yz"], &["y"]),
        ],
        vec![value_info("ids", 7, &[D::S("batch"), D::S("seq")])],
        vec![value_info("y", 1, &[D::S("batch"), D::S("seq"), D::N(16)])],
        vec![
            int_tensor("words", 3, &[100, 16], &words),
            int_tensor("table", 3, &[64, 16], &positions),
            f32_tensor("ws", &[], &[0.031]),
            int_tensor("wz", 3, &[], &[0]),
            f32_tensor("ps", &[], &[0.024]),
            int_tensor("pz", 3, &[], &[14]),
            f32_tensor("ys", &[], &[0.041]),
            int_tensor("yz", 3, &[], &[2]),
        ],
        17,
    );
    onnxc_tests::model::importing(m, "com.microsoft", 1)
}

/// The quantized embedding takes its sequence at run time as the float one does. The
/// `QLinearAdd` of the word rows and the folded position rows is a function of a byte,
/// whose table without sizes has a row per position and channel: made below a limit on
/// entries and not above, so the values lowered had constants more or fewer and the model
/// was refused. The retry takes tables over one dim at most (`narrow_tables`).
#[test]
fn a_quantized_embedding_takes_its_sequence_at_run_time() {
    let d = scratch("run_time_dims_quantized_embedding");
    let p = d.join("embedding_q.onnx");
    save(&model_with_quantized_embedding(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 64)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for (b, s) in [(1usize, 1usize), (2, 5), (1, 17), (3, 64)] {
        let ids: Vec<u8> = (0..b * s)
            .flat_map(|k| ((k * 31 % 100) as i64).to_le_bytes())
            .collect();
        let input = d.join(format!("ids{b}x{s}.bin"));
        std::fs::write(&input, ids).unwrap();
        let got = item_output(&exe, &input, &d.join(format!("dyn{b}x{s}")), b, s);
        let want = specialized(&p, &d, "seq", s, &input, 1);
        assert_eq!(got.len(), b * s * 16 * 4);
        assert_eq!(got, want[0], "batch {b}, seq {s}");
    }
}

/// Attention's weighted sum, quantized: `QLinearMatMul` of two run-time operands `[4, seq]`
/// and `[seq, 3]`, whose depth is the run-time dim; zero points at either end of uint8, so
/// that each centered operand spans 255.
fn model_with_quantized_product() -> onnxc_proto::ModelProto {
    let qlinear = node(
        "QLinearMatMul",
        "product",
        &["aq", "as", "az", "bq", "bs", "bz", "ys", "yz"],
        &["yq"],
    );
    model(
        vec![
            node("QuantizeLinear", "qa", &["a", "as", "az"], &["aq"]),
            node("QuantizeLinear", "qb", &["b", "bs", "bz"], &["bq"]),
            qlinear,
            node("DequantizeLinear", "dq", &["yq", "ys", "yz"], &["y"]),
        ],
        vec![
            value_info("a", 1, &[D::N(4), D::S("seq")]),
            value_info("b", 1, &[D::S("seq"), D::N(3)]),
        ],
        vec![value_info("y", 1, &[D::N(4), D::N(3)])],
        vec![
            f32_tensor("as", &[], &[0.02]),
            int_tensor("az", 2, &[], &[0]),
            f32_tensor("bs", &[], &[0.03]),
            int_tensor("bz", 2, &[], &[255]),
            f32_tensor("ys", &[], &[0.9]),
            int_tensor("yz", 2, &[], &[128]),
        ],
        13,
    )
}

/// Its depth decides whether the float32 product of the centered operands is exact in one
/// pass (up to 258 for two uint8 operands) or takes two: below and above that the programs
/// took different steps, and the model was refused with the default bound of 512. The
/// retry (`ImportOptions::split_products`) takes two at every depth; each depth's outputs
/// are the specialized object's, byte for byte.
#[test]
fn a_quantized_product_over_a_run_time_depth_takes_one_plan() {
    let d = scratch("run_time_qproduct");
    let p = d.join("qproduct.onnx");
    save(&model_with_quantized_product(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 512)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for seq in [1usize, 5, 258, 259, 512] {
        let a: Vec<f32> = (0..4 * seq).map(|k| (k * 37 % 101) as f32 / 20.0).collect();
        let b: Vec<f32> = (0..seq * 3)
            .map(|k| -((k * 53 % 89) as f32) / 11.0)
            .collect();
        let files = [("a", &a), ("b", &b)].map(|(name, v)| {
            let f = d.join(format!("{name}{seq}.bin"));
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(&f, bytes).unwrap();
            f
        });
        let out = d.join(format!("dyn{seq}"));
        let got = outputs_of(&dynamic, &files, &out, 1, &[seq]).expect("runs");
        let want = specialized_files(&p, &d, &[("seq", seq)], &files, 1);
        assert_eq!(got, want, "depth {seq}");
    }
}
