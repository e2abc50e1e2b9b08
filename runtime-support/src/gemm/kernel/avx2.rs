//! The AVX2+FMA micro-kernels (`kernel::select` picks them on CPUs with AVX2 and FMA).

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
                        accr[v] =
                            _mm256_add_ps(accr[v], _mm256_broadcast_ss(&*e.bias_row.add(row + r)));
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
