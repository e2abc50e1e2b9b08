//! Small constant tables that the compiler folded from the dims (a shape, the declared output
//! shape of a reduction by run-time axes, a short Range) and that steps read element by
//! element: in a program lowered at one value of a run-time dim each is a constant buffer
//! in the object, different at every value, so the programs would not be one. Each load of
//! such a table becomes a choice among its elements as literals of the code, which
//! `generalize_dims` fits as formulas over the dims like any other constant of the code.

use crate::ir::DType;
use crate::ir::expr::{self, BinOp, E, Expr, ExprKind};
use crate::ir::tensor::Scalar;
use crate::loops::{Arg, BufId, Loc, Program, Stmt, for_each_expr, map_exprs};
use std::collections::HashSet;

/// Most elements of a table read as literals: a load becomes a chain of that many
/// comparisons.
const MAX_ELEMENTS: i64 = 16;

/// A constant table that differs between the programs, as the code reads it instead.
enum Table {
    /// At most `MAX_ELEMENTS` elements of the same count in every program, read by loads
    /// only (each program's own).
    Elements(Vec<Scalar>),
    /// Every element the same value in every program, whatever the count (an identity a
    /// reduction's output starts from): loads read the literal, copies become fills.
    Splat(Scalar),
}

/// `programs` (lowered at several values of the run-time dims) with every constant table
/// that differs between them and that the code can read as literals (`Table`) so read;
/// None when there is no such table.
pub(super) fn inline_tables(programs: &[&Program]) -> Option<Vec<Program>> {
    let last = programs.last()?;
    let n = last.buffers.len();
    if programs.iter().any(|p| p.buffers.len() != n) {
        return None;
    }
    let tables: Vec<BufId> = (0..n)
        .filter(|&k| {
            let bs: Vec<_> = programs.iter().map(|p| &p.buffers[k]).collect();
            let dt = bs[0].dtype;
            let exact = matches!(dt, DType::F32 | DType::F64 | DType::Bool)
                || (dt.is_int() && !dt.is_narrow());
            let data: Vec<Option<&[u8]>> = (bs.iter())
                .map(|b| match &b.loc {
                    Loc::Const(d)
                        if b.offset == 0
                            && b.offset_at.is_none()
                            && b.len >= 1
                            && d.len() >= b.len as usize * dt.size() =>
                    {
                        Some(&d[..b.len as usize * dt.size()])
                    }
                    _ => None,
                })
                .collect();
            exact
                && bs.iter().all(|b| b.dtype == dt)
                && data.iter().all(Option::is_some)
                && data.iter().any(|d| *d != data[0])
        })
        .map(|k| k as BufId)
        .collect();
    let kinds: Vec<(BufId, Vec<Table>)> = tables
        .into_iter()
        .filter_map(|k| {
            let per: Vec<Table> = programs
                .iter()
                .map(|p| table(p, k))
                .collect::<Option<_>>()?;
            let first = |p: &Program| {
                let b = &p.buffers[k as usize];
                match &b.loc {
                    Loc::Const(d) => d[..b.dtype.size()].to_vec(),
                    _ => unreachable!("a table is a constant"),
                }
            };
            let same_splat = per.iter().all(|t| matches!(t, Table::Splat(_)))
                && programs.iter().all(|p| first(p) == first(last));
            let loaded =
                (programs.iter()).all(|p| p.funcs.iter().all(|f| reads_only(&f.body, k, false)));
            let copied =
                (programs.iter()).all(|p| p.funcs.iter().all(|f| reads_only(&f.body, k, true)));
            if same_splat && copied {
                return Some((k, per));
            }
            let elements = (programs.iter()).all(|p| p.buffers[k as usize].len <= MAX_ELEMENTS)
                && (programs.iter())
                    .all(|p| p.buffers[k as usize].len == last.buffers[k as usize].len);
            (elements && loaded).then(|| {
                let per = (programs.iter())
                    .map(|p| Table::Elements(values(p, k)))
                    .collect();
                (k, per)
            })
        })
        .collect();
    if kinds.is_empty() {
        return None;
    }
    Some(
        programs
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let mut p = (*p).clone();
                let mine: Vec<(BufId, DType, &Table)> = (kinds.iter())
                    .map(|(k, per)| (*k, p.buffers[*k as usize].dtype, &per[j]))
                    .collect();
                for f in &mut p.funcs {
                    let fresh = free_var(&f.body);
                    fills(&mut f.body, &mine, fresh);
                    map_exprs(&mut f.body, &mut |e| literals(e, &mine));
                }
                p
            })
            .collect(),
    )
}

/// The elements of constant buffer `k` of `p`.
fn values(p: &Program, k: BufId) -> Vec<Scalar> {
    let b = &p.buffers[k as usize];
    let Loc::Const(d) = &b.loc else {
        unreachable!("a table is a constant")
    };
    let size = b.dtype.size();
    (0..b.len as usize)
        .map(|i| Scalar::read(b.dtype, &d[i * size..]))
        .collect()
}

/// Table `k` of `p` as a splat when its elements are all one value, else its elements.
fn table(p: &Program, k: BufId) -> Option<Table> {
    let b = &p.buffers[k as usize];
    let Loc::Const(d) = &b.loc else {
        return None;
    };
    let size = b.dtype.size();
    let bytes = &d[..b.len as usize * size];
    let first = &bytes[..size];
    if bytes.chunks_exact(size).all(|c| c == first) {
        Some(Table::Splat(Scalar::read(b.dtype, first)))
    } else if b.len <= MAX_ELEMENTS {
        Some(Table::Elements(values(p, k)))
    } else {
        None
    }
}

/// Whether `body` only reads buffer `k`: by loads, and with `copies` as a copy's source
/// too (no store, copy into it or kernel pointer).
fn reads_only(body: &[Stmt], k: BufId, copies: bool) -> bool {
    body.iter().all(|s| match s {
        Stmt::For { body, .. } => reads_only(body, k, copies),
        Stmt::Store { buf, .. } | Stmt::Reduce { buf, .. } => *buf != k,
        Stmt::Copy { dst, src, .. } => *dst != k && (copies || *src != k),
        Stmt::Call { args, .. } => args
            .iter()
            .all(|a| !matches!(a, Arg::Ptr { buf, .. } if *buf == k)),
        Stmt::Check { .. } => true,
    })
}

/// A loop variable no loop of `body` uses, nor any expression.
fn free_var(body: &[Stmt]) -> u32 {
    let mut top = 0u32;
    let mut see = |v: u32| {
        if !crate::loops::is_dim(v) {
            top = top.max(v + 1);
        }
    };
    fn walk(body: &[Stmt], see: &mut dyn FnMut(u32)) {
        for s in body {
            match s {
                Stmt::For { var, body, .. } => {
                    see(*var);
                    walk(body, see);
                }
                Stmt::Reduce { loops, .. } => loops.iter().for_each(|(v, _)| see(*v)),
                _ => {}
            }
        }
    }
    walk(body, &mut see);
    fn vars(e: &E, see: &mut dyn FnMut(u32), seen: &mut HashSet<*const Expr>) {
        if !seen.insert(std::sync::Arc::as_ptr(e)) {
            return;
        }
        match &e.kind {
            ExprKind::Var(v) => see(*v),
            _ => (e.children().into_iter()).for_each(|c| vars(c, see, seen)),
        }
    }
    let mut seen = HashSet::new();
    for_each_expr(body, &mut |e| vars(e, &mut see, &mut seen));
    top
}

/// `body` with each copy from a splat table of `tables` made a loop storing its value.
fn fills(body: &mut [Stmt], tables: &[(BufId, DType, &Table)], fresh: u32) {
    for s in body.iter_mut() {
        match s {
            Stmt::For { body, .. } => fills(body, tables, fresh),
            Stmt::Copy {
                dst,
                dst_offset,
                src,
                elems,
                ..
            } => {
                let Some(&(_, dtype, Table::Splat(v))) = tables.iter().find(|(k, ..)| k == src)
                else {
                    continue;
                };
                *s = Stmt::For {
                    var: fresh,
                    extent: elems.clone(),
                    vector: true,
                    body: vec![Stmt::Store {
                        buf: *dst,
                        offset: expr::add(dst_offset.clone(), expr::var(fresh)),
                        value: expr::konst(dtype, *v),
                    }],
                };
            }
            _ => {}
        }
    }
}

/// `e` with each load of a table of `tables` read as literals: a splat's value, or a
/// choice among the elements, `i == 0 ? t0 : i == 1 ? t1 : … : t(n-1)` (an index is in
/// bounds, so the last element needs no comparison).
fn literals(e: &E, tables: &[(BufId, DType, &Table)]) -> E {
    expr::rewrite(e, &mut |x| {
        let ExprKind::Load { input, index } = &x.kind else {
            return None;
        };
        let (_, _, table) = tables.iter().find(|(k, ..)| k == input)?;
        match table {
            // An index that may fail the run is still evaluated (its check kept).
            Table::Splat(v) if !index.iter().any(expr::can_fail) => Some(expr::konst(x.dtype, *v)),
            Table::Splat(_) => None,
            Table::Elements(values) => {
                let [i] = index.as_slice() else {
                    return None;
                };
                let i = literals(i, tables);
                let (last, rest) = values.split_last()?;
                let chain = (rest.iter().enumerate().rev()).fold(
                    expr::konst(x.dtype, *last),
                    |acc, (k, v)| {
                        expr::select(
                            expr::binary(BinOp::Eq, i.clone(), expr::i(k as i64)),
                            expr::konst(x.dtype, *v),
                            acc,
                        )
                    },
                );
                Some(chain)
            }
        }
    })
}
