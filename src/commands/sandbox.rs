//! `kubectl meta sandbox`: run the embedded API server in the foreground until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::exit::{self, Class};
use super::interrupts::Interrupts;
use crate::cli::sandbox::SandboxArgs;
use kube_sandbox::{Sandbox, SandboxConfig, SandboxError, Storage, Tunables};

/// The per-user data directory of kubectl-meta (`$XDG_DATA_HOME/kubectl-meta`, else `~/.local/share/kubectl-meta`).
pub fn data_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("kubectl-meta"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("cannot find a data directory: neither XDG_DATA_HOME nor HOME is set; pass --state DIR or --ephemeral with --write-kubeconfig PATH")?;
    Ok(PathBuf::from(home).join(".local/share/kubectl-meta"))
}

/// Turn arguments into a sandbox configuration.
pub fn config(args: &SandboxArgs) -> Result<SandboxConfig> {
    let storage = if args.ephemeral {
        Storage::Ephemeral
    } else {
        Storage::Dir(match &args.state {
            Some(d) => d.clone(),
            None => data_dir()?.join("sandbox"),
        })
    };
    let kubeconfig = match (&args.write_kubeconfig, &storage) {
        (Some(p), _) => p.clone(),
        (None, Storage::Dir(dir)) => dir.join("kubeconfig"),
        (None, Storage::Ephemeral) => data_dir()?.join("sandbox-ephemeral.kubeconfig"),
    };
    let tunables = Tunables {
        kubelet_delay: (!args.no_kubelet).then(|| Duration::from_millis(args.kubelet_delay_ms)),
        pod_run: Duration::from_millis(args.pod_run_ms),
        ..Tunables::default()
    };
    Ok(SandboxConfig {
        listen: args.listen,
        storage,
        kubeconfig: Some(kubeconfig),
        tunables,
        token_auth_file: args.token_auth_file.clone(),
        feature_gates: args.feature_gates.clone().unwrap_or_default(),
        ..SandboxConfig::ephemeral()
    })
}

/// Run until interrupted.
pub async fn run(args: SandboxArgs) -> Result<()> {
    let cfg = config(&args)?;
    // Caught before "listening" is printed: a Ctrl-C right after it still shuts down cleanly.
    let interrupts = Interrupts::install().context("installing the Ctrl-C and SIGTERM handlers")?;
    if !cfg.listen.ip().is_loopback() {
        tracing::warn!(
            "listening on {} which is not loopback: anyone who can reach it and has the token can use the sandbox",
            cfg.listen
        );
    }
    let storage = match &cfg.storage {
        Storage::Ephemeral => "in memory".to_string(),
        Storage::Dir(d) => format!("state in {}", d.display()),
    };
    // A token file that cannot be used is a mistake on the command line (exit 2); it is read
    // before anything else starts.
    let bound = Sandbox::bind(cfg)
        .await
        .map_err(|e| match e {
            SandboxError::TokenFile(_) => exit::tag(
                anyhow::Error::new(e).context("--token-auth-file"),
                Class::Usage,
            ),
            e => anyhow::Error::new(e),
        })
        .context("starting the sandbox")?;
    let kc = bound
        .kubeconfig_path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    println!(
        "sandbox listening on https://{} ({storage}); kubeconfig: {kc}  (export KUBECONFIG={kc})",
        bound.addr()
    );
    let mut sandbox = bound.serve();
    tokio::select! {
        _ = interrupts.first() => {}
        r = sandbox.wait() => return r.context("the sandbox server stopped"),
    }
    eprintln!("shutting down");
    sandbox.shutdown().await;
    Ok(())
}
