//! `kubectl meta flight` arguments: the flight recorder of a `kubectl meta run` pod.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ClusterArgs;

/// Arguments of `kubectl meta flight`.
#[derive(Debug, Clone, Args)]
pub struct FlightArgs {
    /// What to do with the recording.
    #[command(subcommand)]
    pub command: FlightCommand,
}

/// `kubectl meta flight` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum FlightCommand {
    /// Fetch the flight recording of a `kubectl meta run` pod through the API server's pod proxy
    /// (GET /debug/flight on run's --http-addr; docs/flight-recorder.md).
    Dump(FlightDumpArgs),
}

/// Arguments of `kubectl meta flight dump`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta flight dump my-controller-7d9f-abcde -n my-controller > flight.json\n  \
    kubectl meta flight dump my-controller-7d9f-abcde -n my-controller -o flight.json\n  \
    kubectl meta flight dump deploy/my-controller -n my-controller -o flight.json\n  \
    kubectl meta flight dump run-0 -n ops --port 8080      (run's --http-addr port)\n\n\
    Needs `get` on pods and pods/proxy in the namespace (and on deployments for deploy/NAME).")]
pub struct FlightDumpArgs {
    /// The pod running `kubectl meta run` (or deploy/NAME: a Running pod of a Deployment
    /// `kubectl meta deploy` made).
    #[arg(value_name = "POD")]
    pub pod: String,
    /// Which cluster to read.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Write the recording to FILE (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The pod's port serving run's --http-addr (default: its container port named `http`, as
    /// `kubectl meta deploy` names it).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
}
