//! Where controller definitions come from, for every command that runs or plans controllers
//! (`dev`, `dryrun`, `test`): the `-f/-R` files, `--from-cluster`, the `-l` selector
//! ([`crate::cli::DefinitionArgs`]), checked before anything starts; and what the definitions
//! need from the cluster before a hook can be called (the API server answering, the secured
//! webhooks' Secrets and ConfigMaps).

use anyhow::{Context, Result, anyhow, bail};
use kube::api::{Api, DynamicObject};

use super::exit::{Class, Classify, fail};
use crate::cli::DefinitionArgs;
use crate::hooks::endpoint;
use crate::hooks::server::{Readiness, ServerConfig, readiness_for};
// The kinds a definition can be read from the cluster as, the same as `run` reads.
use crate::incluster::sources::CLUSTER_KINDS;
use crate::k8s::client::Connection;
use crate::k8s::discovery::Discovery;
use crate::spec::{self, ControllerDef, ControllerSelector, Source};

/// Check the definition flags without a cluster: something to `verb` (else a usage error
/// showing `example`), every `-f` path exists, and `-l` parses (returned).
pub fn check(
    args: &DefinitionArgs,
    verb: &str,
    example: &str,
) -> Result<Option<ControllerSelector>> {
    if args.is_empty() {
        bail!(
            "nothing to {verb}: pass controller definitions with -f FILE|DIR, or --from-cluster NAME (try: {example})"
        );
    }
    for path in &args.files {
        if !path.exists() {
            bail!("-f {}: no such file or directory", path.display());
        }
    }
    Ok(args
        .selector
        .as_deref()
        .map(ControllerSelector::parse)
        .transpose()?)
}

/// The definitions of the `-f` files, filtered by `selector`. With `--from-cluster`, the files
/// may hold only other documents (the definitions come from the cluster).
pub fn load_files(
    args: &DefinitionArgs,
    selector: Option<&ControllerSelector>,
) -> Result<spec::Loaded> {
    let mut loaded = if args.files.is_empty() {
        spec::Loaded::default()
    } else if args.from_cluster.is_empty() {
        spec::load_paths_with(&args.files, args.recursive).class(Class::Usage)?
    } else {
        spec::load_documents_with(&args.files, args.recursive).class(Class::Usage)?
    };
    // -l: only the definitions whose labels match (those read with --from-cluster are
    // filtered once read).
    if let Some(sel) = selector {
        loaded.controllers = select_controllers(
            sel,
            std::mem::take(&mut loaded.controllers),
            !args.from_cluster.is_empty(),
        )
        .class(Class::Usage)?;
    }
    Ok(loaded)
}

/// Read the `--from-cluster` definitions (filtered by `selector`) into `loaded`; returns their
/// names. Fails when there is no definition at all.
pub async fn add_from_cluster(
    args: &DefinitionArgs,
    conn: &Connection,
    discovery: &Discovery,
    selector: Option<&ControllerSelector>,
    loaded: &mut spec::Loaded,
) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut read = Vec::new();
    for name in &args.from_cluster {
        let def = read_from_cluster(&conn.client, discovery, name)
            .await
            .class(Class::Usage)?;
        names.push(def.name().to_string());
        read.push(def);
    }
    if let Some(sel) = selector
        && !read.is_empty()
    {
        read = select_controllers(sel, read, !loaded.controllers.is_empty()).class(Class::Usage)?;
    }
    loaded.controllers.extend(read);
    if loaded.controllers.is_empty() {
        return Err(fail(
            Class::Usage,
            "no controller definitions found in the given files",
        ));
    }
    Ok(names)
}

/// The API server answers at all (else nothing below can work, and the error would come from
/// whatever happens to ask first).
pub async fn check_reachable(conn: &Connection) -> Result<()> {
    conn.client.apiserver_version().await.map_err(|e| {
        fail(
            Class::Cluster,
            format!(
                "cannot reach the API server of context {}: {}",
                conn.context.name,
                crate::k8s::kube_error_message(&e)
            ),
        )
    })?;
    Ok(())
}

/// The definitions `sel` selects; the others are named on stderr. Selecting nothing is an
/// error unless `more_to_come` (definitions read later may match).
pub fn select_controllers(
    sel: &ControllerSelector,
    defs: Vec<ControllerDef>,
    more_to_come: bool,
) -> Result<Vec<ControllerDef>> {
    let picked = match sel.select(defs) {
        Ok(p) => p,
        Err(spec::ControllerSelectorError::NothingSelected { skipped, .. }) if more_to_come => {
            spec::Selection {
                selected: Vec::new(),
                skipped,
            }
        }
        Err(e) => return Err(e.into()),
    };
    if !picked.skipped.is_empty() {
        eprintln!(
            "note: -l {:?} leaves out {}",
            sel.as_str(),
            picked.skipped.join(", ")
        );
    }
    Ok(picked.selected)
}

/// `url` must be an absolute `http://` or `https://` URL with a host.
pub fn check_http_url(flag: &str, url: &str) -> Result<()> {
    let parsed = reqwest::Url::parse(url);
    let ok = parsed
        .as_ref()
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    if !ok {
        bail!(
            "{flag} {url}: not an http:// or https:// URL with a host (for example http://{}:8080)",
            if url.contains("localhost") {
                "localhost"
            } else {
                "127.0.0.1"
            }
        );
    }
    Ok(())
}

/// The managed hook server from `--hook-server COMMAND` (`dev`, `test`), with the base URL
/// whose calls wait for it: where it listens comes from `--hook-base-url`, else from
/// `--hook-server-ready`, which also says when it is ready (default: its port accepts
/// connections).
pub fn hook_server_config(
    command: Option<&str>,
    base_url: Option<&str>,
    ready: Option<&str>,
) -> Result<Option<(ServerConfig, String)>> {
    let Some(command) = command else {
        return Ok(None);
    };
    let base = match (base_url, ready) {
        (Some(b), _) => b.to_string(),
        (None, Some(ready)) => origin(ready).ok_or_else(|| {
            anyhow!("--hook-server-ready {ready}: not an http:// URL with a host and port")
        })?,
        (None, None) => bail!(
            "--hook-server needs to know where the server listens: pass --hook-base-url http://127.0.0.1:PORT (webhook URLs are pointed there) or --hook-server-ready http://127.0.0.1:PORT/healthz"
        ),
    };
    let readiness = match ready {
        Some(url) => Readiness::Http(url.to_string()),
        None => readiness_for(&base).ok_or_else(|| {
            anyhow!("--hook-base-url {base}: not an http:// URL with a host; cannot tell when the hook server is ready")
        })?,
    };
    Ok(Some((ServerConfig::new(command, readiness), base)))
}

/// `http://host:port` of a URL.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    let host = u.host_str()?;
    let port = u.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", u.scheme()))
}

/// Read the Secrets and ConfigMaps the webhooks' connection settings reference and resolve
/// them (see [`endpoint`]). With `stand_in` (`dev --apply`, and `dryrun`, which applies nothing
/// but plans as if the files were applied), the documents of the loaded files stand in for
/// objects that do not exist yet (and replace existing ones with `overwrite`), so one
/// directory can hold a secured hook's whole setup. Each secured hook is named on stderr with
/// where its settings come from (never their values).
///
/// With `wait_for_missing` (`dev`), a controller whose Secrets or ConfigMaps do not exist yet
/// is not an error: the engine says what is missing and how to create it (an `info` event),
/// and starts that controller when they appear (see
/// the engine's `runtime::references`). Other problems (a missing key, a bad PEM) are
/// errors either way.
pub async fn resolve_endpoints(
    loaded: &spec::Loaded,
    conn: &Connection,
    stand_in: bool,
    overwrite: bool,
    wait_for_missing: bool,
) -> Result<Vec<endpoint::ResolvedController>> {
    let keys = endpoint::references(&loaded.controllers);
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let docs: Vec<serde_json::Value> = if stand_in {
        loaded.others.iter().map(|d| d.value.clone()).collect()
    } else {
        Vec::new()
    };
    let data = endpoint::RefData::read(
        &conn.client,
        &keys,
        &docs,
        &conn.context.namespace,
        overwrite,
    )
    .await
    .class(Class::Cluster)?;
    let mut resolved = Vec::new();
    let mut problems = Vec::new();
    for def in &loaded.controllers {
        match endpoint::resolve(def, &data) {
            Ok(r) => resolved.push(r),
            Err(_)
                if wait_for_missing
                    && !data
                        .missing(&endpoint::references(std::slice::from_ref(def)))
                        .is_empty() => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Err(fail(Class::Usage, problems.join("\n")));
    }
    for line in resolved
        .iter()
        .flat_map(endpoint::ResolvedController::describe)
    {
        eprintln!("{line}");
    }
    Ok(resolved)
}

/// Read `NAME` (or `KIND/NAME`, e.g. `decoratorcontroller/foo`) from the cluster: a
/// CompositeController, DecoratorController or MapController object.
pub async fn read_from_cluster(
    client: &kube::Client,
    discovery: &Discovery,
    arg: &str,
) -> Result<ControllerDef> {
    let (wanted, name) = match arg.split_once('/') {
        Some((k, n)) => {
            let k = k.to_ascii_lowercase();
            let Some(kind) = CLUSTER_KINDS
                .iter()
                .find(|(kind, plural)| k == kind.to_ascii_lowercase() || k == *plural)
            else {
                bail!(
                    "--from-cluster {arg}: {k} is not a kind that can be read from the cluster; use compositecontroller/NAME, decoratorcontroller/NAME or mapcontroller/NAME"
                );
            };
            (vec![*kind], n)
        }
        None => (CLUSTER_KINDS.to_vec(), arg),
    };
    let mut found = Vec::new();
    let mut apis = 0;
    for (kind, plural) in &wanted {
        let Ok(info) = discovery
            .resolve("metacontroller.k8s.io/v1alpha1", plural)
            .await
        else {
            continue;
        };
        apis += 1;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
        if let Some(obj) = api
            .get_opt(name)
            .await
            .class(Class::Cluster)
            .with_context(|| format!("--from-cluster {arg}: reading the {kind}"))?
        {
            found.push((*kind, obj));
        }
    }
    if apis == 0 {
        bail!(
            "--from-cluster {arg}: the cluster has no Metacontroller API (kubectl api-resources --api-group metacontroller.k8s.io); is Metacontroller installed?"
        );
    }
    let kinds: Vec<&str> = wanted.iter().map(|(k, _)| *k).collect();
    match found.len() {
        0 => bail!(
            "--from-cluster {arg}: no {} named {name} on this cluster (kubectl get {})",
            kinds.join(" or "),
            wanted.iter().map(|(_, p)| *p).collect::<Vec<_>>().join(",")
        ),
        1 => {}
        _ => bail!(
            "--from-cluster {arg}: {} are all named {name}; say which with KIND/{name} (e.g. compositecontroller/{name})",
            found
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    }
    let (kind, obj) = found.remove(0);
    let value = serde_json::to_value(&obj).with_context(|| format!("encoding the {kind}"))?;
    Ok(spec::parse_controller(
        &value,
        Source::cluster(&kind.to_ascii_lowercase(), name),
    )?)
}

/// Does an object of the definition's kind and name exist on the cluster (an in-cluster
/// Metacontroller, or `kubectl meta run`, may run it)?
pub async fn in_cluster_controller_exists(
    client: &kube::Client,
    discovery: &Discovery,
    def: &ControllerDef,
) -> bool {
    let Some((_, plural)) = CLUSTER_KINDS.iter().find(|(k, _)| *k == def.kind()) else {
        return false;
    };
    let Ok(info) = discovery
        .resolve("metacontroller.k8s.io/v1alpha1", plural)
        .await
    else {
        return false;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
    matches!(api.get_opt(def.name()).await, Ok(Some(_)))
}
