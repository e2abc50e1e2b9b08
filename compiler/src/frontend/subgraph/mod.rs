//! Control flow by inlining: the importer imports a subgraph's nodes in place of the node
//! that owns it, with the outer scope visible and the subgraph's formal inputs bound to
//! values of the outer graph (`Importer::inline_body`).
//!
//! - `If` whose condition is a constant: the taken branch, once (`inline_if`); on a
//!   run-time condition, both branches and a select (`if_convert`), each branch's run-time
//!   checks made to fail the run only where it is taken (`guard_failures`).
//! - `Loop` whose trip count is known at compile time, or whose condition folds to false
//!   within `MAX_ITERATIONS`: the body once per iteration, carried values threaded from one
//!   copy to the next, scan outputs stacked (`unroll_loop`). The condition the body computes
//!   is constant-folded as the copy is built, so `while`-style loops over constants unroll
//!   completely. Once the condition is a run-time value, the remaining iterations up to the
//!   trip count are if-converted: each carried value keeps its old value unless the loop
//!   is still running, its checks failing the run only while it runs — exact when the body
//!   keeps its carried shapes. Scan outputs then have as many rows as iterations ran, a
//!   data-dependent dim (`ir::graph::DataDim`) counted by the if-converted conditions.
//! - `Scan` over inputs whose scanned length is known at compile time (opset 8's batched
//!   form and opset 9's): the body once per element, each copy reading its slice
//!   (`unroll_scan`).
//!
//! Every copy is an ordinary subgraph of the model, so it is folded, fused and scheduled like
//! the rest: an unrolled loop costs no interpreter and no per-iteration dispatch. The price is
//! compile time and code size proportional to the iteration count, bounded by
//! `MAX_ITERATIONS` per node and `MAX_UNROLLED_NODES` over the model.

mod branch;
mod flex;
pub(super) mod function;
mod unroll;

use super::Importer;
use super::ctx::Ctx;
use super::tensor::tensor_from_proto;
use crate::error::{Error, Result, Unsupported};
use crate::ir::expr::{self, E};
use crate::ir::{DType, Origin, ValueId};
use onnxc_proto::{GraphProto, NodeProto, ValueInfoProto, type_proto};

/// Most iterations a Loop or Scan is unrolled to.
pub const MAX_ITERATIONS: usize = 4096;
/// Most body nodes all copies of one Loop or Scan add up to.
pub const MAX_UNROLLED_NODES: usize = 200_000;

/// An enclosing scope's binding of a name a subgraph binds again (`Importer::bind_local`).
pub(in crate::frontend) struct Shadowed {
    name: String,
    value: Option<ValueId>,
    seq: Option<super::sequence::Seq>,
    absent: bool,
}

/// A value a subgraph takes or gives: a tensor, a sequence, or an empty optional.
#[derive(Clone, Debug)]
pub(in crate::frontend) enum Val {
    Tensor(ValueId),
    Seq(super::sequence::Seq),
    Absent,
}

impl Importer<'_> {
    pub(in crate::frontend) fn unsupported_node(
        &self,
        n: &NodeProto,
        origin: &Origin,
        reason: impl Into<String>,
    ) -> Error {
        Error::Unsupported(vec![Unsupported {
            node: origin.node_id(),
            op_type: origin.op_type.clone(),
            domain: n.domain.clone().unwrap_or_default(),
            opset: origin.opset,
            reason: reason.into(),
        }])
    }

    /// A builder context for helper nodes (slices, stacking) of the node `n`.
    pub(in crate::frontend) fn helper_ctx<'s>(
        &'s mut self,
        n: &'s NodeProto,
        origin: &Origin,
    ) -> Ctx<'s> {
        Ctx::new(
            &mut self.g,
            n,
            origin.clone(),
            origin.opset,
            vec![],
            self.dir,
            self.opts.fold_limit,
        )
    }

    pub(in crate::frontend) fn graph_attr<'n>(
        n: &'n NodeProto,
        origin: &Origin,
        attr: &str,
    ) -> Result<&'n GraphProto> {
        n.attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(attr))
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| {
                Error::Model(format!(
                    "{origin}: attribute '{attr}' (a graph) is required"
                ))
            })
    }

    /// The value an operand of `n` names, when the operand is given.
    pub(in crate::frontend) fn operand(
        &self,
        n: &NodeProto,
        origin: &Origin,
        k: usize,
    ) -> Result<Option<ValueId>> {
        match n.input.get(k).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(name) if self.absent.contains(name) => Ok(None),
            Some(name) if self.seqs.contains_key(name) => Err(self.unsupported_node(
                n,
                origin,
                format!(
                    "input '{name}' is a sequence; onnxc passes tensors through If, Loop and Scan"
                ),
            )),
            Some(name) => self
                .env
                .get(name)
                .copied()
                .map(Some)
                .ok_or_else(|| Error::Model(format!("{origin}: input '{name}' is not defined"))),
        }
    }

    /// Imports `body` once, its formal inputs bound to `args`, the enclosing scopes visible;
    /// returns its outputs. Names the body defines (its inputs, initializers and node outputs)
    /// do not leak out, and a body input shadows an outer value of the same name only inside.
    /// Tensors only: a sequence output is reported as unsupported.
    pub(in crate::frontend) fn inline_body(
        &mut self,
        body: &GraphProto,
        args: &[ValueId],
        origin: &Origin,
        what: &str,
    ) -> Result<Vec<ValueId>> {
        let args: Vec<Val> = args.iter().map(|&v| Val::Tensor(v)).collect();
        let outs = self.inline_body_values(body, &args, origin, what)?;
        outs.into_iter()
            .zip(&body.output)
            .map(|(v, o)| match v {
                Val::Tensor(v) => Ok(v),
                Val::Seq(_) | Val::Absent => Err(Error::Unsupported(vec![Unsupported {
                    node: origin.node_id(),
                    op_type: origin.op_type.clone(),
                    domain: String::new(),
                    opset: origin.opset,
                    reason: format!(
                        "the {what}'s output '{}' is a sequence or an empty optional; onnxc \
                         passes only tensors through Scan and FlexAttention's score functions",
                        o.name.as_deref().unwrap_or_default()
                    ),
                }])),
            })
            .collect()
    }

    /// `inline_body` over values that may be sequences (Loop-carried ones).
    pub(in crate::frontend) fn inline_body_values(
        &mut self,
        body: &GraphProto,
        args: &[Val],
        origin: &Origin,
        what: &str,
    ) -> Result<Vec<Val>> {
        if body.input.len() != args.len() {
            return Err(Error::Model(format!(
                "{origin}: the {what} declares {} inputs, the node gives it {}",
                body.input.len(),
                args.len()
            )));
        }
        // The body's scope: what it binds is undone when it ends, in time proportional to
        // the body (copying the outer scope made a chain of N subgraphs O(N^2)).
        let mark = self.shadowed.len();
        let outer_local = std::mem::take(&mut self.local);
        let result = self.inline_body_in_scope(body, args, origin, what);
        let body_local = std::mem::replace(&mut self.local, outer_local);
        for name in &body_local {
            self.env.remove(name);
            self.seqs.remove(name);
            self.absent.remove(name);
        }
        for s in self.shadowed.drain(mark..).rev() {
            if let Some(v) = s.value {
                self.env.insert(s.name.clone(), v);
            }
            if let Some(q) = s.seq {
                self.seqs.insert(s.name.clone(), q);
            }
            if s.absent {
                self.absent.insert(s.name);
            }
        }
        result
    }

    /// Notes that the graph being imported binds `name`, and what an enclosing scope bound
    /// it to (restored when the subgraph's scope ends); false if this graph already binds it.
    /// Every binding of `env`, `seqs` and `absent` goes through here.
    pub(in crate::frontend) fn bind_local(&mut self, name: &str) -> bool {
        if !self.local.insert(name.to_string()) {
            return false;
        }
        let value = self.env.get(name).copied();
        let seq = self.seqs.get(name).cloned();
        let absent = self.absent.contains(name);
        if value.is_some() || seq.is_some() || absent {
            self.shadowed.push(Shadowed {
                name: name.to_string(),
                value,
                seq,
                absent,
            });
        }
        true
    }

    pub(in crate::frontend) fn inline_body_in_scope(
        &mut self,
        body: &GraphProto,
        args: &[Val],
        origin: &Origin,
        what: &str,
    ) -> Result<Vec<Val>> {
        for (vi, arg) in body.input.iter().zip(args) {
            let name = vi.name.clone().unwrap_or_default();
            match arg {
                Val::Tensor(v) => self.check_tensor_input(vi, *v, origin, what)?,
                Val::Seq(_) => {
                    if let Some(t) = vi.r#type.as_ref().and_then(|t| t.value.as_ref())
                        && !matches!(t, type_proto::Value::SequenceType(_))
                    {
                        return Err(Error::Model(format!(
                            "{origin}: the {what}'s input '{name}' is given a sequence but \
                             declares another type"
                        )));
                    }
                }
                Val::Absent => {}
            }
            if !self.bind_formal(name.clone(), arg) {
                return Err(Error::Model(format!(
                    "{origin}: the {what} declares input '{name}' twice"
                )));
            }
        }
        for init in &body.initializer {
            let name = init.name.clone().unwrap_or_default();
            let t = tensor_from_proto(
                init,
                self.dir,
                &format!("initializer '{name}' of {origin}'s {what}"),
            )?;
            self.bind_constant(name, t, origin.clone());
        }
        self.sparse_initializers(body, &format!("{origin}'s {what}: sparse initializer"))?;
        let unsupported = self.unsupported.len();
        self.check_single_assignment(body)?;
        self.nodes(&body.node)?;
        if self.unsupported.len() > unsupported {
            // Reported by the body's nodes; the node's outputs are poisoned by the caller.
            return Err(Error::Unsupported(Vec::new()));
        }
        body.output
            .iter()
            .map(|o| {
                let name = o.name.as_deref().unwrap_or_default();
                if let Some(u) = self.unbuilt.remove(name) {
                    self.unsupported.push(u);
                    return Err(Error::Unsupported(Vec::new()));
                }
                if self.poisoned.contains(name) {
                    // Computed from a node already reported as unsupported.
                    return Err(Error::Unsupported(Vec::new()));
                }
                if let Some(s) = self.seqs.get(name) {
                    return Ok(Val::Seq(s.clone()));
                }
                if self.absent.contains(name) && !self.env.contains_key(name) {
                    return Ok(Val::Absent);
                }
                self.env.get(name).copied().map(Val::Tensor).ok_or_else(|| {
                    Error::Model(format!(
                        "{origin}: the {what}'s output '{name}' is not computed by any of its \
                         nodes, initializers or inputs, nor an outer value"
                    ))
                })
            })
            .collect()
    }

    /// Binds the node's outputs to `outs` (an empty output name is skipped).
    pub(in crate::frontend) fn bind_outputs(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        outs: &[ValueId],
    ) -> Result<()> {
        for (k, &v) in outs.iter().enumerate() {
            self.bind_output(n, origin, k, v)?;
        }
        Ok(())
    }

    /// Binds the node's outputs to values that may be sequences.
    pub(in crate::frontend) fn bind_values(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        outs: Vec<Val>,
    ) -> Result<()> {
        for (k, v) in outs.into_iter().enumerate() {
            match v {
                Val::Tensor(v) => self.bind_output(n, origin, k, v)?,
                Val::Seq(s) => self.define_seq(n, origin, k, s)?,
                Val::Absent => self.define_absent(n, origin, k)?,
            }
        }
        Ok(())
    }

    /// Checks a tensor given to body input `vi` against the type the body declares.
    fn check_tensor_input(
        &self,
        vi: &ValueInfoProto,
        v: ValueId,
        origin: &Origin,
        what: &str,
    ) -> Result<()> {
        let name = vi.name.as_deref().unwrap_or_default();
        let ty = self.g.value_type(v);
        match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(tt)) => {
                if let Some(code) = tt.elem_type.filter(|&c| c != 0)
                    && DType::from_onnx(code) != Some(ty.dtype)
                {
                    return Err(Error::Model(format!(
                        "{origin}: the {what}'s input '{name}' is declared {} but is given {}",
                        DType::onnx_code_name(code),
                        ty.dtype
                    )));
                }
            }
            None => {}
            Some(_) => {
                return Err(Error::Unsupported(vec![Unsupported {
                    node: origin.node_id(),
                    op_type: origin.op_type.clone(),
                    domain: String::new(),
                    opset: origin.opset,
                    reason: format!(
                        "the {what}'s input '{name}' is not a tensor (sequence and optional \
                         types are not supported)"
                    ),
                }]));
            }
        }
        Ok(())
    }

    /// Binds body input `name` to `arg` in the body's scope, shadowing any outer value of
    /// that name; false when the body declares the name twice.
    fn bind_formal(&mut self, name: String, arg: &Val) -> bool {
        let fresh = self.bind_local(&name);
        self.env.remove(&name);
        self.seqs.remove(&name);
        self.absent.remove(&name);
        match arg {
            Val::Tensor(v) => {
                self.env.insert(name, *v);
            }
            Val::Seq(s) => {
                self.seqs.insert(name, s.clone());
            }
            Val::Absent => {
                self.absent.insert(name);
            }
        }
        fresh
    }

    /// Binds output `k` of the node to an empty optional (skipped when the node leaves it
    /// out): it reads as an omitted input.
    pub(in crate::frontend) fn define_absent(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        k: usize,
    ) -> Result<()> {
        let Some(name) = n.output.get(k).filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        if !self.bind_local(name) {
            return Err(Error::Model(format!(
                "{origin} writes '{name}', which this graph already defines; every ONNX value \
                 is assigned once"
            )));
        }
        self.absent.insert(name.clone());
        Ok(())
    }

    /// Binds output `k` of the node to `v` (skipped when the node leaves it out).
    pub(in crate::frontend) fn bind_output(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        k: usize,
        v: ValueId,
    ) -> Result<()> {
        let Some(name) = n.output.get(k).filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        if !self.define(name.clone(), v) {
            return Err(Error::Model(format!(
                "{origin} writes '{name}', which an earlier node, an initializer or a graph \
                 input already defines; every ONNX value is assigned once (rename one of them)"
            )));
        }
        Ok(())
    }

    /// The graph's nodes now, to tell later which nodes a subgraph added.
    pub(in crate::frontend) fn snapshot(&self) -> Snapshot {
        Snapshot {
            mark: self.g.added_count(),
        }
    }
}

/// The nodes of the graph at one point of the import.
pub(super) struct Snapshot {
    mark: usize,
}

/// Element `pos` of `v` along `axis`, the axis removed.
pub(super) fn take(ctx: &mut Ctx, v: ValueId, axis: usize, pos: i64) -> Result<ValueId> {
    let ty = ctx.ty(v);
    let rank = ty.shape.len();
    let index: Vec<E> = (0..rank)
        .map(|d| match d.cmp(&axis) {
            std::cmp::Ordering::Less => expr::var(d as u32),
            std::cmp::Ordering::Equal => expr::i(pos),
            std::cmp::Ordering::Greater => expr::var(d as u32 - 1),
        })
        .collect();
    let mut shape = ty.shape.clone();
    shape.remove(axis);
    ctx.map(ty.dtype, shape, vec![v], expr::load(ty.dtype, 0, index))
}

/// `cond ? a : b` element by element for `a` and `b` of one type and shape, `cond` a
/// one-element bool of any rank.
pub(super) fn select_on(ctx: &mut Ctx, cond: ValueId, a: ValueId, b: ValueId) -> Result<ValueId> {
    if a == b {
        return Ok(a);
    }
    let ty = ctx.ty(a);
    let idx: Vec<E> = (0..ty.shape.len() as u32).map(expr::var).collect();
    let body = expr::select(
        expr::load(DType::Bool, 0, vec![expr::i(0); ctx.rank(cond)]),
        expr::load(ty.dtype, 1, idx.clone()),
        expr::load(ty.dtype, 2, idx),
    );
    ctx.map(ty.dtype, ty.shape, vec![cond, a, b], body)
}
