//! Pure planning: observed state + a hook's answer -> typed actions. No tokio, no kube client,
//! no I/O: `dev` executes what these functions return, `dryrun` prints it, the TUI shows it, and
//! the unit tests pin every rule.
//!
//! - [`planner`]: the entry point per kind ([`planner::plan_composite`],
//!   [`planner::plan_decorator`], [`planner::plan_map_key`]) returning a [`planner::SyncPlan`].
//! - [`writes`]: the pieces of a plan ([`writes::Writes`]: child creates, updates, deletes,
//!   adoptions, releases, and the parent's status, finalizer and metadata writes).
//! - [`apply`]: the three-way merge with the last-applied annotation; [`server_view`]: the
//!   desired object as the API server will store it, so the merge converges.
//! - [`child`]: naming children; [`ownership`]: ControllerRef claims.
//! - [`hookapi`]: the hook wire format (request maps, v1/v2 response decoding).
//! - [`rollout`]: revisions and status checks; [`rollout_plan`]: the rolling-update decision.
//! - [`decorator_rule`]: which objects a DecoratorController selects.
//! - [`map_plan`]: MapController's pure parts (keys, outputs, tombstones, status).
//! - [`hotloop`]: the hot-loop guard's decision; [`replay`]: comparing two answers;
//!   [`answer`]: what an answer means to the engine, for `kubectl meta test`.
//! - [`kstatus`]: whether a child reached what its spec asks (Pods Ready, workloads caught up).

pub mod answer;
pub mod apply;
pub mod child;
pub(crate) mod decorator_rule;
pub mod hookapi;
pub mod hotloop;
pub mod kstatus;
pub mod map_plan;
pub mod ownership;
pub mod planner;
pub mod replay;
pub mod rollout;
pub(crate) mod rollout_plan;
pub(crate) mod server_view;
pub mod writes;
