//! Memory benchmark: `cargo bench --bench memory [-- --counts 2500,5000,10000,20000]`.
//!
//! The real `kubectl-meta dev` binary runs a CompositeController whose child resource is
//! ConfigMaps (no parents: nothing is synced, the informer just caches every ConfigMap) against
//! an in-process sandbox holding N small ConfigMaps (three labels, three data keys), for each N
//! of `--counts`. Once the controller started (its caches synced) and `dev`'s resident memory
//! stops growing, its RSS is read; `dev` is then stopped (SIGTERM to its pid) and the next N
//! created. Prints RSS per N and the slope (least squares): the memory each cached object
//! costs, the figure that matters at scale (the intercept is the binary, runtime, buffers).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

mod common;
use common::rss_kib;

/// `--counts a,b,c` (default 2,500, 5,000, 10,000, 20,000).
fn counts() -> Vec<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--counts")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2500, 5000, 10_000, 20_000])
}

/// Create ConfigMaps `from..to` in `default`, 16 at a time.
async fn create_configmaps(client: &kube::Client, from: usize, to: usize) {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i:06}"),
                        "labels": {"app": "memory-bench", "tier": format!("t{}", i % 4),
                                   "index": i.to_string()}},
                    "data": {"index": i.to_string(), "owner": "memory-bench",
                             "payload": format!("value-{i:06}-abcdefghijklmnopqrstuvwxyz")}
                }))
                .expect("configmap");
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create configmap");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// Run `dev` on `controller`, wait until its controller started and its RSS is steady; returns
/// the RSS in KiB and the seconds to start.
fn dev_rss(
    kubeconfig: &std::path::Path,
    controller: &std::path::Path,
    home: &std::path::Path,
) -> (u64, f64) {
    let start = Instant::now();
    let mut dev = Command::new(env!("CARGO_BIN_EXE_kubectl-meta"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["dev", "-f"])
        .arg(controller)
        .args(["--no-watch", "-o", "json"])
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl-meta dev runs");
    let pid = dev.id();
    let stdout = dev.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("\"controllerStarted\"") => break,
            Some(_) => {}
            None => panic!("dev ended before its controller started"),
        }
    }
    let started = start.elapsed().as_secs_f64();
    // Keep reading its output so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    // Steady: three samples 300 ms apart within 1% of each other (at most 20 s).
    let mut samples: Vec<u64> = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        samples.push(rss_kib(pid).unwrap_or(0));
        let last = &samples[samples.len().saturating_sub(3)..];
        let (lo, hi) = (
            last.iter().min().copied().unwrap_or(0),
            last.iter().max().copied().unwrap_or(0),
        );
        if (last.len() == 3 && hi <= lo + lo / 100) || Instant::now() > until {
            break;
        }
    }
    let rss = samples.last().copied().unwrap_or(0);
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = dev.wait();
    (rss, started)
}

#[tokio::main]
async fn main() {
    let counts = counts();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cfg = SandboxConfig::ephemeral();
    cfg.kubeconfig = Some(kubeconfig.clone());
    cfg.tunables.kubelet_delay = None;
    let sb = Sandbox::start(cfg).await.expect("sandbox");
    let client = common::client_for(&sb).await;
    common::install_crd(&client, "Mem", "mems").await;
    let controller = dir.path().join("controller.yaml");
    std::fs::write(
        &controller,
        serde_json::to_string(&json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": "memory"},
            "spec": {
                "parentResource": {"apiVersion": "bench.kubectl-meta.dev/v1", "resource": "mems"},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/sync"}}}
            }
        }))
        .expect("json"),
    )
    .expect("controller file");

    let mut made = 0;
    let mut points = Vec::new();
    for &n in &counts {
        create_configmaps(&client, made, n).await;
        made = made.max(n);
        let (rss, started) = dev_rss(&kubeconfig, &controller, dir.path());
        println!(
            "{n} cached ConfigMaps: dev RSS {:.1} MiB ({:.2} KiB per object, intercept included); controller started after {started:.2}s",
            rss as f64 / 1024.0,
            rss as f64 / n as f64
        );
        points.push((n as f64, rss as f64 * 1024.0));
    }
    if points.len() >= 2 {
        let k = points.len() as f64;
        let (sx, sy) = points
            .iter()
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (mx, my) = (sx / k, sy / k);
        let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
            (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
        });
        let slope = num / den;
        println!(
            "RSS slope: {:.2} KB per cached object (least squares over {counts:?}); intercept {:.1} MiB",
            slope / 1000.0,
            (my - slope * mx) / 1024.0 / 1024.0
        );
    }
    sb.shutdown().await;
}
