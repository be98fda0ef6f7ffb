//! `kubectl meta dev` running the shipped MapController example (examples/snapshot-schedule)
//! with its real Python hook: snapshots per selected claim, the engine's labels, annotation
//! and status, and a deleted claim's snapshots kept by the tombstone hook until they expire.
//! Time is pinned with the hook's `SNAPSHOT_SCHEDULE_NOW`, so every run is deterministic.

use crate::common;

use crate::common::cli::*;
use crate::common::engine::core_ar;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

fn snapshots() -> ApiResource {
    ar(
        "snapshot.example.kubectl-meta.dev",
        "VolumeSnapshot",
        "volumesnapshots",
    )
}

fn schedules() -> ApiResource {
    ar(
        "example.kubectl-meta.dev",
        "SnapshotSchedule",
        "snapshotschedules",
    )
}

/// One `dev --once` run of the example with the hook's clock at `now`: the first applies the
/// whole example, later ones only run its controller (re-applying the sample would recreate a
/// deleted claim).
async fn once_at(sb: &common::TestSandbox, home: &std::path::Path, now: &str) -> String {
    let dir = example("snapshot-schedule");
    let controller = format!("{dir}/10-controller.yaml");
    let first = get(sb, &schedules(), Some("default"), "my-app-snapshots")
        .await
        .is_none();
    let kubeconfig = kc(sb);
    let mut args = vec!["--kubeconfig", &kubeconfig, "dev", "--once"];
    if first {
        args.extend(["--apply", "-f", &dir]);
    } else {
        args.extend(["-f", &controller]);
    }
    let mut cmd = meta(home, &args);
    cmd.env("SNAPSHOT_SCHEDULE_NOW", now);
    assert_ok(&run(cmd).await)
}

/// Snapshot names by the claim they were taken of.
async fn by_claim(sb: &common::TestSandbox) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for n in names(sb, &snapshots(), "default").await {
        let s = get(sb, &snapshots(), Some("default"), &n)
            .await
            .expect("snapshot");
        let claim = s["spec"]["source"]["persistentVolumeClaimName"]
            .as_str()
            .unwrap_or("")
            .to_string();
        v.push((claim, n));
    }
    v.sort();
    v
}

fn status(parent: &Value) -> &Value {
    &parent["status"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_schedule_example_snapshots_claims_and_keeps_detached_ones_until_they_expire() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();

    // 10:00:30: one snapshot per selected claim; cache-0 is not selected.
    let stdout = once_at(&sb, home.path(), "2026-11-24T10:00:30Z").await;
    assert!(stdout.contains("MapController"), "{stdout}");
    let snaps = by_claim(&sb).await;
    let claims: Vec<&str> = snaps.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(claims, ["data-0", "data-1"], "{snaps:?}");
    let sched = get(&sb, &schedules(), Some("default"), "my-app-snapshots")
        .await
        .expect("schedule");
    for (claim, name) in &snaps {
        let s = get(&sb, &snapshots(), Some("default"), name).await.unwrap();
        assert!(name.contains("20261124100000"), "{name}");
        assert_eq!(
            s["metadata"]["annotations"]["metacontroller.k8s.io/map-input"],
            json!(format!("v1/PersistentVolumeClaim/default/{claim}"))
        );
        let key = s["metadata"]["labels"]["metacontroller.k8s.io/map-key"]
            .as_str()
            .unwrap();
        assert!(
            key.starts_with(&format!("persistentvolumeclaim-{claim}-")),
            "{key}"
        );
        assert_eq!(
            s["metadata"]["ownerReferences"][0]["uid"],
            sched["metadata"]["uid"]
        );
    }
    let st = status(&sched);
    assert_eq!(
        st["inputs"]["persistentvolumeclaims"]["total"],
        json!(2),
        "{st:#}"
    );
    assert_eq!(
        st["outputs"]["volumesnapshots"]["total"],
        json!(2),
        "{st:#}"
    );
    assert_eq!(
        st["outputs"]["volumesnapshots"]["detached"],
        json!(0),
        "{st:#}"
    );
    assert_eq!(st["conditions"][0]["type"], json!("Synced"));
    assert_eq!(st["conditions"][0]["status"], json!("True"));

    // A run in the same slot changes nothing (the snapshots and the schedule keep their
    // resourceVersions; the dev loop's own lease is the only write).
    let versions = || async {
        let mut v = Vec::new();
        for (_, n) in by_claim(&sb).await {
            let s = get(&sb, &snapshots(), Some("default"), &n).await.unwrap();
            v.push((n, s["metadata"]["resourceVersion"].clone()));
        }
        let p = get(&sb, &schedules(), Some("default"), "my-app-snapshots")
            .await
            .unwrap();
        v.push(("schedule".into(), p["metadata"]["resourceVersion"].clone()));
        v
    };
    let before = versions().await;
    once_at(&sb, home.path(), "2026-11-24T10:00:50Z").await;
    assert_eq!(versions().await, before, "same slot: nothing written");

    // data-0 is deleted; at 10:02 its snapshot is detached but younger than the TTL (5m):
    // the tombstone hook keeps it. data-1 gets the 10:02 snapshot.
    let out = sb.kubectl(&["delete", "pvc", "data-0", "--wait=false"]);
    assert!(out.status.success(), "{out:?}");
    common::wait_for("data-0 to be gone", common::TIMEOUT, || {
        let sb = &sb;
        async move {
            let pvcs = names(
                sb,
                &core_ar("PersistentVolumeClaim", "persistentvolumeclaims"),
                "default",
            )
            .await;
            (!pvcs.iter().any(|n| n == "data-0")).then_some(())
        }
    })
    .await;
    once_at(&sb, home.path(), "2026-11-24T10:02:10Z").await;
    let snaps = by_claim(&sb).await;
    let claims: Vec<&str> = snaps.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(claims, ["data-0", "data-1", "data-1"], "{snaps:?}");
    let sched = get(&sb, &schedules(), Some("default"), "my-app-snapshots")
        .await
        .unwrap();
    let st = status(&sched);
    assert_eq!(
        st["inputs"]["persistentvolumeclaims"]["total"],
        json!(1),
        "{st:#}"
    );
    assert_eq!(
        st["outputs"]["volumesnapshots"]["total"],
        json!(3),
        "{st:#}"
    );
    assert_eq!(
        st["outputs"]["volumesnapshots"]["detached"],
        json!(1),
        "{st:#}"
    );

    // 10:06: the 10:00 snapshots are past their TTL: the tombstone lets data-0's go, the map
    // hook drops data-1's; 10:02 stays and 10:06 is taken.
    once_at(&sb, home.path(), "2026-11-24T10:06:05Z").await;
    let snaps = by_claim(&sb).await;
    let names_left: Vec<&str> = snaps.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    assert!(snaps.iter().all(|(c, _)| c == "data-1"), "{snaps:?}");
    assert!(
        names_left.iter().any(|n| n.contains("20261124100200"))
            && names_left.iter().any(|n| n.contains("20261124100600")),
        "{names_left:?}"
    );
    let sched = get(&sb, &schedules(), Some("default"), "my-app-snapshots")
        .await
        .unwrap();
    assert_eq!(
        status(&sched)["outputs"]["volumesnapshots"]["detached"],
        json!(0)
    );
}
