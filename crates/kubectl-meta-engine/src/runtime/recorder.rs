//! Kubernetes Events on parents: `SyncError` warnings, as Metacontroller records them, and
//! `HotLoop` warnings (a child field the server keeps rewriting, see `engine::hotloop`).
//!
//! A failed sync records a core/v1 Event (type Warning, reason `SyncError`, the error text as
//! message) on the parent, so `kubectl describe` shows it. Repeats of the same message on the
//! same parent bump `count` and `lastTimestamp` of the existing Event instead of creating new
//! ones. Events of cluster-scoped parents go to the `default` namespace. Failing to record an
//! event is logged, never fatal.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::k8s::object;

/// The reason of failed-sync events.
pub const SYNC_ERROR: &str = "SyncError";

/// The reason of hot-loop events (a child field the server keeps rewriting).
pub const HOT_LOOP: &str = "HotLoop";

/// An Event already written: (namespace, name, count).
type SeenEvent = (String, String, i32);

/// Records events, deduplicating repeats.
pub struct Recorder {
    client: kube::Client,
    /// (parent uid, message) -> the Event recorded for it.
    seen: Mutex<HashMap<(String, String), SeenEvent>>,
}

impl Recorder {
    /// A recorder writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Recorder {
            client,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Record a Warning `SyncError` event with `message` on `parent`.
    pub async fn sync_error(&self, parent: &Value, message: &str) {
        if let Err(e) = self.warn(parent, SYNC_ERROR, message).await {
            not_recorded(SYNC_ERROR, &e);
        }
    }

    /// Record a Warning `HotLoop` event with `message` on `parent`.
    pub async fn hot_loop(&self, parent: &Value, message: &str) {
        if let Err(e) = self.warn(parent, HOT_LOOP, message).await {
            not_recorded(HOT_LOOP, &e);
        }
    }

    async fn warn(&self, parent: &Value, reason: &str, message: &str) -> Result<(), kube::Error> {
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let ns = object::namespace(parent).unwrap_or("default").to_string();
        let now = jiff::Timestamp::now().to_string();
        let message: String = message.chars().take(1024).collect();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let known = self
            .seen
            .lock()
            .ok()
            .and_then(|m| m.get(&(uid.clone(), message.clone())).cloned());
        if let Some((ev_ns, name, count)) = known
            && ev_ns == ns
        {
            let patch = json!({"count": count + 1, "lastTimestamp": now});
            if api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                if let Ok(mut m) = self.seen.lock() {
                    m.insert((uid, message), (ns, name, count + 1));
                }
                return Ok(());
            }
        }
        let name = format!(
            "{}.{:x}",
            object::name(parent).unwrap_or("parent"),
            jiff::Timestamp::now().as_nanosecond()
        );
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "apiVersion": object::api_version(parent),
                "kind": object::kind(parent),
                "name": object::name(parent),
                "namespace": object::namespace(parent),
                "uid": uid,
                "resourceVersion": object::resource_version(parent),
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": "kubectl-meta"},
            "reportingComponent": "kubectl-meta",
        }))
        .map_err(kube::Error::SerdeError)?;
        api.create(&PostParams::default(), &event).await?;
        if let Ok(mut m) = self.seen.lock() {
            m.insert((uid, message), (ns, name, 1));
        }
        Ok(())
    }
}

/// Log an Event the server refused. A namespace being deleted refuses new Events (cause
/// `NamespaceTerminating`): expected while a parent's namespace goes (e.g. `test --context`
/// deleting a test's namespace), so at debug level, as client-go's event recorder does.
fn not_recorded(reason: &str, e: &kube::Error) {
    if namespace_terminating(e) {
        tracing::debug!("could not record a {reason} event: its namespace is being deleted: {e}");
    } else {
        tracing::warn!("could not record a {reason} event: {e}");
    }
}

/// Whether the server refused because the namespace is being deleted.
fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| {
        d.causes.iter().any(|c| c.reason == "NamespaceTerminating")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cause: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            serde_json::from_value(json!({
                "status": "Failure", "code": 403, "reason": "Forbidden",
                "message": "events \"x\" is forbidden",
                "details": {"name": "x", "kind": "events",
                    "causes": [{"reason": cause, "message": "m", "field": "metadata.namespace"}]},
            }))
            .expect("a Status"),
        ))
    }

    #[test]
    fn a_terminating_namespace_is_told_apart_from_other_refusals() {
        assert!(namespace_terminating(&refused("NamespaceTerminating")));
        assert!(!namespace_terminating(&refused("FieldValueInvalid")));
    }
}
