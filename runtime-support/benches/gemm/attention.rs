//! `ONNXC_ATTENTION`: the fused attention kernel.

use super::*;

/// `ONNXC_ATTENTION=heads,m,n,d[,causal][;…]`: the fused attention kernel
/// (`onnxc_attention_f32`, one thread) over head views of `[1, seq, heads·d]` with a
/// `[1, 1, 1, n]` padding mask, as an exported encoder's attention block reads them, or
/// (`causal` 1) an `[m, n]` causal mask of −inf; GFLOP/s count its two products whole.
pub(crate) fn attention_shapes(shapes: &str, peak: f64) {
    use onnxc_runtime::attention::{AttentionParams, attention_f32};
    println!(
        "{:>5} {:>5} {:>5} {:>4} {:>9} {:>8} {:>6}",
        "heads", "m", "n", "d", "ms", "GF/s", "%peak"
    );
    for shape in shapes.split(';').filter(|s| !s.is_empty()) {
        let v: Vec<usize> = shape
            .split(',')
            .map(|x| x.trim().parse().expect("a count"))
            .collect();
        let (h, m, n, d, causal) = match v[..] {
            [h, m, n, d] => (h, m, n, d, false),
            [h, m, n, d, c] => (h, m, n, d, c != 0),
            _ => panic!("ONNXC_ATTENTION wants heads,m,n,d[,causal] per shape, got {shape}"),
        };
        let view = |rows: usize| [rows * h * d, d, h * d, 1];
        let p = AttentionParams {
            batch: [1, h],
            m,
            n,
            dk: d,
            dv: d,
            q: view(m),
            k: view(n),
            v: view(n),
            bias: Some(if causal { [0, 0, n, 1] } else { [n, 0, 0, 1] }),
            out: view(m),
            zero_inf_rows: false,
        };
        let [sq, sk, sv, sb, so] = p.spans();
        let (q, k, vv, mut b) = (data(sq), data(sk), data(sv), data(sb));
        if causal {
            for i in 0..m {
                for j in i + 1..n {
                    b[i * n + j] = f32::NEG_INFINITY;
                }
            }
        }
        let mut out = Buf::zeros(so);
        let need = p.scratch().rounded();
        let mut scratch = Buf::zeros((need.shared + need.per_worker) / 4);
        let reps = (1 << 27) / (2 * h * m * n * d) + 1;
        let secs = best_per_call(20, reps, |_| {
            // SAFETY: every operand holds its span, scratch one worker's need.
            unsafe {
                attention_f32(
                    &p,
                    0.125,
                    1.0,
                    q.as_ptr(),
                    k.as_ptr(),
                    vv.as_ptr(),
                    b.as_ptr(),
                    out.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                    onnxc_runtime::par::Par::SEQ,
                )
            }
        });
        let g = gflops(h * m, n, 2 * d, secs);
        println!(
            "{h:>5} {m:>5} {n:>5} {d:>4} {causal:>6} {:>9.3} {g:>8.1} {:>5.0}%",
            secs * 1e3,
            100.0 * g / peak
        );
    }
}
