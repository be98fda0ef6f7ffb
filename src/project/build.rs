//! A hook's `build` step: a `sh -c` command run in the project directory before the hook first
//! starts (or is first called), and again on every change under its watched paths before the
//! hook restarts or is next called. Its output is kept (the last [`KEEP_LINES`] lines) for the
//! message when it fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::error::BuildError;

/// How many of a failed build's last output lines its error shows.
pub const KEEP_LINES: usize = 40;

/// One hook's build step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// The hook's name (for messages).
    pub hook: String,
    /// The `sh -c` command.
    pub command: String,
    /// Where it runs: the project directory.
    pub dir: PathBuf,
    /// A change under one of these paths runs it again.
    pub watch: Vec<PathBuf>,
}

impl Build {
    /// Whether a change of `path` (absolute) calls for this build.
    pub fn covers(&self, path: &Path) -> bool {
        self.watch.iter().any(|w| path.starts_with(w))
    }

    /// Run it to the end; stdout and stderr are collected (interleaved as they come).
    pub async fn run(&self) -> Result<(), BuildError> {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            // 2>&1: one stream, in the order the build wrote it.
            .arg(format!("exec 2>&1; {}", self.command))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|source| BuildError::Start {
                hook: self.hook.clone(),
                command: self.command.clone(),
                source,
            })?;
        if out.status.success() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(KEEP_LINES)..].join("\n");
        Err(BuildError::Failed {
            hook: self.hook.clone(),
            command: self.command.clone(),
            dir: self.dir.clone(),
            status: out.status.to_string(),
            output: tail,
        })
    }
}

/// Run `builds` in order; the first failure stops.
pub async fn run_all(builds: &[Build]) -> Result<(), BuildError> {
    for b in builds {
        b.run().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(dir: &Path, command: &str) -> Build {
        Build {
            hook: "web".into(),
            command: command.into(),
            dir: dir.to_path_buf(),
            watch: vec![dir.to_path_buf()],
        }
    }

    #[tokio::test]
    async fn a_build_runs_in_the_project_directory() {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), "echo built > out.txt")
            .run()
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
            "built\n"
        );
    }

    #[tokio::test]
    async fn a_failed_build_says_which_hook_and_shows_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let e = build(
            dir.path(),
            "echo compiling; echo 'syntax error' >&2; exit 3",
        )
        .run()
        .await
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("hook web: build `echo compiling"), "{e}");
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("compiling\nsyntax error"), "{e}");
    }
}
