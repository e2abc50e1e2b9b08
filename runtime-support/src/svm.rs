//! Class probabilities of a multiclass SVM (ONNX-ML SVMClassifier with `prob_a`/`prob_b`):
//! each pairwise decision value through Platt's sigmoid, then the pairwise probabilities
//! coupled into one distribution by the iterative method of Wu, Lin and Weng (libsvm's
//! `multiclass_probability`), as onnxruntime computes it, in float32 and the same order
//! of operations: at most 100 iterations, stopping once every component's error is below
//! 0.005/k.

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;

/// Most classes of an SVM's probabilities (its scratch is 2·k² + k floats).
pub const MAX_CLASSES: i64 = 1 << 16;

/// The sealed blob (`params::seal`) of `onnxc_svm_probability`'s parameters `[k, rows]`.
pub fn encode(k: i64, rows: i64) -> Vec<i64> {
    params::seal([k, rows])
}

/// `(k, rows)` from `encode`'s blob, checked: `k` in `1..=MAX_CLASSES`, `rows` not negative,
/// inputs and outputs whose sizes fit in memory.
pub fn decode(blob: &[i64]) -> params::Result<(usize, usize)> {
    let mut r = params::Reader::new(blob)?;
    let [k, rows] = r.array()?;
    r.finish()?;
    params::in_range(k, 1, MAX_CLASSES, "class count out of range")?;
    params::in_range(rows, 0, params::MAX_WORDS, "row count out of range")?;
    params::product([rows, k * (k - 1) / 2, 4], "a tensor is too large")?;
    params::product([rows, k, 4], "a tensor is too large")?;
    Ok((k as usize, rows as usize))
}

/// Scratch floats of `onnxc_svm_probability` for `k` classes.
pub fn scratch_floats(k: usize) -> usize {
    2 * k * k + k
}

/// `params`: `encode`'s blob `[k, rows]`; `ab`: `prob_a` then `prob_b`, one per pair
/// (k·(k−1)/2 each, pairs (i, j), i < j, in order); `scores`: `rows` × pairs decision
/// values; `p`: `rows` × k probabilities out. `scratch`: `scratch_floats(k)` floats.
/// Returns `ONNXC_ERR_PARAMS`, touching nothing, when the blob is not valid.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); the other pointers hold the elements
/// described.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_svm_probability(
    params: *const i64,
    ab: *const f32,
    scores: *const f32,
    p: *mut f32,
    scratch: *mut f32,
) -> Status {
    let (k, rows) = params::decode_blob!(params, decode);
    // SAFETY: the caller's contract.
    unsafe {
        let pairs = k * (k - 1) / 2;
        let a = std::slice::from_raw_parts(ab, pairs);
        let b = std::slice::from_raw_parts(ab.add(pairs), pairs);
        let scratch = std::slice::from_raw_parts_mut(scratch, scratch_floats(k));
        for row in 0..rows {
            let s = std::slice::from_raw_parts(scores.add(row * pairs), pairs);
            let out = std::slice::from_raw_parts_mut(p.add(row * k), k);
            probability(k, s, a, b, out, scratch);
        }
    }
    ONNXC_OK
}

fn logistic(v: f32) -> f32 {
    let e = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 { 1.0 - e } else { e }
}

/// One row: the pairwise probabilities `r`, the matrix `q` and `q·p` live in `scratch`
/// (2·k·k + k floats).
pub fn probability(k: usize, s: &[f32], a: &[f32], b: &[f32], p: &mut [f32], scratch: &mut [f32]) {
    let (r, rest) = scratch.split_at_mut(k * k);
    let (q, rest) = rest.split_at_mut(k * k);
    let q_p = &mut rest[..k];
    q.fill(0.0);
    let mut index = 0;
    for i in 0..k {
        for j in i + 1..k {
            let v = 1.0 - logistic(s[index] * a[index] + b[index]);
            let v = v.clamp(1.0e-7, 1.0 - 1.0e-7);
            r[i * k + j] = v;
            r[j * k + i] = 1.0 - v;
            index += 1;
        }
        r[i * k + i] = 0.0;
    }
    for i in 0..k {
        p[i] = 1.0 / k as f32;
        for j in 0..i {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = q[j * k + i];
        }
        for j in i + 1..k {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    let eps = 0.005 / k as f32;
    for _ in 0..100 {
        let mut pqp = 0f32;
        for i in 0..k {
            q_p[i] = 0.0;
            for j in 0..k {
                q_p[i] += q[i * k + j] * p[j];
            }
            pqp += p[i] * q_p[i];
        }
        let mut max_error = 0f32;
        for &v in q_p.iter() {
            let e = (v - pqp).abs();
            if e > max_error {
                max_error = e;
            }
        }
        if max_error < eps {
            break;
        }
        for i in 0..k {
            let diff = (-q_p[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * q_p[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                q_p[j] = (q_p[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three classes whose pairwise decisions agree: the coupled probabilities sum to 1 and
    /// rank the classes as the pairs do.
    #[test]
    fn coupled_probabilities_are_a_distribution() {
        let k = 3;
        // Pairs (0,1), (0,2), (1,2): class 0 beats both, class 1 beats 2.
        let scores = [-2.0f32, -3.0, -1.0];
        let ab = [1.0f32, 1.0, 1.0, 0.0, 0.0, 0.0];
        let params = encode(k as i64, 1);
        let mut p = [0f32; 3];
        let mut scratch = [0f32; 21];
        // SAFETY: params is a sealed blob; ab, scores, p and scratch hold what k = 3 requires
        // (21 scratch floats).
        let status = unsafe {
            onnxc_svm_probability(
                params.as_ptr(),
                ab.as_ptr(),
                scores.as_ptr(),
                p.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(status, ONNXC_OK);
        let sum: f32 = p.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{p:?}");
        assert!(p[0] > p[1] && p[1] > p[2], "{p:?}");
        // Two classes: the coupled value is the pair's own probability.
        let mut q = [0f32; 2];
        let mut scratch2 = [0f32; 10];
        probability(2, &[-1.5], &[1.0], &[0.2], &mut q, &mut scratch2);
        let want = 1.0 - logistic(-1.5 + 0.2);
        assert!(
            (q[0] - want).abs() < 1e-4 && (q[0] + q[1] - 1.0).abs() < 1e-6,
            "{q:?}"
        );
    }

    /// Corrupt blobs are refused by `decode` and by the entry point, which then writes
    /// nothing.
    #[test]
    fn refuses_corrupt_blobs() {
        let bad = [
            params::seal([3]),
            params::seal([3, 1, 0]),
            encode(0, 1),
            encode(-3, 1),
            encode(MAX_CLASSES + 1, 1),
            encode(3, -1),
            encode(3, 1 << 40),
            encode(MAX_CLASSES, 1 << 31),
        ];
        let (ab, scores) = ([1f32; 6], [0f32; 3]);
        let mut p = [4f32; 3];
        let mut scratch = [0f32; 21];
        for (i, b) in bad.iter().enumerate() {
            assert!(decode(b).is_err(), "case {i}");
            // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
            let status = unsafe {
                onnxc_svm_probability(
                    b.as_ptr(),
                    ab.as_ptr(),
                    scores.as_ptr(),
                    p.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS, "case {i}");
        }
        assert_eq!(p, [4.0; 3], "the output was written");
    }
}
