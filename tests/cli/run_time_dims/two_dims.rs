//! Two dims taken at run time: attention scores over a batch and a sequence, an image's
//! height and width, an FPN resizing over both.

use super::*;

/// Self-attention scores over `x [B, S, 4]`: `p = softmax(x · xᵀ)` `[B, S, S]`, and the
/// mean of `p · x` over everything (batch included, so B is no run-time batch): the scores'
/// sizes are `B · S²`.
fn model_with_scores() -> onnxc_proto::ModelProto {
    model(
        vec![
            with_ints(node("Transpose", "t", &["x"], &["xt"]), "perm", &[0, 2, 1]),
            node("MatMul", "scores", &["x", "xt"], &["s"]),
            with_int(node("Softmax", "attend", &["s"], &["p"]), "axis", -1),
            node("MatMul", "mix", &["p", "x"], &["px"]),
            with_int(node("ReduceMean", "mean", &["px"], &["m"]), "keepdims", 0),
        ],
        vec![value_info("x", 1, &[D::S("B"), D::S("S"), D::N(4)])],
        vec![
            value_info("p", 1, &[D::S("B"), D::S("S"), D::S("S")]),
            value_info("m", 1, &[]),
        ],
        vec![],
        13,
    )
}

#[test]
fn attention_scores_take_the_batch_and_the_sequence_at_run_time() {
    // Sizes of degree two in S times B (`loops::dims::Form::Quad`): one object for every
    // batch and length, the scores as the specialized objects compute them.
    let d = scratch("run_time_dims_scores");
    let p = d.join("scores.onnx");
    save(&model_with_scores(), &p);
    let c = compile_bounded(&p, &[("B", 16), ("S", 64)]);
    let dims = run_dims_of(&c);
    assert_eq!(dims, [("B", 1, 16), ("S", 1, 64)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (b, s) in [(1usize, 1usize), (1, 9), (3, 1), (2, 30), (16, 64), (5, 33)] {
        let x: Vec<f32> = (0..b * s * 4)
            .map(|k| ((k * 7 % 19) as f32 - 9.0) / 7.0)
            .collect();
        let inputs = [write_input(&d, 1000 * b + s, &x)];
        let out = d.join(format!("dyn{b}x{s}"));
        let got = outputs_of(&dynamic, &inputs, &out, 2, &[b, s]);
        let got = got.unwrap_or_else(|| panic!("B {b}, S {s} does not run"));
        let want = specialized_files(&p, &d, &[("B", b), ("S", s)], &inputs, 2);
        assert_eq!(got[0].len(), 4 * b * s * s, "B {b}, S {s}: scores");
        assert_eq!(
            got[0], want[0],
            "B {b}, S {s}: the specialized object's scores"
        );
        // The mean sums in another order where its count is a run-time value (its terms
        // are up to 1.3 in magnitude and cancel).
        let (m, w) = (floats(&got[1])[0], floats(&want[1])[0]);
        assert!((m - w).abs() <= 1e-6, "B {b}, S {s}: mean {m} vs {w}");
    }
}

/// A detector's fully convolutional head over `[1, 3, H, W]`: two 3×3 convolutions of
/// stride 2, one of stride 1 (all padded), a 1×1 to one map and a sigmoid, `[1, 1, (H + 3) /
/// 4, (W + 3) / 4]`.
fn model_with_image_plane() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 19) as f32 - 9.0) / 30.0).collect()
    };
    let conv = |name: &str, x: &str, w: &str, y: &str, stride: i64| {
        with_ints(
            with_ints(
                node("Conv", name, &[x, w], &[y]),
                "strides",
                &[stride, stride],
            ),
            "pads",
            &[1, 1, 1, 1],
        )
    };
    model(
        vec![
            conv("c1", "x", "w1", "a1", 2),
            node("Relu", "r1", &["a1"], &["b1"]),
            conv("c2", "b1", "w2", "a2", 2),
            node("Relu", "r2", &["a2"], &["b2"]),
            conv("c3", "b2", "w3", "a3", 1),
            node("Relu", "r3", &["a3"], &["b3"]),
            node("Conv", "head", &["b3", "w4"], &["logit"]),
            node("Sigmoid", "prob", &["logit"], &["y"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(3), D::S("H"), D::S("W")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(1), D::S("h"), D::S("w")],
        )],
        vec![
            f32_tensor("w1", &[16, 3, 3, 3], &v(16 * 27, 5)),
            f32_tensor("w2", &[32, 16, 3, 3], &v(32 * 144, 7)),
            f32_tensor("w3", &[32, 32, 3, 3], &v(32 * 288, 11)),
            f32_tensor("w4", &[1, 32, 1, 1], &v(32, 13)),
        ],
        13,
    )
}

#[test]
fn an_image_height_and_width_are_both_taken_at_run_time() {
    let d = scratch("run_time_dims_plane");
    let p = d.join("plane.onnx");
    save(&model_with_image_plane(), &p);
    let c = compile_bounded(&p, &[("H", 320), ("W", 320)]);
    let dims = run_dims_of(&c);
    // Below the least probes each dim is checked down to 1, the other at its probes: the
    // formulas serve H from 1 and W from 5 (below, W's maps end in loops of extent 1,
    // whose programs, with those of H's values they need, would be too many).
    assert_eq!(dims, [("H", 1, 320), ("W", 5, 320)], "{}", c.header);
    assert!(
        c.header.contains("[1, 1, (H+3)/4, (W+3)/4]"),
        "{}",
        c.header
    );
    let dynamic = executable(&c, &d, "dynamic");
    for (h, w) in [
        (1usize, 5usize),
        (3, 27),
        (27, 6),
        (28, 28),
        (28, 320),
        (320, 28),
        (29, 31),
        (100, 257),
        (320, 320),
    ] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let got = outputs_at(
            &dynamic,
            &input,
            &d.join(format!("dyn{h}x{w}")),
            1,
            1,
            &[h, w],
        );
        let two = outputs_at(
            &dynamic,
            &input,
            &d.join(format!("dyn{h}x{w}t2")),
            1,
            2,
            &[h, w],
        );
        assert_eq!(got, two, "{h}x{w}: 2 threads");
        let want = specialized_plane(&p, &d, (h, w), &input, 1);
        assert_eq!(got[0].len(), h.div_ceil(4) * w.div_ceil(4) * 4, "{h}x{w}");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!((a - b).abs() <= 1e-5, "{h}x{w}: {a} vs {b}");
        }
    }
    // Below W's least, or past a bound: refused.
    for (h, w) in [(40usize, 4usize), (1, 1), (321, 40)] {
        let input = write_input(&d, h * 1000 + w, &vec![0.0; 3 * h * w]);
        let out = d.join(format!("dyn{h}x{w}"));
        std::fs::create_dir_all(&out).unwrap();
        let o = Command::new(&dynamic)
            .arg("run")
            .arg(&input)
            .arg("--out")
            .arg(&out)
            .arg("--dims")
            .arg(format!("{h},{w}"))
            .output()
            .unwrap();
        assert!(!o.status.success(), "{h}x{w} runs");
        let range = if h > 320 { "1 to 320" } else { "5 to 320" };
        assert!(stderr(&o).contains(range), "{h}x{w}: {}", stderr(&o));
    }
}

/// An FPN over `[1, 3, H, W]`: two stride-2 convolutions, the second's map upsampled ×2 and
/// added to the first's, then resized (linear) to the input's size read from its Shape, and
/// a 1×1 convolution to one map `[1, 1, H, W]`. The inner upsampling takes constant scales
/// (as PaddleOCR exports it: valid when H and W are multiples of 4) or, with `to_lateral`,
/// the lateral's size from its Shape (as `F.interpolate(size=…)` exports: valid anywhere).
fn model_with_fpn(to_lateral: bool) -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 19) as f32 - 9.0) / 30.0).collect()
    };
    let conv = |name: &str, x: &str, w: &str, y: &str| {
        with_ints(
            with_ints(node("Conv", name, &[x, w], &[y]), "strides", &[2, 2]),
            "pads",
            &[1, 1, 1, 1],
        )
    };
    let up = if to_lateral {
        vec![
            node("Shape", "lateral_shape", &["b1"], &["s1"]),
            with_str(
                node("Resize", "up", &["b2", "", "", "s1"], &["u2"]),
                "mode",
                "nearest",
            ),
        ]
    } else {
        vec![with_str(
            with_str(
                node("Resize", "up", &["b2", "", "scales"], &["u2"]),
                "coordinate_transformation_mode",
                "asymmetric",
            ),
            "nearest_mode",
            "floor",
        )]
    };
    let mut nodes = vec![
        conv("c1", "x", "w1", "a1"),
        node("Relu", "r1", &["a1"], &["b1"]),
        conv("c2", "b1", "w2", "a2"),
        node("Relu", "r2", &["a2"], &["b2"]),
    ];
    nodes.extend(up);
    nodes.extend([
        node("Add", "merge", &["b1", "u2"], &["m"]),
        node("Shape", "input_shape", &["x"], &["sx"]),
        node("Slice", "hw", &["sx", "from", "to"], &["hw"]),
        node("Shape", "merged_shape", &["m"], &["sm"]),
        node("Slice", "nc", &["sm", "zero", "from"], &["nc"]),
        with_int(node("Concat", "size", &["nc", "hw"], &["size"]), "axis", 0),
        with_str(
            node("Resize", "to_input", &["m", "", "", "size"], &["full"]),
            "mode",
            "linear",
        ),
        node("Conv", "head", &["full", "w3"], &["y"]),
    ]);
    model(
        nodes,
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(3), D::S("H"), D::S("W")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(1), D::S("H"), D::S("W")],
        )],
        vec![
            f32_tensor("w1", &[8, 3, 3, 3], &v(8 * 27, 5)),
            f32_tensor("w2", &[8, 8, 3, 3], &v(8 * 72, 7)),
            f32_tensor("w3", &[1, 8, 1, 1], &v(8, 13)),
            f32_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
            int_tensor("from", 7, &[1], &[2]),
            int_tensor("to", 7, &[1], &[4]),
            int_tensor("zero", 7, &[1], &[0]),
        ],
        13,
    )
}

/// An FPN's upsamplings resize over the run-time dims (the kernel computes its taps when it
/// runs); one whose ×2 upsampling is added to its lateral is valid at multiples of 4 only,
/// and is taken at those (`NAME_run_shaped` refuses other dims: `shaped`'s tests); one
/// resized to its lateral's shape at any size. Each is checked against the object
/// specialized to each size.
#[test]
fn an_fpn_resizes_over_the_run_time_dims() {
    for to_lateral in [false, true] {
        let d = scratch(&format!("run_time_dims_fpn{}", to_lateral as u8));
        let p = d.join("fpn.onnx");
        save(&model_with_fpn(to_lateral), &p);
        let c = compile_bounded(&p, &[("H", 160), ("W", 160)]);
        let dims: Vec<(&str, i64, i64, i64)> = (c.program.run_dims.iter())
            .map(|r| (r.name.as_str(), r.least, r.bound, r.multiple))
            .collect();
        let sizes: &[(usize, usize)] = if to_lateral {
            // From 3 or less: where the formulas start, and whether the corner of the least
            // values gets a program of its own, follow the host's kernel choices (from 3 on
            // AVX2, from 1 on an AVX-512 Xeon).
            assert!(
                dims.len() == 2
                    && (dims.iter().zip(["H", "W"]))
                        .all(|(d, n)| d.0 == n && d.1 <= 3 && d.2 == 160 && d.3 == 1),
                "{dims:?}\n{}",
                c.header
            );
            &[
                (3, 3),
                (3, 50),
                (27, 5),
                (28, 28),
                (29, 31),
                (100, 57),
                (160, 160),
            ]
        } else {
            // Counted in multiples of 4, from 1 (4 rows or columns). Whether 4 × 4, the
            // corner of the two least values, gets a program of its own follows the host's
            // kernels (on AVX2 it does, with AVX-512 it does not); each size below is
            // checked against its specialized object either way.
            assert_eq!(dims, [("H", 1, 40, 4), ("W", 1, 40, 4)], "{}", c.header);
            assert!(
                c.header.contains("H (4 to 160, a multiple of 4)")
                    && c.header.contains("[1, 3, H, W]"),
                "{}",
                c.header
            );
            &[
                (4, 4),
                (4, 160),
                (8, 4),
                (8, 8),
                (8, 160),
                (12, 36),
                (100, 64),
                (160, 160),
            ]
        };
        let dynamic = executable(&c, &d, "dynamic");
        for &(h, w) in sizes {
            let x: Vec<f32> = (0..3 * h * w)
                .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
                .collect();
            let input = write_input(&d, h * 1000 + w, &x);
            let m = if to_lateral { 1 } else { 4 };
            let dir = d.join(format!("dyn{h}x{w}"));
            let got = outputs_at(&dynamic, &input, &dir, 1, 1, &[h / m, w / m]);
            let want = specialized_plane(&p, &d, (h, w), &input, 1);
            assert_eq!(got[0].len(), h * w * 4, "{h}x{w}");
            // Within rounding: the specialized object may take another convolution path.
            for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
                assert!((a - b).abs() <= 1e-5, "{h}x{w}: {a} vs {b}");
            }
        }
    }
}

/// Five 2 × 2 average pools of stride 2 over `[1, 3, H, W]`, then a ReLU: a backbone's
/// stride-32 head as DenseNet ends. Its sizes are `H / 32` (a stride above 4: no
/// polynomial of a step of every value), and in multiples of 8 the least values leave the
/// last map one wide, where its loops of extent 1 fall away (the programs' loops differ):
/// the dims are taken in multiples of 32.
fn model_with_stride_32() -> onnxc_proto::ModelProto {
    let mut nodes = Vec::new();
    let mut x = "image".to_string();
    for k in 0..5 {
        let y = format!("p{k}");
        let pool = with_ints(
            node("AveragePool", &y, &[&x], &[&y]),
            "kernel_shape",
            &[2, 2],
        );
        nodes.push(with_ints(pool, "strides", &[2, 2]));
        x = y;
    }
    nodes.push(node("Relu", "relu", &[&x], &["y"]));
    model(
        nodes,
        vec![value_info(
            "image",
            1,
            &[D::N(1), D::N(3), D::S("H"), D::S("W")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(3), D::S("h"), D::S("w")],
        )],
        vec![],
        13,
    )
}

#[test]
fn a_stride_32_backbone_takes_multiples_of_32() {
    let d = scratch("run_time_dims_stride32");
    let p = d.join("pools.onnx");
    save(&model_with_stride_32(), &p);
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    let dims: Vec<(&str, i64, i64, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.name.as_str(), r.least, r.bound, r.multiple))
        .collect();
    assert_eq!(dims, [("H", 1, 16, 32), ("W", 1, 16, 32)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (h, w) in [(32, 32), (32, 96), (64, 64), (160, 224), (512, 512)] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let dir = d.join(format!("dyn{h}x{w}"));
        let got = outputs_at(&dynamic, &input, &dir, 1, 1, &[h / 32, w / 32]);
        let want = specialized_plane(&p, &d, (h, w), &input, 1);
        assert_eq!(got, want, "{h}x{w}");
        assert_eq!(got[0].len(), 3 * (h / 32) * (w / 32) * 4, "{h}x{w}");
    }
}

/// A YOLOv8-style neck over `[1, 3, H, W]`: two stride-2 convolutions, an SPPF at the
/// stride-4 map (two 5×5 max pools, stride 1, padded, concatenated with their input), a
/// 1×1 convolution upsampled ×2 and concatenated with the stride-2 map, and a 1×1 head:
/// valid at multiples of 4 only.
fn model_with_sppf() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 19) as f32 - 9.0) / 30.0).collect()
    };
    let conv = |name: &str, x: &str, w: &str, y: &str| {
        with_ints(
            with_ints(node("Conv", name, &[x, w], &[y]), "strides", &[2, 2]),
            "pads",
            &[1, 1, 1, 1],
        )
    };
    let pool = |name: &str, x: &str, y: &str| {
        with_ints(
            with_ints(node("MaxPool", name, &[x], &[y]), "kernel_shape", &[5, 5]),
            "pads",
            &[2, 2, 2, 2],
        )
    };
    model(
        vec![
            conv("c1", "x", "w1", "a1"),
            node("Relu", "r1", &["a1"], &["b1"]),
            conv("c2", "b1", "w2", "a2"),
            node("Relu", "r2", &["a2"], &["b2"]),
            pool("p1", "b2", "q1"),
            pool("p2", "q1", "q2"),
            with_int(
                node("Concat", "sppf", &["b2", "q1", "q2"], &["s"]),
                "axis",
                1,
            ),
            node("Conv", "c3", &["s", "w3"], &["a3"]),
            with_str(
                with_str(
                    node("Resize", "up", &["a3", "", "scales"], &["u"]),
                    "coordinate_transformation_mode",
                    "asymmetric",
                ),
                "nearest_mode",
                "floor",
            ),
            with_int(node("Concat", "merge", &["b1", "u"], &["m"]), "axis", 1),
            node("Conv", "head", &["m", "w4"], &["y"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(3), D::S("H"), D::S("W")],
        )],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(2), D::S("h"), D::S("w")],
        )],
        vec![
            f32_tensor("w1", &[16, 3, 3, 3], &v(16 * 27, 5)),
            f32_tensor("w2", &[16, 16, 3, 3], &v(16 * 144, 7)),
            f32_tensor("w3", &[16, 48, 1, 1], &v(16 * 48, 11)),
            f32_tensor("w4", &[2, 32, 1, 1], &v(64, 13)),
            f32_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        13,
    )
}

/// Dims taken in multiples are probed clear of the least value and of the one above it,
/// where the deepest maps are two wide and a 5×5 pool may take another layout than at
/// every larger value (YOLOv8's SPPF on AVX-512 targets: the compile failed, its steps
/// differing); both are then checked, and given programs of their own where they differ.
/// Each size's outputs are the specialized object's.
#[test]
fn a_pool_wider_than_the_deepest_map_leaves_the_probes_one_program() {
    let d = scratch("run_time_dims_sppf");
    let p = d.join("sppf.onnx");
    save(&model_with_sppf(), &p);
    let c = compile_bounded(&p, &[("H", 64), ("W", 64)]);
    let dims: Vec<(&str, i64, i64, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.name.as_str(), r.least, r.bound, r.multiple))
        .collect();
    assert_eq!(dims, [("H", 1, 16, 4), ("W", 1, 16, 4)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (h, w) in [(4, 4), (8, 8), (8, 12), (12, 4), (20, 64), (64, 64)] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let dir = d.join(format!("dyn{h}x{w}"));
        let got = outputs_at(&dynamic, &input, &dir, 1, 1, &[h / 4, w / 4]);
        let want = specialized_plane(&p, &d, (h, w), &input, 1);
        assert_eq!(got[0].len(), 2 * (h / 2) * (w / 2) * 4, "{h}x{w}");
        // Within rounding: the specialized object may take another convolution path.
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{h}x{w}: {a} vs {b}"
            );
        }
    }
}

/// A depthwise 3×3 convolution of 8 channels (a MobileNet block's) over `[1, 8, H, W]`,
/// padded, stride `s`.
fn model_with_depthwise(s: i64) -> onnxc_proto::ModelProto {
    let w: Vec<f32> = (0..8 * 9)
        .map(|k| ((k * 11 % 17) as f32 - 8.0) / 9.0)
        .collect();
    model(
        vec![with_ints(
            with_ints(
                with_int(node("Conv", "dw", &["x", "w"], &["y"]), "group", 8),
                "pads",
                &[1, 1, 1, 1],
            ),
            "strides",
            &[s, s],
        )],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(8), D::S("H"), D::S("W")],
        )],
        vec![value_info("y", 1, &[])],
        vec![f32_tensor("w", &[8, 1, 3, 3], &w)],
        17,
    )
}

/// The depthwise kernel pads small planes into scratch and reads large ones in place, a
/// choice by the plane's size that made the workspace of small values larger than the
/// bound's; with H and W at run time every plane reads in place, and each size gives the
/// specialized object's values.
#[test]
fn a_depthwise_convolution_takes_its_plane_at_run_time() {
    for s in [1usize, 2] {
        let d = scratch(&format!("run_time_dims_depthwise{s}"));
        let p = d.join("dw.onnx");
        save(&model_with_depthwise(s as i64), &p);
        let c = compile_bounded(&p, &[("H", 64), ("W", 64)]);
        // From 1: 1 × 1 runs a program of its own (the corner of the least values).
        assert_eq!(
            run_dims_of(&c),
            [("H", 1, 64), ("W", 1, 64)],
            "{}",
            c.header
        );
        let dynamic = executable(&c, &d, "dynamic");
        for (h, w) in [
            (1usize, 1usize),
            (3, 9),
            (28, 28),
            (30, 41),
            (64, 37),
            (64, 64),
        ] {
            let x: Vec<f32> = (0..8 * h * w)
                .map(|k| ((k * 13 % 23) as f32 - 11.0) / 5.0)
                .collect();
            let inputs = [write_input(&d, 1000 * h + w, &x)];
            let out = d.join(format!("dyn{h}x{w}"));
            let got = outputs_of(&dynamic, &inputs, &out, 1, &[h, w]);
            let got = got.unwrap_or_else(|| panic!("{h}x{w} does not run"));
            let want = specialized_files(&p, &d, &[("H", h), ("W", w)], &inputs, 1);
            let (oh, ow) = ((h - 1) / s + 1, (w - 1) / s + 1);
            assert_eq!(got[0].len(), 4 * 8 * oh * ow, "{h}x{w}, stride {s}");
            assert_eq!(got[0], want[0], "{h}x{w}, stride {s}");
        }
    }
}

/// A detector's raw head over a run-time height and width (YOLOv8 exported with dynamic
/// axes and no NMS): its stride-8, -16 and -32 maps (average pools here) flattened and
/// concatenated, so that in multiples of 32 the anchors' dim is `16hw + 4hw + hw`, a product
/// of the two dims.
fn model_with_anchor_head() -> onnxc_proto::ModelProto {
    let pool = |name: &str, x: &str| {
        let n = node("AveragePool", name, &[x], &[name]);
        with_ints(with_ints(n, "kernel_shape", &[2, 2]), "strides", &[2, 2])
    };
    let flat = |name: &str, x: &str| node("Reshape", name, &[x, "rows"], &[name]);
    model(
        vec![
            pool("p2", "x"),
            pool("p4", "p2"),
            pool("p8", "p4"),
            pool("p16", "p8"),
            pool("p32", "p16"),
            flat("f8", "p8"),
            flat("f16", "p16"),
            flat("f32", "p32"),
            with_int(
                node("Concat", "anchors", &["f8", "f16", "f32"], &["y"]),
                "axis",
                2,
            ),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(2), D::S("H"), D::S("W")],
        )],
        vec![value_info("y", 1, &[D::N(1), D::N(2), D::S("anchors")])],
        vec![int_tensor("rows", 7, &[3], &[1, 2, -1])],
        17,
    )
}

/// Its anchors' dim follows the product of the height and width (`RunDim`'s `prod`): the
/// model compiles with both at run time in multiples of 32, and each size's outputs are the
/// specialized object's, byte for byte.
#[test]
fn a_detectors_anchors_follow_the_product_of_its_height_and_width() {
    let d = scratch("run_time_dims_anchors");
    let p = d.join("anchors.onnx");
    save(&model_with_anchor_head(), &p);
    let c = compile_bounded(&p, &[("H", 256), ("W", 256)]);
    let dims: Vec<(i64, i64, i64)> = (c.program.run_dims.iter())
        .map(|r| (r.least, r.bound, r.multiple))
        .collect();
    assert_eq!(dims, [(1, 8, 32), (1, 8, 32)], "{}", c.header);
    assert!(
        c.header.contains("[1, 2, 21*(H/32)*(W/32)]"),
        "{}",
        c.header
    );
    let dynamic = executable(&c, &d, "dynamic");
    for (h, w) in [(32usize, 32usize), (64, 160), (256, 96), (256, 256)] {
        let x: Vec<f32> = (0..2 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let got = outputs_at(
            &dynamic,
            &input,
            &d.join(format!("dyn{h}x{w}")),
            1,
            1,
            &[h / 32, w / 32],
        );
        let want = specialized_plane(&p, &d, (h, w), &input, 1);
        assert_eq!(got, want, "{h}x{w}");
    }
}

/// `[1, 2, H, W]` quantized to int8 (`signed`) or uint8 and upsampled ×2 on the quantized
/// values, by a linear Resize and by a nearest one (half-pixel, as PyTorch's exports of an
/// FPN's upsampling; QOperator models leave them on 8-bit data), each dequantized.
fn model_with_quantized_upsampling(signed: bool) -> onnxc_proto::ModelProto {
    let up = |name: &str, mode: &str, y: &str| {
        with_str(
            with_str(
                node("Resize", name, &["q", "", "scales"], &[y]),
                "mode",
                mode,
            ),
            "coordinate_transformation_mode",
            "half_pixel",
        )
    };
    model(
        vec![
            node("QuantizeLinear", "quantize", &["x", "s", "z"], &["q"]),
            up("linear", "linear", "ql"),
            up("nearest", "nearest", "qn"),
            node("DequantizeLinear", "dq_linear", &["ql", "s", "z"], &["yl"]),
            node("DequantizeLinear", "dq_nearest", &["qn", "s", "z"], &["yn"]),
        ],
        vec![value_info(
            "x",
            1,
            &[D::N(1), D::N(2), D::S("H"), D::S("W")],
        )],
        vec![
            value_info("yl", 1, &[D::N(1), D::N(2), D::S("H2"), D::S("W2")]),
            value_info("yn", 1, &[D::N(1), D::N(2), D::S("H2"), D::S("W2")]),
        ],
        vec![
            f32_tensor("s", &[], &[0.05]),
            if signed {
                int_tensor("z", 3, &[], &[-3])
            } else {
                int_tensor("z", 2, &[], &[128])
            },
            f32_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        13,
    )
}

/// A Resize on 8-bit data over two run-time dims: the kernel computes its taps when it runs
/// (`onnxc_resize_8`; maps would fold tables whose lengths follow the dims, and the model
/// was refused). Each size's outputs are the specialized object's, byte for byte, also where
/// H = W (where the rows' and columns' tables were one constant).
#[test]
fn a_resize_of_quantized_values_takes_its_plane_at_run_time() {
    for signed in [false, true] {
        let d = scratch(&format!("run_time_dims_qresize{}", signed as u8));
        let p = d.join("qresize.onnx");
        save(&model_with_quantized_upsampling(signed), &p);
        let c = compile_bounded(&p, &[("H", 64), ("W", 64)]);
        assert_eq!(
            run_dims_of(&c),
            [("H", 1, 64), ("W", 1, 64)],
            "{}",
            c.header
        );
        let dynamic = executable(&c, &d, "dynamic");
        for (h, w) in [(1, 1), (3, 7), (16, 16), (29, 13), (64, 64)] {
            let x: Vec<f32> = (0..2 * h * w)
                .map(|k| ((k * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let (got, want) = at_plane(&p, &d, &dynamic, (h, w), &x, 2);
            assert_eq!(got, want, "{h}x{w} signed {signed}");
        }
    }
}
