//! Work estimates of a graph (`onnxc inspect`).

use super::dim::known_dims;
use super::graph::{Graph, Op};

/// Multiply-adds of the graph's matrix products and convolutions (MatMul, Gemm, Conv and
/// what the frontend builds on them: Einsum products, attention), the work that dominates
/// a network; None if a shape they need is not known at compile time. Other ops (maps,
/// reductions, pools, kernel ops such as ConvTranspose) are not counted.
pub fn multiply_adds(g: &Graph) -> Option<u64> {
    let mut total: u64 = 0;
    for id in g.node_ids() {
        let n = g.node(id);
        let per_output = match &n.op {
            Op::MatMul(m) => {
                let a = &g.value_type(*n.inputs.first()?).shape;
                let k = if m.trans_a && a.len() >= 2 {
                    &a[a.len() - 2]
                } else {
                    a.last()?
                };
                k.known()?
            }
            // Weights M × C/group × kernel: each output sums C/group × kernel products.
            Op::Conv(_) => known_dims(&g.value_type(*n.inputs.get(1)?).shape)?
                .iter()
                .skip(1)
                .product(),
            _ => continue,
        };
        let outputs: i64 = known_dims(&n.outputs.first()?.shape)?.iter().product();
        total = total.saturating_add((outputs as u64).saturating_mul(per_output as u64));
    }
    Some(total)
}
