//! Tree ensembles (ONNX-ML TreeEnsemble, TreeEnsembleClassifier/Regressor): the aggregated
//! leaf values of every tree for each row, `onnxc_tree_ensemble`.
//!
//! The compiler turns every ONNX node rule (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ, set membership,
//! float64 thresholds against float32 inputs) into one canonical test, *go left iff
//! `x[feature] <= threshold`, NaN goes left iff the node says so*, with thresholds in the
//! input's type (`Forest`); a rule that needs more (equality, membership) becomes several
//! such nodes. `encode` lays the forest out for a branch-free walk:
//!
//! * Inputs are compared as *order keys*: a float's bits mapped so that unsigned integer
//!   order is the float order (−0 and +0 one key). A row is keyed once, each feature twice:
//!   a copy where NaN is the largest key, read by nodes that send NaN right, and one where
//!   NaN is 0, below every number, read by nodes that send NaN left. A test is then one
//!   unsigned compare with the threshold's key, no NaN test.
//! * Nodes become *records* `{threshold key, key offset, pair, slot}`. A branch's children
//!   are the two records at `pair`, left then right, so a step picks one of two addresses
//!   instead of loading a child index. Every branch has its own pair holding copies of its
//!   children's records (a node shared by several branches, as equality and set tests
//!   share their false branch, is copied; the pair below it is not), laid out tree by
//!   tree, breadth first. A leaf is an absorbing record: its threshold is the largest key
//!   (every key passes) and its pair is itself. A walk is the same step repeated as many
//!   times as the tree's longest path (stored per tree): it ends on the leaf.
//! * Records and keys are addressed by byte offsets, so a step is: load the key offset,
//!   load the key, compare it with the threshold, pick one of two record addresses.
//!
//! One row at a time (few rows), `ROW_LANES` trees are walked at once, trees grouped by
//! depth (independent walks: their load latencies overlap; the records come from L2), and
//! the reached leaves aggregated in tree order afterwards. Sums over more rows key them in blocks of `BLOCK` and walk the
//! trees one by one, `LANES` rows at once, so a tree's records stay in L1 while the block
//! passes through it. Either way a row adds its trees' values in tree order, in the
//! accumulation type: onnxruntime's order, so sums, and ties between classes, are the same.
//!
//! The encoded forest is one read-only sealed `i64` blob (`params::seal`: its length, the
//! header, then the tables; offsets in bytes from the header's start). `encode` validates the forest, and `check` the array it makes:
//! every record, root, key offset and leaf entry is in range and every tree's depth covers
//! its longest path, so the walk needs no bounds checks whatever the input values, given
//! the `scratch_bytes` of workspace the same header asks for.

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params::{self, decoded};
use std::hint::select_unpredictable;

/// Rows of one tree walked interleaved (the tree's records are in L1).
pub const LANES: usize = 8;
/// Trees of one row walked interleaved: more walks in flight hide more of L2's latency
/// (16 was 9% faster than 8 on a 500-tree LightGBM model; their cursors do not all fit in
/// registers, 24 and 32 were no better).
const ROW_LANES: usize = 16;
/// Rows keyed and walked together by sums over many rows (their keys stay in L1: 64 rows
/// of 30 float32 features, two copies, are 15 KB).
const BLOCK: usize = 64;
/// Most features a forest may test (key offsets are 32-bit).
const MAX_FEATURES: u32 = 1 << 20;

const MAGIC: i64 = 0x6f6e_6e78_7472_6565; // "onnxtree"
const HEADER: usize = 18;
// Header words.
const H_INPUT_F64: usize = 1;
const H_VALUE_F64: usize = 2;
const H_AGGREGATE: usize = 3;
const H_FEATURES: usize = 4;
const H_TARGETS: usize = 5;
const H_TREES: usize = 6;
/// Nodes of the canonical forest (for `describe`).
const H_NODES: usize = 7;
/// 0, or 1 + the target every leaf's one entry is for.
const H_SINGLE: usize = 8;
const H_ROOTS: usize = 9;
const H_RECORDS: usize = 10;
const H_N_RECORDS: usize = 11;
const H_ORDER: usize = 12;
const H_DEPTHS: usize = 13;
const H_VALUES: usize = 14;
const H_STARTS: usize = 15;
const H_TARGET_IDS: usize = 16;
const H_SLOTS: usize = 17;

/// How the trees' values combine per target.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Aggregate {
    /// Sum in tree order (AVERAGE divides afterwards).
    Sum,
    /// Minimum; a target no tree reaches is 0.
    Min,
    /// Maximum; a target no tree reaches is 0.
    Max,
}

/// One canonical node.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Go to `left` iff `x[feature] <= threshold` (a value of the input's type; NaN: never),
    /// or `x[feature]` is NaN and `nan_left`; to `right` otherwise.
    Branch {
        feature: u32,
        threshold: f64,
        nan_left: bool,
        left: u32,
        right: u32,
    },
    /// A leaf: the values of `Forest::leaves[slot]`.
    Leaf { slot: u32 },
}

/// A forest in canonical form, as the compiler builds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Forest {
    /// Inputs are float64 (thresholds compared in float64), else float32.
    pub input_f64: bool,
    /// Values accumulate (and the output is) in float64, else float32.
    pub value_f64: bool,
    pub aggregate: Aggregate,
    /// Elements per input row.
    pub n_features: u32,
    /// Values per output row.
    pub n_targets: u32,
    /// Every tree's nodes; children index this list.
    pub nodes: Vec<Node>,
    /// The root node of each tree, in aggregation order.
    pub roots: Vec<u32>,
    /// Per leaf slot: (target, weight) pairs.
    pub leaves: Vec<Vec<(u32, f64)>>,
}

/// Why a forest cannot be encoded (a compiler bug: the frontend builds valid forests), or
/// why an array is not an encoded forest.
#[derive(Debug, PartialEq)]
pub struct Invalid(pub String);

fn push_bytes(out: &mut Vec<u8>, b: &[u8]) -> usize {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let at = out.len();
    out.extend_from_slice(b);
    at
}

/// Bytes of a record and of a key.
fn sizes(input_f64: bool) -> (usize, usize) {
    if input_f64 { (24, 8) } else { (16, 4) }
}

/// Bytes of the keyed block: `BLOCK` rows, two copies of every feature.
fn key_bytes(n_features: usize, input_f64: bool) -> usize {
    2 * n_features * BLOCK * sizes(input_f64).1
}

/// Checks the forest and lays it out for `onnxc_tree_ensemble`.
pub fn encode(f: &Forest) -> Result<Vec<i64>, Invalid> {
    let n = f.nodes.len();
    if n >= (1 << 31) || f.leaves.len() >= (1 << 31) || f.roots.len() >= (1 << 31) {
        return Err(Invalid("too many nodes".into()));
    }
    if f.n_features > MAX_FEATURES {
        return Err(Invalid(format!(
            "{} features (at most {MAX_FEATURES})",
            f.n_features
        )));
    }
    if f.roots.iter().any(|&r| r as usize >= n) {
        return Err(Invalid("a root is out of range".into()));
    }
    let mut has_branch = false;
    for (k, node) in f.nodes.iter().enumerate() {
        match *node {
            Node::Branch {
                feature,
                threshold,
                left,
                right,
                ..
            } => {
                if feature >= f.n_features {
                    return Err(Invalid(format!("node {k}: feature {feature} out of range")));
                }
                if left as usize >= n || right as usize >= n {
                    return Err(Invalid(format!("node {k}: a child is out of range")));
                }
                if !f.input_f64 && !threshold.is_nan() && threshold as f32 as f64 != threshold {
                    return Err(Invalid(format!(
                        "node {k}: threshold {threshold} is not a float32 value"
                    )));
                }
                has_branch = true;
            }
            Node::Leaf { slot } => {
                if slot as usize >= f.leaves.len() {
                    return Err(Invalid(format!("node {k}: leaf slot out of range")));
                }
            }
        }
    }
    acyclic(f)?;
    if has_branch && f.n_features == 0 {
        return Err(Invalid("branches over zero features".into()));
    }
    for l in &f.leaves {
        if l.iter().any(|&(t, _)| t >= f.n_targets) {
            return Err(Invalid("a leaf target is out of range".into()));
        }
    }
    let depths = depths(f);

    // Records, tree by tree, breadth first: (canonical node, record index of its pair).
    let mut recs: Vec<(u32, u32)> = Vec::new();
    let mut pair_of = vec![u32::MAX; n];
    let mut root_recs = Vec::with_capacity(f.roots.len());
    let mut queue = std::collections::VecDeque::new();
    for &root in &f.roots {
        root_recs.push(recs.len());
        queue.push_back(recs.len());
        recs.push((root, 0));
        while let Some(i) = queue.pop_front() {
            let k = recs[i].0 as usize;
            recs[i].1 = match f.nodes[k] {
                Node::Leaf { .. } => i as u32,
                Node::Branch { left, right, .. } => {
                    if pair_of[k] == u32::MAX {
                        pair_of[k] = recs.len() as u32;
                        queue.push_back(recs.len());
                        recs.push((left, 0));
                        queue.push_back(recs.len());
                        recs.push((right, 0));
                    }
                    pair_of[k]
                }
            };
        }
    }
    let (rec_size, key_size) = sizes(f.input_f64);
    if recs.len() > (u32::MAX as usize - rec_size) / rec_size {
        return Err(Invalid("too many nodes".into()));
    }
    let mut rec_bytes = Vec::with_capacity(recs.len() * rec_size);
    for (i, &(k, pair)) in recs.iter().enumerate() {
        let (thr, key, pair, slot) = match f.nodes[k as usize] {
            Node::Leaf { slot } => (None, 0, i, slot),
            Node::Branch {
                feature,
                threshold,
                nan_left,
                ..
            } => (
                Some(threshold),
                (2 * feature as usize + nan_left as usize) * BLOCK * key_size,
                pair as usize,
                0,
            ),
        };
        if f.input_f64 {
            let t = match thr {
                None => u64::MAX,
                Some(t) if t.is_nan() => u64::below_all(),
                Some(t) => u64::key(t),
            };
            rec_bytes.extend_from_slice(&t.to_le_bytes());
        } else {
            let t = match thr {
                None => u32::MAX,
                Some(t) if t.is_nan() => u32::below_all(),
                Some(t) => u32::key(t as f32),
            };
            rec_bytes.extend_from_slice(&t.to_le_bytes());
        }
        rec_bytes.extend_from_slice(&(key as u32).to_le_bytes());
        rec_bytes.extend_from_slice(&((pair * rec_size) as u32).to_le_bytes());
        rec_bytes.extend_from_slice(&slot.to_le_bytes());
        if f.input_f64 {
            rec_bytes.extend_from_slice(&0u32.to_le_bytes());
        }
    }
    let roots: Vec<u32> = root_recs.iter().map(|&i| (i * rec_size) as u32).collect();
    // Deepest trees first, so trees walked together need about as many steps.
    let mut order: Vec<u32> = (0..f.roots.len() as u32).collect();
    order.sort_by_key(|&t| std::cmp::Reverse(depths[t as usize]));

    // One entry per leaf, all for the same target: a value per slot, no entry lists.
    let single = match f.leaves.first() {
        Some(first) if first.len() == 1 => {
            let t = first[0].0;
            if f.leaves.iter().all(|l| l.len() == 1 && l[0].0 == t) {
                t as i64 + 1
            } else {
                0
            }
        }
        _ => 0,
    };
    let mut out = vec![0u8; HEADER * 8];
    let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    // Values are stored in the accumulation type.
    let f64s = |v: &[f64]| -> Vec<u8> {
        if f.value_f64 {
            v.iter().flat_map(|x| x.to_le_bytes()).collect()
        } else {
            v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect()
        }
    };
    let roots_at = push_bytes(&mut out, &u32s(&roots));
    let recs_at = push_bytes(&mut out, &rec_bytes);
    let order_at = push_bytes(&mut out, &u32s(&order));
    let depths_at = push_bytes(&mut out, &u32s(&depths));
    let (values, starts, targets) = if single != 0 {
        let v: Vec<f64> = f.leaves.iter().map(|l| l[0].1).collect();
        (push_bytes(&mut out, &f64s(&v)), 0, 0)
    } else {
        let mut start = vec![0u32];
        let mut tg = Vec::new();
        let mut w = Vec::new();
        for l in &f.leaves {
            for &(t, v) in l {
                tg.push(t);
                w.push(v);
            }
            start.push(tg.len() as u32);
        }
        (
            push_bytes(&mut out, &f64s(&w)),
            push_bytes(&mut out, &u32s(&start)),
            push_bytes(&mut out, &u32s(&tg)),
        )
    };
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let mut header = [0i64; HEADER];
    header[0] = MAGIC;
    header[H_INPUT_F64] = f.input_f64 as i64;
    header[H_VALUE_F64] = f.value_f64 as i64;
    header[H_AGGREGATE] = match f.aggregate {
        Aggregate::Sum => 0,
        Aggregate::Min => 1,
        Aggregate::Max => 2,
    };
    header[H_FEATURES] = f.n_features as i64;
    header[H_TARGETS] = f.n_targets as i64;
    header[H_TREES] = f.roots.len() as i64;
    header[H_NODES] = n as i64;
    header[H_SINGLE] = single;
    header[H_ROOTS] = roots_at as i64;
    header[H_RECORDS] = recs_at as i64;
    header[H_N_RECORDS] = recs.len() as i64;
    header[H_ORDER] = order_at as i64;
    header[H_DEPTHS] = depths_at as i64;
    header[H_VALUES] = values as i64;
    header[H_STARTS] = starts as i64;
    header[H_TARGET_IDS] = targets as i64;
    header[H_SLOTS] = f.leaves.len() as i64;
    for (k, h) in header.iter().enumerate() {
        out[8 * k..8 * k + 8].copy_from_slice(&h.to_le_bytes());
    }
    let enc = params::seal(
        out.chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))),
    );
    // The walk's safety rests on this array; check it as the kernel will read it.
    check(&enc).map_err(|e| Invalid(format!("encoded forest: {}", e.0)))?;
    Ok(enc)
}

/// The body of a sealed forest blob (after its length word; offsets are counted from its
/// start), or an empty slice when the length word is wrong.
fn body(blob: &[i64]) -> &[i64] {
    params::Reader::new(blob).map_or(&[], |r| r.body())
}

/// Checks that `enc` is an array the kernel may run on: every table inside it, every
/// record's key offset inside the keyed block and its pair inside the records (a leaf's
/// pair itself), every root a record, the walk order a permutation of the trees, every
/// tree's depth at least its longest path, every leaf slot, entry and target in range.
pub fn check(blob: &[i64]) -> Result<(), Invalid> {
    let bad = |s: &str| Err(Invalid(s.into()));
    // The per-call checks (a subset of those below), then the tables' contents.
    if let Err(e) = checked_header(blob) {
        return Err(Invalid(e.0.into()));
    }
    let enc = body(blob);
    let Some(h) = enc.get(..HEADER) else {
        return bad("shorter than the header");
    };
    if h[0] != MAGIC {
        return bad("no magic");
    }
    if ![h[H_INPUT_F64], h[H_VALUE_F64]]
        .iter()
        .all(|&b| b == 0 || b == 1)
        || !(0..=2).contains(&h[H_AGGREGATE])
    {
        return bad("a flag is out of range");
    }
    let count = |i: usize| -> Result<usize, Invalid> {
        if (0..1 << 32).contains(&h[i]) {
            Ok(h[i] as usize)
        } else {
            Err(Invalid(format!("header word {i} is out of range")))
        }
    };
    let (nf, nt, trees, n_recs, single, slots) = (
        count(H_FEATURES)?,
        count(H_TARGETS)?,
        count(H_TREES)?,
        count(H_N_RECORDS)?,
        count(H_SINGLE)?,
        count(H_SLOTS)?,
    );
    let input_f64 = h[H_INPUT_F64] != 0;
    let (rec_size, key_size) = sizes(input_f64);
    let value_size = if h[H_VALUE_F64] != 0 { 8 } else { 4 };
    if nf > MAX_FEATURES as usize || single > nt {
        return bad("features or the single target out of range");
    }
    if n_recs > (u32::MAX as usize - rec_size) / rec_size {
        return bad("too many records");
    }
    let bytes = enc.len() * 8;
    // A table: its bytes, if inside the array and 8-byte aligned.
    let table = |at: usize, len: usize, size: usize| -> Result<Vec<u8>, Invalid> {
        let off = count(at)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        if !off.is_multiple_of(8) || off < HEADER * 8 || off + len * size > bytes {
            return Err(Invalid(format!("table {at} is outside the array")));
        }
        Ok(enc
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .skip(off)
            .take(len * size)
            .collect())
    };
    let u32s = |b: Vec<u8>| -> Vec<u32> {
        b.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let roots = u32s(table(H_ROOTS, trees, 4)?);
    let order = u32s(table(H_ORDER, trees, 4)?);
    let depths = u32s(table(H_DEPTHS, trees, 4)?);
    let rec = table(H_RECORDS, n_recs, rec_size)?;
    // Records: (leaf, key offset, pair record, slot).
    let word = |i: usize, at: usize| {
        u32::from_le_bytes(rec[i * rec_size + at..][..4].try_into().expect("4"))
    };
    let th = if input_f64 { 8 } else { 4 };
    let mut kids: Vec<Option<usize>> = Vec::with_capacity(n_recs);
    for i in 0..n_recs {
        let leaf = rec[i * rec_size..][..th].iter().all(|&b| b == 0xff);
        let (key, pair, slot) = (word(i, th), word(i, th + 4) as usize, word(i, th + 8));
        if !pair.is_multiple_of(rec_size) {
            return bad("a record's pair is misaligned");
        }
        let pair = pair / rec_size;
        // Leaves step too (onto themselves): every record's key must be in the block, for
        // each of its rows. Without features no walk steps.
        let key = key as usize;
        if nf > 0
            && (!key.is_multiple_of(key_size) || key + BLOCK * key_size > key_bytes(nf, input_f64))
        {
            return Err(Invalid(format!("record {i}: key offset out of range")));
        }
        if leaf {
            if pair != i || slot as usize >= slots {
                return Err(Invalid(format!(
                    "leaf record {i}: pair or slot out of range"
                )));
            }
            kids.push(None);
        } else {
            if pair + 1 >= n_recs {
                return Err(Invalid(format!("record {i}: pair out of range")));
            }
            kids.push(Some(pair));
        }
    }
    // Longest walk from each record (branches passed), children before parents.
    let mut height: Vec<Option<u32>> = vec![None; n_recs];
    let mut on_path = vec![false; n_recs];
    for (t, &r) in roots.iter().enumerate() {
        let r = r as usize;
        if !r.is_multiple_of(rec_size) || r / rec_size >= n_recs {
            return Err(Invalid(format!("tree {t}: root out of range")));
        }
        let mut stack = vec![r / rec_size];
        while let Some(&i) = stack.last() {
            if height[i].is_some() {
                stack.pop();
                continue;
            }
            let Some(p) = kids[i] else {
                height[i] = Some(0);
                stack.pop();
                continue;
            };
            match (height[p], height[p + 1]) {
                (Some(a), Some(b)) => {
                    height[i] = Some(1 + a.max(b));
                    on_path[i] = false;
                    stack.pop();
                }
                (a, b) => {
                    if on_path[i] {
                        return Err(Invalid(format!("record {i} is its own descendant")));
                    }
                    on_path[i] = true;
                    if a.is_none() {
                        stack.push(p);
                    }
                    if b.is_none() {
                        stack.push(p + 1);
                    }
                }
            }
        }
        if height[r / rec_size].unwrap_or(u32::MAX) > depths[t] {
            return Err(Invalid(format!("tree {t}: depth below its longest path")));
        }
    }
    if nf == 0 && kids.iter().any(|k| k.is_some()) {
        return bad("branches over zero features");
    }
    let mut seen = vec![false; trees];
    for &t in &order {
        if t as usize >= trees || std::mem::replace(&mut seen[t as usize], true) {
            return bad("the walk order is not a permutation of the trees");
        }
    }
    if single != 0 {
        table(H_VALUES, slots, value_size)?;
    } else {
        let starts = u32s(table(H_STARTS, slots + 1, 4)?);
        if starts.first().is_some_and(|&s| s != 0) || starts.windows(2).any(|w| w[0] > w[1]) {
            return bad("leaf entries are not in order");
        }
        let entries = starts.last().copied().unwrap_or(0) as usize;
        table(H_VALUES, entries, value_size)?;
        if u32s(table(H_TARGET_IDS, entries, 4)?)
            .iter()
            .any(|&t| t as usize >= nt)
        {
            return bad("a leaf target is out of range");
        }
    }
    Ok(())
}

/// The header of the forest blob `blob` checked for the kernel's per-call use, O(1): the
/// length word, the magic, flags and counts in range, every table inside the blob for the
/// lengths the header gives (values and target ids for the entries `starts` ends with),
/// 8-byte aligned. The tables' contents (records' keys and pairs, roots, order, depths,
/// entries) are `check`ed in full when the forest is encoded (O(records)), not per call.
/// Returns the body.
fn checked_header(blob: &[i64]) -> params::Result<&[i64]> {
    use params::{ParamError, ensure};
    let body = params::Reader::new(blob)?.body();
    let h = body
        .get(..HEADER)
        .ok_or(ParamError("shorter than the header"))?;
    ensure(h[0] == MAGIC, "not a forest")?;
    ensure(
        [h[H_INPUT_F64], h[H_VALUE_F64]]
            .iter()
            .all(|&b| b == 0 || b == 1)
            && (0..=2).contains(&h[H_AGGREGATE]),
        "a flag is out of range",
    )?;
    let count = |i: usize| -> params::Result<usize> {
        Ok(params::in_range(h[i], 0, u32::MAX as i64, "a header count is out of range")? as usize)
    };
    let (nf, nt, trees, n_recs, single, slots) = (
        count(H_FEATURES)?,
        count(H_TARGETS)?,
        count(H_TREES)?,
        count(H_N_RECORDS)?,
        count(H_SINGLE)?,
        count(H_SLOTS)?,
    );
    ensure(
        nf <= MAX_FEATURES as usize && single <= nt,
        "features or the single target out of range",
    )?;
    let input_f64 = h[H_INPUT_F64] != 0;
    let rec_size = sizes(input_f64).0;
    let value_size = if h[H_VALUE_F64] != 0 { 8 } else { 4 };
    let bytes = body.len() * 8;
    // Table `at` of `len` entries of `size` bytes inside the body (counts are below 2³², so
    // the products fit).
    let table = |at: usize, len: usize, size: usize| -> params::Result<usize> {
        let off = count(at)?;
        ensure(
            len == 0 || (off.is_multiple_of(8) && off >= HEADER * 8 && off + len * size <= bytes),
            "a table is outside the blob",
        )?;
        Ok(off)
    };
    table(H_ROOTS, trees, 4)?;
    table(H_ORDER, trees, 4)?;
    table(H_DEPTHS, trees, 4)?;
    table(H_RECORDS, n_recs, rec_size)?;
    ensure(trees == 0 || n_recs > 0, "trees without records")?;
    if single != 0 {
        table(H_VALUES, slots, value_size)?;
    } else {
        let starts = table(H_STARTS, slots + 1, 4)?;
        let at = starts + 4 * slots;
        let last = u32::from_le_bytes(
            body[at / 8].to_le_bytes()[at % 8..][..4]
                .try_into()
                .expect("4"),
        );
        table(H_VALUES, last as usize, value_size)?;
        table(H_TARGET_IDS, last as usize, 4)?;
    }
    Ok(body)
}

/// A one-line summary of an encoded forest, for dumps.
pub fn describe(f: &[i64]) -> String {
    match body(f).get(..HEADER) {
        Some(h) if h[0] == MAGIC => format!(
            "{} trees, {} nodes ({} records), {} features -> {} targets, {} {}, {}",
            h[H_TREES],
            h[H_NODES],
            h[H_N_RECORDS],
            h[H_FEATURES],
            h[H_TARGETS],
            if h[H_INPUT_F64] != 0 {
                "float64"
            } else {
                "float32"
            },
            if h[H_VALUE_F64] != 0 {
                "sums float64"
            } else {
                "sums float32"
            },
            ["sum", "min", "max"][h[H_AGGREGATE].clamp(0, 2) as usize]
        ),
        _ => "invalid forest".into(),
    }
}

/// Per tree, the most branches a walk from its root passes. Needs an acyclic forest.
fn depths(f: &Forest) -> Vec<u32> {
    // Height of every node reachable from a root, children before parents.
    let mut height: Vec<Option<u32>> = vec![None; f.nodes.len()];
    for &root in &f.roots {
        let mut stack = vec![root as usize];
        while let Some(&k) = stack.last() {
            if height[k].is_some() {
                stack.pop();
                continue;
            }
            match f.nodes[k] {
                Node::Leaf { .. } => {
                    height[k] = Some(0);
                    stack.pop();
                }
                Node::Branch { left, right, .. } => {
                    let (l, r) = (left as usize, right as usize);
                    match (height[l], height[r]) {
                        (Some(a), Some(b)) => {
                            height[k] = Some(1 + a.max(b));
                            stack.pop();
                        }
                        (a, b) => {
                            if a.is_none() {
                                stack.push(l);
                            }
                            if b.is_none() {
                                stack.push(r);
                            }
                        }
                    }
                }
            }
        }
    }
    f.roots
        .iter()
        .map(|&r| height[r as usize].unwrap_or(0))
        .collect()
}

/// Every walk from a root must reach a leaf: no branch may lead back to itself.
fn acyclic(f: &Forest) -> Result<(), Invalid> {
    // 0 unseen, 1 on the current path, 2 done.
    let mut state = vec![0u8; f.nodes.len()];
    let children = |k: usize| match f.nodes[k] {
        Node::Branch { left, right, .. } => [Some(left as usize), Some(right as usize)],
        Node::Leaf { .. } => [None, None],
    };
    for &root in &f.roots {
        let root = root as usize;
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack = vec![(root, 0usize)];
        while let Some(&mut (k, ref mut next)) = stack.last_mut() {
            if *next == 2 {
                state[k] = 2;
                stack.pop();
                continue;
            }
            let c = children(k)[*next];
            *next += 1;
            if let Some(c) = c {
                match state[c] {
                    0 => {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                    1 => return Err(Invalid(format!("node {c} is its own descendant"))),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// Order keys: a float's bits mapped so that unsigned integer order is the float order
/// (−0 and +0 one key). NaN's key is the largest value of the type; no number's key is
/// that or 0.
trait Key: Copy + Eq + Ord {
    type F: Copy;
    fn key(x: Self::F) -> Self;
    /// The key of the copy read by nodes sending NaN left: NaN's becomes 0.
    fn nan_low(k: Self) -> Self;
    /// Above NaN's low key, below every number's: the threshold of a test no number passes.
    fn below_all() -> Self;
}

/// `Key` for the unsigned type `$k` of the float `$f`'s width.
macro_rules! impl_key {
    ($k:ty, $f:ty) => {
        impl Key for $k {
            type F = $f;
            #[inline(always)]
            fn key(x: $f) -> $k {
                if x.is_nan() {
                    return <$k>::MAX;
                }
                let b = if x == 0.0 { 0 } else { x.to_bits() };
                if b >> (<$k>::BITS - 1) != 0 {
                    !b
                } else {
                    b | 1 << (<$k>::BITS - 1)
                }
            }
            #[inline(always)]
            fn nan_low(k: $k) -> $k {
                if k == <$k>::MAX { 0 } else { k }
            }
            fn below_all() -> $k {
                <$k>::key(<$f>::NEG_INFINITY) - 1
            }
        }
    };
}
impl_key!(u32, f32);
impl_key!(u64, f64);

/// A record over float32 keys. Offsets are bytes: `key` from the keyed block's start (plus
/// the row), `pair` from the records' start.
#[repr(C)]
#[derive(Copy, Clone)]
struct Rec32 {
    thr: u32,
    key: u32,
    pair: u32,
    slot: u32,
}

/// A record over float64 keys.
#[repr(C)]
#[derive(Copy, Clone)]
struct Rec64 {
    thr: u64,
    key: u32,
    pair: u32,
    slot: u32,
    _pad: u32,
}

/// A record layout and its step.
trait Rec: Copy {
    type K: Key;
    /// The record a walk at `at` goes to: `pair` if the key it names is at most the
    /// threshold, the record after it otherwise.
    ///
    /// # Safety
    /// `recs` holds the records of a `check`ed forest, `at` is one of their offsets and
    /// `keys` points at a row of a keyed block of its features.
    unsafe fn next(recs: *const u8, at: u32, keys: *const u8) -> u32;
    /// A leaf record's slot.
    ///
    /// # Safety
    /// As for `next`.
    unsafe fn slot(recs: *const u8, at: u32) -> u32;
}

/// `Rec` for the record type `$r` over keys `$k` (the record after a record: its size on).
macro_rules! impl_rec {
    ($r:ty, $k:ty) => {
        impl Rec for $r {
            type K = $k;
            #[inline(always)]
            unsafe fn next(recs: *const u8, at: u32, keys: *const u8) -> u32 {
                // SAFETY: `check`: `at` is a record, its key offset inside the block.
                unsafe {
                    let r = &*(recs.add(at as usize) as *const $r);
                    let x = *(keys.add(r.key as usize) as *const $k);
                    // Both addresses are ready before the compare: a select, not a branch
                    // (which would be mispredicted every other step).
                    let after = r.pair.wrapping_add(size_of::<$r>() as u32);
                    select_unpredictable(x <= r.thr, r.pair, after)
                }
            }
            #[inline(always)]
            unsafe fn slot(recs: *const u8, at: u32) -> u32 {
                // SAFETY: as for `next`.
                unsafe { (*(recs.add(at as usize) as *const $r)).slot }
            }
        }
    };
}
impl_rec!(Rec32, u32);
impl_rec!(Rec64, u64);

/// An accumulation type.
trait Acc: Copy {
    fn zero() -> Self;
    fn add(self, o: Self) -> Self;
    fn lt(self, o: Self) -> bool;
}

macro_rules! impl_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            fn zero() -> $t {
                0.0
            }
            fn add(self, o: $t) -> $t {
                self + o
            }
            fn lt(self, o: $t) -> bool {
                self < o
            }
        }
    )*};
}
impl_acc!(f32, f64);

/// The decoded header and tables.
struct View<'a, N, V> {
    aggregate: i64,
    n_features: usize,
    n_targets: usize,
    /// Root record offsets, per tree.
    roots: &'a [u32],
    /// Trees in walk order for single rows (deepest first).
    order: &'a [u32],
    /// Branches on the longest path of each tree.
    depths: &'a [u32],
    recs: *const u8,
    /// 0, or 1 + the target of every leaf's single entry (then `values` has one per slot).
    single: usize,
    /// Leaf values (single) or entry weights, in the accumulation type.
    values: &'a [V],
    starts: &'a [u32],
    targets: &'a [u32],
    _rec: std::marker::PhantomData<N>,
}

/// # Safety
/// `p` is an array `encode` made, `off` one of its table offsets, holding `len` `T`s.
unsafe fn table<'a, T>(p: *const i64, off: i64, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: caller contract; offsets are 8-byte aligned and T's alignment is at most 8.
    unsafe { std::slice::from_raw_parts((p as *const u8).add(off as usize) as *const T, len) }
}

impl<'a, N: Rec, V: Acc> View<'a, N, V> {
    /// # Safety
    /// `body` is what `checked_header` returned for a blob `encode` made (so `check` holds)
    /// whose record layout is `N`.
    unsafe fn new(body: &'a [i64]) -> View<'a, N, V> {
        let p = body.as_ptr();
        let h = &body[..HEADER];
        let (n_trees, single, n_slots) = (
            h[H_TREES] as usize,
            h[H_SINGLE] as usize,
            h[H_SLOTS] as usize,
        );
        // SAFETY: the tables `encode` wrote (and `check`ed), with the lengths it recorded.
        unsafe {
            let starts: &[u32] = if single != 0 {
                &[]
            } else {
                table(p, h[H_STARTS], n_slots + 1)
            };
            let n_values = if single != 0 {
                n_slots
            } else {
                starts.last().copied().unwrap_or(0) as usize
            };
            View {
                aggregate: h[H_AGGREGATE],
                n_features: h[H_FEATURES] as usize,
                n_targets: h[H_TARGETS] as usize,
                roots: table(p, h[H_ROOTS], n_trees),
                order: table(p, h[H_ORDER], n_trees),
                depths: table(p, h[H_DEPTHS], n_trees),
                recs: (p as *const u8).add(h[H_RECORDS] as usize),
                single,
                values: table(p, h[H_VALUES], n_values),
                starts,
                targets: if single != 0 {
                    &[]
                } else {
                    table(p, h[H_TARGET_IDS], n_values)
                },
                _rec: std::marker::PhantomData,
            }
        }
    }

    /// `steps` steps of `L` walks from records `at` over a keyed block: lane j reads
    /// row j of `keys` (`ROWS`), or every lane row 0. Returns the records they end at (a
    /// leaf, when `steps` is at least the trees' depth). One base pointer serves every
    /// lane, so the walks' cursors stay in registers.
    #[inline(always)]
    fn walk<const ROWS: bool, const L: usize>(
        &self,
        keys: *const u8,
        mut at: [u32; L],
        steps: u32,
    ) -> [u32; L] {
        const { assert!(!ROWS || L <= BLOCK) };
        if self.n_features == 0 {
            return at;
        }
        let ks = std::mem::size_of::<N::K>();
        for _ in 0..steps {
            for (j, c) in at.iter_mut().enumerate() {
                // SAFETY: `check`ed records; with ROWS, lane j < L ≤ BLOCK rows of the block.
                *c = unsafe { N::next(self.recs, *c, keys.add(if ROWS { j * ks } else { 0 })) };
            }
        }
        at
    }

    /// Adds a leaf's values into a row's `out` (SUM).
    #[inline(always)]
    fn add_leaf(&self, out: &mut [V], slot: usize) {
        // SAFETY: slots, entries and targets are in range (`check`).
        unsafe {
            if self.single != 0 {
                let o = out.get_unchecked_mut(self.single - 1);
                *o = o.add(*self.values.get_unchecked(slot));
            } else {
                for e in *self.starts.get_unchecked(slot) as usize
                    ..*self.starts.get_unchecked(slot + 1) as usize
                {
                    let t = *self.targets.get_unchecked(e) as usize;
                    let o = out.get_unchecked_mut(t);
                    *o = o.add(*self.values.get_unchecked(e));
                }
            }
        }
    }

    /// One row: `ROW_LANES` trees at a time in depth order, each tree's leaf slot into `slots`,
    /// then the aggregation in tree order.
    fn row(&self, keys: *const u8, out: &mut [V], has: &mut [bool], slots: &mut [u32]) {
        for group in self.order.chunks(ROW_LANES) {
            let mut at = [self.roots[group[0] as usize]; ROW_LANES];
            let mut steps = 0;
            for (a, &t) in at.iter_mut().zip(group) {
                *a = self.roots[t as usize];
                steps = steps.max(self.depths[t as usize]);
            }
            let end = self.walk::<false, ROW_LANES>(keys, at, steps);
            for (&e, &t) in end.iter().zip(group) {
                // SAFETY: a walk ends on a record (`check`).
                slots[t as usize] = unsafe { N::slot(self.recs, e) };
            }
        }
        out.fill(V::zero());
        if self.aggregate == 0 && self.single != 0 {
            // One running sum, in a register.
            let mut acc = V::zero();
            for &s in slots.iter() {
                // SAFETY: slots are in range (`check`).
                acc = acc.add(unsafe { *self.values.get_unchecked(s as usize) });
            }
            out[self.single - 1] = acc;
        } else if self.aggregate == 0 {
            for &s in slots.iter() {
                self.add_leaf(out, s as usize);
            }
        } else {
            has.fill(false);
            for &s in slots.iter() {
                let s = s as usize;
                if self.single != 0 {
                    self.take(out, has, self.single - 1, self.values[s]);
                } else {
                    for e in self.starts[s] as usize..self.starts[s + 1] as usize {
                        self.take(out, has, self.targets[e] as usize, self.values[e]);
                    }
                }
            }
            for (o, &h) in out.iter_mut().zip(has.iter()) {
                if !h {
                    *o = V::zero();
                }
            }
        }
    }

    /// Sums for a block of rows keyed in `keys`, tree by tree: each tree's records stay in
    /// L1 while `LANES` rows at a time walk it; every row still adds its trees' values in
    /// tree order.
    fn block(&self, keys: *const u8, out: &mut [V], rows: usize) {
        let nt = self.n_targets;
        let ks = std::mem::size_of::<N::K>();
        out.fill(V::zero());
        for (&root, &steps) in self.roots.iter().zip(self.depths) {
            let mut r = 0;
            while r < rows {
                let count = (rows - r).min(LANES);
                // SAFETY: r < rows ≤ BLOCK; rows up to r + LANES ≤ BLOCK are keyed (copies
                // of the last row past `rows`).
                let end =
                    self.walk::<true, LANES>(unsafe { keys.add(r * ks) }, [root; LANES], steps);
                for (j, &e) in end[..count].iter().enumerate() {
                    // SAFETY: a walk ends on a record.
                    let slot = unsafe { N::slot(self.recs, e) } as usize;
                    self.add_leaf(&mut out[(r + j) * nt..(r + j + 1) * nt], slot);
                }
                r += count;
            }
        }
    }

    #[inline(always)]
    fn take(&self, out: &mut [V], has: &mut [bool], t: usize, v: V) {
        match self.aggregate {
            0 => out[t] = out[t].add(v),
            1 => {
                if !has[t] || v.lt(out[t]) {
                    out[t] = v;
                }
                has[t] = true;
            }
            _ => {
                if !has[t] || out[t].lt(v) {
                    out[t] = v;
                }
                has[t] = true;
            }
        }
    }
}

/// Keys `n` rows of `nf` floats into a block, feature-major, each feature twice (NaN
/// largest, then NaN 0): `keys[(2f + c)·BLOCK + r]`. Rows `n` up to `padded` repeat the
/// last one.
///
/// # Safety
/// `x` holds n·nf floats (n ≥ 1), `keys` 2·BLOCK·nf keys, n ≤ padded ≤ BLOCK.
#[inline(always)]
unsafe fn keyed<K: Key>(x: *const K::F, n: usize, padded: usize, nf: usize, keys: *mut K) {
    for r in 0..padded {
        let src = r.min(n - 1);
        for f in 0..nf {
            // SAFETY: src < n, f < nf, r < padded ≤ BLOCK.
            unsafe {
                let k = K::key(*x.add(src * nf + f));
                *keys.add(2 * f * BLOCK + r) = k;
                *keys.add((2 * f + 1) * BLOCK + r) = K::nan_low(k);
            }
        }
    }
}

fn run<N: Rec, V: Acc>(
    forest: &[i64],
    x: *const <N::K as Key>::F,
    y: *mut V,
    rows: usize,
    scratch: *mut u8,
) {
    // SAFETY: the caller's contract (the checked body of an encoded forest of this layout).
    let v: View<N, V> = unsafe { View::new(forest) };
    let (nf, nt) = (v.n_features, v.n_targets);
    let keys = scratch as *mut N::K;
    if v.aggregate == 0 && rows >= LANES && nf > 0 {
        let mut r = 0;
        while r < rows {
            let n = (rows - r).min(BLOCK);
            // SAFETY: x holds rows·nf inputs, y rows·nt outputs, scratch the keyed block
            // (`scratch_bytes`).
            unsafe {
                keyed(x.add(r * nf), n, n.next_multiple_of(LANES), nf, keys);
                let out = std::slice::from_raw_parts_mut(y.add(r * nt), n * nt);
                v.block(scratch, out, n);
            }
            r += n;
        }
        return;
    }
    let mut small = [false; 64];
    let mut large = Vec::new();
    let has: &mut [bool] = if nt <= small.len() {
        &mut small[..nt]
    } else {
        large.resize(nt, false);
        &mut large
    };
    let slots: &mut [u32] = if v.roots.is_empty() {
        &mut []
    } else {
        // SAFETY: scratch holds a slot per tree after the keyed block (`scratch_bytes`),
        // 4-byte aligned.
        unsafe {
            std::slice::from_raw_parts_mut(
                scratch.add(key_bytes(nf, std::mem::size_of::<N::K>() == 8)) as *mut u32,
                v.roots.len(),
            )
        }
    };
    for r in 0..rows {
        // SAFETY: as above.
        let out = unsafe {
            keyed(x.add(r * nf), 1, 1, nf, keys);
            std::slice::from_raw_parts_mut(y.add(r * nt), nt)
        };
        v.row(scratch, out, has, slots);
    }
}

/// Workspace bytes `onnxc_tree_ensemble` needs for an encoded forest: a keyed block of rows
/// and a leaf slot per tree.
pub fn scratch_bytes(forest: &[i64]) -> usize {
    match body(forest).get(..HEADER) {
        Some(h) => {
            key_bytes(h[H_FEATURES].max(0) as usize, h[H_INPUT_F64] != 0)
                + 4 * h[H_TREES].max(0) as usize
        }
        None => 0,
    }
}

/// Per row of `x` (`rows` × the forest's features, float32 or float64 as it was encoded),
/// the aggregated leaf values of every tree into `y` (`rows` × targets, float32 or float64).
/// Returns `ONNXC_ERR_PARAMS`, touching nothing, when the forest's header is not valid
/// (`checked_header`: O(1); the tables' contents were `check`ed when it was encoded).
///
/// # Safety
/// `forest` points to a sealed blob `encode` made (`check` holds); `x` and `y` hold the
/// elements described, aligned for their types; `scratch` holds `scratch_bytes(forest)`
/// bytes, 8-byte aligned (null if none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_tree_ensemble(
    forest: *const i64,
    x: *const u8,
    y: *mut u8,
    rows: i64,
    scratch: *mut u8,
) -> Status {
    // SAFETY: the caller's contract (a sealed blob).
    let blob = unsafe { params::blob(forest) };
    let h = decoded!(blob.and_then(checked_header));
    let rows = rows.max(0) as usize;
    // Monomorphic entry points for `multiversion!` (which takes a function name).
    type S = *mut u8;
    fn ff(f: &[i64], x: *const u8, y: *mut u8, r: usize, s: S) {
        run::<Rec32, f32>(f, x as *const f32, y as *mut f32, r, s)
    }
    fn fd(f: &[i64], x: *const u8, y: *mut u8, r: usize, s: S) {
        run::<Rec32, f64>(f, x as *const f32, y as *mut f64, r, s)
    }
    fn df(f: &[i64], x: *const u8, y: *mut u8, r: usize, s: S) {
        run::<Rec64, f32>(f, x as *const f64, y as *mut f32, r, s)
    }
    fn dd(f: &[i64], x: *const u8, y: *mut u8, r: usize, s: S) {
        run::<Rec64, f64>(f, x as *const f64, y as *mut f64, r, s)
    }
    match (h[H_INPUT_F64] != 0, h[H_VALUE_F64] != 0) {
        (false, false) => crate::multiversion!(ff(h, x, y, rows, scratch)),
        (false, true) => crate::multiversion!(fd(h, x, y, rows, scratch)),
        (true, false) => crate::multiversion!(df(h, x, y, rows, scratch)),
        (true, true) => crate::multiversion!(dd(h, x, y, rows, scratch)),
    }
    ONNXC_OK
}

/// The reference semantics: one tree at a time, by recursion over `Forest` itself.
pub fn reference(f: &Forest, x: &[f64], rows: usize) -> Vec<f64> {
    let nf = f.n_features as usize;
    let nt = f.n_targets as usize;
    let mut y = vec![0.0; rows * nt];
    for r in 0..rows {
        let row = &x[r * nf..(r + 1) * nf];
        let mut has = vec![false; nt];
        let out = &mut y[r * nt..(r + 1) * nt];
        for &root in &f.roots {
            let mut k = root as usize;
            let slot = loop {
                match f.nodes[k] {
                    Node::Leaf { slot } => break slot as usize,
                    Node::Branch {
                        feature,
                        threshold,
                        nan_left,
                        left,
                        right,
                    } => {
                        let v = row[feature as usize];
                        let v = if f.input_f64 { v } else { v as f32 as f64 };
                        let go = if v.is_nan() { nan_left } else { v <= threshold };
                        k = if go { left } else { right } as usize;
                    }
                }
            };
            for &(t, w) in &f.leaves[slot] {
                let (t, w) = (t as usize, if f.value_f64 { w } else { w as f32 as f64 });
                match f.aggregate {
                    Aggregate::Sum => {
                        out[t] = if f.value_f64 {
                            out[t] + w
                        } else {
                            (out[t] as f32 + w as f32) as f64
                        }
                    }
                    Aggregate::Min => {
                        if !has[t] || w < out[t] {
                            out[t] = w
                        }
                    }
                    Aggregate::Max => {
                        if !has[t] || w > out[t] {
                            out[t] = w
                        }
                    }
                }
                has[t] = true;
            }
        }
        if f.aggregate != Aggregate::Sum {
            for (o, h) in out.iter_mut().zip(has) {
                if !h {
                    *o = 0.0;
                }
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    fn empty(nf: u32, nt: u32) -> Forest {
        Forest {
            input_f64: false,
            value_f64: false,
            aggregate: Aggregate::Sum,
            n_features: nf,
            n_targets: nt,
            nodes: vec![],
            roots: vec![],
            leaves: vec![],
        }
    }

    fn leaf_entries(next: &mut dyn FnMut() -> u64, nt: u32, multi: bool) -> Vec<(u32, f64)> {
        let n = if multi { 1 + next() % 3 } else { 1 };
        (0..n)
            .map(|_| {
                (
                    (next() % nt as u64) as u32,
                    (next() % 2001) as f64 / 1000.0 - 1.0,
                )
            })
            .collect()
    }

    /// A seeded random forest: `trees` trees of up to `depth` levels over `nf` features.
    fn random_forest(seed: u64, trees: usize, depth: u32, nf: u32, nt: u32, multi: bool) -> Forest {
        let mut next = xorshift(seed);
        let mut f = empty(nf, nt);
        fn grow(
            f: &mut Forest,
            next: &mut dyn FnMut() -> u64,
            d: u32,
            nf: u32,
            nt: u32,
            multi: bool,
        ) -> u32 {
            let k = f.nodes.len() as u32;
            if d == 0 || next().is_multiple_of(5) {
                let slot = f.leaves.len() as u32;
                let entries = leaf_entries(next, nt, multi);
                f.leaves.push(entries);
                f.nodes.push(Node::Leaf { slot });
                return k;
            }
            f.nodes.push(Node::Leaf { slot: 0 });
            let left = grow(f, next, d - 1, nf, nt, multi);
            let right = grow(f, next, d - 1, nf, nt, multi);
            let threshold = ((next() % 2001) as f64 / 1000.0 - 1.0) as f32 as f64;
            f.nodes[k as usize] = Node::Branch {
                feature: (next() % nf as u64) as u32,
                threshold,
                nan_left: next().is_multiple_of(2),
                left,
                right,
            };
            k
        }
        for _ in 0..trees {
            let r = grow(&mut f, &mut next, depth, nf, nt, multi);
            f.roots.push(r);
        }
        f
    }

    /// Trees whose nodes are shared: each branch's children are any later nodes of its
    /// tree (as the frontend's equality and set tests share their false branch), and the
    /// last tree's root is a node of the first.
    fn random_dag(
        seed: u64,
        trees: usize,
        branches: usize,
        nf: u32,
        nt: u32,
        multi: bool,
    ) -> Forest {
        let mut next = xorshift(seed);
        let mut f = empty(nf, nt);
        for _ in 0..trees {
            let base = f.nodes.len();
            let leaves = 1 + branches / 2;
            let total = branches + leaves;
            for i in 0..branches {
                let mut pick = || (base + i + 1 + (next() as usize % (total - i - 1))) as u32;
                let (left, right) = (pick(), pick());
                f.nodes.push(Node::Branch {
                    feature: (next() % nf as u64) as u32,
                    threshold: ((next() % 2001) as f64 / 1000.0 - 1.0) as f32 as f64,
                    nan_left: next().is_multiple_of(2),
                    left,
                    right,
                });
            }
            for _ in 0..leaves {
                f.nodes.push(Node::Leaf {
                    slot: f.leaves.len() as u32,
                });
                let e = leaf_entries(&mut next, nt, multi);
                f.leaves.push(e);
            }
            f.roots.push(base as u32);
        }
        if trees > 1 && branches > 2 {
            f.roots.push(2);
        }
        f
    }

    fn inputs(rows: usize, nf: usize, seed: u64) -> Vec<f64> {
        let mut v: Vec<f64> = crate::test_rand(rows * nf, seed)
            .iter()
            .map(|&x| x as f64 * 1.2)
            .collect();
        // Missing values, zeros of both signs and exact thresholds.
        for (k, x) in v.iter_mut().enumerate() {
            if k % 7 == 3 {
                *x = f64::NAN;
            } else if k % 13 == 6 {
                *x = -0.0;
            } else if k % 11 == 5 {
                *x = ((k % 2001) as f64 / 1000.0 - 1.0) as f32 as f64;
            }
        }
        v
    }

    /// Runs the kernel on `x` (values of the input's type, as f64) with exactly
    /// `scratch_bytes` of scratch, followed by a canary the kernel must not touch.
    fn run_kernel(f: &Forest, enc: &[i64], x: &[f64], rows: usize) -> Vec<f64> {
        let n = rows * f.n_targets as usize;
        let words = scratch_bytes(enc).div_ceil(8);
        let mut scratch = vec![0x5a5a_5a5a_5a5a_5a5au64; words + 8];
        let s = scratch.as_mut_ptr() as *mut u8;
        let xs: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let xp = if f.input_f64 {
            x.as_ptr() as *const u8
        } else {
            xs.as_ptr() as *const u8
        };
        let got = if f.value_f64 {
            let mut y = vec![0f64; n];
            // SAFETY: enc was encoded for this input and value type; x and y hold `rows` rows,
            // scratch at least `scratch_bytes(&enc)` bytes.
            let status = unsafe {
                onnxc_tree_ensemble(enc.as_ptr(), xp, y.as_mut_ptr() as _, rows as i64, s)
            };
            assert_eq!(status, ONNXC_OK);
            y
        } else {
            let mut y = vec![0f32; n];
            // SAFETY: enc was encoded for this input and value type; x and y hold `rows` rows,
            // scratch at least `scratch_bytes(&enc)` bytes.
            let status = unsafe {
                onnxc_tree_ensemble(enc.as_ptr(), xp, y.as_mut_ptr() as _, rows as i64, s)
            };
            assert_eq!(status, ONNXC_OK);
            y.iter().map(|&v| v as f64).collect()
        };
        assert!(
            scratch[words..].iter().all(|&w| w == 0x5a5a_5a5a_5a5a_5a5a),
            "the kernel wrote past its scratch"
        );
        got
    }

    fn verify(f: &Forest, rows: usize, seed: u64) {
        let enc = encode(f).expect("valid forest");
        let x = inputs(rows, f.n_features as usize, seed);
        let want = reference(f, &x, rows);
        let got = run_kernel(f, &enc, &x, rows);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g == w),
                "element {k} of {rows} rows: got {g}, want {w} ({:?})",
                (f.input_f64, f.value_f64, f.aggregate)
            );
        }
    }

    fn every_variant(f: &mut Forest, seed: u64) {
        for agg in [Aggregate::Sum, Aggregate::Min, Aggregate::Max] {
            for (input_f64, value_f64) in
                [(false, false), (false, true), (true, false), (true, true)]
            {
                f.aggregate = agg;
                f.input_f64 = input_f64;
                f.value_f64 = value_f64;
                // One row (trees interleaved), blocks with a tail, a block and a row.
                for rows in [1, 13, 150] {
                    verify(f, rows, seed);
                }
            }
        }
    }

    #[test]
    fn kernel_matches_reference_walk() {
        for (seed, trees) in [(1u64, 1usize), (2, 7), (3, 8), (4, 9), (5, 50)] {
            for multi in [false, true] {
                let nt = if multi { 3 } else { 1 };
                every_variant(&mut random_forest(seed, trees, 6, 5, nt, multi), seed);
            }
        }
        // Every leaf one entry, for target 1 of 3.
        let mut f = random_forest(6, 20, 5, 4, 3, false);
        for l in &mut f.leaves {
            l[0].0 = 1;
        }
        every_variant(&mut f, 6);
    }

    #[test]
    fn shared_nodes_are_walked_like_trees() {
        for (seed, trees) in [(11u64, 3usize), (12, 9), (13, 20)] {
            for multi in [false, true] {
                let nt = if multi { 2 } else { 1 };
                every_variant(&mut random_dag(seed, trees, 12, 4, nt, multi), seed);
            }
        }
    }

    /// Every threshold against every kind of value, both NaN directions, float32 and
    /// float64: the order keys compare as the floats do.
    #[test]
    fn keys_order_edge_values() {
        for input_f64 in [false, true] {
            // Zeros, the smallest subnormals and normals, ±1 and the next value up, the
            // extremes and infinities, of the input's float type (as f64).
            macro_rules! specials {
                ($f:ident) => {
                    [
                        0.0,
                        -0.0,
                        $f::from_bits(1),
                        -$f::from_bits(1),
                        $f::MIN_POSITIVE,
                        -$f::MIN_POSITIVE,
                        1.0,
                        -1.0,
                        (1.0 as $f).next_up(),
                        $f::MAX,
                        $f::MIN,
                        $f::INFINITY,
                        $f::NEG_INFINITY,
                    ]
                    .map(|v: $f| v as f64)
                };
            }
            let specials: Vec<f64> = if input_f64 {
                specials!(f64).into()
            } else {
                specials!(f32).into()
            };
            let mut xs = specials.clone();
            xs.extend([f64::NAN, -f64::NAN, f64::from_bits(0x7ff0_0000_0000_0001)]);
            let mut thresholds = specials.clone();
            thresholds.push(f64::NAN);
            // One tree per (threshold, NaN direction), leaves worth 2^tree (float64 sums
            // are exact), so every tree's decision shows in the sum.
            let mut f = empty(1, 1);
            f.input_f64 = input_f64;
            f.value_f64 = true;
            for &t in &thresholds {
                for nan_left in [false, true] {
                    let tree = f.roots.len();
                    let k = f.nodes.len() as u32;
                    f.roots.push(k);
                    f.nodes.push(Node::Branch {
                        feature: 0,
                        threshold: t,
                        nan_left,
                        left: k + 1,
                        right: k + 2,
                    });
                    f.nodes.push(Node::Leaf {
                        slot: f.leaves.len() as u32,
                    });
                    f.leaves.push(vec![(0, (1u64 << tree) as f64)]);
                    f.nodes.push(Node::Leaf {
                        slot: f.leaves.len() as u32,
                    });
                    f.leaves.push(vec![(0, 0.0)]);
                }
            }
            let enc = encode(&f).unwrap();
            let want = reference(&f, &xs, xs.len());
            // All rows at once (a block) and one by one.
            let got = run_kernel(&f, &enc, &xs, xs.len());
            assert_eq!(got, want, "f64 input: {input_f64}");
            for (r, &x) in xs.iter().enumerate() {
                assert_eq!(run_kernel(&f, &enc, &[x], 1), [want[r]], "x = {x}");
            }
        }
    }

    #[test]
    fn single_leaf_trees_need_no_features() {
        let f = Forest {
            nodes: vec![Node::Leaf { slot: 0 }, Node::Leaf { slot: 1 }],
            roots: vec![0, 1],
            leaves: vec![vec![(0, 1.5)], vec![(0, 2.0)]],
            ..empty(0, 1)
        };
        let enc = encode(&f).unwrap();
        for rows in [3, 9] {
            assert_eq!(run_kernel(&f, &enc, &[], rows), vec![3.5; rows]);
        }
        // No trees, no features: no scratch at all.
        let g = empty(0, 2);
        let enc = encode(&g).unwrap();
        assert_eq!(scratch_bytes(&enc), 0);
        let mut y = [1f32; 6];
        // SAFETY: a forest of no features reads neither x nor scratch; y holds 3 rows of 2.
        let status = unsafe {
            onnxc_tree_ensemble(
                enc.as_ptr(),
                std::ptr::null(),
                y.as_mut_ptr() as _,
                3,
                std::ptr::null_mut(),
            )
        };
        assert_eq!((status, y), (ONNXC_OK, [0.0; 6]));
    }

    #[test]
    fn encode_rejects_out_of_range_indices() {
        // A branch on `feature` at `threshold` whose both children are `child`.
        let branch = |feature, threshold, child| Node::Branch {
            feature,
            threshold,
            nan_left: false,
            left: child,
            right: child,
        };
        let mut f = random_forest(9, 2, 3, 4, 1, false);
        f.nodes.push(branch(4, 0.0, 0));
        assert!(encode(&f).is_err());
        let mut g = random_forest(9, 2, 3, 4, 1, false);
        g.roots.push(g.nodes.len() as u32);
        assert!(encode(&g).is_err());
        let mut h = random_forest(9, 2, 3, 4, 1, false);
        h.nodes.push(branch(0, 0.1, 0));
        assert!(encode(&h).is_err(), "0.1 is not a float32 value");
        let mut c = random_forest(9, 1, 3, 4, 1, false);
        let root = c.roots[0];
        c.nodes.push(branch(0, 0.5, root));
        c.roots.push(c.nodes.len() as u32 - 1);
        assert!(encode(&c).is_ok(), "a shared subtree is not a cycle");
        let last = c.nodes.len() as u32 - 1;
        if let Node::Branch { left, .. } = &mut c.nodes[last as usize] {
            *left = last;
        }
        assert!(encode(&c).is_err(), "a node leading to itself");
        let mut t = random_forest(9, 2, 3, 4, 2, true);
        t.leaves[0].push((2, 1.0));
        assert!(encode(&t).is_err(), "a leaf target out of range");
        let mut s = random_forest(9, 2, 3, 4, 1, false);
        s.nodes.push(Node::Leaf {
            slot: s.leaves.len() as u32,
        });
        assert!(encode(&s).is_err(), "a leaf slot out of range");
    }

    fn get_u32(enc: &[i64], byte: usize) -> u32 {
        let w = enc[byte / 8].to_le_bytes();
        let o = byte % 8;
        u32::from_le_bytes(w[o..o + 4].try_into().unwrap())
    }

    fn set_u32(enc: &mut [i64], byte: usize, v: u32) {
        let mut w = enc[byte / 8].to_le_bytes();
        let o = byte % 8;
        w[o..o + 4].copy_from_slice(&v.to_le_bytes());
        enc[byte / 8] = i64::from_le_bytes(w);
    }

    /// The walk does no bounds checks: every way an array can point outside itself, or
    /// outside the scratch its header asks for, is refused by `check`.
    #[test]
    fn check_refuses_corrupt_arrays() {
        for input_f64 in [false, true] {
            for multi in [false, true] {
                let mut f = random_forest(21, 5, 4, 3, 2, multi);
                f.input_f64 = input_f64;
                let sealed = encode(&f).unwrap();
                assert_eq!(check(&sealed), Ok(()));
                // Edits of the body (offsets count from its start), sealed again.
                let enc = sealed[1..].to_vec();
                let (rs, ks) = sizes(input_f64);
                let th = ks;
                let h = |i: usize| enc[i] as usize;
                let n_recs = h(H_N_RECORDS);
                let rec = |i: usize| h(H_RECORDS) + i * rs;
                let is_leaf = |i: usize| get_u32(&enc, rec(i)) == u32::MAX;
                let branch = (0..n_recs).find(|&i| !is_leaf(i)).unwrap();
                let leaf = (0..n_recs).find(|&i| is_leaf(i)).unwrap();
                let mut cases: Vec<(&str, Vec<i64>)> = Vec::new();
                let mut edit = |what: &'static str, e: &dyn Fn(&mut Vec<i64>)| {
                    let mut c = enc.clone();
                    e(&mut c);
                    cases.push((what, c));
                };
                edit("pair past the records", &|c| {
                    set_u32(c, rec(branch) + th + 4, ((n_recs - 1) * rs) as u32)
                });
                edit("misaligned pair", &|c| {
                    let v = get_u32(c, rec(branch) + th + 4);
                    set_u32(c, rec(branch) + th + 4, v + 4)
                });
                edit("key past the block", &|c| {
                    set_u32(c, rec(branch) + th, (2 * 3 * BLOCK * ks) as u32)
                });
                edit("key in the block's last row", &|c| {
                    set_u32(c, rec(branch) + th, ((2 * 3 - 1) * BLOCK * ks + ks) as u32)
                });
                edit("misaligned key", &|c| set_u32(c, rec(branch) + th, 2));
                edit("leaf key past the block", &|c| {
                    set_u32(c, rec(leaf) + th, (2 * 3 * BLOCK * ks) as u32)
                });
                edit("leaf not absorbing", &|c| {
                    let v = get_u32(c, rec(leaf) + th + 4);
                    set_u32(c, rec(leaf) + th + 4, v ^ rs as u32)
                });
                edit("leaf slot", &|c| {
                    set_u32(c, rec(leaf) + th + 8, f.leaves.len() as u32)
                });
                edit("cycle", &|c| {
                    // The branch's pair: its own record and the next.
                    set_u32(c, rec(branch) + th + 4, (branch * rs) as u32)
                });
                edit("root past the records", &|c| {
                    set_u32(c, h(H_ROOTS) + 4, (n_recs * rs) as u32)
                });
                edit("order not a permutation", &|c| {
                    let v = get_u32(c, h(H_ORDER) + 4);
                    set_u32(c, h(H_ORDER), v)
                });
                edit("depth too small", &|c| {
                    let t = (0..5)
                        .find(|&t| get_u32(c, h(H_DEPTHS) + 4 * t) > 0)
                        .unwrap();
                    let v = get_u32(c, h(H_DEPTHS) + 4 * t);
                    set_u32(c, h(H_DEPTHS) + 4 * t, v - 1)
                });
                edit("values past the end", &|c| {
                    c[H_VALUES] = (c.len() * 8 - 8) as i64
                });
                edit("more features than keys", &|c| c[H_FEATURES] = 2);
                edit("negative count", &|c| c[H_TREES] = -1);
                edit("truncated", &|c| {
                    c.truncate(c.len() - 1);
                });
                edit("header only", &|c| c.truncate(HEADER - 1));
                edit("flag", &|c| c[H_INPUT_F64] = 2);
                edit("aggregate", &|c| c[H_AGGREGATE] = 3);
                if multi {
                    edit("target id", &|c| set_u32(c, h(H_TARGET_IDS), 2));
                    edit("entries out of order", &|c| {
                        set_u32(c, h(H_STARTS) + 4, u32::MAX)
                    });
                } else {
                    edit("single target", &|c| c[H_SINGLE] = 3);
                }
                // What the kernel refuses per call (header and table bounds; the rest only
                // `check`, when the forest is encoded), writing nothing.
                let per_call = [
                    "values past the end",
                    "negative count",
                    "header only",
                    "flag",
                    "aggregate",
                    "single target",
                ];
                let x = [0f64; 8];
                let mut scratch = vec![0u64; 1 << 12];
                for (what, c) in &cases {
                    let c = params::seal(c.iter().copied());
                    assert!(
                        check(&c).is_err(),
                        "{what} (f64 {input_f64}, multi {multi})"
                    );
                    if !per_call.contains(what) {
                        continue;
                    }
                    let mut y = [9f64; 8];
                    // SAFETY: c is a sealed blob; the buffers are never touched (the blob is
                    // refused).
                    let status = unsafe {
                        onnxc_tree_ensemble(
                            c.as_ptr(),
                            x.as_ptr() as _,
                            y.as_mut_ptr() as _,
                            1,
                            scratch.as_mut_ptr() as _,
                        )
                    };
                    assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS, "{what}");
                    assert_eq!(y, [9.0; 8], "{what}: the output was written");
                }
                let mut wrong_length = sealed.clone();
                wrong_length[0] += 1;
                assert!(check(&wrong_length).is_err() && check(&sealed[..5]).is_err());
            }
        }
        // Too many features for 32-bit key offsets.
        let mut f = random_forest(3, 1, 2, 2, 1, false);
        f.n_features = MAX_FEATURES + 1;
        assert!(encode(&f).is_err());
    }

    /// `scratch_bytes` reads the header `check` validated against: the keyed block covers
    /// every key offset for every row of a block, and the slots every tree.
    #[test]
    fn scratch_covers_the_walk() {
        for input_f64 in [false, true] {
            let mut f = random_forest(31, 12, 5, 7, 1, false);
            f.input_f64 = input_f64;
            let sealed = encode(&f).unwrap();
            let enc = &sealed[1..];
            let (rs, ks) = sizes(input_f64);
            let keys = key_bytes(7, input_f64);
            assert_eq!(scratch_bytes(&sealed), keys + 4 * 12);
            for i in 0..enc[H_N_RECORDS] as usize {
                let key = get_u32(enc, enc[H_RECORDS] as usize + i * rs + ks) as usize;
                assert!(key + BLOCK * ks <= keys);
            }
        }
    }
}
