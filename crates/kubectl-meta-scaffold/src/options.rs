//! What `kubectl meta init` was asked for ([`Options`]) and what that resolves to ([`Plan`]):
//! every name, type and sample object the generated files share, checked before anything is
//! written.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::error::ScaffoldError;
use super::naming::{self, TypeRef};
use super::schema;

/// The controller kind to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerKind {
    /// CompositeController: a parent kind and the children it owns.
    Composite,
    /// DecoratorController: labels and attachments added to objects of an existing kind.
    Decorator,
    /// MapController: one set of outputs per input object.
    Map,
}

impl ControllerKind {
    /// `CompositeController`, ...
    pub fn definition_kind(self) -> &'static str {
        match self {
            ControllerKind::Composite => "CompositeController",
            ControllerKind::Decorator => "DecoratorController",
            ControllerKind::Map => "MapController",
        }
    }

    /// `composite`, `decorator` or `map` (the flag value and the template name).
    pub fn name(self) -> &'static str {
        match self {
            ControllerKind::Composite => "composite",
            ControllerKind::Decorator => "decorator",
            ControllerKind::Map => "map",
        }
    }

    /// The hook the generated controller has (`sync` or `map`).
    pub fn hook(self) -> &'static str {
        match self {
            ControllerKind::Map => "map",
            _ => "sync",
        }
    }
}

/// The hook's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Python 3, standard library only.
    Python,
    /// JavaScript on Node.js, standard library only.
    Javascript,
    /// Go, standard library only.
    Go,
    /// Rust with serde and serde_json.
    Rust,
}

impl Lang {
    /// `python`, ... (the template directory).
    pub fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Javascript => "javascript",
            Lang::Go => "go",
            Lang::Rust => "rust",
        }
    }
}

/// How the engine calls the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookForm {
    /// A program run once per call (nothing to start, no port).
    Exec,
    /// An HTTP server.
    Webhook,
}

/// The port the generated webhook server listens on in development.
pub const WEBHOOK_PORT: u16 = 8081;

/// The request of `kubectl meta init`.
#[derive(Debug, Clone)]
pub struct Options {
    /// The directory to create the project in.
    pub dir: PathBuf,
    /// Controller kind.
    pub kind: ControllerKind,
    /// Hook language.
    pub lang: Lang,
    /// Hook form.
    pub hook: HookForm,
    /// `--parent KIND.GROUP`.
    pub parent: Option<String>,
    /// `--version`.
    pub version: Option<String>,
    /// `--child RESOURCE[.GROUP]` (empty: configmaps).
    pub children: Vec<String>,
    /// Decorator `--target RESOURCE[.GROUP]`.
    pub target: Option<String>,
    /// Map `--input RESOURCE[.GROUP]`.
    pub input: Option<String>,
    /// `--from-example FILE`.
    pub from_example: Option<PathBuf>,
    /// Write into a non-empty directory.
    pub force: bool,
}

/// Everything the generated files share, resolved and checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Controller kind.
    pub kind: ControllerKind,
    /// Hook language.
    pub lang: Lang,
    /// Hook form.
    pub hook: HookForm,
    /// Project name (a DNS label, from the directory).
    pub project: String,
    /// The controller definition's `metadata.name`.
    pub controller: String,
    /// The parent (decorator: the target) type.
    pub parent: TypeRef,
    /// The parent's CRD schema, when the parent is a new kind (`None`: an existing resource).
    pub schema: Option<Value>,
    /// Children (composite), attachments (decorator) or outputs (map).
    pub children: Vec<TypeRef>,
    /// The map's input type.
    pub input: Option<TypeRef>,
    /// The sample parent (decorator: target) object.
    pub sample: Value,
    /// The sample input object (map).
    pub sample_input: Option<Value>,
    /// The DNS prefix of the labels the project uses (`example.com/decorated`).
    pub label_domain: String,
}

/// The sample objects' namespace.
pub const SAMPLE_NAMESPACE: &str = "default";

impl Plan {
    /// Resolve and check `opts` (reads `--from-example`; writes nothing).
    pub fn resolve(opts: &Options) -> Result<Plan, ScaffoldError> {
        if opts.target.is_some() && opts.kind != ControllerKind::Decorator {
            return Err(ScaffoldError::FlagNotForKind {
                flag: "--target",
                applies_to: "decorator",
            });
        }
        if opts.input.is_some() && opts.kind != ControllerKind::Map {
            return Err(ScaffoldError::FlagNotForKind {
                flag: "--input",
                applies_to: "map",
            });
        }
        let dir_name = dir_name(&opts.dir);
        let project = naming::project_name(&dir_name);
        let example = match &opts.from_example {
            Some(path) => Some(read_example(path)?),
            None => None,
        };

        let target = match &opts.target {
            Some(t) => Some(naming::resolve_resource("--target", t)?),
            None => None,
        };
        let (parent, group) = match (&target, &example) {
            (Some(_), Some(_)) | (Some(_), None) if opts.parent.is_some() => {
                return Err(ScaffoldError::BadParent {
                    value: opts.parent.clone().unwrap_or_default(),
                    why: "with --target the decorator's parent is the target (an existing \
                          resource); drop --parent, or drop --target to decorate a new kind"
                        .into(),
                });
            }
            (Some(_), Some(_)) => {
                return Err(example_error(
                    opts,
                    "with --target the decorator's parent is an existing resource, not a new \
                     kind an example could describe; drop --from-example or --target",
                ));
            }
            (Some(t), None) => (t.clone(), "example.com".to_string()),
            (None, Some(ex)) => from_example(opts, ex)?,
            (None, None) => {
                let (kind, group) = match &opts.parent {
                    Some(p) => naming::parse_parent(p)?,
                    None => (
                        naming::kind_from_dir(&dir_name)
                            .ok_or_else(|| ScaffoldError::NoKindFromDir(dir_name.clone()))?,
                        "example.com".to_string(),
                    ),
                };
                let version = opts.version.clone().unwrap_or_else(|| "v1alpha1".into());
                naming::check_version(&version)?;
                let resource = naming::plural(&kind.to_ascii_lowercase());
                let t = TypeRef {
                    resource,
                    group: group.clone(),
                    version,
                    kind,
                };
                (t, group)
            }
        };

        let mut children = Vec::new();
        let given: Vec<&str> = if opts.children.is_empty() {
            vec!["configmaps"]
        } else {
            opts.children.iter().map(String::as_str).collect()
        };
        for c in given {
            let t = naming::resolve_resource("--child", c)?;
            if !children.contains(&t) {
                children.push(t);
            }
        }
        let input = match opts.kind {
            ControllerKind::Map => Some(naming::resolve_resource(
                "--input",
                opts.input.as_deref().unwrap_or("configmaps"),
            )?),
            _ => None,
        };

        let sample_name = "sample";
        let selector_label = format!("{group}/input-of");
        let decorate_label = format!("{group}/decorate");
        let (schema, sample) = match (&target, &example) {
            (Some(t), _) => {
                // An existing resource: no CRD; the sample is one of them, labelled so that the
                // decorator (which selects by that label) picks it up and nothing else.
                let mut obj = instantiate(t, sample_name, &sample_data());
                obj["metadata"]["namespace"] = json!(SAMPLE_NAMESPACE);
                obj["metadata"]["labels"] = json!({ decorate_label.clone(): "true" });
                (None, obj)
            }
            (None, ex) => {
                let mut obj = match ex {
                    Some(ex) => ex.clone(),
                    None => json!({
                        "apiVersion": parent.api_version(),
                        "kind": parent.kind,
                        "metadata": {"name": sample_name},
                        "spec": {"message": "Hello, World!"},
                    }),
                };
                if obj["metadata"]["namespace"].is_null() {
                    obj["metadata"]["namespace"] = json!(SAMPLE_NAMESPACE);
                }
                let name = obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or(sample_name)
                    .to_string();
                if opts.kind == ControllerKind::Map && obj["spec"].get("selector").is_none() {
                    obj["spec"]["selector"] =
                        json!({"matchLabels": { selector_label.clone(): name }});
                }
                let root = obj.as_object().cloned().unwrap_or_default();
                let mut s = schema::infer_root(&root, status_schema(opts.kind, &children))
                    .map_err(|m| example_error(opts, &m))?;
                if opts.kind == ControllerKind::Map {
                    // A LabelSelector: any label keys, so its labels are not pruned.
                    s["properties"]["spec"]["properties"]["selector"] = json!({
                        "type": "object",
                        "properties": {"matchLabels": {
                            "type": "object", "additionalProperties": {"type": "string"}
                        }}
                    });
                }
                (Some(s), obj)
            }
        };
        let sample_input = input.as_ref().map(|t| {
            let parent_name = sample["metadata"]["name"].as_str().unwrap_or(sample_name);
            let mut obj = instantiate(t, &format!("{parent_name}-input"), &sample_data());
            obj["metadata"]["namespace"] = sample["metadata"]["namespace"].clone();
            obj["metadata"]["labels"] = json!({ selector_label.clone(): parent_name });
            obj
        });
        Ok(Plan {
            kind: opts.kind,
            lang: opts.lang,
            hook: opts.hook,
            controller: format!("{project}-controller"),
            project,
            parent,
            schema,
            children,
            input,
            sample,
            sample_input,
            label_domain: group,
        })
    }

    /// The sample parent's name.
    pub fn sample_name(&self) -> &str {
        self.sample["metadata"]["name"].as_str().unwrap_or("sample")
    }

    /// The sample parent's string-valued spec fields (what `$data` is in the sample's hook
    /// call; the kits' `string_fields`).
    pub fn sample_data(&self) -> Value {
        string_fields(&self.sample["spec"])
    }

    /// The label the decorator adds to its targets.
    pub fn decorated_label(&self) -> String {
        format!("{}/decorated", self.label_domain)
    }

    /// The label the decorator selects its targets by (only for an existing resource).
    pub fn decorate_label(&self) -> Option<String> {
        self.schema
            .is_none()
            .then(|| format!("{}/decorate", self.label_domain))
    }

    /// Whether the hook writes the parent's status (not for a decorator of an existing
    /// resource, nor a map, whose status the engine writes).
    pub fn hook_writes_status(&self) -> bool {
        self.kind != ControllerKind::Map && self.schema.is_some()
    }
}

/// `{message: "Hello, World!"}`: the data of generated sample objects of existing resources.
fn sample_data() -> Value {
    json!({"message": "Hello, World!"})
}

/// The string-valued fields of a spec, as a map (non-strings and a missing spec: left out).
pub fn string_fields(spec: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = spec {
        for (k, v) in m {
            if let Value::String(s) = v {
                out.insert(k.clone(), json!(s));
            }
        }
    }
    Value::Object(out)
}

/// An object of type `t` named `name`, its body from the well-known table with `$name` and
/// `$data` replaced.
pub fn instantiate(t: &TypeRef, name: &str, data: &Value) -> Value {
    let body = t.builtin().map(|b| b.body()).unwrap_or_else(|| json!({}));
    let mut obj =
        json!({"apiVersion": t.api_version(), "kind": t.kind, "metadata": {"name": name}});
    if let (Value::Object(o), Value::Object(b)) = (&mut obj, substitute(&body, name, data)) {
        for (k, v) in b {
            if k == "metadata" {
                if let (Some(Value::Object(meta)), Value::Object(extra)) = (o.get_mut(&k), v) {
                    meta.extend(extra);
                }
            } else {
                o.insert(k, v);
            }
        }
    }
    obj
}

/// `body` with the markers `$name`, `$name-SUFFIX` and `$data` replaced.
pub fn substitute(body: &Value, name: &str, data: &Value) -> Value {
    match body {
        Value::String(s) if s == "$data" => data.clone(),
        Value::String(s) if s.starts_with("$name") => json!(format!("{name}{}", &s[5..])),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), substitute(v, name, data)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute(v, name, data)).collect()),
        v => v.clone(),
    }
}

/// The status schema of a new parent kind: what the hook reports (a count per child type,
/// `observedGeneration`), open to more (a hook that adds a status field is not pruned).
fn status_schema(kind: ControllerKind, children: &[TypeRef]) -> Value {
    let mut props = Map::new();
    props.insert("observedGeneration".into(), json!({"type": "integer"}));
    if kind != ControllerKind::Map {
        for c in children {
            props.insert(c.resource.clone(), json!({"type": "integer"}));
        }
    }
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": props})
}

/// The directory's own name (`.` and paths ending in `..` resolved through the filesystem).
fn dir_name(dir: &Path) -> String {
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(dir)
    };
    let abs = std::fs::canonicalize(&abs).unwrap_or(abs);
    abs.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn example_error(opts: &Options, message: &str) -> ScaffoldError {
    ScaffoldError::Example {
        path: opts.from_example.clone().unwrap_or_default(),
        message: message.to_string(),
    }
}

/// The example file as an object with `apiVersion`, `kind` and `spec`.
fn read_example(path: &Path) -> Result<Value, ScaffoldError> {
    let err = |message: String| ScaffoldError::Example {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    let v: Value = serde_saphyr::from_str(&text)
        .map_err(|e| err(format!("not a YAML or JSON object: {e}")))?;
    let Value::Object(m) = &v else {
        return Err(err(
            "not an object; expected one Kubernetes object (apiVersion, kind, metadata, spec)"
                .into(),
        ));
    };
    for field in ["apiVersion", "kind"] {
        if !m.get(field).is_some_and(Value::is_string) {
            return Err(err(format!(
                "{field}: missing or not a string; the example names its kind and apiVersion \
                 (e.g. apiVersion: demo.example.com/v1alpha1, kind: Website)"
            )));
        }
    }
    match m.get("metadata") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err(err("metadata: must be an object".into())),
    }
    if !m.get("spec").is_some_and(Value::is_object) {
        return Err(err(
            "spec: missing or not an object; the example's spec is what the schema is inferred from"
                .into(),
        ));
    }
    let mut v = v;
    if v["metadata"]["name"].is_null() {
        v["metadata"]["name"] = json!("sample");
    }
    if let Some(meta) = v["metadata"].as_object_mut() {
        // What the server sets: not the example's to say.
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(k);
        }
    }
    if let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    Ok(v)
}

/// Parent type and group from the example, checked against `--parent` and `--version` (which
/// must agree: the sample is the example, so the two cannot differ).
fn from_example(opts: &Options, ex: &Value) -> Result<(TypeRef, String), ScaffoldError> {
    let api_version = ex["apiVersion"].as_str().unwrap_or_default();
    let kind = ex["kind"].as_str().unwrap_or_default().to_string();
    let Some((group, version)) = api_version.split_once('/') else {
        return Err(example_error(
            opts,
            &format!(
                "apiVersion: {api_version:?} is a core API version; a new kind needs GROUP/VERSION, \
                 e.g. demo.example.com/v1alpha1"
            ),
        ));
    };
    naming::check_kind(&kind).map_err(|m| example_error(opts, &format!("kind: {m}")))?;
    naming::check_group(group).map_err(|m| example_error(opts, &format!("apiVersion: {m}")))?;
    naming::check_version(version).map_err(|_| {
        example_error(
            opts,
            &format!("apiVersion: {version:?} is not a version such as v1alpha1"),
        )
    })?;
    if let Some(p) = &opts.parent {
        let (pk, pg) = naming::parse_parent(p)?;
        if pk != kind || pg != group {
            return Err(example_error(
                opts,
                &format!(
                    "the example is a {kind}.{group}, --parent says {pk}.{pg}; they must agree \
                     (the example is the sample): drop --parent or edit the example"
                ),
            ));
        }
    }
    if let Some(v) = &opts.version
        && v != version
    {
        return Err(example_error(
            opts,
            &format!(
                "the example's apiVersion is {api_version}, --version says {v}; they must agree \
                 (the example is the sample): drop --version or edit the example"
            ),
        ));
    }
    let t = TypeRef {
        resource: naming::plural(&kind.to_ascii_lowercase()),
        group: group.to_string(),
        version: version.to_string(),
        kind,
    };
    Ok((t, group.to_string()))
}
