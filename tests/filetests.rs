//! Golden tests of the pipeline's middle, as Cranelift's filetests: every
//! `tests/filetests/*.onnxt` holds a small model in the text form of
//! `onnxc_tests::text`, the stages to dump, property checks, and below them the expected
//! dumps. The runner compiles each model, compares every `--emit` stage it names with the
//! expectation and evaluates the checks; `ONNXC_BLESS=1` rewrites the expectations with what
//! the compiler prints now (the checks still have to hold).
//!
//! ```text
//! # What the case shows (comments go anywhere before the first `===` line).
//! test schedule loops
//! flags --O0 --no-winograd
//! target x86_64-unknown-linux-gnu
//! loops count 1: onnxc_activation_f32(1,
//! loops not: sigmoid(
//!
//! input x: float32[1, 8, 16, 16]
//! …
//! === schedule
//! …
//! === loops
//! …
//! ```
//!
//! - `test`: the stages dumped, among `graph`, `schedule` and `loops`; one `=== STAGE`
//!   section each, in that order, holds its expected dump.
//! - `flags`: `--O0`, `--O2`, `--no-winograd`, as on the command line.
//! - `target`: a triple, the default being `x86_64-unknown-linux-gnu` so that layouts and
//!   kernels do not follow the host (an AVX-512 host keeps the plain layout); `target host`
//!   follows it.
//! - checks `STAGE has|not|count N: TEXT`: the stage's dump contains TEXT, does not, or
//!   contains it N times. TEXT runs to the end of the line, `#` included.
//! - every other line is the model (`onnxc_tests::text`).
//!
//! Every model is compiled twice; dumps that differ between the two fail the case (they
//! would depend on hash order).

use onnxc::driver::{self, Emit, OptLevel, Options};
use onnxc::frontend::tensor::DataDir;
use onnxc_tests::text::parse_model;
use prost::Message;
use std::path::{Path, PathBuf};

const BLESS: &str = "ONNXC_BLESS";
const DEFAULT_TARGET: &str = "x86_64-unknown-linux-gnu";

#[test]
fn filetests() {
    let dir = onnxc_tests::root().join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/filetests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnxt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no filetests in {}", dir.display());
    let bless = std::env::var(BLESS).is_ok_and(|v| !v.is_empty() && v != "0");
    // Two workers taking files in turn (the machine's cores are shared).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut failed = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(p) = files.get(k) else {
                            return failed;
                        };
                        failed.extend(run_file(p, bless).err());
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a filetest worker panicked"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} filetests failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// A parsed filetest.
struct Case {
    stages: Vec<Stage>,
    flags: Vec<String>,
    target: Option<String>,
    checks: Vec<Check>,
    model: String,
    /// Everything up to the first `===` line, kept as written when blessing.
    head: String,
    expected: Vec<(String, String)>,
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Stage {
    Graph,
    Schedule,
    Loops,
}

impl Stage {
    fn parse(s: &str) -> Result<Stage, String> {
        match s {
            "graph" => Ok(Stage::Graph),
            "schedule" => Ok(Stage::Schedule),
            "loops" => Ok(Stage::Loops),
            _ => Err(format!("unknown stage '{s}' (graph, schedule, loops)")),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Stage::Graph => "graph",
            Stage::Schedule => "schedule",
            Stage::Loops => "loops",
        }
    }
    fn emit(self) -> Emit {
        match self {
            Stage::Graph => Emit::Graph,
            Stage::Schedule => Emit::Schedule,
            Stage::Loops => Emit::Loops,
        }
    }
}

enum Want {
    Has,
    Not,
    Count(usize),
}

struct Check {
    stage: Stage,
    want: Want,
    text: String,
    line: String,
}

fn parse(text: &str) -> Result<Case, String> {
    let split = text
        .match_indices("=== ")
        .map(|(i, _)| i)
        .find(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')
        .unwrap_or(text.len());
    let (head, body) = text.split_at(split);
    let mut case = Case {
        stages: vec![],
        flags: vec![],
        target: Some(DEFAULT_TARGET.into()),
        checks: vec![],
        model: String::new(),
        head: head.to_string(),
        expected: vec![],
    };
    for line in head.lines() {
        let code = line.split('#').next().unwrap_or("").trim();
        let (word, rest) = code.split_once(' ').unwrap_or((code, ""));
        match word {
            "test" => {
                for s in rest.split_whitespace() {
                    case.stages.push(Stage::parse(s)?);
                }
            }
            "flags" => case.flags.extend(rest.split_whitespace().map(String::from)),
            "target" => case.target = (rest.trim() != "host").then(|| rest.trim().to_string()),
            _ => match (
                Stage::parse(word),
                check(line.trim().split_once(' ').map_or("", |w| w.1)),
            ) {
                (Ok(stage), Some(c)) => {
                    let (want, text) = c.map_err(|e| format!("{e}: {line}"))?;
                    case.checks.push(Check {
                        stage,
                        want,
                        text,
                        line: line.trim().to_string(),
                    });
                }
                _ => {
                    case.model.push_str(line);
                    case.model.push('\n');
                }
            },
        }
    }
    if case.stages.is_empty() {
        return Err("no `test STAGE…` line".into());
    }
    for c in &case.checks {
        if !case.stages.contains(&c.stage) {
            return Err(format!("check on a stage not tested: {}", c.line));
        }
    }
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in body.split_inclusive('\n') {
        match (line.strip_prefix("=== "), sections.last_mut()) {
            (Some(name), _) => sections.push((name.trim().to_string(), String::new())),
            (None, Some((_, text))) => text.push_str(line),
            (None, None) => unreachable!("the body starts at a `===` line"),
        }
    }
    for (name, _) in &sections {
        if !case.stages.iter().any(|s| s.name() == name) {
            return Err(format!("expectation for a stage not tested: {name}"));
        }
    }
    case.expected = sections;
    Ok(case)
}

/// `has: TEXT`, `not: TEXT` or `count N: TEXT` after a stage name: `None` when `rest` is
/// not a check (a model line), else the check or what is wrong with it. TEXT runs to the
/// end of the line, `#` included.
fn check(rest: &str) -> Option<Result<(Want, String), String>> {
    let (kind, text) = rest.split_once(':')?;
    let words: Vec<&str> = kind.split_whitespace().collect();
    let want = match words[..] {
        ["has"] => Ok(Want::Has),
        ["not"] => Ok(Want::Not),
        ["count", n] => n
            .parse()
            .map(Want::Count)
            .map_err(|_| format!("bad count '{n}'")),
        _ => return None,
    };
    let text = text
        .strip_prefix(' ')
        .unwrap_or(text)
        .trim_end_matches(['\r', '\n']);
    Some(want.map(|w| (w, text.to_string())))
}

fn options(case: &Case) -> Result<Options, String> {
    let mut o = Options {
        target: case.target.clone(),
        ..Options::default()
    };
    for f in &case.flags {
        match f.as_str() {
            "--O0" => o.opt = OptLevel::O0,
            "--O2" => o.opt = OptLevel::O2,
            "--no-winograd" => o.no_winograd = true,
            _ => return Err(format!("unknown flag {f} (--O0, --O2, --no-winograd)")),
        }
    }
    Ok(o)
}

fn dump(model: &[u8], name: &str, opts: &Options, stage: Stage) -> Result<String, String> {
    let c = driver::compile_bytes(
        model,
        &DataDir::default(),
        name,
        "m",
        opts,
        Some(stage.emit()),
    )
    .map_err(|e| format!("{} does not compile: {e}", stage.name()))?;
    c.dump.ok_or_else(|| format!("no {} dump", stage.name()))
}

fn run_file(path: &Path, bless: bool) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fail = |e: String| format!("{name}: {e}");
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let case = parse(&text).map_err(fail)?;
    let model = parse_model(&case.model).map_err(fail)?.encode_to_vec();
    let opts = options(&case).map_err(fail)?;
    let mut problems = Vec::new();
    let mut got = Vec::new();
    for &stage in &case.stages {
        let a = dump(&model, &name, &opts, stage).map_err(fail)?;
        let b = dump(&model, &name, &opts, stage).map_err(fail)?;
        if a != b {
            problems.push(format!(
                "the {} dump differs between two compilations:\n{}",
                stage.name(),
                diff(&a, &b)
            ));
        }
        for c in case.checks.iter().filter(|c| c.stage == stage) {
            let n = a.matches(c.text.as_str()).count();
            let ok = match c.want {
                Want::Has => n > 0,
                Want::Not => n == 0,
                Want::Count(k) => n == k,
            };
            if !ok {
                problems.push(format!("check failed ({n} found): {}", c.line));
            }
        }
        got.push((stage.name().to_string(), a));
    }
    if bless {
        let mut out = case.head.clone();
        if !out.ends_with('\n') {
            out.push('\n');
        }
        for (stage, text) in &got {
            out.push_str(&format!("=== {stage}\n{text}"));
        }
        if out != text {
            std::fs::write(path, out).map_err(|e| fail(e.to_string()))?;
        }
    } else {
        for (stage, text) in &got {
            match case.expected.iter().find(|(s, _)| s == stage) {
                None => problems.push(format!("no `=== {stage}` expectation (run with {BLESS}=1)")),
                Some((_, want)) if want != text => problems.push(format!(
                    "the {stage} dump differs from the expectation (- expected, + got; \
                     {BLESS}=1 accepts it):\n{}",
                    diff(want, text)
                )),
                Some(_) => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(fail(problems.join("\n")))
    }
}

/// A line diff (longest common subsequence) with two lines of context around changes.
fn diff(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let near = |k: usize| {
        let lo = k.saturating_sub(2);
        ops[lo..(k + 3).min(ops.len())].iter().any(|o| o.0 != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (tag, line)) in ops.iter().enumerate() {
        if near(k) {
            if skipped {
                out.push_str("  …\n");
                skipped = false;
            }
            out.push_str(&format!("{tag} {line}\n"));
        } else {
            skipped = true;
        }
    }
    out
}
