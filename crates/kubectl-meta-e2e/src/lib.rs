//! kubectl-meta-e2e: end-to-end tests in chainsaw's format (`chainsaw.kyverno.io/v1alpha1`
//! `Test`), run against a fresh in-process sandbox per test (the `kube-sandbox` crate) with
//! kubectl-meta's engine (the `kubectl-meta-engine` crate) running the controllers in the same
//! process; and `--perturb`, the same tests under deterministic faults. `kubectl meta test`
//! (the plugin) wires both to the command line; this crate knows nothing of it.
//!
//! - [`model`]: the Test model and its loading (which files, which fields are refused).
//! - [`matching`]: assertion trees (partial match, arrays, JMESPath, `~`), bindings, templating.
//! - [`env`]: the environment (sandbox, CRDs, engine) and [`EnvExtras`].
//! - [`ops`]: the operations.
//! - [`perturb`]: `test --perturb`: every e2e test run plain, then under each perturbation
//!   class from a seed, compared.
//!
//! The public surface is this file; the crate's README lists it.
#![deny(missing_docs)]

pub mod env;
pub mod matching;
pub mod model;
pub mod ops;
pub mod perturb;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use env::{Env, EnvExtras};
pub use model::LoadedTest;

use kubectl_meta_engine::spec::ControllerDef;
use matching::Bindings;

/// Why a test could not run (as opposed to failing its assertions).
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// The test file is not a valid Test.
    #[error("{file}: {message}")]
    Malformed {
        /// The file.
        file: String,
        /// What is wrong, where.
        message: String,
    },
    /// A field or operation this runner does not implement.
    #[error("{at}: {what}: {why} (supported operations: {})", model::SUPPORTED_OPS.join(", "))]
    Unsupported {
        /// `file:line`.
        at: String,
        /// The field or operation.
        what: String,
        /// Why.
        why: String,
    },
    /// The environment could not be set up.
    #[error("{0}")]
    Environment(String),
}

/// A named cluster the tests run against instead of a fresh sandbox each (`test --context`):
/// a namespace per test, created before and deleted after, with the controllers running in
/// this process against that cluster (their parents limited to the test's namespace).
#[derive(Clone, Debug)]
pub struct ClusterTarget {
    /// The kubeconfig file (`None`: `$KUBECONFIG`, then `~/.kube/config`).
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The context to use.
    pub context: String,
}

/// What every test's environment is built from.
#[derive(Clone, Default)]
pub struct Setup {
    /// Run against this cluster instead of a fresh in-process sandbox per test.
    pub cluster: Option<ClusterTarget>,
    /// The controllers the engine runs.
    pub controllers: Vec<ControllerDef>,
    /// Documents applied before the engine starts (the definition files' CRDs and Namespaces),
    /// with where each came from.
    pub manifests: Vec<(String, Value)>,
    /// `--hook-base-url`.
    pub hook_base_url: Option<String>,
    /// Print what `get`, `describe`, `events`, `command` and `script` print (stderr).
    pub verbose: bool,
    /// Let the engine come to rest before each step's snapshot ([`Env::settle`]): what
    /// `test --perturb` compares; a plain `test` only asserts, and does not wait.
    pub settle: bool,
}

/// One failed operation.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFailure {
    /// The step's name.
    pub step: String,
    /// The operation (`assert`, `apply`, ...), with its block when not `try` (`catch/script`).
    pub operation: String,
    /// The object (`Kind namespace/name`), when one.
    pub object: Option<String>,
    /// The field that differed, when one.
    pub path: Option<String>,
    /// Expected value.
    pub expected: Option<Value>,
    /// Actual value.
    pub actual: Option<Value>,
    /// What happened.
    pub message: String,
}

impl StepFailure {
    /// One line for people.
    pub fn line(&self) -> String {
        let mut s = format!("step {:?}: {}", self.step, self.operation);
        if let Some(o) = &self.object {
            s.push_str(&format!(" {o}"));
        }
        if let Some(p) = &self.path {
            s.push_str(&format!(": {p}"));
        }
        s.push_str(&format!(": {}", self.message));
        if let (Some(e), Some(a)) = (&self.expected, &self.actual) {
            s.push_str(&format!(" (expected {e}, got {a})"));
        }
        s
    }
}

/// The result of one chainsaw test run.
pub struct TestRun {
    /// The test's name.
    pub name: String,
    /// Whether every operation succeeded.
    pub passed: bool,
    /// Per failed step/operation: step name, operation, object, field path, expected, actual.
    pub failures: Vec<StepFailure>,
    /// After each step's `try` (before that step's cleanup): every object in the test's
    /// namespace of the types the test touched and the controllers' child types, as the
    /// server returned them (JSON), sorted by (apiVersion, kind, namespace, name).
    pub snapshots: Vec<Vec<Value>>,
    /// How long the test took (environment included).
    pub duration: Duration,
}

/// Run one loaded test in a fresh environment built from `setup`, with `extras`.
pub async fn run_test(
    setup: &Setup,
    test: &LoadedTest,
    extras: EnvExtras,
) -> Result<TestRun, E2eError> {
    let started = Instant::now();
    let namespace = test
        .namespace
        .clone()
        .unwrap_or_else(|| namespace_for(test));
    let env = Env::start(setup, &extras, &namespace).await?;
    let ready = started.elapsed();
    let result = run_in(setup, test, &env, namespace).await;
    let stopping = Instant::now();
    env.stop().await;
    if setup.verbose {
        eprintln!(
            "e2e {}: environment up in {ready:?}, down in {:?}",
            test.name,
            stopping.elapsed()
        );
    }
    let (failures, snapshots) = result?;
    Ok(TestRun {
        name: test.name.clone(),
        passed: failures.is_empty(),
        failures,
        snapshots,
        duration: started.elapsed(),
    })
}

/// A test namespace name: `chainsaw-<test name>` cut to a DNS label.
fn namespace_for(test: &LoadedTest) -> String {
    let mut s: String = test
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(50);
    format!("chainsaw-{}", s.trim_matches('-'))
}

async fn run_in(
    setup: &Setup,
    test: &LoadedTest,
    env: &Env,
    namespace: String,
) -> Result<(Vec<StepFailure>, Vec<Vec<Value>>), E2eError> {
    let mut bindings = Bindings::new();
    bindings.insert("namespace".into(), json!(namespace));
    bindings.insert("test".into(), json!({"metadata": {"name": test.name}}));
    for (k, v) in &test.bindings {
        let v = matching::template(v, &bindings).map_err(|m| E2eError::Malformed {
            file: test.file.display().to_string(),
            message: format!("binding {k}: {m}"),
        })?;
        bindings.insert(k.clone(), v);
    }
    let mut ctx = ops::Ctx::new(env, setup, test, namespace.clone());
    ctx.ensure_namespace(&bindings).await?;
    let result = run_steps(setup, test, env, &mut ctx, bindings).await;
    // On a named cluster, what the test created goes (its namespace, if created here, last);
    // a sandbox is thrown away whole.
    if env.is_cluster() {
        ctx.remove_created().await;
    }
    result
}

async fn run_steps(
    setup: &Setup,
    test: &LoadedTest,
    env: &Env,
    ctx: &mut ops::Ctx<'_>,
    bindings: Bindings,
) -> Result<(Vec<StepFailure>, Vec<Vec<Value>>), E2eError> {
    let mut failures = Vec::new();
    let mut snapshots = Vec::new();
    let mut cleanups: Vec<(String, Vec<model::Operation>, Bindings)> = Vec::new();
    for step in &test.steps {
        let mut b = bindings.clone();
        b.insert("step".into(), json!({"name": step.name}));
        for (k, v) in &step.bindings {
            let v = matching::template(v, &b).map_err(|m| E2eError::Malformed {
                file: test.file.display().to_string(),
                message: format!("step {:?} binding {k}: {m}", step.name),
            })?;
            b.insert(k.clone(), v);
        }
        let mut step_failures = Vec::new();
        let step_started = Instant::now();
        for op in &step.try_ops {
            match ctx.run(op, &b).await? {
                Ok(()) => {}
                Err(f) => {
                    let f = ops::tag(f, &step.name, "");
                    step_failures.push(f);
                    if !op.continue_on_error {
                        break;
                    }
                }
            }
        }
        if setup.verbose {
            eprintln!(
                "e2e {}: step {:?} took {:?}",
                test.name,
                step.name,
                step_started.elapsed()
            );
        }
        if setup.settle {
            env.settle(env::SETTLE_MAX).await;
        }
        snapshots.push(ctx.snapshot().await);
        let failed = !step_failures.is_empty();
        if failed {
            for op in &step.catch {
                if let Err(f) = ctx.run(op, &b).await? {
                    step_failures.push(ops::tag(f, &step.name, "catch/"));
                }
            }
        }
        for op in &step.finally {
            if let Err(f) = ctx.run(op, &b).await? {
                step_failures.push(ops::tag(f, &step.name, "finally/"));
            }
        }
        if !step.cleanup.is_empty() {
            cleanups.push((step.name.clone(), step.cleanup.clone(), b.clone()));
        }
        failures.extend(step_failures);
        if failed {
            break;
        }
    }
    for (name, ops_, b) in cleanups.iter().rev() {
        for op in ops_ {
            if let Err(f) = ctx.run(op, b).await? {
                failures.push(ops::tag(f, name, "cleanup/"));
            }
        }
    }
    Ok((failures, snapshots))
}
