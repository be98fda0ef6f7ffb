//! The controller loop shared by every controller kind: workers pulling keys from the work
//! queue, calling the kind's sync, scheduling retries and resyncs, publishing sync events,
//! and remembering each key's last outcome (for `--once`, the TUI and exit codes).

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use crate::engine::error::SyncError;
use crate::engine::events::{EngineEvent, EventBus, EventKey, EventSubject, Trigger};
use crate::engine::runtime::queue::WorkQueue;

/// How one sync ended.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// API writes made.
    pub writes: usize,
    /// The failure, if the sync failed.
    pub error: Option<SyncError>,
    /// One-time resync requested by the hook (`resyncAfterSeconds`).
    pub resync_after: Option<Duration>,
    /// A rollout is in progress and waits for children (it can still progress).
    pub rollout_pending: bool,
    /// Child updates the server answered as no-ops (same resourceVersion): not writes, but
    /// confirmed like writes, so the hot-loop guard sees a field the server keeps rewriting.
    pub noops: usize,
    /// Child fields the hot-loop guard holds (messages naming field, values and cause).
    pub hot_loops: Vec<String>,
    /// Children still moving towards what their spec asks (kstatus: a Pod not Ready, a
    /// workload not caught up), `Kind namespace/name: why` each.
    pub children_moving: Vec<String>,
    /// Children that will not get there (kstatus Failed), `Kind namespace/name: why` each.
    pub children_failed: Vec<String>,
}

/// One kind of controller (CompositeController, ...), as the shared loop drives it.
pub trait Reconciler: Send + Sync + 'static {
    /// The work-queue key (a parent, or a parent plus a map key).
    type Key: Clone + Eq + Hash + Send + Sync + Display + EventKey + 'static;

    /// The controller's name.
    fn name(&self) -> &str;

    /// The controller's work queue.
    fn queue(&self) -> &WorkQueue<Self::Key, Trigger>;

    /// Sync one key.
    fn sync(
        &self,
        key: &Self::Key,
        triggers: &[Trigger],
    ) -> impl Future<Output = SyncOutcome> + Send;

    /// Sync a key once more after a sync that wrote, to confirm it converged (the default).
    /// A kind that recognises the echo of its own writes by itself (MapController) turns this
    /// off, so that one change costs one hook call.
    fn confirm_writes(&self) -> bool {
        true
    }
}

/// One parent's last hook exchange: (the parent or map key it was for, (hook name, request,
/// response)).
pub type Exchange = (EventSubject, (String, serde_json::Value, serde_json::Value));

/// A started controller of any kind, as the runtime and the dev loop drive it.
pub trait ControllerHandle: Send + Sync {
    /// The definition's name.
    fn name(&self) -> &str;
    /// The work queue's counters.
    fn queue_stats(&self) -> crate::engine::runtime::queue::QueueStats;
    /// Number of parents (targets) in scope.
    fn parent_count(&self) -> usize;
    /// Queue every parent.
    fn enqueue_all(&self, trigger: Trigger);
    /// Queue the parents named `namespace/name` or `name`; returns how many.
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize;
    /// A hook changed (hot reload): forget cached hook answers, queue every parent.
    fn hook_reloaded(&self);
    /// The hooks it calls, by name.
    fn hook_specs(&self) -> Vec<(&'static str, crate::engine::runtime::context::HookSpec)>;
    /// Every parent's last exchange (for replay).
    fn exchanges(&self) -> Vec<Exchange>;
    /// Send the exchanges' requests again and publish how the answers differ.
    fn replay(&self, exchanges: Vec<Exchange>) -> futures::future::BoxFuture<'_, Vec<EngineEvent>>;
}

/// The last outcome of every key of one controller.
#[derive(Debug, Default)]
pub struct Tracker {
    last: Mutex<HashMap<String, KeyState>>,
}

/// The last known state of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// Last sync succeeded without writing: converged.
    Ok,
    /// Last sync wrote; a confirming sync is queued.
    Wrote,
    /// Last sync failed with this error.
    Failed(SyncError),
    /// Waiting for a 429 retry.
    RateLimited,
    /// A rollout is waiting for children.
    RolloutPending,
    /// Converged except for child fields the hot-loop guard holds (the message names them).
    HotLoop(String),
    /// Last sync wrote nothing, but children are still moving (kstatus InProgress: a Pod not
    /// Ready yet, a workload not caught up); their change syncs the parent again.
    ChildrenMoving(Vec<String>),
    /// Last sync wrote nothing; these children failed (kstatus Failed): converged, reported.
    ChildrenFailed(Vec<String>),
}

impl Tracker {
    /// Record the outcome for a key.
    pub fn record(&self, key: String, state: KeyState) {
        if let Ok(mut m) = self.last.lock() {
            m.insert(key, state);
        }
    }

    /// Snapshot of all key states.
    pub fn snapshot(&self) -> Vec<(String, KeyState)> {
        let mut v: Vec<_> = self
            .last
            .lock()
            .map(|m| m.iter().map(|(k, s)| (k.clone(), s.clone())).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// Run `workers` workers for `r` until `stop` is cancelled; returns when all workers ended
/// (in-flight syncs finish first). While `held` says why writes are held (API server
/// unreachable, lease unconfirmed), workers take no work: the queue keeps coalescing keys.
pub async fn run_workers<R: Reconciler>(
    r: Arc<R>,
    workers: usize,
    bus: EventBus,
    tracker: Arc<Tracker>,
    stop: CancellationToken,
    held: watch::Receiver<Option<crate::engine::error::WritesHeld>>,
) {
    let mut handles = Vec::new();
    for _ in 0..workers.max(1) {
        let r = Arc::clone(&r);
        let bus = bus.clone();
        let tracker = Arc::clone(&tracker);
        let stop = stop.clone();
        let mut held = held.clone();
        handles.push(tokio::spawn(async move {
            loop {
                let open = tokio::select! {
                    r = held.wait_for(Option::is_none) => r.is_ok(),
                    () = stop.cancelled() => false,
                };
                if !open {
                    break;
                }
                let next = tokio::select! {
                    n = r.queue().next() => n,
                    () = stop.cancelled() => None,
                };
                let Some((key, triggers)) = next else { break };
                // Writes may have been held while this worker waited for a key.
                let open = tokio::select! {
                    r = held.wait_for(Option::is_none) => r.is_ok(),
                    () = stop.cancelled() => false,
                };
                if !open {
                    r.queue().done(key);
                    break;
                }
                sync_one(&*r, &bus, &tracker, key, triggers).await;
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
}

async fn sync_one<R: Reconciler>(
    r: &R,
    bus: &EventBus,
    tracker: &Tracker,
    key: R::Key,
    triggers: Vec<Trigger>,
) {
    let name = r.name().to_string();
    let key_s = key.to_string();
    let subject = key.subject();
    bus.publish(EngineEvent::SyncStarted {
        controller: name.clone(),
        parent: subject.parent.clone(),
        map_key: subject.map_key.clone(),
        status_only: subject.status_only,
        triggers: triggers.clone(),
    });
    let start = Instant::now();
    let out = r.sync(&key, &triggers).await;
    let q = r.queue();
    let mut retry_in = None;
    match &out.error {
        Some(f) => {
            let delay = match f.retry_after() {
                Some(d) => {
                    q.add_retry_after(key.clone(), Trigger::Retry, d);
                    tracker.record(key_s.clone(), KeyState::RateLimited);
                    d
                }
                None => {
                    tracker.record(key_s.clone(), KeyState::Failed(f.clone()));
                    q.add_rate_limited(key.clone(), Trigger::Retry)
                }
            };
            retry_in = Some(delay.as_secs_f64());
        }
        None => {
            q.forget(&key);
            let confirm = (out.writes > 0 || out.noops > 0) && r.confirm_writes();
            let state = if !out.hot_loops.is_empty() {
                KeyState::HotLoop(out.hot_loops.join("; "))
            } else if out.rollout_pending {
                KeyState::RolloutPending
            } else if confirm {
                KeyState::Wrote
            } else if !out.children_moving.is_empty() {
                KeyState::ChildrenMoving(out.children_moving.clone())
            } else if !out.children_failed.is_empty() {
                KeyState::ChildrenFailed(out.children_failed.clone())
            } else {
                KeyState::Ok
            };
            tracker.record(key_s.clone(), state);
            if confirm {
                // Confirm convergence with one more sync (re-queued when this one is done).
                q.add(key.clone(), Trigger::Converge);
            }
            if let Some(d) = out.resync_after {
                q.add_after(key.clone(), Trigger::ResyncAfter, d);
            }
        }
    }
    let EventSubject {
        parent,
        map_key,
        status_only,
    } = subject;
    bus.publish(EngineEvent::SyncFinished {
        controller: name,
        parent,
        map_key,
        status_only,
        duration: start.elapsed(),
        writes: out.writes,
        error: out.error.as_ref().map(ToString::to_string),
        error_layer: out.error.as_ref().map(SyncError::layer),
        retry_in,
    });
    q.done(key);
}
