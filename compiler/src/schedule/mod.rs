//! Fusion and scheduling: the graph becomes an ordered list of steps over materialized
//! values, with every intermediate placed in one arena.
//!
//! A step is an anchor op with producers inlined into its body (elementwise and injective
//! maps) and, for reductions, an elementwise consumer fused as its epilogue. Reshapes never
//! become steps: their value is a view of their operand's buffer.

pub mod attention;
pub mod epilogue;
pub mod fuse;
pub mod layout;
pub mod lut;
pub mod memory;
pub mod quant_depthwise;
pub mod quant_maps;
pub mod softmax_scale;
pub mod views;

use crate::ir::expr::{self, E};
use crate::ir::graph::{ConvOp, MatMulOp, PoolOp, ReduceKind, ScatterOp};
use crate::ir::{DType, Origin, Tensor};
use std::fmt::Write;

/// Index of a materialized value in `Schedule::values`.
pub type SvId = usize;

/// `Load { input: EPILOGUE_ACC }` in a reduction epilogue stands for the reduced value.
pub const EPILOGUE_ACC: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub enum Storage {
    Input(usize),
    Output(usize),
    Const(Tensor),
    /// Offset in the arena; set by memory planning.
    Arena(u64),
    /// Same elements as another value (a reshape).
    View(SvId),
    /// A contiguous part of another value, starting `offset` elements in (a concat input
    /// written in place).
    Slice {
        of: SvId,
        offset: u64,
    },
}

#[derive(Clone, Debug)]
pub struct SValue {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub storage: Storage,
}

impl SValue {
    pub fn len(&self) -> i64 {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * self.dtype.size() as u64
    }
}

#[derive(Clone, Debug)]
pub enum StepKind {
    /// `out[v] = body`, loads index `inputs`.
    Map {
        body: E,
    },
    /// `out[v] = epilogue(fold(body))`; `epilogue` reads the fold through `EPILOGUE_ACC`.
    Reduce {
        kind: ReduceKind,
        extents: Vec<i64>,
        body: E,
        epilogue: Option<E>,
    },
    /// `views[k]`: operand `k` read in place through strides (a transpose absorbed by
    /// `views.rs`) rather than as the contiguous value `inputs[k]` names.
    MatMul {
        op: MatMulOp,
        views: [Option<StridedView>; 2],
    },
    /// A convolution (`onnxc_conv_f32`); for a depthwise one, `input_planes` maps each
    /// channel to the element offset of the input plane it reads in each image (a channel
    /// permutation absorbed by `views.rs`), None: the plane of the same channel.
    Conv {
        op: ConvOp,
        input_planes: Option<Vec<i64>>,
    },
    /// A convolution into a channel-blocked output, from a blocked input (or a plain one,
    /// `plain_input`: a first convolution over an image), with a blocked residual
    /// (`onnxc_conv_nchwc_f32`; see `layout.rs`).
    ConvBlocked {
        conv: ConvOp,
        plain_input: bool,
    },
    Concat {
        axis: usize,
    },
    /// What remains of a concat whose other inputs were computed in place: copies input `k`
    /// to element offset `parts[k]` of the output.
    ConcatRest {
        parts: Vec<u64>,
    },
    Scatter(ScatterOp),
    Pool(PoolOp),
    /// Pooling over a channel-blocked input into a blocked output (`onnxc_pool_nchwc_f32`).
    PoolBlocked(PoolOp),
    /// Layout conversion of a float `[n, c, h, w]` value to its blocked form
    /// `[n, c/8, h, w, 8]` (`to_blocked`) or back.
    Reorder {
        to_blocked: bool,
        /// To blocked only: channel `c` of the result is the plane at element offset
        /// `planes[c]` of each input image (a channel permutation absorbed, `views.rs`).
        planes: Option<Vec<i64>>,
    },
    /// A kernel op (`crate::kernels`), run by one runtime kernel call.
    Kernel(std::sync::Arc<dyn crate::kernels::KernelOp>),
    /// Fails the run with `code` unless every element of input 0 is true.
    Assert {
        code: i32,
    },
    /// `out = input` element for element (shapes may differ, counts match).
    Copy,
}

/// A value read through strides: logical element `[i0, i1, …]` (of `shape`) is element
/// `Σ i_d·strides[d]` of the stored value. Every logical element maps to a distinct stored
/// one, inside the stored value.
#[derive(Clone, Debug, PartialEq)]
pub struct StridedView {
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
}

/// Work a GEMM/conv kernel applies to its output tile:
/// `clamp(acc + bias[channel] + residual, lo, hi)`; `bias`/`residual` index `Step::inputs`.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelEpilogue {
    pub bias: Option<usize>,
    pub residual: Option<usize>,
    pub lo: f32,
    pub hi: f32,
}

impl KernelEpilogue {
    pub fn clamps(&self) -> bool {
        self.lo != f32::NEG_INFINITY || self.hi != f32::INFINITY
    }
}

#[derive(Clone, Debug)]
pub struct Step {
    pub kind: StepKind,
    pub inputs: Vec<SvId>,
    pub output: SvId,
    /// For `MatMul`/`Conv`: the fused epilogue (a conv's own bias is folded into it).
    pub epilogue: Option<KernelEpilogue>,
    /// The ONNX nodes this step computes, for comments and diagnostics.
    pub origins: Vec<Origin>,
}

#[derive(Clone, Debug)]
pub struct Io {
    pub name: String,
    pub value: SvId,
    /// A ZipMap output's keys (`ir::graph::GraphIo::keys`).
    pub keys: Option<std::sync::Arc<crate::ir::graph::MapKeys>>,
    /// The type and shape of a packed 4- or 2-bit tensor (`ir::graph::GraphIo::packed`).
    pub packed: Option<(crate::ir::DType, Vec<i64>)>,
    /// A map input's types (`ir::graph::GraphIo::map`).
    pub map: Option<crate::ir::graph::MapInput>,
}

#[derive(Clone, Debug)]
pub struct Schedule {
    pub name: String,
    pub values: Vec<SValue>,
    pub steps: Vec<Step>,
    pub inputs: Vec<Io>,
    pub outputs: Vec<Io>,
    /// Bytes of the arena the values live in (`memory::plan`).
    pub arena_size: u64,
}

impl Schedule {
    /// The step that writes each value (`None`: an input, a constant, a view or a slice
    /// written through its owner).
    pub fn producers(&self) -> Vec<Option<usize>> {
        let mut p = vec![None; self.values.len()];
        for (i, st) in self.steps.iter().enumerate() {
            p[st.output] = Some(i);
        }
        p
    }

    /// How many times each value is read: by steps, by views and slices of it, and as a
    /// graph output (`outputs`).
    pub fn reads(&self, outputs: &[SvId]) -> Vec<usize> {
        let mut reads = vec![0usize; self.values.len()];
        for st in &self.steps {
            for &v in &st.inputs {
                reads[v] += 1;
            }
        }
        for v in &self.values {
            if let Storage::View(of) | Storage::Slice { of, .. } = v.storage {
                reads[of] += 1;
            }
        }
        for &o in outputs {
            reads[o] += 1;
        }
        reads
    }

    /// Follows views and slices to the value that owns the memory.
    pub fn root(&self, mut v: SvId) -> SvId {
        loop {
            match self.values[v].storage {
                Storage::View(of) | Storage::Slice { of, .. } => v = of,
                _ => return v,
            }
        }
    }

    /// [`Schedule::place`] of every value, in time linear in the number of values (a chain
    /// of in-place concatenations makes slices of slices as deep as the chain).
    pub fn places(&self) -> Vec<(SvId, u64)> {
        const UNKNOWN: SvId = SvId::MAX;
        let mut out = vec![(UNKNOWN, 0u64); self.values.len()];
        let mut path: Vec<(SvId, u64)> = Vec::new();
        for start in 0..self.values.len() {
            let mut v = start;
            let (owner, mut off) = loop {
                if out[v].0 != UNKNOWN {
                    break out[v];
                }
                match self.values[v].storage {
                    Storage::View(of) => {
                        path.push((v, 0));
                        v = of;
                    }
                    Storage::Slice { of, offset } => {
                        path.push((v, offset * self.values[v].dtype.size() as u64));
                        v = of;
                    }
                    _ => {
                        out[v] = (v, 0);
                        break (v, 0);
                    }
                }
            };
            // The value nearest the owner first: each adds its offset to its parent's.
            while let Some((u, step)) = path.pop() {
                off += step;
                out[u] = (owner, off);
            }
        }
        out
    }

    /// The owning value and the byte offset of `v` inside it.
    pub fn place(&self, mut v: SvId) -> (SvId, u64) {
        let mut off = 0;
        loop {
            match self.values[v].storage {
                Storage::View(of) => v = of,
                Storage::Slice { of, offset } => {
                    off += offset * self.values[v].dtype.size() as u64;
                    v = of;
                }
                _ => return (v, off),
            }
        }
    }

    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "schedule \"{}\" (arena {} bytes) {{",
            self.name, self.arena_size
        );
        for (i, v) in self.values.iter().enumerate() {
            let loc = match &v.storage {
                Storage::Input(k) => format!("input {k}"),
                Storage::Output(k) => format!("output {k}"),
                Storage::Const(_) => "const".to_string(),
                Storage::Arena(o) => format!("arena +{o}"),
                Storage::View(of) => format!("view of $%{of}"),
                Storage::Slice { of, offset } => format!("slice of $%{of} at +{offset}"),
            };
            let _ = writeln!(s, "  $%{i}: {}{:?} {loc}  ; {}", v.dtype, v.shape, v.name);
        }
        for (i, st) in self.steps.iter().enumerate() {
            let ins: Vec<String> = st.inputs.iter().map(|v| format!("$%{v}")).collect();
            let what = match &st.kind {
                StepKind::Map { body } => format!("map {}", expr::display(body)),
                StepKind::Reduce {
                    kind,
                    extents,
                    body,
                    epilogue,
                } => format!(
                    "reduce {kind:?} over {extents:?}: {}{}",
                    expr::display(body),
                    epilogue
                        .as_ref()
                        .map(|e| format!(" then {}", expr::display(e)))
                        .unwrap_or_default()
                ),
                StepKind::MatMul { op: m, views } => {
                    let mut t = format!("matmul trans_a={} trans_b={}", m.trans_a, m.trans_b);
                    for (k, v) in views.iter().enumerate() {
                        if let Some(v) = v {
                            let _ = write!(t, " in{k}={:?}/strides{:?}", v.shape, v.strides);
                        }
                    }
                    t
                }
                StepKind::Conv {
                    op: c,
                    input_planes,
                } => format!(
                    "conv group={} strides={:?} pads={:?}/{:?}{}",
                    c.group,
                    c.strides,
                    c.pads_begin,
                    c.pads_end,
                    if input_planes.is_some() {
                        " (channels gathered)"
                    } else {
                        ""
                    }
                ),
                StepKind::ConvBlocked {
                    conv: c,
                    plain_input,
                } => format!(
                    "conv.nchwc{} group={} strides={:?} pads={:?}/{:?}",
                    if *plain_input { " (plain input)" } else { "" },
                    c.group,
                    c.strides,
                    c.pads_begin,
                    c.pads_end
                ),
                StepKind::PoolBlocked(p) => format!(
                    "pool.nchwc {:?} kernel={:?} strides={:?}",
                    p.kind, p.kernel, p.strides
                ),
                StepKind::Reorder { to_blocked, planes } => match (to_blocked, planes) {
                    (true, None) => "reorder to nchwc".to_string(),
                    (true, Some(p)) => format!("reorder to nchwc gathering planes {p:?}"),
                    (false, _) => "reorder to nchw".to_string(),
                },
                StepKind::Concat { axis } => format!("concat axis={axis}"),
                StepKind::ConcatRest { parts } => format!("concat (in place) copying to {parts:?}"),
                StepKind::Scatter(sc) => format!(
                    "scatter {:?} over {:?}: [{}] <- {}",
                    sc.kind,
                    sc.extents,
                    sc.index
                        .iter()
                        .map(expr::display)
                        .collect::<Vec<_>>()
                        .join(", "),
                    expr::display(&sc.value)
                ),
                StepKind::Assert { code } => format!("assert code {code}"),
                StepKind::Pool(p) => format!(
                    "pool {:?} kernel={:?} strides={:?}",
                    p.kind, p.kernel, p.strides
                ),
                StepKind::Kernel(k) => match k.attrs() {
                    a if a.is_empty() => k.name().to_string(),
                    a => format!("{} {a}", k.name()),
                },
                StepKind::Copy => "copy".to_string(),
            };
            let names: Vec<&str> = st.origins.iter().map(|o| o.name.as_str()).collect();
            let epi = match &st.epilogue {
                Some(e) => format!(
                    " epilogue[bias={:?} residual={:?} clamp={}..{}]",
                    e.bias.map(|b| st.inputs[b]),
                    e.residual.map(|r| st.inputs[r]),
                    e.lo,
                    e.hi
                ),
                None => String::new(),
            };
            let _ = writeln!(
                s,
                "  step {i}: $%{} = {what}{epi} ({})  ; {}",
                st.output,
                ins.join(", "),
                names.join(", ")
            );
        }
        for (k, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(s, "  output {k} \"{}\" = $%{}", o.name, o.value);
        }
        s.push_str("}\n");
        s
    }
}
