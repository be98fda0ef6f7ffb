//! Hook failures: a managed hook server killed with SIGKILL is restarted with backoff (its
//! exit and last output shown), and a parent edited while it is down is synced once it is
//! back; an exec hook killed by a signal is a failed call that changes nothing.

use crate::common;

use crate::common::cli::*;
use crate::common::engine::*;
use crate::common::faults::{dev_cmd, set_who};
use crate::common::{TIMEOUT, wait_for};
use kube::api::{Api, DynamicObject};
use serde_json::json;

/// Pids in `server    ready (pid N)` lines, in order.
fn ready_pids(out: &str) -> Vec<i32> {
    out.split("server    ready (pid ")
        .skip(1)
        .filter_map(|rest| rest.split(')').next()?.trim().parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_hook_server_is_restarted_and_a_waiting_sync_goes_through() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let hw = repo().join("examples/hello-world");
    let port = common::free_port();
    let server = format!("python3 {} --port {port}", hw.join("server.py").display());
    let file = |f: &str| hw.join(f).display().to_string();
    let files = [file("00-crd.yaml"), file("20-sample.yaml"), file("webhook")];
    let base = format!("http://127.0.0.1:{port}");
    let dev = Background::start(dev_cmd(
        home.path(),
        &kc(&sb),
        &files,
        &[
            "--apply",
            "--hook-base-url",
            &base,
            "--hook-server",
            &server,
            "--no-watch",
        ],
    ));
    dev.wait_output("create    Pod.v1 default/hello").await;
    let first = *ready_pids(&dev.output()).last().expect("a ready pid");

    // Killed (its whole group): restarted after a backoff, the crash shown.
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe {
        libc::killpg(first, libc::SIGKILL);
    }
    // Edited while the server is down or restarting: the sync waits, then goes through.
    set_who(&sb.client, "hello", "Crash").await;
    dev.wait_output("exited unexpectedly (killed by signal 9); restarting in")
        .await;
    let pods: Api<DynamicObject> =
        Api::namespaced_with(sb.client.clone(), "default", &core_ar("Pod", "pods"));
    wait_for("the pod to greet Crash", TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get_opt("hello").await.ok()??;
            let v = serde_json::to_value(p).ok()?;
            v["spec"]["containers"][0]["command"]
                .to_string()
                .contains("Hello, Crash!")
                .then_some(())
        }
    })
    .await;
    let pids = ready_pids(&dev.output());
    assert!(pids.len() >= 2, "{}", dev.output());
    assert_ne!(pids.last(), Some(&first), "a new process serves");
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "still running until interrupted: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_hook_killed_by_a_signal_is_a_failed_call_that_changes_nothing() {
    let w = World::new("Parent", always(json!({}))).await;
    let mut d = composite(
        "killed",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"exec": {"command": ["sh", "-c", "cat >/dev/null; kill -9 $$"]}}}),
    );
    d["spec"]["generateSelector"] = json!(true);
    let engine = Running::start(w.client(), vec![def(d)]).await;
    w.create(&parent_ar("Parent"), json!({"metadata": {"name": "p"}}))
        .await;
    let err = engine
        .wait_sync_error("default/p", "killed by signal 9")
        .await;
    assert!(err.contains("sync"), "{err}");
    assert!(engine.writes().iter().all(|(_, o)| o == "default/p"));
    assert!(
        w.names(&core_ar("ConfigMap", "configmaps"))
            .await
            .iter()
            .all(|n| n == "kube-root-ca.crt"),
        "no child written"
    );
    engine.stop().await;
}
