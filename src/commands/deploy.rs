//! `kubectl meta deploy`: render (or apply) what running the definitions in a cluster takes
//! ([`crate::deploy::render`]). Definitions from `-f` (rendered as a ConfigMap) or
//! `--from-cluster` (read from the cluster, where they stay); `-o yaml|json` on stdout, or
//! `--apply` / `--dry-run=server` (server-side apply with the field manager
//! [`FIELD_MANAGER`]).

use std::time::Duration;

use anyhow::{Result, anyhow, bail};

use super::definitions::{self, check_reachable};
use super::engine_start::connect_kubeconfig;
use super::exit::{Class, Classify, fail};
use crate::cli::ClusterArgs;
use crate::cli::deploy::{DeployArgs, DeployOutput};
use crate::deploy::{self, DeployConfig, rbac};
use crate::k8s::client::{self, ClientLimits};
use crate::k8s::discovery::Discovery;
use crate::k8s::manifests;

/// The field manager of `deploy --apply`.
pub const FIELD_MANAGER: &str = "kubectl-meta-deploy";

/// The namespace deployed to without `-n`.
pub const DEFAULT_NAMESPACE: &str = "kubectl-meta";

/// Run `kubectl meta deploy`.
pub async fn run(mut args: DeployArgs) -> Result<()> {
    // A project file fills the flags not given (flags win).
    super::project::for_deploy(&mut args)?;
    let selector = definitions::check(
        &args.defs,
        "deploy",
        "kubectl meta deploy -f examples/hello-world/",
    )
    .class(Class::Usage)?;
    let related =
        deploy::parse_related(&args.related).map_err(|e| fail(Class::Usage, e.to_string()))?;
    if args.replicas < 1 {
        return Err(fail(Class::Usage, "--replicas must be at least 1"));
    }
    let namespace = args
        .cluster
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut loaded = definitions::load_files(&args.defs, selector.as_ref())?;
    let write = args.apply || args.dry_run.is_some();
    let conn = if write || !args.defs.from_cluster.is_empty() {
        let cluster = ClusterArgs {
            namespace: Some(namespace.clone()),
            ..args.cluster.clone()
        };
        let c = connect_kubeconfig(&cluster, ClientLimits::default())
            .await
            .class(Class::Usage)?;
        check_reachable(&c).await?;
        Some(c)
    } else {
        None
    };
    if let Some(c) = &conn
        && !args.defs.from_cluster.is_empty()
    {
        let discovery = Discovery::new(c.client.clone());
        definitions::add_from_cluster(&args.defs, c, &discovery, selector.as_ref(), &mut loaded)
            .await?;
    }
    if loaded.controllers.is_empty() {
        return Err(fail(
            Class::Usage,
            "no controller definitions found in the given files",
        ));
    }
    for name in related.keys() {
        match loaded.controllers.iter().find(|d| d.name() == name) {
            None => {
                let known: Vec<&str> = loaded.controllers.iter().map(|d| d.name()).collect();
                return Err(fail(
                    Class::Usage,
                    format!(
                        "--related {name}=...: no controller {name} among the definitions ({})",
                        known.join(", ")
                    ),
                ));
            }
            Some(d) if !rbac::has_customize(d) => {
                return Err(fail(
                    Class::Usage,
                    format!(
                        "--related {name}=...: {name} has no customize hook, so it reads no related objects; remove the flag"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    for d in loaded
        .controllers
        .iter()
        .filter(|d| rbac::has_customize(d) && !related.contains_key(d.name()))
    {
        eprintln!(
            "note: {} has a customize hook: the related resources it asks for are chosen at run time; name each with --related {}=RESOURCE[.GROUP] (get/list/watch in ClusterRole {}:{namespace}:{})",
            d.name(),
            d.name(),
            deploy::APP,
            d.name()
        );
    }
    for line in left_out(&loaded.others)
        .into_iter()
        .chain(exec_hook_warnings(&loaded.controllers, &args.image))
    {
        eprintln!("{line}");
    }
    let cfg = DeployConfig {
        namespace: namespace.clone(),
        image: args.image.clone(),
        replicas: args.replicas,
        from_files: args.defs.from_cluster.is_empty(),
        selector: args.defs.selector.clone(),
        related,
        grafana_dashboard: args.grafana_dashboard,
        prometheus_rule: args.prometheus_rule,
        sharded: args.sharded,
    };
    let objects = deploy::render(&loaded.controllers, &cfg);
    match conn {
        Some(c) if write => apply(&c, &namespace, &objects, args.dry_run.is_some()).await,
        _ => print(&objects, args.output),
    }
}

/// A note per document of the `-f` files that is not a controller definition: deploy renders
/// what runs the controllers, not the API they serve (a CRD is the user's to install, before
/// the controller, with the access it takes) nor the objects they act on (a sample parent).
fn left_out(others: &[crate::spec::Document]) -> Vec<String> {
    others
        .iter()
        .map(|d| {
            let kind = d.value["kind"].as_str().unwrap_or("(no kind)");
            let meta = &d.value["metadata"];
            let name = match (meta["namespace"].as_str(), meta["name"].as_str()) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.to_string(),
                _ => String::new(),
            };
            let file = d
                .source
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let why = if kind == "CustomResourceDefinition" {
                "a CRD is yours to install before the controller runs (kubectl apply -f it; deploy renders no API)"
            } else {
                "not a controller definition: deploy renders what runs the controllers, not the objects they act on (apply it yourself once they run)"
            };
            format!("note: left out: {kind} {name} ({file}): {why}")
        })
        .collect()
}

/// A warning per exec hook when the image is the default one: it holds kubectl-meta alone
/// (distroless: no shell, no interpreter, not the hook's files), so `python3 hook.py` cannot
/// start there.
fn exec_hook_warnings(defs: &[crate::spec::ControllerDef], image: &str) -> Vec<String> {
    if image != crate::cli::deploy::DEFAULT_IMAGE {
        return Vec::new();
    }
    let mut out = Vec::new();
    for d in defs {
        for (hook, h) in d.hooks() {
            let Some(exec) = &h.exec else { continue };
            let program = exec.command.first().map(String::as_str).unwrap_or_default();
            out.push(format!(
                "warning: {} {}'s {hook} hook runs `{}` (exec), which cannot run in the default image {image} (distroless: kubectl-meta alone, no `{program}`, not the hook's files); build an image with kubectl-meta, the hook's runtime and its files (FROM an image with {program}, COPY the kubectl-meta binary and the hook, ENV KUBECTL_META_HOOK_DIR=<where the hook is>: the definitions are mounted from a ConfigMap elsewhere) and pass it with --image, or serve the hook as a webhook",
                d.kind(),
                d.name(),
                exec.command.join(" "),
            ));
        }
    }
    out
}

/// Print the objects: YAML documents, or a `v1` `List` as JSON.
fn print(objects: &[serde_json::Value], output: DeployOutput) -> Result<()> {
    let text = match output {
        DeployOutput::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            let mut s = serde_json::to_string_pretty(&list)?;
            s.push('\n');
            s
        }
        DeployOutput::Yaml => {
            let mut s = String::new();
            for o in objects {
                s.push_str("---\n");
                s.push_str(&serde_saphyr::to_string(o).map_err(|e| anyhow!("writing YAML: {e}"))?);
            }
            s
        }
    };
    super::write_stdout(text.as_bytes())
}

/// Server-side apply every object (or a server-side dry run); say what was done on stderr.
async fn apply(
    conn: &client::Connection,
    namespace: &str,
    objects: &[serde_json::Value],
    dry_run: bool,
) -> Result<()> {
    let discovery = Discovery::new(conn.client.clone());
    let docs: Vec<(String, serde_json::Value)> = objects
        .iter()
        .map(|o| ("deploy".to_string(), o.clone()))
        .collect();
    let mode = manifests::ApplyMode {
        overwrite: true,
        field_manager: FIELD_MANAGER,
        dry_run,
    };
    let done = manifests::apply_documents(
        &conn.client,
        &discovery,
        namespace,
        &docs,
        Duration::from_secs(30),
        &mode,
    )
    .await
    .class(Class::Cluster)?;
    let suffix = if dry_run { " (server dry run)" } else { "" };
    for (object, _) in &done {
        eprintln!("applied {object}{suffix}");
    }
    if done.len() != objects.len() {
        bail!("applied {} of {} objects", done.len(), objects.len());
    }
    Ok(())
}
