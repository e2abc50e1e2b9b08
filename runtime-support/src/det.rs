//! Determinants of square matrices (ONNX Det): LU factorization with partial pivoting, in
//! float64 (`onnxc_det_f64`; the compiler casts other float types around it).

/// The determinant of each of the `batch` `n × n` row-major matrices of `x` into `y`;
/// `lu` is scratch of `n · n` values.
pub fn det_f64(x: &[f64], y: &mut [f64], n: usize, lu: &mut [f64]) {
    let nn = n * n;
    for (b, out) in y.iter_mut().enumerate() {
        let Some(m) = x.get(b * nn..(b + 1) * nn) else {
            return;
        };
        lu[..nn].copy_from_slice(m);
        let mut det = 1.0f64;
        for k in 0..n {
            let p = pivot_row(lu, n, k);
            if p != k {
                for c in 0..n {
                    lu.swap(k * n + c, p * n + c);
                }
                det = -det;
            }
            let pivot = lu[k * n + k];
            det *= pivot;
            if pivot == 0.0 {
                break;
            }
            for r in k + 1..n {
                let f = lu[r * n + k] / pivot;
                for c in k + 1..n {
                    lu[r * n + c] -= f * lu[k * n + c];
                }
            }
        }
        *out = det;
    }
}

/// The pivot of column `k` of the row-major `n × n` matrix `a`: the row at or below the
/// diagonal of largest magnitude (NaN never wins, so a NaN column keeps the diagonal).
pub(crate) fn pivot_row(a: &[f64], n: usize, k: usize) -> usize {
    let mut p = k;
    for r in k + 1..n {
        if a[r * n + k].abs() > a[p * n + k].abs() {
            p = r;
        }
    }
    p
}

/// C ABI entry point (`kernels::DET_F64`).
///
/// # Safety
/// `x` holds `batch · n · n` doubles, `y` `batch`, `scratch` `n · n`; `batch, n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_det_f64(
    x: *const f64,
    y: *mut f64,
    batch: i64,
    n: i64,
    scratch: *mut f64,
) {
    let (batch, n) = (batch.max(0) as usize, n.max(0) as usize);
    // SAFETY: the caller passes buffers of these lengths.
    let (x, y, lu) = unsafe {
        (
            std::slice::from_raw_parts(x, batch * n * n),
            std::slice::from_raw_parts_mut(y, batch),
            std::slice::from_raw_parts_mut(scratch, n * n),
        )
    };
    det_f64(x, y, n, lu)
}

#[cfg(test)]
mod tests {
    #[test]
    fn determinants() {
        // [[1, 2], [3, 4]] → -2; a permutation matrix → -1; a singular one → 0; 0×0 → 1.
        let x = [1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 1.0, 0.0, 1.0, 2.0, 2.0, 4.0];
        let mut y = [0.0; 3];
        let mut lu = [0.0; 4];
        super::det_f64(&x, &mut y, 2, &mut lu);
        assert_eq!(y, [-2.0, -1.0, 0.0]);
        let a = [2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 2.0];
        let mut d = [0.0];
        let mut lu = [0.0; 9];
        super::det_f64(&a, &mut d, 3, &mut lu);
        assert!((d[0] - 6.0).abs() < 1e-12, "{}", d[0]);
        let mut e = [0.0];
        super::det_f64(&[], &mut e, 0, &mut []);
        assert_eq!(e, [1.0]);
    }
}
