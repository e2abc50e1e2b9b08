//! `Loop` and `Scan` unrolled: one copy of the body per iteration, carried values threaded
//! through, iterations past a run-time condition if-converted (`unroll_loop`: scan outputs
//! then have as many rows as iterations ran, a data-dependent dim), scanned slices read per
//! copy (`unroll_scan`); bounded by `MAX_ITERATIONS` and `MAX_UNROLLED_NODES`.

use super::{MAX_ITERATIONS, MAX_UNROLLED_NODES, Val, select_on, take};
use crate::error::{Error, Result};
use crate::frontend::Importer;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, known_dims};
use crate::ir::expr::{self};
use crate::ir::{DType, Op, Origin, Scalar, Tensor, TypeInfo, ValueId};
use onnxc_proto::{GraphProto, NodeProto, type_proto};

impl Importer<'_> {
    /// Counts one more copy of `body` (iteration `iteration`, from 1) against the unrolling
    /// limits: iterations per node, and body nodes over the whole model, so that loops nested
    /// in loops cannot multiply past it.
    pub(in crate::frontend) fn count_iteration(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        body: &GraphProto,
        iteration: usize,
    ) -> Result<()> {
        if iteration > MAX_ITERATIONS {
            return Err(self.unsupported_node(
                n,
                origin,
                format!(
                    "it runs more than {MAX_ITERATIONS} iterations; onnxc unrolls loops of at \
                     most {MAX_ITERATIONS} iterations"
                ),
            ));
        }
        self.unrolled = self.unrolled.saturating_add(body.node.len().max(1));
        if self.unrolled > MAX_UNROLLED_NODES {
            return Err(self.unsupported_node(
                n,
                origin,
                format!(
                    "unrolling it (iteration {iteration}, {} body nodes) takes the model's \
                     unrolled loop bodies past {MAX_UNROLLED_NODES} nodes, the most onnxc unrolls",
                    body.node.len()
                ),
            ));
        }
        Ok(())
    }

    /// A Loop whose trip count and condition are known at compile time, unrolled.
    pub(in crate::frontend) fn unroll_loop(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
    ) -> Result<()> {
        let body = Self::graph_attr(n, origin, "body")?;
        let trip = self.operand(n, origin, 0)?;
        let cond = self.operand(n, origin, 1)?;
        // Carried values may be sequences (lists kept at compile time, like every sequence).
        let carried: Vec<Val> = (2..n.input.len())
            .map(|k| {
                if let Some(s) = self.seqs.get(&n.input[k]) {
                    return Ok(Val::Seq(s.clone()));
                }
                if self.absent.contains(&n.input[k]) {
                    return Ok(Val::Absent);
                }
                self.operand(n, origin, k)?.map(Val::Tensor).ok_or_else(|| {
                    Error::Model(format!(
                        "{origin}: loop-carried input {} is empty; every carried value needs an \
                         initial value",
                        k - 2
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let n_carried = carried.len();
        if body.input.len() != n_carried + 2 {
            return Err(Error::Model(format!(
                "{origin}: the body has {} inputs; a Loop with {n_carried} carried values needs {} \
                 (iteration number, condition, carried values)",
                body.input.len(),
                n_carried + 2
            )));
        }
        if body.output.len() < n_carried + 1 {
            return Err(Error::Model(format!(
                "{origin}: the body has {} outputs; a Loop with {n_carried} carried values needs \
                 at least {} (condition, carried values, scan outputs)",
                body.output.len(),
                n_carried + 1
            )));
        }
        let n_scan = body.output.len() - 1 - n_carried;
        if n.output.len() > n_carried + n_scan {
            return Err(Error::Model(format!(
                "{origin}: the node has {} outputs, its body computes {n_carried} carried values \
                 and {n_scan} scan outputs",
                n.output.len()
            )));
        }
        let run_time = |what: &str| {
            format!(
                "its {what} is computed at run time; onnxc unrolls loops whose trip count and \
                 condition are known at compile time (constants, or computable from shapes)"
            )
        };
        let scalar_of = |this: &Self, v: ValueId, what: &str| -> Result<Option<Scalar>> {
            match this.g.const_value(v) {
                None => Ok(None),
                Some(t) if t.len() == 1 => Ok(Some(t.get(0))),
                Some(t) => Err(Error::Model(format!(
                    "{origin}: the {what} must have one element, it has {}",
                    t.len()
                ))),
            }
        };
        let trip_count = match trip {
            None => None,
            Some(v) => match scalar_of(self, v, "trip count")? {
                Some(s) => Some(s.as_i64().max(0)),
                None => return Err(self.unsupported_node(n, origin, run_time("trip count"))),
            },
        };
        // Whether the loop runs on: known at compile time, or (once a condition is computed
        // from run-time values) a run-time bool; from then on every iteration is if-converted.
        let mut running = match cond {
            None => Running::Known(true),
            Some(v) => match scalar_of(self, v, "condition")? {
                Some(s) => Running::Known(s.as_bool()),
                None => {
                    let ty = self.g.value_type(v);
                    if ty.dtype != DType::Bool
                        || crate::ir::dim::num_elements(&ty.shape) != Dim::Known(1)
                    {
                        return Err(Error::Model(format!(
                            "{origin}: the condition (input 1) is {} {}; it must be a \
                             one-element bool",
                            ty.dtype,
                            crate::ir::dim::fmt_shape(&ty.shape)
                        )));
                    }
                    Running::RunTime(v)
                }
            },
        };
        if trip_count.is_none() && cond.is_none() {
            return Err(self.unsupported_node(
                n,
                origin,
                "it has neither a trip count nor a condition (it never ends)",
            ));
        }
        // The body's iteration number and condition inputs: scalars, or [1] where the body
        // declares rank 1.
        let rank_of = |k: usize| -> usize {
            match body.input[k].r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(tt)) => {
                    tt.shape.as_ref().map_or(0, |s| s.dim.len().min(1))
                }
                _ => 0,
            }
        };
        let (iter_rank, cond_rank) = (rank_of(0), rank_of(1));
        let mut values = carried;
        let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); n_scan];
        // Nodes that existed before the first if-converted iteration.
        let mut i: i64 = 0;
        // How many iterations ran, once an iteration is if-converted (int64 scalar).
        let mut iterations: Option<ValueId> = None;
        while running != Running::Known(false) && trip_count.is_none_or(|m| i < m) {
            if let Running::RunTime(active) = running {
                if trip_count.is_none() {
                    return Err(self.unsupported_node(
                        n,
                        origin,
                        "its condition is computed at run time and it has no trip count; onnxc \
                         unrolls a loop on a run-time condition up to a trip count known at \
                         compile time",
                    ));
                }
                // The iterations that run: those before, and each if-converted one whose
                // condition still holds. Scan outputs have that many rows (`DataDim`).
                let mut ctx = self.helper_ctx(n, origin);
                let ran =
                    iterations.unwrap_or_else(|| ctx.constant(Tensor::from_i64s(vec![], &[i])));
                let body = expr::add(
                    expr::load(DType::I64, 0, vec![]),
                    expr::cast(
                        expr::load(DType::Bool, 1, vec![expr::i(0); ctx.rank(active)]),
                        DType::I64,
                    ),
                );
                iterations = Some(ctx.map(DType::I64, vec![], vec![ran, active], body)?);
            }
            self.count_iteration(n, origin, body, i as usize + 1)?;
            let shape = |r: usize| vec![1i64; r];
            let iter_v = {
                let t = Tensor::from_i64s(shape(iter_rank), &[i]);
                self.helper_ctx(n, origin).constant(t)
            };
            // The body runs only while the condition holds: its cond input is true.
            let cond_v = {
                let t = Tensor::filled(DType::Bool, shape(cond_rank), Scalar::one(DType::Bool));
                self.helper_ctx(n, origin).constant(t)
            };
            let mut args = vec![Val::Tensor(iter_v), Val::Tensor(cond_v)];
            args.extend(values.iter().cloned());
            let before = self.snapshot();
            let outs = self.inline_body_values(body, &args, origin, "body")?;
            let tensor = |this: &Self, k: usize, what: &str| match &outs[k] {
                Val::Tensor(v) => Ok(*v),
                Val::Seq(_) | Val::Absent => Err(this.unsupported_node(
                    n,
                    origin,
                    format!(
                        "the body's {what} is a sequence or an empty optional; onnxc carries \
                         them through a Loop but scans tensors only"
                    ),
                )),
            };
            let cond_out = tensor(self, 0, "condition")?;
            let scanned = (n_carried + 1..outs.len())
                .map(|k| tensor(self, k, &format!("scan output {}", k - n_carried - 1)))
                .collect::<Result<Vec<ValueId>>>()?;
            // An if-converted iteration's checks fail the run only while the loop runs.
            if let Running::RunTime(active) = running
                && let Some(what) = self.guard_failures(n, origin, &before, active)?
            {
                return Err(self.unsupported_node(
                    n,
                    origin,
                    format!(
                        "its condition is computed at run time and its body holds a checked \
                         index inside a reduction or scatter{what}; onnxc runs every iteration \
                         up to the trip count and can make only assertions and maps fail where \
                         the loop still runs"
                    ),
                ));
            }
            let next = match scalar_of(self, cond_out, "condition the body computes")? {
                Some(s) => Running::Known(s.as_bool()),
                None => Running::RunTime(cond_out),
            };
            match running {
                Running::Known(_) => {
                    values = outs[1..=n_carried].to_vec();
                    running = next;
                }
                Running::RunTime(active) => {
                    // If-converted: each carried value takes the iteration's result only
                    // while the loop is still running.
                    if values
                        .iter()
                        .chain(&outs[1..=n_carried])
                        .any(|v| !matches!(v, Val::Tensor(_)))
                    {
                        return Err(self.unsupported_node(
                            n,
                            origin,
                            "its condition is computed at run time and it carries a sequence \
                             (or an optional); onnxc keeps sequences at compile time, so their \
                             length cannot depend on when the loop stops",
                        ));
                    }
                    let mut ctx = self.helper_ctx(n, origin);
                    for (k, v) in values.iter_mut().enumerate() {
                        // Both tensors: checked above.
                        if let (Val::Tensor(old), Val::Tensor(new)) = (&*v, &outs[1 + k]) {
                            *v = Val::Tensor(select_scalar(&mut ctx, active, *new, *old, k)?);
                        }
                    }
                    running = match next {
                        Running::Known(true) => Running::RunTime(active),
                        Running::Known(false) => {
                            // Stops here whatever `active` was.
                            Running::Known(false)
                        }
                        Running::RunTime(c) => Running::RunTime(and_scalar(&mut ctx, active, c)?),
                    };
                }
            }
            for (k, v) in scanned.into_iter().enumerate() {
                scans[k].push(v);
            }
            i += 1;
        }
        let mut results = Vec::new();
        for (k, elems) in scans.into_iter().enumerate() {
            if elems.is_empty() {
                return Err(self.unsupported_node(
                    n,
                    origin,
                    format!(
                        "it runs no iteration, so the shape of its scan output {k} is unknown; \
                         onnxc needs at least one iteration for loops with scan outputs"
                    ),
                ));
            }
            let mut ctx = self.helper_ctx(n, origin);
            let rows = elems.len() as i64;
            let stacked = stack(&mut ctx, &elems, 0, &format!("scan output {k}"))?;
            if let Some(count) = iterations {
                // Rows past the iterations that ran hold if-converted iterations' values.
                self.g.mark_rows(stacked, count, rows, 0);
            }
            results.push(stacked);
        }
        // Outputs: the carried values (tensors or sequences), then the scan outputs.
        let outs = values
            .into_iter()
            .chain(results.into_iter().map(Val::Tensor));
        self.bind_values(n, origin, outs.collect())
    }

    /// A Scan over inputs whose scanned length is known at compile time, unrolled.
    pub(in crate::frontend) fn unroll_scan(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
    ) -> Result<()> {
        let body = Self::graph_attr(n, origin, "body")?;
        let ints = |name: &str| -> Option<Vec<i64>> {
            n.attribute
                .iter()
                .find(|a| a.name.as_deref() == Some(name))
                .map(|a| a.ints.clone())
        };
        let num_scan = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("num_scan_inputs"))
            .and_then(|a| a.i)
            .ok_or_else(|| {
                Error::Model(format!(
                    "{origin}: attribute 'num_scan_inputs' (an int) is required"
                ))
            })?;
        // Opset 8: an optional sequence_lens first, and a batch axis 0 on every operand.
        let batched = origin.opset < 9;
        let first = usize::from(batched);
        let lens: Option<Vec<i64>> = match batched.then(|| self.operand(n, origin, 0)) {
            None => None,
            Some(v) => match v? {
                None => None,
                Some(v) => match self.g.const_value(v) {
                    // Checked against the length below.
                    Some(t) => Some(t.to_i64s()),
                    None => {
                        return Err(self.unsupported_node(
                            n,
                            origin,
                            "sequence_lens is computed at run time; onnxc unrolls a Scan whose \
                             sequences all have the full length",
                        ));
                    }
                },
            },
        };
        let operands: Vec<ValueId> = (first..n.input.len())
            .map(|k| {
                self.operand(n, origin, k)?
                    .ok_or_else(|| Error::Model(format!("{origin}: input {k} is empty")))
            })
            .collect::<Result<_>>()?;
        if num_scan < 1 || num_scan as usize > operands.len() {
            return Err(Error::Model(format!(
                "{origin}: num_scan_inputs is {num_scan}; it must be between 1 and the number of \
                 state and scan inputs ({})",
                operands.len()
            )));
        }
        let m = num_scan as usize;
        let n_state = operands.len() - m;
        if body.input.len() != operands.len() {
            return Err(Error::Model(format!(
                "{origin}: the body has {} inputs; {n_state} state and {m} scan inputs need {}",
                body.input.len(),
                operands.len()
            )));
        }
        if body.output.len() < n_state {
            return Err(Error::Model(format!(
                "{origin}: the body has {} outputs; {n_state} state values need at least as many",
                body.output.len()
            )));
        }
        let k_out = body.output.len() - n_state;
        let attr_list = |name: &str, len: usize| -> Result<Vec<i64>> {
            match ints(name) {
                None => Ok(vec![0; len]),
                Some(v) if v.len() == len => Ok(v),
                Some(v) => Err(Error::Model(format!(
                    "{origin}: attribute '{name}' has {} entries, it needs {len}",
                    v.len()
                ))),
            }
        };
        let shapes: Vec<Vec<i64>> = operands
            .iter()
            .map(|&v| {
                let s = self.g.value_type(v).shape.clone();
                known_dims(&s).ok_or_else(|| {
                    Error::NeedShape(format!(
                        "{origin}: needs the concrete shape of its operand, which is {}; fix the \
                         symbolic dims with --shape INPUT=D0,D1,…",
                        crate::ir::dim::fmt_shape(&s)
                    ))
                })
            })
            .collect::<Result<_>>()?;
        // Per scan input: the scanned axis and direction.
        let (in_axes, in_dirs, out_axes, out_dirs) = if batched {
            (
                vec![1; m],
                attr_list("directions", m)?,
                vec![1; k_out],
                vec![0; k_out],
            )
        } else {
            (
                attr_list("scan_input_axes", m)?,
                attr_list("scan_input_directions", m)?,
                attr_list("scan_output_axes", k_out)?,
                attr_list("scan_output_directions", k_out)?,
            )
        };
        let mut len = None;
        let mut axes = Vec::with_capacity(m);
        for j in 0..m {
            let shape = &shapes[n_state + j];
            let r = shape.len() as i64;
            let a = in_axes[j];
            if a < -r || a >= r {
                return Err(Error::Model(format!(
                    "{origin}: scan input {j} has rank {r}; its axis {a} is out of range"
                )));
            }
            let a = if a < 0 { a + r } else { a } as usize;
            if batched && a == 0 {
                unreachable!("opset 8 scans axis 1");
            }
            if len.is_some_and(|l| l != shape[a]) {
                return Err(Error::Model(format!(
                    "{origin}: scan input {j} has {} elements along its scan axis, the first {}; \
                     all scan inputs must have the same length",
                    shape[a],
                    len.unwrap()
                )));
            }
            len = Some(shape[a]);
            axes.push(a);
        }
        if let Some(&d) = in_dirs.iter().chain(&out_dirs).find(|&&d| d != 0 && d != 1) {
            return Err(Error::Model(format!(
                "{origin}: a scan direction is {d}; it must be 0 (forward) or 1 (reverse)"
            )));
        }
        let len = len.expect("at least one scan input");
        let batch = if batched {
            let b = shapes[0].first().copied().unwrap_or(0);
            if let Some((k, s)) = shapes
                .iter()
                .enumerate()
                .find(|(_, s)| s.first() != Some(&b))
            {
                return Err(Error::Model(format!(
                    "{origin}: operand {k} has shape {s:?}; opset 8's Scan needs the same batch \
                     size ({b}) as axis 0 of every operand"
                )));
            }
            b
        } else {
            1
        };
        if let Some(lens) = &lens
            && (lens.len() as i64 != batch || lens.iter().any(|&l| l != len))
        {
            return Err(self.unsupported_node(
                n,
                origin,
                format!(
                    "sequence_lens is {lens:?}; onnxc unrolls a Scan whose sequences all have the \
                     full length {len}"
                ),
            ));
        }
        if len == 0 || batch == 0 {
            return Err(self.unsupported_node(
                n,
                origin,
                "its sequences are empty, so the shapes of its scan outputs are unknown",
            ));
        }
        if (len as u64).saturating_mul(batch as u64) > MAX_ITERATIONS as u64 {
            return Err(self.unsupported_node(
                n,
                origin,
                format!(
                    "it runs {} iterations; onnxc unrolls loops of at most {MAX_ITERATIONS} \
                     iterations",
                    (len as u64).saturating_mul(batch as u64)
                ),
            ));
        }
        let mut finals: Vec<Vec<ValueId>> = vec![Vec::new(); n_state];
        let mut outs_per_batch: Vec<Vec<ValueId>> = vec![Vec::new(); k_out];
        for b in 0..batch {
            // The batch entry's operands (opset 8), or the operands themselves.
            let entry: Vec<ValueId> = if batched {
                let mut ctx = self.helper_ctx(n, origin);
                operands
                    .iter()
                    .map(|&v| take(&mut ctx, v, 0, b))
                    .collect::<Result<_>>()?
            } else {
                operands.clone()
            };
            let mut states = entry[..n_state].to_vec();
            let mut elems: Vec<Vec<ValueId>> = vec![Vec::new(); k_out];
            for t in 0..len {
                self.count_iteration(n, origin, body, (b * len + t + 1) as usize)?;
                let mut args = states.clone();
                {
                    let mut ctx = self.helper_ctx(n, origin);
                    for j in 0..m {
                        let pos = if in_dirs[j] == 1 { len - 1 - t } else { t };
                        // In a batch entry the scan axis is one lower.
                        let a = axes[j] - first;
                        args.push(take(&mut ctx, entry[n_state + j], a, pos)?);
                    }
                }
                let outs = self.inline_body(body, &args, origin, "body")?;
                states = outs[..n_state].to_vec();
                for (k, &v) in outs[n_state..].iter().enumerate() {
                    elems[k].push(v);
                }
            }
            let mut ctx = self.helper_ctx(n, origin);
            for (k, mut e) in elems.into_iter().enumerate() {
                if out_dirs[k] == 1 {
                    e.reverse();
                }
                let r = ctx.rank(e[0]) as i64 + 1;
                let a = out_axes[k] - first as i64;
                if a < -r || a >= r {
                    return Err(Error::Model(format!(
                        "{origin}: scan output {k} has rank {r}; its axis {} is out of range",
                        out_axes[k]
                    )));
                }
                let a = if a < 0 { a + r } else { a } as usize;
                outs_per_batch[k].push(stack(&mut ctx, &e, a, &format!("scan output {k}"))?);
            }
            for (k, s) in states.into_iter().enumerate() {
                finals[k].push(s);
            }
        }
        let mut results = Vec::with_capacity(n_state + k_out);
        let mut ctx = self.helper_ctx(n, origin);
        for parts in finals.into_iter().chain(outs_per_batch) {
            results.push(if batched {
                stack(&mut ctx, &parts, 0, "the batch")?
            } else {
                parts[0]
            });
        }
        drop(ctx);
        if n.output.len() > results.len() {
            return Err(Error::Model(format!(
                "{origin}: the node has {} outputs, its body computes {n_state} state values and \
                 {k_out} scan outputs",
                n.output.len()
            )));
        }
        self.bind_outputs(n, origin, &results)
    }
}

/// Whether a Loop runs on.
#[derive(Copy, Clone, PartialEq)]
enum Running {
    Known(bool),
    /// A one-element bool computed when the model runs.
    RunTime(ValueId),
}

/// `cond ? a : b` element by element, `cond` a one-element bool (carried value `k`).
fn select_scalar(
    ctx: &mut Ctx,
    cond: ValueId,
    a: ValueId,
    b: ValueId,
    k: usize,
) -> Result<ValueId> {
    let (ta, tb) = (ctx.ty(a), ctx.ty(b));
    if ta != tb {
        return Err(ctx.unsupported(format!(
            "its condition is computed at run time and carried value {k} changes from {} {} to \
             {} {} in an iteration; onnxc needs one type and shape for it",
            tb.dtype,
            crate::ir::dim::fmt_shape(&tb.shape),
            ta.dtype,
            crate::ir::dim::fmt_shape(&ta.shape)
        )));
    }
    select_on(ctx, cond, a, b)
}

/// `a && b` of two one-element bools, as a scalar.
fn and_scalar(ctx: &mut Ctx, a: ValueId, b: ValueId) -> Result<ValueId> {
    if ctx.dtype(b) != DType::Bool || crate::ir::dim::num_elements(&ctx.shape(b)) != Dim::Known(1) {
        return Err(ctx.err(format!(
            "the body's condition output is {} {}; it must be a one-element bool",
            ctx.dtype(b),
            crate::ir::dim::fmt_shape(&ctx.shape(b))
        )));
    }
    let body = expr::and(
        expr::load(DType::Bool, 0, vec![expr::i(0); ctx.rank(a)]),
        expr::load(DType::Bool, 1, vec![expr::i(0); ctx.rank(b)]),
    );
    ctx.map(DType::Bool, vec![], vec![a, b], body)
}

/// `parts` (of one type and shape) stacked along a new axis `axis`.
fn stack(ctx: &mut Ctx, parts: &[ValueId], axis: usize, what: &str) -> Result<ValueId> {
    let ty = ctx.ty(parts[0]);
    if let Some(p) = parts.iter().find(|&&p| ctx.ty(p) != ty) {
        let other = ctx.ty(*p);
        return Err(ctx.err(format!(
            "the iterations' values of {what} differ in type: {} {} and {} {}; stacking them \
             needs one type and shape",
            ty.dtype,
            crate::ir::dim::fmt_shape(&ty.shape),
            other.dtype,
            crate::ir::dim::fmt_shape(&other.shape)
        )));
    }
    let mut one = ty.shape.clone();
    one.insert(axis, Dim::Known(1));
    let mut all = ty.shape.clone();
    all.insert(axis, Dim::Known(parts.len() as i64));
    let rows: Vec<ValueId> = parts
        .iter()
        .map(|&p| ctx.reshape(p, one.clone()))
        .collect::<Result<_>>()?;
    if rows.len() == 1 {
        return Ok(rows[0]);
    }
    ctx.add(Op::Concat { axis }, rows, TypeInfo::new(ty.dtype, all))
}
