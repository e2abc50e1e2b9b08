//! ZipMap: a classifier's `[N, C]` probabilities as a sequence of N maps {label: value}.
//! The maps' keys are the same for every row, so onnxc keeps the tensor and records the
//! keys (`Graph::zipmaps`): the output is exposed as the `[N, C]` float32 tensor, and the
//! header and `onnxc_model_info` list the keys, from which a caller rebuilds the maps. Such
//! an output may only be a graph output.

use super::Labels;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::graph::MapKeys;
use crate::ir::{DType, ValueId};

pub fn zipmap(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let keys =
        super::labels(ctx, "classlabels_int64s", "classlabels_strings")?.ok_or_else(|| {
            ctx.err("one of 'classlabels_int64s' and 'classlabels_strings' is required")
        })?;
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "input X", &[DType::F32])?;
    let shape = ctx.known_shape(x)?;
    let (n, c) = match shape.as_slice() {
        [c] => (1, *c),
        [n, c] => (*n, *c),
        _ => {
            return Err(ctx.err(format!(
                "input X has shape {shape:?}; ZipMap takes [N, C] (or [C])"
            )));
        }
    };
    if c as usize != keys.len() {
        return Err(ctx.err(format!(
            "input X has {c} columns but there are {} class labels; ZipMap pairs them one to one",
            keys.len()
        )));
    }
    let x = ctx.reshape(x, vec![Dim::Known(n), Dim::Known(c)])?;
    // A value of its own (a copy the fuser removes), so the keys belong to this output.
    let y = build::unary(ctx, x, DType::F32, |v| v)?;
    let keys = match keys {
        Labels::Ints(v) => MapKeys::Ints(v),
        Labels::Strings(v) => MapKeys::Strings(v),
    };
    ctx.g.zipmaps.insert(y, std::sync::Arc::new(keys));
    Ok(vec![y])
}
