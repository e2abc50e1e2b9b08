//! Recognizes the exact GELU written out with Erf — `x·½·(1 + erf(x/√2))`, in the operand
//! orders PyTorch, TensorFlow and hand-written graphs export before opset 20's Gelu — and
//! replaces it with `kernels::Gelu` (one runtime kernel call instead of a chain of elementwise
//! maps with erf in 128-bit generated code). Float32 with a known shape only; anything
//! else is left as it is. The intermediate maps are left to `dce` (or kept, if something
//! else reads them).

use crate::ir::expr::{BinOp, E, ExprKind, UnOp};
use crate::ir::{DType, Graph, NodeId, Op, TypeInfo, ValueId};

/// An operand of a single-op map: a whole value of the map's shape, or a scalar constant.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Operand {
    Value(ValueId),
    Scalar(f64),
}

/// A map node computing one unary or binary op over whole operands.
enum Simple {
    Unary(UnOp, Operand),
    Binary(BinOp, Operand, Operand),
}

fn operand(g: &Graph, node: NodeId, e: &E, rank: usize) -> Option<Operand> {
    match &e.kind {
        ExprKind::Const(s) => Some(Operand::Scalar(s.as_f64())),
        ExprKind::Load { input, index } => {
            let v = *g.node(node).inputs.get(*input as usize)?;
            if let Some(t) = g.const_value(v)
                && t.len() == 1
            {
                return Some(Operand::Scalar(t.to_f64s()[0]));
            }
            // The whole operand, element for element.
            let same_shape = g.value_type(v).shape == g.node(node).outputs[0].shape;
            let identity = index.len() == rank
                && index
                    .iter()
                    .enumerate()
                    .all(|(k, ix)| matches!(ix.kind, ExprKind::Var(j) if j as usize == k));
            (same_shape && identity).then_some(Operand::Value(v))
        }
        _ => None,
    }
}

fn simple(g: &Graph, v: ValueId) -> Option<Simple> {
    let n = g.node(v.node);
    let Op::Map(m) = &n.op else { return None };
    let rank = n.outputs[0].shape.len();
    match &m.body.kind {
        ExprKind::Unary(op, a) => Some(Simple::Unary(*op, operand(g, v.node, a, rank)?)),
        ExprKind::Binary(op, a, b) => Some(Simple::Binary(
            *op,
            operand(g, v.node, a, rank)?,
            operand(g, v.node, b, rank)?,
        )),
        _ => None,
    }
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs()
}

/// `v = op(value, c)` (either order for Mul and Add) with `c ≈ want`: the value.
fn with_scalar(g: &Graph, v: ValueId, op: BinOp, want: f64) -> Option<ValueId> {
    let Some(Simple::Binary(o, a, b)) = simple(g, v) else {
        return None;
    };
    if o != op {
        return None;
    }
    match (a, b) {
        (Operand::Value(x), Operand::Scalar(c)) if near(c, want) => Some(x),
        (Operand::Scalar(c), Operand::Value(x))
            if near(c, want) && matches!(op, BinOp::Mul | BinOp::Add) =>
        {
            Some(x)
        }
        _ => None,
    }
}

/// `v = 1 + erf(x/√2)` (or `x·(1/√2)`): x.
fn one_plus_erf(g: &Graph, v: ValueId) -> Option<ValueId> {
    let e = with_scalar(g, v, BinOp::Add, 1.0)?;
    let Some(Simple::Unary(UnOp::Erf, Operand::Value(d))) = simple(g, e) else {
        return None;
    };
    with_scalar(g, d, BinOp::Div, std::f64::consts::SQRT_2)
        .or_else(|| with_scalar(g, d, BinOp::Mul, std::f64::consts::FRAC_1_SQRT_2))
}

/// The x of `v = gelu(x)` written out: `(x·½)·A`, `(x·A)·½` or `x·(A·½)` with
/// `A = 1 + erf(x/√2)`, any operand order.
fn gelu_input(g: &Graph, v: ValueId) -> Option<ValueId> {
    let Some(Simple::Binary(BinOp::Mul, a, b)) = simple(g, v) else {
        return None;
    };
    for (p, q) in [(a, b), (b, a)] {
        match (p, q) {
            (Operand::Value(p), Operand::Value(q)) => {
                // (x·½)·A
                if let Some(x) = with_scalar(g, p, BinOp::Mul, 0.5)
                    && one_plus_erf(g, q) == Some(x)
                {
                    return Some(x);
                }
                // x·(A·½)
                if let Some(a) = with_scalar(g, q, BinOp::Mul, 0.5)
                    && one_plus_erf(g, a) == Some(p)
                {
                    return Some(p);
                }
            }
            // (x·A)·½
            (Operand::Value(m), Operand::Scalar(c)) if near(c, 0.5) => {
                if let Some(Simple::Binary(BinOp::Mul, Operand::Value(u), Operand::Value(w))) =
                    simple(g, m)
                {
                    for (x, a) in [(u, w), (w, u)] {
                        if one_plus_erf(g, a) == Some(x) {
                            return Some(x);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    None
}

pub fn run(g: &mut Graph) {
    for id in g.topo_order() {
        if !g.contains(id) || !matches!(g.node(id).op, Op::Map(_)) {
            continue;
        }
        let y = id.out(0);
        let ty = g.value_type(y).clone();
        if ty.dtype != DType::F32 || crate::ir::dim::known_dims(&ty.shape).is_none() {
            continue;
        }
        let Some(x) = gelu_input(g, y) else { continue };
        if g.value_type(x) != &ty {
            continue;
        }
        let n = g.node(id);
        let (name, origin) = (n.name.clone(), n.origin.clone());
        let gelu = g.add_node(
            name,
            Op::kernel(crate::kernels::Gelu),
            vec![x],
            vec![TypeInfo::new(ty.dtype, ty.shape)],
            origin,
        );
        g.replace_uses(y, gelu.out(0));
    }
}
