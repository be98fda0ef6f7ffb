//! Build facts for `kubectl meta version`: the git commit and the target triple, as the
//! compile-time environment variables `KUBECTL_META_GIT_COMMIT` and `KUBECTL_META_TARGET`.
//!
//! The commit comes from, in order: the `KUBECTL_META_GIT_COMMIT` environment variable (for
//! packagers building from a source tarball), `git rev-parse HEAD` when this crate is the top of
//! a git work tree, the `.cargo_vcs_info.json` that `cargo package` writes into a crate tarball,
//! else `unknown`. A missing git or a checkout that is not ours is never an error.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KUBECTL_META_GIT_COMMIT");

    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=KUBECTL_META_TARGET={target}");

    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = std::env::var("KUBECTL_META_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(|| git_commit(&manifest_dir))
        .or_else(|| vcs_info_commit(&manifest_dir))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUBECTL_META_GIT_COMMIT={commit}");
}

/// Runs git in `dir`; its trimmed stdout when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The commit of HEAD, if `dir` is the top of a git work tree (not a crate unpacked somewhere
/// inside an unrelated repository). Also tells cargo to re-run this script when HEAD moves.
fn git_commit(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), dir) {
        return None;
    }
    let commit = git(dir, &["rev-parse", "HEAD"])?;
    // HEAD lives in the (worktree's) git dir; branch refs in the common dir, loose or packed.
    let abs = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    if let Some(git_dir) = git(dir, &["rev-parse", "--git-dir"]).map(abs) {
        watch(&git_dir.join("HEAD"));
    }
    if let Some(common) = git(dir, &["rev-parse", "--git-common-dir"]).map(abs) {
        watch(&common.join("packed-refs"));
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            watch(&common.join(branch));
        }
    }
    Some(commit)
}

/// The commit `cargo package` recorded in a crate tarball (`{"git": {"sha1": "..."}}`).
fn vcs_info_commit(dir: &Path) -> Option<String> {
    let path = dir.join(".cargo_vcs_info.json");
    watch(&path);
    let text = std::fs::read_to_string(path).ok()?;
    let after = &text[text.find("\"sha1\"")? + "\"sha1\"".len()..];
    let start = after.find('"')? + 1;
    let len = after[start..].find('"')?;
    let sha = &after[start..start + len];
    (sha.len() >= 7 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then(|| sha.to_string())
}

/// Re-run this script when `path` changes. Only for existing files: cargo re-runs a script on
/// every build while a watched path is missing, which would rebuild the crate every time.
fn watch(path: &Path) {
    if path.is_file() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
