//! Indexing and data movement, one file per op family: `slice` (Slice), `gather` (Gather,
//! GatherElements, GatherND), `scatter` (ScatterND, ScatterElements, MaxUnpool), `expand`
//! (Expand, Tile), `generate` (Range, OneHot, Trilu, EyeLike), `split` (Split), `pad` (Pad,
//! CenterCropPad), `rearrange` (DepthToSpace, SpaceToDepth, ReverseSequence), `cumulative`
//! (CumSum, CumProd). This file holds the helpers they share.

mod cumulative;
mod expand;
mod gather;
mod generate;
mod pad;
mod rearrange;
mod scatter;
mod slice;
mod split;

pub use cumulative::{cum_prod, cum_sum};
pub use expand::{expand, tile};
pub use gather::{gather, gather_elements, gather_nd};
pub use generate::{eye_like, one_hot, range, trilu};
pub use pad::{center_crop_pad, pad};
pub use rearrange::{depth_to_space, reverse_sequence, space_to_depth};
pub use scatter::{max_unpool, scatter_elements, scatter_nd, tensor_scatter};
pub use slice::{slice, slice_params};
pub use split::split;

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, E};
use crate::ir::{DType, ValueId};

/// The index variables `v0 … v(rank-1)`.
fn vars(rank: usize) -> Vec<E> {
    (0..rank as u32).map(expr::var).collect()
}

/// Index operands are int32 or int64.
fn index_types(ctx: &Ctx, v: ValueId, what: &str) -> Result<()> {
    build::expect_types(ctx, v, what, &[DType::I32, DType::I64]).map(|_| ())
}
