//! Single-precision GEMM: `C[m×n] = A[m×k] · B[k×n]` (+ epilogue), cache-blocked around a
//! 6×16 register-tile micro-kernel.
//!
//! Operands are read through *packed panels*: A as panels of `MR` rows, B as panels of `NR`
//! columns, zero-padded at the edges and ordered the way the blocked loops consume them (A:
//! `[K block][⌈m/MR⌉][kc][MR]`, B: `[column block][K block][panel][kc][NR]`; see
//! `pack::a_panel_at` and `pack::b_panel_at`), so packed weights stream sequentially. The compiler packs
//! constant operands (weights) at compile time with the same functions; other operands are
//! packed per call into caller-provided scratch. The packed layout does not depend on the CPU:
//! the AVX2+FMA micro-kernel and the portable one read the same panels.

mod gemv;
mod kernel;
pub mod pack;

use crate::par::{Par, ScratchNeed, Slots, Threads};
use std::ops::Range;

pub use kernel::apply_ep;
pub use pack::{MR, NR, packed_a_len, packed_b_len};

/// Cache blocking: K block (panels stay in L1), M block (A block in L2), N block (B block in L3).
/// KC is the largest K block; K is split into equal blocks (`k_block`), so that a K just above
/// a multiple of KC does not leave a sliver whose C tile loads and stores cost more than its
/// few multiply-adds.
pub const KC: usize = 256;
pub const MC: usize = 72;
/// Rows of C per block in `gemm_packed_a`: every column tile of the B block is computed for
/// 12 rows (one 12-row tile) before the next 12 rows start, so at most 12 rows of C (and of
/// a residual) are written at once. With 72-row blocks, 72 output rows `ldc` floats apart
/// were streamed concurrently, more than the hardware prefetchers follow: layers writing
/// outputs that are not in cache (every layer of a real model, rarely a benchmark loop) ran
/// up to 1.7x slower (ResNet-50's 64→256 1×1 convs with residual 1.9 → 1.15 ms, SqueezeNet's
/// 16→64 expands 0.16 → 0.085 ms). B panels are re-read from L2 per 12 rows instead of per
/// 72, which measured neutral on in-cache GEMMs (`benches/gemm.rs`). A rest of 16 rows is
/// one block (two 8-row tiles) rather than 12 + 4.
pub const MC_A: usize = 12;
pub const NC: usize = 1024;
/// Bytes of a B block's columns processed by every row block before the next columns
/// (`gemm_packed_a`), sized for L2.
const B_L2_BYTES: usize = 256 << 10;

/// Work applied to C after the product, while the tile is in registers/cache:
/// `C = clamp(acc + bias_row[m] + bias_col[n] + residual[m, n], lo, hi)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    /// Per-row bias (length m), or null.
    pub bias_row: *const f32,
    /// Per-column bias (length n), or null.
    pub bias_col: *const f32,
    /// A tensor laid out like C (same ldc) to add, or null.
    pub residual: *const f32,
    pub lo: f32,
    pub hi: f32,
}

impl Epilogue {
    pub const NONE: Epilogue = Epilogue {
        bias_row: std::ptr::null(),
        bias_col: std::ptr::null(),
        residual: std::ptr::null(),
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
    };

    /// # Safety
    /// `clamp` is null or points to `[lo, hi]`.
    pub unsafe fn from_parts(
        bias_row: *const f32,
        bias_col: *const f32,
        residual: *const f32,
        clamp: *const f32,
    ) -> Epilogue {
        // SAFETY: caller contract.
        let (lo, hi) = unsafe { crate::clamp_bounds(clamp) };
        Epilogue {
            bias_row,
            bias_col,
            residual,
            lo,
            hi,
        }
    }
}

/// How B is provided to the blocked loop.
pub enum BSource<'a> {
    /// Fully packed (`packed_b_len(k, n)` floats), e.g. weights packed at compile time.
    Packed(*const f32),
    /// A row-major (or transposed) matrix, packed block by block into scratch.
    Matrix {
        b: *const f32,
        ldb: usize,
        trans: bool,
    },
    /// Packs `rows` k..k+kc of columns n..n+nc into `dst` (panels of NR) — e.g. im2col.
    Custom(&'a dyn Fn(usize, usize, usize, usize, *mut f32)),
}

/// The K block for a depth of `k`: ⌈k / ⌈k / KC⌉⌉ rounded up to 8 (at most KC).
pub fn k_block(k: usize) -> usize {
    let blocks = k.div_ceil(KC).max(1);
    k.div_ceil(blocks).next_multiple_of(8).min(KC)
}

/// Whether the wide kernels read a row-major B in place instead of packing it. Packing costs
/// about one pass over B per call, which a product with few rows of A cannot amortize (B is
/// reused once per 12 rows). Reading in place streams kc rows of B at stride `ldb` instead,
/// which is as fast or faster for every shape measured (`benches/gemm.rs`; up to 1.4x for
/// 16-64 rows) unless the rows collide in the L1 cache: with 64-byte lines and 64 sets, rows
/// `ldb` floats apart fall into only 64 / gcd(ldb / 16, 64) sets when ldb is a multiple of
/// 16 (a 1024-wide B read in place ran at 43% of peak instead of 63% packed).
/// `m` is the number of rows of A.
fn read_b_in_place(kern: kernel::Kern, ldb: usize, m: usize, k: usize) -> bool {
    // Past a few hundred rows of A the one packing pass is amortized and aligned contiguous
    // panels win (measured 4-10% on 512-1000-row pointwise convs).
    if m > 256 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if kern == kernel::Kern::Avx512 || kern == kernel::Kern::Avx2Fma {
        let sets = if !ldb.is_multiple_of(16) {
            64
        } else {
            64 / gcd(ldb / 16, 64)
        };
        // The AVX2 tiles read one 64-byte row segment per k step: rows that are not 64-byte
        // aligned split every read over two lines, which a deep K block no longer keeps in
        // L1 (Zen 3, 1024→256 1×1 at 14×14, ldb 196: 88 → 83 GFLOP/s in place); shallow ones
        // still gain (16→64 at 55×55, ldb 3025: 54 → 62).
        if kern == kernel::Kern::Avx2Fma && !ldb.is_multiple_of(16) && k > 64 {
            return false;
        }
        return sets >= 16;
    }
    let _ = (kern, ldb, k);
    false
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Scratch floats `gemm` needs for the given B source and dims.
pub fn scratch_len(n: usize, b_packed: bool) -> usize {
    if b_packed {
        0
    } else {
        KC * NC.min(n.div_ceil(NR) * NR)
    }
}

/// How a GEMM's C is split over workers: `rows` × `cols` blocks, task `t` taking row block
/// `t / cols` and column block `t % cols`. Blocks are whole units — `MC_A` rows (so row
/// blocks start where a sequential run's do) and 32 columns (whole tiles of every kernel) —
/// dealt out evenly: block `i` of `b` over `u` units takes units `i·u/b .. (i+1)·u/b` (a
/// uniform block size left the last block a sliver: ResNet-50's 14×14 pointwise layers
/// split 196 columns as 64, 64, 64, 4). Columns first, as every block of rows reads all of
/// B; another shape where its modelled time (`Split::cost`: each block's multiply-adds and
/// reads of A and B, the tasks claimed in order by the first free worker) is at least an
/// eighth shorter. So a tall product with few columns splits rows: SqueezeNet's 512→1000
/// classifier at 13×13 (169 columns) made 4 blocks of 32, 64, 32 and 41 columns, each
/// streaming all 2 MB of A, 62% of the work on one of 2 workers; rows give 4 equal blocks
/// of a quarter of A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub rows: usize,
    pub cols: usize,
    /// Row and column units of the whole C.
    row_units: usize,
    col_units: usize,
    row_unit: usize,
    col_unit: usize,
}

/// Multiply-adds below which a GEMM (or a convolution's) task is not worth a thread.
pub const MIN_TASK_MACS: usize = 1 << 17;

impl Split {
    /// One block: the whole C.
    pub fn whole(m: usize, n: usize) -> Split {
        Split {
            rows: 1,
            cols: 1,
            row_units: 1,
            col_units: 1,
            row_unit: m.max(1),
            col_unit: n.max(1),
        }
    }

    /// The split of an m × n × k product over `par`'s workers, about two tasks per worker
    /// when the work allows, shaped for the least `cost`. `packs_b`: every task packs the
    /// columns of B it reads (B neither pre-packed nor read in place).
    pub fn of(par: &Par, m: usize, n: usize, k: usize, packs_b: bool) -> Split {
        let (row_unit, col_unit) = (MC_A, 2 * NR);
        let (tr, tc) = (m.div_ceil(row_unit), n.div_ceil(col_unit));
        let macs = m.saturating_mul(n).saturating_mul(k.max(1));
        let t = par.tasks(macs, MIN_TASK_MACS, 2, tr.saturating_mul(tc));
        if t <= 1 {
            return Split::whole(m, n);
        }
        let w = par.workers();
        let split = |cols: usize| Split {
            rows: tr.min(t.div_ceil(cols)),
            cols,
            row_units: tr,
            col_units: tc,
            row_unit,
            col_unit,
        };
        // Columns first (every block of rows reads all of B); another shape only where it
        // is clearly cheaper, since the cost is a model.
        let first = split(tc.min(t));
        let mut best = (first.cost(m, n, k, w, packs_b), first);
        let bar = best.0 - best.0 / 8;
        // Fewer columns by halves (a few shapes: this runs on every call).
        let mut cols = tc.min(t);
        while cols > 1 {
            cols /= 2;
            let s = split(cols);
            let c = s.cost(m, n, k, w, packs_b);
            if c < bar && c < best.0 {
                best = (c, s);
            }
        }
        best.1
    }

    /// The time the split takes, in multiply-adds: its blocks' multiply-adds and reads
    /// (`READ_COST` each float of A and of B, twice that for B a task packs), the tasks
    /// claimed in order by whichever of the `w` workers is free first, as the pools do; for
    /// many workers, the bound max(largest block, total / workers).
    fn cost(&self, m: usize, n: usize, k: usize, w: usize, packs_b: bool) -> usize {
        /// Multiply-adds a core does in the time it reads one float from L2 or L3 (Zen 4:
        /// 32 a cycle against 32 bytes a cycle from L2).
        const READ_COST: usize = 4;
        /// Workers simulated (their tasks at most twice as many).
        const SIMULATED: usize = 8;
        let b_cost = if packs_b { 2 * READ_COST } else { READ_COST };
        let block = |rows: usize, cols: usize| {
            (rows.saturating_mul(cols))
                .saturating_add(rows.saturating_mul(READ_COST))
                .saturating_add(cols.saturating_mul(b_cost))
                .saturating_mul(k)
        };
        let w = w.max(1);
        if w <= SIMULATED && self.tasks() <= 2 * SIMULATED {
            let mut free = [0usize; SIMULATED];
            for t in 0..self.tasks() {
                let (r, c) = self.block(t, m, n);
                let i = (0..w).min_by_key(|&i| free[i]).unwrap_or(0);
                free[i] = free[i].saturating_add(block(r.len(), c.len()));
            }
            return free[..w].iter().copied().max().unwrap_or(0);
        }
        // Every column block covers all m rows and every row block all n columns.
        let largest = block(
            (self.row_units.div_ceil(self.rows) * self.row_unit).min(m),
            (self.col_units.div_ceil(self.cols) * self.col_unit).min(n),
        );
        let total = (m.saturating_mul(n))
            .saturating_add(m.saturating_mul(self.cols).saturating_mul(READ_COST))
            .saturating_add(n.saturating_mul(self.rows).saturating_mul(b_cost))
            .saturating_mul(k);
        largest.max(total / w)
    }

    pub fn tasks(&self) -> usize {
        self.rows * self.cols
    }

    /// Task `t`'s rows and columns of an m × n C.
    pub fn block(&self, t: usize, m: usize, n: usize) -> (Range<usize>, Range<usize>) {
        let (r, c) = (t / self.cols, t % self.cols);
        let part = |i: usize, blocks: usize, units: usize, unit: usize, len: usize| {
            ((i * units / blocks * unit).min(len))..(((i + 1) * units / blocks * unit).min(len))
        };
        (
            part(r, self.rows, self.row_units, self.row_unit, m),
            part(c, self.cols, self.col_units, self.col_unit, n),
        )
    }
}

/// C = A_packed · B (+ epilogue), split over `par`'s workers (`Split::of`). `a` holds
/// `packed_a_len(m, k)` floats.
///
/// # Safety
/// All pointers valid for their dims; every slot of `scratch` holds
/// `scratch_len(n, matches!(b, Packed))` floats (one slot per worker); C does not alias A,
/// B or scratch; a `Custom` packer may run on several threads at once (for distinct blocks
/// of columns).
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm_packed_a(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: Slots,
) {
    if m == 0 || n == 0 {
        return;
    }
    let packs_b = match b {
        BSource::Packed(_) => false,
        BSource::Matrix {
            trans: false, ldb, ..
        } => !read_b_in_place(kernel::select(), ldb, m, k),
        _ => true,
    };
    let split = Split::of(&par, m, n, k, packs_b);
    // SAFETY: the blocks partition C; each task packs into its worker's slot.
    unsafe {
        par.run(split.tasks(), &|t, w| {
            let (rows, cols) = split.block(t, m, n);
            packed_a_block(m, n, k, a, &b, c, ldc, ep, scratch.at(w), rows, cols);
        })
    };
}

/// Rows `rows` × columns `cols` of `gemm_packed_a`'s C (both from the start of a block of
/// `Split`: rows at a multiple of `MC_A`, columns of 32), B packed into `scratch`.
///
/// # Safety
/// As `gemm_packed_a`, `scratch` one slot.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
unsafe fn packed_a_block(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: &BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: *mut f32,
    rows: Range<usize>,
    cols: Range<usize>,
) {
    let kern = kernel::select();
    let mut jc = cols.start;
    while jc < cols.end {
        // Column blocks on the NC grid of the whole C, which a packed B's layout follows.
        let nc = (jc / NC * NC + NC).min(cols.end) - jc;
        let mut pc = 0;
        loop {
            let kc = k_block(k).min(k - pc);
            let first = pc == 0;
            let last = pc + kc >= k;
            // B block: panels of NR columns, each kc deep. A row-major B may instead be read
            // in place by the wide kernels for its whole 32-column tiles (`direct` columns);
            // only the rest is packed.
            let direct = match b {
                BSource::Matrix {
                    trans: false, ldb, ..
                } if read_b_in_place(kern, *ldb, m, k) => {
                    nc / kernel::wide(kern) * kernel::wide(kern)
                }
                _ => 0,
            };
            let (bp, b_panel_stride) = match b {
                BSource::Packed(p) => {
                    // SAFETY: the block's first panel in the full packed B.
                    (
                        unsafe { p.add(pack::b_panel_at(n, k, pc, kc, jc / NR)) },
                        kc * NR,
                    )
                }
                BSource::Matrix { b, ldb, trans } => {
                    if direct < nc {
                        // SAFETY: scratch holds KC × nc (rounded to NR) floats.
                        unsafe {
                            pack::pack_b_block(
                                *b,
                                *ldb,
                                *trans,
                                pc,
                                kc,
                                jc + direct,
                                nc - direct,
                                scratch,
                            )
                        };
                    }
                    (scratch as *const f32, kc * NR)
                }
                BSource::Custom(f) => {
                    f(pc, kc, jc, nc, scratch);
                    (scratch as *const f32, kc * NR)
                }
            };
            // The 32 columns of B at block column jr, for the wide kernels.
            #[cfg(target_arch = "x86_64")]
            let wide_b = |jr: usize, width: usize| -> kernel::BPanels {
                if jr < direct {
                    let BSource::Matrix { b, ldb, .. } = b else {
                        unreachable!("direct columns come from a matrix")
                    };
                    // SAFETY: rows pc..pc+kc, columns jc+jr..jc+jr+32 lie inside B.
                    let b0 = unsafe { b.add(pc * ldb + jc + jr) };
                    // SAFETY: as above.
                    kernel::BPanels {
                        b0,
                        // SAFETY: jr < direct, a whole 32-column tile read in place, so columns
                        // jc+jr+NR..jc+jr+32 of row pc exist: b0 + NR is inside B.
                        b1: unsafe { b0.add(NR) },
                        step: *ldb,
                    }
                } else {
                    // SAFETY: panel (jr - direct)/NR of the packed block, and the next one when
                    // the tile is wider than one panel.
                    let b0 = unsafe { bp.add(((jr - direct) / NR) * b_panel_stride) };
                    // SAFETY: as above.
                    kernel::BPanels {
                        b0,
                        b1: if width > NR {
                            // SAFETY: width > NR, so the packed block has a next panel,
                            // b_panel_stride floats on.
                            unsafe { b0.add(b_panel_stride) }
                        } else {
                            b0
                        },
                        step: NR,
                    }
                }
            };
            // Column sub-blocks whose B panels fit in L2 (a 256-deep block of 1024 columns is
            // 1 MB, twice Zen 3's L2): every row block of A passes over one sub-block before
            // the next, so B is read from L3 once instead of once per 12 rows.
            let sub = (B_L2_BYTES / (kc.max(1) * 4)).next_multiple_of(2 * NR);
            let mut jr0 = 0;
            while jr0 < nc {
                let jr1 = (jr0 + sub).min(nc);
                let mut ic = rows.start;
                while ic < rows.end {
                    let rem = rows.end - ic;
                    let mc = if rem == 16 { 16 } else { MC_A.min(rem) };
                    let step = kernel::wide(kern);
                    // A 16-row block goes in two 8-row tiles (a 12-row tile would leave a 4-row
                    // remainder at half the FMAs per load).
                    let split = if step == 2 * NR && mc == 16 { 0 } else { mc };
                    let mut jr = jr0;
                    while jr < jr1 {
                        let width = step.min(jr1 - jr);
                        // SAFETY: panel jr/NR of the B block (the packed path: no direct columns).
                        let bpan =
                            unsafe { bp.add((jr.saturating_sub(direct) / NR) * b_panel_stride) };
                        let mut ir = 0;
                        while ir < mc {
                            let mr = MR.min(mc - ir);
                            let row = ic + ir;
                            // SAFETY: panel row/MR of packed A in the K block at pc.
                            let apan = unsafe { a.add(pack::a_panel_at(m, pc, kc, row / MR)) };
                            // SAFETY: C tile within bounds.
                            let ct = unsafe { c.add(row * ldc + jc + jr) };
                            let tile_ep = if last { Some(ep) } else { None };
                            #[cfg(target_arch = "x86_64")]
                            if ir >= split {
                                // SAFETY: rows row..row+8 lie in this panel (from row % MR) and the
                                // next; up to 32 B columns (packed zero-padded ones when fewer).
                                unsafe {
                                    kernel::tile8_offset(
                                        kc,
                                        apan,
                                        apan.add(kc * MR),
                                        wide_b(jr, width),
                                        ct,
                                        ldc,
                                        width,
                                        !first,
                                        tile_ep,
                                        row,
                                        jc + jr,
                                    );
                                }
                                ir += 8;
                                continue;
                            }
                            #[cfg(target_arch = "x86_64")]
                            if step == 2 * NR && width == 2 * NR && ir + 2 * MR <= mc {
                                // SAFETY: two A panels (rows row..row+12) and 32 B columns.
                                unsafe {
                                    kernel::tile_wide12(
                                        kc,
                                        apan,
                                        apan.add(kc * MR),
                                        wide_b(jr, width),
                                        ct,
                                        ldc,
                                        !first,
                                        tile_ep,
                                        row,
                                        jc + jr,
                                    );
                                }
                                ir += 2 * MR;
                                continue;
                            }
                            // 7-12 rows left, or 12 rows over a column remainder: one tile of 8 or
                            // 12 rows (the A panels are zero-padded to whole panels of the matrix).
                            #[cfg(target_arch = "x86_64")]
                            if step == 2 * NR && mc - ir > MR {
                                let rows = (mc - ir).min(2 * MR);
                                // SAFETY: two A panels (rows row..row+12 of the padded packing);
                                // 32 B columns, or (a column remainder, always packed) up to 32
                                // zero-padded ones.
                                unsafe {
                                    kernel::tile_wide12_partial(
                                        kc,
                                        apan,
                                        apan.add(kc * MR),
                                        wide_b(jr, width),
                                        ct,
                                        ldc,
                                        rows,
                                        width,
                                        !first,
                                        tile_ep,
                                        row,
                                        jc + jr,
                                    );
                                }
                                ir += rows;
                                continue;
                            }
                            #[cfg(target_arch = "x86_64")]
                            if step == 2 * NR {
                                // SAFETY: up to 32 B columns; a 6×32 tile (partial at edges).
                                unsafe {
                                    if width == 2 * NR && mr == MR {
                                        kernel::tile_wide(
                                            kc,
                                            apan,
                                            wide_b(jr, width),
                                            ct,
                                            ldc,
                                            !first,
                                            tile_ep,
                                            row,
                                            jc + jr,
                                        );
                                    } else {
                                        kernel::tile_wide_partial(
                                            kc,
                                            apan,
                                            wide_b(jr, width),
                                            ct,
                                            ldc,
                                            mr,
                                            width,
                                            !first,
                                            tile_ep,
                                            row,
                                            jc + jr,
                                        );
                                    }
                                }
                                ir += MR;
                                continue;
                            }
                            // One or two 16-wide tiles.
                            let mut off = 0;
                            while off < width {
                                let nr = NR.min(width - off);
                                #[cfg(target_arch = "x86_64")]
                                if jr + off < direct {
                                    let BSource::Matrix { b, ldb, .. } = b else {
                                        unreachable!("direct columns come from a matrix")
                                    };
                                    // SAFETY: rows pc..pc+kc, columns jc+jr+off..+16 lie inside B;
                                    // the mr × 16 tile lies inside C.
                                    unsafe {
                                        kernel::tile_b_in_place(
                                            kc,
                                            apan,
                                            b.add(pc * ldb + jc + jr + off),
                                            *ldb,
                                            ct.add(off),
                                            ldc,
                                            mr,
                                            !first,
                                            tile_ep,
                                            row,
                                            jc + jr + off,
                                        )
                                    };
                                    off += NR;
                                    continue;
                                }
                                // SAFETY: panels have kc entries; tile is mr × nr inside C.
                                unsafe {
                                    kernel::tile(
                                        kern,
                                        kc,
                                        apan,
                                        bpan.add((off / NR) * b_panel_stride),
                                        ct.add(off),
                                        ldc,
                                        mr,
                                        nr,
                                        !first,
                                        tile_ep,
                                        row,
                                        jc + jr + off,
                                    )
                                };
                                off += NR;
                            }
                            ir += MR;
                        }
                        jr += width;
                    }
                    ic += mc;
                }
                jr0 = jr1;
            }
            pc += kc;
            if pc >= k {
                break;
            }
        }
        // k == 0: C = epilogue(0).
        if k == 0 {
            for i in rows.clone() {
                for j in jc..jc + nc {
                    // SAFETY: inside C.
                    unsafe { *c.add(i * ldc + j) = kernel::apply_ep(0.0, ep, i, j, ldc) };
                }
            }
        }
        jc += nc;
    }
}

/// Packs rows `i0..i0+mc`, depths `k0..k0+kc` of an A operand into `[⌈mc/MR⌉][kc][MR]`
/// (arguments: i0, mc, k0, kc, dst).
pub type APacker<'a> = &'a dyn Fn(usize, usize, usize, usize, *mut f32);

/// Scratch floats `gemm_packed_b` needs: one packed A block.
pub fn packed_b_scratch_len() -> usize {
    MC.div_ceil(MR) * MR * KC
}

/// C = A · B_packed with A packed block by block by `pack_a` and B packed whole (`pack_b`
/// layout, e.g. weights packed at compile time); no epilogue. This is the orientation for
/// products with few rows of A streaming many columns of weights (convolutions with small
/// outputs computed pixel-major): the weights stream once, in long contiguous panels.
///
/// Split over `par`'s workers by columns, in whole wide tiles, and by rows where there are
/// fewer column tiles than tasks: each task packs its own A blocks into its worker's slot
/// and runs the whole K loop over its block, so every C element is summed in the same order
/// whatever the split.
///
/// # Safety
/// `b` holds `packed_b_len(k, n)` floats; C (row stride `ldc`) holds the m × n result; each
/// of `par`'s workers' `slots` holds `packed_b_scratch_len()` floats; `pack_a` writes only
/// its block (and may run on several threads at once); k > 0.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm_packed_b(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    pack_a: APacker<'_>,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    slots: Slots,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let kern = kernel::select();
    let step = kernel::wide(kern);
    let cols = |u: Range<usize>, rows: Range<usize>, w: usize| {
        let (j0, j1) = (u.start * step, (u.end * step).min(n));
        let scratch = slots.at(w);
        // Column blocks as the packed layout has them (`pack::b_panel_at`), so the weights
        // stream sequentially; A is packed once per column block. NC is a multiple of
        // `step`, so the task's tiles are the sequential walk's.
        let mut jc = j0 / NC * NC;
        while jc < j1 {
            let nc = NC.min(n - jc);
            let (lo, hi) = (j0.max(jc), j1.min(jc + nc));
            let mut pc = 0;
            while pc < k {
                let kc = k_block(k).min(k - pc);
                let first = pc == 0;
                let mut ic = rows.start;
                while ic < rows.end {
                    let mc = MC.min(rows.end - ic);
                    pack_a(ic, mc, pc, kc, scratch);
                    let mut jr = lo;
                    while jr < hi {
                        let width = step.min(hi - jr);
                        // SAFETY: panel jr/NR of the packed B at depth pc.
                        let bpan = unsafe { b.add(pack::b_panel_at(n, k, pc, kc, jr / NR)) };
                        // SAFETY: the C column block.
                        let cb = unsafe { c.add(jr) };
                        // SAFETY: forwarded; the row block's tiles lie inside C.
                        unsafe {
                            packed_b_row_block(
                                kern, kc, mc, width, scratch, bpan, cb, ic, ldc, first,
                            )
                        };
                        jr += width;
                    }
                    ic += mc;
                }
                pc += kc;
            }
            jc += nc;
        }
    };
    // One task per worker: every task packs all of A's rows it computes (an im2col gather
    // for pixel-major convolutions) for its columns, so more tasks would repeat that work.
    // Columns first; rows (in whole 12-row tiles, where a sequential run's tiles start)
    // when there are fewer column tiles than tasks: a 3×3 128→32 convolution at 7×7
    // (DenseNet-121's last block, one 32-column tile) ran on one thread.
    const ROW_UNIT: usize = 2 * MR;
    let units = n.div_ceil(step);
    let row_units = m.div_ceil(ROW_UNIT);
    let tasks = par.tasks(
        m.saturating_mul(k).saturating_mul(n),
        crate::par::MIN_TASK_WORK,
        1,
        units.saturating_mul(row_units),
    );
    let per = units.div_ceil(tasks.min(units));
    let col_tasks = units.div_ceil(per);
    let row_tasks = (tasks / col_tasks).clamp(1, row_units);
    // SAFETY: the tasks write disjoint blocks of C, each in its worker's slot.
    unsafe {
        par.run(col_tasks * row_tasks, &|t, w| {
            let (cu, ru) = (t % col_tasks, t / col_tasks);
            let row = |i: usize| (i * row_units / row_tasks * ROW_UNIT).min(m);
            cols(
                cu * per..((cu + 1) * per).min(units),
                row(ru)..row(ru + 1),
                w,
            )
        })
    };
}

/// The tiles of rows `ic..ic + mc` × `width` columns of `gemm_packed_b`: A from the packed
/// block `apack`, B from the panels at `bpan` (`kc · NR` floats apart), C at `cb` (column
/// offset applied).
///
/// # Safety
/// As `gemm_packed_b` for this block.
#[allow(clippy::too_many_arguments, reason = "block coordinates")]
unsafe fn packed_b_row_block(
    kern: kernel::Kern,
    kc: usize,
    mc: usize,
    width: usize,
    apack: *const f32,
    bpan: *const f32,
    cb: *mut f32,
    ic: usize,
    ldc: usize,
    first: bool,
) {
    let step = kernel::wide(kern);
    let mut ir = 0;
    while ir < mc {
        let mr = MR.min(mc - ir);
        // SAFETY: panel ir/MR of the packed A block.
        let apan = unsafe { apack.add((ir / MR) * kc * MR) };
        // SAFETY: the tile lies inside C.
        let ct = unsafe { cb.add((ic + ir) * ldc) };
        #[cfg(target_arch = "x86_64")]
        if step == 2 * NR {
            // SAFETY: the second panel exists when the tile is wider than one.
            let panels = kernel::BPanels {
                b0: bpan,
                b1: if width > NR {
                    // SAFETY: width > NR, so bpan's block has a second panel of kc·NR floats after
                    // bpan.
                    unsafe { bpan.add(kc * NR) }
                } else {
                    bpan
                },
                step: NR,
            };
            // SAFETY: panels hold kc steps; tiles inside C.
            unsafe {
                if width == 2 * NR && ir + 2 * MR <= mc {
                    kernel::tile_wide12(
                        kc,
                        apan,
                        apan.add(kc * MR),
                        panels,
                        ct,
                        ldc,
                        !first,
                        None,
                        0,
                        0,
                    );
                    ir += 2 * MR;
                } else {
                    if width == 2 * NR && mr == MR {
                        kernel::tile_wide(kc, apan, panels, ct, ldc, !first, None, 0, 0);
                    } else {
                        kernel::tile_wide_partial(
                            kc, apan, panels, ct, ldc, mr, width, !first, None, 0, 0,
                        );
                    }
                    ir += MR;
                }
            }
            continue;
        }
        let mut off = 0;
        while off < width {
            let nr = NR.min(width - off);
            // SAFETY: panels have kc entries; the tile is mr × nr inside C.
            unsafe {
                kernel::tile(
                    kern,
                    kc,
                    apan,
                    bpan.add((off / NR) * kc * NR),
                    ct.add(off),
                    ldc,
                    mr,
                    nr,
                    !first,
                    None,
                    0,
                    0,
                )
            };
            off += NR;
        }
        ir += MR;
    }
}

/// Whether `gemm_indirect_b` can run on this CPU (it has AVX-512 and AVX2+FMA kernels).
pub fn indirect_b_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        matches!(
            kernel::select(),
            kernel::Kern::Avx512 | kernel::Kern::Avx2Fma
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `gemm_indirect_b` has its wide AVX-512 layouts (12 × 32 and 8 × 48 tiles) on this
/// CPU; with AVX2 alone it computes 6 × 16 tiles.
pub fn indirect_wide_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        kernel::select() == kernel::Kern::Avx512
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `gemm_indirect_b` computes `m` × `n` in 8 × 48 tiles rather than 12 × 32 (and
/// 6 × 32) ones: when `m` is a multiple of 8 and the 12-row layout would compute more
/// (rows rounded up to 6, columns to 32) than the 8-row one (columns rounded up to 48).
/// 32 output channels, DenseNet's growth rate, then take four tiles instead of three
/// 12-row tiles with a third of the last one wasted.
pub fn indirect_rows8(m: usize, n: usize) -> bool {
    if !m.is_multiple_of(8) || !indirect_wide_tiles() {
        return false;
    }
    let work12 = m.next_multiple_of(MR) * n.next_multiple_of(2 * NR);
    let work8 = m * n.next_multiple_of(48);
    work8 < work12
}

/// Columns `gemm_indirect_b` may compute (and read from every B row) for `n` columns, on any
/// CPU: whole 32- or 48-column tiles, whichever layout `indirect_rows8` picks.
pub fn indirect_cols(n: usize) -> usize {
    n.next_multiple_of(2 * NR).max(n.next_multiple_of(48))
}

/// C = A_packed · B where row k of B is read in place at `base + offs[k]` (columns
/// contiguous): an implicit-GEMM convolution over shifted views of a padded input, with no
/// packing of B at all. Whole tiles only: C is computed for ⌈m/MR⌉·MR rows and
/// at most `indirect_cols(n)` columns, and every B row must be readable that far. No
/// epilogue.
///
/// # Safety
/// `indirect_b_available()`; `a` holds `packed_a_len(m, k)` floats; `offs` k entries with
/// `base + offs[kx]` valid for `indirect_cols(n)` floats; C (row stride `ldc` ≥ that)
/// holds ⌈m/MR⌉·MR rows.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm_indirect_b(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    base: *const f32,
    offs: &[isize],
    c: *mut f32,
    ldc: usize,
) {
    debug_assert!(indirect_b_available() && offs.len() == k);
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    // The layout picks the tile shape: with AVX2 alone 6 × 16 over the rows padded to whole
    // A panels; with AVX-512 (`indirect_rows8`) 8 × 48 over the m rows, or 12 × 32 (6 × 32 at
    // a block's end) over the padded rows.
    let narrow = !indirect_wide_tiles();
    let rows8 = indirect_rows8(m, n);
    let (rows, col_step) = if narrow {
        (m.div_ceil(MR) * MR, NR)
    } else if rows8 {
        (m, 48)
    } else {
        (m.div_ceil(MR) * MR, 2 * NR)
    };
    // Columns split over the workers in whole tiles, each task running the whole K loop over
    // its columns: every C element is summed in the same order whatever the split.
    let tile_work = rows * k * col_step;
    let cols = |u: std::ops::Range<usize>, _| {
        let (j0, j1) = (u.start * col_step, (u.end * col_step).min(n));
        let mut pc = 0;
        while pc < k {
            let kc = k_block(k).min(k - pc);
            let first = pc == 0;
            let mut ic = 0;
            while ic < rows {
                // MC is a multiple of 8 and of MR.
                let mc = MC.min(rows - ic);
                let mut jr = j0;
                while jr < j1 {
                    let mut ir = 0;
                    while ir < mc {
                        let row = ic + ir;
                        let wide = !narrow && ir + 2 * MR <= mc;
                        // SAFETY: 8-row tiles: rows row..row+8 exist (m is a multiple of 8), B
                        // rows are valid for 48 columns. Otherwise: A panels row/MR (and the next
                        // when `wide`) exist up to `rows`, B rows are valid for 32 columns (16
                        // with the narrow layout). The tile lies inside C.
                        #[cfg(target_arch = "x86_64")]
                        unsafe {
                            let apan = a.add(pack::a_panel_at(m, pc, kc, row / MR));
                            let (b, o, ct) =
                                (base.add(jr), offs.as_ptr().add(pc), c.add(row * ldc + jr));
                            if narrow {
                                kernel::tile_indirect_6x16(kc, apan, b, o, ct, ldc, !first);
                            } else if rows8 {
                                kernel::tile_indirect_8x48(
                                    kc,
                                    a.add(pack::a_panel_at(m, pc, kc, 0)),
                                    row,
                                    b,
                                    o,
                                    ct,
                                    ldc,
                                    !first,
                                );
                            } else {
                                kernel::tile_indirect(
                                    wide,
                                    kc,
                                    apan,
                                    apan.add(kc * MR),
                                    b,
                                    o,
                                    ct,
                                    ldc,
                                    !first,
                                );
                            }
                        }
                        ir += if rows8 {
                            8
                        } else if wide {
                            2 * MR
                        } else {
                            MR
                        };
                    }
                    jr += col_step;
                }
                ic += mc;
            }
            pc += kc;
        }
    };
    // SAFETY: the tasks write disjoint column ranges of C.
    unsafe { par.for_ranges(n.div_ceil(col_step), tile_work, &cols) };
}

/// General C = op(A) · op(B), split over `par`'s workers: packs A into the shared scratch,
/// and B (unless packed) block by block into each worker's slot.
///
/// # Safety
/// As `gemm_packed_a`; `scratch` holds `gemm_scratch(m, n, k, b_packed)` for `par`'s workers.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    b: BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: *mut f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let b_packed = matches!(b, BSource::Packed(_));
    let (shared, slots) = gemm_scratch(m, n, k, b_packed).layout(scratch);
    // SAFETY: the shared area holds the packed A, the slots the B blocks.
    unsafe {
        pack::pack_a(a, lda, ta, m, k, shared);
        gemm_packed_a(par, m, n, k, shared, b, c, ldc, ep, slots);
    }
}

/// The scratch `gemm` needs (bytes): A packed, shared; a B block per worker unless B is
/// packed.
pub fn gemm_scratch(m: usize, n: usize, k: usize, b_packed: bool) -> ScratchNeed {
    ScratchNeed {
        shared: packed_a_len(m, k) * 4,
        per_worker: scratch_len(n, b_packed) * 4,
    }
}

/// Reference implementation (the oracle in tests): C = op(A)·op(B), then the epilogue.
///
/// # Safety
/// Pointers must be valid for the given dims and leading dimensions.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn sgemm_ref(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    ta: bool,
    b: *const f32,
    ldb: usize,
    tb: bool,
    c: *mut f32,
    ldc: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for p in 0..k {
                // SAFETY: indices are within the caller's matrices.
                unsafe {
                    let x = if ta {
                        *a.add(p * lda + i)
                    } else {
                        *a.add(i * lda + p)
                    };
                    let y = if tb {
                        *b.add(j * ldb + p)
                    } else {
                        *b.add(p * ldb + j)
                    };
                    acc += x * y;
                }
            }
            // SAFETY: as above.
            unsafe { *c.add(i * ldc + j) = acc };
        }
    }
}

/// C ABI: general GEMM, both operands packed per call into `scratch`
/// (`gemm_scratch(m, n, k, false)`), on the run's `threads` (null: one).
///
/// # Safety
/// As `gemm`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe extern "C" fn onnxc_sgemm(
    m: i64,
    n: i64,
    k: i64,
    a: *const f32,
    lda: i64,
    ta: i64,
    b: *const f32,
    ldb: i64,
    tb: i64,
    c: *mut f32,
    ldc: i64,
    bias_row: *const f32,
    bias_col: *const f32,
    residual: *const f32,
    clamp: *const f32,
    scratch: *mut f32,
    threads: *const Threads,
) {
    // SAFETY: clamp is null or two floats.
    let ep = unsafe { Epilogue::from_parts(bias_row, bias_col, residual, clamp) };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let bs = BSource::Matrix {
        b,
        ldb: ldb as usize,
        trans: tb != 0,
    };
    // SAFETY: forwarded contract.
    unsafe {
        gemm(
            par,
            m as usize,
            n as usize,
            k as usize,
            a,
            lda as usize,
            ta != 0,
            bs,
            c,
            ldc as usize,
            &ep,
            scratch,
        )
    }
}

/// C ABI: GEMM with B packed at compile time (`pack::pack_b`), on the run's `threads`.
///
/// # Safety
/// As `gemm`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe extern "C" fn onnxc_sgemm_pb(
    m: i64,
    n: i64,
    k: i64,
    a: *const f32,
    lda: i64,
    ta: i64,
    b_packed: *const f32,
    c: *mut f32,
    ldc: i64,
    bias_row: *const f32,
    bias_col: *const f32,
    residual: *const f32,
    clamp: *const f32,
    scratch: *mut f32,
    threads: *const Threads,
) {
    // SAFETY: clamp is null or two floats.
    let ep = unsafe { Epilogue::from_parts(bias_row, bias_col, residual, clamp) };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (m, n, k) = (m as usize, n as usize, k as usize);
    if m <= 2 {
        // Matrix-vector products stream the weights once.
        // SAFETY: forwarded contract.
        unsafe {
            gemv::gemv_packed_b(
                par,
                m,
                n,
                k,
                a,
                lda as usize,
                ta != 0,
                b_packed,
                c,
                ldc as usize,
                &ep,
            )
        };
        return;
    }
    // SAFETY: forwarded contract.
    unsafe {
        gemm(
            par,
            m,
            n,
            k,
            a,
            lda as usize,
            ta != 0,
            BSource::Packed(b_packed),
            c,
            ldc as usize,
            &ep,
            scratch,
        )
    }
}

#[cfg(test)]
mod tests;

/// The widest register-tile kernel alone on L1-resident panels (for the GEMM benchmark's
/// "micro-kernel" line): C[tile] (+)= A_panels · B_panels over `kc` steps. Returns the tile's
/// (rows, columns), or (0, 0) when this CPU has no wide kernel.
///
/// # Safety
/// `a` holds 12·kc floats, `b` 32·kc, `c` 12 rows of `ldc` ≥ 32.
#[doc(hidden)]
pub unsafe fn microkernel_only(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if kernel::select() == kernel::Kern::Avx512 {
        // SAFETY: caller contract.
        let bp = kernel::BPanels {
            b0: b,
            // SAFETY: b holds 32·kc = 2·NR·kc floats (the contract), so b + NR·kc is its second
            // panel.
            b1: unsafe { b.add(NR * kc) },
            step: NR,
        };
        // SAFETY: AVX-512 was selected (kernel::select checked the CPU); a holds 12·kc = 2·MR·kc
        // floats, b two NR·kc panels and c 12 rows of ldc ≥ 32 (the contract).
        unsafe { kernel::tile_wide12(kc, a, a.add(MR * kc), bp, c, ldc, true, None, 0, 0) };
        return (2 * MR, 2 * NR);
    }
    #[cfg(target_arch = "x86_64")]
    if kernel::select() == kernel::Kern::Avx2Fma {
        // SAFETY: caller contract (a 6 × 16 tile of the 12 × 32 C).
        unsafe {
            kernel::tile(
                kernel::Kern::Avx2Fma,
                kc,
                a,
                b,
                c,
                ldc,
                MR,
                NR,
                true,
                None,
                0,
                0,
            )
        };
        return (MR, NR);
    }
    let _ = (kc, a, b, c, ldc);
    (0, 0)
}
