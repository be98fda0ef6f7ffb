//! Per-key memory between syncs ([`SyncMemory`]): uid routing, the status last written, the
//! last hook exchange, the hot-loop guard's held fields, and the engine's own writes.
//!
//! **Own child writes are not synced again**: the objects a sync wrote and the resourceVersion
//! each write returned are remembered, and when a key comes off the queue its triggers that
//! are only the echoes of those writes are dropped ([`SyncMemory::drop_own_echoes`]); a key
//! left with no trigger is not synced. A trigger is an echo when the cache shows the object at
//! exactly the resourceVersion our write returned: any later write by anyone moves it, so another writer, a generation change, a resync period, a reload
//! or a retry still sync. Every write kept for this is preconditioned (resourceVersion or uid),
//! so no other writer's change can hide behind our echo. Server-side applies (no precondition)
//! are never treated as echoes, nor are deletes: a graceful deletion ends later, and the event
//! of the object gone drives the next step (a Recreate's create, a rolling update's next Pod).
//!
//! What replaces the echoes is one confirming sync ([`crate::runtime::controller`]):
//! after a sync that wrote children (the hook must see them), and, by default, after one that
//! wrote only the parent's status, as Metacontroller syncs on that echo so a hook sees its
//! status committed (3 syncs for a parent with new children). `--status-echo skip`
//! (`EngineOptions::confirm_status_writes` off) drops that last one: 2 syncs, for hooks whose
//! answer does not depend on their own last status (one that writes the time or a counter
//! there would loop under Metacontroller, and here stops after its write).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Mutex;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::events::{EventKey, EventSubject, Trigger};
use crate::k8s::informer::{CachedText, Informer};
use crate::k8s::object::{self, ObjectKey};
use crate::plan::apply;
use crate::plan::hotloop;
use crate::plan::writes::ChildId;
use crate::runtime::controller::LastExchange;
use crate::runtime::execute::OwnWrite;
use crate::runtime::queue::MAX_TRIGGERS;

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
    last_exchange: HashMap<K, StoredExchange>,
    hot_loops: HashMap<K, hotloop::Guard>,
    own: HashMap<K, OwnWrites>,
}

/// What a key's syncs wrote and whose echo is still to come.
#[derive(Debug, Default)]
struct OwnWrites {
    /// The parent's resourceVersion after our last write of it.
    parent: Option<String>,
    /// (`Kind.apiVersion`, `namespace/name`) -> resourceVersion our write returned (`None`: the
    /// answer had none, so no event can be told to be its echo).
    children: HashMap<(String, String), Option<String>>,
}

/// What the caches show of an object a trigger names, for [`SyncMemory::drop_own_echoes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    /// No cache for this resource: nothing can be told, the trigger is kept.
    Unknown,
    /// Not in the cache (deleted).
    Absent,
    /// In the cache at this resourceVersion.
    At(Option<String>),
}

impl<K> Default for SyncMemory<K> {
    fn default() -> Self {
        SyncMemory {
            inner: Mutex::new(Memory {
                uid_to_key: HashMap::new(),
                last_status: HashMap::new(),
                last_exchange: HashMap::new(),
                hot_loops: HashMap::new(),
                own: HashMap::new(),
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
            (Some(ours), Some(st)) => !crate::plan::apply::values_equal(&ours, st),
            _ => true,
        }
    }

    /// Remember the last sync/finalize exchange of `key` (as compact JSON text: see
    /// [`StoredExchange`]).
    #[cfg(test)]
    pub fn record_exchange(&self, key: &K, hook: &str, request: &Value, response: &Value) {
        self.record_exchange_sharing(key, hook, request, response, |_| None);
    }

    /// [`SyncMemory::record_exchange`], the request's objects that `cached` finds shared with
    /// the caches (see [`StoredExchange::sharing`]).
    pub(crate) fn record_exchange_sharing(
        &self,
        key: &K,
        hook: &str,
        request: &Value,
        response: &Value,
        cached: impl Fn(&Value) -> Option<CachedText>,
    ) {
        let x = StoredExchange::sharing(hook, request, response, cached);
        if let Ok(mut m) = self.inner.lock() {
            m.last_exchange.insert(key.clone(), x);
        }
    }

    #[cfg(test)]
    /// The last sync/finalize exchange of `key`: (hook name, request, response).
    pub fn last_exchange(&self, key: &K) -> Option<(String, Value, Value)>
    where
        K: EventKey,
    {
        let x = self
            .inner
            .lock()
            .ok()
            .and_then(|m| m.last_exchange.get(key).map(|x| x.to_last(key.subject())))?;
        Some((x.hook, x.request, x.response))
    }

    /// Every key's last exchange, with the parent (and map key) it was for.
    pub fn exchanges(&self) -> Vec<LastExchange>
    where
        K: EventKey,
    {
        self.inner
            .lock()
            .map(|m| {
                m.last_exchange
                    .iter()
                    .map(|(k, x)| x.to_last(k.subject()))
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
            m.own.remove(key);
        }
    }

    /// Remember what a sync of `key` wrote: the parent's resourceVersion after its writes
    /// (`None`: the parent was not written) and each child write.
    pub fn record_own_writes(&self, key: &K, parent_rv: Option<String>, children: &[OwnWrite]) {
        if parent_rv.is_none() && children.is_empty() {
            return;
        }
        if let Ok(mut m) = self.inner.lock() {
            let own = m.own.entry(key.clone()).or_default();
            if parent_rv.is_some() {
                own.parent = parent_rv;
            }
            for w in children {
                own.children
                    .insert((w.type_key.clone(), w.key.to_string()), w.rv.clone());
            }
        }
    }

    /// `triggers` of `key` without those that are only the echoes of our own writes (see the
    /// module header): `parent` is the cache's resourceVersion of the parent (`None`: not
    /// cached), `child` what the cache of a resource (`Kind.apiVersion`) shows of an object.
    /// The child echoes dropped are forgotten (each write has one echo). A list of
    /// [`MAX_TRIGGERS`] may have lost older triggers in the queue: it is kept whole.
    pub fn drop_own_echoes(
        &self,
        key: &K,
        triggers: Vec<Trigger>,
        parent: Option<&str>,
        child: impl Fn(&str, &ObjectKey) -> Cached,
    ) -> Vec<Trigger> {
        if triggers.len() >= MAX_TRIGGERS {
            return triggers;
        }
        let Ok(mut m) = self.inner.lock() else {
            return triggers;
        };
        let Some(own) = m.own.get_mut(key) else {
            return triggers;
        };
        let mut echoed = Vec::new();
        let kept = triggers
            .into_iter()
            .filter(|t| match t {
                Trigger::ParentChanged => !(parent.is_some() && own.parent.as_deref() == parent),
                Trigger::Child {
                    resource, object, ..
                } => {
                    let id = (resource.clone(), object.clone());
                    let Some(ours) = own.children.get(&id) else {
                        return true;
                    };
                    let seen = child(resource.as_str(), &object_key(object));
                    let echo = match (ours, seen) {
                        (Some(rv), Cached::At(Some(now))) => *rv == now,
                        _ => false,
                    };
                    if echo {
                        echoed.push(id);
                    }
                    !echo
                }
                _ => true,
            })
            .collect();
        for id in echoed {
            own.children.remove(&id);
        }
        if own.parent.is_none() && own.children.is_empty() {
            m.own.remove(key);
        }
        kept
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

    /// Replace a held field's record in the hot-loop guard of `key` (its cause found later).
    pub(crate) fn update_hot_loop(&self, key: &K, h: &hotloop::HotLoop) {
        if let Ok(mut m) = self.inner.lock()
            && let Some(g) = m.hot_loops.get_mut(key)
        {
            g.update_held(h);
        }
    }

    /// Account for an executed plan in the hot-loop guard of `key`: returns the fields held
    /// from now on and every field held (newly or not), as messages.
    pub(crate) fn record_rewrites(
        &self,
        key: &K,
        plan: &crate::plan::writes::Writes,
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

/// `namespace/name` (or `name`) as an [`ObjectKey`].
fn object_key(s: &str) -> ObjectKey {
    match s.split_once('/') {
        Some((ns, name)) => ObjectKey::new(Some(ns), name),
        None => ObjectKey::new(None, s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(object: &str, event: &str) -> Trigger {
        Trigger::Child {
            resource: "ConfigMap.v1".into(),
            object: object.into(),
            event: event.into(),
        }
    }

    fn wrote(object: &str, rv: Option<&str>) -> OwnWrite {
        OwnWrite {
            type_key: "ConfigMap.v1".into(),
            key: object_key(object),
            rv: rv.map(str::to_string),
        }
    }

    /// The cache as a list of (`namespace/name`, resourceVersion) of ConfigMaps.
    fn cache<'a>(objects: &'a [(&'a str, &'a str)]) -> impl Fn(&str, &ObjectKey) -> Cached + 'a {
        move |type_key, key| {
            if type_key != "ConfigMap.v1" {
                return Cached::Unknown;
            }
            objects
                .iter()
                .find(|(o, _)| object_key(o) == *key)
                .map_or(Cached::Absent, |(_, rv)| {
                    Cached::At(Some((*rv).to_string()))
                })
        }
    }

    #[test]
    fn the_echoes_of_our_own_writes_are_dropped_once() {
        let mem = SyncMemory::<String>::default();
        let k = "ns/p".to_string();
        mem.record_own_writes(
            &k,
            Some("12".into()),
            &[wrote("ns/a", Some("10")), wrote("ns/b", Some("11"))],
        );
        let triggers = vec![
            child("ns/a", "added"),
            child("ns/b", "added"),
            Trigger::ParentChanged,
        ];
        let objects = [("ns/a", "10"), ("ns/b", "11")];
        let kept = mem.drop_own_echoes(&k, triggers, Some("12"), cache(&objects));
        assert_eq!(kept, Vec::<Trigger>::new());
        // Each child write has one echo: a second event of the same object is someone's.
        let again = mem.drop_own_echoes(
            &k,
            vec![child("ns/a", "updated")],
            Some("12"),
            cache(&objects),
        );
        assert_eq!(again, vec![child("ns/a", "updated")]);
        // The parent at our resourceVersion stays ours (status echoes may repeat in triggers).
        let parent = mem.drop_own_echoes(
            &k,
            vec![Trigger::ParentChanged],
            Some("12"),
            cache(&objects),
        );
        assert_eq!(parent, Vec::<Trigger>::new());
    }

    #[test]
    fn another_writer_a_resync_or_a_confirmation_still_sync() {
        let mem = SyncMemory::<String>::default();
        let k = "ns/p".to_string();
        mem.record_own_writes(
            &k,
            Some("12".into()),
            &[wrote("ns/a", Some("10")), wrote("ns/d", None)],
        );
        // Someone wrote ns/a after us (rv 13), recreated ns/d, changed the parent (generation or
        // anything else: rv 14); a ConfigMap we did not write changed.
        let objects = [("ns/a", "13"), ("ns/d", "3"), ("ns/other", "9")];
        let triggers = vec![
            child("ns/a", "updated"),
            child("ns/d", "added"),
            child("ns/other", "updated"),
            Trigger::ParentChanged,
            Trigger::ResyncPeriod,
            Trigger::Converge,
            Trigger::HookReloaded,
            Trigger::Retry,
        ];
        let kept = mem.drop_own_echoes(&k, triggers.clone(), Some("14"), cache(&objects));
        assert_eq!(kept, triggers);
        // A resource without a cache cannot be told apart: kept.
        let secret = Trigger::Child {
            resource: "Secret.v1".into(),
            object: "ns/a".into(),
            event: "added".into(),
        };
        let kept = mem.drop_own_echoes(&k, vec![secret.clone()], Some("12"), cache(&objects));
        assert_eq!(kept, vec![secret]);
    }

    #[test]
    fn a_full_trigger_list_and_a_forgotten_key_are_kept_whole() {
        let mem = SyncMemory::<String>::default();
        let k = "ns/p".to_string();
        let parent = json_parent();
        mem.record_own_writes(&k, Some("12".into()), &[wrote("ns/a", Some("10"))]);
        let objects = [("ns/a", "10")];
        // The queue keeps the newest MAX_TRIGGERS triggers: an older one from another writer may
        // have been dropped, so nothing is taken away.
        let full: Vec<Trigger> = (0..MAX_TRIGGERS)
            .map(|i| child(if i == 0 { "ns/a" } else { "ns/x" }, &format!("e{i}")))
            .collect();
        assert_eq!(
            mem.drop_own_echoes(&k, full.clone(), Some("12"), cache(&objects)),
            full
        );
        // The parent was deleted: nothing of it is remembered.
        mem.forget(&k, &parent);
        let t = vec![child("ns/a", "added"), Trigger::ParentChanged];
        assert_eq!(
            mem.drop_own_echoes(&k, t.clone(), Some("12"), cache(&objects)),
            t
        );
    }

    #[test]
    fn a_requests_cached_objects_are_shared_not_copied_and_replay_whole() {
        use serde_json::json;
        let cm = |name: &str, data: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7"},
                "data": {"k": data}})
        };
        let parent = json!({"apiVersion": "x/v1", "kind": "P",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "3"}});
        let request = json!({
            "controller": {"metadata": {"name": "c"}, "spec": {}},
            "parent": parent,
            "children": {"ConfigMap.v1": {"a": cm("a", "shared-a"), "b": cm("b", "mine-b")}},
            "finalizing": false
        });
        // The caches hold the parent and `a` as in the request, `b` in another text.
        let caches = [parent.clone(), cm("a", "shared-a"), cm("b", "cached-b")];
        let x = StoredExchange::sharing("sync", &request, &json!({"children": []}), |obj| {
            caches
                .iter()
                .find(|c| c["metadata"]["name"] == obj["metadata"]["name"])
                .map(CachedText::of)
        });
        assert_eq!(x.shared.len(), 2, "the parent and child a");
        let text = x.request.get();
        assert!(
            !text.contains("shared-a") && text.contains("mine-b"),
            "{text}"
        );
        let last = x.to_last(ObjectKey::new(Some("ns"), "p").subject());
        assert_eq!(last.request, request);
        assert_eq!(last.response, json!({"children": []}));
    }

    fn json_parent() -> Value {
        serde_json::json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    }
}

/// A hook exchange kept between syncs for replays (the replay memory): the request and the
/// answer as compact JSON text, parsed again only when replayed. A request holds copies of the
/// parent and of every child it observed, so keeping it as a `Value` tree (a map and a string
/// allocation per field, in insertion order) cost more than the informers' cached objects
/// themselves; the text is several times smaller. The request's objects that the caches hold at
/// the same version (the parent, children, related objects: all of them in a steady state) are
/// not copied at all: the request's text has `null` in their place and the exchange shares the
/// cache's text of each ([`CachedText`]), put back when replayed. The engine bench's
/// CompositeController (1,000 parents x 5 children) kept 1.23 KB of exchange text per cached
/// object, more than the caches' text (0.97 KB); the parents and children are most of it.
#[derive(Debug, Clone)]
pub(crate) struct StoredExchange {
    hook: Box<str>,
    request: Box<RawValue>,
    response: Box<RawValue>,
    /// The request's objects shared with the caches: where each goes, and its text.
    shared: Box<[SharedObject]>,
}

impl StoredExchange {
    /// Keep `request` and `response` of hook `hook`, sharing the request's objects that
    /// `cached` finds in a cache at the same version (`cached`: the cache's text of an object
    /// of the request, by its type, namespace/name and resourceVersion).
    pub(crate) fn sharing(
        hook: &str,
        request: &Value,
        response: &Value,
        cached: impl Fn(&Value) -> Option<CachedText>,
    ) -> Self {
        let mut text = String::new();
        let mut shared = Vec::new();
        write_sharing(&mut text, request, 3, &mut Vec::new(), &mut shared, &cached);
        let request = RawValue::from_string(text).unwrap_or_else(|_| compact(request));
        StoredExchange {
            hook: hook.into(),
            request,
            response: compact(response),
            shared: shared.into_boxed_slice(),
        }
    }

    /// The exchange as replays take it, for `subject`.
    pub(crate) fn to_last(&self, subject: EventSubject) -> LastExchange {
        let parse = |raw: &str| serde_json::from_str(raw).unwrap_or(Value::Null);
        let mut request = parse(self.request.get());
        for (path, text) in self.shared.iter() {
            let slot = path
                .iter()
                .try_fold(&mut request, |v, k| v.get_mut(k.as_ref()));
            if let Some(slot) = slot {
                *slot = parse(text.text());
            }
        }
        LastExchange {
            subject,
            hook: self.hook.to_string(),
            request,
            response: parse(self.response.get()),
        }
    }
}

/// An object of a kept request shared with a cache: where it goes (the keys from the request
/// down), and its text.
type SharedObject = (Box<[Box<str>]>, CachedText);

/// `v` as compact JSON text into `out`, down to `depth` levels of objects: an object with
/// `metadata` there whose text is the one `cached` finds is written as `null` and added to
/// `shared` with its `path`.
fn write_sharing(
    out: &mut String,
    v: &Value,
    depth: u8,
    path: &mut Vec<Box<str>>,
    shared: &mut Vec<SharedObject>,
    cached: &impl Fn(&Value) -> Option<CachedText>,
) {
    let json = |v: &Value| serde_json::to_string(v).unwrap_or_else(|_| "null".to_string());
    let Value::Object(m) = v else {
        out.push_str(&json(v));
        return;
    };
    if m.contains_key("metadata") {
        let own = json(v);
        match cached(v) {
            Some(text) if text.text() == own => {
                out.push_str("null");
                shared.push((path.clone().into_boxed_slice(), text));
            }
            _ => out.push_str(&own),
        }
        return;
    }
    if depth == 0 {
        out.push_str(&json(v));
        return;
    }
    out.push('{');
    for (i, (k, x)) in m.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json(&Value::String(k.clone())));
        out.push(':');
        path.push(k.as_str().into());
        write_sharing(out, x, depth - 1, path, shared, cached);
        path.pop();
    }
    out.push('}');
}

/// The cache's text of `obj` when `informer_for` (by `Kind.apiVersion`) has a cache holding
/// it at the same resourceVersion.
pub(crate) fn cached_text<'a>(
    obj: &Value,
    informer_for: impl Fn(&str) -> Option<&'a std::sync::Arc<Informer>>,
) -> Option<CachedText> {
    let rv = object::resource_version(obj)?;
    let type_key = format!(
        "{}.{}",
        obj.get("kind")?.as_str()?,
        obj.get("apiVersion")?.as_str()?
    );
    let text = informer_for(&type_key)?.cached_text(&ObjectKey::of(obj)?)?;
    (text.resource_version() == Some(rv)).then_some(text)
}

/// `v` as compact JSON text (a `Value` always serializes; `null` if it ever did not).
fn compact(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned())
}
