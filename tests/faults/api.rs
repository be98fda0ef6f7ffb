//! Throttling and conflicts from the API server: 429 with Retry-After is waited out (the
//! write happens once, no sooner), a child changed by someone else between read and write
//! (a real 409) is re-read and planned again keeping their change, and 500s are retried.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::faults::*;
use kube_sandbox::faults::Fault;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_is_retried_after_retry_after_and_writes_once() {
    let f = Fixture::start().await;
    let throttled = f.faults().inject(
        Fault::on("POST", "/api/v1/namespaces/default/configmaps")
            .too_many_requests(1)
            .times(2),
    );
    let start = Instant::now();
    create_parents(f.client(), &["p0"], 1).await;
    wait_children(f.client(), &["p0-0"]).await;
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "two Retry-After: 1 waits: {:?}",
        start.elapsed()
    );
    f.engine.converge().await;
    assert_eq!(throttled.fired(), 2);
    let pace = f.rs.pace.snapshot();
    assert_eq!(pace.throttled, 2, "{pace:?}");
    assert_eq!(creates(&f.engine).get("default/p0-0"), Some(&1));
    assert!(
        f.engine.failed_syncs().is_empty(),
        "{:?}",
        f.engine.failed_syncs()
    );
    f.stop().await;
}

/// A 429 storm: every child create and every status write is refused with `Retry-After` for a
/// while. The client narrows its window and waits as asked; in the end every child exists,
/// each created exactly once (nothing lost, nothing doubled), every parent's status written,
/// and no sync is left failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_is_survived_with_every_write_made_once() {
    let f = Fixture::start().await;
    let creates_refused = f.faults().inject(
        Fault::on("POST", "/api/v1/namespaces/default/configmaps")
            .too_many_requests(1)
            .times(14),
    );
    let status_refused = f
        .faults()
        .inject(Fault::on("PUT", "/status").too_many_requests(1).times(4));
    let names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_parents(f.client(), &names, 2).await;
    let mut children: Vec<String> = names
        .iter()
        .flat_map(|p| [format!("{p}-0"), format!("{p}-1")])
        .collect();
    children.sort();
    let children: Vec<&str> = children.iter().map(String::as_str).collect();
    wait_children(f.client(), &children).await;
    let parents = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        f.client().clone(),
        "default",
        &common::engine::parent_ar("Parent"),
    );
    common::wait_for("every parent's status", common::TIMEOUT, || {
        let parents = parents.clone();
        async move {
            let list = parents.list(&Default::default()).await.ok()?;
            (list.items.len() == 20
                && list
                    .items
                    .iter()
                    .all(|p| p.data["status"]["children"] == json!(2)))
            .then_some(())
        }
    })
    .await;
    f.engine.converge().await;
    assert_eq!(creates_refused.fired(), 14, "the storm hit the creates");
    assert_eq!(status_refused.fired(), 4, "the storm hit the status writes");
    let made = creates(&f.engine);
    for child in &children {
        assert_eq!(
            made.get(&format!("default/{child}")),
            Some(&1),
            "{child} created exactly once: {made:?}"
        );
    }
    assert_eq!(made.len(), children.len(), "{made:?}");
    assert!(
        f.engine.failed_syncs().is_empty(),
        "{:?}",
        f.engine.failed_syncs()
    );
    let pace = f.rs.pace.snapshot();
    assert!(pace.throttled >= 18, "every 429 was seen: {pace:?}");
    assert!(
        pace.window.is_some_and(|w| w < 1024),
        "the window narrowed: {pace:?}"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_on_a_child_rereads_and_replans_without_overwriting_their_change() {
    let f = Fixture::with_one_parent().await;

    // Our update of p0-0 is held; meanwhile someone else changes p0-0, so it fails with a
    // real 409 (stale resourceVersion).
    let held = f
        .faults()
        .inject(Fault::on("PUT", "/configmaps/p0-0").hold().times(1));
    merge(
        &parent_api(f.client()),
        "p0",
        json!({"spec": {"value": "b"}}),
    )
    .await;
    common::wait_for("our update to be held", common::TIMEOUT, || {
        let n = held.fired();
        async move { (n == 1).then_some(()) }
    })
    .await;
    let cms = cm_api(f.client());
    merge(
        &cms,
        "p0-0",
        json!({"metadata": {"labels": {"team": "theirs"}}}),
    )
    .await;
    f.faults().release_held();

    let child = wait_data(f.client(), "p0-0", "value", "b").await;
    f.engine.converge().await;
    assert_eq!(
        child["metadata"]["labels"]["team"], "theirs",
        "their change is kept: {child}"
    );
    let failed = f.engine.failed_syncs();
    assert!(
        failed
            .iter()
            .any(|(p, e)| p == "default/p0" && e.contains("409")
                || e.to_lowercase().contains("conflict")),
        "the conflict failed one sync: {failed:?}"
    );
    let updates = write_counts(&f.engine)
        .get(&("Update".to_string(), "default/p0-0".to_string()))
        .copied();
    assert_eq!(updates, Some(1), "written once, after re-reading");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_and_the_child_is_created_once() {
    let f = Fixture::start().await;
    let failing = f
        .faults()
        .inject(Fault::on("POST", "/configmaps").status(500).times(2));
    create_parents(f.client(), &["p0"], 1).await;
    wait_children(f.client(), &["p0-0"]).await;
    f.engine.converge().await;
    assert_eq!(failing.fired(), 2);
    assert_eq!(creates(&f.engine).get("default/p0-0"), Some(&1));
    assert!(
        f.engine.failed_syncs().len() >= 2,
        "{:?}",
        f.engine.failed_syncs()
    );
    f.stop().await;
}
