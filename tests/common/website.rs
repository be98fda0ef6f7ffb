//! The controller a new user writes first (issue 37): a namespaced `Website` that owns a
//! ConfigMap and a Deployment (`apps/v1`), its sync hook in Python (exec), as the files of a
//! project directory: `00-crd.yaml`, `10-controller.yaml`, `20-sample.yaml`, `hook.py`.
#![allow(dead_code)]

use std::path::Path;

/// The Website CRD (`websites.demo.example.com`, v1alpha1, status subresource).
pub const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: websites.demo.example.com}
spec:
  group: demo.example.com
  names: {kind: Website, plural: websites, singular: website}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              message: {type: string}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
";

/// `default/mysite`, 3 replicas.
pub const SAMPLE: &str = "apiVersion: demo.example.com/v1alpha1
kind: Website
metadata: {name: mysite, namespace: default}
spec: {replicas: 3, message: hello}
";

/// The controller `website-controller`: both children `InPlace` unless `strategy` names
/// another (`None`: no updateStrategy, Metacontroller's OnDelete).
pub fn controller(strategy: Option<&str>) -> String {
    let s = strategy
        .map(|m| format!("\n    updateStrategy: {{method: {m}}}"))
        .unwrap_or_default();
    format!(
        "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: website-controller}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: demo.example.com/v1alpha1, resource: websites}}
  childResources:
  - apiVersion: v1
    resource: configmaps{s}
  - apiVersion: apps/v1
    resource: deployments{s}
  hooks:
    sync:
      exec:
        command: [python3, hook.py]
"
    )
}

/// The sync hook: a ConfigMap with `spec.message`, a Deployment of `spec.replicas` nginx
/// Pods whose template carries `annotations` (a JSON object); the status says what it serves
/// (no `Synced` condition: the hook writes none).
pub fn hook(annotations: &str) -> String {
    format!(
        r#"import json, sys
req = json.load(sys.stdin)
p = req["parent"]
name, ns = p["metadata"]["name"], p["metadata"].get("namespace", "default")
spec = p.get("spec", {{}})
children = [
  {{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": name, "namespace": ns}},
   "data": {{"index.html": spec.get("message", "")}}}},
  {{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": name, "namespace": ns}},
   "spec": {{"replicas": spec.get("replicas", 1),
            "selector": {{"matchLabels": {{"app": name}}}},
            "template": {{"metadata": {{"labels": {{"app": name}}, "annotations": {annotations}}},
                         "spec": {{"containers": [{{"name": "web", "image": "nginx"}}]}}}}}}}},
]
json.dump({{"status": {{"serving": spec.get("message", "")}}, "children": children}}, sys.stdout)
"#
    )
}

/// Write the project into `dir` (children `InPlace`, no pod-template annotation).
pub fn write(dir: &Path) {
    write_with(dir, Some("InPlace"), "{}");
}

/// Write the project into `dir` with the children's update strategy and the hook's
/// pod-template annotations.
pub fn write_with(dir: &Path, strategy: Option<&str>, annotations: &str) {
    std::fs::write(dir.join("00-crd.yaml"), CRD).unwrap();
    std::fs::write(dir.join("10-controller.yaml"), controller(strategy)).unwrap();
    std::fs::write(dir.join("20-sample.yaml"), SAMPLE).unwrap();
    std::fs::write(dir.join("hook.py"), hook(annotations)).unwrap();
}
