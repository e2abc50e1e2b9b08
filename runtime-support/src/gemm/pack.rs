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

/// Packs op(A) (m×k; `trans`: A is stored k×m) into `[⌈m/MR⌉][k][MR]`, zero-padded.
///
/// # Safety
/// `a` valid for the matrix, `dst` for `packed_a_len(m, k)` floats.
pub unsafe fn pack_a(a: *const f32, lda: usize, trans: bool, m: usize, k: usize, dst: *mut f32) {
    let kk = k.max(1);
    for p in 0..m.div_ceil(MR) {
        for kx in 0..kk {
            for r in 0..MR {
                let i = p * MR + r;
                let v = if i < m && kx < k {
                    // SAFETY: (i, kx) inside A.
                    unsafe {
                        if trans {
                            *a.add(kx * lda + i)
                        } else {
                            *a.add(i * lda + kx)
                        }
                    }
                } else {
                    0.0
                };
                // SAFETY: inside dst.
                unsafe { *dst.add((p * kk + kx) * MR + r) = v };
            }
        }
    }
}

/// Packs all of op(B) (k×n; `trans`: B is stored n×k) into `[⌈n/NR⌉][k][NR]`, zero-padded.
///
/// # Safety
/// `b` valid for the matrix, `dst` for `packed_b_len(k, n)` floats.
pub unsafe fn pack_b(b: *const f32, ldb: usize, trans: bool, k: usize, n: usize, dst: *mut f32) {
    let kk = k.max(1);
    for p in 0..n.div_ceil(NR) {
        for kx in 0..kk {
            for c in 0..NR {
                let j = p * NR + c;
                let v = if j < n && kx < k {
                    // SAFETY: (kx, j) inside B.
                    unsafe {
                        if trans {
                            *b.add(j * ldb + kx)
                        } else {
                            *b.add(kx * ldb + j)
                        }
                    }
                } else {
                    0.0
                };
                // SAFETY: inside dst.
                unsafe { *dst.add((p * kk + kx) * NR + c) = v };
            }
        }
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
                    unsafe { *b.add((j0 + c) * ldb + k0 + kx) }
                } else {
                    0.0
                };
            }
        }
    }
}
