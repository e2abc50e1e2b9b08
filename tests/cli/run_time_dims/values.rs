//! What a run-time dim does to values: a detector's NonMaxSuppression and a YOLO export
//! at every size, gathers checked against the dim, a table that bounds it, Shape values and
//! data-sized outputs that follow it.

use super::*;

/// A single-shot detector over `[1, 3, H, W]` ending in NonMaxSuppression: a stride-2
/// convolution and a 2×2 pool to an `(H/4)·(W/4)` grid of boxes (4 channels) and scores
/// (3 classes), NonMaxSuppression over them and gathers of the kept boxes and classes: its
/// outputs have as many rows as boxes survive, and its box count follows the dims.
fn model_with_nms() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 19) as f32 - 9.0) / 20.0).collect()
    };
    model(
        vec![
            with_ints(
                with_ints(
                    node("Conv", "c1", &["x", "w1"], &["a1"]),
                    "strides",
                    &[2, 2],
                ),
                "pads",
                &[1, 1, 1, 1],
            ),
            node("Relu", "r1", &["a1"], &["b1"]),
            with_ints(
                with_ints(
                    node("MaxPool", "p1", &["b1"], &["p1"]),
                    "kernel_shape",
                    &[2, 2],
                ),
                "strides",
                &[2, 2],
            ),
            node("Conv", "box_head", &["p1", "wb"], &["box_raw"]),
            node(
                "Reshape",
                "box_flat",
                &["box_raw", "box_shape"],
                &["box_flat"],
            ),
            with_ints(
                node("Transpose", "box_t", &["box_flat"], &["box_t"]),
                "perm",
                &[0, 2, 1],
            ),
            node("Mul", "boxes_all", &["box_t", "cell"], &["boxes_all"]),
            node("Conv", "cls_head", &["p1", "wc"], &["cls_raw"]),
            node(
                "Reshape",
                "cls_flat",
                &["cls_raw", "cls_shape"],
                &["cls_flat"],
            ),
            node("Sigmoid", "scores_all", &["cls_flat"], &["scores_all"]),
            with_int(
                node(
                    "NonMaxSuppression",
                    "nms",
                    &["boxes_all", "scores_all", "max_boxes", "iou", "min_score"],
                    &["selected"],
                ),
                "center_point_box",
                1,
            ),
            with_int(
                node("Gather", "box_idx", &["selected", "box_col"], &["box_idx"]),
                "axis",
                1,
            ),
            node("Squeeze", "boxes_2d", &["boxes_all", "zero"], &["boxes_2d"]),
            node("Gather", "boxes", &["boxes_2d", "box_idx"], &["boxes"]),
            with_int(
                node(
                    "Gather",
                    "classes",
                    &["selected", "class_col"],
                    &["classes"],
                ),
                "axis",
                1,
            ),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(3), D::S("H"), D::S("W")],
        )],
        vec![
            value_info("boxes", 1, &[D::S("n"), D::N(4)]),
            value_info("classes", 7, &[D::S("n")]),
        ],
        vec![
            f32_tensor("w1", &[16, 3, 3, 3], &v(16 * 27, 5)),
            f32_tensor("wb", &[4, 16, 1, 1], &v(64, 7)),
            f32_tensor("wc", &[3, 16, 1, 1], &v(48, 11)),
            int_tensor("box_shape", 7, &[3], &[1, 4, -1]),
            int_tensor("cls_shape", 7, &[3], &[1, 3, -1]),
            f32_tensor("cell", &[], &[16.0]),
            int_tensor("max_boxes", 7, &[1], &[20]),
            f32_tensor("iou", &[1], &[0.45]),
            f32_tensor("min_score", &[1], &[0.55]),
            int_tensor("box_col", 7, &[], &[2]),
            int_tensor("class_col", 7, &[], &[1]),
            int_tensor("zero", 7, &[1], &[0]),
        ],
        17,
    )
}

/// A detector ending in NonMaxSuppression takes its image's height and width at run time:
/// the boxes it keeps at each size are the object specialized to that size's, row for row
/// (the gather's index into the `(H/4)·(W/4)` boxes is checked against that count).
#[test]
fn a_detector_ending_in_nms_runs_at_every_size() {
    let d = scratch("run_time_dims_nms");
    let p = d.join("detector.onnx");
    save(&model_with_nms(), &p);
    let c = compile_bounded(&p, &[("H", 256), ("W", 256)]);
    assert_eq!(c.program.run_dims.len(), 2, "{}", c.header);
    assert!(c.header.contains("at most [60, 4]"), "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    let mut kept = Vec::new();
    for (h, w) in [(28usize, 28usize), (32, 64), (100, 57), (256, 256)] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let (got, want) = at_plane(&p, &d, &dynamic, (h, w), &x, 2);
        assert_eq!(got[1], want[1], "{h}x{w}: classes");
        assert_eq!(got[0].len(), want[0].len(), "{h}x{w}: boxes");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{h}x{w}: {a} vs {b}"
            );
        }
        kept.push(got[1].len() / 8);
    }
    assert!(kept.iter().all(|&n| n > 0), "no box kept: {kept:?}");
}

/// Gathers of `x: [1, seq]` at run-time indices `i: [3]`.
fn model_with_gather() -> onnxc_proto::ModelProto {
    model(
        vec![with_int(
            node("Gather", "pick", &["x", "i"], &["y"]),
            "axis",
            1,
        )],
        vec![
            value_info("x", 1, &[D::N(1), D::S("seq")]),
            value_info("i", 7, &[D::N(3)]),
        ],
        vec![value_info("y", 1, &[D::N(1), D::N(3)])],
        vec![],
        13,
    )
}

/// An index checked against a dim taken at run time is checked against its value, not its
/// bound: negative indices wrap by it, and one past it fails the run as the specialized
/// object's does.
#[test]
fn gather_indices_are_checked_against_the_run_time_dim() {
    let d = scratch("run_time_dims_gather");
    let p = d.join("gather.onnx");
    save(&model_with_gather(), &p);
    let c = compile_dynamic(&p, "seq", 64);
    let dynamic = executable(&c, &d, "dynamic");
    let seq = 30usize;
    let x: Vec<f32> = (0..seq).map(|k| k as f32).collect();
    let xs = write_input(&d, 0, &x);
    let indices = |name: &str, i: [i64; 3]| {
        let f = d.join(name);
        std::fs::write(
            &f,
            i.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        f
    };
    let run_with = |i: &Path, out: &str| {
        let out = d.join(out);
        std::fs::create_dir_all(&out).unwrap();
        Command::new(&dynamic)
            .arg("run")
            .arg(&xs)
            .arg(i)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let o = run_with(&indices("i_ok.bin", [29, -30, -1]), "ok");
    assert!(o.status.success(), "{}", stderr(&o));
    let y = floats(&std::fs::read(d.join("ok/output_0.bin")).unwrap());
    assert_eq!(y, [29.0, 0.0, 29.0]);
    // Inside the bound (64) but past seq: an index error, as at a fixed seq of 30.
    for (k, bad) in [[30, 0, 0], [0, -31, 0]].into_iter().enumerate() {
        let o = run_with(&indices(&format!("i_bad{k}.bin"), bad), &format!("bad{k}"));
        assert!(!o.status.success(), "{bad:?} runs");
        assert!(stderr(&o).contains("index"), "{bad:?}: {}", stderr(&o));
    }
}

/// A YOLOv5-style detector exported with dynamic axes (`examples/models/tiny_yolo.onnx`):
/// its anchor grid is a Range over its stride-8 map's Shape, which folded into a table whose
/// length follows the dims, so the compile retries with such maps computed at run time, and
/// its stride-8 sizes, no polynomials of a step the probes tell apart, in multiples of 32.
/// The boxes it keeps are the specialized objects', at every size tried.
#[test]
fn a_yolo_export_with_dynamic_axes_runs_at_multiples_of_32() {
    let d = scratch("run_time_dims_yolo");
    let p = onnxc_tests::root().join("examples/models/tiny_yolo.onnx");
    let c = compile_bounded(&p, &[("H", 320), ("W", 320)]);
    let dims: Vec<(i64, i64, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.least, r.bound, r.multiple))
        .collect();
    assert_eq!(dims, [(1, 10, 32), (1, 10, 32)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (h, w) in [(32usize, 96usize), (64, 64), (96, 160), (320, 320)] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let dir = d.join(format!("dyn{h}x{w}"));
        let got = outputs_at(&dynamic, &input, &dir, 2, 1, &[h / 32, w / 32]);
        let want = specialized_plane(&p, &d, (h, w), &input, 2);
        assert!(!want[1].is_empty(), "{h}x{w}: no box kept");
        assert_eq!(got[1], want[1], "{h}x{w}: classes");
        assert_eq!(got[0].len(), want[0].len(), "{h}x{w}: boxes");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!(
                (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
                "{h}x{w}: {a} vs {b}"
            );
        }
    }
}

/// A GPT-style embedding over `ids: [batch, seq]`: token rows plus the rows of a 64-row
/// position table at `Range(0, seq)`, so the model is valid up to seq = 64 only.
fn model_with_position_table() -> onnxc_proto::ModelProto {
    let table = |rows: usize| -> Vec<f32> {
        (0..rows * 8)
            .map(|k| ((k * 5 % 17) as f32 - 8.0) / 8.0)
            .collect()
    };
    model(
        vec![
            node("Shape", "shape", &["ids"], &["dims"]),
            with_int(
                node("Gather", "seq_len", &["dims", "one"], &["len"]),
                "axis",
                0,
            ),
            node("Range", "positions", &["zero", "len", "one"], &["pos"]),
            node("Gather", "tokens", &["tok", "ids"], &["te"]),
            node("Gather", "places", &["pe", "pos"], &["pe_rows"]),
            node("Add", "embed", &["te", "pe_rows"], &["y"]),
        ],
        vec![value_info("ids", 7, &[D::S("batch"), D::S("seq")])],
        vec![value_info("y", 1, &[D::S("batch"), D::S("seq"), D::N(8)])],
        vec![
            f32_tensor("tok", &[100, 8], &table(100)),
            f32_tensor("pe", &[64, 8], &table(64)),
            int_tensor("zero", 7, &[], &[0]),
            int_tensor("one", 7, &[], &[1]),
        ],
        17,
    )
}

/// A model valid only up to a value below the default bound (512) is compiled up to that
/// value with a warning naming what fails past it, and `inspect` reports the same bound;
/// a bound given with `--dim` is kept, and a failure at it says so.
#[test]
fn a_position_table_shorter_than_the_default_bound_sets_the_bound() {
    let d = scratch("run_time_dims_positions");
    let p = d.join("positions.onnx");
    save(&model_with_position_table(), &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("positions.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for want in [
        "warning: dim 'seq' is taken at run time up to 64",
        "(at 65: node 'places' (Gather, opset 17): index 64 is out of range",
        "--dim seq=..N",
    ] {
        assert!(stderr(&o).contains(want), "{want}\n{}", stderr(&o));
    }
    let o = onnxc().arg("inspect").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("run-time dims:  'seq' up to 64"), "{out}");
    let o = onnxc()
        .args(["inspect", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(j["run_time_dims"], serde_json::json!({"seq": 64}));
    // The program takes seq at run time from 1 up to 64.
    let c = driver::compile_file(&p, "model", &Options::default(), None).unwrap();
    let dims: Vec<(i64, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.least, r.bound))
        .collect();
    assert_eq!(dims, [(1, 64)], "{}", c.header);
    let o = onnxc()
        .arg(&p)
        .args([
            "-o",
            d.join("given.o").to_str().unwrap(),
            "--dim",
            "seq=..128",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success(), "a bound past the table compiles");
    assert!(
        stderr(&o).contains("dim 'seq' is taken at run time up to 128, but at 128 the model fails"),
        "{}",
        stderr(&o)
    );
}

/// The position-table embedding quantized as onnxruntime's `quantize_dynamic` leaves a
/// layer's input: DynamicQuantizeLinear over the whole tensor, so the items are not
/// computed on their own and the batch is no run-time batch. The search for seq's bound
/// still finds the table's 64 rows (a failure for want of a fixed batch is not the
/// value's), and the batch is taken at run time beside it: no flags needed. Before, the
/// search stopped there and the compile failed at the default bound with the Gather's
/// index error.
#[test]
fn a_table_bounds_the_sequence_when_the_batch_is_no_run_time_batch() {
    let d = scratch("run_time_dims_positions_quantized");
    let p = d.join("positions_quantized.onnx");
    let mut m = model_with_position_table();
    let g = m.graph.as_mut().unwrap();
    g.node.push(node(
        "DynamicQuantizeLinear",
        "quantize",
        &["y"],
        &["y_q", "y_scale", "y_zero"],
    ));
    g.output = vec![
        value_info("y_q", 2, &[D::S("batch"), D::S("seq"), D::N(8)]),
        value_info("y_scale", 1, &[]),
        value_info("y_zero", 2, &[]),
    ];
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("positions_quantized.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for want in [
        "warning: dim 'seq' is taken at run time up to 64",
        "index 64 is out of range",
        "'batch' cannot be a run-time batch",
    ] {
        assert!(stderr(&o).contains(want), "{want}\n{}", stderr(&o));
    }
    let c = driver::compile_file(&p, "model", &Options::default(), None).unwrap();
    let dims: Vec<(&str, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.name.as_str(), r.bound))
        .collect();
    assert_eq!(dims, [("batch", 512), ("seq", 64)], "{}", c.header);
}

/// A Hugging Face style embedding over `x: [batch, seq, 8]`: a registered `position_ids`
/// buffer `[1, 64]` sliced to `[:, :seq]` and gathered from a position table, plus a second
/// table sliced to its first `seq` rows directly: at each value the compiler lowers the
/// model at, both fold to constants whose lengths follow the dim.
fn model_with_sliced_tables() -> onnxc_proto::ModelProto {
    let ids: Vec<i64> = (0..64).collect();
    model(
        vec![
            node("Shape", "shape", &["x"], &["dims"]),
            with_int(
                node("Gather", "seq_len", &["dims", "one"], &["len"]),
                "axis",
                0,
            ),
            node("Unsqueeze", "len_1d", &["len", "zero_1d"], &["end"]),
            node(
                "Slice",
                "ids_to_seq",
                &["position_ids", "zero_1d", "end", "one_1d"],
                &["pos"],
            ),
            node("Gather", "places", &["pe", "pos"], &["pe_rows"]),
            node(
                "Slice",
                "table_to_seq",
                &["te", "zero_1d", "end", "zero_1d"],
                &["te_rows"],
            ),
            node("Add", "add_places", &["x", "pe_rows"], &["xp"]),
            node("Add", "add_table", &["xp", "te_rows"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::S("batch"), D::S("seq"), D::N(8)])],
        vec![value_info("y", 1, &[D::S("batch"), D::S("seq"), D::N(8)])],
        vec![
            int_tensor("position_ids", 7, &[1, 64], &ids),
            f32_tensor("pe", &[64, 8], &sliced_table(5)),
            f32_tensor("te", &[64, 8], &sliced_table(7)),
            int_tensor("zero_1d", 7, &[1], &[0]),
            int_tensor("one_1d", 7, &[1], &[1]),
            int_tensor("one", 7, &[], &[1]),
        ],
        13,
    )
}

/// The 64 rows of 8 of `model_with_sliced_tables`' tables, `m` varying them.
fn sliced_table(m: usize) -> Vec<f32> {
    (0..64 * 8)
        .map(|k| ((k * m % 23) as f32 - 11.0) / 8.0)
        .collect()
}

/// Tables sliced to a run-time length fold, at each probe, to a prefix of the table at the
/// bound: the bound's serves every value, so the model compiles with no flag and each row
/// of the output adds the table rows of its position.
#[test]
fn tables_sliced_to_a_run_time_length_are_read_at_every_length() {
    let d = scratch("run_time_dims_sliced_tables");
    let p = d.join("sliced.onnx");
    save(&model_with_sliced_tables(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 64)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    let (pe, te) = (sliced_table(5), sliced_table(7));
    for (b, s) in [(1usize, 1usize), (2, 7), (1, 37), (3, 64)] {
        let x: Vec<f32> = (0..b * s * 8).map(|k| (k % 13) as f32 - 6.0).collect();
        let input = write_input(&d, b * 100 + s, &x);
        // The batch is the program's run-time batch (items), seq its run-time dim.
        let y = floats(&item_output(
            &exe,
            &input,
            &d.join(format!("out{b}x{s}")),
            b,
            s,
        ));
        let want: Vec<f32> = (0..b * s * 8)
            .map(|k| (x[k] + pe[k % (s * 8)]) + te[k % (s * 8)])
            .collect();
        assert_eq!(y, want, "batch {b}, seq {s}");
    }
}

/// A causal mask as `torch.tril(torch.ones(s, s))` exports: ConstantOfShape of `[seq, seq]`
/// ones, Trilu, added to `x: [batch, seq, seq]`.
fn model_with_causal_mask() -> onnxc_proto::ModelProto {
    let ones = onnxc_proto::TensorProto {
        dims: vec![1],
        data_type: Some(1),
        raw_data: Some(1f32.to_le_bytes().to_vec()),
        ..Default::default()
    };
    model(
        vec![
            node("Shape", "shape", &["x"], &["dims"]),
            with_int(
                node("Gather", "seq_len", &["dims", "one"], &["len"]),
                "axis",
                0,
            ),
            node("Unsqueeze", "len_1d", &["len", "zero_1d"], &["end"]),
            with_int(
                node("Concat", "square", &["end", "end"], &["sq"]),
                "axis",
                0,
            ),
            with_tensor(
                node("ConstantOfShape", "fill", &["sq"], &["o"]),
                "value",
                ones,
            ),
            with_int(node("Trilu", "lower", &["o"], &["mask"]), "upper", 0),
            node("Add", "masked", &["x", "mask"], &["y"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::S("batch"), D::S("seq"), D::S("seq")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::S("batch"), D::S("seq"), D::S("seq")],
        )],
        vec![
            int_tensor("zero_1d", 7, &[1], &[0]),
            int_tensor("one", 7, &[], &[1]),
        ],
        17,
    )
}

/// A Trilu over a fill of `[seq, seq]` folds, at each probe, to a table no formula gives;
/// the retry that computes expanding maps at run time takes the fill as one element, so
/// the mask is computed where the model runs, at every length.
#[test]
fn a_causal_mask_over_a_run_time_length_is_computed_at_run_time() {
    let d = scratch("run_time_dims_causal_mask");
    let p = d.join("mask.onnx");
    save(&model_with_causal_mask(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("seq", 1, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for (b, s) in [(1usize, 1usize), (2, 5), (1, 37), (2, 130)] {
        let x: Vec<f32> = (0..b * s * s).map(|k| (k % 11) as f32 - 5.0).collect();
        let input = write_input(&d, b * 1000 + s, &x);
        // The batch is the program's run-time batch (items), seq its run-time dim.
        let y = floats(&item_output(
            &exe,
            &input,
            &d.join(format!("out{b}x{s}")),
            b,
            s,
        ));
        let want: Vec<f32> = (0..b * s * s)
            .map(|k| {
                let (r, c) = (k / s % s, k % s);
                x[k] + if c <= r { 1.0 } else { 0.0 }
            })
            .collect();
        assert_eq!(y, want, "batch {b}, seq {s}");
    }
}

/// `x [n, 4]` with n symbolic: its shape as an output, and its mean over n as the sum over
/// n divided by n taken from the shape (`x.sum(0) / x.shape[0]` as PyTorch exports it).
fn model_with_shape_values() -> onnxc_proto::ModelProto {
    model(
        vec![
            node("Shape", "dims", &["x"], &["s"]),
            with_int(node("Gather", "rows", &["s", "zero"], &["n"]), "axis", 0),
            with_int(node("Cast", "as_float", &["n"], &["nf"]), "to", 1),
            with_int(
                with_ints(node("ReduceSum", "total", &["x"], &["t"]), "axes", &[0]),
                "keepdims",
                0,
            ),
            node("Div", "mean", &["t", "nf"], &["m"]),
        ],
        vec![value_info("x", 1, &[D::S("n"), D::N(4)])],
        vec![
            value_info("s", 7, &[D::N(2)]),
            value_info("m", 1, &[D::N(4)]),
        ],
        vec![int_tensor("zero", 7, &[], &[0])],
        11,
    )
}

#[test]
fn shape_values_of_a_dim_taken_at_run_time_follow_it() {
    // The Shape is folded at each value the compiler lowers the model at; copied as literals,
    // its elements become the dim's formula, where a table in the object could hold one
    // value only.
    let d = scratch("run_time_dims_shape_values");
    let p = d.join("shape.onnx");
    save(&model_with_shape_values(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("n", 1, driver::DEFAULT_DIM_BOUND)]);
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 3, 37, 300] {
        let x: Vec<f32> = (0..n * 4).map(|k| (k % 7) as f32 - 3.0).collect();
        let input = write_input(&d, n, &x);
        let got = outputs(&exe, &input, &d.join(format!("out{n}")), 2, 1);
        let dims = ints(&got[0]);
        assert_eq!(dims, [n as i64, 4], "n {n}");
        for (j, m) in floats(&got[1]).into_iter().enumerate() {
            let want = (0..n).map(|i| x[i * 4 + j]).sum::<f32>() / n as f32;
            assert!(
                (m - want).abs() <= 1e-5 * want.abs().max(1.0),
                "n {n}: {m} against {want}"
            );
        }
        assert_eq!(got, specialized(&p, &d, "n", n, &input, 2), "n {n}");
    }
}

#[test]
fn positions_the_data_selects_over_a_dim_taken_at_run_time() {
    // NonZero(x > 0) over `x [n, 3]`: its output `[2, count]` has a count bounded by 3·n,
    // so the staged bound of its rows follows n (`RunDim`), and each call's positions are
    // read out of the staging at that call's bound.
    let d = scratch("run_time_dims_nonzero");
    let p = d.join("nonzero.onnx");
    save(
        &model(
            vec![
                node("Greater", "positive", &["x", "zero"], &["m"]),
                node("NonZero", "where", &["m"], &["y"]),
            ],
            vec![value_info("x", 1, &[D::S("n"), D::N(3)])],
            vec![value_info("y", 7, &[D::N(2), D::S("count")])],
            vec![f32_tensor("zero", &[], &[0.0])],
            13,
        ),
        &p,
    );
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("n", 1, driver::DEFAULT_DIM_BOUND)]);
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 2, 37, 300, 512] {
        let x: Vec<f32> = (0..n * 3).map(|k| (k * 7 % 5) as f32 - 2.0).collect();
        let input = write_input(&d, n, &x);
        let out = d.join(format!("out{n}"));
        let got = outputs(&exe, &input, &out, 1, 1);
        let at: Vec<usize> = (0..n * 3).filter(|&k| x[k] > 0.0).collect();
        let dims = ints(&std::fs::read(out.join("output_0.dims")).unwrap());
        assert_eq!(dims, [2, at.len() as i64], "n {n}");
        let want: Vec<i64> = (at.iter().map(|&k| (k / 3) as i64))
            .chain(at.iter().map(|&k| (k % 3) as i64))
            .collect();
        assert_eq!(ints(&got[0]), want, "n {n}");
    }
}

#[test]
fn a_data_sized_output_runs_in_a_program_of_its_own_below_the_least() {
    // Unique over `x [n]`: at n = 1 the model lowers to another program (its loops of
    // extent 1 fall away), which runs as a program of its own for that value; its outputs
    // sized by the data are staged and read out as the general program's are.
    let d = scratch("run_time_dims_unique");
    let p = d.join("unique.onnx");
    save(
        &model(
            vec![with_int(
                node("Unique", "distinct", &["x"], &["y", "i", "inv", "c"]),
                "sorted",
                1,
            )],
            vec![value_info("x", 1, &[D::S("n")])],
            vec![
                value_info("y", 1, &[D::S("u")]),
                value_info("i", 7, &[D::S("u")]),
                value_info("inv", 7, &[D::S("n")]),
                value_info("c", 7, &[D::S("u")]),
            ],
            vec![],
            11,
        ),
        &p,
    );
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("n", 1, driver::DEFAULT_DIM_BOUND)]);
    assert!(
        c.program.fixed.iter().any(|f| f.at == [Some(1)]),
        "no program of its own for n = 1: {}",
        c.header
    );
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 2, 37, 300] {
        let x: Vec<f32> = (0..n).map(|k| ((k * 5) % 7) as f32 - 3.0).collect();
        let input = write_input(&d, n, &x);
        let got = outputs(&exe, &input, &d.join(format!("out{n}")), 4, 1);
        let mut want = x.clone();
        want.sort_by(f32::total_cmp);
        want.dedup();
        assert_eq!(floats(&got[0]), want, "n {n}");
        let counts = ints(&got[3]);
        let expect: Vec<i64> = (want.iter())
            .map(|v| x.iter().filter(|&&e| e == *v).count() as i64)
            .collect();
        assert_eq!(counts, expect, "n {n}");
    }
}
