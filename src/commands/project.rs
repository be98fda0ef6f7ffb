//! The project file at the command-line edge: `dev`, `test`, `dryrun`, `deploy` and `inspect`
//! look for `kubectl-meta.yaml` in the current directory and its parents ([`crate::project`])
//! and fill every flag that was not given from it: flags always win, field by field, and with
//! no project file nothing changes. Each command says which file it uses on stderr (`using
//! project website (./kubectl-meta.yaml)`). What each field becomes: docs/project-file.md.

use std::path::PathBuf;

use anyhow::Result;

use super::exit::{Class, fail};
use crate::cli::ClusterArgs;
use crate::cli::deploy::DeployArgs;
use crate::cli::dev::DevArgs;
use crate::cli::dryrun::DryrunArgs;
use crate::cli::inspect::InspectArgs;
use crate::cli::test::TestArgs;
use crate::project::{Project, Target};

/// The project file governing the current directory, loaded and checked (said on stderr), or
/// `None`. A project file with a mistake is a usage error naming file, line and field.
pub fn discover() -> Result<Option<Project>> {
    let cwd = std::env::current_dir().map_err(|e| {
        fail(
            Class::Internal,
            format!("cannot read the current directory: {e}"),
        )
    })?;
    let found = Project::discover(&cwd).map_err(|e| fail(Class::Usage, e.to_string()))?;
    if let Some(p) = &found {
        eprintln!("{}", p.using_line());
    }
    Ok(found)
}

/// The project's definition files for a command that also reads the other documents (CRDs
/// and samples): `apply` first (their order is the creation order), then `controllers`.
fn definition_files(p: &Project) -> Vec<PathBuf> {
    p.apply.iter().chain(&p.controllers).cloned().collect()
}

/// Fill `--hook-server`, `--hook-base-url`, `--hook-server-ready` and the server's directory
/// (the project's) of `$args` (`DevArgs`, `TestArgs`: the same fields) from the project's
/// served hook, unless `--hook-server` or `--hook-base-url` was given.
macro_rules! fill_served_hook {
    ($p:expr, $args:expr) => {
        if $args.hook_server.is_none()
            && $args.hook_base_url.is_none()
            && let Some(h) = $p.served_hook()
        {
            $args.hook_server.clone_from(&h.server);
            $args.hook_base_url.clone_from(&h.url);
            $args.hook_server_ready.clone_from(&h.ready);
            $args.hook_server_dir = h.server.as_ref().map(|_| $p.dir.clone());
        }
    };
}

/// `dev`: definitions and `--apply` of the project's objects (unless -f or --from-cluster),
/// the target (unless --sandbox, --kubeconfig, --context or --takeover), the served hook
/// (unless --hook-server or --hook-base-url), the watched paths (unless --watch), `--record`
/// with no value. The builds and the paths never watched are read from `args.project`.
pub fn for_dev(args: &mut DevArgs) -> Result<()> {
    let project = discover()?;
    if args
        .record
        .as_ref()
        .is_some_and(|r| r.as_os_str().is_empty())
    {
        args.record = Some(
            project
                .as_ref()
                .and_then(Project::record_dir)
                .ok_or_else(|| {
                    fail(
                        Class::Usage,
                        match &project {
                            None => "--record needs a DIR outside a project (no kubectl-meta.yaml here or above): --record hook-tests/".to_string(),
                            Some(p) => format!("--record needs a DIR: {} names no `record` or `tests` directory", p.shown),
                        },
                    )
                })?,
        );
    }
    let Some(p) = project else {
        return Ok(());
    };
    if args.defs.is_empty() {
        args.defs.files = definition_files(&p);
        args.apply = args.apply || !p.apply.is_empty();
    }
    let target_given = args.sandbox
        || args.takeover
        || args.cluster.kubeconfig.is_some()
        || args.cluster.context.is_some();
    if !target_given {
        match &p.target {
            Target::Sandbox => {
                args.sandbox = true;
                if args.write_kubeconfig.is_none() && args.state.is_none() {
                    args.write_kubeconfig = Some(p.sandbox_kubeconfig());
                    // The project's sandbox keeps its objects across runs, as a cluster
                    // does: the next `dev` starts from them, and `dryrun`/`inspect` read
                    // them when no dev loop runs.
                    args.state = Some(p.sandbox_state());
                }
            }
            Target::Context { name, kubeconfig } => {
                args.cluster.context = Some(name.clone());
                args.cluster.kubeconfig.clone_from(kubeconfig);
            }
        }
    }
    fill_served_hook!(p, args);
    if args.watch.is_empty() && !args.once && !args.no_watch {
        args.watch = p.watch_paths();
    }
    args.project = Some(p);
    Ok(())
}

/// `test`: the cases of `tests` (unless DIRs are given), the project's definitions with the
/// documents to apply (CRDs for --validate; unless -f or --from-cluster), the served hook
/// (unless --hook-server or --hook-base-url). The builds are read from `args.project`.
pub fn for_test(args: &mut TestArgs) -> Result<()> {
    let Some(p) = discover()? else {
        return Ok(());
    };
    if args.defs.is_empty() {
        args.defs.files = definition_files(&p);
    }
    if args.dirs.is_empty() {
        args.dirs.clone_from(&p.tests);
    }
    fill_served_hook!(p, args);
    args.project = Some(p);
    Ok(())
}

/// `dryrun`: the project's definitions (unless -f or --from-cluster), the served hook's URL
/// (unless --hook-base-url; dryrun starts no server: `dev` runs it), the target (unless
/// --kubeconfig or --context; see [`target_cluster`]).
pub async fn for_dryrun(args: &mut DryrunArgs) -> Result<Option<SavedSandbox>> {
    let Some(p) = discover()? else {
        return Ok(None);
    };
    if args.defs.is_empty() {
        args.defs.files = definition_files(&p);
    }
    if args.hook_base_url.is_none() {
        args.hook_base_url = p.served_hook().and_then(|h| h.url.clone());
    }
    target_cluster(&p, &mut args.cluster, "dryrun").await
}

/// `inspect`: the project's controllers (unless -f), the target (unless --kubeconfig or
/// --context; see [`target_cluster`]).
pub async fn for_inspect(args: &mut InspectArgs) -> Result<Option<SavedSandbox>> {
    let Some(p) = discover()? else {
        return Ok(None);
    };
    if args.files.is_empty() {
        args.files.clone_from(&p.controllers);
    }
    target_cluster(&p, &mut args.cluster, "inspect").await
}

/// `deploy`: the project's controllers (unless -f or --from-cluster). The target is not used:
/// deploying goes to the cluster the flags (or the kubeconfig) name, never to the sandbox.
pub fn for_deploy(args: &mut DeployArgs) -> Result<()> {
    let Some(p) = discover()? else {
        return Ok(());
    };
    if args.defs.is_empty() {
        args.defs.files.clone_from(&p.controllers);
    }
    Ok(())
}

/// An in-process sandbox opened on the project's saved sandbox state for one `dryrun` or
/// `inspect` while no dev loop runs; keep it alive while the command reads it. Dropping it
/// stops the sandbox and removes its kubeconfig.
pub struct SavedSandbox {
    _sandbox: kube_sandbox::Sandbox,
    kubeconfig: PathBuf,
}

impl Drop for SavedSandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// The cluster `dryrun` and `inspect` read, unless --kubeconfig or --context say: the
/// project's context, or for a sandbox target the sandbox of the `kubectl meta dev` running in
/// the project (its kubeconfig in `.kubectl-meta/`); with no dev loop running, the project's
/// sandbox as the last dev run left it (`.kubectl-meta/sandbox`), opened in-process. With
/// neither, a usage error says to run `kubectl meta dev` first: those commands read live
/// objects, and an empty sandbox has none.
async fn target_cluster(
    p: &Project,
    cluster: &mut ClusterArgs,
    command: &str,
) -> Result<Option<SavedSandbox>> {
    if cluster.kubeconfig.is_some() || cluster.context.is_some() {
        return Ok(None);
    }
    match &p.target {
        Target::Context { name, kubeconfig } => {
            cluster.context = Some(name.clone());
            cluster.kubeconfig.clone_from(kubeconfig);
            Ok(None)
        }
        Target::Sandbox => {
            let kubeconfig = p.sandbox_kubeconfig();
            if kubeconfig.is_file() {
                cluster.kubeconfig = Some(kubeconfig);
                cluster.context = Some("sandbox".into());
                return Ok(None);
            }
            let state = p.sandbox_state();
            if !state.is_dir() {
                return Err(fail(
                    Class::Usage,
                    format!(
                        "project {} runs on a sandbox that has no objects yet ({} does not exist): run `kubectl meta dev` (or `kubectl meta dev --once`) in {} first ({command} reads the objects the controllers run on), or pass --kubeconfig/--context",
                        p.name,
                        state.display(),
                        p.dir.display()
                    ),
                ));
            }
            let kubeconfig = p
                .state_dir()
                .join(format!("{command}-{}.kubeconfig", std::process::id()));
            let cfg = kube_sandbox::SandboxConfig {
                storage: kube_sandbox::Storage::Dir(state.clone()),
                kubeconfig: Some(kubeconfig.clone()),
                ..kube_sandbox::SandboxConfig::ephemeral()
            };
            let sandbox = kube_sandbox::Sandbox::start(cfg).await.map_err(|e| {
                fail(
                    Class::Cluster,
                    format!(
                        "opening the project's sandbox state {}: {e}",
                        state.display()
                    ),
                )
            })?;
            eprintln!(
                "no `kubectl meta dev` runs: reading the project's sandbox as the last dev run left it ({})",
                state.display()
            );
            cluster.kubeconfig = Some(kubeconfig.clone());
            cluster.context = Some("sandbox".into());
            Ok(Some(SavedSandbox {
                _sandbox: sandbox,
                kubeconfig,
            }))
        }
    }
}

/// Run the project's hook builds before anything starts (`dev`, `test`), saying so on
/// stderr; a failure is a usage error with the build's output.
pub async fn build_hooks(p: Option<&Project>) -> Result<()> {
    let Some(p) = p else { return Ok(()) };
    for b in p.builds() {
        eprintln!("building hook {}: {}", b.hook, b.command);
        b.run()
            .await
            .map_err(|e| fail(Class::Usage, e.to_string()))?;
    }
    Ok(())
}

/// Create the project's `.kubectl-meta/` (with a `.gitignore` keeping it out of git).
pub fn ensure_state_dir(p: &Project) -> std::io::Result<()> {
    let dir = p.state_dir();
    std::fs::create_dir_all(&dir)?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(
            ignore,
            "# local state of kubectl meta (sandbox kubeconfig); not for git\n*\n",
        )?;
    }
    Ok(())
}
