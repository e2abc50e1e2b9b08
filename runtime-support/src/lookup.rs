//! Byte table lookup: `y[e] = table[row(e)][x[e] ^ flip]` over 8-bit tensors, the table one
//! 256-entry row per channel (or one for the whole tensor). This is how a quantized model's
//! maps of one 8-bit operand run once the schedule tabulates them (`schedule::lut` in the
//! compiler): a requantization, an activation or a BatchNorm between a dequantization and a
//! quantization. The tensor is `planes` runs of `inner` elements; plane `p` reads table row
//! `p % rows`. `flip` is 0x80 for int8 keys (the table starts at -128), else 0.
//!
//! AVX-512 VBMI looks 64 bytes up with two `vpermi2b` (one per half of the row) and a
//! blend on the key's top bit; other CPUs read the table byte by byte. Both give the
//! table's bytes, so every CPU computes the same result. Planes are split over the run's
//! threads.

use crate::par::{Par, Threads};

/// Entries of a table row.
pub const ROW: usize = 256;

/// Runs the lookup of `planes · inner` bytes.
///
/// # Safety
/// `x` and `y` hold `planes · inner` bytes, `table` `rows · 256` (`rows ≥ 1`).
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
pub unsafe fn lookup_u8(
    x: *const u8,
    table: *const u8,
    y: *mut u8,
    planes: usize,
    rows: usize,
    inner: usize,
    flip: u8,
    par: Par,
) {
    // SAFETY: forwarded.
    unsafe { lookup_on(Tier::detect(), x, table, y, planes, rows, inner, flip, par) }
}

/// The implementations; both give the table's bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Vbmi,
}

impl Tier {
    /// The best tier this CPU runs (capped by `ONNXC_RUNTIME_ISA`).
    pub(crate) fn detect() -> Tier {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::avx512() && std::is_x86_feature_detected!("avx512vbmi") {
            return Tier::Vbmi;
        }
        Tier::Portable
    }
}

/// `lookup_u8` on the given tier (tests run every tier the CPU has).
///
/// # Safety
/// As `lookup_u8`; the CPU runs `tier`.
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
pub(crate) unsafe fn lookup_on(
    tier: Tier,
    x: *const u8,
    table: *const u8,
    y: *mut u8,
    planes: usize,
    rows: usize,
    inner: usize,
    flip: u8,
    par: Par,
) {
    if planes == 0 || inner == 0 || rows == 0 {
        return;
    }
    let (xa, ta, ya) = (x as usize, table as usize, y as usize);
    let job = |range: std::ops::Range<usize>, _worker: usize| {
        for p in range {
            let (xp, yp) = ((xa + p * inner) as *const u8, (ya + p * inner) as *mut u8);
            let row = (ta + (p % rows) * ROW) as *const u8;
            // SAFETY: plane p's `inner` bytes lie in `x` and `y`, its row in `table`
            // (caller); the CPU runs `tier` (caller).
            unsafe {
                match tier {
                    #[cfg(target_arch = "x86_64")]
                    Tier::Vbmi => plane_vbmi(xp, row, yp, inner, flip),
                    Tier::Portable => plane_portable(xp, row, yp, inner, flip),
                }
            }
        }
    };
    // SAFETY: each plane is written by one task.
    unsafe { par.for_ranges(planes, inner, &job) };
}

/// One plane, byte by byte.
///
/// # Safety
/// `x` and `y` hold `n` bytes, `row` 256.
unsafe fn plane_portable(x: *const u8, row: *const u8, y: *mut u8, n: usize, flip: u8) {
    // SAFETY: caller.
    let (x, row, y) = unsafe {
        (
            std::slice::from_raw_parts(x, n),
            &*(row as *const [u8; ROW]),
            std::slice::from_raw_parts_mut(y, n),
        )
    };
    for (o, &v) in y.iter_mut().zip(x) {
        *o = row[(v ^ flip) as usize];
    }
}

/// One plane, 64 bytes at a time (the tail by masked loads and stores).
///
/// # Safety
/// `x` and `y` hold `n` bytes, `row` 256; the CPU has AVX-512 F, BW and VBMI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn plane_vbmi(x: *const u8, row: *const u8, y: *mut u8, n: usize, flip: u8) {
    use std::arch::x86_64::*;
    // SAFETY: the row holds 256 bytes (caller).
    let t = unsafe {
        [
            _mm512_loadu_si512(row as *const _),
            _mm512_loadu_si512(row.add(64) as *const _),
            _mm512_loadu_si512(row.add(128) as *const _),
            _mm512_loadu_si512(row.add(192) as *const _),
        ]
    };
    let f = _mm512_set1_epi8(flip as i8);
    let look = |v: __m512i| {
        let k = _mm512_xor_si512(v, f);
        // Bits 0-6 pick within a half (bit 6: which of its two registers), bit 7 the half.
        let lo = _mm512_permutex2var_epi8(t[0], k, t[1]);
        let hi = _mm512_permutex2var_epi8(t[2], k, t[3]);
        _mm512_mask_blend_epi8(_mm512_movepi8_mask(k), lo, hi)
    };
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: bytes i .. i + 64 lie in `x` and `y` (caller).
        unsafe {
            let v = _mm512_loadu_si512(x.add(i) as *const _);
            _mm512_storeu_si512(y.add(i) as *mut _, look(v));
        }
        i += 64;
    }
    if i < n {
        let m: __mmask64 = (1u64 << (n - i)) - 1;
        // SAFETY: the masked lanes are bytes i .. n of `x` and `y` (caller); masked-off
        // lanes are not accessed.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(m, x.add(i) as *const i8);
            _mm512_mask_storeu_epi8(y.add(i) as *mut i8, m, look(v));
        }
    }
}

/// C entry point: `x` the `planes · inner` 8-bit keys, `table` `rows` rows of 256 bytes,
/// `y` the `planes · inner` results; `flip` 0x80 for int8 keys, else 0.
///
/// # Safety
/// The pointers hold what they are documented to; `rows ≥ 1` where `planes · inner > 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_lookup_u8(
    x: *const u8,
    table: *const u8,
    y: *mut u8,
    planes: i64,
    rows: i64,
    inner: i64,
    flip: i64,
    threads: *const Threads,
) {
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    // SAFETY: caller contract.
    unsafe {
        lookup_u8(
            x,
            table,
            y,
            planes.max(0) as usize,
            rows.max(0) as usize,
            inner.max(0) as usize,
            flip as u8,
            par,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::test_threads;

    fn tiers() -> Vec<Tier> {
        let mut t = vec![Tier::Portable];
        #[cfg(target_arch = "x86_64")]
        if Tier::detect() == Tier::Vbmi {
            t.push(Tier::Vbmi);
        }
        t
    }

    #[test]
    fn looks_every_byte_up_on_every_tier() {
        // Planes shorter than, equal to and longer than a vector, with and without a tail;
        // one row, and a row per channel of a batch of two.
        for (planes, rows, inner) in [(1, 1, 1000), (6, 3, 64), (8, 4, 131), (10, 5, 7)] {
            let n = planes * inner;
            let x: Vec<u8> = (0..n).map(|i| (i * 37 + i / 5) as u8).collect();
            let table: Vec<u8> = (0..rows * ROW).map(|i| (i * 91 + 13) as u8).collect();
            for flip in [0u8, 0x80] {
                let want: Vec<u8> = (0..n)
                    .map(|i| table[(i / inner % rows) * ROW + (x[i] ^ flip) as usize])
                    .collect();
                for tier in tiers() {
                    for (workers, threads) in test_threads() {
                        let mut y = vec![0u8; n];
                        // SAFETY: the buffers hold what the call reads and writes; the CPU
                        // runs `tier`; the pool is a test pool.
                        unsafe {
                            lookup_on(
                                tier,
                                x.as_ptr(),
                                table.as_ptr(),
                                y.as_mut_ptr(),
                                planes,
                                rows,
                                inner,
                                flip,
                                Par::from_raw(threads),
                            )
                        };
                        assert!(
                            y == want,
                            "{tier:?} on {workers} workers, flip {flip}, {planes}×{inner}"
                        );
                    }
                }
            }
        }
    }
}
