//! API errors as Kubernetes `Status` objects.
//!
//! Every failure the sandbox answers with goes through [`ApiError`], so clients (kubectl, kube-rs)
//! always get a `meta.k8s.io/v1 Status` body with the reason and code kube-apiserver would use.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed request, rendered as a `Status` object.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, `Invalid`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Box<Value>>,
    /// Seconds a client should wait before retrying (sets `Retry-After`).
    pub retry_after: Option<u64>,
}

/// Result type of request handling.
pub type ApiResult<T> = Result<T, ApiError>;

/// Identifies the object an error is about (for `details`).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// API group ("" for core).
    pub group: &'a str,
    /// Resource plural ("configmaps").
    pub resource: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl Target<'_> {
    /// `configmaps` for the core group, `widgets.conf.example.com` otherwise (as kube-apiserver prints it).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    fn details(&self) -> Value {
        json!({"name": self.name, "group": self.group, "kind": self.resource})
    }
}

impl ApiError {
    /// A bare error with a code, reason and message.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404 NotFound for an object.
    pub fn not_found(t: Target<'_>) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", t.qualified(), t.name),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    /// 404 for a path that names no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }

    /// 405 MethodNotAllowed for a path with no handler for the method at all (go-restful's
    /// answer, e.g. `GET` of a create-only review resource).
    pub fn no_method() -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
        e.details = Some(Box::new(serde_json::json!({})));
        e
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(verb: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind \"{what}\""),
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(t: Target<'_>) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", t.qualified(), t.name),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    /// 409 Conflict: stale resourceVersion.
    pub fn conflict_modified(t: Target<'_>) -> Self {
        Self::conflict(
            t,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict with a custom explanation.
    pub fn conflict(t: Target<'_>, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {why}",
                t.qualified(),
                t.name
            ),
        );
        e.details = Some(Box::new(t.details()));
        e
    }

    /// 410 Gone / Expired (watch from a compacted resourceVersion).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str, accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted} (got {ct:?})"
            ),
        )
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (got {accept:?})"
            ),
        )
    }

    /// 422 Invalid with field causes (`causes` are `(field, message)` pairs).
    pub fn invalid(t: Target<'_>, message: String, causes: Vec<(String, String)>) -> Self {
        let mut e = Self::new(422, "Invalid", message);
        let mut d = t.details();
        d["causes"] = Value::Array(
            causes
                .into_iter()
                .map(|(field, message)| {
                    // A cause's message is the error without its field path (kubectl prints
                    // `field: message`).
                    let body = message
                        .strip_prefix(&format!("{field}: "))
                        .unwrap_or(&message)
                        .to_string();
                    json!({"reason": cause_reason(&body), "message": body, "field": field})
                })
                .collect(),
        );
        e.details = Some(Box::new(d));
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// `apierrors.NewInternalError(err)`: 500 "Internal error occurred: ERR", with `err` as the
    /// one cause.
    pub fn internal_error(err: &str) -> Self {
        let mut e = Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {err}"),
        );
        e.details = Some(Box::new(serde_json::json!({"causes": [{"message": err}]})));
        e
    }

    /// The Status object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // An error without a reason (a plain Go error turned into a Status) has none.
        if self.reason.is_empty()
            && let Some(m) = s.as_object_mut()
        {
            m.shift_remove("reason");
        }
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        if let Some(r) = self.retry_after {
            s["details"]["retryAfterSeconds"] = json!(r);
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut resp = (code, [("content-type", "application/json")], body).into_response();
        if let Some(r) = self.retry_after
            && let Ok(v) = r.to_string().parse()
        {
            resp.headers_mut().insert("retry-after", v);
        }
        resp
    }
}

/// A `Status` object reporting success (used by some deletes).
pub fn success_status(t: Target<'_>, uid: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": t.name, "group": t.group, "kind": t.resource, "uid": uid},
    })
}

/// The `metav1.CauseType` of a field error from how its body starts (`Required value`,
/// `Forbidden`, ...), as `field.Error.Type` sets it.
fn cause_reason(body: &str) -> &'static str {
    // `field.TypeInvalid` renders as `Invalid value`; kube-openapi's type and format errors say so.
    if body.starts_with("Invalid value") && body.contains(" in body must be of type ") {
        return "FieldValueTypeInvalid";
    }
    for (prefix, reason) in [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
    ] {
        if body.starts_with(prefix) {
            return reason;
        }
    }
    "FieldValueInvalid"
}
