//! What a new user met writing a controller of their own (issue 37, "What the same user met
//! on the way"): a Website that owns a ConfigMap and a Deployment, its hook in Python
//! ([`crate::common::website`]); each test failed before its fix.

use crate::common::{self, TIMEOUT, wait_for};

use crate::common::cli::*;

/// A sandbox, a private HOME, and the Website project in a directory (and its path).
async fn website() -> (
    common::TestSandbox,
    tempfile::TempDir,
    tempfile::TempDir,
    String,
) {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    common::website::write(dir.path());
    let files = dir.path().display().to_string();
    (sb, home, dir, files)
}

/// `dev --record hook-tests/` next to the hook (the directory `dev` watches, as the examples
/// do): the cases written never count as a change (each used to reload the hook and resync,
/// writing another case). A file written after them does: once its reload is seen, every
/// earlier change was seen too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_next_to_the_hook_does_not_reload_it() {
    let (sb, home, dir, files) = website().await;
    let record = dir.path().join("hook-tests");
    let dump = dir.path().join("requests");
    let (record_s, dump_s) = (record.display().to_string(), dump.display().to_string());
    let dev = Background::start(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &files,
            "--record",
            &record_s,
            "--dump-requests",
            &dump_s,
            "--no-tui",
        ],
    ));
    dev.wait_output("create    Deployment.apps/v1 default/mysite")
        .await;
    wait_for("a recorded case", TIMEOUT, || {
        let n = walk_files(&record).len();
        async move { (n > 0).then_some(()) }
    })
    .await;
    assert!(!walk_files(&dump).is_empty(), "no request dumped");
    std::fs::write(dir.path().join("sentinel.py"), "# changed\n").unwrap();
    dev.wait_output("sentinel.py").await;
    let out = dev.output();
    let reloads: Vec<&str> = out.lines().filter(|l| l.contains(" reload ")).collect();
    assert!(
        reloads.iter().all(|l| l.contains("sentinel.py")),
        "a recorded case or dumped request reloaded the hook:\n{out}"
    );
    let (_, err) = dev.interrupt().await;
    assert!(!err.contains("panicked"), "{err}");
}

/// `dev --apply -f FILES --once EXTRA...` against `sb`, successful.
async fn dev_once(sb: &common::TestSandbox, home: &std::path::Path, files: &str, extra: &[&str]) {
    let kubeconfig = kc(sb);
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.as_str(),
        "dev",
        "--apply",
        "-f",
        files,
        "--once",
    ];
    args.extend_from_slice(extra);
    assert_ok(&run(meta(home, &args)).await);
}

/// Every file under `dir` (none if it does not exist).
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// examples/README.md names the kubeconfig `dev --sandbox` writes as dev prints it (it used
/// to name `dev-sandbox.kubeconfig`, a file that never exists: the name holds the pid).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_readme_names_the_kubeconfig_dev_writes() {
    let home = tempfile::tempdir().unwrap();
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--sandbox",
            "--apply",
            "-f",
            &example("hello-world"),
            "--once",
        ],
    ))
    .await;
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    let printed = err
        .lines()
        .find_map(|l| l.split("kubeconfig: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no kubeconfig path printed:\n{err}"));
    let file = std::path::Path::new(printed)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // The pid stands as <pid> in the README.
    let shown: String = {
        let digits: String = file.chars().filter(char::is_ascii_digit).collect();
        file.replace(&digits, "<pid>")
    };
    let readme = std::fs::read_to_string(repo().join("examples/README.md")).unwrap();
    assert!(
        readme.contains(&format!(
            "export KUBECONFIG=~/.local/share/kubectl-meta/{shown}"
        )),
        "examples/README.md does not name {shown} (dev printed {printed})"
    );
    assert!(!readme.contains("dev-sandbox.kubeconfig"), "{readme}");
}

/// One parent recorded over its convergence gives a case per sync; a hook change fails them
/// all the same way: one FAIL block names every case (it was a block per case), while
/// `-o json` keeps an object per case and JUnit a testcase per case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_failures_are_one_block() {
    let (sb, home, dir, files) = website().await;
    let rec = tempfile::tempdir().unwrap();
    let rec_s = rec.path().display().to_string();
    dev_once(&sb, home.path(), &files, &["--record", &rec_s]).await;
    let cases = walk_files(rec.path()).len();
    assert!(cases >= 2, "one case per sync: {cases}");
    common::website::write_with(dir.path(), Some("InPlace"), r#"{"rev": "2"}"#);
    let controller = dir.path().join("10-controller.yaml").display().to_string();
    let junit = home.path().join("junit.xml");
    let junit_s = junit.display().to_string();
    let test = |extra: &[&str]| {
        let mut args = vec!["test", rec_s.as_str(), "-f", controller.as_str()];
        args.extend_from_slice(extra);
        meta(home.path(), &args)
    };
    let out = run(test(&["--junit", &junit_s])).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let blocks = stdout.lines().filter(|l| l.starts_with("FAIL")).count();
    assert_eq!(blocks, 1, "{stdout}");
    assert!(
        stdout.contains(&format!("({cases} cases, the same outcome)")),
        "{stdout}"
    );
    let diffs = stdout
        .lines()
        .filter(|l| l.contains("~ ") && l.contains("rev"))
        .count();
    assert_eq!(diffs, 1, "the difference once: {stdout}");
    assert!(
        stdout.contains(&format!("0 passed, {cases} failed")),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), cases, "{xml}");
    assert_eq!(xml.matches("<failure").count(), cases, "{xml}");

    let out = run(test(&["-o", "json"])).await;
    let (stdout, _) = text(&out);
    let fails = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "case" && v["result"] == "fail")
        .count();
    assert_eq!(fails, cases, "{stdout}");
}

/// `inspect -f controller.yaml website/mysite` after a sync: the parent whose hook writes no
/// Synced condition is shown synced from its observedGeneration (it was `NotSynced (no Synced
/// condition yet)`), the 3/3-ready Deployment's READY is `3/3` (it was `-`); a Website that
/// does not exist is usage, exit 2, as the README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_healthy_website_as_synced_and_ready() {
    let (sb, home, dir, files) = website().await;
    dev_once(&sb, home.path(), &files, &[]).await;
    let controller = dir.path().join("10-controller.yaml").display().to_string();
    let inspect = |args: &[&str]| {
        let kubeconfig = kc(&sb);
        let mut all = vec![
            "--kubeconfig",
            kubeconfig.as_str(),
            "inspect",
            "-f",
            &controller,
        ];
        all.extend_from_slice(args);
        meta(home.path(), &all)
    };
    let out = run(inspect(&["website/mysite", "--color", "never"])).await;
    let tree = assert_ok(&out);
    let row = |what: &str| {
        tree.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} row:\n{tree}"))
            .to_string()
    };
    let parent = row("Website/mysite");
    assert!(
        parent.contains("Synced (observedGeneration 1") && !parent.contains("NotSynced"),
        "{tree}"
    );
    let deployment = row("Deployment/mysite");
    assert!(deployment.contains(" 3/3 "), "{tree}");
    let out = run(inspect(&["website/nosuch"])).await;
    let err = assert_fails(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"nosuch\" not found"), "{err}");
}

/// `deploy -f .` on the Website project says on stderr what it leaves out and why (the CRD,
/// the sample parent: both were dropped without a word), and that the exec hook cannot run in
/// the default image (distroless), naming the hook and what to do; `--image` of one's own
/// silences that warning. stdout stays the manifests only.
#[test]
fn deploy_names_what_it_leaves_out_and_an_exec_hook_the_image_cannot_run() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    common::website::write(dir.path());
    let files = dir.path().display().to_string();
    let deploy = |extra: &[&str]| {
        let mut args = vec!["deploy", "-f", files.as_str()];
        args.extend_from_slice(extra);
        meta(home.path(), &args)
            .output()
            .expect("kubectl-meta runs")
    };
    let out = deploy(&[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("kind: Deployment"), "{stdout}");
    assert!(
        !stdout.contains("note:") && !stdout.contains("warning:"),
        "{stdout}"
    );
    let crd = stderr
        .lines()
        .find(|l| l.contains("CustomResourceDefinition websites.demo.example.com"))
        .unwrap_or_else(|| panic!("the CRD is not named:\n{stderr}"));
    assert!(
        crd.starts_with("note: left out:") && crd.contains("00-crd.yaml"),
        "{crd}"
    );
    let sample = stderr
        .lines()
        .find(|l| l.contains("Website default/mysite"))
        .unwrap_or_else(|| panic!("the sample is not named:\n{stderr}"));
    assert!(sample.contains("20-sample.yaml"), "{sample}");
    let hook = stderr
        .lines()
        .find(|l| l.starts_with("warning:") && l.contains("`python3 hook.py`"))
        .unwrap_or_else(|| panic!("no warning about the exec hook:\n{stderr}"));
    assert!(
        hook.contains("website-controller")
            && hook.contains("distroless")
            && hook.contains("--image"),
        "{hook}"
    );
    let out = deploy(&["--image", "registry.example.com/website:1"]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning:"), "{stderr}");
    assert!(
        stderr.contains("note: left out: CustomResourceDefinition"),
        "{stderr}"
    );
}
