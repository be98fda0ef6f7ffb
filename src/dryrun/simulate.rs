//! `dryrun --simulate`: every sync until the controllers converge, on a private copy of the
//! cluster.
//!
//! 1. [`Copy::load`]: the live objects the syncs observed (parents, children, related
//!    objects, ControllerRevisions: what [`LiveReader`] listed; the sync hooks are not called
//!    for that), their CustomResourceDefinitions and namespaces, created in a [`Sandbox`] in
//!    this process: owners first, `ownerReferences` moved to the copies' uids, statuses written
//!    through the status subresource (labels holding an owner's uid follow it too: the
//!    `controller-uid` of generateSelector). The live cluster is only read. The engine talks to the
//!    sandbox through [`Sandbox::in_process_client`]: no socket, TLS or HTTP framing.
//! 2. [`run`]: the real [`Engine`] (as `dev --once` runs it) and the real hooks against the
//!    sandbox, until every parent converged by the same rule as `dev --once` (its last sync
//!    wrote nothing and every child is Current, see [`crate::engine::plan::kstatus`]), a parent
//!    took more than `max_steps` syncs, or the time ran out. Readiness comes from the sandbox's
//!    simulated kubelet and controllers, without delay ([`READINESS_NOTE`]): a simulation
//!    counts syncs, not seconds.
//! 3. The end state per parent as entries against live ([`end_state`]), the steps each parent
//!    took, and why it did not converge when it did not ([`Cause`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig, Tunables};
use serde::Serialize;
use serde_json::{Value, json};

use crate::dryrun::render::{Action, Entry, RenderOptions, Summary, diff, shown_pair};
use crate::engine::LiveReader;
// Fields stripped from a live object before it is created in the sandbox.
use crate::engine::events::{EngineEvent, EventBus, EventParent, EventSubject};
use crate::engine::k8s::object::SERVER_SET;
use crate::engine::plan::planner::ObjectAction;
use crate::engine::{Engine, OnceReport, WaitFor};
use crate::engine::{EngineContext, EngineOptions};
use crate::hooks::endpoint::ResolvedController;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::object::{self, ObjectKey};
use crate::spec::ControllerDef;

/// Why a simulation could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The in-process sandbox did not start.
    #[error("starting the in-process sandbox for --simulate: {0}")]
    Sandbox(String),
    /// Reading the live cluster failed.
    #[error("reading {what} from the live cluster: {message}")]
    Live {
        /// What was read.
        what: String,
        /// The API server's answer.
        message: String,
    },
    /// The sandbox refused a copy (the object is named).
    #[error("copying {what} into the sandbox: {message}")]
    Copy {
        /// `Kind namespace/name`.
        what: String,
        /// The sandbox's answer.
        message: String,
    },
    /// The engine could not be set up against the sandbox.
    #[error("setting up the engine against the sandbox: {0}")]
    Engine(String),
}

/// How long and how far to simulate.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most syncs of one parent.
    pub max_steps: usize,
    /// Most wall time for the whole run.
    pub timeout: Duration,
}

/// One copied object: its resource, the live object, and its copy's uid.
#[derive(Debug, Clone)]
pub struct Copied {
    /// The resource.
    pub info: ResourceInfo,
    /// The object as live.
    pub live: Arc<Value>,
    /// The copy's uid in the sandbox.
    pub uid: String,
    /// The live `metadata.generation` minus the copy's (the sandbox starts a copy at 1): what
    /// turns a generation of the copy into the live one it stands for.
    pub generation_offset: i64,
}

/// The sandbox holding the copy, and how its objects map to the live ones.
pub struct Copy {
    /// The in-process API server.
    pub sandbox: Sandbox,
    /// A client of it.
    pub client: kube::Client,
    /// Every copied object.
    pub objects: Vec<Copied>,
    /// The resources listed (copied or not: types with no object yet included).
    pub resources: Vec<ResourceInfo>,
    /// Sandbox uid -> live uid.
    pub live_uid: HashMap<String, String>,
    /// Sandbox uid -> [`Copied::generation_offset`].
    generation_offset: HashMap<String, i64>,
}

impl Copy {
    /// Start a sandbox and copy into it what `live` listed (see the module header).
    pub async fn load(live: &LiveReader, live_client: &kube::Client) -> Result<Copy, SimError> {
        let started = Instant::now();
        let sandbox = Sandbox::start(SandboxConfig {
            tunables: simulated_tunables(),
            ..SandboxConfig::ephemeral()
        })
        .await
        .map_err(|e| SimError::Sandbox(e.to_string()))?;
        // In process: no socket, TLS or HTTP framing between the engine and its private cluster.
        let client = sandbox.in_process_client();
        tracing::debug!(ms = ms(started), "simulate: sandbox started");
        let listed = live.listed().await;
        let resources: Vec<ResourceInfo> = listed.iter().map(|(i, _)| i.clone()).collect();
        copy_crds(live_client, &client, &resources).await?;
        let mut pending: Vec<(ResourceInfo, Arc<Value>)> = Vec::new();
        let mut namespaces = BTreeSet::new();
        for (info, l) in &listed {
            for o in l.list(None) {
                if o["metadata"]["deletionTimestamp"].is_string() {
                    continue;
                }
                if let Some(ns) = object::namespace(&o) {
                    namespaces.insert(ns.to_string());
                }
                pending.push((info.clone(), o));
            }
        }
        for ns in &namespaces {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_ar());
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let _ = api.create(&PostParams::default(), &dynamic(&obj)?).await;
        }
        let copying: BTreeSet<String> = pending
            .iter()
            .filter_map(|(_, o)| object::uid(o).map(str::to_string))
            .collect();
        let mut uid_map: HashMap<String, String> = HashMap::new();
        let mut objects = Vec::new();
        // Owners first: an object goes once every owner it has among the copies is copied.
        while !pending.is_empty() {
            let (ready, rest): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(_, o)| {
                owner_uids(o)
                    .iter()
                    .all(|u| !copying.contains(u) || uid_map.contains_key(u))
            });
            if ready.is_empty() {
                // An ownership cycle: copy the rest without the owners not copied yet.
                for (info, o) in rest {
                    let (uid, generation_offset) =
                        create_copy(&client, &info, &o, &uid_map).await?;
                    remember(&mut uid_map, &o, &uid);
                    objects.push(Copied {
                        info,
                        live: o,
                        uid,
                        generation_offset,
                    });
                }
                break;
            }
            for (info, o) in ready {
                let (uid, generation_offset) = create_copy(&client, &info, &o, &uid_map).await?;
                remember(&mut uid_map, &o, &uid);
                objects.push(Copied {
                    info,
                    live: o,
                    uid,
                    generation_offset,
                });
            }
            pending = rest;
        }
        tracing::debug!(
            ms = ms(started),
            objects = objects.len(),
            "simulate: live objects copied"
        );
        let live_uid = uid_map
            .iter()
            .map(|(l, s)| (s.clone(), l.clone()))
            .collect();
        let generation_offset = objects
            .iter()
            .map(|c| (c.uid.clone(), c.generation_offset))
            .collect();
        let copy = Copy {
            sandbox,
            client,
            objects,
            resources,
            live_uid,
            generation_offset,
        };
        copy.settle().await;
        tracing::debug!(ms = ms(started), "simulate: the copy settled");
        Ok(copy)
    }

    /// Wait until the sandbox's simulated controllers are done with the copies: a copied
    /// Deployment gets its ReplicaSet and Pods (they are not copied), and its status and
    /// revision annotation are written, all within milliseconds of the copy. An engine started
    /// before that updates a child from a resourceVersion already gone (`409 Conflict` in a
    /// copy nothing else writes, and a step that is not one). Settled: every copy Current
    /// ([`crate::engine::plan::kstatus`]) and no write for [`SETTLE_QUIET`]; or, for what
    /// nothing in the sandbox makes Current, no write for [`STALL`]; at most [`SETTLE_MAX`].
    async fn settle(&self) {
        let deadline = Instant::now() + SETTLE_MAX;
        let mut last = (global_rv(&self.client).await, Instant::now());
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let rv = global_rv(&self.client).await;
            if rv != last.0 {
                last = (rv, Instant::now());
                continue;
            }
            let quiet = last.1.elapsed();
            if quiet >= STALL || Instant::now() >= deadline {
                return;
            }
            if quiet >= SETTLE_QUIET && self.all_current().await {
                return;
            }
        }
    }

    /// Whether every copied object is Current in the sandbox now.
    async fn all_current(&self) -> bool {
        use crate::engine::plan::kstatus::{Status, compute};
        for c in &self.objects {
            let api: Api<DynamicObject> = match (object::namespace(&c.live), c.info.namespaced) {
                (Some(ns), true) => {
                    Api::namespaced_with(self.client.clone(), ns, &c.info.api_resource)
                }
                _ => Api::all_with(self.client.clone(), &c.info.api_resource),
            };
            let Ok(Some(o)) = api.get_opt(object::name(&c.live).unwrap_or_default()).await else {
                continue;
            };
            let Ok(mut v) = serde_json::to_value(o) else {
                continue;
            };
            v["apiVersion"] = json!(c.info.api_resource.api_version);
            v["kind"] = json!(c.info.api_resource.kind);
            if matches!(compute(&v), Status::InProgress(_)) {
                return false;
            }
        }
        true
    }

    /// Turn the generations of a copy in `v` (`metadata.generation`, `status.observedGeneration`,
    /// its conditions' `observedGeneration`) into the live ones they stand for; call before
    /// [`Copy::to_live`] (the copy is found by its sandbox uid). An object created in the
    /// sandbox is left alone.
    pub fn generation_to_live(&self, v: &mut Value) {
        let Some(offset) = object::uid(v)
            .and_then(|u| self.generation_offset.get(u))
            .copied()
        else {
            return;
        };
        shift_generations(v, offset);
    }

    /// Replace every sandbox uid in `v` by the live uid it copies (ownerReferences, labels
    /// holding a parent's uid), so the end state compares with live.
    pub fn to_live(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Some(l) = self.live_uid.get(s.as_str()) {
                    *s = l.clone();
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.to_live(x)),
            Value::Object(m) => m.values_mut().for_each(|x| self.to_live(x)),
            _ => {}
        }
    }
}

/// The annotations holding a last-applied configuration (JSON text).
const LAST_APPLIED: [&str; 2] = [
    "metacontroller.k8s.io/last-applied-configuration",
    "kubectl.kubernetes.io/last-applied-configuration",
];

/// In `text`, a string of JSON, replace every string value that is a key of `uid_map` by its
/// value (text that is not JSON is left alone).
fn move_uids_in_json_text(text: &mut Value, uid_map: &HashMap<String, String>) {
    fn walk(v: &mut Value, uid_map: &HashMap<String, String>) {
        match v {
            Value::String(s) => {
                if let Some(copy) = uid_map.get(s.as_str()) {
                    s.clone_from(copy);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, uid_map)),
            Value::Object(m) => m.values_mut().for_each(|x| walk(x, uid_map)),
            _ => {}
        }
    }
    let Some(mut parsed) = text
        .as_str()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
    else {
        return;
    };
    walk(&mut parsed, uid_map);
    if let Ok(t) = serde_json::to_string(&parsed) {
        *text = Value::String(t);
    }
}

/// Add `by` to the generations `v` holds: `metadata.generation`, `status.observedGeneration`
/// and each `status.conditions[].observedGeneration` (none below 0).
fn shift_generations(v: &mut Value, by: i64) {
    if by == 0 {
        return;
    }
    let shift = |g: &mut Value| {
        if let Some(n) = g.as_i64() {
            *g = json!((n + by).max(0));
        }
    };
    if let Some(g) = v.pointer_mut("/metadata/generation") {
        shift(g);
    }
    if let Some(g) = v.pointer_mut("/status/observedGeneration") {
        shift(g);
    }
    if let Some(conds) = v
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds {
            if let Some(g) = c.get_mut("observedGeneration") {
                shift(g);
            }
        }
    }
}

fn remember(map: &mut HashMap<String, String>, live: &Value, copy_uid: &str) {
    if let Some(u) = object::uid(live) {
        map.insert(u.to_string(), copy_uid.to_string());
    }
}

fn owner_uids(o: &Value) -> Vec<String> {
    o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

fn namespace_ar() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
    }
}

fn dynamic(v: &Value) -> Result<DynamicObject, SimError> {
    serde_json::from_value(v.clone()).map_err(|e| SimError::Copy {
        what: describe(v),
        message: e.to_string(),
    })
}

fn describe(v: &Value) -> String {
    format!(
        "{} {}",
        object::kind(v).unwrap_or_default(),
        ObjectKey::of(v).map(|k| k.to_string()).unwrap_or_default()
    )
}

/// The simulated kubelet of the copy: Pods are Running and Ready as soon as they are
/// scheduled, run-to-completion Pods finish at once, deleted Pods stop at once (their
/// annotations `sandbox.kubectl-meta.io/run-seconds` and `stop-seconds` still apply). A
/// simulation counts syncs, not seconds: waiting would only make it slower.
fn simulated_tunables() -> Tunables {
    Tunables {
        kubelet_delay: Some(Duration::ZERO),
        pod_run: Duration::ZERO,
        ..Tunables::default()
    }
}

/// Milliseconds since `t`, for the timing lines (`KUBECTL_META_LOG=kubectl_meta::dryrun=debug`).
fn ms(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The CustomResourceDefinitions of the listed resources that have one on the live cluster.
async fn copy_crds(
    live: &kube::Client,
    sandbox: &kube::Client,
    resources: &[ResourceInfo],
) -> Result<(), SimError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let live_api: Api<CustomResourceDefinition> = Api::all(live.clone());
    let sb_api: Api<CustomResourceDefinition> = Api::all(sandbox.clone());
    let mut names = BTreeSet::new();
    for r in resources {
        if !r.api_resource.group.is_empty() {
            names.insert(format!(
                "{}.{}",
                r.api_resource.plural, r.api_resource.group
            ));
        }
    }
    for name in names {
        let crd = live_api.get_opt(&name).await.map_err(|e| SimError::Live {
            what: format!("CustomResourceDefinition {name}"),
            message: crate::k8s::kube_error_message(&e),
        })?;
        let Some(mut crd) = crd else { continue };
        crd.metadata = kube::api::ObjectMeta {
            name: crd.metadata.name.clone(),
            labels: crd.metadata.labels.clone(),
            annotations: crd.metadata.annotations.clone(),
            ..Default::default()
        };
        crd.status = None;
        sb_api
            .create(&PostParams::default(), &crd)
            .await
            .map_err(|e| SimError::Copy {
                what: format!("CustomResourceDefinition {name}"),
                message: crate::k8s::kube_error_message(&e),
            })?;
        // Served once Established (the sandbox establishes at once; wait for it anyway).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let established = sb_api.get_opt(&name).await.ok().flatten().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Create the copy of `live` (server-set fields stripped, owners and labels holding their
/// uids moved to their copies' uids, owners not copied dropped), then its status, its
/// observed generations moved to the copy's generation (the sandbox starts it at 1: a parent
/// live at generation 2 that observed it must not look, in the copy, as if it observed a
/// generation to come; the engine would write `observedGeneration: 1` and show a status
/// change that live will not see); returns the copy's uid and [`Copied::generation_offset`].
async fn create_copy(
    client: &kube::Client,
    info: &ResourceInfo,
    live: &Value,
    uid_map: &HashMap<String, String>,
) -> Result<(String, i64), SimError> {
    let mut v = live.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        // Server-set fields dropped; owner uids (labels, ownerReferences) moved to the copies.
        object::retarget_copy(m, uid_map);
        // So do the uids in a last-applied configuration (the labels above, as the engine
        // applied them): left live, the 3-way merge would update every such child at once.
        if let Some(notes) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            for key in LAST_APPLIED {
                if let Some(v) = notes.get_mut(key) {
                    move_uids_in_json_text(v, uid_map);
                }
            }
        }
    }
    if object::kind(&v) == Some("Pod")
        && let Some(spec) = v["spec"].as_object_mut()
    {
        // The sandbox schedules onto its own nodes.
        spec.shift_remove("nodeName");
    }
    let status = v.as_object_mut().and_then(|m| m.shift_remove("status"));
    let ns = object::namespace(&v).map(str::to_string);
    let api: Api<DynamicObject> = match (&ns, info.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
        _ => Api::all_with(client.clone(), &info.api_resource),
    };
    let failed = |e: kube::Error| SimError::Copy {
        what: describe(live),
        message: crate::k8s::kube_error_message(&e),
    };
    let name = object::name(&v).unwrap_or_default().to_string();
    let created = match api.create(&PostParams::default(), &dynamic(&v)?).await {
        Ok(c) => c,
        // What the sandbox makes itself (kube-root-ca.crt, the default ServiceAccount): its
        // own object stands for the live one.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await.map_err(failed)?;
            return Ok((existing.metadata.uid.unwrap_or_default(), 0));
        }
        Err(e) => return Err(failed(e)),
    };
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let offset = match (
        live["metadata"]["generation"].as_i64(),
        created.metadata.generation,
    ) {
        (Some(l), Some(c)) => l - c,
        _ => 0,
    };
    if let Some(mut status) = status
        && info.has_status
        && !status.is_null()
    {
        let mut holder = json!({"status": status});
        shift_generations(&mut holder, -offset);
        status = holder["status"].take();
        // A merge patch: the sandbox's controllers may have written the status meanwhile.
        api.patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": status})),
        )
        .await
        .map_err(failed)?;
    }
    Ok((uid, offset))
}

/// One sync of one parent that was planned in the sandbox.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// 1-based, per parent.
    pub step: usize,
    /// Writes the plan made.
    pub writes: usize,
    /// One `+ create Pod default/x` line per changing object, and `~ status` when the
    /// parent's status changed.
    pub actions: Vec<String>,
    /// The sync's error, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a parent did not converge.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "cause"
)]
pub enum Cause {
    /// The hot-loop guard found a child field the server rewrites on every sync.
    HotLoop {
        /// The guard's finding (field, the hook's value, the server's value).
        message: String,
    },
    /// The parent's status changed on every sync until `--max-steps`.
    StatusFlapping {
        /// The status fields that changed between the last two syncs.
        fields: Vec<String>,
    },
    /// A rollout or the parent waits for children to become Current and nothing made them.
    WaitingForReadiness {
        /// What it waits for.
        message: String,
    },
    /// The sync failed (a hook error, an answer the engine refuses, a write refused).
    SyncFailed {
        /// The step it failed at.
        step: usize,
        /// The error.
        message: String,
    },
    /// More than `--max-steps` syncs, writing each time.
    MaxSteps {
        /// The limit.
        max_steps: usize,
    },
    /// `--simulate-timeout` ran out with work still pending for it.
    Timeout {
        /// What was pending.
        message: String,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::HotLoop { message } => write!(f, "hot loop: {message}"),
            Cause::StatusFlapping { fields } => write!(
                f,
                "the status changes on every sync ({}): write it from what is observed, not from the time or a counter",
                fields.join(", ")
            ),
            Cause::WaitingForReadiness { message } => write!(
                f,
                "waiting on readiness nothing provides (even with the sandbox's simulated kubelet and controllers): {message}"
            ),
            Cause::SyncFailed { step, message } => {
                write!(f, "sync failed at step {step}: {message}")
            }
            Cause::MaxSteps { max_steps } => {
                write!(f, "still writing after {max_steps} syncs (--max-steps)")
            }
            Cause::Timeout { message } => write!(
                f,
                "--simulate-timeout ran out while it was still syncing: {message}"
            ),
        }
    }
}

/// What happened to one parent.
#[derive(Debug, Clone)]
pub struct ParentRun {
    /// The controller.
    pub controller: String,
    /// `namespace/name` (with the map key for a MapController key).
    pub parent: String,
    /// Its syncs, in order.
    pub steps: Vec<Step>,
    /// Why it did not converge, if it did not.
    pub cause: Option<Cause>,
    /// The end state against live: one entry per object that differs.
    pub entries: Vec<Entry>,
}

impl ParentRun {
    /// Syncs that wrote.
    pub fn writing_steps(&self) -> usize {
        self.steps.iter().filter(|s| s.writes > 0).count()
    }

    /// `converged in N sync(s), W writing`: every sync listed counts, the writing ones are
    /// said apart (a sync that wrote nothing still ran the hook).
    pub fn converged_line(&self) -> String {
        converged_in(self.steps.len(), self.writing_steps())
    }
}

/// `converged in N sync(s), W writing` (see [`ParentRun::converged_line`]).
fn converged_in(syncs: usize, writing: usize) -> String {
    format!("converged in {syncs} sync(s), {writing} writing")
}

/// How long everything must stay done before the run is called converged: the sandbox is in
/// this process, its events reach the engine within microseconds (a remote API server needs
/// [`crate::engine::QUIET`]).
const SIM_QUIET: Duration = Duration::from_millis(100);

/// How long nothing may change (no sync, no write in the sandbox) while the engine waits only
/// for children to become Current before the wait is called hopeless: the simulated kubelet
/// and controllers act at once, so what they provide comes within milliseconds.
const STALL: Duration = Duration::from_secs(2);

/// How long the copy must see no write, every copy Current, before the engine starts on it
/// ([`Copy::settle`]).
const SETTLE_QUIET: Duration = Duration::from_millis(150);

/// The most [`Copy::settle`] waits.
const SETTLE_MAX: Duration = Duration::from_secs(10);

/// Whether all that is left is waiting for children to become Current (or a rollout waiting
/// for them).
fn only_waiting(rep: &OnceReport) -> bool {
    !rep.pending.is_empty()
        && rep.pending.iter().all(|(_, what)| {
            what.contains(": waiting for ") || what.ends_with(": rollout in progress")
        })
}

/// The sandbox's current resourceVersion (of a list: the newest write).
async fn global_rv(client: &kube::Client) -> String {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_ar());
    api.list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .ok()
        .and_then(|l| l.metadata.resource_version)
        .unwrap_or_default()
}

/// What the engine spent its time on, for the timing lines.
#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    /// Syncs finished.
    syncs: usize,
    /// Their wall time, summed.
    sync: Duration,
    /// Hook calls.
    hook_calls: usize,
    /// Their wall time, summed.
    hooks: Duration,
}

/// Steps seen on the bus, per (controller, parent).
type Steps = Arc<Mutex<BTreeMap<(String, String), Vec<Step>>>>;

/// Status of each parent after each of its syncs (for [`Cause::StatusFlapping`]).
type Statuses = Arc<Mutex<BTreeMap<(String, String), Vec<Value>>>>;

/// Run the engine on the copy until convergence, `max_steps` syncs of a parent, or the
/// timeout; then compare the end state with live.
pub async fn run(
    copy: &Copy,
    defs: &[ControllerDef],
    endpoints: &[ResolvedController],
    options: EngineOptions,
    limits: Limits,
) -> Result<Vec<ParentRun>, SimError> {
    let bus = EventBus::new();
    // Metacontroller re-syncs on the echo of a status write: so does the simulation, so that
    // a status that changes on every sync is named (`dev` does not re-sync on its own echoes).
    let options = EngineOptions {
        confirm_status_writes: true,
        ..options
    };
    let ctx = Arc::new(
        EngineContext::new(copy.client.clone(), bus.clone(), options)
            .map_err(|e| SimError::Engine(e.to_string()))?,
    );
    for r in endpoints {
        ctx.hooks.set_endpoints(r);
    }
    let steps: Steps = Arc::default();
    let statuses: Statuses = Arc::default();
    let spent: Arc<Mutex<Spent>> = Arc::default();
    let collector = Collector::start(
        &bus,
        Collected {
            steps: Arc::clone(&steps),
            statuses: Arc::clone(&statuses),
            spent: Arc::clone(&spent),
        },
        copy.client.clone(),
        copy.resources.clone(),
    );
    let started = Instant::now();
    let mut engine = Engine::new(Arc::clone(&ctx));
    engine.set_wait_for(WaitFor::Current);
    engine.set_quiet(SIM_QUIET);
    for d in defs {
        engine.start(d.clone());
    }
    let deadline = Instant::now() + limits.timeout;
    let mut timed_out = false;
    // (the sandbox's resourceVersion, syncs so far) and since when it has not moved.
    let mut still: (Option<(String, usize)>, Instant) = (None, Instant::now());
    let report = loop {
        let rep = engine.wait_converged(Duration::from_millis(500)).await;
        let progress = (
            global_rv(&copy.client).await,
            spent.lock().map(|s| s.syncs).unwrap_or_default(),
        );
        if still.0.as_ref() != Some(&progress) {
            still = (Some(progress), Instant::now());
        }
        if only_waiting(&rep) && still.1.elapsed() >= STALL {
            // Nothing moves and only readiness is awaited: nothing in the sandbox provides it.
            break rep;
        }
        let done = rep.converged && rep.pending.is_empty();
        let over = steps
            .lock()
            .map(|s| s.values().any(|v| v.len() > limits.max_steps))
            .unwrap_or(false);
        if !done && Instant::now() >= deadline {
            timed_out = true;
            break rep;
        }
        if done || over || !rep.hot_loops.is_empty() {
            break rep;
        }
        if !rep.failed.is_empty() && rep.pending.is_empty() {
            // Only failures left: retrying with backoff would repeat them.
            break rep;
        }
    };
    let ran = ms(started);
    engine.shutdown().await;
    // Every event of the run is on the bus now: the collector takes them all, then stops.
    collector.finish().await;
    let spent = spent.lock().map(|s| *s).unwrap_or_default();
    tracing::debug!(
        ms = ran,
        syncs = spent.syncs,
        sync_ms = spent.sync.as_millis(),
        hook_calls = spent.hook_calls,
        hook_ms = spent.hooks.as_millis(),
        "simulate: engine run (sync and hook times summed over concurrent workers)"
    );
    let started = Instant::now();
    let now = Listing::read(copy).await;
    let steps = steps.lock().map(|s| s.clone()).unwrap_or_default();
    let statuses = statuses.lock().map(|s| s.clone()).unwrap_or_default();
    let mut runs = Vec::new();
    for ((controller, parent), st) in steps {
        let mut cause = cause_of(&report, &controller, &parent, &st, &statuses, limits);
        if cause.is_none() && timed_out {
            // Nothing named it, but the run did not end: say what was still going on.
            let pending: Vec<String> = report
                .pending
                .iter()
                .filter(|(c, _)| *c == controller)
                .map(|(_, w)| w.clone())
                .collect();
            cause = Some(Cause::Timeout {
                message: if pending.is_empty() {
                    "the controllers had not settled".to_string()
                } else {
                    pending.join("; ")
                },
            });
        }
        let entries = end_state(copy, &now, &parent);
        runs.push(ParentRun {
            controller,
            parent,
            steps: st,
            cause,
            entries,
        });
    }
    tracing::debug!(ms = ms(started), "simulate: end states against live");
    Ok(runs)
}

/// Where the collector puts what it saw.
struct Collected {
    steps: Steps,
    statuses: Statuses,
    spent: Arc<Mutex<Spent>>,
}

/// The tasks that collect what the engine publishes: [`collect`] reads the bus and records
/// steps and times without waiting on anything; the parents' statuses after their writing
/// syncs are read by [`read_statuses`], in the order of the syncs, so that a read never holds
/// up the bus. Stopped in order by [`Collector::finish`].
struct Collector {
    done: tokio_util::sync::CancellationToken,
    events: tokio::task::JoinHandle<()>,
    statuses: tokio::task::JoinHandle<()>,
}

impl Collector {
    /// Subscribe to `bus` and start both tasks.
    fn start(
        bus: &EventBus,
        out: Collected,
        client: kube::Client,
        resources: Vec<ResourceInfo>,
    ) -> Collector {
        let done = tokio_util::sync::CancellationToken::new();
        let (to_read, reads) = tokio::sync::mpsc::unbounded_channel();
        let statuses = tokio::spawn(read_statuses(
            reads,
            Arc::clone(&out.statuses),
            client,
            resources,
        ));
        let events = tokio::spawn(collect(bus.subscribe(), out, to_read, done.clone()));
        Collector {
            done,
            events,
            statuses,
        }
    }

    /// Once the engine is shut down (nothing more is published): take every event still on
    /// the bus, then every status read asked for, and stop.
    async fn finish(self) {
        self.done.cancel();
        if let Err(e) = self.events.await {
            tracing::warn!(error = %e, "simulate: the step collector ended abnormally");
        }
        // The collector dropped its sender: the reader ends after the reads queued.
        if let Err(e) = self.statuses.await {
            tracing::warn!(error = %e, "simulate: the status reader ended abnormally");
        }
    }
}

/// Read the status of each parent named on `reads` (after one of its writing syncs), in
/// order, into `out`; ends when the collector is done and every read asked for is made.
async fn read_statuses(
    mut reads: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    out: Statuses,
    client: kube::Client,
    resources: Vec<ResourceInfo>,
) {
    while let Some(key) = reads.recv().await {
        if let Some(status) = parent_status(&client, &resources, &key.1).await
            && let Ok(mut s) = out.lock()
        {
            s.entry(key).or_default().push(status);
        }
    }
}

/// Collect the steps (Planned, then SyncFinished) and the hook and sync times from the bus,
/// and ask for the parent's status after each writing sync; once `done` is cancelled, take
/// what is left on the bus and return.
async fn collect(
    mut rx: crate::engine::events::EventReceiver,
    out: Collected,
    read_status: tokio::sync::mpsc::UnboundedSender<(String, String)>,
    done: tokio_util::sync::CancellationToken,
) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut planned: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut lagged = 0u64;
    loop {
        let ev = tokio::select! {
            biased;
            ev = rx.recv() => match ev {
                Ok(ev) => ev,
                Err(RecvError::Lagged(n)) => {
                    lagged += n;
                    continue;
                }
                Err(RecvError::Closed) => break,
            },
            () = done.cancelled() => match rx.try_recv() {
                Ok(ev) => ev,
                Err(TryRecvError::Lagged(n)) => {
                    lagged += n;
                    continue;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            },
        };
        on_event(ev, &out, &mut planned, &read_status);
    }
    if lagged > 0 {
        tracing::warn!(
            lagged,
            "simulate: the step collector fell behind the engine's events; steps may be missing"
        );
    }
}

/// Record one engine event (see [`collect`]).
fn on_event(
    ev: EngineEvent,
    out: &Collected,
    planned: &mut HashMap<(String, String), Vec<String>>,
    read_status: &tokio::sync::mpsc::UnboundedSender<(String, String)>,
) {
    match ev {
        EngineEvent::HookCalled { latency, .. } => {
            if let Ok(mut s) = out.spent.lock() {
                s.hook_calls += 1;
                s.hooks += latency;
            }
        }
        EngineEvent::Planned {
            controller,
            subject: EventParent { parent, .. },
            objects,
            status_change,
            ..
        } => {
            let mut lines: Vec<String> = objects
                .iter()
                .filter(|o| {
                    !matches!(
                        o.action,
                        ObjectAction::InSync | ObjectAction::Waiting | ObjectAction::Keep
                    )
                })
                .map(|o| format!("{} {} {}", header(o.action), o.kind, o.id.object()))
                .collect();
            if status_change {
                lines.push(format!("~ status {parent}"));
            }
            planned.insert((controller, parent), lines);
        }
        EngineEvent::SyncFinished {
            controller,
            subject: EventSubject { parent, .. },
            writes,
            error,
            duration,
            ..
        } => {
            if let Ok(mut s) = out.spent.lock() {
                s.syncs += 1;
                s.sync += duration;
            }
            let key = (controller, parent);
            let actions = planned.remove(&key).unwrap_or_default();
            if let Ok(mut s) = out.steps.lock() {
                let v = s.entry(key.clone()).or_default();
                let step = v.len() + 1;
                v.push(Step {
                    step,
                    writes,
                    actions,
                    error,
                });
            }
            if writes > 0 {
                // The reader outlives the collector: a send fails only if it panicked.
                let _ = read_status.send(key);
            }
        }
        _ => {}
    }
}

/// The header of an object action, as `dryrun` prints it.
fn header(a: ObjectAction) -> &'static str {
    match a {
        ObjectAction::Create => Action::Create.header(),
        ObjectAction::Update => Action::Update.header(),
        ObjectAction::Recreate => Action::Recreate.header(),
        ObjectAction::Delete => Action::Delete.header(),
        ObjectAction::Adopt => Action::Adopt.header(),
        ObjectAction::Release => Action::Release.header(),
        ObjectAction::Skip => Action::Skip.header(),
        ObjectAction::Waiting => Action::Waiting.header(),
        ObjectAction::Keep => Action::Keep.header(),
        ObjectAction::InSync => "=",
    }
}

/// The status of the parent `namespace/name` (any of the listed resources holding it).
async fn parent_status(
    client: &kube::Client,
    resources: &[ResourceInfo],
    parent: &str,
) -> Option<Value> {
    let key = parent.split(' ').next().unwrap_or(parent);
    let (ns, name) = match key.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, key),
    };
    for r in resources {
        if r.namespaced != ns.is_some() {
            continue;
        }
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &r.api_resource),
            None => Api::all_with(client.clone(), &r.api_resource),
        };
        if let Ok(Some(o)) = api.get_opt(name).await {
            let v = serde_json::to_value(o).ok()?;
            if v.get("status").is_some() && !owner_uids(&v).is_empty() {
                continue;
            }
            return Some(v.get("status").cloned().unwrap_or(Value::Null));
        }
    }
    None
}

fn cause_of(
    rep: &OnceReport,
    controller: &str,
    parent: &str,
    steps: &[Step],
    statuses: &BTreeMap<(String, String), Vec<Value>>,
    limits: Limits,
) -> Option<Cause> {
    let mine = |c: &str, p: &str| c == controller && (p == parent || p.starts_with(parent));
    if let Some((_, _, m)) = rep.hot_loops.iter().find(|(c, p, _)| mine(c, p)) {
        return Some(Cause::HotLoop { message: m.clone() });
    }
    if let Some((_, _, m)) = rep
        .failed
        .iter()
        .find(|(c, p, _)| mine(c, p) && !p.is_empty())
    {
        let step = steps
            .iter()
            .find(|s| s.error.is_some())
            .map_or(steps.len(), |s| s.step);
        return Some(Cause::SyncFailed {
            step,
            message: m.clone(),
        });
    }
    if steps.len() > limits.max_steps {
        let key = (controller.to_string(), parent.to_string());
        let history = statuses.get(&key).map(Vec::as_slice).unwrap_or_default();
        let only_status = steps
            .iter()
            .rev()
            .take(3)
            .all(|s| s.actions.iter().all(|a| a.starts_with("~ status")));
        if only_status && history.len() >= 2 {
            let (a, b) = (&history[history.len() - 2], &history[history.len() - 1]);
            let fields: Vec<String> = crate::engine::plan::replay::response_changes(b, a)
                .into_iter()
                .map(|c| format!("status.{}", c.path))
                .collect();
            return Some(Cause::StatusFlapping { fields });
        }
        return Some(Cause::MaxSteps {
            max_steps: limits.max_steps,
        });
    }
    let waiting: Vec<&String> = rep
        .pending
        .iter()
        .filter(|(c, what)| c == controller && what.starts_with(parent))
        .map(|(_, w)| w)
        .collect();
    if !waiting.is_empty() {
        let message = waiting
            .iter()
            .map(|w| {
                w.trim_start_matches(parent)
                    .trim_start_matches(": ")
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Some(Cause::WaitingForReadiness { message });
    }
    None
}

/// Every object of the listed resources in the sandbox at the end, read once for all parents.
struct Listing(Vec<(ResourceInfo, Value)>);

impl Listing {
    async fn read(copy: &Copy) -> Listing {
        let mut all = Vec::new();
        for r in &copy.resources {
            let api: Api<DynamicObject> = Api::all_with(copy.client.clone(), &r.api_resource);
            let Ok(list) = api.list(&Default::default()).await else {
                continue;
            };
            for item in list.items {
                let Ok(mut v) = serde_json::to_value(&item) else {
                    continue;
                };
                v["apiVersion"] = json!(r.api_resource.api_version);
                v["kind"] = json!(r.api_resource.kind);
                all.push((r.clone(), v));
            }
        }
        Listing(all)
    }
}

/// The end state of `parent` and the objects it controls, against live: created, updated,
/// replaced (same name, another object) and deleted objects; the parent's status.
fn end_state(copy: &Copy, listing: &Listing, parent: &str) -> Vec<Entry> {
    let key = parent.split(' ').next().unwrap_or(parent);
    let Some(p) = copy.objects.iter().find(|c| {
        ObjectKey::of(&c.live).is_some_and(|k| k.to_string() == key)
            && owner_uids(&c.live).is_empty()
    }) else {
        return Vec::new();
    };
    let parent_copy_uid = p.uid.clone();
    let parent_live_uid = object::uid(&p.live).unwrap_or_default().to_string();
    let mut entries = Vec::new();
    // Now in the sandbox, per listed resource.
    let mut now: BTreeMap<(String, String), (ResourceInfo, Value)> = BTreeMap::new();
    for (r, v) in &listing.0 {
        let controlled = object::controller_ref(v).is_some_and(|c| c.uid == parent_copy_uid);
        let is_parent = object::uid(v) == Some(parent_copy_uid.as_str());
        if !(controlled || is_parent) {
            continue;
        }
        let k = ObjectKey::of(v).map(|k| k.to_string()).unwrap_or_default();
        now.insert((r.key(), k), (r.clone(), v.clone()));
    }
    // As live.
    let mut before: BTreeMap<(String, String), &Copied> = BTreeMap::new();
    for c in &copy.objects {
        let controlled = object::controller_ref(&c.live).is_some_and(|r| r.uid == parent_live_uid);
        if controlled || c.uid == parent_copy_uid {
            let k = ObjectKey::of(&c.live)
                .map(|k| k.to_string())
                .unwrap_or_default();
            before.insert((c.info.key(), k), c);
        }
    }
    let keys: BTreeSet<(String, String)> = now.keys().chain(before.keys()).cloned().collect();
    for k in keys {
        let (ns, name) = match k.1.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, k.1.clone()),
        };
        let entry = |action: Action, live: Option<Value>, planned: Option<Value>| Entry {
            action,
            type_key: k.0.clone(),
            namespace: ns.clone(),
            name: name.clone(),
            reason: None,
            changes: Vec::new(),
            live,
            planned,
            server: None,
        };
        match (before.get(&k), now.get(&k)) {
            (None, Some((_, v))) => {
                let mut v = v.clone();
                copy.to_live(&mut v);
                entries.push(entry(Action::Create, None, Some(v)));
            }
            (Some(c), None) => entries.push(entry(Action::Delete, Some((*c.live).clone()), None)),
            (Some(c), Some((_, v))) => {
                let mut end = v.clone();
                let replaced = object::uid(v) != Some(c.uid.as_str());
                copy.generation_to_live(&mut end);
                copy.to_live(&mut end);
                if c.uid == parent_copy_uid {
                    if end.get("status") != c.live.get("status") {
                        entries.push(entry(Action::Status, Some((*c.live).clone()), Some(end)));
                    }
                    continue;
                }
                if replaced {
                    entries.push(entry(Action::Recreate, Some((*c.live).clone()), Some(end)));
                } else if comparable(&end) != comparable(&c.live) {
                    entries.push(entry(Action::Update, Some((*c.live).clone()), Some(end)));
                }
            }
            (None, None) => {}
        }
    }
    entries
}

/// An object without what the server sets (metadata noise, status): what a sync changes.
fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        for f in SERVER_SET {
            m.shift_remove(f);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.shift_remove("kubectl.kubernetes.io/last-applied-configuration");
            a.shift_remove("metacontroller.k8s.io/last-applied-configuration");
        }
    }
    if let Some(m) = v.as_object_mut() {
        m.shift_remove("status");
    }
    if let Some(spec) = v["spec"].as_object_mut() {
        spec.shift_remove("nodeName");
    }
    v
}

/// The summary over all runs: the counts of the end states, the most steps a parent took, and
/// whether every parent converged.
pub fn summary(runs: &[ParentRun]) -> (Summary, usize, bool) {
    let mut s = Summary::default();
    for r in runs {
        s.add(&r.entries);
    }
    let steps = runs.iter().map(ParentRun::writing_steps).max().unwrap_or(0);
    let converged = runs.iter().all(|r| r.cause.is_none());
    (s, steps, converged)
}

/// `Plan: ...; converged in N sync(s), W writing` (the most of one parent; or `not
/// converged: N parent(s)`).
pub fn summary_line(runs: &[ParentRun]) -> String {
    let (s, writing, converged) = summary(runs);
    if converged {
        let syncs = runs.iter().map(|r| r.steps.len()).max().unwrap_or(0);
        let most = if runs.len() > 1 {
            " (per parent, at most)"
        } else {
            ""
        };
        format!("{}; {}{most}", s.line(), converged_in(syncs, writing))
    } else {
        let n = runs.iter().filter(|r| r.cause.is_some()).count();
        format!("{}; not converged: {n} parent(s)", s.line())
    }
}

/// What the output says about readiness.
pub const READINESS_NOTE: &str = "readiness (Pods becoming Ready, workload statuses) comes from the sandbox's simulated kubelet and controllers, without delay: Pods are Ready once scheduled, run-to-completion Pods finish and deleted Pods stop at once";

/// The human rendering: per parent its steps (one line each; `verbose`: the objects of each),
/// whether and how it converged, the end state against live as diffs; then the summary.
pub fn human(runs: &[ParentRun], opts: &RenderOptions, verbose: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in runs {
        let _ = writeln!(out, "{} {}", r.controller, r.parent);
        let mut i = 0;
        while i < r.steps.len() {
            let s = &r.steps[i];
            // A run of syncs that wrote nothing (the echoes of the simulated controllers'
            // status writes) is one line.
            let quiet = |s: &Step| s.error.is_none() && s.writes == 0;
            let run = r.steps[i..].iter().take_while(|s| quiet(s)).count();
            if run > 1 {
                let last = &r.steps[i + run - 1];
                let _ = writeln!(out, "  steps {}-{}: no writes", s.step, last.step);
                i += run;
                continue;
            }
            i += 1;
            let what = if let Some(e) = &s.error {
                format!("failed: {}", e.lines().next().unwrap_or_default())
            } else if s.writes == 0 {
                "no writes".to_string()
            } else if verbose {
                format!(
                    "{} write(s):\n      {}",
                    s.writes,
                    s.actions.join("\n      ")
                )
            } else {
                format!("{} write(s): {}", s.writes, s.actions.join("; "))
            };
            let _ = writeln!(out, "  step {}: {what}", s.step);
        }
        match &r.cause {
            None => {
                let _ = writeln!(out, "  {}", r.converged_line());
            }
            Some(c) => {
                let _ = writeln!(out, "  NOT CONVERGED: {c}");
            }
        }
        if r.entries.is_empty() {
            let _ = writeln!(out, "  end state: as live");
        } else {
            let _ = writeln!(out, "  end state against live:");
        }
        for e in &r.entries {
            let _ = writeln!(out, "  {} {}", e.action.header(), e.title());
            let (l, p) = shown_pair(e, opts);
            for line in diff(l.as_ref(), p.as_ref(), opts.context, opts.color).lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    let _ = writeln!(out, "note: {READINESS_NOTE}");
    let _ = writeln!(out, "{}", summary_line(runs));
    out
}

/// The JSON document (docs/dryrun-plan.md, "--simulate").
pub fn json_doc(runs: &[ParentRun], opts: &RenderOptions) -> Value {
    let parents: Vec<Value> = runs
        .iter()
        .map(|r| {
            let objects: Vec<Value> = r
                .entries
                .iter()
                .map(|e| {
                    let (l, p) = shown_pair(e, opts);
                    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                    v["diff"] = json!(diff(l.as_ref(), p.as_ref(), opts.context, false));
                    v["live"] = l.unwrap_or(Value::Null);
                    v["planned"] = p.unwrap_or(Value::Null);
                    v
                })
                .collect();
            json!({
                "controller": r.controller,
                "parent": r.parent,
                "converged": r.cause.is_none(),
                "steps": r.steps,
                "writingSteps": r.writing_steps(),
                "cause": r.cause,
                "message": r.cause.as_ref().map(ToString::to_string),
                "objects": objects,
            })
        })
        .collect();
    let (s, steps, converged) = summary(runs);
    let mut counts = serde_json::to_value(s).unwrap_or(Value::Null);
    counts["changes"] = json!(s.changes());
    counts["steps"] = json!(steps);
    counts["converged"] = json!(converged);
    json!({
        "kind": "DryRunSimulation",
        "note": READINESS_NOTE,
        "parents": parents,
        "summary": counts,
    })
}

/// How the end states of two simulations differ, parent by parent (`--simulate --against`):
/// one line per object whose end state differs, with the changed fields.
pub fn end_state_differences(current: &[ParentRun], other: &[ParentRun]) -> Vec<String> {
    let ends = |runs: &[ParentRun]| -> BTreeMap<(String, String, String), Option<Value>> {
        let mut m = BTreeMap::new();
        for r in runs {
            for e in &r.entries {
                m.insert(
                    (r.parent.clone(), e.type_key.clone(), e.title()),
                    e.planned.as_ref().map(comparable),
                );
            }
        }
        m
    };
    let (a, b) = (ends(current), ends(other));
    let keys: BTreeSet<_> = a.keys().chain(b.keys()).cloned().collect();
    let mut out = Vec::new();
    for k in keys {
        // Absent from one side: as live there.
        let (x, y) = (a.get(&k).cloned().flatten(), b.get(&k).cloned().flatten());
        if x == y {
            continue;
        }
        let changes = crate::engine::plan::replay::response_changes(
            y.as_ref().unwrap_or(&Value::Null),
            x.as_ref().unwrap_or(&Value::Null),
        );
        let fields: Vec<String> = changes.iter().map(|c| c.path.clone()).collect();
        out.push(format!(
            "{} {}: end states differ (against -> current){}",
            k.0,
            k.2,
            if fields.is_empty() {
                String::new()
            } else {
                format!(": {}", fields.join(", "))
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync_finished(parent: &str, writes: usize) -> EngineEvent {
        EngineEvent::SyncFinished {
            controller: "c".into(),
            subject: EventSubject::parent(parent),
            duration: Duration::from_millis(1),
            writes,
            error: None,
            error_layer: None,
            retry_in: None,
        }
    }

    /// Every event published before [`Collector::finish`] is counted (the collector used to be
    /// aborted, losing what it had not taken yet), and a writing sync's status read (here of a
    /// parent no listed resource holds) does not keep it from finishing.
    #[tokio::test]
    async fn the_collector_takes_every_event_published_before_it_finishes() {
        let sandbox = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let bus = EventBus::new();
        let out = Collected {
            steps: Arc::default(),
            statuses: Arc::default(),
            spent: Arc::default(),
        };
        let (steps, spent) = (Arc::clone(&out.steps), Arc::clone(&out.spent));
        let collector = Collector::start(&bus, out, sandbox.in_process_client(), Vec::new());
        for i in 0..1000 {
            bus.publish(sync_finished("default/p", i % 2));
        }
        collector.finish().await;
        sandbox.shutdown().await;
        let steps = steps.lock().unwrap();
        let mine = &steps[&("c".to_string(), "default/p".to_string())];
        assert_eq!(mine.len(), 1000);
        assert!(
            mine.iter()
                .enumerate()
                .all(|(i, s)| s.step == i + 1 && s.writes == i % 2)
        );
        assert_eq!(spent.lock().unwrap().syncs, 1000);
    }
}
