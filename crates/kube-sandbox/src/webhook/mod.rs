//! Validating and mutating admission webhooks (`admissionregistration.k8s.io/v1`
//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration), called as kube-apiserver's
//! webhook admission plugins call them (`staging/src/k8s.io/apiserver/pkg/admission/plugin/
//! webhook`): after defaulting, mutating webhooks in name order (of configuration, then of
//! webhook), each may return a JSONPatch; webhooks with `reinvocationPolicy: IfNeeded` run once
//! more when a later one changed the object; then, after validation and right before the
//! object is stored, validating webhooks. A webhook applies when its `rules` (operations,
//! apiGroups, apiVersions, resources with subresources, scope; `matchPolicy`), its
//! `namespaceSelector` (the namespace's labels) and `objectSelector` (the old or new object's
//! labels) select the request. A denial, a failed call under `failurePolicy: Fail`, a dry run
//! to a webhook whose `sideEffects` is not `None`/`NoneOnDryRun`: errors worded as
//! kube-apiserver words them.
//!
//! `matchConditions` (CEL, with `object`, `oldObject` and `request` bound; no `authorizer`)
//! are evaluated after the rules and selectors, as upstream: one false skips the webhook, an
//! error (with none false) rejects the request with 403 under `failurePolicy: Fail` and skips
//! the webhook under `Ignore`.
//!
//! Webhooks are called over HTTPS, verified with `caBundle`: at `clientConfig.url`, or for a
//! `clientConfig.service` at `https://NAME.NAMESPACE.svc:PORT/PATH` (the certificate must name
//! `NAME.NAMESPACE.svc`), connecting to the address [`resolve_service`] finds in the Service's
//! Endpoints or EndpointSlices: there is no cluster network, so they must list an address this
//! machine reaches (a Service without selector and Endpoints on `127.0.0.1`). Webhook configurations themselves never go through
//! webhooks, as upstream.

mod call;
pub mod config;

use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::state::State;
use crate::status::{ApiError, ApiResult};
use kube_apimachinery::selector::LabelSelector;

/// Storage keys of the webhook configurations.
const VALIDATING: &str = "admissionregistration.k8s.io/validatingwebhookconfigurations";
const MUTATING: &str = "admissionregistration.k8s.io/mutatingwebhookconfigurations";

/// One admission request, as the webhooks see it.
pub struct Attributes<'a> {
    /// The resource.
    pub def: &'a ResourceDef,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// The subresource (`status`), if any.
    pub sub: Option<&'a str>,
    /// Namespace ("" for cluster-scoped).
    pub ns: &'a str,
    /// Name ("" for a create with `generateName` before the name is chosen).
    pub name: &'a str,
    /// The stored object before the change (UPDATE, DELETE).
    pub old: Option<&'a Value>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// A webhook with the configuration it comes from.
struct Hook {
    webhook: Value,
}

impl Hook {
    fn name(&self) -> &str {
        self.webhook["name"].as_str().unwrap_or_default()
    }
    fn failure_ignored(&self) -> bool {
        self.webhook["failurePolicy"] == "Ignore"
    }
}

/// The webhooks of every configuration of `gr`, configurations by name, webhooks in order.
fn hooks(state: &State, gr: &str) -> Vec<Hook> {
    let mut configs = state.store.list(gr, None, None, None, |_| true).items;
    configs.sort_by(|a, b| a.key.name.cmp(&b.key.name));
    configs
        .iter()
        .filter(|c| !c.deleting)
        .filter_map(|c| c.value().ok())
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|webhook| Hook { webhook })
        .collect()
}

/// Run the mutating webhooks on `obj` (CREATE, UPDATE). Returns their warnings.
pub fn mutate(state: &State, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<Vec<String>> {
    if skipped(a) {
        return Ok(Vec::new());
    }
    let hooks: Vec<Hook> = hooks(state, MUTATING)
        .into_iter()
        .filter(|h| matches(state, &h.webhook, a, Some(obj)))
        .collect();
    let mut warnings = Vec::new();
    // Index of the last webhook that changed the object, per pass.
    let mut changed_by = None;
    for (i, h) in hooks.iter().enumerate() {
        if call_one(state, a, h, obj, true, &mut warnings)? {
            changed_by = Some(i);
        }
    }
    // `IfNeeded`: once more for those that ran before the last change.
    if let Some(last) = changed_by {
        for h in hooks[..last]
            .iter()
            .filter(|h| h.webhook["reinvocationPolicy"] == "IfNeeded")
        {
            call_one(state, a, h, obj, true, &mut warnings)?;
        }
    }
    Ok(warnings)
}

/// Run the validating webhooks (`obj` is the new object; None for DELETE). Returns warnings.
pub fn validate(state: &State, a: &Attributes<'_>, obj: Option<&Value>) -> ApiResult<Vec<String>> {
    if skipped(a) {
        return Ok(Vec::new());
    }
    let mut warnings = Vec::new();
    for h in hooks(state, VALIDATING) {
        if matches(state, &h.webhook, a, obj) {
            let mut o = obj.cloned().unwrap_or(Value::Null);
            call_one(state, a, &h, &mut o, false, &mut warnings)?;
        }
    }
    Ok(warnings)
}

/// Webhook configurations are not subject to webhooks.
fn skipped(a: &Attributes<'_>) -> bool {
    a.def.group == "admissionregistration.k8s.io"
}

/// Call one webhook; apply its patch when mutating. Returns whether the object changed.
fn call_one(
    state: &State,
    a: &Attributes<'_>,
    h: &Hook,
    obj: &mut Value,
    mutating: bool,
    warnings: &mut Vec<String>,
) -> ApiResult<bool> {
    if let Err(e) = match_conditions(a, h, obj) {
        return match e {
            Skip::NotSelected => Ok(false),
            Skip::Failed(_) if h.failure_ignored() => Ok(false),
            Skip::Failed(err) => {
                let name = if a.name.is_empty() {
                    obj["metadata"]["name"].as_str().unwrap_or_default()
                } else {
                    a.name
                };
                Err(crate::rbac::forbidden_for(
                    &a.def.group,
                    &a.def.plural,
                    name,
                    &err,
                ))
            }
        };
    }
    let name = h.name();
    if a.dry_run
        && !matches!(
            h.webhook["sideEffects"].as_str(),
            Some("None" | "NoneOnDryRun")
        )
    {
        return Err(ApiError::bad_request(format!(
            "admission webhook {name:?} does not support dry run"
        )));
    }
    let uid = crate::state::new_uid();
    let review = review(a, &uid, obj);
    let service = &h.webhook["clientConfig"]["service"];
    let resolved = if service.is_object() {
        resolve_service(state, service).map(Some)
    } else {
        Ok(None)
    };
    let answer = match resolved.and_then(|addr| call::post(&h.webhook, &review, addr)) {
        Ok(v) => v,
        Err(e) if h.failure_ignored() => {
            tracing::warn!(webhook = name, error = %e, "admission webhook failed; ignored (failurePolicy: Ignore)");
            return Ok(false);
        }
        Err(e) => {
            return Err(ApiError::internal_error(&format!(
                "failed calling webhook {name:?}: {e}"
            )));
        }
    };
    let resp = &answer["response"];
    let checked = if resp["uid"].as_str() != Some(uid.as_str()) {
        Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            resp["uid"].as_str().unwrap_or_default()
        ))
    } else if answer["apiVersion"] != "admission.k8s.io/v1" || answer["kind"] != "AdmissionReview" {
        Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            answer["apiVersion"].as_str().unwrap_or_default(),
            answer["kind"].as_str().unwrap_or_default()
        ))
    } else {
        Ok(())
    };
    if let Err(e) = checked {
        if h.failure_ignored() {
            return Ok(false);
        }
        return Err(ApiError::internal_error(&format!(
            "failed calling webhook {name:?}: received invalid webhook response: {e}"
        )));
    }
    for w in resp["warnings"].as_array().into_iter().flatten() {
        if let Some(w) = w.as_str() {
            warnings.push(w.to_string());
        }
    }
    if resp["allowed"] != true {
        return Err(denied(name, &resp["status"]));
    }
    let Some(patch) = resp["patch"].as_str().filter(|_| mutating) else {
        return Ok(false);
    };
    let patched = apply_patch(obj, patch, &resp["patchType"]);
    match patched {
        Ok(changed) => Ok(changed),
        Err(e) if h.failure_ignored() => {
            tracing::warn!(webhook = name, error = %e, "admission webhook patch failed; ignored");
            Ok(false)
        }
        Err(e) => Err(ApiError::internal_error(&format!(
            "failed calling webhook {name:?}: {e}"
        ))),
    }
}

/// Apply a webhook's base64 JSONPatch to `obj`; whether it changed.
fn apply_patch(obj: &mut Value, patch: &str, kind: &Value) -> Result<bool, String> {
    use base64::Engine;
    if kind != "JSONPatch" {
        return Err(format!("unsupported patch type {kind}"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| format!("the patch is not base64: {e}"))?;
    let ops: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| format!("the patch is not a JSONPatch: {e}"))?;
    let before = obj.clone();
    json_patch::patch(obj, &ops).map_err(|e| {
        *obj = before.clone();
        e.to_string()
    })?;
    Ok(*obj != before)
}

/// `ToStatusErr`: the webhook's status, at least 400, its message prefixed.
fn denied(name: &str, status: &Value) -> ApiError {
    let by = format!("admission webhook {name:?} denied the request");
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let mut e = ApiError::new(
        code,
        reason(status["reason"].as_str().unwrap_or_default()),
        message,
    );
    if status["details"].is_object() {
        e.details = Some(Box::new(status["details"].clone()));
    }
    e
}

/// The webhook's reason, if it is one of the API's `StatusReason`s.
fn reason(r: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    KNOWN.iter().find(|k| **k == r).copied().unwrap_or("")
}

/// The AdmissionReview v1 request.
fn review(a: &Attributes<'_>, uid: &str, obj: &Value) -> Value {
    let d = a.def;
    let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let gvr = json!({"group": d.group, "version": d.version, "resource": d.plural});
    let options = match a.operation {
        "CREATE" => json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
        "UPDATE" => json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
        _ => json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}),
    };
    let mut req = json!({
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "operation": a.operation,
        "userInfo": {"username": "kubectl-meta-sandbox", "groups": ["system:masters", "system:authenticated"]},
        "object": if obj.is_null() { Value::Null } else { obj.clone() },
        "oldObject": a.old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run, "options": options,
    });
    if let Some(s) = a.sub {
        req["subResource"] = json!(s);
        req["requestSubResource"] = json!(s);
    }
    let name = if a.name.is_empty() {
        obj["metadata"]["name"].as_str().unwrap_or_default()
    } else {
        a.name
    };
    if !name.is_empty() {
        req["name"] = json!(name);
    }
    if !a.ns.is_empty() {
        req["namespace"] = json!(a.ns);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
}

/// The address a `clientConfig.service` leads to: the Service's port `port` (443 by default),
/// then the endpoint port of the same name (or the only one) and the first address of the
/// Service's Endpoints, else of its EndpointSlices (`kubernetes.io/service-name`).
fn resolve_service(state: &State, svc: &Value) -> Result<std::net::SocketAddr, String> {
    let ns = svc["namespace"].as_str().unwrap_or_default();
    let name = svc["name"].as_str().unwrap_or_default();
    let port = svc["port"].as_u64().unwrap_or(443);
    let fail = |why: String| format!("failed to call webhook: service {ns}/{name}: {why}");
    let service = state
        .store
        .get("/services", ns, name)
        .and_then(|o| o.value().ok())
        .ok_or_else(|| fail(format!("service \"{name}\" not found")))?;
    let service_port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(port))
        .ok_or_else(|| fail(format!("no service port {port} found")))?;
    let port_name = service_port["name"].as_str().unwrap_or_default();
    // (ip, port) of one endpoint group: its first address and its port named like the
    // Service's (or its only port).
    let pick = |addresses: Vec<&str>, ports: &[Value]| -> Option<(String, u64)> {
        let p = ports
            .iter()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .or_else(|| (ports.len() == 1).then(|| &ports[0]))?;
        Some((addresses.first()?.to_string(), p["port"].as_u64()?))
    };
    let from_endpoints = state
        .store
        .get(crate::keys::ENDPOINTS, ns, name)
        .and_then(|o| o.value().ok())
        .and_then(|ep| {
            ep["subsets"].as_array()?.iter().find_map(|subset| {
                let addresses = subset["addresses"]
                    .as_array()?
                    .iter()
                    .filter_map(|a| a["ip"].as_str())
                    .collect();
                pick(addresses, subset["ports"].as_array()?)
            })
        });
    let found = from_endpoints.or_else(|| {
        let slices = state
            .store
            .list(crate::keys::SLICES, Some(ns), None, None, |_| true)
            .items;
        slices
            .iter()
            .filter_map(|s| s.value().ok())
            .find_map(|slice| {
                if slice["metadata"]["labels"]["kubernetes.io/service-name"] != name {
                    return None;
                }
                let addresses = slice["endpoints"]
                    .as_array()?
                    .iter()
                    .filter(|e| e["conditions"]["ready"] != false)
                    .filter_map(|e| e["addresses"][0].as_str())
                    .collect();
                pick(addresses, slice["ports"].as_array()?)
            })
    });
    let (ip, target) = found.ok_or_else(|| fail("no endpoints available".to_string()))?;
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| fail(format!("endpoint address {ip:?} is not an IP address")))?;
    let target = u16::try_from(target).map_err(|_| fail(format!("invalid port {target}")))?;
    Ok(std::net::SocketAddr::new(ip, target))
}

/// Why a webhook is not called after all.
enum Skip {
    /// A match condition is false.
    NotSelected,
    /// No condition is false but one could not be evaluated: the errors, as upstream joins them.
    Failed(String),
}

/// The webhook's `matchConditions` (the matcher of `admission/plugin/webhook/matchconditions`):
/// conditions in order; the first false one skips the webhook, errors count only when none is
/// false.
fn match_conditions(a: &Attributes<'_>, h: &Hook, obj: &Value) -> Result<(), Skip> {
    let Some(conditions) = h.webhook["matchConditions"].as_array() else {
        return Ok(());
    };
    let review = review(a, "", obj);
    let request = &review["request"];
    let vars = [
        ("object", &request["object"]),
        ("oldObject", &request["oldObject"]),
        ("request", request),
    ];
    let mut errors = Vec::new();
    for c in conditions {
        let expression = c["expression"].as_str().unwrap_or_default();
        match crate::cel_rules::eval_condition(expression, &vars) {
            Ok(true) => {}
            Ok(false) => return Err(Skip::NotSelected),
            Err(e) => errors.push(format!("expression '{expression}' resulted in error: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Skip::Failed(errors.join("\n")))
    }
}

/// Does the webhook select this request (rules, then namespace and object selectors)?
fn matches(state: &State, w: &Value, a: &Attributes<'_>, obj: Option<&Value>) -> bool {
    let rules = w["rules"].as_array().cloned().unwrap_or_default();
    if !rules
        .iter()
        .any(|r| rule_matches(r, a, w["matchPolicy"] != "Exact"))
    {
        return false;
    }
    let labels_of = |o: Option<&Value>| o.map(|o| o["metadata"]["labels"].clone());
    // A namespace's own labels, for namespaced objects and Namespaces themselves.
    let ns_labels = if a.def.group.is_empty() && a.def.plural == "namespaces" {
        labels_of(obj.or(a.old))
    } else if a.def.namespaced {
        state
            .store
            .get("/namespaces", "", a.ns)
            .and_then(|n| n.value().ok())
            .map(|n| n["metadata"]["labels"].clone())
    } else {
        None
    };
    if a.def.namespaced || ns_labels.is_some() {
        let labels = ns_labels.unwrap_or(Value::Null);
        if !selects(&w["namespaceSelector"], &labels) {
            return false;
        }
    }
    let objs = [labels_of(obj), labels_of(a.old)];
    objs.iter()
        .flatten()
        .any(|l| selects(&w["objectSelector"], l))
}

/// A label selector (absent: everything) against labels.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector.is_null()
        || LabelSelector::from_label_selector(selector).is_ok_and(|s| s.matches_json(Some(labels)))
}

/// One `RuleWithOperations` against the request. With `matchPolicy: Equivalent` (the default)
/// any version of the group matches, as the sandbox serves each resource in one storage
/// version and converts nothing.
fn rule_matches(r: &Value, a: &Attributes<'_>, equivalent: bool) -> bool {
    let any = |k: &str, want: &str| {
        r[k].as_array()
            .is_some_and(|l| l.iter().any(|x| x == "*" || x == want))
    };
    if !any("operations", a.operation) || !any("apiGroups", &a.def.group) {
        return false;
    }
    if !equivalent && !any("apiVersions", &a.def.version) {
        return false;
    }
    if equivalent && r["apiVersions"].as_array().is_none_or(Vec::is_empty) {
        return false;
    }
    let resource = match a.sub {
        Some(s) => format!("{}/{s}", a.def.plural),
        None => a.def.plural.clone(),
    };
    let resource_ok = r["resources"].as_array().is_some_and(|l| {
        l.iter().filter_map(Value::as_str).any(|x| {
            x == "*/*"
                || x == resource
                || (a.sub.is_none() && x == "*")
                || x.split_once('/').is_some_and(|(res, sub)| {
                    a.sub.is_some_and(|s| {
                        (res == "*" && sub == s) || (res == a.def.plural && sub == "*")
                    })
                })
        })
    });
    if !resource_ok {
        return false;
    }
    match r["scope"].as_str().unwrap_or("*") {
        "Cluster" => !a.def.namespaced,
        "Namespaced" => a.def.namespaced,
        _ => true,
    }
}
