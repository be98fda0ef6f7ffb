//! `kubectl meta replay FILE` on a terminal: the recording's timeline in `dev`'s TUI, one
//! recorded step at a time.
//!
//! A step is one recorded sync (or finalize) call: the engine runs stepped
//! ([`ReplayOptions::stepped`]: one worker per controller, each sync waiting for its turn), so
//! `n` lets the next sync through and the replay runs until the one after waits (the other
//! writers' writes due by then applied). `b` goes back: the timeline is built again in a fresh
//! in-process sandbox, stepped one step at a time from its first state up to the step before
//! (the same path as stepping forward, so the same state), and the UI forgets what it showed
//! and reads the new timeline's events. The status bar shows `step N/M` (M: the recorded
//! steps; a replay may make more).

use std::time::Duration;

use anyhow::Result;
use kube_sandbox::Sandbox;
use tokio::sync::mpsc;

use super::session::{classify, start_sandbox, summary};
use crate::cli::replay::ReplayArgs;
use crate::commands::exit::Class;
use crate::devloop::control::{Command, Request};
use crate::engine::events::EventBus;
use crate::engine::replayer::{Outcome, ReplayReport, Replayer, Session};
use crate::view::tui::Tui;
use crate::view::tui::event_loop::{Feeds, ReplayFrame};
use crate::view::tui::model::ReplayPosition;

/// A timeline under way: its sandbox and its session.
struct Timeline {
    sandbox: Sandbox,
    session: Session,
}

impl Timeline {
    /// A fresh sandbox with the first state, the engine started stepped on it, its events on
    /// `bus`, driven until the first sync waits.
    async fn start(
        replayer: &Replayer,
        bus: &EventBus,
        step: Duration,
    ) -> Result<(Timeline, Outcome)> {
        let sandbox = start_sandbox().await?;
        let client = sandbox.in_process_client();
        let mut session = match replayer.start(&client, bus).await {
            Ok(s) => s,
            Err(e) => {
                sandbox.shutdown().await;
                return Err(classify(e));
            }
        };
        let outcome = session.advance(0, step).await.map_err(classify)?;
        Ok((Timeline { sandbox, session }, outcome))
    }

    async fn shutdown(self) -> ReplayReport {
        let report = self.session.shutdown().await;
        self.sandbox.shutdown().await;
        report
    }
}

fn state(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Waiting => "waiting",
        Outcome::Finished => "finished",
        Outcome::TimedOut => "timed out",
    }
}

/// Run the replay in the TUI until `q`; the exit code (as headless: 1 when what was replayed
/// held a hot loop or a failed sync).
pub async fn run(args: &ReplayArgs, replayer: Replayer, context: String) -> Result<u8> {
    let total = replayer.steps();
    // Each step (and each step of a rebuild) within this long.
    let step = Duration::from_secs(args.timeout);
    let (cmd_tx, mut cmd_rx) = mpsc::channel::<Request>(16);
    let (frames_tx, frames_rx) = mpsc::channel::<ReplayFrame>(16);
    let bus = EventBus::new();
    let feeds = Feeds {
        replay: Some(frames_rx),
        ..Feeds::default()
    };
    let color = crate::view::color::color_enabled(true);
    let position = |step: usize, state: &str| {
        ReplayFrame::Position(ReplayPosition {
            step,
            total,
            state: state.to_string(),
        })
    };
    let tui = Tui::spawn(bus.subscribe(), feeds, cmd_tx, context, color);
    let _ = frames_tx.send(position(0, "starting")).await;
    let quit = tui.quit();
    tokio::pin!(quit);
    let (first, outcome) = match Timeline::start(&replayer, &bus, step).await {
        Ok(t) => t,
        Err(e) => {
            let _ = tui.finish().await;
            return Err(e);
        }
    };
    let _ = frames_tx
        .send(position(first.session.position(), state(outcome)))
        .await;
    let mut current = Some(first);
    let mut failure = None;
    while let Some(timeline) = current.as_mut() {
        let req = tokio::select! {
            () = &mut quit => break,
            req = cmd_rx.recv() => match req {
                Some(r) => r,
                None => break,
            },
        };
        let answer = match req.command {
            Command::Step { by } if by >= 0 => {
                let by = usize::try_from(by).unwrap_or(usize::MAX);
                let _ = frames_tx
                    .send(position(timeline.session.position(), "stepping"))
                    .await;
                match timeline.session.advance(by, step).await {
                    Ok(o) => {
                        let at = timeline.session.position();
                        let _ = frames_tx.send(position(at, state(o))).await;
                        Ok(format!("step {at}/{total}: {}", state(o)))
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Command::Step { by } => {
                let to = timeline
                    .session
                    .position()
                    .saturating_sub(usize::try_from(by.unsigned_abs()).unwrap_or(usize::MAX));
                let _ = frames_tx.send(position(to, "rebuilding")).await;
                if let Some(old) = current.take() {
                    old.shutdown().await;
                }
                // A new bus per timeline: the UI reads only the new one's events.
                let fresh = EventBus::new();
                let _ = frames_tx
                    .send(ReplayFrame::Restart(fresh.subscribe()))
                    .await;
                let (mut timeline, mut o) = match Timeline::start(&replayer, &fresh, step).await {
                    Ok(t) => t,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                };
                while timeline.session.position() < to && o == Outcome::Waiting {
                    o = match timeline.session.advance(1, step).await {
                        Ok(o) => o,
                        Err(e) => {
                            failure = Some(classify(e));
                            break;
                        }
                    };
                }
                let at = timeline.session.position();
                current = Some(timeline);
                let _ = frames_tx.send(position(at, state(o))).await;
                Ok(format!("back to step {at}/{total}: {}", state(o)))
            }
            _ => Err("a replay only steps: n forward, b back".to_string()),
        };
        let _ = req.reply.send(answer);
        if failure.is_some() {
            break;
        }
    }
    let ui = tui.finish().await;
    let report = match current {
        Some(t) => t.shutdown().await,
        None => ReplayReport::default(),
    };
    if let Some(e) = failure {
        return Err(e);
    }
    ui.map_err(|e| {
        crate::commands::exit::fail(Class::Internal, format!("the replay's terminal UI: {e}"))
    })?;
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "{} (up to step {} of {total} recorded)",
        summary(&report),
        report.steps
    );
    Ok(u8::from(report.hot_loops > 0 || report.failed > 0))
}
