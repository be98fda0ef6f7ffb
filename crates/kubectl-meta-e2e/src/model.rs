//! The chainsaw `Test` model (`chainsaw.kyverno.io/v1alpha1`) and its loading: files named
//! `chainsaw-test.yaml` and any YAML file holding a Test, below the directories given. Fields
//! this runner does not implement are refused by name, with the file and line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::E2eError;

/// The API version of chainsaw tests.
pub const API_VERSION: &str = "chainsaw.kyverno.io/v1alpha1";

/// One test read from its file.
#[derive(Debug, Clone)]
pub struct LoadedTest {
    /// `metadata.name`.
    pub name: String,
    /// The file.
    pub file: PathBuf,
    /// Its directory (relative `file:` references resolve there).
    pub dir: PathBuf,
    /// `spec.namespace`, else `spec.namespaceTemplate`'s `metadata.name` (else one is made
    /// per test).
    pub namespace: Option<String>,
    /// `spec.namespaceTemplate`: the Namespace the test creates (labels, annotations), its
    /// `(expr)` rendered with the test's bindings.
    pub namespace_template: Option<Value>,
    /// `spec.bindings`, in order.
    pub bindings: Vec<(String, Value)>,
    /// `spec.timeouts`.
    pub timeouts: Timeouts,
    /// `spec.skip`.
    pub skip: bool,
    /// The steps.
    pub steps: Vec<Step>,
}

/// Timeouts per operation class (chainsaw's defaults).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// apply, create, update, patch.
    pub apply: Duration,
    /// assert.
    pub assert: Duration,
    /// error.
    pub error: Duration,
    /// delete.
    pub delete: Duration,
    /// cleanup deletions.
    pub cleanup: Duration,
    /// command, script.
    pub exec: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            apply: Duration::from_secs(5),
            assert: Duration::from_secs(30),
            error: Duration::from_secs(30),
            delete: Duration::from_secs(15),
            cleanup: Duration::from_secs(30),
            exec: Duration::from_secs(5),
        }
    }
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    /// `name` (else `step-N`).
    pub name: String,
    /// `bindings`.
    pub bindings: Vec<(String, Value)>,
    /// `try`.
    pub try_ops: Vec<Operation>,
    /// `catch` (run when `try` failed).
    pub catch: Vec<Operation>,
    /// `finally` (always).
    pub finally: Vec<Operation>,
    /// `cleanup` (at the end of the test, in reverse step order).
    pub cleanup: Vec<Operation>,
}

/// One operation: its name (`apply`, `assert`, ...) and its body.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The operation.
    pub op: String,
    /// Its body.
    pub body: Value,
    /// `continueOnError`.
    pub continue_on_error: bool,
}

/// The operations this runner implements.
pub const SUPPORTED_OPS: &[&str] = &[
    "apply", "assert", "error", "create", "delete", "patch", "update", "command", "script",
    "sleep", "wait", "describe", "events", "get",
];

/// Operations chainsaw has that this runner refuses (they need real containers or clusters).
const REFUSED_OPS: &[&str] = &["podLogs", "proxy"];

/// Parse a duration as chainsaw writes it (`1s`, `500ms`, `1m30s`).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ms" => n / 1000.0,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += Duration::from_secs_f64(secs);
    }
    Some(total)
}

/// Whether `path` should be read for tests: `chainsaw-test.yaml`, or a YAML file whose text
/// names the Test kind of chainsaw's API.
pub fn is_test_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name == "chainsaw-test.yaml" || name == "chainsaw-test.yml" {
        return true;
    }
    if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
        return false;
    }
    std::fs::read_to_string(path)
        .map(|t| t.contains(API_VERSION) && t.contains("kind: Test"))
        .unwrap_or(false)
}

/// Every test file below `dirs` (recursively, hidden entries skipped), sorted per argument.
pub fn test_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dirs {
        if d.is_file() {
            if is_test_file(d) {
                out.push(d.clone());
            }
            continue;
        }
        let mut found = Vec::new();
        walk(d, &mut found);
        found.sort();
        out.extend(found);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if is_test_file(&p) {
            out.push(p);
        }
    }
}

/// Read YAML documents (`---` separated) as JSON values; empty documents are dropped.
pub fn read_yaml_docs(path: &Path) -> Result<Vec<Value>, E2eError> {
    let text = std::fs::read_to_string(path).map_err(|e| E2eError::Malformed {
        file: path.display().to_string(),
        message: format!("cannot read it: {e}"),
    })?;
    parse_yaml_docs(&text).map_err(|message| E2eError::Malformed {
        file: path.display().to_string(),
        message,
    })
}

/// Parse YAML documents text.
pub fn parse_yaml_docs(text: &str) -> Result<Vec<Value>, String> {
    let options = serde_saphyr::options! { strict_booleans: true };
    let docs: Vec<Value> =
        serde_saphyr::from_str_multiple_with_options(text, options).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The tests of one file (a file may hold other documents too).
pub fn load_file(path: &Path) -> Result<Vec<LoadedTest>, E2eError> {
    let text = std::fs::read_to_string(path).map_err(|e| E2eError::Malformed {
        file: path.display().to_string(),
        message: format!("cannot read it: {e}"),
    })?;
    let docs = parse_yaml_docs(&text).map_err(|message| E2eError::Malformed {
        file: path.display().to_string(),
        message,
    })?;
    let mut out = Vec::new();
    for d in docs {
        if d["apiVersion"] == API_VERSION && d["kind"] == "Test" {
            out.push(parse_test(path, &text, &d)?);
        }
    }
    Ok(out)
}

/// The 1-based line of the first `key:` in `text` (for messages), else 1.
fn line_of(text: &str, key: &str) -> usize {
    let pat = format!("{key}:");
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            t.starts_with(&pat)
        })
        .map(|i| i + 1)
        .unwrap_or(1)
}

fn parse_test(path: &Path, text: &str, d: &Value) -> Result<LoadedTest, E2eError> {
    let file = path.display().to_string();
    let unsupported = |key: &str, why: &str| E2eError::Unsupported {
        at: format!("{file}:{}", line_of(text, key)),
        what: key.to_string(),
        why: why.to_string(),
    };
    let malformed = |message: String| E2eError::Malformed {
        file: file.clone(),
        message,
    };
    let name = d["metadata"]["name"]
        .as_str()
        .ok_or_else(|| malformed("metadata.name: a Test needs a name".into()))?
        .to_string();
    let spec = &d["spec"];
    let empty = serde_json::Map::new();
    let spec_map = spec.as_object().unwrap_or(&empty);
    for key in spec_map.keys() {
        match key.as_str() {
            "steps"
            | "namespace"
            | "bindings"
            | "timeouts"
            | "skip"
            | "description"
            | "concurrent"
            | "skipDelete"
            | "failFast"
            | "template"
            | "catch"
            | "namespaceTemplate"
            | "delayBeforeCleanup"
            | "forceTerminationGracePeriod"
            | "deletionPropagationPolicy" => {}
            "cluster" | "clusters" => {
                return Err(unsupported(key, "several clusters are not supported"));
            }
            other => return Err(unsupported(other, "this Test field is not supported")),
        }
    }
    let mut timeouts = Timeouts::default();
    if let Some(t) = spec["timeouts"].as_object() {
        for (k, v) in t {
            let dur = v
                .as_str()
                .and_then(parse_duration)
                .ok_or_else(|| malformed(format!("spec.timeouts.{k}: {v} is not a duration")))?;
            match k.as_str() {
                "apply" => timeouts.apply = dur,
                "assert" => timeouts.assert = dur,
                "error" => timeouts.error = dur,
                "delete" => timeouts.delete = dur,
                "cleanup" => timeouts.cleanup = dur,
                "exec" => timeouts.exec = dur,
                other => return Err(unsupported(other, "unknown timeout")),
            }
        }
    }
    let bindings =
        parse_bindings(&spec["bindings"]).map_err(|m| malformed(format!("spec.bindings: {m}")))?;
    let mut steps = Vec::new();
    for (i, s) in spec["steps"].as_array().into_iter().flatten().enumerate() {
        let step_name = s["name"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("step-{}", i + 1));
        if let Some(m) = s.as_object() {
            for key in m.keys() {
                match key.as_str() {
                    "name" | "try" | "catch" | "finally" | "cleanup" | "bindings"
                    | "description" | "timeouts" | "skipDelete" | "template" => {}
                    other => return Err(unsupported(other, "this step field is not supported")),
                }
            }
        }
        let ops = |block: &str| -> Result<Vec<Operation>, E2eError> {
            let mut out = Vec::new();
            for (j, o) in s[block].as_array().into_iter().flatten().enumerate() {
                let Some(m) = o.as_object() else {
                    return Err(malformed(format!(
                        "spec.steps[{i}].{block}[{j}]: an operation is a mapping"
                    )));
                };
                let mut found = None;
                for (k, v) in m {
                    match k.as_str() {
                        "description" | "continueOnError" => {}
                        k if SUPPORTED_OPS.contains(&k) => found = Some((k.to_string(), v.clone())),
                        k if REFUSED_OPS.contains(&k) => {
                            return Err(unsupported(
                                k,
                                "needs real containers or a cluster feature the sandbox lacks",
                            ));
                        }
                        other => return Err(unsupported(other, "unknown operation")),
                    }
                }
                let Some((op, body)) = found else {
                    return Err(malformed(format!(
                        "spec.steps[{i}].{block}[{j}]: no operation"
                    )));
                };
                out.push(Operation {
                    op,
                    body,
                    continue_on_error: m
                        .get("continueOnError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                });
            }
            Ok(out)
        };
        steps.push(Step {
            name: step_name,
            bindings: parse_bindings(&s["bindings"])
                .map_err(|m| malformed(format!("spec.steps[{i}].bindings: {m}")))?,
            try_ops: ops("try")?,
            catch: ops("catch")?,
            finally: ops("finally")?,
            cleanup: ops("cleanup")?,
        });
    }
    if steps.is_empty() {
        return Err(malformed(
            "spec.steps: a Test needs at least one step".into(),
        ));
    }
    Ok(LoadedTest {
        name,
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        file: path.to_path_buf(),
        namespace: spec["namespace"]
            .as_str()
            .or(spec["namespaceTemplate"]["metadata"]["name"]
                .as_str()
                .filter(|n| !n.starts_with('(')))
            .map(String::from),
        namespace_template: spec.get("namespaceTemplate").cloned(),
        bindings,
        timeouts,
        skip: spec["skip"].as_bool().unwrap_or(false),
        steps,
    })
}

/// `bindings: [{name, value}]`.
pub fn parse_bindings(v: &Value) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for b in v.as_array().into_iter().flatten() {
        let name = b["name"]
            .as_str()
            .ok_or_else(|| "a binding needs a name".to_string())?;
        out.push((name.to_string(), b["value"].clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("x"), None);
    }
}
