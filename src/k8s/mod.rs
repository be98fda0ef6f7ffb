//! The Kubernetes client side of the plugin: connections, discovery, caches, leases.
//!
//! - [`client`]: connecting from a kubeconfig, the pinned context, the write guard.
//! - [`error`]: API errors classified by what fixes them (conflict, invalid, refused, unreachable).
//! - [`discovery`]: resource rules (`apiVersion` + plural) to kinds and scopes.
//! - [`informer`]: shared list+watch caches with owner, orphan, namespace and label indexes.
//! - [`lease`]: one dev loop per controller.
//! - [`election`]: leader election among `run` replicas (client-go's semantics).
//! - [`incluster`]: connecting from inside a Pod (ServiceAccount token, CA, namespace).
//! - [`manifests`]: applying plain documents (`--apply`).
//! - [`object`]: JSON metadata accessors.
//! - [`pace`]: the pace of API requests (adaptive window, 429 `Retry-After`, `--api-qps` cap).
//!
//! Selectors, quantities, name rules and content hashes are in the `kube-apimachinery` crate.
//!
//! Also [`FIELD_MANAGER`] and [`kube_error_message`], shared by every layer that writes.

/// The field manager of every write kubectl-meta makes (engine writes, `--apply`, leases).
pub const FIELD_MANAGER: &str = "kubectl-meta";

/// A short message for a kube error (the API server's message when there is one).
pub fn kube_error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

pub mod client;
pub(crate) mod discovery;
pub(crate) mod election;
pub(crate) mod error;
pub(crate) mod incluster;
pub(crate) mod informer;
pub mod lease;
pub(crate) mod manifests;
pub mod object;
pub mod pace;
