//! Controller definitions: the CompositeController, DecoratorController and MapController types,
//! loading them from files (YAML or JSON, several documents, directories), and validating them
//! so that every mistake in a definition is reported at once, with its field path and a fix.
//!
//! - [`types`]: the serde types, [`Controller`], [`ControllerDef`] and [`Source`].
//! - [`load`]: [`load_paths`] and [`parse_controller`].
//! - [`validate`]: the rules a definition must follow ([`Problem`]s).
//! - [`duration`]: Go duration strings (`10s`, `1m30s`).
//! - [`pem`]: CA certificates in PEM (`caBundle`), parsed for validation and the hook callers.
//! - [`selector`]: `-l/--selector`, which definitions run (Metacontroller's
//!   `--target-label-selector`).

pub(crate) mod duration;
pub(crate) mod load;
pub(crate) mod pem;
pub(crate) mod selector;
pub(crate) mod types;
pub(crate) mod validate;

use std::fmt;
use std::path::PathBuf;

pub use duration::{DurationError, parse_go_duration};
pub use load::{
    Document, Loaded, load_documents, load_documents_with, load_paths, load_paths_with,
    parse_controller,
};
pub use selector::{ControllerSelector, ControllerSelectorError, Selection};
pub use types::*;

/// One thing wrong with a controller definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Path of the offending field, e.g. `spec.childResources[1].updateStrategy.method`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why controller definitions could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A path could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A directory holds no `*.yaml`, `*.yml` or `*.json` file.
    #[error("{} has no *.yaml, *.yml or *.json files; pass a directory with controller definitions, or the file itself", path.display())]
    EmptyDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// A file is not valid YAML or JSON.
    #[error("{} is not valid {format}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// `YAML` or `JSON`.
        format: &'static str,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// 1-based column of the error, when known.
        column: Option<usize>,
        /// The parser's message, with the position.
        message: String,
    },
    /// A document is not a Kubernetes object (not a mapping, or no apiVersion / kind), or
    /// names an unknown kind of the controller API group.
    #[error("{at}: {message}")]
    Document {
        /// Where the document came from.
        at: Source,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A controller definition breaks one or more rules.
    #[error(
        "{at}: {kind} {} is invalid:{}",
        display_name(name),
        render_problems(problems)
    )]
    Invalid {
        /// Where the definition came from.
        at: Source,
        /// Its kind.
        kind: &'static str,
        /// Its `metadata.name` (empty when missing).
        name: String,
        /// Everything wrong with it.
        problems: Vec<Problem>,
    },
    /// Two definitions of the same kind share a name.
    #[error(
        "{kind} {name:?} is defined twice: in {first} and in {second}; controller names must be unique per kind (rename one, or load only one of them)"
    )]
    Duplicate {
        /// The kind.
        kind: &'static str,
        /// The shared name.
        name: String,
        /// Where the first definition is.
        first: Source,
        /// Where the second definition is.
        second: Source,
    },
    /// The given paths hold no controller definition.
    #[error(
        "no controller definition (CompositeController, DecoratorController or MapController with apiVersion metacontroller.k8s.io/v1alpha1) in {}; {}",
        join_paths(paths),
        found_kinds(found)
    )]
    NoControllers {
        /// The paths as given.
        paths: Vec<PathBuf>,
        /// The kinds found instead (`apiVersion/Kind`, sorted, unique).
        found: Vec<String>,
    },
}

fn display_name(name: &str) -> String {
    if name.is_empty() {
        "(without metadata.name)".to_string()
    } else {
        format!("{name:?}")
    }
}

fn render_problems(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("\n  - {p}")).collect()
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn found_kinds(found: &[String]) -> String {
    if found.is_empty() {
        "the files hold no documents".to_string()
    } else {
        format!("found only {}", found.join(", "))
    }
}
