//! The controller kinds: each supplies the steps of the one reconcile skeleton
//! ([`crate::engine::runtime::reconcile`]) that differ between kinds.
//!
//! - [`composite`]: CompositeController (claim -> customize -> hook -> plan -> execute, rollouts).
//! - [`decorator`]: DecoratorController (targets of several resources: labels, annotations,
//!   status and attachments; finalize when a target is deleted or stops matching).
//! - [`map`]: MapController (one map hook call per selected input, tombstones for inputs that
//!   are gone, engine-computed status).
//! - [`shared`]: what the kinds share to start (resolving resources and hooks, waiting for the
//!   caches) and scope checks.
//! - [`related`], [`related_cache`]: customize-hook related resources and their cache.

pub(crate) mod composite;
pub(crate) mod decorator;
pub(crate) mod map;
pub(crate) mod related;
pub(crate) mod related_cache;
pub(crate) mod shared;
