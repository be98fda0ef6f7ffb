//! The sandbox's integration tests (one test binary: `cargo test -p kube-sandbox --test sandbox
//! [MODULE::NAME]`), each module a concern: the API through kube-rs (`api_*`), authentication and
//! RBAC, CRD validation and its fidelity cases, kubectl end to end, workloads against captured
//! real statuses, webhooks, the builder. The shared suites (`conformance.rs`, `fidelity.rs`) stay
//! binaries of their own: each runs a whole external suite and wants the machine to itself.

#[path = "../common/mod.rs"]
mod common;

mod api_bad_input;
mod api_crd;
mod api_gc;
mod api_objects;
mod api_persistence;
mod api_watch;
mod authn;
mod builder;
mod crd_lists;
mod crd_validation_fidelity;
mod kubectl;
mod kubectl_validation;
mod pod_proxy;
mod rbac;
mod sandbox_workloads;
mod shard_selector;
mod smoke;
mod webhooks;
mod workloads_lifecycle;
