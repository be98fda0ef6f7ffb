//! The pace of API requests: as fast as the API server accepts them, slower when it says so.
//!
//! Every client goes through [`Throttle`], a tower layer around kube's HTTP stack:
//!
//! - No fixed rate by default. Requests go as soon as they are made, bounded only by an
//!   adaptive concurrency window (AIMD): the window starts open ([`MAX_WINDOW`]), a 429
//!   TooManyRequests (API Priority and Fairness) halves it, down to one, and every answer that
//!   is not a 429 widens it again by `1 / window` (one more request in flight per window's worth
//!   of answers).
//! - A 429's `Retry-After` pauses every new request (not only the one answered 429) until it
//!   has passed; the request is then sent again, like client-go does, up to
//!   [`MAX_429_RETRIES`] times (each wait capped at [`MAX_RETRY_AFTER`]); after that the 429
//!   reaches the caller, whose work queue retries it later (nothing is dropped).
//! - 503/504 answers are retried with exponential backoff (or their `Retry-After`), up to
//!   [`MAX_UNAVAILABLE_RETRIES`] times, as kube's default retry layer did: [`connect`] turns
//!   that layer off, since it sat below this one and hid every 429 from the window.
//!
//! [`connect`]: super::client::connect
//! - `--api-qps`/`--api-burst` ([`ClientLimits`]) remain an explicit cap: a token bucket in
//!   front of all of the above.
//!
//! Watches are long-running, so they are paced by the token bucket and `Retry-After` only, not
//! counted in the window. [`ApiPace`] shares the figures (requests answered, 429s, the window,
//! the pause) with whoever shows them: the TUI status bar and the `apiRate` events of `-o json`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Most retries of one request answered 429 (kube's own retry, which this layer replaces,
/// retries 15 times).
pub const MAX_429_RETRIES: u32 = 15;

/// Longest `Retry-After` honoured per retry (longer asks are cut to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Most retries of one request answered 503 ServiceUnavailable or 504 GatewayTimeout (as kube's
/// own retry, which this layer replaces so that it sees the 429s).
pub const MAX_UNAVAILABLE_RETRIES: u32 = 15;

/// First wait before retrying a 503/504 (doubling each time, up to [`MAX_RETRY_AFTER`]).
const UNAVAILABLE_BACKOFF: Duration = Duration::from_millis(5);

/// The widest concurrency window: the window is open (not limiting) at this size.
pub const MAX_WINDOW: u32 = 1024;

/// Client-side rate limits, an explicit cap on top of the adaptive pace: a token bucket of
/// `burst` requests refilled at `qps` per second. `qps` 0 (the default): no fixed rate, only
/// what the API server accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    /// Sustained requests per second (0: no fixed limit).
    pub qps: f64,
    /// Requests that may go at once after a quiet time (with `qps` above 0).
    pub burst: u32,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            qps: 0.0,
            burst: 100,
        }
    }
}

/// Token bucket state.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// The adaptive concurrency window.
#[derive(Debug)]
struct Window {
    /// Requests allowed in flight (fractional: additive increase adds `1 / limit`).
    limit: f64,
    /// Requests in flight (watches excluded).
    in_flight: u32,
    /// No new request leaves before this (the latest 429's `Retry-After`).
    paused_until: Option<Instant>,
}

#[derive(Debug)]
struct PaceState {
    limits: ClientLimits,
    bucket: Mutex<Bucket>,
    window: Mutex<Window>,
    /// Signalled when a request leaves the window.
    freed: Notify,
    /// Requests answered (watches excluded), 429s included.
    answered: AtomicU64,
    /// Answers 429.
    throttled: AtomicU64,
}

/// The shared pace of one client: its limits, window and figures. Cloning shares them.
#[derive(Debug, Clone)]
pub struct ApiPace(Arc<PaceState>);

/// The pace's figures at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceSnapshot {
    /// Requests answered so far (watches excluded), 429s included.
    pub answered: u64,
    /// Of those, answers 429 TooManyRequests.
    pub throttled: u64,
    /// The concurrency window, while it limits (after a 429, until it has grown back to
    /// [`MAX_WINDOW`]); `None` when open.
    pub window: Option<u32>,
    /// Requests in flight (watches excluded).
    pub in_flight: u32,
    /// How long new requests still wait for a `Retry-After`, if they do.
    pub retry_after: Option<Duration>,
    /// The explicit `--api-qps` cap, if any.
    pub qps_cap: Option<f64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A place in the window; leaving it (drop) lets a waiting request in.
struct Slot(ApiPace);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut w = lock(&self.0.0.window);
        w.in_flight = w.in_flight.saturating_sub(1);
        drop(w);
        self.0.0.freed.notify_one();
    }
}

impl ApiPace {
    /// A pace with `limits`, its window open.
    pub fn new(limits: ClientLimits) -> Self {
        ApiPace(Arc::new(PaceState {
            limits,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(limits.burst.max(1)),
                last: Instant::now(),
            }),
            window: Mutex::new(Window {
                limit: f64::from(MAX_WINDOW),
                in_flight: 0,
                paused_until: None,
            }),
            freed: Notify::new(),
            answered: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }))
    }

    /// The figures now.
    pub fn snapshot(&self) -> PaceSnapshot {
        let w = lock(&self.0.window);
        let now = Instant::now();
        let limit = w.limit.floor() as u32;
        PaceSnapshot {
            answered: self.0.answered.load(Ordering::Relaxed),
            throttled: self.0.throttled.load(Ordering::Relaxed),
            window: (limit < MAX_WINDOW).then_some(limit.max(1)),
            in_flight: w.in_flight,
            retry_after: w
                .paused_until
                .filter(|t| *t > now)
                .map(|t| t.duration_since(now)),
            qps_cap: (self.0.limits.qps > 0.0).then_some(self.0.limits.qps),
        }
    }

    /// Wait for a token of the explicit `--api-qps` cap (at once without one).
    async fn token(&self) {
        let limits = self.0.limits;
        if limits.qps <= 0.0 {
            return;
        }
        loop {
            let wait = {
                let mut b = lock(&self.0.bucket);
                let now = Instant::now();
                let burst = f64::from(limits.burst.max(1));
                b.tokens =
                    (b.tokens + now.duration_since(b.last).as_secs_f64() * limits.qps).min(burst);
                b.last = now;
                if b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - b.tokens) / limits.qps)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Wait until no `Retry-After` pause is running.
    async fn unpaused(&self) {
        loop {
            let until = lock(&self.0.window).paused_until;
            match until {
                Some(t) if t > Instant::now() => tokio::time::sleep_until(t).await,
                _ => return,
            }
        }
    }

    /// Wait for a place in the window (and for any `Retry-After` pause to end).
    async fn enter(&self) -> Slot {
        loop {
            let freed = self.0.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let paused = {
                let mut w = lock(&self.0.window);
                match w.paused_until {
                    Some(t) if t > Instant::now() => Some(t),
                    _ => {
                        if f64::from(w.in_flight) < w.limit.floor().max(1.0) {
                            w.in_flight += 1;
                            return Slot(self.clone());
                        }
                        None
                    }
                }
            };
            match paused {
                Some(t) => tokio::time::sleep_until(t).await,
                None => freed.await,
            }
        }
    }

    /// Count an answer; a 429 (`retry_after` set) halves the window (once per pause: the
    /// answers of one overloaded moment cut it once) and pauses new requests.
    fn answered(&self, retry_after: Option<Duration>, counted: bool) {
        if counted {
            self.0.answered.fetch_add(1, Ordering::Relaxed);
        }
        let mut w = lock(&self.0.window);
        match retry_after {
            Some(wait) => {
                self.0.throttled.fetch_add(1, Ordering::Relaxed);
                let now = Instant::now();
                let pausing = w.paused_until.is_some_and(|t| t > now);
                if !pausing {
                    let busy = f64::from(w.in_flight.max(1));
                    w.limit = (w.limit.min(busy) / 2.0).floor().max(1.0);
                }
                let until = now + wait;
                if w.paused_until.is_none_or(|t| t < until) {
                    w.paused_until = Some(until);
                }
            }
            None if counted => {
                let max = f64::from(MAX_WINDOW);
                if w.limit < max {
                    w.limit = (w.limit + 1.0 / w.limit).min(max);
                }
            }
            None => {}
        }
    }
}

/// The client middleware: the explicit cap, the adaptive window, and 429 retries after their
/// `Retry-After`. Add it with `ClientBuilder::with_layer`; [`Throttle::pace`] reads its figures.
#[derive(Debug, Clone)]
pub struct Throttle {
    pace: ApiPace,
}

impl Throttle {
    /// A throttle with `limits` (one pace shared by every clone).
    pub fn new(limits: ClientLimits) -> Self {
        Throttle {
            pace: ApiPace::new(limits),
        }
    }

    /// The shared figures.
    pub fn pace(&self) -> ApiPace {
        self.pace.clone()
    }
}

impl<S> tower_layer::Layer<S> for Throttle {
    type Service = ThrottleService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            pace: self.pace.clone(),
        }
    }
}

/// The service [`Throttle`] wraps around the client's HTTP stack.
pub struct ThrottleService<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    pace: ApiPace,
}

/// `Retry-After` of a 429 answer, if it is one (1 s when it names none; capped).
fn retry_after<B>(resp: &http::Response<B>) -> Option<Duration> {
    if resp.status() != http::StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let secs = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Some(Duration::from_secs(secs.max(1)).min(MAX_RETRY_AFTER))
}

/// How long to wait before retrying a 503/504 answer (`retries` made so far), if it is one.
fn unavailable_wait<B>(resp: &http::Response<B>, retries: u32) -> Option<Duration> {
    use http::StatusCode;
    if !matches!(
        resp.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    ) {
        return None;
    }
    let backoff = UNAVAILABLE_BACKOFF
        .saturating_mul(1 << retries.min(16))
        .min(MAX_RETRY_AFTER);
    let asked = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
    Some(asked.map_or(backoff, |a| a.max(backoff)))
}

/// A watch request (`watch=true|1`): long-running, kept out of the window.
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
    })
}

impl<S, B> tower_service::Service<http::Request<kube::client::Body>> for ThrottleService<S>
where
    S: tower_service::Service<http::Request<kube::client::Body>, Response = http::Response<B>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited per call, under its lock.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let (inner, pace) = (Arc::clone(&self.inner), self.pace.clone());
        Box::pin(async move {
            let (method, uri, version, headers, extensions) = (
                req.method().clone(),
                req.uri().clone(),
                req.version(),
                req.headers().clone(),
                req.extensions().clone(),
            );
            let watch = is_watch(&uri);
            let mut spare = req.body().try_clone();
            let mut req = req;
            let mut retries = 0;
            loop {
                pace.token().await;
                let slot = if watch {
                    pace.unpaused().await;
                    None
                } else {
                    Some(pace.enter().await)
                };
                let fut = {
                    let mut svc = inner.lock().await;
                    futures::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
                    svc.call(req)
                };
                let resp = fut.await?;
                let throttled = retry_after(&resp);
                pace.answered(throttled, !watch);
                drop(slot);
                let wait = match throttled {
                    Some(wait) if retries < MAX_429_RETRIES => Some(wait),
                    Some(_) => None,
                    None if retries < MAX_UNAVAILABLE_RETRIES => unavailable_wait(&resp, retries),
                    None => None,
                };
                let (Some(wait), Some(body)) = (wait, spare.take()) else {
                    return Ok(resp);
                };
                // A copy for the retry after this one.
                spare = body.try_clone();
                let mut again = http::Request::new(body);
                *again.method_mut() = method.clone();
                *again.uri_mut() = uri.clone();
                *again.version_mut() = version;
                *again.headers_mut() = headers.clone();
                *again.extensions_mut() = extensions.clone();
                req = again;
                retries += 1;
                tracing::debug!(%method, %uri, status = %resp.status(), "retrying after {:?}", wait);
                tokio::time::sleep(wait).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_explicit_cap_lets_a_burst_through_then_paces_requests() {
        let t = ApiPace::new(ClientLimits {
            qps: 10.0,
            burst: 3,
        });
        let start = Instant::now();
        for _ in 0..3 {
            t.token().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes at once");
        for _ in 0..5 {
            t.token().await;
        }
        let paced = start.elapsed();
        assert!(
            paced >= Duration::from_millis(500) && paced < Duration::from_millis(600),
            "5 more at 10/s: {paced:?}"
        );
        assert_eq!(t.snapshot().qps_cap, Some(10.0));
    }

    #[tokio::test(start_paused = true)]
    async fn by_default_nothing_waits_and_the_window_is_open() {
        let free = ApiPace::new(ClientLimits::default());
        let start = Instant::now();
        let mut slots = Vec::new();
        for _ in 0..500 {
            free.token().await;
            slots.push(free.enter().await);
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "no fixed limit by default");
        let s = free.snapshot();
        assert_eq!((s.window, s.in_flight, s.qps_cap), (None, 500, None));
        drop(slots);
        assert_eq!(free.snapshot().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_halves_the_window_pauses_everyone_and_answers_widen_it_again() {
        let pace = ApiPace::new(ClientLimits::default());
        let slots: Vec<Slot> = futures::future::join_all((0..40).map(|_| pace.enter())).await;
        // Several 429s of one overloaded moment cut the window once: 40 in flight -> 20.
        pace.answered(Some(Duration::from_secs(2)), true);
        pace.answered(Some(Duration::from_secs(1)), true);
        let s = pace.snapshot();
        assert_eq!(s.window, Some(20));
        assert_eq!((s.answered, s.throttled), (2, 2));
        assert_eq!(
            s.retry_after,
            Some(Duration::from_secs(2)),
            "the longest ask wins"
        );
        drop(slots);

        // A new request waits for the Retry-After, then goes.
        let start = Instant::now();
        let slot = pace.enter().await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        drop(slot);
        assert_eq!(pace.snapshot().retry_after, None);

        // At most 20 in flight now: the 21st waits until one leaves.
        let mut slots: Vec<Slot> = futures::future::join_all((0..20).map(|_| pace.enter())).await;
        let waiting = tokio::spawn({
            let pace = pace.clone();
            async move { pace.enter().await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished(), "the window is full");
        slots.pop();
        let _slot = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("a freed place lets the waiting request in")
            .expect("task");

        // Additive increase: 20 answers widen the window by about one.
        for _ in 0..20 {
            pace.answered(None, true);
        }
        assert_eq!(pace.snapshot().window, Some(20));
        pace.answered(None, true);
        assert_eq!(pace.snapshot().window, Some(21));
        // Another overload later cuts again, down to one at the least.
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            pace.answered(Some(Duration::from_secs(1)), true);
        }
        assert_eq!(pace.snapshot().window, Some(1));
    }

    #[test]
    fn retry_after_is_read_from_429_answers_only_and_capped() {
        let resp = |code: u16, header: Option<&str>| {
            let mut b = http::Response::builder().status(code);
            if let Some(h) = header {
                b = b.header("retry-after", h);
            }
            b.body(()).expect("response")
        };
        assert_eq!(
            retry_after(&resp(429, Some("3"))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(retry_after(&resp(429, None)), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(&resp(429, Some("3600"))), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&resp(503, Some("3"))), None);
        assert_eq!(retry_after(&resp(200, None)), None);
        // 503/504: exponential backoff, or a longer Retry-After.
        assert_eq!(
            unavailable_wait(&resp(503, None), 0),
            Some(Duration::from_millis(5))
        );
        assert_eq!(
            unavailable_wait(&resp(504, None), 3),
            Some(Duration::from_millis(40))
        );
        assert_eq!(
            unavailable_wait(&resp(503, Some("2")), 0),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            unavailable_wait(&resp(503, None), 15),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(unavailable_wait(&resp(429, None), 0), None);
    }

    #[test]
    fn watches_are_told_apart_by_their_query() {
        let w = |s: &str| is_watch(&s.parse::<http::Uri>().expect("uri"));
        assert!(w("/api/v1/configmaps?watch=true&resourceVersion=3"));
        assert!(w("/api/v1/configmaps?resourceVersion=3&watch=1"));
        assert!(!w("/api/v1/configmaps?watch=false"));
        assert!(!w("/api/v1/namespaces/default/configmaps"));
        assert!(!w("/api/v1/configmaps?labelSelector=watch%3Dtrue"));
    }
}
