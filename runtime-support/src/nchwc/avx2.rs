//! AVX2+FMA kernels of the blocked convolution: the GEMM register tile (up to 6 output
//! positions × 2 output blocks, 12 ymm accumulators; per input channel two weight loads and
//! one broadcast per position), looped over a run of positions, and the depthwise row loop.

use super::{BlockedConv, CB, DwPlan, Epilogue, PANEL, ROWS, Run};
use std::arch::x86_64::*;

/// All register tiles of a run: full tiles of 6 positions, then one of the rest.
///
/// # Safety
/// AVX2 and FMA present; as `Run`'s fields say.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn positions(t: &Run) {
    // SAFETY: forwarded.
    unsafe {
        match (t.blocks == 2, t.run == CB && t.step == 1) {
            (true, true) => positions_of::<2, true>(t),
            (false, true) => positions_of::<1, true>(t),
            (true, false) => positions_of::<2, false>(t),
            (false, false) => positions_of::<1, false>(t),
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn positions_of<const V: usize, const BLOCKED: bool>(t: &Run) {
    let n = t.origins.len();
    let mut q = 0;
    // A last tile of 1-3 positions has too few accumulator chains to keep both FMA pipes
    // busy (a 7×7 output is 8 tiles of 6 and one of 1): it and the full tile before it become
    // two tiles of 4-5 positions.
    let rem = n % ROWS;
    let full_end = if n > ROWS && (1..=3).contains(&rem) {
        n - rem - ROWS
    } else {
        n - rem
    };
    // SAFETY: forwarded; tiles q..q+R of the run.
    unsafe {
        while q < full_end {
            kernel::<ROWS, V, BLOCKED>(t, q);
            q += ROWS;
        }
        match n - q {
            9 => {
                kernel::<5, V, BLOCKED>(t, q);
                kernel::<4, V, BLOCKED>(t, q + 5);
            }
            8 => {
                kernel::<4, V, BLOCKED>(t, q);
                kernel::<4, V, BLOCKED>(t, q + 4);
            }
            7 => {
                kernel::<4, V, BLOCKED>(t, q);
                kernel::<3, V, BLOCKED>(t, q + 4);
            }
            5 => kernel::<5, V, BLOCKED>(t, q),
            4 => kernel::<4, V, BLOCKED>(t, q),
            3 => kernel::<3, V, BLOCKED>(t, q),
            2 => kernel::<2, V, BLOCKED>(t, q),
            1 => kernel::<1, V, BLOCKED>(t, q),
            _ => {}
        }
    }
}

/// The tile of positions `q..q+R`; `BLOCKED`: entries of 8 k steps at stride 1
/// (unrolled), otherwise the run's `run` and `step` (plain input).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel<const R: usize, const V: usize, const BLOCKED: bool>(t: &Run, q: usize) {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let mut wp = t.w;
    let pos: [*const f32; R] = std::array::from_fn(|r| t.x.wrapping_offset(t.origins[q + r]));
    let (run, step) = if BLOCKED { (CB, 1) } else { (t.run, t.step) };
    let y = t.y.wrapping_add(q * CB);
    // SAFETY: every position offset plus entry offset plus i·step (i < run) is readable;
    // the panel holds offs.len() × run rows of 16 floats; the tile lies inside the output.
    unsafe {
        for &o in t.offs {
            for i in 0..run {
                let b: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * CB)));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let a = _mm256_broadcast_ss(&*pos[r].offset(o).add(i * step));
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

/// Depthwise convolution of one block over the unpadded plane: the interior columns of
/// output rows whose window rows are all inside go 4 outputs at a time (3×3 windows at
/// stride 1 or 2: weights in registers, taps at constant offsets from three row pointers);
/// every other output reads only its valid taps.
///
/// # Safety
/// AVX2 and FMA present; as `super::depthwise_block`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn depthwise_block(
    g: &BlockedConv,
    plan: &DwPlan,
    src: *const f32,
    w: *const f32,
    ep: &Epilogue,
    y: *mut f32,
) {
    let [_, ow] = g.output;
    let [kh, kw] = g.kernel;
    let iw = g.input[1];
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (c0, c1) = (plan.c0, plan.c1);
    let ep = EpVec::new(ep);
    // SAFETY: taps inside the plane, ks weight vectors, outputs inside the block.
    unsafe {
        let k3 = kh == 3 && kw == 3 && dh == 1 && dw == 1 && g.strides[1] <= 2;
        let w3: [__m256; 9] = std::array::from_fn(|t| {
            if k3 {
                _mm256_loadu_ps(w.add(t * CB))
            } else {
                _mm256_setzero_ps()
            }
        });
        for (oy, &(sy, ky0, ky1)) in plan.rows.iter().enumerate() {
            let yrow = oy * ow * CB;
            let generic = |ox: usize| {
                let (sx, kx0, kx1) = plan.cols[ox];
                let mut a = _mm256_setzero_ps();
                for ky in ky0..ky1 {
                    let rp = src.add((sy + (ky * dh) as i64) as usize * iw * CB);
                    for kx in kx0..kx1 {
                        let ix = (sx + (kx * dw) as i64) as usize;
                        a = _mm256_fmadd_ps(
                            _mm256_loadu_ps(rp.add(ix * CB)),
                            _mm256_loadu_ps(w.add((ky * kw + kx) * CB)),
                            a,
                        );
                    }
                }
                ep.store(y, yrow + ox * CB, a);
            };
            if (ky0, ky1) != (0, kh) || c0 >= c1 {
                for ox in 0..ow {
                    generic(ox);
                }
                continue;
            }
            for ox in (0..c0).chain(c1..ow) {
                generic(ox);
            }
            let mut ox = c0;
            if k3 {
                let rows: [*const f32; 3] = std::array::from_fn(|ky| {
                    src.add(((sy as usize + ky) * iw) * CB)
                        .offset(plan.cols[c0].0 as isize * CB as isize)
                });
                let n = c1 - c0;
                if g.strides[1] == 1 {
                    dw3x3_row::<1>(rows, &w3, n, y, &ep, yrow + c0 * CB);
                } else {
                    dw3x3_row::<2>(rows, &w3, n, y, &ep, yrow + c0 * CB);
                }
                ox += n;
            }
            while ox < c1 {
                generic(ox);
                ox += 1;
            }
        }
    }
}

/// A depthwise epilogue with its vectors loaded once.
#[derive(Clone, Copy)]
struct EpVec {
    bias: __m256,
    lo: __m256,
    hi: __m256,
    residual: *const f32,
}

impl EpVec {
    #[target_feature(enable = "avx2")]
    fn new(ep: &Epilogue) -> EpVec {
        EpVec {
            bias: if ep.bias.is_null() {
                _mm256_setzero_ps()
            } else {
                // SAFETY: AVX2 is enabled on this function; a non-null bias holds the block's 8
                // floats.
                unsafe { _mm256_loadu_ps(ep.bias) }
            },
            lo: _mm256_set1_ps(ep.lo),
            hi: _mm256_set1_ps(ep.hi),
            residual: ep.residual,
        }
    }

    /// Stores `v` plus the epilogue at `plane + at` (the residual is laid out like the
    /// block's output plane).
    ///
    /// # Safety
    /// `at` is inside the output plane.
    #[inline(always)]
    unsafe fn store(&self, plane: *mut f32, at: usize, v: __m256) {
        // SAFETY: caller contract; AVX2 is enabled in every caller.
        unsafe {
            let mut s = _mm256_add_ps(v, self.bias);
            if !self.residual.is_null() {
                s = _mm256_add_ps(s, _mm256_loadu_ps(self.residual.add(at)));
            }
            _mm256_storeu_ps(
                plane.add(at),
                _mm256_min_ps(self.hi, _mm256_max_ps(self.lo, s)),
            );
        }
    }
}

/// `n` outputs of a 3×3 depthwise row at stride `S`, four at a time, then one at a time:
/// input rows `rows` start at the first output's window, which goes to `plane + at0`.
///
/// # Safety
/// AVX2 and FMA present; every window is inside the rows; `n` outputs from `at0`.
#[target_feature(enable = "avx2,fma")]
unsafe fn dw3x3_row<const S: usize>(
    rows: [*const f32; 3],
    w: &[__m256; 9],
    n: usize,
    plane: *mut f32,
    ep: &EpVec,
    at0: usize,
) {
    let w = *w;
    let mut r = rows;
    let mut j = 0;
    // SAFETY: caller contract.
    unsafe {
        while j + 4 <= n {
            let mut acc = [_mm256_setzero_ps(); 4];
            for (ky, rp) in r.iter().enumerate() {
                for kx in 0..3 {
                    for (o, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(
                            _mm256_loadu_ps(rp.add((o * S + kx) * CB)),
                            w[ky * 3 + kx],
                            *a,
                        );
                    }
                }
            }
            for (o, a) in acc.iter().enumerate() {
                ep.store(plane, at0 + (j + o) * CB, *a);
            }
            for rp in r.iter_mut() {
                *rp = rp.add(4 * S * CB);
            }
            j += 4;
        }
        while j < n {
            let mut a = _mm256_setzero_ps();
            for (ky, rp) in r.iter().enumerate() {
                for kx in 0..3 {
                    a = _mm256_fmadd_ps(_mm256_loadu_ps(rp.add(kx * CB)), w[ky * 3 + kx], a);
                }
            }
            ep.store(plane, at0 + j * CB, a);
            for rp in r.iter_mut() {
                *rp = rp.add(S * CB);
            }
            j += 1;
        }
    }
}
