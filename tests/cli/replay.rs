//! `kubectl meta replay` (issue 40, item 4 and its proof): two writers fight over a child
//! field (the hook sets it, another client sets it back); `kubectl meta run` records it,
//! `GET /debug/flight` returns the recording, and `kubectl meta replay FILE --no-tui -o json`,
//! with no cluster at all, shows the same `hotLoop` event for that parent within 10 s; with
//! `--live-hooks` and a hook that yields to the other writer, the replay shows no loop. Bad
//! files are usage errors naming the file.
//!
//! The fight also runs on an external cluster (a real kube-apiserver) when
//! `KUBECTL_META_TEST_KUBECONFIG` names one (tests/common/external.rs; docs/guide/replay.md).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::cli::*;
use crate::common::external::{Target, cluster};
use crate::common::{TIMEOUT, free_port};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::run::{FAST, hello_world_crd_and_sample, http_get};

/// An exec hook giving each HelloWorld a ConfigMap `NAME-c` whose `data.value` is `value`.
fn hook(value: &str) -> String {
    format!(
        "import json, sys
req = json.load(sys.stdin)
name = req['parent']['metadata']['name']
print(json.dumps({{'children': [{{'apiVersion': 'v1', 'kind': 'ConfigMap',
    'metadata': {{'name': name + '-c'}}, 'data': {{'value': '{value}'}}}}]}}))
"
    )
}

/// A CompositeController `fought` over HelloWorlds whose sync hook is `script` (exec), its
/// ConfigMaps updated in place.
fn controller(dir: &Path, script: &str, value: &str) -> String {
    std::fs::write(dir.join(script), hook(value)).unwrap();
    let file = dir.join(format!("{script}.yaml"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: fought}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}}
  childResources:
  - {{apiVersion: v1, resource: configmaps, updateStrategy: {{method: InPlace}}}}
  hooks:
    sync: {{exec: {{command: [python3, {script}]}}}}
"
        ),
    )
    .unwrap();
    file.display().to_string()
}

/// The NDJSON events of a replay's stdout.
fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fight_recorded_by_run_replays_as_the_same_hot_loop_offline() {
    let sb = cluster("replay").await;
    let ns = sb.ns().to_string();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let def = controller(dir.path(), "hook.py", "ours");
    hello_world_crd_and_sample(&sb).await;
    // Another client (field manager "fighter") sets the field back whenever it differs.
    let api: Api<ConfigMap> = Api::namespaced(sb.client(), &ns);
    let fighter = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let pp = PatchParams {
            field_manager: Some("fighter".into()),
            ..PatchParams::default()
        };
        let cfg = watcher::Config::default().fields("metadata.name=hello-c");
        let mut seen = std::pin::pin!(watcher(api.clone(), cfg).applied_objects());
        while let Some(cm) = seen.next().await {
            let Ok(cm) = cm else { continue };
            if cm
                .data
                .as_ref()
                .and_then(|d| d.get("value"))
                .map(String::as_str)
                != Some("theirs")
            {
                let theirs = json!({"data": {"value": "theirs"}});
                let _ = api.patch("hello-c", &pp, &Patch::Merge(theirs)).await;
            }
        }
    });
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let kubeconfig = kc(&sb);
    let mut args = vec![
        "--kubeconfig",
        &kubeconfig,
        "run",
        "-f",
        &def,
        "--identity",
        "r",
        "--http-addr",
        &addr,
    ];
    args.extend_from_slice(&FAST);
    let mut cmd = meta(home.path(), &args);
    cmd.current_dir(dir.path());
    let run_started = Instant::now();
    let run = Background::start(cmd);
    // The recording, once it holds the hot loop of the fight.
    // Generous: `run` starting, the fight and the loop detection on a busy 2-core machine.
    let deadline = Instant::now() + TIMEOUT * 2;
    let mut last = String::new();
    let recording: String = loop {
        if let Some((200, body)) = http_get(port, "/debug/flight").await {
            let v: Value = serde_json::from_str(&body).expect("/debug/flight is JSON");
            // The hot loop, and a sync after it that observed the other writer's value again:
            // its write after the engine's last one is what names the writer offline too.
            let after_loop = v["events"].as_array().and_then(|e| {
                let at = e.iter().position(|e| e["event"]["event"] == "hotLoop")?;
                e[at..].iter().find(|e| {
                    e["event"]["event"] == "hookCalled"
                        && e["event"]["request"]["children"]["ConfigMap.v1"]["hello-c"]["data"]
                            ["value"]
                            == "theirs"
                })
            });
            if after_loop.is_some() {
                break body;
            }
            last = body;
        }
        assert!(
            Instant::now() < deadline,
            "no hotLoop recorded within {:?}; run's stderr:\n{}\nstdout:\n{}\nlast recording:\n{last}",
            TIMEOUT * 2,
            run.errors(),
            run.output()
        );
        // Each look serialises the whole recording: not in a tight loop on a busy machine.
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "FIGURE run recorded the hot loop and the writer after it within {:.2}s of starting",
        run_started.elapsed().as_secs_f64()
    );
    let (_, stderr) = run.interrupt().await;
    fighter.abort();
    let live: Value = serde_json::from_str(&recording).unwrap();
    assert_eq!(
        live["controllers"][0]["metadata"]["name"], "fought",
        "{stderr}"
    );
    let file = dir.path().join("flight.json");
    std::fs::write(&file, &recording).unwrap();
    if let Ok(keep) = std::env::var("REPLAY_TEST_KEEP") {
        std::fs::write(keep, &recording).unwrap();
    }
    let file = file.display().to_string();
    drop(sb);

    // Offline: no kubeconfig, no cluster (the sandbox above is gone).
    let started = Instant::now();
    let out = run_to_end(meta(
        home.path(),
        &["replay", &file, "--no-tui", "-o", "json"],
    ))
    .await;
    let took = started.elapsed();
    let (stdout, stderr) = text(&out);
    let evs = events(&stdout);
    let hot: Vec<&Value> = evs.iter().filter(|e| e["event"] == "hotLoop").collect();
    assert_eq!(hot.len(), 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(hot[0]["parent"], format!("{ns}/hello"));
    assert_eq!(hot[0]["object"], format!("{ns}/hello-c"));
    assert_eq!(hot[0]["path"], "data.value");
    let cause = hot[0]["cause"].as_str().unwrap();
    assert!(
        cause.contains("field manager \"fighter\""),
        "{cause}\nstderr:\n{stderr}"
    );
    eprintln!(
        "FIGURE offline replay: {} hotLoop naming {cause:?} in {:.2}s",
        hot.len(),
        took.as_secs_f64()
    );
    // The other writer as data, in the recording (what the replay applied its writes as) and
    // in the replay's own event.
    let recorded: Vec<&Value> = live["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["event"] == "hotLoop")
        .collect();
    assert!(
        recorded.iter().any(|e| e["event"]["writer"] == "fighter"),
        "{recorded:?}"
    );
    assert_eq!(hot[0]["writer"], "fighter", "{stdout}");
    // Issue 40's figure is "within 10 s": printed (FIGURE above, and here when over), not
    // asserted, since a busy 2-core machine running debug binaries can take longer; a replay
    // that hangs still fails at TIMEOUT.
    if took > Duration::from_secs(10) {
        eprintln!(
            "FIGURE the offline replay took {:.2}s, over issue 40's 10 s (a busy machine?)",
            took.as_secs_f64()
        );
    }
    assert!(
        took < TIMEOUT,
        "the replay took {took:?} (more than {TIMEOUT:?})"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a hot loop fails the replay: {stderr}"
    );
    // The hook was never called: every answer is a recorded one.
    assert!(
        evs.iter().filter(|e| e["event"] == "hookCalled").all(
            |e| e["error"].is_null() && e["response"]["children"][0]["data"]["value"] == "ours"
        ),
        "{stdout}"
    );

    // The fixed hook yields to the other writer: no loop.
    let fixed = controller(dir.path(), "fixed.py", "theirs");
    let mut cmd = meta(
        home.path(),
        &[
            "replay",
            &file,
            "--live-hooks",
            "-f",
            &fixed,
            "--no-tui",
            "-o",
            "json",
        ],
    );
    cmd.current_dir(dir.path());
    let out = run_to_end(cmd).await;
    let (stdout, stderr) = text(&out);
    let evs = events(&stdout);
    assert!(
        evs.iter().all(|e| e["event"] != "hotLoop"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        evs.iter().any(|e| e["event"] == "hookCalled"
            && e["response"]["children"][0]["data"]["value"] == "theirs"),
        "the live hook answered: {stdout}\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

async fn run_to_end(cmd: std::process::Command) -> std::process::Output {
    run(cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_recordings_are_usage_errors_naming_the_file() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "other.json",
            json!({"apiVersion": "v1", "kind": "ConfigMap"}).to_string(),
            "is not a flight recording",
        ),
        (
            "cut.json",
            "{\"apiVersion\": \"flight.kubectl-meta.io/v1\", \"events\": [".to_string(),
            "ends early",
        ),
        (
            "empty.json",
            json!({"apiVersion": "flight.kubectl-meta.io/v1", "kind": "FlightRecording",
            "limitBytes": 1, "bytes": 0, "evicted": 0, "lost": 0, "events": []})
            .to_string(),
            "no events",
        ),
    ];
    for (name, body, says) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, body).unwrap();
        let out = run(meta(
            home.path(),
            &["replay", &file.display().to_string(), "--no-tui"],
        ))
        .await;
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains(says),
            "{name}: {stderr}"
        );
        assert!(stdout.is_empty(), "{name}: nothing starts: {stdout}");
    }
}

/// Two parents in one recording, and another client deleting one parent's child between two
/// of its syncs (made-up recording, tests/common/replay.rs): the replay deletes it at that
/// point and the engine creates it again, as it did; the other parent's children follow its
/// own recorded answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_writers_delete_is_replayed_with_several_parents() {
    use crate::common::replay::{child, document, parent, sync_call};
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (hello, world) = (parent("hello"), parent("world"));
    let first = |p: &str| json!({format!("{p}-c"): child(p, "first", true)});
    let recorded = [
        sync_call(&hello, json!({}), &[child("hello", "first", false)]),
        sync_call(&world, json!({}), &[child("world", "first", false)]),
        sync_call(&hello, first("hello"), &[child("hello", "first", false)]),
        sync_call(&world, first("world"), &[child("world", "second", false)]),
        // hello-c is gone though the answer before asked for it: another client deleted it.
        sync_call(&hello, json!({}), &[child("hello", "first", false)]),
        sync_call(
            &world,
            json!({"world-c": child("world", "second", true)}),
            &[child("world", "second", false)],
        ),
    ];
    let file = dir.path().join("flight.json");
    std::fs::write(&file, document(&recorded)).unwrap();
    let out = run(meta(
        home.path(),
        &[
            "replay",
            &file.display().to_string(),
            "--no-tui",
            "-o",
            "json",
        ],
    ))
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    let evs = events(&stdout);
    let actions = |verb: &str, object: &str| {
        evs.iter()
            .filter(|e| e["event"] == "action" && e["verb"] == verb && e["object"] == object)
            .count()
    };
    // Created, deleted by the other client (not an engine action), created again.
    assert_eq!(actions("create", "default/hello-c"), 2, "{stdout}");
    assert_eq!(actions("delete", "default/hello-c"), 0, "{stdout}");
    assert_eq!(actions("create", "default/world-c"), 1, "{stdout}");
    assert_eq!(actions("update", "default/world-c"), 1, "{stdout}");
    assert!(
        stderr.contains("1 other writer write(s) applied"),
        "{stderr}"
    );
    // Both parents synced with their own recorded answers.
    for p in ["default/hello", "default/world"] {
        assert!(
            evs.iter()
                .any(|e| e["event"] == "hookCalled" && e["parent"] == p && e["error"].is_null()),
            "{p}: {stdout}"
        );
    }
}
