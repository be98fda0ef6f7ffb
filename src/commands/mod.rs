//! Subcommand implementations: the application edge, where errors become `anyhow` reports.

pub mod completion;
pub mod definitions;
pub mod deploy;
pub mod dev;
pub mod dryrun;
pub mod engine_start;
pub mod exit;
pub mod flight;
pub mod init;
pub mod inspect;
pub mod interrupts;
pub mod project;
pub mod replay;
pub mod run;
pub mod sandbox;
pub mod test;
pub mod version;

use std::io::Write;

/// Writes `bytes` to stdout and flushes. A reader that went away (`| head`) is not an error.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}
