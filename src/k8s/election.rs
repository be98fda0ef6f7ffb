//! Leader election for `kubectl meta run`: one `coordination.k8s.io/v1` Lease per controller,
//! with client-go's semantics (`k8s.io/client-go/tools/leaderelection`).
//!
//! - Every replica is a candidate; it tries to take the Lease every `retry_period` (jittered, as
//!   client-go's `JitterUntil` with factor 1.2), and also at once when a watch of the Lease shows
//!   it changed (a holder that released it hands over in well under a retry period).
//! - A Lease held by someone else is valid until `lease_duration` after the moment *we* saw its
//!   record last change (client-go's `observedTime`: no trust in other machines' clocks).
//! - The leader renews every `retry_period`; when renewals keep failing for `renew_deadline` it
//!   stops leading ([`Role::Candidate`]) before the Lease can expire for the others
//!   (`renew_deadline < lease_duration`), so two replicas never write at once.
//! - On stop the leader releases the Lease as client-go's `ReleaseOnCancel` does: holder empty,
//!   duration 1 s, so a waiting replica takes it over at once.
//!
//! Every write carries the resourceVersion read: two candidates cannot both win. Lease names
//! are `dev`'s ([`super::lease::lease_name`]), so `dev` and `run` meet on the same Leases.
//!
//! Handing over to `dev --takeover`: a dev loop annotates the Lease with a takeover request
//! ([`super::lease::TakeoverRequest`]). A request is fresh for its `takeover-seconds` after this
//! replica saw it last change (our clock only, as for renewals). The leader seeing a fresh
//! request reports [`Role::Yielding`], keeps renewing until the runner confirms the controller
//! stopped ([`Elector::yielded`]), then releases the Lease; no replica takes a Lease while a
//! fresh request by someone else is on it. The dev loop takes it and removes the request; when
//! it deletes the Lease on exit, or stops renewing it (crashed, asleep), the replicas take it
//! back as any free or expired Lease.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::FIELD_MANAGER;
use super::lease::TakeoverRequest;

/// client-go's `JitterFactor` for the candidates' retries.
const JITTER_FACTOR: f64 = 1.2;

/// How long one Lease request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The three durations of leader election (client-go's names and defaults: 15 s, 10 s, 2 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    /// How long non-leaders wait after the last observed renewal before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// Between two attempts (candidates) or renewals (the leader).
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Durations that break leader election's guarantees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionConfigError {
    /// The leader could still believe it leads when the others take over.
    #[error(
        "--lease-duration ({lease:?}) must be greater than --renew-deadline ({renew:?}): a leader that cannot renew must stop before the others may take over"
    )]
    LeaseNotLongerThanRenew {
        /// The lease duration.
        lease: Duration,
        /// The renew deadline.
        renew: Duration,
    },
    /// The leader would not get a second renewal attempt within its deadline.
    #[error(
        "--renew-deadline ({renew:?}) must be greater than 1.2 x --retry-period ({retry:?}), as client-go requires"
    )]
    RenewNotLongerThanRetry {
        /// The renew deadline.
        renew: Duration,
        /// The retry period.
        retry: Duration,
    },
    /// A zero duration.
    #[error("--retry-period must be more than 0")]
    ZeroRetry,
}

impl ElectionConfig {
    /// Check client-go's rules: lease duration > renew deadline > 1.2 x retry period > 0.
    pub fn validate(&self) -> Result<(), ElectionConfigError> {
        if self.retry_period.is_zero() {
            return Err(ElectionConfigError::ZeroRetry);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ElectionConfigError::LeaseNotLongerThanRenew {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ElectionConfigError::RenewNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// Where this replica stands for one Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not known yet (no answer from the API server so far).
    Unknown,
    /// We hold the Lease: the controller may write.
    Leader,
    /// Someone else holds it (`holder`), or nobody does and we are about to try again (`None`).
    Follower {
        /// The current holder, when there is one.
        holder: Option<String>,
    },
    /// We hold the Lease, but a dev loop asked for it (`dev --takeover`): the controller must
    /// stop syncing, then [`Elector::yielded`] lets the Lease go.
    Yielding {
        /// The dev loop asking.
        to: String,
    },
    /// Stopped (released, or never taken).
    Stopped,
}

impl Role {
    /// Whether the Lease's holder is known (us or someone else): readiness.
    pub fn decided(&self) -> bool {
        matches!(
            self,
            Role::Leader | Role::Yielding { .. } | Role::Follower { holder: Some(_) }
        )
    }
}

/// One Lease's election, running in the background until [`Elector::stop`].
pub struct Elector {
    role: watch::Receiver<Role>,
    yielded: Arc<tokio::sync::Notify>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Elector {
    /// Start campaigning for `namespace/name` as `identity`.
    pub fn spawn(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        cfg: ElectionConfig,
    ) -> Elector {
        let (tx, role) = watch::channel(Role::Unknown);
        let stop = CancellationToken::new();
        let yielded = Arc::new(tokio::sync::Notify::new());
        let campaign = Campaign {
            yielded: Arc::clone(&yielded),
            request: None,
            refused: None,
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            cfg,
            observed: None,
            role: tx,
            stop: stop.clone(),
        };
        let task = tokio::spawn(campaign.run());
        Elector {
            role,
            yielded,
            stop,
            task,
        }
    }

    /// After [`Role::Yielding`]: the controller stopped syncing; release the Lease to the dev
    /// loop that asked for it.
    pub fn yielded(&self) {
        self.yielded.notify_one();
    }

    /// Follows this replica's role.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Stop campaigning; as the leader, release the Lease (holder emptied, so another replica
    /// takes it over at once). The caller stops writing first.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// The last Lease record seen and when it was seen (client-go's observedRecord/observedTime).
struct Observed {
    /// holderIdentity, renewTime, acquireTime, leaseDurationSeconds, leaseTransitions.
    record: Record,
    /// When we saw `record` first.
    at: Instant,
}

/// What the election compares of a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    duration_secs: i32,
    renew_time: Option<Timestamp>,
    acquire_time: Option<Timestamp>,
    transitions: i32,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            duration_secs: spec.lease_duration_seconds.unwrap_or(0),
            renew_time: spec.renew_time.map(|t| t.0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

/// The result of one attempt.
enum Attempt {
    /// We hold the Lease (taken or renewed).
    Held,
    /// Someone else holds it and it has not expired, or a fresh takeover request by them is on
    /// it.
    Other(String),
    /// We hold it and a dev loop asks for it with a fresh request.
    Yield(String),
    /// The request failed (API server unreachable, conflict, refused).
    Failed(String),
}

/// How [`Campaign::lead`] ended.
enum LeadEnd {
    /// Stopped while leading: the caller releases.
    Stopped,
    /// Leadership lost (renewals failed, or someone else took it).
    Lost,
    /// Yielded to a dev loop's takeover request: the caller releases, then campaigns again.
    Yielded,
}

struct Campaign {
    api: Api<Lease>,
    /// Set by the runner once the controller stopped after [`Role::Yielding`].
    yielded: Arc<tokio::sync::Notify>,
    /// The last takeover request seen by someone else and when we saw it change.
    request: Option<(TakeoverRequest, Instant)>,
    /// The last refusal said (so that it is said once).
    refused: Option<String>,
    name: String,
    identity: String,
    cfg: ElectionConfig,
    observed: Option<Observed>,
    role: watch::Sender<Role>,
    stop: CancellationToken,
}

impl Campaign {
    async fn run(mut self) {
        loop {
            if !self.acquire().await {
                self.role.send_replace(Role::Stopped);
                return;
            }
            self.role.send_replace(Role::Leader);
            match self.lead().await {
                LeadEnd::Lost => {}
                LeadEnd::Stopped => {
                    self.release().await;
                    self.role.send_replace(Role::Stopped);
                    return;
                }
                LeadEnd::Yielded => self.release().await,
            }
        }
    }

    /// Try until we hold the Lease; false when stopped first.
    async fn acquire(&mut self) -> bool {
        let mut changes = self.watch_changes();
        loop {
            match self.try_acquire_or_renew(true).await {
                Attempt::Held => return true,
                Attempt::Other(holder) | Attempt::Yield(holder) => {
                    self.set_follower(Some(holder));
                }
                Attempt::Failed(e) => {
                    // Refused (403: the role lacks the Lease rule, 404: no such namespace) is
                    // a configuration error: said once per message; outages stay quiet.
                    if (e.contains("(403 ") || e.contains("(404 "))
                        && self.refused.as_deref() != Some(e.as_str())
                    {
                        tracing::warn!(lease = %self.name, "cannot take the lease: {e}");
                        self.refused = Some(e.clone());
                    }
                    tracing::debug!(lease = %self.name, "cannot take the lease: {e}");
                    if *self.role.borrow() == Role::Leader {
                        self.set_follower(None);
                    }
                }
            }
            let wait = jittered(self.cfg.retry_period);
            tokio::select! {
                () = self.stop.cancelled() => return false,
                () = tokio::time::sleep(wait) => {}
                () = next_change(&mut changes) => {}
            }
        }
    }

    fn set_follower(&self, holder: Option<String>) {
        let next = Role::Follower { holder };
        self.role.send_if_modified(|r| {
            let changed = *r != next;
            *r = next.clone();
            changed
        });
    }

    /// Renew every retry period while leading, until stopped, leadership is lost, or a fresh
    /// takeover request was honoured (see [`Campaign::yield_to`]).
    async fn lead(&mut self) -> LeadEnd {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return LeadEnd::Stopped,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
            match self.renew(true).await {
                Ok(None) => {}
                Ok(Some(to)) => return self.yield_to(to).await,
                Err(end) => return end,
            }
        }
    }

    /// One renewal, retried until the renew deadline: `Ok(None)` renewed, `Ok(Some(by))` a
    /// fresh takeover request by `by` (only when `honour`), `Err` stopped or lost.
    async fn renew(&mut self, honour: bool) -> Result<Option<String>, LeadEnd> {
        let deadline = Instant::now() + self.cfg.renew_deadline;
        loop {
            let stop = self.stop.clone();
            let attempt = tokio::select! {
                () = stop.cancelled() => return Err(LeadEnd::Stopped),
                a = tokio::time::timeout_at(deadline, self.try_acquire_or_renew(honour)) => a,
            };
            match attempt {
                Ok(Attempt::Held) => return Ok(None),
                Ok(Attempt::Yield(by)) => return Ok(Some(by)),
                Ok(Attempt::Other(holder)) => {
                    tracing::warn!(lease = %self.name, "lease taken over by {holder}");
                    self.set_follower(Some(holder));
                    return Err(LeadEnd::Lost);
                }
                Ok(Attempt::Failed(e)) => {
                    tracing::debug!(lease = %self.name, "renewing the lease failed: {e}");
                }
                Err(_) => {}
            }
            if Instant::now() + self.cfg.retry_period >= deadline {
                tracing::warn!(lease = %self.name, "could not renew the lease within the renew deadline; stopping leading");
                self.set_follower(None);
                return Err(LeadEnd::Lost);
            }
            tokio::select! {
                () = self.stop.cancelled() => return Err(LeadEnd::Stopped),
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// A dev loop asked for the Lease: say [`Role::Yielding`], keep renewing (the controller
    /// may still be finishing a sync) until the runner confirms it stopped, then yield.
    async fn yield_to(&mut self, to: String) -> LeadEnd {
        self.role.send_replace(Role::Yielding { to });
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return LeadEnd::Stopped,
                () = self.yielded.notified() => return LeadEnd::Yielded,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
            if let Err(end) = self.renew(false).await {
                return end;
            }
        }
    }

    /// A fresh takeover request by someone other than us on `lease`: who asks. Fresh while it
    /// keeps changing: valid for its `takeover-seconds` after we saw it last change.
    fn fresh_request(&mut self, lease: &Lease) -> Option<String> {
        let Some(req) = TakeoverRequest::of(lease).filter(|r| r.by != self.identity) else {
            self.request = None;
            return None;
        };
        let now = Instant::now();
        if self.request.as_ref().is_none_or(|(r, _)| *r != req) {
            self.request = Some((req.clone(), now));
        }
        let (r, seen) = self.request.as_ref()?;
        (*seen + r.valid_for > now).then(|| r.by.clone())
    }

    /// client-go's `tryAcquireOrRenew`.
    /// With `honour`, a fresh takeover request on the Lease stops us from taking it
    /// ([`Attempt::Other`]) and makes the leader yield ([`Attempt::Yield`]).
    async fn try_acquire_or_renew(&mut self, honour: bool) -> Attempt {
        let now = Timestamp::now();
        let current =
            match tokio::time::timeout(REQUEST_TIMEOUT, self.api.get_opt(&self.name)).await {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => return Attempt::Failed(super::kube_error_message(&e)),
                Err(_) => return Attempt::Failed("no answer in time".into()),
            };
        let Some(lease) = current else {
            let fresh = self.our_lease(None, now);
            return match self.write(None, fresh).await {
                Ok(()) => Attempt::Held,
                Err(e) => Attempt::Failed(e),
            };
        };
        let record = Record::of(&lease);
        let seen_now = Instant::now();
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed {
                record: record.clone(),
                at: seen_now,
            });
        }
        if honour && let Some(by) = self.fresh_request(&lease) {
            // Ours: yield. Free, expired or another replica's: leave it to the requester.
            if record.holder == self.identity {
                return Attempt::Yield(by);
            }
            return Attempt::Other(if record.holder.is_empty() {
                by
            } else {
                record.holder
            });
        }
        if !record.holder.is_empty() && record.holder != self.identity {
            let valid_until = self.observed.as_ref().map_or(seen_now, |o| {
                o.at + Duration::from_secs(u64::try_from(record.duration_secs.max(0)).unwrap_or(0))
            });
            if valid_until > seen_now {
                return Attempt::Other(record.holder);
            }
        }
        let next = self.our_lease(Some(&lease), now);
        match self.write(Some(lease), next).await {
            Ok(()) => Attempt::Held,
            Err(e) => Attempt::Failed(e),
        }
    }

    /// The Lease as we write it: ours, renewed `now` (a new holder counts a transition).
    fn our_lease(&self, current: Option<&Lease>, now: Timestamp) -> Lease {
        let mut lease = current.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_string(),
                        "kubectl-meta".to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec::default()),
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        if !ours {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            if current.is_some() {
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            } else {
                spec.lease_transitions = Some(0);
            }
        }
        spec.lease_duration_seconds = Some(secs(self.cfg.lease_duration));
        spec.renew_time = Some(MicroTime(now));
        lease
    }

    /// Create (`current` None) or replace the Lease; on success it is what we observed last.
    async fn write(&mut self, current: Option<Lease>, next: Lease) -> Result<(), String> {
        let pp = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.to_string()),
        };
        let request = async {
            match current {
                None => self.api.create(&pp, &next).await,
                Some(_) => self.api.replace(&self.name, &pp, &next).await,
            }
        };
        let written = match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Err(super::kube_error_message(&e)),
            Err(_) => return Err("no answer in time".into()),
        };
        self.observed = Some(Observed {
            record: Record::of(&written),
            at: Instant::now(),
        });
        Ok(())
    }

    /// client-go's release: keep the Lease, empty its holder, duration 1 s (only while ours).
    async fn release(&mut self) {
        let Ok(Ok(Some(mut lease))) =
            tokio::time::timeout(REQUEST_TIMEOUT, self.api.get_opt(&self.name)).await
        else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = Timestamp::now();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(now));
        spec.acquire_time = Some(MicroTime(now));
        let pp = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.to_string()),
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, self.api.replace(&self.name, &pp, &lease)).await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.name, "cannot release the lease (it expires on its own): {}", super::kube_error_message(&e));
            }
            Err(_) => {
                tracing::warn!(lease = %self.name, "releasing the lease timed out (it expires on its own)");
            }
        }
    }

    /// Changes of our Lease (a watch restarted when it ends), to try again at once when the
    /// holder releases it. Errors end the stream; the retry period still applies.
    fn watch_changes(&self) -> futures::stream::BoxStream<'static, ()> {
        let api = self.api.clone();
        let name = self.name.clone();
        let stop = self.stop.clone();
        Box::pin(async_stream_changes(api, name, stop))
    }
}

/// A stream that yields once per change of `name` seen by a watch (re-opened after it ends,
/// with a pause after a failure).
fn async_stream_changes(
    api: Api<Lease>,
    name: String,
    stop: CancellationToken,
) -> impl futures::Stream<Item = ()> + Send {
    futures::stream::unfold(
        (
            api,
            name,
            stop,
            None::<futures::stream::BoxStream<'static, ()>>,
        ),
        |(api, name, stop, mut current)| async move {
            loop {
                if stop.is_cancelled() {
                    return None;
                }
                if let Some(s) = current.as_mut() {
                    match s.next().await {
                        Some(()) => return Some(((), (api, name, stop, current))),
                        None => current = None,
                    }
                }
                let wp = WatchParams::default()
                    .fields(&format!("metadata.name={name}"))
                    .timeout(290);
                match api.watch(&wp, "0").await {
                    Ok(stream) => {
                        current = Some(Box::pin(stream.filter_map(|e| async move {
                            match e {
                                Ok(
                                    WatchEvent::Added(_)
                                    | WatchEvent::Modified(_)
                                    | WatchEvent::Deleted(_),
                                ) => Some(()),
                                _ => None,
                            }
                        })));
                    }
                    Err(_) => {
                        tokio::select! {
                            () = stop.cancelled() => return None,
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
            }
        },
    )
}

/// Wait for the next change (forever when the stream ended).
async fn next_change(changes: &mut futures::stream::BoxStream<'static, ()>) {
    if changes.next().await.is_none() {
        std::future::pending::<()>().await;
    }
}

/// `d` plus up to 1.2 x `d` of random jitter (client-go's `wait.Jitter(d, 1.2)`).
fn jittered(d: Duration) -> Duration {
    let r = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
    d + d.mul_f64(r * JITTER_FACTOR)
}

/// Whole seconds, at least 1, rounded up.
fn secs(d: Duration) -> i32 {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(s.max(1)).unwrap_or(i32::MAX)
}

/// A holder identity for a replica: the host (a Pod's name) and a random suffix, as client-go
/// users commonly build it (`hostname_uuid`).
pub fn replica_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kubectl-meta".to_string());
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}_{}", &id[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_go_rules_on_the_durations() {
        assert!(ElectionConfig::default().validate().is_ok());
        let bad = ElectionConfig {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        assert!(matches!(
            bad.validate(),
            Err(ElectionConfigError::LeaseNotLongerThanRenew { .. })
        ));
        let bad = ElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_secs(2),
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("1.2 x --retry-period"), "{e}");
        let zero = ElectionConfig {
            retry_period: Duration::ZERO,
            ..ElectionConfig::default()
        };
        assert_eq!(zero.validate(), Err(ElectionConfigError::ZeroRetry));
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let d = Duration::from_millis(100);
        for _ in 0..100 {
            let j = jittered(d);
            assert!(j >= d && j <= d.mul_f64(1.0 + JITTER_FACTOR), "{j:?}");
        }
        assert_eq!(secs(Duration::from_millis(1500)), 2);
        assert_eq!(secs(Duration::ZERO), 1);
    }

    #[test]
    fn decided_means_a_known_holder() {
        assert!(Role::Leader.decided());
        assert!(
            Role::Follower {
                holder: Some("b".into())
            }
            .decided()
        );
        assert!(!Role::Follower { holder: None }.decided());
        assert!(!Role::Unknown.decided());
    }
}
