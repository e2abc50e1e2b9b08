//! TfIdfVectorizer (ONNX opset 9): counts of the n-grams of a pool in each row of int64
//! tokens, with skips, weighted by the mode (`onnxc_tfidf_f32`).
//!
//! The pool is a trie the compiler flattens into the parameter blob: one entry
//! `[parent, token, id, node]` per trie edge, sorted by `(parent, token)`, the root being
//! node 0. A walk looks the next token up under the current node by binary search; an
//! entry's `id` (1-based, 0 for an inner node that ends no n-gram of a counted length)
//! names the output column through the `ngram_indexes` table. Node numbers are opaque
//! keys: a corrupt table can make a walk miss or count wrong columns, never read outside
//! the blob, and every column is checked against the output width before it is counted.
//!
//! Per row, as the reference (`op_tfidf_vectorizer.py`, onnxruntime's kernel): for each
//! skip distance `d` in `1..=max_skip + 1` and each start, the walk follows tokens
//! `start, start + d, start + 2d, …` for at most `max_n` tokens and counts every n-gram of
//! at least `min_n` tokens it ends on; unigrams are counted in the first pass only.
//! Counts are exact in float32 (at most `n · (max_skip + 1) · max_n` per column, checked
//! to stay below 2^24). Rows are independent and split over the run's threads.
//!
//! Weights belong to the pool's n-grams (ONNX: "the i-th element in weights is the weight
//! of the i-th n-gram in pool") and apply as each hit is counted, as onnxruntime does:
//! TFIDF adds the n-gram's weight per hit, IDF sets its column to the weight of its last
//! hit. With one column per n-gram that is `weight · count` and `weight` where the count is
//! positive. (onnx's reference evaluator reads the weights by output column instead, which
//! differs when `ngram_indexes` is not the identity.)

use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK};
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params;

/// The weighting of the counts (ONNX's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The counts.
    Tf = 0,
    /// The weight of the column's n-gram (1 without weights) where it occurs, else 0.
    Idf = 1,
    /// The count times the n-gram's weight (the count without weights).
    TfIdf = 2,
}

impl Mode {
    pub fn from_name(name: &str) -> Option<Mode> {
        Some(match name {
            "TF" => Mode::Tf,
            "IDF" => Mode::Idf,
            "TFIDF" => Mode::TfIdf,
            _ => return None,
        })
    }
}

/// Words per trie entry: parent, token, id, node.
pub const ENTRY: usize = 4;

/// `onnxc_tfidf_f32`'s parameters: the geometry and the borrowed tables of the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfIdfParams<'a> {
    /// Rows of `x` and `y`.
    pub rows: usize,
    /// Tokens per row.
    pub n: usize,
    /// Columns of `y`.
    pub out: usize,
    pub min_n: usize,
    pub max_n: usize,
    pub max_skip: usize,
    pub mode: Mode,
    /// The trie's edges, `ENTRY` words each, sorted by `(parent, token)`.
    pub entries: &'a [i64],
    /// Output column of n-gram id `k + 1`.
    pub indexes: &'a [i64],
    /// The entries' hash slots (`encode`), `u32` two a word.
    slots: &'a [i64],
}

/// The sealed blob of `[rows, n, out, min_n, max_n, max_skip, mode, entries, indexes,
/// slots, entries…, indexes…, slots…]`: the slots are an open-addressing hash of the
/// entries by `(parent, token)` (`slot_of`; 0 empty, else the entry's index + 1), a power
/// of two at least twice the entries, `u32` two a word.
#[allow(clippy::too_many_arguments)]
pub fn encode(
    rows: usize,
    n: usize,
    out: usize,
    min_n: usize,
    max_n: usize,
    max_skip: usize,
    mode: Mode,
    entries: &[i64],
    indexes: &[i64],
) -> Vec<i64> {
    let head = [
        rows,
        n,
        out,
        min_n,
        max_n,
        max_skip,
        mode as usize,
        entries.len() / ENTRY,
        indexes.len(),
        slots_for(entries.len() / ENTRY),
    ];
    let mut slots = vec![0u32; head[9]];
    let mask = slots.len() - 1;
    for (k, e) in entries.chunks(ENTRY).enumerate() {
        let mut h = slot_of(e[0], e[1]) & mask;
        while slots[h] != 0 {
            h = (h + 1) & mask;
        }
        slots[h] = k as u32 + 1;
    }
    let packed = params::pack_u32(&slots);
    params::seal(
        head.iter()
            .map(|&v| v as i64)
            .chain(entries.iter().copied())
            .chain(indexes.iter().copied())
            .chain(packed),
    )
}

/// Hash slots for `entries` trie entries: a power of two, at least twice as many (so a
/// probe meets an empty slot soon) and at least 2.
fn slots_for(entries: usize) -> usize {
    (2 * entries).next_power_of_two().max(2)
}

/// The first slot (before masking) of the entry for `token` under `node`.
fn slot_of(node: i64, token: i64) -> usize {
    let h = (node as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
        ^ (token as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (h ^ (h >> 32)) as usize
}

impl<'a> TfIdfParams<'a> {
    /// Decodes and checks `blob`: counts in range, `1 ≤ min_n ≤ max_n`, a known mode,
    /// tables that fill the blob exactly, counts that stay exact in float32, and sizes
    /// that fit in memory. The tables' contents are checked where they are used.
    pub fn decode(blob: &'a [i64]) -> params::Result<TfIdfParams<'a>> {
        use params::{ensure, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [
            rows,
            n,
            out,
            min_n,
            max_n,
            max_skip,
            mode,
            entries,
            indexes,
            slots,
        ] = r.array()?;
        let count = |v: i64| in_range(v, 0, params::MAX_WORDS, "a count is out of range");
        for v in [rows, n, out, max_skip, entries, indexes, slots] {
            count(v)?;
        }
        ensure(
            slots as usize == slots_for(entries as usize),
            "the hash slots do not fit the entries",
        )?;
        in_range(
            min_n,
            1,
            params::MAX_EXTENT,
            "min_gram_length is out of range",
        )?;
        in_range(
            max_n,
            min_n,
            params::MAX_EXTENT,
            "max_gram_length is out of range",
        )?;
        let mode = match mode {
            0 => Mode::Tf,
            1 => Mode::Idf,
            2 => Mode::TfIdf,
            _ => return Err(params::ParamError("unknown mode")),
        };
        // The most n-grams one column can count in a row: exact in float32.
        let hits = product([n, max_skip + 1, max_n], "counts would not be exact")?;
        ensure(hits < 1 << 24, "counts would not be exact in float32")?;
        product([rows, n, 8], "a tensor is too large")?;
        product([rows, out, 4], "a tensor is too large")?;
        let entries = r.words(entries as usize * ENTRY)?;
        let indexes = r.words(indexes as usize)?;
        let slots = r.words(slots as usize / 2)?;
        r.finish()?;
        Ok(TfIdfParams {
            rows: rows as usize,
            n: n as usize,
            out: out as usize,
            min_n: min_n as usize,
            max_n: max_n as usize,
            max_skip: max_skip as usize,
            mode,
            entries,
            indexes,
            slots,
        })
    }

    /// The entry under `node` for `token`: its id and node. Probes the hash slots until an
    /// empty one, at most all of them (a corrupt table can miss, never loop or read
    /// outside the blob).
    fn child(&self, node: i64, token: i64) -> Option<(i64, i64)> {
        let slots = self.slots.len() * 2;
        let mut h = slot_of(node, token) & (slots - 1);
        for _ in 0..slots {
            let s = params::u32_at(self.slots, h) as usize;
            if s == 0 {
                return None;
            }
            if let Some(e) = self.entries.get((s - 1) * ENTRY..s * ENTRY)
                && (e[0], e[1]) == (node, token)
            {
                return Some((e[2], e[3]));
            }
            h = (h + 1) & (slots - 1);
        }
        None
    }

    /// The output column of n-gram `id` (1-based), if the tables give one inside the row.
    fn column(&self, id: i64) -> Option<usize> {
        let k = usize::try_from(id.checked_sub(1)?).ok()?;
        let c = usize::try_from(*self.indexes.get(k)?).ok()?;
        (c < self.out).then_some(c)
    }

    /// Counts one row's n-grams into `y` (zeroed first), weighted as they are counted.
    fn row(&self, x: &[i64], y: &mut [f32], weights: Option<&[f32]>) {
        y.fill(0.0);
        for d in 1..=self.max_skip + 1 {
            let Some(min_n) = self.least_at(d) else { break };
            for start in 0..x.len() {
                if start + d * (min_n - 1) >= x.len() {
                    break;
                }
                self.walk(|k| x.get(k).copied(), start, d, min_n, y, weights);
            }
        }
    }

    /// The fewest tokens of an n-gram counted at skip distance `d`: unigrams are counted at
    /// the first distance only. None when no n-gram is counted at `d`.
    pub(crate) fn least_at(&self, d: usize) -> Option<usize> {
        let least = if d > 1 { self.min_n.max(2) } else { self.min_n };
        (least <= self.max_n).then_some(least)
    }

    /// Counts the n-grams of at least `min_n` tokens the walk from `start` by `d` ends on,
    /// `token(k)` the row's token `k` (None past the row's end).
    pub(crate) fn walk(
        &self,
        token: impl Fn(usize) -> Option<i64>,
        start: usize,
        d: usize,
        min_n: usize,
        y: &mut [f32],
        weights: Option<&[f32]>,
    ) {
        let weight = |id: i64| {
            weights
                .and_then(|w| w.get(usize::try_from(id - 1).ok()?))
                .copied()
                .unwrap_or(1.0)
        };
        let mut node = 0;
        let mut at = start;
        for size in 1..=self.max_n {
            let Some(t) = token(at) else { break };
            let Some((id, next)) = self.child(node, t) else {
                break;
            };
            if size >= min_n
                && id != 0
                && let Some(c) = self.column(id)
            {
                match self.mode {
                    Mode::Tf => y[c] += 1.0,
                    Mode::Idf => y[c] = weight(id),
                    Mode::TfIdf => y[c] += weight(id),
                }
            }
            node = next;
            at += d;
        }
    }
}

/// TfIdfVectorizer of `p` over `x` `[rows, n]` into `y` `[rows, out]`, the rows split over
/// `par`. `weights` (one per n-gram id, `indexes.len()`) are read by the IDF and TFIDF
/// modes.
///
/// # Panics
/// When `x` or `y` does not have the length `p` gives it.
pub fn tfidf_f32(p: &TfIdfParams, weights: Option<&[f32]>, x: &[i64], y: &mut [f32], par: Par) {
    assert_eq!(x.len(), p.rows * p.n, "x");
    assert_eq!(y.len(), p.rows * p.out, "y");
    let ya = y.as_mut_ptr();
    let cost = p.n * (p.max_skip + 1) * p.max_n * 8 + p.out;
    let job = |rows: std::ops::Range<usize>, _: usize| {
        for r in rows {
            // SAFETY: row r's outputs lie inside `y` (r < rows) and only this task writes
            // them.
            let yr = unsafe { std::slice::from_raw_parts_mut(ya.add(r * p.out), p.out) };
            p.row(&x[r * p.n..][..p.n], yr, weights);
        }
    };
    // SAFETY: each task writes only its own rows.
    unsafe { par.for_ranges(p.rows, cost, &job) };
}

/// C ABI entry point (`kernels::TFIDF_F32`): `params` is `encode`'s blob, `weights` null
/// or one float per n-gram (the blob's `indexes` count), `x` `[rows, n]` int64 tokens, `y`
/// `[rows, out]`. Returns
/// `ONNXC_ERR_PARAMS`, writing nothing, for a refused blob.
///
/// # Safety
/// `params` points to a sealed blob; `weights` is null or holds one float per n-gram; `x` and `y`
/// hold the elements the blob describes and do not overlap; `threads` as
/// `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_tfidf_f32(
    params: *const i64,
    weights: *const f32,
    x: *const i64,
    y: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, TfIdfParams::decode);
    let (xn, yn) = (p.rows * p.n, p.rows * p.out);
    if (xn > 0 && x.is_null()) || (yn > 0 && y.is_null()) {
        return ONNXC_ERR_PARAMS;
    }
    // SAFETY: the caller's contract: the buffers hold what the blob describes.
    let (x, y, weights) = unsafe {
        (
            if xn == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(x, xn)
            },
            if yn == 0 {
                &mut [][..]
            } else {
                std::slice::from_raw_parts_mut(y, yn)
            },
            (!weights.is_null()).then(|| std::slice::from_raw_parts(weights, p.indexes.len())),
        )
    };
    // SAFETY: the caller's contract.
    let par = unsafe { Par::from_raw(threads) };
    tfidf_f32(&p, weights, x, y, par);
    ONNXC_OK
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;

    /// The trie of `grams` (token lists; n-gram `k` has id `k + 1` and column `k`), as the
    /// compiler builds it.
    pub(crate) fn trie(grams: &[&[i64]]) -> Vec<i64> {
        let mut edges: Vec<[i64; 4]> = Vec::new();
        for (k, g) in grams.iter().enumerate() {
            let mut node = 0;
            for (i, &t) in g.iter().enumerate() {
                let found = edges.iter().position(|e| e[0] == node && e[1] == t);
                let at = match found {
                    Some(at) => at,
                    None => {
                        edges.push([node, t, 0, edges.len() as i64 + 1]);
                        edges.len() - 1
                    }
                };
                if i + 1 == g.len() {
                    edges[at][2] = k as i64 + 1;
                }
                node = edges[at][3];
            }
        }
        edges.sort();
        edges.concat()
    }

    fn run(blob: &[i64], weights: Option<&[f32]>, x: &[i64], threads: *const Threads) -> Vec<f32> {
        let p = TfIdfParams::decode(blob).unwrap();
        let mut y = vec![f32::NAN; p.rows * p.out];
        let w = weights.map_or(std::ptr::null(), |w| w.as_ptr());
        // SAFETY: a sealed blob and buffers of its sizes.
        let s = unsafe { onnxc_tfidf_f32(blob.as_ptr(), w, x.as_ptr(), y.as_mut_ptr(), threads) };
        assert_eq!(s, ONNXC_OK);
        y
    }

    /// The backend's pool: unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7).
    const POOL: [&[i64]; 7] = [&[2], &[3], &[5], &[4], &[5, 6], &[7, 8], &[6, 7]];
    const X: [i64; 12] = [1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8];

    #[test]
    fn backend_cases() {
        let t = trie(&POOL);
        let idx: Vec<i64> = (0..7).collect();
        // (min_n, max_n, max_skip, expected) of test_tfidfvectorizer_tf_*.
        let cases: [(usize, usize, usize, [f32; 7]); 3] = [
            (2, 2, 0, [0., 0., 0., 0., 1., 1., 1.]),
            (2, 2, 5, [0., 0., 0., 0., 1., 3., 1.]),
            (1, 2, 5, [0., 3., 1., 0., 1., 3., 1.]),
        ];
        for (min_n, max_n, skip, want) in cases {
            let blob = encode(1, 12, 7, min_n, max_n, skip, Mode::Tf, &t, &idx);
            assert_eq!(
                run(&blob, None, &X, std::ptr::null()),
                want,
                "{min_n} {skip}"
            );
        }
    }

    #[test]
    fn modes_weight_the_counts() {
        let t = trie(&POOL);
        // N-gram k counts into column 6 − k: the weights follow the n-grams.
        let idx: Vec<i64> = (0..7).rev().collect();
        let w = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let counts = [0., 3., 1., 0., 1., 3., 1.];
        let by_column = |f: &dyn Fn(f32, f32) -> f32| -> Vec<f32> {
            (0..7).map(|c| f(counts[6 - c], w[6 - c])).collect()
        };
        let blob = |m| encode(1, 12, 7, 1, 2, 5, m, &t, &idx);
        let present = |c: f32, w: f32| if c > 0.0 { w } else { 0.0 };
        let (tf, tfidf, idf) = (
            run(&blob(Mode::Tf), Some(&w), &X, std::ptr::null()),
            run(&blob(Mode::TfIdf), Some(&w), &X, std::ptr::null()),
            run(&blob(Mode::Idf), Some(&w), &X, std::ptr::null()),
        );
        assert_eq!(tf, by_column(&|c, _| c));
        assert_eq!(tfidf, by_column(&|c, w| c * w));
        assert_eq!(idf, by_column(&present));
        let unweighted = run(&blob(Mode::Idf), None, &X, std::ptr::null());
        assert_eq!(unweighted, by_column(&|c, _| present(c, 1.0)));
    }

    /// Against a direct count of every (skip, start) window, on random rows.
    #[test]
    fn matches_a_naive_count_on_every_pool() {
        let grams: [&[i64]; 6] = [&[0], &[1, 2], &[2, 2, 1], &[3], &[1, 2, 0], &[2, 1]];
        let t = trie(&grams);
        let idx = [4i64, 0, 2, 1, 3, 5];
        let (rows, n) = (37, 23);
        let x: Vec<i64> = crate::test_rand(rows * n, 7)
            .iter()
            .map(|v| ((v.abs() * 3.0) as i64) % 4)
            .collect();
        for (min_n, max_n, skip) in [(1, 3, 0), (1, 3, 2), (2, 3, 1), (3, 3, 3)] {
            let blob = encode(rows, n, 6, min_n, max_n, skip, Mode::Tf, &t, &idx);
            let y = same_bits_on_every_pool(&format!("{min_n} {max_n} {skip}"), |_, th| {
                run(&blob, None, &x, th)
            });
            for r in 0..rows {
                let row = &x[r * n..][..n];
                let mut want = [0f32; 6];
                for (k, g) in grams.iter().enumerate() {
                    let len = g.len();
                    if len < min_n || len > max_n {
                        continue;
                    }
                    // Unigrams once; longer n-grams once per skip distance.
                    let skips = if len == 1 { 1 } else { skip + 1 };
                    for d in 1..=skips {
                        for s in 0..n {
                            if (0..len).all(|j| row.get(s + j * d) == Some(&g[j])) {
                                want[idx[k] as usize] += 1.0;
                            }
                        }
                    }
                }
                assert_eq!(&y[r * 6..][..6], want, "row {r} {min_n} {max_n} {skip}");
            }
        }
    }

    #[test]
    fn corrupt_tables_stay_inside_the_blob() {
        // Ids past the index table, columns past the row, nodes that loop back to the root.
        let entries = [0, 1, 9, 0, 0, 2, 1, 0, 0, 3, -5, 7];
        let blob = encode(1, 6, 2, 1, 4, 2, Mode::TfIdf, &entries, &[1, 7]);
        let y = run(
            &blob,
            Some(&[2.0, 3.0]),
            &[1, 2, 3, 2, 1, 2],
            std::ptr::null(),
        );
        assert_eq!(y.len(), 2);
        assert!(y.iter().all(|v| v.is_finite()));
        // Hash slots naming entries past the table, or full of entries that never match:
        // every lookup misses after at most one probe a slot.
        let slots = blob.len() - 4; // the last 4 words: 8 slots for 3 entries, two a word
        for fill in [-1i64, 0x0000_0001_0000_0001] {
            let mut bad = blob.clone();
            let n = bad.len();
            bad[slots..n].fill(fill);
            let y = run(
                &bad,
                Some(&[2.0, 3.0]),
                &[1, 2, 3, 2, 1, 2],
                std::ptr::null(),
            );
            assert!(y.iter().all(|v| v.is_finite()));
        }
    }

    #[test]
    fn refuses_corrupt_blobs() {
        let t = trie(&POOL);
        let good = encode(1, 12, 7, 1, 2, 5, Mode::Tf, &t, &[0, 1, 2, 3, 4, 5, 6]);
        assert!(TfIdfParams::decode(&good).is_ok());
        let mut bad = good.clone();
        bad[7] = 3; // mode
        assert!(TfIdfParams::decode(&bad).is_err());
        let mut bad = good.clone();
        bad[4] = 0; // min_n
        assert!(TfIdfParams::decode(&bad).is_err());
        let mut bad = good.clone();
        bad[8] = 1000; // entries past the blob
        assert!(TfIdfParams::decode(&bad).is_err());
        let mut bad = good.clone();
        bad[10] = 64; // hash slots for other entries
        assert!(TfIdfParams::decode(&bad).is_err());
        let mut bad = good.clone();
        bad[2] = 1 << 30; // counts no longer exact
        assert!(TfIdfParams::decode(&bad).is_err());
        let mut y = [7f32; 7];
        // SAFETY: a sealed (if refused) blob and buffers of its sizes.
        let s = unsafe {
            onnxc_tfidf_f32(
                bad.as_ptr(),
                std::ptr::null(),
                X.as_ptr(),
                y.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!((s, y), (ONNXC_ERR_PARAMS, [7f32; 7]));
    }
}
