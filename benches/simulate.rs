//! `kubectl meta dryrun --simulate` wall time, the binary as users run it, against an
//! in-process sandbox standing for the live cluster, with the examples' hooks in both forms:
//! exec (`python3 exec_hook.py`, a process per call) and webhook (the example's `server.py`,
//! started by the bench on a free port, `--hook-base-url`):
//! - catset: 3 replicas converged by `dev --once`, then an image change; the simulation rolls
//!   the 3 Pods one at a time (each once the one before is Ready) to convergence;
//! - hello-world: `--parents` HelloWorld parents without children; the simulation creates a
//!   Pod per parent and converges.
//!
//! For each example and hook form: the median wall time of `--runs` runs (default 3) of the
//! binary, the hook calls the simulation made, and the hook's floor measured in the same run:
//! as many calls of the same hook program with a representative request (the one the first
//! sync sends, recorded by a plain `dryrun --record`), run directly (a process per call for
//! exec, HTTP POSTs for the webhook) at the concurrency the simulation can reach (its workers,
//! `dev`'s default 16, but no more than there are parents); then the simulation's own time:
//! the wall time less the hook floor; and, from the run's own timing line, the hook calls'
//! latencies summed and divided by that concurrency, and the wall time less that (the same
//! run's account, not moved by a change of load between the run and the floor). Then where the last run's time went: the binary's timing
//! lines (`KUBECTL_META_LOG` at debug for `kubectl_meta::dryrun`: sandbox start, copy, engine
//! run with the syncs' and hook calls' summed times, end states).
//!
//! `python3` is taken from PATH, as the binary takes it: run once with the default PATH and
//! once with the real interpreter first on PATH to see what a launcher shim (pyenv) costs.
//!
//! `cargo bench --bench simulate [-- --parents N --runs R]`

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{arg, client_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

/// The engine's workers in the simulation (`dev`'s default).
const WORKERS: usize = kubectl_meta::engine::DEFAULT_WORKERS;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Run the binary with `args` against `kubeconfig`; (exit code, stdout, stderr).
fn meta(kubeconfig: &Path, home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("XDG_DATA_HOME", home)
        .env("NO_COLOR", "1")
        .env(
            "KUBECTL_META_LOG",
            "warn,kube_client=off,kubectl_meta::dryrun=debug",
        )
        .output()
        .expect("kubectl-meta runs");
    if !matches!(out.status.code(), Some(0 | 1)) {
        panic!(
            "{args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The timing lines of a run's stderr, without the log prefix.
fn timing(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.find("simulate: ").map(|i| l[i..].to_string()))
        .collect()
}

/// The value of `name=N` in the timing lines.
fn field(lines: &[String], name: &str) -> Option<usize> {
    let pat = format!("{name}=");
    lines.iter().find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(&pat))
            .and_then(|v| v.parse().ok())
    })
}

/// One hook form of an example: the definitions passed with `-f`, and for the webhook form
/// the running server.
struct Form {
    /// `exec` or `webhook`.
    name: &'static str,
    /// The `-f` argument.
    files: String,
    /// `--hook-base-url` (webhook form).
    base_url: Option<String>,
    /// The example's directory (the exec hook runs there).
    dir: PathBuf,
}

impl Form {
    /// The binary's arguments for this form, after `args`.
    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut v = args.to_vec();
        v.extend(["-f", self.files.as_str()]);
        if let Some(u) = &self.base_url {
            v.extend(["--hook-base-url", u.as_str()]);
        }
        v
    }
}

/// The example's `server.py` on a free port, stopped when dropped.
struct HookServer {
    child: std::process::Child,
    url: String,
}

impl HookServer {
    async fn start(dir: &Path) -> HookServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("python3")
            .arg(dir.join("server.py"))
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 server.py");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(format!("{url}/healthz")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "server.py never answered /healthz"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        HookServer { child, url }
    }
}

impl Drop for HookServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The request the first sync of a parent sends: a plain `dryrun --record` (one sync, the
/// exchange written as a test case), read back.
fn representative_request(kubeconfig: &Path, home: &Path, form: &Form) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().display().to_string();
    meta(kubeconfig, home, &form.args(&["dryrun", "--record", &rec]));
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .expect("record dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("sync-"))
            {
                let text = std::fs::read_to_string(&p).expect("case");
                let case: Value = serde_saphyr::from_str(&text).expect("case YAML");
                return case["request"].clone();
            }
        }
    }
    panic!("dryrun --record wrote no sync case");
}

/// The hook's floor: `n` calls of `request`, `concurrency` at a time, straight to the hook
/// (exec: `python3 exec_hook.py` in the example's directory, the request on stdin; webhook: a
/// POST to the server's `/sync`). Returns the seconds it took.
async fn hook_floor(form: &Form, request: &Value, n: usize, concurrency: usize) -> f64 {
    let body = Arc::new(serde_json::to_vec(request).expect("request"));
    let http = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (body, next, http) = (Arc::clone(&body), Arc::clone(&next), http.clone());
            let url = form.base_url.as_ref().map(|u| format!("{u}/sync"));
            let dir = form.dir.clone();
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    match &url {
                        Some(url) => {
                            let resp = http
                                .post(url)
                                .header("content-type", "application/json")
                                .body(body.as_ref().clone())
                                .send()
                                .await
                                .expect("hook call");
                            assert!(resp.status().is_success(), "{:?}", resp.status());
                            let _: Value = resp.json().await.expect("hook answer");
                        }
                        None => {
                            let mut child = tokio::process::Command::new("python3")
                                .arg("exec_hook.py")
                                .current_dir(&dir)
                                .env("KUBECTL_META_HOOK", "sync")
                                .stdin(Stdio::piped())
                                .stdout(Stdio::piped())
                                .stderr(Stdio::null())
                                .spawn()
                                .expect("python3 exec_hook.py");
                            let mut stdin = child.stdin.take().expect("stdin");
                            stdin.write_all(&body).await.expect("request");
                            drop(stdin);
                            let out = child.wait_with_output().await.expect("hook");
                            assert!(out.status.success(), "{:?}", out.status);
                            let _: Value = serde_json::from_slice(&out.stdout).expect("answer");
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("hook floor task");
    }
    start.elapsed().as_secs_f64()
}

/// The median run (by wall time) of `runs` simulations: its wall time, document and timing
/// lines (the hook calls differ from run to run: how events coalesce into syncs depends on
/// timing, so the figures printed are all the same run's).
fn time_simulation(
    kubeconfig: &Path,
    home: &Path,
    form: &Form,
    runs: usize,
) -> (Duration, Value, Vec<String>) {
    let mut all = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let args = form.args(&[
            "dryrun",
            "--simulate",
            "--simulate-timeout",
            "900",
            "-o",
            "json",
        ]);
        let (_, out, err) = meta(kubeconfig, home, &args);
        let wall = start.elapsed();
        let doc: Value = serde_json::from_str(&out).expect("JSON");
        all.push((wall, doc, timing(&err)));
    }
    all.sort_by_key(|(wall, _, _)| *wall);
    all.swap_remove(all.len() / 2)
}

/// Simulate `form` on the cluster of `kubeconfig`, measure its hook floor, print both.
async fn measure(name: &str, kubeconfig: &Path, home: &Path, form: &Form, runs: usize) {
    let (wall, doc, lines) = time_simulation(kubeconfig, home, form, runs);
    let parents = doc["parents"].as_array().map_or(0, Vec::len);
    let calls = field(&lines, "hook_calls").unwrap_or(0);
    let concurrency = WORKERS.min(parents).max(1);
    let request = representative_request(kubeconfig, home, form);
    let floor = hook_floor(form, &request, calls, concurrency).await;
    let s = &doc["summary"];
    let total = wall.as_secs_f64();
    // The same run's own account: the hook calls' latencies summed, spread over the workers
    // that could run them at once (robust to the machine's load changing between the run and
    // the floor; an upper bound on the hook's share when the workers were not all busy).
    let hook_in_run = field(&lines, "hook_ms").unwrap_or(0) as f64 / 1000.0 / concurrency as f64;
    println!(
        "{name}, {}: simulation {total:.2}s median wall; {calls} hook calls; hook floor {floor:.2}s ({calls} calls at concurrency {concurrency}, {:.1} ms each); own {:.2}s (total - floor); in the run, hook {hook_in_run:.2}s, own {:.2}s",
        form.name,
        if calls > 0 {
            floor * 1000.0 * concurrency as f64 / calls as f64
        } else {
            0.0
        },
        total - floor,
        total - hook_in_run
    );
    println!(
        "  converged {}, {} step(s); create {}, update {}, delete {} ({} replaced), parents {parents}",
        s["converged"], s["steps"], s["create"], s["update"], s["delete"], s["replace"],
    );
    for l in &lines {
        println!("    {l}");
    }
}

/// Both hook forms of the example in `dir`: exec with `exec_files`, webhook with
/// `dir/webhook/controller.yaml` served by `dir/server.py`.
async fn both_forms(
    name: &str,
    kubeconfig: &Path,
    home: &Path,
    dir: &Path,
    exec_files: &str,
    runs: usize,
) {
    let exec = Form {
        name: "exec",
        files: exec_files.to_string(),
        base_url: None,
        dir: dir.to_path_buf(),
    };
    measure(name, kubeconfig, home, &exec, runs).await;
    let server = HookServer::start(dir).await;
    let webhook = Form {
        name: "webhook",
        files: dir.join("webhook/controller.yaml").display().to_string(),
        base_url: Some(server.url.clone()),
        dir: dir.to_path_buf(),
    };
    measure(name, kubeconfig, home, &webhook, runs).await;
    drop(server);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let parents = arg("--parents", 100);
    let runs = arg("--runs", 3).max(1);
    let home = tempfile::tempdir().expect("tempdir");
    let python = Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("python3 on PATH: {python}");

    // catset: converge, then change the image.
    let sb = Sandbox::start(SandboxConfig::ephemeral())
        .await
        .expect("sandbox");
    let kubeconfig = home.path().join("catset.kubeconfig");
    std::fs::write(&kubeconfig, sb.kubeconfig_yaml()).expect("kubeconfig");
    let catset_dir = repo().join("examples/catset");
    let catset = catset_dir.display().to_string();
    meta(
        &kubeconfig,
        home.path(),
        &["dev", "--apply", "-f", &catset, "--once"],
    );
    let client = client_for(&sb).await;
    let cats: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &common::ar("example.kubectl-meta.dev", "v1", "CatSet", "catsets"),
    );
    cats.patch(
        "nginx-backend",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "replace",
                "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.28"}]))
            .expect("patch"),
        ),
    )
    .await
    .expect("image change");
    both_forms(
        "catset 3-replica rolling update",
        &kubeconfig,
        home.path(),
        &catset_dir,
        &catset,
        runs,
    )
    .await;
    sb.shutdown().await;

    // hello-world: N parents without children.
    let sb = Sandbox::start(SandboxConfig::ephemeral())
        .await
        .expect("sandbox");
    let kubeconfig = home.path().join("hello.kubeconfig");
    std::fs::write(&kubeconfig, sb.kubeconfig_yaml()).expect("kubeconfig");
    let hello = repo().join("examples/hello-world");
    let crd = hello.join("00-crd.yaml").display().to_string();
    let out = Command::new("kubectl")
        .args(["--kubeconfig"])
        .arg(&kubeconfig)
        .args(["apply", "-f", &crd])
        .output()
        .expect("kubectl");
    assert!(out.status.success(), "{out:?}");
    let client = client_for(&sb).await;
    let ar = common::ar(
        "example.kubectl-meta.dev",
        "v1",
        "HelloWorld",
        "helloworlds",
    );
    // The CRD is served once established.
    let worlds: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let deadline = Instant::now() + Duration::from_secs(30);
    while worlds.list(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "HelloWorld never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..parents {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.kubectl-meta.dev/v1", "kind": "HelloWorld",
            "metadata": {"name": format!("hello-{i}")}, "spec": {"who": format!("World {i}")}}))
        .expect("object");
        worlds
            .create(&PostParams::default(), &o)
            .await
            .expect("create");
    }
    let controller = hello.join("10-controller.yaml").display().to_string();
    both_forms(
        &format!("hello-world, {parents} parents"),
        &kubeconfig,
        home.path(),
        &hello,
        &controller,
        runs,
    )
    .await;
    sb.shutdown().await;
}
