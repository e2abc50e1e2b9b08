//! Ops and constructs onnxc does not compile: every one reported at once, each
//! with its node, op type and opset.

use super::*;

#[test]
fn unsupported_ops_are_all_reported_at_once() {
    let d = scratch("unsupported");
    let m = model(
        vec![
            node("FancyOp", "first_bad", &["x"], &["a"]),
            node("Relu", "ok", &["a"], &["b"]),
            node("OtherMissingOp", "second_bad", &["b"], &["y"]),
        ],
        vec![value_info("x", 1, &[D::N(2)])],
        vec![value_info("y", 1, &[D::N(2)])],
        vec![],
        17,
    );
    let p = d.join("m.onnx");
    save(&m, &p);
    let e = fails(onnxc().arg(&p).arg("-o").arg(d.join("m.o")));
    assert!(
        e.contains("node 'first_bad': FancyOp (domain ai.onnx, opset 17)"),
        "{e}"
    );
    assert!(
        e.contains("node 'second_bad': OtherMissingOp (domain ai.onnx, opset 17)"),
        "{e}"
    );
    assert!(e.contains("2 node(s)"), "{e}");
    // --error-format json: one object on stderr, every node listed.
    let compile_json = || {
        onnxc()
            .arg(&p)
            .arg("-o")
            .arg(d.join("m.o"))
            .args(["--error-format", "json"])
            .output()
            .unwrap()
    };
    let o = compile_json();
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(j["level"], "error");
    assert_eq!(j["kind"], "unsupported");
    assert!(j["message"].as_str().unwrap().contains("2 node(s)"));
    assert_eq!(
        j["nodes"],
        serde_json::json!([
            {"node": "first_bad", "op_type": "FancyOp", "domain": "", "opset": 17,
             "reason": "no implementation of this op"},
            {"node": "second_bad", "op_type": "OtherMissingOp", "domain": "", "opset": 17,
             "reason": "no implementation of this op"}
        ])
    );
    // A warning is a JSON line too (an output declared with another shape), on success.
    let m = model(
        vec![node("Relu", "act", &["x"], &["y"])],
        vec![value_info("x", 1, &[D::N(1), D::N(4)])],
        vec![value_info("y", 1, &[D::N(1), D::N(5)])],
        vec![],
        13,
    );
    save(&m, &p);
    let o = compile_json();
    assert!(o.status.success(), "{}", stderr(&o));
    let warning = stderr(&o)
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .expect("a JSON warning line");
    assert_eq!(warning["level"], "warning");
    // A command-line error too (found before the flags are known).
    let o = onnxc()
        .args(["--error-format", "json", "--no-such-flag"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let j: serde_json::Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(j["kind"], "usage");
    assert!(
        j["message"].as_str().unwrap().contains("--no-such-flag"),
        "{j}"
    );
    assert!(
        warning["message"].as_str().unwrap().contains("'y'"),
        "{warning}"
    );
}

/// Loops onnxc cannot unroll are reported as unsupported, naming the node and why; loops too
/// long to unroll (a huge trip count, a condition that stays true, loops nested to multiply)
/// are refused quickly instead of compiling for ever; malformed Scans are model errors.
#[test]
fn loops_that_cannot_be_unrolled_are_reported() {
    let d = scratch("loops");
    let x = value_info("x", 1, &[D::N(4)]);
    let y = value_info("y", 1, &[D::N(4)]);
    let scalar = |name: &str, elem: i32| value_info(name, elem, &[]);
    // Body: y_out = x_in · 0.5 + outer x; the condition passes through.
    let body = |tag: &str| {
        graph(
            vec![
                node("Identity", &format!("{tag}_c"), &["c_in"], &["c_out"]),
                node("Mul", &format!("{tag}_m"), &["v_in", "half"], &["h"]),
                node("Add", &format!("{tag}_a"), &["h", "x"], &["v_out"]),
            ],
            vec![
                scalar("i", 7),
                scalar("c_in", 9),
                value_info("v_in", 1, &[D::N(4)]),
            ],
            vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
        )
    };
    let half = f32_tensor("half", &[], &[0.5]);
    let truth = int_tensor("t", 9, &[], &[1]);
    let loop_model =
        |inputs: &[&str], extra_in: Vec<onnxc_proto::ValueInfoProto>, inits: Vec<_>| {
            let mut ins = vec![x.clone()];
            ins.extend(extra_in);
            model(
                vec![with_graph(
                    node("Loop", "lp", inputs, &["y"]),
                    "body",
                    body("b"),
                )],
                ins,
                vec![y.clone()],
                inits,
                13,
            )
        };
    let t0 = std::time::Instant::now();
    let m = loop_model(
        &["m", "t", "x"],
        vec![scalar("m", 7)],
        vec![half.clone(), truth.clone()],
    );
    compile_error(
        &d,
        "runtime_trip",
        &m,
        &["'lp'", "Loop", "trip count is computed at run time"],
    );
    let m = loop_model(
        &["m", "t", "x"],
        vec![],
        vec![
            half.clone(),
            truth.clone(),
            int_tensor("m", 7, &[], &[1_000_000_000_000]),
        ],
    );
    compile_error(&d, "huge_trip", &m, &["'lp'", "at most 4096 iterations"]);
    let m = loop_model(&["", "t", "x"], vec![], vec![half.clone(), truth.clone()]);
    compile_error(&d, "endless", &m, &["'lp'", "at most 4096 iterations"]);
    let m = loop_model(&["", "", "x"], vec![], vec![half.clone()]);
    compile_error(&d, "no_bound", &m, &["'lp'", "never ends"]);
    // A run-time condition is if-converted up to a constant trip count; without one, or
    // with a body that can fail, it cannot be.
    let m = loop_model(&["", "t", "x"], vec![scalar("t", 9)], vec![half.clone()]);
    compile_error(&d, "runtime_cond_unbounded", &m, &["'lp'", "no trip count"]);
    let m = loop_model(
        &["m", "t", "x"],
        vec![scalar("t", 9)],
        vec![half.clone(), int_tensor("m", 7, &[], &[3])],
    );
    let p = d.join("runtime_cond.onnx");
    save(&m, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("runtime_cond.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let fallible = graph(
        vec![
            node("Identity", "fc", &["c_in"], &["c_out"]),
            node("Gather", "pick", &["v_in", "idx"], &["v_out"]),
        ],
        vec![
            scalar("i", 7),
            scalar("c_in", 9),
            value_info("v_in", 1, &[D::N(4)]),
        ],
        vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
    );
    let m = model(
        vec![with_graph(
            node("Loop", "lp", &["m", "t", "x"], &["y"]),
            "body",
            fallible,
        )],
        vec![x.clone(), scalar("t", 9), value_info("idx", 7, &[D::N(4)])],
        vec![y.clone()],
        vec![int_tensor("m", 7, &[], &[3])],
        13,
    );
    // Its gather fails the run only in iterations the loop runs.
    let p = d.join("runtime_cond_fallible.onnx");
    save(&m, &p);
    let (xin, tin, iin) = (d.join("lx.pb"), d.join("lt.pb"), d.join("li.pb"));
    save_tensor(&f32_tensor("x", &[4], &[1.0, 2.0, 3.0, 4.0]), &xin);
    save_tensor(&int_tensor("idx", 7, &[4], &[9, 9, 9, 9]), &iin);
    save_tensor(&int_tensor("t", 9, &[], &[0]), &tin);
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            tin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("stopped"),
    );
    assert_eq!(out[0].to_f64s(), [1.0, 2.0, 3.0, 4.0]);
    save_tensor(&int_tensor("t", 9, &[], &[1]), &tin);
    let e = run_fails(&p, &[&xin, &tin, &iin], &d.join("runs"));
    assert!(e.contains("index"), "{e}");
    save_tensor(&int_tensor("idx", 7, &[4], &[1, 0, 3, 2]), &iin);
    let out = run_model(
        &[
            p.as_os_str(),
            xin.as_os_str(),
            tin.as_os_str(),
            iin.as_os_str(),
        ],
        &d.join("three"),
    );
    // Three gathers by the permutation [1, 0, 3, 2] (the condition passes through).
    assert_eq!(out[0].to_f64s(), [2.0, 1.0, 4.0, 3.0]);
    // 4000 × 4000 iterations: the outer body's inner loop takes the model past the limit.
    let inner = with_graph(
        node("Loop", "inner", &["n", "", "v_in"], &["v_out"]),
        "body",
        body("i"),
    );
    let outer_body = graph(
        vec![node("Identity", "oc", &["c_in"], &["c_out"]), inner],
        vec![
            scalar("i", 7),
            scalar("c_in", 9),
            value_info("v_in", 1, &[D::N(4)]),
        ],
        vec![scalar("c_out", 9), value_info("v_out", 1, &[D::N(4)])],
    );
    let m = model(
        vec![with_graph(
            node("Loop", "outer", &["n", "", "x"], &["y"]),
            "body",
            outer_body,
        )],
        vec![x.clone()],
        vec![y.clone()],
        vec![half.clone(), int_tensor("n", 7, &[], &[4000])],
        13,
    );
    compile_error(&d, "nested", &m, &["Loop", "past 200000 nodes"]);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(60),
        "refusing the loops took {:?}",
        t0.elapsed()
    );
    // A Scan whose inputs differ in length, and one whose body reads an undefined value.
    let sbody = |reads: &str| {
        graph(
            vec![
                node("Add", "sa", &["s_in", reads], &["s_out"]),
                node("Identity", "si", &["b_t"], &["e"]),
            ],
            vec![
                value_info("s_in", 1, &[D::N(2)]),
                value_info("a_t", 1, &[D::N(2)]),
                value_info("b_t", 1, &[D::N(2)]),
            ],
            vec![
                value_info("s_out", 1, &[D::N(2)]),
                value_info("e", 1, &[D::N(2)]),
            ],
        )
    };
    let scan_model = |b_len: i64, reads: &str| {
        model(
            vec![with_int(
                with_graph(
                    node("Scan", "sc", &["s", "a", "b"], &["s_final", "es"]),
                    "body",
                    sbody(reads),
                ),
                "num_scan_inputs",
                2,
            )],
            vec![
                value_info("s", 1, &[D::N(2)]),
                value_info("a", 1, &[D::N(3), D::N(2)]),
                value_info("b", 1, &[D::N(b_len), D::N(2)]),
            ],
            vec![value_info("s_final", 1, &[D::N(2)])],
            vec![],
            11,
        )
    };
    compile_error(
        &d,
        "scan_lengths",
        &scan_model(5, "a_t"),
        &["'sc'", "same length"],
    );
    compile_error(
        &d,
        "scan_undefined",
        &scan_model(3, "nowhere"),
        &["nowhere"],
    );
}

/// An If on a run-time condition computes both branches and selects: a branch's checked
/// gather fails the run only where the branch is taken; branches that give an output
/// different shapes are refused, naming the node.
#[test]
fn run_time_ifs_that_cannot_be_if_converted_are_reported() {
    let d = scratch("ifs");
    let x = value_info("x", 1, &[D::N(4)]);
    let branch =
        |nodes, out: &str, n: i64| graph(nodes, vec![], vec![value_info(out, 1, &[D::N(n)])]);
    let if_model = |then_g, else_g, inits| {
        model(
            vec![
                node("ReduceSum", "sum", &["x"], &["s"]),
                node("Greater", "gt", &["s", "zero"], &["c"]),
                with_graph(
                    with_graph(node("If", "branchy", &["c"], &["y"]), "then_branch", then_g),
                    "else_branch",
                    else_g,
                ),
            ],
            vec![x.clone(), value_info("idx", 7, &[D::N(4)])],
            vec![value_info("y", 1, &[D::N(4)])],
            inits,
            13,
        )
    };
    let zero = || f32_tensor("zero", &[], &[0.0]);
    // A gather at indices read from an input fails the run (ONNXC_ERR_INDEX) only where
    // its branch is taken.
    let m = if_model(
        branch(vec![node("Gather", "pick", &["x", "idx"], &["t"])], "t", 4),
        branch(vec![node("Neg", "neg", &["x"], &["e"])], "e", 4),
        vec![zero()],
    );
    let p = d.join("fallible.onnx");
    save(&m, &p);
    let (xin, iin) = (d.join("x.pb"), d.join("idx.pb"));
    let feed = |x: &[f32], idx: &[i64]| {
        save_tensor(&f32_tensor("x", &[4], x), &xin);
        save_tensor(&int_tensor("idx", 7, &[4], idx), &iin);
    };
    feed(&[1.0, 2.0, 3.0, 4.0], &[3, 2, 1, -4]);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), iin.as_os_str()],
        &d.join("taken"),
    );
    assert_eq!(out[0].to_f64s(), [4.0, 3.0, 2.0, 1.0]);
    feed(&[-1.0, -2.0, -3.0, -4.0], &[9, 9, 9, 9]);
    let out = run_model(
        &[p.as_os_str(), xin.as_os_str(), iin.as_os_str()],
        &d.join("untaken"),
    );
    assert_eq!(out[0].to_f64s(), [1.0, 2.0, 3.0, 4.0]);
    feed(&[1.0, 2.0, 3.0, 4.0], &[9, 0, 0, 0]);
    let e = run_fails(&p, &[&xin, &iin], &d.join("bad"));
    assert!(e.contains("index"), "{e}");
    // Branch outputs of different shapes.
    let m = if_model(
        branch(vec![node("Neg", "neg", &["x"], &["t"])], "t", 4),
        branch(vec![node("Concat", "cat", &["x", "x"], &["e"])], "e", 8),
        vec![zero()],
    );
    let m = {
        let mut m = m;
        let g = m.graph.as_mut().unwrap();
        let cat = g.node[2].attribute[1].g.as_mut().unwrap();
        cat.node[0] = with_int(cat.node[0].clone(), "axis", 0);
        m
    };
    compile_error(
        &d,
        "shapes",
        &m,
        &["'branchy'", "output 0 is float32 [4]", "[8]"],
    );
}

/// Sequences exist only at compile time: a position computed at run time, a sequence as a
/// graph output and a sequence read by an op that takes tensors are reported clearly.
#[test]
fn sequences_need_constant_positions_and_stay_inside_the_graph() {
    let d = scratch("seq");
    let x = value_info("x", 1, &[D::N(2), D::N(3)]);
    let y = value_info("y", 1, &[D::N(2), D::N(3)]);
    let seq_model = |nodes, inputs, inits| model(nodes, inputs, vec![y.clone()], inits, 13);
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x", "x"], &["s"]),
            node("SequenceAt", "at", &["s", "p"], &["y"]),
        ],
        vec![x.clone(), value_info("p", 7, &[])],
        vec![],
    );
    compile_error(
        &d,
        "runtime_pos",
        &m,
        &["'at'", "SequenceAt", "position is computed at run time"],
    );
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x"], &["s"]),
            node("Relu", "act", &["s"], &["y"]),
        ],
        vec![x.clone()],
        vec![],
    );
    compile_error(
        &d,
        "seq_as_tensor",
        &m,
        &["'act'", "input 's' is a sequence"],
    );
    let m = seq_model(
        vec![
            node("SequenceConstruct", "mk", &["x"], &["s"]),
            node("SequenceAt", "at", &["s", "p"], &["y"]),
        ],
        vec![x.clone()],
        vec![int_tensor("p", 7, &[], &[3])],
    );
    compile_error(
        &d,
        "out_of_range",
        &m,
        &["'at'", "position 3 is outside a sequence of 1"],
    );
    // A sequence carried through a Loop that stops on a run-time condition: its length
    // would depend on the data (sequences as graph inputs and outputs, and carried through
    // Loops of a known trip count, are tests/cli/sequences.rs's and the backend suite's).
    let body = graph(
        vec![
            node("Identity", "c", &["cond_in"], &["cond_out"]),
            node("Identity", "keep", &["s_in"], &["s_out"]),
        ],
        vec![
            value_info("i", 7, &[]),
            value_info("cond_in", 9, &[]),
            sequence_info("s_in", 1, &[D::N(2)]),
        ],
        vec![
            value_info("cond_out", 9, &[]),
            sequence_info("s_out", 1, &[D::N(2)]),
        ],
    );
    let m = model(
        vec![
            node("SequenceConstruct", "mk", &["x", "x"], &["s"]),
            with_graph(
                node("Loop", "loop", &["n", "go", "s"], &["t"]),
                "body",
                body,
            ),
            node("ConcatFromSequence", "cat", &["t"], &["y"]),
        ],
        vec![x.clone(), value_info("go", 9, &[])],
        vec![value_info("y", 1, &[])],
        vec![int_tensor("n", 7, &[], &[2])],
        13,
    );
    compile_error(
        &d,
        "seq_loop",
        &m,
        &[
            "'loop'",
            "carries a sequence",
            "cannot depend on when the loop stops",
        ],
    );
}

/// RegexFullMatch compiles its pattern into an automaton: one whose automaton would be huge
/// is refused quickly with the reason, not after minutes or gigabytes.
#[test]
fn regex_patterns_with_huge_automata_are_refused() {
    let d = scratch("regex");
    for (name, pattern, why) in [
        ("blowup", "(a|b)*a(a|b){24}", "exceeded size limit"),
        ("states", "((a{100}){100}){100}", "more than 65536 states"),
        ("backref", "(a)\\1", "does not compile"),
        // The NFA alone would take 10^10 states (24 GB before the limit).
        ("nfa", "a{100000}{100000}", "NFA compilation exceeded limit"),
    ] {
        let mut n = node("RegexFullMatch", "re", &["x"], &["y"]);
        n.attribute.push(onnxc_proto::AttributeProto {
            name: Some("pattern".into()),
            r#type: Some(3),
            s: Some(pattern.as_bytes().to_vec()),
            ..Default::default()
        });
        let m = model(
            vec![n],
            vec![value_info("x", 8, &[D::N(2)])],
            vec![value_info("y", 9, &[D::N(2)])],
            vec![],
            20,
        );
        compile_error(&d, name, &m, &["node 're'", "RegexFullMatch", why]);
    }
}
