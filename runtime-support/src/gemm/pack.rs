//! Packing into the panel layouts the micro-kernel reads.

/// Rows of an A panel / of the register tile.
pub const MR: usize = 6;
/// Columns of a B panel / of the register tile.
pub const NR: usize = 16;

/// Floats of a packed A, rounded up to 64 bytes so whatever follows it in a buffer (the
/// next group's panels, the packed B block in GEMM scratch) stays 64-byte aligned: a
/// misaligned B panel would make every 64-byte load split a cache line.
pub fn packed_a_len(m: usize, k: usize) -> usize {
    (m.div_ceil(MR) * MR * k.max(1)).next_multiple_of(16)
}

pub fn packed_b_len(k: usize, n: usize) -> usize {
    n.div_ceil(NR) * NR * k.max(1)
}

/// Offset in floats of the `panel`-th MR-row panel of K block `pc..pc + kc` in a packed A
/// of `m` rows. The layout is `[K block][⌈m/MR⌉][kc][MR]` with K split as the GEMM splits it
/// (`k_block`), so a product walks the packed A (usually weights, streamed from DRAM in a
/// real model) in one sequential pass: with `[panel][k][MR]` every 12-row tile started a
/// fresh short run per panel, `k·MR` floats from the last, which the hardware prefetchers
/// did not follow (ResNet-50's 7×7 layers read their 4-9 MB of weights at under 5 GB/s).
/// Every block before `pc` is `k_block(k)` deep, so block `pc` starts `pc` panels' depth in.
#[inline(always)]
pub fn a_panel_at(m: usize, pc: usize, kc: usize, panel: usize) -> usize {
    pc * m.div_ceil(MR) * MR + panel * kc * MR
}

/// Packs op(A) (m×k; `trans`: A is stored k×m) into the K-blocked panel layout
/// (`a_panel_at`), zero-padded.
///
/// # Safety
/// `a` valid for the matrix, `dst` for `packed_a_len(m, k)` floats.
pub unsafe fn pack_a(a: *const f32, lda: usize, trans: bool, m: usize, k: usize, dst: *mut f32) {
    if k == 0 {
        // SAFETY: packed_a_len(m, 0) floats.
        unsafe { std::ptr::write_bytes(dst, 0, packed_a_len(m, 0)) };
        return;
    }
    crate::multiversion!(pack_a_blocks(a, lda, trans, m, k, dst))
}

/// `pack_a` past the k = 0 case. Whole panels are copied with the row pointers (or, for a
/// transposed A, the contiguous 6-float runs) hoisted out of the K loop — the generic
/// per-element loop with its bounds and layout tests ran at ~2 cycles per float and took
/// 6% of a transformer encoder's run packing its activations; the last panel's missing rows
/// are zeros. Called only by `pack_a`, under its contract.
#[inline(always)]
fn pack_a_blocks(a: *const f32, lda: usize, trans: bool, m: usize, k: usize, dst: *mut f32) {
    let mut pc = 0;
    while pc < k {
        let kc = super::k_block(k).min(k - pc);
        for p in 0..m.div_ceil(MR) {
            let base = a_panel_at(m, pc, kc, p);
            let rows = MR.min(m - p * MR);
            // SAFETY: panel p of K block pc lies inside dst.
            let d = unsafe { dst.add(base) };
            if trans {
                for kx in 0..kc {
                    // SAFETY: row pc + kx of the stored A, columns p·MR.. + rows.
                    unsafe {
                        let s = a.add((pc + kx) * lda + p * MR);
                        let o = d.add(kx * MR);
                        std::ptr::copy_nonoverlapping(s, o, rows);
                        std::ptr::write_bytes(o.add(rows), 0, MR - rows);
                    }
                }
            } else if rows == MR {
                // SAFETY: rows p·MR.. + MR of A, columns pc.. + kc.
                let r: [*const f32; MR] =
                    std::array::from_fn(|r| unsafe { a.add((p * MR + r) * lda + pc) });
                #[allow(unused_mut)]
                let mut done = 0;
                #[cfg(target_arch = "x86_64")]
                if crate::isa::avx2() {
                    // SAFETY: AVX2 detected; the rows hold kc floats from pc, the panel kc·MR.
                    done = unsafe { crate::avx2::interleave6(r, kc, d) };
                }
                for kx in done..kc {
                    for (ri, row) in r.iter().enumerate() {
                        // SAFETY: as above; inside dst.
                        unsafe { *d.add(kx * MR + ri) = *row.add(kx) };
                    }
                }
            } else {
                for kx in 0..kc {
                    for ri in 0..MR {
                        let v = if ri < rows {
                            // SAFETY: (p·MR + ri, pc + kx) inside A.
                            unsafe { *a.add((p * MR + ri) * lda + pc + kx) }
                        } else {
                            0.0
                        };
                        // SAFETY: inside dst.
                        unsafe { *d.add(kx * MR + ri) = v };
                    }
                }
            }
        }
        pc += kc;
    }
}

/// Offset in floats of panel `p` (columns `p·NR..`) at K block `pc..pc + kc` in a packed B
/// of `k` × `n`. The layout follows the GEMM's loops (`gemm_packed_a`, `gemm_packed_b`):
/// column blocks of `NC`, within each the K blocks of `k_block(k)`, within each the block's
/// panels `kc` deep — `[n / NC][K block][panel][kc][NR]` — so packed weights stream in one
/// sequential pass (see `a_panel_at`).
#[inline(always)]
pub fn b_panel_at(n: usize, k: usize, pc: usize, kc: usize, p: usize) -> usize {
    let jc = p * NR / super::NC * super::NC;
    let ncp = super::NC.min(n - jc).next_multiple_of(NR);
    jc * k + pc * ncp + (p - jc / NR) * kc * NR
}

/// Offset in floats of row `kx` of panel `p` in a packed B of `k` × `n` (`b_panel_at`).
#[inline]
pub fn b_row_at(n: usize, k: usize, kx: usize, p: usize) -> usize {
    let kb = super::k_block(k).max(1);
    let pc = kx / kb * kb;
    b_panel_at(n, k, pc, kb.min(k - pc), p) + (kx - pc) * NR
}

/// Packs all of op(B) (k×n; `trans`: B is stored n×k) into the blocked panel layout
/// (`b_panel_at`), zero-padded: block by block (`pack_b_block`), as the layout orders them.
///
/// # Safety
/// `b` valid for the matrix, `dst` for `packed_b_len(k, n)` floats.
pub unsafe fn pack_b(b: *const f32, ldb: usize, trans: bool, k: usize, n: usize, dst: *mut f32) {
    if k == 0 {
        // SAFETY: packed_b_len(0, n) floats.
        unsafe { std::ptr::write_bytes(dst, 0, packed_b_len(0, n)) };
        return;
    }
    let kb = super::k_block(k);
    let mut jc = 0;
    while jc < n {
        let nc = super::NC.min(n - jc);
        let mut pc = 0;
        while pc < k {
            let kc = kb.min(k - pc);
            // SAFETY: the block's panels lie inside dst (`b_panel_at`), its elements inside B.
            unsafe {
                pack_b_block(
                    b,
                    ldb,
                    trans,
                    pc,
                    kc,
                    jc,
                    nc,
                    dst.add(b_panel_at(n, k, pc, kc, jc / NR)),
                )
            };
            pc += kc;
        }
        jc += nc;
    }
}

/// Packs the block rows `k0..k0+kc`, columns `n0..n0+nc` of op(B) into `[⌈nc/NR⌉][kc][NR]`.
///
/// # Safety
/// `b` valid for the matrix; `dst` holds `kc · ⌈nc/NR⌉·NR` floats.
#[allow(clippy::too_many_arguments, reason = "block coordinates")]
pub unsafe fn pack_b_block(
    b: *const f32,
    ldb: usize,
    trans: bool,
    k0: usize,
    kc: usize,
    n0: usize,
    nc: usize,
    dst: *mut f32,
) {
    let panels = nc.div_ceil(NR);
    if !trans {
        // Row by row: each source row segment is read once, sequentially (a panel-by-panel
        // walk would touch kc rows — kc pages for wide matrices — per 64 bytes read).
        let full = nc / NR;
        for kx in 0..kc {
            // SAFETY: row k0+kx of B has the nc columns starting at n0.
            let src = unsafe { b.add((k0 + kx) * ldb + n0) };
            for p in 0..full {
                // SAFETY: panel p, row kx of dst; NR source floats of the row.
                unsafe {
                    dst.add((p * kc + kx) * NR)
                        .cast::<[f32; NR]>()
                        .write_unaligned(src.add(p * NR).cast::<[f32; NR]>().read_unaligned())
                };
            }
            if full < panels {
                let w = nc - full * NR;
                // SAFETY: the last panel's row kx; w source floats.
                let out =
                    unsafe { std::slice::from_raw_parts_mut(dst.add((full * kc + kx) * NR), NR) };
                for (c, o) in out.iter_mut().enumerate() {
                    // SAFETY: column n0 + full*NR + c < n0 + nc.
                    *o = if c < w {
                        // SAFETY: c < w = nc - full·NR, so column full·NR + c < nc of the source
                        // row src, which holds nc floats.
                        unsafe { *src.add(full * NR + c) }
                    } else {
                        0.0
                    };
                }
            }
        }
        return;
    }
    for p in 0..panels {
        let j0 = n0 + p * NR;
        let w = NR.min(n0 + nc - j0);
        for kx in 0..kc {
            // SAFETY: the destination row of NR floats is inside dst.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.add((p * kc + kx) * NR), NR) };
            for (c, o) in out.iter_mut().enumerate() {
                // SAFETY: (k0+kx, j0+c) inside B when c < w.
                *o = if c < w {
                    // SAFETY: c < w, so column j0 + c < n0 + nc and row k0 + kx < k0 + kc lie
                    // inside B (transposed: ldb per column).
                    unsafe { *b.add((j0 + c) * ldb + k0 + kx) }
                } else {
                    0.0
                };
            }
        }
    }
}
