//! `kubectl meta run` against the sandbox: definitions from the cluster (watched), the Pod's
//! ServiceAccount as configuration, /healthz /readyz /metrics, JSON-lines logs, and high
//! availability between two `run` processes (one Lease per controller: failover after
//! `kill -9`, handover on SIGTERM).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::cli::*;
use crate::common::external::Target;
use crate::common::{TIMEOUT, TestSandbox, free_port, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;

const LEASE: &str = "kubectl-meta-compositecontroller-hello-world-controller";

/// Fast election for tests: 3 s lease, 2 s renew deadline, 0.5 s retry period.
pub(crate) const FAST: [&str; 6] = [
    "--lease-duration",
    "3",
    "--renew-deadline",
    "2",
    "--retry-period",
    "0.5",
];

/// `run` against the sandbox's kubeconfig as `identity`, serving HTTP on `port`, from the
/// hello-world example's directory (its exec hook runs from there, as from an image).
pub(crate) fn run_cmd(
    sb: &TestSandbox,
    home: &Path,
    identity: &str,
    port: u16,
    extra: &[&str],
) -> Command {
    run_in(sb, home, "hello-world", identity, port, extra)
}

/// `run` as [`run_cmd`], from the directory of `example`.
fn run_in(
    sb: &TestSandbox,
    home: &Path,
    example_dir: &str,
    identity: &str,
    port: u16,
    extra: &[&str],
) -> Command {
    let kubeconfig = kc(sb);
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.as_str(),
        "run",
        "--identity",
        identity,
        "--http-addr",
        addr.as_str(),
    ];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    let mut cmd = meta(home, &args);
    cmd.current_dir(example(example_dir));
    cmd
}

/// The hello-world CRD and sample parent, Metacontroller's CRD, and the example's
/// CompositeController as an object on the cluster.
pub(crate) async fn hello_world_on_cluster(sb: &TestSandbox) -> Api<DynamicObject> {
    example_on_cluster(sb, "hello-world", "helloworlds").await
}

/// The hello-world CRD, once served.
async fn hello_world_crd(sb: &impl Target) {
    let crd = format!("{}/00-crd.yaml", example("hello-world"));
    sb.owns(
        "customresourcedefinition",
        "helloworlds.example.kubectl-meta.dev",
    );
    ok_kubectl(sb, &["apply", "-f", &crd]);
    wait_for("helloworlds to be served", TIMEOUT, || async {
        sb.kubectl(&["get", "helloworlds"])
            .status
            .success()
            .then_some(())
    })
    .await;
}

/// The hello-world CRD (served) and its sample parent `default/hello`, no definition.
pub(crate) async fn hello_world_crd_and_sample(sb: &impl Target) {
    hello_world_crd(sb).await;
    let sample = format!("{}/20-sample.yaml", example("hello-world"));
    ok_kubectl(sb, &["apply", "-f", &sample]);
}

/// An example's CRD (serving `plural`) and sample, Metacontroller's CRD, and the example's
/// CompositeController as an object on the cluster.
async fn example_on_cluster(sb: &TestSandbox, name: &str, plural: &str) -> Api<DynamicObject> {
    let crd = format!("{}/00-crd.yaml", example(name));
    ok_kubectl(sb, &["apply", "-f", &crd]);
    wait_for(&format!("{plural} to be served"), TIMEOUT, || async {
        sb.kubectl(&["get", plural]).status.success().then_some(())
    })
    .await;
    let sample = format!("{}/20-sample.yaml", example(name));
    ok_kubectl(sb, &["apply", "-f", &sample]);
    let cc = metacontroller_api(sb, "CompositeController", "compositecontrollers").await;
    let def = format!("{}/10-controller.yaml", example(name));
    ok_kubectl(sb, &["apply", "-f", &def]);
    cc
}

pub(crate) fn ok_kubectl(sb: &impl Target, args: &[&str]) {
    let out = sb.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GET `http://127.0.0.1:port/path`: (status, body); None while nothing answers.
pub(crate) async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.ok()?))
}

async fn lease_holder(sb: &TestSandbox, ns: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(sb.client.clone(), ns);
    api.get_opt(LEASE)
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// The holders the Lease had after resourceVersion `since`, in order (`None`: released),
/// until `last` holds it.
async fn lease_holders_since(api: &Api<Lease>, since: &str, last: &str) -> Vec<Option<String>> {
    use futures::{StreamExt, TryStreamExt};
    let wp = kube::api::WatchParams::default().fields(&format!("metadata.name={LEASE}"));
    let mut stream = api
        .watch(&wp, since)
        .await
        .expect("watch the lease")
        .boxed();
    let mut holders = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while let Ok(Ok(Some(event))) = tokio::time::timeout_at(deadline, stream.try_next()).await {
        let kube::api::WatchEvent::Modified(lease) = event else {
            continue;
        };
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty());
        let done = holder.as_deref() == Some(last);
        holders.push(holder);
        if done {
            break;
        }
    }
    holders
}

async fn wait_holder(sb: &TestSandbox, ns: &str, want: &str) {
    wait_for(&format!("lease holder {want}"), TIMEOUT, || async {
        (lease_holder(sb, ns).await.as_deref() == Some(want)).then_some(())
    })
    .await;
}

/// The pods of the default namespace: name -> uid.
async fn pod_uids(sb: &TestSandbox) -> Vec<(String, String)> {
    let api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
    api.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

pub(crate) async fn wait_pod(sb: &TestSandbox) -> Vec<(String, String)> {
    wait_for("the hello-world pod", TIMEOUT, || async {
        let p = pod_uids(sb).await;
        (!p.is_empty()).then_some(p)
    })
    .await
}

/// One sample: metric name, labels, value.
pub(crate) type Sample = (String, Vec<(String, String)>, f64);

/// Parse Prometheus' text format strictly: every sample line is `name{labels} value` with a
/// `# TYPE` seen for its family, label values quoted with valid escapes, the value a float;
/// returns (name, labels, value) per sample.
pub(crate) fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut types: std::collections::BTreeMap<String, String> = Default::default();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kw, name) = (parts.next().unwrap(), parts.next().expect("a metric name"));
            if kw == "TYPE" {
                let t = parts.next().expect("a type");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                    "{line}"
                );
                assert!(
                    types.insert(name.to_string(), t.to_string()).is_none(),
                    "TYPE given twice: {line}"
                );
            } else {
                assert_eq!(kw, "HELP", "{line}");
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad metric name: {line}"
        );
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut r = r;
            loop {
                if let Some(after) = r.strip_prefix('}') {
                    r = after;
                    break;
                }
                let eq = r.find('=').unwrap_or_else(|| panic!("bad labels: {line}"));
                let key = r[..eq].to_string();
                assert!(
                    key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "bad label name: {line}"
                );
                r = r[eq + 1..]
                    .strip_prefix('"')
                    .unwrap_or_else(|| panic!("unquoted label: {line}"));
                let mut value = String::new();
                let mut chars = r.char_indices();
                let end = loop {
                    let (i, c) = chars.next().unwrap_or_else(|| panic!("open quote: {line}"));
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('\\') => value.push('\\'),
                            Some('"') => value.push('"'),
                            Some('n') => value.push('\n'),
                            other => panic!("bad escape {other:?}: {line}"),
                        },
                        '"' => break i,
                        c => value.push(c),
                    }
                };
                labels.push((key, value));
                r = &r[end + 1..];
                r = r.strip_prefix(',').unwrap_or(r);
            }
            rest = r;
        }
        let value = rest.trim();
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE for {name}: {line}");
        samples.push((name.to_string(), labels, v));
    }
    samples
}

pub(crate) fn sample(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| *v)
        .reduce(|a, b| a + b)
}

/// One replica: the cluster's definitions run (a created definition starts its controller, a
/// deleted one stops it and releases its Lease), probes and metrics answer, logs are JSON lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_follows_the_cluster_definitions_serves_probes_and_metrics() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let cc = hello_world_on_cluster(&sb).await;
    let port = free_port();
    let run = Background::start(run_cmd(&sb, home.path(), "replica-a", port, &[]));
    let _g = guard(&run);

    wait_pod(&sb).await;
    wait_holder(&sb, "default", "replica-a").await;
    let (code, _) = wait_for("/healthz", TIMEOUT, || http_get(port, "/healthz")).await;
    assert_eq!(code, 200);
    wait_for("/readyz 200", TIMEOUT, || async {
        http_get(port, "/readyz")
            .await
            .filter(|(c, _)| *c == 200)
            .map(|_| ())
    })
    .await;
    let metrics = wait_for("a counted sync", TIMEOUT, || async {
        let (_, body) = http_get(port, "/metrics").await?;
        let s = parse_prometheus(&body);
        sample(
            &s,
            "kubectl_meta_syncs_total",
            &[("controller", "hello-world-controller"), ("result", "ok")],
        )
        .filter(|v| *v >= 1.0)
        .map(|_| s)
    })
    .await;
    let hook = [
        ("controller_name", "hello-world-controller"),
        ("controller_type", "CompositeController"),
        ("url", "exec:python3 exec_hook.py"),
        ("method", "exec"),
    ];
    assert!(sample(&metrics, "metacontroller_sync_requests_total", &hook).unwrap_or(0.0) >= 1.0);
    assert!(
        sample(
            &metrics,
            "metacontroller_sync_request_duration_histogram_seconds_count",
            &hook
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    let held = [("controller", "hello-world-controller")];
    assert_eq!(
        sample(&metrics, "kubectl_meta_lease_held", &held),
        Some(1.0)
    );
    assert!(
        sample(&metrics, "kubectl_meta_writes_total", &[("verb", "create")]).unwrap_or(0.0) >= 1.0
    );
    assert!(sample(&metrics, "kubectl_meta_queue_depth", &[("state", "ready")]).is_some());
    // What the controller's caches hold: the one HelloWorld and its one Pod.
    wait_for("cached objects counted", TIMEOUT, || async {
        let (_, body) = http_get(port, "/metrics").await?;
        let s = parse_prometheus(&body);
        let cached = |resource: &str| {
            sample(
                &s,
                "kubectl_meta_cached_objects",
                &[
                    ("controller", "hello-world-controller"),
                    ("resource", resource),
                ],
            )
        };
        (cached("helloworlds.example.kubectl-meta.dev") == Some(1.0) && cached("pods") == Some(1.0))
            .then_some(())
    })
    .await;

    // The log is JSON lines: the events of dev -o json.
    let out = run.output();
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for kind in ["controllerStarted", "hookCalled", "syncFinished", "info"] {
        assert!(
            events.iter().any(|e| e["event"] == kind),
            "no {kind} event in:\n{out}"
        );
    }

    // A deleted definition stops its controller and releases its Lease.
    cc.delete("hello-world-controller", &DeleteParams::default())
        .await
        .unwrap();
    run.wait_output("stopped (no longer defined)").await;
    wait_for("the lease released", TIMEOUT, || async {
        lease_holder(&sb, "default").await.is_none().then_some(())
    })
    .await;
    // Nothing runs: the deleted Pod stays deleted.
    let before = pod_uids(&sb).await;
    ok_kubectl(&sb, &["delete", "pod", "--all"]);
    // Created again: the controller starts again and re-creates the pod.
    let def = format!("{}/10-controller.yaml", example("hello-world"));
    let after_delete = pod_uids(&sb).await;
    assert!(after_delete.is_empty(), "{after_delete:?}");
    ok_kubectl(&sb, &["apply", "-f", &def]);
    let again = wait_pod(&sb).await;
    assert_ne!(again, before);

    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
    assert!(stderr.contains("releasing the Leases"), "{stderr}");
    assert!(
        lease_holder(&sb, "default").await.is_none(),
        "released on exit"
    );
}

/// In a Pod: no kubeconfig, KUBERNETES_SERVICE_HOST/PORT and the mounted ServiceAccount
/// (token, ca.crt, namespace); the Leases go to the Pod's namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_in_a_pod_uses_the_service_account_and_its_namespace() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    hello_world_on_cluster(&sb).await;
    ok_kubectl(&sb, &["create", "namespace", "ops"]);
    // The mounted ServiceAccount, from the sandbox's kubeconfig.
    let kubeconfig: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(sb.kubeconfig()).unwrap()).unwrap();
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    let server = cluster["server"].as_str().unwrap();
    let ca = cluster["certificate-authority-data"].as_str().unwrap();
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .unwrap();
    let token = kubeconfig["users"][0]["user"]["token"].as_str().unwrap();
    let sa = tempfile::tempdir().unwrap();
    std::fs::write(sa.path().join("ca.crt"), ca).unwrap();
    std::fs::write(sa.path().join("token"), token).unwrap();
    std::fs::write(sa.path().join("namespace"), "ops\n").unwrap();
    let port = reqwest::Url::parse(server).unwrap().port().unwrap();

    let http = free_port();
    let addr = format!("127.0.0.1:{http}");
    let sa_dir = sa.path().display().to_string();
    let mut args = vec![
        "run",
        "--identity",
        "pod-1",
        "--http-addr",
        &addr,
        "--service-account-dir",
        &sa_dir,
    ];
    args.extend_from_slice(&FAST);
    let mut cmd = meta(home.path(), &args);
    cmd.current_dir(example("hello-world"))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port.to_string());
    let run = Background::start(cmd);
    let _g = guard(&run);
    run.wait_errors(&format!(
        "context in-cluster (https://127.0.0.1:{port}, namespace ops)"
    ))
    .await;
    wait_holder(&sb, "ops", "pod-1").await;
    wait_pod(&sb).await;
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");

    // Outside a Pod without a kubeconfig: a clear error, exit 2.
    let mut cmd = meta(home.path(), &["run", "--http-addr", "127.0.0.1:0"]);
    cmd.env_remove("KUBERNETES_SERVICE_HOST");
    let out = run_blocking(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
    assert!(text(&out).1.contains("kubeconfig"), "{}", text(&out).1);
}

async fn run_blocking(cmd: Command) -> std::process::Output {
    common::cli::run(cmd).await
}

/// Flags are checked before anything starts: client-go's rules on the election durations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_election_durations_and_addresses_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            vec!["run", "--lease-duration", "5", "--renew-deadline", "5"],
            "must be greater than --renew-deadline",
        ),
        (
            vec!["run", "--renew-deadline", "2", "--retry-period", "2"],
            "1.2 x --retry-period",
        ),
        (vec!["run", "--retry-period", "0"], "--retry-period must be"),
        (vec!["run", "--http-addr", "nowhere"], "--http-addr nowhere"),
        (vec!["run", "-f", "/no/such/dir"], "-f /no/such/dir"),
    ] {
        let out = run_blocking(meta(home.path(), &args)).await;
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Kills the process when the test ends, passed or not (no `run` is left behind).
pub(crate) struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
        }
    }
}

pub(crate) fn guard(b: &Background) -> KillOnDrop {
    KillOnDrop(b.child.id() as i32)
}

fn kill9(b: &Background) {
    unsafe {
        libc::kill(b.child.id() as i32, libc::SIGKILL);
    }
}

fn sigterm(b: &Background) {
    unsafe {
        libc::kill(b.child.id() as i32, libc::SIGTERM);
    }
}

/// Two replicas: one holds the Lease and syncs, the other stands by and writes nothing;
/// `kill -9` of the holder: the other takes over within the Lease duration and syncs; SIGTERM
/// of the holder: it releases the Lease and the other takes over at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_fail_over_after_kill_and_hand_over_on_sigterm() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    hello_world_on_cluster(&sb).await;
    let (pa, pb) = (free_port(), free_port());
    let a = Background::start(run_cmd(&sb, home.path(), "replica-a", pa, &[]));
    let _ga = guard(&a);
    wait_holder(&sb, "default", "replica-a").await;
    wait_pod(&sb).await;
    let mut b = Background::start(run_cmd(&sb, home.path(), "replica-b", pb, &[]));
    let _gb = guard(&b);
    b.wait_output("held by replica-a; standing by").await;
    // b is ready (the Lease is decided) but neither holds nor writes.
    wait_for("b ready", TIMEOUT, || async {
        http_get(pb, "/readyz")
            .await
            .filter(|(c, _)| *c == 200)
            .map(|_| ())
    })
    .await;
    let (_, body) = http_get(pb, "/metrics").await.unwrap();
    let s = parse_prometheus(&body);
    let ctl = [("controller", "hello-world-controller")];
    assert_eq!(sample(&s, "kubectl_meta_lease_held", &ctl), Some(0.0));
    assert_eq!(sample(&s, "kubectl_meta_writes_total", &[]), None);
    assert!(
        !b.output().contains("\"event\":\"action\""),
        "{}",
        b.output()
    );

    // kill -9 of the holder: b takes over within the Lease duration (3 s, plus a retry).
    let killed = Instant::now();
    kill9(&a);
    wait_holder(&sb, "default", "replica-b").await;
    let failover = killed.elapsed();
    b.wait_output("took lease").await;
    // b syncs: a deleted Pod is created again.
    let before = pod_uids(&sb).await;
    ok_kubectl(&sb, &["delete", "pod", "--all"]);
    wait_for("the pod re-created by b", TIMEOUT, || async {
        let now = pod_uids(&sb).await;
        (!now.is_empty() && now != before).then_some(())
    })
    .await;
    // The time is a figure, not an assertion (a loaded machine stretches it): the bound that
    // matters, that b took over without a, is shown by b holding the Lease and syncing.
    eprintln!(
        "FIGURE failover after kill -9: {:.2}s (lease duration 3 s)",
        failover.as_secs_f64()
    );

    // A third replica stands by; SIGTERM of b hands over at once (no Lease expiry).
    let pc = free_port();
    let c = Background::start(run_cmd(&sb, home.path(), "replica-c", pc, &[]));
    let _gc = guard(&c);
    c.wait_output("held by replica-b; standing by").await;
    let leases: Api<Lease> = Api::namespaced(sb.client.clone(), "default");
    let since = leases
        .get(LEASE)
        .await
        .expect("the lease")
        .metadata
        .resource_version
        .expect("a resourceVersion");
    let signalled = Instant::now();
    sigterm(&b);
    wait_holder(&sb, "default", "replica-c").await;
    let handover = signalled.elapsed();
    eprintln!("FIGURE handover on SIGTERM: {:.2}s", handover.as_secs_f64());
    // Handed over, not expired: the Lease's history since the signal shows b releasing it
    // (no holder) before c took it (b's own renewals may come first). Asserted on what the server stored, not on the clock.
    let holders = lease_holders_since(&leases, &since, "replica-c").await;
    assert_eq!(
        holders.last().cloned().flatten().as_deref(),
        Some("replica-c"),
        "{holders:?}"
    );
    assert!(
        holders.iter().any(Option::is_none),
        "b released the Lease (no holder) before c took it: {holders:?}"
    );
    let status = tokio::task::spawn_blocking(move || b.child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "b exits 0 on SIGTERM");
    c.wait_output("took lease").await;
    let _ = a;
    let (ok, stderr) = c.interrupt().await;
    assert!(ok, "{stderr}");
}

/// Every uid each pod name had, seen by a watch for the whole test: how many times each pod
/// was (re)created. The watch ends when this is dropped.
///
/// The watch must end with the test, not with its runtime: when the runtime shuts down, the
/// kube client's request buffer task is dropped and every request fails at once without
/// awaiting anything; a watcher retrying without backoff then spins on a worker thread forever
/// and the runtime's shutdown (the end of the test) waits for it. That hung this test in busy
/// runs. So the task is aborted on drop (before the sandbox and the runtime go), and retries
/// back off.
struct PodWatch {
    seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodWatch {
    fn start(sb: &TestSandbox) -> PodWatch {
        use futures::StreamExt;
        use kube::runtime::WatchStreamExt;
        let seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>> =
            Default::default();
        let api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
        let s = std::sync::Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut events = kube::runtime::watcher(api, kube::runtime::watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(e) = events.next().await {
                let o = match e {
                    Ok(kube::runtime::watcher::Event::Apply(o))
                    | Ok(kube::runtime::watcher::Event::InitApply(o)) => o,
                    _ => continue,
                };
                let (Some(n), Some(u)) = (o.metadata.name, o.metadata.uid) else {
                    continue;
                };
                s.lock().unwrap().entry(n).or_default().insert(u);
            }
        });
        PodWatch { seen, task }
    }

    /// Every uid seen so far, by pod name.
    fn uids(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn pod_template_revision(pod: &Value) -> Option<String> {
    pod["metadata"]["labels"]["rollout"]
        .as_str()
        .map(str::to_string)
}

/// `kill -9` of the holder in the middle of a rollout (catset, RollingRecreate): the standby
/// replica takes over and finishes it from the ControllerRevisions; each Pod is replaced once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_a_rollout_the_standby_finishes_it_replacing_each_pod_once() {
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    // Slow readiness: the rollout replaces one pod per second or so.
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(800));
    let sb = common::start_with(cfg).await;
    let home = tempfile::tempdir().unwrap();
    example_on_cluster(&sb, "catset", "catsets").await;
    let watch = PodWatch::start(&sb);
    let (pa, pb) = (free_port(), free_port());
    let a = Background::start(run_in(&sb, home.path(), "catset", "replica-a", pa, &[]));
    let _ga = guard(&a);
    let pod_api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
    // The pods when all 3 are Ready (through the kube client: no blocking call here).
    let ready3 = || {
        let api = pod_api.clone();
        async move {
            let items: Vec<Value> = api
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect();
            let ready = items
                .iter()
                .filter(|p| {
                    p["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .count();
            (items.len() == 3 && ready == 3).then_some(items)
        }
    };
    wait_for("3 ready pods", Duration::from_secs(60), ready3).await;
    let b = Background::start(run_in(&sb, home.path(), "catset", "replica-b", pb, &[]));
    let _gb = guard(&b);
    b.wait_output("held by replica-a; standing by").await;
    let before = watch.uids();
    assert_eq!(before.len(), 3, "{before:?}");

    // A template change: a rollout, highest ordinal first, one pod at a time.
    ok_kubectl(
        &sb,
        &[
            "patch",
            "catset",
            "nginx-backend",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"metadata":{"labels":{"rollout":"two"}}}}}"#,
        ],
    );
    // Once the first pod is replaced, kill the holder.
    wait_for("the first pod replaced", TIMEOUT, || async {
        (watch.uids().values().filter(|u| u.len() >= 2).count() >= 1).then_some(())
    })
    .await;
    let replaced_before_kill = watch.uids().values().filter(|u| u.len() >= 2).count();
    kill9(&a);
    b.wait_output("took lease").await;
    let done = wait_for(
        "every pod on the new template and ready",
        Duration::from_secs(90),
        || async {
            let items = ready3().await?;
            items
                .iter()
                .all(|p| pod_template_revision(p).as_deref() == Some("two"))
                .then_some(items)
        },
    )
    .await;
    assert_eq!(done.len(), 3);
    assert!(
        replaced_before_kill < 3,
        "the kill came mid-rollout ({replaced_before_kill} of 3 replaced)"
    );
    let seen = watch.uids();
    for (name, uids) in &seen {
        assert_eq!(uids.len(), 2, "{name} replaced exactly once: {seen:?}");
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    let (ok, stderr) = b.interrupt().await;
    assert!(ok, "{stderr}");
}

/// `deploy` renders what `run` needs from the definitions (YAML that the real kubectl accepts
/// with a server-side dry run, JSON as a List), applies it with its own field manager, and a
/// server-side dry run of the same passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_renders_applies_and_dry_runs_on_the_server() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = kc(&sb);
    let catset = example("catset");
    let out = run_blocking(meta(
        home.path(),
        &["deploy", "-f", &catset, "-n", "ctl", "-o", "json"],
    ))
    .await;
    let list: Value = serde_json::from_str(&assert_ok(&out)).unwrap();
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    let role = items
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["annotations"]["kubectl-meta.dev/controller"]
                    == "catset-controller"
        })
        .expect("the catset ClusterRole");
    let why = role["metadata"]["annotations"]["kubectl-meta.dev/rules"]
        .as_str()
        .unwrap();
    assert_eq!(why.lines().count(), role["rules"].as_array().unwrap().len());

    // YAML, applied by the real kubectl (server-side dry run) once the namespace exists.
    let out = run_blocking(meta(home.path(), &["deploy", "-f", &catset, "-n", "ctl"])).await;
    let yaml = assert_ok(&out);
    assert!(yaml.starts_with("---\n"), "{yaml}");
    ok_kubectl(&sb, &["create", "namespace", "ctl"]);
    let dry = sb.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &yaml);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );

    // --apply: server-side apply with the field manager kubectl-meta-deploy.
    let deploy_to_sandbox = |extra: &[&str]| {
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.as_str(),
            "deploy",
            "-f",
            catset.as_str(),
        ];
        args.extend_from_slice(&["-n", "ctl"]);
        args.extend_from_slice(extra);
        run_blocking(meta(home.path(), &args))
    };
    let out = deploy_to_sandbox(&["--apply"]).await;
    assert_ok(&out);
    let stderr = text(&out).1;
    assert!(
        stderr.contains("applied Deployment ctl/kubectl-meta"),
        "{stderr}"
    );
    let d = sb.kubectl(&[
        "get",
        "deployment",
        "kubectl-meta",
        "-n",
        "ctl",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let d: Value = serde_json::from_slice(&d.stdout).unwrap();
    assert!(
        d["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "kubectl-meta-deploy"),
        "{d}"
    );
    assert_eq!(d["spec"]["replicas"], 2);
    // --dry-run=server: sent, validated, nothing stored.
    let out = deploy_to_sandbox(&["--replicas", "3", "--dry-run=server"]).await;
    assert_ok(&out);
    assert!(
        text(&out).1.contains("(server dry run)"),
        "{}",
        text(&out).1
    );
    let d = sb.kubectl(&[
        "get",
        "deployment",
        "kubectl-meta",
        "-n",
        "ctl",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&d.stdout),
        "2",
        "a dry run stores nothing"
    );
}

/// An API server outage longer than the renew deadline: the holder stops syncing (it cannot
/// prove it still holds the Lease), then takes the Lease again once the server answers and
/// syncs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_outage_stops_syncing_and_the_holder_resumes_after_it() {
    use kube_sandbox::faults::Fault;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    hello_world_on_cluster(&sb).await;
    let port = free_port();
    let run = Background::start(run_cmd(&sb, home.path(), "replica-a", port, &[]));
    let _g = guard(&run);
    wait_pod(&sb).await;
    run.wait_output("took lease").await;
    // Every request fails (503) for longer than the renew deadline (2 s).
    sb.sandbox.faults().inject(Fault::on("*", "/").status(503));
    run.wait_output("not renewed within the renew deadline")
        .await;
    wait_for(
        "/readyz 503 while the lease is undecided",
        TIMEOUT,
        || async {
            http_get(port, "/readyz")
                .await
                .filter(|(c, _)| *c == 503)
                .map(|_| ())
        },
    )
    .await;
    sb.sandbox.faults().clear();
    wait_for("the lease taken again", TIMEOUT, || async {
        (run.output().matches("took lease").count() >= 2).then_some(())
    })
    .await;
    let before = pod_uids(&sb).await;
    ok_kubectl(&sb, &["delete", "pod", "--all"]);
    wait_for("the pod re-created after the outage", TIMEOUT, || async {
        let now = pod_uids(&sb).await;
        (!now.is_empty() && now != before).then_some(())
    })
    .await;
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
}

/// `dev` against a cluster where `run` holds a controller's Lease refuses (exit 5), naming the
/// replica and saying how to take the controller. The other way round, `run` stands by while a
/// `dev` loop holds the Lease and takes the controller back as soon as `dev` exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_refuses_a_controller_run_holds_and_names_the_replica() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let hello = example("hello-world");
    let crd = format!("{hello}/00-crd.yaml");
    ok_kubectl(&sb, &["apply", "-f", &crd]);
    let port = free_port();
    let run = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-a",
        port,
        &["-f", &hello],
    ));
    let _g = guard(&run);
    run.wait_output("took lease").await;
    let kubeconfig = kc(&sb);
    let out = run_blocking(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "dev",
            "-f",
            &hello,
            "--once",
            "--timeout",
            "20",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("is held by replica-a"), "{stderr}");
    assert!(stderr.contains("`kubectl meta run`"), "{stderr}");
    assert!(stderr.contains("re-run with --takeover"), "{stderr}");
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");

    // dev holds it: run stands by, and takes it back when dev exits.
    let dev = Background::start(meta(
        home.path(),
        &["--kubeconfig", &kubeconfig, "dev", "-f", &hello, "--no-tui"],
    ));
    let _gd = guard(&dev);
    wait_for("dev holding the lease", TIMEOUT, || async {
        lease_holder(&sb, "default")
            .await
            .filter(|h| h.contains(" pid "))
    })
    .await;
    let run = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-b",
        port,
        &["-f", &hello],
    ));
    let _g = guard(&run);
    run.wait_output("standing by").await;
    assert!(!run.output().contains("took lease"), "{}", run.output());
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    wait_holder(&sb, "default", "replica-b").await;
    run.wait_output("took lease").await;
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
}

/// Two controllers in `dir/defs`: hello-world, and `greeting-controller` (the same hook) on a
/// second parent type `Greeting`; the CRDs and one parent of each applied.
async fn two_controllers(sb: &TestSandbox, dir: &Path) -> (String, String) {
    let hook = format!("{}/exec_hook.py", example("hello-world"));
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    let controller = |name: &str, plural: &str| {
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: {name}}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: {plural}}}
  childResources: [{{apiVersion: v1, resource: pods, updateStrategy: {{method: Recreate}}}}]
  hooks:
    sync: {{exec: {{command: [python3, {hook}]}}}}
"
        )
    };
    let hello = defs.join("hello.yaml");
    std::fs::write(&hello, controller("hello-world-controller", "helloworlds")).unwrap();
    std::fs::write(
        defs.join("greeting.yaml"),
        controller("greeting-controller", "greetings"),
    )
    .unwrap();
    let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.example.kubectl-meta.dev}
spec:
  group: example.kubectl-meta.dev
  scope: Namespaced
  names: {plural: greetings, singular: greeting, kind: Greeting}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";
    let crd_file = dir.join("greetings-crd.yaml");
    std::fs::write(&crd_file, crd).unwrap();
    ok_kubectl(
        sb,
        &[
            "apply",
            "-f",
            &format!("{}/00-crd.yaml", example("hello-world")),
        ],
    );
    ok_kubectl(sb, &["apply", "-f", &crd_file.display().to_string()]);
    for plural in ["helloworlds", "greetings"] {
        wait_for(&format!("{plural} to be served"), TIMEOUT, || async {
            sb.kubectl(&["get", plural]).status.success().then_some(())
        })
        .await;
    }
    ok_kubectl(
        sb,
        &[
            "apply",
            "-f",
            &format!("{}/20-sample.yaml", example("hello-world")),
        ],
    );
    let greet = dir.join("greet.yaml");
    std::fs::write(
        &greet,
        "apiVersion: example.kubectl-meta.dev/v1\nkind: Greeting\nmetadata: {name: greet, namespace: default}\nspec: {who: you}\n",
    )
    .unwrap();
    ok_kubectl(sb, &["apply", "-f", &greet.display().to_string()]);
    (defs.display().to_string(), hello.display().to_string())
}

/// The holder of a controller's Lease in `default`.
async fn holder_of(sb: &TestSandbox, controller: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(sb.client.clone(), "default");
    api.get_opt(&format!("kubectl-meta-compositecontroller-{controller}"))
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// `run`'s writes for `controller`, from its /metrics.
async fn run_writes(port: u16, controller: &str) -> f64 {
    let (_, body) = http_get(port, "/metrics").await.expect("/metrics answers");
    sample(
        &parse_prometheus(&body),
        "kubectl_meta_writes_total",
        &[("controller", controller)],
    )
    .unwrap_or(0.0)
}

/// Delete pod `name` and wait until a new one of that name exists.
async fn recreated(sb: &TestSandbox, name: &str) {
    let before = pod_uids(sb).await;
    let old = before
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, u)| u.clone());
    ok_kubectl(sb, &["delete", "pod", name, "--wait=false"]);
    wait_for(&format!("pod {name} re-created"), TIMEOUT, || async {
        pod_uids(sb)
            .await
            .into_iter()
            .any(|(n, u)| n == name && Some(&u) != old.as_ref())
            .then_some(())
    })
    .await;
}

/// `dev --takeover` of one of the two controllers `run` holds: `run` finishes and yields just
/// that one (no write from `run` for it while `dev` holds it, the other keeps syncing), takes
/// it back when `dev` exits, and within the Lease duration after `kill -9` of `dev`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_takeover_of_one_controller_run_yields_it_and_takes_it_back() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (defs, hello_def) = two_controllers(&sb, dir.path()).await;
    let port = free_port();
    let run = Background::start(run_cmd(&sb, home.path(), "replica-a", port, &["-f", &defs]));
    let _g = guard(&run);
    for c in ["hello-world-controller", "greeting-controller"] {
        wait_for(&format!("replica-a holding {c}"), TIMEOUT, || async {
            (holder_of(&sb, c).await.as_deref() == Some("replica-a")).then_some(())
        })
        .await;
    }
    wait_for("both pods", TIMEOUT, || async {
        let names: Vec<String> = pod_uids(&sb).await.into_iter().map(|(n, _)| n).collect();
        (names.contains(&"hello".to_string()) && names.contains(&"greet".to_string())).then_some(())
    })
    .await;

    // Without --takeover: refused, naming the replica and saying how to take it.
    let kubeconfig = kc(&sb);
    let dev_args = |extra: &[&str]| {
        let mut a = vec![
            "--kubeconfig",
            kubeconfig.as_str(),
            "dev",
            "-f",
            hello_def.as_str(),
            "--no-tui",
            "-o",
            "json",
        ];
        a.extend_from_slice(extra);
        meta(home.path(), &a.iter().map(|s| &**s).collect::<Vec<_>>())
    };
    let out = run_blocking(dev_args(&["--once", "--timeout", "20"])).await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("is held by replica-a"), "{stderr}");
    assert!(stderr.contains("re-run with --takeover"), "{stderr}");

    // --takeover: run yields hello-world-controller only.
    let dev = Background::start(dev_args(&["--takeover"]));
    let _gd = guard(&dev);
    wait_for("dev holding hello-world-controller", TIMEOUT, || async {
        holder_of(&sb, "hello-world-controller")
            .await
            .filter(|h| h.contains(" pid "))
    })
    .await;
    run.wait_output(
        "yielded lease default/kubectl-meta-compositecontroller-hello-world-controller",
    )
    .await;
    dev.wait_errors("took over lease default/kubectl-meta-compositecontroller-hello-world-controller from replica-a")
        .await;
    dev.wait_output("\"takenOver\"").await;
    let handover: Value = dev
        .output()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "takenOver")
        .unwrap();
    assert_eq!(handover["controller"], "hello-world-controller");
    assert_eq!(handover["from"], "replica-a");
    assert!(
        handover["lease"]
            .as_str()
            .is_some_and(|l| l.ends_with("hello-world-controller")),
        "{handover}"
    );
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/dev-events.schema.json")).unwrap(),
    )
    .unwrap();
    common::schema::validate(&schema, &schema, &handover, "$").expect("a valid takenOver event");
    assert_eq!(
        holder_of(&sb, "greeting-controller").await.as_deref(),
        Some("replica-a")
    );

    // While dev holds it: run writes nothing for it, and keeps syncing the other.
    let (hello_before, greet_before) = (
        run_writes(port, "hello-world-controller").await,
        run_writes(port, "greeting-controller").await,
    );
    let run_log_before = run.output().len();
    recreated(&sb, "hello").await;
    recreated(&sb, "greet").await;
    wait_for("run re-creating greet", TIMEOUT, || async {
        (run_writes(port, "greeting-controller").await > greet_before).then_some(())
    })
    .await;
    dev.wait_output("\"event\":\"action\"").await;
    assert_eq!(
        run_writes(port, "hello-world-controller").await,
        hello_before,
        "run wrote for the controller dev holds"
    );
    let run_log = run.output();
    for line in run_log[run_log_before..].lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        assert!(
            !(e["event"] == "action" && e["controller"] == "hello-world-controller"),
            "run acted for the controller dev holds: {line}"
        );
    }

    // dev exits: run takes the controller back and syncs it again.
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    wait_for(
        "replica-a holding hello-world-controller again",
        TIMEOUT,
        || async {
            (holder_of(&sb, "hello-world-controller").await.as_deref() == Some("replica-a"))
                .then_some(())
        },
    )
    .await;
    let hello_back = run_writes(port, "hello-world-controller").await;
    recreated(&sb, "hello").await;
    wait_for("run re-creating hello", TIMEOUT, || async {
        (run_writes(port, "hello-world-controller").await > hello_back).then_some(())
    })
    .await;

    // kill -9 of dev: run takes it back once dev's Lease (15 s) lapses.
    let dev = Background::start(dev_args(&["--takeover"]));
    let _gd2 = guard(&dev);
    wait_for("dev holding hello-world-controller", TIMEOUT, || async {
        holder_of(&sb, "hello-world-controller")
            .await
            .filter(|h| h.contains(" pid "))
    })
    .await;
    dev.wait_output("\"takenOver\"").await;
    let killed = Instant::now();
    kill9(&dev);
    wait_for(
        "replica-a holding hello-world-controller after kill -9 of dev",
        Duration::from_secs(45),
        || async {
            (holder_of(&sb, "hello-world-controller").await.as_deref() == Some("replica-a"))
                .then_some(())
        },
    )
    .await;
    let back = killed.elapsed();
    eprintln!(
        "FIGURE run took the controller back {:.2}s after kill -9 of dev (dev's lease: 15 s)",
        back.as_secs_f64()
    );
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
}

/// What `deploy -f DIR -n NS` renders for the ServiceAccount to work (JSON): the RBAC objects,
/// and the CRD it needs (ControllerRevisions, for rollouts).
async fn rendered_rbac(home: &Path, dirs: &[&str], ns: &str) -> Vec<Value> {
    let mut args = vec!["deploy"];
    for d in dirs {
        args.extend_from_slice(&["-f", d]);
    }
    args.extend_from_slice(&["-n", ns, "-o", "json"]);
    let out = run_blocking(meta(home, &args)).await;
    let list: Value = serde_json::from_str(&assert_ok(&out)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| {
            [
                "Namespace",
                "CustomResourceDefinition",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
            ]
            .contains(&o["kind"].as_str().unwrap_or_default())
        })
        .cloned()
        .collect()
}

fn kubectl_apply_json(sb: &TestSandbox, objects: &[Value]) {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], &list.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kubeconfig for the sandbox holding a token of ServiceAccount `ns/sa`
/// (`kubectl create token`, a TokenRequest, as a Pod's mounted token).
fn service_account_kubeconfig(sb: &TestSandbox, dir: &Path, ns: &str, sa: &str) -> String {
    let out = sb.kubectl(&["create", "token", sa, "-n", ns, "--duration", "1h"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let kc = dir.join(format!("{sa}.kubeconfig"));
    std::fs::copy(sb.kubeconfig(), &kc).unwrap();
    let kcs = kc.display().to_string();
    for args in [
        vec![
            "config".to_string(),
            "set-credentials".into(),
            sa.into(),
            format!("--token={token}"),
        ],
        vec![
            "config".into(),
            "set-context".into(),
            "--current".into(),
            format!("--user={sa}"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::kubectl(&kc, &args, None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    kcs
}

/// `run` as the ServiceAccount of `kubeconfig`, from the directory of `example`, Leases in
/// `lease_ns`.
fn run_as(
    home: &Path,
    kubeconfig: &str,
    example_dir: &str,
    identity: &str,
    port: u16,
    lease_ns: &str,
) -> Command {
    let addr = format!("127.0.0.1:{port}");
    let dir = example(example_dir);
    let mut args = vec![
        "--kubeconfig",
        kubeconfig,
        "run",
        "-f",
        dir.as_str(),
        "--identity",
        identity,
        "--http-addr",
        addr.as_str(),
        "--lease-namespace",
        lease_ns,
    ];
    args.extend_from_slice(&FAST);
    let mut cmd = meta(home, &args);
    cmd.current_dir(&dir);
    cmd
}

/// Least privilege, end to end: the RBAC objects `deploy` renders applied to the sandbox (RBAC
/// on, 403s as kube-apiserver), `run` with a token of that ServiceAccount: hello-world and
/// catset (with a rollout) converge and nothing is forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_the_rendered_service_account_converges_with_no_403() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for ex in ["hello-world", "catset"] {
        ok_kubectl(
            &sb,
            &["apply", "-f", &format!("{}/00-crd.yaml", example(ex))],
        );
    }
    for plural in ["helloworlds", "catsets"] {
        wait_for(&format!("{plural} to be served"), TIMEOUT, || async {
            sb.kubectl(&["get", plural]).status.success().then_some(())
        })
        .await;
    }
    for ex in ["hello-world", "catset"] {
        ok_kubectl(
            &sb,
            &["apply", "-f", &format!("{}/20-sample.yaml", example(ex))],
        );
    }
    let rbac = rendered_rbac(
        home.path(),
        &[&example("hello-world"), &example("catset")],
        "ctl",
    )
    .await;
    kubectl_apply_json(&sb, &rbac);
    let kc = service_account_kubeconfig(&sb, dir.path(), "ctl", "kubectl-meta");
    // Not an admin: the token's user may not read Secrets.
    let out = common::kubectl(Path::new(&kc), &["get", "secrets", "-A"], None);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let hello = Background::start(run_as(
        home.path(),
        &kc,
        "hello-world",
        "sa-hello",
        free_port(),
        "ctl",
    ));
    let _gh = guard(&hello);
    let catset = Background::start(run_as(
        home.path(),
        &kc,
        "catset",
        "sa-catset",
        free_port(),
        "ctl",
    ));
    let _gc = guard(&catset);
    let pod_api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
    let catset_pods = |template: Option<&'static str>| {
        let api = pod_api.clone();
        async move {
            let items: Vec<Value> = api
                .list(&ListParams::default().labels("app=nginx"))
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect();
            let ready = items.iter().all(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            });
            let on_template = template.is_none_or(|t| {
                items
                    .iter()
                    .all(|p| pod_template_revision(p).as_deref() == Some(t))
            });
            (items.len() == 3 && ready && on_template).then_some(())
        }
    };
    wait_for("the hello pod", TIMEOUT, || async {
        pod_uids(&sb)
            .await
            .iter()
            .any(|(n, _)| n == "hello")
            .then_some(())
    })
    .await;
    let converged = tokio::time::timeout(
        Duration::from_secs(60),
        wait_for("3 ready catset pods", Duration::from_secs(60), || {
            catset_pods(None)
        }),
    )
    .await;
    assert!(
        converged.is_ok(),
        "catset did not converge:\n{}\n{}",
        catset.output(),
        catset.errors()
    );
    ok_kubectl(
        &sb,
        &[
            "patch",
            "catset",
            "nginx-backend",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"metadata":{"labels":{"rollout":"two"}}}}}"#,
        ],
    );
    wait_for("the rollout done", Duration::from_secs(90), || {
        catset_pods(Some("two"))
    })
    .await;
    for (name, b) in [("hello", hello), ("catset", catset)] {
        let stdout = b.output();
        let (ok, stderr) = b.interrupt().await;
        assert!(ok, "{name}: {stderr}");
        for text in [&stdout, &stderr] {
            assert!(
                // (not a bare "403": timestamps and uids contain it)
                !text.contains("forbidden")
                    && !text.contains("(403 ")
                    && !text.contains("code: 403"),
                "{name}:\n{text}"
            );
        }
    }
}

/// Each rule `deploy` renders for hello-world (its controller's ClusterRole and the Leases
/// Role) is needed: with the rule dropped, `run` as the ServiceAccount is refused exactly what
/// the rule allows (the API server's 403 names the verb and resource).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_of_the_rendered_role_is_needed() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hello = example("hello-world");
    hello_world_crd(&sb).await;
    let rbac = rendered_rbac(home.path(), &[&hello], "ctl").await;
    kubectl_apply_json(&sb, &rbac);
    let kc = service_account_kubeconfig(&sb, dir.path(), "ctl", "kubectl-meta");
    let roles: Vec<Value> = rbac
        .iter()
        .filter(|o| {
            (o["kind"] == "ClusterRole"
                && o["metadata"]["name"] == "kubectl-meta:ctl:hello-world-controller")
                || (o["kind"] == "Role" && o["metadata"]["name"] == "kubectl-meta-leases")
        })
        .cloned()
        .collect();
    assert_eq!(roles.len(), 2);
    let mut checked = 0;
    for role in &roles {
        let rules = role["rules"].as_array().unwrap().clone();
        for (i, rule) in rules.iter().enumerate() {
            // The role without rule i; a fresh parent (its status must be written) and no pod.
            let mut without = role.clone();
            let mut fewer = rules.clone();
            fewer.remove(i);
            without["rules"] = Value::Array(fewer);
            kubectl_apply_json(&sb, &[without]);
            ok_kubectl(&sb, &["delete", "helloworld", "--all", "--wait=false"]);
            ok_kubectl(&sb, &["delete", "pod", "--all", "--wait=false"]);
            wait_for("no parent left", TIMEOUT, || async {
                let out = sb.kubectl(&["get", "helloworlds", "-o", "name"]);
                out.stdout.is_empty().then_some(())
            })
            .await;
            ok_kubectl(&sb, &["apply", "-f", &format!("{hello}/20-sample.yaml")]);

            let resources: Vec<&str> = rule["resources"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let run = Background::start(run_as(
                home.path(),
                &kc,
                "hello-world",
                &format!("rule-{checked}"),
                free_port(),
                "ctl",
            ));
            let _g = guard(&run);
            let refused = wait_for(
                &format!("a 403 on {resources:?} without rule {rule}"),
                TIMEOUT,
                || async {
                    let all = format!("{}\n{}", run.output(), run.errors());
                    all.lines()
                        .find(|l| {
                            l.contains("forbidden")
                                && resources.iter().any(|r| {
                                    l.contains(&format!("resource \\\"{r}\\\""))
                                        || l.contains(&format!("resource \"{r}\""))
                                })
                        })
                        .map(str::to_string)
                },
            )
            .await;
            eprintln!("without {resources:?}: {refused}");
            let (ok, stderr) = run.interrupt().await;
            assert!(ok, "{stderr}");
            kubectl_apply_json(&sb, std::slice::from_ref(role));
            checked += 1;
        }
    }
    assert_eq!(checked, 4, "3 rules for hello-world, 1 for the Leases");
}

/// A controller whose webhook's Secret does not exist when `run` starts is not skipped: `run`
/// takes its Lease, says what it waits for, and starts it once the Secret is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_for_a_missing_webhook_secret_and_starts_when_it_appears() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    ok_kubectl(
        &sb,
        &[
            "apply",
            "-f",
            &format!("{}/00-crd.yaml", example("hello-world")),
        ],
    );
    std::fs::write(
        dir.path().join("secured.yaml"),
        "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: secured}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}
  childResources: [{apiVersion: v1, resource: configmaps}]
  endpointConfigs:
  - host: 127.0.0.1:9
    authorization:
      type: Bearer
      secretRef: {name: hook-token, namespace: default, key: token}
  hooks:
    sync:
      webhook: {url: 'http://127.0.0.1:9/sync'}
",
    )
    .unwrap();
    let defs = dir.path().display().to_string();
    let run = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-a",
        free_port(),
        &["-f", &defs],
    ));
    let _g = guard(&run);
    run.wait_output("not started: waiting for Secret default/hook-token")
        .await;
    wait_for("replica-a holding secured", TIMEOUT, || async {
        (holder_of(&sb, "secured").await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    assert!(
        !run.output().contains("\"event\":\"controllerStarted\""),
        "{}",
        run.output()
    );
    ok_kubectl(
        &sb,
        &[
            "create",
            "secret",
            "generic",
            "hook-token",
            "-n",
            "default",
            "--from-literal=token=t0k",
        ],
    );
    run.wait_output("\"event\":\"controllerStarted\"").await;
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
}

/// `deploy --related`: a customize hook's related resources become read rules of that
/// controller's ClusterRole; a malformed value, an unknown controller and a controller without
/// a customize hook are usage errors (exit 2) naming what is wrong, before anything is printed.
#[test]
fn deploy_related_adds_read_rules_and_bad_values_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    let propagation = example("configmap-propagation");
    let hello = example("hello-world");
    // Without --related: a note names the flag.
    let out = meta(home.path(), &["deploy", "-f", &propagation])
        .output()
        .unwrap();
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--related configmap-propagation-controller"),
        "{stderr}"
    );

    let out = meta(
        home.path(),
        &[
            "deploy",
            "-f",
            &propagation,
            "-o",
            "json",
            "--related",
            "configmap-propagation-controller=secrets",
        ],
    )
    .output()
    .unwrap();
    let list: Value = serde_json::from_str(&assert_ok(&out)).unwrap();
    let role = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["name"]
                    == "kubectl-meta:kubectl-meta:configmap-propagation-controller"
        })
        .expect("the controller's ClusterRole");
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == serde_json::json!(["secrets"])
                && r["verbs"] == serde_json::json!(["get", "list", "watch"])),
        "{role}"
    );
    // --related given: no note about the customize hook (the CRD and sample left out are).
    assert!(!String::from_utf8_lossy(&out.stderr).contains("has a customize hook"));

    for (args, says) in [
        (
            vec!["-f", propagation.as_str(), "--related", "secrets"],
            "expected CONTROLLER=RESOURCE[.GROUP]",
        ),
        (
            vec!["-f", propagation.as_str(), "--related", "nope=secrets"],
            "no controller nope among the definitions (configmap-propagation-controller)",
        ),
        (
            vec![
                "-f",
                hello.as_str(),
                "--related",
                "hello-world-controller=secrets",
            ],
            "has no customize hook",
        ),
    ] {
        let mut all = vec!["deploy"];
        all.extend(args);
        let out = meta(home.path(), &all).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        assert!(out.stdout.is_empty(), "nothing printed: {all:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{all:?}: {stderr}");
    }
}

/// As `deploy` runs it: the definitions mounted in one directory (a ConfigMap), the exec hooks
/// in the image's own directory, named by `KUBECTL_META_HOOK_DIR` (`--hook-dir`, set by the
/// exec Dockerfile `kubectl meta init` generates). The hook's relative command resolves there,
/// not next to the definition, and the controller converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_resolves_exec_hooks_in_the_hook_dir_not_next_to_mounted_definitions() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    // The CRD and the sample only: the definition comes from the "mounted" file below.
    hello_world_crd_and_sample(&sb).await;
    let mounted = tempfile::tempdir().unwrap();
    std::fs::copy(
        format!("{}/10-controller.yaml", example("hello-world")),
        mounted.path().join("controller.yaml"),
    )
    .unwrap();
    let def = mounted.path().join("controller.yaml").display().to_string();
    let port = free_port();
    let mut cmd = run_in(
        &sb,
        home.path(),
        "hello-world",
        "pod-1",
        port,
        &["-f", &def],
    );
    cmd.current_dir(home.path())
        .env("KUBECTL_META_HOOK_DIR", example("hello-world"));
    let run = Background::start(cmd);
    let _g = guard(&run);
    wait_pod(&sb).await;
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
    assert!(
        !stderr.contains("No such file") && !stderr.contains("can't open file"),
        "{stderr}"
    );
}

/// `run` records what its controllers did: GET /debug/flight returns the versioned recording,
/// within its bound, with the hello-world sync's trigger, hook call (request and answer) and
/// write; `--flight-recorder-size 0` turns it off (404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_its_flight_recording_on_debug_flight() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    hello_world_on_cluster(&sb).await;
    let port = free_port();
    let run = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-a",
        port,
        &["--flight-recorder-size", "200000"],
    ));
    let _g = guard(&run);
    wait_pod(&sb).await;
    let rec: Value = wait_for("a recorded create", TIMEOUT, || async {
        let (code, body) = http_get(port, "/debug/flight").await?;
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("/debug/flight is JSON");
        v["events"]
            .as_array()?
            .iter()
            .any(|e| e["event"]["event"] == "action" && e["event"]["verb"] == "create")
            .then_some(v)
    })
    .await;
    assert_eq!(rec["apiVersion"], "flight.kubectl-meta.io/v1");
    assert_eq!(rec["kind"], "FlightRecording");
    assert_eq!(rec["limitBytes"], 200_000);
    assert!(
        rec["bytes"].as_u64().unwrap() <= 200_000,
        "{}",
        rec["bytes"]
    );
    let events: Vec<&Value> = rec["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"])
        .collect();
    let hook = events
        .iter()
        .find(|e| e["event"] == "hookCalled" && e["controller"] == "hello-world-controller")
        .expect("a recorded hook call");
    assert_eq!(hook["request"]["parent"]["metadata"]["name"], "hello");
    assert_eq!(hook["response"]["children"][0]["kind"], "Pod");
    assert!(
        events.iter().any(|e| e["event"] == "syncStarted"
            && e["triggers"].as_array().is_some_and(|t| !t.is_empty())),
        "{events:?}"
    );
    drop(_g);

    let port = free_port();
    let run = Background::start(run_cmd(
        &sb,
        home.path(),
        "replica-b",
        port,
        &["--flight-recorder-size", "0"],
    ));
    let _g = guard(&run);
    let (code, body) = wait_for("/debug/flight", TIMEOUT, || http_get(port, "/debug/flight")).await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("--flight-recorder-size 0"), "{body}");
}
