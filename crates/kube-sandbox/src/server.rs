//! The HTTP front: authentication and authorization (through [`auth`](super::auth) and
//! [`rbac`](super::rbac)), routing, query/body decoding, and dispatch of each verb to
//! [`ops`](super::ops), [`watch`](super::watch) and the discovery documents.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State as AxState};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use super::auth::{self, UserInfo};
use super::ops::{self, DeleteOpts, Deleted, FieldValidation, PatchKind, Propagation, WriteOpts};
use super::output::{self, Output};
use super::rbac;
use super::request::{self, ResourcePath, Route};
use super::resources::ResourceDef;
use super::shard::ShardSelector;
use super::state::State;
use super::status::{ApiError, ApiResult, Target, success_status};
use super::store::WatchStart;
use super::watch::{self, Filter, WatchParams};
use super::{openapi, version};
use kube_apimachinery::selector::{FieldSelector, LabelSelector};

/// Build the router for one sandbox.
pub fn router(state: Arc<State>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

async fn handle(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match dispatch(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    resp
}

type Params = HashMap<String, String>;

fn json_resp(code: StatusCode, body: impl Into<Body>, warnings: &[String]) -> Response {
    let mut r = Response::builder()
        .status(code)
        .header("content-type", "application/json");
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        r = r.header("warning", format!("299 - \"{escaped}\""));
    }
    r.body(body.into())
        .unwrap_or_else(|e| ApiError::internal(e.to_string()).into_response())
}

/// `GET /openapi/v2`: JSON with every definition; as protobuf (kubectl asks for it) a document
/// without definitions, so kubectl's v2 client-side checks find no schema instead of failing,
/// and an unserved kind ends in kubectl's "no matches for kind".
fn openapi_v2(headers: &HeaderMap, reg: &super::resources::Registry) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !accept.contains("protobuf") {
        return value_resp(StatusCode::OK, &openapi::v2_json(reg), &[]);
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(
            "content-type",
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        )
        .body(Body::from(openapi::v2_protobuf()))
        .unwrap_or_else(|e| ApiError::internal(e.to_string()).into_response())
}

/// A JSON answer, ending in a newline as kube-apiserver's (Go's `json.Encoder`) do.
fn value_resp(code: StatusCode, v: &Value, warnings: &[String]) -> Response {
    let mut body = v.to_string();
    body.push('\n');
    json_resp(code, body, warnings)
}

fn wants_aggregated(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get("accept").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    accept.split(',').any(|part| {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        params.contains(&"as=APIGroupDiscoveryList")
            && params.contains(&"v=v2")
            && params.contains(&"g=apidiscovery.k8s.io")
    })
}

async fn dispatch(state: Arc<State>, req: Request) -> ApiResult<Response> {
    let route = request::parse(req.uri().path());
    let params: Params = Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
    // Who is asking, and may they? (kube-apiserver's authentication, impersonation and
    // authorization filters, in that order; `/version` and the health checks too: anonymous
    // requests may read them through `system:public-info-viewer`, a wrong token may not.)
    let cert = req.extensions().get::<auth::ClientCert>().cloned();
    let user = auth::authenticate(
        &state.auth,
        &state.token,
        &state.store,
        req.headers(),
        cert.as_ref(),
    )?;
    let attrs = rbac::attributes::of_request(&route, req.uri().path(), req.method(), &params);
    let user = auth::impersonate(&state.rbac, &state.store, user, req.headers(), &attrs)?;
    state.rbac.check(&state.store, &user, &attrs)?;
    match &route {
        Route::Health => return Ok((StatusCode::OK, "ok").into_response()),
        Route::Version => {
            return Ok(value_resp(
                StatusCode::OK,
                &json!({"major": version::MAJOR.to_string(), "minor": version::MINOR.to_string(),
                    "emulationMajor": version::MAJOR.to_string(), "emulationMinor": version::MINOR.to_string(),
                    "minCompatibilityMajor": version::MAJOR.to_string(),
                    "minCompatibilityMinor": version::MIN_COMPATIBILITY_MINOR.to_string(),
                    "gitVersion": format!("{}-kubectl-meta-sandbox", version::GIT_VERSION),
                    "gitCommit": env!("CARGO_PKG_VERSION"), "gitTreeState": "clean",
                    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "n/a (Rust)", "compiler": "rustc",
                    "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)}),
                &[],
            ));
        }
        _ => {}
    }
    let headers = req.headers().clone();
    let reg = || state.registry();
    match route {
        Route::Api | Route::Apis => {
            let core = route == Route::Api;
            if wants_aggregated(&headers) {
                let body = reg().aggregated(core).to_string();
                return Ok(Response::builder()
                    .status(200)
                    .header(
                        "content-type",
                        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                    )
                    .body(Body::from(body))
                    .unwrap_or_else(|e| ApiError::internal(e.to_string()).into_response()));
            }
            let v = if core {
                reg().api_versions()
            } else {
                reg().api_group_list()
            };
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::ApiGroup(g) => {
            let v = reg()
                .api_group(&g)
                .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::ApiResources { group, version } => {
            let v = reg()
                .api_resource_list(&group, &version)
                .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::OpenApiV2 => Ok(openapi_v2(req.headers(), &reg())),
        Route::OpenApiV3(None) => Ok(value_resp(StatusCode::OK, &openapi::index(&reg()), &[])),
        Route::OpenApiV3(Some(p)) => {
            let v = openapi::group_version(&reg(), &p)
                .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::Resource(rp) => resource(state, rp, params, req, user).await,
        Route::Unknown if req.method() == Method::GET => {
            let v = auth::endpoints::oidc(&state, req.uri().path())
                .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::Unknown | Route::Health | Route::Version => {
            Err(ApiError::no_route(req.uri().path()))
        }
    }
}

fn param_bool(p: &Params, k: &str) -> bool {
    matches!(p.get(k).map(String::as_str), Some("true" | "1"))
}

fn write_opts(p: &Params, headers: &HeaderMap) -> ApiResult<WriteOpts> {
    let dry_run = match p.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value {other:?}: supported values: \"All\""
            )));
        }
    };
    let field_validation = match p.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            )));
        }
    };
    let field_manager = match p.get("fieldManager") {
        Some(m) if m.len() > 128 => {
            return Err(ApiError::bad_request(
                "fieldManager: Too long: may not be longer than 128",
            ));
        }
        Some(m) if !m.is_empty() => m.clone(),
        _ => headers
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .chars()
            .take(128)
            .collect(),
    };
    Ok(WriteOpts {
        dry_run,
        field_manager,
        field_validation,
    })
}

async fn read_body(state: &State, req: Request) -> ApiResult<Bytes> {
    let limit = state.tunables.max_body_bytes;
    if let Some(len) = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return Err(ApiError::too_large(limit));
    }
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

fn media_type(headers: &HeaderMap) -> String {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn decode(body: &[u8], yaml: bool) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if !yaml => Err(ApiError::bad_request(format!(
            "couldn't get version/kind; json parse error: {e}"
        ))),
        Err(_) => {
            let s = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
            serde_saphyr::from_str::<Value>(s)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }
    }
}

fn decode_object(def: &ResourceDef, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let mt = media_type(headers);
    match mt.as_str() {
        "application/json" | "" | "*/*" => decode(body, false),
        "application/yaml" => decode(body, true),
        // Custom resources have no protobuf form, as on a real cluster.
        super::protobuf::CONTENT_TYPE if !def.is_custom() => {
            super::protobuf::decode(body).map_err(|e| ApiError::bad_request(e.to_string()))
        }
        other => Err(ApiError::unsupported_media_type(
            other,
            "application/json, application/yaml",
        )),
    }
}

fn filter_from(def: &ResourceDef, p: &Params) -> ApiResult<Filter> {
    let labels = match p.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let fields = match p.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => {
            let f = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let allowed = allowed_fields(def);
            for k in f.keys() {
                if !allowed.contains(&k) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {k} (supported for {}: {})",
                        def.plural,
                        allowed.join(", ")
                    )));
                }
            }
            Some(f)
        }
        None => None,
    };
    Ok(Filter {
        labels,
        fields,
        shard: None,
    })
}

/// KEP-5866 `shardSelector` of a list or watch: with the `ShardedListAndWatch` gate off (a 1.36
/// server's default) or empty it is ignored, as kube-apiserver ignores it; one that does not
/// parse is kube-apiserver's plain-error 500 (no reason), since its registry returns a bare Go
/// error.
fn shard_from(state: &State, p: &Params) -> ApiResult<Option<Arc<ShardSelector>>> {
    if !state.features.sharded_list_and_watch {
        return Ok(None);
    }
    match p.get("shardSelector").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(text) => ShardSelector::parse(text)
            .map(|s| Some(Arc::new(s)))
            .map_err(|e| ApiError::new(500, "", format!("invalid shard selector: {e}"))),
    }
}

fn allowed_fields(def: &ResourceDef) -> Vec<&'static str> {
    let mut v = vec!["metadata.name", "metadata.namespace"];
    let extra: &[&str] = match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    };
    v.extend_from_slice(extra);
    v
}

fn hex_encode(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

fn encode_continue(ns: &str, name: &str) -> String {
    hex_encode(&format!("{ns}\n{name}"))
}

fn decode_continue(c: &str) -> ApiResult<(String, String)> {
    hex_decode(c)
        .and_then(|s| {
            s.split_once('\n')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .ok_or_else(|| {
            ApiError::bad_request("continue key is not valid: it was not issued by this server")
        })
}

fn parse_timeout(p: &Params) -> ApiResult<Option<Duration>> {
    match p.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(|n| Some(Duration::from_secs(n)))
            .map_err(|_| ApiError::bad_request(format!("timeoutSeconds: invalid value {s:?}"))),
    }
}

/// One request on a resource path, as parsed: the resource it names, where, and what its query
/// and headers ask for.
struct ResourceCall {
    def: Arc<ResourceDef>,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    watch: bool,
    params: Params,
    headers: HeaderMap,
    accept: Option<String>,
    include_object: String,
    /// Who asks (for the RBAC escalation checks).
    user: UserInfo,
}

/// Serve one request on a resource path: parse it, admit the subresource, run the verb.
async fn resource(
    state: Arc<State>,
    rp: ResourcePath,
    p: Params,
    req: Request,
    user: UserInfo,
) -> ApiResult<Response> {
    if auth::endpoints::handles(&rp) {
        return auth::endpoints::serve(&state, &user, &rp, req).await;
    }
    let call = parse_resource_call(&state, rp, p, &req, user)?;
    if call.sub.as_deref() == Some("log")
        && call.def.group_resource() == "/pods"
        && req.method() == Method::GET
    {
        return pod_log(&state, &call);
    }
    if call.sub.as_deref() == Some("proxy") && call.def.group_resource() == "/pods" {
        let (ns, id) = (
            call.ns.clone().unwrap_or_default(),
            call.name.clone().unwrap_or_default(),
        );
        return super::proxy::serve(&state, &ns, &id, req).await;
    }
    admit_subresource(&call, req.uri().path())?;
    dispatch_verb(state, call, req).await
}

/// Parse a resource request: look its resource up (a namespace only where the resource is
/// namespaced) and read the `Accept` header and `includeObject`.
fn parse_resource_call(
    state: &State,
    rp: ResourcePath,
    p: Params,
    req: &Request,
    user: UserInfo,
) -> ApiResult<ResourceCall> {
    let def = state
        .registry()
        .get(&rp.group, &rp.version, &rp.resource)
        .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
    if rp.namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route(req.uri().path()));
    }
    let accept = req
        .headers()
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let include_object = p
        .get("includeObject")
        .cloned()
        .unwrap_or_else(|| "Metadata".into());
    Ok(ResourceCall {
        def,
        watch: rp.watch_prefix || param_bool(&p, "watch"),
        ns: rp.namespace,
        name: rp.name,
        sub: rp.subresource,
        params: p,
        headers: req.headers().clone(),
        accept,
        include_object,
        user,
    })
}

/// `GET pods/NAME/log`: the pod's log as plain text.
fn pod_log(state: &Arc<State>, call: &ResourceCall) -> ApiResult<Response> {
    let tail = match call.params.get("tailLines") {
        Some(t) => Some(
            t.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("tailLines: invalid value {t:?}")))?,
        ),
        None => None,
    };
    let (ns, name) = (
        call.ns.clone().unwrap_or_default(),
        call.name.clone().unwrap_or_default(),
    );
    let (text, container) = super::logs::pod_log(
        state,
        &ns,
        &name,
        call.params.get("container").map(String::as_str),
        tail,
    )?;
    if !param_bool(&call.params, "follow") {
        return Ok((StatusCode::OK, [("content-type", "text/plain")], text).into_response());
    }
    let stream = super::logs::follow(state.clone(), ns, name, container, text);
    Ok((
        StatusCode::OK,
        [("content-type", "text/plain")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Admit only the subresources the resource serves: `status` where it has one, `finalize` on
/// namespaces; any other is not found, as on kube-apiserver.
fn admit_subresource(call: &ResourceCall, path: &str) -> ApiResult<()> {
    if let Some(s) = call.sub.as_deref()
        && !(s == "status" && call.def.status_subresource
            || s == "scale" && call.def.has_scale()
            || s == "finalize" && call.def.group_resource() == "/namespaces")
    {
        return Err(ApiError::no_route(path));
    }
    Ok(())
}

/// Run the request's verb: watch, list, get, create, update, patch, delete or delete a
/// collection.
async fn dispatch_verb(state: Arc<State>, call: ResourceCall, req: Request) -> ApiResult<Response> {
    if call.sub.as_deref() == Some("scale") {
        return scale_verb(&state, &call, req).await;
    }
    match (req.method().clone(), call.name.clone()) {
        (Method::GET, None) if call.watch => watch_resource(state, call),
        (Method::GET, None) => list_resource(&state, &call),
        (Method::GET, Some(name)) => get_resource(&state, &call, &name),
        (Method::POST, None) => create_or_update(&state, &call, None, req).await,
        (Method::PUT, Some(name)) => create_or_update(&state, &call, Some(&name), req).await,
        (Method::PATCH, Some(name)) => patch_resource(&state, &call, &name, req).await,
        (Method::DELETE, Some(name)) => delete_resource(&state, &call, &name, req).await,
        (Method::DELETE, None) => delete_collection(&state, &call, req).await,
        (m, _) => Err(ApiError::method_not_allowed(m.as_str(), &call.def.kind)),
    }
}

/// Where a watch starts, from `resourceVersion` and `sendInitialEvents`.
fn watch_start(state: &State, p: &Params, send_initial: Option<bool>) -> ApiResult<WatchStart> {
    let rv = p.get("resourceVersion").filter(|s| !s.is_empty());
    Ok(match (rv.map(String::as_str), send_initial) {
        (_, Some(true)) => WatchStart::InitialState,
        (None | Some("0"), Some(false)) => WatchStart::Now,
        (None | Some("0"), None) => WatchStart::InitialState,
        (Some(rv), _) => {
            let n = rv
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
            WatchStart::After(n.min(state.store.rv()))
        }
    })
}

/// `GET` a collection with `watch`: a stream of watch events.
fn watch_resource(state: Arc<State>, call: ResourceCall) -> ApiResult<Response> {
    let p = &call.params;
    let out = output::negotiate(call.accept.as_deref())?;
    let mut filter = filter_from(&call.def, p)?;
    let send_initial = p.get("sendInitialEvents").map(|s| s == "true");
    let start = watch_start(&state, p, send_initial)?;
    let bookmarks = param_bool(p, "allowWatchBookmarks");
    if send_initial == Some(true) && !bookmarks {
        return Err(ApiError::new(
            422,
            "Invalid",
            "sendInitialEvents is only supported with allowWatchBookmarks=true",
        ));
    }
    filter.shard = shard_from(&state, p)?;
    let params = WatchParams {
        start,
        timeout: parse_timeout(p)?,
        bookmarks,
        initial_events_end: send_initial == Some(true),
        output: out,
        include_object: call.include_object,
    };
    Ok(watch::serve(
        state.clone(),
        call.def,
        call.ns,
        filter,
        params,
    ))
}

/// The `limit` of a list; like kube-apiserver an int64, and zero or less means no limit.
fn list_limit(p: &Params) -> ApiResult<Option<usize>> {
    match p.get("limit").filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n <= 0 => Ok(None),
            Ok(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            Err(_) => Err(ApiError::bad_request(format!("limit: invalid value {l:?}"))),
        },
    }
}

/// `GET` a collection: one page of the matching objects, as a list or a Table.
fn list_resource(state: &State, call: &ResourceCall) -> ApiResult<Response> {
    let p = &call.params;
    let def = &call.def;
    let out = output::negotiate(call.accept.as_deref())?;
    let mut filter = filter_from(def, p)?;
    let limit = list_limit(p)?;
    let after = match p.get("continue").filter(|s| !s.is_empty()) {
        Some(c) => Some(decode_continue(c)?),
        None => None,
    };
    filter.shard = shard_from(state, p)?;
    let page = state.store.list(
        &def.group_resource(),
        call.ns.as_deref(),
        after,
        limit,
        |s| filter.matches(s),
    );
    let cont = page.next_after.as_ref().map(|(a, b)| encode_continue(a, b));
    let body = output::list(
        def,
        &out,
        &call.include_object,
        &page.items,
        output::ListMeta {
            rv: page.rv,
            cont,
            remaining: page
                .remaining
                .filter(|_| filter.labels.is_none() && filter.fields.is_none()),
            shard: filter.shard.as_ref().map(|s| s.canonical()),
        },
    )?;
    Ok(json_resp(StatusCode::OK, body, &[]))
}

/// `GET` one object, as stored or as a Table.
fn get_resource(state: &State, call: &ResourceCall, name: &str) -> ApiResult<Response> {
    let def = &call.def;
    let out = output::negotiate(call.accept.as_deref())?;
    let k = ops::key(def, call.ns.as_deref(), name);
    let s = state.store.get(&k.gr, &k.ns, name).ok_or_else(|| {
        ApiError::not_found(Target {
            group: &def.group,
            resource: &def.plural,
            name,
        })
    })?;
    if out == Output::Json {
        return Ok(json_resp(
            StatusCode::OK,
            output::served_bytes(def, &s),
            &[],
        ));
    }
    let v = ops::as_served(
        def,
        s.value().map_err(|e| ApiError::internal(e.to_string()))?,
    );
    Ok(value_resp(
        StatusCode::OK,
        &output::object(def, &out, &call.include_object, &v)?,
        &[],
    ))
}

/// `POST` a collection (create) or `PUT` an object or its subresource (replace): the object
/// in the body.
async fn create_or_update(
    state: &Arc<State>,
    call: &ResourceCall,
    name: Option<&str>,
    req: Request,
) -> ApiResult<Response> {
    let def = &call.def;
    let ns = call.ns.as_deref();
    let opts = write_opts(&call.params, &call.headers)?;
    let body = read_body(state, req).await?;
    let obj = decode_object(def, &call.headers, &body)?;
    if def.group == rbac::GROUP {
        rbac::escalation::check(state, &call.user, &def.plural, ns.unwrap_or_default(), &obj)?;
    }
    let (w, code) = match name {
        None => (
            ops::create(state, def, ns, obj, &opts)?,
            StatusCode::CREATED,
        ),
        Some(name) => {
            let sub = call.sub.as_deref();
            let w = ops::update(state, def, ns, name, sub, obj, &opts)?;
            (w, StatusCode::OK)
        }
    };
    after_write(state, def, &w.obj);
    Ok(value_resp(code, &w.obj, &w.warnings))
}

/// `GET`, `PUT` or `PATCH` of `<resource>/<name>/scale`.
async fn scale_verb(state: &Arc<State>, call: &ResourceCall, req: Request) -> ApiResult<Response> {
    let def = &call.def;
    let ns = call.ns.as_deref();
    let name = call.name.clone().unwrap_or_default();
    let method = req.method().clone();
    if method == Method::GET {
        let scale = super::scale::get(state, def, ns, &name)?;
        return Ok(value_resp(StatusCode::OK, &scale, &[]));
    }
    let opts = write_opts(&call.params, &call.headers)?;
    let (scale, warnings) = if method == Method::PUT {
        let body = read_body(state, req).await?;
        let scale = decode(&body, false)?;
        super::scale::update(state, def, ns, &name, scale, &opts)?
    } else if method == Method::PATCH {
        let kind = patch_kind(&call.params, &call.headers)?;
        let body = read_body(state, req).await?;
        let pv = decode(&body, matches!(kind, PatchKind::Apply { .. }))?;
        super::scale::patch(state, def, ns, &name, kind, &pv, &opts)?
    } else {
        return Err(ApiError::method_not_allowed(method.as_str(), "scale"));
    };
    if !opts.dry_run {
        let k = ops::key(def, ns, &name);
        if let Some(s) = state.store.get(&k.gr, &k.ns, &name)
            && let Ok(v) = s.value()
        {
            after_write(state, def, &v);
        }
    }
    Ok(value_resp(StatusCode::OK, &scale, &warnings))
}

/// The kind of a `PATCH`, from its content type; an apply patch needs a field manager, and
/// only an apply patch may `force`.
fn patch_kind(p: &Params, headers: &HeaderMap) -> ApiResult<PatchKind> {
    let mt = media_type(headers);
    let kind = match mt.as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" => PatchKind::Strategic,
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            if p.get("fieldManager").is_none_or(String::is_empty) {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            PatchKind::Apply {
                force: param_bool(p, "force"),
            }
        }
        other => {
            return Err(ApiError::unsupported_media_type(
                other,
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
            ));
        }
    };
    if p.contains_key("force") && !matches!(kind, PatchKind::Apply { .. }) {
        return Err(ApiError::new(
            422,
            "Invalid",
            "force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    Ok(kind)
}

/// `PATCH` an object (or its subresource); an apply patch may create it (201).
async fn patch_resource(
    state: &Arc<State>,
    call: &ResourceCall,
    name: &str,
    req: Request,
) -> ApiResult<Response> {
    let def = &call.def;
    let opts = write_opts(&call.params, &call.headers)?;
    let kind = patch_kind(&call.params, &call.headers)?;
    let body = read_body(state, req).await?;
    let pv = decode(&body, matches!(kind, PatchKind::Apply { .. }))?;
    let sub = call.sub.as_deref();
    if def.group == rbac::GROUP && !call.user.groups.iter().any(|g| g == auth::MASTERS) {
        // The escalation checks look at the object as the patch leaves it.
        let dry = WriteOpts {
            dry_run: true,
            ..opts.clone()
        };
        let w = ops::patch(state, def, call.ns.as_deref(), name, sub, kind, &pv, &dry)?;
        let ns = call.ns.as_deref().unwrap_or_default();
        rbac::escalation::check(state, &call.user, &def.plural, ns, &w.obj)?;
    }
    let w = ops::patch(state, def, call.ns.as_deref(), name, sub, kind, &pv, &opts)?;
    after_write(state, def, &w.obj);
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(value_resp(code, &w.obj, &w.warnings))
}

/// `DELETE` an object: the object as deleted (a Status for a namespace), or the object still
/// waiting for its finalizers.
async fn delete_resource(
    state: &Arc<State>,
    call: &ResourceCall,
    name: &str,
    req: Request,
) -> ApiResult<Response> {
    let def = &call.def;
    let p = &call.params;
    let body = read_body(state, req).await?;
    let opts = delete_opts(p, &body)?;
    let k = ops::key(def, call.ns.as_deref(), name);
    match ops::delete(state, def, &k, &opts)? {
        Deleted::Gone(v) => {
            after_write(state, def, &v);
            if def.group_resource() == "/namespaces" {
                let uid = v["metadata"]["uid"].as_str().unwrap_or_default();
                let t = Target {
                    group: &def.group,
                    resource: &def.plural,
                    name,
                };
                return Ok(value_resp(StatusCode::OK, &success_status(t, uid), &[]));
            }
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Deleted::Pending(v) => {
            after_write(state, def, &v);
            // Like kube-apiserver: 200 while finalizers are pending, 202 only when the
            // client set the deprecated `orphanDependents: false`.
            let orphan = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|b| b["orphanDependents"].as_bool())
                .or_else(|| p.get("orphanDependents").map(|s| s == "true"));
            let code = if orphan == Some(false) {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(value_resp(code, &v, &[]))
        }
    }
}

/// `DELETE` a collection: delete every matching object (not namespaces, as on kube-apiserver)
/// and return the list of what was deleted.
async fn delete_collection(
    state: &Arc<State>,
    call: &ResourceCall,
    req: Request,
) -> ApiResult<Response> {
    let def = &call.def;
    if def.group_resource() == "/namespaces" {
        return Err(ApiError::method_not_allowed(
            "deletecollection",
            "Namespace",
        ));
    }
    let mut filter = filter_from(def, &call.params)?;
    // kube-apiserver's DeleteCollection lists with the request's ListOptions, shardSelector too.
    filter.shard = shard_from(state, &call.params)?;
    let body = read_body(state, req).await?;
    let opts = delete_opts(&call.params, &body)?;
    let page = state
        .store
        .list(&def.group_resource(), call.ns.as_deref(), None, None, |s| {
            filter.matches(s)
        });
    let mut items = Vec::new();
    for s in &page.items {
        match ops::delete(state, def, &s.key, &opts) {
            Ok(Deleted::Gone(v) | Deleted::Pending(v)) => items.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({"kind": def.list_kind, "apiVersion": def.api_version(),
        "metadata": {"resourceVersion": state.store.rv().to_string()}, "items": items});
    Ok(value_resp(StatusCode::OK, &list, &[]))
}

/// Synchronous follow-ups of a write that the client should observe at once (CRDs get served).
fn after_write(state: &Arc<State>, def: &ResourceDef, obj: &Value) {
    if def.group_resource() == "apiextensions.k8s.io/customresourcedefinitions"
        && let Some(name) = obj["metadata"]["name"].as_str()
    {
        super::controllers::crd::sync(state, name);
    }
}

fn delete_opts(p: &Params, body: &[u8]) -> ApiResult<DeleteOpts> {
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let policy = b["propagationPolicy"]
        .as_str()
        .map(String::from)
        .or_else(|| p.get("propagationPolicy").cloned());
    let orphan = b["orphanDependents"]
        .as_bool()
        .or_else(|| p.get("orphanDependents").map(|s| s == "true"));
    let propagation = match (policy.as_deref(), orphan) {
        (Some("Orphan"), _) | (None, Some(true)) => Some(Propagation::Orphan),
        (Some("Background"), _) => Some(Propagation::Background),
        (Some("Foreground"), _) => Some(Propagation::Foreground),
        (None, _) | (Some(""), _) => None,
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    let dry = b["dryRun"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == "All"))
        || p.get("dryRun").is_some_and(|s| s == "All");
    let rv = match b["preconditions"]["resourceVersion"].as_str() {
        Some(s) if !s.is_empty() => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid resourceVersion precondition {s:?}"))
        })?),
        _ => None,
    };
    let grace_period =
        match b["gracePeriodSeconds"].as_i64() {
            Some(g) => Some(g),
            None => match p.get("gracePeriodSeconds") {
                Some(g) => Some(g.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}"))
                })?),
                None => None,
            },
        };
    Ok(DeleteOpts {
        propagation,
        grace_period,
        uid: b["preconditions"]["uid"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from),
        rv,
        dry_run: dry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_roundtrip_and_reject_garbage() {
        let c = encode_continue("default", "cm-1");
        assert_eq!(
            decode_continue(&c).ok(),
            Some(("default".into(), "cm-1".into()))
        );
        assert!(decode_continue("zz").is_err());
        assert!(decode_continue("abc").is_err());
    }

    #[test]
    fn delete_options_from_body_and_query() {
        let mut p = Params::new();
        p.insert("propagationPolicy".into(), "Foreground".into());
        let o = delete_opts(&p, b"").expect("opts");
        assert_eq!(o.propagation, Some(Propagation::Foreground));
        let o = delete_opts(
            &Params::new(),
            br#"{"preconditions":{"uid":"u"},"orphanDependents":true,"dryRun":["All"]}"#,
        )
        .expect("opts");
        assert_eq!(
            (o.propagation, o.uid.as_deref(), o.dry_run),
            (Some(Propagation::Orphan), Some("u"), true)
        );
        assert!(delete_opts(&Params::new(), br#"{"propagationPolicy":"Sideways"}"#).is_err());
        assert!(delete_opts(&Params::new(), b"{nope").is_err());
    }
}
