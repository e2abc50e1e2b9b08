//! Reference evaluation of core ops on constant tensors.
//!
//! Used for constant folding and as the oracle that generated code is tested against.
//! Expressions are flattened into a register program once and then run per element.

use super::dtype::DType;
use super::eval::{eval_binary, eval_unary};
use super::expr::{E, ExprKind};
use super::graph::{ConvOp, MatMulOp, ReduceKind, ReduceOp, ScatterOp};
use super::tensor::{Scalar, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, PartialEq)]
pub enum EvalError {
    /// A checked index was out of range (the generated code returns `ONNXC_ERR_INDEX`).
    IndexOutOfRange { index: i64, bound: i64 },
    /// A runtime kernel folding a constant refused the parameters the compiler gave it
    /// (`onnxc_runtime::params`: the kernel returned `ONNXC_ERR_PARAMS`): a compiler bug.
    KernelParams {
        kernel: &'static str,
        reason: &'static str,
    },
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::IndexOutOfRange { index, bound } => {
                write!(f, "index {index} is out of range [-{bound}, {bound})")
            }
            EvalError::KernelParams { kernel, reason } => write!(
                f,
                "internal error: the runtime kernel {kernel} refused the parameters onnxc \
                 compiled for it ({reason})"
            ),
        }
    }
}

#[derive(PartialEq, Eq, Hash)]
enum Inst {
    Var(u32),
    Const(Scalar),
    Load { input: u32, index: Vec<usize> },
    Unary(super::expr::UnOp, DType, usize),
    Binary(super::expr::BinOp, DType, usize, usize),
    Select(usize, usize, usize),
    Cast(DType, usize),
    Check(usize, i64),
}

/// An expression flattened into registers in dependency order.
#[derive(PartialEq, Eq, Hash)]
pub struct Program {
    insts: Vec<Inst>,
}

impl Program {
    pub fn new(e: &E) -> Program {
        let mut p = Program { insts: Vec::new() };
        let mut memo = HashMap::new();
        p.add(e, &mut memo);
        p
    }

    fn add(&mut self, e: &E, memo: &mut HashMap<*const super::expr::Expr, usize>) -> usize {
        if let Some(&r) = memo.get(&Arc::as_ptr(e)) {
            return r;
        }
        let inst = match &e.kind {
            ExprKind::Var(v) => Inst::Var(*v),
            ExprKind::Const(c) => Inst::Const(*c),
            ExprKind::Load { input, index } => {
                let index = index.iter().map(|x| self.add(x, memo)).collect();
                Inst::Load {
                    input: *input,
                    index,
                }
            }
            ExprKind::Unary(op, a) => {
                let a_r = self.add(a, memo);
                Inst::Unary(*op, a.dtype, a_r)
            }
            ExprKind::Binary(op, a, b) => {
                let ar = self.add(a, memo);
                let br = self.add(b, memo);
                Inst::Binary(*op, a.dtype, ar, br)
            }
            ExprKind::Select(c, a, b) => {
                let cr = self.add(c, memo);
                let ar = self.add(a, memo);
                let br = self.add(b, memo);
                Inst::Select(cr, ar, br)
            }
            ExprKind::Cast(a) => {
                let ar = self.add(a, memo);
                Inst::Cast(e.dtype, ar)
            }
            ExprKind::CheckIndex { index, bound } => {
                let r = self.add(index, memo);
                Inst::Check(r, *bound)
            }
        };
        self.insts.push(inst);
        let r = self.insts.len() - 1;
        memo.insert(Arc::as_ptr(e), r);
        r
    }

    /// Evaluates with the given variable values; `inputs[k]` with its row-major strides.
    pub fn run(
        &self,
        vars: &[i64],
        inputs: &[&Tensor],
        strides: &[Vec<i64>],
        regs: &mut Vec<Scalar>,
    ) -> Result<Scalar, EvalError> {
        regs.clear();
        for inst in &self.insts {
            let v = match inst {
                Inst::Var(k) => Scalar::I(vars[*k as usize]),
                Inst::Const(c) => *c,
                Inst::Load { input, index } => {
                    let t = inputs[*input as usize];
                    let st = &strides[*input as usize];
                    let mut off = 0i64;
                    for (d, r) in index.iter().enumerate() {
                        off += regs[*r].as_i64() * st[d];
                    }
                    t.get(off as usize)
                }
                Inst::Unary(op, dt, a) => eval_unary(*op, *dt, regs[*a]).unwrap_or(Scalar::I(0)),
                Inst::Binary(op, dt, a, b) => eval_binary(*op, *dt, regs[*a], regs[*b]),
                Inst::Select(c, a, b) => {
                    if regs[*c].as_bool() {
                        regs[*a]
                    } else {
                        regs[*b]
                    }
                }
                Inst::Cast(to, a) => regs[*a].cast(*to),
                Inst::Check(a, bound) => {
                    let x = regs[*a].as_i64();
                    let y = if x < 0 { x + bound } else { x };
                    if y < 0 || y >= *bound {
                        return Err(EvalError::IndexOutOfRange {
                            index: x,
                            bound: *bound,
                        });
                    }
                    Scalar::I(y)
                }
            };
            regs.push(v);
        }
        Ok(*regs.last().expect("program has at least one instruction"))
    }
}

pub fn strides_of(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f` with each multi-index of `shape` in row-major order.
fn for_each_index(
    shape: &[i64],
    mut f: impl FnMut(&[i64]) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut idx = vec![0i64; shape.len()];
    loop {
        f(&idx)?;
        let mut d = shape.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub fn eval_map(
    body: &E,
    inputs: &[&Tensor],
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, EvalError> {
    if let ExprKind::Const(c) = body.kind {
        return Ok(Tensor::filled(dtype, shape.to_vec(), c));
    }
    let prog = Program::new(body);
    if !MEMO.with(|m| m.borrow().is_some()) {
        return run_map(&prog, inputs, dtype, shape);
    }
    let key = MapKey {
        prog,
        inputs: (inputs.iter())
            .map(|t| (t.dtype, t.shape.clone(), t.data.clone()))
            .collect(),
        dtype,
        shape: shape.to_vec(),
    };
    let known = MEMO.with(|m| m.borrow().as_ref().and_then(|c| c.get(&key).cloned()));
    if let Some(t) = known {
        return Ok(t);
    }
    let t = run_map(&key.prog, inputs, dtype, shape)?;
    MEMO.with(|m| {
        if let Some(c) = m.borrow_mut().as_mut() {
            c.insert(key, t.clone());
        }
    });
    Ok(t)
}

/// A map `eval_map` computed, exactly: its flattened body, its inputs, and its result's
/// type and shape.
#[derive(PartialEq, Eq, Hash)]
struct MapKey {
    prog: Program,
    inputs: Vec<(DType, Vec<i64>, Arc<Vec<u8>>)>,
    dtype: DType,
    shape: Vec<i64>,
}

thread_local! {
    /// The maps `eval_map` computed on this thread while a `MemoScope` is open.
    static MEMO: std::cell::RefCell<Option<HashMap<MapKey, Tensor>>> =
        const { std::cell::RefCell::new(None) };
}

/// While alive (the outermost on its thread), `eval_map` keeps the maps it computes on this
/// thread and gives a kept one's result again (sharing its data) instead of computing it:
/// a compile that lowers a model at many values of a run-time dim (`loops::dims`) folds the
/// same dequantized weights and tables at each. Results are exact (the key is the whole
/// body and every input byte), and dropped with the outermost scope.
pub struct MemoScope {
    outer: bool,
}

/// Opens a `MemoScope` on this thread.
pub fn memo_scope() -> MemoScope {
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let outer = m.is_none();
        if outer {
            *m = Some(HashMap::new());
        }
        MemoScope { outer }
    })
}

impl Drop for MemoScope {
    fn drop(&mut self) {
        if self.outer {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
}

/// `eval_map` of the flattened body `prog`.
fn run_map(
    prog: &Program,
    inputs: &[&Tensor],
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, EvalError> {
    let n: i64 = shape.iter().product();
    let mut data = Vec::with_capacity(n as usize * dtype.size());
    let strides: Vec<Vec<i64>> = inputs.iter().map(|t| strides_of(&t.shape)).collect();
    let mut regs = Vec::new();
    for_each_index(shape, |idx| {
        let v = prog.run(idx, inputs, &strides, &mut regs)?;
        v.write(dtype, &mut data);
        Ok(())
    })?;
    Ok(Tensor::new(dtype, shape.to_vec(), data))
}

/// Initial accumulator of a reduction over values of type `dt`.
pub fn reduce_init(kind: ReduceKind, dt: DType) -> Scalar {
    match kind {
        ReduceKind::Sum => Scalar::zero(dt),
        ReduceKind::Prod => Scalar::one(dt),
        ReduceKind::Max | ReduceKind::ArgMax { .. } => lowest(dt),
        ReduceKind::Min | ReduceKind::ArgMin { .. } => highest(dt),
    }
}

pub fn lowest(dt: DType) -> Scalar {
    match dt {
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => Scalar::F(f64::NEG_INFINITY),
        DType::I4 | DType::I2 => Scalar::I(dt.int_range().map_or(0, |r| r.0)),
        DType::U4 | DType::U2 => Scalar::U(0),
        DType::Bool => Scalar::B(false),
        DType::I8 => Scalar::I(i8::MIN as i64),
        DType::I16 => Scalar::I(i16::MIN as i64),
        DType::I32 => Scalar::I(i32::MIN as i64),
        DType::I64 => Scalar::I(i64::MIN),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Str => Scalar::U(0),
    }
}

pub fn highest(dt: DType) -> Scalar {
    match dt {
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => Scalar::F(f64::INFINITY),
        DType::I4 | DType::I2 | DType::U4 | DType::U2 => {
            Scalar::I(dt.int_range().map_or(0, |r| r.1)).cast(dt)
        }
        DType::Bool => Scalar::B(true),
        DType::I8 => Scalar::I(i8::MAX as i64),
        DType::I16 => Scalar::I(i16::MAX as i64),
        DType::I32 => Scalar::I(i32::MAX as i64),
        DType::I64 => Scalar::I(i64::MAX),
        DType::U8 => Scalar::U(u8::MAX as u64),
        DType::U16 => Scalar::U(u16::MAX as u64),
        DType::U32 => Scalar::U(u32::MAX as u64),
        DType::U64 | DType::Str => Scalar::U(u64::MAX),
    }
}

pub fn eval_reduce(
    r: &ReduceOp,
    inputs: &[&Tensor],
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, EvalError> {
    let n: i64 = shape.iter().product();
    let mut data = Vec::with_capacity(n as usize * dtype.size());
    let prog = Program::new(&r.body);
    let body_dt = r.body.dtype;
    let strides: Vec<Vec<i64>> = inputs.iter().map(|t| strides_of(&t.shape)).collect();
    let mut regs = Vec::new();
    let rank = shape.len();
    let mut vars = vec![0i64; rank + r.extents.len()];
    for_each_index(shape, |idx| {
        vars[..rank].copy_from_slice(idx);
        let mut acc = reduce_init(r.kind, body_dt);
        let mut arg: i64 = 0;
        let mut first = true;
        for_each_index(&r.extents, |ridx| {
            vars[rank..].copy_from_slice(ridx);
            let v = prog.run(&vars, inputs, &strides, &mut regs)?;
            match r.kind {
                ReduceKind::Sum => acc = eval_binary(super::expr::BinOp::Add, body_dt, acc, v),
                ReduceKind::Prod => acc = eval_binary(super::expr::BinOp::Mul, body_dt, acc, v),
                ReduceKind::Max => acc = eval_binary(super::expr::BinOp::Max, body_dt, acc, v),
                ReduceKind::Min => acc = eval_binary(super::expr::BinOp::Min, body_dt, acc, v),
                ReduceKind::ArgMax { select_last } | ReduceKind::ArgMin { select_last } => {
                    let is_max = matches!(r.kind, ReduceKind::ArgMax { .. });
                    let better = if is_max {
                        if select_last {
                            v.as_f64() >= acc.as_f64()
                        } else {
                            v.as_f64() > acc.as_f64()
                        }
                    } else if select_last {
                        v.as_f64() <= acc.as_f64()
                    } else {
                        v.as_f64() < acc.as_f64()
                    };
                    if first || better {
                        acc = v;
                        arg = ridx[0];
                    }
                    first = false;
                }
            }
            Ok(())
        })?;
        let out = match r.kind {
            ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. } => Scalar::I(arg),
            _ => acc,
        };
        out.write(dtype, &mut data);
        Ok(())
    })?;
    Ok(Tensor::new(dtype, shape.to_vec(), data))
}

/// Batched matmul with numpy broadcasting of the batch dims, accumulating in f64/i64.
pub fn eval_matmul(m: &MatMulOp, a: &Tensor, b: &Tensor, dtype: DType, shape: &[i64]) -> Tensor {
    let ra = a.shape.len();
    let rb = b.shape.len();
    let (am, ak) = if m.trans_a {
        (a.shape[ra - 1], a.shape[ra - 2])
    } else {
        (a.shape[ra - 2], a.shape[ra - 1])
    };
    let bn = if m.trans_b {
        b.shape[rb - 2]
    } else {
        b.shape[rb - 1]
    };
    let rank = shape.len();
    let batch = &shape[..rank - 2];
    let sa = strides_of(&a.shape);
    let sb = strides_of(&b.shape);
    let mut data = Vec::with_capacity(shape.iter().product::<i64>() as usize * dtype.size());
    let float = dtype.is_float();
    let _ = for_each_index(batch, |bi| {
        let off = |t: &Tensor, s: &[i64]| -> i64 {
            let tr = t.shape.len();
            let nb = tr - 2;
            let mut o = 0;
            for d in 0..nb {
                let od = batch.len() - nb + d;
                let i = if t.shape[d] == 1 { 0 } else { bi[od] };
                o += i * s[d];
            }
            o
        };
        let (oa, ob) = (off(a, &sa), off(b, &sb));
        for i in 0..am {
            for j in 0..bn {
                let mut accf = 0f64;
                let mut acci = 0i64;
                for k in 0..ak {
                    let ia = oa
                        + if m.trans_a {
                            k * sa[ra - 2] + i
                        } else {
                            i * sa[ra - 2] + k
                        };
                    let ib = ob
                        + if m.trans_b {
                            j * sb[rb - 2] + k
                        } else {
                            k * sb[rb - 2] + j
                        };
                    let (x, y) = (a.get(ia as usize), b.get(ib as usize));
                    if float {
                        accf += x.as_f64() * y.as_f64();
                    } else {
                        acci = acci.wrapping_add(x.as_i64().wrapping_mul(y.as_i64()));
                    }
                }
                let v = if float {
                    Scalar::F(accf)
                } else {
                    Scalar::I(acci)
                };
                v.write(dtype, &mut data);
            }
        }
        Ok(())
    });
    Tensor::new(dtype, shape.to_vec(), data)
}

/// Direct convolution (f64 accumulation) for folding and as a test oracle.
pub fn eval_conv(
    c: &ConvOp,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    dtype: DType,
    shape: &[i64],
) -> Tensor {
    let nsp = x.shape.len() - 2;
    let (n, ci) = (x.shape[0], x.shape[1]);
    let co = w.shape[0];
    let cig = ci / c.group;
    let cog = co / c.group;
    let sx = strides_of(&x.shape);
    let sw = strides_of(&w.shape);
    let ksp = &w.shape[2..];
    let osp = &shape[2..];
    let mut data = Vec::with_capacity(shape.iter().product::<i64>() as usize * dtype.size());
    for b in 0..n {
        for oc in 0..co {
            let g = oc / cog;
            let _ = for_each_index(osp, |opos| {
                let mut acc = bias.map_or(0.0, |t| t.get(oc as usize).as_f64());
                for icg in 0..cig {
                    let ic = g * cig + icg;
                    let _ = for_each_index(ksp, |kpos| {
                        let mut xo = b * sx[0] + ic * sx[1];
                        for d in 0..nsp {
                            let p =
                                opos[d] * c.strides[d] + kpos[d] * c.dilations[d] - c.pads_begin[d];
                            if p < 0 || p >= x.shape[2 + d] {
                                return Ok(());
                            }
                            xo += p * sx[2 + d];
                        }
                        let mut wo = oc * sw[0] + icg * sw[1];
                        for d in 0..nsp {
                            wo += kpos[d] * sw[2 + d];
                        }
                        acc += x.get(xo as usize).as_f64() * w.get(wo as usize).as_f64();
                        Ok(())
                    });
                }
                Scalar::F(acc).write(dtype, &mut data);
                Ok(())
            });
        }
    }
    let _ = osp;
    Tensor::new(dtype, shape.to_vec(), data)
}

/// Concatenation along `axis`.
pub fn eval_concat(axis: usize, inputs: &[&Tensor], dtype: DType, shape: &[i64]) -> Tensor {
    let outer: i64 = shape[..axis].iter().product();
    let es = dtype.size();
    let mut data = Vec::with_capacity(shape.iter().product::<i64>() as usize * es);
    for o in 0..outer as usize {
        for t in inputs {
            let chunk: usize = t.shape[axis..].iter().product::<i64>() as usize * es;
            data.extend_from_slice(&t.data[o * chunk..(o + 1) * chunk]);
        }
    }
    Tensor::new(dtype, shape.to_vec(), data)
}

/// Scatter: the base, then each update combined at its index (row-major update order).
pub fn eval_scatter(
    sc: &ScatterOp,
    inputs: &[&Tensor],
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, EvalError> {
    let mut out: Vec<Scalar> = inputs[0].scalars();
    let strides: Vec<Vec<i64>> = inputs.iter().map(|t| strides_of(&t.shape)).collect();
    let ostrides = strides_of(shape);
    let progs: Vec<Program> = sc.index.iter().map(Program::new).collect();
    let vprog = Program::new(&sc.value);
    let mut regs = Vec::new();
    for_each_index(&sc.extents, |u| {
        let mut off = 0i64;
        for (d, p) in progs.iter().enumerate() {
            off += p.run(u, inputs, &strides, &mut regs)?.as_i64() * ostrides[d];
        }
        let v = vprog.run(u, inputs, &strides, &mut regs)?;
        let slot = &mut out[off as usize];
        *slot = match sc.kind {
            None => v,
            Some(ReduceKind::Sum) => eval_binary(super::expr::BinOp::Add, dtype, *slot, v),
            Some(ReduceKind::Prod) => eval_binary(super::expr::BinOp::Mul, dtype, *slot, v),
            Some(ReduceKind::Max) => eval_binary(super::expr::BinOp::Max, dtype, *slot, v),
            Some(ReduceKind::Min) => eval_binary(super::expr::BinOp::Min, dtype, *slot, v),
            Some(_) => v,
        };
        Ok(())
    })?;
    Ok(Tensor::from_scalars(dtype, shape.to_vec(), &out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::expr;

    /// `x[i] · 2 + 1` over four i64 elements of input 0.
    fn twice_plus_one(x: &Tensor) -> Result<Tensor, EvalError> {
        let xi = expr::load(DType::I64, 0, vec![expr::var(0)]);
        let body = expr::add(expr::mul(xi, expr::i(2)), expr::i(1));
        eval_map(&body, &[x], DType::I64, &[4])
    }

    #[test]
    fn a_memo_scope_computes_each_map_once_and_exactly() {
        let x = Tensor::from_i64s(vec![4], &[1, 2, 3, 4]);
        // Another tensor of the same bytes: the key is the data, not the allocation.
        let same = Tensor::from_i64s(vec![4], &[1, 2, 3, 4]);
        let other = Tensor::from_i64s(vec![4], &[1, 2, 3, 5]);
        let outside = (twice_plus_one(&x).unwrap(), twice_plus_one(&x).unwrap());
        assert!(!Arc::ptr_eq(&outside.0.data, &outside.1.data));
        let scope = memo_scope();
        let a = twice_plus_one(&x).unwrap();
        let b = twice_plus_one(&same).unwrap();
        assert!(
            Arc::ptr_eq(&a.data, &b.data),
            "the second map is the first's"
        );
        let c = twice_plus_one(&other).unwrap();
        assert_eq!(a, outside.0);
        assert_eq!(c, Tensor::from_i64s(vec![4], &[3, 5, 7, 11]));
        // A nested scope shares the outer one's maps; the outer one's end drops them.
        drop(memo_scope());
        assert!(Arc::ptr_eq(&twice_plus_one(&x).unwrap().data, &a.data));
        drop(scope);
        assert!(!Arc::ptr_eq(&twice_plus_one(&x).unwrap().data, &a.data));
    }
}
