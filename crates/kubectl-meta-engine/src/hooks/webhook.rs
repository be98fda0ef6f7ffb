//! Webhook transport: one JSON POST per call over the shared connection pool.
//!
//! The whole exchange (connect, send, status, body) is bounded by the hook's timeout. Only 200
//! is success; 429 becomes [`HookError::TooManyRequests`] with its `Retry-After` (seconds or an
//! HTTP date); any other status is [`HookError::Status`] quoting the start of the body. Bodies are
//! read up to [`MAX_RESPONSE_BYTES`] and must be one JSON object. Status and the raw body are
//! recorded even when the call fails or times out half-way.

use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use super::{HookCall, HookError, MAX_RESPONSE_BYTES, RAW_RESPONSE_KEEP, parse_answer, raw_text};

/// POST `request` to `url` and decode the answer.
pub(super) async fn call(
    http: &reqwest::Client,
    url: &str,
    timeout: Duration,
    request: &Value,
    authorization: Option<&HeaderValue>,
) -> HookCall {
    let started = Instant::now();
    let mut status = None;
    let mut raw = None;
    let exchange = exchange(http, url, request, authorization, &mut status, &mut raw);
    let result = match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(HookError::Timeout {
            target: url.to_string(),
            after: timeout,
            setting: "webhook.timeout",
        }),
    };
    HookCall {
        result,
        status,
        latency: started.elapsed(),
        stderr: String::new(),
        raw_response: raw,
    }
}

/// One exchange; `status` and `raw` are filled as soon as they are known.
async fn exchange(
    http: &reqwest::Client,
    url: &str,
    request: &Value,
    authorization: Option<&HeaderValue>,
    status: &mut Option<u16>,
    raw: &mut Option<String>,
) -> Result<Value, HookError> {
    let failed = |message: String| HookError::Request {
        target: url.to_string(),
        message,
    };
    let body = serde_json::to_vec(request)
        .map_err(|e| failed(format!("cannot encode the request as JSON: {e}")))?;
    let mut post = http.post(url).header(CONTENT_TYPE, "application/json");
    if let Some(value) = authorization {
        post = post.header(AUTHORIZATION, value.clone());
    }
    // The hook span's trace context (`traceparent`), when traces are exported.
    for (name, value) in crate::trace::headers() {
        post = post.header(name, value);
    }
    let mut response = post.body(body).send().await.map_err(|e| {
        let message = error_chain(&e);
        if let Some(hint) = tls_hint(&message) {
            HookError::Tls {
                target: url.to_string(),
                message,
                hint: hint.to_string(),
            }
        } else if e.is_connect() {
            HookError::Connect {
                target: url.to_string(),
                message: error_chain(&e),
            }
        } else {
            failed(error_chain(&e))
        }
    })?;
    let code = response.status().as_u16();
    *status = Some(code);

    if code == 429 {
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, jiff::Timestamp::now()));
        // The body only matters for display; a broken one does not change the verdict.
        let (bytes, _) = read_body(&mut response, RAW_RESPONSE_KEEP)
            .await
            .unwrap_or_default();
        *raw = Some(raw_text(&bytes));
        return Err(HookError::TooManyRequests {
            target: url.to_string(),
            retry_after,
        });
    }
    if code != 200 {
        let (bytes, _) = read_body(&mut response, RAW_RESPONSE_KEEP)
            .await
            .map_err(|e| failed(format!("HTTP {code}, then reading the body failed: {e}")))?;
        *raw = Some(raw_text(&bytes));
        return Err(HookError::Status {
            target: url.to_string(),
            status: code,
            body: super::snippet(&bytes),
        });
    }

    let too_large = || HookError::ResponseTooLarge {
        target: url.to_string(),
        limit: MAX_RESPONSE_BYTES,
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(too_large());
    }
    let (bytes, complete) = read_body(&mut response, MAX_RESPONSE_BYTES)
        .await
        .map_err(|e| failed(format!("reading the answer failed: {e}")))?;
    *raw = Some(raw_text(&bytes));
    if !complete {
        return Err(too_large());
    }
    parse_answer(url, &bytes, "")
}

/// What to check when `message` (an error chain) is a TLS failure; `None` when it is not one.
fn tls_hint(message: &str) -> Option<&'static str> {
    let m = message.to_ascii_lowercase();
    if m.contains("unknownissuer") || m.contains("unknown issuer") || m.contains("badsignature") {
        Some(
            "the hook server's certificate is not signed by a trusted CA: set the hook's (or its \
             spec.endpointConfigs entry's) caBundle to the CA that signed it (inline, secretRef \
             or configMapRef)",
        )
    } else if m.contains("notvalidforname") || m.contains("not valid for name") {
        Some(
            "the hook server's certificate is not made for this host name nor for the \
             definition's: use a host name it lists, or issue it for this one",
        )
    } else if m.contains("certificaterequired") || m.contains("certificate required") {
        Some(
            "the hook server asks for a client certificate: set clientTLS (a Secret with tls.crt \
             and tls.key) on the hook or its spec.endpointConfigs entry",
        )
    } else if m.contains("invalid peer certificate")
        || m.contains("received fatal alert")
        || m.contains("handshake")
    {
        Some(
            "check the hook's caBundle and clientTLS (and that the server speaks HTTPS on that \
             port)",
        )
    } else {
        None
    }
}

/// Read the body up to `limit` bytes; `false` when it was longer (the rest is not read).
///
/// A body delimited by the connection's close (no Content-Length, no chunking: Python's
/// `http.server`) over TLS often ends without a TLS `close_notify`; rustls reports that as an
/// error, Go's and OpenSSL's clients (what Metacontroller's hooks are written against) as the
/// end of the body. It ends the body here too: the JSON decoding that follows refuses a body
/// that was cut short.
async fn read_body(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut bytes = Vec::new();
    let close_delimited = response.content_length().is_none();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                let message = error_chain(&e);
                if close_delimited && message.contains("close_notify") {
                    break;
                }
                return Err(message);
            }
        };
        if bytes.len() + chunk.len() > limit {
            bytes.extend_from_slice(&chunk[..limit - bytes.len()]);
            return Ok((bytes, false));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, true))
}

/// A `Retry-After` value: delay in seconds, or an HTTP date (a past date means "now").
pub fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()?;
    Some(Duration::try_from(when.duration_since(now)).unwrap_or(Duration::ZERO))
}

/// An error and its causes, without the top-level "error sending request for url (...)" noise
/// when a cause says more.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        cause = c.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::{CallInfo, HookClient, HookTarget};
    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use serde_json::json;

    async fn echo(headers: HeaderMap, body: Bytes) -> Response {
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let received: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        axum::Json(json!({"received": received, "contentType": content_type, "n": 3, "f": 3.0}))
            .into_response()
    }

    fn text(status: StatusCode, body: &'static str) -> Response {
        (status, body).into_response()
    }

    fn chunks(n: usize, size: usize) -> Body {
        let stream = futures::stream::iter(
            (0..n).map(move |_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; size]))),
        );
        Body::from_stream(stream)
    }

    async fn serve() -> String {
        let app = Router::new()
            .route("/ok", post(echo))
            .route(
                "/fail",
                post(|| async { text(StatusCode::INTERNAL_SERVER_ERROR, "boom: db down") }),
            )
            .route(
                "/busy",
                post(|| async {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(RETRY_AFTER, "7")],
                        "slow down",
                    )
                        .into_response()
                }),
            )
            .route(
                "/busy-date",
                post(|| async {
                    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(30);
                    let date = jiff::fmt::rfc2822::DateTimePrinter::new()
                        .timestamp_to_rfc9110_string(&at)
                        .unwrap_or_default();
                    (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, date)], "").into_response()
                }),
            )
            .route(
                "/busy-bare",
                post(|| async { text(StatusCode::TOO_MANY_REQUESTS, "") }),
            )
            .route(
                "/slow",
                post(|| async {
                    std::future::pending::<()>().await;
                    text(StatusCode::OK, "{}")
                }),
            )
            .route(
                "/stall-body",
                post(|| async {
                    let first = futures::stream::once(async {
                        Ok::<_, std::io::Error>(Bytes::from_static(b"{\"children\":"))
                    });
                    let stream = futures::StreamExt::chain(first, futures::stream::pending());
                    Body::from_stream(stream).into_response()
                }),
            )
            .route(
                "/garbage",
                post(|| async { text(StatusCode::OK, "<html>oops</html>") }),
            )
            .route("/array", post(|| async { text(StatusCode::OK, "[1, 2]") }))
            .route(
                "/huge-chunked",
                post(|| async { chunks(65, 1 << 20).into_response() }),
            )
            .route(
                "/huge-length",
                post(|| async { vec![b' '; MAX_RESPONSE_BYTES + 1].into_response() }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn info() -> CallInfo {
        CallInfo {
            hook: "sync".into(),
            controller_kind: "CompositeController".into(),
            controller: "hello".into(),
            parent: "default/p1".into(),
            map_key: None,
        }
    }

    async fn call_with(url: String, timeout: Duration) -> HookCall {
        let client = HookClient::new().unwrap();
        let target = HookTarget::Webhook { url, timeout };
        client
            .call(&target, &info(), &json!({"parent": {"x": 1}}))
            .await
    }

    async fn call(url: String) -> HookCall {
        call_with(url, Duration::from_secs(30)).await
    }

    #[tokio::test]
    async fn success_posts_json_and_keeps_integers() {
        let base = serve().await;
        let c = call(format!("{base}/ok")).await;
        let v = c.result.unwrap();
        assert_eq!(v["received"], json!({"parent": {"x": 1}}));
        assert_eq!(v["contentType"], "application/json");
        assert!(v["n"].is_i64());
        assert!(v["f"].is_f64());
        assert_eq!(c.status, Some(200));
        assert!(c.raw_response.unwrap().contains("\"received\""));
        assert!(c.stderr.is_empty());
    }

    #[tokio::test]
    async fn one_client_reuses_connections_for_many_calls() {
        let base = serve().await;
        let client = HookClient::new().unwrap();
        let target = HookTarget::Webhook {
            url: format!("{base}/ok"),
            timeout: Duration::from_secs(30),
        };
        let calls = (0..20).map(|i| {
            let (client, target) = (client.clone(), target.clone());
            async move { client.call(&target, &info(), &json!({"i": i})).await }
        });
        for (i, c) in futures::future::join_all(calls)
            .await
            .into_iter()
            .enumerate()
        {
            assert_eq!(c.result.unwrap()["received"]["i"], json!(i));
        }
    }

    #[tokio::test]
    async fn server_error_quotes_the_body() {
        let base = serve().await;
        let c = call(format!("{base}/fail")).await;
        assert_eq!(c.status, Some(500));
        let e = c.result.unwrap_err();
        assert!(
            matches!(&e, HookError::Status { status: 500, body, .. } if body == "boom: db down")
        );
        assert!(e.to_string().contains("answered HTTP 500"), "{e}");
        assert!(!e.is_rate_limited());
        assert_eq!(c.raw_response.as_deref(), Some("boom: db down"));
    }

    #[tokio::test]
    async fn too_many_requests_with_retry_after_seconds() {
        let base = serve().await;
        let c = call(format!("{base}/busy")).await;
        assert_eq!(c.status, Some(429));
        let e = c.result.unwrap_err();
        assert!(e.is_rate_limited());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(c.raw_response.as_deref(), Some("slow down"));
    }

    #[tokio::test]
    async fn too_many_requests_with_retry_after_date() {
        let base = serve().await;
        let e = call(format!("{base}/busy-date")).await.result.unwrap_err();
        assert!(e.is_rate_limited());
        let after = e.retry_after().unwrap();
        // The header has whole seconds; allow for the call's own duration on a busy machine.
        assert!(
            after > Duration::from_secs(20) && after <= Duration::from_secs(30),
            "{after:?}"
        );
    }

    #[tokio::test]
    async fn too_many_requests_without_retry_after() {
        let base = serve().await;
        let e = call(format!("{base}/busy-bare")).await.result.unwrap_err();
        assert!(e.is_rate_limited());
        assert_eq!(e.retry_after(), None);
        assert!(e.to_string().contains("short backoff"), "{e}");
    }

    #[tokio::test]
    async fn slow_hook_times_out() {
        let base = serve().await;
        let c = call_with(format!("{base}/slow"), Duration::from_millis(300)).await;
        let e = c.result.unwrap_err();
        assert!(
            matches!(&e, HookError::Timeout { after, .. } if *after == Duration::from_millis(300))
        );
        assert!(
            e.to_string().contains("within 300ms (webhook.timeout)"),
            "{e}"
        );
        assert!(c.latency >= Duration::from_millis(300));
        assert_eq!(c.status, None);
    }

    #[tokio::test]
    async fn timeout_covers_the_body_too() {
        let base = serve().await;
        let c = call_with(format!("{base}/stall-body"), Duration::from_millis(500)).await;
        assert!(matches!(c.result, Err(HookError::Timeout { .. })));
        assert_eq!(c.status, Some(200));
    }

    #[tokio::test]
    async fn invalid_and_non_object_json() {
        let base = serve().await;
        let c = call(format!("{base}/garbage")).await;
        assert_eq!(c.status, Some(200));
        let e = c.result.unwrap_err();
        assert!(
            matches!(&e, HookError::InvalidJson { snippet, .. } if snippet == "<html>oops</html>")
        );
        assert_eq!(c.raw_response.as_deref(), Some("<html>oops</html>"));

        let e = call(format!("{base}/array")).await.result.unwrap_err();
        assert!(
            e.to_string()
                .contains("expected a JSON object, got an array"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn huge_bodies_are_rejected() {
        let base = serve().await;
        for path in ["huge-chunked", "huge-length"] {
            let c = call(format!("{base}/{path}")).await;
            let e = c.result.unwrap_err();
            assert!(
                matches!(&e, HookError::ResponseTooLarge { limit, .. } if *limit == MAX_RESPONSE_BYTES),
                "{path}: {e}"
            );
            assert!(e.to_string().contains("more than 64 MiB"), "{e}");
            if let Some(raw) = c.raw_response {
                assert!(raw.len() <= RAW_RESPONSE_KEEP);
            }
        }
    }

    #[tokio::test]
    async fn connection_refused_says_to_start_the_server() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}/sync");
        let c = call(url.clone()).await;
        let e = c.result.unwrap_err();
        assert!(
            matches!(&e, HookError::Connect { target, .. } if *target == url),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("is the hook server running"), "{msg}");
        assert!(msg.to_lowercase().contains("refused"), "{msg}");
        assert_eq!(c.status, None);
    }

    #[test]
    fn retry_after_values() {
        let now: jiff::Timestamp = "2024-01-10T10:34:15Z".parse().unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 10 Jan 2024 10:34:45 GMT", now),
            Some(Duration::from_secs(30))
        );
        // A date in the past means "now".
        assert_eq!(
            parse_retry_after("Wed, 10 Jan 2024 10:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }
}
