//! The runtime: what runs the kinds against an API server.
//!
//! Nothing here names a controller kind: the kinds ([`crate::kinds`]) build on these
//! pieces, and the [`crate::Engine`] ([`crate::run`]) starts the kinds.
//!
//! - [`controller`]: the loop every kind shares (workers, retries, resyncs, outcomes).
//! - [`reconcile`]: the one reconcile skeleton (parent -> observe -> hook -> desired -> plan ->
//!   publish -> carry out -> outcome), and the one adapter that starts and drives any kind.
//! - [`core`]: what every kind holds the same way (name, services, queue, caller, memory,
//!   hooks).
//! - [`queue`]: the work queue (coalescing, per-key backoff, delays, 429 Retry-After).
//! - [`source`]: where sync steps read objects: informers (`dev`) or lists read once
//!   ([`snapshot`], `dryrun`).
//! - [`routing`]: informer events to queue keys through indexes, the resync timer.
//! - [`start`]: starting a controller (resolving its resources, waiting for its caches, its
//!   worker loop), [`start::StartError`].
//! - [`caller`]: hook calls and replays; [`context`]: services shared by all controllers.
//! - [`related`], [`related_cache`]: customize-hook related resources and their cache.
//! - [`execute`]: carries a plan out against the API server; [`carry`]: waiting for the caches
//!   to show it, failed syncs.
//! - [`memory`]: per-key memory between syncs; [`recorder`]: `SyncError` Events on parents.
//! - [`references`]: the Secrets and ConfigMaps a controller's webhooks reference, waited for
//!   before it starts and read again when they change.

pub(crate) mod caller;
pub(crate) mod carry;
pub mod context;
pub(crate) mod controller;
pub(crate) mod core;
pub mod execute;
pub(crate) mod memory;
pub mod queue;
pub(crate) mod reconcile;
pub(crate) mod recorder;
pub(crate) mod references;
pub(crate) mod related;
pub(crate) mod related_cache;
pub(crate) mod routing;
pub(crate) mod snapshot;
pub(crate) mod source;
pub(crate) mod start;
