//! The Kubernetes client side of the engine: connections, discovery, caches, leases.
//!
//! - [`client`]: connecting from a kubeconfig, the pinned context, the write guard.
//! - [`error`]: API errors classified by what fixes them (conflict, invalid, refused, unreachable).
//! - [`discovery`]: resource rules (`apiVersion` + plural) to kinds and scopes.
//! - [`informer`]: shared list+watch caches with owner, orphan, namespace and label indexes.
//! - [`lease`]: one dev loop per controller.
//! - [`manifests`]: applying plain manifests (CRDs, namespaces, objects) with server-side
//!   apply, CRDs first, waiting for new kinds to be served (`dev --apply`, `deploy --apply`,
//!   the e2e runner).
//! - [`object`]: JSON metadata accessors.
//! - [`pace`]: the pace of API requests (adaptive window, 429 `Retry-After`, `--api-qps` cap).
//!
//! Leader election and the in-cluster connection are the plugin's
//! (`kubectl-meta`'s `k8s` module).
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
pub mod discovery;
pub mod error;
pub(crate) mod informer;
pub use informer::EVENT_CAPACITY;
pub mod lease;
pub mod manifests;
pub mod object;
pub mod pace;
pub mod shard_query;
