//! The run loop: one `select!` over terminal input, engine events, Kubernetes Events (from the
//! watch of [`super::kube_events`]), whether writes are held (API server outage), answers to
//! commands, a render tick and a stop signal. On the tick, the work queues' depth is read (a
//! few atomic loads). Events are folded into the [`App`] as they come (a burst is
//! drained in one go); the frame is drawn on the tick only when something changed (or once a
//! second, for ages and countdowns), so at most [`FPS`] frames a second. Drawing reads only the
//! model, never the network; commands go to the dev loop on a channel and their answers come
//! back as events of the loop, so a slow resync never blocks the screen.

use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::input::{self, Intent};
use super::kube_events::KubeEvent;
use super::model::{App, ReplayPosition};
use super::ui;
use crate::devloop::control::{Command, Request};
use crate::engine::QueueStats;
use crate::engine::error::WritesHeld;

/// The most frames drawn per second.
pub const FPS: u64 = 30;
/// The most events folded in before input is looked at again.
const BATCH: usize = 4096;

/// Why the loop ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// Reading the terminal or drawing failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    /// The backend failed to draw.
    #[error("drawing: {0}")]
    Draw(String),
    /// The UI task ended abnormally (a panic: the terminal was restored by the panic hook).
    #[error("{0}")]
    Task(String),
}

/// What the loop shows besides the engine's events (each optional).
#[derive(Default)]
pub struct Feeds {
    /// Why writes are held (`None`: they are not): the engine's
    /// [`writes_watch`](crate::engine::EngineContext::writes_watch).
    pub held: Option<watch::Receiver<Option<WritesHeld>>>,
    /// Kubernetes Events ([`super::kube_events::watch`]).
    pub kube_events: Option<mpsc::Receiver<KubeEvent>>,
    /// Reads the work queues' depth (on the render tick).
    pub queue: Option<fn() -> QueueStats>,
    /// `kubectl meta replay`: where the timeline is, and each new timeline's events.
    pub replay: Option<mpsc::Receiver<ReplayFrame>>,
}

/// What a replay tells the UI (`kubectl meta replay`'s TUI).
#[derive(Debug)]
pub enum ReplayFrame {
    /// Where the timeline is now.
    Position(ReplayPosition),
    /// The timeline starts again from its first state (a step back): the model forgets what
    /// it showed and reads these events instead (subscribed before the new engine started).
    Restart(crate::engine::events::EventReceiver),
}

/// The next frame of a replay, or never when there is none (`None`: it ended).
async fn next_replay_frame(rx: &mut Option<mpsc::Receiver<ReplayFrame>>) -> Option<ReplayFrame> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// The next Kubernetes Event, or never when there is no watch (`None`: it ended).
async fn next_kube_event(rx: &mut Option<mpsc::Receiver<KubeEvent>>) -> Option<KubeEvent> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the held reason changed (false: the sender is gone), never without a watch.
async fn held_changed(rx: &mut Option<watch::Receiver<Option<WritesHeld>>>) -> bool {
    match rx {
        Some(r) => r.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// In debug builds only, the key (`KUBECTL_META_TUI_PANIC_KEY=X`) that makes the UI panic, so
/// that a real-terminal test can check the panic path restores the terminal.
fn panic_key() -> Option<char> {
    if cfg!(debug_assertions) {
        std::env::var("KUBECTL_META_TUI_PANIC_KEY")
            .ok()
            .and_then(|k| k.chars().next())
    } else {
        None
    }
}

/// What the loop talks to.
pub struct Wiring<S> {
    /// Terminal input events.
    pub input: S,
    /// Engine events.
    pub events: crate::engine::events::EventReceiver,
    /// Commands to the dev loop (resync, pause, replay).
    pub commands: mpsc::Sender<Request>,
    /// Ends the loop (the dev loop is stopping).
    pub stop: CancellationToken,
    /// After each frame: the number of events the frame shows (benches and tests wait on it).
    pub frames: Option<watch::Sender<u64>>,
    /// Other sources.
    pub feeds: Feeds,
}

/// Send `command` to the dev loop; its answer comes back on `answers`.
fn send(
    commands: &mpsc::Sender<Request>,
    command: Command,
    answers: &mpsc::UnboundedSender<String>,
) -> Option<String> {
    let (reply, rx) = oneshot::channel();
    match commands.try_send(Request { command, reply }) {
        Ok(()) => {
            let answers = answers.clone();
            tokio::spawn(async move {
                if let Ok(a) = rx.await {
                    let _ = answers.send(a.unwrap_or_else(|e| format!("error: {e}")));
                }
            });
            None
        }
        Err(mpsc::error::TrySendError::Full(_)) => {
            Some("the dev loop is busy; try again in a moment".into())
        }
        Err(mpsc::error::TrySendError::Closed(_)) => Some("the dev loop is stopping".into()),
    }
}

/// Run until `q`/`ctrl-c`, the input ends, or `stop` fires.
pub async fn run<B, S>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    wiring: Wiring<S>,
) -> Result<(), LoopError>
where
    B: Backend,
    S: Stream<Item = std::io::Result<crossterm::event::Event>> + Unpin,
{
    let Wiring {
        mut input,
        mut events,
        commands,
        stop,
        frames,
        feeds,
    } = wiring;
    let Feeds {
        mut held,
        mut kube_events,
        queue,
        mut replay,
    } = feeds;
    if let Some(h) = &mut held {
        let reason = h.borrow_and_update().clone();
        app.set_held(reason, Instant::now());
    }
    let panic_key = panic_key();
    let (answers_tx, mut answers_rx) = mpsc::unbounded_channel::<String>();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / FPS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut events_open = true;
    let mut last_frame = Instant::now();
    let mut input_open = true;
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return Ok(()),
            ev = input.next(), if input_open => match ev {
                Some(Ok(ev)) if panic_key.is_some_and(|k| is_char(&ev, k)) => {
                    panic!("KUBECTL_META_TUI_PANIC_KEY pressed: a deliberate panic (debug builds only)")
                }
                Some(Ok(ev)) => match input::handle_event(app, &ev) {
                    Intent::Quit => return Ok(()),
                    Intent::Send(c) => {
                        if let Some(why) = send(&commands, c, &answers_tx) {
                            app.ui.flash = Some(why);
                        }
                    }
                    Intent::Nothing => {}
                },
                Some(Err(e)) => return Err(e.into()),
                None => input_open = false,
            },
            // Before the events: a restart swaps the receiver before its events are read.
            frame = next_replay_frame(&mut replay) => match frame {
                Some(ReplayFrame::Position(p)) => {
                    app.replay = Some(p);
                    app.dirty = true;
                }
                Some(ReplayFrame::Restart(rx)) => {
                    app.restart();
                    events = rx;
                    events_open = true;
                }
                None => replay = None,
            },
            Some(a) = answers_rx.recv() => {
                app.ui.flash = Some(a);
                app.dirty = true;
            }
            ev = events.recv(), if events_open => {
                let now = Instant::now();
                match ev {
                    Ok(e) => {
                        app.apply(&e, now);
                        for _ in 0..BATCH {
                            match events.try_recv() {
                                Ok(e) => app.apply(&e, now),
                                Err(broadcast::error::TryRecvError::Lagged(n)) => lagged(app, n),
                                Err(_) => break,
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => lagged(app, n),
                    Err(broadcast::error::RecvError::Closed) => events_open = false,
                }
            }
            ev = next_kube_event(&mut kube_events) => match ev {
                Some(ev) => {
                    app.apply_kube_event(ev);
                    if let Some(rx) = &mut kube_events {
                        for _ in 0..BATCH {
                            match rx.try_recv() {
                                Ok(ev) => app.apply_kube_event(ev),
                                Err(_) => break,
                            }
                        }
                    }
                }
                None => kube_events = None,
            },
            open = held_changed(&mut held) => {
                match held.as_mut().filter(|_| open) {
                    Some(h) => {
                        let reason = h.borrow_and_update().clone();
                        app.set_held(reason, Instant::now());
                    }
                    None => held = None,
                }
            }
            _ = tick.tick() => {
                let now = Instant::now();
                if let Some(q) = queue {
                    app.set_queue(q());
                }
                if app.dirty || now.duration_since(last_frame) >= Duration::from_secs(1) {
                    terminal
                        .draw(|f| ui::draw(f, app, now))
                        .map_err(|e| LoopError::Draw(e.to_string()))?;
                    app.dirty = false;
                    last_frame = now;
                    if let Some(f) = &frames {
                        let _ = f.send(app.applied);
                    }
                }
            }
        }
    }
}

/// Whether `ev` is a press of key `c`.
fn is_char(ev: &crossterm::event::Event, c: char) -> bool {
    matches!(ev, crossterm::event::Event::Key(k) if k.code == crossterm::event::KeyCode::Char(c))
}

fn lagged(app: &mut App, n: u64) {
    app.ui.flash = Some(format!(
        "the screen fell {n} events behind the engine; some details may be stale"
    ));
    app.dirty = true;
}
