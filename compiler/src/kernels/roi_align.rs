//! RoiAlign (`onnxc_roi_align_f32`): bilinear samples of float32 feature maps averaged or
//! max-pooled over each region's bins. The batch indices are run-time data: the kernel
//! checks them and returns `ONNXC_ERR_INDEX` (zeros for those regions) for one outside
//! the batch.

use super::{KernelOp, LowerCx, Operand, f32_result, f32s, kernel_status};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::roi_align::RoiAlignParams;

/// Operands: x `[n, c, h, w]` and rois `[r, 4]` float32, batch indices `[r]` int64; the
/// result `[r, c, oh, ow]` float32.
#[derive(Clone, Debug, PartialEq)]
pub struct RoiAlign {
    pub params: RoiAlignParams,
    pub spatial_scale: f32,
}

impl KernelOp for RoiAlign {
    fn name(&self) -> &'static str {
        "roi_align"
    }

    fn attrs(&self) -> String {
        let p = &self.params;
        format!(
            "out={}x{} sampling_ratio={} mode={} half_pixel={} spatial_scale={}",
            p.oh,
            p.ow,
            p.sampling_ratio,
            if p.max { "max" } else { "avg" },
            p.half_pixel,
            self.spatial_scale
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = &self.params;
        // Adaptive sampling reads at most the capped grid; a fixed one s² samples per bin.
        let samples = match p.sampling_ratio {
            0 => RoiAlignParams::max_grid(p.h, p.oh) * RoiAlignParams::max_grid(p.w, p.ow),
            s => s * s,
        };
        if (result.len() as usize).saturating_mul(samples) > limit {
            return None;
        }
        let mut y = vec![0f32; result.len() as usize];
        let status = onnxc_runtime::roi_align::roi_align_f32(
            p,
            self.spatial_scale,
            &f32s(x[0]),
            &f32s(x[1]),
            &x[2].to_i64s(),
            &mut y,
            Par::SEQ,
        );
        let t = f32_result(result, &y);
        Some(kernel_status(&kernels::ROI_ALIGN_F32, status, t))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::ROI_ALIGN_F32,
            vec![
                Arg::Params(self.params.encode()),
                Arg::Floats(vec![self.spatial_scale]),
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.operand_arg(2),
                cx.result_arg(),
                Arg::Threads,
            ],
        )?])
    }
}
