//! The views: everything that turns engine events and plans into what a person reads, in one
//! wing. [`notice`] words each event once (the log and the TUI both take their words from it),
//! [`log`] is the headless event log of `dev`/`run`/`test` (human lines or NDJSON), [`tui`] is
//! the terminal UI of `dev`, and [`color`] decides once whether to color.

pub mod color;
pub mod log;
pub mod notice;
pub mod tui;
