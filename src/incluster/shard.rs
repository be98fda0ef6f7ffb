//! `run --sharded`: this replica as a member of one controller's ring (docs/guide/sharding.md).
//!
//! Each member holds its own Lease per controller (no leader election), labelled with the
//! ring ([`RING_LABEL`], timebertt's ControllerRing label). Every retry period a [`Member`]:
//!
//! 1. lists the ring's Leases: the live members are those whose Lease changed within the
//!    Lease duration of *our* observation (client-go's observedTime: no trust in other clocks),
//!    and ourselves while our renewals succeed;
//! 2. when the live set differs from the ring in force, narrows the [`ShardGate`] to the
//!    parents that both the old and the new ring assign here (a parent moving away stops being
//!    synced here at once);
//! 3. once no sync is in flight on a parent no longer owned ([`ShardGate::drained`]) and the
//!    caches re-listed without the buckets lost ([`ShardGate::cache_ready`]), writes
//!    the new ring's id on its Lease ([`DRAINED_ANNOTATION`]: "I have let go of everything the
//!    new ring takes from me") while renewing it;
//! 4. when every live member's Lease carries that id, and our own Lease was already in this
//!    round's list (so a member that joined after us has seen us), widens the caches to the
//!    buckets the new ring assigns here, and once they re-listed widens the gate to the new
//!    ring alone (taking the parents that move here) and re-queues the parents that moved here.
//!
//! What the controller caches follows the gate ([`ShardGate::set_cache`]): narrowing drops the
//! buckets lost from the caches at once; widening adds the gained ones before any of their
//! parents may be synced here.
//!
//! A parent is thus synced by its new owner only after its old owner stopped and said so; a
//! dead member (its Lease not renewed for the Lease duration) is simply not waited for: it
//! fenced itself after the renew deadline (shorter) when its renewals failed. On stop the
//! member fences, its controller's in-flight syncs end, and its Lease is deleted: the others
//! re-form the ring at once. The Lease of a member gone without a clean stop is deleted by the
//! live members once unchanged for [`STALE_LEASE_DURATIONS`] Lease durations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::shard::{DEFAULT_VNODES, Ring, ShardGate, fnv1a64};
use crate::k8s::FIELD_MANAGER;
use crate::k8s::election::ElectionConfig;
use crate::k8s::lease::lease_name;

/// The label on every member Lease naming its ring (timebertt/kubernetes-controller-sharding's
/// `ControllerRing` label): the controller's name.
pub const RING_LABEL: &str = "alpha.sharding.timebertt.dev/controllerring";

/// Annotation on a member Lease: the id of the ring ([`Ring::id`]) this member has drained
/// for (it syncs nothing that ring assigns to another member).
pub const DRAINED_ANNOTATION: &str = "kubectl-meta.dev/shard-drained-for";

/// A member Lease unchanged for this many Lease durations (by our observation) is deleted by
/// the live members ([`Loop::delete_stale`]).
pub const STALE_LEASE_DURATIONS: u32 = 4;

/// How long one Lease request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The member Lease of `identity` in the ring of controller `name` of `kind`.
pub fn member_lease_name(kind: &str, name: &str, identity: &str) -> String {
    lease_name(kind, &format!("{name}-shard-{identity}"))
}

/// The ring label's value for controller `name` (a label value has at most 63 characters: a
/// longer name is replaced by its hash).
pub fn ring_label_value(name: &str) -> String {
    if name.len() <= 63 {
        name.to_string()
    } else {
        format!("ring-{:016x}", fnv1a64(name.as_bytes()))
    }
}

/// What a member shows (`/metrics`, `/readyz`).
#[derive(Debug, Clone, Default)]
pub struct MemberState {
    /// The members of the ring in force (empty: not formed yet).
    pub members: Vec<String>,
    /// Ring changes completed (every member drained, the new ring in force).
    pub moves: u64,
    /// Their durations (from seeing the new membership to the new ring in force), summed.
    pub move_seconds: f64,
    /// Buckets of parents assigned here by the ring in force.
    pub buckets: usize,
    /// How its caches are narrowed ([`CacheMode::name`]).
    pub cache_mode: &'static str,
}

/// What a widening asks the runner to re-queue: the parents of the buckets gained, or every
/// parent (`None`: keys refused while our membership lapsed were dropped).
pub type Widened = (String, Option<BTreeSet<u8>>);

/// Where a member's Leases live and how fast they move.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// Namespace of the Leases.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// The controller's kind (for the Lease name).
    pub kind: String,
    /// The controller's name: the ring.
    pub controller: String,
    /// Lease duration, renew deadline, retry period.
    pub election: ElectionConfig,
}

/// One controller's ring membership, running in the background.
pub struct Member {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    state: watch::Receiver<MemberState>,
    gate: Arc<ShardGate>,
    controller: String,
}

impl Member {
    /// Join the ring: the controller (already known to `gate` through [`ShardGate::add`])
    /// syncs what the ring assigns here; `widened` gets the controller's name each time this
    /// replica may have gained parents (re-queue them).
    pub fn spawn(
        client: kube::Client,
        cfg: MemberConfig,
        gate: Arc<ShardGate>,
        widened: mpsc::UnboundedSender<Widened>,
    ) -> Member {
        gate.add(&cfg.controller);
        let stop = CancellationToken::new();
        let (tx, state) = watch::channel(MemberState {
            cache_mode: cache_mode(&cfg.kind, gate.server_selector()).name(),
            ..MemberState::default()
        });
        let controller = cfg.controller.clone();
        let mut looped = Loop {
            api: Api::namespaced(client, &cfg.namespace),
            name: member_lease_name(&cfg.kind, &cfg.controller, &cfg.identity),
            ring: ring_label_value(&cfg.controller),
            cfg,
            gate: Arc::clone(&gate),
            widened,
            state: tx,
            seen: BTreeMap::new(),
            last_renew: None,
            target: None,
            narrowed: None,
        };
        let s = stop.clone();
        let task = tokio::spawn(async move { looped.run(s).await });
        Member {
            stop,
            task,
            state,
            gate,
            controller,
        }
    }

    /// What it shows now.
    pub fn state(&self) -> MemberState {
        self.state.borrow().clone()
    }

    /// Stop syncing anything at once (before the controller stops).
    pub fn fence(&self) {
        self.gate.fence(&self.controller);
    }

    /// Leave the ring: stop renewing and delete the Lease (call once the controller stopped:
    /// the others take its parents over at once).
    pub async fn leave(self) {
        self.gate.fence(&self.controller);
        self.stop.cancel();
        let _ = self.task.await;
        self.gate.remove(&self.controller);
    }
}

/// A member's loop state.
struct Loop {
    api: Api<Lease>,
    name: String,
    ring: String,
    cfg: MemberConfig,
    gate: Arc<ShardGate>,
    widened: mpsc::UnboundedSender<Widened>,
    state: watch::Sender<MemberState>,
    /// Other members' Leases: resourceVersion and when we saw it change.
    seen: BTreeMap<String, (String, Instant)>,
    /// When our last renewal was sent (it succeeded).
    last_renew: Option<Instant>,
    /// The ring being moved to, and since when.
    target: Option<(Ring, Instant)>,
    /// The cache scope narrowed to for the target: its generation (the lost buckets are
    /// dropped from the caches before we say we drained).
    narrowed: Option<u64>,
}

impl Loop {
    async fn run(&mut self, stop: CancellationToken) {
        loop {
            self.tick().await;
            let wait = tokio::time::sleep(self.cfg.election.retry_period);
            let drain_pending = self.target.is_some() && !self.gate.drained(&self.cfg.controller);
            tokio::select! {
                () = stop.cancelled() => break,
                () = wait => {}
                () = self.gate.sync_ended(), if drain_pending => {}
            }
        }
        let _ = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.api.delete(&self.name, &DeleteParams::default()),
        )
        .await;
    }

    /// One round: read the ring, narrow, renew with our drain mark, widen when all drained.
    async fn tick(&mut self) {
        let ctl = self.cfg.controller.clone();
        let me = self.cfg.identity.clone();
        let lp = ListParams::default().labels(&format!("{RING_LABEL}={}", self.ring));
        let listed = match tokio::time::timeout(REQUEST_TIMEOUT, self.api.list(&lp)).await {
            Ok(Ok(l)) => l.items,
            _ => {
                // Could not read the ring: keep what we have; the renew deadline fences us.
                return;
            }
        };
        let now = Instant::now();
        let mut live: BTreeMap<String, String> = BTreeMap::new();
        let mut present = std::collections::BTreeSet::new();
        let mut own: Option<Lease> = None;
        let mut stale: Vec<(String, String)> = Vec::new();
        for l in &listed {
            let Some(name) = l.metadata.name.clone() else {
                continue;
            };
            present.insert(name.clone());
            let Some(holder) = l.spec.as_ref().and_then(|s| s.holder_identity.clone()) else {
                continue;
            };
            let drained = l
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DRAINED_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            if name == self.name {
                own = Some(l.clone());
                continue;
            }
            if holder == me {
                continue;
            }
            let rv = l.metadata.resource_version.clone().unwrap_or_default();
            let entry = self
                .seen
                .entry(name.clone())
                .or_insert_with(|| (rv.clone(), now));
            if entry.0 != rv {
                *entry = (rv.clone(), now);
            }
            let unchanged = now.duration_since(entry.1);
            if unchanged < self.cfg.election.lease_duration {
                live.insert(holder, drained);
            } else if unchanged >= self.cfg.election.lease_duration * STALE_LEASE_DURATIONS {
                stale.push((name, rv));
            }
        }
        self.seen.retain(|n, _| present.contains(n));

        // Were we fenced (renewals failed for the renew deadline)? Then we rejoin as new:
        // the others may have moved our parents meanwhile.
        let fenced = self
            .last_renew
            .is_some_and(|t| now.duration_since(t) >= self.cfg.election.renew_deadline);
        if fenced {
            self.gate.set_rings(&ctl, Vec::new());
            self.target = None;
            self.narrowed = None;
        }

        let mut members: Vec<String> = live.keys().cloned().collect();
        members.push(me.clone());
        let wanted = Ring::new(members, DEFAULT_VNODES);
        let mut rings = self.gate.rings(&ctl);
        let in_force = rings.len() == 1 && rings[0] == wanted;
        if !in_force {
            match &self.target {
                Some((t, _)) if *t == wanted => {}
                _ => {
                    // Narrow: keep owning (and caching) only what the new ring leaves here too.
                    if !rings.is_empty() {
                        rings.push(wanted.clone());
                        let kept = owned_buckets(&rings, &me);
                        self.gate.set_rings(&ctl, rings);
                        self.narrowed = Some(self.gate.set_cache(&ctl, kept));
                    }
                    let since = self.target.as_ref().map_or(now, |(_, s)| *s);
                    self.target = Some((wanted.clone(), since));
                }
            }
        }
        // In force, or drained for the wanted ring: say so; else we drained for nothing yet.
        let dropped = self.narrowed.is_none_or(|g| self.gate.cache_ready(&ctl, g));
        let drained = if in_force || (self.target.is_some() && self.gate.drained(&ctl) && dropped) {
            wanted.id()
        } else {
            String::new()
        };

        // Our Lease was in this round's list: it existed before the list, so any member that
        // created its own Lease after our list will see ours in its next list and wait for our
        // drain mark. Without this, two members starting together both list an empty ring,
        // both create their Leases and both take every parent until their next round.
        let listed_self = own.is_some();
        let sent = Instant::now();
        match tokio::time::timeout(REQUEST_TIMEOUT, self.renew(own, &drained)).await {
            Ok(Ok(())) => {
                self.last_renew = Some(sent);
                let lapsed = self
                    .gate
                    .renewed(&ctl, sent.into_std() + self.cfg.election.renew_deadline);
                if lapsed && self.target.is_none() {
                    // Keys refused while our membership was not fresh were dropped.
                    let _ = self.widened.send((ctl.clone(), None));
                }
            }
            _ => return,
        }
        self.delete_stale(stale).await;

        // Widen once every live member drained for the wanted ring: first the caches (the
        // buckets gained listed), then the gate.
        if let Some((t, since)) = self.target.clone()
            && listed_self
            && drained == t.id()
            && live.values().all(|d| *d == t.id())
        {
            let mine = t.buckets_of(&me);
            let generation = self.gate.set_cache(&ctl, mine.clone());
            if !self.gate.cache_ready(&ctl, generation) {
                // Next round (the informers are re-listing).
                return;
            }
            let before = owned_buckets(&self.gate.rings(&ctl), &me);
            self.gate.set_rings(&ctl, vec![t.clone()]);
            self.target = None;
            self.narrowed = None;
            let took = since.elapsed().as_secs_f64();
            self.state.send_modify(|s| {
                s.members = t.members().to_vec();
                s.moves += 1;
                s.move_seconds += took;
                s.buckets = mine.len();
            });
            let gained: BTreeSet<u8> = mine.difference(&before).copied().collect();
            if !gained.is_empty() {
                let _ = self.widened.send((ctl, Some(gained)));
            }
        }
    }

    /// Delete the Leases of members gone for [`STALE_LEASE_DURATIONS`] Lease durations (a
    /// replica killed or lost: `run` deletes its own Lease only on a clean stop). Each delete is
    /// preconditioned on the resourceVersion we saw unchanged, so a member that renewed since
    /// keeps its Lease; one whose Lease we deleted had long fenced itself (renew deadline) and
    /// rejoins with a new Lease as a new member. Without this, every replica a Deployment ever
    /// replaced would leave a Lease behind, and each new replica would wait a Lease duration
    /// on every one of them before it first sees the ring settle. Failures are left for the next
    /// round (another member may have deleted it first).
    async fn delete_stale(&mut self, stale: Vec<(String, String)>) {
        for (name, rv) in stale {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            let deleted = tokio::time::timeout(REQUEST_TIMEOUT, self.api.delete(&name, &dp)).await;
            if matches!(deleted, Ok(Ok(_))) {
                tracing::info!(
                    controller = %self.cfg.controller,
                    lease = %name,
                    "deleted the Lease of a member gone for {} Lease durations",
                    STALE_LEASE_DURATIONS
                );
                self.seen.remove(&name);
            }
        }
    }

    /// Create or renew our Lease, saying which ring we drained for.
    async fn renew(&self, listed: Option<Lease>, drained: &str) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let duration =
            i32::try_from(self.cfg.election.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let meta = |rv: Option<String>| ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.cfg.namespace.clone()),
            resource_version: rv,
            labels: Some(BTreeMap::from([
                (RING_LABEL.to_string(), self.ring.clone()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "kubectl-meta".to_string(),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                DRAINED_ANNOTATION.to_string(),
                drained.to_string(),
            )])),
            ..ObjectMeta::default()
        };
        let spec = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(now.clone()),
            ..LeaseSpec::default()
        };
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let current = match listed {
            Some(l) => Some(l),
            None => self.api.get_opt(&self.name).await?,
        };
        match current {
            Some(old) => {
                let mut spec = spec;
                spec.acquire_time = old.spec.and_then(|s| s.acquire_time).or(Some(now));
                let lease = Lease {
                    metadata: meta(old.metadata.resource_version),
                    spec: Some(spec),
                };
                self.api.replace(&self.name, &pp, &lease).await.map(|_| ())
            }
            None => {
                let mut spec = spec;
                spec.acquire_time = Some(now);
                let lease = Lease {
                    metadata: meta(None),
                    spec: Some(spec),
                };
                self.api.create(&pp, &lease).await.map(|_| ())
            }
        }
    }
}

/// The buckets every ring of `rings` assigns to `me` (none without rings).
fn owned_buckets(rings: &[Ring], me: &str) -> BTreeSet<u8> {
    if rings.is_empty() {
        return BTreeSet::new();
    }
    (0..=u8::MAX)
        .filter(|b| rings.iter().all(|r| r.bucket_owner(*b) == Some(me)))
        .collect()
}

/// How a sharded controller's caches are narrowed to this replica's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// Parents (a decorator's targets) filtered by their uid's bucket as they arrive,
    /// children (a decorator's attachments) watched by their bucket label
    /// (CompositeController, DecoratorController, on a server without KEP-5866).
    Label,
    /// Parents (targets) listed and watched with a KEP-5866 `shardSelector` (the server sends
    /// only this replica's share; the bucket filter stays as a safety net), children
    /// (attachments) watched by their bucket label (CompositeController, DecoratorController,
    /// on a server with `ShardedListAndWatch`).
    Server,
    /// Parents by uid bucket as they arrive, outputs by their parent's bucket label, inputs
    /// all cached (MapController: any parent may select any input).
    LabelExceptInputs,
    /// As `LabelExceptInputs`, parents by a KEP-5866 `shardSelector`.
    ServerExceptInputs,
    /// Everything cached (no kind today; kept for kinds not narrowed).
    All,
}

impl CacheMode {
    /// The `mode` label of `kubectl_meta_shard_cache_mode`.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Label => "label",
            CacheMode::Server => "server",
            CacheMode::LabelExceptInputs => "label-except-inputs",
            CacheMode::ServerExceptInputs => "server-except-inputs",
            CacheMode::All => "all",
        }
    }

    /// For the log line of a joining member.
    pub fn describe(self) -> &'static str {
        match self {
            CacheMode::Label => {
                "only its share (mode label: parents and targets filtered by uid bucket as they arrive, children and attachments watched by their bucket label)"
            }
            CacheMode::LabelExceptInputs => {
                "its share of parents and outputs, every input (mode label-except-inputs: parents filtered by uid bucket as they arrive, outputs watched by their parent's bucket label)"
            }
            CacheMode::Server => {
                "only its share (mode server: parents and targets listed and watched with a KEP-5866 shardSelector, children and attachments watched by their bucket label)"
            }
            CacheMode::ServerExceptInputs => {
                "its share of parents and outputs, every input (mode server-except-inputs: parents listed and watched with a KEP-5866 shardSelector, outputs watched by their parent's bucket label)"
            }
            CacheMode::All => "every object (mode all: this kind's caches are not sharded)",
        }
    }
}

/// The cache mode of a controller of `kind`, on a server that honours `shardSelector` or not
/// ([`ShardGate::server_selector`]).
pub fn cache_mode(kind: &str, server_selector: bool) -> CacheMode {
    match (kind, server_selector) {
        ("CompositeController" | "DecoratorController", true) => CacheMode::Server,
        ("CompositeController" | "DecoratorController", false) => CacheMode::Label,
        ("MapController", true) => CacheMode::ServerExceptInputs,
        ("MapController", false) => CacheMode::LabelExceptInputs,
        _ => CacheMode::All,
    }
}
