//! What the benchmarks share: arguments, the API server they run against ([`Server`]: an
//! in-process sandbox, or a real one with `--kubeconfig PATH`), and a schema-less CRD in the
//! group `bench.kubectl-meta.dev`.

#![allow(dead_code)] // each bench uses its own subset

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use kube_sandbox::Sandbox;
use serde_json::json;

/// The binary's allocator (see `src/main.rs`), so an in-process bench measures what users run,
/// counting the bytes allocated and not yet freed ([`heap_bytes`]). The count is kept in
/// per-thread slots, each on its own cache line: one shared counter made every allocation and
/// free of both cores fight over one line, a quarter of the process's CPU in the engine bench
/// (`perf`: the atomic in `__rust_alloc`/`__rust_dealloc`), which users' binary never pays.
#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Counter slots; a thread adds to its own (threads beyond this many share).
const SLOTS: usize = 64;

/// One counter slot on its own cache line.
#[repr(align(128))]
struct Slot(std::sync::atomic::AtomicIsize);

/// Live heap bytes of the process, as the allocator was asked for them, by slot: a slot may
/// go negative (memory freed by another thread than the one that allocated it); the sum is right.
static LIVE: [Slot; SLOTS] = [const { Slot(std::sync::atomic::AtomicIsize::new(0)) }; SLOTS];

/// The next thread's slot.
static NEXT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    /// This thread's slot (`usize::MAX` until its first allocation). A `Cell` without a
    /// destructor: usable while the thread is being torn down, and allocating nothing itself.
    static MY_SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Add `delta` bytes to this thread's slot.
fn count(delta: isize) {
    let slot = MY_SLOT.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SLOTS;
            s.set(i);
        }
        i
    });
    LIVE[slot]
        .0
        .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
}

/// mimalloc, counting live bytes in [`LIVE`].
struct Counting;

// SAFETY: every call is forwarded to mimalloc unchanged; only a counter is updated besides.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        count(new as isize - layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new) }
    }
}

/// Live heap bytes of this process now (everything in it: sandbox, engine, hook server).
pub fn heap_bytes() -> usize {
    LIVE.iter()
        .map(|s| s.0.load(std::sync::atomic::Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize
}

/// The live heap once it stops moving (no sample in 1 s more than 64 KiB from the last one; at
/// most 30 s): what a stopped engine's tasks free after it returned.
pub async fn settled_heap() -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = heap_bytes();
    let mut still_since = Instant::now();
    while still_since.elapsed() < Duration::from_secs(1) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = heap_bytes();
        if now.abs_diff(last) > 64 * 1024 {
            still_since = Instant::now();
        }
        last = now;
    }
    last
}

/// Serve `app` on a free port of 127.0.0.1 in the background; its address.
pub async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a bench server");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// A hook served over HTTP on 127.0.0.1 at `path` (`/sync`, `/map`): every POSTed request is
/// counted in `calls` and answered with `answer(request)`. Returns its URL.
pub async fn counting_hook<F>(
    path: &str,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    answer: F,
) -> String
where
    F: Fn(&serde_json::Value) -> serde_json::Value + Clone + Send + Sync + 'static,
{
    let app = axum::Router::new().route(
        path,
        axum::routing::post(move |axum::Json(req): axum::Json<serde_json::Value>| {
            let (calls, answer) = (std::sync::Arc::clone(&calls), answer.clone());
            async move {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                axum::Json(answer(&req))
            }
        }),
    );
    let addr = serve(app).await;
    format!("http://{addr}{path}")
}

/// What a single-controller bench (map, decorator) starts from: the server of `--kubeconfig`
/// (else an in-process sandbox without a kubelet's delay), a plain client, the engine's client
/// as `dev` builds it (`--api-qps`), the namespace everything goes in (`default` on the
/// sandbox, `<P>NAME` on a real server), `--workers` (default: the engine's), `--api-qps`, and
/// the directory holding the engine client's kubeconfig (keep it).
pub type Setup = (
    Server,
    kube::Client,
    kube::Client,
    String,
    usize,
    f64,
    tempfile::TempDir,
);

/// [`Setup`] for a bench whose namespace on a real server is `<P>name`; prints the server.
pub async fn setup(name: &str) -> Setup {
    let workers = arg(
        "--workers",
        kubectl_meta::engine::EngineOptions::default().workers,
    );
    let qps = arg("--api-qps", 0) as f64;
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let server = Server::from_args(cfg).await;
    let client = server.client().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let engine_client = server.dev_client(qps, dir.path()).await;
    let ns = match server {
        Server::Sandbox(_) => server.namespace("default").await,
        Server::External { .. } => server.namespace(name).await,
    };
    println!("server: {}", server.label());
    (server, client, engine_client, ns, workers, qps, dir)
}

/// An engine running `def` in namespace `ns` with `workers` workers, on `dev`'s client.
pub fn start_engine(
    client: &kube::Client,
    def: kubectl_meta::spec::ControllerDef,
    workers: usize,
    ns: &str,
) -> kubectl_meta::engine::Engine {
    let ctx = std::sync::Arc::new(
        kubectl_meta::engine::EngineContext::new(
            client.clone(),
            kubectl_meta::engine::events::EventBus::new(),
            kubectl_meta::engine::EngineOptions {
                workers,
                namespace: Some(ns.to_string()),
                ..kubectl_meta::engine::EngineOptions::default()
            },
        )
        .expect("engine context"),
    );
    let mut engine = kubectl_meta::engine::Engine::new(ctx);
    engine.start(def);
    engine
}

/// `""`, or `" (NOT converged)"` to append to a phase's line.
pub fn converged_note(c: bool) -> &'static str {
    if c { "" } else { " (NOT converged)" }
}

/// Print a restarted engine's whole working set: `grown` bytes of live heap for `cached`
/// objects of a `kind`, which are `what`; `size_flag` names the bench's size argument.
pub fn print_working_set(kind: &str, grown: usize, cached: usize, what: &str, size_flag: &str) {
    println!(
        "memory, {kind} working set after the restart: {:.1} MiB of live heap for {cached} cached objects ({what}) = {:.2} KB per cached object (run two sizes for the slope: {size_flag})",
        grown as f64 / 1024.0 / 1024.0,
        grown as f64 / cached.max(1) as f64 / 1000.0
    );
}

/// Create `n` ConfigMaps in `api`'s namespace, `concurrency` at a time: the `i`-th is
/// `make(i)` (its metadata and data, as JSON).
pub async fn create_configmaps(
    api: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    n: usize,
    concurrency: usize,
    make: impl Fn(usize) -> serde_json::Value,
) {
    use futures::StreamExt;
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let o: k8s_openapi::api::core::v1::ConfigMap =
                serde_json::from_value(make(i)).expect("configmap");
            async move {
                api.create(&PostParams::default(), &o)
                    .await
                    .expect("create configmap");
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
}

/// Print what the live heap gave back once an engine stopped (it was `heap_after` when the
/// engine had converged), per each of `cached` objects: the cross-check of a working set.
pub async fn print_released(heap_after: usize, cached: usize) {
    let released = heap_after.saturating_sub(settled_heap().await);
    println!(
        "memory released when that engine stopped: {:.1} MiB = {:.2} KB per cached object",
        released as f64 / 1024.0 / 1024.0,
        released as f64 / cached.max(1) as f64 / 1000.0
    );
}

/// Group of the bench CRDs.
pub const GROUP: &str = "bench.kubectl-meta.dev";

/// The value of `--name N` on the command line, or `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The value of `--name VALUE` on the command line.
/// Time from `start` until the engine's work ended: when [`Engine::wait_converged`] first saw
/// it idle (the quiet period that confirmed it is not counted); now, when it did not converge.
///
/// [`Engine::wait_converged`]: kubectl_meta::engine::Engine::wait_converged
pub fn work_ended(
    rep: &kubectl_meta::engine::OnceReport,
    start: std::time::Instant,
) -> std::time::Duration {
    rep.idle_since.map_or_else(
        || start.elapsed(),
        |idle| idle.saturating_duration_since(start),
    )
}

pub fn arg_str(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The API server a benchmark runs against: an in-process sandbox, or (`--kubeconfig PATH`,
/// its current context) a real, possibly shared one, where the benchmark's namespaces are
/// prefixed with `--namespace-prefix` (default `bench-`), its CRD kinds too (`bench-` ->
/// `BenchWidget`), and everything it created is deleted at the end ([`Server::cleanup`]).
pub enum Server {
    /// An in-process sandbox.
    Sandbox(Sandbox),
    /// A real API server.
    External {
        /// Its kubeconfig.
        kubeconfig: std::path::PathBuf,
        /// Namespace prefix.
        prefix: String,
    },
}

impl Server {
    /// From the command line: `--kubeconfig PATH`, or a sandbox started with `cfg`.
    pub async fn from_args(cfg: kube_sandbox::SandboxConfig) -> Server {
        match arg_str("--kubeconfig") {
            Some(path) => Server::External {
                kubeconfig: path.into(),
                prefix: arg_str("--namespace-prefix").unwrap_or_else(|| "bench-".into()),
            },
            None => Server::Sandbox(Sandbox::start(cfg).await.expect("sandbox")),
        }
    }

    /// `sandbox` or `real kube-apiserver`, for the figures.
    pub fn label(&self) -> &'static str {
        match self {
            Server::Sandbox(_) => "sandbox",
            Server::External { .. } => "real kube-apiserver",
        }
    }

    /// The sandbox, when it is one.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        match self {
            Server::Sandbox(sb) => Some(sb),
            Server::External { .. } => None,
        }
    }

    /// A plain client (no limits), as users' kube-rs code builds it from the kubeconfig.
    pub async fn client(&self) -> kube::Client {
        match self {
            Server::Sandbox(sb) => client_for(sb).await,
            Server::External { kubeconfig, .. } => {
                let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
                let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .expect("config");
                kube::Client::try_from(cfg).expect("client")
            }
        }
    }

    /// `dev`'s client ([`dev_client`]).
    pub async fn dev_client(&self, qps: f64, dir: &std::path::Path) -> kube::Client {
        match self {
            Server::Sandbox(sb) => dev_client(sb, qps, dir).await,
            Server::External { kubeconfig, .. } => {
                let limits = kubectl_meta::k8s::client::ClientLimits {
                    qps,
                    ..Default::default()
                };
                kubectl_meta::k8s::client::connect_limited(
                    Some(kubeconfig.as_path()),
                    None,
                    None,
                    limits,
                )
                .await
                .expect("connect")
                .client
            }
        }
    }

    /// The namespace `base` (`default`, `floor`): as is in a sandbox, prefixed (and created)
    /// on a real server.
    pub async fn namespace(&self, base: &str) -> String {
        let name = match self {
            Server::Sandbox(_) => base.to_string(),
            Server::External { prefix, .. } => format!("{prefix}{base}"),
        };
        if name != "default" {
            let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client().await);
            let obj = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
            match ns.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("create namespace {name}: {e}"),
            }
        }
        name
    }

    /// A CRD kind/plural: as is in a sandbox, prefixed on a real server (`bench-` + `Map`,
    /// `maps` -> `BenchMap`, `benchmaps`), so that it is ours alone.
    pub fn crd_names(&self, kind: &str, plural: &str) -> (String, String) {
        match self {
            Server::Sandbox(_) => (kind.to_string(), plural.to_string()),
            Server::External { prefix, .. } => {
                let p: String = prefix.chars().filter(char::is_ascii_alphanumeric).collect();
                let mut cap = p.chars();
                let cap = cap
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + cap.as_str())
                    .unwrap_or_default();
                (format!("{cap}{kind}"), format!("{p}{plural}"))
            }
        }
    }

    /// The global resourceVersion (every write moves it), on a sandbox only: a shared real
    /// server's moves with everyone's writes.
    pub async fn global_rv(&self) -> Option<u64> {
        let Server::Sandbox(_) = self else {
            return None;
        };
        let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::all(self.client().await);
        let list = api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .expect("list");
        list.metadata.resource_version.and_then(|r| r.parse().ok())
    }

    /// Delete what the benchmark created on a real server (its namespaces and CRDs, named
    /// with the prefix), and wait until they are gone; stop a sandbox.
    pub async fn cleanup(self, crd_plurals: &[&str], namespaces: &[&str]) {
        match self {
            Server::Sandbox(sb) => sb.shutdown().await,
            external @ Server::External { .. } => {
                let client = external.client().await;
                let crds = ar(
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                    "customresourcedefinitions",
                );
                let crd_api = Api::<DynamicObject>::all_with(client.clone(), &crds);
                let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
                for ns in namespaces.iter().filter(|n| **n != "default") {
                    let _ = ns_api.delete(ns, &Default::default()).await;
                }
                for plural in crd_plurals {
                    let _ = crd_api
                        .delete(&format!("{plural}.{GROUP}"), &Default::default())
                        .await;
                }
                let deadline = Instant::now() + Duration::from_secs(600);
                for ns in namespaces.iter().filter(|n| **n != "default") {
                    while ns_api.get_opt(ns).await.ok().flatten().is_some()
                        && Instant::now() < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        }
    }
}

/// A threaded Python webhook server (`python3 server.py PORT`, run in the directory holding
/// `logic.py`): each POST's JSON body goes to `logic.sync(body)`, its return value is the
/// answer.
pub const PY_SERVER: &str = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.dont_write_bytecode = True
import logic
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        out = json.dumps(logic.sync(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// A client for the sandbox, as users' kube-rs code would build it from its kubeconfig.
pub async fn client_for(sb: &Sandbox) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sb.kubeconfig_yaml()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// An ApiResource (`group` empty for core).
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Create a namespaced CRD `<plural>.bench.kubectl-meta.dev` of `kind` (v1, status subresource,
/// any fields; one left by an earlier run is reused) and wait until it is served; returns its
/// ApiResource.
pub async fn install_crd(client: &kube::Client, kind: &str, plural: &str) -> ApiResource {
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    let crds = ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    match Api::<DynamicObject>::all_with(client.clone(), &crds)
        .create(&PostParams::default(), &crd)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create crd {plural}: {e}"),
    }
    let res = ar(GROUP, "v1", kind, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &res);
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.list(&ListParams::default()).await.is_err() {
        assert!(Instant::now() < deadline, "CRD {plural} not served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    res
}

/// `dev`'s client for `sb`: `k8s::client::connect_limited` on its kubeconfig, as `dev` builds it.
pub async fn dev_client(sb: &Sandbox, qps: f64, dir: &std::path::Path) -> kube::Client {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, sb.kubeconfig_yaml()).expect("kubeconfig");
    let limits = kubectl_meta::k8s::client::ClientLimits {
        qps,
        ..Default::default()
    };
    kubectl_meta::k8s::client::connect_limited(Some(&path), Some("sandbox"), None, limits)
        .await
        .expect("connect")
        .client
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
