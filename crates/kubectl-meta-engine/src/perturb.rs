//! Perturbation: deterministic faults injected into the engine's view and actions, from a
//! seed, to find the controller bugs that only show when the world is seen late, twice, out of
//! order or after a crash (issue 38, `kubectl meta test --perturb`).
//!
//! A [`Perturbation`] is set through [`crate::EngineOptions::perturb`]; with none set every
//! injection point is one `Option` check. The points, per [`Class`]:
//! - the informers' watch loop (`k8s::informer`): [`Class::StaleRead`] holds an event of one
//!   resource back until `amount` later events of that resource arrived (or [`HOLD_MAX`]),
//!   with the others current; [`Class::MissedState`] coalesces the events of a window, keeping
//!   the last state of each object (intermediate states are never seen); [`Class::Reorder`]
//!   delivers the events of a window with the objects in another order (each object's own
//!   events keep theirs).
//! - the hook call (`runtime::context::call_hook`): [`Class::HookTimeout`] sends the call and
//!   loses the answer (the hook ran, the engine saw a timeout); [`Class::HookRestart`] asks the
//!   environment to restart the hook server first; [`Class::Reorder`] shuffles the keys of the
//!   request's observed maps (`children`, `related`, `attachments`, ...).
//! - the writes of one sync (`runtime::execute`): [`Class::Restart`] stops at the second write
//!   of a sync, asks the environment to kill the engine and start a fresh one, and never goes
//!   on; [`Class::Conflict`] arms a one-shot 409 for the first write of a sync and
//!   [`Class::Throttle`] a storm of 429s, both through [`Perturbation::arm`] (real HTTP
//!   answers of the API server, e.g. the in-process sandbox's fault rules).
//!
//! Which occurrence fires is the [`Schedule`]: each class counts its occurrences (events, hook
//! calls, syncs that write) from 0 across engine restarts, and fires at the ordinals in
//! [`Schedule::points`]. [`Schedule::from_seed`] draws them; a caller shrinks a schedule by
//! removing points and lowering `amount`.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

/// The longest an informer event is held back or a window stays open.
pub const HOLD_MAX: Duration = Duration::from_millis(400);

/// A kind of perturbation (the names `--perturb` takes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// The view of one resource lags the server by some events.
    StaleRead,
    /// Intermediate states are never seen (events coalesced).
    MissedState,
    /// The engine is killed between two writes of one sync and started again.
    Restart,
    /// The first write of a sync gets 409 Conflict.
    Conflict,
    /// 429 storms.
    Throttle,
    /// One hook call times out (after the hook ran).
    HookTimeout,
    /// The hook server restarts.
    HookRestart,
    /// Objects in the hook's observed maps and events across objects come in another order.
    Reorder,
}

impl Class {
    /// Every class, in the order they run.
    pub const ALL: [Class; 8] = [
        Class::StaleRead,
        Class::MissedState,
        Class::Restart,
        Class::Conflict,
        Class::Throttle,
        Class::HookTimeout,
        Class::HookRestart,
        Class::Reorder,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Class::StaleRead => "stale-read",
            Class::MissedState => "missed-state",
            Class::Restart => "restart",
            Class::Conflict => "conflict",
            Class::Throttle => "throttle",
            Class::HookTimeout => "hook-timeout",
            Class::HookRestart => "hook-restart",
            Class::Reorder => "reorder",
        }
    }

    /// The class of a name (`None`: unknown).
    pub fn parse(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Every name, comma-separated (for error messages).
    pub fn names() -> String {
        Class::ALL.map(Class::name).join(", ")
    }

    /// (number of points, ordinals drawn from 0..horizon, amount range) of a drawn schedule.
    fn shape(self) -> (usize, u32, (u32, u32)) {
        match self {
            Class::StaleRead => (3, 24, (1, 3)),
            Class::MissedState => (3, 24, (2, 4)),
            Class::Restart => (2, 6, (1, 1)),
            Class::Conflict => (3, 8, (1, 1)),
            Class::Throttle => (2, 8, (2, 5)),
            Class::HookTimeout => (2, 8, (1, 1)),
            Class::HookRestart => (2, 8, (1, 1)),
            Class::Reorder => (5, 16, (2, 4)),
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where and how much one class fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The class.
    pub class: Class,
    /// The seed it was drawn from (also seeds the shuffles of `reorder`).
    pub seed: u64,
    /// The ordinals of the occurrences that fire (events for the informer classes, hook calls
    /// for the hook classes and the observed maps of `reorder`, syncs that write for the write
    /// classes).
    pub points: BTreeSet<u32>,
    /// How much: events held back (`stale-read`), window length in events (`missed-state`,
    /// `reorder`), 429 answers per storm (`throttle`).
    pub amount: u32,
}

impl Schedule {
    /// The schedule of `class` drawn from `seed` (the same seed, the same schedule).
    pub fn from_seed(class: Class, seed: u64) -> Schedule {
        let mut rng = SplitMix(seed ^ (class as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (n, horizon, (lo, hi)) = class.shape();
        let mut points = BTreeSet::new();
        while points.len() < n {
            points.insert((rng.next_u64() % u64::from(horizon)) as u32);
        }
        let amount = lo + (rng.next_u64() % u64::from(hi - lo + 1)) as u32;
        Schedule {
            class,
            seed,
            points,
            amount,
        }
    }

    /// Whether occurrence `n` fires.
    pub fn fires(&self, n: u32) -> bool {
        self.points.contains(&n)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.class {
            Class::StaleRead => "informer events held back",
            Class::MissedState => "informer events opening a coalescing window",
            Class::Reorder => "events/hook calls reordered",
            Class::Restart => "syncs killed before their second write",
            Class::Conflict => "syncs whose first write gets 409",
            Class::Throttle => "syncs starting a 429 storm",
            Class::HookTimeout => "hook calls timing out",
            Class::HookRestart => "hook calls after a hook server restart",
        };
        let points: Vec<String> = self.points.iter().map(u32::to_string).collect();
        write!(f, "{} at #{} ({what})", self.class, points.join(",#"))?;
        match self.class {
            Class::StaleRead => write!(f, ", lag {} events", self.amount),
            Class::MissedState | Class::Reorder => write!(f, ", window {} events", self.amount),
            Class::Throttle => write!(f, ", {} x 429", self.amount),
            _ => Ok(()),
        }
    }
}

/// A small deterministic generator (SplitMix64): schedules and shuffles from a seed.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Shuffle `v` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// A fault the environment arms on the API server for the next request(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmedFault {
    /// HTTP status to answer (409, 429).
    pub code: u16,
    /// Requests whose path contains this (`/<plural>`; `/` for any).
    pub path_contains: String,
    /// How many requests get it.
    pub times: u32,
}

/// Arms [`ArmedFault`]s on the API server (the in-process sandbox's fault rules).
pub type Arm = Arc<dyn Fn(ArmedFault) + Send + Sync>;

/// What an informer does with one watch event under a perturbation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// As usual.
    Now,
    /// Hold it (and what follows it) until this many later events arrived, or [`HOLD_MAX`].
    Hold(u32),
    /// Open a window of this many events (or [`HOLD_MAX`]); coalesce it per object.
    Coalesce(u32),
    /// Open a window of this many events (or [`HOLD_MAX`]); deliver its objects shuffled.
    Shuffle(u32),
}

/// What a write point tells the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStep {
    /// Write.
    Go,
    /// The engine is being killed: never write (wait forever).
    Killed,
}

/// A perturbation of one engine (and of the engines that replace it after a restart): the
/// schedule, its counters and the environment's handles. Shared through an `Arc`.
pub struct Perturbation {
    schedule: Schedule,
    events: AtomicU32,
    calls: AtomicU32,
    syncs: AtomicU32,
    held: AtomicUsize,
    hook_restarts: AtomicU32,
    fired: Mutex<Vec<String>>,
    restart: Option<Arc<Notify>>,
    restart_hook_server: Option<Arc<Notify>>,
    arm: Option<Arm>,
}

impl fmt::Debug for Perturbation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Perturbation")
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl Perturbation {
    /// A perturbation following `schedule`, with no environment handles yet.
    pub fn new(schedule: Schedule) -> Perturbation {
        Perturbation {
            schedule,
            events: AtomicU32::new(0),
            calls: AtomicU32::new(0),
            syncs: AtomicU32::new(0),
            held: AtomicUsize::new(0),
            hook_restarts: AtomicU32::new(0),
            fired: Mutex::new(Vec::new()),
            restart: None,
            restart_hook_server: None,
            arm: None,
        }
    }

    /// Notified (class `restart`) when the engine is to be killed and started again.
    pub fn with_restart(mut self, n: Arc<Notify>) -> Self {
        self.restart = Some(n);
        self
    }

    /// Notified (class `hook-restart`) when the hook server is to be restarted.
    pub fn with_hook_restart(mut self, n: Arc<Notify>) -> Self {
        self.restart_hook_server = Some(n);
        self
    }

    /// How faults are armed on the API server (classes `conflict`, `throttle`).
    pub fn with_arm(mut self, arm: Arm) -> Self {
        self.arm = Some(arm);
        self
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// What fired so far, one line each, in order.
    pub fn fired(&self) -> Vec<String> {
        self.fired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Informer events held back or in an open window right now (a run is not over while
    /// some are).
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Hook server restarts asked for so far (class `hook-restart`). An environment whose hook
    /// calls wait on a gate ([`crate::HookGate`]) restarts its server there until it has done as
    /// many: the call that asked for a restart then goes to the restarted server.
    pub fn hook_restarts(&self) -> u32 {
        self.hook_restarts.load(Ordering::SeqCst)
    }

    fn note(&self, what: String) {
        tracing::debug!("perturb: {what}");
        self.fired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(what);
    }

    /// Whether informers take the perturbed path at all.
    pub fn taps_informers(&self) -> bool {
        matches!(
            self.schedule.class,
            Class::StaleRead | Class::MissedState | Class::Reorder
        )
    }

    /// Called by an informer for each watch event after its initial list.
    pub fn on_event(&self, resource: &str) -> Delivery {
        if !self.taps_informers() {
            return Delivery::Now;
        }
        let n = self.events.fetch_add(1, Ordering::SeqCst);
        if !self.schedule.fires(n) {
            return Delivery::Now;
        }
        let amount = self.schedule.amount.max(1);
        self.note(format!("event #{n} of {resource}"));
        match self.schedule.class {
            Class::StaleRead => Delivery::Hold(amount),
            Class::MissedState => Delivery::Coalesce(amount),
            _ => Delivery::Shuffle(amount),
        }
    }

    /// Count events entering (positive) or leaving (negative) an informer's hold buffer.
    pub fn add_held(&self, n: isize) {
        if n >= 0 {
            self.held.fetch_add(n as usize, Ordering::SeqCst);
        } else {
            self.held.fetch_sub(n.unsigned_abs(), Ordering::SeqCst);
        }
    }

    /// A shuffler for window `n` (seeded by the schedule's seed and the window).
    pub fn shuffler(&self, salt: u64) -> SplitMix {
        SplitMix(self.schedule.seed ^ salt.wrapping_mul(0xA24B_AED4_963E_E407))
    }

    /// Called before a hook call: may ask for a hook server restart, may shuffle the request's
    /// observed maps. Returns whether this call's answer is to be lost (`hook-timeout`).
    pub fn before_hook_call(&self, hook: &str, request: &mut Value) -> bool {
        if !matches!(
            self.schedule.class,
            Class::HookTimeout | Class::HookRestart | Class::Reorder
        ) {
            return false;
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.schedule.fires(n) {
            return false;
        }
        match self.schedule.class {
            Class::HookTimeout => {
                self.note(format!("hook call #{n} ({hook}) times out"));
                return true;
            }
            Class::HookRestart => {
                self.note(format!("hook server restarted before call #{n} ({hook})"));
                self.hook_restarts.fetch_add(1, Ordering::SeqCst);
                if let Some(r) = &self.restart_hook_server {
                    r.notify_one();
                }
            }
            _ => {
                self.note(format!(
                    "observed maps of hook call #{n} ({hook}) reordered"
                ));
                shuffle_observed(request, &mut self.shuffler(u64::from(n) + 1));
            }
        }
        false
    }

    /// Called by the executor before each write of a sync; `index` is the write's number in
    /// its sync (0 first), `plural` the resource written.
    pub fn before_write(&self, index: u32, plural: &str) -> WriteStep {
        match (self.schedule.class, index) {
            (Class::Restart, 1) => {
                let n = self.syncs.fetch_add(1, Ordering::SeqCst);
                if self.schedule.fires(n)
                    && let Some(r) = &self.restart
                {
                    self.note(format!(
                        "engine killed before the second write of sync #{n}"
                    ));
                    r.notify_one();
                    return WriteStep::Killed;
                }
            }
            (Class::Conflict | Class::Throttle, 0) => {
                let n = self.syncs.fetch_add(1, Ordering::SeqCst);
                if self.schedule.fires(n)
                    && let Some(arm) = &self.arm
                {
                    let fault = if self.schedule.class == Class::Conflict {
                        ArmedFault {
                            code: 409,
                            path_contains: format!("/{plural}"),
                            times: 1,
                        }
                    } else {
                        ArmedFault {
                            code: 429,
                            path_contains: "/".into(),
                            times: self.schedule.amount.max(1),
                        }
                    };
                    self.note(format!(
                        "sync #{n}: {} x {} armed for {}",
                        fault.times, fault.code, fault.path_contains
                    ));
                    arm(fault);
                }
            }
            _ => {}
        }
        WriteStep::Go
    }
}

/// The top-level maps of a hook request whose entries are maps of observed objects by name.
const OBSERVED: [&str; 4] = ["children", "related", "attachments", "inputs"];

/// Shuffle the object names within each observed map of `request` (and the order of the maps).
pub fn shuffle_observed(request: &mut Value, rng: &mut SplitMix) {
    for field in OBSERVED {
        let Some(Value::Object(types)) = request.get_mut(field) else {
            continue;
        };
        let mut entries: Vec<(String, Value)> = std::mem::take(types).into_iter().collect();
        rng.shuffle(&mut entries);
        for (_, objs) in entries.iter_mut() {
            if let Value::Object(m) = objs {
                let mut inner: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
                rng.shuffle(&mut inner);
                m.extend(inner);
            }
        }
        types.extend(entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn perturb_names_round_trip_and_unknown_is_none() {
        for c in Class::ALL {
            assert_eq!(Class::parse(c.name()), Some(c));
        }
        assert_eq!(Class::parse("stale"), None);
        assert!(Class::names().starts_with("stale-read, missed-state"));
    }

    #[test]
    fn perturb_schedule_is_deterministic_from_the_seed() {
        for c in Class::ALL {
            let a = Schedule::from_seed(c, 7);
            assert_eq!(a, Schedule::from_seed(c, 7));
            assert_eq!(a.points.len(), c.shape().0);
            let (_, horizon, (lo, hi)) = c.shape();
            assert!(a.points.iter().all(|p| *p < horizon));
            assert!((lo..=hi).contains(&a.amount));
        }
        let differ = (0..20)
            .filter(|s| {
                Schedule::from_seed(Class::Reorder, *s) != Schedule::from_seed(Class::Reorder, 0)
            })
            .count();
        assert!(differ >= 15, "seeds draw different schedules");
    }

    #[test]
    fn perturb_hook_classes_fire_at_their_points_only() {
        let mut s = Schedule::from_seed(Class::HookTimeout, 1);
        s.points = [1, 3].into();
        let p = Perturbation::new(s);
        let mut req = json!({});
        let lost: Vec<bool> = (0..5)
            .map(|_| p.before_hook_call("sync", &mut req))
            .collect();
        assert_eq!(lost, [false, true, false, true, false]);
        assert_eq!(p.fired().len(), 2);
        assert_eq!(p.hook_restarts(), 0);
        let mut s = Schedule::from_seed(Class::HookRestart, 1);
        s.points = [0, 2].into();
        let p = Perturbation::new(s);
        let counts: Vec<u32> = (0..4)
            .map(|_| {
                assert!(!p.before_hook_call("sync", &mut req), "no answer lost");
                p.hook_restarts()
            })
            .collect();
        assert_eq!(counts, [1, 1, 2, 2]);
    }

    #[test]
    fn perturb_reorder_shuffles_observed_maps_keeping_their_content() {
        let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        let children: serde_json::Map<String, Value> =
            names.iter().map(|n| (n.clone(), json!({"n": n}))).collect();
        let mut req = json!({"parent": {}, "children": {"Pod.v1": children}});
        let before = req.clone();
        shuffle_observed(&mut req, &mut SplitMix(3));
        assert_eq!(req, before, "same content (maps compare unordered)");
        let order: Vec<&String> = req["children"]["Pod.v1"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(order.len(), 8);
        assert_ne!(order, names.iter().collect::<Vec<_>>(), "the order changed");
    }

    #[test]
    fn perturb_write_classes_arm_and_kill_at_their_syncs() {
        let armed = Arc::new(Mutex::new(Vec::new()));
        let a = Arc::clone(&armed);
        let mut s = Schedule::from_seed(Class::Conflict, 1);
        s.points = [1].into();
        let p = Perturbation::new(s).with_arm(Arc::new(move |f| a.lock().unwrap().push(f)));
        for _ in 0..3 {
            assert_eq!(p.before_write(0, "pods"), WriteStep::Go);
            assert_eq!(p.before_write(1, "pods"), WriteStep::Go);
        }
        assert_eq!(
            *armed.lock().unwrap(),
            [ArmedFault {
                code: 409,
                path_contains: "/pods".into(),
                times: 1
            }]
        );
        let mut s = Schedule::from_seed(Class::Restart, 1);
        s.points = [0].into();
        let notify = Arc::new(Notify::new());
        let p = Perturbation::new(s).with_restart(Arc::clone(&notify));
        assert_eq!(p.before_write(0, "pods"), WriteStep::Go);
        assert_eq!(p.before_write(1, "pods"), WriteStep::Killed);
        assert_eq!(p.before_write(1, "pods"), WriteStep::Go, "once");
    }
}
