//! kubectl-meta: the local dev loop for Metacontroller-style Kubernetes controllers.
//!
//! Map of the crate:
//! - [`cli`]: clap definitions of every subcommand, plain data, no behaviour.
//! - [`commands`]: one module per subcommand, turning parsed arguments into work (the CLI edge).
//! - [`k8s`]: Kubernetes building blocks shared by the server and (later) the engine: selectors.
//! - [`sandbox`]: the embedded Kubernetes-compatible API server (`kubectl meta sandbox`).

pub mod cli;
pub mod commands;
pub mod k8s;
pub mod sandbox;
