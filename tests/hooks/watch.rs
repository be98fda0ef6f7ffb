//! The hot-reload file watcher with real files: batching, debounce, ignore rules, single files
//! saved by rename, and errors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubectl_meta::devloop::watch::{ChangeBatch, FileWatcher, WatchConfig, WatchError};
use tokio::sync::mpsc;

/// Generous bound for the first batch on a busy machine.
const LONG: Duration = Duration::from_secs(30);

/// Long enough that a burst of writes in a tight loop is one burst even on a busy machine.
const DEBOUNCE: Duration = Duration::from_millis(250);

fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    (tmp, dir)
}

fn start(paths: &[&Path]) -> (FileWatcher, mpsc::Receiver<ChangeBatch>) {
    FileWatcher::start(WatchConfig {
        paths: paths.iter().map(|p| p.to_path_buf()).collect(),
        debounce: DEBOUNCE,
        exclude: Vec::new(),
    })
    .unwrap()
}

/// The batches of one burst: wait for the first (bounded), then take more until none came for
/// three debounce periods.
async fn collect(rx: &mut mpsc::Receiver<ChangeBatch>) -> Vec<ChangeBatch> {
    let first = tokio::time::timeout(LONG, rx.recv())
        .await
        .expect("no batch in time")
        .expect("watcher ended");
    let mut batches = vec![first];
    let overall = tokio::time::Instant::now() + LONG;
    while tokio::time::Instant::now() < overall {
        match tokio::time::timeout(DEBOUNCE * 3, rx.recv()).await {
            Ok(Some(batch)) => batches.push(batch),
            Ok(None) | Err(_) => break,
        }
    }
    batches
}

fn set(paths: &[&Path]) -> BTreeSet<PathBuf> {
    paths.iter().map(|p| p.to_path_buf()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_gives_one_batch_with_the_file() {
    let (_tmp, dir) = canonical_tempdir();
    let file = dir.join("sync.py");
    std::fs::write(&file, "v1").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let (_watcher, mut rx) = start(&[&dir]);

    std::fs::write(&file, "v2").unwrap();
    let batches = collect(&mut rx).await;
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].paths, set(&[&file]));

    // Recursive: a new file in a subdirectory.
    let nested = dir.join("sub/lib.py");
    std::fs::write(&nested, "x").unwrap();
    let batches = collect(&mut rx).await;
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].paths, set(&[&nested]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_rapid_writes_are_one_batch() {
    let (_tmp, dir) = canonical_tempdir();
    let file = dir.join("server.py");
    std::fs::write(&file, "").unwrap();
    let (_watcher, mut rx) = start(&[&dir]);

    for i in 0..20 {
        std::fs::write(&file, format!("version {i}")).unwrap();
    }
    let batches = collect(&mut rx).await;
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].paths, set(&[&file]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_paths_give_no_batch() {
    // A repository (a `.git` directory marks its root) whose .gitignore, one level above the
    // watched directory, ignores build/ and *.log.
    let (_tmp, repo) = canonical_tempdir();
    std::fs::create_dir(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".gitignore"), "build/\n*.log\n").unwrap();
    let hooks = repo.join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let (_watcher, mut rx) = start(&[&hooks]);

    std::fs::write(hooks.join(".sync.py.swp"), "swap").unwrap();
    std::fs::write(hooks.join("sync.py~"), "backup").unwrap();
    std::fs::write(hooks.join("4913"), "").unwrap();
    std::fs::remove_file(hooks.join("4913")).unwrap();
    std::fs::write(hooks.join("hook.log"), "log").unwrap();
    std::fs::create_dir_all(hooks.join("build/out")).unwrap();
    std::fs::write(hooks.join("build/out/bundle.js"), "js").unwrap();
    std::fs::create_dir(hooks.join("__pycache__")).unwrap();
    std::fs::write(hooks.join("__pycache__/sync.cpython-312.pyc"), "pyc").unwrap();
    std::fs::create_dir(hooks.join(".git")).unwrap();
    std::fs::write(hooks.join(".git/index"), "").unwrap();
    // Had any of those counted, they would make a batch of their own before the real change
    // (not needed for the assertion below to hold, only to make a failure obvious).
    tokio::time::sleep(DEBOUNCE * 2).await;

    let real = hooks.join("sync.py");
    std::fs::write(&real, "real").unwrap();
    let batches = collect(&mut rx).await;
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].paths, set(&[&real]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watched_directorys_own_gitignore_applies() {
    let (_tmp, dir) = canonical_tempdir();
    std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
    let (_watcher, mut rx) = start(&[&dir]);

    std::fs::create_dir(dir.join("build")).unwrap();
    std::fs::write(dir.join("build/out.txt"), "out").unwrap();
    let real = dir.join("main.py");
    std::fs::write(&real, "real").unwrap();
    let batches = collect(&mut rx).await;
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].paths, set(&[&real]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_file_survives_save_by_rename() {
    let (_tmp, dir) = canonical_tempdir();
    let file = dir.join("server.py");
    std::fs::write(&file, "v1").unwrap();
    let (_watcher, mut rx) = start(&[&file]);

    for version in ["v2", "v3"] {
        // Another file in the same directory does not count.
        std::fs::write(dir.join("other.py"), version).unwrap();
        // Save by rename, as many editors do: a new inode takes the file's name.
        let tmp_file = dir.join(".server.py.saving");
        std::fs::write(&tmp_file, version).unwrap();
        std::fs::rename(&tmp_file, &file).unwrap();
        let batches = collect(&mut rx).await;
        assert_eq!(batches.len(), 1, "{version}: {batches:?}");
        assert_eq!(batches[0].paths, set(&[&file]), "{version}");
    }

    // A plain write still counts after the renames.
    std::fs::write(&file, "v4").unwrap();
    let batches = collect(&mut rx).await;
    assert_eq!(batches[0].paths, set(&[&file]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_path_is_an_error_naming_it() {
    let (_tmp, dir) = canonical_tempdir();
    let missing = dir.join("no-such-hooks");
    let e = FileWatcher::start(WatchConfig::new(vec![dir.clone(), missing.clone()])).unwrap_err();
    assert!(
        matches!(&e, WatchError::NotFound { path, .. } if *path == missing),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot watch {}: no such file or directory",
            missing.display()
        )),
        "{msg}"
    );
    let e = FileWatcher::start(WatchConfig::new(vec![])).unwrap_err();
    assert!(matches!(e, WatchError::NoPaths), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_watcher_ends_the_batches() {
    let (_tmp, dir) = canonical_tempdir();
    let (watcher, mut rx) = start(&[&dir]);
    drop(watcher);
    let end = tokio::time::timeout(LONG, rx.recv()).await.unwrap();
    assert_eq!(end, None);
}

#[test]
fn starting_outside_a_runtime_is_an_error() {
    let (_tmp, dir) = canonical_tempdir();
    let e = FileWatcher::start(WatchConfig::new(vec![dir])).unwrap_err();
    assert!(matches!(e, WatchError::NoRuntime), "{e}");
}
