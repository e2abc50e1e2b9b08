//! Constant folding: a node whose operands are all constants becomes a constant, evaluated
//! by the reference interpreter. Runs as the frontend builds nodes (shape subgraphs must be
//! constants before later builders read them) and again as a pass after simplification.

use crate::ir::dim::known_dims;
use crate::ir::interp::{self, EvalError};
use crate::ir::{Graph, NodeId, Op, Tensor};

/// Largest constant folding may create (256 MiB): a hostile fill or concatenation of a
/// declared size must not exhaust the compiler's memory (#27).
pub const MAX_FOLD_BYTES: u64 = 1 << 28;

/// Folds node `id` in place if possible. Returns whether it folded. An error means the
/// node can never run successfully (e.g. a constant index out of range).
pub fn fold_node(g: &mut Graph, id: NodeId, limit: usize) -> Result<bool, String> {
    let node = g.node(id);
    if matches!(node.op, Op::Input | Op::Const(_)) || node.outputs.len() != 1 {
        return Ok(false);
    }
    let Some(shape) = known_dims(&node.outputs[0].shape) else {
        return Ok(false);
    };
    let dtype = node.outputs[0].dtype;
    // A string is a pointer at run time: no string value is a constant.
    if dtype == crate::ir::DType::Str {
        return Ok(false);
    }
    crate::ir::dim::check_size(&shape)?;
    let n: i64 = shape.iter().product();
    let inputs: Option<Vec<&Tensor>> = node.inputs.iter().map(|&v| g.const_value(v)).collect();
    let Some(inputs) = inputs else {
        return Ok(false);
    };
    // A fill counts as one element: a map over it (a Trilu of ones: a causal mask) makes
    // a table as the expanding maps do.
    let held = |t: &Tensor| {
        if t.splat_value().is_some() {
            1
        } else {
            t.len() as i64
        }
    };
    // With keep_selections, nor a selection from a larger float table by other operands (a
    // position table Gathered at Range(past, past + seq): the rows follow the dims, which
    // no formula of a table's contents gives; computed at run time, its indices are a small
    // table that does), or from a larger 8- or 16-bit one (that table quantized, as
    // quantize_dynamic leaves it: Gather, then DequantizeLinear). Selections of 32- and
    // 64-bit integers (a Shape's entries) still fold: shapes are built from them.
    if g.keep_expanding
        && let Op::Map(m) = &node.op
        && m.body.as_const().is_none()
        && (n > inputs.iter().map(|t| held(t)).sum::<i64>().max(1)
            || (g.keep_selections
                && inputs.len() > 1
                && inputs.iter().any(|t| {
                    (t.dtype.is_float() || t.dtype.is_int() && t.dtype.size() <= 2) && held(t) > n
                })))
    {
        return Ok(false);
    }
    let trivially_cheap = match &node.op {
        Op::Map(m) => m.body.as_const().is_some(),
        Op::Reshape | Op::Concat { .. } => true,
        _ => false,
    };
    // Fills, concatenations and reshapes of constants fold at the sizes a model's weights
    // have (the light models build theirs with ConstantOfShape), up to MAX_FOLD_BYTES; a
    // larger tensor is made when the model runs. A reshape shares its operand's bytes.
    let new_bytes = n as u64 * dtype.size() as u64;
    if (!trivially_cheap && n as usize > limit)
        || (!matches!(node.op, Op::Reshape) && new_bytes > MAX_FOLD_BYTES)
    {
        return Ok(false);
    }
    let result: Result<Tensor, EvalError> = match &node.op {
        Op::Map(m) => interp::eval_map(&m.body, &inputs, dtype, &shape),
        Op::Reduce(r) => interp::eval_reduce(r, &inputs, dtype, &shape),
        Op::Reshape => Ok(Tensor {
            dtype,
            shape: shape.clone(),
            data: inputs[0].data.clone(),
        }),
        Op::MatMul(m) => {
            let flops = n as usize * *inputs[0].shape.last().unwrap_or(&1) as usize;
            if flops > limit * 16 {
                return Ok(false);
            }
            Ok(interp::eval_matmul(m, inputs[0], inputs[1], dtype, &shape))
        }
        Op::Conv(c) => {
            let flops = n as usize * inputs[1].len() / inputs[1].shape[0].max(1) as usize;
            if flops > limit * 16 {
                return Ok(false);
            }
            Ok(interp::eval_conv(
                c,
                inputs[0],
                inputs[1],
                inputs.get(2).copied(),
                dtype,
                &shape,
            ))
        }
        Op::Concat { axis } => Ok(interp::eval_concat(*axis, &inputs, dtype, &shape)),
        Op::Scatter(sc) => interp::eval_scatter(sc, &inputs, dtype, &shape),
        Op::Pool(p) => {
            let g = p.geometry(&inputs[0].shape, &shape);
            // The kernel's Rust entry point takes the geometry as it is: check it as the C
            // one checks what it decodes.
            g.validate().map_err(|e| {
                EvalError::KernelParams {
                    kernel: onnxc_runtime::kernels::POOL2D_F32.symbol,
                    reason: e.0,
                }
                .to_string()
            })?;
            let mut scratch = vec![0f32; g.scratch_floats()];
            Ok(crate::kernels::f32_kernel(
                inputs[0],
                crate::kernels::Operand {
                    dtype,
                    shape: &shape,
                    constant: true,
                },
                |x, y| {
                    // SAFETY: x and y hold the geometry's planes, scratch what the kernel asks for.
                    unsafe {
                        onnxc_runtime::pool::pool2d_f32(
                            onnxc_runtime::par::Par::SEQ,
                            &g,
                            x.as_ptr(),
                            y.as_mut_ptr(),
                            scratch.as_mut_ptr(),
                        )
                    }
                },
            ))
        }
        Op::Kernel(k) => {
            let result = crate::kernels::Operand {
                dtype,
                shape: &shape,
                constant: true,
            };
            match k.eval(&inputs, result, limit) {
                Some(r) => r,
                None => return Ok(false),
            }
        }
        Op::Assert { code } => {
            if inputs[0].scalars().iter().all(|v| v.as_bool()) {
                Ok(crate::ir::Tensor::scalar(dtype, crate::ir::Scalar::B(true)))
            } else {
                return Err(format!(
                    "the model's constant values violate a shape requirement ({})",
                    onnxc_runtime::abi::strerror(*code)
                ));
            }
        }
        Op::Input | Op::Const(_) => return Ok(false),
    };
    let t = result.map_err(|e| e.to_string())?;
    g.replace_op(id, Op::Const(t), vec![]);
    Ok(true)
}

/// The pass: folds every foldable node in topological order.
pub fn run(g: &mut Graph, limit: usize) -> Result<usize, String> {
    let mut count = 0;
    for id in g.topo_order() {
        if fold_node(g, id, limit).map_err(|e| format!("{}: {e}", g.node(id).origin))? {
            count += 1;
        }
    }
    Ok(count)
}
