//! Rendering: the embedded per-language templates (`src/scaffold/templates/<lang>/...`) filled
//! from a [`Plan`], and the complete list of files a project gets.

use std::path::PathBuf;

use super::code;
use super::error::ScaffoldError;
use super::manifests::{self, build_command, exec_command, server_command};
use super::options::{ControllerKind, HookForm, Lang, Plan};

/// One generated file, its path relative to the project directory.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedFile {
    /// Where, relative to the project directory.
    pub path: PathBuf,
    /// Its content.
    pub text: String,
    /// Mode 0755 (scripts run directly).
    pub executable: bool,
}

macro_rules! templates {
    ($($lang:literal => [$($file:literal),*]),* $(,)?) => {
        /// The embedded template `file` of `lang` (`common` for the shared ones).
        fn template(lang: &str, file: &str) -> Option<&'static str> {
            match (lang, file) {
                $($(($lang, $file) => Some(include_str!(concat!("templates/", $lang, "/", $file))),)*)*
                _ => None,
            }
        }
    };
}

templates! {
    "common" => ["README.md", "gitignore", "workflow.yaml"],
    "python" => ["kit.py", "composite.py", "decorator.py", "map.py", "Dockerfile.exec", "Dockerfile.webhook"],
    "javascript" => ["kit.js", "composite.js", "decorator.js", "map.js", "Dockerfile.exec", "Dockerfile.webhook"],
    "go" => ["go.mod", "kit.go", "composite.go", "decorator.go", "map.go", "Dockerfile.exec", "Dockerfile.webhook"],
    "rust" => ["Cargo.toml", "kit.rs", "composite.rs", "decorator.rs", "map.rs", "Dockerfile.exec", "Dockerfile.webhook"],
}

/// `template` with every `{{KEY}}` replaced.
pub fn fill(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

fn get(lang: &str, file: &str) -> Result<&'static str, ScaffoldError> {
    template(lang, file).ok_or_else(|| ScaffoldError::Write {
        path: PathBuf::from(format!("templates/{lang}/{file}")),
        source: std::io::Error::other("no such embedded template (a bug)"),
    })
}

/// The values every template may use.
fn vars(plan: &Plan) -> Vec<(&'static str, String)> {
    let lang = plan.lang;
    let depth = 2;
    let observed = match (lang, plan.kind) {
        (Lang::Go, ControllerKind::Decorator) => "request.Attachments",
        (Lang::Go, _) => "request.Children",
        (Lang::Rust, ControllerKind::Decorator) => "request.attachments",
        (Lang::Rust, _) => "request.children",
        _ => "observed",
    };
    let holder = match (lang, plan.kind) {
        (Lang::Go, ControllerKind::Decorator) => "request.Object",
        (Lang::Go, _) => "request.Parent",
        (_, ControllerKind::Decorator) => "request.object",
        _ => "request.parent",
    };
    let spec_decl = match lang {
        Lang::Go if code::uses_data(plan) => format!("\tspec := specOf({holder})\n"),
        Lang::Rust if code::uses_data(plan) => format!("    let spec = kit::spec_of(&{holder});\n"),
        _ => String::new(),
    };
    vec![
        ("SPEC_DECL", spec_decl),
        ("PROJECT", plan.project.clone()),
        ("CONTROLLER", plan.controller.clone()),
        ("DEFINITION_KIND", plan.kind.definition_kind().to_string()),
        ("PARENT_KIND", plan.parent.kind.clone()),
        ("CHILDREN", code::children(plan, depth)),
        ("STATUS", code::status(plan, observed, 1)),
        ("DECORATED_LABEL", plan.decorated_label()),
        ("VERSION", env!("CARGO_PKG_VERSION").to_string()),
    ]
}

/// Every file of the project `plan` describes.
pub fn files(plan: &Plan) -> Result<Vec<GeneratedFile>, ScaffoldError> {
    let lang = plan.lang.name();
    let v = vars(plan);
    let mut out = Vec::new();
    let mut add = |path: &str, text: String, executable: bool| {
        out.push(GeneratedFile {
            path: PathBuf::from(path),
            text,
            executable,
        });
    };
    add("kubectl-meta.yaml", manifests::project_file(plan), false);
    if let Some(crd) = manifests::crd(plan) {
        add(
            "crd.yaml",
            format!(
                "# The {} type (status subresource: the controller writes status separately).\n{}",
                plan.parent.kind,
                manifests::yaml(&crd)?
            ),
            false,
        );
    }
    add("controller.yaml", manifests::controller_yaml(plan)?, false);
    add("sample.yaml", manifests::sample_yaml(plan)?, false);
    let hook = fill(
        get(lang, &format!("{}.{}", plan.kind.name(), ext(plan.lang)))?,
        &v,
    );
    match plan.lang {
        Lang::Python => {
            add("hook/hook.py", hook, true);
            add("hook/kit.py", fill(get(lang, "kit.py")?, &v), false);
        }
        Lang::Javascript => {
            add("hook/hook.js", hook, true);
            add("hook/kit.js", fill(get(lang, "kit.js")?, &v), false);
        }
        Lang::Go => {
            add("hook/go.mod", fill(get(lang, "go.mod")?, &v), false);
            add("hook/main.go", hook, false);
            add("hook/kit.go", fill(get(lang, "kit.go")?, &v), false);
        }
        Lang::Rust => {
            add("hook/Cargo.toml", fill(get(lang, "Cargo.toml")?, &v), false);
            add("hook/src/main.rs", hook, false);
            add("hook/src/kit.rs", fill(get(lang, "kit.rs")?, &v), false);
        }
    }
    let (case_path, case) = manifests::test_case(plan)?;
    out.push(GeneratedFile {
        path: case_path,
        text: case,
        executable: false,
    });
    let docker = match plan.hook {
        HookForm::Exec => "Dockerfile.exec",
        HookForm::Webhook => "Dockerfile.webhook",
    };
    out.push(GeneratedFile {
        path: "Dockerfile".into(),
        text: fill(get(lang, docker)?, &v),
        executable: false,
    });
    out.push(GeneratedFile {
        path: "README.md".into(),
        text: readme(plan, &v)?,
        executable: false,
    });
    out.push(GeneratedFile {
        path: ".gitignore".into(),
        text: get("common", "gitignore")?.to_string(),
        executable: false,
    });
    let mut wv = v.clone();
    wv.push(("SETUP", ci_setup(plan.lang).to_string()));
    out.push(GeneratedFile {
        path: ".github/workflows/test.yaml".into(),
        text: fill(get("common", "workflow.yaml")?, &wv),
        executable: false,
    });
    Ok(out)
}

fn ext(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "py",
        Lang::Javascript => "js",
        Lang::Go => "go",
        Lang::Rust => "rs",
    }
}

/// The CI steps that install the hook's toolchain.
fn ci_setup(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => {
            "      - uses: actions/setup-python@v5\n        with: {python-version: \"3.12\"}\n"
        }
        Lang::Javascript => {
            "      - uses: actions/setup-node@v4\n        with: {node-version: \"22\"}\n"
        }
        Lang::Go => "      - uses: actions/setup-go@v5\n        with: {go-version: stable}\n",
        Lang::Rust => "      - run: rustup toolchain install stable --profile minimal\n",
    }
}

fn readme(plan: &Plan, v: &[(&'static str, String)]) -> Result<String, ScaffoldError> {
    let (lang_name, kit, hook_files, key) = match plan.lang {
        Lang::Python => (
            "Python",
            "hook/kit.py",
            "`hook/hook.py`, `hook/kit.py`",
            "child_key()",
        ),
        Lang::Javascript => (
            "JavaScript (Node.js)",
            "hook/kit.js",
            "`hook/hook.js`, `hook/kit.js`",
            "childKey()",
        ),
        Lang::Go => (
            "Go",
            "hook/kit.go",
            "`hook/main.go`, `hook/kit.go`, `hook/go.mod`",
            "childKey()",
        ),
        Lang::Rust => (
            "Rust",
            "hook/src/kit.rs",
            "`hook/src/main.rs`, `hook/src/kit.rs`, `hook/Cargo.toml`",
            "child_key()",
        ),
    };
    let mut v = v.to_vec();
    v.push(("LANG_NAME", lang_name.into()));
    v.push(("KIT_FILE", format!("`{kit}`")));
    v.push(("CHILD_KEY", key.into()));
    v.push((
        "HOOK_FORM",
        match plan.hook {
            HookForm::Exec => "exec".into(),
            HookForm::Webhook => "webhook".into(),
        },
    ));
    v.push((
        "CRD_ROW",
        if plan.schema.is_some() {
            format!(
                "| `crd.yaml` | the {} CRD (with a status subresource) |\n",
                plan.parent.kind
            )
        } else {
            String::new()
        },
    ));
    v.push((
        "HOOK_ROWS",
        format!("| {hook_files} | the hook and its kit (request/answer types, `{key}`) |\n"),
    ));
    let run = match plan.hook {
        HookForm::Exec => format!(
            "The engine runs `{}` once per call, in this directory.",
            exec_command(plan.lang).join(" ")
        ),
        HookForm::Webhook => format!(
            "`kubectl meta dev` starts `{}` and restarts it on change.",
            server_command(plan.lang, "8081")
        ),
    };
    let build = match build_command(plan.lang) {
        Some(b) => format!("\n{run} The hook is built first (`{b}`), and again on every change.\n"),
        None => format!("\n{run}\n"),
    };
    v.push(("BUILD_NOTE", build));
    v.push((
        "DOCKERFILE_WHAT",
        match plan.hook {
            HookForm::Exec => {
                "the controller's image: `kubectl meta run` plus the hook and its runtime".into()
            }
            HookForm::Webhook => "the hook server's image".into(),
        },
    ));
    v.push((
        "IMAGE_NOTE",
        match plan.hook {
            HookForm::Exec => "An exec hook runs inside the controller's image, so `Dockerfile` adds the hook and \
                 its runtime to `kubectl meta run` (the default image of `kubectl meta deploy` has \
                 neither). Deploy it with `kubectl meta deploy --image REGISTRY/{{PROJECT}}:0.1.0 --apply`."
                .replace("{{PROJECT}}", &plan.project),
            HookForm::Webhook => "The engine (`kubectl meta deploy`, its default image) calls the hook server; \
                 `Dockerfile` builds that server. Run it as a Deployment with a Service, and point \
                 the controller's `webhook` at the Service (`service: {name, namespace, port}`)."
                .into(),
        },
    ));
    Ok(fill(get("common", "README.md")?, &v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use std::path::Path;

    /// `{{NAME}}` with NAME in capitals and underscores (JSDoc's `{{...}}` types are not).
    fn has_placeholder(text: &str) -> bool {
        text.split("{{").skip(1).any(|rest| {
            rest.split_once("}}").is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
        })
    }

    /// Every language, kind and hook form renders completely (no placeholder left), with the
    /// files each needs.
    #[test]
    fn every_combination_renders_without_leftover_placeholders() {
        for lang in [Lang::Python, Lang::Javascript, Lang::Go, Lang::Rust] {
            for kind in [
                ControllerKind::Composite,
                ControllerKind::Decorator,
                ControllerKind::Map,
            ] {
                for hook in [HookForm::Exec, HookForm::Webhook] {
                    let opts = Options {
                        dir: "/nonexistent/my-site".into(),
                        kind,
                        lang,
                        hook,
                        parent: None,
                        version: None,
                        children: vec!["configmaps".into(), "deployments.apps".into()],
                        target: None,
                        input: None,
                        from_example: None,
                        force: false,
                    };
                    let plan = Plan::resolve(&opts).expect("resolves");
                    let files = files(&plan).expect("renders");
                    let what = format!("{lang:?} {kind:?} {hook:?}");
                    for f in &files {
                        assert!(
                            !has_placeholder(&f.text),
                            "{what}: {} has a placeholder left:\n{}",
                            f.path.display(),
                            f.text
                        );
                    }
                    let has = |p: &str| files.iter().any(|f| f.path == Path::new(p));
                    for p in [
                        "kubectl-meta.yaml",
                        "crd.yaml",
                        "controller.yaml",
                        "sample.yaml",
                        "Dockerfile",
                        "README.md",
                        ".gitignore",
                        ".github/workflows/test.yaml",
                    ] {
                        assert!(has(p), "{what}: no {p}");
                    }
                    assert!(
                        files.iter().any(|f| f.path.starts_with("hook-tests")),
                        "{what}: no test case"
                    );
                    let controller = files
                        .iter()
                        .find(|f| f.path == Path::new("controller.yaml"))
                        .map(|f| f.text.clone())
                        .unwrap_or_default();
                    assert_eq!(
                        controller.matches("updateStrategy:").count(),
                        2,
                        "{what}: an explicit strategy per child:\n{controller}"
                    );
                    assert_eq!(
                        controller.matches("default would be OnDelete").count(),
                        2,
                        "{what}"
                    );
                }
            }
        }
    }
}
