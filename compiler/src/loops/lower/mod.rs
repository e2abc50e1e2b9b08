//! Schedule → loop IR. Multi-dimensional loads become flat offsets, steps become loop
//! nests, f32 matmul/conv become kernel calls and other element types get generic loops.

mod calls;

use super::{Arg, BufId, Buffer, Count, Func, IoDesc, Loc, Program, Stmt};
use crate::error::{Error, Result};
use crate::ir::DType;
use crate::ir::expr::{self, E, ExprKind};
use crate::ir::graph::{ConvOp, MatMulOp, ReduceKind};
use crate::ir::interp::strides_of;
use crate::ir::tensor::Scalar;
use crate::kernels::{LowerCx, Operand};
use crate::schedule::{self, EPILOGUE_ACC, Schedule, Step, StepKind, Storage, SvId};
use calls::{KernelStep, check_calls, scratch_need};
use onnxc_runtime::conv::ConvGeometry;
use onnxc_runtime::kernels;
use onnxc_runtime::nchwc::BlockedConv;
use onnxc_runtime::par::ScratchNeed;

/// What lowering needs to know of the target.
///
/// No `Default`: `by_size` false is a probe's lowering, which a default must not pick
/// silently; every field is set where the options are made.
#[derive(Clone, Debug)]
pub struct LowerOptions {
    /// The target runs the 512-bit (AVX-512) kernels: weight layouts whose best choice
    /// depends on the vector width follow it (`ConvGeometry::wide_simd`).
    pub wide_simd: bool,
    /// Never use Winograd (`ConvGeometry::no_winograd`).
    pub no_winograd: bool,
    /// Maps that are exactly sigmoid, SiLU or tanh of one contiguous float32 operand call
    /// the runtime's 16-lane kernel instead of 4-lane generated code (`activation_form`);
    /// off at -O0, so the conformance runs check both.
    pub activation_kernels: bool,
    /// Choices may follow sizes (maps shorter than 16 stay generated code). Off when a dim
    /// is taken at run time: the choice would differ between the values it is lowered at
    /// (`loops::dims`).
    pub by_size: bool,
    /// The sizes to choose each convolution's kernel path at
    /// (`schedule::layout::ConvSizes`), else its own.
    pub decide_at: Option<std::sync::Arc<[schedule::layout::ConvSizes]>>,
    /// Float constants read at a constant offset (a quantization's scales) stay loads
    /// instead of literals folded into the arithmetic around them
    /// (`frontend::ImportOptions::keep_scales`).
    pub keep_scales: bool,
}

/// Most workspace bytes the strings a model makes may take (`KernelOp::string_bytes`).
const MAX_STRING_SPACE: u64 = 1 << 40;

/// The string space of each step that makes strings (`KernelOp::string_bytes`): (workspace
/// offset, bytes), one region each from `base`, which no other step reuses, so the strings
/// live to the end of the run; and where the regions end.
fn plan_strings(sched: &Schedule, base: u64) -> Result<(Vec<Option<(u64, u64)>>, u64)> {
    let mut at = vec![None; sched.steps.len()];
    let mut end = base;
    for (i, st) in sched.steps.iter().enumerate() {
        let StepKind::Kernel(k) = &st.kind else {
            continue;
        };
        let operands: Vec<Operand> = st.inputs.iter().map(|&v| operand(sched, v)).collect();
        let bytes = k.string_bytes(&operands, operand(sched, st.output));
        if bytes == 0 {
            continue;
        }
        at[i] = Some((end, bytes));
        end = match end.checked_add(bytes).filter(|&e| e <= MAX_STRING_SPACE) {
            Some(e) => e.next_multiple_of(schedule::memory::ALIGN),
            None => {
                let node = st.origins.first().map_or(String::new(), |o| {
                    format!(" of node '{}' ({})", o.name, o.op_type)
                });
                return Err(Error::Model(format!(
                    "the strings the model makes ({} {}{node}) need more than \
                     {MAX_STRING_SPACE} bytes of workspace; give a smaller --string-bytes",
                    k.name(),
                    k.attrs()
                )));
            }
        };
    }
    Ok((at, end))
}

/// Plans the arena (in place, so dumps of `s` show offsets) and lowers every step.
pub fn lower(sched: &mut Schedule, opts: &LowerOptions) -> Result<Program> {
    // The arena holds the values; after it come the string space of the steps that make
    // strings, then the kernels' scratch (`Program`): a step's call finds its shared area at
    // `scratch_base`, its workers' slots after it.
    schedule::memory::plan(sched);
    let strings_base = sched.arena_size.next_multiple_of(schedule::memory::ALIGN);
    let (string_at, strings_end) = plan_strings(sched, strings_base)?;
    let scratch_base = strings_end;
    let s = &*sched;
    let mut buffers = Vec::new();
    let mut buf_of = vec![u32::MAX; s.values.len()];
    let loc_of = |v: SvId| -> Option<Loc> {
        Some(match &s.values[v].storage {
            Storage::Input(k) => Loc::Input(*k),
            Storage::Output(k) => Loc::Output(*k),
            Storage::Const(t) => Loc::Const(t.data.clone()),
            Storage::Arena(o) => Loc::Arena(*o),
            Storage::View(_) | Storage::Slice { .. } => return None,
        })
    };
    for (v, val) in s.values.iter().enumerate() {
        if let Some(loc) = loc_of(v) {
            buf_of[v] = buffers.len() as u32;
            buffers.push(Buffer {
                dtype: val.dtype,
                len: val.len(),
                loc,
                offset: 0,
                offset_at: None,
            });
        }
    }
    // Slices (and views of slices) are buffers of their own at an offset in their owner.
    let places = s.places();
    for v in 0..s.values.len() {
        if buf_of[v] != u32::MAX {
            continue;
        }
        let (owner, off) = places[v];
        if off == 0 && matches!(s.values[v].storage, Storage::View(_)) {
            buf_of[v] = buf_of[owner];
            continue;
        }
        let val = &s.values[v];
        let loc = loc_of(owner).expect("owners have storage");
        buf_of[v] = buffers.len() as u32;
        buffers.push(Buffer {
            dtype: val.dtype,
            len: val.len(),
            loc,
            offset: off,
            offset_at: None,
        });
    }
    let extra = std::cell::RefCell::new(Vec::new());
    let packed_b = std::cell::RefCell::new(std::collections::HashMap::new());
    let first_extra = buffers.len() as u32;
    let mut funcs = Vec::new();
    let mut scratch = ScratchNeed::default();
    for (i, st) in s.steps.iter().enumerate() {
        let cx = StepCx {
            s,
            st,
            opts,
            buf_of: &buf_of,
            extra: &extra,
            packed_b: &packed_b,
            first_extra,
            strings: string_at[i],
        };
        let need = scratch_need(s, st, opts).rounded();
        let scratch_off = (need != ScratchNeed::default()).then_some(scratch_base);
        let body = cx.lower(scratch_off)?;
        let origin: Vec<String> = st
            .origins
            .iter()
            .map(|o| format!("'{}' ({})", o.name, o.op_type))
            .collect();
        check_calls(&body, need)
            .map_err(|e| Error::Internal(format!("step {i} ({}): {e}", origin.join(", "))))?;
        // Maps, reductions, copies and batched matmuls write each output element in one
        // iteration of their top-level loops; a scatter may write one element twice.
        let parallel = matches!(
            st.kind,
            StepKind::Map { .. }
                | StepKind::Reduce { .. }
                | StepKind::MatMul { .. }
                | StepKind::Concat { .. }
                | StepKind::ConcatRest { .. }
                | StepKind::Copy
        );
        let func = Func {
            name: format!("step{i}"),
            origin: origin.join(", "),
            body,
            parallel,
        };
        // A loop of kernel calls split over the workers gives each worker's calls a whole
        // scratch of their own (a slot); run whole, its calls take the shared area and as
        // many slots as there are workers, which fits in as many of these slots.
        let need = if func
            .body
            .iter()
            .any(|s| super::par::parallel_loop(&func, s).is_some_and(|p| p.calls))
        {
            ScratchNeed {
                shared: 0,
                per_worker: need.shared + need.per_worker,
            }
        } else {
            need
        };
        scratch.shared = scratch.shared.max(need.shared);
        scratch.per_worker = scratch.per_worker.max(need.per_worker);
        funcs.push(func);
    }
    buffers.extend(extra.into_inner());
    let io = |ios: &[schedule::Io]| -> Vec<IoDesc> {
        ios.iter()
            .map(|o| {
                let v = &s.values[o.value];
                let (dtype, shape) = match (&o.packed, o.map) {
                    (Some(p), _) => p.clone(),
                    (None, Some(m)) => (m.value, vec![]),
                    (None, None) => (v.dtype, v.shape.clone()),
                };
                IoDesc {
                    name: o.name.clone(),
                    dtype,
                    shape,
                    keys: o.keys.clone(),
                    batched: false,
                    dims_at: None,
                    hidden: false,
                    map_key: o.map.map(|m| m.key),
                    run_dims: vec![],
                }
            })
            .collect()
    };
    Ok(Program {
        name: s.name.clone(),
        buffers,
        funcs,
        workspace_size: scratch_base + (scratch.shared + scratch.per_worker) as u64,
        scratch_base,
        string_bytes: strings_end - strings_base,
        scratch_shared: scratch.shared as u64,
        scratch_per_worker: scratch.per_worker as u64,
        inputs: io(&s.inputs),
        outputs: io(&s.outputs),
        // The driver groups them (it knows which outputs are hidden).
        input_groups: vec![],
        output_groups: vec![],
        chunks: vec![],
        batch_bound: 0,
        fixed: vec![],
        run_dims: vec![],
        conv_sizes: conv_sizes(s, opts),
    })
}

/// The sizes each convolution's choices were made at (`schedule::layout::ConvSizes`, in
/// order): its own, or those `opts` gave.
fn conv_sizes(s: &Schedule, opts: &LowerOptions) -> Vec<schedule::layout::ConvSizes> {
    use schedule::layout::ConvSizes;
    let convs = s.steps.iter().filter_map(|st| match &st.kind {
        StepKind::Conv { op, input_planes } => Some(ConvSizes::of(&calls::geometry(
            s,
            st,
            op,
            input_planes,
            opts,
        ))),
        StepKind::ConvBlocked { conv, plain_input } => {
            let g = calls::blocked_conv_geometry(s, st, conv, *plain_input, opts.by_size)?;
            let v = |d: [usize; 2]| d.iter().map(|&x| x as i64).collect();
            Some(ConvSizes {
                n: g.n as i64,
                input: v(g.input),
                output: v(g.output),
            })
        }
        _ => None,
    });
    let own: Vec<ConvSizes> = convs.collect();
    match &opts.decide_at {
        Some(d) if d.len() == own.len() => d.to_vec(),
        _ => own,
    }
}

/// Loops of constant extents as a reduction's.
fn fixed_loops(loops: Vec<(u32, i64)>) -> Vec<(u32, Count)> {
    loops
        .into_iter()
        .map(|(v, n)| (v, Count::Fixed(n)))
        .collect()
}

fn is_const(s: &Schedule, v: SvId) -> bool {
    matches!(s.values[s.root(v)].storage, Storage::Const(_))
}

/// The f32 contents of a constant value.
fn const_f32(s: &Schedule, v: SvId) -> Vec<f32> {
    match &s.values[s.root(v)].storage {
        Storage::Const(t) => t
            .data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        _ => Vec::new(),
    }
}

/// Value `v` as a kernel op sees it.
fn operand(s: &Schedule, v: SvId) -> Operand<'_> {
    Operand {
        dtype: s.values[v].dtype,
        shape: &s.values[v].shape,
        constant: is_const(s, v),
    }
}

/// Flat row-major offset of a multi-index into a buffer of `shape`.
pub fn flat(index: &[E], shape: &[i64]) -> E {
    let strides = strides_of(shape);
    let mut off = expr::i(0);
    for (d, ix) in index.iter().enumerate() {
        if shape[d] == 1 {
            continue;
        }
        off = expr::add(off, expr::mul(ix.clone(), expr::i(strides[d])));
    }
    off
}

/// Merges adjacent loops (outer `a`, inner `b` of extent `B`) that the expressions use only
/// to address memory as one run: every load index — and every index in `offsets`, such as
/// a store's — is `c·(a·B + b) + rest`, and neither variable appears anywhere else (an
/// iota, a comparison). The set of addresses touched is unchanged, so bounds still hold.
/// For reductions, a GlobalAveragePool's `[h, w]` window becomes one loop of `h·w` that
/// codegen vectorizes along the whole run instead of along rows of `w` (MobileNet's
/// 1024×7×7 pool: 0.031 → 0.005 ms); for maps, an elementwise op over `[c, h, w]` becomes
/// one loop over `c·h·w` (ShuffleNet's ReLU after a concat, 136×28×28: 0.022 → 0.013 ms), where
/// the row loops had cost a vector tail per 28-element row. Loops of one iteration merge
/// unconditionally.
fn collapse_loops(loops: &mut Vec<(u32, i64)>, exprs: &mut [&mut E], offsets: &mut [&mut E]) {
    fn index_ok(ix: &E, a: u32, b: u32, eb: i64) -> bool {
        match (expr::linear_coeff(ix, a), expr::linear_coeff(ix, b)) {
            (Some(ca), Some(cb)) => cb.checked_mul(eb) == Some(ca),
            _ => false,
        }
    }
    fn mergeable(
        e: &E,
        a: u32,
        b: u32,
        eb: i64,
        seen: &mut std::collections::HashSet<*const expr::Expr>,
    ) -> bool {
        if !seen.insert(std::sync::Arc::as_ptr(e)) {
            return true;
        }
        match &e.kind {
            ExprKind::Var(v) => *v != a && *v != b,
            // A data-dependent index (a table read, `schedule::lut`) qualifies when its
            // loads do.
            ExprKind::Load { index, .. } => index
                .iter()
                .all(|ix| index_ok(ix, a, b, eb) || mergeable(ix, a, b, eb, seen)),
            _ => e
                .children()
                .into_iter()
                .all(|c| mergeable(c, a, b, eb, seen)),
        }
    }
    let mut k = 0;
    while k + 1 < loops.len() {
        let ((a, ea), (b, eb)) = (loops[k], loops[k + 1]);
        let mut seen = Default::default();
        // A loop of one iteration goes whatever its variable does (it is always 0).
        let ok = ea == 1
            || (exprs.iter().all(|e| mergeable(e, a, b, eb, &mut seen))
                && offsets.iter().all(|o| index_ok(o, a, b, eb)));
        if ok {
            let drop_a = |e: &E| {
                expr::rewrite(e, &mut |x| match x.kind {
                    ExprKind::Var(v) if v == a => Some(expr::i(0)),
                    _ => None,
                })
            };
            for e in exprs.iter_mut() {
                **e = drop_a(e);
            }
            for o in offsets.iter_mut() {
                **o = drop_a(o);
            }
            loops[k + 1].1 = ea * eb;
            loops.remove(k);
        } else {
            k += 1;
        }
    }
}

/// The runtime activation a lowered map body is, if it is exactly one: `sigmoid(α·x)`,
/// `x·sigmoid(α·x)` (either operand order; α a float constant — a literal or a one-element
/// constant buffer, `scalar` — 1 when absent), `tanh(x)`, HardSigmoid's
/// `max(0, min(1, α·x + β))` or HardSwish's `x·max(0, min(1, α·x + β))` (the frontend's
/// forms), with `x` a float32 load of one buffer at the loop variable itself. Returns
/// (kind, [α, β], buffer). Anything else — other operands, other index forms, more
/// arithmetic fused in — stays generated code.
fn activation_form(
    value: &E,
    var: u32,
    scalar: &dyn Fn(BufId) -> Option<f32>,
) -> Option<(i64, [f32; 2], BufId)> {
    use crate::ir::expr::{BinOp, UnOp};
    use onnxc_runtime::activation::{GELU_TANH, HARDSIGMOID, HARDSWISH, SIGMOID, SILU, TANH};
    let load = |e: &E| match &e.kind {
        ExprKind::Load { input, index }
            if e.dtype == DType::F32
                && matches!(&index[..], [ix] if matches!(ix.kind, ExprKind::Var(v) if v == var)) =>
        {
            Some(*input)
        }
        _ => None,
    };
    let constant = |e: &E| match (&e.kind, e.dtype) {
        (ExprKind::Const(c), DType::F32) => Some(c.as_f64() as f32),
        (ExprKind::Load { input, index }, DType::F32)
            if index.iter().all(|i| i.as_const().is_some()) =>
        {
            scalar(*input)
        }
        _ => None,
    };
    // x or α·x: (buffer, α).
    let scaled = |e: &E| -> Option<(BufId, f32)> {
        if let Some(b) = load(e) {
            return Some((b, 1.0));
        }
        match &e.kind {
            ExprKind::Binary(BinOp::Mul, a, b) => {
                match (load(a), constant(b), constant(a), load(b)) {
                    (Some(x), Some(c), _, _) | (_, _, Some(c), Some(x)) => Some((x, c)),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    // max(0, min(1, α·x + β)): (buffer, α, β).
    let hard = |e: &E| -> Option<(BufId, f32, f32)> {
        let ExprKind::Binary(BinOp::Max, z, inner) = &e.kind else {
            return None;
        };
        let ExprKind::Binary(BinOp::Min, o, t) = &inner.kind else {
            return None;
        };
        if constant(z)? != 0.0 || constant(o)? != 1.0 {
            return None;
        }
        let ExprKind::Binary(BinOp::Add, ax, be) = &t.kind else {
            return None;
        };
        let (xb, al) = scaled(ax)?;
        Some((xb, al, constant(be)?))
    };
    let near =
        |e: &E, want: f64| constant(e).is_some_and(|c| (c as f64 - want).abs() <= 1e-6 * want);
    let binary = |e: &E, op: BinOp| match &e.kind {
        ExprKind::Binary(o, a, b) if *o == op => Some((a.clone(), b.clone())),
        _ => None,
    };
    // c·e or e·c with c near `want`: e.
    let times = |e: &E, want: f64| -> Option<E> {
        let (a, b) = binary(e, BinOp::Mul)?;
        if near(&a, want) {
            Some(b)
        } else if near(&b, want) {
            Some(a)
        } else {
            None
        }
    };
    // x³ as pow(x, 3), x·x·x or x·(x·x): x's buffer.
    let cube = |e: &E| -> Option<BufId> {
        if let Some((x, p)) = binary(e, BinOp::Pow) {
            return near(&p, 3.0).then(|| load(&x)).flatten();
        }
        let (a, b) = binary(e, BinOp::Mul)?;
        let square = |s: &E| {
            let (p, q) = binary(s, BinOp::Mul)?;
            let x = load(&p)?;
            (load(&q)? == x).then_some(x)
        };
        match (load(&a), load(&b)) {
            (Some(x), None) => (square(&b)? == x).then_some(x),
            (None, Some(x)) => (square(&a)? == x).then_some(x),
            _ => None,
        }
    };
    // GELU's tanh approximation, ½x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) as GPT-2 exports
    // it and Gelu(approximate = "tanh") and FastGelu build it: x's buffer.
    let gelu_tanh = |half_x: &E, gate: &E| -> Option<BufId> {
        let xb = load(&times(half_x, 0.5)?)?;
        let (a, b) = binary(gate, BinOp::Add)?;
        let t = if near(&a, 1.0) {
            b
        } else if near(&b, 1.0) {
            a
        } else {
            return None;
        };
        let ExprKind::Unary(UnOp::Tanh, arg) = &t.kind else {
            return None;
        };
        let inner = times(arg, (2.0 / std::f64::consts::PI).sqrt())?;
        let (p, q) = binary(&inner, BinOp::Add)?;
        let cubed = |e: &E| cube(&times(e, 0.044715)?);
        let ok = match (load(&p), load(&q)) {
            (Some(x), _) if cubed(&q) == Some(x) => true,
            (_, Some(x)) if cubed(&p) == Some(x) => true,
            _ => false,
        };
        (ok && p.dtype == DType::F32)
            .then_some(xb)
            .filter(|&x| load(&p) == Some(x) || load(&q) == Some(x))
    };
    if value.dtype != DType::F32 {
        return None;
    }
    if let Some((b, al, be)) = hard(value) {
        return Some((HARDSIGMOID, [al, be], b));
    }
    match &value.kind {
        ExprKind::Unary(UnOp::Sigmoid, a) => scaled(a).map(|(b, al)| (SIGMOID, [al, 0.0], b)),
        ExprKind::Unary(UnOp::Tanh, a) => load(a).map(|b| (TANH, [1.0, 0.0], b)),
        ExprKind::Binary(BinOp::Mul, a, b) => {
            let gated = |x: &E, s: &E| {
                let xb = load(x)?;
                match &s.kind {
                    ExprKind::Unary(UnOp::Sigmoid, t) => {
                        let (tb, al) = scaled(t)?;
                        (xb == tb).then_some((SILU, [al, 0.0], xb))
                    }
                    _ => {
                        let (tb, al, be) = hard(s)?;
                        (xb == tb).then_some((HARDSWISH, [al, be], xb))
                    }
                }
            };
            gated(a, b).or_else(|| gated(b, a)).or_else(|| {
                let x = gelu_tanh(a, b).or_else(|| gelu_tanh(b, a))?;
                Some((GELU_TANH, [0.0, 0.0], x))
            })
        }
        _ => None,
    }
}

/// Wraps `inner` in `loops` (outermost first), vectorizing the innermost when asked.
fn nest_loops(loops: &[(u32, i64)], inner: Vec<Stmt>, vectorize: bool) -> Vec<Stmt> {
    let mut body = inner;
    for (d, &(var, extent)) in loops.iter().enumerate().rev() {
        body = vec![Stmt::For {
            var,
            extent: Count::Fixed(extent),
            vector: vectorize && d == loops.len() - 1,
            body,
        }];
    }
    body
}

fn out_index(rank: usize) -> Vec<E> {
    (0..rank as u32).map(expr::var).collect()
}

struct StepCx<'a> {
    s: &'a Schedule,
    st: &'a Step,
    opts: &'a LowerOptions,
    buf_of: &'a [u32],
    /// Constants created while lowering (packed weights), numbered from `first_extra`.
    extra: &'a std::cell::RefCell<Vec<Buffer>>,
    /// Weights packed for the GEMM so far, by (value, transposed, k, n, row stride): steps
    /// that multiply by the same constant share one packed copy (an unrolled recurrent
    /// layer's `Rᵀ` is read by every step; a copy per step took 1 MB of object and of cache
    /// each).
    packed_b: &'a std::cell::RefCell<std::collections::HashMap<(SvId, bool, i64, i64, i64), BufId>>,
    first_extra: u32,
    /// The step's string space (workspace offset, bytes), if it makes strings.
    strings: Option<(u64, u64)>,
}

impl StepCx<'_> {
    /// A new constant buffer of f32 values.
    fn new_const(&self, data: &[f32]) -> BufId {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut e = self.extra.borrow_mut();
        e.push(Buffer {
            dtype: DType::F32,
            len: data.len() as i64,
            loc: Loc::Const(std::sync::Arc::new(bytes)),
            offset: 0,
            offset_at: None,
        });
        self.first_extra + e.len() as u32 - 1
    }

    /// The step's string space as a byte buffer, and its size.
    fn string_space(&self) -> Option<(BufId, u64)> {
        let (offset, bytes) = self.strings?;
        let mut e = self.extra.borrow_mut();
        e.push(Buffer {
            dtype: DType::U8,
            len: bytes as i64,
            loc: Loc::Arena(offset),
            offset: 0,
            offset_at: None,
        });
        Some((self.first_extra + e.len() as u32 - 1, bytes))
    }

    fn buf(&self, v: SvId) -> BufId {
        self.buf_of[v]
    }

    fn shape(&self, v: SvId) -> &[i64] {
        &self.s.values[v].shape
    }

    /// Kernel arguments for the step's epilogue: (bias, residual at `offset`, clamp range).
    fn epilogue_args(&self, offset: E) -> (Arg, Arg, Arg) {
        let Some(e) = &self.st.epilogue else {
            return (Arg::Null, Arg::Null, Arg::Null);
        };
        let bias = e
            .bias
            .map_or(Arg::Null, |b| Arg::start(self.buf(self.st.inputs[b])));
        let residual = e.residual.map_or(Arg::Null, |r| Arg::Ptr {
            buf: self.buf(self.st.inputs[r]),
            offset,
        });
        let clamp = if e.clamps() {
            Arg::Floats(vec![e.lo, e.hi])
        } else {
            Arg::Null
        };
        (bias, residual, clamp)
    }

    /// Rewrites operand loads into flat buffer loads; structurally equal subexpressions end
    /// up shared (`expr::share`), so each is computed once.
    fn flatten(&self, body: &E) -> E {
        expr::share(&self.flatten_loads(body))
    }

    fn flatten_loads(&self, body: &E) -> E {
        expr::rewrite(body, &mut |e| match &e.kind {
            ExprKind::Load { input, index } if *input != EPILOGUE_ACC => {
                let v = self.st.inputs[*input as usize];
                let index: Vec<E> = index.iter().map(|i| self.flatten_loads(i)).collect();
                let offset = flat(&index, self.shape(v));
                let keep = self.opts.keep_scales && e.dtype.is_float();
                if !keep && let Some(c) = self.constant_element(v, &offset) {
                    return Some(expr::konst(e.dtype, c));
                }
                Some(expr::load(e.dtype, self.buf(v), vec![offset]))
            }
            _ => None,
        })
    }

    /// The element of constant `v` at a constant offset (a quantization's scale and zero
    /// point, a scalar multiplier): the expression folds it, and arithmetic on it (an
    /// integer zero point's conversion) folds too, instead of loading it per element.
    fn constant_element(&self, v: SvId, offset: &E) -> Option<Scalar> {
        let k = offset.as_const()?.as_i64();
        let dt = self.s.values[v].dtype;
        if matches!(dt, DType::F16 | DType::BF16) {
            return None;
        }
        let (owner, off) = self.s.place(v);
        let Storage::Const(t) = &self.s.values[owner].storage else {
            return None;
        };
        let at = usize::try_from(off).ok()? + usize::try_from(k).ok()? * dt.size();
        let bytes = t.data.get(at..at + dt.size())?;
        Some(Scalar::read(dt, bytes))
    }

    /// A copy of a small constant `v` (a Shape's value, a folded shape computation) into
    /// `dst` as one store of a literal per element: the same bytes as the copy, and where
    /// the constant follows a dim taken at run time its elements are constants of the code,
    /// which `loops::dims` turns into formulas over the dim (a table in the object would
    /// differ with the dim and could not be one program). None for a constant of more than
    /// `LITERAL_STORES` elements or of a type not stored exactly by a literal.
    fn literal_stores(&self, v: SvId, dst: BufId) -> Option<Vec<Stmt>> {
        /// Most elements of a constant copied by stores of literals.
        const LITERAL_STORES: i64 = 16;
        let dt = self.s.values[v].dtype;
        let exact =
            matches!(dt, DType::F32 | DType::F64 | DType::Bool) || (dt.is_int() && !dt.is_narrow());
        let n = self.s.values[v].len();
        if !is_const(self.s, v)
            || !exact
            || n > LITERAL_STORES
            || dt != self.s.values[self.st.output].dtype
        {
            return None;
        }
        (0..n)
            .map(|k| {
                let c = self.constant_element(v, &expr::i(k))?;
                Some(Stmt::Store {
                    buf: dst,
                    offset: expr::i(k),
                    value: expr::konst(dt, c),
                })
            })
            .collect()
    }

    /// Wraps `inner` in loops over `extents` (outermost first), vectorizing the innermost.
    fn nest(
        &self,
        extents: &[i64],
        first_var: u32,
        inner: Vec<Stmt>,
        vectorize: bool,
    ) -> Vec<Stmt> {
        let mut body = inner;
        for (d, &e) in extents.iter().enumerate().rev() {
            let innermost = d == extents.len() - 1;
            body = vec![Stmt::For {
                var: first_var + d as u32,
                extent: Count::Fixed(e),
                vector: vectorize && innermost,
                body,
            }];
        }
        body
    }

    fn lower(&self, scratch: Option<u64>) -> Result<Vec<Stmt>> {
        let out = self.st.output;
        let oshape = self.shape(out).to_vec();
        let obuf = self.buf(out);
        let rank = oshape.len();
        if oshape.contains(&0) {
            return Ok(vec![]);
        }
        match &self.st.kind {
            StepKind::Map { body } => {
                let mut value = self.flatten(body);
                let mut offset = flat(&out_index(rank), &oshape);
                let mut loops: Vec<(u32, i64)> =
                    (0..rank as u32).zip(oshape.iter().copied()).collect();
                collapse_loops(&mut loops, &mut [&mut value], &mut [&mut offset]);
                if let [(var, n)] = loops[..] {
                    let contiguous = matches!(offset.kind, ExprKind::Var(v) if v == var);
                    // A single-element float32 constant operand: QuickGELU's α as an
                    // initializer.
                    let scalar = |buf: BufId| {
                        self.st.inputs.iter().find_map(|&v| {
                            (self.buf(v) == buf
                                && is_const(self.s, v)
                                && self.s.values[v].dtype == DType::F32)
                                .then(|| const_f32(self.s, v))
                                .filter(|c| c.len() == 1)
                                .map(|c| c[0])
                        })
                    };
                    if let Some((kind, params, src)) =
                        activation_form(&value, var, &scalar).filter(|_| {
                            self.opts.activation_kernels
                                && contiguous
                                && (n >= 16 || !self.opts.by_size)
                        })
                    {
                        return Ok(vec![Stmt::call(
                            &kernels::ACTIVATION_F32,
                            vec![
                                Arg::Int(expr::i(kind)),
                                Arg::Floats(params.to_vec()),
                                Arg::start(src),
                                Arg::start(obuf),
                                Arg::Int(expr::i(n)),
                                Arg::Threads,
                            ],
                        )?]);
                    }
                }
                let store = Stmt::Store {
                    buf: obuf,
                    offset,
                    value,
                };
                Ok(nest_loops(&loops, vec![store], true))
            }
            StepKind::Reduce {
                kind,
                extents,
                body,
                epilogue,
            } => {
                if extents.contains(&0)
                    && matches!(kind, ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. })
                {
                    return Err(Error::Internal("arg-reduction over an empty axis".into()));
                }
                let mut loops: Vec<(u32, i64)> = extents
                    .iter()
                    .enumerate()
                    .map(|(k, &e)| ((rank + k) as u32, e))
                    .collect();
                let mut body = self.flatten(body);
                if !matches!(kind, ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. }) {
                    collapse_loops(&mut loops, &mut [&mut body], &mut []);
                }
                let red = Stmt::Reduce {
                    buf: obuf,
                    offset: flat(&out_index(rank), &oshape),
                    kind: *kind,
                    loops: fixed_loops(loops),
                    body,
                    epilogue: epilogue.as_ref().map(|e| self.flatten(e)),
                };
                // The innermost output loop may run four outputs at once (codegen decides).
                Ok(self.nest(&oshape, 0, vec![red], true))
            }
            StepKind::MatMul { op: m, views } => self.matmul(m, views, scratch),
            StepKind::Conv { op, input_planes } => self.conv(op, input_planes, scratch),
            StepKind::ConvBlocked { conv, plain_input } => {
                self.conv_blocked(conv, *plain_input, scratch)
            }
            StepKind::PoolBlocked(p) => {
                let x = self.st.inputs[0];
                let xs = self.shape(x);
                let plain_in = [xs[0], xs[1] * xs[4], xs[2], xs[3]];
                let mut g = p.geometry(&plain_in, &oshape);
                g.planes = xs[0] * xs[1];
                Ok(vec![Stmt::call(
                    &kernels::POOL_NCHWC_F32,
                    vec![
                        Arg::Params(g.encode()),
                        Arg::start(self.buf(x)),
                        Arg::start(obuf),
                        Arg::Threads,
                    ],
                )?])
            }
            StepKind::Reorder { to_blocked, planes } => {
                let x = self.st.inputs[0];
                let plain = if *to_blocked {
                    self.shape(x)
                } else {
                    &oshape[..]
                };
                let (n, c, hw) = match planes {
                    // The input is whatever the gather reads (any shape): the channels are
                    // the planes, the rest follows from the blocked output.
                    Some(p) => (oshape[0], p.len() as i64, oshape[2] * oshape[3]),
                    None => (plain[0], plain[1], plain[2] * plain[3]),
                };
                let mut args = vec![
                    Arg::start(self.buf(x)),
                    Arg::Int(expr::i(n)),
                    Arg::Int(expr::i(c)),
                    Arg::Int(expr::i(hw)),
                    Arg::start(obuf),
                ];
                if *to_blocked {
                    args.push(match planes {
                        Some(p) => Arg::Params(onnxc_runtime::nchwc::reorder::encode_planes(p)),
                        None => Arg::Null,
                    });
                }
                args.push(Arg::Threads);
                Ok(vec![Stmt::call(
                    if *to_blocked {
                        &kernels::NCHW_TO_NCHWC
                    } else {
                        &kernels::NCHWC_TO_NCHW
                    },
                    args,
                )?])
            }
            StepKind::Concat { axis } => {
                let outer: i64 = oshape[..*axis].iter().product();
                let inner: i64 = oshape[axis + 1..].iter().product();
                let out_row = oshape[*axis] * inner;
                let mut stmts = Vec::new();
                let mut off = 0i64;
                let ov = rank as u32; // loop variable over the outer dims, flattened
                for &v in &self.st.inputs {
                    let a = self.shape(v)[*axis];
                    let chunk = a * inner;
                    let copy = Stmt::Copy {
                        dst: obuf,
                        dst_offset: expr::add(
                            expr::mul(expr::var(ov), expr::i(out_row)),
                            expr::i(off * inner),
                        ),
                        src: self.buf(v),
                        src_offset: expr::mul(expr::var(ov), expr::i(chunk)),
                        elems: Count::Fixed(chunk),
                    };
                    stmts.push(Stmt::For {
                        var: ov,
                        extent: Count::Fixed(outer),
                        vector: false,
                        body: vec![copy],
                    });
                    off += a;
                }
                Ok(stmts)
            }
            StepKind::Scatter(sc) => {
                let base = self.st.inputs[0];
                let mut stmts = vec![Stmt::Copy {
                    dst: obuf,
                    dst_offset: expr::i(0),
                    src: self.buf(base),
                    src_offset: expr::i(0),
                    elems: Count::Fixed(self.s.values[out].len()),
                }];
                if sc.extents.contains(&0) {
                    return Ok(stmts);
                }
                let index: Vec<E> = sc.index.iter().map(|e| self.flatten(e)).collect();
                let off = flat(&index, &oshape);
                let value = self.flatten(&sc.value);
                let dt = self.s.values[out].dtype;
                let old = expr::load(dt, obuf, vec![off.clone()]);
                let op = |k: ReduceKind| match k {
                    ReduceKind::Sum => expr::BinOp::Add,
                    ReduceKind::Prod => expr::BinOp::Mul,
                    ReduceKind::Max => expr::BinOp::Max,
                    _ => expr::BinOp::Min,
                };
                let value = match sc.kind {
                    None => value,
                    Some(k) => expr::binary(op(k), old, value),
                };
                let store = Stmt::Store {
                    buf: obuf,
                    offset: off,
                    value,
                };
                stmts.extend(self.nest(&sc.extents, 0, vec![store], false));
                Ok(stmts)
            }
            StepKind::Pool(p) => {
                let x = self.st.inputs[0];
                let g = p.geometry(self.shape(x), &oshape);
                Ok(vec![Stmt::call(
                    &kernels::POOL2D_F32,
                    vec![
                        Arg::Params(g.encode()),
                        Arg::start(self.buf(x)),
                        Arg::start(obuf),
                        Arg::Scratch {
                            offset: scratch
                                .ok_or_else(|| Error::Internal("pool without scratch".into()))?,
                        },
                        Arg::Threads,
                    ],
                )?])
            }
            StepKind::Kernel(k) => k.lower(&KernelStep { cx: self, scratch }),
            StepKind::Assert { code } => {
                let c = self.st.inputs[0];
                let cs = self.shape(c).to_vec();
                let cond = expr::load(
                    DType::Bool,
                    self.buf(c),
                    vec![flat(&out_index(cs.len()), &cs)],
                );
                Ok(self.nest(&cs, 0, vec![Stmt::Check { cond, code: *code }], false))
            }
            StepKind::ConcatRest { parts } => Ok(self
                .st
                .inputs
                .iter()
                .zip(parts)
                .map(|(&v, &off)| Stmt::Copy {
                    dst: obuf,
                    dst_offset: expr::i(off as i64),
                    src: self.buf(v),
                    src_offset: expr::i(0),
                    elems: Count::Fixed(self.s.values[v].len()),
                })
                .collect()),
            StepKind::Copy => {
                let v = self.st.inputs[0];
                if let Some(stores) = self.literal_stores(v, obuf) {
                    return Ok(stores);
                }
                Ok(vec![Stmt::Copy {
                    dst: obuf,
                    dst_offset: expr::i(0),
                    src: self.buf(v),
                    src_offset: expr::i(0),
                    elems: Count::Fixed(self.s.values[out].len()),
                }])
            }
        }
    }
}
