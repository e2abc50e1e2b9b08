//! Data-dependent dims: values with as many rows as the data selects (NonZero, Compress,
//! NonMaxSuppression, Unique; TopK, Slice and Loop scan outputs sized at run time), followed
//! from the ops that make them to the graph outputs.
//!
//! The compiled code computes such a value at its bound, the most rows the op can select:
//! the kernel writes the count it found and zero-pads the rest (`kernels::NonZero`), the
//! builder registers the rows it slices from the kernel's result (`Graph::data_dims`). That
//! is exact if every op downstream computes each row on its own — the property a run-time
//! batch needs (`passes::batch`), so the same per-node rules decide it: a row of a result
//! depends on the same row of the operands that have rows, and on no other, and no op
//! counts the rows (a reduction over them, a Shape of them). Padding rows then never reach
//! a real one, and every output that carries rows gets a hidden companion output holding
//! its dims, `count · per` along the row axis (`GraphIo::dims_at`), from which
//! `NAME_run_shaped` returns the rows found.
//!
//! A kernel whose result is exact with its operands' rows read at their bound, padding
//! included, ends the rows there (`KernelOp::reads_padded_rows`: TfIdfVectorizer over a
//! Tokenizer's padded rows).
//!
//! `expose` runs once, on the imported graph (the values registered are the builders'),
//! before the passes that rewrite it.

use super::batch::{Carry, node_per_item, reshape_per_item, same_slices};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::{DataDim, Graph, GraphIo, MapOp, Node, Op, Origin, TypeInfo};
use crate::ir::{DType, Dim, ValueId};
use std::collections::HashMap;

/// Follows the registered data-dependent axes through the graph and adds a dims output for
/// every graph output that has one; the error names the node that combines rows.
pub fn expose(g: &mut Graph) -> Result<(), String> {
    let mut dims: HashMap<ValueId, DataDim> = g.data_dims.clone();
    for id in g.topo_order() {
        let node = g.node(id);
        if node
            .outputs
            .iter()
            .enumerate()
            .any(|(k, _)| dims.contains_key(&id.out(k as u32)))
        {
            // Made by a builder of a data-dependent op, whose operands must not have rows of
            // another selection: a value holds one data-dependent dim.
            let own: Vec<ValueId> = (0..node.outputs.len())
                .filter_map(|k| dims.get(&id.out(k as u32)).map(|d| d.count))
                .collect();
            if node
                .inputs
                .iter()
                .any(|v| dims.get(v).is_some_and(|d| !own.contains(&d.count)))
            {
                return Err(format!(
                    "{}: its result's size depends on the data, and so does that of an \
                     operand (the rows a NonZero, StringNormalizer with stopwords or similar \
                     op selects); onnxc keeps one data-dependent dim per value: return the \
                     operand as an output and do this step in the application",
                    node.origin
                ));
            }
            continue;
        }
        let ins: Vec<Option<DataDim>> = node.inputs.iter().map(|v| dims.get(v).copied()).collect();
        let Some(first) = ins.iter().flatten().next().copied() else {
            continue;
        };
        let at = |msg: String| format!("{}: {msg}", node.origin);
        if ins.iter().flatten().any(|d| d.count != first.count) {
            return Err(at(
                "it combines the rows of two results whose row counts depend on the data \
                 (they may differ); onnxc compiles such rows only through ops that keep them \
                 apart: return both as outputs and combine them in the application"
                    .into(),
            ));
        }
        if matches!(node.op, Op::Assert { .. }) {
            return Err(at(
                "a run-time check reads values whose row count depends on the data".into(),
            ));
        }
        if let Op::Kernel(k) = &node.op {
            let axes: Vec<Option<usize>> = ins.iter().map(|d| d.map(|d| d.axis)).collect();
            let ranks: Vec<usize> = node
                .inputs
                .iter()
                .map(|&v| g.value_type(v).shape.len())
                .collect();
            if k.reads_padded_rows(&axes, &ranks) {
                // Exact at the bound: the result has no data-dependent dim.
                continue;
            }
        }
        let outs = follow(g, node, &ins, first.bound).map_err(|e| {
            at(format!(
                "{e}: it reads a value whose rows depend on the data (the rows a NonZero, \
                 NonMaxSuppression or Unique selects, a TopK, Slice or Loop sized at run \
                 time), and onnxc compiles such rows only \
                 through ops that compute each row on its own (no reduction over the rows, \
                 no Shape of them); return the rows as an output and do this step in the \
                 application"
            ))
        })?;
        for (k, o) in outs.into_iter().enumerate() {
            dims.insert(
                id.out(k as u32),
                DataDim {
                    axis: o.0,
                    per: o.1,
                    ..first
                },
            );
        }
    }
    let n = g.outputs.len();
    for k in 0..n {
        let v = g.outputs[k].value;
        let Some(d) = dims.get(&v).copied() else {
            continue;
        };
        if g.outputs[k].packed.is_some() || g.outputs[k].keys.is_some() {
            return Err(format!(
                "graph output '{}' has rows that depend on the data; onnxc returns such rows \
                 only as plain tensors",
                g.outputs[k].name
            ));
        }
        let shape = crate::ir::dim::known_dims(&g.value_type(v).shape)
            .ok_or_else(|| format!("graph output '{}' has a symbolic dim", g.outputs[k].name))?;
        let origin = Origin::value("the dims of graph output", &g.outputs[k].name);
        let at = dims_value(g, &shape, d, origin);
        let name = format!("{}.dims", g.outputs[k].name);
        g.outputs[k].dims_at = Some(g.outputs.len());
        g.outputs.push(GraphIo {
            name,
            value: at,
            keys: None,
            packed: None,
            dims_at: None,
            hidden: true,
            map: None,
        });
    }
    Ok(())
}

/// The data-dependent axes (and slices per row) of `node`'s results, given its operands'
/// (`ins`, at least one `Some`, all with rows of `bound`): the first choice of axes that the
/// per-row rules accept, or why none is.
fn follow(
    g: &Graph,
    node: &Node,
    ins: &[Option<DataDim>],
    bound: i64,
) -> Result<Vec<(usize, i64)>, String> {
    let carries: Vec<Carry> = ins.iter().map(|d| d.map(|d| (d.axis, d.per))).collect();
    let axes: Vec<Option<usize>> = carries.iter().map(|c| c.map(|c| c.0)).collect();
    if node.outputs.len() != 1 {
        return Err("an op with several results".into());
    }
    let out = &node.outputs[0];
    let mut why = "its result has no dim for the rows".to_string();
    for (k, d) in out.shape.iter().enumerate() {
        let Some(len) = d.known() else { continue };
        let candidate: Carry = if let Op::Reshape = node.op {
            (len % bound == 0 && len > 0).then(|| (k, len / bound))
        } else {
            let per = carries.iter().flatten().next().map_or(1, |c| c.1);
            (len == bound * per).then_some((k, per))
        };
        let Some(c) = candidate else { continue };
        let verdict = if let Op::Reshape = node.op {
            reshape_per_item(node, carries[0], Some(c), g)
        } else {
            node_per_item(node, node, &axes, &[Some(k)], g)
                .and_then(|()| same_slices(&node.op, &carries, &[Some(c)]))
        };
        match verdict {
            Ok(()) => return Ok(vec![c]),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// An int64 `[rank]` value holding the dims of a value of bound `shape` whose axis `d.axis`
/// has `count · per` slices (`origin`: the output whose dims it holds).
fn dims_value(g: &mut Graph, shape: &[i64], d: DataDim, origin: Origin) -> ValueId {
    let rows = expr::mul(expr::load(DType::I64, 0, vec![]), expr::i(d.per));
    let mut body: E = expr::i(0);
    for (k, &len) in shape.iter().enumerate().rev() {
        let dim = if k == d.axis {
            rows.clone()
        } else {
            expr::i(len)
        };
        body = expr::select(
            expr::binary(BinOp::Eq, expr::var(0), expr::i(k as i64)),
            dim,
            body,
        );
    }
    let ty = TypeInfo::new(DType::I64, vec![Dim::Known(shape.len() as i64)]);
    let id = g.add_node(
        "data_dims".into(),
        Op::Map(MapOp { body }),
        vec![d.count],
        vec![ty],
        origin,
    );
    id.out(0)
}
