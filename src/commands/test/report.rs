//! How `kubectl meta test` shows its results: a line per case and the differences of failed
//! ones (human), one JSON object per case and a summary (`-o json`, NDJSON), JUnit XML
//! (`--junit FILE`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::dryrun::render::Paint;
use crate::engine::plan::apply::FieldChange;

/// How one case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The answer means the same as the recorded one.
    Pass,
    /// The answer differs (`changes`), or the hook failed or answered something the engine
    /// rejects (`message`).
    Fail {
        /// Why, when it is not (only) differences.
        message: Option<String>,
        /// The differences, recorded -> current.
        changes: Vec<FieldChange>,
    },
    /// `--update`: the recorded answer was replaced by the current one.
    Updated {
        /// What changed, recorded -> current.
        changes: Vec<FieldChange>,
    },
    /// The hook could not be called (server down, program missing): the run cannot tell.
    Error {
        /// Why.
        message: String,
    },
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name ([`super::cases::Found::name`]).
    pub name: String,
    /// Its file.
    pub file: String,
    /// `controller hook parent [key]`, for people.
    pub title: String,
    /// How it ended.
    pub verdict: Verdict,
    /// How long the hook call and the comparison took.
    pub duration: Duration,
}

/// The counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Passed (updated ones included).
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Hook not callable.
    pub errors: usize,
    /// Rewritten by `--update`.
    pub updated: usize,
}

impl Totals {
    /// Count `results`.
    pub fn of(results: &[CaseResult]) -> Totals {
        let mut t = Totals::default();
        for r in results {
            match r.verdict {
                Verdict::Pass => t.passed += 1,
                Verdict::Updated { .. } => {
                    t.passed += 1;
                    t.updated += 1;
                }
                Verdict::Fail { .. } => t.failed += 1,
                Verdict::Error { .. } => t.errors += 1,
            }
        }
        t
    }

    /// `3 passed, 1 failed` (`, 2 updated`, `, 1 error` when there are any).
    pub fn line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if self.updated > 0 {
            s.push_str(&format!(", {} updated", self.updated));
        }
        if self.errors > 0 {
            s.push_str(&format!(
                ", {} error{}",
                self.errors,
                if self.errors == 1 { "" } else { "s" }
            ));
        }
        s
    }
}

/// A JSON value for a difference line.
fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".to_string(), ToString::to_string)
}

/// The human lines of one result: `ok NAME`, or `FAIL NAME` then the file and the differences
/// (`  ~ path: old -> new`). With `verbose`, passing cases show their file and time too.
pub fn human(r: &CaseResult, color: bool, verbose: bool) -> String {
    let paint = Paint { on: color };
    let ms = r.duration.as_millis();
    let mut out = match &r.verdict {
        Verdict::Pass => format!("{} {}", paint.wrap("32", "ok    "), r.name),
        Verdict::Updated { .. } => format!("{} {}", paint.wrap("33", "UPDATE"), r.name),
        Verdict::Fail { .. } => format!("{} {}", paint.wrap("31", "FAIL  "), r.name),
        Verdict::Error { .. } => format!("{} {}", paint.wrap("31", "ERROR "), r.name),
    };
    if verbose {
        out.push_str(&paint.wrap("2", &format!(" ({ms}ms)")));
    }
    out.push('\n');
    let detail = !matches!(r.verdict, Verdict::Pass) || verbose;
    if detail {
        out.push_str(&format!("       {}: {}\n", r.file, r.title));
    }
    out.push_str(&body(r, color));
    out
}

/// Whether a result is shown at the end, grouped with the identical ones ([`human_grouped`]):
/// failures and errors.
pub fn deferred(r: &CaseResult) -> bool {
    matches!(r.verdict, Verdict::Fail { .. } | Verdict::Error { .. })
}

/// The failures and errors among `results`, one block per distinct outcome (the same verdict,
/// message and differences): one parent recorded over the syncs of its convergence gives a case
/// per sync, and a change of the hook fails them all the same way. The block names every case
/// and its file, then the differences once.
pub fn human_grouped(results: &[CaseResult], color: bool) -> String {
    let paint = Paint { on: color };
    let mut groups: Vec<(String, Vec<&CaseResult>)> = Vec::new();
    for r in results.iter().filter(|r| deferred(r)) {
        let key = format!(
            "{}\n{}",
            matches!(r.verdict, Verdict::Error { .. }),
            body(r, false)
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let mut out = String::new();
    for (_, cases) in groups {
        let first = cases[0];
        let head = match first.verdict {
            Verdict::Error { .. } => paint.wrap("31", "ERROR "),
            _ => paint.wrap("31", "FAIL  "),
        };
        let names: Vec<&str> = cases.iter().map(|r| r.name.as_str()).collect();
        out.push_str(&format!("{head} {}", names.join(", ")));
        if cases.len() > 1 {
            out.push_str(&format!(" ({} cases, the same outcome)", cases.len()));
        }
        out.push('\n');
        for r in &cases {
            out.push_str(&format!("       {}: {}\n", r.file, r.title));
        }
        out.push_str(&body(first, color));
    }
    out
}

/// The message and differences of a result, indented (`  ~ path: old -> new`).
fn body(r: &CaseResult, color: bool) -> String {
    let paint = Paint { on: color };
    let mut out = String::new();
    let (message, changes) = match &r.verdict {
        Verdict::Pass => (None, &[][..]),
        Verdict::Fail { message, changes } => (message.as_deref(), changes.as_slice()),
        Verdict::Updated { changes } => (None, changes.as_slice()),
        Verdict::Error { message } => (Some(message.as_str()), &[][..]),
    };
    if let Some(m) = message {
        for line in m.lines() {
            out.push_str(&format!("       {line}\n"));
        }
    }
    for c in changes {
        let line = format!(
            "       ~ {}: {} -> {}",
            c.path,
            show(c.old.as_ref()),
            show(c.new.as_ref())
        );
        out.push_str(&paint.wrap("33", &line));
        out.push('\n');
    }
    out
}

/// The `-o json` object of one result (one line of the NDJSON stream).
pub fn json_line(r: &CaseResult) -> Value {
    let (result, message, changes) = match &r.verdict {
        Verdict::Pass => ("pass", None, &[][..]),
        Verdict::Updated { changes } => ("updated", None, changes.as_slice()),
        Verdict::Fail { message, changes } => ("fail", message.clone(), changes.as_slice()),
        Verdict::Error { message } => ("error", Some(message.clone()), &[][..]),
    };
    let mut v = json!({
        "type": "case",
        "name": r.name,
        "file": r.file,
        "title": r.title,
        "result": result,
        "durationMs": r.duration.as_millis() as u64,
        "differences": changes,
    });
    if let Some(m) = message {
        v["message"] = json!(m);
    }
    v
}

/// The `-o json` summary object (the last line).
pub fn json_summary(t: &Totals) -> Value {
    json!({"type": "summary", "passed": t.passed, "failed": t.failed,
        "errors": t.errors, "updated": t.updated})
}

/// The results as a JUnit XML report (one testsuite, a testcase per case; failures and
/// errors carry their message and differences).
pub fn junit(results: &[CaseResult]) -> String {
    let t = Totals::of(results);
    let total: f64 = results.iter().map(|r| r.duration.as_secs_f64()).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{total:.3}\">\n",
        results.len(),
        t.failed,
        t.errors
    ));
    out.push_str(&format!(
        "  <testsuite name=\"kubectl-meta test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{total:.3}\">\n",
        results.len(),
        t.failed,
        t.errors
    ));
    for r in results {
        let (class, name) = match r.name.rsplit_once('/') {
            Some((c, n)) => (c, n),
            None => ("", r.name.as_str()),
        };
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\" time=\"{:.3}\"",
            xml(class),
            xml(name),
            xml(&r.file),
            r.duration.as_secs_f64()
        ));
        let body = |message: &Option<String>, changes: &[FieldChange]| {
            let mut text = message.clone().unwrap_or_default();
            for c in changes {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!(
                    "{}: {} -> {}",
                    c.path,
                    show(c.old.as_ref()),
                    show(c.new.as_ref())
                ));
            }
            text
        };
        match &r.verdict {
            Verdict::Pass | Verdict::Updated { .. } => out.push_str("/>\n"),
            Verdict::Fail { message, changes } => {
                let text = body(message, changes);
                let first = text.lines().next().unwrap_or("the answer differs");
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml(first),
                    xml(&text)
                ));
            }
            Verdict::Error { message } => {
                out.push_str(&format!(
                    ">\n      <error message=\"{}\">{}</error>\n    </testcase>\n",
                    xml(message.lines().next().unwrap_or_default()),
                    xml(message)
                ));
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text escaped for XML attributes and content.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            name: name.into(),
            file: format!("t/{name}.yaml"),
            title: "hello sync default/world".into(),
            verdict,
            duration: Duration::from_millis(3),
        }
    }

    #[test]
    fn lines_summary_and_junit() {
        let change = FieldChange {
            path: "children[Pod/web-0].spec.containers[name=web].image".into(),
            old: Some(json!("nginx:1.27")),
            new: Some(json!("nginx:1.28")),
        };
        let results = vec![
            result("a/ok", Verdict::Pass),
            result(
                "a/bad",
                Verdict::Fail {
                    message: None,
                    changes: vec![change],
                },
            ),
            result(
                "a/down",
                Verdict::Error {
                    message: "cannot connect <x>".into(),
                },
            ),
        ];
        let t = Totals::of(&results);
        assert_eq!(t.line(), "1 passed, 1 failed, 1 error");
        let text = human(&results[1], false, false);
        assert!(text.starts_with("FAIL   a/bad\n"), "{text}");
        assert!(
            text.contains(
                "~ children[Pod/web-0].spec.containers[name=web].image: \"nginx:1.27\" -> \"nginx:1.28\""
            ),
            "{text}"
        );
        assert_eq!(human(&results[0], false, false), "ok     a/ok\n");
        let j = json_line(&results[1]);
        assert_eq!(j["result"], "fail");
        assert_eq!(j["differences"][0]["new"], "nginx:1.28");
        let x = junit(&results);
        assert!(x.contains("tests=\"3\" failures=\"1\" errors=\"1\""), "{x}");
        assert!(x.contains("<testcase classname=\"a\" name=\"ok\""), "{x}");
        assert!(x.contains("cannot connect &lt;x&gt;"), "{x}");
    }

    /// Identical failures are one block naming each case; a different one is its own block;
    /// passes are not repeated.
    #[test]
    fn identical_failures_are_grouped() {
        let fail = |name: &str, new: &str| {
            result(
                name,
                Verdict::Fail {
                    message: None,
                    changes: vec![FieldChange {
                        path: "status.x".into(),
                        old: Some(json!(1)),
                        new: Some(json!(new)),
                    }],
                },
            )
        };
        let results = vec![
            fail("a/1", "2"),
            result("a/ok", Verdict::Pass),
            fail("a/2", "2"),
            fail("a/3", "3"),
        ];
        let text = human_grouped(&results, false);
        assert!(
            text.starts_with(
                "FAIL   a/1, a/2 (2 cases, the same outcome)\n       t/a/1.yaml: hello sync default/world\n       t/a/2.yaml: hello sync default/world\n       ~ status.x: 1 -> \"2\"\nFAIL   a/3\n"
            ),
            "{text}"
        );
        assert!(!text.contains("a/ok"), "{text}");
    }
}
