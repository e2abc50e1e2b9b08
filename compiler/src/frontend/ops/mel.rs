//! MelWeightMatrix (opset 17): the `[dft_length / 2 + 1, num_mel_bins]` matrix of
//! triangular filters that maps a spectrogram's bins to mel bins, as onnx's reference
//! computes it: `num_mel_bins + 2` edges evenly spaced in mel (the step divides the mel range
//! by `num_mel_bins + 2`), each edge's spectrogram bin `floor((dft_length + 1) · hz /
//! sample_rate)`, and filter `i` rising from edge `i` to edge `i + 1` and falling to edge
//! `i + 2` (a filter whose rising edges meet is 1 at their bin).
//!
//! One map computes every element from the five scalar inputs, in float64: constant inputs
//! (the usual case) fold into a constant table; run-time ones take the matrix's dims from
//! the output's declared shape, checked against the values at run time.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, ValueId};

const INTS: &[DType] = &[DType::I32, DType::I64];

pub fn mel_weight_matrix(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let code = ctx.attr_i_or("output_datatype", 1)?;
    let out_dt = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| build::FLOATS.contains(d) || (d.is_int() && d.bits() >= 8))
        .ok_or_else(|| {
            ctx.err(format!(
                "output_datatype {code} is not a float or an integer type of 8 bits or more"
            ))
        })?;
    let names = [
        "num_mel_bins",
        "dft_length",
        "sample_rate",
        "lower_edge_hertz",
        "upper_edge_hertz",
    ];
    let mut scalars = Vec::with_capacity(5);
    for (k, name) in names.iter().enumerate() {
        let v = ctx.input(k)?;
        let allowed = if k < 3 { INTS } else { build::FLOATS };
        build::expect_types(ctx, v, &format!("input {name}"), allowed)?;
        if ctx.known_shape(v)?.iter().product::<i64>() != 1 {
            return Err(ctx.err(format!(
                "input {name} has shape {:?}; it must be a scalar",
                ctx.shape(v)
            )));
        }
        scalars.push(ctx.reshape(v, vec![])?);
    }
    // The matrix's dims: from constants, or the declared ones checked at run time.
    let (mel, dft) = (scalars[0], scalars[1]);
    let (rows, cols) = match (ctx.konst(mel), ctx.konst(dft)) {
        (Some(m), Some(d)) => {
            let (m, d) = (m.get(0).as_i64(), d.get(0).as_i64());
            if !(1..=1 << 16).contains(&m) || !(1..=1 << 24).contains(&d) {
                return Err(ctx.err(format!(
                    "num_mel_bins is {m} and dft_length {d}; onnxc takes 1 to 2^16 mel bins of a 1 to 2^24-point DFT"
                )));
            }
            (d / 2 + 1, m)
        }
        _ => {
            let declared = ctx.declared_shape(0, "MelWeightMatrix's num_mel_bins or dft_length")?;
            let &[rows, cols] = declared.as_slice() else {
                return Err(ctx.err(format!(
                    "output 0 is declared {declared:?}; the matrix is 2-D"
                )));
            };
            // dft_length / 2 + 1 == rows and num_mel_bins == cols.
            let n = |k: u32, dt| expr::cast(expr::load(dt, k, vec![]), DType::I64);
            let (mdt, ddt) = (ctx.dtype(mel), ctx.dtype(dft));
            let half = expr::add(expr::idiv(n(1, ddt), 2), expr::i(1));
            let ok = expr::and(
                expr::binary(BinOp::Eq, half, expr::i(rows)),
                expr::binary(BinOp::Eq, n(0, mdt), expr::i(cols)),
            );
            ctx.assert_expr(
                vec![],
                vec![mel, dft],
                ok,
                onnxc_runtime::abi::ONNXC_ERR_SHAPE,
            )?;
            (rows, cols)
        }
    };

    let f64s = |ctx: &Ctx, k: u32| {
        expr::cast(
            expr::load(ctx.dtype(scalars[k as usize]), k, vec![]),
            DType::F64,
        )
    };
    let operand: Vec<E> = (0..5).map(|k| f64s(ctx, k)).collect();
    let (m, d, sr, lo, hi) = (
        &operand[0],
        &operand[1],
        &operand[2],
        &operand[3],
        &operand[4],
    );
    let c = |v: f64| expr::f(DType::F64, v);
    let ln10 = std::f64::consts::LN_10;
    let to_mel = |hz: &E| {
        let l = expr::unary(
            UnOp::Log,
            expr::add(c(1.0), expr::binary(BinOp::Div, hz.clone(), c(700.0))),
        );
        expr::binary(BinOp::Div, expr::mul(c(2595.0), l), c(ln10))
    };
    let (lo_mel, hi_mel) = (to_mel(lo), to_mel(hi));
    let step = expr::binary(
        BinOp::Div,
        expr::sub(hi_mel, lo_mel.clone()),
        expr::add(m.clone(), c(2.0)),
    );
    // Edge k's spectrogram bin.
    let edge = |k: E| -> E {
        let mel = expr::add(
            expr::mul(expr::cast(k, DType::F64), step.clone()),
            lo_mel.clone(),
        );
        let e = expr::unary(
            UnOp::Exp,
            expr::mul(expr::binary(BinOp::Div, mel, c(2595.0)), c(ln10)),
        );
        let hz = expr::mul(c(700.0), expr::sub(e, c(1.0)));
        let bin = expr::binary(
            BinOp::Div,
            expr::mul(expr::add(d.clone(), c(1.0)), hz),
            sr.clone(),
        );
        expr::unary(UnOp::Floor, bin)
    };
    let (j, i) = (expr::cast(expr::var(0), DType::F64), expr::var(1));
    let left = edge(i.clone());
    let center = edge(expr::add(i.clone(), expr::i(1)));
    let right = edge(expr::add(i, expr::i(2)));
    let zero = c(0.0);
    let rising = expr::select(
        expr::binary(BinOp::Eq, center.clone(), left.clone()),
        expr::select(
            expr::binary(BinOp::Eq, j.clone(), center.clone()),
            c(1.0),
            zero.clone(),
        ),
        expr::select(
            expr::and(
                expr::binary(BinOp::Le, left.clone(), j.clone()),
                expr::binary(BinOp::Le, j.clone(), center.clone()),
            ),
            expr::binary(
                BinOp::Div,
                expr::sub(j.clone(), left.clone()),
                expr::sub(center.clone(), left),
            ),
            zero,
        ),
    );
    let falling = expr::and(
        expr::and(
            expr::binary(BinOp::Lt, center.clone(), right.clone()),
            expr::binary(BinOp::Le, center.clone(), j.clone()),
        ),
        expr::binary(BinOp::Lt, j.clone(), right.clone()),
    );
    let v = expr::select(
        falling,
        expr::binary(
            BinOp::Div,
            expr::sub(right.clone(), j),
            expr::sub(right, center),
        ),
        rising,
    );
    let body = expr::share(&build::cast_expr(v, out_dt, false));
    let shape = vec![Dim::Known(rows), Dim::Known(cols)];
    Ok(vec![ctx.map(out_dt, shape, scalars, body)?])
}
