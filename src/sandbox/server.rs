//! The HTTP front: authentication, routing, query/body decoding, and dispatch of each verb to
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

use super::openapi;
use super::ops::{self, DeleteOpts, Deleted, FieldValidation, PatchKind, Propagation, WriteOpts};
use super::output::{self, Output};
use super::request::{self, ResourcePath, Route};
use super::resources::ResourceDef;
use super::state::State;
use super::status::{ApiError, ApiResult, Target, success_status};
use super::store::WatchStart;
use super::watch::{self, Filter, WatchParams};
use crate::k8s::selector::{FieldSelector, LabelSelector};

/// The Kubernetes version the sandbox reports.
pub const KUBE_VERSION: (&str, &str) = ("1", "33");

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

fn authorized(state: &State, headers: &HeaderMap) -> bool {
    let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(tok) = v.strip_prefix("Bearer ") else {
        return false;
    };
    // Constant-time comparison.
    tok.len() == state.token.len()
        && tok
            .bytes()
            .zip(state.token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

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

/// `GET /openapi/v2`: an OpenAPI v2 document without definitions (protobuf, as kubectl asks
/// for it, or JSON), so kubectl's client-side validation finds no schema instead of failing,
/// and an unserved kind ends in kubectl's "no matches for kind".
fn openapi_v2(headers: &HeaderMap) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !accept.contains("protobuf") {
        return value_resp(StatusCode::OK, &openapi::v2_json(), &[]);
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

fn value_resp(code: StatusCode, v: &Value, warnings: &[String]) -> Response {
    json_resp(code, v.to_string(), warnings)
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
    match route {
        Route::Health => return Ok((StatusCode::OK, "ok").into_response()),
        Route::Version => {
            return Ok(value_resp(
                StatusCode::OK,
                &json!({"major": KUBE_VERSION.0, "minor": KUBE_VERSION.1,
                    "gitVersion": format!("v{}.{}.0-kubectl-meta-sandbox", KUBE_VERSION.0, KUBE_VERSION.1),
                    "gitCommit": env!("CARGO_PKG_VERSION"), "gitTreeState": "clean",
                    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "n/a (Rust)", "compiler": "rustc",
                    "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)}),
                &[],
            ));
        }
        _ => {}
    }
    if !authorized(&state, req.headers()) {
        return Err(ApiError::unauthorized());
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
        Route::OpenApiV2 => Ok(openapi_v2(req.headers())),
        Route::OpenApiV3(None) => Ok(value_resp(StatusCode::OK, &openapi::index(&reg()), &[])),
        Route::OpenApiV3(Some(p)) => {
            let v = openapi::group_version(&reg(), &p)
                .ok_or_else(|| ApiError::no_route(req.uri().path()))?;
            Ok(value_resp(StatusCode::OK, &v, &[]))
        }
        Route::Resource(rp) => resource(state, rp, params, req).await,
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
    Ok(Filter { labels, fields })
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

async fn resource(
    state: Arc<State>,
    rp: ResourcePath,
    p: Params,
    req: Request,
) -> ApiResult<Response> {
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
    let ns = rp.namespace.clone();
    let method = req.method().clone();
    let headers = req.headers().clone();
    let sub = rp.subresource.as_deref();
    if sub == Some("log") && def.group_resource() == "/pods" && method == Method::GET {
        let name = rp.name.clone().unwrap_or_default();
        let tail =
            match p.get("tailLines") {
                Some(t) => Some(t.parse::<usize>().map_err(|_| {
                    ApiError::bad_request(format!("tailLines: invalid value {t:?}"))
                })?),
                None => None,
            };
        let text = super::logs::pod_log(
            &state,
            ns.as_deref().unwrap_or_default(),
            &name,
            p.get("container").map(String::as_str),
            tail,
        )?;
        return Ok((StatusCode::OK, [("content-type", "text/plain")], text).into_response());
    }
    if let Some(s) = sub
        && !(s == "status" && def.status_subresource
            || s == "finalize" && def.group_resource() == "/namespaces")
    {
        return Err(ApiError::no_route(req.uri().path()));
    }
    let is_watch = rp.watch_prefix || param_bool(&p, "watch");
    match (method, rp.name.clone()) {
        (Method::GET, None) if is_watch => {
            let out = output::negotiate(accept.as_deref())?;
            let filter = filter_from(&def, &p)?;
            let rv = p.get("resourceVersion").filter(|s| !s.is_empty());
            let send_initial = p.get("sendInitialEvents").map(|s| s == "true");
            let start = match (rv.map(String::as_str), send_initial) {
                (_, Some(true)) => WatchStart::InitialState,
                (None | Some("0"), Some(false)) => WatchStart::Now,
                (None | Some("0"), None) => WatchStart::InitialState,
                (Some(rv), _) => {
                    let n = rv.parse::<u64>().map_err(|_| {
                        ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                    })?;
                    WatchStart::After(n.min(state.store.rv()))
                }
            };
            let bookmarks = param_bool(&p, "allowWatchBookmarks");
            if send_initial == Some(true) && !bookmarks {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "sendInitialEvents is only supported with allowWatchBookmarks=true",
                ));
            }
            let params = WatchParams {
                start,
                timeout: parse_timeout(&p)?,
                bookmarks,
                initial_events_end: send_initial == Some(true),
                output: out,
                include_object,
            };
            Ok(watch::serve(state.clone(), def, ns, filter, params))
        }
        (Method::GET, None) => {
            let out = output::negotiate(accept.as_deref())?;
            let filter = filter_from(&def, &p)?;
            let limit = match p.get("limit").filter(|s| !s.is_empty()) {
                None => None,
                // Like kube-apiserver: an int64, and zero or less means no limit.
                Some(l) => match l.parse::<i64>() {
                    Ok(n) if n <= 0 => None,
                    Ok(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    Err(_) => {
                        return Err(ApiError::bad_request(format!("limit: invalid value {l:?}")));
                    }
                },
            };
            let after = match p.get("continue").filter(|s| !s.is_empty()) {
                Some(c) => Some(decode_continue(c)?),
                None => None,
            };
            let page = state
                .store
                .list(&def.group_resource(), ns.as_deref(), after, limit, |s| {
                    filter.matches(s)
                });
            let cont = page.next_after.as_ref().map(|(a, b)| encode_continue(a, b));
            let body = output::list(
                &def,
                &out,
                &include_object,
                &page.items,
                page.rv,
                cont,
                page.remaining,
            )?;
            Ok(json_resp(StatusCode::OK, body, &[]))
        }
        (Method::GET, Some(name)) => {
            let out = output::negotiate(accept.as_deref())?;
            let k = ops::key(&def, ns.as_deref(), &name);
            let s = state.store.get(&k.gr, &k.ns, &name).ok_or_else(|| {
                ApiError::not_found(Target {
                    group: &def.group,
                    resource: &def.plural,
                    name: &name,
                })
            })?;
            if out == Output::Json {
                return Ok(json_resp(
                    StatusCode::OK,
                    output::served_bytes(&def, &s),
                    &[],
                ));
            }
            let v = ops::as_served(
                &def,
                s.value().map_err(|e| ApiError::internal(e.to_string()))?,
            );
            Ok(value_resp(
                StatusCode::OK,
                &output::object(&def, &out, &include_object, &v)?,
                &[],
            ))
        }
        (Method::POST, None) => {
            let opts = write_opts(&p, &headers)?;
            let body = read_body(&state, req).await?;
            let obj = decode_object(&def, &headers, &body)?;
            let w = ops::create(&state, &def, ns.as_deref(), obj, &opts)?;
            after_write(&state, &def, &w.obj);
            Ok(value_resp(StatusCode::CREATED, &w.obj, &w.warnings))
        }
        (Method::PUT, Some(name)) => {
            let opts = write_opts(&p, &headers)?;
            let body = read_body(&state, req).await?;
            let obj = decode_object(&def, &headers, &body)?;
            let w = ops::update(&state, &def, ns.as_deref(), &name, sub, obj, &opts)?;
            after_write(&state, &def, &w.obj);
            Ok(value_resp(StatusCode::OK, &w.obj, &w.warnings))
        }
        (Method::PATCH, Some(name)) => {
            let opts = write_opts(&p, &headers)?;
            let mt = media_type(&headers);
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
                        force: param_bool(&p, "force"),
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
            let body = read_body(&state, req).await?;
            let pv = decode(&body, matches!(kind, PatchKind::Apply { .. }))?;
            let w = ops::patch(&state, &def, ns.as_deref(), &name, sub, kind, &pv, &opts)?;
            after_write(&state, &def, &w.obj);
            let code = if w.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(value_resp(code, &w.obj, &w.warnings))
        }
        (Method::DELETE, Some(name)) => {
            let body = read_body(&state, req).await?;
            let opts = delete_opts(&p, &body)?;
            let k = ops::key(&def, ns.as_deref(), &name);
            match ops::delete(&state, &def, &k, &opts)? {
                Deleted::Gone(v) => {
                    after_write(&state, &def, &v);
                    if def.group_resource() == "/namespaces" {
                        let uid = v["metadata"]["uid"].as_str().unwrap_or_default();
                        let t = Target {
                            group: &def.group,
                            resource: &def.plural,
                            name: &name,
                        };
                        return Ok(value_resp(StatusCode::OK, &success_status(t, uid), &[]));
                    }
                    Ok(value_resp(StatusCode::OK, &v, &[]))
                }
                Deleted::Pending(v) => {
                    after_write(&state, &def, &v);
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
        (Method::DELETE, None) => {
            if def.group_resource() == "/namespaces" {
                return Err(ApiError::method_not_allowed(
                    "deletecollection",
                    "Namespace",
                ));
            }
            let filter = filter_from(&def, &p)?;
            let body = read_body(&state, req).await?;
            let opts = delete_opts(&p, &body)?;
            let page = state
                .store
                .list(&def.group_resource(), ns.as_deref(), None, None, |s| {
                    filter.matches(s)
                });
            let mut items = Vec::new();
            for s in &page.items {
                match ops::delete(&state, &def, &s.key, &opts) {
                    Ok(Deleted::Gone(v) | Deleted::Pending(v)) => items.push(v),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let list = json!({"kind": def.list_kind, "apiVersion": def.api_version(),
                "metadata": {"resourceVersion": state.store.rv().to_string()}, "items": items});
            Ok(value_resp(StatusCode::OK, &list, &[]))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str(), &def.kind)),
    }
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
