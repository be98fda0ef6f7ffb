//! DecoratorController: decorates existing objects (targets) of one or more resources with
//! labels, annotations, status and attachments, with Metacontroller's semantics.
//!
//! Started by [`crate::runtime::reconcile::launch_def`], which resolves the target and
//! attachment resources (waiting for ones that do not exist yet) and starts the shared
//! informers; [`crate::runtime::reconcile::launch`] spawns the event routers and the shared
//! controller loop. One sync of one target runs the shared skeleton of
//! [`crate::runtime::reconcile`] with this kind's steps: find its attachments (controlled by the
//! target *and* annotated `metacontroller.k8s.io/decorator-controller: <name>`; never adopted)
//! -> customize -> sync or finalize hook -> pure plan of the target's labels/annotations
//! merge, attachment writes, status (only when the hook gives one) and finalizer -> execute
//! -> wait until the caches show the writes. The dry run builds the same controller on lists
//! read once ([`crate::runtime::source::snapshot`]).
//!
//! A target is in scope when one of the definition's `resources` rules for its resource
//! matches both its labels (`labelSelector`) and its annotations (`annotationSelector`), or
//! when it still carries our finalizer (it stopped matching: it is finalized, then released).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::events::Trigger;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{FilterBy, Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::kinds::shared::{self, SyncHooks};
use crate::plan::decorator_rule::{self, TargetRule};
use crate::plan::hookapi;
use crate::plan::planner;
use crate::plan::writes::{ChildId, ChildType};
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::controller::SyncError;
use crate::runtime::core::Core;
use crate::runtime::execute::Target;
use crate::runtime::reconcile::{HookCall, KindController, SyncCx, SyncKind};
use crate::runtime::related_cache::RelatedCache;
use crate::runtime::routing;
use crate::runtime::routing::ChildAction;
use crate::runtime::source::{Building, Built, Prepare, Reader, Source};
use crate::runtime::start::StartError;
use crate::spec::{Controller, DecoratorControllerSpec};
use kube_apimachinery::selector::LabelSelector;

/// The annotation that marks an object as an attachment of a DecoratorController (its value
/// is the controller's name).
pub const DECORATOR_ANNOTATION: &str = "metacontroller.k8s.io/decorator-controller";

/// The controller kind, as shown in events and hook call logs.
const KIND: &str = "DecoratorController";

/// A target resource (several `resources` rules on one resource share one slot).
struct TargetSlot {
    info: ResourceInfo,
    source: Source,
    rules: Vec<TargetRule>,
}

/// A declared attachment resource with its source.
struct AttachmentSlot {
    source: Source,
    ty: ChildType,
}

/// The work-queue key: one target object of one target resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetKey {
    /// Index of the target resource in the controller.
    slot: usize,
    /// The resource, `Kind.apiVersion`.
    pub resource: String,
    /// The object.
    pub key: ObjectKey,
    /// Shown with its resource (the controller has several target resources); otherwise
    /// shown as `namespace/name`, like the parents of other controllers.
    qualified: bool,
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.qualified {
            write!(f, "{} {}", self.resource, self.key)
        } else {
            write!(f, "{}", self.key)
        }
    }
}

/// Events name a target as it is displayed (with its resource when qualified).
impl crate::events::EventKey for TargetKey {
    fn subject(&self) -> crate::events::EventSubject {
        crate::events::EventSubject::parent(self.to_string())
    }
}

/// A running DecoratorController (or one on lists read once, for a dry run).
pub struct Decorator {
    /// Name, engine services, queue, hook caller, per-key memory (uid routing, last status
    /// written, last exchange per target), hooks.
    core: Core<TargetKey, SyncHooks>,
    def: Controller<DecoratorControllerSpec>,
    targets: Vec<TargetSlot>,
    attachments: Vec<AttachmentSlot>,
    types: BTreeMap<String, ResourceInfo>,
    finalizer: String,
    /// Where related objects are read.
    reader: Reader,
    /// Customize answers and related-object routing per target.
    related: RelatedCache<TargetKey>,
}

/// What a definition gives before its resources are read: its hooks and its target rules.
pub struct Prepared {
    hooks: SyncHooks,
    rules: Vec<TargetRule>,
}

impl Built for Decorator {
    type Spec = DecoratorControllerSpec;
    type Prepared = Prepared;

    /// Sharded: the targets (one resource per rule, first) by uid, the attachments by their
    /// bucket label.
    fn cache_filter(prepared: &Prepared, controller: &str, index: usize) -> Option<FilterBy> {
        Some(shared::shard_filter(
            controller,
            index < prepared.rules.len(),
        ))
    }

    fn prepare(def: &Controller<Self::Spec>, ctx: &EngineContext) -> Prepare<Self> {
        let hooks = SyncHooks::resolve(ctx, &def.name, def.base_dir(), &def.spec.hooks)?;
        let cfg = |message: String| StartError::config(&def.name, message);
        if def.spec.resources.is_empty() {
            return Err(cfg(
                "spec.resources needs at least one target resource".into()
            ));
        }
        if let Some(a) = def
            .spec
            .attachments
            .iter()
            .find(|a| a.method().is_rolling())
        {
            return Err(cfg(format!(
                "attachment {}/{}: {:?} is not supported: DecoratorController does not do rolling updates; use InPlace or Recreate",
                a.api_version,
                a.resource,
                a.method()
            )));
        }
        let rules = def
            .spec
            .resources
            .iter()
            .enumerate()
            .map(|(i, r)| TargetRule::from_spec(i, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cfg(e.to_string()))?;
        let mut wanted: Vec<(String, String)> = def
            .spec
            .resources
            .iter()
            .map(|r| (r.api_version.clone(), r.resource.clone()))
            .collect();
        wanted.extend(
            def.spec
                .attachments
                .iter()
                .map(|c| (c.api_version.clone(), c.resource.clone())),
        );
        Ok((Prepared { hooks, rules }, wanted))
    }

    /// The controller on its resolved resources (targets, then attachments, as
    /// `prepare` names them).
    fn build(b: Building<Self>) -> Result<Self, StartError> {
        let name = &b.def.name;
        let mut resolved = b.resolved.into_iter();
        // The first resources are the targets (one per rule; rules on one resource share a
        // slot), then the attachments.
        let mut targets: Vec<TargetSlot> = Vec::new();
        for (rule, (info, source)) in b.prepared.rules.into_iter().zip(resolved.by_ref()) {
            match targets.iter_mut().find(|t| t.info.key() == info.key()) {
                Some(t) => t.rules.push(rule),
                None => targets.push(TargetSlot {
                    source,
                    info,
                    rules: vec![rule],
                }),
            }
        }
        let mut attachments = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, (info, source)) in b.def.spec.attachments.iter().zip(resolved) {
            if let Some(t) = targets
                .iter()
                .find(|t| t.info.namespaced && !info.namespaced)
            {
                return Err(StartError::config(
                    name,
                    format!(
                        "attachment resource {} is cluster-scoped but the target resource {} is namespaced; a namespaced object cannot own cluster-scoped attachments",
                        info.key(),
                        t.info.key()
                    ),
                ));
            }
            let ty = shared::child_type(&info, rule.method());
            types.insert(ty.key.clone(), info);
            attachments.push(AttachmentSlot { source, ty });
        }
        let finalizer = format!("metacontroller.io/decoratorcontroller-{name}");
        let core = Core::new(KIND, name.clone(), b.ctx, &b.reader, b.prepared.hooks);
        Ok(Decorator {
            related: RelatedCache::for_queue(&core.queue),
            core,
            def: b.def,
            targets,
            attachments,
            types,
            finalizer,
            reader: b.reader,
        })
    }

    fn sources(&self) -> Vec<&Source> {
        let targets = self.targets.iter().map(|t| &t.source);
        targets
            .chain(self.attachments.iter().map(|a| &a.source))
            .collect()
    }
}

impl Decorator {
    /// The target resources, `Kind.apiVersion`, comma-separated.
    pub fn target_resources(&self) -> String {
        self.targets
            .iter()
            .map(|t| t.info.key())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Is the target selected by one of the rules of its resource?
    fn selected(&self, slot: usize, obj: &Value) -> bool {
        decorator_rule::selects(&self.targets[slot].rules, obj)
    }

    /// Is this target ours to sync: in the `-n` namespace (if any), and selected or still
    /// carrying our finalizer.
    fn in_scope(&self, slot: usize, obj: &Value) -> bool {
        shared::in_namespace_scope(&self.core.ctx, self.targets[slot].info.namespaced, obj)
            && (self.selected(slot, obj)
                || object::finalizers(obj).contains(&self.finalizer.as_str()))
    }

    fn key_of(&self, slot: usize, obj: &Value) -> Option<TargetKey> {
        ObjectKey::of(obj).map(|key| TargetKey {
            slot,
            resource: self.targets[slot].info.key(),
            key,
            qualified: self.targets.len() > 1,
        })
    }

    fn targets_in_scope(&self) -> Vec<(usize, Arc<Value>)> {
        let mut out = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            for o in t
                .source
                .list(shared::scope_namespace(&self.core.ctx, t.info.namespaced))
            {
                if self.in_scope(i, &o) {
                    out.push((i, o));
                }
            }
        }
        out
    }

    /// The targets in scope with their keys.
    pub fn keyed_targets(&self) -> impl Iterator<Item = (TargetKey, Arc<Value>)> {
        self.targets_in_scope()
            .into_iter()
            .filter_map(|(slot, o)| self.key_of(slot, &o).map(|k| (k, o)))
    }

    /// The cache of a resource this controller reads (targets, attachments).
    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        self.targets
            .iter()
            .find(|t| t.info.key() == type_key)
            .map(|t| &t.source)
            .or_else(|| self.attachment_source(type_key))
            .and_then(Source::informer)
    }

    /// The source of a declared attachment resource.
    fn attachment_source(&self, type_key: &str) -> Option<&Source> {
        self.attachments
            .iter()
            .find(|a| a.ty.key == type_key)
            .map(|a| &a.source)
    }

    /// Spawn the event routers (targets, attachments). They end with `stop`.
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        for (i, t) in self.targets.iter().enumerate() {
            routing::spawn_router(&t.source, stop, self, move |me, ev| me.route_target(i, ev));
        }
        for a in &self.attachments {
            let resource = a.ty.key.clone();
            routing::spawn_router(&a.source, stop, self, move |me, ev| {
                for action in routing::child_event(&resource, ev) {
                    match action {
                        ChildAction::Owner(uid, t) => me.enqueue_owner(&uid, t),
                        // Attachments are never adopted.
                        ChildAction::Orphan(..) => {}
                        ChildAction::All(t) => me.enqueue_all(t),
                    }
                }
            });
        }
    }

    /// Labels or annotations moving in or out of the selectors are changes that matter; a
    /// target that left the selectors without our finalizer has nothing left to do.
    fn route_target(&self, slot: usize, ev: InformerEvent) {
        let action = routing::parent_event(
            ev,
            |o| self.key_of(slot, o).filter(|_| self.in_scope(slot, o)),
            |o| self.key_of(slot, o),
            &self.core.memory,
            false,
        );
        action.apply(&self.core.queue, &self.related, |t| self.enqueue_all(t));
    }

    fn enqueue_owner(&self, uid: &str, trigger: Trigger) {
        if let Some(k) = self.core.memory.key_of_uid(uid) {
            self.core.queue.add(k, trigger);
        }
    }

    fn is_attachment(&self, obj: &Value) -> bool {
        object::annotation(obj, DECORATOR_ANNOTATION) == Some(self.core.name.as_str())
    }
}

/// What a sync observed of one target: its sync mode, related objects and attachments.
pub struct Observed {
    finalizing: bool,
    namespaced: bool,
    uid: String,
    related: Vec<(String, Vec<Arc<Value>>)>,
    attachments: BTreeMap<String, Vec<Arc<Value>>>,
}

impl Observed {
    /// The target is being finalized (deleted, or no longer selected).
    pub fn finalizing(&self) -> bool {
        self.finalizing
    }
}

/// The sync or finalize hook's answer with its desired attachments (annotated as ours).
pub struct Decided {
    resp: hookapi::DecoratorResponse,
    desired: Vec<(ChildId, Value)>,
}

impl SyncKind for Decorator {
    type Key = TargetKey;
    type Seen = Observed;
    type Answer = Decided;

    type Hooks = SyncHooks;

    fn core(&self) -> &Core<TargetKey, SyncHooks> {
        &self.core
    }

    fn parent(&self, key: &TargetKey) -> Option<Arc<Value>> {
        let target = self.targets.get(key.slot)?.source.get(&key.key)?;
        self.core.memory.remember_uid(&target, key);
        Some(target)
    }

    /// Sync mode, related objects (customize hook), and the attachments: controlled by the
    /// target and carrying our annotation (never adopted).
    async fn observe(
        &self,
        key: &TargetKey,
        target: &Value,
        cx: SyncCx<'_>,
    ) -> Result<Option<Observed>, SyncError> {
        let selected = self.selected(key.slot, target);
        let Some(finalizing) = shared::sync_mode(target, &self.finalizer, selected) else {
            return Ok(None);
        };
        let namespaced = self.targets[key.slot].info.namespaced;
        let customize = self.core.hooks.customize(
            &self.core.ctx,
            &self.reader,
            &self.core.caller,
            &self.def.raw,
            namespaced,
        );
        let related = self
            .related
            .related(&customize, target, key, cx.stop)
            .await?
            .into_iter()
            .map(|(r, objs)| (r.info.key(), objs))
            .collect();
        let uid = object::uid(target).unwrap_or_default().to_string();
        let attachments = self
            .attachments
            .iter()
            .map(|a| {
                let owned: Vec<Arc<Value>> = a
                    .source
                    .controlled_by(&uid)
                    .into_iter()
                    .filter(|o| self.is_attachment(o))
                    .collect();
                (a.ty.key.clone(), owned)
            })
            .collect();
        Ok(Some(Observed {
            finalizing,
            namespaced,
            uid,
            related,
            attachments,
        }))
    }

    fn hook(&self, target: &Value, seen: &Observed) -> Option<HookCall<'_>> {
        let (name, spec) = self.core.hooks.for_sync(seen.finalizing)?;
        let namespaced = seen.namespaced;
        let declared = self.attachments.iter().map(|a| a.ty.key.as_str());
        let request = hookapi::decorator_request(
            &self.def.raw,
            target,
            hookapi::declared_object_map(spec.version, namespaced, declared, &seen.attachments),
            hookapi::object_map(spec.version, namespaced, &seen.related),
            seen.finalizing,
        );
        Some(HookCall {
            name,
            spec,
            request,
        })
    }

    /// Decode, normalize, annotate as ours, refuse objects that are not our attachments.
    async fn desired(
        &self,
        _key: &TargetKey,
        target: &Value,
        seen: &Observed,
        (hook_name, spec): (&'static str, &HookSpec),
        body: &Value,
    ) -> Result<Decided, SyncError> {
        let fail = |message: String| SyncError::answer(hook_name, message);
        let resp = hookapi::decode_decorator(hook_name, spec.version, body)
            .map_err(|e| fail(e.to_string()))?;
        let mut desired = planner::normalize_desired(
            target,
            &self.attachment_types(),
            &LabelSelector::default(),
            false,
            resp.attachments.clone(),
        )
        .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
        for (_, obj) in &mut desired {
            obj["metadata"]["annotations"][DECORATOR_ANNOTATION] = json!(self.core.name);
        }
        shared::label_shard(&self.core.ctx, &self.core.name, target, &mut desired);
        let clashes = planner::foreign_clashes(
            &desired,
            |id| self.attachment_source(&id.type_key)?.get(&id.object_key()),
            |o| self.not_an_attachment(o, &seen.uid),
        );
        if !clashes.is_empty() {
            return Err(fail(format!(
                "{hook_name} hook: desired attachments clash with existing objects: {}; objects that are not this decorator's attachments are never taken over: give the attachment another name, or delete that object",
                clashes.join("; ")
            )));
        }
        Ok(Decided { resp, desired })
    }

    fn plan(
        &self,
        key: &TargetKey,
        target: &Value,
        seen: &Observed,
        answer: Option<&Decided>,
    ) -> planner::SyncPlan {
        planner::plan_decorator(&planner::DecoratorInput {
            target,
            types: &self.attachment_types(),
            observed: &seen.attachments,
            answer: answer.map(|a| planner::DecoratorAnswer {
                answer: planner::Answer {
                    desired: &a.desired,
                    status: a.resp.status.as_ref(),
                    finalized: a.resp.finalized,
                    resync_after_seconds: a.resp.resync_after_seconds,
                },
                labels: &a.resp.labels,
                annotations: &a.resp.annotations,
            }),
            finalizer: planner::FinalizerInput {
                name: &self.finalizer,
                has_finalize_hook: self.core.hooks.finalize.is_some(),
                finalizing: seen.finalizing,
            },
            held: &self.core.memory.held_fields(key),
        })
    }

    fn target<'a>(&'a self, key: &TargetKey, target: &'a Value) -> Target<'a> {
        Target {
            controller: &self.core.name,
            parent: target,
            parent_info: &self.targets[key.slot].info,
            types: &self.types,
            revisions: None,
            finalizer: &self.finalizer,
            subject: crate::events::EventKey::subject(key),
        }
    }

    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        Decorator::informer_for(self, type_key)
    }
}

impl Decorator {
    /// The declared attachment types, in declaration order.
    fn attachment_types(&self) -> Vec<ChildType> {
        self.attachments.iter().map(|a| a.ty.clone()).collect()
    }

    /// Why an existing object of a desired attachment's name is not this target's attachment
    /// (controlled by someone else, not controlled, or lacking our annotation), if it is not.
    fn not_an_attachment(&self, obj: &Value, uid: &str) -> Option<String> {
        if let Some(why) = planner::controlled_by_other(obj, uid) {
            return Some(why);
        }
        if object::controller_ref(obj).is_none() {
            return Some("exists and is not controlled by the target".to_string());
        }
        (!self.is_attachment(obj)).then(|| {
            format!(
                "is controlled by the target but lacks the annotation {DECORATOR_ANNOTATION}: {}",
                self.core.name
            )
        })
    }
}

impl KindController for Decorator {
    const KIND: &'static str = KIND;

    fn parent_resources(&self) -> String {
        self.target_resources()
    }
    fn keyed_parents(&self) -> Vec<(TargetKey, Arc<Value>)> {
        self.keyed_targets().collect()
    }
    /// Also by the target's key without its resource.
    fn is_named(key: &TargetKey, target: &Value, name: &str) -> bool {
        key.key.to_string() == name || key.to_string() == name || object::name(target) == Some(name)
    }
    /// Forget customize answers.
    fn forget_answers(&self) {
        self.related.clear();
    }
    fn resync_period_seconds(&self) -> Option<i32> {
        self.def.spec.resync_period_seconds
    }
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        Decorator::spawn_routers(self, stop);
    }
}
