//! kubectl-meta-engine: the engine that runs Metacontroller-style controller definitions
//! (CompositeController, DecoratorController, MapController), with what it needs and nothing
//! of the command line around it.
//!
//! The engine in layers, one folder each, the arrows pointing down only:
//! - `run` (private; [`Engine`] re-exported): starts the kinds from definitions and runs them.
//! - `kinds` (private): CompositeController, DecoratorController and MapController, each the
//!   steps of one reconcile skeleton that differ between kinds.
//! - `runtime` (private): what runs the kinds: the controller loop, the work queue, start-up,
//!   sources (informers or lists read once), event routing, hook calls and the executor.
//! - [`replayer`]: a flight recording's window run again through an [`Engine`] on a given
//!   client (`kubectl meta replay`), to the end or one recorded step at a time.
//! - `hook_bench` (private; [`HookBench`] re-exported): one hook of one definition called as
//!   the engine would, outside its loop.
//! - [`plan`]: pure planning (observed + hook answer -> typed actions; no I/O), what `dev`
//!   executes, `dryrun` prints and the TUI shows.
//!
//! What every layer speaks:
//! - [`error`]: why a sync failed, typed per layer ([`error::SyncError`]), and how it is retried.
//! - [`events`]: the event stream the printer, the TUI and tests consume.
//! - [`perturb`]: deterministic faults injected into the engine's view and actions
//!   (`kubectl meta test --perturb`), set through [`EngineOptions::perturb`].
//! - [`trace`]: the `tracing` spans of syncs, hook calls and writes (exported by the plugin).
//!
//! And below the engine:
//! - [`spec`]: controller definitions: types, loading from files, validation.
//! - [`flight`]: the flight recorder: the last engine events within a byte bound, dumped as a
//!   versioned JSON document; [`flight::replay`] reads a dump back to re-run its window
//!   (`kubectl meta replay`).
//! - [`hooks`]: calling hooks: webhooks and local programs (exec), call records.
//! - [`k8s`]: the Kubernetes client side: connection and context safety, discovery, shared
//!   informers with indexes, leases, object accessors, API pacing.
//!
//! The public surface is this file: the modules declared `pub` and the names re-exported below.
//! The crate's README lists it.
#![deny(missing_docs)]

pub mod error;
pub mod events;
pub mod flight;
pub(crate) mod hook_bench;
pub mod hooks;
pub mod k8s;
pub(crate) mod kinds;
pub mod labels;
pub mod perturb;
pub mod plan;
pub mod plan_once;
pub mod replayer;
pub(crate) mod run;
pub(crate) mod runtime;
pub mod shard;
pub mod spec;
pub mod trace;

// Start an engine on a client, drive it, read its queue.
pub use run::{Engine, OnceReport, QUIET, ReplayJob, WaitFor};
pub use runtime::context::{
    DEFAULT_WORKERS, EngineContext, EngineOptions, HookAnswers, HookGate, HookSpec, Recording,
};
pub use runtime::execute::ApplyStrategy;
pub use runtime::queue::{
    DurationHistogram, QueueMetrics, QueueStats, WORKQUEUE_BUCKETS, depth as queue_depth,
};
// A started controller, as the dev loop drives it (resync, reload, replay).
pub use runtime::controller::{ControllerHandle, LastExchange};
// Why a controller cannot start.
pub use runtime::start::StartError;
// Reading live state once (no watch): what `dryrun` plans on.
pub use runtime::snapshot::{LiveError, LiveReader};
// One hook of one definition, outside the engine loop (`kubectl meta test`, `dryrun --against`).
pub use hook_bench::HookBench;
