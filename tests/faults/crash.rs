//! `dev` killed with SIGKILL in the middle of a rolling update and started again at once: the
//! new process takes the Lease of the dead one (same host, process gone), picks the rollout up
//! from the ControllerRevisions and finishes it with the same result as an uninterrupted run:
//! every pod on the new template, each replaced exactly once, in order.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::cli::*;
use crate::common::faults::dev_cmd;
use crate::common::{TIMEOUT, wait_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// Pod name -> (image, uid).
async fn pod_images(api: &Api<DynamicObject>) -> BTreeMap<String, (String, String)> {
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| {
                    let image = p.data["spec"]["containers"][0]["image"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    (
                        p.metadata.name.clone().unwrap_or_default(),
                        (image, p.metadata.uid.clone().unwrap_or_default()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_killed_mid_rollout_continues_it_after_a_restart() {
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    // Slow readiness, so the rollout is still going when dev is killed.
    cfg.tunables.kubelet_delay = Some(Duration::from_secs(3));
    let sb = common::start_with(cfg).await;
    let home = tempfile::tempdir().unwrap();
    let files = [example("catset")];
    let pods: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
    let first = Background::start(dev_cmd(
        home.path(),
        &kc(&sb),
        &files,
        &["--apply", "-o", "json"],
    ));
    let names = ["nginx-backend-0", "nginx-backend-1", "nginx-backend-2"];
    let before = wait_for("the three pods on nginx:1.27", TIMEOUT * 2, || {
        let pods = pods.clone();
        async move {
            let m = pod_images(&pods).await;
            (m.len() == 3 && m.values().all(|(i, _)| i == "nginx:1.27")).then_some(m)
        }
    })
    .await;
    assert_eq!(before.keys().collect::<Vec<_>>(), names);

    // New template: the highest ordinal is replaced first; kill dev as soon as it is.
    let catsets: Api<DynamicObject> = Api::namespaced_with(
        sb.client.clone(),
        "default",
        &ar("example.kubectl-meta.dev", "CatSet", "catsets"),
    );
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": "nginx:1.28", "ports": [{"containerPort": 80, "name": "web"}],
         "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}]}}}});
    catsets
        .patch(
            "nginx-backend",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let replaced = wait_for("nginx-backend-2 replaced", TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let m = pod_images(&pods).await;
            let (image, uid) = m.get("nginx-backend-2")?;
            (image == "nginx:1.28").then(|| uid.clone())
        }
    })
    .await;
    let mut first = first;
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(first.child.id() as i32, libc::SIGKILL);
    }
    let _ = first.child.wait();
    let mid = pod_images(&pods).await;
    assert_ne!(
        mid.values().filter(|(i, _)| i == "nginx:1.28").count(),
        3,
        "killed mid-rollout: {mid:?}"
    );

    // Started again at once (without --apply, which would put the old template back): the dead
    // process's Lease is taken over, the rollout goes on.
    let second = Background::start(dev_cmd(home.path(), &kc(&sb), &files, &["-o", "json"]));
    let done = tokio::time::timeout(
        TIMEOUT * 3,
        wait_for("every pod on nginx:1.28", TIMEOUT * 4, || {
            let pods = pods.clone();
            async move {
                let m = pod_images(&pods).await;
                (m.len() == 3 && m.values().all(|(i, _)| i == "nginx:1.28")).then_some(m)
            }
        }),
    )
    .await;
    let Ok(after) = done else {
        let out = second.output();
        let tail: Vec<&str> = out.lines().rev().take(30).collect();
        panic!(
            "rollout not finished: {:?}\nsecond dev said (last lines first):\n{}",
            pod_images(&pods).await,
            tail.join("\n")
        );
    };
    assert_eq!(
        after["nginx-backend-2"].1, replaced,
        "the pod replaced before the kill is not replaced again"
    );
    for n in names {
        assert_ne!(after[n].1, before[n].1, "{n} was replaced");
    }
    // Same end state as an uninterrupted run: ready, and the parent on the latest revision.
    let catset = wait_for("the CatSet to report 3 ready", TIMEOUT, || {
        let catsets = catsets.clone();
        async move {
            let c = catsets.get("nginx-backend").await.ok()?;
            let v = serde_json::to_value(c).ok()?;
            (v["status"]["readyReplicas"] == json!(3)).then_some(v)
        }
    })
    .await;
    let updated = catset["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Updated"))
        .cloned()
        .unwrap_or_default();
    if !updated.is_null() {
        assert_eq!(updated["reason"], "OnLatestRevision", "{catset:#}");
    }
    let out = second.output();
    assert!(
        !out.contains("is held by"),
        "the Lease of the killed process did not block: {out}"
    );
    let (ok, stderr) = second.interrupt().await;
    assert!(ok, "{stderr}");
}
