//! `ONNXC_GEMM_SHAPES`: `onnxc_sgemm` at chosen shapes and leading dimensions.

use super::*;

/// `ONNXC_GEMM_SHAPES=m,n,k,lda,ta,ldb,tb[;…]`: `onnxc_sgemm`'s path (A and B packed per
/// call) at chosen shapes and leading dimensions, e.g. attention's products read through head
/// views: `512,512,64,256,0,256,1;512,64,512,512,0,256,0`.
pub(crate) fn gemm_shapes(shapes: &str, peak: f64) {
    println!(
        "{:>5} {:>5} {:>5} {:>5} {:>2} {:>5} {:>2} {:>8} {:>6}",
        "m", "n", "k", "lda", "ta", "ldb", "tb", "GF/s", "%peak"
    );
    for shape in shapes.split(';').filter(|s| !s.is_empty()) {
        let v: Vec<usize> = shape
            .split(',')
            .map(|x| x.trim().parse().expect("a count"))
            .collect();
        let [m, n, k, lda, ta, ldb, tb] = v[..] else {
            panic!("ONNXC_GEMM_SHAPES wants m,n,k,lda,ta,ldb,tb per shape, got {shape}");
        };
        let (ta, tb) = (ta != 0, tb != 0);
        let a = data(if ta { k * lda } else { m * lda });
        let b = data(if tb { n * ldb } else { k * ldb });
        let mut c = Buf::zeros(m * n);
        let mut scratch =
            Buf::zeros(gemm::gemm_scratch(m, n, k, false).shared / 4 + gemm::scratch_len(n, false));
        let reps = (1 << 27) / (m * n * k) + 1;
        let secs = best_per_call(20, reps, |_| {
            // SAFETY: a, b and c hold the operands at these leading dimensions; scratch holds
            // gemm_scratch(m, n, k, false) for one worker.
            unsafe {
                gemm::gemm(
                    onnxc_runtime::par::Par::SEQ,
                    m,
                    n,
                    k,
                    a.as_ptr(),
                    lda,
                    ta,
                    BSource::Matrix {
                        b: b.as_ptr(),
                        ldb,
                        trans: tb,
                    },
                    c.as_mut_ptr(),
                    n,
                    &Epilogue::NONE,
                    scratch.as_mut_ptr(),
                )
            }
        });
        let g = gflops(m, n, k, secs);
        println!(
            "{m:>5} {n:>5} {k:>5} {lda:>5} {:>2} {ldb:>5} {:>2} {g:>8.1} {:>5.0}%",
            ta as u8,
            tb as u8,
            100.0 * g / peak
        );
    }
}
