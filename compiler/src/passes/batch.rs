//! Run-time batch dims: whether a model computes each item of a leading batch on its own.
//!
//! A model whose inputs leave a leading dim symbolic (`[batch, 3, 224, 224]`, skl2onnx's
//! `[None, features]`) compiles to the program for one item (that dim bound to 1) and a
//! shaped entry point that runs it once per item (`NAME_run_shaped`). That is exact only if
//! the model is *separable*: item `i` of every batch-carrying output depends on item `i` of
//! the batch-carrying inputs alone, and never on the batch size. `check` decides it.
//!
//! The graph builders need concrete shapes, so the model is imported twice with the batch
//! dim bound to two sizes (`SIZES`) and the two graphs are compared node by node: they must
//! be the same program (same nodes, operands and ops; constants equal or repeated per item)
//! in which each value either has no batch axis (the same shape in both) or exactly one,
//! the only axis whose length follows the batch size. Each op must then treat that axis
//! item by item: a `Map`/`Reduce` reads operand items only at its own item index, a
//! `Reshape` keeps the items contiguous, products and convolutions keep the batch in their
//! batch or row dims, kernels say so themselves (`KernelOp::per_item`). Anything else (a
//! reduction over the batch, a Gather along it, a shape that multiplies it) makes the model
//! non-separable, and the batch dim must then be fixed at compile time.

use crate::ir::expr::{E, ExprKind};
use crate::ir::graph::{Graph, Node, NodeId, Op};
use std::collections::HashMap;

/// The two batch sizes the graphs are imported with (both above 1, so that no builder
/// treats the batch dim as a broadcast dim of length 1).
pub const SIZES: [i64; 2] = [2, 3];

/// Which graph inputs and outputs carry the batch (always as their axis 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Batched {
    pub inputs: Vec<bool>,
    pub outputs: Vec<bool>,
}

/// Where a value carries the batch: its axis, and how many slices of that axis each item
/// has (1 for a batch dim; `s` where a reshape merged the batch with a dim of `s`, as
/// `[batch, seq, d]` flattened to `[batch·seq, d]`: item `i` is slices `i·s .. (i+1)·s`).
pub(crate) type Carry = Option<(usize, i64)>;

/// The batch axis of a value: the one axis whose length is `SIZES[0]·s` in `a` and
/// `SIZES[1]·s` in `b`, None when the shapes are equal; an error when they differ otherwise.
fn axis_of(a: &[crate::ir::Dim], b: &[crate::ir::Dim]) -> Result<Carry, String> {
    if a.len() != b.len() {
        return Err("its rank depends on the batch size".into());
    }
    let mut axis = None;
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if x == y {
            continue;
        }
        match (x.known(), y.known()) {
            (Some(p), Some(q))
                if axis.is_none() && p > 0 && p % SIZES[0] == 0 && p / SIZES[0] * SIZES[1] == q =>
            {
                axis = Some((k, p / SIZES[0]))
            }
            _ => {
                return Err(format!(
                    "its dim {k} ({x} at batch {}, {y} at batch {}) is not a multiple of the \
                     batch size",
                    SIZES[0], SIZES[1]
                ));
            }
        }
    }
    Ok(axis)
}

/// The slices per item of the batch-carrying operands and results of a node other than a
/// reshape: every op but a reshape maps slices of the batch axis one to one, so they must
/// all agree, and the model's own inputs and constants have one per item.
pub(crate) fn same_slices(op: &Op, ins: &[Carry], out: &[Carry]) -> Result<(), String> {
    let mut per = ins.iter().chain(out).flatten().map(|c| c.1);
    let first = per.next();
    let one = matches!(op, Op::Input | Op::Const(_));
    match first {
        Some(s) if per.any(|t| t != s) || (one && s != 1) => {
            Err("it mixes tensors whose items have different lengths".into())
        }
        _ => Ok(()),
    }
}

/// Checks that `a` and `b` (the model imported at batch sizes `SIZES`) are one separable
/// program, and returns which inputs and outputs carry the batch. The error says which
/// node mixes items, for the message that asks for a fixed batch size.
pub fn check(a: &Graph, b: &Graph) -> Result<Batched, String> {
    let ids = a.node_ids();
    if ids != b.node_ids() {
        return Err("the model's graph changes with the batch size".into());
    }
    let mut axes: HashMap<(NodeId, u32), Carry> = HashMap::new();
    for id in b.topo_order() {
        let (na, nb) = (a.node(id), b.node(id));
        let at = |msg: String| format!("{}: {msg}", nb.origin);
        if na.inputs != nb.inputs || na.outputs.len() != nb.outputs.len() {
            return Err(at("its operands change with the batch size".into()));
        }
        let mut out = Vec::with_capacity(nb.outputs.len());
        for (ta, tb) in na.outputs.iter().zip(&nb.outputs) {
            if ta.dtype != tb.dtype {
                return Err(at("its type changes with the batch size".into()));
            }
            out.push(axis_of(&ta.shape, &tb.shape).map_err(|e| at(format!("its result: {e}")))?);
        }
        let ins: Vec<Carry> = nb.inputs.iter().map(|v| axes[&(v.node, v.slot)]).collect();
        if let Op::Reshape = nb.op {
            reshape_per_item(nb, ins[0], out[0], b).map_err(at)?;
        } else {
            let axis = |c: &[Carry]| c.iter().map(|x| x.map(|x| x.0)).collect::<Vec<_>>();
            node_per_item(na, nb, &axis(&ins), &axis(&out), b).map_err(at)?;
            same_slices(&nb.op, &ins, &out).map_err(at)?;
        }
        for (slot, ax) in out.into_iter().enumerate() {
            axes.insert((id, slot as u32), ax);
        }
    }
    let io = |list: &[crate::ir::graph::GraphIo], what: &str| {
        list.iter()
            .map(|g| match axes[&(g.value.node, g.value.slot)] {
                None => Ok(false),
                Some((0, 1)) => Ok(true),
                Some((0, s)) => Err(format!(
                    "{what} '{}' has {s} rows per item in its dim 0 (a reshape merged the \
                     batch with another dim), where a run-time batch needs one",
                    g.name
                )),
                Some((k, _)) => Err(format!(
                    "{what} '{}' carries the batch in its dim {k}, not in its first",
                    g.name
                )),
            })
            .collect::<Result<Vec<bool>, String>>()
    };
    Ok(Batched {
        inputs: io(&b.inputs, "input")?,
        outputs: io(&b.outputs, "output")?,
    })
}

/// Whether node `nb` (and its twin `na` at the other batch size) computes each item of its
/// results from the same item of its batch-carrying operands (`ins`, `out`: batch axes).
pub(crate) fn node_per_item(
    na: &Node,
    nb: &Node,
    ins: &[Option<usize>],
    out: &[Option<usize>],
    b: &Graph,
) -> Result<(), String> {
    let shared = |xs: &[Option<usize>]| xs.iter().all(Option::is_none);
    let same_op = || {
        if na.op == nb.op {
            Ok(())
        } else {
            Err(
                "what it computes changes with the batch size (it reduces over, indexes or \
                 counts the batch)"
                    .to_string(),
            )
        }
    };
    match &nb.op {
        Op::Input => match out[0] {
            None | Some(0) => Ok(()),
            Some(k) => Err(format!("the batch is its dim {k}, not its first")),
        },
        Op::Const(tb) => {
            let Op::Const(ta) = &na.op else {
                return Err("its op changes with the batch size".into());
            };
            match out[0] {
                None if ta == tb => Ok(()),
                None => Err("its value changes with the batch size".into()),
                Some(axis) => repeated_items(ta, tb, axis),
            }
        }
        Op::Assert { .. } => same_op(),
        // An op whose results carry no batch must not read one.
        _ if shared(out) => {
            same_op()?;
            if shared(ins) {
                Ok(())
            } else {
                Err("it combines the items of the batch".into())
            }
        }
        Op::Map(m) => {
            same_op()?;
            body_per_item(&m.body, out[0], ins)
        }
        Op::Reduce(r) => {
            same_op()?;
            body_per_item(&r.body, out[0], ins)
        }
        Op::Reshape => unreachable!("reshapes are checked by reshape_per_item"),
        Op::MatMul(mm) => {
            same_op()?;
            if ins.len() < 2 || !shared(&ins[2..]) {
                return Err("a product whose extra operands carry the batch".into());
            }
            let ro = nb.outputs[0].rank();
            let mut target = None;
            for (k, ax) in ins.iter().enumerate() {
                let Some(ax) = *ax else { continue };
                let r = b.value_type(nb.inputs[k]).rank();
                if k > 1 || r < 2 || ro < 2 {
                    return Err("the batch is a dim of a vector product".into());
                }
                let (row, trans) = if k == 0 {
                    (ro - 2, mm.trans_a)
                } else {
                    (ro - 1, mm.trans_b)
                };
                let lanes = if (k == 0) != trans { r - 2 } else { r - 1 };
                let to = if ax + 2 < r {
                    ro - r + ax
                } else if ax == lanes {
                    row
                } else {
                    return Err("the batch is the product's summed dim".into());
                };
                if target.is_some_and(|t| t != to) {
                    return Err("its operands carry the batch in different dims".into());
                }
                target = Some(to);
            }
            if target == out[0] {
                Ok(())
            } else {
                Err("the product moves the batch".into())
            }
        }
        Op::Conv(_) | Op::Pool(_) => {
            same_op()?;
            if ins[0] == Some(0) && out[0] == Some(0) && shared(&ins[1..]) {
                Ok(())
            } else {
                Err("the batch is not the convolution's batch dim".into())
            }
        }
        Op::Concat { axis } => {
            same_op()?;
            if out[0] != Some(*axis) && ins.iter().all(|a| *a == out[0]) {
                Ok(())
            } else {
                Err("it concatenates along the batch".into())
            }
        }
        Op::Scatter(_) => Err("a scatter into a batch-carrying tensor".into()),
        Op::Kernel(k) => {
            let Op::Kernel(ka) = &na.op else {
                return Err("its op changes with the batch size".into());
            };
            let ranks: Vec<usize> = nb.inputs.iter().map(|v| b.value_type(*v).rank()).collect();
            if ka.name() == k.name() && k.per_item(ins, &ranks, out) {
                Ok(())
            } else {
                Err(format!(
                    "the {} kernel does not run item by item here",
                    k.name()
                ))
            }
        }
    }
}

/// A reshape keeps the items apart when each item's elements stay one run of the same
/// length behind the same outer dims: the dims before the batch axis multiply to the same
/// count, and slices per item times the dims after it do too.
pub(crate) fn reshape_per_item(nb: &Node, from: Carry, to: Carry, b: &Graph) -> Result<(), String> {
    let ((i, si), (o, so)) = match (from, to) {
        (None, None) => return Ok(()),
        (Some(x), Some(y)) => (x, y),
        _ => return Err("it moves the batch into another dim".into()),
    };
    let src = known(&b.value_type(nb.inputs[0]).shape)?;
    let dst = known(&nb.outputs[0].shape)?;
    let p = |s: &[i64]| s.iter().product::<i64>();
    if p(&src[..i]) == p(&dst[..o]) && si * p(&src[i + 1..]) == so * p(&dst[o + 1..]) {
        Ok(())
    } else {
        Err("it moves the batch into another dim".into())
    }
}

fn known(s: &[crate::ir::Dim]) -> Result<Vec<i64>, String> {
    crate::ir::dim::known_dims(s).ok_or_else(|| "a symbolic dim".to_string())
}

/// A batch-carrying constant (a folded `ConstantOfShape([batch, …])`, say) is per item
/// when every item holds the same values, at both sizes.
fn repeated_items(a: &crate::ir::Tensor, b: &crate::ir::Tensor, axis: usize) -> Result<(), String> {
    let err = || Err("a constant whose items differ".to_string());
    if a.dtype != b.dtype || a.dtype.packed_bits().is_some() || a.dtype == crate::ir::DType::Str {
        return err();
    }
    fn item(t: &crate::ir::Tensor, axis: usize) -> Option<Vec<&[u8]>> {
        let outer: i64 = t.shape[..axis].iter().product();
        let inner = t.shape[axis + 1..].iter().product::<i64>() as usize * t.dtype.size();
        let n = t.shape[axis] as usize;
        let mut first = Vec::new();
        for o in 0..outer as usize {
            let base = o * n * inner;
            let x = &t.data[base..base + inner];
            for i in 1..n {
                if &t.data[base + i * inner..base + (i + 1) * inner] != x {
                    return None;
                }
            }
            first.push(x);
        }
        Some(first)
    }
    match (item(a, axis), item(b, axis)) {
        (Some(x), Some(y)) if x == y => Ok(()),
        _ => err(),
    }
}

/// Whether `body`, computing item `out` (the output's batch variable) of a Map or Reduce,
/// reads every batch-carrying operand at that item only and uses the item index nowhere
/// else (`ins`: the operands' batch axes).
fn body_per_item(body: &E, out: Option<usize>, ins: &[Option<usize>]) -> Result<(), String> {
    fn walk(e: &E, var: Option<u32>, ins: &[Option<usize>]) -> Result<(), String> {
        match &e.kind {
            ExprKind::Var(v) if Some(*v) == var => {
                Err("it computes with the item's position in the batch".into())
            }
            ExprKind::Var(_) | ExprKind::Const(_) => Ok(()),
            ExprKind::Load { input, index } => {
                let ax = ins[*input as usize];
                for (k, ix) in index.iter().enumerate() {
                    if ax == Some(k) {
                        let same = matches!(ix.kind, ExprKind::Var(v) if Some(v) == var);
                        if !same {
                            return Err("it reads another item of the batch".into());
                        }
                    } else {
                        walk(ix, var, ins)?;
                    }
                }
                Ok(())
            }
            ExprKind::Unary(_, x) | ExprKind::Cast(x) => walk(x, var, ins),
            ExprKind::CheckIndex { index, .. } => walk(index, var, ins),
            ExprKind::Binary(_, x, y) => {
                walk(x, var, ins)?;
                walk(y, var, ins)
            }
            ExprKind::Select(c, x, y) => {
                walk(c, var, ins)?;
                walk(x, var, ins)?;
                walk(y, var, ins)
            }
        }
    }
    walk(body, out.map(|a| a as u32), ins)
}
