//! What every controller kind holds the same way ([`Core`]): its name, the engine's services,
//! its work queue, its hook caller, its per-key memory and its resolved hooks ([`KindHooks`]),
//! built once for all kinds ([`Core::new`]). The reconcile skeleton reads them through
//! [`Parts`], the runtime's adapter ([`crate::runtime::reconcile::Running`]) through
//! [`crate::runtime::reconcile::SyncKind::core`]: a kind writes none of that glue itself.

use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;

use crate::events::Trigger;
use crate::runtime::caller::Caller;
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::memory::SyncMemory;
use crate::runtime::queue::{Backoff, WorkQueue};
use crate::runtime::source::Reader;

/// A kind's resolved hooks, as the runtime asks for them (hook reload, replay).
pub trait KindHooks: Send + Sync {
    /// The kind's required hook (`sync`, `map`), by name.
    fn required(&self) -> (&'static str, &HookSpec);
    /// Its optional hooks by name (`finalize`, `customize`, `tombstone`), `None` where the
    /// definition has none.
    fn optional(&self) -> Vec<(&'static str, Option<&HookSpec>)>;

    /// The hooks the definition has, by name, the required one first.
    fn specs(&self) -> Vec<(&'static str, HookSpec)> {
        let (name, required) = self.required();
        let optional = self.optional().into_iter();
        std::iter::once((name, required.clone()))
            .chain(optional.filter_map(|(n, h)| h.map(|h| (n, h.clone()))))
            .collect()
    }
    /// The hook that answered an exchange recorded under `hook` (exchanges are recorded for
    /// the required hook and the finalize and tombstone hooks): that optional hook, else the
    /// required one.
    fn for_exchange(&self, hook: &str) -> Option<&HookSpec> {
        match self.optional().into_iter().find(|(n, _)| *n == hook) {
            Some((_, h)) => h,
            None => Some(self.required().1),
        }
    }
}

/// The pieces of a controller every kind holds the same way, keyed by `K`, with hooks `H`.
pub struct Core<K, H> {
    /// The controller's (definition's) name.
    pub name: String,
    /// The engine's shared services.
    pub ctx: Arc<EngineContext>,
    /// The work queue.
    pub queue: WorkQueue<K, Trigger>,
    /// Who calls the hooks (a dry run's keeps every exchange).
    pub caller: Caller,
    /// Per-key memory between syncs: uid routing, last status written, last exchange.
    pub memory: SyncMemory<K>,
    /// The definition's hooks, resolved.
    pub hooks: H,
}

/// The pieces of a controller every reconcile step uses.
pub struct Parts<'a, K> {
    /// The controller's name.
    pub name: &'a str,
    /// The engine's shared services.
    pub ctx: &'a EngineContext,
    /// Who calls the hooks.
    pub caller: &'a Caller,
    /// Per-key memory between syncs.
    pub memory: &'a SyncMemory<K>,
}

impl<K: Clone + Eq + Hash + Display + Send + Sync + 'static, H> Core<K, H> {
    /// The core of controller `name` of kind `kind` (`CompositeController`, ...): an empty
    /// queue and memory, the hook caller `reader` gives (a dry run keeps every exchange).
    pub fn new(
        kind: &'static str,
        name: String,
        ctx: Arc<EngineContext>,
        reader: &Reader,
        hooks: H,
    ) -> Self {
        Core {
            caller: reader.caller(kind, &name),
            queue: WorkQueue::new(Backoff::default()),
            memory: SyncMemory::default(),
            name,
            ctx,
            hooks,
        }
    }

    /// The pieces every reconcile step uses.
    pub fn parts(&self) -> Parts<'_, K> {
        Parts {
            name: &self.name,
            ctx: &self.ctx,
            caller: &self.caller,
            memory: &self.memory,
        }
    }
}
