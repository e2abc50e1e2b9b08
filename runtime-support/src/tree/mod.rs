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
//! Float32 forests of at most 64 features whose trees have at most 32 leaves also get
//! bit-vector tables (`encode::vectors`, QuickScorer's representation): on AVX-512 every
//! row is walked by them, a tree's branches compared at once (`walk::vector_slots`).
//! Otherwise, one row at a time (few rows), `ROW_LANES` trees are walked at once, trees
//! grouped by depth (independent walks: their load latencies overlap; the records come from
//! L2), and the reached leaves aggregated in tree order afterwards; sums over more rows key
//! them in blocks of `BLOCK` and walk the trees one by one, `LANES` rows at once, so a
//! tree's records stay in L1 while the block passes through it. Every way, a row adds its
//! trees' values in tree order, in the accumulation type: onnxruntime's order, so sums, and
//! ties between classes, are the same.
//!
//! The encoded forest is one read-only sealed `i64` blob (`params::seal`: its length, the
//! header, then the tables; offsets in bytes from the header's start). `encode` validates
//! the forest, and `check` the array it makes: every record, root, key offset or index and
//! leaf entry is in range and every tree's depth covers
//! its longest path, so the walk needs no bounds checks whatever the input values, given
//! the `scratch_bytes` of workspace the same header asks for.

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;
use std::hint::select_unpredictable;

/// Rows of one tree walked interleaved (the tree's records are in L1).
pub const LANES: usize = 8;
/// Trees of one row walked interleaved: more walks in flight hide more of L2's latency
/// (16 was 9% faster than 8 on a 500-tree LightGBM model; their cursors do not all fit in
/// registers, 24 and 32 were no better).
const ROW_LANES: usize = 16;
/// Lanes of a tree's bit-vector table (`encode::vectors`): one AVX-512 register pair of
/// branches, a 32-bit mask of leaves.
const VECTOR_LANES: usize = 32;
/// Most features of a forest with bit-vector tables: the row's two keys per feature fill
/// up to eight AVX-512 registers, from which a tree's lanes are permuted (gathering them
/// from memory took longer than the record walk: 6.7 against 4.1 µs for 500 trees, Zen 4).
const VECTOR_FEATURES: usize = 64;
/// Rows keyed and walked together by sums over many rows (their keys stay in L1: 64 rows
/// of 30 float32 features, two copies, are 15 KB).
const BLOCK: usize = 64;
/// Most features a forest may test (key offsets are 32-bit).
pub const MAX_FEATURES: u32 = 1 << 20;

const MAGIC: i64 = 0x6f6e_6e78_7472_6565; // "onnxtree"
const HEADER: usize = 19;
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
/// 0, or the offset of the trees' bit-vector tables (`encode::vectors`).
const H_VECTORS: usize = 18;

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

mod encode;
#[cfg(test)]
mod tests;
mod walk;

use encode::*;
pub use encode::{check, encode, own_descendant};
use walk::*;

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

/// Workspace bytes `onnxc_tree_ensemble` needs for an encoded forest: a keyed block of rows,
/// and with trees a leaf slot per tree and a flag per target (the run allocates nothing).
pub fn scratch_bytes(forest: &[i64]) -> usize {
    match body(forest).get(..HEADER) {
        Some(h) => {
            let trees = h[H_TREES].max(0) as usize;
            let flags = if trees > 0 {
                h[H_TARGETS].max(0) as usize
            } else {
                0
            };
            key_bytes(h[H_FEATURES].max(0) as usize, h[H_INPUT_F64] != 0) + 4 * trees + flags
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
    let h = params::decode_blob!(forest, checked_header);
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
