//! Static memory planning: every arena value gets an offset such that values whose lifetimes
//! overlap never share bytes. Greedy by size (largest first, lowest fitting offset), as in
//! TFLite's arena planner.

use super::{Schedule, Storage};

pub const ALIGN: u64 = 64;

fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// Steps per block of the conflict index.
const BUCKET: usize = 64;

/// Assigns arena offsets and sets `arena_size` (kernels' scratch
/// follows it, `loops::lower`).
pub fn plan(s: &mut Schedule) {
    let n = s.values.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    let places = s.places();
    for (i, st) in s.steps.iter().enumerate() {
        let out = places[st.output].0;
        first[out] = first[out].min(i);
        last[out] = last[out].max(i);
        for &v in &st.inputs {
            let r = places[v].0;
            last[r] = last[r].max(i);
        }
    }
    // A result computed in place takes its operand's bytes: one item from the operand's
    // first step to the result's last (`owner`: the value whose item holds v's bytes).
    let mut owner: Vec<usize> = (0..n).collect();
    let arena = |v: usize| matches!(s.values[v].storage, Storage::Arena(_));
    for (i, st) in s.steps.iter().enumerate() {
        let Some(k) = in_place_operand(st) else {
            continue;
        };
        let (x, out) = (st.inputs[k], st.output);
        let whole = |v: usize| places[v] == (v, 0) && arena(v);
        if whole(x)
            && whole(out)
            && last[x] == i
            && first[out] == i
            && s.values[x].bytes() == s.values[out].bytes()
            && !st
                .inputs
                .iter()
                .enumerate()
                .any(|(j, &v)| j != k && places[v].0 == x)
        {
            let o = owner[x];
            owner[out] = o;
            last[o] = last[o].max(last[out]);
        }
    }
    // (size, first, last, value)
    let mut items: Vec<(u64, usize, usize, usize)> = Vec::new();
    for v in 0..n {
        if arena(v) && owner[v] == v && first[v] != usize::MAX {
            items.push((align(s.values[v].bytes().max(1)), first[v], last[v], v));
        }
    }
    items.sort_by(|a, b| b.0.cmp(&a.0).then(a.3.cmp(&b.3)));
    let mut placed: Vec<(u64, u64, usize, usize)> = Vec::new(); // offset, size, first, last
    // Placed values indexed by the blocks of BUCKET steps their lifetimes touch: the
    // conflicts of a value are found among those of its own blocks, not among all placed
    // values (quadratic for models of 100,000 steps).
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); s.steps.len() / BUCKET + 1];
    let mut offsets = vec![0u64; n];
    let mut total = 0u64;
    let mut conflicts: Vec<(u64, u64)> = Vec::new();
    for (size, f, l, slot) in items {
        conflicts.clear();
        for b in &buckets[f / BUCKET..=l / BUCKET] {
            conflicts.extend(
                b.iter()
                    .map(|&k| placed[k])
                    .filter(|p| p.2 <= l && f <= p.3)
                    .map(|p| (p.0, p.0 + p.1)),
            );
        }
        // A value registered in several blocks is found once per block.
        conflicts.sort_unstable();
        conflicts.dedup();
        let mut off = 0u64;
        for &(a, b) in &conflicts {
            if off + size <= a {
                break;
            }
            off = off.max(b);
        }
        for b in &mut buckets[f / BUCKET..=l / BUCKET] {
            b.push(placed.len());
        }
        placed.push((off, size, f, l));
        offsets[slot] = off;
        total = total.max(off + size);
    }
    for v in 0..n {
        let at = offsets[owner[v]];
        if let Storage::Arena(o) = &mut s.values[v].storage {
            *o = at;
        }
    }
    s.arena_size = total;
}

/// The operand whose bytes `st`'s result may take (`KernelOp::in_place`).
fn in_place_operand(st: &super::Step) -> Option<usize> {
    match &st.kind {
        super::StepKind::Kernel(k) => k.in_place().filter(|&i| i < st.inputs.len()),
        _ => None,
    }
}
