//! The conformance runner: every case of the ONNX backend test suite through the real AOT
//! path (compile, link, execute), compared as onnx's runner compares.
//!
//! ```text
//! conformance [--opt O0|O2] [--jobs N] [--filter SUBSTR] [--keep DIR] [--check] [--update]
//!             [--threads N,M,…]
//! ```
//! `--threads 1,2,4` runs each case's executable once per thread count (1: `NAME_run`; more:
//! `NAME_run_threaded` on the runtime's pool): the first run is compared with the expected
//! outputs, the others must give the same bytes (default: 1).
//! Writes `conformance-<opt>.tsv` beside the suite (`.cache/`: case, outcome, message) and
//! prints counts per kind. The suite is `$ONNXC_SUITE` or `.cache/onnx-suite`, the manifest
//! `$ONNXC_MANIFEST` or `tests/conformance/manifest.txt`; a missing or empty manifest is an
//! error (exit 2) except for `--update` alone.
//! `--check` fails if a manifest case (that the filter selects) does not pass or did not run
//! because it is no longer in the suite;
//! `--update` rewrites the manifest with the passing cases (and `docs/supported-ops.md`);
//! `--docs` only regenerates `docs/supported-ops.md`.
//! `--symbolic-batch` compiles each model with its leading input dims made symbolic (as
//! exporters' dynamic batch axes do): a model that computes its items independently must
//! then pass through `NAME_run_shaped` on the test data's batch, one that does not may be
//! refused (its batch must be fixed at compile time); with `--check`, a manifest case that
//! is accepted but does not pass fails. Results go to `conformance-<opt>-batch.tsv`.
//! `--symbolic-seq` also makes one non-leading input dim symbolic (the first input's last
//! dim of at least 2, wherever the inputs' data has that value: a dynamic sequence or width
//! axis), taken at run time up to 64 (`loops::dims`): each case runs at its data's value of
//! it (as a rule not one the compiler probed); a model may be refused, an accepted one must
//! pass. Results go to `conformance-<opt>-seq.tsv`.

use onnxc::driver::{OptLevel, Options};
use onnxc_tests::{Case, Outcome, Symbolic, load_cases, root, run_case_as, suite_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opt = OptLevel::O2;
    let mut jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let mut filter: Option<String> = None;
    let mut keep: Option<std::path::PathBuf> = None;
    let mut check = false;
    let mut update = false;
    let mut only_manifest = false;
    let mut threads = vec![1usize];
    let mut symbolic = Symbolic::No;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--opt" => {
                opt = if it.next().map(String::as_str) == Some("O0") {
                    OptLevel::O0
                } else {
                    OptLevel::O2
                }
            }
            "--jobs" => jobs = it.next().and_then(|s| s.parse().ok()).unwrap_or(jobs),
            "--filter" => filter = it.next().cloned(),
            "--keep" => keep = it.next().map(Into::into),
            "--check" => check = true,
            "--update" => update = true,
            "--manifest-only" => only_manifest = true,
            "--symbolic-batch" => symbolic = Symbolic::Batch,
            "--symbolic-seq" => symbolic = Symbolic::Seq,
            "--threads" => {
                let list: Option<Vec<usize>> = it.next().map(|s| {
                    s.split(',')
                        .map(|t| t.trim().parse().ok().filter(|&n| n >= 1))
                        .collect::<Option<Vec<usize>>>()
                        .unwrap_or_default()
                });
                match list {
                    Some(l) if !l.is_empty() => threads = l,
                    _ => {
                        eprintln!("--threads takes thread counts (≥ 1) separated by commas");
                        std::process::exit(2);
                    }
                }
            }
            "--docs" => {
                let md = match onnxc_tests::load_manifest()
                    .and_then(|m| onnxc_tests::supported_ops_markdown(&suite_dir(), &m))
                {
                    Ok(m) => m,
                    Err(e) => {
                        eprintln!("{e}");
                        std::process::exit(2);
                    }
                };
                let path = root().join("docs/supported-ops.md");
                let _ = std::fs::create_dir_all(root().join("docs"));
                std::fs::write(&path, md).expect("write docs/supported-ops.md");
                println!("wrote {}", path.display());
                return;
            }
            "-h" | "--help" => {
                println!(
                    "usage: conformance [--opt O0|O2] [--jobs N] [--filter SUBSTR] [--keep DIR] [--check] [--update] [--manifest-only] [--symbolic-batch|--symbolic-seq] [--docs]"
                );
                return;
            }
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let cases = match load_cases(&suite_dir()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let manifest_path = onnxc_tests::manifest_path();
    // Only `--update` may start from no manifest (it writes one); checking against a missing
    // or empty one would pass having checked nothing.
    let manifest: BTreeSet<String> = match onnxc_tests::load_manifest() {
        Ok(m) if m.is_empty() && (check || only_manifest) => {
            eprintln!(
                "{} lists no cases: nothing to check",
                manifest_path.display()
            );
            std::process::exit(2);
        }
        Ok(m) => m,
        Err(_) if update && !check && !only_manifest => BTreeSet::new(),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let selected: Vec<Case> = cases
        .into_iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.id().contains(f.as_str())))
        .filter(|c| !only_manifest || manifest.contains(&c.id()))
        .collect();
    // Each case is judged by its outputs: its compile warnings (a retry's, a dead branch's)
    // are not printed.
    let opts = Options {
        opt,
        quiet: true,
        ..Options::default()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(Case, Outcome, f64)>> = Mutex::new(Vec::new());
    let t0 = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = selected.get(i) else { break };
                    let start = std::time::Instant::now();
                    let k = keep.as_ref().map(|k| k.join(&c.name));
                    let out = run_case_as(
                        &c.dir,
                        &opts,
                        c.rtol,
                        c.atol,
                        k.as_deref(),
                        &threads,
                        symbolic,
                    );
                    let dt = start.elapsed().as_secs_f64();
                    // A kept case's files stay only when it does not pass.
                    if let Some(k) = &k
                        && out == Outcome::Pass
                    {
                        let _ = std::fs::remove_dir_all(k);
                    }
                    results
                        .lock()
                        .expect("results lock")
                        .push((c.clone(), out, dt));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|a| a.0.id());
    let tag = format!(
        "{}{}",
        match opt {
            OptLevel::O0 => "O0",
            OptLevel::O2 => "O2",
        },
        match symbolic {
            Symbolic::No => "",
            Symbolic::Batch => "-batch",
            Symbolic::Seq => "-seq",
        }
    );
    let mut tsv = String::new();
    let mut per_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut passing = BTreeSet::new();
    for (c, o, dt) in &results {
        tsv.push_str(&format!(
            "{}\t{}\t{:.2}\t{}\n",
            c.id(),
            o.label(),
            dt,
            o.message().replace(['\n', '\t'], " ")
        ));
        let e = per_kind.entry(c.kind.clone()).or_default();
        e.1 += 1;
        if *o == Outcome::Pass {
            e.0 += 1;
            passing.insert(c.id());
        }
    }
    // Beside the suite: `.cache/conformance-O2.tsv` for the default suite.
    let out_dir = suite_dir()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| root().join(".cache"));
    let out_path = out_dir.join(format!("conformance-{tag}.tsv"));
    let _ = std::fs::create_dir_all(&out_dir);
    let _ = std::fs::write(&out_path, tsv);
    let total: usize = per_kind.values().map(|v| v.0).sum();
    println!(
        "conformance ({tag}): {total} of {} cases pass in {:.0} s",
        results.len(),
        t0.elapsed().as_secs_f64()
    );
    for (k, (p, n)) in &per_kind {
        println!("  {k:<20} {p:>5} / {n}");
    }
    println!("details: {}", out_path.display());
    let ran: BTreeSet<String> = results.iter().map(|r| r.0.id()).collect();
    // Manifest cases the filter selects that are not in the generated suite did not run: a
    // case that drops out of the suite must fail the check, not pass unseen.
    let missing: Vec<&String> = manifest
        .iter()
        .filter(|m| filter.as_ref().is_none_or(|f| m.contains(f.as_str())) && !ran.contains(*m))
        .collect();
    // With symbolic dims, a model may be refused (its batch is not independent, its code
    // differs with the dim taken at run time), but one that compiles must pass.
    let refused: BTreeSet<String> = results
        .iter()
        .filter(|r| symbolic != Symbolic::No && matches!(r.1, Outcome::Rejected(_)))
        .map(|r| r.0.id())
        .collect();
    match symbolic {
        Symbolic::No => {}
        Symbolic::Batch => println!(
            "symbolic batch: {} case(s) refused (the model does not compute its items independently)",
            refused.len()
        ),
        Symbolic::Seq => println!(
            "symbolic seq: {} case(s) refused (a dim the model needs fixed at compile time)",
            refused.len()
        ),
    }
    let regressions: Vec<&String> = manifest
        .iter()
        .filter(|m| ran.contains(*m) && !passing.contains(*m) && !refused.contains(*m))
        .collect();
    let new: Vec<&String> = passing.iter().filter(|p| !manifest.contains(*p)).collect();
    if !new.is_empty() {
        println!(
            "{} passing case(s) not in the manifest (add them with --update):",
            new.len()
        );
        for n in new.iter().take(50) {
            println!("  + {n}");
        }
    }
    if update && symbolic != Symbolic::No {
        eprintln!("--update does not combine with --symbolic-batch or --symbolic-seq");
        std::process::exit(2);
    }
    if update {
        let mut m: BTreeSet<String> = manifest
            .iter()
            .filter(|x| !ran.contains(*x))
            .cloned()
            .collect();
        m.extend(passing.iter().cloned());
        let mut text = String::from(
            "# ONNX backend test cases that pass through onnxc (kind/name), checked by `make test`.\n# Regenerate with: cargo run --release --bin conformance -- --update\n",
        );
        for x in &m {
            text.push_str(x);
            text.push('\n');
        }
        let _ = std::fs::write(&manifest_path, text);
        println!("manifest updated: {} cases", m.len());
        match onnxc_tests::supported_ops_markdown(&suite_dir(), &m) {
            Ok(md) => {
                let _ = std::fs::create_dir_all(root().join("docs"));
                let _ = std::fs::write(root().join("docs/supported-ops.md"), md);
            }
            Err(e) => eprintln!("docs/supported-ops.md not regenerated: {e}"),
        }
    }
    if check && !missing.is_empty() {
        println!(
            "MISSING: {} manifest case(s) are not in the generated suite and did not run \
             (regenerate it with `make suite`, or delete their lines from the manifest):",
            missing.len()
        );
        for m in missing.iter().take(50) {
            println!("  ? {m}");
        }
    }
    if check && !regressions.is_empty() {
        println!(
            "REGRESSIONS: {} manifest case(s) no longer pass:",
            regressions.len()
        );
        for (c, o, _) in results.iter().filter(|r| regressions.contains(&&r.0.id())) {
            println!("  - {}: {} {}", c.id(), o.label(), o.message());
        }
    }
    if check && (!regressions.is_empty() || !missing.is_empty()) {
        std::process::exit(1);
    }
}
