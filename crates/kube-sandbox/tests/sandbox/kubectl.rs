//! The real kubectl against the sandbox: discovery, printing, apply (client- and server-side),
//! label/annotate/patch, deletion, wait, watch, raw paths, explain, chunking and `get all`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::common::{TIMEOUT, TestSandbox, ok_stdout};

/// Arguments that keep kubectl's discovery cache private to this sandbox.
fn base_args(t: &TestSandbox) -> Vec<String> {
    vec![
        "--cache-dir".into(),
        t.dir.path().join("kube-cache").display().to_string(),
    ]
}

/// Run kubectl on a blocking thread (so the in-process server keeps running), with optional stdin.
async fn run(t: &TestSandbox, args: &[&str], stdin: Option<&str>) -> Output {
    let kubeconfig = t.kubeconfig();
    let mut all = base_args(t);
    all.extend(args.iter().map(|s| s.to_string()));
    let stdin = stdin.map(str::to_string);
    let what = args.join(" ");
    let task = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        common::kubectl(&kubeconfig, &refs, stdin.as_deref())
    });
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .unwrap_or_else(|_| panic!("kubectl {what} hung"))
        .expect("kubectl thread")
}

async fn kubectl(t: &TestSandbox, args: &[&str]) -> String {
    ok_stdout(&run(t, args, None).await)
}

async fn apply_json(t: &TestSandbox, extra: &[&str], manifest: &Value) -> String {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    ok_stdout(&run(t, &args, Some(&manifest.to_string())).await)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// The whitespace-separated words of the first line (a table header).
fn header(out: &str) -> Vec<&str> {
    out.lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

/// The row whose first column is `name`.
fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_short_names_including_an_established_crd() {
    let t = common::start().await;
    let out = kubectl(&t, &["api-resources"]).await;
    assert_eq!(
        row(&out, "configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row(&out, "deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );

    let created = apply_json(&t, &[], &widget_crd()).await;
    assert!(created.contains("widgets.example.com created"), "{created}");
    let waited = kubectl(
        &t,
        &[
            "wait",
            "--for=condition=established",
            "crd/widgets.example.com",
            "--timeout=30s",
        ],
    )
    .await;
    assert!(waited.contains("condition met"), "{waited}");
    let out = kubectl(&t, &["api-resources"]).await;
    assert_eq!(
        row(&out, "widgets"),
        ["widgets", "wdg", "example.com/v1", "true", "Widget"]
    );
    let out = kubectl(
        &t,
        &["api-resources", "--api-group=example.com", "-o", "name"],
    )
    .await;
    assert_eq!(out.trim(), "widgets.example.com");

    // The short name works for get.
    apply_json(
        &t,
        &[],
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"n": 1}}),
    )
    .await;
    let out = kubectl(&t, &["get", "wdg", "-o", "name"]).await;
    assert_eq!(out.trim(), "widget.example.com/w1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_configmaps_prints_a_table() {
    let t = common::start().await;
    apply_json(&t, &[], &cm("one", json!({"a": "1"}))).await;
    apply_json(&t, &[], &cm("three", json!({"a": "1", "b": "2", "c": "3"}))).await;
    let out = kubectl(&t, &["get", "cm"]).await;
    assert_eq!(header(&out), ["NAME", "DATA", "AGE"], "{out}");
    assert_eq!(row(&out, "one")[1], "1");
    assert_eq!(row(&out, "three")[1], "3");
    // Every namespace has the cluster's CA bundle, as on a real cluster.
    assert_eq!(row(&out, "kube-root-ca.crt")[1], "1");
    assert_eq!(out.lines().count(), 4, "{out}");
    let out = kubectl(&t, &["get", "cm", "three", "--no-headers"]).await;
    assert_eq!(row(&out, "three")[..2], ["three", "3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_pods_wide_and_wait_for_ready() {
    let t = common::start().await;
    apply_json(&t, &[], &pod("web")).await;
    let waited = kubectl(
        &t,
        &["wait", "--for=condition=Ready", "pod/web", "--timeout=30s"],
    )
    .await;
    assert!(waited.contains("pod/web condition met"), "{waited}");
    let out = kubectl(&t, &["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        header(&out),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ],
        "{out}"
    );
    let r = row(&out, "web");
    assert_eq!(r[1..4], ["1/1", "Running", "0"], "{out}");
    let ip = Api::<Pod>::namespaced(t.client.clone(), "default")
        .get("web")
        .await
        .expect("get pod")
        .status
        .and_then(|s| s.pod_ip)
        .expect("pod IP");
    assert_eq!(r[5], ip, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_client_side_twice_then_server_side() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let manifest = cm("app", json!({"k": "v1"}));
    let out = apply_json(&t, &[], &manifest).await;
    assert_eq!(out.trim(), "configmap/app created");
    let out = apply_json(&t, &[], &manifest).await;
    assert!(
        out.trim() == "configmap/app unchanged" || out.trim() == "configmap/app configured",
        "{out}"
    );
    let out = apply_json(&t, &[], &cm("app", json!({"k": "v2", "extra": "x"}))).await;
    assert_eq!(out.trim(), "configmap/app configured");
    // Client-side apply removes keys dropped from the manifest (three-way merge).
    let out = apply_json(&t, &[], &cm("app", json!({"k": "v2"}))).await;
    assert_eq!(out.trim(), "configmap/app configured");
    let got = api.get("app").await.expect("get");
    assert_eq!(
        got.data.clone().unwrap_or_default(),
        [("k".to_string(), "v2".to_string())].into()
    );
    let last = got
        .annotations()
        .get("kubectl.kubernetes.io/last-applied-configuration")
        .expect("last-applied annotation");
    assert_eq!(
        serde_json::from_str::<Value>(last).expect("JSON")["data"],
        json!({"k": "v2"})
    );

    let out = apply_json(&t, &["--server-side"], &cm("app", json!({"k": "v2"}))).await;
    assert_eq!(out.trim(), "configmap/app serverside-applied");
    let got = api.get("app").await.expect("get");
    let managers: Vec<(String, String)> = got
        .managed_fields()
        .iter()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("kubectl".to_string(), "Apply".to_string())),
        "{managers:?}"
    );
    let out = apply_json(&t, &["--server-side"], &cm("app", json!({"k": "v3"}))).await;
    assert_eq!(out.trim(), "configmap/app serverside-applied");
    assert_eq!(
        api.get("app").await.expect("get").data.unwrap_or_default()["k"],
        "v3"
    );

    // Another manager changing a field kubectl owns conflicts unless forced.
    let other = run(
        &t,
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&cm("app", json!({"k": "theirs"})).to_string()),
    )
    .await;
    assert!(!other.status.success(), "conflict expected");
    assert!(stderr(&other).contains("conflict"), "{}", stderr(&other));
    let out = apply_json(
        &t,
        &[
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
        ],
        &cm("app", json!({"k": "theirs"})),
    )
    .await;
    assert_eq!(out.trim(), "configmap/app serverside-applied");
    assert_eq!(
        api.get("app").await.expect("get").data.unwrap_or_default()["k"],
        "theirs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_takes_over_from_client_side_apply_without_conflicts() {
    // The documented upgrade path: `kubectl apply --server-side` on an object managed by
    // client-side apply changes the fields it last applied without conflicts.
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    apply_json(&t, &[], &cm("up", json!({"k": "v1", "other": "x"}))).await;
    let out = apply_json(
        &t,
        &["--server-side"],
        &cm("up", json!({"k": "v2", "other": "x"})),
    )
    .await;
    assert_eq!(out.trim(), "configmap/up serverside-applied");
    let got = api.get("up").await.expect("get");
    assert_eq!(got.data.clone().unwrap_or_default()["k"], "v2");
    let managers: Vec<String> = got
        .managed_fields()
        .iter()
        .map(|m| m.manager.clone().unwrap_or_default())
        .collect();
    assert!(
        managers.iter().any(|m| m == "kubectl")
            && !managers.iter().any(|m| m == "kubectl-client-side-apply"),
        "kubectl takes over from the client-side applier: {managers:?}"
    );
    // The last-applied annotation follows, so client-side apply keeps working afterwards.
    let last: Value = serde_json::from_str(
        got.annotations()
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .expect("annotation kept"),
    )
    .expect("JSON");
    assert_eq!(last["data"], json!({"k": "v2", "other": "x"}));
    let out = apply_json(&t, &[], &cm("up", json!({"k": "v3"}))).await;
    assert_eq!(out.trim(), "configmap/up configured");
    assert_eq!(
        api.get("up").await.expect("get").data.unwrap_or_default(),
        [("k".to_string(), "v3".to_string())].into()
    );
    // A different field manager gets no such pass.
    let other = run(
        &t,
        &[
            "apply",
            "--server-side",
            "--field-manager=someone",
            "-f",
            "-",
        ],
        Some(&cm("up", json!({"k": "theirs"})).to_string()),
    )
    .await;
    assert!(!other.status.success(), "conflict expected");
    assert!(stderr(&other).contains("conflict"), "{}", stderr(&other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_annotate_and_patch_of_every_type() {
    let t = common::start().await;
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [
                    {"name": "a", "image": "a:1"},
                    {"name": "b", "image": "b:1"}
                ]}
            }
        }
    });
    apply_json(&t, &[], &deploy).await;
    let api: Api<Deployment> = Api::namespaced(t.client.clone(), "default");

    let out = kubectl(&t, &["label", "deployment", "d", "tier=web"]).await;
    assert_eq!(out.trim(), "deployment.apps/d labeled");
    let out = kubectl(&t, &["annotate", "deployment", "d", "note=hello"]).await;
    assert_eq!(out.trim(), "deployment.apps/d annotated");
    let failed = run(&t, &["label", "deployment", "d", "tier=api"], None).await;
    assert!(!failed.status.success(), "relabel needs --overwrite");
    assert!(
        stderr(&failed).contains("already has a value"),
        "{}",
        stderr(&failed)
    );
    kubectl(&t, &["label", "deployment", "d", "tier=api", "--overwrite"]).await;

    let out = kubectl(
        &t,
        &[
            "patch",
            "deployment",
            "d",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    )
    .await;
    assert_eq!(out.trim(), "deployment.apps/d patched");
    kubectl(
        &t,
        &[
            "patch",
            "deployment",
            "d",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
        ],
    )
    .await;
    // Strategic merge: containers merge by name, so b keeps its image.
    kubectl(
        &t,
        &[
            "patch",
            "deployment",
            "d",
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:2"}]}}}}"#,
        ],
    )
    .await;

    let d = api.get("d").await.expect("get deployment");
    let labels = d.labels();
    assert_eq!(labels.get("tier").map(String::as_str), Some("api"));
    assert_eq!(labels.get("json").map(String::as_str), Some("yes"));
    assert_eq!(
        d.annotations().get("note").map(String::as_str),
        Some("hello")
    );
    let spec = d.spec.expect("spec");
    assert_eq!(spec.replicas, Some(3));
    let images: Vec<(String, Option<String>)> = spec
        .template
        .spec
        .expect("pod spec")
        .containers
        .into_iter()
        .map(|c| (c.name, c.image))
        .collect();
    assert_eq!(
        images,
        [
            ("a".to_string(), Some("a:2".to_string())),
            ("b".to_string(), Some("b:1".to_string()))
        ]
    );
    // A no-op patch is reported as such, once the rollout the template change started is over
    // (until then the deployment controller keeps writing the status between kubectl's read
    // and its patch).
    kubectl(&t, &["rollout", "status", "deployment/d", "--timeout=60s"]).await;
    let out = kubectl(
        &t,
        &[
            "patch",
            "deployment",
            "d",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    )
    .await;
    assert_eq!(out.trim(), "deployment.apps/d patched (no change)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_with_foreground_cascade() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let owned_by = |owner: &ConfigMap, fins: Value, name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "finalizers": fins,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(),
                "uid": owner.uid().expect("uid"), "blockOwnerDeletion": true}]}})
    };

    // kubectl waits until the owner is gone, which foreground deletion makes wait for the dependent.
    apply_json(&t, &[], &cm("owner", json!({}))).await;
    let owner = api.get("owner").await.expect("owner");
    apply_json(&t, &[], &owned_by(&owner, json!([]), "dep")).await;
    let out = kubectl(&t, &["delete", "cm", "owner", "--cascade=foreground"]).await;
    assert_eq!(out.trim(), r#"configmap "owner" deleted"#);
    for name in ["owner", "dep"] {
        assert!(
            matches!(api.get(name).await, Err(kube::Error::Api(s)) if s.code == 404),
            "{name} must be gone when kubectl returns"
        );
    }

    // With a held dependent, the owner shows the foregroundDeletion finalizer meanwhile.
    apply_json(&t, &[], &cm("owner2", json!({}))).await;
    let owner = api.get("owner2").await.expect("owner2");
    apply_json(
        &t,
        &[],
        &owned_by(&owner, json!(["example.com/hold"]), "held"),
    )
    .await;
    kubectl(
        &t,
        &[
            "delete",
            "cm",
            "owner2",
            "--cascade=foreground",
            "--wait=false",
        ],
    )
    .await;
    let o = api.get("owner2").await.expect("owner2 waits");
    assert!(o.metadata.deletion_timestamp.is_some());
    assert!(o.finalizers().iter().any(|f| f == "foregroundDeletion"));
    kubectl(
        &t,
        &[
            "patch",
            "cm",
            "held",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    )
    .await;
    common::wait_for("owner2 and held to be gone", TIMEOUT, || async {
        let gone =
            |r: kube::Result<ConfigMap>| matches!(r, Err(kube::Error::Api(s)) if s.code == 404);
        (gone(api.get("owner2").await) && gone(api.get("held").await)).then_some(())
    })
    .await;
}

/// A long-running `kubectl ... -w` whose stdout lines arrive on a channel; killed on drop.
struct Watching {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Watching {
    fn spawn(t: &TestSandbox, args: &[&str]) -> Watching {
        let kubeconfig: PathBuf = t.kubeconfig();
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(base_args(t))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl runs");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watching { child, lines }
    }

    /// The next line's first two columns (EVENT, NAME).
    async fn next(&mut self, what: &str) -> (String, String) {
        let line = tokio::time::timeout(TIMEOUT, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
            .unwrap_or_else(|| panic!("kubectl exited while waiting for {what}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        assert!(w.len() >= 2, "unexpected line {line:?}");
        (w[0].to_string(), w[1].to_string())
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_added_modified_deleted() {
    let t = common::start().await;
    apply_json(&t, &[], &cm("pre", json!({}))).await;
    let mut w = Watching::spawn(&t, &["get", "cm", "-w", "--output-watch-events"]);
    let ev = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(w.next("header").await, ev("EVENT", "NAME"));
    assert_eq!(
        w.next("initial ADDED kube-root-ca.crt").await,
        ev("ADDED", "kube-root-ca.crt")
    );
    assert_eq!(w.next("initial ADDED pre").await, ev("ADDED", "pre"));

    apply_json(&t, &[], &cm("live", json!({"a": "1"}))).await;
    assert_eq!(w.next("ADDED live").await, ev("ADDED", "live"));
    kubectl(&t, &["label", "cm", "live", "x=y"]).await;
    assert_eq!(w.next("MODIFIED live").await, ev("MODIFIED", "live"));
    kubectl(&t, &["delete", "cm", "live"]).await;
    assert_eq!(w.next("DELETED live").await, ev("DELETED", "live"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_raw_version_and_healthz() {
    let t = common::start().await;
    let v: Value =
        serde_json::from_str(&kubectl(&t, &["get", "--raw", "/version"]).await).expect("JSON");
    assert_eq!(v["major"], "1");
    assert!(
        v["gitVersion"]
            .as_str()
            .is_some_and(|s| s.starts_with("v1.")),
        "{v}"
    );
    assert_eq!(
        kubectl(&t, &["get", "--raw", "/healthz"]).await.trim(),
        "ok"
    );
    assert_eq!(kubectl(&t, &["get", "--raw", "/readyz"]).await.trim(), "ok");
    let out = kubectl(&t, &["version", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["serverVersion"]["major"], "1", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_finishes_even_if_unsupported() {
    let t = common::start().await;
    // `run` panics if kubectl does not finish within a minute; success or a clean error are both fine.
    let out = run(&t, &["explain", "configmaps"], None).await;
    if !out.status.success() {
        assert!(!stderr(&out).trim().is_empty(), "a failure must say why");
    }
    // The server keeps serving afterwards.
    assert_eq!(
        kubectl(&t, &["get", "--raw", "/healthz"]).await.trim(),
        "ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_with_chunk_size_returns_every_object() {
    let t = common::start().await;
    for i in 0..7 {
        apply_json(&t, &[], &cm(&format!("c{i}"), json!({}))).await;
    }
    let out = run(
        &t,
        &["get", "cm", "--chunk-size=2", "-o", "name", "-v=6"],
        None,
    )
    .await;
    let names: Vec<&str> = std::str::from_utf8(&out.stdout)
        .expect("utf8")
        .lines()
        .collect();
    let want: Vec<String> = (0..7)
        .map(|i| format!("configmap/c{i}"))
        .chain(["configmap/kube-root-ca.crt".to_string()])
        .collect();
    assert_eq!(names, want, "{}", stderr(&out));
    let log = stderr(&out);
    let pages = log
        .lines()
        .filter(|l| l.contains("/configmaps?") && l.contains("limit=2"))
        .count();
    assert_eq!(pages, 4, "8 objects in pages of 2:\n{log}");
    assert_eq!(
        log.lines().filter(|l| l.contains("continue=")).count(),
        3,
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_all_configmaps() {
    let t = common::start().await;
    for i in 0..4 {
        apply_json(&t, &[], &cm(&format!("d{i}"), json!({}))).await;
    }
    apply_json(
        &t,
        &[],
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keep"}}),
    )
    .await;
    apply_json(&t, &["-n", "keep"], &cm("kept", json!({}))).await;
    let out = kubectl(&t, &["delete", "cm", "--all"]).await;
    // kube-root-ca.crt goes too (and comes back, as on a real cluster).
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(out.contains(r#"configmap "d3" deleted"#), "{out}");
    assert!(
        out.contains(r#"configmap "kube-root-ca.crt" deleted"#),
        "{out}"
    );
    let cms = Api::<ConfigMap>::namespaced(t.client.clone(), "default");
    let left = cms.list(&ListParams::default()).await.expect("list");
    assert!(
        left.items
            .iter()
            .all(|c| c.metadata.name.as_deref() == Some("kube-root-ca.crt")),
        "{:?}",
        left.items
    );
    Api::<ConfigMap>::namespaced(t.client.clone(), "keep")
        .get("kept")
        .await
        .expect("other namespaces untouched");
    common::wait_for("kube-root-ca.crt to come back", common::TIMEOUT, || async {
        cms.get_opt("kube-root-ca.crt").await.expect("get")
    })
    .await;
    let out = run(&t, &["get", "cm", "-l", "nothing=here"], None).await;
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("No resources found in default namespace."),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_all_lists_workloads_and_services() {
    let t = common::start().await;
    apply_json(&t, &[], &pod("p1")).await;
    apply_json(
        &t,
        &[],
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s1"},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
    )
    .await;
    apply_json(
        &t,
        &[],
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
    )
    .await;
    apply_json(&t, &[], &cm("not-in-all", json!({}))).await;
    // As on a cluster, the Deployment gets a ReplicaSet and that a Pod; wait for both.
    common::wait_for("the Deployment's pod", TIMEOUT, || async {
        let out = kubectl(&t, &["get", "pods", "-l", "app=x", "-o", "name"]).await;
        (!out.trim().is_empty()).then_some(())
    })
    .await;
    let out = kubectl(&t, &["get", "all"]).await;
    for name in ["pod/p1", "service/s1", "deployment.apps/d1"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing from:\n{out}"
        );
    }
    assert!(
        !out.contains("not-in-all"),
        "configmaps are not in category all:\n{out}"
    );
    let out = kubectl(&t, &["get", "all", "-o", "name"]).await;
    // Generated names (`d1-<pod-template-hash>`, `d1-<hash>-<suffix>`) as `d1-*`.
    let mut names: Vec<String> = out
        .lines()
        .map(|n| match n.split_once("/d1-") {
            Some((kind, _)) => format!("{kind}/d1-*"),
            None => n.to_string(),
        })
        .collect();
    names.sort();
    // `service/kubernetes` is in `default` on every cluster.
    assert_eq!(
        names,
        [
            "deployment.apps/d1",
            "pod/d1-*",
            "pod/p1",
            "replicaset.apps/d1-*",
            "service/kubernetes",
            "service/s1"
        ]
    );
}

/// `kubectl create deployment` sends protobuf with every zero written (`stdin: false`,
/// `minReadySeconds: 0`) under `fieldValidation=Strict`; the sandbox accepts it as
/// kube-apiserver does, and its Deployment controller and kubelet make `rollout status` finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_deployment_then_rollout_status() {
    let t = common::start().await;
    let out = kubectl(&t, &["create", "deployment", "web", "--image=nginx:1.27"]).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = kubectl(
        &t,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    )
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let out = kubectl(
        &t,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image} {.status.readyReplicas}",
        ],
    )
    .await;
    assert_eq!(out.trim(), "nginx:1.27 1");
}
