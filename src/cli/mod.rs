//! Command-line definitions (clap). Plain data only: behaviour lives in [`crate::commands`].

pub mod completion;
pub mod dev;
pub mod sandbox;
pub mod version;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The local dev loop for Metacontroller-style controllers.
#[derive(Debug, Parser)]
#[command(name = "kubectl-meta", bin_name = "kubectl meta", version = version::VERSION_LINE, about, long_about = None)]
pub struct Cli {
    /// Flags every subcommand shares.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand (kubectl's names).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace scope for this request.
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run controller definitions locally: the engine on your machine, hooks served or run locally.
    Dev(Box<dev::DevArgs>),
    /// Run an embedded Kubernetes-compatible API server (kubectl works against it).
    Sandbox(sandbox::SandboxArgs),
    /// Print the version, git commit and target of this build.
    Version(version::VersionArgs),
    /// Write a shell completion script for kubectl-meta (bash, zsh, fish, ...).
    Completion(completion::CompletionArgs),
    /// Complete the words after `kubectl meta` (what the kubectl_complete-meta helper calls).
    #[command(name = "__complete", hide = true)]
    Complete(completion::CompleteArgs),
}
