//! `dev` survives the API server going away: the sandbox is stopped for longer than the
//! controller Lease's duration and started again on the same port and state. The engine keeps
//! running, says so once, writes nothing meanwhile, keeps its Lease, and converges afterwards
//! from resumed (or re-listed) watches without losing or repeating a child write.

use std::time::Duration;

use crate::common::faults::*;
use kubectl_meta::engine::events::EngineEvent;
use kubectl_meta::k8s::lease::LeaseState;
use serde_json::json;

/// Index of the first event matching `f`.
fn position(events: &[EngineEvent], f: impl Fn(&EngineEvent) -> bool) -> Option<usize> {
    events.iter().position(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_longer_than_the_lease_is_survived_and_converges_after() {
    let mut f = Fixture::start().await;
    create_parents(f.client(), &["p0", "p1", "p2"], 2).await;
    wait_children(
        f.client(),
        &["p0-0", "p0-1", "p1-0", "p1-1", "p2-0", "p2-1"],
    )
    .await;
    f.engine.converge().await;
    let (cms, parents) = (cm_api(f.client()), parent_api(f.client()));
    let kubeconfig_before = std::fs::read_to_string(f.rs.kubeconfig()).unwrap();

    // The API server goes away for longer than the Lease duration (3 s).
    f.rs.stop().await;
    let down = wait_notice(&f.engine, "API server unreachable since").await;
    assert!(down.contains("retrying"), "{down}");
    assert!(f.engine.engine.context().writes_held().is_some());
    wait_unconfirmed(&f.lease, Duration::from_secs(5)).await;
    assert!(!*f.lease.lost().borrow(), "an outage is not a takeover");

    // Back on the same port and state, reachable with the kubeconfig of the first start.
    f.rs.start_again().await;
    assert_eq!(
        std::fs::read_to_string(f.rs.kubeconfig()).unwrap(),
        kubeconfig_before,
        "same CA, token and address: the old kubeconfig keeps working"
    );
    let back = wait_notice(&f.engine, "API server reachable again").await;
    assert!(back.contains("resyncing"), "{back}");
    assert_eq!(*f.lease.state().borrow(), LeaseState::Held);

    // Changes after the outage are seen and acted on.
    merge(&parents, "p0", json!({"spec": {"count": 3}})).await;
    let uid = cms.get("p1-0").await.unwrap().metadata.uid;
    cms.delete("p1-0", &Default::default()).await.unwrap();
    wait_children(
        f.client(),
        &["p0-0", "p0-1", "p0-2", "p1-0", "p1-1", "p2-0", "p2-1"],
    )
    .await;
    assert_ne!(
        cms.get("p1-0").await.unwrap().metadata.uid,
        uid,
        "recreated"
    );
    f.engine.converge().await;

    // Said once each; nothing written while it was down; no child lost or written twice.
    assert_eq!(notices(&f.engine, "API server unreachable since").len(), 1);
    assert_eq!(notices(&f.engine, "API server reachable again").len(), 1);
    let events = f.engine.events();
    let (from, to) = (
        position(&events, |e| matches!(e, EngineEvent::Error { message, .. } if message.contains("unreachable since"))).unwrap(),
        position(&events, |e| matches!(e, EngineEvent::Info { message, .. } if message.contains("reachable again"))).unwrap(),
    );
    let during: Vec<_> = events[from..to]
        .iter()
        .filter(|e| matches!(e, EngineEvent::Action { error: None, .. }))
        .collect();
    assert!(during.is_empty(), "writes during the outage: {during:?}");
    let creates = creates(&f.engine);
    let want: Vec<(String, usize)> = [
        ("default/p0-0", 1),
        ("default/p0-1", 1),
        ("default/p0-2", 1),
        ("default/p1-0", 2),
        ("default/p1-1", 1),
        ("default/p2-0", 1),
        ("default/p2-1", 1),
    ]
    .iter()
    .map(|(o, n)| (o.to_string(), *n))
    .collect();
    assert_eq!(creates.into_iter().collect::<Vec<_>>(), want);
    let updates: Vec<_> = write_counts(&f.engine)
        .into_iter()
        .filter(|((v, o), _)| v == "Update" && o.contains('-'))
        .collect();
    assert!(updates.is_empty(), "children rewritten: {updates:?}");
    assert!(!*f.lease.lost().borrow());
    f.stop().await;
}
