//! Integration tests of calling hooks: webhook auth, the managed hook server, file watching.
//!
//! One test binary per category (`cargo test --test hooks [MODULE::NAME]`): a change to the
//! library relinks a handful of test binaries, not one per file.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod server;
mod watch;
