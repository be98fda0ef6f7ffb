//! The Kubernetes side: the client side the engine uses is the engine crate's
//! ([`kubectl_meta_engine::k8s`], re-exported here); what only the plugin's commands need:
//!
//! - [`election`]: leader election on a Lease (`kubectl meta run`).
//! - [`incluster`]: the in-cluster configuration (`kubectl meta run` in a Pod).

pub use kubectl_meta_engine::k8s::*;

pub(crate) mod election;
pub(crate) mod incluster;
