//! `kubectl meta flight dump POD`: the real `kubectl meta run` binary syncing hello-world on a
//! sandbox, a Pod object standing for it (its container port named `http` as `deploy` names
//! it, its IP patched to 127.0.0.1 where run listens), the recording fetched through the
//! sandbox's pod proxy, checked, written to stdout or a file; `kubectl get --raw` through the
//! same path agrees; the failures' messages and exit codes.

use std::path::Path;

use serde_json::Value;

use crate::common::cli::*;
use crate::common::{TIMEOUT, TestSandbox, free_port, wait_for};
use crate::run::{guard, hello_world_on_cluster, ok_kubectl, run_cmd, wait_pod};

const NS: &str = "ops";

/// Pod `name` in [`NS`] declaring `ports` (name, port), Running at 127.0.0.1 (the kubelet
/// makes it Running with a pod-network IP first; the status is then patched, as a CNI would
/// have given this machine's address).
async fn pod_at_localhost(sb: &TestSandbox, name: &str, ports: &[(&str, u16)]) {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| serde_json::json!({"name": n, "containerPort": p}))
        .collect();
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "run", "image": "kubectl-meta", "ports": ports}]}});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], &pod.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(&format!("pod {name} Running"), TIMEOUT, || async {
        let out = sb.kubectl(&[
            "get",
            "pod",
            name,
            "-n",
            NS,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        (String::from_utf8_lossy(&out.stdout) == "Running").then_some(())
    })
    .await;
    ok_kubectl(
        sb,
        &[
            "patch",
            "pod",
            name,
            "-n",
            NS,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"podIP":"127.0.0.1","podIPs":[{"ip":"127.0.0.1"}]}}"#,
        ],
    );
}

async fn flight(sb: &TestSandbox, home: &Path, args: &[&str]) -> std::process::Output {
    let kubeconfig = kc(sb);
    let mut all = vec!["--kubeconfig", kubeconfig.as_str(), "flight", "dump"];
    all.extend_from_slice(args);
    run(meta(home, &all)).await
}

fn events(rec: &Value) -> &Vec<Value> {
    rec["events"].as_array().expect("events")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flight_dump_fetches_runs_recording_through_the_pod_proxy() {
    let sb = crate::common::start().await;
    let home = tempfile::tempdir().unwrap();
    hello_world_on_cluster(&sb).await;
    let port = free_port();
    let runner = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-a",
        port,
        &["--flight-recorder-size", "300000"],
    ));
    let _g = guard(&runner);
    wait_pod(&sb).await;
    ok_kubectl(&sb, &["create", "namespace", NS]);
    pod_at_localhost(&sb, "meta-run-0", &[("metrics", 1), ("http", port)]).await;

    // The recording, once it holds hello's sync that created its Pod.
    let rec: Value = wait_for("a dumped recording with the create", TIMEOUT, || async {
        let out = flight(&sb, home.path(), &["meta-run-0", "-n", NS]).await;
        let stdout = assert_ok(&out);
        let rec: Value = serde_json::from_str(&stdout).expect("stdout is the recording");
        events(&rec)
            .iter()
            .any(|e| e["event"]["event"] == "action" && e["event"]["verb"] == "create")
            .then_some(rec)
    })
    .await;
    assert_eq!(rec["apiVersion"], "flight.kubectl-meta.io/v1");
    assert_eq!(rec["kind"], "FlightRecording");
    assert_eq!(rec["limitBytes"], 300_000);
    let hook = events(&rec)
        .iter()
        .map(|e| &e["event"])
        .find(|e| e["event"] == "hookCalled" && e["controller"] == "hello-world-controller")
        .expect("a recorded hook call");
    assert_eq!(hook["request"]["parent"]["metadata"]["name"], "hello");
    assert!(
        events(&rec)
            .iter()
            .any(|e| e["event"]["event"] == "syncStarted"
                && e["event"]["parent"].to_string().contains("hello"))
    );

    // kubectl get --raw through the same proxy path: the same recording (the events both
    // hold, by seq, are identical; the later one may hold more).
    let raw = sb.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/{NS}/pods/meta-run-0:{port}/proxy/debug/flight"),
    ]);
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let raw: Value = serde_json::from_slice(&raw.stdout).expect("raw is JSON");
    assert_eq!(
        (&raw["apiVersion"], &raw["kind"], &raw["limitBytes"]),
        (&rec["apiVersion"], &rec["kind"], &rec["limitBytes"])
    );
    let by_seq: std::collections::BTreeMap<u64, &Value> = events(&raw)
        .iter()
        .map(|e| (e["seq"].as_u64().expect("seq"), e))
        .collect();
    let mut common_events = 0;
    for e in events(&rec) {
        if let Some(other) = by_seq.get(&e["seq"].as_u64().expect("seq")) {
            assert_eq!(*other, e);
            common_events += 1;
        }
    }
    assert!(
        common_events > 0 && common_events == events(&rec).len(),
        "{common_events}"
    );

    // -o FILE: the file holds it, stdout stays empty, stderr says what was written.
    let file = home.path().join("flight.json");
    let out = flight(
        &sb,
        home.path(),
        &[
            "meta-run-0",
            "-n",
            NS,
            "-o",
            file.to_str().unwrap(),
            "--port",
            &port.to_string(),
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("wrote the flight recording of pod meta-run-0"),
        "{stderr}"
    );
    let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(saved["kind"], "FlightRecording");

    // Failures: one line each, nothing on stdout, nothing written.
    let closed = free_port();
    pod_at_localhost(&sb, "no-http-port", &[("metrics", 1)]).await;
    let gone = home.path().join("never.json");
    let cases: Vec<(Vec<String>, i32, String)> = vec![
        (
            vec!["nope".into(), "-o".into(), gone.display().to_string()],
            2,
            format!("pod nope not found in namespace {NS}"),
        ),
        (
            vec!["no-http-port".into()],
            2,
            "declares no container port named \"http\"".into(),
        ),
        (
            vec!["meta-run-0".into(), "--port".into(), closed.to_string()],
            3,
            format!(
                "could not reach pod meta-run-0 on port {closed} (proxy refused): error trying to reach service: dial tcp 127.0.0.1:{closed}: connect: connection refused"
            ),
        ),
        (
            vec!["deploy/nope".into()],
            2,
            format!("deployment nope not found in namespace {NS}"),
        ),
    ];
    for (args, code, says) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["-n", NS]);
        let out = flight(&sb, home.path(), &all).await;
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(&says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
    assert!(!gone.exists());

    // A pod that stopped has no recorder to read.
    ok_kubectl(
        &sb,
        &[
            "patch",
            "pod",
            "no-http-port",
            "-n",
            NS,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ],
    );
    let out = flight(&sb, home.path(), &["no-http-port", "-n", NS, "--port", "1"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out)
            .1
            .contains("pod no-http-port is Succeeded, not Running"),
        "{}",
        text(&out).1
    );

    // A run whose recorder is off: said so, exit 3.
    let off_port = free_port();
    let off = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-b",
        off_port,
        &["--flight-recorder-size", "0"],
    ));
    let _g2 = guard(&off);
    pod_at_localhost(&sb, "meta-run-off", &[("http", off_port)]).await;
    let stderr = wait_for("run's address answering", TIMEOUT, || async {
        let out = flight(&sb, home.path(), &["meta-run-off", "-n", NS]).await;
        let (_, stderr) = text(&out);
        (!stderr.contains("could not reach")).then_some((out.status.code(), stderr))
    })
    .await;
    assert_eq!(stderr.0, Some(3), "{}", stderr.1);
    assert!(
        stderr.1.contains("runs with its flight recorder off"),
        "{}",
        stderr.1
    );
}
