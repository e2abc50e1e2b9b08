//! The `onnxc` command line: compile (default), `run`, `bench`.

use clap::{Args, Parser, Subcommand};
use onnxc::driver::{self, Emit, InputArg, OptLevel, Options};
use onnxc::error::{Error, Result, json_str};
use onnxc::ir::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `println!`, except that a closed stdout (`onnxc bench … | head`) ends the process quietly
/// instead of panicking.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// `print!` as `outln!`.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if write!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

#[derive(Parser)]
#[command(
    name = "onnxc",
    version,
    about = "Ahead-of-time compiler from ONNX models to native object files",
    long_about = "Compiles MODEL.onnx into an object file and a C header. Link the object with \
                  libonnxc_runtime.a (see --print-runtime-lib) and call NAME_run().",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    /// How errors and warnings are printed: `human` (`onnxc: error: …`) or `json` (one
    /// object per line on stderr: level, kind, message, and the nodes of unsupported ops).
    #[arg(long, value_enum, global = true, default_value_t = ErrorFormat::Human)]
    error_format: ErrorFormat,
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    compile: CompileArgs,
}

#[derive(Args)]
struct CompileArgs {
    /// The ONNX model to compile.
    #[arg(required_unless_present_any = ["print_runtime_lib", "print_link_flags", "print_pkg_config"])]
    model: Option<PathBuf>,
    /// Output object file; the header is written beside it with extension .h. Not needed
    /// with --emit, which prints.
    #[arg(
        short = 'o',
        long = "output",
        required_unless_present_any = ["print_runtime_lib", "print_link_flags", "print_pkg_config", "emit"]
    )]
    output: Option<PathBuf>,
    /// Symbol prefix of the generated functions (default: the output file stem, or the
    /// model's with --emit and no -o).
    #[arg(long)]
    name: Option<String>,
    /// Print the stage's dump instead of writing an object.
    #[arg(long, value_enum)]
    emit: Option<EmitArg>,
    /// Print the path of libonnxc_runtime.a and exit.
    #[arg(long)]
    print_runtime_lib: bool,
    /// Print what to link a model with (the runtime, system libraries, --gc-sections).
    #[arg(long)]
    print_link_flags: bool,
    /// Print a pkg-config file for the runtime (save it as onnxc-runtime.pc).
    #[arg(long)]
    print_pkg_config: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Concrete shape for a graph input: NAME=D0,D1,… (repeatable); fixes symbolic dims.
    #[arg(long = "shape", value_name = "INPUT=D0,D1,…")]
    shapes: Vec<String>,
    /// Value for a named symbolic dim (a dim_param such as batch_size), in every input that
    /// uses it: SYMBOL=N (repeatable), like onnxruntime's free dimension overrides; or
    /// SYMBOL=..N (also 1..N) to take it at run time up to N.
    #[arg(long = "dim", value_name = "SYMBOL=N")]
    dims: Vec<String>,
    /// The tensors of a sequence graph input, fixed at compile time: NAME=[D0,D1,…][D0,…]…,
    /// one bracketed shape per tensor ([] a scalar; NAME= an empty sequence). Each tensor is
    /// an input of its own in the ABI: NAME[0], NAME[1], …
    #[arg(long = "sequence", value_name = "INPUT=[D0,…]…")]
    sequences: Vec<String>,
    /// An optional graph input compiled as empty (repeatable); other optional inputs are
    /// compiled as holding their value.
    #[arg(long = "absent", value_name = "INPUT")]
    absent: Vec<String>,
    /// Target triple (default: the host, with its CPU features).
    #[arg(long)]
    target: Option<String>,
    /// No optimization (no fusion, Cranelift opt_level=none).
    #[arg(long = "O0", short = 'O', default_value_t = false)]
    o0: bool,
    /// Full optimization (the default).
    #[arg(long = "O2", conflicts_with = "o0")]
    o2: bool,
    /// Compute 3×3 convolutions directly, without Winograd transforms: about 15× less
    /// rounding error (~2e-6 of the output's RMS instead of ~3e-5), slower 3×3 layers.
    #[arg(long = "no-winograd")]
    no_winograd: bool,
    /// Workspace bytes per string that the model makes at run time (StringNormalizer,
    /// StringConcat, StringSplit): the strings' average length plus one. A run whose strings
    /// need more returns ONNXC_ERR_STRINGS.
    #[arg(long = "string-bytes", default_value_t = onnxc::frontend::DEFAULT_STRING_BYTES,
          value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    string_bytes: u64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EmitArg {
    Graph,
    Schedule,
    Loops,
    Clif,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ErrorFormat {
    Human,
    Json,
}

/// `--error-format json`, for the options every command builds.
static JSON_DIAGNOSTICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[derive(Subcommand)]
enum Cmd {
    /// Describe a model without compiling it: inputs and outputs with their symbolic dims,
    /// opsets, the operator histogram, parameters, multiply-adds and what onnxc cannot
    /// compile (give --shape/--dim to check a model with symbolic dims).
    Inspect {
        /// The ONNX model.
        model: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Compile through the AOT path, link, run once and write the outputs as TensorProto files.
    Run {
        /// The ONNX model.
        model: PathBuf,
        /// Input files (.pb TensorProto or .npy): positional in graph-input order, or NAME=FILE.
        inputs: Vec<String>,
        /// Where output_<i>.pb files are written (in graph-output order).
        #[arg(long)]
        output_dir: PathBuf,
        /// Keep the intermediate object, executable and raw files in this directory.
        #[arg(long)]
        keep_temps: Option<PathBuf>,
        /// Run NAME_run_threaded on the runtime's pool of this many threads (1: NAME_run).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
        threads: u64,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Compile, link and time NAME_run on deterministic pseudo-random (or given) inputs.
    Bench {
        /// The ONNX model.
        model: PathBuf,
        /// Optional input files (.pb or .npy), as for `run`.
        inputs: Vec<String>,
        #[arg(long, default_value_t = 50)]
        iterations: usize,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Print one JSON object as the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Keep the linked benchmark executable (run it as `EXE bench ITERATIONS WARMUP [IN.bin…]`).
        #[arg(long)]
        save_exe: Option<PathBuf>,
        /// Time every step and print the most expensive ones (with the ONNX nodes they compute;
        /// 40 of them, or ONNXC_PROFILE_STEPS).
        #[arg(long)]
        profile: bool,
        /// Time NAME_run_threaded on the runtime's pool of this many threads (1: NAME_run).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
        threads: u64,
        #[command(flatten)]
        common: CommonArgs,
    },
}

fn options(c: &CommonArgs) -> Result<Options> {
    let json_diagnostics = JSON_DIAGNOSTICS.load(std::sync::atomic::Ordering::Relaxed);
    let mut shapes = Vec::new();
    for s in &c.shapes {
        let (name, dims) = s
            .rsplit_once('=')
            .ok_or_else(|| Error::Usage(format!("--shape {s}: expected NAME=D0,D1,…")))?;
        let dims: Vec<i64> = if dims.trim().is_empty() {
            vec![]
        } else {
            dims.split(',')
                .map(|d| d.trim().parse::<i64>().ok().filter(|&v| v >= 0))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    Error::Usage(format!("--shape {s}: dims must be non-negative integers"))
                })?
        };
        shapes.push((name.to_string(), dims));
    }
    let mut dims = Vec::new();
    let mut dim_bounds = Vec::new();
    for s in &c.dims {
        let (name, v) = s
            .rsplit_once('=')
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(|| Error::Usage(format!("--dim {s}: expected SYMBOL=N")))?;
        if let Some((lo, hi)) = v.split_once("..") {
            let hi = hi.trim().parse::<i64>().ok().filter(|&v| v >= 1);
            let (Some(hi), "" | "1") = (hi, lo.trim()) else {
                return Err(Error::Usage(format!(
                    "--dim {s}: expected SYMBOL=..N or SYMBOL=1..N (N ≥ 1), the largest value \
                     the run-time dim takes"
                )));
            };
            dim_bounds.push((name.to_string(), hi));
            continue;
        }
        let v = v
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|&v| v >= 0)
            .ok_or_else(|| Error::Usage(format!("--dim {s}: N must be a non-negative integer")))?;
        dims.push((name.to_string(), v));
    }
    let mut sequences = Vec::new();
    for s in &c.sequences {
        sequences.push(parse_sequence(s)?);
    }
    Ok(Options {
        name: None,
        shapes,
        dims,
        dim_bounds,
        sequences,
        absent: c.absent.clone(),
        target: c.target.clone(),
        opt: if c.o0 { OptLevel::O0 } else { OptLevel::O2 },
        emit_main: false,
        profile: false,
        no_winograd: c.no_winograd,
        json_diagnostics,
        quiet: false,
        string_bytes: c.string_bytes,
        batch_bound: None,
    })
}

/// `--sequence NAME=[D0,D1,…][…]…`: the name and its tensors' shapes.
fn parse_sequence(s: &str) -> Result<(String, Vec<Vec<i64>>)> {
    let bad = || {
        Error::Usage(format!(
            "--sequence {s}: expected NAME=[D0,D1,…][D0,…]… (one bracketed shape per tensor)"
        ))
    };
    let (name, mut rest) = s
        .split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(bad)?;
    let mut shapes = Vec::new();
    rest = rest.trim();
    while !rest.is_empty() {
        let (inner, after) = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .ok_or_else(bad)?;
        let dims: Vec<i64> = if inner.trim().is_empty() {
            vec![]
        } else {
            inner
                .split(',')
                .map(|d| d.trim().parse::<i64>().ok().filter(|&v| v >= 0))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--sequence {s}: dims must be non-negative integers"
                    ))
                })?
        };
        shapes.push(dims);
        rest = after.trim_start();
    }
    Ok((name.to_string(), shapes))
}

fn input_args(list: &[String]) -> Vec<InputArg> {
    list.iter()
        .map(|a| match a.split_once('=') {
            Some((n, f)) if !n.is_empty() && !Path::new(a).exists() => {
                InputArg::Named(n.to_string(), PathBuf::from(f))
            }
            _ => InputArg::Positional(PathBuf::from(a)),
        })
        .collect()
}

fn write(path: &Path, data: &[u8]) -> Result<()> {
    std::fs::write(path, data).map_err(|e| Error::io(path, e))
}

/// `onnxc inspect --json`: one object (schema in the README).
fn inspect_json(model: &Path, i: &driver::Inspection) -> String {
    let s = &i.summary;
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    let strs = |v: &[String]| list(v.iter().map(|x| json_str(x)).collect());
    let io = |v: &[onnxc::frontend::inspect::Declared]| {
        list(
            v.iter()
                .map(|d| {
                    let dims = d.dims.as_ref().map_or("null".to_string(), |dims| {
                        list(
                            dims.iter()
                                .map(|x| match x.parse::<i64>() {
                                    Ok(n) => n.to_string(),
                                    Err(_) if x == "?" => "null".into(),
                                    Err(_) => json_str(x),
                                })
                                .collect(),
                        )
                    });
                    format!(
                        "{{\"name\": {}, \"type\": {}, \"dims\": {dims}, \"optional\": {}}}",
                        json_str(&d.name),
                        json_str(&d.ty),
                        d.optional
                    )
                })
                .collect(),
        )
    };
    let opt = |v: Option<String>| v.unwrap_or_else(|| "null".into());
    let fields = [
        ("model", json_str(&model.display().to_string())),
        ("ir_version", opt(s.ir_version.map(|v| v.to_string()))),
        ("producer", json_str(&s.producer)),
        (
            "opsets",
            format!(
                "{{{}}}",
                s.opsets
                    .iter()
                    .map(|(d, v)| format!("{}: {v}", json_str(d)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        ("inputs", io(&s.inputs)),
        ("outputs", io(&s.outputs)),
        ("symbols", strs(&s.symbols)),
        ("nodes", s.nodes.to_string()),
        (
            "ops",
            list(
                s.ops
                    .iter()
                    .map(|((d, op), n)| {
                        format!(
                            "{{\"domain\": {}, \"op_type\": {}, \"count\": {n}}}",
                            json_str(d),
                            json_str(op)
                        )
                    })
                    .collect(),
            ),
        ),
        ("initializers", s.initializers.to_string()),
        ("parameters", s.parameters.to_string()),
        ("parameter_bytes", s.parameter_bytes.to_string()),
        ("multiply_adds", opt(i.multiply_adds.map(|n| n.to_string()))),
        (
            "no_builder",
            list(
                s.unknown_ops
                    .iter()
                    .map(|(d, op)| {
                        format!(
                            "{{\"domain\": {}, \"op_type\": {}}}",
                            json_str(d),
                            json_str(op)
                        )
                    })
                    .collect(),
            ),
        ),
        ("imports", i.import_error.is_none().to_string()),
        ("run_time_batch", i.run_time_batch.to_string()),
        (
            "run_time_dims",
            format!(
                "{{{}}}",
                i.run_time_dims
                    .iter()
                    .map(|(n, b)| format!("{}: {b}", json_str(n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        ("data_dependent_outputs", strs(&i.data_dependent)),
        (
            "import_error",
            opt(i.import_error.as_ref().map(|e| json_str(&e.to_string()))),
        ),
        ("warnings", strs(&i.warnings)),
    ];
    format!(
        "{{{}}}",
        fields
            .iter()
            .map(|(k, v)| format!("{}: {v}", json_str(k)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn inspect_cmd(model: &Path, json: bool, common: &CommonArgs) -> Result<()> {
    let opts = options(common)?;
    let i = driver::inspect(model, &opts)?;
    if json {
        outln!("{}", inspect_json(model, &i));
        return Ok(());
    }
    let s = &i.summary;
    let opt = |d: &onnxc::frontend::inspect::Declared| if d.optional { "optional " } else { "" };
    let io = |d: &onnxc::frontend::inspect::Declared| match &d.dims {
        Some(dims) => format!("{}  {}{}[{}]", d.name, opt(d), d.ty, dims.join(", ")),
        None => format!("{}  {}{} (no shape)", d.name, opt(d), d.ty),
    };
    let mut head = format!("{}", model.display());
    let mut about = Vec::new();
    if let Some(v) = s.ir_version {
        about.push(format!("IR version {v}"));
    }
    if !s.producer.is_empty() {
        about.push(format!("producer {}", s.producer));
    }
    if !about.is_empty() {
        head += &format!(" ({})", about.join(", "));
    }
    outln!("model:          {head}");
    let opsets: Vec<String> = s.opsets.iter().map(|(d, v)| format!("{d} {v}")).collect();
    outln!("opsets:         {}", opsets.join(", "));
    for (what, list) in [("inputs:", &s.inputs), ("outputs:", &s.outputs)] {
        for (k, d) in list.iter().enumerate() {
            outln!("{:<16}{}", if k == 0 { what } else { "" }, io(d));
        }
        if list.is_empty() {
            outln!("{what:<16}none");
        }
    }
    if !s.symbols.is_empty() && !i.run_time_batch {
        outln!(
            "symbols:        {} (fix with --dim SYMBOL=N or --shape INPUT=D0,D1,…)",
            s.symbols.join(", ")
        );
    } else if !s.symbols.is_empty() {
        outln!(
            "symbols:        {} (the leading ones a run-time batch; --dim SYMBOL=N fixes them)",
            s.symbols.join(", ")
        );
    }
    let mut ops: Vec<(&(String, String), &usize)> = s.ops.iter().collect();
    ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let hist: Vec<String> = ops
        .iter()
        .map(|((d, op), n)| {
            if d.is_empty() {
                format!("{op} {n}")
            } else {
                format!("{d}.{op} {n}")
            }
        })
        .collect();
    outln!("nodes:          {} ({})", s.nodes, hist.join(", "));
    outln!(
        "parameters:     {} in {} initializers ({:.1} MB)",
        s.parameters,
        s.initializers,
        s.parameter_bytes as f64 / 1e6
    );
    match i.multiply_adds {
        Some(n) => outln!(
            "multiply-adds:  {n} ({:.3} G, in matrix products and convolutions{}{})",
            n as f64 / 1e9,
            if i.run_time_batch { ", per item" } else { "" },
            if i.run_time_dims.is_empty() {
                ""
            } else {
                ", at the run-time dims' bounds"
            }
        ),
        None => outln!("multiply-adds:  unknown until every dim is bound"),
    }
    for w in &i.warnings {
        outln!("warning:        {w}");
    }
    if !s.unknown_ops.is_empty() {
        let list: Vec<String> = s
            .unknown_ops
            .iter()
            .map(|(d, op)| {
                if d.is_empty() {
                    op.clone()
                } else {
                    format!("{d}.{op}")
                }
            })
            .collect();
        outln!("no builder for: {}", list.join(", "));
    }
    match &i.import_error {
        None if i.run_time_batch => outln!(
            "imports:        yes, its symbolic leading input dims as a run-time batch \
             (every item computed on its own)"
        ),
        None => outln!("imports:        yes (every node builds with these shapes)"),
        Some(e) => outln!("imports:        no: {e}"),
    }
    if !i.run_time_dims.is_empty() {
        let dims: Vec<String> = i
            .run_time_dims
            .iter()
            .map(|(n, b)| format!("'{n}' up to {b}"))
            .collect();
        outln!(
            "run-time dims:  {} (imported at the bounds; a compile checks every value, \
             --dim NAME=..N sets a bound)",
            dims.join(", ")
        );
    }
    if !i.data_dependent.is_empty() {
        outln!(
            "data-dependent: {} (as many rows as the data selects: NAME_run_shaped returns \
             their dims)",
            i.data_dependent.join(", ")
        );
    }
    Ok(())
}

fn compile_cmd(a: &CompileArgs) -> Result<()> {
    if a.print_runtime_lib {
        outln!("{}", driver::runtime_lib()?.display());
        return Ok(());
    }
    if a.print_link_flags {
        outln!("{}", driver::link_flags()?.join(" "));
        return Ok(());
    }
    if a.print_pkg_config {
        out!("{}", driver::pkg_config()?);
        return Ok(());
    }
    let Some(model) = &a.model else {
        return Err(Error::Usage("usage: onnxc MODEL.onnx -o OUT.o".into()));
    };
    let output = match (&a.output, a.emit) {
        (Some(o), _) => Some(o),
        (None, Some(_)) => None,
        (None, None) => return Err(Error::Usage("usage: onnxc MODEL.onnx -o OUT.o".into())),
    };
    let opts = options(&a.common)?;
    let stem = output
        .unwrap_or(model)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let prefix = onnxc::codegen::c_ident(a.name.as_deref().unwrap_or(&stem));
    let emit = a.emit.map(|e| match e {
        EmitArg::Graph => Emit::Graph,
        EmitArg::Schedule => Emit::Schedule,
        EmitArg::Loops => Emit::Loops,
        EmitArg::Clif => Emit::Clif,
    });
    let c = driver::compile_file(model, &prefix, &opts, emit)?;
    if let Some(d) = c.dump {
        out!("{d}");
        return Ok(());
    }
    let Some(output) = output else {
        return Err(Error::Internal("no dump and no output path".into()));
    };
    write(output, &c.object)?;
    let header = output.with_extension("h");
    write(&header, c.header.as_bytes())?;
    let rt = output.with_file_name("onnxc_runtime.h");
    if std::fs::read_to_string(&rt).ok().as_deref() != Some(driver::RUNTIME_HEADER) {
        write(&rt, driver::RUNTIME_HEADER.as_bytes())?;
    }
    // A model whose outputs' dims depend on the data runs through NAME_run_shaped only.
    let entry = if c.program.dynamic() {
        "run_shaped"
    } else {
        "run"
    };
    eprintln!(
        "onnxc: wrote {} and {} ({}_{entry}, workspace {} bytes, {:.0} ms)",
        output.display(),
        header.display(),
        prefix,
        c.program.workspace_bytes(),
        c.compile_ms
    );
    Ok(())
}

fn real_main(cli: Cli) -> Result<()> {
    match cli.command {
        None => compile_cmd(&cli.compile),
        Some(Cmd::Inspect {
            model,
            json,
            common,
        }) => inspect_cmd(&model, json, &common),
        Some(Cmd::Run {
            model,
            inputs,
            output_dir,
            keep_temps,
            threads,
            common,
        }) => {
            let opts = options(&common)?;
            let outs = driver::run(
                &model,
                &input_args(&inputs),
                &opts,
                keep_temps.as_deref(),
                threads as usize,
            )?;
            std::fs::create_dir_all(&output_dir).map_err(|e| Error::io(&output_dir, e))?;
            use onnxc::frontend::tensor::{encode_map_sequence_file, encode_value_file};
            for (k, o) in outs.iter().enumerate() {
                let p = output_dir.join(format!("output_{k}.pb"));
                let bytes = match (&o.value, &o.keys) {
                    (Value::Tensor(t), Some(keys)) => encode_map_sequence_file(t, keys, &o.name),
                    (v, _) => encode_value_file(v, &o.name),
                };
                write(&p, &bytes)?;
            }
            eprintln!(
                "onnxc: wrote {} output(s) to {}",
                outs.len(),
                output_dir.display()
            );
            Ok(())
        }
        Some(Cmd::Bench {
            model,
            inputs,
            iterations,
            warmup,
            json,
            save_exe,
            profile,
            threads,
            common,
        }) => {
            let opts = Options {
                profile,
                ..options(&common)?
            };
            let r = driver::bench(
                &model,
                &opts,
                iterations,
                warmup,
                &input_args(&inputs),
                save_exe.as_deref(),
                threads as usize,
            )?;
            outln!("model:        {}", model.display());
            outln!("compile:      {:.1} ms", r.compile_ms);
            outln!("iterations:   {} (+{} warm-up)", r.iterations, warmup);
            outln!(
                "latency:      median {:.3} ms, min {:.3} ms, p90 {:.3} ms",
                r.median_ms,
                r.min_ms,
                r.p90_ms
            );
            outln!("peak RSS:     {} KiB", r.peak_rss_kb);
            if json {
                outln!(
                    "{{\"model\": \"{}\", \"median_ms\": {}, \"min_ms\": {}, \"p90_ms\": {}, \"mean_ms\": {}, \"compile_ms\": {}, \"peak_rss_kb\": {}, \"iterations\": {}}}",
                    model
                        .display()
                        .to_string()
                        .replace('\\', "\\\\")
                        .replace('"', "\\\""),
                    r.median_ms,
                    r.min_ms,
                    r.p90_ms,
                    r.mean_ms,
                    r.compile_ms,
                    r.peak_rss_kb,
                    r.iterations
                );
            }
            Ok(())
        }
    }
}

/// The process's allocator: the system's, with an allocation failure turned into an error
/// exit (#27). Rust's default reaction is an abort (SIGABRT, no message a user can act on);
/// a hostile model whose sizes pass every check can still ask for more memory than the
/// process may have (`ulimit -v`, a small container). Nothing in onnxc recovers from a
/// failed allocation (no `try_reserve`), so exiting is the same outcome with a message.
struct Allocator;

// SAFETY: every method forwards to `System` with the same arguments; a null result ends
// the process instead of being returned.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        or_exit(unsafe { std::alloc::System.alloc(layout) }, layout.size())
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as above.
        or_exit(
            unsafe { std::alloc::System.alloc_zeroed(layout) },
            layout.size(),
        )
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        // SAFETY: as above.
        or_exit(unsafe { std::alloc::System.realloc(ptr, layout, new) }, new)
    }
}

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

fn or_exit(p: *mut u8, bytes: usize) -> *mut u8 {
    if p.is_null() {
        out_of_memory(bytes)
    }
    p
}

/// Reports a failed allocation of `bytes` and exits with status 1. Allocates nothing: the
/// message is formatted on the stack and written unbuffered.
#[cold]
fn out_of_memory(bytes: usize) -> ! {
    use std::io::Write;
    let mut buf = [0u8; 320];
    let len = {
        let mut w = &mut buf[..];
        let _ = writeln!(
            w,
            "onnxc: error: out of memory: an allocation of {bytes} bytes failed. The model \
             needs more memory than this process may use; check its declared shapes and \
             initializers, or raise the memory limit (ulimit -v)"
        );
        320 - w.len()
    };
    let _ = std::io::stderr().write_all(&buf[..len]);
    std::process::exit(1)
}

/// The command line with the optimization levels spelled as C compilers and the README
/// spell them (`-O0`, `-O2`) turned into the long flags clap parses (it would read `-O0`
/// as `-O` followed by a flag `-0`).
fn args() -> Vec<std::ffi::OsString> {
    std::env::args_os()
        .map(|a| match a.to_str() {
            Some("-O0") => "--O0".into(),
            Some("-O2") => "--O2".into(),
            _ => a,
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(args()) {
        Ok(cli) => cli,
        Err(e) => {
            // A usage error comes before the flags are known: JSON if they ask for it.
            let args: Vec<String> = std::env::args().collect();
            let wants_json = args.iter().any(|a| a == "--error-format=json")
                || args
                    .windows(2)
                    .any(|w| w[0] == "--error-format" && w[1] == "json");
            if wants_json && e.use_stderr() {
                let message = e.render().to_string();
                eprintln!("{}", Error::Usage(message.trim().to_string()).to_json());
                return ExitCode::from(e.exit_code() as u8);
            }
            e.exit()
        }
    };
    let json = cli.error_format == ErrorFormat::Json;
    JSON_DIAGNOSTICS.store(json, std::sync::atomic::Ordering::Relaxed);
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if json => {
            eprintln!("{}", e.to_json());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("onnxc: error: {e}");
            ExitCode::FAILURE
        }
    }
}
