//! Watch: kube-rs `watcher` (list+watch and streaming lists), the `reflector`, raw watches from a
//! resourceVersion, 410 Expired and the watcher's recovery, selector translation, timeouts,
//! bookmarks, and ordering across many concurrent watches.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use kube_sandbox::SandboxConfig;
use serde_json::json;

use crate::common::TIMEOUT;

fn cm(name: &str, labels: &[(&str, &str)], data: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    if !labels.is_empty() {
        c.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    c.data = Some([("k".to_string(), data.to_string())].into());
    c
}

async fn create(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, labels, "v0"))
        .await
        .unwrap_or_else(|e| panic!("create configmap {name}: {e}"))
}

fn rv(o: &impl ResourceExt) -> u64 {
    o.resource_version()
        .expect("object has a resourceVersion")
        .parse()
        .expect("resourceVersion is numeric")
}

/// Next item of a stream, or panic naming `what` after the common timeout.
async fn next<S: Stream + Unpin>(s: &mut S, what: &str) -> S::Item {
    tokio::time::timeout(TIMEOUT, s.next())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("stream ended while waiting for {what}"))
}

/// Next non-bookmark raw watch event.
async fn next_change<K, S>(s: &mut S, what: &str) -> WatchEvent<K>
where
    S: Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    loop {
        match next(s, what).await.expect("watch stream item") {
            WatchEvent::Bookmark(_) => continue,
            ev => return ev,
        }
    }
}

/// (type, name, resourceVersion) of a raw watch event on ConfigMaps.
fn describe(ev: &WatchEvent<ConfigMap>) -> (&'static str, String, u64) {
    match ev {
        WatchEvent::Added(o) => ("ADDED", o.name_any(), rv(o)),
        WatchEvent::Modified(o) => ("MODIFIED", o.name_any(), rv(o)),
        WatchEvent::Deleted(o) => ("DELETED", o.name_any(), rv(o)),
        other => panic!("unexpected watch event {other:?}"),
    }
}

/// Read the initial Init / InitApply* / InitDone of a kube-rs watcher; returns the names listed.
async fn initial_names<S>(w: &mut S) -> BTreeSet<String>
where
    S: Stream<Item = watcher::Result<Event<ConfigMap>>> + Unpin,
{
    match next(w, "Init").await.expect("watcher ok") {
        Event::Init => {}
        other => panic!("expected Init first, got {other:?}"),
    }
    let mut names = BTreeSet::new();
    loop {
        match next(w, "InitApply/InitDone").await.expect("watcher ok") {
            Event::InitApply(o) => {
                names.insert(o.name_any());
            }
            Event::InitDone => return names,
            other => panic!("expected InitApply or InitDone, got {other:?}"),
        }
    }
}

/// Drive a fresh watcher through create, update and delete done by a separate client.
async fn watcher_sees_lifecycle(cfg: watcher::Config) {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    create(&api, "pre", &[]).await;
    let mut w = watcher::watcher(api.clone(), cfg).boxed();
    let names = initial_names(&mut w).await;
    // `default` also has the cluster's CA bundle, as on a real cluster.
    assert_eq!(
        names,
        BTreeSet::from(["kube-root-ca.crt".to_string(), "pre".to_string()])
    );

    let other: Api<ConfigMap> = Api::namespaced(common::client_for(&t.sandbox).await, "default");
    let created = create(&other, "live", &[]).await;
    match next(&mut w, "Apply(live) after create")
        .await
        .expect("watcher ok")
    {
        Event::Apply(o) => {
            assert_eq!(o.name_any(), "live");
            assert_eq!(o.metadata.uid, created.metadata.uid);
        }
        other => panic!("expected Apply(live), got {other:?}"),
    }
    other
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v1"}})),
        )
        .await
        .expect("update live");
    match next(&mut w, "Apply(live) after update")
        .await
        .expect("watcher ok")
    {
        Event::Apply(o) => {
            assert_eq!(o.name_any(), "live");
            assert_eq!(
                o.data.as_ref().and_then(|d| d.get("k")).map(String::as_str),
                Some("v1")
            );
        }
        other => panic!("expected Apply(live) with the update, got {other:?}"),
    }
    other
        .delete("live", &DeleteParams::default())
        .await
        .expect("delete live");
    match next(&mut w, "Delete(live)").await.expect("watcher ok") {
        Event::Delete(o) => assert_eq!(o.name_any(), "live"),
        other => panic!("expected Delete(live), got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_sees_init_then_apply_and_delete() {
    watcher_sees_lifecycle(watcher::Config::default()).await;
}

#[tokio::test]
async fn streaming_list_watcher_sees_init_then_apply_and_delete() {
    watcher_sees_lifecycle(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test]
async fn reflector_store_converges_to_the_live_objects() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for i in 0..5 {
        create(&api, &format!("early-{i}"), &[]).await;
    }
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api.clone(), Default::default()))
        .applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    tokio::time::timeout(TIMEOUT, reader.wait_until_ready())
        .await
        .expect("reflector ready in time")
        .expect("reflector writer alive");

    for i in 0..10 {
        create(&api, &format!("late-{i}"), &[]).await;
    }
    for name in ["early-0", "early-3", "late-2", "late-5", "late-9"] {
        api.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {name}: {e}"));
    }
    create(&api, "last", &[]).await;

    let live: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    let mut expected: BTreeSet<String> = (0..5)
        .map(|i| format!("early-{i}"))
        .chain((0..10).map(|i| format!("late-{i}")))
        .chain(["last".to_string(), "kube-root-ca.crt".to_string()])
        .collect();
    for gone in ["early-0", "early-3", "late-2", "late-5", "late-9"] {
        expected.remove(gone);
    }
    assert_eq!(live, expected, "the server lists exactly the live objects");
    common::wait_for("reflector store to converge", TIMEOUT, || {
        let names: BTreeSet<String> = reader.state().iter().map(|c| c.name_any()).collect();
        let want = expected.clone();
        async move { (names == want).then_some(()) }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn raw_watch_from_resource_version_replays_exactly_later_events_in_order() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let a = create(&api, "a", &[]).await;
    let from = a.resource_version().expect("rv");

    let b = create(&api, "b", &[]).await;
    let a2 = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v2"}})),
        )
        .await
        .expect("update a");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
    let c = create(&api, "c", &[]).await;

    let mut w = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch from rv")
        .boxed();
    let mut got = Vec::new();
    for i in 0..4 {
        got.push(describe(
            &next_change(&mut w, &format!("replayed event {i}")).await,
        ));
    }
    let deleted_rv = got[2].2;
    assert_eq!(
        got,
        vec![
            ("ADDED", "b".to_string(), rv(&b)),
            ("MODIFIED", "a".to_string(), rv(&a2)),
            ("DELETED", "b".to_string(), deleted_rv),
            ("ADDED", "c".to_string(), rv(&c)),
        ]
    );
    assert!(rv(&a2) < deleted_rv && deleted_rv < rv(&c), "{got:?}");
    // Nothing else was replayed: the next event is a write made now.
    let d = create(&api, "d", &[]).await;
    assert_eq!(
        describe(&next_change(&mut w, "live event after replay").await),
        ("ADDED", "d".to_string(), rv(&d))
    );
}

fn small_history() -> SandboxConfig {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.history = 5;
    cfg.tunables.kubelet_delay = None;
    cfg
}

#[tokio::test]
async fn watch_from_too_old_resource_version_is_410_expired() {
    let t = common::start_with(small_history()).await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let first = create(&api, "first", &[]).await;
    for i in 0..20 {
        create(&api, &format!("cm-{i}"), &[]).await;
    }
    let mut w = api
        .watch(
            &WatchParams::default(),
            &first.resource_version().expect("rv"),
        )
        .await
        .expect("watch request is accepted; the error comes as an event")
        .boxed();
    match next(&mut w, "ERROR event").await.expect("watch item") {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410, "{s:?}");
            assert_eq!(s.reason, "Expired", "{s:?}");
            assert!(s.message.contains("too old resource version"), "{s:?}");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    let end = tokio::time::timeout(TIMEOUT, w.next())
        .await
        .expect("stream ends after the error");
    assert!(end.is_none(), "stream must end after 410, got {end:?}");

    // A recent resourceVersion is still within the history.
    let last = create(&api, "last", &[]).await;
    let mut ok = api
        .watch(&WatchParams::default(), &(rv(&last) - 1).to_string())
        .await
        .expect("watch from recent rv")
        .boxed();
    assert_eq!(
        describe(&next_change(&mut ok, "replayed recent event").await),
        ("ADDED", "last".to_string(), rv(&last))
    );
}

#[tokio::test]
async fn watcher_recovers_from_410_by_relisting() {
    let t = common::start_with(small_history()).await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    create(&api, "w1", &[("app", "watched")]).await;
    // The watch times out after 1 s and resumes from the last resourceVersion it saw; the
    // unlabelled writes meanwhile push that resourceVersion out of the 5-event history.
    let cfg = watcher::Config::default().labels("app=watched").timeout(1);
    let mut w = watcher::watcher(api.clone(), cfg).boxed();
    assert_eq!(
        initial_names(&mut w).await,
        BTreeSet::from(["w1".to_string()])
    );
    for i in 0..20 {
        create(&api, &format!("noise-{i}"), &[]).await;
    }
    // The next thing the watcher reports is the 410 of its resumed watch.
    let item = tokio::time::timeout(TIMEOUT, w.next())
        .await
        .expect("timed out waiting for the 410 from the resumed watch")
        .expect("watcher stream does not end");
    match item {
        Err(watcher::Error::WatchError(s)) => {
            assert_eq!(s.code, 410, "{s:?}");
            assert_eq!(s.reason, "Expired", "{s:?}");
        }
        Err(e) => panic!("unexpected watcher error {e}"),
        Ok(other) => panic!("unexpected event before the 410: {other:?}"),
    }
    // The watcher relists and carries on.
    assert_eq!(
        initial_names(&mut w).await,
        BTreeSet::from(["w1".to_string()])
    );
    create(&api, "w2", &[("app", "watched")]).await;
    match next(&mut w, "Apply(w2) after recovery")
        .await
        .expect("watcher ok")
    {
        Event::Apply(o) => assert_eq!(o.name_any(), "w2"),
        other => panic!("expected Apply(w2), got {other:?}"),
    }
}

#[tokio::test]
async fn label_selector_watch_sees_gaining_the_label_as_added_and_losing_it_as_deleted() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let x = create(&api, "x", &[]).await;
    let mut w = api
        .watch(
            &WatchParams::default().labels("team=a"),
            &x.resource_version().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();
    let set_label = |v: Option<&str>| Patch::Merge(json!({"metadata": {"labels": {"team": v}}}));
    let pp = PatchParams::default();
    let gained = api
        .patch("x", &pp, &set_label(Some("a")))
        .await
        .expect("label x");
    let changed = api
        .patch("x", &pp, &Patch::Merge(json!({"data": {"k": "v1"}})))
        .await
        .expect("change x");
    let lost = api
        .patch("x", &pp, &set_label(Some("b")))
        .await
        .expect("relabel x");
    api.patch("x", &pp, &set_label(None))
        .await
        .expect("unlabel x");
    let marker = create(&api, "marker", &[("team", "a")]).await;

    let mut got = Vec::new();
    for i in 0..4 {
        got.push(describe(&next_change(&mut w, &format!("event {i}")).await));
    }
    assert_eq!(
        got,
        vec![
            ("ADDED", "x".to_string(), rv(&gained)),
            ("MODIFIED", "x".to_string(), rv(&changed)),
            ("DELETED", "x".to_string(), rv(&lost)),
            ("ADDED", "marker".to_string(), rv(&marker)),
        ]
    );
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let started = tokio::time::Instant::now();
    let mut w = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .expect("watch")
        .boxed();
    let ended = tokio::time::timeout(TIMEOUT, async {
        while let Some(item) = w.next().await {
            item.expect("watch item");
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch did not end on timeoutSeconds=1");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "the watch ended before its timeout: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn bookmarks_arrive_only_when_asked() {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.bookmark_interval = Duration::from_millis(200);
    let t = common::start_with(cfg).await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let before = create(&api, "before", &[]).await;
    let from = before.resource_version().expect("rv");
    let mut with = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch with bookmarks")
        .boxed();
    let without_params = WatchParams {
        bookmarks: false,
        ..WatchParams::default()
    };
    let mut without = api
        .watch(&without_params, &from)
        .await
        .expect("watch without bookmarks")
        .boxed();

    for i in 0..2 {
        match next(&mut with, &format!("bookmark {i}"))
            .await
            .expect("watch item")
        {
            WatchEvent::Bookmark(b) => {
                let brv: u64 = b.metadata.resource_version.parse().expect("numeric rv");
                assert!(
                    brv >= rv(&before),
                    "bookmark rv {brv} older than {}",
                    rv(&before)
                );
                assert_eq!(b.types.kind, "ConfigMap");
            }
            other => panic!("expected a bookmark, got {other:?}"),
        }
    }
    // The watch that did not ask got no bookmark meanwhile: its first event is the next write.
    let after = create(&api, "after", &[]).await;
    match next(&mut without, "first event without bookmarks")
        .await
        .expect("watch item")
    {
        WatchEvent::Added(o) => {
            assert_eq!((o.name_any(), rv(&o)), ("after".to_string(), rv(&after)))
        }
        other => panic!("expected ADDED after, got {other:?}"),
    }
    // Bookmarks after a write carry at least its resourceVersion.
    assert_eq!(
        describe(&next_change(&mut with, "ADDED after").await).1,
        "after"
    );
    match next(&mut with, "bookmark after the write")
        .await
        .expect("watch item")
    {
        WatchEvent::Bookmark(b) => {
            let brv: u64 = b.metadata.resource_version.parse().expect("numeric rv");
            assert!(
                brv >= rv(&after),
                "bookmark rv {brv} older than {}",
                rv(&after)
            );
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_concurrent_watchers_see_the_same_ordered_sequence() {
    const WATCHERS: usize = 100;
    const WRITES: usize = 50;
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let seed = create(&api, "seed", &[]).await;
    let from = seed.resource_version().expect("rv");

    // 10 clients (connections) with 10 watches each, all open before the writes.
    let mut clients = Vec::new();
    for _ in 0..10 {
        clients.push(common::client_for(&t.sandbox).await);
    }
    let mut tasks = Vec::new();
    for i in 0..WATCHERS {
        let wapi: Api<ConfigMap> = Api::namespaced(clients[i % clients.len()].clone(), "default");
        let mut w = wapi
            .watch(&WatchParams::default(), &from)
            .await
            .unwrap_or_else(|e| panic!("watch {i}: {e}"))
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(WRITES);
            while seen.len() < WRITES {
                let ev = next_change(&mut w, &format!("event {} of watcher {i}", seen.len())).await;
                seen.push(describe(&ev).2);
            }
            seen
        }));
    }

    let mut written = Vec::with_capacity(WRITES);
    for i in 0..WRITES {
        let name = format!("obj-{}", i % 10);
        let o = if i < 10 {
            create(&api, &name, &[]).await
        } else {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"k": format!("v{i}")}})),
            )
            .await
            .unwrap_or_else(|e| panic!("update {name}: {e}"))
        };
        written.push(rv(&o));
    }
    assert!(written.windows(2).all(|w| w[0] < w[1]), "{written:?}");

    for (i, task) in tasks.into_iter().enumerate() {
        let seen = task
            .await
            .unwrap_or_else(|e| panic!("watcher {i} task: {e}"));
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "watcher {i}: resourceVersions not strictly increasing: {seen:?}"
        );
        assert_eq!(seen, written, "watcher {i} saw a different sequence");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_visible_to_every_watch_in_order() {
    let t = common::start().await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("other".into());
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace other");

    let default: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let other: Api<ConfigMap> = Api::namespaced(t.client.clone(), "other");
    // The new namespace gets its CA bundle from the sandbox's controllers: let that happen
    // before the watches start, so only this test's writes follow.
    common::wait_for("kube-root-ca.crt in other", TIMEOUT, || async {
        other.get_opt("kube-root-ca.crt").await.expect("get")
    })
    .await;
    let all: Api<ConfigMap> = Api::all(t.client.clone());
    // The same resource seen through DynamicObject.
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let dyn_all: Api<DynamicObject> = Api::all_with(t.client.clone(), &ar);

    let start = default
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata;
    let from = start.resource_version.expect("list rv");
    let mut w_default = default
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch default")
        .boxed();
    let mut w_all = all
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch all")
        .boxed();
    let mut w_labelled = all
        .watch(&WatchParams::default().labels("even=true"), &from)
        .await
        .expect("watch labelled")
        .boxed();
    let mut w_dyn = dyn_all
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch dynamic")
        .boxed();
    let mut w_runtime = watcher::watcher(all.clone(), Default::default()).boxed();
    assert_eq!(
        initial_names(&mut w_runtime).await,
        BTreeSet::from(["kube-root-ca.crt".to_string()])
    );

    let mut last_rv = 0;
    for i in 0..12 {
        let (api, ns) = if i % 3 == 0 {
            (&other, "other")
        } else {
            (&default, "default")
        };
        let labels: &[(&str, &str)] = if i % 2 == 0 { &[("even", "true")] } else { &[] };
        let o = create(api, &format!("w-{i}"), labels).await;
        let want = ("ADDED", format!("w-{i}"), rv(&o));
        assert!(want.2 > last_rv);
        last_rv = want.2;

        assert_eq!(
            describe(&next_change(&mut w_all, "all-namespaces watch").await),
            want
        );
        if ns == "default" {
            assert_eq!(
                describe(&next_change(&mut w_default, "namespaced watch").await),
                want
            );
        }
        if i % 2 == 0 {
            assert_eq!(
                describe(&next_change(&mut w_labelled, "labelled watch").await),
                want
            );
        }
        match next_change(&mut w_dyn, "dynamic watch").await {
            WatchEvent::Added(d) => {
                assert_eq!(
                    (d.name_any(), d.namespace(), rv(&d)),
                    (want.1.clone(), Some(ns.to_string()), want.2)
                );
                assert_eq!(d.types.as_ref().map(|t| t.kind.as_str()), Some("ConfigMap"));
            }
            other => panic!("dynamic watch: expected ADDED, got {other:?}"),
        }
        match next(&mut w_runtime, "runtime watcher")
            .await
            .expect("watcher ok")
        {
            Event::Apply(o) => assert_eq!((o.name_any(), rv(&o)), (want.1.clone(), want.2)),
            other => panic!("runtime watcher: expected Apply, got {other:?}"),
        }
    }
    // Nothing the namespaced watch should not have seen slipped in: its next event is a new write.
    let fin = create(&default, "final", &[]).await;
    assert_eq!(
        describe(&next_change(&mut w_default, "final").await),
        ("ADDED", "final".to_string(), rv(&fin))
    );
}
