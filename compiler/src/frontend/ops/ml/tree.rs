//! Tree ensembles: TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml opsets 1
//! and 3) and TreeEnsemble (opset 5), compiled into the canonical forest of
//! `onnxc_runtime::tree` (every rule a `x <= t` test with thresholds rounded exactly into
//! the input's type, equality and set membership as pairs of such tests) walked by the
//! `onnxc_tree_ensemble` kernel; aggregation's tail (averaging, base values, post transform,
//! a classifier's labels) is built as maps.
//!
//! Comparisons are exact, as the reference evaluator makes them: a float32 input against a
//! float64 threshold (`nodes_values_as_tensor`) compares the two values, not the threshold
//! rounded to float32. A NaN feature takes the true branch where
//! `nodes_missing_value_tracks_true` says so (and always for BRANCH_NEQ, where `x != t`
//! holds for NaN), the false branch otherwise.

use super::{Post, float_list, ints, same_length};
use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp};
use crate::ir::{DType, Op, TypeInfo, ValueId};
use onnxc_runtime::tree::{Aggregate, Forest, Node};
use std::collections::HashMap;
use std::sync::Arc;

/// A node rule.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Rule {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    Member,
}

/// One ONNX node, its children as indices of the same list (or of the leaves).
#[derive(Clone, Debug)]
enum Src {
    Branch {
        rule: Rule,
        feature: i64,
        /// The threshold, or the members of a set.
        values: Vec<f64>,
        tracks_true: bool,
        t: Child,
        f: Child,
    },
    Leaf(usize),
}

#[derive(Copy, Clone, Debug)]
enum Child {
    Node(usize),
    Leaf(usize),
}

/// The largest value of the compare type at most `t` (NaN for NaN).
fn round_down(t: f64, f64_input: bool) -> f64 {
    if f64_input || t.is_nan() {
        return t;
    }
    let c = t as f32;
    if c as f64 <= t {
        c as f64
    } else {
        c.next_down() as f64
    }
}

/// The largest value of the compare type below `t` (NaN when there is none).
fn below(t: f64, f64_input: bool) -> f64 {
    if t.is_nan() {
        return t;
    }
    let r = round_down(t, f64_input);
    let p = if r < t {
        r
    } else if f64_input {
        r.next_down()
    } else {
        (r as f32).next_down() as f64
    };
    if p == f64::NEG_INFINITY && t == f64::NEG_INFINITY {
        f64::NAN
    } else {
        p
    }
}

/// Builds the canonical forest from ONNX nodes (`srcs`) and leaves (`leaves`), trees rooted
/// at `roots` (indices into `srcs`).
struct Canon {
    f64_input: bool,
    nodes: Vec<Node>,
}

impl Canon {
    fn push(&mut self, n: Node) -> u32 {
        self.nodes.push(n);
        (self.nodes.len() - 1) as u32
    }
}

/// Canonical nodes an ONNX node needs.
fn size(s: &Src, f64_input: bool) -> usize {
    match s {
        Src::Leaf(_) => 1,
        Src::Branch { rule, values, .. } => match rule {
            Rule::Eq | Rule::Neq if round_down(values[0], f64_input) == values[0] => 2,
            Rule::Member => {
                let exact = values
                    .iter()
                    .filter(|&&v| round_down(v, f64_input) == v)
                    .count();
                (2 * exact).max(1)
            }
            _ => 1,
        },
    }
}

fn forest(
    ctx: &Ctx,
    srcs: &[Src],
    leaves: Vec<Vec<(u32, f64)>>,
    roots: &[usize],
    f64_input: bool,
    value_f64: bool,
    aggregate: Aggregate,
    n_features: i64,
    n_targets: i64,
) -> Result<Forest> {
    let most = onnxc_runtime::tree::MAX_FEATURES;
    if n_features > i64::from(most) {
        return Err(ctx.unsupported(format!(
            "X has {n_features} features; the compiled forest reads at most {most} \
             (its key offsets are 32-bit)"
        )));
    }
    check_acyclic(ctx, srcs, roots)?;
    // Canonical ids: every ONNX node gets a block; leaves follow.
    let mut start = Vec::with_capacity(srcs.len());
    let mut next = 0usize;
    for s in srcs {
        start.push(next as u32);
        next += size(s, f64_input);
    }
    let leaf_base = next as u32;
    let child = |c: Child| match c {
        Child::Node(k) => start[k],
        Child::Leaf(l) => leaf_base + l as u32,
    };
    let mut cn = Canon {
        f64_input,
        nodes: Vec::with_capacity(next + leaves.len()),
    };
    for (k, s) in srcs.iter().enumerate() {
        debug_assert_eq!(cn.nodes.len(), start[k] as usize);
        match s {
            Src::Leaf(l) => {
                cn.push(Node::Leaf { slot: *l as u32 });
            }
            Src::Branch {
                rule,
                feature,
                values,
                tracks_true,
                t,
                f,
            } => {
                if *feature < 0 || *feature >= n_features {
                    return Err(ctx.err(format!(
                        "node {k} tests feature {feature}, but X has {n_features} features"
                    )));
                }
                let feature = *feature as u32;
                let (t, f) = (child(*t), child(*f));
                // NaN: x != t holds for NaN; every other rule fails and the missing-value
                // rule decides.
                let nan_true = *tracks_true || *rule == Rule::Neq;
                let nan_to = if nan_true { t } else { f };
                let fi = cn.f64_input;
                let br = |thr: f64, left: u32, right: u32, nan_left: bool| Node::Branch {
                    feature,
                    threshold: thr,
                    nan_left,
                    left,
                    right,
                };
                let here = cn.nodes.len() as u32;
                match rule {
                    Rule::Leq => {
                        cn.push(br(round_down(values[0], fi), t, f, nan_true));
                    }
                    Rule::Lt => {
                        cn.push(br(below(values[0], fi), t, f, nan_true));
                    }
                    Rule::Gte => {
                        cn.push(br(below(values[0], fi), f, t, !nan_true));
                    }
                    Rule::Gt => {
                        cn.push(br(round_down(values[0], fi), f, t, !nan_true));
                    }
                    Rule::Eq | Rule::Neq => {
                        let v = values[0];
                        let (yes, no) = if *rule == Rule::Eq { (t, f) } else { (f, t) };
                        if round_down(v, fi) == v {
                            // x <= v ? (x <= below(v) ? no : yes) : no
                            cn.push(br(v, here + 1, no, nan_to != no));
                            cn.push(br(below(v, fi), no, yes, nan_to == no));
                        } else {
                            // No value of the input's type equals v.
                            cn.push(br(f64::NAN, yes, no, nan_to == yes));
                        }
                    }
                    Rule::Member => {
                        let mut members: Vec<f64> = values
                            .iter()
                            .copied()
                            .filter(|&v| round_down(v, fi) == v)
                            .collect();
                        members.sort_by(f64::total_cmp);
                        members.dedup();
                        // Each member v: x <= below(v) ? f : (x <= v ? t : next); the last
                        // one's next is f. Duplicates removed make the block smaller than
                        // `size` reserved: fill it with the false branch's chain end.
                        let reserved = size(s, fi) as u32;
                        if members.is_empty() {
                            cn.push(br(f64::NAN, t, f, nan_true));
                        }
                        for (i, &v) in members.iter().enumerate() {
                            let a = here + 2 * i as u32;
                            let next = if i + 1 == members.len() { f } else { a + 2 };
                            cn.push(br(below(v, fi), f, a + 1, !nan_true));
                            cn.push(br(v, t, next, nan_true));
                        }
                        while (cn.nodes.len() as u32) < here + reserved {
                            cn.push(br(f64::NAN, t, f, nan_true));
                        }
                    }
                }
            }
        }
    }
    for l in 0..leaves.len() {
        cn.push(Node::Leaf { slot: l as u32 });
    }
    Ok(Forest {
        input_f64: f64_input,
        value_f64,
        aggregate,
        n_features: n_features as u32,
        n_targets: n_targets as u32,
        roots: roots.iter().map(|&r| start[r]).collect(),
        nodes: cn.nodes,
        leaves,
    })
}

/// Fails when a branch reaches itself through its children (a hostile or corrupted model:
/// the walk would never reach a leaf). Nodes reached from several parents are allowed.
fn check_acyclic(ctx: &Ctx, srcs: &[Src], roots: &[usize]) -> Result<()> {
    let children = |k: usize| match &srcs[k] {
        Src::Branch { t, f, .. } => [*t, *f].map(|c| match c {
            Child::Node(n) => Some(n),
            Child::Leaf(_) => None,
        }),
        Src::Leaf(_) => [None, None],
    };
    match onnxc_runtime::tree::own_descendant(srcs.len(), roots.iter().copied(), children) {
        Some(c) => Err(ctx.err(format!(
            "node {c} is its own descendant: a tree's branches must lead to leaves (check \
             nodes_truenodeids and nodes_falsenodeids)"
        ))),
        None => Ok(()),
    }
}

/// Adds the kernel node: `[n, targets]` aggregated values of the forest over `x`.
fn run_forest(ctx: &mut Ctx, x: ValueId, f: &Forest) -> Result<ValueId> {
    let enc = onnxc_runtime::tree::encode(f).map_err(|e| {
        crate::error::Error::Internal(format!("{}: invalid forest: {}", ctx.origin, e.0))
    })?;
    let n = ctx.known_shape(x)?[0];
    let dt = if f.value_f64 { DType::F64 } else { DType::F32 };
    ctx.add(
        Op::kernel(crate::kernels::TreeEnsemble(Arc::new(enc))),
        vec![x],
        TypeInfo::new(dt, vec![Dim::Known(n), Dim::Known(f.n_targets as i64)]),
    )
}

fn rule(ctx: &Ctx, mode: &str, k: usize) -> Result<Option<Rule>> {
    Ok(Some(match mode {
        "BRANCH_LEQ" => Rule::Leq,
        "BRANCH_LT" => Rule::Lt,
        "BRANCH_GTE" => Rule::Gte,
        "BRANCH_GT" => Rule::Gt,
        "BRANCH_EQ" => Rule::Eq,
        "BRANCH_NEQ" => Rule::Neq,
        "LEAF" => return Ok(None),
        other => {
            return Err(ctx.err(format!(
                "nodes_modes[{k}] is '{other}'; expected BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, \
                 BRANCH_GT, BRANCH_EQ, BRANCH_NEQ or LEAF"
            )));
        }
    }))
}

/// The trees of TreeEnsembleRegressor/Classifier: node lists keyed by (tree id, node id),
/// leaf weights given as (tree id, node id, target, weight) lists under `prefix`
/// (`target`/`class`).
struct Legacy {
    srcs: Vec<Src>,
    leaves: Vec<Vec<(u32, f64)>>,
    roots: Vec<usize>,
    /// Thresholds and weights were given as doubles.
    values_f64: bool,
    weights_f64: bool,
    /// Per target: whether some leaf carries a weight for it, and whether every tree's
    /// every leaf does (then every row has a score for it).
    targets_seen: Vec<bool>,
    targets_always: Vec<bool>,
}

fn legacy_trees(ctx: &Ctx, prefix: &str, n_targets: usize) -> Result<Legacy> {
    let treeids = ints(ctx, "nodes_treeids");
    let nodeids = ints(ctx, "nodes_nodeids");
    let featureids = ints(ctx, "nodes_featureids");
    let modes = ctx.attr_strings("nodes_modes").unwrap_or_default();
    let trues = ints(ctx, "nodes_truenodeids");
    let falses = ints(ctx, "nodes_falsenodeids");
    let (values, values_f64) = float_list(ctx, "nodes_values")?.unwrap_or_default();
    let mut missing = ints(ctx, "nodes_missing_value_tracks_true");
    let n = treeids.len();
    if n == 0 {
        return Err(ctx.err("attribute 'nodes_treeids' is empty: the ensemble has no nodes"));
    }
    if missing.is_empty() {
        missing = vec![0; n];
    }
    same_length(
        ctx,
        n,
        &[
            ("nodes_nodeids", nodeids.len()),
            ("nodes_featureids", featureids.len()),
            ("nodes_modes", modes.len()),
            ("nodes_truenodeids", trues.len()),
            ("nodes_falsenodeids", falses.len()),
            ("nodes_values", values.len()),
            ("nodes_missing_value_tracks_true", missing.len()),
        ],
    )?;
    let mut index: HashMap<(i64, i64), usize> = HashMap::new();
    for k in 0..n {
        if index.insert((treeids[k], nodeids[k]), k).is_some() {
            return Err(ctx.err(format!(
                "node (tree {}, node {}) is listed twice",
                treeids[k], nodeids[k]
            )));
        }
    }
    // Leaf weights.
    let wt = ints(ctx, &format!("{prefix}_treeids"));
    let wn = ints(ctx, &format!("{prefix}_nodeids"));
    let wi = ints(ctx, &format!("{prefix}_ids"));
    let (ww, weights_f64) = float_list(ctx, &format!("{prefix}_weights"))?.unwrap_or_default();
    same_length(
        ctx,
        wt.len(),
        &[
            (&format!("{prefix}_nodeids"), wn.len()),
            (&format!("{prefix}_ids"), wi.len()),
            (&format!("{prefix}_weights"), ww.len()),
        ],
    )?;
    let mut weights: HashMap<usize, Vec<(u32, f64)>> = HashMap::new();
    for k in 0..wt.len() {
        let node = *index.get(&(wt[k], wn[k])).ok_or_else(|| {
            ctx.err(format!(
                "{prefix} weight {k} names (tree {}, node {}), which is not a node",
                wt[k], wn[k]
            ))
        })?;
        if wi[k] < 0 || wi[k] as usize >= n_targets {
            return Err(ctx.err(format!(
                "{prefix}_ids[{k}] is {}; the ensemble has {n_targets} {}",
                wi[k],
                if prefix == "class" {
                    "classes"
                } else {
                    "targets"
                }
            )));
        }
        weights.entry(node).or_default().push((wi[k] as u32, ww[k]));
    }
    let mut srcs = Vec::with_capacity(n);
    let mut leaves = Vec::new();
    for k in 0..n {
        match rule(ctx, &modes[k], k)? {
            None => {
                srcs.push(Src::Leaf(leaves.len()));
                leaves.push(weights.remove(&k).unwrap_or_default());
            }
            Some(r) => {
                let find = |id: i64, what: &str| {
                    index.get(&(treeids[k], id)).copied().ok_or_else(|| {
                        ctx.err(format!(
                            "node (tree {}, node {}) has {what} node {id}, which tree {} does \
                             not have",
                            treeids[k], nodeids[k], treeids[k]
                        ))
                    })
                };
                srcs.push(Src::Branch {
                    rule: r,
                    feature: featureids[k],
                    values: vec![values[k]],
                    tracks_true: missing[k] != 0,
                    t: Child::Node(find(trues[k], "true")?),
                    f: Child::Node(find(falses[k], "false")?),
                });
            }
        }
    }
    // Weights left over sit on branches, which no walk ends at.
    if let Some(&k) = weights.keys().min() {
        return Err(ctx.err(format!(
            "{prefix} weights name (tree {}, node {}), a branch ({}), not a leaf; weights \
             belong to LEAF nodes",
            treeids[k], nodeids[k], modes[k]
        )));
    }
    // Trees in ascending id order, each rooted at its first listed node (as the reference
    // evaluator does; converters list the root first).
    let mut first: Vec<(i64, usize)> = Vec::new();
    for k in 0..n {
        if !first.iter().any(|&(t, _)| t == treeids[k]) {
            first.push((treeids[k], k));
        }
    }
    first.sort();
    let roots: Vec<usize> = first.iter().map(|&(_, k)| k).collect();
    // Which targets every row scores: per tree, the targets all its leaves carry.
    let mut seen = vec![false; n_targets];
    let mut always = vec![false; n_targets];
    for &(tree, _) in &first {
        let mut all = vec![true; n_targets];
        for (k, s) in srcs.iter().enumerate() {
            if treeids[k] != tree {
                continue;
            }
            if let Src::Leaf(l) = s {
                let mut here = vec![false; n_targets];
                for &(t, _) in &leaves[*l] {
                    here[t as usize] = true;
                    seen[t as usize] = true;
                }
                for (a, h) in all.iter_mut().zip(here) {
                    *a &= h;
                }
            }
        }
        for (a, h) in always.iter_mut().zip(all) {
            *a |= h;
        }
    }
    Ok(Legacy {
        srcs,
        leaves,
        roots,
        values_f64,
        weights_f64,
        targets_seen: seen,
        targets_always: always,
    })
}

fn aggregate_of(ctx: &Ctx, name: &str) -> Result<(Aggregate, bool)> {
    Ok(match name {
        "SUM" => (Aggregate::Sum, false),
        "AVERAGE" => (Aggregate::Sum, true),
        "MIN" => (Aggregate::Min, false),
        "MAX" => (Aggregate::Max, false),
        other => {
            return Err(ctx.err(format!(
                "attribute 'aggregate_function' is '{other}'; expected SUM, AVERAGE, MIN or MAX"
            )));
        }
    })
}

/// X as `[n, f]` rows of the compare type: float64 stays, everything else is float32 — or
/// float64 when the thresholds are doubles and X is an integer type.
fn compare_rows(ctx: &mut Ctx, thresholds_f64: bool) -> Result<(ValueId, bool)> {
    let x0 = ctx.input(0)?;
    let dt = ctx.dtype(x0);
    let f64_input = dt == DType::F64 || (thresholds_f64 && !dt.is_float());
    let x = super::input_rows(ctx, true)?;
    let x = crate::frontend::build::cast(ctx, x, if f64_input { DType::F64 } else { DType::F32 })?;
    Ok((x, f64_input))
}

/// Regressor finalization (onnxruntime's aggregators): averaging, base values, the post
/// transform; float32 `[n, targets]`.
fn finish_regression(
    ctx: &mut Ctx,
    raw: ValueId,
    n_trees: usize,
    average: bool,
    base: &[f64],
    post: Post,
) -> Result<ValueId> {
    let shape = ctx.known_shape(raw)?;
    let targets = shape[1] as usize;
    let dt = ctx.dtype(raw);
    // One target: base_values[0] is added whenever there is one value (onnxruntime's
    // `origin_`), and only PROBIT of the transforms applies; several: base values when
    // there is one per target, then the transform.
    let base: Vec<f64> = if targets == 1 {
        vec![if base.len() == 1 { base[0] } else { 0.0 }]
    } else if base.len() == targets {
        base.to_vec()
    } else {
        vec![0.0; targets]
    };
    let bt = ctx.constant(crate::ir::Tensor::from_scalars(
        dt,
        vec![targets as i64],
        &base
            .iter()
            .map(|&v| crate::ir::Scalar::F(v))
            .collect::<Vec<_>>(),
    ));
    let v = expr::load(dt, 0, vec![expr::var(0), expr::var(1)]);
    let v = if average {
        expr::binary(BinOp::Div, v, expr::f(dt, n_trees as f64))
    } else {
        v
    };
    let v = expr::binary(BinOp::Add, v, expr::load(dt, 1, vec![expr::var(1)]));
    let v = expr::cast(v, DType::F32);
    let y = ctx.map(DType::F32, ctx.shape(raw), vec![raw, bt], v)?;
    if targets == 1 {
        return if post == Post::Probit {
            super::transform_rows(ctx, y, Post::Probit)
        } else {
            Ok(y)
        };
    }
    super::transform_rows(ctx, y, post)
}

pub fn tree_ensemble_regressor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let n_targets = ctx.attr_i_or("n_targets", 1)?;
    if n_targets < 1 {
        return Err(ctx.err(format!(
            "attribute 'n_targets' is {n_targets}; it must be positive"
        )));
    }
    let mut t = legacy_trees(ctx, "target", n_targets as usize)?;
    if n_targets == 1 {
        // A single-target leaf listed more than once (skl2onnx's `decision_leaf` output
        // lists each leaf once per class, all with the leaf's index) counts its first
        // weight only, as onnxruntime reads it (the weight it keeps beside the node) and the
        // converters expect; the reference evaluator would sum the copies.
        for leaf in &mut t.leaves {
            leaf.truncate(1);
        }
    }
    let (aggregate, average) = aggregate_of(ctx, &ctx.attr_s_or("aggregate_function", "SUM")?)?;
    let (base, base_f64) = float_list(ctx, "base_values")?.unwrap_or_default();
    let post = super::post_transform(ctx)?;
    let (x, f64_input) = compare_rows(ctx, t.values_f64)?;
    let nf = ctx.known_shape(x)?[1];
    let value_f64 = t.values_f64 || t.weights_f64 || base_f64;
    let f = forest(
        ctx, &t.srcs, t.leaves, &t.roots, f64_input, value_f64, aggregate, nf, n_targets,
    )?;
    let raw = run_forest(ctx, x, &f)?;
    Ok(vec![finish_regression(
        ctx,
        raw,
        t.roots.len(),
        average,
        &base,
        post,
    )?])
}

pub fn tree_ensemble_classifier(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let labels =
        super::labels(ctx, "classlabels_int64s", "classlabels_strings")?.ok_or_else(|| {
            ctx.err("one of 'classlabels_int64s' and 'classlabels_strings' is required")
        })?;
    let c = labels.len();
    let t = legacy_trees(ctx, "class", c)?;
    let (base, base_f64) = float_list(ctx, "base_values")?.unwrap_or_default();
    let post = super::post_transform(ctx)?;
    let (x, f64_input) = compare_rows(ctx, t.values_f64)?;
    let nf = ctx.known_shape(x)?[1];
    let value_f64 = t.values_f64 || t.weights_f64 || base_f64;
    // Which classes the weights name (onnxruntime's binary case: two labels, one class
    // carries every weight).
    let mut ids: Vec<i64> = ints(ctx, "class_ids");
    ids.sort();
    ids.dedup();
    let all_positive = float_list(ctx, "class_weights")?
        .map(|(w, _)| w.iter().all(|&v| v >= 0.0))
        .unwrap_or(true);
    let f = forest(
        ctx,
        &t.srcs,
        t.leaves,
        &t.roots,
        f64_input,
        value_f64,
        Aggregate::Sum,
        nf,
        c as i64,
    )?;
    let raw = run_forest(ctx, x, &f)?;
    let spec = super::classify::TreeScores {
        base,
        scored: t
            .targets_seen
            .iter()
            .zip(&t.targets_always)
            .map(|(&s, &a)| match (s, a) {
                (_, true) => Some(true),
                (false, _) => Some(false),
                _ => None,
            })
            .collect(),
        binary_case: c == 2 && ids.len() == 1,
        all_positive,
        post,
    };
    super::classify::finish_tree_classifier(ctx, raw, &labels, &spec)
}

/// TreeEnsemble (ai.onnx.ml opset 5): nodes and leaves in parallel arrays, thresholds and
/// weights as tensors of X's type, set membership.
pub fn tree_ensemble(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x0 = ctx.input(0)?;
    let xdt = crate::frontend::build::expect_types(
        ctx,
        x0,
        "input X",
        &[DType::F32, DType::F64, DType::F16],
    )?;
    let tensor = |ctx: &Ctx, name: &str| -> Result<Option<Vec<f64>>> {
        Ok(ctx.attr_t(name)?.map(|t| t.to_f64s()))
    };
    let splits = tensor(ctx, "nodes_splits")?
        .ok_or_else(|| ctx.err("attribute 'nodes_splits' (a tensor) is required"))?;
    let weights = tensor(ctx, "leaf_weights")?
        .ok_or_else(|| ctx.err("attribute 'leaf_weights' (a tensor) is required"))?;
    let featureids = ints(ctx, "nodes_featureids");
    let modes = ctx
        .attr_t("nodes_modes")?
        .map(|t| t.to_i64s())
        .ok_or_else(|| ctx.err("attribute 'nodes_modes' (a uint8 tensor) is required"))?;
    let trues = ints(ctx, "nodes_truenodeids");
    let falses = ints(ctx, "nodes_falsenodeids");
    let true_leaf = ints(ctx, "nodes_trueleafs");
    let false_leaf = ints(ctx, "nodes_falseleafs");
    let targets = ints(ctx, "leaf_targetids");
    let tree_roots = ints(ctx, "tree_roots");
    let n_targets = ctx
        .attr_i("n_targets")?
        .ok_or_else(|| ctx.err("attribute 'n_targets' is required"))?;
    let missing = ctx
        .attr_t("nodes_missing_value_tracks_true")?
        .map(|t| t.to_i64s());
    let membership = tensor(ctx, "membership_values")?;
    let n = splits.len();
    same_length(
        ctx,
        n,
        &[
            ("nodes_featureids", featureids.len()),
            ("nodes_modes", modes.len()),
            ("nodes_truenodeids", trues.len()),
            ("nodes_falsenodeids", falses.len()),
            ("nodes_trueleafs", true_leaf.len()),
            ("nodes_falseleafs", false_leaf.len()),
        ],
    )?;
    if let Some(m) = &missing {
        same_length(ctx, n, &[("nodes_missing_value_tracks_true", m.len())])?;
    }
    same_length(ctx, weights.len(), &[("leaf_targetids", targets.len())])?;
    if n_targets < 1 {
        return Err(ctx.err(format!(
            "attribute 'n_targets' is {n_targets}; it must be positive"
        )));
    }
    let mut leaves = Vec::with_capacity(weights.len());
    for (k, (&t, &w)) in targets.iter().zip(&weights).enumerate() {
        if t < 0 || t >= n_targets {
            return Err(ctx.err(format!(
                "leaf_targetids[{k}] is {t}; the ensemble has {n_targets} targets"
            )));
        }
        leaves.push(vec![(t as u32, w)]);
    }
    let nl = leaves.len();
    let mut members = membership.as_deref().unwrap_or(&[]).split(|v| v.is_nan());
    let mut srcs = Vec::with_capacity(n);
    for k in 0..n {
        let r = match modes[k] {
            0 => Rule::Leq,
            1 => Rule::Lt,
            2 => Rule::Gte,
            3 => Rule::Gt,
            4 => Rule::Eq,
            5 => Rule::Neq,
            6 => Rule::Member,
            m => {
                return Err(ctx.err(format!(
                    "nodes_modes[{k}] is {m}; expected 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER)"
                )));
            }
        };
        let values = if r == Rule::Member {
            members
                .next()
                .ok_or_else(|| {
                    ctx.err(format!(
                        "node {k} is a set membership test, but 'membership_values' has no \
                         (more) NaN-separated sets"
                    ))
                })?
                .to_vec()
        } else {
            vec![splits[k]]
        };
        let side = |id: i64, leaf: i64, what: &str| -> Result<Child> {
            let limit = if leaf != 0 { nl } else { n };
            if id < 0 || id as usize >= limit {
                return Err(ctx.err(format!(
                    "node {k}'s {what} child is {} {id}, out of range ({limit} of them)",
                    if leaf != 0 { "leaf" } else { "node" }
                )));
            }
            Ok(if leaf != 0 {
                Child::Leaf(id as usize)
            } else {
                Child::Node(id as usize)
            })
        };
        srcs.push(Src::Branch {
            rule: r,
            feature: featureids[k],
            values,
            tracks_true: missing.as_ref().is_some_and(|m| m[k] != 0),
            t: side(trues[k], true_leaf[k], "true")?,
            f: side(falses[k], false_leaf[k], "false")?,
        });
    }
    // A root whose both children are the same leaf is that leaf (a tree of one leaf).
    let mut roots = Vec::with_capacity(tree_roots.len());
    for &r in &tree_roots {
        if r < 0 || r as usize >= n {
            return Err(ctx.err(format!("tree root {r} is out of range ({n} nodes)")));
        }
        let r = r as usize;
        if true_leaf[r] != 0 && false_leaf[r] != 0 && trues[r] == falses[r] {
            srcs.push(Src::Leaf(trues[r] as usize));
            roots.push(srcs.len() - 1);
        } else {
            roots.push(r);
        }
    }
    let (aggregate, average) = match ctx.attr_i_or("aggregate_function", 1)? {
        0 => (Aggregate::Sum, true),
        1 => (Aggregate::Sum, false),
        2 => (Aggregate::Min, false),
        3 => (Aggregate::Max, false),
        a => {
            return Err(ctx.err(format!(
                "attribute 'aggregate_function' is {a}; expected 0 (AVERAGE), 1 (SUM), 2 (MIN) \
                 or 3 (MAX)"
            )));
        }
    };
    let post = match ctx.attr_i_or("post_transform", 0)? {
        0 => Post::None,
        1 => Post::Softmax,
        2 => Post::Logistic,
        3 => Post::SoftmaxZero,
        4 => Post::Probit,
        p => {
            return Err(ctx.err(format!(
                "attribute 'post_transform' is {p}; expected 0 (NONE) to 4 (PROBIT)"
            )));
        }
    };
    let f64_input = xdt == DType::F64;
    let x = super::input_rows(ctx, true)?;
    let nf = ctx.known_shape(x)?[1];
    let f = forest(
        ctx, &srcs, leaves, &roots, f64_input, f64_input, aggregate, nf, n_targets,
    )?;
    let raw = run_forest(ctx, x, &f)?;
    // Output in X's type: averaging in the accumulation type, then the transform (float32).
    let dt = ctx.dtype(raw);
    let n_trees = roots.len();
    let shape = ctx.shape(raw);
    let v = expr::load(dt, 0, vec![expr::var(0), expr::var(1)]);
    let v = if average {
        expr::binary(BinOp::Div, v, expr::f(dt, n_trees as f64))
    } else {
        v
    };
    if post == Post::None {
        return Ok(vec![ctx.map(xdt, shape, vec![raw], expr::cast(v, xdt))?]);
    }
    let y = ctx.map(
        DType::F32,
        shape.clone(),
        vec![raw],
        expr::cast(v, DType::F32),
    )?;
    let y = if n_targets == 1 && post != Post::Probit {
        y
    } else {
        super::transform_rows(ctx, y, post)?
    };
    Ok(vec![crate::frontend::build::cast(ctx, y, xdt)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_round_exactly_into_float32() {
        let t = 0.1f64; // between two float32 values
        let d = round_down(t, false);
        assert!(d < t && (d as f32).next_up() as f64 > t);
        assert_eq!(below(t, false), d);
        let e = 0.5f64; // a float32 value
        assert_eq!(round_down(e, false), e);
        assert_eq!(below(e, false), 0.5f32.next_down() as f64);
        assert!(below(f64::NEG_INFINITY, false).is_nan());
        assert_eq!(round_down(1e300, false), f32::MAX as f64);
        assert_eq!(round_down(-1e300, false), f64::NEG_INFINITY);
        assert_eq!(below(0.1, true), 0.1f64.next_down());
    }

    /// Every rule against every interesting input, float32 and float64, through the
    /// canonical forest's reference walk.
    #[test]
    fn canonical_rules_match_direct_comparisons() {
        let g = crate::ir::Graph::new("t");
        let _ = g;
        let thresholds = [0.5, 0.1, -2.0, 1e300, f64::INFINITY, f64::NEG_INFINITY];
        let xs = [
            0.5f64,
            0.5f32.next_down() as f64,
            0.5f32.next_up() as f64,
            0.1f32 as f64,
            0.1,
            -2.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            3.0,
        ];
        let rules = [
            Rule::Leq,
            Rule::Lt,
            Rule::Gte,
            Rule::Gt,
            Rule::Eq,
            Rule::Neq,
            Rule::Member,
        ];
        for f64_input in [false, true] {
            for &r in &rules {
                for &t in &thresholds {
                    for tracks in [false, true] {
                        let values = if r == Rule::Member {
                            vec![t, 3.0, 0.5]
                        } else {
                            vec![t]
                        };
                        let srcs = vec![Src::Branch {
                            rule: r,
                            feature: 0,
                            values: values.clone(),
                            tracks_true: tracks,
                            t: Child::Leaf(0),
                            f: Child::Leaf(1),
                        }];
                        let leaves = vec![vec![(0, 1.0)], vec![(0, 0.0)]];
                        let node_proto = onnxc_proto::NodeProto::default();
                        let mut gg = crate::ir::Graph::new("t");
                        let dir = crate::frontend::tensor::DataDir::default();
                        let ctx =
                            Ctx::new(&mut gg, &node_proto, Default::default(), 5, vec![], &dir, 0);
                        let f = forest(
                            &ctx,
                            &srcs,
                            leaves,
                            &[0],
                            f64_input,
                            true,
                            Aggregate::Sum,
                            1,
                            1,
                        )
                        .unwrap();
                        let enc = onnxc_runtime::tree::encode(&f).unwrap();
                        let mut scratch =
                            vec![0u64; onnxc_runtime::tree::scratch_bytes(&enc).div_ceil(8)];
                        for &x in &xs {
                            let xv = if f64_input { x } else { x as f32 as f64 };
                            let want = if xv.is_nan() {
                                tracks || r == Rule::Neq
                            } else {
                                match r {
                                    Rule::Leq => xv <= t,
                                    Rule::Lt => xv < t,
                                    Rule::Gte => xv >= t,
                                    Rule::Gt => xv > t,
                                    Rule::Eq => xv == t,
                                    Rule::Neq => xv != t,
                                    Rule::Member => values.contains(&xv),
                                }
                            };
                            let got = onnxc_runtime::tree::reference(&f, &[xv], 1)[0] == 1.0;
                            assert_eq!(
                                got, want,
                                "{r:?} t={t} x={xv} tracks={tracks} f64={f64_input}"
                            );
                            // The kernel, on the encoded forest (values summed in float64).
                            let (x32, x64, mut y) = ([xv as f32], [xv], [0f64]);
                            // SAFETY: the forest was encoded for this input type, with
                            // float64 values; one row in, one value out, its scratch.
                            let status = unsafe {
                                onnxc_runtime::tree::onnxc_tree_ensemble(
                                    enc.as_ptr(),
                                    if f64_input {
                                        x64.as_ptr() as *const u8
                                    } else {
                                        x32.as_ptr() as *const u8
                                    },
                                    y.as_mut_ptr() as *mut u8,
                                    1,
                                    scratch.as_mut_ptr() as *mut u8,
                                )
                            };
                            assert_eq!(status, onnxc_runtime::abi::ONNXC_OK);
                            assert_eq!(
                                y[0] == 1.0,
                                want,
                                "kernel: {r:?} t={t} x={xv} tracks={tracks} f64={f64_input}"
                            );
                        }
                    }
                }
            }
        }
    }
}
