//! `dev --once --timeout N` exits within N s plus the documented margin (5 s) whatever it
//! waits on, naming what had not converged: a hook that hangs, an API server that accepts
//! connections and never answers. The real binary, against real servers.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::cli::*;

/// The documented bound past `--timeout`, plus slack for starting a process on a busy machine.
const BOUND: Duration = Duration::from_secs(5 + 4);

/// Run `dev --once --timeout SECS` with `files` (repeated `-f`) against `kubeconfig`; the
/// output, stderr of a failure, and how long it took.
async fn once(
    home: &std::path::Path,
    kubeconfig: &str,
    files: &[String],
    secs: u64,
) -> (String, Duration) {
    let timeout = secs.to_string();
    let start = Instant::now();
    let out = run(common::faults::dev_cmd(
        home,
        kubeconfig,
        files,
        &["--apply", "--once", "--timeout", &timeout],
    ))
    .await;
    let took = start.elapsed();
    let stderr = assert_fails(&out);
    assert!(
        took < Duration::from_secs(secs) + BOUND,
        "exited after {took:?}: {stderr}"
    );
    assert!(
        stderr.contains(&format!("not converged after {secs}s (--timeout)")),
        "{stderr}"
    );
    (stderr, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_timeout_holds_with_a_hook_that_hangs_and_names_the_parent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let controller = home.path().join("hanging.yaml");
    std::fs::write(
        &controller,
        "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: hanging}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}
  childResources: [{apiVersion: v1, resource: pods}]
  hooks:
    sync: {exec: {command: [sleep, '120'], timeout: 120s}}
",
    )
    .unwrap();
    let hw = repo().join("examples/hello-world");
    let files = [
        hw.join("00-crd.yaml").display().to_string(),
        hw.join("20-sample.yaml").display().to_string(),
        controller.display().to_string(),
    ];
    let (stderr, _) = once(home.path(), &kc(&sb), &files, 4).await;
    assert!(stderr.contains("hanging"), "names the controller: {stderr}");
    assert!(
        stderr.contains("syncing"),
        "names what was pending: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_timeout_holds_when_the_api_server_never_answers() {
    // Accepts connections, never answers (a hung API server, a half-open VPN).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = std::sync::Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            keep.lock().unwrap().push(conn);
        }
    });
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1
kind: Config
clusters: [{{name: hung, cluster: {{server: 'https://{addr}', insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: hung, context: {{cluster: hung, user: u}}}}]
current-context: hung
"
        ),
    )
    .unwrap();
    let (stderr, _) = once(
        home.path(),
        &kubeconfig.display().to_string(),
        &[example("hello-world")],
        3,
    )
    .await;
    assert!(stderr.contains("gave up while"), "{stderr}");
    assert!(!held.lock().unwrap().is_empty(), "it did connect");
}
