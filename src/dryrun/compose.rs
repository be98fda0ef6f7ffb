//! What one sync of each parent would do, computed from live state read once: claim children
//! (ControllerRef rules, [`ownership::claim`]), call customize and the sync or finalize hook
//! with the real request (the engine's request builders and hook client), then the engine's
//! pure planning pieces ([`plan::normalize_desired`], [`plan::plan_children`],
//! [`plan::status_change`], [`plan::finalizer_change`], [`plan::metadata_change`],
//! [`map_plan`]) turn the answer into the same typed [`Plan`] the engine executes.
//!
//! Nothing here writes: the only requests are lists, discovery and the hook calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::live::{Listed, LiveError, LiveReader};
use crate::engine::context::{EngineContext, HookSpec};
use crate::engine::controller::SyncError;
use crate::engine::decorator::DECORATOR_ANNOTATION;
use crate::engine::decorator_rule::{self, TargetRule};
use crate::engine::events::{EventKey, EventSubject};
use crate::engine::hookapi::{self, Version};
use crate::engine::map_plan::{self, MAP_KEY_LABEL, StatusInput};
use crate::engine::plan::{ChildId, ChildType};
use crate::engine::planner::{
    self, Answer, Candidates, CompositeInput, DecoratorAnswer, DecoratorInput, FinalizerInput,
    MapAnswer, MapKeyInput, SyncPlan,
};
use crate::engine::shared::{self, Caller, SyncHooks};
use crate::engine::{rollout, rollout_plan};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{
    CompositeControllerSpec, Controller, ControllerDef, DecoratorControllerSpec, MapControllerSpec,
    StatusConditionCheck, UpdateMethod,
};

/// One hook call made while planning: its name, request and answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// `sync`, `finalize`, `customize`, `map` or `tombstone`.
    pub hook: String,
    /// The request body sent.
    pub request: Value,
    /// The answer.
    pub response: Value,
}

/// What one sync of one parent (a target, a map key) would do.
#[derive(Debug, Clone)]
pub struct ParentPlan {
    /// The controller's name.
    pub controller: String,
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub controller_kind: &'static str,
    /// The parent (target) resource.
    pub parent_resource: ResourceInfo,
    /// The parent as read.
    pub parent: Arc<Value>,
    /// MapController: the map key.
    pub map_key: Option<String>,
    /// MapController: the key's input (`apiVersion/Kind/ns/name`), `None` when detached.
    pub map_input: Option<String>,
    /// The parent is being deleted (or stopped matching): the finalize hook was asked.
    pub finalizing: bool,
    /// The engine planner's typed plan (the same `dev` executes).
    pub plan: SyncPlan,
    /// Resources of the child types, by `Kind.apiVersion`.
    pub types: BTreeMap<String, ResourceInfo>,
    /// Notes about what the plan could not know (shown with it).
    pub notes: Vec<String>,
    /// Hook calls made.
    pub exchanges: Vec<Exchange>,
}

impl ParentPlan {
    /// `namespace/name` of the parent (with the map key for a MapController key).
    pub fn parent_name(&self) -> String {
        self.subject().to_string()
    }

    /// The parent and map key, as engine events name them.
    pub fn subject(&self) -> EventSubject {
        EventSubject {
            parent: ObjectKey::of(&self.parent)
                .map(|k| k.to_string())
                .unwrap_or_default(),
            map_key: self.map_key.clone(),
            status_only: false,
        }
    }
}

/// A parent whose plan could not be made (a hook failed, the answer was refused).
#[derive(Debug, Clone)]
pub struct ParentFailure {
    /// The controller's name.
    pub controller: String,
    /// The parent (`namespace/name`, with the map key).
    pub parent: String,
    /// What went wrong (a hook's message includes its stderr tail).
    pub message: String,
}

impl ParentFailure {
    fn of(controller: &str, parent: &Value, message: String) -> Self {
        ParentFailure {
            controller: controller.to_string(),
            parent: ObjectKey::of(parent)
                .map(|k| k.to_string())
                .unwrap_or_default(),
            message,
        }
    }
}

/// Why planning could not start at all.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// Reading live state failed.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// The definition cannot be run (hooks, selectors).
    #[error("controller {controller}: {message}")]
    Config {
        /// The controller.
        controller: String,
        /// Why.
        message: String,
    },
    /// A PARENT or --key named nothing the controller selects.
    #[error("{0}")]
    NotFound(String),
}

/// Which parents to plan.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// `namespace/name` or `name` (empty: every parent in scope).
    pub parents: Vec<String>,
    /// MapController: only this key.
    pub key: Option<String>,
}

impl Selection {
    fn wants(&self, obj: &Value) -> bool {
        if self.parents.is_empty() {
            return true;
        }
        let Some(k) = ObjectKey::of(obj) else {
            return false;
        };
        self.parents
            .iter()
            .any(|p| *p == k.to_string() || (!p.contains('/') && *p == k.name))
    }
}

/// Every plan and failure of one controller.
#[derive(Debug, Default)]
pub struct Planned {
    /// Plans, in parent order.
    pub plans: Vec<ParentPlan>,
    /// Parents whose sync would fail.
    pub failures: Vec<ParentFailure>,
    /// The PARENT arguments this controller matched.
    pub matched: BTreeSet<String>,
}

/// Plans syncs with a hook client and a one-time reader of live state.
pub struct Composer<'a> {
    /// Hook client, options (`--hook-base-url`, `-n`).
    pub ctx: &'a EngineContext,
    /// Live state.
    pub live: &'a LiveReader,
}

fn config(controller: &str, e: impl std::fmt::Display) -> ComposeError {
    ComposeError::Config {
        controller: controller.to_string(),
        message: e.to_string(),
    }
}

/// Per child type: the resource, its slot in the hook maps, its cache.
struct Slot {
    ty: ChildType,
    listed: Arc<Listed>,
}

impl Composer<'_> {
    /// Call hook `hook` with `request` for `key` and record the exchange.
    async fn ask(
        &self,
        caller: &Caller,
        hook: &str,
        spec: &HookSpec,
        key: &(dyn EventKey + Sync),
        request: Value,
        exchanges: &mut Vec<Exchange>,
    ) -> Result<Value, SyncError> {
        let body = caller.call(self.ctx, hook, spec, key, &request).await?;
        exchanges.push(Exchange {
            hook: hook.to_string(),
            request,
            response: body.clone(),
        });
        Ok(body)
    }

    /// Plan every selected parent of `def`.
    pub async fn plan(
        &self,
        def: &ControllerDef,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        match def {
            ControllerDef::Composite(c) => self.composite(c, sel).await,
            ControllerDef::Decorator(d) => self.decorator(d, sel).await,
            ControllerDef::Map(m) => self.map(m, sel).await,
        }
    }

    async fn slots(
        &self,
        rules: impl Iterator<Item = (&str, &str, UpdateMethod)>,
    ) -> Result<(Vec<Slot>, BTreeMap<String, ResourceInfo>), ComposeError> {
        let mut slots = Vec::new();
        let mut types = BTreeMap::new();
        for (api_version, resource, method) in rules {
            let info = self.live.resolve(api_version, resource).await?;
            let listed = self.live.read(&info).await?;
            let ty = shared::child_type(&info, method);
            types.insert(ty.key.clone(), info);
            slots.push(Slot { ty, listed });
        }
        Ok((slots, types))
    }

    /// Parents of `info` in the `-n` scope that `keep` accepts and the selection names.
    async fn parents(
        &self,
        info: &ResourceInfo,
        sel: &Selection,
        planned: &mut Planned,
        keep: impl Fn(&Value) -> bool,
    ) -> Result<Vec<Arc<Value>>, ComposeError> {
        let listed = self.live.read(info).await?;
        let ns = if info.namespaced {
            self.live.namespace()
        } else {
            None
        };
        let mut out = Vec::new();
        for p in listed.list(ns) {
            if !keep(&p) || !sel.wants(&p) {
                continue;
            }
            if let Some(k) = ObjectKey::of(&p) {
                for want in &sel.parents {
                    if *want == k.to_string() || *want == k.name {
                        planned.matched.insert(want.clone());
                    }
                }
            }
            out.push(p);
        }
        Ok(out)
    }

    /// The related objects of `parent` per customize rule (none without a customize hook).
    #[allow(clippy::too_many_arguments)]
    async fn related(
        &self,
        caller: &Caller,
        hook: Option<&HookSpec>,
        definition: &Value,
        parent: &Value,
        parent_namespaced: bool,
        sync_version: Version,
        exchanges: &mut Vec<Exchange>,
    ) -> Result<Vec<(String, Vec<Arc<Value>>)>, SyncError> {
        let Some(spec) = hook else {
            return Ok(Vec::new());
        };
        let key = ObjectKey::of(parent).unwrap_or_else(|| ObjectKey::new(None, ""));
        let body = hookapi::customize_request(definition, parent);
        let resp = self
            .ask(caller, "customize", spec, &key, body, exchanges)
            .await?;
        let rules = hookapi::decode_customize(spec.version, &resp)
            .map_err(|e| SyncError::answer("customize", e.to_string()))?;
        let mut out = Vec::new();
        for r in rules {
            let info = self
                .live
                .resolve(&r.api_version, &r.resource)
                .await
                .map_err(|e| SyncError::answer("customize", format!("customize hook: {e}")))?;
            let listed = self
                .live
                .read(&info)
                .await
                .map_err(|e| SyncError::Read(e.to_string()))?;
            let labels = match &r.label_selector {
                Some(s) => LabelSelector::from_label_selector(s).map_err(|e| {
                    SyncError::answer("customize", format!("customize hook: labelSelector: {e}"))
                })?,
                None => LabelSelector::default(),
            };
            let namespaces = match &r.namespace_selector {
                Some(s) => {
                    let sel = LabelSelector::from_label_selector(s).map_err(|e| {
                        SyncError::answer(
                            "customize",
                            format!("customize hook: namespaceSelector: {e}"),
                        )
                    })?;
                    let nsinfo = self
                        .live
                        .resolve("v1", "namespaces")
                        .await
                        .map_err(|e| SyncError::Read(e.to_string()))?;
                    let all = self
                        .live
                        .read(&nsinfo)
                        .await
                        .map_err(|e| SyncError::Read(e.to_string()))?;
                    Some(
                        all.select(None, &sel)
                            .iter()
                            .filter_map(|n| object::name(n).map(str::to_string))
                            .collect::<BTreeSet<String>>(),
                    )
                }
                None => None,
            };
            let namespace = if parent_namespaced && sync_version == Version::V1 {
                object::namespace(parent).map(str::to_string)
            } else {
                r.namespace.clone().filter(|n| !n.is_empty())
            };
            let names: Option<BTreeSet<&String>> = r
                .names
                .as_ref()
                .filter(|n| !n.is_empty())
                .map(|n| n.iter().collect());
            let ns = if info.namespaced {
                namespace.as_deref()
            } else {
                None
            };
            let objs: Vec<Arc<Value>> = listed
                .select(ns, &labels)
                .into_iter()
                .filter(|o| {
                    names
                        .as_ref()
                        .is_none_or(|n| object::name(o).is_some_and(|x| n.contains(&x.to_string())))
                        && namespaces
                            .as_ref()
                            .is_none_or(|set| object::namespace(o).is_some_and(|x| set.contains(x)))
                })
                .collect();
            out.push((info.key(), objs));
        }
        Ok(out)
    }

    async fn composite(
        &self,
        def: &Controller<CompositeControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let name = &def.name;
        let hooks = SyncHooks::resolve(self.ctx, name, def.base_dir(), &def.spec.hooks)
            .map_err(|e| config(name, e))?;
        let parent_selector = shared::parent_selector(name, &def.spec.parent_resource)
            .map_err(|e| config(name, e))?;
        let pinfo = self
            .live
            .resolve(
                &def.spec.parent_resource.api_version,
                &def.spec.parent_resource.resource,
            )
            .await?;
        let (slots, types) = self
            .slots(
                def.spec
                    .child_resources
                    .iter()
                    .map(|c| (c.api_version.as_str(), c.resource.as_str(), c.method())),
            )
            .await?;
        let finalizer = format!("metacontroller.io/compositecontroller-{name}");
        let mut planned = Planned::default();
        let parents = self
            .parents(&pinfo, sel, &mut planned, |p| {
                parent_selector
                    .as_ref()
                    .is_none_or(|s| s.matches(&object::labels(p)))
                    || object::finalizers(p).contains(&finalizer.as_str())
            })
            .await?;
        let caller = Caller::new("CompositeController", name);
        let rolling = def
            .spec
            .child_resources
            .iter()
            .any(|c| c.method().is_rolling());
        let revisions = if rolling {
            match self
                .live
                .resolve(rollout::REVISION_API_VERSION, rollout::REVISION_RESOURCE)
                .await
            {
                Ok(info) => Some(self.live.read(&info).await?),
                // Not served: no rollout has started (dev installs the CRD first).
                Err(_) => None,
            }
        } else {
            None
        };
        let checks = slots
            .iter()
            .zip(&def.spec.child_resources)
            .map(|(s, rule)| {
                (
                    s.ty.key.clone(),
                    rule.update_strategy
                        .as_ref()
                        .and_then(|u| u.status_checks.as_ref())
                        .map(|c| c.conditions.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let cx = CompositeCx {
            revisions,
            checks,
            def,
            hooks: &hooks,
            parent_selector: parent_selector.as_ref(),
            pinfo: &pinfo,
            slots: &slots,
            types: &types,
            finalizer: &finalizer,
            caller: &caller,
        };
        for parent in parents {
            match self.composite_parent(&cx, &parent).await {
                Ok(Some(p)) => planned.plans.push(p),
                Ok(None) => {}
                Err(f) => planned
                    .failures
                    .push(ParentFailure::of(name, &parent, f.to_string())),
            }
        }
        Ok(planned)
    }

    async fn composite_parent(
        &self,
        cx: &CompositeCx<'_>,
        parent: &Arc<Value>,
    ) -> Result<Option<ParentPlan>, SyncError> {
        let def = cx.def;
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let key = ObjectKey::of(parent).unwrap_or_else(|| ObjectKey::new(None, ""));
        let selected = cx
            .parent_selector
            .is_none_or(|s| s.matches(&object::labels(parent)));
        let Some(finalizing) = shared::sync_mode(parent, cx.finalizer, selected) else {
            return Ok(None);
        };
        let generate = def.spec.generate_selector == Some(true);
        let selector = planner::composite_selector(parent, generate).map_err(SyncError::Parent)?;
        let mut exchanges = Vec::new();
        let related = self
            .related(
                cx.caller,
                cx.hooks.customize.as_ref(),
                &def.raw,
                parent,
                cx.pinfo.namespaced,
                cx.hooks.sync.version,
                &mut exchanges,
            )
            .await?;

        // Claim children.
        let scope_ns = if cx.pinfo.namespaced {
            object::namespace(parent)
        } else {
            None
        };
        let claimed = planner::claim(
            parent,
            &selector,
            cx.slots.iter().map(|slot| Candidates {
                type_key: &slot.ty.key,
                owned: slot.listed.controlled_by(&uid),
                orphans: slot.listed.orphans(scope_ns, &selector),
            }),
        );

        let types: Vec<ChildType> = cx.slots.iter().map(|s| s.ty.clone()).collect();
        let mut answer = None;
        let mut desired = Vec::new();
        let mut decision = None;
        let mut notes = Vec::new();
        if let Some((hook_name, spec)) = cx.hooks.for_sync(finalizing) {
            let request = hookapi::composite_request(
                &def.raw,
                parent,
                hookapi::object_map(
                    spec.version,
                    cx.pinfo.namespaced,
                    &groups(cx.slots, &claimed.observed),
                ),
                hookapi::object_map(spec.version, cx.pinfo.namespaced, &related),
                finalizing,
            );
            let body = self
                .ask(cx.caller, hook_name, spec, &key, request, &mut exchanges)
                .await?;
            let resp = hookapi::decode_sync(hook_name, spec.version, &body)
                .map_err(|e| SyncError::answer(hook_name, e.to_string()))?;
            desired =
                planner::normalize_desired(parent, &types, &selector, generate, resp.children)
                    .map_err(|e| SyncError::answer(hook_name, format!("{hook_name} hook: {e}")))?;
            let clashes = planner::foreign_clashes(
                &desired,
                |id| existing(cx.slots, id),
                |o| planner::controlled_by_other(o, &uid),
            );
            if !clashes.is_empty() {
                return Err(SyncError::answer(
                    hook_name,
                    format!(
                        "{hook_name} hook: desired children belong to another controller: {}; objects of other controllers are never taken over: give the child another name, or delete that object",
                        clashes.join("; ")
                    ),
                ));
            }
            if !finalizing && cx.revisions.is_none() && types.iter().any(|t| t.method.is_rolling())
            {
                notes.push(format!(
                    "the cluster does not serve {}/{} (ControllerRevisions): no rollout has started; dev installs that CRD before its first rolling update",
                    rollout::REVISION_API_VERSION,
                    rollout::REVISION_RESOURCE
                ));
            }
            if !finalizing && types.iter().any(|t| t.method.is_rolling()) {
                let (d, r) = self
                    .rollout(
                        cx,
                        parent,
                        &key,
                        spec,
                        &claimed.observed,
                        &related,
                        &selector,
                        &desired,
                        &mut exchanges,
                    )
                    .await?;
                desired = d;
                decision = Some(r);
            }
            answer = Some((resp.status, resp.finalized, resp.resync_after_seconds));
        }
        let now = jiff::Timestamp::now().to_string();
        let plan = planner::plan_composite(&CompositeInput {
            parent,
            types: &types,
            claimed: &claimed,
            answer: answer.as_ref().map(|(status, finalized, resync)| Answer {
                desired: &desired,
                status: status.as_ref(),
                finalized: *finalized,
                resync_after_seconds: *resync,
            }),
            rollout: decision.as_ref(),
            finalizer: FinalizerInput {
                name: cx.finalizer,
                has_finalize_hook: cx.hooks.finalize.is_some(),
                finalizing,
            },
            held: &BTreeMap::new(),
            now: &now,
        });
        Ok(Some(ParentPlan {
            controller: def.name.clone(),
            controller_kind: "CompositeController",
            parent_resource: cx.pinfo.clone(),
            parent: Arc::clone(parent),
            map_key: None,
            map_input: None,
            finalizing,
            plan,
            types: cx.types.clone(),
            notes,
            exchanges,
        }))
    }

    /// Rolling updates: ask the sync hook once per old revision that still claims children
    /// (with the parent as it was then), then step the rollout.
    #[allow(clippy::too_many_arguments)]
    async fn rollout(
        &self,
        cx: &CompositeCx<'_>,
        parent: &Value,
        key: &ObjectKey,
        spec: &HookSpec,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        selector: &LabelSelector,
        latest: &[(ChildId, Value)],
        exchanges: &mut Vec<Exchange>,
    ) -> Result<(Vec<(ChildId, Value)>, planner::RolloutDecision), SyncError> {
        let types: Vec<ChildType> = cx.slots.iter().map(|s| s.ty.clone()).collect();
        let uid = object::uid(parent).unwrap_or_default();
        let stored = cx
            .revisions
            .as_ref()
            .map(|l| {
                l.controlled_by(uid)
                    .into_iter()
                    .map(rollout::revision_from_object)
                    .collect()
            })
            .unwrap_or_default();
        let field_paths = rollout_plan::field_paths(&cx.def.spec);
        let revs = rollout_plan::revisions(parent, &field_paths, stored, &types);
        let answers =
            rollout_plan::RevisionAnswers::new(&cx.def.spec, spec.version, &types, selector);
        let mut old_desired = BTreeMap::new();
        for (rev, old_parent) in &revs.old {
            let request = hookapi::composite_request(
                &cx.def.raw,
                old_parent,
                hookapi::object_map(
                    spec.version,
                    cx.pinfo.namespaced,
                    &groups(cx.slots, observed),
                ),
                hookapi::object_map(spec.version, cx.pinfo.namespaced, related),
                false,
            );
            let body = self
                .ask(cx.caller, "sync", spec, key, request, exchanges)
                .await?;
            let d = answers.desired(rev, old_parent, &body)?;
            old_desired.insert(rev.clone(), d);
        }
        let (decision, desired) = rollout_plan::decide(
            revs,
            rollout_plan::DecideInput {
                parent,
                parent_namespaced: cx.pinfo.namespaced,
                types: &types,
                checks: &cx.checks,
                selector,
                observed,
                latest_desired: latest,
                old_desired: &old_desired,
            },
        );
        Ok((desired, decision))
    }

    async fn decorator(
        &self,
        def: &Controller<DecoratorControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let name = &def.name;
        let hooks = SyncHooks::resolve(self.ctx, name, def.base_dir(), &def.spec.hooks)
            .map_err(|e| config(name, e))?;
        let (slots, types) = self
            .slots(
                def.spec
                    .attachments
                    .iter()
                    .map(|c| (c.api_version.as_str(), c.resource.as_str(), c.method())),
            )
            .await?;
        let finalizer = format!("metacontroller.io/decoratorcontroller-{name}");
        let caller = Caller::new("DecoratorController", name);
        let mut planned = Planned::default();
        // Targets: per resource, selected by one of its rules (labels and annotations).
        let mut by_resource: BTreeMap<String, (ResourceInfo, Vec<TargetRule>)> = BTreeMap::new();
        for (i, r) in def.spec.resources.iter().enumerate() {
            let info = self.live.resolve(&r.api_version, &r.resource).await?;
            let rule = TargetRule::from_spec(i, r).map_err(|e| config(name, e))?;
            by_resource
                .entry(info.key())
                .or_insert_with(|| (info, Vec::new()))
                .1
                .push(rule);
        }
        for (info, rules) in by_resource.values() {
            let selected = |t: &Value| decorator_rule::selects(rules, t);
            let targets = self
                .parents(info, sel, &mut planned, |t| {
                    selected(t) || object::finalizers(t).contains(&finalizer.as_str())
                })
                .await?;
            for target in targets {
                let r = self
                    .decorator_target(
                        def,
                        &hooks,
                        info,
                        &slots,
                        &types,
                        &finalizer,
                        &caller,
                        &target,
                        selected(&target),
                    )
                    .await;
                match r {
                    Ok(Some(p)) => planned.plans.push(p),
                    Ok(None) => {}
                    Err(f) => {
                        planned
                            .failures
                            .push(ParentFailure::of(name, &target, f.to_string()))
                    }
                }
            }
        }
        Ok(planned)
    }

    #[allow(clippy::too_many_arguments)]
    async fn decorator_target(
        &self,
        def: &Controller<DecoratorControllerSpec>,
        hooks: &SyncHooks,
        info: &ResourceInfo,
        slots: &[Slot],
        types: &BTreeMap<String, ResourceInfo>,
        finalizer: &str,
        caller: &Caller,
        target: &Arc<Value>,
        selected: bool,
    ) -> Result<Option<ParentPlan>, SyncError> {
        let Some(finalizing) = shared::sync_mode(target, finalizer, selected) else {
            return Ok(None);
        };
        let uid = object::uid(target).unwrap_or_default().to_string();
        let key = ObjectKey::of(target).unwrap_or_else(|| ObjectKey::new(None, ""));
        let mut exchanges = Vec::new();
        let related = self
            .related(
                caller,
                hooks.customize.as_ref(),
                &def.raw,
                target,
                info.namespaced,
                hooks.sync.version,
                &mut exchanges,
            )
            .await?;
        let is_attachment =
            |o: &Value| object::annotation(o, DECORATOR_ANNOTATION) == Some(def.name.as_str());
        let mut observed: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        for s in slots {
            let owned: Vec<Arc<Value>> = s
                .listed
                .controlled_by(&uid)
                .into_iter()
                .filter(|o| is_attachment(o))
                .collect();
            observed.insert(s.ty.key.clone(), owned);
        }
        let tys: Vec<ChildType> = slots.iter().map(|s| s.ty.clone()).collect();
        let mut desired = Vec::new();
        let mut resp = None;
        if let Some((hook_name, spec)) = hooks.for_sync(finalizing) {
            let request = hookapi::decorator_request(
                &def.raw,
                target,
                hookapi::object_map(spec.version, info.namespaced, &groups(slots, &observed)),
                hookapi::object_map(spec.version, info.namespaced, &related),
                finalizing,
            );
            let body = self
                .ask(caller, hook_name, spec, &key, request, &mut exchanges)
                .await?;
            let mut r = hookapi::decode_decorator(hook_name, spec.version, &body)
                .map_err(|e| SyncError::answer(hook_name, e.to_string()))?;
            desired = planner::normalize_desired(
                target,
                &tys,
                &LabelSelector::default(),
                false,
                std::mem::take(&mut r.attachments),
            )
            .map_err(|e| SyncError::answer(hook_name, format!("{hook_name} hook: {e}")))?;
            for (_, obj) in &mut desired {
                obj["metadata"]["annotations"][DECORATOR_ANNOTATION] =
                    Value::from(def.name.clone());
            }
            let clashes = planner::foreign_clashes(
                &desired,
                |id| existing(slots, id),
                |o| {
                    if let Some(why) = planner::controlled_by_other(o, &uid) {
                        return Some(why);
                    }
                    if object::controller_ref(o).is_none() {
                        return Some("exists and is not controlled by the target".to_string());
                    }
                    (!is_attachment(o)).then(|| {
                        format!(
                            "is controlled by the target but lacks the annotation {DECORATOR_ANNOTATION}: {}",
                            def.name
                        )
                    })
                },
            );
            if !clashes.is_empty() {
                return Err(SyncError::answer(
                    hook_name,
                    format!(
                        "{hook_name} hook: desired attachments clash with existing objects: {}; objects that are not this decorator's attachments are never taken over: give the attachment another name, or delete that object",
                        clashes.join("; ")
                    ),
                ));
            }
            resp = Some(r);
        }
        let plan = planner::plan_decorator(&DecoratorInput {
            target,
            types: &tys,
            observed: &observed,
            answer: resp.as_ref().map(|r| DecoratorAnswer {
                answer: Answer {
                    desired: &desired,
                    status: r.status.as_ref(),
                    finalized: r.finalized,
                    resync_after_seconds: r.resync_after_seconds,
                },
                labels: &r.labels,
                annotations: &r.annotations,
            }),
            finalizer: FinalizerInput {
                name: finalizer,
                has_finalize_hook: hooks.finalize.is_some(),
                finalizing,
            },
            held: &BTreeMap::new(),
        });
        Ok(Some(ParentPlan {
            controller: def.name.clone(),
            controller_kind: "DecoratorController",
            parent_resource: info.clone(),
            parent: Arc::clone(target),
            map_key: None,
            map_input: None,
            finalizing,
            plan,
            types: types.clone(),
            notes: Vec::new(),
            exchanges,
        }))
    }

    async fn map(
        &self,
        def: &Controller<MapControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let name = &def.name;
        let resolve = |h: &str, hook| {
            shared::resolve_hook(self.ctx, name, def.base_dir(), h, hook)
                .map_err(|e| config(name, e))
        };
        let map_hook = resolve("map", def.spec.hooks.map.as_ref())?
            .ok_or_else(|| config(name, "hooks.map is required"))?;
        let tombstone = resolve("tombstone", def.spec.hooks.tombstone.as_ref())?;
        let parent_selector = shared::parent_selector(name, &def.spec.parent_resource)
            .map_err(|e| config(name, e))?;
        let pinfo = self
            .live
            .resolve(
                &def.spec.parent_resource.api_version,
                &def.spec.parent_resource.resource,
            )
            .await?;
        let mut inputs = Vec::new();
        for r in &def.spec.input_resources {
            let info = self.live.resolve(&r.api_version, &r.resource).await?;
            inputs.push(self.live.read(&info).await?);
        }
        let (slots, types) = self
            .slots(
                def.spec
                    .output_resources
                    .iter()
                    .map(|c| (c.api_version.as_str(), c.resource.as_str(), c.method())),
            )
            .await?;
        let mut planned = Planned::default();
        let parents = self
            .parents(&pinfo, sel, &mut planned, |p| {
                !object::is_deleting(p)
                    && parent_selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&object::labels(p)))
            })
            .await?;
        let caller = Caller::new("MapController", name);
        let mut key_found = sel.key.is_none();
        for parent in parents {
            let pk = ObjectKey::of(&parent).unwrap_or_else(|| ObjectKey::new(None, ""));
            let uid = object::uid(&parent).unwrap_or_default().to_string();
            let scope_ns = if pinfo.namespaced {
                object::namespace(&parent)
            } else {
                None
            };
            let selector = match planner::map_input_selector(&parent) {
                Ok(s) => s,
                Err(e) => {
                    planned.failures.push(ParentFailure {
                        controller: name.clone(),
                        parent: pk.to_string(),
                        message: e,
                    });
                    continue;
                }
            };
            // Keys: the selected inputs, and the keys of the outputs (detached ones included).
            let mut keys: BTreeMap<String, Option<Arc<Value>>> = BTreeMap::new();
            let mut counts = Vec::new();
            for listed in &inputs {
                let mut n = 0;
                for o in listed.select(scope_ns, &selector) {
                    if object::controller_ref(&o).is_some_and(|r| r.uid == uid) {
                        continue;
                    }
                    keys.insert(map_plan::map_key(&o), Some(o));
                    n += 1;
                }
                counts.push((listed.info.api_resource.plural.clone(), n));
            }
            let live_keys: std::collections::HashSet<String> = keys.keys().cloned().collect();
            for s in &slots {
                for o in s.listed.controlled_by(&uid) {
                    if let Some(k) = object::label(&o, MAP_KEY_LABEL) {
                        keys.entry(k.to_string()).or_insert(None);
                    }
                }
            }
            let mut failures = BTreeMap::new();
            for (mk, input) in &keys {
                if sel.key.as_ref().is_some_and(|k| k != mk) {
                    continue;
                }
                key_found = true;
                let r = self
                    .map_key(MapCx {
                        def,
                        pinfo: &pinfo,
                        slots: &slots,
                        types: &types,
                        caller: &caller,
                        map_hook: &map_hook,
                        tombstone: tombstone.as_ref(),
                        parent: &parent,
                        mk,
                        input: input.as_ref(),
                    })
                    .await;
                match r {
                    Ok(Some(p)) => planned.plans.push(p),
                    Ok(None) => {}
                    Err(f) => {
                        failures.insert(mk.clone(), f.to_string());
                        planned.failures.push(ParentFailure {
                            controller: name.clone(),
                            parent: format!("{pk} {mk}"),
                            message: f.to_string(),
                        });
                    }
                }
            }
            if sel.key.is_none() {
                // The engine-owned status, as the engine computes it from these outputs.
                let outputs = slots
                    .iter()
                    .map(|s| {
                        (
                            types
                                .get(&s.ty.key)
                                .map(|i| i.api_resource.plural.clone())
                                .unwrap_or_default(),
                            s.listed.controlled_by(&uid),
                        )
                    })
                    .collect();
                let input = StatusInput {
                    inputs: counts,
                    outputs,
                    live_keys: &live_keys,
                    failures: &failures,
                    parent_error: None,
                };
                let (status, synced) =
                    map_plan::aggregate_status(&input, &jiff::Timestamp::now().to_string());
                let plan = planner::plan_map_status(&parent, &status, synced);
                if plan.status.is_some() {
                    planned.plans.push(ParentPlan {
                        controller: name.clone(),
                        controller_kind: "MapController",
                        parent_resource: pinfo.clone(),
                        parent: Arc::clone(&parent),
                        map_key: None,
                        map_input: None,
                        finalizing: false,
                        plan,
                        types: types.clone(),
                        notes: Vec::new(),
                        exchanges: Vec::new(),
                    });
                }
            }
        }
        if !key_found && let Some(k) = &sel.key {
            return Err(ComposeError::NotFound(format!(
                "--key {k}: no such map key of the given parent (kubectl meta dryrun without --key lists every key)"
            )));
        }
        Ok(planned)
    }

    async fn map_key(&self, cx: MapCx<'_>) -> Result<Option<ParentPlan>, SyncError> {
        let parent = cx.parent;
        let mk = cx.mk;
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let pk = ObjectKey::of(parent).unwrap_or_else(|| ObjectKey::new(None, ""));
        let work = EventSubject::map_key(pk.to_string(), mk.to_string());
        let key_sel = LabelSelector::parse(&format!("{MAP_KEY_LABEL}={mk}")).map_err(|e| {
            SyncError::Parent(format!("map key {mk} is not a valid label value: {e}"))
        })?;
        let ns = if cx.pinfo.namespaced {
            object::namespace(parent)
        } else {
            None
        };
        let mut observed: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        let mut orphans = Vec::new();
        for s in cx.slots {
            let mut mine = Vec::new();
            for o in s.listed.select(ns, &key_sel) {
                match object::controller_ref(&o) {
                    Some(r) if r.uid == uid => mine.push(o),
                    None if cx.input.is_some() && !object::is_deleting(&o) => {
                        orphans.push((s.ty.key.clone(), o))
                    }
                    _ => {}
                }
            }
            observed.insert(s.ty.key.clone(), mine);
        }
        let tys: Vec<ChildType> = cx.slots.iter().map(|s| s.ty.clone()).collect();
        let version_map = |version: Version, observed: &BTreeMap<String, Vec<Arc<Value>>>| {
            hookapi::object_map(version, cx.pinfo.namespaced, &groups(cx.slots, observed))
        };
        let mut exchanges = Vec::new();
        let plan = match cx.input {
            Some(input) => {
                // Orphans carrying this key are adopted; the hook sees them as ours.
                for (t, o) in &orphans {
                    observed
                        .entry(t.clone())
                        .or_default()
                        .push(Arc::new(planner::as_adopted(o, parent)));
                }
                let spec = cx.map_hook;
                let request = hookapi::map_request(
                    &cx.def.raw,
                    parent,
                    mk,
                    input,
                    version_map(spec.version, &observed),
                );
                let body = self
                    .ask(cx.caller, "map", spec, &work, request, &mut exchanges)
                    .await?;
                let resp = hookapi::decode_map("map", spec.version, &body)
                    .map_err(|e| SyncError::answer("map", e.to_string()))?;
                let mut desired = planner::normalize_desired(
                    parent,
                    &tys,
                    &LabelSelector::default(),
                    false,
                    resp.outputs,
                )
                .map_err(|e| SyncError::answer("map", format!("map hook: {e}")))?;
                map_plan::tag_outputs(&mut desired, mk, &map_plan::input_ref(input));
                map_plan::check_clashes(&desired, &uid, mk, |id| existing(cx.slots, id))
                    .map_err(|e| SyncError::answer("map", format!("map hook: {e}")))?;
                planner::plan_map_key(&MapKeyInput {
                    parent,
                    map_key: mk,
                    types: &tys,
                    observed: &observed,
                    orphans: &orphans,
                    answer: MapAnswer::Map {
                        desired: &desired,
                        resync_after_seconds: resp.resync_after_seconds,
                    },
                    held: &BTreeMap::new(),
                })
            }
            None => {
                if observed.values().all(Vec::is_empty) {
                    return Ok(None);
                }
                let (keep, resync_after_seconds) = match cx.tombstone {
                    None => (BTreeSet::new(), None),
                    Some(spec) => {
                        let request = hookapi::tombstone_request(
                            &cx.def.raw,
                            parent,
                            mk,
                            version_map(spec.version, &observed),
                        );
                        let body = self
                            .ask(cx.caller, "tombstone", spec, &work, request, &mut exchanges)
                            .await?;
                        let resp = hookapi::decode_map("tombstone", spec.version, &body)
                            .map_err(|e| SyncError::answer("tombstone", e.to_string()))?;
                        (
                            planner::tombstone_kept(parent, mk, &tys, &observed, &resp.outputs)
                                .map_err(|e| SyncError::answer("tombstone", e))?,
                            resp.resync_after_seconds,
                        )
                    }
                };
                planner::plan_map_key(&MapKeyInput {
                    parent,
                    map_key: mk,
                    types: &tys,
                    observed: &observed,
                    orphans: &[],
                    answer: MapAnswer::Tombstone {
                        keep: &keep,
                        resync_after_seconds,
                    },
                    held: &BTreeMap::new(),
                })
            }
        };
        Ok(Some(ParentPlan {
            controller: cx.def.name.clone(),
            controller_kind: "MapController",
            parent_resource: cx.pinfo.clone(),
            parent: Arc::clone(parent),
            map_key: Some(mk.to_string()),
            map_input: cx.input.map(|i| map_plan::input_ref(i)),
            finalizing: false,
            plan,
            types: cx.types.clone(),
            notes: Vec::new(),
            exchanges,
        }))
    }
}

/// What [`Composer::composite_parent`] needs about the controller.
struct CompositeCx<'a> {
    def: &'a Controller<CompositeControllerSpec>,
    hooks: &'a SyncHooks,
    parent_selector: Option<&'a LabelSelector>,
    pinfo: &'a ResourceInfo,
    slots: &'a [Slot],
    types: &'a BTreeMap<String, ResourceInfo>,
    finalizer: &'a str,
    caller: &'a Caller,
    /// Rolling updates: the ControllerRevisions (`None`: no rolling type, or not served).
    revisions: Option<Arc<Listed>>,
    /// Status checks per child type key (rolling updates).
    checks: BTreeMap<String, Vec<StatusConditionCheck>>,
}

/// What [`Composer::map_key`] needs about the controller and the key.
struct MapCx<'a> {
    def: &'a Controller<MapControllerSpec>,
    pinfo: &'a ResourceInfo,
    slots: &'a [Slot],
    types: &'a BTreeMap<String, ResourceInfo>,
    caller: &'a Caller,
    map_hook: &'a HookSpec,
    tombstone: Option<&'a HookSpec>,
    parent: &'a Arc<Value>,
    mk: &'a str,
    input: Option<&'a Arc<Value>>,
}

/// The observed objects per declared type, in declaration order (every type present).
fn groups(
    slots: &[Slot],
    observed: &BTreeMap<String, Vec<Arc<Value>>>,
) -> Vec<(String, Vec<Arc<Value>>)> {
    slots
        .iter()
        .map(|s| {
            (
                s.ty.key.clone(),
                observed.get(&s.ty.key).cloned().unwrap_or_default(),
            )
        })
        .collect()
}

/// The live object of a desired child's id, if its type's list has one.
fn existing(slots: &[Slot], id: &ChildId) -> Option<Arc<Value>> {
    let s = slots.iter().find(|s| s.ty.key == id.type_key)?;
    s.listed
        .get(&ObjectKey::new(id.key.namespace.as_deref(), &id.key.name))
}
