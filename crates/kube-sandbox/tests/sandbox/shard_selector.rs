//! KEP-5866 `shardSelector` on list and watch, compared with a real kube-apiserver 1.36's
//! answers (`fixtures/shard_selector`, captured by its `capture.py` with the
//! `ShardedListAndWatch` gate on and off).
//!
//! Uids differ per server, so the fixture records each returned object's uid: the test first
//! checks that the real server kept exactly the objects whose FNV-1a 64 hash of the uid (or
//! namespace) lies in a requested range (re-derived here from the recorded uids, by a second
//! implementation of the hash), then creates the same objects on the sandbox and asks it the
//! same questions: its objects must follow the same rule, and everything else must be the real
//! server's (codes, error bodies, `shardInfo`, continue / `remainingItemCount` per page, event
//! types). Syntax errors that cel-go reports in its own ANTLR wording are compared up to that
//! wording.

use crate::common;

use std::collections::BTreeMap;

use kube_sandbox::{FeatureGates, SandboxConfig};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shard_selector");

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
const METADATA: &str = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";

/// FNV-1a 64 (written again here, so the sandbox's own is checked against it).
fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Does an item ({name, namespace, uid}) fall in one of the selector's ranges?
fn rule(selector: &str, item: &Value) -> bool {
    let re = regex::Regex::new(
        r#"shardRange\(\s*object\.metadata\.(\w+)\s*,\s*['"]0x([0-9a-f]+)['"]\s*,\s*['"]0x([0-9a-f]+)['"]\s*\)"#,
    )
    .expect("regex");
    re.captures_iter(selector).any(|c| {
        let v = if &c[1] == "uid" {
            item["uid"].as_str()
        } else {
            item["namespace"].as_str()
        };
        let h = u128::from(fnv1a64(v.unwrap_or_default()));
        let lo = u128::from_str_radix(&c[2], 16).expect("hex");
        let hi = u128::from_str_radix(&c[3], 16).expect("hex");
        lo <= h && h < hi
    })
}

struct Http {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Http {
    fn new(t: &common::TestSandbox) -> Http {
        let ca = reqwest::Certificate::from_pem(t.sandbox.ca_pem().as_bytes()).expect("ca");
        Http {
            client: reqwest::Client::builder()
                .add_root_certificate(ca)
                .build()
                .expect("client"),
            base: t.sandbox.url(),
            token: t.sandbox.token().to_string(),
        }
    }

    fn url(&self, path: &str, query: &[(String, String)]) -> reqwest::Url {
        let mut u = reqwest::Url::parse(&format!("{}{path}", self.base)).expect("url");
        if !query.is_empty() {
            u.query_pairs_mut().extend_pairs(query);
        }
        u
    }

    async fn send(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        accept: &str,
        body: Option<(&Value, &str)>,
    ) -> (u16, bytes::Bytes) {
        let mut rb = self
            .client
            .request(method, url)
            .bearer_auth(&self.token)
            .header("accept", accept);
        if let Some((b, ct)) = body {
            rb = rb.header("content-type", ct).body(b.to_string());
        }
        let r = rb.send().await.expect("request");
        let code = r.status().as_u16();
        (code, r.bytes().await.expect("body"))
    }

    async fn get(&self, path: &str, query: &[(String, String)], accept: &str) -> (u16, Value) {
        let (code, b) = self
            .send(reqwest::Method::GET, self.url(path, query), accept, None)
            .await;
        (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
    }

    async fn write(&self, method: &str, path: &str, body: &Value, ct: &str) -> Value {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let (code, b) = self
            .send(m, self.url(path, &[]), "application/json", Some((body, ct)))
            .await;
        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        assert!((200..300).contains(&code), "{method} {path}: {code} {v}");
        v
    }

    /// A watch that ends on its own (timeoutSeconds): the status and every event, or the error.
    async fn watch(&self, path: &str, query: &[(String, String)], accept: &str) -> (u16, Value) {
        let (code, b) = self
            .send(reqwest::Method::GET, self.url(path, query), accept, None)
            .await;
        if code != 200 {
            return (code, serde_json::from_slice(&b).unwrap_or(Value::Null));
        }
        let events: Vec<Value> = b
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("event line"))
            .collect();
        (code, Value::Array(events))
    }
}

/// `{name, namespace, uid}` of each item of a list or Table, in answer order.
fn items_of(body: &Value, accept: Option<&str>) -> Vec<Value> {
    let metas: Vec<Value> = if accept == Some("table") {
        let rows = body["rows"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .map(|r| r["object"]["metadata"].clone())
            .collect()
    } else {
        let items = body["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|i| i["metadata"].clone()).collect()
    };
    metas
        .iter()
        .map(|m| {
            json!({"name": m["name"], "namespace": m["namespace"].as_str().unwrap_or(""),
                "uid": m["uid"]})
        })
        .collect()
}

/// The comparable part of a list answer (capture.py's `answer`).
fn answer(code: u16, body: &Value, accept: Option<&str>) -> Value {
    if code != 200 {
        return json!({"code": code, "body": body});
    }
    let mut meta = body["metadata"].as_object().cloned().unwrap_or_default();
    meta.remove("resourceVersion");
    if meta
        .get("continue")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        meta.insert("continue".into(), json!(true));
    }
    json!({"code": code, "kind": body["kind"], "metadata": meta, "items": items_of(body, accept)})
}

fn query(case: &Value, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut q = Vec::new();
    for k in [
        "shardSelector",
        "labelSelector",
        "fieldSelector",
        "resourceVersion",
    ] {
        if let Some(v) = case[k].as_str() {
            q.push((k.to_string(), v.to_string()));
        }
    }
    if let Some(l) = case["limit"].as_u64() {
        q.push(("limit".into(), l.to_string()));
    }
    q.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    q
}

fn key(i: &Value) -> String {
    format!(
        "{}/{}",
        i["namespace"].as_str().unwrap_or(""),
        i["name"].as_str().unwrap_or("")
    )
}

fn sorted_keys(items: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = items.iter().map(key).collect();
    n.sort();
    n
}

/// The labels the fixture gives an object, from its name (`cm-NN`: tier a for even NN, b for
/// odd, and shard-fixture=yes; `x-N`: shard-fixture=yes; `wcm-N`: tier a/b, flipped by the
/// watch actions). Does `selector` (as the cases use them) match?
fn label_ok(selector: Option<&str>, name: &str, flipped: bool) -> bool {
    let index = |p: &str| name.strip_prefix(p).and_then(|n| n.parse::<u32>().ok());
    let tier = index("cm-")
        .or(index("wcm-"))
        .map(|n| if (n % 2 == 0) != flipped { "a" } else { "b" });
    match selector {
        None => true,
        Some("tier=a") => tier == Some("a"),
        Some("tier=b") => tier == Some("b"),
        Some("shard-fixture=yes") => name.starts_with("cm-") || name.starts_with("x-"),
        Some(other) => panic!("label selector {other} not modelled"),
    }
}

/// kube-apiserver's pages (watch-cache semantics, as captured): walk the objects in scope in
/// key order and keep the matching ones up to the limit; a continue token when the limit is
/// reached before the last object in scope (the next page may hold nothing);
/// `remainingItemCount` = objects in scope from the page's start less the limit, only without
/// label and field selectors (a shard selector does not count); `shardInfo` on every page of a
/// sharded built-in list; a custom resource's last page has `continue: ""`.
fn model_pages(
    raw: &[Value],
    keep: impl Fn(&Value) -> bool,
    limit: usize,
    unfiltered: bool,
    shard_info: Option<&Value>,
    custom: bool,
) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut start = 0;
    loop {
        let mut names = Vec::new();
        let mut next = None;
        for (i, item) in raw.iter().enumerate().skip(start) {
            if !keep(item) {
                continue;
            }
            names.push(item["name"].clone());
            if names.len() >= limit {
                if i + 1 < raw.len() {
                    next = Some(i + 1);
                }
                break;
            }
        }
        let mut meta = serde_json::Map::new();
        match next {
            Some(_) => {
                meta.insert("continue".into(), json!(true));
                if unfiltered {
                    meta.insert(
                        "remainingItemCount".into(),
                        json!(raw.len() - start - limit),
                    );
                }
            }
            None if custom => {
                meta.insert("continue".into(), json!(""));
            }
            None => {}
        }
        if let Some(s) = shard_info {
            meta.insert("shardInfo".into(), s.clone());
        }
        pages.push(json!({"metadata": meta, "names": names}));
        match next {
            Some(n) => start = n,
            None => return pages,
        }
    }
}

/// Recorded pages as the model writes them.
fn page_names(pages: &Value) -> Vec<Value> {
    pages
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let names: Vec<Value> = p["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| i["name"].clone())
                .collect();
            json!({"metadata": p["metadata"], "names": names})
        })
        .collect()
}

/// An answer without its items (checked by the rule: which objects a range holds depends on
/// each server's uids) and without capture's own rule flag.
fn shape(a: &Value) -> Value {
    let mut a = a.clone();
    if let Some(m) = a.as_object_mut() {
        m.remove("items");
        m.remove("ruleHolds");
    }
    a
}

/// cel-go's own syntax-error wording is not reproduced: compare such errors without it.
fn without_cel_wording(a: &Value) -> Value {
    let mut a = a.clone();
    let marker = "CEL parse error: Syntax error: ";
    if let Some(m) = a["body"]["message"].as_str()
        && let Some(i) = m.find(marker)
    {
        a["body"]["message"] = json!(format!("{}<cel-go wording>", &m[..i + marker.len()]));
    }
    a
}

/// The sandbox with the same objects as the capture: namespaces, ConfigMaps, CRD, custom objects.
async fn setup(spec: &Value, gate: bool) -> (common::TestSandbox, Http) {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.feature_gates = FeatureGates {
        sharded_list_and_watch: gate,
    };
    cfg.tunables.kubelet_delay = None;
    let t = common::start_with(cfg).await;
    let h = Http::new(&t);
    let ns = spec["namespace"].as_str().expect("namespace");
    let json_ct = "application/json";
    let others: Vec<&str> = spec["otherNamespaces"]
        .as_array()
        .expect("otherNamespaces")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for n in std::iter::once(ns).chain(others.iter().copied()) {
        h.write(
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}),
            json_ct,
        )
        .await;
    }
    let crd = &spec["crd"];
    h.write(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
        json_ct,
    )
    .await;
    let widgets = path(spec, "widgets", false);
    common::wait_for("the CRD served", common::TIMEOUT, || {
        let (h, widgets) = (&h, widgets.clone());
        async move { (h.get(&widgets, &[], "application/json").await.0 == 200).then_some(()) }
    })
    .await;
    for i in 0..spec["configmaps"].as_u64().expect("configmaps") {
        let tier = if i % 2 == 0 { "a" } else { "b" };
        h.write(
            "POST",
            &path(spec, "configmaps", false),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": format!("cm-{i:02}"), "labels": {"tier": tier, "shard-fixture": "yes"}}}),
            json_ct,
        )
        .await;
    }
    for n in &others {
        for i in 0..2 {
            h.write(
                "POST",
                &format!("/api/v1/namespaces/{n}/configmaps"),
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": format!("x-{i}"), "labels": {"shard-fixture": "yes"}}}),
                json_ct,
            )
            .await;
        }
    }
    let group = spec["crd"]["spec"]["group"].as_str().expect("group");
    for i in 0..spec["widgets"].as_u64().expect("widgets") {
        h.write(
            "POST",
            &widgets,
            &json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                "metadata": {"name": format!("w-{i:02}")}, "spec": {"size": i}}),
            json_ct,
        )
        .await;
    }
    (t, h)
}

fn path(spec: &Value, resource: &str, all: bool) -> String {
    let ns = spec["namespace"].as_str().expect("namespace");
    let group = spec["crd"]["spec"]["group"].as_str().expect("group");
    match (resource, all) {
        ("configmaps", false) => format!("/api/v1/namespaces/{ns}/configmaps"),
        ("configmaps", true) => "/api/v1/configmaps".into(),
        (_, false) => format!("/apis/{group}/v1/namespaces/{ns}/widgets"),
        (_, true) => format!("/apis/{group}/v1/widgets"),
    }
}

/// Ask one list case (following continue when it paginates), recorded as capture.py does,
/// with whether the rule held against an unsharded list of the same objects.
async fn ask(h: &Http, spec: &Value, case: &Value, gate: bool) -> Value {
    let path = path(
        spec,
        case["resource"].as_str().expect("resource"),
        case["allNamespaces"] == true,
    );
    let accept = case["accept"].as_str();
    let header = match accept {
        Some("table") => TABLE,
        Some("metadata") => METADATA_LIST,
        _ => "application/json",
    };
    if let Some(name) = case["get"].as_str() {
        let (code, body) = h
            .get(&format!("{path}/{name}"), &query(case, &[]), header)
            .await;
        return json!({"code": code, "name": body["metadata"]["name"]});
    }
    let mut pages = Vec::new();
    let mut cont: Option<String> = None;
    let mut code;
    loop {
        let extra: Vec<(&str, &str)> = cont.iter().map(|c| ("continue", c.as_str())).collect();
        let body;
        (code, body) = h.get(&path, &query(case, &extra), header).await;
        pages.push(answer(code, &body, accept));
        cont = body["metadata"]["continue"]
            .as_str()
            .filter(|c| !c.is_empty() && code == 200)
            .map(String::from);
        if case["paginate"] != true || cont.is_none() || pages.len() > 50 {
            break;
        }
    }
    let mut rec = if case["paginate"] == true {
        json!({ "pages": pages })
    } else {
        pages[0].clone()
    };
    let selector = case["shardSelector"].as_str().unwrap_or("");
    if code == 200 && !selector.trim().is_empty() {
        let base =
            json!({"labelSelector": case["labelSelector"], "fieldSelector": case["fieldSelector"]});
        let (_, everything) = h.get(&path, &query(&base, &[]), "application/json").await;
        let kept: Vec<Value> = items_of(&everything, None)
            .into_iter()
            .filter(|i| !gate || rule(selector, i))
            .collect();
        rec["ruleHolds"] = json!(sorted_keys(&all_items(&rec)) == sorted_keys(&kept));
    }
    rec
}

/// Every item of a record (all its pages).
fn all_items(rec: &Value) -> Vec<Value> {
    let pages = match rec.get("pages") {
        Some(p) => p.as_array().cloned().unwrap_or_default(),
        None => vec![rec.clone()],
    };
    pages
        .iter()
        .flat_map(|p| p["items"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Check one list case on one server: the items are the rule's choice of that server's objects
/// (`raw`: its unfiltered list of the case's resource, in key order), and paged answers are
/// the model's pages.
fn check_rule(
    what: &str,
    case: &Value,
    rec: &Value,
    raw: &[Value],
    gate: bool,
    shard_info: Option<&Value>,
    differ: &mut common::Differences,
) {
    let selector = case["shardSelector"]
        .as_str()
        .filter(|s| gate && !s.trim().is_empty());
    if rec["code"].as_u64().is_some_and(|c| c != 200) {
        return;
    }
    if case["paginate"] == true {
        let labels = case["labelSelector"].as_str();
        let keep = |i: &Value| {
            label_ok(labels, i["name"].as_str().unwrap_or(""), false)
                && selector.is_none_or(|s| rule(s, i))
        };
        let limit = usize::try_from(case["limit"].as_u64().expect("limit")).expect("limit");
        let custom = case["resource"] != "configmaps";
        let want = model_pages(raw, keep, limit, labels.is_none(), shard_info, custom);
        differ.check(
            &format!("{what} pages"),
            &json!(want),
            &json!(page_names(&rec["pages"])),
        );
    } else if rec.get("ruleHolds").is_some() {
        differ.check(
            &format!("{what} keeps what the FNV-1a rule keeps"),
            &json!(true),
            &rec["ruleHolds"],
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_lists_match_the_real_server() {
    let spec: Value = common::fixture(FIXTURES, "cases.json");
    let expected: Value = common::fixture(FIXTURES, "expected.json");
    let mut differ = common::Differences::default();
    let no_selector = |resource: &str| {
        if resource == "configmaps" {
            "cm-no-selector"
        } else {
            "widgets-no-selector"
        }
    };
    for gate in [true, false] {
        let section = &expected[if gate { "gate-on" } else { "gate-off" }];
        let (_t, h) = setup(&spec, gate).await;
        let mut sandbox_raw = BTreeMap::new();
        for r in ["configmaps", "widgets"] {
            let case = json!({"name": no_selector(r), "resource": r});
            sandbox_raw.insert(r, all_items(&ask(&h, &spec, &case, gate).await));
        }
        for case in spec["cases"].as_array().expect("cases") {
            let name = case["name"].as_str().expect("name");
            let resource = case["resource"].as_str().expect("resource");
            let label = format!("{name} (gate {})", if gate { "on" } else { "off" });
            let real = &section["cases"][name];
            let got = ask(&h, &spec, case, gate).await;
            // Which objects: each server's own, by the rule (and the paging model).
            let real_raw = all_items(&section["cases"][no_selector(resource)]);
            let shard_info = real
                .get("pages")
                .and_then(|p| p[0]["metadata"].get("shardInfo"));
            check_rule(
                &format!("{label}: real server"),
                case,
                real,
                &real_raw,
                gate,
                shard_info,
                &mut differ,
            );
            check_rule(
                &format!("{label}: sandbox"),
                case,
                &got,
                &sandbox_raw[resource],
                gate,
                shard_info,
                &mut differ,
            );
            // Everything else: as the real server answered.
            let comparable = |a: &Value| match a.get("pages") {
                // Paged answers were compared page by page against the model above.
                Some(_) => Value::Null,
                None => without_cel_wording(&shape(a)),
            };
            differ.check(&label, &comparable(real), &comparable(&got));
            // A namespace's hash is the same on every server: the same objects.
            if gate
                && case["shardSelector"]
                    .as_str()
                    .is_some_and(|s| s.contains("object.metadata.namespace"))
            {
                differ.check(
                    &format!("{label}: objects"),
                    &json!(sorted_keys(&all_items(real))),
                    &json!(sorted_keys(&all_items(&got))),
                );
            }
        }
    }
    differ.assert_none();
}

/// A watch event as capture.py records it, less the uid and labels.
fn event(e: &Value) -> Value {
    let mut m = e["object"]["metadata"].clone();
    if e["type"] == "BOOKMARK" {
        if let Some(m) = m.as_object_mut() {
            m.remove("resourceVersion");
        }
        json!({"type": "BOOKMARK", "kind": e["object"]["kind"], "metadata": m})
    } else {
        json!({"type": e["type"], "kind": e["object"]["kind"], "name": m["name"]})
    }
}

/// What a watch case must see, by the rule, of one server's objects (`uid_of` a name; `raw`
/// its ConfigMaps in the namespace at the end): a replay of the actions of capture.py (create
/// `wcm-N` with tier a for even N, flip every tier, delete them; create and delete `ww-N`), each
/// change of an object in a range translated through the label selector as kube-apiserver does;
/// or, with initial events, an ADDED per object in a range and the initial-events-end bookmark.
fn model_events(
    w: &Value,
    gate: bool,
    n: u64,
    uid_of: impl Fn(&str) -> Value,
    raw: &[Value],
) -> Vec<Value> {
    let sel = w["shardSelector"].as_str().filter(|_| gate);
    let labels = w["labelSelector"].as_str();
    let cm = w["resource"] == "configmaps";
    let kind = match (w["accept"].as_str(), cm) {
        (Some("metadata"), _) => "PartialObjectMetadata",
        (_, true) => "ConfigMap",
        _ => "Widget",
    };
    let in_range = |item: &Value| sel.is_none_or(|s| rule(s, item));
    let shard_ok = |name: &str| in_range(&json!({"uid": uid_of(name)}));
    let ev = |t: &str, name: &str| json!({"type": t, "kind": kind, "name": name});
    let mut out = Vec::new();
    if w["initialEvents"] == true {
        for item in raw {
            let name = item["name"].as_str().unwrap_or("");
            if in_range(item) && label_ok(labels, name, false) {
                out.push(ev("ADDED", name));
            }
        }
        out.push(json!({"type": "BOOKMARK", "kind": kind,
            "metadata": {"annotations": {"k8s.io/initial-events-end": "true"}}}));
        return out;
    }
    if !cm {
        for t in ["ADDED", "DELETED"] {
            for i in 0..n / 2 {
                let name = format!("ww-{i}");
                if shard_ok(&name) {
                    out.push(ev(t, &name));
                }
            }
        }
        return out;
    }
    let names: Vec<String> = (0..n).map(|i| format!("wcm-{i}")).collect();
    for name in names.iter().filter(|n| shard_ok(n)) {
        if label_ok(labels, name, false) {
            out.push(ev("ADDED", name));
        }
    }
    for name in names.iter().filter(|n| shard_ok(n)) {
        match (label_ok(labels, name, false), label_ok(labels, name, true)) {
            (true, true) => out.push(ev("MODIFIED", name)),
            (false, true) => out.push(ev("ADDED", name)),
            (true, false) => out.push(ev("DELETED", name)),
            (false, false) => {}
        }
    }
    for name in names.iter().filter(|n| shard_ok(n)) {
        if label_ok(labels, name, true) {
            out.push(ev("DELETED", name));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_watches_match_the_real_server() {
    let spec: Value = common::fixture(FIXTURES, "cases.json");
    let expected: Value = common::fixture(FIXTURES, "expected.json");
    let mut differ = common::Differences::default();
    let ns = spec["namespace"].as_str().expect("namespace");
    let n = spec["watchObjects"].as_u64().expect("watchObjects");
    let (cms, widgets) = (
        path(&spec, "configmaps", false),
        path(&spec, "widgets", false),
    );
    let group = spec["crd"]["spec"]["group"].as_str().expect("group");
    for gate in [true, false] {
        let section = &expected[if gate { "gate-on" } else { "gate-off" }];
        let (_t, h) = setup(&spec, gate).await;
        let (_, list) = h.get(&cms, &[], "application/json").await;
        let rv0 = list["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .to_string();
        let sandbox_raw = items_of(&list, None);
        let (_, list) = h.get(&widgets, &[], "application/json").await;
        let rv0w = list["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .to_string();
        // capture.py's actions, on the sandbox.
        let mut uids = BTreeMap::new();
        for i in 0..n {
            let tier = if i % 2 == 0 { "a" } else { "b" };
            let o = h
                .write(
                    "POST",
                    &cms,
                    &json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("wcm-{i}"), "labels": {"tier": tier}}}),
                    "application/json",
                )
                .await;
            uids.insert(format!("wcm-{i}"), o["metadata"]["uid"].clone());
        }
        for i in 0..n {
            let tier = if i % 2 == 0 { "b" } else { "a" };
            h.write(
                "PATCH",
                &format!("{cms}/wcm-{i}"),
                &json!({"metadata": {"labels": {"tier": tier}}}),
                "application/merge-patch+json",
            )
            .await;
        }
        for i in 0..n {
            h.write(
                "DELETE",
                &format!("{cms}/wcm-{i}"),
                &json!({}),
                "application/json",
            )
            .await;
        }
        for i in 0..n / 2 {
            let o = h
                .write(
                    "POST",
                    &widgets,
                    &json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                        "metadata": {"name": format!("ww-{i}")}, "spec": {"size": i}}),
                    "application/json",
                )
                .await;
            uids.insert(format!("ww-{i}"), o["metadata"]["uid"].clone());
        }
        for i in 0..n / 2 {
            h.write(
                "DELETE",
                &format!("{widgets}/ww-{i}"),
                &json!({}),
                "application/json",
            )
            .await;
        }
        let real_raw = all_items(&section["cases"]["cm-no-selector"]);
        for w in spec["watches"].as_array().expect("watches") {
            let name = w["name"].as_str().expect("name");
            let label = format!("{name} (gate {})", if gate { "on" } else { "off" });
            let cm = w["resource"] == "configmaps";
            // The sandbox sends a replay before its timeout starts: one second is plenty.
            let mut extra = vec![("watch", "1"), ("timeoutSeconds", "1")];
            if w["initialEvents"] == true {
                extra.extend([
                    ("sendInitialEvents", "true"),
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersionMatch", "NotOlderThan"),
                ]);
            } else {
                extra.push(("resourceVersion", if cm { &rv0 } else { &rv0w }));
                if w["bookmarks"] == true {
                    extra.push(("allowWatchBookmarks", "true"));
                }
            }
            let accept = if w["accept"] == "metadata" {
                METADATA
            } else {
                "application/json"
            };
            let (code, got) = h
                .watch(if cm { &cms } else { &widgets }, &query(w, &extra), accept)
                .await;
            let real = &section["watches"][name];
            if real["code"] != 200 || code != 200 {
                differ.check(
                    &label,
                    &without_cel_wording(real),
                    &without_cel_wording(&json!({"code": code, "body": got})),
                );
                continue;
            }
            let real_events: Vec<Value> = real["events"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let mut e = e.clone();
                    if let Some(m) = e.as_object_mut() {
                        m.remove("uid");
                        m.remove("labels");
                    }
                    e
                })
                .collect();
            let real_uid = |name: &str| section["uids"][format!("{ns}/{name}")].clone();
            differ.check(
                &format!("{label}: real server"),
                &json!(model_events(w, gate, n, real_uid, &real_raw)),
                &json!(real_events),
            );
            let sandbox_uid = |name: &str| uids.get(name).cloned().unwrap_or(Value::Null);
            let got_events: Vec<Value> = got.as_array().into_iter().flatten().map(event).collect();
            differ.check(
                &format!("{label}: sandbox"),
                &json!(model_events(w, gate, n, sandbox_uid, &sandbox_raw)),
                &json!(got_events),
            );
        }
    }
    differ.assert_none();
}
