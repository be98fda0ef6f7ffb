//! The terminal UI of `kubectl meta dev` (the default when stdout is a terminal; `--no-tui`,
//! `-o json`, `--once` and a non-terminal stdout print the event log instead).
//!
//! Built on the engine's event stream, never by polling: [`model`] is the pure model, which
//! [`reducer`] updates from each engine event and from which [`tree`] derives a parent's tree
//! (from the engine's per-object plans); one file per view ([`status_bar`], [`parent_list`], [`parent_tree`], [`detail`],
//! [`help`]) composed by [`ui`]; [`input`] maps keys to UI changes and dev loop commands (the
//! same [`Command`]s as the log mode's keyboard and the control socket); [`event_loop`] selects
//! over input, events and a render tick; [`kube_events`] watches the parents' Kubernetes
//! Events; [`terminal`] restores the terminal on every exit (a panic included: the dev loop
//! then stops, as after `q`).

pub(crate) mod detail;
pub mod event_loop;
pub(crate) mod help;
pub mod input;
pub mod kube_events;
pub mod model;
pub(crate) mod parent_list;
pub(crate) mod parent_tree;
pub mod reducer;
pub(crate) mod status_bar;
pub(crate) mod terminal;
pub(crate) mod theme;
pub mod tree;
pub mod ui;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::devloop::control::Request;

/// Sends `true` when dropped.
struct Done(watch::Sender<bool>);

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

/// A running TUI (a task of its own).
pub struct Tui {
    stop: CancellationToken,
    done: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<(), event_loop::LoopError>>,
}

impl Tui {
    /// Take over the terminal and run the UI on `events` (subscribe before the engine starts,
    /// so the controllers' start is seen) and `feeds`, sending commands on `commands`.
    /// `context` is the status bar's context and namespace; `color` false for `NO_COLOR`.
    pub fn spawn(
        events: crate::engine::events::EventReceiver,
        feeds: event_loop::Feeds,
        commands: mpsc::Sender<Request>,
        context: String,
        color: bool,
    ) -> Tui {
        let stop = CancellationToken::new();
        let (done_tx, done) = watch::channel(false);
        let token = stop.clone();
        let task = tokio::spawn(async move {
            // Says "done" however the task ends, a panic included (then the dev loop stops
            // rather than running on without a screen).
            let _done = Done(done_tx);
            async {
                let (mut terminal, guard) = terminal::enter()?;
                let mut app = model::App::new(context, color);
                let wiring = event_loop::Wiring {
                    input: crossterm::event::EventStream::new(),
                    events,
                    commands,
                    stop: token,
                    frames: None,
                    feeds,
                };
                let r = event_loop::run(&mut terminal, &mut app, wiring).await;
                drop(guard);
                r
            }
            .await
        });
        Tui { stop, done, task }
    }

    /// Resolves when the user quit (or the UI failed).
    pub fn quit(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut done = self.done.clone();
        async move {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Stop the UI (if still running), restore the terminal, and return how it ended.
    pub async fn finish(self) -> Result<(), event_loop::LoopError> {
        self.stop.cancel();
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(event_loop::LoopError::Task(format!(
                "the UI task failed: {e}"
            ))),
        }
    }
}
