//! The blocked GEMM against the reference, over edge sizes, transposes, packed operands and
//! epilogues.

use super::*;

use crate::test_rand as rand;

/// C = op(A)·op(B) with the epilogue `ep` through the C entry points (`onnxc_sgemm`, or
/// `onnxc_sgemm_pb` on B packed first); A and B row-major unless transposed.
#[allow(clippy::too_many_arguments, reason = "GEMM dims and operands")]
fn run(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
    packed_b: bool,
    ep: &Epilogue,
) -> Vec<f32> {
    let (lda, ldb) = (if ta { m } else { k }, if tb { k } else { n });
    let clamp = [ep.lo, ep.hi];
    let mut bp = vec![0f32; packed_b_len(k, n)];
    let need = gemm_scratch(m, n, k, packed_b).rounded();
    // Sequentially and on 2, 3 and 5 threads: the same bits.
    crate::par::same_bits_on_every_pool(&format!("m={m} n={n} k={k}"), |workers, threads| {
        let mut got = vec![f32::NAN; m * n];
        let mut scratch = vec![0f32; (need.shared + workers * need.per_worker) / 4];
        // The operands both entry points take, around B's.
        macro_rules! sgemm {
            ($f:ident($($b:expr),*)) => {
                $f(
                    m as i64,
                    n as i64,
                    k as i64,
                    a.as_ptr(),
                    lda as i64,
                    ta as i64,
                    $($b,)*
                    got.as_mut_ptr(),
                    n as i64,
                    ep.bias_row,
                    ep.bias_col,
                    ep.residual,
                    clamp.as_ptr(),
                    scratch.as_mut_ptr(),
                    threads,
                )
            };
        }
        // SAFETY: a, b, got, bp and scratch are sized from m, n, k (scratch by gemm_scratch
        // for the workers); threads is a test pool's table or null.
        unsafe {
            if packed_b {
                pack::pack_b(b.as_ptr(), ldb, tb, k, n, bp.as_mut_ptr());
                sgemm!(onnxc_sgemm_pb(bp.as_ptr()));
            } else {
                sgemm!(onnxc_sgemm(b.as_ptr(), ldb as i64, tb as i64));
            }
        }
        got
    })
}

fn check(m: usize, n: usize, k: usize, ta: bool, tb: bool, packed_b: bool, with_ep: bool) {
    let a = rand(m * k, 1);
    let b = rand(k * n, 2);
    let resid = rand(m * n, 3);
    let bias_r = rand(m, 4);
    let bias_c = rand(n, 5);
    let (lda, ldb) = (if ta { m } else { k }, if tb { k } else { n });
    let mut want = vec![0f32; m * n];
    // SAFETY: a m·k, b k·n, want and resid m·n, bias_r m and bias_c n floats.
    unsafe {
        sgemm_ref(
            m,
            n,
            k,
            a.as_ptr(),
            lda,
            ta,
            b.as_ptr(),
            ldb,
            tb,
            want.as_mut_ptr(),
            n,
        )
    };
    let ep = if with_ep {
        for i in 0..m {
            for j in 0..n {
                let v = want[i * n + j] + bias_r[i] + bias_c[j] + resid[i * n + j];
                want[i * n + j] = v.clamp(-0.5, 3.0);
            }
        }
        Epilogue {
            bias_row: bias_r.as_ptr(),
            bias_col: bias_c.as_ptr(),
            residual: resid.as_ptr(),
            lo: -0.5,
            hi: 3.0,
        }
    } else {
        Epilogue::NONE
    };
    let got = run(m, n, k, &a, ta, &b, tb, packed_b, &ep);
    for i in 0..m * n {
        let tol = 1e-4 * (k as f32).sqrt().max(1.0);
        assert!(
            (got[i] - want[i]).abs() <= tol,
            "m={m} n={n} k={k} ta={ta} tb={tb} packed_b={packed_b} ep={with_ep}: [{i}] {} vs {}",
            got[i],
            want[i]
        );
    }
}

/// (m, n, k): every tile shape, remainder and blocking of the GEMM.
const EDGE_SIZES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (6, 16, 8),
    (7, 17, 3),
    (5, 15, 300),
    (13, 33, 257),
    (64, 64, 64),
    (1, 100, 70),
    (2, 37, 19),
    (100, 5, 9),
    (3, 2050, 4),
    (30, 97, 600),
    (16, 1024, 40),
    // 12-row tiles over a column remainder of 17-31 columns (two B panels), K over
    // several blocks.
    (24, 50, 70),
    (12, 20, 300),
    // Row remainders of 7-11 rows (8- and 12-row tiles storing part of their rows), after
    // several MC_A blocks; a rest of 16 rows as one block of two 8-row tiles.
    (20, 40, 50),
    (23, 64, 300),
    (80, 70, 33),
    (28, 40, 20),
    // The blocked packed layouts: several column blocks (NC) and K blocks at once, for
    // the GEMV (m ≤ 2) and the tiled paths.
    (1, 1100, 300),
    (2, 1030, 520),
    (40, 1100, 300),
];

#[test]
fn matches_reference_on_edge_sizes() {
    for &(m, n, k) in EDGE_SIZES {
        for ta in [false, true] {
            for tb in [false, true] {
                for packed in [false, true] {
                    check(m, n, k, ta, tb, packed, false);
                }
            }
        }
        check(m, n, k, false, false, false, true);
        check(m, n, k, true, true, false, true);
        check(m, n, k, false, true, true, true);
    }
}

#[test]
fn zero_depth_gives_the_epilogue_of_zero() {
    check(3, 5, 0, false, false, false, true);
    check(3, 5, 0, false, false, true, false);
    // The GEMV's one empty K block.
    for m in 1..=2 {
        check(m, 40, 0, false, false, true, true);
        check(m, 40, 0, false, false, false, false);
    }
}

/// A NaN reaching the epilogue (here through the residual) survives the clamp, as ONNX Relu
/// and Clip define it, in every tile shape: full, partial, 8-row, GEMV (the edge sizes).
#[test]
fn nan_goes_through_the_clamp() {
    for &(m, n, k) in EDGE_SIZES.iter().chain(&[(30, 97, 9)]) {
        for packed_b in [false, true] {
            let a = rand(m * k, 1);
            let b = rand(k * n, 2);
            let resid: Vec<f32> = rand(m * n, 3)
                .into_iter()
                .enumerate()
                .map(|(i, v)| if i % 7 == 3 { f32::NAN } else { v })
                .collect();
            let ep = Epilogue {
                bias_row: std::ptr::null(),
                bias_col: std::ptr::null(),
                residual: resid.as_ptr(),
                lo: 0.0,
                hi: 1.0,
            };
            let got = run(m, n, k, &a, false, &b, false, packed_b, &ep);
            for (i, v) in got.iter().enumerate() {
                assert_eq!(
                    v.is_nan(),
                    i % 7 == 3,
                    "m={m} n={n} k={k} packed_b={packed_b} [{i}]: {v}"
                );
            }
        }
    }
}

/// The GEMV panel walk (`gemv::GemvPanels`) with the given rows over one panel, stored
/// with no epilogue: the panel's sums.
#[derive(Clone)]
struct Gemv<'a> {
    m: usize,
    k: usize,
    x: &'a [f32],
    b: &'a [f32],
    stream: bool,
}

impl crate::simd::Walk for Gemv<'_> {
    type Out = [[f32; NR]; 2];
    unsafe fn run<S: crate::simd::Simd>(self, s: S) -> Self::Out {
        let mut out = [[f32::NAN; NR]; 2];
        // Row r of x at stride 2 from x[r].
        let w = gemv::GemvPanels {
            m: self.m,
            k: self.k,
            xs: [self.x.as_ptr(), self.x[1..].as_ptr()],
            xstride: 2,
            bp: self.b.as_ptr(),
            panels: 1,
            cols: NR,
            dst: kernel::Dst::plain(out.as_mut_ptr().cast(), NR, false),
            stream: self.stream,
        };
        // SAFETY: x holds 2k + 1 floats, b k rows of NR, out 2 rows of NR.
        unsafe { w.run(s) };
        out
    }
}

/// The GEMV panel walk on every implementation (the 4, 2 and 1 k steps per accumulator group
/// of 16, 8 and 4 lanes) against sums in f64, with k around the unrolling.
#[test]
fn gemv_panels_on_every_implementation() {
    for m in 1..=2 {
        for k in [0, 1, 2, 3, 4, 5, 7, 8, 9, 33, 300] {
            let x = rand(2 * k + 1, k as u64);
            let b = rand(k * NR, 7);
            let check = |isa: &str, out: [[f32; NR]; 2]| {
                for (r, row) in out.iter().enumerate().take(m) {
                    for (j, got) in row.iter().enumerate() {
                        let want: f64 = (0..k)
                            .map(|kx| x[r + 2 * kx] as f64 * b[kx * NR + j] as f64)
                            .sum();
                        assert!(
                            (*got as f64 - want).abs() <= 1e-5 * (1.0 + k as f64),
                            "{isa} m={m} k={k} [{r}][{j}]: {got} vs {want}"
                        );
                    }
                }
            };
            for stream in [false, true] {
                let w = Gemv {
                    m,
                    k,
                    x: &x,
                    b: &b,
                    stream,
                };
                // SAFETY: the walk's buffers are its own.
                unsafe { crate::simd::for_each_isa(w, check) };
            }
        }
    }
}

/// `pack::pack_b` puts every element of op(B) where `b_row_at` says and zeros in the
/// padding, across column blocks (n > NC), K blocks (k > KC) and both storage orders.
#[test]
fn pack_b_follows_the_panel_layout() {
    for &(k, n) in &[(1, 1), (7, 17), (64, 512), (300, 40), (257, 1100)] {
        for trans in [false, true] {
            let ldb = if trans { k + 3 } else { n + 5 };
            let rows = if trans { n } else { k };
            let b: Vec<f32> = (0..rows * ldb).map(|i| i as f32 + 1.0).collect();
            let mut dst = vec![f32::NAN; pack::packed_b_len(k, n)];
            // SAFETY: b holds the matrix at ldb; dst packed_b_len(k, n) floats.
            unsafe { pack::pack_b(b.as_ptr(), ldb, trans, k, n, dst.as_mut_ptr()) };
            for p in 0..n.div_ceil(NR) {
                for kx in 0..k {
                    let at = pack::b_row_at(n, k, kx, p);
                    for c in 0..NR {
                        let j = p * NR + c;
                        let want = match (j < n, trans) {
                            (false, _) => 0.0,
                            (true, false) => b[kx * ldb + j],
                            (true, true) => b[j * ldb + kx],
                        };
                        assert_eq!(dst[at + c], want, "k {k} n {n} trans {trans} ({kx}, {j})");
                    }
                }
            }
        }
    }
}
