//! Engine test harness: an in-process sandbox, a parent CRD, a programmable hook served over
//! real HTTP on 127.0.0.1 (with a log of every call), and the engine run in-process against the
//! sandbox through the same kube client users get. Waits are on conditions, never fixed sleeps.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as AxPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent, EventBus};
use kubectl_meta::engine::{Engine, OnceReport};
use kubectl_meta::engine::{EngineContext, EngineOptions};
use kubectl_meta::spec::{self, ControllerDef, Source};
use serde_json::{Value, json};

use super::{TIMEOUT, TestSandbox, wait_for};

/// API group of the test parent CRDs.
pub const GROUP: &str = "test.kubectl-meta.dev";

/// What the test hook answers to one call.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body (sent as is).
    pub body: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(v: Value) -> Reply {
        Reply {
            status: 200,
            body: v.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// Any status with a plain body.
    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }
}

/// Hook logic: (hook name from the URL path, request) -> reply.
pub type Handler = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// One recorded hook call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The URL path without the leading slash (`sync`, `finalize`, `customize`, ...).
    pub hook: String,
    /// The request body.
    pub request: Value,
}

impl Call {
    /// `metadata.name` of the request's parent (or decorator target).
    pub fn parent_name(&self) -> String {
        let p = if self.request["parent"].is_object() {
            &self.request["parent"]
        } else {
            &self.request["object"]
        };
        p["metadata"]["name"].as_str().unwrap_or("").to_string()
    }
}

#[derive(Clone)]
struct HookState {
    handler: Arc<Mutex<Handler>>,
    calls: Arc<Mutex<Vec<Call>>>,
}

/// A hook served over HTTP on 127.0.0.1: `POST /<hook>`; the logic can be swapped at any time.
#[derive(Clone)]
pub struct HookServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    state: HookState,
}

impl HookServer {
    /// Start serving `handler`.
    pub async fn start(handler: Handler) -> HookServer {
        let state = HookState {
            handler: Arc::new(Mutex::new(handler)),
            calls: Arc::new(Mutex::new(Vec::new())),
        };
        let app = axum::Router::new()
            .route("/{hook}", axum::routing::post(serve))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind hook server");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        HookServer {
            base: format!("http://{addr}"),
            state,
        }
    }

    /// URL of hook `name`.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    /// Replace the logic.
    pub fn set(&self, handler: Handler) {
        *self.state.handler.lock().unwrap() = handler;
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }

    /// Calls of hook `name` so far.
    pub fn calls_of(&self, name: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.hook == name)
            .collect()
    }

    /// Forget the calls so far.
    pub fn clear(&self) {
        self.state.calls.lock().unwrap().clear();
    }
}

async fn serve(
    State(state): State<HookState>,
    AxPath(hook): AxPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ct != "application/json" {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "want application/json").into_response();
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    state.calls.lock().unwrap().push(Call {
        hook: hook.clone(),
        request: request.clone(),
    });
    let handler = state.handler.lock().unwrap().clone();
    let reply = handler(&hook, &request);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = (
        StatusCode::from_u16(reply.status).expect("status"),
        reply.body,
    )
        .into_response();
    resp.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("header value"),
    );
    for (k, v) in reply.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).expect("header name"),
            v.parse().expect("header value"),
        );
    }
    resp
}

/// A handler that answers every call with the same JSON.
pub fn always(v: Value) -> Handler {
    Arc::new(move |_, _| Reply::json(v.clone()))
}

/// `key=data.k` of every related ConfigMap a sync request shows, sorted, comma-separated.
pub fn related_seen(req: &Value) -> String {
    let mut seen: Vec<String> = req["related"]["ConfigMap.v1"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, o)| format!("{k}={}", o["data"]["k"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    seen.sort();
    seen.join(",")
}

/// A handler from a sync function: request -> response JSON (200).
pub fn sync_fn(f: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Handler {
    Arc::new(move |_, req| Reply::json(f(req)))
}

/// The ApiResource of a test parent kind (`<Kind>` in [`GROUP`]/v1, plural `<kind>s`).
pub fn parent_ar(kind: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// ApiResource of a core/v1 kind (`ConfigMap`, `Pod`, `Secret`, ...).
pub fn core_ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Create a CRD for `<Kind>` in [`GROUP`] (status subresource, schema-less) and wait until it
/// is served.
pub async fn install_crd(client: &kube::Client, kind: &str, namespaced: bool) {
    install_crd_with_schema(
        client,
        kind,
        namespaced,
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .await;
}

/// As [`install_crd`], with `schema` as the openAPIV3Schema (the sandbox prunes and defaults
/// by it).
pub async fn install_crd_with_schema(
    client: &kube::Client,
    kind: &str,
    namespaced: bool,
    schema: Value,
) {
    let ar = parent_ar(kind);
    let crd_ar = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{GROUP}", ar.plural)},
        "spec": {"group": GROUP, "scope": if namespaced {"Namespaced"} else {"Cluster"},
            "names": {"plural": ar.plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": schema}}]}
    }))
    .expect("crd");
    Api::<DynamicObject>::all_with(client.clone(), &crd_ar)
        .create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    wait_for("the CRD to be served", TIMEOUT, || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// A controller definition from JSON (validated like a file would be).
pub fn def(v: Value) -> ControllerDef {
    let name = v["metadata"]["name"].as_str().unwrap_or("test").to_string();
    spec::parse_controller(&v, Source::cluster("test", &name))
        .unwrap_or_else(|e| panic!("definition is invalid: {e}"))
}

/// A CompositeController over `<Kind>` with the given child resources and hooks.
pub fn composite(name: &str, parent_kind: &str, children: Value, hooks: Value) -> Value {
    json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": format!("{GROUP}/v1"),
                "resource": parent_ar(parent_kind).plural},
            "childResources": children,
            "hooks": hooks,
        }
    })
}

/// A running engine with a log of its events.
pub struct Running {
    /// The engine.
    pub engine: Engine,
    /// Every event it published.
    pub events: Arc<Mutex<Vec<EngineEvent>>>,
}

impl Running {
    /// Start an engine on `client` running `defs`, and wait until its controllers started.
    pub async fn start(client: &kube::Client, defs: Vec<ControllerDef>) -> Running {
        Self::start_with(client, defs, EngineOptions::default()).await
    }

    /// As [`Running::start`], with options.
    pub async fn start_with(
        client: &kube::Client,
        defs: Vec<ControllerDef>,
        options: EngineOptions,
    ) -> Running {
        let bus = EventBus::new();
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut rx = bus.subscribe();
        let log = Arc::clone(&events);
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => log.lock().unwrap().push(e),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        panic!("test event log lagged by {n} events")
                    }
                    Err(_) => break,
                }
            }
        });
        let n = defs.len();
        let ctx = Arc::new(EngineContext::new(client.clone(), bus, options).expect("context"));
        let mut engine = Engine::new(ctx);
        // These tests drive readiness themselves and check the engine's syncs: convergence is
        // a sync that writes nothing, as before `--wait-for current` (tested with the binary).
        engine.set_wait_for(kubectl_meta::engine::WaitFor::None);
        for d in defs {
            engine.start(d);
        }
        let running = Running { engine, events };
        let ev = Arc::clone(&running.events);
        wait_for("every controller to start", TIMEOUT, || {
            let started = ev
                .lock()
                .unwrap()
                .iter()
                .filter(|e| matches!(e, EngineEvent::ControllerStarted { .. }))
                .count();
            async move { (started == n).then_some(()) }
        })
        .await;
        running
    }

    /// Wait until nothing is left to do; panics if that takes longer than [`TIMEOUT`] x 2.
    pub async fn converge(&self) -> OnceReport {
        let rep = self.engine.wait_converged(TIMEOUT * 2).await;
        assert!(rep.converged, "engine did not converge: {rep:?}");
        assert!(
            rep.idle_since.is_some(),
            "a converged report says since when the engine was idle: {rep:?}"
        );
        rep
    }

    /// Events so far.
    pub fn events(&self) -> Vec<EngineEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Forget the events so far.
    pub fn clear_events(&self) {
        self.events.lock().unwrap().clear();
    }

    /// Successful writes so far, as `(verb, object)` (object is `namespace/name`).
    pub fn writes(&self) -> Vec<(ActionVerb, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                EngineEvent::Action {
                    verb,
                    object,
                    error: None,
                    ..
                } if verb != ActionVerb::NoOp => Some((verb, object)),
                _ => None,
            })
            .collect()
    }

    /// Failed syncs so far, as `(parent, error)`; a map key sync's parent is `ns/p KEY`.
    pub fn failed_syncs(&self) -> Vec<(String, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                // Named as the human log names it: `ns/p`, `ns/p KEY`, `ns/p (status)`.
                EngineEvent::SyncFinished {
                    subject,
                    error: Some(err),
                    ..
                } => Some((subject.to_string(), err)),
                _ => None,
            })
            .collect()
    }

    /// Wait until a sync of `parent` (`namespace/name`) failed with an error containing `text`.
    pub async fn wait_sync_error(&self, parent: &str, text: &str) -> String {
        wait_for(
            &format!("a failed sync of {parent} mentioning {text:?}"),
            TIMEOUT,
            || {
                let hit = self
                    .failed_syncs()
                    .into_iter()
                    .find(|(p, e)| p == parent && e.contains(text))
                    .map(|(_, e)| e);
                async move { hit }
            },
        )
        .await
    }

    /// Stop the engine.
    pub async fn stop(self) {
        self.engine.shutdown().await;
    }
}

/// Everything a test needs: sandbox, clients, a hook server.
pub struct World {
    /// The sandbox and its client.
    pub sb: TestSandbox,
    /// The hook server.
    pub hook: HookServer,
}

impl World {
    /// A sandbox (fast simulated kubelet), the parent CRD `<Kind>` (namespaced) and a hook
    /// server answering with `handler`.
    pub async fn new(parent_kind: &str, handler: Handler) -> World {
        let sb = super::start().await;
        install_crd(&sb.client, parent_kind, true).await;
        let hook = HookServer::start(handler).await;
        World { sb, hook }
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.sb.client
    }

    /// API for `ar` in namespace `default`.
    pub fn api(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.sb.client.clone(), "default", ar)
    }

    /// Create an object from JSON in namespace `default` (kind/apiVersion from `ar`).
    pub async fn create(&self, ar: &ApiResource, mut obj: Value) -> DynamicObject {
        obj["apiVersion"] = json!(ar.api_version);
        obj["kind"] = json!(ar.kind);
        let o: DynamicObject = serde_json::from_value(obj).expect("object");
        self.api(ar)
            .create(&PostParams::default(), &o)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", ar.kind))
    }

    /// Get an object from namespace `default`, if it exists.
    pub async fn get(&self, ar: &ApiResource, name: &str) -> Option<Value> {
        self.api(ar)
            .get_opt(name)
            .await
            .expect("get")
            .map(|o| serde_json::to_value(o).expect("json"))
    }

    /// Names of the objects of `ar` in namespace `default`, sorted, without the ones every
    /// cluster keeps there itself.
    pub async fn names(&self, ar: &ApiResource) -> Vec<String> {
        let mut v: Vec<String> = self
            .api(ar)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .filter(|n| !cluster_provided(ar, n))
            .collect();
        v.sort();
        v
    }

    /// Objects of `ar` in `default` by name, without the ones every cluster keeps there itself.
    pub async fn objects(&self, ar: &ApiResource) -> BTreeMap<String, Value> {
        self.api(ar)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter(|o| !cluster_provided(ar, o.metadata.name.as_deref().unwrap_or_default()))
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    serde_json::to_value(o).expect("json"),
                )
            })
            .collect()
    }

    /// Merge-patch an object in `default`.
    pub async fn patch(&self, ar: &ApiResource, name: &str, patch: Value) {
        self.api(ar)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", ar.kind));
    }

    /// Merge-patch an object's status subresource in `default`.
    pub async fn patch_status(&self, ar: &ApiResource, name: &str, patch: Value) {
        self.api(ar)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch status {} {name}: {e}", ar.kind));
    }

    /// Delete an object in `default` (background propagation).
    pub async fn delete(&self, ar: &ApiResource, name: &str) {
        self.api(ar)
            .delete(name, &DeleteParams::background())
            .await
            .unwrap_or_else(|e| panic!("delete {} {name}: {e}", ar.kind));
    }

    /// Wait until the names of `ar` in `default` are exactly `want`.
    pub async fn wait_names(&self, ar: &ApiResource, want: &[&str]) {
        let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want.sort();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let got = self.names(ar).await;
            if got == want {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out after {TIMEOUT:?} waiting for {} names {want:?}; last seen {got:?}",
                    ar.kind
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait until `check` holds for the object `name` of `ar` (None = absent).
    pub async fn wait_object(
        &self,
        ar: &ApiResource,
        name: &str,
        what: &str,
        check: impl Fn(Option<&Value>) -> bool,
    ) -> Option<Value> {
        wait_for(what, TIMEOUT, || {
            let check = &check;
            async move {
                let o = self.get(ar, name).await;
                check(o.as_ref()).then_some(o)
            }
        })
        .await
    }

    /// Kubernetes Events whose involvedObject is `name`, as `(reason, message)`.
    pub async fn k8s_events(&self, name: &str) -> Vec<(String, String)> {
        let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(self.sb.client.clone());
        api.list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// The sandbox's current global resourceVersion (any write moves it).
    pub async fn global_rv(&self) -> u64 {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.sb.client.clone());
        api.list_metadata(&ListParams::default().limit(1))
            .await
            .expect("list")
            .metadata
            .resource_version
            .and_then(|r| r.parse().ok())
            .expect("list resourceVersion")
    }
}

/// The children of the "counted" test hooks: ConfigMaps `<parent>-<i>` for i in
/// 0..spec.count, labelled `app: <parent>`, with data from spec.value (default `v1`).
pub fn counted_children(req: &Value) -> Vec<Value> {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap_or("");
    let n = p["spec"]["count"].as_u64().unwrap_or(0);
    let value = p["spec"]["value"].as_str().unwrap_or("v1");
    (0..n)
        .map(|i| {
            let mut c = configmap(&format!("{name}-{i}"), json!({"value": value}));
            c["metadata"]["labels"] = json!({"app": name});
            c
        })
        .collect()
}

/// A ConfigMap child (for hook answers).
pub fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// The controller reference of `obj`, if any: (kind, name, uid).
pub fn controller_ref(obj: &Value) -> Option<(String, String, String)> {
    obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == json!(true))
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("").to_string(),
                r["name"].as_str().unwrap_or("").to_string(),
                r["uid"].as_str().unwrap_or("").to_string(),
            )
        })
}

/// Kubernetes Events whose involvedObject is `name`, as `(type, reason, message, count)`.
pub async fn k8s_events_typed(
    client: &kube::Client,
    name: &str,
) -> Vec<(String, String, String, i32)> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.count.unwrap_or(0),
            )
        })
        .collect()
}

/// Create a namespace.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    api.create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// The sync-relevant identity of objects by name: `(uid, resourceVersion)`.
pub fn versions(objs: &BTreeMap<String, Value>) -> BTreeMap<String, (String, String)> {
    objs.iter()
        .map(|(n, o)| {
            (
                n.clone(),
                (
                    o["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ),
            )
        })
        .collect()
}

impl World {
    /// As [`World::new`], with the sandbox's simulated kubelet turned off: pods stay without
    /// status until the test writes it (readiness under the test's control).
    pub async fn without_kubelet(parent_kind: &str, handler: Handler) -> World {
        let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
        cfg.tunables.kubelet_delay = None;
        let sb = super::start_with(cfg).await;
        install_crd(&sb.client, parent_kind, true).await;
        let hook = HookServer::start(handler).await;
        World { sb, hook }
    }
}

impl Running {
    /// Wait until the engine is idle (nothing queued or syncing, no unconfirmed writes, no sync
    /// started or finished for a while) while allowing rollouts to stay pending, which
    /// [`Running::converge`] does not. Failed parents do not keep it waiting.
    pub async fn settle(&self) -> OnceReport {
        let deadline = tokio::time::Instant::now() + TIMEOUT * 2;
        let count = |ev: &[EngineEvent]| {
            let started = ev
                .iter()
                .filter(|e| matches!(e, EngineEvent::SyncStarted { .. }))
                .count();
            let finished = ev
                .iter()
                .filter(|e| matches!(e, EngineEvent::SyncFinished { .. }))
                .count();
            (started, finished)
        };
        let mut quiet = 0;
        let mut last = count(&self.events());
        loop {
            let rep = self.engine.wait_converged(Duration::from_millis(100)).await;
            let now = count(&self.events());
            let busy = rep
                .pending
                .iter()
                .any(|(_, m)| !m.ends_with("rollout in progress"));
            if busy || now != last || now.0 != now.1 {
                quiet = 0;
            } else {
                quiet += 1;
                if quiet >= 4 {
                    return rep;
                }
            }
            last = now;
            if tokio::time::Instant::now() > deadline {
                panic!("engine did not settle: {rep:?}");
            }
        }
    }
}

/// The status condition of type `type_` of `obj`, if any.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == json!(type_))
}

/// Objects a cluster keeps in every namespace, or in `default`, by itself (kube-apiserver and
/// kube-controller-manager do, and so does the sandbox): not the engine's children.
pub fn cluster_provided(ar: &ApiResource, name: &str) -> bool {
    matches!(
        (ar.kind.as_str(), name),
        ("ConfigMap", "kube-root-ca.crt")
            | ("ServiceAccount", "default")
            | ("Service" | "Endpoints" | "EndpointSlice", "kubernetes")
    )
}
