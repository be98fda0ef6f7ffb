//! `kubectl meta dev`: run controller definitions locally against a cluster or a sandbox.
//!
//! Order of work, so that bad input never leads to a write: load and validate every definition
//! -> connect (context pinned) -> safety checks (write guard, in-cluster Metacontroller, lease)
//! -> `--apply` manifests -> start the engine and print its event log -> on Ctrl-C/SIGTERM stop
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
use crate::engine::context::{EngineContext, EngineOptions};
use crate::engine::events::EventBus;
use crate::engine::execute::ApplyStrategy;
use crate::engine::runtime::Engine;
use crate::k8s::client::{self, Connection};
use crate::k8s::discovery::Discovery;
use crate::k8s::{lease, manifests};
use crate::sandbox::{Sandbox, SandboxConfig, Storage};
use crate::spec::{self, ControllerDef, Source};

/// Lease duration of a dev session.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// Run `kubectl meta dev`.
pub async fn run(global: GlobalArgs, args: DevArgs) -> Result<()> {
    if args.files.is_empty() && args.from_cluster.is_empty() {
        bail!(
            "nothing to run: pass controller definitions with -f FILE|DIR, or --from-cluster NAME (try: kubectl meta dev --sandbox --apply -f examples/hello-world/)"
        );
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    // 1. Definitions first: a malformed file is rejected before anything is written.
    let loaded = if args.files.is_empty() {
        spec::Loaded::default()
    } else if args.from_cluster.is_empty() {
        spec::load_paths(&args.files)?
    } else {
        spec::load_documents(&args.files)?
    };
    for def in &loaded.controllers {
        if !matches!(def, ControllerDef::Composite(_)) {
            bail!(
                "{} {} ({}): only CompositeController definitions can run in this version",
                def.kind(),
                def.name(),
                def.source()
            );
        }
    }
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
    let result = run_connected(&global, &args, loaded, &conn).await;
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
        if in_cluster_controller_exists(&conn.client, &discovery, def.name()).await {
            let msg = format!(
                "CompositeController {} exists on context {}: an in-cluster Metacontroller may be running it, and two engines driving the same parents fight over the children",
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
    let printer_task = tokio::spawn(dev_output::run(bus.subscribe(), printer));
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
    let mut engine = Engine::new(ctx);
    for def in loaded.controllers {
        engine.start(def)?;
    }
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
            rep = engine.wait_converged(Duration::from_secs(args.timeout)) => {
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
        tokio::select! {
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
            () = lease_lost => Err(anyhow!("lost the controller lease: another dev loop took over; stopping")),
        }
    };
    engine.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), printer_task).await;
    for l in leases {
        l.release().await;
    }
    outcome
}

async fn read_from_cluster(
    client: &kube::Client,
    discovery: &Discovery,
    name: &str,
) -> Result<ControllerDef> {
    let info = discovery
        .resolve("metacontroller.k8s.io/v1alpha1", "compositecontrollers")
        .await
        .with_context(|| format!("--from-cluster {name}: the cluster has no CompositeController API (is Metacontroller installed?)"))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
    let obj = api
        .get_opt(name)
        .await
        .with_context(|| format!("--from-cluster {name}: reading the CompositeController"))?
        .ok_or_else(|| anyhow!("--from-cluster {name}: no CompositeController named {name} on this cluster (kubectl get compositecontrollers)"))?;
    let value = serde_json::to_value(&obj).context("encoding the CompositeController")?;
    Ok(spec::parse_controller(
        &value,
        Source::cluster("compositecontroller", name),
    )?)
}

async fn in_cluster_controller_exists(
    client: &kube::Client,
    discovery: &Discovery,
    name: &str,
) -> bool {
    let Ok(info) = discovery
        .resolve("metacontroller.k8s.io/v1alpha1", "compositecontrollers")
        .await
    else {
        return false;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
    matches!(api.get_opt(name).await, Ok(Some(_)))
}
