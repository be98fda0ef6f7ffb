//! The controller engine: runs Metacontroller-style controller definitions.
//!
//! Three layers, one folder each:
//! - [`plan`]: pure planning (observed + hook answer -> typed actions; no I/O), what `dev`
//!   executes, `dryrun` prints and the TUI shows.
//! - [`kinds`]: CompositeController, DecoratorController and MapController, each the steps of
//!   one reconcile skeleton that differ between kinds.
//! - `runtime`: what runs the kinds: the controller loop, the work queue, start-up, sources
//!   (informers or lists read once), event routing, hook calls and the executor.
//! - [`run`]: the [`Engine`] on top: starts the kinds from definitions and runs them.
//!
//! And two things every layer speaks:
//! - [`error`]: why a sync failed, typed per layer ([`error::SyncError`]), and how it is retried.
//! - [`events`]: the event stream the printer, the TUI and tests consume.

pub mod error;
pub mod events;
pub(crate) mod kinds;
pub mod plan;
pub mod run;
pub(crate) mod runtime;

// The runtime's public surface: start an engine on a client, drive it, read its queue.
pub use run::{Engine, OnceReport, QUIET, WaitFor};
pub use runtime::context::{DEFAULT_WORKERS, EngineContext, EngineOptions, Recording};
pub use runtime::execute::ApplyStrategy;
pub use runtime::queue::QueueStats;
