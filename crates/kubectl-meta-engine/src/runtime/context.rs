//! What every controller of one engine shares: the client, discovery, informers, the hook
//! client, the executor, the event bus and the options; plus turning a definition's hook into
//! something callable.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tracing::Instrument;

use crate::error::WritesHeld;
use crate::events::{self, EngineEvent, EventBus, EventParent};
use crate::hooks::{CallInfo, HookCall, HookClient, HookTarget};
use crate::k8s::discovery::Discovery;
use crate::k8s::informer::InformerRegistry;
use crate::k8s::lease::{self, LeaseState};
use crate::k8s::pace::ApiPace;
use crate::plan::hookapi::Version;
use crate::runtime::execute::{ApplyStrategy, Executor};
use crate::runtime::recorder::Recorder;
use crate::spec::{Hook, HookVersion};

/// How often [`EngineContext::follow_api_pace`] reports.
const API_RATE_INTERVAL: Duration = Duration::from_secs(1);

/// Concurrent syncs per controller by default (`--workers`). Metacontroller's default is 5, for
/// a controller sharing a production cluster; the engine's client already yields to a busy
/// server (429s narrow its window), and at 5 a MapController's key syncs waited on request
/// latency: 5,000 inputs converged 2.2–2.5x slower than the real kube-apiserver's create floor,
/// 2.0x at 16 (`cargo bench --bench map -- --kubeconfig ...`), with no loss for composites.
pub const DEFAULT_WORKERS: usize = 16;

/// Engine-wide settings (from the command line).
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Concurrent syncs per controller.
    pub workers: usize,
    /// Replaces scheme, host and port of webhook URLs (and resolves service webhooks).
    pub hook_base_url: Option<String>,
    /// Only sync parents in this namespace.
    pub namespace: Option<String>,
    /// Client-side three-way merge or server-side apply.
    pub apply_strategy: ApplyStrategy,
    /// How long to wait for informers to sync at start.
    pub sync_timeout: Duration,
    /// `--dump-requests DIR`: write every hook request and answer there
    /// ([`crate::hooks::dump`]).
    pub dump_requests: Option<std::path::PathBuf>,
    /// Webhooks given as a `service` are called at the Service's cluster DNS name
    /// (`protocol://name.namespace:port/path`, as Metacontroller does): `run`, in a cluster.
    /// Without it (`dev`, on a laptop) they need `hook_base_url`.
    pub service_dns: bool,
    /// `--record DIR`: write every answered exchange there as a test case
    /// ([`crate::hooks::record`]).
    pub record: Option<Recording>,
    /// Sync a parent once more after a sync that wrote only its status, as Metacontroller does
    /// on the status write's echo ("it's sometimes necessary for a hook to see its own status
    /// updates so they know that the status was committed to storage"). On by default (hooks
    /// run unchanged); `--status-echo skip` turns it off for one hook call fewer per parent
    /// (see [`crate::runtime::memory`]).
    pub confirm_status_writes: bool,
    /// Where exec hooks run (and their relative commands and `workingDir`s resolve) instead of
    /// their definition file's directory: `run --hook-dir`, for an image that carries the hooks
    /// while the definitions come from a mounted ConfigMap (as `deploy` renders them).
    pub exec_dir: Option<std::path::PathBuf>,
    /// Faults injected from a schedule (`kubectl meta test --perturb`); `None` (the default):
    /// every injection point is one `Option` check.
    pub perturb: Option<Arc<crate::perturb::Perturbation>>,
    /// Answers served instead of calling the hooks (`kubectl meta replay`: the recorded
    /// answers, [`crate::flight::replay`]); `None` (the default): hooks are called.
    pub answers: Option<Arc<dyn HookAnswers>>,
}

/// Where hook answers come from when they are not asked of the hooks: a replay serves the
/// answers a recording holds ([`crate::flight::replay::RecordedAnswers`]).
pub trait HookAnswers: Send + Sync + std::fmt::Debug {
    /// The answer to the call `info` (with the request `body`): `Some(Ok(answer))`,
    /// `Some(Err(message))` for a call that failed, `None` to call the hook itself.
    fn answer(
        &self,
        info: &CallInfo,
        body: &serde_json::Value,
    ) -> Option<Result<serde_json::Value, String>>;

    /// Resolves when the call `info` may go ahead (before [`answer`](HookAnswers::answer) is
    /// asked, and before the hook is called when it answers `None`): a stepped replay holds
    /// each sync here until the user steps ([`crate::replayer`]). By default at once.
    fn turn<'a>(&'a self, _info: &'a CallInfo) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// Where and how `--record` writes test cases.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The directory.
    pub dir: std::path::PathBuf,
    /// Whether Secret values are kept (`--record-secrets`) or replaced by placeholders.
    pub secrets: crate::hooks::record::SecretsMode,
    /// What recorded them, for the files' header (`kubectl meta dev --record`).
    pub origin: &'static str,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            workers: DEFAULT_WORKERS,
            hook_base_url: None,
            namespace: None,
            apply_strategy: ApplyStrategy::ClientSide,
            sync_timeout: Duration::from_secs(60),
            dump_requests: None,
            record: None,
            service_dns: false,
            confirm_status_writes: true,
            exec_dir: None,
            perturb: None,
            answers: None,
        }
    }
}

/// Shared engine services.
pub struct EngineContext {
    /// The API client.
    pub client: kube::Client,
    /// Resource discovery.
    pub discovery: Discovery,
    /// Shared informers.
    pub informers: InformerRegistry,
    /// Hook caller.
    pub hooks: HookClient,
    /// Plan executor.
    pub executor: Executor,
    /// Event stream.
    pub bus: EventBus,
    /// Kubernetes Events on parents.
    pub recorder: Recorder,
    /// Options.
    pub options: EngineOptions,
    /// While set, syncs call hooks and plan, but write nothing (the plan is published instead).
    paused: AtomicBool,
    /// Webhook calls wait on this first (a managed hook server that may be restarting).
    gate: RwLock<Option<Arc<dyn HookGate>>>,
    /// Why writes are held (`None`: allowed): the API server is unreachable or the controller
    /// Lease is not confirmed. Workers take no work while it is set.
    held: watch::Sender<Option<WritesHeld>>,
    /// Which parents this process may sync (`run --sharded`); `None`: every parent.
    shard: RwLock<Option<Arc<crate::shard::ShardGate>>>,
}

/// Something webhook calls must wait for before they are sent: a managed hook server that is
/// starting or restarting. Calls that arrive meanwhile wait for readiness instead of failing.
pub trait HookGate: Send + Sync {
    /// Whether calls to `url` go to the gated server.
    fn covers(&self, url: &str) -> bool;
    /// Resolve once the server is ready; `Err` (with what the server said) when it failed or
    /// did not become ready within `timeout`.
    fn wait_ready(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>>;
    /// Whether calls to `target` wait on this gate: by default the webhooks whose URL it
    /// [`covers`](HookGate::covers), never exec hooks. A gate for a project's hook builds
    /// covers every hook, exec hooks included.
    fn covers_target(&self, target: &HookTarget) -> bool {
        match target {
            HookTarget::Webhook { url, .. } => self.covers(url),
            HookTarget::Exec { .. } => false,
        }
    }
    /// As [`wait_ready`](HookGate::wait_ready), knowing which hook is about to be called.
    fn wait_ready_for<'a>(
        &'a self,
        _target: &'a HookTarget,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.wait_ready(timeout)
    }
}

impl EngineContext {
    /// Build the shared services for `client` with the webhooks' resolved endpoints
    /// (`caBundle`, `clientTLS`, authorization: [`crate::hooks::endpoint::resolve_from_cluster`])
    /// set: what `dev`, `run`, `test` and `dryrun` each start from.
    pub fn with_endpoints(
        client: kube::Client,
        bus: EventBus,
        options: EngineOptions,
        endpoints: &[crate::hooks::endpoint::ResolvedController],
    ) -> Result<Self, crate::hooks::HookError> {
        let ctx = EngineContext::new(client, bus, options)?;
        for resolved in endpoints {
            ctx.hooks.set_endpoints(resolved);
        }
        Ok(ctx)
    }

    /// Build the shared services for `client`.
    pub fn new(
        client: kube::Client,
        bus: EventBus,
        options: EngineOptions,
    ) -> Result<Self, crate::hooks::HookError> {
        Ok(EngineContext {
            discovery: Discovery::new(client.clone()),
            informers: InformerRegistry::new(client.clone()).perturbed(options.perturb.clone()),
            hooks: HookClient::new()?,
            executor: Executor::new(client.clone(), options.apply_strategy, bus.clone())
                .perturbed(options.perturb.clone()),
            recorder: Recorder::new(client.clone()),
            client,
            bus,
            options,
            paused: AtomicBool::new(false),
            gate: RwLock::new(None),
            held: watch::channel(None).0,
            shard: RwLock::new(None),
        })
    }
}

impl EngineContext {
    /// Shard the controllers this gate knows ([`crate::shard`]): their workers sync only the
    /// parents it admits. Set before the controllers start.
    pub fn set_shard(&self, gate: Option<Arc<crate::shard::ShardGate>>) {
        *self.shard.write().unwrap_or_else(PoisonError::into_inner) = gate;
    }

    /// The shard gate, if any.
    pub fn shard(&self) -> Option<Arc<crate::shard::ShardGate>> {
        self.shard
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Pause or resume writes. While paused, syncs still call hooks and publish their plans as
    /// [`EngineEvent::PlanHeld`], but nothing is written; resuming does not resync by itself.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// Whether writes are paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Hold every write (and stop taking work) for `reason`, or allow them again with `None`.
    pub fn hold_writes(&self, reason: Option<WritesHeld>) {
        self.held.send_replace(reason);
    }

    /// Why writes are held, if they are.
    pub fn writes_held(&self) -> Option<WritesHeld> {
        self.held.borrow().clone()
    }

    /// Follows whether writes are held (`None`: allowed).
    pub fn writes_watch(&self) -> watch::Receiver<Option<WritesHeld>> {
        self.held.subscribe()
    }

    /// Hold writes whenever `lease` is not confirmed as ours, saying so once per outage
    /// ("API server unreachable since 10:42:05, retrying") and once when it is back. When the
    /// lease is lost to another holder, writes stay held (the caller stops).
    pub fn follow_lease(
        self: &Arc<Self>,
        mut lease: watch::Receiver<LeaseState>,
    ) -> tokio::task::JoinHandle<()> {
        let ctx = Arc::clone(self);
        tokio::spawn(async move {
            let mut down_since: Option<Timestamp> = None;
            loop {
                let state = lease.borrow_and_update().clone();
                match state {
                    LeaseState::Held => {
                        if let Some(since) = down_since.take() {
                            let secs = Timestamp::now().duration_since(since).as_secs().max(0);
                            ctx.hold_writes(None);
                            ctx.bus.publish(EngineEvent::Info {
                                controller: None,
                                message: format!(
                                    "API server reachable again after {secs}s and the controller lease confirmed; resyncing"
                                ),
                            });
                        }
                    }
                    LeaseState::Unconfirmed { since, error } => {
                        if down_since.is_none() {
                            down_since = Some(since);
                            let msg = format!(
                                "API server unreachable since {}, retrying; nothing is written until the controller lease is confirmed ({error})",
                                lease::clock(since)
                            );
                            ctx.hold_writes(Some(WritesHeld::ApiUnreachable {
                                since,
                                error: error.clone(),
                            }));
                            ctx.bus.publish(EngineEvent::Error {
                                controller: None,
                                object: None,
                                message: msg,
                            });
                        }
                    }
                    lost @ LeaseState::Lost { .. } => {
                        let holder = lost.describe_holder().unwrap_or_default();
                        ctx.hold_writes(Some(WritesHeld::LeaseLost { holder }));
                        return;
                    }
                }
                if lease.changed().await.is_err() {
                    return;
                }
            }
        })
    }

    /// Publish the pace of API requests ([`EngineEvent::ApiRate`]) once a second while requests
    /// are answered or the API server throttles (nothing while idle). Ends when the engine
    /// context is dropped.
    pub fn follow_api_pace(self: &Arc<Self>, pace: ApiPace) -> tokio::task::JoinHandle<()> {
        let ctx = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(API_RATE_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = pace.snapshot();
            let mut at = tokio::time::Instant::now();
            loop {
                tick.tick().await;
                let Some(ctx) = ctx.upgrade() else { return };
                let now = pace.snapshot();
                let quiet = now.answered == last.answered
                    && now.throttled == last.throttled
                    && now.window == last.window
                    && now.retry_after.is_none();
                if !quiet {
                    let secs = at.elapsed().as_secs_f64().max(1e-3);
                    let rate = (now.answered - last.answered) as f64 / secs;
                    ctx.bus.publish(EngineEvent::ApiRate {
                        requests_per_second: (rate * 10.0).round() / 10.0,
                        requests: now.answered,
                        throttled: now.throttled,
                        window: now.window,
                        retry_after_seconds: now
                            .retry_after
                            .map(|d| (d.as_secs_f64() * 10.0).ceil() / 10.0),
                        qps_limit: now.qps_cap,
                    });
                }
                last = now;
                at = tokio::time::Instant::now();
            }
        })
    }

    /// Make webhook calls wait on `gate` (or on nothing, with `None`).
    pub fn set_gate(&self, gate: Option<Arc<dyn HookGate>>) {
        if let Ok(mut g) = self.gate.write() {
            *g = gate;
        }
    }

    /// The gate hook calls wait on, if any.
    pub fn gate(&self) -> Option<Arc<dyn HookGate>> {
        self.gate.read().ok().and_then(|g| g.clone())
    }

    fn gate_for(&self, target: &HookTarget) -> Option<Arc<dyn HookGate>> {
        self.gate
            .read()
            .ok()
            .and_then(|g| g.clone())
            .filter(|g| g.covers_target(target))
    }
}

/// How long a call waits for a restarting hook server, at least (the hook's own timeout when
/// that is longer): a server is given this long to come back before the sync fails.
pub const GATE_WAIT: Duration = Duration::from_secs(30);

/// A hook ready to call: where, and which wire-format version.
#[derive(Debug, Clone)]
pub struct HookSpec {
    /// Where the hook is.
    pub target: HookTarget,
    /// v1 or v2.
    pub version: Version,
}

/// A hook definition that cannot be turned into a callable target.
#[derive(Debug, thiserror::Error)]
#[error("hooks.{hook}: {message}")]
pub struct HookConfigError {
    /// Which hook.
    pub hook: String,
    /// What is wrong.
    pub message: String,
}

impl HookSpec {
    /// Resolve a definition's hook (`base_dir` is where exec hooks run by default; with
    /// `service_dns`, a `service` webhook without `base_url` is called at its cluster DNS name).
    pub fn from_spec(
        name: &str,
        hook: &Hook,
        base_url: Option<&str>,
        base_dir: Option<&Path>,
        service_dns: bool,
    ) -> Result<Self, HookConfigError> {
        let err = |message: String| HookConfigError {
            hook: name.to_string(),
            message,
        };
        let timeout = hook.timeout();
        let version = match hook.version() {
            HookVersion::V1 => Version::V1,
            HookVersion::V2 => Version::V2,
        };
        let target = if let Some(w) = &hook.webhook {
            let service = w
                .service
                .as_ref()
                .map(|s| crate::hooks::resolve::ServiceAddr {
                    name: s.name.clone(),
                    namespace: s.namespace.clone(),
                    port: s.port,
                    protocol: s.protocol.clone(),
                });
            let url = match (&w.url, &service, base_url) {
                (None, Some(svc), None) if service_dns => {
                    crate::hooks::resolve::service_dns_url(svc, w.path.as_deref())
                }
                _ => crate::hooks::resolve::webhook_url(
                    w.url.as_deref(),
                    service.as_ref(),
                    w.path.as_deref(),
                    base_url,
                )
                .map_err(|e| err(e.to_string()))?,
            };
            HookTarget::Webhook { url, timeout }
        } else if let Some(x) = &hook.exec {
            let working_dir = match (&x.working_dir, base_dir) {
                (Some(d), Some(base)) => Some(base.join(d)),
                (Some(d), None) => Some(d.into()),
                (None, base) => base.map(Path::to_path_buf),
            };
            HookTarget::Exec {
                command: x.command.clone(),
                timeout,
                working_dir,
                env: x
                    .env
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            }
        } else {
            return Err(err("needs webhook or exec".into()));
        };
        Ok(HookSpec { target, version })
    }
}

/// Call a hook and publish the call as an event.
pub async fn call_hook(
    ctx: &EngineContext,
    hook: &HookSpec,
    info: CallInfo,
    body: &serde_json::Value,
) -> HookCall {
    // A perturbation may reorder the observed maps, restart the hook server or lose the answer.
    let mut perturbed = None;
    let mut lose_answer = false;
    if let Some(p) = &ctx.options.perturb {
        let mut b = body.clone();
        lose_answer = p.before_hook_call(&info.hook, &mut b);
        perturbed = Some(b);
    }
    let body = perturbed.as_ref().unwrap_or(body);
    if let Some(a) = &ctx.options.answers {
        a.turn(&info).await;
    }
    let span = hook_span(&info);
    let served = ctx
        .options
        .answers
        .as_ref()
        .and_then(|a| a.answer(&info, body));
    let mut call = async {
        if let Some(served) = served {
            return HookCall {
                result: served.map_err(|message| crate::hooks::HookError::Request {
                    target: format!("{} (recorded answer)", hook.target.describe()),
                    message,
                }),
                status: None,
                latency: Duration::ZERO,
                stderr: String::new(),
                raw_response: None,
            };
        }
        match ctx.gate_for(&hook.target) {
            Some(gate) => match gate
                .wait_ready_for(&hook.target, GATE_WAIT.max(hook.target.timeout()))
                .await
            {
                Ok(()) => ctx.hooks.call(&hook.target, &info, body).await,
                Err(why) => HookCall::not_ready(&hook.target, why),
            },
            None => ctx.hooks.call(&hook.target, &info, body).await,
        }
    }
    .instrument(span.clone())
    .await;
    if lose_answer {
        call.result = Err(crate::hooks::HookError::Timeout {
            target: hook.target.describe(),
            after: hook.target.timeout(),
            setting: "perturb hook-timeout",
        });
        call.status = None;
    }
    record_hook_call(&span, &call);
    ctx.bus.publish(EngineEvent::HookCalled {
        controller: info.controller.clone(),
        subject: EventParent {
            parent: info.parent.clone(),
            map_key: info.map_key.clone(),
        },
        hook: info.hook.clone(),
        status: call.status,
        latency: call.latency,
        error: call.result.as_ref().err().map(ToString::to_string),
        request: Some(Arc::new(events::published_body(body))),
        response: match &call.result {
            Ok(answer) => Some(events::published_body(answer)),
            Err(_) => call
                .raw_response
                .as_deref()
                .and_then(events::published_text)
                .map(serde_json::Value::String),
        }
        .map(Arc::new),
        stderr: events::published_text(&call.stderr),
    });
    if let Some(dir) = &ctx.options.dump_requests
        && let Err(e) = crate::hooks::dump::dump(dir, &info, body, &call)
    {
        ctx.bus.publish(EngineEvent::Error {
            controller: Some(info.controller.clone()),
            object: None,
            message: format!(
                "--dump-requests {}: cannot write the {} call of {}: {e}",
                dir.display(),
                info.hook,
                info.label()
            ),
        });
    }
    if let (Some(rec), Ok(answer)) = (&ctx.options.record, &call.result)
        && let Err(e) =
            crate::hooks::record::record(&rec.dir, &info, body, answer, rec.secrets, rec.origin)
    {
        ctx.bus.publish(EngineEvent::Error {
            controller: Some(info.controller.clone()),
            object: None,
            message: format!(
                "--record {}: cannot write the {} call of {}: {e}",
                rec.dir.display(),
                info.hook,
                info.label()
            ),
        });
    }
    call
}

/// The span of one hook call ([`crate::trace`]), a child of the sync's.
fn hook_span(info: &CallInfo) -> tracing::Span {
    let span = tracing::info_span!(
        target: crate::trace::TARGET,
        "hook",
        otel.name = tracing::field::Empty,
        otel.kind = "client",
        controller = info.controller.as_str(),
        hook = info.hook.as_str(),
        parent = info.parent.as_str(),
        map_key = tracing::field::Empty,
        status = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
        answer_bytes = tracing::field::Empty,
        error = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("hook {}", info.hook).as_str());
        if let Some(k) = &info.map_key {
            span.record("map_key", k.as_str());
        }
    }
    span
}

/// Fill the hook span with how the call went.
fn record_hook_call(span: &tracing::Span, call: &HookCall) {
    if span.is_disabled() {
        return;
    }
    if let Some(s) = call.status {
        span.record("status", u64::from(s));
    }
    span.record("latency_ms", call.latency.as_secs_f64() * 1000.0);
    match &call.result {
        Ok(answer) => {
            span.record("answer_bytes", events::json_size(answer) as u64);
        }
        Err(e) => {
            span.record("error", e.to_string().as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
}
