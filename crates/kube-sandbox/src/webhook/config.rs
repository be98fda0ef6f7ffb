//! Defaults of the webhook configurations (`SetDefaults_ValidatingWebhook`,
//! `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference` of
//! `admissionregistration/v1`) and the part of their validation
//! (`pkg/apis/admissionregistration/validation`) that decides whether a webhook can be called:
//! `sideEffects`, `admissionReviewVersions`, `failurePolicy`, `matchPolicy`,
//! `reinvocationPolicy`, `timeoutSeconds`, `clientConfig`.

use serde_json::{Value, json};

use crate::json_fields::{items, obj_at, set};
use crate::validation::FieldError;

/// Validate every webhook of a configuration (`mutating`: also `reinvocationPolicy`).
pub fn validate(obj: &Value, mutating: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let hooks = obj["webhooks"].as_array().cloned().unwrap_or_default();
    for (i, w) in hooks.iter().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        let one_of = |f: &str, allowed: &[&str], errs: &mut Vec<FieldError>| {
            if let Some(v) = w[f].as_str()
                && !allowed.contains(&v)
            {
                errs.push(FieldError::not_supported(at(f), v, allowed));
            }
        };
        one_of("failurePolicy", &["Fail", "Ignore"], &mut errs);
        one_of("matchPolicy", &["Equivalent", "Exact"], &mut errs);
        if mutating {
            one_of("reinvocationPolicy", &["IfNeeded", "Never"], &mut errs);
        }
        // v1 allows only webhooks without side effects (on dry runs).
        if w["sideEffects"].is_null() {
            errs.push(FieldError::required(
                at("sideEffects"),
                "must specify one of None, NoneOnDryRun",
            ));
        }
        one_of("sideEffects", &["None", "NoneOnDryRun"], &mut errs);
        if let Some(t) = w["timeoutSeconds"].as_i64()
            && !(1..=30).contains(&t)
        {
            errs.push(FieldError::invalid(
                at("timeoutSeconds"),
                t,
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
        let versions = w["admissionReviewVersions"].as_array();
        if versions.is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(
                at("admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        let cc = &w["clientConfig"];
        match (cc["url"].as_str(), cc["service"].is_object()) {
            (Some(_), true) | (None, false) => errs.push(FieldError::required(
                at("clientConfig"),
                "exactly one of url or service is required",
            )),
            (Some(url), false) => {
                let scheme = url.split_once("://").map_or("", |(s, _)| s);
                if scheme != "https" {
                    errs.push(FieldError::invalid(
                        at("clientConfig.url"),
                        scheme,
                        "'https' is the only allowed URL scheme",
                    ));
                }
            }
            (None, true) => {}
        }
    }
    errs
}

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
    fn webhooks_that_cannot_be_called_are_invalid() {
        let c = json!({"webhooks": [{"name": "a.b.c", "sideEffects": "Some", "timeoutSeconds": 40,
            "clientConfig": {"url": "http://x/"}}]});
        let errs: Vec<String> = validate(&c, false)
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(
            errs,
            [
                "webhooks[0].sideEffects",
                "webhooks[0].timeoutSeconds",
                "webhooks[0].admissionReviewVersions",
                "webhooks[0].clientConfig.url"
            ]
        );
    }

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
