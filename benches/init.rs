//! `kubectl meta init` benchmark: `cargo bench --bench init [-- --lang LANG]`.
//!
//! Per language (python, javascript, go, rust; composite kind), the three commands a new user
//! runs, with no flags in the project, timed by wall clock with the real binary, a private HOME
//! and no kubeconfig:
//! - `kubectl meta init NAME --lang LANG` in an empty directory;
//! - `kubectl meta dev --once` in the project: an in-process sandbox, the CRD and sample
//!   applied, the hook built (Go, Rust: the project file's `hooks[].build`; caches under the
//!   bench's target dir, so after the first run this is an incremental build), the controller
//!   run until converged;
//! - `kubectl meta test`: the project's hook tests.
//!
//! Goal (issue 37): python's three commands in under 60 s on a 2-core machine, sandbox start
//! included.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/common/hook_build_env.rs"]
mod hook_build_env;

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

fn main() {
    let only = lang_arg();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("init-bench");
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
        let mut dev_cmd = meta(home.path(), &dir, &["dev", "--once"]);
        hook_build_env::hook_build_env(&mut dev_cmd, &cache);
        let dev = timed("kubectl meta dev --once", &mut dev_cmd);
        let test = timed("kubectl meta test", &mut meta(home.path(), &dir, &["test"]));
        let total = init + dev + test;
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
            "  {lang:<10}  init {:>6.2}s  dev --once (hook build included) {:>6.2}s  test {:>6.2}s  total {:>6.2}s{goal}",
            init.as_secs_f64(),
            dev.as_secs_f64(),
            test.as_secs_f64(),
            total.as_secs_f64(),
        );
    }
}
