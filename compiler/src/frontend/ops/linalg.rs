//! MatMul and Gemm.

use crate::error::Result;
use crate::frontend::build::{self, bload, broadcast_shapes};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::MatMulOp;
use crate::ir::{DType, TypeInfo, ValueId};

const MATMUL_TYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U32,
    DType::U64,
];

/// numpy `matmul` semantics, with optional transposed reading of the last two dims.
pub fn matmul_values(
    ctx: &mut Ctx,
    a: ValueId,
    b: ValueId,
    trans_a: bool,
    trans_b: bool,
) -> Result<ValueId> {
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
    let a2 = if a1 {
        ctx.reshape(a, vec![Dim::Known(1), sa[0].clone()])?
    } else {
        a
    };
    let b2 = if b1 {
        ctx.reshape(b, vec![sb[0].clone(), Dim::Known(1)])?
    } else {
        b
    };
    let (sa, sb) = (ctx.shape(a2), ctx.shape(b2));
    let (ra, rb) = (sa.len(), sb.len());
    let (m, ka) = if trans_a {
        (sa[ra - 1].clone(), sa[ra - 2].clone())
    } else {
        (sa[ra - 2].clone(), sa[ra - 1].clone())
    };
    let (kb, n) = if trans_b {
        (sb[rb - 1].clone(), sb[rb - 2].clone())
    } else {
        (sb[rb - 2].clone(), sb[rb - 1].clone())
    };
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
    let y = ctx.matmul(
        MatMulOp { trans_a, trans_b },
        a2,
        b2,
        TypeInfo::new(dt, shape.clone()),
    )?;
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
    if let Some(y) = crate::frontend::ops::qdq::qdq_matmul(ctx, a, b)? {
        return Ok(vec![y]);
    }
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
        return Err(ctx.err(format!(
            "A and B must be 2-D, got ranks {} and {}",
            ctx.rank(a),
            ctx.rank(b)
        )));
    }
    let c = match c {
        Some(c) if beta != 0.0 => Some(c),
        _ => None,
    };
    if !trans_a
        && alpha == 1.0
        && beta == 1.0
        && let Some(y) = crate::frontend::ops::qdq::qdq_gemm(ctx, a, b, trans_b, c)?
    {
        return Ok(vec![y]);
    }
    let y = matmul_values(ctx, a, b, trans_a, trans_b)?;
    let dt = ctx.dtype(y);
    let shape = ctx.shape(y);
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

/// One parsed Einsum operand: a label per dim (`None` for the dims covered by `...`).
fn einsum_labels(
    term: &str,
    rank: usize,
    ellipsis_rank: &mut usize,
) -> std::result::Result<Vec<Option<char>>, String> {
    let mut out = Vec::new();
    let explicit = term.chars().filter(|c| c.is_ascii_alphabetic()).count();
    let mut rest = term;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if rank < explicit {
                return Err(format!(
                    "term '{term}' has more labels than the operand's rank {rank}"
                ));
            }
            let n = rank - explicit;
            *ellipsis_rank = (*ellipsis_rank).max(n);
            out.extend(std::iter::repeat_n(None, n));
            rest = r;
            continue;
        }
        let c = rest.chars().next().expect("non-empty");
        if !c.is_ascii_alphabetic() {
            return Err(format!("unexpected character '{c}' in term '{term}'"));
        }
        out.push(Some(c));
        rest = &rest[1..];
    }
    if out.len() != rank {
        return Err(format!(
            "term '{term}' has {} labels but the operand has rank {rank}",
            out.len()
        ));
    }
    Ok(out)
}

pub fn einsum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let eq: String = ctx
        .attr_s("equation")?
        .ok_or_else(|| ctx.err("attribute 'equation' is required"))?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let inputs: Vec<ValueId> = (0..ctx.num_inputs())
        .filter_map(|i| ctx.opt_input(i))
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != inputs.len() {
        return Err(ctx.err(format!(
            "equation '{eq}' has {} operands but the node has {}",
            terms.len(),
            inputs.len()
        )));
    }
    let dt = ctx.dtype(inputs[0]);
    let mut ell = 0usize;
    let mut labels = Vec::new();
    for (t, &v) in terms.iter().zip(&inputs) {
        if ctx.dtype(v) != dt {
            return Err(ctx.err("all operands must have the same type"));
        }
        labels.push(einsum_labels(t, ctx.rank(v), &mut ell).map_err(|e| ctx.err(e))?);
    }
    // Sizes: per label, and per ellipsis dim (right-aligned broadcasting).
    let mut size: std::collections::BTreeMap<char, i64> = Default::default();
    let mut ell_size = vec![1i64; ell];
    for (ls, &v) in labels.iter().zip(&inputs) {
        let dims = ctx.known_shape(v)?;
        let n_ell = ls.iter().filter(|l| l.is_none()).count();
        let mut e = 0;
        for (l, &d) in ls.iter().zip(&dims) {
            match l {
                Some(c) => {
                    let s = size.entry(*c).or_insert(d);
                    if *s != d && *s != 1 && d != 1 {
                        return Err(ctx.err(format!("label '{c}' has sizes {s} and {d}")));
                    }
                    *s = (*s).max(d);
                }
                None => {
                    let k = ell - n_ell + e;
                    if ell_size[k] != d && ell_size[k] != 1 && d != 1 {
                        return Err(ctx.err("operands covered by '...' do not broadcast"));
                    }
                    ell_size[k] = ell_size[k].max(d);
                    e += 1;
                }
            }
        }
    }
    let out_labels: Vec<Option<char>> = match &rhs {
        Some(r) => {
            let mut e = 0;
            einsum_labels(
                r,
                r.chars().filter(|c| c.is_ascii_alphabetic()).count()
                    + if r.contains("...") { ell } else { 0 },
                &mut e,
            )
            .map_err(|e| ctx.err(e))?
        }
        None => {
            // Implicit output: ellipsis dims, then labels appearing once, alphabetically.
            let mut count: std::collections::BTreeMap<char, usize> = Default::default();
            for ls in &labels {
                for c in ls.iter().flatten() {
                    *count.entry(*c).or_default() += 1;
                }
            }
            let mut v: Vec<Option<char>> = vec![None; ell];
            v.extend(
                count
                    .into_iter()
                    .filter(|(_, n)| *n == 1)
                    .map(|(c, _)| Some(c)),
            );
            v
        }
    };
    for (k, c) in out_labels.iter().enumerate() {
        let Some(c) = c else { continue };
        if !size.contains_key(c) {
            return Err(ctx.err(format!("output label '{c}' does not appear in the inputs")));
        }
        if out_labels[..k].contains(&Some(*c)) {
            return Err(ctx.err(format!(
                "output label '{c}' appears more than once in equation '{eq}'; each output \
                 label names one dim (numpy.einsum refuses it too)"
            )));
        }
    }
    let reduced: Vec<char> = size
        .keys()
        .copied()
        .filter(|c| !out_labels.contains(&Some(*c)))
        .collect();
    let out_rank = out_labels.len();
    let var_of = |c: char| -> Option<u32> {
        out_labels
            .iter()
            .position(|l| *l == Some(c))
            .map(|p| p as u32)
            .or_else(|| {
                reduced
                    .iter()
                    .position(|&r| r == c)
                    .map(|p| (out_rank + p) as u32)
            })
    };
    let ell_out: Vec<usize> = out_labels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_none())
        .map(|(k, _)| k)
        .collect();
    if let Some(y) = einsum_as_matmul(ctx, &inputs, &labels, &out_labels, &size)? {
        return Ok(vec![y]);
    }
    let mut body: Option<E> = None;
    for (k, (ls, &v)) in labels.iter().zip(&inputs).enumerate() {
        let dims = ctx.known_shape(v)?;
        let n_ell = ls.iter().filter(|l| l.is_none()).count();
        let mut e = 0;
        let mut index = Vec::new();
        for (l, &d) in ls.iter().zip(&dims) {
            let ix = match l {
                Some(c) => expr::var(var_of(*c).expect("every label has a variable")),
                None => {
                    let slot = ell - n_ell + e;
                    e += 1;
                    match ell_out.get(slot) {
                        Some(&o) => expr::var(o as u32),
                        None => {
                            return Err(ctx.unsupported(
                                "'...' must appear in the output when used in the inputs",
                            ));
                        }
                    }
                }
            };
            index.push(if d == 1 { expr::i(0) } else { ix });
        }
        let l = expr::load(dt, k as u32, index);
        body = Some(match body {
            None => l,
            Some(b) => expr::binary(BinOp::Mul, b, l),
        });
    }
    let body = body.ok_or_else(|| ctx.err("Einsum needs at least one operand"))?;
    let mut e = 0;
    let shape: Shape = out_labels
        .iter()
        .map(|l| {
            Dim::Known(match l {
                Some(c) => size[c],
                None => {
                    e += 1;
                    ell_size[e - 1]
                }
            })
        })
        .collect();
    if reduced.is_empty() {
        return Ok(vec![ctx.map(dt, shape, inputs, body)?]);
    }
    let extents: Vec<i64> = reduced.iter().map(|c| size[c]).collect();
    Ok(vec![ctx.reduce(
        crate::ir::graph::ReduceKind::Sum,
        extents,
        dt,
        shape,
        inputs,
        body,
    )?])
}

/// A two-operand float32 Einsum that is a batched matrix product — every label is a batch
/// label (both operands and the output), a row label (A and the output), a column label (B
/// and the output) or a contracted one (both operands, not the output); no ellipsis, no
/// repeated label, no broadcasting — as the MatMul kernel: each operand transposed into
/// `[batch…, rows…, contracted…]` / `[batch…, contracted…, columns…]` order (or the
/// transposed reading of the last two dims where its own order has them swapped), reshaped
/// to 3-D, multiplied, and the product brought into the output's order. Attention written
/// as Einsum (`bqhd,bkhd->bhqk`) otherwise ran as a scalar reduction, 4× slower than
/// onnxruntime. None: the general reduction.
fn einsum_as_matmul(
    ctx: &mut Ctx,
    inputs: &[ValueId],
    labels: &[Vec<Option<char>>],
    out: &[Option<char>],
    size: &std::collections::BTreeMap<char, i64>,
) -> Result<Option<ValueId>> {
    if inputs.len() != 2 || ctx.dtype(inputs[0]) != DType::F32 {
        return Ok(None);
    }
    let as_chars = |ls: &[Option<char>]| ls.iter().copied().collect::<Option<Vec<char>>>();
    let (Some(la), Some(lb), Some(lo)) =
        (as_chars(&labels[0]), as_chars(&labels[1]), as_chars(out))
    else {
        return Ok(None);
    };
    let unique = |v: &[char]| v.iter().enumerate().all(|(i, c)| !v[..i].contains(c));
    if !unique(&la) || !unique(&lb) || !unique(&lo) {
        return Ok(None);
    }
    // Every operand dim has its label's full size (no broadcasting of size-1 dims).
    for (ls, v) in [(&la, inputs[0]), (&lb, inputs[1])] {
        let dims = ctx.known_shape(v)?;
        if ls.iter().zip(&dims).any(|(c, &d)| size[c] != d) {
            return Ok(None);
        }
    }
    let (in_a, in_b, in_o) = (
        |c: &char| la.contains(c),
        |c: &char| lb.contains(c),
        |c: &char| lo.contains(c),
    );
    if la.iter().chain(&lb).any(|c| in_a(c) != in_b(c) && !in_o(c)) {
        return Ok(None); // a label summed within one operand
    }
    let batch: Vec<char> = lo.iter().copied().filter(|c| in_a(c) && in_b(c)).collect();
    let rows: Vec<char> = la.iter().copied().filter(|c| in_o(c) && !in_b(c)).collect();
    let cols: Vec<char> = lb.iter().copied().filter(|c| in_o(c) && !in_a(c)).collect();
    let red: Vec<char> = la.iter().copied().filter(|c| in_b(c) && !in_o(c)).collect();
    let prod = |v: &[char]| v.iter().map(|c| size[c]).product::<i64>();
    let (nb, m, n) = (prod(&batch), prod(&rows), prod(&cols));
    // An operand in the order `[batch…, first…, second…]`, reshaped to `[nb, p, q]`; the
    // order within the non-batch dims follows the operand where that makes it a reshape.
    let operand = |ctx: &mut Ctx,
                   v: ValueId,
                   ls: &[char],
                   first: &[char],
                   second: &[char]|
     -> Result<(ValueId, bool)> {
        let own: Vec<char> = ls.iter().copied().filter(|c| !batch.contains(c)).collect();
        let swapped = {
            let mut s = second.to_vec();
            s.extend_from_slice(first);
            own == s && !first.is_empty() && !second.is_empty()
        };
        let mut order = batch.clone();
        let (p, q) = if swapped {
            order.extend_from_slice(second);
            order.extend_from_slice(first);
            (prod(second), prod(first))
        } else {
            order.extend_from_slice(first);
            order.extend_from_slice(second);
            (prod(first), prod(second))
        };
        let perm: Vec<usize> = order
            .iter()
            .map(|c| {
                ls.iter()
                    .position(|l| l == c)
                    .expect("a label of the operand")
            })
            .collect();
        let t = build::transpose(ctx, v, &perm)?;
        let r = ctx.reshape(t, vec![Dim::Known(nb), Dim::Known(p), Dim::Known(q)])?;
        Ok((r, swapped))
    };
    let (a, trans_a) = operand(ctx, inputs[0], &la, &rows, &red)?;
    let (b, trans_b) = operand(ctx, inputs[1], &lb, &red, &cols)?;
    let y = ctx.matmul(
        MatMulOp { trans_a, trans_b },
        a,
        b,
        TypeInfo::new(
            DType::F32,
            vec![Dim::Known(nb), Dim::Known(m), Dim::Known(n)],
        ),
    )?;
    let mut order = batch.clone();
    order.extend_from_slice(&rows);
    order.extend_from_slice(&cols);
    let y = ctx.reshape(y, order.iter().map(|c| Dim::Known(size[c])).collect())?;
    let perm: Vec<usize> = lo
        .iter()
        .map(|c| order.iter().position(|l| l == c).expect("an output label"))
        .collect();
    Ok(Some(build::transpose(ctx, y, &perm)?))
}

/// Det (opset 11): the determinant of each `[n, n]` matrix of `[*, n, n]` (`kernels::SquareMatrices`,
/// in float64, cast back to the input's type).
pub fn det(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "X", build::FLOATS)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    if r < 2 || dims[r - 1] != dims[r - 2] {
        return Err(ctx.err(format!(
            "X has shape {dims:?}; Det takes square matrices [*, M, M]"
        )));
    }
    let n = dims[r - 1];
    let batch: Shape = dims[..r - 2].iter().map(|&d| Dim::Known(d)).collect();
    let x64 = build::cast(ctx, x, DType::F64)?;
    let d = ctx.add(
        crate::ir::Op::kernel(crate::kernels::SquareMatrices {
            n,
            op: crate::kernels::MatrixOp::Det,
        }),
        vec![x64],
        TypeInfo::new(DType::F64, batch),
    )?;
    Ok(vec![build::cast(ctx, d, dt)?])
}

/// Inverse (`com.microsoft`, what PyTorch exports torch.inverse as with onnxruntime's
/// registered symbolic): the inverse of each `[n, n]` matrix of `[*, n, n]`
/// (`kernels::SquareMatrices`, in float64, cast back to the input's type).
pub fn inverse(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "X", &[DType::F16, DType::F32, DType::F64])?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    if r < 2 || dims[r - 1] != dims[r - 2] {
        return Err(ctx.err(format!(
            "X has shape {dims:?}; Inverse takes square matrices [*, M, M]"
        )));
    }
    let n = dims[r - 1];
    let x64 = build::cast(ctx, x, DType::F64)?;
    let shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
    let y = ctx.add(
        crate::ir::Op::kernel(crate::kernels::SquareMatrices {
            n,
            op: crate::kernels::MatrixOp::Inverse,
        }),
        vec![x64],
        TypeInfo::new(DType::F64, shape),
    )?;
    Ok(vec![build::cast(ctx, y, dt)?])
}

/// CDist (`com.microsoft`, what skl2onnx writes for nearest neighbours with
/// `optim='cdist'`): the distances `[N, M]` between the rows of A `[N, K]` and of B
/// `[M, K]`, squared (`metric='sqeuclidean'`, the default) or not (`'euclidean'`): a sum of
/// squared differences over K, the root taken after, in the operands' type (float or double).
pub fn cdist(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dt = build::expect_types(ctx, a, "A", &[DType::F32, DType::F64])?;
    build::expect_types(ctx, b, "B", &[dt])?;
    let root = match ctx.attr_s_or("metric", "sqeuclidean")?.as_str() {
        "sqeuclidean" => false,
        "euclidean" => true,
        other => {
            return Err(ctx.unsupported(format!(
                "metric '{other}'; onnxc computes 'sqeuclidean' and 'euclidean' (as onnxruntime's \
                 CPU kernel)"
            )));
        }
    };
    let (sa, sb) = (ctx.known_shape(a)?, ctx.known_shape(b)?);
    let (&[n, k], &[m, kb]) = (&sa[..], &sb[..]) else {
        return Err(ctx.err(format!(
            "A has shape {sa:?} and B {sb:?}; CDist takes matrices [N, K] and [M, K]"
        )));
    };
    if k != kb {
        return Err(ctx.err(format!(
            "A has {k} columns and B {kb}; their rows must have the same length"
        )));
    }
    let diff = expr::sub(
        expr::load(dt, 0, vec![expr::var(0), expr::var(2)]),
        expr::load(dt, 1, vec![expr::var(1), expr::var(2)]),
    );
    let shape = vec![Dim::Known(n), Dim::Known(m)];
    let body = expr::mul(diff.clone(), diff);
    let y = ctx.reduce(
        crate::ir::graph::ReduceKind::Sum,
        vec![k],
        dt,
        shape,
        vec![a, b],
        body,
    )?;
    if !root {
        return Ok(vec![y]);
    }
    Ok(vec![build::unary(ctx, y, dt, |v| {
        expr::unary(expr::UnOp::Sqrt, v)
    })?])
}
