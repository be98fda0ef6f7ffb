//! Metacontroller's own examples, each with its own `test.sh` unmodified, with the controllers
//! run by `kubectl-meta dev` on an embedded sandbox and the hooks run locally
//! (scripts/metacontroller-example.sh does one example).
//!
//! Runs only when `METACONTROLLER_SRC` points at a checkout of
//! github.com/metacontroller/metacontroller (its `examples/` and `manifests/`); skipped, saying
//! so, otherwise. `METACONTROLLER_EXAMPLES=a,b` picks examples (default: every example listed
//! below). Needs kubectl, python3, node (nodejs examples) and the `jsonnet` Python package
//! (jsonnet examples); an example whose tool is missing fails naming it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The examples that run through `dev` with hooks on the laptop (the others need an
/// in-cluster Metacontroller: leader election, its metrics or profiling endpoints, or its own
/// `--target-label-selector`). webhook-auth's test.sh creates the Secrets its hooks need after
/// `dev` started: the secured controllers start when they appear.
const EXAMPLES: &[&str] = &[
    "bluegreen",
    "catset",
    "clusteredparent",
    "configmap-list-v2",
    "configmappropagation",
    "crd-roles",
    "daemonjob",
    "globalconfigmap",
    "indexedjob",
    "namespace-list-v2",
    "secretpropagation",
    "service-per-pod",
    "service-per-pod-v2",
    "update-strategy",
    "webhook-auth",
];

#[test]
fn metacontroller_examples_pass_through_dev_on_the_sandbox() {
    let Some(src) = std::env::var_os("METACONTROLLER_SRC").map(PathBuf::from) else {
        eprintln!(
            "skipped: set METACONTROLLER_SRC to a checkout of github.com/metacontroller/metacontroller to run its examples"
        );
        return;
    };
    assert!(
        src.join("examples").is_dir() && src.join("manifests").is_dir(),
        "METACONTROLLER_SRC={} has no examples/ and manifests/",
        src.display()
    );
    let wanted: Vec<String> = match std::env::var("METACONTROLLER_EXAMPLES") {
        Ok(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        Err(_) => EXAMPLES.iter().map(|s| s.to_string()).collect(),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/metacontroller-example.sh");
    let bin = env!("CARGO_BIN_EXE_kubectl-meta");
    let mut failed = Vec::new();
    for ex in &wanted {
        let out = Command::new("bash")
            .arg(&script)
            .arg(&src)
            .arg(ex)
            .arg(bin)
            .output()
            .expect("run scripts/metacontroller-example.sh");
        let ok = out.status.success();
        eprintln!("{ex}: {}", if ok { "pass" } else { "FAIL" });
        if !ok {
            let text = String::from_utf8_lossy(&out.stdout);
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            failed.push(format!(
                "{ex} (exit {:?}):\n{}\n{}",
                out.status.code(),
                tail.join("\n"),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} examples failed:\n\n{}",
        failed.len(),
        wanted.len(),
        failed.join("\n\n")
    );
}
