//! Control flow. The importer inlines subgraphs itself (`frontend/subgraph.rs`): `If` with a
//! constant condition (what exporters' shape checks fold to) becomes the taken branch's
//! nodes, `If` on a run-time condition is if-converted, `Loop` and `Scan` are unrolled. The
//! registry lists them, with the builder below, so that they count as known ops.

use crate::error::{Error, Result};
use crate::frontend::ctx::Ctx;
use crate::ir::ValueId;

/// Never reached: the importer handles the op before it consults the registry.
pub fn imported(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    Err(Error::Internal(format!(
        "{}: reached the registry, but the importer builds this op itself",
        ctx.origin
    )))
}

// Optional values (opsets 15, 18). onnxc values are tensors, so an optional that holds a
// tensor is that tensor, and one that is known to be empty (an omitted input) is decided at
// compile time; an empty `Optional()` flowing into other ops is not representable.

/// OptionalHasElement: a constant — true for a tensor, false for an omitted input.
pub fn optional_has_element(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let present = ctx.opt_input(0).is_some();
    let t = crate::ir::Tensor::scalar(crate::ir::DType::Bool, crate::ir::Scalar::B(present));
    Ok(vec![ctx.constant(t)])
}

/// OptionalGetElement: the tensor itself.
pub fn optional_get_element(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    ctx.opt_input(0)
        .map(|v| vec![v])
        .ok_or_else(|| ctx.err("the input is an empty optional; it has no element to get"))
}

/// Optional: wraps its tensor (the tensor itself). An empty one never reaches here: the
/// importer makes it an omitted value (`Importer::absent`).
pub fn optional(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    ctx.opt_input(0)
        .map(|v| vec![v])
        .ok_or_else(|| ctx.err("an empty optional reached the tensor builder (a compiler bug)"))
}
