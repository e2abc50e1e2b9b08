//! GEMM throughput at 64³ … 1024³ (single thread): packed-A GEMM with B packed per call (the
//! general path) and with B packed ahead of time (weights). Prints GFLOP/s and the fraction
//! of this core's peak (`ONNXC_PEAK_GFLOPS`, default 32 FLOP/cycle × 3.1 GHz for Zen 3).
//!
//! `cargo bench -p onnxc-runtime --bench gemm`

use criterion::{Criterion, Throughput, black_box};
use onnxc_runtime::gemm::{self, BSource, Epilogue, pack};
use std::time::Instant;

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect()
}

fn gflops(m: usize, n: usize, k: usize, secs: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / secs / 1e9
}

/// Convolution-shaped products (M = out channels, N = output pixels, K = C·kh·kw) from
/// ResNet-50, through the conv kernel's path (packed A, B packed per block).
fn conv_shapes(peak: f64) {
    println!("{:>6} {:>6} {:>6} {:>10} {:>6}", "M", "N", "K", "GFLOP/s", "%peak");
    for &(m, n, k) in &[(64usize, 12544usize, 147usize), (64, 3136, 576), (128, 784, 1152), (256, 196, 2304), (512, 49, 4608), (256, 3136, 64), (2048, 49, 512)] {
        let a = data(m * k);
        let b = data(k * n);
        let mut cbuf = vec![0f32; m * n];
        let mut ap = vec![0f32; pack::packed_a_len(m, k)];
        let mut scratch = vec![0f32; gemm::scratch_len(n, false)];
        unsafe { pack::pack_a(a.as_ptr(), k, false, m, k, ap.as_mut_ptr()) };
        let reps = (1 << 28) / (m * n * k) + 1;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                unsafe {
                    gemm::gemm_packed_a(m, n, k, ap.as_ptr(), BSource::Matrix { b: b.as_ptr(), ldb: n, trans: false }, cbuf.as_mut_ptr(), n, &Epilogue::NONE, scratch.as_mut_ptr());
                }
                black_box(cbuf[0]);
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        let g = gflops(m, n, k, best);
        println!("{m:>6} {n:>6} {k:>6} {g:>10.1} {:>5.0}%", 100.0 * g / peak);
    }
}

fn main() {
    let peak: f64 = std::env::var("ONNXC_PEAK_GFLOPS").ok().and_then(|v| v.parse().ok()).unwrap_or(32.0 * 3.1);
    conv_shapes(peak);
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    println!("{:>6} {:>12} {:>8} {:>14} {:>8}", "size", "B per call", "%peak", "B prepacked", "%peak");
    for &s in &[64usize, 128, 256, 512, 1024] {
        let (m, n, k) = (s, s, s);
        let a = data(m * k);
        let b = data(k * n);
        let mut cbuf = vec![0f32; m * n];
        let mut ap = vec![0f32; pack::packed_a_len(m, k)];
        let mut bp = vec![0f32; pack::packed_b_len(k, n)];
        let mut scratch = vec![0f32; gemm::scratch_len(n, false)];
        unsafe {
            pack::pack_a(a.as_ptr(), k, false, m, k, ap.as_mut_ptr());
            pack::pack_b(b.as_ptr(), n, false, k, n, bp.as_mut_ptr());
        }
        let mut run = |packed_b: bool| unsafe {
            let src = if packed_b { BSource::Packed(bp.as_ptr()) } else { BSource::Matrix { b: b.as_ptr(), ldb: n, trans: false } };
            gemm::gemm_packed_a(m, n, k, ap.as_ptr(), src, cbuf.as_mut_ptr(), n, &Epilogue::NONE, scratch.as_mut_ptr());
            black_box(cbuf[0]);
        };
        // Quick direct measurement for the table (best of several runs).
        let mut best = [f64::MAX; 2];
        for (i, packed) in [false, true].into_iter().enumerate() {
            let reps = (1 << 27) / (m * n * k) + 1;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..reps {
                    run(packed);
                }
                best[i] = best[i].min(t.elapsed().as_secs_f64() / reps as f64);
            }
        }
        let (g0, g1) = (gflops(m, n, k, best[0]), gflops(m, n, k, best[1]));
        println!("{s:>6} {g0:>9.1} GF {:>7.0}% {g1:>11.1} GF {:>7.0}%", 100.0 * g0 / peak, 100.0 * g1 / peak);
        let mut group = c.benchmark_group(format!("sgemm_{s}"));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.bench_function("b_per_call", |bch| bch.iter(|| run(false)));
        group.bench_function("b_prepacked", |bch| bch.iter(|| run(true)));
        group.finish();
    }
}
