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
pub mod user;

use axum::http::HeaderMap;

use crate::rbac::Authorizer;
use crate::rbac::rules::Attributes;
use crate::status::{ApiError, ApiResult};
use crate::store::Store;

pub use user::{
    ANONYMOUS, AUTHENTICATED, MASTERS, SERVICE_ACCOUNTS, UNAUTHENTICATED, UserInfo,
    split_service_account,
};

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
    auth: &Auth,
    admin_token: &str,
    store: &Store,
    headers: &HeaderMap,
    cert: Option<&ClientCert>,
) -> ApiResult<UserInfo> {
    if let Some(c) = cert {
        return Ok(c.0.clone());
    }
    let Some(token) = bearer_token(headers) else {
        return if auth.anonymous {
            Ok(UserInfo::anonymous())
        } else {
            Err(ApiError::unauthorized())
        };
    };
    if constant_time_eq(token, admin_token) {
        return Ok(UserInfo::admin());
    }
    if let Some(user) = auth.static_tokens.authenticate(token) {
        return Ok(user);
    }
    auth.tokens
        .authenticate(store, token)
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
    rbac: &Authorizer,
    store: &Store,
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
        if rbac.authorize(store, &requestor, &a).allowed {
            return Ok(());
        }
        let constrained = Attributes {
            verb: format!("impersonate-on:{mode}:{}", request.verb),
            ..request.clone()
        };
        let d = rbac.authorize(store, &requestor, &constrained);
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
