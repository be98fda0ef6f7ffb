//! Shared informers: one list+watch cache per resource (apiVersion + plural), with the indexes the
//! controller engine routes events and claims children through.
//!
//! [`InformerRegistry::informer`] starts a cache the first time a resource is asked for and hands
//! the same [`Informer`] to every later caller, as Metacontroller shares informers between
//! controllers. Each informer runs one `kube::runtime::watcher` (with the default backoff, so a
//! resource that does not exist yet is picked up when it appears) and keeps:
//!
//! - the objects, as compact JSON text (one copy each; `apiVersion`/`kind` filled in,
//!   `metadata.managedFields` dropped) with their resourceVersion and deletion mark beside it,
//!   sorted by namespace/name. Readers get a fresh `Arc<Value>` parsed from the text: `Value`
//!   trees (a map and a string allocation per field, in insertion order) were the largest part
//!   of a controller's working set (the engine bench's CompositeController: 11.6 KB of live
//!   heap per cached object with trees, 6.1 KB with text; with the replay memory sharing this
//!   text and 8,192-slot event channels, release build: 4.50 KB at 1,000 parents x 5 children,
//!   3.25 KB at 3,000, a slope of 2.62 KB per cached object and about 11 MB fixed);
//! - a ControllerRef index (owner uid -> objects it controls) and the set of orphans (objects
//!   without a ControllerRef), for claiming children;
//! - a label index (`key=value` -> objects), for selector lookups.
//!
//! The objects and every index change together under one lock, so a reader never sees them
//! disagree. Changes are published as [`InformerEvent`]s on a broadcast channel after the cache
//! holds them. A re-list (start-up, a 410 after the watch expired, a reconnect) is applied as the
//! difference between the old cache and the new list, followed by [`InformerEvent::Relisted`], so
//! no change is lost. [`Informer::wait_until`] lets the engine wait until the cache shows its own
//! writes.
//!
//! A sharded controller's parents and children (`run --sharded`) are cached through a
//! [`ShardFilter`] ([`InformerRegistry::sharded`]): the parents' informer keeps only the parents
//! whose uid falls in the buckets of the controller's [`CacheScope`], the children's watches
//! only the children labelled with one of those buckets or not labelled; a new scope restarts
//! the watch (its list applied as a difference, as any re-list) and is acknowledged once listed.
//! An informer shared by several sharded readers (two sharded controllers on one resource, a
//! controller's children that are another's parents) caches the **union** of what their
//! scopes keep ([`Narrowing`]): one server-side selector when every reader narrows by the same
//! child label (the union of their buckets), else a client-side filter keeping an object when
//! any reader's scope keeps it. Each reader therefore sees at least everything its scope
//! keeps, and also what the other readers' scopes keep. A reader that is not sharded (a
//! controller run without `--sharded`, a related-resource rule) needs everything: the
//! informer drops its filters for good.
//!
//! Under a [`Perturbation`] that taps informers (`stale-read`, `missed-state`, `reorder`), the
//! watch loop passes each event after the initial list through it and may hold events back,
//! coalesce or reorder them before the cache sees them ([`crate::perturb`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::k8s::object::{self, ObjectKey};
use crate::perturb::{Delivery, HOLD_MAX, Perturbation};
use crate::shard::CacheFollower;
use kube_apimachinery::selector::LabelSelector;

/// Capacity of each informer's event channel. A subscriber more than this many events behind
/// gets `RecvError::Lagged` and must resync everything, as for [`InformerEvent::Relisted`].
///
/// A broadcast channel allocates its slots up front (about 56 bytes each): 65,536 slots were
/// 3.7 MB per informer, a third of a 1,000-parent CompositeController's working set (four
/// informers). The burst that fills 8,192 is a re-list of a large cache, which ends with
/// [`InformerEvent::Relisted`] anyway (everything resynced): a lag then costs nothing more; the
/// engine's routing takes watch events far faster than a server sends them.
pub const EVENT_CAPACITY: usize = 8_192;

/// A change to an informer's cache, published after the cache holds it.
///
/// A subscriber that receives `Err(RecvError::Lagged(_))` has missed events and must treat it
/// exactly like [`InformerEvent::Relisted`]: resync everything from the cache.
#[derive(Debug, Clone)]
pub enum InformerEvent {
    /// An object appeared.
    Added(Arc<Value>),
    /// An object changed (its resourceVersion differs).
    Updated {
        /// The cached state before the change.
        old: Arc<Value>,
        /// The new state.
        new: Arc<Value>,
    },
    /// An object was deleted (its last known state).
    Deleted(Arc<Value>),
    /// The informer (re-)listed: the Added/Updated/Deleted events for the differences between the
    /// previous cache and the new list were sent just before this. Also sent after the first sync.
    Relisted,
}

/// Errors waiting for an informer.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The first list did not complete in time.
    #[error(
        "the cache of {resource} did not sync within {waited:?}: {}; check that the resource is served (`kubectl api-resources`) and that your credentials may list and watch it",
        describe_last_error(.last_error)
    )]
    NotSynced {
        /// The resource, e.g. `widgets (example.com/v1)`.
        resource: String,
        /// How long we waited.
        waited: Duration,
        /// The last error of the watch, if any (e.g. a 403 or 404 from the API server).
        last_error: Option<String>,
    },
    /// The informer was stopped before it synced.
    #[error("the cache of {resource} is stopped: {reason}")]
    Stopped {
        /// The resource.
        resource: String,
        /// Why it stopped.
        reason: String,
    },
}

fn describe_last_error(e: &Option<String>) -> String {
    match e {
        Some(e) => format!("last watch error: {e}"),
        None => "no answer from the API server yet".to_string(),
    }
}

/// `widgets (example.com/v1)`: how errors name a resource.
fn describe(ar: &ApiResource) -> String {
    format!("{} ({})", ar.plural, ar.api_version)
}

/// A resource as metrics name it: `plural.group`, or `plural` for the core group
/// (`configmaps`, `helloworlds.example.kubectl-meta.dev`).
pub fn resource_name(ar: &ApiResource) -> String {
    if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    }
}

/// How a sharded controller's informer narrows its cache to the controller's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterBy {
    /// The controller's parents: kept when their uid's bucket is in scope (filtered as they
    /// arrive: the watch itself is not narrowed).
    ParentUid,
    /// The controller's children: watched with `<label> notin (buckets out of scope)`, so the
    /// server sends only children of parents in scope and unlabelled ones.
    ChildLabel(String),
}

/// One sharded controller's filter on an informer.
#[derive(Debug, Clone)]
pub struct ShardFilter {
    /// The controller.
    pub controller: String,
    /// Parents or children.
    pub by: FilterBy,
    /// The controller's scope, and where to acknowledge it.
    pub follower: CacheFollower,
}

/// What the watch of an informer shared by sharded readers keeps: the union of the readers'
/// scopes (see the module header).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowing {
    /// The watch's label selector (`None`: every object is sent).
    pub selector: Option<String>,
    /// Kept client-side when any of these keeps it (`None`: every object the watch sends).
    pub keep: Option<Vec<(FilterBy, Arc<BTreeSet<u8>>)>>,
}

impl Narrowing {
    /// The union of `readers`' scopes (`(how, buckets)` each; none: everything).
    pub fn union(readers: &[(FilterBy, Arc<BTreeSet<u8>>)]) -> Narrowing {
        let mut labels = readers.iter().map(|(by, _)| match by {
            FilterBy::ChildLabel(l) => Some(l),
            FilterBy::ParentUid => None,
        });
        let one_label = match labels.next() {
            Some(Some(first)) => labels.all(|l| l == Some(first)).then_some(first),
            _ => None,
        };
        if let Some(label) = one_label {
            // One label: the server keeps exactly the union (the objects without the label
            // included, as `notin` matches them).
            let all: BTreeSet<u8> = readers
                .iter()
                .flat_map(|(_, b)| b.iter().copied())
                .collect();
            let out: Vec<String> = (0..=u8::MAX)
                .filter(|b| !all.contains(b))
                .map(crate::shard::bucket_value)
                .collect();
            let selector = (!out.is_empty()).then(|| format!("{label} notin ({})", out.join(",")));
            return Narrowing {
                selector,
                keep: None,
            };
        }
        if readers.is_empty() {
            return Narrowing::default();
        }
        Narrowing {
            selector: None,
            keep: Some(readers.to_vec()),
        }
    }

    /// Whether the cache keeps `obj` (one the watch sent): a parent reader keeps it when its
    /// uid's bucket is in its scope; a child reader when it carries the reader's label with a
    /// bucket of its scope (or a value that is no bucket), or when it carries **none** of the
    /// readers' labels. An object labelled by another reader's controller only is that
    /// controller's child, never this reader's: it is kept only for that reader.
    pub fn keeps(&self, obj: &Value) -> bool {
        let Some(keep) = &self.keep else {
            return true;
        };
        let in_scope = |v: &str, buckets: &BTreeSet<u8>| match u8::from_str_radix(v, 16) {
            Ok(b) if v == crate::shard::bucket_value(b) => buckets.contains(&b),
            _ => true,
        };
        let labelled = keep.iter().any(
            |(by, _)| matches!(by, FilterBy::ChildLabel(l) if object::label(obj, l).is_some()),
        );
        keep.iter().any(|(by, buckets)| match by {
            FilterBy::ParentUid => {
                object::uid(obj).is_some_and(|u| buckets.contains(&crate::shard::bucket(u)))
            }
            FilterBy::ChildLabel(label) => match object::label(obj, label) {
                None => !labelled,
                Some(v) => in_scope(v, buckets),
            },
        })
    }

    /// How many buckets the union keeps, for a log line (`None`: not narrowed by bucket).
    fn describe(&self) -> String {
        match (&self.selector, &self.keep) {
            (None, None) => "everything".to_string(),
            (Some(s), _) => format!("selector {s}"),
            (None, Some(k)) => format!("{} reader filter(s), client-side", k.len()),
        }
    }
}

/// Who reads a shared informer: sharded readers' filters, or someone who needs everything.
#[derive(Debug, Clone, Default)]
struct Readers {
    /// Somebody reads it unfiltered: cache everything (for good).
    all: bool,
    /// The sharded readers (one per controller and filter).
    filters: Vec<ShardFilter>,
}

/// Every informer of one client, keyed by (apiVersion, plural). Cheap to clone (shared).
#[derive(Clone)]
pub struct InformerRegistry {
    client: kube::Client,
    inner: Arc<Mutex<RegistryInner>>,
    perturb: Option<Arc<Perturbation>>,
}

#[derive(Default)]
struct RegistryInner {
    informers: HashMap<(String, String), Arc<Informer>>,
    stopped: bool,
}

impl InformerRegistry {
    /// A registry whose informers use `client`.
    pub fn new(client: kube::Client) -> Self {
        InformerRegistry {
            client,
            inner: Arc::new(Mutex::new(RegistryInner::default())),
            perturb: None,
        }
    }

    /// The informers started from now on pass their watch events through `perturb`.
    pub fn perturbed(mut self, perturb: Option<Arc<Perturbation>>) -> Self {
        self.perturb = perturb.filter(|p| p.taps_informers());
        self
    }

    /// The shared informer of a resource, started on first request. `namespaced` is the
    /// resource's scope (from discovery); the first caller's value is kept. Must be called from
    /// within a Tokio runtime (the watch runs as a task); otherwise, and after
    /// [`InformerRegistry::shutdown`], the informer is not started and
    /// [`Informer::wait_synced`] says why.
    pub fn informer(&self, ar: &ApiResource, namespaced: bool) -> Arc<Informer> {
        self.get_or_start(ar, namespaced, None)
    }

    /// As [`InformerRegistry::informer`], narrowed by `filter`: an informer read only by
    /// sharded readers caches the union of their scopes (the same controller and filter again,
    /// as after a restart, replaces its earlier one); one read by anyone unfiltered caches
    /// everything.
    pub fn sharded(
        &self,
        ar: &ApiResource,
        namespaced: bool,
        filter: ShardFilter,
    ) -> Arc<Informer> {
        self.get_or_start(ar, namespaced, Some(filter))
    }

    fn get_or_start(
        &self,
        ar: &ApiResource,
        namespaced: bool,
        filter: Option<ShardFilter>,
    ) -> Arc<Informer> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (ar.api_version.clone(), ar.plural.clone());
        if let Some(i) = inner.informers.get(&key) {
            i.add_reader(filter);
            return Arc::clone(i);
        }
        let informer = Arc::new(if inner.stopped {
            Informer::stopped(ar, namespaced, "the engine is shutting down")
        } else {
            Informer::start(
                self.client.clone(),
                ar,
                namespaced,
                self.perturb.clone(),
                filter,
            )
        });
        inner.informers.insert(key, Arc::clone(&informer));
        informer
    }

    /// Stop every watch (on exit). The caches keep their last content; informers asked for
    /// afterwards are not started.
    pub fn shutdown(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.stopped = true;
        for i in inner.informers.values() {
            i.stop("the engine is shutting down");
        }
    }
}

/// One shared list+watch cache of a resource. Dropping the last handle stops its watch.
pub struct Informer {
    resource: ApiResource,
    namespaced: bool,
    shared: Arc<Shared>,
    task: Option<AbortHandle>,
    /// Its readers: the watch caches the union of what they need.
    readers: watch::Sender<Readers>,
}

/// What the watch task and the readers share.
struct Shared {
    state: RwLock<State>,
    events: broadcast::Sender<InformerEvent>,
    /// Bumped after every cache change and status change; waiters watch it.
    version: watch::Sender<u64>,
    /// Objects the server sent (listed, changed or deleted), before any client-side filter.
    received: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        // Nothing panics while the lock is held, so a poisoned lock still holds consistent data.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Apply one watcher event and publish what changed.
    ///
    /// The events are sent while the write lock is held: whoever sees the new state (the
    /// first list's `synced`, an object's new version) also has its events queued already, so
    /// a router that subscribes after [`Informer::wait_synced`] returned never receives the
    /// first list's events (sending them after the lock was released let a controller that
    /// had just started hear its children's initial `Added` and `Relisted` events, and sync a
    /// parent a second time after a restart). Sending never waits (a broadcast channel).
    fn apply(&self, ev: watcher::Event<Value>) {
        self.apply_announcing(ev, true);
    }

    /// [`Shared::apply`]; with `relisted` false, a list's end is not announced by
    /// [`InformerEvent::Relisted`] (its differences are: the list that follows a new shard
    /// scope changes only what the scope changed, and must not re-queue every parent).
    fn apply_announcing(&self, ev: watcher::Event<Value>, relisted: bool) {
        let mut state = self.write();
        // Nobody subscribed (a first list before the controllers subscribe): the cache
        // changes, but no event is built (that parses the cached text of an updated object).
        let listened = self.events.receiver_count() > 0;
        let changed = state.apply(ev, listened);
        let Some(events) = changed else {
            return;
        };
        for e in events {
            if !relisted && matches!(e, InformerEvent::Relisted) {
                continue;
            }
            // Err only means nobody is subscribed.
            let _ = self.events.send(e);
        }
        drop(state);
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn set_error(&self, e: String) {
        self.write().last_error = Some(e);
    }

    fn stop(&self, reason: &str) {
        self.write().stopped = Some(reason.to_string());
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }
}

impl Informer {
    fn new(ar: &ApiResource, namespaced: bool) -> Self {
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let (version, _) = watch::channel(0);
        Informer {
            resource: ar.clone(),
            namespaced,
            shared: Arc::new(Shared {
                state: RwLock::new(State::default()),
                events,
                version,
                received: std::sync::atomic::AtomicU64::new(0),
            }),
            task: None,
            readers: watch::channel(Readers::default()).0,
        }
    }

    fn start(
        client: kube::Client,
        ar: &ApiResource,
        namespaced: bool,
        perturb: Option<Arc<Perturbation>>,
        filter: Option<ShardFilter>,
    ) -> Self {
        let mut informer = Informer::new(ar, namespaced);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let shared = Arc::clone(&informer.shared);
                let task = match perturb {
                    None => {
                        informer.add_reader(filter);
                        let readers = informer.readers.subscribe();
                        rt.spawn(run(shared, client, ar.clone(), readers))
                    }
                    Some(p) => {
                        // Perturbed informers cache everything (a filter is not combined
                        // with a perturbation).
                        informer.add_reader(None);
                        informer.add_reader(filter);
                        let api = Api::<DynamicObject>::all_with(client, ar);
                        rt.spawn(run_perturbed(shared, api, ar.clone(), p))
                    }
                };
                informer.task = Some(task.abort_handle());
            }
            Err(_) => {
                informer.add_reader(None);
                informer.shared.stop(
                    "no Tokio runtime to run the watch on (ask for informers from within the runtime)",
                )
            }
        }
        informer
    }

    fn stopped(ar: &ApiResource, namespaced: bool, reason: &str) -> Self {
        let informer = Informer::new(ar, namespaced);
        // Nothing will list: no reader waits for a scope.
        informer.add_reader(None);
        informer.shared.stop(reason);
        informer
    }

    fn stop(&self, reason: &str) {
        if let Some(t) = &self.task {
            t.abort();
        }
        self.shared.stop(reason);
    }

    /// How many objects the server has sent this informer (in lists, changes and deletes),
    /// counted before a sharded controller's client-side filter: with the server filtering
    /// by `shardSelector`, about this replica's share.
    pub fn received(&self) -> u64 {
        self.shared
            .received
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The sharded readers this informer follows, `(controller, filter)` each (empty: it
    /// caches everything).
    pub fn filtered_by(&self) -> Vec<(String, FilterBy)> {
        let r = self.readers.borrow();
        if r.all {
            return Vec::new();
        }
        r.filters
            .iter()
            .map(|f| (f.controller.clone(), f.by.clone()))
            .collect()
    }

    /// One more reader: `None` needs everything (the filters are dropped for good); a filter
    /// replaces the same controller's same filter, else joins the union. The watch restarts
    /// when what it keeps changes.
    fn add_reader(&self, filter: Option<ShardFilter>) {
        use std::sync::atomic::Ordering;
        self.readers.send_if_modified(|r| match filter {
            None if r.all => false,
            None => {
                r.all = true;
                for f in r.filters.drain(..) {
                    f.follower.ack.store(u64::MAX, Ordering::Release);
                }
                true
            }
            Some(f) if r.all => {
                f.follower.ack.store(u64::MAX, Ordering::Release);
                false
            }
            Some(f) => {
                r.filters
                    .retain(|o| !(o.controller == f.controller && o.by == f.by));
                r.filters.push(f);
                true
            }
        });
    }

    /// The resource this informer caches.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// Whether the resource is namespaced.
    pub fn namespaced(&self) -> bool {
        self.namespaced
    }

    /// Whether the first list completed (stays true across later re-lists and reconnects).
    pub fn is_synced(&self) -> bool {
        self.shared.read().synced
    }

    /// Wait until the first list completed. On timeout the error names the resource and the
    /// watch's last error (a 404 for a resource that is not served, a 403 without permission).
    /// The watch keeps retrying, so calling again later can succeed.
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), InformerError> {
        let mut rx = self.shared.version.subscribe();
        let deadline = Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            {
                let st = self.shared.read();
                if st.synced {
                    return Ok(());
                }
                if let Some(reason) = &st.stopped {
                    return Err(InformerError::Stopped {
                        resource: describe(&self.resource),
                        reason: reason.clone(),
                    });
                }
            }
            // Ok(Err) cannot happen while `self` holds the sender; treat it like a timeout.
            if !matches!(
                tokio::time::timeout_at(deadline, rx.changed()).await,
                Ok(Ok(()))
            ) {
                return Err(InformerError::NotSynced {
                    resource: describe(&self.resource),
                    waited: timeout,
                    last_error: self.shared.read().last_error.clone(),
                });
            }
        }
    }

    /// The cached object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        let stored = self.shared.read().objects.get(key).cloned();
        stored.map(|s| s.value())
    }

    /// What the cache shows of the object with this key without parsing it: its
    /// resourceVersion and whether it is being deleted (`None`: not cached).
    pub fn meta(&self, key: &ObjectKey) -> Option<CachedMeta> {
        self.shared.read().objects.get(key).map(|s| s.meta())
    }

    /// The cached text of the object with this key, shared with the cache (no copy): the
    /// replay memory keeps a request's objects this way ([`CachedText`]).
    pub(crate) fn cached_text(&self, key: &ObjectKey) -> Option<CachedText> {
        self.shared.read().objects.get(key).cloned().map(CachedText)
    }

    /// Every cached object in `namespace` (`None` or `Some("")`: all; cluster-scoped objects have
    /// no namespace, so `Some(ns)` finds none of them), sorted by namespace/name.
    pub fn list(&self, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let stored: Vec<Arc<Stored>> = {
            let st = self.shared.read();
            match all_if_empty(namespace) {
                None => st.objects.values().cloned().collect(),
                Some(ns) => st.in_namespace(ns).map(|(_, o)| Arc::clone(o)).collect(),
            }
        };
        values(stored)
    }

    /// The objects whose ControllerRef (the owner reference with `controller: true`) has this
    /// uid, sorted by namespace/name.
    pub fn controlled_by(&self, owner_uid: &str) -> Vec<Arc<Value>> {
        let stored: Vec<Arc<Stored>> = {
            let st = self.shared.read();
            st.by_controller
                .get(owner_uid)
                .into_iter()
                .flatten()
                .filter_map(|k| st.objects.get(k).cloned())
                .collect()
        };
        values(stored)
    }

    /// The objects without a ControllerRef in `namespace` (`None`/`Some("")`: all) whose labels
    /// match `selector`, sorted by namespace/name.
    pub fn orphans(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        let stored: Vec<Arc<Stored>> = {
            let st = self.shared.read();
            let keys: Box<dyn Iterator<Item = &ObjectKey>> = match all_if_empty(namespace) {
                None => Box::new(st.orphans.iter()),
                Some(ns) => Box::new(
                    st.orphans
                        .range(namespace_start(ns)..)
                        .take_while(move |k| k.namespace.as_deref() == Some(ns)),
                ),
            };
            keys.filter_map(|k| st.objects.get(k)).cloned().collect()
        };
        matching(stored, selector)
    }

    /// Every object in `namespace` (`None`/`Some("")`: all) whose labels match `selector`, sorted
    /// by namespace/name. Uses the label index when the selector pins a label to one value.
    pub fn select(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        let namespace = all_if_empty(namespace);
        let stored: Vec<Arc<Stored>> = {
            let st = self.shared.read();
            if let Some((k, v)) = selector.exact_pairs().first() {
                st.by_label
                    .get(*k)
                    .and_then(|values| values.get(*v))
                    .into_iter()
                    .flatten()
                    .filter(|key| namespace.is_none_or(|ns| key.namespace.as_deref() == Some(ns)))
                    .filter_map(|key| st.objects.get(key))
                    .cloned()
                    .collect()
            } else {
                match namespace {
                    None => st.objects.values().cloned().collect(),
                    Some(ns) => st.in_namespace(ns).map(|(_, o)| Arc::clone(o)).collect(),
                }
            }
        };
        matching(stored, selector)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.shared.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Subscribe to changes from now on. On `Err(RecvError::Lagged(_))` (more than
    /// [`EVENT_CAPACITY`] events behind) treat it like [`InformerEvent::Relisted`]: resync
    /// everything from the cache.
    pub fn subscribe(&self) -> broadcast::Receiver<InformerEvent> {
        self.shared.events.subscribe()
    }

    /// Wait until what the cache shows of `key` ([`Informer::meta`], `None` when absent)
    /// satisfies `pred`; true as soon as it does, false on timeout or when the informer stops
    /// first. The engine uses this after its own writes so that the next sync reads them.
    pub async fn wait_until(
        &self,
        key: &ObjectKey,
        pred: impl Fn(Option<&CachedMeta>) -> bool,
        timeout: Duration,
    ) -> bool {
        let mut rx = self.shared.version.subscribe();
        let deadline = Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            if pred(self.meta(key).as_ref()) {
                return true;
            }
            if self.shared.read().stopped.is_some() {
                return false;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, rx.changed()).await,
                Ok(Ok(()))
            ) {
                return false;
            }
        }
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The objects parsed from their cached text (outside the cache's lock).
fn values(stored: Vec<Arc<Stored>>) -> Vec<Arc<Value>> {
    stored.into_iter().map(|s| s.value()).collect()
}

/// The objects whose labels match `selector`, parsed from their cached text.
fn matching(stored: Vec<Arc<Stored>>, selector: &LabelSelector) -> Vec<Arc<Value>> {
    stored
        .into_iter()
        .map(|s| s.value())
        .filter(|o| matches(selector, o))
        .collect()
}

fn all_if_empty(namespace: Option<&str>) -> Option<&str> {
    namespace.filter(|n| !n.is_empty())
}

/// The smallest key in namespace `ns`.
fn namespace_start(ns: &str) -> ObjectKey {
    ObjectKey {
        namespace: Some(ns.to_string()),
        name: String::new(),
    }
}

fn labels_json(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("labels")
}

fn matches(selector: &LabelSelector, obj: &Value) -> bool {
    selector.matches_json(labels_json(obj))
}

/// Retry delays of a failing list or watch: doubling from [`RETRY_MIN`] up to [`RETRY_MAX`],
/// with jitter (so informers do not reconnect in lock step), back to the minimum once a list or
/// watch succeeded. Capped low: after an outage the caches should catch up within seconds.
pub const RETRY_MIN: Duration = Duration::from_millis(200);
/// See [`RETRY_MIN`].
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// The watcher backoff (see [`RETRY_MIN`]).
pub(crate) struct CappedBackoff {
    next: Duration,
    seed: u64,
}

impl CappedBackoff {
    /// A backoff starting at [`RETRY_MIN`].
    pub(crate) fn new() -> Self {
        let seed = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos().into())
                .unwrap_or(0);
        CappedBackoff {
            next: RETRY_MIN,
            seed,
        }
    }
}

impl Iterator for CappedBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // xorshift: a cheap jitter of up to a quarter of the delay.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let d = self.next;
        self.next = (self.next * 2).min(RETRY_MAX);
        let quarter = u64::try_from(d.as_millis() / 4).unwrap_or(0).max(1);
        Some(d + Duration::from_millis(self.seed % quarter))
    }
}

impl kube::runtime::utils::Backoff for CappedBackoff {
    fn reset(&mut self) {
        self.next = RETRY_MIN;
    }
}

/// The watch task: feeds the watcher's events into the cache, forever (the backoff retries).
/// A broken watch resumes from the last resourceVersion seen (bookmarks keep it fresh); a 410
/// Gone ("too old resource version") answer re-lists, applied as a difference (see [`State`]).
/// With sharded readers, the watch keeps the union of their scopes ([`Narrowing`]); a new
/// scope, a new reader (or one that needs everything) restarts the watch with the new union;
/// the list that follows removes what left it and adds what entered it, and acknowledges the
/// scope generations it was made with.
async fn run(
    shared: Arc<Shared>,
    client: kube::Client,
    ar: ApiResource,
    mut readers: watch::Receiver<Readers>,
) {
    use std::sync::atomic::Ordering;
    // The first list after a new scope (not the first list, nor a re-list after an error)
    // announces its differences only.
    let mut rescoped = false;
    loop {
        let current = readers.borrow_and_update().clone();
        let mut filters = if current.all {
            Vec::new()
        } else {
            current.filters
        };
        // A reader whose controller is not sharded any more (its scope closed) needs
        // everything.
        let mut closed = false;
        let mut scopes = Vec::with_capacity(filters.len());
        for f in &mut filters {
            if f.follower.scope.has_changed().is_err() {
                closed = true;
            }
            let scope = f.follower.scope.borrow_and_update().clone();
            scopes.push((f.by.clone(), scope));
        }
        if closed {
            for f in filters.drain(..) {
                f.follower.ack.store(u64::MAX, Ordering::Release);
            }
            scopes.clear();
        }
        let union: Vec<(FilterBy, Arc<BTreeSet<u8>>)> = scopes
            .iter()
            .map(|(by, s)| (by.clone(), Arc::clone(&s.buckets)))
            .collect();
        let narrowing = Narrowing::union(&union);
        let shards = server_shard_selector(&filters, &union);
        if !filters.is_empty() {
            let who: Vec<String> = filters
                .iter()
                .zip(&scopes)
                .map(|(f, (_, s))| format!("{} (scope {})", f.controller, s.generation))
                .collect();
            tracing::debug!(
                "watch of {} for {}: {}, shardSelector {:?}",
                describe(&ar),
                who.join(", "),
                narrowing.describe(),
                shards
            );
        }
        // Server mode: the server sends only the scope's parents; the client-side filter
        // stays, for a server that ignores the parameter.
        let api = match &shards {
            Some(sel) => {
                Api::<DynamicObject>::all_with(super::shard_query::selecting(&client, sel), &ar)
            }
            None => Api::<DynamicObject>::all_with(client.clone(), &ar),
        };
        let mut cfg = watcher::Config::default();
        if let Some(sel) = &narrowing.selector {
            cfg = cfg.labels(sel);
        }
        let mut stream = std::pin::pin!(watcher(api.clone(), cfg).backoff(CappedBackoff::new()));
        loop {
            let follows = !filters.is_empty();
            let item = tokio::select! {
                item = stream.next() => item,
                _ = any_scope_changed(&mut filters), if follows => {
                    rescoped = true;
                    break;
                }
                r = readers.changed() => {
                    if r.is_err() {
                        // The informer is gone.
                        return;
                    }
                    rescoped = true;
                    break;
                }
            };
            let Some(item) = item else { return };
            let ev = match item {
                Ok(ev) => ev,
                Err(e) => {
                    let e = describe_watch_error(&e);
                    tracing::debug!("watch of {}: {e}", describe(&ar));
                    shared.set_error(e);
                    continue;
                }
            };
            let converted = convert(ev, &ar);
            match converted {
                Ok(ev) => {
                    let done = matches!(ev, watcher::Event::InitDone);
                    if event_key(&ev).is_some() {
                        shared.received.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(ev) = keep_in_scope(ev, &narrowing) {
                        shared.apply_announcing(ev, !(done && rescoped));
                    }
                    if done {
                        rescoped = false;
                        for (f, (_, s)) in filters.iter().zip(&scopes) {
                            f.follower.ack.store(s.generation, Ordering::Release);
                        }
                    }
                }
                Err(e) => shared.set_error(format!("cannot convert an object to JSON: {e}")),
            }
        }
    }
}

/// Wait until one of the readers' scopes changes (or closes).
/// The KEP-5866 `shardSelector` the list and watch carry: only when every reader is a parent
/// reader (filtering by uid) on a server that honours it, for the union of their buckets
/// (`None`: children, a server without the gate, or no bucket in scope, which a selector
/// cannot say: then the client-side filter alone narrows).
fn server_shard_selector(
    filters: &[ShardFilter],
    union: &[(FilterBy, Arc<BTreeSet<u8>>)],
) -> Option<String> {
    let all_server_parents = !filters.is_empty()
        && filters
            .iter()
            .all(|f| matches!(f.by, FilterBy::ParentUid) && f.follower.server_selector);
    if !all_server_parents {
        return None;
    }
    let buckets: BTreeSet<u8> = union.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    crate::shard::shard_selector(&buckets)
}

async fn any_scope_changed(filters: &mut [ShardFilter]) {
    if filters.is_empty() {
        return std::future::pending().await;
    }
    let changes = filters
        .iter_mut()
        .map(|f| Box::pin(f.follower.scope.changed()));
    let _ = futures::future::select_all(changes).await;
}

/// A watch event narrowed to what `narrowing` keeps client-side: a listed object out of it is
/// left out, a changed one becomes a delete (it left the union, or was never cached: then
/// nothing happens).
fn keep_in_scope(
    ev: watcher::Event<Value>,
    narrowing: &Narrowing,
) -> Option<watcher::Event<Value>> {
    if narrowing.keep.is_none() {
        return Some(ev);
    }
    match ev {
        watcher::Event::InitApply(o) if !narrowing.keeps(&o) => None,
        watcher::Event::Apply(o) if !narrowing.keeps(&o) => Some(watcher::Event::Delete(o)),
        ev => Some(ev),
    }
}

/// A watch event with its object as JSON (what the cache stores).
fn convert(
    ev: watcher::Event<DynamicObject>,
    ar: &ApiResource,
) -> Result<watcher::Event<Value>, serde_json::Error> {
    Ok(match ev {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(to_json(o, ar)?),
        watcher::Event::Apply(o) => watcher::Event::Apply(to_json(o, ar)?),
        watcher::Event::Delete(o) => watcher::Event::Delete(to_json(o, ar)?),
    })
}

/// As [`run`], each event after the initial list passed through a perturbation first.
async fn run_perturbed(
    shared: Arc<Shared>,
    api: Api<DynamicObject>,
    ar: ApiResource,
    p: Arc<Perturbation>,
) {
    let mut stream =
        std::pin::pin!(watcher(api, watcher::Config::default()).backoff(CappedBackoff::new()));
    let mut held = Held::default();
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = tokio::time::sleep_until(held.deadline.unwrap_or_else(Instant::now)),
                if held.deadline.is_some() => {
                held.flush(&shared, &p);
                continue;
            }
        };
        let Some(item) = item else { break };
        let ev = match item {
            Ok(ev) => ev,
            Err(e) => {
                shared.set_error(describe_watch_error(&e));
                continue;
            }
        };
        let converted = convert(ev, &ar);
        match converted {
            Ok(ev @ (watcher::Event::Apply(_) | watcher::Event::Delete(_)))
                if shared.read().synced =>
            {
                let d = p.on_event(&ar.plural);
                held.push(ev, d, &shared, &p);
            }
            Ok(ev) => {
                held.flush(&shared, &p);
                shared.apply(ev);
            }
            Err(e) => shared.set_error(format!("cannot convert an object to JSON: {e}")),
        }
    }
    held.flush(&shared, &p);
}

/// Watch events a perturbation holds back (in arrival order), and how they are let go.
#[derive(Default)]
struct Held {
    events: Vec<watcher::Event<Value>>,
    /// What opened the buffer (`Hold`, `Coalesce`, `Shuffle`).
    how: Option<Delivery>,
    /// Events still to arrive before the buffer is let go.
    remaining: u32,
    deadline: Option<Instant>,
    windows: u64,
}

fn event_key(ev: &watcher::Event<Value>) -> Option<ObjectKey> {
    match ev {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) => ObjectKey::of(o),
        _ => None,
    }
}

impl Held {
    fn push(&mut self, ev: watcher::Event<Value>, d: Delivery, shared: &Shared, p: &Perturbation) {
        if self.how.is_none() {
            match d {
                Delivery::Now => return shared.apply(ev),
                Delivery::Hold(n) | Delivery::Coalesce(n) | Delivery::Shuffle(n) => {
                    self.how = Some(d);
                    self.remaining = n;
                    self.deadline = Some(Instant::now() + HOLD_MAX);
                }
            }
        } else {
            self.remaining = self.remaining.saturating_sub(1);
        }
        self.events.push(ev);
        p.add_held(1);
        if self.remaining == 0 {
            self.flush(shared, p);
        }
    }

    /// Let everything held go, as the buffer's kind says.
    fn flush(&mut self, shared: &Shared, p: &Perturbation) {
        let events = std::mem::take(&mut self.events);
        let how = self.how.take();
        self.deadline = None;
        p.add_held(-(events.len() as isize));
        match how {
            Some(Delivery::Coalesce(_)) => {
                // The last event of each object, in the order of those last events.
                let mut last: Vec<(Option<ObjectKey>, watcher::Event<Value>)> = Vec::new();
                for ev in events {
                    let k = event_key(&ev);
                    last.retain(|(lk, _)| k.is_none() || *lk != k);
                    last.push((k, ev));
                }
                for (_, ev) in last {
                    shared.apply(ev);
                }
            }
            Some(Delivery::Shuffle(_)) => {
                // Objects in another order, each object's own events in theirs.
                let mut groups: Vec<(Option<ObjectKey>, Vec<watcher::Event<Value>>)> = Vec::new();
                for ev in events {
                    let k = event_key(&ev);
                    match groups.iter_mut().find(|(gk, _)| k.is_some() && *gk == k) {
                        Some((_, g)) => g.push(ev),
                        None => groups.push((k, vec![ev])),
                    }
                }
                self.windows += 1;
                p.shuffler(self.windows).shuffle(&mut groups);
                for ev in groups.into_iter().flat_map(|(_, g)| g) {
                    shared.apply(ev);
                }
            }
            _ => events.into_iter().for_each(|ev| shared.apply(ev)),
        }
    }
}

/// A watcher error in one line: the step that failed and the API server's answer
/// (`list: 404 NotFound: the server could not find the requested resource`).
fn describe_watch_error(e: &watcher::Error) -> String {
    let status = |s: &kube::core::Status| format!("{} {}: {}", s.code, s.reason, s.message);
    let (step, err) = match e {
        watcher::Error::InitialListFailed(c) => ("list", c),
        watcher::Error::WatchStartFailed(c) => ("watch", c),
        watcher::Error::WatchFailed(c) => ("watch stream", c),
        watcher::Error::WatchError(s) => return format!("watch: {}", status(s)),
        watcher::Error::NoResourceVersion => return e.to_string(),
    };
    match err {
        kube::Error::Api(s) => format!("{step}: {}", status(s)),
        other => format!("{step}: {other}"),
    }
}

/// The object as JSON: `apiVersion` and `kind` first (filled in from the resource when the API
/// server left them out, as it does for list items), `metadata` without `managedFields`.
fn to_json(obj: DynamicObject, ar: &ApiResource) -> Result<Value, serde_json::Error> {
    let DynamicObject {
        types,
        mut metadata,
        data,
    } = obj;
    metadata.managed_fields = None;
    let (api_version, kind) = match types {
        Some(t) if !t.api_version.is_empty() && !t.kind.is_empty() => (t.api_version, t.kind),
        _ => (ar.api_version.clone(), ar.kind.clone()),
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version));
    out.insert("kind".into(), Value::String(kind));
    out.insert("metadata".into(), serde_json::to_value(&metadata)?);
    if let Value::Object(fields) = data {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// What the cache shows of an object without parsing it ([`Informer::meta`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedMeta {
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

/// A cached object: its compact JSON text, and what the engine reads of it often (its
/// resourceVersion, on every event and after every write) beside the text.
#[derive(Debug)]
struct Stored {
    rv: Option<Box<str>>,
    deleting: bool,
    json: Box<str>,
}

impl Stored {
    fn new(obj: &Value) -> Self {
        Stored {
            rv: object::resource_version(obj).map(Box::from),
            deleting: object::is_deleting(obj),
            // A `Value` always serializes; an empty object if it ever did not.
            json: serde_json::to_string(obj)
                .unwrap_or_else(|_| "{}".to_string())
                .into_boxed_str(),
        }
    }

    /// The object, parsed from its text (it was serialized from a `Value`, so it parses back;
    /// `null` if it ever did not).
    fn value(&self) -> Arc<Value> {
        Arc::new(serde_json::from_str(&self.json).unwrap_or(Value::Null))
    }

    fn meta(&self) -> CachedMeta {
        CachedMeta {
            resource_version: self.rv.as_deref().map(str::to_string),
            deleting: self.deleting,
        }
    }
}

/// One cached object's compact JSON text, shared with the cache: holding it costs nothing
/// while the cache holds the same version, and keeps that version alive after it changes.
#[derive(Debug, Clone)]
pub(crate) struct CachedText(Arc<Stored>);

impl CachedText {
    /// `obj` as if cached (for tests of what holds cached text).
    #[cfg(test)]
    pub(crate) fn of(obj: &Value) -> Self {
        CachedText(Arc::new(Stored::new(obj)))
    }

    /// The object's compact JSON text.
    pub(crate) fn text(&self) -> &str {
        &self.0.json
    }

    /// The object's `metadata.resourceVersion`.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.0.rv.as_deref()
    }
}

/// The cache and its indexes (always changed together), plus the watch status.
#[derive(Default)]
struct State {
    objects: BTreeMap<ObjectKey, Arc<Stored>>,
    /// ControllerRef uid -> the objects it controls.
    by_controller: HashMap<String, BTreeSet<ObjectKey>>,
    /// Objects without a ControllerRef.
    orphans: BTreeSet<ObjectKey>,
    /// Label key -> value -> objects.
    by_label: HashMap<String, HashMap<String, BTreeSet<ObjectKey>>>,
    /// The objects of a re-list in progress (between `Init` and `InitDone`): the cached entry
    /// of an object at the same resourceVersion, else the object as listed.
    relist: Option<BTreeMap<ObjectKey, Listed>>,
    synced: bool,
    last_error: Option<String>,
    stopped: Option<String>,
}

/// An object of a re-list in progress.
enum Listed {
    /// Cached already at this resourceVersion: the cached entry is kept.
    Same,
    /// New or changed (as text: a re-list of every object never holds them all as trees).
    Changed(Incoming),
}

/// What the indexes hold of an object: its ControllerRef's uid and its string labels.
#[derive(Debug, Default)]
struct IndexEntries {
    controller: Option<String>,
    labels: Vec<(String, String)>,
}

impl IndexEntries {
    fn of(obj: &Value) -> Self {
        IndexEntries {
            controller: object::controller_ref(obj).map(|r| r.uid),
            labels: string_labels(obj)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

/// An object as the cache takes it: its text and index entries, and the object itself
/// while an event may still be built from it.
struct Incoming {
    stored: Stored,
    entries: IndexEntries,
    obj: Option<Value>,
}

impl Incoming {
    /// `obj` to cache; kept as a tree too when `keep` (an event will carry it).
    fn new(obj: Value, keep: bool) -> Self {
        Incoming {
            stored: Stored::new(&obj),
            entries: IndexEntries::of(&obj),
            obj: keep.then_some(obj),
        }
    }
}

/// Same object version: the same resourceVersion.
fn same_version(a: &Stored, b: &Stored) -> bool {
    a.rv.is_some() && a.rv == b.rv
}

impl State {
    /// Apply one watcher event; returns the events to publish (`None`: the cache did not
    /// change). Without `listened`, the object events are left out (they are built from the
    /// objects and nobody would receive them).
    fn apply(&mut self, ev: watcher::Event<Value>, listened: bool) -> Option<Vec<InformerEvent>> {
        let mut events = Vec::new();
        match ev {
            watcher::Event::Init => {
                self.relist = Some(BTreeMap::new());
                return None;
            }
            watcher::Event::InitApply(obj) => {
                let key = ObjectKey::of(&obj)?;
                let incoming = Incoming::new(obj, false);
                // An unchanged object keeps its cached entry: one copy of each object.
                let listed = match self.objects.get(&key) {
                    Some(cached) if same_version(cached, &incoming.stored) => Listed::Same,
                    _ => Listed::Changed(incoming),
                };
                self.relist.get_or_insert_default().insert(key, listed);
                return None;
            }
            watcher::Event::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let gone: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| !fresh.contains_key(*k))
                    .cloned()
                    .collect();
                for k in &gone {
                    if let Some(old) = self.remove(k)
                        && listened
                    {
                        events.push(InformerEvent::Deleted(old));
                    }
                }
                for (k, listed) in fresh {
                    if let Listed::Changed(incoming) = listed
                        && let Some(e) = self.upsert(k, incoming, listened)
                    {
                        events.push(e);
                    }
                }
                self.synced = true;
                events.push(InformerEvent::Relisted);
            }
            watcher::Event::Apply(obj) => {
                let key = ObjectKey::of(&obj)?;
                events.extend(self.upsert(key, Incoming::new(obj, listened), listened));
            }
            watcher::Event::Delete(obj) => {
                let key = ObjectKey::of(&obj)?;
                self.remove(&key)?;
                if listened {
                    events.push(InformerEvent::Deleted(Arc::new(obj)));
                }
            }
        }
        Some(events)
    }

    /// Insert or replace; `None` when the cached version is the same, or when not `listened`.
    fn upsert(
        &mut self,
        key: ObjectKey,
        incoming: Incoming,
        listened: bool,
    ) -> Option<InformerEvent> {
        let old = match self.objects.get(&key) {
            Some(cached) if same_version(cached, &incoming.stored) => return None,
            Some(cached) => Some(cached.value()),
            None => None,
        };
        if let Some(old) = &old {
            self.unindex(&key, &IndexEntries::of(old));
        }
        self.index(&key, &incoming.entries);
        let stored = Arc::new(incoming.stored);
        self.objects.insert(key, Arc::clone(&stored));
        if !listened {
            return None;
        }
        let new = incoming.obj.map_or_else(|| stored.value(), Arc::new);
        Some(match old {
            Some(old) => InformerEvent::Updated { old, new },
            None => InformerEvent::Added(new),
        })
    }

    /// Remove `key`; returns its last cached state.
    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Value>> {
        let old = self.objects.remove(key)?.value();
        self.unindex(key, &IndexEntries::of(&old));
        Some(old)
    }

    fn index(&mut self, key: &ObjectKey, entries: &IndexEntries) {
        match &entries.controller {
            Some(uid) => {
                self.by_controller
                    .entry(uid.clone())
                    .or_default()
                    .insert(key.clone());
            }
            None => {
                self.orphans.insert(key.clone());
            }
        }
        for (k, v) in &entries.labels {
            self.by_label
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .insert(key.clone());
        }
    }

    /// Exactly undoes [`State::index`] for the same object.
    fn unindex(&mut self, key: &ObjectKey, entries: &IndexEntries) {
        match &entries.controller {
            Some(uid) => {
                if let Some(set) = self.by_controller.get_mut(uid) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_controller.remove(uid);
                    }
                }
            }
            None => {
                self.orphans.remove(key);
            }
        }
        for (k, v) in &entries.labels {
            let Some(values) = self.by_label.get_mut(k) else {
                continue;
            };
            if let Some(set) = values.get_mut(v) {
                set.remove(key);
                if set.is_empty() {
                    values.remove(v);
                }
            }
            if values.is_empty() {
                self.by_label.remove(k);
            }
        }
    }

    /// The objects of one namespace, in key order.
    fn in_namespace<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Stored>)> + 'a {
        self.objects
            .range(namespace_start(ns)..)
            .take_while(move |(k, _)| k.namespace.as_deref() == Some(ns))
    }
}

/// The string-valued labels of an object.
fn string_labels(obj: &Value) -> impl Iterator<Item = (&str, &str)> {
    labels_json(obj)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
}

/// Receive an informer's events until `stop` fires or the informer ends, calling `f` for each.
/// A receiver that fell behind gets [`InformerEvent::Relisted`]: anything may have changed.
pub async fn for_each_event(
    mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
    stop: tokio_util::sync::CancellationToken,
    mut f: impl FnMut(InformerEvent),
) {
    loop {
        let ev = tokio::select! {
            e = rx.recv() => e,
            () = stop.cancelled() => return,
        };
        match ev {
            Ok(e) => f(e),
            Err(broadcast::error::RecvError::Lagged(_)) => f(InformerEvent::Relisted),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use kube_sandbox::{Sandbox, SandboxConfig};
    use serde_json::json;
    use tokio::sync::broadcast::error::RecvError;

    const WAIT: Duration = Duration::from_secs(30);

    // ---- pure cache tests (no server) ----

    fn cm(ns: &str, name: &str, rv: &str, labels: Value, owner: Option<&str>) -> Value {
        let mut meta =
            json!({"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels});
        if let Some(uid) = owner {
            meta["ownerReferences"] = json!([
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "other", "controller": false},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "p", "uid": uid, "controller": true}
            ]);
        }
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    }

    fn cm_ar() -> ApiResource {
        ApiResource::erase::<ConfigMap>(&())
    }

    fn offline() -> Informer {
        Informer::new(&cm_ar(), true)
    }

    /// The objects' keys, leaving out the `kube-root-ca.crt` ConfigMap every namespace has
    /// (on a real cluster too).
    fn names(objs: &[Arc<Value>]) -> Vec<String> {
        objs.iter()
            .map(|o| ObjectKey::of(o).expect("named").to_string())
            .filter(|k| !k.ends_with("/kube-root-ca.crt"))
            .collect()
    }

    fn ev_str(e: &InformerEvent) -> String {
        let k = |o: &Value| ObjectKey::of(o).expect("named").to_string();
        let rv = |o: &Value| object::resource_version(o).unwrap_or("-").to_string();
        match e {
            InformerEvent::Added(o) => format!("added {}@{}", k(o), rv(o)),
            InformerEvent::Updated { old, new } => {
                format!("updated {} {}->{}", k(new), rv(old), rv(new))
            }
            InformerEvent::Deleted(o) => format!("deleted {}", k(o)),
            InformerEvent::Relisted => "relisted".into(),
        }
    }

    fn drain(rx: &mut broadcast::Receiver<InformerEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(ev_str(&e));
        }
        out
    }

    /// The cache's own entry for `key` (to tell whether a re-list copied it).
    fn stored(inf: &Informer, key: &ObjectKey) -> Arc<Stored> {
        Arc::clone(inf.shared.read().objects.get(key).expect("cached"))
    }

    /// Recompute every index from the objects and compare with the maintained ones.
    fn assert_indexes_consistent(inf: &Informer) {
        let st = inf.shared.read();
        let mut fresh = State::default();
        for (k, o) in &st.objects {
            fresh.index(k, &IndexEntries::of(&o.value()));
        }
        assert_eq!(st.by_controller, fresh.by_controller);
        assert_eq!(st.orphans, fresh.orphans);
        assert_eq!(st.by_label, fresh.by_label);
    }

    /// Whoever sees the first list done (as `wait_synced` does before a controller subscribes
    /// its routers) has its events queued already: a receiver subscribed then gets none of
    /// them. The list is applied on another thread while this one watches for `synced`; events
    /// sent after the lock was released reached such a late receiver (a parent synced twice on
    /// a restart, from its children's initial `Added` and the `Relisted` that follows).
    #[test]
    fn a_receiver_subscribed_once_synced_gets_none_of_the_first_lists_events() {
        // As many as an early receiver can hold with the `Relisted` after them.
        const N: usize = EVENT_CAPACITY - 1;
        let inf = Arc::new(offline());
        let mut early = inf.subscribe();
        inf.shared.apply(watcher::Event::Init);
        for i in 0..N {
            let name = format!("c{i:05}");
            inf.shared.apply(watcher::Event::InitApply(cm(
                "n",
                &name,
                "1",
                json!({}),
                Some("p"),
            )));
        }
        let applier = {
            let inf = Arc::clone(&inf);
            std::thread::spawn(move || inf.shared.apply(watcher::Event::InitDone))
        };
        while !inf.is_synced() {
            std::hint::spin_loop();
        }
        let mut late = inf.subscribe();
        applier.join().expect("applier thread");
        assert_eq!(
            drain(&mut late),
            Vec::<String>::new(),
            "a receiver subscribed after synced got first-list events"
        );
        assert_eq!(drain(&mut early).len(), N + 1, "N added, then relisted");
    }

    #[test]
    fn relist_publishes_the_difference_then_relisted() {
        let inf = offline();
        let mut rx = inf.subscribe();
        let a1 = cm("n", "a", "1", json!({}), None);
        let b1 = cm("n", "b", "1", json!({}), None);
        let c1 = cm("n", "c", "1", json!({}), None);
        for ev in [
            watcher::Event::Init,
            watcher::Event::InitApply(a1.clone()),
            watcher::Event::InitApply(b1),
            watcher::Event::InitApply(c1.clone()),
        ] {
            inf.shared.apply(ev);
        }
        assert!(!inf.is_synced());
        assert_eq!(inf.len(), 0, "nothing is visible before the list completes");
        inf.shared.apply(watcher::Event::InitDone);
        assert!(inf.is_synced());
        assert_eq!(
            drain(&mut rx),
            ["added n/a@1", "added n/b@1", "added n/c@1", "relisted"]
        );
        let c_before = stored(&inf, &ObjectKey::new(Some("n"), "c"));

        // Re-list: a changed, b gone, c unchanged, d new.
        inf.shared.apply(watcher::Event::Init);
        inf.shared.apply(watcher::Event::InitApply(cm(
            "n",
            "a",
            "5",
            json!({}),
            None,
        )));
        inf.shared.apply(watcher::Event::InitApply(c1));
        inf.shared.apply(watcher::Event::InitApply(cm(
            "n",
            "d",
            "6",
            json!({}),
            None,
        )));
        assert_eq!(
            names(&inf.list(None)),
            ["n/a", "n/b", "n/c"],
            "the old cache serves reads until the re-list completes"
        );
        inf.shared.apply(watcher::Event::InitDone);
        assert_eq!(
            drain(&mut rx),
            ["deleted n/b", "updated n/a 1->5", "added n/d@6", "relisted"]
        );
        assert_eq!(names(&inf.list(None)), ["n/a", "n/c", "n/d"]);
        let c_after = stored(&inf, &ObjectKey::new(Some("n"), "c"));
        assert!(
            Arc::ptr_eq(&c_before, &c_after),
            "an unchanged object keeps its single cached copy"
        );
        assert!(inf.shared.read().relist.is_none());
        assert_indexes_consistent(&inf);
        let _ = a1;
    }

    #[test]
    fn interrupted_relist_starts_over() {
        let inf = offline();
        inf.shared.apply(watcher::Event::Init);
        inf.shared.apply(watcher::Event::InitApply(cm(
            "n",
            "x",
            "1",
            json!({}),
            None,
        )));
        // The list failed half-way; the watcher starts again.
        inf.shared.apply(watcher::Event::Init);
        inf.shared.apply(watcher::Event::InitApply(cm(
            "n",
            "y",
            "2",
            json!({}),
            None,
        )));
        inf.shared.apply(watcher::Event::InitDone);
        assert_eq!(names(&inf.list(None)), ["n/y"]);
    }

    #[test]
    fn watch_events_update_cache_and_indexes() {
        let inf = offline();
        let mut rx = inf.subscribe();
        inf.shared.apply(watcher::Event::Init);
        inf.shared.apply(watcher::Event::InitDone);
        let apply = |v: Value| inf.shared.apply(watcher::Event::Apply(v));
        apply(cm("n", "a", "1", json!({"app": "x"}), Some("p1")));
        apply(cm("n", "a", "1", json!({"app": "x"}), Some("p1"))); // same rv: no event
        apply(cm("m", "b", "2", json!({"app": "x", "tier": "t"}), None));
        apply(cm("n", "c", "3", json!({"app": "y"}), None));
        let app_x = LabelSelector::parse("app=x").expect("selector");
        assert_eq!(names(&inf.controlled_by("p1")), ["n/a"]);
        assert!(
            inf.controlled_by("other").is_empty(),
            "only the ControllerRef counts"
        );
        assert_eq!(
            names(&inf.orphans(None, &LabelSelector::default())),
            ["m/b", "n/c"]
        );
        assert_eq!(
            names(&inf.orphans(Some("n"), &LabelSelector::default())),
            ["n/c"]
        );
        assert_eq!(names(&inf.orphans(None, &app_x)), ["m/b"]);
        assert_eq!(names(&inf.select(None, &app_x)), ["m/b", "n/a"]);
        assert_eq!(names(&inf.select(Some("n"), &app_x)), ["n/a"]);
        assert_eq!(names(&inf.select(Some(""), &app_x)), ["m/b", "n/a"]);

        // The ControllerRef goes away: a becomes an orphan; its labels change too.
        apply(cm("n", "a", "4", json!({"app": "y"}), None));
        assert!(inf.controlled_by("p1").is_empty());
        assert_eq!(
            names(&inf.orphans(Some("n"), &LabelSelector::default())),
            ["n/a", "n/c"]
        );
        assert_eq!(names(&inf.select(None, &app_x)), ["m/b"]);
        // And comes back under another owner.
        apply(cm("n", "a", "5", json!({"app": "y"}), Some("p2")));
        assert_eq!(names(&inf.controlled_by("p2")), ["n/a"]);
        assert_eq!(
            names(&inf.orphans(Some("n"), &LabelSelector::default())),
            ["n/c"]
        );
        inf.shared.apply(watcher::Event::Delete(cm(
            "m",
            "b",
            "6",
            json!({"app": "x"}),
            None,
        )));
        inf.shared
            .apply(watcher::Event::Delete(cm("m", "zz", "7", json!({}), None))); // unknown: no event
        assert!(inf.select(None, &app_x).is_empty());
        assert_eq!(
            drain(&mut rx),
            [
                "relisted",
                "added n/a@1",
                "added m/b@2",
                "added n/c@3",
                "updated n/a 1->4",
                "updated n/a 4->5",
                "deleted m/b"
            ]
        );
        assert_indexes_consistent(&inf);
        let st = inf.shared.read();
        assert!(
            !st.by_label.contains_key("tier"),
            "no empty index entries are left"
        );
        assert!(!st.by_controller.contains_key("p1"));
    }

    #[test]
    fn select_without_an_exact_pair_and_with_set_requirements() {
        let inf = offline();
        inf.shared.apply(watcher::Event::Init);
        for (ns, name, app) in [
            ("a", "1", "x"),
            ("a", "2", "y"),
            ("b", "3", "z"),
            ("b", "4", "x"),
        ] {
            inf.shared.apply(watcher::Event::InitApply(cm(
                ns,
                name,
                name,
                json!({"app": app}),
                None,
            )));
        }
        inf.shared.apply(watcher::Event::InitApply(cm(
            "a",
            "5",
            "5",
            json!({}),
            None,
        )));
        inf.shared.apply(watcher::Event::InitDone);
        let sel = |s: &str| LabelSelector::parse(s).expect("selector");
        assert_eq!(
            names(&inf.select(None, &sel("app in (x,y)"))),
            ["a/1", "a/2", "b/4"]
        );
        assert_eq!(
            names(&inf.select(Some("a"), &sel("app!=x"))),
            ["a/2", "a/5"]
        );
        assert_eq!(names(&inf.select(Some("b"), &sel("app"))), ["b/3", "b/4"]);
        // The label index is used for the exact pair, the rest of the selector still applies.
        assert_eq!(
            names(&inf.select(None, &sel("app=x,app notin (x)"))).len(),
            0
        );
        assert_eq!(
            names(&inf.select(Some("zz"), &LabelSelector::default())).len(),
            0
        );
        assert_eq!(names(&inf.list(Some("b"))), ["b/3", "b/4"]);
        assert_eq!(inf.len(), 5);
    }

    #[test]
    fn to_json_fills_type_and_drops_managed_fields() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "n", "resourceVersion": "3",
                         "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "data": {"k": "v"}
        }))
        .expect("object");
        assert!(obj.types.is_none());
        let v = to_json(obj, &cm_ar()).expect("json");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": "n", "resourceVersion": "3"},
                   "data": {"k": "v"}})
        );
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "data"]);
    }

    #[tokio::test]
    async fn wait_until_and_wait_synced_follow_changes_offline() {
        let inf = offline();
        let key = ObjectKey::new(Some("n"), "a");
        let checks = std::sync::atomic::AtomicUsize::new(0);
        // join! polls in order: both waiters check, find nothing and park before the writer runs,
        // so they can only finish by being woken by the cache changes.
        let (seen, synced, ()) = tokio::join!(
            inf.wait_until(
                &key,
                |o| {
                    checks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    o.and_then(|m| m.resource_version.as_deref()) == Some("2")
                },
                WAIT,
            ),
            inf.wait_synced(WAIT),
            async {
                tokio::task::yield_now().await;
                assert_eq!(checks.load(std::sync::atomic::Ordering::SeqCst), 1);
                inf.shared.apply(watcher::Event::Init);
                inf.shared.apply(watcher::Event::InitApply(cm(
                    "n",
                    "a",
                    "1",
                    json!({}),
                    None,
                )));
                inf.shared.apply(watcher::Event::InitDone);
                tokio::task::yield_now().await;
                inf.shared
                    .apply(watcher::Event::Apply(cm("n", "a", "2", json!({}), None)));
            }
        );
        assert!(seen);
        assert!(synced.is_ok());
        assert!(checks.load(std::sync::atomic::Ordering::SeqCst) >= 2);
        // Absent keys satisfy "gone"; a predicate that never holds times out.
        assert!(
            inf.wait_until(&ObjectKey::new(Some("n"), "b"), |o| o.is_none(), WAIT)
                .await
        );
        assert!(
            !inf.wait_until(&key, |o| o.is_none(), Duration::from_millis(50))
                .await
        );
    }

    #[tokio::test]
    async fn stopped_informers_say_why() {
        let inf = Informer::stopped(&cm_ar(), true, "the engine is shutting down");
        let err = inf.wait_synced(WAIT).await.expect_err("stopped");
        assert!(matches!(err, InformerError::Stopped { .. }));
        assert_eq!(
            err.to_string(),
            "the cache of configmaps (v1) is stopped: the engine is shutting down"
        );
        assert!(
            !inf.wait_until(&ObjectKey::new(None, "x"), |o| o.is_some(), WAIT)
                .await
        );
    }

    // ---- against the sandbox ----

    async fn client_from_yaml(yaml: &str) -> kube::Client {
        let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("kube config");
        kube::Client::try_from(cfg).expect("kube client")
    }

    async fn sandbox() -> (Sandbox, kube::Client) {
        sandbox_with(SandboxConfig::ephemeral()).await
    }

    async fn sandbox_with(cfg: SandboxConfig) -> (Sandbox, kube::Client) {
        let sb = Sandbox::start(cfg).await.expect("sandbox starts");
        let client = client_from_yaml(&sb.kubeconfig_yaml()).await;
        (sb, client)
    }

    fn cms(client: &kube::Client, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(client.clone(), ns)
    }

    async fn create_cm(client: &kube::Client, v: Value) -> ConfigMap {
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let cm: ConfigMap = serde_json::from_value(v).expect("configmap");
        cms(client, &ns)
            .create(&PostParams::default(), &cm)
            .await
            .expect("create configmap")
    }

    async fn merge(client: &kube::Client, ns: &str, name: &str, patch: Value) -> ConfigMap {
        cms(client, ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch configmap")
    }

    async fn create_ns(client: &kube::Client, name: &str) {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }

    /// The next event concerning `name` (or `Relisted`), failing after 30 s.
    async fn next_for(rx: &mut broadcast::Receiver<InformerEvent>, name: &str) -> InformerEvent {
        let deadline = Instant::now() + WAIT;
        loop {
            let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Ok(ev)) => ev,
                Ok(Err(e)) => panic!("event channel: {e}"),
                Err(_) => panic!("no event for {name} within {WAIT:?}"),
            };
            let about = match &ev {
                InformerEvent::Added(o) | InformerEvent::Deleted(o) => object::name(o),
                InformerEvent::Updated { new, .. } => object::name(new),
                InformerEvent::Relisted => return ev,
            };
            if about == Some(name) {
                return ev;
            }
        }
    }

    async fn synced(reg: &InformerRegistry, ar: &ApiResource, namespaced: bool) -> Arc<Informer> {
        let inf = reg.informer(ar, namespaced);
        inf.wait_synced(WAIT).await.expect("informer syncs");
        inf
    }

    #[tokio::test]
    async fn syncs_existing_objects_and_streams_changes_in_order() {
        let (sb, client) = sandbox().await;
        create_cm(
            &client,
            json!({"metadata": {"name": "pre", "namespace": "default"}, "data": {"k": "v"}}),
        )
        .await;
        let direct = cms(&client, "default").get("pre").await.expect("get");
        assert!(
            direct
                .metadata
                .managed_fields
                .is_some_and(|m| !m.is_empty()),
            "precondition: the server records managedFields"
        );
        let reg = InformerRegistry::new(client.clone());
        let inf = synced(&reg, &cm_ar(), true).await;
        assert!(inf.is_synced());
        assert_eq!(inf.resource().plural, "configmaps");
        assert!(inf.namespaced());
        let pre = inf
            .get(&ObjectKey::new(Some("default"), "pre"))
            .expect("listed");
        assert_eq!(pre["apiVersion"], "v1");
        assert_eq!(pre["kind"], "ConfigMap");
        assert_eq!(pre["data"]["k"], "v");
        assert!(pre["metadata"].get("managedFields").is_none());
        assert!(object::uid(&pre).is_some());

        let mut rx = inf.subscribe();
        create_cm(
            &client,
            json!({"metadata": {"name": "x", "namespace": "default"}, "data": {"n": "1"}}),
        )
        .await;
        merge(&client, "default", "x", json!({"data": {"n": "2"}})).await;
        cms(&client, "default")
            .delete("x", &DeleteParams::default())
            .await
            .expect("delete");
        match next_for(&mut rx, "x").await {
            InformerEvent::Added(o) => {
                assert_eq!(o["data"]["n"], "1");
                assert_eq!(o["kind"], "ConfigMap");
                assert!(o["metadata"].get("managedFields").is_none());
            }
            e => panic!("expected Added, got {}", ev_str(&e)),
        }
        match next_for(&mut rx, "x").await {
            InformerEvent::Updated { old, new } => {
                assert_eq!(old["data"]["n"], "1");
                assert_eq!(new["data"]["n"], "2");
                assert_ne!(
                    object::resource_version(&old),
                    object::resource_version(&new)
                );
            }
            e => panic!("expected Updated, got {}", ev_str(&e)),
        }
        match next_for(&mut rx, "x").await {
            InformerEvent::Deleted(o) => assert_eq!(o["data"]["n"], "2"),
            e => panic!("expected Deleted, got {}", ev_str(&e)),
        }
        assert!(inf.get(&ObjectKey::new(Some("default"), "x")).is_none());
        reg.shutdown();
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn owner_orphan_and_label_indexes_track_the_server() {
        let (sb, client) = sandbox().await;
        create_ns(&client, "other").await;
        let parent = create_cm(
            &client,
            json!({"metadata": {"name": "parent", "namespace": "default"}}),
        )
        .await;
        let puid = parent.metadata.uid.clone().expect("uid");
        let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
                            "uid": puid, "controller": true}]);
        create_cm(
            &client,
            json!({"metadata": {"name": "child", "namespace": "default",
                                "labels": {"app": "web"}, "ownerReferences": owner}}),
        )
        .await;
        for (ns, name, app) in [
            ("default", "o1", "web"),
            ("default", "o2", "db"),
            ("other", "o3", "web"),
        ] {
            create_cm(
                &client,
                json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}}}),
            )
            .await;
        }
        let reg = InformerRegistry::new(client.clone());
        let inf = synced(&reg, &cm_ar(), true).await;
        let web = LabelSelector::from_label_selector(&json!({"matchLabels": {"app": "web"}}))
            .expect("selector");
        let any = LabelSelector::default();
        assert_eq!(names(&inf.controlled_by(&puid)), ["default/child"]);
        assert_eq!(names(&inf.orphans(Some("default"), &web)), ["default/o1"]);
        assert_eq!(names(&inf.orphans(None, &web)), ["default/o1", "other/o3"]);
        let default_orphans = names(&inf.orphans(Some("default"), &any));
        assert!(default_orphans.contains(&"default/o2".to_string()));
        assert!(!default_orphans.contains(&"default/child".to_string()));
        assert_eq!(
            names(&inf.select(Some("default"), &web)),
            ["default/child", "default/o1"]
        );
        assert_eq!(
            names(&inf.select(
                None,
                &LabelSelector::parse("app in (db, web), app!=web").expect("sel")
            )),
            ["default/o2"]
        );

        // Remove the ControllerRef: the child becomes an orphan.
        let mut rx = inf.subscribe();
        merge(
            &client,
            "default",
            "child",
            json!({"metadata": {"ownerReferences": null}}),
        )
        .await;
        match next_for(&mut rx, "child").await {
            InformerEvent::Updated { old, new } => {
                assert!(object::controller_ref(&old).is_some());
                assert!(object::controller_ref(&new).is_none());
            }
            e => panic!("expected Updated, got {}", ev_str(&e)),
        }
        assert!(inf.controlled_by(&puid).is_empty());
        assert_eq!(
            names(&inf.orphans(Some("default"), &web)),
            ["default/child", "default/o1"]
        );
        // Adopt o1: it moves from the orphans to the owner index.
        merge(
            &client,
            "default",
            "o1",
            json!({"metadata": {"ownerReferences": owner}}),
        )
        .await;
        next_for(&mut rx, "o1").await;
        assert_eq!(names(&inf.controlled_by(&puid)), ["default/o1"]);
        assert_eq!(
            names(&inf.orphans(Some("default"), &web)),
            ["default/child"]
        );
        // A label change moves an object in the label index.
        merge(
            &client,
            "other",
            "o3",
            json!({"metadata": {"labels": {"app": "db"}}}),
        )
        .await;
        next_for(&mut rx, "o3").await;
        assert_eq!(
            names(&inf.select(None, &web)),
            ["default/child", "default/o1"]
        );
        reg.shutdown();
        sb.shutdown().await;
    }

    /// The names in an informer's cache, sorted.
    fn cached_names(inf: &Informer) -> Vec<String> {
        let mut n: Vec<String> = inf
            .list(Some("default"))
            .iter()
            .filter_map(|o| object::name(o).map(str::to_string))
            .filter(|n| n.starts_with("s-"))
            .collect();
        n.sort();
        n
    }

    /// Wait until every follower of `c` acknowledged `generation`.
    async fn acked(gate: &crate::shard::ShardGate, c: &str, generation: u64) {
        let deadline = Instant::now() + WAIT;
        while !gate.cache_ready(c, generation) {
            assert!(
                Instant::now() < deadline,
                "scope {generation} not acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// ConfigMaps `(name, shard label, bucket)` in `default`, and `s-u` without a label.
    async fn labelled_cms(client: &kube::Client, children: &[(String, &String, u8)]) {
        for (name, label, b) in children {
            create_cm(
                client,
                json!({"metadata": {"name": name, "namespace": "default",
                    "labels": {(*label).clone(): crate::shard::bucket_value(*b)}}}),
            )
            .await;
        }
        create_cm(
            client,
            json!({"metadata": {"name": "s-u", "namespace": "default"}}),
        )
        .await;
    }

    #[tokio::test]
    async fn sharded_informers_cache_only_the_scope_and_follow_its_changes() {
        use crate::shard::{ShardGate, bucket, bucket_label};
        let (_sb, client) = sandbox().await;
        let gate = ShardGate::new("me");
        gate.add("c");
        let label = bucket_label("c");
        // Children: s-0 .. s-3 labelled with buckets 0..3, s-u unlabelled.
        let children: Vec<(String, &String, u8)> =
            (0..4u8).map(|b| (format!("s-{b}"), &label, b)).collect();
        labelled_cms(&client, &children).await;
        let reg = InformerRegistry::new(client.clone());
        let filter = |by| ShardFilter {
            controller: "c".into(),
            by,
            follower: gate.cache_follower("c").expect("sharded"),
        };
        let g1 = gate.set_cache("c", BTreeSet::from([1, 2]));
        let children = reg.sharded(&cm_ar(), true, filter(FilterBy::ChildLabel(label.clone())));
        children.wait_synced(WAIT).await.expect("sync");
        acked(&gate, "c", g1).await;
        assert_eq!(cached_names(&children), ["s-1", "s-2", "s-u"]);
        assert_eq!(
            children.filtered_by(),
            vec![("c".into(), FilterBy::ChildLabel(label.clone()))]
        );
        // The same controller again (a restart): still filtered.
        let again = reg.sharded(&cm_ar(), true, filter(FilterBy::ChildLabel(label.clone())));
        assert!(Arc::ptr_eq(&children, &again));
        assert_eq!(children.filtered_by().len(), 1, "replaced, not added");

        // A new scope: what left it is deleted from the cache, what entered it listed.
        let mut rx = children.subscribe();
        let g2 = gate.set_cache("c", BTreeSet::from([2, 3]));
        acked(&gate, "c", g2).await;
        assert_eq!(cached_names(&children), ["s-2", "s-3", "s-u"]);
        assert!(matches!(
            next_for(&mut rx, "s-1").await,
            InformerEvent::Deleted(_)
        ));
        assert!(matches!(
            next_for(&mut rx, "s-3").await,
            InformerEvent::Added(_)
        ));
        // Changes outside the scope are not sent by the server.
        merge(&client, "default", "s-0", json!({"data": {"x": "1"}})).await;
        merge(&client, "default", "s-3", json!({"data": {"x": "1"}})).await;
        assert!(matches!(
            next_for(&mut rx, "s-3").await,
            InformerEvent::Updated { .. }
        ));
        assert_eq!(cached_names(&children), ["s-2", "s-3", "s-u"]);

        // Parents by uid bucket: the cache keeps the parents of the scope's buckets only.
        let parents_ar = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), "default");
        let mut buckets = BTreeSet::new();
        for i in 0..6 {
            let s: k8s_openapi::api::core::v1::Secret =
                serde_json::from_value(json!({"metadata": {"name": format!("s-{i}")}}))
                    .expect("secret");
            let made = secrets
                .create(&PostParams::default(), &s)
                .await
                .expect("create");
            buckets.insert(bucket(made.metadata.uid.as_deref().expect("uid")));
        }
        let keep: BTreeSet<u8> = buckets.iter().take(2).copied().collect();
        let g3 = gate.set_cache("c", keep.clone());
        let parents = reg.sharded(&parents_ar, true, filter(FilterBy::ParentUid));
        parents.wait_synced(WAIT).await.expect("sync");
        acked(&gate, "c", g3).await;
        let held: Vec<Arc<Value>> = parents
            .list(Some("default"))
            .into_iter()
            .filter(|p| object::name(p).is_some_and(|n| n.starts_with("s-")))
            .collect();
        assert!(!held.is_empty() && held.len() < 6, "{} of 6", held.len());
        for p in &held {
            assert!(keep.contains(&bucket(object::uid(p).expect("uid"))));
        }
        let mut want: Vec<String> = (0..4u8)
            .filter(|b| keep.contains(b))
            .map(|b| format!("s-{b}"))
            .collect();
        want.push("s-u".into());
        assert_eq!(cached_names(&children), want);

        // Another reader of the children's resource: the filter is dropped, all are cached.
        let all = reg.informer(&cm_ar(), true);
        assert!(Arc::ptr_eq(&all, &children));
        assert!(all.filtered_by().is_empty());
        let deadline = Instant::now() + WAIT;
        while cached_names(&all).len() < 5 {
            assert!(Instant::now() < deadline, "{:?}", cached_names(&all));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn narrowing_is_the_union_of_the_readers_scopes() {
        let b = |v: &[u8]| Arc::new(v.iter().copied().collect::<BTreeSet<u8>>());
        let (a, c) = (
            "shard.kubectl-meta.dev/a".to_string(),
            "shard.kubectl-meta.dev/c".to_string(),
        );
        let child = |l: &String, v: &[u8]| (FilterBy::ChildLabel(l.clone()), b(v));
        // One label: the server selects the union; nothing left to filter client-side.
        let n = Narrowing::union(&[child(&a, &[1]), child(&a, &[2])]);
        assert_eq!(n.keep, None);
        let sel = n.selector.expect("a selector");
        assert!(sel.starts_with(&format!("{a} notin (00,03,04,")), "{sel}");
        assert!(!sel.contains(",01,") && !sel.contains(",02,"), "{sel}");
        let every: Vec<u8> = (0..=u8::MAX).collect();
        assert_eq!(Narrowing::union(&[child(&a, &every)]), Narrowing::default());
        assert_eq!(Narrowing::union(&[]), Narrowing::default());
        // Two labels: client-side, each controller's share of its own children.
        let n = Narrowing::union(&[child(&a, &[1]), child(&c, &[2])]);
        assert_eq!(n.selector, None);
        let obj = |labels: Value, uid: &str| json!({"metadata": {"name": "x", "namespace": "default", "uid": uid, "labels": labels}});
        assert!(n.keeps(&obj(json!({&a: "01"}), "u")));
        assert!(!n.keeps(&obj(json!({&a: "02"}), "u")));
        assert!(n.keeps(&obj(json!({&c: "02"}), "u")));
        assert!(
            !n.keeps(&obj(json!({&c: "01"}), "u")),
            "c's child out of c's scope, though it lacks a's label"
        );
        assert!(n.keeps(&obj(json!({}), "u")), "unlabelled: both keep it");
        assert!(n.keeps(&obj(json!({&a: "zz"}), "u")), "no bucket: as notin");
        // A parent reader beside a child reader: by uid, whatever its labels.
        let uid_in = |want: u8| {
            (0..)
                .map(|i| format!("uid-{i}"))
                .find(|u| crate::shard::bucket(u) == want)
                .expect("a uid")
        };
        let (seven, other) = (uid_in(7), uid_in(9));
        let n = Narrowing::union(&[(FilterBy::ParentUid, b(&[7])), child(&a, &[1])]);
        assert_eq!(n.selector, None);
        assert!(
            n.keeps(&obj(json!({&a: "02"}), &seven)),
            "a parent in scope"
        );
        assert!(!n.keeps(&obj(json!({&a: "02"}), &other)));
        assert!(n.keeps(&obj(json!({&a: "01"}), &other)), "a child in scope");
        assert!(
            n.keeps(&obj(json!({}), &other)),
            "unlabelled: the child reader's"
        );
    }

    #[tokio::test]
    async fn a_shared_informer_caches_the_union_of_its_sharded_readers() {
        use crate::shard::{ShardGate, bucket_label};
        let (_sb, client) = sandbox().await;
        let gate = ShardGate::new("me");
        gate.add("c");
        gate.add("d");
        let (lc, ld) = (bucket_label("c"), bucket_label("d"));
        // c's children in buckets 1 and 5, d's in 2 and 6, one unlabelled object.
        let children: Vec<(String, &String, u8)> = [
            ("s-c1", &lc, 1u8),
            ("s-c5", &lc, 5),
            ("s-d2", &ld, 2),
            ("s-d6", &ld, 6),
        ]
        .into_iter()
        .map(|(n, l, b)| (n.to_string(), l, b))
        .collect();
        labelled_cms(&client, &children).await;
        let reg = InformerRegistry::new(client.clone());
        let filter = |c: &str, label: &String| ShardFilter {
            controller: c.into(),
            by: FilterBy::ChildLabel(label.clone()),
            follower: gate.cache_follower(c).expect("sharded"),
        };
        let until = |inf: &Arc<Informer>, want: &[&str]| {
            let inf = Arc::clone(inf);
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            async move {
                let deadline = Instant::now() + WAIT;
                while cached_names(&inf) != want {
                    assert!(
                        Instant::now() < deadline,
                        "{:?} != {want:?}",
                        cached_names(&inf)
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let gc = gate.set_cache("c", BTreeSet::from([1]));
        let gd = gate.set_cache("d", BTreeSet::from([2]));
        let inf = reg.sharded(&cm_ar(), true, filter("c", &lc));
        inf.wait_synced(WAIT).await.expect("sync");
        acked(&gate, "c", gc).await;
        // c alone: its selector keeps d's children (they lack c's label).
        assert_eq!(cached_names(&inf), ["s-c1", "s-d2", "s-d6", "s-u"]);
        // d reads the same resource: the union of both shares, not everything.
        let same = reg.sharded(&cm_ar(), true, filter("d", &ld));
        assert!(Arc::ptr_eq(&inf, &same));
        assert_eq!(inf.filtered_by().len(), 2);
        acked(&gate, "d", gd).await;
        until(&inf, &["s-c1", "s-d2", "s-u"]).await;
        // d's scope changes, c's share stays.
        let gd2 = gate.set_cache("d", BTreeSet::from([6]));
        acked(&gate, "d", gd2).await;
        assert!(gate.cache_ready("c", gc));
        until(&inf, &["s-c1", "s-d6", "s-u"]).await;
        // A child relabelled out of c's scope leaves the cache.
        merge(
            &client,
            "default",
            "s-c1",
            json!({"metadata": {"labels": {lc.clone(): "05"}}}),
        )
        .await;
        until(&inf, &["s-d6", "s-u"]).await;
        // An unfiltered reader: everything, for good.
        let all = reg.informer(&cm_ar(), true);
        assert!(all.filtered_by().is_empty());
        until(&all, &["s-c1", "s-c5", "s-d2", "s-d6", "s-u"]).await;
        assert!(gate.cache_ready("c", gc) && gate.cache_ready("d", gd2));
        reg.shutdown();
    }

    #[tokio::test]
    async fn registry_shares_one_informer_per_resource_and_shuts_down() {
        let (sb, client) = sandbox().await;
        let reg = InformerRegistry::new(client.clone());
        let first = reg.informer(&cm_ar(), true);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let reg = reg.clone();
                tokio::spawn(async move { reg.informer(&cm_ar(), true) })
            })
            .collect();
        for t in tasks {
            assert!(Arc::ptr_eq(&first, &t.await.expect("join")));
        }
        let ns_ar = ApiResource::erase::<Namespace>(&());
        let namespaces = synced(&reg, &ns_ar, false).await;
        assert!(!Arc::ptr_eq(&first, &namespaces));
        assert!(namespaces.get(&ObjectKey::new(None, "default")).is_some());
        assert!(
            namespaces.list(Some("default")).is_empty(),
            "cluster-scoped objects have no namespace"
        );
        first.wait_synced(WAIT).await.expect("sync");

        // Both handles see the same changes through one watch.
        let mut rx1 = first.subscribe();
        let mut rx2 = reg.informer(&cm_ar(), true).subscribe();
        create_cm(
            &client,
            json!({"metadata": {"name": "s", "namespace": "default"}}),
        )
        .await;
        assert!(matches!(
            next_for(&mut rx1, "s").await,
            InformerEvent::Added(_)
        ));
        assert!(matches!(
            next_for(&mut rx2, "s").await,
            InformerEvent::Added(_)
        ));

        reg.shutdown();
        let late = reg.informer(
            &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            true,
        );
        assert!(matches!(
            late.wait_synced(WAIT).await,
            Err(InformerError::Stopped { .. })
        ));
        // A stopped informer no longer changes, and waiting on it ends at once.
        create_cm(
            &client,
            json!({"metadata": {"name": "after", "namespace": "default"}}),
        )
        .await;
        let key = ObjectKey::new(Some("default"), "after");
        assert!(!first.wait_until(&key, |o| o.is_some(), WAIT).await);
        assert!(first.get(&key).is_none());
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn wait_until_returns_after_a_write_or_false_on_timeout() {
        let (sb, client) = sandbox().await;
        let reg = InformerRegistry::new(client.clone());
        let inf = synced(&reg, &cm_ar(), true).await;
        let key = ObjectKey::new(Some("default"), "w");
        assert!(
            !inf.wait_until(&key, |o| o.is_some(), Duration::from_millis(200))
                .await
        );
        let written = create_cm(
            &client,
            json!({"metadata": {"name": "w", "namespace": "default"}}),
        )
        .await;
        let rv = written.metadata.resource_version.expect("rv");
        // The engine's pattern: right after its own write, wait for the cache to show it.
        assert!(
            inf.wait_until(
                &key,
                |o| o.and_then(|m| m.resource_version.as_deref()) == Some(rv.as_str()),
                WAIT
            )
            .await
        );
        assert!(inf.get(&key).is_some());
        let updated = merge(&client, "default", "w", json!({"data": {"a": "b"}})).await;
        let rv2 = updated.metadata.resource_version.expect("rv");
        assert!(
            inf.wait_until(
                &key,
                |o| o.and_then(|m| m.resource_version.as_deref()) == Some(rv2.as_str()),
                WAIT
            )
            .await
        );
        cms(&client, "default")
            .delete("w", &DeleteParams::default())
            .await
            .expect("delete");
        assert!(inf.wait_until(&key, |o| o.is_none(), WAIT).await);
        reg.shutdown();
        sb.shutdown().await;
    }

    fn widget_ar() -> ApiResource {
        ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        }
    }

    #[tokio::test]
    async fn missing_resource_is_reported_then_picked_up_when_its_crd_appears() {
        let (sb, client) = sandbox().await;
        let reg = InformerRegistry::new(client.clone());
        let inf = reg.informer(&widget_ar(), true);
        // Wait (in short rounds) until the watch has been answered with a 404.
        let deadline = Instant::now() + WAIT;
        let err = loop {
            match inf.wait_synced(Duration::from_millis(250)).await {
                Err(
                    e @ InformerError::NotSynced {
                        last_error: Some(_),
                        ..
                    },
                ) => break e,
                Err(InformerError::NotSynced {
                    last_error: None, ..
                }) if Instant::now() < deadline => {}
                other => panic!("expected a NotSynced error with the watch error, got {other:?}"),
            }
        };
        let msg = err.to_string();
        assert!(msg.contains("widgets (example.com/v1)"), "{msg}");
        assert!(
            msg.contains("last watch error: list: 404 NotFound:"),
            "{msg}"
        );
        assert!(msg.contains("kubectl api-resources"), "{msg}");

        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .expect("crd");
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create crd");
        let deadline = Instant::now() + WAIT;
        loop {
            let c = crds.get("widgets.example.com").await.expect("get crd");
            let established = c
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            assert!(Instant::now() < deadline, "CRD never became established");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The watch retries with backoff (at most 30 s between attempts) and picks the CRD up.
        inf.wait_synced(Duration::from_secs(90))
            .await
            .expect("synced once the CRD exists");
        let mut rx = inf.subscribe();
        let widgets =
            Api::<DynamicObject>::namespaced_with(client.clone(), "default", &widget_ar());
        let w = DynamicObject::new("w1", &widget_ar())
            .within("default")
            .data(json!({"spec": {"size": 3}}));
        widgets
            .create(&PostParams::default(), &w)
            .await
            .expect("create widget");
        match next_for(&mut rx, "w1").await {
            InformerEvent::Added(o) => {
                assert_eq!(o["apiVersion"], "example.com/v1");
                assert_eq!(o["kind"], "Widget");
                assert_eq!(o["spec"]["size"], 3);
            }
            e => panic!("expected Added, got {}", ev_str(&e)),
        }
        assert_eq!(names(&inf.list(Some("default"))), ["default/w1"]);
        reg.shutdown();
        sb.shutdown().await;
    }

    /// A TCP proxy in front of the sandbox that can cut every connection and refuse new ones,
    /// to break the informer's watch for real.
    struct Proxy {
        addr: std::net::SocketAddr,
        blocked: Arc<std::sync::atomic::AtomicBool>,
        conns: Arc<Mutex<Vec<AbortHandle>>>,
        accept: AbortHandle,
    }

    impl Proxy {
        async fn start(upstream: std::net::SocketAddr) -> Proxy {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let blocked = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
            let (b, c) = (Arc::clone(&blocked), Arc::clone(&conns));
            let accept = tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if b.load(std::sync::atomic::Ordering::SeqCst) {
                        continue; // dropped: the client sees the connection fail
                    }
                    let task = tokio::spawn(async move {
                        if let Ok(mut out) = tokio::net::TcpStream::connect(upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                        }
                    });
                    c.lock().expect("lock").push(task.abort_handle());
                }
            })
            .abort_handle();
            Proxy {
                addr,
                blocked,
                conns,
                accept,
            }
        }

        fn cut(&self) {
            self.blocked
                .store(true, std::sync::atomic::Ordering::SeqCst);
            for c in self.conns.lock().expect("lock").drain(..) {
                c.abort();
            }
        }

        fn resume(&self) {
            self.blocked
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            self.accept.abort();
            self.cut();
        }
    }

    #[tokio::test]
    async fn broken_watch_relists_and_delivers_what_changed_meanwhile() {
        // A one-event history: resuming after missed writes gets 410 Expired, so the
        // informer has to re-list, as against a real API server whose watch cache moved on.
        let (sb, client) = sandbox_with(SandboxConfig {
            history: 1,
            ..SandboxConfig::ephemeral()
        })
        .await;
        for name in ["a", "b", "c"] {
            create_cm(
                &client,
                json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": "1"}}),
            )
            .await;
        }
        let proxy = Proxy::start(sb.addr()).await;
        let yaml = sb
            .kubeconfig_yaml()
            .replace(&sb.url(), &format!("https://{}", proxy.addr));
        assert_ne!(yaml, sb.kubeconfig_yaml());
        let reg = InformerRegistry::new(client_from_yaml(&yaml).await);
        let inf = synced(&reg, &cm_ar(), true).await;
        let c_before = stored(&inf, &ObjectKey::new(Some("default"), "c"));
        let mut rx = inf.subscribe();

        proxy.cut();
        merge(&client, "default", "a", json!({"data": {"v": "2"}})).await;
        cms(&client, "default")
            .delete("b", &DeleteParams::default())
            .await
            .expect("delete");
        create_cm(
            &client,
            json!({"metadata": {"name": "d", "namespace": "default"}}),
        )
        .await;
        proxy.resume();

        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Ok(ev)) => ev,
                Ok(Err(RecvError::Lagged(n))) => panic!("lagged {n}"),
                Ok(Err(RecvError::Closed)) => panic!("closed"),
                Err(_) => panic!("no re-list within 90 s; saw {seen:?}"),
            };
            if let InformerEvent::Updated { old, new } = &ev {
                assert_eq!(
                    (&old["data"]["v"], &new["data"]["v"]),
                    (&json!("1"), &json!("2"))
                );
            }
            let s = ev_str(&ev);
            let done = s == "relisted";
            seen.push(
                s.split('@')
                    .next()
                    .unwrap_or_default()
                    .split(' ')
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            if done {
                break;
            }
        }
        assert_eq!(
            seen,
            [
                "deleted default/b",
                "updated default/a",
                "added default/d",
                "relisted"
            ]
        );
        let c_after = stored(&inf, &ObjectKey::new(Some("default"), "c"));
        assert!(
            Arc::ptr_eq(&c_before, &c_after),
            "unchanged objects are not copied by a re-list"
        );
        assert_eq!(
            names(&inf.list(None)),
            ["default/a", "default/c", "default/d"]
        );

        // And the new watch streams live changes again.
        merge(&client, "default", "c", json!({"data": {"v": "3"}})).await;
        assert!(matches!(
            next_for(&mut rx, "c").await,
            InformerEvent::Updated { .. }
        ));
        reg.shutdown();
        sb.shutdown().await;
    }
}
