//! Single-precision GEMM: `C[m×n] = A[m×k] · B[k×n]` (+ epilogue), cache-blocked around a
//! 6×16 register-tile micro-kernel.
//!
//! Operands are read through *packed panels*: A as panels of `MR` rows, B as panels of `NR`
//! columns, zero-padded at the edges and ordered the way the blocked loops consume them (A:
//! `[K block][⌈m/MR⌉][kc][MR]`, B: `[column block][K block][panel][kc][NR]`; see
//! `pack::a_panel_at` and `pack::b_panel_at`), so packed weights stream sequentially. The compiler packs
//! constant operands (weights) at compile time with the same functions; other operands are
//! packed per call into caller-provided scratch. The packed layout does not depend on the CPU:
//! the AVX2+FMA micro-kernel and the portable one read the same panels.

mod gemv;
mod indirect;
mod kernel;
pub mod pack;
mod packed_a;
mod packed_b;
mod split;

use crate::par::{Par, ScratchNeed, Slots, Threads};
use std::ops::Range;

pub use gemv::gemv_packed_b;
pub use indirect::{
    gemm_indirect_b, indirect_b_available, indirect_cols, indirect_rows8, indirect_wide_tiles,
};
pub use kernel::apply_ep;
pub use pack::{MR, NR, packed_a_len, packed_b_len};
pub use packed_a::{gemm_a_rows, gemm_packed_a};
pub use packed_b::{APacker, gemm_packed_b, packed_b_scratch_len};
pub use split::{MIN_TASK_MACS, Split};

/// Cache blocking: K block (panels stay in L1), M block (A block in L2), N block (B block in L3).
/// KC is the largest K block; K is split into equal blocks (`k_block`), so that a K just above
/// a multiple of KC does not leave a sliver whose C tile loads and stores cost more than its
/// few multiply-adds.
pub const KC: usize = 256;
pub const MC: usize = 72;
/// Rows of C per block in `gemm_packed_a`: every column tile of the B block is computed for
/// 12 rows (one 12-row tile) before the next 12 rows start, so at most 12 rows of C (and of
/// a residual) are written at once. With 72-row blocks, 72 output rows `ldc` floats apart
/// were streamed concurrently, more than the hardware prefetchers follow: layers writing
/// outputs that are not in cache (every layer of a real model, rarely a benchmark loop) ran
/// up to 1.7x slower (ResNet-50's 64→256 1×1 convs with residual 1.9 → 1.15 ms, SqueezeNet's
/// 16→64 expands 0.16 → 0.085 ms). B panels are re-read from L2 per 12 rows instead of per
/// 72, which measured neutral on in-cache GEMMs (`benches/gemm/`). A rest of 16 rows is
/// one block (two 8-row tiles) rather than 12 + 4.
pub const MC_A: usize = 12;
pub const NC: usize = 1024;
/// Bytes of a B block's columns processed by every row block before the next columns
/// (`gemm_packed_a`), sized for L2.
const B_L2_BYTES: usize = 256 << 10;

/// Work applied to C after the product, while the tile is in registers/cache:
/// `C = clamp(acc + bias_row[m] + bias_col[n] + residual[m, n], lo, hi)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    /// Per-row bias (length m), or null.
    pub bias_row: *const f32,
    /// Per-column bias (length n), or null.
    pub bias_col: *const f32,
    /// A tensor laid out like C (same ldc) to add, or null.
    pub residual: *const f32,
    pub lo: f32,
    pub hi: f32,
}

impl Epilogue {
    pub const NONE: Epilogue = Epilogue {
        bias_row: std::ptr::null(),
        bias_col: std::ptr::null(),
        residual: std::ptr::null(),
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
    };

    /// # Safety
    /// `clamp` is null or points to `[lo, hi]`.
    pub unsafe fn from_parts(
        bias_row: *const f32,
        bias_col: *const f32,
        residual: *const f32,
        clamp: *const f32,
    ) -> Epilogue {
        // SAFETY: caller contract.
        let (lo, hi) = unsafe { crate::clamp_bounds(clamp) };
        Epilogue {
            bias_row,
            bias_col,
            residual,
            lo,
            hi,
        }
    }
}

/// How B is provided to the blocked loop.
pub enum BSource<'a> {
    /// Fully packed (`packed_b_len(k, n)` floats), e.g. weights packed at compile time.
    Packed(*const f32),
    /// A row-major (or transposed) matrix, packed block by block into scratch.
    Matrix {
        b: *const f32,
        ldb: usize,
        trans: bool,
    },
    /// Packs `rows` k..k+kc of columns n..n+nc into `dst` (panels of NR) — e.g. im2col.
    Custom(&'a dyn Fn(usize, usize, usize, usize, *mut f32)),
}

/// The K block for a depth of `k`: ⌈k / ⌈k / KC⌉⌉ rounded up to 8 (at most KC).
pub fn k_block(k: usize) -> usize {
    let blocks = k.div_ceil(KC).max(1);
    k.div_ceil(blocks).next_multiple_of(8).min(KC)
}

/// Whether the wide kernels read a row-major B in place instead of packing it. Packing costs
/// about one pass over B per call, which a product with few rows of A cannot amortize (B is
/// reused once per 12 rows). Reading in place streams kc rows of B at stride `ldb` instead,
/// which is as fast or faster for every shape measured (`benches/gemm/`; up to 1.4x for
/// 16-64 rows) unless the rows collide in the L1 cache: with 64-byte lines and 64 sets, rows
/// `ldb` floats apart fall into only 64 / gcd(ldb / 16, 64) sets when ldb is a multiple of
/// 16 (a 1024-wide B read in place ran at 43% of peak instead of 63% packed).
/// `m` is the number of rows of A.
fn read_b_in_place(kern: kernel::Kern, ldb: usize, m: usize, k: usize) -> bool {
    // Past a few hundred rows of A the one packing pass is amortized and aligned contiguous
    // panels win (measured 4-10% on 512-1000-row pointwise convs).
    if m > 256 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if kern == kernel::Kern::Avx512 || kern == kernel::Kern::Avx2Fma {
        let sets = if !ldb.is_multiple_of(16) {
            64
        } else {
            64 / gcd(ldb / 16, 64)
        };
        // The AVX2 tiles read one 64-byte row segment per k step: rows that are not 64-byte
        // aligned split every read over two lines, which a deep K block no longer keeps in
        // L1 (Zen 3, 1024→256 1×1 at 14×14, ldb 196: 88 → 83 GFLOP/s in place); shallow ones
        // still gain (16→64 at 55×55, ldb 3025: 54 → 62).
        if kern == kernel::Kern::Avx2Fma && !ldb.is_multiple_of(16) && k > 64 {
            return false;
        }
        return sets >= 16;
    }
    let _ = (kern, ldb, k);
    false
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Scratch floats `gemm` needs for the given B source and dims.
pub fn scratch_len(n: usize, b_packed: bool) -> usize {
    if b_packed {
        0
    } else {
        KC * NC.min(n.div_ceil(NR) * NR)
    }
}

/// General C = op(A) · op(B), split over `par`'s workers: packs A into the shared scratch
/// (the 16-column tiles read an untransposed A in place), and B (unless packed) block by
/// block into each worker's slot.
///
/// # Safety
/// As `gemm_packed_a`; `scratch` holds `gemm_scratch(m, n, k, b_packed)` for `par`'s workers.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    b: BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: *mut f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let b_packed = matches!(b, BSource::Packed(_));
    let (shared, slots) = gemm_scratch(m, n, k, b_packed).layout(scratch);
    if let (true, &BSource::Matrix { b, ldb, trans }) = (m <= 2, &b) {
        // SAFETY: the shared area holds packed_a_len(m, k) ≥ m·k floats.
        unsafe {
            gemv::gemv_matrix_b(
                par,
                m,
                n,
                k,
                a,
                lda,
                ta,
                (b, ldb, trans),
                c,
                ldc,
                ep,
                shared,
            )
        };
        return;
    }
    // SAFETY: the shared area holds the packed A, the slots the B blocks; the 16-column
    // tiles read a row-major A in place.
    unsafe {
        if !ta && kernel::wide(kernel::select()) == NR {
            gemm_a_rows(par, m, n, k, a, lda, b, c, ldc, ep, slots);
        } else {
            pack::pack_a(a, lda, ta, m, k, shared);
            gemm_packed_a(par, m, n, k, shared, b, c, ldc, ep, slots);
        }
    }
}

/// The scratch `gemm` needs (bytes): A packed, shared; a B block per worker unless B is
/// packed.
pub fn gemm_scratch(m: usize, n: usize, k: usize, b_packed: bool) -> ScratchNeed {
    ScratchNeed {
        shared: packed_a_len(m, k) * 4,
        per_worker: scratch_len(n, b_packed) * 4,
    }
}

/// Reference implementation (the oracle in tests): C = op(A)·op(B), then the epilogue.
///
/// # Safety
/// Pointers must be valid for the given dims and leading dimensions.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn sgemm_ref(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    b: *const f32,
    ldb: usize,
    tb: bool,
    c: *mut f32,
    ldc: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for p in 0..k {
                // SAFETY: indices are within the caller's matrices.
                unsafe {
                    let x = if ta {
                        *a.add(p * lda + i)
                    } else {
                        *a.add(i * lda + p)
                    };
                    let y = if tb {
                        *b.add(j * ldb + p)
                    } else {
                        *b.add(p * ldb + j)
                    };
                    acc += x * y;
                }
            }
            // SAFETY: as above.
            unsafe { *c.add(i * ldc + j) = acc };
        }
    }
}

/// C ABI: general GEMM, both operands packed per call into `scratch`
/// (`gemm_scratch(m, n, k, false)`), on the run's `threads` (null: one).
///
/// # Safety
/// As `gemm`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe extern "C" fn onnxc_sgemm(
    m: i64,
    n: i64,
    k: i64,
    a: *const f32,
    lda: i64,
    ta: i64,
    b: *const f32,
    ldb: i64,
    tb: i64,
    c: *mut f32,
    ldc: i64,
    bias_row: *const f32,
    bias_col: *const f32,
    residual: *const f32,
    clamp: *const f32,
    scratch: *mut f32,
    threads: *const Threads,
) {
    // SAFETY: clamp is null or two floats.
    let ep = unsafe { Epilogue::from_parts(bias_row, bias_col, residual, clamp) };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let bs = BSource::Matrix {
        b,
        ldb: ldb as usize,
        trans: tb != 0,
    };
    // SAFETY: forwarded contract.
    unsafe {
        gemm(
            par,
            m as usize,
            n as usize,
            k as usize,
            a,
            lda as usize,
            ta != 0,
            bs,
            c,
            ldc as usize,
            &ep,
            scratch,
        )
    }
}

/// C ABI: GEMM with B packed at compile time (`pack::pack_b`), on the run's `threads`.
///
/// # Safety
/// As `gemm`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe extern "C" fn onnxc_sgemm_pb(
    m: i64,
    n: i64,
    k: i64,
    a: *const f32,
    lda: i64,
    ta: i64,
    b_packed: *const f32,
    c: *mut f32,
    ldc: i64,
    bias_row: *const f32,
    bias_col: *const f32,
    residual: *const f32,
    clamp: *const f32,
    scratch: *mut f32,
    threads: *const Threads,
) {
    // SAFETY: clamp is null or two floats.
    let ep = unsafe { Epilogue::from_parts(bias_row, bias_col, residual, clamp) };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (m, n, k) = (m as usize, n as usize, k as usize);
    if m <= 2 {
        // Matrix-vector products stream the weights once.
        // SAFETY: forwarded contract.
        unsafe {
            gemv::gemv_packed_b(
                par,
                m,
                n,
                k,
                a,
                lda as usize,
                ta != 0,
                b_packed,
                c,
                ldc as usize,
                &ep,
            )
        };
        return;
    }
    // SAFETY: forwarded contract.
    unsafe {
        gemm(
            par,
            m,
            n,
            k,
            a,
            lda as usize,
            ta != 0,
            BSource::Packed(b_packed),
            c,
            ldc as usize,
            &ep,
            scratch,
        )
    }
}

#[cfg(test)]
mod tests;

/// The widest register-tile kernel alone on L1-resident panels (for the GEMM benchmark's
/// "micro-kernel" line): C[tile] (+)= A_panels · B_panels over `kc` steps. Returns the tile's
/// (rows, columns), or (0, 0) when this CPU has no wide kernel.
///
/// # Safety
/// `a` holds 12·kc floats, `b` 32·kc, `c` 12 rows of `ldc` ≥ 32.
#[doc(hidden)]
pub unsafe fn microkernel_only(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if kernel::select() == kernel::Kern::Avx512 {
        // SAFETY: caller contract.
        let bp = kernel::BPanels {
            b0: b,
            // SAFETY: b holds 32·kc = 2·NR·kc floats (the contract), so b + NR·kc is its second
            // panel.
            b1: unsafe { b.add(NR * kc) },
            step: NR,
        };
        // SAFETY: AVX-512 was selected (kernel::select checked the CPU); a holds 12·kc = 2·MR·kc
        // floats, b two NR·kc panels and c 12 rows of ldc ≥ 32 (the contract).
        unsafe { kernel::tile_wide12(kc, a, a.add(MR * kc), bp, kernel::Dst::plain(c, ldc, true)) };
        return (2 * MR, 2 * NR);
    }
    #[cfg(target_arch = "x86_64")]
    if kernel::select() == kernel::Kern::Avx2Fma {
        // SAFETY: caller contract (a 6 × 16 tile of the 12 × 32 C).
        unsafe {
            let d = kernel::Dst::plain(c, ldc, true);
            kernel::tile(kernel::Kern::Avx2Fma, kc, a, b, MR, NR, d)
        };
        return (MR, NR);
    }
    let _ = (kc, a, b, c, ldc);
    (0, 0)
}
