//! Soak benchmark: `cargo bench --bench soak [-- --duration S --parents N --restart-every S
//! --down S --kill-hook-every S --edit-every-ms MS]`.
//!
//! The real `kubectl-meta dev` binary runs examples/hello-world (webhook form, its Python server
//! managed by `--hook-server`) against an in-process sandbox with a state directory, for
//! `--duration` seconds (default 600) with `--parents` parents (default 100) under a steady
//! stream of parent edits (`spec.who`, one every `--edit-every-ms`, default 500), while the
//! sandbox is stopped for `--down` seconds (default 5) and started again on the same port and
//! state every `--restart-every` seconds (default 60), and the hook server is killed (SIGKILL to
//! its group) every `--kill-hook-every` seconds (default 90).
//!
//! Prints syncs, writes, errors (failed syncs, failed writes, error events), the outage notices,
//! whether everything converged at the end (every pod greets its parent's `spec.who`) and how
//! long that took, and the resident memory of `dev` (sampled every second: peak, and at each
//! quarter of the run, to show it does not grow without bound). `dev` must still be running at
//! the end.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig, Storage};
use serde_json::{Value, json};

mod common;
use common::{ar, arg, rss_kib};

/// What `dev -o json` said, counted.
#[derive(Debug, Default)]
struct Counts {
    syncs: u64,
    failed_syncs: u64,
    writes: u64,
    failed_writes: u64,
    error_events: u64,
    unreachable: u64,
    reachable_again: u64,
    server_crashes: u64,
    hook_pids: Vec<i32>,
    last_errors: Vec<String>,
}

impl Counts {
    fn add(&mut self, v: &Value) {
        match v["event"].as_str().unwrap_or("") {
            "syncFinished" => {
                self.syncs += 1;
                if !v["error"].is_null() {
                    self.failed_syncs += 1;
                }
            }
            "action" => {
                if v["error"].is_null() {
                    self.writes += 1;
                } else {
                    self.failed_writes += 1;
                }
            }
            "error" => {
                self.error_events += 1;
                let m = v["message"].as_str().unwrap_or("");
                if m.contains("API server unreachable since") {
                    self.unreachable += 1;
                }
                self.keep(m);
            }
            "info"
                if v["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("reachable again") =>
            {
                self.reachable_again += 1;
            }
            "hookServer" => {
                if v["state"] == "ready"
                    && let Some(pid) = v["pid"].as_i64()
                {
                    self.hook_pids.push(pid as i32);
                }
            }
            "hookServerOutput" | "serverOutput" => {
                if v.to_string().contains("exited unexpectedly") {
                    self.server_crashes += 1;
                }
            }
            _ => {
                if v.to_string().contains("exited unexpectedly") {
                    self.server_crashes += 1;
                }
            }
        }
    }

    fn keep(&mut self, m: &str) {
        self.last_errors.push(m.chars().take(200).collect());
        if self.last_errors.len() > 5 {
            self.last_errors.remove(0);
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(soak());
}

async fn start_again(cfg: &SandboxConfig) -> Sandbox {
    loop {
        match Sandbox::start(cfg.clone()).await {
            Ok(sb) => return sb,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[allow(clippy::too_many_lines)]
async fn soak() {
    let duration = Duration::from_secs(arg("--duration", 600) as u64);
    let parents = arg("--parents", 100);
    let restart_every = Duration::from_secs(arg("--restart-every", 60) as u64);
    let down = Duration::from_secs(arg("--down", 5) as u64);
    let kill_every = Duration::from_secs(arg("--kill-hook-every", 90) as u64);
    let edit_every = Duration::from_millis(arg("--edit-every-ms", 500) as u64);

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cfg = SandboxConfig::ephemeral();
    cfg.storage = Storage::Dir(dir.path().join("state"));
    cfg.kubeconfig = Some(kubeconfig.clone());
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
    let mut sb = Some(Sandbox::start(cfg.clone()).await.expect("sandbox"));
    cfg.listen = sb.as_ref().expect("sandbox").addr();
    let client = kubectl_meta::k8s::client::connect(Some(&kubeconfig), None, None)
        .await
        .expect("client")
        .client;

    let hw = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello-world");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let data = dir.path().join("data");
    let mut dev = Command::new(env!("CARGO_BIN_EXE_kubectl-meta"))
        .args(["--kubeconfig"])
        .arg(&kubeconfig)
        .args(["dev", "--apply", "-f"])
        .arg(hw.join("00-crd.yaml"))
        .arg("-f")
        .arg(hw.join("webhook"))
        .args(["--hook-base-url", &format!("http://127.0.0.1:{port}")])
        .args([
            "--hook-server",
            &format!("python3 {} --port {port}", hw.join("server.py").display()),
        ])
        .args(["--no-watch", "-o", "json"])
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", &data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl-meta dev runs");
    let dev_pid = dev.id();
    let counts = Arc::new(Mutex::new(Counts::default()));
    let sink = Arc::clone(&counts);
    let stdout = dev.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && let Ok(mut c) = sink.lock()
            {
                c.add(&v);
            }
        }
    });
    let stderr_tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let keep = Arc::clone(&stderr_tail);
    let stderr = dev.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut k) = keep.lock() {
                k.push(line);
                if k.len() > 20 {
                    k.remove(0);
                }
            }
        }
    });

    // The parents, once dev applied the CRD.
    let hello = ar(
        "example.kubectl-meta.dev",
        "v1",
        "HelloWorld",
        "helloworlds",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &hello);
    while api.list(&ListParams::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..parents {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.kubectl-meta.dev/v1", "kind": "HelloWorld",
            "metadata": {"name": format!("hello-{i}")}, "spec": {"who": format!("p{i}-0")}
        }))
        .expect("parent");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create parent");
    }

    println!(
        "soak: {parents} parents, {}s, sandbox down {}s every {}s, hook server killed every {}s, one edit every {}ms",
        duration.as_secs(),
        down.as_secs(),
        restart_every.as_secs(),
        kill_every.as_secs(),
        edit_every.as_millis()
    );
    let start = Instant::now();
    let (mut next_restart, mut next_kill, mut next_edit) =
        (restart_every, kill_every, Duration::ZERO);
    let mut next_sample = Duration::ZERO;
    let (mut edits, mut edit_failures, mut restarts, mut kills) = (0u64, 0u64, 0u64, 0u64);
    let mut peak_rss = 0u64;
    let mut quarters: Vec<u64> = Vec::new();
    let mut version = vec![0u64; parents];
    let mut n = 0usize;
    while start.elapsed() < duration {
        let now = start.elapsed();
        if now >= next_sample {
            next_sample += Duration::from_secs(1);
            if let Some(r) = rss_kib(dev_pid) {
                peak_rss = peak_rss.max(r);
                if now.as_secs_f64() >= duration.as_secs_f64() * quarters.len() as f64 / 4.0 {
                    quarters.push(r);
                }
            }
        }
        if now >= next_restart {
            next_restart += restart_every;
            if let Some(s) = sb.take() {
                s.shutdown().await;
            }
            tokio::time::sleep(down).await;
            sb = Some(start_again(&cfg).await);
            restarts += 1;
        }
        if now >= next_kill {
            next_kill += kill_every;
            let pid = counts.lock().ok().and_then(|c| c.hook_pids.last().copied());
            if let Some(pid) = pid {
                // SAFETY: killpg has no memory-safety preconditions.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
                kills += 1;
            }
        }
        if now >= next_edit {
            next_edit += edit_every;
            let i = n % parents;
            n += 1;
            version[i] += 1;
            let patch = json!({"spec": {"who": format!("p{i}-{}", version[i])}});
            match api
                .patch(
                    &format!("hello-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => edits += 1,
                Err(_) => {
                    // The sandbox is down: this edit did not happen.
                    version[i] -= 1;
                    edit_failures += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if sb.is_none() {
        sb = Some(start_again(&cfg).await);
    }

    // Convergence: every pod greets its parent's last spec.who.
    let settle = Instant::now();
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar("", "v1", "Pod", "pods"));
    let mut converged = false;
    let mut behind = parents;
    while settle.elapsed() < Duration::from_secs(300) {
        let (Ok(ps), Ok(pods)) = (
            api.list(&ListParams::default()).await,
            pods.list(&ListParams::default()).await,
        ) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let greeting: std::collections::HashMap<String, String> = pods
            .items
            .iter()
            .filter_map(|p| {
                let v = serde_json::to_value(p).ok()?;
                Some((
                    p.metadata.name.clone()?,
                    v["spec"]["containers"][0]["command"].to_string(),
                ))
            })
            .collect();
        behind = ps
            .items
            .iter()
            .filter(|p| {
                let who = p.data["spec"]["who"].as_str().unwrap_or("");
                let name = p.metadata.name.clone().unwrap_or_default();
                !greeting
                    .get(&name)
                    .is_some_and(|g| g.contains(&format!("Hello, {who}!")))
            })
            .count();
        if behind == 0 {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settle_time = settle.elapsed();
    let still_running = dev.try_wait().ok().flatten().is_none();
    let final_rss = rss_kib(dev_pid).unwrap_or(0);
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(dev_pid as i32, libc::SIGINT);
    }
    let exit = dev.wait().ok();
    std::thread::sleep(Duration::from_millis(200));

    let c = counts.lock().map(|c| format!(
        "syncs {} (failed {}), writes {} (failed {}), error events {}, 'API server unreachable' notices {}, 'reachable again' notices {}, hook server crash notices {}, hook server starts {}",
        c.syncs, c.failed_syncs, c.writes, c.failed_writes, c.error_events, c.unreachable,
        c.reachable_again, c.server_crashes, c.hook_pids.len()
    )).unwrap_or_default();
    println!(
        "ran {:.0}s: {edits} edits ({edit_failures} refused while the sandbox was down), {restarts} sandbox restarts, {kills} hook server kills",
        start.elapsed().as_secs_f64()
    );
    println!("dev: {c}");
    println!(
        "final convergence: {} in {:.1}s after the last edit ({behind} parents behind)",
        if converged { "yes" } else { "NO" },
        settle_time.as_secs_f64()
    );
    println!(
        "dev memory (RSS): peak {} MiB; at each quarter {:?} MiB; at the end {} MiB",
        peak_rss / 1024,
        quarters.iter().map(|q| q / 1024).collect::<Vec<_>>(),
        final_rss / 1024
    );
    println!(
        "dev still running at the end: {still_running}; exit after SIGINT: {:?}",
        exit
    );
    if let Ok(c) = counts.lock()
        && !c.last_errors.is_empty()
    {
        println!("last error events: {:#?}", c.last_errors);
    }
    if !still_running && let Ok(t) = stderr_tail.lock() {
        println!("dev stderr:\n{}", t.join("\n"));
    }
    if let Some(s) = sb {
        s.shutdown().await;
    }
}
