//! Sandbox benchmark: `cargo bench --bench sandbox [-- --objects N]`.
//!
//! Runs the real `kubectl-meta sandbox` binary as a separate process (once `--ephemeral`, once
//! with `--state`) and drives it with kube-rs clients over HTTPS, printing:
//! - creates/s for 10,000 ConfigMaps with 1 client and with 8 concurrent clients;
//! - latency of listing 10,000 objects;
//! - watch delivery latency (write start -> event received) to 100 concurrent watchers;
//! - RSS of the server at 10,000 and at N (default 100,000) objects, with stored bytes, so
//!   memory per stored byte can be read off.
//!
//! Reference point on this 2-core machine: kube-apiserver + etcd creates about 425
//! ConfigMaps/s with one client and 850/s with eight.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

const PAYLOAD: usize = 256;

struct Server {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(state: bool) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-meta"));
        cmd.args([
            "sandbox",
            "--no-kubelet",
            "--listen",
            "127.0.0.1:0",
            "--write-kubeconfig",
        ])
        .arg(&kubeconfig);
        if state {
            cmd.arg("--state").arg(dir.path().join("state"));
        } else {
            cmd.arg("--ephemeral");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sandbox");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read ready line");
        assert!(
            line.contains("listening on"),
            "unexpected first line: {line}"
        );
        Server {
            child,
            kubeconfig,
            _dir: dir,
        }
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

fn cm(name: String) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name);
    c.metadata.labels = Some(BTreeMap::from([("bench".to_string(), "yes".to_string())]));
    c.data = Some(BTreeMap::from([(
        "payload".to_string(),
        "x".repeat(PAYLOAD),
    )]));
    c
}

async fn ensure_ns(c: &kube::Client, ns: &str) {
    let api: Api<Namespace> = Api::all(c.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.to_string());
    let _ = api.create(&PostParams::default(), &n).await;
}

/// Create `count` configmaps in `ns` using `clients` concurrent clients; returns creates/s.
async fn creates(kubeconfig: &Path, ns: &str, start: usize, count: usize, clients: usize) -> f64 {
    let mut cs = Vec::new();
    for _ in 0..clients {
        cs.push(client(kubeconfig).await);
    }
    ensure_ns(&cs[0], ns).await;
    let t = Instant::now();
    let per = count / clients;
    let tasks: Vec<_> = cs
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let ns = ns.to_string();
            tokio::spawn(async move {
                let api: Api<ConfigMap> = Api::namespaced(c, &ns);
                for j in 0..per {
                    api.create(&PostParams::default(), &cm(format!("cm-{}-{i}-{j}", start)))
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    (per * clients) as f64 / t.elapsed().as_secs_f64()
}

async fn list_latency(c: &kube::Client, ns: &str) -> (Duration, usize) {
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), ns);
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..5 {
        let t = Instant::now();
        n = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len();
        times.push(t.elapsed());
    }
    times.sort();
    (times[2], n)
}

/// 100 watchers, `writes` writes; returns (p50, p99, max) delivery latency.
async fn watch_latency(
    kubeconfig: &Path,
    watchers: usize,
    writes: usize,
) -> (Duration, Duration, Duration) {
    let c = client(kubeconfig).await;
    ensure_ns(&c, "bench-watch").await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "bench-watch");
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let sent: Arc<std::sync::Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let wc = client(kubeconfig).await;
        let rv = rv.clone();
        let sent = sent.clone();
        tasks.push(tokio::spawn(async move {
            let api: Api<ConfigMap> = Api::namespaced(wc, "bench-watch");
            let mut s = api
                .watch(&WatchParams::default().timeout(120), &rv)
                .await
                .expect("watch")
                .boxed();
            let mut lat = Vec::new();
            while lat.len() < writes {
                match s.try_next().await {
                    Ok(Some(WatchEvent::Added(o))) => {
                        let now = Instant::now();
                        let name = o.metadata.name.unwrap_or_default();
                        let t0 = sent.lock().expect("lock").get(&name).copied();
                        if let Some(t0) = t0 {
                            lat.push(now.saturating_duration_since(t0));
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            lat
        }));
    }
    // Let every watch connect before writing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..writes {
        let name = format!("w-{i}");
        sent.lock()
            .expect("lock")
            .insert(name.clone(), Instant::now());
        api.create(&PostParams::default(), &cm(name))
            .await
            .expect("create");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("watcher"));
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    assert_eq!(
        all.len(),
        watchers * writes,
        "every watcher saw every write"
    );
    (pct(0.5), pct(0.99), all.last().copied().unwrap_or_default())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn bench(state: bool, total: usize) {
    let mode = if state {
        "--state (SQLite WAL)"
    } else {
        "--ephemeral"
    };
    let srv = Server::start(state);
    let kc = srv.kubeconfig.clone();
    let rss0 = srv.rss_mib();
    eprintln!("[{mode}] creating 10,000 ConfigMaps with 1 client");
    let one = creates(&kc, "bench-1", 1, 10_000, 1).await;
    let rss10k = srv.rss_mib();
    eprintln!("[{mode}] creating 10,000 ConfigMaps with 8 clients");
    let eight = creates(&kc, "bench-8", 8, 10_000, 8).await;
    let c = client(&kc).await;
    eprintln!("[{mode}] listing");
    let (list, n) = list_latency(&c, "bench-1").await;
    eprintln!("[{mode}] watch fan-out");
    let (p50, p99, max) = watch_latency(&kc, 100, 100).await;
    let mut created = 20_000 + 100;
    let mut batch = 0;
    eprintln!("[{mode}] filling to {total} objects");
    // Fill in batches of whole multiples of 8 (one share per client).
    while total.saturating_sub(created) >= 8 {
        let n = (total - created).min(20_000) / 8 * 8;
        creates(&kc, &format!("bench-fill-{batch}"), 100 + batch, n, 8).await;
        created += n;
        batch += 1;
    }
    let rss_total = srv.rss_mib();
    let one_obj = serde_json::to_vec(
        &c.request::<serde_json::Value>(
            http::Request::get("/api/v1/namespaces/bench-1/configmaps/cm-1-0-0")
                .body(Vec::new())
                .expect("req"),
        )
        .await
        .expect("get"),
    )
    .map_or(0, |v| v.len());
    let stored_mib = (created * one_obj) as f64 / (1024.0 * 1024.0);
    println!("\n== sandbox {mode}");
    println!("creates/s, 1 client   (10,000 ConfigMaps): {one:>8.0}   (kube-apiserver+etcd: ~425)");
    println!(
        "creates/s, 8 clients  (10,000 ConfigMaps): {eight:>8.0}   (kube-apiserver+etcd: ~850)"
    );
    println!("list of {n} objects (median of 5):        {:>10}", ms(list));
    println!(
        "watch delivery, 100 watchers x 100 writes: p50 {}  p99 {}  max {}",
        ms(p50),
        ms(p99),
        ms(max)
    );
    println!("RSS empty:             {rss0:>8.1} MiB");
    println!("RSS at 10,000 objects: {rss10k:>8.1} MiB");
    println!(
        "RSS at {created} objects: {rss_total:>8.1} MiB  (stored JSON ~{stored_mib:.1} MiB, {one_obj} B/object; {:.2} MiB RSS per stored MiB above empty)",
        (rss_total - rss0) / stored_mib
    );
}

fn main() {
    let mut total = 100_000;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--objects") {
        total = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(total);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        bench(false, total).await;
        bench(true, total).await;
    });
}
