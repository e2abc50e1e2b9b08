//! Scaled dot-product attention, fused: `out = softmax(β·(α·Q·Kᵀ + bias))·V` for every
//! (batch, head) of float32 operands read through strides (`onnxc_attention_f32`).
//!
//! The compiler makes this from the steps an exported attention block schedules to
//! (`compiler/src/schedule/attention.rs`): a product of queries and keys, a map scaling the
//! scores and adding a mask, a softmax over the keys and a product with the values. Run as
//! those steps, the scores of a long sequence (`m × n` floats per head: 1 MB at 512) go to
//! memory three times and come back four — the map, the softmax and the packing of the
//! second product all read them from L3. Here the queries are taken in blocks of
//! `block_rows(n)` rows, so a block's scores (≈128 KB) stay in L2 from the first product to
//! the second, next to the head's keys and values, which are packed once per head.
//!
//! Each output row is computed the same way whatever the block and the thread count: the
//! products sum in `gemm`'s order for their depth alone (`gemm::k_block`), and the
//! blocks are dealt out over the workers by `par::Par::for_ranges`, so results are
//! bit-identical for every thread count. The scores are `α·s + bias` rounded as a multiply
//! then an add on every ISA; the softmax is `softmax::row`'s.

use crate::abi::ONNXC_ERR_PARAMS;
use crate::gemm::{self, BSource, Epilogue, pack};
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Threads};
use crate::params::{self, ParamError};
use crate::simd::{self, Simd, Walk};

/// The shapes and element strides of a fused attention call. Every operand is addressed as
/// `[batch, head, row, column]` (a missing batch or head dim has extent 1; an operand
/// broadcast over one has stride 0 there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionParams {
    /// Extents of the two leading dims (batch, heads).
    pub batch: [usize; 2],
    /// Query rows.
    pub m: usize,
    /// Key (and value) rows.
    pub n: usize,
    /// Columns of a query and a key.
    pub dk: usize,
    /// Columns of a value and of the output.
    pub dv: usize,
    /// Strides of Q `[b, h, m, dk]`: rows or columns contiguous.
    pub q: [usize; 4],
    /// Strides of K `[b, h, n, dk]`: rows or columns contiguous.
    pub k: [usize; 4],
    /// Strides of V `[b, h, n, dv]`: rows or columns contiguous.
    pub v: [usize; 4],
    /// Strides of the additive bias `[b, h, m, n]`, columns contiguous; None: no bias.
    pub bias: Option<[usize; 4]>,
    /// Strides of the output `[b, h, m, dv]`, columns contiguous.
    pub out: [usize; 4],
    /// A row of scores that is all −inf (a fully masked query) gives a zero output row, as
    /// ONNX Attention defines it, instead of NaN (`softmax::softmax_f32`).
    pub zero_inf_rows: bool,
}

/// Query rows per block for `n` keys: the block's scores stay within about 128 KB (L2,
/// beside a head's packed keys and values), in whole 12-row tiles of the products, 12 to
/// 120 rows. A function of `n` alone, so the blocks do not depend on the thread count.
pub fn block_rows(n: usize) -> usize {
    ((32 * 1024 / n.max(1)) / 12 * 12).clamp(12, 120)
}

impl AttentionParams {
    /// The sealed blob (`params::seal`): `[b, h, m, n, dk, dv, has_bias, zero_inf_rows]`,
    /// then the strides of q, k, v, bias (zeros without one) and out.
    pub fn encode(&self) -> Vec<i64> {
        let mut w = vec![
            self.batch[0] as i64,
            self.batch[1] as i64,
            self.m as i64,
            self.n as i64,
            self.dk as i64,
            self.dv as i64,
            self.bias.is_some() as i64,
            self.zero_inf_rows as i64,
        ];
        for s in [
            self.q,
            self.k,
            self.v,
            self.bias.unwrap_or([0; 4]),
            self.out,
        ] {
            w.extend(s.iter().map(|&x| x as i64));
        }
        params::seal(w)
    }

    /// Decodes and checks `blob`: extents and strides in range, every operand's extent in
    /// elements (`span`) a size that fits in memory, each matrix with contiguous rows or
    /// columns as the products read it, the bias and output with contiguous columns.
    pub fn decode(blob: &[i64]) -> params::Result<AttentionParams> {
        use params::{MAX_WORDS, ensure, flag, in_range};
        let mut r = params::Reader::new(blob)?;
        let [b0, b1, m, n, dk, dv, has_bias, zero_inf_rows] = r.array()?;
        let mut strides = || -> params::Result<[usize; 4]> {
            let s: [i64; 4] = r.array()?;
            let mut out = [0usize; 4];
            for (o, v) in out.iter_mut().zip(s) {
                *o = in_range(v, 0, MAX_WORDS, "a stride is out of range")? as usize;
            }
            Ok(out)
        };
        let (q, k, v, bias, out) = (strides()?, strides()?, strides()?, strides()?, strides()?);
        r.finish()?;
        for x in [b0, b1, m, n, dk, dv] {
            in_range(x, 0, MAX_WORDS, "an extent is out of range")?;
        }
        let has_bias = flag(has_bias, "the bias flag is not 0 or 1")?;
        let zero_inf_rows = flag(zero_inf_rows, "the masked-rows flag is not 0 or 1")?;
        let p = AttentionParams {
            batch: [b0 as usize, b1 as usize],
            m: m as usize,
            n: n as usize,
            dk: dk as usize,
            dv: dv as usize,
            q,
            k,
            v,
            bias: has_bias.then_some(bias),
            out,
            zero_inf_rows,
        };
        for (s, rows, cols) in [(p.q, p.m, p.dk), (p.k, p.n, p.dk), (p.v, p.n, p.dv)] {
            ensure(
                s[3] == 1 || s[2] == 1 || rows <= 1 || cols <= 1,
                "an operand has neither rows nor columns contiguous",
            )?;
        }
        ensure(
            (p.out[3] == 1 || p.dv <= 1) && (p.out[2] >= p.dv || p.m <= 1),
            "the output's rows are not contiguous and apart",
        )?;
        if let Some(b) = p.bias {
            ensure(
                b[3] == 1 || p.n <= 1,
                "the bias's columns are not contiguous",
            )?;
        }
        let too_big = "an operand is too large";
        for (s, e) in [
            (p.q, [p.m, p.dk]),
            (p.k, [p.n, p.dk]),
            (p.v, [p.n, p.dv]),
            (p.out, [p.m, p.dv]),
            (p.bias.unwrap_or([0; 4]), [p.m, p.n]),
        ] {
            p.span(s, e).ok_or(ParamError(too_big))?;
        }
        // The scratch (`scratch`) stays a size that fits in memory.
        params::product(
            [
                (p.batch[0] * p.batch[1]) as i64,
                (p.n.max(1) + pack::NR) as i64,
                (p.dk.max(1) + p.dv.max(1) + 2 * pack::NR) as i64,
                4,
            ],
            too_big,
        )?;
        Ok(p)
    }

    /// Elements an operand with strides `s` and matrix extents `e` reaches: one past its
    /// farthest element (0 when empty), or None on overflow.
    fn span(&self, s: [usize; 4], e: [usize; 2]) -> Option<usize> {
        let ext = [self.batch[0], self.batch[1], e[0], e[1]];
        if ext.contains(&0) {
            return Some(0);
        }
        let mut far = 0usize;
        for (x, st) in ext.iter().zip(s) {
            far = far.checked_add((x - 1).checked_mul(st)?)?;
        }
        far.checked_add(1)
            .filter(|&f| f <= params::MAX_WORDS as usize)
    }

    /// Elements of Q, K, V, the bias and the output the call reads or writes.
    pub fn spans(&self) -> [usize; 5] {
        let at = |s, e| self.span(s, e).unwrap_or(usize::MAX);
        [
            at(self.q, [self.m, self.dk]),
            at(self.k, [self.n, self.dk]),
            at(self.v, [self.n, self.dv]),
            self.bias.map_or(0, |b| at(b, [self.m, self.n])),
            at(self.out, [self.m, self.dv]),
        ]
    }

    fn heads(&self) -> usize {
        self.batch[0] * self.batch[1]
    }

    /// Floats of one head's packed keys and of its packed values.
    fn packed_lens(&self) -> (usize, usize) {
        (
            gemm::packed_b_len(self.dk, self.n),
            gemm::packed_b_len(self.n, self.dv),
        )
    }

    /// Floats of a worker's block of scores, rounded to whole 64-byte lines.
    fn scores_len(&self) -> usize {
        (block_rows(self.n) * self.n).next_multiple_of(16)
    }

    /// The scratch a call needs: every head's packed keys and values, shared; a block of
    /// scores and a packed block of A for the products, per worker.
    pub fn scratch(&self) -> ScratchNeed {
        let (kl, vl) = self.packed_lens();
        let r = block_rows(self.n).min(self.m.max(1));
        ScratchNeed {
            shared: self.heads() * (kl + vl) * 4,
            per_worker: (self.scores_len() + gemm::packed_a_len(r, self.dk.max(self.n))) * 4,
        }
    }

    /// Offset of head `hd`'s element `[row, col]` in an operand with strides `s`.
    fn at(&self, s: [usize; 4], hd: usize, row: usize, col: usize) -> usize {
        (hd / self.batch[1]) * s[0] + (hd % self.batch[1]) * s[1] + row * s[2] + col * s[3]
    }
}

/// How `gemm` reads a matrix with row stride `rs` and column stride `cs` (one of them 1,
/// or a single row or column, `AttentionParams::decode`): (transposed, leading dimension).
/// A single row is read as a transposed matrix (its elements `cs` apart), a single column as
/// a plain one.
fn operand(rs: usize, cs: usize, rows: usize) -> (bool, usize) {
    if cs == 1 {
        (false, rs)
    } else if rs == 1 || rows <= 1 {
        (true, cs)
    } else {
        (false, rs)
    }
}

/// `softmax(β·(α·s + bias))` over `rows` rows of `n` scores (row stride `ld`) in place,
/// `bias` null or `rows` rows at stride `bias_rs`.
#[derive(Clone, Copy)]
struct Rows {
    s: *mut f32,
    rows: usize,
    n: usize,
    ld: usize,
    bias: *const f32,
    bias_rs: usize,
    alpha: f32,
    beta: f32,
    zero_inf_rows: bool,
}

impl Walk for Rows {
    type Out = ();
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let (l, n) = (S::LANES, self.n);
        let a = s.splat(self.alpha);
        let tail = s.lanes(0, n % l);
        let full = n - n % l;
        for r in 0..self.rows {
            // SAFETY: (whole body) row r of the scores holds n floats, the bias row too
            // (contract); full vectors end at or below n, the tail is masked to it.
            unsafe {
                let x = self.s.add(r * self.ld);
                if !self.bias.is_null() {
                    let b = self.bias.add(r * self.bias_rs);
                    let mut i = 0;
                    while i < full {
                        s.store(
                            x.add(i),
                            s.add(s.mul(s.load(x.add(i)), a), s.load(b.add(i))),
                        );
                        i += l;
                    }
                    if i < n {
                        let v = s.mul(s.load_masked(x.add(i), tail, s.zero()), a);
                        let v = s.add(v, s.load_masked(b.add(i), tail, s.zero()));
                        s.store_masked(x.add(i), tail, v);
                    }
                } else if self.alpha != 1.0 {
                    let mut i = 0;
                    while i < full {
                        s.store(x.add(i), s.mul(s.load(x.add(i)), a));
                        i += l;
                    }
                    if i < n {
                        let v = s.mul(s.load_masked(x.add(i), tail, s.zero()), a);
                        s.store_masked(x.add(i), tail, v);
                    }
                }
                crate::softmax::row(s, x, x, n, self.beta, self.zero_inf_rows);
            }
        }
    }
}

/// Keys `0..live` of a block of `rows` bias rows (`n` floats, `rs` apart): one past the last
/// key any row does not mask with −inf, or `n` when every key is masked everywhere (the
/// softmax then sees the rows whole).
///
/// # Safety
/// `bias` holds the rows.
unsafe fn live_keys(bias: *const f32, rows: usize, n: usize, rs: usize) -> usize {
    let mut live = 0;
    for i in 0..if rs == 0 { rows.min(1) } else { rows } {
        // SAFETY: row i holds n floats (contract).
        let row = unsafe { std::slice::from_raw_parts(bias.add(i * rs), n) };
        if let Some(j) = row[live..].iter().rposition(|&b| b != f32::NEG_INFINITY) {
            live += j + 1;
            if live == n {
                break;
            }
        }
    }
    if live == 0 { n } else { live }
}

/// The depth of the second product when only keys `0..live` of `n` have nonzero
/// probabilities: the whole K blocks of the values' packing (`gemm::k_block(n)` deep) that
/// cover them, when a product of that depth reads the same packed panels (its own K blocks
/// are the same, and the `dv` columns one column block); else `n`.
fn value_depth(live: usize, n: usize, dv: usize) -> usize {
    let kb = gemm::k_block(n);
    let depth = live.div_ceil(kb) * kb;
    if depth < n && dv <= gemm::NC && gemm::k_block(depth) == kb {
        depth
    } else {
        n
    }
}

/// `out = softmax(β·(α·Q·Kᵀ + bias))·V` for every (batch, head): keys and values packed per
/// head, then blocks of `block_rows(n)` query rows split over `par`'s workers.
///
/// # Safety
/// Q, K, V, the bias (when `p.bias` is set) and the output hold `p.spans()` elements; the
/// output overlaps none of the others; `scratch` holds `p.scratch()` laid out for `par`'s
/// workers; `p` passed `AttentionParams::decode`'s checks.
#[allow(clippy::too_many_arguments, reason = "the operands of attention")]
pub unsafe fn attention_f32(
    p: &AttentionParams,
    alpha: f32,
    beta: f32,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    bias: *const f32,
    out: *mut f32,
    scratch: *mut f32,
    par: Par,
) {
    let (heads, m, n, dk, dv) = (p.heads(), p.m, p.n, p.dk, p.dv);
    if heads == 0 || m == 0 || dv == 0 {
        return;
    }
    if n == 0 {
        // No keys: every output row is an empty sum.
        for hd in 0..heads {
            for i in 0..m {
                for c in 0..dv {
                    // SAFETY: inside the output's span.
                    unsafe { *out.add(p.at(p.out, hd, i, c)) = 0.0 };
                }
            }
        }
        return;
    }
    let (shared, slots) = p.scratch().layout(scratch);
    let (kl, vl) = p.packed_lens();
    let packed_v = shared.wrapping_add(heads * kl);
    // Keys as the first product's B (dk × n) and values as the second's (n × dv).
    let (kt, ldk) = operand(p.k[3], p.k[2], dk);
    let (vt, ldv) = operand(p.v[2], p.v[3], n);
    // SAFETY: (both calls) each head's keys and values lie inside their spans; each task
    // packs its own heads into the shared area.
    unsafe {
        par.for_ranges(heads, n * (dk + dv), &|hs, _| {
            for hd in hs {
                pack::pack_b(
                    k.add(p.at(p.k, hd, 0, 0)),
                    ldk,
                    kt,
                    dk,
                    n,
                    shared.add(hd * kl),
                );
                pack::pack_b(
                    v.add(p.at(p.v, hd, 0, 0)),
                    ldv,
                    vt,
                    n,
                    dv,
                    packed_v.add(hd * vl),
                );
            }
        });
    }
    // Blocks of at most `block_rows(n)` rows, evened out in whole register tiles (128 rows
    // as 64 + 64 rather than 120 + 8).
    let r = m
        .div_ceil(m.div_ceil(block_rows(n)))
        .next_multiple_of(pack::MR)
        .min(block_rows(n));
    let blocks = m.div_ceil(r);
    let (qt, ldq) = operand(p.q[2], p.q[3], m);
    let bias_rs = p.bias.map_or(0, |b| b[2]);
    // SAFETY: each task writes its own output rows and its worker's scratch slot; the
    // products' A scratch follows the scores in the slot.
    unsafe {
        par.for_ranges(heads * blocks, r * n * (dk + dv), &|ts, w| {
            let scores = slots.at(w);
            let a_scratch = scores.add(p.scores_len());
            for t in ts {
                let (hd, i0) = (t / blocks, t % blocks * r);
                let rows = r.min(m - i0);
                let bias_at = match p.bias {
                    Some(b) => bias.add(p.at(b, hd, i0, 0)),
                    None => std::ptr::null(),
                };
                // Keys the bias masks (−inf) for every row of the block are left out of the
                // first product and the softmax, their probabilities zero; the packed keys
                // serve any leading columns when they are one K block deep.
                let live = if bias_at.is_null() || dk > gemm::KC {
                    n
                } else {
                    live_keys(bias_at, rows, n, bias_rs)
                };
                if dk == 0 {
                    std::ptr::write_bytes(scores, 0, rows * n);
                } else {
                    gemm::gemm(
                        Par::SEQ,
                        rows,
                        live,
                        dk,
                        q.add(p.at(p.q, hd, i0, 0)),
                        ldq,
                        qt,
                        BSource::Packed(shared.add(hd * kl)),
                        scores,
                        n,
                        &Epilogue::NONE,
                        a_scratch,
                    );
                }
                simd::dispatch(Rows {
                    s: scores,
                    rows,
                    n: live,
                    ld: n,
                    bias: bias_at,
                    bias_rs,
                    alpha,
                    beta,
                    zero_inf_rows: p.zero_inf_rows,
                });
                let depth = value_depth(live, n, dv);
                if live < depth {
                    for i in 0..rows {
                        std::ptr::write_bytes(scores.add(i * n + live), 0, depth - live);
                    }
                }
                gemm::gemm(
                    Par::SEQ,
                    rows,
                    dv,
                    depth,
                    scores,
                    n,
                    false,
                    BSource::Packed(packed_v.add(hd * vl)),
                    out.add(p.at(p.out, hd, i0, 0)),
                    p.out[2],
                    &Epilogue::NONE,
                    a_scratch,
                );
            }
        });
    }
}

/// C ABI entry point: `attention_f32` with the parameters of `params`
/// (`AttentionParams::encode`), `ab` = [α, β], on the run's `threads`. Returns
/// `ONNXC_ERR_PARAMS` for a blob that fails `AttentionParams::decode` or a null operand it
/// would read, before touching any buffer.
///
/// # Safety
/// `params` points to a sealed blob; the operands hold the elements the decoded parameters
/// reach (`spans`), the output overlapping none; `scratch` holds the decoded `scratch()`
/// for the run's workers; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the operands of attention")]
pub unsafe extern "C" fn onnxc_attention_f32(
    params: *const i64,
    ab: *const f32,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    bias: *const f32,
    out: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, AttentionParams::decode);
    let [sq, sk, sv, sb, so] = p.spans();
    let missing = |ptr: *const f32, len: usize| ptr.is_null() && len > 0;
    if missing(ab, 2)
        || missing(q, sq)
        || missing(k, sk)
        || missing(v, sv)
        || missing(bias, sb)
        || missing(out, so)
        || missing(scratch.cast_const(), 1)
    {
        return ONNXC_ERR_PARAMS;
    }
    // SAFETY: ab holds two floats; the rest is the caller's contract.
    unsafe {
        let (alpha, beta) = (*ab, *ab.add(1));
        attention_f32(
            &p,
            alpha,
            beta,
            q,
            k,
            v,
            bias,
            out,
            scratch,
            Par::from_raw(threads),
        );
    }
    crate::abi::ONNXC_OK
}

#[cfg(test)]
mod tests;
