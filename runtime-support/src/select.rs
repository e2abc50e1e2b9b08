//! Data-dependent selections: kernels whose result has as many rows as the data selects —
//! ONNX `NonZero` (and `Compress`, which gathers its positions), `NonMaxSuppression` and
//! `Unique`.
//!
//! Each writes an int64 result of fixed capacity, sized for the most rows the operands'
//! shapes allow: word 0 is the count of rows found, then the rows, then zeros up to the
//! capacity. The zeros are valid positions for what reads the rows (a gather of the
//! selected boxes), so code that computes on the whole capacity stays in bounds; only the
//! first `count` rows are the op's result (`shaped::onnxc_run_shaped` returns those).

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;
use std::cmp::Ordering;

/// Words of `onnxc_nonzero`'s parameters before the dims.
pub const NONZERO_PARAMS: usize = 3;

/// `onnxc_nonzero`'s parameters, decoded and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonZeroParams {
    /// Bytes per element: 1, 2, 4 or 8.
    pub elem: usize,
    /// Elements are IEEE floats (`-0.0` counts as zero, NaN as non-zero).
    pub float: bool,
    /// The input's dims (their product is the capacity in positions).
    pub dims: Vec<usize>,
}

impl NonZeroParams {
    /// The sealed blob of `[elem, float, rank, dims…]`.
    pub fn encode(elem: i64, float: bool, dims: &[i64]) -> Vec<i64> {
        params::seal(
            [elem, float as i64, dims.len() as i64]
                .into_iter()
                .chain(dims.iter().copied()),
        )
    }

    pub fn decode(blob: &[i64]) -> params::Result<NonZeroParams> {
        use params::{ensure, flag, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [elem, float, rank] = r.array()?;
        ensure([1, 2, 4, 8].contains(&elem), "unknown element size")?;
        let float = flag(float, "float is not 0 or 1")?;
        ensure(!float || elem >= 2, "no 1-byte float")?;
        in_range(rank, 0, 64, "the rank is out of range")?;
        let dims = r.words(rank as usize)?.to_vec();
        r.finish()?;
        for &d in &dims {
            in_range(d, 0, params::MAX_WORDS, "a dim is out of range")?;
        }
        let n = product(dims.iter().copied(), "the input is too large")?;
        product([n, rank.max(1), 8], "the result is too large")?;
        Ok(NonZeroParams {
            elem: elem as usize,
            float,
            dims: dims.iter().map(|&d| d as usize).collect(),
        })
    }

    /// Positions the result has room for: one per element.
    pub fn capacity(&self) -> usize {
        self.dims.iter().product()
    }

    /// Words of the result: the count, then `rank` rows of `capacity` coordinates (one row
    /// for a scalar, which ONNX treats as one element).
    pub fn result_words(&self) -> usize {
        1 + self.dims.len().max(1) * self.capacity()
    }
}

/// `params`: `NonZeroParams::encode`'s blob. `y`: `result_words()` int64 words — the count
/// of non-zero elements of `x`, then row `r` (of `rank`, 1 for a scalar) at `1 + r·capacity`
/// holding coordinate `r` of each, in row-major order, then zeros. Returns
/// `ONNXC_ERR_PARAMS`, touching nothing, when the blob is not valid.
///
/// # Safety
/// `params` points to a sealed blob; `x` holds the elements it describes (aligned for
/// their size) and `y` the words of its result.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_nonzero(params: *const i64, x: *const u8, y: *mut i64) -> Status {
    let p = params::decode_blob!(params, NonZeroParams::decode);
    // SAFETY: the caller's contract: y holds result_words() words.
    let y = unsafe { std::slice::from_raw_parts_mut(y, p.result_words()) };
    y.fill(0);
    // SAFETY: (each arm) x holds n aligned elements of that size.
    let count = unsafe {
        match (p.elem, p.float) {
            (1, _) => positions(&p.dims, y, |i| *x.add(i) != 0),
            (2, f) => {
                let mask = if f { 0x7fff } else { 0xffff };
                positions(&p.dims, y, |i| *(x as *const u16).add(i) & mask != 0)
            }
            (4, f) => {
                let mask = if f { 0x7fff_ffff } else { u32::MAX };
                positions(&p.dims, y, |i| *(x as *const u32).add(i) & mask != 0)
            }
            (_, f) => {
                let mask = if f { u64::MAX >> 1 } else { u64::MAX };
                positions(&p.dims, y, |i| *(x as *const u64).add(i) & mask != 0)
            }
        }
    };
    y[0] = count as i64;
    ONNXC_OK
}

/// Writes the coordinates of the elements `nonzero` accepts (by row-major position) into
/// `y`'s rows (see `onnxc_nonzero`); returns how many there are.
fn positions(dims: &[usize], y: &mut [i64], nonzero: impl Fn(usize) -> bool) -> usize {
    let n: usize = dims.iter().product();
    let rank = dims.len();
    let mut count = 0usize;
    // `decode` bounds the rank by 64.
    let mut at = [0usize; 64];
    for i in 0..n {
        if nonzero(i) {
            for (r, &c) in at[..rank].iter().enumerate() {
                y[1 + r * n + count] = c as i64;
            }
            count += 1;
        }
        // The next position's coordinates, last dim fastest.
        for r in (0..rank).rev() {
            at[r] += 1;
            if at[r] < dims[r] {
                break;
            }
            at[r] = 0;
        }
    }
    count
}

/// Words of `onnxc_nms`'s parameters.
pub const NMS_PARAMS: usize = 6;

/// `onnxc_nms`'s parameters, decoded and validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NmsParams {
    pub batches: usize,
    pub classes: usize,
    pub boxes: usize,
    /// Boxes are `[x_center, y_center, width, height]` (else two corners `[y1, x1, y2, x2]`).
    pub center_point_box: bool,
    /// Whether a score threshold is given (else every box is a candidate).
    pub has_score_threshold: bool,
    /// Rows the result has room for.
    pub capacity: usize,
}

impl NmsParams {
    /// The sealed blob of `[batches, classes, boxes, center_point_box, has_score_threshold,
    /// capacity]`.
    pub fn encode(p: [i64; NMS_PARAMS]) -> Vec<i64> {
        params::seal(p)
    }

    pub fn decode(blob: &[i64]) -> params::Result<NmsParams> {
        use params::{flag, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [batches, classes, boxes, center, has_score, capacity] = r.array()?;
        r.finish()?;
        for v in [batches, classes, boxes, capacity] {
            in_range(v, 0, params::MAX_WORDS, "a count is out of range")?;
        }
        let too_big = "a tensor is too large";
        product([batches, boxes, 4, 4], too_big)?;
        product([batches, classes, boxes, 4], too_big)?;
        product([capacity, 3, 8], too_big)?;
        Ok(NmsParams {
            batches: batches as usize,
            classes: classes as usize,
            boxes: boxes as usize,
            center_point_box: flag(center, "center_point_box is not 0 or 1")?,
            has_score_threshold: flag(has_score, "has_score_threshold is not 0 or 1")?,
            capacity: capacity as usize,
        })
    }

    /// Words of the result: the count, then `capacity` rows of 3.
    pub fn result_words(&self) -> usize {
        1 + 3 * self.capacity
    }
}

/// `params`: `NmsParams::encode`'s blob; `boxes` `[batches, boxes, 4]` and `scores`
/// `[batches, classes, boxes]` float32; `max_per_class` one int64 (negative: 0), `iou` and
/// `score` one float32 each (`score` read only with `has_score_threshold`). `y`:
/// `result_words()` words — the count of selected boxes, then rows `[batch, class, box]`
/// (by batch, then class, then selection order), then zeros. `scratch`: `2·boxes` words.
///
/// Per batch and class, as ONNX specifies (and onnx's reference evaluator computes): the
/// candidates are the boxes scoring above the threshold, taken by descending score (equal
/// scores by position, NaN last), each kept unless its intersection over union with a box
/// kept before exceeds `iou`, until `max_per_class` are kept. Rows beyond the capacity are
/// dropped (the compiler sizes it so that none are). Returns `ONNXC_ERR_PARAMS`, touching
/// nothing, when the blob is not valid.
///
/// # Safety
/// `params` points to a sealed blob; the other pointers hold what it describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_nms(
    params: *const i64,
    boxes: *const f32,
    scores: *const f32,
    max_per_class: *const i64,
    iou: *const f32,
    score: *const f32,
    y: *mut i64,
    scratch: *mut i64,
) -> Status {
    let p = params::decode_blob!(params, NmsParams::decode);
    let (nb, nc, ns) = (p.batches, p.classes, p.boxes);
    // SAFETY: the caller's contract: the buffers hold what the parameters describe.
    let (boxes, scores, y, scratch) = unsafe {
        (
            std::slice::from_raw_parts(boxes, nb * ns * 4),
            std::slice::from_raw_parts(scores, nb * nc * ns),
            std::slice::from_raw_parts_mut(y, p.result_words()),
            std::slice::from_raw_parts_mut(scratch, 2 * ns),
        )
    };
    // SAFETY: one value each.
    let (max_per_class, iou, threshold) = unsafe {
        (
            (*max_per_class).max(0) as u64,
            *iou,
            p.has_score_threshold.then(|| *score),
        )
    };
    y.fill(0);
    let (candidates, kept) = scratch.split_at_mut(ns);
    let mut count = 0usize;
    for b in 0..nb {
        let batch_boxes = &boxes[b * ns * 4..(b + 1) * ns * 4];
        let corners = |i: usize| corners(&batch_boxes[i * 4..i * 4 + 4], p.center_point_box);
        for c in 0..nc {
            let s = &scores[(b * nc + c) * ns..(b * nc + c + 1) * ns];
            let mut n = 0;
            for (i, &v) in s.iter().enumerate() {
                if threshold.is_none_or(|t| v > t) {
                    candidates[n] = i as i64;
                    n += 1;
                }
            }
            let order = |a: &i64, b: &i64| {
                let (x, y) = (s[*a as usize], s[*b as usize]);
                match (x.is_nan(), y.is_nan()) {
                    (false, false) => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
                    (a_nan, b_nan) => a_nan.cmp(&b_nan),
                }
                .then(a.cmp(b))
            };
            candidates[..n].sort_unstable_by(order);
            let mut k = 0usize;
            for &i in &candidates[..n] {
                if k as u64 >= max_per_class {
                    break;
                }
                let bi = corners(i as usize);
                if kept[..k]
                    .iter()
                    .any(|&j| suppresses(&bi, &corners(j as usize), iou))
                {
                    continue;
                }
                kept[k] = i;
                k += 1;
                if count < p.capacity {
                    y[1 + 3 * count..4 + 3 * count].copy_from_slice(&[b as i64, c as i64, i]);
                    count += 1;
                }
            }
        }
    }
    y[0] = count as i64;
    ONNXC_OK
}

/// Words of `onnxc_unique`'s parameters.
pub const UNIQUE_PARAMS: usize = 5;

/// The ONNX element types `onnxc_unique` compares (bool as uint8).
pub const UNIQUE_DTYPES: [i64; 13] = [1, 11, 10, 16, 3, 2, 5, 4, 6, 12, 7, 13, 9];

/// `onnxc_unique`'s parameters, decoded and validated: the input seen as `[outer, n,
/// inner]`, its slices along `n` compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniqueParams {
    pub dtype: i64,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    /// Unique slices in ascending order (else by first occurrence).
    pub sorted: bool,
}

impl UniqueParams {
    /// The sealed blob of `[dtype, outer, n, inner, sorted]`.
    pub fn encode(p: [i64; UNIQUE_PARAMS]) -> Vec<i64> {
        params::seal(p)
    }

    pub fn decode(blob: &[i64]) -> params::Result<UniqueParams> {
        use params::{ensure, flag, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [dtype, outer, n, inner, sorted] = r.array()?;
        r.finish()?;
        ensure(UNIQUE_DTYPES.contains(&dtype), "unknown element type")?;
        for v in [outer, n, inner] {
            in_range(v, 0, params::MAX_WORDS, "a count is out of range")?;
        }
        let too_big = "a tensor is too large";
        product([outer, n, inner, 8], too_big)?;
        product([n, 3, 8], too_big)?;
        Ok(UniqueParams {
            dtype,
            outer: outer as usize,
            n: n as usize,
            inner: inner as usize,
            sorted: flag(sorted, "sorted is not 0 or 1")?,
        })
    }

    /// Words of the result: the count `u`, then `n` slots each of the unique slices' first
    /// positions, every slice's unique index (the inverse) and the unique slices' counts.
    pub fn result_words(&self) -> usize {
        1 + 3 * self.n
    }
}

/// A comparable element: floats by value with NaN last (all NaNs equal, `-0.0 == 0.0`, as
/// numpy's unique), integers exactly.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Elem {
    Int(i128),
    Float(bool, f64),
}

/// `params`: `UniqueParams::encode`'s blob; `x` the `[outer, n, inner]` elements. `y`:
/// `result_words()` words — the count `u` of distinct slices `x[:, i, :]`, then (each in
/// `n` slots, zero past `u`) the position of each distinct slice's first occurrence, the
/// distinct slice each position holds, and how often each occurs; distinct slices ordered
/// ascending (lexicographically, elements row-major) with `sorted`, else by first
/// occurrence. `scratch`: `3·n` words. Returns `ONNXC_ERR_PARAMS`, touching nothing, when
/// the blob is not valid.
///
/// # Safety
/// `params` points to a sealed blob; `x` holds the elements it describes, aligned for their
/// type, `y` and `scratch` their words.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_unique(
    params: *const i64,
    x: *const u8,
    y: *mut i64,
    scratch: *mut i64,
) -> Status {
    let p = params::decode_blob!(params, UniqueParams::decode);
    let (outer, n, inner) = (p.outer, p.n, p.inner);
    // SAFETY: the caller's contract: y and scratch hold their words.
    let (y, scratch) = unsafe {
        (
            std::slice::from_raw_parts_mut(y, p.result_words()),
            std::slice::from_raw_parts_mut(scratch, 3 * n),
        )
    };
    // Element k (row-major) of slice i.
    let at = |i: usize, k: usize| (k / inner * n + i) * inner + k % inner;
    let len = outer * inner;
    let elem = |j: usize| -> Elem {
        // SAFETY: (each arm) x holds outer·n·inner aligned elements of the type, j < that.
        unsafe {
            let f = |v: f64| Elem::Float(v.is_nan(), if v.is_nan() || v == 0.0 { 0.0 } else { v });
            match p.dtype {
                1 => f(*(x as *const f32).add(j) as f64),
                11 => f(*(x as *const f64).add(j)),
                10 => f(crate::abi::onnxc_f16_to_f32(*(x as *const u16).add(j)) as f64),
                16 => f(f32::from_bits((*(x as *const u16).add(j) as u32) << 16) as f64),
                3 => Elem::Int(*(x as *const i8).add(j) as i128),
                2 | 9 => Elem::Int(*x.add(j) as i128),
                5 => Elem::Int(*(x as *const i16).add(j) as i128),
                4 => Elem::Int(*(x as *const u16).add(j) as i128),
                6 => Elem::Int(*(x as *const i32).add(j) as i128),
                12 => Elem::Int(*(x as *const u32).add(j) as i128),
                7 => Elem::Int(*(x as *const i64).add(j) as i128),
                _ => Elem::Int(*(x as *const u64).add(j) as i128),
            }
        }
    };
    let compare = |a: usize, b: usize| {
        (0..len)
            .map(|k| {
                elem(at(a, k))
                    .partial_cmp(&elem(at(b, k)))
                    .unwrap_or(Ordering::Equal)
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    y.fill(0);
    let (order, rest) = scratch.split_at_mut(n);
    let (group, first) = rest.split_at_mut(n);
    for (i, o) in order.iter_mut().enumerate() {
        *o = i as i64;
    }
    // Ascending slices, equal ones by position: each run of equal slices is one distinct
    // slice, first occurring at the run's first position.
    order.sort_unstable_by(|&a, &b| compare(a as usize, b as usize).then(a.cmp(&b)));
    let mut u = 0usize;
    for k in 0..n {
        let i = order[k] as usize;
        if k == 0 || compare(order[k - 1] as usize, i).is_ne() {
            first[u] = i as i64;
            u += 1;
        }
        group[i] = (u - 1) as i64;
    }
    // `rank[g]`: distinct slice g's place in the result (g itself when sorted).
    let (firsts, inverse, counts) = {
        let (a, b) = y[1..].split_at_mut(n);
        let (b, c) = b.split_at_mut(n);
        (a, b, c)
    };
    if p.sorted {
        firsts[..u].copy_from_slice(&first[..u]);
        inverse.copy_from_slice(group);
    } else {
        // Order the distinct slices by first occurrence: `order` now holds, per place, the
        // sorted index g; `first` is reused for g → place.
        for (g, o) in order[..u].iter_mut().enumerate() {
            *o = g as i64;
        }
        order[..u].sort_unstable_by_key(|&g| first[g as usize]);
        for (place, &g) in order[..u].iter().enumerate() {
            firsts[place] = first[g as usize];
        }
        for (place, &g) in order[..u].iter().enumerate() {
            first[g as usize] = place as i64;
        }
        for i in 0..n {
            inverse[i] = first[group[i] as usize];
        }
    }
    for i in 0..n {
        counts[inverse[i] as usize] += 1;
    }
    y[0] = u as i64;
    ONNXC_OK
}

/// A box as `[x_min, x_max, y_min, y_max]`.
fn corners(b: &[f32], center: bool) -> [f32; 4] {
    if center {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        [b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh]
    } else {
        [
            b[1].min(b[3]),
            b[1].max(b[3]),
            b[0].min(b[2]),
            b[0].max(b[2]),
        ]
    }
}

/// Whether boxes `a` and `b` overlap by more than `iou` (intersection over union), computed
/// in float32 as onnx's reference evaluator does; empty boxes suppress nothing.
fn suppresses(a: &[f32; 4], b: &[f32; 4], iou: f32) -> bool {
    let (x0, x1) = (a[0].max(b[0]), a[1].min(b[1]));
    if x1 <= x0 {
        return false;
    }
    let (y0, y1) = (a[2].max(b[2]), a[3].min(b[3]));
    if y1 <= y0 {
        return false;
    }
    let inter = (x1 - x0) * (y1 - y0);
    let area = |r: &[f32; 4]| (r[1] - r[0]) * (r[3] - r[2]);
    let (aa, ab) = (area(a), area(b));
    let union = aa + ab - inter;
    if inter <= 0.0 || aa <= 0.0 || ab <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > iou
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonzero(x: &[f32], dims: &[i64]) -> Vec<i64> {
        let blob = NonZeroParams::encode(4, true, dims);
        let p = NonZeroParams::decode(&blob).unwrap();
        let mut y = vec![-1i64; p.result_words()];
        // SAFETY: x and y hold what the blob describes.
        let rc = unsafe { onnxc_nonzero(blob.as_ptr(), x.as_ptr().cast(), y.as_mut_ptr()) };
        assert_eq!(rc, ONNXC_OK);
        y
    }

    #[test]
    fn nonzero_writes_count_rows_and_zero_padding() {
        // [[1, 0, -0.0], [NaN, 0, 2]]: (0,0), (1,0), (1,2); -0.0 is zero, NaN is not.
        let y = nonzero(&[1.0, 0.0, -0.0, f32::NAN, 0.0, 2.0], &[2, 3]);
        assert_eq!(y, [3, 0, 1, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0]);
        // A scalar is one element.
        assert_eq!(nonzero(&[5.0], &[]), [1, 0]);
        assert_eq!(nonzero(&[0.0], &[]), [0, 0]);
    }

    #[test]
    fn nonzero_refuses_bad_blobs() {
        let mut blob = NonZeroParams::encode(3, false, &[2]);
        assert!(NonZeroParams::decode(&blob).is_err());
        blob = NonZeroParams::encode(1, true, &[2]);
        assert!(NonZeroParams::decode(&blob).is_err());
        blob = NonZeroParams::encode(4, false, &[-1]);
        assert!(NonZeroParams::decode(&blob).is_err());
    }

    fn nms(boxes: &[f32], scores: &[f32], shape: [i64; 3], max: i64, iou: f32) -> Vec<i64> {
        let cap = shape[0] * shape[1] * shape[2].min(max);
        let blob = NmsParams::encode([shape[0], shape[1], shape[2], 0, 1, cap]);
        let p = NmsParams::decode(&blob).unwrap();
        let mut y = vec![-1i64; p.result_words()];
        let mut scratch = vec![0i64; 2 * shape[2] as usize];
        let thr = 0.0f32;
        // SAFETY: the buffers hold what the blob describes.
        let rc = unsafe {
            onnxc_nms(
                blob.as_ptr(),
                boxes.as_ptr(),
                scores.as_ptr(),
                &max,
                &iou,
                &thr,
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(rc, ONNXC_OK);
        y
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        // Boxes 0 and 1 overlap (IoU 0.81), box 2 is apart; box 3 scores nothing.
        let boxes = [
            0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.9, 1.0, 5.0, 5.0, 6.0, 6.0, 0.0, 0.0, 1.0, 1.0,
        ];
        let scores = [0.8, 0.9, 0.5, 0.0];
        let y = nms(&boxes, &scores, [1, 1, 4], 3, 0.5);
        assert_eq!(y, [2, 0, 0, 1, 0, 0, 2, 0, 0, 0]);
        // A threshold above 0.81 keeps both overlapping boxes; max 1 keeps the best only.
        assert_eq!(
            nms(&boxes, &scores, [1, 1, 4], 3, 0.9)[..10],
            [3, 0, 0, 1, 0, 0, 0, 0, 0, 2]
        );
        assert_eq!(nms(&boxes, &scores, [1, 1, 4], 1, 0.5), [1, 0, 0, 1]);
    }

    fn unique(x: &[i64], sorted: bool) -> Vec<i64> {
        let n = x.len() as i64;
        let blob = UniqueParams::encode([7, 1, n, 1, sorted as i64]);
        let p = UniqueParams::decode(&blob).unwrap();
        let mut y = vec![-1i64; p.result_words()];
        let mut scratch = vec![0i64; 3 * x.len()];
        // SAFETY: the buffers hold what the blob describes.
        let rc = unsafe {
            onnxc_unique(
                blob.as_ptr(),
                x.as_ptr().cast(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(rc, ONNXC_OK);
        y
    }

    #[test]
    fn unique_finds_first_positions_inverse_and_counts() {
        // [2, 1, 1, 3, 4, 3] as onnx's example: sorted 1 2 3 4.
        let y = unique(&[2, 1, 1, 3, 4, 3], true);
        assert_eq!(y[0], 4);
        assert_eq!(y[1..5], [1, 0, 3, 4], "first positions");
        assert_eq!(y[7..13], [1, 0, 0, 2, 3, 2], "inverse");
        assert_eq!(y[13..17], [2, 1, 2, 1], "counts");
        // By first occurrence: 2 1 3 4.
        let y = unique(&[2, 1, 1, 3, 4, 3], false);
        assert_eq!(y[1..5], [0, 1, 3, 4]);
        assert_eq!(y[7..13], [0, 1, 1, 2, 3, 2]);
        assert_eq!(y[13..17], [1, 2, 2, 1]);
    }
}
