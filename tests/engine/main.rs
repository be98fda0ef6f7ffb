//! Integration tests of the engine through its library surface against a sandbox (planner, children, rollouts, kinds).
//!
//! One test binary per category (`cargo test --test engine [MODULE::NAME]`): a change to the
//! library relinks a handful of test binaries, not one per file.

#[path = "../common/mod.rs"]
mod common;

mod children;
mod convergence;
mod decorator;
mod flight;
mod hooks;
mod lifecycle;
mod map;
mod perturb;
mod planner;
mod rollout;
