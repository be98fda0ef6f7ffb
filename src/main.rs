//! The `kubectl-meta` binary: parse arguments, set up logging, dispatch, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use kubectl_meta::cli::{Cli, Command};
use kubectl_meta::commands;

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info,kubectl_meta=info",
        2 => "info,kubectl_meta=debug",
        _ => "debug,kubectl_meta=trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBECTL_META_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that need neither logging nor the async runtime answer at once (start-up time).
    let offline = match &cli.command {
        Command::Version(args) => Some(commands::version::run(args)),
        Command::Completion(args) => Some(commands::completion::run(args)),
        Command::Complete(args) => Some(commands::completion::run_complete(args)),
        Command::Dev(_) | Command::Sandbox(_) => None,
    };
    if let Some(result) = offline {
        return report(result);
    }
    init_logging(cli.global.verbose);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Sandbox(args) => commands::sandbox::run(args).await,
            Command::Dev(args) => commands::dev::run(cli.global.clone(), *args).await,
            Command::Version(_) | Command::Completion(_) | Command::Complete(_) => Ok(()),
        }
    });
    report(result)
}

/// The exit code for a command's result, printing the error.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
