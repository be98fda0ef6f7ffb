//! The controller engine: runs Metacontroller-style controller definitions.
//!
//! Map of the engine (one concept per file):
//! - [`runtime`]: the [`runtime::Engine`]: starts controllers, stops them, `--once` convergence.
//! - [`controller`]: the loop every controller kind shares (workers, retries, resyncs, outcomes).
//! - [`reconcile`]: the one reconcile skeleton every kind runs (parent -> observe -> hook ->
//!   desired -> plan -> publish -> carry out -> outcome); each kind supplies its steps.
//! - [`error`]: why a sync failed, typed per layer ([`error::SyncError`]), and how it is retried.
//! - [`composite`]: CompositeController (claim -> customize -> hook -> plan -> execute).
//! - [`decorator`]: DecoratorController (targets of several resources: labels, annotations,
//!   status and attachments; finalize when a target is deleted or stops matching); which
//!   objects it selects in [`decorator_rule`].
//! - [`map`]: MapController (one map hook call per selected input, tombstones for inputs that
//!   are gone, engine-computed status); its pure parts in [`map_plan`].
//! - [`queue`]: the work queue (coalescing, per-key backoff, delays, 429 Retry-After).
//! - [`ownership`]: ControllerRef claims: adopt, release, never touch others' objects.
//! - [`child`]: naming children ([`child::ChildType`], [`child::ChildId`]).
//! - [`plan`]: the pure plan pieces (observed + desired -> child actions, status, finalizer).
//! - [`planner`]: the pure planning entry point (parent + observed + hook answer -> a typed
//!   [`planner::SyncPlan`]); what `dev` executes, `dryrun` prints and the TUI shows.
//! - [`apply`]: the three-way merge with the last-applied annotation.
//! - [`server_view`]: the desired object as the API server will store it (stringData folded,
//!   empties and nulls absent, which fields are quantities), so the merge converges.
//! - [`rollout`]: rolling updates, revisions and status checks; [`rollout_plan`]: the pure
//!   rollout decision (stored revisions + hook answers -> [`planner::RolloutDecision`]).
//! - [`related`]: customize-hook related resources.
//! - [`source`]: where the kinds' sync steps read objects: the informers' caches (`dev`) or
//!   lists read once ([`snapshot`], `dryrun`), so both observe, ask hooks and plan alike.
//! - [`replay`]: comparing a reloaded hook's answer to the previous one.
//! - [`hookapi`]: the hook wire format (request maps, v1/v2 response decoding).
//! - [`execute`]: carries a plan out against the API server.
//! - [`hotloop`]: the hot-loop guard (stop rewriting a field the server keeps rewriting).
//! - [`recorder`]: `SyncError` Events on parents.
//! - [`context`]: services shared by all controllers of one engine; hook resolution.
//! - [`shared`], [`routing`], [`caller`], [`memory`], [`related_cache`], [`carry`]: what the
//!   three kinds share (start-up, event routing, hook calls, per-key memory, customize cache,
//!   carrying a plan out).
//! - [`events`]: the event stream the printer, the TUI and tests consume.

pub(crate) mod apply;
pub(crate) mod caller;
pub(crate) mod carry;
pub mod child;
pub(crate) mod composite;
pub mod context;
pub(crate) mod controller;
pub(crate) mod decorator;
pub(crate) mod decorator_rule;
pub mod error;
pub mod events;
pub mod execute;
pub mod hookapi;
pub mod hotloop;
pub(crate) mod map;
pub mod map_plan;
pub(crate) mod memory;
pub(crate) mod ownership;
pub mod plan;
pub mod planner;
pub mod queue;
pub(crate) mod reconcile;
pub(crate) mod recorder;
pub(crate) mod related;
pub(crate) mod related_cache;
pub(crate) mod replay;
pub mod rollout;
pub(crate) mod rollout_plan;
pub(crate) mod routing;
pub mod runtime;
pub(crate) mod server_view;
pub(crate) mod shared;
pub(crate) mod snapshot;
pub(crate) mod source;
