//! Dims taken at run time (`loops::dims`): one object, compiled with no flag from a model
//! whose sequence dim is symbolic, run at several sizes against the object specialized to
//! each (`--dim seq=N`, itself checked against onnxruntime by the suite).

use super::*;
use onnxc::driver::{self, Options};
use onnxc_tests::model::{int_tensor, with_int, with_ints, with_str, with_tensor};
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

/// Output 0 of `exe` on `input`, which holds `items` items of the run-time batch at the
/// run-time dim's value `dim`.
fn item_output(exe: &Path, input: &Path, out: &Path, items: usize, dim: usize) -> Vec<u8> {
    std::fs::create_dir_all(out).unwrap();
    let o = Command::new(exe)
        .arg("run")
        .arg(input)
        .args([
            "--items",
            &items.to_string(),
            "--dims",
            &dim.to_string(),
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{items} items at {dim}: {}", stderr(&o));
    std::fs::read(out.join("output_0.bin")).unwrap()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Raw little-endian int64s (an int64 output, an output's `.dims` file).
fn ints(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `p` compiled with no flag (its symbolic dims taken as the compiler decides), with the
/// driver's `main`.
fn compile_unflagged(p: &Path) -> driver::Compiled {
    let opts = Options {
        emit_main: true,
        ..Options::default()
    };
    driver::compile_file(p, "model", &opts, None).unwrap()
}

/// `p` compiled with its dim `symbol` taken at run time up to `bound`.
fn compile_dynamic(p: &Path, symbol: &str, bound: i64) -> driver::Compiled {
    compile_bounded(p, &[(symbol, bound)])
}

/// `p` compiled with each named dim of `bounds` taken at run time up to its bound (two
/// dims: an image's height and width), with the driver's `main`.
fn compile_bounded(p: &Path, bounds: &[(&str, i64)]) -> driver::Compiled {
    let opts = Options {
        emit_main: true,
        dim_bounds: bounds.iter().map(|&(n, b)| (n.to_string(), b)).collect(),
        ..Options::default()
    };
    driver::compile_file(p, "model", &opts, None).unwrap()
}

/// `x` at width `w` through the dynamic object (one thread) and through the object
/// specialized to `w`: the output of each, and the input file (for runs on more threads).
fn at_width(
    p: &Path,
    d: &Path,
    dynamic: &Path,
    w: usize,
    x: &[f32],
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, PathBuf) {
    let input = write_input(d, w, x);
    let got = outputs(dynamic, &input, &d.join(format!("dyn{w}")), 1, 1);
    let want = specialized(p, d, "w", w, &input, 1);
    (got, want, input)
}

/// `x` at `h × w` through the dynamic object (one thread, the dims given) and through the
/// object of `p` specialized to `h × w`: the `n` outputs of each.
fn at_plane(
    p: &Path,
    d: &Path,
    dynamic: &Path,
    (h, w): (usize, usize),
    x: &[f32],
    n: usize,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let input = write_input(d, h * 1000 + w, x);
    let out = d.join(format!("dyn{h}x{w}"));
    let got = outputs_at(dynamic, &input, &out, n, 1, &[h, w]);
    let want = specialized_plane(p, d, (h, w), &input, n);
    (got, want)
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
    run_inputs(exe, &[input], out)
}

/// Runs `exe` on the raw input files `inputs`, writing into `out`.
fn run_inputs(exe: &Path, inputs: &[&Path], out: &Path) -> std::process::Output {
    std::fs::create_dir_all(out).unwrap();
    Command::new(exe)
        .arg("run")
        .args(inputs)
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
        let (got, want, _) = at_width(&p, &d, &dynamic, w, &x);
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
        let (got, want, _) = at_width(&p, &d, &dynamic, w, &x);
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
        // The specialized object may choose another layout (a blocked one for short rows
        // on AVX-512): the same values up to rounding.
        let (got, want, _) = at_width(&p, &d, &dynamic, w, &x);
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
        let (got, want, input) = at_width(&p, &d, &dynamic, w, &x);
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{w}t2")), 1, 2);
        assert_eq!(got, two, "w {w}: 2 threads");
        // The specialized object takes the path its own width chooses: the same values up
        // to rounding (Winograd's transforms round differently).
        assert_eq!(got[0].len(), 64 * 4 * w * 4, "w {w}");
        for (a, b) in floats(&got[0]).iter().zip(floats(&want[0])) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "w {w}: {a} vs {b}");
        }
    }
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

mod pinned;
mod recurrent;
mod two_dims;
mod values;

/// A Resize whose scales are a run-time input, `x: [batch, 2, 4, 4]` to the declared `y:
/// [batch, 2, 8, 8]`: the declared output, its batch symbol taken at each probe's value,
/// gives the size the scales cannot, and the run checks the scales against it.
fn model_with_run_time_scales() -> onnxc_proto::ModelProto {
    model(
        vec![with_str(
            node("Resize", "up", &["x", "", "scales"], &["y"]),
            "mode",
            "nearest",
        )],
        vec![
            value_info("x", 1, &[D::S("batch"), D::N(2), D::N(4), D::N(4)]),
            value_info("scales", 1, &[D::N(4)]),
        ],
        vec![value_info(
            "y",
            1,
            &[D::S("batch"), D::N(2), D::N(8), D::N(8)],
        )],
        vec![],
        13,
    )
}

#[test]
fn a_declared_output_over_a_run_time_dim_sizes_a_resize_by_run_time_scales() {
    let d = scratch("run_time_scales");
    let p = d.join("resize.onnx");
    save(&model_with_run_time_scales(), &p);
    let c = compile_unflagged(&p);
    // The scales reach the batch axis too (a scale of it would change the rows), so the
    // batch is a dim taken at run time rather than an item loop.
    assert_eq!(run_dims_of(&c), [("batch", 1, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    let scales = |s: f32, name: &str| {
        let f = d.join(name);
        let b: Vec<u8> = [1.0f32, 1.0, s, s]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(&f, b).unwrap();
        f
    };
    let twice = scales(2.0, "twice.bin");
    for n in [1usize, 3, 5] {
        let x: Vec<f32> = (0..n * 32).map(|k| k as f32 * 0.5 - 3.0).collect();
        let input = write_input(&d, n, &x);
        let out = d.join(format!("out{n}"));
        let o = run_inputs(&exe, &[&input, &twice], &out);
        assert!(o.status.success(), "batch {n}: {}", stderr(&o));
        let y = floats(&std::fs::read(out.join("output_0.bin")).unwrap());
        // Nearest at scale 2 (asymmetric, round_prefer_floor): y[.., i, j] = x[.., i/2, j/2].
        let want: Vec<f32> = (0..n * 2 * 64)
            .map(|k| {
                let (plane, i, j) = (k / 64, k / 8 % 8, k % 8);
                x[plane * 16 + i / 2 * 4 + j / 2]
            })
            .collect();
        assert_eq!(y, want, "batch {n}");
    }
    // Scales that do not give the declared size fail the run, whatever the batch.
    let thrice = scales(3.0, "thrice.bin");
    let input = write_input(&d, 2, &[0.0; 64]);
    let o = run_inputs(&exe, &[&input, &thrice], &d.join("bad"));
    assert!(!o.status.success(), "scales of 3 give [2, 2, 12, 12]");
}

/// `ReduceSum(x: [batch, 3, 4], axes)` with the axes a run-time input and the output
/// declared `[batch, 4]`: the reduction's tables of the input's and the output's dims (and
/// the zeros its output starts from) follow the batch, read as formulas of it.
fn model_with_run_time_axes() -> onnxc_proto::ModelProto {
    model(
        vec![with_int(
            node("ReduceSum", "sum", &["x", "axes"], &["y"]),
            "keepdims",
            0,
        )],
        vec![
            value_info("x", 1, &[D::S("batch"), D::N(3), D::N(4)]),
            value_info("axes", 7, &[D::N(1)]),
        ],
        vec![value_info("y", 1, &[D::S("batch"), D::N(4)])],
        vec![],
        18,
    )
}

#[test]
fn tables_of_a_run_time_dim_are_read_as_formulas_of_it() {
    let d = scratch("run_time_axes");
    let p = d.join("sum.onnx");
    save(&model_with_run_time_axes(), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("batch", 1, 512)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    let axes = |a: i64, name: &str| {
        let f = d.join(name);
        std::fs::write(&f, a.to_le_bytes()).unwrap();
        f
    };
    let middle = axes(1, "middle.bin");
    for n in [1usize, 2, 7, 37, 300, 512] {
        let x: Vec<f32> = (0..n * 12).map(|k| (k % 29) as f32 - 14.0).collect();
        let input = write_input(&d, n, &x);
        let out = d.join(format!("out{n}"));
        let o = run_inputs(&exe, &[&input, &middle], &out);
        assert!(o.status.success(), "batch {n}: {}", stderr(&o));
        let y = floats(&std::fs::read(out.join("output_0.bin")).unwrap());
        let want: Vec<f32> = (0..n * 4)
            .map(|k| (0..3).map(|r| x[k / 4 * 12 + r * 4 + k % 4]).sum())
            .collect();
        assert_eq!(y, want, "batch {n}");
    }
    // Axes that do not give the declared [batch, 4] fail the run.
    let last = axes(2, "last.bin");
    let input = write_input(&d, 5, &[1.0; 60]);
    let o = run_inputs(&exe, &[&input, &last], &d.join("bad"));
    assert!(!o.status.success(), "axes [2] give [5, 3]");
}

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

/// `[1, 7, w]` transposed to `[1, w, 7]` under a sigmoid (a YOLO head's decode): the
/// 7-wide inner loop reads the input `w` elements apart, a stride the dim sizes.
fn model_with_transposed_sigmoid() -> onnxc_proto::ModelProto {
    model(
        vec![
            with_ints(node("Transpose", "t", &["x"], &["xt"]), "perm", &[0, 2, 1]),
            node("Sigmoid", "s", &["xt"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(7), D::S("w")])],
        vec![value_info("y", 1, &[D::N(1), D::S("w"), D::N(7)])],
        vec![],
        13,
    )
}

/// The inner loop is vectorized with its lanes a run-time stride apart (as the specialized
/// object's are a constant apart), so each width's outputs are the specialized object's,
/// byte for byte.
#[test]
fn a_read_strided_by_a_run_time_dim_runs_vector_code() {
    let d = scratch("run_time_stride");
    let p = d.join("stride.onnx");
    save(&model_with_transposed_sigmoid(), &p);
    let c = compile_dynamic(&p, "w", 1000);
    let dynamic = executable(&c, &d, "dynamic");
    for w in [1usize, 3, 37, 128, 200, 1000] {
        let x: Vec<f32> = (0..7 * w)
            .map(|k| ((k * 13 % 41) as f32 - 20.0) / 4.0)
            .collect();
        let (got, want, input) = at_width(&p, &d, &dynamic, w, &x);
        assert_eq!(got, want, "width {w}");
        let two = outputs(&dynamic, &input, &d.join(format!("dyn{w}t2")), 1, 2);
        assert_eq!(got, two, "width {w}: 2 threads");
        for (k, v) in floats(&got[0]).iter().enumerate() {
            let (i, j) = (k / 7, k % 7);
            let s = 1.0 / (1.0 + (-x[j * w + i]).exp());
            assert!((v - s).abs() <= 1e-6, "width {w}, [{i}, {j}]: {v} vs {s}");
        }
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

/// Class probabilities `[n, 2]` through a ZipMap to a sequence of maps keyed 3 and 7, as a
/// scikit-learn export ends (`x` `[2, n]` transposed to `[n, 2]` and scaled by 2 first).
fn model_with_zipmap() -> onnxc_proto::ModelProto {
    let m = model(
        vec![
            node("Transpose", "rows", &["x"], &["xt"]),
            node("Mul", "scale", &["xt", "two"], &["p"]),
            onnxc_proto::NodeProto {
                domain: Some("ai.onnx.ml".into()),
                ..with_ints(
                    node("ZipMap", "zip", &["p"], &["z"]),
                    "classlabels_int64s",
                    &[3, 7],
                )
            },
        ],
        vec![value_info("x", 1, &[D::N(2), D::S("n")])],
        vec![onnxc_tests::model::map_sequence_info("z", 7)],
        vec![f32_tensor("two", &[], &[2.0])],
        17,
    );
    onnxc_tests::model::importing(m, "ai.onnx.ml", 1)
}

/// A ZipMap output over a dim taken at run time (a classifier whose rows are not a run-time
/// batch: scikit-learn's QDA concatenates its classes' sums along the rows; here the rows
/// are a transposed input's columns): its keys are the same at every value, so it takes the
/// rows' count like any output.
#[test]
fn a_zipmap_output_follows_a_run_time_dim() {
    let d = scratch("run_time_dims_zipmap");
    let p = d.join("zipmap.onnx");
    save(&model_with_zipmap(), &p);
    let c = compile_dynamic(&p, "n", 64);
    assert_eq!(run_dims_of(&c), [("n", 1, 64)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for n in [1usize, 3, 40, 64] {
        let x: Vec<f32> = (0..n * 2).map(|k| k as f32 / 8.0).collect();
        let input = write_input(&d, n, &x);
        let got = outputs_at(&exe, &input, &d.join(format!("out{n}")), 1, 1, &[n]);
        let want: Vec<f32> = (0..n).flat_map(|i| [x[i] * 2.0, x[n + i] * 2.0]).collect();
        assert_eq!(floats(&got[0]), want, "n {n}");
    }
}

/// Output 0 of `exe` (one dim taken at run time, at `dim`) on `inputs` (name, floats),
/// written as raw files into `dir`.
fn raw_output(exe: &Path, dir: &Path, inputs: &[(&str, &[f32])], dims: &[usize]) -> Vec<f32> {
    std::fs::create_dir_all(dir).unwrap();
    let files: Vec<PathBuf> = inputs
        .iter()
        .map(|(name, v)| {
            let f = dir.join(format!("{name}.bin"));
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(&f, bytes).unwrap();
            f
        })
        .collect();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
    let o = Command::new(exe)
        .arg("run")
        .args(&files)
        .args(["--dims", &dims.join(","), "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    floats(&std::fs::read(out.join("output_0.bin")).unwrap())
}

/// A KV cache's shape, as exporters name its dims: the new keys `[b, seq]` appended to the
/// cached ones `[b, past]`, scaled by a mask declared `[b, 'past + seq']`.
fn model_with_cache() -> onnxc_proto::ModelProto {
    model_with_cache_named("past + seq")
}

/// `model_with_cache` with the mask's and output's length named `total`.
fn model_with_cache_named(total: &'static str) -> onnxc_proto::ModelProto {
    model(
        vec![
            with_int(
                node("Concat", "append", &["past_k", "k"], &["present"]),
                "axis",
                1,
            ),
            node("Mul", "masked", &["present", "mask"], &["y"]),
        ],
        vec![
            value_info("past_k", 1, &[D::S("b"), D::S("past")]),
            value_info("k", 1, &[D::S("b"), D::S("seq")]),
            value_info("mask", 1, &[D::S("b"), D::S(total)]),
        ],
        vec![value_info("y", 1, &[D::S("b"), D::S(total)])],
        vec![],
        17,
    )
}

/// A dim named as a sum of the inputs' other dims (`past + seq`) is that sum: fixing its
/// terms fixes it, with one term taken at run time it follows that term, and with both it
/// follows their sum.
#[test]
fn a_dim_named_as_a_sum_of_others_is_their_sum() {
    let d = scratch("run_time_dims_sum");
    let p = d.join("cache.onnx");
    save(&model_with_cache(), &p);
    let opts = Options {
        emit_main: true,
        dims: vec![("past".into(), 3), ("seq".into(), 2)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    let shapes: Vec<&[i64]> = c.program.inputs.iter().map(|i| &i.shape[1..]).collect();
    assert_eq!(shapes, [&[3][..], &[2], &[5]], "{}", c.header);
    // With seq fixed, past is taken at run time and the mask's dim follows it.
    let opts = Options {
        emit_main: true,
        dims: vec![("b".into(), 1), ("seq".into(), 1)],
        dim_bounds: vec![("past".into(), 64)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    // The output only appends to the cache, which may be empty (a decoder's first step).
    assert_eq!(run_dims_of(&c), [("past", 0, 64)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    for past in [0usize, 1, 5, 64] {
        let pk: Vec<f32> = (0..past).map(|v| v as f32).collect();
        let mask: Vec<f32> = (0..=past).map(|v| 0.5 * v as f32).collect();
        let inputs = [("past_k", &pk[..]), ("k", &[-1.0][..]), ("mask", &mask)];
        let got = raw_output(&exe, &d.join(format!("past{past}")), &inputs, &[past]);
        let want: Vec<f32> = pk
            .iter()
            .chain(&[-1.0])
            .zip(&mask)
            .map(|(a, m)| a * m)
            .collect();
        assert_eq!(got, want, "past {past}");
    }
    // With both taken at run time, the mask's dim and the output's are their sum.
    let opts = Options {
        emit_main: true,
        dims: vec![("b".into(), 1)],
        dim_bounds: vec![("past".into(), 32), ("seq".into(), 24)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    // The output carries each only added to the other: the first may be 0 (an empty cache).
    assert_eq!(
        run_dims_of(&c),
        [("past", 0, 32), ("seq", 1, 24)],
        "{}",
        c.header
    );
    assert!(
        c.header.contains("\"mask\", float32 [1, past+seq]"),
        "{}",
        c.header
    );
    let exe = executable(&c, &d, "both");
    for (past, seq) in [
        (1usize, 1usize),
        (5, 3),
        (1, 24),
        (32, 1),
        (32, 24),
        (0, 1),
        (0, 7),
    ] {
        let pk: Vec<f32> = (0..past).map(|v| v as f32).collect();
        let k: Vec<f32> = (0..seq).map(|v| -(v as f32)).collect();
        let mask: Vec<f32> = (0..past + seq).map(|v| 0.5 * v as f32).collect();
        let inputs = [("past_k", &pk[..]), ("k", &k), ("mask", &mask)];
        let dir = d.join(format!("both{past}_{seq}"));
        let got = raw_output(&exe, &dir, &inputs, &[past, seq]);
        let want: Vec<f32> = pk.iter().chain(&k).zip(&mask).map(|(a, m)| a * m).collect();
        assert_eq!(got, want, "past {past}, seq {seq}");
    }
}

/// A KV cache whose mask and output name their length as a symbol of its own (`total`, as
/// onnxruntime's GPT-2 export writes `total_seq_len`), which the model is valid at only as
/// `past + seq`: taken as that sum, it follows both dims at run time with no flag.
#[test]
fn a_symbol_the_model_takes_only_as_a_sum_is_that_sum() {
    let d = scratch("run_time_dims_total");
    let p = d.join("cache.onnx");
    save(&model_with_cache_named("total"), &p);
    let e = compiles(&p, &d.join("cli.o"), &[]);
    assert!(e.contains("dim 'total' is taken as 'past + seq'"), "{e}");
    // A bounded batch is the run-time batch's, not a third term of the sum.
    let e = compiles(&p, &d.join("bounded.o"), &["--dim", "b=..4"]);
    assert!(e.contains("dim 'total' is taken as 'past + seq'"), "{e}");
    let h = std::fs::read_to_string(d.join("bounded.h")).unwrap();
    assert!(h.contains("at most 4 items"), "{h}");
    let opts = Options {
        emit_main: true,
        dims: vec![("b".into(), 1)],
        dim_bounds: vec![("past".into(), 32), ("seq".into(), 24)],
        ..Options::default()
    };
    let c = driver::compile_file(&p, "model", &opts, None).unwrap();
    assert_eq!(
        run_dims_of(&c),
        [("past", 0, 32), ("seq", 1, 24)],
        "{}",
        c.header
    );
    let exe = executable(&c, &d, "total");
    for (past, seq) in [(1usize, 1usize), (5, 3), (32, 24), (0, 3)] {
        let pk: Vec<f32> = (0..past).map(|v| v as f32).collect();
        let k: Vec<f32> = (0..seq).map(|v| -(v as f32)).collect();
        let mask: Vec<f32> = (0..past + seq).map(|v| 0.5 * v as f32).collect();
        let inputs = [("past_k", &pk[..]), ("k", &k), ("mask", &mask)];
        let got = raw_output(
            &exe,
            &d.join(format!("at{past}_{seq}")),
            &inputs,
            &[past, seq],
        );
        let want: Vec<f32> = pk.iter().chain(&k).zip(&mask).map(|(a, m)| a * m).collect();
        assert_eq!(got, want, "past {past}, seq {seq}");
    }
}

/// A decoder step's positions: rows `past..past + seq` of a position table `[64, 16]`
/// (Gathered at `Range(past, past + seq)`, `past` from the cache's shape), added to the
/// `seq` new tokens.
fn model_with_positions(table: &[f32], seq: D) -> onnxc_proto::ModelProto {
    let konst = |name: &str, v: i64| {
        with_tensor(
            node("Constant", name, &[], &[name]),
            "value",
            int_tensor(name, 7, &[], &[v]),
        )
    };
    model(
        vec![
            node("Shape", "cache_shape", &["pk"], &["pk_shape"]),
            konst("one", 1),
            with_int(
                node("Gather", "past", &["pk_shape", "one"], &["past"]),
                "axis",
                0,
            ),
            node("Shape", "new_shape", &["q"], &["q_shape"]),
            with_int(
                node("Gather", "seq", &["q_shape", "one"], &["seq"]),
                "axis",
                0,
            ),
            node("Add", "total", &["past", "seq"], &["total"]),
            node("Range", "positions", &["past", "total", "one"], &["pos"]),
            node("Gather", "rows", &["wpe", "pos"], &["e"]),
            node("Add", "placed", &["q", "e"], &["y"]),
        ],
        vec![
            value_info("q", 1, &[D::N(1), seq.clone(), D::N(16)]),
            value_info("pk", 1, &[D::N(1), D::S("past"), D::N(16)]),
        ],
        vec![value_info("y", 1, &[D::N(1), seq, D::N(16)])],
        vec![f32_tensor("wpe", &[64, 16], table)],
        17,
    )
}

/// The rows a decoder step reads from its position table follow the cache's length taken
/// at run time: the Gather is not folded per length (which no formula gives) but reads the
/// table when the model runs, at indices that follow the dim.
#[test]
fn a_position_table_read_at_the_cache_length_follows_it() {
    let d = scratch("run_time_dims_cache_positions");
    let p = d.join("positions.onnx");
    let table: Vec<f32> = (0..64 * 16).map(|k| (k as f32 * 0.37).sin()).collect();
    save(&model_with_positions(&table, D::N(1)), &p);
    let c = compile_unflagged(&p);
    assert_eq!(run_dims_of(&c), [("past", 1, 63)], "{}", c.header);
    let exe = executable(&c, &d, "dynamic");
    let q: Vec<f32> = (0..16).map(|k| k as f32).collect();
    for past in [1usize, 2, 9, 63] {
        let cache = vec![0.5; past * 16];
        let inputs = [("q", &q[..]), ("pk", &cache[..])];
        let got = raw_output(&exe, &d.join(format!("past{past}")), &inputs, &[past]);
        let want: Vec<f32> = (0..16).map(|k| q[k] + table[past * 16 + k]).collect();
        assert_eq!(got, want, "past {past}");
    }
}

/// With the new tokens' count at run time too, the default bounds (512 each) would read
/// past the table: both are bounded together at the largest value the model is valid at
/// (32, since `past + seq` rows must fit in 64), and every pair of values up to it runs,
/// one new token (where the Gather folds per cache length unless kept) included.
#[test]
fn a_cache_and_new_tokens_both_at_run_time_are_bounded_together() {
    let d = scratch("run_time_dims_cache_and_tokens");
    let p = d.join("positions.onnx");
    let table: Vec<f32> = (0..64 * 16).map(|k| (k as f32 * 0.37).sin()).collect();
    save(&model_with_positions(&table, D::S("seq")), &p);
    let c = compile_unflagged(&p);
    assert_eq!(
        run_dims_of(&c),
        [("past", 1, 32), ("seq", 1, 32)],
        "{}",
        c.header
    );
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("cli.o"))
        .output()
        .unwrap();
    let warned = stderr(&o).contains("'past' and 'seq' are taken at run time up to 32");
    assert!(o.status.success() && warned, "{}", stderr(&o));
    let exe = executable(&c, &d, "both");
    for (past, seq) in [(1usize, 1usize), (9, 1), (32, 1), (5, 3), (1, 32), (32, 32)] {
        let q: Vec<f32> = (0..seq * 16).map(|k| k as f32).collect();
        let cache = vec![0.5; past * 16];
        let inputs = [("q", &q[..]), ("pk", &cache[..])];
        let dir = d.join(format!("at{past}_{seq}"));
        let got = raw_output(&exe, &dir, &inputs, &[past, seq]);
        let want: Vec<f32> = (0..seq * 16).map(|k| q[k] + table[past * 16 + k]).collect();
        assert_eq!(got, want, "past {past}, seq {seq}");
    }
}

/// `model_with_positions` with its table quantized as onnxruntime's `quantize_dynamic`
/// leaves an embedding: a uint8 table Gathered, then DequantizeLinear (scale 1/64, zero
/// point 128). The selection from the 8-bit table is kept for run time like the float
/// one's: folded per value, one new token's row followed the cache's length as a constant
/// no formula gives, and `--dim seq=1` (a decoding step) was refused.
#[test]
fn a_quantized_position_table_read_at_the_cache_length_follows_it() {
    let d = scratch("run_time_dims_quantized_positions");
    let p = d.join("positions_q.onnx");
    let codes: Vec<i64> = (0..64 * 16).map(|k| (k * 37 % 256) as i64).collect();
    let mut m = model_with_positions(&[0.0; 64 * 16], D::S("seq"));
    let g = m.graph.as_mut().unwrap();
    for n in g
        .node
        .iter_mut()
        .filter(|n| n.name.as_deref() == Some("rows"))
    {
        n.input[0] = "wpe_q".into();
        n.output[0] = "e_q".into();
    }
    g.node.push(node(
        "DequantizeLinear",
        "rows_dq",
        &["e_q", "wpe_scale", "wpe_zero"],
        &["e"],
    ));
    g.initializer = vec![
        int_tensor("wpe_q", 2, &[64, 16], &codes),
        f32_tensor("wpe_scale", &[], &[1.0 / 64.0]),
        int_tensor("wpe_zero", 2, &[], &[128]),
    ];
    save(&m, &p);
    let table: Vec<f32> = codes.iter().map(|&c| (c - 128) as f32 / 64.0).collect();
    for (flags, pairs) in [
        (
            &["--dim", "seq=1"][..],
            &[(1usize, 1usize), (9, 1), (63, 1)][..],
        ),
        (&[][..], &[(1, 1), (9, 1), (5, 3), (32, 32)][..]),
    ] {
        let opts = Options {
            emit_main: true,
            dims: (flags.chunks(2))
                .map(|f| {
                    let (name, v) = f[1].split_once('=').unwrap();
                    (name.to_string(), v.parse().unwrap())
                })
                .collect(),
            ..Options::default()
        };
        let c = driver::compile_file(&p, "model", &opts, None).unwrap();
        let exe = executable(&c, &d, &format!("q{}", flags.len()));
        let seq_at_run_time = flags.is_empty();
        for &(past, seq) in pairs {
            let q: Vec<f32> = (0..seq * 16).map(|k| k as f32).collect();
            let cache = vec![0.5; past * 16];
            let inputs = [("q", &q[..]), ("pk", &cache[..])];
            let dir = d.join(format!("q{}_{past}_{seq}", flags.len()));
            let dims: &[usize] = if seq_at_run_time {
                &[past, seq]
            } else {
                &[past]
            };
            let got = raw_output(&exe, &dir, &inputs, dims);
            let want: Vec<f32> = (0..seq * 16).map(|k| q[k] + table[past * 16 + k]).collect();
            assert_eq!(got, want, "{flags:?}: past {past}, seq {seq}");
        }
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

/// A bound on a leading batch dim (`--dim batch=..3`, as users bound a workspace) bounds
/// the run-time batch: the model still runs its items one by one in one item's workspace,
/// a bound below the least a run-time dim takes is no error, and a larger batch is
/// refused before anything runs. A model that mixes its items takes the dim at run time up
/// to that bound instead, with no warning (the bound is the user's).
#[test]
fn a_bounded_leading_dim_is_a_bounded_run_time_batch() {
    let d = scratch("run_time_dims_batch_bound");
    let p = d.join("rows.onnx");
    save(&batch_sum(1, &[D::S("batch"), D::N(1)]), &p);
    let unbounded = compile_unflagged(&p);
    let c = compile_dynamic(&p, "batch", 3);
    assert!(
        c.program.run_dims.is_empty(),
        "a run-time batch, no run-time dim"
    );
    assert_eq!(c.program.batch_bound, 3);
    assert_eq!(
        c.program.workspace_bytes(),
        unbounded.program.workspace_bytes(),
        "one item's workspace"
    );
    assert!(c.header.contains("at most 3 items"), "{}", c.header);
    assert_eq!(unbounded.program.batch_bound, 0);
    let exe = executable(&c, &d, "bounded");
    let run_items = |n: usize, x: &[f32]| {
        let input = write_input(&d, n, x);
        let out = d.join(format!("out{n}"));
        std::fs::create_dir_all(&out).unwrap();
        let o = Command::new(&exe)
            .arg("run")
            .arg(&input)
            .args(["--items", &n.to_string(), "--out"])
            .arg(&out)
            .output()
            .unwrap();
        (o, out)
    };
    for n in [1usize, 3] {
        let x: Vec<f32> = (0..3 * n).map(|k| k as f32).collect();
        let (o, out) = run_items(n, &x);
        assert!(o.status.success(), "{n} items: {}", stderr(&o));
        let got = floats(&std::fs::read(out.join("output_0.bin")).unwrap());
        let want: Vec<f32> = x.chunks(3).map(|r| r.iter().sum()).collect();
        assert_eq!(got, want, "{n} items");
    }
    let (o, _) = run_items(4, &[0.0; 12]);
    assert!(!o.status.success(), "4 items run past the bound of 3");
    assert!(stderr(&o).contains("shape"), "{}", stderr(&o));
    // Summing over the batch mixes the items: the dim is taken at run time up to its bound.
    let p = d.join("total.onnx");
    save(&batch_sum(0, &[D::N(1), D::N(3)]), &p);
    let c = compile_dynamic(&p, "batch", 32);
    assert_eq!(run_dims_of(&c), [("batch", 1, 32)], "{}", c.header);
    assert_eq!(c.program.batch_bound, 0);
}
