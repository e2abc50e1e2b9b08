//! Matrix-vector products (`m ≤ 2` rows of A): one streaming pass over the weights, their
//! columns split over the workers, written once over the SIMD layer. B packed at compile
//! time goes through `GemvPanels`, a run-time B is read in place (`MatrixGemv`).

use super::Epilogue;
use super::kernel::{Dst, store_tile};
use super::pack::NR;
use crate::simd::{self, Simd, Walk};

/// Rows `..m` of C (at `dst`) for `panels` consecutive packed panels of one K block (`k`
/// rows of 16 floats each, `k·NR` floats apart from `bp`): per panel `Σ_kx x_r[kx]·B[kx]`
/// for the `m ≤ 2` rows `x_r` (at `xs[r]`, stride `xstride`), then C added when
/// `dst.accumulate`, the epilogue and the store (`kernel::store_tile`, as the GEMM's tiles
/// do), the last panel masked to the `cols` columns left. Each panel is streamed once: four
/// accumulator chains per row (16/LANES vectors a k step, so 4 k steps at a time with
/// AVX-512, 2 with AVX2), summed pairwise at the end, and prefetches ahead of the stream
/// (the panels of a GEMV are read once, usually from L3: an MLP's layers streamed them at
/// 75-80 GB/s with AVX-512 loads and no prefetch, at about 100 GB/s with one line in two
/// 1 KB ahead; AVX2: every line, 2 KB ahead). Weights `stream`ed from memory (larger than
/// `GEMV_STREAM_BYTES`) have every line prefetched 4 KB ahead: AlexNet's 151 MB first
/// fully connected layer 9.3 → 5.7 ms (16 → 27 GB/s, Zen 4), while the MLP's 1 MB layers
/// ran 10% slower so.
pub(super) struct GemvPanels<'a> {
    pub m: usize,
    pub k: usize,
    pub xs: [*const f32; 2],
    pub xstride: usize,
    pub bp: *const f32,
    pub panels: usize,
    pub cols: usize,
    pub dst: Dst<'a>,
    pub stream: bool,
}

/// Packed weights beyond which a GEMV streams them from memory rather than a cache.
pub(super) const GEMV_STREAM_BYTES: usize = 8 << 20;

impl Walk for GemvPanels<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let nv = NR / S::LANES;
        for q in 0..self.panels {
            // SAFETY: panel q holds k rows of NR floats (contract).
            let sums = unsafe {
                panel_sums(
                    s,
                    self.m,
                    self.k,
                    self.xs,
                    self.xstride,
                    self.bp.add(q * self.k * NR),
                    self.stream,
                )
            };
            let left = self.cols - q * NR;
            let cols = (left < NR).then_some(left);
            let d = Dst {
                // SAFETY: column q·NR of the rows stored (contract).
                c: unsafe { self.dst.c.add(q * NR) },
                col: self.dst.col + q * NR,
                ..self.dst
            };
            // SAFETY: the stored part lies inside C, its epilogue operands inside theirs
            // (contract).
            unsafe {
                match nv {
                    1 => store::<S, 1>(s, &sums, self.m, cols, d),
                    2 => store::<S, 2>(s, &sums, self.m, cols, d),
                    _ => store::<S, 4>(s, &sums, self.m, cols, d),
                }
            }
        }
    }
}

/// The first `V` vectors of each row of `sums` stored by `kernel::store_tile`.
///
/// # Safety
/// As `store_tile` for rows `..m` and `cols`.
#[inline(always)]
unsafe fn store<S: Simd, const V: usize>(
    s: S,
    sums: &[[S::F; 4]; 2],
    m: usize,
    cols: Option<usize>,
    d: Dst,
) {
    let acc: [[S::F; V]; 2] = std::array::from_fn(|r| std::array::from_fn(|v| sums[r][v]));
    // SAFETY: forwarded.
    unsafe { store_tile(s, &acc, m, cols, d) }
}

/// One panel's sums for rows `..m`: `NR / LANES` vectors a row (the rest zero).
///
/// # Safety
/// `bp` holds `k` rows of NR floats (prefetches do not fault); `xs[r]` holds `k` values at
/// stride `xstride`.
#[inline(always)]
unsafe fn panel_sums<S: Simd>(
    s: S,
    m: usize,
    k: usize,
    xs: [*const f32; 2],
    xstride: usize,
    bp: *const f32,
    stream: bool,
) -> [[S::F; 4]; 2] {
    let l = S::LANES;
    // Vectors per panel row, k steps per group of four accumulators.
    let (nv, nu) = (NR / l, (4 * l / NR).max(1));
    let (pf_step, pf_dist) = if stream {
        (16, 1024)
    } else {
        (2 * l, 4096 / l)
    };
    // acc[r][u·nv + v]: vector v of k steps ≡ u (mod nu), row r.
    let mut acc = [[s.zero(); 4]; 2];
    let mut kx = 0;
    // SAFETY: (whole body) as the contract.
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
        let mut sums = [[s.zero(); 4]; 2];
        for (ar, sr) in acc.iter().zip(sums.iter_mut()).take(m) {
            for v in 0..nv {
                sr[v] = match nu {
                    4 => s.add(
                        s.add(ar[v], ar[nv + v]),
                        s.add(ar[2 * nv + v], ar[3 * nv + v]),
                    ),
                    2 => s.add(ar[v], ar[nv + v]),
                    _ => ar[v],
                };
            }
        }
        sums
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
    // its panels. Each K block's sums go to C, added to the blocks' before, the epilogue
    // applied after the last; so C's elements sum the blocks in the order one pass over
    // them would. With k = 0 one empty block stores the epilogue of zero.
    let kb = super::k_block(k);
    let mut p0 = panels.start;
    while p0 < panels.end {
        // Panels up to the end of the range or of p0's column block.
        let count = (panels.end - p0).min(super::NC / NR - p0 % (super::NC / NR));
        let mut pc = 0;
        loop {
            let kc = kb.min(k - pc);
            let last = pc + kc >= k;
            let w = GemvPanels {
                m,
                k: kc,
                // SAFETY: depth pc of each row of op(A).
                xs: xs.map(|x| unsafe { x.add(pc * xstride) }),
                xstride,
                // SAFETY: panel p0 at depth pc of the packed B.
                bp: unsafe { bp.add(super::pack::b_panel_at(n, k, pc, kc, p0)) },
                panels: count,
                cols: n - p0 * NR,
                dst: Dst {
                    // SAFETY: column p0·NR of C.
                    c: unsafe { c.add(p0 * NR) },
                    ldc,
                    accumulate: pc > 0,
                    ep: last.then_some(ep),
                    row: 0,
                    col: p0 * NR,
                },
                stream,
            };
            // SAFETY: the block's panels hold kc rows of NR floats, consecutive
            // (`b_panel_at`); xs[r] kc values at stride xstride; the columns stored are
            // this task's, inside C.
            unsafe { simd::dispatch(w) };
            if last {
                break;
            }
            pc += kc;
        }
        p0 += count;
    }
}

/// y = op(A)·op(B) for m ≤ 2 with B a run-time matrix (not packed at compile time), read in
/// place in one streaming pass, its columns split over `par`'s workers. Packing such a B
/// every call, as the tiled GEMM does, cost a 151 MB fully connected layer 143 ms; read in
/// place, 22 ms (Zen 3).
///
/// `op(A)`'s rows are copied contiguous into `x` first (`m·k` floats), so both of B's
/// orders read A at stride one: a transposed B (`[n, k]` rows) gives each output a dot
/// product of two contiguous rows; an untransposed one (`[k, n]`) adds `x[kx]·B[kx]` for each
/// row of B into four vectors of columns at a time.
///
/// # Safety
/// Operands valid for their dims; `x` holds `m·k` floats.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemv_matrix_b(
    par: crate::par::Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    (b, ldb, tb): (*const f32, usize, bool),
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    x: *mut f32,
) {
    // SAFETY: A holds m rows of op(A) (contract); x m·k floats.
    unsafe {
        for r in 0..m {
            for kx in 0..k {
                let at = if ta { kx * lda + r } else { r * lda + kx };
                *x.add(r * k + kx) = *a.add(at);
            }
        }
    }
    let x = x as *const f32;
    // Columns in units of 64: whole vectors on every implementation.
    const UNIT: usize = 64;
    // SAFETY: each task writes the columns of its own units.
    unsafe {
        par.for_ranges(n.div_ceil(UNIT), m.max(1) * k * UNIT, &|us, _| {
            let cols = us.start * UNIT..(us.end * UNIT).min(n);
            let w = MatrixGemv {
                m,
                k,
                x,
                b,
                ldb,
                tb,
                c,
                ldc,
                ep,
                cols,
            };
            simd::dispatch(w)
        })
    };
}

/// Columns `cols` of `gemv_matrix_b`.
struct MatrixGemv<'a> {
    m: usize,
    k: usize,
    x: *const f32,
    b: *const f32,
    ldb: usize,
    tb: bool,
    c: *mut f32,
    ldc: usize,
    ep: &'a Epilogue,
    cols: std::ops::Range<usize>,
}

impl Walk for MatrixGemv<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let (m, k, l) = (self.m, self.k, S::LANES);
        let (x0, x1) = (self.x, self.x.wrapping_add(k));
        // SAFETY: (whole body) x holds m rows of k floats; B's rows and C's columns accessed
        // are inside them (contract); masked lanes are not accessed.
        unsafe {
            if self.tb {
                // Row j of B is output j's weights: one dot product per row of x, four
                // columns at a time so four rows of B stream together.
                let mut j = self.cols.start;
                while j < self.cols.end {
                    let nj = (self.cols.end - j).min(4);
                    let rows: [*const f32; 4] =
                        std::array::from_fn(|q| self.b.add((j + q.min(nj - 1)) * self.ldb));
                    let mut acc = [[s.zero(); 4]; 2];
                    let mut kx = 0;
                    while kx < k {
                        let mask = (k - kx < l).then(|| s.lanes(0, k - kx));
                        let ld = |p: *const f32| match mask {
                            None => s.load(p.add(kx)),
                            Some(mk) => s.load_or_zero(p.add(kx), mk),
                        };
                        let xv = [ld(x0), if m > 1 { ld(x1) } else { s.zero() }];
                        for (q, row) in rows.iter().enumerate() {
                            let bv = ld(*row);
                            for r in 0..m {
                                acc[r][q] = s.mul_add(xv[r], bv, acc[r][q]);
                            }
                        }
                        kx += l;
                    }
                    for (r, ar) in acc.iter().enumerate().take(m) {
                        for (q, a) in ar.iter().enumerate().take(nj) {
                            let v = s.reduce_add(*a);
                            let col = j + q;
                            *self.c.add(r * self.ldc + col) =
                                super::apply_ep(v, self.ep, r, col, self.ldc);
                        }
                    }
                    j += nj;
                }
            } else {
                // Rows of B are columns' weights for one kx: four vectors of columns summed
                // over every kx, then stored with the epilogue.
                let mut j = self.cols.start;
                while j < self.cols.end {
                    let nj = (self.cols.end - j).min(4 * l);
                    let masks: [Option<S::M>; 4] = std::array::from_fn(|v| {
                        (nj < (v + 1) * l).then(|| s.lanes(0, nj.saturating_sub(v * l)))
                    });
                    let mut acc = [[s.zero(); 4]; 2];
                    for kx in 0..k {
                        let row = self.b.add(kx * self.ldb + j);
                        let xs = [*x0.add(kx), if m > 1 { *x1.add(kx) } else { 0.0 }];
                        for (v, mk) in masks.iter().enumerate() {
                            if v * l >= nj {
                                break;
                            }
                            let bv = match mk {
                                None => s.load(row.add(v * l)),
                                Some(mk) => s.load_or_zero(row.add(v * l), *mk),
                            };
                            for r in 0..m {
                                acc[r][v] = s.mul_add(s.splat(xs[r]), bv, acc[r][v]);
                            }
                        }
                    }
                    let d = Dst {
                        c: self.c.add(j),
                        ldc: self.ldc,
                        accumulate: false,
                        ep: Some(self.ep),
                        row: 0,
                        col: j,
                    };
                    store_tile(s, &acc, m, (nj < 4 * l).then_some(nj), d);
                    j += nj;
                }
            }
        }
    }
}
