//! A decoder's cache over run-time dims: dims named as a sum of others (`past + seq`), a
//! symbol the model takes only as such a sum, and position tables (float and quantized)
//! read at the cache's length.

use super::*;

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
