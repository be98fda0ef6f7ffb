//! The TUI in a real terminal: `kubectl-meta dev --sandbox --apply -f examples/hello-world` runs
//! inside tmux (its own server socket, a 120x40 window); the test reads the screen with
//! `capture-pane`, waits until it shows the parent and its Pod child, presses `p` and sees
//! PAUSED, presses `q` and sees the shell prompt back with the terminal restored (`stty -a`
//! shows canonical mode and echo on). Also: resizing the window (`resize-window`) to below
//! the smallest usable size shows the "terminal too small" frame and back to the full frame;
//! and a panic in the UI (a debug-build-only key, `KUBECTL_META_TUI_PANIC_KEY`) leaves the
//! alternate screen and raw mode, prints the panic message and ends `dev`.
//!
//! Needs tmux (.ci/run installs Debian's package); without it the test fails and says so.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Generous: the sandbox starts, the CRD is applied, the exec hook (python3) runs twice.
const DEADLINE: Duration = Duration::from_secs(120);

/// A tmux server of its own (removed on drop).
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("running tmux")
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }

    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "tui"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Poll the screen until `ok` accepts it (no fixed sleeps: a short pause between looks).
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out after {DEADLINE:?} waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn has_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A shell in a tmux session of its own (120x40, `extra_env` in its environment, a fresh
/// HOME), at its prompt.
fn shell(name: &str, extra_env: &str) -> (Tmux, tempfile::TempDir) {
    assert!(
        has_tmux(),
        "tmux is not installed: this test runs the TUI in a real terminal through tmux. Install it (apt-get install tmux; .ci/run does) and re-run"
    );
    let home = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux {
        socket: format!("kubectl-meta-tui-{name}-{}", std::process::id()),
    };
    let shell = format!(
        "env -i PATH={path} HOME={home} TERM=xterm-256color XDG_DATA_HOME={home} {extra_env} PS1='tui-test$ ' bash --norc --noprofile",
        path = std::env::var("PATH").unwrap_or_default(),
        home = home.path().display(),
    );
    let out = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "120",
        "-y",
        "40",
        &shell,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
    tmux.wait("the shell prompt", |s| s.contains("tui-test$"));
    (tmux, home)
}

/// Start a shell in a tmux session of its own (120x40, `extra_env` in its environment), run
/// `kubectl-meta dev --sandbox --apply -f examples/hello-world` in it (in the repository, or
/// with `in_home` in the shell's HOME), and wait until the TUI shows the parent and its Pod
/// child in sync.
fn start_dev(name: &str, extra_env: &str, in_home: bool) -> (Tmux, tempfile::TempDir) {
    let (tmux, home) = shell(name, extra_env);
    let repo = common::cli::repo();
    let bin = env!("CARGO_BIN_EXE_kubectl-meta");
    let cmd = if in_home {
        format!(
            "cd {} && {bin} dev --sandbox --apply -f {}",
            home.path().display(),
            repo.join("examples/hello-world").display()
        )
    } else {
        format!(
            "cd {} && {bin} dev --sandbox --apply -f {}",
            repo.display(),
            Path::new("examples/hello-world").display()
        )
    };
    tmux.send(&[&cmd, "Enter"]);

    // The parent and its Pod child (in sync) on screen.
    let s = tmux.wait("the parent default/hello and its Pod child", shows_hello);
    assert!(s.contains("APPLY"), "{s}");
    assert!(s.contains("hello-world-controller"), "{s}");
    (tmux, home)
}

/// The full frame with the parent and its Pod child in sync.
fn shows_hello(s: &str) -> bool {
    s.contains("default/hello") && s.contains("Pod.v1") && s.contains("= hello")
}

/// The terminal is out of raw mode (`stty -a` says canonical mode and echo) and out of the
/// alternate screen, and typing works.
fn assert_restored(tmux: &Tmux) {
    let out = tmux.run(&["display-message", "-p", "-t", "tui", "#{alternate_on}"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "the terminal is still on the alternate screen:\n{}",
        tmux.screen()
    );
    tmux.send(&["clear; stty -a; echo stty-done", "Enter"]);
    let s = tmux.wait("stty output", |s| {
        s.lines().any(|l| l.trim() == "stty-done")
    });
    let words: Vec<&str> = s.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "the terminal was not restored (raw mode left on):\n{s}"
    );
    // Typing works normally again.
    tmux.send(&["echo typed-$((40+2))", "Enter"]);
    tmux.wait("the shell to echo", |s| s.contains("typed-42"));
}

#[test]
fn dev_tui_in_a_real_terminal_pauses_quits_and_restores_the_terminal() {
    let (tmux, _home) = start_dev("main", "", false);

    // Smaller than usable: the frame says so; large again: the full frame is back.
    let out = tmux.run(&["resize-window", "-t", "tui", "-x", "50", "-y", "14"]);
    assert!(out.status.success(), "tmux resize-window: {out:?}");
    tmux.wait("the 'terminal too small' frame", |s| {
        s.contains("terminal too small: 50x14")
    });
    let out = tmux.run(&["resize-window", "-t", "tui", "-x", "80", "-y", "24"]);
    assert!(out.status.success(), "tmux resize-window: {out:?}");
    let s = tmux.wait("the full frame at 80x24", shows_hello);
    assert!(!s.contains("too small"), "{s}");
    assert!(
        s.lines().count() <= 24 && s.lines().all(|l| l.chars().count() <= 80),
        "{s}"
    );

    // p pauses writes.
    tmux.send(&["p"]);
    tmux.wait("PAUSED in the status bar", |s| s.contains("PAUSED"));

    // q quits; the prompt is back and the terminal is out of raw mode.
    tmux.send(&["q"]);
    tmux.wait("the shell prompt after quitting", |s| {
        !s.contains("kubectl-meta dev │") && s.trim_end().ends_with("tui-test$")
    });
    assert_restored(&tmux);
}

/// A panic in the UI: the panic hook leaves raw mode and the alternate screen, the message is
/// printed on the restored terminal, and `dev` stops (the shell prompt comes back) instead of
/// running on without a screen.
#[test]
fn a_panic_in_the_tui_restores_the_terminal_and_ends_dev() {
    let (tmux, _home) = start_dev("panic", "KUBECTL_META_TUI_PANIC_KEY=!", false);
    tmux.send(&["!"]);
    let s = tmux.wait("the panic message and the shell prompt", |s| {
        s.contains("KUBECTL_META_TUI_PANIC_KEY pressed") && s.trim_end().ends_with("tui-test$")
    });
    assert!(s.contains("panicked"), "{s}");
    assert!(s.contains("the terminal UI failed"), "{s}");
    assert_restored(&tmux);
}

/// `f` in dev's TUI writes the flight recording (flight-PID.json in dev's directory): the
/// status bar names the file, which exists and is a recording holding the hello-world sync.
#[test]
fn f_in_dev_writes_the_flight_recording() {
    let (tmux, home) = start_dev("flight", "", true);
    tmux.send(&["f"]);
    let s = tmux.wait("the answer naming the flight file", |s| {
        s.contains("flight recording (") && s.contains("written to flight-")
    });
    let name = s
        .split_whitespace()
        .find(|w| w.starts_with("flight-") && w.ends_with(".json"))
        .unwrap_or_else(|| panic!("no file name on screen:\n{s}"));
    let file = home.path().join(name);
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{} not written ({e}); the screen:\n{s}", file.display()));
    let doc: serde_json::Value = serde_json::from_str(&text).expect("the recording is JSON");
    assert_eq!(doc["apiVersion"], "flight.kubectl-meta.io/v1", "{text}");
    assert_eq!(doc["kind"], "FlightRecording", "{text}");
    let events = doc["events"].as_array().expect("events");
    assert!(
        events.iter().any(|e| e["event"]["event"] == "hookCalled"
            && e["event"]["parent"] == "default/hello"),
        "no recorded hook call of default/hello: {text}"
    );
    assert_eq!(
        doc["controllers"][0]["metadata"]["name"],
        "hello-world-controller"
    );
    tmux.send(&["q"]);
    tmux.wait("the shell prompt after quitting", |s| {
        s.trim_end().ends_with("tui-test$")
    });
}

/// `kubectl meta replay FILE` on a terminal: the recording's timeline in the TUI, stepped with
/// `n` (forward) and `b` (back: rebuilt from the first state); the status bar shows the step
/// and the detail pane what that step's sync answered.
#[test]
fn replay_tui_steps_forward_twice_and_back_once() {
    let (tmux, home) = shell("replay", "");
    let file = home.path().join("flight.json");
    std::fs::write(
        &file,
        common::replay::recording(&["hello"], &["first", "second", "third"]),
    )
    .expect("write the recording");
    let bin = env!("CARGO_BIN_EXE_kubectl-meta");
    tmux.send(&[
        &format!(
            "cd {} && {bin} replay flight.json; echo replay-exit=$?",
            home.path().display()
        ),
        "Enter",
    ]);
    tmux.wait("step 0/3, the first sync waiting", |s| {
        s.contains("step 0/3 waiting")
    });
    // The Response tab: what the last sync answered.
    tmux.send(&["2"]);
    tmux.send(&["n"]);
    tmux.wait("step 1/3 and the first answer", |s| {
        s.contains("step 1/3 waiting") && s.contains(r#""value": "first""#)
    });
    tmux.send(&["n"]);
    let s = tmux.wait("step 2/3 and the second answer", |s| {
        s.contains("step 2/3 waiting") && s.contains(r#""value": "second""#)
    });
    assert!(!s.contains("third"), "{s}");
    tmux.send(&["b"]);
    let s = tmux.wait("back at step 1/3 with the first answer", |s| {
        s.contains("step 1/3 waiting") && s.contains(r#""value": "first""#)
    });
    assert!(!s.contains(r#""value": "second""#), "{s}");
    assert!(s.contains("back to step 1/3"), "{s}");
    // The help lists the replay's keys.
    tmux.send(&["?"]);
    tmux.wait("the replay's keys", |s| {
        s.contains("step forward") && s.contains("step back")
    });
    tmux.send(&["Escape"]);
    tmux.send(&["q"]);
    let s = tmux.wait("the summary and the exit code", |s| {
        s.lines().any(|l| l.starts_with("replay-exit="))
    });
    assert!(s.contains("replay-exit=0"), "{s}");
    assert!(s.contains("up to step 1 of 3 recorded"), "{s}");
    assert_restored(&tmux);
}
