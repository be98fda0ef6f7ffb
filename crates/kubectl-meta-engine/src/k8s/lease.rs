//! One dev loop per controller: a `coordination.k8s.io/v1` Lease per controller definition.
//!
//! [`acquire`] creates the Lease, or takes it over when we already hold it, its holder let it
//! expire (`renewTime + leaseDurationSeconds` in the past), or its holder is a process of this
//! host that no longer exists (a dev loop killed with `kill -9`, restarted at once); otherwise it
//! says who holds it.
//! Every write carries the resourceVersion that was read, so two dev loops racing for the same
//! Lease cannot both win: the loser gets a conflict, reads again and decides again. The returned
//! [`LeaseGuard`] renews in the background every third of the duration, reports through
//! [`LeaseGuard::lost`] when someone else took the Lease over (or renewals kept failing for a
//! whole duration), and deletes the Lease on [`LeaseGuard::release`].

use super::FIELD_MANAGER;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use kube_apimachinery::names::is_dns1123_subdomain;

/// Reads and writes before giving up when other writers keep changing the Lease.
const MAX_ATTEMPTS: usize = 5;

/// Renewals never come closer together than this, whatever the duration.
const MIN_RENEW_INTERVAL: Duration = Duration::from_millis(100);

/// First retry delay after a failed renewal (doubling up to the renew interval).
const RETRY_MIN: Duration = Duration::from_millis(250);

/// A renewal request slower than this (or the renew interval, if longer) counts as failed.
const RENEW_TIMEOUT: Duration = Duration::from_secs(5);

/// Annotation on a Lease: the identity of a dev loop asking its holder (a `kubectl meta run`
/// replica) to yield it (`dev --takeover`).
pub const TAKEOVER_BY: &str = "kubectl-meta.dev/takeover-requested-by";

/// Annotation on a Lease: when the request was last refreshed (RFC 3339, the requester's clock;
/// the replica only compares it with its previous value: a request is fresh while it keeps
/// changing, see [`TAKEOVER_SECONDS`]).
pub const TAKEOVER_AT: &str = "kubectl-meta.dev/takeover-requested-at";

/// Annotation on a Lease: how long a request stays valid after the replica saw it last change
/// (whole seconds). A requester that died stops refreshing it, so the replica takes its
/// controller back after that long.
pub const TAKEOVER_SECONDS: &str = "kubectl-meta.dev/takeover-seconds";

/// How often `dev --takeover` refreshes its request while waiting for the holder to yield.
const TAKEOVER_REFRESH: Duration = Duration::from_secs(2);

/// How often `dev --takeover` reads the Lease while waiting.
const TAKEOVER_POLL: Duration = Duration::from_millis(200);

/// A takeover request read from a Lease's annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeoverRequest {
    /// Who asks (a dev loop's `user@host pid N`).
    pub by: String,
    /// The value of [`TAKEOVER_AT`] (changes with every refresh).
    pub at: String,
    /// Valid for this long after it was seen to change.
    pub valid_for: Duration,
}

impl TakeoverRequest {
    /// The request on `lease`, if any (malformed ones are ignored).
    pub fn of(lease: &Lease) -> Option<TakeoverRequest> {
        let a = lease.metadata.annotations.as_ref()?;
        let by = a.get(TAKEOVER_BY).filter(|b| !b.is_empty())?.clone();
        let at = a.get(TAKEOVER_AT).cloned().unwrap_or_default();
        let secs: u64 = a.get(TAKEOVER_SECONDS)?.parse().ok()?;
        Some(TakeoverRequest {
            by,
            at,
            valid_for: Duration::from_secs(secs.max(1)),
        })
    }
}

/// `lease` with a (refreshed) takeover request by `by`, valid for `valid_for`.
fn with_request(mut lease: Lease, by: &str, valid_for: Duration, now: Timestamp) -> Lease {
    let a = lease
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    a.insert(TAKEOVER_BY.to_string(), by.to_string());
    a.insert(TAKEOVER_AT.to_string(), now.to_string());
    a.insert(
        TAKEOVER_SECONDS.to_string(),
        duration_secs(valid_for).to_string(),
    );
    lease
}

/// `lease` without a takeover request.
fn without_request(mut lease: Lease) -> Lease {
    if let Some(a) = lease.metadata.annotations.as_mut() {
        for k in [TAKEOVER_BY, TAKEOVER_AT, TAKEOVER_SECONDS] {
            a.remove(k);
        }
    }
    lease
}

/// Whether `holder` is a dev loop (`user@host pid N`) rather than a `kubectl meta run` replica.
pub fn is_dev_holder(holder: &str) -> bool {
    holder.contains(" pid ")
}

/// Where a held Lease stands, as [`LeaseGuard::state`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Renewed within its duration: ours; writing is safe.
    Held,
    /// Renewals fail (the API server is unreachable, times out or errs): not confirmed since
    /// `since`; renewing goes on.
    Unconfirmed {
        /// When the first failing renewal happened.
        since: Timestamp,
        /// The last failure.
        error: String,
    },
    /// Someone else holds the Lease; renewing stopped.
    Lost {
        /// Their identity (`user@host pid N`).
        holder: String,
        /// Since when they hold it (their acquireTime), when known.
        since: Option<Timestamp>,
    },
}

impl LeaseState {
    /// For a [`LeaseState::Lost`]: `held by bob@desk pid 7 since 10:42:05`.
    pub fn describe_holder(&self) -> Option<String> {
        let LeaseState::Lost { holder, since } = self else {
            return None;
        };
        Some(match since {
            Some(t) => format!("held by {holder} since {}", clock(*t)),
            None => format!("held by {holder}"),
        })
    }
}

/// `10:42:05` in local time (UTC when the time zone is unknown).
pub fn clock(t: Timestamp) -> String {
    t.to_zoned(k8s_openapi::jiff::tz::TimeZone::system())
        .strftime("%H:%M:%S")
        .to_string()
}

/// Longest Kubernetes object name.
const MAX_NAME_LEN: usize = 253;

/// Why the Lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else holds the Lease and it has not expired.
    #[error(
        "lease {namespace}/{name} is held by {holder} (renewed {}s ago, expires in {}s): {}",
        renewed_ago.as_secs(),
        secs_up(expires_in),
        who_and_how(holder)
    )]
    Held {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The holder's identity (`user@host pid N` for kubectl-meta).
        holder: String,
        /// Time since the holder last renewed.
        renewed_ago: Duration,
        /// Time until the Lease expires unless renewed.
        expires_in: Duration,
    },
    /// `dev --takeover` asked a `kubectl meta run` replica to yield, and it did not in time.
    #[error(
        "lease {namespace}/{name} is held by {holder}, which did not yield it within {}s of the takeover request (a kubectl meta run without --takeover support, or one that cannot write the Lease?). \
         Stop that replica (kubectl scale deployment kubectl-meta -n NAMESPACE --replicas 0), or try again",
        waited.as_secs()
    )]
    NotYielded {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The replica holding it.
        holder: String,
        /// How long we waited.
        waited: Duration,
    },
    /// Other writers changed the Lease every time we tried.
    #[error(
        "lease {namespace}/{name} changed under us {attempts} times in a row (another dev loop is starting at the same moment?); try again"
    )]
    Contended {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// How many times we tried.
        attempts: usize,
    },
    /// The API server refused or failed a request.
    #[error("{action} lease {namespace}/{name}: {message}{hint}")]
    Api {
        /// What we were doing ("reading", "creating", "taking over").
        action: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The server's (or client's) message.
        message: String,
        /// How to fix it, when known (starts with "; ").
        hint: String,
    },
}

/// Who holds a Lease, by the shape of its identity, and how to take it: a dev loop is
/// `user@host pid N`; anything else is a `kubectl meta run` replica (`host_suffix`).
fn who_and_how(holder: &str) -> &'static str {
    if is_dev_holder(holder) {
        "another dev loop is driving this controller. \
         Stop that one first; if it died without releasing the lease, it expires on its own and the next start takes it over"
    } else {
        "`kubectl meta run` (a replica in the cluster) is driving this controller. \
         To develop it here, re-run with --takeover: the replica finishes its in-flight sync, yields just this controller's lease and takes it back when this dev loop exits \
         (or when its lease lapses); the replica's other controllers keep running there"
    }
}

/// Whole seconds, rounded up.
fn secs_up(d: &Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn api_error(action: &'static str, namespace: &str, name: &str, e: &kube::Error) -> LeaseError {
    let (message, hint) = match e {
        kube::Error::Api(s) => {
            let hint = match s.code {
                403 => format!(
                    "; your user may not manage leases.coordination.k8s.io in namespace {namespace}: ask for get/create/update/delete on them, or pick another namespace with --lease-namespace"
                ),
                404 => format!(
                    "; does namespace {namespace} exist? Create it, or pick another one with --lease-namespace"
                ),
                _ => String::new(),
            };
            (format!("{} ({})", s.message, s.code), hint)
        }
        other => (other.to_string(), String::new()),
    };
    LeaseError::Api {
        action,
        namespace: namespace.to_string(),
        name: name.to_string(),
        message,
        hint,
    }
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The Lease name for a controller definition: `kubectl-meta-<kind>-<name>` in lower case
/// (`kubectl-meta-compositecontroller-hello`). Inputs that would not give a valid object name
/// (too long, invalid characters) give a truncated, sanitized name ending in a stable hash of
/// the inputs, so different controllers keep different Leases.
pub fn lease_name(controller_kind: &str, controller: &str) -> String {
    let plain = format!(
        "kubectl-meta-{}-{controller}",
        controller_kind.to_ascii_lowercase()
    );
    if plain.len() <= MAX_NAME_LEN && is_dns1123_subdomain(&plain).is_empty() {
        return plain;
    }
    let hash = format!("{:016x}", fnv1a(plain.as_bytes()));
    let mut sanitized: String = plain
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(MAX_NAME_LEN - hash.len() - 1)
        .collect();
    let kept = sanitized.trim_end_matches('-').len();
    sanitized.truncate(kept);
    format!("{sanitized}-{hash}")
}

/// FNV-1a (64 bit): a hash that never changes between builds, so every version of
/// kubectl-meta computes the same Lease name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Who we are, for the Lease's holderIdentity: `user@host pid N` (user from `$USER` or
/// `$LOGNAME`, else `uid-N`).
pub fn default_holder() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        // SAFETY: getuid has no preconditions and cannot fail.
        .unwrap_or_else(|| format!("uid-{}", unsafe { libc::getuid() }));
    format!("{user}@{} pid {}", hostname(), std::process::id())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..len]) {
        Ok(h) if rc == 0 && !h.is_empty() => h.to_string(),
        _ => "unknown-host".to_string(),
    }
}

/// The Lease duration in whole seconds (at least 1), as the API wants it.
fn duration_secs(d: Duration) -> i32 {
    i32::try_from(secs_up(&d).max(1)).unwrap_or(i32::MAX)
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// A new Lease held by `holder`.
fn new_lease(name: &str, holder: &str, duration: Duration, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "kubectl-meta".to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(duration_secs(duration)),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// Who holds `lease` against us at `now`, if anyone: `(holder, renewed_ago, expires_in)`.
/// `None` means we may take it (free, ours, or expired).
fn blocking_holder(
    lease: &Lease,
    holder: &str,
    now: Timestamp,
) -> Option<(String, Duration, Duration)> {
    let other = holder_of(lease).filter(|h| *h != holder)?;
    if dead_local_holder(other) {
        // A dev loop of this machine that died without releasing it (kill -9, a crash).
        return None;
    }
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let valid_for = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds?.max(0)));
    let expires_in = renewed.checked_add(valid_for).ok()?.duration_since(now);
    if !expires_in.is_positive() {
        return None;
    }
    let renewed_ago = Duration::try_from(now.duration_since(renewed)).unwrap_or_default();
    Some((
        other.to_string(),
        renewed_ago,
        Duration::try_from(expires_in).unwrap_or_default(),
    ))
}

/// Whether `holder` (`user@host pid N`) names a process of this host that no longer exists.
fn dead_local_holder(holder: &str) -> bool {
    let Some((who, pid)) = holder.rsplit_once(" pid ") else {
        return false;
    };
    let (Some((_, host)), Ok(pid)) = (who.split_once('@'), pid.trim().parse::<i32>()) else {
        return false;
    };
    if host != hostname() || pid <= 0 || pid == i32::try_from(std::process::id()).unwrap_or(0) {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// `lease` renewed by `holder` at `now`; a change of holder counts a transition.
fn taken_by(mut lease: Lease, holder: &str, duration: Duration, now: Timestamp) -> Lease {
    let ours = holder_of(&lease) == Some(holder);
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if !ours {
        spec.holder_identity = Some(holder.to_string());
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.lease_duration_seconds = Some(duration_secs(duration));
    spec.renew_time = Some(MicroTime(now));
    lease
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_string()),
    }
}

/// Take the Lease `namespace/name` for `holder`, valid for `duration` after each renewal.
///
/// Creates it when absent; takes it over when `holder` already holds it or it expired; fails
/// with [`LeaseError::Held`] when someone else holds it. Writes are conditional on the
/// resourceVersion read, and a conflict means reading and deciding again.
pub async fn acquire(
    client: kube::Client,
    namespace: &str,
    name: &str,
    holder: &str,
    duration: Duration,
) -> Result<LeaseGuard, LeaseError> {
    acquire_with(client, namespace, name, holder, duration, None).await
}

/// What `dev --takeover` does when a `kubectl meta run` replica holds the Lease.
pub struct Takeover<'a> {
    /// Give up when the holder has not yielded after this long.
    pub wait: Duration,
    /// Called once with the holder's identity when the request is first made.
    pub asked: &'a (dyn Fn(&str) + Sync),
}

/// [`acquire`], and with `takeover`: a Lease held by a `kubectl meta run` replica is asked for
/// (annotations [`TAKEOVER_BY`], [`TAKEOVER_AT`], [`TAKEOVER_SECONDS`], refreshed every
/// [`TAKEOVER_REFRESH`]); the replica stops syncing that controller, releases the Lease and
/// leaves it to us while the request is fresh; we take it and remove the request. A Lease held
/// by another dev loop is never asked for ([`LeaseError::Held`]); a replica that does not yield
/// within `takeover.wait` gives [`LeaseError::NotYielded`] (the request then lapses).
pub async fn acquire_with(
    client: kube::Client,
    namespace: &str,
    name: &str,
    holder: &str,
    duration: Duration,
    takeover: Option<Takeover<'_>>,
) -> Result<LeaseGuard, LeaseError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let mut conflicts = 0;
    // When the request was first made and last refreshed.
    let mut asked: Option<(tokio::time::Instant, tokio::time::Instant)> = None;
    loop {
        let now = Timestamp::now();
        let current = api
            .get_opt(name)
            .await
            .map_err(|e| api_error("reading", namespace, name, &e))?;
        let (action, written) = match current {
            None => (
                "creating",
                api.create(&post_params(), &new_lease(name, holder, duration, now))
                    .await,
            ),
            Some(lease) => {
                if let Some((other, renewed_ago, expires_in)) = blocking_holder(&lease, holder, now)
                {
                    let Some(t) = takeover.as_ref().filter(|_| !is_dev_holder(&other)) else {
                        return Err(LeaseError::Held {
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                            holder: other,
                            renewed_ago,
                            expires_in,
                        });
                    };
                    let at = tokio::time::Instant::now();
                    let (first, last) = *asked.get_or_insert((at, at - TAKEOVER_REFRESH));
                    if at.duration_since(first) > t.wait {
                        return Err(LeaseError::NotYielded {
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                            holder: other,
                            waited: t.wait,
                        });
                    }
                    let ours = TakeoverRequest::of(&lease).is_some_and(|r| r.by == holder);
                    if !ours || at.duration_since(last) >= TAKEOVER_REFRESH {
                        let next = with_request(lease, holder, duration, now);
                        match api.replace(name, &post_params(), &next).await {
                            Ok(_) => {
                                if first == at {
                                    (t.asked)(&other);
                                }
                                asked = Some((first, at));
                            }
                            Err(e) if is_code(&e, 409) => continue,
                            Err(e) => {
                                return Err(api_error(
                                    "asking the holder to yield",
                                    namespace,
                                    name,
                                    &e,
                                ));
                            }
                        }
                    }
                    tokio::time::sleep(TAKEOVER_POLL).await;
                    continue;
                }
                let mut next = taken_by(lease, holder, duration, now);
                if TakeoverRequest::of(&next).is_some_and(|r| r.by == holder) {
                    next = without_request(next);
                }
                (
                    "taking over",
                    api.replace(name, &post_params(), &next).await,
                )
            }
        };
        match written {
            Ok(lease) => return Ok(LeaseGuard::start(api, name, holder, duration, lease)),
            Err(e) if is_code(&e, 409) => {
                conflicts += 1;
                if conflicts >= MAX_ATTEMPTS {
                    return Err(LeaseError::Contended {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        attempts: MAX_ATTEMPTS,
                    });
                }
            }
            Err(e) => return Err(api_error(action, namespace, name, &e)),
        }
    }
}

/// A held Lease, renewed in the background until released or dropped.
pub struct LeaseGuard {
    api: Api<Lease>,
    name: String,
    holder: String,
    lost: watch::Sender<bool>,
    state: watch::Sender<LeaseState>,
    renewer: Option<JoinHandle<()>>,
}

impl LeaseGuard {
    fn start(api: Api<Lease>, name: &str, holder: &str, duration: Duration, lease: Lease) -> Self {
        let (lost, _) = watch::channel(false);
        let (state, _) = watch::channel(LeaseState::Held);
        let renewer = tokio::spawn(renew_loop(
            Renewer {
                api: api.clone(),
                name: name.to_string(),
                holder: holder.to_string(),
                duration,
            },
            lease,
            state.clone(),
            lost.clone(),
        ));
        LeaseGuard {
            api,
            name: name.to_string(),
            holder: holder.to_string(),
            lost,
            state,
            renewer: Some(renewer),
        }
    }

    /// Becomes `true` when a renewal finds that someone else holds the Lease (never because
    /// renewals fail: see [`LeaseGuard::state`]); renewing stops then. The channel closes
    /// (receivers get an error) when the guard is released or dropped.
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.subscribe()
    }

    /// The Lease's state, updated by every renewal.
    pub fn state(&self) -> watch::Receiver<LeaseState> {
        self.state.subscribe()
    }

    /// Why the Lease is lost (`lease NS/NAME held by bob@desk pid 7 since 10:42:05`), once it is.
    pub fn lost_reason(&self) -> Option<String> {
        let who = self.state.borrow().describe_holder()?;
        Some(format!(
            "lease {}/{} {who}",
            self.api.namespace().unwrap_or_default(),
            self.name
        ))
    }

    /// Stop renewing and delete the Lease if we still hold it (conditional on its uid and
    /// resourceVersion). Failures are logged: an unreleased Lease expires on its own.
    pub async fn release(mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
            let _ = renewer.await;
        }
        for _ in 0..MAX_ATTEMPTS {
            let lease = match self.api.get_opt(&self.name).await {
                Ok(Some(l)) => l,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(lease = %self.name, "cannot read the lease to release it (it will expire): {e}");
                    return;
                }
            };
            if holder_of(&lease) != Some(self.holder.as_str()) {
                tracing::debug!(lease = %self.name, "not deleting the lease: someone else holds it");
                return;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: lease.metadata.uid.clone(),
                    resource_version: lease.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match self.api.delete(&self.name, &params).await {
                Ok(_) => return,
                Err(e) if is_code(&e, 409) => continue,
                Err(e) if is_code(&e, 404) => return,
                Err(e) => {
                    tracing::warn!(lease = %self.name, "cannot delete the lease (it will expire): {e}");
                    return;
                }
            }
        }
        tracing::warn!(lease = %self.name, "the lease kept changing; not deleted (it will expire)");
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
    }
}

/// The result of one renewal.
enum Renewal {
    Renewed,
    /// Someone else holds it: (holder, their acquireTime).
    TakenBy(String, Option<Timestamp>),
    Failed(String),
}

/// What the renew loop works on.
struct Renewer {
    api: Api<Lease>,
    name: String,
    holder: String,
    duration: Duration,
}

async fn renew_loop(
    r: Renewer,
    mut current: Lease,
    state: watch::Sender<LeaseState>,
    lost: watch::Sender<bool>,
) {
    let every = (r.duration / 3).max(MIN_RENEW_INTERVAL);
    let timeout = every.max(RENEW_TIMEOUT);
    let mut retry = RETRY_MIN.min(every);
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        let outcome = match tokio::time::timeout(timeout, renew_once(&r, &mut current)).await {
            Ok(o) => o,
            Err(_) => Renewal::Failed(format!("no answer within {}s", timeout.as_secs())),
        };
        match outcome {
            Renewal::Renewed => {
                state.send_if_modified(|s| {
                    let changed = *s != LeaseState::Held;
                    *s = LeaseState::Held;
                    changed
                });
                retry = RETRY_MIN.min(every);
                wait = every;
            }
            Renewal::TakenBy(holder, since) => {
                tracing::warn!(lease = %r.name, "lease taken over by {holder}");
                state.send_replace(LeaseState::Lost { holder, since });
                lost.send_replace(true);
                return;
            }
            Renewal::Failed(message) => {
                tracing::debug!(lease = %r.name, "renewing the lease failed: {message}");
                state.send_modify(|s| match s {
                    LeaseState::Unconfirmed { error, .. } => *error = message,
                    _ => {
                        *s = LeaseState::Unconfirmed {
                            since: Timestamp::now(),
                            error: message,
                        }
                    }
                });
                // Capped backoff: quick at first (a blip), then once per renew interval.
                wait = retry;
                retry = (retry * 2).min(every);
            }
        }
    }
}

/// Write a fresh renewTime over `current` (our last write); on a conflict or when it is gone,
/// read it and decide again: ours, free or expired, take it (again); held by someone else
/// within its duration, [`Renewal::TakenBy`]. A Lease deleted under us is created again.
async fn renew_once(r: &Renewer, current: &mut Lease) -> Renewal {
    let (api, name, holder, duration) = (&r.api, r.name.as_str(), r.holder.as_str(), r.duration);
    for _ in 0..MAX_ATTEMPTS {
        let now = Timestamp::now();
        let next = taken_by(current.clone(), holder, duration, now);
        let error = match api.replace(name, &post_params(), &next).await {
            Ok(lease) => {
                *current = lease;
                return Renewal::Renewed;
            }
            Err(e) if is_code(&e, 409) || is_code(&e, 404) => e,
            Err(e) => return Renewal::Failed(e.to_string()),
        };
        tracing::debug!(lease = %name, "lease changed under us ({error}); re-reading");
        match api.get_opt(name).await {
            Ok(Some(lease)) => {
                if let Some((other, _, _)) = blocking_holder(&lease, holder, Timestamp::now()) {
                    let since = lease
                        .spec
                        .as_ref()
                        .and_then(|s| s.acquire_time.as_ref())
                        .map(|t| t.0);
                    return Renewal::TakenBy(other, since);
                }
                // Ours, free, or expired: the next replace takes it (again).
                *current = lease;
            }
            Ok(None) => match api
                .create(&post_params(), &new_lease(name, holder, duration, now))
                .await
            {
                Ok(lease) => {
                    *current = lease;
                    return Renewal::Renewed;
                }
                Err(e) if is_code(&e, 409) => continue,
                Err(e) => return Renewal::Failed(e.to_string()),
            },
            Err(e) => return Renewal::Failed(e.to_string()),
        }
    }
    Renewal::Failed(format!(
        "the lease changed under us {MAX_ATTEMPTS} times in a row"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::client::connect;
    use kube_sandbox::{Sandbox, SandboxConfig};
    use std::time::Instant;

    const NS: &str = "default";

    async fn setup() -> (Sandbox, kube::Client, tempfile::TempDir) {
        let sb = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, sb.kubeconfig_yaml()).unwrap();
        let conn = connect(Some(&path), None, None).await.unwrap();
        (sb, conn.client, dir)
    }

    fn leases(client: &kube::Client) -> Api<Lease> {
        Api::namespaced(client.clone(), NS)
    }

    fn spec(lease: &Lease) -> &LeaseSpec {
        lease.spec.as_ref().unwrap()
    }

    /// Poll `check` every 50 ms until it returns Some (30 s limit).
    async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = check().await {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Make `thief` the holder, as another dev loop would (retrying on conflicts with renewals).
    async fn steal(api: &Api<Lease>, name: &str, thief: &str) {
        for _ in 0..20 {
            let lease = api.get(name).await.unwrap();
            let next = taken_by(lease, thief, Duration::from_secs(60), Timestamp::now());
            match api.replace(name, &PostParams::default(), &next).await {
                Ok(_) => return,
                Err(e) if is_code(&e, 409) => continue,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("could not steal the lease");
    }

    #[tokio::test]
    async fn acquire_creates_and_second_holder_is_refused() {
        let (sb, client, _dir) = setup().await;
        let name = lease_name("CompositeController", "hello");
        let alice = acquire(
            client.clone(),
            NS,
            &name,
            "alice@laptop pid 4242",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        let stored = leases(&client).get(&name).await.unwrap();
        assert_eq!(
            spec(&stored).holder_identity.as_deref(),
            Some("alice@laptop pid 4242")
        );
        assert_eq!(spec(&stored).lease_duration_seconds, Some(30));
        assert_eq!(spec(&stored).lease_transitions, Some(0));
        assert!(spec(&stored).renew_time.is_some());

        let err = acquire(
            client.clone(),
            NS,
            &name,
            "bob@desk pid 7",
            Duration::from_secs(30),
        )
        .await
        .err()
        .unwrap();
        match &err {
            LeaseError::Held {
                holder,
                expires_in,
                renewed_ago,
                name: n,
                namespace,
            } => {
                assert_eq!(holder, "alice@laptop pid 4242");
                assert_eq!((namespace.as_str(), n.as_str()), (NS, name.as_str()));
                assert!(
                    *expires_in > Duration::from_secs(15) && *expires_in <= Duration::from_secs(30),
                    "{expires_in:?}"
                );
                assert!(*renewed_ago < Duration::from_secs(15), "{renewed_ago:?}");
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("held by alice@laptop pid 4242"), "{msg}");
        assert!(
            msg.contains("another dev loop is driving this controller"),
            "{msg}"
        );
        assert!(msg.contains("expires in"), "{msg}");

        // The same holder (a restart of the same process identity) takes it back.
        drop(alice);
        let again = acquire(
            client.clone(),
            NS,
            &name,
            "alice@laptop pid 4242",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        let stored = leases(&client).get(&name).await.unwrap();
        assert_eq!(spec(&stored).lease_transitions, Some(0));
        again.release().await;
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn expired_lease_is_taken_over() {
        let (sb, client, _dir) = setup().await;
        let api = leases(&client);
        let stale = Timestamp::now()
            .checked_sub(SignedDuration::from_secs(60))
            .unwrap();
        let mut lease = new_lease("ctl", "bob@desk pid 1", Duration::from_secs(10), stale);
        lease.spec.as_mut().unwrap().lease_transitions = Some(3);
        api.create(&PostParams::default(), &lease).await.unwrap();

        let guard = acquire(client.clone(), NS, "ctl", "alice", Duration::from_secs(20))
            .await
            .unwrap();
        let stored = api.get("ctl").await.unwrap();
        let s = spec(&stored);
        assert_eq!(s.holder_identity.as_deref(), Some("alice"));
        assert_eq!(s.lease_transitions, Some(4));
        assert_eq!(s.lease_duration_seconds, Some(20));
        let renewed = s.renew_time.as_ref().unwrap().0;
        assert!(renewed.duration_since(stale) > SignedDuration::from_secs(50));
        assert_eq!(s.acquire_time.as_ref().unwrap().0, renewed);
        guard.release().await;
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn racing_acquirers_cannot_both_win() {
        let (sb, client, _dir) = setup().await;
        let d = Duration::from_secs(30);
        let (a, b) = tokio::join!(
            acquire(client.clone(), NS, "race", "a", d),
            acquire(client.clone(), NS, "race", "b", d)
        );
        let winners = [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count();
        assert_eq!(
            winners,
            1,
            "{:?} / {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        );
        let loser = a.as_ref().err().or(b.as_ref().err()).unwrap();
        assert!(matches!(loser, LeaseError::Held { .. }), "{loser:?}");
        let holder = spec(&leases(&client).get("race").await.unwrap())
            .holder_identity
            .clone()
            .unwrap();
        assert_eq!(holder, if a.is_ok() { "a" } else { "b" });
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn renewals_advance_renew_time() {
        let (sb, client, _dir) = setup().await;
        let api = leases(&client);
        let guard = acquire(client.clone(), NS, "renew", "me", Duration::from_secs(3))
            .await
            .unwrap();
        let first = spec(&api.get("renew").await.unwrap())
            .renew_time
            .clone()
            .unwrap();
        let later = eventually("a renewal", || async {
            let t = spec(&api.get("renew").await.unwrap()).renew_time.clone()?;
            (t > first).then_some(t)
        })
        .await;
        assert!(later > first);
        assert!(!*guard.lost().borrow());
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn release_deletes_only_our_lease() {
        let (sb, client, _dir) = setup().await;
        let api = leases(&client);
        let guard = acquire(client.clone(), NS, "rel", "me", Duration::from_secs(30))
            .await
            .unwrap();
        let lost = guard.lost();
        guard.release().await;
        assert!(api.get_opt("rel").await.unwrap().is_none());
        assert!(!*lost.borrow(), "a release is not a loss");

        // Someone else took it over: release leaves their lease alone.
        let guard = acquire(client.clone(), NS, "rel", "me", Duration::from_secs(30))
            .await
            .unwrap();
        steal(&api, "rel", "thief").await;
        guard.release().await;
        let stored = api.get("rel").await.unwrap();
        assert_eq!(spec(&stored).holder_identity.as_deref(), Some("thief"));
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn lost_fires_when_someone_else_takes_over() {
        let (sb, client, _dir) = setup().await;
        let api = leases(&client);
        let guard = acquire(client.clone(), NS, "steal", "me", Duration::from_secs(3))
            .await
            .unwrap();
        let mut lost = guard.lost();
        assert!(!*lost.borrow());
        steal(&api, "steal", "mallory@elsewhere pid 9").await;
        tokio::time::timeout(Duration::from_secs(30), lost.wait_for(|l| *l))
            .await
            .expect("lost() never fired")
            .unwrap();
        // Renewing stopped: the thief keeps the lease.
        let stored = api.get("steal").await.unwrap();
        assert_eq!(
            spec(&stored).holder_identity.as_deref(),
            Some("mallory@elsewhere pid 9")
        );
        drop(guard);
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn missing_namespace_is_explained() {
        let (sb, client, _dir) = setup().await;
        let err = acquire(client, "no-such-ns", "x", "me", Duration::from_secs(5))
            .await
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(matches!(err, LeaseError::Api { .. }), "{msg}");
        assert!(msg.contains("no-such-ns/x"), "{msg}");
        assert!(msg.contains("--lease-namespace"), "{msg}");
        sb.shutdown().await;
    }

    #[test]
    fn lease_names_are_valid_and_distinct() {
        assert_eq!(
            lease_name("CompositeController", "hello"),
            "kubectl-meta-compositecontroller-hello"
        );
        assert_eq!(
            lease_name("DecoratorController", "a.b"),
            "kubectl-meta-decoratorcontroller-a.b"
        );
        let long_a = "a".repeat(250);
        let long_b = format!("{}b", "a".repeat(249));
        let (na, nb) = (
            lease_name("CompositeController", &long_a),
            lease_name("CompositeController", &long_b),
        );
        assert_ne!(na, nb);
        for n in [&na, &nb, &lease_name("CompositeController", "Bad_Name!")] {
            assert!(n.len() <= MAX_NAME_LEN, "{n}");
            assert!(is_dns1123_subdomain(n).is_empty(), "{n}");
            assert!(n.starts_with("kubectl-meta-compositecontroller-"), "{n}");
        }
        assert_eq!(na, lease_name("CompositeController", &long_a), "stable");
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn holder_identity_names_user_host_and_pid() {
        let h = default_holder();
        assert!(h.contains('@'), "{h}");
        assert!(h.ends_with(&format!(" pid {}", std::process::id())), "{h}");
        assert!(!h.contains("unknown-host"), "{h}");
    }

    #[test]
    fn who_blocks_whom() {
        let now = Timestamp::now();
        let ago = |s: i64| now.checked_sub(SignedDuration::from_secs(s)).unwrap();
        let lease = new_lease("x", "bob", Duration::from_secs(10), ago(4));
        let (h, renewed, expires) = blocking_holder(&lease, "alice", now).unwrap();
        assert_eq!(h, "bob");
        assert_eq!(renewed, Duration::from_secs(4));
        assert_eq!(expires, Duration::from_secs(6));
        assert!(
            blocking_holder(&lease, "bob", now).is_none(),
            "our own lease"
        );
        // A holder of this host whose process is gone does not block.
        let dead = format!("me@{} pid {}", hostname(), i32::MAX - 1);
        let by_dead = new_lease("x", &dead, Duration::from_secs(10), ago(1));
        assert!(blocking_holder(&by_dead, "alice", now).is_none());
        let alive = format!("me@{} pid 1", hostname());
        let by_alive = new_lease("x", &alive, Duration::from_secs(10), ago(1));
        assert!(blocking_holder(&by_alive, "alice", now).is_some());
        let expired = new_lease("x", "bob", Duration::from_secs(10), ago(11));
        assert!(blocking_holder(&expired, "alice", now).is_none());
        let mut free = lease.clone();
        free.spec.as_mut().unwrap().holder_identity = Some(String::new());
        assert!(blocking_holder(&free, "alice", now).is_none());
        assert_eq!(duration_secs(Duration::from_millis(1500)), 2);
        assert_eq!(duration_secs(Duration::ZERO), 1);
        assert_eq!(secs_up(&Duration::from_millis(5200)), 6);
    }
}
