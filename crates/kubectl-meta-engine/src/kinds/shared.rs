//! What the controller kinds share to read a definition: its hooks resolved
//! ([`resolve_hook`], [`SyncHooks`] with the customize call it makes), its declared child
//! types ([`child_type`], [`declared_types`]), and the scope checks of a sync ([`sync_mode`],
//! [`parent_selector`], [`scope_namespace`], [`in_namespace_scope`]), and how `run --sharded`
//! narrows a kind's caches ([`shard_filter`], [`label_shard`]). It re-exports nothing.
//!
//! Starting a controller (resolving resources, waiting for caches, `StartError`) is
//! [`crate::runtime::start`]; what the kinds run on (routing, hook calls, memory, the
//! customize cache, the executor) lives one concept per file in [`crate::runtime`].
//!
//! Nothing here knows a controller kind: the helpers take the engine context, a definition
//! or its parts, so CompositeController, DecoratorController and MapController share them.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::FilterBy;
use crate::k8s::object::{self, ObjectKey};
use crate::plan::writes::{ChildId, ChildType};
use crate::runtime::caller::Caller;
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::core::KindHooks;
use crate::runtime::related_cache::Customize;
use crate::runtime::source::Source;
use crate::runtime::start::StartError;
use crate::spec::{ControllerDef, Hook, ParentResourceRule, SyncControllerHooks, UpdateMethod};
use kube_apimachinery::selector::LabelSelector;

/// Turn a definition's hook `hooks.<name>` into something callable (`None` when the definition
/// has none); `base_dir` is where exec hooks run by default (unless the engine's
/// [`exec_dir`](crate::EngineOptions::exec_dir) says otherwise).
pub fn resolve_hook(
    ctx: &EngineContext,
    controller: &str,
    base_dir: Option<&Path>,
    name: &str,
    hook: Option<&Hook>,
) -> Result<Option<HookSpec>, StartError> {
    hook.map(|h| {
        HookSpec::from_spec(
            name,
            h,
            ctx.options.hook_base_url.as_deref(),
            ctx.options.exec_dir.as_deref().or(base_dir),
            ctx.options.service_dns,
        )
        .map_err(|e| StartError::config(controller, e.to_string()))
    })
    .transpose()
}

/// The sync, finalize and customize hooks of a definition (CompositeController,
/// DecoratorController), resolved.
#[derive(Debug, Clone)]
pub struct SyncHooks {
    /// `hooks.sync` (required).
    pub sync: HookSpec,
    /// `hooks.finalize`.
    pub finalize: Option<HookSpec>,
    /// `hooks.customize`.
    pub customize: Option<HookSpec>,
}

impl SyncHooks {
    /// Resolve the definition's hooks (see [`resolve_hook`]); `sync` is required.
    pub fn resolve(
        ctx: &EngineContext,
        controller: &str,
        base_dir: Option<&Path>,
        hooks: &SyncControllerHooks,
    ) -> Result<Self, StartError> {
        let hook = |name: &str, h: &Option<Hook>| {
            resolve_hook(ctx, controller, base_dir, name, h.as_ref())
        };
        Ok(SyncHooks {
            sync: hook("sync", &hooks.sync)?
                .ok_or_else(|| StartError::config(controller, "hooks.sync is required"))?,
            finalize: hook("finalize", &hooks.finalize)?,
            customize: hook("customize", &hooks.customize)?,
        })
    }

    /// The hook a sync calls, with its name: finalize (when there is one) for a finalizing
    /// parent, sync otherwise.
    pub fn for_sync(&self, finalizing: bool) -> Option<(&'static str, &HookSpec)> {
        if finalizing {
            self.finalize.as_ref().map(|h| ("finalize", h))
        } else {
            Some(("sync", &self.sync))
        }
    }

    /// What [`RelatedCache::related`] needs to ask this customize hook about a parent.
    pub fn customize<'a>(
        &'a self,
        ctx: &'a EngineContext,
        reader: &'a crate::runtime::source::Reader,
        caller: &'a Caller,
        definition: &'a Value,
        parent_namespaced: bool,
    ) -> Customize<'a> {
        Customize {
            ctx,
            reader,
            caller,
            hook: self.customize.as_ref(),
            definition,
            sync_version: self.sync.version,
            parent_namespaced,
        }
    }
}

impl KindHooks for SyncHooks {
    fn required(&self) -> (&'static str, &HookSpec) {
        ("sync", &self.sync)
    }
    fn optional(&self) -> Vec<(&'static str, Option<&HookSpec>)> {
        vec![
            ("finalize", self.finalize.as_ref()),
            ("customize", self.customize.as_ref()),
        ]
    }
}

/// Parents with the key each is queued under (`key` of its `namespace/name`); objects without
/// a name (never in a cache) are left out.
pub fn keyed<K>(parents: Vec<Arc<Value>>, key: impl Fn(ObjectKey) -> K) -> Vec<(K, Arc<Value>)> {
    parents
        .into_iter()
        .filter_map(|p| ObjectKey::of(&p).map(|k| (key(k), p)))
        .collect()
}

/// A resource declared beside a namespaced parent (its children, inputs, outputs) must be
/// namespaced too: `what` names it (`child`, `output`), `why` says why, after the refusal.
pub fn check_namespaced(
    controller: &str,
    parent: &ResourceInfo,
    declared: &ResourceInfo,
    what: &str,
    why: &str,
) -> Result<(), StartError> {
    if parent.namespaced && !declared.namespaced {
        return Err(StartError::config(
            controller,
            format!(
                "{what} resource {} is cluster-scoped but the parent {} is namespaced{why}",
                declared.key(),
                parent.key()
            ),
        ));
    }
    Ok(())
}

/// A declared child (or attachment, or output) type of a resolved resource.
pub fn child_type(info: &ResourceInfo, method: UpdateMethod) -> ChildType {
    ChildType {
        key: info.key(),
        api_version: info.api_resource.api_version.clone(),
        kind: info.api_resource.kind.clone(),
        namespaced: info.namespaced,
        method,
    }
}

/// The child (attachment, output) types `def` declares, resolved through discovery, each as
/// the engine reads an answer's objects against it (`kubectl meta test`, `dryrun --against`).
pub async fn declared_types(
    ctx: &EngineContext,
    def: &ControllerDef,
) -> Result<Vec<(ChildType, ResourceInfo)>, String> {
    let rules = match def {
        ControllerDef::Composite(c) => &c.spec.child_resources,
        ControllerDef::Decorator(c) => &c.spec.attachments,
        ControllerDef::Map(c) => &c.spec.output_resources,
    };
    let mut out = Vec::new();
    for r in rules {
        let info = ctx
            .discovery
            .resolve(&r.api_version, &r.resource)
            .await
            .map_err(|e| {
                format!(
                    "controller {}: {e} (a custom resource's CRD must be among the -f files)",
                    def.name()
                )
            })?;
        out.push((child_type(&info, r.method()), info));
    }
    Ok(out)
}

/// Is `parent` ours to sync, and how: `None` when it is not selected and lacks our
/// `finalizer`, or is being deleted without it (the garbage collector takes its children);
/// otherwise `Some(finalizing)`: deleted, or no longer selected (finalized, then released).
pub fn sync_mode(parent: &Value, finalizer: &str, selected: bool) -> Option<bool> {
    let deleting = object::is_deleting(parent);
    let has_finalizer = object::finalizers(parent).contains(&finalizer);
    if (!selected || deleting) && !has_finalizer {
        return None;
    }
    Some(deleting || !selected)
}

/// The definition's `spec.parentResource.labelSelector`, parsed (`None`: every parent).
pub fn parent_selector(
    controller: &str,
    rule: &ParentResourceRule,
) -> Result<Option<LabelSelector>, StartError> {
    rule.label_selector
        .as_ref()
        .map(LabelSelector::from_label_selector)
        .transpose()
        .map_err(|e| {
            StartError::config(
                controller,
                format!("spec.parentResource.labelSelector: {e}"),
            )
        })
}

/// The `-n` namespace to list objects of a resource in (`None`: every namespace; a
/// cluster-scoped resource ignores `-n`).
pub fn scope_namespace(ctx: &EngineContext, namespaced: bool) -> Option<&str> {
    if namespaced {
        ctx.options.namespace.as_deref()
    } else {
        None
    }
}

/// The objects of `source` (a resource that is `namespaced` or not) in the `-n` namespace (all
/// of them without one) that `keep` keeps.
pub fn list_in_scope(
    ctx: &EngineContext,
    namespaced: bool,
    source: &Source,
    keep: impl Fn(&Value) -> bool,
) -> Vec<Arc<Value>> {
    let mut objects = source.list(scope_namespace(ctx, namespaced));
    objects.retain(|o| keep(o));
    objects
}

/// Does `selector` (a definition's optional label selector: none selects everything) select
/// `obj`?
pub fn selected(selector: Option<&LabelSelector>, obj: &Value) -> bool {
    selector.is_none_or(|s| s.matches(&object::labels(obj)))
}

/// Is `obj` (of a resource that is `namespaced` or not) inside the `-n` namespace, if any?
pub fn in_namespace_scope(ctx: &EngineContext, namespaced: bool, obj: &Value) -> bool {
    scope_namespace(ctx, namespaced).is_none_or(|ns| object::namespace(obj) == Some(ns))
}

/// How `run --sharded` narrows a controller's resource: its parents by their uid's bucket
/// (`parents`), else its children (attachments, outputs) by the bucket label the engine puts
/// on them ([`label_shard`]).
pub fn shard_filter(controller: &str, parents: bool) -> FilterBy {
    if parents {
        FilterBy::ParentUid
    } else {
        FilterBy::ChildLabel(crate::shard::bucket_label(controller))
    }
}

/// `run --sharded`: label every desired child of `parent` with the parent's bucket
/// ([`crate::shard::bucket_label`]), so that the replica owning the parent watches it and
/// the others do not. Nothing when `controller` is not sharded here.
pub fn label_shard(
    ctx: &EngineContext,
    controller: &str,
    parent: &Value,
    desired: &mut [(ChildId, Value)],
) {
    if !ctx.shard().is_some_and(|g| g.knows(controller)) {
        return;
    }
    let Some(uid) = object::uid(parent) else {
        return;
    };
    let label = crate::shard::bucket_label(controller);
    let value = Value::String(crate::shard::bucket_value(crate::shard::bucket(uid)));
    for (_, child) in desired.iter_mut() {
        let Some(meta) = child.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(l) = labels.as_object_mut() {
            l.insert(label.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Trigger;
    use crate::k8s::informer::InformerEvent;
    use crate::runtime::memory::SyncMemory;
    use crate::runtime::routing::{ChildAction, ParentAction, child_event, parent_event};
    use serde_json::json;
    use std::sync::Arc;

    fn owned(name: &str, owner: Option<&str>, labels: Value) -> Arc<Value> {
        let refs: Vec<Value> = owner
            .map(|u| {
                json!({"apiVersion": "v1", "kind": "P", "name": "p", "uid": u,
                "controller": true})
            })
            .into_iter()
            .collect();
        Arc::new(
            json!({"metadata": {"name": name, "namespace": "ns", "labels": labels,
            "ownerReferences": refs}}),
        )
    }

    fn trig(event: &str) -> Trigger {
        Trigger::Child {
            resource: "Pod.v1".into(),
            object: "ns/c".into(),
            event: event.into(),
        }
    }

    #[test]
    fn child_events_reach_old_and_new_controllers_and_orphan_matchers() {
        let a = owned("c", Some("a"), json!({}));
        let b = owned("c", Some("b"), json!({}));
        let orphan = owned("c", None, json!({"x": "1"}));
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Added(Arc::clone(&a))),
            vec![ChildAction::Owner("a".into(), trig("added"))]
        );
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&a),
                    new: Arc::clone(&b)
                }
            ),
            vec![
                ChildAction::Owner("a".into(), trig("updated")),
                ChildAction::Owner("b".into(), trig("updated"))
            ]
        );
        // Released: the old controller hears of it, and so do parents that may adopt it.
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&a),
                    new: Arc::clone(&orphan)
                }
            ),
            vec![
                ChildAction::Owner("a".into(), trig("updated")),
                ChildAction::Orphan(Arc::clone(&orphan), trig("updated"))
            ]
        );
        // An orphan whose labels did not change concerns nobody new.
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&orphan),
                    new: Arc::clone(&orphan)
                }
            ),
            vec![]
        );
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Deleted(orphan)),
            vec![]
        );
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Deleted(a)),
            vec![ChildAction::Owner("a".into(), trig("deleted"))]
        );
    }

    #[test]
    fn parent_events_queue_what_matters_and_forget_the_deleted() {
        let mem: SyncMemory<String> = SyncMemory::default();
        let key = |o: &Value| object::name(o).map(str::to_string);
        let in_scope = |o: &Value| key(o).filter(|_| object::label(o, "in") == Some("yes"));
        let p = Arc::new(
            json!({"metadata": {"name": "p", "uid": "u", "labels": {"in": "yes"},
            "resourceVersion": "1"}}),
        );
        let out = Arc::new(json!({"metadata": {"name": "o", "uid": "v"}}));
        let ev = |e| parent_event(e, in_scope, key, &mem, false);
        assert_eq!(
            ev(InformerEvent::Added(Arc::clone(&p))),
            ParentAction::Queue("p".into(), Trigger::ParentAdded)
        );
        assert_eq!(mem.key_of_uid("u").as_deref(), Some("p"));
        assert_eq!(
            ev(InformerEvent::Added(Arc::clone(&out))),
            ParentAction::Nothing
        );
        let mut echo = (*p).clone();
        echo["metadata"]["resourceVersion"] = json!("2");
        echo["status"] = json!({"n": 1});
        mem.record_status(&"p".to_string(), json!({"n": 1}));
        assert_eq!(
            ev(InformerEvent::Updated {
                old: Arc::clone(&p),
                new: Arc::new(echo.clone())
            }),
            ParentAction::Nothing,
            "the echo of our own status write"
        );
        let mut deleting = echo;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            ev(InformerEvent::Updated {
                old: Arc::clone(&p),
                new: Arc::new(deleting)
            }),
            ParentAction::Queue("p".into(), Trigger::ParentDeleting)
        );
        assert_eq!(
            ev(InformerEvent::Deleted(Arc::clone(&p))),
            ParentAction::Forget("p".into())
        );
        assert_eq!(mem.key_of_uid("u"), None);
        assert_eq!(ev(InformerEvent::Relisted), ParentAction::QueueAll);
    }

    #[test]
    fn sync_mode_follows_selection_deletion_and_our_finalizer() {
        let f = "metacontroller.io/compositecontroller-c";
        let plain = json!({"metadata": {"name": "p"}});
        let held = json!({"metadata": {"name": "p", "finalizers": [f]}});
        let mut deleted = plain.clone();
        deleted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut deleted_held = held.clone();
        deleted_held["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(sync_mode(&plain, f, true), Some(false));
        assert_eq!(sync_mode(&plain, f, false), None);
        assert_eq!(
            sync_mode(&held, f, false),
            Some(true),
            "deselected: finalize"
        );
        assert_eq!(sync_mode(&deleted, f, true), None, "the GC's business");
        assert_eq!(sync_mode(&deleted_held, f, true), Some(true));
        assert_eq!(sync_mode(&deleted_held, f, false), Some(true));
    }

    #[test]
    fn status_echo_of_our_own_write_does_not_matter() {
        let mem: SyncMemory<String> = SyncMemory::default();
        let k = "default/p".to_string();
        let old = json!({"metadata": {"name": "p", "resourceVersion": "1"}, "status": {"n": 1}});
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("2");
        new["status"] = json!({"n": 2});
        // Unknown status: it matters (someone else may have written it).
        assert!(mem.update_matters(&k, &old, &new, false));
        assert!(!mem.update_matters(&k, &old, &new, true));
        mem.record_status(&k, json!({"n": 2.0}));
        assert!(!mem.update_matters(&k, &old, &new, false));
        // A spec change always matters.
        new["spec"] = json!({"x": 1});
        assert!(mem.update_matters(&k, &old, &new, true));
    }

    #[test]
    fn memory_routes_uids_and_forgets_deleted_keys() {
        let mem: SyncMemory<crate::k8s::object::ObjectKey> = SyncMemory::default();
        let obj = json!({"metadata": {"name": "p", "uid": "u1"}});
        let k = crate::k8s::object::ObjectKey::new(Some("default"), "p");
        mem.remember_uid(&obj, &k);
        mem.record_exchange(&k, "sync", &json!({"req": 1}), &json!({"resp": 1}));
        assert_eq!(mem.key_of_uid("u1"), Some(k.clone()));
        assert_eq!(mem.exchanges().len(), 1);
        assert_eq!(mem.last_exchange(&k).map(|e| e.0), Some("sync".into()));
        mem.forget(&k, &obj);
        assert_eq!(mem.key_of_uid("u1"), None);
        assert!(mem.exchanges().is_empty());
    }
}
