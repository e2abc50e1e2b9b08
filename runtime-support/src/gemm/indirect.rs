//! C = A_packed · B with B read through row offsets (`gemm_indirect_b`): the indirect convolution path's product.

use super::*;

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
    // Split over the workers in whole tiles, each task running the whole K loop over its
    // block: every C element is summed in the same order whatever the split. Columns, one
    // range a worker, unless a split of the rows balances the workers better: DenseNet-121's
    // 128→32 3×3 convolutions at 14×14 (five 48-column tiles over 32 rows) ran 3 and 2
    // tiles on 2 workers; 16 rows each are even.
    let row_step = if narrow {
        MR
    } else if rows8 {
        8
    } else {
        2 * MR
    };
    let tile_work = rows * k * col_step;
    let col_units = n.div_ceil(col_step);
    let row_units = rows.div_ceil(row_step);
    let tasks = par.tasks(
        col_units.saturating_mul(tile_work),
        crate::par::MIN_TASK_WORK,
        1,
        col_units.max(row_units),
    );
    let by_cols = col_units.div_ceil(tasks) * col_step * rows;
    let by_rows = row_units.div_ceil(tasks) * row_step * col_units * col_step;
    let block = |r: std::ops::Range<usize>, u: std::ops::Range<usize>| {
        let (j0, j1) = (u.start * col_step, (u.end * col_step).min(n));
        let mut pc = 0;
        while pc < k {
            let kc = k_block(k).min(k - pc);
            let first = pc == 0;
            let mut ic = r.start;
            while ic < r.end {
                // MC is a multiple of 8 and of MR.
                let mc = MC.min(r.end - ic);
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
                            let d = kernel::Dst::plain(ct, ldc, !first);
                            if narrow {
                                kernel::tile_indirect_6x16(kc, apan, b, o, d);
                            } else if rows8 {
                                let a0 = a.add(pack::a_panel_at(m, pc, kc, 0));
                                kernel::tile_indirect_8x48(kc, a0, row, b, o, d);
                            } else {
                                kernel::tile_indirect(wide, kc, apan, apan.add(kc * MR), b, o, d);
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
    if tasks > 1 && by_rows < by_cols {
        // SAFETY: the tasks write disjoint row ranges of C, in whole tiles.
        unsafe {
            par.run(tasks, &|t, _| {
                let at = |i: usize| (i * row_units / tasks * row_step).min(rows);
                block(at(t)..at(t + 1), 0..col_units)
            })
        };
    } else {
        // SAFETY: the tasks write disjoint column ranges of C.
        unsafe { par.for_ranges(col_units, tile_work, &|u, _| block(0..rows, u)) };
    }
}
