//! The hook bench: one hook of one definition called outside the engine loop, exactly as the
//! engine calls it (the hook resolved from the definition with the engine's options, the
//! managed hook server's gate, the webhooks' secured endpoints, a `HookCalled` event).
//! `kubectl meta test` runs its recorded cases on it, `dryrun --against` sends a plan's
//! requests to another version of a controller through it.
//!
//! It stands on an [`EngineContext`] built the way `dev` and `run` build theirs
//! ([`EngineContext::with_endpoints`]): the command line builds that once and hands it here.

use std::sync::Arc;

use serde_json::Value;

use crate::events::EventSubject;
use crate::hooks::{CallInfo, HookCall};
use crate::k8s::discovery::ResourceInfo;
use crate::kinds::shared;
use crate::plan::writes::ChildType;
use crate::runtime::context::{EngineContext, HookSpec, call_hook};
use crate::runtime::start::StartError;
use crate::spec::ControllerDef;

/// Hooks of definitions, resolved and called as the engine would, one call at a time.
#[derive(Clone)]
pub struct HookBench {
    ctx: Arc<EngineContext>,
}

impl HookBench {
    /// A bench calling through `ctx` (its options, hook client, gate and event bus).
    pub fn on(ctx: Arc<EngineContext>) -> Self {
        HookBench { ctx }
    }

    /// The engine context it calls through.
    pub fn context(&self) -> &Arc<EngineContext> {
        &self.ctx
    }

    /// The hook `hook` (`sync`, `finalize`, `customize`, `map`, `tombstone`) of `def`,
    /// resolved as the engine resolves it (`--hook-base-url`, the exec directory); `None` when
    /// the definition has no such hook.
    pub fn hook(&self, def: &ControllerDef, hook: &str) -> Result<Option<HookSpec>, StartError> {
        match def.hooks().into_iter().find(|(n, _)| *n == hook) {
            Some((name, h)) => {
                shared::resolve_hook(&self.ctx, def.name(), def.base_dir(), name, Some(h))
            }
            None => Ok(None),
        }
    }

    /// The child (attachment, output) types `def` declares, resolved by discovery, as the
    /// engine reads its hooks' answers with them.
    pub async fn declared_types(
        &self,
        def: &ControllerDef,
    ) -> Result<Vec<(ChildType, ResourceInfo)>, String> {
        shared::declared_types(&self.ctx, def).await
    }

    /// Call `spec`, the hook `hook` of `def`, with `request` for `subject` (the parent and
    /// map key the request is about), as the engine would: through the gate of a managed hook
    /// server, publishing `HookCalled`. The call's status, latency and answer or error.
    pub async fn call(
        &self,
        def: &ControllerDef,
        hook: &str,
        spec: &HookSpec,
        subject: &EventSubject,
        request: &Value,
    ) -> HookCall {
        let info = CallInfo {
            hook: hook.to_string(),
            controller_kind: def.kind().to_string(),
            controller: def.name().to_string(),
            parent: subject.parent.clone(),
            map_key: subject.map_key.clone(),
        };
        call_hook(&self.ctx, spec, info, request).await
    }

    /// One call: resolve the hook `hook` of `def` ([`HookBench::hook`]) and call it with
    /// `request` for `subject` ([`HookBench::call`]); `Ok(None)` when `def` has no such hook.
    /// The hook as resolved comes back with the call (its wire version reads the answer).
    pub async fn ask(
        &self,
        def: &ControllerDef,
        hook: &str,
        subject: &EventSubject,
        request: &Value,
    ) -> Result<Option<(HookSpec, HookCall)>, StartError> {
        let Some(spec) = self.hook(def, hook)? else {
            return Ok(None);
        };
        let call = self.call(def, hook, &spec, subject, request).await;
        Ok(Some((spec, call)))
    }
}
