//! `If`: the taken branch of a constant condition (`inline_if`), or both branches and a
//! select on a run-time one (`if_convert`), their run-time checks guarded by the condition
//! (`guard_failures`, which unrolled loops use too).

use super::{Snapshot, Val, select_on};
use crate::error::{Error, Result};
use crate::frontend::Importer;
use crate::frontend::sequence::Seq;
use crate::ir::dim::known_dims;
use crate::ir::expr::{self, E};
use crate::ir::{DType, Op, Origin, Scalar, ValueId};
use onnxc_proto::NodeProto;

impl Importer<'_> {
    /// Makes the nodes added since `before` fail the run only where `guard` (a one-element
    /// bool) holds, so that computing them where the model would not (an untaken branch, an
    /// iteration past the loop's end) is exact: an assertion asserts `!guard || x`, and a
    /// map's checked indices stop failing (an out-of-range index reads element 0, as a
    /// failing check does) while a new assertion fails the run, `ONNXC_ERR_INDEX`, where
    /// `guard` holds and one of them is out of range. Returns the node that cannot be guarded
    /// this way (a checked index inside a reduction or scatter), if any.
    pub(in crate::frontend) fn guard_failures(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        before: &Snapshot,
        guard: ValueId,
    ) -> Result<Option<String>> {
        use crate::ir::expr::ExprKind;
        fn defuse(e: &E, checks: &mut Vec<E>) -> E {
            expr::rewrite(e, &mut |x| match &x.kind {
                ExprKind::CheckIndex { index, bound } => {
                    let idx = defuse(index, checks);
                    let b = *bound;
                    let ok = expr::and(
                        expr::ge(idx.clone(), expr::i(-b)),
                        expr::lt(idx.clone(), expr::i(b)),
                    );
                    checks.push(ok.clone());
                    let wrapped = expr::select(
                        expr::lt(idx.clone(), expr::i(0)),
                        expr::add(idx.clone(), expr::i(b)),
                        idx,
                    );
                    Some(expr::select(ok, wrapped, expr::i(0)))
                }
                _ => None,
            })
        }
        let guard_rank = self.g.value_type(guard).shape.len();
        let new = self.g.added_since(before.mark);
        for id in new {
            let node = self.g.node(id);
            let inputs = node.inputs.clone();
            match node.op.clone() {
                Op::Assert { .. } => {
                    let v = inputs[0];
                    let ty = self.g.value_type(v).clone();
                    let vars: Vec<E> = (0..ty.shape.len() as u32).map(expr::var).collect();
                    let body = expr::select(
                        expr::load(DType::Bool, 0, vec![expr::i(0); guard_rank]),
                        expr::load(DType::Bool, 1, vars),
                        expr::konst(DType::Bool, Scalar::B(true)),
                    );
                    let guarded = self.helper_ctx(n, origin).map(
                        DType::Bool,
                        ty.shape,
                        vec![guard, v],
                        body,
                    )?;
                    let mut ins = inputs;
                    ins[0] = guarded;
                    self.g.set_inputs(id, ins);
                }
                Op::Map(m) if expr::can_fail(&m.body) => {
                    let mut checks = Vec::new();
                    let body = defuse(&m.body, &mut checks);
                    let ty = self.g.node(id).outputs[0].clone();
                    *self.g.op_mut(id) = Op::Map(crate::ir::graph::MapOp { body });
                    let all = checks
                        .into_iter()
                        .reduce(expr::and)
                        .expect("a checked index");
                    let g_in = inputs.len() as u32;
                    let valid = expr::select(
                        expr::load(DType::Bool, g_in, vec![expr::i(0); guard_rank]),
                        all,
                        expr::konst(DType::Bool, Scalar::B(true)),
                    );
                    let mut ins = inputs;
                    ins.push(guard);
                    let mut ctx = self.helper_ctx(n, origin);
                    let ok = ctx.map(DType::Bool, ty.shape, ins, valid)?;
                    ctx.assert(ok, onnxc_runtime::abi::ONNXC_ERR_INDEX)?;
                }
                op if op.can_fail() => {
                    return Ok(Some(format!(" ({})", self.g.node(id).origin)));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// The value of an If node's condition when it is a constant.
    pub(in crate::frontend) fn if_condition(&self, n: &NodeProto) -> Option<bool> {
        let cond = n.input.first().filter(|s| !s.is_empty())?;
        let t = self.g.const_value(*self.env.get(cond)?)?;
        (t.len() == 1).then(|| t.get(0).as_bool())
    }

    /// An If whose condition is a constant (computed from initializers and shapes, as
    /// exporters' shape checks are): the taken branch's nodes are imported in its place, and
    /// its outputs become the If's. A run-time condition reaches the registry's `If` builder,
    /// which reports it as unsupported.
    pub(in crate::frontend) fn inline_if(&mut self, n: &NodeProto, origin: &Origin) -> Result<()> {
        let taken = self.if_condition(n).expect("constant condition");
        let attr = if taken { "then_branch" } else { "else_branch" };
        let gp = Self::graph_attr(n, origin, attr)?;
        if gp.output.len() != n.output.len() {
            return Err(Error::Model(format!(
                "{origin}: the {attr} has {} outputs, the node {}",
                gp.output.len(),
                n.output.len()
            )));
        }
        let outs = self.inline_body_values(gp, &[], origin, attr)?;
        self.bind_values(n, origin, outs)
    }

    /// An If on a run-time condition, if-converted: both branches are imported and computed,
    /// and each output selects the taken branch's value element by element. Exact — same
    /// values, same return code — because each branch's checks (assertions, checked indices)
    /// are guarded by the condition (`guard_failures`: an untaken branch never fails the run)
    /// and both branches must give each output one type and shape; a checked index inside a
    /// reduction or scatter, which is not guarded, is reported as unsupported. The untaken
    /// branch's time is the price. A branch whose import fails with a model error (shapes
    /// valid only for inputs that take the other branch) is left out: the run fails with
    /// `ONNXC_ERR_SHAPE` where the condition selects it.
    pub(in crate::frontend) fn if_convert(&mut self, n: &NodeProto, origin: &Origin) -> Result<()> {
        let cond = self.operand(n, origin, 0)?.ok_or_else(|| {
            Error::Model(format!("{origin}: the condition (input 0) is required"))
        })?;
        let ty = self.g.value_type(cond).clone();
        if ty.dtype != DType::Bool {
            return Err(Error::Model(format!(
                "{origin}: the condition is {}; it must be bool",
                ty.dtype
            )));
        }
        match known_dims(&ty.shape) {
            Some(d) if d.iter().product::<i64>() == 1 => {}
            _ => {
                return Err(Error::Model(format!(
                    "{origin}: the condition has shape {}; it must hold one element",
                    crate::ir::dim::fmt_shape(&ty.shape)
                )));
            }
        }
        let then_g = Self::graph_attr(n, origin, "then_branch")?;
        let else_g = Self::graph_attr(n, origin, "else_branch")?;
        for (g, attr) in [(then_g, "then_branch"), (else_g, "else_branch")] {
            if g.output.len() != n.output.len() {
                return Err(Error::Model(format!(
                    "{origin}: the {attr} has {} outputs, the node {}",
                    g.output.len(),
                    n.output.len()
                )));
            }
        }
        // Each branch's checks fail the run only where the branch is taken.
        let not_cond = {
            let body = expr::unary(
                expr::UnOp::Not,
                expr::load(DType::Bool, 0, vec![expr::i(0); ty.shape.len()]),
            );
            self.helper_ctx(n, origin)
                .map(DType::Bool, vec![], vec![cond], body)?
        };
        // A branch that cannot be built at these shapes (its shapes hold only for inputs
        // that take the other branch, as in models that switch on a sample rate) is left
        // out: the If is the other branch, and the run fails with ONNXC_ERR_SHAPE where the
        // condition selects the branch left out, as the model's own run fails there.
        let mut outs_of = Vec::with_capacity(2);
        let mut invalid: Vec<(&str, String)> = Vec::new();
        for (g, attr, guard) in [
            (then_g, "then_branch", cond),
            (else_g, "else_branch", not_cond),
        ] {
            let before = self.snapshot();
            let (unsupported, warnings) = (self.unsupported.len(), self.g.warnings.len());
            match self.inline_body_values(g, &[], origin, attr) {
                Ok(outs) => outs_of.push(Some(outs)),
                Err(Error::Model(msg)) if self.unsupported.len() == unsupported => {
                    self.discard_checks_since(&before);
                    self.g.warnings.truncate(warnings);
                    invalid.push((attr, msg));
                    outs_of.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            }
            if let Some(what) = self.guard_failures(n, origin, &before, guard)? {
                return Err(self.unsupported_node(
                    n,
                    origin,
                    format!(
                        "the condition is computed at run time and the {attr} holds a checked \
                         index inside a reduction or scatter{what}; onnxc computes both \
                         branches and can make only assertions and maps fail where a branch \
                         is taken"
                    ),
                ));
            }
        }
        let else_outs = outs_of.pop().expect("else");
        let then_outs = outs_of.pop().expect("then");
        let (then_outs, else_outs) = match (then_outs, else_outs) {
            (Some(t), Some(e)) => (t, e),
            (Some(outs), None) | (None, Some(outs)) => {
                let (attr, msg) = invalid.pop().expect("the branch left out");
                let selects_valid = if attr == "else_branch" {
                    cond
                } else {
                    not_cond
                };
                self.helper_ctx(n, origin)
                    .assert(selects_valid, onnxc_runtime::abi::ONNXC_ERR_SHAPE)?;
                self.g.warnings.push(format!(
                    "{origin}: the {attr} cannot be computed at these input shapes ({msg}); \
                     it is left out, and the run returns ONNXC_ERR_SHAPE where the condition \
                     selects it"
                ));
                return self.bind_values(n, origin, outs);
            }
            (None, None) => {
                let (_, msg) = invalid.swap_remove(0);
                return Err(Error::Model(msg));
            }
        };
        let mut outs = Vec::with_capacity(then_outs.len());
        for (k, (a, b)) in then_outs.iter().zip(&else_outs).enumerate() {
            // Sequences: of one length in both branches, selected tensor by tensor.
            let (a, b) = match (a, b) {
                (Val::Tensor(a), Val::Tensor(b)) => (*a, *b),
                (Val::Absent, Val::Absent) => {
                    outs.push(Val::Absent);
                    continue;
                }
                (Val::Seq(sa), Val::Seq(sb))
                    if sa.items.len() == sb.items.len() && sa.elem == sb.elem =>
                {
                    let mut items = Vec::with_capacity(sa.items.len());
                    for (j, (&a, &b)) in sa.items.iter().zip(&sb.items).enumerate() {
                        if self.g.value_type(a) != self.g.value_type(b) {
                            return Err(self.unsupported_node(
                                n,
                                origin,
                                format!(
                                    "the condition is computed at run time and tensor {j} of \
                                     output {k} (a sequence) has another shape in each branch; \
                                     onnxc needs one shape for it"
                                ),
                            ));
                        }
                        let mut ctx = self.helper_ctx(n, origin);
                        items.push(select_on(&mut ctx, cond, a, b)?);
                    }
                    outs.push(Val::Seq(Seq {
                        elem: sa.elem,
                        items,
                    }));
                    continue;
                }
                _ => {
                    return Err(self.unsupported_node(
                        n,
                        origin,
                        format!(
                            "the condition is computed at run time and output {k} is a \
                             sequence or an optional that is not one of one length and type in \
                             both branches; onnxc keeps sequences and optionals at compile time \
                             and needs one length (and presence) for it"
                        ),
                    ));
                }
            };
            let (ta, tb) = (self.g.value_type(a).clone(), self.g.value_type(b).clone());
            if ta != tb {
                return Err(self.unsupported_node(
                    n,
                    origin,
                    format!(
                        "the condition is computed at run time and output {k} is {} {} in the \
                         then_branch, {} {} in the else_branch; onnxc needs one type and shape \
                         for it",
                        ta.dtype,
                        crate::ir::dim::fmt_shape(&ta.shape),
                        tb.dtype,
                        crate::ir::dim::fmt_shape(&tb.shape)
                    ),
                ));
            }
            let mut ctx = self.helper_ctx(n, origin);
            outs.push(Val::Tensor(select_on(&mut ctx, cond, a, b)?));
        }
        self.bind_values(n, origin, outs)
    }

    /// Drops the run-time checks and data-dependent marks of the nodes added since `before`
    /// (a branch whose import failed): its nodes stay unread until dead-code elimination.
    fn discard_checks_since(&mut self, before: &Snapshot) {
        let new: std::collections::HashSet<_> =
            self.g.added_since(before.mark).into_iter().collect();
        self.g.asserts.retain(|a| !new.contains(a));
        self.g.data_dims.retain(|v, _| !new.contains(&v.node));
        self.data_dependent.retain(|v| !new.contains(&v.node));
    }
}
