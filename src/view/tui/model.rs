//! The TUI's model: what the views draw, as plain data (no terminal, no network), so that
//! every view can be tested from a recorded event stream. The [`reducer`](super::reducer)
//! folds engine events into it; the [`tree`](super::tree) of a parent is derived from it.
//!
//! What it keeps: controllers -> parents (indexed by `(controller, parent)`; a MapController's
//! work items `parent KEY` are folded under their parent as map keys), per parent the last sync's
//! outcome, its writes (or the plan held while paused), its per-object plan, the last hook call
//! of each hook with its request and response bodies and an exec hook's stderr, the last replay
//! diff, and a short log; globally the pause state, the managed hook server, the last reload,
//! recent writes and errors.
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
use crate::engine::plan::apply::FieldChange;
use crate::k8s::object;
use crate::view::notice;

use super::kube_events::{EventIndex, KubeEvent};

/// Lines of hook server output kept.
pub(super) const SERVER_LINES: usize = 500;
/// Lines of the engine's own log kept (global and per parent).
pub(super) const LOG_LINES: usize = 200;
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
    /// The writes of the running sync (its actions once it finishes).
    pub(super) pending: Vec<ActionRecord>,
    /// The last sync's per-object plan (`EngineEvent::Planned`), when the engine sent one:
    /// the tree is built from it.
    pub plan: Option<PlanRecord>,
}

/// One object of a sync's plan, as the tree shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedObject {
    /// `=` in sync, `~` update, `+` create, `-` delete (or recreate), `a` adopt, `r` release,
    /// `w` waiting in a rollout, `s` a difference left alone (OnDelete, being deleted), `k` kept
    /// by the tombstone hook.
    pub marker: char,
    /// Why, in a few words.
    pub reason: String,
    /// The object as the sync observed it (absent for a create).
    pub live: Option<Arc<Value>>,
}

/// A sync's per-object plan, by (`Kind.apiVersion`, name): sorted by type, then name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanRecord {
    /// The planned objects.
    pub objects: BTreeMap<(String, String), PlannedObject>,
    /// MapController: detached outputs, kept by the tombstone hook or not.
    pub detached: BTreeMap<(String, String), bool>,
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

    pub(super) fn push_log(&mut self, line: notice::Line) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// The map key whose last map or tombstone call listed object `resource` `object`
    /// (`namespace/name`) among its observed or desired outputs.
    pub(super) fn key_listing(&self, resource: &str, object: &str) -> Option<String> {
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
    /// `kubectl meta replay`: where the replayed timeline is (`None`: `dev`, live).
    pub replay: Option<ReplayPosition>,
    controller_index: HashMap<String, usize>,
    /// Parents by `(controller, parent)`.
    pub(super) parent_index: HashMap<(String, String), usize>,
    rows: Vec<Row>,
    rows_dirty: bool,
    /// When the writes of the last minute were made.
    pub(super) writes: VecDeque<Instant>,
    /// Parents per state class (see [`class`]); class 0 is not kept exactly.
    counts: [usize; 3],
}

/// Where a replayed timeline is (`kubectl meta replay`'s TUI, shown in the status bar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayPosition {
    /// Steps made: recorded syncs (and finalize calls) let through.
    pub step: usize,
    /// Recorded steps.
    pub total: usize,
    /// What the replay is doing: `stepping`, `rebuilding`, `waiting` (for the next key),
    /// `finished` (every recorded write applied, the engine idle), `timed out`.
    pub state: String,
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
            replay: None,
            controller_index: HashMap::new(),
            parent_index: HashMap::new(),
            rows: Vec::new(),
            rows_dirty: true,
            writes: VecDeque::new(),
            counts: [0; 3],
        }
    }

    /// Forget everything the events said (a replay's timeline starts again from its first
    /// state); the UI state (selection, focus, filter, flash) and the replay position stay.
    pub fn restart(&mut self) {
        let mut fresh = App::new(self.context.clone(), self.color);
        fresh.mask_volatile = self.mask_volatile;
        fresh.replay = self.replay.take();
        std::mem::swap(&mut fresh.ui, &mut self.ui);
        *self = fresh;
    }

    /// The index of controller `name`, created when new.
    pub(super) fn controller_mut(&mut self, name: &str) -> usize {
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
    pub(super) fn parent_mut(&mut self, controller: &str, key: &str) -> usize {
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
    pub(super) fn unit_mut(
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

    pub(super) fn push_log(&mut self, line: notice::Line) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
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
    pub(super) fn class_of(&mut self, controller: &str, parent: &str) -> usize {
        let i = self.parent_mut(controller, parent);
        class(self.parents[i].state())
    }

    /// Move parent `i` from state class `before` to its current one in the counts.
    pub(super) fn restate(&mut self, i: usize, before: usize) {
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

/// "hook error", "API error", ... for a sync error from that layer; "error" when not known.
pub(crate) fn error_heading(layer: Option<Layer>) -> String {
    match layer {
        Some(l) => format!("{} error", l.label()),
        None => "error".to_string(),
    }
}
