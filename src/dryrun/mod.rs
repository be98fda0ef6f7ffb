//! `kubectl meta dryrun`: what one sync of each parent would do, as a diff, writing nothing.
//!
//! - [`live`]: live state read once (one list per resource; no informers, no watches, no
//!   Lease).
//! - [`compose`]: claims, customize and sync/finalize hook calls with the real requests, and
//!   the engine's pure planning pieces, giving the engine's typed [`crate::engine::plan::Plan`]
//!   per parent (per target, per map key); rolling updates through the engine's
//!   [`crate::engine::rollout_plan`], from ControllerRevisions read once.
//! - [`server`]: `--server`, the server-side dry run (`dryRun=All`) of creates and updates.
//! - [`render`]: entries per object, noise stripping, Secret masking, the unified YAML diff,
//!   the summary line and the JSON document.
//!
//! The only requests are discovery, lists, hook calls and (with `--server`) dry-run writes,
//! which the API server never persists.

pub mod compose;
pub mod live;
pub mod render;
pub mod server;
