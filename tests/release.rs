//! The release path, played as krew and kubectl play it: `scripts/release.sh` packs the binary
//! (the test's debug build: no release build here) and renders the krew manifest; the manifest
//! is checked against krew's validation rules (sigs.k8s.io/krew pkg/index/validation), then
//! installed from the archive the way krew does (verify sha256, extract, copy `files`, link
//! `bin` into a bin directory), and the real kubectl finds the plugin (`kubectl plugin list`),
//! runs it (`kubectl meta version`) and completes it (`kubectl __complete meta ...` through the
//! shipped `kubectl_complete-meta` helper).
#![cfg(unix)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");
/// The plugin's name in the krew index (`kubectl krew install meta`).
const PLUGIN: &str = "meta";

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sha256_hex(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// krew's os/arch words for this machine (what `kubectl meta version` reports as platform).
fn host_platform() -> (String, String) {
    let platform = kubectl_meta::platform();
    let (os, arch) = platform.split_once('/').unwrap();
    (os.to_string(), arch.to_string())
}

/// `os/arch` of a value with `os` and `arch` fields (a selector's matchLabels, a CI matrix entry).
fn os_arch(v: &Value) -> String {
    format!(
        "{}/{}",
        v["os"].as_str().unwrap_or("?"),
        v["arch"].as_str().unwrap_or("?")
    )
}

/// The platforms the release covers: the checked-in manifest and the CI workflow list them all.
const ALL_PLATFORMS: [&str; 5] = [
    "darwin/amd64",
    "darwin/arm64",
    "linux/amd64",
    "linux/arm64",
    "windows/amd64",
];

/// `semver.Parse` as krew uses it: a leading `v`, then MAJOR.MINOR.PATCH without leading
/// zeros, optional `-prerelease` and `+build` of dot-separated [0-9A-Za-z-] identifiers.
fn is_krew_semver(v: &str) -> bool {
    let Some(v) = v.strip_prefix('v') else {
        return false;
    };
    let (v, build) = match v.split_once('+') {
        Some((v, b)) => (v, Some(b)),
        None => (v, None),
    };
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let ident_ok = |s: &str| {
        !s.is_empty()
            && s.split('.')
                .all(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
        && pre.is_none_or(ident_ok)
        && build.is_none_or(ident_ok)
}

/// A relative path that stays inside the directory it is relative to (krew refuses `..`
/// and absolute paths in `files` and `bin`).
fn stays_inside(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Everything krew's `ValidatePlugin(name, plugin)` checks, plus what the krew-index review
/// asks for (https homepage and uri). `archive_entries`, when given, are the files of the
/// archive a platform points at: `files[].from` and `bin` must name them.
fn krew_errors(m: &Value, name: &str, archive_entries: Option<&BTreeSet<String>>) -> Vec<String> {
    let mut errs = Vec::new();
    let s = |v: &Value| v.as_str().map(str::to_string);
    if m["apiVersion"] != "krew.googlecontainertools.github.com/v1alpha2" {
        errs.push(format!("apiVersion is {}", m["apiVersion"]));
    }
    if m["kind"] != "Plugin" {
        errs.push(format!("kind is {}", m["kind"]));
    }
    let safe_name = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && !matches!(
                n.to_ascii_uppercase().as_str(),
                "CON" | "PRN" | "AUX" | "NUL"
            )
    };
    match s(&m["metadata"]["name"]) {
        Some(n) if n == name && safe_name(&n) => {}
        other => errs.push(format!("metadata.name is {other:?}, want {name:?}")),
    }
    let spec = &m["spec"];
    match s(&spec["version"]) {
        Some(v) if is_krew_semver(&v) => {}
        other => errs.push(format!("spec.version {other:?} is not v-prefixed semver")),
    }
    match s(&spec["homepage"]) {
        Some(h) if h.starts_with("https://") => {}
        other => errs.push(format!("spec.homepage {other:?} is not an https URL")),
    }
    if s(&spec["shortDescription"]).is_none_or(|d| d.trim().is_empty()) {
        errs.push("spec.shortDescription is missing".into());
    }
    let Some(platforms) = spec["platforms"].as_array().filter(|p| !p.is_empty()) else {
        errs.push("spec.platforms is missing or empty".into());
        return errs;
    };
    for (i, p) in platforms.iter().enumerate() {
        let at = format!("spec.platforms[{i}]");
        match p["selector"]["matchLabels"].as_object() {
            Some(labels) if !labels.is_empty() => {
                for (k, v) in labels {
                    if k != "os" && k != "arch" {
                        errs.push(format!("{at}.selector: key {k:?} not supported"));
                    }
                    if !v.is_string() {
                        errs.push(format!("{at}.selector.{k} is not a string"));
                    }
                }
            }
            _ => errs.push(format!("{at}.selector.matchLabels is missing or empty")),
        }
        match s(&p["uri"]) {
            Some(u) if u.starts_with("https://") && u.len() > "https://".len() => {}
            other => errs.push(format!("{at}.uri {other:?} is not an https URL")),
        }
        match s(&p["sha256"]) {
            Some(h)
                if h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {}
            other => errs.push(format!(
                "{at}.sha256 {other:?} is not 64 lowercase hex digits"
            )),
        }
        let bin = s(&p["bin"]).unwrap_or_default();
        if !stays_inside(&bin) {
            errs.push(format!(
                "{at}.bin {bin:?} is not a path inside the install directory"
            ));
        }
        let os = p["selector"]["matchLabels"]["os"].as_str().unwrap_or("");
        if os == "windows" && !bin.ends_with(".exe") {
            errs.push(format!("{at}.bin {bin:?}: a windows bin must end in .exe"));
        }
        let files = p["files"].as_array().cloned().unwrap_or_default();
        if files.is_empty() {
            errs.push(format!("{at}.files is missing or empty"));
        }
        let mut installed = BTreeSet::new();
        for (j, f) in files.iter().enumerate() {
            let (from, to) = (
                s(&f["from"]).unwrap_or_default(),
                s(&f["to"]).unwrap_or_default(),
            );
            if !stays_inside(&from) || !stays_inside(&to) {
                errs.push(format!(
                    "{at}.files[{j}] {from:?} -> {to:?} leaves its directory"
                ));
                continue;
            }
            if let Some(entries) = archive_entries
                && !entries.contains(&from)
            {
                errs.push(format!(
                    "{at}.files[{j}].from {from:?} is not in the archive {entries:?}"
                ));
            }
            let base = Path::new(&from)
                .file_name()
                .map(|b| b.to_string_lossy().into_owned());
            installed.insert(match to.as_str() {
                "." => base.unwrap_or_default(),
                _ => format!("{to}/{}", base.unwrap_or_default()),
            });
        }
        if !installed.contains(&bin) {
            errs.push(format!(
                "{at}.bin {bin:?} is not one of the installed files {installed:?}"
            ));
        }
    }
    errs
}

fn load_yaml(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

fn archive_entries(archive: &Path) -> BTreeSet<String> {
    stdout(&run(Command::new("tar").arg("-tzf").arg(archive)))
        .lines()
        .map(|l| l.trim_start_matches("./").to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// krew's install, for the platform of this machine: check the archive's sha256 against the
/// manifest, extract it, move `files` into the install directory, and link
/// `kubectl-<name>` in the bin directory to `bin`. Returns the install directory.
fn krew_install(manifest: &Value, archive: &Path, root: &Path) -> PathBuf {
    let (os, arch) = host_platform();
    let platform = manifest["spec"]["platforms"]
        .as_array()
        .and_then(|ps| {
            ps.iter()
                .find(|p| os_arch(&p["selector"]["matchLabels"]) == format!("{os}/{arch}"))
        })
        .unwrap_or_else(|| panic!("no platform {os}/{arch} in the manifest"));
    let uri = platform["uri"].as_str().unwrap();
    assert_eq!(
        uri.rsplit('/').next(),
        archive.file_name().and_then(|n| n.to_str()),
        "the manifest's uri names another archive"
    );
    assert_eq!(
        platform["sha256"].as_str().unwrap(),
        sha256_hex(archive),
        "sha256 of the archive"
    );

    let extracted = root.join("download");
    fs::create_dir_all(&extracted).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&extracted));

    let version = manifest["spec"]["version"].as_str().unwrap();
    let install_dir = root.join("store").join(PLUGIN).join(version);
    fs::create_dir_all(&install_dir).unwrap();
    for f in platform["files"].as_array().unwrap() {
        let from = extracted.join(f["from"].as_str().unwrap());
        let to_dir = install_dir.join(f["to"].as_str().unwrap());
        fs::create_dir_all(&to_dir).unwrap();
        let to = to_dir.join(from.file_name().unwrap());
        // fs::copy keeps the permission bits, as krew's rename does.
        fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    let bin_dir = root.join("bin");
    fs::create_dir_all(&bin_dir).unwrap();
    let bin = install_dir.join(platform["bin"].as_str().unwrap());
    std::os::unix::fs::symlink(
        &bin,
        bin_dir.join(format!("kubectl-{}", PLUGIN.replace('-', "_"))),
    )
    .unwrap();
    install_dir
}

fn kubectl_path() -> PathBuf {
    let out = run(Command::new("sh").args(["-c", "command -v kubectl"]));
    PathBuf::from(stdout(&out).trim())
}

#[test]
fn release_archive_installs_as_krew_would_and_kubectl_runs_and_completes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    run(Command::new("bash")
        .arg(Path::new(REPO).join("scripts/release.sh"))
        .args(["--binary", BIN, "--out"])
        .arg(&dist));

    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let (os, arch) = host_platform();
    let archive = dist.join(format!("kubectl-meta-{version}-{os}-{arch}.tar.gz"));
    let entries = archive_entries(&archive);
    assert_eq!(
        entries,
        ["LICENSE", "kubectl-meta", "kubectl_complete-meta"]
            .map(String::from)
            .into(),
        "archive contents"
    );
    let sha_file =
        fs::read_to_string(dist.join(format!("kubectl-meta-{version}-{os}-{arch}.tar.gz.sha256")))
            .unwrap();
    assert_eq!(
        sha_file.split_whitespace().next(),
        Some(sha256_hex(&archive).as_str())
    );

    let manifest = load_yaml(&dist.join("meta.yaml"));
    let errs = krew_errors(&manifest, PLUGIN, Some(&entries));
    assert!(
        errs.is_empty(),
        "the rendered manifest breaks krew's rules: {errs:#?}"
    );
    assert_eq!(manifest["spec"]["version"], version.as_str());
    assert_eq!(
        manifest["spec"]["platforms"].as_array().map(Vec::len),
        Some(1)
    );

    // Install and run it the way a user does after `kubectl krew install`.
    let krew_root = tmp.path().join("krew");
    let install_dir = krew_install(&manifest, &archive, &krew_root);
    let bin_dir = krew_root.join("bin");
    // The README's step for completion: krew does not link the helper, the user copies it.
    fs::copy(
        install_dir.join("kubectl_complete-meta"),
        bin_dir.join("kubectl_complete-meta"),
    )
    .unwrap();
    // kubectl itself by absolute path, since PATH holds only the bin directory.
    let kubectl_bin = kubectl_path();
    let k = |args: &[&str]| -> String {
        stdout(&run(Command::new(&kubectl_bin)
            .args(args)
            .env("PATH", &bin_dir)
            .env("KUBECONFIG", tmp.path().join("no-kubeconfig"))))
    };

    let plugins = k(&["plugin", "list"]);
    let link = bin_dir.join("kubectl-meta");
    assert!(
        plugins.lines().any(|l| l.trim() == link.to_string_lossy()),
        "kubectl plugin list does not show {}:\n{plugins}",
        link.display()
    );

    let v: Value = serde_json::from_str(&k(&["meta", "version", "-o", "json"])).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["platform"], format!("{os}/{arch}").as_str());
    assert!(
        v["gitCommit"].as_str().is_some_and(|c| !c.is_empty()),
        "{v}"
    );
    assert!(
        k(&["meta", "--version"])
            .starts_with(&format!("kubectl-meta {}", env!("CARGO_PKG_VERSION")))
    );

    // kubectl 1.26+ plugin completion: kubectl runs kubectl_complete-meta from PATH.
    let subs = k(&["__complete", "meta", ""]);
    let names: Vec<&str> = subs
        .lines()
        .map(|l| l.split('\t').next().unwrap_or(""))
        .collect();
    for want in ["init", "dev", "sandbox", "version", "completion"] {
        assert!(
            names.contains(&want),
            "`kubectl meta <TAB>` lacks {want}:\n{subs}"
        );
    }
    assert!(!names.contains(&"__complete"), "{subs}");
    assert_eq!(names.last(), Some(&":4"), "{subs}");
    let flags = k(&["__complete", "meta", "dev", "--"]);
    let names: Vec<&str> = flags
        .lines()
        .map(|l| l.split('\t').next().unwrap_or(""))
        .collect();
    for want in [
        "--sandbox",
        "--once",
        "--filename",
        "--hook-base-url",
        "--kubeconfig",
    ] {
        assert!(
            names.contains(&want),
            "`kubectl meta dev --<TAB>` lacks {want}:\n{flags}"
        );
    }
    let values = k(&["__complete", "meta", "dev", "-o", ""]);
    assert!(
        values.starts_with("human\t") && values.contains("\njson\t"),
        "{values}"
    );
}

#[test]
fn the_checked_in_manifest_follows_krews_rules_for_every_platform() {
    let manifest = load_yaml(&Path::new(REPO).join("plugin-manifest/meta.yaml"));
    let errs = krew_errors(&manifest, PLUGIN, None);
    assert!(
        errs.is_empty(),
        "plugin-manifest/meta.yaml breaks krew's rules: {errs:#?}"
    );
    let mut platforms: Vec<String> = manifest["spec"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| os_arch(&p["selector"]["matchLabels"]))
        .collect();
    platforms.sort();
    assert_eq!(platforms, ALL_PLATFORMS);
    // Its version is Cargo.toml's, so a release renders it unchanged but for the checksums.
    assert_eq!(
        manifest["spec"]["version"],
        format!("v{}", env!("CARGO_PKG_VERSION")).as_str()
    );
}

#[test]
fn the_validator_rejects_what_krew_rejects() {
    let good = load_yaml(&Path::new(REPO).join("plugin-manifest/meta.yaml"));
    assert!(krew_errors(&good, PLUGIN, None).is_empty());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut m = good.clone();
        edit(&mut m);
        krew_errors(&m, PLUGIN, None)
    };
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "apiVersion",
            Box::new(|m| m["apiVersion"] = "krew.googlecontainertools.github.com/v1alpha1".into()),
        ),
        ("kind", Box::new(|m| m["kind"] = "Plugins".into())),
        (
            "metadata.name",
            Box::new(|m| m["metadata"]["name"] = "kubectl-meta".into()),
        ),
        (
            "spec.version",
            Box::new(|m| m["spec"]["version"] = "0.1.0".into()),
        ),
        (
            "spec.version",
            Box::new(|m| m["spec"]["version"] = "v0.1".into()),
        ),
        (
            "spec.homepage",
            Box::new(|m| m["spec"]["homepage"] = "http://example.com".into()),
        ),
        (
            "spec.shortDescription",
            Box::new(|m| m["spec"]["shortDescription"] = Value::Null),
        ),
        (
            "spec.platforms",
            Box::new(|m| m["spec"]["platforms"] = Value::Array(vec![])),
        ),
        (
            "selector",
            Box::new(|m| {
                m["spec"]["platforms"][0]["selector"]["matchLabels"]["distro"] = "debian".into()
            }),
        ),
        (
            "selector",
            Box::new(|m| m["spec"]["platforms"][0]["selector"] = serde_json::json!({})),
        ),
        (
            "uri",
            Box::new(|m| m["spec"]["platforms"][0]["uri"] = "http://example.com/a.tar.gz".into()),
        ),
        (
            "sha256",
            Box::new(|m| m["spec"]["platforms"][0]["sha256"] = "ABCDEF".into()),
        ),
        (
            "bin",
            Box::new(|m| m["spec"]["platforms"][0]["bin"] = "../kubectl-meta".into()),
        ),
        (
            "bin",
            Box::new(|m| m["spec"]["platforms"][0]["bin"] = "kubectl-other".into()),
        ),
        (
            "bin",
            Box::new(|m| m["spec"]["platforms"][4]["bin"] = "kubectl-meta".into()),
        ),
        (
            "files",
            Box::new(|m| m["spec"]["platforms"][0]["files"][0]["from"] = "/etc/passwd".into()),
        ),
        (
            "files",
            Box::new(|m| m["spec"]["platforms"][0]["files"] = Value::Array(vec![])),
        ),
    ];
    for (what, edit) in &cases {
        let errs = broken(edit.as_ref());
        assert!(
            errs.iter().any(|e| e.contains(what)),
            "breaking {what} was not reported: {errs:?}"
        );
    }
    // `from` must name a file of the archive.
    let entries: BTreeSet<String> = ["kubectl-meta", "LICENSE"].map(String::from).into();
    let errs = krew_errors(&good, PLUGIN, Some(&entries));
    assert!(
        errs.iter().any(|e| e.contains("kubectl_complete-meta")),
        "{errs:?}"
    );
}

#[test]
fn completion_scripts_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubectl-meta"),
        ("fish", "complete -c kubectl-meta"),
    ] {
        let script = stdout(&run(Command::new(BIN).args(["completion", shell])));
        assert!(script.contains(marker), "{shell} script lacks {marker:?}");
        assert!(
            script.contains("sandbox") && !script.contains("__complete"),
            "{shell}"
        );
    }
}

#[test]
fn the_release_workflow_parses_and_builds_every_platform_of_the_manifest() {
    let wf = load_yaml(&Path::new(REPO).join(".github/workflows/release.yml"));
    let include = wf["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs.build.strategy.matrix.include in {wf}"));
    let mut built: Vec<String> = include.iter().map(os_arch).collect();
    built.sort();
    assert_eq!(built, ALL_PLATFORMS);
    for m in include {
        assert!(m["target"].as_str().is_some_and(|t| !t.is_empty()), "{m}");
        assert!(m["runner"].as_str().is_some_and(|t| !t.is_empty()), "{m}");
    }
    let steps = wf["jobs"]["manifest"]["steps"].to_string();
    assert!(
        steps.contains("scripts/release.sh --manifest-only"),
        "{steps}"
    );
}
