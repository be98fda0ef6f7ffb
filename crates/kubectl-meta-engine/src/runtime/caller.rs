//! Hook calls made for a sync ([`Caller::call`]: a failed call becomes a [`SyncError`], a
//! 429 a retry after Retry-After) and replays of the last exchanges to a reloaded hook
//! ([`Caller::replay`]). A recording caller ([`Caller::recording`], the dry run) keeps every
//! exchange it made, for showing and comparing them.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::error::SyncError;
use crate::events::{EngineEvent, EventKey};
use crate::hooks::CallInfo;
use crate::runtime::context::{EngineContext, HookSpec, call_hook};
use crate::runtime::controller::LastExchange;

/// Who calls hooks: the controller kind and name, as hook call logs and events show them.
#[derive(Debug, Clone)]
pub struct Caller {
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub kind: &'static str,
    /// The definition's name.
    pub controller: String,
    /// Recording: every answered call as (hook, request, answer), in call order.
    transcript: Option<Arc<Mutex<Vec<Called>>>>,
}

/// One answered hook call: the hook's name, the request and the answer.
pub type Called = (String, Value, Value);

impl Caller {
    /// The caller for controller `controller` of kind `kind`.
    pub fn new(kind: &'static str, controller: &str) -> Self {
        Caller {
            kind,
            controller: controller.to_string(),
            transcript: None,
        }
    }

    /// A caller that also keeps every answered call ([`Caller::take_transcript`]).
    pub fn recording(kind: &'static str, controller: &str) -> Self {
        Caller {
            transcript: Some(Arc::default()),
            ..Caller::new(kind, controller)
        }
    }

    /// The calls answered since the last take, in call order (none when not recording).
    pub fn take_transcript(&self) -> Vec<Called> {
        self.transcript
            .as_ref()
            .and_then(|t| t.lock().ok().map(|mut t| std::mem::take(&mut *t)))
            .unwrap_or_default()
    }

    /// The call record of hook `hook` for `key` (a parent, target or map key).
    pub fn info(&self, hook: &str, key: &(dyn EventKey + Sync)) -> CallInfo {
        let subject = key.subject();
        CallInfo {
            hook: hook.to_string(),
            controller_kind: self.kind.to_string(),
            controller: self.controller.clone(),
            parent: subject.parent,
            map_key: subject.map_key,
        }
    }

    /// Call hook `hook` for a sync of `key`: the answer, or a [`SyncError`] (retried after
    /// Retry-After, or 500ms, when the hook answered 429).
    pub async fn call(
        &self,
        ctx: &EngineContext,
        hook: &str,
        spec: &HookSpec,
        key: &(dyn EventKey + Sync),
        body: &Value,
    ) -> Result<Value, SyncError> {
        let call = call_hook(ctx, spec, self.info(hook, key), body).await;
        let answer = call.result.map_err(|e| SyncError::hook(hook, e))?;
        if let Some(Ok(mut t)) = self.transcript.as_ref().map(|t| t.lock()) {
            t.push((hook.to_string(), body.clone(), answer.clone()));
        }
        Ok(answer)
    }

    /// Send each exchange's request again (to a reloaded hook), `--workers` at a time, and
    /// compare the answers; publishes one [`EngineEvent::Replay`] per exchange whose hook
    /// `spec_for` knows, and returns them.
    pub async fn replay<'h>(
        &self,
        ctx: &EngineContext,
        exchanges: Vec<LastExchange>,
        spec_for: impl Fn(&str) -> Option<&'h HookSpec>,
    ) -> Vec<EngineEvent> {
        use futures::StreamExt;
        let spec_for = &spec_for;
        futures::stream::iter(exchanges)
            .map(|x| async move {
                let LastExchange {
                    subject: key,
                    hook,
                    request,
                    response: before,
                } = x;
                let spec = spec_for(&hook)?;
                let call = call_hook(ctx, spec, self.info(&hook, &key), &request).await;
                let (changes, error) = match call.result {
                    Ok(after) => (crate::plan::replay::response_changes(&before, &after), None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                let ev = EngineEvent::Replay {
                    controller: self.controller.clone(),
                    subject: key.into(),
                    hook,
                    changes,
                    error,
                };
                ctx.bus.publish(ev.clone());
                Some(ev)
            })
            .buffer_unordered(ctx.options.workers.max(1))
            .filter_map(|e| async move { e })
            .collect()
            .await
    }
}
