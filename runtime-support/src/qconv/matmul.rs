//! Integer matrix products `Y = A · W` of uint8/int8 activations `A` (`[rows, k]`: every
//! matrix of a batch at once, the rows a call argument, so that one blob serves a row count
//! taken at run time) and constant int8 weights `W` (`[k, n]`, packed when the model is
//! compiled), with
//! exact int32 sums and the convolution's epilogues (`QOut`): MatMulInteger, QLinearMatMul
//! and the MatMul of QDQ models.
//!
//! A tile is `MR` rows of `A` (packed per call, `[k/4][MR][4]`, four bytes broadcast per
//! dot product) by `NR` weight columns (packed at compile time, `[n/NR][k/4][NR][4]`, the
//! lanes), so a tile's rows are rows of `Y`, written as they are (`matmul_kernel.rs`). The
//! activations' zero point may be a run-time value (DynamicQuantizeLinear's): the constant
//! part of each column's sum is then computed per call from the column sums of the weights.

use super::{
    Epi, Flags, MR, NR, QScalars, Tier, constant_part, decode_header, encode_header, matmul_kernel,
    pack_u32s, read_u32s, read_weights, seal_with_tail,
};
use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK};
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Slots};
use crate::params;

/// One integer matrix product, decoded from its blob (borrowing it) or built by `encode`.
#[derive(Debug)]
pub struct QMatMulParams<'a> {
    pub q: QScalars,
    /// Rows of the activations (every matrix of a batch: the weights are shared), given by
    /// the call (`with_rows`; 0 as decoded), so that one blob serves every row count.
    pub rows: usize,
    pub k: usize,
    pub n: usize,
    pub has_wzp: bool,
    /// The weights' byte pairs keep `vpmaddubsw` exact (`super::short_pairs`).
    pub short_pairs: bool,
    /// Every output's exact sum stays below 2^24 in magnitude (`super::small_sums`).
    pub small_sums: bool,
    /// Per column: the int32 bias, the sum of the weights, their zero point, the epilogue's
    /// scale and float32 bias.
    pub bias: &'a [i32],
    pub colsum: &'a [i32],
    pub wzp: &'a [i32],
    pub scale: &'a [f32],
    pub fbias: &'a [f32],
    /// `[n/MR][k/4][MR][4]` int8 weights.
    pub weights: &'a [i8],
}

/// Words after the seal: out, flags, x_zp, y_zp, lo, hi, k, n.
const HEADER: usize = 8;

/// Scratch of a product of depth `k` into `n` columns (`QMatMulParams::scratch`): the
/// per-column constants (shared), one block of packed rows per worker, with room to widen
/// it (the AVX2 tier).
pub fn scratch_for(k: usize, n: usize) -> ScratchNeed {
    ScratchNeed {
        shared: n * 4,
        per_worker: k.div_ceil(4) * 8 * MR,
    }
}

impl QMatMulParams<'_> {
    fn k4(&self) -> usize {
        self.k.div_ceil(4)
    }

    /// Scratch of a call: the per-column constants (shared), one block of packed rows per
    /// worker.
    pub fn scratch(&self) -> ScratchNeed {
        scratch_for(self.k, self.n)
    }

    /// The sealed blob: `w` is `[k, n]` int8 (uint8 weights shifted by −128 with their zero
    /// points), `w_zp` one zero point per column, `bias` the int32 bias per column (or
    /// none), `scale`/`fbias` one per column. `q.x_zp` is the activations' zero point when
    /// the call passes none.
    #[allow(clippy::too_many_arguments, reason = "every constant of the op")]
    pub fn encode(
        q: QScalars,
        k: usize,
        n: usize,
        w: &[i8],
        w_zp: &[i32],
        bias: Option<&[i32]>,
        scale: &[f32],
        fbias: &[f32],
    ) -> Vec<i64> {
        assert_eq!(w.len(), k * n, "weights of the product");
        assert!(w_zp.len() == n && scale.len() == n && fbias.len() == n);
        let k4 = k.div_ceil(4);
        let panels = n.div_ceil(NR);
        let colsum: Vec<u32> = (0..n)
            .map(|j| (0..k).map(|i| w[i * n + j] as i32).sum::<i32>() as u32)
            .collect();
        let mut packed = vec![0u8; panels * k4 * NR * 4];
        for j in 0..n {
            let (pn, l) = (j / NR, j % NR);
            for i in 0..k {
                packed[pn * k4 * NR * 4 + (i / 4) * NR * 4 + l * 4 + i % 4] = w[i * n + j] as u8;
            }
        }
        let flags = Flags {
            has_wzp: w_zp.iter().any(|&z| z != 0),
            short_pairs: super::short_pairs(&packed),
            small_sums: super::small_sums((0..n).map(|j| {
                let abs: i64 = (0..k)
                    .map(|i| (w[i * n + j] as i64 - w_zp[j] as i64).abs())
                    .sum();
                (abs, bias.map_or(0, |b| b[j]))
            })),
        };
        let mut p = encode_header(q, flags).to_vec();
        p.extend([k, n].map(|d| d as i64));
        let b: Vec<u32> = bias.map_or(vec![0; n], |b| b.iter().map(|&v| v as u32).collect());
        pack_u32s(b, &mut p);
        pack_u32s(colsum, &mut p);
        seal_with_tail(p, w_zp, scale, fbias, &packed)
    }

    /// The product `encode` wrote into `blob`, validated.
    pub fn decode(blob: &[i64]) -> params::Result<QMatMulParams<'_>> {
        use params::in_range;
        let mut r = params::Reader::new(blob)?;
        let h: [i64; HEADER] = r.array()?;
        let (q, flags) = decode_header(&h[..6])?;
        let dims = "a dimension is out of range";
        let k = in_range(h[6], 0, params::MAX_EXTENT, dims)? as usize;
        let n = in_range(h[7], 0, params::MAX_EXTENT, dims)? as usize;
        let big = "the product is too large";
        let bias = read_u32s(&mut r, n)?;
        let colsum = read_u32s(&mut r, n)?;
        let wzp = read_u32s(&mut r, n)?;
        let scale = read_u32s(&mut r, n)?;
        let fbias = read_u32s(&mut r, n)?;
        let weights = read_weights(&mut r, [n.div_ceil(NR), k.div_ceil(4), NR * 4], big)?;
        r.finish()?;
        Ok(QMatMulParams {
            q,
            rows: 0,
            k,
            n,
            has_wzp: flags.has_wzp,
            short_pairs: flags.short_pairs,
            small_sums: flags.small_sums,
            bias,
            colsum,
            wzp,
            scale,
            fbias,
            weights,
        })
    }

    /// The product over `rows` rows of activations (in `0..=MAX_EXTENT`, its tensors of a
    /// size that fits in memory).
    pub fn with_rows(self, rows: i64) -> params::Result<Self> {
        let rows = params::in_range(rows, 0, params::MAX_EXTENT, "rows are out of range")?;
        params::product(
            [rows, self.k.max(self.n) as i64],
            "the product is too large",
        )?;
        Ok(QMatMulParams {
            rows: rows as usize,
            ..self
        })
    }
}

/// Packs rows `m0 .. m0 + rows` of `a` (`[m, k]`) as a block `[k/4][MR][4]`, flipping int8
/// to uint8 (groups past `k` and rows past `rows` zero), by 32-bit words; returns each row's
/// sum when `sums` is asked for (some weight zero point is not zero).
///
/// # Safety
/// `a` holds the rows.
unsafe fn pack_rows(
    a: *const u8,
    k: usize,
    m0: usize,
    rows: usize,
    flip: bool,
    sums: bool,
    block: &mut [u8],
) -> [i32; MR] {
    let k4 = k.div_ceil(4);
    let full = k / 4;
    let xw = if flip { 0x8080_8080u32 } else { 0 };
    let xb = xw as u8;
    if rows < MR || full < k4 {
        block[..k4 * 4 * MR].fill(0);
    }
    let mut out = [0i32; MR];
    for (r, sum) in out.iter_mut().enumerate().take(rows) {
        // SAFETY: row m0 + r of `a` holds k bytes (caller).
        let row = unsafe { std::slice::from_raw_parts(a.add((m0 + r) * k), k) };
        for (g, c) in row.chunks_exact(4).enumerate() {
            let w = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ xw;
            block[(g * MR + r) * 4..][..4].copy_from_slice(&w.to_ne_bytes());
        }
        for i in full * 4..k {
            block[(full * MR + r) * 4 + i % 4] = row[i] ^ xb;
        }
        if sums {
            *sum = row.iter().map(|&v| (v ^ xb) as i32).sum();
        }
    }
    out
}

/// Runs the product of `a` into `y`; `x_zp` is the activations' zero point for this call.
///
/// # Safety
/// `a` and `y` hold the tensors the blob describes; `scratch` holds `p.scratch()` (its
/// shared part at `shared`, every worker's slot in `slots`).
#[allow(
    clippy::too_many_arguments,
    reason = "the C entry point's arguments, decoded"
)]
pub(crate) unsafe fn qmatmul_on(
    tier: Tier,
    p: &QMatMulParams,
    x_zp: i32,
    a: *const u8,
    y: *mut u8,
    shared: *mut i32,
    slots: Slots,
    par: Par,
) {
    let (m, k, n) = (p.rows, p.k, p.n);
    if m == 0 || n == 0 {
        return;
    }
    let zx = p.q.packed_zp(x_zp);
    // SAFETY: the shared scratch holds n i32 (caller).
    let corr = unsafe { std::slice::from_raw_parts_mut(shared, n) };
    for (j, c) in corr.iter_mut().enumerate() {
        *c = constant_part(p.bias[j] as i64, zx, p.colsum[j] as i64, k, p.wzp[j]);
    }
    let epi = Epi {
        q: p.q,
        small_sums: p.small_sums,
        corr,
        wzp: p.wzp,
        scale: p.scale,
        fbias: p.fbias,
    };
    let k4 = p.k4();
    let blocks = m.div_ceil(MR);
    let panels = n.div_ceil(NR);
    let es = p.q.out.size();
    let (a_addr, y_addr) = (a as usize, y as usize);
    let cost = (k * n * MR / 4).max(1);
    let job = |range: std::ops::Range<usize>, worker: usize| {
        // SAFETY: the worker's slot holds one block of packed rows, widened or not
        // (`scratch`).
        let wide =
            unsafe { std::slice::from_raw_parts_mut(slots.at(worker) as *mut u8, k4 * 8 * MR) };
        let mut tile = [[0i32; NR]; MR];
        for blk in range {
            let m0 = blk * MR;
            let rows = MR.min(m - m0);
            let block = &mut wide[..k4 * 4 * MR];
            // SAFETY: the rows lie in `a`.
            let sums = unsafe {
                pack_rows(
                    a_addr as *const u8,
                    k,
                    m0,
                    rows,
                    p.q.x_signed,
                    p.has_wzp,
                    block,
                )
            };
            let rowsums = p.has_wzp.then_some(&sums);
            #[cfg(target_arch = "x86_64")]
            if tier == Tier::Avx2 {
                if !p.short_pairs {
                    // SAFETY: the CPU has AVX2 (caller).
                    unsafe { super::avx2::widen_rows(k4, wide) };
                }
                for pn in 0..panels {
                    let w = &p.weights[pn * k4 * NR * 4..][..k4 * NR * 4];
                    let n0 = pn * NR;
                    let lanes = NR.min(n - n0);
                    let dst = y_addr + (m0 * n + n0) * es;
                    // SAFETY: the CPU has AVX2 (caller); rows m0 .. m0 + rows, columns n0 ..
                    // n0 + lanes, lie in `y`, one row of n apart; each block is written by one
                    // task only.
                    unsafe {
                        super::avx2::matmul_tile_epilogue(
                            k4,
                            p.short_pairs,
                            wide,
                            w,
                            &epi,
                            n0,
                            rows,
                            &sums,
                            lanes,
                            dst as *mut u8,
                            n * es,
                        )
                    };
                }
                continue;
            }
            let block = &wide[..k4 * 4 * MR];
            for pn in 0..panels {
                let w = &p.weights[pn * k4 * NR * 4..][..k4 * NR * 4];
                let n0 = pn * NR;
                let lanes = NR.min(n - n0);
                let dst = y_addr + (m0 * n + n0) * es;
                #[cfg(target_arch = "x86_64")]
                if matches!(tier, Tier::Vnni512 { .. }) {
                    // SAFETY: the CPU has the VNNI tier's features (caller); rows m0 .. m0 +
                    // rows, columns n0 .. n0 + lanes, lie in `y`, one row of n apart; each
                    // block is written by one task only.
                    unsafe {
                        matmul_kernel::tile_epilogue_vnni512(
                            k4,
                            block,
                            w,
                            &epi,
                            n0,
                            rows,
                            rowsums,
                            lanes,
                            dst as *mut u8,
                            n * es,
                        )
                    };
                    continue;
                }
                // SAFETY: the CPU runs `tier` (caller); the block and panel hold k4 groups.
                unsafe { matmul_kernel::tile(tier, k4, block, w, &mut tile) };
                for (r, trow) in tile.iter().enumerate().take(rows) {
                    // SAFETY: as above.
                    unsafe {
                        matmul_kernel::epilogue_scalar(
                            &epi,
                            n0,
                            trow,
                            sums[r],
                            lanes,
                            (dst + r * n * es) as *mut u8,
                        )
                    };
                }
            }
        }
    };
    // SAFETY: tasks write disjoint rows and use their worker's slot.
    unsafe { par.for_ranges(blocks, cost, &job) };
}

/// Runs the product on this CPU's best tier (`qmatmul_on`).
///
/// # Safety
/// As `qmatmul_on`.
pub unsafe fn qmatmul(
    p: &QMatMulParams,
    x_zp: i32,
    a: *const u8,
    y: *mut u8,
    shared: *mut i32,
    slots: Slots,
    par: Par,
) {
    // SAFETY: forwarded.
    unsafe { qmatmul_on(Tier::detect(), p, x_zp, a, y, shared, slots, par) }
}

/// C entry point: `params` a `QMatMulParams` blob; `a` the activations (`rows` of them),
/// `a_zp` their zero point (one byte; null: the blob's), `y` the output of the blob's type.
///
/// # Safety
/// `params` is null or a sealed blob; `a`, `y` hold the tensors it and `rows` describe,
/// `a_zp` is null or one readable byte, `scratch` its `scratch()` for every worker of
/// `threads`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_qmatmul(
    params: *const i64,
    a: *const u8,
    a_zp: *const u8,
    y: *mut u8,
    rows: i64,
    scratch: *mut f32,
    threads: *const crate::par::Threads,
) -> Status {
    let p = params::decode_blob!(params, QMatMulParams::decode);
    let Ok(p) = p.with_rows(rows) else {
        return ONNXC_ERR_PARAMS;
    };
    let x_zp = if a_zp.is_null() {
        p.q.x_zp
    } else if p.q.x_signed {
        // SAFETY: a_zp points to one byte (caller).
        unsafe { *a_zp as i8 as i32 }
    } else {
        // SAFETY: as above.
        unsafe { *a_zp as i32 }
    };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (shared, slots) = p.scratch().layout(scratch);
    // SAFETY: caller contract.
    unsafe { qmatmul(&p, x_zp, a, y, shared as *mut i32, slots, par) };
    ONNXC_OK
}
