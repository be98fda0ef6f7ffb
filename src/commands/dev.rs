//! `kubectl meta dev`: run controller definitions locally against a cluster or a sandbox.
//!
//! Order of work, so that bad input never leads to a write: load and validate every definition
//! -> connect (context pinned) -> safety checks (write guard, in-cluster Metacontroller, lease)
//! -> `--apply` manifests -> start the engine and show it (the TUI on a terminal, else the event
//! log) -> on Ctrl-C/SIGTERM (or `q` in the TUI) stop
//! cleanly (or, with `--once`, when everything converged).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use super::exit::{Class, Classify, fail, tag};
use super::interrupts::{Interrupts, Received};
use kube::api::{Api, DynamicObject};

use super::dev_output::{self, OutputFormat, Printer};
use crate::cli::GlobalArgs;
use crate::cli::dev::{ApplyStrategyArg, ColorArg, DevArgs, OutputArg};
use crate::devloop::control::{self, Command, ControlServer};
use crate::devloop::{DevLoop, DevLoopConfig};
use crate::engine::error::{Layer, SyncError, WritesHeld};
use crate::engine::events::EngineEvent;
use crate::engine::events::EventBus;
use crate::engine::runtime::context::{EngineContext, EngineOptions};
use crate::engine::runtime::execute::ApplyStrategy;
use crate::engine::runtime::{Engine, OnceReport};
use crate::hooks::endpoint;
use crate::hooks::server::{Readiness, ServerConfig, readiness_for};
use crate::k8s::client::{self, Connection};
use crate::k8s::discovery::Discovery;
use crate::k8s::{lease, manifests};
use crate::spec::{self, ControllerDef, ControllerSelector, Source};
use crate::tui::Tui;
use kube_sandbox::{Sandbox, SandboxConfig, Storage};

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
pub async fn run(global: GlobalArgs, args: DevArgs) -> Result<()> {
    if let Some(command) = control_command(&args) {
        return send_control(command).await;
    }
    // Caught from here on: a Ctrl-C at any point is seen (and said), never lost.
    let interrupts = Interrupts::install()
        .context("installing the Ctrl-C and SIGTERM handlers")
        .class(Class::Internal)?;
    // 0. Every flag is checked before anything starts (sandbox, connection, informers).
    validate(&args).class(Class::Usage)?;
    let server = hook_server_config(&args).class(Class::Usage)?;
    let limits = client::ClientLimits {
        qps: args.api_qps,
        burst: args.api_burst,
    };
    let deadline = args.once.then(|| {
        tokio::time::Instant::now()
            + Duration::from_secs(args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT))
    });
    // 1. Definitions first: a malformed file is rejected before anything is written.
    let loaded = if args.files.is_empty() {
        Ok(spec::Loaded::default())
    } else if args.from_cluster.is_empty() {
        spec::load_paths_with(&args.files, args.recursive)
    } else {
        spec::load_documents_with(&args.files, args.recursive)
    }
    .class(Class::Usage)?;
    // -l: only the definitions whose labels match (those read with --from-cluster are
    // filtered once read).
    let selector = parse_selector(&args).class(Class::Usage)?;
    let mut loaded = loaded;
    if let Some(sel) = &selector {
        loaded.controllers = select_controllers(
            sel,
            std::mem::take(&mut loaded.controllers),
            !args.from_cluster.is_empty(),
        )
        .class(Class::Usage)?;
    }
    if !loaded.others.is_empty() && !args.apply {
        eprintln!(
            "note: {} non-controller document(s) in the given files are ignored; pass --apply to apply them",
            loaded.others.len()
        );
    }

    // 2. Connect (optionally to an in-process sandbox).
    let mut sandbox = None;
    let cluster = &args.cluster;
    let conn = if args.sandbox {
        let (sb, kubeconfig) = start_sandbox(&args).await.class(Class::Cluster)?;
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
            limits,
        )
        .await
        .class(Class::Internal);
        sandbox = Some((sb, kubeconfig));
        conn
    } else {
        client::connect_limited(
            cluster.kubeconfig.as_deref(),
            cluster.context.as_deref(),
            cluster.namespace.as_deref(),
            limits,
        )
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
            let work = run_connected(&args, global.verbose, loaded, &conn, server, &ending);
            match deadline {
                None => work.await,
                Some(d) => match tokio::time::timeout_at(d + ONCE_MARGIN, work).await {
                    Ok(r) => r,
                    Err(_) => Err(fail(
                        Class::NotConverged,
                        format!(
                            "not converged after {}s (--timeout): gave up while {} (is the API server at {} answering?)",
                            args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT),
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

/// Check every flag and path that can be checked without a cluster, so that a mistake is
/// reported before anything starts.
fn validate(args: &DevArgs) -> Result<()> {
    if args.files.is_empty() && args.from_cluster.is_empty() {
        bail!(
            "nothing to run: pass controller definitions with -f FILE|DIR, or --from-cluster NAME (try: kubectl meta dev --sandbox --apply -f examples/hello-world/)"
        );
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if !args.api_qps.is_finite() || args.api_qps < 0.0 {
        bail!("--api-qps must be a number of requests per second, 0 or more (0: unlimited)");
    }
    if args.api_burst == 0 {
        bail!("--api-burst must be at least 1");
    }
    if args.sandbox {
        let given: Vec<&str> = args
            .cluster
            .given()
            .into_iter()
            .filter(|f| *f != "--namespace")
            .collect();
        if !given.is_empty() {
            bail!(
                "--sandbox starts its own API server and cannot be used with {}",
                given.join(" or ")
            );
        }
    }
    parse_selector(args)?;
    if let Some(url) = &args.hook_base_url {
        check_http_url("--hook-base-url", url)?;
    }
    if let Some(url) = &args.hook_server_ready {
        check_http_url("--hook-server-ready", url)?;
    }
    if args.timeout == Some(0) {
        bail!("--timeout must be at least 1 second");
    }
    for path in &args.watch {
        if !path.exists() {
            bail!("--watch {}: no such file or directory", path.display());
        }
    }
    if let Some(dir) = &args.dump_requests {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--dump-requests {}: cannot create it", dir.display()))?;
    }
    for path in &args.files {
        if !path.exists() {
            bail!("-f {}: no such file or directory", path.display());
        }
    }
    Ok(())
}

/// Read the Secrets and ConfigMaps the webhooks' connection settings reference and resolve
/// them (see [`endpoint`]). With `stand_in` (`dev --apply`, and `dryrun`, which applies nothing
/// but plans as if the files were applied), the documents of the loaded files stand in for
/// objects that do not exist yet (and replace existing ones with `overwrite`), so one
/// directory can hold a secured hook's whole setup. Each secured hook is named on stderr with
/// where its settings come from (never their values).
pub(crate) async fn resolve_endpoints(
    loaded: &spec::Loaded,
    conn: &Connection,
    stand_in: bool,
    overwrite: bool,
) -> Result<Vec<endpoint::ResolvedController>> {
    let keys = endpoint::references(&loaded.controllers);
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let docs: Vec<serde_json::Value> = if stand_in {
        loaded.others.iter().map(|d| d.value.clone()).collect()
    } else {
        Vec::new()
    };
    let data = endpoint::RefData::read(
        &conn.client,
        &keys,
        &docs,
        &conn.context.namespace,
        overwrite,
    )
    .await
    .class(Class::Cluster)?;
    let mut resolved = Vec::new();
    let mut problems = Vec::new();
    for def in &loaded.controllers {
        match endpoint::resolve(def, &data) {
            Ok(r) => resolved.push(r),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Err(fail(Class::Usage, problems.join("\n")));
    }
    for line in resolved
        .iter()
        .flat_map(endpoint::ResolvedController::describe)
    {
        eprintln!("{line}");
    }
    Ok(resolved)
}

/// `-l/--selector`, parsed (checked before anything starts).
fn parse_selector(args: &DevArgs) -> Result<Option<ControllerSelector>> {
    Ok(args
        .selector
        .as_deref()
        .map(ControllerSelector::parse)
        .transpose()?)
}

/// The definitions `sel` selects; the others are named on stderr. Selecting nothing is an
/// error unless `more_to_come` (definitions read later may match).
pub(crate) fn select_controllers(
    sel: &ControllerSelector,
    defs: Vec<ControllerDef>,
    more_to_come: bool,
) -> Result<Vec<ControllerDef>> {
    let picked = match sel.select(defs) {
        Ok(p) => p,
        Err(spec::ControllerSelectorError::NothingSelected { skipped, .. }) if more_to_come => {
            spec::Selection {
                selected: Vec::new(),
                skipped,
            }
        }
        Err(e) => return Err(e.into()),
    };
    if !picked.skipped.is_empty() {
        eprintln!(
            "note: -l {:?} leaves out {}",
            sel.as_str(),
            picked.skipped.join(", ")
        );
    }
    Ok(picked.selected)
}

/// `url` must be an absolute `http://` or `https://` URL with a host.
pub(crate) fn check_http_url(flag: &str, url: &str) -> Result<()> {
    let parsed = reqwest::Url::parse(url);
    let ok = parsed
        .as_ref()
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    if !ok {
        bail!(
            "{flag} {url}: not an http:// or https:// URL with a host (for example http://{}:8080)",
            if url.contains("localhost") {
                "localhost"
            } else {
                "127.0.0.1"
            }
        );
    }
    Ok(())
}

/// The kubeconfig file of a sandbox started by `dev`; one per process unless the user named
/// it, removed at exit when it was ours (two `dev --sandbox` never share one).
struct SandboxKubeconfig {
    path: PathBuf,
    ours: bool,
}

impl SandboxKubeconfig {
    fn remove(self) {
        if self.ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

async fn start_sandbox(args: &DevArgs) -> Result<(Sandbox, SandboxKubeconfig)> {
    let storage = match &args.state {
        Some(d) => Storage::Dir(d.clone()),
        None => Storage::Ephemeral,
    };
    let kubeconfig = match (&args.write_kubeconfig, &storage) {
        (Some(p), _) => SandboxKubeconfig {
            path: p.clone(),
            ours: false,
        },
        (None, Storage::Dir(d)) => SandboxKubeconfig {
            path: d.join("kubeconfig"),
            ours: false,
        },
        (None, Storage::Ephemeral) => SandboxKubeconfig {
            path: super::sandbox::data_dir()?
                .join(format!("dev-sandbox-{}.kubeconfig", std::process::id())),
            ours: true,
        },
    };
    let cfg = SandboxConfig {
        storage,
        kubeconfig: Some(kubeconfig.path.clone()),
        ..SandboxConfig::ephemeral()
    };
    let sb = Sandbox::start(cfg).await.context("starting the sandbox")?;
    Ok((sb, kubeconfig))
}

/// The part of `dev` that runs once connected: cluster checks (steps 3 and 4), the webhooks'
/// Secrets, the Leases (5), `--apply` (6), the engine and its display (7), then waiting and
/// stopping.
async fn run_connected(
    args: &DevArgs,
    verbose: u8,
    loaded: spec::Loaded,
    conn: &Connection,
    server: Option<(ServerConfig, String)>,
    ending: &Ending,
) -> Result<()> {
    let (phase, interrupts) = (&ending.phase, &ending.interrupts);
    // Steps 3-5 write nothing but the Leases at their end: an interrupt abandons them.
    let mut prepared = tokio::select! {
        p = prepare(args, loaded, conn, phase) => p?,
        r = interrupts.first() => return Err(interrupted_while(r, phase)),
    };
    // Steps 6-7 hold the Leases: an interrupt or a failure releases them.
    let launched = tokio::select! {
        l = launch(args, verbose, conn, &mut prepared, server, phase) => l,
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
        .map(|events| spawn_tui(args, conn, &dev, events, tx.clone(), log.color));
    let control_server = if args.once {
        None
    } else {
        spawn_command_sources(&bus, tui.is_some(), tx.clone())?
    };
    drop(tx);

    let outcome = wait_until_done(args, &mut dev, rx, &bus, ending, tui.as_ref(), &leases).await?;
    // Restore the terminal before anything else is printed.
    let ui_outcome = match tui {
        Some(t) => t
            .finish()
            .await
            .map_err(|e| anyhow!("the terminal UI failed: {e}")),
        None => Ok(()),
    };
    exit_on_second_interrupt(interrupts);
    let quiet = args.once && outcome.is_ok();
    phase.set("stopping");
    stop(args, quiet, control_server, dev, log.log, leases).await;
    outcome.and(ui_outcome)
}

/// What steps 3-5 found and took.
struct Prepared {
    loaded: spec::Loaded,
    discovery: Discovery,
    selector: Option<ControllerSelector>,
    endpoints: Vec<endpoint::ResolvedController>,
    leases: Vec<lease::LeaseGuard>,
}

/// Steps 3-5: the write guard, the cluster's definitions and in-cluster controllers, the
/// webhooks' references, then one Lease per controller.
async fn prepare(
    args: &DevArgs,
    mut loaded: spec::Loaded,
    conn: &Connection,
    phase: &Phase,
) -> Result<Prepared> {
    phase.set("checking the cluster (discovery, in-cluster controllers)");
    eprintln!("{} (pinned for this session)", conn.context.describe());
    // 3. Write guard.
    check_write_guard(args, conn)?;
    check_reachable(conn).await?;
    let discovery = Discovery::new(conn.client.clone());

    // Definitions from the cluster (-l applies to them too).
    let selector = parse_selector(args).class(Class::Usage)?;
    let from_cluster =
        add_cluster_definitions(args, conn, &discovery, selector.as_ref(), &mut loaded).await?;

    // 4. In-cluster Metacontroller running the same controller?
    refuse_in_cluster_controllers(args, conn, &discovery, &loaded, &from_cluster).await?;

    // The webhooks' Secrets and ConfigMaps (caBundle, clientTLS, authorization, basicAuth):
    // a missing one is reported before anything is written.
    phase.set("reading the webhooks' Secrets and ConfigMaps");
    let endpoints = resolve_endpoints(&loaded, conn, args.apply, args.overwrite).await?;

    // 5. One dev loop per controller: a Lease each.
    phase.set("taking the controller lease");
    let leases = take_leases(args, conn, &loaded).await?;
    Ok(Prepared {
        loaded,
        discovery,
        selector,
        endpoints,
        leases,
    })
}

/// The event log, and what the TUI (if any) will read.
struct LogOutput {
    log: EventLog,
    tui_events: Option<tokio::sync::broadcast::Receiver<EngineEvent>>,
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
    args: &DevArgs,
    verbose: u8,
    conn: &Connection,
    prepared: &mut Prepared,
    server: Option<(ServerConfig, String)>,
    phase: &Phase,
) -> Result<Launched> {
    // 6. --apply manifests: what is missing, or everything with --overwrite.
    phase.set("applying manifests (--apply)");
    if args.apply && !prepared.loaded.others.is_empty() {
        apply_manifests(args, conn, &prepared.discovery, &prepared.loaded).await?;
    }

    // 7. Engine and event log.
    phase.set("starting the controllers");
    let bus = EventBus::new();
    let color = color_wanted(args.color, std::io::stdout().is_terminal());
    // The TUI subscribes now, before the engine starts, to see the controllers start.
    let tui_events = use_tui(args).then(|| bus.subscribe());
    let log = spawn_event_log(args, verbose, color, &bus, tui_events.is_some());
    let ctx = engine_context(args, conn, bus, &prepared.endpoints, &prepared.leases)?;
    let cfg = dev_loop_config(args, server, prepared.selector.take());
    let controllers = std::mem::take(&mut prepared.loaded.controllers);
    let dev = DevLoop::start(Engine::new(ctx), controllers, cfg)
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

/// Release the Leases taken before a start that did not complete, within [`STOP_GRACE`] (they
/// expire on their own after that).
async fn release_leases(leases: Vec<lease::LeaseGuard>) {
    let release = async {
        for l in leases {
            l.release().await;
        }
    };
    let _ = tokio::time::timeout(STOP_GRACE, release).await;
}

/// Step 3: refuse to write to a context the write guard protects, unless the user confirms on
/// a terminal (never with `--once`).
fn check_write_guard(args: &DevArgs, conn: &Connection) -> Result<()> {
    let ctxinfo = &conn.context;
    if let Err(e) = client::write_guard(ctxinfo, &args.allow_context) {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !args.once {
            eprintln!("{e}");
            eprint!("Write to context {} anyway? [y/N] ", ctxinfo.name);
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer).ok();
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                return Err(fail(
                    Class::Refused,
                    format!("not writing to context {}", ctxinfo.name),
                ));
            }
        } else {
            return Err(e).class(Class::Refused);
        }
    }
    Ok(())
}

/// The API server answers at all (else nothing below can work, and the error would come from
/// whatever happens to ask first).
pub(crate) async fn check_reachable(conn: &Connection) -> Result<()> {
    conn.client.apiserver_version().await.map_err(|e| {
        fail(
            Class::Cluster,
            format!(
                "cannot reach the API server of context {}: {}",
                conn.context.name,
                crate::k8s::kube_error_message(&e)
            ),
        )
    })?;
    Ok(())
}

/// Read the `--from-cluster` definitions (filtered by `-l`) into `loaded`; returns their names.
/// Fails when there is no definition at all.
async fn add_cluster_definitions(
    args: &DevArgs,
    conn: &Connection,
    discovery: &Discovery,
    selector: Option<&ControllerSelector>,
    loaded: &mut spec::Loaded,
) -> Result<Vec<String>> {
    let mut from_cluster = Vec::new();
    let mut read = Vec::new();
    for name in &args.from_cluster {
        let def = read_from_cluster(&conn.client, discovery, name)
            .await
            .class(Class::Usage)?;
        from_cluster.push(def.name().to_string());
        read.push(def);
    }
    if let Some(sel) = selector
        && !read.is_empty()
    {
        read = select_controllers(sel, read, !loaded.controllers.is_empty()).class(Class::Usage)?;
    }
    loaded.controllers.extend(read);
    if loaded.controllers.is_empty() {
        return Err(fail(
            Class::Usage,
            "no controller definitions found in the given files",
        ));
    }
    Ok(from_cluster)
}

/// Step 4: refuse (unless `--force`) to run a controller whose definition exists on the
/// cluster, where an in-cluster Metacontroller may be running it.
async fn refuse_in_cluster_controllers(
    args: &DevArgs,
    conn: &Connection,
    discovery: &Discovery,
    loaded: &spec::Loaded,
    from_cluster: &[String],
) -> Result<()> {
    for def in &loaded.controllers {
        if in_cluster_controller_exists(&conn.client, discovery, def).await {
            let msg = format!(
                "{} {} exists on context {}: an in-cluster Metacontroller may be running it, and two engines driving the same parents fight over the children",
                def.kind(),
                def.name(),
                conn.context.name
            );
            if !args.force {
                let hint = if from_cluster.iter().any(|n| n == def.name()) {
                    " You read it with --from-cluster: that is expected, but make sure Metacontroller does not run it at the same time."
                } else {
                    ""
                };
                return Err(fail(
                    Class::Refused,
                    format!(
                        "{msg}.\nScale the in-cluster Metacontroller down (or rename your local definition), then re-run; or pass --force if you are sure nothing runs it.{hint}"
                    ),
                ));
            }
            eprintln!("warning: {msg} (continuing because of --force)");
        }
    }
    Ok(())
}

/// Step 5: a Lease per controller.
async fn take_leases(
    args: &DevArgs,
    conn: &Connection,
    loaded: &spec::Loaded,
) -> Result<Vec<lease::LeaseGuard>> {
    let holder = lease::default_holder();
    let mut leases = Vec::new();
    for def in &loaded.controllers {
        let name = lease::lease_name(def.kind(), def.name());
        let guard = lease::acquire(
            conn.client.clone(),
            &args.lease_namespace,
            &name,
            &holder,
            LEASE_DURATION,
        )
        .await
        .map_err(|e| {
            let class = match e {
                lease::LeaseError::Api { .. } => Class::Cluster,
                _ => Class::Refused,
            };
            tag(e.into(), class)
        })
        .with_context(|| format!("controller {}", def.name()))?;
        leases.push(guard);
    }
    Ok(leases)
}

/// Step 6: apply the non-controller documents (what is missing, or all with `--overwrite`)
/// and say what was applied and what was kept.
async fn apply_manifests(
    args: &DevArgs,
    conn: &Connection,
    discovery: &Discovery,
    loaded: &spec::Loaded,
) -> Result<()> {
    let docs: Vec<(String, serde_json::Value)> = loaded
        .others
        .iter()
        .map(|d| (d.source.to_string(), d.value.clone()))
        .collect();
    let outcomes = manifests::apply_documents(
        &conn.client,
        discovery,
        &conn.context.namespace,
        &docs,
        Duration::from_secs(30),
        args.overwrite,
    )
    .await
    .class(Class::Cluster)?;
    let mut kept = 0;
    for (object, outcome) in outcomes {
        match outcome {
            manifests::Outcome::Applied => eprintln!("applied {object}"),
            manifests::Outcome::Kept => {
                kept += 1;
                eprintln!("exists  {object} (kept as it is)");
            }
        }
    }
    if kept > 0 {
        eprintln!(
            "note: --apply created only what was missing; {kept} object(s) that exist were left as they are (pass --overwrite to re-apply them)"
        );
    }
    Ok(())
}

/// The event log printing the bus on stdout, and how to stop it.
struct EventLog {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Start the event log; it prints nothing when the TUI shows the events.
fn spawn_event_log(
    args: &DevArgs,
    verbose: u8,
    color: bool,
    bus: &EventBus,
    tui: bool,
) -> EventLog {
    let format = match args.output {
        OutputArg::Human => OutputFormat::Human,
        OutputArg::Json => OutputFormat::Json,
    };
    let printer = Printer::new(
        std::io::stdout(),
        format,
        color && format == OutputFormat::Human,
        args.verbose_events || verbose > 0,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(dev_output::run(
        if tui {
            EventBus::new().subscribe()
        } else {
            bus.subscribe()
        },
        printer,
        async move {
            let _ = stopped.await;
        },
    ));
    EventLog { stop, task }
}

/// The engine's context: options from the flags, the resolved hook endpoints, and writes held
/// while a Lease is not confirmed (API server outage), resuming after.
fn engine_context(
    args: &DevArgs,
    conn: &Connection,
    bus: EventBus,
    endpoints: &[endpoint::ResolvedController],
    leases: &[lease::LeaseGuard],
) -> Result<Arc<EngineContext>> {
    let options = EngineOptions {
        workers: args.workers,
        hook_base_url: args.hook_base_url.clone(),
        namespace: args.cluster.namespace.clone(),
        dump_requests: args.dump_requests.clone(),
        apply_strategy: match args.apply_strategy {
            ApplyStrategyArg::ClientSide => ApplyStrategy::ClientSide,
            ApplyStrategyArg::ServerSide => ApplyStrategy::ServerSide,
        },
        ..EngineOptions::default()
    };
    let ctx = Arc::new(
        EngineContext::new(conn.client.clone(), bus, options)
            .map_err(|e| fail(Class::Usage, format!("cannot set up the hook client: {e}")))?,
    );
    for resolved in endpoints {
        ctx.hooks.set_endpoints(resolved);
    }
    for l in leases {
        ctx.follow_lease(l.state());
    }
    ctx.follow_api_pace(conn.pace.clone());
    Ok(ctx)
}

/// The dev loop's configuration from the flags.
fn dev_loop_config(
    args: &DevArgs,
    server: Option<(ServerConfig, String)>,
    selector: Option<ControllerSelector>,
) -> DevLoopConfig {
    let (server_cfg, server_base_url) = match server {
        Some((c, u)) => (Some(c), Some(u)),
        None => (None, None),
    };
    DevLoopConfig {
        files: args.files.clone(),
        watch: args.watch.clone(),
        debounce: Duration::from_millis(args.debounce),
        server: server_cfg,
        server_base_url,
        watch_files: !args.once && !args.no_watch,
        recursive: args.recursive,
        selector,
    }
}

/// Start the TUI on the engine's events, with the parents' Kubernetes Events (a watch of its
/// own), whether writes are held (API server outage) and the work queues' depth.
fn spawn_tui(
    args: &DevArgs,
    conn: &Connection,
    dev: &DevLoop,
    events: tokio::sync::broadcast::Receiver<EngineEvent>,
    tx: tokio::sync::mpsc::Sender<control::Request>,
    color: bool,
) -> Tui {
    let context = format!("{} · ns {}", conn.context.name, conn.context.namespace);
    let (kube_events, _) =
        crate::tui::kube_events::watch(conn.client.clone(), args.cluster.namespace.as_deref());
    let feeds = crate::tui::event_loop::Feeds {
        held: Some(dev.engine().context().writes_watch()),
        kube_events: Some(kube_events),
        queue: Some(crate::engine::runtime::queue::depth),
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
    match super::sandbox::data_dir()
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
    args: &DevArgs,
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
    if args.once {
        let timeout = Duration::from_secs(args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT));
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

/// While stopping, let the next Ctrl-C (or SIGTERM) exit at once, saying what is left behind.
fn exit_on_second_interrupt(interrupts: &Interrupts) {
    let again = interrupts.next();
    tokio::spawn(async move {
        again.await;
        eprintln!(
            "stopping: interrupted again, exiting at once (the hook server and Leases may be left behind; a Lease expires on its own)"
        );
        std::process::exit(i32::from(Class::Interrupted.code()));
    });
}

/// Stop: finish in-flight syncs, stop the hook server and the event log, release the Leases
/// (saying so unless `quiet`). With `--once` within [`STOP_GRACE`], after which in-flight
/// work is abandoned.
async fn stop(
    args: &DevArgs,
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
        let _ = log.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), log.task).await;
        if !leases.is_empty() {
            say(&format!("releasing {} Lease(s)", leases.len()));
        }
        for l in leases {
            l.release().await;
        }
        say("done");
    };
    if args.once {
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

/// The TUI runs unless `--no-tui`, `-o json`, `--once`, or stdout is not a terminal.
fn use_tui(args: &DevArgs) -> bool {
    !args.no_tui && !args.once && args.output == OutputArg::Human && std::io::stdout().is_terminal()
}

/// Whether to color the human event log.
fn color_wanted(arg: ColorArg, stdout_is_tty: bool) -> bool {
    match arg {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => dev_output::color_enabled(stdout_is_tty),
    }
}

/// `--once`: wait until every parent converged, while the engine retries failed syncs with
/// its backoff, until `deadline` (`timeout` after the start: the whole run's `--timeout`). What is still awaited is published (an `info` event) when it
/// changes and every [`ONCE_REPORT_EVERY`]; at the deadline the error names what never
/// converged. A controller that could not start at all ends the wait at once.
async fn wait_once(
    engine: &Engine,
    bus: &EventBus,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<()> {
    let mut said: Option<(Vec<String>, tokio::time::Instant)> = None;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let rep = engine
            .wait_converged(left.min(Duration::from_secs(1)))
            .await;
        if rep.converged && rep.pending.is_empty() && rep.failed.is_empty() {
            return Ok(());
        }
        let broken: Vec<String> = rep
            .failed
            .iter()
            .filter(|(_, parent, _)| parent.is_empty())
            .map(|(c, _, m)| format!("  {c}: {m}"))
            .collect();
        if !broken.is_empty() {
            return Err(fail(
                Class::NotConverged,
                format!(
                    "{} controller(s) could not start:\n{}",
                    broken.len(),
                    broken.join("\n")
                ),
            ));
        }
        if !rep.hot_loops.is_empty() {
            // Retrying cannot end a hot loop (the guard holds the field): say so now.
            let lines: Vec<String> = rep
                .hot_loops
                .iter()
                .map(|(c, parent, m)| format!("  {c} {parent}: {m}"))
                .collect();
            return Err(fail(
                Class::NotConverged,
                format!(
                    "{} parent(s) in a hot loop, which retrying cannot end (change the hook or see the cause):\n{}",
                    lines.len(),
                    lines.join("\n")
                ),
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(fail(
                once_class(&rep),
                format!(
                    "not converged after {}s (--timeout); never converged:\n{}",
                    timeout.as_secs(),
                    awaited(&rep, true).join("\n")
                ),
            ));
        }
        let waiting = awaited(&rep, false);
        let repeat = !waiting.is_empty()
            && said
                .as_ref()
                .is_none_or(|(before, at)| *before != waiting || at.elapsed() >= ONCE_REPORT_EVERY);
        if repeat {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            bus.publish(EngineEvent::Info {
                controller: None,
                message: format!(
                    "--once: waiting for {} thing(s), {}s left (--timeout):\n{}",
                    waiting.len(),
                    left.as_secs(),
                    waiting.join("\n")
                ),
            });
            said = Some((waiting, tokio::time::Instant::now()));
        }
    }
}

/// The exit class of a `--once` that did not converge by its deadline, decided on the typed
/// errors (README "Exit codes"): an engine bug is [`Class::Internal`]; the API server away
/// (writes held for it) or refusing the syncs' requests for reasons of its own (unreachable,
/// credentials, conflicts, missing objects: [`Layer::Api`]) is [`Class::Cluster`]; failing
/// hooks, unusable answers, objects the server rejects as invalid ([`Layer::Hook`]), bad
/// parents, and work still pending are [`Class::NotConverged`].
fn once_class(rep: &OnceReport) -> Class {
    let layers: Vec<Layer> = rep.errors.iter().map(SyncError::layer).collect();
    if layers.contains(&Layer::Internal) {
        Class::Internal
    } else if matches!(rep.held, Some(WritesHeld::ApiUnreachable { .. }))
        || layers.contains(&Layer::Api)
    {
        Class::Cluster
    } else {
        Class::NotConverged
    }
}

/// One line per thing `--once` still waits for; with `full`, a failed sync's whole error
/// (indented) instead of its first line.
fn awaited(rep: &OnceReport, full: bool) -> Vec<String> {
    let failed = rep.failed.iter().map(|(c, parent, m)| {
        let message = if full {
            m.lines().collect::<Vec<_>>().join("\n      ")
        } else {
            m.lines().next().unwrap_or_default().to_string()
        };
        format!("  {c} {parent}: last sync failed, retrying with backoff: {message}")
    });
    let pending = rep.pending.iter().map(|(c, what)| format!("  {c}: {what}"));
    failed.chain(pending).collect()
}

/// Who took which Lease over (`lease default/kubectl-meta-... held by bob@desk pid 7 since 10:42:05`).
fn lost_reason(leases: &[lease::LeaseGuard]) -> String {
    let reasons: Vec<String> = leases
        .iter()
        .filter_map(lease::LeaseGuard::lost_reason)
        .collect();
    if reasons.is_empty() {
        "another dev loop took over".to_string()
    } else {
        format!("another dev loop took over ({})", reasons.join("; "))
    }
}

/// The command `--resync/--pause/--resume` asks for, if any.
fn control_command(args: &DevArgs) -> Option<Command> {
    if let Some(p) = &args.resync {
        return Some(Command::Resync {
            parent: (!p.is_empty()).then(|| p.clone()),
        });
    }
    if args.pause {
        return Some(Command::Pause);
    }
    args.resume.then_some(Command::Resume)
}

/// Send a command to every running dev loop and print their answers. A resync of one parent
/// succeeds when some dev loop knows that parent; any other command when every loop did it.
async fn send_control(command: Command) -> Result<()> {
    let dir = control::socket_dir(&super::sandbox::data_dir().class(Class::Internal)?);
    let answers = control::send(&dir, &command).await.class(Class::Control)?;
    let mut refused = 0;
    let total = answers.len();
    for (socket, ok, message) in answers {
        let pid = socket
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if ok {
            println!("dev loop pid {pid}: {message}");
        } else {
            eprintln!("dev loop pid {pid}: {message}");
            refused += 1;
        }
    }
    let one_parent = matches!(&command, Command::Resync { parent: Some(_) });
    if (one_parent && refused == total) || (!one_parent && refused > 0) {
        return Err(fail(
            Class::Control,
            if one_parent {
                "no running dev loop knows that parent (see above)"
            } else {
                "a dev loop refused the command (see above)"
            },
        ));
    }
    Ok(())
}

/// The managed hook server configuration from `--hook-server`, with the base URL whose calls
/// wait for it.
fn hook_server_config(args: &DevArgs) -> Result<Option<(ServerConfig, String)>> {
    let Some(command) = &args.hook_server else {
        return Ok(None);
    };
    let base = match (&args.hook_base_url, &args.hook_server_ready) {
        (Some(b), _) => b.clone(),
        (None, Some(ready)) => origin(ready).ok_or_else(|| {
            anyhow!("--hook-server-ready {ready}: not an http:// URL with a host and port")
        })?,
        (None, None) => bail!(
            "--hook-server needs to know where the server listens: pass --hook-base-url http://127.0.0.1:PORT (webhook URLs are pointed there) or --hook-server-ready http://127.0.0.1:PORT/healthz"
        ),
    };
    let readiness = match &args.hook_server_ready {
        Some(url) => Readiness::Http(url.clone()),
        None => readiness_for(&base).ok_or_else(|| {
            anyhow!("--hook-base-url {base}: not an http:// URL with a host; cannot tell when the hook server is ready")
        })?,
    };
    Ok(Some((ServerConfig::new(command.clone(), readiness), base)))
}

/// `http://host:port` of a URL.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    let host = u.host_str()?;
    let port = u.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", u.scheme()))
}

/// The Metacontroller kinds a definition can be read from the cluster as:
/// (kind, resource plural).
const CLUSTER_KINDS: [(&str, &str); 2] = [
    ("CompositeController", "compositecontrollers"),
    ("DecoratorController", "decoratorcontrollers"),
];

/// Read `NAME` (or `KIND/NAME`, e.g. `decoratorcontroller/foo`) from the cluster: a
/// CompositeController or DecoratorController object.
pub(crate) async fn read_from_cluster(
    client: &kube::Client,
    discovery: &Discovery,
    arg: &str,
) -> Result<ControllerDef> {
    let (wanted, name) = match arg.split_once('/') {
        Some((k, n)) => {
            let k = k.to_ascii_lowercase();
            let Some(kind) = CLUSTER_KINDS
                .iter()
                .find(|(kind, plural)| k == kind.to_ascii_lowercase() || k == *plural)
            else {
                bail!(
                    "--from-cluster {arg}: {k} is not a kind that can be read from the cluster; use compositecontroller/NAME or decoratorcontroller/NAME"
                );
            };
            (vec![*kind], n)
        }
        None => (CLUSTER_KINDS.to_vec(), arg),
    };
    let mut found = Vec::new();
    let mut apis = 0;
    for (kind, plural) in &wanted {
        let Ok(info) = discovery
            .resolve("metacontroller.k8s.io/v1alpha1", plural)
            .await
        else {
            continue;
        };
        apis += 1;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
        if let Some(obj) = api
            .get_opt(name)
            .await
            .class(Class::Cluster)
            .with_context(|| format!("--from-cluster {arg}: reading the {kind}"))?
        {
            found.push((*kind, obj));
        }
    }
    if apis == 0 {
        bail!(
            "--from-cluster {arg}: the cluster has no Metacontroller API (kubectl api-resources --api-group metacontroller.k8s.io); is Metacontroller installed?"
        );
    }
    let kinds: Vec<&str> = wanted.iter().map(|(k, _)| *k).collect();
    match found.len() {
        0 => bail!(
            "--from-cluster {arg}: no {} named {name} on this cluster (kubectl get {})",
            kinds.join(" or "),
            wanted.iter().map(|(_, p)| *p).collect::<Vec<_>>().join(",")
        ),
        1 => {}
        _ => bail!(
            "--from-cluster {arg}: both a CompositeController and a DecoratorController are named {name}; say which with compositecontroller/{name} or decoratorcontroller/{name}"
        ),
    }
    let (kind, obj) = found.remove(0);
    let value = serde_json::to_value(&obj).with_context(|| format!("encoding the {kind}"))?;
    Ok(spec::parse_controller(
        &value,
        Source::cluster(&kind.to_ascii_lowercase(), name),
    )?)
}

/// Does an object of the definition's kind and name exist on the cluster (an in-cluster
/// Metacontroller may run it)? MapController exists only here, so never.
async fn in_cluster_controller_exists(
    client: &kube::Client,
    discovery: &Discovery,
    def: &ControllerDef,
) -> bool {
    let Some((_, plural)) = CLUSTER_KINDS.iter().find(|(k, _)| *k == def.kind()) else {
        return false;
    };
    let Ok(info) = discovery
        .resolve("metacontroller.k8s.io/v1alpha1", plural)
        .await
    else {
        return false;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
    matches!(api.get_opt(def.name()).await, Ok(Some(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::HookError;
    use crate::k8s::error::{ApiError, ApiErrorClass};

    fn report(errors: Vec<SyncError>, held: Option<WritesHeld>) -> OnceReport {
        OnceReport {
            converged: false,
            failed: Vec::new(),
            pending: Vec::new(),
            hot_loops: Vec::new(),
            errors,
            held,
        }
    }

    fn write(class: ApiErrorClass) -> SyncError {
        SyncError::Write(vec![ApiError::new(class, "m")])
    }

    #[test]
    fn once_exit_class_comes_from_the_typed_errors() {
        let hook = SyncError::hook(
            "sync",
            HookError::Request {
                target: "http://h".into(),
                message: "reset".into(),
            },
        );
        let unreachable = WritesHeld::ApiUnreachable {
            since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            error: "connection refused".into(),
        };
        let cases = [
            (report(vec![], None), Class::NotConverged),
            (report(vec![hook.clone()], None), Class::NotConverged),
            (
                report(vec![SyncError::answer("sync", "bad")], None),
                Class::NotConverged,
            ),
            (
                report(vec![SyncError::Parent("bad selector".into())], None),
                Class::NotConverged,
            ),
            // The server rejects what the hook asked for: fix the hook.
            (
                report(vec![write(ApiErrorClass::Invalid)], None),
                Class::NotConverged,
            ),
            (
                report(vec![hook.clone(), write(ApiErrorClass::Forbidden)], None),
                Class::Cluster,
            ),
            (
                report(vec![write(ApiErrorClass::Unreachable)], None),
                Class::Cluster,
            ),
            (
                report(vec![write(ApiErrorClass::Conflict)], None),
                Class::Cluster,
            ),
            (
                report(vec![SyncError::Read("list failed".into())], None),
                Class::Cluster,
            ),
            (
                report(vec![hook.clone()], Some(unreachable)),
                Class::Cluster,
            ),
            (
                report(
                    vec![],
                    Some(WritesHeld::LeaseLost {
                        holder: "held by bob".into(),
                    }),
                ),
                Class::NotConverged,
            ),
            (
                report(
                    vec![
                        write(ApiErrorClass::Unreachable),
                        SyncError::Internal("bug".into()),
                    ],
                    None,
                ),
                Class::Internal,
            ),
        ];
        for (rep, class) in cases {
            assert_eq!(once_class(&rep), class, "{rep:?}");
        }
    }
}
