//! Micro-kernels: a tile of C from A (packed panels, or rows read in place: `ARows`) and B
//! (packed panels, read in place or through an offset table: `BRows`). The tile functions here pick the shape and the instruction set
//! (AVX-512 or AVX2+FMA when the CPU has them, checked at run time by `select`; portable
//! otherwise); the tile itself is written once, in `walk.rs`.

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
/// run (measurements: docs/performance.md, "GEMM prefetch distances").
const PF_PACKED: usize = 64;

/// Where a tile finds B's row at each k step: `V` vectors of `lanes` floats, the row's
/// columns `v·lanes..(v + 1)·lanes`. Pointer arithmetic only, so it inlines into the tiles
/// whatever their target features.
pub trait BRows: Copy {
    /// The current step's vectors.
    ///
    /// # Safety
    /// The source is valid for the current step.
    unsafe fn row<const V: usize>(&self, lanes: usize) -> [*const f32; V];
    /// The vectors `steps` ahead to prefetch, or None when rows are not known ahead cheaply.
    fn ahead<const V: usize>(&self, steps: usize, lanes: usize) -> Option<[*const f32; V]>;
    /// Moves to the next k step.
    ///
    /// # Safety
    /// Another step exists or the source is not read again.
    unsafe fn advance(&mut self);
}

impl BPanels {
    /// Packed panels of `NR` columns from `b`: the tile's second 16 columns in the next.
    pub fn packed(b: *const f32) -> Self {
        BPanels {
            b0: b,
            b1: b.wrapping_add(NR),
            step: NR,
        }
    }

    /// The vectors of the row `d` floats past the current one: columns below NR in the
    /// first panel, the next NR in the second (`V·lanes ≤ 2·NR`).
    #[inline(always)]
    fn at<const V: usize>(&self, lanes: usize, d: usize) -> [*const f32; V] {
        debug_assert!(V * lanes <= 2 * NR);
        let mut p = [self.b0; V];
        for (v, p) in p.iter_mut().enumerate() {
            let c = v * lanes;
            *p = if c < NR {
                self.b0.wrapping_add(c + d)
            } else {
                self.b1.wrapping_add(c - NR + d)
            };
        }
        p
    }
}

impl BRows for BPanels {
    #[inline(always)]
    unsafe fn row<const V: usize>(&self, lanes: usize) -> [*const f32; V] {
        self.at(lanes, 0)
    }
    #[inline(always)]
    fn ahead<const V: usize>(&self, steps: usize, lanes: usize) -> Option<[*const f32; V]> {
        let d = if self.step == NR {
            PF_PACKED * NR
        } else {
            steps * self.step
        };
        Some(self.at(lanes, d))
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.b0 = self.b0.wrapping_add(self.step);
        self.b1 = self.b1.wrapping_add(self.step);
    }
}

/// Where a tile finds A's value for each of its rows at each k step. Pointer arithmetic
/// only, so it inlines into the tiles whatever their target features.
pub trait ARows: Copy {
    /// Row `i`'s value at the current step.
    fn at(&self, i: usize) -> *const f32;
    /// Where to prefetch `dist` floats ahead for rows `first..first + rows`, if anywhere.
    fn ahead(&self, dist: usize, first: usize, rows: usize) -> [Option<*const f32>; 2];
    /// Moves to the next k step.
    ///
    /// # Safety
    /// Another step exists or the source is not read again.
    unsafe fn advance(&mut self);
}

/// Two consecutive packed A panels of `MR` rows (`pack::a_panel_at`) taken together: row
/// i in panel `i / MR`, MR floats a step.
#[derive(Copy, Clone, Debug)]
pub struct APanels(pub [*const f32; 2]);

impl ARows for APanels {
    #[inline(always)]
    fn at(&self, i: usize) -> *const f32 {
        self.0[i / MR].wrapping_add(i % MR)
    }
    #[inline(always)]
    fn ahead(&self, dist: usize, first: usize, rows: usize) -> [Option<*const f32>; 2] {
        let second = first + rows > MR;
        [
            Some(self.0[0].wrapping_add(dist)),
            second.then(|| self.0[1].wrapping_add(dist)),
        ]
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.0 = [self.0[0].wrapping_add(MR), self.0[1].wrapping_add(MR)];
    }
}

/// Rows of a row-major A read in place (no packing): row i at `a + i·lda`, one float a
/// step. Rows at or past `rows` read the last row (a partial tile computes them and does
/// not store them), so nothing outside the matrix is read.
#[derive(Copy, Clone, Debug)]
pub struct ARowMajor {
    a: *const f32,
    lda: usize,
    last: usize,
}

impl ARowMajor {
    /// Rows `..rows` (at least one) of the matrix at `a`, `lda` floats apart.
    pub fn new(a: *const f32, lda: usize, rows: usize) -> Self {
        ARowMajor {
            a,
            lda,
            last: rows.max(1) - 1,
        }
    }
}

impl ARows for ARowMajor {
    #[inline(always)]
    fn at(&self, i: usize) -> *const f32 {
        self.a.wrapping_add(i.min(self.last) * self.lda)
    }
    #[inline(always)]
    fn ahead(&self, _dist: usize, _first: usize, _rows: usize) -> [Option<*const f32>; 2] {
        [None, None]
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.a = self.a.wrapping_add(1);
    }
}

/// B row k at `base + offs[k]` (contiguous floats): an implicit-GEMM convolution reading
/// shifted views of its padded input.
#[derive(Copy, Clone, Debug)]
pub struct BOffsets {
    pub base: *const f32,
    pub offs: *const isize,
}

impl BRows for BOffsets {
    #[inline(always)]
    unsafe fn row<const V: usize>(&self, lanes: usize) -> [*const f32; V] {
        // SAFETY: caller contract (offs has the current step's entry).
        let p = unsafe { self.base.offset(*self.offs) };
        let mut r = [p; V];
        for (v, r) in r.iter_mut().enumerate() {
            *r = p.wrapping_add(v * lanes);
        }
        r
    }
    #[inline(always)]
    fn ahead<const V: usize>(&self, _steps: usize, _lanes: usize) -> Option<[*const f32; V]> {
        None
    }
    #[inline(always)]
    unsafe fn advance(&mut self) {
        self.offs = self.offs.wrapping_add(1);
    }
}

/// Where a tile goes: its first element at `c`, rows `ldc` apart, added to what is there
/// when `accumulate`; then the epilogue `ep`, with the tile at row `row`, column `col` of C
/// (`c` is then C itself at that place, so `ldc` also indexes the residual).
#[derive(Copy, Clone)]
pub struct Dst<'a> {
    pub c: *mut f32,
    pub ldc: usize,
    pub accumulate: bool,
    pub ep: Option<&'a Epilogue>,
    pub row: usize,
    pub col: usize,
}

impl Dst<'_> {
    /// A tile with no epilogue.
    pub fn plain(c: *mut f32, ldc: usize, accumulate: bool) -> Self {
        Dst {
            c,
            ldc,
            accumulate,
            ep: None,
            row: 0,
            col: 0,
        }
    }

    /// The tile `off` columns to the right.
    pub fn right(self, off: usize) -> Self {
        Dst {
            c: self.c.wrapping_add(off),
            col: self.col + off,
            ..self
        }
    }
}

/// A partial tile of up to 6 × 2·NR (mr rows, nr columns) with masked memory access.
///
/// # Safety
/// As `tile_wide`, with only the mr × nr part inside C; `b.b1` is read only when nr > NR.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_wide_partial(
    kc: usize,
    a: *const f32,
    b: BPanels,
    mr: usize,
    nr: usize,
    d: Dst,
) {
    // Only the rows that exist are computed: a 1-row rest (49 = 4·12 + 1 positions of a
    // 7×7 map in the pixel-major conv) costs a twelfth of a 12-row tile, not half.
    macro_rules! rows {
        ($r:literal) => {
            walk::avx512::partial::<_, _, $r, 0>(kc, APanels([a, a]), b, mr, nr, d)
        };
    }
    // SAFETY: forwarded; select() checked AVX-512.
    unsafe {
        match mr {
            1 => rows!(1),
            2 => rows!(2),
            3 | 4 => rows!(4),
            _ => rows!(6),
        }
    }
}

/// An mr × nr tile (7 ≤ mr ≤ 12, nr ≤ 2·NR) from two consecutive A panels and zero-padded
/// B panels (or a row-major B read in place when nr = 2·NR), with masked stores: 8 rows
/// computed for mr ≤ 8, 12 otherwise (12 rather than 6 broadcasts per B load, and one tile
/// instead of a 6-row tile and a partial one).
///
/// # Safety
/// As `tile_wide_partial`, with two A panels (rows row..row+12, zero-padded past the
/// matrix) and the mr × nr part inside C.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_wide12_partial(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: BPanels,
    mr: usize,
    nr: usize,
    d: Dst,
) {
    debug_assert!(mr > MR && mr <= 2 * MR);
    let a = APanels([a0, a1]);
    // SAFETY: forwarded; select() checked AVX-512.
    unsafe {
        if mr <= 8 {
            walk::avx512::partial::<_, _, 8, 0>(kc, a, b, mr, nr, d)
        } else {
            walk::avx512::partial::<_, _, 12, 0>(kc, a, b, mr, nr, d)
        }
    }
}

/// An 8 × nr tile (nr ≤ 2·NR) whose rows start `d.row % MR` rows into the A panel `a0` and
/// continue in `a1`, with masked stores: the last 16 rows of a block of 12·i + 16 rows (64
/// rows as 12+12+12+12+8+8 rather than five 12-row tiles and a 4-row one).
///
/// # Safety
/// As `tile_wide_partial`; `d.row % MR` is 0 or 2; the 8 rows exist in the packed A; the
/// 8 × nr part lies inside C.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile8_offset(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: BPanels,
    nr: usize,
    d: Dst,
) {
    let a = APanels([a0, a1]);
    // SAFETY: forwarded; select() checked AVX-512.
    unsafe {
        match d.row % MR {
            0 => walk::avx512::partial::<_, _, 8, 0>(kc, a, b, 8, nr, d),
            2 => walk::avx512::partial::<_, _, 8, 2>(kc, a, b, 8, nr, d),
            _ => unreachable!("8-row tiles start 0 or 2 rows into a panel"),
        }
    }
}

/// A full 12 × 2·NR tile from two consecutive A panels (`a1` = second) and 32 B columns.
///
/// # Safety
/// As `tile_wide`, for a full 12 × 32 tile.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_wide12(kc: usize, a0: *const f32, a1: *const f32, b: BPanels, d: Dst) {
    // SAFETY: forwarded; select() checked AVX-512.
    unsafe { walk::avx512::full::<_, _, 12, 0, 2, true>(kc, APanels([a0, a1]), b, d) }
}

/// A full 12 × 32 tile (`rows12`) or 6 × 32 tile whose B row k is the 32 floats at
/// `base + offs[k]` (an implicit-GEMM convolution reading shifted views of its padded input).
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
    d: Dst,
) {
    let b = BOffsets { base, offs };
    // SAFETY: forwarded.
    unsafe {
        if rows12 {
            walk::avx512::full::<_, _, 12, 0, 2, true>(kc, APanels([a0, a1]), b, d)
        } else {
            walk::avx512::full::<_, _, 6, 0, 2, true>(kc, APanels([a0, a0]), b, d)
        }
    }
}

/// An 8 × 48 tile of an implicit-GEMM convolution (`gemm_indirect_b`'s 8-row layout): rows
/// `row0..row0+8` of the A matrix whose K block (6-row panels of `kc` steps each, see
/// `pack::a_panel_at`) starts at `a`, B row k the 48 floats at `base + offs[k]`. Per k step
/// three B loads and eight broadcasts feed 24 FMAs — fewer loads per FMA than 12×32, and
/// whole tiles for 8·i output channels (32 channels take 4 tiles instead of three 12-row
/// tiles with 4 rows wasted).
///
/// # Safety
/// `select()` returned `Kern::Avx512`; `row0` is a multiple of 8 and rows row0..row0+8
/// exist in the packed A; every `base + offs[k]` is readable for 48 floats; the tile lies
/// inside C.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_indirect_8x48(
    kc: usize,
    a: *const f32,
    row0: usize,
    base: *const f32,
    offs: *const isize,
    d: Dst,
) {
    let b = BOffsets { base, offs };
    let q0 = a.wrapping_add((row0 / MR) * kc * MR);
    let q = APanels([q0, q0.wrapping_add(kc * MR)]);
    // SAFETY: forwarded; rows row0%6.. of the first panel and the rest from the next.
    unsafe {
        match row0 % MR {
            0 => walk::avx512::full::<_, _, 8, 0, 3, false>(kc, q, b, d),
            2 => walk::avx512::full::<_, _, 8, 2, 3, false>(kc, q, b, d),
            4 => walk::avx512::full::<_, _, 8, 4, 3, false>(kc, q, b, d),
            _ => unreachable!("8-row tiles start at multiples of 8"),
        }
    }
}

/// A full 6 × 16 tile of an implicit-GEMM convolution with 256-bit vectors: B row k is
/// the 16 floats at `base + offs[k]`.
///
/// # Safety
/// `select()` returned `Kern::Avx2Fma` or `Kern::Avx512`; the A panel holds kc steps; every
/// `base + offs[k]` is readable for 16 floats; the 6 × 16 tile lies inside C.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_indirect_6x16(
    kc: usize,
    a: *const f32,
    base: *const f32,
    offs: *const isize,
    d: Dst,
) {
    let b = BOffsets { base, offs };
    // SAFETY: forwarded.
    unsafe { walk::avx2::full::<_, _, 6, 0, 2, false>(kc, APanels([a, a]), b, d) }
}

/// A full 6 × 2·NR tile from one A panel and 32 B columns.
///
/// # Safety
/// As `tile`, for a full 6 × 32 tile; only for `Kern::Avx512`.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile_wide(kc: usize, a: *const f32, b: BPanels, d: Dst) {
    // SAFETY: forwarded; select() checked AVX-512.
    unsafe { walk::avx512::full::<_, _, 6, 0, 2, true>(kc, APanels([a, a]), b, d) }
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

/// Computes one tile from packed panels: C[mr × nr] (+)= A_panel · B_panel, then the
/// epilogue; 6 × 16 (AVX2's tile, which AVX-512 CPUs also run here, and the portable one),
/// masked to mr × nr.
///
/// # Safety
/// Panels hold `kc` steps; the mr × nr tile lies inside C.
pub unsafe fn tile(
    kern: Kern,
    kc: usize,
    a: *const f32,
    b: *const f32,
    mr: usize,
    nr: usize,
    d: Dst,
) {
    // SAFETY: forwarded.
    unsafe { tile16(kern, kc, APanels([a, a]), BPanels::packed(b), mr, nr, d) }
}

/// `tile` with A a row-major matrix read in place: row i of the tile at `a + i·lda`, its
/// k steps contiguous. Rows past `mr` are not read (the last row is read in their place and
/// its results not stored).
///
/// # Safety
/// As `tile`, with rows `..mr` of A readable for kc floats from `a`.
#[allow(
    clippy::too_many_arguments,
    reason = "the tile's operands, as `tile`'s"
)]
pub unsafe fn tile_a_rows(
    kern: Kern,
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    mr: usize,
    nr: usize,
    d: Dst,
) {
    let a = ARowMajor::new(a, lda, mr);
    // SAFETY: forwarded.
    unsafe { tile16(kern, kc, a, BPanels::packed(b), mr, nr, d) }
}

/// An mr × 16 tile (mr ≤ 6) with AVX2 whose B is a row-major matrix read in place: row k
/// of the tile's 16 columns at `b + k·ldb`; A a packed panel, or (`lda` Some) rows of a
/// row-major A as `tile_a_rows` reads them.
///
/// # Safety
/// `select()` returned `Kern::Avx2Fma`; A holds kc steps; B rows are readable for 16
/// floats; the mr × 16 tile lies inside C.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub unsafe fn tile_b_in_place(
    kc: usize,
    a: *const f32,
    lda: Option<usize>,
    b: *const f32,
    ldb: usize,
    mr: usize,
    d: Dst,
) {
    let b = BPanels {
        b0: b,
        b1: b.wrapping_add(NR),
        step: ldb,
    };
    // SAFETY: forwarded.
    unsafe {
        match lda {
            None => tile16(Kern::Avx2Fma, kc, APanels([a, a]), b, mr, NR, d),
            Some(lda) => tile16(Kern::Avx2Fma, kc, ARowMajor::new(a, lda, mr), b, mr, NR, d),
        }
    }
}

/// The mr × nr part of a 6 × 16 tile from `a`'s rows, with `kern`'s 16-column tile (AVX2's
/// on either x86 tier).
///
/// # Safety
/// `kern` came from `select()`; `a` holds kc steps of its rows and `b` kc rows of 16
/// floats; the mr × nr tile lies inside C.
unsafe fn tile16<A: ARows>(kern: Kern, kc: usize, a: A, b: BPanels, mr: usize, nr: usize, d: Dst) {
    let full = mr == MR && nr == NR;
    macro_rules! on {
        ($isa:ident) => {
            if full {
                walk::$isa::full::<_, _, MR, 0, 2, false>(kc, a, b, d)
            } else {
                walk::$isa::partial::<_, _, MR, 0>(kc, a, b, mr, nr, d)
            }
        };
    }
    // SAFETY: forwarded; select() checked the CPU features of the x86 tiers (AVX-512
    // implies AVX2 here).
    unsafe {
        match kern {
            Kern::Portable => on!(portable),
            #[cfg(target_arch = "x86_64")]
            Kern::Avx2Fma | Kern::Avx512 => on!(avx2),
        }
    }
}

mod walk;

pub(super) use walk::store_tile;
