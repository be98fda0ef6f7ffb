//! `dev`'s flags, checked once before anything starts and turned into the values the run uses
//! ([`DevConfig`]), as ripgrep turns its low-level arguments into a validated configuration.

use super::{DEFAULT_ONCE_TIMEOUT, DEV_EXAMPLE};
use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cli::ColorArg;
use crate::cli::dev::{DevArgs, OutputArg};
use crate::commands::definitions::check_http_url;
use crate::commands::{definitions, engine_start};
use crate::hooks::server::ServerConfig;
use crate::k8s::client;
use crate::spec::ControllerSelector;

/// `dev`'s flags once checked, with what the run derives from them computed once. Built by
/// [`DevConfig::new`] before anything starts (no sandbox, connection or informer exists yet);
/// every step of the run reads it instead of the raw flags' strings.
pub(super) struct DevConfig {
    /// The flags as given (for the plain values: names, paths, booleans).
    pub args: DevArgs,
    /// `-l`, parsed.
    pub selector: Option<ControllerSelector>,
    /// The client's rate limits (`--api-qps`, `--api-burst`).
    pub limits: client::ClientLimits,
    /// With `--once`: how long to wait for convergence (`--timeout`, default
    /// [`DEFAULT_ONCE_TIMEOUT`]).
    pub once_timeout: Option<Duration>,
    /// `--hook-server`: the managed server and the base URL whose calls wait for it.
    pub hook_server: Option<(ServerConfig, String)>,
    /// Whether the terminal UI runs (else the event log).
    pub tui: bool,
    /// Whether the human event log is colored.
    pub color: bool,
}

impl DevConfig {
    /// Check every flag and path that can be checked without a cluster, and derive the run's
    /// values from them; a mistake is a usage error before anything starts.
    pub(super) fn new(args: DevArgs) -> Result<DevConfig> {
        let selector = definitions::check(&args.defs, "run", DEV_EXAMPLE)?;
        validate(&args)?;
        let limits = engine_start::check(&args.engine)?;
        let mut hook_server = definitions::hook_server_config(
            args.hook_server.as_deref(),
            args.hook_base_url.as_deref(),
            args.hook_server_ready.as_deref(),
        )?;
        // A server the project file names runs in the project directory.
        if let (Some((server, _)), Some(dir)) = (&mut hook_server, &args.hook_server_dir) {
            server.working_dir = Some(dir.clone());
        }
        let stdout_is_tty = std::io::stdout().is_terminal();
        Ok(DevConfig {
            selector,
            limits,
            once_timeout: args
                .once
                .then(|| Duration::from_secs(args.timeout.unwrap_or(DEFAULT_ONCE_TIMEOUT))),
            hook_server,
            tui: use_tui(&args, stdout_is_tty),
            color: color_wanted(args.color, stdout_is_tty),
            args,
        })
    }
}

/// Check the other flags and paths that can be checked without a cluster (the definition
/// flags are checked by [`definitions::check`] before), so that a mistake is reported before
/// anything starts.
fn validate(args: &DevArgs) -> Result<()> {
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
    if let Some(dir) = &args.record {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--record {}: cannot create it", dir.display()))?;
    }
    Ok(())
}

/// The TUI runs unless `--no-tui`, `-o json`, `--once`, or stdout is not a terminal.
fn use_tui(args: &DevArgs, stdout_is_tty: bool) -> bool {
    !args.no_tui && !args.once && args.output == OutputArg::Human && stdout_is_tty
}

/// Whether to color the human event log.
fn color_wanted(arg: ColorArg, stdout_is_tty: bool) -> bool {
    arg.resolve(stdout_is_tty)
}
