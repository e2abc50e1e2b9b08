//! The steps that call runtime kernels: GEMM and convolution calls (operand views,
//! geometries, weights packed at compile time), the workspace scratch of every kernel step,
//! and what a kernel op (`crate::kernels`) sees of its step.

use super::*;
use crate::schedule::views::matmul_operand;
use onnxc_runtime::conv::ConvPath;

/// Dims of a step's f32 matmul: (batch dims of the output, m, n, k, B is one matrix).
fn matmul_dims(
    s: &Schedule,
    st: &Step,
    m: &MatMulOp,
    views: &[Option<schedule::StridedView>; 2],
) -> (usize, i64, i64, i64, bool) {
    let (sa, _) = matmul_operand(s, st, views, 0);
    let (sb, _) = matmul_operand(s, st, views, 1);
    let so = &s.values[st.output].shape;
    let rank = so.len();
    let k = if m.trans_a {
        sa[sa.len() - 2]
    } else {
        sa[sa.len() - 1]
    };
    let single_b = sb[..sb.len() - 2].iter().all(|&d| d == 1);
    (rank - 2, so[rank - 2], so[rank - 1], k, single_b)
}

/// B is packed at compile time when it is one constant matrix.
fn pack_b_at_compile_time(
    s: &Schedule,
    st: &Step,
    m: &MatMulOp,
    views: &[Option<schedule::StridedView>; 2],
) -> bool {
    let (_, _, _, _, single) = matmul_dims(s, st, m, views);
    single && views[1].is_none() && is_const(s, st.inputs[1])
}

/// The scratch a step's kernel call needs while it runs (bytes): shared, and per worker for
/// kernels that take the run's threads.
pub(super) fn scratch_need(s: &Schedule, st: &Step, opts: &LowerOptions) -> ScratchNeed {
    if let StepKind::Kernel(k) = &st.kind {
        let operands: Vec<Operand> = st.inputs.iter().map(|&v| operand(s, v)).collect();
        return k.scratch(&operands, operand(s, st.output));
    }
    if s.values[st.output].dtype != DType::F32 {
        return ScratchNeed::default();
    }
    match &st.kind {
        StepKind::Conv { op, input_planes } => {
            geometry(s, st, op, input_planes, opts).scratch(is_const(s, st.inputs[1]))
        }
        StepKind::ConvBlocked { conv, plain_input } => {
            blocked_conv_geometry(s, st, conv, *plain_input, opts.by_size)
                .map_or(ScratchNeed::default(), |g| g.scratch())
        }
        StepKind::MatMul { op: m, views } => {
            let (_, mm, n, k, _) = matmul_dims(s, st, m, views);
            onnxc_runtime::gemm::gemm_scratch(
                mm as usize,
                n as usize,
                k as usize,
                pack_b_at_compile_time(s, st, m, views),
            )
        }
        StepKind::Pool(p) => p
            .geometry(&s.values[st.inputs[0]].shape, &s.values[st.output].shape)
            .scratch(),
        _ => ScratchNeed::default(),
    }
}

/// Checks every call in a lowered step against the runtime's decoders: a kernel that
/// decodes a parameter blob must accept the blob compiled for it (it would return
/// `ONNXC_ERR_PARAMS` at run time), and the scratch its decoded geometry needs
/// (`kernels::planned_scratch`) must be what the step planned (none when the call passes
/// no scratch). An error is a compiler bug.
pub(super) fn check_calls(body: &[Stmt], planned: ScratchNeed) -> std::result::Result<(), String> {
    for st in body {
        match st {
            Stmt::For { body, .. } => check_calls(body, planned)?,
            Stmt::Call { kernel, args } if kernel.status => {
                let mut blob = None;
                let mut ints = Vec::new();
                let mut scratch = false;
                for a in args {
                    match a {
                        // The first (a geometry may follow: `onnxc_qconv`).
                        Arg::Params(p) if blob.is_none() => blob = Some(&p[..]),
                        Arg::Blob(b) if blob.is_none() => blob = Some(&b[..]),
                        // Integers computed at run time do not size anything the check needs.
                        Arg::Int(e) => ints.push(e.as_const().map_or(i64::MIN, Scalar::as_i64)),
                        Arg::Scratch { .. } => scratch = true,
                        _ => {}
                    }
                }
                let need = kernels::planned_scratch(kernel, blob, &ints)
                    .map_err(|e| format!("{} refuses its parameters: {e}", kernel.symbol))?
                    .unwrap_or_default();
                let have = if scratch {
                    planned
                } else {
                    ScratchNeed::default()
                };
                if need != have {
                    return Err(format!(
                        "{} needs scratch {need:?} for its parameters, the step has {have:?}",
                        kernel.symbol
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A convolution step's geometry, with the path its kernel takes (`ConvGeometry::path`).
pub(super) fn geometry(
    s: &Schedule,
    st: &Step,
    c: &ConvOp,
    input_planes: &Option<Vec<i64>>,
    opts: &LowerOptions,
) -> ConvGeometry<'static> {
    let mut g = own_geometry(s, st, c, input_planes, opts);
    // The path its sizes choose, or the sizes it is to choose at (the bound's, for a dim
    // taken at run time) where that path applies to it.
    let own = g.chosen_path();
    g.path = match (opts.decide_at.as_ref())
        .and_then(|d| d.get(schedule::layout::conv_index(&s.steps, st)?))
    {
        Some(sizes) => sizes.apply(&g).chosen_path(),
        None => own,
    };
    if g.validate().is_err() {
        g.path = own;
    }
    g
}

/// A convolution step's geometry at its own sizes, its path left to them.
fn own_geometry(
    s: &Schedule,
    st: &Step,
    c: &ConvOp,
    input_planes: &Option<Vec<i64>>,
    opts: &LowerOptions,
) -> ConvGeometry<'static> {
    let x = &s.values[st.inputs[0]].shape;
    let w = &s.values[st.inputs[1]].shape;
    let y = &s.values[st.output].shape;
    if x.len() == 3 {
        // A 1-D convolution is the 2-D one over a single row (same weights and tensor
        // layouts), so it takes every 2-D kernel path: depthwise in place, the indirect and
        // pixel-major products, the row-wise im2col packers.
        return ConvGeometry {
            n: x[0],
            c: x[1],
            m: w[0],
            group: c.group,
            input: [1, x[2]].into(),
            kernel: [1, w[2]].into(),
            output: [1, y[2]].into(),
            strides: [1, c.strides[0]].into(),
            dilations: [1, c.dilations[0]].into(),
            pads: [0, c.pads_begin[0]].into(),
            wide_simd: opts.wide_simd,
            no_winograd: opts.no_winograd || c.exact,
            input_planes: input_planes.clone().unwrap_or_default().into(),
            path: ConvPath::BySize,
        };
    }
    ConvGeometry {
        n: x[0],
        c: x[1],
        m: w[0],
        group: c.group,
        input: x[2..].into(),
        kernel: w[2..].into(),
        output: y[2..].into(),
        strides: c.strides[..].into(),
        dilations: c.dilations[..].into(),
        pads: c.pads_begin[..].into(),
        wide_simd: opts.wide_simd,
        no_winograd: opts.no_winograd || c.exact,
        input_planes: input_planes.clone().unwrap_or_default().into(),
        path: ConvPath::BySize,
    }
}

/// The geometry of a blocked convolution step (blocked shapes `[n, c/8, h, w, 8]`; a plain
/// input `[n, c, h, w]`).
///
/// With `by_size` off (a dim taken at run time), depthwise planes read in place at every
/// size (`BlockedConv::pad_planes`): the padded copy is chosen by the plane's size.
pub(super) fn blocked_conv_geometry(
    s: &Schedule,
    st: &Step,
    c: &ConvOp,
    plain_input: bool,
    by_size: bool,
) -> Option<BlockedConv> {
    let plain = |v: SvId| {
        let b = &s.values[v].shape;
        vec![b[0], b[1] * b[4], b[2], b[3]]
    };
    let x = if plain_input {
        s.values[st.inputs[0]].shape.clone()
    } else {
        plain(st.inputs[0])
    };
    let g = schedule::layout::blocked_geometry(s, st, c, &x, &plain(st.output), plain_input)?;
    Some(BlockedConv {
        pad_planes: by_size,
        ..g
    })
}

impl StepCx<'_> {
    /// Batched matmul: sgemm per batch for f32, a generic reduction otherwise. Operands are
    /// read through their strides (`matmul_operand`), so absorbed transposes cost nothing.
    pub(super) fn matmul(
        &self,
        m: &MatMulOp,
        views: &[Option<schedule::StridedView>; 2],
        scratch: Option<u64>,
    ) -> Result<Vec<Stmt>> {
        let (a, b, out) = (self.st.inputs[0], self.st.inputs[1], self.st.output);
        let (sa, sta) = matmul_operand(self.s, self.st, views, 0);
        let (sb, stb) = matmul_operand(self.s, self.st, views, 1);
        let so = self.shape(out).to_vec();
        let dt = self.s.values[out].dtype;
        let rank = so.len();
        let nb = rank - 2;
        let (mm, nn) = (so[rank - 2], so[rank - 1]);
        let k = if m.trans_a {
            sa[sa.len() - 2]
        } else {
            sa[sa.len() - 1]
        };
        // Offset of operand batch element at the output batch position (vars 0..nb).
        let batch_off = |shape: &[i64], strides: &[i64]| -> E {
            let r = shape.len();
            let mut off = expr::i(0);
            for d in 0..r - 2 {
                let od = nb - (r - 2) + d;
                if shape[d] != 1 {
                    off = expr::add(off, expr::mul(expr::var(od as u32), expr::i(strides[d])));
                }
            }
            off
        };
        // (row stride, column stride) of the matrix the product reads: A as m×k, B as k×n.
        let inner = |shape: &[i64], strides: &[i64], trans: bool| -> (i64, i64) {
            let r = shape.len();
            if trans {
                (strides[r - 1], strides[r - 2])
            } else {
                (strides[r - 2], strides[r - 1])
            }
        };
        if dt == DType::F32 {
            let scratch =
                scratch.ok_or_else(|| Error::Internal("matmul without scratch".into()))?;
            let c_off = flat(
                &(0..nb as u32)
                    .map(expr::var)
                    .chain([expr::i(0), expr::i(0)])
                    .collect::<Vec<_>>(),
                &so,
            );
            let (ars, acs) = inner(&sa, &sta, m.trans_a);
            let (ta, lda) = schedule::views::gemm_operand(mm, k, ars, acs).ok_or_else(|| {
                Error::Internal("matmul operand A has neither rows nor columns contiguous".into())
            })?;
            let a_args = vec![
                Arg::Int(expr::i(mm)),
                Arg::Int(expr::i(nn)),
                Arg::Int(expr::i(k)),
                Arg::Ptr {
                    buf: self.buf(a),
                    offset: batch_off(&sa, &sta),
                },
                Arg::Int(expr::i(lda)),
                Arg::Int(expr::i(ta as i64)),
            ];
            let (bias, residual, clamp) = self.epilogue_args(c_off.clone());
            let tail = vec![
                Arg::Ptr {
                    buf: self.buf(out),
                    offset: c_off,
                },
                Arg::Int(expr::i(nn)),
                Arg::Null,
                bias,
                residual,
                clamp,
                Arg::Scratch { offset: scratch },
                Arg::Threads,
            ];
            let call = if pack_b_at_compile_time(self.s, self.st, m, views) {
                let ldb = sb[sb.len() - 1];
                let key = (b, m.trans_b, k, nn, ldb);
                let known = self.packed_b.borrow().get(&key).copied();
                let pb = match known {
                    Some(pb) => pb,
                    None => {
                        let bm = const_f32(self.s, b);
                        let mut packed =
                            vec![0f32; onnxc_runtime::gemm::packed_b_len(k as usize, nn as usize)];
                        // SAFETY: bm holds the k×n (or n×k) matrix; packed has room for its
                        // panels.
                        unsafe {
                            onnxc_runtime::gemm::pack::pack_b(
                                bm.as_ptr(),
                                ldb as usize,
                                m.trans_b,
                                k as usize,
                                nn as usize,
                                packed.as_mut_ptr(),
                            )
                        };
                        let pb = self.new_const(&packed);
                        self.packed_b.borrow_mut().insert(key, pb);
                        pb
                    }
                };
                let mut args = a_args;
                args.push(Arg::start(pb));
                args.extend(tail);
                Stmt::call(&kernels::SGEMM_PB, args)?
            } else {
                let (brs, bcs) = inner(&sb, &stb, m.trans_b);
                let (tb, ldb) =
                    schedule::views::gemm_operand(k, nn, brs, bcs).ok_or_else(|| {
                        Error::Internal(
                            "matmul operand B has neither rows nor columns contiguous".into(),
                        )
                    })?;
                let mut args = a_args;
                args.extend([
                    Arg::Ptr {
                        buf: self.buf(b),
                        offset: batch_off(&sb, &stb),
                    },
                    Arg::Int(expr::i(ldb)),
                    Arg::Int(expr::i(tb as i64)),
                ]);
                args.extend(tail);
                Stmt::call(&kernels::SGEMM, args)?
            };
            return Ok(self.nest(&so[..nb], 0, vec![call], false));
        }
        // Generic: out[b.., i, j] = sum_k A[b.., i, k] * B[b.., k, j].
        let kv = expr::var(rank as u32);
        let (i, j) = (expr::var(nb as u32), expr::var(nb as u32 + 1));
        let a_rc = if m.trans_a {
            (kv.clone(), i)
        } else {
            (i, kv.clone())
        };
        let b_rc = if m.trans_b { (j, kv) } else { (kv, j) };
        let (ra, rb) = (sa.len(), sb.len());
        let a_off = expr::add(
            batch_off(&sa, &sta),
            expr::add(
                expr::mul(a_rc.0, expr::i(sta[ra - 2])),
                expr::mul(a_rc.1, expr::i(sta[ra - 1])),
            ),
        );
        let b_off = expr::add(
            batch_off(&sb, &stb),
            expr::add(
                expr::mul(b_rc.0, expr::i(stb[rb - 2])),
                expr::mul(b_rc.1, expr::i(stb[rb - 1])),
            ),
        );
        let ct = dt.compute_type();
        let body = expr::binary(
            expr::BinOp::Mul,
            expr::cast(expr::load(dt, self.buf(a), vec![a_off]), ct),
            expr::cast(expr::load(dt, self.buf(b), vec![b_off]), ct),
        );
        // Floats sum their products in the compute type and round once when stored (16-bit
        // floats as numpy's matmul does); integers wrap each product to their type.
        let body = if dt.is_float() {
            body
        } else {
            expr::cast(body, dt)
        };
        let red = Stmt::Reduce {
            buf: self.buf(out),
            offset: flat(&out_index(rank), &so),
            kind: ReduceKind::Sum,
            loops: vec![(rank as u32, Count::Fixed(k))],
            body,
            epilogue: None,
        };
        Ok(self.nest(&so, 0, vec![red], false))
    }

    /// A convolution over blocked tensors (`schedule::layout`): weights packed for the
    /// blocked kernel (the epilogue's scale is already folded in).
    pub(super) fn conv_blocked(
        &self,
        c: &ConvOp,
        plain_input: bool,
        scratch: Option<u64>,
    ) -> Result<Vec<Stmt>> {
        let g = blocked_conv_geometry(self.s, self.st, c, plain_input, self.opts.by_size)
            .ok_or_else(|| Error::Internal("blocked conv with an unsupported geometry".into()))?;
        let (x, w, out) = (self.st.inputs[0], self.st.inputs[1], self.st.output);
        let (mut bias, residual, clamp) = self.epilogue_args(expr::i(0));
        let mut weights = const_f32(self.s, w);
        let m = self.s.values[w].shape[0] as usize;
        if g.m > m {
            // Output channels rounded up to a block (`layout::pads_outputs`): zero filters
            // and zero biases for the lanes the plain form drops.
            weights.resize(weights.len() / m * g.m, 0.0);
            if let Some(b) = self.st.epilogue.as_ref().and_then(|e| e.bias) {
                let mut b = const_f32(self.s, self.st.inputs[b]);
                if b.len() != m {
                    return Err(Error::Internal(
                        "a padded blocked conv's bias is not a constant per channel".into(),
                    ));
                }
                b.resize(g.m, 0.0);
                bias = Arg::start(self.new_const(&b));
            }
        }
        let wbuf = self.new_const(&g.pack_weights(&weights));
        let scratch = match scratch {
            Some(o) => Arg::Scratch { offset: o },
            None => Arg::Null,
        };
        Ok(vec![Stmt::call(
            &kernels::CONV_NCHWC_F32,
            vec![
                Arg::Params(g.encode()),
                Arg::start(self.buf(x)),
                Arg::start(wbuf),
                bias,
                residual,
                clamp,
                Arg::start(self.buf(out)),
                scratch,
                Arg::Threads,
            ],
        )?])
    }

    pub(super) fn conv(
        &self,
        c: &ConvOp,
        input_planes: &Option<Vec<i64>>,
        scratch: Option<u64>,
    ) -> Result<Vec<Stmt>> {
        let (x, w, out) = (self.st.inputs[0], self.st.inputs[1], self.st.output);
        let dt = self.s.values[out].dtype;
        if input_planes.is_some() && dt != DType::F32 {
            return Err(Error::Internal(
                "a channel gather absorbed into a non-float convolution".into(),
            ));
        }
        if dt == DType::F32 {
            let g = geometry(self.s, self.st, c, input_planes, self.opts);
            let scratch = match scratch {
                Some(o) => Arg::Scratch { offset: o },
                None => Arg::Null,
            };
            let (bias, residual, clamp) = self.epilogue_args(expr::i(0));
            let (wbuf, packed) = if is_const(self.s, w) {
                (self.new_const(&g.pack_weights(&const_f32(self.s, w))), 1)
            } else {
                (self.buf(w), 0)
            };
            return Ok(vec![Stmt::call(
                &kernels::CONV_F32,
                vec![
                    Arg::Params(g.encode()),
                    Arg::start(self.buf(x)),
                    Arg::start(wbuf),
                    Arg::Int(expr::i(packed)),
                    bias,
                    residual,
                    clamp,
                    Arg::start(self.buf(out)),
                    scratch,
                    Arg::Threads,
                ],
            )?]);
        }
        // Generic direct convolution as a reduction over (c/group, kernel...).
        let (xs, ws, ys) = (
            self.shape(x).to_vec(),
            self.shape(w).to_vec(),
            self.shape(out).to_vec(),
        );
        let rank = ys.len();
        let nsp = rank - 2;
        let cig = ws[1];
        let cog = ws[0] / c.group;
        let ci = expr::var(rank as u32);
        let group = expr::idiv(expr::var(1), cog);
        let chan = expr::add(expr::mul(group, expr::i(cig)), ci.clone());
        let mut xi = vec![expr::var(0), chan];
        let mut wi = vec![expr::var(1), ci];
        let mut inside = expr::konst(DType::Bool, crate::ir::Scalar::B(true));
        for d in 0..nsp {
            let r = expr::var((rank + 1 + d) as u32);
            let p = expr::sub(
                expr::add(
                    expr::mul(expr::var((2 + d) as u32), expr::i(c.strides[d])),
                    expr::mul(r.clone(), expr::i(c.dilations[d])),
                ),
                expr::i(c.pads_begin[d]),
            );
            inside = expr::and(
                inside,
                expr::and(
                    expr::ge(p.clone(), expr::i(0)),
                    expr::lt(p.clone(), expr::i(xs[2 + d])),
                ),
            );
            xi.push(expr::clamp(p, 0, xs[2 + d] - 1));
            wi.push(r);
        }
        let ct = dt.compute_type();
        let xv = expr::cast(expr::load(dt, self.buf(x), vec![flat(&xi, &xs)]), ct);
        let wv = expr::cast(expr::load(dt, self.buf(w), vec![flat(&wi, &ws)]), ct);
        let prod = expr::select(
            inside,
            expr::binary(expr::BinOp::Mul, xv, wv),
            expr::f(ct, 0.0),
        );
        let mut loops = vec![(rank as u32, cig)];
        for d in 0..nsp {
            loops.push(((rank + 1 + d) as u32, ws[2 + d]));
        }
        let epilogue = self.st.inputs.get(2).map(|&b| {
            let acc = expr::load(ct, EPILOGUE_ACC, vec![]);
            let bv = expr::cast(expr::load(dt, self.buf(b), vec![expr::var(1)]), ct);
            expr::cast(expr::binary(expr::BinOp::Add, acc, bv), dt)
        });
        let epilogue = epilogue
            .or_else(|| (ct != dt).then(|| expr::cast(expr::load(ct, EPILOGUE_ACC, vec![]), dt)));
        let red = Stmt::Reduce {
            buf: self.buf(out),
            offset: flat(&out_index(rank), &ys),
            kind: ReduceKind::Sum,
            loops: fixed_loops(loops),
            body: prod,
            epilogue,
        };
        Ok(self.nest(&ys, 0, vec![red], false))
    }
}

/// A kernel op's step being lowered (`kernels::LowerCx`).
pub(super) struct KernelStep<'c, 'a> {
    pub(super) cx: &'c StepCx<'a>,
    pub(super) scratch: Option<u64>,
}

impl LowerCx for KernelStep<'_, '_> {
    fn operand(&self, k: usize) -> Operand<'_> {
        operand(self.cx.s, self.cx.st.inputs[k])
    }
    fn result(&self) -> Operand<'_> {
        operand(self.cx.s, self.cx.st.output)
    }
    fn has_operand(&self, k: usize) -> bool {
        k < self.cx.st.inputs.len()
    }
    fn operand_arg(&self, k: usize) -> Arg {
        Arg::start(self.cx.buf(self.cx.st.inputs[k]))
    }
    fn result_arg(&self) -> Arg {
        Arg::start(self.cx.buf(self.cx.st.output))
    }
    fn constant_f32(&self, k: usize) -> Option<Vec<f32>> {
        let v = self.cx.st.inputs[k];
        is_const(self.cx.s, v).then(|| const_f32(self.cx.s, v))
    }
    fn new_constant_f32(&self, data: &[f32]) -> Arg {
        Arg::start(self.cx.new_const(data))
    }
    fn scratch(&self) -> Option<Arg> {
        self.scratch.map(|offset| Arg::Scratch { offset })
    }
    fn string_space(&self) -> Option<(Arg, i64)> {
        self.cx
            .string_space()
            .map(|(buf, bytes)| (Arg::start(buf), bytes as i64))
    }
}
