//! One direction of an RNN, GRU or LSTM (`onnxc_recurrent_f32`): the input projection
//! `xw` `[seq, batch, gates·hidden]`, the recurrent weights `r` `[gates·hidden, hidden]`,
//! then the optional bias `[2·gates·hidden]`, initial `h` and `c` `[batch, hidden]` and
//! peepholes `[3·hidden]` that are present, into one float32 result `[seq + states, batch,
//! hidden]`: every step's `h` at its time, the last `h`, and for LSTM the last `c`. The
//! builder (`frontend::ops::rnn`) slices them apart.
//!
//! With `integer_r` (DynamicQuantizeLSTM's constant integer weights), no `r` operand: each
//! direction's R is the integer product's parameter blob (`RecurrentParams::r_int8`).
//!
//! A `pair` is both directions of a bidirectional layer in one call
//! (`onnxc_recurrent_pair_f32`, the second direction reversed, the two at once on a pool of
//! two or more): each direction's operands in turn, as above, into `[2, seq + states, batch,
//! hidden]`.

use super::{KernelOp, LowerCx, Operand, f32_result, f32s, required_scratch};
use crate::ir::Tensor;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use onnxc_runtime::recurrent::{Operands, RecurrentParams};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct Recurrent {
    pub params: RecurrentParams,
    /// Bound of every activation's input (∞ for none).
    pub clip: f32,
    /// Which optional operands follow `xw` and `r`: bias, initial h, initial c, peepholes.
    pub present: [bool; 4],
    /// Both directions (see the module's documentation).
    pub pair: bool,
    /// Each direction's R as an integer product (`QMatMulParams` blobs), in place of the
    /// `r` operands; empty for float R.
    pub integer_r: Vec<Arc<Vec<i64>>>,
}

impl Recurrent {
    /// Operand positions of direction 0's bias, initial h, initial c and peepholes, where
    /// present (direction 1's are `per_direction()` later).
    fn optional(&self) -> [Option<usize>; 4] {
        let mut next = 1 + self.r_operands();
        self.present.map(|p| {
            p.then(|| {
                next += 1;
                next - 1
            })
        })
    }

    /// Operands of one direction.
    fn per_direction(&self) -> usize {
        1 + self.r_operands() + self.present.iter().filter(|&&p| p).count()
    }

    /// Operands for R per direction: none with `integer_r`.
    fn r_operands(&self) -> usize {
        usize::from(self.integer_r.is_empty())
    }

    /// Directions in the call.
    fn directions(&self) -> usize {
        if self.pair { 2 } else { 1 }
    }
}

impl Recurrent {
    /// The parameters of the call: R packed at compile time when it is a constant.
    fn called(&self, operands: &[Operand<'_>]) -> RecurrentParams {
        if !self.integer_r.is_empty() {
            return RecurrentParams {
                r_int8: true,
                ..self.params
            };
        }
        let r_constant =
            (0..self.directions()).all(|d| operands[d * self.per_direction() + 1].constant);
        RecurrentParams {
            r_packed: r_constant,
            ..self.params
        }
    }
}

impl KernelOp for Recurrent {
    fn name(&self) -> &'static str {
        "recurrent"
    }

    fn attrs(&self) -> String {
        let p = &self.params;
        format!(
            "cell={:?} seq={} batch={} hidden={} reverse={} linear_before_reset={} input_forget={} quantize_h={} clip={} pair={} integer_r={}",
            p.cell,
            p.seq,
            p.batch,
            p.hidden,
            p.reverse,
            p.linear_before_reset,
            p.input_forget,
            p.quantize_h,
            self.clip,
            self.pair,
            !self.integer_r.is_empty()
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, crate::ir::interp::EvalError>> {
        let p = &self.params;
        if !self.integer_r.is_empty() {
            // Integer weights run where the model runs (a rare constant input sequence).
            return None;
        }
        let work = [p.seq.max(1), p.batch, p.gh(), p.hidden]
            .iter()
            .fold(self.directions(), |w, &f| w.saturating_mul(f));
        if work > limit {
            return None;
        }
        let mut y = Vec::with_capacity(self.directions() * p.y_len());
        let mut scratch = vec![0f32; p.scratch_floats()];
        for d in 0..self.directions() {
            let at = d * self.per_direction();
            let [bias, h0, c0, peephole] = self.optional().map(|k| k.map(|k| f32s(x[at + k])));
            let (xw, r) = (f32s(x[at]), f32s(x[at + 1]));
            let ops = Operands {
                xw: &xw,
                r: &r,
                rq: None,
                bias: bias.as_deref(),
                h0: h0.as_deref(),
                c0: c0.as_deref(),
                peephole: peephole.as_deref(),
            };
            let pd = RecurrentParams {
                reverse: p.reverse != (d == 1),
                ..*p
            };
            let mut yd = vec![0f32; p.y_len()];
            onnxc_runtime::recurrent::recurrent_f32(
                &pd,
                self.clip,
                &ops,
                &mut yd,
                &mut scratch,
                Par::SEQ,
            );
            y.extend(yd);
        }
        Some(Ok(f32_result(result, &y)))
    }

    fn scratch(&self, operands: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        let p = self.called(operands);
        ScratchNeed::shared(
            4 * if self.pair {
                p.pair_scratch_floats()
            } else {
                p.scratch_floats()
            },
        )
    }

    /// Items of a run-time batch are the batch entries: dim 1 of `xw` and of the result
    /// (dim 2 of a pair's), dim 0 of the initial states; the weights are shared.
    fn per_item(&self, operands: &[Option<usize>], _: &[usize], results: &[Option<usize>]) -> bool {
        let [bias, h0, c0, peephole] = self.optional();
        let per = self.per_direction();
        let want = |k: usize| {
            let k = k % per;
            if Some(k) == h0 || Some(k) == c0 {
                Some(0)
            } else if k == 0 {
                Some(1)
            } else {
                debug_assert!(k == 1 || [bias, peephole].contains(&Some(k)));
                None
            }
        };
        let batch_axis = if self.pair { 2 } else { 1 };
        operands.iter().enumerate().all(|(k, &a)| a == want(k)) && results == [Some(batch_axis)]
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let operands: Vec<Operand<'_>> = (0..self.directions() * self.per_direction())
            .map(|k| cx.operand(k))
            .collect();
        // Constant weights are packed now (`RecurrentParams::pack_r`), not at every call.
        let params = self.called(&operands);
        let mut args = vec![Arg::Params(params.encode()), Arg::Floats(vec![self.clip])];
        for d in 0..self.directions() {
            let at = d * self.per_direction();
            let [bias, h0, c0, peephole] = self
                .optional()
                .map(|k| k.map_or(Arg::Null, |k| cx.operand_arg(at + k)));
            let r = if params.r_int8 {
                Arg::Null
            } else if params.r_packed {
                let raw = cx.constant_f32(at + 1).ok_or_else(|| {
                    crate::Error::Internal("recurrent weights constant without their data".into())
                })?;
                cx.new_constant_f32(&params.pack_r(&raw))
            } else {
                cx.operand_arg(at + 1)
            };
            let rq = match self.integer_r.get(d) {
                Some(blob) => Arg::Blob(blob.clone()),
                None => Arg::Null,
            };
            args.extend([cx.operand_arg(at), r, rq, bias, h0, c0, peephole]);
        }
        args.extend([cx.result_arg(), required_scratch(cx, self)?, Arg::Threads]);
        let kernel = if self.pair {
            &kernels::RECURRENT_PAIR_F32
        } else {
            &kernels::RECURRENT_F32
        };
        Ok(vec![Stmt::call(kernel, args)?])
    }
}
