//! CompositeController: one parent resource, its children, Metacontroller's semantics.
//!
//! Started by [`crate::runtime::reconcile::launch_def`], which resolves the definition's
//! resources (waiting for ones that do not exist yet), starts the shared informers, routes
//! their events to parent keys through indexes, and runs the shared controller loop. One reconcile of one parent is the shared skeleton of
//! [`crate::runtime::reconcile`]; this kind supplies its steps ([`SyncKind`] for [`Composite`]): claim
//! children -> customize -> sync/finalize hook (once per live revision during a rolling update)
//! -> pure plan; the skeleton executes it and waits until the caches show the writes.
//! [`crate::runtime::source::snapshot`] builds the same controller on lists read once (the dry run
//! plans with it: [`crate::runtime::reconcile::plan_only`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::{EngineEvent, Trigger};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{FilterBy, Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::kinds::shared::{self, SyncHooks};
use crate::plan::hookapi::{self, Version};
use crate::plan::ownership::CONTROLLER_UID_LABEL;
use crate::plan::planner;
use crate::plan::rollout;
use crate::plan::rollout_plan;
use crate::plan::writes::{ChildId, ChildType};
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::controller::SyncError;
use crate::runtime::core::Core;
use crate::runtime::execute::Target;
use crate::runtime::reconcile::{HookCall, KindController, SyncCx, SyncKind};
use crate::runtime::related_cache::RelatedCache;
use crate::runtime::routing;
use crate::runtime::routing::ChildAction;
use crate::runtime::snapshot::LiveReader;
use crate::runtime::source::{self, Building, Built, Prepare, Reader, SnapshotError, Source};
use crate::runtime::start;
use crate::runtime::start::StartError;
use crate::spec::{CompositeControllerSpec, Controller, StatusConditionCheck};
use kube_apimachinery::selector::LabelSelector;

/// The controller kind, as shown in events and hook call logs.
const KIND: &str = "CompositeController";

/// A declared child resource with its source.
struct ChildSlot {
    source: Source,
    ty: ChildType,
    checks: Vec<StatusConditionCheck>,
}

/// A running CompositeController (or one on lists read once, for a dry run).
pub struct Composite {
    /// Name, engine services, queue, hook caller, per-key memory (uid routing, last status
    /// written, last exchange per parent), hooks.
    core: Core<ObjectKey, SyncHooks>,
    def: Controller<CompositeControllerSpec>,
    parent: ResourceInfo,
    parent_source: Source,
    parent_selector: Option<LabelSelector>,
    children: Vec<ChildSlot>,
    types: BTreeMap<String, ResourceInfo>,
    /// A child type updates in rolling steps.
    rolling: bool,
    /// The ControllerRevisions (rolling updates; a dry run on a cluster that does not serve
    /// them has none).
    revisions: Option<(ResourceInfo, Source)>,
    finalizer: String,
    /// Where related objects are read.
    reader: Reader,
    /// Customize answers and related-object routing per parent.
    related: RelatedCache<ObjectKey>,
}

/// What a definition gives before its resources are read: its hooks, its parent selector and
/// whether a child type updates in rolling steps.
pub struct Prepared {
    hooks: SyncHooks,
    parent_selector: Option<LabelSelector>,
    rolling: bool,
}

impl Built for Composite {
    type Spec = CompositeControllerSpec;
    type Prepared = Prepared;

    /// Sharded: the parent (first) by uid, the children by their bucket label.
    fn cache_filter(_: &Prepared, controller: &str, index: usize) -> Option<FilterBy> {
        Some(shared::shard_filter(controller, index < 1))
    }

    fn prepare(def: &Controller<Self::Spec>, ctx: &EngineContext) -> Prepare<Self> {
        let hooks = SyncHooks::resolve(ctx, &def.name, def.base_dir(), &def.spec.hooks)?;
        let parent_selector = shared::parent_selector(&def.name, &def.spec.parent_resource)?;
        let children = def.spec.child_resources.iter();
        let wanted = source::parent_first(
            &def.spec.parent_resource,
            children.map(|c| (&c.api_version, &c.resource)),
        );
        let rolling = def
            .spec
            .child_resources
            .iter()
            .any(|c| c.method().is_rolling());
        let prepared = Prepared {
            hooks,
            parent_selector,
            rolling,
        };
        Ok((prepared, wanted))
    }

    /// The controller on its resolved resources (parent first, then the children, as
    /// `prepare` names them); its revisions are set by the caller.
    fn build(b: Building<Self>) -> Result<Self, StartError> {
        let name = &b.def.name;
        let ((parent, parent_source), resolved) = source::split_parent(name, b.resolved)?;
        let mut children = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, (info, source)) in b.def.spec.child_resources.iter().zip(resolved) {
            let why = "; a namespaced parent cannot own cluster-scoped children";
            shared::check_namespaced(name, &parent, &info, "child", why)?;
            let ty = shared::child_type(&info, rule.method());
            types.insert(ty.key.clone(), info);
            children.push(ChildSlot {
                source,
                ty,
                checks: rule
                    .update_strategy
                    .as_ref()
                    .and_then(|s| s.status_checks.as_ref())
                    .map(|c| c.conditions.clone())
                    .unwrap_or_default(),
            });
        }
        let finalizer = format!("metacontroller.io/compositecontroller-{name}");
        let core = Core::new(KIND, name.clone(), b.ctx, &b.reader, b.prepared.hooks);
        Ok(Composite {
            related: RelatedCache::for_queue(&core.queue),
            core,
            def: b.def,
            parent,
            parent_source,
            parent_selector: b.prepared.parent_selector,
            children,
            types,
            rolling: b.prepared.rolling,
            revisions: None,
            finalizer,
            reader: b.reader,
        })
    }

    fn sources(&self) -> Vec<&Source> {
        let mut all = vec![&self.parent_source];
        all.extend(self.children.iter().map(|c| &c.source));
        all.extend(self.revisions.iter().map(|(_, s)| s));
        all
    }

    /// Rolling updates: make sure ControllerRevisions are served (installing their CRD) and
    /// watch them.
    async fn watching(&mut self, stop: &CancellationToken) -> Result<(), StartError> {
        if self.rolling {
            let info = ensure_revision_resource(&self.core.ctx, &self.core.name, stop).await?;
            let source = Source::watched(&self.core.ctx, &info);
            self.revisions = Some((info, source));
        }
        Ok(())
    }

    /// Rolling updates: the ControllerRevisions read once, when served (nothing installed: a
    /// cluster that does not serve them has no rollout started).
    async fn snapshotted(&mut self, live: &Arc<LiveReader>) -> Result<(), SnapshotError> {
        if self.rolling
            && let Ok(info) = live
                .resolve(rollout::REVISION_API_VERSION, rollout::REVISION_RESOURCE)
                .await
        {
            let listed = live.read(&info).await?;
            self.revisions = Some((info, Source::Listed(listed)));
        }
        Ok(())
    }
}

impl Composite {
    fn parents_in_scope(&self) -> Vec<Arc<Value>> {
        let namespaced = self.parent.namespaced;
        shared::list_in_scope(&self.core.ctx, namespaced, &self.parent_source, |p| {
            self.in_scope(p)
        })
    }

    /// Is this parent ours to sync: in the `-n` namespace (if any), and selected by the
    /// definition's `parentResource.labelSelector` or still carrying our finalizer (a parent
    /// that stopped matching is finalized, not forgotten).
    fn in_scope(&self, parent: &Value) -> bool {
        shared::in_namespace_scope(&self.core.ctx, self.parent.namespaced, parent)
            && (shared::selected(self.parent_selector.as_ref(), parent)
                || object::finalizers(parent).contains(&self.finalizer.as_str()))
    }

    /// The cache of a resource this controller reads (parent, children, revisions).
    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        if type_key == self.parent.key() {
            return self.parent_source.informer();
        }
        self.child_source(type_key)
            .or_else(|| {
                self.revisions
                    .as_ref()
                    .filter(|(i, _)| i.key() == type_key)
                    .map(|(_, s)| s)
            })
            .and_then(Source::informer)
    }

    /// The source of a declared child resource.
    fn child_source(&self, type_key: &str) -> Option<&Source> {
        self.children
            .iter()
            .find(|s| s.ty.key == type_key)
            .map(|s| &s.source)
    }

    /// A rolling update would run without ControllerRevisions (a dry run on a cluster that
    /// does not serve them: no rollout has started).
    pub fn rolling_without_revisions(&self) -> bool {
        self.rolling && self.revisions.is_none()
    }

    /// Spawn the event routers (parent, children). They end with `stop`.
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        routing::spawn_router(&self.parent_source, stop, self, Self::route_parent);
        for slot in &self.children {
            let resource = slot.ty.key.clone();
            routing::spawn_router(&slot.source, stop, self, move |me, ev| {
                for action in routing::child_event(&resource, ev) {
                    me.route_child(action);
                }
            });
        }
    }

    fn route_parent(&self, ev: InformerEvent) {
        let ignore_status = self.def.spec.parent_resource.ignore_status_changes == Some(true);
        let action = routing::parent_event(
            ev,
            |p| ObjectKey::of(p).filter(|_| self.in_scope(p)),
            ObjectKey::of,
            &self.core.memory,
            ignore_status,
        );
        action.apply(&self.core.queue, &self.related, |t| self.enqueue_all(t));
    }

    fn route_child(&self, action: ChildAction) {
        match action {
            ChildAction::Owner(uid, t) => self.enqueue_owner(&uid, t),
            ChildAction::Orphan(o, t) => self.enqueue_matching(&o, t),
            ChildAction::All(t) => self.enqueue_all(t),
        }
    }

    fn enqueue_owner(&self, uid: &str, trigger: Trigger) {
        if let Some(k) = self.core.memory.key_of_uid(uid) {
            self.core.queue.add(k, trigger);
        }
    }

    /// Parents whose selector matches an orphan (to give them a chance to adopt it).
    fn enqueue_matching(&self, orphan: &Value, trigger: Trigger) {
        if self.def.spec.generate_selector == Some(true) {
            if let Some(uid) = object::label(orphan, CONTROLLER_UID_LABEL) {
                self.enqueue_owner(uid, trigger);
            }
            return;
        }
        let ns = if self.parent.namespaced {
            match object::namespace(orphan) {
                Some(ns) => Some(ns),
                None => return,
            }
        } else {
            None
        };
        let labels = object::labels(orphan);
        for p in self.parent_source.list(ns) {
            if !self.in_scope(&p) {
                continue;
            }
            if let Ok(sel) = self.selector_for(&p)
                && sel.matches(&labels)
                && let Some(k) = ObjectKey::of(&p)
            {
                self.core.queue.add(k, trigger.clone());
            }
        }
    }

    fn selector_for(&self, parent: &Value) -> Result<LabelSelector, String> {
        planner::composite_selector(parent, self.def.spec.generate_selector == Some(true))
    }
}

/// What a sync observed of one parent: its sync mode, related objects and claimed children.
pub struct Observed {
    finalizing: bool,
    uid: String,
    selector: LabelSelector,
    related: Vec<(String, Vec<Arc<Value>>)>,
    claimed: planner::Claimed,
}

impl Observed {
    /// The parent is being finalized (deleted, or no longer selected).
    pub fn finalizing(&self) -> bool {
        self.finalizing
    }
}

/// The sync or finalize hook's answer: the response, the desired children (each from the
/// revision that claims it during a rolling update) and the rollout decision.
pub struct Decided {
    resp: hookapi::SyncResponse,
    desired: Vec<(ChildId, Value)>,
    rollout: Option<planner::RolloutDecision>,
}

impl SyncKind for Composite {
    type Key = ObjectKey;
    type Seen = Observed;
    type Answer = Decided;

    type Hooks = SyncHooks;

    fn core(&self) -> &Core<ObjectKey, SyncHooks> {
        &self.core
    }

    fn parent(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.parent_source.get(key)
    }

    /// From the informer's metadata beside the cached text, without parsing the parent.
    fn parent_resource_version(&self, key: &ObjectKey) -> Option<String> {
        match self.parent_source.informer() {
            Some(i) => i.meta(key)?.resource_version,
            None => self
                .parent(key)
                .as_deref()
                .and_then(object::resource_version)
                .map(str::to_string),
        }
    }

    /// Sync mode, related objects (customize hook), children claimed by the selector.
    async fn observe(
        &self,
        key: &ObjectKey,
        parent: &Value,
        cx: SyncCx<'_>,
    ) -> Result<Option<Observed>, SyncError> {
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let selected = self
            .parent_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(parent)));
        let Some(finalizing) = shared::sync_mode(parent, &self.finalizer, selected) else {
            return Ok(None);
        };
        let selector = self.selector_for(parent).map_err(SyncError::Parent)?;
        let customize = self.core.hooks.customize(
            &self.core.ctx,
            &self.reader,
            &self.core.caller,
            &self.def.raw,
            self.parent.namespaced,
        );
        let related = self
            .related
            .related(&customize, parent, key, cx.stop)
            .await?
            .into_iter()
            .map(|(r, objs)| (r.info.key(), objs))
            .collect();
        let scope_ns = if self.parent.namespaced {
            object::namespace(parent)
        } else {
            None
        };
        let claimed = planner::claim(
            parent,
            &selector,
            self.children.iter().map(|slot| planner::Candidates {
                type_key: &slot.ty.key,
                owned: slot.source.controlled_by(&uid),
                orphans: slot.source.orphans(scope_ns, &selector),
            }),
        );
        Ok(Some(Observed {
            finalizing,
            uid,
            selector,
            related,
            claimed,
        }))
    }

    fn hook(&self, parent: &Value, seen: &Observed) -> Option<HookCall<'_>> {
        let (name, spec) = self.core.hooks.for_sync(seen.finalizing)?;
        let request = self.request(
            spec.version,
            parent,
            &seen.claimed.observed,
            &seen.related,
            seen.finalizing,
        );
        Some(HookCall {
            name,
            spec,
            request,
        })
    }

    /// Decode, normalize, refuse children of other controllers, then the rollout step.
    async fn desired(
        &self,
        key: &ObjectKey,
        parent: &Value,
        seen: &Observed,
        (hook_name, spec): (&'static str, &HookSpec),
        body: &Value,
    ) -> Result<Decided, SyncError> {
        let fail = |message: String| SyncError::answer(hook_name, message);
        let mut resp =
            hookapi::decode_sync(hook_name, spec.version, body).map_err(|e| fail(e.to_string()))?;
        // The plan reads the desired children from `desired` alone: no copy of the answer's.
        let mut desired = planner::normalize_desired(
            parent,
            &self.child_types(),
            &seen.selector,
            self.def.spec.generate_selector == Some(true),
            std::mem::take(&mut resp.children),
        )
        .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
        // A child this sync claimed is ours: only the other names are looked up (and parsed)
        // in the caches.
        let claimed: std::collections::HashSet<ChildId> = seen
            .claimed
            .observed
            .iter()
            .flat_map(|(t, objs)| objs.iter().map(move |o| ChildId::of(t, o)))
            .collect();
        let clashes = planner::foreign_clashes(
            &desired,
            |id| {
                if claimed.contains(id) {
                    return None;
                }
                self.child_source(&id.type_key)?.get(&id.object_key())
            },
            |o| planner::controlled_by_other(o, &seen.uid),
        );
        if !clashes.is_empty() {
            return Err(fail(format!(
                "{hook_name} hook: desired children belong to another controller: {}; objects of other controllers are never taken over: give the child another name, or delete that object",
                clashes.join("; ")
            )));
        }
        let mut rollout_decision = None;
        if self.rolling && !seen.finalizing {
            let (decision, d) = self
                .rollout(
                    spec,
                    key,
                    parent,
                    &seen.claimed.observed,
                    &seen.related,
                    &seen.selector,
                    desired,
                )
                .await?;
            desired = d;
            if let Some(state) = decision.state.as_ref().filter(|s| s.in_progress) {
                self.core.ctx.bus.publish(EngineEvent::Rollout {
                    controller: self.core.name.clone(),
                    parent: key.to_string(),
                    reason: state.reason.clone(),
                    message: state.message.clone(),
                });
            }
            rollout_decision = Some(decision);
        }
        shared::label_shard(&self.core.ctx, &self.core.name, parent, &mut desired);
        Ok(Decided {
            resp,
            desired,
            rollout: rollout_decision,
        })
    }

    fn plan(
        &self,
        key: &ObjectKey,
        parent: &Value,
        seen: &Observed,
        answer: Option<&Decided>,
    ) -> planner::SyncPlan {
        let now = jiff::Timestamp::now().to_string();
        planner::plan_composite(&planner::CompositeInput {
            parent,
            types: &self.child_types(),
            claimed: &seen.claimed,
            answer: answer.map(|a| planner::Answer {
                desired: &a.desired,
                status: a.resp.status.as_ref(),
                finalized: a.resp.finalized,
                resync_after_seconds: a.resp.resync_after_seconds,
            }),
            rollout: answer.and_then(|a| a.rollout.as_ref()),
            finalizer: planner::FinalizerInput {
                name: &self.finalizer,
                has_finalize_hook: self.core.hooks.finalize.is_some(),
                finalizing: seen.finalizing,
            },
            held: &self.core.memory.held_fields(key),
            now: &now,
        })
    }

    fn target<'a>(&'a self, key: &ObjectKey, parent: &'a Value) -> Target<'a> {
        Target {
            controller: &self.core.name,
            parent,
            parent_info: &self.parent,
            types: &self.types,
            revisions: self.revisions.as_ref().map(|(i, _)| i),
            finalizer: &self.finalizer,
            subject: crate::events::EventKey::subject(key),
        }
    }

    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        Composite::informer_for(self, type_key)
    }
}

impl Composite {
    /// The declared child types, in declaration order.
    fn child_types(&self) -> Vec<ChildType> {
        self.children.iter().map(|s| s.ty.clone()).collect()
    }

    fn request(
        &self,
        version: Version,
        parent: &Value,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        finalizing: bool,
    ) -> Value {
        let declared = self.children.iter().map(|s| s.ty.key.as_str());
        let children =
            hookapi::declared_object_map(version, self.parent.namespaced, declared, observed);
        let related = hookapi::object_map(version, self.parent.namespaced, related);
        hookapi::composite_request(&self.def.raw, parent, children, related, finalizing)
    }

    /// Rolling updates: read the parent's revisions (none when they are not served), call the
    /// hook for every old revision that still claims children, and step the rollout
    /// ([`rollout_plan`], pure): the desired children (each from the revision that claims it)
    /// and the decision (state, claims, revision writes).
    #[allow(clippy::too_many_arguments)]
    async fn rollout(
        &self,
        spec: &HookSpec,
        key: &ObjectKey,
        parent: &Value,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        selector: &LabelSelector,
        latest_desired: Vec<(ChildId, Value)>,
    ) -> Result<(planner::RolloutDecision, Vec<(ChildId, Value)>), SyncError> {
        let uid = object::uid(parent).unwrap_or_default();
        let stored = self
            .revisions
            .iter()
            .flat_map(|(_, s)| s.controlled_by(uid))
            .map(rollout::revision_from_object)
            .collect();
        let types: Vec<ChildType> = self.children.iter().map(|s| s.ty.clone()).collect();
        let field_paths = rollout_plan::field_paths(&self.def.spec);
        let revs = rollout_plan::revisions(parent, &field_paths, stored, &types);
        // The hook is called once per old revision that claims children, with the parent as
        // it was at that revision.
        let answers =
            rollout_plan::RevisionAnswers::new(&self.def.spec, spec.version, &types, selector);
        let mut old_desired = BTreeMap::new();
        for (rev, old_parent) in &revs.old {
            let request = self.request(spec.version, old_parent, observed, related, false);
            let body = self
                .core
                .caller
                .call(&self.core.ctx, "sync", spec, key, &request)
                .await?;
            let d = answers.desired(rev, old_parent, &body)?;
            old_desired.insert(rev.clone(), d);
        }
        let checks: BTreeMap<String, Vec<StatusConditionCheck>> = self
            .children
            .iter()
            .map(|s| (s.ty.key.clone(), s.checks.clone()))
            .collect();
        Ok(rollout_plan::decide(
            revs,
            rollout_plan::DecideInput {
                parent,
                parent_namespaced: self.parent.namespaced,
                types: &types,
                checks: &checks,
                selector,
                observed,
                latest_desired: &latest_desired,
                old_desired: &old_desired,
            },
        ))
    }
}

/// Make sure `controllerrevisions.metacontroller.k8s.io` is served, installing its CRD when
/// it is missing (rolling updates need it).
async fn ensure_revision_resource(
    ctx: &EngineContext,
    controller: &str,
    stop: &CancellationToken,
) -> Result<ResourceInfo, StartError> {
    if let Ok(i) = ctx
        .discovery
        .resolve(rollout::REVISION_API_VERSION, rollout::REVISION_RESOURCE)
        .await
    {
        return Ok(i);
    }
    let api: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(ctx.client.clone());
    let mut installed = false;
    match serde_json::from_value(rollout::revision_crd()) {
        Ok(crd) => match api
            .create(
                &kube::api::PostParams {
                    dry_run: false,
                    field_manager: Some(crate::k8s::FIELD_MANAGER.into()),
                },
                &crd,
            )
            .await
        {
            Ok(_) => {
                installed = true;
                ctx.bus.publish(EngineEvent::Info {
                    controller: Some(controller.to_string()),
                    message: "installed CRD controllerrevisions.metacontroller.k8s.io: rolling updates (RollingRecreate, RollingInPlace) keep their progress in ControllerRevision objects, as Metacontroller does".into(),
                });
            }
            Err(kube::Error::Api(s)) if s.code == 409 => installed = true,
            Err(e) => ctx.bus.publish(EngineEvent::Error {
                controller: Some(controller.to_string()),
                object: None,
                message: format!(
                    "rolling updates (RollingRecreate, RollingInPlace) keep their progress in ControllerRevision objects (controllerrevisions.metacontroller.k8s.io/v1alpha1, the CRD Metacontroller installs), which this cluster does not serve, and installing that CRD failed: {}. Install Metacontroller's CRDs (its manifests/crds), or run dev with a user that may create CustomResourceDefinitions",
                    crate::k8s::kube_error_message(&e)
                ),
            }),
        },
        Err(e) => {
            return Err(StartError::Config {
                controller: controller.to_string(),
                message: format!("internal: revision CRD does not encode: {e}"),
            });
        }
    }
    // A CRD just created takes a moment to be served: that wait is not an error.
    let grace = if installed {
        std::time::Duration::from_secs(30)
    } else {
        std::time::Duration::ZERO
    };
    let v = start::resolve_all_after(
        ctx,
        controller,
        &[(
            rollout::REVISION_API_VERSION.to_string(),
            rollout::REVISION_RESOURCE.to_string(),
        )],
        stop,
        grace,
    )
    .await?;
    v.into_iter()
        .next()
        .ok_or_else(|| StartError::Stopped(controller.to_string()))
}

impl KindController for Composite {
    const KIND: &'static str = KIND;

    fn parent_resources(&self) -> String {
        self.parent.key()
    }
    fn keyed_parents(&self) -> Vec<(ObjectKey, Arc<Value>)> {
        shared::keyed(self.parents_in_scope(), |k| k)
    }
    /// Forget customize answers.
    fn forget_answers(&self) {
        self.related.clear();
    }
    fn resync_period_seconds(&self) -> Option<i32> {
        self.def.spec.resync_period_seconds
    }
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        Composite::spawn_routers(self, stop);
    }
}
