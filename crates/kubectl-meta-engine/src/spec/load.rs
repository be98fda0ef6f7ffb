//! Loading controller definitions from files and directories.
//!
//! A path is a file or a directory (its `*.yaml`, `*.yml` and `*.json` files, sorted, not
//! recursive, like `kubectl apply -f DIR`). A file holds YAML documents separated by `---`
//! (YAML 1.2: `yes`/`on` stay strings) or, for `*.json`, one or more JSON values; a `List`
//! (`{"kind": "List", "items": [...]}`) is expanded to its items and empty documents are
//! skipped. Controller documents become [`ControllerDef`]s (validated by [`parse_controller`]);
//! every other document (CRDs, namespaces, sample parents) is kept in file order for
//! `--apply`.

// SpecError carries the Source of the offending document so every message can say where; it
// is returned once per run at start-up, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::types::{
    COMPOSITE_KIND, CONTROLLER_KINDS, Controller, ControllerDef, DECORATOR_KIND, GROUP, MAP_KIND,
    Source,
};
use super::{Problem, SpecError, validate};

/// A document that is not a controller definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it came from.
    pub source: Source,
    /// The document.
    pub value: Value,
}

/// Everything read from the given paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The controller definitions, in file order.
    pub controllers: Vec<ControllerDef>,
    /// The other documents, in file order.
    pub others: Vec<Document>,
}

/// Read controller definitions (and the other documents) from files and directories.
///
/// Fails on the first unreadable file, syntax error or invalid definition (reporting all of
/// that definition's problems), on two definitions of the same kind with the same name, and
/// when the paths hold no controller definition at all.
pub fn load_paths(paths: &[PathBuf]) -> Result<Loaded, SpecError> {
    load_paths_with(paths, false)
}

/// As [`load_paths`]; with `recursive`, directories are read with their subdirectories
/// (kubectl's `-R`).
pub fn load_paths_with(paths: &[PathBuf], recursive: bool) -> Result<Loaded, SpecError> {
    let loaded = load_documents_with(paths, recursive)?;
    if loaded.controllers.is_empty() {
        let found: BTreeSet<String> = loaded
            .others
            .iter()
            .filter_map(|d| d.value.get("kind").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        return Err(SpecError::NoControllers {
            paths: paths.to_vec(),
            found: found.into_iter().collect(),
        });
    }
    Ok(loaded)
}

/// As [`load_paths`], but paths without any controller definition are fine (for
/// `--from-cluster`, where the files only carry documents to `--apply`).
pub fn load_documents(paths: &[PathBuf]) -> Result<Loaded, SpecError> {
    load_documents_with(paths, false)
}

/// As [`load_documents`]; with `recursive`, directories are read with their subdirectories.
pub fn load_documents_with(paths: &[PathBuf], recursive: bool) -> Result<Loaded, SpecError> {
    let mut loaded = Loaded::default();
    let mut first_seen: BTreeMap<(&'static str, String), Source> = BTreeMap::new();
    for file in expand_paths(paths, recursive)? {
        for doc in read_documents(&file)? {
            if !is_controller_document(&doc)? {
                loaded.others.push(doc);
                continue;
            }
            let def = parse_controller(&doc.value, doc.source)?;
            let key = (def.kind(), def.name().to_string());
            if let Some(first) = first_seen.get(&key) {
                return Err(SpecError::Duplicate {
                    kind: def.kind(),
                    name: key.1,
                    first: first.clone(),
                    second: def.source().clone(),
                });
            }
            first_seen.insert(key, def.source().clone());
            loaded.controllers.push(def);
        }
    }
    Ok(loaded)
}

/// Parse and validate one controller definition (a CompositeController, DecoratorController or
/// MapController document). Also used for objects read from the cluster: `status` and server
/// metadata are ignored. All problems of the document are reported together.
pub fn parse_controller(value: &Value, source: Source) -> Result<ControllerDef, SpecError> {
    let Some(doc) = value.as_object() else {
        return Err(SpecError::Document {
            at: source,
            message: format!(
                "a controller definition must be an object, found {}",
                type_name(value)
            ),
        });
    };
    let kind_field = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let Some(kind) = CONTROLLER_KINDS.into_iter().find(|k| *k == kind_field) else {
        return Err(SpecError::Document {
            at: source,
            message: format!(
                "kind {kind_field:?} is not a controller kind; use CompositeController, DecoratorController or MapController"
            ),
        });
    };
    let mut problems = validate::envelope(doc);
    let name = doc
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let spec = doc.get("spec").filter(|s| !s.is_null());
    let def = match kind {
        COMPOSITE_KIND => checked(spec, validate::composite, &mut problems)
            .map(|s| ControllerDef::Composite(controller(&name, s, value, &source))),
        DECORATOR_KIND => checked(spec, validate::decorator, &mut problems)
            .map(|s| ControllerDef::Decorator(controller(&name, s, value, &source))),
        MAP_KIND => checked(spec, validate::map, &mut problems)
            .map(|s| ControllerDef::Map(controller(&name, s, value, &source))),
        _ => None,
    };
    match def {
        Some(def) if problems.is_empty() => Ok(def),
        _ => Err(SpecError::Invalid {
            at: source,
            kind,
            name,
            problems,
        }),
    }
}

fn controller<S>(name: &str, spec: S, raw: &Value, source: &Source) -> Controller<S> {
    Controller {
        name: name.to_string(),
        spec,
        raw: raw.clone(),
        source: source.clone(),
    }
}

/// Deserialize and check a spec, adding its problems to `problems`.
fn checked<S: DeserializeOwned>(
    spec: Option<&Value>,
    check: fn(&S) -> Vec<Problem>,
    problems: &mut Vec<Problem>,
) -> Option<S> {
    let Some(spec) = spec else {
        problems.push(Problem {
            field: "spec".into(),
            message: "is required; see examples/ for complete definitions".into(),
        });
        return None;
    };
    match validate::typed_spec::<S>(spec) {
        Ok(s) => {
            problems.extend(check(&s));
            Some(s)
        }
        Err(p) => {
            problems.push(p);
            None
        }
    }
}

/// Whether a document is a controller definition; errors for documents that are not
/// Kubernetes objects, and for unknown kinds of the controller API group.
fn is_controller_document(doc: &Document) -> Result<bool, SpecError> {
    let err = |message: String| SpecError::Document {
        at: doc.source.clone(),
        message,
    };
    let Some(obj) = doc.value.as_object() else {
        return Err(err(format!(
            "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
            type_name(&doc.value)
        )));
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str);
    let kind = obj.get("kind").and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        let missing = match (api_version, kind) {
            (None, None) => "apiVersion and kind",
            (None, Some(_)) => "apiVersion",
            _ => "kind",
        };
        return Err(err(format!(
            "the document has no {missing} (as a string); every document must be a Kubernetes object, and controller definitions start with apiVersion: metacontroller.k8s.io/v1alpha1 and kind: CompositeController"
        )));
    };
    if CONTROLLER_KINDS.contains(&kind) {
        return Ok(true);
    }
    let group = api_version.split_once('/').map(|(g, _)| g);
    if group == Some(GROUP) && kind != "ControllerRevision" {
        return Err(err(format!(
            "kind {kind:?} is not a controller kind of {GROUP}; use CompositeController, DecoratorController or MapController"
        )));
    }
    Ok(false)
}

/// The files named by `paths`: files as given, directories expanded (with their
/// subdirectories when `recursive`, in path order); each file once.
fn expand_paths(paths: &[PathBuf], recursive: bool) -> Result<Vec<PathBuf>, SpecError> {
    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    for path in paths {
        let meta = fs::metadata(path).map_err(io_error(path))?;
        let mut batch = Vec::new();
        if meta.is_dir() {
            manifest_files(path, recursive, &mut batch)?;
            if batch.is_empty() {
                return Err(SpecError::EmptyDirectory { path: path.clone() });
            }
            batch.sort();
        } else {
            batch.push(path.clone());
        }
        for file in batch {
            let identity = fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if seen.insert(identity) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SpecError + use<> {
    let path = path.to_path_buf();
    move |error| SpecError::Io { path, error }
}

/// The `.yaml`, `.yml` and `.json` files in `dir` (and below, when `recursive`).
fn manifest_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), SpecError> {
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry_path = entry.map_err(io_error(dir))?.path();
        if entry_path.is_dir() {
            if recursive {
                manifest_files(&entry_path, true, out)?;
            }
            continue;
        }
        let wanted = entry_path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if wanted && entry_path.is_file() {
            out.push(entry_path);
        }
    }
    Ok(())
}

/// The non-empty documents of a file, Lists expanded.
fn read_documents(path: &Path) -> Result<Vec<Document>, SpecError> {
    let text = fs::read_to_string(path).map_err(|error| SpecError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let is_json = path.extension().is_some_and(|e| e == "json");
    let values = if is_json {
        parse_json(path, text)?
    } else {
        parse_yaml(path, text)?
    };
    let mut docs = Vec::new();
    for (index, (value, line)) in values.into_iter().enumerate() {
        let source = Source::file(path, index + 1, line);
        match list_items(&value) {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    docs.push(Document {
                        source: Source {
                            item: Some(i + 1),
                            line: None,
                            ..source.clone()
                        },
                        value: item.clone(),
                    });
                }
            }
            None => docs.push(Document { source, value }),
        }
    }
    Ok(docs)
}

/// The items of a List document (`kind: List`, `kind: FooList`, or no kind), if it is one.
fn list_items(value: &Value) -> Option<&Vec<Value>> {
    let items = value.get("items")?.as_array()?;
    match value.get("kind") {
        None => Some(items),
        Some(Value::String(k)) if k.ends_with("List") => Some(items),
        _ => None,
    }
}

/// YAML documents with the line each starts on; empty documents are skipped.
fn parse_yaml(path: &Path, text: &str) -> Result<Vec<(Value, Option<usize>)>, SpecError> {
    let options = serde_saphyr::options! { strict_booleans: true };
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_str_multiple_with_options(text, options).map_err(|e| {
            let location = e.location();
            let name = path.display().to_string();
            SpecError::Syntax {
                path: path.to_path_buf(),
                format: "YAML",
                line: location.map(|l| to_usize(l.line())),
                column: location.map(|l| to_usize(l.column())),
                message: strip_error_prefix(e.render_with_options(
                    serde_saphyr::render_options! { source_name: Some(name.as_str()) },
                )),
            }
        })?;
    Ok(docs
        .into_iter()
        .filter(|d| !d.value.is_null())
        .map(|d| {
            let line = to_usize(d.referenced.line());
            (d.value, (line > 0).then_some(line))
        })
        .collect())
}

/// JSON values (one or more, concatenated) with the line each starts on; `null` is skipped.
fn parse_json(path: &Path, text: &str) -> Result<Vec<(Value, Option<usize>)>, SpecError> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut values = Vec::new();
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let value = next.map_err(|e| SpecError::Syntax {
            path: path.to_path_buf(),
            format: "JSON",
            line: Some(e.line()),
            column: Some(e.column()),
            message: e.to_string(),
        })?;
        if value.is_null() {
            continue;
        }
        // The value starts at the first non-blank character after the previous one.
        let skipped = text[start..].len() - text[start..].trim_start().len();
        let line = text[..start + skipped].matches('\n').count() + 1;
        values.push((value, Some(line)));
    }
    Ok(values)
}

/// serde-saphyr starts its messages with `error: `; the caller already says it is an error.
fn strip_error_prefix(message: String) -> String {
    match message.strip_prefix("error: ") {
        Some(rest) => rest.to_string(),
        None => message,
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::spec::types::{HookVersion, Origin, UpdateMethod};

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: hellos.example.com
";

    fn controller_yaml(kind: &str, name: &str) -> String {
        match kind {
            "CompositeController" => format!(
                "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: {name}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.com/v1, resource: hellos}}
  childResources:
  - {{apiVersion: v1, resource: pods, updateStrategy: {{method: Recreate}}}}
  hooks:
    sync: {{exec: {{command: [python3, sync.py]}}}}
"
            ),
            _ => format!(
                "apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {{name: {name}}}
spec:
  resources: [{{apiVersion: v1, resource: namespaces}}]
  hooks: {{sync: {{webhook: {{url: 'http://127.0.0.1:9000/sync'}}}}}}
"
            ),
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    fn load(paths: &[PathBuf]) -> Loaded {
        load_paths(paths).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn multi_document_yaml_keeps_order_skips_empty_documents_and_numbers_them() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "---\n# leading comment\n---\n{CRD}---\n---\n{}---\napiVersion: example.com/v1\nkind: Hello\nmetadata: {{name: world, labels: {{enabled: on, answer: yes}}}}\nspec: {{replicas: 3, ratio: 3.0}}\n",
            controller_yaml("CompositeController", "hello")
        );
        let file = write(dir.path(), "all.yaml", &text);
        let loaded = load(std::slice::from_ref(&file));
        assert_eq!(loaded.controllers.len(), 1);
        let def = &loaded.controllers[0];
        assert_eq!((def.kind(), def.name()), ("CompositeController", "hello"));
        assert_eq!(def.source(), &Source::file(&file, 2, Some(10)));
        assert_eq!(def.base_dir(), Some(dir.path()));
        let ControllerDef::Composite(c) = def else {
            panic!("not composite");
        };
        assert_eq!(c.spec.generate_selector, Some(true));
        assert_eq!(c.spec.child_resources[0].method(), UpdateMethod::Recreate);
        assert_eq!(
            c.raw["spec"]["hooks"]["sync"]["exec"]["command"],
            json!(["python3", "sync.py"])
        );

        let kinds: Vec<&str> = loaded
            .others
            .iter()
            .map(|d| d.value["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["CustomResourceDefinition", "Hello"]);
        assert_eq!(loaded.others[0].source, Source::file(&file, 1, Some(4)));
        assert_eq!(loaded.others[1].source.document, 3);
        assert_eq!(
            loaded.others[1].source.to_string(),
            format!("{}, document 3 (line 22)", file.display())
        );
        // YAML 1.2: `on` and `yes` are strings; integers and floats stay distinct.
        let hello = &loaded.others[1].value;
        assert_eq!(
            hello["metadata"]["labels"],
            json!({"enabled": "on", "answer": "yes"})
        );
        assert!(hello["spec"]["replicas"].is_i64());
        assert!(hello["spec"]["ratio"].is_f64());
    }

    #[test]
    fn json_files_single_concatenated_and_lists() {
        let dir = tempfile::tempdir().unwrap();
        let cc: Value =
            serde_saphyr::from_str(&controller_yaml("CompositeController", "from-json")).unwrap();
        let single = write(
            dir.path(),
            "one.json",
            &format!("\u{feff}{}", serde_json::to_string_pretty(&cc).unwrap()),
        );
        let loaded = load(std::slice::from_ref(&single));
        assert_eq!(loaded.controllers[0].name(), "from-json");
        assert_eq!(loaded.controllers[0].raw(), &cc);
        assert_eq!(
            loaded.controllers[0].source(),
            &Source::file(&single, 1, Some(1))
        );

        let dc: Value =
            serde_saphyr::from_str(&controller_yaml("DecoratorController", "deco")).unwrap();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
            dc,
        ]});
        let text = format!(
            "{}\n\n  {}\nnull\n",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first"}}),
            list
        );
        let file = write(dir.path(), "list.json", &text);
        let loaded = load(std::slice::from_ref(&file));
        assert_eq!(loaded.controllers.len(), 1);
        let source = loaded.controllers[0].source();
        assert_eq!((source.document, source.item), (2, Some(2)));
        assert_eq!(
            source.to_string(),
            format!("{}, document 2, item 2", file.display())
        );
        let names: Vec<&str> = loaded
            .others
            .iter()
            .map(|d| d.value["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["first", "demo"]);
        assert_eq!(loaded.others[0].source.line, Some(1));
        assert_eq!(loaded.others[1].source.item, Some(1));

        // A YAML List (as `kubectl get -o yaml` prints) and an untyped `items` list expand too.
        let yaml = write(
            dir.path(),
            "list.yaml",
            &format!(
                "kind: CompositeControllerList\napiVersion: metacontroller.k8s.io/v1alpha1\nitems:\n- {}\n---\nitems: []\n",
                serde_json::to_string(&cc).unwrap()
            ),
        );
        let loaded = load(&[yaml]);
        assert_eq!(loaded.controllers[0].source().item, Some(1));
        assert!(loaded.others.is_empty());
    }

    #[test]
    fn directories_are_read_sorted_and_not_recursively() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "b-controller.yml",
            &controller_yaml("CompositeController", "b"),
        );
        write(dir.path(), "a-crd.yaml", CRD);
        write(
            dir.path(),
            "c.json",
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}"#,
        );
        write(dir.path(), "README.md", "# not yaml: [");
        write(dir.path(), "hook.py", "print('x')");
        fs::create_dir(dir.path().join("nested")).unwrap();
        write(
            &dir.path().join("nested"),
            "d.yaml",
            &controller_yaml("CompositeController", "nested"),
        );
        let loaded = load(&[dir.path().to_path_buf()]);
        assert_eq!(loaded.controllers.len(), 1);
        assert_eq!(loaded.controllers[0].name(), "b");
        assert_eq!(loaded.controllers[0].base_dir(), Some(dir.path()));
        let files: Vec<PathBuf> = loaded
            .others
            .iter()
            .filter_map(|d| d.source.path.clone())
            .collect();
        assert_eq!(
            files,
            [dir.path().join("a-crd.yaml"), dir.path().join("c.json")]
        );

        // A file given again (directly or through its directory) is read once.
        let again = load(&[
            dir.path().to_path_buf(),
            dir.path().join("b-controller.yml"),
        ]);
        assert_eq!(again, loaded);

        let empty = tempfile::tempdir().unwrap();
        write(empty.path(), "notes.txt", "x");
        let err = load_paths(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(matches!(err, SpecError::EmptyDirectory { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("has no *.yaml, *.yml or *.json files"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "bad.yaml",
            &format!("{CRD}---\nkind: X\n  apiVersion: v1\n"),
        );
        let err = load_paths(std::slice::from_ref(&file)).unwrap_err();
        let SpecError::Syntax {
            line,
            column,
            format,
            ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*format, *line, *column), ("YAML", Some(7), Some(13)));
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "{} is not valid YAML: line 7 column 13:",
                file.display()
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("--> {}:7:13", file.display())),
            "{msg}"
        );

        let file = write(dir.path(), "dup.yaml", "a: 1\na: 2\n");
        let err = load_paths(&[file]).unwrap_err().to_string();
        assert!(
            err.contains("line 2 column 1: duplicate mapping key"),
            "{err}"
        );

        let file = write(
            dir.path(),
            "bad.json",
            "{\"kind\": \"X\",\n \"apiVersion\": }",
        );
        let err = load_paths(std::slice::from_ref(&file)).unwrap_err();
        let SpecError::Syntax {
            line,
            column,
            format,
            ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*format, *line, *column), ("JSON", Some(2), Some(16)));
        assert!(
            err.to_string()
                .contains("bad.json is not valid JSON: expected value at line 2 column 16"),
            "{err}"
        );
    }

    #[test]
    fn unreadable_paths_are_reported_with_their_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.yaml");
        let err = load_paths(std::slice::from_ref(&missing)).unwrap_err();
        assert!(matches!(err, SpecError::Io { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot read {}: ", missing.display())),
            "{err}"
        );
        let binary = write(dir.path(), "bin.yaml", "");
        fs::write(&binary, [0xff, 0xfe, 0x00, 0x41]).unwrap();
        let err = load_paths(&[binary]).unwrap_err();
        assert!(
            matches!(err, SpecError::Io { .. } | SpecError::Syntax { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn documents_that_are_not_objects_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "nokind.yaml",
                "metadata: {name: x}\n",
                "document 1 (line 1): the document has no apiVersion and kind",
            ),
            (
                "noversion.yaml",
                "kind: Namespace\n",
                "the document has no apiVersion",
            ),
            ("list.yaml", "- a\n- b\n", "found a list"),
            ("scalar.yaml", "---\nhello\n", "found a string"),
            (
                "unknown.yaml",
                "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeControler\n",
                "kind \"CompositeControler\" is not a controller kind of metacontroller.k8s.io",
            ),
        ];
        for (name, text, needle) in cases {
            let file = write(dir.path(), name, text);
            let err = load_paths(std::slice::from_ref(&file)).unwrap_err();
            assert!(matches!(err, SpecError::Document { .. }), "{name}: {err:?}");
            let msg = err.to_string();
            assert!(
                msg.starts_with(&file.display().to_string()) && msg.contains(needle),
                "{name}: {msg}"
            );
        }
        // A controller kind under a wrong group is parsed, and its apiVersion reported.
        let file = write(
            dir.path(),
            "group.yaml",
            &controller_yaml("CompositeController", "g")
                .replace("metacontroller.k8s.io", "metacontroller.io"),
        );
        let err = load_paths(&[file]).unwrap_err();
        let SpecError::Invalid { problems, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(problems[0].field, "apiVersion");
        // ControllerRevisions of the group are ordinary documents.
        let file = write(
            dir.path(),
            "rev.yaml",
            &format!(
                "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: ControllerRevision\nmetadata: {{name: r}}\n---\n{}",
                controller_yaml("CompositeController", "c")
            ),
        );
        assert_eq!(load(&[file]).others.len(), 1);
    }

    #[test]
    fn invalid_controllers_report_source_and_all_problems() {
        let dir = tempfile::tempdir().unwrap();
        let text = controller_yaml("CompositeController", "broken")
            .replace("method: Recreate", "method: Rolling")
            .replace("apiVersion: example.com/v1", "apiVersion: example.com");
        let file = write(dir.path(), "broken.yaml", &format!("{CRD}---\n{text}"));
        let err = load_paths(std::slice::from_ref(&file)).unwrap_err();
        let SpecError::Invalid {
            at,
            kind,
            name,
            problems,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(
            (at.document, at.line, *kind, name.as_str()),
            (2, Some(6), "CompositeController", "broken")
        );
        // A type error stops the typed checks, but not the envelope checks.
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].field,
            "spec.childResources[0].updateStrategy.method"
        );
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{}, document 2 (line 6): CompositeController \"broken\" is invalid:\n  - spec.childResources[0].updateStrategy.method: unknown variant `Rolling`", file.display())), "{msg}");
    }

    #[test]
    fn duplicate_names_of_one_kind_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            dir.path(),
            "a.yaml",
            &controller_yaml("CompositeController", "same"),
        );
        let b = write(
            dir.path(),
            "b.yaml",
            &format!(
                "{}---\n{}",
                controller_yaml("DecoratorController", "same"),
                controller_yaml("CompositeController", "same")
            ),
        );
        let err = load_paths(&[a.clone(), b.clone()]).unwrap_err();
        let SpecError::Duplicate {
            kind,
            name,
            first,
            second,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*kind, name.as_str()), ("CompositeController", "same"));
        assert_eq!(first.path.as_deref(), Some(a.as_path()));
        assert_eq!(
            (second.path.as_deref(), second.document),
            (Some(b.as_path()), 2)
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("CompositeController \"same\" is defined twice: in {}, document 1 (line 1) and in {}, document 2", a.display(), b.display())), "{msg}");
        // The same name for different kinds is fine.
        let c = write(
            dir.path(),
            "c.yaml",
            &controller_yaml("DecoratorController", "same"),
        );
        assert_eq!(load(&[a, c]).controllers.len(), 2);
    }

    #[test]
    fn no_controller_at_all_says_what_was_found() {
        let dir = tempfile::tempdir().unwrap();
        let crd = write(
            dir.path(),
            "crd.yaml",
            &format!(
                "{CRD}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: n}}\n---\n{CRD}"
            ),
        );
        let err = load_paths(std::slice::from_ref(&crd)).unwrap_err();
        let SpecError::NoControllers { paths, found } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(paths, std::slice::from_ref(&crd));
        assert_eq!(found, &["CustomResourceDefinition", "Namespace"]);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "in {}; found only CustomResourceDefinition, Namespace",
                crd.display()
            )),
            "{msg}"
        );
        let empty = write(dir.path(), "empty.yaml", "# nothing here\n---\n");
        let err = load_paths(&[empty]).unwrap_err().to_string();
        assert!(err.ends_with("the files hold no documents"), "{err}");
    }

    #[test]
    fn catset_example_from_the_reference_parses_unchanged() {
        let text = "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: catsets
    revisionHistory:
      fieldPaths:
      - spec.template
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - type: Ready
          status: \"True\"
  - apiVersion: v1
    resource: persistentvolumeclaims
  hooks:
    sync:
      webhook:
        url: http://catset-controller.metacontroller/sync
        timeout: 10s
";
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "catset.yaml", text);
        let loaded = load(&[file]);
        let ControllerDef::Composite(c) = &loaded.controllers[0] else {
            panic!("not composite");
        };
        assert_eq!(c.name, "catset-controller");
        let parent = &c.spec.parent_resource;
        assert_eq!(
            (parent.api_version.as_str(), parent.resource.as_str()),
            ("ctl.enisoc.com/v1", "catsets")
        );
        assert_eq!(
            parent.revision_history.as_ref().unwrap().field_paths,
            ["spec.template"]
        );
        let pods = &c.spec.child_resources[0];
        assert_eq!(pods.method(), UpdateMethod::RollingRecreate);
        let check = &pods
            .update_strategy
            .as_ref()
            .unwrap()
            .status_checks
            .as_ref()
            .unwrap()
            .conditions[0];
        assert_eq!(
            (
                check.type_.as_str(),
                check.status.as_deref(),
                check.reason.as_deref()
            ),
            ("Ready", Some("True"), None)
        );
        assert_eq!(c.spec.child_resources[1].method(), UpdateMethod::OnDelete);
        let sync = c.spec.hooks.sync.as_ref().unwrap();
        assert_eq!(sync.timeout(), std::time::Duration::from_secs(10));
        assert_eq!(sync.version(), HookVersion::V1);
        assert_eq!(
            sync.webhook.as_ref().unwrap().url.as_deref(),
            Some("http://catset-controller.metacontroller/sync")
        );
        let expected: Value = serde_saphyr::from_str(text).unwrap();
        assert_eq!(c.raw, expected);
    }

    #[test]
    fn configmap_propagation_with_customize_parses_unchanged() {
        let text = "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: configmap-propagation-controller
  annotations: {owner: platform-team}
spec:
  generateSelector: true
  resyncPeriodSeconds: 30
  parentResource:
    apiVersion: examples.metacontroller.io/v1alpha1
    resource: configmappropagations
    ignoreStatusChanges: true
    labelSelector:
      matchExpressions:
      - {key: propagate, operator: NotIn, values: [\"false\"]}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      version: v2
      webhook:
        service: {name: configmap-propagation-controller, namespace: metacontroller, port: 8080}
        path: /sync
        timeout: 1m30s
        etag: {enabled: true, cacheTimeoutSeconds: 20}
        responseUnMarshallMode: strict
    customize:
      webhook:
        url: http://configmap-propagation-controller.metacontroller/customize
    finalize:
      exec:
        command: [python3, finalize.py]
        workingDir: hooks
        env: {LOG_LEVEL: debug}
";
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "cmp.yaml", text);
        let loaded = load(&[file]);
        let ControllerDef::Composite(c) = &loaded.controllers[0] else {
            panic!("not composite");
        };
        assert_eq!(c.spec.generate_selector, Some(true));
        assert_eq!(c.spec.resync_period_seconds, Some(30));
        assert_eq!(c.spec.parent_resource.ignore_status_changes, Some(true));
        assert!(c.spec.parent_resource.label_selector.is_some());
        assert_eq!(c.spec.child_resources[0].method(), UpdateMethod::InPlace);
        let sync = c.spec.hooks.sync.as_ref().unwrap();
        assert_eq!(sync.version(), HookVersion::V2);
        assert_eq!(sync.timeout(), std::time::Duration::from_secs(90));
        let webhook = sync.webhook.as_ref().unwrap();
        let svc = webhook.service.as_ref().unwrap();
        assert_eq!(
            (svc.name.as_str(), svc.namespace.as_str(), svc.port),
            (
                "configmap-propagation-controller",
                "metacontroller",
                Some(8080)
            )
        );
        assert_eq!(webhook.path.as_deref(), Some("/sync"));
        assert_eq!(webhook.response_un_marshall_mode.as_deref(), Some("strict"));
        assert!(c.spec.hooks.customize.is_some());
        let finalize = c
            .spec
            .hooks
            .finalize
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap();
        assert_eq!(finalize.working_dir.as_deref(), Some("hooks"));
        assert_eq!(finalize.env.as_ref().unwrap()["LOG_LEVEL"], "debug");
        assert_eq!(c.raw["metadata"]["annotations"]["owner"], "platform-team");
        assert_eq!(loaded.controllers[0].source().origin, Origin::File);
    }

    #[test]
    fn decorator_and_map_forms_load() {
        let dir = tempfile::tempdir().unwrap();
        let text = "apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-pod
spec:
  resources:
  - apiVersion: apps/v1
    resource: statefulsets
    annotationSelector:
      matchExpressions:
      - {key: service-per-pod-label, operator: Exists}
  attachments:
  - apiVersion: v1
    resource: services
    updateStrategy: {method: InPlace}
  resyncPeriodSeconds: 10
  hooks:
    sync:
      webhook: {url: 'http://service-per-pod.metacontroller/sync-service-per-pod'}
    finalize:
      webhook: {url: 'http://service-per-pod.metacontroller/finalize-service-per-pod'}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: {name: snapshotschedule-controller}
spec:
  parentResource: {apiVersion: ctl.example.com/v1, resource: snapshotschedules}
  inputResources:
  - {apiVersion: v1, resource: persistentvolumeclaims}
  outputResources:
  - {apiVersion: snapshot.storage.k8s.io/v1, resource: volumesnapshots, updateStrategy: {method: InPlace}}
  resyncPeriodSeconds: 5
  hooks:
    map:       {webhook: {url: 'http://127.0.0.1:8080/map'}}
    tombstone: {webhook: {url: 'http://127.0.0.1:8080/tombstone'}}
";
        let loaded = load(&[write(dir.path(), "both.yaml", text)]);
        let kinds: Vec<(&str, &str)> = loaded
            .controllers
            .iter()
            .map(|d| (d.kind(), d.name()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("DecoratorController", "service-per-pod"),
                ("MapController", "snapshotschedule-controller")
            ]
        );
        let ControllerDef::Decorator(d) = &loaded.controllers[0] else {
            panic!()
        };
        assert_eq!(d.spec.attachments[0].method(), UpdateMethod::InPlace);
        assert!(d.spec.hooks.finalize.is_some());
        let ControllerDef::Map(m) = &loaded.controllers[1] else {
            panic!()
        };
        assert_eq!(m.spec.output_resources[0].resource, "volumesnapshots");
        assert_eq!(m.source.document, 2);
    }
}
