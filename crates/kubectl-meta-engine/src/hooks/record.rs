//! `dev --record DIR` / `dryrun --record DIR`: every answered hook exchange written as a test
//! case for `kubectl meta test` (format: docs/hook-test-case.md, schema
//! docs/hook-test-case.schema.json).
//!
//! Layout: `DIR/<controller>/<parent>/<hook>[-<map key>]-<request hash>.yaml`, with `<parent>`
//! as in `--dump-requests` ([`super::dump::component`]). The hash is taken over the request
//! without what changes on every write of the same objects (`resourceVersion`,
//! `managedFields`, `uid`, `creationTimestamp`), so an identical exchange is one file, and a
//! newer answer to the same request replaces the older one (the file is rewritten only when
//! its text changes).
//!
//! Secret values (`data`, `stringData` and the last-applied annotations of Secrets,
//! anywhere in the request and the answer) are replaced by stable placeholders unless the
//! secrets are recorded on purpose (`--record-secrets`); the file's `secrets:` field says which.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::CallInfo;
use super::dump::component;

/// `apiVersion` of a test case file.
pub const CASE_API_VERSION: &str = "kubectl-meta.dev/v1";
/// `kind` of a test case file.
pub const CASE_KIND: &str = "HookTest";
/// The end of the annotations that hold a copy of what was applied, Secret values included
/// (`kubectl.kubernetes.io/...`, and the engine's `metacontroller.k8s.io/...`).
const LAST_APPLIED_SUFFIX: &str = "/last-applied-configuration";

/// Whether a case holds real Secret values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretsMode {
    /// Replaced by placeholders (the default).
    #[default]
    Redacted,
    /// Recorded as they were (`--record-secrets`).
    Recorded,
}

impl SecretsMode {
    /// [`SecretsMode::Recorded`] when `keep` (`--record-secrets`), else redacted.
    pub fn keeping(keep: bool) -> SecretsMode {
        if keep {
            SecretsMode::Recorded
        } else {
            SecretsMode::Redacted
        }
    }
}

/// One hook exchange as a test case: who was called for what, the request as sent and the
/// answer expected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    /// [`CASE_API_VERSION`].
    pub api_version: String,
    /// [`CASE_KIND`].
    pub kind: String,
    /// The controller definition's name.
    pub controller: String,
    /// `CompositeController`, `DecoratorController` or `MapController` (optional in
    /// hand-written cases: the definition of that name decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_kind: Option<String>,
    /// `sync`, `finalize`, `customize`, `map` or `tombstone`.
    pub hook: String,
    /// The parent (or decorator target) `namespace/name`, or `name`.
    pub parent: String,
    /// The map key (MapController map and tombstone calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_key: Option<String>,
    /// Whether Secret values are placeholders (`redacted`) or real (`recorded`).
    #[serde(default)]
    pub secrets: SecretsMode,
    /// Answer fields not compared (field paths, `*` matches one path step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
    /// The request the hook receives.
    pub request: Value,
    /// The answer expected.
    pub response: Value,
}

/// Why a case file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The file could not be read.
    #[error("{path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not YAML, or a field is missing or wrong.
    #[error("{path}: not a valid test case: {message} (format: docs/hook-test-case.md)")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with the field path.
        message: String,
    },
}

impl Case {
    /// The case of one answered exchange (Secret values redacted unless `secrets` is
    /// [`SecretsMode::Recorded`]).
    pub fn from_exchange(
        info: &CallInfo,
        request: &Value,
        answer: &Value,
        secrets: SecretsMode,
    ) -> Case {
        let (mut request, mut response) = (request.clone(), answer.clone());
        if secrets == SecretsMode::Redacted {
            redact_secrets(&mut request);
            redact_secrets(&mut response);
        }
        Case {
            api_version: CASE_API_VERSION.into(),
            kind: CASE_KIND.into(),
            controller: info.controller.clone(),
            controller_kind: Some(info.controller_kind.clone()),
            hook: info.hook.clone(),
            parent: info.parent.clone(),
            map_key: info.map_key.clone(),
            secrets,
            ignore: Vec::new(),
            request,
            response,
        }
    }

    /// Read a case file; errors name the file and the field.
    pub fn read(path: &Path) -> Result<Case, CaseError> {
        let text = std::fs::read_to_string(path).map_err(|source| CaseError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Case::parse(&text).map_err(|message| CaseError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parse a case from YAML (or JSON) text; the error names the field.
    pub fn parse(text: &str) -> Result<Case, String> {
        let value: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let case: Case = serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                inner.to_string()
            } else {
                format!("{path}: {inner}")
            }
        })?;
        if case.api_version != CASE_API_VERSION {
            return Err(format!(
                "apiVersion: {:?}, expected {CASE_API_VERSION:?}",
                case.api_version
            ));
        }
        if case.kind != CASE_KIND {
            return Err(format!("kind: {:?}, expected {CASE_KIND:?}", case.kind));
        }
        if !case.request.is_object() {
            return Err("request: must be an object (the request the hook receives)".into());
        }
        if !case.response.is_object() {
            return Err("response: must be an object (the answer expected)".into());
        }
        Ok(case)
    }

    /// The case as file text: a comment saying what it is, then the YAML.
    pub fn to_text(&self, origin: &str) -> Result<String, String> {
        let secrets = match self.secrets {
            SecretsMode::Redacted => {
                "Secret values are placeholders (record with --record-secrets to keep them)."
            }
            SecretsMode::Recorded => {
                "Secret values are REAL (recorded with --record-secrets): do not commit this file."
            }
        };
        let yaml = serde_saphyr::to_string(self).map_err(|e| e.to_string())?;
        Ok(format!(
            "# A kubectl meta test case ({origin}); format: docs/hook-test-case.md.\n# {secrets}\n{yaml}"
        ))
    }

    /// Where this case is written under `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        let mut name = component(&self.hook);
        if let Some(k) = &self.map_key {
            name.push('-');
            name.push_str(&component(k));
        }
        let hash = kube_apimachinery::hash::hash_value(&stable_request(&self.request));
        name.push('-');
        name.push_str(&hash[..8]);
        name.push_str(".yaml");
        dir.join(component(&self.controller))
            .join(component(&self.parent))
            .join(name)
    }
}

/// Write one answered exchange as a case under `dir`; returns the file, and whether it was
/// (re)written (`false`: the same case is already there).
pub fn record(
    dir: &Path,
    info: &CallInfo,
    request: &Value,
    answer: &Value,
    secrets: SecretsMode,
    origin: &str,
) -> std::io::Result<(PathBuf, bool)> {
    let case = Case::from_exchange(info, request, answer, secrets);
    write_case(dir, &case, origin)
}

/// Write `case` under `dir` (see [`Case::path_in`]), keeping the `ignore:` list of a case
/// already there; `false` when the file already says the same.
pub fn write_case(dir: &Path, case: &Case, origin: &str) -> std::io::Result<(PathBuf, bool)> {
    let path = case.path_in(dir);
    let mut case = case.clone();
    if let Ok(old) = Case::read(&path) {
        if old.response == case.response
            && old.secrets == case.secrets
            && stable_request(&old.request) == stable_request(&case.request)
        {
            return Ok((path, false));
        }
        case.ignore = old.ignore;
    }
    case.write_to(&path, origin)?;
    Ok((path, true))
}

impl Case {
    /// Write the case to `path` (its folder created): whole, then renamed, so a concurrent
    /// reader never sees half a case.
    pub fn write_to(&self, path: &Path, origin: &str) -> std::io::Result<()> {
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)?;
        }
        let text = self.to_text(origin).map_err(std::io::Error::other)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

/// The request without what changes on every write of the same objects.
fn stable_request(v: &Value) -> Value {
    let mut v = v.clone();
    strip_volatile_deep(&mut v);
    v
}

fn strip_volatile_deep(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                for k in [
                    "resourceVersion",
                    "managedFields",
                    "uid",
                    "creationTimestamp",
                ] {
                    meta.shift_remove(k);
                }
            }
            m.values_mut().for_each(strip_volatile_deep);
            if m.get("controller").is_some_and(Value::is_boolean) {
                // ownerReferences items: their uid changes with the owner.
                m.shift_remove("uid");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_volatile_deep),
        _ => {}
    }
}

/// Replace the values of every Secret inside `v` by placeholders: `data` values by the
/// base64 of `redacted:<key>`, `stringData` values by `redacted:<key>`, and the last-applied
/// annotations by their own redacted copies. Stable: the same Secret always gets the same text.
pub fn redact_secrets(v: &mut Value) {
    crate::k8s::object::visit_secrets(v, &mut redact_secret);
}

/// The placeholder of Secret `data` key `key` (base64, so hooks that decode it still work).
pub fn data_placeholder(key: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("redacted:{key}"))
}

fn redact_secret(m: &mut Map<String, Value>) {
    if let Some(Value::Object(data)) = m.get_mut("data") {
        for (k, val) in data.iter_mut() {
            if !val.is_null() {
                *val = Value::String(data_placeholder(k));
            }
        }
    }
    if let Some(Value::Object(data)) = m.get_mut("stringData") {
        for (k, val) in data.iter_mut() {
            if !val.is_null() {
                *val = Value::String(format!("redacted:{k}"));
            }
        }
    }
    // The last-applied annotations (kubectl's, and the engine's own) hold a copy of the values.
    let annotations = m
        .get_mut("metadata")
        .and_then(|meta| meta.get_mut("annotations"))
        .and_then(Value::as_object_mut);
    for (key, text) in annotations.into_iter().flatten() {
        if !key.ends_with(LAST_APPLIED_SUFFIX) {
            continue;
        }
        let redacted = text
            .as_str()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .map(|mut applied| {
                if let Value::Object(am) = &mut applied {
                    redact_secret(am);
                }
                applied.to_string()
            });
        *text = Value::String(redacted.unwrap_or_else(|| "redacted".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(map_key: Option<&str>) -> CallInfo {
        CallInfo {
            hook: if map_key.is_some() { "map" } else { "sync" }.into(),
            controller_kind: "CompositeController".into(),
            controller: "hello".into(),
            parent: "default/world".into(),
            map_key: map_key.map(str::to_string),
        }
    }

    fn secret(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "annotations": {"metacontroller.k8s.io/last-applied-configuration":
                json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"pw": value}}).to_string()}},
            "data": {"token": base64::engine::general_purpose::STANDARD.encode(value)},
            "stringData": {"pw": value}})
    }

    #[test]
    fn secrets_are_replaced_everywhere_by_stable_placeholders() {
        let req = json!({"parent": {"metadata": {"name": "p"}},
            "related": {"Secret.v1": {"s": secret("hunter2")}}});
        let ans = json!({"children": [secret("hunter2")]});
        let case = Case::from_exchange(&info(None), &req, &ans, SecretsMode::Redacted);
        let text = case.to_text("test").expect("yaml");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            !text.contains(&base64::engine::general_purpose::STANDARD.encode("hunter2")),
            "{text}"
        );
        assert!(text.contains("placeholders"), "{text}");
        assert!(text.contains("secrets: redacted"), "{text}");
        assert_eq!(
            case.response["children"][0]["data"]["token"],
            json!(data_placeholder("token"))
        );
        assert_eq!(
            case.response["children"][0]["stringData"]["pw"],
            json!("redacted:pw")
        );
        let again = Case::from_exchange(&info(None), &req, &ans, SecretsMode::Redacted);
        assert_eq!(case, again, "placeholders are stable");

        let kept = Case::from_exchange(&info(None), &req, &ans, SecretsMode::Recorded);
        let text = kept.to_text("test").expect("yaml");
        assert!(text.contains("hunter2"), "{text}");
        assert!(text.contains("secrets: recorded"), "{text}");
        assert!(text.contains("REAL"), "{text}");
    }

    #[test]
    fn one_file_per_request_and_the_newer_answer_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let req = |rv: &str| json!({"parent": {"metadata": {"name": "p", "resourceVersion": rv}}});
        let (p1, w1) = record(
            dir.path(),
            &info(None),
            &req("1"),
            &json!({"status": {"n": 1}}),
            SecretsMode::Redacted,
            "t",
        )
        .expect("record");
        assert!(w1);
        assert!(p1.starts_with(dir.path().join("hello/default_world")));
        let name = p1.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("sync-") && name.ends_with(".yaml"),
            "{name}"
        );
        // The same exchange (another resourceVersion only) is the same file, not rewritten.
        let (p2, w2) = record(
            dir.path(),
            &info(None),
            &req("2"),
            &json!({"status": {"n": 1}}),
            SecretsMode::Redacted,
            "t",
        )
        .expect("record");
        assert_eq!((p2.clone(), w2), (p1.clone(), false));
        // A hand-added ignore list survives a newer answer, which replaces the old one.
        let mut case = Case::read(&p1).expect("read");
        case.ignore = vec!["status.time".into()];
        std::fs::write(&p1, case.to_text("t").unwrap()).unwrap();
        let (p3, w3) = record(
            dir.path(),
            &info(None),
            &req("3"),
            &json!({"status": {"n": 2}}),
            SecretsMode::Redacted,
            "t",
        )
        .expect("record");
        assert_eq!((p3.clone(), w3), (p1.clone(), true));
        let case = Case::read(&p3).expect("read");
        assert_eq!(case.response, json!({"status": {"n": 2}}));
        assert_eq!(case.ignore, vec!["status.time".to_string()]);
        // Another request is another case; a map key is in the name.
        let (p4, _) = record(
            dir.path(),
            &info(Some("cm-a")),
            &json!({"mapKey": "cm-a"}),
            &json!({}),
            SecretsMode::Redacted,
            "t",
        )
        .expect("record");
        let name = p4.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("map-cm-a-"), "{name}");
        let files = std::fs::read_dir(p1.parent().unwrap()).unwrap().count();
        assert_eq!(files, 2, "no temporary file left behind");
    }

    #[test]
    fn malformed_cases_name_the_field() {
        let ok = "apiVersion: kubectl-meta.dev/v1\nkind: HookTest\ncontroller: c\nhook: sync\nparent: p\nrequest: {}\nresponse: {}\n";
        let case = Case::parse(ok).expect("valid");
        assert_eq!(case.secrets, SecretsMode::Redacted);
        let e = Case::parse(&ok.replace("hook: sync\n", "")).unwrap_err();
        assert!(e.contains("missing field `hook`"), "{e}");
        let e = Case::parse(&ok.replace("request: {}", "request: []")).unwrap_err();
        assert!(e.starts_with("request:"), "{e}");
        let e = Case::parse(&format!("{ok}extra: 1\n")).unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = Case::parse(&ok.replace("parent: p", "parent: p\nignore: [1]")).unwrap_err();
        assert!(e.starts_with("ignore[0]:"), "{e}");
        let e = Case::parse(&ok.replace("HookTest", "Other")).unwrap_err();
        assert!(e.starts_with("kind:"), "{e}");
    }
}
