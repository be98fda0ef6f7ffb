//! `kubectl meta dev`: run controller definitions locally against a cluster or a sandbox.
//!
//! Order of work, so that bad input never leads to a write: load and validate every definition
//! -> connect (context pinned) -> safety checks (write guard, in-cluster Metacontroller, lease)
//! -> `--apply` manifests -> start the engine and show it (the TUI on a terminal, else the event
//! log) -> on Ctrl-C/SIGTERM (or `q` in the TUI) stop
//! cleanly (or, with `--once`, when everything converged).
//!
//! The flags become a [`config::DevConfig`] first (checked, derived values computed once); the
//! steps live in [`cluster`] (write guard, in-cluster controllers, Leases, `--apply`), [`sandbox`]
//! (`--sandbox`), [`once`] (`--once` convergence and exit codes) and [`remote`] (`--resync`,
//! `--pause`, `--resume` sent to running dev loops). Definition loading is shared with the other
//! commands in [`crate::commands::definitions`].

mod cluster;
mod config;
mod once;
mod remote;
mod sandbox;

use cluster::{
    apply_manifests, check_write_guard, refuse_in_cluster_controllers, release_leases, take_leases,
};
use config::DevConfig;
use once::{lost_reason, wait_once};
use remote::{control_command, send_control};
use sandbox::start_sandbox;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::exit::{Class, Classify, fail};
use super::interrupts::{Interrupts, Received};

use super::definitions::{self, check_reachable, resolve_endpoints};
use super::engine_start::{self, EventLog, LogStyle};
use crate::cli::GlobalArgs;
use crate::cli::dev::{DevArgs, WaitForArg};
use crate::devloop::control::{self, ControlServer};
use crate::devloop::{DevLoop, DevLoopConfig};
use crate::engine::events::EngineEvent;
use crate::engine::events::EventBus;
use crate::engine::{Engine, WaitFor};
use crate::engine::{EngineContext, EngineOptions, Recording};
use crate::hooks::endpoint;
use crate::hooks::record::SecretsMode;
use crate::k8s::client::{self, Connection};
use crate::k8s::discovery::Discovery;
use crate::k8s::lease;
use crate::spec::{self};
use crate::view::tui::Tui;

/// What `dev` suggests when it is given nothing to run.
const DEV_EXAMPLE: &str = "kubectl meta dev --sandbox --apply -f examples/hello-world/";

/// Lease duration of a dev session.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// `--once` gives up after this many seconds unless `--timeout` says otherwise.
pub const DEFAULT_ONCE_TIMEOUT: u64 = 300;

/// How often `--once` says again what it is still waiting for, when that did not change.
const ONCE_REPORT_EVERY: Duration = Duration::from_secs(10);

/// With `--once`: how long stopping may take after the deadline (in-flight hook calls and
/// writes are abandoned after it; the Lease then expires on its own).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// With `--once`: the documented bound past `--timeout` within which `dev` exits, whatever it
/// waits on (a hung API server during start-up included).
pub const ONCE_MARGIN: Duration = Duration::from_secs(5);

/// How a run ends from outside: its `--once` deadline, the signals, and what it is doing (to
/// say where it was when one of them came).
struct Ending {
    /// With `--once`: when the run gives up.
    deadline: Option<tokio::time::Instant>,
    /// Ctrl-C and SIGTERM since the start.
    interrupts: Interrupts,
    /// The current step.
    phase: Phase,
}

/// What a `--once` run is doing, to say where it was when the deadline passed.
#[derive(Clone)]
struct Phase(Arc<std::sync::Mutex<&'static str>>);

impl Default for Phase {
    fn default() -> Self {
        Phase(Arc::new(std::sync::Mutex::new("starting")))
    }
}

impl Phase {
    fn set(&self, what: &'static str) {
        if let Ok(mut p) = self.0.lock() {
            *p = what;
        }
    }

    fn get(&self) -> &'static str {
        self.0.lock().map(|p| *p).unwrap_or("starting")
    }
}

/// Run `kubectl meta dev`.
pub async fn run(global: GlobalArgs, mut args: DevArgs) -> Result<()> {
    if let Some(command) = control_command(&args) {
        return send_control(command).await;
    }
    // A project file fills the flags not given (flags win).
    super::project::for_dev(&mut args)?;
    // Caught from here on: a Ctrl-C at any point is seen (and said), never lost.
    let interrupts = Interrupts::install()
        .context("installing the Ctrl-C and SIGTERM handlers")
        .class(Class::Internal)?;
    // 0. Every flag is checked before anything starts (sandbox, connection, informers).
    let cfg = DevConfig::new(args).class(Class::Usage)?;
    let deadline = cfg.once_timeout.map(|t| tokio::time::Instant::now() + t);
    // 1. Definitions first: a malformed file is rejected before anything is written.
    let loaded = definitions::load_files(&cfg.args.defs, cfg.selector.as_ref())?;
    if !loaded.others.is_empty() && !cfg.args.apply {
        eprintln!(
            "note: {} non-controller document(s) in the given files are ignored; pass --apply to apply them",
            loaded.others.len()
        );
    }
    // The project's hooks are built before anything starts: a failed build starts nothing.
    super::project::build_hooks(cfg.args.project.as_ref()).await?;

    // 2. Connect (optionally to an in-process sandbox).
    let mut sandbox = None;
    let cluster = &cfg.args.cluster;
    let conn = if cfg.args.sandbox {
        let (sb, kubeconfig) = start_sandbox(&cfg).await.class(Class::Cluster)?;
        eprintln!(
            "sandbox listening on {}; kubeconfig: {}  (export KUBECONFIG={})",
            sb.url(),
            kubeconfig.path.display(),
            kubeconfig.path.display()
        );
        let conn = client::connect_limited(
            Some(&kubeconfig.path),
            Some("sandbox"),
            cluster.namespace.as_deref(),
            cfg.limits,
        )
        .await
        .class(Class::Internal);
        sandbox = Some((sb, kubeconfig));
        conn
    } else {
        engine_start::connect_kubeconfig(cluster, cfg.limits)
            .await
            .class(Class::Usage)
    };
    let ending = Ending {
        deadline,
        interrupts,
        phase: Phase::default(),
    };
    let phase = &ending.phase;
    let result = match conn {
        Ok(conn) => {
            let work = run_connected(&cfg, global.verbose, loaded, &conn, &ending);
            match deadline {
                None => work.await,
                Some(d) => match tokio::time::timeout_at(d + ONCE_MARGIN, work).await {
                    Ok(r) => r,
                    Err(_) => Err(fail(
                        Class::NotConverged,
                        format!(
                            "not converged after {}s (--timeout): gave up while {} (is the API server at {} answering?)",
                            cfg.args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT),
                            phase.get(),
                            conn.context.server
                        ),
                    )),
                },
            }
        }
        Err(e) => Err(e),
    };
    if let Some((sb, kubeconfig)) = sandbox {
        sb.shutdown().await;
        kubeconfig.remove();
    }
    result
}

/// The part of `dev` that runs once connected: cluster checks (steps 3 and 4), the webhooks'
/// Secrets, the Leases (5), `--apply` (6), the engine and its display (7), then waiting and
/// stopping.
async fn run_connected(
    cfg: &DevConfig,
    verbose: u8,
    loaded: spec::Loaded,
    conn: &Connection,
    ending: &Ending,
) -> Result<()> {
    let (phase, interrupts) = (&ending.phase, &ending.interrupts);
    // Steps 3-5 write nothing but the Leases at their end: an interrupt abandons them.
    let mut prepared = tokio::select! {
        p = prepare(cfg, loaded, conn, phase) => p?,
        r = interrupts.first() => return Err(interrupted_while(r, phase)),
    };
    // Steps 6-7 hold the Leases: an interrupt or a failure releases them.
    let launched = tokio::select! {
        l = launch(cfg, verbose, conn, &mut prepared, phase) => l,
        r = interrupts.first() => Err(interrupted_while(r, phase)),
    };
    let leases = prepared.leases;
    let Launched {
        mut dev,
        mut log,
        bus,
    } = match launched {
        Ok(l) => l,
        Err(e) => {
            release_leases(leases).await;
            return Err(e);
        }
    };

    // Commands: keyboard (on a terminal), signals, the control socket.
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let tui = log
        .tui_events
        .take()
        .map(|events| spawn_tui(cfg, conn, &dev, events, tx.clone(), log.color));
    let control_server = if cfg.args.once {
        None
    } else {
        spawn_command_sources(&bus, tui.is_some(), tx.clone())?
    };
    drop(tx);

    let outcome = wait_until_done(cfg, &mut dev, rx, &bus, ending, tui.as_ref(), &leases).await?;
    // Restore the terminal before anything else is printed.
    let ui_outcome = match tui {
        Some(t) => t
            .finish()
            .await
            .map_err(|e| anyhow!("the terminal UI failed: {e}")),
        None => Ok(()),
    };
    interrupts
        .exit_on_next("the hook server and Leases may be left behind; a Lease expires on its own");
    let quiet = cfg.args.once && outcome.is_ok();
    phase.set("stopping");
    stop(cfg, quiet, control_server, dev, log.log, leases).await;
    outcome.and(ui_outcome)
}

/// What steps 3-5 found and took.
struct Prepared {
    loaded: spec::Loaded,
    discovery: Discovery,
    endpoints: Vec<endpoint::ResolvedController>,
    leases: Vec<lease::LeaseGuard>,
    /// Controllers taken over from `kubectl meta run` (`--takeover`), as events to publish.
    handovers: Vec<EngineEvent>,
}

/// Steps 3-5: the write guard, the cluster's definitions and in-cluster controllers, the
/// webhooks' references, then one Lease per controller.
async fn prepare(
    cfg: &DevConfig,
    mut loaded: spec::Loaded,
    conn: &Connection,
    phase: &Phase,
) -> Result<Prepared> {
    phase.set("checking the cluster (discovery, in-cluster controllers)");
    eprintln!("{} (pinned for this session)", conn.context.describe());
    // 3. Write guard.
    check_write_guard(cfg, conn)?;
    check_reachable(conn).await?;
    let discovery = Discovery::new(conn.client.clone());

    // Definitions from the cluster (-l applies to them too).
    let from_cluster = definitions::add_from_cluster(
        &cfg.args.defs,
        conn,
        &discovery,
        cfg.selector.as_ref(),
        &mut loaded,
    )
    .await?;

    // 4. In-cluster Metacontroller running the same controller?
    refuse_in_cluster_controllers(cfg, conn, &discovery, &loaded, &from_cluster).await?;

    // The webhooks' Secrets and ConfigMaps (caBundle, clientTLS, authorization, basicAuth):
    // a problem is reported before anything is written; a controller whose objects do not exist
    // yet starts when they appear (the engine waits for them).
    phase.set("reading the webhooks' Secrets and ConfigMaps");
    let endpoints =
        resolve_endpoints(&loaded, conn, cfg.args.apply, cfg.args.overwrite, true).await?;

    // 5. One dev loop per controller: a Lease each.
    phase.set("taking the controller lease");
    let (leases, handovers) = take_leases(cfg, conn, &loaded).await?;
    Ok(Prepared {
        loaded,
        discovery,
        endpoints,
        leases,
        handovers,
    })
}

/// The event log, and what the TUI (if any) will read.
struct LogOutput {
    log: EventLog,
    tui_events: Option<crate::engine::events::EventReceiver>,
    color: bool,
}

/// What steps 6-7 started.
struct Launched {
    dev: DevLoop,
    log: LogOutput,
    bus: EventBus,
}

/// Steps 6-7: `--apply` manifests, then the event log and the engine (hook server included).
async fn launch(
    cfg: &DevConfig,
    verbose: u8,
    conn: &Connection,
    prepared: &mut Prepared,
    phase: &Phase,
) -> Result<Launched> {
    // 6. --apply manifests: what is missing, or everything with --overwrite.
    phase.set("applying manifests (--apply)");
    if cfg.args.apply && !prepared.loaded.others.is_empty() {
        apply_manifests(cfg, conn, &prepared.discovery, &prepared.loaded).await?;
    }

    // 7. Engine and event log.
    phase.set("starting the controllers");
    let bus = EventBus::new();
    let color = cfg.color;
    // The TUI subscribes now, before the engine starts, to see the controllers start.
    let tui_events = cfg.tui.then(|| bus.subscribe());
    let log = spawn_event_log(cfg, verbose, color, &bus, tui_events.is_some());
    // The handovers from `kubectl meta run` (--takeover), in the event log and the TUI.
    for event in std::mem::take(&mut prepared.handovers) {
        bus.publish(event);
    }
    let ctx = engine_context(cfg, conn, bus, &prepared.endpoints, &prepared.leases)?;
    let loop_cfg = dev_loop_config(cfg);
    let controllers = std::mem::take(&mut prepared.loaded.controllers);
    let mut engine = Engine::new(ctx);
    engine.set_wait_for(match cfg.args.wait_for {
        WaitForArg::Current => WaitFor::Current,
        WaitForArg::None => WaitFor::None,
    });
    let dev = DevLoop::start(engine, controllers, loop_cfg)
        .await
        .class(Class::Usage)?;
    let bus = dev.engine().context().bus.clone();
    Ok(Launched {
        dev,
        log: LogOutput {
            log,
            tui_events,
            color,
        },
        bus,
    })
}

/// The error for a signal that came before the engine ran.
fn interrupted_while(r: Received, phase: &Phase) -> anyhow::Error {
    fail(
        Class::Interrupted,
        format!("{} while {}", r.verb(), phase.get()),
    )
}

/// Start the event log; it prints nothing when the TUI shows the events.
fn spawn_event_log(
    cfg: &DevConfig,
    verbose: u8,
    color: bool,
    bus: &EventBus,
    tui: bool,
) -> EventLog {
    let style = LogStyle {
        output: cfg.args.output,
        color,
        verbose: cfg.args.verbose_events || verbose > 0,
    };
    EventLog::spawn(style, bus, tui)
}

/// The engine's context: options from the flags, the resolved hook endpoints, and writes held
/// while a Lease is not confirmed (API server outage), resuming after.
fn engine_context(
    cfg: &DevConfig,
    conn: &Connection,
    bus: EventBus,
    endpoints: &[endpoint::ResolvedController],
    leases: &[lease::LeaseGuard],
) -> Result<Arc<EngineContext>> {
    let options = EngineOptions {
        hook_base_url: cfg.args.hook_base_url.clone(),
        dump_requests: cfg.args.dump_requests.clone(),
        record: cfg.args.record.clone().map(|dir| Recording {
            dir,
            secrets: SecretsMode::keeping(cfg.args.record_secrets),
            origin: "recorded by kubectl meta dev --record",
        }),
        ..engine_start::options(&cfg.args.engine, cfg.args.cluster.namespace.clone())
    };
    let ctx = engine_start::engine_context(conn, bus, options, endpoints)?;
    for l in leases {
        ctx.follow_lease(l.state());
    }
    ctx.follow_api_pace(conn.pace.clone());
    Ok(ctx)
}

/// The dev loop's configuration from the flags.
fn dev_loop_config(cfg: &DevConfig) -> DevLoopConfig {
    let (server_cfg, server_base_url) = match cfg.hook_server.clone() {
        Some((c, u)) => (Some(c), Some(u)),
        None => (None, None),
    };
    DevLoopConfig {
        files: cfg.args.defs.files.clone(),
        watch: cfg.args.watch.clone(),
        debounce: Duration::from_millis(cfg.args.debounce),
        server: server_cfg,
        server_base_url,
        watch_files: !cfg.args.once && !cfg.args.no_watch,
        recursive: cfg.args.defs.recursive,
        selector: cfg.selector.clone(),
        exclude: cfg
            .args
            .record
            .iter()
            .chain(&cfg.args.dump_requests)
            .cloned()
            .chain(
                cfg.args
                    .project
                    .as_ref()
                    .map(crate::project::Project::never_watched)
                    .unwrap_or_default(),
            )
            .collect(),
        builds: cfg
            .args
            .project
            .as_ref()
            .map(crate::project::Project::builds)
            .unwrap_or_default(),
    }
}

/// Start the TUI on the engine's events, with the parents' Kubernetes Events (a watch of its
/// own), whether writes are held (API server outage) and the work queues' depth.
fn spawn_tui(
    cfg: &DevConfig,
    conn: &Connection,
    dev: &DevLoop,
    events: crate::engine::events::EventReceiver,
    tx: tokio::sync::mpsc::Sender<control::Request>,
    color: bool,
) -> Tui {
    let context = format!("{} · ns {}", conn.context.name, conn.context.namespace);
    let (kube_events, _) = crate::view::tui::kube_events::watch(
        conn.client.clone(),
        cfg.args.cluster.namespace.as_deref(),
    );
    let feeds = crate::view::tui::event_loop::Feeds {
        held: Some(dev.engine().context().writes_watch()),
        kube_events: Some(kube_events),
        queue: Some(crate::engine::queue_depth),
        replay: None,
    };
    Tui::spawn(events, feeds, tx, context, color)
}

/// Without `--once`: the keyboard (on a terminal, when there is no TUI), the signals and the
/// control socket send commands to the loop; their answers go to the bus. Returns the control
/// socket's server, if it could start (if not, the bus says so).
fn spawn_command_sources(
    bus: &EventBus,
    tui: bool,
    tx: tokio::sync::mpsc::Sender<control::Request>,
) -> Result<Option<ControlServer>> {
    let (answers_tx, mut answers_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut control_server = None;
    if !tui && std::io::stdin().is_terminal() {
        control::spawn_keyboard(tx.clone(), answers_tx.clone());
        bus.publish(EngineEvent::Info {
            controller: None,
            message: control::KEY_HELP.to_string(),
        });
    }
    control::spawn_signals(tx.clone(), answers_tx.clone())
        .context("installing the SIGUSR1/SIGUSR2 handlers")?;
    match crate::commands::sandbox::data_dir()
        .map_err(|e| e.to_string())
        .and_then(|d| {
            ControlServer::start(&control::socket_dir(&d), tx.clone()).map_err(|e| e.to_string())
        }) {
        Ok(s) => control_server = Some(s),
        Err(e) => bus.publish(EngineEvent::Error {
            controller: None,
            object: None,
            message: format!(
                "no control socket ({e}); `kubectl meta dev --resync/--pause` will not reach this loop, signals and keys still work"
            ),
        }),
    }
    let bus2 = bus.clone();
    tokio::spawn(async move {
        while let Some(a) = answers_rx.recv().await {
            bus2.publish(EngineEvent::Info {
                controller: None,
                message: a,
            });
        }
    });
    Ok(control_server)
}

/// Run until done: with `--once` until everything converged (or the deadline), else until
/// Ctrl-C, SIGTERM or `q` in the TUI; a lost Lease ends either. The outer error is a failure
/// to install the SIGTERM handler; the inner result is the run's outcome.
async fn wait_until_done(
    cfg: &DevConfig,
    dev: &mut DevLoop,
    rx: tokio::sync::mpsc::Receiver<control::Request>,
    bus: &EventBus,
    ending: &Ending,
    tui: Option<&Tui>,
    leases: &[lease::LeaseGuard],
) -> Result<Result<()>> {
    let (deadline, interrupts) = (ending.deadline, &ending.interrupts);
    let mut lost: Vec<_> = leases.iter().map(|l| l.lost()).collect();
    let lease_lost = async move {
        let waits = lost.iter_mut().map(|rx| {
            Box::pin(async move {
                let _ = rx.wait_for(|l| *l).await;
            })
        });
        futures::future::select_all(waits).await;
    };
    if cfg.args.once {
        let timeout = Duration::from_secs(cfg.args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT));
        return Ok(tokio::select! {
            r = wait_once(
                dev.engine(),
                bus,
                deadline.unwrap_or_else(|| tokio::time::Instant::now() + timeout),
                timeout,
            ) => r,
            r = interrupts.first() => Err(fail(Class::Interrupted, r.verb())),
            () = lease_lost => Err(fail(
                Class::Refused,
                format!("lost the controller lease: {}; stopping", lost_reason(leases)),
            )),
        });
    }
    let (lost_tx, mut lost_rx) = tokio::sync::oneshot::channel::<()>();
    let quit = tui.map(Tui::quit);
    let stop = async move {
        let quit = async move {
            match quit {
                Some(q) => q.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = quit => {}
            _ = interrupts.first() => {}
            () = lease_lost => { let _ = lost_tx.send(()); }
        }
    };
    dev.run_until(rx, stop).await;
    if lost_rx.try_recv().is_ok() {
        Ok(Err(fail(
            Class::Refused,
            format!(
                "lost the controller lease: {}; stopping",
                lost_reason(leases)
            ),
        )))
    } else {
        Ok(Ok(()))
    }
}

/// Stop: finish in-flight syncs, stop the hook server and the event log, release the Leases
/// (saying so unless `quiet`). With `--once` within [`STOP_GRACE`], after which in-flight
/// work is abandoned.
async fn stop(
    cfg: &DevConfig,
    quiet: bool,
    control_server: Option<ControlServer>,
    dev: DevLoop,
    log: EventLog,
    leases: Vec<lease::LeaseGuard>,
) {
    let say = |what: &str| {
        if !quiet {
            eprintln!("stopping: {what}");
        }
    };
    let stopping = async {
        say(
            "finishing in-flight syncs and stopping the hook server (Ctrl-C again to exit at once)",
        );
        drop(control_server);
        dev.shutdown().await;
        log.stop().await;
        if !leases.is_empty() {
            say(&format!("releasing {} Lease(s)", leases.len()));
        }
        for l in leases {
            l.release().await;
        }
        say("done");
    };
    if cfg.args.once {
        // The deadline holds: in-flight hook calls and writes are abandoned after the grace.
        if tokio::time::timeout(STOP_GRACE, stopping).await.is_err() {
            eprintln!(
                "note: stopping took longer than {}s; in-flight syncs were abandoned (the controller lease expires on its own)",
                STOP_GRACE.as_secs()
            );
        }
    } else {
        stopping.await;
    }
}
