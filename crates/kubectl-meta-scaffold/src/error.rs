//! What can go wrong generating a project: every variant but [`ScaffoldError::Write`] is bad
//! input (exit 2, nothing written).

use std::path::PathBuf;

/// Why `kubectl meta init` generated nothing (or could not finish writing).
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The target directory has files and `--force` was not given.
    #[error(
        "{dir} is not empty ({first} and {count} more entr(ies)); pick an empty or new directory, or pass --force to write over it"
    )]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
        /// One of its entries.
        first: String,
        /// How many others.
        count: usize,
    },
    /// The target exists and is not a directory.
    #[error("{0} exists and is not a directory")]
    NotADirectory(PathBuf),
    /// A resource flag names a resource init does not know.
    #[error(
        "{flag} {value}: not a resource init can generate{hint}; accepted: {accepted} (RESOURCE[.GROUP], as `kubectl api-resources` names them)"
    )]
    UnknownResource {
        /// `--child`, `--target` or `--input`.
        flag: &'static str,
        /// What was given.
        value: String,
        /// ` (did you mean ...?)` or empty.
        hint: String,
        /// The accepted values.
        accepted: String,
    },
    /// `--parent` is not `KIND.GROUP`.
    #[error("--parent {value}: {why}")]
    BadParent {
        /// What was given.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// `--version` is not a Kubernetes version name.
    #[error("--version {0}: expected a version such as v1, v1alpha1 or v2beta3")]
    BadVersion(String),
    /// No `--parent` and the directory's name makes no kind.
    #[error(
        "cannot make a kind from the directory name {0:?} (it must start with a letter); pass --parent KIND.GROUP, e.g. --parent Website.demo.example.com"
    )]
    NoKindFromDir(String),
    /// A flag that does not apply to the chosen controller kind.
    #[error("{flag} applies only to --kind {applies_to}; drop it or use --kind {applies_to}")]
    FlagNotForKind {
        /// The flag.
        flag: &'static str,
        /// The controller kind it belongs to.
        applies_to: &'static str,
    },
    /// `--from-example` cannot be used: unreadable, not YAML, or not an object a CRD can describe.
    #[error("--from-example {path}: {message}")]
    Example {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        message: String,
    },
    /// Writing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl ScaffoldError {
    /// Bad input (exit 2), as opposed to a failure writing.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ScaffoldError::Write { .. })
    }
}
