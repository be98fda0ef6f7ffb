//! The executor: carries a [`Writes`] out against the API server.
//!
//! Order: the parent's labels/annotations (merge patch), finalizer add, adoptions (after
//! re-reading the parent), releases, deletes (uid precondition, background propagation),
//! creates, updates (the creates, then the updates, sent concurrently: [`CHILD_WRITES`] at once,
//! reported in plan order), revisions, status, finalizer removal. One failed write does not stop
//! the others; every write is published as an
//! [`EngineEvent::Action`] and recorded as an [`Expectation`] so the caller can wait until its
//! informers have seen it. All writes use field manager `kubectl-meta`.
//!
//! Under a [`Perturbation`], each write first passes its write point
//! ([`Perturbation::before_write`], with its number in the sync): it may arm a fault on the API
//! server for itself, or stop the sync for good (the engine is being killed).

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::{Value, json};

use crate::events::{ActionVerb, EngineEvent, EventBus, EventSubject, HeldAction};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::error::{ApiError, ApiErrorClass};
use crate::k8s::object::{self, ObjectKey};
use crate::perturb::{Perturbation, WriteStep};
use crate::plan::rollout::RevisionWrite;
use crate::plan::writes::{ChildId, Create, Delete, FinalizerChange, Update, Writes};

use crate::k8s::FIELD_MANAGER;
use crate::trace;
use tracing::Instrument;

/// How children are created and updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApplyStrategy {
    /// Three-way merge with the last-applied annotation, written with PUT (Metacontroller's
    /// default).
    #[default]
    ClientSide,
    /// Server-side apply (field manager `kubectl-meta`, force).
    ServerSide,
}

/// What the caller should wait for in its caches after a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// The object exists with a resourceVersion other than `previous`.
    Changed {
        /// Resource (`Kind.apiVersion`).
        type_key: String,
        /// Object.
        key: ObjectKey,
        /// resourceVersion before the write (`None` for a create).
        previous: Option<String>,
    },
    /// The object is gone or being deleted.
    Gone {
        /// Resource (`Kind.apiVersion`).
        type_key: String,
        /// Object.
        key: ObjectKey,
    },
}

/// One write of a child by the engine: the object and the resourceVersion the server answered
/// (`None`: deleted). Its watch echo carries that resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnWrite {
    /// Resource (`Kind.apiVersion`).
    pub type_key: String,
    /// Object.
    pub key: ObjectKey,
    /// resourceVersion the write returned (deletes are not recorded: see `delete_child`).
    pub rv: Option<String>,
}

/// Child writes of one sync sent at once (creates, then updates).
pub const CHILD_WRITES: usize = 8;

/// One child write's report and the events it published, in order, held until the writes of
/// its batch are merged.
struct ChildWrite {
    report: ExecReport,
    events: Vec<EngineEvent>,
}

/// Where an executor's events go: the engine's bus, or a buffer read once the writes are done
/// (a child write sent concurrently with others, a server-side dry run). A buffer is a plain
/// vector, not a private broadcast channel: a channel preallocates its capacity (16,384 slots)
/// and a sync makes one per child write.
#[derive(Clone)]
enum Sink {
    /// Publish at once.
    Bus(EventBus),
    /// Keep for later.
    Buffer(Arc<Mutex<Vec<EngineEvent>>>),
}

impl Sink {
    fn buffer() -> Self {
        Sink::Buffer(Arc::new(Mutex::new(Vec::new())))
    }

    fn publish(&self, event: EngineEvent) {
        match self {
            Sink::Bus(bus) => bus.publish(event),
            Sink::Buffer(events) => events
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(event),
        }
    }

    /// What a buffer holds (nothing for a bus), emptying it.
    fn take(&self) -> Vec<EngineEvent> {
        match self {
            Sink::Bus(_) => Vec::new(),
            Sink::Buffer(events) => std::mem::take(
                &mut *events
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ),
        }
    }
}

/// The result of executing a plan.
#[derive(Debug, Default)]
pub struct ExecReport {
    /// Successful writes.
    pub writes: usize,
    /// Writes the server answered with the resourceVersion the object already had: they
    /// changed nothing (not counted in `writes`, nothing to wait for).
    pub noops: usize,
    /// The child updates among `noops`.
    pub child_noops: usize,
    /// Children whose update went through (written or a no-op), for the hot-loop guard.
    pub updated: Vec<ChildId>,
    /// Failed writes, classified, with messages naming the object.
    pub errors: Vec<ApiError>,
    /// Writes to wait for in the caches.
    pub expectations: Vec<Expectation>,
    /// The status written, when it was.
    pub status_written: Option<Value>,
    /// Status writes among `writes` (a sync that wrote only its parent's status is not
    /// confirmed by another sync: see [`crate::runtime::memory`]).
    pub status_writes: usize,
    /// The children this plan wrote and what each write left (the resourceVersion it returned,
    /// `None` for a delete), so that their watch echoes are recognised as ours.
    pub own_writes: Vec<OwnWrite>,
    /// The parent's resourceVersion after this plan's parent writes, when it wrote the parent.
    pub parent_rv: Option<String>,
    /// [`ExecMode::Paused`] and [`ExecMode::DryRun`]: one line per planned write
    /// ([`Writes::describe`]).
    pub planned: Vec<HeldAction>,
    /// [`ExecMode::DryRun`] with `server_side`: the actions the server accepted or refused, as
    /// they would have been published.
    pub actions: Vec<EngineEvent>,
}

/// Everything the executor needs to know about the parent and the child types.
#[derive(Debug)]
pub struct Target<'a> {
    /// Controller name (for events).
    pub controller: &'a str,
    /// The parent as observed.
    pub parent: &'a Value,
    /// The parent's resource.
    pub parent_info: &'a ResourceInfo,
    /// Child resources by type key.
    pub types: &'a BTreeMap<String, ResourceInfo>,
    /// The revision resource, when rolling updates are in use.
    pub revisions: Option<&'a ResourceInfo>,
    /// The parent's finalizer name.
    pub finalizer: &'a str,
    /// How the write events name the parent and map key (as the sync's other events do).
    pub subject: EventSubject,
}

/// How the executor carries a plan out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// Write, publishing an [`EngineEvent::Action`] per write (what `dev` does).
    #[default]
    Apply,
    /// Writes are paused: send nothing, publish nothing; the report lists what would be
    /// written ([`ExecReport::planned`]).
    Paused,
    /// Dry run: publish nothing. Without `server_side` nothing is sent (like
    /// [`ExecMode::Paused`]); with it every write is sent with `dryRun=All`, so the API server
    /// validates and admits it (and the report counts it) but persists nothing; the actions
    /// are returned in [`ExecReport::actions`] instead of being published.
    DryRun {
        /// Send the writes with `dryRun=All`.
        server_side: bool,
    },
}

/// Executes plans.
#[derive(Clone)]
pub struct Executor {
    client: kube::Client,
    strategy: ApplyStrategy,
    sink: Sink,
    /// Send every write with `dryRun=All`.
    dry_run: bool,
    /// The perturbation and the number of writes of the sync in progress (a fresh counter per
    /// sync).
    perturb: Option<(Arc<Perturbation>, Arc<AtomicU32>)>,
}

fn api_for(client: &kube::Client, info: &ResourceInfo, ns: Option<&str>) -> Api<DynamicObject> {
    match (info.namespaced, ns) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
        _ => Api::all_with(client.clone(), &info.api_resource),
    }
}

fn to_dynamic(v: &Value) -> Result<DynamicObject, ApiError> {
    serde_json::from_value(v.clone())
        .map_err(|e| ApiError::new(ApiErrorClass::Other, format!("cannot encode object: {e}")))
}

/// The parent as the executor's parent writes see it: each write moves its resourceVersion,
/// and the status write starts from the parent with the labels/annotations written.
struct ParentWrites<'a> {
    key: ObjectKey,
    type_key: String,
    api: Api<DynamicObject>,
    rv: Option<String>,
    obj: std::borrow::Cow<'a, Value>,
}

impl<'a> ParentWrites<'a> {
    fn new(exec: &Executor, t: &Target<'a>) -> Self {
        let key = ObjectKey::of(t.parent).unwrap_or_else(|| ObjectKey::new(None, ""));
        ParentWrites {
            api: api_for(&exec.client, t.parent_info, key.namespace.as_deref()),
            type_key: t.parent_info.key(),
            rv: object::resource_version(t.parent).map(str::to_string),
            obj: std::borrow::Cow::Borrowed(t.parent),
            key,
        }
    }
}

/// A child create or update sent, for recording the server's answer
/// ([`Executor::child_written`]).
struct Sent<'a> {
    /// `Create` or `Update`.
    verb: ActionVerb,
    /// The child.
    id: &'a ChildId,
    /// Its resourceVersion before the write (an update's), to wait for a newer one.
    previous: Option<String>,
    /// The write had a precondition (a create, a client-side update): the resourceVersion it
    /// returned is our own write's echo alone. A server-side apply has none: a change by another
    /// writer just before it would share its echo.
    own: bool,
    /// What the published event says of it.
    detail: Option<String>,
}

/// Send `obj` with `send` (a create or a replace): the resourceVersion the server answered,
/// or why not (`Err(None)`: it does not encode; reported in `report`, nothing sent).
async fn send_encoded<F, Fut>(
    report: &mut ExecReport,
    obj: &Value,
    send: F,
) -> Result<Option<String>, Option<kube::Error>>
where
    F: FnOnce(DynamicObject) -> Fut,
    Fut: std::future::Future<Output = kube::Result<DynamicObject>>,
{
    match to_dynamic(obj) {
        Ok(obj) => send(obj)
            .await
            .map(|o| o.metadata.resource_version)
            .map_err(Some),
        Err(m) => {
            report.errors.push(m);
            Err(None)
        }
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Executor {
    /// An executor writing through `client`.
    pub fn new(client: kube::Client, strategy: ApplyStrategy, bus: EventBus) -> Self {
        Executor {
            client,
            strategy,
            sink: Sink::Bus(bus),
            dry_run: false,
            perturb: None,
        }
    }

    /// Pass every write through `perturb`'s write point.
    pub fn perturbed(mut self, perturb: Option<Arc<Perturbation>>) -> Self {
        self.perturb = perturb.map(|p| (p, Arc::new(AtomicU32::new(0))));
        self
    }

    /// The write point of a perturbation (see the module docs); nothing without one.
    async fn write_point(&self, plural: &str) {
        let Some((p, n)) = &self.perturb else {
            return;
        };
        if self.dry_run {
            return;
        }
        let index = n.fetch_add(1, Ordering::SeqCst);
        if p.before_write(index, plural) == WriteStep::Killed {
            // The environment aborts this engine: this write is never sent.
            std::future::pending::<()>().await;
        }
    }

    /// The kube client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn publish(
        &self,
        t: &Target<'_>,
        verb: ActionVerb,
        resource: &str,
        object: String,
        detail: Option<String>,
        error: Option<String>,
    ) {
        trace::record_write(&verb, resource, &object, error.as_deref());
        self.sink.publish(EngineEvent::Action {
            controller: t.controller.to_string(),
            subject: (&t.subject).into(),
            verb,
            resource: resource.to_string(),
            object,
            detail,
            error,
        });
    }

    /// Publish a successful write to a child.
    fn publish_child(
        &self,
        t: &Target<'_>,
        verb: ActionVerb,
        id: &ChildId,
        detail: Option<String>,
    ) {
        self.publish(t, verb, &id.type_key, id.object(), detail, None);
    }

    /// Execute `plan` in `mode` (see the module docs for the order). Only
    /// [`ExecMode::Apply`] writes or publishes anything.
    pub async fn execute(&self, t: &Target<'_>, plan: &Writes, mode: ExecMode) -> ExecReport {
        match mode {
            ExecMode::Apply => self.run(t, plan).await,
            ExecMode::Paused | ExecMode::DryRun { server_side: false } => ExecReport {
                planned: plan.actions(&t.parent_info.key(), &t.subject.parent),
                ..ExecReport::default()
            },
            ExecMode::DryRun { server_side: true } => {
                let dry = Executor {
                    dry_run: true,
                    ..self.buffered()
                };
                let mut report = dry.run(t, plan).await;
                report.planned = plan.actions(&t.parent_info.key(), &t.subject.parent);
                // Nothing was persisted: nothing to wait for.
                report.expectations.clear();
                report.actions = dry.sink.take();
                report
            }
        }
    }

    /// Carry `plan` out, step by step in the order of the module docs.
    async fn run(&self, t: &Target<'_>, plan: &Writes) -> ExecReport {
        match &self.perturb {
            None => self.run_steps(t, plan).await,
            Some((p, _)) => {
                // A fresh write counter for this sync.
                let this = self.clone().perturbed(Some(Arc::clone(p)));
                this.run_steps(t, plan).await
            }
        }
    }

    /// The steps of [`Executor::run`].
    async fn run_steps(&self, t: &Target<'_>, plan: &Writes) -> ExecReport {
        let mut report = ExecReport::default();
        let mut parent = ParentWrites::new(self, t);
        if let Some(meta) = &plan.metadata {
            self.write_metadata(t, &mut report, &mut parent, meta)
                .instrument(trace::write_span())
                .await;
        }
        if plan.finalizer == Some(FinalizerChange::Add) {
            let mut finalizers: Vec<String> = object::finalizers(t.parent)
                .into_iter()
                .map(str::to_string)
                .collect();
            finalizers.push(t.finalizer.to_string());
            self.write_finalizers(
                t,
                &mut report,
                &mut parent,
                ActionVerb::AddFinalizer,
                finalizers,
            )
            .instrument(trace::write_span())
            .await;
        }
        let adopted_rv = self.adopt(t, &mut report, &parent, plan).await;
        for edit in &plan.release {
            let _ = self
                .owner_edit(t, &mut report, ActionVerb::Release, edit)
                .instrument(trace::write_span())
                .await;
        }
        for d in &plan.delete {
            self.delete_child(t, &mut report, d)
                .instrument(trace::write_span())
                .await;
        }
        // Creates, then updates: each of different objects, so sent concurrently (at most
        // CHILD_WRITES at once); reported and published in plan order.
        let mut creates: Vec<BoxFuture<'_, ChildWrite>> = Vec::new();
        for c in &plan.create {
            creates.push(Box::pin(
                self.create_alone(t, c).instrument(trace::write_span()),
            ));
        }
        self.merge_child_writes(&mut report, creates).await;
        let mut updates: Vec<BoxFuture<'_, ChildWrite>> = Vec::new();
        for u in &plan.update {
            updates.push(Box::pin(
                self.update_alone(t, u, adopted_rv.get(&u.id))
                    .instrument(trace::write_span()),
            ));
        }
        self.merge_child_writes(&mut report, updates).await;
        if let Some(info) = t.revisions {
            for w in &plan.revisions {
                self.revision_write(t, &mut report, info, w)
                    .instrument(trace::write_span())
                    .await;
            }
        }
        if let Some(status) = &plan.status {
            self.write_status(t, &mut report, &mut parent, status)
                .instrument(trace::write_span())
                .await;
        }
        if plan.finalizer == Some(FinalizerChange::Remove) {
            let finalizers: Vec<String> = object::finalizers(t.parent)
                .into_iter()
                .filter(|f| *f != t.finalizer)
                .map(str::to_string)
                .collect();
            self.write_finalizers(
                t,
                &mut report,
                &mut parent,
                ActionVerb::RemoveFinalizer,
                finalizers,
            )
            .instrument(trace::write_span())
            .await;
        }
        report
    }

    /// A copy of this executor keeping its events in a buffer of its own.
    fn buffered(&self) -> Executor {
        Executor {
            client: self.client.clone(),
            strategy: self.strategy,
            sink: Sink::buffer(),
            dry_run: self.dry_run,
            perturb: self.perturb.clone(),
        }
    }

    /// Create one child on its own: its report and the events it published.
    async fn create_alone(&self, t: &Target<'_>, c: &Create) -> ChildWrite {
        let exec = self.buffered();
        let mut report = ExecReport::default();
        exec.create_child(t, &mut report, c).await;
        ChildWrite {
            report,
            events: exec.sink.take(),
        }
    }

    /// Update one child on its own: its report and the events it published.
    async fn update_alone(
        &self,
        t: &Target<'_>,
        u: &Update,
        adopted_rv: Option<&String>,
    ) -> ChildWrite {
        let exec = self.buffered();
        let mut report = ExecReport::default();
        exec.update_child(t, &mut report, u, adopted_rv).await;
        ChildWrite {
            report,
            events: exec.sink.take(),
        }
    }

    /// Run `writes` (at most [`CHILD_WRITES`] at once) and fold their reports into `report`,
    /// publishing their events, in the order given.
    async fn merge_child_writes(
        &self,
        report: &mut ExecReport,
        writes: Vec<BoxFuture<'_, ChildWrite>>,
    ) {
        use futures::StreamExt;
        let done: Vec<ChildWrite> = futures::stream::iter(writes)
            .buffered(CHILD_WRITES)
            .collect()
            .await;
        for mut w in done {
            for e in w.events {
                self.sink.publish(e);
            }
            report.writes += w.report.writes;
            report.noops += w.report.noops;
            report.child_noops += w.report.child_noops;
            report.updated.append(&mut w.report.updated);
            report.errors.append(&mut w.report.errors);
            report.expectations.append(&mut w.report.expectations);
            report.own_writes.append(&mut w.report.own_writes);
        }
    }

    /// The parent's labels and annotations (merge patch); the status write starts from the
    /// parent as written here.
    async fn write_metadata(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        parent: &mut ParentWrites<'_>,
        meta: &crate::plan::writes::MetadataPatch,
    ) {
        self.write_point(&t.parent_info.api_resource.plural).await;
        let r = parent
            .api
            .patch(
                &parent.key.name,
                &self.patch_params(),
                &Patch::Merge(&meta.merge_patch(parent.rv.as_deref())),
            )
            .await
            .map_err(|e| ApiError::from_kube(&e));
        if let Ok(written) = &r
            && let Ok(v) = serde_json::to_value(written)
        {
            parent.obj = std::borrow::Cow::Owned(v);
        }
        self.record_parent(
            t,
            report,
            (ActionVerb::Update, Some("labels/annotations")),
            r,
            parent,
        );
    }

    /// Set the parent's finalizers (adding or removing ours).
    async fn write_finalizers(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        parent: &mut ParentWrites<'_>,
        verb: ActionVerb,
        finalizers: Vec<String>,
    ) {
        self.write_point(&t.parent_info.api_resource.plural).await;
        let r = self
            .patch_parent_finalizers(&parent.api, &parent.key, parent.rv.as_deref(), finalizers)
            .await;
        self.record_parent(t, report, (verb, None), r, parent);
    }

    /// Adoptions, after re-reading the parent. Returns the resourceVersions of the objects
    /// adopted now: an update planned for an adopted child must be sent with it (the planned
    /// object carries the one from before the adoption).
    async fn adopt(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        parent: &ParentWrites<'_>,
        plan: &Writes,
    ) -> BTreeMap<ChildId, String> {
        let mut adopted_rv = BTreeMap::new();
        if plan.adopt.is_empty() {
            return adopted_rv;
        }
        match self
            .recheck_parent(&parent.api, t.parent, &parent.key)
            .await
        {
            Ok(()) => {
                for edit in &plan.adopt {
                    if let Some(rv) = self.owner_edit(t, report, ActionVerb::Adopt, edit).await {
                        adopted_rv.insert(edit.id.clone(), rv);
                    }
                }
            }
            Err(e) => {
                for edit in &plan.adopt {
                    self.publish(
                        t,
                        ActionVerb::Adopt,
                        &edit.id.type_key,
                        edit.id.object(),
                        None,
                        Some(e.message.clone()),
                    );
                }
                report.errors.push(e);
            }
        }
        adopted_rv
    }

    /// Delete a child (uid precondition, background propagation); one already gone is fine.
    async fn delete_child(&self, t: &Target<'_>, report: &mut ExecReport, d: &Delete) {
        let Some(info) = t.types.get(&d.id.type_key) else {
            return;
        };
        self.write_point(&info.api_resource.plural).await;
        let api = api_for(&self.client, info, d.id.key.namespace.as_deref());
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..self.delete_params(&d.uid)
        };
        let detail = Some(match d.reason {
            crate::plan::writes::DeleteReason::NotDesired => "not desired".to_string(),
            crate::plan::writes::DeleteReason::Recreate => {
                format!(
                    "recreate: {}",
                    crate::plan::writes::summarize_changes(&d.changes)
                )
            }
        });
        match api.delete(&d.id.key.name, &dp).await {
            Ok(_) => {
                report.writes += 1;
                let key = d.id.object_key();
                // An adoption earlier in this plan expected a change to show up; the object
                // is gone now, so only its absence can be waited for.
                report.expectations.retain(|e| {
                    !matches!(e, Expectation::Changed { type_key, key: k, .. }
                        if *type_key == d.id.type_key && *k == key)
                });
                // Not an own write whose echo may be dropped: a graceful deletion (a Pod's
                // grace period) ends later, and the event of the object gone is what lets the
                // next step (a Recreate's create, a rolling update's next Pod) happen.
                report.expectations.push(Expectation::Gone {
                    type_key: d.id.type_key.clone(),
                    key,
                });
                self.publish_child(t, ActionVerb::Delete, &d.id, detail);
            }
            Err(e) if is_not_found(&e) => {
                self.publish_child(t, ActionVerb::Delete, &d.id, Some("already gone".into()));
            }
            Err(e) => self.fail(t, report, ActionVerb::Delete, &d.id, &e),
        }
    }

    /// Create a child (POST, or a server-side apply).
    async fn create_child(&self, t: &Target<'_>, report: &mut ExecReport, c: &Create) {
        let Some(info) = t.types.get(&c.id.type_key) else {
            return;
        };
        self.write_point(&info.api_resource.plural).await;
        let api = api_for(&self.client, info, c.id.key.namespace.as_deref());
        let result = match self.strategy {
            ApplyStrategy::ClientSide => {
                let params = self.post_params();
                send_encoded(report, &c.object, |obj| async move {
                    api.create(&params, &obj).await
                })
                .await
            }
            ApplyStrategy::ServerSide => api
                .patch(
                    &c.id.key.name,
                    &self.apply_params(),
                    &Patch::Apply(&c.object),
                )
                .await
                // An apply has no precondition: a change by another writer just before it
                // would share its echo, so it is not remembered as only ours.
                .map(|_| None)
                .map_err(Some),
        };
        let sent = Sent {
            verb: ActionVerb::Create,
            id: &c.id,
            previous: None,
            own: true,
            detail: None,
        };
        self.child_written(t, report, sent, result);
    }

    /// The field manager other than this engine's that owns `path` of child `id` on the
    /// server (its managedFields), if any. A writer fighting the engine sets the field back
    /// right after the engine's write: asked a few times over about a second before giving up.
    pub async fn field_writer(&self, t: &Target<'_>, id: &ChildId, path: &str) -> Option<String> {
        let info = t.types.get(&id.type_key)?;
        let api = api_for(&self.client, info, id.key.namespace.as_deref());
        for attempt in 0..8u64 {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
            }
            let obj = api.get(&id.key.name).await.ok()?;
            let mf = serde_json::to_value(obj.metadata.managed_fields.unwrap_or_default()).ok()?;
            if let Some(w) = crate::plan::hotloop::other_writer(&mf, path, FIELD_MANAGER) {
                return Some(w);
            }
        }
        None
    }

    /// Update a child (PUT with the merged object, or a server-side apply); `adopted_rv` is
    /// its resourceVersion when it was adopted in this plan.
    async fn update_child(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        u: &Update,
        adopted_rv: Option<&String>,
    ) {
        let Some(info) = t.types.get(&u.id.type_key) else {
            return;
        };
        self.write_point(&info.api_resource.plural).await;
        let api = api_for(&self.client, info, u.id.key.namespace.as_deref());
        let mut sent = std::borrow::Cow::Borrowed(&u.object);
        if let Some(rv) = adopted_rv {
            sent.to_mut()["metadata"]["resourceVersion"] = json!(rv);
        }
        let previous = object::resource_version(&sent).map(str::to_string);
        let result = match self.strategy {
            ApplyStrategy::ClientSide => {
                let params = self.post_params();
                send_encoded(report, &sent, |obj| async move {
                    api.replace(&u.id.key.name, &params, &obj).await
                })
                .await
            }
            ApplyStrategy::ServerSide => {
                let mut desired = crate::plan::apply::for_create(&u.desired);
                desired["metadata"]["ownerReferences"] = u.object["metadata"]
                    .get("ownerReferences")
                    .cloned()
                    .unwrap_or(json!([]));
                api.patch(
                    &u.id.key.name,
                    &self.apply_params(),
                    &Patch::Apply(&desired),
                )
                .await
                .map(|o| o.metadata.resource_version)
                .map_err(Some)
            }
        };
        let preconditioned = self.strategy == ApplyStrategy::ClientSide;
        match result {
            Ok(rv) if rv.is_some() && rv == previous => {
                // The server kept the object as it was (it normalizes or rewrites what we
                // sent): nothing changed, no watch event will come.
                report.noops += 1;
                report.child_noops += 1;
                report.updated.push(u.id.clone());
                self.publish_child(
                    t,
                    ActionVerb::NoOp,
                    &u.id,
                    Some(format!(
                        "update of {} left the object unchanged (same resourceVersion)",
                        crate::plan::writes::summarize_changes(&u.changes)
                    )),
                );
            }
            result => {
                if result.is_ok() {
                    report.updated.push(u.id.clone());
                }
                let sent = Sent {
                    verb: ActionVerb::Update,
                    id: &u.id,
                    previous,
                    own: preconditioned,
                    detail: Some(crate::plan::writes::summarize_changes(&u.changes)),
                };
                self.child_written(t, report, sent, result);
            }
        }
    }

    /// A child's create or update as the server answered it (the resourceVersion written):
    /// counted, remembered as our own write when that resourceVersion is ours alone
    /// ([`Sent::own`] and one came back), expected in the cache, published; or failed
    /// (`Err(None)`: already reported, nothing was sent).
    fn child_written(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        sent: Sent<'_>,
        result: Result<Option<String>, Option<kube::Error>>,
    ) {
        match result {
            Ok(rv) => {
                report.writes += 1;
                if sent.own && rv.is_some() {
                    report.own_writes.push(OwnWrite {
                        type_key: sent.id.type_key.clone(),
                        key: sent.id.object_key(),
                        rv,
                    });
                }
                report.expectations.push(Expectation::Changed {
                    type_key: sent.id.type_key.clone(),
                    key: sent.id.object_key(),
                    previous: sent.previous,
                });
                self.publish_child(t, sent.verb, sent.id, sent.detail);
            }
            Err(Some(e)) => self.fail(t, report, sent.verb, sent.id, &e),
            Err(None) => {}
        }
    }

    /// The parent's status (the status subresource when the resource has one), written on
    /// the parent as the labels/annotations write left it.
    async fn write_status(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        parent: &mut ParentWrites<'_>,
        status: &Value,
    ) {
        self.write_point(&t.parent_info.api_resource.plural).await;
        let mut obj = parent.obj.clone().into_owned();
        obj["status"] = status.clone();
        if let Some(rv) = &parent.rv {
            obj["metadata"]["resourceVersion"] = json!(rv);
        }
        let r = match to_dynamic(&obj) {
            Ok(d) if t.parent_info.has_status => parent
                .api
                .replace_status(&parent.key.name, &self.post_params(), &d)
                .await
                .map_err(|e| ApiError::from_kube(&e)),
            Ok(d) => parent
                .api
                .replace(&parent.key.name, &self.post_params(), &d)
                .await
                .map_err(|e| ApiError::from_kube(&e)),
            Err(e) => Err(e),
        };
        if r.is_ok() {
            report.status_written = Some(status.clone());
            report.status_writes += 1;
        }
        self.record_parent(t, report, (ActionVerb::Status, None), r, parent);
    }

    fn post_params(&self) -> PostParams {
        PostParams {
            dry_run: self.dry_run,
            field_manager: Some(FIELD_MANAGER.to_string()),
        }
    }

    fn apply_params(&self) -> PatchParams {
        let mut p = PatchParams::apply(FIELD_MANAGER).force();
        p.dry_run = self.dry_run;
        p
    }

    fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            dry_run: self.dry_run,
            ..PatchParams::default()
        }
    }

    /// Delete with a uid precondition.
    fn delete_params(&self, uid: &str) -> DeleteParams {
        DeleteParams {
            dry_run: self.dry_run,
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        }
    }

    /// Account for a write to the parent: a no-op, a write (its new resourceVersion), or a
    /// failure.
    fn record_parent(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        (verb, detail): (ActionVerb, Option<&str>),
        result: Result<DynamicObject, ApiError>,
        parent: &mut ParentWrites<'_>,
    ) {
        let parent_type = parent.type_key.as_str();
        let parent_key = &parent.key;
        match result {
            Ok(obj)
                if obj.metadata.resource_version.is_some()
                    && obj.metadata.resource_version == parent.rv =>
            {
                report.noops += 1;
                let what = detail
                    .map(|d| format!("{verb} {d}"))
                    .unwrap_or(verb.to_string());
                self.publish(
                    t,
                    ActionVerb::NoOp,
                    parent_type,
                    parent_key.to_string(),
                    Some(format!(
                        "{what} left the object unchanged (same resourceVersion)"
                    )),
                    None,
                );
            }
            Ok(obj) => {
                report.writes += 1;
                let previous = parent.rv.clone();
                parent.rv = obj.metadata.resource_version.clone();
                report.parent_rv.clone_from(&parent.rv);
                report.expectations.push(Expectation::Changed {
                    type_key: parent_type.to_string(),
                    key: parent_key.clone(),
                    previous,
                });
                let detail = detail.map(str::to_string);
                self.publish(t, verb, parent_type, parent_key.to_string(), detail, None);
            }
            Err(e) => {
                let what = detail.map(|d| format!(" {d} of")).unwrap_or_default();
                self.publish(
                    t,
                    verb,
                    parent_type,
                    parent_key.to_string(),
                    detail.map(str::to_string),
                    Some(e.message.clone()),
                );
                report
                    .errors
                    .push(e.context(format!("{verb}{what} {parent_type} {parent_key}")));
            }
        }
    }

    fn fail(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        verb: ActionVerb,
        id: &ChildId,
        e: &kube::Error,
    ) {
        let e = ApiError::from_kube(e);
        self.publish(
            t,
            verb,
            &id.type_key,
            id.object(),
            None,
            Some(e.message.clone()),
        );
        report.errors.push(e.context(format!("{verb} {id}")));
    }

    async fn patch_parent_finalizers(
        &self,
        api: &Api<DynamicObject>,
        key: &ObjectKey,
        rv: Option<&str>,
        finalizers: Vec<String>,
    ) -> Result<DynamicObject, ApiError> {
        let mut patch = json!({"metadata": {"finalizers": finalizers}});
        if let Some(rv) = rv {
            patch["metadata"]["resourceVersion"] = json!(rv);
        }
        api.patch(&key.name, &self.patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(|e| ApiError::from_kube(&e))
    }

    /// Re-read the parent before adopting: it must still exist with the same uid and not be
    /// being deleted (ControllerRef proposal).
    async fn recheck_parent(
        &self,
        api: &Api<DynamicObject>,
        parent: &Value,
        key: &ObjectKey,
    ) -> Result<(), ApiError> {
        let fresh = api.get_opt(&key.name).await.map_err(|e| {
            ApiError::from_kube(&e).context(format!("cannot re-read parent {key} before adoption"))
        })?;
        // The parent changed since the cache showed it: the next sync sees the fresh state.
        let stale = |m: String| Err(ApiError::new(ApiErrorClass::Conflict, m));
        match fresh {
            None => Err(ApiError::new(
                ApiErrorClass::NotFound,
                format!("parent {key} is gone; not adopting"),
            )),
            Some(p) if p.metadata.uid.as_deref() != object::uid(parent) => stale(format!(
                "parent {key} was recreated (uid changed); not adopting"
            )),
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                stale(format!("parent {key} is being deleted; not adopting"))
            }
            Some(_) => Ok(()),
        }
    }

    async fn owner_edit(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        verb: ActionVerb,
        edit: &crate::plan::writes::OwnerEdit,
    ) -> Option<String> {
        let info = t.types.get(&edit.id.type_key)?;
        let api = api_for(&self.client, info, edit.id.key.namespace.as_deref());
        let patch = json!({"metadata": {
            "ownerReferences": edit.owner_references,
            "resourceVersion": edit.resource_version,
        }});
        match api
            .patch(
                &edit.id.key.name,
                &self.patch_params(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(obj) => {
                report.writes += 1;
                report.own_writes.push(OwnWrite {
                    type_key: edit.id.type_key.clone(),
                    key: edit.id.object_key(),
                    rv: obj.metadata.resource_version.clone(),
                });
                report.expectations.push(Expectation::Changed {
                    type_key: edit.id.type_key.clone(),
                    key: edit.id.object_key(),
                    previous: Some(edit.resource_version.clone()),
                });
                self.publish_child(t, verb, &edit.id, None);
                obj.metadata.resource_version
            }
            Err(e) => {
                self.fail(t, report, verb, &edit.id, &e);
                None
            }
        }
    }

    async fn revision_write(
        &self,
        t: &Target<'_>,
        report: &mut ExecReport,
        info: &ResourceInfo,
        w: &RevisionWrite,
    ) {
        let type_key = info.key();
        let (key, result, previous) = match w {
            RevisionWrite::Create { object } => {
                let key = ObjectKey::of(object).unwrap_or_else(|| ObjectKey::new(None, ""));
                let api = api_for(&self.client, info, key.namespace.as_deref());
                let r = match to_dynamic(object) {
                    Ok(d) => api
                        .create(&self.post_params(), &d)
                        .await
                        .map(|_| ())
                        .map_err(|e| ApiError::from_kube(&e)),
                    Err(m) => Err(m),
                };
                (key, r, None)
            }
            RevisionWrite::Update { object, .. } => {
                let key = ObjectKey::of(object).unwrap_or_else(|| ObjectKey::new(None, ""));
                let api = api_for(&self.client, info, key.namespace.as_deref());
                let r = match to_dynamic(object) {
                    Ok(d) => api
                        .replace(&key.name, &self.post_params(), &d)
                        .await
                        .map(|_| ())
                        .map_err(|e| ApiError::from_kube(&e)),
                    Err(m) => Err(m),
                };
                (key, r, object::resource_version(object).map(str::to_string))
            }
            RevisionWrite::Delete {
                name,
                namespace,
                uid,
                ..
            } => {
                let key = ObjectKey::new(Some(namespace), name);
                let api = api_for(&self.client, info, Some(namespace));
                let r = match api.delete(name, &self.delete_params(uid)).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(e) => Err(ApiError::from_kube(&e)),
                };
                report.expectations.push(Expectation::Gone {
                    type_key: type_key.clone(),
                    key: key.clone(),
                });
                (key, r, Some(String::new()))
            }
        };
        match result {
            Ok(()) => {
                report.writes += 1;
                if !matches!(w, RevisionWrite::Delete { .. }) {
                    report.expectations.push(Expectation::Changed {
                        type_key: type_key.clone(),
                        key: key.clone(),
                        previous,
                    });
                }
                self.publish(
                    t,
                    ActionVerb::Revision,
                    &type_key,
                    key.to_string(),
                    None,
                    None,
                );
            }
            Err(e) => {
                self.publish(
                    t,
                    ActionVerb::Revision,
                    &type_key,
                    key.to_string(),
                    None,
                    Some(e.message.clone()),
                );
                report.errors.push(e.context(format!("revision {key}")));
            }
        }
    }
}
