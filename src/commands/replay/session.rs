//! What the headless replay and the replay TUI share: the in-process sandbox a timeline runs
//! on, the exit class of a replay error, and the one-line summary.

use anyhow::Result;
use kube_sandbox::{Sandbox, SandboxConfig};

use crate::commands::exit::{Class, fail};
use crate::engine::replayer::{ReplayError, ReplayReport};

/// An in-process sandbox (no socket).
pub(super) async fn start_sandbox() -> Result<Sandbox> {
    Sandbox::start(SandboxConfig::ephemeral())
        .await
        .map_err(|e| {
            fail(
                Class::Internal,
                format!("starting the in-process sandbox: {e}"),
            )
        })
}

/// A replay error as the command line classes it.
pub(super) fn classify(e: ReplayError) -> anyhow::Error {
    let class = if e.is_bad_input() {
        Class::Usage
    } else {
        Class::Internal
    };
    fail(class, e.to_string())
}

/// The one-line summary of a replay.
pub(super) fn summary(r: &ReplayReport) -> String {
    let mut s = format!(
        "replayed {} recorded event(s): {} other writer write(s) applied",
        r.events, r.applied
    );
    if let Some((used, total, beyond)) = r.answers {
        s.push_str(&format!(
            "; {used} of {total} recorded hook answer(s) served"
        ));
        if beyond > 0 {
            s.push_str(&format!(
                " ({beyond} more call(s) than recorded got the last answer again)"
            ));
        }
    }
    s.push_str(&format!(
        "; {} hot loop(s), {} failed sync(s)",
        r.hot_loops, r.failed
    ));
    s
}
