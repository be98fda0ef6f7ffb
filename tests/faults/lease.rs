//! The controller Lease across API server trouble: a Lease another dev loop took while ours
//! could not be renewed stops the engine's writes and names that holder; a Lease that expired
//! meanwhile (or that nobody touched) is taken again and work goes on; slow answers to the
//! renewal count as failures, not as a takeover.

use crate::common;

use std::time::Duration;

use crate::common::faults::*;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_sandbox::faults::Fault;
use kubectl_meta::engine::events::EngineEvent;
use kubectl_meta::k8s::lease::{LeaseState, lease_name};
use serde_json::json;

/// Make the Lease look held by `holder`, renewed `ago` ago for `duration_s` seconds, with a
/// merge patch (the fault blocks only our PUT renewals).
async fn rewrite_lease(client: &kube::Client, holder: &str, ago: i64, duration_s: i64) {
    let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "default");
    let t = Timestamp::now()
        .checked_sub(SignedDuration::from_secs(ago))
        .unwrap();
    let when = t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    api.patch(
        &lease_name("CompositeController", "counted"),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {
            "holderIdentity": holder, "renewTime": when, "acquireTime": when,
            "leaseDurationSeconds": duration_s}})),
    )
    .await
    .expect("patch lease");
}

/// While our renewals fail (503), [`rewrite_lease`]; then let renewals through again.
async fn rewrite_during_outage(f: &Fixture, holder: &str, ago: i64, duration_s: i64) {
    f.faults().inject(Fault::on("PUT", "/leases/").status(503));
    wait_notice(&f.engine, "API server unreachable since").await;
    rewrite_lease(f.client(), holder, ago, duration_s).await;
    f.faults().clear();
}

fn holder(client: &kube::Client) -> impl std::future::Future<Output = Option<String>> + use<> {
    let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "default");
    async move {
        api.get(&lease_name("CompositeController", "counted"))
            .await
            .ok()?
            .spec?
            .holder_identity
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_taken_by_another_holder_during_an_outage_stops_writes_and_names_it() {
    let f = Fixture::with_one_parent().await;

    // Our renewals fail (503) while another dev loop takes the Lease.
    rewrite_during_outage(&f, "mallory@elsewhere pid 9", 0, 60).await;

    let mut lost = f.lease.lost();
    tokio::time::timeout(common::TIMEOUT, lost.wait_for(|l| *l))
        .await
        .expect("the loss is noticed")
        .unwrap();
    let why = f.lease.lost_reason().expect("a reason");
    assert!(
        why.contains("held by mallory@elsewhere pid 9 since "),
        "{why}"
    );
    assert!(matches!(
        &*f.lease.state().borrow(),
        LeaseState::Lost { holder, since: Some(_) } if holder == "mallory@elsewhere pid 9"
    ));
    let ctx = f.engine.engine.context();
    common::wait_for("writes held naming the holder", common::TIMEOUT, || {
        let held = ctx.writes_held().map(|h| h.to_string()).unwrap_or_default();
        async move { held.contains("mallory@elsewhere pid 9").then_some(()) }
    })
    .await;

    // A change now is queued but not acted on: nothing is written without the Lease.
    let writes_before = f.engine.writes().len();
    merge(&parent_api(f.client()), "p0", json!({"spec": {"count": 2}})).await;
    let engine = &f.engine.engine;
    common::wait_for("the change to be queued", common::TIMEOUT, || {
        let stats = engine.started(None)[0].queue_stats();
        // Queued, or taken by a worker that waits for writes to be allowed.
        let queued = stats.ready + stats.in_flight;
        async move { (queued > 0).then_some(()) }
    })
    .await;
    assert_eq!(f.engine.writes().len(), writes_before);
    assert!(cm_api(f.client()).get_opt("p0-1").await.unwrap().is_none());
    assert_eq!(
        holder(f.client()).await.as_deref(),
        Some("mallory@elsewhere pid 9"),
        "their Lease is left alone"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expired_or_untouched_after_an_outage_is_taken_again_and_work_goes_on() {
    let f = Fixture::with_one_parent().await;

    // Another holder took it but let it expire while we could not renew.
    rewrite_during_outage(&f, "bob@desk pid 7", 60, 10).await;
    wait_notice(&f.engine, "API server reachable again").await;
    assert_eq!(*f.lease.state().borrow(), LeaseState::Held);
    assert_eq!(
        holder(f.client()).await.as_deref(),
        Some("tester@test-host pid 1")
    );

    // Slow answers (longer than the renewal timeout) are an outage too, not a takeover.
    f.faults()
        .inject(Fault::on("PUT", "/leases/").delay(Duration::from_secs(8)));
    wait_for_notices(&f, "API server unreachable since", 2).await;
    f.faults().clear();
    wait_for_notices(&f, "API server reachable again", 2).await;
    assert!(!*f.lease.lost().borrow());

    // And the engine works again.
    merge(&parent_api(f.client()), "p0", json!({"spec": {"count": 2}})).await;
    wait_children(f.client(), &["p0-0", "p0-1"]).await;
    f.engine.converge().await;
    let errors: Vec<_> = f
        .engine
        .events()
        .into_iter()
        .filter(
            |e| matches!(e, EngineEvent::Error { message, .. } if message.contains("unreachable")),
        )
        .collect();
    assert_eq!(errors.len(), 2, "said once per outage: {errors:?}");
    f.stop().await;
}

async fn wait_for_notices(f: &Fixture, text: &str, n: usize) {
    common::wait_for(
        &format!("{n} events saying {text:?}"),
        common::TIMEOUT,
        || {
            let count = notices(&f.engine, text).len();
            async move { (count >= n).then_some(()) }
        },
    )
    .await;
}
