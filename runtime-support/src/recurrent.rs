//! The recurrences of ONNX's RNN, GRU and LSTM (`onnxc_recurrent_f32`), float32, one
//! direction per call (both of a bidirectional layer with `onnxc_recurrent_pair_f32`, at
//! once on a pool of two workers or more), with their default activations (sigmoid and
//! tanh), `clip`, LSTM's peepholes and `input_forget`, GRU's `linear_before_reset`. The
//! sequence length is a parameter, so one compiled call serves a length taken at run time.
//!
//! The caller computes the input projection of every step at once (`xw = X·Wᵀ`,
//! `[seq·batch, gates·hidden]`, a GEMM); each step then multiplies the previous hidden state
//! by `Rᵀ` (packed once per call into the scratch, the product split over the run's threads
//! by columns, so every element is summed by one task in one order: the same bits for any
//! worker count) and applies the cell's gates (ONNX's orders: `z r h` for GRU, `i o f c` for
//! LSTM; the bias `B` is `[Wb, Rb]`, peepholes `P` are `[i o f]`):
//!
//! - RNN: `h = tanh(xw + Wb + h·Rᵀ + Rb)`;
//! - GRU: `z, r = σ(xw + Wb + h·Rᵀ + Rb)`, `ĥ = tanh(xw_h + Wb_h + r ⊙ (h·R_hᵀ + Rb_h))` with
//!   `linear_before_reset`, else `tanh(xw_h + Wb_h + (r ⊙ h)·R_hᵀ + Rb_h)`;
//!   `h = (1 − z) ⊙ ĥ + z ⊙ h`;
//! - LSTM: `i, f = σ(… + P ⊙ c)` (`f = 1 − i` with `input_forget`), `ĉ = tanh(…)`,
//!   `c = f ⊙ c + i ⊙ ĉ`, `o = σ(… + P_o ⊙ c)`, `h = o ⊙ tanh(c)`;
//!
//! every activation's input clamped to `±clip` (not the cell state's tanh, as onnxruntime).
//! A reverse direction runs from the last step to the first; `y` holds each step's `h` at
//! its time, then the last `h` (and for LSTM the last `c`). The activations are the
//! runtime's vector ones (`activation`), as the generated code's maps would compute them.
//! An LSTM with quantized weights (onnxruntime's DynamicQuantizeLSTM) quantizes each step's
//! `h` before the product (`quantize_h`) and multiplies it by `R`'s integer values, summed
//! exactly by the integer product (`qconv::matmul`, `r_int8`: `R` a quarter of its float
//! size, so a large layer's weights stay in cache across the steps), or by their float
//! values where they are no constant.

use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK, elements, elements_mut};
use crate::activation::{self, SIGMOID, TANH};
use crate::gemm::{self, BSource, Epilogue, pack};
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params::{self, ParamError};
use crate::qconv::QOut;
use crate::qconv::matmul::{self as qmatmul, QMatMulParams};
use crate::simd;

mod lstm_cell;

/// Words of `onnxc_recurrent_f32`'s parameters (its blob's body).
pub const PARAMS: usize = 10;

/// The cell of a recurrence, with its code in the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Rnn = 0,
    Gru = 1,
    Lstm = 2,
}

impl Cell {
    /// Gates per hidden unit.
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
}

/// `onnxc_recurrent_f32`'s parameters, decoded and validated. Layouts (row-major): `xw`
/// `[seq·batch, gates·hidden]`, `r` `[gates·hidden, hidden]`, `bias` `[2·gates·hidden]`,
/// `h0` and `c0` `[batch, hidden]`, `peephole` `[3·hidden]`; `y` `[seq, batch, hidden]`, then
/// the last `h` `[batch, hidden]`, then (LSTM) the last `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentParams {
    pub cell: Cell,
    pub seq: usize,
    pub batch: usize,
    pub hidden: usize,
    /// Steps run from the last time to the first.
    pub reverse: bool,
    /// GRU: `r` multiplies `h·R_hᵀ + Rb_h` rather than `h`.
    pub linear_before_reset: bool,
    /// LSTM: `f = 1 − i`.
    pub input_forget: bool,
    /// `r` is packed for the products (`pack_r`), as the compiler packs constant weights;
    /// else the raw `[gates·hidden, hidden]`, packed into the scratch by every call.
    pub r_packed: bool,
    /// LSTM with quantized weights (onnxruntime's DynamicQuantizeLSTM, `r` their dequantized
    /// values): each step's `h` is quantized to uint8 over the batch as
    /// DynamicQuantizeLinear does before it multiplies `Rᵀ` (`quantize_state`).
    pub quantize_h: bool,
    /// With `quantize_h`: `R` is given as the integer product's parameters (`Operands::rq`,
    /// a `QMatMulParams` of depth `hidden` into `gates·hidden` int32 sums, whose per-column
    /// `scale` is R's), and `r` is empty.
    pub r_int8: bool,
}

impl RecurrentParams {
    /// The sealed blob (`params::seal`) of `[cell, seq, batch, hidden, reverse,
    /// linear_before_reset, input_forget, r_packed, quantize_h, r_int8]`.
    pub fn encode(&self) -> Vec<i64> {
        params::seal([
            self.cell as i64,
            self.seq as i64,
            self.batch as i64,
            self.hidden as i64,
            self.reverse as i64,
            self.linear_before_reset as i64,
            self.input_forget as i64,
            self.r_packed as i64,
            self.quantize_h as i64,
            self.r_int8 as i64,
        ])
    }

    /// Decodes and checks `blob`: a known cell, `seq` not negative, `batch` and `hidden`
    /// positive, flags 0 or 1 (`quantize_h` for LSTM only, `r_int8` with `quantize_h` only),
    /// and every tensor of a size that fits in memory.
    pub fn decode(blob: &[i64]) -> params::Result<RecurrentParams> {
        use params::{flag, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [
            cell,
            seq,
            batch,
            hidden,
            reverse,
            lbr,
            forget,
            packed,
            quantize,
            int8,
        ] = r.array()?;
        r.finish()?;
        let cell = [Cell::Rnn, Cell::Gru, Cell::Lstm]
            .into_iter()
            .find(|c| *c as i64 == cell)
            .ok_or(ParamError("unknown cell"))?;
        in_range(seq, 0, params::MAX_WORDS, "seq is out of range")?;
        for v in [batch, hidden] {
            in_range(v, 1, params::MAX_WORDS, "batch or hidden is out of range")?;
        }
        let too_big = "a tensor is too large";
        let gh = product([cell.gates() as i64, hidden], too_big)?;
        product([seq, batch, gh, 4], too_big)?;
        product([gh, hidden, 8], too_big)?;
        product([seq.saturating_add(2), batch, hidden, 4], too_big)?;
        let p = RecurrentParams {
            cell,
            seq: seq as usize,
            batch: batch as usize,
            hidden: hidden as usize,
            reverse: flag(reverse, "reverse is not 0 or 1")?,
            linear_before_reset: flag(lbr, "linear_before_reset is not 0 or 1")?,
            input_forget: flag(forget, "input_forget is not 0 or 1")?,
            r_packed: flag(packed, "r_packed is not 0 or 1")?,
            quantize_h: flag(quantize, "quantize_h is not 0 or 1")?,
            r_int8: flag(int8, "r_int8 is not 0 or 1")?,
        };
        if p.quantize_h && p.cell != Cell::Lstm {
            return Err(ParamError("quantize_h is for LSTM only"));
        }
        if p.r_int8 && !p.quantize_h {
            return Err(ParamError("r_int8 is for a quantized state only"));
        }
        product([p.scratch_floats() as i64, 4], too_big)?;
        Ok(p)
    }

    /// `gates · hidden`.
    pub fn gh(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// Floats of `xw`.
    pub fn xw_len(&self) -> usize {
        self.seq * self.batch * self.gh()
    }

    /// Floats of `r`: raw, or packed (`pack_r`); none with `r_int8`.
    pub fn r_len(&self) -> usize {
        if self.r_int8 {
            0
        } else if self.r_packed {
            self.packed_r_len()
        } else {
            self.gh() * self.hidden
        }
    }

    /// Columns of the step's first product: every gate's, or for `separate_h_product` only
    /// z's and r's (ĥ's comes from the second product, of `r ⊙ h`).
    fn first_product_cols(&self) -> usize {
        if self.separate_h_product() {
            2 * self.hidden
        } else {
            self.gh()
        }
    }

    /// Floats of `r` packed: `Rᵀ` (its first `first_product_cols()` rows) as the B of a
    /// product (`pack::pack_b`), then for `separate_h_product` `R_hᵀ` (its rows
    /// `2·hidden..`) likewise.
    fn packed_r_len(&self) -> usize {
        let h = self.hidden;
        pack::packed_b_len(h, self.first_product_cols())
            + if self.separate_h_product() {
                pack::packed_b_len(h, h)
            } else {
                0
            }
    }

    /// `r` (raw, `[gates·hidden, hidden]`) packed for the products, as `r_packed` reads it.
    ///
    /// # Panics
    /// When `r` does not hold `gates·hidden·hidden` floats.
    pub fn pack_r(&self, r: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; self.packed_r_len()];
        self.pack_r_into(r, &mut out);
        out
    }

    fn pack_r_into(&self, r: &[f32], out: &mut [f32]) {
        let (h, gh, n) = (self.hidden, self.gh(), self.first_product_cols());
        assert_eq!(r.len(), gh * h, "r");
        assert!(out.len() >= self.packed_r_len(), "packed r");
        let (rp, rhp) = out.split_at_mut(pack::packed_b_len(h, n));
        // SAFETY: `r` is [gh, h]: as the B of a product, its transpose [h, gh] (and rows
        // 2·h.. for R_h), packed into room `packed_b_len` gives.
        unsafe {
            pack::pack_b(r.as_ptr(), h, true, h, n, rp.as_mut_ptr());
            if self.separate_h_product() {
                pack::pack_b(r.as_ptr().add(2 * h * h), h, true, h, h, rhp.as_mut_ptr());
            }
        }
    }

    /// Floats of a state, `[batch, hidden]`.
    pub fn state_len(&self) -> usize {
        self.batch * self.hidden
    }

    /// Floats of `y`: every step's `h`, the last `h`, and for LSTM the last `c`.
    pub fn y_len(&self) -> usize {
        let states = if self.cell == Cell::Lstm { 2 } else { 1 };
        (self.seq + states) * self.state_len()
    }

    /// GRU without `linear_before_reset`: `(r ⊙ h)·R_hᵀ` is a product of its own.
    fn separate_h_product(&self) -> bool {
        self.cell == Cell::Gru && !self.linear_before_reset
    }

    /// Floats of the scratch: `r` packed unless it is (`pack_r`), the summed biases, the
    /// gates, a state of zeros, the cell state and a temporary state (GRU's `r ⊙ h`), and the GEMM's packed `h` for batches the matrix-vector product does
    /// not take; each part rounded to 16 floats. With `r_int8`, instead of `r` and the
    /// GEMM's `h`: the quantized `h` (bytes), the int32 sums and the integer product's
    /// scratch (`int8_parts`).
    pub fn scratch_floats(&self) -> usize {
        let up = |n: usize| n.next_multiple_of(16);
        let (h, gh, s) = (self.hidden, self.gh(), self.state_len());
        if self.r_int8 {
            let [hq, sums, product] = self.int8_parts();
            return up(gh) + up(self.batch * gh) + 3 * up(s) + hq + sums + product;
        }
        let r = if self.r_packed {
            0
        } else {
            up(self.packed_r_len())
        };
        let a = if self.batch > GEMV_ROWS {
            up(pack::packed_a_len(self.batch, h))
        } else {
            0
        };
        r + up(gh) + up(self.batch * gh) + 3 * up(s) + a
    }

    /// Floats of `r_int8`'s scratch parts: the quantized `h` (`state_len()` bytes), the
    /// int32 sums (`batch · gates·hidden`) and the integer product's scratch (one worker);
    /// each a multiple of 16.
    fn int8_parts(&self) -> [usize; 3] {
        let up = |n: usize| n.next_multiple_of(16);
        let product = qmatmul::scratch_for(self.hidden, self.gh()).single() / 4;
        [
            up(self.state_len().div_ceil(4)),
            up(self.batch * self.gh()),
            up(product),
        ]
    }

    /// Scratch floats of `recurrent_pair_f32`: each direction's, 64-byte aligned.
    pub fn pair_scratch_floats(&self) -> usize {
        2 * self.scratch_floats().next_multiple_of(16)
    }
}

/// Most batch rows the matrix-vector product takes (`gemm::gemv_packed_b`).
const GEMV_ROWS: usize = 2;

/// The operands of one call (`onnxc_recurrent_f32`'s, as slices).
pub struct Operands<'a> {
    pub xw: &'a [f32],
    pub r: &'a [f32],
    /// With `r_int8`: R's integer product, over `batch` rows.
    pub rq: Option<QMatMulParams<'a>>,
    pub bias: Option<&'a [f32]>,
    pub h0: Option<&'a [f32]>,
    pub c0: Option<&'a [f32]>,
    pub peephole: Option<&'a [f32]>,
}

/// The recurrence of `p` (the module's definition) into `y` (`y_len()` floats), with
/// `scratch` (`scratch_floats()`) and the products split over `par`. `clip` bounds every
/// activation's input (∞ for none).
///
/// # Panics
/// When a slice's length is not the one `p` gives it.
#[allow(
    clippy::needless_range_loop,
    reason = "a unit's gates are read from several slices at once"
)]
pub fn recurrent_f32(
    p: &RecurrentParams,
    clip: f32,
    x: &Operands,
    y: &mut [f32],
    scratch: &mut [f32],
    par: Par,
) {
    let (hd, gh, sl) = (p.hidden, p.gh(), p.state_len());
    assert_eq!(x.xw.len(), p.xw_len(), "xw");
    assert_eq!(x.r.len(), p.r_len(), "r");
    assert!(
        x.rq.as_ref()
            .map_or(!p.r_int8, |q| p.r_int8 && int8_product_fits(p, q)),
        "rq"
    );
    assert!(x.bias.is_none_or(|b| b.len() == 2 * gh), "bias");
    assert!(x.h0.is_none_or(|s| s.len() == sl), "h0");
    assert!(x.c0.is_none_or(|s| s.len() == sl), "c0");
    assert!(x.peephole.is_none_or(|s| s.len() == 3 * hd), "peephole");
    assert_eq!(y.len(), p.y_len(), "y");
    assert!(scratch.len() >= p.scratch_floats(), "scratch");
    let up = |n: usize| n.next_multiple_of(16);
    let (packed, rest) = if p.r_packed || p.r_int8 {
        (x.r, &mut scratch[..])
    } else {
        let (room, rest) = scratch.split_at_mut(up(p.packed_r_len()));
        p.pack_r_into(x.r, room);
        (&room[..], rest)
    };
    let n1 = p.first_product_cols();
    let (rp, rhp) = if p.r_int8 {
        (packed, packed)
    } else {
        packed.split_at(pack::packed_b_len(hd, n1))
    };
    let (bsum, rest) = rest.split_at_mut(up(gh));
    let (gates, rest) = rest.split_at_mut(up(p.batch * gh));
    let (zeros, rest) = rest.split_at_mut(up(sl));
    let (c, rest) = rest.split_at_mut(up(sl));
    let (tmp, rest) = rest.split_at_mut(up(sl));
    // The integer product's parts (`int8_parts`), or the GEMM's packed `h`.
    let (int8, a_pack) = if p.r_int8 {
        let [hq, sums, product] = p.int8_parts();
        let (hq_room, rest) = rest.split_at_mut(hq);
        let (sums_room, rest) = rest.split_at_mut(sums);
        (
            Some((hq_room, sums_room, &mut rest[..product])),
            &mut [][..],
        )
    } else {
        (None, rest)
    };
    let mut int8 = int8.map(|(hq, sums, product)| {
        // SAFETY: float scratch (4-byte aligned) of `sl` bytes at least (`int8_parts`), as
        // bytes.
        let hq = unsafe { std::slice::from_raw_parts_mut(hq.as_mut_ptr() as *mut u8, sl) };
        // SAFETY: float scratch of `batch · gh` floats (`int8_parts`), as int32.
        let sums =
            unsafe { std::slice::from_raw_parts_mut(sums.as_mut_ptr() as *mut i32, p.batch * gh) };
        (hq, sums, product)
    });
    zeros.fill(0.0);
    match x.c0 {
        Some(c0) => c[..sl].copy_from_slice(c0),
        None => c[..sl].fill(0.0),
    }
    let (wb, rb) = match x.bias {
        Some(b) => (Some(&b[..gh]), Some(&b[gh..])),
        None => (None, None),
    };
    // Every gate's pre-activation but GRU's ĥ with linear_before_reset comes out of the
    // product whole: h·Rᵀ + (Wb + Rb) + xw, the biases summed once.
    let fused = !(p.cell == Cell::Gru && p.linear_before_reset);
    let bsum: Option<&[f32]> = x.bias.map(|b| {
        for (k, v) in bsum[..gh].iter_mut().enumerate() {
            *v = b[k] + b[gh + k];
        }
        &bsum[..gh]
    });
    let clipped = clip.is_finite();
    let clamp = |v: f32| v.clamp(-clip, clip);
    let clamp_all = |v: &mut [f32]| {
        if clipped {
            v.iter_mut().for_each(|x| *x = x.clamp(-clip, clip));
        }
    };
    let act = |kind, v: &mut [f32]| {
        // SAFETY: in place over the slice's floats.
        unsafe { activation::activation_f32(kind, [1.0, 0.0], v.as_ptr(), v.as_mut_ptr(), v.len()) }
    };
    let (steps, finals) = y.split_at_mut(p.seq * sl);
    for s in 0..p.seq {
        let t = if p.reverse { p.seq - 1 - s } else { s };
        let prev_t = if p.reverse { t + 1 } else { t.wrapping_sub(1) };
        // The previous h: the initial one, or the step before's in `y`.
        let (before, at) = steps.split_at_mut(t * sl);
        let (h_new, after) = at.split_at_mut(sl);
        let h_prev: &[f32] = if s == 0 {
            x.h0.unwrap_or(&zeros[..sl])
        } else if p.reverse {
            &after[..sl]
        } else {
            &before[prev_t * sl..][..sl]
        };
        let xw_t = &x.xw[t * p.batch * gh..][..p.batch * gh];
        // With quantized weights, h as their product sees it (in `tmp`, which only GRU's
        // second product uses otherwise).
        if let (Some(q), Some((hq, sums, room))) = (&x.rq, &mut int8) {
            // h quantized to bytes, times R's integers summed exactly, scaled by both
            // scales: h·Rᵀ + (Wb + Rb) + xw.
            let (scale, zero) = quantize_state_u8(h_prev, hq);
            let need = qmatmul::scratch_for(hd, gh);
            let (shared, slots) = need.layout(room.as_mut_ptr());
            // SAFETY: `hq` holds the batch's rows of `hd` bytes, `sums` their `gh` int32
            // sums, `room` the product's scratch for one worker (`int8_parts`).
            unsafe {
                qmatmul::qmatmul(
                    q,
                    zero,
                    hq.as_ptr(),
                    sums.as_mut_ptr() as *mut u8,
                    shared as *mut i32,
                    slots,
                    Par::SEQ,
                )
            };
            for (k, g) in gates[..p.batch * gh].iter_mut().enumerate() {
                let j = k % gh;
                let b = bsum.map_or(0.0, |s| s[j]);
                *g = sums[k] as f32 * (scale * q.scale[j]) + b + xw_t[k];
            }
        } else {
            let h_product: &[f32] = if p.quantize_h {
                quantize_state(h_prev, &mut tmp[..sl]);
                &tmp[..sl]
            } else {
                h_prev
            };
            let ep = if fused {
                (bsum, Some(xw_t))
            } else {
                (rb, None)
            };
            product(
                par,
                p.batch,
                h_product,
                hd,
                rp,
                (n1, gh),
                ep,
                &mut gates[..p.batch * gh],
                a_pack,
            );
        }
        for b in 0..p.batch {
            let g = &mut gates[b * gh..][..gh];
            let xr = &xw_t[b * gh..][..gh];
            let hp = &h_prev[b * hd..][..hd];
            let hn = &mut h_new[b * hd..][..hd];
            let cb = &mut c[b * hd..][..hd];
            let tb = &mut tmp[b * hd..][..hd];
            // The input side of gate `j`'s pre-activation: xw + Wb.
            let input = |j: usize, k: usize| xr[j * hd + k] + wb.map_or(0.0, |w| w[j * hd + k]);
            match p.cell {
                Cell::Rnn => {
                    clamp_all(g);
                    // SAFETY: hd floats each.
                    unsafe {
                        activation::activation_f32(
                            TANH,
                            [1.0, 0.0],
                            g.as_ptr(),
                            hn.as_mut_ptr(),
                            hd,
                        )
                    };
                }
                Cell::Gru => {
                    if fused {
                        clamp_all(&mut g[..2 * hd]);
                    } else {
                        for k in 0..2 * hd {
                            g[k] = clamp(input(k / hd, k % hd) + g[k]);
                        }
                    }
                    act(SIGMOID, &mut g[..2 * hd]);
                    let (zr, hg) = g.split_at_mut(2 * hd);
                    let (z, r) = zr.split_at(hd);
                    if p.linear_before_reset {
                        for k in 0..hd {
                            hg[k] = clamp(input(2, k) + r[k] * hg[k]);
                        }
                    } else {
                        for k in 0..hd {
                            tb[k] = r[k] * hp[k];
                        }
                        let rb_h = rb.map(|rb| &rb[2 * hd..]);
                        // One batch row at a time: (r ⊙ h)·R_hᵀ + Rb_h.
                        product(par, 1, tb, hd, rhp, (hd, hd), (rb_h, None), hg, &mut []);
                        for k in 0..hd {
                            hg[k] = clamp(input(2, k) + hg[k]);
                        }
                    }
                    act(TANH, hg);
                    for k in 0..hd {
                        hn[k] = (1.0 - z[k]) * hg[k] + z[k] * hp[k];
                    }
                }
                Cell::Lstm => {
                    let w = lstm_cell::LstmCell {
                        hidden: hd,
                        g: g.as_ptr(),
                        c: cb.as_mut_ptr(),
                        h: hn.as_mut_ptr(),
                        pp: x.peephole.map_or(std::ptr::null(), |p| p.as_ptr()),
                        clip,
                        input_forget: p.input_forget,
                    };
                    // SAFETY: g holds 4·hd floats, cb and hn hd, the peepholes 3·hd.
                    unsafe { simd::dispatch(w) };
                }
            }
        }
    }
    // The last h (the initial one for an empty sequence), then the last c.
    let last = if p.seq == 0 {
        None
    } else if p.reverse {
        Some(0)
    } else {
        Some(p.seq - 1)
    };
    let (fh, fc) = finals.split_at_mut(sl);
    match last {
        Some(t) => fh.copy_from_slice(&steps[t * sl..][..sl]),
        None => fh.copy_from_slice(x.h0.unwrap_or(&zeros[..sl])),
    }
    if p.cell == Cell::Lstm {
        fc.copy_from_slice(&c[..sl]);
    }
}

/// `q` = `h` quantized to uint8 and back, as onnxruntime's quantized recurrences quantize
/// the hidden state before its product (DynamicQuantizeLinear over all of `h`): the range
/// `[min(0, min h), max(0, max h)]` in 255 steps of `scale` (1 for an all-zero range),
/// the zero point and each value rounded half to even and clamped to `[0, 255]`; `q` holds
/// `(value − zero point) · scale`.
fn quantize_state(h: &[f32], q: &mut [f32]) {
    let (scale, zero) = state_quantization(h);
    for (q, &v) in q.iter_mut().zip(h) {
        *q = (level(v, scale, zero) - zero) * scale;
    }
}

/// `quantize_state`'s levels as bytes into `q`; returns the scale and the zero point.
fn quantize_state_u8(h: &[f32], q: &mut [u8]) -> (f32, i32) {
    let (scale, zero) = state_quantization(h);
    for (q, &v) in q.iter_mut().zip(h) {
        *q = level(v, scale, zero) as u8;
    }
    (scale, zero as i32)
}

/// Half to even by the float adder (`round_ties_even` is a library call on the baseline
/// target): exact for |x| ≤ 2^22, and |v / scale| ≤ 255 here.
fn round_even(x: f32) -> f32 {
    (x + 12_582_912.0) - 12_582_912.0
}

/// DynamicQuantizeLinear's scale and zero point for `h` (`quantize_state`).
fn state_quantization(h: &[f32]) -> (f32, f32) {
    let (lo, hi) = (h.iter()).fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    (scale, round_even((-lo / scale).clamp(0.0, 255.0)))
}

/// The uint8 level of `v`.
fn level(v: f32, scale: f32, zero: f32) -> f32 {
    (round_even(v / scale) + zero).clamp(0.0, 255.0)
}

/// Whether `q` is the integer product an `r_int8` recurrence of `p` takes: uint8 state rows
/// (`batch` of them) of depth `hidden` into `gates·hidden` int32 sums.
fn int8_product_fits(p: &RecurrentParams, q: &QMatMulParams) -> bool {
    q.q.out == QOut::I32 && !q.q.x_signed && q.rows == p.batch && q.k == p.hidden && q.n == p.gh()
}

/// `out = a · B + bias + residual` for `a` `[rows, k]` and B packed `[k, n]`, `out` and
/// `residual` rows `ldc` apart: the matrix-vector product for rows up to `GEMV_ROWS`, else
/// the GEMM with `a` packed into `a_pack` (`packed_a_len(rows, k)` floats).
#[allow(clippy::too_many_arguments, reason = "the product's operands")]
fn product(
    par: Par,
    rows: usize,
    a: &[f32],
    k: usize,
    bp: &[f32],
    (n, ldc): (usize, usize),
    (bias, residual): (Option<&[f32]>, Option<&[f32]>),
    out: &mut [f32],
    a_pack: &mut [f32],
) {
    let ep = Epilogue {
        bias_col: bias.map_or(std::ptr::null(), |b| b.as_ptr()),
        residual: residual.map_or(std::ptr::null(), |r| r.as_ptr()),
        ..Epilogue::NONE
    };
    // SAFETY: a [rows, k], bp packed [k, n], out (and residual) rows·ldc with n ≤ ldc, a_pack
    // as above.
    unsafe {
        if rows <= GEMV_ROWS {
            gemm::gemv_packed_b(
                par,
                rows,
                n,
                k,
                a.as_ptr(),
                k,
                false,
                bp.as_ptr(),
                out.as_mut_ptr(),
                ldc,
                &ep,
            );
        } else {
            pack::pack_a(a.as_ptr(), k, false, rows, k, a_pack.as_mut_ptr());
            gemm::gemm_packed_a(
                par,
                rows,
                n,
                k,
                a_pack.as_ptr(),
                BSource::Packed(bp.as_ptr()),
                out.as_mut_ptr(),
                ldc,
                &ep,
                crate::par::Slots::single(std::ptr::null_mut()),
            );
        }
    }
}

/// Both directions of a bidirectional layer: direction `d` runs `p` reversed when `d` is 1
/// (so `p.reverse` is direction 0's), over its own operands `x[d]`, into `y`'s half `d`
/// (`2·y_len()` floats) with scratch half `d` (`pair_scratch_floats()`). With two workers
/// or more the directions run at once, one task each, each direction's product on its own
/// thread (a step's product is too small to split with a join every step); otherwise one
/// after the other, each on `par`. Each direction computes what `recurrent_f32` would.
///
/// # Panics
/// As `recurrent_f32`, for each direction.
pub fn recurrent_pair_f32(
    p: &RecurrentParams,
    clip: f32,
    x: [&Operands; 2],
    y: &mut [f32],
    scratch: &mut [f32],
    par: Par,
) {
    let (yl, sl) = (p.y_len(), p.pair_scratch_floats() / 2);
    assert_eq!(y.len(), 2 * yl, "y");
    assert!(scratch.len() >= 2 * sl, "scratch");
    let dir = |d: usize| RecurrentParams {
        reverse: p.reverse != (d == 1),
        ..*p
    };
    if par.workers() < 2 {
        let (y0, y1) = y.split_at_mut(yl);
        let (s0, s1) = scratch.split_at_mut(sl);
        recurrent_f32(&dir(0), clip, x[0], y0, s0, par);
        recurrent_f32(&dir(1), clip, x[1], y1, &mut s1[..sl], par);
        return;
    }
    let (yp, sp) = (y.as_mut_ptr() as usize, scratch.as_mut_ptr() as usize);
    // SAFETY: task d writes only half d of y and of the scratch.
    unsafe {
        par.run_ranges(2, 2, &|ds, _| {
            for d in ds {
                let y = std::slice::from_raw_parts_mut((yp as *mut f32).add(d * yl), yl);
                let s = std::slice::from_raw_parts_mut((sp as *mut f32).add(d * sl), sl);
                recurrent_f32(&dir(d), clip, x[d], y, s, Par::SEQ);
            }
        })
    };
}

/// One direction's operands from the C ABI's pointers, or None where a required one is
/// null or `rq` is not the integer product `p` takes (given exactly with `r_int8`).
/// Optional operands are null when absent; c0 and peepholes count for LSTM only.
///
/// # Safety
/// Each non-null pointer holds the floats `p` gives it; `rq` is null or a sealed blob.
unsafe fn operands<'a>(
    p: &RecurrentParams,
    [xw, r, bias, h0, c0, peephole]: [*const f32; 6],
    rq: *const i64,
) -> Option<Operands<'a>> {
    let lstm = p.cell == Cell::Lstm;
    let rq = if p.r_int8 {
        // SAFETY: the contract.
        let q = unsafe { params::blob(rq) }
            .and_then(QMatMulParams::decode)
            .and_then(|q| q.with_rows(p.batch as i64))
            .ok()?;
        Some(q).filter(|q| int8_product_fits(p, q))?.into()
    } else {
        None
    };
    // SAFETY: (each) the contract.
    unsafe {
        Some(Operands {
            xw: elements(xw, p.xw_len())?,
            r: if p.r_int8 {
                &[]
            } else {
                elements(r, p.r_len())?
            },
            rq,
            bias: elements(bias, 2 * p.gh()),
            h0: elements(h0, p.state_len()),
            c0: if lstm {
                elements(c0, p.state_len())
            } else {
                None
            },
            peephole: if lstm {
                elements(peephole, 3 * p.hidden)
            } else {
                None
            },
        })
    }
}

/// C ABI entry point (`kernels::RECURRENT_F32`).
///
/// # Safety
/// `params` is a sealed blob; `clip` points to one float; `xw`, `r` (unless `r_int8`) and
/// `y` (and each non-null optional operand) hold the floats the parameters give them; `rq`
/// is null or a sealed blob (`r_int8`'s integer product); `scratch` holds
/// `scratch_floats()` floats; `threads` as `Par::from_raw`.
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_recurrent_f32(
    params: *const i64,
    clip: *const f32,
    xw: *const f32,
    r: *const f32,
    rq: *const i64,
    bias: *const f32,
    h0: *const f32,
    c0: *const f32,
    peephole: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, RecurrentParams::decode);
    // SAFETY: (each) a non-null pointer holds the floats the parameters give it (contract).
    let (clip, ops, y, scratch) = unsafe {
        (
            elements(clip, 1),
            operands(&p, [xw, r, bias, h0, c0, peephole], rq),
            elements_mut(y, p.y_len()),
            elements_mut(scratch, p.scratch_floats()),
        )
    };
    let (Some(clip), Some(ops), Some(y), Some(scratch)) = (clip, ops, y, scratch) else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: the caller's contract.
    let par = unsafe { Par::from_raw(threads) };
    recurrent_f32(&p, clip[0], &ops, y, scratch, par);
    ONNXC_OK
}

/// C ABI entry point (`kernels::RECURRENT_PAIR_F32`): `recurrent_pair_f32`, each direction's
/// operands as `onnxc_recurrent_f32` takes them.
///
/// # Safety
/// As `onnxc_recurrent_f32` for each direction; `y` holds `2·y_len()` floats, `scratch`
/// `pair_scratch_floats()`.
#[allow(clippy::too_many_arguments, reason = "the kernel's operands")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_recurrent_pair_f32(
    params: *const i64,
    clip: *const f32,
    xw0: *const f32,
    r0: *const f32,
    rq0: *const i64,
    bias0: *const f32,
    h00: *const f32,
    c00: *const f32,
    peephole0: *const f32,
    xw1: *const f32,
    r1: *const f32,
    rq1: *const i64,
    bias1: *const f32,
    h01: *const f32,
    c01: *const f32,
    peephole1: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, RecurrentParams::decode);
    // SAFETY: (each) a non-null pointer holds the floats the parameters give it (contract).
    let (clip, ops0, ops1, y, scratch) = unsafe {
        (
            elements(clip, 1),
            operands(&p, [xw0, r0, bias0, h00, c00, peephole0], rq0),
            operands(&p, [xw1, r1, bias1, h01, c01, peephole1], rq1),
            elements_mut(y, 2 * p.y_len()),
            elements_mut(scratch, p.pair_scratch_floats()),
        )
    };
    let (Some(clip), Some(ops0), Some(ops1), Some(y), Some(scratch)) =
        (clip, ops0, ops1, y, scratch)
    else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: the caller's contract.
    let par = unsafe { Par::from_raw(threads) };
    recurrent_pair_f32(&p, clip[0], [&ops0, &ops1], y, scratch, par);
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;

    /// The recurrence in float64, straight from the formulas (the oracle).
    fn reference(p: &RecurrentParams, clip: f32, x: &Operands) -> Vec<f32> {
        let (hd, gh, b) = (p.hidden, p.gh(), p.batch);
        let clip = clip as f64;
        let cl = |v: f64| v.clamp(-clip, clip);
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let at = |s: Option<&[f32]>, i: usize| s.map_or(0.0, |s| s[i] as f64);
        let mut h: Vec<f64> = (0..b * hd).map(|i| at(x.h0, i)).collect();
        let mut c: Vec<f64> = (0..b * hd).map(|i| at(x.c0, i)).collect();
        let mut y = vec![0f32; p.y_len()];
        for s in 0..p.seq {
            let t = if p.reverse { p.seq - 1 - s } else { s };
            let mut hn = vec![0f64; b * hd];
            // The h that multiplies R: with quantized weights, h as a float32 state
            // quantized (`quantize_state`, checked on its own below).
            let hr: Vec<f64> = if p.quantize_h {
                let h32: Vec<f32> = h.iter().map(|&v| v as f32).collect();
                let mut q = vec![0f32; h32.len()];
                quantize_state(&h32, &mut q);
                q.iter().map(|&v| v as f64).collect()
            } else {
                h.clone()
            };
            for bi in 0..b {
                // Gate j, unit k: its input side and its recurrent side (h·Rᵀ + Rb).
                let inp = |j: usize, k: usize| {
                    x.xw[(t * b + bi) * gh + j * hd + k] as f64 + at(x.bias, j * hd + k)
                };
                let rec = |hv: &[f64], j: usize, k: usize| {
                    let row = j * hd + k;
                    (0..hd)
                        .map(|q| hv[bi * hd + q] * x.r[row * hd + q] as f64)
                        .sum::<f64>()
                        + at(x.bias, gh + row)
                };
                for k in 0..hd {
                    let i = bi * hd + k;
                    hn[i] = match p.cell {
                        Cell::Rnn => cl(inp(0, k) + rec(&h, 0, k)).tanh(),
                        Cell::Gru => {
                            let z = sig(cl(inp(0, k) + rec(&h, 0, k)));
                            let hh = if p.linear_before_reset {
                                let r = sig(cl(inp(1, k) + rec(&h, 1, k)));
                                cl(inp(2, k) + r * rec(&h, 2, k)).tanh()
                            } else {
                                let rh: Vec<f64> = (0..b * hd)
                                    .map(|q| {
                                        let r = sig(cl(inp(1, q % hd) + rec(&h, 1, q % hd)));
                                        r * h[q]
                                    })
                                    .collect();
                                cl(inp(2, k) + rec(&rh, 2, k)).tanh()
                            };
                            (1.0 - z) * hh + z * h[i]
                        }
                        Cell::Lstm => {
                            let pp = |j: usize| at(x.peephole, j * hd + k);
                            let ig = sig(cl(inp(0, k) + rec(&hr, 0, k) + pp(0) * c[i]));
                            let fg = if p.input_forget {
                                1.0 - ig
                            } else {
                                sig(cl(inp(2, k) + rec(&hr, 2, k) + pp(2) * c[i]))
                            };
                            let cc = cl(inp(3, k) + rec(&hr, 3, k)).tanh();
                            c[i] = fg * c[i] + ig * cc;
                            let o = sig(cl(inp(1, k) + rec(&hr, 1, k) + pp(1) * c[i]));
                            o * c[i].tanh()
                        }
                    };
                }
            }
            h = hn;
            for (o, v) in y[t * b * hd..][..b * hd].iter_mut().zip(&h) {
                *o = *v as f32;
            }
        }
        let sl = b * hd;
        for (o, v) in y[p.seq * sl..][..sl].iter_mut().zip(&h) {
            *o = *v as f32;
        }
        if p.cell == Cell::Lstm {
            for (o, v) in y[(p.seq + 1) * sl..].iter_mut().zip(&c) {
                *o = *v as f32;
            }
        }
        y
    }

    #[test]
    fn every_cell_matches_the_formulas_on_every_pool() {
        let cases = [
            (Cell::Rnn, 5, 1, 7, false, false, false),
            (Cell::Rnn, 3, 3, 16, true, false, false),
            (Cell::Gru, 6, 1, 9, false, false, false),
            (Cell::Gru, 4, 3, 20, true, true, false),
            (Cell::Gru, 4, 2, 33, false, true, false),
            // Batches the GEMM takes: the first product's rows a gates' width apart.
            (Cell::Gru, 3, 4, 17, false, false, false),
            (Cell::Lstm, 3, 5, 9, false, false, false),
            (Cell::Lstm, 7, 1, 24, false, false, false),
            (Cell::Lstm, 5, 4, 12, true, false, true),
            (Cell::Lstm, 1, 2, 40, false, false, false),
            (Cell::Lstm, 0, 2, 8, false, false, false),
            (Cell::Lstm, 4, 3, 10, true, false, false),
        ];
        for (k, &(cell, seq, batch, hidden, reverse, lbr, forget)) in cases.iter().enumerate() {
            let p = RecurrentParams {
                cell,
                seq,
                batch,
                hidden,
                reverse,
                linear_before_reset: lbr,
                input_forget: forget,
                r_packed: k % 3 == 2,
                // The state quantized: a matrix-vector product and a GEMM.
                quantize_h: cell == Cell::Lstm && k % 4 == 3,
                r_int8: false,
            };
            assert_eq!(RecurrentParams::decode(&p.encode()), Ok(p));
            let rand = |n, s| crate::test_rand(n, 16 * k as u64 + s);
            let raw = RecurrentParams {
                r_packed: false,
                ..p
            };
            let (xw, r, bias) = (
                rand(p.xw_len(), 1),
                rand(raw.r_len(), 2),
                rand(2 * p.gh(), 3),
            );
            let (h0, c0, peep) = (
                rand(p.state_len(), 4),
                rand(p.state_len(), 5),
                rand(3 * hidden, 6),
            );
            // Every other case with every optional operand, the others with none; the
            // LSTMs with peepholes clipped.
            let full = k % 2 == 1;
            let clip = if cell == Cell::Lstm && full {
                0.75
            } else {
                f32::INFINITY
            };
            let ops = Operands {
                xw: &xw,
                r: &r,
                rq: None,
                bias: full.then_some(&bias[..]),
                h0: full.then_some(&h0[..]),
                c0: full.then_some(&c0[..]),
                peephole: full.then_some(&peep[..]),
            };
            let want = reference(&p, clip, &ops);
            // Cases with `r_packed` get R packed as the compiler packs it.
            let packed_r = p.pack_r(&r);
            let ops = Operands {
                r: if p.r_packed { &packed_r } else { &r },
                ..ops
            };
            let got = same_bits_on_every_pool(&format!("{p:?}"), |_, threads| {
                let mut y = vec![f32::NAN; p.y_len()];
                let mut scratch = vec![f32::NAN; p.scratch_floats()];
                // SAFETY: the caller's pool (or none).
                let par = unsafe { Par::from_raw(threads) };
                recurrent_f32(&p, clip, &ops, &mut y, &mut scratch, par);
                y
            });
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                    "{p:?} [{i}]: {a} vs {b}"
                );
            }
        }
    }

    /// Both directions at once give, on every pool, the bits of the two single-direction
    /// calls (the second reversed), for each cell, with and without the optional operands.
    #[test]
    fn a_pair_runs_each_direction_as_its_own_call() {
        for (k, cell) in [Cell::Rnn, Cell::Gru, Cell::Lstm, Cell::Lstm]
            .into_iter()
            .enumerate()
        {
            let p = RecurrentParams {
                cell,
                seq: 6,
                batch: 1 + k % 3,
                hidden: 13 + 8 * k,
                reverse: false,
                linear_before_reset: k == 1,
                input_forget: false,
                r_packed: k % 2 == 1,
                quantize_h: k == 3,
                r_int8: false,
            };
            let rand = |n, s| crate::test_rand(n, 40 * k as u64 + s);
            let full = k >= 2;
            let data: Vec<[Vec<f32>; 6]> = (0..2)
                .map(|d| {
                    let r = rand(
                        RecurrentParams {
                            r_packed: false,
                            ..p
                        }
                        .r_len(),
                        10 * d + 2,
                    );
                    let r = if p.r_packed { p.pack_r(&r) } else { r };
                    [
                        rand(p.xw_len(), 10 * d + 1),
                        r,
                        rand(2 * p.gh(), 10 * d + 3),
                        rand(p.state_len(), 10 * d + 4),
                        rand(p.state_len(), 10 * d + 5),
                        rand(3 * p.hidden, 10 * d + 6),
                    ]
                })
                .collect();
            let ops: Vec<Operands> = data
                .iter()
                .map(|[xw, r, bias, h0, c0, peep]| Operands {
                    xw,
                    r,
                    rq: None,
                    bias: full.then_some(&bias[..]),
                    h0: full.then_some(&h0[..]),
                    c0: full.then_some(&c0[..]),
                    peephole: (full && k == 3).then_some(&peep[..]),
                })
                .collect();
            let mut want = Vec::new();
            for (d, o) in ops.iter().enumerate() {
                let pd = RecurrentParams {
                    reverse: d == 1,
                    ..p
                };
                let mut y = vec![f32::NAN; p.y_len()];
                let mut scratch = vec![f32::NAN; p.scratch_floats()];
                recurrent_f32(&pd, 0.9, o, &mut y, &mut scratch, Par::SEQ);
                want.extend(y);
            }
            let got = same_bits_on_every_pool(&format!("pair {p:?}"), |_, threads| {
                let mut y = vec![f32::NAN; 2 * p.y_len()];
                let mut scratch = vec![f32::NAN; p.pair_scratch_floats()];
                // SAFETY: the caller's pool (or none).
                let par = unsafe { Par::from_raw(threads) };
                recurrent_pair_f32(&p, 0.9, [&ops[0], &ops[1]], &mut y, &mut scratch, par);
                y
            });
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{p:?}: the pair differs from its two calls"
            );
        }
    }

    /// R's integers (`r_int8`: int8 with zero points 0, or uint8-like ones shifted with
    /// theirs; one scale per column) give the recurrence of their float values, within
    /// rounding, over batches of one to three, each direction on its own and both as a
    /// pair (the bits of the two calls, on every pool).
    #[test]
    fn integer_weights_give_the_recurrence_of_their_values() {
        use crate::qconv::QScalars;
        for (k, &(seq, batch, hidden, zero_points)) in
            [(5, 1, 12, false), (4, 3, 33, true), (3, 2, 64, true)]
                .iter()
                .enumerate()
        {
            let p = RecurrentParams {
                cell: Cell::Lstm,
                seq,
                batch,
                hidden,
                reverse: k == 1,
                linear_before_reset: false,
                input_forget: false,
                r_packed: false,
                quantize_h: true,
                r_int8: true,
            };
            assert_eq!(RecurrentParams::decode(&p.encode()), Ok(p));
            let (hd, gh) = (hidden, p.gh());
            let rand = |n, s| crate::test_rand(n, 70 * k as u64 + s);
            // R as DynamicQuantizeLSTM gives it: `[hidden, gates·hidden]` integers.
            let ints: Vec<i8> = (0..hd * gh)
                .map(|i| ((i * 37 + 11 * k) % 251) as i32 - 125)
                .map(|v| v as i8)
                .collect();
            let zp: Vec<i32> = (0..gh)
                .map(|j| if zero_points { (j % 7) as i32 - 3 } else { 0 })
                .collect();
            let scale: Vec<f32> = (0..gh).map(|j| 0.002 + 0.0001 * (j % 5) as f32).collect();
            let q = QScalars {
                out: QOut::I32,
                x_signed: false,
                x_zp: 0,
                y_zp: 0,
                lo: 0,
                hi: 0,
            };
            let blob = QMatMulParams::encode(q, hd, gh, &ints, &zp, None, &scale, &vec![0.0; gh]);
            let rq = || QMatMulParams::decode(&blob).and_then(|q| q.with_rows(batch as i64));
            // Their float values, `[gates·hidden, hidden]` as the float recurrence takes them.
            let r: Vec<f32> = (0..gh * hd)
                .map(|i| {
                    let (j, q) = (i / hd, i % hd);
                    (ints[q * gh + j] as i32 - zp[j]) as f32 * scale[j]
                })
                .collect();
            let (xw, bias, h0, c0) = (
                rand(p.xw_len(), 1),
                rand(2 * gh, 2),
                rand(p.state_len(), 3),
                rand(p.state_len(), 4),
            );
            let floats = Operands {
                xw: &xw,
                r: &r,
                rq: None,
                bias: Some(&bias),
                h0: Some(&h0),
                c0: Some(&c0),
                peephole: None,
            };
            let want = reference(
                &RecurrentParams { r_int8: false, ..p },
                f32::INFINITY,
                &floats,
            );
            let int8 = || Operands {
                xw: &xw,
                r: &[],
                rq: rq().ok(),
                bias: Some(&bias),
                h0: Some(&h0),
                c0: Some(&c0),
                peephole: None,
            };
            let run = |pd: &RecurrentParams, par| {
                let mut y = vec![f32::NAN; p.y_len()];
                let mut scratch = vec![f32::NAN; p.scratch_floats()];
                recurrent_f32(pd, f32::INFINITY, &int8(), &mut y, &mut scratch, par);
                y
            };
            let got = run(&p, Par::SEQ);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                    "{p:?} [{i}]: {a} vs {b}"
                );
            }
            // As a pair: direction 0 forward, 1 reversed, over the same operands.
            let forward = RecurrentParams {
                reverse: false,
                ..p
            };
            let mut two = run(&forward, Par::SEQ);
            two.extend(run(&RecurrentParams { reverse: true, ..p }, Par::SEQ));
            let pair = same_bits_on_every_pool(&format!("pair {p:?}"), |_, threads| {
                let mut y = vec![f32::NAN; 2 * p.y_len()];
                let mut scratch = vec![f32::NAN; p.pair_scratch_floats()];
                // SAFETY: the caller's pool (or none).
                let par = unsafe { Par::from_raw(threads) };
                let (a, b) = (int8(), int8());
                recurrent_pair_f32(&forward, f32::INFINITY, [&a, &b], &mut y, &mut scratch, par);
                y
            });
            assert!(
                pair.iter()
                    .zip(&two)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{p:?}: the pair differs from its two calls"
            );
        }
    }

    /// The state quantized as DynamicQuantizeLinear would (by hand): the range [-1, 2]
    /// (zero included) in steps of 3/255, the zero point 85, each value rounded to a level.
    #[test]
    fn a_state_is_quantized_over_its_range_with_zero() {
        let scale = 3.0f32 / 255.0;
        let mut q = [f32::NAN; 5];
        quantize_state(&[-1.0, 0.0, 2.0, 0.5], &mut q[..4]);
        let levels = [-85.0f32, 0.0, 170.0, (0.5 / scale).round_ties_even()];
        for (k, l) in levels.iter().enumerate() {
            assert_eq!(q[k], l * scale, "{k}");
        }
        // A wider range: [-4, 2], the zero point 170; -4 is level 0.
        quantize_state(&[-1.0, 0.0, 2.0, 0.5, -4.0], &mut q);
        let scale = 6.0f32 / 255.0;
        assert_eq!((4.0 / scale).round_ties_even(), 170.0);
        assert_eq!(q[4], -170.0 * scale);
        assert_eq!(q[1], 0.0);
        // An all-zero state stays zero.
        quantize_state(&[0.0; 3], &mut q[..3]);
        assert_eq!(&q[..3], &[0.0; 3]);
    }

    #[test]
    fn refuses_corrupt_blobs() {
        let good = RecurrentParams {
            cell: Cell::Lstm,
            seq: 3,
            batch: 1,
            hidden: 4,
            reverse: false,
            linear_before_reset: false,
            input_forget: false,
            r_packed: false,
            quantize_h: false,
            r_int8: false,
        };
        let gru = RecurrentParams {
            cell: Cell::Gru,
            ..good
        };
        for bad in [
            RecurrentParams { hidden: 0, ..good },
            RecurrentParams { batch: 0, ..good },
            RecurrentParams {
                quantize_h: true,
                ..gru
            },
            // Integer weights multiply a quantized state only.
            RecurrentParams {
                r_int8: true,
                ..good
            },
        ] {
            assert!(RecurrentParams::decode(&bad.encode()).is_err(), "{bad:?}");
        }
        let mut blob = good.encode();
        let n = blob.len();
        blob[n - PARAMS] = 9; // the cell
        assert!(RecurrentParams::decode(&blob).is_err());
    }
}
