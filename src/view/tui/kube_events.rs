//! Kubernetes Events of the parents, for the Events tab: one watch on core/v1 Events (the
//! recorder writes them there; on a real API server events.k8s.io/v1 Events are the same
//! objects and show through core/v1 too), never a poll.
//!
//! [`watch`] runs the watch in a task of its own and hands each Event, reduced to the few
//! fields shown ([`KubeEvent`]), to the UI on a bounded channel: a slow or unreachable API
//! server delays the watch, never a frame. The UI folds them into an [`EventIndex`]: Events by
//! the uid of their involvedObject, so switching parents is one lookup (no scan of all
//! Events), with bounded memory (at most [`PER_OBJECT`] Events per object and [`TOTAL`] in
//! all; the oldest go first).

use std::collections::{HashMap, VecDeque};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;

/// Events kept per object (the newest).
pub const PER_OBJECT: usize = 50;
/// Events kept in all.
pub const TOTAL: usize = 10_000;
/// Events waiting for the UI before the watch waits for it.
const CHANNEL: usize = 1024;

/// A Kubernetes Event as the Events tab shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeEvent {
    /// The involved object's uid.
    pub uid: String,
    /// The Event's `namespace/name` (an update replaces the Event of the same name).
    pub name: String,
    /// `Normal` or `Warning`.
    pub kind: String,
    /// Reason (`SyncError`, `HotLoop`, ...).
    pub reason: String,
    /// Message.
    pub message: String,
    /// How many times it happened.
    pub count: i32,
    /// When it last happened (RFC 3339), if said.
    pub last: Option<String>,
    /// Who reported it.
    pub source: String,
    /// The Event was deleted (expired).
    pub deleted: bool,
}

impl KubeEvent {
    /// The fields shown, from a core/v1 Event; `None` without an involved object uid.
    pub fn from_event(e: &Event, deleted: bool) -> Option<KubeEvent> {
        let uid = e.involved_object.uid.clone().filter(|u| !u.is_empty())?;
        let ns = e.metadata.namespace.clone().unwrap_or_default();
        let name = e.metadata.name.clone().unwrap_or_default();
        let last = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
            .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.to_string()));
        let source = e
            .reporting_component
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
            .unwrap_or_default();
        Some(KubeEvent {
            uid,
            name: format!("{ns}/{name}"),
            kind: e.type_.clone().unwrap_or_else(|| "Normal".into()),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1).max(1),
            last,
            source,
            deleted,
        })
    }
}

/// Events by involved object uid, bounded (see the module header).
#[derive(Debug, Default)]
pub struct EventIndex {
    by_uid: HashMap<String, VecDeque<(u64, KubeEvent)>>,
    /// Insertion order, for evicting the oldest: (sequence, uid). Entries whose Event already
    /// left (per-object cap, deletion) are skipped when met; kept at most `2 * TOTAL` long.
    order: VecDeque<(u64, String)>,
    seq: u64,
    total: usize,
}

impl EventIndex {
    /// Fold one Event in: a new one is added, an update (same name) replaces it in place, a
    /// deletion removes it.
    pub fn apply(&mut self, ev: KubeEvent) {
        let list = self.by_uid.entry(ev.uid.clone()).or_default();
        if let Some(at) = list.iter().position(|(_, e)| e.name == ev.name) {
            if ev.deleted {
                list.remove(at);
                self.total -= 1;
                if list.is_empty() {
                    self.by_uid.remove(&ev.uid);
                }
            } else {
                list[at].1 = ev;
            }
            return;
        }
        if ev.deleted {
            if list.is_empty() {
                self.by_uid.remove(&ev.uid);
            }
            return;
        }
        self.seq += 1;
        let uid = ev.uid.clone();
        list.push_back((self.seq, ev));
        self.total += 1;
        if list.len() > PER_OBJECT {
            list.pop_front();
            self.total -= 1;
        }
        self.order.push_back((self.seq, uid));
        while self.total > TOTAL || self.order.len() > 2 * TOTAL {
            let Some((seq, uid)) = self.order.pop_front() else {
                break;
            };
            if let Some(list) = self.by_uid.get_mut(&uid)
                && list.front().is_some_and(|(s, _)| *s == seq)
            {
                list.pop_front();
                self.total -= 1;
                if list.is_empty() {
                    self.by_uid.remove(&uid);
                }
            }
        }
    }

    /// The Events of the object with `uid`, oldest first.
    pub fn of(&self, uid: &str) -> impl Iterator<Item = &KubeEvent> {
        self.by_uid
            .get(uid)
            .into_iter()
            .flat_map(|l| l.iter().map(|(_, e)| e))
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.total
    }

    /// No Event kept.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// Watch core/v1 Events (in `namespace`, or all namespaces) in a task of its own and send them
/// on the returned channel, reconnecting with backoff after errors. The task ends when the
/// receiver is dropped.
pub fn watch(
    client: kube::Client,
    namespace: Option<&str>,
) -> (mpsc::Receiver<KubeEvent>, tokio::task::JoinHandle<()>) {
    let api: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let (tx, rx) = mpsc::channel(CHANNEL);
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(item) = stream.next().await {
            let (e, deleted) = match item {
                Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => (e, false),
                Ok(watcher::Event::Delete(e)) => (e, true),
                // Errors are retried with backoff (an outage shows in the status bar).
                Ok(watcher::Event::Init | watcher::Event::InitDone) | Err(_) => continue,
            };
            if let Some(ev) = KubeEvent::from_event(&e, deleted)
                && tx.send(ev).await.is_err()
            {
                return;
            }
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(uid: &str, name: &str, count: i32) -> KubeEvent {
        KubeEvent {
            uid: uid.into(),
            name: name.into(),
            kind: "Warning".into(),
            reason: "SyncError".into(),
            message: format!("{name} x{count}"),
            count,
            last: None,
            source: "kubectl-meta".into(),
            deleted: false,
        }
    }

    #[test]
    fn updates_replace_deletions_remove() {
        let mut ix = EventIndex::default();
        ix.apply(ev("u1", "ns/a", 1));
        ix.apply(ev("u1", "ns/a", 2));
        ix.apply(ev("u2", "ns/b", 1));
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.of("u1").map(|e| e.count).collect::<Vec<_>>(), [2]);
        ix.apply(KubeEvent {
            deleted: true,
            ..ev("u1", "ns/a", 2)
        });
        assert_eq!((ix.len(), ix.of("u1").count()), (1, 0));
    }

    #[test]
    fn memory_is_bounded_per_object_and_in_all() {
        let mut ix = EventIndex::default();
        // One noisy object: only its newest PER_OBJECT Events stay.
        for i in 0..PER_OBJECT * 3 {
            ix.apply(ev("noisy", &format!("ns/n{i}"), 1));
        }
        let kept: Vec<String> = ix.of("noisy").map(|e| e.name.clone()).collect();
        assert_eq!(kept.len(), PER_OBJECT);
        assert_eq!(kept[0], format!("ns/n{}", PER_OBJECT * 2));
        // Many objects: TOTAL in all, the oldest gone first.
        for i in 0..TOTAL * 2 {
            ix.apply(ev(&format!("u{i}"), "ns/e", 1));
        }
        assert_eq!(ix.len(), TOTAL);
        assert!(ix.order.len() <= 2 * TOTAL);
        assert_eq!(ix.of("u0").count(), 0);
        assert_eq!(ix.of(&format!("u{}", TOTAL * 2 - 1)).count(), 1);
        assert_eq!(ix.of("noisy").count(), 0);
    }
}
