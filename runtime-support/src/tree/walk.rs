//! The walk: order keys (`Key`), records (`Rec`), accumulators (`Acc`), a typed view of
//! the encoded forest (`View`) and `run`, which keys rows and walks every tree for them.

use super::*;

/// Order keys: a float's bits mapped so that unsigned integer order is the float order
/// (−0 and +0 one key). NaN's key is the largest value of the type; no number's key is
/// that or 0.
pub(super) trait Key: Copy + Eq + Ord {
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
pub(super) struct Rec32 {
    thr: u32,
    key: u32,
    pair: u32,
    slot: u32,
}

/// A record over float64 keys.
#[repr(C)]
#[derive(Copy, Clone)]
pub(super) struct Rec64 {
    thr: u64,
    key: u32,
    pair: u32,
    slot: u32,
    _pad: u32,
}

/// A record layout and its step.
pub(super) trait Rec: Copy {
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
                    let r = recs.add(at as usize);
                    // The key offset and the pair, adjacent, in one load: the walk is bound
                    // by its loads.
                    let kp = (r.add(std::mem::offset_of!($r, key)) as *const u64).read_unaligned();
                    const {
                        assert!(std::mem::offset_of!($r, pair) == std::mem::offset_of!($r, key) + 4)
                    };
                    let (lo, hi) = (kp as u32, (kp >> 32) as u32);
                    let (key, pair) = if cfg!(target_endian = "little") {
                        (lo, hi)
                    } else {
                        (hi, lo)
                    };
                    let x = *(keys.add(key as usize) as *const $k);
                    let thr = (*(r as *const $r)).thr;
                    // Both addresses are ready before the compare: a select, not a branch
                    // (which would be mispredicted every other step).
                    let after = pair.wrapping_add(size_of::<$r>() as u32);
                    select_unpredictable(x <= thr, pair, after)
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
pub(super) trait Acc: Copy {
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
pub(super) struct View<'a, N, V> {
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
    /// The trees' bit-vector tables (`encode::vectors`), or null.
    vectors: *const u32,
    _rec: std::marker::PhantomData<N>,
}

/// # Safety
/// `p` is an array `encode` made, `off` one of its table offsets, holding `len` `T`s.
pub(super) unsafe fn table<'a, T>(p: *const i64, off: i64, len: usize) -> &'a [T] {
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
                vectors: if h[H_VECTORS] == 0 {
                    std::ptr::null()
                } else {
                    (p as *const u8).add(h[H_VECTORS] as usize) as *const u32
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

    /// Whether rows take the bit-vector walk: the forest has its tables and the CPU
    /// AVX-512.
    fn vector_walk(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            !self.vectors.is_null() && crate::isa::avx512()
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// One row: each tree's leaf slot into `slots` (by the bit-vector tables where the CPU
    /// has AVX-512, else `ROW_LANES` trees at a time in depth order), then the aggregation
    /// in tree order.
    fn row(&self, keys: *const u8, out: &mut [V], has: &mut [bool], slots: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if self.vector_walk() {
            // SAFETY: `check`ed tables, one per tree; `keys` holds the keyed row; AVX-512F
            // is present.
            unsafe { vector_slots(self.vectors, keys as *const u32, self.n_features, slots) };
            self.aggregate(out, has, slots);
            return;
        }
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
        self.aggregate(out, has, slots);
    }

    /// A row's aggregation of its trees' leaves (`slots`, in tree order) into `out`.
    fn aggregate(&self, out: &mut [V], has: &mut [bool], slots: &[u32]) {
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

/// Each tree's leaf slot for the keyed row at `keys` (row 0 of a keyed block of `nf` ≤
/// `VECTOR_FEATURES` features), by its bit-vector table (`encode::vectors`): the row's keys
/// held in registers, a tree's 32 branch keys permuted out of them and compared at
/// once, the masks of the failed branches ANDed, the lowest bit left the leaf. No branch and
/// no load that waits on another. A LightGBM forest of 500 trees of 31 leaves on 30
/// features (Zen 4): one row 2.56 µs against 4.12 for the interleaved record walk, which
/// takes as many steps as the deepest tree of each group of 16 (2.5 times a row's paths);
/// 1000 rows 2.52 ms against 3.68 for the blocked walk. Gathering the keys from memory
/// instead of permuting them took 6.7 µs; 32-bit key indices 2.86 µs (the tables stream
/// from L2: bytes count).
///
/// # Safety
/// `vectors` holds `slots.len()` `check`ed tables; `keys` a keyed block of `nf` features;
/// the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn vector_slots(vectors: *const u32, keys: *const u32, nf: usize, slots: &mut [u32]) {
    use std::arch::x86_64::*;
    // The row's keys, key 2f + c at index 2f + c (`keyed` strides them by BLOCK).
    let mut row = [0u32; 2 * VECTOR_FEATURES];
    let n = 2 * nf.min(VECTOR_FEATURES);
    for (i, k) in row.iter_mut().enumerate().take(n) {
        // SAFETY: key i of row 0 of the keyed block (i < 2·nf).
        *k = unsafe { *keys.add(i * BLOCK) };
    }
    // SAFETY: `row` holds 2 · VECTOR_FEATURES = 128 u32s.
    let r: [__m512i; 8] = std::array::from_fn(|q| unsafe {
        _mm512_loadu_si512(row.as_ptr().add(16 * q) as *const _)
    });
    // Key `idx` of each lane: bits 0-4 pick one of 32 in a register pair, bits 5 and 6 the
    // pair. Up to 32 features (64 keys) two pairs do.
    let (bit5, bit6) = (_mm512_set1_epi32(32), _mm512_set1_epi32(64));
    let pair = |p: usize, idx: __m512i| _mm512_permutex2var_epi32(r[2 * p], idx, r[2 * p + 1]);
    let upper = |idx: __m512i, bit: __m512i, lo: __m512i, hi: __m512i| {
        _mm512_mask_mov_epi32(lo, _mm512_test_epi32_mask(idx, bit), hi)
    };
    // SAFETY: forwarded.
    unsafe {
        if n <= 64 {
            walk_vectors(vectors, slots, |idx| {
                upper(idx, bit5, pair(0, idx), pair(1, idx))
            });
        } else {
            walk_vectors(vectors, slots, |idx| {
                let lo = upper(idx, bit5, pair(0, idx), pair(1, idx));
                let hi = upper(idx, bit5, pair(2, idx), pair(3, idx));
                upper(idx, bit6, lo, hi)
            });
        }
    }
}

/// `vector_slots`' loop over the trees, `pick` taking each lane's key by its index.
///
/// # Safety
/// As `vector_slots`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn walk_vectors(
    vectors: *const u32,
    slots: &mut [u32],
    pick: impl Fn(std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i,
) {
    use std::arch::x86_64::*;
    const L: usize = VECTOR_LANES;
    let ones = _mm512_set1_epi32(-1);
    for (t, slot) in slots.iter_mut().enumerate() {
        // SAFETY: table t's rows (`check`).
        unsafe {
            let w = vectors.add(t * VECTOR_TREE_WORDS);
            let keys = w.add(3 * L) as *const u8;
            let word =
                |r: usize, half: usize| _mm512_loadu_si512(w.add(r * L + 16 * half) as *const _);
            // Lanes that pass (go left) take all ones, the others their mask.
            let lanes = |half: usize| {
                let idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(keys.add(16 * half) as *const _));
                let pass = _mm512_cmple_epu32_mask(pick(idx), word(0, half));
                _mm512_mask_mov_epi32(word(1, half), pass, ones)
            };
            let bits = _mm512_reduce_and_epi32(_mm512_and_si512(lanes(0), lanes(1))) as u32;
            // The exit leaf's bit is always left (see `encode::vectors`); the top bit bounds
            // the index whatever the table holds.
            let leaf = (bits | 1 << (L - 1)).trailing_zeros() as usize;
            *slot = *w.add(2 * L + leaf);
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
pub(super) unsafe fn keyed<K: Key>(
    x: *const K::F,
    n: usize,
    padded: usize,
    nf: usize,
    keys: *mut K,
) {
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

pub(super) fn run<N: Rec, V: Acc>(
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
    // The bit-vector walk, where it applies, beats the blocked walk at every row count.
    if !v.vector_walk() && v.aggregate == 0 && rows >= LANES && nf > 0 {
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
    let slots_at = key_bytes(nf, std::mem::size_of::<N::K>() == 8);
    let slots: &mut [u32] = if v.roots.is_empty() {
        &mut []
    } else {
        // SAFETY: scratch holds a slot per tree after the keyed block (`scratch_bytes`),
        // 4-byte aligned.
        unsafe { std::slice::from_raw_parts_mut(scratch.add(slots_at) as *mut u32, v.roots.len()) }
    };
    let has: &mut [bool] = if v.roots.is_empty() {
        &mut []
    } else {
        // SAFETY: scratch holds a flag per target after the slots (`scratch_bytes`),
        // zeroed here before the slice is made (every byte then a valid `bool`).
        unsafe {
            let p = scratch.add(slots_at + 4 * v.roots.len());
            std::ptr::write_bytes(p, 0, nt);
            std::slice::from_raw_parts_mut(p as *mut bool, nt)
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
