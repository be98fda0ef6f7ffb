//! What varies by itself between two plain runs (generated names, timestamps, uids,
//! resourceVersions, ...), and comparing two outcomes without it.
//!
//! Objects of a snapshot are matched by identity: apiVersion, kind, namespace and name, or
//! `generateName*` for a generated name (the n-th such object matched with the n-th). Field
//! paths are printed as `test` prints them: `ConfigMap default/x: data.k`,
//! `spec.containers[0].image`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Metadata fields masked always: set by the API server, never by the controller's logic
/// (timestamps are masked by name, see [`always_masked`]).
const SERVER_SET: &[&str] = &["uid", "resourceVersion", "managedFields", "generation"];

/// The snapshots of one run, as `identity -> object` per step.
pub type Indexed = Vec<BTreeMap<String, Value>>;

/// The letters Kubernetes draws generated name suffixes from (`generateName`, ReplicaSet and
/// Pod hashes).
const SUFFIX_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

/// `name` with what varies by itself replaced by `*`: a random-looking suffix (`-` and 5
/// letters of [`SUFFIX_ALPHABET`], which has no vowel: words do not match), `w-5zbtd` ->
/// `w-*`; and a wall-clock time (a segment of 8 or more digits, as a schedule names what it
/// creates, `snap-20261128070000-08b903` -> `snap-*`) with everything after it (a hash of it).
fn generic_name(name: &str) -> String {
    let mut stem = String::new();
    for seg in name.split('-') {
        if seg.len() >= 8 && seg.chars().all(|c| c.is_ascii_digit()) {
            return format!("{stem}*");
        }
        stem.push_str(seg);
        stem.push('-');
    }
    if let Some((stem, suffix)) = name.rsplit_once('-')
        && suffix.len() == 5
        && suffix.chars().all(|c| SUFFIX_ALPHABET.contains(c))
    {
        return format!("{stem}-*");
    }
    name.to_string()
}

/// The identity of an object in a snapshot (before the `#n` of repeated generated names).
fn identity(o: &Value) -> String {
    let m = &o["metadata"];
    let name = match (m["generateName"].as_str(), m["name"].as_str()) {
        (Some(g), _) if !g.is_empty() => format!("{g}*"),
        (_, Some(n)) => generic_name(n),
        _ => String::from("?"),
    };
    let ns = m["namespace"]
        .as_str()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!("{} {}{name}", o["kind"].as_str().unwrap_or("?"), ns)
}

/// Index every step's objects by identity (repeated identities numbered `#1`, `#2`, ... in
/// the snapshot's order).
pub fn index(snapshots: &[Vec<Value>]) -> Indexed {
    snapshots
        .iter()
        .map(|objs| {
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            let mut out = BTreeMap::new();
            for o in objs {
                let id = identity(o);
                let n = seen.entry(id.clone()).or_default();
                *n += 1;
                let key = if *n == 1 { id } else { format!("{id} #{n}") };
                out.insert(key, o.clone());
            }
            out
        })
        .collect()
}

/// Whether a field is masked whatever the runs show: server-set metadata, uids of owner
/// references, timestamps.
fn always_masked(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or(path);
    let last = last.split('[').next().unwrap_or(last);
    path.strip_prefix("metadata.").is_some_and(|rest| {
        SERVER_SET.iter().any(|f| {
            rest == *f || rest.starts_with(&format!("{f}.")) || rest.starts_with(&format!("{f}["))
        })
    }) || (path.starts_with("metadata.ownerReferences[") && last == "uid")
        || last.ends_with("Timestamp")
        || last.ends_with("Time")
}

/// Whether `path` of the object `id` is the kubelet's: a Pod's `status`. The snapshots are
/// taken when the engine is at rest, not the (simulated) kubelet, so whether a pod created or
/// recreated by the last sync has started yet is a matter of time, not of the controller: on
/// a loaded machine the plain runs agreed by chance and a perturbed run (or the next plain one)
/// caught the pod a moment earlier or later (`status.phase`, `status.conditions[..]`). What a
/// controller makes of its pods' status shows in what it writes (its parent's status, its
/// children), which stay compared.
fn kubelet_set(id: &str, path: &str) -> bool {
    id.starts_with("Pod ")
        && (path == "status" || path.starts_with("status.") || path.starts_with("status["))
}

/// The field paths where `a` and `b` differ, under `prefix`.
pub fn diff(a: &Value, b: &Value, prefix: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff(u, v, &p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(u, v, &format!("{prefix}[{i}]"), out);
            }
        }
        _ if a == b => {}
        _ => out.push(prefix.to_string()),
    }
}

/// The differences between two indexed runs, as `step N: IDENTITY: PATH` (an object only in
/// one run: `step N: IDENTITY: only in the plain run` / `only under the perturbation`); fields
/// masked always and those the kubelet sets ([`kubelet_set`]) are left out.
pub fn differences(plain: &Indexed, other: &Indexed) -> Vec<String> {
    let mut out = Vec::new();
    if plain.len() != other.len() {
        out.push(format!(
            "steps: {} snapshots in the plain run, {} under the perturbation",
            plain.len(),
            other.len()
        ));
    }
    for (i, (a, b)) in plain.iter().zip(other).enumerate() {
        let ids: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for id in ids {
            match (a.get(id), b.get(id)) {
                (Some(x), Some(y)) => {
                    let mut paths = Vec::new();
                    diff(x, y, "", &mut paths);
                    let compared = |p: &String| !always_masked(p) && !kubelet_set(id, p);
                    for p in paths.into_iter().filter(compared) {
                        out.push(format!("step {}: {id}: {p}", i + 1));
                    }
                }
                (Some(_), None) => out.push(format!("step {}: {id}: only in the plain run", i + 1)),
                _ => out.push(format!("step {}: {id}: only under the perturbation", i + 1)),
            }
        }
    }
    out
}

/// What varies by itself: the differences between two plain runs.
#[derive(Debug, Clone, Default)]
pub struct Mask {
    paths: BTreeSet<String>,
}

impl Mask {
    /// Learn from two plain runs.
    pub fn learn(first: &Indexed, second: &Indexed) -> Mask {
        Mask {
            paths: differences(first, second).into_iter().collect(),
        }
    }

    /// The learned paths.
    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.paths.iter()
    }

    /// `diffs` without what varies by itself (a learned path or anything under it).
    pub fn apply(&self, diffs: Vec<String>) -> Vec<String> {
        diffs
            .into_iter()
            .filter(|d| {
                !self.paths.iter().any(|p| {
                    d == p
                        || d.strip_prefix(p.as_str())
                            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn perturb_a_pods_status_is_the_kubelets_and_not_compared() {
        let pod = |phase: &str, image: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "image": image}]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}]}})
        };
        let run = |phase: &str, image: &str| index(&[vec![pod(phase, image)]]);
        assert!(differences(&run("Running", "a"), &run("Pending", "a")).is_empty());
        assert_eq!(
            differences(&run("Running", "a"), &run("Pending", "b")),
            ["step 1: Pod ns/p: spec.containers[0].image"]
        );
        // Another kind's status stays compared.
        let mut cm = pod("Running", "a");
        cm["kind"] = json!("Widget");
        let mut other = cm.clone();
        other["status"]["phase"] = json!("Pending");
        assert_eq!(
            differences(&index(&[vec![cm]]), &index(&[vec![other]])),
            ["step 1: Widget ns/p: status.phase"]
        );
    }

    fn cm(name: &str, gen_name: Option<&str>, data: Value, uid: &str) -> Value {
        let mut m = json!({"name": name, "namespace": "default", "uid": uid,
            "resourceVersion": uid, "creationTimestamp": "2026-11-28T06:00:00Z"});
        if let Some(g) = gen_name {
            m["generateName"] = json!(g);
        }
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": data})
    }

    #[test]
    fn perturb_mask_learns_generated_names_and_ignores_server_fields() {
        let a = index(&[vec![
            cm("x", None, json!({"k": "1", "at": "t1"}), "u1"),
            cm("w-abcde", Some("w-"), json!({"k": "1"}), "u2"),
        ]]);
        let b = index(&[vec![
            cm("x", None, json!({"k": "1", "at": "t2"}), "u3"),
            cm("w-fghij", Some("w-"), json!({"k": "1"}), "u4"),
        ]]);
        let mask = Mask::learn(&a, &b);
        let learned: Vec<&String> = mask.paths().collect();
        assert_eq!(
            learned,
            [
                "step 1: ConfigMap default/w-*: metadata.name",
                "step 1: ConfigMap default/x: data.at"
            ]
        );
        // A third run differing in a field that did not vary: found, with its path.
        let c = index(&[vec![
            cm("x", None, json!({"k": "2", "at": "t9"}), "u5"),
            cm("w-zzzzz", Some("w-"), json!({"k": "1"}), "u6"),
        ]]);
        assert_eq!(
            mask.apply(differences(&a, &c)),
            ["step 1: ConfigMap default/x: data.k"]
        );
        // An object missing under the perturbation is named.
        let d = index(&[vec![cm("x", None, json!({"k": "1", "at": "t"}), "u")]]);
        assert_eq!(
            mask.apply(differences(&a, &d)),
            ["step 1: ConfigMap default/w-*: only in the plain run"]
        );
    }

    #[test]
    fn perturb_random_suffixes_match_as_one_name() {
        assert_eq!(generic_name("w-5zbtd"), "w-*");
        assert_eq!(generic_name("web-7d9fb"), "web-*");
        assert_eq!(generic_name("w-0"), "w-0");
        assert_eq!(
            generic_name("my-cache"),
            "my-cache",
            "a word is not a suffix"
        );
        assert_eq!(
            generic_name("snap-data-0-20261128070000-08b903"),
            "snap-data-0-*",
            "a wall-clock time and what follows it vary by themselves"
        );
        assert_eq!(generic_name("web-0"), "web-0", "an ordinal is not a time");
    }

    #[test]
    fn perturb_diff_paths_name_array_items() {
        let mut out = Vec::new();
        diff(
            &json!({"spec": {"c": [{"image": "a"}, {"image": "b"}]}}),
            &json!({"spec": {"c": [{"image": "a"}, {"image": "c"}]}}),
            "",
            &mut out,
        );
        assert_eq!(out, ["spec.c[1].image"]);
    }
}
