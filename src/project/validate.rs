//! Checking a parsed project file and resolving it into a [`Project`]: the envelope
//! (`apiVersion`, `kind`), `name` a DNS label, every listed path existing (relative to the
//! file's directory; `tests`, `record` and `outputs` may not exist yet), `target` naming a
//! sandbox or a context (not both), the hooks' URLs, at most one hook with a `server` or `url`
//! (`dev` and `test` point every webhook at one base URL), and the program of each `build` and
//! `server` command existing (on PATH, or relative to the project directory unless it is a
//! build output). Every problem is reported, each with its line, column and field.

use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use super::error::Problem;
use super::program;
use super::schema::{self, HookEntry, ProjectFile};
use super::{Hook, Project, Target};

/// Check `file` (read from `path`, in directory `dir`) and resolve its paths; all problems at
/// once.
pub fn resolve(
    file: ProjectFile,
    path: &Path,
    dir: &Path,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<Project, Vec<Problem>> {
    let mut c = Checker {
        dir,
        problems: Vec::new(),
    };
    if file.api_version.value != schema::API_VERSION {
        c.problem(
            &file.api_version,
            "apiVersion",
            format!(
                "{:?} is not a project file version; use {}",
                file.api_version.value,
                schema::API_VERSION
            ),
        );
    }
    if file.kind.value != schema::KIND {
        c.problem(
            &file.kind,
            "kind",
            format!(
                "{:?}: a project file's kind is {}",
                file.kind.value,
                schema::KIND
            ),
        );
    }
    let errs = kube_apimachinery::names::is_dns1123_label(&file.name.value);
    if !errs.is_empty() {
        c.problem(
            &file.name,
            "name",
            format!(
                "{:?} is not a DNS label ({}); e.g. my-website",
                file.name.value,
                errs.join("; ")
            ),
        );
    }
    if file.controllers.value.is_empty() {
        c.problem(
            &file.controllers,
            "controllers",
            "is empty: list the controller definition files or directories (as -f), e.g. [controller.yaml]".into(),
        );
    }
    let controllers = c.existing_paths(&file.controllers.value, "controllers");
    let apply = c.existing_paths(&file.apply, "apply");
    let tests: Vec<PathBuf> = file
        .tests
        .iter()
        .map(|t| normalize(&dir.join(&t.value)))
        .collect();
    let record = file.record.as_ref().map(|r| normalize(&dir.join(&r.value)));
    let target = c.target(file.target.as_ref());
    let mut hooks = Vec::new();
    let mut served: Option<String> = None;
    for (i, h) in file.hooks.iter().enumerate() {
        let field = format!("hooks[{i}]");
        if let Some(s) = h.server.as_ref().or(h.url.as_ref()) {
            match &served {
                Some(first) => c.problem(
                    s,
                    &format!("{field}.{}", if h.server.is_some() { "server" } else { "url" }),
                    format!(
                        "only one hook may have a server or url (hook {first} has one): dev and test point every webhook at one base URL; serve the hooks from one server"
                    ),
                ),
                None => served = Some(h.name.value.clone()),
            }
        }
        hooks.push(c.hook(h, &field, path_var));
    }
    if !c.problems.is_empty() {
        c.problems.sort_by_key(|p| (p.line, p.column));
        return Err(c.problems);
    }
    Ok(Project {
        file: path.to_path_buf(),
        shown: String::new(),
        dir: dir.to_path_buf(),
        name: file.name.value,
        controllers,
        apply,
        hooks,
        tests,
        record,
        target,
    })
}

/// Collects problems.
struct Checker<'a> {
    dir: &'a Path,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn problem<T>(&mut self, at: &Spanned<T>, field: &str, message: String) {
        self.problems.push(Problem {
            line: at.referenced.line(),
            column: at.referenced.column(),
            field: field.to_string(),
            message,
        });
    }

    /// The paths, resolved; each must exist.
    fn existing_paths(&mut self, paths: &[Spanned<String>], field: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let full = normalize(&self.dir.join(&p.value));
            if !full.exists() {
                self.problem(
                    p,
                    &format!("{field}[{i}]"),
                    format!(
                        "{:?}: no such file or directory ({}; paths are relative to the project file's directory)",
                        p.value,
                        full.display()
                    ),
                );
            }
            out.push(full);
        }
        out
    }

    fn target(&mut self, t: Option<&Spanned<schema::TargetEntry>>) -> Target {
        let Some(t) = t else {
            return Target::Sandbox;
        };
        let v = &t.value;
        match (&v.sandbox, &v.context) {
            (Some(_), Some(ctx)) => {
                self.problem(
                    ctx,
                    "target",
                    "names both sandbox and context: choose one (a real cluster is always named explicitly)".into(),
                );
                Target::Sandbox
            }
            (None, None) => {
                self.problem(
                    t,
                    "target",
                    "names neither sandbox nor context: write `sandbox: {}` or `context: NAME`"
                        .into(),
                );
                Target::Sandbox
            }
            (Some(_), None) => {
                if let Some(k) = &v.kubeconfig {
                    self.problem(
                        k,
                        "target.kubeconfig",
                        "only goes with target.context (the sandbox writes its own kubeconfig)"
                            .into(),
                    );
                }
                Target::Sandbox
            }
            (None, Some(ctx)) => {
                if ctx.value.is_empty() {
                    self.problem(
                        ctx,
                        "target.context",
                        "is empty: name a kubeconfig context".into(),
                    );
                }
                let kubeconfig = v.kubeconfig.as_ref().map(|k| {
                    let p = self.dir.join(&k.value);
                    if !p.is_file() {
                        self.problem(
                            k,
                            "target.kubeconfig",
                            format!("{:?}: no such file ({})", k.value, p.display()),
                        );
                    }
                    p
                });
                Target::Context {
                    name: ctx.value.clone(),
                    kubeconfig,
                }
            }
        }
    }

    fn hook(&mut self, h: &HookEntry, field: &str, path_var: Option<&std::ffi::OsStr>) -> Hook {
        if h.name.value.trim().is_empty() {
            self.problem(
                &h.name,
                &format!("{field}.name"),
                "is empty: give the hook a name (used in messages)".into(),
            );
        }
        let outputs: Vec<PathBuf> = h
            .outputs
            .iter()
            .map(|o| normalize(&self.dir.join(&o.value)))
            .collect();
        for (what, cmd) in [("build", &h.build), ("server", &h.server)] {
            let Some(cmd) = cmd else { continue };
            let f = format!("{field}.{what}");
            if cmd.value.trim().is_empty() {
                self.problem(cmd, &f, "is empty: give a shell command".into());
                continue;
            }
            let Some(prog) = program::program_of(&cmd.value) else {
                continue;
            };
            // A program the build writes is not there before the first build.
            let built = prog.contains('/') && {
                let p = normalize(&self.dir.join(&prog));
                outputs.iter().any(|o| p.starts_with(o))
            };
            if built {
                continue;
            }
            if let Some(why) = program::missing(&prog, self.dir, path_var) {
                self.problem(cmd, &f, why);
            }
        }
        for (what, url) in [("url", &h.url), ("ready", &h.ready)] {
            if let Some(u) = url {
                let ok = reqwest::Url::parse(&u.value).is_ok_and(|p| {
                    matches!(p.scheme(), "http" | "https") && p.host_str().is_some()
                });
                if !ok {
                    self.problem(
                        u,
                        &format!("{field}.{what}"),
                        format!("{:?} is not an http:// or https:// URL with a host (e.g. http://127.0.0.1:8081)", u.value),
                    );
                }
            }
        }
        if let Some(s) = &h.server
            && h.url.is_none()
            && h.ready.is_none()
        {
            self.problem(
                s,
                &format!("{field}.url"),
                "a server needs its url (where it listens, e.g. http://127.0.0.1:8081): webhook URLs are pointed there".into(),
            );
        }
        if h.server.is_none()
            && let Some(r) = &h.ready
        {
            self.problem(r, &format!("{field}.ready"), "only goes with server".into());
        }
        let watch = self.existing_paths(&h.watch, &format!("{field}.watch"));
        Hook {
            name: h.name.value.clone(),
            build: h.build.as_ref().map(|b| b.value.clone()),
            server: h.server.as_ref().map(|s| s.value.clone()),
            url: h.url.as_ref().map(|u| u.value.clone()),
            ready: h.ready.as_ref().map(|r| r.value.clone()),
            watch,
            outputs,
        }
    }
}

/// `a/./b/../c` -> `a/c`, without touching the filesystem.
pub(super) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
