//! Shared helpers for the plugin's integration tests: the sandbox helpers of
//! `crates/kube-sandbox/tests/common` (start a sandbox in-process, kube clients, the real
//! `kubectl`, waiting on conditions), and the plugin's own: running the CLI, the engine, faults
//! and the event schema.
#![allow(dead_code, unused_imports)]

#[path = "../../crates/kube-sandbox/tests/common/mod.rs"]
mod sandbox;

pub use sandbox::*;

pub mod cli;
pub mod engine;
pub mod external;
pub mod faults;
pub mod hook_build_env;
pub mod replay;
pub mod schema;
pub mod website;
