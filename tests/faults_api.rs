//! Throttling and conflicts from the API server: 429 with Retry-After is waited out (the
//! write happens once, no sooner), a child changed by someone else between read and write
//! (a real 409) is re-read and planned again keeping their change, and 500s are retried.

mod common;

use std::time::{Duration, Instant};

use common::faults::*;
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
    assert_eq!(creates(&f.engine).get("default/p0-0"), Some(&1));
    assert!(
        f.engine.failed_syncs().is_empty(),
        "{:?}",
        f.engine.failed_syncs()
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
