//! The register tile, written once over the SIMD layer: per k step `R` rows of A broadcast
//! against `V` vectors of one B row into `R × V` accumulators; then C added (when
//! accumulating), the epilogue applied and the tile stored, whole or masked to its `mr × nr`
//! part. `tiles!` instantiates it per instruction set inside `#[target_feature]` functions
//! (`avx512`, `avx2`; `portable` is `Lanes<8>`'s): the walk, the token's methods and the
//! intrinsics under them inline into one function compiled for that set.

use super::{ARows, BRows, Dst};
use crate::simd::Simd;

/// Software prefetch distances of the prefetching tiles (AVX-512's): `PF_B` in k steps of a
/// B read in place (rows a row stride apart, which the hardware prefetchers do not follow
/// across pages; packed panels use `PF_PACKED`), `PF_A` in floats of an A panel (64 k steps,
/// 1.5 KB ahead). A is usually the weights, packed to stream sequentially
/// (`pack::a_panel_at`), and in a real model they come from DRAM. Measurements behind the
/// distances: docs/performance.md, "GEMM prefetch distances".
const PF_B: usize = 16;
const PF_A: usize = 384;

/// Accumulates `kc` steps into `acc`: tile row r is row `O + r` of `a` (two 6-row A panels
/// taken together, or rows of a row-major A), the `V` vectors of B's current row come from
/// `b`. `PF`: prefetch B rows `PF_B` steps ahead (where `b` knows them), packed A panels
/// `PF_A` floats ahead.
///
/// # Safety
/// `s`'s instruction set runs here; `a` yields kc readable steps of rows `O..O + R`; `b`
/// kc readable rows of `V` vectors.
#[inline(always)]
pub(super) unsafe fn fma_steps<
    S: Simd,
    A: ARows,
    B: BRows,
    const R: usize,
    const O: usize,
    const V: usize,
    const PF: bool,
>(
    s: S,
    kc: usize,
    mut a: A,
    mut b: B,
    acc: &mut [[S::F; V]; R],
) {
    for _ in 0..kc {
        // SAFETY: `a` and `b` hold a readable step each (contract); prefetches do not fault.
        unsafe {
            if PF {
                if let Some(f) = b.ahead::<V>(PF_B, S::LANES) {
                    for p in f {
                        s.prefetch(p);
                    }
                }
                for p in a.ahead(PF_A, O, R).into_iter().flatten() {
                    s.prefetch(p);
                }
            }
            let rows = b.row::<V>(S::LANES);
            let mut x = [s.zero(); V];
            for v in 0..V {
                x[v] = s.load(rows[v]);
            }
            for (r, accr) in acc.iter_mut().enumerate() {
                let av = s.splat(*a.at(O + r));
                for v in 0..V {
                    accr[v] = s.mul_add(av, x[v], accr[v]);
                }
            }
            a.advance();
            b.advance();
        }
    }
}

/// `p[..LANES]`, or its lanes in `m` (0 elsewhere, the others not accessed).
///
/// # Safety
/// As `Simd::load` / `Simd::load_or_zero`.
#[inline(always)]
unsafe fn load<S: Simd>(s: S, p: *const f32, m: Option<S::M>) -> S::F {
    // SAFETY: forwarded.
    unsafe {
        match m {
            None => s.load(p),
            Some(m) => s.load_or_zero(p, m),
        }
    }
}

/// Stores `x` to `p[..LANES]`, or its lanes in `m`.
///
/// # Safety
/// As `Simd::store` / `Simd::store_masked`.
#[inline(always)]
unsafe fn store<S: Simd>(s: S, p: *mut f32, m: Option<S::M>, x: S::F) {
    // SAFETY: forwarded.
    unsafe {
        match m {
            None => s.store(p, x),
            Some(m) => s.store_masked(p, m, x),
        }
    }
}

/// Adds C to rows `..rows` of `acc` (when `d.accumulate`), applies the epilogue and stores
/// them at `d`: every column of the `V` vectors when `cols` is None, else the first `cols`
/// (masked accesses).
///
/// # Safety
/// `s`'s instruction set runs here; the stored part of the tile, and the epilogue's operands
/// for it, lie inside their buffers.
#[inline(always)]
pub(in crate::gemm) unsafe fn store_tile<S: Simd, const R: usize, const V: usize>(
    s: S,
    acc: &[[S::F; V]; R],
    rows: usize,
    cols: Option<usize>,
    d: Dst,
) {
    let mut m: [Option<S::M>; V] = [None; V];
    if let Some(n) = cols {
        for (v, m) in m.iter_mut().enumerate() {
            *m = Some(s.lanes(0, n.saturating_sub(v * S::LANES)));
        }
    }
    // One loop per case, so no row tests what the tile's case already decides.
    // SAFETY: forwarded.
    unsafe {
        match (d.accumulate, d.ep.is_some()) {
            (false, false) => store_rows::<S, R, V, false, false>(s, acc, rows, m, d),
            (true, false) => store_rows::<S, R, V, true, false>(s, acc, rows, m, d),
            (false, true) => store_rows::<S, R, V, false, true>(s, acc, rows, m, d),
            (true, true) => store_rows::<S, R, V, true, true>(s, acc, rows, m, d),
        }
    }
}

/// `store_tile` for one case: `ACC` adds C, `EP` applies `d.ep`; `m` masks each vector's
/// columns (None: all of them).
///
/// # Safety
/// As `store_tile`.
#[inline(always)]
unsafe fn store_rows<S: Simd, const R: usize, const V: usize, const ACC: bool, const EP: bool>(
    s: S,
    acc: &[[S::F; V]; R],
    rows: usize,
    m: [Option<S::M>; V],
    d: Dst,
) {
    let Dst {
        c, ldc, row, col, ..
    } = d;
    let ep = if EP { d.ep } else { None };
    let l = S::LANES;
    // SAFETY: (whole body) accesses stay inside the stored part of the tile and its epilogue
    // operands (contract), masked to the columns stored.
    unsafe {
        let (lo, hi) = match ep {
            Some(e) => (s.splat(e.lo), s.splat(e.hi)),
            None => (s.zero(), s.zero()),
        };
        let bias_col: Option<[S::F; V]> = match ep {
            Some(e) if !e.bias_col.is_null() => {
                let mut bc = [s.zero(); V];
                for v in 0..V {
                    bc[v] = load(s, e.bias_col.add(col + v * l), m[v]);
                }
                Some(bc)
            }
            _ => None,
        };
        // One block per row, by literal index: every accumulator access is a constant, so
        // the accumulators stay in registers (a row loop the compiler does not unroll, as
        // with 12 rows, spills them to the stack first, which costs as much as the k loop
        // itself when K is small).
        const { assert!(R <= 12, "tiles have at most 12 rows") };
        macro_rules! rows {
            ($($r:literal)*) => {$(
                if $r < R && $r < rows {
                    let p = c.add($r * ldc);
                    for v in 0..V {
                        let mut x = acc[$r][v];
                        if ACC {
                            x = s.add(x, load(s, p.add(v * l), m[v]));
                        }
                        if let Some(e) = ep {
                            if !e.bias_row.is_null() {
                                x = s.add(x, s.splat(*e.bias_row.add(row + $r)));
                            }
                            if let Some(bc) = bias_col {
                                x = s.add(x, bc[v]);
                            }
                            if !e.residual.is_null() {
                                let rp = e.residual.add((row + $r) * ldc + col + v * l);
                                x = s.add(x, load(s, rp, m[v]));
                            }
                            x = s.min(hi, s.max(lo, x));
                        }
                        store(s, p.add(v * l), m[v], x);
                    }
                }
            )*};
        }
        rows!(0 1 2 3 4 5 6 7 8 9 10 11);
    }
}

/// Prefetches the residual rows an epilogue will add (`R` rows of `V` vectors from `col`),
/// so their loads at the store do not wait on L3 or DRAM: a residual is a tensor written
/// layers earlier, its rows `ldc` apart (a stream per row, which the hardware prefetchers
/// do not follow).
#[inline(always)]
fn prefetch_residual<S: Simd, const R: usize, const V: usize>(s: S, d: Dst) {
    if let Some(e) = d.ep
        && !e.residual.is_null()
    {
        for r in 0..R {
            let p = e.residual.wrapping_add((d.row + r) * d.ldc + d.col);
            for v in 0..V {
                s.prefetch(p.wrapping_add(v * S::LANES));
            }
        }
    }
}

/// A whole `R × V·LANES` tile (rows `O..O + R` of the A panels, see `fma_steps`).
///
/// # Safety
/// As `fma_steps` and `store_tile` for the whole tile.
#[inline(always)]
pub(super) unsafe fn full<
    S: Simd,
    A: ARows,
    B: BRows,
    const R: usize,
    const O: usize,
    const V: usize,
    const PF: bool,
>(
    s: S,
    kc: usize,
    a: A,
    b: B,
    d: Dst,
) {
    if PF {
        prefetch_residual::<S, R, V>(s, d);
    }
    let mut acc = [[s.zero(); V]; R];
    // SAFETY: forwarded.
    unsafe {
        fma_steps::<S, A, B, R, O, V, PF>(s, kc, a, b, &mut acc);
        store_tile(s, &acc, R, None, d);
    }
}

/// The `mr × nr` part (`mr ≤ R`, `nr ≤ 2·LANES`) of an `R`-row tile: rows ≥ mr are computed
/// but not stored, columns ≥ nr masked; one vector of B a step when `nr ≤ LANES` (the
/// second's FMAs would multiply padding, and its B is not read).
///
/// # Safety
/// As `fma_steps` (B panels zero-padded to the vectors read) and `store_tile` for the
/// `mr × nr` part.
#[inline(always)]
pub(super) unsafe fn partial<S: Simd, A: ARows, B: BRows, const R: usize, const O: usize>(
    s: S,
    kc: usize,
    a: A,
    b: B,
    mr: usize,
    nr: usize,
    d: Dst,
) {
    // SAFETY: forwarded.
    unsafe {
        if nr <= S::LANES {
            let mut acc = [[s.zero(); 1]; R];
            fma_steps::<S, A, B, R, O, 1, false>(s, kc, a, b, &mut acc);
            store_tile(s, &acc, mr, Some(nr), d);
        } else {
            let mut acc = [[s.zero(); 2]; R];
            fma_steps::<S, A, B, R, O, 2, false>(s, kc, a, b, &mut acc);
            store_tile(s, &acc, mr, Some(nr), d);
        }
    }
}

/// The tiles of one instruction set: `full` and `partial` inside functions compiled for
/// its features, each making the token its features prove.
macro_rules! tiles {
    ($(#[$attr:meta])* $name:ident: $S:ty = $new:expr $(, features $f:literal)?) => {
        $(#[$attr])*
        pub mod $name {
            use super::super::{ARows, BRows, Dst};
            #[allow(unused_imports, reason = "the token's type")]
            use crate::simd::*;

            /// `walk::full` with this instruction set (`PF`: prefetching, see `fma_steps`).
            ///
            /// # Safety
            /// The CPU has the features (`select()` chose this set); `walk::full`'s contract.
            #[inline(never)]
            $(#[target_feature(enable = $f)])?
            pub unsafe fn full<
                A: ARows,
                B: BRows,
                const R: usize,
                const O: usize,
                const V: usize,
                const PF: bool,
            >(
                kc: usize,
                a: A,
                b: B,
                d: Dst,
            ) {
                // SAFETY: the features are present and the rest forwarded (contract).
                unsafe {
                    let s: $S = $new;
                    super::full::<_, A, B, R, O, V, PF>(s, kc, a, b, d)
                }
            }

            /// `walk::partial` with this instruction set.
            ///
            /// # Safety
            /// The CPU has the features (`select()` chose this set); `walk::partial`'s
            /// contract.
            #[inline(never)]
            $(#[target_feature(enable = $f)])?
            pub unsafe fn partial<A: ARows, B: BRows, const R: usize, const O: usize>(
                kc: usize,
                a: A,
                b: B,
                mr: usize,
                nr: usize,
                d: Dst,
            ) {
                // SAFETY: the features are present and the rest forwarded (contract).
                unsafe {
                    let s: $S = $new;
                    super::partial::<_, A, B, R, O>(s, kc, a, b, mr, nr, d)
                }
            }
        }
    };
}

tiles!(
    /// AVX-512: 16-lane vectors (a 12 × 32 tile is 24 zmm accumulators; per k step two B
    /// loads and twelve broadcasts feed 24 FMAs).
    #[cfg(target_arch = "x86_64")]
    avx512: Avx512 = Avx512::new(),
    features "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"
);
tiles!(
    /// AVX2 + FMA: 8-lane vectors (a 6 × 16 tile is 12 ymm accumulators).
    #[cfg(target_arch = "x86_64")]
    avx2: Avx2 = Avx2::new(), features "avx2,fma"
);
tiles!(
    /// Portable: 8-lane arrays, for targets without a native tier.
    portable: Lanes<8> = Lanes::<8>::new()
);
