//! Helpers for tests that run the kubectl-meta binary: a private HOME, blocking runs, a
//! background dev loop whose output is collected, and sandbox look-ups.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::engine::core_ar;
use super::external::Target;
use super::{TIMEOUT, TestSandbox, wait_for};

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

/// The binary with a private HOME (nothing touches the user's files).
pub fn meta(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run to completion on a blocking thread (the sandbox keeps serving meanwhile).
pub async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("kubectl-meta runs"))
        .await
        .expect("join")
}

pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn assert_ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "kubectl-meta failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

pub fn assert_fails(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        !out.status.success(),
        "kubectl-meta should have failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stderr
}

/// Write into `dir` the hello-world CRD and sample, the Python program `script` as
/// `hook.py`, and a CompositeController `name` whose sync hook runs it (exec).
pub fn exec_hook_controller(dir: &Path, name: &str, script: &str) {
    for f in ["00-crd.yaml", "20-sample.yaml"] {
        std::fs::copy(repo().join("examples/hello-world").join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("hook.py"), script).unwrap();
    std::fs::write(
        dir.join("10-controller.yaml"),
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: {name}}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}}
  childResources: [{{apiVersion: v1, resource: pods}}]
  hooks:
    sync: {{exec: {{command: [python3, hook.py]}}}}
"
        ),
    )
    .unwrap();
}

pub fn kc(sb: &impl Target) -> String {
    sb.kubeconfig().display().to_string()
}

pub fn ar(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub async fn get(
    sb: &TestSandbox,
    ar: &ApiResource,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(sb.client.clone(), ns, ar),
        None => Api::all_with(sb.client.clone(), ar),
    };
    api.get_opt(name)
        .await
        .expect("get")
        .map(|o| serde_json::to_value(o).expect("json"))
}

pub async fn names(sb: &impl Target, ar: &ApiResource, ns: &str) -> Vec<String> {
    let api: Api<DynamicObject> = Api::namespaced_with(sb.client(), ns, ar);
    let mut v: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    v.sort();
    v
}

pub fn pods() -> ApiResource {
    core_ar("Pod", "pods")
}

pub async fn global_rv(sb: &TestSandbox) -> u64 {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(sb.client.clone());
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|r| r.parse().ok())
        .expect("resourceVersion")
}

/// Wait until `text` contains `what` (panics with the text so far after [`TIMEOUT`]).
async fn wait_text(text: &Arc<std::sync::Mutex<String>>, what: &str) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !text.lock().unwrap().contains(what) {
        if tokio::time::Instant::now() > deadline {
            panic!(
                "timed out after {TIMEOUT:?} waiting for {what:?} in:\n{}",
                text.lock().unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A dev loop that keeps running until signalled.
pub struct Background {
    /// The process.
    pub child: std::process::Child,
    /// Its stdout so far.
    pub stdout: std::sync::Arc<std::sync::Mutex<String>>,
    /// Its stderr so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Collect the lines of `pipe` into `sink` on a thread.
fn collect_lines(
    pipe: impl std::io::Read + Send + 'static,
    sink: std::sync::Arc<std::sync::Mutex<String>>,
) {
    use std::io::{BufRead, BufReader};
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
}

impl Background {
    pub fn start(mut cmd: Command) -> Background {
        let mut child = cmd.spawn().expect("kubectl-meta runs");
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        collect_lines(child.stdout.take().expect("stdout"), Arc::clone(&stdout));
        collect_lines(child.stderr.take().expect("stderr"), Arc::clone(&stderr));
        Background {
            child,
            stdout,
            stderr,
        }
    }

    /// Everything printed on stderr so far.
    pub fn errors(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until stderr contains `what` (panics with the output so far after [`TIMEOUT`]).
    pub async fn wait_errors(&self, what: &str) {
        wait_text(&self.stderr, what).await
    }

    /// Send SIGINT (without waiting for anything).
    pub fn sigint(&self) {
        let pid = self.child.id() as i32;
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
    }

    /// Everything printed on stdout so far.
    pub fn output(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Wait until stdout contains `what` (panics with the output so far after [`TIMEOUT`]).
    pub async fn wait_output(&self, what: &str) {
        wait_text(&self.stdout, what).await
    }

    /// SIGINT, then wait for the exit; returns (success, stderr).
    pub async fn interrupt(self) -> (bool, String) {
        let (status, stderr) = self.interrupt_status().await;
        (status.success(), stderr)
    }

    /// SIGINT, then wait for the exit; returns (exit status, stderr).
    pub async fn interrupt_status(mut self) -> (std::process::ExitStatus, String) {
        // SAFETY-free: kill(1) from procps would do the same; libc keeps it in-process.
        self.sigint();
        let stderr = Arc::clone(&self.stderr);
        tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + TIMEOUT;
            loop {
                if let Some(st) = self.child.try_wait().expect("wait") {
                    // Let the reader thread take the last lines.
                    let until = std::time::Instant::now() + Duration::from_secs(2);
                    while Arc::strong_count(&stderr) > 2 && std::time::Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let err = stderr.lock().unwrap().clone();
                    return (st, err);
                }
                if std::time::Instant::now() > deadline {
                    let _ = self.child.kill();
                    panic!("kubectl-meta did not exit within {TIMEOUT:?} of SIGINT");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .await
        .expect("join")
    }
}

/// `kubectl-meta --kubeconfig SB dryrun --color never ARGS...`: exit code, stdout, stderr.
pub async fn dryrun(sb: &TestSandbox, home: &Path, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = kc(sb);
    let mut all = vec![
        "--kubeconfig",
        kubeconfig.as_str(),
        "dryrun",
        "--color",
        "never",
    ];
    all.extend_from_slice(args);
    let out = run(meta(home, &all)).await;
    let (o, e) = text(&out);
    (out.status.code().unwrap_or(-1), o, e)
}

/// The CRDs, controller, sample parent and exec hook of a controller whose child asks for a
/// field its schema prunes, as files in `dir`.
pub fn write_pruning_controller(dir: &std::path::Path) {
    let crd = |plural: &str, kind: &str, more: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.hot.kubectl-meta.dev}}
spec:
  group: hot.kubectl-meta.dev
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {more}
",
            singular = kind.to_lowercase()
        )
    };
    let crds = [
        crd("gadgets", "Gadget", "{type: object, x-kubernetes-preserve-unknown-fields: true}"),
        crd(
            "widgets",
            "Widget",
            "{type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}",
        ),
    ]
    .join("---\n");
    let files = [
        ("00-crds.yaml", crds.as_str()),
        (
            "10-controller.yaml",
            r#"apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: gadget-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: hot.kubectl-meta.dev/v1, resource: gadgets}
  childResources:
  - apiVersion: hot.kubectl-meta.dev/v1
    resource: widgets
    updateStrategy: {method: InPlace}
  hooks:
    sync:
      exec:
        command: ["python3", "hook.py"]
"#,
        ),
        (
            "20-sample.yaml",
            "apiVersion: hot.kubectl-meta.dev/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {}\n",
        ),
        (
            "hook.py",
            r#"import json, sys
req = json.load(sys.stdin)
name = req["parent"]["metadata"]["name"]
json.dump({"children": [{"apiVersion": "hot.kubectl-meta.dev/v1", "kind": "Widget",
    "metadata": {"name": name}, "spec": {"size": 1, "unknownField": "x"}}]}, sys.stdout)
"#,
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
}

/// Install Metacontroller's CRD for `kind` (`plural`.metacontroller.k8s.io, cluster-scoped, any
/// fields) and return its API once it is served.
pub async fn metacontroller_api(sb: &TestSandbox, kind: &str, plural: &str) -> Api<DynamicObject> {
    let crd_ar = ar(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.metacontroller.k8s.io"),
            "annotations": {"api-approved.kubernetes.io": "unapproved, request not yet submitted"}},
        "spec": {"group": "metacontroller.k8s.io", "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(sb.client.clone(), &crd_ar)
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let res = ApiResource {
        group: "metacontroller.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "metacontroller.k8s.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: Api<DynamicObject> = Api::all_with(sb.client.clone(), &res);
    wait_for(&format!("{plural} to be served"), TIMEOUT, || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    api
}
