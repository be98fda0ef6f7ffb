//! Defaults of the webhook configurations (`SetDefaults_ValidatingWebhook`,
//! `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference` of
//! `admissionregistration/v1`).

use serde_json::{Value, json};

use crate::defaults::{items, obj_at, set};

/// Default every webhook of a configuration (`mutating`: also `reinvocationPolicy`).
pub fn defaults(obj: &mut Value, mutating: bool) {
    for w in items(obj, "webhooks") {
        set(w, "failurePolicy", json!("Fail"));
        set(w, "matchPolicy", json!("Equivalent"));
        obj_at(w, "namespaceSelector");
        obj_at(w, "objectSelector");
        set(w, "timeoutSeconds", json!(10));
        if mutating {
            set(w, "reinvocationPolicy", json!("Never"));
        }
        for r in items(w, "rules") {
            set(r, "scope", json!("*"));
        }
        if let Some(svc) = w
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .filter(|s| s.is_object())
        {
            set(svc, "port", json!(443));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_get_upstreams_defaults() {
        let mut c = json!({"webhooks": [{"name": "a", "rules": [{"operations": ["CREATE"]}],
            "clientConfig": {"service": {"namespace": "n", "name": "s"}}}]});
        defaults(&mut c, true);
        let w = &c["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["namespaceSelector"], json!({}));
        assert_eq!(w["timeoutSeconds"], 10);
        assert_eq!(w["reinvocationPolicy"], "Never");
        assert_eq!(w["rules"][0]["scope"], "*");
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
    }
}
