//! Integration tests of the TUI: whole-frame snapshots and a real terminal (tmux).
//!
//! One test binary per category (`cargo test --test tui [MODULE::NAME]`): a change to the
//! library relinks a handful of test binaries, not one per file.

#[path = "../common/mod.rs"]
mod common;

mod tmux;
mod views;
