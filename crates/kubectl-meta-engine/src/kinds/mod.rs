//! The controller kinds: each supplies the steps of the one reconcile skeleton
//! ([`crate::runtime::reconcile`]) that differ between kinds.
//!
//! - [`composite`]: CompositeController (claim -> customize -> hook -> plan -> execute, rollouts).
//! - [`decorator`]: DecoratorController (targets of several resources: labels, annotations,
//!   status and attachments; finalize when a target is deleted or stops matching).
//! - [`map`]: MapController (one map hook call per selected input, tombstones for inputs that
//!   are gone, engine-computed status).
//! - [`shared`]: what the kinds share to resolve a definition (hooks, child types) and scope
//!   checks.
//!
//! What they run on (start-up, routing, hook calls, the customize-hook related resources and
//! their cache) is [`crate::runtime`]; nothing there names a kind.

pub(crate) mod composite;
pub(crate) mod decorator;
pub(crate) mod map;
pub(crate) mod shared;
