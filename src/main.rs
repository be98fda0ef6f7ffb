//! The `kubectl-meta` binary: parse arguments, set up logging, dispatch, map errors to exit
//! codes ([`commands::exit`]; clap's own usage errors exit with 2, like [`Class::Usage`]).

use std::process::ExitCode;

use clap::Parser;
use kubectl_meta::cli::ColorArg;
use kubectl_meta::cli::{Cli, Command};
use kubectl_meta::commands;
use kubectl_meta::commands::exit::{self, Class};

/// Log lines (stderr) are colored only on a terminal without `NO_COLOR`, or with
/// `dev --color always`.
fn log_color(cli: &Cli) -> bool {
    use std::io::IsTerminal;
    match &cli.command {
        Command::Dev(args) if args.color == ColorArg::Always => true,
        Command::Dev(args) if args.color == ColorArg::Never => false,
        Command::Dryrun(args) if args.color == ColorArg::Always => true,
        Command::Dryrun(args) if args.color == ColorArg::Never => false,
        Command::Test(args) if args.color == ColorArg::Always => true,
        Command::Test(args) if args.color == ColorArg::Never => false,
        _ => {
            std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

fn init_logging(verbose: u8, color: bool) {
    let default = match verbose {
        // kube's client logs every failed request at ERROR; the engine reports outages itself
        // (once, as an event), so those lines only show from -v on.
        0 => "warn,kube_client=off",
        1 => "info,kubectl_meta=info",
        2 => "info,kubectl_meta=debug",
        _ => "debug,kubectl_meta=trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBECTL_META_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that need neither logging nor the async runtime answer at once (start-up time).
    let offline = match &cli.command {
        Command::Version(args) => Some(commands::version::run(args)),
        Command::Completion(args) => Some(commands::completion::run(args)),
        Command::Complete(args) => Some(commands::completion::run_complete(args)),
        Command::Dev(_)
        | Command::Run(_)
        | Command::Deploy(_)
        | Command::Dryrun(_)
        | Command::Test(_)
        | Command::Sandbox(_)
        | Command::Inspect(_) => None,
    };
    if let Some(result) = offline {
        return report(result);
    }
    init_logging(cli.global.verbose, log_color(&cli));
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Class::Internal.code());
        }
    };
    let cluster = cli.cluster;
    let result = rt.block_on(async {
        match cli.command {
            Command::Sandbox(args) => {
                if cluster.given().is_empty() {
                    commands::sandbox::run(args).await.map(|()| 0)
                } else {
                    Err(exit::fail(
                        Class::Usage,
                        format!(
                            "{} do(es) not apply to `kubectl meta sandbox` (it is the cluster); see kubectl meta sandbox --help",
                            cluster.given().join(", ")
                        ),
                    ))
                }
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
            Command::Version(_) | Command::Completion(_) | Command::Complete(_) => Ok(0),
        }
    });
    report_code(result)
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
