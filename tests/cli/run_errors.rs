//! Inputs a run refuses (wrong shape or type), fails on with an error code (positions
//! outside a cache), or survives without reading out of bounds (hostile sampling grids).

use super::{fails, onnxc, run_fails, small_model};
use onnxc_tests::model::{
    D, f32_tensor, int_tensor, model, node, save, save_tensor, str_tensor, value_info, with_int,
    with_ints,
};
use onnxc_tests::{run_model, scratch};

#[test]
fn run_rejects_inputs_of_the_wrong_shape_or_type() {
    let d = scratch("badinput");
    let m = small_model(&d);
    let x = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 5], &[0.0; 5]), &x);
    let e = fails(
        onnxc()
            .arg("run")
            .arg(&m)
            .arg(&x)
            .arg("--output-dir")
            .arg(d.join("o")),
    );
    assert!(
        e.contains("has shape [1, 5] but the model expects [1, 4]"),
        "{e}"
    );
    let mut t = f32_tensor("x", &[1, 4], &[0.0; 4]);
    t.data_type = Some(11);
    t.raw_data = Some(vec![0; 32]);
    save_tensor(&t, &x);
    let e = fails(
        onnxc()
            .arg("run")
            .arg(&m)
            .arg(&x)
            .arg("--output-dir")
            .arg(d.join("o")),
    );
    assert!(
        e.contains("is float64 but the model expects float32"),
        "{e}"
    );
    let e = fails(
        onnxc()
            .arg("run")
            .arg(&m)
            .arg("--output-dir")
            .arg(d.join("o")),
    );
    assert!(e.contains("no data given for input 'x'"), "{e}");
}

/// GridSample reads input elements at positions the grid holds: NaN, ±∞ and huge positions
/// must never read out of bounds (the run succeeds; reflection of ±∞ gives NaN, as in the
/// reference, and zeros padding 0).
#[test]
fn grid_sample_survives_hostile_grids() {
    let d = scratch("grid");
    let xin = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[1, 1, 3, 4], &[1.0; 12]), &xin);
    let gin = d.join("g.pb");
    let g = [
        f32::NAN,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        0.5,
        f32::NAN,
    ];
    save_tensor(&f32_tensor("g", &[1, 2, 2, 2], &g), &gin);
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            let mut n = node("GridSample", "gs", &["x", "g"], &["y"]);
            for (k, v) in [("mode", mode), ("padding_mode", padding)] {
                n.attribute.push(onnxc_proto::AttributeProto {
                    name: Some(k.into()),
                    r#type: Some(3),
                    s: Some(v.as_bytes().to_vec()),
                    ..Default::default()
                });
            }
            let m = model(
                vec![n],
                vec![
                    value_info("x", 1, &[D::N(1), D::N(1), D::N(3), D::N(4)]),
                    value_info("g", 1, &[D::N(1), D::N(2), D::N(2), D::N(2)]),
                ],
                vec![value_info("y", 1, &[D::N(1), D::N(1), D::N(2), D::N(2)])],
                vec![],
                20,
            );
            let p = d.join(format!("{mode}_{padding}.onnx"));
            save(&m, &p);
            let out = run_model(
                &[p.as_os_str(), xin.as_os_str(), gin.as_os_str()],
                &d.join(format!("{mode}_{padding}")),
            );
            // The one finite in-range position (0.5, 1e30 → border/reflection or zero).
            let y = out[0].to_f64s();
            assert_eq!(y.len(), 4, "{mode} {padding}");
            assert!(
                y.iter().all(|v| v.is_nan() || v.abs() <= 2.0),
                "{mode} {padding}: {y:?}"
            );
        }
    }
}

/// RotaryEmbedding reads cache rows at the positions position_ids holds: a position outside
/// the cache fails the run with ONNXC_ERR_INDEX instead of reading past it.
#[test]
fn rotary_positions_outside_the_cache_fail_the_run() {
    let d = scratch("rope");
    let m = model(
        vec![node(
            "RotaryEmbedding",
            "rope",
            &["x", "cos", "sin", "pos"],
            &["y"],
        )],
        vec![
            value_info("x", 1, &[D::N(1), D::N(1), D::N(2), D::N(4)]),
            value_info("pos", 7, &[D::N(1), D::N(2)]),
        ],
        vec![value_info("y", 1, &[D::N(1), D::N(1), D::N(2), D::N(4)])],
        vec![
            f32_tensor("cos", &[3, 2], &[1.0; 6]),
            f32_tensor("sin", &[3, 2], &[0.0; 6]),
        ],
        23,
    );
    let p = d.join("rope.onnx");
    save(&m, &p);
    let xin = d.join("x.pb");
    save_tensor(
        &f32_tensor(
            "x",
            &[1, 1, 2, 4],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        ),
        &xin,
    );
    let pin = d.join("pos.pb");
    save_tensor(&int_tensor("pos", 7, &[1, 2], &[0, 2]), &pin);
    // cos 1, sin 0: the identity rotation.
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), pin.as_os_str()],
        &d.join("ok"),
    );
    assert_eq!(out[0].to_f64s(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    save_tensor(&int_tensor("pos", 7, &[1, 2], &[0, 3]), &pin);
    let e = run_fails(&p, &[&xin, &pin], &d.join("bad"));
    assert!(e.contains("index"), "{e}");
}

/// An If on a run-time condition whose else_branch has no valid shapes at the compiled
/// input shape (a Reshape of 4 elements to 3, as a branch written for another input length
/// has) compiles to its then_branch with a warning; a run whose condition selects the
/// else_branch fails with ONNXC_ERR_SHAPE, as onnxruntime's run of it fails.
#[test]
fn an_if_branch_invalid_at_the_input_shape_fails_the_run_that_takes_it() {
    use onnxc_tests::model::{graph, with_graph};
    let d = scratch("ifshape");
    let then_g = graph(
        vec![node("Neg", "neg", &["x"], &["t"])],
        vec![],
        vec![value_info("t", 1, &[D::N(4)])],
    );
    let else_g = graph(
        vec![node("Reshape", "reshape3", &["x", "three"], &["e"])],
        vec![],
        vec![value_info("e", 1, &[D::N(4)])],
    );
    let iff = with_graph(
        with_graph(
            node("If", "switch", &["pos"], &["y"]),
            "then_branch",
            then_g,
        ),
        "else_branch",
        else_g,
    );
    let mut rs = node("ReduceSum", "sum", &["x"], &["s"]);
    rs = onnxc_tests::model::with_int(rs, "keepdims", 0);
    let m = model(
        vec![rs, node("Greater", "gt", &["s", "zero"], &["pos"]), iff],
        vec![value_info("x", 1, &[D::N(4)])],
        vec![value_info("y", 1, &[D::N(4)])],
        vec![
            f32_tensor("zero", &[], &[0.0]),
            int_tensor("three", 7, &[1], &[3]),
        ],
        13,
    );
    let p = d.join("ifshape.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("m.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", super::stderr(&o));
    let w = super::stderr(&o);
    assert!(
        w.contains("node 'switch' (If, opset 13): the else_branch cannot be computed")
            && w.contains("'reshape3' (Reshape")
            && w.contains("ONNXC_ERR_SHAPE"),
        "{w}"
    );
    let xin = d.join("x.pb");
    save_tensor(&f32_tensor("x", &[4], &[1.0, 2.0, -0.5, 0.25]), &xin);
    let out = run_model(&[p.as_os_str(), xin.as_os_str()], &d.join("ok"));
    assert_eq!(out[0].to_f64s(), [-1.0, -2.0, 0.5, -0.25]);
    save_tensor(&f32_tensor("x", &[4], &[-1.0, 2.0, -3.0, 0.25]), &xin);
    let e = run_fails(&p, &[&xin], &d.join("bad"));
    assert!(e.contains("error 3"), "{e}");
}

/// RoiAlign reads the image each region's batch index names: an index outside the batch
/// fails the run with ONNXC_ERR_INDEX instead of reading past the input, and NaN or huge
/// region corners finish (no out-of-bounds read, no endless sampling grid).
#[test]
fn roi_align_batch_indices_outside_the_batch_fail_the_run() {
    let d = scratch("roi_align");
    let m = model(
        vec![node("RoiAlign", "roi", &["x", "rois", "idx"], &["y"])],
        vec![
            value_info("x", 1, &[D::N(2), D::N(1), D::N(4), D::N(4)]),
            value_info("rois", 1, &[D::N(2), D::N(4)]),
            value_info("idx", 7, &[D::N(2)]),
        ],
        vec![value_info("y", 1, &[D::N(2), D::N(1), D::N(1), D::N(1)])],
        vec![],
        16,
    );
    let p = d.join("roi.onnx");
    save(&m, &p);
    let xin = d.join("x.pb");
    let x: Vec<f32> = (0..32).map(|v| v as f32).collect();
    save_tensor(&f32_tensor("x", &[2, 1, 4, 4], &x), &xin);
    let rin = d.join("rois.pb");
    let iin = d.join("idx.pb");
    // The whole of each 4 × 4 map (the reference evaluator's values: samples past the last
    // row and column read it, so the averages lean high).
    save_tensor(
        &f32_tensor("rois", &[2, 4], &[0.5, 0.5, 4.5, 4.5, 0.5, 0.5, 4.5, 4.5]),
        &rin,
    );
    save_tensor(&int_tensor("idx", 7, &[2], &[0, 1]), &iin);
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            rin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("ok"),
    );
    assert_eq!(out[0].to_f64s(), [9.375, 25.375]);
    for bad in [2, -1, i64::MAX] {
        save_tensor(&int_tensor("idx", 7, &[2], &[0, bad]), &iin);
        let e = run_fails(&p, &[&xin, &rin, &iin], &d.join("bad"));
        assert!(e.contains("index"), "{bad}: {e}");
    }
    save_tensor(&int_tensor("idx", 7, &[2], &[0, 1]), &iin);
    save_tensor(
        &f32_tensor(
            "rois",
            &[2, 4],
            &[f32::NAN, 0.0, 1e30, 2.0, -1e30, -1e30, 1e30, 1e30],
        ),
        &rin,
    );
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            rin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("hostile"),
    );
    assert_eq!(out[0].to_f64s().len(), 2);
}

/// A kernel that refuses the parameter blob compiled for it (here: an object corrupted after
/// compilation) returns ONNXC_ERR_PARAMS, which the generated code merges into the run's
/// error code; the intact object runs.
#[test]
fn a_corrupt_kernel_parameter_blob_fails_the_run() {
    use onnxc::loops::{Arg, Stmt};
    let d = scratch("params");
    let pool = with_ints(
        with_ints(
            node("MaxPool", "pool", &["x"], &["y"]),
            "kernel_shape",
            &[2, 2],
        ),
        "strides",
        &[2, 2],
    );
    let m = model(
        vec![pool],
        vec![value_info("x", 1, &[D::N(1), D::N(1), D::N(6), D::N(6)])],
        vec![value_info("y", 1, &[D::N(1), D::N(1), D::N(3), D::N(3)])],
        vec![],
        17,
    );
    let p = d.join("pool.onnx");
    save(&m, &p);
    let opts = onnxc::driver::Options {
        emit_main: true,
        ..Default::default()
    };
    let c = onnxc::driver::compile_file(&p, "model", &opts, None).unwrap();
    // The parameter blob of the first call of a kernel that returns a status.
    fn blob(body: &[Stmt]) -> Option<Vec<i64>> {
        body.iter().find_map(|st| match st {
            Stmt::Call { kernel, args } if kernel.status => args.iter().find_map(|a| match a {
                Arg::Params(p) => Some(p.clone()),
                _ => None,
            }),
            Stmt::For { body, .. } => blob(body),
            _ => None,
        })
    }
    let words = c
        .program
        .funcs
        .iter()
        .find_map(|f| blob(&f.body))
        .expect("a kernel call with a parameter blob");
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let at: Vec<usize> = (0..=c.object.len() - bytes.len())
        .filter(|&i| c.object[i..i + bytes.len()] == bytes[..])
        .collect();
    assert!(!at.is_empty(), "the blob {words:?} is in the object");
    let x = d.join("x.bin");
    let xs: Vec<u8> = (0..36).flat_map(|i| (i as f32).to_le_bytes()).collect();
    std::fs::write(&x, xs).unwrap();
    let run = |object: &[u8], tag: &str| {
        let o = d.join(format!("{tag}.o"));
        std::fs::write(&o, object).unwrap();
        let exe = d.join(tag);
        onnxc::driver::link(&[o], &exe).unwrap();
        let out = d.join(format!("{tag}-out"));
        std::fs::create_dir_all(&out).unwrap();
        let r = std::process::Command::new(&exe)
            .arg("run")
            .arg(&x)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        (r, out)
    };
    let (ok, out) = run(&c.object, "intact");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The max of each 2×2 window of 0..36 (6×6, row-major) is its bottom-right element.
    let y: Vec<f32> = std::fs::read(out.join("output_0.bin"))
        .unwrap()
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = (0..9)
        .map(|i| (12 * (i / 3) + 2 * (i % 3) + 7) as f32)
        .collect();
    assert_eq!(y, want);
    // The blob's first word after its length (a kind, a rank, a count) set to -1.
    let mut corrupt = c.object.clone();
    for &i in &at {
        corrupt[i + 8..i + 16].copy_from_slice(&(-1i64).to_le_bytes());
    }
    let (bad, _) = run(&corrupt, "corrupt");
    let e = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error 5") && e.contains("compiled parameters are invalid"),
        "{e}"
    );
}

/// Strings made at run time (StringConcat) go to the workspace's string space, sized by
/// `--string-bytes` per string: strings that need more fail the run with ONNXC_ERR_STRINGS
/// instead of writing past it.
#[test]
fn strings_made_past_their_space_fail_the_run() {
    let d = scratch("strspace");
    let m = model(
        vec![node("StringConcat", "cat", &["a", "b"], &["y"])],
        vec![
            value_info("a", 8, &[D::N(2)]),
            value_info("b", 8, &[D::N(2)]),
        ],
        vec![value_info("y", 8, &[D::N(2)])],
        vec![],
        20,
    );
    let p = d.join("cat.onnx");
    save(&m, &p);
    let (ain, bin) = (d.join("a.pb"), d.join("b.pb"));
    save_tensor(&str_tensor("a", &[2], &["abc", "été"]), &ain);
    save_tensor(&str_tensor("b", &[2], &[".com", "!"]), &bin);
    let out = run_model(
        &[p.as_os_str(), ain.as_os_str(), bin.as_os_str()],
        &d.join("ok"),
    );
    assert_eq!(
        out[0].to_strings(),
        [b"abc.com".to_vec(), "été!".as_bytes().to_vec()]
    );
    // 8 + 7 bytes with their NULs: 2 strings of 8 bytes fit them, of 7 do not.
    let with = |bytes: &str, dir: &str| {
        let mut cmd = onnxc();
        cmd.args(["run", "--string-bytes", bytes])
            .arg(&p)
            .arg(&ain)
            .arg(&bin)
            .arg("--output-dir")
            .arg(d.join(dir));
        cmd
    };
    let o = with("8", "fits").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e = fails(&mut with("7", "short"));
    assert!(e.contains("error 9") && e.contains("--string-bytes"), "{e}");
}

/// Gathers from an axis of length 0 (a model that declares an empty dim): every index is
/// out of range, and the run says so instead of reading the empty input's buffer (whose
/// pointer may be null: these runs crashed with SIGSEGV), through generated code for a
/// constant index, run-time indices on either axis, GatherElements and GatherND, at -O2
/// (vectorized) and -O0.
#[test]
fn gathers_from_an_empty_axis_fail_without_reading() {
    let d = scratch("empty_gather");
    let f = |name: &str, dims: &[i64]| {
        value_info(name, 1, &dims.iter().map(|&v| D::N(v)).collect::<Vec<_>>())
    };
    let i64s = |name: &str, dims: &[i64]| {
        value_info(name, 7, &dims.iter().map(|&v| D::N(v)).collect::<Vec<_>>())
    };
    let cases = [
        (
            "const_index",
            model(
                vec![node("Gather", "g", &["x", "i"], &["y"])],
                vec![f("x", &[0, 4])],
                vec![f("y", &[1, 4])],
                vec![int_tensor("i", 7, &[1], &[0])],
                17,
            ),
            vec![0i64, 4],
            None,
        ),
        (
            "runtime_axis1",
            model(
                vec![with_int(
                    node("Gather", "g", &["x", "i"], &["y"]),
                    "axis",
                    1,
                )],
                vec![f("x", &[4, 0]), i64s("i", &[3])],
                vec![f("y", &[4, 3])],
                vec![],
                17,
            ),
            vec![4, 0],
            Some(vec![3i64]),
        ),
        (
            "gather_nd",
            model(
                vec![node("GatherND", "g", &["x", "i"], &["y"])],
                vec![f("x", &[0, 4]), i64s("i", &[2, 1])],
                vec![f("y", &[2, 4])],
                vec![],
                17,
            ),
            vec![0, 4],
            Some(vec![2, 1]),
        ),
    ];
    for (name, m, xdims, idims) in cases {
        let p = d.join(format!("{name}.onnx"));
        save(&m, &p);
        let x = d.join(format!("{name}_x.pb"));
        save_tensor(&f32_tensor("x", &xdims, &[]), &x);
        let mut inputs = vec![x];
        if let Some(idims) = idims {
            let n: i64 = idims.iter().product();
            let i = d.join(format!("{name}_i.pb"));
            save_tensor(&int_tensor("i", 7, &idims, &vec![0; n as usize]), &i);
            inputs.push(i);
        }
        let refs: Vec<&std::path::Path> = inputs.iter().map(|p| p.as_path()).collect();
        for opt in [None, Some("-O0")] {
            let mut cmd = onnxc();
            cmd.arg("run").arg(&p).args(&refs);
            cmd.args(opt)
                .arg("--output-dir")
                .arg(d.join(format!("{name}_out")));
            let e = fails(&mut cmd);
            assert!(
                e.contains("an index input is out of range"),
                "{name} {opt:?}: {e}"
            );
        }
    }
}
