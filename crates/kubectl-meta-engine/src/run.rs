//! The [`Engine`]: it starts controllers from definitions, runs them until stopped, and tells
//! when everything has converged (`--once`). Controllers start concurrently (one whose
//! resources do not exist yet waits for them without holding up the others). Stopping cancels
//! the shared token: routers end, workers finish their in-flight sync (hook calls finish or
//! time out) and exit, informers stop.
//!
//! The top of the engine: it names the kinds ([`crate::kinds`]), which build on the
//! [`crate::runtime`]; neither names it back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{SyncError, WritesHeld};
use crate::events::{EngineEvent, Trigger};
use crate::kinds;
use crate::runtime::context::EngineContext;
use crate::runtime::controller::{ControllerHandle, KeyState, LastExchange, Tracker};
use crate::runtime::{reconcile, references};
use crate::spec::ControllerDef;

/// One controller's replay for the dev loop: the last exchange of each of its keys, taken
/// before a reload, to send again to the reloaded hook ([`Engine::replay_jobs`]).
pub struct ReplayJob {
    /// The controller whose hooks answer again.
    pub controller: Arc<dyn ControllerHandle>,
    /// The exchanges to replay.
    pub exchanges: Vec<LastExchange>,
}

impl ReplayJob {
    /// The controller's name.
    pub fn name(&self) -> &str {
        self.controller.name()
    }

    /// Send every request again and publish how the answers differ
    /// ([`EngineEvent::Replay`], one per exchange); returns those events.
    pub async fn run(self) -> Vec<EngineEvent> {
        self.controller.replay(self.exchanges).await
    }
}

/// A controller kind's start: its handle and the worker loop to run, or why it cannot start.
type LaunchFuture = futures::future::BoxFuture<
    'static,
    Result<
        (
            Arc<dyn ControllerHandle>,
            futures::future::BoxFuture<'static, ()>,
        ),
        String,
    >,
>;

/// One controller's handles.
struct Running {
    name: String,
    /// Stops this controller only (a child of the engine's token).
    stop: CancellationToken,
    tracker: Arc<Tracker>,
    /// Set once the controller started (resources resolved, caches synced).
    handle: Arc<Mutex<Option<Arc<dyn ControllerHandle>>>>,
    task: JoinHandle<()>,
    /// Set when the controller can never start (its error).
    failed: Arc<Mutex<Option<String>>>,
    /// What it waits for before it can start (its webhooks' Secrets and ConfigMaps), if
    /// anything.
    waiting: Arc<Mutex<Option<String>>>,
}

/// Where `--once` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnceReport {
    /// True when every controller started and nothing is left to do.
    pub converged: bool,
    /// Parents whose last sync failed: (controller, parent, error).
    pub failed: Vec<(String, String, String)>,
    /// Work still pending at the deadline: (controller, what).
    pub pending: Vec<(String, String)>,
    /// Parents held by the hot-loop guard (also listed in `failed`): (controller, parent,
    /// message). Retrying does not end a hot loop; a hook change or a resync does.
    pub hot_loops: Vec<(String, String, String)>,
    /// The typed errors of the failed syncs in `failed` (not of the controllers that could
    /// not start, nor of hot loops): what `--once` decides its exit code on.
    pub errors: Vec<SyncError>,
    /// Why writes were held, if they were.
    pub held: Option<WritesHeld>,
    /// Parents converged with failed children (kstatus Failed): (controller, parent, the
    /// children and why). Reported, not waited for.
    pub children_failed: Vec<(String, String, String)>,
    /// Converged reports of [`Engine::wait_converged`]: when the engine was first seen idle,
    /// i.e. when its work ended (the quiet period that confirmed it came after).
    pub idle_since: Option<Instant>,
}

/// What `--once` (and [`Engine::wait_converged`]) waits for besides syncs that write nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitFor {
    /// Every child Current (kstatus: Pods Ready, workloads caught up, custom resources Ready),
    /// or Failed (reported).
    #[default]
    Current,
    /// Nothing: a sync that writes nothing is convergence.
    None,
}

/// The running engine.
pub struct Engine {
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    running: Vec<Running>,
    wait_for: WaitFor,
    quiet: Duration,
    /// Told each definition started, so that a dump can be replayed
    /// ([`Engine::set_flight_recorder`]).
    flight: Option<Arc<crate::flight::FlightRecorder>>,
}

/// How long [`Engine::wait_converged`] wants everything done before it calls it converged, by
/// default: the events of the last writes may still be on their way from the API server.
pub const QUIET: Duration = Duration::from_millis(300);

impl Engine {
    /// An engine over shared services.
    pub fn new(ctx: Arc<EngineContext>) -> Self {
        Engine {
            ctx,
            stop: CancellationToken::new(),
            running: Vec::new(),
            wait_for: WaitFor::default(),
            quiet: QUIET,
            flight: None,
        }
    }

    /// Keep the definition of every controller started from now on in `recorder`, so that its
    /// dumps carry what `kubectl meta replay` needs to run them again.
    pub fn set_flight_recorder(&mut self, recorder: Arc<crate::flight::FlightRecorder>) {
        self.flight = Some(recorder);
    }

    /// What convergence waits for besides syncs that write nothing (default: every child
    /// Current).
    pub fn set_wait_for(&mut self, wait_for: WaitFor) {
        self.wait_for = wait_for;
    }

    /// How long everything must stay done before [`Engine::wait_converged`] calls it
    /// converged (default [`QUIET`]). Shorter suits an API server in the same process, whose
    /// events arrive within microseconds (`dryrun --simulate`).
    pub fn set_quiet(&mut self, quiet: Duration) {
        self.quiet = quiet;
    }

    /// The shared services.
    pub fn context(&self) -> &Arc<EngineContext> {
        &self.ctx
    }

    /// Start a controller (in the background; it begins syncing once its resources and the
    /// Secrets and ConfigMaps its webhooks reference exist).
    pub fn start(&mut self, def: ControllerDef) {
        let name = def.name().to_string();
        if let Some(f) = &self.flight {
            f.note_controller(&name, def.raw());
        }
        let tracker = Arc::new(Tracker::default());
        let slot: Arc<Mutex<Option<Arc<dyn ControllerHandle>>>> = Arc::new(Mutex::new(None));
        let failed = Arc::new(Mutex::new(None));
        let waiting = Arc::new(Mutex::new(None));
        let own_stop = self.stop.child_token();
        // The webhooks' references: followed for as long as the controller runs.
        let (refs_ready, refs_resolved) = tokio::sync::oneshot::channel();
        tokio::spawn(references::follow(
            def.clone(),
            Arc::clone(&self.ctx),
            own_stop.clone(),
            Arc::clone(&waiting),
            refs_ready,
        ));
        let (ctx, stop, t) = (
            Arc::clone(&self.ctx),
            own_stop.clone(),
            Arc::clone(&tracker),
        );
        let launch: LaunchFuture = match def {
            ControllerDef::Composite(c) => Box::pin(async move {
                reconcile::launch_def::<kinds::composite::Composite>(c, ctx, stop, t)
                    .await
                    .map_err(|e| e.to_string())
            }),
            ControllerDef::Decorator(d) => Box::pin(async move {
                reconcile::launch_def::<kinds::decorator::Decorator>(d, ctx, stop, t)
                    .await
                    .map_err(|e| e.to_string())
            }),
            ControllerDef::Map(m) => Box::pin(async move {
                reconcile::launch_def::<kinds::map::MapCtl>(m, ctx, stop, t)
                    .await
                    .map_err(|e| e.to_string())
            }),
        };
        let (ctx, stop) = (Arc::clone(&self.ctx), own_stop.clone());
        let (s, f, controller) = (Arc::clone(&slot), Arc::clone(&failed), name.clone());
        let task = tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => return,
                resolved = refs_resolved => if resolved.is_err() { return },
            }
            let (handle, run) = match launch.await {
                Ok(started) => started,
                Err(e) => {
                    if !stop.is_cancelled() {
                        ctx.bus.publish(EngineEvent::Error {
                            controller: None,
                            object: None,
                            message: e.clone(),
                        });
                        if let Ok(mut f) = f.lock() {
                            *f = Some(e);
                        }
                    }
                    return;
                }
            };
            if let Ok(mut s) = s.lock() {
                *s = Some(handle);
            }
            run.await;
            ctx.bus
                .publish(EngineEvent::ControllerStopped { controller });
        });
        self.running.push(Running {
            name,
            stop: own_stop,
            tracker,
            handle: slot,
            task,
            failed,
            waiting,
        });
    }

    /// Queue every parent of every controller (manual resync).
    pub fn resync_all(&self) {
        self.resync(None, None);
    }

    /// Queue parents for a manual resync: of controller `controller` (all when `None`), the
    /// parent `namespace/name` or `name` (all when `None`). Returns how many were queued.
    pub fn resync(&self, controller: Option<&str>, parent: Option<&str>) -> usize {
        let mut n = 0;
        for c in self.started(controller) {
            n += match parent {
                Some(p) => c.enqueue_named(p, Trigger::Manual),
                None => {
                    let count = c.parent_count();
                    c.enqueue_all(Trigger::Manual);
                    count
                }
            };
        }
        n
    }

    /// Names of the controllers (started or waiting for their resources), in start order.
    pub fn controllers(&self) -> Vec<String> {
        self.running.iter().map(|r| r.name.clone()).collect()
    }

    /// The started controllers, all or the one named.
    pub fn started(&self, name: Option<&str>) -> Vec<Arc<dyn ControllerHandle>> {
        self.running
            .iter()
            .filter(|r| name.is_none_or(|n| n == r.name))
            .filter_map(|r| r.handle.lock().ok().and_then(|c| c.clone()))
            .collect()
    }

    /// A hook of these controllers changed (hot reload): forget cached customize answers and
    /// resync every parent of each.
    pub fn hook_reloaded(&self, controllers: &[String]) {
        for name in controllers {
            for c in self.started(Some(name)) {
                c.hook_reloaded();
            }
        }
    }

    /// Send the last request of every parent of these controllers to their (reloaded) hooks
    /// and publish how the answers differ ([`EngineEvent::Replay`]).
    pub async fn replay(&self, controllers: &[String]) -> Vec<EngineEvent> {
        let mut out = Vec::new();
        for job in self.replay_jobs(controllers) {
            out.extend(job.run().await);
        }
        out
    }

    /// The replay of each of these controllers, its exchanges taken now (before a resync
    /// replaces them); run each with [`ReplayJob::run`].
    pub fn replay_jobs(&self, controllers: &[String]) -> Vec<ReplayJob> {
        controllers
            .iter()
            .flat_map(|name| self.started(Some(name)))
            .map(|controller| ReplayJob {
                exchanges: controller.exchanges(),
                controller,
            })
            .collect()
    }

    /// Stop one controller (its in-flight syncs finish first) and forget it; shared informers
    /// keep running. Returns false when no controller has that name.
    pub async fn stop_controller(&mut self, name: &str) -> bool {
        let Some(i) = self.running.iter().position(|r| r.name == name) else {
            return false;
        };
        let r = self.running.remove(i);
        r.stop.cancel();
        let _ = r.task.await;
        true
    }

    /// Pause or resume writes (see [`EngineContext::set_paused`]); resuming resyncs every
    /// parent so the plans held meanwhile are carried out.
    pub fn set_paused(&self, paused: bool) {
        if self.ctx.is_paused() == paused {
            return;
        }
        self.ctx.set_paused(paused);
        self.ctx.bus.publish(EngineEvent::Paused { paused });
        if !paused {
            self.resync_all();
        }
    }

    /// One look at whether everything is done.
    fn look(&self) -> OnceReport {
        let mut rep = OnceReport {
            converged: true,
            failed: Vec::new(),
            pending: Vec::new(),
            hot_loops: Vec::new(),
            errors: Vec::new(),
            held: None,
            children_failed: Vec::new(),
            idle_since: None,
        };
        if let Some(why) = self.ctx.writes_held() {
            rep.converged = false;
            rep.pending
                .push(("(all controllers)".into(), format!("writes held: {why}")));
            rep.held = Some(why);
        }
        for r in &self.running {
            if let Some(msg) = r.failed.lock().ok().and_then(|f| f.clone()) {
                rep.failed.push((r.name.clone(), String::new(), msg));
                continue;
            }
            let Some(c) = r.handle.lock().ok().and_then(|c| c.clone()) else {
                rep.converged = false;
                let why = r.waiting.lock().ok().and_then(|w| w.clone());
                rep.pending.push((
                    r.name.clone(),
                    why.unwrap_or_else(|| "not started (waiting for its resources)".into()),
                ));
                continue;
            };
            let stats = c.queue_stats();
            if stats.ready > 0 || stats.in_flight > 0 {
                rep.converged = false;
                rep.pending.push((
                    r.name.clone(),
                    format!("{} queued, {} syncing", stats.ready, stats.in_flight),
                ));
            }
            for (key, state) in r.tracker.snapshot() {
                match state {
                    KeyState::Ok => {}
                    KeyState::Failed(e) => {
                        rep.failed.push((r.name.clone(), key, e.to_string()));
                        rep.errors.push(e);
                    }
                    KeyState::HotLoop(m) => {
                        rep.hot_loops.push((r.name.clone(), key.clone(), m.clone()));
                        rep.failed.push((r.name.clone(), key, m));
                    }
                    KeyState::Wrote => {
                        rep.converged = false;
                        rep.pending
                            .push((r.name.clone(), format!("{key}: converging")));
                    }
                    KeyState::RateLimited => {
                        rep.converged = false;
                        rep.pending.push((
                            r.name.clone(),
                            format!("{key}: hook asked to retry later (429)"),
                        ));
                    }
                    KeyState::RolloutPending => {
                        rep.converged = false;
                        rep.pending
                            .push((r.name.clone(), format!("{key}: rollout in progress")));
                    }
                    KeyState::ChildrenMoving(children) => {
                        if self.wait_for == WaitFor::Current {
                            rep.converged = false;
                            rep.pending.push((
                                r.name.clone(),
                                format!(
                                    "{key}: waiting for {} child(ren) to become Current: {}",
                                    children.len(),
                                    children.join("; ")
                                ),
                            ));
                        }
                    }
                    KeyState::ChildrenFailed(children) => {
                        rep.children_failed
                            .push((r.name.clone(), key, children.join("; ")));
                    }
                }
            }
        }
        rep
    }

    /// Wait until nothing is left to do (no queued or running syncs, no unconfirmed writes, no
    /// pending 429 retry or rollout, with [`WaitFor::Current`] no child still moving), or until
    /// `timeout`. Failed parents do not keep it waiting.
    pub async fn wait_converged(&self, timeout: Duration) -> OnceReport {
        let deadline = Instant::now() + timeout;
        let quiet = self.quiet;
        let mut idle_since: Option<Instant> = None;
        // Looked at a few times per quiet period (at most every 25 ms, at least every 2 ms).
        let period = (quiet / 6).clamp(Duration::from_millis(2), Duration::from_millis(25));
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let rep = self.look();
            let done = rep.converged && rep.pending.is_empty();
            if done {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= quiet {
                    return OnceReport {
                        idle_since: Some(since),
                        ..rep
                    };
                }
            } else {
                idle_since = None;
            }
            if Instant::now() >= deadline {
                return OnceReport {
                    converged: false,
                    ..rep
                };
            }
        }
    }

    /// Stop at once, as a killed process would: cancel, abort the controllers' tasks without
    /// waiting for anything, stop informers. A sync stopped at a perturbation's write point
    /// ([`crate::perturb`], class `restart`) never writes again.
    pub fn kill(self) {
        self.stop.cancel();
        for r in self.running {
            r.task.abort();
        }
        self.ctx.informers.shutdown();
    }

    /// Stop everything: cancel, let in-flight syncs finish, stop informers.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for r in self.running {
            let _ = r.task.await;
        }
        self.ctx.informers.shutdown();
    }
}
