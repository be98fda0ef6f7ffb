//! API errors classified by what fixes them ([`ApiError`], [`ApiErrorClass`]): a conflict is
//! retried, an invalid object is the hook's to fix, a refusal (401/403) is the cluster's
//! configuration, an unreachable server is waited for. The message is
//! [`kube_error_message`](super::kube_error_message)'s, prefixed with what was being written.

/// What kind of failure an API request met, decided from the kube error (never from its text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorClass {
    /// 409: the object changed since it was read (a stale cache); the next sync retries.
    Conflict,
    /// 422 or 400: the object sent is invalid; the hook's desired object needs fixing.
    Invalid,
    /// 403: the credentials may not do this (RBAC).
    Forbidden,
    /// 401: the credentials are not accepted.
    Unauthorized,
    /// 404: the object (or its resource) is gone.
    NotFound,
    /// The API server could not be reached, timed out, or answered 5xx.
    Unreachable,
    /// Anything else (including an object that could not be encoded).
    Other,
}

impl ApiErrorClass {
    /// The class of a kube client error.
    pub fn of(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Self::of_status(s.code),
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
                ApiErrorClass::Unreachable
            }
            _ => ApiErrorClass::Other,
        }
    }

    /// The class of an HTTP status code the API server answered.
    pub fn of_status(code: u16) -> Self {
        match code {
            409 => ApiErrorClass::Conflict,
            400 | 422 => ApiErrorClass::Invalid,
            401 => ApiErrorClass::Unauthorized,
            403 => ApiErrorClass::Forbidden,
            404 => ApiErrorClass::NotFound,
            500..=599 => ApiErrorClass::Unreachable,
            _ => ApiErrorClass::Other,
        }
    }

    /// Whether the cluster itself is at fault (unreachable, or the credentials refused), as
    /// opposed to what was sent.
    pub fn is_cluster(self) -> bool {
        matches!(
            self,
            ApiErrorClass::Unreachable | ApiErrorClass::Forbidden | ApiErrorClass::Unauthorized
        )
    }
}

/// One failed API request: its class and a message naming what was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// What kind of failure.
    pub class: ApiErrorClass,
    /// The message shown (object and the server's answer).
    pub message: String,
}

impl ApiError {
    /// An error of `class` with `message`.
    pub fn new(class: ApiErrorClass, message: impl Into<String>) -> Self {
        ApiError {
            class,
            message: message.into(),
        }
    }

    /// A kube client error, classified, with its short message.
    pub fn from_kube(e: &kube::Error) -> Self {
        ApiError::new(ApiErrorClass::of(e), super::kube_error_message(e))
    }

    /// The same error with `prefix: ` before its message (what was being written).
    pub fn context(self, prefix: impl std::fmt::Display) -> Self {
        ApiError {
            message: format!("{prefix}: {}", self.message),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                reason: reason.into(),
                message: "m".into(),
                ..kube::core::Status::default()
            }
            .boxed(),
        )
    }

    #[test]
    fn kube_errors_are_classified_by_status_code_and_kind() {
        let cases = [
            (409, "Conflict", ApiErrorClass::Conflict),
            (422, "Invalid", ApiErrorClass::Invalid),
            (400, "BadRequest", ApiErrorClass::Invalid),
            (401, "Unauthorized", ApiErrorClass::Unauthorized),
            (403, "Forbidden", ApiErrorClass::Forbidden),
            (404, "NotFound", ApiErrorClass::NotFound),
            (500, "InternalError", ApiErrorClass::Unreachable),
            (503, "ServiceUnavailable", ApiErrorClass::Unreachable),
            (504, "Timeout", ApiErrorClass::Unreachable),
            (429, "TooManyRequests", ApiErrorClass::Other),
        ];
        for (code, reason, class) in cases {
            let e = ApiError::from_kube(&api(code, reason));
            assert_eq!(e.class, class, "{code}");
            // The text is kube_error_message's, unchanged.
            assert_eq!(e.to_string(), format!("m ({code} {reason})"));
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            ApiErrorClass::of(&kube::Error::Service(Box::new(io))),
            ApiErrorClass::Unreachable
        );
        assert_eq!(
            ApiErrorClass::of(&kube::Error::LinesCodecMaxLineLengthExceeded),
            ApiErrorClass::Other
        );
        let e = ApiError::from_kube(&api(422, "Invalid")).context("create ConfigMap.v1 ns/x");
        assert_eq!(e.to_string(), "create ConfigMap.v1 ns/x: m (422 Invalid)");
        assert_eq!(e.class, ApiErrorClass::Invalid);
        assert!(ApiErrorClass::Forbidden.is_cluster() && ApiErrorClass::Unreachable.is_cluster());
        assert!(!ApiErrorClass::Invalid.is_cluster() && !ApiErrorClass::Conflict.is_cluster());
    }
}
