//! The controller work queue: which keys need a sync, when, and why.
//!
//! The equivalent of client-go's rate-limited delaying work queue, generic over the key (a parent
//! for CompositeController, a parent plus a map key for MapController) and over the "trigger"
//! (why the key was queued; triggers are coalesced and handed to the worker with the key).
//!
//! Guarantees:
//! - a key is ready at most once (duplicates coalesce, their triggers merge);
//! - a key is never handed to two workers at once: adding a key that is in flight marks it
//!   dirty, and [`WorkQueue::done`] puts it back at the tail of the ready list;
//! - ready keys are handed out first in, first out;
//! - scheduled keys (delays, backoff, 429 Retry-After) cost O(log n) per operation; no task or
//!   timer per key, no polling: waiters in [`WorkQueue::next`] sleep until the earliest due time
//!   or until something changes.
//!
//! Time is [`tokio::time::Instant`], so tests can pause and advance it.
//!
//! Every queue also adds its figures to the process-wide [`depth`] (a few atomics updated where
//! the figures are published), so a display (the TUI's status bar) reads the depth of all the
//! controllers' queues at render time without a lock, a channel or a task.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// Most triggers kept per key; when more arrive, the oldest are dropped.
pub(crate) const MAX_TRIGGERS: usize = 16;
/// Shortest delay [`WorkQueue::add_retry_after`] honours (so `Retry-After: 0` never hot-loops).
const RETRY_AFTER_MIN: Duration = Duration::from_millis(50);
/// Longest delay [`WorkQueue::add_retry_after`] honours.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(600);
/// Longest delay any schedule honours (keeps `Instant` arithmetic far from overflow).
const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Per-key exponential backoff for failed syncs: `base * 2^(failures-1)`, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay, however many failures.
    pub max: Duration,
}

impl Default for Backoff {
    /// 500 ms doubling up to 120 s.
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(120),
        }
    }
}

impl Backoff {
    /// The delay before retrying a key that has failed `failures` times in a row (0 counts as 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1);
        let delay = if exponent >= 32 {
            self.max
        } else {
            self.base.saturating_mul(1u32 << exponent)
        };
        delay.min(self.max)
    }
}

/// A snapshot of the queue's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Keys ready to be handed to a worker now.
    pub ready: usize,
    /// Keys a worker is syncing (including those re-added meanwhile, which run again after).
    pub in_flight: usize,
    /// Keys scheduled for later (delays, backoff, Retry-After).
    pub scheduled: usize,
    /// Time from the snapshot until the earliest scheduled key is due.
    pub next_due: Option<Duration>,
}

/// The upper bounds (seconds) of the workqueue duration histograms, as client-go's and
/// controller-runtime's workqueue metrics have them: 10 ns times powers of ten, up to 1,000 s
/// (Prometheus' `ExponentialBuckets(10e-9, 10, 12)`).
pub const WORKQUEUE_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
];

/// Durations counted into [`WORKQUEUE_BUCKETS`] (per bucket, not cumulative), their sum and
/// count.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DurationHistogram {
    /// Observations at or below each bound of [`WORKQUEUE_BUCKETS`] and above the previous.
    pub counts: [u64; WORKQUEUE_BUCKETS.len()],
    /// Sum of the observations, in seconds.
    pub sum: f64,
    /// Number of observations (including those above the last bound).
    pub count: u64,
}

impl DurationHistogram {
    /// Count one duration.
    pub fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        if let Some(i) = WORKQUEUE_BUCKETS.iter().position(|b| v <= *b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}

/// A queue's figures as client-go's workqueue metrics have them (what controller-runtime
/// exports as `workqueue_*`), since the queue was made.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueMetrics {
    /// Keys waiting for a worker: ready, or re-added while in flight (`workqueue_depth`).
    pub depth: usize,
    /// Keys that entered the queue (a key already waiting is not counted again; a delayed
    /// key counts when it is due) (`workqueue_adds_total`).
    pub adds: u64,
    /// Failed keys scheduled again with backoff (`workqueue_retries_total`).
    pub retries: u64,
    /// From entering the queue to being handed to a worker (`workqueue_queue_duration_seconds`).
    pub queue_duration: DurationHistogram,
    /// From being handed to a worker to done (`workqueue_work_duration_seconds`).
    pub work_duration: DurationHistogram,
    /// The time the keys now in flight have run so far, added up
    /// (`workqueue_unfinished_work_seconds`).
    pub unfinished_work: Duration,
    /// The longest a key now in flight has run (`workqueue_longest_running_processor_seconds`).
    pub longest_running: Duration,
    /// Keys in flight now (controller-runtime's `active_workers`).
    pub in_flight: usize,
}

/// The figures of every live queue of the process added up: ready, in flight, scheduled.
static DEPTH: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The work queues of this process together, now (three atomic loads; cheap enough to call
/// per frame). `next_due` is not kept. A `dev` process runs one engine, so this is its depth.
pub fn depth() -> QueueStats {
    QueueStats {
        ready: DEPTH[0].load(Ordering::Relaxed),
        in_flight: DEPTH[1].load(Ordering::Relaxed),
        scheduled: DEPTH[2].load(Ordering::Relaxed),
        next_due: None,
    }
}

/// Move the process-wide [`depth`] from a queue's figures `old` to `new`.
fn account(old: &QueueStats, new: &QueueStats) {
    for (i, (o, n)) in [
        (old.ready, new.ready),
        (old.in_flight, new.in_flight),
        (old.scheduled, new.scheduled),
    ]
    .into_iter()
    .enumerate()
    {
        if n > o {
            DEPTH[i].fetch_add(n - o, Ordering::Relaxed);
        } else if o > n {
            DEPTH[i].fetch_sub(o - n, Ordering::Relaxed);
        }
    }
}

/// Where a key stands, apart from being in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Nothing to do.
    Idle,
    /// In the ready list under this sequence number (never while in flight).
    Ready(u64),
    /// In flight and re-added: becomes ready when the worker is done.
    Dirty,
    /// Scheduled for this time (sequence number breaks ties).
    Scheduled(Instant, u64),
}

#[derive(Debug)]
struct Entry<T> {
    pending: Pending,
    /// Why the key was queued, oldest first, without duplicates.
    triggers: Vec<T>,
    in_flight: bool,
    failures: u32,
    /// When the key entered the queue (ready or dirty), until a worker takes it.
    queued_at: Option<Instant>,
    /// When a worker took it (and a tie-breaker), while in flight.
    started: Option<(Instant, u64)>,
}

impl<T> Default for Entry<T> {
    fn default() -> Self {
        Entry {
            pending: Pending::Idle,
            triggers: Vec::new(),
            in_flight: false,
            failures: 0,
            queued_at: None,
            started: None,
        }
    }
}

impl<T: PartialEq> Entry<T> {
    fn merge(&mut self, trigger: T) {
        if self.triggers.contains(&trigger) {
            return;
        }
        if self.triggers.len() >= MAX_TRIGGERS {
            self.triggers.remove(0);
        }
        self.triggers.push(trigger);
    }
}

impl<T> Entry<T> {
    /// Nothing pending, nothing running, no failure to remember.
    fn is_empty(&self) -> bool {
        self.pending == Pending::Idle && !self.in_flight && self.failures == 0
    }
}

#[derive(Debug)]
struct State<K, T> {
    entries: HashMap<K, Entry<T>>,
    /// Ready keys by sequence number: FIFO order.
    ready: BTreeMap<u64, K>,
    /// Scheduled keys by due time.
    scheduled: BTreeMap<(Instant, u64), K>,
    seq: u64,
    in_flight: usize,
    shutdown: bool,
    /// Keys in flight and re-added (dirty).
    dirty: usize,
    /// The in-flight keys' start times, for the unfinished-work figures (as many as workers).
    running: std::collections::BTreeSet<(Instant, u64)>,
    /// The workqueue metrics' counters and histograms.
    metrics: QueueMetrics,
}

impl<K: Clone + Eq + Hash, T> State<K, T> {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Make `key` (which has an entry) ready now. Returns true if it entered the ready list.
    /// `fresh`: the key enters the queue now (counted as an add); false for a dirty key
    /// moving to the ready list when its worker is done (it was counted when re-added).
    fn set_ready(&mut self, key: &K, fresh: bool) -> bool {
        let seq = self.next_seq();
        let Some(entry) = self.entries.get_mut(key) else {
            return false;
        };
        match entry.pending {
            Pending::Ready(_) | Pending::Dirty => return false,
            Pending::Scheduled(at, s) => {
                self.scheduled.remove(&(at, s));
            }
            Pending::Idle => {}
        }
        if fresh {
            self.metrics.adds += 1;
            entry.queued_at.get_or_insert_with(Instant::now);
        }
        if entry.in_flight {
            entry.pending = Pending::Dirty;
            self.dirty += 1;
            false
        } else {
            entry.pending = Pending::Ready(seq);
            self.ready.insert(seq, key.clone());
            true
        }
    }

    /// Schedule `key` (which has an entry) for `at`, unless it is ready, dirty or scheduled
    /// earlier. Returns true if the earliest due time of the queue moved earlier.
    fn schedule(&mut self, key: &K, at: Instant) -> bool {
        let earliest = self.next_due();
        let seq = self.next_seq();
        let Some(entry) = self.entries.get_mut(key) else {
            return false;
        };
        match entry.pending {
            Pending::Ready(_) | Pending::Dirty => return false,
            Pending::Scheduled(old, _) if old <= at => return false,
            Pending::Scheduled(old, s) => {
                self.scheduled.remove(&(old, s));
            }
            Pending::Idle => {}
        }
        entry.pending = Pending::Scheduled(at, seq);
        self.scheduled.insert((at, seq), key.clone());
        earliest.is_none_or(|t| at < t)
    }

    /// Move every scheduled key due at `now` to ready (or dirty if in flight). Returns how many
    /// keys moved.
    fn promote_due(&mut self, now: Instant) -> usize {
        let mut moved = 0;
        while let Some(first) = self.scheduled.first_entry() {
            if first.key().0 > now {
                break;
            }
            let key = first.remove();
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.pending = Pending::Idle;
            }
            self.set_ready(&key, true);
            moved += 1;
        }
        moved
    }

    /// Hand the first ready key to a worker.
    fn take_next(&mut self, now: Instant) -> Option<(K, Vec<T>)> {
        let (seq, key) = self.ready.pop_first()?;
        let entry = self.entries.get_mut(&key)?;
        entry.pending = Pending::Idle;
        entry.in_flight = true;
        if let Some(at) = entry.queued_at.take() {
            self.metrics
                .queue_duration
                .observe(now.saturating_duration_since(at));
        }
        entry.started = Some((now, seq));
        self.running.insert((now, seq));
        self.in_flight += 1;
        let triggers = std::mem::take(&mut entry.triggers);
        Some((key, triggers))
    }

    /// Drop the entry of `key` if it holds nothing worth keeping.
    fn cleanup(&mut self, key: &K) {
        if self.entries.get(key).is_some_and(|e| e.is_empty()) {
            self.entries.remove(key);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.scheduled.first_key_value().map(|((at, _), _)| *at)
    }

    fn metrics(&self, now: Instant) -> QueueMetrics {
        let mut m = self.metrics;
        m.depth = self.ready.len() + self.dirty;
        m.in_flight = self.in_flight;
        m.unfinished_work = self
            .running
            .iter()
            .map(|(at, _)| now.saturating_duration_since(*at))
            .sum();
        m.longest_running = self
            .running
            .first()
            .map(|(at, _)| now.saturating_duration_since(*at))
            .unwrap_or_default();
        m
    }

    fn stats(&self, now: Instant) -> QueueStats {
        QueueStats {
            ready: self.ready.len(),
            in_flight: self.in_flight,
            scheduled: self.scheduled.len(),
            next_due: self.next_due().map(|at| at.saturating_duration_since(now)),
        }
    }
}

#[derive(Debug)]
struct Inner<K, T> {
    state: Mutex<State<K, T>>,
    /// Wakes workers waiting in `next()`.
    notify: Notify,
    stats: watch::Sender<QueueStats>,
    backoff: Backoff,
}

impl<K, T> Drop for Inner<K, T> {
    /// A dropped queue no longer counts in the process-wide [`depth`].
    fn drop(&mut self) {
        let last = *self.stats.borrow();
        account(&last, &QueueStats::default());
    }
}

/// The work queue of one controller. Cloning shares the queue.
///
/// `K` is the key (what to sync), `T` a trigger (why). See the module documentation for the
/// guarantees.
#[derive(Debug)]
pub struct WorkQueue<K, T> {
    inner: Arc<Inner<K, T>>,
}

impl<K, T> Clone for WorkQueue<K, T> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, T> WorkQueue<K, T>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    T: Clone + Eq + Send + Sync + 'static,
{
    /// An empty queue whose failed keys back off as `backoff` says.
    pub fn new(backoff: Backoff) -> Self {
        let (stats, _) = watch::channel(QueueStats::default());
        WorkQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    entries: HashMap::new(),
                    ready: BTreeMap::new(),
                    scheduled: BTreeMap::new(),
                    seq: 0,
                    in_flight: 0,
                    shutdown: false,
                    dirty: 0,
                    running: std::collections::BTreeSet::new(),
                    metrics: QueueMetrics::default(),
                }),
                notify: Notify::new(),
                stats,
                backoff,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K, T>> {
        // No code path panics while holding the lock, so a poisoned state is still consistent.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publish the current figures to subscribers (called with the lock held, so snapshots
    /// are published in order).
    fn publish(&self, state: &State<K, T>) {
        let stats = state.stats(Instant::now());
        self.inner.stats.send_if_modified(|current| {
            let changed = *current != stats;
            account(current, &stats);
            *current = stats;
            changed
        });
    }

    /// Queue `key` now (delay zero) or after `delay`, with `trigger`, and wake whoever needs it.
    fn enqueue(&self, mut state: MutexGuard<'_, State<K, T>>, key: K, trigger: T, delay: Duration) {
        if state.shutdown {
            return;
        }
        state.entries.entry(key.clone()).or_default().merge(trigger);
        if delay.is_zero() {
            let became_ready = state.set_ready(&key, true);
            self.publish(&state);
            drop(state);
            if became_ready {
                self.inner.notify.notify_one();
            }
        } else {
            let at = Instant::now() + delay.min(MAX_DELAY);
            let earlier = state.schedule(&key, at);
            self.publish(&state);
            drop(state);
            if earlier {
                // Waiters sleep until the previous earliest time: let them recompute.
                self.inner.notify.notify_waiters();
            }
        }
    }

    /// Make `key` ready now, with `trigger`.
    ///
    /// Already ready: the trigger is merged. Scheduled for later: promoted to now. In flight:
    /// marked dirty, so it is ready again (with the trigger) once [`done`](Self::done) is
    /// called. Ignored after [`shutdown`](Self::shutdown).
    pub fn add(&self, key: K, trigger: T) {
        self.enqueue(self.lock(), key, trigger, Duration::ZERO);
    }

    /// Make `key` ready after `delay`, with `trigger` (a zero delay is [`add`](Self::add)).
    ///
    /// Already scheduled: the earlier of both times wins. Ready, or dirty while in flight:
    /// the trigger is merged and the key stays ready. Delays are capped at one year.
    pub fn add_after(&self, key: K, trigger: T, delay: Duration) {
        self.enqueue(self.lock(), key, trigger, delay);
    }

    /// Count a failure for `key` and schedule it after the backoff delay; returns that delay.
    pub fn add_rate_limited(&self, key: K, trigger: T) -> Duration {
        let mut state = self.lock();
        let entry = state.entries.entry(key.clone()).or_default();
        entry.failures = entry.failures.saturating_add(1);
        let delay = self.inner.backoff.delay(entry.failures);
        state.metrics.retries += 1;
        self.enqueue(state, key, trigger, delay);
        delay
    }

    /// Schedule `key` after exactly `delay` (a 429 `Retry-After`), without counting a failure.
    ///
    /// The delay is clamped to [50 ms, 10 min] so that `Retry-After: 0` never hot-loops.
    pub fn add_retry_after(&self, key: K, trigger: T, delay: Duration) {
        let delay = delay.clamp(RETRY_AFTER_MIN, RETRY_AFTER_MAX);
        self.enqueue(self.lock(), key, trigger, delay);
    }

    /// Reset the failure count of `key` (its last sync succeeded).
    pub fn forget(&self, key: &K) {
        let mut state = self.lock();
        if let Some(entry) = state.entries.get_mut(key) {
            entry.failures = 0;
        }
        state.cleanup(key);
    }

    #[cfg(test)]
    /// How many times in a row `key` has failed.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().entries.get(key).map_or(0, |e| e.failures)
    }

    /// Wait for a ready key that no worker holds, mark it in flight, and return it with the
    /// triggers coalesced since it was last handed out (oldest first).
    ///
    /// Returns `None` once [`shutdown`](Self::shutdown) was called. Cancel-safe: dropping the
    /// future never loses a key.
    pub async fn next(&self) -> Option<(K, Vec<T>)> {
        loop {
            // Register for wake-ups before looking at the state, so none is missed.
            let mut notified = pin!(self.inner.notify.notified());
            notified.as_mut().enable();
            let due = {
                let mut state = self.lock();
                if state.shutdown {
                    return None;
                }
                let now = Instant::now();
                let promoted = state.promote_due(now);
                if let Some(item) = state.take_next(now) {
                    let more = !state.ready.is_empty();
                    self.publish(&state);
                    drop(state);
                    if more {
                        // Pass the baton: another waiting worker takes the next key.
                        self.inner.notify.notify_one();
                    }
                    return Some(item);
                }
                if promoted > 0 {
                    self.publish(&state);
                }
                state.next_due()
            };
            match due {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The worker is finished with `key`. If it was re-added meanwhile, it becomes ready again
    /// (at the tail). Calling it for a key that is not in flight does nothing.
    pub fn done(&self, key: K) {
        let mut state = self.lock();
        let Some(entry) = state.entries.get_mut(&key) else {
            return;
        };
        if !entry.in_flight {
            return;
        }
        entry.in_flight = false;
        let dirty = entry.pending == Pending::Dirty;
        if dirty {
            entry.pending = Pending::Idle;
        }
        let started = entry.started.take();
        state.in_flight -= 1;
        if dirty {
            state.dirty -= 1;
        }
        if let Some((at, seq)) = started {
            state.running.remove(&(at, seq));
            state
                .metrics
                .work_duration
                .observe(Instant::now().saturating_duration_since(at));
        }
        let became_ready = dirty && state.set_ready(&key, false);
        state.cleanup(&key);
        self.publish(&state);
        drop(state);
        if became_ready {
            self.inner.notify.notify_one();
        }
    }

    /// Forget `key` entirely (its parent was deleted): drop its ready, scheduled or dirty entry,
    /// its triggers and its failure count. A worker holding it still calls [`done`](Self::done).
    pub fn remove(&self, key: &K) {
        let mut state = self.lock();
        let Some(entry) = state.entries.get_mut(key) else {
            return;
        };
        let pending = std::mem::replace(&mut entry.pending, Pending::Idle);
        entry.triggers.clear();
        entry.failures = 0;
        if !entry.in_flight {
            entry.queued_at = None;
        }
        if pending == Pending::Dirty {
            entry.queued_at = None;
            state.dirty -= 1;
        }
        match pending {
            Pending::Ready(seq) => {
                state.ready.remove(&seq);
            }
            Pending::Scheduled(at, seq) => {
                state.scheduled.remove(&(at, seq));
            }
            Pending::Idle | Pending::Dirty => {}
        }
        state.cleanup(key);
        self.publish(&state);
    }

    /// The queue's workqueue metrics now (client-go's figures; see [`QueueMetrics`]).
    pub fn metrics(&self) -> QueueMetrics {
        self.lock().metrics(Instant::now())
    }

    /// The queue's figures now (scheduled keys that are due count as ready).
    pub fn stats(&self) -> QueueStats {
        let mut state = self.lock();
        let now = Instant::now();
        let promoted = state.promote_due(now) > 0;
        if promoted {
            self.publish(&state);
        }
        let stats = state.stats(now);
        drop(state);
        if promoted && stats.ready > 0 {
            self.inner.notify.notify_one();
        }
        stats
    }

    #[cfg(test)]
    /// A receiver of the queue's figures, updated on every change.
    ///
    /// `next_due` is relative to the moment the snapshot was published. Copy the value out of
    /// `borrow()` rather than holding the borrow while calling the queue.
    pub fn subscribe(&self) -> watch::Receiver<QueueStats> {
        self.inner.stats.subscribe()
    }

    #[cfg(test)]
    /// The scheduled keys and the time until each is due, earliest first (for display).
    pub fn scheduled_keys(&self) -> Vec<(K, Duration)> {
        let state = self.lock();
        let now = Instant::now();
        state
            .scheduled
            .iter()
            .map(|((at, _), key)| (key.clone(), at.saturating_duration_since(now)))
            .collect()
    }

    #[cfg(test)]
    /// Stop handing out keys: every [`next`](Self::next) returns `None` from now on (waiting
    /// ones at once) and new additions are ignored. Keys in flight can still be marked done.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.inner.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    type Queue = WorkQueue<u32, &'static str>;

    const WAIT: Duration = Duration::from_secs(30);

    fn queue() -> Queue {
        WorkQueue::new(Backoff::default())
    }

    /// `next()` with a timeout; with paused time the runtime jumps to the timeout when idle.
    async fn try_next(q: &Queue, within: Duration) -> Option<(u32, Vec<&'static str>)> {
        tokio::time::timeout(within, q.next()).await.ok().flatten()
    }

    async fn must_next(q: &Queue) -> (u32, Vec<&'static str>) {
        match tokio::time::timeout(WAIT, q.next()).await {
            Ok(Some(item)) => item,
            other => panic!("expected a key from next(), got {other:?}"),
        }
    }

    fn stats(
        ready: usize,
        in_flight: usize,
        scheduled: usize,
        next_due: Option<u64>,
    ) -> QueueStats {
        QueueStats {
            ready,
            in_flight,
            scheduled,
            next_due: next_due.map(Duration::from_millis),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn workqueue_metrics_count_adds_waits_work_and_retries_as_client_go() {
        let q = queue();
        q.add(1, "a");
        q.add(1, "b"); // already waiting: not another add
        assert_eq!((q.metrics().adds, q.metrics().depth), (1, 1));
        tokio::time::advance(Duration::from_secs(2)).await;
        let (k, _) = must_next(&q).await;
        let m = q.metrics();
        assert_eq!((m.depth, m.in_flight), (0, 1));
        assert_eq!(m.queue_duration.count, 1);
        assert!((m.queue_duration.sum - 2.0).abs() < 0.01, "{m:?}");
        // 2 s falls in the (1, 10] bucket.
        assert_eq!(m.queue_duration.counts[9], 1);
        tokio::time::advance(Duration::from_secs(3)).await;
        // Re-added while in flight: an add, waiting (depth 1) until done.
        q.add(k, "again");
        let m = q.metrics();
        assert_eq!((m.adds, m.depth), (2, 1));
        assert!(
            (m.unfinished_work.as_secs_f64() - 3.0).abs() < 0.01,
            "{m:?}"
        );
        assert_eq!(m.longest_running, m.unfinished_work);
        q.done(k);
        let m = q.metrics();
        assert_eq!((m.adds, m.depth, m.in_flight), (2, 1, 0));
        assert_eq!(m.work_duration.count, 1);
        assert!((m.work_duration.sum - 3.0).abs() < 0.01, "{m:?}");
        assert_eq!(m.unfinished_work, Duration::ZERO);
        let (k, _) = must_next(&q).await;
        q.done(k);
        // A failure: a retry, counted as an add only once it is due.
        q.add_rate_limited(k, "retry");
        let m = q.metrics();
        assert_eq!((m.retries, m.adds, m.depth), (1, 2, 0));
        let (k, _) = must_next(&q).await;
        let m = q.metrics();
        assert_eq!((m.adds, m.queue_duration.count), (3, 3));
        q.done(k);
    }

    #[tokio::test(start_paused = true)]
    async fn duplicates_coalesce_and_triggers_merge_in_order() {
        let q = queue();
        q.add(1, "a");
        q.add(1, "b");
        q.add(1, "a");
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        assert_eq!(must_next(&q).await, (1, vec!["a", "b"]));
        assert_eq!(try_next(&q, Duration::from_secs(1)).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_sixteen_triggers_are_kept_newest_win() {
        let q: WorkQueue<u32, u32> = WorkQueue::new(Backoff::default());
        for t in 0..20 {
            q.add(7, t);
        }
        let (key, triggers) = q.next().await.unwrap();
        assert_eq!(key, 7);
        assert_eq!(triggers, (4..20).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_key_is_not_handed_out_and_requeues_on_done() {
        let q = queue();
        q.add(1, "a");
        assert_eq!(must_next(&q).await, (1, vec!["a"]));
        q.add(1, "b");
        q.add(1, "c");
        assert_eq!(q.stats(), stats(0, 1, 0, None));
        assert_eq!(try_next(&q, Duration::from_secs(5)).await, None);
        q.done(1);
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        assert_eq!(must_next(&q).await, (1, vec!["b", "c"]));
        q.done(1);
        assert_eq!(q.stats(), stats(0, 0, 0, None));
        // done for a key that is not in flight is a no-op.
        q.done(1);
        q.done(99);
        assert_eq!(q.stats(), stats(0, 0, 0, None));
    }

    #[tokio::test(start_paused = true)]
    async fn done_without_readd_leaves_nothing() {
        let q = queue();
        q.add(1, "a");
        must_next(&q).await;
        q.done(1);
        assert_eq!(try_next(&q, Duration::from_secs(5)).await, None);
        assert!(q.lock().entries.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_two_workers_on_one_key() {
        const KEYS: u32 = 20;
        const ROUNDS: usize = 300;
        let q: WorkQueue<u32, usize> = WorkQueue::new(Backoff::default());
        let holding = Arc::new(Mutex::new(HashSet::new()));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let syncs = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..6 {
            let (q, holding, overlaps, syncs) =
                (q.clone(), holding.clone(), overlaps.clone(), syncs.clone());
            workers.push(tokio::spawn(async move {
                while let Some((key, _)) = q.next().await {
                    if !holding.lock().unwrap().insert(key) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    holding.lock().unwrap().remove(&key);
                    syncs.fetch_add(1, Ordering::SeqCst);
                    q.done(key);
                }
            }));
        }
        let mut adders = Vec::new();
        for a in 0..3 {
            let q = q.clone();
            adders.push(tokio::spawn(async move {
                for round in 0..ROUNDS {
                    for key in 0..KEYS {
                        q.add(key, a * ROUNDS + round);
                    }
                    tokio::task::yield_now().await;
                }
            }));
        }
        for a in adders {
            a.await.unwrap();
        }
        let mut rx = q.subscribe();
        let drained = tokio::time::timeout(
            WAIT,
            rx.wait_for(|s| s.ready == 0 && s.in_flight == 0 && s.scheduled == 0),
        )
        .await;
        assert!(drained.is_ok(), "queue did not drain: {:?}", q.stats());
        q.shutdown();
        for w in workers {
            tokio::time::timeout(WAIT, w).await.unwrap().unwrap();
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        let n = syncs.load(Ordering::SeqCst);
        assert!(
            n >= KEYS as usize,
            "every key synced at least once, got {n} syncs"
        );
        assert!(
            n <= 3 * ROUNDS * KEYS as usize,
            "coalescing cannot add syncs, got {n}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fifo_order_and_requeue_goes_to_tail() {
        let q = queue();
        for k in [3, 1, 2] {
            q.add(k, "x");
        }
        q.add(3, "y"); // merges, keeps its place
        assert_eq!(must_next(&q).await, (3, vec!["x", "y"]));
        q.add(3, "z"); // dirty while in flight
        q.add(4, "x");
        q.done(3); // back at the tail, after 4
        let mut order = Vec::new();
        for _ in 0..4 {
            let (k, _) = must_next(&q).await;
            order.push(k);
            q.done(k);
        }
        assert_eq!(order, vec![1, 2, 4, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn add_promotes_a_scheduled_key() {
        let q = queue();
        q.add_after(1, "later", Duration::from_secs(10));
        assert_eq!(q.stats(), stats(0, 0, 1, Some(10_000)));
        q.add(1, "now");
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        let start = Instant::now();
        assert_eq!(must_next(&q).await, (1, vec!["later", "now"]));
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(q.scheduled_keys().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_the_earlier_time() {
        let q = queue();
        let start = Instant::now();
        q.add_after(1, "a", Duration::from_secs(10));
        q.add_after(1, "b", Duration::from_secs(5));
        q.add_after(1, "c", Duration::from_secs(20));
        assert_eq!(q.stats(), stats(0, 0, 1, Some(5_000)));
        assert_eq!(q.scheduled_keys(), vec![(1, Duration::from_secs(5))]);
        assert_eq!(try_next(&q, Duration::from_millis(4_999)).await, None);
        assert_eq!(must_next(&q).await, (1, vec!["a", "b", "c"]));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(q.stats(), stats(0, 1, 0, None));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_zero_is_add_and_ready_key_stays_ready() {
        let q = queue();
        q.add_after(1, "a", Duration::ZERO);
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        q.add_after(1, "b", Duration::from_secs(60));
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        assert_eq!(must_next(&q).await, (1, vec!["a", "b"]));
        // Dirty while in flight: add_after only merges.
        q.add(1, "c");
        q.add_after(1, "d", Duration::from_secs(60));
        assert_eq!(q.stats(), stats(0, 1, 0, None));
        q.done(1);
        assert_eq!(must_next(&q).await, (1, vec!["c", "d"]));
    }

    #[tokio::test(start_paused = true)]
    async fn scheduled_while_in_flight_waits_for_done() {
        let q = queue();
        q.add(1, "a");
        must_next(&q).await;
        q.add_after(1, "retry", Duration::from_secs(1));
        assert_eq!(q.stats(), stats(0, 1, 1, Some(1_000)));
        tokio::time::advance(Duration::from_secs(2)).await;
        // Due, but in flight: dirty, not ready.
        assert_eq!(q.stats(), stats(0, 1, 0, None));
        assert_eq!(try_next(&q, Duration::from_secs(5)).await, None);
        q.done(1);
        assert_eq!(must_next(&q).await, (1, vec!["retry"]));
    }

    #[tokio::test(start_paused = true)]
    async fn done_keeps_a_later_schedule() {
        let q = queue();
        q.add(1, "a");
        must_next(&q).await;
        q.add_after(1, "resync", Duration::from_secs(30));
        q.done(1);
        assert_eq!(q.stats(), stats(0, 0, 1, Some(30_000)));
        let start = Instant::now();
        assert_eq!(must_next(&q).await, (1, vec!["resync"]));
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn waiter_wakes_for_an_earlier_schedule() {
        let q = queue();
        let start = Instant::now();
        q.add_after(1, "late", Duration::from_secs(100));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await; // the waiter now sleeps until t+100s
        q.add_after(2, "early", Duration::from_secs(1));
        let got = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
        assert_eq!(got, Some((2, vec!["early"])));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn waiter_wakes_on_add() {
        let q = queue();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.add(5, "x");
        let got = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
        assert_eq!(got, Some((5, vec!["x"])));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff::default();
        assert_eq!(b.base, Duration::from_millis(500));
        assert_eq!(b.max, Duration::from_secs(120));
        assert_eq!(b.delay(1), Duration::from_millis(500));
        assert_eq!(b.delay(2), Duration::from_secs(1));
        assert_eq!(b.delay(8), Duration::from_secs(64));
        assert_eq!(b.delay(9), Duration::from_secs(120));
        assert_eq!(b.delay(40), Duration::from_secs(120));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(120));
        assert_eq!(b.delay(0), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_counts_failures_and_forget_resets() {
        let q: Queue = WorkQueue::new(Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        });
        let mut delays = Vec::new();
        for _ in 0..6 {
            let start = Instant::now();
            let delay = q.add_rate_limited(1, "retry");
            assert_eq!(q.stats().next_due, Some(delay));
            assert_eq!(must_next(&q).await, (1, vec!["retry"]));
            assert_eq!(start.elapsed(), delay);
            q.done(1);
            delays.push(delay.as_millis());
        }
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(q.failures(&1), 6);
        assert_eq!(q.failures(&2), 0);
        q.forget(&1);
        assert_eq!(q.failures(&1), 0);
        assert_eq!(q.add_rate_limited(1, "retry"), Duration::from_millis(100));
        assert_eq!(q.failures(&1), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_survive_done_and_forget_cleans_up() {
        let q = queue();
        q.add(1, "a");
        must_next(&q).await;
        q.add_rate_limited(1, "retry");
        q.done(1);
        assert_eq!(q.failures(&1), 1);
        must_next(&q).await;
        q.done(1);
        assert_eq!(q.failures(&1), 1);
        q.forget(&1);
        assert!(q.lock().entries.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_clamped_and_not_a_failure() {
        let q = queue();
        q.add_retry_after(1, "429", Duration::ZERO);
        q.add_retry_after(2, "429", Duration::from_secs(3600));
        q.add_retry_after(3, "429", Duration::from_secs(7));
        assert_eq!(
            q.scheduled_keys(),
            vec![
                (1, Duration::from_millis(50)),
                (3, Duration::from_secs(7)),
                (2, Duration::from_secs(600)),
            ]
        );
        assert_eq!(q.failures(&1), 0);
        let start = Instant::now();
        assert_eq!(must_next(&q).await, (1, vec!["429"]));
        assert_eq!(start.elapsed(), Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn remove_drops_ready_scheduled_dirty_and_failures() {
        let q = queue();
        q.add(1, "a");
        q.add_rate_limited(2, "retry");
        q.add(3, "a");
        assert_eq!(q.stats(), stats(2, 0, 1, Some(500)));
        q.remove(&1);
        q.remove(&2);
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        assert_eq!(q.failures(&2), 0);
        assert_eq!(must_next(&q).await, (3, vec!["a"]));
        q.add(3, "b"); // dirty
        q.remove(&3);
        assert_eq!(q.stats(), stats(0, 1, 0, None));
        q.done(3);
        assert_eq!(q.stats(), stats(0, 0, 0, None));
        assert_eq!(try_next(&q, Duration::from_secs(10)).await, None);
        q.remove(&42); // unknown key: no-op
        assert!(q.lock().entries.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_waiters_and_lets_in_flight_finish() {
        let q = queue();
        q.add(1, "a");
        must_next(&q).await;
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.next().await })
            })
            .collect();
        tokio::task::yield_now().await;
        q.add_after(2, "later", Duration::from_secs(3600));
        q.shutdown();
        let start = Instant::now();
        for w in waiters {
            assert_eq!(tokio::time::timeout(WAIT, w).await.unwrap().unwrap(), None);
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(q.next().await, None);
        q.add(9, "ignored");
        assert_eq!(q.stats(), stats(0, 1, 1, Some(3_600_000)));
        q.done(1);
        assert_eq!(q.stats().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn subscribe_sees_every_step() {
        let q = queue();
        let mut rx = q.subscribe();
        assert_eq!(*rx.borrow_and_update(), stats(0, 0, 0, None));
        q.add(1, "a");
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), stats(1, 0, 0, None));
        q.add(1, "b"); // no change in figures: no notification
        assert!(!rx.has_changed().unwrap());
        q.add_after(2, "x", Duration::from_secs(2));
        assert_eq!(*rx.borrow_and_update(), stats(1, 0, 1, Some(2_000)));
        must_next(&q).await;
        assert_eq!(*rx.borrow_and_update(), stats(0, 1, 1, Some(2_000)));
        q.add(1, "c");
        q.done(1);
        assert_eq!(*rx.borrow_and_update(), stats(1, 0, 1, Some(2_000)));
        must_next(&q).await;
        q.done(1);
        assert_eq!(*rx.borrow_and_update(), stats(0, 0, 1, Some(2_000)));
        let (k, _) = must_next(&q).await; // waits for key 2 to come due
        assert_eq!(k, 2);
        assert_eq!(*rx.borrow_and_update(), stats(0, 1, 0, None));
        q.done(2);
        assert_eq!(*rx.borrow_and_update(), stats(0, 0, 0, None));
        q.add(3, "z");
        q.remove(&3);
        assert_eq!(*rx.borrow_and_update(), stats(0, 0, 0, None));
    }

    #[tokio::test(start_paused = true)]
    async fn stats_counts_due_keys_as_ready() {
        let q = queue();
        q.add_after(1, "a", Duration::from_secs(1));
        let mut rx = q.subscribe();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(q.stats(), stats(1, 0, 0, None));
        assert_eq!(*rx.borrow_and_update(), stats(1, 0, 0, None));
    }

    #[tokio::test(start_paused = true)]
    async fn hundred_thousand_keys_add_and_drain() {
        const N: u32 = 100_000;
        let q: WorkQueue<u32, u32> = WorkQueue::new(Backoff::default());
        for k in 0..N {
            q.add(k, 0);
            q.add(k, 1);
        }
        // Scheduled keys in reverse due order.
        for k in N..2 * N {
            q.add_after(k, 2, Duration::from_millis(u64::from(2 * N - k)));
        }
        assert_eq!(q.stats().ready, N as usize);
        assert_eq!(q.stats().scheduled, N as usize);
        let mut seen = 0u32;
        for expected in 0..N {
            let (k, triggers) = q.next().await.unwrap();
            assert_eq!((k, triggers.len()), (expected, 2));
            q.done(k);
            seen += 1;
        }
        tokio::time::advance(Duration::from_millis(u64::from(N))).await;
        let mut last = 2 * N;
        for _ in 0..N {
            let (k, _) = q.next().await.unwrap();
            assert!(k < last, "due order: {k} after {last}");
            last = k;
            q.done(k);
            seen += 1;
        }
        assert_eq!(seen, 2 * N);
        assert_eq!(q.stats(), stats(0, 0, 0, None));
        assert!(q.lock().entries.is_empty());
    }

    /// Every queue adds its figures to the process-wide depth and takes them back when it is
    /// dropped. Other tests' queues run meanwhile, so the figures are compared with a margin
    /// far larger than any of them queues.
    #[tokio::test]
    async fn depth_adds_every_queue_up_and_forgets_dropped_ones() {
        const N: u32 = 100_000;
        let q: Queue = WorkQueue::new(Backoff::default());
        for k in 0..N {
            q.add_after(k, "later", Duration::from_secs(3600));
        }
        q.add(N, "now");
        let d = depth();
        assert!(d.scheduled >= N as usize && d.ready >= 1, "{d:?}");
        let (k, _) = q.next().await.expect("a key");
        assert_eq!(k, N);
        assert!(depth().in_flight >= 1);
        q.done(k);
        drop(q);
        assert!(depth().scheduled < N as usize, "{:?}", depth());
    }
}
