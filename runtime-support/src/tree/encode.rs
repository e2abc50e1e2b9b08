//! The forest laid out for the walk (`encode`), the encoded array validated (`check`,
//! `checked_header`), and the forest's own checks (`depths`, `acyclic`).

use super::*;

pub(super) fn push_bytes(out: &mut Vec<u8>, b: &[u8]) -> usize {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let at = out.len();
    out.extend_from_slice(b);
    at
}

/// Bytes of a record and of a key.
pub(super) fn sizes(input_f64: bool) -> (usize, usize) {
    if input_f64 { (24, 8) } else { (16, 4) }
}

/// Bytes of the keyed block: `BLOCK` rows, two copies of every feature.
pub(super) fn key_bytes(n_features: usize, input_f64: bool) -> usize {
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
    let vectors_at = match vectors(f) {
        Some(v) => push_bytes(&mut out, &u32s(&v)),
        None => 0,
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
    header[H_VECTORS] = vectors_at as i64;
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

/// Words of one tree's bit-vector table: `VECTOR_LANES` thresholds, masks and leaf slots
/// (u32), then key indices (u8).
pub(super) const VECTOR_TREE_WORDS: usize = 3 * VECTOR_LANES + VECTOR_LANES / 4;

/// Per tree, in tree order, the table of a bit-vector walk (QuickScorer's, for one row).
/// The tree's branches are lanes: the threshold of a branch's test, a mask clearing the
/// leaves of its left subtree (leaves numbered left to right), and the index of the key
/// the test reads among the row's `2 · features` keys (`2f` NaN largest, `2f + 1` NaN 0);
/// then the leaves' slots. A row's leaf is the lowest bit left in the AND of the masks of
/// the branches it fails (x > threshold: the walk would go right there): a leaf left of
/// the exit lies in the left subtree of a branch on the path that went right, and the exit
/// leaf in the left subtree of no failed branch (any branch above it on its left side
/// passed). Unused lanes fail against threshold 0 (no key is 0 in the NaN-largest copy of
/// feature 0 they read) with a mask of the tree's leaves, so the AND never holds a bit past
/// them. Only for float32 inputs of 1 to `VECTOR_FEATURES` features (the row's keys held in
/// registers), every tree (its shared nodes counted as often as they are reached) at
/// most `VECTOR_LANES` leaves; None otherwise.
pub(super) fn vectors(f: &Forest) -> Option<Vec<u32>> {
    const L: usize = VECTOR_LANES;
    if f.input_f64 || f.n_features == 0 || f.n_features as usize > VECTOR_FEATURES {
        return None;
    }
    enum Step {
        Visit(u32),
        /// The left subtree of branch lane `b`, whose first leaf is `first`, is done.
        LeftDone {
            b: usize,
            first: usize,
        },
    }
    let mut out = Vec::with_capacity(f.roots.len() * VECTOR_TREE_WORDS);
    let mut stack = Vec::new();
    for &root in &f.roots {
        let (mut thr, mut masks, mut slots, mut key) = ([0u32; L], [0u32; L], [0u32; L], [0u8; L]);
        let (mut branches, mut leaves) = (0, 0);
        stack.clear();
        stack.push(Step::Visit(root));
        while let Some(step) = stack.pop() {
            match step {
                Step::Visit(k) => match f.nodes[k as usize] {
                    Node::Leaf { slot } => {
                        if leaves == L {
                            return None;
                        }
                        slots[leaves] = slot;
                        leaves += 1;
                    }
                    Node::Branch {
                        feature,
                        threshold,
                        nan_left,
                        left,
                        right,
                    } => {
                        // A binary tree of at most L leaves has fewer than L branches.
                        if branches + 1 >= L {
                            return None;
                        }
                        let b = branches;
                        branches += 1;
                        // Below 2 · VECTOR_FEATURES = 128.
                        key[b] = (2 * feature + nan_left as u32) as u8;
                        thr[b] = if threshold.is_nan() {
                            u32::below_all()
                        } else {
                            u32::key(threshold as f32)
                        };
                        stack.push(Step::Visit(right));
                        stack.push(Step::LeftDone { b, first: leaves });
                        stack.push(Step::Visit(left));
                    }
                },
                Step::LeftDone { b, first } => {
                    masks[b] = !(((1u64 << leaves) - (1u64 << first)) as u32);
                }
            }
        }
        let all = ((1u64 << leaves) - 1) as u32;
        for b in branches..L {
            (key[b], thr[b], masks[b]) = (0, 0, all);
        }
        for s in leaves..L {
            slots[s] = slots[0];
        }
        for t in [thr, masks, slots] {
            out.extend_from_slice(&t);
        }
        out.extend(
            key.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4"))),
        );
    }
    Some(out)
}

/// The body of a sealed forest blob (after its length word; offsets are counted from its
/// start), or an empty slice when the length word is wrong.
pub(super) fn body(blob: &[i64]) -> &[i64] {
    params::Reader::new(blob).map_or(&[], |r| r.body())
}

/// Checks that `enc` is an array the kernel may run on: every table inside it, every
/// record's key offset inside the keyed block and its pair inside the records (a leaf's
/// pair itself), every root a record, the walk order a permutation of the trees, every
/// tree's depth at least its longest path, every leaf slot, entry and target in range.
pub fn check(blob: &[i64]) -> Result<(), Invalid> {
    let bad = |s: &str| Err(Invalid(s.into()));
    // The per-call checks (the header, the tables' bounds), then the tables' contents.
    let enc = checked_header(blob).map_err(|e| Invalid(e.0.into()))?;
    let Header {
        nf,
        nt,
        trees,
        n_recs,
        single,
        slots,
        input_f64,
        value_size,
    } = header(enc).map_err(|e| Invalid(e.0.into()))?;
    let (rec_size, key_size) = sizes(input_f64);
    let count = |i: usize| header_count(enc, i).map_err(|e| Invalid(e.0.into()));
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
    // The bit-vector tables (their forest's type and features checked with the header):
    // key indices among the row's keys, slots in range.
    if count(H_VECTORS)? != 0 {
        let v = u32s(table(H_VECTORS, trees * VECTOR_TREE_WORDS, 4)?);
        for (t, w) in v.chunks(VECTOR_TREE_WORDS).enumerate() {
            let keys = w[3 * VECTOR_LANES..].iter().flat_map(|x| x.to_le_bytes());
            if keys.clone().any(|i| i as usize >= 2 * nf)
                || w[2 * VECTOR_LANES..3 * VECTOR_LANES]
                    .iter()
                    .any(|&s| s as usize >= slots)
            {
                return Err(Invalid(format!(
                    "tree {t}: a bit-vector key index or slot out of range"
                )));
            }
        }
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

/// The counts and flags of a forest's header.
struct Header {
    nf: usize,
    nt: usize,
    trees: usize,
    n_recs: usize,
    single: usize,
    slots: usize,
    input_f64: bool,
    value_size: usize,
}

/// Header word `i` of `body` as a count: in `0..2^32`.
fn header_count(body: &[i64], i: usize) -> params::Result<usize> {
    let w = body.get(i).copied().unwrap_or(-1);
    Ok(params::in_range(w, 0, u32::MAX as i64, "a header count is out of range")? as usize)
}

/// Reads and checks the header at the start of `body`: the magic, flags 0 or 1, the
/// aggregate 0..=2, counts in range, the features and single target within bounds, the
/// records' bytes within 32 bits.
fn header(body: &[i64]) -> params::Result<Header> {
    use params::{ParamError, ensure};
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
    let count = |i: usize| header_count(body, i);
    let hd = Header {
        nf: count(H_FEATURES)?,
        nt: count(H_TARGETS)?,
        trees: count(H_TREES)?,
        n_recs: count(H_N_RECORDS)?,
        single: count(H_SINGLE)?,
        slots: count(H_SLOTS)?,
        input_f64: h[H_INPUT_F64] != 0,
        value_size: if h[H_VALUE_F64] != 0 { 8 } else { 4 },
    };
    ensure(
        hd.nf <= MAX_FEATURES as usize && hd.single <= hd.nt,
        "features or the single target out of range",
    )?;
    let rec_size = sizes(hd.input_f64).0;
    ensure(
        hd.n_recs <= (u32::MAX as usize - rec_size) / rec_size,
        "too many records",
    )?;
    Ok(hd)
}

/// The header of the forest blob `blob` checked for the kernel's per-call use, O(1): the
/// length word, the magic, flags and counts in range, every table inside the blob for the
/// lengths the header gives (values and target ids for the entries `starts` ends with),
/// 8-byte aligned. The tables' contents (records' keys and pairs, roots, order, depths,
/// entries) are `check`ed in full when the forest is encoded (O(records)), not per call.
/// Returns the body.
pub(super) fn checked_header(blob: &[i64]) -> params::Result<&[i64]> {
    use params::ensure;
    let body = params::Reader::new(blob)?.body();
    let h = header(body)?;
    let (trees, n_recs, slots) = (h.trees, h.n_recs, h.slots);
    let rec_size = sizes(h.input_f64).0;
    let count = |i: usize| header_count(body, i);
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
    if count(H_VECTORS)? != 0 {
        ensure(
            !h.input_f64 && (1..=VECTOR_FEATURES).contains(&h.nf),
            "bit-vector tables of a forest without 1 to 64 float32 features",
        )?;
        table(H_VECTORS, trees * VECTOR_TREE_WORDS, 4)?;
    }
    ensure(trees == 0 || n_recs > 0, "trees without records")?;
    if h.single != 0 {
        table(H_VALUES, slots, h.value_size)?;
    } else {
        let starts = table(H_STARTS, slots + 1, 4)?;
        let at = starts + 4 * slots;
        let last = u32::from_le_bytes(
            body[at / 8].to_le_bytes()[at % 8..][..4]
                .try_into()
                .expect("4"),
        );
        table(H_VALUES, last as usize, h.value_size)?;
        table(H_TARGET_IDS, last as usize, 4)?;
    }
    Ok(body)
}

/// Per tree, the most branches a walk from its root passes. Needs an acyclic forest.
pub(super) fn depths(f: &Forest) -> Vec<u32> {
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
pub(super) fn acyclic(f: &Forest) -> Result<(), Invalid> {
    let children = |k: usize| match f.nodes[k] {
        Node::Branch { left, right, .. } => [Some(left as usize), Some(right as usize)],
        Node::Leaf { .. } => [None, None],
    };
    let roots = f.roots.iter().map(|&r| r as usize);
    match own_descendant(f.nodes.len(), roots, children) {
        Some(c) => Err(Invalid(format!("node {c} is its own descendant"))),
        None => Ok(()),
    }
}

/// A node of a binary tree (or DAG) of `n` nodes that is its own descendant, walking from
/// `roots` through `children` (each below `n`); None when the walks all end. Iterative: a
/// hostile forest may be deep.
pub fn own_descendant(
    n: usize,
    roots: impl IntoIterator<Item = usize>,
    children: impl Fn(usize) -> [Option<usize>; 2],
) -> Option<usize> {
    // 0 unseen, 1 on the current path, 2 done.
    let mut state = vec![0u8; n];
    for root in roots {
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
                    1 => return Some(c),
                    _ => {}
                }
            }
        }
    }
    None
}
