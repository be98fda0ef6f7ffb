//! Server-side printing: rendering objects as `meta.k8s.io/v1` `Table`s for `kubectl get`.
//!
//! Owns the column sets of the built-in resources (ported from kube-apiserver's
//! `pkg/printers/internalversion/printers.go`; the server always renders the `-o wide`
//! columns and kubectl hides `priority > 0` ones), CustomResourceDefinition
//! `additionalPrinterColumns` (with the small JSONPath subset those use), kubectl's
//! `HumanDuration` ages, and the `includeObject` row-object handling.

use serde_json::{Map, Value, json};

/// Column set for a resource.
#[derive(Debug, Clone)]
pub enum Columns {
    /// A built-in printer, named by resource plural (e.g. `"pods"`); see [`columns_for`].
    Builtin(&'static str),
    /// A CRD version's `additionalPrinterColumns` (`{name, type, jsonPath, description,
    /// priority, format}`). Empty means "Name + Age", like apiextensions-apiserver.
    Custom(Vec<Value>),
    /// Name + Age.
    Default,
}

/// Errors from rendering a Table.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    /// The `includeObject` query parameter is not one of the allowed values (HTTP 400).
    #[error(
        "Unable to convert to Table as requested: includeObject: Invalid value: {0:?}: must be 'Metadata', 'Object', 'None', or empty"
    )]
    InvalidIncludeObject(String),
}

/// Returns the built-in column set for a resource plural, or [`Columns::Default`] if unknown.
pub fn columns_for(resource: &str) -> Columns {
    PRINTERS
        .iter()
        .find(|(r, _, _)| *r == resource)
        .map_or(Columns::Default, |(r, _, _)| Columns::Builtin(r))
}

/// Builds a `meta.k8s.io/v1` Table for `objects` (the items of a list, or one object).
///
/// `list_meta` supplies the Table's `metadata` (`resourceVersion`, `continue`,
/// `remainingItemCount`); for a single-object GET pass `{"resourceVersion": <the object's>}`.
/// `include_object` is the `includeObject` query parameter: `"None"` (no row object),
/// `"Object"` (the full object) or `"Metadata"`/`""` (a `PartialObjectMetadata`, which kubectl
/// needs for `-A` and `--show-labels`). Ages are computed against `now_unix` (seconds).
pub fn to_table(
    columns: &Columns,
    objects: &[Value],
    list_meta: &Value,
    include_object: &str,
    now_unix: i64,
) -> Result<Value, TableError> {
    if !matches!(include_object, "" | "Metadata" | "Object" | "None") {
        return Err(TableError::InvalidIncludeObject(include_object.to_string()));
    }
    let (definitions, row_fn): (Vec<Value>, RowFn<'_>) = match columns {
        Columns::Builtin(resource) => match PRINTERS.iter().find(|(r, _, _)| r == resource) {
            Some((_, cols, f)) => (cols.iter().map(Col::to_json).collect(), Box::new(f)),
            None => default_columns(),
        },
        Columns::Custom(cols) if cols.is_empty() => default_columns(),
        Columns::Custom(cols) => custom_columns(cols),
        Columns::Default => default_columns(),
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let row = row_fn(obj, now_unix);
            let mut out = Map::new();
            out.insert("cells".into(), Value::Array(row.cells));
            if !row.conditions.is_empty() {
                out.insert("conditions".into(), Value::Array(row.conditions));
            }
            let object = match include_object {
                "None" => Value::Null,
                "Object" => obj.clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                }),
            };
            out.insert("object".into(), object);
            Value::Object(out)
        })
        .collect();

    let mut metadata = Map::new();
    for key in ["resourceVersion", "continue"] {
        if let Some(v) = list_meta
            .get(key)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            metadata.insert(key.into(), v.clone());
        }
    }
    if let Some(v) = list_meta
        .get("remainingItemCount")
        .filter(|v| v.is_number())
    {
        metadata.insert("remainingItemCount".into(), v.clone());
    }
    Ok(json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    }))
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATED_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Cells (and optional row conditions) of one row.
struct Row {
    cells: Vec<Value>,
    conditions: Vec<Value>,
}

impl Row {
    fn new(cells: Vec<Value>) -> Self {
        let conditions = Vec::new();
        Row { cells, conditions }
    }
}

type RowFn<'a> = Box<dyn Fn(&Value, i64) -> Row + 'a>;

/// A `TableColumnDefinition` of a built-in printer.
struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

impl Col {
    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.ty,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

const fn col(
    name: &'static str,
    ty: &'static str,
    priority: i64,
    description: &'static str,
) -> Col {
    let format = "";
    Col {
        name,
        ty,
        format,
        priority,
        description,
    }
}

const NAME: Col = Col {
    format: "name",
    ..col("Name", "string", 0, NAME_DESC)
};
const AGE: Col = col("Age", "string", 0, CREATED_DESC);
const CREATED_AT: Col = col("Created At", "date", 0, CREATED_DESC);
const READY: Col = col("Ready", "string", 0, "Number of the pod with ready state");
#[rustfmt::skip]
const CONTAINERS: Col = col("Containers", "string", 1, "Names of each container in the template.");
#[rustfmt::skip]
const IMAGES: Col = col("Images", "string", 1, "Images referenced by each container in the template.");
const SELECTOR: Col = col("Selector", "string", 1, "Label selector for pods.");

/// A built-in printer: resource plural, columns, row function (object, now) -> cells.
type Printer = (&'static str, &'static [Col], fn(&Value, i64) -> Row);

/// Built-in printers.
#[rustfmt::skip]
const PRINTERS: &[Printer] = &[
    ("namespaces", &[NAME, col("Status", "string", 0, "The status of the namespace"), AGE], namespace_row),
    ("configmaps", &[NAME, col("Data", "string", 0, "Data contains the configuration data."), AGE], configmap_row),
    ("secrets", SECRET_COLS, secret_row),
    ("services", SERVICE_COLS, service_row),
    ("serviceaccounts", &[NAME, col("Secrets", "string", 0, "Secrets allowed for pods."), AGE], serviceaccount_row),
    ("pods", POD_COLS, pod_row),
    ("persistentvolumeclaims", PVC_COLS, pvc_row),
    ("events", EVENT_COLS, event_row),
    ("deployments", DEPLOYMENT_COLS, deployment_row),
    ("replicasets", REPLICASET_COLS, replicaset_row),
    ("statefulsets", &[NAME, READY, AGE, CONTAINERS, IMAGES], statefulset_row),
    ("daemonsets", DAEMONSET_COLS, daemonset_row),
    ("controllerrevisions", CONTROLLER_REVISION_COLS, controller_revision_row),
    ("jobs", JOB_COLS, job_row),
    ("cronjobs", CRONJOB_COLS, cronjob_row),
    ("leases", &[NAME, col("Holder", "string", 0, "The holder of the lease."), AGE], lease_row),
    ("roles", &[NAME, CREATED_AT], created_at_row),
    ("clusterroles", &[NAME, CREATED_AT], created_at_row),
    ("rolebindings", ROLE_BINDING_COLS, role_binding_row),
    ("clusterrolebindings", ROLE_BINDING_COLS, role_binding_row),
    ("customresourcedefinitions", &[NAME, CREATED_AT], created_at_row),
];

#[rustfmt::skip]
const SECRET_COLS: &[Col] = &[
    NAME,
    col("Type", "string", 0, "Used to facilitate programmatic handling of secret data."),
    col("Data", "string", 0, "Data contains the secret data."),
    AGE,
];
#[rustfmt::skip]
const SERVICE_COLS: &[Col] = &[
    NAME,
    col("Type", "string", 0, "type determines how the Service is exposed."),
    col("Cluster-IP", "string", 0, "clusterIP is the IP address of the service."),
    col("External-IP", "string", 0, "externalIPs of the service."),
    col("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
    AGE,
    col("Selector", "string", 1, "Route service traffic to pods matching this selector."),
];
#[rustfmt::skip]
const POD_COLS: &[Col] = &[
    NAME,
    col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", "string", 0, "The aggregate status of the containers in this pod."),
    col("Restarts", "string", 0, "The number of times the containers have been restarted."),
    AGE,
    col("IP", "string", 1, "podIP address allocated to the pod."),
    col("Node", "string", 1, "NodeName indicates in which node this pod is scheduled."),
    col("Nominated Node", "string", 1, "The node this pod preempted other pods on."),
    col("Readiness Gates", "string", 1, "Readiness gates of the pod."),
];
#[rustfmt::skip]
const PVC_COLS: &[Col] = &[
    NAME,
    col("Status", "string", 0, "phase represents the current phase of PersistentVolumeClaim."),
    col("Volume", "string", 0, "volumeName is the binding reference to the PersistentVolume."),
    col("Capacity", "string", 0, "capacity represents the actual resources of the volume."),
    col("Access Modes", "string", 0, "accessModes of the volume backing the PVC."),
    col("StorageClass", "string", 0, "StorageClass of the pvc"),
    col("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pvc"),
    AGE,
    col("VolumeMode", "string", 1, "volumeMode defines what type of volume is required."),
];
#[rustfmt::skip]
const EVENT_COLS: &[Col] = &[
    col("Last Seen", "string", 0, "The time at which the most recent occurrence was recorded."),
    col("Type", "string", 0, "Type of this event (Normal, Warning)."),
    col("Reason", "string", 0, "The reason for the transition into the object's current status."),
    col("Object", "string", 0, "The object that this event is about."),
    col("Subobject", "string", 1, "The piece of the object this event is about."),
    col("Source", "string", 1, "The component reporting this event."),
    col("Message", "string", 0, "A human-readable description of the status of this operation."),
    col("First Seen", "string", 1, "The time at which the event was first recorded."),
    col("Count", "string", 1, "The number of times this event has occurred."),
    Col { priority: 1, ..NAME },
];
#[rustfmt::skip]
const DEPLOYMENT_COLS: &[Col] = &[
    NAME,
    READY,
    col("Up-to-date", "string", 0, "Number of pods that have the desired template spec."),
    col("Available", "string", 0, "Number of available pods targeted by this deployment."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
#[rustfmt::skip]
const REPLICASET_COLS: &[Col] = &[
    NAME,
    col("Desired", "integer", 0, "Replicas is the number of desired replicas."),
    col("Current", "integer", 0, "Replicas is the most recently observed number of replicas."),
    col("Ready", "integer", 0, "The number of ready replicas for this replica set."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
#[rustfmt::skip]
const DAEMONSET_COLS: &[Col] = &[
    NAME,
    col("Desired", "integer", 0, "The total number of nodes that should run the daemon pod."),
    col("Current", "integer", 0, "The number of nodes running at least 1 daemon pod."),
    col("Ready", "integer", 0, "The number of nodes with a ready daemon pod."),
    col("Up-to-date", "integer", 0, "The number of nodes running an updated daemon pod."),
    col("Available", "integer", 0, "The number of nodes with an available daemon pod."),
    col("Node Selector", "string", 0, "NodeSelector of the pod template."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
#[rustfmt::skip]
const CONTROLLER_REVISION_COLS: &[Col] = &[
    NAME,
    col("Controller", "string", 0, "Controller of the object"),
    col("Revision", "string", 0, "Revision indicates the revision of the state represented by Data."),
    AGE,
];
#[rustfmt::skip]
const JOB_COLS: &[Col] = &[
    NAME,
    col("Status", "string", 0, "Status of the job."),
    col("Completions", "string", 0, "The number of pods which reached phase Succeeded."),
    col("Duration", "string", 0, "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
#[rustfmt::skip]
const CRONJOB_COLS: &[Col] = &[
    NAME,
    col("Schedule", "string", 0, "The schedule in Cron format."),
    col("Timezone", "string", 0, "The time zone name for the given schedule."),
    col("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions."),
    col("Active", "integer", 0, "A list of pointers to currently running jobs."),
    col("Last Schedule", "string", 0, "When the job was last successfully scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
#[rustfmt::skip]
const ROLE_BINDING_COLS: &[Col] = &[
    NAME,
    col("Role", "string", 0, "RoleRef can reference a Role or a ClusterRole."),
    AGE,
    col("Users", "string", 1, "Users in the roleBinding"),
    col("Groups", "string", 1, "Groups in the roleBinding"),
    col("ServiceAccounts", "string", 1, "ServiceAccounts in the roleBinding"),
];

fn default_columns() -> (Vec<Value>, RowFn<'static>) {
    let defs = vec![
        NAME.to_json(),
        col("Age", "date", 0, CREATED_DESC).to_json(),
    ];
    (
        defs,
        Box::new(|o: &Value, now| Row::new(vec![name(o), age(o, now).into()])),
    )
}

fn namespace_row(o: &Value, now: i64) -> Row {
    Row::new(vec![
        name(o),
        s(o, &["status", "phase"]).into(),
        age(o, now).into(),
    ])
}

fn configmap_row(o: &Value, now: i64) -> Row {
    let n = obj_len(o, &["data"]) + obj_len(o, &["binaryData"]);
    Row::new(vec![name(o), n.into(), age(o, now).into()])
}

fn serviceaccount_row(o: &Value, now: i64) -> Row {
    let n = a(o, &["secrets"]).len() as i64;
    Row::new(vec![name(o), n.into(), age(o, now).into()])
}

fn lease_row(o: &Value, now: i64) -> Row {
    Row::new(vec![
        name(o),
        s(o, &["spec", "holderIdentity"]).into(),
        age(o, now).into(),
    ])
}

fn created_at_row(o: &Value, _now: i64) -> Row {
    Row::new(vec![name(o), created_at(o).into()])
}

fn replicaset_row(o: &Value, now: i64) -> Row {
    let (names, imgs) = container_cells(o, TEMPLATE_CONTAINERS);
    Row::new(vec![
        name(o),
        int_or(o, &["spec", "replicas"], 1).into(),
        int(o, &["status", "replicas"]).into(),
        int(o, &["status", "readyReplicas"]).into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
        format_label_selector(at(o, &["spec", "selector"])).into(),
    ])
}

fn statefulset_row(o: &Value, now: i64) -> Row {
    let (names, imgs) = container_cells(o, TEMPLATE_CONTAINERS);
    let ready = int(o, &["status", "readyReplicas"]);
    let desired = int_or(o, &["spec", "replicas"], 1);
    Row::new(vec![
        name(o),
        format!("{ready}/{desired}").into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
    ])
}

fn daemonset_row(o: &Value, now: i64) -> Row {
    let (names, imgs) = container_cells(o, TEMPLATE_CONTAINERS);
    Row::new(vec![
        name(o),
        int(o, &["status", "desiredNumberScheduled"]).into(),
        int(o, &["status", "currentNumberScheduled"]).into(),
        int(o, &["status", "numberReady"]).into(),
        int(o, &["status", "updatedNumberScheduled"]).into(),
        int(o, &["status", "numberAvailable"]).into(),
        format_labels(at(o, &["spec", "template", "spec", "nodeSelector"])).into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
        format_label_selector(at(o, &["spec", "selector"])).into(),
    ])
}

fn secret_row(o: &Value, now: i64) -> Row {
    // The API server folds write-only `stringData` into `data`; count both in case a
    // stored object still carries it.
    let mut keys: Vec<&String> = ["data", "stringData"]
        .iter()
        .filter_map(|k| o.get(*k).and_then(Value::as_object))
        .flat_map(|m| m.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let ty = or(s(o, &["type"]), "Opaque");
    Row::new(vec![
        name(o),
        ty.into(),
        (keys.len() as i64).into(),
        age(o, now).into(),
    ])
}

fn service_row(o: &Value, now: i64) -> Row {
    let ty = or(s(o, &["spec", "type"]), "ClusterIP");
    let cluster_ip = a(o, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| at(o, &["spec", "clusterIP"]).and_then(Value::as_str))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let external_ips = strings(a(o, &["spec", "externalIPs"]));
    let external = match ty {
        "ClusterIP" | "NodePort" if external_ips.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external_ips.join(","),
        "LoadBalancer" => {
            let mut lb: Vec<&str> = a(o, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| {
                    [s(i, &["ip"]), s(i, &["hostname"])]
                        .into_iter()
                        .find(|v| !v.is_empty())
                })
                .collect();
            lb.sort_unstable();
            lb.dedup();
            lb.extend(external_ips);
            if lb.is_empty() {
                "<pending>".to_string()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => s(o, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = a(o, &["spec", "ports"])
        .iter()
        .map(|p| {
            let proto = or(s(p, &["protocol"]), "TCP");
            let port = int(p, &["port"]);
            match int(p, &["nodePort"]) {
                np if np > 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    Row::new(vec![
        name(o),
        ty.into(),
        cluster_ip.into(),
        external.into(),
        ports.into(),
        age(o, now).into(),
        format_labels(at(o, &["spec", "selector"])).into(),
    ])
}

/// Port of kube-apiserver's `printPod`.
fn pod_row(pod: &Value, now: i64) -> Row {
    let init_specs = a(pod, &["spec", "initContainers"]);
    let total =
        a(pod, &["spec", "containers"]).len() + init_specs.iter().filter(|c| is_sidecar(c)).count();
    let conditions = a(pod, &["status", "conditions"]);

    let phase = s(pod, &["status", "phase"]);
    let mut tally = PodTally {
        reason: or(s(pod, &["status", "reason"]), phase).to_string(),
        ..PodTally::default()
    };
    if conditions
        .iter()
        .any(|c| s(c, &["type"]) == "PodScheduled" && s(c, &["reason"]) == "SchedulingGated")
    {
        tally.reason = "SchedulingGated".to_string();
    }
    tally.init_containers(pod, init_specs);
    if !tally.initializing || condition_is_true(conditions, "Initialized") {
        tally.containers(pod, conditions);
    }
    let PodTally {
        mut reason,
        ready,
        restarts,
        last_restart,
        ..
    } = tally;

    let deleting = at(pod, &["metadata", "deletionTimestamp"]).is_some();
    if deleting && s(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
        _ => restarts.to_string(),
    };
    let ip = a(pod, &["status", "podIPs"])
        .first()
        .map(|p| s(p, &["ip"]))
        .unwrap_or_else(|| s(pod, &["status", "podIP"]));
    let mut row = Row::new(vec![
        name(pod),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts.into(),
        age(pod, now).into(),
        or(ip, "<none>").into(),
        or(s(pod, &["spec", "nodeName"]), "<none>").into(),
        or(s(pod, &["status", "nominatedNodeName"]), "<none>").into(),
        readiness_gates(pod, conditions).into(),
    ]);
    let completed = |reason: &str, message: &str| {
        vec![json!({"type": "Completed", "status": "True", "reason": reason, "message": message})]
    };
    row.conditions = match phase {
        "Succeeded" => completed("Succeeded", "The pod has completed successfully."),
        "Failed" => completed("Failed", "The pod failed."),
        _ => Vec::new(),
    };
    row
}

/// An init container that keeps running beside the app containers (a sidecar).
fn is_sidecar(c: &Value) -> bool {
    s(c, &["restartPolicy"]) == "Always"
}

/// What `printPod` tallies over a pod's container statuses.
#[derive(Default)]
struct PodTally {
    /// The STATUS column.
    reason: String,
    /// Ready containers.
    ready: usize,
    /// Restarts of the containers counted.
    restarts: i64,
    /// When the last of those restarts ended.
    last_restart: Option<i64>,
    /// Restarts of the sidecars.
    sidecar_restarts: i64,
    /// When the last of those ended.
    sidecar_last_restart: Option<i64>,
    /// An init container has not finished: the reason says `Init:...`.
    initializing: bool,
}

impl PodTally {
    /// The init containers in order: their restarts (the sidecars' also apart), the started
    /// sidecars that are ready, and the first one not done, which sets `Init:...` and stops.
    fn init_containers(&mut self, pod: &Value, init_specs: &[Value]) {
        let restartable = |name: &str| {
            init_specs
                .iter()
                .any(|c| s(c, &["name"]) == name && is_sidecar(c))
        };
        for (i, c) in a(pod, &["status", "initContainerStatuses"])
            .iter()
            .enumerate()
        {
            let count = int(c, &["restartCount"]);
            let finished = timestamp(at(c, &["lastState", "terminated", "finishedAt"]));
            self.restarts = self.restarts.saturating_add(count);
            self.last_restart = self.last_restart.max(finished);
            let sidecar = restartable(s(c, &["name"]));
            if sidecar {
                self.sidecar_restarts = self.sidecar_restarts.saturating_add(count);
                self.sidecar_last_restart = self.sidecar_last_restart.max(finished);
            }
            let terminated = at(c, &["state", "terminated"]);
            let waiting_reason = s(c, &["state", "waiting", "reason"]);
            if terminated.is_some_and(|t| int(t, &["exitCode"]) == 0) {
                continue;
            }
            if sidecar && flag(c, &["started"]) {
                if flag(c, &["ready"]) {
                    self.ready += 1;
                }
                continue;
            }
            self.reason = if let Some(t) = terminated {
                match (s(t, &["reason"]), int(t, &["signal"])) {
                    ("", 0) => format!("Init:ExitCode:{}", int(t, &["exitCode"])),
                    ("", sig) => format!("Init:Signal:{sig}"),
                    (r, _) => format!("Init:{r}"),
                }
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{i}/{}", init_specs.len())
            };
            self.initializing = true;
            break;
        }
    }

    /// The app containers (last first): restarts counted from the sidecars' on, the running
    /// ready ones, and the reason of a waiting or terminated one.
    fn containers(&mut self, pod: &Value, conditions: &[Value]) {
        self.restarts = self.sidecar_restarts;
        self.last_restart = self.sidecar_last_restart;
        let mut has_running = false;
        for c in a(pod, &["status", "containerStatuses"]).iter().rev() {
            self.restarts = self.restarts.saturating_add(int(c, &["restartCount"]));
            self.last_restart = self
                .last_restart
                .max(timestamp(at(c, &["lastState", "terminated", "finishedAt"])));
            let waiting_reason = s(c, &["state", "waiting", "reason"]);
            let terminated = at(c, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                self.reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                self.reason = match (s(t, &["reason"]), int(t, &["signal"])) {
                    ("", 0) => format!("ExitCode:{}", int(t, &["exitCode"])),
                    ("", sig) => format!("Signal:{sig}"),
                    (r, _) => r.to_string(),
                };
            } else if flag(c, &["ready"]) && at(c, &["state", "running"]).is_some() {
                has_running = true;
                self.ready += 1;
            }
        }
        if self.reason == "Completed" && has_running {
            self.reason = if condition_is_true(conditions, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_string();
        }
    }
}

/// The READINESS GATES column: `met/all`, `<none>` without gates.
fn readiness_gates(pod: &Value, conditions: &[Value]) -> String {
    let gates = a(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        "<none>".to_string()
    } else {
        let ok = gates
            .iter()
            .filter(|g| condition_is_true(conditions, s(g, &["conditionType"])))
            .count();
        format!("{ok}/{}", gates.len())
    }
}

/// The pre-`storageClassName` annotation, still honoured by `kubectl get pvc`.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

fn pvc_row(o: &Value, now: i64) -> Row {
    let phase = if at(o, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        s(o, &["status", "phase"])
    };
    let volume = s(o, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let modes = a(o, &["status", "accessModes"]);
        let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
        let short: Vec<&str> = [
            ("ReadWriteOnce", "RWO"),
            ("ReadOnlyMany", "ROX"),
            ("ReadWriteMany", "RWX"),
            ("ReadWriteOncePod", "RWOP"),
        ]
        .into_iter()
        .filter(|(long, _)| has(long))
        .map(|(_, short)| short)
        .collect();
        (
            s(o, &["status", "capacity", "storage"]).to_string(),
            short.join(","),
        )
    };
    let beta_class = s(o, &["metadata", "annotations", BETA_STORAGE_CLASS]);
    let class = or(beta_class, s(o, &["spec", "storageClassName"]));
    Row::new(vec![
        name(o),
        phase.into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        class.into(),
        or(s(o, &["spec", "volumeAttributesClassName"]), "<unset>").into(),
        age(o, now).into(),
        or(s(o, &["spec", "volumeMode"]), "<unset>").into(),
    ])
}

/// Core/v1 events; falls back to the events.k8s.io/v1 field names for the same data.
fn event_row(o: &Value, now: i64) -> Row {
    let pick = |core: &str, new: &str| at(o, &[core]).or_else(|| at(o, &[new]));
    let first = match pick("firstTimestamp", "deprecatedFirstTimestamp") {
        Some(t) => since(Some(t), now),
        None => since(at(o, &["eventTime"]), now),
    };
    let mut last = match pick("lastTimestamp", "deprecatedLastTimestamp") {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = pick("count", "deprecatedCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(series) = at(o, &["series"]) {
        last = since(at(series, &["lastObservedTime"]), now);
        count = int(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let involved = pick("involvedObject", "regarding").unwrap_or(&Value::Null);
    let kind = s(involved, &["kind"]).to_lowercase();
    let target = match s(involved, &["name"]) {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let source = pick("source", "deprecatedSource").unwrap_or(&Value::Null);
    let component = or(s(source, &["component"]), s(o, &["reportingComponent"]));
    let component = or(component, s(o, &["reportingController"]));
    let instance = or(s(source, &["host"]), s(o, &["reportingInstance"]));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    let message = or(s(o, &["message"]), s(o, &["note"]));
    Row::new(vec![
        last.into(),
        s(o, &["type"]).into(),
        s(o, &["reason"]).into(),
        target.into(),
        s(involved, &["fieldPath"]).into(),
        source.into(),
        message.trim().into(),
        first.into(),
        count.into(),
        name(o),
    ])
}

fn deployment_row(o: &Value, now: i64) -> Row {
    let (names, imgs) = container_cells(o, TEMPLATE_CONTAINERS);
    let selector = match at(o, &["spec", "selector"]) {
        None => String::new(),
        Some(sel) => selector_string(sel).unwrap_or_else(|| "<invalid>".to_string()),
    };
    let ready = format!(
        "{}/{}",
        int(o, &["status", "readyReplicas"]),
        int_or(o, &["spec", "replicas"], 1)
    );
    Row::new(vec![
        name(o),
        ready.into(),
        int(o, &["status", "updatedReplicas"]).into(),
        int(o, &["status", "availableReplicas"]).into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
        selector.into(),
    ])
}

fn controller_revision_row(o: &Value, now: i64) -> Row {
    let controller = a(o, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| flag(r, &["controller"]))
        .map_or_else(
            || "<none>".to_string(),
            |r| {
                let api_version = s(r, &["apiVersion"]);
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                let kind = s(r, &["kind"]);
                let name = s(r, &["name"]);
                match (group, kind) {
                    (_, "") => name.to_string(),
                    ("", k) => format!("{}/{name}", k.to_lowercase()),
                    (g, k) => format!("{}.{}/{name}", k.to_lowercase(), g.to_lowercase()),
                }
            },
        );
    Row::new(vec![
        name(o),
        controller.into(),
        int(o, &["revision"]).into(),
        age(o, now).into(),
    ])
}

fn job_row(o: &Value, now: i64) -> Row {
    let succeeded = int(o, &["status", "succeeded"]);
    let completions = match at(o, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(o, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = timestamp(at(o, &["status", "startTime"]));
    let end = timestamp(at(o, &["status", "completionTime"]));
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(st), None) => human_duration(now - st),
        (Some(st), Some(en)) => human_duration(en - st),
    };
    let has = |ty: &str| condition_is_true(a(o, &["status", "conditions"]), ty);
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if at(o, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, imgs) = container_cells(o, TEMPLATE_CONTAINERS);
    Row::new(vec![
        name(o),
        status.into(),
        completions.into(),
        duration.into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
        format_label_selector(at(o, &["spec", "selector"])).into(),
    ])
}

fn cronjob_row(o: &Value, now: i64) -> Row {
    let last = match at(o, &["status", "lastScheduleTime"]) {
        Some(t) => since(Some(t), now),
        None => "<none>".to_string(),
    };
    // `suspend` defaults to false on a real server.
    let suspend = if flag(o, &["spec", "suspend"]) {
        "True"
    } else {
        "False"
    };
    let template = at(o, &["spec", "jobTemplate"]).unwrap_or(&Value::Null);
    let (names, imgs) = container_cells(template, TEMPLATE_CONTAINERS);
    Row::new(vec![
        name(o),
        s(o, &["spec", "schedule"]).into(),
        or(s(o, &["spec", "timeZone"]), "<none>").into(),
        suspend.into(),
        (a(o, &["status", "active"]).len() as i64).into(),
        last.into(),
        age(o, now).into(),
        names.into(),
        imgs.into(),
        format_label_selector(at(o, &["spec", "jobTemplate", "spec", "selector"])).into(),
    ])
}

fn role_binding_row(o: &Value, now: i64) -> Row {
    let role = format!(
        "{}/{}",
        s(o, &["roleRef", "kind"]),
        s(o, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for subject in a(o, &["subjects"]) {
        let n = s(subject, &["name"]);
        match s(subject, &["kind"]) {
            "User" => users.push(n.to_string()),
            "Group" => groups.push(n.to_string()),
            "ServiceAccount" => sas.push(format!("{}/{n}", s(subject, &["namespace"]))),
            _ => {}
        }
    }
    Row::new(vec![
        name(o),
        role.into(),
        age(o, now).into(),
        users.join(", ").into(),
        groups.join(", ").into(),
        sas.join(", ").into(),
    ])
}

/// Column definitions and row function for CRD `additionalPrinterColumns`.
fn custom_columns(cols: &[Value]) -> (Vec<Value>, RowFn<'_>) {
    let mut defs = vec![NAME.to_json()];
    let mut paths = Vec::new();
    for col in cols {
        let path = s(col, &["jsonPath"]);
        let description = match s(col, &["description"]) {
            "" => format!("Custom resource definition column (in JSONPath format): {path}"),
            d => d.to_string(),
        };
        defs.push(json!({
            "name": s(col, &["name"]),
            "type": s(col, &["type"]),
            "format": s(col, &["format"]),
            "description": description,
            "priority": int(col, &["priority"]),
        }));
        paths.push((parse_json_path(path), s(col, &["type"])));
    }
    let row = move |o: &Value, now: i64| {
        let mut cells = vec![name(o)];
        for (path, ty) in &paths {
            let value = path.as_ref().ok().and_then(|p| eval_json_path(p, o));
            cells.push(value.map_or(Value::Null, |v| custom_cell(ty, v, now)));
        }
        Row::new(cells)
    };
    (defs, Box::new(row))
}

/// Port of apiextensions-apiserver's `cellForJSONValue` (plus jsonpath printing for strings).
fn custom_cell(ty: &str, v: &Value, now: i64) -> Value {
    match (ty, v) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(_)) => v.clone(),
        ("string", Value::Object(_) | Value::Array(_)) => sorted_keys(v).to_string().into(),
        ("string", other) => other.to_string().into(),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => v.clone(),
        ("date", Value::String(t)) if t.is_empty() => "<unknown>".into(),
        ("date", Value::String(_)) => match timestamp(Some(v)) {
            Some(t) if t == ZERO_TIME => "<unknown>".into(),
            Some(t) => human_duration(now - t).into(),
            None => "<invalid>".into(),
        },
        _ => Value::Null,
    }
}

/// Go's `json.Marshal` sorts map keys; match that for object/array cells.
fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|x, y| x.0.cmp(y.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// One step of a parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.key` or `['key']`.
    Field(String),
    /// `[n]` (negative counts from the end).
    Index(i64),
    /// `[*]` or `.*`.
    Wildcard,
    /// `[?(@.path op literal)]`, or `[?(@.path)]` (exists) when `op` is `None`.
    Filter {
        path: Vec<Step>,
        op: Option<(String, Value)>,
    },
}

/// How deeply `[?(@...)]` filters may nest (the path comes from an untrusted CRD).
const MAX_FILTER_DEPTH: usize = 4;

/// Parses the JSONPath subset CRD printer columns use (`{...}` braces optional).
fn parse_json_path(input: &str) -> Result<Vec<Step>, String> {
    let trimmed = input.trim();
    let inner = trimmed
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(trimmed);
    let chars: Vec<char> = inner.chars().collect();
    let (steps, end) = parse_steps(&chars, 0, 0)?;
    if end != chars.len() {
        return Err(format!("unexpected {:?} in {input:?}", chars[end]));
    }
    Ok(steps)
}

/// Parses steps from `i` until the input ends or an unknown character (e.g. a filter operator).
fn parse_steps(c: &[char], mut i: usize, depth: usize) -> Result<(Vec<Step>, usize), String> {
    if depth > MAX_FILTER_DEPTH {
        return Err("filters nested too deeply".to_string());
    }
    let mut steps = Vec::new();
    while i < c.len() {
        match c[i] {
            '.' if c.get(i + 1) == Some(&'*') => {
                steps.push(Step::Wildcard);
                i += 2;
            }
            '.' => {
                let mut key = String::new();
                i += 1;
                while let Some(&ch) = c.get(i) {
                    if ch == '\\' && i + 1 < c.len() {
                        key.push(c[i + 1]);
                        i += 2;
                    } else if ch.is_alphanumeric() || matches!(ch, '_' | '-' | '/' | '$') {
                        key.push(ch);
                        i += 1;
                    } else {
                        break;
                    }
                }
                if !key.is_empty() {
                    steps.push(Step::Field(key));
                }
            }
            '[' => {
                let close = find_close(c, i)?;
                let body: String = c[i + 1..close].iter().collect();
                steps.push(parse_bracket(body.trim(), depth)?);
                i = close + 1;
            }
            _ => break,
        }
    }
    Ok((steps, i))
}

/// Index of the `]` matching the `[` at `open`, skipping quoted strings.
fn find_close(c: &[char], open: usize) -> Result<usize, String> {
    let mut quote: Option<char> = None;
    let mut depth = 0;
    for (j, &ch) in c.iter().enumerate().skip(open) {
        match (quote, ch) {
            (Some(q), _) if ch == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(ch),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => {}
        }
    }
    Err("unclosed [".to_string())
}

fn parse_bracket(body: &str, depth: usize) -> Result<Step, String> {
    if body == "*" {
        return Ok(Step::Wildcard);
    }
    if let Some(key) = unquote(body) {
        return Ok(Step::Field(key));
    }
    if let Some(filter) = body.strip_prefix("?(").and_then(|b| b.strip_suffix(')')) {
        let chars: Vec<char> = filter.trim().chars().collect();
        if chars.first() != Some(&'@') {
            return Err(format!("unsupported filter {body:?}"));
        }
        let (path, end) = parse_steps(&chars, 1, depth + 1)?;
        let rest: String = chars[end..].iter().collect();
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Step::Filter { path, op: None });
        }
        let op = ["==", "!=", "<=", ">=", "<", ">"]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .ok_or_else(|| format!("unsupported filter {body:?}"))?;
        let literal = rest[op.len()..].trim();
        let value = match unquote(literal) {
            Some(text) => Value::String(text),
            None => serde_json::from_str::<Value>(literal)
                .map_err(|_| format!("unsupported filter {body:?}"))?,
        };
        return Ok(Step::Filter {
            path,
            op: Some((op.to_string(), value)),
        });
    }
    body.parse::<i64>()
        .map(Step::Index)
        .map_err(|_| format!("unsupported subscript [{body}]"))
}

fn unquote(text: &str) -> Option<String> {
    ['\'', '"'].into_iter().find_map(|q| {
        text.strip_prefix(q)
            .and_then(|t| t.strip_suffix(q))
            .filter(|_| text.len() >= 2)
            .map(str::to_string)
    })
}

/// Evaluates `path` against `root` and returns the first result (like the CRD table convertor).
fn eval_json_path<'a>(path: &[Step], root: &'a Value) -> Option<&'a Value> {
    eval_all(path, root).into_iter().next()
}

fn eval_all<'a>(path: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in path {
        current = current
            .into_iter()
            .flat_map(|v| -> Vec<&'a Value> {
                match (step, v) {
                    (Step::Field(k), Value::Object(m)) => m.get(k).into_iter().collect(),
                    (Step::Index(n), Value::Array(items)) => {
                        let idx = if *n < 0 { items.len() as i64 + n } else { *n };
                        usize::try_from(idx)
                            .ok()
                            .and_then(|i| items.get(i))
                            .into_iter()
                            .collect()
                    }
                    (Step::Wildcard, Value::Array(items)) => items.iter().collect(),
                    (Step::Wildcard, Value::Object(m)) => m.values().collect(),
                    (Step::Filter { path, op }, Value::Array(items)) => items
                        .iter()
                        .filter(|item| filter_matches(path, op.as_ref(), item))
                        .collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    current
}

fn filter_matches(path: &[Step], op: Option<&(String, Value)>, item: &Value) -> bool {
    let Some(left) = eval_json_path(path, item) else {
        return false;
    };
    let Some((op, right)) = op else {
        return true;
    };
    let ordering = match (left, right) {
        (Value::Number(l), Value::Number(r)) => l
            .as_f64()
            .zip(r.as_f64())
            .and_then(|(l, r)| l.partial_cmp(&r)),
        (Value::String(l), Value::String(r)) => Some(l.cmp(r)),
        (l, r) => (l == r).then_some(std::cmp::Ordering::Equal),
    };
    match op.as_str() {
        "==" => ordering == Some(std::cmp::Ordering::Equal),
        "!=" => ordering != Some(std::cmp::Ordering::Equal),
        "<" => ordering == Some(std::cmp::Ordering::Less),
        ">" => ordering == Some(std::cmp::Ordering::Greater),
        "<=" => ordering.is_some_and(|o| o.is_le()),
        ">=" => ordering.is_some_and(|o| o.is_ge()),
        _ => false,
    }
}

/// Unix seconds of `0001-01-01T00:00:00Z`, Go's zero `time.Time`.
const ZERO_TIME: i64 = -62_135_596_800;

/// Parses an RFC 3339 timestamp value to Unix seconds.
fn timestamp(v: Option<&Value>) -> Option<i64> {
    v?.as_str()?
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// kubectl's `translateTimestampSince`: the age of a timestamp, `<unknown>` if unset.
fn since(v: Option<&Value>, now: i64) -> String {
    match timestamp(v) {
        Some(t) if t != ZERO_TIME => human_duration(now - t),
        _ => "<unknown>".to_string(),
    }
}

fn age(o: &Value, now: i64) -> String {
    since(at(o, &["metadata", "creationTimestamp"]), now)
}

/// `creationTimestamp` as Go's `Time.UTC().Format(time.RFC3339)`.
fn created_at(o: &Value) -> String {
    at(o, &["metadata", "creationTimestamp"])
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or_else(
            || "0001-01-01T00:00:00Z".to_string(),
            |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// Port of `k8s.io/apimachinery/pkg/util/duration.HumanDuration` for whole seconds.
fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs.join(",")
}

/// `metav1.FormatLabelSelector`: the selector string, `<none>` if it selects everything
/// or nothing, `<error>` if invalid.
fn format_label_selector(sel: Option<&Value>) -> String {
    match sel.map(selector_string) {
        None => "<none>".to_string(),
        Some(None) => "<error>".to_string(),
        Some(Some(s)) if s.is_empty() => "<none>".to_string(),
        Some(Some(s)) => s,
    }
}

/// `LabelSelectorAsSelector(sel).String()`; `None` if the selector is invalid.
pub(crate) fn selector_string(sel: &Value) -> Option<String> {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = at(sel, &["matchLabels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    for expr in a(sel, &["matchExpressions"]) {
        let key = s(expr, &["key"]);
        let mut values = strings(a(expr, &["values"]));
        values.sort_unstable();
        let req = match (s(expr, &["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_string(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key.to_string(), req));
    }
    reqs.sort_by(|x, y| x.0.cmp(&y.0));
    Some(
        reqs.into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// Path of a workload's pod template containers.
const TEMPLATE_CONTAINERS: &[&str] = &["spec", "template", "spec", "containers"];

/// Comma-joined container names and images (`layoutContainerCells`).
fn container_cells(o: &Value, path: &[&str]) -> (String, String) {
    let containers = a(o, path);
    let names: Vec<&str> = containers.iter().map(|c| s(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// The value at `path`, treating JSON `null` as absent.
fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |cur, key| cur.get(*key))
        .filter(|v| !v.is_null())
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or_default()
}

fn int(v: &Value, path: &[&str]) -> i64 {
    int_or(v, path, 0)
}

fn int_or(v: &Value, path: &[&str], default: i64) -> i64 {
    at(v, path).and_then(Value::as_i64).unwrap_or(default)
}

fn flag(v: &Value, path: &[&str]) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

fn a<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn obj_len(v: &Value, path: &[&str]) -> i64 {
    at(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

fn strings(values: &[Value]) -> Vec<&str> {
    values.iter().filter_map(Value::as_str).collect()
}

fn name(o: &Value) -> Value {
    s(o, &["metadata", "name"]).into()
}

/// Whether the first condition of type `ty` has status `"True"`.
fn condition_is_true(conditions: &[Value], ty: &str) -> bool {
    conditions
        .iter()
        .find(|c| s(c, &["type"]) == ty)
        .is_some_and(|c| s(c, &["status"]) == "True")
}

/// `v`, or `fallback` if `v` is empty.
fn or<'a>(v: &'a str, fallback: &'a str) -> &'a str {
    if v.is_empty() { fallback } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-06-01T12:00:00Z.
    const NOW: i64 = 1_717_243_200;

    /// RFC 3339 timestamp `secs` seconds before `NOW`.
    fn ago(secs: i64) -> String {
        jiff::Timestamp::from_second(NOW - secs)
            .unwrap()
            .to_string()
    }

    fn meta(name: &str, age_secs: i64) -> Value {
        json!({"name": name, "namespace": "default", "creationTimestamp": ago(age_secs)})
    }

    fn table(columns: &Columns, objects: &[Value]) -> Value {
        to_table(columns, objects, &json!({"resourceVersion": "7"}), "", NOW).unwrap()
    }

    fn header(t: &Value) -> Vec<(String, i64)> {
        t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["priority"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    /// Names of the columns `kubectl get` shows without `-o wide`.
    fn visible(t: &Value) -> Vec<String> {
        header(t)
            .into_iter()
            .filter(|(_, p)| *p == 0)
            .map(|(n, _)| n)
            .collect()
    }

    /// Cells of the only row.
    fn row(resource: &'static str, obj: Value) -> Vec<Value> {
        let t = table(&Columns::Builtin(resource), &[obj]);
        assert_eq!(t["rows"].as_array().unwrap().len(), 1);
        let cells = t["rows"][0]["cells"].as_array().unwrap().clone();
        assert_eq!(cells.len(), header(&t).len(), "one cell per column");
        cells
    }

    fn builtin_visible(resource: &'static str) -> Vec<String> {
        visible(&table(&Columns::Builtin(resource), &[]))
    }

    #[test]
    fn human_duration_boundaries() {
        let cases = [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (599, "9m59s"),
            (600, "10m"),
            (125 * 60, "125m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60 + 30, "3h5m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600, "8h"),
            (48 * 3600 - 1, "47h"),
            (48 * 3600, "2d"),
            ((3 * 24 + 4) * 3600, "3d4h"),
            (8 * 86400 - 1, "7d23h"),
            (8 * 86400, "8d"),
            (45 * 86400, "45d"),
            (730 * 86400 - 1, "729d"),
            (730 * 86400, "2y"),
            (733 * 86400, "2y3d"),
            (8 * 365 * 86400 - 1, "7y364d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn ages_of_missing_zero_and_bad_timestamps() {
        assert_eq!(since(None, NOW), "<unknown>");
        assert_eq!(
            since(Some(&json!("0001-01-01T00:00:00Z")), NOW),
            "<unknown>"
        );
        assert_eq!(since(Some(&json!("yesterday")), NOW), "<unknown>");
        assert_eq!(since(Some(&json!(ago(90))), NOW), "90s");
        assert_eq!(since(Some(&json!(ago(-3600))), NOW), "<invalid>");
        // MicroTime with fractional seconds.
        assert_eq!(
            since(Some(&json!("2024-06-01T11:59:00.123456Z")), NOW),
            "60s"
        );
    }

    #[test]
    fn columns_for_known_and_unknown_resources() {
        for (r, _, _) in PRINTERS {
            assert!(matches!(columns_for(r), Columns::Builtin(x) if x == *r));
        }
        assert!(matches!(columns_for("widgets"), Columns::Default));
        assert!(matches!(columns_for("Pods"), Columns::Default));
    }

    #[test]
    fn table_envelope_and_list_metadata() {
        let lm = json!({"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3});
        let t = to_table(&Columns::Default, &[], &lm, "", NOW).unwrap();
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], lm);
        assert_eq!(t["rows"], json!([]));
        assert_eq!(t["columnDefinitions"][0]["format"], "name");

        let t = to_table(
            &Columns::Default,
            &[],
            &json!({"resourceVersion": ""}),
            "",
            NOW,
        )
        .unwrap();
        assert_eq!(t["metadata"], json!({}));
        let t = to_table(&Columns::Default, &[], &Value::Null, "", NOW).unwrap();
        assert_eq!(t["metadata"], json!({}));
    }

    #[test]
    fn include_object_variants() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c", 5), "data": {"a": "1"}});
        let cols = columns_for("configmaps");
        let partial = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]});
        for mode in ["", "Metadata"] {
            let t = to_table(&cols, std::slice::from_ref(&obj), &json!({}), mode, NOW).unwrap();
            assert_eq!(t["rows"][0]["object"], partial, "{mode:?}");
        }
        let t = to_table(&cols, std::slice::from_ref(&obj), &json!({}), "Object", NOW).unwrap();
        assert_eq!(t["rows"][0]["object"], obj);
        let t = to_table(&cols, std::slice::from_ref(&obj), &json!({}), "None", NOW).unwrap();
        assert_eq!(t["rows"][0]["object"], Value::Null);
        assert_eq!(t["rows"][0]["cells"], json!(["c", 1, "5s"]));

        let err = to_table(&cols, &[obj], &json!({}), "metadata", NOW).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"metadata\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    #[test]
    fn partial_object_metadata_without_metadata() {
        let t = to_table(
            &Columns::Default,
            &[json!({"kind": "X"})],
            &json!({}),
            "",
            NOW,
        )
        .unwrap();
        assert_eq!(t["rows"][0]["object"]["metadata"], json!({}));
        assert_eq!(t["rows"][0]["cells"], json!(["", "<unknown>"]));
    }

    #[test]
    fn default_columns_are_name_and_age() {
        let t = table(&Columns::Default, &[json!({"metadata": meta("w", 3700)})]);
        assert_eq!(visible(&t), ["Name", "Age"]);
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        assert_eq!(t["rows"][0]["cells"], json!(["w", "61m"]));
        // An unknown builtin name falls back to the same.
        let t = table(
            &Columns::Builtin("nodes"),
            &[json!({"metadata": meta("n", 10)})],
        );
        assert_eq!(t["rows"][0]["cells"], json!(["n", "10s"]));
    }

    #[test]
    fn simple_builtin_column_sets() {
        let cases: [(&'static str, &[&str]); 10] = [
            ("namespaces", &["Name", "Status", "Age"]),
            ("configmaps", &["Name", "Data", "Age"]),
            ("secrets", &["Name", "Type", "Data", "Age"]),
            (
                "services",
                &[
                    "Name",
                    "Type",
                    "Cluster-IP",
                    "External-IP",
                    "Port(s)",
                    "Age",
                ],
            ),
            ("serviceaccounts", &["Name", "Secrets", "Age"]),
            ("leases", &["Name", "Holder", "Age"]),
            ("roles", &["Name", "Created At"]),
            ("clusterroles", &["Name", "Created At"]),
            ("rolebindings", &["Name", "Role", "Age"]),
            ("customresourcedefinitions", &["Name", "Created At"]),
        ];
        for (resource, want) in cases {
            assert_eq!(builtin_visible(resource), want, "{resource}");
        }
    }

    #[test]
    fn workload_column_sets() {
        let cases: [(&'static str, &[&str]); 10] = [
            ("pods", &["Name", "Ready", "Status", "Restarts", "Age"]),
            (
                "persistentvolumeclaims",
                &[
                    "Name",
                    "Status",
                    "Volume",
                    "Capacity",
                    "Access Modes",
                    "StorageClass",
                    "VolumeAttributesClass",
                    "Age",
                ],
            ),
            (
                "events",
                &["Last Seen", "Type", "Reason", "Object", "Message"],
            ),
            (
                "deployments",
                &["Name", "Ready", "Up-to-date", "Available", "Age"],
            ),
            (
                "replicasets",
                &["Name", "Desired", "Current", "Ready", "Age"],
            ),
            ("statefulsets", &["Name", "Ready", "Age"]),
            (
                "daemonsets",
                &[
                    "Name",
                    "Desired",
                    "Current",
                    "Ready",
                    "Up-to-date",
                    "Available",
                    "Node Selector",
                    "Age",
                ],
            ),
            (
                "controllerrevisions",
                &["Name", "Controller", "Revision", "Age"],
            ),
            (
                "jobs",
                &["Name", "Status", "Completions", "Duration", "Age"],
            ),
            (
                "cronjobs",
                &[
                    "Name",
                    "Schedule",
                    "Timezone",
                    "Suspend",
                    "Active",
                    "Last Schedule",
                    "Age",
                ],
            ),
        ];
        for (resource, want) in cases {
            assert_eq!(builtin_visible(resource), want, "{resource}");
        }
        let wide: Vec<String> = header(&table(&columns_for("pods"), &[]))
            .into_iter()
            .filter(|(_, p)| *p == 1)
            .map(|(n, _)| n)
            .collect();
        assert_eq!(wide, ["IP", "Node", "Nominated Node", "Readiness Gates"]);
    }

    #[test]
    fn every_builtin_has_one_name_column_and_one_cell_per_column() {
        let weird = [
            json!({}),
            json!(null),
            json!([1, 2]),
            json!("x"),
            json!({"metadata": 5, "spec": [], "status": "x"}),
            json!({"metadata": {"name": 5, "creationTimestamp": 7}, "spec": {"containers": "x", "ports": [1]}}),
            json!({"status": {"containerStatuses": [{"state": {"terminated": "x"}}], "initContainerStatuses": [null]}}),
        ];
        for (resource, cols, _) in PRINTERS {
            assert_eq!(
                cols.iter().filter(|c| c.format == "name").count(),
                1,
                "{resource}"
            );
            let t = table(&Columns::Builtin(resource), &weird);
            for r in t["rows"].as_array().unwrap() {
                assert_eq!(
                    r["cells"].as_array().unwrap().len(),
                    cols.len(),
                    "{resource}"
                );
            }
        }
    }

    #[test]
    fn namespace_configmap_secret_serviceaccount_lease_rows() {
        let ns = json!({"metadata": meta("dev", 200), "status": {"phase": "Active"}});
        assert_eq!(
            json!(row("namespaces", ns)),
            json!(["dev", "Active", "3m20s"])
        );

        let cm = json!({"metadata": meta("cfg", 30), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(json!(row("configmaps", cm)), json!(["cfg", 3, "30s"]));
        assert_eq!(
            json!(row("configmaps", json!({"metadata": meta("e", 1)}))),
            json!(["e", 0, "1s"])
        );

        let secret = json!({"metadata": meta("tls", 60), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            json!(row("secrets", secret)),
            json!(["tls", "kubernetes.io/tls", 2, "60s"])
        );
        let secret = json!({"metadata": meta("s", 60), "data": {"a": ""}, "stringData": {"a": "x", "b": "y"}});
        assert_eq!(
            json!(row("secrets", secret)),
            json!(["s", "Opaque", 2, "60s"])
        );

        let sa = json!({"metadata": meta("default", 86400 * 3), "secrets": [{"name": "t"}]});
        assert_eq!(
            json!(row("serviceaccounts", sa)),
            json!(["default", 1, "3d"])
        );
        let sa = json!({"metadata": meta("bot", 5)});
        assert_eq!(json!(row("serviceaccounts", sa)), json!(["bot", 0, "5s"]));

        let lease = json!({"metadata": meta("ctrl", 10), "spec": {"holderIdentity": "pod-1_abc"}});
        assert_eq!(
            json!(row("leases", lease)),
            json!(["ctrl", "pod-1_abc", "10s"])
        );
        assert_eq!(
            json!(row(
                "leases",
                json!({"metadata": meta("l", 10), "spec": {}})
            )),
            json!(["l", "", "10s"])
        );
    }

    #[test]
    fn service_rows() {
        let svc = |spec: Value, status: Value| json!({"metadata": meta("web", 45 * 86400), "spec": spec, "status": status});
        let cluster = svc(
            json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                   "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443}], "selector": {"tier": "web", "app": "x"}}),
            json!({}),
        );
        assert_eq!(
            json!(row("services", cluster)),
            json!([
                "web",
                "ClusterIP",
                "10.96.0.10",
                "<none>",
                "80/TCP,443/TCP",
                "45d",
                "app=x,tier=web"
            ])
        );

        let node_port = svc(
            json!({"type": "NodePort", "clusterIP": "10.0.0.2", "externalIPs": ["1.2.3.4", "5.6.7.8"],
                   "ports": [{"port": 53, "nodePort": 30053, "protocol": "UDP"}]}),
            json!({}),
        );
        let cells = row("services", node_port);
        assert_eq!(
            cells[2..5],
            [
                json!("10.0.0.2"),
                json!("1.2.3.4,5.6.7.8"),
                json!("53:30053/UDP")
            ]
        );
        assert_eq!(cells[6], "<none>");

        let pending = svc(
            json!({"type": "LoadBalancer", "clusterIPs": ["10.0.0.3"], "ports": []}),
            json!({}),
        );
        let cells = row("services", pending);
        assert_eq!(cells[3..5], [json!("<pending>"), json!("<none>")]);

        let lb = svc(
            json!({"type": "LoadBalancer", "clusterIPs": ["10.0.0.3"], "externalIPs": ["9.9.9.9"]}),
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "4.4.4.4"}, {"ip": "4.4.4.4"}]}}),
        );
        assert_eq!(row("services", lb)[3], "4.4.4.4,lb.example.com,9.9.9.9");

        let ext = svc(
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
            json!({}),
        );
        assert_eq!(
            row("services", ext)[1..4],
            [
                json!("ExternalName"),
                json!("<none>"),
                json!("db.example.com")
            ]
        );

        let headless = svc(
            json!({"clusterIP": "None", "ports": [{"port": 5432}]}),
            json!({}),
        );
        assert_eq!(
            row("services", headless)[1..5],
            [
                json!("ClusterIP"),
                json!("None"),
                json!("<none>"),
                json!("5432/TCP")
            ]
        );
    }

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": meta("p", 600), "spec": spec, "status": status})
    }

    fn one_container() -> Value {
        json!({"containers": [{"name": "app", "image": "nginx"}]})
    }

    /// READY, STATUS, RESTARTS of a pod row.
    fn pod_summary(p: Value) -> (String, String, String) {
        let c = row("pods", p);
        let text = |v: &Value| v.as_str().unwrap().to_string();
        (text(&c[1]), text(&c[2]), text(&c[3]))
    }

    fn summary(ready: &str, status: &str, restarts: &str) -> (String, String, String) {
        (ready.into(), status.into(), restarts.into())
    }

    #[test]
    fn pod_running_and_wide_cells() {
        let p = json!({
            "metadata": meta("web-0", 600),
            "spec": {"containers": [{"name": "app"}], "nodeName": "node-1",
                     "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "other"}]},
            "status": {"phase": "Running", "podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}],
                       "conditions": [{"type": "example.com/lb", "status": "True"}, {"type": "other", "status": "False"}],
                       "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": ago(600)}}}]}
        });
        assert_eq!(
            json!(row("pods", p)),
            json!([
                "web-0",
                "1/1",
                "Running",
                "0",
                "10m",
                "10.244.0.5",
                "node-1",
                "<none>",
                "1/2"
            ])
        );
        let t = table(
            &columns_for("pods"),
            &[pod(one_container(), json!({"phase": "Pending"}))],
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "p", "0/1", "Pending", "0", "10m", "<none>", "<none>", "<none>", "<none>"
            ])
        );
        assert!(t["rows"][0].get("conditions").is_none());
    }

    #[test]
    fn pod_readiness_counts() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let statuses = json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "state": {"running": {}}},
            {"name": "b", "ready": false, "state": {"running": {}}}]});
        assert_eq!(
            pod_summary(pod(spec, statuses)),
            summary("1/2", "Running", "0")
        );
    }

    #[test]
    fn pod_waiting_reason_and_restarts_with_last_restart_age() {
        let status = json!({"phase": "Running", "containerStatuses": [{
            "name": "app", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(125)}}}]});
        assert_eq!(
            pod_summary(pod(one_container(), status)),
            summary("0/1", "CrashLoopBackOff", "3 (2m5s ago)")
        );

        let status = json!({"phase": "Pending", "containerStatuses": [{
            "name": "app", "restartCount": 2, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]});
        assert_eq!(
            pod_summary(pod(one_container(), status)),
            summary("0/1", "ImagePullBackOff", "2")
        );
    }

    #[test]
    fn pod_terminated_states() {
        let status = json!({"phase": "Succeeded", "containerStatuses": [{
            "name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]});
        let p = pod(one_container(), status);
        assert_eq!(pod_summary(p.clone()), summary("0/1", "Completed", "0"));
        let t = table(&columns_for("pods"), &[p]);
        assert_eq!(
            t["rows"][0]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}])
        );

        let failed = json!({"phase": "Failed", "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 137}}}]});
        let p = pod(one_container(), failed);
        assert_eq!(pod_summary(p.clone()), summary("0/1", "ExitCode:137", "0"));
        assert_eq!(
            table(&columns_for("pods"), &[p])["rows"][0]["conditions"][0]["reason"],
            "Failed"
        );

        let signal = json!({"phase": "Failed", "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "signal": 9}}}]});
        assert_eq!(pod_summary(pod(one_container(), signal)).1, "Signal:9");

        let evicted = json!({"phase": "Failed", "reason": "Evicted"});
        assert_eq!(pod_summary(pod(one_container(), evicted)).1, "Evicted");
    }

    #[test]
    fn pod_completed_container_with_running_sibling() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let statuses = |ready_condition: &str| {
            json!({"phase": "Running",
                   "conditions": [{"type": "Ready", "status": ready_condition}],
                   "containerStatuses": [
                       {"name": "a", "ready": true, "state": {"running": {}}},
                       {"name": "b", "ready": false, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})
        };
        assert_eq!(
            pod_summary(pod(spec.clone(), statuses("True"))),
            summary("1/2", "Running", "0")
        );
        assert_eq!(
            pod_summary(pod(spec, statuses("False"))),
            summary("1/2", "NotReady", "0")
        );
    }

    #[test]
    fn pod_init_container_states() {
        let spec = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "app"}]});
        let with_init = |init: Value| {
            pod(
                spec.clone(),
                json!({"phase": "Pending", "initContainerStatuses": init,
                "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}}]}),
            )
        };
        let running = with_init(
            json!([{"name": "i1", "state": {"running": {}}}, {"name": "i2", "state": {"waiting": {}}}]),
        );
        assert_eq!(pod_summary(running), summary("0/1", "Init:0/2", "0"));

        let second = with_init(json!([
            {"name": "i1", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "i2", "state": {"waiting": {"reason": "PodInitializing"}}}]));
        assert_eq!(pod_summary(second), summary("0/1", "Init:1/2", "0"));

        let crash = with_init(
            json!([{"name": "i1", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(30)}}}]),
        );
        assert_eq!(
            pod_summary(crash),
            summary("0/1", "Init:CrashLoopBackOff", "4 (30s ago)")
        );

        let error = with_init(
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]),
        );
        assert_eq!(pod_summary(error).1, "Init:Error");
        let code = with_init(json!([{"name": "i1", "state": {"terminated": {"exitCode": 2}}}]));
        assert_eq!(pod_summary(code).1, "Init:ExitCode:2");
        let sig = with_init(
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 1, "signal": 15}}}]),
        );
        assert_eq!(pod_summary(sig).1, "Init:Signal:15");
    }

    #[test]
    fn pod_sidecar_init_containers_count_towards_ready() {
        let spec = json!({"initContainers": [{"name": "proxy", "restartPolicy": "Always"}], "containers": [{"name": "app"}]});
        let status = json!({"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [{"name": "proxy", "started": true, "ready": true, "restartCount": 1,
                "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(400)}}}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(200)}}}]});
        assert_eq!(
            pod_summary(pod(spec, status)),
            summary("2/2", "Running", "3 (3m20s ago)")
        );
    }

    #[test]
    fn pod_restart_counts_saturate() {
        let status = json!({"containerStatuses": [
            {"name": "a", "restartCount": i64::MAX, "state": {"running": {}}},
            {"name": "b", "restartCount": i64::MAX, "state": {"running": {}}}]});
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(pod_summary(pod(spec, status)).2, i64::MAX.to_string());
    }

    #[test]
    fn pod_deletion_and_scheduling_gates() {
        let mut p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true, "state": {"running": {}}}]}),
        );
        p["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(pod_summary(p.clone()), summary("1/1", "Terminating", "0"));
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(pod_summary(p.clone()).1, "Unknown");

        let mut done = pod(one_container(), json!({"phase": "Succeeded"}));
        done["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(pod_summary(done).1, "Succeeded");

        let gated = pod(
            one_container(),
            json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
        );
        assert_eq!(pod_summary(gated).1, "SchedulingGated");
    }

    #[test]
    fn pvc_rows() {
        let bound = json!({"metadata": meta("data", 7200),
            "spec": {"volumeName": "pvc-123", "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]}});
        assert_eq!(
            json!(row("persistentvolumeclaims", bound)),
            json!([
                "data", "Bound", "pvc-123", "1Gi", "RWO,RWX", "standard", "<unset>", "120m",
                "<unset>"
            ])
        );
        let mut pending = json!({"metadata": meta("p", 5),
            "spec": {"storageClassName": "fast", "volumeMode": "Block", "volumeAttributesClassName": "gold"},
            "status": {"phase": "Pending"}});
        pending["metadata"]["annotations"] = json!({BETA_STORAGE_CLASS: "legacy"});
        assert_eq!(
            json!(row("persistentvolumeclaims", pending.clone())),
            json!(["p", "Pending", "", "", "", "legacy", "gold", "5s", "Block"])
        );
        pending["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(row("persistentvolumeclaims", pending)[1], "Terminating");
    }

    #[test]
    fn event_rows() {
        let ev = json!({"metadata": meta("web.17a", 300), "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "source": {"component": "kubelet", "host": "node-1"}, "message": "Back-off restarting\n",
            "firstTimestamp": ago(300), "lastTimestamp": ago(30), "count": 5});
        assert_eq!(
            json!(row("events", ev)),
            json!([
                "30s",
                "Warning",
                "BackOff",
                "pod/web",
                "spec.containers{app}",
                "kubelet, node-1",
                "Back-off restarting",
                "5m",
                5,
                "web.17a"
            ])
        );

        let new_style = json!({"metadata": meta("e2", 60), "type": "Normal", "reason": "Scheduled",
            "involvedObject": {"kind": "Node"}, "eventTime": "2024-06-01T11:58:00.000001Z",
            "reportingComponent": "default-scheduler", "reportingInstance": "sched-1", "message": "ok"});
        assert_eq!(
            json!(row("events", new_style)),
            json!([
                "2m",
                "Normal",
                "Scheduled",
                "node",
                "",
                "default-scheduler, sched-1",
                "ok",
                "2m",
                1,
                "e2"
            ])
        );

        let series = json!({"metadata": meta("e3", 60), "eventTime": ago(600),
            "series": {"count": 9, "lastObservedTime": ago(3)}, "involvedObject": {"kind": "Deployment", "name": "d"}});
        let cells = row("events", series);
        assert_eq!(
            (cells[0].clone(), cells[7].clone(), cells[8].clone()),
            (json!("3s"), json!("10m"), json!(9))
        );

        let events_k8s_io = json!({"metadata": meta("e4", 60), "type": "Normal", "reason": "Pulled",
            "regarding": {"kind": "Pod", "name": "x"}, "note": "pulled", "reportingController": "kubelet",
            "deprecatedFirstTimestamp": ago(20), "deprecatedLastTimestamp": ago(10), "deprecatedCount": 2});
        assert_eq!(
            json!(row("events", events_k8s_io)),
            json!([
                "10s", "Normal", "Pulled", "pod/x", "", "kubelet", "pulled", "20s", 2, "e4"
            ])
        );
        let no_times = row("events", json!({"metadata": meta("e5", 1)}));
        assert_eq!(
            (no_times[0].clone(), no_times[7].clone()),
            (json!("<unknown>"), json!("<unknown>"))
        );
    }

    fn template() -> Value {
        json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}})
    }

    #[test]
    fn deployment_replicaset_statefulset_daemonset_rows() {
        let deploy = json!({"metadata": meta("web", 3 * 86400 + 4 * 3600),
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template()},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            json!(row("deployments", deploy)),
            json!([
                "web",
                "2/3",
                3,
                2,
                "3d4h",
                "app,log",
                "nginx:1.27,busybox",
                "app=web"
            ])
        );
        let fresh = json!({"metadata": meta("new", 1), "spec": {}});
        assert_eq!(
            row("deployments", fresh)[1..4],
            [json!("0/1"), json!(0), json!(0)]
        );

        let rs = json!({"metadata": meta("web-5d8", 60),
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8"}}, "template": template()},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            json!(row("replicasets", rs)),
            json!([
                "web-5d8",
                2,
                2,
                1,
                "60s",
                "app,log",
                "nginx:1.27,busybox",
                "app=web,pod-template-hash=5d8"
            ])
        );

        let sts = json!({"metadata": meta("db", 60), "spec": {"replicas": 3, "template": template()}, "status": {"readyReplicas": 3}});
        assert_eq!(
            json!(row("statefulsets", sts)),
            json!(["db", "3/3", "60s", "app,log", "nginx:1.27,busybox"])
        );

        let ds = json!({"metadata": meta("agent", 60),
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "a", "image": "i"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                       "updatedNumberScheduled": 3, "numberAvailable": 2}});
        assert_eq!(
            json!(row("daemonsets", ds)),
            json!([
                "agent",
                3,
                3,
                2,
                3,
                2,
                "kubernetes.io/os=linux",
                "60s",
                "a",
                "i",
                "app=agent"
            ])
        );
        let bare = row("daemonsets", json!({"metadata": meta("d", 1)}));
        assert_eq!(
            (bare[6].clone(), bare[10].clone()),
            (json!("<none>"), json!("<none>"))
        );
    }

    #[test]
    fn controller_revision_rows() {
        let cr = |owners: Value| json!({"metadata": {"name": "web-7f9", "creationTimestamp": ago(60), "ownerReferences": owners}, "revision": 2});
        let owned = cr(
            json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]),
        );
        assert_eq!(
            json!(row("controllerrevisions", owned)),
            json!(["web-7f9", "statefulset.apps/web", 2, "60s"])
        );
        let core =
            cr(json!([{"apiVersion": "v1", "kind": "Pod", "name": "x", "controller": true}]));
        assert_eq!(row("controllerrevisions", core)[1], "pod/x");
        let not_controller =
            cr(json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"}]));
        assert_eq!(row("controllerrevisions", not_controller)[1], "<none>");
    }

    #[test]
    fn job_rows() {
        let job = |spec: Value, status: Value| json!({"metadata": meta("pi", 600), "spec": spec, "status": status});
        let done = job(
            json!({"completions": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}, "template": template()}),
            json!({"succeeded": 1, "startTime": ago(600), "completionTime": ago(590),
                   "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
        );
        assert_eq!(
            json!(row("jobs", done)),
            json!([
                "pi",
                "Complete",
                "1/1",
                "10s",
                "10m",
                "app,log",
                "nginx:1.27,busybox",
                "batch.kubernetes.io/controller-uid=u"
            ])
        );
        let running = job(
            json!({"completions": 5}),
            json!({"succeeded": 2, "startTime": ago(125)}),
        );
        assert_eq!(
            row("jobs", running)[1..4],
            [json!("Running"), json!("2/5"), json!("2m5s")]
        );
        let parallel = job(json!({"parallelism": 3}), json!({}));
        assert_eq!(
            row("jobs", parallel)[1..4],
            [json!("Running"), json!("0/1 of 3"), json!("")]
        );
        let failed = job(
            json!({}),
            json!({"conditions": [{"type": "Failed", "status": "True"}]}),
        );
        assert_eq!(row("jobs", failed)[1..3], [json!("Failed"), json!("0/1")]);
        let suspended = job(
            json!({}),
            json!({"conditions": [{"type": "Complete", "status": "False"}, {"type": "Suspended", "status": "True"}]}),
        );
        assert_eq!(row("jobs", suspended)[1], "Suspended");
        let mut deleting = job(json!({}), json!({}));
        deleting["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(row("jobs", deleting)[1], "Terminating");
    }

    #[test]
    fn cronjob_rows() {
        let cj = json!({"metadata": meta("nightly", 86400 * 45),
            "spec": {"schedule": "0 3 * * *", "timeZone": "Etc/UTC", "suspend": true,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img"}]}}}}},
            "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ago(3600 * 9)}});
        assert_eq!(
            json!(row("cronjobs", cj)),
            json!([
                "nightly",
                "0 3 * * *",
                "Etc/UTC",
                "True",
                1,
                "9h",
                "45d",
                "c",
                "img",
                "<none>"
            ])
        );
        let bare = json!({"metadata": meta("c", 5), "spec": {"schedule": "*/5 * * * *"}});
        assert_eq!(
            json!(row("cronjobs", bare)),
            json!([
                "c",
                "*/5 * * * *",
                "<none>",
                "False",
                0,
                "<none>",
                "5s",
                "",
                "",
                "<none>"
            ])
        );
    }

    #[test]
    fn rbac_and_crd_rows() {
        let role =
            json!({"metadata": {"name": "reader", "creationTimestamp": "2024-05-01T10:20:30Z"}});
        assert_eq!(
            json!(row("roles", role.clone())),
            json!(["reader", "2024-05-01T10:20:30Z"])
        );
        assert_eq!(
            json!(row("clusterroles", role.clone())),
            json!(["reader", "2024-05-01T10:20:30Z"])
        );
        let crd = json!({"metadata": {"name": "widgets.example.com", "creationTimestamp": "2024-05-01T10:20:30.5+02:00"}});
        assert_eq!(
            json!(row("customresourcedefinitions", crd)),
            json!(["widgets.example.com", "2024-05-01T08:20:30Z"])
        );
        assert_eq!(
            row("roles", json!({"metadata": {"name": "x"}}))[1],
            "0001-01-01T00:00:00Z"
        );

        let rb = json!({"metadata": meta("bind", 90), "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"}, {"kind": "User", "name": "bob"},
                         {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]});
        assert_eq!(
            json!(row("rolebindings", rb.clone())),
            json!([
                "bind",
                "ClusterRole/view",
                "90s",
                "alice, bob",
                "devs",
                "tools/ci"
            ])
        );
        assert_eq!(row("clusterrolebindings", rb)[1], "ClusterRole/view");
    }

    #[test]
    fn label_selector_strings() {
        let sel = json!({"matchLabels": {"tier": "web", "app": "x"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
            {"key": "zone", "operator": "NotIn", "values": ["b"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "owner", "operator": "Exists"}]});
        assert_eq!(
            format_label_selector(Some(&sel)),
            "app=x,!canary,env in (dev,prod),owner,tier=web,zone notin (b)"
        );
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(format_label_selector(None), "<none>");
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "In", "values": []}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
        let bad_op = json!({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(format_label_selector(Some(&bad_op)), "<error>");
        let d = json!({"metadata": meta("d", 1), "spec": {"selector": bad}});
        assert_eq!(row("deployments", d)[7], "<invalid>");
    }

    fn widget(status: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w1", "creationTimestamp": ago(7200),
                            "labels": {"app": "shop", "app.kubernetes.io/name": "widget"}},
               "spec": {"size": 3, "ratio": 0.5, "enabled": true, "tags": ["a", "b"], "config": {"z": 1, "a": {"y": 2, "b": 3}}},
               "status": status})
    }

    fn printer_col(name: &str, ty: &str, path: &str) -> Value {
        json!({"name": name, "type": ty, "jsonPath": path})
    }

    fn custom_cells(cols: Vec<Value>, obj: Value) -> Vec<Value> {
        let t = table(&Columns::Custom(cols), &[obj]);
        t["rows"][0]["cells"].as_array().unwrap().clone()
    }

    #[test]
    fn custom_columns_header() {
        let cols = vec![
            json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1, "format": "int32"}),
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.ready", "description": "Is it ready"}),
        ];
        let t = table(&Columns::Custom(cols), &[]);
        assert_eq!(
            t["columnDefinitions"],
            json!([
                {"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0},
                {"name": "Size", "type": "integer", "format": "int32",
                 "description": "Custom resource definition column (in JSONPath format): .spec.size", "priority": 1},
                {"name": "Ready", "type": "string", "format": "", "description": "Is it ready", "priority": 0},
            ])
        );
        // Without printer columns a CR gets Name + Age, like apiextensions-apiserver.
        let t = table(&Columns::Custom(vec![]), &[widget(json!({}))]);
        assert_eq!(visible(&t), ["Name", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["w1", "120m"]));
    }

    #[test]
    fn custom_columns_typed_cells() {
        let cols = vec![
            printer_col("Size", "integer", ".spec.size"),
            printer_col("Ratio", "number", ".spec.ratio"),
            printer_col("RatioInt", "integer", ".spec.ratio"),
            printer_col("Enabled", "boolean", ".spec.enabled"),
            printer_col("SizeText", "string", ".spec.size"),
            printer_col("EnabledText", "string", ".spec.enabled"),
            printer_col("Tags", "string", ".spec.tags"),
            printer_col("Config", "string", ".spec.config"),
            printer_col("Age", "date", ".metadata.creationTimestamp"),
            printer_col("Bad", "date", ".status.when"),
            printer_col("Mismatch", "boolean", ".spec.size"),
            printer_col("Missing", "string", ".status.nothing"),
        ];
        let cells = custom_cells(cols, widget(json!({"when": "not a time"})));
        assert_eq!(
            cells,
            [
                json!("w1"),
                json!(3),
                json!(0.5),
                json!(0),
                json!(true),
                json!("3"),
                json!("true"),
                json!("[\"a\",\"b\"]"),
                json!("{\"a\":{\"b\":3,\"y\":2},\"z\":1}"),
                json!("120m"),
                json!("<invalid>"),
                Value::Null,
                Value::Null,
            ]
        );
    }

    #[test]
    fn custom_columns_json_path_features() {
        let status = json!({"conditions": [
            {"type": "Synced", "status": "True", "observedGeneration": 1},
            {"type": "Ready", "status": "False", "reason": "Waiting", "observedGeneration": 2}],
            "replicas": [{"name": "r0"}, {"name": "r1"}, {"name": "r2"}]});
        let cols = vec![
            printer_col(
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#,
            ),
            printer_col(
                "Reason",
                "string",
                ".status.conditions[?(@.type == 'Ready')].reason",
            ),
            printer_col(
                "NotSynced",
                "string",
                r#".status.conditions[?(@.type!="Synced")].type"#,
            ),
            printer_col(
                "Gen2",
                "string",
                ".status.conditions[?(@.observedGeneration>1)].type",
            ),
            printer_col(
                "HasReason",
                "string",
                ".status.conditions[?(@.reason)].type",
            ),
            printer_col("App", "string", ".metadata.labels.app"),
            printer_col(
                "Escaped",
                "string",
                r".metadata.labels.app\.kubernetes\.io/name",
            ),
            printer_col(
                "Bracket",
                "string",
                ".metadata.labels['app.kubernetes.io/name']",
            ),
            printer_col("First", "string", ".status.replicas[0].name"),
            printer_col("Last", "string", ".status.replicas[-1].name"),
            printer_col("OutOfRange", "string", ".status.replicas[7].name"),
            printer_col("Star", "string", ".status.replicas[*].name"),
            printer_col("Braced", "integer", "{.spec.size}"),
            printer_col(
                "NoMatch",
                "string",
                r#".status.conditions[?(@.type=="Nope")].status"#,
            ),
            printer_col("Broken", "string", ".status.conditions[?(@.type=="),
            printer_col("Unclosed", "string", ".status.replicas[0"),
        ];
        let cells = custom_cells(cols, widget(status));
        assert_eq!(
            cells,
            [
                json!("w1"),
                json!("False"),
                json!("Waiting"),
                json!("Ready"),
                json!("Ready"),
                json!("Ready"),
                json!("shop"),
                json!("widget"),
                json!("widget"),
                json!("r0"),
                json!("r2"),
                Value::Null,
                json!("r0"),
                json!(3),
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        );
    }

    #[test]
    fn json_path_parser() {
        assert_eq!(
            parse_json_path(".a.b[2]['c.d'][*].*").unwrap(),
            vec![
                Step::Field("a".into()),
                Step::Field("b".into()),
                Step::Index(2),
                Step::Field("c.d".into()),
                Step::Wildcard,
                Step::Wildcard,
            ]
        );
        assert_eq!(
            parse_json_path("[?(@.n >= 2)]").unwrap(),
            vec![Step::Filter {
                path: vec![Step::Field("n".into())],
                op: Some((">=".into(), json!(2)))
            }]
        );
        for bad in [
            ".a b",
            ".a[x]",
            "[?(x==1)]",
            "[?(@.a ~ 1)]",
            "[?(@.a == nope)]",
            ".a[",
            "'",
            "[']",
        ] {
            assert!(parse_json_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_json_path("").unwrap(), vec![]);
        let nested = |n: usize| format!(".a{}{}", "[?(@.b".repeat(n), ")]".repeat(n));
        assert!(parse_json_path(&nested(MAX_FILTER_DEPTH)).is_ok());
        assert!(parse_json_path(&nested(MAX_FILTER_DEPTH + 1)).is_err());
        assert!(parse_json_path(&nested(100_000)).is_err());
    }

    #[test]
    fn custom_columns_on_non_object_values() {
        let cols = vec![
            printer_col("X", "string", ".spec.x[0]"),
            printer_col("D", "date", ".metadata.creationTimestamp"),
        ];
        let t = table(
            &Columns::Custom(cols),
            &[json!(null), json!([1]), json!({"spec": {"x": "str"}})],
        );
        for r in t["rows"].as_array().unwrap() {
            assert_eq!(r["cells"], json!(["", null, null]));
        }
    }
}
