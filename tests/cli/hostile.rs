//! Hostile models (#27): each is refused with exit code 1 and a message, or compiled, within
//! 20 s and 2 GiB of address space — never an abort, a stack overflow or a hang.

use super::stderr;
use onnxc_tests::model::{D, f32_tensor, model, node, save, save_tensor, value_info, with_int};
use onnxc_tests::{run_model, scratch};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// Compiles `m` under `ulimit -v` 2 GiB and returns the output, checking it took under 20 s
/// and ended by exiting (0 or 1), not by a signal.
fn compile_limited(dir: &Path, name: &str, m: &onnxc_proto::ModelProto) -> Output {
    let p = dir.join(format!("{name}.onnx"));
    save(m, &p);
    let t0 = Instant::now();
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(onnxc_tests::onnxc_bin())
        .arg(&p)
        .arg("-o")
        .arg(dir.join(format!("{name}.o")))
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{name}: {:?}\n{}",
        o.status,
        stderr(&o)
    );
    assert!(!stderr(&o).contains("panicked"), "{name}: {}", stderr(&o));
    assert!(took < Duration::from_secs(20), "{name}: {took:?}");
    o
}

fn refused(dir: &Path, name: &str, m: &onnxc_proto::ModelProto, wants: &[&str]) {
    let o = compile_limited(dir, name, m);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{name}: {e}");
    for w in wants {
        assert!(e.contains(w), "{name}: {e}");
    }
}

const HUGE: i64 = 1 << 40;

#[test]
fn a_huge_declared_axis_is_refused_before_anything_is_allocated() {
    let d = scratch("hostile-huge-axis");
    // SplitToSequence into one piece per element of an axis declared 2^40 long.
    let m = model(
        vec![
            with_int(
                node("SplitToSequence", "s2s", &["x"], &["s"]),
                "keepdims",
                0,
            ),
            node("SequenceAt", "at", &["s", "i"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(HUGE)]), value_info("i", 7, &[])],
        vec![value_info("y", 1, &[])],
        vec![],
        18,
    );
    refused(
        &d,
        "split",
        &m,
        &["node 's2s'", "1099511627776 pieces", "at most 4096"],
    );
    // Slice whose run-time starts are declared 2^40 long.
    let m = model(
        vec![node("Slice", "sl", &["x", "st", "en"], &["y"])],
        vec![
            value_info("x", 1, &[D::N(4)]),
            value_info("st", 7, &[D::N(HUGE)]),
            value_info("en", 7, &[D::N(HUGE)]),
        ],
        vec![value_info("y", 1, &[D::N(2)])],
        vec![],
        18,
    );
    refused(
        &d,
        "slice",
        &m,
        &["node 'sl' (Slice, opset 18)", "1099511627776 entries"],
    );
}

#[test]
fn a_sum_of_100000_inputs_compiles_in_seconds() {
    let d = scratch("hostile-sum");
    let inputs = vec!["x"; 100_000];
    let m = model(
        vec![node("Sum", "sum", &inputs, &["y"])],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![],
        18,
    );
    let o = compile_limited(&d, "sum", &m);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The value: every partial sum of these is exact in float32.
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[4], &[1.0, 0.5, -2.0, 0.25]), &x);
    let p = d.join("sum.onnx");
    let y = run_model(&[&p, &x], &d.join("out"))[0].to_f64s();
    assert_eq!(y, vec![100_000.0, 50_000.0, -200_000.0, 25_000.0]);
    // Mean across several maps of the fold divides once, at the end.
    let m = model(
        vec![node("Mean", "mean", &vec!["x"; 130], &["y"])],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![],
        18,
    );
    let p = d.join("mean.onnx");
    save(&m, &p);
    let y = run_model(&[&p, &x], &d.join("out"))[0].to_f64s();
    assert_eq!(y, vec![1.0, 0.5, -2.0, 0.25]);
}

#[test]
fn nodes_out_of_order_import_in_linear_time_and_cycles_are_errors() {
    let d = scratch("hostile-order");
    // A 20,000-node chain listed last node first (retrying pending nodes pass after pass
    // took 12 s; the import order is now a topological sort).
    let n = 20_000;
    let name = |k: usize| {
        if k == 0 {
            "x".to_string()
        } else if k == n {
            "y".to_string()
        } else {
            format!("t{k}")
        }
    };
    let nodes = (0..n)
        .rev()
        .map(|k| {
            node(
                "Relu",
                &format!("r{k}"),
                &[name(k).as_str()],
                &[name(k + 1).as_str()],
            )
        })
        .collect();
    let m = model(
        nodes,
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![],
        18,
    );
    let o = compile_limited(&d, "reversed", &m);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Two nodes reading each other's outputs, and one reading a name nothing defines.
    let m = model(
        vec![
            node("Relu", "a", &["x", "q"], &["p"]),
            node("Relu", "b", &["p"], &["q"]),
        ],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("q", 1, &[D::N(4)])],
        vec![],
        18,
    );
    refused(
        &d,
        "cycle",
        &m,
        &["node 'a' (Relu) reads [\"q\"]", "no node"],
    );
    let m = model(
        vec![node("Relu", "r", &["nowhere"], &["y"])],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![],
        18,
    );
    refused(
        &d,
        "undefined",
        &m,
        &["node 'r' (Relu) reads [\"nowhere\"]"],
    );
}

#[test]
fn a_convolution_over_nine_spatial_dims_is_refused_by_name() {
    let d = scratch("hostile-conv9");
    // The runtime's convolution geometry holds at most 8 spatial dims inline.
    let dims: Vec<D> = [1, 1].into_iter().chain([2; 9]).map(D::N).collect();
    let w_dims: Vec<i64> = [1, 1].into_iter().chain([1; 9]).collect();
    let m = model(
        vec![node("Conv", "c9", &["x", "w"], &["y"])],
        vec![value_info("x", 1, &dims)],
        vec![value_info("y", 1, &[])],
        vec![f32_tensor("w", &w_dims, &[1.0])],
        17,
    );
    refused(
        &d,
        "conv9",
        &m,
        &["node 'c9' (Conv, opset 17)", "9 spatial dims", "1 to 8"],
    );
}
