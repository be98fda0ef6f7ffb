//! Per-key memory between syncs ([`SyncMemory`]): uid routing, the status last written, the
//! last hook exchange, and the hot-loop guard's held fields.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Mutex;

use serde_json::Value;

use crate::engine::events::{EventKey, Trigger};
use crate::engine::plan::apply;
use crate::engine::plan::hotloop;
use crate::engine::plan::writes::ChildId;
use crate::engine::runtime::controller::Exchange;
use crate::k8s::object;

/// What a controller remembers per key between syncs: which key a uid belongs to (routing
/// events of owned objects), the status it last wrote (to ignore its echo) and the last
/// sync/finalize exchange (replay, TUI).
#[derive(Debug)]
pub struct SyncMemory<K> {
    inner: Mutex<Memory<K>>,
}

#[derive(Debug)]
struct Memory<K> {
    uid_to_key: HashMap<String, K>,
    last_status: HashMap<K, Value>,
    last_exchange: HashMap<K, (String, Value, Value)>,
    hot_loops: HashMap<K, hotloop::Guard>,
}

impl<K> Default for SyncMemory<K> {
    fn default() -> Self {
        SyncMemory {
            inner: Mutex::new(Memory {
                uid_to_key: HashMap::new(),
                last_status: HashMap::new(),
                last_exchange: HashMap::new(),
                hot_loops: HashMap::new(),
            }),
        }
    }
}

impl<K: Clone + Eq + Hash + Display> SyncMemory<K> {
    /// Remember that `obj` (by its uid) is `key`.
    pub fn remember_uid(&self, obj: &Value, key: &K) {
        if let (Some(uid), Ok(mut m)) = (object::uid(obj), self.inner.lock()) {
            m.uid_to_key.insert(uid.to_string(), key.clone());
        }
    }

    /// The key of the object with this uid, when it was remembered.
    pub fn key_of_uid(&self, uid: &str) -> Option<K> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.uid_to_key.get(uid).cloned())
    }

    /// Remember the status just written for `key`.
    pub fn record_status(&self, key: &K, status: Value) {
        if let Ok(mut m) = self.inner.lock() {
            m.last_status.insert(key.clone(), status);
        }
    }

    /// Should an update of `key` from `old` to `new` trigger a sync? Yes when anything but
    /// status (and resourceVersion, managedFields) changed; for a status-only change, no when
    /// `ignore_status_changes` or when the new status is the one we last wrote.
    pub fn update_matters(
        &self,
        key: &K,
        old: &Value,
        new: &Value,
        ignore_status_changes: bool,
    ) -> bool {
        if object::strip_volatile(old, true) != object::strip_volatile(new, true) {
            return true;
        }
        if ignore_status_changes {
            return false;
        }
        let ours = self
            .inner
            .lock()
            .ok()
            .and_then(|m| m.last_status.get(key).cloned());
        match (ours, new.get("status")) {
            (Some(ours), Some(st)) => !crate::engine::plan::apply::values_equal(&ours, st),
            _ => true,
        }
    }

    /// Remember the last sync/finalize exchange of `key`.
    pub fn record_exchange(&self, key: &K, hook: &str, request: Value, response: Value) {
        if let Ok(mut m) = self.inner.lock() {
            m.last_exchange
                .insert(key.clone(), (hook.to_string(), request, response));
        }
    }

    #[cfg(test)]
    /// The last sync/finalize exchange of `key`: (hook name, request, response).
    pub fn last_exchange(&self, key: &K) -> Option<(String, Value, Value)> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.last_exchange.get(key).cloned())
    }

    /// Every key's last exchange, with the parent (and map key) it was for.
    pub fn exchanges(&self) -> Vec<Exchange>
    where
        K: EventKey,
    {
        self.inner
            .lock()
            .map(|m| {
                m.last_exchange
                    .iter()
                    .map(|(k, v)| (k.subject(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forget `key` (its object `obj` was deleted).
    pub fn forget(&self, key: &K, obj: &Value) {
        if let Ok(mut m) = self.inner.lock() {
            if let Some(uid) = object::uid(obj) {
                m.uid_to_key.remove(uid);
            }
            m.last_status.remove(key);
            m.last_exchange.remove(key);
            m.hot_loops.remove(key);
        }
    }

    /// A sync asked for by a hook reload, a user or `resyncPeriodSeconds` (in `triggers`)
    /// clears the hot-loop guard of `key`, so its held fields are written again.
    pub fn clear_hot_loops_on(&self, key: &K, triggers: &[Trigger]) {
        let clears = triggers.iter().any(|t| {
            matches!(
                t,
                Trigger::HookReloaded | Trigger::Manual | Trigger::ResyncPeriod
            )
        });
        if clears && let Ok(mut m) = self.inner.lock() {
            m.hot_loops.remove(key);
        }
    }

    /// The child fields the hot-loop guard holds for `key`, for the next plan.
    pub fn held_fields(&self, key: &K) -> BTreeMap<ChildId, Vec<apply::HeldField>> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.hot_loops.get(key).map(hotloop::Guard::held_fields))
            .unwrap_or_default()
    }

    /// Account for an executed plan in the hot-loop guard of `key`: returns the fields held
    /// from now on and every field held (newly or not), as messages.
    pub(crate) fn record_rewrites(
        &self,
        key: &K,
        plan: &crate::engine::plan::writes::Writes,
        updated: &[ChildId],
    ) -> (Vec<hotloop::HotLoop>, Vec<String>) {
        let Ok(mut m) = self.inner.lock() else {
            return (Vec::new(), Vec::new());
        };
        let guard = m.hot_loops.entry(key.clone()).or_default();
        let tripped = guard.record(plan, updated);
        let held = guard.held().iter().map(hotloop::HotLoop::message).collect();
        if guard.is_empty() {
            m.hot_loops.remove(key);
        }
        (tripped, held)
    }
}
