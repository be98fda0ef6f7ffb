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
use tracing::Instrument;

pub use crate::error::SyncError;
use crate::events::{EngineEvent, EventBus, EventKey, EventSubject, Trigger};
use crate::runtime::queue::WorkQueue;

/// How one sync ended.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// API writes made.
    pub writes: usize,
    /// Writes of the parent's status among `writes`: they alone ask for no confirming sync.
    pub status_writes: usize,
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

    /// Confirm a sync that wrote only the parent's status too (Metacontroller's behaviour,
    /// which re-syncs on the status write's echo so a hook sees its status committed). Kinds
    /// that do not remember their echoes keep the old default, not; the reconciling kinds
    /// follow `EngineOptions::confirm_status_writes` (on unless `--status-echo skip`).
    fn confirm_status_writes(&self) -> bool {
        false
    }

    /// `triggers` of `key` without the echoes of the engine's own writes (by default all of
    /// them are kept); a key left without triggers is not synced.
    fn drop_own_echoes(&self, key: &Self::Key, triggers: Vec<Trigger>) -> Vec<Trigger> {
        let _ = key;
        triggers
    }

    /// The shard bucket of `key`'s parent ([`crate::shard::bucket`] of its uid), when the
    /// parent is cached (by default unknown).
    fn shard_bucket(&self, key: &Self::Key) -> Option<u8> {
        let _ = key;
        None
    }
}

/// Should a sync that ended with `out` be confirmed by one more sync? When it wrote anything
/// but the parent's status (the hook must see the children it made), or a child update was a
/// no-op (the hot-loop guard must see a field the server keeps rewriting); a status-only write
/// only when `status_too`; never for a kind that does not confirm (`confirm`).
pub fn needs_confirming(out: &SyncOutcome, confirm: bool, status_too: bool) -> bool {
    let others = out.writes.saturating_sub(out.status_writes);
    confirm && (others > 0 || out.noops > 0 || (status_too && out.status_writes > 0))
}

/// One key's last hook exchange, kept so that the dev loop can send its request again to a
/// reloaded hook and compare the answers (replay).
#[derive(Debug, Clone)]
pub struct LastExchange {
    /// The parent (and map key) it was for.
    pub subject: EventSubject,
    /// The hook's name (`sync`, `finalize`, `map`, `tombstone`).
    pub hook: String,
    /// The request sent.
    pub request: serde_json::Value,
    /// The answer received.
    pub response: serde_json::Value,
}

/// A started controller of any kind, as the runtime and the dev loop drive it.
pub trait ControllerHandle: Send + Sync {
    /// The definition's name.
    fn name(&self) -> &str;
    /// The work queue's counters.
    fn queue_stats(&self) -> crate::runtime::queue::QueueStats;
    /// The work queue's metrics (client-go's workqueue figures).
    fn queue_metrics(&self) -> crate::runtime::queue::QueueMetrics;
    /// Number of parents (targets) in scope.
    fn parent_count(&self) -> usize;
    /// Queue every parent.
    fn enqueue_all(&self, trigger: Trigger);
    /// Queue the parents named `namespace/name` or `name`; returns how many.
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize;
    /// Queue the parents whose uid falls in one of `buckets` ([`crate::shard::bucket`]: the
    /// parents that moved to this replica); returns how many.
    fn enqueue_buckets(&self, buckets: &std::collections::BTreeSet<u8>, trigger: Trigger) -> usize;
    /// A hook changed (hot reload): forget cached hook answers, queue every parent.
    fn hook_reloaded(&self);
    /// The hooks it calls, by name.
    fn hook_specs(&self) -> Vec<(&'static str, crate::runtime::context::HookSpec)>;
    /// Every parent's last exchange (for replay).
    fn exchanges(&self) -> Vec<LastExchange>;
    /// What the caches this controller reads hold now: `(resource, objects)` per resource it
    /// watches (`plural.group`, or `plural` for the core group), sorted. Shared informers are
    /// counted for every controller that reads them.
    fn cached_objects(&self) -> Vec<(String, usize)>;
    /// How many objects the server sent the informers this controller reads, as
    /// [`ControllerHandle::cached_objects`] (before a sharded controller's client-side filter).
    fn received_objects(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Send the exchanges' requests again and publish how the answers differ.
    fn replay(
        &self,
        exchanges: Vec<LastExchange>,
    ) -> futures::future::BoxFuture<'_, Vec<EngineEvent>>;
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
/// With a `shard` gate, a key whose parent the gate does not admit is dropped (whoever widens
/// what is owned re-queues the parents), and an admitted sync is held in flight for the gate.
pub async fn run_workers<R: Reconciler>(
    r: Arc<R>,
    workers: usize,
    bus: EventBus,
    tracker: Arc<Tracker>,
    stop: CancellationToken,
    held: watch::Receiver<Option<crate::error::WritesHeld>>,
    shard: Option<Arc<crate::shard::ShardGate>>,
) {
    let mut handles = Vec::new();
    for _ in 0..workers.max(1) {
        let r = Arc::clone(&r);
        let bus = bus.clone();
        let tracker = Arc::clone(&tracker);
        let stop = stop.clone();
        let mut held = held.clone();
        let shard = shard.clone();
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
                // Only the echoes of our own writes: nothing to sync.
                let triggers = r.drop_own_echoes(&key, triggers);
                if triggers.is_empty() {
                    r.queue().done(key);
                    continue;
                }
                // Writes may have been held while this worker waited for a key.
                let open = tokio::select! {
                    r = held.wait_for(Option::is_none) => r.is_ok(),
                    () = stop.cancelled() => false,
                };
                if !open {
                    r.queue().done(key);
                    break;
                }
                let in_flight = match &shard {
                    Some(g) => match g.begin(r.name(), &key.subject().parent, r.shard_bucket(&key))
                    {
                        Some(f) => Some(f),
                        None => {
                            // Not ours (or our membership is not fresh): its owner syncs it.
                            r.queue().forget(&key);
                            r.queue().done(key);
                            continue;
                        }
                    },
                    None => None,
                };
                sync_one(&*r, &bus, &tracker, key, triggers).await;
                drop(in_flight);
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
        subject: subject.clone(),
        triggers: triggers.clone(),
    });
    let span = sync_span(&name, &subject, &triggers);
    let start = Instant::now();
    let out = r.sync(&key, &triggers).instrument(span.clone()).await;
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
            let confirm = needs_confirming(&out, r.confirm_writes(), r.confirm_status_writes());
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
    record_outcome(&span, &out, retry_in);
    bus.publish(EngineEvent::SyncFinished {
        controller: name,
        subject,
        duration: start.elapsed(),
        writes: out.writes,
        error: out.error.as_ref().map(ToString::to_string),
        error_layer: out.error.as_ref().map(SyncError::layer),
        retry_in,
    });
    q.done(key);
}

/// The span of one sync ([`crate::trace`]): disabled (and free) unless the program exports
/// the engine's spans.
fn sync_span(controller: &str, subject: &EventSubject, triggers: &[Trigger]) -> tracing::Span {
    let span = tracing::info_span!(
        target: crate::trace::TARGET,
        "sync",
        otel.name = tracing::field::Empty,
        controller = controller,
        parent = subject.parent.as_str(),
        map_key = tracing::field::Empty,
        status_only = subject.status_only,
        triggers = tracing::field::Empty,
        plan.objects = tracing::field::Empty,
        plan.create = tracing::field::Empty,
        plan.update = tracing::field::Empty,
        plan.delete = tracing::field::Empty,
        plan.writes = tracing::field::Empty,
        writes = tracing::field::Empty,
        noops = tracing::field::Empty,
        hot_loops = tracing::field::Empty,
        result = tracing::field::Empty,
        error = tracing::field::Empty,
        error.layer = tracing::field::Empty,
        retry_in_seconds = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record(
            "otel.name",
            format!("sync {controller} {}", subject.parent).as_str(),
        );
        if let Some(k) = &subject.map_key {
            span.record("map_key", k.as_str());
        }
        let all: Vec<String> = triggers.iter().map(ToString::to_string).collect();
        span.record("triggers", all.join("; ").as_str());
    }
    span
}

/// Fill the sync span with how the sync ended.
fn record_outcome(span: &tracing::Span, out: &SyncOutcome, retry_in: Option<f64>) {
    if span.is_disabled() {
        return;
    }
    span.record("writes", out.writes as u64);
    span.record("noops", out.noops as u64);
    span.record("hot_loops", out.hot_loops.len() as u64);
    match &out.error {
        None => {
            span.record("result", "ok");
        }
        Some(e) => {
            span.record("result", "error");
            span.record("error", e.to_string().as_str());
            span.record("error.layer", format!("{:?}", e.layer()).as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
    if let Some(r) = retry_in {
        span.record("retry_in_seconds", r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(writes: usize, status_writes: usize, noops: usize) -> SyncOutcome {
        SyncOutcome {
            writes,
            status_writes,
            noops,
            ..SyncOutcome::default()
        }
    }

    #[test]
    fn only_child_writes_are_confirmed_by_default() {
        // Children created (and the status): the hook must see them.
        assert!(needs_confirming(&out(4, 1, 0), true, false));
        // A child update the server answered as a no-op: the hot-loop guard must see it again.
        assert!(needs_confirming(&out(0, 0, 1), true, false));
        // Only the status: its echo is ours, nothing else changed.
        assert!(!needs_confirming(&out(1, 1, 0), true, false));
        assert!(!needs_confirming(&out(0, 0, 0), true, false));
        // Metacontroller's behaviour (dryrun --simulate): the status write is confirmed too.
        assert!(needs_confirming(&out(1, 1, 0), true, true));
        // A kind that does not confirm (MapController).
        assert!(!needs_confirming(&out(4, 1, 1), false, true));
    }
}
