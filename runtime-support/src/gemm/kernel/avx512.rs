//! The AVX-512 micro-kernels (`kernel::select` picks them on CPUs with AVX-512F).

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
