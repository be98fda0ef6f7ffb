//! Engine benchmark: `cargo bench --bench engine [-- --parents N --children C --mix 0|1 --timeout S
//! --workers W --api-qps Q --status-echo sync|skip --traces 0|1 --kubeconfig PATH
//! --namespace-prefix P]`.
//!
//! Logging is set up as `run` sets it up; `--traces 1` also exports the engine's spans (a span
//! per sync, hook call and write) over OTLP/HTTP to a receiver in the process that decodes
//! and counts them, as `run` does when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (default 0: traces
//! off, as without that variable).
//!
//! Runs the CompositeController engine in-process against an in-process sandbox (no kubelet), or
//! with `--kubeconfig` against a real API server (namespaces `<P>bench`, `<P>floor` and a CRD
//! named after `P`, deleted at the end),
//! with a sync hook served over HTTP on 127.0.0.1 (a small Rust server, so the figures measure
//! the engine, not a hook's language), and prints:
//! - the time from the first parent creation until every parent has all its children
//!   (default 1,000 parents x 3 ConfigMap children, plus a Secret written with `stringData` and
//!   a Deployment with non-canonical quantities (`cpu: "0.5"`, `memory: 1024Mi`) and empty
//!   `labels: {}` / `env: []`, which a kube-apiserver normalizes; `--mix 0` leaves those two
//!   out), and the hook calls it took;
//! - for a full resync of all those parents with nothing changed: the time, the hook calls,
//!   and the number of API writes, counted twice: the engine's own write events, and the
//!   sandbox's global resourceVersion before and after (must both be 0; not on a real server,
//!   whose resourceVersion moves with everyone's writes); writes the server answered as no-ops
//!   are counted apart (must be 0 too);
//! - a hot reload of the hook: every parent resynced and every parent's last request replayed
//!   (as `dev` does on a hook change): the time until both are done, and the hook calls;
//! - a restart: a new engine on the converged parents (start-up: the informers' lists and one
//!   sync per parent, writing nothing; the run fails on any other count), its time and writes,
//!   and the engine's whole working set per cached object: what the process's live heap grew
//!   by from before that engine started (the first engine's memory freed: the heap settled)
//!   until it converged (counted by the bench's allocator), and its RSS before and after; that
//!   growth by part (the caches' JSON text and the last-applied annotations in it, the event
//!   channels allocated up front, and the rest: the replay memory, indexes, keys, per-parent
//!   memory; the replay memory's exchanges as whole text are printed as its upper bound), and, as a cross-check, what the heap gave back when that engine stopped. Run two
//!   sizes (`--parents`) for the slope: the channels are a fixed cost, the rest per object;
//! - the floors, measured in the same run: the API server's (the creates convergence needs,
//!   parents plus ConfigMap children, from 8 keep-alive clients) and the hook's (as many calls
//!   as the engine made, at `--workers` concurrency), and the engine's time as a multiple of the
//!   larger; syncs and hook calls per parent. Then the floor of all the writes the start-up
//!   made, the same objects: every parent created, its children exactly as the hook answers
//!   them (with the label, controller reference and last-applied annotation the engine adds;
//!   with the mix, the Deployments set the sandbox's Deployment controller going as the
//!   engine's did), and as many parent status writes as the engine made (each parent's status
//!   is written twice under Metacontroller's semantics: after its children are created, and
//!   once the hook sees them), from 8 clients, and the engine's time as a multiple of that.
//!
//! Each of the start-up, no-op resync and restart lines also gives the process CPU the phase
//! took (`/proc/self/stat`: the engine with the sandbox and the hook server beside it, the
//! restart's lists included) and that per sync. A restart that syncs a parent more than once
//! prints, before failing, the triggers of each sync of the first such parents.
//!
//! `--flight-recorder BYTES` runs each engine with a flight recorder of that bound on its event
//! bus (as `run` does by default; 0, the default here: off), for its cost: compare the figures
//! with it on and off. The start-up line then says what the recorder kept, and the run fails if
//! its byte count ever exceeded the bound (sampled on every event it sees).
//!
//! The engine's client is `dev`'s: built by `k8s::client::connect` with the default limits
//! (no fixed rate, the adaptive window); `--workers` (default `dev`'s, 16) and
//! `--api-qps` (default 0) as `dev`'s flags.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube_sandbox::SandboxConfig;
use kubectl_meta::engine::events::{EngineEvent, EventBus};
use kubectl_meta::engine::flight::FlightRecorder;
use kubectl_meta::engine::{Engine, WaitFor};
use kubectl_meta::engine::{EngineContext, EngineOptions};
use kubectl_meta::spec::{self, Source};
use serde_json::{Value, json};

mod common;
use common::{Server, arg, work_ended};

/// The Secret and Deployment children a kube-apiserver stores differently from how they are
/// written (stringData folded into data, quantities canonicalized, empties dropped).
fn normalized_children(name: &str) -> [Value; 2] {
    let labels = json!({"app": name});
    [
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-s"), "annotations": {}},
            "stringData": {"password": format!("pw-{name}")}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("{name}-d"), "labels": {}},
            "spec": {"selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": "nginx", "env": [],
                        "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"},
                                      "requests": {"cpu": 0.25}}}]}}}}),
    ]
}

/// The children the bench's hook answers for parent `name`: `children` ConfigMaps, and with
/// `mix` the Secret and Deployment of [`normalized_children`].
fn hook_children(name: &str, children: usize, mix: bool) -> Vec<Value> {
    let mut kids: Vec<Value> = (0..children)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{name}-{i}")},
                "data": {"index": i.to_string(), "parent": name}})
        })
        .collect();
    if mix {
        kids.extend(normalized_children(name));
    }
    kids
}

async fn hook_server(children: usize, mix: bool, calls: Arc<AtomicUsize>) -> String {
    common::counting_hook("/sync", calls, move |req| {
        let name = req["parent"]["metadata"]["name"].as_str().unwrap_or("x");
        let kids = hook_children(name, children, mix);
        let ready = req["children"]["ConfigMap.v1"]
            .as_object()
            .map_or(0, |m| m.len());
        json!({"status": {"children": ready}, "children": kids})
    })
    .await
}

type ConfigMaps = Api<k8s_openapi::api::core::v1::ConfigMap>;

/// `op(configmaps, i)` for every `i` in `0..n`, from 8 keep-alive clients at once (no
/// client-side limit; client `c` takes every 8th `i` from `c`) on the ConfigMaps of namespace
/// `floor_ns`. Returns the seconds it took.
async fn from_8_clients<F, Fut>(server: &Server, floor_ns: &str, n: usize, op: F) -> f64
where
    F: Fn(ConfigMaps, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(server.client().await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            let api: ConfigMaps = Api::namespaced(client, floor_ns);
            let op = op.clone();
            tokio::spawn(async move {
                for i in (c..n).step_by(8) {
                    op(api.clone(), i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("floor task");
    }
    start.elapsed().as_secs_f64()
}

/// The API server's floor: `n` ConfigMap creates into namespace `floor`, from 8 clients.
async fn api_floor(server: &Server, floor_ns: &str, n: usize) -> f64 {
    from_8_clients(server, floor_ns, n, |api, i| async move {
        let cm = serde_json::from_value(json!({
            "metadata": {"name": format!("f{i:06}")},
            "data": {"index": i.to_string()}
        }))
        .expect("configmap");
        api.create(&PostParams::default(), &cm)
            .await
            .expect("floor create");
    })
    .await
}

/// The floor of all the writes a start-up made, the same objects from 8 keep-alive clients
/// (client `c` takes every 8th parent, no client-side limit), in namespace `floor_ns` once
/// no engine runs: for each of `parents` parents of `parent_ar`, its creation, then its
/// children exactly as the bench's hook answers them ([`hook_children`]: ConfigMaps, and
/// with `mix` the Secret and the Deployment, whose creation sets the sandbox's Deployment
/// controller going as the engine's did), each with what the engine adds (the
/// `controller-uid` label, a controller reference, the last-applied annotation), then
/// `status_writes` merge patches of the parents' status (spread evenly). The sandbox's
/// controllers run on as during the engine's run; the time ends with the last write
/// answered, not when they settle (so the floor does not grow by their lag).
/// Returns the seconds it took and the writes made (creations of parents included).
#[allow(clippy::too_many_arguments)]
async fn all_writes_floor(
    server: &Server,
    floor_ns: &str,
    parent_ar: &kube::discovery::ApiResource,
    parents: usize,
    children: usize,
    mix: bool,
    status_writes: usize,
) -> (f64, usize) {
    use kube::discovery::ApiResource;
    let kinds = [
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    ];
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(server.client().await);
    }
    let writes = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            let (floor_ns, parent_ar, kinds) =
                (floor_ns.to_string(), parent_ar.clone(), kinds.clone());
            let writes = Arc::clone(&writes);
            tokio::spawn(async move {
                let papi: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &floor_ns, &parent_ar);
                for i in (c..parents).step_by(8) {
                    let name = format!("fp{i:06}");
                    let p: DynamicObject = serde_json::from_value(json!({
                        "apiVersion": parent_ar.api_version, "kind": parent_ar.kind,
                        "metadata": {"name": name}, "spec": {"n": i}
                    }))
                    .expect("floor parent");
                    let p = papi
                        .create(&PostParams::default(), &p)
                        .await
                        .expect("floor parent create");
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    writes.fetch_add(1, Ordering::Relaxed);
                    for mut kid in hook_children(&name, children, mix) {
                        let last_applied = kid.to_string();
                        let ar = kinds
                            .iter()
                            .find(|k| kid["kind"] == k.kind.as_str())
                            .expect("child kind");
                        let meta = &mut kid["metadata"];
                        meta["labels"] = json!({"controller-uid": uid});
                        meta["annotations"] = json!({
                            "metacontroller.k8s.io/last-applied-configuration": last_applied
                        });
                        meta["ownerReferences"] = json!([{
                            "apiVersion": parent_ar.api_version, "kind": parent_ar.kind,
                            "name": name, "uid": uid,
                            "controller": true, "blockOwnerDeletion": true
                        }]);
                        let kid: DynamicObject = serde_json::from_value(kid).expect("child");
                        Api::<DynamicObject>::namespaced_with(client.clone(), &floor_ns, ar)
                            .create(&PostParams::default(), &kid)
                            .await
                            .expect("floor child create");
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    let mine = status_writes / parents.max(1)
                        + usize::from(i < status_writes % parents.max(1));
                    for w in 0..mine {
                        let patch = json!({"status": {"children": children, "write": w}});
                        papi.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .expect("floor status write");
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("floor task");
    }
    (
        start.elapsed().as_secs_f64(),
        writes.load(Ordering::Relaxed),
    )
}

/// The hook's floor: `n` calls of a sync request like the engine's, `concurrency` at a time.
/// Returns the seconds it took.
async fn hook_floor(url: &str, n: usize, concurrency: usize) -> f64 {
    let http = reqwest::Client::new();
    let body = json!({
        "controller": {"metadata": {"name": "bench"}},
        "parent": {"apiVersion": "bench.kubectl-meta.dev/v1", "kind": "Bench",
            "metadata": {"name": "p00000", "namespace": "default", "uid": "u"}, "spec": {"n": 0}},
        "children": {"ConfigMap.v1": {}, "Secret.v1": {}, "Deployment.apps/v1": {}},
        "related": {}, "finalizing": false
    });
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (http, body, next, url) = (
                http.clone(),
                body.clone(),
                Arc::clone(&next),
                url.to_string(),
            );
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let resp = http.post(&url).json(&body).send().await.expect("hook call");
                    let _: Value = resp.json().await.expect("hook answer");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("hook floor task");
    }
    start.elapsed().as_secs_f64()
}

/// Counters of the engine's events: syncs started, writes, no-op writes.
#[derive(Default)]
struct Counts {
    syncs: AtomicUsize,
    writes: AtomicUsize,
    noops: AtomicUsize,
    /// ConfigMap creates (the children the start-up phase waits for).
    configmap_creates: AtomicUsize,
    /// The flight recorder's largest byte count seen, and its events kept (last seen).
    flight_max_bytes: Arc<AtomicUsize>,
    flight_events: Arc<AtomicUsize>,
    /// Each parent's sync triggers, one entry per sync (`Debug` text), to say why a parent
    /// was synced more than once after a restart.
    triggers: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
}

impl Counts {
    fn get(&self) -> (usize, usize, usize) {
        (
            self.syncs.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
            self.noops.load(Ordering::Relaxed),
        )
    }
}

/// Each sync's triggers (`Debug` text) with the objects' names left out, so that syncs of
/// different parents for the same reason count together.
fn trigger_class(triggers: &str) -> String {
    let mut out = String::with_capacity(triggers.len());
    let mut rest = triggers;
    while let Some(i) = rest.find("object: \"") {
        out.push_str(&rest[..i + 9]);
        rest = &rest[i + 9..];
        match rest.find('"') {
            Some(j) => {
                out.push_str(if &rest[..j] == "*" { "*" } else { "_" });
                rest = &rest[j..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The syncs of a phase by trigger: every sync, and the syncs after a parent's `expected`-th
/// (the extra ones), each as a count per trigger class, most frequent first (the first 8).
fn trigger_breakdown(counts: &Counts, expected: usize) -> String {
    let Ok(t) = counts.triggers.lock() else {
        return String::new();
    };
    let mut all: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut extra: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut over = 0;
    for syncs in t.values() {
        over += usize::from(syncs.len() > expected);
        for (i, s) in syncs.iter().enumerate() {
            let c = trigger_class(s);
            if i >= expected {
                *extra.entry(c.clone()).or_default() += 1;
            }
            *all.entry(c).or_default() += 1;
        }
    }
    let top = |m: std::collections::HashMap<String, usize>| {
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.iter()
            .take(8)
            .map(|(c, n)| format!("{n} x {c}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "syncs by trigger: {}
  {over} parents synced more than {expected} times; their syncs after the first {expected} by trigger: {}",
        top(all),
        top(extra)
    )
}

/// An engine running `def` with `workers` on `client`, its events counted in `counts`.
fn start_engine(
    client: &kube::Client,
    def: kubectl_meta::spec::ControllerDef,
    workers: usize,
    namespace: &str,
    counts: &Arc<Counts>,
) -> Engine {
    let bus = EventBus::new();
    let flight_size = arg("--flight-recorder", 0);
    if flight_size > 0 {
        let rec = Arc::new(FlightRecorder::new(flight_size));
        rec.spawn(&bus);
        // A second subscriber samples the recorder's byte count as events go by.
        let mut rx = bus.subscribe();
        let max = Arc::clone(&counts.flight_max_bytes);
        let kept = Arc::clone(&counts.flight_events);
        tokio::spawn(async move {
            while !matches!(
                rx.recv().await,
                Err(tokio::sync::broadcast::error::RecvError::Closed)
            ) {
                max.fetch_max(rec.bytes(), Ordering::Relaxed);
                kept.store(rec.len(), Ordering::Relaxed);
            }
        });
    }
    let mut rx = bus.subscribe();
    let counts = Arc::clone(counts);
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(EngineEvent::SyncStarted {
                    subject, triggers, ..
                }) => {
                    counts.syncs.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut t) = counts.triggers.lock() {
                        t.entry(subject.parent)
                            .or_default()
                            .push(format!("{triggers:?}"));
                    }
                }
                Ok(EngineEvent::Action {
                    error: None,
                    verb,
                    resource,
                    ..
                }) => {
                    let verb = verb.to_string();
                    if verb == "no-op" {
                        counts.noops.fetch_add(1, Ordering::Relaxed);
                    } else {
                        counts.writes.fetch_add(1, Ordering::Relaxed);
                    }
                    if verb == "create" && resource.starts_with("ConfigMap.") {
                        counts.configmap_creates.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    });
    let ctx = Arc::new(
        EngineContext::new(
            client.clone(),
            bus,
            EngineOptions {
                workers,
                namespace: Some(namespace.to_string()),
                // `--status-echo skip` as `dev --status-echo skip`; default: Metacontroller's
                // sync on the echo of a status write, as `dev` does by default.
                confirm_status_writes: common::arg_str("--status-echo").as_deref() != Some("skip"),
                ..EngineOptions::default()
            },
        )
        .expect("engine context"),
    );
    let mut engine = Engine::new(ctx);
    // Convergence is the engine's work done (`--wait-for none`): the Deployment child of the
    // default mix never becomes Current without a kubelet, and waiting for it (the default,
    // `WaitFor::Current`) made every phase time out and print "NOT converged".
    engine.set_wait_for(WaitFor::None);
    engine.start(def);
    engine
}

/// The CPU time this process has used (all threads: the engine, and the sandbox and hook
/// server beside it), from `/proc/self/stat` (`utime + stime`, in ticks of 10 ms).
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with the last `)`): state is field 3, utime
    // field 14, stime field 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

/// `CPU 1.23s (0.41 ms per sync)`: the process CPU a phase took, per sync it made.
fn cpu_note(cpu_s: f64, syncs: usize) -> String {
    format!(
        "process CPU {cpu_s:.2}s ({:.2} ms per sync)",
        cpu_s * 1000.0 / syncs.max(1) as f64
    )
}

/// Spans an OTLP receiver decoded, and the export requests it answered.
#[derive(Default)]
struct Exported {
    spans: AtomicUsize,
    requests: AtomicUsize,
}

/// Logging as `run` sets it up; with `traces`, the OTLP exporter too, to a receiver on
/// 127.0.0.1 counting what it gets.
async fn start_telemetry(traces: bool) -> (kubectl_meta::telemetry::Telemetry, Arc<Exported>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    let exported = Arc::new(Exported::default());
    let cfg = if traces {
        let counts = Arc::clone(&exported);
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let counts = Arc::clone(&counts);
                async move {
                    let req = ExportTraceServiceRequest::decode(body).expect("OTLP request");
                    let n: usize = req
                        .resource_spans
                        .iter()
                        .flat_map(|r| &r.scope_spans)
                        .map(|s| s.spans.len())
                        .sum();
                    counts.spans.fetch_add(n, Ordering::Relaxed);
                    counts.requests.fetch_add(1, Ordering::Relaxed);
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Some(kubectl_meta::telemetry::TraceConfig {
            protocol: kubectl_meta::telemetry::OtlpProtocol::HttpProtobuf,
            service_name: Some("engine-bench".to_string()),
            endpoint: Some(format!("http://127.0.0.1:{port}/v1/traces")),
        })
    } else {
        None
    };
    // Inside the runtime, as `run` builds it.
    let telemetry = kubectl_meta::telemetry::init("warn,kube_client=off", false, cfg.as_ref())
        .expect("telemetry");
    (telemetry, exported)
}

/// The parts of the restarted engine's working set that can be told apart from outside, in
/// bytes: what the rest of the live heap growth is made of (indexes, keys, per-parent memory)
/// is the difference.
struct Breakdown {
    /// The cached objects as compact JSON text (what an informer keeps: managedFields dropped).
    cache_text: usize,
    /// The last-applied annotations inside that text.
    last_applied: usize,
    /// The replay memory's exchanges as compact JSON text, whole (what copies would cost: the
    /// objects shared with the caches cost nothing, so this is an upper bound).
    replay: usize,
    /// What the replay memory keeps of them: without the parents and children (shared).
    replay_kept: usize,
    /// The event channels allocated up front: one per informer, and the engine's event bus.
    channels: usize,
    /// How many informers that counts.
    informers: usize,
}

impl Breakdown {
    async fn measure(
        client: &kube::Client,
        ns: &str,
        parents: &kube::discovery::ApiResource,
        mix: bool,
        engine: &Engine,
    ) -> Breakdown {
        use kube::discovery::ApiResource;
        let mut resources = vec![
            parents.clone(),
            ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ];
        if mix {
            resources.push(ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()));
            resources.push(ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()));
        }
        let (mut cache_text, mut last_applied) = (0, 0);
        for ar in &resources {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
            for mut obj in api.list(&ListParams::default()).await.expect("list").items {
                obj.metadata.managed_fields = None;
                last_applied += obj
                    .metadata
                    .annotations
                    .iter()
                    .flatten()
                    .filter(|(k, _)| k.ends_with("/last-applied-configuration"))
                    .map(|(_, v)| v.len())
                    .sum::<usize>();
                cache_text += serde_json::to_string(&obj).expect("json").len();
            }
        }
        let len = |v: &Value| serde_json::to_string(v).expect("json").len();
        let (mut replay, mut replay_kept) = (0, 0);
        for x in engine
            .replay_jobs(&["bench".to_string()])
            .iter()
            .flat_map(|j| &j.exchanges)
        {
            let whole = x.hook.len() + len(&x.request) + len(&x.response);
            // The parent and the children, converged: the caches hold them as they were sent,
            // so the replay memory shares them (a `null` left in their place).
            let objects: usize = std::iter::once(&x.request["parent"])
                .chain(
                    x.request["children"]
                        .as_object()
                        .into_iter()
                        .flat_map(|groups| groups.values())
                        .filter_map(Value::as_object)
                        .flat_map(|group| group.values()),
                )
                .map(|o| len(o).saturating_sub("null".len()))
                .sum();
            replay += whole;
            replay_kept += whole.saturating_sub(objects);
        }
        // Measured, not computed: a broadcast channel allocates its slots when made. An
        // informer event is two `Arc`s and a tag at most, as this stand-in.
        let before = common::heap_bytes();
        let informer_channel = tokio::sync::broadcast::channel::<[usize; 3]>(
            kubectl_meta::engine::k8s::EVENT_CAPACITY,
        );
        let one_channel = common::heap_bytes().saturating_sub(before);
        drop(informer_channel);
        let before = common::heap_bytes();
        let bus = EventBus::new();
        let bus_bytes = common::heap_bytes().saturating_sub(before);
        drop(bus);
        Breakdown {
            cache_text,
            last_applied,
            replay,
            replay_kept,
            channels: one_channel * resources.len() + bus_bytes,
            informers: resources.len(),
        }
    }

    fn print(&self, grown: usize, cached: usize) {
        let kb = |b: usize| b as f64 / cached as f64 / 1000.0;
        let known = self.cache_text + self.channels + self.replay_kept;
        println!(
            "memory per cached object, by part: cache text {:.2} KB (of which last-applied annotations {:.2} KB), event channels {:.2} KB ({} informers x {} slots, and the engine's event bus: a fixed cost), replay memory {:.2} KB as text (whole exchanges {:.2} KB; the parents and children in them are shared with the caches), indexes, keys and the rest {:.2} KB",
            kb(self.cache_text),
            kb(self.last_applied),
            kb(self.channels),
            self.informers,
            kubectl_meta::engine::k8s::EVENT_CAPACITY,
            kb(self.replay_kept),
            kb(self.replay),
            kb(grown.saturating_sub(known)),
        );
    }
}

#[tokio::main]
async fn main() {
    let parents = arg("--parents", 1000);
    let children = arg("--children", 3);
    let mix = arg("--mix", 1) != 0;
    // Seconds to wait for convergence in each phase (an engine that hot-loops never converges).
    let timeout = Duration::from_secs(arg("--timeout", 300) as u64);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let workers = arg("--workers", kubectl_meta::engine::DEFAULT_WORKERS);
    let qps = arg("--api-qps", 0) as f64;
    let traces = arg("--traces", 0) != 0;
    let (mut telemetry, exported) = start_telemetry(traces).await;
    let server = Server::from_args(cfg).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = server.dev_client(qps, dir.path()).await;
    let ns = match server {
        Server::Sandbox(_) => server.namespace("default").await,
        Server::External { .. } => server.namespace("bench").await,
    };
    let floor_ns = server.namespace("floor").await;
    println!(
        "server: {}; {parents} parents x {children} ConfigMaps{}; workers {workers}, api-qps {qps}, status-echo {}, traces {}",
        server.label(),
        if mix {
            " + a Secret (stringData) + a Deployment (cpu 0.5)"
        } else {
            ""
        },
        common::arg_str("--status-echo").unwrap_or_else(|| "sync".to_string()),
        if traces { "on (OTLP/HTTP)" } else { "off" }
    );
    // The API floor first, before the engine watches anything.
    let floor_creates = parents + parents * children;
    let api_floor_s = api_floor(&server, &floor_ns, floor_creates).await;

    // The parent CRD.
    let (kind, plural) = server.crd_names("Bench", "benches");
    let bench_ar = common::install_crd(&client, &kind, &plural).await;

    let calls = Arc::new(AtomicUsize::new(0));
    let url = hook_server(children, mix, Arc::clone(&calls)).await;
    let def = spec::parse_controller(
        &json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": "bench"},
            "spec": {
                "parentResource": {"apiVersion": "bench.kubectl-meta.dev/v1", "resource": plural},
                "childResources": [
                    {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}},
                    {"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": "InPlace"}},
                    {"apiVersion": "apps/v1", "resource": "deployments", "updateStrategy": {"method": "InPlace"}},
                ],
                "generateSelector": true,
                "hooks": {"sync": {"webhook": {"url": url}}}
            }
        }),
        Source::cluster("compositecontroller", "bench"),
    )
    .expect("definition");

    let counts = Arc::new(Counts::default());
    let engine = start_engine(&client, def.clone(), workers, &ns, &counts);
    let idle = engine.wait_converged(Duration::from_secs(60)).await;
    assert!(idle.converged, "engine did not start: {idle:?}");

    // 1. Parent creation to all children created.
    let papi: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &bench_ar);
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cpu_start = process_cpu_s();
    let start = Instant::now();
    // 8 at a time (as the API floor's clients), so that creating them is not the bottleneck.
    futures::stream::iter(0..parents)
        .map(|i| {
            let (papi, kind) = (papi.clone(), kind.clone());
            async move {
                let p: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "bench.kubectl-meta.dev/v1", "kind": kind,
                    "metadata": {"name": format!("p{i:05}")}, "spec": {"n": i}
                }))
                .expect("parent");
                papi.create(&PostParams::default(), &p)
                    .await
                    .expect("create parent");
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let created = start.elapsed();
    let want = parents * children;
    // The engine's own create events (every 5 ms: listing thousands of ConfigMaps as often
    // would take the CPU the engine is measured on); the server's count is checked below.
    loop {
        let n = counts.configmap_creates.load(Ordering::Relaxed);
        if n >= want {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "only {n}/{want} children after 15 min"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let all_children = start.elapsed();
    let conv = engine.wait_converged(timeout).await;
    let converged = work_ended(&conv, start);
    let start_cpu = process_cpu_s() - cpu_start;
    let stored = cm
        .list_metadata(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();
    assert!(
        stored >= want,
        "the engine reported {want} ConfigMap creates, the server has {stored}"
    );
    let start_calls = calls.load(Ordering::Relaxed);
    let (start_syncs, start_writes, _) = counts.get();
    println!(
        "start-up: parents created in {:.2}s; all {want} ConfigMap children after {:.2}s ({:.0} ConfigMaps/s); converged (statuses written) after {:.2}s; {start_syncs} syncs, {start_calls} hook calls, {start_writes} writes; {}{}",
        created.as_secs_f64(),
        all_children.as_secs_f64(),
        want as f64 / all_children.as_secs_f64(),
        converged.as_secs_f64(),
        cpu_note(start_cpu, start_syncs),
        common::converged_note(conv.converged)
    );
    // Metacontroller's start-up is 3 syncs per parent (create the children; see them and
    // write the status; see the status committed): say why any parent had more.
    println!("  start-up {}", trigger_breakdown(&counts, 3));
    let flight_size = arg("--flight-recorder", 0);
    if flight_size > 0 {
        let max = counts.flight_max_bytes.load(Ordering::Relaxed);
        println!(
            "flight recorder: bound {flight_size} bytes, at most {max} bytes used, {} events kept",
            counts.flight_events.load(Ordering::Relaxed)
        );
        if max > flight_size {
            eprintln!("FAIL: the flight recorder held {max} bytes, above its bound {flight_size}");
            std::process::exit(1);
        }
    }

    // 2. No-op resync.
    let rv_before = server.global_rv().await;
    let (syncs_before, writes_before, noops_before) = counts.get();
    let calls_before = calls.load(Ordering::Relaxed);
    let cpu_before = process_cpu_s();
    let t = Instant::now();
    engine.resync_all();
    let conv = engine.wait_converged(timeout).await;
    let resync = work_ended(&conv, t);
    let resync_cpu = process_cpu_s() - cpu_before;
    let rv_after = server.global_rv().await;
    let (s, w, n) = counts.get();
    let (resync_writes, resync_noops) = (w - writes_before, n - noops_before);
    let resync_syncs = s - syncs_before;
    let server_writes = match (rv_before, rv_after) {
        (Some(a), Some(b)) => format!(
            "resourceVersion {a} -> {b} ({} writes seen by the server)",
            b.saturating_sub(a)
        ),
        _ => "resourceVersion not compared (a shared server's moves with everyone's writes)"
            .to_string(),
    };
    println!(
        "no-op resync of {parents} parents: {:.2}s, {} hook calls, {resync_writes} writes by the engine, {resync_noops} no-op writes, {server_writes}; {resync_syncs} syncs, {}{}",
        resync.as_secs_f64(),
        calls.load(Ordering::Relaxed) - calls_before,
        cpu_note(resync_cpu, resync_syncs),
        common::converged_note(conv.converged)
    );

    // 3. A hot reload: every parent resynced and its last request replayed, as `dev` does.
    let calls_before = calls.load(Ordering::Relaxed);
    let (_, writes_before, _) = counts.get();
    let t = Instant::now();
    let names = vec!["bench".to_string()];
    engine.hook_reloaded(&names);
    let conv = engine.wait_converged(timeout).await;
    let resynced = work_ended(&conv, t);
    let exchanges = calls.load(Ordering::Relaxed) - calls_before;
    // `dev` replays the exchanges taken before the resync; the same number of requests.
    let replay_start = Instant::now();
    let replay_events = engine.replay(&names).await.len();
    let reloaded = resynced + replay_start.elapsed();
    println!(
        "hot reload: every parent resynced after {:.2}s ({exchanges} hook calls), and its last request replayed ({replay_events} replay events) after {:.2}s; {} hook calls, {} writes{}",
        resynced.as_secs_f64(),
        reloaded.as_secs_f64(),
        calls.load(Ordering::Relaxed) - calls_before,
        counts.get().1 - writes_before,
        common::converged_note(conv.converged)
    );
    engine.shutdown().await;

    // 4. A restart on the converged parents: informers list everything, one sync per parent.
    //    The engine's whole working set is what the process's live heap grew by from before
    //    the new engine started until it converged (its caches with their indexes, per-parent
    //    memory: replay exchanges, statuses; the sandbox's objects were there before).
    let calls_before = calls.load(Ordering::Relaxed);
    let restart_counts = Arc::new(Counts::default());
    // The first engine's tasks free its caches after `shutdown` returns: wait for the heap to
    // settle, or its freeing hides the new engine's growth.
    let heap_before = common::settled_heap().await;
    let rss_before = common::rss_kib(std::process::id());
    let cpu_before = process_cpu_s();
    let t = Instant::now();
    let engine = start_engine(&client, def, workers, &ns, &restart_counts);
    let conv = engine.wait_converged(timeout).await;
    let restart = work_ended(&conv, t);
    let restart_cpu = process_cpu_s() - cpu_before;
    let (heap_after, rss_after) = (common::heap_bytes(), common::rss_kib(std::process::id()));
    let (rs, rw, rn) = restart_counts.get();
    println!(
        "restart on {parents} converged parents: steady after {:.2}s; {rs} syncs ({:.2} per parent), {} hook calls, {rw} writes, {rn} no-op writes; {} (the lists included){}",
        restart.as_secs_f64(),
        rs as f64 / parents as f64,
        calls.load(Ordering::Relaxed) - calls_before,
        cpu_note(restart_cpu, rs),
        common::converged_note(conv.converged)
    );
    // Every object the engine caches: the parents and their children.
    let cached = parents * (1 + children + if mix { 2 } else { 0 });
    let grown = heap_after.saturating_sub(heap_before);
    let rss_grown = match (rss_before, rss_after) {
        (Some(a), Some(b)) => format!(
            "RSS {:.1} -> {:.1} MiB ({:.2} KB per cached object; RSS reuses the pages the first engine freed, so this is a lower bound)",
            a as f64 / 1024.0,
            b as f64 / 1024.0,
            b.saturating_sub(a) as f64 * 1024.0 / cached as f64 / 1000.0
        ),
        _ => "RSS not read".to_string(),
    };
    println!(
        "memory, CompositeController working set after the restart: {:.1} MiB of live heap for {cached} cached objects ({parents} parents and their children) = {:.2} KB per cached object; {rss_grown}",
        grown as f64 / 1024.0 / 1024.0,
        grown as f64 / cached as f64 / 1000.0
    );
    let parts = Breakdown::measure(&client, &ns, &bench_ar, mix, &engine).await;
    parts.print(grown, cached);
    engine.shutdown().await;
    // Cross-check: what the heap gave back once this engine stopped.
    common::print_released(heap_after, cached).await;

    // 5. The floors: the API server's (measured first) and the hook's, for as many calls as
    //    the start-up made, at the same concurrency.
    let hook_floor_s = hook_floor(&url, start_calls, workers).await;
    let floor = api_floor_s.max(hook_floor_s);
    // The floor of all the start-up's writes, the same objects (parents, children, status
    // writes), from 8 clients.
    let child_creates = parents * (children + if mix { 2 } else { 0 });
    let status_writes = start_writes.saturating_sub(child_creates);
    let (same_writes_s, floor_writes) = all_writes_floor(
        &server,
        &floor_ns,
        &bench_ar,
        parents,
        children,
        mix,
        status_writes,
    )
    .await;
    let all_writes_floor = same_writes_s.max(hook_floor_s);
    println!(
        "floors: API server {floor_creates} creates from 8 clients in {api_floor_s:.2}s ({:.0}/s); hook {start_calls} calls at concurrency {workers} in {hook_floor_s:.2}s ({:.0}/s). Engine (workers {workers}, api-qps {qps}): converged in {:.2}s = {:.2}x the floor; {:.2} syncs and {:.2} hook calls per parent",
        floor_creates as f64 / api_floor_s,
        start_calls as f64 / hook_floor_s,
        converged.as_secs_f64(),
        converged.as_secs_f64() / floor,
        start_syncs as f64 / parents as f64,
        start_calls as f64 / parents as f64,
    );
    println!(
        "all writes, the same objects: {floor_writes} writes from 8 clients ({parents} parents created, their {child_creates} children as the hook answers them, {status_writes} status writes) in {same_writes_s:.2}s; the engine took {:.2}x that ({:.2} writes per parent besides its creation)",
        converged.as_secs_f64() / all_writes_floor,
        start_writes as f64 / parents as f64,
    );
    if traces {
        telemetry.shutdown();
        println!(
            "traces: {} spans received in {} OTLP export requests",
            exported.spans.load(Ordering::Relaxed),
            exported.requests.load(Ordering::Relaxed)
        );
    }
    let rv_moved = matches!((rv_before, rv_after), (Some(a), Some(b)) if a != b);
    server.cleanup(&[plural.as_str()], &[&ns, &floor_ns]).await;
    if resync_writes != 0 || resync_noops != 0 || rv_moved || rw != 0 {
        eprintln!("FAIL: a no-op resync and a restart must make 0 writes");
        std::process::exit(1);
    }
    if rs != parents {
        // Why: the parents synced more than once, with each sync's triggers.
        if let Ok(t) = restart_counts.triggers.lock() {
            let mut again: Vec<_> = t.iter().filter(|(_, v)| v.len() > 1).collect();
            again.sort();
            eprintln!(
                "{} parents synced more than once after the restart; the first of them:",
                again.len()
            );
            for (p, syncs) in again.iter().take(5) {
                eprintln!("  {p}: {}", syncs.join(" then "));
            }
        }
        eprintln!(
            "FAIL: a restart on converged parents must sync each exactly once ({rs} syncs for {parents} parents)"
        );
        std::process::exit(1);
    }
}
