//! `kubectl meta inspect`: the CLI edge of [`crate::inspect`]. Validates the arguments, connects
//! (the same kubeconfig / context / namespace handling as `dev`), builds the graph, prints it
//! (tree, wide, JSON, YAML), and with `--watch` redraws it whenever a watched type changes.
//!
//! Data goes to stdout only; notes (forbidden types) and errors go to stderr. An error is one
//! line and exits with its class ([`super::exit`]): 2 bad input (unknown type, bad argument,
//! kubeconfig, definitions, an object that does not exist), 3 the API server refused or failed.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;

use super::exit::{self, Class};
use super::interrupts::Interrupts;
use crate::cli::inspect::{InspectArgs, InspectOutput};
use crate::inspect::api::ApiType;
use crate::inspect::render_tree::{self, TreeStyle};
use crate::inspect::{
    Catalog, ControllerSource, Direction, Fetcher, Graph, InspectError, InspectRequest, graph,
    render_json,
};
use crate::k8s::client::ClientError;

/// Quiet time after a watch event before redrawing (coalesces bursts).
const REDRAW_DEBOUNCE: Duration = Duration::from_millis(150);

/// Run `kubectl meta inspect`; on failure print one line and exit with the error's class.
pub async fn run(mut args: InspectArgs) -> Result<()> {
    // A project file fills the flags not given (flags win).
    // A sandbox opened on the project's saved state lives until the command ends.
    let _saved = super::project::for_inspect(&mut args).await?;
    inspect(args).await.map_err(|e| {
        let class = class_of_inspect(&e);
        exit::tag(e, class)
    })
}

/// The exit class of an inspect failure (README, "Exit codes"): a named object that does not
/// exist is usage (2), as dryrun's unknown PARENT; the API server's refusals are cluster (3).
fn class_of_inspect(e: &anyhow::Error) -> Class {
    if let Some(i) = e.downcast_ref::<InspectError>() {
        return match i {
            InspectError::UnknownType { .. }
            | InspectError::BadArgument(_)
            | InspectError::Spec(_)
            | InspectError::NotFound { .. } => Class::Usage,
            InspectError::Forbidden { .. } | InspectError::Api { .. } => Class::Cluster,
        };
    }
    if e.downcast_ref::<ClientError>().is_some() {
        return Class::Usage;
    }
    Class::Internal
}

/// `TYPE/NAME` or `TYPE NAME`.
fn split_object(words: &[String]) -> Result<(String, String), InspectError> {
    let bad = |m: String| InspectError::BadArgument(m);
    match words {
        [one] => match one.split_once('/') {
            Some((t, n)) if !t.is_empty() && !n.is_empty() && !n.contains('/') => {
                Ok((t.to_string(), n.to_string()))
            }
            _ => Err(bad(format!(
                "{one:?} is not TYPE/NAME; give the object as e.g. pod/my-pod or `pod my-pod`"
            ))),
        },
        [t, n] if !t.contains('/') && !n.contains('/') && !t.is_empty() && !n.is_empty() => {
            Ok((t.clone(), n.clone()))
        }
        _ => Err(bad(format!(
            "expected TYPE/NAME or TYPE NAME, got {:?}",
            words.join(" ")
        ))),
    }
}

async fn inspect(args: InspectArgs) -> Result<()> {
    let (type_name, name) = split_object(&args.object)?;
    let conn = super::engine_start::connect_kubeconfig(&args.cluster, Default::default()).await?;
    let req = InspectRequest {
        type_name,
        name,
        namespace: conn.context.namespace.clone(),
        direction: if args.up {
            Direction::Up
        } else if args.down {
            Direction::Down
        } else {
            Direction::Both
        },
        depth: args.depth,
        controllers: if args.files.is_empty() {
            ControllerSource::Cluster
        } else {
            ControllerSource::Files(args.files.clone())
        },
        all_types: args.all_types,
    };
    let color = args.color.resolve(std::io::stdout().is_terminal());
    colored::control::set_override(color);
    let fetcher = Fetcher::new(conn.client.clone());
    let catalog = Catalog::discover(&fetcher).await?;
    if !args.watch {
        let g = graph::build(&fetcher, &catalog, &req).await?;
        print(&g, &args, color, false)?;
        if args.stats {
            print_stats(&fetcher);
        }
        return Ok(());
    }
    watch(&fetcher, &catalog, &req, &args, color).await
}

fn print(g: &Graph, args: &InspectArgs, color: bool, redraw: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match args.output {
        InspectOutput::Json => {
            let v = render_json::to_value(g);
            if args.watch {
                writeln!(out, "{}", serde_json::to_string(&v)?)?;
            } else {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            }
        }
        InspectOutput::Yaml => {
            let v = render_json::to_value(g);
            if args.watch {
                writeln!(out, "---")?;
            }
            let text = serde_saphyr::to_string(&v).map_err(|e| anyhow!("writing YAML: {e}"))?;
            write!(out, "{text}")?;
        }
        InspectOutput::Tree | InspectOutput::Wide => {
            let style = TreeStyle {
                wide: args.output == InspectOutput::Wide,
                color,
                now: jiff::Timestamp::now(),
            };
            if redraw {
                // Home + clear: redraw in place.
                write!(out, "\x1b[H\x1b[2J")?;
            }
            write!(out, "{}", render_tree::render(g, &style))?;
            if args.watch && !redraw {
                writeln!(out)?;
            }
        }
    }
    out.flush()?;
    drop(out);
    for line in render_tree::footer(g) {
        eprintln!("{line}");
    }
    Ok(())
}

fn print_stats(fetcher: &Fetcher) {
    let s = fetcher.stats();
    eprintln!(
        "stats: {} requests, {} bytes read{}",
        s.requests(),
        s.bytes(),
        if s.fell_back_to_full_lists() {
            " (the server refused metadata-only lists: full objects were listed)"
        } else {
            ""
        }
    );
}

/// The `(type, namespace)` pairs whose changes can change the graph.
fn watch_set(g: &Graph, catalog: &Catalog) -> Vec<(ApiType, Option<String>)> {
    let mut set: Vec<(ApiType, Option<String>)> = g.listed.clone();
    for n in g.nodes.values() {
        if let Some(t) = catalog.by_kind(&n.api_version, &n.kind) {
            let ns = n.namespace.clone().filter(|_| t.namespaced);
            if !set
                .iter()
                .any(|(s, sns)| s.resource == t.resource && (sns.is_none() || *sns == ns))
            {
                set.push((t.clone(), ns));
            }
        }
    }
    set.retain(|(t, _)| t.watchable());
    set
}

async fn watch(
    fetcher: &Fetcher,
    catalog: &Catalog,
    req: &InspectRequest,
    args: &InspectArgs,
    color: bool,
) -> Result<()> {
    // Ctrl-C ends the watch at any point, a slow read of the graph included.
    let interrupts = Interrupts::install().context("installing the Ctrl-C handler")?;
    tokio::select! {
        r = watch_until_error(fetcher, catalog, req, args, color) => r,
        _ = interrupts.first() => Ok(()),
    }
}

/// Redraw on every change until the object is gone for good (an error).
async fn watch_until_error(
    fetcher: &Fetcher,
    catalog: &Catalog,
    req: &InspectRequest,
    args: &InspectArgs,
    color: bool,
) -> Result<()> {
    let redraw = std::io::stdout().is_terminal()
        && matches!(args.output, InspectOutput::Tree | InspectOutput::Wide);
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut watching: Vec<(ApiType, Option<String>)> = Vec::new();
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    loop {
        match graph::build(fetcher, catalog, req).await {
            Ok(g) => {
                print(&g, args, color, redraw)?;
                let wanted = watch_set(&g, catalog);
                if wanted != watching {
                    for t in tasks.drain(..) {
                        t.abort();
                    }
                    for (t, ns) in &wanted {
                        tasks.push(spawn_watch(
                            fetcher.client().clone(),
                            t,
                            ns.as_deref(),
                            tx.clone(),
                        ));
                    }
                    watching = wanted;
                }
            }
            // The object may come back (or its type be created): keep watching what we had.
            Err(e) if watching.is_empty() => return Err(e.into()),
            Err(e) => eprintln!("error: {e}"),
        }
        if rx.recv().await.is_none() {
            break;
        }
        // Coalesce a burst of events into one redraw.
        loop {
            tokio::select! {
                got = rx.recv() => if got.is_none() { break },
                () = tokio::time::sleep(REDRAW_DEBOUNCE) => break,
            }
        }
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

/// Watch the metadata of one type; every change (not the initial listing) sends a tick.
fn spawn_watch(
    client: kube::Client,
    ty: &ApiType,
    namespace: Option<&str>,
    tx: mpsc::UnboundedSender<()>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ty.resource),
        None => Api::all_with(client, &ty.resource),
    };
    tokio::spawn(async move {
        let mut stream =
            std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        while let Some(ev) = stream.next().await {
            if let Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) = ev
                && tx.send(()).is_err()
            {
                return;
            }
        }
    })
}
