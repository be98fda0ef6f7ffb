//! `kubectl meta init` benchmark: `cargo bench --bench init [-- --lang LANG]`.
//!
//! Per language (python, javascript, go, rust; composite kind), what a new user runs, timed by
//! wall clock with the real binary, a private HOME and no kubeconfig:
//! - `init` in a new directory;
//! - the hook's build (Go, Rust: the project file's `hooks[].build`; caches under the bench's
//!   target dir, so after the first run this is the incremental build);
//! - the end-to-end run: an in-process sandbox, the CRD and sample applied, the controller run
//!   until converged (`dev --sandbox --apply ... --once`, what `kubectl meta dev --once` does in
//!   the project);
//! - the hook tests (`test hook-tests -f controller.yaml`).
//!
//! Goal (issue 37): python's three commands in under 60 s on a 2-core machine, sandbox start
//! included.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

/// `--lang L` from the command line (cargo bench passes `--bench` too): only that language.
fn lang_arg() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--lang")
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Run `cmd` in `dir`, failing the bench on a non-zero exit; the wall time.
fn timed(what: &str, cmd: &mut Command) -> Duration {
    let start = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn meta(home: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1");
    c
}

/// The project file's `hooks[].build` commands.
fn builds(project: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(project.join("kubectl-meta.yaml")).expect("project file");
    let file: serde_json::Value = serde_saphyr::from_str(&text).expect("project file is YAML");
    file["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["build"].as_str().map(String::from))
        .collect()
}

fn main() {
    let only = lang_arg();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("init-bench");
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let env_or = |var: &str, default: PathBuf| std::env::var_os(var).map_or(default, PathBuf::from);
    println!(
        "kubectl meta init, then the end-to-end run and the hook tests (composite, wall time):"
    );
    for lang in ["python", "javascript", "go", "rust"] {
        if only.as_deref().is_some_and(|l| l != lang) {
            continue;
        }
        let home = tempfile::tempdir().expect("tempdir");
        let root = tempfile::tempdir().expect("tempdir");
        let name = format!("{lang}-site");
        let dir = root.path().join(&name);
        let init = timed(
            "init",
            &mut meta(home.path(), root.path(), &["init", &name, "--lang", lang]),
        );
        let mut build = Duration::ZERO;
        for b in builds(&dir) {
            build += timed(
                &format!("build `{b}`"),
                Command::new("sh")
                    .args(["-c", &b])
                    .current_dir(&dir)
                    .env("GOCACHE", cache.join("go-build"))
                    .env("GOPATH", cache.join("gopath"))
                    .env("GOTOOLCHAIN", "local")
                    .env("CARGO_TARGET_DIR", cache.join("cargo-target"))
                    .env("CARGO_HOME", env_or("CARGO_HOME", real_home.join(".cargo")))
                    .env(
                        "RUSTUP_HOME",
                        env_or("RUSTUP_HOME", real_home.join(".rustup")),
                    )
                    .env("CARGO_NET_OFFLINE", "true"),
            );
        }
        let dev = timed(
            "dev --once",
            &mut meta(
                home.path(),
                &dir,
                &[
                    "dev",
                    "--sandbox",
                    "--apply",
                    "-f",
                    "crd.yaml",
                    "-f",
                    "sample.yaml",
                    "-f",
                    "controller.yaml",
                    "--once",
                    "--no-tui",
                ],
            ),
        );
        let test = timed(
            "test",
            &mut meta(
                home.path(),
                &dir,
                &["test", "hook-tests", "-f", "controller.yaml"],
            ),
        );
        let total = init + build + dev + test;
        let goal = if lang == "python" {
            format!(
                "  (goal < 60 s: {})",
                if total < Duration::from_secs(60) {
                    "met"
                } else {
                    "MISSED"
                }
            )
        } else {
            String::new()
        };
        println!(
            "  {lang:<10}  init {:>6.2}s  build {:>6.2}s  dev --once {:>6.2}s  test {:>6.2}s  total {:>6.2}s{goal}",
            init.as_secs_f64(),
            build.as_secs_f64(),
            dev.as_secs_f64(),
            test.as_secs_f64(),
            total.as_secs_f64(),
        );
    }
}
