//! Response rendering: content negotiation on `Accept` and the three shapes clients ask for —
//! plain objects/lists, server-side `Table`s (kubectl get), and `PartialObjectMetadata`
//! (metadata-only clients such as kube-rs' `metadata_watcher`).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use super::resources::{Origin, ResourceDef};
use super::state::now_unix;
use super::status::{ApiError, ApiResult};
use super::store::Stored;
use super::table::{self, Columns};

/// What the client asked to receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The objects themselves.
    Json,
    /// A meta.k8s.io Table; the string is `includeObject` (None/Object/Metadata).
    Table,
    /// PartialObjectMetadata(List) at this meta.k8s.io version (v1 or v1beta1).
    Metadata(String),
}

/// Pick the first media type in `Accept` that the sandbox can produce.
pub fn negotiate(accept: Option<&str>) -> ApiResult<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    for part in accept.split(',') {
        let mut fields = part.split(';').map(str::trim);
        let media = fields.next().unwrap_or_default().to_ascii_lowercase();
        let mut as_ = None;
        let mut g = None;
        let mut v = None;
        for p in fields {
            if let Some((k, val)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = Some(val.trim().to_string()),
                    "g" => g = Some(val.trim().to_string()),
                    "v" => v = Some(val.trim().to_string()),
                    _ => {}
                }
            }
        }
        if !matches!(media.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        match (as_.as_deref(), g.as_deref()) {
            (None, _) => return Ok(Output::Json),
            (Some("Table"), Some("meta.k8s.io")) => return Ok(Output::Table),
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io")) => {
                return Ok(Output::Metadata(v.unwrap_or_else(|| "v1".into())));
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(accept))
}

/// The table columns of a resource.
pub fn columns(def: &ResourceDef) -> Columns {
    match &def.origin {
        Origin::Crd {
            printer_columns, ..
        } if !printer_columns.is_empty() => Columns::Custom(printer_columns.clone()),
        Origin::Crd { .. } => Columns::Default,
        Origin::Builtin => table::columns_for(&def.plural),
    }
}

/// The bytes of a stored object as served at `def`'s version.
pub fn served_bytes(def: &ResourceDef, s: &Stored) -> Bytes {
    if def.storage_api_version() == def.api_version() {
        return s.bytes.clone();
    }
    match s.value() {
        Ok(mut v) => {
            v["apiVersion"] = json!(def.api_version());
            Bytes::from(v.to_string())
        }
        Err(_) => s.bytes.clone(),
    }
}

/// A PartialObjectMetadata for one object.
pub fn partial(meta_version: &str, obj: &Value) -> Value {
    json!({"apiVersion": format!("meta.k8s.io/{meta_version}"), "kind": "PartialObjectMetadata",
        "metadata": obj["metadata"].clone()})
}

/// The `metadata` of a list response.
#[derive(Debug, Clone, Default)]
pub struct ListMeta {
    /// `resourceVersion`.
    pub rv: u64,
    /// `continue`.
    pub cont: Option<String>,
    /// `remainingItemCount`.
    pub remaining: Option<usize>,
    /// `shardInfo.selector` (KEP-5866): the canonical shard selector the list was filtered by.
    pub shard: Option<String>,
}

/// Render a list response.
pub fn list(
    def: &ResourceDef,
    out: &Output,
    include_object: &str,
    items: &[Arc<Stored>],
    lm: ListMeta,
) -> ApiResult<Bytes> {
    let mut meta = json!({"resourceVersion": lm.rv.to_string()});
    if let Some(c) = lm.cont {
        meta["continue"] = json!(c);
    } else if def.is_custom() && *out == Output::Json {
        // A custom resource's list is unstructured: kube-apiserver writes an empty continue.
        meta["continue"] = json!("");
    }
    if let Some(r) = lm.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    match out {
        Output::Json => {
            // Only a built-in resource's own list carries shardInfo: kube-apiserver's Table and
            // PartialObjectMetadataList conversions copy resourceVersion, continue and
            // remainingItemCount alone, and a custom resource's unstructured list has no
            // shardInfo to set (filtered all the same).
            if let Some(sel) = lm.shard.filter(|_| !def.is_custom()) {
                meta["shardInfo"] = json!({ "selector": sel });
            }
            let head =
                json!({"kind": def.list_kind, "apiVersion": def.api_version(), "metadata": meta});
            let head = head.to_string();
            let mut b = BytesMut::with_capacity(
                head.len() + items.iter().map(|s| s.bytes.len() + 1).sum::<usize>() + 16,
            );
            // `{...,"metadata":{...}}` -> `{...,"metadata":{...},"items":[...]}`
            b.put_slice(&head.as_bytes()[..head.len() - 1]);
            b.put_slice(b",\"items\":[");
            for (i, s) in items.iter().enumerate() {
                if i > 0 {
                    b.put_u8(b',');
                }
                b.put_slice(&served_bytes(def, s));
            }
            b.put_slice(b"]}");
            Ok(b.freeze())
        }
        Output::Table => {
            let objs = values(def, items)?;
            let t = table::to_table(&columns(def), &objs, &meta, include_object, now_unix())
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            Ok(Bytes::from(t.to_string()))
        }
        Output::Metadata(v) => {
            // Straight from the stored bytes: no object is parsed or re-serialized.
            let head = json!({"apiVersion": format!("meta.k8s.io/{v}"),
                "kind": "PartialObjectMetadataList", "metadata": meta})
            .to_string();
            let item_head = format!(
                "{{\"apiVersion\":\"meta.k8s.io/{v}\",\"kind\":\"PartialObjectMetadata\",\"metadata\":"
            );
            let mut b = BytesMut::with_capacity(
                head.len()
                    + items
                        .iter()
                        .map(|s| item_head.len() + s.metadata_bytes().len() + 2)
                        .sum::<usize>()
                    + 16,
            );
            b.put_slice(&head.as_bytes()[..head.len() - 1]);
            b.put_slice(b",\"items\":[");
            for (i, s) in items.iter().enumerate() {
                if i > 0 {
                    b.put_u8(b',');
                }
                b.put_slice(item_head.as_bytes());
                b.put_slice(s.metadata_bytes());
                b.put_u8(b'}');
            }
            b.put_slice(b"]}");
            Ok(b.freeze())
        }
    }
}

fn values(def: &ResourceDef, items: &[Arc<Stored>]) -> ApiResult<Vec<Value>> {
    items
        .iter()
        .map(|s| {
            s.value()
                .map(|v| super::ops::as_served(def, v))
                .map_err(|e| ApiError::internal(e.to_string()))
        })
        .collect()
}

/// Render one object.
pub fn object(
    def: &ResourceDef,
    out: &Output,
    include_object: &str,
    obj: &Value,
) -> ApiResult<Value> {
    match out {
        Output::Json => Ok(obj.clone()),
        Output::Table => {
            let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
            table::to_table(
                &columns(def),
                std::slice::from_ref(obj),
                &meta,
                include_object,
                now_unix(),
            )
            .map_err(|e| ApiError::bad_request(e.to_string()))
        }
        Output::Metadata(v) => Ok(partial(v, obj)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_like_kubectl_and_kube_rs() {
        assert_eq!(negotiate(None).ok(), Some(Output::Json));
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")).ok(),
            Some(Output::Table)
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ))
            .ok(),
            Some(Output::Metadata("v1".into()))
        );
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            ))
            .ok(),
            Some(Output::Json)
        );
        assert!(negotiate(Some("application/vnd.kubernetes.protobuf")).is_err());
        assert!(negotiate(Some("application/json;as=Other;g=x")).is_err());
    }
}
