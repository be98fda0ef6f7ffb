//! `kubectl meta run`: the engine of `dev`, headless, for running inside a cluster.
//!
//! Order of work: check every flag -> read the `-f` files (a malformed one is rejected before
//! anything starts) -> connect (the Pod's ServiceAccount, or `--kubeconfig`/`--context`) ->
//! serve `/healthz`, `/readyz`, `/metrics` -> follow the definition sources and campaign for
//! one Lease per controller ([`crate::incluster::Runner`]) -> on SIGTERM or Ctrl-C: every
//! controller finishes its in-flight syncs, then every Lease is released (another replica takes
//! over at once).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio_util::sync::CancellationToken;

use super::definitions::{self, check_reachable};
use super::engine_start::{self, EventLog, LogStyle};
use super::exit::{Class, Classify, fail};
use super::interrupts::Interrupts;
use crate::cli::dev::OutputArg;
use crate::cli::run::RunArgs;
use crate::engine::Engine;
use crate::engine::EngineOptions;
use crate::engine::events::EventBus;
use crate::engine::flight::FlightRecorder;
use crate::incluster::metrics::Metrics;
use crate::incluster::sources::{self, ClusterFilter};
use crate::incluster::{Runner, RunnerConfig, http};
use crate::k8s::client::{ClientLimits, Connection};
use crate::k8s::discovery::Discovery;
use crate::k8s::election::{ElectionConfig, replica_identity};
use crate::k8s::incluster;
use crate::spec::ControllerSelector;

/// `run`'s flags once checked.
struct RunConfig {
    args: RunArgs,
    selector: Option<ControllerSelector>,
    election: ElectionConfig,
    limits: ClientLimits,
}

/// A duration flag in seconds.
fn seconds(flag: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 {
        bail!("{flag} must be a number of seconds greater than 0 (for example {flag} 15)");
    }
    Ok(Duration::from_secs_f64(v))
}

impl RunConfig {
    /// Check every flag that can be checked without a cluster.
    fn new(args: RunArgs) -> Result<RunConfig> {
        let limits = engine_start::check(&args.engine)?;
        let election = ElectionConfig {
            lease_duration: seconds("--lease-duration", args.lease_duration)?,
            renew_deadline: seconds("--renew-deadline", args.renew_deadline)?,
            retry_period: seconds("--retry-period", args.retry_period)?,
        };
        election.validate()?;
        if args.http_addr.parse::<SocketAddr>().is_err() {
            bail!(
                "--http-addr {}: not an address with a port (for example 0.0.0.0:9090, or 127.0.0.1:0 for any free port)",
                args.http_addr
            );
        }
        for path in &args.defs.files {
            if !path.exists() {
                bail!("-f {}: no such file or directory", path.display());
            }
        }
        if args.identity.as_deref().is_some_and(str::is_empty) {
            bail!("--identity must not be empty");
        }
        let selector = args
            .defs
            .selector
            .as_deref()
            .map(ControllerSelector::parse)
            .transpose()?;
        Ok(RunConfig {
            selector,
            election,
            limits,
            args,
        })
    }
}

/// Run `kubectl meta run`.
pub async fn run(args: RunArgs) -> Result<()> {
    let interrupts = Interrupts::install()
        .context("installing the Ctrl-C and SIGTERM handlers")
        .class(Class::Internal)?;
    let cfg = RunConfig::new(args).class(Class::Usage)?;
    // -f files first: a malformed one is rejected before anything starts.
    let files = if cfg.args.defs.files.is_empty() {
        None
    } else {
        Some(definitions::load_files(&cfg.args.defs, cfg.selector.as_ref())?.controllers)
    };
    let conn = connect(&cfg).await?;
    eprintln!("{}", conn.context.describe());
    check_reachable(&conn).await?;
    let lease_namespace = cfg
        .args
        .lease_namespace
        .clone()
        .or_else(|| {
            (conn.context.name == incluster::CONTEXT_NAME)
                .then(|| incluster::pod_namespace(&cfg.args.service_account_dir))
                .flatten()
        })
        .unwrap_or_else(|| conn.context.namespace.clone());
    let identity = cfg.args.identity.clone().unwrap_or_else(replica_identity);

    let bus = EventBus::new();
    let metrics = Metrics::spawn(&bus);
    let style = LogStyle {
        output: cfg.args.output,
        color: cfg.args.output == OutputArg::Human
            && crate::view::color::color_enabled(std::io::stdout().is_terminal()),
        verbose: false,
    };
    let log = EventLog::spawn(style, &bus, false);
    let flight = (cfg.args.flight_recorder_size > 0).then(|| {
        let f = std::sync::Arc::new(FlightRecorder::new(cfg.args.flight_recorder_size));
        f.spawn(&bus);
        f
    });
    let options = EngineOptions {
        service_dns: true,
        exec_dir: cfg.args.hook_dir.clone(),
        ..engine_start::options(&cfg.args.engine, cfg.args.cluster.namespace.clone())
    };
    let ctx = engine_start::engine_context(&conn, bus.clone(), options, &[])?;
    let use_cluster = files.is_none() || !cfg.args.defs.from_cluster.is_empty();
    let sources_count = usize::from(files.is_some()) + usize::from(use_cluster);
    let mut engine = Engine::new(ctx);
    if let Some(f) = &flight {
        // The dumps carry the definitions: what `kubectl meta replay` runs again.
        engine.set_flight_recorder(std::sync::Arc::clone(f));
    }
    let mut runner = Runner::new(
        engine,
        RunnerConfig {
            lease_namespace: lease_namespace.clone(),
            identity: identity.clone(),
            election: cfg.election,
            shard: match cfg.args.sharded {
                true => Some(sharded_gate(&conn.client, &identity, &lease_namespace).await),
                false => None,
            },
        },
        sources_count,
        std::sync::Arc::clone(&metrics),
    );
    let http_stop = CancellationToken::new();
    let (bound, http_task) = http::serve(
        &cfg.args.http_addr,
        runner.status(),
        metrics,
        flight,
        http_stop.clone(),
    )
    .await
    .class(Class::Usage)?;
    eprintln!(
        "serving /healthz, /readyz, /metrics and /debug/flight on http://{bound}; replica {identity}, Leases in namespace {lease_namespace}"
    );

    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let mut tasks = Vec::new();
    if let Some(defs) = files {
        tasks.push(
            sources::files(
                cfg.args.defs.files.clone(),
                cfg.args.defs.recursive,
                cfg.selector.clone(),
                defs,
                bus.clone(),
                0,
                tx.clone(),
            )
            .class(Class::Usage)?,
        );
    }
    if use_cluster {
        let discovery = Discovery::new(conn.client.clone());
        let filter = ClusterFilter {
            names: cfg.args.defs.from_cluster.clone(),
            selector: cfg.selector.clone(),
        };
        tasks.push(
            sources::cluster(conn.client.clone(), &discovery, filter, bus.clone(), 1, tx)
                .await
                .class(Class::Usage)?,
        );
    } else {
        drop(tx);
    }

    let received = async {
        interrupts.first().await;
    };
    runner.run_until(rx, received).await;
    interrupts.exit_on_next("the Leases expire on their own");
    eprintln!("stopping: finishing in-flight syncs, then releasing the Leases");
    for t in tasks {
        t.abort();
    }
    runner.shutdown().await;
    http_stop.cancel();
    let _ = http_task.await;
    log.stop().await;
    eprintln!("stopping: done");
    Ok(())
}

/// The Pod's ServiceAccount unless `--kubeconfig`/`--context` is given or
/// `KUBERNETES_SERVICE_HOST` is not set; else the kubeconfig, as every other command.
async fn connect(cfg: &RunConfig) -> Result<Connection> {
    let cluster = &cfg.args.cluster;
    let conn = if cluster.kubeconfig.is_none() && cluster.context.is_none() && incluster::in_pod() {
        incluster::connect(
            &cfg.args.service_account_dir,
            cluster.namespace.as_deref(),
            cfg.limits,
        )
        .await
    } else {
        engine_start::connect_kubeconfig(cluster, cfg.limits).await
    };
    conn.map_err(|e| fail(Class::Usage, e))
}

/// The shard gate of a `--sharded` replica, told once whether the server filters lists and
/// watches by KEP-5866 `shardSelector` (probed with a list of the Leases it keeps anyway); a
/// probe that fails leaves the client-side filter alone, with a warning saying why.
async fn sharded_gate(
    client: &kube::Client,
    identity: &str,
    lease_namespace: &str,
) -> std::sync::Arc<crate::engine::shard::ShardGate> {
    let gate = crate::engine::shard::ShardGate::new(identity);
    match crate::engine::k8s::shard_query::server_filters_shards(client, lease_namespace).await {
        Ok(honoured) => gate.set_server_selector(honoured),
        Err(e) => tracing::warn!(
            "cannot tell whether the server honours shardSelector (listing Leases in {lease_namespace}: {}); parents are filtered as they arrive",
            crate::engine::k8s::kube_error_message(&e)
        ),
    }
    gate
}
