//! Dims taken at run time (`loops::dims`): one object, compiled with no flag from a model
//! whose sequence dim is symbolic, run at several sizes against the object specialized to
//! each (`--dim seq=N`, itself checked against onnxruntime by the suite).

use super::*;
use onnxc::driver::{self, Options};
use onnxc_tests::model::{int_tensor, with_int, with_ints, with_str};
use onnxc_tests::scratch;

/// Attention-like model over `[1, seq, 8]`: a product with constant weights to `[1, seq,
/// 128]`, a softmax over the sequence, a weighted sum over it, a transposed copy and a
/// scores matrix `[seq, seq]`.
fn model_with_seq() -> onnxc_proto::ModelProto {
    let w: Vec<f32> = (0..8 * 128)
        .map(|k| ((k * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    model(
        vec![
            node("MatMul", "proj", &["x", "w"], &["h"]),
            with_int(node("Softmax", "over_seq", &["h"], &["p"]), "axis", 1),
            node("Mul", "weigh", &["p", "h"], &["px"]),
            with_int(
                node("ReduceSum", "pool", &["px", "axes"], &["y"]),
                "keepdims",
                0,
            ),
            with_ints(
                node("Transpose", "flip", &["h"], &["z"]),
                "perm",
                &[0, 2, 1],
            ),
            node("MatMul", "scores", &["h", "z"], &["s"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::S("seq"), D::N(8)])],
        vec![
            value_info("y", 1, &[D::N(1), D::N(128)]),
            value_info("z", 1, &[D::N(1), D::N(128), D::S("seq")]),
            value_info("s", 1, &[D::N(1), D::S("seq"), D::S("seq")]),
        ],
        vec![
            f32_tensor("w", &[8, 128], &w),
            int_tensor("axes", 7, &[1], &[1]),
        ],
        13,
    )
}

/// Links `c`'s object into an executable with the driver's `main`.
fn executable(c: &driver::Compiled, dir: &Path, name: &str) -> PathBuf {
    let obj = dir.join(format!("{name}.o"));
    std::fs::write(&obj, &c.object).unwrap();
    let exe = dir.join(name);
    driver::link(&[obj], &exe).unwrap();
    exe
}

/// Each dim `c` takes at run time: its name, least value and bound.
fn run_dims_of(c: &driver::Compiled) -> Vec<(&str, i64, i64)> {
    (c.program.run_dims.iter())
        .map(|r| (r.name.as_str(), r.least, r.bound))
        .collect()
}

/// Runs `exe` on the raw input file with `threads` threads and returns the raw outputs.
fn outputs(exe: &Path, input: &Path, out: &Path, n: usize, threads: usize) -> Vec<Vec<u8>> {
    outputs_at(exe, input, out, n, threads, &[])
}

/// `outputs` with the run-time dims' values given (`--dims`; needed where the input file's
/// length does not give them alone).
fn outputs_at(
    exe: &Path,
    input: &Path,
    out: &Path,
    n: usize,
    threads: usize,
    dims: &[usize],
) -> Vec<Vec<u8>> {
    std::fs::create_dir_all(out).unwrap();
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(input)
        .arg("--out")
        .arg(out)
        .arg("--threads")
        .arg(threads.to_string());
    if !dims.is_empty() {
        let list: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        cmd.arg("--dims").arg(list.join(","));
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (0..n)
        .map(|k| std::fs::read(out.join(format!("output_{k}.bin"))).unwrap())
        .collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `p` compiled with its dim `symbol` taken at run time up to `bound`.
fn compile_dynamic(p: &Path, symbol: &str, bound: i64) -> driver::Compiled {
    let opts = Options {
        emit_main: true,
        dim_bounds: vec![(symbol.into(), bound)],
        ..Options::default()
    };
    driver::compile_file(p, "model", &opts, None).unwrap()
}

/// Writes `x` as raw little-endian floats to `dir/x{n}.bin`.
fn write_input(dir: &Path, n: usize, x: &[f32]) -> PathBuf {
    let input = dir.join(format!("x{n}.bin"));
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input, bytes).unwrap();
    input
}

/// The `n` outputs of `p` compiled with `symbol` fixed at `value`, run on `input`.
fn specialized(
    p: &Path,
    dir: &Path,
    symbol: &str,
    value: usize,
    input: &Path,
    n: usize,
) -> Vec<Vec<u8>> {
    let fixed = Options {
        emit_main: true,
        dims: vec![(symbol.into(), value as i64)],
        ..Options::default()
    };
    let s = driver::compile_file(p, "model", &fixed, None).unwrap();
    let exe = executable(&s, dir, &format!("fixed{value}"));
    outputs(&exe, input, &dir.join(format!("fix{value}")), n, 1)
}

/// The `n` outputs of `p` compiled with its dims `H` and `W` fixed at `h` and `w`, run on
/// `input`.
fn specialized_plane(
    p: &Path,
    dir: &Path,
    (h, w): (usize, usize),
    input: &Path,
    n: usize,
) -> Vec<Vec<u8>> {
    let fixed = Options {
        emit_main: true,
        dims: vec![("H".into(), h as i64), ("W".into(), w as i64)],
        ..Options::default()
    };
    let s = driver::compile_file(p, "model", &fixed, None).unwrap();
    let exe = executable(&s, dir, &format!("fixed{h}x{w}"));
    outputs(&exe, input, &dir.join(format!("fix{h}x{w}")), n, 1)
}

/// Runs `exe` on `input`, writing into `out`.
fn run(exe: &Path, input: &Path, out: &Path) -> std::process::Output {
    std::fs::create_dir_all(out).unwrap();
    Command::new(exe)
        .arg("run")
        .arg(input)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn one_object_runs_every_sequence_length() {
    let d = scratch("run_time_dims");
    let p = d.join("seq.onnx");
    save(&model_with_seq(), &p);
    let c = compile_dynamic(&p, "seq", 320);
    assert_eq!(c.program.run_dims.len(), 1, "seq is taken at run time");
    assert!(c.header.contains("seq"), "{}", c.header);
    // At 1 the lowering drops the loops of extent 1: that value has a program of its own,
    // the formulas serve the rest.
    assert_eq!(c.program.run_dims[0].least, 1, "the least value");
    let fixed: Vec<_> = c.program.fixed.iter().map(|f| f.at.clone()).collect();
    assert_eq!(fixed, [[Some(1)]], "values with programs of their own");
    let dynamic = executable(&c, &d, "dynamic");
    // 300: loops long enough to be split over threads at run time.
    for seq in [1usize, 2, 3, 5, 16, 27, 37, 63, 300, 320] {
        let x: Vec<f32> = (0..seq * 8)
            .map(|k| ((k * 31 % 17) as f32 - 8.0) / 5.0)
            .collect();
        let input = write_input(&d, seq, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{seq}")), 3, 1);
        let want = specialized(&p, &d, "seq", seq, &input, 3);
        // Bit-identical on any number of threads.
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{seq}t2")), 3, 2);
        assert_eq!(got, two, "seq {seq}: 2 threads");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "seq {seq}, output {k}: sizes");
            for (a, b) in floats(g).iter().zip(floats(w)) {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "seq {seq}, output {k}: {a} vs {b}"
                );
            }
        }
    }
    // Past the bound or empty: the run refuses the input.
    for seq in [0usize, 321] {
        let input = write_input(&d, seq, &vec![0.0; seq * 8]);
        let o = run(&dynamic, &input, &d.join(format!("dyn{seq}")));
        assert!(!o.status.success(), "seq {seq} runs");
    }
}

/// `[1, s]` sliced to its first 10 elements: `min(s, 10)`, which is 10 at every probe.
fn model_with_clamp() -> onnxc_proto::ModelProto {
    model(
        vec![node(
            "Slice",
            "first10",
            &["x", "zero", "ten", "one"],
            &["y"],
        )],
        vec![value_info("x", 1, &[D::N(1), D::S("s")])],
        vec![value_info("y", 1, &[D::N(1), D::N(10)])],
        vec![
            int_tensor("zero", 7, &[1], &[0]),
            int_tensor("ten", 7, &[1], &[10]),
            int_tensor("one", 7, &[1], &[1]),
        ],
        13,
    )
}

#[test]
fn a_slice_that_clamps_below_the_probes_sets_the_least_value() {
    let d = scratch("run_time_dims_clamp");
    let p = d.join("clamp.onnx");
    save(&model_with_clamp(), &p);
    let c = compile_dynamic(&p, "s", 64);
    // Below 10 the output would have s elements, not 10: those values are refused (10
    // itself lowers to another program, a whole copy).
    let least = c.program.run_dims[0].least;
    assert!((10..=11).contains(&least), "least {least}");
    let dynamic = executable(&c, &d, "dynamic");
    for s in [5usize, 9, least as usize, 40] {
        let x: Vec<f32> = (0..s).map(|k| k as f32).collect();
        let input = write_input(&d, s, &x);
        let o = run(&dynamic, &input, &d.join(format!("out{s}")));
        if (s as i64) < least {
            assert!(!o.status.success(), "s {s} runs");
        } else {
            assert!(o.status.success(), "s {s}: {}", stderr(&o));
            let y = std::fs::read(d.join(format!("out{s}/output_0.bin"))).unwrap();
            assert_eq!(floats(&y), (0..10).map(|k| k as f32).collect::<Vec<_>>());
        }
    }
}

/// Two 1-D convolutions of width 3 without padding over `[1, 2, w]`: valid from w = 5 on.
fn model_with_windows() -> onnxc_proto::ModelProto {
    let w1: Vec<f32> = (0..4 * 2 * 3).map(|k| (k % 5) as f32 / 4.0 - 0.5).collect();
    let w2: Vec<f32> = (0..3 * 4 * 3).map(|k| (k % 7) as f32 / 6.0 - 0.5).collect();
    model(
        vec![
            node("Conv", "c1", &["x", "w1"], &["h"]),
            node("Relu", "r", &["h"], &["hr"]),
            node("Conv", "c2", &["hr", "w2"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(2), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::N(3), D::S("w_out")])],
        vec![
            f32_tensor("w1", &[4, 2, 3], &w1),
            f32_tensor("w2", &[3, 4, 3], &w2),
        ],
        13,
    )
}

#[test]
fn values_below_the_models_least_are_refused() {
    let d = scratch("run_time_dims_least");
    let p = d.join("windows.onnx");
    save(&model_with_windows(), &p);
    let c = compile_dynamic(&p, "w", 64);
    assert_eq!(
        c.program.run_dims[0].least, 5,
        "two windows of 3 need w ≥ 5"
    );
    assert!(c.header.contains("w (5 to 64)"), "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for w in [5usize, 6, 23, 64] {
        let x: Vec<f32> = (0..2 * w)
            .map(|k| ((k * 13 % 11) as f32 - 5.0) / 3.0)
            .collect();
        let input = write_input(&d, w, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{w}")), 1, 1);
        let want = specialized(&p, &d, "w", w, &input, 1);
        assert_eq!(got[0].len(), 3 * (w - 4) * 4, "w {w}: output [1, 3, w - 4]");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "w {w}: {a} vs {b}");
        }
    }
    // Below 5 the model is invalid: the driver finds no value of w for the file, and given
    // one, NAME_run_shaped refuses it.
    for w in [1usize, 4] {
        let input = write_input(&d, w, &vec![0.0; 2 * w]);
        let o = run(&dynamic, &input, &d.join(format!("dyn{w}")));
        assert!(!o.status.success(), "w {w} runs");
        assert!(
            stderr(&o).contains("at no value of its run-time dim from 5 to 64"),
            "w {w}: {}",
            stderr(&o)
        );
    }
}

/// A 3-wide convolution of stride 2 (padding 1) and a 2-wide max pool of stride 2 over
/// `[1, 4, w]`: the output `[1, 8, (w + 1) / 4]` follows the dim by a step of it.
fn model_with_strides() -> onnxc_proto::ModelProto {
    let w: Vec<f32> = (0..8 * 4 * 3)
        .map(|k| ((k * 5 % 9) as f32 - 4.0) / 4.0)
        .collect();
    model(
        vec![
            with_ints(
                with_ints(node("Conv", "c", &["x", "w"], &["a"]), "strides", &[2]),
                "pads",
                &[1, 1],
            ),
            node("Relu", "r", &["a"], &["b"]),
            with_ints(
                with_ints(node("MaxPool", "p", &["b"], &["y"]), "kernel_shape", &[2]),
                "strides",
                &[2],
            ),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(4), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::N(8), D::S("w_out")])],
        vec![f32_tensor("w", &[8, 4, 3], &w)],
        13,
    )
}

#[test]
fn strided_windows_follow_a_step_of_the_dim() {
    let d = scratch("run_time_dims_strides");
    let p = d.join("strides.onnx");
    save(&model_with_strides(), &p);
    let c = compile_dynamic(&p, "w", 256);
    assert!(c.header.contains("[1, 8, (w+1)/4]"), "{}", c.header);
    let least = c.program.run_dims[0].least as usize;
    let dynamic = executable(&c, &d, "dynamic");
    for w in [least, least + 1, 50, 101, 255, 256] {
        let x: Vec<f32> = (0..4 * w)
            .map(|k| ((k * 7 % 13) as f32 - 6.0) / 4.0)
            .collect();
        let input = write_input(&d, w, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{w}")), 1, 1);
        let want = specialized(&p, &d, "w", w, &input, 1);
        assert_eq!(
            got[0].len(),
            8 * ((w + 1) / 4) * 4,
            "w {w}: [1, 8, (w + 1) / 4]"
        );
        assert_eq!(got, want, "w {w}");
    }
}

/// A text-line stem: `[1, 3, 32, w]` through a 3×3 convolution of stride 2, a 2×2 max pool
/// of stride 2 and a 3×3 convolution to `[1, 8, 8, (w + 1) / 4]`.
fn model_with_image_width() -> onnxc_proto::ModelProto {
    let w1: Vec<f32> = (0..8 * 3 * 9)
        .map(|k| ((k * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let w2: Vec<f32> = (0..8 * 8 * 9)
        .map(|k| ((k * 7 % 13) as f32 - 6.0) / 16.0)
        .collect();
    let pads = |n| with_ints(n, "pads", &[1, 1, 1, 1]);
    model(
        vec![
            pads(with_ints(
                node("Conv", "c1", &["x", "w1"], &["a"]),
                "strides",
                &[2, 2],
            )),
            node("Relu", "r", &["a"], &["b"]),
            with_ints(
                with_ints(
                    node("MaxPool", "p", &["b"], &["c"]),
                    "kernel_shape",
                    &[2, 2],
                ),
                "strides",
                &[2, 2],
            ),
            pads(node("Conv", "c2", &["c", "w2"], &["y"])),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(3), D::N(32), D::S("w")])],
        vec![value_info(
            "y",
            1,
            &[D::N(1), D::N(8), D::N(8), D::S("w_out")],
        )],
        vec![
            f32_tensor("w1", &[8, 3, 3, 3], &w1),
            f32_tensor("w2", &[8, 8, 3, 3], &w2),
        ],
        13,
    )
}

#[test]
fn an_image_width_runs_through_strided_convolutions() {
    let d = scratch("run_time_dims_width");
    let p = d.join("width.onnx");
    save(&model_with_image_width(), &p);
    let c = compile_dynamic(&p, "w", 256);
    assert!(c.header.contains("[1, 8, 8, (w+1)/4]"), "{}", c.header);
    let least = c.program.run_dims[0].least as usize;
    let dynamic = executable(&c, &d, "dynamic");
    for w in [least, 17, 28, 64, 101, 256] {
        let x: Vec<f32> = (0..3 * 32 * w)
            .map(|k| ((k * 7 % 19) as f32 - 9.0) / 9.0)
            .collect();
        let input = write_input(&d, w, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{w}")), 1, 1);
        // The specialized object may choose another layout (a blocked one for short rows
        // on AVX-512): the same values up to rounding.
        let want = specialized(&p, &d, "w", w, &input, 1);
        assert_eq!(got[0].len(), 8 * 8 * ((w + 1) / 4) * 4, "w {w}");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "w {w}: {a} vs {b}");
        }
    }
}

/// A 3×3 convolution of 32 to 64 channels over a text line `[1, 32, 4, w]`: its kernel's
/// path depends on the width (Winograd on long lines, other products on short ones).
fn model_with_wide_conv() -> onnxc_proto::ModelProto {
    let w: Vec<f32> = (0..64 * 32 * 9)
        .map(|k| ((k * 13 % 29) as f32 - 14.0) / 64.0)
        .collect();
    model(
        vec![with_ints(
            node("Conv", "c", &["x", "w"], &["y"]),
            "pads",
            &[1, 1, 1, 1],
        )],
        vec![value_info("x", 1, &[D::N(1), D::N(32), D::N(4), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::N(64), D::N(4), D::S("w")])],
        vec![f32_tensor("w", &[64, 32, 3, 3], &w)],
        13,
    )
}

#[test]
fn a_convolution_keeps_the_path_its_bound_chose_at_every_width() {
    let d = scratch("run_time_dims_conv_path");
    let p = d.join("conv.onnx");
    save(&model_with_wide_conv(), &p);
    // Lowered at each probe by its own width, the program's weights differed between the
    // probes and the model was refused; the bound's path now serves every width.
    // Below 13 columns a width of its own would not choose Winograd: every width from 1
    // takes the bound's.
    let c = compile_dynamic(&p, "w", 512);
    assert_eq!(c.program.run_dims[0].least, 1, "{}", c.header);
    assert!(c.program.fixed.is_empty(), "one program for every width");
    let dynamic = executable(&c, &d, "dynamic");
    for w in [1usize, 2, 5, 12, 13, 40, 200, 512] {
        let x: Vec<f32> = (0..32 * 4 * w)
            .map(|k| ((k * 11 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, w, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{w}")), 1, 1);
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{w}t2")), 1, 2);
        assert_eq!(got, two, "w {w}: 2 threads");
        // The specialized object takes the path its own width chooses: the same values up
        // to rounding (Winograd's transforms round differently).
        let want = specialized(&p, &d, "w", w, &input, 1);
        assert_eq!(got[0].len(), 64 * 4 * w * 4, "w {w}");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "w {w}: {a} vs {b}");
        }
    }
}

/// A bidirectional LSTM (hidden 16, with bias and peepholes) over `[S, 1, 8]`, its outputs
/// every step's h `[S, 2, 1, 16]` and the last ones `[2, 1, 16]`.
fn model_with_lstm() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 17) as f32 - 8.0) / 24.0).collect()
    };
    model(
        vec![with_int(
            with_str(
                node(
                    "LSTM",
                    "lstm",
                    &["x", "w", "r", "b", "", "", "", "p"],
                    &["y", "yh"],
                ),
                "direction",
                "bidirectional",
            ),
            "hidden_size",
            16,
        )],
        vec![value_info("x", 1, &[D::S("S"), D::N(1), D::N(8)])],
        vec![
            value_info("y", 1, &[D::S("S"), D::N(2), D::N(1), D::N(16)]),
            value_info("yh", 1, &[D::N(2), D::N(1), D::N(16)]),
        ],
        vec![
            f32_tensor("w", &[2, 64, 8], &v(2 * 64 * 8, 5)),
            f32_tensor("r", &[2, 64, 16], &v(2 * 64 * 16, 7)),
            f32_tensor("b", &[2, 128], &v(2 * 128, 3)),
            f32_tensor("p", &[2, 48], &v(2 * 48, 11)),
        ],
        14,
    )
}

#[test]
fn an_lstm_runs_over_a_sequence_taken_at_run_time() {
    let d = scratch("run_time_dims_lstm");
    let p = d.join("lstm.onnx");
    save(&model_with_lstm(), &p);
    // The runtime's recurrence takes the length as a parameter: one program for every S.
    let c = compile_dynamic(&p, "S", 256);
    assert_eq!(c.program.run_dims[0].least, 1, "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 2, 3, 17, 64, 200, 256] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 13 % 31) as f32 - 15.0) / 10.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{s}t2")), 2, 2);
        assert_eq!(got, two, "S {s}: 2 threads");
        let want = specialized(&p, &d, "S", s, &input, 2);
        assert_eq!(got[0].len(), s * 2 * 16 * 4, "S {s}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "S {s}, output {k}: the same program at S as the specialized one"
            );
        }
    }
    // Longer than the 4096 steps onnxc unrolls: the recurrence takes any length.
    let long = Options {
        dims: vec![("S".into(), 6000)],
        ..Options::default()
    };
    driver::compile_file(&p, "model", &long, None).unwrap();
}

#[test]
fn a_leading_sequence_dim_is_taken_at_run_time_with_no_flag() {
    // `[S, 1, 8]`, S leading as PyTorch exports a recurrence's input: no run-time batch
    // (the steps depend on each other), so S is taken at run time up to the default bound.
    let d = scratch("run_time_dims_leading_seq");
    let p = d.join("lstm.onnx");
    save(&model_with_lstm(), &p);
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    let dims = run_dims_of(&c);
    assert_eq!(dims, [("S", 1, driver::DEFAULT_DIM_BOUND)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 5, 300] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 11 % 29) as f32 - 14.0) / 10.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        assert_eq!(
            got,
            specialized(&p, &d, "S", s, &input, 2),
            "S {s}: the same program at S as the specialized one"
        );
    }
    // Past the bound: refused, nothing written.
    let input = write_input(&d, 513, &vec![0.5; 513 * 8]);
    let o = run(&dynamic, &input, &d.join("over"));
    assert!(!o.status.success(), "S 513 ran past the bound");
    // The same leading dim bound on the command line is taken as given.
    let bounded = compile_dynamic(&p, "S", 64);
    assert_eq!(bounded.program.run_dims[0].bound, 64);
}

/// onnxruntime's DynamicQuantizeLSTM as `quantize_dynamic` writes it, over `x [S, 1, 8]`:
/// int8 weights `W [1, 8, 64]` and `R [1, 16, 64]` (transposed) with a scale and zero point
/// each, hidden 16.
fn model_with_quantized_lstm() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<i64> { (0..n).map(|k| (k * m % 61) as i64 - 30).collect() };
    let mut lstm = node(
        "DynamicQuantizeLSTM",
        "qlstm",
        &["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"],
        &["y", "yh"],
    );
    lstm.domain = Some("com.microsoft".into());
    let b: Vec<f32> = (0..128)
        .map(|k| ((k * 7 % 13) as f32 - 6.0) / 20.0)
        .collect();
    onnxc_tests::model::importing(
        model(
            vec![with_int(lstm, "hidden_size", 16)],
            vec![value_info("x", 1, &[D::S("S"), D::N(1), D::N(8)])],
            vec![
                value_info("y", 1, &[D::S("S"), D::N(1), D::N(1), D::N(16)]),
                value_info("yh", 1, &[D::N(1), D::N(1), D::N(16)]),
            ],
            vec![
                int_tensor("w", 3, &[1, 8, 64], &v(8 * 64, 7)),
                int_tensor("r", 3, &[1, 16, 64], &v(16 * 64, 11)),
                f32_tensor("b", &[1, 128], &b),
                f32_tensor("ws", &[1], &[0.01]),
                int_tensor("wz", 3, &[1], &[0]),
                f32_tensor("rs", &[1], &[0.008]),
                int_tensor("rz", 3, &[1], &[1]),
            ],
            14,
        ),
        "com.microsoft",
        1,
    )
}

#[test]
fn a_dynamically_quantized_lstm_runs_over_a_sequence_taken_at_run_time() {
    // The recurrence kernel quantizes the state at every step (its input projection is the
    // integer product of the quantized input, whose rows are a call argument): one program
    // for every length, no longer unrolled.
    let d = scratch("run_time_dims_qlstm");
    let p = d.join("qlstm.onnx");
    save(&model_with_quantized_lstm(), &p);
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    let dims = run_dims_of(&c);
    assert_eq!(dims, [("S", 1, driver::DEFAULT_DIM_BOUND)], "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for s in [1usize, 2, 7, 40, 300] {
        let x: Vec<f32> = (0..s * 8)
            .map(|k| ((k * 13 % 31) as f32 - 15.0) / 9.0)
            .collect();
        let input = write_input(&d, s, &x);
        let got = outputs(&dynamic, &input, &d.join(format!("dyn{s}")), 2, 1);
        assert_eq!(
            got,
            specialized(&p, &d, "S", s, &input, 2),
            "S {s}: the specialized object's outputs"
        );
    }
}

/// A GRU as PyTorch exports one with dynamic axes: `x [S, B, 8]` and `h0 [1, B, 16]` to
/// `y [S, 1, B, 16]` and `yh [1, B, 16]`, both dims symbolic.
fn model_with_gru() -> onnxc_proto::ModelProto {
    let v = |n: usize, m: usize| -> Vec<f32> {
        (0..n).map(|k| ((k * m % 17) as f32 - 8.0) / 24.0).collect()
    };
    model(
        vec![with_int(
            with_int(
                node("GRU", "gru", &["x", "w", "r", "b", "", "h0"], &["y", "yh"]),
                "linear_before_reset",
                1,
            ),
            "hidden_size",
            16,
        )],
        vec![
            value_info("x", 1, &[D::S("S"), D::S("B"), D::N(8)]),
            value_info("h0", 1, &[D::N(1), D::S("B"), D::N(16)]),
        ],
        vec![
            value_info("y", 1, &[D::S("S"), D::N(1), D::S("B"), D::N(16)]),
            value_info("yh", 1, &[D::N(1), D::S("B"), D::N(16)]),
        ],
        vec![
            f32_tensor("w", &[1, 48, 8], &v(48 * 8, 5)),
            f32_tensor("r", &[1, 48, 16], &v(48 * 16, 7)),
            f32_tensor("b", &[1, 96], &v(96, 3)),
        ],
        14,
    )
}

/// Runs `exe` on the raw input files `inputs` with the run-time dims' values `dims`, and
/// returns its `n` raw outputs (None when the run fails).
fn outputs_of(
    exe: &Path,
    inputs: &[PathBuf],
    out: &Path,
    n: usize,
    dims: &[usize],
) -> Option<Vec<Vec<u8>>> {
    std::fs::create_dir_all(out).unwrap();
    let mut cmd = Command::new(exe);
    cmd.arg("run").args(inputs).arg("--out").arg(out);
    if !dims.is_empty() {
        let list: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        cmd.arg("--dims").arg(list.join(","));
    }
    let o = cmd.output().unwrap();
    o.status.success().then(|| {
        (0..n)
            .map(|k| std::fs::read(out.join(format!("output_{k}.bin"))).unwrap())
            .collect()
    })
}

/// The `n` outputs of `p` compiled with its dims fixed at `dims` (names and values), run on
/// the raw input files `inputs`.
fn specialized_files(
    p: &Path,
    dir: &Path,
    dims: &[(&str, usize)],
    inputs: &[PathBuf],
    n: usize,
) -> Vec<Vec<u8>> {
    let fixed = Options {
        emit_main: true,
        dims: (dims.iter()).map(|&(d, v)| (d.into(), v as i64)).collect(),
        ..Options::default()
    };
    let f = driver::compile_file(p, "model", &fixed, None).unwrap();
    let at: Vec<String> = dims.iter().map(|(_, v)| v.to_string()).collect();
    let exe = executable(&f, dir, &format!("fixed{}", at.join("x")));
    let out = dir.join(format!("fix{}", at.join("x")));
    outputs_of(&exe, inputs, &out, n, &[]).unwrap()
}

#[test]
fn a_recurrence_takes_its_batch_and_sequence_at_run_time_from_one() {
    // Two dims at run time: S (leading, no run-time batch: the steps depend on each other)
    // and B. Each takes every value from 1: the values below the formulas' (B 1, where the
    // batch's loops of extent 1 fall away) run programs of their own that take the other
    // dim at run time.
    let d = scratch("run_time_dims_gru");
    let p = d.join("gru.onnx");
    save(&model_with_gru(), &p);
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    let dims = run_dims_of(&c);
    let bound = driver::DEFAULT_DIM_BOUND;
    assert_eq!(dims, [("B", 1, bound), ("S", 1, bound)], "{}", c.header);
    assert!(!c.program.fixed.is_empty(), "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    for (b, s) in [
        (1usize, 1usize),
        (1, 2),
        (2, 1),
        (1, 40),
        (3, 5),
        (27, 1),
        (16, 30),
    ] {
        let x: Vec<f32> = (0..s * b * 8)
            .map(|k| ((k * 11 % 29) as f32 - 14.0) / 10.0)
            .collect();
        let h: Vec<f32> = (0..b * 16)
            .map(|k| ((k * 5 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let at = 1000 * b + s;
        let inputs = [write_input(&d, at, &x), write_input(&d, 1_000_000 + at, &h)];
        let out = d.join(format!("dyn{b}x{s}"));
        let got = outputs_of(&dynamic, &inputs, &out, 2, &[b, s]);
        let got = got.unwrap_or_else(|| panic!("B {b}, S {s} does not run"));
        let want = specialized_files(&p, &d, &[("B", b), ("S", s)], &inputs, 2);
        assert_eq!(got, want, "B {b}, S {s}: the specialized object's outputs");
    }
    // Past either bound: refused.
    let inputs = [
        write_input(&d, 2, &vec![0.5; (bound as usize + 1) * 8]),
        write_input(&d, 3, &[0.5; 16]),
    ];
    let out = d.join("over");
    assert!(outputs_of(&dynamic, &inputs, &out, 2, &[1, bound as usize + 1]).is_none());
}

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
    let opts = Options {
        emit_main: true,
        dim_bounds: vec![("B".into(), 16), ("S".into(), 64)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
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
    let opts = Options {
        emit_main: true,
        dim_bounds: vec![("H".into(), 320), ("W".into(), 320)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
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
        let opts = Options {
            emit_main: true,
            dim_bounds: vec![("H".into(), 160), ("W".into(), 160)],
            ..Options::default()
        };
        let c = driver::compile_file(&p, "model", &opts, None).unwrap();
        let dims: Vec<(&str, i64, i64, i64)> = (c.program.run_dims.iter())
            .map(|r| (r.name.as_str(), r.least, r.bound, r.multiple))
            .collect();
        let sizes: &[(usize, usize)] = if to_lateral {
            assert_eq!(dims, [("H", 28, 160, 1), ("W", 28, 160, 1)], "{}", c.header);
            &[(28, 28), (29, 31), (100, 57), (160, 160)]
        } else {
            // Counted in multiples of 4, from 2 (8 rows or columns).
            assert_eq!(dims, [("H", 2, 40, 4), ("W", 2, 40, 4)], "{}", c.header);
            assert!(
                c.header.contains("H (8 to 160, a multiple of 4)")
                    && c.header.contains("[1, 3, H, W]"),
                "{}",
                c.header
            );
            &[(8, 8), (8, 160), (12, 36), (100, 64), (160, 160)]
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
    let opts = Options {
        emit_main: true,
        dim_bounds: vec![("H".into(), 256), ("W".into(), 256)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    assert_eq!(c.program.run_dims.len(), 2, "{}", c.header);
    assert!(c.header.contains("at most [60, 4]"), "{}", c.header);
    let dynamic = executable(&c, &d, "dynamic");
    let mut kept = Vec::new();
    for (h, w) in [(28usize, 28usize), (32, 64), (100, 57), (256, 256)] {
        let x: Vec<f32> = (0..3 * h * w)
            .map(|k| ((k * 7 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let input = write_input(&d, h * 1000 + w, &x);
        let got = outputs_at(
            &dynamic,
            &input,
            &d.join(format!("dyn{h}x{w}")),
            2,
            1,
            &[h, w],
        );
        let want = specialized_plane(&p, &d, (h, w), &input, 2);
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
    let opts = Options {
        emit_main: true,
        dim_bounds: vec![("H".into(), 320), ("W".into(), 320)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
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
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    assert_eq!(run_dims_of(&c), [("n", 1, driver::DEFAULT_DIM_BOUND)]);
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 3, 37, 300] {
        let x: Vec<f32> = (0..n * 4).map(|k| (k % 7) as f32 - 3.0).collect();
        let input = write_input(&d, n, &x);
        let got = outputs(&exe, &input, &d.join(format!("out{n}")), 2, 1);
        let dims: Vec<i64> = (got[0].chunks_exact(8))
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
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
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    assert_eq!(run_dims_of(&c), [("n", 1, driver::DEFAULT_DIM_BOUND)]);
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 2, 37, 300, 512] {
        let x: Vec<f32> = (0..n * 3).map(|k| (k * 7 % 5) as f32 - 2.0).collect();
        let input = write_input(&d, n, &x);
        let out = d.join(format!("out{n}"));
        let got = outputs(&exe, &input, &out, 1, 1);
        let ints = |b: &[u8]| -> Vec<i64> {
            b.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let at: Vec<usize> = (0..n * 3).filter(|&k| x[k] > 0.0).collect();
        let dims = ints(&std::fs::read(out.join("output_0.dims")).unwrap());
        assert_eq!(dims, [2, at.len() as i64], "n {n}");
        let want: Vec<i64> = (at.iter().map(|&k| (k / 3) as i64))
            .chain(at.iter().map(|&k| (k % 3) as i64))
            .collect();
        assert_eq!(ints(&got[0]), want, "n {n}");
    }
}
