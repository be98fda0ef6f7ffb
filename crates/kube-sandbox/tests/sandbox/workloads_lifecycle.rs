//! The lifecycle of workloads as a cluster runs it, through the real kubectl and kube-rs: one
//! Kubernetes version everywhere, `metadata.generation` per kind, graceful pod deletion seen
//! through a watch, `kubectl logs -f` that streams until the container ends.

use crate::common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{Value, json};

use crate::common::{TIMEOUT, TestSandbox, ok_stdout, wait_for};

fn get(t: &TestSandbox, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok_stdout(&t.kubectl(&a))).expect("kubectl JSON")
}

fn create(t: &TestSandbox, obj: &Value) {
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &obj.to_string()));
}

fn pod(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", "echo started && sleep 3600"]}]}})
}

async fn wait_phase(t: &TestSandbox, name: &str, phase: &str) {
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    wait_for(&format!("pod {name} to be {phase}"), TIMEOUT, || async {
        let p = pods.get(name).await.ok()?;
        (p.status?.phase.as_deref() == Some(phase)).then_some(())
    })
    .await;
}

/// Create a long-running pod whose container stops `stop` seconds after SIGTERM, and wait
/// for it to run.
async fn running_pod(t: &TestSandbox, name: &str, stop: &str) {
    let a = json!({"sandbox.kubectl-meta.io/stop-seconds": stop});
    create(t, &pod(name, a));
    wait_phase(t, name, "Running").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_kubernetes_version_in_version_node_and_openapi() {
    let t = common::start().await;
    let v: Value =
        serde_json::from_str(&ok_stdout(&t.kubectl(&["get", "--raw", "/version"]))).expect("JSON");
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("36"))
    );
    assert_eq!(v["emulationMinor"], "36");
    assert!(
        v["gitVersion"]
            .as_str()
            .is_some_and(|g| g.starts_with("v1.36.0")),
        "{v}"
    );
    let nodes = get(&t, &["nodes"]);
    assert_eq!(
        nodes["items"][0]["status"]["nodeInfo"]["kubeletVersion"],
        "v1.36.0"
    );
    let v2: Value = serde_json::from_str(&ok_stdout(&t.kubectl(&["get", "--raw", "/openapi/v2"])))
        .expect("JSON");
    assert_eq!(v2["info"]["version"], "v1.36.0");
    // And it serves the 1.36 fields (terminatingReplicas on a ReplicaSet).
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "r"}},
            "template": {"metadata": {"labels": {"a": "r"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    create(&t, &rs);
    wait_for("the ReplicaSet's status", TIMEOUT, || async {
        let r = get(&t, &["rs", "r"]);
        r["status"]["terminatingReplicas"].is_number().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_is_kept_only_where_the_kinds_strategy_keeps_it() {
    let t = common::start().await;
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h"}, "spec": {"minReplicas": 1, "maxReplicas": 3,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
    let template = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"},
        "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
    let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "pc"}, "value": 10, "description": "a"});
    let eps = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "e", "labels": {"x": "1"}}, "addressType": "IPv4", "endpoints": []});
    for o in [&hpa, &template, &pc, &eps] {
        create(&t, o);
    }
    let generation = |args: &[&str]| get(&t, args)["metadata"]["generation"].clone();
    assert_eq!(
        generation(&["hpa", "h"]),
        Value::Null,
        "no generation on an HPA in 1.36"
    );
    assert_eq!(generation(&["podtemplate", "pt"]), json!(1));
    assert_eq!(generation(&["priorityclass", "pc"]), json!(1));
    assert_eq!(generation(&["endpointslice", "e"]), json!(1));
    // A PriorityClass's generation never moves; an EndpointSlice's moves with its labels.
    ok_stdout(&t.kubectl(&[
        "patch",
        "priorityclass",
        "pc",
        "--type=merge",
        "-p",
        r#"{"description":"b"}"#,
    ]));
    assert_eq!(generation(&["priorityclass", "pc"]), json!(1));
    ok_stdout(&t.kubectl(&["label", "endpointslice", "e", "x=2", "--overwrite"]));
    assert_eq!(generation(&["endpointslice", "e"]), json!(2));
    ok_stdout(&t.kubectl(&[
        "patch",
        "hpa",
        "h",
        "--type=merge",
        "-p",
        r#"{"spec":{"maxReplicas":4}}"#,
    ]));
    assert_eq!(generation(&["hpa", "h"]), Value::Null);
}

/// A pod deleted with a grace period, seen through a watch: Terminating with its deletion
/// timestamp and grace period, its containers reported terminated, then gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_terminates_its_containers_within_the_grace_period() {
    let t = common::start().await;
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    // Stops 1 s after SIGTERM (within its 20 s grace period); the other ignores it past 1 s.
    running_pod(&t, "polite", "1").await;
    running_pod(&t, "stubborn", "3600").await;
    let events = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
            let list = pods.get(name).await.expect("pod");
            let rv = list.metadata.resource_version.clone().expect("rv");
            pods.watch(&wp, &rv).await.expect("watch").boxed()
        }
    };
    let mut polite = events("polite").await;
    let mut stubborn = events("stubborn").await;
    ok_stdout(&t.kubectl(&[
        "delete",
        "pod",
        "polite",
        "--grace-period=20",
        "--wait=false",
    ]));
    ok_stdout(&t.kubectl(&[
        "delete",
        "pod",
        "stubborn",
        "--grace-period=1",
        "--wait=false",
    ]));
    for (stream, grace, code, phase) in [
        (&mut polite, 20, 0, "Succeeded"),
        (&mut stubborn, 1, 137, "Failed"),
    ] {
        let mut seen = Vec::new();
        loop {
            let ev = tokio::time::timeout(TIMEOUT, stream.try_next())
                .await
                .expect("a watch event in time")
                .expect("watch ok")
                .expect("watch open");
            match ev {
                WatchEvent::Modified(p) => seen.push(p),
                WatchEvent::Deleted(p) => {
                    seen.push(p);
                    break;
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        let first = &seen[0];
        assert!(first.metadata.deletion_timestamp.is_some());
        assert_eq!(first.metadata.deletion_grace_period_seconds, Some(grace));
        let terminated = seen
            .iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase))
            .unwrap_or_else(|| panic!("a {phase} update before the deletion: {seen:?}"));
        let cs = &terminated
            .status
            .as_ref()
            .expect("status")
            .container_statuses;
        let state = cs.as_ref().expect("container statuses")[0]
            .state
            .clone()
            .expect("state");
        let term = state.terminated.expect("terminated state");
        assert_eq!(term.exit_code, code);
        assert_eq!(
            term.reason.as_deref(),
            Some(if code == 0 { "Completed" } else { "Error" })
        );
    }
    // --grace-period=0 --force: gone at once, never Terminating.
    running_pod(&t, "forced", "3600").await;
    let out = t.kubectl(&["delete", "pod", "forced", "--grace-period=0", "--force"]);
    ok_stdout(&out);
    assert!(
        matches!(pods.get("forced").await, Err(kube::Error::Api(s)) if s.code == 404),
        "a forced deletion removes the pod at once"
    );
}

/// A `kubectl logs -f` child whose output is collected on a thread.
struct Following {
    child: Child,
    out: std::sync::mpsc::Receiver<Vec<u8>>,
    got: Vec<u8>,
}

impl Following {
    fn start(t: &TestSandbox, pod: &str) -> Following {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(t.kubeconfig())
            .args(["logs", "-f", pod])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl runs");
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Following {
            child,
            out,
            got: Vec::new(),
        }
    }

    /// Wait until the output so far contains `text`.
    async fn until(&mut self, text: &str) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while !String::from_utf8_lossy(&self.got).contains(text) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {text:?} in time"
            );
            match self.out.try_recv() {
                Ok(b) => self.got.extend(b),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_streams_until_the_container_ends() {
    let t = common::start().await;
    running_pod(&t, "server", "0").await;
    let mut f = Following::start(&t, "server");
    f.until("started\n").await;
    // Still streaming: the container runs (it only ends when the pod is deleted).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        f.child.try_wait().expect("try_wait").is_none(),
        "logs -f returned while the container runs"
    );
    ok_stdout(&t.kubectl(&["delete", "pod", "server", "--wait=false"]));
    let status = wait_for(
        "logs -f to return once the container ended",
        TIMEOUT,
        || {
            let s = f.child.try_wait().expect("try_wait");
            async move { s }
        },
    )
    .await;
    assert!(status.success(), "kubectl logs -f exit status {status:?}");
    // A container that has already ended: logs -f prints and returns at once.
    let done = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "done",
        "annotations": {"sandbox.kubectl-meta.io/run-seconds": "0"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
            "command": ["echo", "bye"]}]}});
    create(&t, &done);
    wait_phase(&t, "done", "Succeeded").await;
    let out = ok_stdout(&t.kubectl(&["logs", "-f", "done"]));
    assert_eq!(out, "bye\n");
}

fn deployment(name: &str, image: &str, extra: Value) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}});
    if let (Some(spec), Some(more)) = (d["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(more.clone());
    }
    d
}

/// (revision, image) of every ReplicaSet of the Deployment `name`, by revision.
fn revisions(t: &TestSandbox, name: &str) -> Vec<(i64, String)> {
    let rss = get(t, &["rs", "-l", &format!("app={name}")]);
    let mut out: Vec<(i64, String)> = rss["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| {
            let rev = r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let image = r["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (rev, image)
        })
        .collect();
    out.sort();
    out
}

async fn rolled_out(t: &TestSandbox, what: &str) {
    let kc = t.kubeconfig();
    let what = what.to_string();
    let out = tokio::task::spawn_blocking(move || {
        common::kubectl(&kc, &["rollout", "status", &what, "--timeout=60s"], None)
    })
    .await
    .expect("kubectl thread");
    ok_stdout(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_history_is_trimmed_and_rollout_undo_goes_back() {
    let t = common::start().await;
    create(
        &t,
        &deployment("web", "nginx:1", json!({"revisionHistoryLimit": 1})),
    );
    rolled_out(&t, "deployment/web").await;
    for image in ["nginx:2", "nginx:3"] {
        ok_stdout(&t.kubectl(&["set", "image", "deployment/web", &format!("web={image}")]));
        rolled_out(&t, "deployment/web").await;
    }
    // revisionHistoryLimit 1: the new ReplicaSet and one old one are kept.
    wait_for(
        "the oldest ReplicaSet to be cleaned up",
        TIMEOUT,
        || async {
            let r = revisions(&t, "web");
            (r == vec![(2, "nginx:2".to_string()), (3, "nginx:3".to_string())]).then_some(())
        },
    )
    .await;
    let history = ok_stdout(&t.kubectl(&["rollout", "history", "deployment/web"]));
    let revs: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<i64>().is_ok())
        .collect();
    assert_eq!(revs, ["2", "3"], "{history}");
    let out = ok_stdout(&t.kubectl(&["rollout", "undo", "deployment/web"]));
    assert!(out.contains("rolled back"), "{out}");
    rolled_out(&t, "deployment/web").await;
    let d = get(&t, &["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    wait_for(
        "the undone revision to become revision 4",
        TIMEOUT,
        || async {
            let r = revisions(&t, "web");
            (r == vec![(3, "nginx:3".to_string()), (4, "nginx:2".to_string())]).then_some(())
        },
    )
    .await;
    assert_eq!(
        get(&t, &["deployment", "web"])["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "4"
    );
    let detail = ok_stdout(&t.kubectl(&["rollout", "history", "deployment/web", "--revision=3"]));
    assert!(detail.contains("nginx:3"), "{detail}");
    ok_stdout(&t.kubectl(&["rollout", "undo", "deployment/web", "--to-revision=3"]));
    rolled_out(&t, "deployment/web").await;
    let d = get(&t, &["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_exceeds_its_progress_deadline() {
    let t = common::start().await;
    // Its pods fit no Node, so they never run and the rollout makes no progress.
    let mut d = deployment("stuck", "nginx", json!({"progressDeadlineSeconds": 2}));
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "none-has-it"});
    create(&t, &d);
    let cond = wait_for("the progress deadline to pass", TIMEOUT, || async {
        let d = get(&t, &["deployment", "stuck"]);
        let conds = d["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conds
            .into_iter()
            .find(|c| c["type"] == "Progressing" && c["status"] == "False")
    })
    .await;
    assert_eq!(cond["reason"], "ProgressDeadlineExceeded");
    let rs = get(&t, &["rs", "-l", "app=stuck"])["items"][0]["metadata"]["name"].clone();
    assert_eq!(
        cond["message"],
        format!(
            "ReplicaSet \"{}\" has timed out progressing.",
            rs.as_str().expect("name")
        )
    );
    let out = t.kubectl(&["rollout", "status", "deployment/stuck", "--timeout=20s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exceeded its progress deadline"), "{err}");
}

fn job(name: &str, spec: Value, pod_annotations: Value) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"metadata": {"annotations": pod_annotations},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["false"]}]}}}});
    if let (Some(s), Some(more)) = (j["spec"].as_object_mut(), spec.as_object()) {
        s.extend(more.clone());
    }
    j
}

fn suspend(t: &TestSandbox, job: &str, on: bool) {
    let patch = json!({"spec": {"suspend": on}}).to_string();
    ok_stdout(&t.kubectl(&["patch", "job", job, "--type=merge", "-p", &patch]));
}

fn job_condition(t: &TestSandbox, name: &str, ty: &str) -> Option<Value> {
    let j = get(t, &["job", name]);
    j["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
        .cloned()
}

fn unix(ts: &Value) -> i64 {
    ts.as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .unwrap_or_else(|| panic!("timestamp {ts}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_job_pods_are_replaced_after_a_growing_back_off() {
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
    cfg.tunables.job_backoff = Duration::from_secs(2);
    let t = common::start_with(cfg).await;
    let annotations = json!({"sandbox.kubectl-meta.io/exit-code": "1",
        "sandbox.kubectl-meta.io/run-seconds": "0"});
    create(&t, &job("flaky", json!({"backoffLimit": 2}), annotations));
    let failed = wait_for("the Job to fail", TIMEOUT, || async {
        job_condition(&t, "flaky", "Failed")
    })
    .await;
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    let pods = get(&t, &["pods", "-l", "job-name=flaky"]);
    let mut runs: Vec<(i64, i64)> = pods["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| {
            let created = unix(&p["metadata"]["creationTimestamp"]);
            let ended =
                unix(&p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]);
            (created, ended)
        })
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 3, "backoffLimit 2: three pods");
    // 2 s after the first failure, 4 s after the second (whole-second timestamps).
    assert!(runs[1].0 - runs[0].1 >= 1, "first back-off: {runs:?}");
    assert!(
        runs[2].0 - runs[1].1 >= 3,
        "second back-off doubles: {runs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_active_deadline_fails_and_a_suspended_job_runs_nothing() {
    let t = common::start().await;
    let long = json!({"sandbox.kubectl-meta.io/run-seconds": "3600"});
    create(
        &t,
        &job("slow", json!({"activeDeadlineSeconds": 2}), long.clone()),
    );
    let failed = wait_for("the deadline to fail the Job", TIMEOUT, || async {
        job_condition(&t, "slow", "Failed")
    })
    .await;
    assert_eq!(failed["reason"], "DeadlineExceeded");
    assert_eq!(
        failed["message"],
        "Job was active longer than specified deadline"
    );
    let target = job_condition(&t, "slow", "FailureTarget").expect("FailureTarget first");
    assert_eq!(target["reason"], "DeadlineExceeded");

    create(
        &t,
        &job("later", json!({"suspend": true, "parallelism": 2}), long),
    );
    let suspended = wait_for("the Suspended condition", TIMEOUT, || async {
        job_condition(&t, "later", "Suspended")
    })
    .await;
    assert_eq!(
        (&suspended["status"], &suspended["reason"]),
        (&json!("True"), &json!("JobSuspended"))
    );
    let j = get(&t, &["job", "later"]);
    assert!(
        j["status"]["startTime"].is_null(),
        "a suspended Job has not started"
    );
    assert_eq!(
        get(&t, &["pods", "-l", "job-name=later"])["items"],
        json!([])
    );
    suspend(&t, "later", false);
    wait_for("two pods of the resumed Job", TIMEOUT, || async {
        let j = get(&t, &["job", "later"]);
        (j["status"]["active"] == 2 && j["status"]["startTime"].is_string()).then_some(())
    })
    .await;
    let resumed = job_condition(&t, "later", "Suspended").expect("condition kept");
    assert_eq!(
        (&resumed["status"], &resumed["reason"]),
        (&json!("False"), &json!("JobResumed"))
    );
    suspend(&t, "later", true);
    wait_for("the suspended Job's pods to go", TIMEOUT, || async {
        let j = get(&t, &["job", "later"]);
        let running = get(
            &t,
            &[
                "pods",
                "-l",
                "job-name=later",
                "--field-selector=status.phase=Running",
            ],
        );
        (j["status"]["active"].is_null()
            && running["items"].as_array().is_some_and(Vec::is_empty)
            && job_condition(&t, "later", "Suspended").is_some_and(|c| c["status"] == "True"))
        .then_some(())
    })
    .await;
}

/// The REVISION column of `kubectl rollout history`.
fn history(t: &TestSandbox, what: &str) -> Vec<i64> {
    let out = ok_stdout(&t.kubectl(&["rollout", "history", what]));
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn image_of(t: &TestSandbox, what: &str) -> String {
    let o = get(t, &[what]);
    o["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonsets_and_statefulsets_keep_controller_revisions_for_rollout_history_and_undo() {
    let t = common::start().await;
    let template = |app: &str| {
        json!({"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    };
    create(
        &t,
        &json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
        "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": template("ds")}}),
    );
    create(
        &t,
        &json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ss"},
        "spec": {"replicas": 1, "serviceName": "ss", "selector": {"matchLabels": {"app": "ss"}},
            "template": template("ss")}}),
    );
    for what in ["daemonset/ds", "statefulset/ss"] {
        wait_for(&format!("{what}'s first revision"), TIMEOUT, || async {
            (history(&t, what) == [1]).then_some(())
        })
        .await;
        ok_stdout(&t.kubectl(&["set", "image", what, "c=nginx:2"]));
        wait_for(&format!("{what}'s second revision"), TIMEOUT, || async {
            (history(&t, what) == [1, 2]).then_some(())
        })
        .await;
        let detail = ok_stdout(&t.kubectl(&["rollout", "history", what, "--revision=1"]));
        assert!(detail.contains("nginx:1"), "{detail}");
        let out = ok_stdout(&t.kubectl(&["rollout", "undo", what]));
        assert!(out.contains("rolled back"), "{out}");
        assert_eq!(image_of(&t, what), "nginx:1");
        // The first template is the newest revision again.
        wait_for(
            &format!("{what}'s revision 1 to become 3"),
            TIMEOUT,
            || async { (history(&t, what) == [2, 3]).then_some(()) },
        )
        .await;
    }
    let revs = get(&t, &["controllerrevisions", "-l", "app=ss"]);
    let newest = revs["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|r| r["revision"] == 3)
        .expect("revision 3")
        .clone();
    assert_eq!(
        newest["metadata"]["ownerReferences"][0]["kind"],
        "StatefulSet"
    );
    assert_eq!(newest["data"]["spec"]["template"]["$patch"], "replace");
    wait_for("the StatefulSet's updateRevision", TIMEOUT, || async {
        let ss = get(&t, &["statefulset", "ss"]);
        (ss["status"]["updateRevision"] == newest["metadata"]["name"]).then_some(())
    })
    .await;
}
