//! CustomResourceDefinition logic for the embedded API server, one concept per file:
//! errors.rs (field errors, Go value rendering), structural.rs ([`Schema`] and validation),
//! prune.rs (pruning, defaulting), build.rs (a schema from `openAPIV3Schema`), definition.rs
//! (the CRD: validation, approval, defaults, status).
//!
//! This module owns everything about a CRD that involves neither storage nor HTTP:
//!
//! - [`Schema`]: the structural schema of one CRD version, built once from its `openAPIV3Schema` and reused
//!   for every request. It prunes unknown fields ([`Schema::prune`]), fills in `default:` values
//!   ([`Schema::apply_defaults`]) and validates custom resources ([`Schema::validate`]) the way
//!   kube-apiserver does. The server runs them in that order: prune, default, validate.
//! - [`parse_crd`]: validation of an `apiextensions.k8s.io/v1` CustomResourceDefinition with
//!   apiserver-style field errors, returning the [`CrdInfo`] the server routes and serves with.
//! - [`apply_crd_defaults`] and [`crd_status`]: the fields the apiserver and its naming and establishing
//!   controllers fill in on a CRD.
//!
//! Error paths and messages follow kube-apiserver 1.36 (apiextensions-apiserver and kube-openapi).
//! `pattern`, `format` (see [`crate::formats`]), `allOf`/`anyOf`/`oneOf`/`not` and the CEL rules of
//! `x-kubernetes-validations` (see [`crate::cel_rules`]) are checked, and so is the uniqueness of
//! `x-kubernetes-list-type: set|map` items. Known gaps: `default:` values are not validated against their own schema, the
//! metadata of embedded resources is not coerced, and only the `None` conversion strategy is accepted.

mod build;
mod definition;
mod errors;
mod prune;
mod structural;
#[cfg(test)]
mod tests;

pub(crate) use build::*;
pub(crate) use definition::*;
pub(crate) use errors::*;
pub(crate) use prune::*;
pub(crate) use structural::*;
