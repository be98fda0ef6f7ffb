//! `kubectl meta replay FILE`: a flight recording's window run again, offline.
//!
//! 1. The file is read and checked ([`Window::parse`]): an unknown apiVersion or kind,
//!    truncated JSON or a recording with no events is an error naming the file, exit 2, before
//!    anything starts.
//! 2. The definitions: the recorded ones (the recording's `controllers`), or `-f`; with
//!    `--live-hooks`, `-f`, else the project's, else the recorded ones.
//! 3. An in-process sandbox (no socket, no cluster) gets a CustomResourceDefinition accepting
//!    anything for each custom resource the definitions and objects name, then the window's
//!    first state ([`Window::first_state`]): owners first, `ownerReferences` moved to the
//!    copies' uids, statuses through the status subresource.
//! 4. The real engine runs on it, serving the recorded answers ([`Window::answers`]) unless
//!    `--live-hooks`; each time it is idle, the other writers' writes the recording saw before
//!    the next sync ([`Window::external_writes`]) are applied (a merge patch or a create, with
//!    the writer's field manager), so a fight plays out as it did. The events print as `dev`
//!    prints them (`-o json`: the same NDJSON).
//! 5. It ends when every write was applied and the engine is idle, or at `--timeout`.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

use super::engine_start::{EventLog, LogStyle};
use super::exit::{Class, Classify, fail};
use crate::cli::dev::OutputArg;
use crate::cli::replay::ReplayArgs;
use crate::engine::events::{ActionVerb, EngineEvent, EventBus};
use crate::engine::flight::replay::{ExternalWrite, Subject, Window};
use crate::engine::{Engine, EngineContext, EngineOptions, HookAnswers, WaitFor};
use crate::spec::{self, ControllerDef, Source};

/// The field manager of another writer's write when the recording did not name it.
const UNKNOWN_WRITER: &str = "recorded-writer";

/// How long the engine must stay idle before the next recorded write goes in (the sandbox is
/// in this process: its events arrive within microseconds).
const IDLE: Duration = Duration::from_millis(50);

/// Run `kubectl meta replay`: the exit code (0 replayed cleanly, 1 a hot loop or a failed
/// sync, 4 timed out) or a classified error.
pub async fn run(args: ReplayArgs) -> Result<u8> {
    let shown = if args.file.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    };
    let bytes = read(&args.file).map_err(|e| fail(Class::Usage, format!("{shown}: {e}")))?;
    let window = Window::parse(&bytes).map_err(|e| fail(Class::Usage, format!("{shown}: {e}")))?;
    let defs = definitions(&args, &window, &shown)?;
    let sandbox = Sandbox::start(SandboxConfig::ephemeral())
        .await
        .map_err(|e| {
            fail(
                Class::Internal,
                format!("starting the in-process sandbox: {e}"),
            )
        })?;
    let client = sandbox.in_process_client();
    let result = replay(&args, &window, defs, &client).await;
    sandbox.shutdown().await;
    result
}

fn read(file: &Path) -> std::io::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::stdin().read_to_end(&mut b)?;
        Ok(b)
    } else {
        std::fs::read(file)
    }
}

/// The definitions to run (see the module header).
fn definitions(args: &ReplayArgs, window: &Window, shown: &str) -> Result<Vec<ControllerDef>> {
    if !args.files.is_empty() {
        return Ok(spec::load_paths(&args.files)
            .class(Class::Usage)?
            .controllers);
    }
    if args.live_hooks
        && let Some(p) = super::project::discover()?
    {
        let files: Vec<_> = p.controllers.clone();
        if !files.is_empty() {
            return Ok(spec::load_paths(&files).class(Class::Usage)?.controllers);
        }
    }
    if window.controllers.is_empty() {
        return Err(fail(
            Class::Usage,
            format!(
                "{shown}: the recording carries no controller definitions (`controllers`: recorded by an older kubectl meta); give them with -f"
            ),
        ));
    }
    window
        .controllers
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            spec::parse_controller(raw, Source::file(shown, i + 1, None))
                .map_err(|e| fail(Class::Usage, format!("{shown}: recorded definition: {e}")))
        })
        .collect()
}

/// Load, run, report.
async fn replay(
    args: &ReplayArgs,
    window: &Window,
    defs: Vec<ControllerDef>,
    client: &kube::Client,
) -> Result<u8> {
    let writes = window.external_writes();
    install_crds(client, &defs, window, &writes).await?;
    load_first_state(client, window).await?;
    let bus = EventBus::new();
    let log = EventLog::spawn(
        LogStyle {
            output: args.output,
            color: args.output == OutputArg::Human
                && crate::view::color::color_enabled(std::io::IsTerminal::is_terminal(
                    &std::io::stdout(),
                )),
            verbose: false,
        },
        &bus,
        false,
    );
    let answers = (!args.live_hooks).then(|| Arc::new(window.answers()));
    let options = EngineOptions {
        answers: answers.clone().map(|a| a as Arc<dyn HookAnswers>),
        hook_base_url: args.hook_base_url.clone(),
        // Recorded service webhooks resolve (they are never called with recorded answers).
        service_dns: !args.live_hooks,
        ..EngineOptions::default()
    };
    let ctx = Arc::new(
        EngineContext::new(client.clone(), bus.clone(), options)
            .map_err(|e| fail(Class::Internal, format!("setting up the engine: {e}")))?,
    );
    let seen = Seen::follow(&bus);
    let mut engine = Engine::new(ctx);
    engine.set_wait_for(WaitFor::None);
    engine.set_quiet(IDLE);
    for d in defs {
        engine.start(d);
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut pending = writes;
    let mut applied = 0;
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let rep = tokio::select! {
            rep = engine.wait_converged(left.min(Duration::from_secs(1))) => Some(rep),
            () = seen.wrote.notified() => None,
        };
        // The engine wrote an object another client wrote next: that client answers at once,
        // as it did (a fight's writer sets the field back right after the engine's write).
        let calls = seen.calls();
        for (resource, object) in seen.take_written() {
            if let Some(i) = pending.iter().position(|w| {
                w.event_names() == (resource.clone(), object.clone())
                    && calls.get(&w.subject).copied().unwrap_or(0) >= w.before_call
            }) {
                let w = pending.remove(i);
                apply(client, &w).await?;
                applied += 1;
            }
        }
        let Some(rep) = rep else { continue };
        if !(rep.converged && rep.pending.is_empty()) {
            if Instant::now() >= deadline {
                timed_out = true;
                break;
            }
            continue;
        }
        if pending.is_empty() {
            break;
        }
        // Idle: the writes due before the syncs made so far, else the next one recorded.
        let due: Vec<usize> = (0..pending.len())
            .filter(|i| {
                calls.get(&pending[*i].subject).copied().unwrap_or(0) >= pending[*i].before_call
            })
            .collect();
        let take = if due.is_empty() { vec![0] } else { due };
        for i in take.into_iter().rev() {
            let w = pending.remove(i);
            apply(client, &w).await?;
            applied += 1;
        }
    }
    engine.shutdown().await;
    log.stop().await;
    let hot_loops = seen.hot_loops();
    let failed = seen.failed();
    let mut summary = format!(
        "replayed {} recorded event(s): {applied} other writer write(s) applied",
        window.events
    );
    if let Some(a) = &answers {
        let (used, total, beyond) = a.progress();
        summary.push_str(&format!(
            "; {used} of {total} recorded hook answer(s) served"
        ));
        if beyond > 0 {
            summary.push_str(&format!(
                " ({beyond} more call(s) than recorded got the last answer again)"
            ));
        }
    }
    summary.push_str(&format!(
        "; {hot_loops} hot loop(s), {failed} failed sync(s)"
    ));
    eprintln!("{summary}");
    if timed_out {
        eprintln!(
            "--timeout {}s ran out with {} recorded write(s) not applied",
            args.timeout,
            pending.len()
        );
        return Ok(Class::NotConverged.code());
    }
    Ok(u8::from(hot_loops > 0 || failed > 0))
}

/// What the replay's events said so far: sync and finalize calls per parent, hot loops,
/// failed syncs.
#[derive(Clone, Default)]
struct Seen {
    inner: Arc<Mutex<SeenInner>>,
    /// Notified on each write of the engine to an object.
    wrote: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct SeenInner {
    calls: HashMap<Subject, usize>,
    /// The objects the engine updated since the last look: (`Kind.apiVersion`, `ns/name`).
    written: Vec<(String, String)>,
    hot_loops: usize,
    failed: usize,
}

impl Seen {
    fn follow(bus: &EventBus) -> Seen {
        let seen = Seen::default();
        let mut rx = bus.subscribe();
        let s = seen.clone();
        let seen_wrote = Arc::clone(&seen.wrote);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let e = match rx.recv().await {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let Ok(mut s) = s.inner.lock() else { break };
                match e {
                    EngineEvent::HookCalled {
                        controller,
                        subject,
                        hook,
                        ..
                    } if hook == "sync" || hook == "finalize" => {
                        *s.calls
                            .entry((controller, subject.parent, subject.map_key))
                            .or_default() += 1;
                    }
                    EngineEvent::Action {
                        verb: ActionVerb::Update,
                        resource,
                        object,
                        error: None,
                        ..
                    } => {
                        s.written.push((resource, object));
                        seen_wrote.notify_one();
                    }
                    EngineEvent::HotLoop { .. } => s.hot_loops += 1,
                    EngineEvent::SyncFinished { error: Some(_), .. } => s.failed += 1,
                    _ => {}
                }
            }
        });
        seen
    }

    fn calls(&self) -> HashMap<Subject, usize> {
        self.inner
            .lock()
            .map(|s| s.calls.clone())
            .unwrap_or_default()
    }

    fn take_written(&self) -> Vec<(String, String)> {
        self.inner
            .lock()
            .map(|mut s| std::mem::take(&mut s.written))
            .unwrap_or_default()
    }

    fn hot_loops(&self) -> usize {
        self.inner.lock().map_or(0, |s| s.hot_loops)
    }

    fn failed(&self) -> usize {
        self.inner.lock().map_or(0, |s| s.failed)
    }
}

/// The resource of (`api_version`, `kind`) in the sandbox, if it serves it.
async fn resource(client: &kube::Client, api_version: &str, kind: &str) -> Option<ApiResource> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk)
        .await
        .ok()
        .map(|(ar, _)| ar)
}

/// Every `{apiVersion, resource}` a definition names (parent, children, attachments, ...).
fn resources_of(raw: &Value, out: &mut BTreeSet<(String, String)>) {
    match raw {
        Value::Object(m) => {
            if let (Some(a), Some(r)) = (
                m.get("apiVersion").and_then(Value::as_str),
                m.get("resource").and_then(Value::as_str),
            ) {
                out.insert((a.to_string(), r.to_string()));
            }
            m.values().for_each(|v| resources_of(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| resources_of(v, out)),
        _ => {}
    }
}

/// A CustomResourceDefinition accepting anything (with a status subresource) for each type the
/// definitions or the recorded objects name that the sandbox does not serve.
async fn install_crds(
    client: &kube::Client,
    defs: &[ControllerDef],
    window: &Window,
    writes: &[ExternalWrite],
) -> Result<()> {
    // (apiVersion, kind) -> namespaced, from every recorded object.
    let mut kinds: HashMap<(String, String), bool> = HashMap::new();
    let mut note = |o: &Value| {
        if let (Some(a), Some(k)) = (o["apiVersion"].as_str(), o["kind"].as_str()) {
            let ns = o["metadata"]["namespace"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            *kinds.entry((a.to_string(), k.to_string())).or_default() |= ns;
        }
    };
    window.first_state().iter().for_each(&mut note);
    for c in &window.calls {
        if let Ok(a) = &c.answer {
            for k in ["children", "attachments"] {
                a[k].as_array().into_iter().flatten().for_each(&mut note);
            }
        }
    }
    for w in writes {
        note(&json!({"apiVersion": w.api_version, "kind": w.kind,
                     "metadata": {"namespace": w.namespace}}));
    }
    let mut declared = BTreeSet::new();
    for d in defs {
        resources_of(&d.raw()["spec"], &mut declared);
    }
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
    let mut made = Vec::new();
    for (api_version, plural) in &declared {
        let Some((group, version)) = api_version.split_once('/') else {
            continue; // the core group: built in.
        };
        if served(client, api_version, plural).await {
            continue;
        }
        // The kind: a recorded object's of this apiVersion whose plural this is.
        let (kind, namespaced) = kinds
            .iter()
            .filter(|((a, _), _)| a == api_version)
            .find(|((_, k), _)| plural_of(k) == *plural)
            .map(|((_, k), ns)| (k.clone(), *ns))
            .unwrap_or_else(|| (kind_of(plural), true));
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "scope": if namespaced { "Namespaced" } else { "Cluster" },
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": version, "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        });
        crds.create(&PostParams::default(), &dynamic(&crd)?)
            .await
            .map_err(|e| {
                fail(
                    Class::Internal,
                    format!("creating a CustomResourceDefinition for {plural}.{group}: {e}"),
                )
            })?;
        made.push((api_version.clone(), kind));
    }
    // Served once Established (the sandbox establishes at once).
    let until = Instant::now() + Duration::from_secs(10);
    for (api_version, kind) in made {
        while resource(client, &api_version, &kind).await.is_none() {
            if Instant::now() > until {
                return Err(anyhow!("the sandbox did not serve {kind}.{api_version}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

/// Whether the sandbox serves `plural` in `api_version`.
async fn served(client: &kube::Client, api_version: &str, plural: &str) -> bool {
    client
        .list_api_group_resources(api_version)
        .await
        .is_ok_and(|l| l.resources.iter().any(|r| r.name == plural))
}

/// The lowercase plural of a kind, as most CRDs spell it.
fn plural_of(kind: &str) -> String {
    let k = kind.to_lowercase();
    if let Some(stem) = k.strip_suffix('y') {
        format!("{stem}ies")
    } else if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else {
        format!("{k}s")
    }
}

/// A kind for a plural nothing recorded names (`widgets` -> `Widget`).
fn kind_of(plural: &str) -> String {
    let s = plural
        .strip_suffix("ies")
        .map(|s| format!("{s}y"))
        .or_else(|| plural.strip_suffix('s').map(str::to_string))
        .unwrap_or_else(|| plural.to_string());
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn dynamic(v: &Value) -> Result<DynamicObject> {
    serde_json::from_value(v.clone()).map_err(|e| anyhow!("not a Kubernetes object: {e}"))
}

use crate::dryrun::simulate::SERVER_SET;

/// The API of `o`'s resource in the sandbox.
async fn api_for(client: &kube::Client, o: &Value) -> Result<Api<DynamicObject>> {
    let (a, k) = (
        o["apiVersion"].as_str().unwrap_or_default(),
        o["kind"].as_str().unwrap_or_default(),
    );
    let ar = resource(client, a, k).await.ok_or_else(|| {
        fail(
            Class::Usage,
            format!("the recording holds a {k} ({a}), a type neither the sandbox nor the definitions know"),
        )
    })?;
    Ok(
        match o["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        },
    )
}

/// Create the window's first state (parents first; owner references moved to the copies).
async fn load_first_state(client: &kube::Client, window: &Window) -> Result<()> {
    let objects = window.first_state();
    let namespaces: BTreeSet<&str> = objects
        .iter()
        .filter_map(|o| o["metadata"]["namespace"].as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let ns_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    for ns in namespaces {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let _ = ns_api.create(&PostParams::default(), &dynamic(&obj)?).await;
    }
    let mut uids: HashMap<String, String> = HashMap::new();
    for o in objects {
        let old_uid = o["metadata"]["uid"].as_str().map(str::to_string);
        let mut v = o.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for f in SERVER_SET {
                m.shift_remove(f);
            }
            // Labels holding an owner's uid (`controller-uid` of generateSelector) follow it.
            if let Some(labels) = m.get_mut("labels").and_then(Value::as_object_mut) {
                for l in labels.values_mut() {
                    if let Some(copy) = l.as_str().and_then(|u| uids.get(u)) {
                        *l = json!(copy);
                    }
                }
            }
            if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
                refs.retain_mut(|r| match r["uid"].as_str().and_then(|u| uids.get(u)) {
                    Some(copy) => {
                        r["uid"] = json!(copy);
                        true
                    }
                    None => false,
                });
            }
        }
        let status = v.as_object_mut().and_then(|m| m.shift_remove("status"));
        let api = api_for(client, &v).await?;
        let what = describe(&v);
        let created = match api.create(&PostParams::default(), &dynamic(&v)?).await {
            Ok(c) => c,
            // What the sandbox makes itself (kube-root-ca.crt, the default ServiceAccount).
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => {
                return Err(fail(
                    Class::Usage,
                    format!("the sandbox refused the recorded {what}: {e}"),
                ));
            }
        };
        if let (Some(old), Some(new)) = (old_uid, created.metadata.uid.clone()) {
            uids.insert(old, new);
        }
        if let Some(status) = status.filter(|s| !s.is_null()) {
            let name = created.metadata.name.clone().unwrap_or_default();
            // Types without a status subresource kept it with the create.
            let _ = api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await;
        }
    }
    Ok(())
}

fn describe(o: &Value) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", o["kind"].as_str().unwrap_or_default()),
        None => format!("{} {name}", o["kind"].as_str().unwrap_or_default()),
    }
}

/// Apply another writer's recorded write, as its field manager.
async fn apply(client: &kube::Client, w: &ExternalWrite) -> Result<()> {
    let target = json!({"apiVersion": w.api_version, "kind": w.kind,
        "metadata": {"name": w.name, "namespace": w.namespace}});
    let api = api_for(client, &target).await?;
    let manager = w
        .manager
        .clone()
        .unwrap_or_else(|| UNKNOWN_WRITER.to_string());
    let result = if w.create {
        let mut v = w.patch.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for f in SERVER_SET {
                m.shift_remove(f);
            }
            m.shift_remove("ownerReferences");
        }
        let pp = PostParams {
            field_manager: Some(manager),
            ..PostParams::default()
        };
        api.create(&pp, &dynamic(&v)?).await.map(|_| ())
    } else {
        let pp = PatchParams {
            field_manager: Some(manager),
            ..PatchParams::default()
        };
        api.patch(&w.name, &pp, &Patch::Merge(&w.patch))
            .await
            .map(|_| ())
    };
    if let Err(e) = result {
        // The replay went another way (the object is gone, or already there): say so, go on.
        eprintln!(
            "note: the recorded write of {} by another client did not apply: {e}",
            w.describe()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_kinds() {
        assert_eq!(plural_of("Widget"), "widgets");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(kind_of("widgets"), "Widget");
        assert_eq!(kind_of("policies"), "Policy");
    }
}
