//! The flight recorder's memory bound under load: 1,000 parents created at once, each with a
//! ConfigMap child, recorded with a bound far smaller than what they publish; the recorder's
//! byte count, sampled on every event, never exceeds the bound, and the dump keeps the newest
//! events in the versioned format.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::engine::*;
use crate::common::{TIMEOUT, wait_for};

use kubectl_meta::engine::events::ActionVerb;
use kubectl_meta::engine::flight::{API_VERSION, FlightRecorder};
use serde_json::{Value, json};

fn one_configmap(req: &Value) -> Value {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    json!({"children": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-c"), "labels": {"app": name}},
        "data": {"k": "v"}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flight_recorder_stays_within_its_bound_under_1000_parents() {
    const BOUND: usize = 64 * 1024;
    const PARENTS: usize = 1000;
    let w = World::new("Parent", sync_fn(one_configmap)).await;
    let def = def(composite(
        "flight",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ));
    let engine = Running::start(w.client(), vec![def]).await;
    let bus = engine.engine.context().bus.clone();
    let rec = Arc::new(FlightRecorder::new(BOUND));
    rec.spawn(&bus);
    let max = Arc::new(AtomicUsize::new(0));
    let mut rx = bus.subscribe();
    let (r, m) = (Arc::clone(&rec), Arc::clone(&max));
    tokio::spawn(async move {
        while !matches!(
            rx.recv().await,
            Err(tokio::sync::broadcast::error::RecvError::Closed)
        ) {
            m.fetch_max(r.bytes(), Ordering::Relaxed);
        }
    });
    for i in 0..PARENTS {
        w.create(
            &parent_ar("Parent"),
            json!({"metadata": {"name": format!("p{i:04}")},
                   "spec": {"selector": {"matchLabels": {"app": format!("p{i:04}")}}}}),
        )
        .await;
    }
    let creates = wait_for("every child created", TIMEOUT * 6, || {
        let n = engine
            .writes()
            .iter()
            .filter(|(v, _)| *v == ActionVerb::Create)
            .count();
        async move { (n >= PARENTS).then_some(n) }
    })
    .await;
    assert!(creates >= PARENTS);
    engine.converge().await;
    assert!(
        max.load(Ordering::Relaxed) <= BOUND,
        "{} > {BOUND}",
        max.load(Ordering::Relaxed)
    );
    let dump: Value = serde_json::from_slice(&rec.dump_json()).expect("dump is JSON");
    assert_eq!(dump["apiVersion"], API_VERSION);
    assert!(dump["bytes"].as_u64().unwrap() <= BOUND as u64);
    // The bound was reached: old events went, the newest stayed.
    assert!(dump["evicted"].as_u64().unwrap() > 0, "{}", dump["evicted"]);
    let events = dump["events"].as_array().unwrap();
    assert!(!events.is_empty());
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "oldest first");
    engine.stop().await;
}
