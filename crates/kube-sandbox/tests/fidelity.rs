//! The shared storage-fidelity suite (`../shared/fidelity/check.py`, which creates every case
//! on a cluster and compares what it stored with what a real kube-apiserver stored), run
//! against an in-process sandbox: every object identical, every rejection the same.

mod common;

use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_stores_what_kube_apiserver_stores() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fidelity/check.py");
    assert!(
        script.exists(),
        "fidelity suite not found at {} (CI clones shared/ beside the repo)",
        script.display()
    );
    // The reference objects come from a kube-apiserver without scheduler or kubelet: compare
    // with a sandbox without them too (no Node, so no pod is bound to one).
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let t = common::start_with(cfg).await;
    let kubeconfig = t.kubeconfig();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(&script)
            .arg(&kubeconfig)
            .current_dir(std::env::temp_dir())
            .output()
            .expect("run the fidelity suite (needs python3 and kubectl)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        out.status.success() && last.ends_with(" 0 differ"),
        "fidelity differences (expected vs sandbox):\n{stdout}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
