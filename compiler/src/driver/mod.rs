//! The driver: the only module that touches the filesystem or spawns processes (but for
//! `frontend::tensor` reading external data inside the model's directory).
//! `compile` runs the pipeline; `run` and `bench` link the object into an executable with
//! the runtime library and the system C compiler and execute it.

mod batch;
mod dims;
mod maps;
pub mod npy;
mod pinned;

use crate::codegen::{self, CodegenOptions};
use crate::error::{Error, Result};
use crate::frontend::{self, ImportOptions, tensor::DataDir};
use crate::ir::graph::{IoGroup, IoKind};
use crate::ir::{Tensor, Value};
use crate::loops::{self, IoDesc, Program, RunTimeDim};
use crate::passes::{self, PassOptions};
use crate::schedule::{self, fuse::FuseOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

pub use dims::DEFAULT_DIM_BOUND;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OptLevel {
    O0,
    O2,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Emit {
    Graph,
    Schedule,
    Loops,
    Clif,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Symbol prefix; defaults to the output file stem.
    pub name: Option<String>,
    pub shapes: Vec<(String, Vec<i64>)>,
    /// `--dim SYMBOL=N`: values for named symbolic dims.
    pub dims: Vec<(String, i64)>,
    /// `--dim SYMBOL=..N`: bounds of dims taken at run time (`loops::dims`; default
    /// `DEFAULT_DIM_BOUND`).
    pub dim_bounds: Vec<(String, i64)>,
    /// `--sequence NAME=[D0,…]…`: a sequence input's element shapes (and so its length).
    pub sequences: Vec<(String, Vec<Vec<i64>>)>,
    /// `--absent NAME`: optional inputs compiled as empty.
    pub absent: Vec<String>,
    pub target: Option<String>,
    pub opt: OptLevel,
    pub emit_main: bool,
    /// Instrument every step with timers (`onnxc bench --profile`).
    pub profile: bool,
    /// Compute 3×3 convolutions without Winograd transforms (`--no-winograd`).
    pub no_winograd: bool,
    /// Print warnings as JSON lines (`--error-format json`).
    pub json_diagnostics: bool,
    /// Print no warnings (a caller that judges the compiled model by its outputs: the
    /// conformance runner).
    pub quiet: bool,
    /// Bytes of string space per string a model makes at run time (`--string-bytes`).
    pub string_bytes: u64,
    /// The most items a run-time batch may hold: set by the driver from a `--dim N=..B`
    /// bound on a leading batch symbol (`dims::as_run_time_batch`); None: any number.
    pub batch_bound: Option<i64>,
}

impl Options {
    /// What the frontend takes of these options.
    pub fn import_options(&self) -> ImportOptions {
        ImportOptions {
            input_shapes: self.shapes.clone(),
            dim_values: self.dims.clone(),
            sequences: self.sequences.clone(),
            absent: self.absent.clone(),
            string_bytes: self.string_bytes,
            ..ImportOptions::default()
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: None,
            shapes: vec![],
            dims: vec![],
            dim_bounds: vec![],
            sequences: vec![],
            absent: vec![],
            target: None,
            opt: OptLevel::O2,
            emit_main: false,
            profile: false,
            no_winograd: false,
            json_diagnostics: false,
            quiet: false,
            string_bytes: frontend::DEFAULT_STRING_BYTES,
            batch_bound: None,
        }
    }
}

pub struct Compiled {
    pub prefix: String,
    pub object: Vec<u8>,
    pub header: String,
    pub program: Program,
    /// Text of the `--emit` stage, when requested.
    pub dump: Option<String>,
    pub compile_ms: f64,
}

/// Reads and compiles a model file.
pub fn compile_file(
    path: &Path,
    prefix: &str,
    opts: &Options,
    emit: Option<Emit>,
) -> Result<Compiled> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let dir = DataDir::of_model(path);
    let source = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    compile_source(Source::Owned(bytes), &dir, &source, prefix, opts, emit)
}

/// What `onnxc inspect` reports: the model's summary and, where it imports (every op
/// supported, every dim bound), the multiply-adds of its products and convolutions.
pub struct Inspection {
    pub summary: frontend::inspect::Summary,
    /// Per item of the run-time batch when `run_time_batch`.
    pub multiply_adds: Option<u64>,
    /// The model's symbolic leading input dims compile as a run-time batch.
    pub run_time_batch: bool,
    /// The other symbolic dims compiled to be taken at run time, with their bounds (the
    /// model imported at them).
    pub run_time_dims: Vec<(String, i64)>,
    /// The outputs whose dims depend on the data (`NAME_run_shaped` returns them).
    pub data_dependent: Vec<String>,
    /// Why the model does not import as given, if it does not (unsupported ops with their
    /// reasons, a symbolic dim to fix, a model error).
    pub import_error: Option<Error>,
    pub warnings: Vec<String>,
}

/// Reads the model at `path` and imports it with `opts`' shapes (nothing is compiled).
pub fn inspect(path: &Path, opts: &Options) -> Result<Inspection> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let dir = DataDir::of_model(path);
    let model = frontend::load(&bytes)?;
    drop(bytes);
    let _memo = memo_for_probes(&model, &opts.import_options());
    let summary = frontend::inspect::summarize(&model);
    // The dims a compile takes at run time, imported at their bounds.
    let import_at_bounds = |model: frontend::Model, opts: &Options| {
        let mut import = opts.import_options();
        let (model, mut warnings) = match dims::summed_symbols(&model, &dir, &import, opts) {
            Some((summed, w)) => (summed, vec![w]),
            None => (model, Vec::new()),
        };
        let run_dims = dims::run_time_dims(&model, &import, opts)?;
        let (run_dims, bounded) = dims::valid_bounds(&model, &dir, &import, opts, run_dims);
        warnings.extend(bounded);
        import.dim_values.extend(run_dims.iter().cloned());
        import_model(model, &dir, &import, false).map(|(g, b)| (g, b, run_dims, warnings))
    };
    // A panic is a compiler bug; reported as the import's error, not an abort.
    let imported = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // As a compile does: leading dims that make no run-time batch are run-time dims,
        // a dim the model is valid at one value of only is fixed there.
        with_dims_resolved(model, &dir, opts, import_at_bounds).map(
            |((g, b, d, mut w), leading, pinned)| {
                w.splice(
                    0..0,
                    pinned.into_iter().chain(leading.map(|l| l.warning(None))),
                );
                (g, b, d, w)
            },
        )
    }))
    .unwrap_or_else(|_| Err(Error::Internal("the import panicked".into())));
    Ok(match imported {
        Ok((g, batched, run_time_dims, bound_warnings)) => Inspection {
            summary,
            multiply_adds: crate::ir::cost::multiply_adds(&g),
            run_time_batch: batched.is_some(),
            run_time_dims,
            data_dependent: g
                .outputs
                .iter()
                .filter(|o| o.dims_at.is_some())
                .map(|o| o.name.clone())
                .collect(),
            import_error: None,
            warnings: bound_warnings
                .into_iter()
                .chain(g.warnings.clone())
                .collect(),
        },
        Err(e) => Inspection {
            summary,
            multiply_adds: None,
            run_time_batch: false,
            run_time_dims: Vec::new(),
            data_dependent: Vec::new(),
            import_error: Some(e),
            warnings: Vec::new(),
        },
    })
}

/// Imports `model`: as given, or, where its inputs leave leading dims symbolic that the
/// options do not bind, as the one-item program of a run-time batch (`batch::import`).
/// A run-time batch: which inputs and outputs carry it, and the graphs of its chunk
/// programs (`batch::Imported`).
type Batch = (crate::passes::batch::Batched, Vec<(i64, crate::ir::Graph)>);

/// With `chunks`, a run-time batch's chunk programs are imported too, where they pay
/// (`batch::import`).
fn import_model(
    model: frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    chunks: bool,
) -> Result<(crate::ir::Graph, Option<Batch>)> {
    let unbound = frontend::unbound_dims(&model, &import.input_shapes, &import.dim_values);
    if unbound.is_empty() {
        Ok((frontend::import_owned(model, dir, import)?, None))
    } else {
        let batch::Imported {
            item,
            batched,
            chunks,
        } = batch::import(model, dir, import, &unbound, chunks)?;
        Ok((item, Some((batched, chunks))))
    }
}

pub fn compile_bytes(
    bytes: &[u8],
    dir: &DataDir,
    source: &str,
    prefix: &str,
    opts: &Options,
    emit: Option<Emit>,
) -> Result<Compiled> {
    compile_source(Source::Borrowed(bytes), dir, source, prefix, opts, emit)
}

/// The model's bytes: owned ones are freed as soon as they are decoded (a large model's
/// weights would otherwise stay in memory twice for the whole compilation).
enum Source<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

fn compile_source(
    bytes: Source<'_>,
    dir: &DataDir,
    source: &str,
    prefix: &str,
    opts: &Options,
    emit: Option<Emit>,
) -> Result<Compiled> {
    // A panic is a compiler bug; report it as an internal error instead of aborting.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compile_bytes_inner(bytes, dir, source, prefix, opts, emit)
    }))
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::Internal(msg))
    })
}

fn compile_bytes_inner(
    bytes: Source<'_>,
    dir: &DataDir,
    source: &str,
    prefix: &str,
    opts: &Options,
    emit: Option<Emit>,
) -> Result<Compiled> {
    let t0 = Instant::now();
    let model = match bytes {
        Source::Owned(b) => frontend::load(&b)?,
        Source::Borrowed(b) => frontend::load(b)?,
    };
    let import = opts.import_options();
    let _memo = memo_for_probes(&model, &import);
    frontend::check_negative_dims(&model, &import.input_shapes, &import.dim_values)?;
    // A symbol the model takes only as the sum of two others (a cache's total length).
    let model = match dims::summed_symbols(&model, dir, &import, opts) {
        Some((summed, w)) => {
            print_warning(opts, &w);
            summed
        }
        None => model,
    };
    // Leading dims that do not make a run-time batch are taken at run time like any other;
    // a dim the model is valid at one value of only is fixed there.
    let (c, leading, pinned) = with_dims_resolved(model, dir, opts, |model, opts| {
        compile_model(model, dir, source, prefix, opts, emit, t0)
    })?;
    // The dim fixed first: the other dims are taken as they are for it.
    if let Some(w) = pinned {
        print_warning(opts, &w);
    }
    if let Some(l) = leading {
        print_warning(opts, &l.warning(Some(c.program.workspace_bytes())));
    }
    Ok(c)
}

/// What `with_dims_resolved` returns: `f`'s result, the leading dims it took at run time,
/// and the warning of a dim it fixed.
type Resolved<T> = (T, Option<dims::Leading>, Option<String>);

/// `f(model, opts)` where the options fix every dim; else `with_leading_at_run_time(model,
/// opts, f)`, and where that fails on a shape and the model is valid at one value only of a
/// symbolic input dim the options leave (`pinned::pinned`), the same with the dim fixed
/// there, and the warning that says so. Where that fails too, the first error stands.
fn with_dims_resolved<T>(
    model: frontend::Model,
    dir: &DataDir,
    opts: &Options,
    f: impl Fn(frontend::Model, &Options) -> Result<T>,
) -> Result<Resolved<T>> {
    // A model whose dims are all fixed is compiled as it is, with no copy of its weights.
    let import = opts.import_options();
    if frontend::unbound_dims(&model, &import.input_shapes, &import.dim_values).is_empty() {
        return f(model, opts).map(|t| (t, None, None));
    }
    let first = match with_leading_at_run_time(&model, opts, &f) {
        Ok((t, leading)) => return Ok((t, leading, None)),
        Err(e) => e,
    };
    // Only a shape the model fails at may be a dim it pins (not an unsupported op).
    if !matches!(first, Error::Model(_) | Error::NeedShape(_)) {
        return Err(first);
    }
    // The other dims are then taken as before (a leading one at run time where it makes no
    // run-time batch).
    match pinned::pinned(&model, dir, opts) {
        Some((fixed, warning)) => match with_leading_at_run_time(&model, &fixed, &f) {
            Ok((t, leading)) => Ok((t, leading, Some(warning))),
            Err(_) => Err(first),
        },
        None => Err(first),
    }
}

/// Where `import` leaves symbolic input dims unbound, a scope in which the compiler's
/// folds are computed once (`ir::interp::memo_scope`): the model is then imported and
/// lowered at several values of its run-time dims (`dims`), which fold the same dequantized
/// weights and tables at each (a quantized transformer with a run-time sequence: 16.7 s to
/// 1.8 s). A model whose dims are all fixed is lowered once and keeps no fold past its use.
fn memo_for_probes(
    model: &frontend::Model,
    import: &ImportOptions,
) -> Option<crate::ir::interp::MemoScope> {
    let unbound = frontend::unbound_dims(model, &import.input_shapes, &import.dim_values);
    (!unbound.is_empty()).then(crate::ir::interp::memo_scope)
}

/// `bytes` for a message: in KB, MB or GB (powers of 1024) with three significant digits.
pub(crate) fn byte_size(bytes: u64) -> String {
    let b = bytes as f64;
    let (v, unit) = if b >= (1u64 << 30) as f64 {
        (b / (1u64 << 30) as f64, "GB")
    } else if b >= (1 << 20) as f64 {
        (b / (1 << 20) as f64, "MB")
    } else if b >= 1024.0 {
        (b / 1024.0, "KB")
    } else {
        return format!("{bytes} bytes");
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// `f(model, opts)` on copies of `model` (kept for the next try), the model's bounded
/// symbolic leading input dims first taken as a bounded run-time batch
/// (`dims::as_run_time_batch`; where that fails, as the options ask: at run time up to
/// their bounds); where that fails for a shape reason and its unbounded symbolic leading
/// input dims make no run-time batch, `f` again with those dims taken at run time
/// (`dims::leading_at_run_time`), with those dims (whose `warning` says so). If that fails
/// too, the first error stands.
fn with_leading_at_run_time<T>(
    model: &frontend::Model,
    opts: &Options,
    f: impl Fn(frontend::Model, &Options) -> Result<T>,
) -> Result<(T, Option<dims::Leading>)> {
    let import = opts.import_options();
    if let Some(batch) = dims::as_run_time_batch(model, &import, opts)
        && let Ok(t) = f(model.clone(), &batch)
    {
        return Ok((t, None));
    }
    let Some(wider) = dims::leading_at_run_time(model, &import, opts) else {
        return f(model.clone(), opts).map(|t| (t, None));
    };
    match f(model.clone(), opts) {
        Err(e @ Error::NeedShape(_)) => match f(model.clone(), &wider.opts) {
            Ok(t) => Ok((t, Some(wider))),
            Err(_) => Err(e),
        },
        r => r.map(|t| (t, None)),
    }
}

/// Compiles the decoded `model` (`compile_bytes_inner`; `t0` when the compile started).
fn compile_model(
    model: frontend::Model,
    dir: &DataDir,
    source: &str,
    prefix: &str,
    opts: &Options,
    emit: Option<Emit>,
    t0: Instant,
) -> Result<Compiled> {
    let import = opts.import_options();
    let run_dims = dims::run_time_dims(&model, &import, opts)?;
    let (run_dims, warnings) = dims::valid_bounds(&model, dir, &import, opts, run_dims);
    for w in &warnings {
        print_warning(opts, w);
    }
    let program = match &run_dims[..] {
        [a, b] => match dims::two_dims(&model, dir, &import, opts, emit, prefix, a, b)? {
            Lowered::Program(p) => p,
            Lowered::Dump(c) => return Ok(c),
        },
        [] => match lower_model(
            model,
            dir,
            &import,
            opts,
            emit,
            prefix,
            true,
            Lowering::Model,
        )? {
            Lowered::Program(p) => p,
            Lowered::Dump(c) => return Ok(c),
        },
        [(name, bound)] => {
            match dims::one_dim(&model, dir, &import, opts, emit, prefix, name, *bound)? {
                Lowered::Program(p) => p,
                Lowered::Dump(c) => return Ok(c),
            }
        }
        _ => unreachable!("at most two dims are taken at run time"),
    };
    let mut program = program;
    if program.inputs.iter().any(|t| t.batched) {
        program.batch_bound = opts.batch_bound.unwrap_or(0);
    }
    if emit == Some(Emit::Loops) {
        return Ok(dump_only(prefix, program.dump()));
    }
    let optimize = opts.opt == OptLevel::O2;
    let cg = CodegenOptions {
        target: opts.target.clone(),
        opt_level: if optimize { "speed" } else { "none" },
        emit_main: opts.emit_main,
        keep_clif: emit == Some(Emit::Clif),
        verify: cfg!(debug_assertions),
        profile: opts.profile,
    };
    let art = codegen::compile(&program, prefix, &cg)?;
    let header = codegen::header::header(&program, prefix, source);
    let dump = (emit == Some(Emit::Clif)).then_some(art.clif);
    Ok(Compiled {
        prefix: prefix.to_string(),
        object: art.object,
        header,
        program,
        dump,
        compile_ms: t0.elapsed().as_secs_f64() * 1e3,
    })
}

/// Prints a compile warning on stderr, as `--error-format` asks (none when `quiet`).
fn print_warning(opts: &Options, w: &str) {
    if opts.quiet {
        return;
    }
    if opts.json_diagnostics {
        eprintln!("{}", crate::error::warning_json(w));
    } else {
        eprintln!("onnxc: warning: {w}");
    }
}

/// A model lowered to its program, or the text of an earlier `--emit` stage.
enum Lowered {
    Program(Program),
    Dump(Compiled),
}

/// What `lower_model` lowers a model for.
enum Lowering {
    /// The object's program.
    Model,
    /// One value of a dim taken at run time (`loops::dims`): no chunk programs for a
    /// run-time batch, each of which would need its own probes, and no layout or kernel
    /// chosen by size, which would differ between the values; the convolutions' choices
    /// made at the given sizes (the bound's), if any.
    Probe(Option<Arc<[schedule::layout::ConvSizes]>>),
}

/// Imports, optimizes, schedules and lowers `model` for `lowering` (`warn`: prints the
/// import's warnings).
#[allow(clippy::too_many_arguments)]
fn lower_model(
    model: frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    emit: Option<Emit>,
    prefix: &str,
    warn: bool,
    lowering: Lowering,
) -> Result<Lowered> {
    let (probe, decide_at) = match lowering {
        Lowering::Model => (false, None),
        Lowering::Probe(d) => (true, d),
    };
    // Symbolic leading input dims the options leave unbound become a run-time batch.
    // Profiles time the one-item program's steps: no chunk programs then.
    let (mut graph, batch) = import_model(model, dir, import, !probe && !opts.profile)?;
    let (batched, chunk_graphs) = batch.map_or((None, Vec::new()), |(b, c)| (Some(b), c));
    for w in graph.warnings.iter().filter(|_| warn) {
        print_warning(opts, w);
    }
    let optimize = opts.opt == OptLevel::O2;
    let pass_options = PassOptions {
        optimize,
        fold_limit: import.fold_limit,
    };
    passes::optimize(&mut graph, &pass_options)?;
    if emit == Some(Emit::Graph) {
        return Ok(Lowered::Dump(dump_only(prefix, graph.dump())));
    }
    // The host runs what it compiles unless a target is named (then: a portable x86-64-v2
    // object, tuned like the AVX2 kernels).
    let wide_simd = opts.target.is_none() && onnxc_runtime::isa::wide_simd();
    let fuse = FuseOptions {
        inline: optimize,
        epilogues: optimize,
        layout: schedule::layout::LayoutOptions {
            blocked: optimize,
            wide_simd,
            no_winograd: opts.no_winograd,
            by_size: !probe,
            decide_at: decide_at.clone(),
        },
    };
    let mut sched = schedule::fuse::schedule(&graph, &fuse)?;
    let data_dims: Vec<(Option<usize>, bool)> = graph
        .outputs
        .iter()
        .map(|o| (o.dims_at, o.hidden))
        .collect();
    let groups = (
        std::mem::take(&mut graph.input_groups),
        std::mem::take(&mut graph.output_groups),
    );
    drop(graph);
    let lower = loops::lower::LowerOptions {
        wide_simd,
        no_winograd: opts.no_winograd,
        activation_kernels: optimize,
        by_size: !probe,
        decide_at,
        keep_scales: import.keep_scales,
    };
    let mut program = loops::lower::lower(&mut sched, &lower)?;
    let mark_batched = |program: &mut Program| {
        if let Some(b) = &batched {
            for (io, &c) in program.inputs.iter_mut().zip(&b.inputs) {
                io.batched = c;
            }
            for (io, &c) in program.outputs.iter_mut().zip(&b.outputs) {
                io.batched = c;
            }
        }
    };
    mark_batched(&mut program);
    // The chunk programs, compiled as the one-item program is; one that fails to build, or
    // whose workspace would grow the model's past `batch::CHUNK_WORKSPACE`, is left out (the
    // run then takes those items in smaller chunks or one by one).
    let most = batch::CHUNK_WORKSPACE.max(program.workspace_size);
    for (items, mut g) in chunk_graphs {
        let built = passes::optimize(&mut g, &pass_options)
            .and_then(|()| schedule::fuse::schedule(&g, &fuse))
            .and_then(|mut s| loops::lower::lower(&mut s, &lower));
        if let Ok(mut p) = built
            && p.workspace_size <= most
        {
            mark_batched(&mut p);
            program.chunks.push(loops::Chunk { items, program: p });
        }
    }
    for (io, &(dims_at, hidden)) in program.outputs.iter_mut().zip(&data_dims) {
        io.dims_at = dims_at;
        io.hidden = hidden;
    }
    // The frontend's grouping, where it made one (a graph built otherwise has tensors only).
    program.input_groups = if groups.0.is_empty() {
        IoGroup::tensors(program.inputs.iter().map(|d| d.name.clone()))
    } else {
        groups.0
    };
    program.output_groups = if groups.1.is_empty() {
        IoGroup::tensors(program.public_outputs().iter().map(|d| d.name.clone()))
    } else {
        groups.1
    };
    if emit == Some(Emit::Schedule) {
        return Ok(Lowered::Dump(dump_only(prefix, sched.dump())));
    }
    Ok(Lowered::Program(program))
}

fn dump_only(prefix: &str, text: String) -> Compiled {
    Compiled {
        prefix: prefix.to_string(),
        object: vec![],
        header: String::new(),
        program: Program {
            name: String::new(),
            buffers: vec![],
            funcs: vec![],
            workspace_size: 0,
            scratch_base: 0,
            run_dims: vec![],
            string_bytes: 0,
            scratch_shared: 0,
            scratch_per_worker: 0,
            inputs: vec![],
            outputs: vec![],
            input_groups: vec![],
            output_groups: vec![],
            chunks: vec![],
            batch_bound: 0,
            fixed: vec![],
            conv_sizes: vec![],
        },
        dump: Some(text),
        compile_ms: 0.0,
    }
}

/// The runtime header, embedded so `onnxc` can write it next to generated headers.
pub const RUNTIME_HEADER: &str = include_str!("../../../runtime-support/include/onnxc_runtime.h");

/// Locates `libonnxc_runtime.a`: `$ONNXC_RUNTIME_LIB`, else next to the `onnxc` executable
/// (or its parent directory, for test binaries in `target/*/deps`).
pub fn runtime_lib() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ONNXC_RUNTIME_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Tool(format!(
                "ONNXC_RUNTIME_LIB={} does not exist",
                p.display()
            )))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::Tool(format!("cannot locate the onnxc executable: {e}")))?;
    let mut tried = Vec::new();
    let mut dir = exe.parent().map(Path::to_path_buf);
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let p = d.join("libonnxc_runtime.a");
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p.display().to_string());
        dir = d.parent().map(Path::to_path_buf);
    }
    Err(Error::Tool(format!(
        "cannot find libonnxc_runtime.a (looked at {}); build it with `cargo build --release` or set ONNXC_RUNTIME_LIB",
        tried.join(", ")
    )))
}

/// The system libraries the runtime needs.
pub const SYSTEM_LIBS: [&str; 3] = ["-lm", "-lpthread", "-ldl"];

/// What a program links a compiled model with: the runtime library, the system libraries,
/// and `--gc-sections` so only the kernels the model calls stay in the executable (the C
/// example's text: 2.2 MB without, 0.87 MB with).
pub fn link_flags() -> Result<Vec<String>> {
    let mut flags = vec![runtime_lib()?.display().to_string()];
    flags.extend(SYSTEM_LIBS.iter().map(|s| s.to_string()));
    flags.push("-Wl,--gc-sections".into());
    Ok(flags)
}

/// A pkg-config file (`onnxc-runtime.pc`) describing the runtime library.
pub fn pkg_config() -> Result<String> {
    let lib = runtime_lib()?;
    let dir = lib.parent().unwrap_or(Path::new(".")).display().to_string();
    Ok(format!(
        "libdir={dir}\n\nName: onnxc-runtime\nDescription: The runtime library of \
         onnxc-compiled models (each model's header comes with its object)\nVersion: {}\n\
         Libs: ${{libdir}}/libonnxc_runtime.a {} -Wl,--gc-sections\n",
        env!("CARGO_PKG_VERSION"),
        SYSTEM_LIBS.join(" ")
    ))
}

/// Links objects with the runtime into an executable using `$CC` (default `cc`).
pub fn link(objects: &[PathBuf], exe: &Path) -> Result<()> {
    let lib = runtime_lib()?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(objects)
        .arg(&lib)
        .args(SYSTEM_LIBS)
        .arg("-o")
        .arg(exe)
        .output()
        .map_err(|e| {
            Error::Tool(format!(
                "cannot run the C compiler '{cc}' to link: {e} (set CC to choose another)"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "linking with '{cc}' failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// A scratch directory removed on drop (unless kept).
pub struct TempDir {
    pub path: PathBuf,
    pub keep: bool,
}

impl TempDir {
    pub fn new(tag: &str) -> Result<TempDir> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "onnxc-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        Ok(TempDir { path, keep: false })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// How an input file is bound to a graph input.
#[derive(Clone, Debug)]
pub enum InputArg {
    Positional(PathBuf),
    Named(String, PathBuf),
}

pub fn read_tensor(path: &Path) -> Result<(String, Tensor)> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let what = path.display().to_string();
    if path.extension().is_some_and(|e| e == "npy") {
        Ok((String::new(), npy::read_npy(&bytes, &what)?))
    } else {
        frontend::tensor::decode_tensor_file(&bytes, &what)
    }
}

/// Reads a data file of a graph input or output declared `optional` and/or a sequence
/// (`.pb`: `OptionalProto`, `SequenceProto` or `TensorProto`; `.npy`: a tensor).
pub fn read_value(path: &Path, optional: bool, sequence: bool) -> Result<Value> {
    let npy = path.extension().is_some_and(|e| e == "npy");
    if !sequence && (!optional || npy) {
        // A tensor file for an optional tensor: the optional holds it.
        let t = Value::Tensor(read_tensor(path)?.1);
        return Ok(if optional {
            Value::Optional(Some(Box::new(t)))
        } else {
            t
        });
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let what = path.display().to_string();
    Ok(frontend::tensor::decode_value_file(&bytes, &what, optional, sequence)?.1)
}

/// Matches input files to the model's inputs (one file per ONNX input: a sequence's is a
/// `SequenceProto`, an optional's an `OptionalProto`) and checks dtype and shape; returns
/// the ABI's input tensors.
pub fn bind_inputs(p: &Program, args: &[InputArg]) -> Result<Vec<Tensor>> {
    let groups = &p.input_groups;
    let mut slots: Vec<Option<&PathBuf>> = vec![None; groups.len()];
    let mut next = 0;
    for a in args {
        let (k, path) = match a {
            InputArg::Named(n, path) => {
                let k = groups.iter().position(|g| &g.name == n).ok_or_else(|| {
                    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                    Error::Usage(format!(
                        "the model has no input named '{n}' (inputs: {})",
                        names.join(", ")
                    ))
                })?;
                (k, path)
            }
            InputArg::Positional(path) => {
                while next < slots.len() && slots[next].is_some() {
                    next += 1;
                }
                if next >= groups.len() {
                    return Err(Error::Usage(format!(
                        "too many input files: the model has {} inputs",
                        groups.len()
                    )));
                }
                next += 1;
                (next - 1, path)
            }
        };
        slots[k] = Some(path);
    }
    let mut out = Vec::new();
    for (g, s) in groups.iter().zip(slots) {
        let descs = &p.inputs[g.first..g.first + g.len];
        let Some(path) = s else {
            // An empty optional needs no data.
            if g.kind == IoKind::Absent {
                continue;
            }
            return Err(Error::Usage(match g.kind {
                IoKind::Sequence(elem) => format!(
                    "no data given for input '{}' (a sequence of {} {elem} tensors)",
                    g.name, g.len
                ),
                _ => format!(
                    "no data given for input '{}' ({} {:?})",
                    g.name, descs[0].dtype, descs[0].shape
                ),
            }));
        };
        let file = path.display().to_string();
        if g.kind == IoKind::Tensor
            && let Some(key) = descs[0].map_key
        {
            // A map input's bytes are checked as they are read (`maps::read_map`).
            out.push(maps::read_map(path, key, descs[0].dtype)?);
            continue;
        }
        let sequence = matches!(g.kind, IoKind::Sequence(_));
        let v = read_value(path, g.optional, sequence)?;
        let tensors = match (v.content(), g.kind) {
            (None, IoKind::Absent) => vec![],
            (None, _) => {
                return Err(Error::Usage(format!(
                    "input '{}' ({file}) is an empty optional, but the model was compiled for \
                     one that holds a value (compile with --absent {} for an empty one)",
                    g.name, g.name
                )));
            }
            (Some(_), IoKind::Absent) => {
                return Err(Error::Usage(format!(
                    "input '{}' ({file}) holds a value, but the model was compiled with --absent \
                     {}",
                    g.name, g.name
                )));
            }
            (Some(Value::Tensor(t)), _) => vec![t.clone()],
            (Some(Value::Sequence { items, .. }), _) => {
                if items.len() != g.len {
                    return Err(Error::Usage(format!(
                        "input '{}' ({file}) is a sequence of {} tensors but the model was \
                         compiled for {} (compile with --sequence to choose others)",
                        g.name,
                        items.len(),
                        g.len
                    )));
                }
                items.clone()
            }
            (Some(Value::Optional(_)), _) => {
                return Err(Error::Usage(format!(
                    "input '{}' ({file}) is an optional of an optional; onnxc takes optionals \
                     of tensors and of sequences",
                    g.name
                )));
            }
        };
        for (d, t) in descs.iter().zip(tensors) {
            check_input(d, &p.run_dims, &t, &file)?;
            out.push(t);
        }
    }
    Ok(out)
}

/// Checks an input tensor against the ABI's description of it.
fn check_input(d: &IoDesc, run_dims: &[RunTimeDim], t: &Tensor, file: &str) -> Result<()> {
    if t.dtype != d.dtype {
        return Err(Error::Usage(format!(
            "input '{}' ({file}) is {} but the model expects {}",
            d.name, t.dtype, d.dtype
        )));
    }
    // A run-time batch takes any number of items; a dim that follows a run-time dim
    // (`mul · dim + add`) any value of that form, one that follows two (`past + seq`) any
    // value their least give or more (the run checks the dims' bounds and that they agree).
    let run_dim = |k: usize| d.run_dims.get(k).copied().flatten();
    let fits = |k: usize, x: i64| match run_dim(k) {
        _ if k == 0 && d.batched => true,
        Some(r) if r.other.is_some() => x >= r.at(&vec![1; run_dims.len()]),
        Some(r) => r.solve(x).is_some_and(|v| v >= 1),
        _ => x == d.shape[k],
    };
    let same =
        t.shape.len() == d.shape.len() && t.shape.iter().enumerate().all(|(k, &x)| fits(k, x));
    if !same {
        // "[N, 30]": a run-time batch's dim 0 is any number of items; "[seq, 30]": a
        // run-time dim.
        let dims: Vec<String> = d
            .shape
            .iter()
            .enumerate()
            .map(|(k, x)| match run_dim(k) {
                _ if k == 0 && d.batched => "N".to_string(),
                Some(r) => r.show(run_dims),
                None => x.to_string(),
            })
            .collect();
        let expects = if d.batched {
            format!("[{}] (N items: a run-time batch)", dims.join(", "))
        } else {
            format!("[{}]", dims.join(", "))
        };
        return Err(Error::Usage(format!(
            "input '{}' ({file}) has shape {:?} but the model expects {expects} (compile with \
             --shape to choose other symbolic dims)",
            d.name, t.shape
        )));
    }
    Ok(())
}

/// `opts` with a `--shape` for every runtime input whose declared shape has symbolic (or
/// unnamed) dims and that neither `--shape` nor the input files fix otherwise: the shape of
/// the file bound to it; likewise a `--sequence` for a sequence input (its file's length and
/// shapes) and an `--absent` for an optional input whose file holds nothing. `onnxc run` and `bench` then need no `--shape` for a model
/// exported with dynamic axes; a file that disagrees with a `--dim` is the import's error.
pub fn shapes_from_inputs(model: &Path, inputs: &[InputArg], opts: &Options) -> Result<Options> {
    if inputs.is_empty() {
        return Ok(opts.clone());
    }
    let bytes = std::fs::read(model).map_err(|e| Error::io(model, e))?;
    let declared = frontend::inspect::summarize(&frontend::load(&bytes)?).inputs;
    let mut opts = opts.clone();
    let mut next = 0;
    let mut taken = vec![false; declared.len()];
    for a in inputs {
        if let InputArg::Named(n, _) = a
            && let Some(k) = declared.iter().position(|d| &d.name == n)
        {
            taken[k] = true;
        }
    }
    for a in inputs {
        let (k, path) = match a {
            InputArg::Named(n, p) => match declared.iter().position(|d| &d.name == n) {
                Some(k) => (k, p),
                None => continue,
            },
            InputArg::Positional(p) => {
                while next < taken.len() && taken[next] {
                    next += 1;
                }
                if next >= declared.len() {
                    break;
                }
                next += 1;
                (next - 1, p)
            }
        };
        let d = &declared[k];
        if d.ty == "map" {
            continue;
        }
        if d.optional || d.ty == "sequence" {
            // The file says whether an optional is empty and a sequence's length and shapes.
            let sequence = d.ty == "sequence";
            let v = read_value(path, d.optional, sequence)?;
            match v.content() {
                None => {
                    if !opts.absent.contains(&d.name) {
                        opts.absent.push(d.name.clone());
                    }
                }
                Some(Value::Sequence { items, .. }) => {
                    if !opts.sequences.iter().any(|(n, _)| n == &d.name) {
                        let shapes = items.iter().map(|t| t.shape.clone()).collect();
                        opts.sequences.push((d.name.clone(), shapes));
                    }
                }
                Some(Value::Tensor(t)) => {
                    let symbolic = d
                        .dims
                        .as_ref()
                        .is_none_or(|dims| dims.iter().any(|x| x.parse::<i64>().is_err()));
                    if symbolic && !opts.shapes.iter().any(|(n, _)| n == &d.name) {
                        opts.shapes.push((d.name.clone(), t.shape.clone()));
                    }
                }
                Some(Value::Optional(_)) => {}
            }
            continue;
        }
        let symbolic = d
            .dims
            .as_ref()
            .is_none_or(|dims| dims.iter().any(|x| x.parse::<i64>().is_err()));
        if symbolic && !opts.shapes.iter().any(|(n, _)| n == &d.name) {
            let (_, t) = read_tensor(path)?;
            // Only a shape of the declared rank agreeing with its fixed dims: any other is
            // reported against the model's shape when the inputs are bound.
            let fits = d.dims.as_ref().is_none_or(|dims| {
                dims.len() == t.shape.len()
                    && dims
                        .iter()
                        .zip(&t.shape)
                        .all(|(x, &v)| x.parse::<i64>().map_or(true, |x| x == v))
            });
            if fits {
                // The file's dims are the data's: a --dim that names one of them otherwise
                // is an error (a --shape would only warn).
                for (k, (x, &v)) in d.dims.iter().flatten().zip(&t.shape).enumerate() {
                    if let Some(&(_, b)) = opts.dims.iter().find(|(s, _)| s == x)
                        && b != v
                    {
                        return Err(Error::Usage(format!(
                            "input '{}' ({}) has {v} in dim {k}, but --dim {x}={b}",
                            d.name,
                            path.display()
                        )));
                    }
                }
                opts.shapes.push((d.name.clone(), t.shape.clone()));
            }
        }
    }
    Ok(opts)
}

/// Compiles, links and runs a model once (on `threads` threads: `NAME_run_threaded` on the
/// runtime's pool when more than one); returns the outputs in graph order.
pub fn run(
    model: &Path,
    inputs: &[InputArg],
    opts: &Options,
    keep: Option<&Path>,
    threads: usize,
) -> Result<Vec<RunOutput>> {
    let mut tmp = TempDir::new("run")?;
    if let Some(k) = keep {
        tmp.path = k.to_path_buf();
        tmp.keep = true;
        std::fs::create_dir_all(&tmp.path).map_err(|e| Error::io(&tmp.path, e))?;
    }
    let opts = Options {
        emit_main: true,
        ..shapes_from_inputs(model, inputs, opts)?
    };
    let c = compile_file(model, "model", &opts, None)?;
    let tensors = bind_inputs(&c.program, inputs)?;
    let obj = tmp.path.join("model.o");
    std::fs::write(&obj, &c.object).map_err(|e| Error::io(&obj, e))?;
    let exe = tmp.path.join("model");
    link(&[obj], &exe)?;
    let mut cmd = Command::new(&exe);
    cmd.arg("run");
    for (k, t) in tensors.iter().enumerate() {
        let p = tmp.path.join(format!("input_{k}.bin"));
        std::fs::write(&p, t.abi_bytes()).map_err(|e| Error::io(&p, e))?;
        cmd.arg(p);
    }
    let items = batch_items(&c.program.inputs, &tensors);
    cmd.arg("--items").arg(items.to_string());
    cmd.arg("--out").arg(&tmp.path);
    cmd.arg("--threads").arg(threads.to_string());
    let out = cmd
        .output()
        .map_err(|e| Error::Tool(format!("cannot run the compiled model: {e}")))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(Error::Tool(match out.status.code() {
            Some(_) => format!("the compiled model failed: {msg}"),
            None => format!(
                "the compiled model crashed ({}): {msg} (a bug in onnxc, please report it)",
                out.status
            ),
        }));
    }
    let mut results = Vec::new();
    let public = c.program.public_outputs();
    for (k, d) in public.iter().enumerate() {
        results.push(read_output(&tmp.path, k, d, items)?);
    }
    let keys = c.program.output_groups.iter().map(|g| match g.kind {
        IoKind::Tensor => public.get(g.first).and_then(|d| d.keys.clone()),
        _ => None,
    });
    Ok(group_outputs(&c.program, results)
        .into_iter()
        .zip(keys)
        .map(|((name, value), keys)| RunOutput { name, value, keys })
        .collect())
}

/// An output of `run`: its name, value, and for a ZipMap output (a sequence of maps, which
/// the ABI returns as the tensor `[n, keys]` of their values) the maps' keys.
pub struct RunOutput {
    pub name: String,
    pub value: Value,
    pub keys: Option<std::sync::Arc<crate::ir::graph::MapKeys>>,
}

/// The ABI's output tensors as the model's ONNX outputs (`Program::output_groups`): a
/// sequence's tensors make one `Value::Sequence`, an optional is wrapped.
pub fn group_outputs(p: &Program, tensors: Vec<Tensor>) -> Vec<(String, Value)> {
    let mut tensors: Vec<Option<Tensor>> = tensors.into_iter().map(Some).collect();
    p.output_groups
        .iter()
        .map(|g| {
            let mut take = |k: usize| tensors.get_mut(k).and_then(Option::take);
            let v = match g.kind {
                IoKind::Tensor => take(g.first).map(Value::Tensor),
                IoKind::Sequence(elem) => Some(Value::Sequence {
                    elem,
                    items: (g.first..g.first + g.len).filter_map(&mut take).collect(),
                }),
                IoKind::Absent => None,
            };
            let v = match (g.optional, v) {
                (true, v) => Value::Optional(v.map(Box::new)),
                (false, Some(v)) => v,
                // A non-optional output always has its tensor.
                (false, None) => Value::Optional(None),
            };
            (g.name.clone(), v)
        })
        .collect()
}

/// Output `k` as the linked program wrote it into `dir` (`onnxc_driver_main`):
/// `output_k.bin`, and for an output whose dims depend on the data, its dims in
/// `output_k.dims` (little-endian int64s).
pub fn read_output(dir: &Path, k: usize, d: &IoDesc, items: i64) -> Result<Tensor> {
    let p = dir.join(format!("output_{k}.bin"));
    let data = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    // The driver writes the dims of an output sized by the data or by run-time dims.
    if d.dims_at.is_none() && d.run_dims.iter().all(Option::is_none) {
        return Ok(output_tensor(d, data, items));
    }
    let p = dir.join(format!("output_{k}.dims"));
    let dims = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    let shape: Vec<i64> = dims
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    if shape.len() != d.shape.len() {
        return Err(Error::Tool(format!(
            "{}: {} dims, output '{}' has rank {}",
            p.display(),
            shape.len(),
            d.name,
            d.shape.len()
        )));
    }
    Ok(output_tensor(&IoDesc { shape, ..d.clone() }, data, 1))
}

/// The values of the program's run-time dims (`Program::run_dims`) in a run with these
/// inputs (`bind_inputs`'): each found from the first input dim that follows it (its bound
/// when none does).
pub fn run_dim_values(p: &Program, tensors: &[Tensor]) -> Vec<i64> {
    let mut values: Vec<Option<i64>> = vec![None; p.run_dims.len()];
    for (d, t) in p.inputs.iter().zip(tensors) {
        for (r, &x) in d.run_dims.iter().zip(&t.shape) {
            if let Some(r) = r
                && let Some(x) = r.solve(x)
                && let Some(v) = values.get_mut(r.dim as usize)
            {
                v.get_or_insert(x);
            }
        }
    }
    values
        .iter()
        .zip(&p.run_dims)
        .map(|(v, d)| v.unwrap_or(d.bound))
        .collect()
}

/// The run-time batch of a run with these inputs: the leading dim of the first batched one
/// (1 when none is batched).
pub fn batch_items(descs: &[IoDesc], tensors: &[Tensor]) -> i64 {
    descs
        .iter()
        .zip(tensors)
        .find(|(d, _)| d.batched)
        .and_then(|(_, t)| t.shape.first().copied())
        .unwrap_or(1)
}

/// An output file the linked program wrote (`onnxc_driver_main`): raw elements, or for a
/// string output every string followed by a NUL.
/// `items`: the run-time batch of the run (`batch_items`), for a batched output.
pub fn output_tensor(d: &IoDesc, data: Vec<u8>, items: i64) -> Tensor {
    let mut shape = d.shape.clone();
    if d.batched {
        shape[0] = items;
    }
    if d.dtype == crate::ir::DType::Str {
        let strings: Vec<Vec<u8>> = data.split(|&b| b == 0).map(|s| s.to_vec()).collect();
        let n: i64 = shape.iter().product();
        return Tensor::from_strings(shape, &strings[..(n as usize).min(strings.len())]);
    }
    let d = &IoDesc { shape, ..d.clone() };
    // The 4- and 2-bit types arrive packed (the driver wrote exactly `d.bytes()`).
    let data = match d.dtype.unpack(&data, d.len() as usize) {
        Some(unpacked) => unpacked,
        None => data,
    };
    Tensor::new(d.dtype, d.shape.clone(), data)
}

#[derive(Clone, Debug)]
pub struct BenchResult {
    pub median_ms: f64,
    pub min_ms: f64,
    pub p90_ms: f64,
    pub mean_ms: f64,
    pub peak_rss_kb: u64,
    pub compile_ms: f64,
    pub iterations: usize,
}

fn json_num(s: &str, key: &str) -> Option<f64> {
    let i = s.find(&format!("\"{key}\""))?;
    let rest = s[i + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

pub fn bench(
    model: &Path,
    opts: &Options,
    iterations: usize,
    warmup: usize,
    inputs: &[InputArg],
    save_exe: Option<&Path>,
    threads: usize,
) -> Result<BenchResult> {
    let tmp = TempDir::new("bench")?;
    let opts = Options {
        emit_main: true,
        ..shapes_from_inputs(model, inputs, opts)?
    };
    let c = compile_file(model, "model", &opts, None)?;
    let tensors = if inputs.is_empty() {
        vec![]
    } else {
        bind_inputs(&c.program, inputs)?
    };
    let obj = tmp.path.join("model.o");
    std::fs::write(&obj, &c.object).map_err(|e| Error::io(&obj, e))?;
    let exe = match save_exe {
        Some(p) => p.to_path_buf(),
        None => tmp.path.join("model"),
    };
    link(&[obj], &exe)?;
    let mut cmd = Command::new(&exe);
    cmd.arg("bench")
        .arg(iterations.to_string())
        .arg(warmup.to_string())
        .arg("--threads")
        .arg(threads.to_string());
    for (k, t) in tensors.iter().enumerate() {
        let p = tmp.path.join(format!("input_{k}.bin"));
        std::fs::write(&p, t.abi_bytes()).map_err(|e| Error::io(&p, e))?;
        cmd.arg(p);
    }
    if opts.profile {
        let names: Vec<String> = c.program.funcs.iter().map(|f| f.origin.clone()).collect();
        let p = tmp.path.join("steps.txt");
        std::fs::write(&p, names.join("\n")).map_err(|e| Error::io(&p, e))?;
        cmd.env("ONNXC_PROFILE_NAMES", p);
    }
    let out = cmd
        .output()
        .map_err(|e| Error::Tool(format!("cannot run the compiled model: {e}")))?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "the benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if opts.profile {
        // A closed stdout (`onnxc bench --profile | head`) is not an error of the benchmark.
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        for l in text.lines().filter(|l| !l.starts_with('{')) {
            let _ = writeln!(stdout, "{l}");
        }
    }
    let line = text.lines().last().unwrap_or_default();
    let get = |k: &str| {
        json_num(line, k).ok_or_else(|| Error::Tool(format!("unexpected benchmark output: {line}")))
    };
    Ok(BenchResult {
        median_ms: get("median_ms")?,
        min_ms: get("min_ms")?,
        p90_ms: get("p90_ms")?,
        mean_ms: get("mean_ms")?,
        peak_rss_kb: get("peak_rss_kb")? as u64,
        compile_ms: c.compile_ms,
        iterations: get("iterations")? as usize,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_sizes_read_with_three_significant_digits() {
        assert_eq!(super::byte_size(600), "600 bytes");
        assert_eq!(super::byte_size(8 << 10), "8.00 KB");
        assert_eq!(super::byte_size(12_800_000), "12.2 MB");
        assert_eq!(super::byte_size(3_170_000_000), "2.95 GB");
        assert_eq!(super::byte_size(200 << 30), "200 GB");
    }
}
