//! The replay driver: a flight recording's window ([`Window`]) run again through the engine on
//! a given client (an in-process sandbox: `kubectl meta replay`), headless to the end or one
//! recorded step at a time.
//!
//! 1. [`Replayer::start`] gets the client ready: a CustomResourceDefinition accepting anything
//!    for each custom resource the definitions name that the server does not serve, then the
//!    window's first state ([`Window::first_state`]): owners first, `ownerReferences` (and
//!    labels holding an owner's uid) moved to the copies' uids, statuses through the status
//!    subresource. Then it starts the engine on the client, publishing on the caller's bus,
//!    serving the recorded answers ([`Window::answers`]) unless [`ReplayOptions::live_hooks`].
//! 2. [`Session::run`] drives it: each time the engine is idle, the other writers' writes the
//!    recording saw before the next sync ([`Window::external_writes`]) are applied (a merge
//!    patch or a create, with the writer's field manager); a write to an object the engine just
//!    updated goes in at once, as the other writer answered the engine live. It ends when every
//!    write was applied and the engine is idle, or at the deadline.
//! 3. Stepped ([`ReplayOptions::stepped`]): one worker per controller, and every sync or
//!    finalize call waits for its turn ([`HookAnswers::turn`]); [`Session::advance`] allows
//!    more steps and drives until the next sync waits (or the engine is idle). A step is one
//!    recorded sync (or finalize) call; going back is a new session on a fresh server advanced
//!    to the step before ([`Replayer::steps`] is the recording's count).
//!
//! Above `run` (it starts an [`Engine`]); nothing below imports it.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::events::{EngineEvent, EventBus};
use crate::flight::replay::{ExternalWrite, RecordedAnswers, Subject, Window};
use crate::hooks::CallInfo;
use crate::k8s::object::{self, SERVER_SET};
use crate::plan::writes::ActionVerb;
use crate::spec::ControllerDef;
use crate::{Engine, EngineContext, EngineOptions, HookAnswers, WaitFor};

/// The field manager of another writer's write when the recording did not name it.
pub const UNKNOWN_WRITER: &str = "recorded-writer";

/// How long the engine must stay idle before the next recorded write goes in (the server is
/// in this process: its events arrive within microseconds).
const IDLE: Duration = Duration::from_millis(50);

/// How a replay runs.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Call the hooks of the definitions instead of serving the recorded answers.
    pub live_hooks: bool,
    /// Replaces scheme, host and port of webhook URLs (with `live_hooks`).
    pub hook_base_url: Option<String>,
    /// One sync at a time, each waiting for [`Session::advance`].
    pub stepped: bool,
}

/// Why a replay cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A recorded object of a type the server does not serve and no definition names.
    #[error(
        "the recording holds a {kind} ({api_version}), a type neither the sandbox nor the definitions know"
    )]
    UnknownType {
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// The server refused a recorded object of the first state.
    #[error("the sandbox refused the recorded {what}: {message}")]
    Refused {
        /// `Kind namespace/name`.
        what: String,
        /// What the server said.
        message: String,
    },
    /// A recorded object is not a Kubernetes object.
    #[error("not a Kubernetes object: {0}")]
    NotAnObject(String),
    /// The server refused a CustomResourceDefinition the replay needs.
    #[error("creating a CustomResourceDefinition for {name}: {message}")]
    Crd {
        /// `plural.group`.
        name: String,
        /// What the server said.
        message: String,
    },
    /// A CustomResourceDefinition was created but its type not served within 10 s.
    #[error("the sandbox did not serve {kind}.{api_version}")]
    NotServed {
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// The engine's services could not be set up.
    #[error("setting up the engine: {0}")]
    Engine(#[from] crate::hooks::HookError),
}

impl ReplayError {
    /// The recording (not the machine) is at fault: a usage error for the command line.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ReplayError::UnknownType { .. }
                | ReplayError::Refused { .. }
                | ReplayError::NotAnObject(_)
        )
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Events in the recording.
    pub events: usize,
    /// Other writers' writes applied.
    pub applied: usize,
    /// Other writers' writes not applied (yet).
    pub not_applied: usize,
    /// With recorded answers: (recorded answers served at least once, recorded answers,
    /// calls served beyond the recording).
    pub answers: Option<(usize, usize, usize)>,
    /// `hotLoop` events.
    pub hot_loops: usize,
    /// Syncs that ended with an error.
    pub failed: usize,
    /// Steps made (sync and finalize calls let through).
    pub steps: usize,
    /// Recorded writes that did not apply (the replay went another way), one line each.
    pub notes: Vec<String>,
}

/// How a drive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every recorded write was applied and the engine is idle.
    Finished,
    /// Stepped: the next sync waits for its turn (the steps allowed were made).
    Waiting,
    /// The deadline came first.
    TimedOut,
}

/// A recording ready to replay: its window, the definitions to run, how.
#[derive(Debug, Clone)]
pub struct Replayer {
    window: Window,
    defs: Vec<ControllerDef>,
    writes: Vec<ExternalWrite>,
    options: ReplayOptions,
}

impl Replayer {
    /// The replay of `window` with the controllers `defs`.
    pub fn new(window: Window, defs: Vec<ControllerDef>, options: ReplayOptions) -> Replayer {
        let writes = window.external_writes();
        Replayer {
            window,
            defs,
            writes,
            options,
        }
    }

    /// The recording read back.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// The recorded steps: sync and finalize calls.
    pub fn steps(&self) -> usize {
        self.window
            .calls
            .iter()
            .filter(|c| matches!(c.hook.as_str(), "sync" | "finalize"))
            .count()
    }

    /// Load the first state into the server of `client` (fresh: nothing of the recording in
    /// it) and start the engine on it, its events on `bus` (subscribe before, to see all).
    pub async fn start(
        &self,
        client: &kube::Client,
        bus: &EventBus,
    ) -> Result<Session, ReplayError> {
        install_crds(client, &self.defs, &self.window, &self.writes).await?;
        load_first_state(client, &self.window).await?;
        let recorded = (!self.options.live_hooks).then(|| Arc::new(self.window.answers()));
        let (budget, _) = watch::channel(if self.options.stepped { 0 } else { usize::MAX });
        let (parked, _) = watch::channel(0);
        let turns = Arc::new(Turns {
            recorded: recorded.clone(),
            budget,
            started: AtomicUsize::new(0),
            parked,
        });
        let options = EngineOptions {
            answers: Some(Arc::clone(&turns) as Arc<dyn HookAnswers>),
            hook_base_url: self.options.hook_base_url.clone(),
            // Recorded service webhooks resolve (they are never called with recorded answers).
            service_dns: !self.options.live_hooks,
            workers: if self.options.stepped {
                1
            } else {
                EngineOptions::default().workers
            },
            ..EngineOptions::default()
        };
        let ctx = Arc::new(EngineContext::new(client.clone(), bus.clone(), options)?);
        let seen = Seen::follow(bus);
        let mut engine = Engine::new(ctx);
        engine.set_wait_for(WaitFor::None);
        engine.set_quiet(IDLE);
        for d in &self.defs {
            engine.start(d.clone());
        }
        Ok(Session {
            engine,
            client: client.clone(),
            pending: self.writes.clone(),
            stepped: self.options.stepped,
            turns,
            recorded,
            seen,
            report: ReplayReport {
                events: self.window.events,
                ..ReplayReport::default()
            },
        })
    }
}

/// A replay under way (see the module header).
pub struct Session {
    engine: Engine,
    client: kube::Client,
    pending: Vec<ExternalWrite>,
    stepped: bool,
    turns: Arc<Turns>,
    recorded: Option<Arc<RecordedAnswers>>,
    seen: Seen,
    report: ReplayReport,
}

/// What one look at the engine found.
enum Look {
    /// `wait_converged` returned: idle or not.
    Converged(bool),
    /// The engine updated an object.
    Wrote,
    /// Stepped: a sync waits for its turn and nothing else happened for a while.
    Waiting,
}

impl Session {
    /// Drive to the end: until every recorded write was applied and the engine is idle, or
    /// `timeout`. Stepped sessions are let run without holding any step.
    pub async fn run(&mut self, timeout: Duration) -> Result<Outcome, ReplayError> {
        self.turns.budget.send_replace(usize::MAX);
        self.drive(Instant::now() + timeout).await
    }

    /// Stepped: allow `n` more steps and drive until the next sync waits for its turn, every
    /// write was applied and the engine is idle, or `timeout`.
    pub async fn advance(&mut self, n: usize, timeout: Duration) -> Result<Outcome, ReplayError> {
        let to = self.position().saturating_add(n);
        self.turns.budget.send_modify(|b| *b = (*b).max(to));
        self.drive(Instant::now() + timeout).await
    }

    /// Steps made so far (sync and finalize calls let through).
    pub fn position(&self) -> usize {
        self.turns.started.load(Ordering::SeqCst)
    }

    /// What the replay did so far.
    pub fn report(&self) -> ReplayReport {
        let mut r = self.report.clone();
        r.not_applied = self.pending.len();
        r.answers = self.recorded.as_ref().map(|a| a.progress());
        r.hot_loops = self.seen.hot_loops();
        r.failed = self.seen.failed();
        r.steps = self.position();
        r
    }

    /// Stop the engine; what the replay did.
    pub async fn shutdown(self) -> ReplayReport {
        // Waiting syncs go ahead (and see the engine stopping).
        self.turns.budget.send_replace(usize::MAX);
        let report = self.report();
        self.engine.shutdown().await;
        report
    }

    async fn drive(&mut self, deadline: Instant) -> Result<Outcome, ReplayError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let look = tokio::select! {
                rep = self.engine.wait_converged(left.min(Duration::from_secs(1))) => {
                    Look::Converged(rep.converged && rep.pending.is_empty())
                }
                () = self.seen.wrote.notified() => Look::Wrote,
                () = waiting(&self.turns, &self.seen), if self.stepped => Look::Waiting,
            };
            // The engine wrote an object another client wrote next: that client answers at
            // once, as it did (a fight's writer sets the field back right after the engine's
            // write).
            let calls = self.seen.calls();
            for (resource, object) in self.seen.take_written() {
                if let Some(i) = self.pending.iter().position(|w| {
                    w.event_names() == (resource.clone(), object.clone())
                        && calls.get(&w.subject).copied().unwrap_or(0) >= w.before_call
                }) {
                    let w = self.pending.remove(i);
                    self.apply(&w).await?;
                }
            }
            let idle = match look {
                Look::Wrote => continue,
                Look::Converged(idle) => idle,
                Look::Waiting => false,
            };
            if !idle && !matches!(look, Look::Waiting) {
                if Instant::now() >= deadline {
                    return Ok(Outcome::TimedOut);
                }
                continue;
            }
            if idle && self.pending.is_empty() {
                return Ok(Outcome::Finished);
            }
            // Idle: the writes due before the syncs made so far, else (the engine has nothing
            // left to do) the next one recorded.
            let mut take: Vec<usize> = (0..self.pending.len())
                .filter(|i| {
                    calls.get(&self.pending[*i].subject).copied().unwrap_or(0)
                        >= self.pending[*i].before_call
                })
                .collect();
            if take.is_empty() {
                if !idle {
                    // A sync waits for the next step: this one is done.
                    return Ok(Outcome::Waiting);
                }
                take.push(0);
            }
            for i in take.into_iter().rev() {
                let w = self.pending.remove(i);
                self.apply(&w).await?;
            }
        }
    }

    /// Apply another writer's recorded write, as its field manager.
    async fn apply(&mut self, w: &ExternalWrite) -> Result<(), ReplayError> {
        let target = json!({"apiVersion": w.api_version, "kind": w.kind,
            "metadata": {"name": w.name, "namespace": w.namespace}});
        let api = api_for(&self.client, &target).await?;
        let manager = w
            .manager
            .clone()
            .unwrap_or_else(|| UNKNOWN_WRITER.to_string());
        let result = if w.delete {
            api.delete(&w.name, &kube::api::DeleteParams::default())
                .await
                .map(|_| ())
        } else if w.create {
            let mut v = w.patch.clone();
            if let Some(m) = v["metadata"].as_object_mut() {
                for f in SERVER_SET {
                    m.shift_remove(f);
                }
                m.shift_remove("ownerReferences");
            }
            let pp = PostParams {
                field_manager: Some(manager),
                ..PostParams::default()
            };
            api.create(&pp, &dynamic(&v)?).await.map(|_| ())
        } else {
            let pp = PatchParams {
                field_manager: Some(manager),
                ..PatchParams::default()
            };
            api.patch(&w.name, &pp, &Patch::Merge(&w.patch))
                .await
                .map(|_| ())
        };
        match result {
            Ok(()) => self.report.applied += 1,
            // The replay went another way (the object is gone, or already there): noted.
            Err(e) => self.report.notes.push(format!(
                "the recorded write of {} by another client did not apply: {e}",
                w.describe()
            )),
        }
        Ok(())
    }
}

/// Resolves once every step allowed was taken, a sync waits for its turn, and no event came
/// for [`IDLE`].
async fn waiting(turns: &Turns, seen: &Seen) {
    let mut parked = turns.parked.subscribe();
    let mut budget = turns.budget.subscribe();
    let held = |turns: &Turns| {
        *turns.parked.borrow() > 0 && turns.started.load(Ordering::SeqCst) >= *turns.budget.borrow()
    };
    loop {
        if !held(turns) {
            // A sync parks, or a step is allowed (then the new budget is looked at).
            tokio::select! {
                r = parked.changed() => if r.is_err() { return std::future::pending().await },
                r = budget.changed() => if r.is_err() { return std::future::pending().await },
            }
            continue;
        }
        let until = seen.last_event() + IDLE;
        if Instant::now() < until {
            tokio::time::sleep_until(until.into()).await;
            continue;
        }
        if held(turns) {
            return;
        }
    }
}

/// The step gate and the recorded answers, as the engine asks for answers.
#[derive(Debug)]
struct Turns {
    recorded: Option<Arc<RecordedAnswers>>,
    /// How many sync and finalize calls may go ahead in all.
    budget: watch::Sender<usize>,
    /// How many went ahead.
    started: AtomicUsize,
    /// How many wait for their turn.
    parked: watch::Sender<usize>,
}

/// Counts a waiting call out again however its wait ends.
struct Parked<'a>(&'a watch::Sender<usize>);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|p| *p = p.saturating_sub(1));
    }
}

impl HookAnswers for Turns {
    fn answer(&self, info: &CallInfo, body: &Value) -> Option<Result<Value, String>> {
        self.recorded.as_ref()?.answer(info, body)
    }

    fn turn<'a>(&'a self, info: &'a CallInfo) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !matches!(info.hook.as_str(), "sync" | "finalize") {
                return;
            }
            let mut budget = self.budget.subscribe();
            let mut parked = None;
            loop {
                let allowed = *budget.borrow_and_update();
                if self.started.load(Ordering::SeqCst) < allowed {
                    // Counted out before the turn is taken: the driver never sees a sync both
                    // waiting and past its turn.
                    drop(parked.take());
                    if self
                        .started
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                            (s < allowed).then_some(s + 1)
                        })
                        .is_ok()
                    {
                        return;
                    }
                }
                if parked.is_none() {
                    self.parked.send_modify(|p| *p += 1);
                    parked = Some(Parked(&self.parked));
                }
                if budget.changed().await.is_err() {
                    return;
                }
            }
        })
    }
}

/// What the replay's events said so far: sync and finalize calls per parent, hot loops,
/// failed syncs.
#[derive(Clone)]
struct Seen {
    inner: Arc<Mutex<SeenInner>>,
    /// Notified on each write of the engine to an object.
    wrote: Arc<Notify>,
}

struct SeenInner {
    calls: HashMap<Subject, usize>,
    /// The objects the engine updated since the last look: (`Kind.apiVersion`, `ns/name`).
    written: Vec<(String, String)>,
    hot_loops: usize,
    failed: usize,
    /// When the last event came.
    last: Instant,
}

impl Seen {
    fn follow(bus: &EventBus) -> Seen {
        let seen = Seen {
            inner: Arc::new(Mutex::new(SeenInner {
                calls: HashMap::new(),
                written: Vec::new(),
                hot_loops: 0,
                failed: 0,
                last: Instant::now(),
            })),
            wrote: Arc::new(Notify::new()),
        };
        let mut rx = bus.subscribe();
        let s = seen.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let e = match rx.recv().await {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let Ok(mut i) = s.inner.lock() else { break };
                i.last = Instant::now();
                match e {
                    EngineEvent::HookCalled {
                        controller,
                        subject,
                        hook,
                        ..
                    } if hook == "sync" || hook == "finalize" => {
                        *i.calls
                            .entry((controller, subject.parent, subject.map_key))
                            .or_default() += 1;
                    }
                    EngineEvent::Action {
                        verb: ActionVerb::Update,
                        resource,
                        object,
                        error: None,
                        ..
                    } => {
                        i.written.push((resource, object));
                        s.wrote.notify_one();
                    }
                    EngineEvent::HotLoop { .. } => i.hot_loops += 1,
                    EngineEvent::SyncFinished { error: Some(_), .. } => i.failed += 1,
                    _ => {}
                }
            }
        });
        seen
    }

    fn calls(&self) -> HashMap<Subject, usize> {
        self.inner
            .lock()
            .map(|s| s.calls.clone())
            .unwrap_or_default()
    }

    fn take_written(&self) -> Vec<(String, String)> {
        self.inner
            .lock()
            .map(|mut s| std::mem::take(&mut s.written))
            .unwrap_or_default()
    }

    fn hot_loops(&self) -> usize {
        self.inner.lock().map_or(0, |s| s.hot_loops)
    }

    fn failed(&self) -> usize {
        self.inner.lock().map_or(0, |s| s.failed)
    }

    fn last_event(&self) -> Instant {
        self.inner
            .lock()
            .map_or_else(|_| Instant::now(), |s| s.last)
    }
}

/// The resource of (`api_version`, `kind`) on the server, if it serves it.
async fn resource(client: &kube::Client, api_version: &str, kind: &str) -> Option<ApiResource> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk)
        .await
        .ok()
        .map(|(ar, _)| ar)
}

/// Every `{apiVersion, resource}` a definition names (parent, children, attachments, ...).
fn resources_of(raw: &Value, out: &mut BTreeSet<(String, String)>) {
    match raw {
        Value::Object(m) => {
            if let (Some(a), Some(r)) = (
                m.get("apiVersion").and_then(Value::as_str),
                m.get("resource").and_then(Value::as_str),
            ) {
                out.insert((a.to_string(), r.to_string()));
            }
            m.values().for_each(|v| resources_of(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| resources_of(v, out)),
        _ => {}
    }
}

/// A CustomResourceDefinition accepting anything (with a status subresource) for each type the
/// definitions name that the server does not serve, its kind and scope from the recorded
/// objects.
async fn install_crds(
    client: &kube::Client,
    defs: &[ControllerDef],
    window: &Window,
    writes: &[ExternalWrite],
) -> Result<(), ReplayError> {
    // (apiVersion, kind) -> namespaced, from every recorded object.
    let mut kinds: HashMap<(String, String), bool> = HashMap::new();
    let mut note = |o: &Value| {
        if let (Some(a), Some(k)) = (o["apiVersion"].as_str(), o["kind"].as_str()) {
            let ns = o["metadata"]["namespace"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            *kinds.entry((a.to_string(), k.to_string())).or_default() |= ns;
        }
    };
    window.first_state().iter().for_each(&mut note);
    for c in &window.calls {
        if let Ok(a) = &c.answer {
            for k in ["children", "attachments"] {
                a[k].as_array().into_iter().flatten().for_each(&mut note);
            }
        }
    }
    for w in writes {
        note(&json!({"apiVersion": w.api_version, "kind": w.kind,
                     "metadata": {"namespace": w.namespace}}));
    }
    let mut declared = BTreeSet::new();
    for d in defs {
        resources_of(&d.raw()["spec"], &mut declared);
    }
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let mut made = Vec::new();
    for (api_version, plural) in &declared {
        let Some((group, version)) = api_version.split_once('/') else {
            continue; // the core group: built in.
        };
        if served(client, api_version, plural).await {
            continue;
        }
        // The kind: a recorded object's of this apiVersion whose plural this is.
        let (kind, namespaced) = kinds
            .iter()
            .filter(|((a, _), _)| a == api_version)
            .find(|((_, k), _)| plural_of(k) == *plural)
            .map(|((_, k), ns)| (k.clone(), *ns))
            .unwrap_or_else(|| (kind_of(plural), true));
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "scope": if namespaced { "Namespaced" } else { "Cluster" },
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": version, "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        });
        crds.create(&PostParams::default(), &dynamic(&crd)?)
            .await
            .map_err(|e| ReplayError::Crd {
                name: format!("{plural}.{group}"),
                message: e.to_string(),
            })?;
        made.push((api_version.clone(), kind));
    }
    // Served once Established (the sandbox establishes at once).
    let until = Instant::now() + Duration::from_secs(10);
    for (api_version, kind) in made {
        while resource(client, &api_version, &kind).await.is_none() {
            if Instant::now() > until {
                return Err(ReplayError::NotServed { api_version, kind });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

/// Whether the server serves `plural` in `api_version`.
async fn served(client: &kube::Client, api_version: &str, plural: &str) -> bool {
    client
        .list_api_group_resources(api_version)
        .await
        .is_ok_and(|l| l.resources.iter().any(|r| r.name == plural))
}

/// The lowercase plural of a kind, as most CRDs spell it.
fn plural_of(kind: &str) -> String {
    let k = kind.to_lowercase();
    if let Some(stem) = k.strip_suffix('y') {
        format!("{stem}ies")
    } else if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else {
        format!("{k}s")
    }
}

/// A kind for a plural nothing recorded names (`widgets` -> `Widget`).
fn kind_of(plural: &str) -> String {
    let s = plural
        .strip_suffix("ies")
        .map(|s| format!("{s}y"))
        .or_else(|| plural.strip_suffix('s').map(str::to_string))
        .unwrap_or_else(|| plural.to_string());
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn dynamic(v: &Value) -> Result<DynamicObject, ReplayError> {
    serde_json::from_value(v.clone()).map_err(|e| ReplayError::NotAnObject(e.to_string()))
}

/// The API of `o`'s resource on the server.
async fn api_for(client: &kube::Client, o: &Value) -> Result<Api<DynamicObject>, ReplayError> {
    let (a, k) = (
        o["apiVersion"].as_str().unwrap_or_default(),
        o["kind"].as_str().unwrap_or_default(),
    );
    let ar = resource(client, a, k)
        .await
        .ok_or_else(|| ReplayError::UnknownType {
            api_version: a.to_string(),
            kind: k.to_string(),
        })?;
    Ok(
        match o["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        },
    )
}

/// Create the window's first state (parents first; owner references moved to the copies).
async fn load_first_state(client: &kube::Client, window: &Window) -> Result<(), ReplayError> {
    let objects = window.first_state();
    let namespaces: BTreeSet<&str> = objects
        .iter()
        .filter_map(|o| o["metadata"]["namespace"].as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let ns_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    for ns in namespaces {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let _ = ns_api.create(&PostParams::default(), &dynamic(&obj)?).await;
    }
    let mut uids: HashMap<String, String> = HashMap::new();
    for o in objects {
        let old_uid = o["metadata"]["uid"].as_str().map(str::to_string);
        let mut v = o.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            object::retarget_copy(m, &uids);
        }
        let status = v.as_object_mut().and_then(|m| m.shift_remove("status"));
        let api = api_for(client, &v).await?;
        let created = match api.create(&PostParams::default(), &dynamic(&v)?).await {
            Ok(c) => c,
            // What the sandbox makes itself (kube-root-ca.crt, the default ServiceAccount).
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => {
                return Err(ReplayError::Refused {
                    what: describe(&v),
                    message: e.to_string(),
                });
            }
        };
        if let (Some(old), Some(new)) = (old_uid, created.metadata.uid.clone()) {
            uids.insert(old, new);
        }
        if let Some(status) = status.filter(|s| !s.is_null()) {
            let name = created.metadata.name.clone().unwrap_or_default();
            // Types without a status subresource kept it with the create.
            let _ = api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await;
        }
    }
    Ok(())
}

fn describe(o: &Value) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", o["kind"].as_str().unwrap_or_default()),
        None => format!("{} {name}", o["kind"].as_str().unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_kinds() {
        assert_eq!(plural_of("Widget"), "widgets");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(kind_of("widgets"), "Widget");
        assert_eq!(kind_of("policies"), "Policy");
    }
}
