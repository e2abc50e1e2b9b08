//! Micro-kernels: an MR×NR tile of C from a packed A panel and a packed B panel.
//! AVX2+FMA on x86-64 when the CPU has it (checked at run time), portable Rust otherwise.

use super::Epilogue;
use super::pack::{MR, NR};
use crate::simd::{self, Simd, Walk};

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Kern {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    /// AVX-512F: 6×32 tiles over two adjacent B panels (AVX2 for the rest).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// The best kernel for this CPU. (`is_x86_feature_detected!` caches its answer.)
pub fn select() -> Kern {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::avx512() {
            return Kern::Avx512;
        }
        if crate::isa::avx2() {
            return Kern::Avx2Fma;
        }
    }
    Kern::Portable
}

/// Columns one kernel call can cover (two B panels with AVX-512).
pub fn wide(kern: Kern) -> usize {
    match kern {
        #[cfg(target_arch = "x86_64")]
        Kern::Avx512 => 2 * NR,
        _ => NR,
    }
}

/// Where the wide kernels read B: 16 columns at `b0` and the next 16 at `b1` for each k step,
/// advancing `step` floats per step. Packed panels: `b1` is the next panel and `step` = NR.
/// A row-major B read in place: `b1 = b0 + 16` and `step` = ldb.
#[derive(Copy, Clone, Debug)]
pub struct BPanels {
    pub b0: *const f32,
    pub b1: *const f32,
    pub step: usize,
}

/// Software prefetch distance in k steps for packed B panels (one 64-byte row per step).
/// Packed panels are usually weights (the pixel-major conv) streamed from DRAM once per
/// run; 8 steps ahead left the kernel waiting on memory (a 7×7 pixel-major layer with cold
/// weights: 126-130 GFLOP/s at 8, 142 at 32, 156-158 at 64; warm: equal).
const PF_PACKED: usize = 64;

/// Where a wide kernel finds the two 16-float halves of B's row at each k step. Pointer
/// arithmetic only, so it inlines into the AVX-512 kernels whatever their target features.
pub trait BRows {
    /// The current step's halves.
    ///
    /// # Safety
    /// The source is valid for the current step.
    unsafe fn row(&self) -> (*const f32, *const f32);
    /// A row `steps` ahead to prefetch, or None when rows are not known ahead cheaply.
    fn ahead(&self, steps: usize) -> Option<(*const f32, *const f32)>;
    /// Moves to the next k step.
    ///
    /// # Safety
    /// Another step exists or the source is not read again.
    unsafe fn advance(&mut self);
}

impl BRows for BPanels {
    #[inline(always)]
    unsafe fn row(&self) -> (*const f32, *const f32) {
        (self.b0, self.b1)
    }
    #[inline(always)]
    fn ahead(&self, steps: usize) -> Option<(*const f32, *const f32)> {
        let d = if self.step == NR {
            PF_PACKED * NR
        } else {
            steps * self.step
        };
        Some((self.b0.wrapping_add(d), self.b1.wrapping_add(d)))
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.b0 = self.b0.wrapping_add(self.step);
        self.b1 = self.b1.wrapping_add(self.step);
    }
}

/// B row k at `base + offs[k]` (32 contiguous floats): an implicit-GEMM convolution reading
/// shifted views of its padded input.
#[derive(Copy, Clone, Debug)]
pub struct BOffsets {
    pub base: *const f32,
    pub offs: *const isize,
}

impl BRows for BOffsets {
    #[inline(always)]
    unsafe fn row(&self) -> (*const f32, *const f32) {
        // SAFETY: caller contract (offs has the current step's entry).
        let p = unsafe { self.base.offset(*self.offs) };
        (p, p.wrapping_add(16))
    }
    #[inline(always)]
    fn ahead(&self, _steps: usize) -> Option<(*const f32, *const f32)> {
        None
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.offs = self.offs.wrapping_add(1);
    }
}

/// A partial tile of up to 6 × 2·NR (mr rows, nr columns) with masked memory access.
///
/// # Safety
/// As `tile_wide`, with only the mr × nr part inside C; `b.b1` is read only when nr > NR.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_wide_partial(
    kc: usize,
    a: *const f32,
    b: BPanels,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    // Only the rows that exist are computed: a 1-row rest (49 = 4·12 + 1 positions of a
    // 7×7 map in the pixel-major conv) costs a twelfth of a 12-row tile, not half.
    // SAFETY: forwarded; select() checked AVX-512F.
    unsafe {
        match mr {
            1 => avx512::kernel_rows_partial::<1, 0>(
                kc, a, a, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            ),
            2 => avx512::kernel_rows_partial::<2, 0>(
                kc, a, a, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            ),
            3 | 4 => avx512::kernel_rows_partial::<4, 0>(
                kc, a, a, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            ),
            _ => avx512::kernel_rows_partial::<MR, 0>(
                kc, a, a, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            ),
        }
    }
}

/// An mr × nr tile (7 ≤ mr ≤ 12, nr ≤ 2·NR) from two consecutive A panels and zero-padded
/// B panels (or a row-major B read in place when nr = 2·NR), with masked stores: 8 rows
/// computed for mr ≤ 8, 12 otherwise.
///
/// # Safety
/// As `tile_wide_partial`, with two A panels (rows row..row+12, zero-padded past the
/// matrix) and the mr × nr part inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_wide12_partial(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: BPanels,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    debug_assert!(mr > MR && mr <= 2 * MR);
    // SAFETY: forwarded; select() checked AVX-512F.
    unsafe {
        if mr <= 8 {
            avx512::kernel_rows_partial::<8, 0>(
                kc, a0, a1, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            )
        } else {
            avx512::kernel_rows_partial::<12, 0>(
                kc, a0, a1, b.b0, b.b1, b.step, c, ldc, mr, nr, accumulate, ep, row, col,
            )
        }
    }
}

/// An 8 × nr tile (nr ≤ 2·NR) whose rows start `row % MR` rows into the A panel `a0` and
/// continue in `a1`, with masked stores.
///
/// # Safety
/// As `tile_wide_partial`; `row % MR` is 0 or 2; the 8 rows exist in the packed A; the
/// 8 × nr part lies inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile8_offset(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: BPanels,
    c: *mut f32,
    ldc: usize,
    nr: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    // SAFETY: forwarded; select() checked AVX-512F.
    unsafe {
        match row % MR {
            0 => avx512::kernel_rows_partial::<8, 0>(
                kc, a0, a1, b.b0, b.b1, b.step, c, ldc, 8, nr, accumulate, ep, row, col,
            ),
            2 => avx512::kernel_rows_partial::<8, 2>(
                kc, a0, a1, b.b0, b.b1, b.step, c, ldc, 8, nr, accumulate, ep, row, col,
            ),
            _ => unreachable!("8-row tiles start 0 or 2 rows into a panel"),
        }
    }
}

/// A full 12 × 2·NR tile from two consecutive A panels (`a1` = second) and 32 B columns.
///
/// # Safety
/// As `tile_wide`, for a full 12 × 32 tile.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_wide12(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: BPanels,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    // SAFETY: forwarded; select() checked AVX-512F.
    unsafe { avx512::kernel_12x32(kc, a0, a1, b, c, ldc, accumulate, ep, row, col) }
}

/// A full 12 × 32 tile (`rows12`) or 6 × 32 tile whose B row k is the 32 floats at
/// `base + offs[k]` (an implicit-GEMM convolution reading shifted views of its padded input);
/// no epilogue.
///
/// # Safety
/// `select()` returned `Kern::Avx512`; A panels hold kc steps; every `base + offs[k]` is
/// valid for 32 floats; the whole tile lies inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_indirect(
    rows12: bool,
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    base: *const f32,
    offs: *const isize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: forwarded.
    unsafe {
        let b = BOffsets { base, offs };
        if rows12 {
            avx512::kernel_12x32(kc, a0, a1, b, c, ldc, accumulate, None, 0, 0)
        } else {
            avx512::kernel_6x32(kc, a0, b, c, ldc, accumulate, None, 0, 0)
        }
    }
}

/// An 8 × 48 tile of an implicit-GEMM convolution (`gemm_indirect_b`'s 8-row layout): rows
/// `row0..row0+8` of the A matrix whose K block (6-row panels of `kc` steps each, see
/// `pack::a_panel_at`) starts at `a`, B row k at `base + offs[k]`.
///
/// # Safety
/// `select()` returned `Kern::Avx512`; `row0` is a multiple of 8 and rows row0..row0+8
/// exist in the packed A; every `base + offs[k]` is readable for 48 floats; the tile lies
/// inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_indirect_8x48(
    kc: usize,
    a: *const f32,
    row0: usize,
    base: *const f32,
    offs: *const isize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let b = BOffsets { base, offs };
    let q0 = a.wrapping_add((row0 / MR) * kc * MR);
    let q1 = q0.wrapping_add(kc * MR);
    // SAFETY: forwarded; rows row0%6.. of the first panel and the rest from the next.
    unsafe {
        match row0 % MR {
            0 => avx512::kernel_8x48_ind::<6>(kc, q0, q1, b, c, ldc, accumulate),
            2 => avx512::kernel_8x48_ind::<4>(kc, q0, q1, b, c, ldc, accumulate),
            4 => avx512::kernel_8x48_ind::<2>(kc, q0, q1, b, c, ldc, accumulate),
            _ => unreachable!("8-row tiles start at multiples of 8"),
        }
    }
}

/// A full 6 × 16 tile of an implicit-GEMM convolution with 256-bit vectors: B row k is
/// the 16 floats at `base + offs[k]`; no epilogue.
///
/// # Safety
/// `select()` returned `Kern::Avx2Fma` or `Kern::Avx512`; the A panel holds kc steps; every
/// `base + offs[k]` is readable for 16 floats; the 6 × 16 tile lies inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_indirect_6x16(
    kc: usize,
    a: *const f32,
    base: *const f32,
    offs: *const isize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: forwarded.
    unsafe { avx2::kernel_6x16_ind(kc, a, BOffsets { base, offs }, c, ldc, accumulate) }
}

/// A full 6 × 2·NR tile from one A panel and 32 B columns.
///
/// # Safety
/// As `tile`, for a full 6 × 32 tile; only for `Kern::Avx512`.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_wide(
    kc: usize,
    a: *const f32,
    b: BPanels,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    // SAFETY: forwarded; select() checked AVX-512F.
    unsafe { avx512::kernel_6x32(kc, a, b, c, ldc, accumulate, ep, row, col) }
}

#[inline]
pub fn apply_ep(mut v: f32, ep: &Epilogue, row: usize, col: usize, ldc: usize) -> f32 {
    // SAFETY: callers pass rows/cols inside the C described by the epilogue's pointers.
    unsafe {
        if !ep.bias_row.is_null() {
            v += *ep.bias_row.add(row);
        }
        if !ep.bias_col.is_null() {
            v += *ep.bias_col.add(col);
        }
        if !ep.residual.is_null() {
            v += *ep.residual.add(row * ldc + col);
        }
    }
    crate::clamp_ep(v, ep.lo, ep.hi)
}

/// Computes one tile: C[row.., col..][mr × nr] (+)= A_panel · B_panel, then the epilogue.
///
/// # Safety
/// Panels hold `kc` steps; the tile lies inside C.
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile(
    kern: Kern,
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    let full = mr == MR && nr == NR;
    if full {
        // SAFETY: forwarded.
        unsafe { run(kern, kc, a, b, c, ldc, accumulate, ep, row, col) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if kern == Kern::Avx2Fma || kern == Kern::Avx512 {
        // SAFETY: the kernel stores (and loads) only the mr × nr part of the tile.
        unsafe {
            avx2::kernel_6x16_partial(kc, a, b, NR, c, ldc, mr, nr, accumulate, ep, row, col)
        };
        return;
    }
    // Partial tile: compute a full tile into a local buffer, then copy the valid part.
    let mut buf = [0f32; MR * NR];
    if accumulate {
        for r in 0..mr {
            for j in 0..nr {
                // SAFETY: inside the tile.
                buf[r * NR + j] = unsafe { *c.add(r * ldc + j) };
            }
        }
    }
    // SAFETY: buf is a full MR×NR tile with ldc NR.
    unsafe { run(kern, kc, a, b, buf.as_mut_ptr(), NR, accumulate, None, 0, 0) };
    for r in 0..mr {
        for j in 0..nr {
            let mut v = buf[r * NR + j];
            if let Some(ep) = ep {
                v = apply_ep(v, ep, row + r, col + j, ldc);
            }
            // SAFETY: inside the tile.
            unsafe { *c.add(r * ldc + j) = v };
        }
    }
}

/// An mr × 16 tile (mr ≤ 6) with AVX2 whose B is a row-major matrix read in place: row k
/// of the tile's 16 columns at `b + k·ldb`.
///
/// # Safety
/// `select()` returned `Kern::Avx2Fma`; the A panel holds kc steps; B rows are readable for
/// 16 floats; the mr × 16 tile lies inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_b_in_place(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    // SAFETY: forwarded.
    unsafe {
        if mr == MR {
            avx2::kernel_6x16(kc, a, b, ldb, c, ldc, accumulate, ep, row, col)
        } else {
            avx2::kernel_6x16_partial(kc, a, b, ldb, c, ldc, mr, NR, accumulate, ep, row, col)
        }
    }
}

/// # Safety
/// As `tile`, for a full tile. With an epilogue, `row`/`col` locate the tile in C (and `c`
/// is C itself, so `ldc` also indexes the residual).
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
unsafe fn run(
    kern: Kern,
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    match kern {
        // SAFETY: forwarded.
        Kern::Portable => unsafe { portable(kc, a, b, c, ldc, accumulate, ep, row, col) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: select() checked the CPU features (AVX-512 implies AVX2 here).
        Kern::Avx2Fma | Kern::Avx512 => unsafe {
            avx2::kernel_6x16(kc, a, b, NR, c, ldc, accumulate, ep, row, col)
        },
    }
}

#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
unsafe fn portable(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    ep: Option<&Epilogue>,
    row: usize,
    col: usize,
) {
    let mut acc = [[0f32; NR]; MR];
    for k in 0..kc {
        // SAFETY: panels hold kc steps.
        let (ak, bk) = unsafe {
            (
                std::slice::from_raw_parts(a.add(k * MR), MR),
                std::slice::from_raw_parts(b.add(k * NR), NR),
            )
        };
        for (accr, x) in acc.iter_mut().zip(ak) {
            for (a, b) in accr.iter_mut().zip(bk) {
                *a += x * b;
            }
        }
    }
    for (r, accr) in acc.iter().enumerate() {
        for (j, a) in accr.iter().enumerate() {
            // SAFETY: inside the tile.
            unsafe {
                let p = c.add(r * ldc + j);
                let mut v = if accumulate { *p + a } else { *a };
                if let Some(ep) = ep {
                    v = apply_ep(v, ep, row + r, col + j, ldc);
                }
                *p = v;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    /// Software prefetch distances: `PF_B` in k steps of a B read in place (rows a row
    /// stride apart, which the hardware prefetchers do not follow across pages; packed
    /// panels use `PF_PACKED`), `PF_A` in floats of an A panel (64 k steps, 1.5 KB ahead).
    /// A is usually the weights, packed to stream sequentially (`pack::a_panel_at`), and in
    /// a real model they come from DRAM: with 96 floats ahead a 7×7 512→512 3×3 layer with
    /// cold weights ran at 131 GFLOP/s, at 384 at 156 (256: 152, 512: 157, 768: 135); the
    /// B distance gained up to 25% on pointwise convs with in-place B (ResNet-50 layers);
    /// on Zen 5 (4.6 GHz, so more cycles of L3 latency to cover) 16 steps instead of 8 ran
    /// its reducing 1×1 convs with the input coming from L3 10-30% faster (256→64 at 56×56
    /// 175 → 230 GFLOP/s, 512→128 at 28×28 200 → 254, `ONNXC_CONV_COLD_INPUT`), warm ones
    /// level; 12, 20, 24 and 32 measured no better.
    const PF_B: usize = 16;
    const PF_A: usize = 384;
    use super::{BOffsets, BRows, Epilogue, MR};
    use std::arch::x86_64::*;

    /// Adds C (when accumulating), applies the epilogue and stores full-width rows of a tile.
    /// A macro over literal row indices so every accumulator access is constant and the
    /// accumulator array stays in registers (a loop or a call would spill it to the stack,
    /// which costs as much as the k loop itself when K is small).
    macro_rules! store_tile {
        ($acc:ident, $c:expr, $ldc:expr, $accumulate:expr, $ep:expr, $row:expr, $col:expr; $($r:literal),*) => {{
            let (c, ldc, accumulate, ep, row, col): (*mut f32, usize, bool, Option<&Epilogue>, usize, usize) = ($c, $ldc, $accumulate, $ep, $row, $col);
            let (lo, hi) = match ep {
                Some(e) => (_mm512_set1_ps(e.lo), _mm512_set1_ps(e.hi)),
                None => (_mm512_setzero_ps(), _mm512_setzero_ps()),
            };
            let bias_col = match ep {
                Some(e) if !e.bias_col.is_null() => Some([_mm512_loadu_ps(e.bias_col.add(col)), _mm512_loadu_ps(e.bias_col.add(col + 16))]),
                _ => None,
            };
            $(
                {
                    let p = c.add($r * ldc);
                    let (mut v0, mut v1) = ($acc[$r][0], $acc[$r][1]);
                    if accumulate {
                        v0 = _mm512_add_ps(v0, _mm512_loadu_ps(p));
                        v1 = _mm512_add_ps(v1, _mm512_loadu_ps(p.add(16)));
                    }
                    if let Some(e) = ep {
                        if !e.bias_row.is_null() {
                            let bv = _mm512_set1_ps(*e.bias_row.add(row + $r));
                            v0 = _mm512_add_ps(v0, bv);
                            v1 = _mm512_add_ps(v1, bv);
                        }
                        if let Some(bc) = bias_col {
                            v0 = _mm512_add_ps(v0, bc[0]);
                            v1 = _mm512_add_ps(v1, bc[1]);
                        }
                        if !e.residual.is_null() {
                            let rp = e.residual.add((row + $r) * ldc + col);
                            v0 = _mm512_add_ps(v0, _mm512_loadu_ps(rp));
                            v1 = _mm512_add_ps(v1, _mm512_loadu_ps(rp.add(16)));
                        }
                        v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
                        v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
                    }
                    _mm512_storeu_ps(p, v0);
                    _mm512_storeu_ps(p.add(16), v1);
                }
            )*
        }};
    }

    /// Prefetches the residual rows a tile's epilogue will add (`rows` rows of 32 floats
    /// from `col`), so their loads at the store do not wait on L3 or DRAM: a residual is a
    /// tensor written layers earlier, its rows `ldc` apart (a stream per row, which the
    /// hardware prefetchers do not follow). Zen 5, residual and input cold
    /// (`ONNXC_CONV_COLD_INPUT`): 64→256 1×1 at 56×56 205 → 211 GFLOP/s.
    #[inline(always)]
    unsafe fn prefetch_residual(
        ep: Option<&Epilogue>,
        ldc: usize,
        row: usize,
        col: usize,
        rows: usize,
    ) {
        if let Some(e) = ep
            && !e.residual.is_null()
        {
            for r in 0..rows {
                let p = e.residual.wrapping_add((row + r) * ldc + col);
                // SAFETY: a prefetch does not fault.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(16) as *const i8);
                }
            }
        }
    }

    /// Accumulates `ROWS` rows (one broadcast each from A panels `a[0]`, `a[1]`; tile row r
    /// is row `O + r` of the two panels taken together) against one or two 16-column B panels: only the first when `two` is false (the
    /// second's FMAs would multiply padding).
    #[inline(always)]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    unsafe fn accumulate_partial<const ROWS: usize, const O: usize>(
        kc: usize,
        a: [*const f32; 2],
        b0: *const f32,
        b1: *const f32,
        bstep: usize,
        two: bool,
        acc: &mut [[__m512; 2]; ROWS],
    ) {
        let (mut p0, mut p1) = (b0, b1);
        let mut q = a;
        // SAFETY: (both loops) AVX-512F (this kernel's target features); panels hold kc steps; the
        // second B panel is read only when
        // `two`.
        unsafe {
            if two {
                for _ in 0..kc {
                    let x0 = _mm512_loadu_ps(p0);
                    let x1 = _mm512_loadu_ps(p1);
                    for (r, accr) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(*q[(O + r) / MR].add((O + r) % MR));
                        accr[0] = _mm512_fmadd_ps(av, x0, accr[0]);
                        accr[1] = _mm512_fmadd_ps(av, x1, accr[1]);
                    }
                    q = q.map(|p| p.wrapping_add(MR));
                    p0 = p0.add(bstep);
                    p1 = p1.wrapping_add(bstep);
                }
            } else {
                for _ in 0..kc {
                    let x0 = _mm512_loadu_ps(p0);
                    for (r, accr) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(*q[(O + r) / MR].add((O + r) % MR));
                        accr[0] = _mm512_fmadd_ps(av, x0, accr[0]);
                    }
                    q = q.map(|p| p.wrapping_add(MR));
                    p0 = p0.add(bstep);
                }
            }
        }
    }

    /// Adds C (when accumulating), applies the epilogue and stores the mr × nr part of a
    /// partial tile with masked accesses.
    #[inline(always)]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    unsafe fn store_partial(
        acc: &mut [[__m512; 2]],
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let m0: __mmask16 = if nr >= 16 {
            0xFFFF
        } else {
            ((1u32 << nr) - 1) as u16
        };
        let m1: __mmask16 = if nr >= 32 {
            0xFFFF
        } else if nr > 16 {
            ((1u32 << (nr - 16)) - 1) as u16
        } else {
            0
        };
        // SAFETY: masked accesses stay inside the mr × nr part of C and its epilogue operands.
        unsafe {
            let (lo, hi, bias_col) = match ep {
                Some(e) => (
                    _mm512_set1_ps(e.lo),
                    _mm512_set1_ps(e.hi),
                    if e.bias_col.is_null() {
                        None
                    } else {
                        Some([
                            _mm512_maskz_loadu_ps(m0, e.bias_col.add(col)),
                            _mm512_maskz_loadu_ps(m1, e.bias_col.add(col + 16)),
                        ])
                    },
                ),
                None => (_mm512_setzero_ps(), _mm512_setzero_ps(), None),
            };
            for (r, accr) in acc.iter_mut().enumerate().take(mr) {
                let p = c.add(r * ldc);
                if accumulate {
                    accr[0] = _mm512_add_ps(accr[0], _mm512_maskz_loadu_ps(m0, p));
                    accr[1] = _mm512_add_ps(accr[1], _mm512_maskz_loadu_ps(m1, p.add(16)));
                }
                if let Some(e) = ep {
                    if !e.bias_row.is_null() {
                        let bv = _mm512_set1_ps(*e.bias_row.add(row + r));
                        accr[0] = _mm512_add_ps(accr[0], bv);
                        accr[1] = _mm512_add_ps(accr[1], bv);
                    }
                    if let Some(bc) = bias_col {
                        accr[0] = _mm512_add_ps(accr[0], bc[0]);
                        accr[1] = _mm512_add_ps(accr[1], bc[1]);
                    }
                    if !e.residual.is_null() {
                        let rp = e.residual.add((row + r) * ldc + col);
                        accr[0] = _mm512_add_ps(accr[0], _mm512_maskz_loadu_ps(m0, rp));
                        accr[1] = _mm512_add_ps(accr[1], _mm512_maskz_loadu_ps(m1, rp.add(16)));
                    }
                    accr[0] = _mm512_min_ps(hi, _mm512_max_ps(lo, accr[0]));
                    accr[1] = _mm512_min_ps(hi, _mm512_max_ps(lo, accr[1]));
                }
                _mm512_mask_storeu_ps(p, m0, accr[0]);
                _mm512_mask_storeu_ps(p.add(16), m1, accr[1]);
            }
        }
    }

    /// `ROWS` (6, 8 or 12) rows from one or two A panels, starting `O` rows into `a0`, × up to
    /// 32 columns; rows ≥ mr are computed but not stored, columns ≥ nr masked. 6 rows: any
    /// partial tile of one panel (`a1` unused). 8 rows at O = 0 or 2: the last 16 rows of
    /// a block of 12·i + 16 rows (64 rows as 12+12+12+12+8+8 rather than five 12-row tiles
    /// and a 4-row one). 8 and 12 rows: the column remainder of a product with a
    /// 12-row tile's worth of rows (12 rather than 6 broadcasts per B load, and 12 FMAs,
    /// not 24, when nr ≤ 16) and a row remainder of 7-11 rows (one tile instead of a 6-row
    /// tile and a partial one, each at half the FMAs per load).
    ///
    /// # Safety
    /// CPU has AVX-512F; A panels hold kc steps, B panels kc steps `bstep` floats apart
    /// (zero-padded, the second read only when nr > 16); the mr × nr part lies inside C.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_rows_partial<const ROWS: usize, const O: usize>(
        kc: usize,
        a0: *const f32,
        a1: *const f32,
        b0: *const f32,
        b1: *const f32,
        bstep: usize,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
        // SAFETY: caller contract.
        unsafe {
            accumulate_partial::<ROWS, O>(kc, [a0, a1], b0, b1, bstep, nr > 16, &mut acc);
            store_partial(&mut acc, c, ldc, mr, nr, accumulate, ep, row, col);
        }
    }

    /// 12×32 tile: 24 zmm accumulators over two A panels; per k step two B loads and twelve
    /// broadcasts feed 24 FMAs.
    ///
    /// # Safety
    /// CPU has AVX-512F; A panels hold kc steps and `b` yields kc valid rows of 32 floats; the
    /// 12×32 tile lies inside C.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_12x32<B: BRows>(
        kc: usize,
        a0: *const f32,
        a1: *const f32,
        mut b: B,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; 2 * MR];
        let (mut q0, mut q1) = (a0, a1);
        // SAFETY: prefetches only.
        unsafe { prefetch_residual(ep, ldc, row, col, 2 * MR) };
        for _ in 0..kc {
            // SAFETY: panels hold kc steps.
            unsafe {
                if let Some((f0, f1)) = b.ahead(PF_B) {
                    _mm_prefetch::<_MM_HINT_T0>(f0 as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(f1 as *const i8);
                }
                _mm_prefetch::<_MM_HINT_T0>(q0.wrapping_add(PF_A) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(q1.wrapping_add(PF_A) as *const i8);
                let (p0, p1) = b.row();
                let x0 = _mm512_loadu_ps(p0);
                let x1 = _mm512_loadu_ps(p1);
                #[allow(clippy::needless_range_loop, reason = "rows r and MR + r, as below")]
                for r in 0..MR {
                    let av = _mm512_set1_ps(*q0.add(r));
                    acc[r][0] = _mm512_fmadd_ps(av, x0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(av, x1, acc[r][1]);
                }
                for r in 0..MR {
                    let av = _mm512_set1_ps(*q1.add(r));
                    acc[MR + r][0] = _mm512_fmadd_ps(av, x0, acc[MR + r][0]);
                    acc[MR + r][1] = _mm512_fmadd_ps(av, x1, acc[MR + r][1]);
                }
                q0 = q0.add(MR);
                q1 = q1.add(MR);
                b.advance();
            }
        }
        // SAFETY: the tile and epilogue operands are in bounds (caller contract).
        unsafe {
            store_tile!(acc, c, ldc, accumulate, ep, row, col; 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
        }
    }

    /// 8×48 tile of an implicit-GEMM convolution: B row k is the 48 floats at
    /// `b.base + b.offs[k]`, A rows come from the 6-row panels at `q0` (its last `S` rows)
    /// and `q1` (its first `8 - S` rows). Per k step three B loads and eight broadcasts feed
    /// 24 FMAs — fewer loads per FMA than 12×32, and whole tiles for 8·i output channels
    /// (32 channels take 4 tiles instead of three 12-row tiles with 4 rows wasted). No
    /// epilogue.
    ///
    /// # Safety
    /// CPU has AVX-512F; both A panels hold kc steps; every `base + offs[k]` is readable for
    /// 48 floats; the 8 × 48 tile lies inside C.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_8x48_ind<const S: usize>(
        kc: usize,
        q0: *const f32,
        q1: *const f32,
        mut b: BOffsets,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 3]; 8];
        let (mut p0, mut p1) = (q0.wrapping_add(MR - S), q1);
        for _ in 0..kc {
            // SAFETY: panels hold kc steps; the B row is readable for 48 floats.
            unsafe {
                let (x, _) = b.row();
                let xs = [
                    _mm512_loadu_ps(x),
                    _mm512_loadu_ps(x.add(16)),
                    _mm512_loadu_ps(x.add(32)),
                ];
                for (r, accr) in acc.iter_mut().enumerate() {
                    let av = if r < S {
                        _mm512_set1_ps(*p0.add(r))
                    } else {
                        _mm512_set1_ps(*p1.add(r - S))
                    };
                    for j in 0..3 {
                        accr[j] = _mm512_fmadd_ps(av, xs[j], accr[j]);
                    }
                }
                p0 = p0.add(MR);
                p1 = p1.wrapping_add(MR);
                b.advance();
            }
        }
        // SAFETY: the tile lies inside C.
        unsafe {
            for (r, accr) in acc.iter().enumerate() {
                let p = c.add(r * ldc);
                for (j, v) in accr.iter().enumerate() {
                    let q = p.add(16 * j);
                    let v = if accumulate {
                        _mm512_add_ps(*v, _mm512_loadu_ps(q))
                    } else {
                        *v
                    };
                    _mm512_storeu_ps(q, v);
                }
            }
        }
    }

    /// 6×32 tile: 12 zmm accumulators; per k step two 16-float B loads (one per panel) and six
    /// broadcasts.
    ///
    /// # Safety
    /// CPU has AVX-512F; the A panel holds kc steps and `b` yields kc valid rows of 32 floats;
    /// the 6×32 tile lies inside C.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_6x32<B: BRows>(
        kc: usize,
        a: *const f32,
        mut b: B,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let mut ap = a;
        // SAFETY: prefetches only.
        unsafe { prefetch_residual(ep, ldc, row, col, MR) };
        for _ in 0..kc {
            // SAFETY: panels hold kc steps of MR / 16 floats.
            unsafe {
                if let Some((f0, f1)) = b.ahead(PF_B) {
                    _mm_prefetch::<_MM_HINT_T0>(f0 as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(f1 as *const i8);
                }
                _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(PF_A) as *const i8);
                let (p0, p1) = b.row();
                let x0 = _mm512_loadu_ps(p0);
                let x1 = _mm512_loadu_ps(p1);
                for (r, accr) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ap.add(r));
                    accr[0] = _mm512_fmadd_ps(av, x0, accr[0]);
                    accr[1] = _mm512_fmadd_ps(av, x1, accr[1]);
                }
                ap = ap.add(MR);
                b.advance();
            }
        }
        // SAFETY: the tile and epilogue operands are in bounds (caller contract).
        unsafe { store_tile!(acc, c, ldc, accumulate, ep, row, col; 0, 1, 2, 3, 4, 5) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BOffsets, Epilogue, MR};
    use std::arch::x86_64::*;

    /// 6×16 tile: 12 ymm accumulators, 2 B loads and 6 broadcasts per k step.
    ///
    /// # Safety
    /// CPU has AVX2 and FMA; panels hold kc steps; the tile lies inside C.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_6x16(
        kc: usize,
        a: *const f32,
        b: *const f32,
        bstep: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            // SAFETY: panels hold kc steps of MR and NR floats.
            unsafe {
                let b0 = _mm256_loadu_ps(bp);
                let b1 = _mm256_loadu_ps(bp.add(8));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*ap.add(r));
                    accr[0] = _mm256_fmadd_ps(x, b0, accr[0]);
                    accr[1] = _mm256_fmadd_ps(x, b1, accr[1]);
                }
                ap = ap.add(MR);
                bp = bp.add(bstep);
            }
        }
        // SAFETY: the tile and the epilogue operands are in bounds (caller contract).
        unsafe {
            let (lo, hi, bias_col) = match ep {
                Some(e) => (
                    _mm256_set1_ps(e.lo),
                    _mm256_set1_ps(e.hi),
                    if e.bias_col.is_null() {
                        None
                    } else {
                        Some([
                            _mm256_loadu_ps(e.bias_col.add(col)),
                            _mm256_loadu_ps(e.bias_col.add(col + 8)),
                        ])
                    },
                ),
                None => (_mm256_setzero_ps(), _mm256_setzero_ps(), None),
            };
            for (r, accr) in acc.iter_mut().enumerate() {
                let p = c.add(r * ldc);
                if accumulate {
                    accr[0] = _mm256_add_ps(accr[0], _mm256_loadu_ps(p));
                    accr[1] = _mm256_add_ps(accr[1], _mm256_loadu_ps(p.add(8)));
                }
                if let Some(e) = ep {
                    if !e.bias_row.is_null() {
                        let bv = _mm256_broadcast_ss(&*e.bias_row.add(row + r));
                        accr[0] = _mm256_add_ps(accr[0], bv);
                        accr[1] = _mm256_add_ps(accr[1], bv);
                    }
                    if let Some(bc) = bias_col {
                        accr[0] = _mm256_add_ps(accr[0], bc[0]);
                        accr[1] = _mm256_add_ps(accr[1], bc[1]);
                    }
                    if !e.residual.is_null() {
                        let rp = e.residual.add((row + r) * ldc + col);
                        accr[0] = _mm256_add_ps(accr[0], _mm256_loadu_ps(rp));
                        accr[1] = _mm256_add_ps(accr[1], _mm256_loadu_ps(rp.add(8)));
                    }
                    accr[0] = _mm256_min_ps(hi, _mm256_max_ps(lo, accr[0]));
                    accr[1] = _mm256_min_ps(hi, _mm256_max_ps(lo, accr[1]));
                }
                _mm256_storeu_ps(p, accr[0]);
                _mm256_storeu_ps(p.add(8), accr[1]);
            }
        }
    }

    /// 6×16 tile of an implicit-GEMM convolution: B row k is the 16 floats at
    /// `b.base + b.offs[k]` (two loads, usually unaligned), six broadcasts of A per k step.
    /// No epilogue.
    ///
    /// # Safety
    /// CPU has AVX2 and FMA; the A panel holds kc steps; every `base + offs[k]` is readable
    /// for 16 floats; the 6 × 16 tile lies inside C.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn kernel_6x16_ind(
        kc: usize,
        a: *const f32,
        b: BOffsets,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let mut ap = a;
        let mut op = b.offs;
        // SAFETY: the A panel holds kc steps; offs holds kc entries, each a readable row.
        unsafe {
            for _ in 0..kc {
                let x = b.base.offset(*op);
                let b0 = _mm256_loadu_ps(x);
                let b1 = _mm256_loadu_ps(x.add(8));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add(r));
                    accr[0] = _mm256_fmadd_ps(av, b0, accr[0]);
                    accr[1] = _mm256_fmadd_ps(av, b1, accr[1]);
                }
                ap = ap.add(MR);
                op = op.add(1);
            }
            for (r, accr) in acc.iter().enumerate() {
                let p = c.add(r * ldc);
                let (mut v0, mut v1) = (accr[0], accr[1]);
                if accumulate {
                    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(p));
                    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(p.add(8)));
                }
                _mm256_storeu_ps(p, v0);
                _mm256_storeu_ps(p.add(8), v1);
            }
        }
    }

    /// A partial tile (mr ≤ 6 rows, nr ≤ 16 columns): full register tile, masked memory access.
    ///
    /// # Safety
    /// As `kernel_6x16`, with only the mr × nr part of the tile inside C.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn kernel_6x16_partial(
        kc: usize,
        a: *const f32,
        b: *const f32,
        bstep: usize,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        // SAFETY: forwarded. A remainder of at most 8 columns computes one vector per row:
        // half the FMAs (ResNet-50's 7×7 pointwise convs: 49 = 3·16 + 1 columns).
        unsafe {
            if nr <= 8 {
                partial::<1>(kc, a, b, bstep, c, ldc, mr, nr, accumulate, ep, row, col)
            } else {
                partial::<2>(kc, a, b, bstep, c, ldc, mr, nr, accumulate, ep, row, col)
            }
        }
    }

    /// `kernel_6x16_partial` computing the first `V` 8-column vectors of the panel.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    unsafe fn partial<const V: usize>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        bstep: usize,
        c: *mut f32,
        ldc: usize,
        mr: usize,
        nr: usize,
        accumulate: bool,
        ep: Option<&Epilogue>,
        row: usize,
        col: usize,
    ) {
        let mut acc = [[_mm256_setzero_ps(); V]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            // SAFETY: panels hold kc steps (zero-padded beyond mr / nr).
            unsafe {
                let bv: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(bp.add(8 * v)));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*ap.add(r));
                    for v in 0..V {
                        accr[v] = _mm256_fmadd_ps(x, bv[v], accr[v]);
                    }
                }
                ap = ap.add(MR);
                bp = bp.add(bstep);
            }
        }
        // SAFETY: masked accesses touch only columns < nr of rows < mr.
        unsafe {
            let m: [__m256i; V] =
                std::array::from_fn(|v| crate::avx2::first_lanes(nr.saturating_sub(8 * v)));
            let (lo, hi, bias_col) = match ep {
                Some(e) => (
                    _mm256_set1_ps(e.lo),
                    _mm256_set1_ps(e.hi),
                    if e.bias_col.is_null() {
                        None
                    } else {
                        Some(std::array::from_fn::<__m256, V, _>(|v| {
                            _mm256_maskload_ps(e.bias_col.add(col + 8 * v), m[v])
                        }))
                    },
                ),
                None => (_mm256_setzero_ps(), _mm256_setzero_ps(), None),
            };
            for (r, accr) in acc.iter_mut().enumerate().take(mr) {
                let p = c.add(r * ldc);
                for v in 0..V {
                    if accumulate {
                        accr[v] = _mm256_add_ps(accr[v], _mm256_maskload_ps(p.add(8 * v), m[v]));
                    }
                    if let Some(e) = ep {
                        if !e.bias_row.is_null() {
                            accr[v] = _mm256_add_ps(
                                accr[v],
                                _mm256_broadcast_ss(&*e.bias_row.add(row + r)),
                            );
                        }
                        if let Some(bc) = bias_col {
                            accr[v] = _mm256_add_ps(accr[v], bc[v]);
                        }
                        if !e.residual.is_null() {
                            let rp = e.residual.add((row + r) * ldc + col + 8 * v);
                            accr[v] = _mm256_add_ps(accr[v], _mm256_maskload_ps(rp, m[v]));
                        }
                        accr[v] = _mm256_min_ps(hi, _mm256_max_ps(lo, accr[v]));
                    }
                    _mm256_maskstore_ps(p.add(8 * v), m[v], accr[v]);
                }
            }
        }
    }
}

/// `out[r]` = Σ_kx x_r[kx]·B[kx] over the `k` rows of one packed panel (16 floats each) for
/// the `m ≤ 2` rows `x_r` (at `xs[r]`, stride `xstride`), streaming the panel once: four
/// accumulator chains per row (16/LANES vectors a k step, so 4 k steps at a time with
/// AVX-512, 2 with AVX2), summed pairwise at the end, and prefetches ahead of the stream
/// (the panels of a GEMV are read once, usually from L3: an MLP's layers streamed them at
/// 75-80 GB/s with AVX-512 loads and no prefetch, at about 100 GB/s with one line in two
/// 1 KB ahead; AVX2: every line, 2 KB ahead). Weights `stream`ed from memory (larger than
/// `GEMV_STREAM_BYTES`) have every line prefetched 4 KB ahead: AlexNet's 151 MB first
/// fully connected layer 9.3 → 5.7 ms (16 → 27 GB/s, Zen 4), while the MLP's 1 MB layers
/// ran 10% slower so.
pub(super) struct GemvPanel<'a> {
    pub m: usize,
    pub k: usize,
    pub xs: [*const f32; 2],
    pub xstride: usize,
    pub bp: *const f32,
    pub out: &'a mut [[f32; NR]; 2],
    pub stream: bool,
}

/// Packed weights beyond which a GEMV streams them from memory rather than a cache.
pub(super) const GEMV_STREAM_BYTES: usize = 8 << 20;

impl Walk for GemvPanel<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let l = S::LANES;
        // Vectors per panel row, k steps per group of four accumulators.
        let (nv, nu) = (NR / l, (4 * l / NR).max(1));
        let (pf_step, pf_dist) = if self.stream {
            (16, 1024)
        } else {
            (2 * l, 4096 / l)
        };
        let (m, k, xs, xstride, bp) = (self.m, self.k, self.xs, self.xstride, self.bp);
        // acc[r][u·nv + v]: vector v of k steps ≡ u (mod nu), row r.
        let mut acc = [[s.zero(); 4]; 2];
        let mut kx = 0;
        // SAFETY: bp holds k rows of NR floats (prefetches do not fault); xs[r] holds k
        // values at stride xstride.
        unsafe {
            // Single k steps into the first chain of each row, from kx.
            let single = {
                #[inline(always)]
                |x: *const f32, ar: &mut [S::F; 4], kx: std::ops::Range<usize>| {
                    for kx in kx {
                        let xv = s.splat(*x.add(kx * xstride));
                        for (v, a) in ar.iter_mut().enumerate().take(nv) {
                            *a = s.mul_add(xv, s.load(bp.add(kx * NR + v * l)), *a);
                        }
                    }
                }
            };
            if nu == 1 {
                // One chain a vector already (4-lane vectors): rows outermost, the panel
                // (16 KB at most, in L1) read once per row.
                for (x, ar) in xs.iter().zip(acc.iter_mut()).take(m) {
                    single(*x, ar, 0..k);
                }
                kx = k;
            }
            // A group of nu k steps from kx into the four chains of each row.
            let mut group = {
                #[inline(always)]
                |kx: usize| {
                    let mut b = [s.zero(); 4];
                    for (i, bi) in b.iter_mut().enumerate().take(nu * nv) {
                        *bi = s.load(bp.add(kx * NR + i * l));
                    }
                    for (x, ar) in xs.iter().zip(acc.iter_mut()).take(m) {
                        for u in 0..nu {
                            let xv = s.splat(*x.add((kx + u) * xstride));
                            for v in 0..nv {
                                let i = u * nv + v;
                                ar[i] = s.mul_add(xv, b[i], ar[i]);
                            }
                        }
                    }
                }
            };
            // Four k steps an iteration, prefetched, then groups, then single steps into the
            // first chain.
            while kx + 4 <= k {
                for o in (0..4 * NR).step_by(pf_step) {
                    s.prefetch(bp.wrapping_add(kx * NR + pf_dist + o));
                }
                for g in (0..4).step_by(nu) {
                    group(kx + g);
                }
                kx += 4;
            }
            while kx + nu <= k {
                group(kx);
                kx += nu;
            }
            for (x, ar) in xs.iter().zip(acc.iter_mut()).take(m) {
                single(*x, ar, kx..k);
            }
            for (ar, o) in acc.iter().zip(self.out.iter_mut()).take(m) {
                for v in 0..nv {
                    let sum = match nu {
                        4 => s.add(
                            s.add(ar[v], ar[nv + v]),
                            s.add(ar[2 * nv + v], ar[3 * nv + v]),
                        ),
                        2 => s.add(ar[v], ar[nv + v]),
                        _ => ar[v],
                    };
                    s.store(o.as_mut_ptr().add(v * l), sum);
                }
            }
        }
    }
}

/// y = op(A)·B_packed for m ≤ 2 (matrix-vector products): one pass over the packed weights,
/// its panels split over `par`'s workers.
///
/// # Safety
/// Operands valid for their dims.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemv_packed_b(
    par: crate::par::Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    bp: *const f32,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
) {
    let panels = n.div_ceil(NR);
    // SAFETY: each task writes the columns of its own panels.
    unsafe {
        par.for_ranges(panels, m.max(1) * k * NR, &|ps, _| {
            gemv_panels(m, n, k, a, lda, ta, bp, c, ldc, ep, ps)
        })
    };
}

/// The columns of panels `panels` of `gemv_packed_b`.
///
/// # Safety
/// As `gemv_packed_b`.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
unsafe fn gemv_panels(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    bp: *const f32,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    panels: std::ops::Range<usize>,
) {
    let stream = n.saturating_mul(k).saturating_mul(4) > GEMV_STREAM_BYTES;
    // Row r of op(A): element kx at a + r*lda + kx (or a + kx*lda + r when transposed).
    let (xstride, xs): (usize, [*const f32; 2]) = if ta {
        // SAFETY: row starts inside A.
        (lda, [a, unsafe { a.add(1.min(m.saturating_sub(1))) }])
    } else {
        // SAFETY: as above.
        (1, [a, unsafe { a.add(lda * 1.min(m.saturating_sub(1))) }])
    };
    // The packed B in memory order (`pack::b_panel_at`): per column block, per K block,
    // its panels; the column block's sums live in `acc`.
    let mut acc = [[[0f32; NR]; 2]; super::NC / NR];
    let kb = super::k_block(k);
    let mut p0 = panels.start;
    while p0 < panels.end {
        // Panels up to the end of the range or of p0's column block.
        let count = (panels.end - p0).min(super::NC / NR - p0 % (super::NC / NR));
        for a in acc.iter_mut().take(count) {
            *a = [[0f32; NR]; 2];
        }
        let mut pc = 0;
        while pc < k {
            let kc = kb.min(k - pc);
            // SAFETY: depth pc of each row of op(A).
            let xk = xs.map(|x| unsafe { x.add(pc * xstride) });
            for (q, accq) in acc.iter_mut().enumerate().take(count) {
                // SAFETY: panel p0 + q of the packed B at depth pc.
                let panel = unsafe { bp.add(super::pack::b_panel_at(n, k, pc, kc, p0 + q)) };
                let mut out = [[0f32; NR]; 2];
                let w = GemvPanel {
                    m,
                    k: kc,
                    xs: xk,
                    xstride,
                    bp: panel,
                    out: &mut out,
                    stream,
                };
                // SAFETY: the panel holds kc rows of NR floats; xk[r] kc values at stride
                // xstride.
                unsafe { simd::dispatch(w) };
                for (ar, or) in accq.iter_mut().zip(&out).take(m) {
                    for (a, o) in ar.iter_mut().zip(or) {
                        *a += o;
                    }
                }
            }
            pc += kc;
        }
        for (q, accq) in acc.iter().enumerate().take(count) {
            let p = p0 + q;
            for (r, ar) in accq.iter().enumerate().take(m) {
                for (j, a) in ar.iter().enumerate().take(n - p * NR) {
                    let col = p * NR + j;
                    // SAFETY: inside C.
                    unsafe { *c.add(r * ldc + col) = apply_ep(*a, ep, r, col, ldc) };
                }
            }
        }
        p0 += count;
    }
}
