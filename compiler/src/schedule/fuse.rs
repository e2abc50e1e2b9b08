//! Graph → steps. Decides which maps are inlined into their consumers and which reductions
//! take their elementwise consumer as an epilogue, by fusion kind and cost, never by op name.

use super::epilogue::{Matched, match_epilogue, reads_own_element};
use super::{EPILOGUE_ACC, Io, KernelEpilogue, SValue, Schedule, Step, StepKind, Storage, SvId};
use crate::error::{Error, Result};
use crate::ir::dim::known_dims;
use crate::ir::expr::{self, E, ExprKind};
use crate::ir::{Graph, NodeId, Op, Tensor, ValueId};
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
pub struct FuseOptions {
    /// Inline producers into consumers (off at -O0).
    pub inline: bool,
    /// Fuse elementwise consumers into reductions.
    pub epilogues: bool,
    /// Channel-blocked layouts (`layout.rs`).
    pub layout: super::layout::LayoutOptions,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            inline: true,
            epilogues: true,
            layout: super::layout::LayoutOptions {
                blocked: true,
                wide_simd: false,
                no_winograd: false,
                by_size: true,
                decide_at: None,
            },
        }
    }
}

/// Whether a map body is cheap enough to recompute in several places.
fn cheap(body: &E) -> bool {
    if expr::dag_size(body) > MAX_RECOMPUTED_NODES {
        return false;
    }
    let mut ok = true;
    expr::rewrite(body, &mut |e| {
        if let ExprKind::Unary(op, _) = e.kind
            && !op.is_cheap()
        {
            ok = false;
        }
        if let ExprKind::Binary(expr::BinOp::Pow, _, _) = e.kind {
            ok = false;
        }
        None
    });
    ok
}

/// Whether map `id` will carry an expensive expression once its inputs' maps are inlined
/// into it: an input produced by a map that is not `cheap` and read by `id` alone (so it is
/// inlined there), directly or through up to `depth` such single-use maps. SiLU is
/// `Mul(x, Sigmoid(x))`: the Mul's own body is cheap, but inlining it into several
/// consumers — EfficientNet's squeeze-excitation pool and scaling — computed the sigmoid
/// once per consumer in 4-lane generated code (1.8× onnxruntime's time on an
/// EfficientNet-style network); kept as a step of its own it runs once, through the
/// runtime's activation kernel.
fn feeds_expensive(g: &Graph, id: NodeId, depth: usize) -> bool {
    if depth == 0 {
        return false;
    }
    g.node(id).inputs.iter().any(|v| {
        let p = v.node;
        let Op::Map(pm) = &g.node(p).op else {
            return false;
        };
        let mut users: Vec<NodeId> = g.users(p).iter().map(|u| u.0).collect();
        users.dedup();
        users == [id] && (!cheap(&pm.body) || feeds_expensive(g, p, depth - 1))
    })
}

/// Whether map consumer `u` reads map `id`'s result broadcast — some loop of `u` (of extent
/// above 1) indexes none of its loads of `id` — and `id` computes something (not only
/// loads): inlined, each value would be computed again for every element it is broadcast
/// to. A BERT export's padding mask, `(1 − Cast(mask)) · −10000` over `[batch, 1, 1, seq]`,
/// added to scores of `[batch, heads, seq, seq]` converted an int64 per score: 1.9 ms of a
/// 32 ms encoder at seq 512 on Zen 3, where the mask alone is 512 values. The test reads
/// the expressions, not the sizes (beyond extent 1), so a run-time dim's values, at which
/// the model is lowered and whose programs must agree (`loops::dims`), decide alike.
fn broadcasts_computed(g: &Graph, id: NodeId, u: NodeId) -> bool {
    let (Op::Map(m), Op::Map(um)) = (&g.node(id).op, &g.node(u).op) else {
        return false;
    };
    // A body that is one load (a copy, a transposition) or a constant computes nothing.
    if matches!(m.body.kind, ExprKind::Load { .. } | ExprKind::Const(_)) {
        return false;
    }
    let Some(dims) = known_dims(&g.value_type(u.out(0)).shape) else {
        return false;
    };
    // The index expressions of `u`'s loads of `id`.
    let inputs = &g.node(u).inputs;
    let (mut reads, mut index) = (false, Vec::<E>::new());
    expr::rewrite(&um.body, &mut |e| {
        if let ExprKind::Load { input, index: at } = &e.kind
            && inputs.get(*input as usize).is_some_and(|v| v.node == id)
        {
            reads = true;
            index.extend(at.iter().cloned());
        }
        None
    });
    let indexes = |v: usize| index.iter().any(|x| expr::depends_on(x, v as u32));
    reads && dims.iter().enumerate().any(|(v, &d)| d > 1 && !indexes(v))
}

/// Largest expression (in nodes, its inlined producers included) that a map inlined into
/// several consumers may carry: each of them computes it again (`cheap`'s own bound).
const MAX_RECOMPUTED_NODES: usize = 24;

/// Largest expression (in nodes) a fused map or reduction is allowed to grow to by inlining.
/// Real chains stay far below it (a GELU or a LayerNorm is a few dozen); a chain of thousands
/// of elementwise ops would otherwise become one expression whose every inlining step
/// rewrites all of it (quadratic time, and recursion as deep as the chain).
const MAX_FUSED_NODES: usize = 256;

/// How many distinct loads of each input `body` has (each is replaced by a copy of the
/// producer's body when that producer is inlined).
fn load_counts(body: &E) -> HashMap<u32, usize> {
    let mut counts = HashMap::new();
    let mut seen = HashSet::new();
    fn go(e: &E, counts: &mut HashMap<u32, usize>, seen: &mut HashSet<*const expr::Expr>) {
        if !seen.insert(std::sync::Arc::as_ptr(e)) {
            return;
        }
        if let ExprKind::Load { input, .. } = e.kind {
            *counts.entry(input).or_insert(0) += 1;
        }
        for c in e.children() {
            go(c, counts, seen);
        }
    }
    go(body, &mut counts, &mut seen);
    counts
}

/// Keeps every fused body within `MAX_FUSED_NODES`: in topological order, estimates each
/// map's or reduction's size once its inlined producers are substituted (an upper bound:
/// a producer's own estimate per load of it), and while a consumer is over the limit
/// materializes its largest inlined producer instead.
fn bound_fused_size(g: &Graph, order: &[NodeId], inline: &mut HashSet<NodeId>) {
    if inline.is_empty() {
        return;
    }
    let mut est: HashMap<NodeId, usize> = HashMap::new();
    for &id in order {
        let Some(body) = body_of(g, id) else { continue };
        let inputs = &g.node(id).inputs;
        let mut parts: Vec<(NodeId, usize)> = load_counts(body)
            .into_iter()
            .filter_map(|(k, loads)| {
                let p = inputs.get(k as usize)?.node;
                inline
                    .contains(&p)
                    .then(|| (p, loads.saturating_mul(est.get(&p).copied().unwrap_or(1))))
            })
            .collect();
        let mut total = parts
            .iter()
            .fold(expr::dag_size(body), |t, &(_, n)| t.saturating_add(n));
        parts.sort_by_key(|&(p, n)| (std::cmp::Reverse(n), p.0.index()));
        for (p, n) in parts {
            if total <= MAX_FUSED_NODES {
                break;
            }
            inline.remove(&p);
            total -= n;
        }
        // A map recomputed by several consumers must stay cheap with its own inlined
        // producers: a chain of such maps (residual sums kept in float32 between quantized
        // convolutions) would otherwise recompute the whole chain in every consumer.
        if total > MAX_RECOMPUTED_NODES && inline.contains(&id) && {
            let mut users: Vec<NodeId> = g.users(id).iter().map(|u| u.0).collect();
            users.dedup();
            users.len() > 1
        } {
            inline.remove(&id);
        }
        est.insert(id, total);
    }
}

fn body_of(g: &Graph, id: NodeId) -> Option<&E> {
    match &g.node(id).op {
        Op::Map(m) => Some(&m.body),
        Op::Reduce(r) => Some(&r.body),
        _ => None,
    }
}

/// The node's body with inlined producers substituted, and its remaining operands.
fn expand(g: &Graph, id: NodeId, inline: &HashSet<NodeId>) -> (E, Vec<ValueId>) {
    let mut body = body_of(g, id)
        .expect("expand is called on map/reduce nodes")
        .clone();
    let mut operands = g.node(id).inputs.clone();
    loop {
        let mut used = Vec::new();
        expr::used_inputs(&body, &mut used);
        let Some(k) = used
            .iter()
            .copied()
            .find(|&k| inline.contains(&operands[k as usize].node))
        else {
            break;
        };
        let p = operands[k as usize].node;
        let pbody = body_of(g, p).expect("only maps are inlined").clone();
        let map: Vec<u32> = g
            .node(p)
            .inputs
            .iter()
            .map(|v| match operands.iter().position(|o| o == v) {
                Some(i) => i as u32,
                None => {
                    operands.push(*v);
                    operands.len() as u32 - 1
                }
            })
            .collect();
        let pbody = expr::round_to_storage(expr::remap_inputs(&pbody, &map));
        body = expr::rewrite(&body, &mut |e| match &e.kind {
            ExprKind::Load { input, index } if *input == k => {
                Some(expr::substitute_vars(&pbody, index))
            }
            _ => None,
        });
    }
    compact(body, operands)
}

/// Drops operands the body no longer loads, renumbering loads.
fn compact(body: E, operands: Vec<ValueId>) -> (E, Vec<ValueId>) {
    let mut used = Vec::new();
    expr::used_inputs(&body, &mut used);
    used.sort();
    let mut map = vec![u32::MAX; operands.len()];
    let mut out = Vec::new();
    for &k in &used {
        if k == EPILOGUE_ACC {
            continue;
        }
        map[k as usize] = out.len() as u32;
        out.push(operands[k as usize]);
    }
    let body = expr::rewrite(&body, &mut |e| match &e.kind {
        ExprKind::Load { input, index } if *input != EPILOGUE_ACC => {
            let index: Vec<E> = index.iter().map(|i| expr::remap_inputs(i, &map)).collect();
            Some(expr::load(e.dtype, map[*input as usize], index))
        }
        _ => None,
    });
    (body, out)
}

/// A GEMM/conv node and the chain of elementwise maps fused into its epilogue.
struct Chain {
    /// The maps absorbed, in order; the last one's value is the step's output.
    maps: Vec<NodeId>,
    matched: Matched,
    /// The residual operand, as a graph value.
    residual: Option<ValueId>,
}

/// Finds, for a Conv/MatMul node, the longest chain of single-use maps that fits the kernel
/// epilogue. `ready` says whether a value is computed before the kernel runs.
fn epilogue_chain(
    g: &Graph,
    a: NodeId,
    outputs: &HashSet<ValueId>,
    ready: &dyn Fn(ValueId) -> bool,
) -> Option<Chain> {
    let n = g.node(a);
    let out = &n.outputs[0];
    if out.dtype != crate::ir::DType::F32 {
        return None;
    }
    let dims = known_dims(&out.shape)?;
    let rank = dims.len();
    let (chan, weights_const) = match &n.op {
        // Scales folded into an exact convolution's weights would round its products.
        Op::Conv(c) if c.exact => return None,
        Op::Conv(_) => (1, g.const_value(n.inputs[1]).is_some()),
        Op::MatMul(m) => {
            let b = g.value_type(n.inputs[1]);
            let single = b.shape[..b.shape.len() - 2].iter().all(|d| d.is_one());
            (
                rank - 1,
                single && g.const_value(n.inputs[1]).is_some() && !m.trans_a,
            )
        }
        _ => return None,
    };
    // body: the composed chain over `operands`; operand 0 is the kernel's result.
    let mut operands: Vec<ValueId> = vec![a.out(0)];
    let mut body: E = expr::load(out.dtype, 0, (0..rank as u32).map(expr::var).collect());
    let mut cur = a.out(0);
    let mut maps = Vec::new();
    let mut best = None;
    loop {
        if outputs.contains(&cur) {
            break;
        }
        let users = g.value_users(cur);
        let [(c, _)] = users.as_slice() else { break };
        let c = *c;
        let Op::Map(m) = &g.node(c).op else { break };
        if g.value_type(c.out(0)).shape != out.shape {
            break;
        }
        let cops = &g.node(c).inputs;
        let kcur = cops.iter().position(|&v| v == cur)? as u32;
        if !loads_identity(&m.body, kcur, rank) || !cops.iter().all(|&v| v == cur || ready(v)) {
            break;
        }
        // Substitute the chain so far for the loads of `cur`; renumber the other operands.
        let map: Vec<u32> = cops
            .iter()
            .map(|v| {
                if *v == cur {
                    u32::MAX
                } else if let Some(p) = operands.iter().position(|o| o == v) {
                    p as u32
                } else {
                    operands.push(*v);
                    operands.len() as u32 - 1
                }
            })
            .collect();
        let prev = body.clone();
        body = expr::rewrite(&m.body, &mut |e| match &e.kind {
            ExprKind::Load { input, .. } if *input == kcur => Some(prev.clone()),
            ExprKind::Load { input, index } => {
                Some(expr::load(e.dtype, map[*input as usize], index.clone()))
            }
            _ => None,
        });
        maps.push(c);
        cur = c.out(0);
        if let Some(mt) = match_epilogue(g, &body, &operands, 0, &dims, chan)
            && (mt.scale.is_none() || weights_const)
        {
            let residual = mt.residual.map(|r| operands[r as usize]);
            best = Some(Chain {
                maps: maps.clone(),
                matched: mt,
                residual,
            });
        }
    }
    best
}

/// Whether every load of operand `k` in `body`, a map over a tensor of rank `rank`, reads
/// exactly the element the map computes (`epilogue::reads_own_element`).
fn loads_identity(body: &E, k: u32, rank: usize) -> bool {
    let mut ok = true;
    expr::rewrite(body, &mut |e| {
        if let ExprKind::Load { input, index } = &e.kind
            && *input == k
        {
            ok &= reads_own_element(index, rank);
        }
        None
    });
    ok
}

pub fn schedule(g: &Graph, opts: &FuseOptions) -> Result<Schedule> {
    let order = g.topo_order();
    let outputs: HashSet<ValueId> = g.outputs.iter().map(|o| o.value).collect();
    for id in &order {
        let n = g.node(*id);
        for t in &n.outputs {
            if let Some(dims) = known_dims(&t.shape)
                && let Err(e) = crate::ir::dim::check_size(&dims)
            {
                return Err(Error::Model(if n.origin.op_type.is_empty() {
                    format!("value '{}': {e}", n.name)
                } else {
                    format!("{}: {e}", n.origin)
                }));
            }
            if known_dims(&t.shape).is_none() {
                return Err(Error::NeedShape(format!(
                    "{}: output shape {} is not known at compile time; fix the symbolic input dims with --shape INPUT=D0,D1,…",
                    if n.origin.op_type.is_empty() {
                        format!("value '{}'", n.name)
                    } else {
                        n.origin.to_string()
                    },
                    crate::ir::dim::fmt_shape(&t.shape)
                )));
            }
        }
    }
    // 1. Epilogue chains of GEMM/conv nodes (decided first: they take precedence over inlining).
    let pos: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut chains: HashMap<NodeId, Chain> = HashMap::new();
    let mut absorbed_by: HashMap<NodeId, NodeId> = HashMap::new();
    let mut keep: HashSet<NodeId> = HashSet::new();
    if opts.epilogues {
        for &id in &order {
            if !matches!(g.node(id).op, Op::Conv(_) | Op::MatMul(_)) {
                continue;
            }
            // Ready: inputs/constants, or values computed by earlier non-map nodes or chains.
            let ready = |v: ValueId| {
                let p = v.node;
                match &g.node(p).op {
                    Op::Input | Op::Const(_) => true,
                    _ => {
                        pos[&p] < pos[&id]
                            && (!absorbed_by.contains_key(&p)
                                || chains.values().any(|c| c.maps.last() == Some(&p)))
                    }
                }
            };
            if let Some(ch) = epilogue_chain(g, id, &outputs, &ready) {
                for &m in &ch.maps {
                    absorbed_by.insert(m, id);
                }
                if let Some(r) = ch.residual {
                    keep.insert(r.node);
                }
                chains.insert(id, ch);
            }
        }
    }
    // 2. Which maps are inlined into their consumers.
    let mut inline: HashSet<NodeId> = HashSet::new();
    if opts.inline {
        for &id in order.iter().rev() {
            let n = g.node(id);
            let Op::Map(m) = &n.op else { continue };
            if outputs.contains(&id.out(0)) || absorbed_by.contains_key(&id) || keep.contains(&id) {
                continue;
            }
            let users = g.users(id);
            let mut distinct: Vec<NodeId> = users.iter().map(|u| u.0).collect();
            distinct.dedup();
            if distinct.is_empty() {
                continue;
            }
            let consumers_ok = distinct
                .iter()
                .all(|&u| matches!(g.node(u).op, Op::Map(_) | Op::Reduce(_)));
            let into_reduce = distinct
                .iter()
                .any(|&u| matches!(g.node(u).op, Op::Reduce(_)));
            let is_cheap = cheap(&m.body) && !feeds_expensive(g, id, 8);
            let ok = consumers_ok
                && !distinct.iter().any(|&u| broadcasts_computed(g, id, u))
                && (if into_reduce {
                    is_cheap
                } else {
                    distinct.len() == 1 || (is_cheap && distinct.len() <= 4)
                });
            if ok {
                inline.insert(id);
            }
        }
    }
    bound_fused_size(g, &order, &mut inline);
    // 3. Values and steps.
    let mut s = Schedule {
        name: g.name.clone(),
        values: Vec::new(),
        steps: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        arena_size: 0,
    };
    let mut sv: HashMap<ValueId, SvId> = HashMap::new();
    let shape_of = |v: ValueId| known_dims(&g.value_type(v).shape).expect("checked above");
    let new_value = |s: &mut Schedule, v: ValueId, storage: Storage| -> SvId {
        let t = g.value_type(v);
        s.values.push(SValue {
            name: g.node(v.node).name.clone(),
            dtype: t.dtype,
            shape: shape_of(v),
            storage,
        });
        s.values.len() - 1
    };
    for (k, io) in g.inputs.iter().enumerate() {
        let id = new_value(&mut s, io.value, Storage::Input(k));
        sv.insert(io.value, id);
        s.inputs.push(Io {
            name: io.name.clone(),
            value: id,
            keys: None,
            packed: io.packed.clone(),
            map: io.map,
        });
    }
    let mut absorbed: HashMap<NodeId, NodeId> = HashMap::new(); // epilogue map node -> reduce node
    for &id in &order {
        let n = g.node(id);
        if inline.contains(&id) || absorbed.contains_key(&id) || absorbed_by.contains_key(&id) {
            continue;
        }
        let operand = |s: &mut Schedule, sv: &mut HashMap<ValueId, SvId>, v: ValueId| -> SvId {
            if let Some(&x) = sv.get(&v) {
                return x;
            }
            // Constants materialize on first use.
            let t = g
                .const_value(v)
                .expect("operands are materialized before use")
                .clone();
            s.values.push(SValue {
                name: g.node(v.node).name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                storage: Storage::Const(t),
            });
            let x = s.values.len() - 1;
            sv.insert(v, x);
            x
        };
        let (kind, operands, out_node): (StepKind, Vec<ValueId>, NodeId) = match &n.op {
            Op::Input | Op::Const(_) => continue,
            Op::Reshape => {
                let src = operand(&mut s, &mut sv, n.inputs[0]);
                let x = new_value(&mut s, id.out(0), Storage::View(src));
                sv.insert(id.out(0), x);
                continue;
            }
            Op::Map(_) => {
                let (body, ops) = expand(g, id, &inline);
                (StepKind::Map { body }, ops, id)
            }
            Op::Reduce(r) => {
                let (body, mut ops) = expand(g, id, &inline);
                let mut epilogue = None;
                let mut out_node = id;
                let users = g.users(id);
                if opts.epilogues && !outputs.contains(&id.out(0)) && users.len() == 1 {
                    let c = users[0].0;
                    if matches!(g.node(c).op, Op::Map(_))
                        && !inline.contains(&c)
                        && g.value_type(c.out(0)).shape == n.outputs[0].shape
                    {
                        let (cbody, cops) = expand(g, c, &inline);
                        let rank = n.outputs[0].shape.len();
                        let kr = cops.iter().position(|&v| v == id.out(0));
                        // The consumer's other operands must already be computed.
                        let ready = cops.iter().all(|v| {
                            *v == id.out(0) || sv.contains_key(v) || g.const_value(*v).is_some()
                        });
                        if let Some(kr) = kr
                            && ready
                            && loads_identity(&cbody, kr as u32, rank)
                        {
                            let mut map = Vec::new();
                            for (j, v) in cops.iter().enumerate() {
                                if j == kr {
                                    map.push(EPILOGUE_ACC);
                                } else if let Some(p) = ops.iter().position(|o| o == v) {
                                    map.push(p as u32);
                                } else {
                                    ops.push(*v);
                                    map.push(ops.len() as u32 - 1);
                                }
                            }
                            let e = expr::rewrite(&cbody, &mut |e| match &e.kind {
                                ExprKind::Load { input, .. } if *input as usize == kr => {
                                    Some(expr::round_to_storage(expr::load(
                                        e.dtype,
                                        EPILOGUE_ACC,
                                        vec![],
                                    )))
                                }
                                ExprKind::Load { input, index } => Some(expr::load(
                                    e.dtype,
                                    map[*input as usize],
                                    index.iter().map(|i| expr::remap_inputs(i, &map)).collect(),
                                )),
                                _ => None,
                            });
                            epilogue = Some(e);
                            absorbed.insert(c, id);
                            out_node = c;
                        }
                    }
                }
                (
                    StepKind::Reduce {
                        kind: r.kind,
                        extents: r.extents.clone(),
                        body,
                        epilogue,
                    },
                    ops,
                    out_node,
                )
            }
            Op::MatMul(_) | Op::Conv(_) => {
                let (step, out_node) = kernel_step(g, id, chains.get(&id), &mut s, &mut |s, v| {
                    operand(s, &mut sv, v)
                })?;
                let output = new_value(&mut s, out_node.out(0), Storage::Arena(0));
                sv.insert(out_node.out(0), output);
                let mut origins = vec![n.origin.clone()];
                origins.extend(
                    chains
                        .get(&id)
                        .map(|c| {
                            c.maps
                                .iter()
                                .map(|m| g.node(*m).origin.clone())
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default(),
                );
                s.steps.push(Step {
                    output,
                    origins,
                    ..step
                });
                continue;
            }
            Op::Concat { axis } => (StepKind::Concat { axis: *axis }, n.inputs.clone(), id),
            Op::Scatter(sc) => (StepKind::Scatter(sc.clone()), n.inputs.clone(), id),
            Op::Pool(p) => (StepKind::Pool(p.clone()), n.inputs.clone(), id),
            Op::Kernel(k) => (StepKind::Kernel(k.clone()), n.inputs.clone(), id),
            Op::Assert { code } => (StepKind::Assert { code: *code }, n.inputs.clone(), id),
        };
        let inputs: Vec<SvId> = operands
            .iter()
            .map(|&v| operand(&mut s, &mut sv, v))
            .collect();
        let output = new_value(&mut s, out_node.out(0), Storage::Arena(0));
        sv.insert(out_node.out(0), output);
        let mut origins = vec![n.origin.clone()];
        // An epilogue from the same ONNX node (a GlobalAveragePool's sum and division) is
        // named once.
        if out_node != id && g.node(out_node).origin != n.origin {
            origins.push(g.node(out_node).origin.clone());
        }
        s.steps.push(Step {
            kind,
            inputs,
            output,
            origins,
            epilogue: None,
        });
    }
    // Layouts, before concat inputs are placed in their output (a blocked concat's inputs
    // are blocked slices).
    let out_svs: Vec<SvId> = g
        .outputs
        .iter()
        .filter_map(|o| sv.get(&o.value).copied())
        .collect();
    if opts.inline {
        super::views::absorb_transposes(&mut s, &out_svs);
        super::softmax_scale::fold(&mut s, &out_svs);
        super::attention::fuse(&mut s, &out_svs);
    }
    super::layout::assign(&mut s, &out_svs, &opts.layout);
    if opts.inline {
        super::views::absorb_channel_gathers(&mut s, &out_svs);
        super::lut::tabulate(&mut s, opts.layout.by_size, g.narrow_tables);
        super::quant_maps::to_kernels(&mut s);
        super::quant_depthwise::fuse(&mut s);
    }
    place_concat_inputs(&mut s);
    // 4. Graph outputs live in caller memory: place the producing buffer there, or copy.
    for (k, o) in g.outputs.iter().enumerate() {
        let v = match sv.get(&o.value) {
            Some(&v) => v,
            None => {
                let t = g
                    .const_value(o.value)
                    .ok_or_else(|| Error::Internal(format!("output '{}' has no value", o.name)))?
                    .clone();
                s.values.push(SValue {
                    name: o.name.clone(),
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    storage: Storage::Const(t),
                });
                s.values.len() - 1
            }
        };
        let root = s.root(v);
        let produced_here = s.steps.iter().any(|st| st.output == root);
        let target = if matches!(s.values[root].storage, Storage::Arena(_))
            && produced_here
            && s.values[root].len() == s.values[v].len()
        {
            s.values[root].storage = Storage::Output(k);
            v
        } else {
            let src = &s.values[v];
            s.values.push(SValue {
                name: o.name.clone(),
                dtype: src.dtype,
                shape: src.shape.clone(),
                storage: Storage::Output(k),
            });
            let dst = s.values.len() - 1;
            s.steps.push(Step {
                kind: StepKind::Copy,
                inputs: vec![v],
                output: dst,
                origins: vec![],
                epilogue: None,
            });
            dst
        };
        s.outputs.push(Io {
            name: o.name.clone(),
            value: target,
            keys: o.keys.clone(),
            packed: o.packed.clone(),
            map: None,
        });
    }
    Ok(s)
}

fn f32_tensor(dims: Vec<i64>, v: &[f32]) -> Tensor {
    Tensor::new(
        crate::ir::DType::F32,
        dims,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The step of a Conv/MatMul node: weights with the epilogue's scale folded in, the combined
/// bias and the residual as extra inputs. Returns the step (output unset) and the node whose
/// value it produces.
fn kernel_step(
    g: &Graph,
    id: NodeId,
    chain: Option<&Chain>,
    s: &mut Schedule,
    operand: &mut dyn FnMut(&mut Schedule, ValueId) -> SvId,
) -> Result<(Step, NodeId)> {
    let n = g.node(id);
    let new_const = |s: &mut Schedule, name: String, t: Tensor| -> SvId {
        s.values.push(SValue {
            name,
            dtype: t.dtype,
            shape: t.shape.clone(),
            storage: Storage::Const(t),
        });
        s.values.len() - 1
    };
    let mut inputs = vec![operand(s, n.inputs[0])];
    let (kind, out_node) = match &n.op {
        Op::Conv(c) => (
            StepKind::Conv {
                op: c.clone(),
                input_planes: None,
            },
            id,
        ),
        Op::MatMul(m) => (
            StepKind::MatMul {
                op: m.clone(),
                views: [None, None],
            },
            id,
        ),
        _ => return Err(Error::Internal("kernel_step on a non-kernel node".into())),
    };
    let own_bias: Option<Vec<f32>> = match &n.op {
        Op::Conv(_) => n.inputs.get(2).and_then(|&b| g.const_value(b)).map(f32s),
        _ => None,
    };
    let runtime_bias = match &n.op {
        Op::Conv(_) => n
            .inputs
            .get(2)
            .filter(|&&b| g.const_value(b).is_none())
            .copied(),
        _ => None,
    };
    let Some(ch) = chain else {
        inputs.push(operand(s, n.inputs[1]));
        let epilogue = n.inputs.get(2).map(|&b| {
            inputs.push(operand(s, b));
            KernelEpilogue {
                bias: Some(2),
                residual: None,
                lo: f32::NEG_INFINITY,
                hi: f32::INFINITY,
            }
        });
        return Ok((
            Step {
                kind,
                inputs,
                output: 0,
                origins: vec![],
                epilogue,
            },
            out_node,
        ));
    };
    if runtime_bias.is_some() {
        return Err(Error::Internal(
            "epilogue chain on a conv with a run-time bias".into(),
        ));
    }
    let mt = &ch.matched;
    // Weights, with the per-channel scale folded in.
    let w = match &mt.scale {
        None => operand(s, n.inputs[1]),
        Some(scale) => {
            let t = g
                .const_value(n.inputs[1])
                .ok_or_else(|| Error::Internal("scaled epilogue on run-time weights".into()))?;
            let mut v = f32s(t);
            match &n.op {
                Op::Conv(_) => {
                    let per = v.len() / scale.len();
                    for (m, chunk) in v.chunks_mut(per).enumerate() {
                        chunk.iter_mut().for_each(|x| *x *= scale[m]);
                    }
                }
                Op::MatMul(mm) => {
                    let cols = scale.len();
                    for (i, x) in v.iter_mut().enumerate() {
                        // B is [K, N] (scale column i % N) or, transposed, [N, K] (row i / K).
                        let col = if mm.trans_b {
                            i / (t.len() / cols)
                        } else {
                            i % cols
                        };
                        *x *= scale[col];
                    }
                }
                _ => {}
            }
            new_const(
                s,
                format!("{}/folded_weights", n.name),
                f32_tensor(t.shape.clone(), &v),
            )
        }
    };
    inputs.push(w);
    // Bias: the conv's own bias times the scale, plus the chain's bias.
    let nchan = mt
        .scale
        .as_ref()
        .map(|x| x.len())
        .or(mt.bias.as_ref().map(|x| x.len()))
        .or(own_bias.as_ref().map(|x| x.len()));
    let bias = nchan.and_then(|nc| {
        let mut b = vec![0f32; nc];
        let mut any = false;
        if let Some(ob) = &own_bias {
            any = true;
            for (i, x) in b.iter_mut().enumerate() {
                *x = ob[i] * mt.scale.as_ref().map_or(1.0, |sc| sc[i]);
            }
        }
        if let Some(cb) = &mt.bias {
            any = true;
            for (i, x) in b.iter_mut().enumerate() {
                *x += cb[i];
            }
        }
        any.then_some(b)
    });
    let mut epi = KernelEpilogue {
        bias: None,
        residual: None,
        lo: mt.lo,
        hi: mt.hi,
    };
    if let Some(b) = bias {
        let len = b.len() as i64;
        let v = new_const(
            s,
            format!("{}/folded_bias", n.name),
            f32_tensor(vec![len], &b),
        );
        inputs.push(v);
        epi.bias = Some(inputs.len() - 1);
    }
    if let Some(r) = ch.residual {
        inputs.push(operand(s, r));
        epi.residual = Some(inputs.len() - 1);
    }
    let last = *ch.maps.last().expect("a chain has at least one map");
    Ok((
        Step {
            kind,
            inputs,
            output: 0,
            origins: vec![],
            epilogue: Some(epi),
        },
        last,
    ))
}

/// Concats whose inputs are contiguous blocks of the output (all dims before the axis are 1):
/// inputs computed by a step of their own are written straight into their block, and the
/// concat copies only what remains (nothing, usually).
fn place_concat_inputs(s: &mut Schedule) {
    let producer: HashMap<SvId, usize> = s
        .steps
        .iter()
        .enumerate()
        .map(|(i, st)| (st.output, i))
        .collect();
    for i in 0..s.steps.len() {
        let StepKind::Concat { axis } = s.steps[i].kind else {
            continue;
        };
        let out = s.steps[i].output;
        if s.values[out].shape[..axis].iter().any(|&d| d != 1) {
            continue;
        }
        let mut offset = 0u64;
        let mut remaining = Vec::new();
        let inputs = s.steps[i].inputs.clone();
        let mut placed_here: Vec<SvId> = Vec::new();
        for &v in &inputs {
            let len = s.values[v].len() as u64;
            let own = matches!(s.values[v].storage, Storage::Arena(_))
                && producer.get(&v).is_some_and(|&p| p < i)
                && !placed_here.contains(&v)
                && s.values[v].dtype == s.values[out].dtype;
            if own {
                s.values[v].storage = Storage::Slice { of: out, offset };
                placed_here.push(v);
            } else {
                remaining.push((v, offset));
            }
            offset += len;
        }
        if remaining.len() == inputs.len() {
            continue;
        }
        // The concat step now copies only the inputs that live elsewhere.
        s.steps[i].kind = StepKind::ConcatRest {
            parts: remaining.iter().map(|&(_, o)| o).collect(),
        };
        s.steps[i].inputs = remaining.into_iter().map(|(v, _)| v).collect();
    }
}
