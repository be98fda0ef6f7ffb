//! `kubectl meta test --perturb`: run an e2e test plain twice (learning what varies by
//! itself), then under each perturbation class from a seed, compare the outcome with the plain
//! run, shrink a schedule that shows a difference to the smallest that still does, and say how
//! to reproduce it.
//!
//! The driver is generic over the run ([`RunFn`]: a schedule or none -> an [`Outcome`]); the
//! e2e runner's `TestRun { passed, failures, snapshots }` is an [`Outcome`], and the engine
//! injection points are set from the schedule through `EngineOptions::perturb`
//! ([`kubectl_meta_engine::perturb`]).

pub mod cli;
pub mod env;
pub mod mask;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;

pub use kubectl_meta_engine::perturb::{Class, Schedule};
use mask::{Mask, differences, index};

/// The outcome of one run of a test, as the driver compares it.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Whether the test's assertions held.
    pub passed: bool,
    /// The failed assertions, one line each (step, operation, object, field).
    pub failures: Vec<String>,
    /// After each step: every object the controllers own or read, as the server returned them.
    pub snapshots: Vec<Vec<Value>>,
}

/// One run of a test: plain (`None`) or under a schedule.
pub type RunFn<'a> = dyn Fn(Option<&Schedule>) -> BoxFuture<'a, Outcome> + Send + Sync + 'a;

/// A difference a class showed.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The class.
    pub class: Class,
    /// The seed the schedule was drawn from.
    pub seed: u64,
    /// The smallest schedule found that shows the difference.
    pub schedule: Schedule,
    /// What differed (assertions, then field paths).
    pub differences: Vec<String>,
    /// Runs it took to shrink.
    pub shrink_runs: usize,
}

/// How one class went.
#[derive(Debug, Clone)]
pub struct ClassRun {
    /// The class.
    pub class: Class,
    /// Time of the perturbed run (not counting shrinking).
    pub duration: Duration,
    /// The finding, if the outcome differed.
    pub finding: Option<Finding>,
}

/// What `--perturb` found for one test.
#[derive(Debug, Clone)]
pub struct Report {
    /// The test's name.
    pub test: String,
    /// The plain run failed on its own: nothing was perturbed (its failures).
    pub plain_failed: Option<Vec<String>>,
    /// What varies by itself (learned from the two plain runs).
    pub varying: Vec<String>,
    /// Time of the first plain run.
    pub plain_duration: Duration,
    /// Per class.
    pub classes: Vec<ClassRun>,
}

impl Report {
    /// The findings.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.classes.iter().filter_map(|c| c.finding.as_ref())
    }

    /// Whether nothing was found and the plain run passed.
    pub fn clean(&self) -> bool {
        self.plain_failed.is_none() && self.findings().next().is_none()
    }

    /// The human report: a line per class (`ok`/`FAIL`), each finding with its class, its
    /// schedule, what differed and the line reproducing it (`reproduce` is the command without
    /// `--perturb`/`--seed`: `kubectl meta test -f ... DIR`).
    pub fn render(&self, reproduce: &str) -> String {
        let mut s = String::new();
        if let Some(f) = &self.plain_failed {
            let _ = writeln!(
                s,
                "FAIL {}: the plain run fails, nothing perturbed:\n  {}",
                self.test,
                f.join("\n  ")
            );
            return s;
        }
        for c in &self.classes {
            let ms = c.duration.as_millis();
            match &c.finding {
                None => {
                    let _ = writeln!(s, "ok   {} --perturb={} ({ms} ms)", self.test, c.class);
                }
                Some(f) => {
                    let _ = writeln!(
                        s,
                        "FAIL {} --perturb={} ({ms} ms)\n  schedule: {}\n  differs:",
                        self.test, c.class, f.schedule
                    );
                    for d in &f.differences {
                        let _ = writeln!(s, "    {d}");
                    }
                    let _ = writeln!(
                        s,
                        "  reproduce: {} --perturb={} --seed {}",
                        reproduce, f.class, f.seed
                    );
                }
            }
        }
        s
    }
}

/// Parse `--perturb` values (comma-separated names; `all` or none: every class).
pub fn parse_classes(values: &[String]) -> Result<Vec<Class>, String> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')) {
        let v = v.trim();
        if v.is_empty() || v == "all" {
            out.extend(Class::ALL);
            continue;
        }
        match Class::parse(v) {
            Some(c) => out.push(c),
            None => {
                return Err(format!(
                    "--perturb: unknown class {v:?}; the classes are: {}",
                    Class::names()
                ));
            }
        }
    }
    if out.is_empty() {
        out.extend(Class::ALL);
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|c| seen.insert(*c));
    Ok(out)
}

/// What differs between the plain outcome and `other`, without what varies by itself.
fn compare(plain: &Outcome, other: &Outcome, mask: &Mask) -> Vec<String> {
    let mut out = Vec::new();
    if plain.passed && !other.passed {
        out.push("the test's assertions fail:".to_string());
        out.extend(other.failures.iter().map(|f| format!("  {f}")));
    }
    let a = index(&plain.snapshots);
    let b = index(&other.snapshots);
    out.extend(mask.apply(differences(&a, &b)));
    out
}

/// Run `run` plain twice, then under each of `classes` from `seed`; shrink what differs.
pub async fn drive(test: &str, run: &RunFn<'_>, classes: &[Class], seed: u64) -> Report {
    let start = Instant::now();
    let plain = run(None).await;
    let plain_duration = start.elapsed();
    let mut report = Report {
        test: test.to_string(),
        plain_failed: None,
        varying: Vec::new(),
        plain_duration,
        classes: Vec::new(),
    };
    if !plain.passed {
        report.plain_failed = Some(plain.failures);
        return report;
    }
    let second = run(None).await;
    let mask = Mask::learn(&index(&plain.snapshots), &index(&second.snapshots));
    report.varying = mask.paths().cloned().collect();
    for &class in classes {
        let schedule = Schedule::from_seed(class, seed);
        let t = Instant::now();
        let out = run(Some(&schedule)).await;
        let duration = t.elapsed();
        let diffs = compare(&plain, &out, &mask);
        let finding = if diffs.is_empty() {
            None
        } else {
            Some(shrink(run, &plain, &mask, schedule, diffs).await)
        };
        report.classes.push(ClassRun {
            class,
            duration,
            finding,
        });
    }
    report
}

/// The smallest schedule still showing a difference: drop each point in turn (keeping a drop
/// that still differs), then lower the amount.
async fn shrink(
    run: &RunFn<'_>,
    plain: &Outcome,
    mask: &Mask,
    mut schedule: Schedule,
    mut diffs: Vec<String>,
) -> Finding {
    let mut runs = 0;
    let points: Vec<u32> = schedule.points.iter().copied().collect();
    for p in points {
        if schedule.points.len() <= 1 {
            break;
        }
        let mut candidate = schedule.clone();
        candidate.points.remove(&p);
        runs += 1;
        let d = compare(plain, &run(Some(&candidate)).await, mask);
        if !d.is_empty() {
            schedule = candidate;
            diffs = d;
        }
    }
    while schedule.amount > 1 {
        let mut candidate = schedule.clone();
        candidate.amount -= 1;
        runs += 1;
        let d = compare(plain, &run(Some(&candidate)).await, mask);
        if d.is_empty() {
            break;
        }
        schedule = candidate;
        diffs = d;
    }
    Finding {
        class: schedule.class,
        seed: schedule.seed,
        schedule,
        differences: diffs,
        shrink_runs: runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn perturb_flag_values_parse_and_unknown_names_list_the_classes() {
        assert_eq!(parse_classes(&[]).unwrap().len(), 8);
        assert_eq!(parse_classes(&["all".into()]).unwrap().len(), 8);
        assert_eq!(
            parse_classes(&["restart,conflict".into(), "restart".into()]).unwrap(),
            [Class::Restart, Class::Conflict]
        );
        let e = parse_classes(&["restart,stale".into()]).unwrap_err();
        assert!(e.contains("\"stale\""), "{e}");
        assert!(e.contains("stale-read, missed-state, restart"), "{e}");
    }

    /// A fake run: the object's data.k is "bad" when the schedule holds point 3 (a bug that
    /// one occurrence shows), and a generated name differs on every run.
    fn fake() -> (
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
        Box<RunFn<'static>>,
    ) {
        let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = std::sync::Arc::clone(&n);
        let f = move |s: Option<&Schedule>| -> BoxFuture<'static, Outcome> {
            let i = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let bad = s.is_some_and(|s| s.points.contains(&3));
            Box::pin(async move {
                Outcome {
                    passed: true,
                    failures: vec![],
                    snapshots: vec![vec![
                        json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "x", "namespace": "d"},
                            "data": {"k": if bad {"bad"} else {"good"}}}),
                        json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": format!("g-{i}"), "generateName": "g-",
                                "namespace": "d"}}),
                    ]],
                }
            })
        };
        (n, Box::new(f))
    }

    #[tokio::test]
    async fn perturb_driver_finds_shrinks_and_prints_the_reproduce_line() {
        let (_, run) = fake();
        // Seeds whose reorder schedule holds point 3, and one whose does not.
        let with = (0..200u64)
            .find(|s| Schedule::from_seed(Class::Reorder, *s).points.contains(&3))
            .expect("a seed with point 3");
        let without = (0..200u64)
            .find(|s| !Schedule::from_seed(Class::Reorder, *s).points.contains(&3))
            .expect("a seed without");
        let r = drive("t", run.as_ref(), &[Class::Reorder], with).await;
        assert_eq!(r.varying, ["step 1: ConfigMap d/g-*: metadata.name"]);
        let f = r.findings().next().expect("a finding");
        assert_eq!(f.schedule.points, [3].into(), "shrunk to the one point");
        assert_eq!(f.schedule.amount, 1, "and the smallest amount");
        assert_eq!(f.differences, ["step 1: ConfigMap d/x: data.k"]);
        let text = r.render("kubectl meta test -f c.yaml e2e/");
        assert!(text.contains("FAIL t --perturb=reorder"), "{text}");
        assert!(
            text.contains(&format!(
                "reproduce: kubectl meta test -f c.yaml e2e/ --perturb=reorder --seed {with}"
            )),
            "{text}"
        );
        let r = drive("t", run.as_ref(), &[Class::Reorder], without).await;
        assert!(r.clean(), "{}", r.render("x"));
    }

    #[tokio::test]
    async fn perturb_driver_does_not_perturb_a_failing_plain_run() {
        let run = |_: Option<&Schedule>| -> BoxFuture<'static, Outcome> {
            Box::pin(async {
                Outcome {
                    passed: false,
                    failures: vec!["step 1: assert ConfigMap x: data.k".into()],
                    snapshots: vec![],
                }
            })
        };
        let r = drive("t", &run, &Class::ALL, 1).await;
        assert!(!r.clean());
        assert!(r.classes.is_empty());
        assert!(r.render("k").contains("the plain run fails"));
    }
}
