//! kubectl-meta: the local dev loop for Metacontroller-style Kubernetes controllers.
//!
//! Map of the crate:
//! - [`cli`]: clap definitions of every subcommand, plain data, no behaviour.
//! - [`commands`]: one module per subcommand, turning parsed arguments into work (the CLI edge).
//! - [`spec`]: controller definitions: types, loading from files, validation.
//! - [`k8s`]: Kubernetes client side: connection and context safety, discovery, shared informers
//!   with indexes, leases, object accessors, selectors, manifests.
//! - [`hooks`]: calling hooks: webhooks and local programs (exec).
//! - [`engine`]: the controller engine (pure plan + executor; Composite-, Decorator- and
//!   MapController; work queue).
//! - [`devloop`]: the dev loop around the engine: managed hook server, file watching, hot
//!   reload, replay, and the commands (resync, pause) a running `kubectl meta dev` takes.
//! - [`dryrun`]: `kubectl meta dryrun`: what a sync would do, read once, planned, rendered.
//! - [`incluster`]: `kubectl meta run`: the engine in a cluster, a Lease per controller, probes
//!   and metrics.
//! - [`deploy`]: `kubectl meta deploy`: the objects that run definitions in a cluster (RBAC
//!   computed from them).
//! - [`inspect`]: `kubectl meta inspect`: the ownership graph around one object, controller-aware.
//! - [`tui`]: the terminal UI of `kubectl meta dev`, driven by the engine's event stream.
//!
//! The API server behind `kubectl meta sandbox` and `dev --sandbox` is the `kube-sandbox` crate;
//! selectors, quantities and name rules are the `kube-apimachinery` crate.

pub mod cli;
pub mod commands;
pub mod deploy;
pub mod devloop;
pub mod dryrun;
pub mod engine;
pub mod hooks;
pub mod incluster;
pub mod inspect;
pub mod k8s;
pub mod spec;
pub mod tui;
