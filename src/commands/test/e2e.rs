//! The chainsaw e2e tests of `kubectl meta test` ([`crate::e2e`]): found beside the recorded
//! hook cases in the same directories, each run in its own in-process sandbox (or in a namespace
//! of its own on the cluster of `--context`) with the controllers of `-f`, reported as cases are (`ok`/`FAIL` lines, `-o json`, `--junit`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;

use super::super::definitions;
use super::super::exit::{Class, fail};
use super::report::{CaseResult, Verdict};
use crate::cli::DefinitionArgs;
use crate::e2e::perturb::{self, env::Perturbed};
use crate::e2e::{self, EnvExtras, LoadedTest, Setup};
use crate::engine::plan::apply::FieldChange;
use crate::spec;

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

/// Run `tests` (`jobs` at once), calling `each` as each ends, in order. A test that turns out
/// not to be runnable (a binding or template that does not evaluate) is a usage error.
pub async fn run_all(
    setup: &Setup,
    tests: &[LoadedTest],
    jobs: usize,
    mut each: impl FnMut(&CaseResult) -> Result<()>,
) -> Result<Vec<CaseResult>> {
    let mut out = Vec::with_capacity(tests.len());
    let mut stream = futures::stream::iter(
        tests
            .iter()
            .filter(|t| !t.skip)
            .map(|t| async move { (t, e2e::run_test(setup, t, EnvExtras::default()).await) }),
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
/// (the engine's perturbation, the sandbox's fault rules, the restart signals). Returns the exit
/// code: 0 nothing found, 1 a finding or a test failing plain.
pub async fn perturb(
    setup: Setup,
    tests: Vec<LoadedTest>,
    classes: &[perturb::Class],
    seed: u64,
    json_output: bool,
) -> u8 {
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
            let run: Box<perturb::RunFn<'static>> =
                Box::new(move |schedule: Option<&perturb::Schedule>| {
                    let (test, setup) = (Arc::clone(&test), Arc::clone(&setup));
                    let extras = schedule.cloned().map(extras_of).unwrap_or_default();
                    Box::pin(async move { outcome_of(e2e::run_test(&setup, &test, extras).await) })
                });
            (name, run)
        })
        .collect();
    let reproduce = perturb::cli::reproduce_prefix(std::env::args());
    perturb::cli::run_tests(&runs, classes, seed, &reproduce, json_output).await
}

/// The environment's side of one schedule.
fn extras_of(schedule: perturb::Schedule) -> EnvExtras {
    let p = Perturbed::new(schedule);
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
