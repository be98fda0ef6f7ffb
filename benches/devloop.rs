//! Dev-loop benchmark: `cargo bench --bench devloop [-- --parents N --rounds R]`.
//!
//! Save-to-children-updated latency: the time from writing a hook's file to every parent's
//! child showing the new logic, for N parents (default 100), with
//! - an exec hook (a Python script run once per call), and
//! - a managed Python HTTP server (restarted on save, readiness-gated).
//!
//! Runs the dev loop in-process (the same [`DevLoop`] `kubectl meta dev` runs) against an
//! in-process sandbox, file watching with the default 100 ms debounce. Prints each round and
//! the median.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use kubectl_meta::devloop::{DevLoop, DevLoopConfig};
use kubectl_meta::engine::Engine;
use kubectl_meta::engine::events::EventBus;
use kubectl_meta::engine::{EngineContext, EngineOptions};
use kubectl_meta::hooks::server::{Readiness, ServerConfig};
use kubectl_meta::spec::{self, Source};
use serde_json::{Value, json};

mod common;
use common::{ar, arg, client_for};

/// The hook logic, shared by both forms: one ConfigMap per parent with data.version.
const LOGIC: &str = r#"
VERSION = "v0"

def sync(req):
    name = req["parent"]["metadata"]["name"]
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name + "-cm"}, "data": {"version": VERSION}}]}
"#;

const EXEC: &str = r#"
import json, sys
sys.dont_write_bytecode = True
import logic
json.dump(logic.sync(json.load(sys.stdin)), sys.stdout)
"#;

async fn setup(client: &kube::Client, parents: usize) {
    let wa = common::install_crd(client, "Widget", "widgets").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &wa);
    for i in 0..parents {
        let p: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "bench.kubectl-meta.dev/v1", "kind": "Widget",
            "metadata": {"name": format!("w{i:04}")}
        }))
        .expect("parent");
        api.create(&PostParams::default(), &p)
            .await
            .expect("create parent");
    }
}

/// How many children carry `version`.
async fn at_version(client: &kube::Client, version: &str) -> usize {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ar("", "v1", "ConfigMap", "configmaps"),
    );
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .filter(|o| o.data["data"]["version"] == Value::String(version.into()))
        .count()
}

async fn wait_all(client: &kube::Client, version: &str, want: usize, start: Instant) -> Duration {
    loop {
        if at_version(client, version).await >= want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "children did not reach {version} within 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn set_version(dir: &Path, v: &str) {
    std::fs::write(
        dir.join("logic.py"),
        LOGIC.replace("VERSION = \"v0\"", &format!("VERSION = \"{v}\"")),
    )
    .expect("write logic.py");
}

async fn run_case(label: &str, parents: usize, rounds: usize, server: bool) {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let sb = Sandbox::start(cfg).await.expect("sandbox");
    let client = client_for(&sb).await;
    setup(&client, parents).await;
    let dir = tempfile::tempdir().expect("tempdir");
    set_version(dir.path(), "v0");
    std::fs::write(dir.path().join("exec_hook.py"), EXEC).expect("write");
    std::fs::write(dir.path().join("server.py"), common::PY_SERVER).expect("write");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let base = format!("http://127.0.0.1:{port}");
    let hook = if server {
        json!({"webhook": {"url": format!("{base}/sync")}})
    } else {
        json!({"exec": {"command": ["python3", "exec_hook.py"],
            "workingDir": dir.path().display().to_string()}})
    };
    let def = spec::parse_controller(
        &json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": "bench"},
            "spec": {
                "parentResource": {"apiVersion": "bench.kubectl-meta.dev/v1", "resource": "widgets"},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps",
                    "updateStrategy": {"method": "InPlace"}}],
                "generateSelector": true,
                "hooks": {"sync": hook}
            }
        }),
        Source::cluster("compositecontroller", "bench"),
    )
    .expect("definition");
    let ctx = Arc::new(
        EngineContext::new(client.clone(), EventBus::new(), EngineOptions::default())
            .expect("context"),
    );
    let mut server_cfg = None;
    if server {
        let mut c = ServerConfig::new(
            format!("python3 server.py {port}"),
            Readiness::Tcp(format!("127.0.0.1:{port}")),
        );
        c.working_dir = Some(dir.path().to_path_buf());
        server_cfg = Some(c);
    }
    let cfg = DevLoopConfig {
        files: Vec::new(),
        watch: vec![dir.path().to_path_buf()],
        debounce: Duration::from_millis(100),
        server: server_cfg,
        server_base_url: Some(base),
        watch_files: true,
        recursive: false,
        selector: None,
        exclude: Vec::new(),
        builds: Vec::new(),
    };
    let mut dev = DevLoop::start(Engine::new(ctx), vec![def], cfg)
        .await
        .expect("dev loop");
    let t0 = Instant::now();
    let initial = wait_all(&client, "v0", parents, t0).await;
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        dev.run_until(rx, async {
            let _ = stop_rx.await;
        })
        .await;
        dev
    });
    let mut times = Vec::new();
    for round in 1..=rounds {
        let v = format!("v{round}");
        let start = Instant::now();
        set_version(dir.path(), &v);
        let t = wait_all(&client, &v, parents, start).await;
        println!(
            "{label}: round {round}: save -> all {parents} children updated in {:.0} ms",
            t.as_secs_f64() * 1000.0
        );
        times.push(t);
        // Let the loop settle before the next save.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    times.sort();
    println!(
        "{label}: {parents} parents: initial convergence {:.0} ms; save -> children updated: median {:.0} ms, min {:.0} ms, max {:.0} ms ({rounds} rounds)",
        initial.as_secs_f64() * 1000.0,
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0,
    );
    let _ = stop_tx.send(());
    let dev = task.await.expect("join");
    dev.shutdown().await;
    sb.shutdown().await;
}

#[tokio::main]
async fn main() {
    let parents = arg("--parents", 100);
    let rounds = arg("--rounds", 3).max(1);
    run_case("exec hook", parents, rounds, false).await;
    run_case("managed server", parents, rounds, true).await;
}
