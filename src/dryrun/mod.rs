//! `kubectl meta dryrun`: what one sync of each parent would do, as a diff, writing nothing.
//!
//! - [`compose`]: the engine crate's plan-once driver ([`crate::engine::plan_once`]): each
//!   selected parent (target, map key) planned by the engine's own
//!   controller kinds built on live state read once ([`crate::engine::LiveReader`]), through the
//!   reconcile skeleton's steps up to the plan: the same observe, hook requests, answer
//!   decoding and pure planning as `dev`, giving the typed plan `dev` would carry out.
//! - [`server`]: `--server`, the server-side dry run (`dryRun=All`) of creates and updates.
//! - [`render`]: entries per object, noise stripping, Secret masking, the unified YAML diff,
//!   the summary line and the JSON document.
//! - [`simulate`]: `--simulate`, every sync until convergence on a copy of the live objects in
//!   an in-process sandbox.
//!
//! The only requests are discovery, lists, hook calls and (with `--server`) dry-run writes,
//! which the API server never persists.

pub(crate) use crate::engine::plan_once as compose;
pub(crate) mod render;
pub(crate) mod server;
pub(crate) mod simulate;
