//! FlexAttention (`ai.onnx.preview`): the attention pieces of `ops::flex_attention` with
//! the node's `score_mod` and `prob_mod` subgraphs inlined between them, each applied once
//! to the whole `[batch, heads, q_len, kv_len]` tensor.

use crate::error::{Error, Result};
use crate::frontend::Importer;
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::flex_attention::{self, Flex};
use crate::ir::dim::shape_from;
use crate::ir::{Origin, ValueId};
use onnxc_proto::NodeProto;

impl Importer<'_> {
    pub(in crate::frontend) fn flex_attention(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
    ) -> Result<()> {
        let mut inputs = Vec::new();
        for k in 0..n.input.len() {
            inputs.push(self.operand(n, origin, k)?);
        }
        let (scores, plan) = flex_attention::scores(&mut self.node_ctx(n, origin, inputs))?;
        let scores = self.modifier(n, origin, "score_mod", scores, &plan)?;
        let probs = flex_attention::softmax(&mut self.node_ctx(n, origin, vec![]), scores)?;
        let probs = self.modifier(n, origin, "prob_mod", probs, &plan)?;
        let y = flex_attention::output(&mut self.node_ctx(n, origin, vec![]), &plan, probs)?;
        self.bind_outputs(n, origin, &[y])
    }

    /// `x` through the node's subgraph attribute `attr` if it has one, which must keep
    /// its type and shape.
    fn modifier(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        attr: &str,
        x: ValueId,
        plan: &Flex,
    ) -> Result<ValueId> {
        let Some(g) = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(attr))
            .and_then(|a| a.g.as_ref())
        else {
            return Ok(x);
        };
        let outs = self.inline_body(g, &[x], origin, attr)?;
        let [y] = outs[..] else {
            return Err(Error::Model(format!(
                "{origin}: the {attr} has {} outputs; it must have one",
                outs.len()
            )));
        };
        let ty = self.g.value_type(y);
        let want = shape_from(&plan.scores_shape);
        if ty.dtype != plan.dtype || ty.shape != want {
            return Err(Error::Model(format!(
                "{origin}: the {attr} gives {} {}; it must keep its input's type and shape, {} {}",
                ty.dtype,
                crate::ir::dim::fmt_shape(&ty.shape),
                plan.dtype,
                crate::ir::dim::fmt_shape(&want)
            )));
        }
        Ok(y)
    }

    /// A builder context for the node `n` with the given operands.
    fn node_ctx<'s>(
        &'s mut self,
        n: &'s NodeProto,
        origin: &Origin,
        inputs: Vec<Option<ValueId>>,
    ) -> Ctx<'s> {
        Ctx::new(
            &mut self.g,
            n,
            origin.clone(),
            origin.opset,
            inputs,
            self.dir,
            self.opts.fold_limit,
        )
    }
}
