//! Loading whole project files: a valid one resolved, and each kind of mistake reported with
//! its file, line and field.

use super::*;

const HEAD: &str = "apiVersion: kubectl-meta.dev/v1alpha1\nkind: Project\nname: website\n";

/// A project directory with `controller.yaml`, `crd.yaml`, `server.py` and the project file
/// `text`; returns the directory and the load's result.
fn project(text: &str) -> (tempfile::TempDir, Result<Project, ProjectError>) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["controller.yaml", "crd.yaml", "server.py"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    let path = dir.path().join(discover::FILE_NAME);
    std::fs::write(&path, text).unwrap();
    let r = Project::load(&path, "./kubectl-meta.yaml");
    (dir, r)
}

fn invalid(text: &str) -> String {
    match project(text).1 {
        Err(e @ ProjectError::Invalid { .. }) => e.to_string(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn a_full_project_resolves_relative_to_its_directory() {
    let (dir, r) = project(&format!(
        "{HEAD}controllers: [controller.yaml]\napply: [crd.yaml]\nhooks:\n- name: web\n  build: sh -c true\n  server: python3 server.py --port 8081\n  url: http://127.0.0.1:8081\n  ready: http://127.0.0.1:8081/healthz\n  outputs: [bin]\ntests: [hook-tests]\ntarget:\n  sandbox: {{}}\n"
    ));
    let p = r.unwrap();
    let d = dir.path();
    assert_eq!(p.name, "website");
    assert_eq!(p.controllers, vec![d.join("controller.yaml")]);
    assert_eq!(p.apply, vec![d.join("crd.yaml")]);
    assert_eq!(p.target, Target::Sandbox);
    assert_eq!(p.record_dir(), Some(d.join("hook-tests")));
    assert_eq!(p.watch_paths(), vec![d.to_path_buf()]);
    assert_eq!(
        p.never_watched(),
        vec![d.join(".kubectl-meta"), d.join("bin"), d.join("hook-tests")]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(p.served_hook().unwrap().name, "web");
    assert_eq!(p.builds().len(), 1);
    assert_eq!(
        p.using_line(),
        "using project website (./kubectl-meta.yaml)"
    );
}

#[test]
fn the_target_defaults_to_the_sandbox_and_a_context_is_explicit() {
    let (_d, r) = project(&format!("{HEAD}controllers: [controller.yaml]\n"));
    assert_eq!(r.unwrap().target, Target::Sandbox);
    let (_d, r) = project(&format!(
        "{HEAD}controllers: [controller.yaml]\ntarget: {{context: kind-dev}}\n"
    ));
    assert_eq!(
        r.unwrap().target,
        Target::Context {
            name: "kind-dev".into(),
            kubeconfig: None
        }
    );
}

#[test]
fn a_hook_program_that_does_not_exist_names_the_file_line_hook_and_field() {
    let e = invalid(&format!(
        "{HEAD}controllers: [controller.yaml]\nhooks:\n- name: web\n  server: pyhton3 server.py\n  url: http://127.0.0.1:8081\n"
    ));
    assert_eq!(
        e,
        "./kubectl-meta.yaml:7:11: hooks[0].server: program \"pyhton3\" not found on PATH"
    );
    let e = invalid(&format!(
        "{HEAD}controllers: [controller.yaml]\nhooks:\n- name: web\n  build: ./make.sh\n"
    ));
    assert!(
        e.starts_with("./kubectl-meta.yaml:7:10: hooks[0].build: program \"./make.sh\" not found"),
        "{e}"
    );
}

#[test]
fn a_program_the_build_writes_is_not_required_before_the_build() {
    let (_d, r) = project(&format!(
        "{HEAD}controllers: [controller.yaml]\nhooks:\n- name: web\n  build: sh -c true\n  server: ./bin/hook --port 8081\n  url: http://127.0.0.1:8081\n  outputs: [bin/]\n"
    ));
    r.unwrap();
}

#[test]
fn both_sandbox_and_context_is_refused() {
    let e = invalid(&format!(
        "{HEAD}controllers: [controller.yaml]\ntarget:\n  sandbox: {{}}\n  context: kind-dev\n"
    ));
    assert!(
        e.starts_with("./kubectl-meta.yaml:7:12: target: names both sandbox and context"),
        "{e}"
    );
}

#[test]
fn every_problem_is_reported_in_line_order() {
    let e = invalid(
        "apiVersion: v1\nkind: Project\nname: My_Site\ncontrollers: [nosuch.yaml]\nhooks:\n- name: a\n  server: python3 server.py\n- name: b\n  url: http://127.0.0.1:9000\n",
    );
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 5, "{e}");
    assert!(
        lines[0].starts_with("./kubectl-meta.yaml:1:13: apiVersion: "),
        "{e}"
    );
    assert!(
        lines[1].contains(":3:7: name: \"My_Site\" is not a DNS label"),
        "{e}"
    );
    assert!(
        lines[2].contains(":4:15: controllers[0]: \"nosuch.yaml\": no such file"),
        "{e}"
    );
    assert!(
        lines[3].contains(":7:11: hooks[0].url: a server needs its url"),
        "{e}"
    );
    assert!(
        lines[4].contains(":9:8: hooks[1].url: only one hook may have a server or url"),
        "{e}"
    );
}

#[test]
fn a_malformed_file_and_an_unknown_field_are_syntax_errors_with_a_line() {
    let (_d, r) = project(&format!("{HEAD}controllers: [controller.yaml\n"));
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with("./kubectl-meta.yaml:"), "{e}");
    let (_d, r) = project(&format!(
        "{HEAD}controllers: [controller.yaml]\nrecrod: x\n"
    ));
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with("./kubectl-meta.yaml:5:1: "), "{e}");
    assert!(e.contains("unknown field `recrod`"), "{e}");
}
