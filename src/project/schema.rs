//! The project file as written (`kubectl-meta.yaml`): the serde types, every field kept with
//! where it is in the file ([`Spanned`]) so that a later check can name `file:line:column`.
//! Unknown fields are errors (`deny_unknown_fields`). What the fields mean:
//! docs/project-file.md; the checked, resolved form is [`super::Project`].

use serde::Deserialize;
use serde_saphyr::Spanned;

/// The `apiVersion` a project file declares.
pub const API_VERSION: &str = "kubectl-meta.dev/v1alpha1";

/// The `kind` a project file declares.
pub const KIND: &str = "Project";

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProjectFile {
    /// Must be [`API_VERSION`].
    pub api_version: Spanned<String>,
    /// Must be [`KIND`].
    pub kind: Spanned<String>,
    /// The project's name (a DNS label).
    pub name: Spanned<String>,
    /// Controller definitions: files or directories (as `-f`).
    pub controllers: Spanned<Vec<Spanned<String>>>,
    /// Documents created before the controllers start, in order (as `dev --apply`).
    #[serde(default)]
    pub apply: Vec<Spanned<String>>,
    /// How the hooks are built and started.
    #[serde(default)]
    pub hooks: Vec<HookEntry>,
    /// Hook test-case directories.
    #[serde(default)]
    pub tests: Vec<Spanned<String>>,
    /// Where `dev --record` with no value writes (default: the first of `tests`).
    #[serde(default)]
    pub record: Option<Spanned<String>>,
    /// Where the commands run (default: an in-process sandbox).
    #[serde(default)]
    pub target: Option<Spanned<TargetEntry>>,
}

/// One entry of `hooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// Used in messages.
    pub name: Spanned<String>,
    /// `sh -c` command run in the project directory before the first start or call, and
    /// again on every change before the restart or next call.
    #[serde(default)]
    pub build: Option<Spanned<String>>,
    /// `sh -c` command that starts the webhook server (as `dev --hook-server`).
    #[serde(default)]
    pub server: Option<Spanned<String>>,
    /// The base URL webhook URLs are pointed at (as `--hook-base-url`).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// The server is ready when a GET of this URL answers 2xx (as `--hook-server-ready`).
    #[serde(default)]
    pub ready: Option<Spanned<String>>,
    /// Paths watched for reload (default: the project directory).
    #[serde(default)]
    pub watch: Vec<Spanned<String>>,
    /// What the build writes (never watched, so a build does not trigger itself).
    #[serde(default)]
    pub outputs: Vec<Spanned<String>>,
}

/// `target`: exactly one of `sandbox` and `context`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    /// An in-process sandbox (`sandbox: {}`).
    #[serde(default)]
    pub sandbox: Option<Spanned<SandboxEntry>>,
    /// A kubeconfig context (a real cluster).
    #[serde(default)]
    pub context: Option<Spanned<String>>,
    /// With `context`: the kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[serde(default)]
    pub kubeconfig: Option<Spanned<String>>,
}

/// `target.sandbox`: no settings yet (`{}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxEntry {}
