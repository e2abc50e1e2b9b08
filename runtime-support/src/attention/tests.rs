//! Fused attention against an f64 reference over layouts (contiguous heads, head views of
//! `[b, seq, heads·d]`, transposed keys), broadcast biases, blocks of queries and edge sizes;
//! the same bits on every thread count; blobs the decoder refuses.

use super::*;
use crate::test_rand as rand;

/// Strides of a `[b, h, rows, cols]` operand stored as contiguous `[b, h, rows, cols]`.
fn heads_first(h: usize, rows: usize, cols: usize) -> [usize; 4] {
    [h * rows * cols, rows * cols, cols, 1]
}

/// Strides of a head view of a contiguous `[b, rows, h·cols]` (an exporter's reshape to
/// `[b, rows, h, cols]` and transpose to `[b, h, rows, cols]`).
fn head_view(h: usize, rows: usize, cols: usize) -> [usize; 4] {
    [rows * h * cols, cols, h * cols, 1]
}

/// Strides of `[b, h, rows, cols]` stored transposed, as `[b, h, cols, rows]` (keys given
/// as Kᵀ).
fn transposed(h: usize, rows: usize, cols: usize) -> [usize; 4] {
    [h * rows * cols, rows * cols, 1, rows]
}

struct Case {
    p: AttentionParams,
    alpha: f32,
    beta: f32,
    /// The bias is an `[m, n]` causal mask shifted by this many keys (−inf past query
    /// `i + shift`), over random values; its strides must be `[0, 0, n, 1]`.
    causal: Option<usize>,
}

impl Case {
    fn new(batch: [usize; 2], m: usize, n: usize, dk: usize, dv: usize) -> Case {
        let h = batch[1];
        Case {
            p: AttentionParams {
                batch,
                m,
                n,
                dk,
                dv,
                q: heads_first(h, m, dk),
                k: heads_first(h, n, dk),
                v: heads_first(h, n, dv),
                bias: None,
                out: heads_first(h, m, dv),
                zero_inf_rows: false,
            },
            alpha: 1.0,
            beta: 1.0,
            causal: None,
        }
    }

    fn operands(&self) -> [Vec<f32>; 4] {
        let [sq, sk, sv, sb, _] = self.p.spans();
        let mut bias = rand(sb, 4);
        // Some masked positions, as a padding mask adds them.
        for (i, b) in bias.iter_mut().enumerate() {
            match self.causal {
                Some(shift) if i % self.p.n > i / self.p.n + shift => *b = f32::NEG_INFINITY,
                Some(_) => {}
                None if i % 7 == 3 => *b = -1e4,
                None => {}
            }
        }
        [rand(sq, 1), rand(sk, 2), rand(sv, 3), bias]
    }

    /// The output through the C entry point on `threads`.
    fn run(&self, workers: usize, threads: *const Threads) -> Vec<f32> {
        let [q, k, v, bias] = self.operands();
        let need = self.p.scratch().rounded();
        let mut scratch = vec![f32::NAN; (need.shared + workers * need.per_worker) / 4 + 1];
        let mut out = vec![f32::NAN; self.p.spans()[4]];
        let blob = self.p.encode();
        let ab = [self.alpha, self.beta];
        // SAFETY: every operand holds its span; scratch the planned need for the workers.
        let status = unsafe {
            onnxc_attention_f32(
                blob.as_ptr(),
                ab.as_ptr(),
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                if self.p.bias.is_some() {
                    bias.as_ptr()
                } else {
                    std::ptr::null()
                },
                out.as_mut_ptr(),
                scratch.as_mut_ptr(),
                threads,
            )
        };
        assert_eq!(status, crate::abi::ONNXC_OK);
        out
    }

    /// `softmax(β·(α·Q·Kᵀ + bias))·V` in f64, at the output's positions (NaN elsewhere).
    fn reference(&self) -> Vec<f64> {
        let p = &self.p;
        let [q, k, v, bias] = self.operands();
        let mut out = vec![f64::NAN; p.spans()[4]];
        for hd in 0..p.heads() {
            for i in 0..p.m {
                let t: Vec<f64> = (0..p.n)
                    .map(|j| {
                        let s: f64 = (0..p.dk)
                            .map(|c| q[p.at(p.q, hd, i, c)] as f64 * k[p.at(p.k, hd, j, c)] as f64)
                            .sum();
                        let b = p.bias.map_or(0.0, |b| bias[p.at(b, hd, i, j)] as f64);
                        self.beta as f64 * (self.alpha as f64 * s + b)
                    })
                    .collect();
                let mx = t.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                if p.zero_inf_rows && mx == f64::NEG_INFINITY {
                    for c in 0..p.dv {
                        out[p.at(p.out, hd, i, c)] = 0.0;
                    }
                    continue;
                }
                let e: Vec<f64> = t.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..p.dv {
                    out[p.at(p.out, hd, i, c)] = (0..p.n)
                        .map(|j| e[j] / sum * v[p.at(p.v, hd, j, c)] as f64)
                        .sum();
                }
            }
        }
        out
    }

    fn check(&self, what: &str) {
        let got = crate::par::same_bits_on_every_pool(&what, |w, t| self.run(w, t));
        let want = self.reference();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if w.is_nan() {
                continue;
            }
            assert!(
                (*g as f64 - w).abs() <= 2e-5 * (1.0 + w.abs()),
                "{what}: element {i}: {g} against {w}"
            );
        }
    }
}

#[test]
fn matches_the_reference() {
    // (batch, heads, m, n, dk, dv): one block, several with a partial last one, keys deeper
    // than a K block of the second product (n > 256), a single query and key.
    for &(b, h, m, n, dk, dv) in &[
        (1, 1, 1, 1, 1, 1),
        (1, 2, 5, 7, 3, 9),
        (2, 3, 37, 29, 16, 8),
        (1, 2, 130, 300, 64, 64),
        (1, 1, 64, 1030, 8, 24),
    ] {
        let mut c = Case::new([b, h], m, n, dk, dv);
        c.check(&format!("contiguous {b}x{h} m={m} n={n} dk={dk} dv={dv}"));
        // Head views of [b, seq, heads·d], keys stored transposed, a [b, 1, 1, n] padding
        // mask, the output written as [b, m, heads·dv], scaled scores.
        c.p.q = head_view(h, m, dk);
        c.p.k = transposed(h, n, dk);
        c.p.v = head_view(h, n, dv);
        c.p.out = head_view(h, m, dv);
        c.p.bias = Some([n, 0, 0, 1]);
        c.alpha = 0.125;
        c.check(&format!("views, padding mask {b}x{h} m={m} n={n}"));
        // A [m, n] mask shared by every head and a softmax scale.
        c.p.bias = Some([0, 0, n, 1]);
        c.alpha = 1.0;
        c.beta = 0.5;
        c.check(&format!("views, [m, n] mask {b}x{h} m={m} n={n}"));
        // Keys and values shared by the heads (multi-query), queries stored transposed.
        c.p.k = [n * dk, 0, dk, 1];
        c.p.v = [n * dv, 0, dv, 1];
        c.p.q = transposed(h, m, dk);
        c.check(&format!("shared keys {b}x{h} m={m} n={n}"));
    }
}

/// Causal masks: the keys every row of a block masks are skipped, the result unchanged.
#[test]
fn causal_masks() {
    for &(h, m, n, dk, shift) in &[
        (2, 200, 200, 32, 0),
        (1, 130, 300, 16, 170),
        (3, 7, 9, 4, 2),
    ] {
        let mut c = Case::new([1, h], m, n, dk, dk);
        c.p.bias = Some([0, 0, n, 1]);
        c.causal = Some(shift);
        c.alpha = 0.25;
        c.check(&format!("causal h={h} m={m} n={n} shift={shift}"));
    }
}

/// Fully masked queries (a bias row of −inf): NaN rows by default, zero rows when asked.
#[test]
fn fully_masked_rows() {
    for zero in [false, true] {
        let mut c = Case::new([1, 2], 9, 20, 8, 8);
        c.p.bias = Some([0, 0, 20, 1]);
        c.p.zero_inf_rows = zero;
        let mut bias = vec![0f32; c.p.spans()[3]];
        for j in 0..20 {
            bias[3 * 20 + j] = f32::NEG_INFINITY;
            bias[5 * 20 + j] = if j == 7 { 0.0 } else { f32::NEG_INFINITY };
        }
        let [q, k, v, _] = c.operands();
        let need = c.p.scratch().rounded();
        let mut scratch = vec![0f32; (need.shared + need.per_worker) / 4];
        let mut out = vec![f32::NAN; c.p.spans()[4]];
        // SAFETY: every operand holds its span, scratch one worker's need.
        unsafe {
            attention_f32(
                &c.p,
                1.0,
                1.0,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                bias.as_ptr(),
                out.as_mut_ptr(),
                scratch.as_mut_ptr(),
                Par::SEQ,
            )
        };
        for hd in 0..2 {
            for i in 0..9 {
                for col in 0..8 {
                    let y = out[c.p.at(c.p.out, hd, i, col)];
                    match i {
                        3 if zero => assert_eq!(y, 0.0),
                        3 => assert!(y.is_nan()),
                        // One key left: its value.
                        5 => assert_eq!(y, v[c.p.at(c.p.v, hd, 7, col)]),
                        _ => assert!(y.is_finite()),
                    }
                }
            }
        }
    }
}

#[test]
fn edge_sizes() {
    // No keys: zeros. No key columns: every score 0, the mean of the values. No queries or
    // no value columns: nothing to write.
    let mut c = Case::new([1, 2], 3, 0, 4, 5);
    assert!(c.run(1, std::ptr::null()).iter().all(|&y| y == 0.0));
    c = Case::new([2, 1], 4, 6, 0, 3);
    c.check("dk = 0");
    for (m, dv) in [(0, 4), (4, 0)] {
        assert!(
            Case::new([1, 1], m, 5, 4, dv)
                .run(1, std::ptr::null())
                .is_empty()
        );
    }
}

#[test]
fn refuses_bad_blobs() {
    let good = Case::new([1, 2], 8, 8, 4, 4).p.encode();
    assert!(AttentionParams::decode(&good).is_ok());
    for bad in [
        params::short_blob(&good),
        params::long_blob(&good),
        params::with_word(&good, 2, -1),
        params::with_word(&good, 6, 2),
        params::with_word(&good, 7, 2),
        // Q with neither rows nor columns contiguous.
        params::with_word(&good, 11, 5),
        // The output's columns apart.
        params::with_word(&good, 27, 2),
        params::with_word(&good, 0, i64::MAX / 2),
    ] {
        let mut out = [0f32; 1];
        let ab = [1.0f32, 1.0];
        let x = [0f32; 1];
        assert!(AttentionParams::decode(&bad).is_err(), "{bad:?}");
        // SAFETY: the kernel refuses the blob before reading any operand.
        let status = unsafe {
            onnxc_attention_f32(
                bad.as_ptr(),
                ab.as_ptr(),
                x.as_ptr(),
                x.as_ptr(),
                x.as_ptr(),
                std::ptr::null(),
                out.as_mut_ptr(),
                out.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, ONNXC_ERR_PARAMS);
    }
}
