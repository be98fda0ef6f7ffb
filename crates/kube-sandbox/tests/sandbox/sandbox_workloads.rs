//! The sandbox's simulated workload controllers (ReplicaSet, Deployment, DaemonSet, Job), Node,
//! scheduler and `pods/log`, checked against what a real kube-controller-manager wrote for the
//! same objects (tests/fixtures/real-workloads, captured by scripts/capture_workload_fixtures.py
//! on ../shared/real-apiserver): status field for field, timestamps and generated names aside.

use crate::common;

use std::path::Path;
use std::time::Duration;

use kube_sandbox::SandboxConfig;
use serde_json::{Value, json};

use crate::common::{TIMEOUT, TestSandbox, ok_stdout, wait_for};

const FIX: &str = "tests/fixtures/real-workloads";

fn fixture(name: &str) -> Value {
    let p = Path::new(FIX).join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).expect("fixture")).expect("fixture JSON")
}

async fn sandbox() -> TestSandbox {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
    cfg.tunables.pod_run = Duration::from_millis(200);
    cfg.tunables.job_backoff = Duration::from_millis(200);
    common::start_with(cfg).await
}

fn get(sb: &TestSandbox, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok_stdout(&sb.kubectl(&a))).expect("kubectl JSON")
}

fn cond<'a>(obj: &'a Value, t: &str) -> &'a Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .unwrap_or(&Value::Null)
}

/// Timestamps become `<time>`, `name` (a generated name) becomes `<name>`.
fn normalize(v: &Value, names: &[(&str, &str)]) -> Value {
    match v {
        Value::String(s) => {
            let looks_like_time = s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T';
            if looks_like_time {
                return json!("<time>");
            }
            let mut s = s.clone();
            for (from, to) in names {
                s = s.replace(from, to);
            }
            json!(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| normalize(x, names)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), normalize(x, names)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn settle(sb: &TestSandbox) {
    ok_stdout(&sb.kubectl(&["create", "namespace", "wl"]));
    ok_stdout(&sb.kubectl(&["apply", "-f", &format!("{FIX}/objects.yaml")]));
    wait_for("every workload to settle", TIMEOUT * 2, || async {
        let rs = get(sb, &["rs", "rs", "-n", "wl"]);
        let dep = get(sb, &["deploy", "web", "-n", "wl"]);
        let ds = get(sb, &["ds", "ds", "-n", "wl"]);
        let jobs: Vec<Value> = ["job", "ijob", "fail"]
            .iter()
            .map(|j| get(sb, &["job", j, "-n", "wl"]))
            .collect();
        let pods = get(sb, &["pods", "-n", "wl"]);
        let tracked = pods["items"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["metadata"]["finalizers"].is_array()));
        (rs["status"]["availableReplicas"] == 2
            && dep["status"]["availableReplicas"] == 2
            && cond(&dep, "Progressing")["reason"] == "NewReplicaSetAvailable"
            && ds["status"]["numberAvailable"] == 1
            && cond(&jobs[0], "Complete")["status"] == "True"
            && cond(&jobs[1], "Complete")["status"] == "True"
            && cond(&jobs[2], "Failed")["status"] == "True"
            && !tracked)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_match_what_kube_controller_manager_writes() {
    let sb = sandbox().await;
    settle(&sb).await;
    for (kind, name, fix) in [
        ("replicaset", "rs", "replicaset-rs"),
        ("daemonset", "ds", "daemonset-ds"),
        ("job", "job", "job-job"),
        ("job", "ijob", "job-ijob"),
        ("job", "fail", "job-fail"),
    ] {
        let ours = get(&sb, &[kind, name, "-n", "wl"]);
        assert_eq!(
            normalize(&ours["status"], &[]),
            normalize(&fixture(fix)["status"], &[]),
            "{kind}/{name}: status differs from the real controller's"
        );
    }
    // The Deployment and its ReplicaSet: same fields, with the generated hash aside.
    let real_rs = fixture("replicaset-of-web");
    let real_hash = real_rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("real hash");
    let ours_rs = get(&sb, &["rs", "-n", "wl", "-l", "app=web"]);
    let ours_rs = &ours_rs["items"][0];
    let hash = ours_rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("pod-template-hash label");
    assert_eq!(ours_rs["metadata"]["name"], format!("web-{hash}"));
    let real_names = [(real_hash, "<hash>")];
    let our_names = [(hash, "<hash>")];
    assert_eq!(
        normalize(&ours_rs["status"], &our_names),
        normalize(&real_rs["status"], &real_names)
    );
    assert_eq!(
        ours_rs["metadata"]["annotations"], real_rs["metadata"]["annotations"],
        "revision, desired-replicas and max-replicas annotations"
    );
    for f in ["labels", "ownerReferences"] {
        let strip = |v: &Value| {
            let mut v = normalize(v, &[(real_hash, "<hash>"), (hash, "<hash>")]);
            if let Some(a) = v.as_array_mut() {
                for o in a {
                    o["uid"] = json!("<uid>");
                }
            }
            v
        };
        assert_eq!(
            strip(&ours_rs["metadata"][f]),
            strip(&real_rs["metadata"][f]),
            "{f}"
        );
    }
    assert_eq!(
        normalize(&ours_rs["spec"]["selector"], &our_names),
        normalize(&real_rs["spec"]["selector"], &real_names)
    );
    let dep = get(&sb, &["deploy", "web", "-n", "wl"]);
    let real_dep = fixture("deployment-web");
    assert_eq!(
        normalize(&dep["status"], &[(&format!("web-{hash}"), "<rs>")]),
        normalize(
            &real_dep["status"],
            &[(&format!("web-{real_hash}"), "<rs>")]
        )
    );
    assert_eq!(
        dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        real_dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_look_like_the_real_controllers_pods() {
    let sb = sandbox().await;
    settle(&sb).await;
    let pods = get(&sb, &["pods", "-n", "wl"]);
    let items = pods["items"].as_array().expect("pods");
    let mine = |owner: &str| -> Vec<&Value> {
        items
            .iter()
            .filter(|p| p["metadata"]["ownerReferences"][0]["name"] == owner)
            .collect()
    };
    // Every pod is bound to the sandbox's Node.
    for p in items {
        assert_eq!(
            p["spec"]["nodeName"], "sandbox-node",
            "{}",
            p["metadata"]["name"]
        );
        assert_eq!(cond(p, "PodScheduled")["status"], "True");
    }
    // DaemonSet pod: labels, pinning affinity, tolerations as upstream.
    let real = fixture("pod-of-daemonset-ds");
    let ds = mine("ds");
    assert_eq!(ds.len(), 1);
    let label_keys = |p: &Value| {
        let mut k: Vec<String> = p["metadata"]["labels"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    assert_eq!(label_keys(ds[0]), label_keys(&real));
    assert_eq!(ds[0]["metadata"]["labels"]["pod-template-generation"], "1");
    assert_eq!(ds[0]["spec"]["affinity"], real["spec"]["affinity"]);
    assert_eq!(ds[0]["spec"]["tolerations"], real["spec"]["tolerations"]);
    assert_eq!(ds[0]["metadata"]["generateName"], "ds-");
    // Indexed Job pod: index label and annotation, hostname, env, name.
    let real = fixture("pod-of-job-ijob");
    let mut ij = mine("ijob");
    ij.sort_by_key(|p| p["metadata"]["name"].as_str().map(String::from));
    let p0 = ij
        .iter()
        .find(|p| p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0")
        .expect("index 0");
    assert_eq!(
        p0["metadata"]["generateName"],
        real["metadata"]["generateName"]
    );
    assert_eq!(
        p0["metadata"]["annotations"],
        real["metadata"]["annotations"]
    );
    assert_eq!(label_keys(p0), label_keys(&real));
    assert_eq!(p0["spec"]["hostname"], real["spec"]["hostname"]);
    assert_eq!(
        p0["spec"]["containers"][0]["env"],
        real["spec"]["containers"][0]["env"]
    );
    assert_eq!(p0["status"]["phase"], "Succeeded");
    // ReplicaSet pod: generated name and controller reference.
    let real = fixture("pod-of-replicaset-rs");
    let rs = mine("rs");
    assert_eq!(rs.len(), 2);
    assert_eq!(
        rs[0]["metadata"]["generateName"],
        real["metadata"]["generateName"]
    );
    let refs = |p: &Value| {
        let mut r = p["metadata"]["ownerReferences"].clone();
        r[0]["uid"] = json!("<uid>");
        r
    };
    assert_eq!(refs(rs[0]), refs(&real));
    // The backoff-limited Job ran backoffLimit + 1 pods, all failed.
    let failed = mine("fail");
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|p| p["status"]["phase"] == "Failed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_roll_out_within_surge_and_unavailability_limits() {
    let sb = sandbox().await;
    // (A manifest, not `kubectl create deployment`: that one sends protobuf, which the sandbox
    // decodes with Go's zero values and then rejects as unknown fields.)
    ok_stdout(&sb.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},
            "spec":{"replicas":4,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
            "spec":{"containers":[{"name":"nginx","image":"nginx"}]}}}}"#,
    ));
    let ready = |generation: i64| {
        let sb = &sb;
        move || async move {
            let d = get(sb, &["deploy", "web"]);
            (d["status"]["observedGeneration"] == generation
                && d["status"]["updatedReplicas"] == 4
                && d["status"]["availableReplicas"] == 4
                && d["status"]["replicas"] == 4
                && cond(&d, "Progressing")["reason"] == "NewReplicaSetAvailable")
                .then_some(d)
        }
    };
    wait_for("the first rollout", TIMEOUT, ready(1)).await;
    ok_stdout(&sb.kubectl(&["set", "image", "deployment/web", "nginx=nginx:2"]));
    // While it rolls, never more than replicas + maxSurge (25% of 4 = 1) pods and never fewer
    // than replicas - maxUnavailable (1) available.
    let seen_two_rs = std::cell::Cell::new(false);
    let d = wait_for("the second rollout", TIMEOUT, || async {
        let rss = get(&sb, &["rs", "-l", "app=web"]);
        let rss = rss["items"].as_array().cloned().unwrap_or_default();
        let total: i64 = rss
            .iter()
            .map(|r| r["spec"]["replicas"].as_i64().unwrap_or(0))
            .sum();
        assert!(total <= 5, "maxSurge exceeded: {total} pods wanted");
        let avail: i64 = rss
            .iter()
            .map(|r| r["status"]["availableReplicas"].as_i64().unwrap_or(0))
            .sum();
        assert!(avail >= 3, "maxUnavailable exceeded: {avail} available");
        if rss.len() == 2 {
            seen_two_rs.set(true);
        }
        ready(2)().await
    })
    .await;
    assert!(
        seen_two_rs.get(),
        "the old ReplicaSet is kept (scaled to 0)"
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let rss = get(&sb, &["rs", "-l", "app=web"]);
    let mut by_rev: Vec<(String, i64)> = rss["items"]
        .as_array()
        .expect("rs")
        .iter()
        .map(|r| {
            (
                r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r["spec"]["replicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    by_rev.sort();
    assert_eq!(by_rev, vec![("1".to_string(), 0), ("2".to_string(), 4)]);
    // Recreate: the old pods go before new ones are created.
    ok_stdout(&sb.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}"#,
    ]));
    ok_stdout(&sb.kubectl(&["set", "image", "deployment/web", "nginx=nginx:3"]));
    wait_for("the Recreate rollout", TIMEOUT, || async {
        let rss = get(&sb, &["rs", "-l", "app=web"]);
        for r in rss["items"].as_array().into_iter().flatten() {
            let new = r["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:3";
            let old_alive = !new && r["status"]["replicas"].as_i64().unwrap_or(0) > 0;
            if new && r["spec"]["replicas"].as_i64().unwrap_or(0) > 0 {
                // the new ReplicaSet is only scaled up once no old pod is left
                let others = rss["items"].as_array().into_iter().flatten().filter(|o| {
                    o["spec"]["template"]["spec"]["containers"][0]["image"] != "nginx:3"
                        && o["status"]["replicas"].as_i64().unwrap_or(0) > 0
                });
                assert_eq!(others.count(), 0, "Recreate ran new pods beside old ones");
            }
            let _ = old_alive;
        }
        ready(4)().await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_answers_with_a_simulated_log() {
    let sb = sandbox().await;
    ok_stdout(&sb.kubectl(&[
        "run",
        "hello",
        "--image=busybox",
        "--restart=Never",
        "--",
        "echo",
        "hello",
        "world",
    ]));
    ok_stdout(&sb.kubectl(&["run", "server", "--image=nginx", "--env=X=1"]));
    wait_for("both pods to start", TIMEOUT, || async {
        let pods = get(&sb, &["pods"]);
        pods["items"]
            .as_array()
            .is_some_and(|ps| ps.len() == 2 && ps.iter().all(|p| p["status"]["phase"] != "Pending"))
            .then_some(())
    })
    .await;
    assert_eq!(ok_stdout(&sb.kubectl(&["logs", "hello"])), "hello world\n");
    let log = ok_stdout(&sb.kubectl(&["logs", "server"]));
    assert!(log.contains("simulated") && log.contains("nginx"), "{log}");
    // Run-to-completion pods finish: the echo pod Succeeded.
    wait_for("the echo pod to succeed", TIMEOUT, || async {
        (get(&sb, &["pod", "hello"])["status"]["phase"] == "Succeeded").then_some(())
    })
    .await;
    let missing = sb.kubectl(&["logs", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_node_pods_stay_pending_and_daemonsets_schedule_nothing() {
    let sb = sandbox().await;
    ok_stdout(&sb.kubectl(&["delete", "node", "sandbox-node"]));
    ok_stdout(&sb.kubectl(&["run", "p", "--image=nginx"]));
    ok_stdout(&sb.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"ds","namespace":"default"},
            "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
            "spec":{"containers":[{"name":"c","image":"nginx"}]}}}}"#,
    ));
    wait_for("the DaemonSet's status", TIMEOUT, || async {
        let ds = get(&sb, &["ds", "ds"]);
        (ds["status"]["observedGeneration"] == 1).then_some(ds)
    })
    .await;
    let ds = get(&sb, &["ds", "ds"]);
    assert_eq!(ds["status"]["desiredNumberScheduled"], 0);
    let p = get(&sb, &["pod", "p"]);
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(p["spec"]["nodeName"].is_null());
}
