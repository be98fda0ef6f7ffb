//! `kubectl meta run --sharded` (issue 39): three replicas share one controller's parents,
//! each parent synced by exactly one replica (read from each replica's own `-o json` log), a
//! `kill -9` hands the dead replica's parents to the others after its Lease lapses, a fourth
//! replica joining takes a share, and no parent is ever synced by two replicas at once.
//!
//! The hook is a real process (the hello-world example's Python webhook server), the cluster
//! the in-process sandbox, the replicas the real binary.
//!
//! `shard::three_sharded_replicas_narrow_a_decorators_targets_and_attachments` does the same for a
//! DecoratorController and checks that each replica caches only a fraction of its targets and
//! attachments.
//!
//! `shard::three_sharded_replicas_split` also runs on an external cluster (a real kube-apiserver) when
//! `KUBECTL_META_TEST_KUBECONFIG` names one (tests/common/external.rs; docs/guide/sharding.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::*;
use crate::common::external::{Target, cluster};
use crate::common::{TIMEOUT, free_port, wait_for};
use crate::run::{guard, hello_world_crd_and_sample, http_get, ok_kubectl};
use crate::run::{parse_prometheus, sample};
use serde_json::Value;

const CONTROLLER: &str = "hello-world-controller";
/// Parents besides the example's sample `hello`.
const PARENTS: usize = 300;

/// `run --sharded` with fast Leases (3 s duration, 2 s renew deadline, 0.25 s retry period).
fn replica(sb: &impl Target, home: &Path, def: &Path, identity: &str, port: u16) -> Background {
    replica_with(sb, home, def, identity, port, 4)
}

/// [`replica`] with `workers` workers.
fn replica_with(
    sb: &impl Target,
    home: &Path,
    def: &Path,
    identity: &str,
    port: u16,
    workers: usize,
) -> Background {
    let workers = workers.to_string();
    let kubeconfig = kc(sb);
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = meta(
        home,
        &[
            "--kubeconfig",
            &kubeconfig,
            "run",
            "--sharded",
            "--identity",
            identity,
            "--http-addr",
            &addr,
            "--lease-duration",
            "3",
            "--renew-deadline",
            "2",
            "--retry-period",
            "0.25",
            "--workers",
            &workers,
            "-f",
            &def.display().to_string(),
        ],
    );
    cmd.current_dir(home);
    Background::start(cmd)
}

/// Replicas `replica-a`, `-b` and `-c` of `def`, with their /metrics ports.
fn three_replicas(sb: &impl Target, home: &Path, def: &Path) -> ([u16; 3], [Background; 3]) {
    let ports = [free_port(), free_port(), free_port()];
    let r = |i: usize, id: &str| replica(sb, home, def, id, ports[i]);
    let all = [r(0, "replica-a"), r(1, "replica-b"), r(2, "replica-c")];
    (ports, all)
}

/// One sync seen in a replica's log: parent, start and end (`time` of its syncStarted and
/// syncFinished lines, RFC 3339 with milliseconds, so they compare as strings).
#[derive(Debug, Clone)]
struct Sync {
    parent: String,
    start: String,
    end: Option<String>,
}

/// Every sync a replica logged, in order.
fn syncs(log: &str) -> Vec<Sync> {
    let mut out: Vec<Sync> = Vec::new();
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(ev), Some(parent), Some(time)) = (
            v["event"].as_str(),
            v["parent"].as_str(),
            v["time"].as_str(),
        ) else {
            continue;
        };
        match ev {
            "syncStarted" => {
                open.insert(parent.to_string(), out.len());
                out.push(Sync {
                    parent: parent.to_string(),
                    start: time.to_string(),
                    end: None,
                });
            }
            "syncFinished" => {
                if let Some(i) = open.remove(parent) {
                    out[i].end = Some(time.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// The `ring now ...` info messages a replica logged, in order.
fn ring_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "info")
        .filter_map(|v| v["message"].as_str().map(str::to_string))
        .filter(|m| m.starts_with("ring now"))
        .collect()
}

/// Parents synced (started) in `log` at or after `since`.
fn synced_since(log: &str, since: &str) -> BTreeSet<String> {
    syncs(log)
        .into_iter()
        .filter(|s| s.start.as_str() >= since)
        .map(|s| s.parent)
        .collect()
}

/// No parent synced by two replicas at overlapping times (a sync still running at the end of
/// a log, as a killed replica's, lasts until that log's last line).
fn assert_never_twice(logs: &[(&str, String)]) {
    let mut by_parent: BTreeMap<String, Vec<(&str, String, String)>> = BTreeMap::new();
    for (who, log) in logs {
        let last = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["time"].as_str().map(str::to_string))
            .max()
            .unwrap_or_default();
        for s in syncs(log) {
            let end = s.end.clone().unwrap_or_else(|| last.clone());
            by_parent
                .entry(s.parent)
                .or_default()
                .push((who, s.start, end));
        }
    }
    let mut checked = 0;
    for (parent, mut v) in by_parent {
        v.sort_by(|a, b| a.1.cmp(&b.1));
        for w in v.windows(2) {
            checked += 1;
            if w[0].0 != w[1].0 {
                assert!(
                    w[0].2 <= w[1].1,
                    "{parent} synced by {} ({}..{}) and {} ({}..{}) at once",
                    w[0].0,
                    w[0].1,
                    w[0].2,
                    w[1].0,
                    w[1].1,
                    w[1].2
                );
            }
        }
    }
    assert!(checked > 0, "no syncs compared");
}

/// A sample of a replica's /metrics for the controller.
async fn metric(port: u16, name: &str) -> Option<f64> {
    metric_of(port, CONTROLLER, name).await
}

/// A sample of a replica's /metrics for `controller`.
async fn metric_of(port: u16, controller: &str, name: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    sample(
        &parse_prometheus(&body),
        name,
        &[("controller", controller)],
    )
}

/// Wait until every replica's ring in force has `n` members and no move is pending.
async fn ring_of(ports: &[u16], n: usize) {
    ring_of_controller(ports, CONTROLLER, n).await;
}

/// [`ring_of`] for `controller`.
async fn ring_of_controller(ports: &[u16], controller: &str, n: usize) {
    wait_for(
        &format!("a ring of {n} on every replica"),
        TIMEOUT,
        || async {
            for p in ports {
                if metric_of(*p, controller, "kubectl_meta_shard_members").await != Some(n as f64) {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

/// The time now as the replicas' logs write it.
fn now() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

/// Touch every parent (an annotation) so that each is synced once more, and wait until each
/// was synced by some replica since; returns which replica synced what since.
async fn poke(
    sb: &impl Target,
    round: &str,
    replicas: &[(&str, &Background)],
) -> BTreeMap<String, BTreeSet<String>> {
    poke_these(sb, round, replicas, &["helloworlds", "--all"], PARENTS + 1).await
}

/// [`poke`] of the `all` objects `which` names (`kubectl annotate` arguments).
async fn poke_these(
    sb: &impl Target,
    round: &str,
    replicas: &[(&str, &Background)],
    which: &[&str],
    all: usize,
) -> BTreeMap<String, BTreeSet<String>> {
    let since = now();
    let poke = format!("poke={round}");
    let mut args = vec!["annotate"];
    args.extend(which);
    args.extend([poke.as_str(), "--overwrite"]);
    ok_kubectl(sb, &args);
    wait_for(
        &format!("every parent synced after poke {round}"),
        TIMEOUT,
        || async {
            let mut seen = BTreeSet::new();
            for (_, b) in replicas {
                seen.extend(synced_since(&b.output(), &since));
            }
            (seen.len() >= all).then_some(())
        },
    )
    .await;
    replicas
        .iter()
        .map(|(n, b)| (n.to_string(), synced_since(&b.output(), &since)))
        .collect()
}

/// Each parent synced by exactly one replica; each replica's share within `lo..=hi` of all.
fn assert_shares(by: &BTreeMap<String, BTreeSet<String>>, lo: f64, hi: f64) {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (who, parents) in by {
        for p in parents {
            if let Some(other) = owner.insert(p, who) {
                panic!("{p} synced by {other} and {who} in one steady period");
            }
        }
    }
    let total = owner.len() as f64;
    let shares: Vec<String> = by.iter().map(|(w, p)| format!("{w} {}", p.len())).collect();
    eprintln!("FIGURE shares of {total} parents: {}", shares.join(", "));
    for (who, parents) in by {
        let share = parents.len() as f64 / total;
        assert!(
            (lo..=hi).contains(&share),
            "{who} synced {} of {total} parents ({share:.2}), not within {lo}..{hi}",
            parents.len()
        );
    }
}

/// What a replica's caches of the controller hold of `resource` (its /metrics).
async fn cached(port: u16, resource: &str) -> Option<f64> {
    cached_of(port, CONTROLLER, resource).await
}

/// What a replica's caches of `controller` hold of `resource` (its /metrics).
async fn cached_of(port: u16, controller: &str, resource: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    sample(
        &parse_prometheus(&body),
        "kubectl_meta_cached_objects",
        &[("controller", controller), ("resource", resource)],
    )
}

/// Parent objects the server has sent each replica so far (`kubectl_meta_watch_objects_total`).
async fn received_parents(ports: &[u16]) -> Vec<f64> {
    let mut out = Vec::new();
    for p in ports {
        let (_, body) = http_get(*p, "/metrics").await.expect("metrics");
        out.push(
            sample(
                &parse_prometheus(&body),
                "kubectl_meta_watch_objects_total",
                &[
                    ("controller", CONTROLLER),
                    ("resource", "helloworlds.example.kubectl-meta.dev"),
                ],
            )
            .expect("kubectl_meta_watch_objects_total of the parents"),
        );
    }
    out
}

/// The parent events each replica received since `before` (a poke of every parent, then the
/// syncs' status writes): in mode `server` each gets about its share (at most half of what all
/// three got), in mode `label` each gets every parent's poke at least.
async fn assert_received_parents(ports: &[u16], before: &[f64], mode: &str) {
    let all = (PARENTS + 1) as f64;
    // The counters are refreshed with the status; wait until every poke is counted.
    let got = wait_for("the replicas' parent events counted", TIMEOUT, || async {
        let now = received_parents(ports).await;
        let d: Vec<f64> = now.iter().zip(before).map(|(n, b)| n - b).collect();
        let counted = if mode == "server" {
            d.iter().sum::<f64>() >= all
        } else {
            d.iter().all(|n| *n >= all)
        };
        counted.then_some(d)
    })
    .await;
    eprintln!(
        "FIGURE parent events received per replica during a poke of {all} parents (mode {mode}): {got:?}"
    );
    let sum: f64 = got.iter().sum();
    for (p, n) in ports.iter().zip(&got) {
        if mode == "server" {
            assert!(
                *n <= 0.5 * sum,
                "replica on {p} received {n} of {sum} parent events"
            );
        } else {
            assert!(*n >= all, "replica on {p} received {n} parent events");
        }
    }
}

/// Whether the cluster filters lists by KEP-5866 `shardSelector`, asked independently of the
/// replicas: a list of the parents with the selector of half the hash range holds fewer than
/// all of them (a server without the gate ignores the parameter).
async fn server_filters(sb: &impl Target) -> bool {
    server_filters_on(
        sb,
        "/apis/example.kubectl-meta.dev/v1",
        "helloworlds",
        PARENTS + 1,
    )
    .await
}

/// [`server_filters`] for the `all` objects of `plural` under `prefix` (`/api/v1`, `/apis/G/V`)
/// in the test's namespace.
async fn server_filters_on(sb: &impl Target, prefix: &str, plural: &str, all: usize) -> bool {
    let half = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    let mut q = String::new();
    for b in half.bytes() {
        if b.is_ascii_alphanumeric() {
            q.push(char::from(b));
        } else {
            q.push_str(&format!("%{b:02X}"));
        }
    }
    let path = format!("{prefix}/namespaces/{}/{plural}?shardSelector={q}", sb.ns());
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    let list: Value = sb.client().request(req).await.expect("list");
    let n = list["items"].as_array().map_or(0, Vec::len);
    eprintln!("the server answers {n} of {all} {plural} for half the hash range");
    n < all
}

/// Each replica caches only its share (`kubectl_meta_cached_objects`, mode `mode`: `server`
/// when the server filters the parents' list and watch, else `label`): its parents and their
/// Pods, 15-50% of all each, and the replicas together exactly all of them (no parent or Pod
/// cached twice), once the moves' re-lists are done.
async fn assert_cached_shares(ports: &[u16], mode: &str) {
    let all = (PARENTS + 1) as f64;
    let hw = "helloworlds.example.kubectl-meta.dev";
    let shares = wait_for(
        "the replicas' caches to hold all parents and Pods once",
        TIMEOUT,
        || async {
            let mut got = Vec::new();
            for p in ports {
                got.push((cached(*p, hw).await?, cached(*p, "pods").await?));
            }
            let parents: f64 = got.iter().map(|g| g.0).sum();
            let pods: f64 = got.iter().map(|g| g.1).sum();
            (parents == all && pods == all).then_some(got)
        },
    )
    .await;
    eprintln!("FIGURE cached (parents, Pods) per replica of {all} each: {shares:?}");
    for (p, (parents, pods)) in ports.iter().zip(shares) {
        for (what, n) in [("parents", parents), ("Pods", pods)] {
            assert!(
                (0.15 * all..=0.5 * all).contains(&n),
                "replica on {p} caches {n} {what} of {all}"
            );
        }
        let (_, body) = http_get(*p, "/metrics").await.expect("metrics");
        assert_eq!(
            sample(
                &parse_prometheus(&body),
                "kubectl_meta_shard_cache_mode",
                &[("controller", CONTROLLER), ("mode", mode)],
            ),
            Some(1.0),
            "replica on {p} runs cache mode {mode}"
        );
    }
}

fn kill9(b: &Background) {
    unsafe {
        libc::kill(b.child.id() as i32, libc::SIGKILL);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sharded_replicas_split_the_parents_fail_over_and_take_a_fourth_in() {
    sharding_proof(cluster("shard").await, None).await;
}

/// As above on a sandbox with `ShardedListAndWatch` on: the replicas detect it and list and
/// watch their parents with a `shardSelector` (mode `server`). On an external cluster the
/// test above already runs in the mode its gate gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sharded_replicas_with_the_server_filtering_parents() {
    if std::env::var_os(crate::common::external::KUBECONFIG_VAR).is_some() {
        eprintln!("skipped on an external cluster: the test above runs in its gate's mode");
        return;
    }
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
    cfg.feature_gates.sharded_list_and_watch = true;
    let sb = crate::common::external::Cluster::Sandbox(crate::common::start_with(cfg).await);
    sharding_proof(sb, Some("server")).await;
}

/// The proof, on `sb`: three replicas converge and split the parents, a kill -9 fails over,
/// a fourth joins; the cache mode is the one the server's answers call for (and `expect`'s,
/// when given).
async fn sharding_proof(sb: crate::common::external::Cluster, expect: Option<&str>) {
    let home = tempfile::tempdir().unwrap();
    hello_world_crd_and_sample(&sb).await;
    let mut list = String::new();
    for i in 0..PARENTS {
        list.push_str(&format!(
            "---\napiVersion: example.kubectl-meta.dev/v1\nkind: HelloWorld\nmetadata:\n  name: hw-{i:03}\nspec:\n  who: w{i}\n"
        ));
    }
    let parents = home.path().join("parents.yaml");
    std::fs::write(&parents, list).unwrap();
    ok_kubectl(&sb, &["apply", "-f", &parents.display().to_string()]);
    let mode = if server_filters(&sb).await {
        "server"
    } else {
        "label"
    };
    eprintln!("FIGURE cache mode expected: {mode}");
    if let Some(e) = expect {
        assert_eq!(mode, e, "the server's answers to a shardSelector");
    }

    // The hook: the example's webhook server, one process for all replicas.
    let (_server, hook_addr) = hook_server(|port| {
        let mut c = Command::new("python3");
        c.arg(repo().join("examples/hello-world/server.py"))
            .args(["--port", &port.to_string()]);
        c
    })
    .await;
    let def = home.path().join("controller.yaml");
    let text = std::fs::read_to_string(repo().join("examples/hello-world/webhook/controller.yaml"))
        .unwrap()
        .replace("127.0.0.1:8081", &hook_addr);
    std::fs::write(&def, text).unwrap();

    let (ports, [a, b, c]) = three_replicas(&sb, home.path(), &def);
    let (_ga, _gb, _gc) = (guard(&a), guard(&b), guard(&c));

    // All converge: one Pod per parent.
    let started = Instant::now();
    let deadline = Instant::now() + TIMEOUT * 3;
    loop {
        let n = names(&sb, &pods(), sb.ns()).await.len();
        if n > PARENTS {
            break;
        }
        if Instant::now() > deadline {
            // Say where each replica stands: its ring and syncs, its log's last lines.
            let mut why = format!("{n} Pods for {} parents", PARENTS + 1);
            for (who, r, p) in [
                ("a", &a, ports[0]),
                ("b", &b, ports[1]),
                ("c", &c, ports[2]),
            ] {
                let m = http_get(p, "/metrics")
                    .await
                    .map(|x| x.1)
                    .unwrap_or_default();
                let shard: Vec<&str> = m
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .filter(|l| l.contains("shard") || l.contains("syncs_total"))
                    .collect();
                let out = r.output();
                let tail: Vec<&str> = out.lines().rev().take(3).collect();
                why.push_str(&format!(
                    "\n{who}: {shard:?}\nstderr: {}\nlast log lines: {tail:?}",
                    r.errors()
                ));
            }
            panic!("{why}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "FIGURE 3 sharded replicas, {} parents converged in {:.2}s",
        PARENTS + 1,
        started.elapsed().as_secs_f64()
    );
    ring_of(&ports, 3).await;

    // A steady period: each parent synced by exactly one replica, about a third each.
    let before = received_parents(&ports).await;
    let steady = poke(&sb, "1", &[("a", &a), ("b", &b), ("c", &c)]).await;
    assert_received_parents(&ports, &before, mode).await;
    assert_shares(&steady, 0.2, 0.47);
    for p in ports {
        let owned = metric(p, "kubectl_meta_shard_parents").await.unwrap_or(0.0);
        assert!(
            (40.0..=150.0).contains(&owned),
            "replica on {p} owns {owned} parents"
        );
    }
    let c_parents = steady["c"].clone();
    assert_cached_shares(&ports, mode).await;

    // kill -9 of c: its parents are synced by a and b once its Lease lapses (3 s).
    let killed = Instant::now();
    let since = now();
    kill9(&c);
    let c_log = c.output();
    wait_for("c's parents synced by a or b", TIMEOUT, || async {
        let mut seen = synced_since(&a.output(), &since);
        seen.extend(synced_since(&b.output(), &since));
        c_parents.is_subset(&seen).then_some(())
    })
    .await;
    let failover = killed.elapsed();
    eprintln!(
        "FIGURE kill -9 of one of 3: its {} parents synced by the others after {:.2}s (lease duration 3 s)",
        c_parents.len(),
        failover.as_secs_f64()
    );
    // 3 s of Lease expiry, a ring change, then a and b resync their whole (grown) share, in
    // which c's parents wait their turn; on this loaded machine about 9 s.
    assert!(
        failover < Duration::from_secs(20),
        "failover took {failover:?}"
    );
    ring_of(&ports[..2], 2).await;
    let two = poke(&sb, "2", &[("a", &a), ("b", &b)]).await;
    assert_shares(&two, 0.3, 0.7);

    // A fourth joins: it takes a share; no double sync during the moves.
    let pd = free_port();
    let d = replica(&sb, home.path(), &def, "replica-d", pd);
    let _gd = guard(&d);
    ring_of(&[ports[0], ports[1], pd], 3).await;
    let three = poke(&sb, "3", &[("a", &a), ("b", &b), ("d", &d)]).await;
    assert_shares(&three, 0.2, 0.47);
    assert_cached_shares(&[ports[0], ports[1], pd], mode).await;

    // Each ring change is said in the replica's own log: a, there from the start, saw the
    // ring of three, then of two (c killed), then of three again (d joined).
    let rings = ring_lines(&a.output());
    for n in ["3 member(s)", "2 member(s)"] {
        assert!(
            rings
                .iter()
                .any(|l| l.starts_with(&format!("ring now {n}"))),
            "a logs its ring of {n}: {rings:?}"
        );
    }
    assert!(
        rings
            .last()
            .is_some_and(|l| l.contains("(replica-a, replica-b, replica-d)")),
        "a's last ring is a, b, d: {rings:?}"
    );

    assert_never_twice(&[
        ("a", a.output()),
        ("b", b.output()),
        ("c", c_log),
        ("d", d.output()),
    ]);

    // c's Lease, left behind by the kill, is deleted by the live members once unchanged for 4
    // Lease durations (12 s here); the live members' Leases stay.
    let leases = ar("coordination.k8s.io", "Lease", "leases");
    let gone = Instant::now();
    wait_for("c's stale Lease deleted", TIMEOUT * 2, || async {
        let all = names(&sb, &leases, sb.ns()).await;
        (!all.iter().any(|n| n.ends_with("-shard-replica-c"))).then_some(all)
    })
    .await;
    eprintln!(
        "FIGURE the killed replica's Lease deleted {:.1}s after the kill",
        killed.elapsed().as_secs_f64()
    );
    let left = names(&sb, &leases, sb.ns()).await;
    for who in ["a", "b", "d"] {
        assert!(
            left.iter()
                .any(|n| n.ends_with(&format!("-shard-replica-{who}"))),
            "{who}'s Lease stays: {left:?} ({:?} after c's went)",
            gone.elapsed()
        );
    }
    let (ok, stderr) = d.interrupt().await;
    assert!(ok, "{stderr}");
}

/// Targets of the DecoratorController test.
const TARGETS: usize = 90;
const DECORATOR: &str = "deco";

/// A webhook server on the port given as its argument, answering every POST with
/// `answer(request)`, a function the script defines before this.
const HOOK_SERVER: &str = r#"
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(answer(req)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// A DecoratorController's sync hook: one Secret `<target>-att` per target ConfigMap.
const DECORATOR_HOOK: &str = r#"
import base64
def answer(req):
    m = req["object"]["metadata"]
    data = base64.b64encode(m["name"].encode()).decode()
    return {"labels": {"decorated": "yes"}, "attachments": [{"apiVersion": "v1",
        "kind": "Secret", "metadata": {"name": m["name"] + "-att", "namespace": m["namespace"]},
        "data": {"from": data}}]}
"#;

/// `run --sharded` of a DecoratorController: three replicas, each caching a fraction of the
/// targets (ConfigMaps, by uid bucket) and of the attachments (Secrets, by bucket label), all
/// targets decorated, each synced by exactly one replica in a steady period, never by two at
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sharded_replicas_narrow_a_decorators_targets_and_attachments() {
    let sb = cluster("shard-deco").await;
    let ns = sb.ns().to_string();
    let mut list = String::new();
    for i in 0..TARGETS {
        list.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t-{i:03}\n  namespace: {ns}\n  labels: {{decorate: \"yes\"}}\n"
        ));
    }
    let def = |hook_addr: &str| {
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: DecoratorController\nmetadata: {{name: {DECORATOR}}}\nspec:\n  resources:\n  - apiVersion: v1\n    resource: configmaps\n    labelSelector: {{matchLabels: {{decorate: \"yes\"}}}}\n  attachments:\n  - {{apiVersion: v1, resource: secrets}}\n  hooks:\n    sync:\n      webhook: {{url: \"http://{hook_addr}/sync\"}}\n"
        )
    };
    let (_home, _server, ports, [a, b, c]) =
        three_converged(&sb, &list, DECORATOR_HOOK, def, "-att", TARGETS).await;
    // Targets are listed with a shardSelector where the server honours one.
    let mode = if server_filters_on(&sb, "/api/v1", "configmaps", TARGETS).await {
        "server"
    } else {
        "label"
    };
    let (_ga, _gb, _gc) = (guard(&a), guard(&b), guard(&c));
    ring_of_controller(&ports, DECORATOR, 3).await;

    // A steady period: each target synced by exactly one replica.
    let replicas = [("a", &a), ("b", &b), ("c", &c)];
    let which = ["configmaps", "-n", ns.as_str(), "-l", "decorate=yes"];
    let steady = poke_these(&sb, "1", &replicas, &which, TARGETS).await;
    assert_shares(&steady, 0.15, 0.55);

    // Each replica caches a fraction of the targets and of the attachments, and the three
    // together every attachment once (a Secret is labelled with its target's bucket).
    let got = wait_for(
        "the replicas' caches of targets and attachments",
        TIMEOUT,
        || async {
            let mut got = Vec::new();
            for p in ports {
                got.push((
                    cached_of(p, DECORATOR, "configmaps").await?,
                    cached_of(p, DECORATOR, "secrets").await?,
                ));
            }
            let atts: f64 = got.iter().map(|g| g.1).sum();
            (atts >= TARGETS as f64).then_some(got)
        },
    )
    .await;
    eprintln!("FIGURE cached (ConfigMaps, Secrets) per replica, {TARGETS} targets: {got:?}");
    let cms: f64 = got.iter().map(|g| g.0).sum();
    let atts: f64 = got.iter().map(|g| g.1).sum();
    assert!(cms >= TARGETS as f64, "{cms} ConfigMaps cached in all");
    for (p, (cm, sec)) in ports.iter().zip(&got) {
        // Targets: by uid bucket, so a fraction of every ConfigMap of the cluster.
        assert!(
            (0.1 * cms..=0.6 * cms).contains(cm),
            "replica on {p} caches {cm} of {cms} ConfigMaps"
        );
        // Attachments: its own share, plus the unlabelled Secrets every replica caches.
        let unlabelled = (atts - TARGETS as f64) / 3.0;
        assert!(
            (0.1 * TARGETS as f64..=0.6 * TARGETS as f64 + unlabelled).contains(sec),
            "replica on {p} caches {sec} Secrets ({TARGETS} attachments, {atts} in all)"
        );
        assert_eq!(
            metric_mode(*p, DECORATOR).await.as_deref(),
            Some(mode),
            "replica on {p}"
        );
    }
    assert_never_twice(&[("a", a.output()), ("b", b.output()), ("c", c.output())]);
}

/// Three replicas of a controller on `sb`, converged: `objects` (YAML) applied, `script` (the
/// Python `answer(request)` of a [`HOOK_SERVER`]) started, the definition `def(hook address)` run by
/// `replica-a`, `-b` and `-c`, until `n` Secrets named `*<suffix>` exist in the namespace.
/// Returns the home directory, the hook server, the replicas' ports and the replicas.
async fn three_converged(
    sb: &impl Target,
    objects: &str,
    script: &str,
    def: impl FnOnce(&str) -> String,
    suffix: &str,
    n: usize,
) -> (tempfile::TempDir, KillChild, [u16; 3], [Background; 3]) {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("objects.yaml");
    std::fs::write(&path, objects).unwrap();
    ok_kubectl(sb, &["apply", "-f", &path.display().to_string()]);
    let hook = home.path().join("hook.py");
    std::fs::write(&hook, format!("{script}{HOOK_SERVER}")).unwrap();
    let (server, hook_addr) = hook_server(|port| {
        let mut c = Command::new("python3");
        c.arg(&hook).arg(port.to_string());
        c
    })
    .await;
    let path = home.path().join("controller.yaml");
    std::fs::write(&path, def(&hook_addr)).unwrap();
    let (ports, replicas) = three_replicas(sb, home.path(), &path);
    let started = Instant::now();
    let secrets = crate::common::engine::core_ar("Secret", "secrets");
    wait_for(&format!("{n} Secrets *{suffix}"), TIMEOUT * 3, || async {
        let made = names(sb, &secrets, sb.ns())
            .await
            .iter()
            .filter(|s| s.ends_with(suffix))
            .count();
        (made == n).then_some(())
    })
    .await;
    eprintln!(
        "FIGURE 3 sharded replicas converged ({n} Secrets *{suffix}) in {:.2}s",
        started.elapsed().as_secs_f64()
    );
    (home, server, ports, replicas)
}

/// Parents (each selecting one input) of the MapController test.
const MAP_PARENTS: usize = 60;
const MAPPER: &str = "mapper";

/// A MapController's map hook: one Secret `<input>-out` per input ConfigMap.
const MAP_HOOK: &str = r#"
import base64
def answer(req):
    if "input" not in req:
        return {"outputs": []}
    m = req["input"]["metadata"]
    return {"outputs": [{"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": m["name"] + "-out", "namespace": m["namespace"]},
        "data": {"from": base64.b64encode(m["name"].encode()).decode()}}]}
"#;

/// `run --sharded` of a MapController (SnapshotSchedule parents, each selecting one input
/// ConfigMap, one output Secret per input): three replicas, all outputs made, each parent
/// (its fan-out, key syncs and status) synced by exactly one replica in a steady period, each
/// replica caching a fraction of the parents and of the outputs (mode `label-except-inputs`),
/// every input cached by all, never two replicas on one parent at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sharded_replicas_narrow_a_map_controllers_parents_and_outputs() {
    let sb = cluster("shard-map").await;
    let ns = sb.ns().to_string();
    let crd = repo().join("examples/snapshot-schedule/00-crd.yaml");
    ok_kubectl(&sb, &["apply", "-f", &crd.display().to_string()]);
    wait_for("snapshotschedules to be served", TIMEOUT, || async {
        sb.kubectl(&["get", "snapshotschedules", "-n", &ns])
            .status
            .success()
            .then_some(())
    })
    .await;
    let mut list = String::new();
    for i in 0..MAP_PARENTS {
        list.push_str(&format!(
            "---\napiVersion: example.kubectl-meta.dev/v1\nkind: SnapshotSchedule\nmetadata: {{name: s-{i:03}, namespace: {ns}}}\nspec: {{selector: {{matchLabels: {{app: a-{i:03}}}}}, snapshotInterval: 1m, snapshotTTL: 5m}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: in-{i:03}, namespace: {ns}, labels: {{app: a-{i:03}}}}}\n"
        ));
    }
    let def = |hook_addr: &str| {
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: MapController\nmetadata: {{name: {MAPPER}}}\nspec:\n  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: snapshotschedules}}\n  inputResources:\n  - {{apiVersion: v1, resource: configmaps}}\n  outputResources:\n  - {{apiVersion: v1, resource: secrets}}\n  hooks:\n    map:\n      webhook: {{url: \"http://{hook_addr}/map\"}}\n"
        )
    };
    let (_home, _server, ports, [a, b, c]) =
        three_converged(&sb, &list, MAP_HOOK, def, "-out", MAP_PARENTS).await;
    let prefix = "/apis/example.kubectl-meta.dev/v1";
    let mode = if server_filters_on(&sb, prefix, "snapshotschedules", MAP_PARENTS).await {
        "server-except-inputs"
    } else {
        "label-except-inputs"
    };
    let (_ga, _gb, _gc) = (guard(&a), guard(&b), guard(&c));
    ring_of_controller(&ports, MAPPER, 3).await;

    let replicas = [("a", &a), ("b", &b), ("c", &c)];
    let which = ["snapshotschedules", "-n", ns.as_str(), "--all"];
    let steady = poke_these(&sb, "1", &replicas, &which, MAP_PARENTS).await;
    assert_shares(&steady, 0.1, 0.6);

    let hw = "snapshotschedules.example.kubectl-meta.dev";
    let all = MAP_PARENTS as f64;
    let got = wait_for(
        "the replicas' caches of parents and outputs",
        TIMEOUT,
        || async {
            let mut got = Vec::new();
            for p in ports {
                got.push((
                    cached_of(p, MAPPER, hw).await?,
                    cached_of(p, MAPPER, "configmaps").await?,
                    cached_of(p, MAPPER, "secrets").await?,
                ));
            }
            let parents: f64 = got.iter().map(|g| g.0).sum();
            let outs: f64 = got.iter().map(|g| g.2).sum();
            (parents == all && outs >= all).then_some(got)
        },
    )
    .await;
    eprintln!(
        "FIGURE cached (parents, inputs, outputs) per replica, {MAP_PARENTS} of each: {got:?}"
    );
    let outs: f64 = got.iter().map(|g| g.2).sum();
    for (p, (parents, inputs, secrets)) in ports.iter().zip(&got) {
        assert!(
            (0.1 * all..=0.6 * all).contains(parents),
            "replica on {p} caches {parents} of {all} parents"
        );
        assert!(*inputs >= all, "replica on {p} caches {inputs} inputs: all");
        let unlabelled = (outs - all) / 3.0;
        assert!(
            (0.1 * all..=0.6 * all + unlabelled).contains(secrets),
            "replica on {p} caches {secrets} Secrets ({all} outputs, {outs} in all)"
        );
        assert_eq!(
            metric_mode(*p, MAPPER).await.as_deref(),
            Some(mode),
            "replica on {p}"
        );
    }
    assert_never_twice(&[("a", a.output()), ("b", b.output()), ("c", c.output())]);
}

/// The `mode` of a replica's `kubectl_meta_shard_cache_mode` for `controller`.
async fn metric_mode(port: u16, controller: &str) -> Option<String> {
    let (_, body) = http_get(port, "/metrics").await?;
    [
        "server",
        "label",
        "server-except-inputs",
        "label-except-inputs",
        "all",
    ]
    .into_iter()
    .find(|m| {
        sample(
            &parse_prometheus(&body),
            "kubectl_meta_shard_cache_mode",
            &[("controller", controller), ("mode", m)],
        ) == Some(1.0)
    })
    .map(str::to_string)
}

/// Starts a hook server (the command `command` builds for a free port) and waits until it
/// listens; the server is killed when the returned guard drops. Returns the guard and its
/// `127.0.0.1:PORT`.
async fn hook_server(command: impl FnOnce(u16) -> Command) -> (KillChild, String) {
    let port = free_port();
    let server = command(port)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the hook server starts");
    let guard = KillChild(server);
    let addr = format!("127.0.0.1:{port}");
    wait_for("the hook server to listen", TIMEOUT, || {
        let a = addr.clone();
        async move { tokio::net::TcpStream::connect(a).await.ok().map(|_| ()) }
    })
    .await;
    (guard, addr)
}

/// Kills the hook server when the test ends.
struct KillChild(std::process::Child);

impl Drop for KillChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
