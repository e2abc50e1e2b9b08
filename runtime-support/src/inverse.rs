//! Inverses of square matrices (com.microsoft Inverse): Gauss-Jordan elimination with
//! partial pivoting, in float64 (`onnxc_inverse_f64`; the compiler casts other float types
//! around it). A singular matrix gives infinities and NaNs, as a division by a zero pivot
//! does (onnxruntime's Eigen LU does likewise).

/// The inverse of each `n × n` row-major matrix of `x` into `y` (as many as `y` holds);
/// `work` is scratch of `n · n` values.
pub fn inverse_f64(x: &[f64], y: &mut [f64], n: usize, work: &mut [f64]) {
    let nn = n * n;
    if nn == 0 {
        return;
    }
    for (m, inv) in x.chunks_exact(nn).zip(y.chunks_exact_mut(nn)) {
        let a = &mut work[..nn];
        a.copy_from_slice(m);
        inv.fill(0.0);
        for k in 0..n {
            inv[k * n + k] = 1.0;
        }
        for k in 0..n {
            let p = crate::det::pivot_row(a, n, k);
            if p != k {
                for c in 0..n {
                    a.swap(k * n + c, p * n + c);
                    inv.swap(k * n + c, p * n + c);
                }
            }
            let d = 1.0 / a[k * n + k];
            for c in 0..n {
                a[k * n + c] *= d;
                inv[k * n + c] *= d;
            }
            for r in (0..n).filter(|&r| r != k) {
                let f = a[r * n + k];
                if f == 0.0 {
                    continue;
                }
                for c in 0..n {
                    a[r * n + c] -= f * a[k * n + c];
                    inv[r * n + c] -= f * inv[k * n + c];
                }
            }
        }
    }
}

/// C ABI entry point (`kernels::INVERSE_F64`).
///
/// # Safety
/// `x` and `y` hold `batch · n · n` doubles, `scratch` `n · n`; `batch, n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_inverse_f64(
    x: *const f64,
    y: *mut f64,
    batch: i64,
    n: i64,
    scratch: *mut f64,
) {
    let (batch, n) = (batch.max(0) as usize, n.max(0) as usize);
    // SAFETY: the caller passes buffers of these lengths.
    let (x, y, work) = unsafe {
        (
            std::slice::from_raw_parts(x, batch * n * n),
            std::slice::from_raw_parts_mut(y, batch * n * n),
            std::slice::from_raw_parts_mut(scratch, n * n),
        )
    };
    inverse_f64(x, y, n, work)
}

#[cfg(test)]
mod tests {
    use super::inverse_f64;

    /// `a · b` of two `n × n` matrices.
    fn product(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut p = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                p[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
            }
        }
        p
    }

    #[test]
    fn inverses_times_matrices_are_identities() {
        // A matrix that needs row swaps (a zero leading pivot), then a random 5×5 one.
        let a = [0.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0, 0.0, 1.0];
        let mut inv = [0.0; 9];
        inverse_f64(&a, &mut inv, 3, &mut [0.0; 9]);
        let id = product(&a, &inv, 3);
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((id[i * 3 + j] - want).abs() < 1e-12, "{id:?}");
            }
        }
        let mut s = 12345u64;
        let b: Vec<f64> = (0..50)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        let mut inv = vec![0.0; 50];
        inverse_f64(&b, &mut inv, 5, &mut [0.0; 25]);
        for (m, i) in b.chunks(25).zip(inv.chunks(25)) {
            let id = product(m, i, 5);
            for r in 0..5 {
                for c in 0..5 {
                    let want = if r == c { 1.0 } else { 0.0 };
                    assert!((id[r * 5 + c] - want).abs() < 1e-9, "{id:?}");
                }
            }
        }
    }

    #[test]
    fn a_singular_matrix_gives_non_finite_values() {
        let mut inv = [0.0; 4];
        inverse_f64(&[1.0, 2.0, 2.0, 4.0], &mut inv, 2, &mut [0.0; 4]);
        assert!(inv.iter().any(|v| !v.is_finite()), "{inv:?}");
        // 0×0: nothing to do.
        inverse_f64(&[], &mut [], 0, &mut []);
    }
}
