//! `kubectl meta dryrun`: what one sync of each parent would do, as a diff, writing nothing.
//!
//! Order of work: check every flag -> load and validate the definitions -> connect (context
//! read once) -> per controller, read live state once and plan every selected parent
//! ([`crate::dryrun::compose`]) -> `--against`: send the same hook requests to the other
//! version and compare the answers -> `--server`: dry-run each create and update on the API
//! server -> print (diffs, or `-o json`) -> exit 0 (no changes), 1 (changes) or an error class.
//! `--simulate` reads what each selected parent's sync observes (no sync hook call) and hands
//! that to [`crate::dryrun::simulate`].

use std::io::IsTerminal;

use anyhow::{Result, bail};

use super::definitions;
use super::engine_start::hook_bench;
use super::exit::{Class, Classify, fail};
use crate::cli::dryrun::{DryrunArgs, DryrunOutput};
use crate::dryrun::compose::{Composer, ParentFailure, Selection};
use crate::dryrun::render::{self, Action, RenderOptions, ServerCheck, Shown, Summary};
use crate::dryrun::{server, simulate};
use crate::engine::LiveReader;
use crate::engine::error::SyncError;
use crate::engine::events::EventBus;
use crate::engine::plan::answer::{AnswerContext, answer_view, differences};
use crate::engine::plan::child::ChildType;
use crate::engine::{EngineContext, EngineOptions, HookBench, Recording};
use crate::hooks::record::SecretsMode;
use crate::k8s::client;
use crate::k8s::discovery::{Discovery, ResourceInfo};
use crate::spec::{self, ControllerDef};

/// What `dryrun` suggests when it is given nothing to plan.
const DRYRUN_EXAMPLE: &str = "kubectl meta dryrun -f examples/hello-world/";

/// Run `kubectl meta dryrun`; the exit code on success: 0 no changes, 1 changes.
pub async fn run(mut args: DryrunArgs) -> Result<u8> {
    // A project file fills the flags not given (flags win).
    // A sandbox opened on the project's saved state lives until the command ends.
    let _saved = super::project::for_dryrun(&mut args).await?;
    validate(&args).class(Class::Usage)?;
    let selector = definitions::check(&args.defs, "plan", DRYRUN_EXAMPLE).class(Class::Usage)?;
    let mut loaded = definitions::load_files(&args.defs, selector.as_ref())?;
    let against = match &args.against {
        Some(p) => Some(
            spec::load_paths_with(std::slice::from_ref(p), args.defs.recursive)
                .class(Class::Usage)?
                .controllers,
        ),
        None => None,
    };
    let conn = super::engine_start::connect_kubeconfig(&args.cluster, Default::default())
        .await
        .class(Class::Usage)?;
    eprintln!(
        "{} (read only: nothing is written)",
        conn.context.describe()
    );
    definitions::check_reachable(&conn).await?;
    let discovery = Discovery::new(conn.client.clone());
    definitions::add_from_cluster(
        &args.defs,
        &conn,
        &discovery,
        selector.as_ref(),
        &mut loaded,
    )
    .await?;

    // Nobody subscribes to the one-sync plan's events: a bus without room for them.
    let bus = EventBus::with_capacity(1);
    let (bench, endpoints) = hook_bench(&conn, &loaded, bus, engine_options(&args)).await?;
    let ctx = bench.context();
    let live = std::sync::Arc::new(LiveReader::new(conn.client.clone()));
    let (mut shown, failures) = plan_all(&args, ctx, &live, &loaded).await?;
    if args.simulate {
        return simulate(&args, &conn, &live, &loaded, &endpoints, against.as_deref()).await;
    }
    if let Some(other) = &against {
        compare_answers(&bench, &loaded.controllers, other, &shown).await;
    }
    if args.server {
        check_on_server(&conn, &mut shown).await;
    }
    print(&args, &shown, &failures)?;
    fail_on_failures(&shown, &failures)?;
    let mut summary = Summary::default();
    for sh in &shown {
        summary.add(&sh.entries);
    }
    Ok(u8::from(summary.changes()))
}

/// The engine's options from the flags.
fn engine_options(args: &DryrunArgs) -> EngineOptions {
    EngineOptions {
        hook_base_url: args.hook_base_url.clone(),
        namespace: args.cluster.namespace.clone(),
        record: args.record.clone().map(|dir| Recording {
            dir,
            secrets: SecretsMode::keeping(args.record_secrets),
            origin: "recorded by kubectl meta dryrun --record",
        }),
        ..EngineOptions::default()
    }
}

/// `--simulate`: copy what the one-sync plan read into an in-process sandbox, run the engine
/// there until convergence (each version with `--against`), print, and exit 4 when a parent
/// does not converge, else 1 when the end state differs from live, else 0.
async fn simulate(
    args: &DryrunArgs,
    conn: &client::Connection,
    live: &LiveReader,
    loaded: &spec::Loaded,
    endpoints: &[crate::hooks::endpoint::ResolvedController],
    against: Option<&[ControllerDef]>,
) -> Result<u8> {
    let limits = simulate::Limits {
        max_steps: args.max_steps,
        timeout: std::time::Duration::from_secs(args.simulate_timeout),
    };
    let once = |defs: Vec<ControllerDef>| async move {
        let copy = simulate::Copy::load(live, &conn.client)
            .await
            .map_err(|e| fail(Class::Cluster, e))?;
        let mut runs = simulate::run(&copy, &defs, endpoints, engine_options(args), limits)
            .await
            .map_err(|e| fail(Class::Internal, e))?;
        copy.sandbox.shutdown().await;
        if !args.parents.is_empty() {
            runs.retain(|r| {
                args.parents
                    .iter()
                    .any(|p| r.parent == *p || r.parent.ends_with(&format!("/{p}")))
            });
        }
        Ok::<_, anyhow::Error>(runs)
    };
    let runs = once(loaded.controllers.clone()).await?;
    if let Some(other) = against {
        let theirs = once(other.to_vec()).await?;
        let lines = simulate::end_state_differences(&runs, &theirs);
        if lines.is_empty() {
            eprintln!("--against: the end states are the same");
        } else {
            eprintln!("--against: {} object(s) end differently:", lines.len());
            for l in &lines {
                eprintln!("  {l}");
            }
        }
        eprintln!("--against: {}", simulate::summary_line(&theirs));
    }
    let opts = render_options(args);
    let text = match args.output {
        DryrunOutput::Human => simulate::human(&runs, &opts, args.verbose > 0),
        DryrunOutput::Json => {
            let mut s = serde_json::to_string_pretty(&simulate::json_doc(&runs, &opts))
                .class(Class::Internal)?;
            s.push('\n');
            s
        }
    };
    super::write_stdout(text.as_bytes())?;
    let stuck: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.cause
                .as_ref()
                .map(|c| format!("  {} {}: {c}", r.controller, r.parent))
        })
        .collect();
    if !stuck.is_empty() {
        return Err(fail(
            Class::NotConverged,
            format!(
                "{} parent(s) do not converge (nothing was written to the cluster):\n{}",
                stuck.len(),
                stuck.join("\n")
            ),
        ));
    }
    let (summary, _, _) = simulate::summary(&runs);
    Ok(u8::from(summary.changes()))
}

/// Plan every selected parent of every controller on live state read once; a PARENT given
/// that no controller selects is a usage error.
async fn plan_all(
    args: &DryrunArgs,
    ctx: &std::sync::Arc<EngineContext>,
    live: &std::sync::Arc<LiveReader>,
    loaded: &spec::Loaded,
) -> Result<(Vec<Shown>, Vec<ParentFailure>)> {
    let composer = Composer {
        ctx,
        live,
        observe_only: args.simulate,
    };
    let selection = Selection {
        parents: args.parents.clone(),
        key: args.key.clone(),
    };
    let mut shown = Vec::new();
    let mut failures: Vec<ParentFailure> = Vec::new();
    let mut matched = std::collections::BTreeSet::new();
    for def in &loaded.controllers {
        let planned = composer.plan(def, &selection).await.map_err(|e| {
            let class = match e {
                crate::dryrun::compose::ComposeError::Live(_) => Class::Cluster,
                _ => Class::Usage,
            };
            fail(class, e)
        })?;
        matched.extend(planned.matched);
        failures.extend(planned.failures);
        shown.extend(planned.plans.into_iter().map(Shown::new));
    }
    let missing: Vec<&str> = args
        .parents
        .iter()
        .filter(|p| !matched.contains(*p))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(fail(
            Class::Usage,
            format!(
                "no parent named {} is selected by the given controller(s){}",
                missing.join(", "),
                args.cluster
                    .namespace
                    .as_ref()
                    .map(|ns| format!(" in namespace {ns}"))
                    .unwrap_or_default()
            ),
        ));
    }
    Ok((shown, failures))
}

/// `--server`: dry-run each create and update on the API server (saying when it cannot).
async fn check_on_server(conn: &client::Connection, shown: &mut [Shown]) {
    for sh in shown {
        for e in &mut sh.entries {
            if !matches!(e.action, Action::Create | Action::Update) {
                continue;
            }
            let Some(info) = sh.plan.types.get(&e.type_key).cloned() else {
                continue;
            };
            server::check(&conn.client, &info, e).await;
            if let Some(ServerCheck::Fallback { message }) = &e.server {
                eprintln!(
                    "warning: {} {}: server-side dry run unavailable ({message}); showing the local result",
                    e.action.header(),
                    e.title()
                );
            }
        }
    }
}

/// Print the plans (diffs, or `-o json`) on stdout.
fn print(args: &DryrunArgs, shown: &[Shown], failures: &[ParentFailure]) -> Result<()> {
    let opts = render_options(args);
    let text = match args.output {
        DryrunOutput::Human => render::human(shown, failures, &opts),
        DryrunOutput::Json => {
            let doc = render::json_doc(shown, failures, &opts);
            let mut s = serde_json::to_string_pretty(&doc).class(Class::Internal)?;
            s.push('\n');
            s
        }
    };
    super::write_stdout(text.as_bytes())
}

/// The display options from the flags.
fn render_options(args: &DryrunArgs) -> RenderOptions {
    let color = args.color.resolve(std::io::stdout().is_terminal());
    RenderOptions {
        context: args.context_lines,
        managed_fields: args.show_managed_fields,
        all: args.show_all,
        secrets: args.show_secrets,
        color: color && args.output == DryrunOutput::Human,
    }
}

/// The error for syncs that would fail: a hook or planning failure, or a write the API server
/// rejected in its dry run.
fn fail_on_failures(shown: &[Shown], failures: &[ParentFailure]) -> Result<()> {
    let rejected = shown.iter().flat_map(|sh| {
        sh.entries.iter().filter_map(move |e| match &e.server {
            Some(ServerCheck::Rejected { message }) => Some(format!(
                "  {} {}: {} {}: {message}",
                sh.plan.controller,
                sh.plan.parent_name(),
                e.action.header(),
                e.title()
            )),
            _ => None,
        })
    });
    let lines: Vec<String> = failures
        .iter()
        .map(|f| format!("  {} {}: {}", f.controller, f.parent, f.message))
        .chain(rejected)
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    Err(fail(
        Class::NotConverged,
        format!(
            "{} sync(s) would fail (nothing was written):\n{}",
            lines.len(),
            lines.join("\n")
        ),
    ))
}

/// Check every flag and path that can be checked without a cluster.
fn validate(args: &DryrunArgs) -> Result<()> {
    if let Some(url) = &args.hook_base_url {
        definitions::check_http_url("--hook-base-url", url)?;
    }
    if let Some(path) = &args.against
        && !path.exists()
    {
        bail!("--against {}: no such file or directory", path.display());
    }
    if args.key.is_some() && args.parents.len() != 1 {
        bail!(
            "--key KEY plans one map key of one parent: give exactly one PARENT (kubectl meta dryrun -f map.yaml NAMESPACE/NAME --key KEY)"
        );
    }
    for p in &args.parents {
        if p.is_empty() || p.split('/').count() > 2 || p.split('/').any(str::is_empty) {
            bail!("PARENT {p:?}: give NAMESPACE/NAME or NAME");
        }
    }
    if let Some(dir) = &args.record {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("--record {}: cannot create it: {e}", dir.display()))?;
    }
    if args.context_lines > 10_000 {
        bail!("-C {}: at most 10000 lines of context", args.context_lines);
    }
    Ok(())
}

/// `--against`: send every hook request made while planning to the same hook of the other
/// version of the controller (same name) and print how the answers differ (stderr), compared
/// as the engine reads them ([`answer_view`]: children by identity, server spellings), as
/// `kubectl meta test` compares them.
async fn compare_answers(
    bench: &HookBench,
    current: &[ControllerDef],
    other: &[ControllerDef],
    shown: &[Shown],
) {
    for sh in shown {
        let p = &sh.plan;
        let Some(odef) = other.iter().find(|d| d.name() == p.controller) else {
            eprintln!(
                "--against: no controller named {} there; nothing to compare",
                p.controller
            );
            continue;
        };
        let key = p.subject();
        let Some(cdef) = current.iter().find(|d| d.name() == p.controller) else {
            continue;
        };
        let types = async {
            Ok::<_, String>((
                bench.declared_types(cdef).await?,
                bench.declared_types(odef).await?,
            ))
        };
        let (ctypes, otypes) = match types.await {
            Ok((c, o)) => (strip(c), strip(o)),
            Err(e) => {
                eprintln!("--against {} {key}: {e}", p.controller);
                continue;
            }
        };
        for x in &p.exchanges {
            let Ok(Some((spec, call))) = bench.ask(odef, &x.hook, &key, &x.request).await else {
                eprintln!(
                    "--against {} {}: the other version has no {} hook",
                    p.controller,
                    p.parent_name(),
                    x.hook
                );
                continue;
            };
            let answer = match call.result.map_err(|e| SyncError::hook(&x.hook, e)) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!(
                        "--against {} {key}: {} hook of the other version failed: {e}",
                        p.controller, x.hook
                    );
                    continue;
                }
            };
            let current_hook = bench.hook(cdef, &x.hook).ok().flatten();
            let cversion = current_hook.map_or(spec.version, |s| s.version);
            let theirs = AnswerContext::of(odef, &x.hook, spec.version, &otypes);
            let ours = AnswerContext::of(cdef, &x.hook, cversion, &ctypes);
            let (against, now) = match (
                answer_view(&theirs, &x.request, &answer),
                answer_view(&ours, &x.request, &x.response),
            ) {
                (Ok(a), Ok(n)) => (a, n),
                (Err(e), _) => {
                    eprintln!(
                        "--against {} {key}: the engine would reject the other version's {} answer: {e}",
                        p.controller, x.hook
                    );
                    continue;
                }
                (_, Err(e)) => {
                    eprintln!(
                        "--against {} {key}: the engine rejects the current {} answer: {e}",
                        p.controller, x.hook
                    );
                    continue;
                }
            };
            let changes = differences(&against, &now, &[]);
            if changes.is_empty() {
                eprintln!(
                    "--against {} {}: {} hook answers the same",
                    p.controller, key, x.hook
                );
                continue;
            }
            eprintln!(
                "--against {} {}: {} hook answers differently (against -> current):",
                p.controller, key, x.hook
            );
            for c in changes {
                let show = |v: &Option<serde_json::Value>| {
                    v.as_ref()
                        .map_or_else(|| "(absent)".to_string(), ToString::to_string)
                };
                eprintln!("  ~ {}: {} -> {}", c.path, show(&c.old), show(&c.new));
            }
        }
    }
}

/// The types alone, without their resources.
fn strip(types: Vec<(ChildType, ResourceInfo)>) -> Vec<ChildType> {
    types.into_iter().map(|(t, _)| t).collect()
}
