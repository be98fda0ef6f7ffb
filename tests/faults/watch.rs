//! Watch expiry: the API server ends the watches, and the resumed watch is answered 410 Gone
//! ("too old resource version"): the informer re-lists and the engine acts on exactly what
//! changed meanwhile, once, without losing or repeating a sync's writes.

use crate::common;

use crate::common::faults::*;
use kube_sandbox::faults::Fault;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_relists_and_acts_on_what_changed_meanwhile_once() {
    let f = Fixture::start().await;
    create_parents(f.client(), &["p0", "p1"], 2).await;
    wait_children(f.client(), &["p0-0", "p0-1", "p1-0", "p1-1"]).await;
    f.engine.converge().await;

    // The ConfigMap watch ends; resuming it gets 410; the re-list waits until we let it go.
    let expired = f.faults().inject(
        Fault::on("GET", "/api/v1/configmaps")
            .expire_watch()
            .times(1),
    );
    let relist = f
        .faults()
        .inject(Fault::on("GET", "/api/v1/configmaps").hold().times(1));
    f.faults().cut_watches();
    common::wait_for("the 410 and the held re-list", common::TIMEOUT, || {
        let done = expired.fired() == 1 && relist.fired() == 1;
        async move { done.then_some(()) }
    })
    .await;

    // Meanwhile: a child is deleted and another one drifts.
    let cms = cm_api(f.client());
    cms.delete("p0-0", &Default::default()).await.unwrap();
    merge(&cms, "p1-1", json!({"data": {"value": "drifted"}})).await;
    f.faults().release_held();

    wait_children(f.client(), &["p0-0", "p0-1", "p1-0", "p1-1"]).await;
    wait_data(f.client(), "p1-1", "value", "a").await;
    f.engine.converge().await;

    let writes = write_counts(&f.engine);
    let children: Vec<_> = writes
        .iter()
        .filter(|((_, o), _)| o.contains('-'))
        .map(|((v, o), n)| (v.as_str(), o.as_str(), *n))
        .collect();
    assert_eq!(
        children,
        [
            ("Create", "default/p0-0", 2),
            ("Create", "default/p0-1", 1),
            ("Create", "default/p1-0", 1),
            ("Create", "default/p1-1", 1),
            ("Update", "default/p1-1", 1),
        ],
        "each change acted on once"
    );
    f.stop().await;
}
