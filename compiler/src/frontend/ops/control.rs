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
