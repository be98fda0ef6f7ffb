//! The `test --perturb` edge: run the driver over every test, print the reports (human on
//! stderr-free stdout lines as `test` prints them, or NDJSON), give the exit code.

use std::io::Write as _;

use serde_json::json;

use super::{Class, Report, RunFn, drive};

/// The command line reproducing this run without its `--perturb`/`--seed` (they are appended
/// per finding): `kubectl meta test` and the arguments given.
pub fn reproduce_prefix(args: impl IntoIterator<Item = String>) -> String {
    let mut out = vec!["kubectl".to_string(), "meta".to_string()];
    let mut skip_next = false;
    for a in args.into_iter().skip(1) {
        if skip_next {
            skip_next = false;
            continue;
        }
        if a == "--seed" {
            skip_next = true;
            continue;
        }
        if a == "--perturb" || a.starts_with("--perturb=") || a.starts_with("--seed=") {
            continue;
        }
        out.push(if a.contains(' ') { format!("'{a}'") } else { a });
    }
    out.join(" ")
}

/// One report as a JSON object (the `-o json` line of one test).
pub fn report_json(r: &Report, reproduce: &str) -> serde_json::Value {
    json!({
        "test": r.test,
        "plainFailed": r.plain_failed,
        "varying": r.varying,
        "plainMillis": r.plain_duration.as_millis() as u64,
        "classes": r.classes.iter().map(|c| json!({
            "class": c.class.name(),
            "millis": c.duration.as_millis() as u64,
            "finding": c.finding.as_ref().map(|f| json!({
                "schedule": f.schedule.to_string(),
                "points": f.schedule.points,
                "amount": f.schedule.amount,
                "differences": f.differences,
                "reproduce": format!("{reproduce} --perturb={} --seed {}", f.class, f.seed),
            })),
        })).collect::<Vec<_>>(),
    })
}

/// Drive every test under `classes` from `seed`, print each report, and return the exit code:
/// 0 nothing found, 1 a finding (or a plain run failing).
pub async fn run_tests(
    tests: &[(String, Box<RunFn<'_>>)],
    classes: &[Class],
    seed: u64,
    reproduce: &str,
    json_output: bool,
) -> u8 {
    let mut code = 0;
    let mut findings = 0;
    for (name, run) in tests {
        let r = drive(name, run.as_ref(), classes, seed).await;
        if !r.clean() {
            code = 1;
        }
        findings += r.findings().count();
        let mut out = std::io::stdout().lock();
        let _ = if json_output {
            writeln!(out, "{}", report_json(&r, reproduce))
        } else {
            write!(out, "{}", r.render(reproduce))
        };
    }
    if !json_output {
        println!(
            "{} tests x {} classes, {findings} findings",
            tests.len(),
            classes.len()
        );
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perturb_reproduce_prefix_drops_perturb_and_seed() {
        let args = [
            "kubectl-meta",
            "test",
            "-f",
            "c.yaml",
            "--perturb=restart",
            "--seed",
            "9",
            "e2e/",
        ]
        .map(String::from);
        assert_eq!(reproduce_prefix(args), "kubectl meta test -f c.yaml e2e/");
    }
}
