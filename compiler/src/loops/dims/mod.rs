//! One program for every value of a run-time dim, from programs lowered at several values.
//!
//! The stages before this one know dims as integers only. A model whose dim `seq` is to be
//! taken at run time is lowered at a few values of it (`PROBES`, and its bound); if the
//! programs differ only in integer constants (loop extents, strides and offsets inside
//! index expressions, kernel arguments and parameters, buffer sizes) and each such constant
//! is the same polynomial of degree two at most in `seq` at every value, the program with
//! those polynomials over the run-time value (`DIM_VAR`) computes the model at any value.
//! Layout is the bound's: every buffer, the arena and the workspace are planned at the bound,
//! where each size is largest (checked), so a run at a smaller value uses a prefix of each.
//!
//! Anything else that differs — a decision taken by size (a kernel, a fusion, a layout), a
//! constant table, a dim that is not a polynomial (`seq / 2`) — makes `generalize` fail,
//! saying where; the caller then asks for the dim to be fixed at compile time.

use super::{Arg, Buffer, Count, Func, IoDesc, Loc, Other, Program, RunDim, RunTimeDim, Stmt};
use crate::ir::DType;
use crate::ir::expr::{self, E, Expr, ExprKind};
use crate::ir::tensor::Scalar;
use std::sync::Arc;

mod forms;
mod tables;
use forms::{Fit, Form, Poly};

/// Part of `generalize`'s error when a constant is no polynomial of a step of the dims.
pub const NOT_POLYNOMIAL: &str = "not a polynomial of the dim";

/// Part of `generalize`'s error when a float constant that is no integer nor one over an
/// integer (a scale folded with a count of the dims) differs with the dims.
pub const FOLDED_SCALE: &str = "neither an integer nor one over an integer";

/// Part of `generalize`'s error when the programs have constants more or fewer (a table
/// folded at some values only).
pub const CONSTANTS_DIFFER: &str = "its constants differ in number";

/// Part of `generalize`'s error when the programs take different steps.
pub const STEPS_DIFFER: &str = "its steps differ";

/// `generalize`'s error when a constant table the compiler folded differs with the dims.
pub const FOLDED_TABLE: &str =
    "a constant it computes from the dims (a folded Range, Shape or table) differs with them";

/// Values of the run-time dim a model is lowered at besides its bound, when they lie in
/// its range: three to fit each constant's polynomial and the rest to check it. Far from
/// the powers of two and from one another, so that no size-based choice or coincidence of
/// two dims is likely to hold at all of them and not in general; and they take every
/// remainder modulo 2, 3 and 4 (37, 42, 47, 28: 1, 2, 3, 0 modulo 4), so that a size that
/// is a polynomial only on one remainder class (`4 · (seq / 4)` is `seq - 1` at 37, 41, 53
/// and 29, all 1 modulo 4) is not taken for one.
pub const PROBES: [i64; 4] = [37, 42, 47, 28];

/// The fewest values a program is checked at (three to fit, two to check).
const MIN_PROBES: usize = PROBES.len() + 1;

/// Smallest bound a run-time dim may have: below it there are too few probe values.
pub const MIN_BOUND: i64 = 16;

/// The values to lower a model at for a run-time dim in `least..=bound`: `PROBES` when
/// they lie in the range, else four values spread over it (`b`, `b + 5`,
/// `b + 10`, `b + 15`: each remainder modulo 2, 3 and 4 again), or in a range narrower
/// than 16 the four values below the bound; then the bound itself. None when fewer than
/// four values lie below the bound.
pub fn probe_sizes(least: i64, bound: i64) -> Option<Vec<i64>> {
    let least = least.max(1);
    let mut v = if PROBES.iter().all(|p| (least..bound).contains(p)) {
        PROBES.to_vec()
    } else if bound - least >= 16 {
        // Near the least value (smaller programs), clear of it.
        let b = least + ((bound - least - 16) / 2).min(9);
        vec![b, b + 5, b + 10, b + 15]
    } else if bound - least >= 4 {
        (bound - 4..bound).collect()
    } else {
        return None;
    };
    v.push(bound);
    Some(v)
}

/// The programs for each value of `sizes` (the last the bound), as one program taking run-time
/// dim `name` (`Program::run_dims`) at any value from `least` (the model's least valid value)
/// to the bound, or why they are not one.
pub fn generalize(
    name: &str,
    least: i64,
    sizes: &[i64],
    programs: &[&Program],
) -> Result<Program, String> {
    let points: Vec<Vec<i64>> = sizes.iter().map(|&s| vec![s]).collect();
    generalize_dims(&[name], &[least], &points, programs)
}

/// `generalize` for one or two run-time dims `names`: the programs lowered at `points` (a
/// value of each dim; the last the bounds), as one program taking the dims at any values
/// from `least` to the bounds.
pub fn generalize_dims(
    names: &[&str],
    least: &[i64],
    points: &[Vec<i64>],
    programs: &[&Program],
) -> Result<Program, String> {
    assert!(points.len() >= MIN_PROBES && points.len() == programs.len());
    assert!((1..=2).contains(&names.len()) && least.len() == names.len());
    let name = names.join("' and '");
    let name = name.as_str();
    let u = Unify {
        points,
        least,
        bound: points.last().expect("probes"),
    };
    // Small tables folded from the dims, read as literals (which fit formulas).
    let inlined = tables::inline_tables(programs);
    let ps: Vec<&Program> = match &inlined {
        Some(ps) => ps.iter().collect(),
        None => programs.to_vec(),
    };
    let ps = ps.as_slice();
    let last = *ps.last().expect("probes");
    if ps.iter().any(|p| !p.chunks.is_empty()) {
        return Err("the model also carries chunk programs".into());
    }
    let same = |what: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!("its {what} differ with '{name}'"))
        }
    };
    if ps.iter().any(|p| p.funcs.len() != last.funcs.len()) {
        return Err(format!("{STEPS_DIFFER} with '{name}'"));
    }
    if ps.iter().any(|p| p.buffers.len() != last.buffers.len()) {
        // Only constants more or fewer (a table folded at some values and not at others,
        // whose size follows the dims): the driver retries with narrower tables
        // (`frontend::ImportOptions::narrow_tables`).
        let others = |p: &Program| {
            p.buffers
                .iter()
                .filter(|b| !matches!(b.loc, Loc::Const(_)))
                .count()
        };
        return Err(if ps.iter().all(|p| others(p) == others(last)) {
            format!("{CONSTANTS_DIFFER} with '{name}'")
        } else {
            format!("its buffers differ with '{name}'")
        });
    }
    same(
        "inputs and outputs",
        ps.iter()
            .all(|p| p.inputs.len() == last.inputs.len() && p.outputs.len() == last.outputs.len()),
    )?;
    // The bound's workspace layout serves every smaller value.
    let fits = ps.iter().all(|p| {
        p.workspace_size <= last.workspace_size
            && p.scratch_base <= last.scratch_base
            && p.scratch_shared <= last.scratch_shared
            && p.scratch_per_worker <= last.scratch_per_worker
            && p.string_bytes <= last.string_bytes
    });
    same("workspace layouts (not largest at the bound)", fits)?;
    // Constants no statement reads (a small one copied as literals) may differ.
    let used = last.referenced_buffers();
    let buffers = (0..last.buffers.len())
        .map(|k| {
            u.buffer(
                &ps.iter().map(|p| &p.buffers[k]).collect::<Vec<_>>(),
                used[k],
            )
            .map_err(|e| format!("{e} (buffer {k})"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut funcs = Vec::new();
    for k in 0..last.funcs.len() {
        let fs: Vec<&Func> = ps.iter().map(|p| &p.funcs[k]).collect();
        let f = u
            .func(&fs)
            .map_err(|e| format!("{e}, in {} ({})", last.funcs[k].name, last.funcs[k].origin))?;
        funcs.push(f);
    }
    let io = |get: &dyn Fn(&Program) -> &[IoDesc], input: bool| {
        (0..get(last).len())
            .map(|k| u.io(&ps.iter().map(|p| &get(p)[k]).collect::<Vec<_>>(), input))
            .collect::<Result<Vec<IoDesc>, String>>()
    };
    let inputs = io(&|p| &p.inputs, true)?;
    let outputs = io(&|p| &p.outputs, false)?;
    for (k, n) in names.iter().enumerate() {
        if !inputs.iter().any(|d| {
            d.run_dims.iter().any(|r| {
                r.is_some_and(|r| {
                    r.dim as usize == k && r.mul > 0 && r.div == 1 && r.other.is_none()
                })
            })
        }) {
            return Err(format!("no input carries '{n}'"));
        }
    }
    Ok(Program {
        buffers,
        funcs,
        inputs,
        outputs,
        run_dims: (names.iter().enumerate())
            .map(|(k, n)| RunTimeDim {
                name: n.to_string(),
                least: least[k],
                bound: u.bound[k],
                multiple: 1,
            })
            .collect(),
        ..last.clone()
    })
}

/// Whether every constant buffer of `bs` holds the first bytes of the bound's (the last),
/// at the same offset: a table cut to a length that follows the dims (a position table or
/// a model's position ids sliced to the sequence, a prefix of a Range), whose elements the
/// bound's table holds at the same places, so that the bound's serves every value.
fn prefixes(bs: &[&Buffer]) -> bool {
    fn bytes(b: &Buffer) -> Option<&[u8]> {
        let Loc::Const(d) = &b.loc else {
            return None;
        };
        let start = usize::try_from(b.offset).ok()?;
        let len = usize::try_from(b.len).ok()?.checked_mul(b.dtype.size())?;
        d.get(start..start.checked_add(len)?)
    }
    let last = bs[bs.len() - 1];
    let Some(whole) = bytes(last) else {
        return false;
    };
    bs.iter().all(|b| {
        b.dtype == last.dtype
            && b.offset == last.offset
            && b.offset_at.is_none()
            && bytes(b).is_some_and(|d| whole.starts_with(d))
    })
}

/// Why `p`, the model's program lowered at the values `at` of the run-time dims
/// (`Fixed::at`), cannot run for those values in place of `general` (the generalized
/// program; `Program::fixed`): it must take and give the same tensors, at the dims
/// `general`'s formulas give there. Where `at` leaves a dim to `p` (its only run-time dim,
/// of the same name, multiple and bound), that is checked at `p`'s least value of it, its
/// bound and between. An output sized by the data is staged at the bound the formulas give
/// (`NAME_run_shaped`), which is `p`'s own there.
pub fn fixed_fits(general: &Program, at: &[Option<i64>], p: &Program) -> Result<(), String> {
    let free: Vec<usize> = (0..at.len()).filter(|&k| at[k].is_none()).collect();
    let takes = match (&free[..], &p.run_dims[..]) {
        ([], []) => true,
        ([j], [d]) => {
            let g = &general.run_dims[*j];
            d.name == g.name && d.multiple == g.multiple && d.bound == g.bound
        }
        _ => false,
    };
    if at.len() != general.run_dims.len() || !takes || !p.chunks.is_empty() || !p.fixed.is_empty() {
        return Err("it is not one plain program".into());
    }
    let same = |g: &[IoDesc], q: &[IoDesc], what: &str, values: &[i64], x: i64| {
        if g.len() != q.len() {
            return Err(format!("its {what} differ in number"));
        }
        let at = |t: &IoDesc, value: &dyn Fn(&RunDim) -> i64| -> Vec<i64> {
            (t.shape.iter().enumerate())
                .map(|(k, &d)| match t.run_dims.get(k) {
                    Some(Some(r)) => value(r),
                    _ => d,
                })
                .collect()
        };
        for (a, b) in g.iter().zip(q) {
            let dims = at(a, &|r| r.at(values));
            let theirs = at(b, &|r| r.at(&[x]));
            if a.dtype != b.dtype
                || dims != theirs
                || a.batched != b.batched
                || a.hidden != b.hidden
                || a.map_key != b.map_key
                || a.dims_at != b.dims_at
            {
                return Err(format!(
                    "its {what} '{}' is {theirs:?} at {values:?}, where the formulas give \
                     {dims:?}",
                    b.name
                ));
            }
        }
        Ok(())
    };
    let xs = match p.run_dims.first() {
        Some(d) => vec![d.least, (d.least + d.bound) / 2, d.bound],
        None => vec![0],
    };
    for x in xs {
        let values: Vec<i64> = at.iter().map(|v| v.unwrap_or(x)).collect();
        same(&general.inputs, &p.inputs, "input", &values, x)?;
        same(&general.outputs, &p.outputs, "output", &values, x)?;
    }
    Ok(())
}

struct Unify<'a> {
    /// Each program's values of the run-time dims.
    points: &'a [Vec<i64>],
    /// The run-time dims' ranges of values.
    least: &'a [i64],
    bound: &'a [i64],
}

/// A constant of the programs: the same everywhere, or a function of the run-time dims.
enum Int {
    Same(i64),
    Poly(Form),
}

impl Unify<'_> {
    fn int(&self, vals: &[i64]) -> Result<Int, String> {
        if vals.iter().all(|&v| v == vals[0]) {
            return Ok(Int::Same(vals[0]));
        }
        // A function of one dim: the same wherever that dim is, then a polynomial of a step
        // of it through its values in the order they come.
        for d in 0..self.least.len() {
            let mut xs: Vec<i64> = Vec::new();
            let mut ys: Vec<i64> = Vec::new();
            let mut one = true;
            for (p, &v) in self.points.iter().zip(vals) {
                match xs.iter().position(|&x| x == p[d]) {
                    Some(i) => one &= ys[i] == v,
                    None => {
                        xs.push(p[d]);
                        ys.push(v);
                    }
                }
            }
            if one
                && xs.len() >= 4
                && let Some(fit) = Fit::through(&xs, &ys)
            {
                return Ok(Int::Poly(Form::One(d as u32, fit)));
            }
        }
        if self.least.len() == 2
            && let Some(f) = Form::two(self.points, vals).or_else(|| Form::quad(self.points, vals))
        {
            return Ok(Int::Poly(f));
        }
        Err(format!(
            "a constant takes the values {vals:?} at {:?}, {NOT_POLYNOMIAL} or of \
             its step by a stride up to 4",
            self.points
        ))
    }

    /// Ok when every program has the same `vals`.
    fn equal<T: PartialEq + std::fmt::Debug>(
        &self,
        what: &str,
        vals: impl IntoIterator<Item = T>,
    ) -> Result<(), String> {
        let vals: Vec<T> = vals.into_iter().collect();
        if vals.iter().all(|v| *v == vals[0]) {
            Ok(())
        } else {
            Err(format!(
                "its {what} differ: {:?} and {:?}",
                vals[0],
                vals[vals.len() - 1]
            ))
        }
    }

    fn count(&self, cs: &[&Count]) -> Result<Count, String> {
        let vals: Vec<i64> = cs
            .iter()
            .map(|c| c.fixed().ok_or("a count is already run-time"))
            .collect::<Result<_, _>>()?;
        Ok(match self.int(&vals)? {
            Int::Same(n) => Count::Fixed(n),
            Int::Poly(p) => {
                let (_, max) = p.range(self.least, self.bound).ok_or_else(|| {
                    format!("a count {vals:?} would be negative or not largest at the bound")
                })?;
                Count::Dyn { e: p.expr(), max }
            }
        })
    }

    /// The buffers of each program with one id (`used`: a statement refers to it).
    fn buffer(&self, bs: &[&Buffer], used: bool) -> Result<Buffer, String> {
        let last = bs[bs.len() - 1];
        self.equal("buffer types", bs.iter().map(|b| b.dtype))?;
        // Lengths: the bound's, largest.
        let lens: Vec<i64> = bs.iter().map(|b| b.len).collect();
        if let Int::Poly(p) = self.int(&lens)? {
            p.range(self.least, self.bound)
                .filter(|&(_, hi)| hi == last.len)
                .ok_or_else(|| format!("a buffer's length {lens:?} is not largest at the bound"))?;
        }
        // A slice's offset: the same everywhere, or a function of the dims (a slice past
        // channels whose planes they size), not negative.
        let offsets: Vec<i64> = (bs.iter())
            .map(|b| i64::try_from(b.offset).map_err(|_| "a slice offset is too large"))
            .collect::<Result<_, _>>()?;
        let offset_at = match self
            .int(&offsets)
            .map_err(|e| format!("{e} (a slice offset)"))?
        {
            Int::Same(_) => None,
            Int::Poly(p) => {
                p.range(self.least, self.bound)
                    .ok_or_else(|| format!("a slice offset {offsets:?} would be negative"))?;
                Some(p.expr())
            }
        };
        let loc = match &last.loc {
            Loc::Input(_) | Loc::Output(_) => {
                self.equal("buffer places", bs.iter().map(|b| format!("{:?}", b.loc)))?;
                last.loc.clone()
            }
            Loc::Const(d) => {
                let same = bs.iter().all(|b| match &b.loc {
                    Loc::Const(e) => Arc::ptr_eq(d, e) || d == e,
                    _ => false,
                });
                if !same && used && !prefixes(bs) {
                    return Err(FOLDED_TABLE.into());
                }
                last.loc.clone()
            }
            // The bound's arena plan: every buffer is largest there.
            Loc::Arena(o) => {
                if !bs.iter().all(|b| matches!(b.loc, Loc::Arena(_))) {
                    return Err("a buffer's place differs".into());
                }
                Loc::Arena(*o)
            }
        };
        Ok(Buffer {
            dtype: last.dtype,
            len: last.len,
            loc,
            offset: last.offset,
            offset_at,
        })
    }

    /// An input (`input`: its dims must give the run-time dim's value) or output.
    fn io(&self, ds: &[&IoDesc], input: bool) -> Result<IoDesc, String> {
        let last = ds[ds.len() - 1];
        self.equal("input or output names", ds.iter().map(|d| &d.name))?;
        self.equal("input or output types", ds.iter().map(|d| d.dtype))?;
        self.equal("input or output ranks", ds.iter().map(|d| d.shape.len()))?;
        // A map input, or a ZipMap output whose keys differ (they are the model's classes:
        // the same at every value).
        if ds
            .iter()
            .any(|d| d.map_key.is_some() || d.keys != last.keys)
        {
            return Err(format!("'{}' is a map", last.name));
        }
        if ds.iter().any(|d| d.dims_at.is_some()) {
            return self.data_dependent(ds);
        }
        let mut run_dims = Vec::new();
        for k in 0..last.shape.len() {
            let vals: Vec<i64> = ds.iter().map(|d| d.shape[k]).collect();
            run_dims.push(self.growing_dim(&vals, !input, || {
                format!(
                    "dim {k} of '{}' takes the values {vals:?} (onnxc takes input dims of the \
                     form a·N + b and output dims of the form a·((N + c) / s) + b, each of one \
                     run-time dim, or with two of them a·N + a'·M + c·N·M + b)",
                    last.name
                )
            })?);
        }
        following(last, run_dims)
    }

    /// An output whose dims depend on the data (`IoDesc::dims_at`): its bound at the
    /// run-time dims' bounds is the largest, and each dim of that bound is the same at every
    /// value or follows the dims (`RunDim`: NonZero's `[rank, count]` over an input of
    /// `2·N` elements); `NAME_run_shaped` stages the output at its bound at the call's dims
    /// (where the program writes it) and copies out its actual dims from there.
    fn data_dependent(&self, ds: &[&IoDesc]) -> Result<IoDesc, String> {
        let last = ds[ds.len() - 1];
        self.equal("dims' places", ds.iter().map(|d| d.dims_at))?;
        let mut run_dims = Vec::new();
        for k in 0..last.shape.len() {
            let vals: Vec<i64> = ds.iter().map(|d| d.shape[k]).collect();
            run_dims.push(self.growing_dim(&vals, true, || {
                format!(
                    "'{}' has as many elements as the data selects, at most {vals:?} in its \
                     dim {k}: not a growing dim of the form a·((N + c) / s) + b",
                    last.name
                )
            })?);
        }
        following(last, run_dims)
    }

    /// A tensor dim that takes `vals` at the probes: None where it is the same at every
    /// value, else how it follows one run-time dim, `a·((N + c) / s) + b` with `a > 0` (a
    /// step `s` above 1 only where `step`), or the sum `a·N + a'·M + b` of both run-time dims
    /// (`a, a' > 0`); `refuse()` is the error for any other form.
    fn growing_dim(
        &self,
        vals: &[i64],
        step: bool,
        refuse: impl FnOnce() -> String,
    ) -> Result<Option<RunDim>, String> {
        Ok(match self.int(vals)? {
            Int::Same(_) => None,
            Int::Poly(Form::One(
                dim,
                Fit {
                    poly: Poly([add, mul, 0]),
                    pre,
                    div,
                },
            )) if mul > 0 && (div == 1 || step) => Some(RunDim {
                dim,
                mul,
                add,
                pre,
                div,
                other: None,
            }),
            // A bilinear form of a step of each dim with no negative coefficient: a mask
            // over `past + seq`, a detector's anchors over `h · w`; for inputs, of the
            // dims themselves.
            Int::Poly(Form::Two {
                sa: (div, pre),
                sb: (div1, pre1),
                c: [add, mul, mul1, prod],
            }) if mul >= 0
                && mul1 >= 0
                && prod >= 0
                && (step || (div, pre, div1, pre1) == (1, 0, 1, 0)) =>
            {
                Some(RunDim {
                    dim: 0,
                    mul,
                    add,
                    pre,
                    div,
                    other: Some(Other {
                        dim: 1,
                        mul: mul1,
                        pre: pre1,
                        div: div1,
                        prod,
                    }),
                })
            }
            Int::Poly(_) => return Err(refuse()),
        })
    }

    fn func(&self, fs: &[&Func]) -> Result<Func, String> {
        let last = fs[fs.len() - 1];
        self.equal("step names", fs.iter().map(|f| &f.name))?;
        self.equal("parallel flags", fs.iter().map(|f| f.parallel))?;
        let bodies: Vec<&[Stmt]> = fs.iter().map(|f| &f.body[..]).collect();
        Ok(Func {
            body: self.stmts(&bodies)?,
            ..last.clone()
        })
    }

    fn stmts(&self, bodies: &[&[Stmt]]) -> Result<Vec<Stmt>, String> {
        let n = bodies[0].len();
        if bodies.iter().any(|b| b.len() != n) {
            return Err("its statements differ".into());
        }
        (0..n)
            .map(|k| self.stmt(&bodies.iter().map(|b| &b[k]).collect::<Vec<_>>()))
            .collect()
    }

    fn stmt(&self, ss: &[&Stmt]) -> Result<Stmt, String> {
        let differ = || Err("its statements differ".to_string());
        macro_rules! all {
            ($pat:pat => $out:expr) => {
                ss.iter()
                    .map(|s| match s {
                        $pat => Ok($out),
                        _ => Err("its statements differ".to_string()),
                    })
                    .collect::<Result<Vec<_>, String>>()?
            };
        }
        Ok(match ss[0] {
            Stmt::For { .. } => {
                let parts = all!(Stmt::For { var, extent, vector, body } => (*var, extent, *vector, &body[..]));
                self.equal("loops", parts.iter().map(|p| p.0))?;
                // Whether a loop is vectorized follows its length (short ones are not); the
                // bound's choice serves every length (codegen runs the remainder scalar).
                Stmt::For {
                    var: parts[0].0,
                    extent: self.count(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    vector: parts[parts.len() - 1].2,
                    body: self.stmts(&parts.iter().map(|p| p.3).collect::<Vec<_>>())?,
                }
            }
            Stmt::Store { .. } => {
                let parts = all!(Stmt::Store { buf, offset, value } => (*buf, offset, value));
                self.equal("stores", parts.iter().map(|p| p.0))?;
                Stmt::Store {
                    buf: parts[0].0,
                    offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    value: self.expr(&parts.iter().map(|p| p.2).collect::<Vec<_>>())?,
                }
            }
            Stmt::Reduce { .. } => {
                let parts = all!(Stmt::Reduce { buf, offset, kind, loops, body, epilogue } =>
                    (*buf, offset, *kind, loops, body, epilogue));
                self.equal(
                    "reductions",
                    parts
                        .iter()
                        .map(|p| (p.0, format!("{:?}", p.2), p.3.len(), p.5.is_some())),
                )?;
                let mut loops = Vec::new();
                for k in 0..parts[0].3.len() {
                    let vars: Vec<u32> = parts.iter().map(|p| p.3[k].0).collect();
                    self.equal("reduction loops", &vars)?;
                    let c = self.count(&parts.iter().map(|p| &p.3[k].1).collect::<Vec<_>>())?;
                    loops.push((vars[0], c));
                }
                let epilogue = match parts[0].5 {
                    Some(_) => Some(
                        self.expr(
                            &parts
                                .iter()
                                .map(|p| p.5.as_ref().expect("checked"))
                                .collect::<Vec<_>>(),
                        )?,
                    ),
                    None => None,
                };
                Stmt::Reduce {
                    buf: parts[0].0,
                    offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    kind: parts[0].2,
                    loops,
                    body: self.expr(&parts.iter().map(|p| p.4).collect::<Vec<_>>())?,
                    epilogue,
                }
            }
            Stmt::Copy { .. } => {
                let parts = all!(Stmt::Copy { dst, dst_offset, src, src_offset, elems } =>
                    (*dst, dst_offset, *src, src_offset, elems));
                self.equal("copies", parts.iter().map(|p| (p.0, p.2)))?;
                Stmt::Copy {
                    dst: parts[0].0,
                    dst_offset: self.expr(&parts.iter().map(|p| p.1).collect::<Vec<_>>())?,
                    src: parts[0].2,
                    src_offset: self.expr(&parts.iter().map(|p| p.3).collect::<Vec<_>>())?,
                    elems: self.count(&parts.iter().map(|p| p.4).collect::<Vec<_>>())?,
                }
            }
            Stmt::Check { .. } => {
                let parts = all!(Stmt::Check { cond, code } => (cond, *code));
                self.equal("checks", parts.iter().map(|p| p.1))?;
                Stmt::Check {
                    cond: self.expr(&parts.iter().map(|p| p.0).collect::<Vec<_>>())?,
                    code: parts[0].1,
                }
            }
            Stmt::Call { kernel, .. } => {
                let parts = all!(Stmt::Call { kernel, args } => (kernel.symbol, args));
                self.equal("kernels", parts.iter().map(|p| p.0))?;
                let n = parts[0].1.len();
                if parts.iter().any(|p| p.1.len() != n) {
                    return differ();
                }
                let mut args = Vec::new();
                for k in 0..n {
                    let a: Vec<&Arg> = parts.iter().map(|p| &p.1[k]).collect();
                    args.push(
                        self.arg(&a)
                            .map_err(|e| format!("{e} (argument {k} of {})", kernel.symbol))?,
                    );
                }
                Stmt::Call { kernel, args }
            }
        })
    }

    fn arg(&self, args: &[&Arg]) -> Result<Arg, String> {
        let last = args[args.len() - 1];
        let differ = || Err("its kernel arguments differ".to_string());
        Ok(match last {
            Arg::Ptr { buf, .. } => {
                let mut offs = Vec::new();
                for a in args {
                    match a {
                        Arg::Ptr { buf: b, offset } if b == buf => offs.push(offset),
                        _ => return differ(),
                    }
                }
                Arg::Ptr {
                    buf: *buf,
                    offset: self.expr(&offs)?,
                }
            }
            Arg::Int(_) => {
                let mut es = Vec::new();
                for a in args {
                    match a {
                        Arg::Int(e) => es.push(e),
                        _ => return differ(),
                    }
                }
                Arg::Int(self.expr(&es)?)
            }
            Arg::Params(p) => {
                let mut ps = Vec::new();
                for a in args {
                    match a {
                        Arg::Params(q) if q.len() == p.len() => ps.push(q),
                        _ => return differ(),
                    }
                }
                let mut dynamic = false;
                let mut out = Vec::new();
                for k in 0..p.len() {
                    let vals: Vec<i64> = ps.iter().map(|q| q[k]).collect();
                    out.push(match self.int(&vals)? {
                        Int::Same(v) => expr::i(v),
                        Int::Poly(poly) => {
                            dynamic = true;
                            poly.expr()
                        }
                    });
                }
                if dynamic {
                    Arg::DynParams(out)
                } else {
                    last.clone()
                }
            }
            // The bound's scratch layout.
            Arg::Scratch { .. } => {
                if !args.iter().all(|a| matches!(a, Arg::Scratch { .. })) {
                    return differ();
                }
                last.clone()
            }
            Arg::Null | Arg::Threads | Arg::Floats(_) | Arg::Blob(_) | Arg::DynParams(_) => {
                if !args.iter().all(|a| same_constant(a, args[0])) {
                    return Err("a kernel's constant table differs with the dims".into());
                }
                last.clone()
            }
        })
    }

    fn expr(&self, es: &[&E]) -> Result<E, String> {
        let first = es[0];
        if es.iter().all(|e| Arc::ptr_eq(e, first) || ***e == **first) {
            return Ok(first.clone());
        }
        let dtype = first.dtype;
        if es.iter().any(|e| e.dtype != dtype) {
            return Err("an expression's type differs".into());
        }
        let differ = || "its expressions differ".to_string();
        let kids = |k: usize| -> Result<E, String> {
            let cs: Vec<&E> = es.iter().map(|e| e.children()[k]).collect();
            self.expr(&cs)
        };
        let same_shape = es.iter().all(|e| {
            std::mem::discriminant(&e.kind) == std::mem::discriminant(&first.kind)
                && e.children().len() == first.children().len()
        });
        if !same_shape {
            return Err(differ());
        }
        let kind = match &first.kind {
            ExprKind::Const(_) => return self.constant(es),
            ExprKind::Var(_) => return Err(differ()),
            ExprKind::Load { input, index } => {
                let mut out = Vec::new();
                for k in 0..index.len() {
                    let mut cs = Vec::new();
                    for e in es {
                        match &e.kind {
                            ExprKind::Load {
                                input: i2,
                                index: ix,
                            } if i2 == input => cs.push(&ix[k]),
                            _ => return Err(differ()),
                        }
                    }
                    out.push(self.expr(&cs)?);
                }
                ExprKind::Load {
                    input: *input,
                    index: out,
                }
            }
            ExprKind::Unary(op, _) => {
                if es
                    .iter()
                    .any(|e| !matches!(&e.kind, ExprKind::Unary(o, _) if o == op))
                {
                    return Err(differ());
                }
                ExprKind::Unary(*op, kids(0)?)
            }
            ExprKind::Binary(op, _, _) => {
                if es
                    .iter()
                    .any(|e| !matches!(&e.kind, ExprKind::Binary(o, _, _) if o == op))
                {
                    return Err(differ());
                }
                ExprKind::Binary(*op, kids(0)?, kids(1)?)
            }
            ExprKind::Select(..) => ExprKind::Select(kids(0)?, kids(1)?, kids(2)?),
            ExprKind::Cast(_) => ExprKind::Cast(kids(0)?),
            ExprKind::CheckIndex { bound, .. } => {
                let bounds: Vec<i64> = (es.iter())
                    .map(|e| match &e.kind {
                        ExprKind::CheckIndex { bound, .. } => Ok(*bound),
                        _ => Err(differ()),
                    })
                    .collect::<Result<_, _>>()?;
                let index = kids(0)?;
                match self.int(&bounds) {
                    Ok(Int::Same(_)) => ExprKind::CheckIndex {
                        index,
                        bound: *bound,
                    },
                    Ok(Int::Poly(p)) => return self.checked_index(index, p, &bounds),
                    Err(_) => return Err("a checked index's bound depends on the dims".into()),
                }
            }
        };
        Ok(Arc::new(Expr { dtype, kind }))
    }

    /// An index checked against a bound `p` of the dims (rows gathered from a tensor the
    /// dims size; `bounds` at the programs' values): wrapped and checked against `p` at run
    /// time, then against the bound at the dims' bounds, `b`, which an index out of `p`'s
    /// range is made to fail (`b` is out of `[-b, b)`), so the run fails as the
    /// specialized one would.
    fn checked_index(&self, index: E, p: Form, bounds: &[i64]) -> Result<E, String> {
        let b = bounds[bounds.len() - 1];
        match p.range(self.least, self.bound) {
            Some((lo, hi)) if lo >= 0 && hi == b => {}
            _ => {
                return Err(format!(
                    "a checked index's bound {bounds:?} is not largest at the bound"
                ));
            }
        }
        let n = p.expr();
        let negative = expr::lt(index.clone(), expr::i(0));
        let wrapped = expr::select(negative, expr::add(index.clone(), n.clone()), index.clone());
        let inside = expr::and(
            expr::ge(index.clone(), expr::sub(expr::i(0), n.clone())),
            expr::lt(index, n),
        );
        Ok(expr::check_index(
            expr::select(inside, wrapped, expr::i(b)),
            b,
        ))
    }

    /// A float constant that differs as `1/n` for an integer polynomial `n` of the dims,
    /// positive at every value (a mean's 1/N): the division done in float64 and rounded to
    /// the constant's type, as the compiler folded it, so every value gets the bits its own
    /// compile would.
    fn reciprocal(&self, es: &[&E]) -> Option<E> {
        let dtype = es[0].dtype;
        if !dtype.is_float() {
            return None;
        }
        let ns: Vec<i64> = es
            .iter()
            .map(|e| match e.as_const()? {
                Scalar::F(v) if v > 0.0 && v <= 1.0 => {
                    let n = (1.0 / v).round();
                    let same = Scalar::F(1.0 / n).cast(dtype) == Scalar::F(v);
                    (same && n < 2f64.powi(53)).then_some(n as i64)
                }
                _ => None,
            })
            .collect::<Option<_>>()?;
        let Ok(Int::Poly(p)) = self.int(&ns) else {
            return None;
        };
        let (lo, _) = p.range(self.least, self.bound)?;
        if lo < 1 {
            return None;
        }
        let n = expr::cast(p.expr(), DType::F64);
        let r = expr::binary(expr::BinOp::Div, expr::f(DType::F64, 1.0), n);
        Some(if dtype == DType::F64 {
            r
        } else {
            expr::cast(r, dtype)
        })
    }

    /// A constant that differs: an integer polynomial, converted to the constant's type.
    fn constant(&self, es: &[&E]) -> Result<E, String> {
        let dtype = es[0].dtype;
        let vals: Option<Vec<i64>> = es
            .iter()
            .map(|e| match e.as_const()? {
                Scalar::I(v) => Some(v),
                Scalar::U(v) => i64::try_from(v).ok(),
                Scalar::F(v) if v.fract() == 0.0 && v.abs() < 2f64.powi(53) => Some(v as i64),
                _ => None,
            })
            .collect();
        let Some(vals) = vals else {
            return self.reciprocal(es).ok_or_else(|| {
                format!("a constant that is {FOLDED_SCALE} (a scale) depends on the dims")
            });
        };
        let Int::Poly(p) = self.int(&vals)? else {
            unreachable!("the constants differ")
        };
        let e = p.expr();
        Ok(if dtype == DType::I64 {
            e
        } else {
            expr::cast(e, dtype)
        })
    }
}

/// Whether two kernel arguments that do not follow the dims are the same: floats bit for
/// bit, blobs and run-time parameters element for element (compared as values: a blob of
/// packed weights is large, and each generalization compares every program's).
fn same_constant(a: &Arg, b: &Arg) -> bool {
    match (a, b) {
        (Arg::Null, Arg::Null) | (Arg::Threads, Arg::Threads) => true,
        (Arg::Floats(x), Arg::Floats(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Arg::Blob(x), Arg::Blob(y)) => Arc::ptr_eq(x, y) || x == y,
        (Arg::DynParams(x), Arg::DynParams(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| Arc::ptr_eq(p, q) || **p == **q)
        }
        _ => false,
    }
}

/// `last` with its dims following the run-time dims as `run_dims` says (none: as it is).
fn following(last: &IoDesc, run_dims: Vec<Option<RunDim>>) -> Result<IoDesc, String> {
    let any = run_dims.iter().any(Option::is_some);
    // The ABI sizes a tensor at the run-time dims from its bytes per element.
    if any && last.dtype.packed_bits().is_some() {
        return Err(format!(
            "'{}' is {}, packed several elements to a byte, and its dims follow the dim",
            last.name, last.dtype
        ));
    }
    Ok(IoDesc {
        run_dims: if any { run_dims } else { vec![] },
        ..last.clone()
    })
}

#[cfg(test)]
mod tests;
