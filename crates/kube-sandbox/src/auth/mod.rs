//! Authentication, as kube-apiserver's authenticator chain and impersonation filter do it.
//!
//! Who a request is, in the order kube-apiserver tries:
//! - a client certificate signed by the sandbox CA (user = CN, groups = O), checked during the
//!   TLS handshake ([`certs`]);
//! - the sandbox's own bearer token (the kubeconfig it writes): the admin, in `system:masters`
//!   (a static token, as `--token-auth-file` gives);
//! - a ServiceAccount token ([`tokens`]): one from the TokenRequest API (`kubectl create
//!   token`; audiences, expiry, bound objects) or a legacy token Secret's; signature, issuer,
//!   audience, expiry and the ServiceAccount (and bound object) still existing are checked on
//!   every request, behind a cache of verified signatures;
//! - a static token of the `--token-auth-file` ([`token_file`]);
//! - a bearer token none of these knows is refused with 401; a request without one (no
//!   `Authorization: Bearer` header, or an empty token) is `system:anonymous` in
//!   `system:unauthenticated`, as with kube-apiserver's default `--anonymous-auth=true`, and RBAC
//!   decides: the bootstrap policy lets it read `/version`, `/healthz`, `/readyz` and `/livez`
//!   (`system:public-info-viewer`) and nothing else (403). With anonymous requests off
//!   ([`crate::SandboxConfig::anonymous_auth`]) they are 401.
//!
//! Every authenticated user also gets `system:authenticated`; ServiceAccounts get
//! `system:serviceaccounts` and `system:serviceaccounts:<namespace>`. Then [`impersonate`]
//! applies `Impersonate-*` headers after checking the `impersonate` verb. [`endpoints`] serves
//! TokenRequest, TokenReview, SelfSubjectReview and the access reviews.

pub(crate) mod certs;
pub(crate) mod endpoints;
pub(crate) mod jwt;
pub mod token_file;
pub(crate) mod tokens;

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::rbac::rules::Attributes;
use crate::state::State;
use crate::status::{ApiError, ApiResult};

/// The group whose members may do anything.
pub const MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Anonymous requests are in this group.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// Every ServiceAccount is in this group.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The user name of the sandbox's admin token.
pub const ADMIN_USER: &str = "kubectl-meta-sandbox-admin";

/// A user, as `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:ns:sa` for ServiceAccounts).
    pub name: String,
    /// UID, if known.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The sandbox admin (its own bearer token): in `system:masters`.
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// `system:anonymous`, in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// A ServiceAccount's user.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> Self {
        UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.into(),
            groups: service_account_groups(ns),
            extra: BTreeMap::new(),
        }
    }

    /// As `authentication.k8s.io/v1 UserInfo` (empty fields left out).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.groups.is_empty() {
            v["groups"] = json!(self.groups);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }

    /// From `authentication.k8s.io/v1 UserInfo`-like fields (SubjectAccessReview's spec).
    pub fn from_spec(spec: &Value) -> Self {
        let strings = |v: &Value| -> Vec<String> {
            // An ExtraValue decoded from protobuf arrives as `{"items": [...]}`.
            let v = v.get("items").unwrap_or(v);
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        };
        let extra = spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default();
        UserInfo {
            name: spec["user"].as_str().unwrap_or_default().into(),
            uid: spec["uid"].as_str().unwrap_or_default().into(),
            groups: strings(&spec["groups"]),
            extra,
        }
    }
}

/// The groups of ServiceAccounts in `ns`, `system:authenticated` last.
pub fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        SERVICE_ACCOUNTS.into(),
        format!("{SERVICE_ACCOUNTS}:{ns}"),
        AUTHENTICATED.into(),
    ]
}

/// `system:serviceaccount:NS:NAME` split into namespace and name.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The user a verified client certificate names, set on each request of its connection.
#[derive(Debug, Clone)]
pub struct ClientCert(pub UserInfo);

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The bearer token of a request, as kube-apiserver's `bearertoken` authenticator reads the
/// `Authorization` header (trimmed, `<scheme> <token>` with the scheme `bearer` in any case);
/// None when there is none (the request is then anonymous, not refused).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get("authorization")?.to_str().ok()?.trim();
    let mut parts = header.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// `user` with `system:authenticated` added, as kube-apiserver's `AuthenticatedGroupAdder`
/// does (unless it is anonymous or already in it).
pub(crate) fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    if user.name != ANONYMOUS
        && !user
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

/// Who sent the request: a client certificate's user, a bearer token's (a token nobody knows
/// is 401), or `system:anonymous` when there are no credentials (401 instead when anonymous
/// requests are off).
pub fn authenticate(
    state: &State,
    headers: &HeaderMap,
    cert: Option<&ClientCert>,
) -> ApiResult<UserInfo> {
    if let Some(c) = cert {
        return Ok(c.0.clone());
    }
    let Some(token) = bearer_token(headers) else {
        return if state.auth.anonymous {
            Ok(UserInfo::anonymous())
        } else {
            Err(ApiError::unauthorized())
        };
    };
    if constant_time_eq(token, &state.token) {
        return Ok(UserInfo::admin());
    }
    if let Some(user) = state.auth.static_tokens.authenticate(token) {
        return Ok(user);
    }
    state
        .auth
        .tokens
        .authenticate(state, token)
        .ok_or_else(ApiError::unauthorized)
}

fn impersonation_attrs(
    verb_resource: &str,
    ns: &str,
    name: &str,
    group: &str,
    sub: &str,
) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        namespace: ns.into(),
        api_group: group.into(),
        resource: verb_resource.into(),
        subresource: sub.into(),
        name: name.into(),
        resource_request: true,
        ..Default::default()
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// Apply `Impersonate-User`, `-Group`, `-Uid` and `-Extra-*` (kube-apiserver's
/// `WithImpersonation`): each one needs the `impersonate` verb on `users`, `groups`,
/// `serviceaccounts`, `uids` or `userextras/<key>`; the first refused one answers 403.
///
/// kube-apiserver 1.36 also has constrained impersonation (`impersonate-on:<mode>:<verb>`), and
/// when no mode allows the request it answers with the first mode's refusal: the sandbox grants
/// impersonation only the legacy way, but words a refusal as 1.36 does (the request's own
/// attributes with the verb `impersonate-on:serviceaccount:<verb>`,
/// `impersonate-on:arbitrary-node:<verb>` or `impersonate-on:user-info:<verb>`).
pub fn impersonate(
    state: &State,
    requestor: UserInfo,
    headers: &HeaderMap,
    request: &Attributes,
) -> ApiResult<UserInfo> {
    let values = |h: &str| -> Vec<String> {
        headers
            .get_all(h)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(String::from);
    let groups_requested = values("impersonate-group");
    let uid = headers
        .get("impersonate-uid")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(String::from);
    let mut extras: Vec<(String, String)> = Vec::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = value.to_str()
        {
            extras.push((percent_decode(key), v.to_string()));
        }
    }
    let Some(user) = user else {
        if !groups_requested.is_empty() || uid.is_some() || !extras.is_empty() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups, uid or extra without impersonating a user",
            ));
        }
        return Ok(requestor);
    };
    let mode = if split_service_account(&user).is_some() {
        "serviceaccount"
    } else if user.starts_with("system:node:") {
        "arbitrary-node"
    } else {
        "user-info"
    };
    let check = |a: Attributes| -> ApiResult<()> {
        if state.rbac.authorize(&state.store, &requestor, &a).allowed {
            return Ok(());
        }
        let constrained = Attributes {
            verb: format!("impersonate-on:{mode}:{}", request.verb),
            ..request.clone()
        };
        let d = state.rbac.authorize(&state.store, &requestor, &constrained);
        Err(crate::rbac::forbidden(&requestor, &constrained, &d.reason))
    };
    let mut out = UserInfo {
        name: user.clone(),
        ..Default::default()
    };
    match split_service_account(&user) {
        Some((ns, name)) => {
            check(impersonation_attrs("serviceaccounts", ns, name, "", ""))?;
            if groups_requested.is_empty() {
                out.groups = vec![SERVICE_ACCOUNTS.into(), format!("{SERVICE_ACCOUNTS}:{ns}")];
            }
        }
        None => check(impersonation_attrs("users", "", &user, "", ""))?,
    }
    for g in &groups_requested {
        check(impersonation_attrs("groups", "", g, "", ""))?;
        out.groups.push(g.clone());
    }
    for (key, value) in extras {
        check(impersonation_attrs(
            "userextras",
            "",
            &value,
            "authentication.k8s.io",
            &key,
        ))?;
        out.extra.entry(key).or_default().push(value);
    }
    if let Some(uid) = uid {
        check(impersonation_attrs(
            "uids",
            "",
            &uid,
            "authentication.k8s.io",
            "",
        ))?;
        out.uid = uid;
    }
    if out.name == "system:anonymous" {
        if !out.groups.iter().any(|g| g == UNAUTHENTICATED) {
            out.groups.push(UNAUTHENTICATED.into());
        }
    } else if !out
        .groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        out.groups.push(AUTHENTICATED.into());
    }
    Ok(out)
}

/// Everything authentication needs that lives as long as the sandbox.
#[derive(Debug)]
pub struct Auth {
    /// ServiceAccount tokens.
    pub tokens: tokens::Tokens,
    /// The CA (for client certificates the sandbox issues).
    pub ca: certs::Ca,
    /// The tokens of the `--token-auth-file`.
    pub static_tokens: token_file::StaticTokens,
    /// Whether requests without credentials are `system:anonymous` (else 401).
    pub anonymous: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_user_names_split_like_upstream() {
        assert_eq!(
            split_service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(split_service_account("system:serviceaccount:ns"), None);
        assert_eq!(split_service_account("bob"), None);
        assert_eq!(percent_decode("example.com%2Fscope"), "example.com/scope");
    }
}
