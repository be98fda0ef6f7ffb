//! Why a sync failed, as a typed error ([`SyncError`]) per layer: the hook call, the hook's
//! answer, the parent's own definition, API reads and writes, writes held while the API server
//! is away. Each variant knows how the controller loop treats it ([`SyncError::backoff`]): the
//! loop, the TUI and `--once` decide on the variant, never on the message text.

use std::fmt;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::hooks::HookError;
use crate::k8s::error::{ApiError, ApiErrorClass};
use crate::k8s::lease;

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
    /// One or more API writes failed (each classified; each message names the object and the
    /// server's answer).
    #[error("{}", join(.0))]
    Write(Vec<ApiError>),
    /// Nothing was written because writes are held (API server unreachable, controller lease
    /// lost); the sync runs again once they are released.
    #[error("not written: {0}")]
    Held(WritesHeld),
    /// An engine invariant broke (a bug): reported, retried with backoff.
    #[error("internal: {0}")]
    Internal(String),
}

/// The messages of `errors`, joined with `; `.
fn join(errors: &[ApiError]) -> String {
    errors
        .iter()
        .map(|e| e.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why every write is held (and workers take no work) until it is released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritesHeld {
    /// The API server cannot be reached: the controller lease is not confirmed since `since`.
    ApiUnreachable {
        /// When the first failing lease renewal happened.
        since: Timestamp,
        /// The last renewal's failure.
        error: String,
    },
    /// Another dev loop holds the controller lease (`holder`: `held by bob@desk pid 7 since
    /// 10:42:05`).
    LeaseLost {
        /// Who holds it, as [`lease::LeaseState::describe_holder`] says.
        holder: String,
    },
}

impl fmt::Display for WritesHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WritesHeld::ApiUnreachable { since, .. } => {
                write!(f, "API server unreachable since {}", lease::clock(*since))
            }
            WritesHeld::LeaseLost { holder } => write!(f, "controller lease {holder}"),
        }
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Layer {
    /// The hook (call or answer): fix the hook.
    Hook,
    /// The parent object's definition: fix the parent.
    Parent,
    /// The API server: unreachable, refusing the credentials, or refusing a write for a
    /// reason that is not the object's content (a conflict, a missing object).
    Api,
    /// The engine itself.
    Internal,
}

impl Layer {
    /// How a viewer names it: "hook", "parent", "API", "internal".
    pub fn label(self) -> &'static str {
        match self {
            Layer::Hook => "hook",
            Layer::Parent => "parent",
            Layer::Api => "API",
            Layer::Internal => "internal",
        }
    }
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
            // Every write refused as invalid: the objects the hook asked for need fixing.
            SyncError::Write(errors)
                if !errors.is_empty()
                    && errors.iter().all(|e| e.class == ApiErrorClass::Invalid) =>
            {
                Layer::Hook
            }
            SyncError::Read(_) | SyncError::Write(_) | SyncError::Held(_) => Layer::Api,
            SyncError::Internal(_) => Layer::Internal,
        }
    }

    /// Whether it says the API server cannot be reached (writes held for it, or a write
    /// that could not reach it): shown like an outage, not like a refused write.
    pub fn is_unreachable(&self) -> bool {
        match self {
            SyncError::Held(WritesHeld::ApiUnreachable { .. }) => true,
            SyncError::Write(errors) => {
                errors.iter().any(|e| e.class == ApiErrorClass::Unreachable)
            }
            _ => false,
        }
    }

    /// The classes of the failed API writes (empty for other errors).
    pub fn api_classes(&self) -> Vec<ApiErrorClass> {
        match self {
            SyncError::Write(errors) => errors.iter().map(|e| e.class).collect(),
            _ => Vec::new(),
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
        let write = |classes: &[ApiErrorClass]| {
            SyncError::Write(
                classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ApiError::new(*c, format!("e{i}")))
                    .collect(),
            )
        };
        assert_eq!(
            write(&[ApiErrorClass::Conflict, ApiErrorClass::Other]).to_string(),
            "e0; e1"
        );
        assert_eq!(SyncError::Parent("bad".into()).layer(), Layer::Parent);
        assert_eq!(SyncError::Internal("bug".into()).layer(), Layer::Internal);
        assert_eq!(SyncError::Read("r".into()).layer(), Layer::Api);
        assert_eq!(
            SyncError::answer("sync", "bad children").layer(),
            Layer::Hook
        );
    }

    #[test]
    fn write_errors_name_their_layer_by_class() {
        let write = |classes: &[ApiErrorClass]| {
            SyncError::Write(classes.iter().map(|c| ApiError::new(*c, "m")).collect())
        };
        use ApiErrorClass::*;
        // Invalid objects are the hook's to fix; the rest is the API server's side.
        assert_eq!(write(&[Invalid]).layer(), Layer::Hook);
        assert_eq!(write(&[Invalid, Invalid]).layer(), Layer::Hook);
        assert_eq!(write(&[Invalid, Forbidden]).layer(), Layer::Api);
        for c in [
            Conflict,
            Forbidden,
            Unauthorized,
            NotFound,
            Unreachable,
            Other,
        ] {
            assert_eq!(write(&[c]).layer(), Layer::Api, "{c:?}");
            // Writes are retried with the key's backoff, whatever their class.
            assert_eq!(write(&[c]).backoff(), Backoff::Exponential, "{c:?}");
            assert!(write(&[c]).is_failure());
        }
        assert!(write(&[Conflict, Unreachable]).is_unreachable());
        assert!(!write(&[Conflict, Invalid]).is_unreachable());
        assert_eq!(
            write(&[Conflict, Invalid]).api_classes(),
            vec![Conflict, Invalid]
        );
    }

    #[test]
    fn writes_held_say_why_as_before_and_are_typed() {
        let since = Timestamp::from_second(1_700_000_000).unwrap();
        let held = WritesHeld::ApiUnreachable {
            since,
            error: "connection refused".into(),
        };
        assert_eq!(
            held.to_string(),
            format!("API server unreachable since {}", lease::clock(since))
        );
        let e = SyncError::Held(held);
        assert_eq!(e.layer(), Layer::Api);
        assert!(e.is_unreachable());
        assert!(
            e.to_string()
                .starts_with("not written: API server unreachable since ")
        );
        let lost = SyncError::Held(WritesHeld::LeaseLost {
            holder: "held by bob@desk pid 7".into(),
        });
        assert_eq!(
            lost.to_string(),
            "not written: controller lease held by bob@desk pid 7"
        );
        assert!(!lost.is_unreachable());
        assert_eq!(lost.layer(), Layer::Api);
    }
}
