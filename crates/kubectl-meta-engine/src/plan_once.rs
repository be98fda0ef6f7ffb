//! The plan-once driver: what one sync of each parent would do ([`Composer::plan`]). The
//! engine's own controller kinds (`Composite`, `Decorator`, `MapCtl`) built on live state read
//! once ([`crate::LiveReader`]: one list per resource, no watch), each selected parent run
//! through the reconcile skeleton's steps up to the plan (`reconcile::plan_only`): the same
//! observe (claims, customize), hook requests, answer decoding and pure planning `dev` runs,
//! giving the typed [`SyncPlan`] `dev` would carry out. The hook calls a sync made are kept
//! (a recording [`crate::Caller`]) for `dryrun --against`.
//!
//! `kubectl meta dryrun` is its front (reading flags, rendering, `--simulate`).
//!
//! Nothing here writes: the only requests are lists, discovery and the hook calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::EventSubject;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::object::{self, ObjectKey};
use crate::kinds::composite::{self, Composite};
use crate::kinds::decorator::{self, Decorator};
use crate::kinds::map::{self, MapCtl, MapWork};
use crate::plan::map_plan;
use crate::plan::planner::{self, SyncPlan};
use crate::plan::rollout;
use crate::runtime::context::EngineContext;
use crate::runtime::reconcile::{self, KindController, SyncCx};
use crate::runtime::snapshot::{LiveError, LiveReader};
use crate::runtime::source::{self, SnapshotError};
use crate::runtime::start::StartError;
use crate::spec::{
    CompositeControllerSpec, Controller, ControllerDef, DecoratorControllerSpec, MapControllerSpec,
};

/// One hook call made while planning: its name, request and answer.
#[derive(Debug, Clone)]
pub struct PlanExchange {
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
    pub exchanges: Vec<PlanExchange>,
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

/// Why planning could not start at all.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// Reading live state failed.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// The definition cannot be run (hooks, selectors, scopes).
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
    /// Observe only (see [`Composer::observe_only`]).
    observe_only: bool,
}

/// Plans syncs with a hook client and a one-time reader of live state.
pub struct Composer<'a> {
    /// Hook client, options (`--hook-base-url`, `-n`).
    pub ctx: &'a Arc<EngineContext>,
    /// Live state.
    pub live: &'a Arc<LiveReader>,
    /// Run each selected parent's sync up to what it observes (children, claims, customize)
    /// and stop before the sync hook: nothing is planned, only what a sync reads is read
    /// (`--simulate` copies that and syncs in its sandbox).
    pub observe_only: bool,
}

impl From<SnapshotError> for ComposeError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::Live(e) => ComposeError::Live(e),
            SnapshotError::Config(StartError::Config {
                controller,
                message,
            }) => ComposeError::Config {
                controller,
                message,
            },
            SnapshotError::Config(e @ StartError::Stopped(_)) => ComposeError::Config {
                controller: String::new(),
                message: e.to_string(),
            },
        }
    }
}

impl Planned {
    /// Does the selection want `parent`? Remembers the PARENT arguments it matches.
    fn wants(&mut self, sel: &Selection, parent: &Value) -> bool {
        if !sel.wants(parent) {
            return false;
        }
        if let Some(k) = ObjectKey::of(parent) {
            for want in &sel.parents {
                if *want == k.to_string() || *want == k.name {
                    self.matched.insert(want.clone());
                }
            }
        }
        true
    }

    /// Run the sync of `key` up to its plan: the plan with the hook calls it made (`shape`
    /// adds what the kind shows of what was observed), or the failure, under the parent name
    /// `failed_as`. Returns the failure's message.
    async fn add<S: KindController>(
        &mut self,
        kind: &S,
        key: &S::Key,
        failed_as: String,
        shape: impl FnOnce(&S::Seen, &mut ParentPlan),
    ) -> Option<String> {
        let stop = CancellationToken::new();
        let cx = SyncCx {
            triggers: &[],
            stop: &stop,
        };
        if self.observe_only {
            let observed = reconcile::observe_only(kind, key, cx).await;
            return observed
                .err()
                .map(|(f, _)| self.failed(kind.parts().name, failed_as, &f));
        }
        let decided = reconcile::plan_only(kind, key, cx).await;
        let exchanges = kind.parts().caller.take_transcript();
        match decided {
            Ok(Some(d)) => {
                let mut p = parent_plan(kind, key, d.parent, d.plan);
                p.exchanges = exchanges
                    .into_iter()
                    .map(|(hook, request, response)| PlanExchange {
                        hook,
                        request,
                        response,
                    })
                    .collect();
                shape(&d.seen, &mut p);
                self.plans.push(p);
                None
            }
            Ok(None) => None,
            Err((f, _)) => Some(self.failed(kind.parts().name, failed_as, &f)),
        }
    }

    /// Record the failure of `parent`'s sync; returns its message.
    fn failed(&mut self, controller: &str, parent: String, f: &impl std::fmt::Display) -> String {
        let message = f.to_string();
        self.failures.push(ParentFailure {
            controller: controller.to_string(),
            parent,
            message: message.clone(),
        });
        message
    }
}

/// The plan of `key` as shown: not finalizing, no map key, no notes, no exchanges (the caller
/// sets them).
fn parent_plan<S: KindController>(
    kind: &S,
    key: &S::Key,
    parent: Arc<Value>,
    plan: SyncPlan,
) -> ParentPlan {
    let target = kind.target(key, &parent);
    let (parent_resource, types) = (target.parent_info.clone(), target.types.clone());
    ParentPlan {
        controller: kind.parts().name.to_string(),
        controller_kind: S::KIND,
        parent_resource,
        parent,
        map_key: None,
        map_input: None,
        finalizing: false,
        plan,
        types,
        notes: Vec::new(),
        exchanges: Vec::new(),
    }
}

/// `namespace/name` of an object.
fn name_of(obj: &Value) -> String {
    ObjectKey::of(obj)
        .map(|k| k.to_string())
        .unwrap_or_default()
}

impl Composer<'_> {
    /// An empty result, observing only when this composer does.
    fn planned(&self) -> Planned {
        Planned {
            observe_only: self.observe_only,
            ..Planned::default()
        }
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

    async fn composite(
        &self,
        def: &Controller<CompositeControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let kind: Composite =
            source::snapshot(def.clone(), Arc::clone(self.ctx), self.live).await?;
        let unrevised = kind.rolling_without_revisions();
        let mut planned = self.planned();
        for (key, parent) in kind.keyed_parents() {
            if !planned.wants(sel, &parent) {
                continue;
            }
            let shape = |seen: &composite::Observed, p: &mut ParentPlan| {
                p.finalizing = seen.finalizing();
                if !p.finalizing && unrevised {
                    p.notes.push(format!(
                        "the cluster does not serve {}/{} (ControllerRevisions): no rollout has started; dev installs that CRD before its first rolling update",
                        rollout::REVISION_API_VERSION,
                        rollout::REVISION_RESOURCE
                    ));
                }
            };
            planned.add(&kind, &key, name_of(&parent), shape).await;
        }
        Ok(planned)
    }

    async fn decorator(
        &self,
        def: &Controller<DecoratorControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let kind: Decorator =
            source::snapshot(def.clone(), Arc::clone(self.ctx), self.live).await?;
        let mut planned = self.planned();
        // By target resource, then by target.
        let mut targets: Vec<_> = kind.keyed_targets().collect();
        targets.sort_by(|(a, _), (b, _)| a.resource.cmp(&b.resource));
        for (key, target) in targets {
            if !planned.wants(sel, &target) {
                continue;
            }
            let shape = |seen: &decorator::Observed, p: &mut ParentPlan| {
                p.finalizing = seen.finalizing();
            };
            planned.add(&kind, &key, name_of(&target), shape).await;
        }
        Ok(planned)
    }

    async fn map(
        &self,
        def: &Controller<MapControllerSpec>,
        sel: &Selection,
    ) -> Result<Planned, ComposeError> {
        let name = &def.name;
        let kind: MapCtl = source::snapshot(def.clone(), Arc::clone(self.ctx), self.live).await?;
        let mut planned = self.planned();
        let mut key_found = sel.key.is_none();
        for parent in kind.parents_in_scope() {
            if object::is_deleting(&parent) || !planned.wants(sel, &parent) {
                continue;
            }
            let pk = ObjectKey::of(&parent).unwrap_or_else(|| ObjectKey::new(None, ""));
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
            let keys: BTreeSet<String> = kind.keys(&parent, &selector).into_iter().collect();
            let mut failures = BTreeMap::new();
            for mk in keys {
                if sel.key.as_ref().is_some_and(|k| *k != mk) {
                    continue;
                }
                key_found = true;
                let work = MapWork::Key(pk.clone(), Arc::from(mk.as_str()));
                let shape = |seen: &map::KeySeen, p: &mut ParentPlan| {
                    p.map_key = Some(mk.clone());
                    p.map_input = seen.input().map(|i| map_plan::input_ref(i));
                };
                let failed_as = format!("{pk} {mk}");
                if let Some(message) = planned.add(&kind, &work, failed_as, shape).await {
                    failures.insert(mk, message);
                }
            }
            if sel.key.is_none() {
                // The engine-owned status, as the engine computes it from these outputs.
                let plan = kind.status_plan(&parent, &failures, None);
                if plan.status.is_some() {
                    let work = MapWork::Status(pk.clone());
                    planned.plans.push(parent_plan(&kind, &work, parent, plan));
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
}
