//! C = A · B_packed (`gemm_packed_b`): A packed block by block, the weights as packed B panels (pixel-major convolutions).

use super::*;

/// Packs rows `i0..i0+mc`, depths `k0..k0+kc` of an A operand into `[⌈mc/MR⌉][kc][MR]`
/// (arguments: i0, mc, k0, kc, dst).
pub type APacker<'a> = &'a dyn Fn(usize, usize, usize, usize, *mut f32);

/// What packing one float of A (a gather from the convolution's input) costs against the
/// kernel's reading of one float of packed B (streamed, mostly hidden behind its
/// multiply-adds): ResNet-50's 256→256 3×3/2 to 14×14 spends about a fifth of its
/// single-thread time packing A (Zen 4).
const A_PACK_COST: usize = 8;

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
    // for pixel-major convolutions) for its columns, and reads all of B's columns it
    // computes for its rows, so more tasks would repeat that work. A split by columns
    // repeats the packing of A (m·k gathered floats a task), one by rows the reading of B
    // (n·k floats, streamed by the kernel): rows (in whole 12-row tiles, where a
    // sequential run's tiles start) where A's packing costs more, as for a strided 3×3
    // convolution to 14×14 (ResNet-50's 256→256: 196 rows against 256 columns), or where
    // there are fewer column tiles than tasks (a 3×3 128→32 convolution at 7×7, DenseNet-121's
    // last block, one 32-column tile, ran on one thread); columns otherwise (7×7 outputs of
    // 512 channels and more: 49 rows).
    const ROW_UNIT: usize = 2 * MR;
    let units = n.div_ceil(step);
    let row_units = m.div_ceil(ROW_UNIT);
    let tasks = par.tasks(
        m.saturating_mul(k).saturating_mul(n),
        crate::par::MIN_TASK_WORK,
        1,
        units.saturating_mul(row_units),
    );
    let (col_tasks, per, row_tasks) = if m.saturating_mul(A_PACK_COST) >= n && row_units >= tasks {
        (1, units, tasks)
    } else {
        let per = units.div_ceil(tasks.min(units));
        let col_tasks = units.div_ceil(per);
        (col_tasks, per, (tasks / col_tasks).clamp(1, row_units))
    };
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
        let d = kernel::Dst::plain(ct, ldc, !first);
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
                    kernel::tile_wide12(kc, apan, apan.add(kc * MR), panels, d);
                    ir += 2 * MR;
                } else {
                    if width == 2 * NR && mr == MR {
                        kernel::tile_wide(kc, apan, panels, d);
                    } else {
                        kernel::tile_wide_partial(kc, apan, panels, mr, width, d);
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
                    mr,
                    nr,
                    d.right(off),
                )
            };
            off += NR;
        }
        ir += MR;
    }
}
