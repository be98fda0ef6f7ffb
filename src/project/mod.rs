//! The project file, `kubectl-meta.yaml`: one file that says what a project's controllers are,
//! what to create before they start, how its hooks are built and started, where its hook tests
//! live and where it runs, so that `kubectl meta dev`, `test`, `dryrun`, `deploy` and `inspect`
//! need no flags inside a project (the schema, and what each command does with it:
//! docs/project-file.md).
//!
//! - [`discover`]: finding the file (the current directory, then each parent, as cargo finds
//!   `Cargo.toml`);
//! - [`schema`]: the file as written (serde, unknown fields refused);
//! - [`load`]: parsing, with `file:line:column` and the field in every error;
//! - [`validate`]: checking the values and resolving the paths into a [`Project`];
//! - [`program`]: whether a hook command's program exists;
//! - [`build`]: running a hook's `build` step;
//! - [`error`]: the typed errors.
//!
//! Paths in the file are relative to its directory; a [`Project`] holds them absolute.

pub mod build;
pub mod discover;
pub mod error;
pub mod load;
pub mod program;
pub mod schema;
pub mod validate;

use std::path::{Path, PathBuf};

pub use build::Build;
pub use error::{BuildError, Problem, ProjectError};

/// The directory, in the project directory, that holds local state (the sandbox's kubeconfig).
pub const STATE_DIR: &str = ".kubectl-meta";

/// A project file, checked, with its paths resolved (absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The file (absolute).
    pub file: PathBuf,
    /// The file as messages show it (`./kubectl-meta.yaml`, `../kubectl-meta.yaml`).
    pub shown: String,
    /// The project directory: the file's.
    pub dir: PathBuf,
    /// `name`.
    pub name: String,
    /// `controllers`: definition files or directories.
    pub controllers: Vec<PathBuf>,
    /// `apply`: documents created before the controllers start, in order.
    pub apply: Vec<PathBuf>,
    /// `hooks`.
    pub hooks: Vec<Hook>,
    /// `tests`: hook test-case directories.
    pub tests: Vec<PathBuf>,
    /// `record`, when given.
    pub record: Option<PathBuf>,
    /// `target`.
    pub target: Target,
}

/// One of `hooks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// `name`.
    pub name: String,
    /// `build`: a `sh -c` command run in the project directory.
    pub build: Option<String>,
    /// `server`: a `sh -c` command that starts the webhook server.
    pub server: Option<String>,
    /// `url`: the base URL webhook URLs are pointed at.
    pub url: Option<String>,
    /// `ready`: the URL that answers 2xx once the server is ready.
    pub ready: Option<String>,
    /// `watch` (absolute; empty: the project directory).
    pub watch: Vec<PathBuf>,
    /// `outputs`: what the build writes (absolute; never watched).
    pub outputs: Vec<PathBuf>,
}

/// Where the commands run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An in-process sandbox (the default).
    Sandbox,
    /// A kubeconfig context.
    Context {
        /// The context's name.
        name: String,
        /// The kubeconfig file, when named.
        kubeconfig: Option<PathBuf>,
    },
}

impl Project {
    /// Find the project file governing `start` (see [`discover::find`]) and load it; `None`
    /// when there is none.
    pub fn discover(start: &Path) -> Result<Option<Project>, ProjectError> {
        match discover::find(start) {
            Some(found) => Project::load(&found.path, &found.shown).map(Some),
            None => Ok(None),
        }
    }

    /// Read, parse and check the project file at `path` (shown in messages as `shown`).
    pub fn load(path: &Path, shown: &str) -> Result<Project, ProjectError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProjectError::Io {
            shown: shown.to_string(),
            source,
        })?;
        let file = load::parse(shown, &text)?;
        let path = std::path::absolute(path).map_err(|source| ProjectError::Io {
            shown: shown.to_string(),
            source,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let path_var = std::env::var_os("PATH");
        let mut project =
            validate::resolve(file, &path, &dir, path_var.as_deref()).map_err(|problems| {
                ProjectError::Invalid {
                    shown: shown.to_string(),
                    problems,
                }
            })?;
        project.shown = shown.to_string();
        Ok(project)
    }

    /// `.kubectl-meta/` in the project directory: local state.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join(STATE_DIR)
    }

    /// Where `dev` writes the sandbox's kubeconfig, and where `dryrun` and `inspect` look for
    /// a running dev sandbox.
    pub fn sandbox_kubeconfig(&self) -> PathBuf {
        self.state_dir().join("sandbox.kubeconfig")
    }

    /// Where `dev`'s sandbox keeps its objects across runs (a sandbox target), and what
    /// `dryrun` and `inspect` read when no dev loop runs.
    pub fn sandbox_state(&self) -> PathBuf {
        self.state_dir().join("sandbox")
    }

    /// Where `dev --record` with no value writes: `record`, else the first of `tests`.
    pub fn record_dir(&self) -> Option<PathBuf> {
        self.record.clone().or_else(|| self.tests.first().cloned())
    }

    /// The hook with a server or a URL (at most one: [`validate`]).
    pub fn served_hook(&self) -> Option<&Hook> {
        self.hooks
            .iter()
            .find(|h| h.server.is_some() || h.url.is_some())
    }

    /// The paths `dev` watches for reloads: every hook's `watch`, or the project directory
    /// when a hook has none (or there are no hooks).
    pub fn watch_paths(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        if self.hooks.is_empty() || self.hooks.iter().any(|h| h.watch.is_empty()) {
            v.push(self.dir.clone());
        }
        for h in &self.hooks {
            v.extend(h.watch.iter().cloned());
        }
        v.sort();
        v.dedup();
        v
    }

    /// What a change never reloads for: the test and record directories, `.kubectl-meta/`,
    /// and the hooks' build outputs.
    pub fn never_watched(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.tests.clone();
        v.extend(self.record.clone());
        v.push(self.state_dir());
        for h in &self.hooks {
            v.extend(h.outputs.iter().cloned());
        }
        v.sort();
        v.dedup();
        v
    }

    /// The hooks' `build` steps, in order.
    pub fn builds(&self) -> Vec<Build> {
        self.hooks
            .iter()
            .filter_map(|h| {
                h.build.as_ref().map(|command| Build {
                    hook: h.name.clone(),
                    command: command.clone(),
                    dir: self.dir.clone(),
                    watch: if h.watch.is_empty() {
                        vec![self.dir.clone()]
                    } else {
                        h.watch.clone()
                    },
                })
            })
            .collect()
    }

    /// The line commands print on stderr: `using project NAME (FILE)`.
    pub fn using_line(&self) -> String {
        format!("using project {} ({})", self.name, self.shown)
    }
}

#[cfg(test)]
mod tests;
