//! The machine's ceilings: FMA peak (one core and all cores), read bandwidth, VNNI peak.

use super::*;

/// Runs `n` steps of an FMA loop at the widest vector the CPU has (12 independent
/// accumulator chains, no memory traffic) and returns the floating-point operations done
/// (0 without FMA).
pub(crate) fn fma_loop(n: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // Twelve named accumulators so they live in registers (an array may not).
        macro_rules! chains {
            ($set:ident, $fma:ident, $n:expr) => {{
                let (a, b) = ($set(0.999_999), $set(1e-7));
                let (mut v0, mut v1, mut v2, mut v3, mut v4, mut v5) = (
                    $set(0.0),
                    $set(0.1),
                    $set(0.2),
                    $set(0.3),
                    $set(0.4),
                    $set(0.5),
                );
                let (mut v6, mut v7, mut v8, mut v9, mut v10, mut v11) = (
                    $set(0.6),
                    $set(0.7),
                    $set(0.8),
                    $set(0.9),
                    $set(1.0),
                    $set(1.1),
                );
                for _ in 0..$n {
                    v0 = $fma(v0, a, b);
                    v1 = $fma(v1, a, b);
                    v2 = $fma(v2, a, b);
                    v3 = $fma(v3, a, b);
                    v4 = $fma(v4, a, b);
                    v5 = $fma(v5, a, b);
                    v6 = $fma(v6, a, b);
                    v7 = $fma(v7, a, b);
                    v8 = $fma(v8, a, b);
                    v9 = $fma(v9, a, b);
                    v10 = $fma(v10, a, b);
                    v11 = $fma(v11, a, b);
                }
                black_box((v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11));
            }};
        }
        #[target_feature(enable = "avx512f")]
        unsafe fn fma512(n: usize) {
            chains!(_mm512_set1_ps, _mm512_fmadd_ps, n)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fma256(n: usize) {
            chains!(_mm256_set1_ps, _mm256_fmadd_ps, n)
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            unsafe { fma512(n) };
            n as f64 * 12.0 * 16.0 * 2.0
        } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA were detected just above.
            unsafe { fma256(n) };
            n as f64 * 12.0 * 8.0 * 2.0
        } else {
            0.0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = n;
        0.0
    }
}

/// Steps of one `fma_loop` run: about 8 ms.
pub(crate) const PEAK_STEPS: usize = 4_000_000;

/// Peak FMA throughput of one core (GFLOP/s): best of 15 runs (this VM's slow spells last
/// longer than a run).
pub(crate) fn measured_peak() -> f64 {
    peak_runs(1).into_iter().fold(0.0, f64::max)
}

/// 15 runs of the FMA loop on `threads` threads at once, each the GFLOP/s of them all: what
/// a compute-bound kernel split over that many workers can reach on this machine. On a VM,
/// two vCPUs may share a physical core's FMA units or a neighbour's load.
pub(crate) fn peak_runs(threads: usize) -> Vec<f64> {
    (0..15)
        .map(|_| {
            // Each thread times itself from the common start (a timing thread of its own
            // would compete with them for the cores).
            let start = std::sync::Barrier::new(threads);
            let runs: Vec<(f64, f64)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let t = Instant::now();
                            let flops = fma_loop(PEAK_STEPS);
                            (flops, t.elapsed().as_secs_f64())
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or((0.0, 1.0)))
                    .collect()
            });
            let flops: f64 = runs.iter().map(|r| r.0).sum();
            flops / runs.iter().map(|r| r.1).fold(0.0, f64::max) / 1e9
        })
        .collect()
}

/// Best read bandwidth (GB/s) of one core summing a buffer of `bytes` over and over: the
/// buffer's level of the cache hierarchy (L2, L3 or DRAM) bounds any kernel that streams
/// that many bytes per call.
pub(crate) fn read_bandwidth(bytes: usize) -> f64 {
    let buf = Buf::zeros(bytes / 4);
    let n = buf.len() / 128 * 128;
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sum(x: &[f32]) -> f32 {
        use std::arch::x86_64::*;
        let mut acc = [_mm256_setzero_ps(); 8];
        for chunk in x.chunks_exact(64) {
            for (u, a) in acc.iter_mut().enumerate() {
                // SAFETY: AVX2 is enabled here; chunk holds 64 floats and u·8 + 8 ≤ 64.
                *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(chunk.as_ptr().add(u * 8)) });
            }
        }
        let mut t = [0f32; 8];
        let s = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, a| _mm256_add_ps(s, *a));
        // SAFETY: AVX2 is enabled here; t holds 8 floats.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), s) };
        t.iter().sum()
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn sum(x: &[f32]) -> f32 {
        x.iter().sum()
    }
    let mut best = f64::MAX;
    let reps = (2e9 / bytes as f64).clamp(3.0, 300.0) as usize;
    for _ in 0..reps {
        let t = Instant::now();
        #[cfg(target_arch = "x86_64")]
        let r = if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            unsafe { sum(&buf[..n]) }
        } else {
            buf[..n].iter().sum()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let r = sum(&buf[..n]);
        black_box(r);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (n * 4) as f64 / best / 1e9
}

/// Peak uint8 × int8 multiply-accumulates of one core (GMAC/s): 12 independent `vpdpbusd`
/// chains (64 per instruction), no memory traffic; 0 without AVX-512 VNNI.
pub(crate) fn measured_int8_peak() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn chains(n: usize) {
            let (a, b) = (_mm512_set1_epi8(3), _mm512_set1_epi8(-2));
            let mut v = [_mm512_setzero_si512(); 12];
            for _ in 0..n {
                for x in v.iter_mut() {
                    *x = _mm512_dpbusd_epi32(*x, a, b);
                }
            }
            black_box(v);
        }
        if !std::is_x86_feature_detected!("avx512vnni")
            || !std::is_x86_feature_detected!("avx512bw")
        {
            return 0.0;
        }
        let n = 2_000_000;
        let mut best = 0f64;
        for _ in 0..15 {
            let t = Instant::now();
            // SAFETY: AVX-512 F, BW and VNNI were detected above.
            unsafe { chains(n) };
            best = best.max(n as f64 * 12.0 * 64.0 / t.elapsed().as_secs_f64() / 1e9);
        }
        best
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0.0
    }
}
