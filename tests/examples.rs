//! The C and Rust examples build and run (the C one's threaded calls also under helgrind),
//! and several models link into one program.

use onnxc_tests::{onnxc_bin, root};
use std::process::Command;

fn check(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// onnxruntime's top class and probability for tiny_cnn on the arange input (see make_tiny_cnn.py).
const TOP1: &str = "class 4  p=0.134210";

#[test]
fn c_example_builds_and_prints_top5() {
    let build = std::env::temp_dir().join(format!("onnxc-c-example-{}", std::process::id()));
    let out = check(
        Command::new("make")
            .current_dir(root().join("examples/c"))
            .arg("run")
            .arg(format!("ONNXC={}", onnxc_bin().display()))
            .arg(format!("BUILD={}", build.display())),
    );
    assert!(out.contains("top-5:"), "{out}");
    assert!(out.contains(TOP1), "{out}");
    // The threaded call on the runtime's pool and three application threads sharing it give
    // the single-thread call's bits.
    assert!(out.contains("2 threads: bit-identical"), "{out}");
    assert!(
        out.contains("3 concurrent callers on one pool: bit-identical"),
        "{out}"
    );
    // The same program under valgrind's race detector: no data race in the pool, the
    // kernels' splits or the concurrent calls.
    let o = Command::new("valgrind")
        .args(["--tool=helgrind", "--error-exitcode=99"])
        .arg(build.join("classify"))
        .output()
        .expect("valgrind (helgrind) runs the C example");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("ERROR SUMMARY: 0 errors"),
        "helgrind reports races in the C example:\n{err}"
    );
    let _ = std::fs::remove_dir_all(build);
}

#[test]
fn c_batch_example_runs_two_batch_sizes_from_one_object() {
    let build = std::env::temp_dir().join(format!("onnxc-c-batch-{}", std::process::id()));
    check(
        Command::new("make")
            .current_dir(root().join("examples/c"))
            .arg("batch")
            .arg(format!("ONNXC={}", onnxc_bin().display()))
            .arg(format!("BUILD={}", build.display())),
    );
    // The program checks each case itself and exits nonzero on any difference.
    let out = check(&mut Command::new(build.join("batch")));
    assert!(
        out.contains("input 'image': dim 0 is a run-time batch"),
        "{out}"
    );
    for n in [1, 4] {
        let line = format!("batch of {n}: output [{n}, 10], each item bit-identical");
        assert!(out.contains(&line), "{out}");
    }
    assert!(out.contains("needs [4, 10]"), "{out}");
    // Under memcheck: no read or write outside the caller's buffers, whatever the dims.
    let o = Command::new("valgrind")
        .args(["--error-exitcode=99", "--leak-check=no"])
        .arg(build.join("batch"))
        .output()
        .expect("valgrind runs the batch example");
    assert!(
        o.status.success(),
        "memcheck reports errors in the batch example:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(build);
}

#[test]
fn c_textline_example_runs_two_widths_from_one_object() {
    let build = std::env::temp_dir().join(format!("onnxc-c-textline-{}", std::process::id()));
    check(
        Command::new("make")
            .current_dir(root().join("examples/c"))
            .arg("textline")
            .arg(format!("ONNXC={}", onnxc_bin().display()))
            .arg(format!("BUILD={}", build.display())),
    );
    // The program checks the dims and each step's probabilities itself; the checksums are
    // onnxruntime's for the two lines (`make_tiny_textline.py` prints them).
    let out = check(&mut Command::new(build.join("textline")));
    assert!(out.contains("dim 'w' taken at run time: 4 to 256"), "{out}");
    for (width, steps, want) in [(40, 10, 335.5423), (96, 24, 1848.7350)] {
        let head = format!("width {width}: output [{steps}, 1, 11], checksum ");
        let got: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix(&head))
            .unwrap_or_else(|| panic!("no line '{head}…' in:\n{out}"))
            .parse()
            .unwrap();
        assert!(
            (got - want).abs() <= 1e-3,
            "width {width}: checksum {got}, onnxruntime {want}"
        );
    }
    assert!(
        out.contains("width 96 into room for 10 steps: ONNXC_ERR_CAPACITY, needs [24, 1, 11]"),
        "{out}"
    );
    assert!(out.contains("width 260: ONNXC_ERR_SHAPE"), "{out}");
    // Under memcheck: no read or write outside the caller's buffers at either width.
    let o = Command::new("valgrind")
        .args(["--error-exitcode=99", "--leak-check=no"])
        .arg(build.join("textline"))
        .output()
        .expect("valgrind runs the textline example");
    assert!(
        o.status.success(),
        "memcheck reports errors in the textline example:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(build);
}

#[test]
fn c_detect_example_returns_the_rows_nms_keeps() {
    let build = std::env::temp_dir().join(format!("onnxc-c-detect-{}", std::process::id()));
    check(
        Command::new("make")
            .current_dir(root().join("examples/c"))
            .arg("detect")
            .arg(format!("ONNXC={}", onnxc_bin().display()))
            .arg(format!("BUILD={}", build.display())),
    );
    // The program checks each detection itself and exits nonzero on any error; the counts
    // are onnxruntime's for the two images (20 and 36).
    let out = check(&mut Command::new(build.join("detect")));
    for line in [
        "output 'boxes': at most 60 rows, as many as the data selects",
        "tiny_detector_run: the model's output dims depend on the data",
        "image a: room for 8 detections, the model found 20: ONNXC_ERR_CAPACITY",
        "image a: 20 detections",
        "image b: 36 detections",
        "class 2, score 0.746, box center (2.3, 31.7) size 2.5 x 12.2",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
    // Under memcheck: nothing read or written outside the buffers, whatever the rows found.
    let o = Command::new("valgrind")
        .args(["--error-exitcode=99", "--leak-check=full"])
        .arg(build.join("detect"))
        .output()
        .expect("valgrind runs the detect example");
    assert!(
        o.status.success(),
        "memcheck reports errors in the detect example:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(build);
}

#[test]
fn rust_example_builds_and_prints_top5() {
    let target = std::env::temp_dir().join(format!("onnxc-rust-example-{}", std::process::id()));
    let out = check(
        Command::new(env!("CARGO"))
            .current_dir(root().join("examples/rust"))
            .args(["run", "--release", "--quiet"])
            .env("CARGO_TARGET_DIR", &target),
    );
    assert!(out.contains(TOP1), "{out}");
    assert!(out.contains("2 threads: bit-identical"), "{out}");
    for n in [1, 3] {
        let line = format!("batch of {n}: each item bit-identical to its one-image run");
        assert!(out.contains(&line), "{out}");
    }
    // The detector's rows, as many as onnxruntime finds (the C example's images).
    assert!(out.contains("image a: 20 detections"), "{out}");
    assert!(out.contains("image b: 36 detections"), "{out}");
    let _ = std::fs::remove_dir_all(target);
}

#[test]
fn two_models_link_into_one_program() {
    let d = std::env::temp_dir().join(format!("onnxc-two-models-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let model = root().join("examples/models/tiny_cnn.onnx");
    for name in ["first", "second"] {
        check(
            Command::new(onnxc_bin())
                .arg(&model)
                .arg("-o")
                .arg(d.join(format!("{name}.o"))),
        );
    }
    let main = d.join("main.c");
    std::fs::write(
        &main,
        r#"#include <stdio.h>
#include "first.h"
#include "second.h"
int main(void) {
    static float img[FIRST_INPUT_0_SIZE], p1[FIRST_OUTPUT_0_SIZE], p2[SECOND_OUTPUT_0_SIZE];
    for (unsigned i = 0; i < FIRST_INPUT_0_SIZE; i++) img[i] = (float)i / FIRST_INPUT_0_SIZE;
    const void *in[] = {img};
    void *o1[] = {p1}, *o2[] = {p2};
    if (first_run(in, o1, NULL) || second_run(in, o2, NULL)) return 1;
    for (unsigned i = 0; i < FIRST_OUTPUT_0_SIZE; i++) if (p1[i] != p2[i]) return 2;
    printf("%s and %s agree: p[4]=%.6f\n", first_info()->name, second_info()->name, p1[4]);
    return 0;
}
"#,
    )
    .unwrap();
    let lib = check(Command::new(onnxc_bin()).arg("--print-runtime-lib"));
    let exe = d.join("both");
    check(
        Command::new("cc")
            .arg(format!("-I{}", d.display()))
            .arg(&main)
            .arg(d.join("first.o"))
            .arg(d.join("second.o"))
            .arg(lib.trim())
            .args(["-lm", "-lpthread", "-ldl", "-o"])
            .arg(&exe),
    );
    let out = check(&mut Command::new(&exe));
    assert!(
        out.contains("first and second agree: p[4]=0.134210"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn cmake_example_builds_with_onnxc_add_model() {
    // CMake from the project's venv (tests/conformance/requirements.txt pins it).
    let cmake = root().join(".cache/venv/bin/cmake");
    assert!(
        cmake.is_file(),
        "{} missing: run `make venv`",
        cmake.display()
    );
    let build = std::env::temp_dir().join(format!("onnxc-cmake-example-{}", std::process::id()));
    check(
        Command::new(&cmake)
            .arg("-S")
            .arg(root().join("examples/cmake"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DONNXC_EXECUTABLE={}", onnxc_bin().display())),
    );
    check(Command::new(&cmake).arg("--build").arg(&build));
    let out = check(&mut Command::new(build.join("classify")));
    assert!(out.contains(TOP1), "{out}");
    assert!(
        out.contains("3 concurrent callers on one pool: bit-identical"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(build);
}

#[test]
fn link_flags_and_pkg_config_link_the_c_example() {
    let d = std::env::temp_dir().join(format!("onnxc-link-flags-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    check(
        Command::new(onnxc_bin())
            .arg(root().join("examples/models/tiny_cnn.onnx"))
            .arg("-o")
            .arg(d.join("tiny_cnn.o")),
    );
    let flags = check(Command::new(onnxc_bin()).arg("--print-link-flags"));
    // The pkg-config file's Libs, with its libdir substituted.
    let pc = check(Command::new(onnxc_bin()).arg("--print-pkg-config"));
    let libdir = pc
        .lines()
        .find_map(|l| l.strip_prefix("libdir="))
        .expect("a libdir line");
    let libs = pc
        .lines()
        .find_map(|l| l.strip_prefix("Libs: "))
        .expect("a Libs line")
        .replace("${libdir}", libdir);
    assert!(pc.contains("Name: onnxc-runtime"), "{pc}");
    for (k, link) in [flags.trim(), libs.trim()].into_iter().enumerate() {
        let exe = d.join(format!("classify{k}"));
        check(
            Command::new("cc")
                .arg("-O2")
                .arg(format!("-I{}", d.display()))
                .arg(root().join("examples/c/main.c"))
                .arg(d.join("tiny_cnn.o"))
                .args(link.split_whitespace())
                .arg("-o")
                .arg(&exe),
        );
        let out = check(&mut Command::new(&exe));
        assert!(out.contains(TOP1), "{link}: {out}");
        // The footprint (#25): the code linked with the runtime, kept from growing. Today
        // 0.87 MB (2.2 MB without --gc-sections), a third of it std's panic, formatting and
        // backtrace machinery; docs/performance.md has the breakdown.
        let sizes = check(Command::new("size").arg("-A").arg(&exe));
        let text: u64 = sizes
            .lines()
            .find_map(|l| l.strip_prefix(".text"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("a .text line");
        assert!(
            text < 1 << 20,
            "{link}: .text is {text} bytes, over the 1 MiB budget"
        );
    }
    let _ = std::fs::remove_dir_all(d);
}
