//! Sharded throughput (issue 39): `cargo bench --bench shard [-- --parents N --workers W
//! --latency-ms L --max-replicas R]`.
//!
//! One CompositeController (a Widget parent, one ConfigMap child) run by 1, 2, then 3 real
//! `kubectl-meta run --sharded` processes against an in-process sandbox, each with a fixed
//! worker count (default 2); the hook a threaded Python webhook server answering after 20 ms
//! (the shared [`common::PY_SERVER`]). For each replica count: once the ring formed and the
//! moves' syncs settled, every parent is touched at once (an annotation, 32 requests in
//! flight) and the time until each was synced again (the replicas' `kubectl_meta_syncs_total`
//! summed) gives syncs per second. Prints each figure, the speed-ups over one replica, each
//! replica's cached objects, and the load average.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

mod common;
use common::{arg, client_for};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");
const CONTROLLER: &str = "widgets";
/// 3 s Lease duration, 2 s renew deadline, 0.25 s retry period.
const FAST_LEASES: &str = "--lease-duration 3 --renew-deadline 2 --retry-period 0.25";

/// The hook: one ConfigMap per parent, after `LATENCY` seconds.
const LOGIC: &str = r#"
import time
LATENCY = 0.02

def sync(req):
    time.sleep(LATENCY)
    name = req["parent"]["metadata"]["name"]
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name + "-cm"}, "data": {"who": name}}]}
"#;

/// A process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    l.local_addr().expect("addr").port()
}

/// `GET /metrics` of a replica (plain HTTP/1.0), `None` while it does not answer.
fn metrics(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// The value of the sample `name{...}` whose labels include every `want` pair.
fn sample(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .find(|l| {
            want.iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn metric_sum(ports: &[u16], name: &str, want: &[(&str, &str)]) -> f64 {
    ports
        .iter()
        .filter_map(|p| metrics(*p))
        .filter_map(|m| sample(&m, name, want))
        .sum()
}

fn syncs(ports: &[u16]) -> f64 {
    metric_sum(
        ports,
        "kubectl_meta_syncs_total",
        &[("controller", CONTROLLER), ("result", "ok")],
    )
}

/// Wait until `f` holds, polling every 100 ms; panics after `limit` naming `what`.
async fn wait(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn replica(
    home: &Path,
    kubeconfig: &Path,
    def: &Path,
    id: usize,
    port: u16,
    workers: usize,
) -> Proc {
    let child = Command::new(BIN)
        .args([
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "run",
            "--sharded",
            "--identity",
            &format!("replica-{id}"),
            "--http-addr",
            &format!("127.0.0.1:{port}"),
            "--workers",
            &workers.to_string(),
            "-f",
            &def.display().to_string(),
        ])
        // Fast Leases, as the proof test's (tests/cli/shard.rs).
        .args(FAST_LEASES.split(' '))
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl-meta run starts");
    Proc(child)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let parents = arg("--parents", 1200);
    let workers = arg("--workers", 2);
    let latency_ms = arg("--latency-ms", 20);
    let max_replicas = arg("--max-replicas", 3);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let sb = Sandbox::start(cfg).await.expect("sandbox");
    let client = client_for(&sb).await;
    let wa = common::install_crd(&client, "Widget", "widgets").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &wa);
    let names: Vec<String> = (0..parents).map(|i| format!("w{i:04}")).collect();
    futures::stream::iter(names.clone())
        .map(|name| {
            let api = api.clone();
            async move {
                let p: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "bench.kubectl-meta.dev/v1", "kind": "Widget",
                    "metadata": {"name": name}
                }))
                .expect("parent");
                api.create(&PostParams::default(), &p)
                    .await
                    .expect("create parent");
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sb.kubeconfig_yaml()).expect("kubeconfig");
    std::fs::write(
        dir.path().join("logic.py"),
        LOGIC.replace(
            "LATENCY = 0.02",
            &format!("LATENCY = {}", latency_ms as f64 / 1000.0),
        ),
    )
    .expect("logic.py");
    std::fs::write(dir.path().join("server.py"), common::PY_SERVER).expect("server.py");
    let hook_port = free_port();
    let _hook = Proc(
        Command::new("python3")
            .arg("server.py")
            .arg(hook_port.to_string())
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs"),
    );
    wait("the hook server listens", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", hook_port)).is_ok()
    })
    .await;
    let def = dir.path().join("controller.yaml");
    std::fs::write(
        &def,
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata:\n  name: {CONTROLLER}\nspec:\n  generateSelector: true\n  parentResource:\n    apiVersion: bench.kubectl-meta.dev/v1\n    resource: widgets\n  childResources:\n  - apiVersion: v1\n    resource: configmaps\n  hooks:\n    sync:\n      webhook:\n        url: http://127.0.0.1:{hook_port}/sync\n"
        ),
    )
    .expect("controller.yaml");

    println!(
        "shard throughput: {parents} parents, hook latency {latency_ms} ms, {workers} workers per replica, load average before {}",
        load_average()
    );
    let mut figures: Vec<f64> = Vec::new();
    let mut running: Vec<(Proc, u16)> = Vec::new();
    let limit = Duration::from_secs(600);
    for replicas in 1..=max_replicas {
        while running.len() < replicas {
            let port = free_port();
            let p = replica(dir.path(), &kubeconfig, &def, running.len(), port, workers);
            running.push((p, port));
        }
        let ports: Vec<u16> = running.iter().map(|r| r.1).collect();
        wait("the ring formed on every replica", limit, || {
            ports.iter().all(|p| {
                metrics(*p).and_then(|m| {
                    sample(
                        &m,
                        "kubectl_meta_shard_members",
                        &[("controller", CONTROLLER)],
                    )
                }) == Some(replicas as f64)
            })
        })
        .await;
        // Converged (one ConfigMap per parent) and settled (no sync for 2 s).
        let cms: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "default",
            &common::ar("", "v1", "ConfigMap", "configmaps"),
        );
        let start = Instant::now();
        loop {
            let n = cms
                .list(&Default::default())
                .await
                .map(|l| {
                    l.items
                        .iter()
                        .filter(|c| {
                            c.metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.ends_with("-cm"))
                        })
                        .count()
                })
                .unwrap_or(0);
            if n >= parents {
                break;
            }
            assert!(start.elapsed() < limit, "{n} of {parents} children");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut last = -1.0;
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = syncs(&ports);
            if now == last {
                break;
            }
            last = now;
        }
        let before = syncs(&ports);
        let load = load_average();
        let t0 = Instant::now();
        let patch = json!({"metadata": {"annotations": {"round": format!("r{replicas}")}}});
        futures::stream::iter(names.clone())
            .map(|name| {
                let api = api.clone();
                let patch = patch.clone();
                async move {
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("annotate a parent");
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
        let want = before + parents as f64;
        wait("every parent synced", limit, || syncs(&ports) >= want).await;
        let secs = t0.elapsed().as_secs_f64();
        let rate = parents as f64 / secs;
        let cached: Vec<String> = ports
            .iter()
            .map(|p| {
                let m = metrics(*p).unwrap_or_default();
                let c = |r: &str| {
                    sample(
                        &m,
                        "kubectl_meta_cached_objects",
                        &[("controller", CONTROLLER), ("resource", r)],
                    )
                    .unwrap_or(-1.0)
                };
                format!(
                    "{}+{}",
                    c("widgets.bench.kubectl-meta.dev"),
                    c("configmaps")
                )
            })
            .collect();
        println!(
            "{replicas} replica(s): {parents} syncs in {secs:.2}s = {rate:.1}/s (cached parents+children per replica: {}; load average at start {load})",
            cached.join(", ")
        );
        figures.push(rate);
    }
    for (i, f) in figures.iter().enumerate().skip(1) {
        println!("speed-up at {} replicas: {:.2}x", i + 1, f / figures[0]);
    }
    println!("load average after {}", load_average());
    drop(running);
    sb.shutdown().await;
}
