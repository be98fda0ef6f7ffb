//! The TUI in a real terminal: `kubectl-meta dev --sandbox --apply -f examples/hello-world` runs
//! inside tmux (its own server socket, a 120x40 window); the test reads the screen with
//! `capture-pane`, waits until it shows the parent and its Pod child, presses `p` and sees
//! PAUSED, presses `q` and sees the shell prompt back with the terminal restored (`stty -a`
//! shows canonical mode and echo on).
//!
//! Needs tmux (.ci/run installs Debian's package); without it the test fails and says so.

mod common;

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

#[test]
fn dev_tui_in_a_real_terminal_pauses_quits_and_restores_the_terminal() {
    assert!(
        has_tmux(),
        "tmux is not installed: this test runs the TUI in a real terminal through tmux. Install it (apt-get install tmux; .ci/run does) and re-run"
    );
    let home = tempfile::tempdir().expect("tempdir");
    let repo = common::cli::repo();
    let bin = env!("CARGO_BIN_EXE_kubectl-meta");
    let tmux = Tmux {
        socket: format!("kubectl-meta-tui-{}", std::process::id()),
    };
    let shell = format!(
        "env -i PATH={path} HOME={home} TERM=xterm-256color XDG_DATA_HOME={home} PS1='tui-test$ ' bash --norc --noprofile",
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
    let s = tmux.wait("the parent default/hello and its Pod child", |s| {
        s.contains("default/hello") && s.contains("Pod.v1") && s.contains("= hello")
    });
    assert!(s.contains("APPLY"), "{s}");
    assert!(s.contains("hello-world-controller"), "{s}");

    // p pauses writes.
    tmux.send(&["p"]);
    tmux.wait("PAUSED in the status bar", |s| s.contains("PAUSED"));

    // q quits; the prompt is back and the terminal is out of raw mode.
    tmux.send(&["q"]);
    tmux.wait("the shell prompt after quitting", |s| {
        !s.contains("kubectl-meta dev │") && s.trim_end().ends_with("tui-test$")
    });
    tmux.send(&["stty -a; echo stty-done", "Enter"]);
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
