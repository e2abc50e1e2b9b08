//! Recurrent layers: RNN, GRU and LSTM (every opset; `layout` from 14), and onnxruntime's
//! DynamicQuantizeLSTM (integer weights, `Weights::Quantized`). Float32 layers with the
//! default activations and no `sequence_lens` run the runtime's recurrence kernel
//! (`kernels::Recurrent`) at any length; the others are unrolled over the sequence, whose
//! length must then be known at compile time (`--shape` fixes a symbolic one).
//!
//! Per direction, the input projection of every step is one matrix product
//! (`X·Wᵀ`, `[seq·batch, gates·hidden]`, weights packed at compile time when constant); each
//! step then multiplies the previous hidden state by `Rᵀ` and applies the cell's gates as
//! maps over `[batch, hidden]`. Semantics follow onnxruntime where onnx's reference evaluator
//! is silent (it ignores `activations`, `clip`, `input_forget` and `sequence_lens`):
//! activations with their alpha/beta consumed in order by the functions that take them; `clip`
//! bounds every activation's input; with `sequence_lens`, a batch entry's steps past its
//! length output zeros and keep its state, and the reverse direction runs each entry from its
//! own last valid step.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::activation as act;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::MatMulOp;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use std::sync::Arc;

/// Most steps (sequence length × directions) unrolled: compile time grows linearly, ~3 ms
/// per step.
const MAX_STEPS: i64 = 4096;

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm { input_forget: bool },
}

impl Cell {
    fn gates(self) -> i64 {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru { .. } => &["Sigmoid", "Tanh"],
            Cell::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// An activation function of the recurrent ops, with its alpha and beta.
#[derive(Clone, Debug)]
struct Act {
    kind: String,
    alpha: f64,
    beta: f64,
}

impl Act {
    /// (takes alpha, takes beta, default alpha, default beta). The defaults are
    /// onnxruntime's: the ONNX ops' where they exist (LeakyRelu, HardSigmoid, Elu), 0 for
    /// Affine, ScaledTanh and (unlike the ThresholdedRelu op's 1.0) ThresholdedRelu.
    fn params(kind: &str) -> Option<(bool, bool, f64, f64)> {
        Some(match kind {
            "Relu" | "Tanh" | "Sigmoid" | "Softsign" | "Softplus" => (false, false, 0.0, 0.0),
            "Affine" => (true, true, 0.0, 0.0),
            "LeakyRelu" => (true, false, 0.01, 0.0),
            "ThresholdedRelu" => (true, false, 0.0, 0.0),
            "ScaledTanh" => (true, true, 0.0, 0.0),
            "HardSigmoid" => (true, true, 0.2, 0.5),
            "Elu" => (true, false, 1.0, 0.0),
            _ => return None,
        })
    }

    fn apply(&self, dt: DType, x: E) -> E {
        let c = |v: f64| expr::f(dt, v);
        let b = |op: BinOp, a: E, b: E| expr::binary(op, a, b);
        let (a, be) = (self.alpha, self.beta);
        match self.kind.as_str() {
            "Relu" => b(BinOp::Max, x, c(0.0)),
            "Tanh" => expr::unary(UnOp::Tanh, x),
            "Sigmoid" => expr::unary(UnOp::Sigmoid, x),
            "Softsign" => act::softsign_expr(dt, x),
            "Softplus" => act::softplus_expr(dt, x),
            "Affine" => act::affine_expr(dt, x, a, be),
            "LeakyRelu" => act::leaky_relu_expr(dt, x, a),
            "ThresholdedRelu" => act::thresholded_relu_expr(dt, x, a),
            "ScaledTanh" => act::scaled_tanh_expr(dt, x, a, be),
            "HardSigmoid" => act::hard_sigmoid_expr(dt, x, a, be),
            "Elu" => act::elu_expr(dt, x, a),
            other => unreachable!("activation {other} was validated"),
        }
    }
}

pub fn rnn(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    recurrent(ctx, Cell::Rnn, Weights::Float)
}

pub fn gru(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let linear_before_reset = ctx.attr_i_or("linear_before_reset", 0)? != 0;
    recurrent(
        ctx,
        Cell::Gru {
            linear_before_reset,
        },
        Weights::Float,
    )
}

pub fn lstm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let input_forget = ctx.attr_i_or("input_forget", 0)? != 0;
    recurrent(ctx, Cell::Lstm { input_forget }, Weights::Float)
}

/// com.microsoft DynamicQuantizeLSTM (X, W, R, B?, sequence_lens?, initial_h?, initial_c?,
/// P?, W_scale, W_zero_point, R_scale, R_zero_point): an LSTM whose weights are int8 or
/// uint8, transposed (`W` is `[dirs, input, 4·hidden]`, `R` `[dirs, hidden, 4·hidden]`),
/// with a scale and zero point per direction or per direction and column. As onnxruntime
/// computes it, each product quantizes its float operand to uint8 as DynamicQuantizeLinear
/// does (the whole input sequence at once, the hidden state at every step), multiplies
/// exactly in integers and scales the sums back to float32.
pub fn dynamic_quantize_lstm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let input_forget = ctx.attr_i_or("input_forget", 0)? != 0;
    let weights = Weights::Quantized {
        w_scale: ctx.input(8)?,
        w_zero_point: ctx.input(9)?,
        r_scale: ctx.input(10)?,
        r_zero_point: ctx.input(11)?,
    };
    recurrent(ctx, Cell::Lstm { input_forget }, weights)
}

/// How a recurrent layer's weights multiply its input and hidden state.
#[derive(Clone, Copy)]
enum Weights {
    /// `W` `[dirs, gates·hidden, input]` and `R` `[dirs, gates·hidden, hidden]` in X's type.
    Float,
    /// Integer `W` `[dirs, input, gates·hidden]` and `R` `[dirs, hidden, gates·hidden]`, each
    /// with a float32 scale and a zero point of `[dirs]` or `[dirs, gates·hidden]`; the float
    /// operand of each product is quantized dynamically (`quantized_product`).
    Quantized {
        w_scale: ValueId,
        w_zero_point: ValueId,
        r_scale: ValueId,
        r_zero_point: ValueId,
    },
}

/// `A · B` for a float32 `A` `[rows, k]` and an integer `B` `[k, n]` with `scale` and
/// `zero_point` of one element or `n`: A quantized to uint8 over all its elements, the
/// product summed exactly, then scaled by A's scale times B's (onnxruntime's quantized
/// recurrent GEMM).
fn quantized_product(
    ctx: &mut Ctx,
    a: ValueId,
    b: ValueId,
    scale: ValueId,
    zero_point: ValueId,
) -> Result<ValueId> {
    let [aq, sa, za] = crate::frontend::ops::quant::dynamic_quantize(ctx, a)?;
    crate::frontend::ops::contrib_quant::integer_to_float(
        ctx,
        aq,
        sa,
        Some(za),
        b,
        scale,
        Some(zero_point),
        None,
    )
}

/// Direction `d`'s part of DynamicQuantizeLSTM's constant integer `R` (`[dirs, hidden,
/// gates·hidden]`, int8 or uint8) with its scale and zero point (`[dirs]` or `[dirs,
/// gates·hidden]`), as the integer product the recurrence multiplies each step's quantized
/// `h` by (`RecurrentParams::r_int8`): depth `hidden` into `gates·hidden` int32 sums, R's
/// scale per column. None where they are no constants of those types and shapes, or where
/// R's float values stay small enough to be read from cache every step
/// (`INTEGER_R_FLOAT_BYTES`).
fn integer_r(
    ctx: &Ctx,
    r: ValueId,
    scale: ValueId,
    zero_point: ValueId,
    d: i64,
    [hidden, gh]: [i64; 2],
) -> Option<Arc<Vec<i64>>> {
    use onnxc_runtime::qconv::matmul::QMatMulParams;
    use onnxc_runtime::qconv::{QOut, QScalars};
    let (r, scale, zp) = (ctx.konst(r)?, ctx.konst(scale)?, ctx.konst(zero_point)?);
    let (d, hidden, gh) = (d as usize, hidden as usize, gh as usize);
    if hidden * gh * 4 <= INTEGER_R_FLOAT_BYTES {
        return None;
    }
    let dirs = r.shape.first().copied()? as usize;
    if r.shape != [dirs as i64, hidden as i64, gh as i64] || zp.dtype != r.dtype {
        return None;
    }
    // One value per direction, or one per direction and column.
    let column = |t: &crate::ir::Tensor, v: Vec<f64>| -> Option<Vec<f64>> {
        if t.shape == [dirs as i64] {
            Some(vec![v[d]; gh])
        } else if t.shape == [dirs as i64, gh as i64] {
            Some(v[d * gh..][..gh].to_vec())
        } else {
            None
        }
    };
    let scale: Vec<f32> = column(&scale, scale.to_f64s())?
        .iter()
        .map(|&v| v as f32)
        .collect();
    let zps = column(&zp, zp.to_f64s())?;
    // uint8 weights shifted by −128 with their zero points (the centered values stay).
    let shift = match r.dtype {
        DType::I8 => 0,
        DType::U8 => 128,
        _ => return None,
    };
    let all = r.to_i64s();
    let w: Vec<i8> = all[d * hidden * gh..][..hidden * gh]
        .iter()
        .map(|&v| (v - shift) as i8)
        .collect();
    let w_zp: Vec<i32> = zps.iter().map(|&z| z as i32 - shift as i32).collect();
    if scale.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let q = QScalars {
        out: QOut::I32,
        x_signed: false,
        x_zp: 0,
        y_zp: 0,
        lo: 0,
        hi: 0,
    };
    let zeros = vec![0f32; gh];
    Some(Arc::new(QMatMulParams::encode(
        q, hidden, gh, &w, &w_zp, None, &scale, &zeros,
    )))
}

/// The float32 bytes of one direction's `R` above which the recurrence multiplies by its
/// integers (`integer_r`). Each step reads all of `R`; as integers it takes a quarter of the
/// room. Below, the float product's matrix-vector kernel is faster than the integer one
/// (which computes a block of 8 rows for the batch's 1-4; one thread, AVX-512 Xeon:
/// bidirectional hidden 32 over 100 steps 0.110 ms float against 0.168 integer, hidden 256
/// at batch 4 2.78 against 2.94); above, the float `R` no longer stays in a core's cache
/// (hidden 512, 4 MB a direction: 5.25 ms float against 1.81 integer over 16 steps).
const INTEGER_R_FLOAT_BYTES: usize = 2 << 20;

/// How the recurrence kernel takes a direction's `R`.
enum KernelR {
    /// Float `[gates·hidden, hidden]`.
    Float(ValueId),
    /// The integer product of `integer_r`.
    Int8(Arc<Vec<i64>>),
}

/// The float values `(R − zero point) · scale` of integer recurrent weights `r` `[hidden,
/// gates·hidden]` (one direction's), transposed to `[gates·hidden, hidden]` as the float
/// recurrence takes them; `scale` and `zero_point` hold one element or one per column
/// (`per_direction`).
fn dequantized_transpose(
    ctx: &mut Ctx,
    r: ValueId,
    scale: ValueId,
    zero_point: ValueId,
) -> Result<ValueId> {
    let [hidden, gh] = ctx.known_shape(r)?[..] else {
        return Err(ctx.err("quantized R is not 2-D per direction"));
    };
    // Operand `k`'s element for output row (column of R) `var(0)`.
    let column = |ctx: &Ctx, v: ValueId, k: u32| -> Result<E> {
        let at = if ctx.known_shape(v)? == [1] {
            expr::i(0)
        } else {
            expr::var(0)
        };
        Ok(expr::cast(
            expr::load(ctx.dtype(v), k, vec![at]),
            DType::F32,
        ))
    };
    // Operands: 0 R, 1 scale, 2 zero point.
    let (s, z) = (column(ctx, scale, 1)?, column(ctx, zero_point, 2)?);
    let w = expr::cast(
        expr::load(ctx.dtype(r), 0, vec![expr::var(1), expr::var(0)]),
        DType::F32,
    );
    let body = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, w, z), s);
    let shape = vec![Dim::Known(gh), Dim::Known(hidden)];
    ctx.map(DType::F32, shape, vec![r, scale, zero_point], body)
}

/// Direction `d`'s part of a quantized weight's scale or zero point: `[dirs]` gives one
/// element (`[1]`), `[dirs, n]` a vector of `n`.
fn per_direction(
    ctx: &mut Ctx,
    v: ValueId,
    d: i64,
    dirs: i64,
    n: i64,
    what: &str,
) -> Result<ValueId> {
    let dt = ctx.dtype(v);
    let shape = ctx.known_shape(v)?;
    let (out, index) = if shape == [dirs] {
        (1, vec![expr::i(d)])
    } else if shape == [dirs, n] {
        (n, vec![expr::i(d), expr::var(0)])
    } else {
        return Err(ctx.err(format!(
            "{what} has shape {shape:?}; expected [{dirs}] (per direction) or [{dirs}, {n}] (per column)"
        )));
    };
    ctx.map(dt, vec![Dim::Known(out)], vec![v], expr::load(dt, 0, index))
}

/// The activations per direction, with alpha/beta consumed in order by the functions that
/// take them.
fn activations(ctx: &Ctx, cell: Cell, dirs: usize) -> Result<Vec<Vec<Act>>> {
    let n = cell.default_activations().len();
    let names: Vec<String> = match ctx.attr_strings("activations") {
        Some(v) if !v.is_empty() => v,
        _ => (0..dirs)
            .flat_map(|_| cell.default_activations().iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != n * dirs {
        return Err(ctx.err(format!(
            "activations lists {} functions; this op needs {} per direction ({} in all)",
            names.len(),
            n,
            n * dirs
        )));
    }
    let alphas = ctx.attr_floats("activation_alpha").unwrap_or_default();
    let betas = ctx.attr_floats("activation_beta").unwrap_or_default();
    let (mut ai, mut bi) = (0, 0);
    let mut acts = Vec::new();
    for name in &names {
        let Some((ta, tb, da, db)) = Act::params(name) else {
            return Err(ctx.err(format!(
                "unknown activation '{name}' (expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)"
            )));
        };
        let mut act = Act {
            kind: name.clone(),
            alpha: da,
            beta: db,
        };
        if ta {
            if let Some(&a) = alphas.get(ai) {
                act.alpha = a as f64;
            }
            ai += 1;
        }
        if tb {
            if let Some(&b) = betas.get(bi) {
                act.beta = b as f64;
            }
            bi += 1;
        }
        acts.push(act);
    }
    Ok(acts.chunks(n).map(|c| c.to_vec()).collect())
}

fn recurrent(ctx: &mut Ctx, cell: Cell, weights: Weights) -> Result<Vec<ValueId>> {
    use BinOp::*;
    let (x, w, r) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let quantized = matches!(weights, Weights::Quantized { .. });
    let dt = if quantized {
        build::expect_types(ctx, x, "X", &[DType::F32])?
    } else {
        build::expect_types(ctx, x, "X", FLOATS)?
    };
    for (v, what) in [(w, "W"), (r, "R")] {
        if quantized {
            build::expect_types(ctx, v, what, &[DType::I8, DType::U8])?;
        } else if ctx.dtype(v) != dt {
            return Err(ctx.err(format!("{what} is {} but X is {dt}", ctx.dtype(v))));
        }
    }
    let optional = |k: usize| ctx.opt_input(k);
    let (b_in, lens_in, h0_in) = (optional(3), optional(4), optional(5));
    let (c0_in, p_in) = match cell {
        Cell::Lstm { .. } => (optional(6), optional(7)),
        _ => (None, None),
    };
    let layout = if ctx.opset >= 14 {
        ctx.attr_i_or("layout", 0)?
    } else {
        0
    };
    if layout != 0 && layout != 1 {
        return Err(ctx.err(format!("layout must be 0 or 1, got {layout}")));
    }
    let xd = ctx.known_shape(x)?;
    if xd.len() != 3 {
        return Err(ctx.err(format!("X must be 3-D, got shape {xd:?}")));
    }
    let (seq, batch, input) = if layout == 0 {
        (xd[0], xd[1], xd[2])
    } else {
        (xd[1], xd[0], xd[2])
    };
    if seq < 1 || batch < 1 {
        return Err(ctx.unsupported(format!("an empty sequence or batch (X has shape {xd:?})")));
    }
    let direction = ctx.attr_s_or("direction", "forward")?;
    let reverse_only = match direction.as_str() {
        "forward" => false,
        "reverse" => true,
        "bidirectional" => false,
        other => {
            return Err(ctx.err(format!(
                "unknown direction '{other}' (expected forward, reverse or bidirectional)"
            )));
        }
    };
    let dirs: i64 = if direction == "bidirectional" { 2 } else { 1 };
    let g = cell.gates();
    let rd = ctx.known_shape(r)?;
    // Quantized weights are stored transposed: [dirs, hidden, gates·hidden].
    let (rows, cols) = if quantized { (2, 1) } else { (1, 2) };
    if rd.len() != 3 || rd[0] != dirs || rd[cols] < 1 || rd[rows] != g * rd[cols] {
        let want = if quantized {
            format!("[{dirs}, hidden, {g}·hidden]")
        } else {
            format!("[{dirs}, {g}·hidden, hidden]")
        };
        return Err(ctx.err(format!("R has shape {rd:?}; expected {want}")));
    }
    let hidden = rd[cols];
    if let Some(hs) = ctx.attr_i("hidden_size")?
        && hs != hidden
    {
        return Err(ctx.err(format!("hidden_size is {hs} but R is {rd:?}")));
    }
    let gh = g * hidden;
    let wd = ctx.known_shape(w)?;
    let want_w = if quantized {
        [dirs, input, gh]
    } else {
        [dirs, gh, input]
    };
    if wd != want_w {
        return Err(ctx.err(format!("W has shape {wd:?}; expected {want_w:?}")));
    }
    let check_shape = |ctx: &Ctx, v: Option<ValueId>, what: &str, want: &[i64]| -> Result<()> {
        if let Some(v) = v {
            let s = ctx.known_shape(v)?;
            if s != want {
                return Err(ctx.err(format!("{what} has shape {s:?}; expected {want:?}")));
            }
            if ctx.dtype(v) != dt && what != "sequence_lens" {
                return Err(ctx.err(format!("{what} is {} but X is {dt}", ctx.dtype(v))));
            }
        }
        Ok(())
    };
    check_shape(ctx, b_in, "B", &[dirs, 2 * gh])?;
    check_shape(ctx, p_in, "P", &[dirs, 3 * hidden])?;
    let state_shape = if layout == 0 {
        [dirs, batch, hidden]
    } else {
        [batch, dirs, hidden]
    };
    check_shape(ctx, h0_in, "initial_h", &state_shape)?;
    check_shape(ctx, c0_in, "initial_c", &state_shape)?;
    check_shape(ctx, lens_in, "sequence_lens", &[batch])?;
    if let Some(l) = lens_in {
        build::expect_types(ctx, l, "sequence_lens", &[DType::I32, DType::I64])?;
    }
    // A constant sequence_lens of full lengths changes nothing.
    let lens_in = lens_in.filter(|&l| match ctx.konst(l) {
        Some(t) => t.to_i64s().iter().any(|&v| v != seq),
        None => true,
    });
    if quantized && lens_in.is_some() {
        return Err(ctx.unsupported(
            "sequence_lens with quantized weights: onnxruntime quantizes the input over the \
             steps up to the longest sequence only, which depends on the lengths; pad the \
             sequences and drop sequence_lens, or dequantize the weights into an LSTM",
        ));
    }
    let acts = activations(ctx, cell, dirs as usize)?;
    // The runtime's recurrence kernel takes float32 layers with the default activations and
    // no sequence_lens, at any length (one compiled call serves a length taken at run
    // time), quantized weights as their float values with the state quantized at every
    // step (`RecurrentParams::quantize_h`); the others are unrolled.
    let by_kernel = dt == DType::F32
        && lens_in.is_none()
        && acts.iter().all(|a| {
            a.iter()
                .map(|a| a.kind.as_str())
                .eq(cell.default_activations().iter().copied())
        });
    if !by_kernel && seq.saturating_mul(dirs) > MAX_STEPS {
        return Err(ctx.unsupported(format!(
            "a sequence of {seq} steps ({dirs} direction(s)): onnxc unrolls recurrent layers \
             with sequence_lens, activations of their own or quantized weights, and unrolls \
             at most {MAX_STEPS} steps"
        )));
    }
    let clip = ctx.attr_f("clip")?;
    if let Some(c) = clip
        && !(c >= 0.0)
    {
        return Err(ctx.err(format!("clip must be a non-negative threshold, got {c}")));
    }
    let clipped = |e: E| match clip {
        Some(c) => expr::binary(Max, expr::binary(Min, e, expr::f(dt, c)), expr::f(dt, -c)),
        None => e,
    };

    // States in [dirs, batch, hidden] order.
    let to_dbh = |ctx: &mut Ctx, v: Option<ValueId>| -> Result<Option<ValueId>> {
        match v {
            Some(v) if layout == 1 => Ok(Some(build::transpose(ctx, v, &[1, 0, 2])?)),
            other => Ok(other),
        }
    };
    let h0 = to_dbh(ctx, h0_in)?;
    let c0 = to_dbh(ctx, c0_in)?;
    let x0 = if layout == 1 {
        build::transpose(ctx, x, &[1, 0, 2])?
    } else {
        x
    };
    let x2 = ctx.reshape(x0, vec![Dim::Known(seq * batch), Dim::Known(input)])?;
    let known = |d: &[i64]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    // Row block `d` of a [dirs, rows, cols] tensor, as [rows, cols] (from `row0`, `rows` long).
    let slice = |ctx: &mut Ctx, v: ValueId, d: i64, row0: i64, rows: i64, cols: i64| {
        let dt = ctx.dtype(v);
        let body = expr::load(
            dt,
            0,
            vec![
                expr::i(d),
                expr::add(expr::var(0), expr::i(row0)),
                expr::var(1),
            ],
        );
        ctx.map(dt, known(&[rows, cols]), vec![v], body)
    };
    // A fill map: folded into a constant where small enough (`passes::fold`).
    let zeros = |ctx: &mut Ctx| ctx.map(dt, known(&[batch, hidden]), vec![], expr::f(dt, 0.0));
    let lens_dt = lens_in.map(|l| ctx.dtype(l));
    // An entry's sequence length (operand `k`, clamped into [0, seq]).
    let length = |k: u32, b: E| {
        lens_dt.map(|ldt| expr::clamp(expr::cast(expr::load(ldt, k, vec![b]), DType::I64), 0, seq))
    };

    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    let mut by_kernel_dirs = Vec::new();
    for d in 0..dirs {
        let reverse = reverse_only || d == 1;
        let act = &acts[d as usize];
        // The products with W and R: X·Wᵀ (every step at once) and H·Rᵀ.
        let (xw, r_d, r_q) = match weights {
            Weights::Float => {
                let w_d = slice(ctx, w, d, 0, gh, input)?;
                let xw = ctx.matmul(
                    MatMulOp {
                        trans_a: false,
                        trans_b: true,
                    },
                    x2,
                    w_d,
                    TypeInfo::new(dt, known(&[seq * batch, gh])),
                )?;
                (xw, slice(ctx, r, d, 0, gh, hidden)?, None)
            }
            Weights::Quantized {
                w_scale,
                w_zero_point,
                r_scale,
                r_zero_point,
            } => {
                let w_d = slice(ctx, w, d, 0, input, gh)?;
                let ws = per_direction(ctx, w_scale, d, dirs, gh, "W_scale")?;
                let wz = per_direction(ctx, w_zero_point, d, dirs, gh, "W_zero_point")?;
                let xw = quantized_product(ctx, x2, w_d, ws, wz)?;
                let r_d = slice(ctx, r, d, 0, hidden, gh)?;
                let rs = per_direction(ctx, r_scale, d, dirs, gh, "R_scale")?;
                let rz = per_direction(ctx, r_zero_point, d, dirs, gh, "R_zero_point")?;
                (xw, r_d, Some((rs, rz)))
            }
        };
        if by_kernel {
            // The kernel multiplies h (quantized at each step) by R's integers where they
            // are constants (`integer_r`), else by their float values `(R − zero point) ·
            // scale`, as [gates·hidden, hidden].
            let r_d = match (r_q, weights) {
                (
                    Some((rs, rz)),
                    Weights::Quantized {
                        r_scale,
                        r_zero_point,
                        ..
                    },
                ) => match integer_r(ctx, r, r_scale, r_zero_point, d, [hidden, gh]) {
                    Some(blob) => KernelR::Int8(blob),
                    None => KernelR::Float(dequantized_transpose(ctx, r_d, rs, rz)?),
                },
                _ => KernelR::Float(r_d),
            };
            // One call for the layer: both directions of a bidirectional one at once.
            by_kernel_dirs.push((d, reverse, xw, r_d));
            if by_kernel_dirs.len() as i64 == dirs {
                for (y_d, h_d, c_d) in by_recurrence_kernel(
                    ctx,
                    cell,
                    [seq, batch, hidden],
                    (clip, quantized),
                    &by_kernel_dirs,
                    [b_in, h0, c0, p_in],
                )? {
                    ys.push(ctx.reshape(y_d, known(&[seq, 1, batch, hidden]))?);
                    hs.push(ctx.reshape(h_d, known(&[1, batch, hidden]))?);
                    if let Some(c) = c_d {
                        cs.push(ctx.reshape(c, known(&[1, batch, hidden]))?);
                    }
                }
            }
            continue;
        }
        let r_h = match cell {
            Cell::Gru {
                linear_before_reset: false,
            } => Some(slice(ctx, r, d, 2 * hidden, hidden, hidden)?),
            _ => None,
        };
        let mut h = match h0 {
            Some(v) => slice(ctx, v, d, 0, batch, hidden)?,
            None => zeros(ctx)?,
        };
        let mut c = match (cell, c0) {
            (Cell::Lstm { .. }, Some(v)) => Some(slice(ctx, v, d, 0, batch, hidden)?),
            (Cell::Lstm { .. }, None) => Some(zeros(ctx)?),
            _ => None,
        };
        let mut steps = Vec::new();
        for s in 0..seq {
            // Operands of the step maps: 0 xw, 1 hr, 2 h_prev, 3 B, 4 lens, 5 c_prev, 6 P,
            // 7 extra (GRU's r·H·Rhᵀ, LSTM's new C). Absent ones are never loaded.
            let hr = match r_q {
                None => ctx.matmul(
                    MatMulOp {
                        trans_a: false,
                        trans_b: true,
                    },
                    h,
                    r_d,
                    TypeInfo::new(dt, known(&[batch, gh])),
                )?,
                Some((rs, rz)) => quantized_product(ctx, h, r_d, rs, rz)?,
            };
            let (b, k) = (expr::var(0), expr::var(1));
            let len = length(4, b.clone());
            // The input row this step reads: forward step s reads time s; reverse reads
            // len−1−s (seq−1−s without sequence_lens).
            let t = if reverse {
                let last = len.clone().unwrap_or(expr::i(seq));
                expr::clamp(
                    expr::sub(expr::sub(last, expr::i(1)), expr::i(s)),
                    0,
                    seq - 1,
                )
            } else {
                expr::i(s)
            };
            let valid = len.clone().map(|l| expr::lt(expr::i(s), l));
            let row = expr::add(expr::mul(t, expr::i(batch)), b.clone());
            let gx = |gate: i64| {
                expr::load(
                    dt,
                    0,
                    vec![row.clone(), expr::add(k.clone(), expr::i(gate * hidden))],
                )
            };
            let hrg = |gate: i64| {
                expr::load(
                    dt,
                    1,
                    vec![b.clone(), expr::add(k.clone(), expr::i(gate * hidden))],
                )
            };
            let bias = |j: i64| -> E {
                match b_in {
                    Some(_) => expr::load(
                        dt,
                        3,
                        vec![expr::i(d), expr::add(k.clone(), expr::i(j * hidden))],
                    ),
                    None => expr::f(dt, 0.0),
                }
            };
            let add = |a: E, b: E| expr::binary(Add, a, b);
            let mul = |a: E, b: E| expr::binary(Mul, a, b);
            let h_prev = expr::load(dt, 2, vec![b.clone(), k.clone()]);
            let keep = |new: E, old: E| match &valid {
                Some(v) => expr::select(v.clone(), new, old),
                None => new,
            };
            let mut inputs = vec![xw, hr, h];
            inputs.push(b_in.unwrap_or(xw));
            inputs.push(lens_in.unwrap_or(xw));
            let shape = known(&[batch, hidden]);
            let new_h = match cell {
                Cell::Rnn => {
                    let pre = add(add(gx(0), hrg(0)), add(bias(0), bias(1)));
                    let body = keep(act[0].apply(dt, clipped(pre)), h_prev.clone());
                    ctx.map(dt, shape.clone(), inputs.clone(), body)?
                }
                Cell::Gru {
                    linear_before_reset,
                } => {
                    // gates z, r, h; B = [Wb z r h, Rb z r h]
                    let z =
                        act[0].apply(dt, clipped(add(add(gx(0), hrg(0)), add(bias(0), bias(3)))));
                    let rg =
                        act[0].apply(dt, clipped(add(add(gx(1), hrg(1)), add(bias(1), bias(4)))));
                    let hh_pre = if linear_before_reset {
                        add(add(gx(2), bias(2)), mul(rg, add(hrg(2), bias(5))))
                    } else {
                        // (r ⊙ H_prev)·Rhᵀ, a product of its own.
                        let rh =
                            ctx.map(dt, shape.clone(), inputs.clone(), mul(rg, h_prev.clone()))?;
                        let rhr = ctx.matmul(
                            MatMulOp {
                                trans_a: false,
                                trans_b: true,
                            },
                            rh,
                            r_h.expect("GRU Rh"),
                            TypeInfo::new(dt, shape.clone()),
                        )?;
                        inputs.push(xw); // 5: unused
                        inputs.push(xw); // 6: unused
                        inputs.push(rhr); // 7
                        add(
                            add(gx(2), expr::load(dt, 7, vec![b.clone(), k.clone()])),
                            add(bias(2), bias(5)),
                        )
                    };
                    let hh = act[1].apply(dt, clipped(hh_pre));
                    let one = expr::f(dt, 1.0);
                    let body = add(
                        mul(expr::binary(Sub, one, z.clone()), hh),
                        mul(z, h_prev.clone()),
                    );
                    ctx.map(
                        dt,
                        shape.clone(),
                        inputs.clone(),
                        keep(body, h_prev.clone()),
                    )?
                }
                Cell::Lstm { input_forget } => {
                    // gates i, o, f, c; B = [Wb i o f c, Rb i o f c]; P = [i o f]
                    inputs.push(c.expect("LSTM state"));
                    inputs.push(p_in.unwrap_or(xw));
                    let c_prev = expr::load(dt, 5, vec![b.clone(), k.clone()]);
                    let peep = |j: i64, cv: E| match p_in {
                        Some(_) => mul(
                            expr::load(
                                dt,
                                6,
                                vec![expr::i(d), expr::add(k.clone(), expr::i(j * hidden))],
                            ),
                            cv,
                        ),
                        None => expr::f(dt, 0.0),
                    };
                    let pre =
                        |gate: i64| add(add(gx(gate), hrg(gate)), add(bias(gate), bias(gate + 4)));
                    let i = act[0].apply(dt, clipped(add(pre(0), peep(0, c_prev.clone()))));
                    let f = if input_forget {
                        expr::binary(Sub, expr::f(dt, 1.0), i.clone())
                    } else {
                        act[0].apply(dt, clipped(add(pre(2), peep(2, c_prev.clone()))))
                    };
                    let cc = act[1].apply(dt, clipped(pre(3)));
                    let c_new = add(mul(f, c_prev.clone()), mul(i, cc));
                    let c_val = ctx.map(dt, shape.clone(), inputs.clone(), keep(c_new, c_prev))?;
                    inputs.push(c_val);
                    let c_now = expr::load(dt, 7, vec![b.clone(), k.clone()]);
                    let o = act[0].apply(dt, clipped(add(pre(1), peep(1, c_now.clone()))));
                    // onnxruntime does not clip h's input (the cell state).
                    let h_new = mul(o, act[2].apply(dt, c_now));
                    let h_val = ctx.map(
                        dt,
                        shape.clone(),
                        inputs.clone(),
                        keep(h_new, h_prev.clone()),
                    )?;
                    c = Some(c_val);
                    h_val
                }
            };
            // The step's output: zeros past the entry's length.
            let y = match (length(1, b.clone()), lens_in) {
                (Some(l), Some(lv)) => {
                    let body = expr::select(
                        expr::lt(expr::i(s), l),
                        expr::load(dt, 0, vec![b.clone(), k.clone()]),
                        expr::f(dt, 0.0),
                    );
                    ctx.map(dt, shape.clone(), vec![new_h, lv], body)?
                }
                _ => new_h,
            };
            h = new_h;
            steps.push(ctx.reshape(y, known(&[1, batch, hidden]))?);
        }
        let stacked = if steps.len() == 1 {
            steps[0]
        } else {
            ctx.add(
                Op::Concat { axis: 0 },
                steps,
                TypeInfo::new(dt, known(&[seq, batch, hidden])),
            )?
        };
        // Step s of a reverse direction belongs at time len−1−s.
        let y_d = if reverse {
            let (t, b, k) = (expr::var(0), expr::var(1), expr::var(2));
            let len = length(1, b.clone()).unwrap_or(expr::i(seq));
            let src = expr::clamp(
                expr::sub(expr::sub(len.clone(), expr::i(1)), t.clone()),
                0,
                seq - 1,
            );
            let body = expr::select(
                expr::lt(t, len),
                expr::load(dt, 0, vec![src, b, k]),
                expr::f(dt, 0.0),
            );
            let mut ins = vec![stacked];
            ins.extend(lens_in);
            ctx.map(dt, known(&[seq, batch, hidden]), ins, body)?
        } else {
            stacked
        };
        ys.push(ctx.reshape(y_d, known(&[seq, 1, batch, hidden]))?);
        // onnxruntime gives an entry of length 0 zero final states, not the initial ones.
        let zero_empty = |ctx: &mut Ctx, v: ValueId| -> Result<ValueId> {
            match (length(1, expr::var(0)), lens_in) {
                (Some(l), Some(lv)) => {
                    let body = expr::select(
                        expr::binary(Eq, l, expr::i(0)),
                        expr::f(dt, 0.0),
                        expr::load(dt, 0, vec![expr::var(0), expr::var(1)]),
                    );
                    ctx.map(dt, known(&[batch, hidden]), vec![v, lv], body)
                }
                _ => Ok(v),
            }
        };
        let h = zero_empty(ctx, h)?;
        hs.push(ctx.reshape(h, known(&[1, batch, hidden]))?);
        if let Some(c) = c {
            let c = zero_empty(ctx, c)?;
            cs.push(ctx.reshape(c, known(&[1, batch, hidden]))?);
        }
    }
    let cat = |ctx: &mut Ctx, parts: Vec<ValueId>, axis: usize, shape: &[i64]| -> Result<ValueId> {
        if parts.len() == 1 {
            return Ok(parts[0]);
        }
        ctx.add(Op::Concat { axis }, parts, TypeInfo::new(dt, known(shape)))
    };
    let mut y = cat(ctx, ys, 1, &[seq, dirs, batch, hidden])?;
    let mut yh = cat(ctx, hs, 0, &[dirs, batch, hidden])?;
    let mut yc = if cs.is_empty() {
        None
    } else {
        Some(cat(ctx, cs, 0, &[dirs, batch, hidden])?)
    };
    if layout == 1 {
        y = build::transpose(ctx, y, &[2, 0, 1, 3])?;
        yh = build::transpose(ctx, yh, &[1, 0, 2])?;
        yc = match yc {
            Some(v) => Some(build::transpose(ctx, v, &[1, 0, 2])?),
            None => None,
        };
    }
    let mut outs = vec![y, yh];
    outs.extend(yc);
    Ok(outs)
}

/// The directions `dirs` (each `(d, reverse, xw, r_d)`) of a float32 layer through the
/// runtime's recurrence (`kernels::Recurrent`), one call for all of them (a pair when the
/// layer is bidirectional): `xw` `[seq·batch, gates·hidden]` (X·Wᵀ) and `r_d` the
/// direction's R (`KernelR`; every direction's alike), with the layer's whole bias,
/// initial states (in `[dirs,
/// batch, hidden]` order) and peepholes where given. Returns per direction its outputs
/// `[seq, batch, hidden]` at their times, its last h and (LSTM) its last c, `[batch,
/// hidden]`.
#[allow(
    clippy::type_complexity,
    reason = "per direction: outputs, last h, last c"
)]
fn by_recurrence_kernel(
    ctx: &mut Ctx,
    cell: Cell,
    [seq, batch, hidden]: [i64; 3],
    (clip, quantize_h): (Option<f64>, bool),
    dirs: &[(i64, bool, ValueId, KernelR)],
    [b_in, h0, c0, p_in]: [Option<ValueId>; 4],
) -> Result<Vec<(ValueId, ValueId, Option<ValueId>)>> {
    use onnxc_runtime::recurrent::{self as rt, RecurrentParams};
    let dt = DType::F32;
    let known = |d: &[i64]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    let gh = cell.gates() * hidden;
    let lstm = matches!(cell, Cell::Lstm { .. });
    let mut operands = Vec::new();
    let mut present = [false; 4];
    let mut integer_r = Vec::new();
    for &(d, _, xw, ref r_d) in dirs {
        // Direction d's row of a [dirs, n] tensor, or block of a [dirs, batch, hidden] one.
        let row = |ctx: &mut Ctx, v: ValueId, n: i64| {
            ctx.map(
                dt,
                known(&[n]),
                vec![v],
                expr::load(dt, 0, vec![expr::i(d), expr::var(0)]),
            )
        };
        let block = |ctx: &mut Ctx, v: ValueId| {
            let body = expr::load(dt, 0, vec![expr::i(d), expr::var(0), expr::var(1)]);
            ctx.map(dt, known(&[batch, hidden]), vec![v], body)
        };
        let bias = b_in.map(|b| row(ctx, b, 2 * gh)).transpose()?;
        let h = h0.map(|v| block(ctx, v)).transpose()?;
        let c = c0.filter(|_| lstm).map(|v| block(ctx, v)).transpose()?;
        let p = p_in
            .filter(|_| lstm)
            .map(|v| row(ctx, v, 3 * hidden))
            .transpose()?;
        let xw3 = ctx.reshape(xw, known(&[seq, batch, gh]))?;
        operands.push(xw3);
        match r_d {
            KernelR::Float(r) => operands.push(*r),
            KernelR::Int8(blob) => integer_r.push(blob.clone()),
        }
        operands.extend([bias, h, c, p].into_iter().flatten());
        present = [bias.is_some(), h.is_some(), c.is_some(), p.is_some()];
    }
    let to = |v: i64| v as usize;
    let pair = dirs.len() == 2;
    let params = RecurrentParams {
        cell: match cell {
            Cell::Rnn => rt::Cell::Rnn,
            Cell::Gru { .. } => rt::Cell::Gru,
            Cell::Lstm { .. } => rt::Cell::Lstm,
        },
        seq: to(seq),
        batch: to(batch),
        hidden: to(hidden),
        // A pair's second direction runs the other way.
        reverse: dirs[0].1,
        linear_before_reset: matches!(
            cell,
            Cell::Gru {
                linear_before_reset: true
            }
        ),
        input_forget: matches!(cell, Cell::Lstm { input_forget: true }),
        r_packed: false,
        quantize_h,
        r_int8: false,
    };
    if !integer_r.is_empty() && integer_r.len() != dirs.len() {
        return Err(ctx.err("recurrent weights integer in one direction and float in the other"));
    }
    debug_assert!(
        !pair || (!dirs[0].1 && dirs[1].1),
        "a pair runs forward, then reversed"
    );
    let states = if lstm { 2 } else { 1 };
    let rows_per_dir = seq + states;
    let shape = if pair {
        known(&[2, rows_per_dir, batch, hidden])
    } else {
        known(&[rows_per_dir, batch, hidden])
    };
    let all = ctx.add(
        Op::kernel(crate::kernels::Recurrent {
            params,
            clip: clip.map_or(f32::INFINITY, |c| c as f32),
            present,
            pair,
            integer_r,
        }),
        operands,
        TypeInfo::new(dt, shape),
    )?;
    let mut out = Vec::new();
    for k in 0..dirs.len() {
        // Rows `from..from + n` of direction k's part of the result.
        let rows = |ctx: &mut Ctx, from: i64, n: i64| {
            let (t, b, u) = (expr::var(0), expr::var(1), expr::var(2));
            let mut at = vec![expr::add(t, expr::i(from)), b, u];
            if pair {
                at.insert(0, expr::i(k as i64));
            }
            let body = expr::load(dt, 0, at);
            ctx.map(dt, known(&[n, batch, hidden]), vec![all], body)
        };
        let y = rows(ctx, 0, seq)?;
        let last_h = rows(ctx, seq, 1)?;
        let last_h = ctx.reshape(last_h, known(&[batch, hidden]))?;
        let last_c = if lstm {
            let c = rows(ctx, seq + 1, 1)?;
            Some(ctx.reshape(c, known(&[batch, hidden]))?)
        } else {
            None
        };
        out.push((y, last_h, last_c));
    }
    Ok(out)
}
