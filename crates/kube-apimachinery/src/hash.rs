//! A stable content hash of JSON values, independent of key order.
//!
//! Used where a name or a label must change exactly when content changes: a controller's
//! revision names (`<parent>-<hash>`) and the `controller-revision-hash` of Pods a StatefulSet
//! or DaemonSet stamps. Key order never matters (objects are hashed with sorted keys), so the
//! same content read from two servers, or written in another order, hashes the same.

use serde_json::Value;

/// 64-bit FNV-1a over the canonical (key-sorted) JSON of `v`, as 16 hex digits.
///
/// ```
/// use kube_apimachinery::hash::hash_value;
/// use serde_json::json;
/// assert_eq!(hash_value(&json!({"a": 1, "b": 2})), hash_value(&json!({"b": 2, "a": 1})));
/// assert_eq!(hash_value(&json!({"a": 1})).len(), 16);
/// ```
pub fn hash_value(v: &Value) -> String {
    let mut s = String::new();
    canonical(v, &mut s);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `v` as JSON text with every object's keys sorted.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                canonical(&m[*k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter_and_content_does() {
        let a = json!({"a": 1, "b": {"y": [1, 2], "x": null}});
        let b = json!({"b": {"x": null, "y": [1, 2]}, "a": 1});
        assert_eq!(hash_value(&a), hash_value(&b));
        assert_ne!(hash_value(&a), hash_value(&json!({"b": 2})));
        assert_ne!(hash_value(&json!([1, 2])), hash_value(&json!([2, 1])));
    }

    #[test]
    fn the_hash_is_stable_across_releases() {
        // Revision names and controller-revision-hash labels already stored in clusters
        // depend on these exact digits.
        assert_eq!(hash_value(&json!({})), "08f44b07b5901a25");
    }
}
