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

mod cache;
mod pinned;
mod quantized;
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
