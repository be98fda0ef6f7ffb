//! `kubectl meta dev -o json` keeps to its documented schema, docs/dev-events.schema.json: on
//! each example (CompositeController hello-world and catset, DecoratorController
//! service-per-pod, MapController snapshot-schedule; all with exec hooks) every stdout line is
//! JSON that validates, and the lines carry what a viewer needs (hook bodies, per-object plans,
//! map keys).

use crate::common;

use crate::common::cli::*;
use crate::common::schema::validate;
use serde_json::Value;

fn schema() -> Value {
    let text = std::fs::read_to_string(repo().join("docs/dev-events.schema.json"))
        .expect("docs/dev-events.schema.json");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// Run `dev --apply -f examples/<name> --once -o json` on a fresh sandbox; every stdout line
/// must validate. Returns the events.
async fn events_of(name: &str) -> Vec<Value> {
    let out = dev_once_json(&example(name), &[]).await;
    valid_lines(name, &assert_ok(&out))
}

/// `dev --apply -f <dir> --once -o json <extra>` on a fresh sandbox.
async fn dev_once_json(dir: &str, extra: &[&str]) -> std::process::Output {
    dev_once_json_on(&common::start().await, dir, extra).await
}

/// `dev --apply -f <dir> --once -o json <extra>` on `sb`.
async fn dev_once_json_on(
    sb: &common::TestSandbox,
    dir: &str,
    extra: &[&str],
) -> std::process::Output {
    let home = tempfile::tempdir().expect("tempdir");
    let kc = kc(sb);
    let args = [
        "--kubeconfig",
        &kc,
        "dev",
        "--apply",
        "-f",
        dir,
        "--once",
        "-o",
        "json",
    ];
    run(meta(home.path(), &[&args[..], extra].concat())).await
}

/// Every line of `stdout` as JSON that validates against the schema.
fn valid_lines(name: &str, stdout: &str) -> Vec<Value> {
    let schema = schema();
    let mut events = Vec::new();
    for line in stdout.lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: not JSON: {line}: {e}"));
        if let Err(e) = validate(&schema, &schema, &v, "$") {
            panic!("{name}: line does not validate against the schema: {e}\n{line}");
        }
        events.push(v);
    }
    assert!(!events.is_empty(), "{name}: no events");
    events
}

/// A failing sync's `syncFinished` carries the error and the layer it comes from: a hook that
/// exits non-zero and a child the API server rejects as invalid are both the hook's to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_syncs_name_the_layer_of_their_error() {
    let cases = [
        ("exit-3", "import sys\nsys.stdin.read()\nsys.exit(3)\n"),
        (
            "invalid-child",
            "import json, sys\nreq = json.load(sys.stdin)\nprint(json.dumps({'children': [{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'x'}, 'spec': {'containers': []}}]}))\n",
        ),
    ];
    for (name, script) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        exec_hook_controller(dir.path(), name, script);
        let d = dir.path().display().to_string();
        let out = dev_once_json(&d, &["--timeout", "3"]).await;
        let stderr = assert_fails(&out);
        assert_eq!(out.status.code(), Some(4), "{name}: {stderr}");
        let ev = valid_lines(name, &String::from_utf8_lossy(&out.stdout));
        assert!(
            has(&ev, |e| e["event"] == "syncFinished"
                && e["error"].is_string()
                && e["errorLayer"] == "hook"),
            "{name}: no failed syncFinished with errorLayer hook: {ev:?}"
        );
        assert!(
            !has(&ev, |e| e["event"] == "syncFinished"
                && e["error"].is_null()
                && !e["errorLayer"].is_null()),
            "{name}: errorLayer without an error"
        );
    }
}

fn has(events: &[Value], f: impl Fn(&Value) -> bool) -> bool {
    events.iter().any(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_examples_emit_only_schema_valid_lines() {
    for name in ["hello-world", "catset"] {
        let ev = events_of(name).await;
        assert!(
            has(&ev, |e| e["event"] == "hookCalled"
                && e["request"]["parent"].is_object()
                && e["response"].is_object()),
            "{name}: hook bodies"
        );
        assert!(
            has(&ev, |e| e["event"] == "planned"
                && e["objects"].as_array().is_some_and(|o| o
                    .iter()
                    .any(|o| o["action"] == "create"))),
            "{name}: per-object plan"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decorator_example_emits_only_schema_valid_lines() {
    let ev = events_of("service-per-pod").await;
    assert!(has(&ev, |e| e["event"] == "planned"));
    assert!(has(&ev, |e| e["event"] == "hookCalled"
        && e["request"]["object"].is_object()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_example_emits_only_schema_valid_lines_with_map_keys() {
    let ev = events_of("snapshot-schedule").await;
    assert!(
        has(&ev, |e| e["event"] == "hookCalled"
            && e["hook"] == "map"
            && e["mapKey"].is_string()
            && e["request"]["mapKey"] == e["mapKey"]),
        "map hook calls carry their key"
    );
    assert!(
        has(&ev, |e| e["event"] == "planned" && e["mapKey"].is_string()),
        "map plans carry their key"
    );
    // Every event of a key's sync carries the key as a field of its own.
    for kind in ["syncStarted", "syncFinished", "action"] {
        assert!(
            has(&ev, |e| e["event"] == kind && e["mapKey"].is_string()),
            "{kind} of map keys carry their key"
        );
    }
    // ... and `parent` never contains it: it names the parent alone.
    let keys: Vec<&str> = ev.iter().filter_map(|e| e["mapKey"].as_str()).collect();
    assert!(!keys.is_empty());
    for e in &ev {
        if let Some(p) = e["parent"].as_str() {
            assert!(
                !p.contains(' ') && keys.iter().all(|k| !p.contains(k)),
                "parent without the map key: {e}"
            );
        }
    }
}

/// When the API server throttles (429 with `Retry-After`), `apiRate` events say so: the rate,
/// the 429 answers so far, the narrowed window; they validate, and the Pod is still created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_shows_in_schema_valid_api_rate_events() {
    let sb = common::start().await;
    let throttled = sb.sandbox.faults().inject(
        kube_sandbox::faults::Fault::on("POST", "/api/v1/namespaces/default/pods")
            .too_many_requests(1)
            .times(3),
    );
    let out = dev_once_json_on(&sb, &example("hello-world"), &[]).await;
    let ev = valid_lines("throttled", &assert_ok(&out));
    assert_eq!(throttled.fired(), 3);
    let rates: Vec<&Value> = ev.iter().filter(|e| e["event"] == "apiRate").collect();
    assert!(
        rates
            .iter()
            .any(|e| e["throttled"].as_u64().is_some_and(|n| n >= 1)
                && e["window"].as_u64().is_some()),
        "an apiRate event reports the throttling: {rates:?}"
    );
    assert!(
        rates.iter().all(|e| e.get("qpsLimit").is_none()),
        "no --api-qps cap by default: {rates:?}"
    );
    assert!(
        has(&ev, |e| e["event"] == "action"
            && e["verb"] == "create"
            && e["resource"] == "Pod.v1"
            && e["error"].is_null()),
        "the Pod is created after the 429s"
    );
}

#[test]
fn the_check_refuses_what_the_schema_does_not_allow() {
    let s = schema();
    let ok = serde_json::json!({"time": "t", "event": "paused", "paused": true});
    assert_eq!(validate(&s, &s, &ok, "$"), Ok(()));
    for bad in [
        serde_json::json!({"time": "t", "event": "paused", "paused": true, "extra": 1}),
        serde_json::json!({"time": "t", "event": "paused"}),
        serde_json::json!({"time": "t", "event": "nosuchEvent"}),
        serde_json::json!({"time": "t", "event": "action", "controller": "c", "parent": "p",
            "verb": "explode", "resource": "r", "object": "o", "detail": null, "error": null}),
    ] {
        assert!(validate(&s, &s, &bad, "$").is_err(), "{bad}");
    }
}
