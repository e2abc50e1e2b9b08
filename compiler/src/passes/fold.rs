//! Constant folding: a node whose operands are all constants becomes a constant, evaluated
//! by the reference interpreter. Runs as the frontend builds nodes (shape subgraphs must be
//! constants before later builders read them) and again as a pass after simplification.

use crate::ir::dim::known_dims;
use crate::ir::interp::{self, EvalError};
use crate::ir::{Graph, NodeId, Op, Tensor};

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
    crate::ir::dim::check_size(&shape, dtype.size())?;
    let n: i64 = shape.iter().product();
    let inputs: Option<Vec<&Tensor>> = node.inputs.iter().map(|&v| g.const_value(v)).collect();
    let Some(inputs) = inputs else {
        return Ok(false);
    };
    let trivially_cheap = match &node.op {
        Op::Map(m) => m.body.as_const().is_some(),
        Op::Reshape | Op::Concat { .. } => true,
        _ => false,
    };
    // Fills and reshapes of constants fold at any size a model's weights have (the light
    // models build theirs with ConstantOfShape), up to 2^28 elements; a larger tensor is
    // filled when the model runs.
    if (!trivially_cheap && n as usize > limit) || n > 1 << 28 {
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
            let mut scratch = vec![0f32; g.scratch_floats()];
            Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
                // SAFETY: x and y hold the geometry's planes, scratch what the kernel asks for.
                unsafe {
                    onnxc_runtime::pool::pool2d_f32(
                        &g,
                        x.as_ptr(),
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                }
            }))
        }
        Op::Resize(r) => {
            let mut scratch = vec![0f32; r.scratch_floats()];
            let (params, floats) = r.encode();
            Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
                // SAFETY: x and y hold the planes the geometry describes, scratch one input row.
                unsafe {
                    onnxc_runtime::resize::onnxc_resize_f32(
                        params.as_ptr(),
                        floats.as_ptr(),
                        x.as_ptr(),
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                }
            }))
        }
        Op::TopK { axis, k, largest } => {
            let x = inputs[0];
            let (params, n_axis) = topk_params(x.dtype, &x.shape, *axis, *k, *largest);
            let mut idx = vec![0i64; n as usize];
            let mut scratch = vec![0i64; n_axis];
            // The kernel reads elements of up to 8 bytes: an 8-byte aligned copy.
            let mut aligned = vec![0u64; x.data.len().div_ceil(8)];
            for (w, c) in aligned.iter_mut().zip(x.data.chunks(8)) {
                let mut b = [0u8; 8];
                b[..c.len()].copy_from_slice(c);
                *w = u64::from_ne_bytes(b);
            }
            // SAFETY: `aligned` holds the [outer, n, inner] elements of its type the
            // parameters describe, idx the [outer, k, inner] positions, scratch n slots.
            unsafe {
                onnxc_runtime::topk::onnxc_topk(
                    params.as_ptr(),
                    aligned.as_ptr() as *const u8,
                    idx.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            }
            Ok(Tensor::from_i64s(shape.clone(), &idx))
        }
        Op::GatherSum { weighted } => {
            let params = gather_sum_params(&inputs[0].shape, &inputs[1].shape, *weighted);
            let off = inputs[1].to_i64s();
            let w: Vec<f32> = if *weighted {
                inputs[2].to_f64s().iter().map(|&v| v as f32).collect()
            } else {
                vec![]
            };
            Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
                // SAFETY: x, off, w and y hold the elements the parameters describe.
                unsafe {
                    onnxc_runtime::gather::onnxc_gather_sum_f32(
                        params.as_ptr(),
                        x.as_ptr(),
                        off.as_ptr(),
                        if *weighted {
                            w.as_ptr()
                        } else {
                            std::ptr::null()
                        },
                        y.as_mut_ptr(),
                    )
                }
            }))
        }
        Op::ConvTranspose(t) => {
            let macs = n as usize * t.c / t.group * t.kernel[0] * t.kernel[1];
            if macs > limit * 16 {
                return Ok(false);
            }
            let w: Vec<f32> = inputs[1].to_f64s().iter().map(|&v| v as f32).collect();
            let bias: Option<Vec<f32>> = inputs
                .get(2)
                .map(|b| b.to_f64s().iter().map(|&v| v as f32).collect());
            let wp = t.pack_weights(&w);
            let mut scratch = vec![0f32; t.scratch_floats(true)];
            Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
                // SAFETY: x, the packed weights, the bias and y hold what the geometry
                // describes, scratch what it asks for.
                unsafe {
                    onnxc_runtime::conv::transpose::conv_transpose_f32(
                        t,
                        x.as_ptr(),
                        wp.as_ptr(),
                        true,
                        bias.as_ref().map_or(std::ptr::null(), |b| b.as_ptr()),
                        f32::NEG_INFINITY,
                        f32::INFINITY,
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                }
            }))
        }
        Op::TreeEnsemble(forest) => {
            let x = inputs[0];
            let rows = x.shape.first().copied().unwrap_or(1);
            // Aligned copies of the operand and the result.
            let mut xa = vec![0u64; x.data.len().div_ceil(8)];
            for (w, c) in xa.iter_mut().zip(x.data.chunks(8)) {
                let mut b = [0u8; 8];
                b[..c.len()].copy_from_slice(c);
                *w = u64::from_ne_bytes(b);
            }
            let bytes = n as usize * dtype.size();
            let mut y = vec![0u64; bytes.div_ceil(8)];
            let mut scratch = vec![0u64; onnxc_runtime::tree::scratch_bytes(forest).div_ceil(8)];
            // SAFETY: the forest was encoded for this operand's type and width and the
            // result's type; xa and y hold rows of them, scratch the bytes it asks for.
            unsafe {
                onnxc_runtime::tree::onnxc_tree_ensemble(
                    forest.as_ptr(),
                    xa.as_ptr() as *const u8,
                    y.as_mut_ptr() as *mut u8,
                    rows,
                    scratch.as_mut_ptr() as *mut u8,
                )
            };
            let data: Vec<u8> = y.iter().flat_map(|w| w.to_ne_bytes()).take(bytes).collect();
            Ok(Tensor::new(dtype, shape.clone(), data))
        }
        Op::SvmProbability { classes, ab } => {
            let x = inputs[0];
            let rows = x.shape.first().copied().unwrap_or(0).max(0) as usize;
            let pairs = classes * classes.saturating_sub(1) / 2;
            let s: Vec<f32> = x.to_f64s().iter().map(|&v| v as f32).collect();
            let mut p = vec![0f32; rows * classes];
            let mut scratch = vec![0f32; 2 * classes * classes + classes];
            let (a, b) = ab.split_at(pairs);
            for r in 0..rows {
                onnxc_runtime::svm::probability(
                    *classes,
                    &s[r * pairs..(r + 1) * pairs],
                    a,
                    b,
                    &mut p[r * classes..(r + 1) * classes],
                    &mut scratch,
                );
            }
            Ok(f32_tensor_of(shape.clone(), &p))
        }
        // Never constant: strings are pointers at run time.
        Op::StrLookup(_) | Op::StrTable(_) => return Ok(false),
        Op::Gelu => Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
            // SAFETY: x and y hold x.len() floats.
            unsafe { onnxc_runtime::gelu::gelu_f32(x.as_ptr(), y.as_mut_ptr(), x.len()) }
        })),
        Op::Softmax => {
            let cols = shape.last().copied().unwrap_or(1).max(1) as usize;
            Ok(f32_kernel(inputs[0], n, dtype, &shape, |x, y| {
                // SAFETY: x and y hold whole rows of `cols` floats.
                unsafe {
                    onnxc_runtime::softmax::softmax_f32(
                        x.as_ptr(),
                        y.as_mut_ptr(),
                        x.len() / cols,
                        cols,
                        1.0,
                    )
                }
            }))
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

/// Runs a float32 runtime kernel `f(x, y)` on a constant input, into `n` output elements.
fn f32_kernel(
    input: &Tensor,
    n: i64,
    dtype: crate::ir::DType,
    shape: &[i64],
    f: impl FnOnce(&[f32], &mut [f32]),
) -> Tensor {
    let x: Vec<f32> = input
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut y = vec![0f32; n as usize];
    f(&x, &mut y);
    Tensor::new(
        dtype,
        shape.to_vec(),
        y.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

/// `onnxc_topk`'s parameters for an input of type `dtype` and `shape` (and the length of
/// the axis, its scratch in int64 slots).
pub fn topk_params(
    dtype: crate::ir::DType,
    shape: &[i64],
    axis: usize,
    k: i64,
    largest: bool,
) -> ([i64; onnxc_runtime::topk::PARAMS], usize) {
    let outer: i64 = shape[..axis].iter().product();
    let inner: i64 = shape[axis + 1..].iter().product();
    let n = shape[axis];
    (
        [dtype.onnx_code() as i64, outer, n, inner, k, largest as i64],
        n as usize,
    )
}

/// `onnxc_gather_sum_f32`'s parameters for `x: [N, C, S]` and offsets `[N, P, T]`.
pub fn gather_sum_params(
    x: &[i64],
    off: &[i64],
    weighted: bool,
) -> [i64; onnxc_runtime::gather::PARAMS] {
    [x[0], x[1], x[2], off[1], off[2], weighted as i64]
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

/// A float32 tensor of `dims` holding `v`.
fn f32_tensor_of(dims: Vec<i64>, v: &[f32]) -> Tensor {
    Tensor::new(
        crate::ir::DType::F32,
        dims,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}
