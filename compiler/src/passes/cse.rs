//! Common-subexpression elimination: nodes with the same op and operands compute the same
//! value; later duplicates are redirected to the first. Constants are compared by content.

use crate::ir::{Graph, Op};

pub fn run(g: &mut Graph) -> usize {
    let order = g.topo_order();
    let mut seen: std::collections::HashMap<Vec<crate::ir::ValueId>, Vec<crate::ir::NodeId>> =
        Default::default();
    let mut merged = 0;
    for id in order {
        let n = g.node(id);
        if matches!(n.op, Op::Input | Op::Assert { .. }) || n.outputs.len() != 1 {
            continue;
        }
        // Maps of no operand kept from folding (`Graph::keep_expanding`: a Range over each
        // of two run-time dims) stay apart, lest they merge at the values where the dims
        // are equal and not elsewhere.
        if g.keep_expanding && n.inputs.is_empty() && matches!(n.op, Op::Map(_)) {
            continue;
        }
        // Large constants are not worth hashing byte by byte; small ones often repeat.
        if let Op::Const(t) = &n.op
            && t.data.len() > 4096
        {
            continue;
        }
        let bucket = seen.get(&n.inputs).map(|b| b.as_slice()).unwrap_or(&[]);
        let dup = bucket.iter().copied().find(|&o| {
            let m = g.node(o);
            m.op == n.op && m.outputs == n.outputs
        });
        match dup {
            Some(o) => {
                g.replace_uses(id.out(0), o.out(0));
                merged += 1;
            }
            None => {
                let key = n.inputs.clone();
                seen.entry(key).or_default().push(id);
            }
        }
    }
    merged
}
