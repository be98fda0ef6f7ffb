//! `kubectl meta test`: replay recorded hook exchanges (`dev --record`, `dryrun --record`, or
//! written by hand; format docs/hook-test-case.md) against the current hooks, and compare each
//! answer with the recorded one as the engine sees it ([`crate::engine::plan::answer`]).
//!
//! Order of work: check every flag -> find and read every case (none found, or a malformed
//! one, is a usage error naming the file and field) -> load the definitions -> the cluster: an
//! in-process sandbox (discovery of the declared types, the secured webhooks' references with
//! the files' documents standing in, `--validate`), or the real one with `--from-cluster` ->
//! bind each case to its definition and hook -> start `--hook-server` -> call each hook as `dev`
//! calls it (`-j N` at once), compare, `--update` -> print, `--junit` -> exit 0 (all passed),
//! 1 (failures), 4 (a hook could not be called).

mod cases;
mod e2e;
mod report;
mod validate;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde_json::Value;

use super::definitions;
use super::engine_start;
use super::exit::{Class, Classify, fail};
use crate::cli::test::{TestArgs, TestOutput};
use crate::engine::events::{EventBus, EventSubject};
use crate::engine::plan::answer::{AnswerContext, answer_view, differences};
use crate::engine::plan::child::ChildType;
use crate::engine::{EngineOptions, HookBench, HookSpec};
use crate::hooks::HookError;
use crate::hooks::record::{Case, SecretsMode, redact_secrets};
use crate::hooks::server::{ManagedServer, ServerConfig};
use crate::k8s::client::{self, Connection};
use crate::k8s::discovery::ResourceInfo;
use crate::spec::{self, ControllerDef};
use cases::Found;
use report::{CaseResult, Totals, Verdict};

/// What `test` suggests when it is given no definitions.
const TEST_EXAMPLE: &str = "kubectl meta test hook-tests/ -f examples/hello-world/";

/// Where cases are looked for when no DIR is given.
const DEFAULT_DIR: &str = "hook-tests";

/// Run `kubectl meta test`; the exit code on success: 0 all passed, 1 failures.
pub async fn run(verbose: u8, mut args: TestArgs) -> Result<u8> {
    // A project file fills the flags not given (flags win).
    super::project::for_test(&mut args)?;
    validate_flags(&args).class(Class::Usage)?;
    // Without -f (or the project's), the e2e tests read their controllers beside them (below);
    // recorded hook cases still need -f.
    let default_defs = args.defs.is_empty();
    let selector = if default_defs {
        args.defs
            .selector
            .as_deref()
            .map(spec::ControllerSelector::parse)
            .transpose()
            .class(Class::Usage)?
    } else {
        definitions::check(&args.defs, "test", TEST_EXAMPLE).class(Class::Usage)?
    };
    let mut hook_server = definitions::hook_server_config(
        args.hook_server.as_deref(),
        args.hook_base_url.as_deref(),
        args.hook_server_ready.as_deref(),
    )
    .class(Class::Usage)?;
    // A server the project file names runs in the project directory.
    if let (Some((server, _)), Some(dir)) = (&mut hook_server, &args.hook_server_dir) {
        server.working_dir = Some(dir.clone());
    }
    // `--context NAME`: the e2e tests run on that cluster; checked (the context exists, its
    // API server answers) before anything is read or started.
    let e2e_cluster = e2e_cluster(&args).await?;
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(DEFAULT_DIR)]
    } else {
        args.dirs.clone()
    };
    // Chainsaw e2e tests: a directory holding one belongs to its tests (its other YAML files
    // are their resources, not recorded cases).
    let e2e_files = crate::e2e::model::test_files(&dirs);
    if default_defs && e2e_files.is_empty() {
        definitions::check(&args.defs, "test", TEST_EXAMPLE).class(Class::Usage)?;
    }
    let e2e_dirs: Vec<PathBuf> = e2e_files
        .iter()
        .filter_map(|f| f.parent().map(PathBuf::from))
        .collect();
    let files: Vec<_> = cases::case_files(&dirs)
        .class(Class::Usage)?
        .into_iter()
        .filter(|(p, _)| !e2e_dirs.iter().any(|d| p.starts_with(d)))
        .collect();
    let found = cases::read_cases(files, args.filter.as_deref()).class(Class::Usage)?;
    let tests = e2e::load(&e2e_files, args.filter.as_deref())
        .map_err(|e| fail(Class::Usage, e.to_string()))?;
    if found.is_empty() && tests.is_empty() {
        return Err(fail(
            Class::Usage,
            format!(
                "no test cases found in {}{} (record some with `kubectl meta dev --record DIR`; format: docs/hook-test-case.md)",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                args.filter
                    .as_ref()
                    .map(|f| format!(" matching -k {f:?}"))
                    .unwrap_or_default()
            ),
        ));
    }
    if default_defs && !found.is_empty() {
        definitions::check(&args.defs, "test", TEST_EXAMPLE).class(Class::Usage)?;
    }
    let mut loaded = definitions::load_files(&args.defs, selector.as_ref())?;
    let groups = if default_defs {
        e2e::beside(&args.defs, selector.as_ref(), tests)?
    } else {
        vec![(loaded.clone(), tests)]
    };
    // The project's hooks are built before the first case.
    super::project::build_hooks(args.project.as_ref()).await?;
    if let Some(classes) = &args.perturb {
        return perturb(&args, classes, groups, hook_server, verbose).await;
    }
    let color = color_on(&args);
    let mut e2e_results = Vec::new();
    // The managed hook server serves the e2e tests too (the recorded cases start their own).
    let e2e_server = match &hook_server {
        Some((cfg, base)) if groups.iter().any(|(_, t)| !t.is_empty()) => {
            Some((start_server(cfg.clone(), verbose).await?, base.clone()))
        }
        _ => None,
    };
    let extras = crate::e2e::EnvExtras {
        hook_gate: e2e_server.as_ref().map(|(s, base)| {
            Arc::new(e2e::ServerGate::new(s.clone(), base.clone(), None))
                as Arc<dyn crate::engine::HookGate>
        }),
        ..Default::default()
    };
    for (defs, tests) in groups.iter().filter(|(_, t)| !t.is_empty()) {
        let mut setup = e2e::setup(defs, args.hook_base_url.clone(), verbose > 0);
        setup.cluster = e2e_cluster.clone();
        e2e_results.extend(
            e2e::run_all(&setup, tests, args.jobs, &extras, |r| {
                print_one(&args, r, color, verbose)
            })
            .await?,
        );
    }
    if let Some((s, _)) = e2e_server {
        s.stop().await;
    }
    if found.is_empty() {
        return finish(&args, e2e_results, color);
    }
    let cluster = Cluster::connect(&args).await?;
    let inputs = Inputs {
        selector,
        hook_server,
        found,
        prior: e2e_results,
    };
    let result = run_connected(verbose, &args, inputs, &mut loaded, &cluster).await;
    cluster.stop().await;
    result
}

/// What was read and checked before connecting.
struct Inputs {
    /// `-l`, parsed.
    selector: Option<spec::ControllerSelector>,
    /// `--hook-server`, checked.
    hook_server: Option<(ServerConfig, String)>,
    /// The cases.
    found: Vec<Found>,
    /// The results of the e2e tests (run before the cases).
    prior: Vec<CaseResult>,
}

/// Everything after the connection (so the sandbox is stopped whatever happens).
async fn run_connected(
    verbose: u8,
    args: &TestArgs,
    inputs: Inputs,
    loaded: &mut spec::Loaded,
    cluster: &Cluster,
) -> Result<u8> {
    let Inputs {
        selector,
        hook_server,
        found,
        prior,
    } = inputs;
    let conn = &cluster.conn;
    let discovery = crate::k8s::discovery::Discovery::new(conn.client.clone());
    definitions::add_from_cluster(&args.defs, conn, &discovery, selector.as_ref(), loaded).await?;
    let bench = hook_bench(args, conn, loaded).await?;
    validate::install_types(cluster, loaded).await?;
    let bound = bind_all(&bench, found, &loaded.controllers).await?;
    let server = match hook_server {
        Some((cfg, _)) => Some(start_server(cfg, verbose).await?),
        None => None,
    };
    let runner = Runner {
        bench: &bench,
        cluster,
        ignore: &args.ignore,
        update: args.update,
        validate: args.validate,
    };
    let color = color_on(args);
    let mut results = prior;
    results.reserve(bound.len());
    let mut stream = futures::stream::iter(bound.iter().map(|b| runner.run(b))).buffered(args.jobs);
    while let Some(r) = stream.next().await {
        print_one(args, &r, color, verbose)?;
        results.push(r);
    }
    drop(stream);
    if let Some(s) = server {
        s.stop().await;
    }
    finish(args, results, color)
}

/// Colors on stdout (human output only).
fn color_on(args: &TestArgs) -> bool {
    args.color.resolve(std::io::stdout().is_terminal()) && args.output == TestOutput::Human
}

/// Print one result as it ends (human failures wait for the end).
fn print_one(args: &TestArgs, r: &CaseResult, color: bool, verbose: u8) -> Result<()> {
    let text = match args.output {
        // Failures come at the end, the identical ones in one block.
        TestOutput::Human if report::deferred(r) => String::new(),
        TestOutput::Human => report::human(r, color, verbose > 0),
        TestOutput::Json => format!("{}\n", report::json_line(r)),
    };
    super::write_stdout(text.as_bytes())
}

/// The deferred failures, the closing line, `--junit`, and the exit code.
fn finish(args: &TestArgs, results: Vec<CaseResult>, color: bool) -> Result<u8> {
    if args.output == TestOutput::Human {
        super::write_stdout(report::human_grouped(&results, color).as_bytes())?;
    }
    let totals = Totals::of(&results);
    match args.output {
        TestOutput::Human => super::write_stdout(format!("{}\n", totals.line()).as_bytes())?,
        TestOutput::Json => {
            super::write_stdout(format!("{}\n", report::json_summary(&totals)).as_bytes())?;
        }
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&results))
            .with_context(|| format!("--junit {}: cannot write it", path.display()))
            .class(Class::Internal)?;
    }
    if totals.errors > 0 {
        return Err(fail(
            Class::NotConverged,
            format!(
                "{} case(s) could not call their hook ({}); is the hook server running, the program installed?",
                totals.errors,
                totals.line()
            ),
        ));
    }
    Ok(u8::from(totals.failed > 0))
}

/// `--context NAME`: the cluster the e2e tests run on (a namespace per test) instead of a fresh
/// sandbox each; the context must exist (else a usage error naming it and the ones that do) and
/// its API server answer (else a cluster error). `--perturb` needs sandboxes of its own.
async fn e2e_cluster(args: &TestArgs) -> Result<Option<crate::e2e::ClusterTarget>> {
    let Some(context) = &args.cluster.context else {
        return Ok(None);
    };
    if args.perturb.is_some() {
        return Err(fail(
            Class::Usage,
            format!(
                "--perturb runs every e2e test in a sandbox of its own (it injects the faults there); \
                 it does not combine with --context {context}: drop one of them"
            ),
        ));
    }
    let conn = super::engine_start::connect_kubeconfig(&args.cluster, Default::default())
        .await
        .map_err(|e| fail(Class::Usage, format!("--context {context}: {e}")))?;
    definitions::check_reachable(&conn).await?;
    Ok(Some(crate::e2e::ClusterTarget {
        kubeconfig: args.cluster.kubeconfig.clone(),
        context: context.clone(),
    }))
}

/// `--perturb`: the e2e tests (chainsaw `Test` files) through the perturbation driver; the
/// recorded hook cases are not run (they have no environment to perturb). None found is a usage
/// error.
async fn perturb(
    args: &TestArgs,
    classes: &[String],
    groups: Vec<(spec::Loaded, Vec<crate::e2e::LoadedTest>)>,
    served: Option<(ServerConfig, String)>,
    verbose: u8,
) -> Result<u8> {
    if groups.iter().all(|(_, t)| t.is_empty()) {
        let dirs: Vec<String> = args.dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(fail(
            Class::Usage,
            format!(
                "--perturb runs the e2e tests (chainsaw files of kind Test) and none were found in {}; \
                 write one (chainsaw-test.yaml) or run without --perturb for the hook test cases",
                if dirs.is_empty() {
                    DEFAULT_DIR.to_string()
                } else {
                    dirs.join(", ")
                }
            ),
        ));
    }
    let classes = crate::e2e::perturb::parse_classes(classes).map_err(anyhow::Error::msg)?;
    let mut code = 0;
    for (defs, tests) in groups.into_iter().filter(|(_, t)| !t.is_empty()) {
        let setup = e2e::setup(&defs, args.hook_base_url.clone(), verbose > 0);
        let json = args.output == TestOutput::Json;
        let served = served.clone();
        code = code.max(e2e::perturb(setup, tests, &classes, args.seed, json, served).await);
    }
    Ok(code)
}

/// Check the flags that can be checked before reading anything.
fn validate_flags(args: &TestArgs) -> Result<()> {
    if args.jobs == 0 {
        bail!("-j must be at least 1");
    }
    if let Some(url) = &args.hook_base_url {
        definitions::check_http_url("--hook-base-url", url)?;
    }
    if let Some(url) = &args.hook_server_ready {
        definitions::check_http_url("--hook-server-ready", url)?;
    }
    if !args.defs.from_cluster.is_empty() && args.validate {
        // The API server of the cluster validates instead of the sandbox: said, not refused.
        eprintln!(
            "note: --validate with --from-cluster: the cluster's API server checks the answers (server-side dry run)"
        );
    }
    if let Some(f) = &args.filter
        && f.is_empty()
    {
        bail!("-k: give a part of the case names to run (CONTROLLER/PARENT/FILE)");
    }
    if let Some(p) = &args.perturb {
        crate::e2e::perturb::parse_classes(p).map_err(anyhow::Error::msg)?;
    }
    for p in &args.ignore {
        if p.trim().is_empty() {
            bail!("--ignore: give a field path, e.g. status.lastSeen");
        }
    }
    if let Some(path) = &args.junit
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        bail!(
            "--junit {}: no such directory {}",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Where discovery, the webhooks' references and `--validate` are answered: an in-process
/// sandbox, or the cluster of the kubeconfig with `--from-cluster`.
pub(super) struct Cluster {
    /// The connection.
    pub conn: Connection,
    /// The sandbox and its kubeconfig file, when it is ours.
    sandbox: Option<(kube_sandbox::Sandbox, PathBuf)>,
}

impl Cluster {
    /// Connect: to the kubeconfig's cluster with `--from-cluster`, else to a sandbox started
    /// here.
    async fn connect(args: &TestArgs) -> Result<Cluster> {
        if !args.defs.from_cluster.is_empty() {
            let conn = super::engine_start::connect_kubeconfig(&args.cluster, Default::default())
                .await
                .class(Class::Usage)?;
            definitions::check_reachable(&conn).await?;
            return Ok(Cluster {
                conn,
                sandbox: None,
            });
        }
        let path = super::sandbox::data_dir()
            .class(Class::Internal)?
            .join(format!("test-sandbox-{}.kubeconfig", std::process::id()));
        let cfg = kube_sandbox::SandboxConfig {
            kubeconfig: Some(path.clone()),
            ..kube_sandbox::SandboxConfig::ephemeral()
        };
        let sb = kube_sandbox::Sandbox::start(cfg)
            .await
            .context("starting the in-process sandbox")
            .class(Class::Cluster)?;
        let conn = client::connect(Some(&path), Some("sandbox"), None).await;
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                sb.shutdown().await;
                let _ = std::fs::remove_file(&path);
                return Err(fail(Class::Internal, e));
            }
        };
        Ok(Cluster {
            conn,
            sandbox: Some((sb, path)),
        })
    }

    /// Whether the cluster is the in-process sandbox.
    pub(super) fn is_sandbox(&self) -> bool {
        self.sandbox.is_some()
    }

    /// Stop the sandbox (if ours) and remove its kubeconfig.
    async fn stop(self) {
        if let Some((sb, path)) = self.sandbox {
            sb.shutdown().await;
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The hook bench the cases run on: `--hook-base-url`, and the secured webhooks' settings (the
/// files' documents standing in for Secrets and ConfigMaps).
async fn hook_bench(
    args: &TestArgs,
    conn: &Connection,
    loaded: &spec::Loaded,
) -> Result<HookBench> {
    let options = EngineOptions {
        hook_base_url: args.hook_base_url.clone(),
        ..EngineOptions::default()
    };
    let (bench, _endpoints) =
        engine_start::hook_bench(conn, loaded, EventBus::new(), options).await?;
    Ok(bench)
}

/// A case with what it needs to run: its definition's hook and declared types.
struct Bound {
    found: Found,
    /// The case's definition.
    def: ControllerDef,
    controller_kind: &'static str,
    spec: HookSpec,
    types: Arc<Vec<(ChildType, ResourceInfo)>>,
    generate_selector: bool,
    /// The hook's current answer, once called (what `--update` writes).
    current: std::sync::Mutex<Option<Value>>,
}

/// Bind every case (all problems reported together, as usage errors), resolving each
/// definition's hooks and declared types once.
async fn bind_all(
    bench: &HookBench,
    found: Vec<Found>,
    defs: &[ControllerDef],
) -> Result<Vec<Bound>> {
    let mut problems = Vec::new();
    let mut types_of: BTreeMap<String, Arc<Vec<(ChildType, ResourceInfo)>>> = BTreeMap::new();
    let mut out = Vec::new();
    for f in found {
        let def = match cases::bind(&f, defs) {
            Ok(d) => d,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let spec = match bench.hook(def, &f.case.hook) {
            Ok(Some(s)) => s,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
            Ok(None) => continue,
        };
        let types = match types_of.get(def.name()) {
            Some(t) => Arc::clone(t),
            None => match bench.declared_types(def).await {
                Ok(t) => {
                    let t = Arc::new(t);
                    types_of.insert(def.name().to_string(), Arc::clone(&t));
                    t
                }
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            },
        };
        let generate_selector =
            matches!(def, ControllerDef::Composite(c) if c.spec.generate_selector == Some(true));
        out.push(Bound {
            found: f,
            def: def.clone(),
            controller_kind: def.kind(),
            spec,
            types,
            generate_selector,
            current: std::sync::Mutex::new(None),
        });
    }
    if !problems.is_empty() {
        problems.dedup();
        return Err(fail(Class::Usage, problems.join("\n")));
    }
    Ok(out)
}

/// Start the managed hook server (its output on stderr with -v) and wait until it is ready;
/// a server that does not start is a hook that cannot be called (exit 4).
async fn start_server(cfg: ServerConfig, verbose: u8) -> Result<ManagedServer> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            let line: crate::hooks::server::ServerLine = line;
            if verbose > 0 {
                eprintln!("hook server: {}", line.line);
            }
        }
    });
    eprintln!("starting the hook server: {}", cfg.command);
    ManagedServer::start(cfg, tx)
        .await
        .map_err(|e| fail(Class::NotConverged, e))
}

/// Runs one case.
struct Runner<'a> {
    bench: &'a HookBench,
    cluster: &'a Cluster,
    ignore: &'a [String],
    update: bool,
    validate: bool,
}

impl Runner<'_> {
    async fn run(&self, b: &Bound) -> CaseResult {
        let started = Instant::now();
        let case = &b.found.case;
        let verdict = self.verdict(b).await;
        let verdict = match verdict {
            Verdict::Fail {
                message: None,
                changes,
            } if self.update => self.update_case(b, changes),
            v => v,
        };
        CaseResult {
            name: b.found.name.clone(),
            file: b.found.path.display().to_string(),
            title: format!(
                "{} hook of {} {} for {}{}",
                case.hook,
                b.controller_kind,
                case.controller,
                case.parent,
                case.map_key
                    .as_ref()
                    .map(|k| format!(" key {k}"))
                    .unwrap_or_default()
            ),
            verdict,
            duration: started.elapsed(),
        }
    }

    /// Call the hook and compare; the current answer is kept for `--update`.
    async fn verdict(&self, b: &Bound) -> Verdict {
        let case = &b.found.case;
        let subject = EventSubject {
            parent: case.parent.clone(),
            map_key: case.map_key.clone(),
            status_only: false,
        };
        let call = (self.bench)
            .call(&b.def, &case.hook, &b.spec, &subject, &case.request)
            .await;
        let mut answer = match call.result {
            Ok(a) => a,
            Err(e) if not_callable(&e) => {
                return Verdict::Error {
                    message: e.to_string(),
                };
            }
            Err(e) => {
                return Verdict::Fail {
                    message: Some(e.to_string()),
                    changes: Vec::new(),
                };
            }
        };
        if case.secrets == SecretsMode::Redacted {
            redact_secrets(&mut answer);
        }
        let types: Vec<ChildType> = b.types.iter().map(|(t, _)| t.clone()).collect();
        let cx = AnswerContext {
            controller_kind: b.controller_kind,
            hook: &case.hook,
            version: b.spec.version,
            types: &types,
            generate_selector: b.generate_selector,
        };
        let expected = match answer_view(&cx, &case.request, &case.response) {
            Ok(v) => v,
            Err(e) => {
                return Verdict::Fail {
                    message: Some(format!(
                        "response: the recorded answer is not one the engine accepts: {e}"
                    )),
                    changes: Vec::new(),
                };
            }
        };
        let actual = match answer_view(&cx, &case.request, &answer) {
            Ok(v) => v,
            Err(e) => {
                return Verdict::Fail {
                    message: Some(format!("the engine rejects the current answer: {e}")),
                    changes: Vec::new(),
                };
            }
        };
        let ignore: Vec<String> = case.ignore.iter().chain(self.ignore).cloned().collect();
        let changes = differences(&expected, &actual, &ignore);
        *b.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(answer);
        if self.validate {
            let problems = validate::check(self.cluster, &b.types, &case.request, &actual).await;
            if !problems.is_empty() {
                return Verdict::Fail {
                    message: Some(format!(
                        "--validate: the API server would reject the answer:\n{}",
                        problems.join("\n")
                    )),
                    changes,
                };
            }
        }
        if changes.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail {
                message: None,
                changes,
            }
        }
    }

    /// `--update`: the case's expected answer becomes the current one.
    fn update_case(
        &self,
        b: &Bound,
        changes: Vec<crate::engine::plan::apply::FieldChange>,
    ) -> Verdict {
        let current = b
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(answer) = current else {
            return Verdict::Fail {
                message: None,
                changes,
            };
        };
        let case = Case {
            response: answer,
            ..b.found.case.clone()
        };
        match case.write_to(&b.found.path, "updated by kubectl meta test --update") {
            Ok(()) => Verdict::Updated { changes },
            Err(e) => Verdict::Fail {
                message: Some(format!(
                    "--update: cannot write {}: {e}",
                    b.found.path.display()
                )),
                changes,
            },
        }
    }
}

/// The hook could not be called at all (as opposed to answering wrong or too late).
fn not_callable(e: &HookError) -> bool {
    matches!(
        e,
        HookError::NotReady { .. }
            | HookError::Connect { .. }
            | HookError::Tls { .. }
            | HookError::Spawn { .. }
            | HookError::Client { .. }
    )
}
