//! The tokens controller, as kube-controller-manager's: a `kubernetes.io/service-account-token`
//! Secret naming an existing ServiceAccount gets a legacy token signed by the sandbox
//! ([`crate::auth::tokens`]), the CA and the namespace.

use base64::Engine;
use serde_json::json;

use crate::auth::tokens::SECRET_TYPE;
use crate::state::State;

/// The tokens controller: fill a `kubernetes.io/service-account-token` Secret that names an
/// existing ServiceAccount (annotation `kubernetes.io/service-account.name`) with `token`,
/// `ca.crt` and `namespace`, and the ServiceAccount's uid annotation.
pub fn populate_secret(state: &State, ns: &str, name: &str) {
    let Some(s) = state.store.get("/secrets", ns, name) else {
        return;
    };
    let Ok(v) = s.value() else { return };
    if v["type"] != SECRET_TYPE || s.deleting || v["data"]["token"].is_string() {
        return;
    }
    let Some(sa_name) = v["metadata"]["annotations"]["kubernetes.io/service-account.name"].as_str()
    else {
        return;
    };
    let Some(sa) = state.store.get("/serviceaccounts", ns, sa_name) else {
        return;
    };
    let token = match state.auth.tokens.issue_legacy(ns, name, sa_name, &sa.uid) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(secret = name, error = %e, "could not sign a legacy token");
            return;
        }
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let key = crate::store::ObjKey {
        gr: "/secrets".into(),
        ns: ns.into(),
        name: name.into(),
    };
    let (ca, ns_b64, tok, sa_uid) = (b64(&state.ca_pem), b64(ns), b64(&token), sa.uid.clone());
    let r = crate::ops::mutate(state, &key, |obj| {
        if obj["data"]["token"].is_string() {
            return false;
        }
        if !obj["data"].is_object() {
            obj["data"] = json!({});
        }
        obj["data"]["token"] = json!(tok);
        obj["data"]["ca.crt"] = json!(ca);
        obj["data"]["namespace"] = json!(ns_b64);
        obj["metadata"]["annotations"]["kubernetes.io/service-account.uid"] = json!(sa_uid);
        true
    });
    if let Err(e) = r {
        tracing::warn!(secret = name, error = %e, "could not fill a legacy token Secret");
    }
}
