//! The TUI's state: a pure model updated from [`EngineEvent`]s, with no terminal or network in
//! sight, so that every view can be tested from a recorded event stream.
//!
//! What it keeps: controllers -> parents (indexed by `(controller, parent)`; a MapController's
//! work items `parent KEY` are folded under their parent as map keys), per parent the last sync's
//! outcome, its writes (or the plan held while paused), the last hook call of each hook with its
//! request and response bodies and an exec hook's stderr, the last replay diff, and a short log;
//! globally the pause state, the managed hook server, the last reload, recent writes and errors.
//!
//! The parent list is virtualized: [`App::rows`] is a flat list of row references rebuilt only
//! when the set of parents or the filter changes, never per event; views draw only the visible
//! window.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::engine::QueueStats;
use crate::engine::error::{Layer, WritesHeld};
use crate::engine::events::{ActionVerb, EngineEvent, EventParent, EventSubject, HeldAction};
use crate::engine::plan::apply::FieldChange;
use crate::engine::plan::hookapi;
use crate::k8s::object;
use crate::view::notice::{self, Notice, Tone};

use super::kube_events::{EventIndex, KubeEvent};

/// Lines of hook server output kept.
const SERVER_LINES: usize = 500;
/// Lines of the engine's own log kept (global and per parent).
const LOG_LINES: usize = 200;
/// The window of "writes in the last minute".
const WRITES_WINDOW: Duration = Duration::from_secs(60);

/// Which pane has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The controller/parent list (left).
    Parents,
    /// The selected parent's tree (centre).
    Tree,
    /// The detail tabs (right).
    Detail,
}

/// The detail tabs, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// The last hook request.
    Request,
    /// The last hook response.
    Response,
    /// Desired vs live of the selected child, and the last replay diff.
    Diff,
    /// Exec hook stderr and the managed server's output.
    Output,
    /// The parent's Kubernetes Events and the engine's events about it.
    Events,
}

impl Tab {
    /// Every tab in display order.
    pub const ALL: [Tab; 5] = [
        Tab::Request,
        Tab::Response,
        Tab::Diff,
        Tab::Output,
        Tab::Events,
    ];

    /// The tab's title.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Request => "Request",
            Tab::Response => "Response",
            Tab::Diff => "Diff",
            Tab::Output => "Hook output",
            Tab::Events => "Events",
        }
    }

    fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// The next (`+1`) or previous (`-1`) tab, wrapping.
    pub fn step(self, by: isize) -> Tab {
        let n = Tab::ALL.len() as isize;
        Tab::ALL[(self.index() as isize + by).rem_euclid(n) as usize]
    }
}

/// The state of a parent (or map key) as its glyph shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncState {
    /// Seen, not synced yet.
    Pending,
    /// A sync is running.
    Syncing,
    /// The last sync succeeded.
    InSync,
    /// The last sync failed; retried at the instant, if it will be.
    Failed {
        /// When the retry is due.
        retry_at: Option<Instant>,
    },
    /// Writes are paused and the last sync held a plan.
    Held,
}

/// One hook call as the TUI keeps it.
#[derive(Debug, Clone)]
pub struct HookRecord {
    /// `sync`, `finalize`, `customize`, `map`, `tombstone`.
    pub hook: String,
    /// HTTP status of a webhook.
    pub status: Option<u16>,
    /// Wall time.
    pub latency: Duration,
    /// The error, when it failed.
    pub error: Option<String>,
    /// Request body (masked, bounded by the engine).
    pub request: Option<Arc<Value>>,
    /// Response body.
    pub response: Option<Arc<Value>>,
    /// Exec hook stderr.
    pub stderr: Option<String>,
}

/// A write of the last sync (or a write a paused sync held back).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    /// `create`, `update`, `delete`, `adopt`, `release`, `status`, ...
    pub verb: String,
    /// `Kind.apiVersion`.
    pub resource: String,
    /// `namespace/name`.
    pub object: String,
    /// Changed fields or reason.
    pub detail: Option<String>,
    /// The write failed.
    pub error: Option<String>,
    /// Held back because writes are paused.
    pub held: bool,
}

/// The last replay of a parent's request against a reloaded hook.
#[derive(Debug, Clone)]
pub struct ReplayRecord {
    /// The hook.
    pub hook: String,
    /// Differences from the previous answer.
    pub changes: Vec<FieldChange>,
    /// The new hook failed.
    pub error: Option<String>,
}

/// What is known about one sync target: a parent, or a MapController's map key.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Glyph state.
    pub state: SyncState,
    /// When the last sync ended.
    pub last_sync: Option<Instant>,
    /// Its wall time.
    pub last_duration: Option<Duration>,
    /// Writes of the last sync.
    pub writes: usize,
    /// The last sync's error.
    pub error: Option<String>,
    /// Where that error comes from (the hook, the parent, the API server, the engine).
    pub error_layer: Option<Layer>,
    /// The last call of each hook, by hook name.
    pub calls: BTreeMap<String, HookRecord>,
    /// The writes (or held plan) of the last finished sync.
    pub actions: Vec<ActionRecord>,
    pending: Vec<ActionRecord>,
    /// Successful writes since the last sync/map hook call: objects created or deleted after
    /// the request the tree is built from was sent.
    pub written_since_call: Vec<ActionRecord>,
    /// The last sync's per-object plan ([`EngineEvent::Planned`]), when the engine sent one:
    /// the tree's markers come from it.
    pub plan: Option<PlanRecord>,
}

/// What one planned object is marked with in the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanMark {
    /// `=` in sync, `~` update, `+` create, `-` delete (or recreate), `a` adopt, `r` release,
    /// `w` waiting in a rollout, `s` a difference left alone (OnDelete, being deleted), `k` kept
    /// by the tombstone hook.
    pub marker: char,
    /// Why, in a few words.
    pub reason: String,
}

/// A sync's per-object plan, by (`Kind.apiVersion`, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanRecord {
    /// The planned objects.
    pub objects: BTreeMap<(String, String), PlanMark>,
    /// MapController: detached outputs, kept by the tombstone hook or not.
    pub detached: BTreeMap<(String, String), bool>,
}

impl PlanRecord {
    /// The mark of object `name` of type `type_key`.
    pub fn mark(&self, type_key: &str, name: &str) -> Option<&PlanMark> {
        self.objects.get(&(type_key.to_string(), name.to_string()))
    }

    /// The planned objects of type `type_key`, by name.
    pub fn of_type<'a>(&'a self, type_key: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.objects
            .range((type_key.to_string(), String::new())..)
            .take_while(move |((t, _), _)| t == type_key)
            .map(|((_, n), _)| n)
    }
}

impl Default for Unit {
    fn default() -> Self {
        Unit {
            state: SyncState::Pending,
            last_sync: None,
            last_duration: None,
            writes: 0,
            error: None,
            error_layer: None,
            calls: BTreeMap::new(),
            actions: Vec::new(),
            pending: Vec::new(),
            written_since_call: Vec::new(),
            plan: None,
        }
    }
}

impl Unit {
    /// The call the Request/Response tabs show: sync or finalize (whichever came last), else
    /// map or tombstone, else any.
    pub fn main_call(&self) -> Option<&HookRecord> {
        ["sync", "finalize", "map", "tombstone", "customize"]
            .iter()
            .find_map(|h| self.calls.get(*h))
    }

    /// The write of object `resource` `name` in the last sync, if it was written.
    pub fn action_for(&self, resource: &str, name: &str) -> Option<&ActionRecord> {
        find_action(&self.actions, resource, name)
    }

    /// The verb of a successful write of `resource` `name` since the last hook call.
    pub fn written_since(&self, resource: &str, name: &str) -> Option<&str> {
        find_action(&self.written_since_call, resource, name).map(|a| a.verb.as_str())
    }
}

fn find_action<'a>(
    list: &'a [ActionRecord],
    resource: &str,
    name: &str,
) -> Option<&'a ActionRecord> {
    list.iter()
        .rev()
        .find(|a| a.resource == resource && a.object.rsplit('/').next().is_some_and(|n| n == name))
}

/// One parent of one controller.
#[derive(Debug, Clone)]
pub struct Parent {
    /// Controller name.
    pub controller: String,
    /// `namespace/name` (or `name`).
    pub key: String,
    /// The parent's own sync state (for a MapController: its fan-out and status work).
    pub unit: Unit,
    /// MapController map keys.
    pub keys: BTreeMap<String, Unit>,
    /// The last rollout state (`reason: message`).
    pub rollout: Option<String>,
    /// The last replay.
    pub replay: Option<ReplayRecord>,
    /// The engine's events about this parent, newest last, as [`notice`] words them.
    pub log: VecDeque<notice::Line>,
    /// The parent object's uid (from the last hook request): the key of its Kubernetes Events.
    pub uid: Option<String>,
}

impl Parent {
    /// The worst state over the parent and its map keys (failed > syncing > held > ...).
    pub fn state(&self) -> &SyncState {
        let rank = |s: &SyncState| match s {
            SyncState::Failed { .. } => 4,
            SyncState::Syncing => 3,
            SyncState::Held => 2,
            SyncState::Pending => 1,
            SyncState::InSync => 0,
        };
        std::iter::once(&self.unit.state)
            .chain(self.keys.values().map(|u| &u.state))
            .max_by_key(|s| rank(s))
            .unwrap_or(&self.unit.state)
    }

    fn push_log(&mut self, line: notice::Line) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// The map key whose last map or tombstone call listed object `resource` `object`
    /// (`namespace/name`) among its observed or desired outputs.
    fn key_listing(&self, resource: &str, object: &str) -> Option<String> {
        let name = object.rsplit('/').next().unwrap_or(object);
        let lists = |c: &HookRecord| {
            let observed = c
                .request
                .as_ref()
                .and_then(|r| r.get("outputs"))
                .and_then(|o| o.get(resource))
                .and_then(Value::as_object)
                .is_some_and(|m| m.values().any(|o| object::name(o) == Some(name)));
            let desired = c
                .response
                .as_ref()
                .and_then(|r| r.get("outputs"))
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|o| object::name(o) == Some(name)));
            observed || desired
        };
        self.keys
            .iter()
            .find(|(_, u)| u.calls.values().any(lists))
            .map(|(k, _)| k.clone())
    }
}

/// One controller.
#[derive(Debug, Clone)]
pub struct Controller {
    /// `CompositeController`, `DecoratorController`, `MapController` (empty until started).
    pub kind: String,
    /// Name.
    pub name: String,
    /// `Kind.apiVersion` of its parents.
    pub parent_resource: String,
    /// Stopped (shutdown or reload).
    pub stopped: bool,
    /// Its parents (indexes into [`App::parents`]), sorted by parent key.
    pub parents: Vec<usize>,
}

/// A row of the parent list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// A controller heading.
    Controller(usize),
    /// A parent.
    Parent(usize),
}

/// The managed hook server.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    /// `starting`, `ready`, `restarting`, `exited`, `failed`.
    pub state: String,
    /// Its pid.
    pub pid: Option<u32>,
    /// Restarts so far.
    pub restarts: usize,
    /// The last detail.
    pub message: String,
}

/// The last reload.
#[derive(Debug, Clone)]
pub struct ReloadInfo {
    /// `hook-server`, `exec-hook`, `definition`.
    pub what: String,
    /// Changed files.
    pub paths: Vec<String>,
    /// When.
    pub at: Instant,
    /// Parents whose replayed answer changed.
    pub changed: usize,
    /// Parents replayed.
    pub replayed: usize,
    /// Why it was refused.
    pub error: Option<String>,
}

/// An overlay over the panes.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// The key help.
    Help,
    /// An object's YAML: title and text.
    Yaml(String, String),
}

/// The UI's own state (selection, focus, filter).
#[derive(Debug, Clone)]
pub struct Ui {
    /// Focused pane.
    pub focus: Focus,
    /// Selected row of the parent list.
    pub row: usize,
    /// First visible row of the parent list (kept by the view).
    pub row_offset: usize,
    /// Selected line of the tree.
    pub tree_row: usize,
    /// Selected detail tab.
    pub tab: Tab,
    /// Scroll of the detail pane.
    pub detail_scroll: u16,
    /// The parent name filter.
    pub filter: String,
    /// The filter is being typed.
    pub editing_filter: bool,
    /// An overlay.
    pub overlay: Option<Overlay>,
    /// A one-line notice (answers to commands).
    pub flash: Option<String>,
    /// The selection follows the first parent (until the user moves it).
    pub follow_first: bool,
}

/// The whole TUI model.
#[derive(Debug)]
pub struct App {
    /// Context and namespace, as `dev` pinned them.
    pub context: String,
    /// Writes paused.
    pub paused: bool,
    /// Controllers this dev loop took over from `kubectl meta run` (`--takeover`): controller
    /// -> the replica that yielded it (shown in the status bar; it takes them back at exit).
    pub taken_over: BTreeMap<String, String>,
    /// The managed hook server, when there is one.
    pub server: Option<ServerInfo>,
    /// The last reload.
    pub reload: Option<ReloadInfo>,
    /// Controllers in start order.
    pub controllers: Vec<Controller>,
    /// Every parent.
    pub parents: Vec<Parent>,
    /// Hook server output lines.
    pub server_output: VecDeque<String>,
    /// The engine's notices and errors not tied to one parent, as [`notice`] words them.
    pub log: VecDeque<notice::Line>,
    /// Errors seen (sync failures and engine errors).
    pub errors: usize,
    /// Selection, focus, filter.
    pub ui: Ui,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// Render ages, durations and pids as placeholders (deterministic snapshots).
    pub mask_volatile: bool,
    /// Colors on (off with `NO_COLOR` or when not wanted).
    pub color: bool,
    /// Events applied so far.
    pub applied: u64,
    /// Kubernetes Events by involved object uid (bounded).
    pub kube_events: EventIndex,
    /// The work queues' figures as last read.
    pub queue: QueueStats,
    /// Why writes are held (API server unreachable, lease lost), since when (as the UI
    /// learned it).
    pub held: Option<(Instant, WritesHeld)>,
    /// The pace of API requests as last reported (`apiRate`), and when.
    pub api: Option<(Instant, ApiRateView)>,
    controller_index: HashMap<String, usize>,
    parent_index: HashMap<(String, String), usize>,
    rows: Vec<Row>,
    rows_dirty: bool,
    writes: VecDeque<Instant>,
    /// Parents per state class (see [`class`]); class 0 is not kept exactly.
    counts: [usize; 3],
}

/// The pace of API requests the status bar shows (from the last `apiRate` event).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApiRateView {
    /// Requests answered per second.
    pub per_second: f64,
    /// Answers 429 so far.
    pub throttled: u64,
    /// The narrowed concurrency window, if narrowed.
    pub window: Option<u32>,
    /// Seconds left of a `Retry-After` pause, if one runs.
    pub retry_after_seconds: Option<f64>,
}

/// 1 syncing, 2 failed, 0 anything else.
fn class(s: &SyncState) -> usize {
    match s {
        SyncState::Syncing => 1,
        SyncState::Failed { .. } => 2,
        _ => 0,
    }
}

/// A held write as the tree shows it (marked held, not written).
fn held_action(a: &HeldAction) -> ActionRecord {
    ActionRecord {
        verb: a.verb.to_string(),
        resource: a.resource.clone(),
        object: a.object.clone(),
        detail: a.detail.clone(),
        error: None,
        held: true,
    }
}

impl App {
    /// An empty model; `context` is the status bar's context and namespace text.
    pub fn new(context: impl Into<String>, color: bool) -> App {
        App {
            context: context.into(),
            paused: false,
            taken_over: BTreeMap::new(),
            server: None,
            reload: None,
            controllers: Vec::new(),
            parents: Vec::new(),
            server_output: VecDeque::new(),
            log: VecDeque::new(),
            errors: 0,
            ui: Ui {
                focus: Focus::Parents,
                row: 0,
                row_offset: 0,
                tree_row: 0,
                tab: Tab::Request,
                detail_scroll: 0,
                filter: String::new(),
                editing_filter: false,
                overlay: None,
                flash: None,
                follow_first: true,
            },
            dirty: true,
            mask_volatile: false,
            color,
            applied: 0,
            kube_events: EventIndex::default(),
            queue: QueueStats::default(),
            held: None,
            api: None,
            controller_index: HashMap::new(),
            parent_index: HashMap::new(),
            rows: Vec::new(),
            rows_dirty: true,
            writes: VecDeque::new(),
            counts: [0; 3],
        }
    }

    fn controller_mut(&mut self, name: &str) -> usize {
        if let Some(i) = self.controller_index.get(name) {
            return *i;
        }
        let i = self.controllers.len();
        self.controllers.push(Controller {
            kind: String::new(),
            name: name.to_string(),
            parent_resource: String::new(),
            stopped: false,
            parents: Vec::new(),
        });
        self.controller_index.insert(name.to_string(), i);
        self.rows_dirty = true;
        i
    }

    /// The index of parent `key` of `controller`, created when new.
    fn parent_mut(&mut self, controller: &str, key: &str) -> usize {
        if let Some(i) = self
            .parent_index
            .get(&(controller.to_string(), key.to_string()))
        {
            return *i;
        }
        let c = self.controller_mut(controller);
        let i = self.parents.len();
        self.parents.push(Parent {
            controller: controller.to_string(),
            key: key.to_string(),
            unit: Unit::default(),
            keys: BTreeMap::new(),
            rollout: None,
            replay: None,
            log: VecDeque::new(),
            uid: None,
        });
        self.parent_index
            .insert((controller.to_string(), key.to_string()), i);
        let parents = &self.parents;
        let list = &mut self.controllers[c].parents;
        let at = list.partition_point(|j| parents[*j].key.as_str() < key);
        list.insert(at, i);
        self.rows_dirty = true;
        i
    }

    /// The unit an event names: the parent, or one of its map keys.
    fn unit_mut(
        &mut self,
        controller: &str,
        parent: &str,
        map_key: Option<&str>,
    ) -> (usize, &mut Unit) {
        let i = self.parent_mut(controller, parent);
        let entry = &mut self.parents[i];
        let unit = match map_key {
            Some(k) => entry.keys.entry(k.to_string()).or_default(),
            None => &mut entry.unit,
        };
        (i, unit)
    }

    fn push_log(&mut self, line: notice::Line) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// Fold one engine event into the model (at `now`).
    pub fn apply(&mut self, event: &EngineEvent, now: Instant) {
        self.applied += 1;
        self.dirty = true;
        match event {
            EngineEvent::ControllerStarted {
                controller_kind,
                controller,
                parent_resource,
                ..
            } => self.on_controller_started(controller, controller_kind, parent_resource),
            EngineEvent::ControllerStopped { controller } => {
                let c = self.controller_mut(controller);
                self.controllers[c].stopped = true;
            }
            EngineEvent::SyncStarted {
                controller,
                subject: EventSubject {
                    parent, map_key, ..
                },
                ..
            } => self.on_sync_started(controller, parent, map_key.as_deref()),
            EngineEvent::HookCalled { .. } => self.on_hook_called(event),
            EngineEvent::Action { .. } => self.on_action(event, now),
            EngineEvent::Planned { .. } => self.on_planned(event),
            EngineEvent::PlanHeld { .. } => self.on_plan_held(event),
            EngineEvent::SyncFinished { .. } => self.on_sync_finished(event, now),
            EngineEvent::Rollout {
                controller,
                parent,
                reason,
                message,
            } => {
                let i = self.parent_mut(controller, parent);
                self.parents[i].rollout = Some(format!("{reason}: {message}"));
                self.log_event(Some(i), event, None);
            }
            EngineEvent::Error {
                controller, object, ..
            } => self.on_error(controller.as_deref(), object.as_deref(), event),
            EngineEvent::Paused { paused } => {
                self.paused = *paused;
                self.log_event(None, event, None);
            }
            EngineEvent::HookServer {
                state,
                pid,
                message,
            } => {
                self.on_hook_server(state, *pid, message);
                self.log_event(None, event, None);
            }
            EngineEvent::HookServerOutput { stream, line } => {
                if self.server_output.len() == SERVER_LINES {
                    self.server_output.pop_front();
                }
                self.server_output.push_back(format!("{stream}: {line}"));
            }
            EngineEvent::Reload { .. } => self.on_reload(event, now),
            EngineEvent::Replay { .. } => self.on_replay(event),
            EngineEvent::HotLoop { .. }
            | EngineEvent::Detached { .. }
            | EngineEvent::Tombstone { .. } => self.on_parent_notice(event),
            EngineEvent::Info { .. } => self.log_event(None, event, None),
            EngineEvent::TakenOver {
                controller, from, ..
            } => {
                self.taken_over.insert(controller.clone(), from.clone());
                self.log_event(None, event, None);
            }
            EngineEvent::ApiRate {
                requests_per_second,
                throttled,
                window,
                retry_after_seconds,
                ..
            } => {
                self.api = Some((
                    now,
                    ApiRateView {
                        per_second: *requests_per_second,
                        throttled: *throttled,
                        window: *window,
                        retry_after_seconds: *retry_after_seconds,
                    },
                ));
            }
        }
    }

    /// A controller (re)started: its kind and parent type, no longer stopped.
    fn on_controller_started(&mut self, controller: &str, kind: &str, parent_resource: &str) {
        let c = self.controller_mut(controller);
        let entry = &mut self.controllers[c];
        kind.clone_into(&mut entry.kind);
        parent_resource.clone_into(&mut entry.parent_resource);
        entry.stopped = false;
    }

    /// A sync of a parent (or map key) began: syncing, its pending writes cleared.
    fn on_sync_started(&mut self, controller: &str, parent: &str, map_key: Option<&str>) {
        let before = self.class_of(controller, parent);
        let (i, unit) = self.unit_mut(controller, parent, map_key);
        unit.state = SyncState::Syncing;
        unit.pending.clear();
        self.restate(i, before);
    }

    /// A hook call: kept as the unit's last call of that hook; the parent's uid learned from
    /// its request.
    fn on_hook_called(&mut self, event: &EngineEvent) {
        let EngineEvent::HookCalled {
            controller,
            subject: EventParent { parent, map_key },
            hook,
            status,
            latency,
            error,
            request,
            response,
            stderr,
        } = event
        else {
            return;
        };
        let uid = request.as_ref().and_then(|r| {
            let obj = r.get("parent").or_else(|| r.get("object"))?;
            object::uid(obj).map(str::to_string)
        });
        let (i, _) = self.unit_mut(controller, parent, map_key.as_deref());
        if uid.is_some() && self.parents[i].uid != uid {
            self.parents[i].uid = uid;
        }
        let (_, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        if matches!(hook.as_str(), "sync" | "finalize" | "map") {
            unit.written_since_call.clear();
        }
        unit.calls.insert(
            hook.clone(),
            HookRecord {
                hook: hook.clone(),
                status: *status,
                latency: *latency,
                error: error.clone(),
                request: request.clone(),
                response: response.clone(),
                stderr: stderr.clone(),
            },
        );
    }

    /// A write: counted, pending on its unit until the sync finishes, and logged; a document
    /// applied outside any parent goes to the global log only.
    fn on_action(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::Action {
            controller,
            subject: EventParent { parent, map_key },
            verb,
            resource,
            object,
            detail,
            error,
        } = event
        else {
            return;
        };
        if *verb == ActionVerb::ApplyDocument || parent.is_empty() {
            self.log_event(None, event, None);
            return;
        }
        if error.is_none() {
            self.writes.push_back(now);
        }
        let (i, _) = self.unit_mut(controller, parent, None);
        // A MapController's writes belong to their map key; a write without one (the
        // status) to the map key whose last call listed the object, if any.
        let key = map_key
            .clone()
            .or_else(|| self.parents[i].key_listing(resource, object));
        let entry = &mut self.parents[i];
        let unit = match key {
            Some(k) => entry.keys.entry(k).or_default(),
            None => &mut entry.unit,
        };
        let record = ActionRecord {
            verb: verb.to_string(),
            resource: resource.clone(),
            object: object.clone(),
            detail: detail.clone(),
            error: error.clone(),
            held: false,
        };
        if error.is_none() {
            if unit.written_since_call.len() == LOG_LINES {
                unit.written_since_call.remove(0);
            }
            unit.written_since_call.push(record.clone());
        }
        unit.pending.push(record);
        self.log_event(Some(i), event, None);
    }

    /// A sync's per-object plan: the tree's markers and the detached outputs' fate.
    fn on_planned(&mut self, event: &EngineEvent) {
        let EngineEvent::Planned {
            controller,
            subject: EventParent { parent, map_key },
            objects,
            detached,
            ..
        } = event
        else {
            return;
        };
        let (_, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.plan = Some(PlanRecord {
            objects: objects
                .iter()
                .map(|o| {
                    (
                        (o.id.type_key.clone(), o.id.key.name.clone()),
                        PlanMark {
                            marker: o.action.marker(),
                            reason: o.reason.clone(),
                        },
                    )
                })
                .collect(),
            detached: detached
                .iter()
                .map(|d| ((d.id.type_key.clone(), d.id.key.name.clone()), d.kept))
                .collect(),
        });
    }

    /// Writes paused: the plan's writes are pending as held actions.
    fn on_plan_held(&mut self, event: &EngineEvent) {
        let EngineEvent::PlanHeld {
            controller,
            subject: EventSubject {
                parent, map_key, ..
            },
            actions,
            ..
        } = event
        else {
            return;
        };
        let (i, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.pending.extend(actions.iter().map(held_action));
        self.log_event(Some(i), event, None);
    }

    /// A sync ended: its writes become the unit's last, its state in sync, failed (with the
    /// retry time and the error's layer) or held.
    fn on_sync_finished(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::SyncFinished {
            controller,
            subject: EventSubject {
                parent, map_key, ..
            },
            duration,
            writes,
            error,
            error_layer,
            retry_in,
            ..
        } = event
        else {
            return;
        };
        let paused = self.paused;
        let before = self.class_of(controller, parent);
        let (i, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.actions = std::mem::take(&mut unit.pending);
        unit.last_sync = Some(now);
        unit.last_duration = Some(*duration);
        unit.writes = *writes;
        unit.error.clone_from(error);
        unit.error_layer = *error_layer;
        unit.state = if error.is_some() {
            SyncState::Failed {
                retry_at: retry_in.map(|s| now + Duration::from_secs_f64(s.max(0.0))),
            }
        } else if paused && unit.actions.iter().any(|a| a.held) {
            SyncState::Held
        } else {
            SyncState::InSync
        };
        self.restate(i, before);
        if error.is_some() {
            self.errors += 1;
            // The error's layer leads the line (the log printer has no room for it).
            let lead = notice::Span {
                text: format!("{}: ", error_heading(*error_layer)),
                tone: Tone::Alert,
            };
            if let Some(n) = notice::sync_finished(event, notice::Repeat::First) {
                self.log_notice(Some(i), &n, Some(lead));
            }
        }
    }

    /// An engine error: counted, logged on its parent when it names a known one, else
    /// globally.
    fn on_error(&mut self, controller: Option<&str>, object: Option<&str>, event: &EngineEvent) {
        self.errors += 1;
        let known = match (controller, object) {
            (Some(c), Some(o))
                if self
                    .parent_index
                    .contains_key(&(c.to_string(), o.to_string())) =>
            {
                Some(self.parent_mut(c, o))
            }
            _ => None,
        };
        self.log_event(known, event, None);
    }

    /// The managed hook server changed state (a restart is counted).
    fn on_hook_server(&mut self, state: &str, pid: Option<u32>, message: &str) {
        let s = self.server.get_or_insert_with(ServerInfo::default);
        if state == "restarting" {
            s.restarts += 1;
        }
        state.clone_into(&mut s.state);
        s.pid = pid;
        message.clone_into(&mut s.message);
    }

    /// A reload (or a refused one): the new last reload, its replay counts at zero.
    fn on_reload(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::Reload {
            what, paths, error, ..
        } = event
        else {
            return;
        };
        self.reload = Some(ReloadInfo {
            what: what.clone(),
            paths: paths.clone(),
            at: now,
            changed: 0,
            replayed: 0,
            error: error.clone(),
        });
        self.log_event(None, event, None);
    }

    /// A parent's request replayed against a reloaded hook: counted on the reload, kept as
    /// the parent's last replay.
    fn on_replay(&mut self, event: &EngineEvent) {
        let EngineEvent::Replay {
            controller,
            subject: EventParent { parent, .. },
            hook,
            changes,
            error,
            ..
        } = event
        else {
            return;
        };
        if let Some(r) = &mut self.reload {
            r.replayed += 1;
            r.changed += usize::from(!changes.is_empty() || error.is_some());
        }
        let i = self.parent_mut(controller, parent);
        self.parents[i].replay = Some(ReplayRecord {
            hook: hook.clone(),
            changes: changes.clone(),
            error: error.clone(),
        });
        self.log_event(Some(i), event, None);
    }

    /// A hot loop, a MapController's detached outputs or tombstone decision: a line of the
    /// parent's log.
    fn on_parent_notice(&mut self, event: &EngineEvent) {
        let (EngineEvent::HotLoop {
            controller,
            subject: EventParent { parent, .. },
            ..
        }
        | EngineEvent::Detached {
            controller, parent, ..
        }
        | EngineEvent::Tombstone {
            controller, parent, ..
        }) = event
        else {
            return;
        };
        let i = self.parent_mut(controller, parent);
        self.log_event(Some(i), event, None);
    }

    /// Puts `event`'s [`notice`] on a log: parent `i`'s, or the engine's (`None`).
    fn log_event(&mut self, i: Option<usize>, event: &EngineEvent, lead: Option<notice::Span>) {
        if let Some(n) = notice::describe(event, false) {
            self.log_notice(i, &n, lead);
        }
    }

    /// Puts notice `n` on parent `i`'s log (`tag content`, a map key or `(status)` first), or
    /// on the engine's log (controller and parent first); `lead` goes before everything.
    /// Continuation lines are indented.
    fn log_notice(&mut self, i: Option<usize>, n: &Notice, lead: Option<notice::Span>) {
        let span = |text: String, tone| notice::Span { text, tone };
        let mut head: notice::Line = lead.into_iter().collect();
        match i {
            Some(i) => {
                // The parent column without the parent itself: a map key, `(status)`.
                let rest = n
                    .parent
                    .strip_prefix(self.parents[i].key.as_str())
                    .unwrap_or(&n.parent)
                    .trim();
                if !rest.is_empty() {
                    head.push(span(format!("{rest}: "), Tone::Plain));
                }
            }
            None => {
                for who in [&n.controller, &n.parent] {
                    if !who.is_empty() {
                        head.push(span(format!("{who} "), Tone::Dim));
                    }
                }
            }
        }
        head.push(span(format!("{} ", n.tag), n.tag_tone));
        let mut lines = n.lines.iter();
        if let Some(first) = lines.next() {
            head.extend(first.iter().cloned());
        }
        let rest = lines.map(|l| {
            let mut line = vec![span("  ".to_string(), Tone::Plain)];
            line.extend(l.iter().cloned());
            line
        });
        for line in std::iter::once(head).chain(rest) {
            match i {
                Some(i) => self.parents[i].push_log(line),
                None => self.push_log(line),
            }
        }
    }

    /// Fold in a Kubernetes Event (from the Events watch).
    pub fn apply_kube_event(&mut self, ev: KubeEvent) {
        self.kube_events.apply(ev);
        self.dirty = true;
    }

    /// The work queues' figures now; redraw when they changed.
    pub fn set_queue(&mut self, stats: QueueStats) {
        let stats = QueueStats {
            next_due: None,
            ..stats
        };
        if self.queue != stats {
            self.queue = stats;
            self.dirty = true;
        }
    }

    /// Why writes are held now (`None`: they are not), learned at `now`.
    pub fn set_held(&mut self, reason: Option<WritesHeld>, now: Instant) {
        match (reason, &self.held) {
            (None, None) => return,
            (None, Some(_)) => self.held = None,
            (Some(r), Some((_, old))) if *old == r => return,
            (Some(r), Some((since, _))) => self.held = Some((*since, r)),
            (Some(r), None) => self.held = Some((now, r)),
        }
        self.dirty = true;
    }

    /// Writes in the last minute (as of `now`).
    pub fn writes_last_minute(&mut self, now: Instant) -> usize {
        while self
            .writes
            .front()
            .is_some_and(|t| now.duration_since(*t) > WRITES_WINDOW)
        {
            self.writes.pop_front();
        }
        self.writes.len()
    }

    /// Parents syncing now (kept up to date per event, not counted per frame).
    pub fn syncing(&self) -> usize {
        self.counts[1]
    }

    /// Parents whose last sync failed.
    pub fn failing(&self) -> usize {
        self.counts[2]
    }

    /// The state class (0 other, 1 syncing, 2 failed) of the parent an event names, before
    /// the event changes it.
    fn class_of(&mut self, controller: &str, parent: &str) -> usize {
        let i = self.parent_mut(controller, parent);
        class(self.parents[i].state())
    }

    /// Move parent `i` from state class `before` to its current one in the counts.
    fn restate(&mut self, i: usize, before: usize) {
        let after = class(self.parents[i].state());
        self.counts[before] = self.counts[before].saturating_sub(1);
        self.counts[after] += 1;
    }

    /// The parent list's rows (controllers and the parents matching the filter), rebuilt only
    /// when parents were added or the filter changed.
    pub fn rows(&mut self) -> &[Row] {
        if self.rows_dirty {
            self.rows.clear();
            let filter = self.ui.filter.to_lowercase();
            for (ci, c) in self.controllers.iter().enumerate() {
                self.rows.push(Row::Controller(ci));
                self.rows.extend(
                    c.parents
                        .iter()
                        .filter(|p| {
                            filter.is_empty()
                                || self.parents[**p].key.to_lowercase().contains(&filter)
                        })
                        .map(|p| Row::Parent(*p)),
                );
            }
            self.rows_dirty = false;
            // Until the user moves, the selection rests on the first parent.
            if self.ui.follow_first
                && let Some(r) = self.rows.iter().position(|r| matches!(r, Row::Parent(_)))
            {
                self.ui.row = r;
            }
            if self.ui.row >= self.rows.len() {
                self.ui.row = self.rows.len().saturating_sub(1);
            }
        }
        &self.rows
    }

    /// The filter changed: rebuild the rows on next use.
    pub fn filter_changed(&mut self) {
        self.rows_dirty = true;
        self.ui.row = 0;
        self.ui.row_offset = 0;
        self.dirty = true;
    }

    /// The selected parent, if a parent row is selected.
    pub fn selected(&mut self) -> Option<usize> {
        let row = self.ui.row;
        match self.rows().get(row) {
            Some(Row::Parent(i)) => Some(*i),
            _ => None,
        }
    }

    /// Select the row of parent `key` (`namespace/name`); false when it is not listed.
    pub fn select_parent_named(&mut self, key: &str) -> bool {
        self.rows();
        let parents = &self.parents;
        let found = self
            .rows
            .iter()
            .position(|r| matches!(r, Row::Parent(i) if parents[*i].key == key));
        if let Some(r) = found {
            self.ui.row = r;
            self.ui.tree_row = 0;
            self.ui.follow_first = false;
            self.dirty = true;
        }
        found.is_some()
    }

    /// The selected parent's controller.
    pub fn controller_of(&self, p: &Parent) -> Option<&Controller> {
        self.controller_index
            .get(&p.controller)
            .map(|i| &self.controllers[*i])
    }
}

/// One line of a parent's tree.
#[derive(Debug, Clone, Default)]
pub struct TreeItem {
    /// Indentation level.
    pub depth: u16,
    /// The plan marker (`=`, `~`, `+`, `-`, `a`dopted, `r`eleased, `w`aiting, `s`kipped,
    /// `k`ept), if any: see [`PlanMark`].
    pub marker: Option<char>,
    /// The text.
    pub label: String,
    /// A note after the label (held, failed, tombstone state).
    pub note: Option<String>,
    /// The object as observed (live) at the last call.
    pub live: Option<Value>,
    /// The object as the hook wants it.
    pub desired: Option<Value>,
    /// A heading line (no object).
    pub heading: bool,
    /// The MapController map key the line belongs to.
    pub key: Option<String>,
}

impl TreeItem {
    fn heading(depth: u16, label: impl Into<String>) -> TreeItem {
        TreeItem {
            depth,
            label: label.into(),
            heading: true,
            ..TreeItem::default()
        }
    }

    /// The object to show as YAML: live, else desired.
    pub fn object(&self) -> Option<&Value> {
        self.live.as_ref().or(self.desired.as_ref())
    }
}

/// `Kind name` of an object.
fn kind_name(v: &Value) -> String {
    let ns = object::namespace(v)
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!(
        "{} {ns}{}",
        object::kind(v).unwrap_or("?"),
        object::name(v).unwrap_or("?")
    )
}

/// The objects of a `{type: {name: object}}` map, by type, then by name.
fn observed_by_type(v: Option<&Value>) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    if let Some(Value::Object(types)) = v {
        for (t, objs) in types {
            let entry = out.entry(t.clone()).or_default();
            if let Value::Object(objs) = objs {
                for (k, o) in objs {
                    let name = object::name(o).unwrap_or(k).to_string();
                    entry.insert(name, o.clone());
                }
            }
        }
    }
    out
}

/// Children by type: observed (from the request) and desired (from the response), each child
/// with its marker from the last sync's writes.
fn children_items(
    out: &mut Vec<TreeItem>,
    depth: u16,
    unit: &Unit,
    observed: Option<&Value>,
    desired: Option<&Value>,
    waiting: bool,
) {
    let observed = observed_by_type(observed);
    let desired_list: Vec<Value> = desired
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut desired: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (t, objs) in hookapi::group_by_type(&desired_list) {
        let e = desired.entry(t).or_default();
        for o in objs {
            e.insert(object::name(o).unwrap_or("?").to_string(), o.clone());
        }
    }
    let plan = unit.plan.as_ref();
    let planned_types = plan
        .into_iter()
        .flat_map(|p| p.objects.keys().map(|(t, _)| t));
    let mut types: Vec<&String> = observed
        .keys()
        .chain(desired.keys())
        .chain(planned_types)
        .collect();
    types.sort();
    types.dedup();
    for t in types {
        out.push(TreeItem::heading(depth, t.clone()));
        let live = observed.get(t);
        let want = desired.get(t);
        let mut names: Vec<&String> = live
            .into_iter()
            .flat_map(|m| m.keys())
            .chain(want.into_iter().flat_map(|m| m.keys()))
            .chain(plan.into_iter().flat_map(|p| p.of_type(t)))
            .collect();
        names.sort();
        names.dedup();
        for n in names {
            let l = live.and_then(|m| m.get(n)).cloned();
            let d = want.and_then(|m| m.get(n)).cloned();
            let action = unit.action_for(t, n);
            // Written after the request was sent: created ones are live now, deleted ones gone.
            let since = unit.written_since(t, n);
            if action.is_none() && since == Some("delete") {
                continue;
            }
            let l = if since == Some("create") {
                l.or_else(|| d.clone())
            } else {
                l
            };
            // The engine's per-object plan decides; without one (an engine that does not
            // publish plans), the last sync's writes and what is live and desired.
            let mark = plan.and_then(|p| p.mark(t, n));
            let marker = match (mark, action.map(|a| a.verb.as_str())) {
                (Some(m), _) => m.marker,
                (None, Some("create")) => '+',
                (None, Some("update")) => '~',
                (None, Some("delete")) => '-',
                (None, Some("adopt")) => 'a',
                (None, Some("release")) => 'r',
                _ => match (&l, &d) {
                    (Some(_), Some(_)) => '=',
                    (None, Some(_)) if waiting => 'w',
                    (None, Some(_)) => '+',
                    _ => '-',
                },
            };
            let note = action
                .and_then(|a| match (&a.error, a.held) {
                    (Some(e), _) => Some(format!("failed: {e}")),
                    (None, true) => Some("held (paused)".into()),
                    _ => None,
                })
                .or_else(|| {
                    mark.filter(|m| m.marker != '=' && !m.reason.is_empty())
                        .map(|m| m.reason.clone())
                })
                .or_else(|| action.and_then(|a| a.detail.clone()));
            out.push(TreeItem {
                depth: depth + 1,
                marker: Some(marker),
                label: n.clone(),
                note,
                live: l,
                desired: d,
                heading: false,
                key: None,
            });
        }
    }
}

/// `k=v k2-` of a labels/annotations answer.
fn merged_map(v: Option<&Value>) -> Option<String> {
    let m = v?.as_object()?;
    if m.is_empty() {
        return None;
    }
    Some(
        m.iter()
            .map(|(k, v)| match v {
                Value::Null => format!("{k}-"),
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The tree of parent `p` (of a controller of `kind`): see the module header of
/// `parent_tree.rs`.
pub fn tree(kind: &str, p: &Parent) -> Vec<TreeItem> {
    let mut out = Vec::new();
    let call = p.unit.main_call();
    let request = call.and_then(|c| c.request.as_ref());
    let response = call.and_then(|c| c.response.as_ref());
    match kind {
        "DecoratorController" => {
            let target = request.and_then(|r| r.get("object"));
            out.push(root_item("target", target, &p.key));
            out.push(TreeItem::heading(1, "attachments"));
            children_items(
                &mut out,
                2,
                &p.unit,
                request.and_then(|r| r.get("attachments")),
                response.and_then(|r| r.get("attachments")),
                false,
            );
            out.push(TreeItem::heading(1, "merges"));
            merge_items(&mut out, response.map(Arc::as_ref));
        }
        "MapController" => map_items(&mut out, p),
        _ => {
            let parent_obj = request.and_then(|r| r.get("parent"));
            out.push(root_item("parent", parent_obj, &p.key));
            let waiting = p
                .rollout
                .as_deref()
                .is_some_and(|r| r.starts_with("RolloutWaiting"));
            children_items(
                &mut out,
                1,
                &p.unit,
                request.and_then(|r| r.get("children")),
                response.and_then(|r| r.get("children")),
                waiting,
            );
        }
    }
    parent_write_items(&mut out, &p.unit);
    out
}

/// The tree's first line: `noun Kind namespace/name` of `obj` (`noun key` when unknown).
fn root_item(noun: &str, obj: Option<&Value>, key: &str) -> TreeItem {
    TreeItem {
        label: format!("{noun} {}", obj.map_or_else(|| key.to_string(), kind_name)),
        live: obj.cloned(),
        ..TreeItem::default()
    }
}

/// What a DecoratorController's hook merges into its target: labels, annotations, status.
fn merge_items(out: &mut Vec<TreeItem>, response: Option<&Value>) {
    for (what, v) in [
        ("labels", merged_map(response.and_then(|r| r.get("labels")))),
        (
            "annotations",
            merged_map(response.and_then(|r| r.get("annotations"))),
        ),
        (
            "status",
            response
                .and_then(|r| r.get("status"))
                .filter(|s| !s.is_null())
                .map(Value::to_string),
        ),
    ] {
        if let Some(v) = v {
            out.push(TreeItem::heading(2, format!("{what}: {v}")));
        }
    }
}

/// A MapController's parent, then each map key's lines (tagged with the key).
fn map_items(out: &mut Vec<TreeItem>, p: &Parent) {
    let parent_obj = p
        .keys
        .values()
        .find_map(|u| u.main_call()?.request.as_ref()?.get("parent").cloned());
    out.push(root_item("parent", parent_obj.as_ref(), &p.key));
    for (k, u) in &p.keys {
        let first = out.len();
        map_key_items(out, k, u);
        for it in &mut out[first..] {
            it.key = Some(k.clone());
        }
    }
}

/// One map key: its heading (with its state), the input and outputs of its last map call,
/// and the detached outputs of its last tombstone call.
fn map_key_items(out: &mut Vec<TreeItem>, k: &str, u: &Unit) {
    let glyph = match u.state {
        SyncState::Failed { .. } => " (failed)",
        SyncState::Syncing => " (syncing)",
        SyncState::Held => " (held)",
        _ => "",
    };
    out.push(TreeItem::heading(1, format!("key {k}{glyph}")));
    if let Some(c) = u.calls.get("map") {
        let input = c.request.as_ref().and_then(|r| r.get("input"));
        if let Some(i) = input.filter(|i| !i.is_null()) {
            out.push(TreeItem {
                depth: 2,
                label: format!("input {}", kind_name(i)),
                live: Some(i.clone()),
                ..TreeItem::default()
            });
        }
        children_items(
            out,
            2,
            u,
            c.request.as_ref().and_then(|r| r.get("outputs")),
            c.response.as_ref().and_then(|r| r.get("outputs")),
            false,
        );
    }
    if let Some(t) = u.calls.get("tombstone") {
        out.push(TreeItem::heading(2, "detached outputs"));
        detached_items(out, u, t);
    }
}

/// The outputs a tombstone call was asked about, each kept or to be deleted: as the plan
/// says, else as the hook answered.
fn detached_items(out: &mut Vec<TreeItem>, u: &Unit, t: &HookRecord) {
    let kept = t
        .response
        .as_ref()
        .and_then(|r| r.get("outputs"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|o| object::name(o).map(str::to_string))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for (ty, objs) in observed_by_type(t.request.as_ref().and_then(|r| r.get("outputs"))) {
        for (n, o) in objs {
            let keep = u
                .plan
                .as_ref()
                .and_then(|p| p.detached.get(&(ty.clone(), n.clone())))
                .copied()
                .unwrap_or_else(|| kept.contains(&n));
            out.push(TreeItem {
                depth: 3,
                marker: Some(if keep { '=' } else { '-' }),
                label: format!("{ty} {n}"),
                note: Some(
                    if keep {
                        "kept by the tombstone hook"
                    } else {
                        "tombstone: to be deleted"
                    }
                    .into(),
                ),
                live: Some(o),
                ..TreeItem::default()
            });
        }
    }
}

/// Writes to the parent itself (status, finalizer, metadata).
fn parent_write_items(out: &mut Vec<TreeItem>, unit: &Unit) {
    for a in unit.actions.iter().filter(|a| {
        matches!(
            a.verb.as_str(),
            "status" | "add-finalizer" | "remove-finalizer" | "metadata"
        )
    }) {
        out.push(TreeItem {
            depth: 1,
            marker: Some('~'),
            label: format!("parent {}", a.verb),
            note: a.error.clone().or_else(|| a.detail.clone()),
            ..TreeItem::default()
        });
    }
}

/// "hook error", "API error", ... for a sync error from that layer; "error" when not known.
pub(crate) fn error_heading(layer: Option<Layer>) -> String {
    match layer {
        Some(l) => format!("{} error", l.label()),
        None => "error".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parent's log lines without styling.
    fn log_text(p: &Parent) -> Vec<String> {
        p.log.iter().map(notice::line_text).collect()
    }

    fn started() -> EngineEvent {
        EngineEvent::ControllerStarted {
            controller_kind: "CompositeController".into(),
            controller: "c".into(),
            parent_resource: "Thing.example/v1".into(),
            parents: 1,
        }
    }

    #[test]
    fn map_work_items_fold_under_their_parent() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        for (k, status_only) in [(None, false), (Some("key-a"), false), (None, true)] {
            app.apply(
                &EngineEvent::SyncStarted {
                    controller: "c".into(),
                    subject: EventSubject {
                        parent: "ns/p".into(),
                        map_key: k.map(str::to_string),
                        status_only,
                    },
                    triggers: vec![],
                },
                now,
            );
        }
        assert_eq!(app.parents.len(), 1);
        assert_eq!(app.parents[0].keys.len(), 1);
        assert_eq!(*app.parents[0].state(), SyncState::Syncing);
        assert_eq!(app.syncing(), 1);
        app.apply(
            &EngineEvent::SyncFinished {
                controller: "c".into(),
                subject: EventSubject {
                    parent: "ns/p".into(),
                    map_key: Some("key-a".into()),
                    status_only: false,
                },
                duration: Duration::ZERO,
                writes: 0,
                error: Some("boom".into()),
                error_layer: Some(crate::engine::error::Layer::Hook),
                retry_in: Some(2.0),
            },
            now,
        );
        // The worst state of the parent and its keys wins: failed.
        assert_eq!((app.syncing(), app.failing()), (0, 1));
        app.ui.filter = "zzz".into();
        app.filter_changed();
        assert_eq!(app.rows(), &[Row::Controller(0)]);
    }

    #[test]
    fn detached_outputs_and_tombstone_decisions_are_parent_log_lines() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        let d = [crate::engine::plan::planner::DetachedOutput {
            id: crate::engine::plan::child::ChildId::of(
                "Snap.v1",
                &serde_json::json!({"metadata": {"name": "s-a", "namespace": "ns"}}),
            ),
            kept: false,
        }];
        for e in crate::engine::events::detached_events("c", "ns/p", "key-a", &d) {
            app.apply(&e, now);
        }
        assert_eq!(app.parents.len(), 1);
        let log = log_text(&app.parents[0]);
        assert_eq!(
            log,
            [
                "key-a: detached input gone: Snap.v1 ns/s-a",
                "key-a: tombstone deleted Snap.v1 ns/s-a"
            ]
        );
    }

    /// The TUI's parent log words events as the headless log does (one [`notice`] for both):
    /// a held plan lists each held write on its own line, a write failure says why.
    #[test]
    fn parent_log_lines_are_the_notices_of_the_headless_log() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        let held = EngineEvent::PlanHeld {
            controller: "c".into(),
            subject: EventSubject::parent("ns/p"),
            actions: vec![HeldAction {
                verb: ActionVerb::Update,
                resource: "Pod.v1".into(),
                object: "ns/x".into(),
                detail: Some("spec.containers".into()),
            }],
        };
        let failed = EngineEvent::Action {
            controller: "c".into(),
            subject: EventParent::parent("ns/p"),
            verb: ActionVerb::Delete,
            resource: "ConfigMap.v1".into(),
            object: "ns/y".into(),
            detail: None,
            error: Some("forbidden".into()),
        };
        app.apply(&held, now);
        app.apply(&failed, now);
        let log = log_text(&app.parents[0]);
        assert_eq!(
            log,
            [
                "held paused, not written:",
                "  update Pod.v1 ns/x (spec.containers)",
                "delete ConfigMap.v1 ns/y  failed: forbidden",
            ]
        );
        // The same words as the headless log's content column.
        let printed = notice::describe(&held, false).expect("a notice").text();
        assert_eq!(
            printed,
            "paused, not written:\nupdate Pod.v1 ns/x (spec.containers)"
        );
        let tones: Vec<Tone> = app.parents[0].log[2].iter().map(|s| s.tone).collect();
        assert_eq!(tones.first(), Some(&Tone::Bad), "the delete tag is red");
        assert_eq!(tones.last(), Some(&Tone::Alert), "the failure is an alert");
    }

    /// `dev --takeover`: the status bar's count and the engine log's line come from the typed
    /// event.
    #[test]
    fn a_takeover_is_kept_for_the_status_bar_and_logged() {
        let mut app = App::new("ctx", false);
        app.apply(
            &EngineEvent::TakenOver {
                controller: "c".into(),
                lease: "ops/compositecontroller-c".into(),
                from: "replica-a".into(),
            },
            Instant::now(),
        );
        assert_eq!(
            app.taken_over.get("c").map(String::as_str),
            Some("replica-a")
        );
        let line = notice::line_text(&app.log[0]);
        assert!(
            line.starts_with("c takeover took over lease ops/compositecontroller-c from replica-a"),
            "{line}"
        );
    }

    #[test]
    fn held_writes_are_shown_as_held_actions() {
        let a = held_action(&HeldAction {
            verb: ActionVerb::Update,
            resource: "Pod.v1".into(),
            object: "default/x".into(),
            detail: Some("spec.containers".into()),
        });
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.object.as_str()),
            ("update", "Pod.v1", "default/x")
        );
        assert_eq!(a.detail.as_deref(), Some("spec.containers"));
        assert!(a.held);
    }
}
