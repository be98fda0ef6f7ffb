//! The language-neutral files of a generated project: the CRD, the controller definition, the
//! sample objects, the project file and the first hook test case, all built from one [`Plan`]
//! so that they agree by construction (the test case's expected answer is what the generated
//! hooks compute for the sample, see [`expected_answer`]).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::error::ScaffoldError;
use super::naming::TypeRef;
use super::options::{ControllerKind, HookForm, Lang, Plan, WEBHOOK_PORT, instantiate};
use kubectl_meta_engine::hooks::CallInfo;
use kubectl_meta_engine::hooks::record::{Case, SecretsMode};

/// `apiVersion` of controller definitions.
const METACONTROLLER: &str = "metacontroller.k8s.io/v1alpha1";
/// The uid the test case gives the sample parent (any uid: the request is replayed as is).
const SAMPLE_UID: &str = "00000000-0000-4000-8000-000000000001";
/// The uid the test case gives the sample input (map); it is part of the map key.
const INPUT_UID: &str = "00000000-0000-4000-8000-000000000002";

/// YAML text of a value.
pub fn yaml(v: &Value) -> Result<String, ScaffoldError> {
    serde_saphyr::to_string(v).map_err(|e| ScaffoldError::Write {
        path: PathBuf::from("(YAML)"),
        source: std::io::Error::other(e.to_string()),
    })
}

/// The exec command of the hook, relative to the project directory (where the engine runs exec
/// hooks: the controller file's directory, whatever the current directory is).
pub fn exec_command(lang: Lang) -> Vec<&'static str> {
    match lang {
        Lang::Python => vec!["python3", "hook/hook.py"],
        Lang::Javascript => vec!["node", "hook/hook.js"],
        Lang::Go | Lang::Rust => vec!["./bin/hook"],
    }
}

/// The command that serves the hooks over HTTP on `address` (`8081` or `0.0.0.0:8080`).
pub fn server_command(lang: Lang, address: &str) -> String {
    format!("{} --serve {address}", exec_command(lang).join(" "))
}

/// The build step of compiled hooks (`sh -c` in the project directory), writing `bin/hook`.
pub fn build_command(lang: Lang) -> Option<&'static str> {
    match lang {
        Lang::Go => Some("cd hook && go build -o ../bin/hook ."),
        Lang::Rust => Some(
            "cargo build --release --manifest-path hook/Cargo.toml --target-dir \"${CARGO_TARGET_DIR:-target}\" && mkdir -p bin && cp \"${CARGO_TARGET_DIR:-target}/release/hook\" bin/hook",
        ),
        Lang::Python | Lang::Javascript => None,
    }
}

/// The parent's CRD (status subresource), if the parent is a new kind.
pub fn crd(plan: &Plan) -> Option<Value> {
    let schema = plan.schema.as_ref()?;
    let p = &plan.parent;
    Some(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", p.resource, p.group)},
        "spec": {
            "group": p.group,
            "scope": "Namespaced",
            "names": {
                "plural": p.resource,
                "singular": p.kind.to_ascii_lowercase(),
                "kind": p.kind,
            },
            "versions": [{
                "name": p.version,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }))
}

fn rule(t: &TypeRef) -> Value {
    json!({"apiVersion": t.api_version(), "resource": t.resource})
}

fn child_rule(t: &TypeRef) -> Value {
    let method = t.builtin().map_or("InPlace", |b| b.update);
    json!({"apiVersion": t.api_version(), "resource": t.resource,
           "updateStrategy": {"method": method}})
}

/// The hook as the definition declares it.
fn hook(plan: &Plan) -> Value {
    match plan.hook {
        HookForm::Exec => json!({"exec": {"command": exec_command(plan.lang)}}),
        HookForm::Webhook => json!({"webhook": {
            "url": format!("http://127.0.0.1:{WEBHOOK_PORT}/{}", plan.kind.hook())
        }}),
    }
}

/// The controller definition.
pub fn controller(plan: &Plan) -> Value {
    let children: Vec<Value> = plan.children.iter().map(child_rule).collect();
    let spec = match plan.kind {
        ControllerKind::Composite => json!({
            "generateSelector": true,
            "parentResource": rule(&plan.parent),
            "childResources": children,
            "hooks": {"sync": hook(plan)},
        }),
        ControllerKind::Decorator => {
            let mut target = rule(&plan.parent);
            if let Some(label) = plan.decorate_label() {
                target["labelSelector"] = json!({"matchLabels": {label: "true"}});
            }
            json!({
                "resources": [target],
                "attachments": children,
                "hooks": {"sync": hook(plan)},
            })
        }
        ControllerKind::Map => json!({
            "parentResource": rule(&plan.parent),
            "inputResources": plan.input.iter().map(rule).collect::<Vec<_>>(),
            "outputResources": children,
            "hooks": {"map": hook(plan)},
        }),
    };
    json!({
        "apiVersion": METACONTROLLER,
        "kind": plan.kind.definition_kind(),
        "metadata": {"name": plan.controller},
        "spec": spec,
    })
}

/// controller.yaml: the definition, with a comment on every explicit update strategy.
pub fn controller_yaml(plan: &Plan) -> Result<String, ScaffoldError> {
    let what = match plan.kind {
        ControllerKind::Composite => format!(
            "One {} parent owns its children; the hook answers them",
            plan.parent.kind
        ),
        ControllerKind::Decorator => format!(
            "Every {} target gets a label and attachments from the hook",
            plan.parent.kind
        ),
        ControllerKind::Map => format!(
            "Every input a {} selects is mapped to outputs by the hook",
            plan.parent.kind
        ),
    };
    let how = match plan.hook {
        HookForm::Exec => {
            "the exec hook runs in this file's directory, whatever the current directory"
        }
        HookForm::Webhook => "the webhook is the server kubectl-meta.yaml starts (hooks[].server)",
    };
    let mut out = format!("# {}: {what} ({how}).\n", plan.controller);
    for line in yaml(&controller(plan))?.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("updateStrategy:") {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(&format!(
                "{indent}# Explicit: without it Metacontroller's default would be OnDelete (an existing\n\
                 {indent}# object is never updated after a hook change).\n"
            ));
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// sample.yaml: the sample parent (decorator: target), and the sample input of a map.
pub fn sample_yaml(plan: &Plan) -> Result<String, ScaffoldError> {
    let mut out =
        String::from("# A sample object the controller acts on (kubectl meta dev applies it).\n");
    out.push_str(&yaml(&plan.sample)?);
    if let Some(input) = &plan.sample_input {
        out.push_str(
            "---\n# An input the sample parent selects (spec.selector): mapped to outputs.\n",
        );
        out.push_str(&yaml(input)?);
    }
    Ok(out)
}

/// kubectl-meta.yaml: the project file.
pub fn project_file(plan: &Plan) -> String {
    let mut apply = String::new();
    if plan.schema.is_some() {
        apply.push_str("  - crd.yaml                      # the parent's CRD\n");
    }
    apply.push_str("  - sample.yaml                   # a sample to act on\n");
    let mut hooks = String::new();
    let build = build_command(plan.lang);
    if build.is_some() || plan.hook == HookForm::Webhook {
        hooks.push_str(&format!("hooks:\n  - name: {}\n", plan.project));
        if let Some(b) = build {
            hooks.push_str(&format!(
                "    build: {}   # before the first call, again on every change\n",
                yaml_scalar(b)
            ));
        }
        if plan.hook == HookForm::Webhook {
            hooks.push_str(&format!(
                "    server: {}   # started, restarted on change\n    url: http://127.0.0.1:{WEBHOOK_PORT}\n    ready: http://127.0.0.1:{WEBHOOK_PORT}/healthz\n",
                server_command(plan.lang, &WEBHOOK_PORT.to_string())
            ));
        }
        match plan.lang {
            Lang::Go => hooks.push_str("    watch: [hook]\n"),
            Lang::Rust => hooks.push_str("    watch: [hook/src, hook/Cargo.toml]\n"),
            _ => {}
        }
    }
    format!(
        "# kubectl-meta project file; schema: docs/project-file.md (kubectl-meta's docs)\n\
         apiVersion: kubectl-meta.dev/v1alpha1\n\
         kind: Project\n\
         name: {}\n\
         controllers:\n  - controller.yaml\n\
         apply:                            # created before the controllers start, in order\n\
         {apply}\
         {hooks}\
         tests: [hook-tests]               # `kubectl meta test` runs these\n\
         record: hook-tests                # where `kubectl meta dev --record` writes\n\
         target:\n  sandbox: {{}}                     # an in-process sandbox; a real cluster is always explicit (context: NAME)\n",
        plan.project
    )
}

/// A YAML double-quoted scalar.
fn yaml_scalar(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The request the engine sends for the sample when nothing has been created yet.
fn request(plan: &Plan) -> (Value, Option<String>) {
    let mut parent = plan.sample.clone();
    parent["metadata"]["uid"] = json!(SAMPLE_UID);
    parent["metadata"]["generation"] = json!(1);
    let empty: serde_json::Map<String, Value> = plan
        .children
        .iter()
        .map(|t| (t.child_key(), json!({})))
        .collect();
    let controller = controller(plan);
    match plan.kind {
        ControllerKind::Composite => (
            json!({"controller": controller, "parent": parent, "children": empty,
                   "related": {}, "finalizing": false}),
            None,
        ),
        ControllerKind::Decorator => (
            json!({"controller": controller, "object": parent, "attachments": empty,
                   "related": {}, "finalizing": false}),
            None,
        ),
        ControllerKind::Map => {
            let mut input = plan.sample_input.clone().unwrap_or_default();
            input["metadata"]["namespace"] = parent["metadata"]["namespace"].clone();
            input["metadata"]["uid"] = json!(INPUT_UID);
            let key = kubectl_meta_engine::plan::map_plan::map_key(&input);
            (
                json!({"controller": controller, "parent": parent, "mapKey": key,
                       "input": input, "outputs": empty}),
                Some(key),
            )
        }
    }
}

/// What the generated hook answers for the sample's first request: the same rules as the hook
/// templates (one object per child type from the well-known bodies, named as
/// [`super::code::name_marker`] says, `$data` the sample's string fields; status counts 0).
pub fn expected_answer(plan: &Plan) -> Value {
    let name = plan.sample_name().to_string();
    let data = plan.sample_data();
    let objects = |name: &str| -> Vec<Value> {
        plan.children
            .iter()
            .map(|t| {
                let n = super::options::substitute(
                    &json!(super::code::name_marker(plan, t)),
                    name,
                    &data,
                );
                instantiate(t, n.as_str().unwrap_or(name), &data)
            })
            .collect()
    };
    let counts: serde_json::Map<String, Value> = plan
        .children
        .iter()
        .map(|t| (t.resource.clone(), json!(0)))
        .collect();
    let status = if plan.hook_writes_status() {
        Value::Object(counts)
    } else {
        Value::Null
    };
    match plan.kind {
        ControllerKind::Composite => json!({"status": status, "children": objects(&name)}),
        ControllerKind::Decorator => json!({
            "labels": {plan.decorated_label(): "true"},
            "attachments": objects(&name),
            "status": status,
        }),
        ControllerKind::Map => {
            let input = plan
                .sample_input
                .as_ref()
                .and_then(|i| i["metadata"]["name"].as_str())
                .unwrap_or("input");
            json!({"outputs": objects(&format!("{input}-{name}"))})
        }
    }
}

/// The first hook test case: its path under `hook-tests/` and its text.
pub fn test_case(plan: &Plan) -> Result<(PathBuf, String), ScaffoldError> {
    let (request, map_key) = request(plan);
    let ns = plan.sample["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let info = CallInfo {
        hook: plan.kind.hook().into(),
        controller_kind: plan.kind.definition_kind().into(),
        controller: plan.controller.clone(),
        parent: format!("{ns}/{}", plan.sample_name()),
        map_key,
    };
    let case = Case::from_exchange(
        &info,
        &request,
        &expected_answer(plan),
        SecretsMode::Redacted,
    );
    let path = case.path_in(std::path::Path::new("hook-tests"));
    let text = case
        .to_text("written by kubectl meta init: the sample's first request, nothing created yet")
        .map_err(|e| ScaffoldError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
    Ok((path, text))
}
