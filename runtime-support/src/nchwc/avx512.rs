//! AVX-512 kernels of the blocked convolution: the GEMM register tile (up to 12 output
//! positions × one panel of 2 output blocks, or up to 6 × two panels of 3-4 blocks; 12 zmm
//! accumulators, each 16 channels; per input channel one weight load a panel and one
//! broadcast a position), looped over a run of positions.
//!
//! The layout stays 8 channels a block (`CB`): a zmm of 16 output channels spans two blocks,
//! whose planes lie `oplane` floats apart, so each accumulator is stored as two 256-bit
//! halves. That keeps every other blocked kernel (depthwise, pooling, reorders, the
//! generated maps) and the compile-time layout one for every ISA; the products, which are
//! nearly all of a convolution's time, run 16 lanes wide.

use super::{CB, PANEL, Run, ZEROS};
use std::arch::x86_64::*;

/// Most positions per register tile over one panel (`V` 1) and over two (`V` 2): 12 or 6
/// positions × `V` zmm accumulators. Two panels take two weight loads and one broadcast per
/// position for each 2 FMAs, one panel a weight load and an embedded broadcast per FMA.
/// Larger tiles over two panels spill: the 8 unrolled k steps of an entry have their 16
/// weight loads scheduled early, and 12 × 2 accumulators leave no room for them.
const TILE: [usize; 3] = [0, 12, 6];

/// All register tiles of a run, as even as `TILE` allows (a run of 14 positions is two
/// tiles of 7, not 12 and 2: a short tile has too few accumulator chains to keep both FMA
/// pipes busy).
///
/// # Safety
/// AVX-512 F/DQ and FMA present; as `Run`'s fields say, `blocks` 1 to 4.
#[target_feature(enable = "avx512f,avx512dq,fma")]
pub unsafe fn positions(t: &Run) {
    // SAFETY: forwarded.
    unsafe {
        match (t.blocks > 2, t.run == CB && t.step == 1) {
            (true, true) => positions_of::<2, true>(t),
            (false, true) => positions_of::<1, true>(t),
            (true, false) => positions_of::<2, false>(t),
            (false, false) => positions_of::<1, false>(t),
        }
    }
}

#[target_feature(enable = "avx512f,avx512dq,fma")]
unsafe fn positions_of<const V: usize, const BLOCKED: bool>(t: &Run) {
    let n = t.origins.len();
    let tiles = n.div_ceil(TILE[V]);
    let mut q = 0;
    for i in 0..tiles {
        // The first `n % tiles` tiles take one position more.
        let r = n / tiles + usize::from(i < n % tiles);
        // SAFETY: forwarded; positions q..q+r of the run.
        unsafe {
            match r {
                12 if V == 1 => tile::<12, 1, BLOCKED>(t, q),
                11 if V == 1 => tile::<11, 1, BLOCKED>(t, q),
                10 if V == 1 => tile::<10, 1, BLOCKED>(t, q),
                9 if V == 1 => tile::<9, 1, BLOCKED>(t, q),
                8 if V == 1 => tile::<8, 1, BLOCKED>(t, q),
                7 if V == 1 => tile::<7, 1, BLOCKED>(t, q),
                6 => tile::<6, V, BLOCKED>(t, q),
                5 => tile::<5, V, BLOCKED>(t, q),
                4 => tile::<4, V, BLOCKED>(t, q),
                3 => tile::<3, V, BLOCKED>(t, q),
                2 => tile::<2, V, BLOCKED>(t, q),
                _ => tile::<1, V, BLOCKED>(t, q),
            }
        }
        q += r;
    }
}

/// The tile of positions `q..q+R`: with the taps checked (`kernel::<…, true>`) when the
/// run has a border and a window of the tile leaves the input.
///
/// # Safety
/// As `kernel`.
#[target_feature(enable = "avx512f,avx512dq,fma")]
#[inline]
unsafe fn tile<const R: usize, const V: usize, const BLOCKED: bool>(t: &Run, q: usize) {
    let inside = match &t.border {
        Some(b) => b.inside[q..q + R].iter().all(|&i| i),
        None => true,
    };
    // SAFETY: forwarded; a border run reads a blocked input (`pads_in_kernel`).
    unsafe {
        if inside {
            kernel::<R, V, BLOCKED, false>(t, q)
        } else {
            kernel::<R, V, true, true>(t, q)
        }
    }
}

/// The tile of positions `q..q+R` over `V` panels (`w`, then `w2`); `BLOCKED`: entries of 8
/// k steps at stride 1 (unrolled), otherwise the run's `run` and `step` (plain input).
/// `CHECKED`: each position's entries whose tap leaves the input (`Border`) read zeros
/// instead.
///
/// # Safety
/// AVX-512 F/DQ and FMA present; as `Run`'s fields say; `CHECKED` only with a border and
/// `BLOCKED`; `V` 2 only with `blocks` > 2.
#[target_feature(enable = "avx512f,avx512dq,fma")]
#[inline]
unsafe fn kernel<const R: usize, const V: usize, const BLOCKED: bool, const CHECKED: bool>(
    t: &Run,
    q: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    let (mut w0, mut w1) = (t.w, t.w2);
    let pos: [*const f32; R] = std::array::from_fn(|r| t.x.wrapping_offset(t.origins[q + r]));
    let corners: [[isize; 2]; R] = std::array::from_fn(|r| match (CHECKED, &t.border) {
        (true, Some(b)) => b.corner(q + r),
        _ => [0, 0],
    });
    let (run, step) = if BLOCKED { (CB, 1) } else { (t.run, t.step) };
    let y = t.y.wrapping_add(q * CB);
    // SAFETY: every position offset plus entry offset plus i·step (i < run) is readable,
    // or (CHECKED) replaced by the zeros where its tap leaves the input; each panel holds
    // offs.len() × run rows of 16 floats (a panel of one block too: its second half is
    // zero); the tile lies inside the output, whose blocks are `oplane` apart.
    unsafe {
        for (e, &o) in t.offs.iter().enumerate() {
            let src: [*const f32; R] = std::array::from_fn(|r| match (CHECKED, &t.border) {
                (true, Some(b)) if !b.tap_inside(corners[r], e) => ZEROS.as_ptr(),
                _ => pos[r].wrapping_offset(o),
            });
            for i in 0..run {
                let b: [__m512; V] =
                    std::array::from_fn(|v| _mm512_loadu_ps(if v == 0 { w0 } else { w1 }));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let a = _mm512_set1_ps(*src[r].add(i * step));
                    for v in 0..V {
                        accr[v] = _mm512_fmadd_ps(a, b[v], accr[v]);
                    }
                }
                w0 = w0.add(PANEL);
                if V == 2 {
                    w1 = w1.add(PANEL);
                }
            }
        }
        // The accumulators as halves, block j of the output in `halves[r][j]`: every
        // index into `acc` is a constant, so that it stays in registers (an index known
        // only at run time would keep the whole array in memory through the loop above).
        let halves: [[__m256; 4]; R] = std::array::from_fn(|r| {
            std::array::from_fn(|j| {
                let z = acc[r][(j / 2).min(V - 1)];
                if j % 2 == 0 {
                    _mm512_castps512_ps256(z)
                } else {
                    _mm512_extractf32x8_ps::<1>(z)
                }
            })
        });
        for j in 0..t.blocks {
            let (bias, lo, hi) = match &t.ep {
                Some(e) => (
                    if e.bias.is_null() {
                        _mm256_setzero_ps()
                    } else {
                        _mm256_loadu_ps(e.bias.add(j * CB))
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
            for (r, h) in halves.iter().enumerate() {
                let at = j * t.oplane + r * CB;
                let mut s = h[j];
                if t.accumulate {
                    s = _mm256_add_ps(s, _mm256_loadu_ps(y.add(at)));
                }
                if let Some(e) = &t.ep {
                    s = _mm256_add_ps(s, bias);
                    if !e.residual.is_null() {
                        s = _mm256_add_ps(s, _mm256_loadu_ps(e.residual.add(q * CB + at)));
                    }
                    s = _mm256_min_ps(hi, _mm256_max_ps(lo, s));
                }
                _mm256_storeu_ps(y.add(at), s);
            }
        }
    }
}
