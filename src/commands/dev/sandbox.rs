//! `dev --sandbox`: the in-process API server `dev` runs against, and its kubeconfig file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use kube_sandbox::{Sandbox, SandboxConfig, Storage};

use super::config::DevConfig;

/// The kubeconfig file of a sandbox started by `dev`; one per process unless the user named
/// it, removed at exit when it was ours (two `dev --sandbox` never share one).
pub(super) struct SandboxKubeconfig {
    pub(super) path: PathBuf,
    ours: bool,
}

impl SandboxKubeconfig {
    pub(super) fn remove(self) {
        if self.ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub(super) async fn start_sandbox(cfg: &DevConfig) -> Result<(Sandbox, SandboxKubeconfig)> {
    let storage = match &cfg.args.state {
        Some(d) => Storage::Dir(d.clone()),
        None => Storage::Ephemeral,
    };
    let project = cfg
        .args
        .project
        .as_ref()
        .filter(|p| cfg.args.write_kubeconfig.as_ref() == Some(&p.sandbox_kubeconfig()));
    let kubeconfig = match (&cfg.args.write_kubeconfig, &storage) {
        // The project's `.kubectl-meta/sandbox.kubeconfig`: ours, removed at exit (dryrun and
        // inspect take it as "a dev loop runs").
        (Some(path), _) if project.is_some() => {
            if let Some(p) = project {
                crate::commands::project::ensure_state_dir(p)
                    .with_context(|| format!("creating {}", p.state_dir().display()))?;
            }
            SandboxKubeconfig {
                path: path.clone(),
                ours: true,
            }
        }
        (Some(p), _) => SandboxKubeconfig {
            path: p.clone(),
            ours: false,
        },
        (None, Storage::Dir(d)) => SandboxKubeconfig {
            path: d.join("kubeconfig"),
            ours: false,
        },
        (None, Storage::Ephemeral) => SandboxKubeconfig {
            path: crate::commands::sandbox::data_dir()?
                .join(format!("dev-sandbox-{}.kubeconfig", std::process::id())),
            ours: true,
        },
    };
    let cfg = SandboxConfig {
        storage,
        kubeconfig: Some(kubeconfig.path.clone()),
        ..SandboxConfig::ephemeral()
    };
    let sb = Sandbox::start(cfg).await.context("starting the sandbox")?;
    Ok((sb, kubeconfig))
}
