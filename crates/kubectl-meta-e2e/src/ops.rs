//! The operations of a chainsaw step: apply, create, update, patch, delete, assert, error
//! (objects, from `file` or inline `resource`, templated), command and script (with
//! `KUBECONFIG` and `NAMESPACE` set to the environment's), sleep, and wait, get, describe,
//! events (through kubectl against the environment). Assertions poll the server until they
//! hold or their timeout passes.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::matching::{self, Bindings};
use super::model::{self, LoadedTest, Operation};
use super::{E2eError, Env, Setup, StepFailure};

/// How often assertions re-read the server.
const POLL: Duration = Duration::from_millis(50);

/// How long the cleanup on a named cluster waits for each deleted object to go.
pub const CLEANUP_WAIT: Duration = Duration::from_secs(60);

/// Mark a failure with its step and block.
pub fn tag(mut f: StepFailure, step: &str, block: &str) -> StepFailure {
    f.step = step.to_string();
    f.operation = format!("{block}{}", f.operation);
    f
}

/// An operation's outcome: ok, a failure of the test, or a test this runner cannot run.
pub type OpResult = Result<Result<(), StepFailure>, E2eError>;

fn failure(op: &str, object: Option<String>, message: impl Into<String>) -> StepFailure {
    StepFailure {
        step: String::new(),
        operation: op.to_string(),
        object,
        path: None,
        expected: None,
        actual: None,
        message: message.into(),
    }
}

/// What the operations of one test share.
pub struct Ctx<'a> {
    env: &'a Env,
    setup: &'a Setup,
    test: &'a LoadedTest,
    namespace: String,
    /// Types the test touched (for snapshots).
    touched: BTreeSet<(String, String, String)>,
    touched_res: Vec<(ApiResource, bool)>,
    /// Objects the test created (by `create` or `apply`), in order, with their description:
    /// what [`Ctx::remove_created`] deletes on a named cluster.
    created: Vec<(Api<DynamicObject>, String, String)>,
    /// Whether the test's namespace was created here (then it is deleted after).
    created_namespace: bool,
}

/// A resolved object: its API, name, and description.
struct Target {
    api: Api<DynamicObject>,
    name: Option<String>,
    desc: String,
    doc: Value,
}

impl<'a> Ctx<'a> {
    /// Operations of `test` against `env`, in `namespace`.
    pub fn new(env: &'a Env, setup: &'a Setup, test: &'a LoadedTest, namespace: String) -> Self {
        Ctx {
            env,
            setup,
            test,
            namespace,
            touched: BTreeSet::new(),
            touched_res: Vec::new(),
            created: Vec::new(),
            created_namespace: false,
        }
    }

    fn bad(&self, message: String) -> E2eError {
        E2eError::Malformed {
            file: self.test.file.display().to_string(),
            message,
        }
    }

    /// Create the test's namespace (from `spec.namespaceTemplate` when given).
    pub async fn ensure_namespace(&mut self, b: &Bindings) -> Result<(), E2eError> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> =
            Api::all(self.env.conn.client.clone());
        // `spec.namespaceTemplate` (rendered), its name the test's namespace.
        let mut doc = match &self.test.namespace_template {
            Some(t) => matching::template(t, b)
                .map_err(|m| self.bad(format!("spec.namespaceTemplate: {m}")))?,
            None => json!({}),
        };
        if !doc.is_object() {
            return Err(self.bad("spec.namespaceTemplate: not an object".into()));
        }
        doc["metadata"]["name"] = json!(self.namespace);
        let ns = serde_json::from_value(doc)
            .map_err(|e| self.bad(format!("spec.namespaceTemplate: {e}")))?;
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {
                self.created_namespace = true;
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(E2eError::Environment(format!(
                "creating namespace {}: {e}",
                self.namespace
            ))),
        }
    }

    /// Delete what the test created, newest first, then its namespace if it was created here,
    /// and wait (at most [`CLEANUP_WAIT`] each) until they are gone: a test on a named cluster
    /// leaves nothing behind, as chainsaw's. What cannot be deleted is logged, not failed.
    pub async fn remove_created(&mut self) {
        let dp = DeleteParams::background();
        let mut pending = Vec::new();
        for (api, name, desc) in self.created.drain(..).rev() {
            match api.delete(&name, &dp).await {
                Ok(_) => pending.push((api, name, desc)),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!("e2e cleanup: deleting {desc}: {e}"),
            }
        }
        if self.created_namespace {
            let api: Api<DynamicObject> = Api::all_with(
                self.env.conn.client.clone(),
                &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            );
            match api.delete(&self.namespace, &dp).await {
                Ok(_) => pending.push((
                    api,
                    self.namespace.clone(),
                    format!("Namespace {}", self.namespace),
                )),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!("e2e cleanup: deleting namespace {}: {e}", self.namespace),
            }
        }
        for (api, name, desc) in pending {
            let deadline = Instant::now() + CLEANUP_WAIT;
            loop {
                match api.get_opt(&name).await {
                    Ok(None) => break,
                    _ if Instant::now() >= deadline => {
                        tracing::warn!("e2e cleanup: {desc} still there after {CLEANUP_WAIT:?}");
                        break;
                    }
                    _ => tokio::time::sleep(POLL * 2).await,
                }
            }
        }
    }

    /// Every object of the touched types in the test's namespace, sorted.
    pub async fn snapshot(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for (ar, namespaced) in &self.touched_res {
            let api: Api<DynamicObject> = if *namespaced {
                Api::namespaced_with(self.env.conn.client.clone(), &self.namespace, ar)
            } else {
                continue;
            };
            if let Ok(list) = api.list(&ListParams::default()).await {
                for o in list.items {
                    let mut v = serde_json::to_value(&o).unwrap_or(Value::Null);
                    v["apiVersion"] = json!(ar.api_version);
                    v["kind"] = json!(ar.kind);
                    out.push(v);
                }
            }
        }
        out.sort_by_key(|v| {
            (
                v["apiVersion"].as_str().unwrap_or("").to_string(),
                v["kind"].as_str().unwrap_or("").to_string(),
                v["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                v["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        });
        out
    }

    /// Run one operation.
    pub async fn run(&mut self, op: &Operation, b: &Bindings) -> OpResult {
        let body = &op.body;
        let t = self.test.timeouts;
        let timeout = |default: Duration| {
            body["timeout"]
                .as_str()
                .and_then(model::parse_duration)
                .unwrap_or(default)
        };
        match op.op.as_str() {
            "apply" | "create" | "update" | "patch" => {
                let docs = self.documents(&op.op, body, b)?;
                for d in docs {
                    if let Err(f) = self.write(&op.op, d, body, b).await? {
                        return Ok(Err(f));
                    }
                }
                Ok(Ok(()))
            }
            "assert" | "error" => {
                let docs = self.documents(&op.op, body, b)?;
                let wait = timeout(if op.op == "assert" { t.assert } else { t.error });
                for d in docs {
                    if let Err(f) = self.assert(&op.op, d, b, wait).await? {
                        return Ok(Err(f));
                    }
                }
                Ok(Ok(()))
            }
            "delete" => self.delete(body, b, timeout(t.delete)).await,
            "command" | "script" => self.exec(&op.op, body, b, timeout(t.exec)).await,
            "sleep" => {
                let d = body["duration"]
                    .as_str()
                    .and_then(model::parse_duration)
                    .ok_or_else(|| self.bad("sleep: duration is not a duration".into()))?;
                tokio::time::sleep(d).await;
                Ok(Ok(()))
            }
            "wait" | "get" | "describe" | "events" => self.kubectl(&op.op, body, b).await,
            other => Err(E2eError::Unsupported {
                at: self.test.file.display().to_string(),
                what: other.to_string(),
                why: "unknown operation".into(),
            }),
        }
    }

    /// The documents of an operation (`file` glob, or `resource`), templated.
    fn documents(&self, op: &str, body: &Value, b: &Bindings) -> Result<Vec<Value>, E2eError> {
        // assert and error resources are assertion trees: their `(expr)` are evaluated against
        // the objects read, not rendered beforehand.
        let template =
            body["template"].as_bool().unwrap_or(true) && op != "assert" && op != "error";
        let mut raw = Vec::new();
        if let Some(r) = body.get("resource") {
            raw.push(r.clone());
        }
        if let Some(f) = body["file"].as_str() {
            let paths = self.glob(f);
            if paths.is_empty() {
                return Err(self.bad(format!("{op}: file {f:?}: no such file")));
            }
            for p in paths {
                raw.extend(model::read_yaml_docs(&p)?);
            }
        }
        if raw.is_empty() {
            return Err(self.bad(format!("{op}: needs a file or a resource")));
        }
        // A `v1` `List` (kubectl's, chainsaw's) stands for its items.
        let raw: Vec<Value> = raw
            .into_iter()
            .flat_map(
                |d| match (d["apiVersion"].as_str(), d["kind"].as_str(), &d["items"]) {
                    (Some("v1"), Some("List"), Value::Array(items)) => items.clone(),
                    _ => vec![d],
                },
            )
            .collect();
        let mut out = Vec::new();
        for mut d in raw {
            if template {
                d = matching::template(&d, b).map_err(|m| self.bad(format!("{op}: {m}")))?;
            }
            out.push(d);
        }
        Ok(out)
    }

    /// `file:` relative to the test's directory, with `*` globs in the last component.
    fn glob(&self, pattern: &str) -> Vec<PathBuf> {
        let p = self.test.dir.join(pattern);
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if !name.contains('*') {
            return if p.is_file() { vec![p] } else { Vec::new() };
        }
        let dir = p.parent().map(PathBuf::from).unwrap_or_default();
        let (pre, post) = name.split_once('*').unwrap_or((&name, ""));
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|q| {
                q.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len()
                })
            })
            .collect();
        out.sort();
        out
    }

    async fn target(
        &mut self,
        op: &str,
        mut doc: Value,
        b: &Bindings,
    ) -> Result<Result<Target, StepFailure>, E2eError> {
        // A name or namespace written as an expression (`($namespace)`) is evaluated first.
        for key in ["name", "namespace"] {
            if let Some(e) = doc["metadata"][key].as_str().and_then(matching::expression) {
                let v = matching::eval(e, &Value::Null, b)
                    .map_err(|m| self.bad(format!("{op}: {m}")))?;
                doc["metadata"][key] = v;
            }
        }
        let (Some(av), Some(kind)) = (doc["apiVersion"].as_str(), doc["kind"].as_str()) else {
            return Err(self.bad(format!("{op}: a resource needs apiVersion and kind")));
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let info = loop {
            match self.env.discovery.resolve_kind(av, kind).await {
                Ok(i) => break i,
                Err(_) if Instant::now() < deadline => tokio::time::sleep(POLL * 4).await,
                Err(e) => return Ok(Err(failure(op, Some(kind.to_string()), format!("{e}")))),
            }
        };
        let name = doc["metadata"]["name"].as_str().map(String::from);
        let ns = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or(&self.namespace)
            .to_string();
        let client = self.env.conn.client.clone();
        let ar = info.api_resource.clone();
        let api = if info.namespaced {
            Api::namespaced_with(client, &ns, &ar)
        } else {
            Api::all_with(client, &ar)
        };
        let shown = name.clone().unwrap_or_else(|| "*".into());
        let desc = if info.namespaced {
            format!("{kind} {ns}/{shown}")
        } else {
            format!("{kind} {shown}")
        };
        if self
            .touched
            .insert((ar.group.clone(), ar.version.clone(), ar.kind.clone()))
        {
            self.touched_res.push((ar.clone(), info.namespaced));
        }
        if info.namespaced {
            doc["metadata"]["namespace"] = json!(ns);
        }
        Ok(Ok(Target {
            api,
            name,
            desc,
            doc,
        }))
    }

    async fn write(&mut self, op: &str, doc: Value, body: &Value, b: &Bindings) -> OpResult {
        let t = match self.target(op, doc, b).await? {
            Ok(t) => t,
            Err(f) => return Ok(Err(f)),
        };
        let Some(name) = t.name.clone() else {
            return Err(self.bad(format!("{op}: {} needs metadata.name", t.desc)));
        };
        let obj: DynamicObject = serde_json::from_value(t.doc.clone())
            .map_err(|e| self.bad(format!("{op}: {}: {e}", t.desc)))?;
        let pp = PostParams::default();
        let mut created = false;
        let result = match op {
            "create" => {
                created = true;
                t.api.create(&pp, &obj).await
            }
            "patch" => {
                t.api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&t.doc))
                    .await
            }
            "update" => match t.api.get(&name).await {
                Ok(cur) => {
                    let mut o = obj.clone();
                    o.metadata.resource_version = cur.metadata.resource_version;
                    t.api.replace(&name, &pp, &o).await
                }
                Err(e) => Err(e),
            },
            _ => match t.api.get_opt(&name).await {
                Ok(None) => {
                    created = true;
                    t.api.create(&pp, &obj).await
                }
                Ok(Some(_)) => {
                    t.api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&t.doc))
                        .await
                }
                Err(e) => Err(e),
            },
        };
        if created && result.is_ok() {
            self.created
                .push((t.api.clone(), name.clone(), t.desc.clone()));
        }
        let (object, error) = match result {
            Ok(o) => (serde_json::to_value(&o).unwrap_or(Value::Null), Value::Null),
            Err(e) => (
                Value::Null,
                json!(kubectl_meta_engine::k8s::kube_error_message(&e)),
            ),
        };
        self.expect(op, &t.desc, body, b, &object, &error)
    }

    /// `expect: [{match, check}]`, or without it: any error fails.
    fn expect(
        &self,
        op: &str,
        desc: &str,
        body: &Value,
        b: &Bindings,
        object: &Value,
        error: &Value,
    ) -> OpResult {
        let Some(expects) = body["expect"].as_array() else {
            return Ok(match error {
                Value::Null => Ok(()),
                e => Err(failure(
                    op,
                    Some(desc.to_string()),
                    e.as_str().unwrap_or("").to_string(),
                )),
            });
        };
        let mut b = b.clone();
        b.insert("error".into(), error.clone());
        for e in expects {
            if let Some(m) = e.get("match")
                && matching::check(m, object, &b).is_err()
            {
                continue;
            }
            if let Err(m) = matching::check(&e["check"], object, &b) {
                return Ok(Err(StepFailure {
                    path: Some(m.path),
                    expected: Some(m.expected),
                    actual: Some(m.actual),
                    ..failure(op, Some(desc.to_string()), format!("expect: {}", m.reason))
                }));
            }
        }
        Ok(Ok(()))
    }

    async fn candidates(&self, t: &Target) -> Result<Vec<Value>, String> {
        match &t.name {
            Some(n) => match t.api.get_opt(n).await {
                Ok(Some(o)) => Ok(vec![serde_json::to_value(&o).unwrap_or(Value::Null)]),
                Ok(None) => Ok(Vec::new()),
                Err(e) => Err(kubectl_meta_engine::k8s::kube_error_message(&e)),
            },
            None => {
                let mut lp = ListParams::default();
                if let Some(labels) = t.doc["metadata"]["labels"].as_object() {
                    let sel: Vec<String> = labels
                        .iter()
                        .filter(|(k, _)| matching::expression(k).is_none())
                        .filter_map(|(k, v)| {
                            v.as_str()
                                .filter(|v| matching::expression(v).is_none())
                                .map(|v| format!("{k}={v}"))
                        })
                        .collect();
                    if !sel.is_empty() {
                        lp = lp.labels(&sel.join(","));
                    }
                }
                t.api
                    .list(&lp)
                    .await
                    .map(|l| {
                        l.items
                            .iter()
                            .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
                            .collect()
                    })
                    .map_err(|e| kubectl_meta_engine::k8s::kube_error_message(&e))
            }
        }
    }

    async fn assert(&mut self, op: &str, doc: Value, b: &Bindings, wait: Duration) -> OpResult {
        let t = match self.target(op, doc, b).await? {
            Ok(t) => t,
            Err(f) => return Ok(Err(f)),
        };
        let mut expected = t.doc.clone();
        // apiVersion/kind were used to find the objects; the server's JSON may lack them.
        if let Some(m) = expected.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        let deadline = Instant::now() + wait;
        loop {
            let last = match self.candidates(&t).await {
                Err(e) => Err(failure(op, Some(t.desc.clone()), e)),
                Ok(found) => {
                    let mut first_miss = None;
                    let mut matched = false;
                    for o in &found {
                        match matching::check(&expected, o, b) {
                            Ok(()) => {
                                matched = true;
                                break;
                            }
                            Err(m) => {
                                first_miss.get_or_insert(m);
                            }
                        }
                    }
                    match (op, matched) {
                        ("assert", true) | ("error", false) => Ok(()),
                        ("error", true) => Err(failure(
                            op,
                            Some(t.desc.clone()),
                            "an object matches what must not exist",
                        )),
                        _ => match first_miss {
                            Some(m) => Err(StepFailure {
                                path: Some(m.path),
                                expected: Some(m.expected),
                                actual: Some(m.actual),
                                ..failure(op, Some(t.desc.clone()), m.reason)
                            }),
                            None => Err(failure(op, Some(t.desc.clone()), "not found")),
                        },
                    }
                }
            };
            match last {
                Ok(()) => return Ok(Ok(())),
                Err(mut f) if Instant::now() >= deadline => {
                    f.message = format!("{} (after {:?})", f.message, wait);
                    return Ok(Err(f));
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    async fn delete(&mut self, body: &Value, b: &Bindings, wait: Duration) -> OpResult {
        let docs = match body.get("ref") {
            Some(r) => vec![matching::template(
                &json!({"apiVersion": r["apiVersion"], "kind": r["kind"],
                    "metadata": {"name": r["name"], "namespace": r["namespace"], "labels": r["labels"]}}),
                b,
            )
            .map_err(|m| self.bad(format!("delete: {m}")))?],
            None => self.documents("delete", body, b)?,
        };
        for mut d in docs {
            if let Some(m) = d["metadata"].as_object_mut() {
                m.retain(|_, v| !v.is_null());
            }
            let t = match self.target("delete", d, b).await? {
                Ok(t) => t,
                Err(f) => return Ok(Err(f)),
            };
            let names: Vec<String> = match &t.name {
                Some(n) => vec![n.clone()],
                None => match self.candidates(&t).await {
                    Ok(v) => v
                        .iter()
                        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
                        .collect(),
                    Err(e) => return Ok(Err(failure("delete", Some(t.desc.clone()), e))),
                },
            };
            let dp = DeleteParams::background();
            for n in &names {
                let error = match t.api.delete(n, &dp).await {
                    Ok(_) => Value::Null,
                    Err(kube::Error::Api(e)) if e.code == 404 && body.get("expect").is_none() => {
                        Value::Null
                    }
                    Err(e) => json!(kubectl_meta_engine::k8s::kube_error_message(&e)),
                };
                if let Err(f) = self.expect("delete", &t.desc, body, b, &Value::Null, &error)? {
                    return Ok(Err(f));
                }
            }
            let deadline = Instant::now() + wait;
            for n in &names {
                loop {
                    match t.api.get_opt(n).await {
                        Ok(None) | Err(_) => break,
                        Ok(Some(_)) if Instant::now() >= deadline => {
                            return Ok(Err(failure(
                                "delete",
                                Some(t.desc.clone()),
                                format!("still there after {wait:?}"),
                            )));
                        }
                        Ok(Some(_)) => tokio::time::sleep(POLL).await,
                    }
                }
            }
        }
        Ok(Ok(()))
    }

    async fn exec(&mut self, op: &str, body: &Value, b: &Bindings, wait: Duration) -> OpResult {
        // The operation's environment: KUBECONFIG, NAMESPACE, then `env` (templated).
        let mut env: Vec<(String, String)> = vec![
            (
                "KUBECONFIG".into(),
                self.env.kubeconfig.display().to_string(),
            ),
            ("NAMESPACE".into(), self.namespace.clone()),
        ];
        for e in body["env"].as_array().into_iter().flatten() {
            let v = matching::template(&e["value"], b)
                .map_err(|m| self.bad(format!("{op}: env: {m}")))?;
            if let Some(n) = e["name"].as_str() {
                let v = v
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string());
                env.push((n.to_string(), v));
            }
        }
        let mut cmd = if op == "script" {
            let content = body["content"]
                .as_str()
                .ok_or_else(|| self.bad("script: needs content".into()))?;
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c").arg(content);
            c
        } else {
            let entry = body["entrypoint"]
                .as_str()
                .ok_or_else(|| self.bad("command: needs an entrypoint".into()))?;
            let mut c = tokio::process::Command::new(entry);
            for a in body["args"].as_array().into_iter().flatten() {
                let a = matching::template(a, b).map_err(|m| self.bad(format!("command: {m}")))?;
                let a = a
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| a.to_string());
                // No shell runs a command: its `$NAME` / `${NAME}` of the operation's
                // environment are expanded here, as chainsaw does.
                c.arg(expand_env(&a, &env));
            }
            c
        };
        cmd.current_dir(&self.test.dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let what = body["content"]
            .as_str()
            .or(body["entrypoint"].as_str())
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        // A timeout is the operation's error, as a failed exit is: `check` sees it as `$error`
        // (chainsaw's), and without a check it fails the operation.
        let (stdout, stderr, error) = match tokio::time::timeout(wait, cmd.output()).await {
            Err(_) => (
                String::new(),
                String::new(),
                json!(format!("timed out after {wait:?}")),
            ),
            Ok(Err(e)) => return Ok(Err(failure(op, Some(what), format!("cannot run it: {e}")))),
            Ok(Ok(out)) => (
                String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
                String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
                if out.status.success() {
                    Value::Null
                } else {
                    json!(format!("exit status {}", out.status.code().unwrap_or(-1)))
                },
            ),
        };
        if self.setup.verbose {
            eprintln!("{op} {what}:\n{stdout}\n{stderr}");
        }
        let Some(check) = body.get("check") else {
            return Ok(if error.is_null() {
                Ok(())
            } else {
                Err(failure(
                    op,
                    Some(what),
                    match last_lines(&stderr, &stdout) {
                        tail if tail.is_empty() => error.as_str().unwrap_or("").to_string(),
                        tail => format!("{}: {tail}", error.as_str().unwrap_or("")),
                    },
                ))
            });
        };
        let mut b = b.clone();
        b.insert("error".into(), error);
        b.insert("stdout".into(), json!(stdout));
        b.insert("stderr".into(), json!(stderr));
        Ok(match matching::check(check, &Value::Null, &b) {
            Ok(()) => Ok(()),
            Err(m) => Err(StepFailure {
                path: Some(m.path),
                expected: Some(m.expected),
                actual: Some(m.actual),
                ..failure(op, Some(what), format!("check: {}", m.reason))
            }),
        })
    }

    /// wait, get, describe, events: kubectl against the environment.
    async fn kubectl(&mut self, op: &str, body: &Value, b: &Bindings) -> OpResult {
        let body = matching::template(body, b).map_err(|m| self.bad(format!("{op}: {m}")))?;
        let mut args: Vec<String> = vec![op.to_string()];
        if op != "events" {
            let kind = body["kind"]
                .as_str()
                .ok_or_else(|| self.bad(format!("{op}: needs kind")))?
                .to_lowercase();
            let group = body["apiVersion"]
                .as_str()
                .and_then(|a| a.split_once('/').map(|(g, _)| g.to_string()));
            let res = match group {
                Some(g) => format!("{kind}.{g}"),
                None => kind,
            };
            match body["name"].as_str() {
                Some(n) => args.push(format!("{res}/{n}")),
                None => {
                    args.push(res);
                    if let Some(s) = body["selector"].as_str() {
                        args.push(format!("--selector={s}"));
                    } else if op == "wait" {
                        args.push("--all".into());
                    }
                }
            }
        }
        let ns = body["namespace"]
            .as_str()
            .unwrap_or(&self.namespace)
            .to_string();
        args.push(format!("--namespace={ns}"));
        if op == "wait" {
            let f = &body["for"];
            if let Some(c) = f.get("condition") {
                let name = c["name"].as_str().unwrap_or("");
                match c["value"].as_str() {
                    Some(v) => args.push(format!("--for=condition={name}={v}")),
                    None => args.push(format!("--for=condition={name}")),
                }
            } else if f.get("creation").is_some() {
                args.push("--for=create".into());
            } else if f.get("deletion").is_some() {
                args.push("--for=delete".into());
            } else if let Some(j) = f.get("jsonPath") {
                args.push(format!(
                    "--for=jsonpath={}={}",
                    j["path"].as_str().unwrap_or(""),
                    j["value"].as_str().unwrap_or("")
                ));
            } else {
                return Err(
                    self.bad("wait: for needs condition, creation, deletion or jsonPath".into())
                );
            }
            let t = body["timeout"].as_str().unwrap_or("30s");
            args.push(format!("--timeout={t}"));
        }
        let out = tokio::process::Command::new("kubectl")
            .args(&args)
            .env("KUBECONFIG", &self.env.kubeconfig)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await;
        let what = format!("kubectl {}", args.join(" "));
        match out {
            Err(e) => Ok(Err(failure(
                op,
                None,
                format!("{what}: cannot run kubectl: {e}"),
            ))),
            Ok(o) => {
                if self.setup.verbose {
                    eprintln!("{what}:\n{}", String::from_utf8_lossy(&o.stdout));
                }
                Ok(if o.status.success() || op != "wait" {
                    Ok(())
                } else {
                    Err(failure(
                        op,
                        None,
                        format!("{what}: {}", String::from_utf8_lossy(&o.stderr).trim()),
                    ))
                })
            }
        }
    }
}

/// `$NAME` and `${NAME}` of `env` replaced by their values (later entries win); other `$`
/// left as they are.
fn expand_env(arg: &str, env: &[(String, String)]) -> String {
    let lookup = |name: &str| env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = match after.strip_prefix('{') {
            Some(b) => match b.find('}') {
                Some(end) => (&b[..end], end + 2),
                None => ("", 0),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        match lookup(name).filter(|_| !name.is_empty()) {
            Some(v) => {
                out.push_str(v);
                rest = &after[len..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn last_lines(stderr: &str, stdout: &str) -> String {
    let text = if stderr.is_empty() { stdout } else { stderr };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_arguments_expand_the_operation_environment() {
        let env = vec![
            ("NAMESPACE".to_string(), "ns".to_string()),
            ("GREETINGS".to_string(), "hello chainsaw".to_string()),
        ];
        assert_eq!(expand_env("$GREETINGS", &env), "hello chainsaw");
        assert_eq!(expand_env("-n=${NAMESPACE}x", &env), "-n=nsx");
        assert_eq!(
            expand_env("$UNSET and $ and ${", &env),
            "$UNSET and $ and ${"
        );
        assert_eq!(expand_env("cost: 5$", &env), "cost: 5$");
    }
}
