//! The create-only APIs of authentication and authorization, served as kube-apiserver serves
//! them (nothing is stored; the answer is computed from the request):
//!
//! - `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token` (TokenRequest, `kubectl create
//!   token`);
//! - `authentication.k8s.io/v1`: `selfsubjectreviews` (`kubectl auth whoami`), `tokenreviews`;
//! - `authorization.k8s.io/v1`: `selfsubjectaccessreviews` (`kubectl auth can-i`),
//!   `subjectaccessreviews`, `localsubjectaccessreviews`, `selfsubjectrulesreviews`
//!   (`kubectl auth can-i --list`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::UserInfo;
use super::tokens::{ISSUER, TokenSpec};
use crate::auth::MASTERS;
use crate::rbac::rules::Attributes;
use crate::request::ResourcePath;
use crate::state::State;
use crate::status::{ApiError, ApiResult, Target};

const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";

/// The service-account issuer discovery documents (`/.well-known/openid-configuration`,
/// `/openid/v1/jwks`), or None for another path.
pub fn oidc(state: &State, path: &str) -> Option<Value> {
    match path {
        "/.well-known/openid-configuration" => Some(json!({
            "issuer": ISSUER,
            "jwks_uri": format!("https://{}/openid/v1/jwks", state.addr),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })),
        "/openid/v1/jwks" => Some(state.auth.tokens.jwks()),
        _ => None,
    }
}

/// Is this request for one of the endpoints here?
pub fn handles(rp: &ResourcePath) -> bool {
    match (rp.group.as_str(), rp.resource.as_str()) {
        ("", "serviceaccounts") => rp.subresource.as_deref() == Some("token"),
        (AUTHN, "selfsubjectreviews" | "tokenreviews") => rp.namespace.is_none(),
        (
            AUTHZ,
            "selfsubjectaccessreviews" | "subjectaccessreviews" | "selfsubjectrulesreviews",
        ) => rp.namespace.is_none(),
        (AUTHZ, "localsubjectaccessreviews") => rp.namespace.is_some(),
        _ => false,
    }
}

fn kind_of(resource: &str) -> &'static str {
    match resource {
        "serviceaccounts" => "TokenRequest",
        "selfsubjectreviews" => "SelfSubjectReview",
        "tokenreviews" => "TokenReview",
        "selfsubjectaccessreviews" => "SelfSubjectAccessReview",
        "subjectaccessreviews" => "SubjectAccessReview",
        "localsubjectaccessreviews" => "LocalSubjectAccessReview",
        _ => "SelfSubjectRulesReview",
    }
}

/// Serve one request for an endpoint [`handles`] accepted (already authorized).
pub async fn serve(
    state: &Arc<State>,
    user: &UserInfo,
    rp: &ResourcePath,
    req: Request,
) -> ApiResult<Response> {
    let kind = kind_of(&rp.resource);
    if rp.version != "v1" || (rp.name.is_some() && rp.subresource.is_none()) {
        return Err(ApiError::no_route(req.uri().path()));
    }
    if req.method() != Method::POST {
        return Err(ApiError::no_method());
    }
    let limit = state.tunables.max_body_bytes;
    let protobuf = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with(crate::protobuf::CONTENT_TYPE));
    let body = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| ApiError::too_large(limit))?;
    // kubectl's typed clients (create token, auth can-i, auth whoami) send protobuf.
    let obj: Value = if protobuf {
        crate::protobuf::decode(&body).map_err(|e| ApiError::bad_request(e.to_string()))?
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    let ns = rp.namespace.as_deref().unwrap_or_default();
    let group = if rp.group.is_empty() {
        AUTHN
    } else {
        &rp.group
    };
    let (code, out) = match rp.resource.as_str() {
        "serviceaccounts" => {
            token_request(state, ns, rp.name.as_deref().unwrap_or_default(), &obj)?
        }
        "selfsubjectreviews" => (
            StatusCode::CREATED,
            json!({"status": {"userInfo": user.to_json()}}),
        ),
        "tokenreviews" => token_review(state, &obj)?,
        "selfsubjectaccessreviews" => access_review(state, user.clone(), &obj, kind, None)?,
        "subjectaccessreviews" => access_review(state, subject_of(&obj)?, &obj, kind, None)?,
        "localsubjectaccessreviews" => {
            access_review(state, subject_of(&obj)?, &obj, kind, Some(ns))?
        }
        _ => rules_review(state, user, &obj)?,
    };
    let mut out = out;
    out["kind"] = json!(kind);
    out["apiVersion"] = json!(format!("{group}/v1"));
    if !out["metadata"].is_object() {
        out["metadata"] = json!({});
    }
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(out.to_string()))
        .map_err(|e| ApiError::internal(e.to_string()))
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        Target {
            group: if kind == "TokenRequest" { AUTHN } else { AUTHZ },
            resource: kind,
            name: "",
        },
        format!(
            "{kind}.{} \"\" is invalid: {field}: {message}",
            if kind == "TokenRequest" { AUTHN } else { AUTHZ }
        ),
        vec![(field.to_string(), message.to_string())],
    )
}

/// TokenRequest: a token for the ServiceAccount (which must exist), for the requested
/// audiences and lifetime (default one hour, at least ten minutes), optionally bound to a Pod
/// or Secret that must exist.
fn token_request(
    state: &State,
    ns: &str,
    name: &str,
    obj: &Value,
) -> ApiResult<(StatusCode, Value)> {
    let sa = state.core_object("serviceaccounts", ns, name)?;
    let spec = &obj["spec"];
    let expiration_seconds = spec["expirationSeconds"].as_i64().unwrap_or(3600);
    if expiration_seconds < 600 {
        return Err(invalid(
            "TokenRequest",
            "spec.expirationSeconds",
            &format!(
                "Invalid value: {expiration_seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    if expiration_seconds > 1 << 32 {
        return Err(invalid(
            "TokenRequest",
            "spec.expirationSeconds",
            &format!(
                "Invalid value: {expiration_seconds}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    let audiences: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let bound = match spec["boundObjectRef"].as_object() {
        None => None,
        Some(r) => {
            let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
            let bname = r.get("name").and_then(Value::as_str).unwrap_or_default();
            let gr = match kind {
                "Pod" => "/pods",
                "Secret" => "/secrets",
                other => {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token to object of type {other}"
                    )));
                }
            };
            let target = state.store.get(gr, ns, bname).ok_or_else(|| {
                ApiError::not_found(Target {
                    group: "",
                    resource: gr.trim_start_matches('/'),
                    name: bname,
                })
            })?;
            if let Some(uid) = r.get("uid").and_then(Value::as_str)
                && !uid.is_empty()
                && uid != target.uid
            {
                return Err(ApiError::conflict(
                    Target {
                        group: "",
                        resource: gr.trim_start_matches('/'),
                        name: bname,
                    },
                    &format!(
                        "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
            Some((kind.to_string(), bname.to_string(), target.uid.clone()))
        }
    };
    let spec_in = TokenSpec {
        audiences: audiences.clone(),
        expiration_seconds,
        bound: bound.clone(),
    };
    let (token, exp) = state
        .auth
        .tokens
        .issue(ns, name, &sa.uid, &spec_in)
        .map_err(ApiError::internal)?;
    let expiry = jiff::Timestamp::from_second(exp)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let audiences = if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences
    };
    let bound_ref = match &bound {
        Some((kind, bname, uid)) => {
            json!({"kind": kind, "apiVersion": "v1", "name": bname, "uid": uid})
        }
        None => Value::Null,
    };
    Ok((
        StatusCode::CREATED,
        json!({
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": {"audiences": audiences, "expirationSeconds": expiration_seconds, "boundObjectRef": bound_ref},
            "status": {"token": token, "expirationTimestamp": expiry},
        }),
    ))
}

/// TokenReview: who a token is, for the requested audiences (the server's by default).
fn token_review(state: &State, obj: &Value) -> ApiResult<(StatusCode, Value)> {
    let token = obj["spec"]["token"].as_str().unwrap_or_default();
    let mut audiences: Vec<String> = obj["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    if audiences.is_empty() {
        audiences = vec![ISSUER.to_string()];
    }
    let mut out = json!({"spec": obj["spec"].clone()});
    // The admin token and static tokens carry no audience: accepted for the requested ones,
    // as the sandbox's own token always was.
    let audience_agnostic = if token == state.token {
        Some(UserInfo::admin())
    } else {
        state.auth.static_tokens.authenticate(token)
    };
    let found = audience_agnostic.map(|u| (u, audiences.clone()));
    match found.or_else(|| {
        state
            .auth
            .tokens
            .authenticate_for(&state.store, token, &audiences)
    }) {
        Some((user, aud)) => {
            out["status"] =
                json!({"authenticated": true, "user": user.to_json(), "audiences": aud});
        }
        None => {
            out["status"] = json!({"user": {}, "error": "[invalid bearer token, service account token has been invalidated]"});
        }
    }
    Ok((StatusCode::CREATED, out))
}

/// The subject of a (Local)SubjectAccessReview: at least a user or a group.
fn subject_of(obj: &Value) -> ApiResult<UserInfo> {
    let u = UserInfo::from_spec(&obj["spec"]);
    if u.name.is_empty() && u.groups.is_empty() {
        return Err(invalid(
            "SubjectAccessReview",
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    Ok(u)
}

/// The attributes a review's spec asks about (`ResourceAttributesFrom`/`NonResourceAttributesFrom`).
fn review_attributes(kind: &str, spec: &Value) -> ApiResult<Attributes> {
    let ra = spec["resourceAttributes"].as_object();
    let na = spec["nonResourceAttributes"].as_object();
    let s = |m: &serde_json::Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match (ra, na) {
        (Some(r), None) => Ok(Attributes {
            verb: s(r, "verb"),
            namespace: s(r, "namespace"),
            api_group: s(r, "group"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            path: String::new(),
            resource_request: true,
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Default::default()
        }),
        _ => Err(invalid(
            kind,
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// (Self/Local)SubjectAccessReview: the spec back with the decision in `status`.
fn access_review(
    state: &State,
    subject: UserInfo,
    obj: &Value,
    kind: &str,
    local_ns: Option<&str>,
) -> ApiResult<(StatusCode, Value)> {
    let attrs = review_attributes(kind, &obj["spec"])?;
    if let Some(ns) = local_ns
        && attrs.namespace != ns
    {
        return Err(invalid(
            kind,
            "spec.resourceAttributes.namespace",
            &format!(
                "Invalid value: {:?}: must match metadata.namespace",
                attrs.namespace
            ),
        ));
    }
    let d = state.rbac.authorize(&state.store, &subject, &attrs);
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    let mut out = json!({"spec": obj["spec"].clone(), "status": status});
    if let Some(md) = obj.get("metadata").filter(|m| m.is_object()) {
        out["metadata"] = md.clone();
    }
    Ok((StatusCode::CREATED, out))
}

/// SelfSubjectRulesReview: the rules the caller holds in `spec.namespace`.
fn rules_review(state: &State, user: &UserInfo, obj: &Value) -> ApiResult<(StatusCode, Value)> {
    let ns = obj["spec"]["namespace"].as_str().unwrap_or_default();
    if ns.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    if user.groups.iter().any(|g| g == MASTERS) {
        resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    let resolved = state.rbac.resolve(&state.store, user, ns);
    for r in &resolved.rules {
        let r = &r.rule;
        if !r.resources.is_empty() {
            let mut v =
                json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
            if !r.resource_names.is_empty() {
                v["resourceNames"] = json!(r.resource_names);
            }
            resource_rules.push(v);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource_rules
                .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    if !resolved.errors.is_empty() {
        status["evaluationError"] = json!(crate::rbac::aggregate_errors(&resolved.errors));
    }
    Ok((StatusCode::CREATED, json!({"spec": {}, "status": status})))
}
