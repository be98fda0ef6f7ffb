//! The engine's event stream: everything that happens, as plain data on a channel.
//!
//! The engine never prints. It publishes [`EngineEvent`]s on a [`tokio::sync::broadcast`]
//! channel ([`EventBus`]); the headless printer (`--no-tui`, `-o json`), the TUI and tests
//! consume the same stream. Events are `Serialize` so `-o json` prints them as NDJSON
//! unchanged.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;

use crate::plan::apply::FieldChange;
use crate::plan::planner::{DetachedOutput, ObjectPlan, SyncPlan};

// The verbs and held writes are the plan's words (`plan::writes`); events carry them.
pub use crate::plan::writes::{ActionVerb, HeldAction};

/// Why a parent was synced (a parent can have several reasons, coalesced by the work queue).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Trigger {
    /// The parent was seen for the first time (start-up list or creation).
    ParentAdded,
    /// The parent object changed (spec, metadata or status).
    ParentChanged,
    /// The parent is being deleted (finalize).
    ParentDeleting,
    /// An event on a child or candidate child.
    Child {
        /// `Kind.apiVersion` of the object.
        resource: String,
        /// `namespace/name` of the object.
        object: String,
        /// `added`, `updated` or `deleted`.
        event: String,
    },
    /// An event on an object returned by the customize hook.
    Related {
        /// `Kind.apiVersion` of the object.
        resource: String,
        /// `namespace/name` of the object.
        object: String,
    },
    /// `resyncPeriodSeconds` elapsed.
    ResyncPeriod,
    /// The hook asked for `resyncAfterSeconds`.
    ResyncAfter,
    /// Retry after a failed sync (exponential backoff) or a 429.
    Retry,
    /// The previous sync wrote objects; this one checks that they converged.
    Converge,
    /// A user or tool asked for it.
    Manual,
    /// A hook changed (hot reload): its server restarted or its program was edited.
    HookReloaded,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::ParentAdded => f.write_str("parent added"),
            Trigger::ParentChanged => f.write_str("parent changed"),
            Trigger::ParentDeleting => f.write_str("parent deleting"),
            Trigger::Child {
                resource,
                object,
                event,
            } => write!(f, "{resource} {object} {event}"),
            Trigger::Related { resource, object } => write!(f, "related {resource} {object}"),
            Trigger::ResyncPeriod => f.write_str("resync period"),
            Trigger::ResyncAfter => f.write_str("resyncAfterSeconds"),
            Trigger::Retry => f.write_str("retry"),
            Trigger::Converge => f.write_str("converge"),
            Trigger::Manual => f.write_str("manual"),
            Trigger::HookReloaded => f.write_str("hook reloaded"),
        }
    }
}

/// What a sync is about, named the same way by every event about a parent: the parent
/// (`parent`) and, for a MapController's key sync, the map key (`mapKey`), never glued
/// together; `statusOnly` for a MapController's status-only sync. The sync events
/// ([`EngineEvent::SyncStarted`], [`EngineEvent::SyncFinished`], [`EngineEvent::PlanHeld`])
/// carry it flattened (`parent`, `mapKey` when there is one, `statusOnly` when true); the
/// events within a sync carry its [`EventParent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSubject {
    /// `namespace/name` of the parent (`name` when cluster-scoped); a DecoratorController with
    /// several target resources prefixes the target's `Kind.apiVersion` and a space.
    pub parent: String,
    /// The map key of a MapController's key sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_key: Option<String>,
    /// A MapController's sync that only recomputes the parent's status.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub status_only: bool,
}

impl EventSubject {
    /// A subject that is a parent alone.
    pub fn parent(parent: impl Into<String>) -> Self {
        EventSubject {
            parent: parent.into(),
            ..EventSubject::default()
        }
    }

    /// One map key of a parent.
    pub fn map_key(parent: impl Into<String>, map_key: impl Into<String>) -> Self {
        EventSubject {
            parent: parent.into(),
            map_key: Some(map_key.into()),
            status_only: false,
        }
    }
}

/// The one-line label of a subject, as the human output's parent column shows it:
/// `ns/p`, `ns/p KEY` (map key), `ns/p (status)` (status-only sync).
impl std::fmt::Display for EventSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.parent)?;
        if let Some(k) = &self.map_key {
            write!(f, " {k}")?;
        } else if self.status_only {
            f.write_str(" (status)")?;
        }
        Ok(())
    }
}

/// The parent and map key an event within a sync names (`parent`, `mapKey` when there is
/// one): its sync's [`EventSubject`] without `statusOnly`, which those events never carry
/// (hook calls, writes, plans, replays, hot loops). The events carry it flattened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventParent {
    /// `namespace/name` of the parent, as [`EventSubject::parent`].
    pub parent: String,
    /// The map key of a MapController's key sync (or map or tombstone call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_key: Option<String>,
}

impl EventParent {
    /// A parent alone.
    pub fn parent(parent: impl Into<String>) -> Self {
        EventParent {
            parent: parent.into(),
            map_key: None,
        }
    }
}

impl From<EventSubject> for EventParent {
    fn from(s: EventSubject) -> Self {
        EventParent {
            parent: s.parent,
            map_key: s.map_key,
        }
    }
}

impl From<&EventSubject> for EventParent {
    fn from(s: &EventSubject) -> Self {
        EventParent {
            parent: s.parent.clone(),
            map_key: s.map_key.clone(),
        }
    }
}

/// `ns/p` or `ns/p KEY`, as [`EventSubject`] shows it.
impl std::fmt::Display for EventParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.parent)?;
        if let Some(k) = &self.map_key {
            write!(f, " {k}")?;
        }
        Ok(())
    }
}

/// A work-queue key that events can name: how the events of its syncs name the parent and the
/// map key (see [`EventSubject`]).
pub trait EventKey {
    /// The parent and map key this key stands for.
    fn subject(&self) -> EventSubject;
}

impl EventKey for EventSubject {
    fn subject(&self) -> EventSubject {
        self.clone()
    }
}

impl EventKey for crate::k8s::object::ObjectKey {
    fn subject(&self) -> EventSubject {
        EventSubject::parent(self.to_string())
    }
}

/// Serialize a duration as fractional milliseconds.
fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0)
}

/// One thing that happened in the engine.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum EngineEvent {
    /// A controller started watching (after discovery and informer sync).
    #[serde(rename_all = "camelCase")]
    ControllerStarted {
        /// Controller kind (`CompositeController`, ...).
        controller_kind: String,
        /// Controller name.
        controller: String,
        /// The parent resource, `Kind.apiVersion`.
        parent_resource: String,
        /// Number of parents seen at start.
        parents: usize,
    },
    /// A controller stopped (shutdown or reload).
    #[serde(rename_all = "camelCase")]
    ControllerStopped {
        /// Controller name.
        controller: String,
    },
    /// A sync of one parent began.
    #[serde(rename_all = "camelCase")]
    SyncStarted {
        /// Controller name.
        controller: String,
        /// The parent, the map key and whether the sync is status-only (`parent`, `mapKey`,
        /// `statusOnly`).
        #[serde(flatten)]
        subject: EventSubject,
        /// Why (coalesced).
        triggers: Vec<Trigger>,
    },
    /// A hook was called.
    #[serde(rename_all = "camelCase")]
    HookCalled {
        /// Controller name.
        controller: String,
        /// The parent and, for a MapController's map or tombstone call, the map key (`parent`,
        /// `mapKey`).
        #[serde(flatten)]
        subject: EventParent,
        /// `sync`, `finalize`, `customize`, `map`, `tombstone`.
        hook: String,
        /// HTTP status, when the hook is a webhook that answered.
        status: Option<u16>,
        /// Wall time of the call.
        #[serde(serialize_with = "ms", rename = "latencyMs")]
        latency: Duration,
        /// The error, when the call failed.
        error: Option<String>,
        /// The request body sent (Secret values masked, bounded by [`MAX_BODY_BYTES`]; shared,
        /// so every subscriber's copy of the event is cheap).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<std::sync::Arc<serde_json::Value>>,
        /// The answer (the parsed JSON, or the raw text when it did not parse; Secret values
        /// masked, bounded by [`MAX_BODY_BYTES`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<std::sync::Arc<serde_json::Value>>,
        /// What an exec hook wrote to stderr (bounded by [`MAX_BODY_BYTES`]); absent when
        /// empty.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stderr: Option<String>,
    },
    /// A write (or, when paused or dry-run, a planned write).
    #[serde(rename_all = "camelCase")]
    Action {
        /// Controller name.
        controller: String,
        /// The parent and map key, named as the sync's other events name them (`parent`,
        /// `mapKey`).
        #[serde(flatten)]
        subject: EventParent,
        /// What was done.
        verb: ActionVerb,
        /// `Kind.apiVersion` of the object.
        resource: String,
        /// `namespace/name` of the object.
        object: String,
        /// Short detail (changed fields, reason).
        detail: Option<String>,
        /// The error, when the write failed.
        error: Option<String>,
    },
    /// A sync of one parent ended.
    #[serde(rename_all = "camelCase")]
    SyncFinished {
        /// Controller name.
        controller: String,
        /// The parent, the map key and whether the sync is status-only (`parent`, `mapKey`,
        /// `statusOnly`).
        #[serde(flatten)]
        subject: EventSubject,
        /// Wall time of the sync.
        #[serde(serialize_with = "ms", rename = "durationMs")]
        duration: Duration,
        /// Number of writes made.
        writes: usize,
        /// The error, when the sync failed.
        error: Option<String>,
        /// Which layer the error comes from (fix the hook, the parent, or wait for the API
        /// server), when the sync failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_layer: Option<crate::error::Layer>,
        /// When the sync will be retried, if it will.
        #[serde(rename = "retryInSeconds")]
        retry_in: Option<f64>,
    },
    /// A rollout step or state (rolling update strategies).
    #[serde(rename_all = "camelCase")]
    Rollout {
        /// Controller name.
        controller: String,
        /// `namespace/name` of the parent.
        parent: String,
        /// `RolloutWaiting`, `RolloutProgressing` or `OnLatestRevision`.
        reason: String,
        /// Human detail.
        message: String,
    },
    /// A problem not tied to one sync (discovery, watch, configuration).
    #[serde(rename_all = "camelCase")]
    Error {
        /// Controller name, when known.
        controller: Option<String>,
        /// The object concerned, when known.
        object: Option<String>,
        /// What went wrong and how to fix it.
        message: String,
    },
    /// Writes are paused: the sync planned these actions and wrote nothing.
    #[serde(rename_all = "camelCase")]
    PlanHeld {
        /// Controller name.
        controller: String,
        /// The parent, the map key and whether the sync is status-only (`parent`, `mapKey`,
        /// `statusOnly`).
        #[serde(flatten)]
        subject: EventSubject,
        /// The writes the sync would have made, in the order it would have made them.
        actions: Vec<HeldAction>,
    },
    /// What one sync planned, object by object (published before the plan is carried out,
    /// also when it writes nothing and while paused): what the TUI marks `=` `~` `+` `-` `a`
    /// `r` `w`. See `engine::planner`.
    #[serde(rename_all = "camelCase")]
    Planned {
        /// Controller name.
        controller: String,
        /// The parent (the target, for a DecoratorController) and the map key (MapController)
        /// (`parent`, `mapKey`).
        #[serde(flatten)]
        subject: EventParent,
        /// Per object, in execution order: `type` (`Kind.apiVersion`), `namespace`, `name`,
        /// `kind`, `action`, `reason`, `strategy`, `changes` (the differing fields with their
        /// before/after values), `rollout` (revision, position). As
        /// [`published_objects`] leaves them: Secret values masked, changes bounded
        /// (`changesOmitted`).
        objects: Vec<crate::plan::planner::ObjectPlan>,
        /// MapController: the detached outputs of the key, each kept or not by the tombstone
        /// hook.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        detached: Vec<crate::plan::planner::DetachedOutput>,
        /// The parent's status changes.
        status_change: bool,
        /// The parent's finalizer change (`add`, `remove`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finalizer: Option<crate::plan::writes::FinalizerChange>,
        /// The hook's `resyncAfterSeconds`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resync_after_seconds: Option<f64>,
        /// Number of API writes the plan makes.
        writes: usize,
    },
    /// A MapController key's input is gone: these outputs are detached (published when the
    /// key's sync carries its plan out, not while paused).
    #[serde(rename_all = "camelCase")]
    Detached {
        /// Controller name.
        controller: String,
        /// `namespace/name` of the parent.
        parent: String,
        /// The map key.
        map_key: String,
        /// The detached outputs (`type` = `Kind.apiVersion`, `namespace`, `name`).
        outputs: Vec<crate::plan::child::ChildId>,
    },
    /// What becomes of a MapController key's detached outputs: the tombstone hook's answer
    /// (without a tombstone hook, every detached output is deleted). Published with
    /// [`EngineEvent::Detached`].
    #[serde(rename_all = "camelCase")]
    Tombstone {
        /// Controller name.
        controller: String,
        /// `namespace/name` of the parent.
        parent: String,
        /// The map key.
        map_key: String,
        /// The outputs kept.
        kept: Vec<crate::plan::child::ChildId>,
        /// The outputs deleted.
        deleted: Vec<crate::plan::child::ChildId>,
    },
    /// Writes were paused or resumed.
    #[serde(rename_all = "camelCase")]
    Paused {
        /// True when paused.
        paused: bool,
    },
    /// The managed hook server changed state (`starting`, `ready`, `restarting`, `exited`,
    /// `failed`).
    #[serde(rename_all = "camelCase")]
    HookServer {
        /// The new state.
        state: String,
        /// Its process id, when running.
        pid: Option<u32>,
        /// Detail (command line, exit status, why it is not ready with its output).
        message: String,
    },
    /// A line the managed hook server printed.
    #[serde(rename_all = "camelCase")]
    HookServerOutput {
        /// `stdout` or `stderr`.
        stream: String,
        /// The line.
        line: String,
    },
    /// Files changed and something was reloaded (or a reload was refused).
    #[serde(rename_all = "camelCase")]
    Reload {
        /// What was reloaded: `hook-server`, `exec-hook`, `definition`.
        what: String,
        /// The changed files.
        paths: Vec<String>,
        /// What happened (which controllers restarted or resynced, what changed).
        message: String,
        /// Why the reload was refused or failed (the running version is kept).
        error: Option<String>,
    },
    /// The last request of a parent was sent again to a reloaded hook, and the answers compared.
    #[serde(rename_all = "camelCase")]
    Replay {
        /// Controller name.
        controller: String,
        /// The parent and, for a MapController's map or tombstone call, the map key (`parent`,
        /// `mapKey`).
        #[serde(flatten)]
        subject: EventParent,
        /// The hook (`sync` or `finalize`).
        hook: String,
        /// Differences between the previous answer and the new one (empty: same answer).
        changes: Vec<crate::plan::apply::FieldChange>,
        /// The call failed: the new hook's error.
        error: Option<String>,
    },
    /// The hot-loop guard stopped rewriting a child field the server keeps rewriting back
    /// (see `engine::hotloop`); the parent's other fields and children keep syncing.
    #[serde(rename_all = "camelCase")]
    HotLoop {
        /// Controller name.
        controller: String,
        /// The parent and map key (`parent`, `mapKey`).
        #[serde(flatten)]
        subject: EventParent,
        /// `Kind.apiVersion` of the child.
        resource: String,
        /// `namespace/name` of the child.
        object: String,
        /// The field, e.g. `spec.template.spec.containers[name=web].resources.limits.cpu`.
        path: String,
        /// What the hook asks for (absent: the hook removes the field).
        desired: Option<serde_json::Value>,
        /// What the server keeps returning (absent: the server drops the field).
        server: Option<serde_json::Value>,
        /// The likely cause and the fix.
        cause: String,
        /// The other client that sets the field back (its field manager, from the child's
        /// managedFields), when the guard found one: a fight between two writers (also named
        /// in `cause`). Absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writer: Option<String>,
        /// The whole message, as recorded in the Warning event.
        message: String,
    },
    /// `dev --takeover`: this dev loop took a controller's Lease over from the `kubectl meta
    /// run` replica holding it; that replica stopped syncing the controller and takes it back
    /// when this dev loop exits or its Lease lapses.
    #[serde(rename_all = "camelCase")]
    TakenOver {
        /// Controller name.
        controller: String,
        /// `namespace/name` of the Lease.
        lease: String,
        /// The `run` replica that yielded it (its Lease holder identity).
        from: String,
    },
    /// A notice worth a line (context pinned, lease acquired, resource appeared, ...).
    #[serde(rename_all = "camelCase")]
    Info {
        /// Controller name, when relevant.
        controller: Option<String>,
        /// The notice.
        message: String,
    },
    /// The pace of API requests (at most once a second, while requests are made or the API
    /// server throttles): the effective rate and any throttling (429 TooManyRequests).
    #[serde(rename_all = "camelCase")]
    ApiRate {
        /// Requests answered per second over the last interval (watches excluded).
        requests_per_second: f64,
        /// Requests answered so far.
        requests: u64,
        /// Answers 429 TooManyRequests so far.
        throttled: u64,
        /// The adaptive concurrency window while a 429 keeps it narrowed; absent when open.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
        /// Seconds new requests still wait for the API server's `Retry-After`; absent when none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<f64>,
        /// The explicit `--api-qps` cap; absent when there is none (the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        qps_limit: Option<f64>,
    },
}

/// The largest hook body (serialized JSON bytes) or stderr an event carries; a larger one is
/// replaced by a short note saying how big it was.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What replaces a Secret's `data`/`stringData` values in published hook bodies.
pub const MASK: &str = "***";

/// A hook body as events carry it: every Secret's `data` and `stringData` values masked
/// (anywhere in the body: children, attachments, related objects, the answer), and, when its
/// JSON is larger than [`MAX_BODY_BYTES`], a note instead of the body.
pub fn published_body(body: &serde_json::Value) -> serde_json::Value {
    let mut v = body.clone();
    mask_secrets(&mut v);
    let size = json_size(&v);
    if size > MAX_BODY_BYTES {
        return serde_json::Value::String(format!(
            "(body of {size} bytes not shown: larger than {MAX_BODY_BYTES})"
        ));
    }
    v
}

/// Bytes of `v` as JSON, counted as they are written (no buffer: every hook call's request and
/// answer are measured).
pub(crate) fn json_size(v: &impl Serialize) -> usize {
    /// A writer that only counts.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, v).map_or(0, |()| count.0)
}

// The event of a plan lives with the events (not in `plan`), so the plan does not import
// the event stream back.
impl SyncPlan {
    /// The [`EngineEvent::Planned`] event of this plan.
    pub fn event(&self, controller: &str, parent: &str) -> EngineEvent {
        EngineEvent::Planned {
            controller: controller.to_string(),
            subject: EventParent {
                parent: parent.to_string(),
                map_key: self.map_key.clone(),
            },
            objects: published_objects(&self.objects),
            detached: self.detached.clone(),
            status_change: self.status.is_some(),
            finalizer: self.finalizer,
            resync_after_seconds: self.resync_after_seconds,
            writes: self.write_count(),
        }
    }
}

/// A plan's objects as [`EngineEvent::Planned`] carries them: a Secret's `data` and
/// `stringData` values masked in `changes`, `before` and `after` (as in hook bodies), and the
/// `changes` of all objects together bounded by [`MAX_BODY_BYTES`] of JSON: once the bound
/// is reached, the remaining changes are left out and each object that lost some says how
/// many (`changesOmitted`).
pub fn published_objects(objects: &[ObjectPlan]) -> Vec<ObjectPlan> {
    let mut budget = MAX_BODY_BYTES;
    objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if o.kind == "Secret" {
                o.before = o.before.map(|b| {
                    let mut b = (*b).clone();
                    mask_secrets(&mut b);
                    std::sync::Arc::new(b)
                });
                o.after.iter_mut().for_each(mask_secrets);
                o.changes.iter_mut().for_each(mask_secret_change);
            }
            let changes = std::mem::take(&mut o.changes);
            for c in changes {
                let size = json_size(&c);
                if o.changes_omitted == 0 && size <= budget {
                    budget -= size;
                    o.changes.push(c);
                } else {
                    budget = 0;
                    o.changes_omitted += 1;
                }
            }
            o
        })
        .collect()
}

/// Mask the values of a Secret's field change under `data` or `stringData`.
fn mask_secret_change(c: &mut FieldChange) {
    let secret = ["data", "stringData"].iter().any(|f| {
        c.path
            .strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    });
    if !secret {
        return;
    }
    for v in [&mut c.old, &mut c.new].into_iter().flatten() {
        match v {
            serde_json::Value::Object(d) => d
                .values_mut()
                .for_each(|x| *x = serde_json::Value::String(MASK.into())),
            other => *other = serde_json::Value::String(MASK.into()),
        }
    }
}

/// Text (stderr, an unparsable answer) as events carry it: cut to its last
/// [`MAX_BODY_BYTES`] bytes (at a character boundary), `None` when empty.
pub fn published_text(text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    let mut start = text.len().saturating_sub(MAX_BODY_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    Some(text[start..].to_string())
}

/// Replace the values of `data` and `stringData` of every `kind: Secret` object in `v`.
fn mask_secrets(v: &mut serde_json::Value) {
    crate::k8s::object::visit_secrets(v, &mut |map| {
        for field in ["data", "stringData"] {
            if let Some(serde_json::Value::Object(d)) = map.get_mut(field) {
                for val in d.values_mut() {
                    *val = serde_json::Value::String(MASK.into());
                }
            }
        }
    });
}

/// The [`EngineEvent::Detached`] and [`EngineEvent::Tombstone`] events of a map key's
/// detached outputs (none when it has none).
pub fn detached_events(
    controller: &str,
    parent: &str,
    map_key: &str,
    detached: &[DetachedOutput],
) -> Vec<EngineEvent> {
    if detached.is_empty() {
        return Vec::new();
    }
    let (kept, deleted): (Vec<_>, Vec<_>) = detached.iter().partition(|d| d.kept);
    let ids = |v: Vec<&DetachedOutput>| v.into_iter().map(|d| d.id.clone()).collect();
    vec![
        EngineEvent::Detached {
            controller: controller.to_string(),
            parent: parent.to_string(),
            map_key: map_key.to_string(),
            outputs: detached.iter().map(|d| d.id.clone()).collect(),
        },
        EngineEvent::Tombstone {
            controller: controller.to_string(),
            parent: parent.to_string(),
            map_key: map_key.to_string(),
            kept: ids(kept),
            deleted: ids(deleted),
        },
    ]
}

/// The broadcast channel engine events travel on. Cloning shares the channel.
///
/// Its slots hold shared events (`Arc<EngineEvent>`, 8 bytes), not the events themselves
/// (360 bytes each): the room is allocated up front, so 16,384 slots of whole events were
/// 6.5 MB of every engine's heap before it did anything (1.1 KB per cached object of a
/// 1,000-parent controller), now 0.7 MB. Each subscriber still receives its own
/// [`EngineEvent`] ([`EventReceiver::recv`] clones it out, as the channel cloned it before).
#[derive(Debug, Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<EngineEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    /// A bus with room for 16,384 undelivered events per subscriber.
    pub fn new() -> Self {
        Self::with_capacity(16_384)
    }

    /// A bus with room for `capacity` undelivered events per subscriber (at least 1). The
    /// room is allocated up front, so a bus nobody subscribes to is best made with 1.
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventBus { tx }
    }

    /// Publish an event (dropped when nobody listens).
    pub fn publish(&self, event: EngineEvent) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(Arc::new(event));
        }
    }

    /// A new subscriber that sees every event published from now on.
    pub fn subscribe(&self) -> EventReceiver {
        EventReceiver {
            rx: self.tx.subscribe(),
        }
    }
}

/// One subscriber of an [`EventBus`]: the events published since it subscribed, in order,
/// with tokio's broadcast semantics (a subscriber more than the bus's capacity behind is told
/// how many it missed: [`broadcast::error::RecvError::Lagged`]).
#[derive(Debug)]
pub struct EventReceiver {
    rx: broadcast::Receiver<Arc<EngineEvent>>,
}

impl EventReceiver {
    /// The next event; waits for one.
    pub async fn recv(&mut self) -> Result<EngineEvent, broadcast::error::RecvError> {
        self.rx.recv().await.map(Arc::unwrap_or_clone)
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<EngineEvent, broadcast::error::TryRecvError> {
        self.rx.try_recv().map(Arc::unwrap_or_clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_as_tagged_json() {
        let e = EngineEvent::HookCalled {
            controller: "c".into(),
            subject: EventParent::parent("ns/p"),
            hook: "sync".into(),
            status: Some(200),
            latency: Duration::from_micros(1500),
            error: None,
            request: None,
            response: None,
            stderr: None,
        };
        let v = serde_json::to_value(&e).expect("serializes");
        assert_eq!(v["event"], "hookCalled");
        assert_eq!(v["latencyMs"], 1.5);
        assert_eq!(v["status"], 200);
        let t = serde_json::to_value(Trigger::Child {
            resource: "Pod.v1".into(),
            object: "ns/a".into(),
            event: "deleted".into(),
        })
        .expect("serializes");
        assert_eq!(t["kind"], "child");
        // Optional bodies stay out of the JSON when absent (additive schema).
        assert!(v.get("request").is_none() && v.get("stderr").is_none());
    }

    #[test]
    fn bodies_mask_secrets_and_are_bounded() {
        let body = serde_json::json!({
            "children": {"Secret.v1": {"s": {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t0k"}}}},
            "parent": {"kind": "Thing", "data": {"kept": "visible"}},
        });
        let out = published_body(&body);
        let s = &out["children"]["Secret.v1"]["s"];
        assert_eq!(s["data"]["password"], MASK);
        assert_eq!(s["stringData"]["token"], MASK);
        assert_eq!(out["parent"]["data"]["kept"], "visible");
        let big = serde_json::json!({"x": "a".repeat(MAX_BODY_BYTES + 1)});
        let note = published_body(&big);
        assert!(
            note.as_str().is_some_and(|n| n.contains("not shown")),
            "{note}"
        );
        assert_eq!(published_text(""), None);
        let long = "é".repeat(MAX_BODY_BYTES);
        let cut = published_text(&long).expect("some");
        assert!(cut.len() <= MAX_BODY_BYTES && cut.chars().all(|c| c == 'é'));
    }

    fn plan_of(kind: &str, changes: Vec<FieldChange>) -> ObjectPlan {
        let obj = serde_json::json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": "s", "namespace": "ns"}, "data": {"k": "c2VjcmV0"}});
        ObjectPlan {
            id: crate::plan::child::ChildId::of(&format!("{kind}.v1"), &obj),
            kind: kind.into(),
            action: crate::plan::planner::ObjectAction::Update,
            strategy: None,
            reason: "changed".into(),
            changes,
            changes_omitted: 0,
            before: Some(std::sync::Arc::new(obj.clone())),
            after: Some(obj),
            rollout: None,
        }
    }

    #[test]
    fn planned_objects_mask_secrets_and_bound_their_changes() {
        let change = |path: &str, old: serde_json::Value, new: serde_json::Value| FieldChange {
            path: path.into(),
            old: Some(old),
            new: Some(new),
        };
        let secret = plan_of(
            "Secret",
            vec![
                change("data.k", "b2xk".into(), "bmV3".into()),
                change(
                    "stringData",
                    serde_json::json!({"a": "x"}),
                    serde_json::json!({"a": "y"}),
                ),
                change("metadata.labels.x", "1".into(), "2".into()),
            ],
        );
        let out = published_objects(&[secret]);
        let c = &out[0].changes;
        assert_eq!(
            (c[0].old.clone(), c[0].new.clone()),
            (Some(MASK.into()), Some(MASK.into()))
        );
        assert_eq!(c[1].new, Some(serde_json::json!({"a": MASK})));
        assert_eq!(c[2].new, Some("2".into()), "other fields are shown");
        assert_eq!(
            out[0].before.as_ref().map(|b| b["data"]["k"].clone()),
            Some(MASK.into())
        );
        assert_eq!(
            out[0].after.as_ref().map(|a| a["data"]["k"].clone()),
            Some(MASK.into())
        );
        // A ConfigMap's data is not secret.
        let cm = plan_of("ConfigMap", vec![change("data.k", "a".into(), "b".into())]);
        assert_eq!(published_objects(&[cm])[0].changes[0].new, Some("b".into()));

        // Changes beyond the bound are left out, and the objects that lost some say how many.
        let big = || change("spec.x", "a".repeat(MAX_BODY_BYTES / 3).into(), "b".into());
        let objects = [
            plan_of("ConfigMap", vec![big(), big()]),
            plan_of("ConfigMap", vec![big(), big()]),
        ];
        let out = published_objects(&objects);
        assert_eq!((out[0].changes.len(), out[0].changes_omitted), (2, 0));
        assert_eq!((out[1].changes.len(), out[1].changes_omitted), (0, 2));
        let v = serde_json::to_value(&out[1]).expect("serializes");
        assert_eq!(v["changesOmitted"], 2);
        assert!(
            serde_json::to_value(&out[0])
                .expect("serializes")
                .get("changesOmitted")
                .is_none()
        );
    }

    #[test]
    fn detached_outputs_and_the_tombstone_decision_are_events() {
        let id = |n: &str| {
            crate::plan::child::ChildId::of(
                "Snap.v1",
                &serde_json::json!({"metadata": {"name": n, "namespace": "ns"}}),
            )
        };
        assert!(detached_events("m", "ns/p", "k", &[]).is_empty());
        let d = [
            DetachedOutput {
                id: id("a"),
                kept: true,
            },
            DetachedOutput {
                id: id("b"),
                kept: false,
            },
        ];
        let ev: Vec<serde_json::Value> = detached_events("m", "ns/p", "k", &d)
            .iter()
            .map(|e| serde_json::to_value(e).expect("serializes"))
            .collect();
        assert_eq!(ev[0]["event"], "detached");
        assert_eq!(
            (&ev[0]["parent"], &ev[0]["mapKey"]),
            (&"ns/p".into(), &"k".into())
        );
        assert_eq!(ev[0]["outputs"][1]["name"], "b");
        assert_eq!(ev[1]["event"], "tombstone");
        assert_eq!(ev[1]["kept"][0]["name"], "a");
        assert_eq!(ev[1]["deleted"][0]["name"], "b");
    }

    #[test]
    fn subjects_name_parent_and_map_key_apart() {
        let k = EventSubject::map_key("ns/p", "key-a");
        assert_eq!(
            (k.parent.as_str(), k.map_key.as_deref()),
            ("ns/p", Some("key-a"))
        );
        assert_eq!(k.to_string(), "ns/p key-a");
        let st = EventSubject {
            status_only: true,
            ..EventSubject::parent("ns/p")
        };
        assert_eq!(st.to_string(), "ns/p (status)");
        let p = crate::k8s::object::ObjectKey::new(None, "c").subject();
        assert_eq!(p, EventSubject::parent("c"));
    }

    /// Every variant, with every optional field set (`full`) or none of them.
    fn every_variant(full: bool) -> Vec<EngineEvent> {
        let opt = |s: &str| full.then(|| s.to_string());
        let map_key = || full.then(|| "k".to_string());
        let id = crate::plan::child::ChildId::of(
            "ConfigMap.v1",
            &serde_json::json!({"metadata": {"name": "c", "namespace": "ns"}}),
        );
        let subject = EventSubject {
            parent: "ns/p".into(),
            map_key: map_key(),
            status_only: full,
        };
        let parent = EventParent {
            parent: "ns/p".into(),
            map_key: map_key(),
        };
        let body = || full.then(|| std::sync::Arc::new(serde_json::json!({"a": 1})));
        vec![
            EngineEvent::ControllerStarted {
                controller_kind: "CompositeController".into(),
                controller: "c".into(),
                parent_resource: "Thing.example.com/v1".into(),
                parents: 1,
            },
            EngineEvent::ControllerStopped {
                controller: "c".into(),
            },
            EngineEvent::SyncStarted {
                controller: "c".into(),
                subject: subject.clone(),
                triggers: vec![Trigger::ParentAdded],
            },
            EngineEvent::HookCalled {
                controller: "c".into(),
                subject: parent.clone(),
                hook: "sync".into(),
                status: full.then_some(200),
                latency: Duration::from_millis(1),
                error: opt("e"),
                request: body(),
                response: body(),
                stderr: opt("err"),
            },
            EngineEvent::Action {
                controller: "c".into(),
                subject: parent.clone(),
                verb: ActionVerb::Create,
                resource: "ConfigMap.v1".into(),
                object: "ns/c".into(),
                detail: opt("d"),
                error: opt("e"),
            },
            EngineEvent::SyncFinished {
                controller: "c".into(),
                subject: subject.clone(),
                duration: Duration::from_millis(1),
                writes: 1,
                error: opt("e"),
                error_layer: full.then_some(crate::error::Layer::Hook),
                retry_in: full.then_some(1.0),
            },
            EngineEvent::Rollout {
                controller: "c".into(),
                parent: "ns/p".into(),
                reason: "RolloutWaiting".into(),
                message: "m".into(),
            },
            EngineEvent::Error {
                controller: opt("c"),
                object: opt("ns/p"),
                message: "m".into(),
            },
            EngineEvent::PlanHeld {
                controller: "c".into(),
                subject: subject.clone(),
                actions: vec![],
            },
            EngineEvent::Planned {
                controller: "c".into(),
                subject: parent.clone(),
                objects: vec![],
                detached: if full {
                    vec![DetachedOutput {
                        id: id.clone(),
                        kept: true,
                    }]
                } else {
                    vec![]
                },
                status_change: true,
                finalizer: full.then_some(crate::plan::writes::FinalizerChange::Add),
                resync_after_seconds: full.then_some(1.0),
                writes: 1,
            },
            EngineEvent::Detached {
                controller: "c".into(),
                parent: "ns/p".into(),
                map_key: "k".into(),
                outputs: vec![id.clone()],
            },
            EngineEvent::Tombstone {
                controller: "c".into(),
                parent: "ns/p".into(),
                map_key: "k".into(),
                kept: vec![id.clone()],
                deleted: vec![],
            },
            EngineEvent::Paused { paused: true },
            EngineEvent::HookServer {
                state: "ready".into(),
                pid: full.then_some(1),
                message: "m".into(),
            },
            EngineEvent::HookServerOutput {
                stream: "stdout".into(),
                line: "l".into(),
            },
            EngineEvent::Reload {
                what: "definition".into(),
                paths: vec!["a.yaml".into()],
                message: "m".into(),
                error: opt("e"),
            },
            EngineEvent::Replay {
                controller: "c".into(),
                subject: parent.clone(),
                hook: "sync".into(),
                changes: vec![],
                error: opt("e"),
            },
            EngineEvent::HotLoop {
                controller: "c".into(),
                subject: parent,
                resource: "ConfigMap.v1".into(),
                object: "ns/c".into(),
                path: "data.x".into(),
                desired: full.then(|| "a".into()),
                server: full.then(|| "b".into()),
                cause: "c".into(),
                writer: full.then(|| "w".into()),
                message: "m".into(),
            },
            EngineEvent::TakenOver {
                controller: "c".into(),
                lease: "ns/l".into(),
                from: "r".into(),
            },
            EngineEvent::Info {
                controller: opt("c"),
                message: "m".into(),
            },
            EngineEvent::ApiRate {
                requests_per_second: 1.0,
                requests: 1,
                throttled: 0,
                window: full.then_some(1),
                retry_after_seconds: full.then_some(1.0),
                qps_limit: full.then_some(1.0),
            },
        ]
    }

    /// The `event` tag of every variant: a new variant does not compile until it is listed
    /// here, and so pinned below.
    fn tag(e: &EngineEvent) -> &'static str {
        match e {
            EngineEvent::ControllerStarted { .. } => "controllerStarted",
            EngineEvent::ControllerStopped { .. } => "controllerStopped",
            EngineEvent::SyncStarted { .. } => "syncStarted",
            EngineEvent::HookCalled { .. } => "hookCalled",
            EngineEvent::Action { .. } => "action",
            EngineEvent::SyncFinished { .. } => "syncFinished",
            EngineEvent::Rollout { .. } => "rollout",
            EngineEvent::Error { .. } => "error",
            EngineEvent::PlanHeld { .. } => "planHeld",
            EngineEvent::Planned { .. } => "planned",
            EngineEvent::Detached { .. } => "detached",
            EngineEvent::Tombstone { .. } => "tombstone",
            EngineEvent::Paused { .. } => "paused",
            EngineEvent::HookServer { .. } => "hookServer",
            EngineEvent::HookServerOutput { .. } => "hookServerOutput",
            EngineEvent::Reload { .. } => "reload",
            EngineEvent::Replay { .. } => "replay",
            EngineEvent::HotLoop { .. } => "hotLoop",
            EngineEvent::TakenOver { .. } => "takenOver",
            EngineEvent::Info { .. } => "info",
            EngineEvent::ApiRate { .. } => "apiRate",
        }
    }

    /// The wire format is a contract (`-o json`, docs/dev-events.schema.json): every variant's
    /// JSON field names, with every optional field set and with none, pinned here and checked
    /// against the schema (its `properties` and `required`, less the printer's `time`). The
    /// subjects are flattened into the events: `parent`, `mapKey` and (sync events only)
    /// `statusOnly` sit beside the other fields.
    #[test]
    fn every_events_json_field_names_are_pinned() {
        // (event, names with every optional field set, names with none), sorted.
        let pinned: &[(&str, &str, &str)] = &[
            (
                "controllerStarted",
                "controller controllerKind event parentResource parents",
                "controller controllerKind event parentResource parents",
            ),
            ("controllerStopped", "controller event", "controller event"),
            (
                "syncStarted",
                "controller event mapKey parent statusOnly triggers",
                "controller event parent triggers",
            ),
            (
                "hookCalled",
                "controller error event hook latencyMs mapKey parent request response status stderr",
                "controller error event hook latencyMs parent status",
            ),
            (
                "action",
                "controller detail error event mapKey object parent resource verb",
                "controller detail error event object parent resource verb",
            ),
            (
                "syncFinished",
                "controller durationMs error errorLayer event mapKey parent retryInSeconds statusOnly writes",
                "controller durationMs error event parent retryInSeconds writes",
            ),
            (
                "rollout",
                "controller event message parent reason",
                "controller event message parent reason",
            ),
            (
                "error",
                "controller event message object",
                "controller event message object",
            ),
            (
                "planHeld",
                "actions controller event mapKey parent statusOnly",
                "actions controller event parent",
            ),
            (
                "planned",
                "controller detached event finalizer mapKey objects parent resyncAfterSeconds statusChange writes",
                "controller event objects parent statusChange writes",
            ),
            (
                "detached",
                "controller event mapKey outputs parent",
                "controller event mapKey outputs parent",
            ),
            (
                "tombstone",
                "controller deleted event kept mapKey parent",
                "controller deleted event kept mapKey parent",
            ),
            ("paused", "event paused", "event paused"),
            (
                "hookServer",
                "event message pid state",
                "event message pid state",
            ),
            ("hookServerOutput", "event line stream", "event line stream"),
            (
                "reload",
                "error event message paths what",
                "error event message paths what",
            ),
            (
                "replay",
                "changes controller error event hook mapKey parent",
                "changes controller error event hook parent",
            ),
            (
                "hotLoop",
                "cause controller desired event mapKey message object parent path resource server writer",
                "cause controller desired event message object parent path resource server",
            ),
            (
                "takenOver",
                "controller event from lease",
                "controller event from lease",
            ),
            (
                "info",
                "controller event message",
                "controller event message",
            ),
            (
                "apiRate",
                "event qpsLimit requests requestsPerSecond retryAfterSeconds throttled window",
                "event requests requestsPerSecond throttled",
            ),
        ];
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../docs/dev-events.schema.json"),
            )
            .expect("docs/dev-events.schema.json"),
        )
        .expect("the schema is JSON");
        let schema_names = |tag: &str, what: &str| -> Vec<String> {
            let def = &schema["$defs"][tag][what];
            let mut names: Vec<String> = match def {
                serde_json::Value::Object(m) => m.keys().cloned().collect(),
                serde_json::Value::Array(a) => a
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect(),
                _ => panic!("no {what} for {tag} in the schema"),
            };
            names.retain(|n| n != "time");
            names.sort();
            names
        };
        for full in [true, false] {
            let events = every_variant(full);
            let tags: Vec<&str> = events.iter().map(tag).collect();
            let listed: Vec<&str> = pinned.iter().map(|p| p.0).collect();
            assert_eq!(tags, listed, "every variant, once, in this order");
            for (e, (name, with_all, with_none)) in events.iter().zip(pinned) {
                let v = serde_json::to_value(e).expect("serializes");
                assert_eq!(v["event"], *name);
                let mut names: Vec<&str> = v
                    .as_object()
                    .expect("an object")
                    .keys()
                    .map(String::as_str)
                    .collect();
                names.sort_unstable();
                let want = if full { with_all } else { with_none };
                assert_eq!(names.join(" "), *want, "{name} (full: {full}): {v}");
                let names: Vec<String> = names.into_iter().map(String::from).collect();
                if full {
                    assert_eq!(names, schema_names(name, "properties"), "{name}: {v}");
                } else {
                    let required = schema_names(name, "required");
                    assert!(
                        required.iter().all(|r| names.contains(r)),
                        "{name} lacks a required field of {required:?}: {v}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn bus_delivers_to_subscribers() {
        let bus = EventBus::new();
        let mut rx = bus.subscribe();
        bus.publish(EngineEvent::Info {
            controller: None,
            message: "hi".into(),
        });
        match rx.recv().await {
            Ok(EngineEvent::Info { message, .. }) => assert_eq!(message, "hi"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
