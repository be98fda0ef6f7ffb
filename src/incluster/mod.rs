//! `kubectl meta run`: the engine of `dev`, headless, in a cluster, with one Lease per
//! controller.
//!
//! [`Runner`] owns the [`Engine`] and, per controller definition, an [`Elector`] campaigning
//! for its Lease. A controller runs (informers, workers, writes) only while this replica holds
//! its Lease: on [`Role::Leader`] it is started (and resumes rollouts from its
//! ControllerRevisions, as any start does), on losing the Lease it is stopped (in-flight syncs
//! finish first), so a replica that is not the holder writes nothing. Definitions arrive as
//! whole sets from [`sources`] (the cluster's definition objects, watched; or `-f` files): a
//! new one starts campaigning, a changed one restarts its controller (keeping the Lease), a
//! removed one stops and releases its Lease.
//!
//! - [`sources`]: where definition sets come from.
//! - [`metrics`]: Prometheus metrics from the engine's events and the runner's state.
//! - [`http`]: `/healthz`, `/readyz`, `/metrics`.

pub mod http;
pub mod metrics;
pub mod shard;
pub mod sources;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::engine::events::{EngineEvent, EventBus, Trigger};
use crate::engine::{QueueMetrics, QueueStats};
use crate::hooks::endpoint;
use crate::k8s::election::{ElectionConfig, Elector, Role};
use crate::k8s::lease::lease_name;
use crate::spec::ControllerDef;

/// How often the runner refreshes what `/readyz` and `/metrics` show.
const STATUS_EVERY: Duration = Duration::from_millis(250);

/// How long stopping a controller waits for its in-flight syncs.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How the runner campaigns.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Namespace of the Leases.
    pub lease_namespace: String,
    /// This replica's holder identity.
    pub identity: String,
    /// Lease duration, renew deadline, retry period.
    pub election: ElectionConfig,
    /// `--sharded`: every controller's parents are shared among the replicas ([`shard`]),
    /// through this gate (set on the engine's context), instead of one Lease per controller.
    pub shard: Option<Arc<crate::engine::shard::ShardGate>>,
}

/// One source's definitions, whole.
#[derive(Debug, Clone, Default)]
pub struct DefinitionSet {
    /// Which source (the runner keeps the latest set of each, and runs their union).
    pub source: usize,
    /// The definitions to run.
    pub defs: Vec<ControllerDef>,
    /// Names whose current version could not be read: the running version is kept.
    pub broken: BTreeSet<String>,
}

/// What `/readyz` and `/metrics` show of one controller.
#[derive(Debug, Clone)]
pub struct ControllerStatus {
    /// This replica's role for the controller's Lease.
    pub role: Role,
    /// Started (resources found, caches synced).
    pub started: bool,
    /// Its work queue (zero when not started).
    pub queue: QueueStats,
    /// Its work queue's metrics (zero when not started).
    pub metrics: QueueMetrics,
    /// Concurrent syncs (`--workers`).
    pub workers: usize,
    /// `--sharded`: the ring as this member sees it, and the parents it owns and synced.
    pub shard: Option<(shard::MemberState, usize)>,
    /// What its caches hold, `(resource, objects)` (empty when not started).
    pub cached: Vec<(String, usize)>,
    /// Objects the server sent those caches, by resource (before client-side filters).
    pub received: Vec<(String, u64)>,
}

/// What the runner shows: each controller's state, and whether the definitions were read.
#[derive(Debug, Default)]
pub struct Status {
    /// Every source delivered its first set.
    pub loaded: bool,
    /// By controller name.
    pub controllers: BTreeMap<String, ControllerStatus>,
}

impl Status {
    /// Why this replica is not ready (empty: ready): definitions not read yet, a Lease whose
    /// holder is unknown, a held controller whose caches have not synced.
    pub fn not_ready(&self) -> Vec<String> {
        let mut why = Vec::new();
        if !self.loaded {
            why.push("controller definitions not read yet".to_string());
        }
        for (name, c) in &self.controllers {
            if !c.role.decided() {
                why.push(format!("{name}: lease not decided yet"));
            } else if c.role == Role::Leader && !c.started {
                why.push(format!("{name}: caches not synced yet"));
            }
        }
        why
    }
}

/// Shared, read by the HTTP server.
pub type SharedStatus = Arc<RwLock<Status>>;

/// One controller of the runner.
struct Slot {
    def: ControllerDef,
    campaign: Campaign,
    /// Tells this elector's role changes from a replaced one's.
    generation: u64,
    /// Its controller runs in the engine.
    leading: bool,
    /// `--sharded`: the ring widened (parents moved here) and these parents are still to be
    /// re-queued (it may not have started yet when it widened): `Some(None)` every parent,
    /// `Some(Some(buckets))` the parents of those buckets.
    requeue: Option<Option<BTreeSet<u8>>>,
    /// `--sharded`: ring changes already said in the log (an `info` line per completed move).
    moves_logged: u64,
}

/// How a controller's replicas share it.
enum Campaign {
    /// One Lease, one active replica.
    Elected(Elector),
    /// A member of its ring (`--sharded`).
    Member(shard::Member),
}

impl Campaign {
    fn role(&self) -> Role {
        match self {
            Campaign::Elected(e) => e.role().borrow().clone(),
            Campaign::Member(m) if m.state().members.is_empty() => Role::Unknown,
            Campaign::Member(_) => Role::Leader,
        }
    }

    async fn stop(self) {
        match self {
            Campaign::Elected(e) => e.stop().await,
            Campaign::Member(m) => m.leave().await,
        }
    }
}

/// The engine, the controllers' elections, and what they show.
pub struct Runner {
    engine: Engine,
    cfg: RunnerConfig,
    slots: BTreeMap<String, Slot>,
    /// The latest set of each source.
    sets: BTreeMap<usize, DefinitionSet>,
    /// How many sources there are (`loaded` once each delivered).
    sources: usize,
    roles_tx: mpsc::UnboundedSender<(String, u64, Role)>,
    roles_rx: mpsc::UnboundedReceiver<(String, u64, Role)>,
    /// Sharded controllers that may have gained parents (re-queue them).
    widened_tx: mpsc::UnboundedSender<shard::Widened>,
    widened_rx: mpsc::UnboundedReceiver<shard::Widened>,
    generation: u64,
    status: SharedStatus,
    metrics: Arc<metrics::Metrics>,
}

impl Runner {
    /// A runner over `engine`, expecting sets from `sources` sources.
    pub fn new(
        engine: Engine,
        cfg: RunnerConfig,
        sources: usize,
        metrics: Arc<metrics::Metrics>,
    ) -> Runner {
        let (roles_tx, roles_rx) = mpsc::unbounded_channel();
        let (widened_tx, widened_rx) = mpsc::unbounded_channel();
        engine.context().set_shard(cfg.shard.clone());
        Runner {
            widened_tx,
            widened_rx,
            engine,
            cfg,
            slots: BTreeMap::new(),
            sets: BTreeMap::new(),
            sources,
            roles_tx,
            roles_rx,
            generation: 0,
            status: Arc::default(),
            metrics,
        }
    }

    /// What `/readyz` and `/metrics` read.
    pub fn status(&self) -> SharedStatus {
        Arc::clone(&self.status)
    }

    fn bus(&self) -> &EventBus {
        &self.engine.context().bus
    }

    fn info(&self, controller: Option<&str>, message: String) {
        self.bus().publish(EngineEvent::Info {
            controller: controller.map(str::to_string),
            message,
        });
    }

    /// Run until `shutdown`: take definition sets, follow the Leases.
    pub async fn run_until(
        &mut self,
        mut sets: mpsc::Receiver<DefinitionSet>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(STATUS_EVERY);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                Some(set) = sets.recv() => self.apply(set).await,
                Some((name, generation, role)) = self.roles_rx.recv() => {
                    self.on_role(&name, generation, role).await;
                }
                Some((name, buckets)) = self.widened_rx.recv() => {
                    if let Some(slot) = self.slots.get_mut(&name) {
                        slot.requeue = match (slot.requeue.take(), buckets) {
                            (Some(Some(mut had)), Some(b)) => {
                                had.extend(b);
                                Some(Some(had))
                            }
                            (None, b) => Some(b),
                            _ => Some(None),
                        };
                    }
                    self.requeue_widened();
                }
                _ = tick.tick() => {
                    self.requeue_widened();
                    self.log_ring_changes();
                    self.refresh_status();
                }
            }
        }
    }

    /// A source's new set: start, restart or stop controllers so that the union of the sets
    /// runs.
    pub async fn apply(&mut self, set: DefinitionSet) {
        self.sets.insert(set.source, set);
        let mut wanted: BTreeMap<String, ControllerDef> = BTreeMap::new();
        let mut broken = BTreeSet::new();
        for s in self.sets.values() {
            broken.extend(s.broken.iter().cloned());
            for d in &s.defs {
                if let Some(other) = wanted.get(d.name()) {
                    self.bus().publish(EngineEvent::Error {
                        controller: Some(d.name().to_string()),
                        object: None,
                        message: format!(
                            "{} {} and {} {} have the same name; only the first runs (rename one)",
                            other.kind(),
                            other.name(),
                            d.kind(),
                            d.name()
                        ),
                    });
                    continue;
                }
                wanted.insert(d.name().to_string(), d.clone());
            }
        }
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            if !wanted.contains_key(&name) && !broken.contains(&name) {
                self.remove(&name, "no longer defined").await;
            }
        }
        for (name, def) in wanted {
            match self.slots.get(&name) {
                Some(slot) if slot.def == def => {}
                Some(slot) if slot.def.kind() != def.kind() => {
                    self.remove(&name, "its kind changed").await;
                    self.add(def).await;
                }
                Some(_) => self.replace(def).await,
                None => self.add(def).await,
            }
        }
        if self.sets.len() >= self.sources
            && let Ok(mut st) = self.status.write()
        {
            st.loaded = true;
        }
        self.refresh_status();
    }

    /// Read the webhooks' Secrets and ConfigMaps of `def` now, when they can be. When they
    /// cannot (not created yet, or not resolving), the controller still campaigns and starts:
    /// the engine follows the references and begins syncing once they resolve, saying what it
    /// waits for (as `dev` does, and as Metacontroller retries such a controller).
    async fn resolve_endpoints(&self, def: &ControllerDef) {
        self.metrics.describe(def);
        let ctx = self.engine.context();
        match endpoint::resolve_from_cluster(&ctx.client, std::slice::from_ref(def)).await {
            Ok(resolved) => resolved.iter().for_each(|r| ctx.hooks.set_endpoints(r)),
            Err(e) => self.info(
                Some(def.name()),
                format!(
                    "{}: its webhooks' Secrets or ConfigMaps do not resolve yet ({e}); it syncs once they do",
                    def.name()
                ),
            ),
        }
    }

    /// A new definition: campaign for its Lease (its controller starts once held), or join
    /// its ring and start it (`--sharded`: it syncs what the ring assigns here).
    async fn add(&mut self, def: ControllerDef) {
        self.resolve_endpoints(&def).await;
        self.generation += 1;
        if let Some(gate) = self.cfg.shard.clone() {
            let name = def.name().to_string();
            let mode = shard::cache_mode(def.kind(), gate.server_selector());
            let member = shard::Member::spawn(
                self.engine.context().client.clone(),
                shard::MemberConfig {
                    namespace: self.cfg.lease_namespace.clone(),
                    identity: self.cfg.identity.clone(),
                    kind: def.kind().to_string(),
                    controller: name.clone(),
                    election: self.cfg.election,
                },
                gate,
                self.widened_tx.clone(),
            );
            self.info(
                Some(&name),
                format!(
                    "{} {name}: joined its ring as {} (Lease {}/{}); syncing the parents the ring assigns here; caching {}",
                    def.kind(),
                    self.cfg.identity,
                    self.cfg.lease_namespace,
                    shard::member_lease_name(def.kind(), &name, &self.cfg.identity),
                    mode.describe()
                ),
            );
            self.engine.start(def.clone());
            self.slots.insert(
                name,
                Slot {
                    def,
                    campaign: Campaign::Member(member),
                    generation: self.generation,
                    leading: true,
                    requeue: None,
                    moves_logged: 0,
                },
            );
            return;
        }
        let generation = self.generation;
        let name = def.name().to_string();
        let lease = lease_name(def.kind(), def.name());
        let elector = Elector::spawn(
            self.engine.context().client.clone(),
            &self.cfg.lease_namespace,
            &lease,
            &self.cfg.identity,
            self.cfg.election,
        );
        let mut roles = elector.role();
        let tx = self.roles_tx.clone();
        let controller = name.clone();
        tokio::spawn(async move {
            loop {
                let role = roles.borrow_and_update().clone();
                if tx.send((controller.clone(), generation, role)).is_err() {
                    return;
                }
                if roles.changed().await.is_err() {
                    return;
                }
            }
        });
        self.info(
            Some(&name),
            format!(
                "{} {name}: campaigning for lease {}/{lease} as {}",
                def.kind(),
                self.cfg.lease_namespace,
                self.cfg.identity
            ),
        );
        self.slots.insert(
            name,
            Slot {
                def,
                campaign: Campaign::Elected(elector),
                generation,
                leading: false,
                requeue: None,
                moves_logged: 0,
            },
        );
    }

    /// A changed definition: restart its controller when it runs here (the Lease is kept).
    async fn replace(&mut self, def: ControllerDef) {
        self.resolve_endpoints(&def).await;
        let name = def.name().to_string();
        let Some(slot) = self.slots.get_mut(&name) else {
            return;
        };
        slot.def = def.clone();
        if slot.leading {
            self.engine.stop_controller(&name).await;
            self.engine.start(def);
            self.info(
                Some(&name),
                format!("{name}: definition changed; restarted"),
            );
        } else {
            self.info(Some(&name), format!("{name}: definition changed"));
        }
    }

    /// A removed definition: stop its controller, then release its Lease.
    async fn remove(&mut self, name: &str, why: &str) {
        let Some(slot) = self.slots.remove(name) else {
            return;
        };
        if let Campaign::Member(m) = &slot.campaign {
            m.fence();
        }
        if slot.leading {
            self.stop_controller(name).await;
        }
        slot.campaign.stop().await;
        self.info(Some(name), format!("{name}: stopped ({why})"));
    }

    /// A Lease's role changed: start the controller on taking it, stop it on losing it.
    async fn on_role(&mut self, name: &str, generation: u64, role: Role) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        if slot.generation != generation {
            return;
        }
        let lease = lease_name(slot.def.kind(), name);
        match role {
            Role::Leader if !slot.leading => {
                slot.leading = true;
                let def = slot.def.clone();
                self.engine.start(def);
                self.info(
                    Some(name),
                    format!(
                        "{name}: took lease {}/{lease}; syncing",
                        self.cfg.lease_namespace
                    ),
                );
            }
            Role::Leader => {}
            Role::Yielding { to } => {
                let was_leading = slot.leading;
                slot.leading = false;
                self.info(
                    Some(name),
                    format!(
                        "{name}: {to} asks for lease {}/{lease} (dev --takeover); finishing in-flight syncs, then yielding it",
                        self.cfg.lease_namespace
                    ),
                );
                if was_leading {
                    self.stop_controller(name).await;
                }
                if let Some(Slot {
                    campaign: Campaign::Elected(e),
                    ..
                }) = self.slots.get(name)
                {
                    e.yielded();
                }
                self.info(
                    Some(name),
                    format!(
                        "{name}: yielded lease {}/{lease} to {to}; syncing stopped here until it is released or lapses",
                        self.cfg.lease_namespace
                    ),
                );
            }
            other => {
                if slot.leading {
                    slot.leading = false;
                    self.info(
                        Some(name),
                        format!(
                            "{name}: lost lease {}/{lease} ({}); stopping syncing",
                            self.cfg.lease_namespace,
                            describe(&other)
                        ),
                    );
                    self.stop_controller(name).await;
                } else if let Role::Follower { holder: Some(h) } = &other {
                    self.info(
                        Some(name),
                        format!(
                            "{name}: lease {}/{lease} held by {h}; standing by",
                            self.cfg.lease_namespace
                        ),
                    );
                }
            }
        }
        self.refresh_status();
    }

    /// Stop a controller: cancelled at once (no new sync starts), its in-flight syncs given
    /// [`STOP_WAIT`] to finish (during an API outage they may hang on requests: they end on
    /// their own, the runner goes on).
    async fn stop_controller(&mut self, name: &str) {
        if tokio::time::timeout(STOP_WAIT, self.engine.stop_controller(name))
            .await
            .is_err()
        {
            tracing::warn!(controller = %name, "in-flight syncs still running after {STOP_WAIT:?}; not waiting for them");
        }
    }

    /// Re-queue the parents of every sharded controller whose ring widened, once it runs: the
    /// keys of parents that were not ours were dropped, the new ones must be synced here.
    fn requeue_widened(&mut self) {
        for (name, slot) in &mut self.slots {
            if slot.requeue.is_none() {
                continue;
            }
            let started = self.engine.started(Some(name));
            if started.is_empty() {
                continue;
            }
            let which = slot.requeue.take().flatten();
            for h in started {
                match &which {
                    None => h.enqueue_all(Trigger::ResyncPeriod),
                    Some(buckets) => {
                        h.enqueue_buckets(buckets, Trigger::ResyncPeriod);
                    }
                }
            }
        }
    }

    /// `--sharded`: one `info` line per ring change completed here, so a replica's log says
    /// when its share moved and to what (metrics alone show only the current counts).
    fn log_ring_changes(&mut self) {
        let mut lines = Vec::new();
        for (name, slot) in &mut self.slots {
            let Campaign::Member(m) = &slot.campaign else {
                continue;
            };
            let st = m.state();
            if st.moves == slot.moves_logged {
                continue;
            }
            slot.moves_logged = st.moves;
            lines.push((
                name.clone(),
                format!(
                    "ring now {} member(s) ({}): {} of {} buckets assigned here",
                    st.members.len(),
                    st.members.join(", "),
                    st.buckets,
                    crate::engine::shard::BUCKETS
                ),
            ));
        }
        for (name, line) in lines {
            self.info(Some(&name), line);
        }
    }

    /// Refresh what `/readyz` and `/metrics` show.
    fn refresh_status(&self) {
        let mut controllers = BTreeMap::new();
        for (name, slot) in &self.slots {
            let role = slot.campaign.role();
            let shard = match &slot.campaign {
                Campaign::Member(m) => Some((
                    m.state(),
                    self.cfg.shard.as_ref().map_or(0, |g| g.parents(name)),
                )),
                Campaign::Elected(_) => None,
            };
            let handle = if slot.leading {
                self.engine.started(Some(name)).into_iter().next()
            } else {
                None
            };
            controllers.insert(
                name.clone(),
                ControllerStatus {
                    role,
                    started: handle.is_some(),
                    queue: handle.as_ref().map(|h| h.queue_stats()).unwrap_or_default(),
                    metrics: handle
                        .as_ref()
                        .map(|h| h.queue_metrics())
                        .unwrap_or_default(),
                    cached: handle
                        .as_ref()
                        .map(|h| h.cached_objects())
                        .unwrap_or_default(),
                    received: handle.map(|h| h.received_objects()).unwrap_or_default(),
                    workers: self.engine.context().options.workers.max(1),
                    shard,
                },
            );
        }
        if let Ok(mut st) = self.status.write() {
            st.controllers = controllers;
        }
    }

    /// Stop: every controller finishes its in-flight syncs and stops writing, then every Lease
    /// is released at once (the other replicas take over right away).
    pub async fn shutdown(self) {
        for s in self.slots.values() {
            if let Campaign::Member(m) = &s.campaign {
                m.fence();
            }
        }
        self.engine.shutdown().await;
        let stops = self.slots.into_values().map(|s| s.campaign.stop());
        futures::future::join_all(stops).await;
    }
}

/// For a log line: `held by X`, `renewals failed`, ...
fn describe(role: &Role) -> String {
    match role {
        Role::Follower { holder: Some(h) } => format!("held by {h}"),
        Role::Follower { holder: None } => "not renewed within the renew deadline".to_string(),
        Role::Unknown => "not known".to_string(),
        Role::Stopped => "stopped".to_string(),
        Role::Leader => "held".to_string(),
        Role::Yielding { to } => format!("yielding to {to}"),
    }
}
