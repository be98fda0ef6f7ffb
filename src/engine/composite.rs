//! CompositeController: one parent resource, its children, Metacontroller's semantics.
//!
//! [`Composite::start`] resolves the definition's resources (waiting for ones that do not exist
//! yet), starts the shared informers, routes their events to parent keys through indexes, and
//! runs the shared controller loop. [`Composite::sync_parent`] is one reconcile of one parent:
//! claim children -> customize -> sync/finalize hook (once per live revision during a rolling
//! update) -> pure plan -> execute -> wait until the caches show the writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::{EngineContext, HookSpec};
use super::controller::{ControllerHandle, Exchange, Reconciler, SyncError, SyncOutcome, Tracker};
use super::events::{EngineEvent, Trigger};
use super::execute::Target;
use super::hookapi::{self, Version};
use super::ownership::CONTROLLER_UID_LABEL;
use super::plan::{ChildId, ChildType};
use super::planner;
use super::queue::{Backoff, WorkQueue};
use super::rollout;
use super::rollout_plan;
use super::shared::{self, Caller, ChildAction, RelatedCache, SyncHooks, SyncMemory};
pub use super::shared::{StartError, resolve_all};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{CompositeControllerSpec, Controller, StatusConditionCheck};

/// The controller kind, as shown in events and hook call logs.
const KIND: &str = "CompositeController";

/// A declared child resource with its cache.
struct ChildSlot {
    informer: Arc<Informer>,
    ty: ChildType,
    checks: Vec<StatusConditionCheck>,
}

/// A running CompositeController.
pub struct Composite {
    name: String,
    def: Controller<CompositeControllerSpec>,
    ctx: Arc<EngineContext>,
    parent: ResourceInfo,
    parent_informer: Arc<Informer>,
    parent_selector: Option<LabelSelector>,
    children: Vec<ChildSlot>,
    types: BTreeMap<String, ResourceInfo>,
    revisions: Option<(ResourceInfo, Arc<Informer>)>,
    hooks: SyncHooks,
    finalizer: String,
    queue: WorkQueue<ObjectKey, Trigger>,
    caller: Caller,
    /// Uid routing, last status written, last exchange per parent.
    memory: SyncMemory<ObjectKey>,
    /// Customize answers and related-object routing per parent.
    related: RelatedCache<ObjectKey>,
}

fn type_key(info: &ResourceInfo) -> String {
    info.key()
}

impl Composite {
    /// Resolve resources (retrying until they exist), start informers and build the
    /// controller. Returns when it is ready to run.
    pub async fn start(
        def: Controller<CompositeControllerSpec>,
        ctx: Arc<EngineContext>,
        stop: &CancellationToken,
    ) -> Result<Arc<Self>, StartError> {
        let name = def.name.clone();
        let cfg = |message: String| StartError::config(&name, message);
        let hooks = SyncHooks::resolve(&ctx, &name, def.base_dir(), &def.spec.hooks)?;
        let parent_selector = shared::parent_selector(&name, &def.spec.parent_resource)?;

        // Resolve every resource; a missing one is reported and retried until it appears.
        let mut wanted = vec![(
            def.spec.parent_resource.api_version.clone(),
            def.spec.parent_resource.resource.clone(),
        )];
        wanted.extend(
            def.spec
                .child_resources
                .iter()
                .map(|c| (c.api_version.clone(), c.resource.clone())),
        );
        let rolling = def
            .spec
            .child_resources
            .iter()
            .any(|c| c.method().is_rolling());
        let infos = resolve_all(&ctx, &name, &wanted, stop).await?;
        let parent = infos[0].clone();
        let mut children = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, info) in def.spec.child_resources.iter().zip(infos[1..].iter()) {
            if parent.namespaced && !info.namespaced {
                return Err(cfg(format!(
                    "child resource {} is cluster-scoped but the parent {} is namespaced; a namespaced parent cannot own cluster-scoped children",
                    type_key(info),
                    type_key(&parent)
                )));
            }
            let informer = ctx.informers.informer(&info.api_resource, info.namespaced);
            let ty = shared::child_type(info, rule.method());
            types.insert(ty.key.clone(), info.clone());
            children.push(ChildSlot {
                informer,
                ty,
                checks: rule
                    .update_strategy
                    .as_ref()
                    .and_then(|s| s.status_checks.as_ref())
                    .map(|c| c.conditions.clone())
                    .unwrap_or_default(),
            });
        }
        let revisions = if rolling {
            let info = ensure_revision_resource(&ctx, &name, stop).await?;
            let inf = ctx.informers.informer(&info.api_resource, info.namespaced);
            Some((info, inf))
        } else {
            None
        };
        let parent_informer = ctx
            .informers
            .informer(&parent.api_resource, parent.namespaced);
        // Wait for every cache.
        let mut all: Vec<&Arc<Informer>> = vec![&parent_informer];
        all.extend(children.iter().map(|c| &c.informer));
        if let Some((_, i)) = &revisions {
            all.push(i);
        }
        shared::wait_caches(&ctx, &name, &all, stop).await?;
        let finalizer = format!("metacontroller.io/compositecontroller-{name}");
        let queue = WorkQueue::new(Backoff::default());
        Ok(Arc::new(Composite {
            caller: Caller::new(KIND, &name),
            related: RelatedCache::for_queue(&queue),
            name,
            def,
            queue,
            ctx,
            parent,
            parent_informer,
            parent_selector,
            children,
            types,
            revisions,
            hooks,
            finalizer,
            memory: SyncMemory::default(),
        }))
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parent resource.
    pub fn parent_resource(&self) -> &ResourceInfo {
        &self.parent
    }

    fn parents_in_scope(&self) -> Vec<Arc<Value>> {
        let ns = shared::scope_namespace(&self.ctx, self.parent.namespaced);
        let mut parents = self.parent_informer.list(ns);
        parents.retain(|p| self.in_scope(p));
        parents
    }

    /// Is this parent ours to sync: in the `-n` namespace (if any), and selected by the
    /// definition's `parentResource.labelSelector` or still carrying our finalizer (a parent
    /// that stopped matching is finalized, not forgotten).
    fn in_scope(&self, parent: &Value) -> bool {
        shared::in_namespace_scope(&self.ctx, self.parent.namespaced, parent)
            && (self
                .parent_selector
                .as_ref()
                .is_none_or(|s| s.matches(&object::labels(parent)))
                || object::finalizers(parent).contains(&self.finalizer.as_str()))
    }

    /// Queue every parent (start-up, resync period, manual resync, hook reload).
    pub fn enqueue_all(&self, trigger: Trigger) {
        shared::enqueue_each(&self.queue, &self.memory, self.keyed_parents(), &trigger);
    }

    /// The parents in scope with their keys.
    fn keyed_parents(&self) -> impl Iterator<Item = (ObjectKey, Arc<Value>)> {
        self.parents_in_scope()
            .into_iter()
            .filter_map(|p| ObjectKey::of(&p).map(|k| (k, p)))
    }

    /// The last sync/finalize exchange of a parent: (hook name, request, response).
    pub fn last_exchange(&self, key: &ObjectKey) -> Option<(String, Value, Value)> {
        self.memory.last_exchange(key)
    }

    /// The cache of a resource this controller reads (parent, children, revisions).
    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        if type_key == self.parent.key() {
            return Some(&self.parent_informer);
        }
        self.child_informer(type_key).or_else(|| {
            self.revisions
                .as_ref()
                .filter(|(i, _)| i.key() == type_key)
                .map(|(_, inf)| inf)
        })
    }

    /// The cache of a declared child resource.
    fn child_informer(&self, type_key: &str) -> Option<&Arc<Informer>> {
        self.children
            .iter()
            .find(|s| s.ty.key == type_key)
            .map(|s| &s.informer)
    }

    /// Spawn the event routers (parent, children, resync timer). They end with `stop`.
    pub fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        let me = Arc::clone(self);
        let rx = self.parent_informer.subscribe();
        tokio::spawn(shared::for_each_event(rx, stop.clone(), move |ev| {
            me.route_parent(ev)
        }));
        for slot in &self.children {
            let me = Arc::clone(self);
            let rx = slot.informer.subscribe();
            let resource = slot.ty.key.clone();
            tokio::spawn(shared::for_each_event(rx, stop.clone(), move |ev| {
                for action in shared::child_event(&resource, ev) {
                    me.route_child(action);
                }
            }));
        }
        let me = Arc::clone(self);
        shared::spawn_resync(self.def.spec.resync_period_seconds, stop, move || {
            me.enqueue_all(Trigger::ResyncPeriod)
        });
    }

    fn route_parent(&self, ev: InformerEvent) {
        let ignore_status = self.def.spec.parent_resource.ignore_status_changes == Some(true);
        let action = shared::parent_event(
            ev,
            |p| ObjectKey::of(p).filter(|_| self.in_scope(p)),
            ObjectKey::of,
            &self.memory,
            ignore_status,
        );
        action.apply(&self.queue, &self.related, |t| self.enqueue_all(t));
    }

    fn route_child(&self, action: ChildAction) {
        match action {
            ChildAction::Owner(uid, t) => self.enqueue_owner(&uid, t),
            ChildAction::Orphan(o, t) => self.enqueue_matching(&o, t),
            ChildAction::All(t) => self.enqueue_all(t),
        }
    }

    fn enqueue_owner(&self, uid: &str, trigger: Trigger) {
        if let Some(k) = self.memory.key_of_uid(uid) {
            self.queue.add(k, trigger);
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
        for p in self.parent_informer.list(ns) {
            if !self.in_scope(&p) {
                continue;
            }
            if let Ok(sel) = self.selector_for(&p)
                && sel.matches(&labels)
                && let Some(k) = ObjectKey::of(&p)
            {
                self.queue.add(k, trigger.clone());
            }
        }
    }

    fn selector_for(&self, parent: &Value) -> Result<LabelSelector, String> {
        planner::composite_selector(parent, self.def.spec.generate_selector == Some(true))
    }

    /// One reconcile of one parent.
    pub async fn sync_parent(
        self: &Arc<Self>,
        key: &ObjectKey,
        stop: &CancellationToken,
    ) -> SyncOutcome {
        shared::finish_sync(&self.ctx, self.try_sync(key, stop).await).await
    }

    async fn try_sync(
        self: &Arc<Self>,
        key: &ObjectKey,
        stop: &CancellationToken,
    ) -> Result<SyncOutcome, (SyncError, Option<Value>)> {
        let Some(parent) = self.parent_informer.get(key) else {
            return Ok(SyncOutcome::default());
        };
        let with_parent = |f: SyncError| (f, Some((*parent).clone()));
        let uid = object::uid(&parent).unwrap_or_default().to_string();
        let selected = self
            .parent_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(&parent)));
        let Some(finalizing) = shared::sync_mode(&parent, &self.finalizer, selected) else {
            return Ok(SyncOutcome::default());
        };
        let selector = self
            .selector_for(&parent)
            .map_err(|e| with_parent(SyncError::Parent(e)))?;

        // Related objects (customize hook).
        let customize = self.hooks.customize(
            &self.ctx,
            &self.caller,
            &self.def.raw,
            self.parent.namespaced,
        );
        let related = self
            .related
            .related(&customize, &parent, key, stop)
            .await
            .map_err(with_parent)?;
        let related_groups: Vec<(String, Vec<Arc<Value>>)> = related
            .iter()
            .map(|(r, objs)| (r.info.key(), objs.clone()))
            .collect();

        // Claim children.
        let scope_ns = if self.parent.namespaced {
            object::namespace(&parent)
        } else {
            None
        };
        let claimed = planner::claim(
            &parent,
            &selector,
            self.children.iter().map(|slot| planner::Candidates {
                type_key: &slot.ty.key,
                owned: slot.informer.controlled_by(&uid),
                orphans: slot.informer.orphans(scope_ns, &selector),
            }),
        );
        let observed = &claimed.observed;
        let types: Vec<ChildType> = self.children.iter().map(|s| s.ty.clone()).collect();

        let hook_spec = self.hooks.for_sync(finalizing);
        let mut outcome = SyncOutcome::default();
        let mut answer = None;
        let mut desired = Vec::new();
        let mut rollout_decision = None;
        if let Some((hook_name, spec)) = hook_spec {
            let request =
                self.request(spec.version, &parent, observed, &related_groups, finalizing);
            let body = self
                .caller
                .call(&self.ctx, hook_name, spec, key, &request)
                .await
                .map_err(with_parent)?;
            self.memory
                .record_exchange(key, hook_name, request, body.clone());
            let resp = hookapi::decode_sync(hook_name, spec.version, &body)
                .map_err(|e| with_parent(SyncError::answer(hook_name, e.to_string())))?;
            desired = planner::normalize_desired(
                &parent,
                &types,
                &selector,
                self.def.spec.generate_selector == Some(true),
                resp.children.clone(),
            )
            .map_err(|e| {
                with_parent(SyncError::answer(
                    hook_name,
                    format!("{hook_name} hook: {e}"),
                ))
            })?;
            let clashes = planner::foreign_clashes(
                &desired,
                |id| self.child_informer(&id.type_key)?.get(&id.object_key()),
                |o| planner::controlled_by_other(o, &uid),
            );
            if !clashes.is_empty() {
                return Err(with_parent(SyncError::answer(
                    hook_name,
                    format!(
                        "{hook_name} hook: desired children belong to another controller: {}; objects of other controllers are never taken over: give the child another name, or delete that object",
                        clashes.join("; ")
                    ),
                )));
            }
            if let Some((rev_info, _)) = &self.revisions
                && !finalizing
            {
                let decision = self
                    .rollout(
                        spec,
                        key,
                        &parent,
                        observed,
                        &related_groups,
                        &selector,
                        desired,
                        rev_info,
                    )
                    .await
                    .map_err(with_parent)?;
                desired = decision.1;
                let decision = decision.0;
                if let Some(state) = decision.state.as_ref().filter(|s| s.in_progress) {
                    outcome.rollout_pending = true;
                    self.ctx.bus.publish(EngineEvent::Rollout {
                        controller: self.name.clone(),
                        parent: key.to_string(),
                        reason: state.reason.clone(),
                        message: state.message.clone(),
                    });
                }
                rollout_decision = Some(decision);
            }
            outcome.resync_after = resp.resync_after_seconds.map(Duration::from_secs_f64);
            answer = Some(resp);
        }
        let now = jiff::Timestamp::now().to_string();
        let sync_plan = planner::plan_composite(&planner::CompositeInput {
            parent: &parent,
            types: &types,
            claimed: &claimed,
            answer: answer.as_ref().map(|resp| planner::Answer {
                desired: &desired,
                status: resp.status.as_ref(),
                finalized: resp.finalized,
                resync_after_seconds: resp.resync_after_seconds,
            }),
            rollout: rollout_decision.as_ref(),
            finalizer: planner::FinalizerInput {
                name: &self.finalizer,
                has_finalize_hook: self.hooks.finalize.is_some(),
                finalizing,
            },
            held: &self.memory.held_fields(key),
            now: &now,
        });

        self.ctx
            .bus
            .publish(sync_plan.event(&self.name, &key.to_string()));
        let target = Target {
            controller: &self.name,
            parent: &parent,
            parent_info: &self.parent,
            types: &self.types,
            revisions: self.revisions.as_ref().map(|(i, _)| i),
            finalizer: &self.finalizer,
            subject: super::events::EventKey::subject(key),
        };
        shared::carry_out(&self.ctx, &self.memory, key, &target, &sync_plan, |t| {
            self.informer_for(t)
        })
        .await
        .map_err(with_parent)?
        .fill(&mut outcome);
        Ok(outcome)
    }

    fn request(
        &self,
        version: Version,
        parent: &Value,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        finalizing: bool,
    ) -> Value {
        let groups: Vec<(String, Vec<Arc<Value>>)> = self
            .children
            .iter()
            .map(|s| {
                (
                    s.ty.key.clone(),
                    observed.get(&s.ty.key).cloned().unwrap_or_default(),
                )
            })
            .collect();
        let children = hookapi::object_map(version, self.parent.namespaced, &groups);
        let related = hookapi::object_map(version, self.parent.namespaced, related);
        hookapi::composite_request(&self.def.raw, parent, children, related, finalizing)
    }

    /// Rolling updates: read the parent's revisions, call the hook for every old revision that
    /// still claims children, and step the rollout ([`rollout_plan`], pure): the desired
    /// children (each from the revision that claims it) and the decision (state, claims,
    /// revision writes).
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
        rev_info: &ResourceInfo,
    ) -> Result<(planner::RolloutDecision, Vec<(ChildId, Value)>), SyncError> {
        let _ = rev_info;
        let Some((_, rev_informer)) = &self.revisions else {
            return Err(SyncError::Internal("no revision cache".into()));
        };
        let uid = object::uid(parent).unwrap_or_default();
        let stored = rev_informer
            .controlled_by(uid)
            .into_iter()
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
                .caller
                .call(&self.ctx, "sync", spec, key, &request)
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
                    field_manager: Some(super::execute::FIELD_MANAGER.into()),
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
                    super::execute::kube_error_message(&e)
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
    let v = shared::resolve_all_after(
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

impl ControllerHandle for Composite {
    fn name(&self) -> &str {
        &self.name
    }
    fn queue_stats(&self) -> super::queue::QueueStats {
        self.queue.stats()
    }
    fn parent_count(&self) -> usize {
        self.parents_in_scope().len()
    }
    fn enqueue_all(&self, trigger: Trigger) {
        Composite::enqueue_all(self, trigger);
    }
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        let named = self
            .keyed_parents()
            .filter(|(k, p)| k.to_string() == name || object::name(p) == Some(name));
        shared::enqueue_each(&self.queue, &self.memory, named, &trigger)
    }
    /// Forget customize answers, then queue every parent.
    fn hook_reloaded(&self) {
        self.related.clear();
        self.enqueue_all(Trigger::HookReloaded);
    }
    fn hook_specs(&self) -> Vec<(&'static str, HookSpec)> {
        self.hooks.specs()
    }
    fn exchanges(&self) -> Vec<Exchange> {
        self.memory.exchanges()
    }
    fn replay(&self, exchanges: Vec<Exchange>) -> futures::future::BoxFuture<'_, Vec<EngineEvent>> {
        Box::pin(
            self.caller
                .replay(&self.ctx, exchanges, |hook| self.hooks.for_exchange(hook)),
        )
    }
}

/// Start a CompositeController: resolve, start informers and routers, queue every parent,
/// announce it; returns its handle and the worker loop to run until `stop`.
pub async fn launch(
    def: Controller<CompositeControllerSpec>,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> Result<shared::Launched, StartError> {
    let comp = Composite::start(def, Arc::clone(&ctx), &stop).await?;
    comp.spawn_routers(&stop);
    Composite::enqueue_all(&comp, Trigger::ParentAdded);
    let lp = Arc::new(CompositeLoop {
        inner: Arc::clone(&comp),
        stop: stop.clone(),
    });
    let parent_resource = comp.parent_resource().key();
    Ok(shared::launched(
        ctx,
        KIND,
        comp,
        parent_resource,
        lp,
        stop,
        tracker,
    ))
}

/// Adapter so the shared loop can drive a composite controller.
pub struct CompositeLoop {
    /// The controller.
    pub inner: Arc<Composite>,
    /// Stops related-resource routers started during syncs.
    pub stop: CancellationToken,
}

impl Reconciler for CompositeLoop {
    type Key = ObjectKey;

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn queue(&self) -> &WorkQueue<ObjectKey, Trigger> {
        &self.inner.queue
    }

    async fn sync(&self, key: &ObjectKey, triggers: &[Trigger]) -> SyncOutcome {
        self.inner.memory.clear_hot_loops_on(key, triggers);
        self.inner.sync_parent(key, &self.stop).await
    }
}
