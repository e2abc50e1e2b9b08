//! RoiAlign (opsets 10, 16, 22): each region of interest of a feature map pooled to a fixed
//! grid of bins by averaging (or taking the largest of) bilinear samples, on one runtime
//! kernel (`kernels::RoiAlign`) in float32, the other float types cast around it.
//! Opset 10 maps region corners to pixels without the half-pixel shift; opset 16 added
//! `coordinate_transformation_mode`, whose default `half_pixel` subtracts it.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::shape_from;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use onnxc_runtime::roi_align::RoiAlignParams;

pub fn roi_align(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, rois, batch) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    if ctx.dtype(rois) != dt {
        return Err(ctx.err(format!("rois is {} but X is {dt}", ctx.dtype(rois))));
    }
    build::expect_types(ctx, batch, "batch_indices", &[DType::I64])?;
    let xs = ctx.known_shape(x)?;
    let (rs, bs) = (ctx.known_shape(rois)?, ctx.known_shape(batch)?);
    let &[n, c, h, w] = xs.as_slice() else {
        return Err(ctx.err(format!("X has shape {xs:?}; it must be (N, C, H, W)")));
    };
    let r = match rs.as_slice() {
        &[r, 4] => r,
        _ => {
            return Err(ctx.err(format!("rois has shape {rs:?}; it must be (num_rois, 4)")));
        }
    };
    if bs != [r] {
        return Err(ctx.err(format!(
            "batch_indices has shape {bs:?}; it must be [{r}], one per region"
        )));
    }
    if h < 1 || w < 1 {
        return Err(ctx.err(format!(
            "X has shape {xs:?}; RoiAlign samples a feature map of at least 1 × 1"
        )));
    }
    let mode = ctx.attr_s_or("mode", "avg")?;
    let max = match mode.as_str() {
        "avg" => false,
        "max" => true,
        m => return Err(ctx.err(format!("mode '{m}' is not 'avg' or 'max'"))),
    };
    let half_pixel = if ctx.opset >= 16 {
        match ctx
            .attr_s_or("coordinate_transformation_mode", "half_pixel")?
            .as_str()
        {
            "half_pixel" => true,
            "output_half_pixel" => false,
            m => {
                return Err(ctx.err(format!(
                    "coordinate_transformation_mode '{m}' is not 'half_pixel' or \
                     'output_half_pixel'"
                )));
            }
        }
    } else {
        false
    };
    let extent = |ctx: &Ctx, name: &str| -> Result<i64> {
        let v = ctx.attr_i_or(name, 1)?;
        let max = onnxc_runtime::params::MAX_EXTENT;
        if v < 1 {
            return Err(ctx.err(format!("{name} is {v}; it must be at least 1")));
        }
        if v > max {
            return Err(ctx.err(format!(
                "{name} is {v}; onnxc takes at most {max} (2^31 - 1)"
            )));
        }
        Ok(v)
    };
    let (oh, ow) = (extent(ctx, "output_height")?, extent(ctx, "output_width")?);
    let sampling_ratio = ctx.attr_i_or("sampling_ratio", 0)?;
    if sampling_ratio < 0 {
        return Err(ctx.err(format!(
            "sampling_ratio is {sampling_ratio}; it must be 0 (adaptive) or more"
        )));
    }
    if sampling_ratio > onnxc_runtime::params::MAX_EXTENT {
        return Err(ctx.err(format!(
            "sampling_ratio is {sampling_ratio}; onnxc takes at most {} (2^31 - 1)",
            onnxc_runtime::params::MAX_EXTENT
        )));
    }
    let spatial_scale = ctx.attr_f_or("spatial_scale", 1.0)? as f32;
    let u = |v: i64| v as usize;
    let params = RoiAlignParams {
        n: u(n),
        c: u(c),
        h: u(h),
        w: u(w),
        r: u(r),
        oh: u(oh),
        ow: u(ow),
        sampling_ratio: u(sampling_ratio),
        max,
        half_pixel,
    };
    let (x32, rois32) = (
        build::cast(ctx, x, DType::F32)?,
        build::cast(ctx, rois, DType::F32)?,
    );
    let y = ctx.add(
        Op::kernel(crate::kernels::RoiAlign {
            params,
            spatial_scale,
        }),
        vec![x32, rois32, batch],
        TypeInfo::new(DType::F32, shape_from(&[r, c, oh, ow])),
    )?;
    Ok(vec![build::cast(ctx, y, dt)?])
}
