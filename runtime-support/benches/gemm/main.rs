//! GEMM throughput at 64³ … 1024³ (single thread): packed-A GEMM with B packed per call (the
//! general path) and with B packed ahead of time (weights). Prints GFLOP/s and the fraction
//! of this core's peak, measured first with a register-only FMA loop at the widest vector
//! width the CPU has (override with `ONNXC_PEAK_GFLOPS`).
//!
//! `cargo bench -p onnxc-runtime --bench gemm`. One variable selects one section instead,
//! each in a file of its own:
//! - `ONNXC_GEMM_TABLE=1`: the quick GEMM table only (this file);
//! - `ONNXC_QGEMM=1`: the integer product against the measured VNNI peak, and integer
//!   convolutions with uint8 outputs (`qgemm.rs`);
//! - `ONNXC_CONV_FILTER=cin,cout,hw[,k]`: chosen conv layers, `all`: every listed layer
//!   (`conv.rs`); with `ONNXC_CONV_COLD=1` the weights, with `ONNXC_CONV_COLD_INPUT=1` the
//!   input and residual come from beyond L2 as in a model; `ONNXC_CONV_RESIDUAL=1` adds a
//!   residual epilogue;
//! - `ONNXC_NCHWC=1` (`nchwc.rs`), `ONNXC_POOL=1` (`pool.rs`),
//!   `ONNXC_GEMM_SHAPES=m,n,k,lda,ta,ldb,tb[;…]` (`shapes.rs`),
//!   `ONNXC_ATTENTION=heads,m,n,d[,causal]` (`attention.rs`), `ONNXC_EXP` (`experiments.rs`).

mod attention;
mod common;
mod conv;
mod experiments;
mod nchwc;
mod peak;
mod pool;
mod qgemm;
mod shapes;

use attention::*;
use common::*;
use conv::*;
use experiments::*;
use nchwc::*;
use peak::*;
use pool::*;
use qgemm::*;
use shapes::*;

use criterion::{Criterion, Throughput, black_box};
use onnxc_runtime::gemm::{self, BSource, Epilogue, MR, pack};
use std::time::Instant;

fn main() {
    if std::env::var_os("ONNXC_QGEMM").is_some() {
        qgemm_table();
        qconv_table();
        return;
    }
    let peak: f64 = std::env::var("ONNXC_PEAK_GFLOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(measured_peak);
    println!("measured single-core peak: {peak:.1} GFLOP/s");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        // Alternating, so that both see the same spells of the machine.
        let (mut one, mut all) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            one.extend(peak_runs(1));
            all.extend(peak_runs(cores));
        }
        let (one, all) = (median(one), median(all));
        println!(
            "measured peak of {cores} threads at once (median run): {all:.1} GFLOP/s, {:.2}x one core's {one:.1}",
            all / one
        );
    }
    // What a memory-bound model (batch-1 MLP layers stream their weights) can reach.
    let bw: Vec<String> = [1.0f64, 3.2, 8.0, 64.0]
        .iter()
        .map(|&mb| {
            format!(
                "{mb} MB {:.0} GB/s",
                read_bandwidth((mb * 1048576.0) as usize)
            )
        })
        .collect();
    println!(
        "measured read bandwidth (one core, repeated reads): {}",
        bw.join(", ")
    );
    // The micro-kernel alone, panels in L1: the ceiling for everything below.
    {
        let kc: usize = std::env::var("KCB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(gemm::KC);
        let a = data(12 * kc);
        let b = data(32 * kc);
        let mut cb = Buf::zeros(12 * 32);
        // Best of 20 runs of 20 000 tiles.
        let n = 20_000;
        let mut tile = (0, 0);
        let mut secs = f64::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: a holds 12·kc floats, b 32·kc, cb 12 rows of 32.
                tile = unsafe {
                    gemm::microkernel_only(kc, a.as_ptr(), b.as_ptr(), cb.as_mut_ptr(), 32)
                };
            }
            secs = secs.min(t.elapsed().as_secs_f64());
        }
        black_box(cb[0]);
        if tile.0 > 0 {
            let g = gflops(tile.0 * n, tile.1, kc, secs);
            println!(
                "micro-kernel {}x{} (L1): {g:.1} GFLOP/s ({:.0}% of peak)",
                tile.0,
                tile.1,
                100.0 * g / peak
            );
        }
    }
    if std::env::var("ONNXC_EXP").as_deref() == Ok("pm") {
        orientation_experiment(peak);
        return;
    }
    if std::env::var_os("ONNXC_EXP").is_some() {
        experiment();
        return;
    }
    if std::env::var_os("ONNXC_NCHWC").is_some() {
        nchwc_layers();
        return;
    }
    if std::env::var_os("ONNXC_CONV_FILTER").is_some() {
        conv_layers(peak);
        return;
    }
    if std::env::var_os("ONNXC_POOL").is_some() {
        pool_layers();
        return;
    }
    if let Ok(shapes) = std::env::var("ONNXC_ATTENTION") {
        attention_shapes(&shapes, peak);
        return;
    }
    if let Ok(shapes) = std::env::var("ONNXC_GEMM_SHAPES") {
        gemm_shapes(&shapes, peak);
        return;
    }
    // ONNXC_GEMM_TABLE: only the quick GEMM table below, no conv sections and no criterion.
    let table_only = std::env::var_os("ONNXC_GEMM_TABLE").is_some();
    if !table_only {
        conv_shapes(peak);
        conv_layers(peak);
    }
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    println!(
        "{:>6} {:>12} {:>8} {:>14} {:>8}",
        "size", "B per call", "%peak", "B prepacked", "%peak"
    );
    for &s in &[64usize, 128, 256, 512, 1024] {
        let (m, n, k) = (s, s, s);
        let (_, b, ap, bp, mut cbuf, mut scratch) = operands(m, n, k);
        let mut run = |packed_b: bool| {
            packed_a_gemm((m, n, k), &ap, (&b, &bp, packed_b), &mut cbuf, &mut scratch)
        };
        // Quick direct measurement for the table: the best of 30 batches of ~3 ms per
        // variant, the two variants interleaved over ~0.2 s (a shared VM's slow spells last
        // longer than a batch, so a best of a few back-to-back batches can miss every fast one).
        let mut best = [f64::MAX; 2];
        let reps = (1 << 27) / (m * n * k) + 1;
        for _ in 0..30 {
            for (i, packed) in [false, true].into_iter().enumerate() {
                best[i] = best[i].min(best_per_call(1, reps, |_| run(packed)));
            }
        }
        let (g0, g1) = (gflops(m, n, k, best[0]), gflops(m, n, k, best[1]));
        println!(
            "{s:>6} {g0:>9.1} GF {:>7.0}% {g1:>11.1} GF {:>7.0}%",
            100.0 * g0 / peak,
            100.0 * g1 / peak
        );
        if table_only {
            continue;
        }
        let mut group = c.benchmark_group(format!("sgemm_{s}"));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.bench_function("b_per_call", |bch| bch.iter(|| run(false)));
        group.bench_function("b_prepacked", |bch| bch.iter(|| run(true)));
        group.finish();
    }
}
