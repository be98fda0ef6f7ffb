//! Routing informer events to work-queue keys ([`crate::k8s::informer::for_each_event`] reads
//! them): [`parent_event`] and [`child_event`] (what an event of a parent or of an owned object
//! asks for), [`enqueue_each`], and the resync-period timer [`spawn_resync`].

use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::Trigger;
use crate::k8s::informer::{InformerEvent, for_each_event};
use crate::k8s::object::{self, ObjectKey};
use crate::runtime::queue::WorkQueue;

use crate::runtime::memory::SyncMemory;
use crate::runtime::related_cache::RelatedCache;
use crate::runtime::source::Source;

/// What an event of a parent (or target) informer asks of its controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentAction<K> {
    /// Queue this key.
    Queue(K, Trigger),
    /// The parent is gone: drop the key from the queue and the caches (its [`SyncMemory`] is
    /// forgotten already).
    Forget(K),
    /// Anything may have changed (relist): queue every parent.
    QueueAll,
    /// Nothing to do.
    Nothing,
}

impl<K: Clone + Eq + Hash + Display + Send + Sync + 'static> ParentAction<K> {
    /// Do it: queue on `queue`, forget in `queue` and `related`, or `enqueue_all` with
    /// [`Trigger::ParentChanged`].
    pub fn apply(
        self,
        queue: &WorkQueue<K, Trigger>,
        related: &RelatedCache<K>,
        enqueue_all: impl FnOnce(Trigger),
    ) {
        match self {
            ParentAction::Queue(k, t) => queue.add(k, t),
            ParentAction::Forget(k) => {
                queue.remove(&k);
                related.forget(&k);
            }
            ParentAction::QueueAll => enqueue_all(Trigger::ParentChanged),
            ParentAction::Nothing => {}
        }
    }
}

/// Spawn a router of `source`'s informer events to `route`, called on `me`, until `stop` (a
/// list read once has no events: nothing is spawned).
pub fn spawn_router<T: Send + Sync + 'static>(
    source: &Source,
    stop: &CancellationToken,
    me: &Arc<T>,
    mut route: impl FnMut(&T, InformerEvent) + Send + 'static,
) {
    let Some(informer) = source.informer() else {
        return;
    };
    let me = Arc::clone(me);
    tokio::spawn(for_each_event(
        informer.subscribe(),
        stop.clone(),
        move |ev| route(&me, ev),
    ));
}

/// Queue each `(key, object)` with `trigger`, remembering the objects' uids in `memory`;
/// returns how many were queued.
pub fn enqueue_each<K: Clone + Eq + Hash + Display + Send + Sync + 'static>(
    queue: &WorkQueue<K, Trigger>,
    memory: &SyncMemory<K>,
    objects: impl IntoIterator<Item = (K, Arc<Value>)>,
    trigger: &Trigger,
) -> usize {
    let mut n = 0;
    for (k, o) in objects {
        memory.remember_uid(&o, &k);
        queue.add(k, trigger.clone());
        n += 1;
    }
    n
}

/// Route one parent (target) informer event: queue a parent in scope (`key_in_scope` gives
/// its key, `None` when it is not ours to sync) when it appears, starts being deleted or
/// changes in a way that matters ([`SyncMemory::update_matters`]); forget a deleted one
/// (`key_of` gives the key of any object). Remembers uids in `memory` as it goes.
pub fn parent_event<K: Clone + Eq + Hash + Display>(
    ev: InformerEvent,
    key_in_scope: impl Fn(&Value) -> Option<K>,
    key_of: impl Fn(&Value) -> Option<K>,
    memory: &SyncMemory<K>,
    ignore_status_changes: bool,
) -> ParentAction<K> {
    match ev {
        InformerEvent::Added(p) => match key_in_scope(&p) {
            Some(k) => {
                memory.remember_uid(&p, &k);
                ParentAction::Queue(k, Trigger::ParentAdded)
            }
            None => ParentAction::Nothing,
        },
        InformerEvent::Updated { old, new } => {
            let Some(k) = key_in_scope(&new) else {
                return ParentAction::Nothing;
            };
            memory.remember_uid(&new, &k);
            if object::is_deleting(&new) && !object::is_deleting(&old) {
                ParentAction::Queue(k, Trigger::ParentDeleting)
            } else if memory.update_matters(&k, &old, &new, ignore_status_changes) {
                ParentAction::Queue(k, Trigger::ParentChanged)
            } else {
                ParentAction::Nothing
            }
        }
        InformerEvent::Deleted(p) => match key_of(&p) {
            Some(k) => {
                memory.forget(&k, &p);
                ParentAction::Forget(k)
            }
            None => ParentAction::Nothing,
        },
        InformerEvent::Relisted => ParentAction::QueueAll,
    }
}

/// What an event of an owned object (child, attachment) asks of its controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildAction {
    /// Queue the parent with this uid (its controller).
    Owner(String, Trigger),
    /// An object without a controller appeared or changed: parents whose selector matches it
    /// may adopt it.
    Orphan(Arc<Value>, Trigger),
    /// Anything may have changed (relist): queue every parent.
    All(Trigger),
}

/// Route one event of an owned object of `resource` (`Kind.apiVersion`): its controller, old
/// and new (a controller that lost it must hear of it), or, for an object without one that
/// appeared, lost its controller or changed labels, [`ChildAction::Orphan`]. An orphan that
/// disappears concerns nobody (ControllerRef proposal).
pub fn child_event(resource: &str, ev: InformerEvent) -> Vec<ChildAction> {
    let trig = |o: &Value, event: &str| Trigger::Child {
        resource: resource.to_string(),
        object: ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default(),
        event: event.to_string(),
    };
    match ev {
        InformerEvent::Added(o) => {
            let t = trig(&o, "added");
            match object::controller_ref(&o) {
                Some(r) => vec![ChildAction::Owner(r.uid, t)],
                None => vec![ChildAction::Orphan(o, t)],
            }
        }
        InformerEvent::Updated { old, new } => {
            let (or, nr) = (object::controller_ref(&old), object::controller_ref(&new));
            let t = trig(&new, "updated");
            let mut out = Vec::new();
            if let Some(r) = &or
                && nr.as_ref().is_none_or(|n| n.uid != r.uid)
            {
                out.push(ChildAction::Owner(r.uid.clone(), t.clone()));
            }
            match nr {
                Some(r) => out.push(ChildAction::Owner(r.uid, t)),
                None if or.is_some() || object::labels(&old) != object::labels(&new) => {
                    out.push(ChildAction::Orphan(new, t));
                }
                None => {}
            }
            out
        }
        InformerEvent::Deleted(o) => object::controller_ref(&o)
            .map(|r| ChildAction::Owner(r.uid, trig(&o, "deleted")))
            .into_iter()
            .collect(),
        InformerEvent::Relisted => vec![ChildAction::All(Trigger::Child {
            resource: resource.to_string(),
            object: "*".into(),
            event: "relisted".into(),
        })],
    }
}

/// Call `tick` every `period_seconds` (`resyncPeriodSeconds`; nothing when absent or not
/// positive), first one period from now, until `stop`.
pub fn spawn_resync(
    period_seconds: Option<i32>,
    stop: &CancellationToken,
    tick: impl Fn() + Send + 'static,
) {
    let Some(secs) = period_seconds.filter(|s| *s > 0) else {
        return;
    };
    let stop = stop.clone();
    tokio::spawn(async move {
        let period = Duration::from_secs(u64::from(secs.unsigned_abs()));
        let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                _ = timer.tick() => tick(),
                () = stop.cancelled() => break,
            }
        }
    });
}
