//! `kubectl meta dryrun --simulate` wall time, the binary as users run it, against an
//! in-process sandbox standing for the live cluster:
//! - catset: 3 replicas converged by `dev --once`, then an image change; the simulation rolls
//!   the 3 Pods one at a time (each once the one before is Ready) to convergence;
//! - hello-world: `--parents` HelloWorld parents without children; the simulation creates a
//!   Pod per parent and converges.
//!
//! Prints the median wall time of `--runs` runs (default 3) and the steps each took, then where
//! the last run's time went: the binary's timing lines (`KUBECTL_META_LOG` at debug for
//! `kubectl_meta::dryrun`: sandbox start, copy, engine run with the syncs' and hook calls'
//! summed times, end states).
//!
//! `cargo bench --bench simulate [-- --parents N --runs R]`

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{arg, client_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

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

/// Median wall time of `runs` simulations, the last run's document and timing lines.
fn time_simulation(
    kubeconfig: &Path,
    home: &Path,
    files: &str,
    runs: usize,
) -> (Duration, Value, Vec<String>) {
    let mut walls = Vec::new();
    let mut doc = Value::Null;
    let mut lines = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let (_, out, err) = meta(
            kubeconfig,
            home,
            &[
                "dryrun",
                "--simulate",
                "--simulate-timeout",
                "900",
                "-o",
                "json",
                "-f",
                files,
            ],
        );
        walls.push(start.elapsed());
        doc = serde_json::from_str(&out).expect("JSON");
        lines = timing(&err);
    }
    walls.sort();
    (walls[walls.len() / 2], doc, lines)
}

fn report(name: &str, wall: Duration, doc: &Value, lines: &[String]) {
    let s = &doc["summary"];
    println!(
        "{name}: {:.2}s median wall; converged {}, {} step(s); create {}, update {}, delete {} ({} replaced), parents {}",
        wall.as_secs_f64(),
        s["converged"],
        s["steps"],
        s["create"],
        s["update"],
        s["delete"],
        s["replace"],
        doc["parents"].as_array().map_or(0, Vec::len)
    );
    for l in lines {
        println!("  {l}");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let parents = arg("--parents", 100);
    let runs = arg("--runs", 3).max(1);
    let home = tempfile::tempdir().expect("tempdir");

    // catset: converge, then change the image.
    let sb = Sandbox::start(SandboxConfig::ephemeral())
        .await
        .expect("sandbox");
    let kubeconfig = home.path().join("catset.kubeconfig");
    std::fs::write(&kubeconfig, sb.kubeconfig_yaml()).expect("kubeconfig");
    let catset = repo().join("examples/catset").display().to_string();
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
    let (wall, doc, lines) = time_simulation(&kubeconfig, home.path(), &catset, runs);
    report("catset 3-replica rolling update", wall, &doc, &lines);
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
    let (wall, doc, lines) = time_simulation(&kubeconfig, home.path(), &controller, runs);
    report(
        &format!("hello-world, {parents} parents"),
        wall,
        &doc,
        &lines,
    );
    sb.shutdown().await;
}
