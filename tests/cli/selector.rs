//! `kubectl meta dev -l/--selector` (Metacontroller's `--target-label-selector`): the real binary
//! against a sandbox picks controllers by their labels; a bad selector is a usage error (exit 2)
//! before anything is written.

use crate::common;

use std::path::Path;
use std::process::Command;

use crate::common::cli::*;
use serde_json::Value;

/// A CompositeController `name` with `labels` on the hello-world parents whose exec hook runs
/// `script` (in `dir`).
fn controller(dir: &Path, name: &str, labels: &str, script: &str) {
    std::fs::write(dir.join(format!("{name}.py")), script).unwrap();
    std::fs::write(
        dir.join(format!("10-{name}.yaml")),
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: {name}
  labels: {labels}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}}
  childResources: [{{apiVersion: v1, resource: configmaps}}]
  hooks:
    sync: {{exec: {{command: [python3, {name}.py]}}}}
"
        ),
    )
    .unwrap();
}

/// Two controllers of the same parents: `picked` (group=a) writes `status.by: picked`; `other`
/// (group=b) fails every sync, so running it would make `--once` fail.
fn two_controllers(dir: &Path) {
    for f in ["00-crd.yaml", "20-sample.yaml"] {
        std::fs::copy(repo().join("examples/hello-world").join(f), dir.join(f)).unwrap();
    }
    controller(
        dir,
        "picked",
        "{group: a, tier: x}",
        "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({'status': {'by': 'picked'}, 'children': []}))\n",
    );
    controller(
        dir,
        "other",
        "{group: b}",
        "import sys\nsys.stderr.write('other must not run\\n')\nsys.exit(3)\n",
    );
}

/// `dev -f DIR --once` against `sb` with `extra` arguments.
fn dev(sb: &common::TestSandbox, home: &Path, dir: &Path, extra: &[&str]) -> Command {
    let (kubeconfig, dir) = (kc(sb), dir.display().to_string());
    let mut args = vec!["--kubeconfig", &kubeconfig, "dev", "-f", &dir, "--once"];
    args.extend_from_slice(extra);
    meta(home, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_runs_only_the_controllers_whose_labels_match() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    two_controllers(dir.path());
    let extra = ["--apply", "-l", "group in (a),tier=x", "-o", "json"];
    let out = run(dev(&sb, home.path(), dir.path(), &extra)).await;
    let stdout = assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("leaves out CompositeController other (labels group=b)"),
        "{stderr}"
    );
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let controllers: std::collections::BTreeSet<&str> = events
        .iter()
        .filter_map(|e| e["controller"].as_str())
        .collect();
    assert!(controllers.contains("picked"), "{stdout}");
    assert!(!controllers.contains("other"), "{stdout}");
    assert!(!stderr.contains("other must not run"), "{stderr}");
    let parent = get(
        &sb,
        &ar("example.kubectl-meta.dev", "HelloWorld", "helloworlds"),
        Some("default"),
        "hello",
    )
    .await
    .expect("the sample parent");
    assert_eq!(parent["status"]["by"], "picked", "{parent}");

    // The other label picks the other controller, whose hook fails: --once says so.
    let extra = ["--selector=group=b", "--timeout", "3"];
    let out = run(dev(&sb, home.path(), dir.path(), &extra)).await;
    let stderr = assert_fails(&out);
    assert!(stderr.contains("other must not run"), "{stderr}");
    assert!(
        stderr.contains("leaves out CompositeController picked"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_empty_selection_exits_2_before_anything_is_written() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    two_controllers(dir.path());
    let rv_before = global_rv(&sb).await;
    let run_with = |selector: &'static str| {
        run(dev(
            &sb,
            home.path(),
            dir.path(),
            &["--apply", "-l", selector],
        ))
    };

    let out = run_with("group in (a").await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("-l/--selector \"group in (a\" is not a valid label selector"),
        "{stderr}"
    );
    assert!(stderr.contains("key in (a,b)"), "{stderr}");

    let out = run_with("group=c").await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("matches none of the 2 controller definition(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("CompositeController other (labels group=b)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("CompositeController picked (labels group=a,tier=x)"),
        "{stderr}"
    );

    assert_eq!(global_rv(&sb).await, rv_before, "something was written");
}
