//! Tree ensembles (ONNX-ML TreeEnsemble, TreeEnsembleClassifier/Regressor): the aggregated
//! leaf values of every tree for each row, `onnxc_tree_ensemble`.
//!
//! The compiler turns every ONNX node rule (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ, set membership,
//! float64 thresholds against float32 inputs) into one canonical test, *go left iff
//! `x[feature] <= threshold`, NaN goes left iff the node says so*, with thresholds in the
//! input's type (`Forest`, `encode`); a rule that needs more (equality, membership) becomes
//! several such nodes. Leaves are nodes too, absorbing ones (threshold NaN, both children the
//! leaf itself), so a walk is the same branch-free step repeated: load the node, load the
//! feature, compare, pick a child. The kernel walks `LANES` trees of a row at once (their
//! steps are independent, so their load latencies overlap) until no lane moves, then adds the
//! reached leaves' values in tree order — the order, and the accumulation type, onnxruntime
//! sums in, so ties between classes break the same way.
//!
//! The encoded forest is one read-only `i64` array (header, then the tables, all offsets in
//! bytes from its start), validated when encoded: every child, root and feature index is in
//! range, so the walk needs no bounds checks whatever the input values.

/// Trees walked together per row.
pub const LANES: usize = 8;

const MAGIC: i64 = 0x6f6e_6e78_7472_6565; // "onnxtree"
const HEADER: usize = 16;
/// Bit of a node's feature word: NaN takes the left child.
const NAN_LEFT: u32 = 1 << 31;

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

/// Why a forest cannot be encoded (a compiler bug: the frontend builds valid forests).
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

/// Checks the forest and lays it out for `onnxc_tree_ensemble`.
pub fn encode(f: &Forest) -> Result<Vec<i64>, Invalid> {
    let n = f.nodes.len();
    if n >= (1 << 31) || f.leaves.len() >= (1 << 31) {
        return Err(Invalid("too many nodes".into()));
    }
    if f.roots.iter().any(|&r| r as usize >= n) {
        return Err(Invalid("a root is out of range".into()));
    }
    let single = f.n_targets == 1 && f.leaves.iter().all(|l| l.len() == 1 && l[0].0 == 0);
    let mut node_bytes = Vec::new();
    let mut slot_of = Vec::with_capacity(n);
    let mut has_branch = false;
    for (k, node) in f.nodes.iter().enumerate() {
        let (thr, feat, left, right, slot) = match *node {
            Node::Branch {
                feature,
                threshold,
                nan_left,
                left,
                right,
            } => {
                if feature >= f.n_features || feature & NAN_LEFT != 0 {
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
                let feat = feature | if nan_left { NAN_LEFT } else { 0 };
                (threshold, feat, left, right, 0)
            }
            Node::Leaf { slot } => {
                if slot as usize >= f.leaves.len() {
                    return Err(Invalid(format!("node {k}: leaf slot out of range")));
                }
                (f64::NAN, 0, k as u32, k as u32, slot)
            }
        };
        if f.input_f64 {
            node_bytes.extend_from_slice(&thr.to_le_bytes());
            node_bytes.extend_from_slice(&feat.to_le_bytes());
            node_bytes.extend_from_slice(&left.to_le_bytes());
            node_bytes.extend_from_slice(&right.to_le_bytes());
            node_bytes.extend_from_slice(&0u32.to_le_bytes());
        } else {
            node_bytes.extend_from_slice(&(thr as f32).to_le_bytes());
            node_bytes.extend_from_slice(&feat.to_le_bytes());
            node_bytes.extend_from_slice(&left.to_le_bytes());
            node_bytes.extend_from_slice(&right.to_le_bytes());
        }
        slot_of.push(slot);
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
    let roots = push_bytes(&mut out, &u32s(&f.roots));
    let nodes = push_bytes(&mut out, &node_bytes);
    let slots = push_bytes(&mut out, &u32s(&slot_of));
    let (values, starts, targets) = if single {
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
    let header: [i64; HEADER] = [
        MAGIC,
        f.input_f64 as i64,
        f.value_f64 as i64,
        match f.aggregate {
            Aggregate::Sum => 0,
            Aggregate::Min => 1,
            Aggregate::Max => 2,
        },
        f.n_features as i64,
        f.n_targets as i64,
        f.roots.len() as i64,
        n as i64,
        single as i64,
        roots as i64,
        nodes as i64,
        slots as i64,
        values as i64,
        starts as i64,
        targets as i64,
        f.leaves.len() as i64,
    ];
    for (k, h) in header.iter().enumerate() {
        out[8 * k..8 * k + 8].copy_from_slice(&h.to_le_bytes());
    }
    Ok(out
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// A one-line summary of an encoded forest, for dumps.
pub fn describe(f: &[i64]) -> String {
    match f.get(..HEADER) {
        Some(h) if h[0] == MAGIC => format!(
            "{} trees, {} nodes, {} features -> {} targets, {} {}, {}",
            h[6],
            h[7],
            h[4],
            h[5],
            if h[1] != 0 { "float64" } else { "float32" },
            if h[2] != 0 {
                "sums float64"
            } else {
                "sums float32"
            },
            ["sum", "min", "max"][h[3].clamp(0, 2) as usize]
        ),
        _ => "invalid forest".into(),
    }
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

#[repr(C)]
#[derive(Copy, Clone)]
struct Node32 {
    thr: f32,
    feat: u32,
    left: u32,
    right: u32,
}

#[repr(C)]
#[derive(Copy, Clone)]
struct Node64 {
    thr: f64,
    feat: u32,
    left: u32,
    right: u32,
    _pad: u32,
}

/// A node layout with its comparison.
trait Step: Copy {
    type X: Copy;
    /// The child a row's features lead to.
    fn next(&self, row: *const Self::X) -> u32;
}

impl Step for Node32 {
    type X = f32;
    #[inline(always)]
    fn next(&self, row: *const f32) -> u32 {
        // SAFETY: `encode` checked the feature index against the row length.
        let x = unsafe { *row.add((self.feat & !NAN_LEFT) as usize) };
        let left = (x <= self.thr) | ((x.is_nan()) & (self.feat & NAN_LEFT != 0));
        if left { self.left } else { self.right }
    }
}

impl Step for Node64 {
    type X = f64;
    #[inline(always)]
    fn next(&self, row: *const f64) -> u32 {
        // SAFETY: as for Node32.
        let x = unsafe { *row.add((self.feat & !NAN_LEFT) as usize) };
        let left = (x <= self.thr) | ((x.is_nan()) & (self.feat & NAN_LEFT != 0));
        if left { self.left } else { self.right }
    }
}

/// An accumulation type.
trait Acc: Copy {
    fn zero() -> Self;
    fn add(self, o: Self) -> Self;
    fn lt(self, o: Self) -> bool;
}

impl Acc for f32 {
    fn zero() -> f32 {
        0.0
    }
    fn add(self, o: f32) -> f32 {
        self + o
    }
    fn lt(self, o: f32) -> bool {
        self < o
    }
}

impl Acc for f64 {
    fn zero() -> f64 {
        0.0
    }
    fn add(self, o: f64) -> f64 {
        self + o
    }
    fn lt(self, o: f64) -> bool {
        self < o
    }
}

/// The decoded header and tables.
struct View<'a, N, V> {
    aggregate: i64,
    n_features: usize,
    n_targets: usize,
    roots: &'a [u32],
    nodes: &'a [N],
    slots: &'a [u32],
    single: bool,
    /// Leaf values (single) or entry weights, in the accumulation type.
    values: &'a [V],
    starts: &'a [u32],
    targets: &'a [u32],
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

impl<'a, N: Step, V: Acc> View<'a, N, V> {
    /// # Safety
    /// `p` is an array `encode` made whose node layout is `N`.
    unsafe fn new(p: *const i64) -> View<'a, N, V> {
        // SAFETY: the header is HEADER words.
        let h = unsafe { std::slice::from_raw_parts(p, HEADER) };
        let (n_trees, n_nodes, single, n_slots) =
            (h[6] as usize, h[7] as usize, h[8] != 0, h[15] as usize);
        // SAFETY: the tables `encode` wrote, with the lengths it recorded.
        unsafe {
            let starts: &[u32] = if single {
                &[]
            } else {
                table(p, h[13], n_slots + 1)
            };
            let n_values = if single {
                n_slots
            } else {
                starts.last().copied().unwrap_or(0) as usize
            };
            let values: &[V] = table(p, h[12], n_values);
            View {
                aggregate: h[3],
                n_features: h[4] as usize,
                n_targets: h[5] as usize,
                roots: table(p, h[9], n_trees),
                nodes: table(p, h[10], n_nodes),
                slots: table(p, h[11], n_nodes),
                single,
                values,
                starts,
                targets: if single {
                    &[]
                } else {
                    table(p, h[14], n_values)
                },
            }
        }
    }

    /// The leaf node each of `LANES` walks from `start` ends in (lanes past `count` stay at
    /// a leaf of the first tree and are not read).
    #[inline(always)]
    fn walk(&self, row: *const N::X, start: [u32; LANES]) -> [u32; LANES] {
        let mut cur = start;
        if self.n_features == 0 {
            return cur;
        }
        loop {
            let mut moved = 0u32;
            for c in cur.iter_mut() {
                // SAFETY: `encode` checked every child and root index.
                let node = unsafe { self.nodes.get_unchecked(*c as usize) };
                let next = node.next(row);
                moved |= next ^ *c;
                *c = next;
            }
            if moved == 0 {
                return cur;
            }
        }
    }

    fn row(&self, row: *const N::X, out: &mut [V], has: &mut [bool]) {
        out.fill(V::zero());
        has.fill(false);
        let mut t = 0;
        while t < self.roots.len() {
            let count = (self.roots.len() - t).min(LANES);
            let mut start = [self.roots[t]; LANES];
            start[..count].copy_from_slice(&self.roots[t..t + count]);
            let leaves = self.walk(row, start);
            for &leaf in &leaves[..count] {
                let slot = self.slots[leaf as usize] as usize;
                if self.single {
                    self.take(out, has, 0, self.values[slot]);
                } else {
                    for e in self.starts[slot] as usize..self.starts[slot + 1] as usize {
                        self.take(out, has, self.targets[e] as usize, self.values[e]);
                    }
                }
            }
            t += count;
        }
        if self.aggregate != 0 {
            for (o, &h) in out.iter_mut().zip(has.iter()) {
                if !h {
                    *o = V::zero();
                }
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

fn run<N: Step, V: Acc>(forest: *const i64, x: *const N::X, y: *mut V, rows: usize) {
    // SAFETY: the caller's contract (an encoded forest of this layout).
    let v: View<N, V> = unsafe { View::new(forest) };
    let mut small = [false; 64];
    let mut large = Vec::new();
    let has: &mut [bool] = if v.n_targets <= small.len() {
        &mut small[..v.n_targets]
    } else {
        large.resize(v.n_targets, false);
        &mut large
    };
    for r in 0..rows {
        // SAFETY: x holds rows·n_features inputs, y rows·n_targets outputs.
        let (row, out) = unsafe {
            (
                x.add(r * v.n_features),
                std::slice::from_raw_parts_mut(y.add(r * v.n_targets), v.n_targets),
            )
        };
        v.row(row, out, has);
    }
}

/// Per row of `x` (`rows` × the forest's features, float32 or float64 as it was encoded),
/// the aggregated leaf values of every tree into `y` (`rows` × targets, float32 or float64).
///
/// # Safety
/// `forest` comes from `encode`; `x` and `y` hold the elements described, aligned for their
/// types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_tree_ensemble(
    forest: *const i64,
    x: *const u8,
    y: *mut u8,
    rows: i64,
) {
    // SAFETY: the header is HEADER words.
    let h = unsafe { std::slice::from_raw_parts(forest, HEADER) };
    debug_assert_eq!(h[0], MAGIC);
    let rows = rows.max(0) as usize;
    // Monomorphic entry points for `multiversion!` (which takes a function name).
    fn ff(f: *const i64, x: *const u8, y: *mut u8, r: usize) {
        run::<Node32, f32>(f, x as *const f32, y as *mut f32, r)
    }
    fn fd(f: *const i64, x: *const u8, y: *mut u8, r: usize) {
        run::<Node32, f64>(f, x as *const f32, y as *mut f64, r)
    }
    fn df(f: *const i64, x: *const u8, y: *mut u8, r: usize) {
        run::<Node64, f32>(f, x as *const f64, y as *mut f32, r)
    }
    fn dd(f: *const i64, x: *const u8, y: *mut u8, r: usize) {
        run::<Node64, f64>(f, x as *const f64, y as *mut f64, r)
    }
    match (h[1] != 0, h[2] != 0) {
        (false, false) => crate::multiversion!(ff(forest, x, y, rows)),
        (false, true) => crate::multiversion!(fd(forest, x, y, rows)),
        (true, false) => crate::multiversion!(df(forest, x, y, rows)),
        (true, true) => crate::multiversion!(dd(forest, x, y, rows)),
    }
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

    /// A seeded random forest: `trees` trees of up to `depth` levels over `nf` features.
    fn random_forest(seed: u64, trees: usize, depth: u32, nf: u32, nt: u32, multi: bool) -> Forest {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut f = Forest {
            input_f64: false,
            value_f64: false,
            aggregate: Aggregate::Sum,
            n_features: nf,
            n_targets: nt,
            nodes: vec![],
            roots: vec![],
            leaves: vec![],
        };
        fn grow(
            f: &mut Forest,
            next: &mut dyn FnMut() -> u64,
            d: u32,
            nf: u32,
            nt: u32,
            multi: bool,
        ) -> u32 {
            let k = f.nodes.len() as u32;
            if d == 0 || next() % 5 == 0 {
                let slot = f.leaves.len() as u32;
                let n = if multi { 1 + next() % 3 } else { 1 };
                let entries = (0..n)
                    .map(|_| {
                        (
                            (next() % nt as u64) as u32,
                            (next() % 2001) as f64 / 1000.0 - 1.0,
                        )
                    })
                    .collect();
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
                nan_left: next() % 2 == 0,
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

    fn inputs(rows: usize, nf: usize, seed: u64) -> Vec<f64> {
        let mut v: Vec<f64> = crate::test_rand(rows * nf, seed)
            .iter()
            .map(|&x| x as f64 * 1.2)
            .collect();
        // Missing values and exact thresholds.
        for (k, x) in v.iter_mut().enumerate() {
            if k % 7 == 3 {
                *x = f64::NAN;
            } else if k % 11 == 5 {
                *x = ((k % 2001) as f64 / 1000.0 - 1.0) as f32 as f64;
            }
        }
        v
    }

    fn check(f: &Forest, rows: usize, seed: u64) {
        let enc = encode(f).expect("valid forest");
        let x = inputs(rows, f.n_features as usize, seed);
        let want = reference(f, &x, rows);
        let n = rows * f.n_targets as usize;
        // SAFETY: enc is a valid encoding of f; the inputs hold rows·n_features values and the
        // outputs n = rows·n_targets.
        let got: Vec<f64> = unsafe {
            match (f.input_f64, f.value_f64) {
                (false, false) => {
                    let xs: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                    let mut y = vec![0f32; n];
                    onnxc_tree_ensemble(
                        enc.as_ptr(),
                        xs.as_ptr() as _,
                        y.as_mut_ptr() as _,
                        rows as i64,
                    );
                    y.iter().map(|&v| v as f64).collect()
                }
                (false, true) => {
                    let xs: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                    let mut y = vec![0f64; n];
                    onnxc_tree_ensemble(
                        enc.as_ptr(),
                        xs.as_ptr() as _,
                        y.as_mut_ptr() as _,
                        rows as i64,
                    );
                    y
                }
                (true, vf) => {
                    let mut y = vec![0f64; n];
                    let mut y32 = vec![0f32; n];
                    if vf {
                        onnxc_tree_ensemble(
                            enc.as_ptr(),
                            x.as_ptr() as _,
                            y.as_mut_ptr() as _,
                            rows as i64,
                        );
                        y
                    } else {
                        onnxc_tree_ensemble(
                            enc.as_ptr(),
                            x.as_ptr() as _,
                            y32.as_mut_ptr() as _,
                            rows as i64,
                        );
                        y32.iter().map(|&v| v as f64).collect()
                    }
                }
            }
        };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g == w),
                "element {k}: got {g}, want {w} ({:?})",
                (f.input_f64, f.value_f64, f.aggregate)
            );
        }
    }

    #[test]
    fn kernel_matches_reference_walk() {
        for (seed, trees) in [(1u64, 1usize), (2, 7), (3, 8), (4, 9), (5, 50)] {
            for multi in [false, true] {
                let nt = if multi { 3 } else { 1 };
                let mut f = random_forest(seed, trees, 6, 5, nt, multi);
                for agg in [Aggregate::Sum, Aggregate::Min, Aggregate::Max] {
                    for (input_f64, value_f64) in
                        [(false, false), (false, true), (true, false), (true, true)]
                    {
                        f.aggregate = agg;
                        f.input_f64 = input_f64;
                        f.value_f64 = value_f64;
                        check(&f, 13, seed);
                    }
                }
            }
        }
    }

    #[test]
    fn single_leaf_trees_need_no_features() {
        let f = Forest {
            input_f64: false,
            value_f64: false,
            aggregate: Aggregate::Sum,
            n_features: 0,
            n_targets: 1,
            nodes: vec![Node::Leaf { slot: 0 }, Node::Leaf { slot: 1 }],
            roots: vec![0, 1],
            leaves: vec![vec![(0, 1.5)], vec![(0, 2.0)]],
        };
        let enc = encode(&f).unwrap();
        let mut y = [0f32; 3];
        // SAFETY: enc encodes f, which has no features (x may be null), and y holds 3 rows of 1
        // target.
        unsafe { onnxc_tree_ensemble(enc.as_ptr(), std::ptr::null(), y.as_mut_ptr() as _, 3) };
        assert_eq!(y, [3.5; 3]);
    }

    #[test]
    fn encode_rejects_out_of_range_indices() {
        let mut f = random_forest(9, 2, 3, 4, 1, false);
        f.nodes.push(Node::Branch {
            feature: 4,
            threshold: 0.0,
            nan_left: false,
            left: 0,
            right: 0,
        });
        assert!(encode(&f).is_err());
        let mut g = random_forest(9, 2, 3, 4, 1, false);
        g.roots.push(g.nodes.len() as u32);
        assert!(encode(&g).is_err());
        let mut h = random_forest(9, 2, 3, 4, 1, false);
        h.nodes.push(Node::Branch {
            feature: 0,
            threshold: 0.1,
            nan_left: false,
            left: 0,
            right: 0,
        });
        assert!(encode(&h).is_err(), "0.1 is not a float32 value");
        let mut c = random_forest(9, 1, 3, 4, 1, false);
        let root = c.roots[0];
        c.nodes.push(Node::Branch {
            feature: 0,
            threshold: 0.5,
            nan_left: false,
            left: root,
            right: root,
        });
        c.roots.push(c.nodes.len() as u32 - 1);
        assert!(encode(&c).is_ok(), "a shared subtree is not a cycle");
        let last = c.nodes.len() as u32 - 1;
        if let Node::Branch { left, .. } = &mut c.nodes[last as usize] {
            *left = last;
        }
        assert!(encode(&c).is_err(), "a node leading to itself");
    }
}
