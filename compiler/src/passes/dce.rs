//! Dead-code elimination: drops nodes no graph output depends on.

use crate::ir::{Graph, NodeId};
use std::collections::HashSet;

pub fn run(g: &mut Graph) -> usize {
    let mut live: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<NodeId> = g.outputs.iter().map(|o| o.value.node).collect();
    stack.extend(g.inputs.iter().map(|i| i.value.node));
    let asserts: Vec<NodeId> = g
        .asserts
        .iter()
        .copied()
        .filter(|a| g.contains(*a))
        .collect();
    g.asserts = asserts;
    stack.extend(g.asserts.iter().copied());
    while let Some(n) = stack.pop() {
        if live.insert(n) {
            stack.extend(g.node(n).inputs.iter().map(|v| v.node));
        }
    }
    let dead: Vec<NodeId> = g
        .node_ids()
        .into_iter()
        .filter(|n| !live.contains(n))
        .collect();
    g.remove_nodes(&dead);
    dead.len()
}
