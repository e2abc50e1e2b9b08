//! The `onnxc` command line: its commands, flags and files (`commands`), the errors that
//! name what is wrong with a model (`model_errors`), and the inputs a run refuses or
//! survives (`run_errors`). Exit code 0 on success, 1 on error, never a panic. What the
//! compiler makes of a model is checked elsewhere: its stages' dumps in tests/filetests,
//! the values of optimized code in tests/numerics.rs.

mod commands;
mod contrib_errors;
mod hostile;
mod ml_errors;
mod model_errors;
mod run_errors;
mod run_time_dims;
mod sequences;

use onnxc_tests::model::{D, f32_tensor, model, node, save, value_info, with_ints};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The onnxc command under the hardening limits (#27): every CLI test, hostile or not, runs
/// it in 2 GiB of address space.
fn onnxc() -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(onnxc_tests::onnxc_bin());
    c
}

/// `x` `[batch, 3]` float32 summed over `axis` into `y`, declared `y_dims` (ReduceSum,
/// opset 11): summing each row (axis 1) computes every item on its own, summing over the
/// batch (axis 0) mixes them.
fn batch_sum(axis: i64, y_dims: &[D]) -> onnxc_proto::ModelProto {
    model(
        vec![with_ints(
            node("ReduceSum", "sum", &["x"], &["y"]),
            "axes",
            &[axis],
        )],
        vec![value_info("x", 1, &[D::S("batch"), D::N(3)])],
        vec![value_info("y", 1, y_dims)],
        vec![],
        11,
    )
}

/// The limits every error case must end within: 2 GiB of address space, 20 s.
const ADDRESS_SPACE_KIB: u64 = 2 << 20;
const SECONDS: u64 = 20;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compiles `model` to `out` with the CLI (`args` after), checks that it succeeds and
/// returns its stderr: the warnings.
fn compiles(model: &Path, out: &Path, args: &[&str]) -> String {
    let o = onnxc()
        .arg(model)
        .arg("-o")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "{}: {e}", model.display());
    e
}

/// Runs and checks the exit code is 1 with an `onnxc: error:` message and no panic,
/// within `SECONDS`.
fn fails(cmd: &mut Command) -> String {
    let t0 = std::time::Instant::now();
    let o = cmd.output().unwrap();
    let took = t0.elapsed();
    let e = stderr(&o);
    assert!(took.as_secs() < SECONDS, "took {took:?}; stderr:\n{e}");
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1, got {:?}; stderr:\n{e}",
        o.status
    );
    assert!(e.contains("onnxc: error:"), "stderr: {e}");
    assert!(!e.contains("panicked"), "panic: {e}");
    e
}

/// Saves `m` as DIR/NAME.onnx, compiles it, expects an error (see `fails`) containing every
/// string of `wants`, and returns the message.
fn compile_error(dir: &Path, name: &str, m: &onnxc_proto::ModelProto, wants: &[&str]) -> String {
    let p = dir.join(format!("{name}.onnx"));
    save(m, &p);
    let e = fails(onnxc().arg(&p).arg("-o").arg(dir.join(format!("{name}.o"))));
    for w in wants {
        assert!(e.contains(w), "{name}: {e}");
    }
    e
}

/// Runs `onnxc run MODEL INPUTS… --output-dir OUT`, expects it to fail (see `fails`) and
/// returns the message.
fn run_fails(model: &Path, inputs: &[&Path], out: &Path) -> String {
    let mut cmd = onnxc();
    cmd.arg("run")
        .arg(model)
        .args(inputs)
        .arg("--output-dir")
        .arg(out);
    fails(&mut cmd)
}

/// y = relu(x + b) with x: [1, 4].
fn small_model(dir: &Path) -> PathBuf {
    let m = model(
        vec![
            node("Add", "add", &["x", "b"], &["s"]),
            node("Relu", "relu", &["s"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(1), D::N(4)])],
        vec![value_info("y", 1, &[D::N(1), D::N(4)])],
        vec![f32_tensor("b", &[4], &[0.5, -1.0, 2.0, -3.0])],
        17,
    );
    let p = dir.join("small.onnx");
    save(&m, &p);
    p
}
