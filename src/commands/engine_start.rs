//! Starting the engine, for the commands that run it (`dev` on a laptop, `run` in a cluster):
//! the engine's shared services from the flags and the webhooks' resolved endpoints, and the
//! event log printing the event bus on stdout (human lines or NDJSON, `-o json`); and the
//! hook bench the commands that call hooks alone stand on (`test`, `dryrun`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};

use super::definitions;
use super::exit::{Class, fail};
use crate::cli::dev::{ApplyStrategyArg, OutputArg};
use crate::cli::{ClusterArgs, EngineArgs, StatusEchoArg};
use crate::engine::ApplyStrategy;
use crate::engine::events::EventBus;
use crate::engine::{EngineContext, EngineOptions, HookBench};
use crate::hooks::endpoint;
use crate::k8s::client::{self, ClientError, ClientLimits, Connection};
use crate::spec;
use crate::view::log::{self as event_log, OutputFormat, Printer};

/// Connect from the cluster flags (`--kubeconfig`, `--context`, `-n`), with a client-side rate
/// cap or none (`ClientLimits::default()`): the one way commands connect from `ClusterArgs`.
pub async fn connect_kubeconfig(
    cluster: &ClusterArgs,
    limits: ClientLimits,
) -> Result<Connection, ClientError> {
    client::connect_limited(
        cluster.kubeconfig.as_deref(),
        cluster.context.as_deref(),
        cluster.namespace.as_deref(),
        limits,
    )
    .await
}

/// Check the engine flags; the client's rate limits they give.
pub fn check(args: &EngineArgs) -> Result<ClientLimits> {
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if !args.api_qps.is_finite() || args.api_qps < 0.0 {
        bail!("--api-qps must be a number of requests per second, 0 or more (0: unlimited)");
    }
    if args.api_burst == 0 {
        bail!("--api-burst must be at least 1");
    }
    Ok(ClientLimits {
        qps: args.api_qps,
        burst: args.api_burst,
    })
}

/// The engine options the engine flags set (the others at their defaults).
pub fn options(args: &EngineArgs, namespace: Option<String>) -> EngineOptions {
    EngineOptions {
        workers: args.workers,
        namespace,
        apply_strategy: match args.apply_strategy {
            ApplyStrategyArg::ClientSide => ApplyStrategy::ClientSide,
            ApplyStrategyArg::ServerSide => ApplyStrategy::ServerSide,
        },
        confirm_status_writes: args.status_echo == StatusEchoArg::Sync,
        ..EngineOptions::default()
    }
}

/// The hook bench `test` and `dryrun --against` call hooks on: the engine's shared services
/// for `conn` ([`engine_context`]) with the secured webhooks' Secrets and ConfigMaps resolved
/// (read, never shown), the files' own documents standing in for objects not created yet.
/// The resolved endpoints come back too (`dryrun --simulate` starts engines with them).
pub async fn hook_bench(
    conn: &Connection,
    loaded: &spec::Loaded,
    bus: EventBus,
    options: EngineOptions,
) -> Result<(HookBench, Vec<endpoint::ResolvedController>)> {
    let endpoints = definitions::resolve_endpoints(loaded, conn, true, false, false).await?;
    let ctx = engine_context(conn, bus, options, &endpoints)?;
    Ok((HookBench::on(ctx), endpoints))
}

/// The engine's shared services for `conn`, with the webhooks' resolved endpoints set.
pub fn engine_context(
    conn: &Connection,
    bus: EventBus,
    options: EngineOptions,
    endpoints: &[endpoint::ResolvedController],
) -> Result<Arc<EngineContext>> {
    EngineContext::with_endpoints(conn.client.clone(), bus, options, endpoints)
        .map(Arc::new)
        .map_err(|e| fail(Class::Usage, format!("cannot set up the hook client: {e}")))
}

/// How the event log prints.
#[derive(Debug, Clone, Copy)]
pub struct LogStyle {
    /// `-o`.
    pub output: OutputArg,
    /// Color the human lines.
    pub color: bool,
    /// Print every event, no-op syncs included.
    pub verbose: bool,
}

/// The event log printing the bus on stdout, and how to stop it.
pub struct EventLog {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl EventLog {
    /// Start printing `bus` (nothing at all with `silent`, when a TUI shows the events).
    pub fn spawn(style: LogStyle, bus: &EventBus, silent: bool) -> EventLog {
        let format = match style.output {
            OutputArg::Human => OutputFormat::Human,
            OutputArg::Json => OutputFormat::Json,
        };
        let printer = Printer::new(
            std::io::stdout(),
            format,
            style.color && format == OutputFormat::Human,
            style.verbose,
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(event_log::run(
            if silent {
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

    /// Print what is left on the bus, then stop (within 2 s).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), self.task).await;
    }
}
