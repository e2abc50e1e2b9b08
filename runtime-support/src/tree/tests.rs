//! Tests of the encoding, its checks and the walk against `reference`.

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
    grown(seed, trees, depth, nf, nt, multi, false)
}

/// A forest of full binary trees of `depth` (2^depth leaves each), random tests.
fn full_forest(seed: u64, trees: usize, depth: u32, nf: u32) -> Forest {
    grown(seed, trees, depth, nf, 1, false, true)
}

/// Seeded random trees of up to `depth` levels (exactly, when `full`).
fn grown(seed: u64, trees: usize, depth: u32, nf: u32, nt: u32, multi: bool, full: bool) -> Forest {
    let mut next = xorshift(seed);
    let mut f = empty(nf, nt);
    struct Shape {
        nf: u32,
        nt: u32,
        multi: bool,
        full: bool,
    }
    fn grow(f: &mut Forest, next: &mut dyn FnMut() -> u64, d: u32, s: &Shape) -> u32 {
        let k = f.nodes.len() as u32;
        if d == 0 || (!s.full && next().is_multiple_of(5)) {
            let slot = f.leaves.len() as u32;
            let entries = leaf_entries(next, s.nt, s.multi);
            f.leaves.push(entries);
            f.nodes.push(Node::Leaf { slot });
            return k;
        }
        f.nodes.push(Node::Leaf { slot: 0 });
        let left = grow(f, next, d - 1, s);
        let right = grow(f, next, d - 1, s);
        let threshold = ((next() % 2001) as f64 / 1000.0 - 1.0) as f32 as f64;
        f.nodes[k as usize] = Node::Branch {
            feature: (next() % s.nf as u64) as u32,
            threshold,
            nan_left: next().is_multiple_of(2),
            left,
            right,
        };
        k
    }
    let shape = Shape {
        nf,
        nt,
        multi,
        full,
    };
    for _ in 0..trees {
        let r = grow(&mut f, &mut next, depth, &shape);
        f.roots.push(r);
    }
    f
}

/// Trees whose nodes are shared: each branch's children are any later nodes of its
/// tree (as the frontend's equality and set tests share their false branch), and the
/// last tree's root is a node of the first.
fn random_dag(seed: u64, trees: usize, branches: usize, nf: u32, nt: u32, multi: bool) -> Forest {
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
        let (status, allocations) = crate::allocations_during(|| unsafe {
            onnxc_tree_ensemble(enc.as_ptr(), xp, y.as_mut_ptr() as _, rows as i64, s)
        });
        assert_eq!(status, ONNXC_OK);
        assert_eq!(allocations, 0, "the call allocated");
        y
    } else {
        let mut y = vec![0f32; n];
        // SAFETY: enc was encoded for this input and value type; x and y hold `rows` rows,
        // scratch at least `scratch_bytes(&enc)` bytes.
        let (status, allocations) = crate::allocations_during(|| unsafe {
            onnxc_tree_ensemble(enc.as_ptr(), xp, y.as_mut_ptr() as _, rows as i64, s)
        });
        assert_eq!(status, ONNXC_OK);
        assert_eq!(allocations, 0, "the call allocated");
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
        for (input_f64, value_f64) in [(false, false), (false, true), (true, false), (true, true)] {
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
    // More targets than a classifier's usual few (the per-target flags of min/max live in
    // the scratch too).
    every_variant(&mut random_forest(7, 12, 5, 5, 100, true), 7);
    // Every leaf one entry, for target 1 of 3.
    let mut f = random_forest(6, 20, 5, 4, 3, false);
    for l in &mut f.leaves {
        l[0].0 = 1;
    }
    every_variant(&mut f, 6);
}

/// Rows of a float32 forest of at most 64 features whose trees have at most 32 leaves are
/// walked by the bit-vector tables on AVX-512 (the record walks under an ISA cap): full
/// trees of 32 leaves (31 branches, one unused lane), of 2 and of 1 leaf, mixed, over 7
/// features (keys permuted from two register pairs), 33 and 64 (four pairs); a tree of 64
/// leaves, or 65 features, leave the forest to the record walks. All give the reference's
/// values.
#[test]
fn bit_vector_tables_cover_trees_of_up_to_32_leaves() {
    for (depths, nf, has) in [
        (&[5u32, 5, 5][..], 7, true),
        (&[5, 1, 0, 3, 5][..], 7, true),
        (&[5, 4, 5][..], 33, true),
        (&[5, 5, 2][..], 64, true),
        (&[5, 6][..], 7, false),
        (&[5, 3][..], 65, false),
    ] {
        let mut f = empty(nf, 1);
        for (i, &d) in depths.iter().enumerate() {
            let t = full_forest(40 + i as u64, 1, d, nf);
            let (base, slots) = (f.nodes.len() as u32, f.leaves.len() as u32);
            // The tree's nodes renumbered after the forest's.
            f.nodes.extend(t.nodes.into_iter().map(|mut n| {
                match &mut n {
                    Node::Leaf { slot } => *slot += slots,
                    Node::Branch { left, right, .. } => {
                        (*left, *right) = (*left + base, *right + base)
                    }
                }
                n
            }));
            f.leaves.extend(t.leaves);
            f.roots.push(t.roots[0] + base);
        }
        assert_eq!(
            vectors(&f).is_some(),
            has,
            "trees of depths {depths:?}, {nf} features"
        );
        for rows in 1..=7 {
            verify(&f, rows, rows as u64);
        }
        every_variant(&mut f, 3);
    }
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
            if input_f64 {
                edit("bit-vector tables of a float64 forest", &|c| {
                    c[H_VECTORS] = c[H_ROOTS]
                });
            } else {
                let v = h(H_VECTORS);
                assert_ne!(v, 0, "trees of at most 16 leaves have bit-vector tables");
                edit("bit-vector key past the row", &|c| {
                    set_u32(c, v + 4 * 3 * VECTOR_LANES + 4, 2 * 3)
                });
                edit("bit-vector leaf slot", &|c| {
                    set_u32(c, v + 4 * (2 * VECTOR_LANES + 7), f.leaves.len() as u32)
                });
                edit("bit-vector tables past the end", &|c| {
                    c[H_VECTORS] = (c.len() * 8 - 8) as i64
                });
            }
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
/// every key offset for every row of a block, the slots every tree, the flags every target.
#[test]
fn scratch_covers_the_walk() {
    for input_f64 in [false, true] {
        let mut f = random_forest(31, 12, 5, 7, 1, false);
        f.input_f64 = input_f64;
        let sealed = encode(&f).unwrap();
        let enc = &sealed[1..];
        let (rs, ks) = sizes(input_f64);
        let keys = key_bytes(7, input_f64);
        assert_eq!(scratch_bytes(&sealed), keys + 4 * 12 + f.n_targets as usize);
        for i in 0..enc[H_N_RECORDS] as usize {
            let key = get_u32(enc, enc[H_RECORDS] as usize + i * rs + ks) as usize;
            assert!(key + BLOCK * ks <= keys);
        }
    }
}
