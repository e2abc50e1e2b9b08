//! One direction of an RNN, GRU or LSTM (`onnxc_recurrent_f32`): the input projection
//! `xw` `[seq, batch, gates·hidden]`, the recurrent weights `r` `[gates·hidden, hidden]`,
//! then the optional bias `[2·gates·hidden]`, initial `h` and `c` `[batch, hidden]` and
//! peepholes `[3·hidden]` that are present, into one float32 result `[seq + states, batch,
//! hidden]`: every step's `h` at its time, the last `h`, and for LSTM the last `c`. The
//! builder (`frontend::ops::rnn`) slices them apart.

use super::{KernelOp, LowerCx, Operand, f32_result, f32s, required_scratch};
use crate::ir::Tensor;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use onnxc_runtime::recurrent::{Operands, RecurrentParams};

#[derive(Clone, Debug, PartialEq)]
pub struct Recurrent {
    pub params: RecurrentParams,
    /// Bound of every activation's input (∞ for none).
    pub clip: f32,
    /// Which optional operands follow `xw` and `r`: bias, initial h, initial c, peepholes.
    pub present: [bool; 4],
}

impl Recurrent {
    /// Operand positions of the bias, initial h, initial c and peepholes, where present.
    fn optional(&self) -> [Option<usize>; 4] {
        let mut next = 2;
        self.present.map(|p| {
            p.then(|| {
                next += 1;
                next - 1
            })
        })
    }
}

impl Recurrent {
    /// The parameters of the call: R packed at compile time when it is a constant.
    fn called(&self, r_constant: bool) -> RecurrentParams {
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
            "cell={:?} seq={} batch={} hidden={} reverse={} linear_before_reset={} input_forget={} clip={}",
            p.cell,
            p.seq,
            p.batch,
            p.hidden,
            p.reverse,
            p.linear_before_reset,
            p.input_forget,
            self.clip
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, crate::ir::interp::EvalError>> {
        let p = &self.params;
        let work = [p.seq.max(1), p.batch, p.gh(), p.hidden]
            .iter()
            .fold(1usize, |w, &f| w.saturating_mul(f));
        if work > limit {
            return None;
        }
        let [bias, h0, c0, peephole] = self.optional().map(|k| k.map(|k| f32s(x[k])));
        let (xw, r) = (f32s(x[0]), f32s(x[1]));
        let ops = Operands {
            xw: &xw,
            r: &r,
            bias: bias.as_deref(),
            h0: h0.as_deref(),
            c0: c0.as_deref(),
            peephole: peephole.as_deref(),
        };
        let mut y = vec![0f32; p.y_len()];
        let mut scratch = vec![0f32; p.scratch_floats()];
        onnxc_runtime::recurrent::recurrent_f32(p, self.clip, &ops, &mut y, &mut scratch, Par::SEQ);
        Some(Ok(f32_result(result, &y)))
    }

    fn scratch(&self, operands: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        ScratchNeed::shared(self.called(operands[1].constant).scratch_floats() * 4)
    }

    /// Items of a run-time batch are the batch entries: dim 1 of `xw` and of the result,
    /// dim 0 of the initial states; the weights are shared.
    fn per_item(&self, operands: &[Option<usize>], _: &[usize], results: &[Option<usize>]) -> bool {
        let [bias, h0, c0, peephole] = self.optional();
        let want = |k: usize| {
            if Some(k) == h0 || Some(k) == c0 {
                Some(0)
            } else if k == 0 {
                Some(1)
            } else {
                debug_assert!(k == 1 || [bias, peephole].contains(&Some(k)));
                None
            }
        };
        operands.iter().enumerate().all(|(k, &a)| a == want(k)) && results == [Some(1)]
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let [bias, h0, c0, peephole] = self
            .optional()
            .map(|k| k.map_or(Arg::Null, |k| cx.operand_arg(k)));
        // Constant weights are packed now (`RecurrentParams::pack_r`), not at every call.
        let params = self.called(cx.operand(1).constant);
        let r = if params.r_packed {
            let raw = cx.constant_f32(1).ok_or_else(|| {
                crate::Error::Internal("recurrent weights constant without their data".into())
            })?;
            cx.new_constant_f32(&params.pack_r(&raw))
        } else {
            cx.operand_arg(1)
        };
        Ok(vec![Stmt::call(
            &kernels::RECURRENT_F32,
            vec![
                Arg::Params(params.encode()),
                Arg::Floats(vec![self.clip]),
                cx.operand_arg(0),
                r,
                bias,
                h0,
                c0,
                peephole,
                cx.result_arg(),
                required_scratch(cx, self)?,
                Arg::Threads,
            ],
        )?])
    }
}
