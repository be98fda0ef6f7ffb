//! The object store: every object of every resource, the global resourceVersion, and change events.
//!
//! One mutex guards all tables, so writes are totally ordered: each write gets the next
//! resourceVersion, is persisted (when a state directory is used), applied to memory, appended
//! to a bounded history and broadcast to watchers, in that order. Objects are kept as their
//! serialized JSON plus the few parsed fields the server filters and indexes on (labels, uid,
//! owners), so memory grows with the stored bytes and lists are a concatenation of bytes.
//!
//! Indexes: uid -> object, owner uid -> dependents (for the garbage collector). No request
//! path scans every object.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::persist::{Db, Loaded, PersistError};

/// Identifies one stored object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// Storage key of the resource (`apps/deployments`, `/configmaps`).
    pub gr: Arc<str>,
    /// Namespace, "" for cluster-scoped objects.
    pub ns: String,
    /// Name.
    pub name: String,
}

/// An owner reference, as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// Owner uid.
    pub uid: String,
    /// `controller: true`.
    pub controller: bool,
    /// `blockOwnerDeletion: true`.
    pub block: bool,
}

/// One stored object version.
#[derive(Debug)]
pub struct Stored {
    /// Where it lives.
    pub key: ObjKey,
    /// Its resourceVersion.
    pub rv: u64,
    /// `metadata.uid`.
    pub uid: String,
    /// Serialized JSON (with `metadata.resourceVersion` set).
    pub bytes: Bytes,
    /// `metadata.labels`, sorted by key (a slice: a one-entry BTreeMap costs a ~500-byte node).
    pub labels: Box<[(String, String)]>,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerRef>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// Where `metadata`'s value lies in `bytes` (metadata-only answers copy it from there).
    meta_range: Span,
}

/// A byte range `[start, end)` in a serialized object.
type Span = Option<(u32, u32)>;

/// Serialize `obj` exactly as `serde_json::to_vec` does, noting where the value of its
/// top-level `metadata` member lies.
fn to_vec_noting_metadata(obj: &Value) -> serde_json::Result<(Vec<u8>, Span)> {
    let Value::Object(m) = obj else {
        return Ok((serde_json::to_vec(obj)?, None));
    };
    let mut out = Vec::with_capacity(512);
    let mut range = None;
    out.push(b'{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k)?;
        out.push(b':');
        let start = out.len();
        serde_json::to_writer(&mut out, v)?;
        if k == "metadata" {
            range = u32::try_from(start).ok().zip(u32::try_from(out.len()).ok());
        }
    }
    out.push(b'}');
    Ok((out, range))
}

impl Stored {
    fn new(key: ObjKey, rv: u64, obj: &Value) -> Result<Stored, StoreError> {
        let meta = &obj["metadata"];
        let mut labels: Vec<(String, String)> = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        labels.sort_unstable();
        let owners = meta["ownerReferences"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|o| {
                        Some(OwnerRef {
                            uid: o["uid"].as_str()?.to_string(),
                            controller: o["controller"].as_bool().unwrap_or(false),
                            block: o["blockOwnerDeletion"].as_bool().unwrap_or(false),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let finalizers = meta["finalizers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let (mut json, meta_range) =
            to_vec_noting_metadata(obj).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // to_vec grows by doubling; don't keep the slack for the object's lifetime.
        json.shrink_to_fit();
        let bytes = Bytes::from(json);
        Ok(Stored {
            key,
            rv,
            uid: meta["uid"].as_str().unwrap_or_default().to_string(),
            bytes,
            labels: labels.into_boxed_slice(),
            owners,
            deleting: !meta["deletionTimestamp"].is_null(),
            finalizers,
            meta_range,
        })
    }

    /// The serialized `metadata` of the object (`{}` if it has none), without parsing it.
    pub fn metadata_bytes(&self) -> &[u8] {
        match self.meta_range {
            Some((a, b)) => &self.bytes[a as usize..b as usize],
            None => b"{}",
        }
    }

    /// The value of label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_str())
    }

    /// Parse the stored JSON.
    pub fn value(&self) -> Result<Value, StoreError> {
        serde_json::from_slice(&self.bytes).map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Removed.
    Deleted,
}

impl EventKind {
    /// The watch event `type`.
    pub fn as_str(&self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// A change, as delivered to watchers (for deletes, `obj` is the last state at the delete's resourceVersion).
#[derive(Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The object after the change.
    pub obj: Arc<Stored>,
    /// The object before the change (None for creates).
    pub prev: Option<Arc<Stored>>,
}

/// Errors of store operations.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such object.
    #[error("not found")]
    NotFound,
    /// The name is taken.
    #[error("already exists")]
    AlreadyExists,
    /// resourceVersion precondition failed.
    #[error("resourceVersion conflict")]
    Conflict,
    /// A delete precondition (uid) failed.
    #[error("{0}")]
    Precondition(String),
    /// The requested watch start is older than the kept history.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// Requested version.
        requested: u64,
        /// Oldest version that can still be replayed from.
        oldest: u64,
    },
    /// Persisting failed; nothing was changed.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// Stored bytes could not be (de)serialized.
    #[error("corrupt object: {0}")]
    Corrupt(String),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchStart {
    /// Only changes after now.
    Now,
    /// Synthetic ADDED events for all current objects, then changes.
    InitialState,
    /// Changes after this resourceVersion (replayed from history).
    After(u64),
}

/// A registered watch: the events to send first, and the live receiver.
#[derive(Debug)]
pub struct WatchSubscription {
    /// Events to send before live ones (replay or synthetic initial state).
    pub backlog: Vec<Arc<Event>>,
    /// Live events; those with `rv <= start_rv` must be skipped.
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// resourceVersion at subscription time.
    pub start_rv: u64,
}

/// A page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// Matching objects, in key order.
    pub items: Vec<Arc<Stored>>,
    /// The store's resourceVersion when listed.
    pub rv: u64,
    /// Key of the last item, if the limit was reached before the last object in scope (as
    /// kube-apiserver's watch cache: the next page may then hold nothing that matches).
    pub next_after: Option<(String, String)>,
    /// With `next_after`: the objects in scope from this page's start, less the limit, whether
    /// or not they match (kube-apiserver's `remainingItemCount`, which it only publishes for an
    /// unfiltered list; a shardSelector does not count as a filter there).
    pub remaining: Option<usize>,
}

type Table = BTreeMap<(String, String), Arc<Stored>>;

struct Inner {
    rv: u64,
    tables: HashMap<Arc<str>, Table>,
    by_uid: HashMap<String, ObjKey>,
    dependents: HashMap<String, HashSet<ObjKey>>,
    history: VecDeque<Arc<Event>>,
    /// Every event with rv > this is in `history`.
    replay_floor: u64,
    db: Option<Db>,
}

/// The sandbox's object store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    history_len: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

/// Watch fan-out buffer: a watcher this far behind is disconnected (and re-lists).
const BROADCAST_CAPACITY: usize = 1 << 16;

impl Store {
    /// An empty store (optionally persisted, with `loaded` as its starting content).
    pub fn new(db: Option<Db>, loaded: Loaded, history_len: usize) -> Result<Store, StoreError> {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        let mut inner = Inner {
            rv: loaded.rv,
            tables: HashMap::new(),
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
            history: VecDeque::new(),
            replay_floor: loaded.rv,
            db,
        };
        for row in loaded.rows {
            let obj: Value = serde_json::from_slice(&row.data).map_err(|e| {
                StoreError::Corrupt(format!("{}/{}/{}: {e}", row.gr, row.ns, row.name))
            })?;
            let rv = obj["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let key = ObjKey {
                gr: Arc::from(row.gr.as_str()),
                ns: row.ns,
                name: row.name,
            };
            let stored = Arc::new(Stored::new(key, rv, &obj)?);
            inner.index_insert(&stored);
            inner.table(&stored.key.gr).insert(
                (stored.key.ns.clone(), stored.key.name.clone()),
                stored.clone(),
            );
        }
        Ok(Store {
            inner: Mutex::new(inner),
            tx,
            history_len,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in a way later
        // readers could not cope with, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.lock().rv
    }

    /// Get one object.
    pub fn get(&self, gr: &str, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let inner = self.lock();
        inner
            .tables
            .get(gr)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Find an object by uid.
    pub fn get_by_uid(&self, uid: &str) -> Option<Arc<Stored>> {
        let inner = self.lock();
        let key = inner.by_uid.get(uid)?;
        inner
            .tables
            .get(&key.gr)?
            .get(&(key.ns.clone(), key.name.clone()))
            .cloned()
    }

    /// Objects whose ownerReferences name `owner_uid`.
    pub fn dependents(&self, owner_uid: &str) -> Vec<Arc<Stored>> {
        let inner = self.lock();
        let Some(keys) = inner.dependents.get(owner_uid) else {
            return Vec::new();
        };
        keys.iter().filter_map(|k| inner.lookup(k)).collect()
    }

    /// Every object (used once at start-up by controllers that need a full pass).
    pub fn all(&self) -> Vec<Arc<Stored>> {
        let inner = self.lock();
        inner
            .tables
            .values()
            .flat_map(|t| t.values().cloned())
            .collect()
    }

    /// All objects of one resource in one namespace ("" for cluster-scoped objects).
    pub fn in_namespace(&self, gr: &str, ns: &str) -> Vec<Arc<Stored>> {
        let inner = self.lock();
        let Some(t) = inner.tables.get(gr) else {
            return Vec::new();
        };
        t.range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Names of the resources that have objects in namespace `ns`.
    pub fn resources_with_objects_in(&self, ns: &str) -> Vec<Arc<str>> {
        let inner = self.lock();
        inner
            .tables
            .iter()
            .filter(|(_, t)| {
                t.range((ns.to_string(), String::new())..)
                    .next()
                    .is_some_and(|((n, _), _)| n == ns)
            })
            .map(|(gr, _)| gr.clone())
            .collect()
    }

    /// List objects of `gr` (optionally in one namespace), after a continue key, filtered, limited.
    pub fn list(
        &self,
        gr: &str,
        ns: Option<&str>,
        after: Option<(String, String)>,
        limit: Option<usize>,
        filter: impl Fn(&Stored) -> bool,
    ) -> ListPage {
        let (candidates, rv) = {
            let inner = self.lock();
            let rv = inner.rv;
            let Some(t) = inner.tables.get(gr) else {
                return ListPage {
                    items: vec![],
                    rv,
                    next_after: None,
                    remaining: None,
                };
            };
            let start = match (&after, ns) {
                (Some(a), _) => std::ops::Bound::Excluded(a.clone()),
                (None, Some(ns)) => std::ops::Bound::Included((ns.to_string(), String::new())),
                (None, None) => std::ops::Bound::Unbounded,
            };
            let c: Vec<Arc<Stored>> = t
                .range((start, std::ops::Bound::Unbounded))
                .take_while(|((n, _), _)| ns.is_none_or(|ns| n == ns))
                .map(|(_, s)| s.clone())
                .collect();
            (c, rv)
        };
        let scanned = candidates.len();
        let mut items = Vec::new();
        let mut next_after = None;
        for (i, s) in candidates.into_iter().enumerate() {
            if !filter(&s) {
                continue;
            }
            items.push(s);
            if let Some(l) = limit
                && items.len() >= l
            {
                if i + 1 < scanned {
                    next_after = items.last().map(|s| (s.key.ns.clone(), s.key.name.clone()));
                }
                break;
            }
        }
        let remaining = match (&next_after, limit) {
            (Some(_), Some(l)) => Some(scanned.saturating_sub(l)),
            _ => None,
        };
        ListPage {
            items,
            rv,
            next_after,
            remaining,
        }
    }

    #[cfg(test)]
    /// Create an object. Sets `metadata.resourceVersion`.
    pub fn create(&self, key: ObjKey, obj: Value) -> Result<Arc<Stored>, StoreError> {
        self.create_value(key, obj).map(|(s, _)| s)
    }

    /// Like [`Store::create`], also giving back the object as stored (so callers need not
    /// parse the stored bytes again).
    pub fn create_value(
        &self,
        key: ObjKey,
        mut obj: Value,
    ) -> Result<(Arc<Stored>, Value), StoreError> {
        let mut inner = self.lock();
        if inner.lookup(&key).is_some() {
            return Err(StoreError::AlreadyExists);
        }
        let rv = inner.rv + 1;
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let stored = Arc::new(Stored::new(key, rv, &obj)?);
        self.commit(&mut inner, EventKind::Added, stored.clone(), None)?;
        Ok((stored, obj))
    }

    /// Replace an object. `expected_rv` (if given) must match the current version.
    pub fn update(
        &self,
        key: ObjKey,
        expected_rv: Option<u64>,
        obj: Value,
    ) -> Result<Arc<Stored>, StoreError> {
        self.update_value(key, expected_rv, obj).map(|(s, _)| s)
    }

    /// Like [`Store::update`], also giving back the object as stored.
    pub fn update_value(
        &self,
        key: ObjKey,
        expected_rv: Option<u64>,
        mut obj: Value,
    ) -> Result<(Arc<Stored>, Value), StoreError> {
        let mut inner = self.lock();
        let prev = inner.lookup(&key).ok_or(StoreError::NotFound)?;
        if expected_rv.is_some_and(|e| e != prev.rv) {
            return Err(StoreError::Conflict);
        }
        let rv = inner.rv + 1;
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let stored = Arc::new(Stored::new(key, rv, &obj)?);
        self.commit(&mut inner, EventKind::Modified, stored.clone(), Some(prev))?;
        Ok((stored, obj))
    }

    /// Remove an object, if it still has `expected_rv` / `expected_uid` when given.
    pub fn delete(
        &self,
        key: &ObjKey,
        expected_uid: Option<&str>,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, StoreError> {
        let mut inner = self.lock();
        let prev = inner.lookup(key).ok_or(StoreError::NotFound)?;
        if let Some(uid) = expected_uid
            && uid != prev.uid
        {
            return Err(StoreError::Precondition(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                prev.uid
            )));
        }
        if let Some(rv) = expected_rv
            && rv != prev.rv
        {
            return Err(StoreError::Precondition(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                prev.rv
            )));
        }
        let rv = inner.rv + 1;
        let mut obj = prev.value()?;
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let gone = Arc::new(Stored::new(key.clone(), rv, &obj)?);
        self.commit(&mut inner, EventKind::Deleted, gone.clone(), Some(prev))?;
        Ok(gone)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        kind: EventKind,
        stored: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) -> Result<(), StoreError> {
        let k = &stored.key;
        if let Some(db) = inner.db.as_mut() {
            match kind {
                EventKind::Deleted => db.delete(&k.gr, &k.ns, &k.name, stored.rv)?,
                _ => db.put(&k.gr, &k.ns, &k.name, stored.rv, &stored.bytes)?,
            }
        }
        inner.rv = stored.rv;
        if let Some(p) = &prev {
            inner.index_remove(p);
        }
        let tkey = (k.ns.clone(), k.name.clone());
        if kind == EventKind::Deleted {
            if let Some(t) = inner.tables.get_mut(&k.gr) {
                t.remove(&tkey);
            }
        } else {
            inner.index_insert(&stored);
            inner.table(&k.gr).insert(tkey, stored.clone());
        }
        let ev = Arc::new(Event {
            kind,
            obj: stored,
            prev,
        });
        inner.history.push_back(ev.clone());
        while inner.history.len() > self.history_len {
            if let Some(old) = inner.history.pop_front() {
                inner.replay_floor = old.obj.rv;
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(ev);
        Ok(())
    }

    /// Subscribe to all changes (controllers inside the sandbox use this).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Start a watch on `gr` (optionally one namespace). The backlog is already filtered by resource and namespace.
    pub fn watch(
        &self,
        gr: &str,
        ns: Option<&str>,
        start: WatchStart,
    ) -> Result<WatchSubscription, StoreError> {
        let inner = self.lock();
        let rx = self.tx.subscribe();
        let start_rv = inner.rv;
        let in_scope = |s: &Stored| &*s.key.gr == gr && ns.is_none_or(|n| s.key.ns == n);
        let backlog = match start {
            WatchStart::Now => Vec::new(),
            WatchStart::InitialState => {
                let mut v = Vec::new();
                if let Some(t) = inner.tables.get(gr) {
                    for s in t.values().filter(|s| in_scope(s)) {
                        v.push(Arc::new(Event {
                            kind: EventKind::Added,
                            obj: s.clone(),
                            prev: None,
                        }));
                    }
                }
                v
            }
            WatchStart::After(from) => {
                if from < inner.replay_floor {
                    return Err(StoreError::Gone {
                        requested: from,
                        oldest: inner.replay_floor,
                    });
                }
                inner
                    .history
                    .iter()
                    .filter(|e| e.obj.rv > from && in_scope(&e.obj))
                    .cloned()
                    .collect()
            }
        };
        Ok(WatchSubscription {
            backlog,
            rx,
            start_rv,
        })
    }
}

impl Inner {
    fn table(&mut self, gr: &Arc<str>) -> &mut Table {
        self.tables.entry(gr.clone()).or_default()
    }

    fn lookup(&self, k: &ObjKey) -> Option<Arc<Stored>> {
        self.tables
            .get(&k.gr)?
            .get(&(k.ns.clone(), k.name.clone()))
            .cloned()
    }

    fn index_insert(&mut self, s: &Stored) {
        if !s.uid.is_empty() {
            self.by_uid.insert(s.uid.clone(), s.key.clone());
        }
        for o in &s.owners {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(s.key.clone());
        }
    }

    fn index_remove(&mut self, s: &Stored) {
        if self.by_uid.get(&s.uid) == Some(&s.key) {
            self.by_uid.remove(&s.uid);
        }
        for o in &s.owners {
            if let Some(set) = self.dependents.get_mut(&o.uid) {
                set.remove(&s.key);
                if set.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> ObjKey {
        ObjKey {
            gr: Arc::from("/configmaps"),
            ns: "default".into(),
            name: name.into(),
        }
    }

    fn cm(name: &str, uid: &str, owner: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": uid, "labels": {"a": "b"}}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"uid": o, "controller": true}]);
        }
        v
    }

    #[test]
    fn metadata_bytes_are_the_serialized_metadata() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"x": "\"y\""}}, "data": {"metadata": "{}"}});
        let (bytes, _) = to_vec_noting_metadata(&obj).expect("serialize");
        assert_eq!(bytes, serde_json::to_vec(&obj).expect("to_vec"));
        let s = Stored::new(key("a"), 1, &obj).expect("stored");
        let meta: Value = serde_json::from_slice(s.metadata_bytes()).expect("metadata parses");
        assert_eq!(meta, obj["metadata"]);
        let bare = Stored::new(key("b"), 2, &json!({"kind": "X"})).expect("stored");
        assert_eq!(bare.metadata_bytes(), b"{}");
    }

    #[test]
    fn versions_increase_and_indexes_follow_writes() {
        let s = Store::new(None, Loaded::default(), 100).expect("store");
        let a = s.create(key("a"), cm("a", "u1", None)).expect("create a");
        let b = s
            .create(key("b"), cm("b", "u2", Some("u1")))
            .expect("create b");
        assert!(b.rv > a.rv);
        assert_eq!(a.label("a"), Some("b"));
        assert_eq!(a.label("z"), None);
        assert!(matches!(
            s.create(key("a"), cm("a", "u3", None)),
            Err(StoreError::AlreadyExists)
        ));
        assert_eq!(s.dependents("u1").len(), 1);
        assert_eq!(
            s.get_by_uid("u2").map(|o| o.key.name.clone()),
            Some("b".into())
        );
        assert!(matches!(
            s.update(key("b"), Some(a.rv), cm("b", "u2", None)),
            Err(StoreError::Conflict)
        ));
        s.update(key("b"), Some(b.rv), cm("b", "u2", None))
            .expect("update");
        assert!(s.dependents("u1").is_empty(), "owner index follows updates");
        let d = s.delete(&key("b"), Some("u2"), None).expect("delete");
        assert!(d.rv > b.rv);
        assert!(s.get_by_uid("u2").is_none());
        assert!(matches!(
            s.delete(&key("a"), Some("zzz"), None),
            Err(StoreError::Precondition(_))
        ));
    }

    #[test]
    fn list_pages_and_namespaces() {
        let s = Store::new(None, Loaded::default(), 100).expect("store");
        for n in ["a", "b", "c"] {
            s.create(key(n), cm(n, n, None)).expect("create");
        }
        let mut other = key("z");
        other.ns = "other".into();
        s.create(other, cm("z", "z", None)).expect("create");
        let p = s.list("/configmaps", Some("default"), None, Some(2), |_| true);
        assert_eq!(p.items.len(), 2);
        assert_eq!(p.remaining, Some(1));
        let p2 = s.list(
            "/configmaps",
            Some("default"),
            p.next_after,
            Some(2),
            |_| true,
        );
        assert_eq!(p2.items.len(), 1);
        assert_eq!(p2.items[0].key.name, "c");
        assert!(p2.next_after.is_none());
        assert_eq!(
            s.list("/configmaps", None, None, None, |_| true)
                .items
                .len(),
            4
        );
    }

    #[test]
    fn watch_replays_history_and_reports_gone() {
        let s = Store::new(None, Loaded::default(), 2).expect("store");
        let a = s.create(key("a"), cm("a", "a", None)).expect("a");
        s.create(key("b"), cm("b", "b", None)).expect("b");
        s.create(key("c"), cm("c", "c", None)).expect("c");
        assert!(matches!(
            s.watch("/configmaps", None, WatchStart::After(0)),
            Err(StoreError::Gone { .. })
        ));
        let w = s
            .watch("/configmaps", None, WatchStart::After(a.rv))
            .expect("watch");
        let names: Vec<&str> = w.backlog.iter().map(|e| e.obj.key.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
        let w = s
            .watch("/configmaps", Some("default"), WatchStart::InitialState)
            .expect("watch");
        assert_eq!(w.backlog.len(), 3);
    }
}
