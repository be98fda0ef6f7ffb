//! `--server`: confirm each planned create and update with a server-side dry run
//! (`dryRun=All`), so defaulting, validation and admission errors show before a real sync hits
//! them. The API server persists nothing for a dry-run request; a request it cannot dry-run (a
//! webhook without `sideEffects: None`) falls back to the local result with a visible warning.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;

use super::render::{Action, Entry, ServerCheck};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::{FIELD_MANAGER, kube_error_message};

/// Check `entry` (a create or update of an object of `info`) with a dry run; on success the
/// planned object becomes what the server would store.
pub async fn check(client: &kube::Client, info: &ResourceInfo, entry: &mut Entry) {
    let Some(planned) = &entry.planned else {
        return;
    };
    let api: Api<DynamicObject> = match (&entry.namespace, info.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
        _ => Api::all_with(client.clone(), &info.api_resource),
    };
    let obj: DynamicObject = match serde_json::from_value(planned.clone()) {
        Ok(o) => o,
        Err(e) => {
            entry.server = Some(ServerCheck::Rejected {
                message: format!("not a Kubernetes object: {e}"),
            });
            return;
        }
    };
    let pp = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let result = match entry.action {
        Action::Create => api.create(&pp, &obj).await,
        Action::Update => api.replace(&entry.name, &pp, &obj).await,
        _ => return,
    };
    entry.server = Some(match result {
        Ok(stored) => {
            if let Ok(v) = serde_json::to_value(&stored) {
                entry.planned = Some(keep_type(v, planned));
            }
            ServerCheck::Confirmed
        }
        Err(e) => verdict(&e),
    });
}

/// The answer's apiVersion/kind as planned (a dynamic answer may lack them).
fn keep_type(mut stored: Value, planned: &Value) -> Value {
    for f in ["apiVersion", "kind"] {
        if stored.get(f).is_none_or(Value::is_null)
            && let Some(v) = planned.get(f)
        {
            stored[f] = v.clone();
        }
    }
    stored
}

/// Rejected (the real write would fail the same way) or a fallback (dry run unsupported or
/// the check itself failed).
fn verdict(e: &kube::Error) -> ServerCheck {
    let message = kube_error_message(e);
    let unsupported = message.contains("does not support dry run")
        || message.contains("dry run")
        || message.contains("dryRun");
    match e {
        kube::Error::Api(s) if !unsupported && matches!(s.code, 400 | 404 | 409 | 422) => {
            ServerCheck::Rejected { message }
        }
        _ => ServerCheck::Fallback { message },
    }
}
