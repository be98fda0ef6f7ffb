//! The chainsaw e2e tests of `kubectl meta test` ([`crate::e2e`]): found beside the recorded
//! hook cases in the same directories, each run in its own in-process sandbox (or in a namespace
//! of its own on the cluster of `--context`) with the controllers of `-f`, reported as cases are (`ok`/`FAIL` lines, `-o json`, `--junit`).
//!
//! The managed hook server (`--hook-server`, or the project's served hook) runs for them too:
//! once for a plain run, a fresh one per run under `--perturb` (a server's memory must not carry
//! from one run to the next), restarted there as class `hook-restart`'s schedule says. The
//! webhook calls to it wait on a [`ServerGate`]: until it is ready, and, after the perturbation
//! asked for a restart, until the gate restarted it, so the call that asked goes to the new
//! server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use futures::future::BoxFuture;

use super::super::definitions;
use super::super::exit::{Class, fail};
use super::report::{CaseResult, Verdict};
use crate::cli::DefinitionArgs;
use crate::e2e::perturb::{self, env::Perturbed};
use crate::e2e::{self, EnvExtras, LoadedTest, Setup};
use crate::engine::HookGate;
use crate::engine::perturb::Perturbation;
use crate::engine::plan::apply::FieldChange;
use crate::hooks::server::{ManagedServer, ServerConfig, ServerLine};
use crate::spec;

/// The managed hook server of the e2e tests: how to start it, and the base URL its webhooks
/// are called at (what `--hook-server` and `--hook-base-url` say, or the project's served hook).
pub type ServedHook = (ServerConfig, String);

/// Webhook calls to the managed hook server wait here: until it is ready, and, when the
/// perturbation asked for more restarts ([`Perturbation::hook_restarts`]) than the gate did,
/// until it restarted it (one at a time: a call waiting meanwhile goes to the new server too).
pub struct ServerGate {
    server: ManagedServer,
    base_url: String,
    perturbation: Option<Arc<Perturbation>>,
    restarted: tokio::sync::Mutex<u32>,
}

impl ServerGate {
    /// The gate of `server` (called at `base_url`), restarting it as `perturbation` asks.
    pub fn new(
        server: ManagedServer,
        base_url: String,
        perturbation: Option<Arc<Perturbation>>,
    ) -> ServerGate {
        ServerGate {
            server,
            base_url,
            perturbation,
            restarted: tokio::sync::Mutex::new(0),
        }
    }
}

impl HookGate for ServerGate {
    fn covers(&self, url: &str) -> bool {
        url.starts_with(&self.base_url)
    }

    fn wait_ready(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if let Some(p) = &self.perturbation {
                let mut done = self.restarted.lock().await;
                let asked = p.hook_restarts();
                if *done < asked {
                    self.server
                        .restart()
                        .await
                        .map_err(|e| format!("restarting the hook server (perturb): {e}"))?;
                    *done = asked;
                }
            }
            self.server
                .wait_ready(timeout)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// Start the managed hook server and wait until it is ready (its output on stderr when
/// `verbose`).
pub async fn start_hook_server(cfg: &ServerConfig, verbose: bool) -> Result<ManagedServer, String> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ServerLine>();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if verbose {
                eprintln!("hook server: {}", line.line);
            }
        }
    });
    ManagedServer::start(cfg.clone(), tx)
        .await
        .map_err(|e| format!("the hook server did not start: {e}"))
}

/// The e2e tests of `files` (those whose name contains `filter`); a malformed test or an
/// unsupported operation is an error naming the file and line.
pub fn load(files: &[PathBuf], filter: Option<&str>) -> Result<Vec<LoadedTest>, e2e::E2eError> {
    let mut out = Vec::new();
    for f in files {
        for t in e2e::model::load_file(f)? {
            if filter.is_none_or(|k| t.name.contains(k) || f.display().to_string().contains(k)) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// Without `-f` (nor a project file naming definitions): each e2e test runs with the
/// controller definitions of its directory's parent (`examples/NAME/e2e/chainsaw-test.yaml` ->
/// `examples/NAME/`), read as `-f` would read that directory (`-l` applies); the tests grouped
/// by that directory, in order of first appearance. A directory without definitions is a usage
/// error naming the test and the directory.
pub fn beside(
    args: &DefinitionArgs,
    selector: Option<&spec::ControllerSelector>,
    tests: Vec<LoadedTest>,
) -> Result<Vec<(spec::Loaded, Vec<LoadedTest>)>> {
    let mut groups: Vec<(PathBuf, Vec<LoadedTest>)> = Vec::new();
    for t in tests {
        let dir = t
            .file
            .parent()
            .and_then(Path::parent)
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .unwrap_or(Path::new("."))
            .to_path_buf();
        match groups.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, g)) => g.push(t),
            None => groups.push((dir, vec![t])),
        }
    }
    groups
        .into_iter()
        .map(|(dir, tests)| {
            let defs = DefinitionArgs {
                files: vec![dir.clone()],
                ..args.clone()
            };
            let loaded = definitions::load_files(&defs, selector).map_err(|e| {
                fail(
                    Class::Usage,
                    format!(
                        "e2e test {} ({}): no -f given, so its controllers are read from the test directory's parent {}: {e:#}; pass -f FILE|DIR",
                        tests[0].name,
                        tests[0].file.display(),
                        dir.display()
                    ),
                )
            })?;
            Ok((loaded, tests))
        })
        .collect()
}

/// What the environments are built from: the controllers and the CRDs/Namespaces of `-f`.
pub fn setup(loaded: &spec::Loaded, hook_base_url: Option<String>, verbose: bool) -> Setup {
    let docs: Vec<(String, serde_json::Value)> = loaded
        .others
        .iter()
        .map(|d| (d.source.to_string(), d.value.clone()))
        .collect();
    Setup {
        cluster: None,
        controllers: loaded.controllers.clone(),
        manifests: e2e::env::environment_manifests(&docs),
        hook_base_url,
        verbose,
        settle: false,
    }
}

/// The result of one test as `test` reports a case.
fn result_of(test: &LoadedTest, r: e2e::TestRun) -> CaseResult {
    let name = format!("e2e/{}", test.name);
    let file = test.file.display().to_string();
    {
        {
            CaseResult {
                name,
                file,
                title: format!("chainsaw test {}", test.name),
                verdict: if r.passed {
                    Verdict::Pass
                } else {
                    Verdict::Fail {
                        message: Some(
                            r.failures
                                .iter()
                                .map(e2e::StepFailure::line)
                                .collect::<Vec<_>>()
                                .join("\n"),
                        ),
                        changes: r
                            .failures
                            .iter()
                            .filter_map(|f| {
                                Some(FieldChange {
                                    path: format!("{}.{}", f.object.clone()?, f.path.clone()?),
                                    old: f.expected.clone(),
                                    new: f.actual.clone(),
                                })
                            })
                            .collect(),
                    }
                },
                duration: r.duration,
            }
        }
    }
}

/// A test whose environment could not be set up.
fn error_result(test: &LoadedTest, e: e2e::E2eError) -> CaseResult {
    CaseResult {
        name: format!("e2e/{}", test.name),
        file: test.file.display().to_string(),
        title: format!("chainsaw test {}", test.name),
        verdict: Verdict::Error {
            message: e.to_string(),
        },
        duration: Duration::ZERO,
    }
}

/// Run `tests` (`jobs` at once) with `extras` (the managed hook server's gate), calling `each`
/// as each ends, in order. A test that turns out not to be runnable (a binding or template that
/// does not evaluate) is a usage error.
pub async fn run_all(
    setup: &Setup,
    tests: &[LoadedTest],
    jobs: usize,
    extras: &EnvExtras,
    mut each: impl FnMut(&CaseResult) -> Result<()>,
) -> Result<Vec<CaseResult>> {
    let mut out = Vec::with_capacity(tests.len());
    let mut stream = futures::stream::iter(
        tests
            .iter()
            .filter(|t| !t.skip)
            .map(|t| async move { (t, e2e::run_test(setup, t, extras.clone()).await) }),
    )
    .buffered(jobs.max(1));
    while let Some((t, r)) = stream.next().await {
        let r = match r {
            Ok(run) => result_of(t, run),
            Err(e @ (e2e::E2eError::Malformed { .. } | e2e::E2eError::Unsupported { .. })) => {
                return Err(fail(Class::Usage, e.to_string()));
            }
            Err(e) => error_result(t, e),
        };
        each(&r)?;
        out.push(r);
    }
    Ok(out)
}

/// `test --perturb`: each e2e test through the perturbation driver
/// ([`crate::e2e::perturb::cli::run_tests`]): run plain twice, then under each class of
/// `classes` from `seed`, each run a fresh environment whose [`EnvExtras`] carry the schedule
/// (the engine's perturbation, the sandbox's fault rules, the restart signals) and, with
/// `served`, a fresh managed hook server behind a [`ServerGate`]. Returns the exit code: 0
/// nothing found, 1 a finding or a test failing plain.
pub async fn perturb(
    setup: Setup,
    tests: Vec<LoadedTest>,
    classes: &[perturb::Class],
    seed: u64,
    json_output: bool,
    served: Option<ServedHook>,
) -> u8 {
    let served = Arc::new(served);
    let setup = Arc::new(Setup {
        settle: true,
        ..setup
    });
    let runs: Vec<(String, Box<perturb::RunFn<'static>>)> = tests
        .into_iter()
        .filter(|t| !t.skip)
        .map(|t| {
            let name = t.name.clone();
            let test = Arc::new(t);
            let setup = Arc::clone(&setup);
            let served = Arc::clone(&served);
            let run: Box<perturb::RunFn<'static>> =
                Box::new(move |schedule: Option<&perturb::Schedule>| {
                    let (test, setup) = (Arc::clone(&test), Arc::clone(&setup));
                    let served = Arc::clone(&served);
                    let perturbed = schedule.cloned().map(Perturbed::new);
                    Box::pin(async move {
                        let mut extras = perturbed.as_ref().map(extras_of).unwrap_or_default();
                        let server = match served.as_ref() {
                            Some((cfg, base)) => {
                                match start_hook_server(cfg, setup.verbose).await {
                                    Ok(s) => {
                                        extras.hook_gate = Some(Arc::new(ServerGate::new(
                                            s.clone(),
                                            base.clone(),
                                            perturbed.as_ref().map(|p| Arc::clone(&p.perturbation)),
                                        )));
                                        Some(s)
                                    }
                                    Err(e) => {
                                        return perturb::Outcome {
                                            passed: false,
                                            failures: vec![e],
                                            snapshots: Vec::new(),
                                        };
                                    }
                                }
                            }
                            None => None,
                        };
                        let out = outcome_of(e2e::run_test(&setup, &test, extras).await);
                        if let Some(s) = server {
                            s.stop().await;
                        }
                        out
                    })
                });
            (name, run)
        })
        .collect();
    let reproduce = perturb::cli::reproduce_prefix(std::env::args());
    perturb::cli::run_tests(&runs, classes, seed, &reproduce, json_output).await
}

/// The environment's side of one schedule.
fn extras_of(p: &Perturbed) -> EnvExtras {
    let perturbation = Arc::clone(&p.perturbation);
    let on_sandbox = p.clone();
    EnvExtras {
        engine_options: Some(Arc::new(move |o: &mut crate::engine::EngineOptions| {
            o.perturb = Some(Arc::clone(&perturbation));
        })),
        on_sandbox: Some(Arc::new(move |sb: &kube_sandbox::Sandbox| {
            on_sandbox.on_sandbox(sb.faults())
        })),
        restart: Some(Arc::clone(&p.restart)),
        restart_hook_server: Some(Arc::clone(&p.restart_hook_server)),
        hook_gate: None,
    }
}

/// A run as the driver compares it; an environment that could not start is a failed run.
fn outcome_of(run: Result<e2e::TestRun, e2e::E2eError>) -> perturb::Outcome {
    match run {
        Ok(r) => perturb::Outcome {
            passed: r.passed,
            failures: r.failures.iter().map(e2e::StepFailure::line).collect(),
            snapshots: r.snapshots,
        },
        Err(e) => perturb::Outcome {
            passed: false,
            failures: vec![e.to_string()],
            snapshots: Vec::new(),
        },
    }
}
