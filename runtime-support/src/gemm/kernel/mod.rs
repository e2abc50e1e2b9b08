//! Micro-kernels: an MR×NR tile of C from a packed A panel and a packed B panel. On x86-64
//! the AVX-512 (`avx512.rs`) or AVX2+FMA (`avx2.rs`) kernels when the CPU has them (checked
//! at run time, `select`), portable Rust otherwise (here); the tile functions dispatch.

use super::Epilogue;
use super::pack::{MR, NR};

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
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
