//! Control flow. `If` with a constant condition (what exporters' shape checks fold to) is
//! inlined by the importer (`frontend::Importer::inline_if`): the taken branch's nodes
//! replace the node. This builder is reached only for a run-time condition.

use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::ValueId;

pub fn if_runtime(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    Err(ctx.unsupported(
        "the condition is computed at run time; onnxc inlines an If only when its condition is a \
         constant (an initializer, or computable from shapes)",
    ))
}
