//! Exec hooks: run a local program once per call, request JSON on stdin, answer JSON on stdout.
//!
//! The program inherits the environment plus `KUBECTL_META_HOOK`, `KUBECTL_META_CONTROLLER`,
//! `KUBECTL_META_CONTROLLER_KIND`, `KUBECTL_META_PARENT`, `KUBECTL_META_MAP_KEY` (map and
//! tombstone calls; empty otherwise), when traces are exported the hook span's context as
//! `TRACEPARENT` (and `TRACESTATE`; the environment-variable form of the W3C headers) and the
//! hook's own `env`. It runs in its
//! own process group. Stdin is written while stdout and stderr are read, all concurrently, so a
//! large request and a chatty program cannot deadlock; a program that exits without reading
//! stdin is fine (the broken pipe is ignored). Stderr is kept (last 64 KiB) in the call record.
//!
//! Cleanup, so that no process outlives its call:
//! - when the program exits, whatever it left running in its process group is killed (its
//!   stdout would otherwise stay open and the call would hang);
//! - on timeout the whole group gets SIGKILL and the program is reaped;
//! - when the call's future is dropped (Ctrl-C, engine shutdown), a guard kills the group and
//!   tokio's `kill_on_drop` kills and reaps the program in the background.
//!
//! The group is only signalled while its leader is known not to have been reaped (or right after
//! reaping it, when any survivor keeps the group id alive), so an unrelated process group is never
//! hit.

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{CallInfo, HookCall, HookError, MAX_RESPONSE_BYTES, parse_answer, raw_text};

/// How much of stderr is kept in the call record.
pub const STDERR_KEEP: usize = 64 << 10;

/// How many stderr lines error messages quote.
const STDERR_TAIL_LINES: usize = 20;

/// Everything one exec call needs besides the request.
#[derive(Debug, Clone, Copy)]
pub struct ExecRun<'a> {
    /// Program and arguments.
    pub command: &'a [String],
    /// Limit for the run.
    pub timeout: Duration,
    /// Directory to run in.
    pub working_dir: Option<&'a Path>,
    /// Extra environment variables.
    pub env: &'a [(String, String)],
    /// Which hook, for the `KUBECTL_META_*` variables.
    pub info: &'a CallInfo,
}

/// Run the program with `request` on stdin and decode its answer.
pub(super) async fn call(run: &ExecRun<'_>, request: &Value) -> HookCall {
    let started = Instant::now();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let result = execute(run, request, &mut stdout, &mut stderr).await;
    HookCall {
        result,
        status: None,
        latency: started.elapsed(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        raw_response: (!stdout.is_empty()).then(|| raw_text(&stdout)),
    }
}

/// The command line for messages (arguments with spaces or quotes are single-quoted).
pub fn command_line(command: &[String]) -> String {
    command
        .iter()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| !c.is_whitespace() && !matches!(c, '\'' | '"' | '\\' | '$' | '`'));
            if plain {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Start the program, feed it, collect its output (into `stdout` / `stderr`, which keep what
/// arrived even on timeout), and judge the outcome.
async fn execute(
    run: &ExecRun<'_>,
    request: &Value,
    stdout: &mut Vec<u8>,
    stderr: &mut Vec<u8>,
) -> Result<Value, HookError> {
    let line = command_line(run.command);
    let spawn_error = |error: String| HookError::Spawn {
        command: line.clone(),
        error,
    };
    let failed = |message: String| HookError::Request {
        target: line.clone(),
        message,
    };
    let Some((program, args)) = run.command.split_first() else {
        return Err(spawn_error(
            "exec.command is empty; give the program and its arguments, e.g. \
             [python3, hooks/sync.py]"
                .into(),
        ));
    };
    if let Some(dir) = run.working_dir
        && !dir.is_dir()
    {
        return Err(spawn_error(format!(
            "working directory {} does not exist",
            dir.display()
        )));
    }
    let input = serde_json::to_vec(request)
        .map_err(|e| failed(format!("cannot encode the request as JSON: {e}")))?;

    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("KUBECTL_META_HOOK", &run.info.hook)
        .env("KUBECTL_META_CONTROLLER", &run.info.controller)
        .env("KUBECTL_META_CONTROLLER_KIND", &run.info.controller_kind)
        .env("KUBECTL_META_PARENT", &run.info.parent)
        .env(
            "KUBECTL_META_MAP_KEY",
            run.info.map_key.as_deref().unwrap_or_default(),
        )
        .envs(
            crate::trace::headers()
                .into_iter()
                .map(|(k, v)| (k.to_ascii_uppercase(), v)),
        )
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = run.working_dir {
        command.current_dir(dir);
    }
    let mut child = command
        .spawn()
        .map_err(|e| spawn_error(spawn_hint(program, &e)))?;
    // Declared after `child` so that it is dropped first: the group is killed before tokio's
    // kill_on_drop handles the leader.
    let group = ProcessGroup::new(child.id());
    let (Some(stdin), Some(out), Some(err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        group.kill();
        return Err(spawn_error(
            "its stdin/stdout/stderr pipes are missing".into(),
        ));
    };

    let io = async {
        tokio::join!(
            write_stdin(stdin, &input),
            read_stdout(out, stdout, &group),
            read_stderr(err, stderr),
            async {
                let status = child.wait().await;
                // Leftovers (background children) would keep stdout open: end them now.
                group.kill();
                status
            },
        )
    };
    let (written, complete, (), status) = match tokio::time::timeout(run.timeout, io).await {
        Ok(done) => done,
        Err(_) => {
            group.kill();
            // Reap the killed leader (SIGKILL cannot be ignored, so this returns promptly).
            let _ = child.wait().await;
            return Err(HookError::Timeout {
                target: line,
                after: run.timeout,
                setting: "exec.timeout",
            });
        }
    };

    let status = status.map_err(|e| failed(format!("waiting for the program failed: {e}")))?;
    if !complete {
        return Err(HookError::ResponseTooLarge {
            target: line,
            limit: MAX_RESPONSE_BYTES,
        });
    }
    let tail = stderr_tail(stderr);
    if !status.success() {
        return Err(HookError::Exit {
            command: line,
            status: describe_status(status),
            stderr_tail: tail,
        });
    }
    written.map_err(|e| failed(format!("writing the request to its stdin failed: {e}")))?;
    parse_answer(&line, stdout, &tail)
}

/// Write the request and close stdin; a program that exits without reading it is not an error.
async fn write_stdin(mut stdin: tokio::process::ChildStdin, input: &[u8]) -> std::io::Result<()> {
    let written = match stdin.write_all(input).await {
        Ok(()) => stdin.shutdown().await,
        Err(e) => Err(e),
    };
    match written {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// Read stdout into `buf` up to [`MAX_RESPONSE_BYTES`]; past that, kill the group and return
/// `false`. A read error ends the answer where it is.
async fn read_stdout(
    mut pipe: impl AsyncRead + Unpin,
    buf: &mut Vec<u8>,
    group: &ProcessGroup,
) -> bool {
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return true,
            Ok(n) if buf.len() + n > MAX_RESPONSE_BYTES => {
                group.kill();
                return false;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Read stderr to the end, keeping the last [`STDERR_KEEP`] bytes in `buf`.
async fn read_stderr(mut pipe: impl AsyncRead + Unpin, buf: &mut Vec<u8>) {
    let mut chunk = vec![0u8; 16 << 10];
    while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > STDERR_KEEP {
            buf.drain(..buf.len() - STDERR_KEEP);
        }
    }
}

/// The last [`STDERR_TAIL_LINES`] lines of stderr.
fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n")
}

/// `exit code 2` or `killed by signal 9`.
fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Why a program could not start, with what to do about it.
fn spawn_hint(program: &str, e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::NotFound => format!(
            "command not found: {program}; install it or fix exec.command (a program name is \
             looked up on PATH, a path is taken relative to the working directory)"
        ),
        ErrorKind::PermissionDenied => format!(
            "permission denied running {program}; make it executable (chmod +x) or run it \
             through its interpreter, e.g. [python3, {program}]"
        ),
        _ if e.raw_os_error() == Some(libc::ENOEXEC) => format!(
            "{program} is not a program the system can run ({e}); does the script start with a \
             #! line?"
        ),
        _ => e.to_string(),
    }
}

/// The process group of one call's program, killed at most once.
///
/// Killing is disarmed after the first kill; a call whose program exited normally has its
/// group (leftovers) killed right after the exit, so the guard's drop is then a no-op. An atomic
/// (0 = disarmed) rather than a `Cell` keeps the call's future `Send`.
struct ProcessGroup {
    pgid: AtomicI32,
}

impl ProcessGroup {
    fn new(pid: Option<u32>) -> Self {
        let pgid = pid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        ProcessGroup {
            pgid: AtomicI32::new(pgid),
        }
    }

    /// SIGKILL every process of the group (once).
    fn kill(&self) {
        let pgid = self.pgid.swap(0, Ordering::Relaxed);
        if pgid > 0 {
            // SAFETY: killpg has no memory-safety preconditions; ESRCH (group already gone) is
            // the expected outcome when nothing is left, and is ignored.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::{HookClient, HookTarget};
    use serde_json::json;
    use std::path::PathBuf;

    fn info() -> CallInfo {
        CallInfo {
            hook: "sync".into(),
            controller_kind: "CompositeController".into(),
            controller: "hello".into(),
            parent: "default/p1".into(),
            map_key: None,
        }
    }

    /// Write an executable script into `dir`.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn target(command: &[&str], timeout: Duration, dir: Option<&Path>) -> HookTarget {
        HookTarget::Exec {
            command: command.iter().map(|s| s.to_string()).collect(),
            timeout,
            working_dir: dir.map(Path::to_path_buf),
            env: vec![("EXTRA".into(), "from-definition".into())],
        }
    }

    async fn run(t: &HookTarget, request: &Value) -> HookCall {
        HookClient::new().unwrap().call(t, &info(), request).await
    }

    const LONG: Duration = Duration::from_secs(30);

    /// Whether `pid` no longer runs (gone, or a zombie waiting for a reaper that is not us).
    fn is_gone(pid: i32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return true;
        }
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
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

    async fn wait_for_pids(path: &Path, n: usize) -> Vec<i32> {
        let deadline = Instant::now() + LONG;
        loop {
            let pids: Vec<i32> = std::fs::read_to_string(path)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.len() >= n {
                return pids;
            }
            assert!(Instant::now() < deadline, "no pids in {}", path.display());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn the_trace_context_reaches_the_program_as_traceparent() {
        // The process-wide propagator (the plugin installs the OpenTelemetry one): any other
        // test's webhook calls only gain this header.
        fn fixed() -> Vec<(String, String)> {
            vec![(
                "traceparent".to_string(),
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_string(),
            )]
        }
        crate::trace::set_propagator(fixed);
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "tp.py",
            r#"import json, os, sys
json.dump({"tp": os.environ.get("TRACEPARENT")}, sys.stdout)
"#,
        );
        let t = target(&["python3", "tp.py"], LONG, Some(dir.path()));
        let v = run(&t, &json!({})).await.result.unwrap();
        assert_eq!(
            v["tp"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
    }

    #[tokio::test]
    async fn python_echo_reads_stdin_and_sees_env() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "echo.py",
            r#"import json, os, sys
req = json.load(sys.stdin)
env = {k: os.environ.get(k) for k in ["KUBECTL_META_HOOK", "KUBECTL_META_CONTROLLER",
       "KUBECTL_META_CONTROLLER_KIND", "KUBECTL_META_PARENT", "KUBECTL_META_MAP_KEY", "EXTRA"]}
print("log line", file=sys.stderr)
json.dump({"got": req, "env": env, "cwd": os.getcwd(), "n": 3, "f": 3.0}, sys.stdout)
"#,
        );
        let t = target(&["python3", "echo.py"], LONG, Some(dir.path()));
        let c = run(&t, &json!({"parent": {"x": 1}})).await;
        let v = c.result.unwrap();
        assert_eq!(v["got"], json!({"parent": {"x": 1}}));
        assert_eq!(
            v["env"],
            json!({
                "KUBECTL_META_HOOK": "sync",
                "KUBECTL_META_CONTROLLER": "hello",
                "KUBECTL_META_CONTROLLER_KIND": "CompositeController",
                "KUBECTL_META_PARENT": "default/p1",
                "KUBECTL_META_MAP_KEY": "",
                "EXTRA": "from-definition",
            })
        );
        // A map call: the parent alone, and the map key.
        let map = CallInfo {
            hook: "map".into(),
            controller_kind: "MapController".into(),
            controller: "m".into(),
            parent: "default/p1".into(),
            map_key: Some("configmap-a-0123456789abcdef".into()),
        };
        let c = HookClient::new().unwrap().call(&t, &map, &json!({})).await;
        let v = c.result.unwrap();
        assert_eq!(v["env"]["KUBECTL_META_PARENT"], "default/p1");
        assert_eq!(
            v["env"]["KUBECTL_META_MAP_KEY"],
            "configmap-a-0123456789abcdef"
        );
        assert_eq!(v["env"]["KUBECTL_META_HOOK"], "map");
        let cwd = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(v["cwd"], json!(cwd.to_string_lossy()));
        assert!(v["n"].is_i64() && v["f"].is_f64());
        assert_eq!(c.stderr, "log line\n");
        assert_eq!(c.status, None);
        assert!(c.raw_response.unwrap().contains("\"got\""));
    }

    #[tokio::test]
    async fn non_zero_exit_shows_stderr_tail() {
        let dir = tempfile::tempdir().unwrap();
        let body = "#!/bin/sh\ncat >/dev/null\nfor i in $(seq 1 30); do echo \"line $i\" >&2; done\n\
                    echo 'bad thing happened' >&2\nexit 2\n";
        let path = script(dir.path(), "fail.sh", body);
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let c = run(&t, &json!({})).await;
        let e = c.result.unwrap_err();
        let HookError::Exit {
            status,
            stderr_tail,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(status, "exit code 2");
        let lines: Vec<&str> = stderr_tail.lines().collect();
        assert_eq!(lines.len(), 20);
        assert_eq!(lines[0], "line 12");
        assert_eq!(lines[19], "bad thing happened");
        assert!(e.to_string().contains("failed with exit code 2"), "{e}");
        // The record keeps all of stderr.
        assert!(c.stderr.starts_with("line 1\n"));
    }

    #[tokio::test]
    async fn killed_by_signal_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = script(dir.path(), "die.sh", "#!/bin/sh\nkill -9 $$\n");
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let e = run(&t, &json!({})).await.result.unwrap_err();
        assert!(
            matches!(&e, HookError::Exit { status, .. } if status == "killed by signal 9"),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn garbage_stdout_is_invalid_json_with_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let path = script(
            dir.path(),
            "garbage.sh",
            "#!/bin/sh\necho 'debug: computing' >&2\necho 'hello there'\n",
        );
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let c = run(&t, &json!({})).await;
        let e = c.result.unwrap_err();
        let HookError::InvalidJson {
            snippet,
            stderr_tail,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(snippet, "hello there");
        assert_eq!(stderr_tail, "debug: computing");
        assert!(e.to_string().contains("debug: computing"));
        assert_eq!(c.raw_response.as_deref(), Some("hello there\n"));
    }

    #[tokio::test]
    async fn non_object_stdout_is_rejected() {
        let t = target(&["sh", "-c", "echo '[1]'"], LONG, None);
        let e = run(&t, &json!({})).await.result.unwrap_err();
        assert!(e.to_string().contains("got an array"), "{e}");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group_including_grandchildren() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let body = format!(
            "#!/bin/sh\nsleep 1000 &\necho \"$$ $!\" > {}\nwait\n",
            pids.display()
        );
        let path = script(dir.path(), "hang.sh", &body);
        let t = target(&[path.to_str().unwrap()], Duration::from_millis(500), None);
        let c = run(&t, &json!({})).await;
        let e = c.result.unwrap_err();
        assert!(matches!(&e, HookError::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains("within 500ms (exec.timeout)"), "{e}");
        assert!(c.latency >= Duration::from_millis(500));
        let pids = wait_for_pids(&pids, 2).await;
        // The leader was reaped before the call returned (no zombie of ours).
        // SAFETY: signal 0 only checks for existence.
        assert_ne!(
            unsafe { libc::kill(pids[0], 0) },
            0,
            "leader {} not reaped",
            pids[0]
        );
        wait_gone(pids[1]).await;
    }

    #[tokio::test]
    async fn leftover_background_children_are_killed_after_exit() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        // The background sleep inherits stdout: without cleanup the call would hang.
        let body = format!(
            "#!/bin/sh\nsleep 1000 &\necho \"$!\" > {}\necho '{{\"ok\": true}}'\n",
            pids.display()
        );
        let path = script(dir.path(), "bg.sh", &body);
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let c = run(&t, &json!({})).await;
        assert_eq!(c.result.unwrap(), json!({"ok": true}));
        assert!(c.latency < LONG);
        let pids = wait_for_pids(&pids, 1).await;
        wait_gone(pids[0]).await;
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let body = format!(
            "#!/bin/sh\nsleep 1000 &\necho \"$$ $!\" > {}\nwait\n",
            pids.display()
        );
        let path = script(dir.path(), "hang.sh", &body);
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let client = HookClient::new().unwrap();
        let request = json!({});
        let info = info();
        let call = client.call(&t, &info, &request);
        let found = tokio::select! {
            c = call => panic!("call ended: {:?}", c.result),
            p = wait_for_pids(&pids, 2) => p,
        };
        // The call future is dropped here, as on Ctrl-C.
        wait_gone(found[0]).await;
        wait_gone(found[1]).await;
    }

    #[tokio::test]
    async fn script_that_ignores_stdin_gets_a_large_request() {
        let big = "x".repeat(10 << 20);
        let t = target(&["sh", "-c", "echo '{\"ok\": 1}'"], LONG, None);
        let c = run(&t, &json!({"blob": big})).await;
        assert_eq!(c.result.unwrap(), json!({"ok": 1}));
    }

    #[tokio::test]
    async fn large_request_and_chatty_script_do_not_deadlock() {
        let dir = tempfile::tempdir().unwrap();
        // Fills the stderr pipe before reading stdin, then answers with a large stdout.
        script(
            dir.path(),
            "chatty.py",
            r#"import json, sys
sys.stderr.write("e" * (1 << 20) + "\nlast\n")
sys.stderr.flush()
req = json.load(sys.stdin)
json.dump({"len": len(req["blob"]), "pad": "p" * (2 << 20)}, sys.stdout)
"#,
        );
        let big = "x".repeat(10 << 20);
        let t = target(&["python3", "chatty.py"], LONG, Some(dir.path()));
        let c = run(&t, &json!({"blob": big})).await;
        let v = c.result.unwrap();
        assert_eq!(v["len"], json!(10 << 20));
        assert_eq!(c.stderr.len(), STDERR_KEEP);
        assert!(c.stderr.ends_with("e\nlast\n"));
        assert_eq!(
            c.raw_response.unwrap().len(),
            crate::hooks::RAW_RESPONSE_KEEP
        );
    }

    #[tokio::test]
    async fn stdout_over_the_limit_is_rejected() {
        let t = target(
            &["sh", "-c", "cat >/dev/null; head -c 70000000 /dev/zero"],
            LONG,
            None,
        );
        let e = run(&t, &json!({})).await.result.unwrap_err();
        assert!(matches!(e, HookError::ResponseTooLarge { .. }), "{e:?}");
    }

    #[tokio::test]
    async fn spawn_failures_explain_themselves() {
        let t = target(&["kubectl-meta-no-such-program"], LONG, None);
        let e = run(&t, &json!({})).await.result.unwrap_err().to_string();
        assert!(
            e.contains("command not found: kubectl-meta-no-such-program"),
            "{e}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.py");
        std::fs::write(&path, "print('{}')\n").unwrap();
        let t = target(&[path.to_str().unwrap()], LONG, None);
        let e = run(&t, &json!({})).await.result.unwrap_err().to_string();
        assert!(e.contains("chmod +x"), "{e}");

        let t = target(&[], LONG, None);
        let e = run(&t, &json!({})).await.result.unwrap_err().to_string();
        assert!(e.contains("exec.command is empty"), "{e}");

        let missing = dir.path().join("nope");
        let t = target(&["true"], LONG, Some(&missing));
        let e = run(&t, &json!({})).await.result.unwrap_err().to_string();
        assert!(
            e.contains("working directory") && e.contains("does not exist"),
            "{e}"
        );
    }

    #[test]
    fn command_lines_quote_when_needed() {
        let cmd = |v: &[&str]| command_line(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(cmd(&["python3", "hooks/sync.py"]), "python3 hooks/sync.py");
        assert_eq!(cmd(&["sh", "-c", "echo hi"]), "sh -c 'echo hi'");
        assert_eq!(cmd(&["it's"]), r"'it'\''s'");
        assert_eq!(cmd(&[""]), "''");
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let text: String = (1..=25).map(|i| format!("l{i}\n")).collect();
        let tail = stderr_tail(text.as_bytes());
        assert_eq!(tail.lines().count(), 20);
        assert!(tail.starts_with("l6\n") && tail.ends_with("l25"));
        assert_eq!(stderr_tail(b""), "");
    }
}
