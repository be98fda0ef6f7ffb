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
use kube::api::{Api, DynamicObject};

use super::dev_output::{self, OutputFormat, Printer};
use crate::cli::GlobalArgs;
use crate::cli::dev::{ApplyStrategyArg, DevArgs, OutputArg};
use crate::devloop::control::{self, Command, ControlServer};
use crate::devloop::{DevLoop, DevLoopConfig};
use crate::engine::context::{EngineContext, EngineOptions};
use crate::engine::events::EngineEvent;
use crate::engine::events::EventBus;
use crate::engine::execute::ApplyStrategy;
use crate::engine::runtime::Engine;
use crate::hooks::server::{Readiness, ServerConfig, readiness_for};
use crate::k8s::client::{self, Connection};
use crate::k8s::discovery::Discovery;
use crate::k8s::{lease, manifests};
use crate::sandbox::{Sandbox, SandboxConfig, Storage};
use crate::spec::{self, ControllerDef, Source};
use crate::tui::Tui;

/// Lease duration of a dev session.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// Run `kubectl meta dev`.
pub async fn run(global: GlobalArgs, args: DevArgs) -> Result<()> {
    if let Some(command) = control_command(&args) {
        return send_control(command).await;
    }
    if args.files.is_empty() && args.from_cluster.is_empty() {
        bail!(
            "nothing to run: pass controller definitions with -f FILE|DIR, or --from-cluster NAME (try: kubectl meta dev --sandbox --apply -f examples/hello-world/)"
        );
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    let server = hook_server_config(&args)?;
    // 1. Definitions first: a malformed file is rejected before anything is written.
    let loaded = if args.files.is_empty() {
        spec::Loaded::default()
    } else if args.from_cluster.is_empty() {
        spec::load_paths(&args.files)?
    } else {
        spec::load_documents(&args.files)?
    };
    if !loaded.others.is_empty() && !args.apply {
        eprintln!(
            "note: {} non-controller document(s) in the given files are ignored; pass --apply to apply them",
            loaded.others.len()
        );
    }

    // 2. Connect (optionally to an in-process sandbox).
    let mut sandbox = None;
    let conn = if args.sandbox {
        let (sb, kubeconfig) = start_sandbox(&args).await?;
        println!(
            "sandbox listening on {}; kubeconfig: {}  (export KUBECONFIG={})",
            sb.url(),
            kubeconfig.display(),
            kubeconfig.display()
        );
        sandbox = Some(sb);
        client::connect(
            Some(&kubeconfig),
            Some("sandbox"),
            global.namespace.as_deref(),
        )
        .await?
    } else {
        client::connect(
            global.kubeconfig.as_deref(),
            global.context.as_deref(),
            global.namespace.as_deref(),
        )
        .await?
    };
    let result = run_connected(&global, &args, loaded, &conn, server).await;
    if let Some(sb) = sandbox {
        sb.shutdown().await;
    }
    result
}

async fn start_sandbox(args: &DevArgs) -> Result<(Sandbox, PathBuf)> {
    let storage = match &args.state {
        Some(d) => Storage::Dir(d.clone()),
        None => Storage::Ephemeral,
    };
    let kubeconfig = match (&args.write_kubeconfig, &storage) {
        (Some(p), _) => p.clone(),
        (None, Storage::Dir(d)) => d.join("kubeconfig"),
        (None, Storage::Ephemeral) => super::sandbox::data_dir()?.join("dev-sandbox.kubeconfig"),
    };
    let cfg = SandboxConfig {
        storage,
        kubeconfig: Some(kubeconfig.clone()),
        ..SandboxConfig::ephemeral()
    };
    let sb = Sandbox::start(cfg).await.context("starting the sandbox")?;
    Ok((sb, kubeconfig))
}

async fn run_connected(
    global: &GlobalArgs,
    args: &DevArgs,
    mut loaded: spec::Loaded,
    conn: &Connection,
    server: Option<(ServerConfig, String)>,
) -> Result<()> {
    let ctxinfo = &conn.context;
    println!("{} (pinned for this session)", ctxinfo.describe());
    // 3. Write guard.
    if let Err(e) = client::write_guard(ctxinfo, &args.allow_context) {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !args.once {
            eprintln!("{e}");
            eprint!("Write to context {} anyway? [y/N] ", ctxinfo.name);
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer).ok();
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                bail!("not writing to context {}", ctxinfo.name);
            }
        } else {
            return Err(e.into());
        }
    }
    let discovery = Discovery::new(conn.client.clone());

    // Definitions from the cluster.
    let mut from_cluster = Vec::new();
    for name in &args.from_cluster {
        let def = read_from_cluster(&conn.client, &discovery, name).await?;
        from_cluster.push(def.name().to_string());
        loaded.controllers.push(def);
    }
    if loaded.controllers.is_empty() {
        bail!("no controller definitions found in the given files");
    }

    // 4. In-cluster Metacontroller running the same controller?
    for def in &loaded.controllers {
        if in_cluster_controller_exists(&conn.client, &discovery, def).await {
            let msg = format!(
                "{} {} exists on context {}: an in-cluster Metacontroller may be running it, and two engines driving the same parents fight over the children",
                def.kind(),
                def.name(),
                ctxinfo.name
            );
            if !args.force {
                let hint = if from_cluster.iter().any(|n| n == def.name()) {
                    " You read it with --from-cluster: that is expected, but make sure Metacontroller does not run it at the same time."
                } else {
                    ""
                };
                bail!(
                    "{msg}.\nScale the in-cluster Metacontroller down (or rename your local definition), then re-run; or pass --force if you are sure nothing runs it.{hint}"
                );
            }
            eprintln!("warning: {msg} (continuing because of --force)");
        }
    }

    // 5. One dev loop per controller: a Lease each.
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
        .with_context(|| format!("controller {}", def.name()))?;
        leases.push(guard);
    }

    // 6. --apply manifests.
    if args.apply && !loaded.others.is_empty() {
        let docs: Vec<(String, serde_json::Value)> = loaded
            .others
            .iter()
            .map(|d| (d.source.to_string(), d.value.clone()))
            .collect();
        let applied = manifests::apply_documents(
            &conn.client,
            &discovery,
            &ctxinfo.namespace,
            &docs,
            Duration::from_secs(30),
        )
        .await?;
        for a in applied {
            println!("applied {a}");
        }
    }

    // 7. Engine and event log.
    let bus = EventBus::new();
    let format = match args.output {
        OutputArg::Human => OutputFormat::Human,
        OutputArg::Json => OutputFormat::Json,
    };
    let color = dev_output::color_enabled(std::io::stdout().is_terminal());
    let printer = Printer::new(
        std::io::stdout(),
        format,
        color && format == OutputFormat::Human,
        args.verbose_events || global.verbose > 0,
    );
    // The TUI subscribes now, before the engine starts, to see the controllers start.
    let tui_events = use_tui(args).then(|| bus.subscribe());
    let printer_task = tokio::spawn(dev_output::run(
        if tui_events.is_some() {
            EventBus::new().subscribe()
        } else {
            bus.subscribe()
        },
        printer,
    ));
    let options = EngineOptions {
        workers: args.workers,
        hook_base_url: args.hook_base_url.clone(),
        namespace: global.namespace.clone(),
        apply_strategy: match args.apply_strategy {
            ApplyStrategyArg::ClientSide => ApplyStrategy::ClientSide,
            ApplyStrategyArg::ServerSide => ApplyStrategy::ServerSide,
        },
        ..EngineOptions::default()
    };
    let ctx = Arc::new(
        EngineContext::new(conn.client.clone(), bus, options)
            .map_err(|e| anyhow!("cannot set up the hook client: {e}"))?,
    );
    let engine = Engine::new(ctx);
    let (server_cfg, server_base_url) = match server {
        Some((c, u)) => (Some(c), Some(u)),
        None => (None, None),
    };
    let cfg = DevLoopConfig {
        files: args.files.clone(),
        watch: args.watch.clone(),
        debounce: Duration::from_millis(args.debounce),
        server: server_cfg,
        server_base_url,
        watch_files: !args.once && !args.no_watch,
    };
    let mut dev = DevLoop::start(engine, loaded.controllers, cfg).await?;
    let bus = dev.engine().context().bus.clone();

    // Commands: keyboard (on a terminal), signals, the control socket.
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let (answers_tx, mut answers_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut control_server = None;
    let tui = tui_events.map(|events| {
        let context = format!("{} · ns {}", ctxinfo.name, ctxinfo.namespace);
        Tui::spawn(events, tx.clone(), context, color)
    });
    if !args.once {
        if tui.is_none() && std::io::stdin().is_terminal() {
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
    }
    drop(tx);

    let mut lost: Vec<_> = leases.iter().map(|l| l.lost()).collect();
    let lease_lost = async move {
        let waits = lost.iter_mut().map(|rx| {
            Box::pin(async move {
                let _ = rx.wait_for(|l| *l).await;
            })
        });
        futures::future::select_all(waits).await;
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let outcome: Result<()> = if args.once {
        tokio::select! {
            rep = dev.engine().wait_converged(Duration::from_secs(args.timeout)) => {
                if !rep.failed.is_empty() {
                    let lines: Vec<String> = rep.failed.iter()
                        .map(|(c, k, m)| format!("  {c} {k}: {m}"))
                        .collect();
                    Err(anyhow!("{} parent(s) failed their last sync:\n{}", rep.failed.len(), lines.join("\n")))
                } else if !rep.converged {
                    let lines: Vec<String> = rep.pending.iter().map(|(c, w)| format!("  {c}: {w}")).collect();
                    Err(anyhow!("not converged after {}s (--timeout):\n{}", args.timeout, lines.join("\n")))
                } else {
                    Ok(())
                }
            }
            _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow!("terminated")),
            () = lease_lost => Err(anyhow!("lost the controller lease: another dev loop took over")),
        }
    } else {
        let (lost_tx, mut lost_rx) = tokio::sync::oneshot::channel::<()>();
        let quit = tui.as_ref().map(Tui::quit);
        let stop = async move {
            let quit = async move {
                match quit {
                    Some(q) => q.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = quit => {}
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                () = lease_lost => { let _ = lost_tx.send(()); }
            }
        };
        dev.run_until(rx, stop).await;
        if lost_rx.try_recv().is_ok() {
            Err(anyhow!(
                "lost the controller lease: another dev loop took over; stopping"
            ))
        } else {
            Ok(())
        }
    };
    // Restore the terminal before anything else is printed.
    let ui_outcome = match tui {
        Some(t) => t
            .finish()
            .await
            .map_err(|e| anyhow!("the terminal UI failed: {e}")),
        None => Ok(()),
    };
    drop(control_server);
    dev.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), printer_task).await;
    for l in leases {
        l.release().await;
    }
    outcome.and(ui_outcome)
}

/// The TUI runs unless `--no-tui`, `-o json`, `--once`, or stdout is not a terminal.
fn use_tui(args: &DevArgs) -> bool {
    !args.no_tui && !args.once && args.output == OutputArg::Human && std::io::stdout().is_terminal()
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

/// Send a command to every running dev loop and print their answers.
async fn send_control(command: Command) -> Result<()> {
    let dir = control::socket_dir(&super::sandbox::data_dir()?);
    let answers = control::send(&dir, &command).await?;
    let mut failed = false;
    for (socket, ok, message) in answers {
        let pid = socket
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!("dev loop pid {pid}: {message}");
        failed |= !ok;
    }
    if failed {
        bail!("a dev loop refused the command (see above)");
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
async fn read_from_cluster(
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
