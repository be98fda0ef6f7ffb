//! The managed hook server with real processes: a small Python stdlib HTTP server started,
//! probed, restarted and stopped, including its process group, its output, and its failures.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubectl_meta::hooks::server::{
    ManagedServer, Readiness, ServerConfig, ServerError, ServerLine, ServerState, Stream,
};
use tokio::sync::mpsc;

/// Generous bound for anything that should happen "soon" on a busy machine.
const LONG: Duration = Duration::from_secs(30);

/// The test server: `server.py PORT STATE_DIR [MODE]`. It writes its pid to STATE_DIR/server.pid
/// once listening and answers GET / and /healthz with its pid (404 elsewhere).
///
/// Modes: `grandchild` starts `sleep 60` (ignoring SIGTERM) and writes its pid to
/// grandchild.pid; `slow-stop` waits for STATE_DIR/release before exiting on SIGTERM;
/// `exit-later` exits with code 7 once STATE_DIR/quit exists.
const SERVER_PY: &str = r#"import http.server, os, signal, subprocess, sys, threading, time

port = int(sys.argv[1])
state_dir = sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else ""


def write(name, text):
    tmp = os.path.join(state_dir, name + ".part")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(state_dir, name))


def wait_for(name):
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(state_dir, name)) and time.time() < deadline:
        time.sleep(0.02)


if mode == "grandchild":
    child = subprocess.Popen(
        ["sleep", "60"],
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    write("grandchild.pid", str(child.pid))

if mode == "slow-stop":
    def on_term(*_):
        print("stopping slowly", flush=True)
        wait_for("release")
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path not in ("/", "/healthz"):
            self.send_error(404)
            return
        body = str(os.getpid()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
write("server.pid", str(os.getpid()))
print(f"listening on {port}")
print("a line on stderr", file=sys.stderr)

if mode == "exit-later":
    def quit_later():
        wait_for("quit")
        print("quitting", flush=True)
        os._exit(7)
    threading.Thread(target=quit_later, daemon=True).start()

server.serve_forever()
"#;

struct Fixture {
    dir: tempfile::TempDir,
    port: u16,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.py"), SERVER_PY).unwrap();
        Fixture {
            dir,
            port: common::free_port(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, mode: &str) -> String {
        format!(
            "python3 server.py {} {} {mode}",
            self.port,
            self.dir.path().display()
        )
    }

    fn config(&self, mode: &str, readiness: Readiness) -> ServerConfig {
        let mut cfg = ServerConfig::new(self.command(mode), readiness);
        cfg.working_dir = Some(self.dir.path().to_path_buf());
        cfg.ready_timeout = LONG;
        cfg
    }

    fn tcp(&self) -> Readiness {
        Readiness::Tcp(format!("127.0.0.1:{}", self.port))
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// Whether `pid` no longer runs (gone, or a zombie: orphans are not always reaped here).
fn is_gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        })
        .unwrap_or(true)
}

async fn wait_gone(pid: i32) {
    let deadline = Instant::now() + LONG;
    while !is_gone(pid) {
        assert!(Instant::now() < deadline, "process {pid} still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pid written to `path` (waiting for the file).
async fn read_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// GET `url` and return the body (the server's pid).
async fn get_pid(url: &str) -> i32 {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let body = client
        .get(url)
        .timeout(LONG)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.trim().parse().unwrap()
}

async fn wait_state(server: &ManagedServer, want: impl Fn(&ServerState) -> bool) -> ServerState {
    let mut rx = server.state();
    tokio::time::timeout(LONG, rx.wait_for(|s| want(s)))
        .await
        .expect("state not reached in time")
        .expect("state channel closed")
        .clone()
}

/// Receive output lines until one satisfies `want`.
async fn wait_line(
    rx: &mut mpsc::UnboundedReceiver<ServerLine>,
    want: impl Fn(&ServerLine) -> bool,
) {
    let found = tokio::time::timeout(LONG, async {
        while let Some(line) = rx.recv().await {
            if want(&line) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "expected output line not seen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_readiness_output_and_stop() {
    let fx = Fixture::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let server = ManagedServer::start(fx.config("", fx.tcp()), tx)
        .await
        .unwrap();
    assert_eq!(*server.state().borrow(), ServerState::Ready);
    assert!(server.describe().starts_with("python3 server.py "));
    let leader = server.pid().unwrap() as i32;
    let python = read_pid(&fx.path("server.pid")).await;
    // Ready means it answers.
    assert_eq!(get_pid(&fx.url("/")).await, python);

    // Both streams arrive (in either order: they are read concurrently).
    let want_stdout = ServerLine {
        stream: Stream::Stdout,
        line: format!("listening on {}", fx.port),
    };
    let want_stderr = ServerLine {
        stream: Stream::Stderr,
        line: "a line on stderr".into(),
    };
    let mut seen = Vec::new();
    let both = tokio::time::timeout(LONG, async {
        while let Some(line) = rx.recv().await {
            seen.push(line);
            if seen.contains(&want_stdout) && seen.contains(&want_stderr) {
                return;
            }
        }
    })
    .await;
    assert!(both.is_ok(), "missing output lines; got {seen:?}");
    let tail = server.output_tail(50);
    assert!(
        tail.contains(&format!("listening on {}", fx.port)),
        "{tail}"
    );

    server.stop().await;
    assert_eq!(*server.state().borrow(), ServerState::Stopped);
    assert_eq!(server.pid(), None);
    assert!(is_gone(leader));
    wait_gone(python).await;
    // Idempotent.
    server.stop().await;
    let e = server.wait_ready(LONG).await.unwrap_err();
    assert!(matches!(e, ServerError::Stopped { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_readiness_and_a_wrong_health_url() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let server = ManagedServer::start(
        fx.config("", Readiness::Http(fx.url("/healthz"))),
        tx.clone(),
    )
    .await
    .unwrap();
    assert_eq!(*server.state().borrow(), ServerState::Ready);
    server.wait_ready(Duration::from_millis(10)).await.unwrap();
    server.stop().await;

    // A health URL that answers 404: not ready, and the message says what it saw.
    let fx = Fixture::new();
    let mut cfg = fx.config("", Readiness::Http(fx.url("/nope")));
    cfg.ready_timeout = Duration::from_secs(2);
    let e = ManagedServer::start(cfg, tx).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ServerError::NotReady { .. }), "{msg}");
    assert!(msg.contains("it answered HTTP 404"), "{msg}");
    assert!(msg.contains(&format!("GET {}", fx.url("/nope"))), "{msg}");
    // The server was stopped.
    wait_gone(read_pid(&fx.path("server.pid")).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_waits_for_the_old_process_and_reuses_the_port() {
    let fx = Fixture::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut cfg = fx.config("slow-stop", fx.tcp());
    // The release below decides when it stops, not the grace period.
    cfg.stop_grace = LONG;
    let server = ManagedServer::start(cfg, tx).await.unwrap();
    let old_leader = server.pid().unwrap() as i32;
    let old = read_pid(&fx.path("server.pid")).await;
    assert_eq!(get_pid(&fx.url("/")).await, old);
    std::fs::remove_file(fx.path("server.pid")).unwrap();

    let restarting = tokio::spawn({
        let server = server.clone();
        async move { server.restart().await }
    });
    // Restarting while the old server takes its time to stop: not ready, no new process yet.
    wait_state(&server, |s| *s == ServerState::Restarting).await;
    wait_line(&mut rx, |l| l.line == "stopping slowly").await;
    assert!(
        !is_gone(old),
        "the old server must be given its grace period"
    );
    assert!(!fx.path("server.pid").exists());
    let early = server
        .wait_ready(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(early.to_string().contains("still restarting"), "{early}");

    // A waiter that arrives during the restart is released when it is ready.
    let waiter = tokio::spawn({
        let server = server.clone();
        async move { server.wait_ready(LONG).await }
    });
    std::fs::write(fx.path("release"), "").unwrap();
    restarting.await.unwrap().unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(*server.state().borrow(), ServerState::Ready);

    assert!(is_gone(old), "old server {old} still running after restart");
    assert!(is_gone(old_leader));
    let new = read_pid(&fx.path("server.pid")).await;
    assert_ne!(new, old);
    assert_ne!(server.pid().unwrap() as i32, old_leader);
    // Same port, new process.
    assert_eq!(get_pid(&fx.url("/")).await, new);
    server.stop().await;
    wait_gone(new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_the_whole_group_and_escalates_to_sigkill() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut cfg = fx.config("grandchild", fx.tcp());
    cfg.stop_grace = Duration::from_secs(1);
    let server = ManagedServer::start(cfg, tx.clone()).await.unwrap();
    let grandchild = read_pid(&fx.path("grandchild.pid")).await;
    let python = read_pid(&fx.path("server.pid")).await;
    assert!(!is_gone(grandchild));
    server.stop().await;
    // The grandchild ignores SIGTERM: it was killed with the group, right after the server.
    wait_gone(python).await;
    wait_gone(grandchild).await;

    // A server that ignores SIGTERM gets SIGKILL after the grace period.
    let fx = Fixture::new();
    let script = format!(
        "import signal, socket, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         s = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('127.0.0.1', {}))\ns.listen()\nprint('deaf to SIGTERM', flush=True)\n\
         time.sleep(60)\n",
        fx.port
    );
    std::fs::write(fx.path("deaf.py"), script).unwrap();
    let mut cfg = ServerConfig::new("python3 deaf.py", fx.tcp());
    cfg.working_dir = Some(fx.dir.path().to_path_buf());
    cfg.stop_grace = Duration::from_millis(500);
    let server = ManagedServer::start(cfg, tx).await.unwrap();
    let leader = server.pid().unwrap() as i32;
    let started = Instant::now();
    server.stop().await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < LONG, "{took:?}");
    wait_gone(leader).await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", fx.port)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_exits_at_once_fails_with_its_status_and_output() {
    let port = common::free_port();
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut cfg = ServerConfig::new(
        r#"python3 -c 'import sys; print("boom", file=sys.stderr); sys.exit(3)'"#,
        Readiness::Tcp(format!("127.0.0.1:{port}")),
    );
    cfg.ready_timeout = LONG;
    let started = Instant::now();
    let e = ManagedServer::start(cfg, tx).await.unwrap_err();
    // Fails fast, not after the ready timeout.
    assert!(started.elapsed() < Duration::from_secs(20));
    let msg = e.to_string();
    assert!(
        matches!(&e, ServerError::Exited { status, before_ready: true, .. } if status == "exit code 3"),
        "{msg}"
    );
    assert!(
        msg.contains("exited with exit code 3 before it was ready"),
        "{msg}"
    );
    assert!(msg.contains("boom"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syntax_error_on_restart_fails_with_the_traceback_and_waiters_fail_fast() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let server = ManagedServer::start(fx.config("", fx.tcp()), tx)
        .await
        .unwrap();
    let old = read_pid(&fx.path("server.pid")).await;
    std::fs::write(fx.path("server.py"), "import os\ndef broken(:\n    pass\n").unwrap();

    let e = server.restart().await.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            ServerError::Exited {
                before_ready: true,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("exit code 1"), "{msg}");
    assert!(msg.contains("SyntaxError"), "{msg}");
    assert!(msg.contains("def broken(:"), "{msg}");
    assert!(server.output_tail(20).contains("SyntaxError"));
    assert!(is_gone(old));
    assert!(matches!(
        *server.state().borrow(),
        ServerState::Exited { .. }
    ));

    let started = Instant::now();
    let e = server.wait_ready(LONG).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "wait_ready did not fail fast"
    );
    assert!(e.to_string().contains("SyntaxError"), "{e}");

    // Fixed again: a restart brings it back.
    std::fs::write(fx.path("server.py"), SERVER_PY).unwrap();
    server.restart().await.unwrap();
    assert_eq!(*server.state().borrow(), ServerState::Ready);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_listens_is_not_ready_after_the_timeout() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut cfg = ServerConfig::new(
        r#"python3 -c 'import os, time; print("waiting forever", os.getpid(), flush=True); time.sleep(60)'"#,
        fx.tcp(),
    );
    cfg.ready_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let e = ManagedServer::start(cfg, tx).await.unwrap_err();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < LONG, "{took:?}");
    let msg = e.to_string();
    assert!(matches!(e, ServerError::NotReady { .. }), "{msg}");
    assert!(msg.contains("was not ready after 1s"), "{msg}");
    assert!(msg.contains("connection refused"), "{msg}");
    assert!(msg.contains("waiting forever"), "{msg}");
    // It was stopped.
    let pid: i32 = msg
        .split("waiting forever ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    wait_gone(pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_after_being_ready_is_reported() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let server = ManagedServer::start(fx.config("exit-later", fx.tcp()), tx)
        .await
        .unwrap();
    assert_eq!(*server.state().borrow(), ServerState::Ready);
    std::fs::write(fx.path("quit"), "").unwrap();
    let state = wait_state(&server, |s| matches!(s, ServerState::Exited { .. })).await;
    assert_eq!(
        state,
        ServerState::Exited {
            status: "exit code 7".into()
        }
    );
    assert_eq!(server.pid(), None);
    let e = server.wait_ready(LONG).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            ServerError::Exited {
                before_ready: false,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("exited with exit code 7"), "{msg}");
    assert!(msg.contains("quitting"), "{msg}");
    // stop() after a crash is fine.
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_port_is_refused_before_starting() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let (tx, _rx) = mpsc::unbounded_channel();
    let cfg = ServerConfig::new(
        format!("touch {}; sleep 60", marker.display()),
        Readiness::Tcp(format!("127.0.0.1:{port}")),
    );
    let e = ManagedServer::start(cfg, tx).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ServerError::PortInUse { .. }), "{msg}");
    assert!(
        msg.contains(&format!("already listening on 127.0.0.1:{port}")),
        "{msg}"
    );
    assert!(!marker.exists(), "the command must not have run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_kills_the_group() {
    let fx = Fixture::new();
    let (tx, _rx) = mpsc::unbounded_channel();
    let server = ManagedServer::start(fx.config("grandchild", fx.tcp()), tx)
        .await
        .unwrap();
    let grandchild = read_pid(&fx.path("grandchild.pid")).await;
    let python = read_pid(&fx.path("server.pid")).await;
    let clone = server.clone();
    drop(server);
    assert!(!is_gone(python), "a clone still holds it");
    drop(clone);
    wait_gone(python).await;
    wait_gone(grandchild).await;
}
