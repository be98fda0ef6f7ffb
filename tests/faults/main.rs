//! Integration tests of failures produced for real: API outages and throttling, crashes, deadlines, hook faults, Leases, watches.
//!
//! One test binary per category (`cargo test --test faults [MODULE::NAME]`): a change to the
//! library relinks a handful of test binaries, not one per file.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod cli_outage;
mod crash;
mod deadline;
mod hooks;
mod lease;
mod outage;
mod watch;
