//! Hooks: calling them is the engine crate's ([`kubectl_meta_engine::hooks`], re-exported
//! here); running one is the plugin's:
//!
//! - [`server`]: a managed hook server (started, readiness-gated, restarted, stopped as a group),
//!   used by the dev loop, `kubectl meta test` and `definitions`.

pub use kubectl_meta_engine::hooks::*;

pub mod server;
