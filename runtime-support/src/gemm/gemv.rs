//! Matrix-vector products (`m ≤ 2` rows of A against packed B): one streaming pass over the
//! weights, panels split over the workers, written once over the SIMD layer (`GemvPanel`).

use super::pack::NR;
use super::{Epilogue, apply_ep};
use crate::simd::{self, Simd, Walk};

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
