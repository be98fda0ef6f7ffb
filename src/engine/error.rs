//! Why a sync failed, as a typed error ([`SyncError`]) per layer: the hook call, the hook's
//! answer, the parent's own definition, API reads and writes, writes held while the API server
//! is away. Each variant knows how the controller loop treats it ([`SyncError::backoff`]): the
//! loop, the TUI and `--once` decide on the variant, never on the message text.

use std::time::Duration;

use crate::hooks::HookError;

/// Delay used when a hook answered 429 without a usable `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(500);

/// Why one sync of one parent (or map key) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// Calling a hook failed: it could not be reached, timed out, answered an error status,
    /// answered something that is not JSON, or said 429 "too many requests".
    #[error("{hook} hook failed: {source}")]
    Hook {
        /// The hook's name (`sync`, `finalize`, `customize`, `map`, `tombstone`).
        hook: String,
        /// What the call layer says happened.
        #[source]
        source: HookError,
    },
    /// The hook answered, but its answer cannot be used (wrong shape, invalid desired objects,
    /// objects that belong to another controller). The message names the hook and the field.
    #[error("{message}")]
    Answer {
        /// The hook's name.
        hook: String,
        /// What is wrong with the answer and how to fix it.
        message: String,
    },
    /// The parent's own definition is unusable (an invalid selector, a bad map key): fixed by
    /// editing the parent, not by retrying sooner.
    #[error("{0}")]
    Parent(String),
    /// Reading from the API server failed (related objects, revisions).
    #[error("{0}")]
    Read(String),
    /// One or more API writes failed (each message names the object and the server's answer).
    #[error("{}", .0.join("; "))]
    Write(Vec<String>),
    /// Nothing was written because writes are held (API server unreachable, controller lease
    /// unconfirmed); the sync runs again once they are released.
    #[error("not written: {0}")]
    Held(String),
    /// An engine invariant broke (a bug): reported, retried with backoff.
    #[error("internal: {0}")]
    Internal(String),
}

/// How the controller loop schedules the next attempt after a [`SyncError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// After this delay, not counted as a failure (a hook's 429 `Retry-After`).
    After(Duration),
    /// The key's exponential failure backoff.
    Exponential,
}

/// Which layer a [`SyncError`] comes from, as users see it (TUI, `--once` summary, exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The hook (call or answer): fix the hook.
    Hook,
    /// The parent object's definition: fix the parent.
    Parent,
    /// The API server (reads, writes, or unreachable).
    Api,
    /// The engine itself.
    Internal,
}

impl SyncError {
    /// A failed hook call.
    pub fn hook(hook: impl Into<String>, source: HookError) -> Self {
        SyncError::Hook {
            hook: hook.into(),
            source,
        }
    }

    /// An unusable hook answer.
    pub fn answer(hook: impl Into<String>, message: impl Into<String>) -> Self {
        SyncError::Answer {
            hook: hook.into(),
            message: message.into(),
        }
    }

    /// How the next attempt is scheduled.
    pub fn backoff(&self) -> Backoff {
        match self {
            SyncError::Hook { source, .. } if source.is_rate_limited() => {
                Backoff::After(source.retry_after().unwrap_or(DEFAULT_RETRY_AFTER))
            }
            _ => Backoff::Exponential,
        }
    }

    /// The hook's 429 delay, when it asked to be called later (not a failure).
    pub fn retry_after(&self) -> Option<Duration> {
        match self.backoff() {
            Backoff::After(d) => Some(d),
            Backoff::Exponential => None,
        }
    }

    /// Whether this is a real failure (reported as a `SyncError` Event on the parent and
    /// counted for backoff), as opposed to a hook asking to be called later.
    pub fn is_failure(&self) -> bool {
        self.retry_after().is_none()
    }

    /// The layer it comes from.
    pub fn layer(&self) -> Layer {
        match self {
            SyncError::Hook { .. } | SyncError::Answer { .. } => Layer::Hook,
            SyncError::Parent(_) => Layer::Parent,
            SyncError::Read(_) | SyncError::Write(_) | SyncError::Held(_) => Layer::Api,
            SyncError::Internal(_) => Layer::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_is_a_delay_not_a_failure() {
        let e = SyncError::hook(
            "sync",
            HookError::TooManyRequests {
                target: "http://h".into(),
                retry_after: Some(Duration::from_secs(3)),
            },
        );
        assert_eq!(e.backoff(), Backoff::After(Duration::from_secs(3)));
        assert!(!e.is_failure());
        let e = SyncError::hook(
            "sync",
            HookError::TooManyRequests {
                target: "http://h".into(),
                retry_after: None,
            },
        );
        assert_eq!(e.retry_after(), Some(DEFAULT_RETRY_AFTER));
    }

    #[test]
    fn other_errors_back_off_and_name_their_layer() {
        let e = SyncError::hook(
            "sync",
            HookError::Request {
                target: "http://h".into(),
                message: "reset".into(),
            },
        );
        assert_eq!(e.backoff(), Backoff::Exponential);
        assert!(e.is_failure());
        assert_eq!(e.layer(), Layer::Hook);
        assert_eq!(
            e.to_string(),
            format!(
                "sync hook failed: {}",
                match &e {
                    SyncError::Hook { source, .. } => source.to_string(),
                    _ => unreachable!(),
                }
            )
        );
        assert_eq!(
            SyncError::Write(vec!["a".into(), "b".into()]).to_string(),
            "a; b"
        );
        assert_eq!(SyncError::Held("x".into()).layer(), Layer::Api);
        assert_eq!(SyncError::Parent("bad".into()).layer(), Layer::Parent);
    }
}
