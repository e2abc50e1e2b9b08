//! C = A_packed · B with the fused epilogue (`gemm_packed_a`): weights as packed A panels, B read in place, packed per block or by a custom packer (im2col).
//! `gemm_a_rows`: the same loops over a row-major A read in place (16-column kernels).

use super::*;

/// Where `packed_a_block` reads A.
#[derive(Clone, Copy)]
enum ASource {
    /// `packed_a_len(m, k)` floats in the panel layout (`pack::a_panel_at`).
    Packed(*const f32),
    /// A row-major matrix, rows `lda` floats apart, read in place by the 16-column tiles.
    Rows { a: *const f32, lda: usize },
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
    // SAFETY: forwarded.
    unsafe { gemm_a(par, m, n, k, ASource::Packed(a), b, c, ldc, ep, scratch) }
}

/// `gemm_packed_a` with A an m × k row-major matrix read in place (`lda` floats a row)
/// instead of packed: for the 16-column tiles (`kernel::wide` = NR), which read one A value
/// per row and k step, as packed panels are read, from six rows at a time. Packing an
/// activation first was a pass writing and rereading all of A (a tenth of a 512 × 256 ×
/// 1024 product's time on Zen 3).
///
/// # Safety
/// As `gemm_packed_a`, with `a` holding m rows of k floats `lda` apart;
/// `kernel::wide(kernel::select()) == NR`.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
pub unsafe fn gemm_a_rows(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: Slots,
) {
    debug_assert_eq!(kernel::wide(kernel::select()), NR);
    // SAFETY: forwarded.
    unsafe {
        gemm_a(
            par,
            m,
            n,
            k,
            ASource::Rows { a, lda },
            b,
            c,
            ldc,
            ep,
            scratch,
        )
    }
}

/// `gemm_packed_a` and `gemm_a_rows`.
///
/// # Safety
/// As theirs.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
unsafe fn gemm_a(
    par: Par,
    m: usize,
    n: usize,
    k: usize,
    a: ASource,
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

/// Rows `rows` × columns `cols` of `gemm_packed_a`'s (or `gemm_a_rows`') C (both from the
/// start of a block of `Split`: rows at a multiple of `MC_A`, columns of 32), B packed into
/// `scratch`.
///
/// # Safety
/// As `gemm_packed_a` (`gemm_a_rows` for `ASource::Rows`), `scratch` one slot.
#[allow(clippy::too_many_arguments, reason = "BLAS-style signature")]
unsafe fn packed_a_block(
    m: usize,
    n: usize,
    k: usize,
    a: ASource,
    b: &BSource,
    c: *mut f32,
    ldc: usize,
    ep: &Epilogue,
    scratch: *mut f32,
    rows: Range<usize>,
    cols: Range<usize>,
) {
    let kern = kernel::select();
    // A read in place: six rows a block, so that only one tile's rows of A share the L1
    // cache with the B panel (rows a multiple of 4 KB apart fall into the same sets).
    let block_rows = match a {
        ASource::Packed(_) => MC_A,
        ASource::Rows { .. } => MR,
    };
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
                    let mc = if rem == 16 && block_rows == MC_A {
                        16
                    } else {
                        block_rows.min(rem)
                    };
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
                            // Packed: panel row/MR in the K block at pc (rows of a tile
                            // always start a panel). In place: row `row`, column pc.
                            let (apan, lda) = match a {
                                ASource::Packed(p) => {
                                    (p.wrapping_add(pack::a_panel_at(m, pc, kc, row / MR)), None)
                                }
                                ASource::Rows { a, lda } => {
                                    (a.wrapping_add(row * lda + pc), Some(lda))
                                }
                            };
                            // The next panel, which the 8- and 12-row tiles read.
                            let apan1 = apan.wrapping_add(kc * MR);
                            // SAFETY: C tile within bounds.
                            let ct = unsafe { c.add(row * ldc + jc + jr) };
                            let d = kernel::Dst {
                                c: ct,
                                ldc,
                                accumulate: !first,
                                ep: if last { Some(ep) } else { None },
                                row,
                                col: jc + jr,
                            };
                            #[cfg(target_arch = "x86_64")]
                            if ir >= split && lda.is_none() {
                                // SAFETY: rows row..row+8 lie in this panel (from row % MR) and the
                                // next; up to 32 B columns (packed zero-padded ones when fewer).
                                unsafe {
                                    kernel::tile8_offset(
                                        kc,
                                        apan,
                                        apan1,
                                        wide_b(jr, width),
                                        width,
                                        d,
                                    );
                                }
                                ir += 8;
                                continue;
                            }
                            #[cfg(target_arch = "x86_64")]
                            if step == 2 * NR && width == 2 * NR && ir + 2 * MR <= mc {
                                // SAFETY: two A panels (rows row..row+12) and 32 B columns.
                                unsafe {
                                    kernel::tile_wide12(kc, apan, apan1, wide_b(jr, width), d);
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
                                        apan1,
                                        wide_b(jr, width),
                                        rows,
                                        width,
                                        d,
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
                                        kernel::tile_wide(kc, apan, wide_b(jr, width), d);
                                    } else {
                                        kernel::tile_wide_partial(
                                            kc,
                                            apan,
                                            wide_b(jr, width),
                                            mr,
                                            width,
                                            d,
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
                                            lda,
                                            b.add(pc * ldb + jc + jr + off),
                                            *ldb,
                                            mr,
                                            d.right(off),
                                        )
                                    };
                                    off += NR;
                                    continue;
                                }
                                // SAFETY: panels (or A's rows) have kc entries; tile is mr × nr
                                // inside C.
                                unsafe {
                                    let bp = bpan.add((off / NR) * b_panel_stride);
                                    match lda {
                                        None => {
                                            kernel::tile(kern, kc, apan, bp, mr, nr, d.right(off))
                                        }
                                        Some(lda) => kernel::tile_a_rows(
                                            kern,
                                            kc,
                                            apan,
                                            lda,
                                            bp,
                                            mr,
                                            nr,
                                            d.right(off),
                                        ),
                                    }
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
