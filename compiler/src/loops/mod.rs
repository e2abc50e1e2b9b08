//! The loop-level IR: per step, a function of loop nests over flat buffers, stores of scalar
//! expressions, reductions into registers, block copies and calls to runtime kernels.
//!
//! Expressions are the graph IR's `Expr`, except that `Load { input, index }` names a
//! *buffer* and carries one flat element offset. **Invariant:** every offset is in bounds
//! for all loop variable values (see `ir::expr`).

pub mod dims;
pub mod lower;
pub mod par;

use crate::ir::DType;
use crate::ir::expr::{self, E};
use crate::ir::graph::{IoGroup, ReduceKind};
use crate::schedule::EPILOGUE_ACC;
use onnxc_runtime::kernels::{ArgKind, KernelAbi};
use std::fmt::Write;
use std::sync::Arc;

pub type BufId = u32;

/// The index variable holding run-time dim `k` (`dims`): bound outside every loop, read
/// from the dims array the run is given.
pub const DIM_VAR: u32 = 1 << 30;

/// Run-time dim `k` as an expression.
pub fn dim(k: u32) -> E {
    expr::var(DIM_VAR + k)
}

/// Whether `var` is a run-time dim rather than a loop variable.
pub fn is_dim(var: u32) -> bool {
    var >= DIM_VAR
}

/// A loop's trip count, a reduction's extent or a copy's length: a constant, or an i64
/// expression over the run-time dims (`dims`), with its largest value within their bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Count {
    Fixed(i64),
    Dyn { e: E, max: i64 },
}

impl Count {
    /// The count, when it is a constant.
    pub fn fixed(&self) -> Option<i64> {
        match self {
            Count::Fixed(n) => Some(*n),
            Count::Dyn { .. } => None,
        }
    }

    /// The largest count of any run (the count itself when fixed).
    pub fn max(&self) -> i64 {
        match self {
            Count::Fixed(n) | Count::Dyn { max: n, .. } => *n,
        }
    }

    /// The count as an i64 expression.
    pub fn expr(&self) -> E {
        match self {
            Count::Fixed(n) => expr::i(*n),
            Count::Dyn { e, .. } => e.clone(),
        }
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Count::Fixed(n) => write!(f, "{n}"),
            Count::Dyn { e, max } => write!(f, "{} (≤{max})", expr::display(e)),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Loc {
    Input(usize),
    Output(usize),
    Const(Arc<Vec<u8>>),
    Arena(u64),
}

#[derive(Clone, Debug)]
pub struct Buffer {
    pub dtype: DType,
    pub len: i64,
    pub loc: Loc,
    /// Byte offset from the start of `loc` (slices of concat outputs).
    pub offset: u64,
    /// The offset as a function of the run-time dims (`dims`; a slice past channels whose
    /// planes they size), which `offset` is at their bounds; None when it is `offset`
    /// everywhere.
    pub offset_at: Option<E>,
}

#[derive(Clone, Debug)]
pub struct IoDesc {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// A ZipMap output's keys: the tensor `[n, keys]` holds the maps' values.
    pub keys: Option<Arc<crate::ir::graph::MapKeys>>,
    /// Its dim 0 is a run-time batch (`passes::batch`): `shape` is one item's (dim 0 is 1),
    /// and `NAME_run_shaped` runs the program once per item.
    pub batched: bool,
    /// An output whose dims depend on the data (`ir::graph::GraphIo::dims_at`): `shape` is
    /// their bound, and program output `k` holds the actual dims (int64 `[rank]`).
    pub dims_at: Option<usize>,
    /// A program output the ABI does not expose: another output's dims (they come last).
    pub hidden: bool,
    /// A map input (`ir::graph::MapInput`): the caller passes an `onnxc_map`; `dtype` is
    /// the values' type, this the keys', and `shape` is empty.
    pub map_key: Option<DType>,
    /// Per dim, the run-time dim it follows (`Program::run_dims`); empty when every dim is
    /// fixed. `shape` then holds the dims at the run-time dims' bounds.
    pub run_dims: Vec<Option<RunDim>>,
}

/// A dim of an input or output that follows a run-time dim `d`:
/// `mul · ((d + pre) / div) + add`, the division rounding down (a strided window's output,
/// `(w - 1) / 2 + 1`); `pre` is 0 and `div` 1 for inputs, whose dims give `d`. With `other`,
/// it follows a second run-time dim too (`Other`): such a dim gives neither value, and is
/// checked against those the other dims give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunDim {
    pub dim: u32,
    pub mul: i64,
    pub add: i64,
    pub pre: i64,
    pub div: i64,
    pub other: Option<Other>,
}

/// The second run-time dim `dim` of a tensor dim that follows two (`RunDim::other`): with
/// `t` its step `(dims[dim] + pre) / div` and `s` the first dim's, the tensor dim adds
/// `mul · t + prod · s · t` (an attention mask over a cache and the new tokens, `past +
/// seq`: `mul` 1; a detector's anchors over its run-time height and width in multiples of
/// 32, `21 · h · w`: `prod` 21).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Other {
    pub dim: u32,
    pub mul: i64,
    pub pre: i64,
    pub div: i64,
    pub prod: i64,
}

impl RunDim {
    /// `mul · dim + add`.
    pub fn affine(dim: u32, mul: i64, add: i64) -> RunDim {
        RunDim {
            dim,
            mul,
            add,
            pre: 0,
            div: 1,
            other: None,
        }
    }

    /// The dim at `dims`, the values of the run-time dims (indexed by `dim`).
    pub fn at(&self, dims: &[i64]) -> i64 {
        let step = |d: u32, pre: i64, div: i64| (dims[d as usize] + pre).div_euclid(div.max(1));
        let s = step(self.dim, self.pre, self.div);
        let other = self.other.map_or(0, |o| {
            let t = step(o.dim, o.pre, o.div);
            o.mul * t + o.prod * s * t
        });
        self.mul * s + other + self.add
    }

    /// The value of the run-time dim that gives dim `x` (None when none does or many do:
    /// a dim with `div` above 1, or one that follows two).
    pub fn solve(&self, x: i64) -> Option<i64> {
        let v = x.checked_sub(self.add)?;
        (self.div == 1 && self.mul > 0 && self.other.is_none() && v % self.mul == 0)
            .then(|| v / self.mul - self.pre)
    }

    /// The dim as C reads it, over the run-time dims `dims` (their names, and the multiples
    /// they are taken in): "seq", "2*seq+1", "(w+1)/2", "past+seq", "21*(H/32)*(W/32)".
    pub fn show(&self, dims: &[RunTimeDim]) -> String {
        let dim = |k: u32| {
            dims.get(k as usize)
                .map_or(("?", 1), |d| (d.name.as_str(), d.multiple))
        };
        let (a, ma) = dim(self.dim);
        let mut terms = Vec::new();
        if self.mul != 0 {
            terms.push(term(a, ma, self.mul, self.pre, self.div));
        }
        if let Some(o) = self.other {
            let (b, mb) = dim(o.dim);
            if o.mul != 0 {
                terms.push(term(b, mb, o.mul, o.pre, o.div));
            }
            if o.prod != 0 {
                let (s, t) = (step(a, ma, self.pre, self.div), step(b, mb, o.pre, o.div));
                let wrap = |x: String| if x.contains('/') { format!("({x})") } else { x };
                terms.push(match o.prod {
                    1 => format!("{}*{}", wrap(s), wrap(t)),
                    p => format!("{p}*{}*{}", wrap(s), wrap(t)),
                });
            }
        }
        let out = terms.join("+");
        match self.add {
            0 => out,
            a => format!("{out}{a:+}"),
        }
    }
}

/// `mul · ((value + pre) / div)` over a run-time dim's symbol `name`, taken in multiples of
/// `multiple` (its value is `name / multiple`): `mul · value` with `mul` a multiple of it is
/// shown over `name`.
fn term(name: &str, multiple: i64, mul: i64, pre: i64, div: i64) -> String {
    if multiple > 1 && pre == 0 && div == 1 && mul % multiple == 0 {
        return term(name, 1, mul / multiple, 0, 1);
    }
    let t = step(name, multiple, pre, div);
    match mul {
        1 => t,
        m => format!("{m}*{t}"),
    }
}

/// `(value + pre) / div` over a run-time dim's symbol `name`, taken in multiples of
/// `multiple`.
fn step(name: &str, multiple: i64, pre: i64, div: i64) -> String {
    let name = if multiple > 1 {
        format!("{name}/{multiple}")
    } else {
        name.to_string()
    };
    match (pre, div) {
        (0, 1) => name,
        (0, q) => format!("{name}/{q}"),
        (p, 1) => format!("({name}{p:+})"),
        (p, q) => format!("({name}{p:+})/{q}"),
    }
}

/// A dim the program takes at run time (`dims`): its symbol, its least value (below it the
/// model is invalid: a window wider than the dim), its largest value, and the multiple the
/// model takes it in. The program's value of the dim counts multiples: with `multiple` 32
/// (an FPN that adds ×2 upsamplings to their laterals is valid at multiples of its strides'
/// product only), the inputs' dim is 32 × the value, which runs from `least` to `bound`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunTimeDim {
    pub name: String,
    pub least: i64,
    pub bound: i64,
    pub multiple: i64,
}

impl RunTimeDim {
    /// `name (least to bound)`, in the dim's own units.
    pub fn describe(&self) -> String {
        let m = self.multiple;
        if m == 1 {
            format!("{} ({} to {})", self.name, self.least, self.bound)
        } else {
            format!(
                "{} ({} to {}, a multiple of {m})",
                self.name,
                m * self.least,
                m * self.bound
            )
        }
    }
}

/// Bytes of the C `onnxc_map` (`onnxc_runtime::map::Map`).
pub const MAP_BYTES: i64 = std::mem::size_of::<onnxc_runtime::map::Map>() as i64;

impl IoDesc {
    pub fn len(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Bytes the caller passes (packed for the 4- and 2-bit types; an `onnxc_map` for a
    /// map).
    pub fn bytes(&self) -> i64 {
        if self.map_key.is_some() {
            return MAP_BYTES;
        }
        self.dtype.abi_bytes(self.len())
    }
}

/// A runtime kernel's C signature (`onnxc_runtime::kernels`: symbol and argument kinds,
/// declared once beside the runtime's definitions).
pub type Kernel = &'static KernelAbi;

#[derive(Clone, Debug)]
pub enum Arg {
    /// Address of element `offset` of a buffer.
    Ptr { buf: BufId, offset: E },
    /// A null pointer.
    Null,
    /// An i64 value.
    Int(E),
    /// Address of a read-only i64 array.
    Params(Vec<i64>),
    /// Address of an i64 array computed at run time (parameters over the run-time dims).
    DynParams(Vec<E>),
    /// Address of a read-only f32 array.
    Floats(Vec<f32>),
    /// Address of a large read-only i64 array (an encoded table, dumped by its size).
    Blob(Arc<Vec<i64>>),
    /// Address of the step's scratch in the workspace (`Program::scratch_base`): its shared
    /// area, then its workers' slots (`onnxc_runtime::par::ScratchNeed::layout`).
    Scratch { offset: u64 },
    /// The run's threads (null in a single-threaded run).
    Threads,
}

impl Arg {
    /// Whether generated code may pass this argument where the kernel's signature says
    /// `kind`.
    fn fits(&self, kind: ArgKind) -> bool {
        use ArgKind::*;
        match self {
            Arg::Ptr { .. } => matches!(kind, In | OptIn | Out),
            Arg::Null => matches!(kind, OptIn | OptParams | OptFloats | OptScratch),
            Arg::Int(_) => kind == Int,
            Arg::Params(_) | Arg::DynParams(_) | Arg::Blob(_) => {
                matches!(kind, Params | OptParams)
            }
            Arg::Floats(_) => matches!(kind, Floats | OptFloats),
            Arg::Scratch { .. } => matches!(kind, Scratch | OptScratch),
            Arg::Threads => kind == Threads,
        }
    }

    /// Address of a buffer's first element.
    pub fn start(buf: BufId) -> Arg {
        Arg::Ptr {
            buf,
            offset: crate::ir::expr::i(0),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Stmt {
    For {
        var: u32,
        extent: Count,
        vector: bool,
        body: Vec<Stmt>,
    },
    Store {
        buf: BufId,
        offset: E,
        value: E,
    },
    /// `buf[offset] = epilogue(fold(kind, body over loops))`.
    Reduce {
        buf: BufId,
        offset: E,
        kind: ReduceKind,
        loops: Vec<(u32, Count)>,
        body: E,
        epilogue: Option<E>,
    },
    /// Copies `elems` elements (non-overlapping).
    Copy {
        dst: BufId,
        dst_offset: E,
        src: BufId,
        src_offset: E,
        elems: Count,
    },
    Call {
        kernel: Kernel,
        args: Vec<Arg>,
    },
    /// Sets the run's error code to `code` (first error wins) when `cond` is false.
    Check {
        cond: E,
        code: i32,
    },
}

impl Stmt {
    /// A call of `kernel`, its arguments checked against the kernel's declared signature
    /// (a mismatch is a compiler bug).
    pub fn call(kernel: Kernel, args: Vec<Arg>) -> crate::Result<Stmt> {
        let ok = args.len() == kernel.args.len()
            && args.iter().zip(kernel.args).all(|(a, (_, k))| a.fits(*k));
        if !ok {
            return Err(crate::Error::Internal(format!(
                "call of {} does not match its signature {:?}: {args:?}",
                kernel.symbol, kernel.args
            )));
        }
        Ok(Stmt::Call { kernel, args })
    }
}

#[derive(Clone, Debug)]
pub struct Func {
    pub name: String,
    /// The ONNX nodes computed here, for comments.
    pub origin: String,
    pub body: Vec<Stmt>,
    /// Every iteration of its top-level loops writes elements no other iteration reads or
    /// writes, so they may run in parallel chunks (`par`).
    pub parallel: bool,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub buffers: Vec<Buffer>,
    pub funcs: Vec<Func>,
    /// Workspace bytes of a single-threaded run: the arena, then one worker's scratch.
    pub workspace_size: u64,
    /// Where the kernels' scratch starts (64-byte aligned, after the arena): every kernel
    /// call's scratch pointer (`onnxc_runtime::par::ScratchNeed::layout`).
    pub scratch_base: u64,
    /// Bytes of string space before `scratch_base` (after the arena): the strings the run
    /// makes, which outputs may point into, so a run needs the caller's workspace.
    pub string_bytes: u64,
    /// The largest shared scratch of a call (a multiple of 64).
    pub scratch_shared: u64,
    /// The largest per-worker slot (a multiple of 64): a run with `w` workers needs
    /// `scratch_base + scratch_shared + w · scratch_per_worker` bytes. A parallel loop's
    /// worker `w` finds its calls' scratch at slot `w` (`scratch_base + scratch_shared + w ·
    /// scratch_per_worker`).
    pub scratch_per_worker: u64,
    pub inputs: Vec<IoDesc>,
    pub outputs: Vec<IoDesc>,
    /// The model's ONNX inputs and outputs over `inputs` and the public outputs: where a
    /// sequence is several ABI tensors or an empty optional none (`IoGroup`).
    pub input_groups: Vec<IoGroup>,
    pub output_groups: Vec<IoGroup>,
    /// Programs for chunks of a run-time batch (largest first; `driver::batch`): each
    /// computes `items` items at once, with this program's inputs and outputs at `items`
    /// times their batched dims. `NAME_run_shaped` runs whole chunks, then single items.
    pub chunks: Vec<Chunk>,
    /// The most items the run-time batch may hold (`driver::Options::batch_bound`); 0: any
    /// number.
    pub batch_bound: i64,
    /// Programs compiled for single values of run-time dims below those the program's
    /// formulas serve (`driver`): `NAME_run_shaped` runs the first for the inputs' values
    /// where there is one (those for two values come before those for one). Their inputs
    /// and outputs are this program's at those values.
    pub fixed: Vec<Fixed>,
    /// The dims the program takes at run time (`dims`; `DIM_VAR`), in the order of the dims
    /// array its functions read after the input pointers (`inputs[inputs.len()]`). Buffers,
    /// arena and workspace are laid out for their bounds.
    pub run_dims: Vec<RunTimeDim>,
    /// The sizes each convolution's layout and kernel path were chosen at
    /// (`schedule::layout::ConvSizes`): compiling at a dim's bound gives those to replay at
    /// its other values (`driver`). Not part of the object.
    pub conv_sizes: Vec<crate::schedule::layout::ConvSizes>,
}

/// A program computing `items` items of a run-time batch at once (`Program::chunks`).
#[derive(Clone, Debug)]
pub struct Chunk {
    pub items: i64,
    pub program: Program,
}

/// A program for single values of run-time dims (`Program::fixed`).
#[derive(Clone, Debug)]
pub struct Fixed {
    /// The value of each of the model's run-time dims it is for, in their units (of
    /// `RunTimeDim::multiple`); None for the one dim it takes at run time itself (as its
    /// only run-time dim).
    pub at: Vec<Option<i64>>,
    pub program: Program,
}

impl Fixed {
    /// A program for value `value` of a model's only run-time dim.
    pub fn one(value: i64, program: Program) -> Fixed {
        Fixed {
            at: vec![Some(value)],
            program,
        }
    }

    /// `seq 1`, `batch 1 and seq 1`, `batch 1 (any seq)`: the values it is for, in the
    /// dims' own units.
    pub fn describe(&self, dims: &[RunTimeDim]) -> String {
        let values: Vec<String> = (self.at.iter().zip(dims))
            .filter_map(|(v, d)| v.map(|v| format!("{} {}", d.name, d.multiple * v)))
            .collect();
        let any: Vec<&str> = (self.at.iter().zip(dims))
            .filter(|(v, _)| v.is_none())
            .map(|(_, d)| d.name.as_str())
            .collect();
        match any.first() {
            Some(name) => format!("{} (any {name})", values.join(" and ")),
            None => values.join(" and "),
        }
    }
}

impl Program {
    /// Which of the buffers a statement of the program reads or writes (loads, stores,
    /// copies, kernel arguments), by buffer id.
    pub fn referenced_buffers(&self) -> Vec<bool> {
        let mut ids = Vec::new();
        for f in &self.funcs {
            collect_bufs(&f.body, &mut ids);
        }
        let mut used = vec![false; self.buffers.len()];
        for b in ids {
            if let Some(u) = used.get_mut(b as usize) {
                *u = true;
            }
        }
        used
    }

    /// The programs sharing this one's workspace: itself, its chunks and its fixed-value
    /// programs.
    fn all(&self) -> impl Iterator<Item = &Program> {
        std::iter::once(self)
            .chain(self.chunks.iter().map(|c| &c.program))
            .chain(self.fixed.iter().map(|f| &f.program))
    }

    /// Whether the object holds programs besides this one (whose constants they share).
    pub fn has_others(&self) -> bool {
        !self.chunks.is_empty() || !self.fixed.is_empty()
    }

    /// Workspace bytes of a single-threaded run of any of the model's programs (the
    /// exported `NAME_workspace_size`), staging included: `workspace_base() +
    /// workspace_per_worker()`, which is `workspace_size` plus staging without chunks.
    pub fn workspace_bytes(&self) -> u64 {
        self.workspace_base() + self.workspace_per_worker()
    }

    /// Workspace bytes of a run on `w` workers of any of the model's programs, as
    /// `workspace_base() + w · workspace_per_worker()`, staging included.
    pub fn workspace_base(&self) -> u64 {
        self.all()
            .map(|p| p.scratch_base + p.scratch_shared)
            .max()
            .unwrap_or(0)
            + self.staging_bytes()
    }

    /// See `workspace_base`.
    pub fn workspace_per_worker(&self) -> u64 {
        self.all().map(|p| p.scratch_per_worker).max().unwrap_or(0)
    }

    /// The outputs the ABI exposes (hidden ones, another output's dims, come after them).
    pub fn public_outputs(&self) -> &[IoDesc] {
        let n = self.outputs.iter().take_while(|o| !o.hidden).count();
        &self.outputs[..n]
    }

    /// Whether some output's dims depend on the data: `NAME_run_shaped` is then the only
    /// entry point that runs the model.
    pub fn dynamic(&self) -> bool {
        self.outputs.iter().any(|o| o.dims_at.is_some())
    }

    /// Workspace bytes after the program's own where `NAME_run_shaped` stages the outputs
    /// whose dims depend on the data (`onnxc_runtime::shaped::staging_bytes`).
    pub fn staging_bytes(&self) -> u64 {
        onnxc_runtime::shaped::staging_bytes(
            self.outputs
                .iter()
                .filter(|o| o.dims_at.is_some())
                .map(|o| (o.bytes() as u64, o.shape.len())),
        )
    }

    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "program \"{}\" (workspace {} bytes: scratch at +{}, {} shared, {} per worker) {{",
            self.name,
            self.workspace_size,
            self.scratch_base,
            self.scratch_shared,
            self.scratch_per_worker
        );
        for (i, b) in self.buffers.iter().enumerate() {
            let loc = match &b.loc {
                Loc::Input(k) => format!("input {k}"),
                Loc::Output(k) => format!("output {k}"),
                Loc::Const(d) => format!("const ({} bytes)", d.len()),
                Loc::Arena(o) => format!("arena +{o}"),
            };
            let at = if let Some(e) = &b.offset_at {
                format!(" +{} bytes", expr::display(e))
            } else if b.offset > 0 {
                format!(" +{} bytes", b.offset)
            } else {
                String::new()
            };
            let _ = writeln!(s, "  buf{i}: {}[{}] {loc}{at}", b.dtype, b.len);
        }
        for f in &self.funcs {
            let _ = writeln!(s, "  func {}  ; {}", f.name, f.origin);
            dump_stmts(&mut s, &f.body, 2);
        }
        s.push_str("}\n");
        s
    }
}

fn dump_stmts(s: &mut String, body: &[Stmt], depth: usize) {
    let pad = "  ".repeat(depth);
    for st in body {
        match st {
            Stmt::For {
                var,
                extent,
                vector,
                body,
            } => {
                let _ = writeln!(
                    s,
                    "{pad}for v{var} in 0..{extent}{} {{",
                    if *vector { " vectorize" } else { "" }
                );
                dump_stmts(s, body, depth + 1);
                let _ = writeln!(s, "{pad}}}");
            }
            Stmt::Store { buf, offset, value } => {
                let _ = writeln!(
                    s,
                    "{pad}buf{buf}[{}] = {}",
                    expr::display(offset),
                    expr::display(value)
                );
            }
            Stmt::Reduce {
                buf,
                offset,
                kind,
                loops,
                body,
                epilogue,
            } => {
                let ls: Vec<String> = loops
                    .iter()
                    .map(|(v, e)| format!("v{v} in 0..{e}"))
                    .collect();
                let _ = writeln!(
                    s,
                    "{pad}buf{buf}[{}] = {}{kind:?}({}: {})",
                    expr::display(offset),
                    epilogue
                        .as_ref()
                        .map(|e| format!("[{}] <- ", expr::display(e)))
                        .unwrap_or_default(),
                    ls.join(", "),
                    expr::display(body)
                );
            }
            Stmt::Copy {
                dst,
                dst_offset,
                src,
                src_offset,
                elems,
            } => {
                let _ = writeln!(
                    s,
                    "{pad}copy buf{dst}[{}..] <- buf{src}[{}..] x{elems}",
                    expr::display(dst_offset),
                    expr::display(src_offset)
                );
            }
            Stmt::Check { cond, code } => {
                let _ = writeln!(s, "{pad}check {} else error {code}", expr::display(cond));
            }
            Stmt::Call { kernel, args } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Ptr { buf, offset } => format!("&buf{buf}[{}]", expr::display(offset)),
                        Arg::Null => "null".into(),
                        Arg::Int(e) => expr::display(e),
                        Arg::Params(p) => format!("{p:?}"),
                        Arg::DynParams(p) => {
                            let p: Vec<String> = p.iter().map(expr::display).collect();
                            format!("[{}]", p.join(", "))
                        }
                        Arg::Floats(p) => format!("{p:?}f"),
                        Arg::Blob(b) => format!("blob[{} words]", b.len()),
                        Arg::Scratch { offset } => format!("scratch+{offset}"),
                        Arg::Threads => "threads".to_string(),
                    })
                    .collect();
                let _ = writeln!(s, "{pad}call {}({})", kernel.symbol, a.join(", "));
            }
        }
    }
}

/// Rebuilds every expression of `body` with `f`: offsets, stored values, reduction bodies
/// and epilogues, conditions, kernel arguments and run-time counts.
pub fn map_exprs(body: &mut [Stmt], f: &mut dyn FnMut(&E) -> E) {
    fn count(c: &mut Count, f: &mut dyn FnMut(&E) -> E) {
        if let Count::Dyn { e, .. } = c {
            *e = f(e);
        }
    }
    for s in body {
        match s {
            Stmt::For { extent, body, .. } => {
                count(extent, f);
                map_exprs(body, f);
            }
            Stmt::Store { offset, value, .. } => {
                *offset = f(offset);
                *value = f(value);
            }
            Stmt::Reduce {
                offset,
                loops,
                body,
                epilogue,
                ..
            } => {
                *offset = f(offset);
                for (_, c) in loops {
                    count(c, f);
                }
                *body = f(body);
                if let Some(e) = epilogue {
                    *e = f(e);
                }
            }
            Stmt::Copy {
                dst_offset,
                src_offset,
                elems,
                ..
            } => {
                *dst_offset = f(dst_offset);
                *src_offset = f(src_offset);
                count(elems, f);
            }
            Stmt::Check { cond, .. } => *cond = f(cond),
            Stmt::Call { args, .. } => {
                for a in args {
                    match a {
                        Arg::Ptr { offset, .. } => *offset = f(offset),
                        Arg::Int(e) => *e = f(e),
                        Arg::DynParams(p) => p.iter_mut().for_each(|e| *e = f(e)),
                        Arg::Null
                        | Arg::Params(_)
                        | Arg::Floats(_)
                        | Arg::Blob(_)
                        | Arg::Scratch { .. }
                        | Arg::Threads => {}
                    }
                }
            }
        }
    }
}

/// Calls `f` on every expression of `body`, in the order `map_exprs` rebuilds them.
pub fn for_each_expr(body: &[Stmt], f: &mut dyn FnMut(&E)) {
    fn count(c: &Count, f: &mut dyn FnMut(&E)) {
        if let Count::Dyn { e, .. } = c {
            f(e);
        }
    }
    for s in body {
        match s {
            Stmt::For { extent, body, .. } => {
                count(extent, f);
                for_each_expr(body, f);
            }
            Stmt::Store { offset, value, .. } => {
                f(offset);
                f(value);
            }
            Stmt::Reduce {
                offset,
                loops,
                body,
                epilogue,
                ..
            } => {
                f(offset);
                for (_, c) in loops {
                    count(c, f);
                }
                f(body);
                if let Some(e) = epilogue {
                    f(e);
                }
            }
            Stmt::Copy {
                dst_offset,
                src_offset,
                elems,
                ..
            } => {
                f(dst_offset);
                f(src_offset);
                count(elems, f);
            }
            Stmt::Check { cond, .. } => f(cond),
            Stmt::Call { args, .. } => {
                for a in args {
                    match a {
                        Arg::Ptr { offset, .. } => f(offset),
                        Arg::Int(e) => f(e),
                        Arg::DynParams(p) => p.iter().for_each(&mut *f),
                        Arg::Null
                        | Arg::Params(_)
                        | Arg::Floats(_)
                        | Arg::Blob(_)
                        | Arg::Scratch { .. }
                        | Arg::Threads => {}
                    }
                }
            }
        }
    }
}

/// The buffers `body` refers to (loads, stores, reductions, copies, kernel pointers), with
/// repeats.
pub fn collect_bufs(body: &[Stmt], out: &mut Vec<BufId>) {
    // The buffers statements name themselves; then those their expressions load.
    fn named(body: &[Stmt], out: &mut Vec<BufId>) {
        for s in body {
            match s {
                Stmt::For { body, .. } => named(body, out),
                Stmt::Store { buf, .. } | Stmt::Reduce { buf, .. } => out.push(*buf),
                Stmt::Copy { dst, src, .. } => out.extend([*dst, *src]),
                Stmt::Check { .. } => {}
                Stmt::Call { args, .. } => out.extend(args.iter().filter_map(|a| match a {
                    Arg::Ptr { buf, .. } => Some(*buf),
                    _ => None,
                })),
            }
        }
    }
    named(body, out);
    for_each_expr(body, &mut |e| {
        let mut used = Vec::new();
        expr::used_inputs(e, &mut used);
        out.extend(used.into_iter().filter(|&b| b != EPILOGUE_ACC));
    });
}
