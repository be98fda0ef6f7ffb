//! The shared kubectl-driven API-server behaviour suite (`../shared/conformance/apiserver.sh`,
//! which passes against a real kube-apiserver 1.36), run against an in-process sandbox.

mod common;

use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_apiserver_conformance_suite_passes() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/apiserver.sh");
    assert!(
        script.exists(),
        "conformance suite not found at {} (CI clones shared/ beside the repo)",
        script.display()
    );
    let t = common::start().await;
    let kubeconfig = t.kubeconfig();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg(&script)
            .env("KUBECONFIG", &kubeconfig)
            .current_dir(std::env::temp_dir())
            .output()
            .expect("run the conformance suite")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && failures.is_empty(),
        "conformance failures:\n{}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        failures.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.ends_with(" 0 failed"), "unexpected summary: {last}");
}
