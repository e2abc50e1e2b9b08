//! The conformance runner never passes having checked nothing: a missing or empty manifest
//! is an error, and a manifest case that is not in the generated suite fails `--check`.

use std::process::{Command, Output};

/// Runs the conformance binary over an empty suite in `dir` with `manifest` (absent: none).
fn run(name: &str, manifest: Option<&str>, args: &[&str]) -> Output {
    let dir = onnxc_tests::scratch(name);
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("cases.tsv"), "").unwrap();
    let path = dir.join("manifest.txt");
    if let Some(text) = manifest {
        std::fs::write(&path, text).unwrap();
    }
    Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(args)
        .env("ONNXC_SUITE", &suite)
        .env("ONNXC_MANIFEST", &path)
        .output()
        .expect("run the conformance binary")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_missing_manifest_is_an_error() {
    let o = run("runner-missing", None, &["--check", "--manifest-only"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot read the manifest"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_empty_manifest_is_an_error() {
    let o = run("runner-empty", Some("# no cases\n"), &["--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("lists no cases"), "{}", text(&o));
}

#[test]
fn a_manifest_case_that_did_not_run_fails_the_check() {
    let m = "node/test_gone\nnode/test_other\n";
    let o = run("runner-gone", Some(m), &["--check", "--manifest-only"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("MISSING: 2 manifest case(s)"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("? node/test_gone"), "{}", text(&o));
    // A filter narrows what must have run.
    let o = run(
        "runner-gone-filter",
        Some(m),
        &["--check", "--filter", "other"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("MISSING: 1 manifest case(s)"),
        "{}",
        text(&o)
    );
}
