//! A managed hook server: the user's webhook server run, watched and restarted by kubectl-meta.
//!
//! The server command (e.g. `python3 server.py --port 8081`) runs through `sh -c` in its own
//! process group, with stdin closed and `PYTHONUNBUFFERED=1` set (unless already set) so that a
//! Python server's output is not held back in a pipe buffer. Each line it writes is sent to the
//! caller's channel and kept (the last [`TAIL_KEEP`] lines of the current run) for error messages.
//!
//! Readiness is a TCP connect or an HTTP GET (any 2xx), polled every [`POLL_INTERVAL`] until
//! the ready timeout; the process exiting first is reported at once, with its exit status and
//! output, instead of after the timeout. Before starting, the readiness address must not accept
//! connections already: another process listening there would make the check pass for the wrong
//! server.
//!
//! Restart correctness (the lessons of watchexec and friends):
//! - the whole process group is signalled, so children of the server (and a `sh` wrapper) go too;
//! - stopping is SIGTERM to the group, a wait for the exit bounded by the grace period, then
//!   SIGKILL to the group and a wait for the exit; whatever is left in the group when its leader
//!   exits is killed;
//! - before the new process starts, the readiness port must stop accepting connections (bounded
//!   by [`PORT_FREE_TIMEOUT`]), so the new server can bind it and the readiness check cannot be
//!   answered by the old one.
//!
//! One task per process owns the child: it is the only one that reaps it, and it sends the
//! signals asked for while the child is known not to have been reaped, so an unrelated process
//! group is never hit. A server that exits on its own (after being ready) moves the state to
//! [`ServerState::Exited`], so callers waiting in [`ManagedServer::wait_ready`] fail fast. When the
//! last handle is dropped the group is killed (SIGKILL, synchronously) as a last resort.
//!
//! Crash recovery ([`ManagedServer::supervise`]): a server that exits on its own after having
//! been ready is started again after a backoff (from [`RESTART_MIN`], doubling up to
//! [`RESTART_MAX`], back to the minimum once it stayed ready for [`RESTART_RESET`]), announced on
//! the output channel with its exit status and last output lines. Meanwhile callers in
//! [`ManagedServer::wait_ready`] wait for the restart instead of failing. A start that fails
//! after a file change (a syntax error) is not retried: the next save tries again.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::fmt_duration;

/// Default for [`ServerConfig::ready_timeout`].
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Default for [`ServerConfig::stop_grace`].
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);

/// How often readiness (and a freed port) is checked.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How long a restart waits for the old server's port to stop accepting connections.
pub const PORT_FREE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many output lines of the current run are kept for [`ManagedServer::output_tail`].
pub const TAIL_KEEP: usize = 200;

/// How many output lines error messages quote.
const ERROR_TAIL_LINES: usize = 20;

/// Longest output line passed on; longer ones are split.
const MAX_LINE_BYTES: usize = 16 << 10;

/// Limit for one readiness probe (connect, or the whole HTTP exchange).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a SIGKILLed server may take to be reaped before `stop` gives up waiting.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// First delay before a crashed server is started again.
pub const RESTART_MIN: Duration = Duration::from_millis(500);

/// Longest delay between restarts of a server that keeps crashing.
pub const RESTART_MAX: Duration = Duration::from_secs(30);

/// A server ready for this long is healthy again: the next crash restarts after [`RESTART_MIN`].
pub const RESTART_RESET: Duration = Duration::from_secs(60);

/// How many output lines a crash announcement quotes.
const CRASH_TAIL_LINES: usize = 10;

/// How long the output readers may run on after the server exits (a process that left the
/// group could keep the pipes open forever).
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// How to run the server and how to tell that it is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Shell command line, run with `sh -c` in its own process group.
    pub command: String,
    /// Directory to run in (the current one when `None`).
    pub working_dir: Option<PathBuf>,
    /// How to tell that the server accepts requests.
    pub readiness: Readiness,
    /// How long a start may take to become ready ([`DEFAULT_READY_TIMEOUT`]).
    pub ready_timeout: Duration,
    /// How long the server may take to exit after SIGTERM before it gets SIGKILL
    /// ([`DEFAULT_STOP_GRACE`]).
    pub stop_grace: Duration,
}

impl ServerConfig {
    /// A configuration with the default timeouts, run in the current directory.
    pub fn new(command: impl Into<String>, readiness: Readiness) -> Self {
        ServerConfig {
            command: command.into(),
            working_dir: None,
            readiness,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
        }
    }
}

/// How to tell that a server is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// An HTTP GET of this URL answers with any 2xx status.
    Http(String),
    /// `host:port` accepts TCP connections.
    Tcp(String),
}

impl Readiness {
    /// `GET http://…` or `TCP 127.0.0.1:8081`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Readiness::Http(url) => format!("GET {url}"),
            Readiness::Tcp(addr) => format!("TCP {addr}"),
        }
    }

    /// The `host:port` to probe for a listening socket, or why there is none.
    fn address(&self) -> Result<String, String> {
        match self {
            Readiness::Tcp(addr) => {
                let addr = addr.trim();
                match addr.rsplit_once(':') {
                    Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                        Ok(addr.to_string())
                    }
                    _ => Err(format!("{addr:?} is not host:port (e.g. 127.0.0.1:8081)")),
                }
            }
            Readiness::Http(url) => {
                let parsed = reqwest::Url::parse(url.trim()).map_err(|e| format!("{url}: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(format!(
                        "{url}: only http:// and https:// URLs can be checked"
                    ));
                }
                match (parsed.host_str(), parsed.port_or_known_default()) {
                    (Some(host), Some(port)) if !host.is_empty() => Ok(format!("{host}:{port}")),
                    _ => Err(format!("{url}: the URL has no host")),
                }
            }
        }
    }
}

/// The TCP readiness check for a webhook base URL: `http://127.0.0.1:8081` becomes
/// `Tcp("127.0.0.1:8081")` (port 80 for `http`, 443 for `https` when absent); `None` for anything
/// that is not an http(s) URL with a host.
pub fn readiness_for(base_url: &str) -> Option<Readiness> {
    let probe = Readiness::Http(base_url.to_string());
    probe.address().ok().map(Readiness::Tcp)
}

/// Where a managed server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Started for the first time, not ready yet.
    Starting,
    /// Accepting requests.
    Ready,
    /// Being stopped and started again, not ready yet.
    Restarting,
    /// Exited on its own (before or after being ready).
    Exited {
        /// `exit code 1` or `killed by signal 9`.
        status: String,
    },
    /// Could not be (re)started, e.g. not ready in time; the process was stopped.
    Failed {
        /// Why, for display.
        reason: String,
    },
    /// Stopped by [`ManagedServer::stop`].
    Stopped,
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One line of the server's output (without its line ending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// Where it was written.
    pub stream: Stream,
    /// The text (invalid UTF-8 replaced).
    pub line: String,
}

/// Why a managed server could not be started, restarted or waited for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The configuration cannot work as given.
    #[error("cannot run hook server `{command}`: {reason}")]
    Config {
        /// Command line.
        command: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The command could not be started.
    #[error("cannot start hook server `{command}`: {error}")]
    Spawn {
        /// Command line.
        command: String,
        /// The system's reason.
        error: String,
    },
    /// Something else already accepts connections where the server should listen.
    #[error(
        "cannot start hook server `{command}`: something is already listening on {address} \
         ({why}); the readiness check would be answered by that process, not the new server. \
         Stop it (another copy of the server?) or use another port"
    )]
    PortInUse {
        /// Command line.
        command: String,
        /// `host:port`.
        address: String,
        /// Before the first start, or after the old server was stopped.
        why: String,
    },
    /// The server exited before it was ready (or, for waiters, at any time).
    #[error("hook server `{command}` exited with {status}{}{}", when_part(*before_ready), output_part(output))]
    Exited {
        /// Command line.
        command: String,
        /// `exit code 3` or `killed by signal 9`.
        status: String,
        /// Whether it exited while being started (as opposed to after having been ready).
        before_ready: bool,
        /// Its last output lines.
        output: String,
    },
    /// The server did not become ready in time; it was stopped.
    #[error(
        "hook server `{command}` was not ready after {} ({check}: {last}); it was stopped. Make \
         sure it listens where the readiness check looks, or give it more time{}",
        fmt_duration(*after),
        output_part(output)
    )]
    NotReady {
        /// Command line.
        command: String,
        /// The readiness check, e.g. `TCP 127.0.0.1:8081`.
        check: String,
        /// What the last check saw.
        last: String,
        /// The limit that expired.
        after: Duration,
        /// Its last output lines.
        output: String,
    },
    /// A start or restart failed earlier (see the reason); restart the server to try again.
    #[error("hook server `{command}` is not running: {reason}")]
    Failed {
        /// Command line.
        command: String,
        /// The earlier failure.
        reason: String,
    },
    /// The server was stopped.
    #[error("hook server `{command}` was stopped")]
    Stopped {
        /// Command line.
        command: String,
    },
}

fn when_part(before_ready: bool) -> &'static str {
    if before_ready {
        " before it was ready"
    } else {
        ""
    }
}

fn output_part(output: &str) -> String {
    if output.trim().is_empty() {
        "; it wrote nothing".to_string()
    } else {
        format!("\noutput (last lines):\n{output}")
    }
}

/// A hook server run by kubectl-meta; cheap to clone (all clones manage the same process).
#[derive(Clone)]
pub struct ManagedServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ManagedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedServer")
            .field("command", &self.inner.cfg.command)
            .field("pid", &self.pid())
            .field("state", &*self.inner.shared.state.borrow())
            .finish()
    }
}

/// What the handles share; dropped (killing the group) with the last handle.
struct Inner {
    cfg: ServerConfig,
    /// `host:port` probed for a listening socket.
    address: String,
    /// For HTTP readiness.
    http: Option<reqwest::Client>,
    shared: Arc<Shared>,
    /// Serializes start, restart and stop; holds the current process.
    current: tokio::sync::Mutex<Option<Running>>,
}

/// What the per-process tasks need too (they must not keep [`Inner`] alive).
struct Shared {
    state: watch::Sender<ServerState>,
    output: mpsc::UnboundedSender<ServerLine>,
    tail: Mutex<Tail>,
    /// Process group (= leader pid) of the running server; 0 when none.
    pgid: AtomicI32,
    /// Bumped at each spawn; output of older runs is not kept.
    run: AtomicU64,
    /// Set while the supervisor restarts a crashed server (waiters wait instead of failing).
    recovering: AtomicBool,
}

/// The last lines of the current run.
#[derive(Default)]
struct Tail {
    run: u64,
    lines: VecDeque<String>,
}

/// One running process, as seen by the handle.
struct Running {
    pid: i32,
    /// Signals for the owner task to send to the group.
    signals: mpsc::UnboundedSender<i32>,
    /// `Some(status)` once the process exited and its output was read.
    exit: watch::Receiver<Option<String>>,
    /// Set before stopping it on purpose (its exit is then not reported as `Exited`).
    stopping: Arc<AtomicBool>,
}

impl Shared {
    fn set_state(&self, state: ServerState) {
        self.state.send_replace(state);
    }

    fn push_line(&self, run: u64, stream: Stream, line: String) {
        if let Ok(mut tail) = self.tail.lock()
            && tail.run == run
        {
            if tail.lines.len() == TAIL_KEEP {
                tail.lines.pop_front();
            }
            tail.lines.push_back(line.clone());
        }
        // The receiver may be gone (nobody displays output): the line is still in the tail.
        let _ = self.output.send(ServerLine { stream, line });
    }

    fn tail(&self, lines: usize) -> String {
        match self.tail.lock() {
            Ok(tail) => {
                let skip = tail.lines.len().saturating_sub(lines);
                tail.lines
                    .iter()
                    .skip(skip)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            Err(_) => String::new(),
        }
    }

    fn new_run(&self) -> u64 {
        let run = self.run.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(mut tail) = self.tail.lock() {
            tail.run = run;
            tail.lines.clear();
        }
        run
    }
}

impl ManagedServer {
    /// Start the server and wait until it is ready.
    ///
    /// On failure the process is stopped and the error carries the last lines of its output.
    pub async fn start(
        cfg: ServerConfig,
        output: mpsc::UnboundedSender<ServerLine>,
    ) -> Result<ManagedServer, ServerError> {
        let config_error = |reason: String| ServerError::Config {
            command: cfg.command.clone(),
            reason,
        };
        if cfg.command.trim().is_empty() {
            return Err(config_error(
                "the command is empty; give the command that runs the server, e.g. \
                 `python3 server.py --port 8081`"
                    .into(),
            ));
        }
        let address = cfg
            .readiness
            .address()
            .map_err(|e| config_error(format!("bad readiness check: {e}")))?;
        let http = match cfg.readiness {
            Readiness::Http(_) => Some(
                reqwest::Client::builder()
                    .no_proxy()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| {
                        config_error(format!("cannot set up the HTTP readiness client: {e}"))
                    })?,
            ),
            Readiness::Tcp(_) => None,
        };
        let (state, _) = watch::channel(ServerState::Starting);
        let server = ManagedServer {
            inner: Arc::new(Inner {
                cfg,
                address,
                http,
                shared: Arc::new(Shared {
                    state,
                    output,
                    tail: Mutex::new(Tail::default()),
                    pgid: AtomicI32::new(0),
                    run: AtomicU64::new(0),
                    recovering: AtomicBool::new(false),
                }),
                current: tokio::sync::Mutex::new(None),
            }),
        };
        let mut current = server.inner.current.lock().await;
        if let Some(why) = server.inner.accepts_connections().await {
            let err = server
                .inner
                .port_in_use(format!("before the first start; it answered {why}"));
            server.inner.shared.set_state(ServerState::Failed {
                reason: err.to_string(),
            });
            return Err(err);
        }
        server.inner.launch(&mut current).await?;
        drop(current);
        Ok(server)
    }

    /// Stop the server and start it again, then wait until it is ready.
    ///
    /// SIGTERM to the group, wait for the exit (at most the grace period), SIGKILL to the group,
    /// wait for the exit, wait until the readiness port no longer accepts connections (at most
    /// [`PORT_FREE_TIMEOUT`]), start, wait until ready. The state is [`ServerState::Restarting`]
    /// meanwhile. Works too after the server exited, failed or was stopped.
    pub async fn restart(&self) -> Result<(), ServerError> {
        let inner = &self.inner;
        let mut current = inner.current.lock().await;
        let old = current.take();
        if let Some(running) = &old {
            // Before the state changes, so that its exit is not reported as `Exited`.
            running.stopping.store(true, Ordering::SeqCst);
        }
        inner.shared.set_state(ServerState::Restarting);
        if let Some(running) = old {
            inner.stop_process(&running).await;
        }
        if let Some(why) = inner.wait_port_free().await {
            let err = inner.port_in_use(format!(
                "still {} after the old server was stopped; it answered {why}",
                fmt_duration(PORT_FREE_TIMEOUT)
            ));
            inner.shared.set_state(ServerState::Failed {
                reason: err.to_string(),
            });
            return Err(err);
        }
        inner.launch(&mut current).await
    }

    /// Stop the server (SIGTERM, grace period, SIGKILL, all to the whole group) and wait for it
    /// to exit. Does nothing more when it is not running; the state becomes
    /// [`ServerState::Stopped`].
    pub async fn stop(&self) {
        let mut current = self.inner.current.lock().await;
        if let Some(running) = current.take() {
            self.inner.stop_process(&running).await;
        }
        self.inner.shared.set_state(ServerState::Stopped);
    }

    /// The state, to read now or to wait on.
    pub fn state(&self) -> watch::Receiver<ServerState> {
        self.inner.shared.state.subscribe()
    }

    /// Wait until the server is ready (at once when it is).
    ///
    /// Fails as soon as the state becomes [`ServerState::Exited`], [`ServerState::Failed`] or
    /// [`ServerState::Stopped`], and with [`ServerError::NotReady`] after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), ServerError> {
        let mut rx = self.state();
        let shared = &self.inner.shared;
        let settled = tokio::time::timeout(
            timeout,
            rx.wait_for(|s| match s {
                ServerState::Starting | ServerState::Restarting => false,
                // A crashed server being restarted by the supervisor: wait for it.
                ServerState::Exited { .. } | ServerState::Failed { .. } => {
                    !shared.recovering.load(Ordering::SeqCst)
                }
                ServerState::Ready | ServerState::Stopped => true,
            }),
        )
        .await;
        let command = self.describe();
        match settled {
            Ok(Ok(state)) => match state.clone() {
                ServerState::Ready => Ok(()),
                ServerState::Exited { status } => Err(ServerError::Exited {
                    command,
                    status,
                    before_ready: false,
                    output: self.output_tail(ERROR_TAIL_LINES),
                }),
                ServerState::Failed { reason } => Err(ServerError::Failed { command, reason }),
                ServerState::Stopped | ServerState::Starting | ServerState::Restarting => {
                    Err(ServerError::Stopped { command })
                }
            },
            // The sender lives in `Inner`, which `self` keeps alive: not reachable.
            Ok(Err(_)) => Err(ServerError::Stopped { command }),
            Err(_) => Err(ServerError::NotReady {
                command,
                check: self.inner.cfg.readiness.describe(),
                last: format!("still {}", state_word(&self.inner.shared.state.borrow())),
                after: timeout,
                output: self.output_tail(ERROR_TAIL_LINES),
            }),
        }
    }

    /// Restart the server whenever it exits on its own after having been ready (a crash, a
    /// `kill -9`), with a capped backoff, until it is stopped or every handle is dropped. Each
    /// crash is announced on the output channel (exit status, next attempt, the last lines of
    /// its output); while it is being restarted, [`ManagedServer::wait_ready`] waits.
    pub fn supervise(&self) -> JoinHandle<()> {
        let weak = Arc::downgrade(&self.inner);
        let mut rx = self.state();
        tokio::spawn(async move {
            let mut delay = RESTART_MIN;
            let mut ready_since: Option<Instant> = None;
            let mut last = rx.borrow_and_update().clone();
            while rx.changed().await.is_ok() {
                let state = rx.borrow_and_update().clone();
                let Some(inner) = weak.upgrade() else { return };
                let recovering = inner.shared.recovering.load(Ordering::SeqCst);
                let crashed = match (&last, &state) {
                    (ServerState::Ready, ServerState::Exited { status }) => Some(status.clone()),
                    (_, ServerState::Exited { status }) if recovering => Some(status.clone()),
                    (_, ServerState::Failed { reason }) if recovering => Some(reason.clone()),
                    _ => None,
                };
                match &state {
                    ServerState::Ready => {
                        inner.shared.recovering.store(false, Ordering::SeqCst);
                        ready_since = Some(Instant::now());
                    }
                    ServerState::Stopped => inner.shared.recovering.store(false, Ordering::SeqCst),
                    _ => {}
                }
                last = state;
                let Some(status) = crashed else { continue };
                if ready_since.is_some_and(|t| t.elapsed() >= RESTART_RESET) {
                    delay = RESTART_MIN;
                }
                ready_since = None;
                inner.shared.recovering.store(true, Ordering::SeqCst);
                inner.announce_crash(&status, delay);
                drop(inner);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RESTART_MAX);
                let Some(inner) = weak.upgrade() else { return };
                if *inner.shared.state.borrow() == ServerState::Stopped {
                    continue;
                }
                // The outcome shows in the state: ready, or another failure (retried).
                let _ = ManagedServer { inner }.restart().await;
            }
        })
    }

    /// The process id of the server's process group leader (the `sh` running the command),
    /// while it runs.
    pub fn pid(&self) -> Option<u32> {
        match self.inner.shared.pgid.load(Ordering::SeqCst) {
            0 => None,
            pid => u32::try_from(pid).ok(),
        }
    }

    /// The last `lines` lines of the current run's output (stdout and stderr, as they came).
    pub fn output_tail(&self, lines: usize) -> String {
        self.inner.shared.tail(lines)
    }

    /// The command line, for messages.
    pub fn describe(&self) -> String {
        self.inner.cfg.command.clone()
    }
}

fn state_word(state: &ServerState) -> &'static str {
    match state {
        ServerState::Starting => "starting",
        ServerState::Ready => "ready",
        ServerState::Restarting => "restarting",
        ServerState::Exited { .. } => "exited",
        ServerState::Failed { .. } => "failed",
        ServerState::Stopped => "stopped",
    }
}

impl Inner {
    /// Tell the output channel that the server crashed and when it is started again.
    fn announce_crash(&self, status: &str, delay: Duration) {
        let tail = self.shared.tail(CRASH_TAIL_LINES);
        let mut lines = vec![format!(
            "kubectl-meta: hook server `{}` exited unexpectedly ({status}); restarting in {}",
            self.cfg.command,
            fmt_duration(delay)
        )];
        if !tail.is_empty() {
            lines.push("kubectl-meta: its last output:".into());
            lines.extend(tail.lines().map(|l| format!("  {l}")));
        }
        for line in lines {
            let _ = self.shared.output.send(ServerLine {
                stream: Stream::Stderr,
                line,
            });
        }
    }

    fn port_in_use(&self, why: String) -> ServerError {
        ServerError::PortInUse {
            command: self.cfg.command.clone(),
            address: self.address.clone(),
            why,
        }
    }

    /// Spawn the process into `current` and wait until it is ready; on failure stop it and set
    /// the state.
    async fn launch(&self, current: &mut Option<Running>) -> Result<(), ServerError> {
        let running = match self.spawn() {
            Ok(running) => running,
            Err(err) => {
                self.shared.set_state(ServerState::Failed {
                    reason: err.to_string(),
                });
                return Err(err);
            }
        };
        let ready = self.await_ready(&running).await;
        match ready {
            Ok(()) => {
                // Unless it exited meanwhile (then the state says so, or is about to: the owner
                // task publishes the exit before it sets the state, both under the state's lock
                // order, so `Exited` cannot be overwritten here).
                let exit = running.exit.clone();
                self.shared.state.send_if_modified(|state| {
                    let running = exit.borrow().is_none();
                    if running {
                        *state = ServerState::Ready;
                    }
                    running
                });
                *current = Some(running);
                Ok(())
            }
            Err(err) => {
                self.stop_process(&running).await;
                // Set here, not left to the owner task: the stop above keeps it from doing so.
                self.shared.set_state(match &err {
                    ServerError::Exited { status, .. } => ServerState::Exited {
                        status: status.clone(),
                    },
                    ServerError::NotReady { .. } => ServerState::Failed {
                        reason: format!(
                            "not ready after {} ({})",
                            fmt_duration(self.cfg.ready_timeout),
                            self.cfg.readiness.describe()
                        ),
                    },
                    other => ServerState::Failed {
                        reason: other.to_string(),
                    },
                });
                Err(err)
            }
        }
    }

    /// Start the command in its own process group, with the output readers and the owner task.
    fn spawn(&self) -> Result<Running, ServerError> {
        let spawn_error = |error: String| ServerError::Spawn {
            command: self.cfg.command.clone(),
            error,
        };
        if let Some(dir) = &self.cfg.working_dir
            && !dir.is_dir()
        {
            return Err(spawn_error(format!(
                "working directory {} does not exist",
                dir.display()
            )));
        }
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&self.cfg.command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if std::env::var_os("PYTHONUNBUFFERED").is_none() {
            command.env("PYTHONUNBUFFERED", "1");
        }
        if let Some(dir) = &self.cfg.working_dir {
            command.current_dir(dir);
        }
        let run = self.shared.new_run();
        let mut child = command
            .spawn()
            .map_err(|e| spawn_error(format!("running sh failed: {e}")))?;
        let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
            return Err(spawn_error("it exited before its pid could be read".into()));
        };
        self.shared.pgid.store(pid, Ordering::SeqCst);
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(read_lines(
                out,
                Stream::Stdout,
                run,
                self.shared.clone(),
            )));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(read_lines(
                err,
                Stream::Stderr,
                run,
                self.shared.clone(),
            )));
        }
        let (signals, signal_rx) = mpsc::unbounded_channel();
        let (exit_tx, exit) = watch::channel(None);
        let stopping = Arc::new(AtomicBool::new(false));
        tokio::spawn(own_process(Owner {
            child,
            pid,
            signals: signal_rx,
            readers,
            exit: exit_tx,
            stopping: stopping.clone(),
            shared: self.shared.clone(),
        }));
        Ok(Running {
            pid,
            signals,
            exit,
            stopping,
        })
    }

    /// Poll readiness until it passes, the process exits, or the ready timeout expires.
    async fn await_ready(&self, running: &Running) -> Result<(), ServerError> {
        let deadline = Instant::now() + self.cfg.ready_timeout;
        let mut exit = running.exit.clone();
        let mut last;
        loop {
            if let Some(status) = exit.borrow().clone() {
                return Err(self.exited_before_ready(status));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            tokio::select! {
                probe = self.probe(remaining.min(PROBE_TIMEOUT)) => match probe {
                    Ok(()) => return Ok(()),
                    Err(why) => last = why,
                },
                changed = exit.changed() => {
                    if changed.is_err() {
                        return Err(self.exited_before_ready("an unknown status".into()));
                    }
                    continue;
                }
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ServerError::NotReady {
                    command: self.cfg.command.clone(),
                    check: self.cfg.readiness.describe(),
                    last,
                    after: self.cfg.ready_timeout,
                    output: self.shared.tail(ERROR_TAIL_LINES),
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL_INTERVAL.min(remaining)) => {}
                changed = exit.changed() => {
                    if changed.is_err() {
                        return Err(self.exited_before_ready("an unknown status".into()));
                    }
                }
            }
        }
    }

    fn exited_before_ready(&self, status: String) -> ServerError {
        ServerError::Exited {
            command: self.cfg.command.clone(),
            status,
            before_ready: true,
            output: self.shared.tail(ERROR_TAIL_LINES),
        }
    }

    /// One readiness check; `Err` says what it saw.
    async fn probe(&self, limit: Duration) -> Result<(), String> {
        let limit = limit.max(Duration::from_millis(10));
        match (&self.cfg.readiness, &self.http) {
            (Readiness::Http(url), Some(http)) => {
                match http.get(url.trim()).timeout(limit).send().await {
                    Ok(answer) if answer.status().is_success() => Ok(()),
                    Ok(answer) => Err(format!("it answered HTTP {}", answer.status().as_u16())),
                    Err(e) if e.is_timeout() => Err("no answer in time".into()),
                    Err(e) if e.is_connect() => Err("connection refused".into()),
                    Err(e) => Err(super::error_chain(&e)),
                }
            }
            _ => tcp_accepts(&self.address, limit).await,
        }
    }

    /// `Some(what it saw)` when the readiness address accepts connections now.
    async fn accepts_connections(&self) -> Option<String> {
        tcp_accepts(&self.address, PROBE_TIMEOUT)
            .await
            .ok()
            .map(|()| "a TCP connection".to_string())
    }

    /// Wait until the readiness address stops accepting connections; `Some` if it never did.
    async fn wait_port_free(&self) -> Option<String> {
        let deadline = Instant::now() + PORT_FREE_TIMEOUT;
        loop {
            let busy = self.accepts_connections().await?;
            if Instant::now() >= deadline {
                return Some(busy);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// SIGTERM the group, wait (grace), SIGKILL the group, wait.
    async fn stop_process(&self, running: &Running) {
        running.stopping.store(true, Ordering::SeqCst);
        let mut exit = running.exit.clone();
        if exit.borrow().is_some() {
            return;
        }
        let _ = running.signals.send(libc::SIGTERM);
        let exited = |limit| {
            let mut exit = exit.clone();
            async move {
                tokio::time::timeout(limit, exit.wait_for(Option::is_some))
                    .await
                    .is_ok()
            }
        };
        if exited(self.cfg.stop_grace).await {
            return;
        }
        tracing::debug!(
            pid = running.pid,
            "hook server did not exit within {} of SIGTERM; sending SIGKILL",
            fmt_duration(self.cfg.stop_grace)
        );
        let _ = running.signals.send(libc::SIGKILL);
        if tokio::time::timeout(KILL_WAIT, exit.wait_for(Option::is_some))
            .await
            .is_err()
        {
            tracing::warn!(
                pid = running.pid,
                "hook server `{}` has not exited {} after SIGKILL",
                self.cfg.command,
                fmt_duration(KILL_WAIT)
            );
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Last resort (e.g. the runtime is shutting down and the owner task will not run again):
        // the owner task also kills the group when the signal channel closes.
        let pgid = self.shared.pgid.swap(0, Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: killpg has no memory-safety preconditions; ESRCH (group gone) is ignored.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

/// What the task owning one process holds.
struct Owner {
    child: tokio::process::Child,
    pid: i32,
    signals: mpsc::UnboundedReceiver<i32>,
    readers: Vec<JoinHandle<()>>,
    exit: watch::Sender<Option<String>>,
    stopping: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

/// Reap the process, sending the signals asked for while it is not reaped; then kill what is
/// left of its group, let the readers finish, and publish the exit.
async fn own_process(mut owner: Owner) {
    let status = loop {
        tokio::select! {
            biased;
            status = owner.child.wait() => break status,
            signal = owner.signals.recv() => {
                // Not reaped yet (the wait above has not completed), so the group is ours.
                let signal = signal.unwrap_or(libc::SIGKILL);
                // SAFETY: killpg has no memory-safety preconditions.
                unsafe {
                    libc::killpg(owner.pid, signal);
                }
                if signal == libc::SIGKILL {
                    break owner.child.wait().await;
                }
            }
        }
    };
    // The leader is often `sh`, which dies at once on SIGTERM while the server it started shuts
    // down gracefully: during a stop, give the rest of the group until the stop asks for SIGKILL.
    if owner.stopping.load(Ordering::SeqCst) {
        while group_alive(owner.pid) {
            tokio::select! {
                signal = owner.signals.recv() => {
                    if matches!(signal, None | Some(libc::SIGKILL)) {
                        break;
                    }
                }
                _ = tokio::time::sleep(POLL_INTERVAL) => {}
            }
        }
    }
    // Leftovers keep the group id alive, so it cannot have been reused; kill them (they could
    // hold the port or the output pipes).
    // SAFETY: as above; ESRCH when nothing is left.
    unsafe {
        libc::killpg(owner.pid, libc::SIGKILL);
    }
    let _ = owner
        .shared
        .pgid
        .compare_exchange(owner.pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    for reader in owner.readers {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_WAIT, reader).await.is_err() {
            abort.abort();
        }
    }
    let status = match status {
        Ok(status) => describe_status(status),
        Err(e) => format!("an unknown status (waiting for it failed: {e})"),
    };
    // The exit first, then the state: see `Inner::launch`. `stopping` is read under the state's
    // lock, and set before a stop changes the state, so a stop's state is never overwritten.
    owner.exit.send_replace(Some(status.clone()));
    let stopping = owner.stopping.clone();
    owner.shared.state.send_if_modified(|state| {
        let on_its_own = !stopping.load(Ordering::SeqCst);
        if on_its_own {
            *state = ServerState::Exited { status };
        }
        on_its_own
    });
}

/// Whether process group `pgid` has a member that still runs (zombies, which an init that does
/// not reap orphans may leave around for good, do not count).
fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // No procfs: signal 0 tells whether any member (zombies included) exists.
        // SAFETY: signal 0 only checks for existence.
        return unsafe { libc::killpg(pgid, 0) } == 0;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`; comm may contain spaces and parentheses.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or("")
            .split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        pgrp == Some(pgid) && !matches!(state, "Z" | "X")
    })
}

/// Pass each line of `pipe` on until it closes.
async fn read_lines(pipe: impl AsyncRead + Unpin, stream: Stream, run: u64, shared: Arc<Shared>) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                let line = String::from_utf8_lossy(&buf).into_owned();
                shared.push_line(run, stream, line);
            }
        }
    }
}

/// `Ok` when `address` accepts a TCP connection within `limit`.
async fn tcp_accepts(address: &str, limit: Duration) -> Result<(), String> {
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Err("connection refused".into())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connecting timed out".into()),
    }
}

/// `exit code 2` or `killed by signal 9`.
fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_for_base_urls() {
        assert_eq!(
            readiness_for("http://127.0.0.1:8081"),
            Some(Readiness::Tcp("127.0.0.1:8081".into()))
        );
        assert_eq!(
            readiness_for("http://localhost/prefix/"),
            Some(Readiness::Tcp("localhost:80".into()))
        );
        assert_eq!(
            readiness_for("https://hooks.local"),
            Some(Readiness::Tcp("hooks.local:443".into()))
        );
        assert_eq!(
            readiness_for("http://[::1]:9000/x"),
            Some(Readiness::Tcp("[::1]:9000".into()))
        );
        assert_eq!(readiness_for("127.0.0.1:8081"), None);
        assert_eq!(readiness_for("ftp://host:21"), None);
        assert_eq!(readiness_for("not a url"), None);
    }

    #[test]
    fn readiness_addresses_are_validated() {
        assert_eq!(
            Readiness::Tcp(" 127.0.0.1:80 ".into()).address(),
            Ok("127.0.0.1:80".into())
        );
        assert!(Readiness::Tcp("127.0.0.1".into()).address().is_err());
        assert!(Readiness::Tcp(":80".into()).address().is_err());
        assert!(Readiness::Tcp("h:99999".into()).address().is_err());
        assert_eq!(
            Readiness::Http("http://127.0.0.1:8081/healthz".into()).address(),
            Ok("127.0.0.1:8081".into())
        );
        let e = Readiness::Http("file:///x".into()).address().unwrap_err();
        assert!(e.contains("only http"), "{e}");
        assert_eq!(
            Readiness::Http("http://h/x".into()).describe(),
            "GET http://h/x"
        );
        assert_eq!(Readiness::Tcp("h:1".into()).describe(), "TCP h:1");
    }

    #[test]
    fn tail_keeps_the_current_run_only() {
        let (state, _) = watch::channel(ServerState::Starting);
        let (output, mut rx) = mpsc::unbounded_channel();
        let shared = Shared {
            state,
            output,
            tail: Mutex::new(Tail::default()),
            pgid: AtomicI32::new(0),
            run: AtomicU64::new(0),
            recovering: AtomicBool::new(false),
        };
        let first = shared.new_run();
        for i in 0..(TAIL_KEEP + 5) {
            shared.push_line(first, Stream::Stdout, format!("line {i}"));
        }
        assert_eq!(
            shared.tail(2),
            format!("line {}\nline {}", TAIL_KEEP + 3, TAIL_KEEP + 4)
        );
        assert_eq!(shared.tail(usize::MAX).lines().count(), TAIL_KEEP);
        let second = shared.new_run();
        assert_eq!(shared.tail(10), "");
        shared.push_line(first, Stream::Stderr, "late line of the old run".into());
        shared.push_line(second, Stream::Stderr, "new".into());
        assert_eq!(shared.tail(10), "new");
        // Every line still goes to the output channel.
        let mut count = 0;
        while rx.try_recv().is_ok() {
            count += 1;
        }
        assert_eq!(count, TAIL_KEEP + 7);
    }

    #[test]
    fn messages_say_what_and_how_to_fix() {
        let e = ServerError::Exited {
            command: "python3 s.py".into(),
            status: "exit code 3".into(),
            before_ready: true,
            output: "boom".into(),
        };
        assert_eq!(
            e.to_string(),
            "hook server `python3 s.py` exited with exit code 3 before it was ready\noutput \
             (last lines):\nboom"
        );
        let e = ServerError::NotReady {
            command: "c".into(),
            check: "TCP 127.0.0.1:1".into(),
            last: "connection refused".into(),
            after: Duration::from_secs(1),
            output: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "hook server `c` was not ready after 1s (TCP 127.0.0.1:1: connection refused); it \
             was stopped. Make sure it listens where the readiness check looks, or give it more \
             time; it wrote nothing"
        );
    }

    #[test]
    fn group_liveness() {
        // SAFETY: getpgrp has no preconditions.
        let own = unsafe { libc::getpgrp() };
        assert!(group_alive(own));
        // Above the kernel's pid limit (4194304): no such group.
        assert!(!group_alive(5_000_000));
    }

    #[tokio::test]
    async fn bad_configurations_are_rejected_before_running_anything() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let e = ManagedServer::start(
            ServerConfig::new("  ", Readiness::Tcp("127.0.0.1:1".into())),
            tx.clone(),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("the command is empty"), "{e}");
        let e = ManagedServer::start(
            ServerConfig::new("true", Readiness::Tcp("nowhere".into())),
            tx.clone(),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("is not host:port"), "{e}");
        let mut cfg = ServerConfig::new("true", Readiness::Tcp("127.0.0.1:1".into()));
        cfg.working_dir = Some("/nonexistent/kubectl-meta-test".into());
        let e = ManagedServer::start(cfg, tx).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("working directory /nonexistent/kubectl-meta-test does not exist"),
            "{e}"
        );
    }
}
