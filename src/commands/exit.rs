//! Exit codes: a small classification of failures at the command-line edge.
//!
//! The engine and the library layers keep their own error types; the commands tag the errors
//! they return with a [`Class`] ([`Classify::class`], [`fail`]) and `main` maps the class to
//! the process exit code. Codes follow kubectl's conventions: 0 success, 1 reserved for
//! "differences found" (as `kubectl diff`), 2 and up one per class of failure. The table is
//! documented in docs/guide/dev.md ("Exit codes"); [`Class::ALL`] is what that table is checked against.

use std::fmt;

/// A class of failure, each with its own exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bad flags, bad definitions or files, an unknown name: fix the command line or the input.
    Usage,
    /// The cluster (or the sandbox) cannot be reached, or the API refused a request (also
    /// `--once` ending on writes held for an unreachable API server, or on syncs whose API
    /// requests failed for the server's reasons: `engine::error::Layer::Api`).
    Cluster,
    /// `--once`: something did not converge before `--timeout` (a sync kept failing on its
    /// hook, its answer, an object rejected as invalid or its parent; a rollout or a resource
    /// never came).
    NotConverged,
    /// Refused for safety: a non-local context without `--allow-context`, another dev loop
    /// holds the controller's lease (or took it over), an in-cluster Metacontroller runs the
    /// same controller.
    Refused,
    /// `--resync/--pause/--resume`: no dev loop is running, or none could do what was asked
    /// (e.g. no such parent).
    Control,
    /// Anything else: the local environment (runtime, signals, data directory) or a bug.
    Internal,
    /// Interrupted by Ctrl-C or SIGTERM before `--once` finished or while `dev` was starting,
    /// or a second time while stopping (128 + SIGINT).
    Interrupted,
}

impl Class {
    /// Every class, in the order of the table in docs/guide/dev.md.
    #[cfg(test)]
    pub const ALL: [Class; 7] = [
        Class::Usage,
        Class::Cluster,
        Class::NotConverged,
        Class::Refused,
        Class::Control,
        Class::Internal,
        Class::Interrupted,
    ];

    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Class::Usage => 2,
            Class::Cluster => 3,
            Class::NotConverged => 4,
            Class::Refused => 5,
            Class::Control => 6,
            Class::Internal => 7,
            Class::Interrupted => 130,
        }
    }
}

/// An error tagged with its [`Class`]; its message and causes are the inner error's.
#[derive(Debug)]
pub struct Classified {
    class: Class,
    source: anyhow::Error,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for Classified {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl Classified {
    /// The class.
    pub fn class(&self) -> Class {
        self.class
    }
}

/// The class of an error returned by a command: the first [`Classified`] in its chain
/// (innermost tags win over none), else [`Class::Internal`].
pub fn class_of(err: &anyhow::Error) -> Class {
    err.chain()
        .find_map(|e| e.downcast_ref::<Classified>().map(Classified::class))
        .unwrap_or(Class::Internal)
}

/// Tag a result's error with a class.
pub trait Classify<T> {
    /// Tag the error (if any) with `class`.
    fn class(self, class: Class) -> anyhow::Result<T>;
}

impl<T, E> Classify<T> for Result<T, E>
where
    E: Into<anyhow::Error>,
{
    fn class(self, class: Class) -> anyhow::Result<T> {
        self.map_err(|e| tag(e.into(), class))
    }
}

/// Tag `err` with `class` (an error already tagged keeps its class).
pub fn tag(err: anyhow::Error, class: Class) -> anyhow::Error {
    if err.chain().any(|e| e.is::<Classified>()) {
        return err;
    }
    anyhow::Error::new(Classified { class, source: err })
}

/// A new error of `class` with `message`.
pub fn fail(class: Class, message: impl fmt::Display) -> anyhow::Error {
    tag(anyhow::anyhow!("{message}"), class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_survive_context_and_default_to_internal() {
        let e = fail(Class::Usage, "bad flag").context("while starting");
        assert_eq!(class_of(&e), Class::Usage);
        assert_eq!(format!("{e:#}"), "while starting: bad flag");
        let io: Result<(), std::io::Error> = Err(std::io::Error::other("gone"));
        let e = io.class(Class::Cluster).unwrap_err();
        assert_eq!(class_of(&e), Class::Cluster);
        assert_eq!(format!("{e:#}"), "gone");
        // The first tag stays.
        let e = tag(fail(Class::Refused, "no"), Class::Cluster);
        assert_eq!(class_of(&e), Class::Refused);
        assert_eq!(class_of(&anyhow::anyhow!("plain")), Class::Internal);
        let codes: Vec<u8> = Class::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(codes, vec![2, 3, 4, 5, 6, 7, 130]);
    }
}
