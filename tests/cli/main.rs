//! Integration tests of the command line, run as users run it (the real binary, the sandbox, kubectl).
//!
//! One test binary per category (`cargo test --test cli [MODULE::NAME]`): a change to the
//! library relinks a handful of test binaries, not one per file.

#[path = "../common/mod.rs"]
mod common;

mod contract;
mod contract_doc;
mod dev;
mod devloop;
mod docs_run;
mod dryrun;
mod e2e;
mod events_schema;
mod flight;
mod hooktest;
mod init;
mod inspect;
mod issue37;
mod map;
mod observability;
mod project;
mod replay;
mod run;
mod sandbox;
mod selector;
mod shard;
mod simulate;
