//! Commands to a running dev loop, and the three ways they arrive:
//! - the keyboard (headless mode on a terminal): a line with `r` (resync all), `r NAME`
//!   (resync one parent), `p` (pause/resume writes), `R` (replay), `?` (help);
//! - signals: `SIGUSR1` resyncs every parent, `SIGUSR2` pauses/resumes writes;
//! - a control socket (`<data dir>/dev/<pid>.sock`, mode 0600), which
//!   `kubectl meta dev --resync [PARENT] | --pause | --resume` talks to: one JSON line in
//!   (`{"command":"resync","parent":"default/x"}`), one JSON line out (`{"ok":true,"message":…}`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// What a dev loop can be asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "camelCase")]
pub enum Command {
    /// Resync one parent (`namespace/name` or `name`) in every controller, or all parents.
    Resync {
        /// The parent; all when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
    /// Stop writing (hooks are still called, plans shown).
    Pause,
    /// Write again (and resync everything).
    Resume,
    /// Pause when running, resume when paused.
    TogglePause,
    /// Send every parent's last request to its hook again and show how the answer changed.
    Replay,
    /// Write the flight recorder's dump (docs/flight-recorder.md) to `path` (absolute, or
    /// relative to the dev loop's directory).
    DumpFlight {
        /// The file to write.
        path: String,
    },
    /// Step a replayed timeline by `by` recorded syncs (`kubectl meta replay`'s TUI: `n` is
    /// +1, `b` -1); a dev loop runs live and refuses it.
    Step {
        /// Steps forward (negative: back).
        by: i64,
    },
}

/// A command with the channel its answer goes back on.
#[derive(Debug)]
pub struct Request {
    /// The command.
    pub command: Command,
    /// Where the one-line answer goes.
    pub reply: oneshot::Sender<Result<String, String>>,
}

/// Why a control request could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No dev loop listens in the control directory.
    #[error(
        "no running `kubectl meta dev` found (no control socket in {dir}); start one first, or send it SIGUSR1 (resync) / SIGUSR2 (pause) directly"
    )]
    NoneRunning {
        /// The directory looked in.
        dir: PathBuf,
    },
    /// The socket could not be used.
    #[error("control socket {path}: {error}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// What failed.
        error: String,
    },
}

/// The control socket directory under `data_dir`.
pub fn socket_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("dev")
}

/// The answer on the socket.
#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    ok: bool,
    message: String,
}

/// Listens on the control socket while alive; removes it on drop.
pub struct ControlServer {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl ControlServer {
    /// Listen on `<dir>/<pid>.sock` and forward commands to `tx`.
    pub fn start(dir: &Path, tx: mpsc::Sender<Request>) -> Result<ControlServer, ControlError> {
        let io = |path: &Path, e: std::io::Error| ControlError::Io {
            path: path.to_path_buf(),
            error: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        set_mode(dir, 0o700);
        let path = dir.join(format!("{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|e| io(&path, e))?;
        set_mode(&path, 0o600);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = serve_one(stream, tx).await;
                });
            }
        });
        Ok(ControlServer { path, task })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

async fn serve_one(stream: UnixStream, tx: mpsc::Sender<Request>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let answer = match serde_json::from_str::<Command>(line.trim()) {
        Ok(command) => {
            let (reply, rx) = oneshot::channel();
            if tx.send(Request { command, reply }).await.is_err() {
                Answer {
                    ok: false,
                    message: "the dev loop is stopping".into(),
                }
            } else {
                match rx.await {
                    Ok(Ok(message)) => Answer { ok: true, message },
                    Ok(Err(message)) => Answer { ok: false, message },
                    Err(_) => Answer {
                        ok: false,
                        message: "the dev loop stopped before answering".into(),
                    },
                }
            }
        }
        Err(e) => Answer {
            ok: false,
            message: format!("not a command: {e}"),
        },
    };
    let mut out = serde_json::to_string(&answer).unwrap_or_default();
    out.push('\n');
    write.write_all(out.as_bytes()).await
}

/// Send `command` to every dev loop listening in `dir`; returns `(socket, ok, answer)` per
/// dev loop. Sockets nobody listens on any more (a dev loop that was killed) are removed.
pub async fn send(
    dir: &Path,
    command: &Command,
) -> Result<Vec<(PathBuf, bool, String)>, ControlError> {
    let mut sockets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    sockets.sort();
    let mut out = Vec::new();
    for path in sockets {
        let stream = match UnixStream::connect(&path).await {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            Err(e) => {
                return Err(ControlError::Io {
                    path,
                    error: e.to_string(),
                });
            }
        };
        let io = |e: String| ControlError::Io {
            path: path.clone(),
            error: e,
        };
        let (read, mut write) = stream.into_split();
        let mut line = serde_json::to_string(command).map_err(|e| io(e.to_string()))?;
        line.push('\n');
        write
            .write_all(line.as_bytes())
            .await
            .map_err(|e| io(e.to_string()))?;
        let mut answer = String::new();
        tokio::time::timeout(
            Duration::from_secs(60),
            BufReader::new(read).read_line(&mut answer),
        )
        .await
        .map_err(|_| io("no answer within 60s".into()))?
        .map_err(|e| io(e.to_string()))?;
        let a: Answer = serde_json::from_str(answer.trim())
            .map_err(|e| io(format!("bad answer {answer:?}: {e}")))?;
        out.push((path, a.ok, a.message));
    }
    if out.is_empty() {
        return Err(ControlError::NoneRunning {
            dir: dir.to_path_buf(),
        });
    }
    Ok(out)
}

/// Parse a keyboard line; `None` for an empty or unknown one.
pub fn parse_key_line(line: &str) -> Option<Command> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match word {
        "r" | "resync" => Some(Command::Resync {
            parent: (!rest.is_empty()).then(|| rest.to_string()),
        }),
        "p" | "pause" => Some(Command::TogglePause),
        "R" | "replay" => Some(Command::Replay),
        "f" | "flight" => Some(Command::DumpFlight {
            path: if rest.is_empty() {
                default_flight_path()
            } else {
                rest.to_string()
            },
        }),
        _ => None,
    }
}

/// Where `f` (the line command and the TUI key) writes the flight recording without a FILE:
/// `flight-PID.json` in the dev loop's directory.
pub fn default_flight_path() -> String {
    format!("flight-{}.json", std::process::id())
}

/// The keyboard help line.
pub const KEY_HELP: &str = "keys (then Enter): r = resync all, r NAME = resync one parent, p = pause/resume writes, R = replay last requests, f [FILE] = write the flight recording; Ctrl-C quits";

/// Forward keyboard lines from stdin as commands (answers are published by the caller).
pub fn spawn_keyboard(tx: mpsc::Sender<Request>, answers: mpsc::UnboundedSender<String>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Some(command) = parse_key_line(&line) else {
                if !line.trim().is_empty() {
                    let _ = answers.send(format!("unknown key {:?}; {KEY_HELP}", line.trim()));
                }
                continue;
            };
            let (reply, rx) = oneshot::channel();
            if tx.send(Request { command, reply }).await.is_err() {
                return;
            }
            if let Ok(a) = rx.await {
                let _ = answers.send(a.unwrap_or_else(|e| e));
            }
        }
    });
}

/// Forward SIGUSR1 (resync all) and SIGUSR2 (pause/resume).
pub fn spawn_signals(
    tx: mpsc::Sender<Request>,
    answers: mpsc::UnboundedSender<String>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    for (kind, command) in [
        (
            SignalKind::user_defined1(),
            Command::Resync { parent: None },
        ),
        (SignalKind::user_defined2(), Command::TogglePause),
    ] {
        let mut sig = signal(kind)?;
        let tx = tx.clone();
        let answers = answers.clone();
        tokio::spawn(async move {
            while sig.recv().await.is_some() {
                let (reply, rx) = oneshot::channel();
                if tx
                    .send(Request {
                        command: command.clone(),
                        reply,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                if let Ok(a) = rx.await {
                    let _ = answers.send(a.unwrap_or_else(|e| e));
                }
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines() {
        assert_eq!(parse_key_line("r"), Some(Command::Resync { parent: None }));
        assert_eq!(
            parse_key_line("  r default/web \n"),
            Some(Command::Resync {
                parent: Some("default/web".into())
            })
        );
        assert_eq!(parse_key_line("p"), Some(Command::TogglePause));
        assert_eq!(parse_key_line("R"), Some(Command::Replay));
        assert_eq!(parse_key_line(""), None);
        assert_eq!(parse_key_line("x"), None);
    }

    #[test]
    fn wire_format() {
        let c: Command = serde_json::from_str(r#"{"command":"resync","parent":"a/b"}"#).unwrap();
        assert_eq!(
            c,
            Command::Resync {
                parent: Some("a/b".into())
            }
        );
        assert_eq!(
            serde_json::to_string(&Command::Resync { parent: None }).unwrap(),
            r#"{"command":"resync"}"#
        );
        assert_eq!(
            serde_json::to_string(&Command::Pause).unwrap(),
            r#"{"command":"pause"}"#
        );
    }

    #[tokio::test]
    async fn socket_round_trip_and_stale_sockets() {
        let dir = tempfile::tempdir().unwrap();
        // A stale socket from a killed dev loop is skipped and removed.
        let stale = dir.path().join("1.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let err = send(dir.path(), &Command::Pause).await.unwrap_err();
        assert!(matches!(err, ControlError::NoneRunning { .. }), "{err}");
        assert!(!stale.exists());

        let (tx, mut rx) = mpsc::channel(4);
        let server = ControlServer::start(dir.path(), tx).unwrap();
        tokio::spawn(async move {
            while let Some(req) = rx.recv().await {
                let answer = match &req.command {
                    Command::Resync { parent: Some(p) } if p == "nosuch" => {
                        Err(format!("no parent named {p}"))
                    }
                    c => Ok(format!("did {c:?}")),
                };
                let _ = req.reply.send(answer);
            }
        });
        let got = send(
            dir.path(),
            &Command::Resync {
                parent: Some("default/p".into()),
            },
        )
        .await
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, server.path());
        assert!(got[0].1);
        assert!(got[0].2.contains("default/p"), "{}", got[0].2);
        // A refusal travels as ok: false.
        let got = send(
            dir.path(),
            &Command::Resync {
                parent: Some("nosuch".into()),
            },
        )
        .await
        .unwrap();
        assert!(!got[0].1);
        assert_eq!(got[0].2, "no parent named nosuch");
        let path = server.path().to_path_buf();
        drop(server);
        assert!(!path.exists());
    }
}
