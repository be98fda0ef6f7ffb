//! `kubectl meta replay FILE`: a flight recording's window run again, offline.
//!
//! 1. The file is read and checked ([`Window::parse`]): an unknown apiVersion or kind,
//!    truncated JSON or a recording with no events is an error naming the file, exit 2, before
//!    anything starts.
//! 2. The definitions: the recorded ones (the recording's `controllers`), or `-f`; with
//!    `--live-hooks`, `-f`, else the project's, else the recorded ones.
//! 3. An in-process sandbox (no socket, no cluster) is started and the engine's replay driver
//!    ([`Replayer`]) loads the window's first state into it and runs the engine there, applying
//!    the other writers' recorded writes between the syncs. The events print as `dev` prints
//!    them (`-o json`: the same NDJSON).
//! 4. It ends when every write was applied and the engine is idle, or at `--timeout`; the
//!    summary (and the recorded writes that did not apply) go to stderr.
//!
//! On a terminal (without `--no-tui`, `-o json` or the recording on stdin) the timeline opens
//! in `dev`'s TUI instead, one recorded step at a time ([`tui`]).

mod session;
mod tui;

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use kube_sandbox::Sandbox;

use self::session::{classify, start_sandbox, summary};
use super::engine_start::{EventLog, LogStyle};
use super::exit::{Class, Classify, fail};
use crate::cli::dev::OutputArg;
use crate::cli::replay::ReplayArgs;
use crate::engine::events::EventBus;
use crate::engine::flight::replay::Window;
use crate::engine::replayer::{Outcome, ReplayOptions, Replayer};
use crate::spec::{self, ControllerDef, Source};

/// Run `kubectl meta replay`: the exit code (0 replayed cleanly, 1 a hot loop or a failed
/// sync, 4 timed out) or a classified error.
pub async fn run(args: ReplayArgs) -> Result<u8> {
    let shown = if args.file.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    };
    let bytes = read(&args.file).map_err(|e| fail(Class::Usage, format!("{shown}: {e}")))?;
    let window = Window::parse(&bytes).map_err(|e| fail(Class::Usage, format!("{shown}: {e}")))?;
    let defs = definitions(&args, &window, &shown)?;
    // The TUI on a terminal (keys come from stdin: not with the recording on stdin).
    let tui = !args.no_tui
        && args.output == OutputArg::Human
        && args.file.as_os_str() != "-"
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::io::IsTerminal::is_terminal(&std::io::stdin());
    let replayer = Replayer::new(
        window,
        defs,
        ReplayOptions {
            live_hooks: args.live_hooks,
            hook_base_url: args.hook_base_url.clone(),
            stepped: tui,
        },
    );
    if tui {
        return tui::run(&args, replayer, format!("{shown} · offline")).await;
    }
    let sandbox = start_sandbox().await?;
    let result = headless(&args, &replayer, &sandbox).await;
    sandbox.shutdown().await;
    result
}

fn read(file: &Path) -> std::io::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::stdin().read_to_end(&mut b)?;
        Ok(b)
    } else {
        std::fs::read(file)
    }
}

/// The definitions to run (see the module header).
fn definitions(args: &ReplayArgs, window: &Window, shown: &str) -> Result<Vec<ControllerDef>> {
    if !args.files.is_empty() {
        return Ok(spec::load_paths(&args.files)
            .class(Class::Usage)?
            .controllers);
    }
    if args.live_hooks
        && let Some(p) = super::project::discover()?
    {
        let files: Vec<_> = p.controllers.clone();
        if !files.is_empty() {
            return Ok(spec::load_paths(&files).class(Class::Usage)?.controllers);
        }
    }
    if window.controllers.is_empty() {
        return Err(fail(
            Class::Usage,
            format!(
                "{shown}: the recording carries no controller definitions (`controllers`: recorded by an older kubectl meta); give them with -f"
            ),
        ));
    }
    window
        .controllers
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            spec::parse_controller(raw, Source::file(shown, i + 1, None))
                .map_err(|e| fail(Class::Usage, format!("{shown}: recorded definition: {e}")))
        })
        .collect()
}

/// Run the replay to its end, printing the event log; the exit code.
async fn headless(args: &ReplayArgs, replayer: &Replayer, sandbox: &Sandbox) -> Result<u8> {
    let bus = EventBus::new();
    let log = EventLog::spawn(
        LogStyle {
            output: args.output,
            color: args.output == OutputArg::Human
                && crate::view::color::color_enabled(std::io::IsTerminal::is_terminal(
                    &std::io::stdout(),
                )),
            verbose: false,
        },
        &bus,
        false,
    );
    let client = sandbox.in_process_client();
    let mut session = replayer.start(&client, &bus).await.map_err(classify)?;
    let outcome = session.run(Duration::from_secs(args.timeout)).await;
    let report = session.shutdown().await;
    log.stop().await;
    let outcome = outcome.map_err(classify)?;
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    eprintln!("{}", summary(&report));
    if outcome == Outcome::TimedOut {
        eprintln!(
            "--timeout {}s ran out with {} recorded write(s) not applied",
            args.timeout, report.not_applied
        );
        return Ok(Class::NotConverged.code());
    }
    Ok(u8::from(report.hot_loops > 0 || report.failed > 0))
}
