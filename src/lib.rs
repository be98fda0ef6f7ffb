//! kubectl-meta: the local dev loop for Metacontroller-style Kubernetes controllers.
//!
//! Map of the crate:
//! - [`cli`]: clap definitions of every subcommand, plain data, no behaviour.
//! - [`commands`]: one module per subcommand, turning parsed arguments into work (the CLI edge).
//! - [`engine`]: the `kubectl-meta-engine` crate: the controller engine (pure plan + executor;
//!   Composite-, Decorator- and MapController; work queue), with [`spec`] (controller
//!   definitions), the hook callers and the Kubernetes client side.
//! - [`k8s`]: the engine's client side plus what only commands use: leader election
//!   (`run`), in-cluster connection, `--apply` manifests.
//! - [`hooks`]: the engine's hook callers plus the managed hook server (`hooks::server`).
//! - [`devloop`]: the dev loop around the engine: managed hook server, file watching, hot
//!   reload, replay, and the commands (resync, pause) a running `kubectl meta dev` takes.
//! - [`dryrun`]: `kubectl meta dryrun`: what a sync would do, read once, planned, rendered.
//! - [`incluster`]: `kubectl meta run`: the engine in a cluster, a Lease per controller, probes
//!   and metrics.
//! - [`deploy`]: `kubectl meta deploy`: the objects that run definitions in a cluster (RBAC
//!   computed from them).
//! - [`inspect`]: `kubectl meta inspect`: the ownership graph around one object, controller-aware.
//! - [`project`]: the project file (`kubectl-meta.yaml`): discovery, schema, checks, hook builds.
//! - [`e2e`]: the `kubectl-meta-e2e` crate: chainsaw `Test`s against a sandbox or a named
//!   cluster, and the `--perturb` driver (`kubectl meta test` wires them).
//! - [`scaffold`]: the `kubectl-meta-scaffold` crate: `kubectl meta init`'s generator (CRD,
//!   controller, sample, hook with a typed kit per language, first hook test, project file).
//! - [`notice`]: what a person sees of an engine event, worded once for the log and the TUI.
//! - [`tui`]: the terminal UI of `kubectl meta dev`, driven by the engine's event stream.
//!
//! The API server behind `kubectl meta sandbox` and `dev --sandbox` is the `kube-sandbox` crate;
//! selectors, quantities and name rules are the `kube-apimachinery` crate.

// The command line and its commands: reached only through [`main`].
mod cli;
mod commands;
mod deploy;
mod dryrun;
mod incluster;
pub mod telemetry;

// The library surface integration tests and benches use (the engine and what drives it).
pub mod devloop;
pub mod hooks;
pub mod inspect;
pub mod k8s;
pub mod project;
pub mod view;

// The engine crate, under the names the plugin's modules have always used: `engine` is the
// crate itself (its curated surface), `spec` its definitions module.
pub use kubectl_meta_engine as engine;
pub use kubectl_meta_engine::spec;
// The chainsaw e2e runner and `init`'s generator, crates of their own, under their old names.
pub use kubectl_meta_e2e as e2e;
pub use kubectl_meta_scaffold as scaffold;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, ColorArg, Command};
use commands::exit::{self, Class};

pub use commands::version::platform;

/// Log lines (stderr) are colored only on a terminal without `NO_COLOR`, or with
/// `dev --color always`.
fn log_color(cli: &Cli) -> bool {
    use std::io::IsTerminal;
    let arg = match &cli.command {
        Command::Dev(args) => args.color,
        Command::Dryrun(args) => args.color,
        Command::Test(args) => args.color,
        _ => ColorArg::Auto,
    };
    arg.resolve(std::io::stderr().is_terminal())
}

/// The log lines' filter for `-v` counts (`KUBECTL_META_LOG` replaces it).
fn log_filter(verbose: u8) -> &'static str {
    match verbose {
        // kube's client logs every failed request at ERROR; the engine reports outages itself
        // (once, as an event), so those lines only show from -v on.
        0 => "warn,kube_client=off",
        1 => "info,kubectl_meta=info,kubectl_meta_engine=info",
        2 => "info,kubectl_meta=debug,kubectl_meta_engine=debug",
        _ => "debug,kubectl_meta=trace,kubectl_meta_engine=trace",
    }
}

/// The whole `kubectl-meta` program: parse arguments, set up logging, dispatch, map errors to
/// exit codes ([`commands::exit`]; clap's own usage errors exit with 2, like
/// [`Class::Usage`]). The binary's `main` only calls this.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that need neither logging nor the async runtime answer at once (start-up time).
    let offline = match &cli.command {
        Command::Version(args) => Some(commands::version::run(args)),
        Command::Completion(args) => Some(commands::completion::run(args)),
        Command::Complete(args) => Some(commands::completion::run_complete(args)),
        Command::Init(args) => Some(commands::init::run(args)),
        Command::Dev(_)
        | Command::Run(_)
        | Command::Deploy(_)
        | Command::Dryrun(_)
        | Command::Test(_)
        | Command::Sandbox(_)
        | Command::Inspect(_)
        | Command::Replay(_)
        | Command::Flight(_) => None,
    };
    if let Some(result) = offline {
        return report(result);
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Class::Internal.code());
        }
    };
    // Traces of the engine (run, dev) when the OTEL_* environment asks for them.
    let traces = match &cli.command {
        Command::Run(_) | Command::Dev(_) => {
            match telemetry::TraceConfig::from_env(|name| std::env::var(name).ok()) {
                Ok(cfg) => cfg,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(Class::Usage.code());
                }
            }
        }
        _ => None,
    };
    let mut telemetry = {
        // The gRPC exporter is built inside the runtime (it spawns its connection there).
        let _in_runtime = rt.enter();
        match telemetry::init(
            log_filter(cli.global.verbose),
            log_color(&cli),
            traces.as_ref(),
        ) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(Class::Usage.code());
            }
        }
    };
    let cluster = cli.cluster;
    let result = rt.block_on(async {
        match cli.command {
            Command::Sandbox(args) => {
                no_cluster_flags(&cluster, "sandbox", "it is the cluster")?;
                commands::sandbox::run(args).await.map(|()| 0)
            }
            Command::Dev(mut args) => {
                args.cluster = args.cluster.or(cluster);
                commands::dev::run(cli.global.clone(), *args)
                    .await
                    .map(|()| 0)
            }
            Command::Run(mut args) => {
                args.cluster = args.cluster.or(cluster);
                commands::run::run(*args).await.map(|()| 0)
            }
            Command::Deploy(mut args) => {
                args.cluster = args.cluster.or(cluster);
                commands::deploy::run(*args).await.map(|()| 0)
            }
            Command::Dryrun(mut args) => {
                args.cluster = args.cluster.or(cluster);
                args.verbose = cli.global.verbose;
                commands::dryrun::run(*args).await
            }
            Command::Test(mut args) => {
                args.cluster = args.cluster.or(cluster);
                commands::test::run(cli.global.verbose, *args).await
            }
            Command::Inspect(mut args) => {
                args.cluster = args.cluster.or(cluster);
                commands::inspect::run(*args).await.map(|()| 0)
            }
            Command::Replay(args) => {
                no_cluster_flags(&cluster, "replay", "it runs in an in-process sandbox")?;
                commands::replay::run(*args).await
            }
            Command::Flight(args) => commands::flight::run(args, cluster).await.map(|()| 0),
            Command::Version(_)
            | Command::Completion(_)
            | Command::Complete(_)
            | Command::Init(_) => Ok(0),
        }
    });
    // Export the spans still buffered (the runtime is still there for gRPC).
    {
        let _in_runtime = rt.enter();
        telemetry.shutdown();
    }
    report_code(result)
}

/// Refuse cluster flags given to a subcommand that talks to no cluster (`sandbox`, `replay`).
fn no_cluster_flags(cluster: &cli::ClusterArgs, command: &str, why: &str) -> anyhow::Result<()> {
    if cluster.given().is_empty() {
        return Ok(());
    }
    Err(exit::fail(
        Class::Usage,
        format!(
            "{} do(es) not apply to `kubectl meta {command}` ({why}); see kubectl meta {command} --help",
            cluster.given().join(", ")
        ),
    ))
}

/// The exit code for a command's result, printing the error.
fn report(result: anyhow::Result<()>) -> ExitCode {
    report_code(result.map(|()| 0))
}

/// The exit code for a command's result that carries its own success code (`dryrun`: 1 when
/// there are changes, as `kubectl diff`), printing the error.
fn report_code(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::class_of(&e).code())
        }
    }
}
