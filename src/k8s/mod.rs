//! Kubernetes building blocks shared by the sandbox server and the controller engine.
//!
//! - [`client`]: connecting from a kubeconfig, the pinned context, the write guard.
//! - [`discovery`]: resource rules (`apiVersion` + plural) to kinds and scopes.
//! - [`informer`]: shared list+watch caches with owner, orphan, namespace and label indexes.
//! - [`lease`]: one dev loop per controller.
//! - [`manifests`]: applying plain documents (`--apply`).
//! - [`object`]: JSON metadata accessors.
//! - [`quantity`]: resource quantities parsed and printed exactly as apimachinery does.
//! - [`selector`], [`names`]: apimachinery's selector syntax and name rules.

pub mod client;
pub mod discovery;
pub mod informer;
pub mod lease;
pub mod manifests;
pub mod names;
pub mod object;
pub mod quantity;
pub mod selector;
