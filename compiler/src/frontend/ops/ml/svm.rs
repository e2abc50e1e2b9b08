//! SVMRegressor and SVMClassifier, as onnxruntime computes them (float32): the kernel of
//! every row with every support vector (LINEAR, POLY `(γ·x·s + c)^d`, RBF `e^(−γ|x−s|²)`,
//! SIGMOID `tanh(γ·x·s + c)`; a matrix product with the support vectors, RBF a reduction),
//! then for a classifier one-vs-one decision values (summed in float64, as onnxruntime
//! does), votes for the label, and either the decision values as scores or, with
//! `prob_a`/`prob_b`, class probabilities by pairwise coupling (`kernels::SvmProbability`).
//! Without support vectors the coefficients are one linear model per class (liblinear).

use super::{Post, input_rows, label_values, post_transform, transform_rows};
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::{MatMulOp, ReduceKind};
use crate::ir::{DType, Op, Scalar, Tensor, TypeInfo, ValueId};

#[derive(Copy, Clone, PartialEq)]
enum Kernel {
    Linear,
    Poly,
    Rbf,
    Sigmoid,
}

struct Params {
    kernel: Kernel,
    gamma: f32,
    coef0: f32,
    degree: f32,
}

fn params(ctx: &Ctx) -> Result<Params> {
    let kernel = match ctx.attr_s_or("kernel_type", "LINEAR")?.as_str() {
        "LINEAR" => Kernel::Linear,
        "POLY" => Kernel::Poly,
        "RBF" => Kernel::Rbf,
        "SIGMOID" => Kernel::Sigmoid,
        other => {
            return Err(ctx.err(format!(
                "attribute 'kernel_type' is '{other}'; expected LINEAR, POLY, RBF or SIGMOID"
            )));
        }
    };
    let p = ctx.attr_floats("kernel_params").unwrap_or_default();
    let (gamma, coef0, degree) = match p.as_slice() {
        [] => (0.0, 0.0, 0.0),
        [g, c, d, ..] => (*g, *c, *d),
        _ => {
            return Err(ctx.err(format!(
                "attribute 'kernel_params' has {} values; expected gamma, coef0, degree",
                p.len()
            )));
        }
    };
    Ok(Params {
        kernel,
        gamma,
        coef0,
        degree,
    })
}

fn f32s(ctx: &mut Ctx, shape: Vec<i64>, v: &[f32]) -> ValueId {
    ctx.constant(Tensor::from_scalars(
        DType::F32,
        shape,
        &v.iter().map(|&x| Scalar::F(x as f64)).collect::<Vec<_>>(),
    ))
}

/// `[n, v]` kernel values of X's rows with the `v` vectors (`[v, f]`), plus `c` for LINEAR.
fn kernel(
    ctx: &mut Ctx,
    x: ValueId,
    vectors: &[f32],
    v: usize,
    p: &Params,
    c: f32,
) -> Result<ValueId> {
    let [n, f] = ctx.known_shape(x)?[..] else {
        return Err(ctx.err("input X must have rank 1 or 2"));
    };
    if vectors.len() != v * f as usize {
        return Err(ctx.err(format!(
            "{} values for {v} vectors, but X has {f} features (expected {})",
            vectors.len(),
            v * f as usize
        )));
    }
    let sv = f32s(ctx, vec![v as i64, f], vectors);
    let dims = vec![Dim::Known(n), Dim::Known(v as i64)];
    let fc = |x: f64| expr::f(DType::F32, x);
    if p.kernel == Kernel::Rbf {
        let d = expr::binary(
            BinOp::Sub,
            expr::load(DType::F32, 0, vec![expr::var(0), expr::var(2)]),
            expr::load(DType::F32, 1, vec![expr::var(1), expr::var(2)]),
        );
        let s = ctx.reduce(
            ReduceKind::Sum,
            vec![f],
            DType::F32,
            dims.clone(),
            vec![x, sv],
            expr::binary(BinOp::Mul, d.clone(), d),
        )?;
        return build::unary(ctx, s, DType::F32, |s| {
            expr::unary(UnOp::Exp, expr::binary(BinOp::Mul, fc(-p.gamma as f64), s))
        });
    }
    let dot = ctx.matmul(
        MatMulOp {
            trans_a: false,
            trans_b: true,
        },
        x,
        sv,
        TypeInfo::new(DType::F32, dims),
    )?;
    let (alpha, c) = if p.kernel == Kernel::Linear {
        (1.0, c)
    } else {
        (p.gamma, p.coef0)
    };
    let degree = p.degree;
    let kernel = p.kernel;
    build::unary(ctx, dot, DType::F32, |d| {
        let a = expr::binary(
            BinOp::Add,
            expr::binary(BinOp::Mul, fc(alpha as f64), d),
            fc(c as f64),
        );
        match kernel {
            Kernel::Poly if degree == 2.0 => expr::binary(BinOp::Mul, a.clone(), a),
            Kernel::Poly if degree == 3.0 => expr::binary(
                BinOp::Mul,
                expr::binary(BinOp::Mul, a.clone(), a.clone()),
                a,
            ),
            Kernel::Poly => expr::binary(BinOp::Pow, a, fc(degree as f64)),
            Kernel::Sigmoid => expr::unary(UnOp::Tanh, a),
            _ => a,
        }
    })
}

pub fn svm_regressor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let p = params(ctx)?;
    let coefficients = ctx.attr_floats("coefficients").unwrap_or_default();
    let rho = ctx.attr_floats("rho").unwrap_or_default();
    let supports = ctx.attr_i_or("n_supports", 0)?;
    let vectors = ctx.attr_floats("support_vectors").unwrap_or_default();
    let one_class = ctx.attr_i_or("one_class", 0)? != 0;
    if rho.is_empty() || coefficients.is_empty() {
        return Err(ctx.err("attributes 'rho' and 'coefficients' are required"));
    }
    let x = input_rows(ctx, false)?;
    let y = if supports > 0 {
        if coefficients.len() != supports as usize {
            return Err(ctx.err(format!(
                "{} coefficients for {supports} support vectors",
                coefficients.len()
            )));
        }
        let k = kernel(ctx, x, &vectors, supports as usize, &p, 0.0)?;
        // K·coefficients + rho[0].
        let c = f32s(ctx, vec![1, supports], &coefficients);
        let n = ctx.known_shape(k)?[0];
        let dims = vec![Dim::Known(n), Dim::Known(1)];
        let y = ctx.matmul(
            MatMulOp {
                trans_a: false,
                trans_b: true,
            },
            k,
            c,
            TypeInfo::new(DType::F32, dims),
        )?;
        let r = rho[0];
        build::unary(ctx, y, DType::F32, |v| {
            expr::binary(BinOp::Add, v, expr::f(DType::F32, r as f64))
        })?
    } else {
        let lin = Params {
            kernel: Kernel::Linear,
            ..p
        };
        kernel(ctx, x, &coefficients, 1, &lin, rho[0])?
    };
    let y = if one_class {
        build::unary(ctx, y, DType::F32, |v| {
            expr::select(
                expr::binary(BinOp::Gt, v, expr::f(DType::F32, 0.0)),
                expr::f(DType::F32, 1.0),
                expr::f(DType::F32, -1.0),
            )
        })?
    } else {
        y
    };
    Ok(vec![y])
}

pub fn svm_classifier(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let p = params(ctx)?;
    let labels =
        super::labels(ctx, "classlabels_ints", "classlabels_strings")?.ok_or_else(|| {
            ctx.err("one of 'classlabels_ints' and 'classlabels_strings' is required")
        })?;
    let coefficients = ctx.attr_floats("coefficients").unwrap_or_default();
    let rho = ctx.attr_floats("rho").unwrap_or_default();
    let vectors = ctx.attr_floats("support_vectors").unwrap_or_default();
    let per_class = ctx.attr_ints("vectors_per_class").unwrap_or_default();
    let prob_a = ctx.attr_floats("prob_a").unwrap_or_default();
    let prob_b = ctx.attr_floats("prob_b").unwrap_or_default();
    let post = post_transform(ctx)?;
    if prob_a.len() != prob_b.len() {
        return Err(ctx.err("'prob_a' and 'prob_b' must have the same length"));
    }
    if coefficients.is_empty() || rho.is_empty() {
        return Err(ctx.err("attributes 'rho' and 'coefficients' are required"));
    }
    let k = labels.len();
    let all_positive = coefficients.iter().all(|&c| c >= 0.0);
    let x = input_rows(ctx, false)?;
    let n = ctx.known_shape(x)?[0];
    let row = vec![Dim::Known(n)];
    let v: i64 = per_class.iter().sum();
    if v == 0 {
        // liblinear: one linear model per class, all with rho[0].
        let lin = Params {
            kernel: Kernel::Linear,
            ..p
        };
        let s = kernel(ctx, x, &coefficients, k, &lin, rho[0])?;
        let pos = build::reduce(
            ctx,
            s,
            ReduceKind::ArgMax { select_last: false },
            &[1],
            false,
            |x| x,
        )?;
        let label = if k == 2 {
            // onnxruntime's ChooseClass on the best score.
            let best = build::reduce(ctx, s, ReduceKind::Max, &[1], false, |x| x)?;
            let w = expr::load(DType::F32, 0, vec![expr::var(0)]);
            let cond = if all_positive {
                expr::binary(BinOp::Ge, w, expr::f(DType::F32, 0.5))
            } else {
                expr::binary(BinOp::Gt, w, expr::f(DType::F32, 0.0))
            };
            let p1 = ctx.map(
                DType::I64,
                row,
                vec![best, pos],
                expr::select(
                    cond,
                    expr::i(1),
                    expr::load(DType::I64, 1, vec![expr::var(0)]),
                ),
            )?;
            label_values(ctx, p1, &labels)?
        } else {
            label_values(ctx, pos, &labels)?
        };
        let z = if k > 1 || post == Post::Probit {
            transform_rows(ctx, s, post)?
        } else {
            s
        };
        return Ok(vec![label, z]);
    }
    if per_class.len() != k || per_class.iter().any(|&c| c < 0) {
        return Err(ctx.err(format!(
            "'vectors_per_class' has {} entries for {k} classes",
            per_class.len()
        )));
    }
    let pairs = k * (k - 1) / 2;
    if coefficients.len() != (k - 1) * v as usize || rho.len() < pairs {
        return Err(ctx.err(format!(
            "{} coefficients and {} rho for {k} classes of {v} support vectors; expected {} and {pairs}",
            coefficients.len(),
            rho.len(),
            (k - 1) * v as usize
        )));
    }
    let kv = kernel(ctx, x, &vectors, v as usize, &p, 0.0)?;
    // Decision value of pair (i, j): Σ over class i's vectors of coef[j−1]·K, over class j's
    // of coef[i]·K, + rho — a product with a [v, pairs] matrix, summed in float64.
    let mut start = vec![0usize];
    for &c in &per_class {
        start.push(start.last().copied().unwrap_or(0) + c as usize);
    }
    let vu = v as usize;
    let mut w = vec![0f32; vu * pairs];
    let mut pair = 0;
    let mut pair_of = vec![];
    for i in 0..k {
        for j in i + 1..k {
            for m in start[i]..start[i + 1] {
                w[m * pairs + pair] = coefficients[(j - 1) * vu + m];
            }
            for m in start[j]..start[j + 1] {
                w[m * pairs + pair] = coefficients[i * vu + m];
            }
            pair_of.push((i, j));
            pair += 1;
        }
    }
    let wt = f32s(ctx, vec![v, pairs as i64], &w);
    let rt = ctx.constant(Tensor::from_scalars(
        DType::F64,
        vec![pairs as i64],
        &rho[..pairs]
            .iter()
            .map(|&r| Scalar::F(r as f64))
            .collect::<Vec<_>>(),
    ));
    let sums = ctx.reduce(
        ReduceKind::Sum,
        vec![v],
        DType::F64,
        vec![Dim::Known(n), Dim::Known(pairs as i64)],
        vec![kv, wt],
        expr::cast(
            expr::binary(
                BinOp::Mul,
                expr::load(DType::F32, 1, vec![expr::var(2), expr::var(1)]),
                expr::load(DType::F32, 0, vec![expr::var(0), expr::var(2)]),
            ),
            DType::F64,
        ),
    )?;
    let pdims = vec![Dim::Known(n), Dim::Known(pairs as i64)];
    let decision = ctx.map(
        DType::F32,
        pdims,
        vec![sums, rt],
        expr::cast(
            expr::binary(
                BinOp::Add,
                expr::load(DType::F64, 0, vec![expr::var(0), expr::var(1)]),
                expr::load(DType::F64, 1, vec![expr::var(1)]),
            ),
            DType::F32,
        ),
    )?;
    // Votes: pair (i, j) votes i when its value is positive, j otherwise.
    let d = |p: usize| expr::load(DType::F32, 0, vec![expr::var(0), expr::i(p as i64)]);
    let mut votes: E = expr::i(0);
    for (p, &(i, j)) in pair_of.iter().enumerate() {
        let pos = expr::binary(BinOp::Gt, d(p), expr::f(DType::F32, 0.0));
        let me_i = expr::binary(BinOp::Eq, expr::var(1), expr::i(i as i64));
        let me_j = expr::binary(BinOp::Eq, expr::var(1), expr::i(j as i64));
        let vote = expr::select(
            expr::binary(BinOp::And, me_i, pos.clone()),
            expr::i(1),
            expr::select(
                expr::binary(BinOp::And, me_j, expr::unary(UnOp::Not, pos)),
                expr::i(1),
                expr::i(0),
            ),
        );
        votes = expr::add(votes, vote);
    }
    let vt = ctx.map(
        DType::I64,
        vec![Dim::Known(n), Dim::Known(k as i64)],
        vec![decision],
        votes,
    )?;
    let pos = build::reduce(
        ctx,
        vt,
        ReduceKind::ArgMax { select_last: false },
        &[1],
        false,
        |x| x,
    )?;
    // The label comes from the votes, with probabilities too (as onnxruntime decides it).
    let label = label_values(ctx, pos, &labels)?;
    if !prob_a.is_empty() {
        if prob_a.len() != pairs {
            return Err(ctx.err(format!(
                "'prob_a' has {} values for {pairs} pairs of classes",
                prob_a.len()
            )));
        }
        let mut ab = prob_a.clone();
        ab.extend_from_slice(&prob_b);
        let prob = ctx.add(
            Op::kernel(crate::kernels::SvmProbability {
                classes: k,
                ab: std::sync::Arc::new(ab),
            }),
            vec![decision],
            TypeInfo::new(DType::F32, vec![Dim::Known(n), Dim::Known(k as i64)]),
        )?;
        let z = transform_rows(ctx, prob, post)?;
        return Ok(vec![label, z]);
    }
    let z = if pairs == 1 {
        // One decision value: [−s, s] without a transform, [1 − s, s] with one (which
        // onnxruntime does not apply); PROBIT writes one column only.
        if post == Post::Probit {
            return Err(ctx.unsupported(
                "PROBIT over a binary SVM's decision value: onnxruntime writes only the first \
                 column of the scores",
            ));
        }
        let s = expr::load(DType::F32, 0, vec![expr::var(0), expr::i(0)]);
        let first = if post == Post::None {
            expr::unary(UnOp::Neg, s.clone())
        } else {
            expr::binary(BinOp::Sub, expr::f(DType::F32, 1.0), s.clone())
        };
        ctx.map(
            DType::F32,
            vec![Dim::Known(n), Dim::Known(2)],
            vec![decision],
            expr::select(expr::binary(BinOp::Eq, expr::var(1), expr::i(1)), s, first),
        )?
    } else {
        transform_rows(ctx, decision, post)?
    };
    Ok(vec![label, z])
}
