//! Channel-blocked layout assignment (NCHWc, `onnxc_runtime::nchwc`): float convolutions
//! whose channels come in whole blocks of 8 run on blocked tensors `[n][c/8][h][w][8]`, and
//! the layout propagates through the steps around them that can read it — pooling,
//! elementwise maps, channel concatenation, spatial reductions — so a CNN converts its
//! activations once at the first convolution and once where a step needs the plain layout.
//!
//! A value keeps its `SvId` as the *plain* (NCHW) form; its blocked form is a separate
//! 5-D value `[n, c/8, h, w, 8]`. A step that produces a value in blocked form leaves the
//! plain one unproduced until some consumer needs it; then a `Reorder` step fills it (or,
//! when `h·w = 1` and the two layouts coincide, it becomes a view of the blocked value).
//! **Invariant:** every step reads forms that earlier steps produced; every graph output's
//! plain form is produced.

use super::{SValue, Schedule, Step, StepKind, Storage, SvId};
use crate::ir::DType;
use crate::ir::expr::{self, E, ExprKind};
use crate::ir::graph::ConvOp;
use onnxc_runtime::conv::ConvGeometry;
use onnxc_runtime::nchwc::{BlockedConv, CB};
use std::collections::{HashMap, HashSet};

/// The sizes at which a convolution's size-based choices are made (blocked or plain
/// layout here, its kernel's path in lowering, `ConvGeometry::path`): its own, or where a
/// dim is taken at run time the bound's, replayed at every value the model is lowered at
/// (`loops::dims`), so that all take one path. The `k`-th applies to the schedule's `k`-th
/// convolution (`Conv` and `ConvBlocked` steps, in order: `conv_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvSizes {
    pub n: i64,
    /// Spatial dims of the input and output.
    pub input: Vec<i64>,
    pub output: Vec<i64>,
}

impl ConvSizes {
    pub fn of(g: &ConvGeometry) -> ConvSizes {
        ConvSizes {
            n: g.n,
            input: g.input.to_vec(),
            output: g.output.to_vec(),
        }
    }

    /// `g` at these sizes, where they have its rank (else `g` as it is): the geometry to
    /// choose by.
    pub fn apply<'a>(&self, g: &ConvGeometry<'a>) -> ConvGeometry<'a> {
        let mut d = g.clone();
        if self.input.len() == g.input.len() && self.output.len() == g.output.len() {
            d.n = self.n;
            d.input = self.input[..].into();
            d.output = self.output[..].into();
        }
        d
    }
}

/// The position of `st`, a convolution, among the schedule's convolutions (`ConvSizes`).
pub fn conv_index(steps: &[Step], st: &Step) -> Option<usize> {
    steps
        .iter()
        .filter(|x| matches!(x.kind, StepKind::Conv { .. } | StepKind::ConvBlocked { .. }))
        .position(|x| x.output == st.output)
}

/// Whether and for which target blocked layouts are chosen.
///
/// No `Default`: `by_size` false is a probe's lowering, which a default must not pick
/// silently; every field is set where the options are made.
#[derive(Clone, Debug)]
pub struct LayoutOptions {
    /// Use blocked layouts at all (off at -O0).
    pub blocked: bool,
    /// The target has 512-bit vectors: the plain kernels' AVX-512 paths win on some layers
    /// there, so only the convolutions `wide_blocked_pays` picks go blocked (and depthwise
    /// ones whose input is blocked already), with the steps after them that can follow.
    pub wide_simd: bool,
    /// Winograd is off (`Options::no_winograd`): 3×3 convs go blocked like the others.
    pub no_winograd: bool,
    /// Choices may follow the value's own sizes. Off when a dim is taken at run time
    /// (`loops::dims`): every value it is lowered at must make the same choices, so the
    /// convolutions' layouts follow `decide_at`'s sizes and the schedule's other size-based
    /// choices (`lut::tabulate`) are made without sizes.
    pub by_size: bool,
    /// The sizes to choose each convolution's layout at (`ConvSizes`), else its own.
    pub decide_at: Option<std::sync::Arc<[ConvSizes]>>,
}

/// The blocked convolution's geometry for a Conv step over plain shapes, if its kernels
/// compute it: float32, 2-D, constant weights, non-negative padding, and channels in whole
/// blocks (per group, or depthwise) — or, with `plain_input`, group 1. With group 1 the
/// output channels are rounded up to whole blocks: the weights gain zero filters, and the
/// blocked output's last block carries lanes the plain form drops (`pads_outputs`).
pub fn blocked_geometry(
    s: &Schedule,
    st: &Step,
    c: &ConvOp,
    x: &[i64],
    y: &[i64],
    plain_input: bool,
) -> Option<BlockedConv> {
    let w = &s.values[st.inputs[1]];
    if x.len() != 4
        || w.shape.len() != 4
        || s.values[st.output].dtype != DType::F32
        || !matches!(s.values[s.root(st.inputs[1])].storage, Storage::Const(_))
        || c.pads_begin.iter().chain(&c.pads_end).any(|&p| p < 0)
        || c.group <= 0
    {
        return None;
    }
    let u = |v: i64| usize::try_from(v).ok();
    let pair = |v: &[i64]| Some([u(v[0])?, u(v[1])?]);
    let m = u(w.shape[0])?;
    let g = BlockedConv {
        n: u(x[0])?,
        c: u(x[1])?,
        // Output channels short of a block are padded with zero filters (`pads_outputs`).
        m: if c.group == 1 { m.div_ceil(CB) * CB } else { m },
        group: u(c.group)?,
        input: pair(&x[2..])?,
        output: pair(&y[2..])?,
        kernel: pair(&w.shape[2..])?,
        strides: pair(&c.strides)?,
        dilations: pair(&c.dilations)?,
        pads: pair(&c.pads_begin)?,
        plain_input,
        pad_planes: true,
    };
    g.supported().then_some(g)
}

/// Whether a convolution (not Winograd's) goes blocked on a 512-bit target. The blocked
/// kernel's products run 16 lanes wide there too (two 8-channel blocks a vector), but its
/// depthwise and grouped paths run 8 lanes wide against the plain ones' 16, and the
/// plain pixel-major product keeps more lanes busy on small maps. So: dense convolutions
/// whose plain path is not pixel-major, and the layers whose plain im2col packing bounds
/// them (`im2col_short_rows`). Measured per layer on an AVX-512 Xeon (`ONNXC_NCHWC=1 cargo
/// bench --bench gemm`, blocked vs plain GFLOP/s): 128→128 3×3/2 at 56×56 116-123 vs 87,
/// 3→64 7×7/2 at 224×224 120 vs 102, 256→512 1×1/2 at 28×28 123 vs 107, 1024→256 1×1 at
/// 14×14 124-127 vs 116, other 1×1 layers level; 512→512 3×3 at 7×7 (pixel-major) 98 vs
/// 107.
fn wide_blocked_pays(plain: &ConvGeometry) -> bool {
    plain.im2col_short_rows() || plain.group == 1 && !plain.pixel_major()
}

/// Whether Winograd (plain layout, with conversions around it) beats the blocked direct
/// convolution (≈ 96-99 GFLOP/s on Zen 3 for 3×3 layers of any size): its transforms cost
/// per input and per output channel, its products shrink per both, so it pays when
/// `c·m / (c + m)` is large enough for the variant. Measured per layer (`ONNXC_NCHWC=1
/// cargo bench --bench gemm`, effective GFLOP/s Winograd vs blocked, means in brackets):
/// F(4×4): 64→64 (32) at 56×56 161 vs 98, 128→32 (25.6) at 28×28 117 vs 97, 32→64 (21.3)
/// at 80×80 68 vs 75, 32→32 (16) at 160×160 57 vs 69, 16→64 at 55×55 94 vs 97; F(2×2):
/// 256→256 at 14×14 143 vs 96, 64→256 at 13×13 101 vs 97, 48→192 at 13×13 93 vs 97, 128→32
/// at 14×14 86 vs 96.
fn winograd_pays(g: &onnxc_runtime::conv::ConvGeometry) -> bool {
    let (c, m) = ((g.c / g.group) as f64, (g.m / g.group) as f64);
    let mean = c * m / (c + m);
    match g.winograd_variant() {
        onnxc_runtime::winograd::Variant::F4 => mean >= 24.0,
        onnxc_runtime::winograd::Variant::F2 => mean >= 64.0,
    }
}

/// The blocked shape of a plain `[n, c, h, w]`: `c` rounded up to whole blocks.
fn blocked_shape(shape: &[i64]) -> Vec<i64> {
    vec![
        shape[0],
        (shape[1] + CB as i64 - 1) / CB as i64,
        shape[2],
        shape[3],
        CB as i64,
    ]
}

/// A plain 4-D float value whose channels come in whole blocks.
fn blockable(v: &SValue) -> bool {
    v.dtype == DType::F32 && v.shape.len() == 4 && v.shape[1] > 0 && v.shape[1] % CB as i64 == 0
}

struct Pass<'a> {
    s: &'a mut Schedule,
    opts: LayoutOptions,
    steps: Vec<Step>,
    /// Plain value → its blocked form.
    blocked: HashMap<SvId, SvId>,
    /// Plain values produced so far only in blocked form.
    blocked_only: HashSet<SvId>,
    /// Convolutions seen so far (the next one's `ConvSizes` index).
    convs: usize,
}

impl Pass<'_> {
    fn new_value(&mut self, like: SvId, shape: Vec<i64>) -> SvId {
        let v = &self.s.values[like];
        self.s.values.push(SValue {
            name: format!("{}/nchwc", v.name),
            dtype: v.dtype,
            shape,
            storage: Storage::Arena(0),
        });
        self.s.values.len() - 1
    }

    /// Makes `v`'s plain form available before the next step.
    fn plain(&mut self, v: SvId) {
        let r = self.s.root(v);
        if !self.blocked_only.remove(&r) {
            return;
        }
        let b = self.blocked[&r];
        let sh = &self.s.values[r].shape;
        // Not where a dim is taken at run time: a map of one position at some of its
        // values is larger at others, and the programs must take the same steps.
        if self.opts.by_size && sh.len() == 4 && sh[2] * sh[3] == 1 && sh[1] % CB as i64 == 0 {
            // [n, c, 1, 1] and [n, c/8, 1, 1, 8] are the same bytes.
            self.s.values[r].storage = Storage::View(b);
            return;
        }
        self.steps.push(Step {
            kind: StepKind::Reorder {
                to_blocked: false,
                planes: None,
            },
            inputs: vec![b],
            output: r,
            origins: vec![reorder_origin(&self.s.values[r].name, "ToNCHW")],
            epilogue: None,
        });
    }

    /// The blocked form of `v` (a `blockable` value), converting it if needed.
    fn blocked(&mut self, v: SvId) -> SvId {
        if let Some(&b) = self.blocked.get(&v) {
            return b;
        }
        self.plain(v);
        let b = self.new_value(v, blocked_shape(&self.s.values[v].shape));
        self.steps.push(Step {
            kind: StepKind::Reorder {
                to_blocked: true,
                planes: None,
            },
            inputs: vec![v],
            output: b,
            origins: vec![reorder_origin(&self.s.values[v].name, "ToNCHWc")],
            epilogue: None,
        });
        self.blocked.insert(v, b);
        b
    }

    /// `st`'s output is produced in blocked form only, into a new value.
    fn blocked_output(&mut self, st: &Step) -> SvId {
        let out = st.output;
        let b = self.new_value(out, blocked_shape(&self.s.values[out].shape));
        self.blocked.insert(out, b);
        self.blocked_only.insert(out);
        b
    }

    fn step(&mut self, st: Step) {
        let conv = self.convs;
        if matches!(
            st.kind,
            StepKind::Conv { .. } | StepKind::ConvBlocked { .. }
        ) {
            self.convs += 1;
        }
        let converted = match &st.kind {
            StepKind::Conv {
                op: c,
                input_planes: None,
            } => self.conv(&st, c, conv),
            StepKind::Pool(p) => {
                let x = st.inputs[0];
                let ok = p.kernel.len() == 2
                    && self.blocked.contains_key(&x)
                    && blockable(&self.s.values[x])
                    && self.s.values[st.output].dtype == DType::F32;
                ok.then(|| {
                    let xb = self.blocked[&x];
                    let ob = self.blocked_output(&st);
                    Step {
                        kind: StepKind::PoolBlocked(p.clone()),
                        inputs: vec![xb],
                        output: ob,
                        ..st.clone()
                    }
                })
            }
            StepKind::Map { body } => self.map(&st, body),
            StepKind::Reduce {
                kind,
                extents,
                body,
                epilogue,
            } => self.reduce(&st, *kind, extents, body, epilogue.as_ref()),
            StepKind::Concat { axis: 1 } => self.concat(&st),
            _ => None,
        };
        match converted {
            Some(s) => self.steps.push(s),
            None => {
                for &v in &st.inputs {
                    self.plain(v);
                }
                self.steps.push(st);
            }
        }
    }

    /// `st`, the `k`-th convolution, blocked where that pays.
    fn conv(&mut self, st: &Step, c: &ConvOp, k: usize) -> Option<Step> {
        let x = st.inputs[0];
        let (xs, ys) = (
            self.s.values[x].shape.clone(),
            self.s.values[st.output].shape.clone(),
        );
        // An input whose channels are not whole blocks (an image) is read in plain layout.
        let plain_input = !self.blocked.contains_key(&x) && !blockable(&self.s.values[x]);
        let g = blocked_geometry(self.s, st, c, &xs, &ys, plain_input)?;
        // Where Winograd applies, the plain kernels are faster even with the conversions.
        use onnxc_runtime::conv::Dims;
        let plain = onnxc_runtime::conv::ConvGeometry {
            n: xs[0],
            c: xs[1],
            m: g.m as i64,
            group: c.group,
            input: xs[2..].into(),
            kernel: Dims::new(&g.kernel.map(|k| k as i64)),
            output: ys[2..].into(),
            strides: c.strides[..].into(),
            dilations: c.dilations[..].into(),
            pads: c.pads_begin[..].into(),
            wide_simd: self.opts.wide_simd,
            no_winograd: self.opts.no_winograd || c.exact,
            input_planes: std::borrow::Cow::Borrowed(&[]),
            path: Default::default(),
        };
        let plain = match self.opts.decide_at.as_ref().and_then(|d| d.get(k)) {
            Some(sizes) => sizes.apply(&plain),
            None => plain,
        };
        if plain.use_winograd() && winograd_pays(&plain) {
            return None;
        }
        if self.opts.wide_simd
            && !(wide_blocked_pays(&plain) || g.is_depthwise() && self.blocked.contains_key(&x))
        {
            return None;
        }
        if g.m as i64 != self.s.values[st.inputs[1]].shape[0]
            && !(self.blocked.contains_key(&x) && self.pads_outputs(st, &g))
        {
            return None;
        }
        let residual = st.epilogue.as_ref().and_then(|e| e.residual);
        if let Some(r) = residual {
            let v = &self.s.values[st.inputs[r]];
            if !blockable(v) || v.shape != ys {
                return None;
            }
        }
        let mut inputs = st.inputs.clone();
        if plain_input {
            self.plain(x);
        } else {
            inputs[0] = self.blocked(x);
        }
        if let Some(r) = residual {
            inputs[r] = self.blocked(inputs[r]);
        }
        let out = self.blocked_output(st);
        Some(Step {
            kind: StepKind::ConvBlocked {
                conv: c.clone(),
                plain_input,
            },
            inputs,
            output: out,
            ..st.clone()
        })
    }

    /// Whether `st`, whose output channels `g` rounds up to whole blocks, runs blocked with
    /// zero filters added (when its input is blocked already): its bias (if fused) is a
    /// constant the lowering pads too, and the extra filters cost at most the input's
    /// conversion they save (a 1×1 kernel, or at most 4× the products).
    fn pads_outputs(&self, st: &Step, g: &BlockedConv) -> bool {
        let m = self.s.values[st.inputs[1]].shape[0] as usize;
        let const_bias = st.epilogue.as_ref().and_then(|e| e.bias).is_none_or(|b| {
            matches!(
                self.s.values[self.s.root(st.inputs[b])].storage,
                Storage::Const(_)
            )
        });
        const_bias && (g.kernel == [1, 1] || g.m <= 4 * m)
    }

    /// Operands of `body` loaded only at the identity index of a 4-D output of `shape`.
    fn identity_operands(&self, st: &Step, body: &E, shape: &[i64]) -> Vec<bool> {
        let mut ok: Vec<bool> = st
            .inputs
            .iter()
            .map(|&v| self.s.values[v].shape == shape)
            .collect();
        expr::rewrite(body, &mut |e| {
            if let ExprKind::Load { input, index } = &e.kind
                && (*input as usize) < ok.len()
                && !is_identity(index, 4)
            {
                ok[*input as usize] = false;
            }
            None
        });
        ok
    }

    fn map(&mut self, st: &Step, body: &E) -> Option<Step> {
        let out = &self.s.values[st.output];
        if !blockable(out) {
            return None;
        }
        let shape = out.shape.clone();
        let ident = self.identity_operands(st, body, &shape);
        let use_blocked: Vec<bool> = st
            .inputs
            .iter()
            .zip(&ident)
            .map(|(v, &id)| id && self.blocked.contains_key(v))
            .collect();
        if !use_blocked.contains(&true) {
            return None;
        }
        let lane = expr::var(4);
        let chan = expr::add(expr::mul(expr::var(1), expr::i(CB as i64)), lane.clone());
        let id5: Vec<E> = (0..5).map(expr::var).collect();
        let body = expr::rewrite(body, &mut |e| match &e.kind {
            ExprKind::Load { input, .. } if use_blocked.get(*input as usize) == Some(&true) => {
                Some(expr::load(e.dtype, *input, id5.clone()))
            }
            ExprKind::Var(1) => Some(chan.clone()),
            _ => None,
        });
        let inputs = self.operands(st, &use_blocked);
        let output = self.blocked_output(st);
        Some(Step {
            kind: StepKind::Map { body },
            inputs,
            output,
            ..st.clone()
        })
    }

    /// The step's operands: blocked forms where `use_blocked`, plain ones elsewhere.
    fn operands(&mut self, st: &Step, use_blocked: &[bool]) -> Vec<SvId> {
        st.inputs
            .iter()
            .zip(use_blocked)
            .map(|(&v, &b)| {
                if b {
                    self.blocked[&v]
                } else {
                    self.plain(v);
                    v
                }
            })
            .collect()
    }

    /// A reduction over the spatial dims of a blocked operand into `[n, c]` or
    /// `[n, c, 1, 1]` (global pooling): it reads the blocked form directly and writes a
    /// `[n, c/8, 1, 1, 8]` value, which is the plain result byte for byte.
    fn reduce(
        &mut self,
        st: &Step,
        kind: crate::ir::graph::ReduceKind,
        extents: &[i64],
        body: &E,
        epilogue: Option<&E>,
    ) -> Option<Step> {
        let out = &self.s.values[st.output];
        let r = out.shape.len();
        let flat_tail = r == 2 || r == 4 && out.shape[2] == 1 && out.shape[3] == 1;
        if out.dtype != DType::F32
            || !flat_tail
            || out.shape[1] <= 0
            || out.shape[1] % CB as i64 != 0
        {
            return None;
        }
        let (n, c) = (out.shape[0], out.shape[1]);
        // Blocked operands: 4-D [n, c, h, w] loaded at [v0, v1, e2, e3], e2/e3 free of the
        // output variables.
        let mut use_blocked: Vec<bool> = st
            .inputs
            .iter()
            .map(|v| {
                let x = &self.s.values[*v];
                self.blocked.contains_key(v)
                    && x.shape.len() == 4
                    && x.shape[0] == n
                    && x.shape[1] == c
            })
            .collect();
        let outer_free = |e: &E| !mentions_var_below(e, r as u32);
        let mut check = |e: &E| {
            expr::rewrite(e, &mut |x| {
                if let ExprKind::Load { input, index } = &x.kind
                    && let Some(u) = use_blocked.get_mut(*input as usize)
                {
                    *u &= index.len() == 4
                        && matches!(index[0].kind, ExprKind::Var(0))
                        && matches!(index[1].kind, ExprKind::Var(1))
                        && outer_free(&index[2])
                        && outer_free(&index[3]);
                }
                None
            });
        };
        check(body);
        if let Some(e) = epilogue {
            check(e);
        }
        if !use_blocked.contains(&true) {
            return None;
        }
        // New variables: [n, c/8, 1, 1, lane], reduction variables from 5.
        let lane = expr::var(4);
        let chan = expr::add(expr::mul(expr::var(1), expr::i(CB as i64)), lane.clone());
        let remap = |e: &E| -> E {
            fn go(e: &E, r: u32, chan: &E, lane: &E, ub: &[bool]) -> E {
                expr::rewrite(e, &mut |x| match &x.kind {
                    ExprKind::Load { input, index } if ub.get(*input as usize) == Some(&true) => {
                        let ix = vec![
                            expr::var(0),
                            expr::var(1),
                            go(&index[2], r, chan, lane, ub),
                            go(&index[3], r, chan, lane, ub),
                            lane.clone(),
                        ];
                        Some(expr::load(x.dtype, *input, ix))
                    }
                    ExprKind::Var(0) => Some(expr::var(0)),
                    ExprKind::Var(1) => Some(chan.clone()),
                    ExprKind::Var(v) if *v < r => Some(expr::i(0)),
                    ExprKind::Var(v) => Some(expr::var(v - r + 5)),
                    _ => None,
                })
            }
            go(e, r as u32, &chan, &lane, &use_blocked)
        };
        let body = remap(body);
        let epilogue = epilogue.map(remap);
        let inputs = self.operands(st, &use_blocked);
        let out = st.output;
        let ob = self.new_value(out, vec![n, c / CB as i64, 1, 1, CB as i64]);
        self.s.values[out].storage = Storage::View(ob);
        self.blocked.insert(out, ob);
        Some(Step {
            kind: StepKind::Reduce {
                kind,
                extents: extents.to_vec(),
                body,
                epilogue,
            },
            inputs,
            output: ob,
            ..st.clone()
        })
    }

    /// A channel concatenation of blockable values, one of them already blocked.
    fn concat(&mut self, st: &Step) -> Option<Step> {
        let all = st.inputs.iter().all(|&v| blockable(&self.s.values[v]))
            && blockable(&self.s.values[st.output]);
        if !all || !st.inputs.iter().any(|v| self.blocked.contains_key(v)) {
            return None;
        }
        let inputs: Vec<SvId> = st.inputs.iter().map(|&v| self.blocked(v)).collect();
        let output = self.blocked_output(st);
        Some(Step {
            kind: StepKind::Concat { axis: 1 },
            inputs,
            output,
            ..st.clone()
        })
    }
}

/// Names a layout conversion in dumps and profiles after the value it converts.
fn reorder_origin(value: &str, op: &str) -> crate::ir::Origin {
    crate::ir::Origin {
        name: value.to_string(),
        op_type: op.to_string(),
        opset: 0,
        position: None,
    }
}

/// `index` is `[v0, …, v(rank-1)]`.
pub(super) fn is_identity(index: &[E], rank: usize) -> bool {
    index.len() == rank
        && index
            .iter()
            .enumerate()
            .all(|(d, i)| matches!(i.kind, ExprKind::Var(v) if v as usize == d))
}

/// `e` mentions a variable numbered below `n`.
fn mentions_var_below(e: &E, n: u32) -> bool {
    let mut found = false;
    expr::rewrite(e, &mut |x| {
        if let ExprKind::Var(v) = x.kind {
            found |= v < n;
        }
        None
    });
    found
}

/// Rewrites `s.steps` for blocked layouts where the options allow; `outputs` are the
/// values the caller reads in plain form afterwards (graph outputs).
pub fn assign(s: &mut Schedule, outputs: &[SvId], opts: &LayoutOptions) {
    if !opts.blocked {
        return;
    }
    let old = std::mem::take(&mut s.steps);
    let mut p = Pass {
        s,
        opts: opts.clone(),
        steps: Vec::with_capacity(old.len()),
        blocked: HashMap::new(),
        blocked_only: HashSet::new(),
        convs: 0,
    };
    for st in old {
        p.step(st);
    }
    for &o in outputs {
        p.plain(o);
    }
    let steps = p.steps;
    s.steps = steps;
}
