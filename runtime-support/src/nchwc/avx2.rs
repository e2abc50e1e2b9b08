//! AVX2+FMA kernels of the blocked convolution: the GEMM register tile (up to 6 output
//! positions × 2 output blocks, 12 ymm accumulators; per input channel two weight loads and
//! one broadcast per position) and the depthwise row loop.

use super::{BlockedConv, CB, Epilogue, PANEL, Tile};
use std::arch::x86_64::*;

/// # Safety
/// AVX2 and FMA present; as `Tile`'s fields say.
pub unsafe fn tile(t: &Tile) {
    macro_rules! go {
        ($r:literal) => {
            // SAFETY: forwarded.
            unsafe {
                if t.blocks == 2 {
                    kernel::<$r, 2>(t)
                } else {
                    kernel::<$r, 1>(t)
                }
            }
        };
    }
    match t.rows {
        6 => go!(6),
        5 => go!(5),
        4 => go!(4),
        3 => go!(3),
        2 => go!(2),
        _ => go!(1),
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn kernel<const R: usize, const V: usize>(t: &Tile) {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let mut wp = t.w;
    let pos: [*const f32; R] = std::array::from_fn(|r| t.x.wrapping_offset(t.pos[r]));
    // SAFETY: every position offset plus tap offset starts a readable block row; the panel
    // holds offs.len() × 8 rows of 16 floats; the tile lies inside the output.
    unsafe {
        for &o in t.offs {
            for ci in 0..CB {
                let b: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * CB)));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let a = _mm256_broadcast_ss(&*pos[r].offset(o).add(ci));
                    for v in 0..V {
                        accr[v] = _mm256_fmadd_ps(a, b[v], accr[v]);
                    }
                }
                wp = wp.add(PANEL);
            }
        }
        for v in 0..V {
            let (bias, lo, hi) = match &t.ep {
                Some(e) => (
                    if e.bias.is_null() {
                        _mm256_setzero_ps()
                    } else {
                        _mm256_loadu_ps(e.bias.add(v * CB))
                    },
                    _mm256_set1_ps(e.lo),
                    _mm256_set1_ps(e.hi),
                ),
                None => (
                    _mm256_setzero_ps(),
                    _mm256_setzero_ps(),
                    _mm256_setzero_ps(),
                ),
            };
            for (r, accr) in acc.iter().enumerate() {
                let at = v * t.oplane + r * CB;
                let mut s = accr[v];
                if t.accumulate {
                    s = _mm256_add_ps(s, _mm256_loadu_ps(t.y.add(at)));
                }
                if let Some(e) = &t.ep {
                    s = _mm256_add_ps(s, bias);
                    if !e.residual.is_null() {
                        s = _mm256_add_ps(s, _mm256_loadu_ps(e.residual.add(at)));
                    }
                    s = _mm256_min_ps(hi, _mm256_max_ps(lo, s));
                }
                _mm256_storeu_ps(t.y.add(at), s);
            }
        }
    }
}

/// Depthwise convolution of one block: 4 output positions at a time in independent
/// accumulators, one FMA per tap and position.
///
/// # Safety
/// AVX2 and FMA present; as `super::depthwise_block`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn depthwise_block(
    g: &BlockedConv,
    src: *const f32,
    plane: [usize; 2],
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
) {
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let pw = plane[1];
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    // SAFETY: taps inside the padded plane (its extents cover every output's window), ks
    // weight vectors, outputs inside the block.
    unsafe {
        let bias = if ep.bias.is_null() {
            _mm256_setzero_ps()
        } else {
            _mm256_loadu_ps(ep.bias)
        };
        let (lo, hi) = (_mm256_set1_ps(ep.lo), _mm256_set1_ps(ep.hi));
        let store = |at: usize, v: __m256| {
            let mut s = _mm256_add_ps(v, bias);
            if !ep.residual.is_null() {
                s = _mm256_add_ps(s, _mm256_loadu_ps(ep.residual.add(at)));
            }
            _mm256_storeu_ps(y.add(at), _mm256_min_ps(hi, _mm256_max_ps(lo, s)));
        };
        let xs = sw * CB;
        for oy in 0..oh {
            let mut ox = 0;
            while ox + 4 <= ow {
                let mut acc = [_mm256_setzero_ps(); 4];
                for ky in 0..kh {
                    let row = src.add(((oy * sh + ky * dh) * pw + ox * sw) * CB);
                    for kx in 0..kw {
                        let wv = _mm256_loadu_ps(w.add((ky * kw + kx) * CB));
                        let p = row.add(kx * dw * CB);
                        for (j, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_fmadd_ps(_mm256_loadu_ps(p.add(j * xs)), wv, *a);
                        }
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    store((oy * ow + ox + j) * CB, *a);
                }
                ox += 4;
            }
            while ox < ow {
                let mut a = _mm256_setzero_ps();
                for ky in 0..kh {
                    let row = src.add(((oy * sh + ky * dh) * pw + ox * sw) * CB);
                    for kx in 0..kw {
                        let wv = _mm256_loadu_ps(w.add((ky * kw + kx) * CB));
                        a = _mm256_fmadd_ps(_mm256_loadu_ps(row.add(kx * dw * CB)), wv, a);
                    }
                }
                store((oy * ow + ox) * CB, a);
                ox += 1;
            }
        }
    }
}
