//! Common-subexpression elimination: nodes with the same op and operands compute the same
//! value; later duplicates are redirected to the first. Constants are compared by content.
//!
//! Nodes are grouped by their operands and a hash of their op (`op_hash`), and compared
//! only within a group: near-linear in the graph. Grouping by operands alone compared every
//! pair of the nodes reading one value (100,000 slices of one input: 5·10^9 comparisons).

use crate::ir::expr::{E, ExprKind};
use crate::ir::{Graph, NodeId, Op, ValueId};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

pub fn run(g: &mut Graph) -> usize {
    let order = g.topo_order();
    let mut seen: HashMap<(Vec<ValueId>, u64), Vec<NodeId>> = HashMap::new();
    let mut merged = 0;
    for id in order {
        let n = g.node(id);
        if matches!(n.op, Op::Input | Op::Assert { .. }) || n.outputs.len() != 1 {
            continue;
        }
        // Maps of no operand kept from folding (`Graph::keep_expanding`: a Range over each
        // of two run-time dims) stay apart, lest they merge at the values where the dims
        // are equal and not elsewhere.
        if g.keep_expanding && n.inputs.is_empty() && matches!(n.op, Op::Map(_)) {
            continue;
        }
        // Large constants are not worth hashing byte by byte; small ones often repeat.
        if let Op::Const(t) = &n.op
            && t.data.len() > 4096
        {
            continue;
        }
        let key = (n.inputs.clone(), op_hash(&n.op));
        let bucket = seen.get(&key).map(|b| b.as_slice()).unwrap_or(&[]);
        let dup = bucket.iter().copied().find(|&o| {
            let m = g.node(o);
            m.op == n.op && m.outputs == n.outputs
        });
        match dup {
            Some(o) => {
                g.replace_uses(id.out(0), o.out(0));
                merged += 1;
            }
            None => seen.entry(key).or_default().push(id),
        }
    }
    merged
}

/// Expression nodes `op_hash` reads of each expression: enough to tell apart the maps a
/// model makes of one value (slices, gathers at constant positions), and bounded, as
/// expressions are DAGs whose trees may be exponentially larger.
const EXPR_NODES: usize = 256;

/// A hash of `op` that equal ops share (`Op`'s `PartialEq`); a filter, not an identity.
fn op_hash(op: &Op) -> u64 {
    let mut h = DefaultHasher::new();
    std::mem::discriminant(op).hash(&mut h);
    let mut budget = EXPR_NODES;
    match op {
        Op::Const(t) => {
            t.dtype.hash(&mut h);
            t.shape.hash(&mut h);
            t.data.hash(&mut h);
        }
        Op::Map(m) => expr_hash(&m.body, &mut h, &mut budget),
        Op::Reduce(r) => {
            r.extents.hash(&mut h);
            expr_hash(&r.body, &mut h, &mut budget);
        }
        Op::Scatter(s) => {
            s.extents.hash(&mut h);
            for e in &s.index {
                expr_hash(e, &mut h, &mut budget);
            }
            expr_hash(&s.value, &mut h, &mut budget);
        }
        Op::Concat { axis } => axis.hash(&mut h),
        Op::Kernel(k) => {
            k.name().hash(&mut h);
            k.attrs().hash(&mut h);
        }
        Op::Conv(c) => c.strides.hash(&mut h),
        Op::Pool(p) => p.kernel.hash(&mut h),
        Op::MatMul(m) => (m.trans_a, m.trans_b).hash(&mut h),
        Op::Input | Op::Reshape | Op::Assert { .. } => {}
    }
    h.finish()
}

/// Hashes `e` in pre-order, at most `budget` nodes.
fn expr_hash(e: &E, h: &mut DefaultHasher, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    e.dtype.hash(h);
    std::mem::discriminant(&e.kind).hash(h);
    match &e.kind {
        ExprKind::Var(v) => v.hash(h),
        ExprKind::Const(c) => c.hash(h),
        ExprKind::Load { input, index } => {
            input.hash(h);
            for x in index {
                expr_hash(x, h, budget);
            }
        }
        ExprKind::Unary(op, a) => {
            op.hash(h);
            expr_hash(a, h, budget);
        }
        ExprKind::Binary(op, a, b) => {
            op.hash(h);
            expr_hash(a, h, budget);
            expr_hash(b, h, budget);
        }
        ExprKind::Select(c, a, b) => {
            expr_hash(c, h, budget);
            expr_hash(a, h, budget);
            expr_hash(b, h, budget);
        }
        ExprKind::Cast(a) => expr_hash(a, h, budget),
        ExprKind::CheckIndex { index, bound } => {
            bound.hash(h);
            expr_hash(index, h, budget);
        }
    }
}
