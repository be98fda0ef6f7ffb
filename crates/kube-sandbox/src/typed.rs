//! Built-in objects pass through their typed `k8s-openapi` structs on every write, as they pass
//! through Go structs in kube-apiserver: fields the type does not have are dropped (and reported,
//! for `fieldValidation=Warn`/`Strict`), and the result is serialized the way Go's
//! `encoding/json` with `omitempty` would write it after a storage round trip: empty lists, empty
//! maps, `null`s and empty strings disappear, empty structs stay (`resources: {}`), and every
//! `resource.Quantity` is written in its canonical form (`0.5` becomes `500m`).
//!
//! [`GoSerializer`] is the part that knows Go's rules: it sees struct names (`serialize_struct`)
//! and can therefore tell a struct from a map, which plain JSON cannot.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::ser::{self, Impossible};
use serde_json::{Map, Number, Value};

use kube_apimachinery::quantity;

use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration, apps::v1 as apps,
    autoscaling::v2 as autoscaling, batch::v1 as batch, coordination::v1 as coordination,
    core::v1 as core, discovery::v1 as discovery, events::v1 as events,
    networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};

/// Why a built-in object could not be decoded into its type.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// The result of decoding a built-in object.
#[derive(Debug)]
pub struct Decoded {
    /// The object as the typed struct keeps it, serialized with Go's rules.
    pub obj: Value,
    /// Paths (`spec.containers[0].foo`) of fields the type does not have, dropped.
    pub unknown: Vec<String>,
}

/// Decode `obj` through the typed struct of resource `gr` (`apps/deployments`), if the sandbox
/// knows one. Returns None for resources without a typed struct (custom resources, CRDs).
pub fn decode(gr: &str, obj: &Value) -> Option<Result<Decoded, DecodeError>> {
    macro_rules! rt {
        ($t:ty) => {
            Some(roundtrip::<$t>(obj))
        };
    }
    match gr {
        "/pods" => rt!(core::Pod),
        "/configmaps" => rt!(core::ConfigMap),
        "/secrets" => rt!(core::Secret),
        "/services" => rt!(core::Service),
        "/serviceaccounts" => rt!(core::ServiceAccount),
        "/persistentvolumeclaims" => rt!(core::PersistentVolumeClaim),
        "/persistentvolumes" => rt!(core::PersistentVolume),
        "/events" => rt!(core::Event),
        "/endpoints" => rt!(core::Endpoints),
        "/nodes" => rt!(core::Node),
        "/limitranges" => rt!(core::LimitRange),
        "/resourcequotas" => rt!(core::ResourceQuota),
        "/replicationcontrollers" => rt!(core::ReplicationController),
        "/podtemplates" => rt!(core::PodTemplate),
        "/namespaces" => rt!(core::Namespace),
        "events.k8s.io/events" => rt!(events::Event),
        "apps/deployments" => rt!(apps::Deployment),
        "apps/replicasets" => rt!(apps::ReplicaSet),
        "apps/statefulsets" => rt!(apps::StatefulSet),
        "apps/daemonsets" => rt!(apps::DaemonSet),
        "apps/controllerrevisions" => rt!(apps::ControllerRevision),
        "batch/jobs" => rt!(batch::Job),
        "batch/cronjobs" => rt!(batch::CronJob),
        "coordination.k8s.io/leases" => rt!(coordination::Lease),
        "rbac.authorization.k8s.io/roles" => rt!(rbac::Role),
        "rbac.authorization.k8s.io/rolebindings" => rt!(rbac::RoleBinding),
        "rbac.authorization.k8s.io/clusterroles" => rt!(rbac::ClusterRole),
        "rbac.authorization.k8s.io/clusterrolebindings" => rt!(rbac::ClusterRoleBinding),
        "networking.k8s.io/ingresses" => rt!(networking::Ingress),
        "networking.k8s.io/ingressclasses" => rt!(networking::IngressClass),
        "networking.k8s.io/networkpolicies" => rt!(networking::NetworkPolicy),
        "policy/poddisruptionbudgets" => rt!(policy::PodDisruptionBudget),
        "autoscaling/horizontalpodautoscalers" => rt!(autoscaling::HorizontalPodAutoscaler),
        "discovery.k8s.io/endpointslices" => rt!(discovery::EndpointSlice),
        "scheduling.k8s.io/priorityclasses" => rt!(scheduling::PriorityClass),
        "storage.k8s.io/storageclasses" => rt!(storage::StorageClass),
        "admissionregistration.k8s.io/validatingwebhookconfigurations" => {
            rt!(admissionregistration::ValidatingWebhookConfiguration)
        }
        "admissionregistration.k8s.io/mutatingwebhookconfigurations" => {
            rt!(admissionregistration::MutatingWebhookConfiguration)
        }
        _ => None,
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Decoded, DecodeError> {
    let typed: T = serde_path_to_error::deserialize(obj).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            DecodeError(inner.to_string())
        } else {
            DecodeError(format!("{path}: {inner}"))
        }
    })?;
    let out = to_go_value(&typed).map_err(|e| DecodeError(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &out, "", &mut unknown);
    Ok(Decoded { obj: out, unknown })
}

/// Serialize with Go's `encoding/json` + `omitempty` rules (see the module docs).
pub fn to_go_value<T: Serialize + ?Sized>(v: &T) -> Result<Value, serde_json::Error> {
    Ok(v.serialize(GoSerializer)?.value)
}

/// A value Go's `omitempty` leaves out: null, `""`, `[]`, `{}`, `false` and `0`. Protobuf
/// clients (`kubectl create deployment`) send every non-pointer field, zeros included
/// (`stdin: false`, `minReadySeconds: 0`), so a dropped zero is not an unknown field.
fn is_emptyish(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// Paths present in `input` but absent from the decoded `out`: fields the type does not have.
/// Empty and zero values are not reported (the type may simply omit them), so an unknown field
/// whose value is `false` or `0` is dropped without a warning.
fn unknown_fields(input: &Value, out: &Value, path: &str, acc: &mut Vec<String>) {
    match (input, out) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(w) => unknown_fields(v, w, &p, acc),
                    None if is_emptyish(v) => {}
                    None => acc.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                unknown_fields(v, w, &format!("{path}[{i}]"), acc);
            }
        }
        _ => {}
    }
}

/// A serialized value and whether Go would leave it out as a struct field with `omitempty`.
pub struct Go {
    value: Value,
    omit: bool,
}

impl Go {
    fn keep(value: Value) -> Go {
        Go { value, omit: false }
    }
}

/// Fields Go declares as non-pointer `int`/`bool` with `omitempty` (so `0`/`false` is not
/// written), by struct name. Most optional scalars of the API are pointers and keep their zero.
const OMIT_ZERO: &[(&str, &str)] = &[
    ("ContainerPort", "hostPort"),
    ("ServicePort", "nodePort"),
    ("Container", "stdin"),
    ("Container", "stdinOnce"),
    ("Container", "tty"),
    ("EphemeralContainer", "stdin"),
    ("EphemeralContainer", "stdinOnce"),
    ("EphemeralContainer", "tty"),
    ("VolumeMount", "readOnly"),
    ("PodSpec", "hostNetwork"),
    ("PodSpec", "hostPID"),
    ("PodSpec", "hostIPC"),
    ("DeploymentSpec", "minReadySeconds"),
    ("DeploymentSpec", "paused"),
    ("StatefulSetSpec", "minReadySeconds"),
    ("DaemonSetSpec", "minReadySeconds"),
    ("ReplicaSetSpec", "minReadySeconds"),
    ("ReplicationControllerSpec", "minReadySeconds"),
    ("ServiceSpec", "publishNotReadyAddresses"),
    ("ObjectMeta", "generation"),
    ("PersistentVolumeClaimVolumeSource", "readOnly"),
];

/// Fields Go declares as `*string` (so an empty string is kept), by struct name.
const KEEP_EMPTY_STRING: &[(&str, &str)] = &[
    ("PersistentVolumeClaimSpec", "storageClassName"),
    ("PodSpec", "runtimeClassName"),
    ("IngressSpec", "ingressClassName"),
    ("ServiceSpec", "loadBalancerClass"),
    ("LeaseSpec", "holderIdentity"),
    ("EndpointPort", "name"),
    ("HostPathVolumeSource", "type"),
    ("RoleRef", "apiGroup"),
];

fn is_status_struct(name: &str) -> bool {
    name.ends_with("Status") && name != "PodStatus" && name != "NodeStatus"
}

/// Counters of workload statuses are `int32` with `omitempty`, except `replicas` of these.
const KEEP_ZERO_REPLICAS: &[&str] = &[
    "ReplicaSetStatus",
    "ReplicationControllerStatus",
    "StatefulSetStatus",
];

/// Counters of workload statuses are `int32` with `omitempty` (see [`KEEP_ZERO_REPLICAS`]).
fn omit_zero(strukt: &str, field: &str) -> bool {
    if field == "replicas" && KEEP_ZERO_REPLICAS.contains(&strukt) {
        return false;
    }
    OMIT_ZERO.contains(&(strukt, field))
        || (is_status_struct(strukt)
            && matches!(
                field,
                "replicas"
                    | "readyReplicas"
                    | "availableReplicas"
                    | "updatedReplicas"
                    | "unavailableReplicas"
                    | "currentReplicas"
                    | "fullyLabeledReplicas"
                    | "observedGeneration"
                    | "active"
                    | "succeeded"
                    | "failed"
            ))
}

/// The serde serializer with Go's JSON rules (see the module docs).
pub struct GoSerializer;

fn num(n: impl Into<Number>) -> Result<Go, serde_json::Error> {
    Ok(Go::keep(Value::Number(n.into())))
}

impl ser::Serializer for GoSerializer {
    type Ok = Go;
    type Error = serde_json::Error;
    type SerializeSeq = SeqSer;
    type SerializeTuple = SeqSer;
    type SerializeTupleStruct = SeqSer;
    type SerializeTupleVariant = Impossible<Go, serde_json::Error>;
    type SerializeMap = MapSer;
    type SerializeStruct = StructSer;
    type SerializeStructVariant = Impossible<Go, serde_json::Error>;

    fn serialize_bool(self, v: bool) -> Result<Go, Self::Error> {
        Ok(Go::keep(Value::Bool(v)))
    }
    fn serialize_i8(self, v: i8) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Go, Self::Error> {
        num(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Go, Self::Error> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Go, Self::Error> {
        Ok(Go::keep(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn serialize_char(self, v: char) -> Result<Go, Self::Error> {
        self.serialize_str(&v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<Go, Self::Error> {
        Ok(Go {
            omit: v.is_empty(),
            value: Value::String(v.to_string()),
        })
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Go, Self::Error> {
        Ok(Go {
            omit: v.is_empty(),
            value: Value::Array(v.iter().map(|b| Value::from(*b)).collect()),
        })
    }
    fn serialize_none(self) -> Result<Go, Self::Error> {
        Ok(Go {
            value: Value::Null,
            omit: true,
        })
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<Go, Self::Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Go, Self::Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Go, Self::Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Go, Self::Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<Go, Self::Error> {
        let mut out = v.serialize(self)?;
        if name == "Quantity"
            && let Value::String(s) = &out.value
        {
            let q = quantity::canonical(s.trim())
                .map_err(|e| <serde_json::Error as ser::Error>::custom(e.go_message()))?;
            out.value = Value::String(q);
        }
        Ok(out)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<Go, Self::Error> {
        let inner = v.serialize(GoSerializer)?.value;
        let mut m = Map::new();
        m.insert(variant.to_string(), inner);
        Ok(Go::keep(Value::Object(m)))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqSer, Self::Error> {
        Ok(SeqSer(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqSer, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<SeqSer, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Self::Error> {
        Err(ser::Error::custom("tuple variants are not supported"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<MapSer, Self::Error> {
        Ok(MapSer {
            map: Map::new(),
            key: None,
        })
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<StructSer, Self::Error> {
        Ok(StructSer {
            name,
            map: Map::new(),
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Self::Error> {
        Err(ser::Error::custom("struct variants are not supported"))
    }
}

/// Lists: elements are always written; an empty list is omitted as a field.
pub struct SeqSer(Vec<Value>);

impl SeqSer {
    fn finish(self) -> Go {
        Go {
            omit: self.0.is_empty(),
            value: Value::Array(self.0),
        }
    }
}

impl ser::SerializeSeq for SeqSer {
    type Ok = Go;
    type Error = serde_json::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Self::Error> {
        self.0.push(v.serialize(GoSerializer)?.value);
        Ok(())
    }
    fn end(self) -> Result<Go, Self::Error> {
        Ok(self.finish())
    }
}

impl ser::SerializeTuple for SeqSer {
    type Ok = Go;
    type Error = serde_json::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<Go, Self::Error> {
        Ok(self.finish())
    }
}

impl ser::SerializeTupleStruct for SeqSer {
    type Ok = Go;
    type Error = serde_json::Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<Go, Self::Error> {
        Ok(self.finish())
    }
}

/// Maps: every entry is written (an empty string is a value); an empty map is omitted as a field.
pub struct MapSer {
    map: Map<String, Value>,
    key: Option<String>,
}

impl ser::SerializeMap for MapSer {
    type Ok = Go;
    type Error = serde_json::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), Self::Error> {
        match k.serialize(GoSerializer)?.value {
            Value::String(s) => self.key = Some(s),
            other => self.key = Some(other.to_string()),
        }
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Self::Error> {
        let k = self
            .key
            .take()
            .ok_or_else(|| ser::Error::custom("map value without a key"))?;
        self.map.insert(k, v.serialize(GoSerializer)?.value);
        Ok(())
    }
    fn end(self) -> Result<Go, Self::Error> {
        Ok(Go {
            omit: self.map.is_empty(),
            value: Value::Object(self.map),
        })
    }
}

/// Structs: a field is left out when Go's `omitempty` would leave it out; the struct itself is
/// always written, even empty (Go never omits a struct value).
pub struct StructSer {
    name: &'static str,
    map: Map<String, Value>,
}

impl ser::SerializeStruct for StructSer {
    type Ok = Go;
    type Error = serde_json::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Self::Error> {
        let go = v.serialize(GoSerializer)?;
        let omit = match &go.value {
            Value::Null => true,
            Value::String(s) if s.is_empty() => !KEEP_EMPTY_STRING.contains(&(self.name, key)),
            Value::Number(n) if n.as_i64() == Some(0) => omit_zero(self.name, key),
            Value::Bool(false) => omit_zero(self.name, key),
            _ => go.omit,
        };
        if !omit {
            self.map.insert(key.to_string(), go.value);
        }
        Ok(())
    }
    fn end(self) -> Result<Go, Self::Error> {
        Ok(Go::keep(Value::Object(self.map)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode_ok(gr: &str, v: Value) -> Decoded {
        decode(gr, &v).expect("typed").expect("decodes")
    }

    #[test]
    fn unknown_fields_are_dropped_and_reported() {
        let d = decode_ok(
            "/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"notAField": 1, "containers": [{"name": "c", "image": "x", "imagePullPolicyy": "Always"}]}}),
        );
        assert_eq!(
            d.unknown,
            vec!["spec.notAField", "spec.containers[0].imagePullPolicyy"]
        );
        assert!(d.obj["spec"].get("notAField").is_none());
        assert!(
            d.obj["spec"]["containers"][0]
                .get("imagePullPolicyy")
                .is_none()
        );
    }

    #[test]
    fn zero_values_a_protobuf_client_sends_are_not_unknown_fields() {
        // What kubectl create deployment sends (decoded from protobuf): every zero written.
        let d = decode_ok(
            "apps/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "generation": 0},
                   "spec": {"replicas": 1, "minReadySeconds": 0, "paused": false,
                            "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}, "generation": 0},
                                         "spec": {"hostNetwork": false, "hostPID": false, "hostIPC": false,
                                                  "containers": [{"name": "nginx", "image": "nginx",
                                                                  "stdin": false, "stdinOnce": false, "tty": false}]}}}}),
        );
        assert!(d.unknown.is_empty(), "{:?}", d.unknown);
        assert!(d.obj["spec"].get("paused").is_none());
    }

    #[test]
    fn empty_maps_lists_and_nulls_go_empty_structs_stay() {
        let d = decode_ok(
            "/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}, "annotations": {}},
                   "spec": {"initContainers": null, "securityContext": {},
                            "containers": [{"name": "c", "image": "x", "env": [], "resources": {}}]}}),
        );
        assert_eq!(d.obj["metadata"], json!({"name": "p"}));
        assert_eq!(d.obj["spec"]["securityContext"], json!({}));
        assert_eq!(
            d.obj["spec"]["containers"][0],
            json!({"name": "c", "image": "x", "resources": {}})
        );
        assert!(d.obj["spec"].get("initContainers").is_none());
        assert!(d.unknown.is_empty());
    }

    #[test]
    fn map_values_keep_empty_strings_and_pointer_strings_stay() {
        let d = decode_ok(
            "/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": ""}}),
        );
        assert_eq!(d.obj["data"], json!({"k": ""}));
        let d = decode_ok(
            "/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                   "spec": {"storageClassName": "", "volumeName": ""}}),
        );
        assert_eq!(d.obj["spec"], json!({"storageClassName": ""}));
    }

    #[test]
    fn go_omits_zero_only_for_non_pointer_fields() {
        let d = decode_ok(
            "/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"priority": 0, "hostNetwork": false, "containers": [{"name": "c", "image": "x", "stdin": false,
                            "ports": [{"containerPort": 80, "hostPort": 0}]}]}}),
        );
        assert_eq!(d.obj["spec"]["priority"], 0);
        assert!(d.obj["spec"].get("hostNetwork").is_none());
        assert_eq!(
            d.obj["spec"]["containers"][0],
            json!({"name": "c", "image": "x", "ports": [{"containerPort": 80}]})
        );
    }

    #[test]
    fn wrong_types_are_decode_errors_naming_the_field() {
        let e = decode(
            "apps/deployments",
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": "two"}}),
        )
        .expect("typed")
        .expect_err("rejected");
        assert!(e.0.contains("spec.replicas"), "{e}");
    }

    #[test]
    fn quantities_are_canonical_and_invalid_ones_rejected() {
        let d = decode_ok(
            "/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                   "spec": {"resources": {"requests": {"storage": "1024Mi"}, "limits": {"storage": 1e9}}}}),
        );
        assert_eq!(
            d.obj["spec"]["resources"],
            json!({"requests": {"storage": "1Gi"}, "limits": {"storage": "1G"}})
        );
        let e = decode(
            "/pods",
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "lots"}}}]}}),
        )
        .expect("typed")
        .expect_err("rejected");
        assert!(e.0.contains("quantities must match"), "{e}");
    }

    #[test]
    fn untyped_resources_are_left_alone() {
        assert!(decode("example.com/widgets", &json!({})).is_none());
    }
}
