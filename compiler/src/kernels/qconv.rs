//! Integer convolution (`onnxc_qconv`): one uint8/int8 operand, the activations, and
//! optionally a second, their zero point computed at run time; the weights, the other zero
//! points, bias and scales are packed into the parameter blob when the frontend builds the
//! op (`onnxc_runtime::qconv::QConvParams::encode`). The call passes that blob with its
//! sizes taken out (`QConvParams::sizeless`) and the sizes as a geometry of their own. The
//! result is int32, float32, uint8 or int8 (`QOut`). Built by `frontend::ops::qdq`.

use super::{KernelOp, LowerCx, Operand, fold_with_scratch};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use onnxc_runtime::qconv::QConvParams;
use std::sync::Arc;

/// The op: its sealed `QConvParams` blob (compared by content).
#[derive(Clone, Debug, PartialEq)]
pub struct QConv(pub Arc<Vec<i64>>);

impl QConv {
    fn params(&self) -> QConvParams<'_> {
        QConvParams::decode(&self.0).expect("the frontend encodes a valid blob")
    }
}

impl KernelOp for QConv {
    fn name(&self) -> &'static str {
        "qconv"
    }

    fn attrs(&self) -> String {
        let p = self.params();
        let g = &p.conv;
        format!(
            "out={:?} group={} kernel={:?} strides={:?} dilations={:?} pads={:?} x_zp={}",
            p.q.out, g.group, g.kernel, g.strides, g.dilations, g.pads, p.q.x_zp
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = self.params();
        let macs =
            (result.len() as usize).saturating_mul(p.weights.len() / (p.conv.m.max(1) as usize));
        if macs > limit.saturating_mul(16) {
            return None;
        }
        let bytes = result.len() as usize * p.q.out.size();
        fold_with_scratch(
            &kernels::QCONV,
            p.scratch(),
            result,
            bytes,
            |y, _, slots| {
                let mut corr = vec![0i32; p.conv.m as usize];
                let run_time;
                let p = match x.get(1) {
                    Some(z) => {
                        run_time = p.with_x_zp(z.to_i64s()[0] as i32, &mut corr);
                        &run_time
                    }
                    None => &p,
                };
                // SAFETY: the operand and result hold the tensors the geometry describes (the
                // builder checked their shapes), the slots the scratch it asks for.
                unsafe { onnxc_runtime::qconv::qconv(p, x[0].data.as_ptr(), y, slots, Par::SEQ) }
            },
        )
    }

    fn scratch(&self, _: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        self.params().scratch()
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let scratch = super::required_scratch(cx, self)?;
        // Operand 1: the activations' zero point, when it is computed at run time.
        let zp = if cx.has_operand(1) {
            cx.operand_arg(1)
        } else {
            Arg::Null
        };
        // The sizes apart from the weights' blob, so that the blob is the same at every
        // size (dims taken at run time make the sizes formulas of them).
        let sizeless = QConvParams::sizeless(&self.0).map_err(|e| {
            crate::Error::Internal(format!("the integer convolution's blob: {e:?}"))
        })?;
        Ok(vec![Stmt::call(
            &kernels::QCONV,
            vec![
                Arg::Blob(Arc::new(sizeless)),
                Arg::Params(self.params().conv.encode()),
                cx.operand_arg(0),
                zp,
                cx.result_arg(),
                scratch,
                Arg::Threads,
            ],
        )?])
    }
}
