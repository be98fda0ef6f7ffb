//! `kubectl meta test` benchmark: `cargo bench --bench hooktest [-- --cases N]`.
//!
//! N recorded cases (default 200, one HelloWorld parent each) replayed by the real binary
//! against the hello-world example's hook, as
//! - a webhook (the example's Python HTTP server, started and stopped by `--hook-server`), and
//! - an exec hook (one `python3` process per case),
//!
//! each sequentially and with `-j 4`. Prints wall time (the whole command: sandbox start,
//! definitions, hook server start included) and cases per second. Goal: 200 webhook cases in
//! under 1 s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `--cases N` from the command line (cargo bench passes `--bench` too).
fn cases_arg() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--cases")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Write `n` hello-world sync cases (one parent each) into `dir`.
fn write_cases(dir: &Path, n: usize) {
    for i in 0..n {
        let name = format!("hello-{i:04}");
        let case = format!(
            "apiVersion: kubectl-meta.dev/v1
kind: HookTest
controller: hello-world-controller
controllerKind: CompositeController
hook: sync
parent: default/{name}
request:
  controller: {{}}
  parent:
    apiVersion: example.kubectl-meta.dev/v1
    kind: HelloWorld
    metadata: {{name: {name}, namespace: default, uid: uid-{i}}}
    spec: {{who: World {i}}}
  children: {{Pod.v1: {{}}}}
  related: {{}}
  finalizing: false
response:
  status: {{replicas: 0}}
  children:
  - apiVersion: v1
    kind: Pod
    metadata: {{name: {name}, labels: {{controller-uid: uid-{i}}}}}
    spec:
      restartPolicy: OnFailure
      containers:
      - name: hello
        image: busybox
        command: [echo, 'Hello, World {i}!']
"
        );
        std::fs::write(dir.join(format!("{name}.yaml")), case).expect("write case");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(label: &str, n: usize, args: &[String]) {
    let home = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("NO_COLOR", "1")
        .output()
        .expect("kubectl-meta runs");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_string();
    if !out.status.success() {
        eprintln!(
            "{label}: failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    println!(
        "{label:<28} {n} cases in {:>7.3} s  {:>8.1} cases/s  ({last})",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
}

fn main() {
    let n = cases_arg();
    let dir = tempfile::tempdir().expect("tempdir");
    write_cases(dir.path(), n);
    let cases = dir.path().display().to_string();
    let example = repo().join("examples/hello-world");
    let exec_defs = example.join("10-controller.yaml").display().to_string();
    let web_defs = example
        .join("webhook/controller.yaml")
        .display()
        .to_string();
    println!("kubectl meta test: {n} cases, hello-world hook (Python)");
    for jobs in ["1", "4"] {
        let port = free_port();
        let args: Vec<String> = [
            "test",
            &cases,
            "-f",
            &web_defs,
            "--hook-base-url",
            &format!("http://127.0.0.1:{port}"),
            "--hook-server",
            &format!(
                "python3 {} --port {port}",
                example.join("server.py").display()
            ),
            "-j",
            jobs,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        run(&format!("webhook -j {jobs}"), n, &args);
    }
    for jobs in ["1", "4"] {
        let args: Vec<String> = ["test", &cases, "-f", &exec_defs, "-j", jobs]
            .iter()
            .map(|s| s.to_string())
            .collect();
        run(&format!("exec python3 -j {jobs}"), n, &args);
    }
}
