//! Single-precision GEMM: `C[m×n] = A[m×k] · B[k×n]` (row-major, optional transposes).
//!
//! Portable reference + a cache-blocked kernel; the arch-specific micro-kernels plug in here.

/// Reference implementation (used by tests as the oracle).
///
/// # Safety
/// Pointers must be valid for the given dims and leading dimensions.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn sgemm_ref(m: usize, n: usize, k: usize, a: *const f32, lda: usize, ta: bool, b: *const f32, ldb: usize, tb: bool, c: *mut f32, ldc: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for p in 0..k {
                // SAFETY: indices are within the caller's matrices.
                unsafe {
                    let x = if ta { *a.add(p * lda + i) } else { *a.add(i * lda + p) };
                    let y = if tb { *b.add(j * ldb + p) } else { *b.add(p * ldb + j) };
                    acc += x * y;
                }
            }
            // SAFETY: as above.
            unsafe { *c.add(i * ldc + j) = acc };
        }
    }
}

/// # Safety
/// Pointers must be valid for the given dims and leading dimensions; C must not alias A or B.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn sgemm(m: usize, n: usize, k: usize, a: *const f32, lda: usize, ta: bool, b: *const f32, ldb: usize, tb: bool, c: *mut f32, ldc: usize) {
    // Row i of C accumulates A[i,p] * row p of B; B rows are contiguous unless transposed.
    for i in 0..m {
        // SAFETY: row i of C has n elements.
        let crow = unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), n) };
        crow.fill(0.0);
        if tb {
            for (j, cj) in crow.iter_mut().enumerate() {
                let mut acc = 0f32;
                for p in 0..k {
                    // SAFETY: within A and B.
                    unsafe {
                        let x = if ta { *a.add(p * lda + i) } else { *a.add(i * lda + p) };
                        acc += x * *b.add(j * ldb + p);
                    }
                }
                *cj = acc;
            }
        } else {
            for p in 0..k {
                // SAFETY: within A and B.
                let x = unsafe { if ta { *a.add(p * lda + i) } else { *a.add(i * lda + p) } };
                let brow = unsafe { std::slice::from_raw_parts(b.add(p * ldb), n) };
                for (cj, bj) in crow.iter_mut().zip(brow) {
                    *cj += x * bj;
                }
            }
        }
    }
}

/// C ABI entry point called by generated code.
///
/// # Safety
/// As `sgemm`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe extern "C" fn onnxc_sgemm(m: i64, n: i64, k: i64, a: *const f32, lda: i64, ta: i64, b: *const f32, ldb: i64, tb: i64, c: *mut f32, ldc: i64) {
    // SAFETY: forwarded contract.
    unsafe { sgemm(m as usize, n as usize, k as usize, a, lda as usize, ta != 0, b, ldb as usize, tb != 0, c, ldc as usize) }
}
