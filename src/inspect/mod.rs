//! `kubectl meta inspect`: why an object exists, who owns it, and what else hangs off its parent.
//!
//! The work, in order:
//! 1. [`api::Catalog::discover`]: every served type with its short names (kubectl's resource
//!    syntax is resolved against it, [`api::Catalog::resolve`]).
//! 2. The inspected object and its owner chain up to the root(s), by `GET` (owners may be
//!    cluster-scoped; several owners give several roots).
//! 3. [`controllers`]: the Composite-, Decorator- and MapControllers that govern objects on that
//!    path (from the cluster, or from `-f` files), which say which types matter.
//! 4. Metadata-only lists (`PartialObjectMetadataList`) of only those types (or, without a
//!    governing controller, of every listable type in the namespace plus cluster-scoped ones),
//!    in parallel; forbidden types are skipped and reported.
//! 5. [`graph`]: nodes and edges from `ownerReferences`, plus what only controller knowledge
//!    reveals (adoption candidates, children to be released, map keys and tombstones,
//!    decorator attachments, Synced / observedGeneration); full objects are fetched only for
//!    the rows that show a status.
//! 6. [`render_tree`] (a table with tree glyphs) or [`render_json`] (`nodes` + `edges`).

pub mod api;
pub(crate) mod controllers;
pub mod graph;
pub(crate) mod render_json;
pub(crate) mod render_tree;

use std::path::PathBuf;

pub use api::{Catalog, Fetcher, RequestStats};
pub use graph::{Direction, Graph, InspectRequest};

/// Why `inspect` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The TYPE part of `TYPE/NAME` names no served resource type.
    #[error(
        "the server doesn't have a resource type {asked:?}{}",
        did_you_mean(suggestion)
    )]
    UnknownType {
        /// What the user typed.
        asked: String,
        /// The closest served name, if one is close.
        suggestion: Option<String>,
    },
    /// The argument is not `TYPE/NAME` (or `TYPE NAME`).
    #[error("{0}")]
    BadArgument(String),
    /// The inspected object does not exist.
    #[error("{type_name} {name:?} not found{}", in_namespace(namespace))]
    NotFound {
        /// The resolved type (`pods`, `greetings.accept.example.com`).
        type_name: String,
        /// The object name.
        name: String,
        /// Its namespace (None for cluster-scoped types).
        namespace: Option<String>,
    },
    /// Reading the inspected object itself is forbidden.
    #[error("reading {what} is forbidden: {message}")]
    Forbidden {
        /// What was read.
        what: String,
        /// The server's message.
        message: String,
    },
    /// Controller definitions given with `-f` are invalid.
    #[error(transparent)]
    Spec(Box<crate::spec::SpecError>),
    /// The API server failed or could not be reached.
    #[error("{what}: {message}")]
    Api {
        /// What was being done.
        what: String,
        /// The client's message.
        message: String,
    },
}

impl From<crate::spec::SpecError> for InspectError {
    fn from(e: crate::spec::SpecError) -> Self {
        Self::Spec(Box::new(e))
    }
}

fn did_you_mean(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!("; did you mean {s:?}?"))
        .unwrap_or_default()
}

fn in_namespace(ns: &Option<String>) -> String {
    ns.as_ref()
        .map(|n| format!(" in namespace {n:?}"))
        .unwrap_or_default()
}

/// Where controller definitions come from.
#[derive(Debug, Clone, Default)]
pub enum ControllerSource {
    /// Read CompositeController, DecoratorController and MapController objects from the cluster
    /// (when their CRDs are served).
    #[default]
    Cluster,
    /// Load them from these files and directories (as `kubectl meta dev -f`).
    Files(Vec<PathBuf>),
}
