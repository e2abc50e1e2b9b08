//! MatMul and Gemm.

use crate::error::Result;
use crate::frontend::build::{self, bload, broadcast_shapes};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp};
use crate::ir::graph::MatMulOp;
use crate::ir::{DType, TypeInfo, ValueId};

const MATMUL_TYPES: &[DType] =
    &[DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U32, DType::U64];

/// numpy `matmul` semantics, with optional transposed reading of the last two dims.
pub fn matmul_values(ctx: &mut Ctx, a: ValueId, b: ValueId, trans_a: bool, trans_b: bool) -> Result<ValueId> {
    let dt = build::expect_types(ctx, a, "input A", MATMUL_TYPES)?;
    if ctx.dtype(b) != dt {
        return Err(ctx.err(format!("A is {dt} but B is {}", ctx.dtype(b))));
    }
    let (sa, sb) = (ctx.shape(a), ctx.shape(b));
    if sa.is_empty() || sb.is_empty() {
        return Err(ctx.err("MatMul operands must have rank >= 1"));
    }
    let a1 = sa.len() == 1;
    let b1 = sb.len() == 1;
    let a2 = if a1 { ctx.reshape(a, vec![Dim::Known(1), sa[0].clone()])? } else { a };
    let b2 = if b1 { ctx.reshape(b, vec![sb[0].clone(), Dim::Known(1)])? } else { b };
    let (sa, sb) = (ctx.shape(a2), ctx.shape(b2));
    let (ra, rb) = (sa.len(), sb.len());
    let (m, ka) = if trans_a { (sa[ra - 1].clone(), sa[ra - 2].clone()) } else { (sa[ra - 2].clone(), sa[ra - 1].clone()) };
    let (kb, n) = if trans_b { (sb[rb - 1].clone(), sb[rb - 2].clone()) } else { (sb[rb - 2].clone(), sb[rb - 1].clone()) };
    if let (Dim::Known(x), Dim::Known(y)) = (&ka, &kb)
        && x != y
    {
        return Err(ctx.err(format!(
            "inner dimensions differ: A is {} and B is {}",
            crate::ir::dim::fmt_shape(&sa),
            crate::ir::dim::fmt_shape(&sb)
        )));
    }
    let batch = broadcast_shapes(ctx, &[sa[..ra - 2].to_vec(), sb[..rb - 2].to_vec()])?;
    let mut shape: Shape = batch;
    shape.push(m);
    shape.push(n);
    let full_rank = shape.len();
    let y = ctx.matmul(MatMulOp { trans_a, trans_b }, a2, b2, TypeInfo::new(dt, shape.clone()))?;
    if a1 || b1 {
        let mut out = shape[..full_rank - 2].to_vec();
        if !a1 {
            out.push(shape[full_rank - 2].clone());
        }
        if !b1 {
            out.push(shape[full_rank - 1].clone());
        }
        return ctx.reshape(y, out);
    }
    Ok(y)
}

pub fn matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![matmul_values(ctx, a, b, false, false)?])
}

pub fn gemm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let c = ctx.opt_input(2);
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    let beta = ctx.attr_f_or("beta", 1.0)?;
    let trans_a = ctx.attr_i_or("transA", 0)? != 0;
    let trans_b = ctx.attr_i_or("transB", 0)? != 0;
    if ctx.rank(a) != 2 || ctx.rank(b) != 2 {
        return Err(ctx.err(format!("A and B must be 2-D, got ranks {} and {}", ctx.rank(a), ctx.rank(b))));
    }
    let y = matmul_values(ctx, a, b, trans_a, trans_b)?;
    let dt = ctx.dtype(y);
    let shape = ctx.shape(y);
    let c = match c {
        Some(c) if beta != 0.0 => Some(c),
        _ => None,
    };
    if alpha == 1.0 && c.is_none() {
        return Ok(vec![y]);
    }
    let k = |v: f64| expr::konst(dt, crate::ir::Scalar::F(v));
    let mut inputs = vec![y];
    let mut body = build::load_same(dt, 0, 2);
    if alpha != 1.0 {
        body = expr::binary(BinOp::Mul, body, k(alpha));
    }
    if let Some(c) = c {
        let sc = ctx.shape(c);
        if sc.len() > 2 || broadcast_shapes(ctx, &[sc.clone(), shape.clone()])? != shape {
            return Err(ctx.err(format!(
                "C of shape {} does not broadcast to the output {}",
                crate::ir::dim::fmt_shape(&sc),
                crate::ir::dim::fmt_shape(&shape)
            )));
        }
        inputs.push(c);
        let mut cl = bload(dt, 1, &sc, &shape);
        if beta != 1.0 {
            cl = expr::binary(BinOp::Mul, cl, k(beta));
        }
        body = expr::binary(BinOp::Add, body, cl);
    }
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}
