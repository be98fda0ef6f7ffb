//! Fault-injection helpers: a sandbox that can be stopped and started again on the same port and
//! state (the kubeconfig of the first start keeps working), a client built by the same code
//! `kubectl meta dev` uses, a Lease held for the engine, and counting the engine's writes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kube_sandbox::{Sandbox, SandboxConfig, Storage};
use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use kubectl_meta::k8s::client;
use kubectl_meta::k8s::lease::{self, LeaseGuard, LeaseState};

use serde_json::{Value, json};

use super::engine::{HookServer, Running, composite, configmap, core_ar, def};
use super::{TIMEOUT, wait_for};

/// A sandbox with a state directory on a fixed port, restartable.
pub struct Restartable {
    /// How it is started (same port and state each time).
    pub cfg: SandboxConfig,
    /// The running instance, while running.
    pub sandbox: Option<Sandbox>,
    /// A client built from the first start's kubeconfig, exactly as `dev` builds it.
    pub client: kube::Client,
    /// That client's request pace (rate, 429 answers, window).
    pub pace: kubectl_meta::k8s::pace::ApiPace,
    /// Holds the state directory and the kubeconfig.
    pub dir: tempfile::TempDir,
}

impl Restartable {
    /// Start with a fresh state directory on a free port.
    pub async fn start() -> Restartable {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = SandboxConfig::ephemeral();
        cfg.storage = Storage::Dir(dir.path().join("state"));
        cfg.kubeconfig = Some(dir.path().join("kubeconfig"));
        cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
        let sandbox = Sandbox::start(cfg.clone()).await.expect("sandbox starts");
        cfg.listen = sandbox.addr();
        let conn = client::connect(Some(&dir.path().join("kubeconfig")), None, None)
            .await
            .expect("connect");
        Restartable {
            cfg,
            sandbox: Some(sandbox),
            client: conn.client,
            pace: conn.pace,
            dir,
        }
    }

    /// The kubeconfig path.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The running sandbox.
    pub fn sb(&self) -> &Sandbox {
        self.sandbox.as_ref().expect("sandbox is running")
    }

    /// Stop it (watches end, connections are refused).
    pub async fn stop(&mut self) {
        if let Some(sb) = self.sandbox.take() {
            sb.shutdown().await;
        }
    }

    /// Start it again on the same port and state (retrying while the port or the state
    /// directory's lock is still held by the stopped instance).
    pub async fn start_again(&mut self) {
        let cfg = self.cfg.clone();
        let sb = wait_for(
            "the sandbox to start again on the same port and state",
            TIMEOUT,
            || {
                let cfg = cfg.clone();
                async move { Sandbox::start(cfg).await.ok() }
            },
        )
        .await;
        self.sandbox = Some(sb);
    }
}

/// Take the Lease of controller `name` (short duration, so outages outlast it) and make the
/// engine hold writes whenever it is not confirmed, as `dev` does.
pub async fn lease_for(running: &Running, client: &kube::Client, name: &str) -> LeaseGuard {
    let guard = lease::acquire(
        client.clone(),
        "default",
        &lease::lease_name("CompositeController", name),
        "tester@test-host pid 1",
        Duration::from_secs(3),
    )
    .await
    .expect("lease");
    running.engine.context().follow_lease(guard.state());
    guard
}

/// Wait until the Lease is unconfirmed for longer than `for_at_least`.
pub async fn wait_unconfirmed(guard: &LeaseGuard, for_at_least: Duration) {
    let state = guard.state();
    wait_for("the lease to stay unconfirmed", TIMEOUT, || {
        let s = state.borrow().clone();
        async move {
            match s {
                LeaseState::Unconfirmed { since, .. } => {
                    let secs = k8s_openapi::jiff::Timestamp::now()
                        .duration_since(since)
                        .as_secs_f64();
                    (secs > for_at_least.as_secs_f64()).then_some(())
                }
                _ => None,
            }
        }
    })
    .await;
}

/// Successful writes per `(verb, object)`.
pub fn write_counts(running: &Running) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for (verb, object) in running.writes() {
        *m.entry((format!("{verb:?}"), object)).or_insert(0) += 1;
    }
    m
}

/// Creates per object.
pub fn creates(running: &Running) -> BTreeMap<String, usize> {
    write_counts(running)
        .into_iter()
        .filter(|((v, _), _)| v == &format!("{:?}", ActionVerb::Create))
        .map(|((_, o), n)| (o, n))
        .collect()
}

/// Messages of `Error` and `Info` events containing `text`.
pub fn notices(running: &Running, text: &str) -> Vec<String> {
    running
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::Error { message, .. } | EngineEvent::Info { message, .. } => {
                message.contains(text).then_some(message)
            }
            _ => None,
        })
        .collect()
}

/// Wait until an `Error`/`Info` event contains `text`.
pub async fn wait_notice(running: &Running, text: &str) -> String {
    wait_for(&format!("an event saying {text:?}"), TIMEOUT, || {
        let hit = notices(running, text).into_iter().next();
        async move { hit }
    })
    .await
}

/// The ConfigMap resource.
pub fn configmaps() -> kube::discovery::ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// Sync hook: `spec.count` ConfigMaps named `<parent>-<i>` (data `i` and `value`, from
/// `spec.value`, default `a`), status `{children: n}`.
pub fn numbered(req: &Value) -> Value {
    let parent = &req["parent"];
    let count = parent["spec"]["count"].as_u64().unwrap_or(0);
    let value = parent["spec"]["value"].as_str().unwrap_or("a");
    let prefix = parent["metadata"]["name"].as_str().unwrap_or("x");
    let mut children = Vec::new();
    for i in 0..count {
        children.push(configmap(
            &format!("{prefix}-{i}"),
            json!({"i": i.to_string(), "value": value}),
        ));
    }
    json!({"children": children, "status": {"children": count}})
}

/// CompositeController `counted` over `Parent` with ConfigMap children (InPlace updates,
/// generated selector), calling `hook`'s `/sync`.
pub fn counted_controller(hook: &HookServer) -> kubectl_meta::spec::ControllerDef {
    let mut d = composite(
        "counted",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}]),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    );
    d["spec"]["generateSelector"] = json!(true);
    def(d)
}

/// Wait until the ConfigMaps of namespace `default` whose names start with `p` are exactly
/// `want` (sorted).
pub async fn wait_children(client: &kube::Client, want: &[&str]) {
    let cms = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &configmaps(),
    );
    wait_for(&format!("children {want:?}"), TIMEOUT, || {
        let cms = cms.clone();
        async move {
            let mut names: Vec<String> = cms
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .filter(|n| n.starts_with('p'))
                .collect();
            names.sort();
            (names == want).then_some(())
        }
    })
    .await;
}

/// Create parents `names` (`Parent`, namespace `default`) with `spec.count`.
pub async fn create_parents(client: &kube::Client, names: &[&str], count: u64) {
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &super::engine::parent_ar("Parent"),
    );
    for name in names {
        let obj: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", super::engine::GROUP), "kind": "Parent",
            "metadata": {"name": name}, "spec": {"count": count}
        }))
        .expect("parent");
        api.create(&Default::default(), &obj)
            .await
            .expect("create parent");
    }
}

/// The ConfigMap API in namespace `default`.
pub fn cm_api(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(client.clone(), "default", &configmaps())
}

/// The `Parent` API in namespace `default`.
pub fn parent_api(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(
        client.clone(),
        "default",
        &super::engine::parent_ar("Parent"),
    )
}

/// Merge-patch an object.
pub async fn merge(api: &kube::Api<kube::api::DynamicObject>, name: &str, patch: Value) {
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
    .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

/// Wait until ConfigMap `name` has `data.<key> == value`; returns it.
pub async fn wait_data(client: &kube::Client, name: &str, key: &str, value: &str) -> Value {
    let api = cm_api(client);
    wait_for(&format!("{name} data.{key}={value}"), TIMEOUT, || {
        let api = api.clone();
        async move {
            let o = api.get_opt(name).await.ok()??;
            let v = serde_json::to_value(o).ok()?;
            (v["data"][key] == json!(value)).then_some(v)
        }
    })
    .await
}

/// The standard fixture: a restartable sandbox with the `Parent` CRD, the `numbered` hook,
/// the `counted` controller running with its Lease.
pub struct Fixture {
    /// The sandbox.
    pub rs: Restartable,
    /// The hook server.
    pub hook: HookServer,
    /// The engine.
    pub engine: Running,
    /// The controller's Lease.
    pub lease: LeaseGuard,
}

impl Fixture {
    /// Start everything.
    pub async fn start() -> Fixture {
        let rs = Restartable::start().await;
        super::engine::install_crd(&rs.client, "Parent", true).await;
        let hook = HookServer::start(super::engine::sync_fn(numbered)).await;
        let engine = Running::start(&rs.client, vec![counted_controller(&hook)]).await;
        let lease = lease_for(&engine, &rs.client, "counted").await;
        Fixture {
            rs,
            hook,
            engine,
            lease,
        }
    }

    /// Start everything with one converged parent `p0` with one child `p0-0`.
    pub async fn with_one_parent() -> Fixture {
        let f = Fixture::start().await;
        create_parents(f.client(), &["p0"], 1).await;
        wait_children(f.client(), &["p0-0"]).await;
        f.engine.converge().await;
        f
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.rs.client
    }

    /// The sandbox's fault switch.
    pub fn faults(&self) -> &kube_sandbox::faults::FaultInjector {
        self.rs.sb().faults()
    }

    /// Stop everything.
    pub async fn stop(mut self) {
        self.engine.stop().await;
        self.lease.release().await;
        self.rs.stop().await;
    }
}

/// `kubectl-meta --kubeconfig KC dev -f FILE... EXTRA...` with a private HOME.
pub fn dev_cmd(
    home: &std::path::Path,
    kubeconfig: &str,
    files: &[String],
    extra: &[&str],
) -> std::process::Command {
    let mut args: Vec<&str> = vec!["--kubeconfig", kubeconfig, "dev"];
    args.extend(files.iter().flat_map(|f| ["-f", f.as_str()]));
    args.extend(extra);
    super::cli::meta(home, &args)
}

/// Set `spec.who` of the hello-world example's HelloWorld `name` (namespace `default`).
pub async fn set_who(client: &kube::Client, name: &str, who: &str) {
    let hellos = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &super::cli::ar("example.kubectl-meta.dev", "HelloWorld", "helloworlds"),
    );
    merge(&hellos, name, json!({"spec": {"who": who}})).await;
}
