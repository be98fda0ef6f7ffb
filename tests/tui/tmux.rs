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

/// Start a shell in a tmux session of its own (120x40, `extra_env` in its environment), run
/// `kubectl-meta dev --sandbox --apply -f examples/hello-world` in it, and wait until the TUI
/// shows the parent and its Pod child in sync.
fn start_dev(name: &str, extra_env: &str) -> (Tmux, tempfile::TempDir) {
    assert!(
        has_tmux(),
        "tmux is not installed: this test runs the TUI in a real terminal through tmux. Install it (apt-get install tmux; .ci/run does) and re-run"
    );
    let home = tempfile::tempdir().expect("tempdir");
    let repo = common::cli::repo();
    let bin = env!("CARGO_BIN_EXE_kubectl-meta");
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
    let cmd = format!(
        "cd {} && {bin} dev --sandbox --apply -f {}",
        repo.display(),
        Path::new("examples/hello-world").display()
    );
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
    let (tmux, _home) = start_dev("main", "");

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
    let (tmux, _home) = start_dev("panic", "KUBECTL_META_TUI_PANIC_KEY=!");
    tmux.send(&["!"]);
    let s = tmux.wait("the panic message and the shell prompt", |s| {
        s.contains("KUBECTL_META_TUI_PANIC_KEY pressed") && s.trim_end().ends_with("tui-test$")
    });
    assert!(s.contains("panicked"), "{s}");
    assert!(s.contains("the terminal UI failed"), "{s}");
    assert_restored(&tmux);
}
