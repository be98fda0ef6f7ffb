//! A debounced, ignore-aware file watcher for hot reload.
//!
//! [`FileWatcher::start`] watches files and directories (directories recursively) and sends one
//! [`ChangeBatch`] per burst of changes: the batch goes out once no relevant event arrived for the
//! debounce period, measured from the *last* event (each event resets the timer). While the
//! receiver has not taken the previous batch, new changes are merged into the pending one rather
//! than queued, so a slow consumer sees one batch with everything, never a backlog.
//!
//! Ignored, and never part of a batch (a burst of only ignored paths sends nothing):
//! - anything under a `.git` directory;
//! - editor and tool leftovers: `*.swp`, `*.swo`, `*.swx`, `*~`, `.#*`, `#*#`, `4913` (vim's
//!   write probe), `*.tmp`, `*.pyc`, `.DS_Store`, and anything under `__pycache__`;
//! - paths matched by `.gitignore` files. The files consulted are those of the directory of the
//!   changed path and of each directory above it, up to the *ignore root*: the nearest directory,
//!   at or above the watched one, that holds a `.git` entry (the repository root); with no `.git`
//!   anywhere above, the watched directory itself. The deepest file with a matching rule decides,
//!   as in git, and `!negations` are honoured; `.git/info/exclude` of the repository counts too.
//!   A changed `.gitignore` is read again. Global git excludes (`core.excludesFile`) are not read.
//! - access events (opening, reading, closing a file): only creations, writes, metadata changes,
//!   renames and removals count.
//!
//! A single file is watched through its parent directory (not recursively), filtered to that
//! file: an editor that saves by writing a temporary file and renaming it over the original
//! replaces the inode, which a watch on the file itself would lose. Paths in batches are
//! absolute and canonical (symlinks in the watched paths resolved).
//!
//! If the kernel's event queue overflows, the batch names the watched paths themselves (some
//! changes were lost; treat it as "anything may have changed").

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::event::{EventKind, Flag};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Default for [`WatchConfig::debounce`].
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);

/// What to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchConfig {
    /// Files or directories (directories are watched recursively).
    pub paths: Vec<PathBuf>,
    /// Quiet time after the last event before a batch is sent ([`DEFAULT_DEBOUNCE`]).
    pub debounce: Duration,
    /// Directories whose changes never count, even under a watched one (what the dev loop
    /// writes itself: `--record`, `--dump-requests`).
    pub exclude: Vec<PathBuf>,
}

impl WatchConfig {
    /// Watch `paths` with the default debounce, nothing excluded.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        WatchConfig {
            paths,
            debounce: DEFAULT_DEBOUNCE,
            exclude: Vec::new(),
        }
    }
}

/// The paths changed in one burst of changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeBatch {
    /// Absolute paths that were created, written, renamed (both names) or removed.
    pub paths: BTreeSet<PathBuf>,
}

/// Why watching could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// No paths were given.
    #[error("nothing to watch: give at least one file or directory")]
    NoPaths,
    /// A path to watch does not exist (or cannot be read).
    #[error("cannot watch {}: {reason}; check the path (it is taken relative to the current directory)", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// The system refused to watch a path.
    #[error("cannot watch {}: {message}", path.display())]
    Watch {
        /// The directory that could not be watched.
        path: PathBuf,
        /// What went wrong, with a hint.
        message: String,
    },
    /// [`FileWatcher::start`] was called outside a tokio runtime.
    #[error("the file watcher needs a tokio runtime (call FileWatcher::start from async code)")]
    NoRuntime,
}

/// A running watch; dropping it stops watching (the receiver then ends).
///
/// Besides the batches, it tells when a batch starts collecting ([`FileWatcher::batch_started`]):
/// a file changed, and its batch will come once the debounce period is quiet. The dev loop takes
/// the hooks' last exchanges then, so a replay compares against answers of the old version even
/// when a sync already ran the edited exec hook during the debounce period.
pub struct FileWatcher {
    _watcher: RecommendedWatcher,
    debouncer: JoinHandle<()>,
    started: watch::Receiver<u64>,
}

impl std::fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatcher").finish_non_exhaustive()
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.debouncer.abort();
    }
}

impl FileWatcher {
    /// A counter that goes up each time a batch starts collecting (its first change is seen).
    pub fn batch_started(&self) -> watch::Receiver<u64> {
        self.started.clone()
    }

    /// Start watching; batches arrive on the returned receiver.
    ///
    /// Every path must exist. The watches are in place when this returns, so a change made
    /// afterwards is seen. Must be called within a tokio runtime.
    pub fn start(
        cfg: WatchConfig,
    ) -> Result<(FileWatcher, mpsc::Receiver<ChangeBatch>), WatchError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| WatchError::NoRuntime)?;
        if cfg.paths.is_empty() {
            return Err(WatchError::NoPaths);
        }
        let mut filter = Filter::new(&cfg.paths)?;
        filter.exclude = cfg
            .exclude
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        let watches = filter.watches();
        let (raw_tx, raw_rx) = mpsc::unbounded_channel::<Vec<PathBuf>>();
        let (batch_tx, batch_rx) = mpsc::channel(1);
        let mut handler_filter = filter;
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let paths = match event {
                    Ok(event) => handler_filter.relevant(&event),
                    Err(e) => {
                        tracing::warn!("file watcher error: {e}");
                        return;
                    }
                };
                if !paths.is_empty() {
                    // The debouncer is gone only when the watcher is being dropped.
                    let _ = raw_tx.send(paths);
                }
            })
            .map_err(|e| WatchError::Watch {
                path: cfg.paths[0].clone(),
                message: watch_hint(&e),
            })?;
        for (path, mode) in &watches {
            watcher.watch(path, *mode).map_err(|e| WatchError::Watch {
                path: path.clone(),
                message: watch_hint(&e),
            })?;
        }
        let (started_tx, started) = watch::channel(0);
        let debouncer = runtime.spawn(debounce(raw_rx, batch_tx, started_tx, cfg.debounce));
        Ok((
            FileWatcher {
                _watcher: watcher,
                debouncer,
                started,
            },
            batch_rx,
        ))
    }
}

/// Why notify failed, with what to do about the usual cause.
fn watch_hint(e: &notify::Error) -> String {
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => format!(
            "{e}: the system's limit of watched directories is reached; watch fewer or smaller \
             directories, or raise it (sysctl fs.inotify.max_user_watches)"
        ),
        _ => e.to_string(),
    }
}

/// Collect paths until `debounce` passed without any, then send them as one batch; changes that
/// arrive while the receiver is busy are merged into the pending batch.
async fn debounce(
    mut raw: mpsc::UnboundedReceiver<Vec<PathBuf>>,
    out: mpsc::Sender<ChangeBatch>,
    started: watch::Sender<u64>,
    debounce: Duration,
) {
    let mut pending = BTreeSet::new();
    loop {
        if pending.is_empty() {
            match raw.recv().await {
                Some(paths) => pending.extend(paths),
                None => return,
            }
            started.send_modify(|n| *n += 1);
        }
        // Quiet period: every new event restarts it.
        loop {
            match tokio::time::timeout(debounce, raw.recv()).await {
                Ok(Some(paths)) => pending.extend(paths),
                Ok(None) => return,
                Err(_) => break,
            }
        }
        tokio::select! {
            permit = out.reserve() => match permit {
                Ok(permit) => permit.send(ChangeBatch {
                    paths: std::mem::take(&mut pending),
                }),
                Err(_) => return, // Nobody listens any more.
            },
            more = raw.recv() => match more {
                // The receiver is busy: merge, and wait for quiet again.
                Some(paths) => pending.extend(paths),
                None => return,
            },
        }
    }
}

/// One watched path.
#[derive(Debug, Clone)]
enum Root {
    /// A directory, watched recursively.
    Dir(PathBuf),
    /// A single file, watched through its parent directory.
    File(PathBuf),
}

/// Decides which paths of an event count.
struct Filter {
    roots: Vec<Root>,
    /// `(directory, ignore root)`: which `.gitignore` files apply under each watched directory.
    ignore_roots: Vec<(PathBuf, PathBuf)>,
    /// Parsed `.gitignore` per directory (`None`: the directory has none).
    gitignores: HashMap<PathBuf, Option<Arc<Gitignore>>>,
    /// `.git/info/exclude` per repository root.
    excludes: HashMap<PathBuf, Option<Arc<Gitignore>>>,
    /// [`WatchConfig::exclude`], canonical.
    exclude: Vec<PathBuf>,
}

impl Filter {
    fn new(paths: &[PathBuf]) -> Result<Self, WatchError> {
        let mut roots = Vec::new();
        let mut ignore_roots = Vec::new();
        for given in paths {
            let path = std::fs::canonicalize(given).map_err(|e| WatchError::NotFound {
                path: given.clone(),
                reason: match e.kind() {
                    std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
                    _ => e.to_string(),
                },
            })?;
            let dir = if path.is_dir() {
                roots.push(Root::Dir(path.clone()));
                path
            } else {
                let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
                roots.push(Root::File(path));
                parent
            };
            let ignore_root = find_ignore_root(&dir);
            ignore_roots.push((dir, ignore_root));
        }
        let mut filter = Filter {
            roots,
            ignore_roots,
            gitignores: HashMap::new(),
            excludes: HashMap::new(),
            exclude: Vec::new(),
        };
        // A directory watched on purpose counts even if the repository ignores it: only the
        // `.gitignore` files inside it apply then.
        for i in 0..filter.ignore_roots.len() {
            let (dir, root) = filter.ignore_roots[i].clone();
            if dir != root && filter.gitignored(&dir, &root) {
                filter.ignore_roots[i].1 = dir;
            }
        }
        Ok(filter)
    }

    /// The directories to hand to notify: watched directories recursively, the parents of
    /// watched files non-recursively unless a recursive watch covers them already.
    fn watches(&self) -> Vec<(PathBuf, RecursiveMode)> {
        let dirs: Vec<&PathBuf> = self
            .roots
            .iter()
            .filter_map(|r| match r {
                Root::Dir(d) => Some(d),
                Root::File(_) => None,
            })
            .collect();
        let mut out: Vec<(PathBuf, RecursiveMode)> = Vec::new();
        for dir in &dirs {
            // A directory inside another watched one is covered by it.
            let covered = dirs.iter().any(|d| d != dir && dir.starts_with(d));
            if !covered && !out.iter().any(|(p, _)| p == *dir) {
                out.push(((*dir).clone(), RecursiveMode::Recursive));
            }
        }
        for root in &self.roots {
            if let Root::File(file) = root {
                let parent = file.parent().map(Path::to_path_buf).unwrap_or_default();
                let covered = dirs.iter().any(|d| parent.starts_with(d));
                if !covered && !out.iter().any(|(p, _)| *p == parent) {
                    out.push((parent, RecursiveMode::NonRecursive));
                }
            }
        }
        out
    }

    /// The paths of `event` that count as changes (empty when none).
    fn relevant(&mut self, event: &notify::Event) -> Vec<PathBuf> {
        if event.flag() == Some(Flag::Rescan) {
            return self
                .roots
                .iter()
                .map(|r| match r {
                    Root::Dir(p) | Root::File(p) => p.clone(),
                })
                .collect();
        }
        if matches!(event.kind, EventKind::Access(_)) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for path in &event.paths {
            if path.file_name().is_some_and(|n| n == ".gitignore") {
                // Read it again when needed.
                if let Some(dir) = path.parent() {
                    self.gitignores.remove(dir);
                }
            }
            if self.is_relevant(path) {
                out.push(path.clone());
            }
        }
        out
    }

    /// Whether a change of `path` counts: a watched file, or under a watched directory and not
    /// ignored.
    fn is_relevant(&mut self, path: &Path) -> bool {
        if self.exclude.iter().any(|d| path.starts_with(d)) {
            return false;
        }
        // A file watched on purpose always counts, whatever its name or the ignore files say.
        if self
            .roots
            .iter()
            .any(|r| matches!(r, Root::File(f) if path == f))
        {
            return true;
        }
        if !self
            .roots
            .iter()
            .any(|r| matches!(r, Root::Dir(d) if path.starts_with(d)))
        {
            return false;
        }
        let Some(ignore_root) = self
            .ignore_roots
            .iter()
            .filter(|(dir, _)| path.starts_with(dir))
            .map(|(_, root)| root.clone())
            .next()
        else {
            return false;
        };
        let relative = path.strip_prefix(&ignore_root).unwrap_or(path);
        !is_tool_file(relative) && !self.gitignored(path, &ignore_root)
    }

    /// Whether the `.gitignore` files between `ignore_root` and `path` (or the repository's
    /// `.git/info/exclude`) ignore `path`.
    fn gitignored(&mut self, path: &Path, ignore_root: &Path) -> bool {
        let is_dir = path.is_dir();
        // Deepest directory first: the most specific rule wins.
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(ignore_root) {
                break;
            }
            if let Some(gi) = self.gitignore_of(d) {
                match gi.matched_path_or_any_parents(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            if d == ignore_root {
                break;
            }
            dir = d.parent();
        }
        if let Some(exclude) = self.exclude_of(ignore_root) {
            return exclude
                .matched_path_or_any_parents(path, is_dir)
                .is_ignore();
        }
        false
    }

    fn gitignore_of(&mut self, dir: &Path) -> Option<Arc<Gitignore>> {
        self.gitignores
            .entry(dir.to_path_buf())
            .or_insert_with(|| load_ignore_file(dir, &dir.join(".gitignore")))
            .clone()
    }

    fn exclude_of(&mut self, root: &Path) -> Option<Arc<Gitignore>> {
        self.excludes
            .entry(root.to_path_buf())
            .or_insert_with(|| {
                load_ignore_file(root, &root.join(".git").join("info").join("exclude"))
            })
            .clone()
    }
}

/// Parse an ignore file whose patterns are relative to `dir`; `None` when there is none.
/// Lines that are not valid patterns are skipped (as git does).
fn load_ignore_file(dir: &Path, file: &Path) -> Option<Arc<Gitignore>> {
    if !file.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(dir);
    if let Some(e) = builder.add(file) {
        tracing::debug!("some lines of {} are not used: {e}", file.display());
    }
    match builder.build() {
        Ok(gi) if !gi.is_empty() => Some(Arc::new(gi)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", file.display());
            None
        }
    }
}

/// The nearest directory at or above `dir` holding a `.git` entry, else `dir` itself.
fn find_ignore_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}

/// Whether `path` (relative to the ignore root) is under `.git` or `__pycache__`, or is an
/// editor or tool leftover by its name.
fn is_tool_file(path: &Path) -> bool {
    let in_tool_dir = path.components().any(|c| match c {
        Component::Normal(name) => name == ".git" || name == "__pycache__",
        _ => false,
    });
    if in_tool_dir {
        return true;
    }
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    let name = name.as_ref();
    name == "4913"
        || name == ".DS_Store"
        || name.starts_with(".#")
        || (name.len() >= 2 && name.starts_with('#') && name.ends_with('#'))
        || name.ends_with('~')
        || [".swp", ".swo", ".swx", ".tmp", ".pyc"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, ModifyKind, RenameMode};

    #[test]
    fn tool_files_are_recognized() {
        for name in [
            ".main.py.swp",
            "x.swo",
            "x.swx",
            "main.py~",
            ".#main.py",
            "#main.py#",
            "4913",
            "upload.tmp",
            "m.cpython-312.pyc",
            ".DS_Store",
            ".git/index",
            "sub/.git/HEAD",
            "__pycache__/m.py",
            "pkg/__pycache__",
        ] {
            assert!(is_tool_file(Path::new(name)), "{name}");
        }
        for name in [
            "main.py",
            "swp",
            "#notes",
            "4913.py",
            "a.tmpl",
            ".gitignore",
            ".github/workflows/ci.yml",
            "pycache/x",
        ] {
            assert!(!is_tool_file(Path::new(name)), "{name}");
        }
    }

    fn event(kind: EventKind, paths: &[&Path]) -> notify::Event {
        let mut e = notify::Event::new(kind);
        for p in paths {
            e = e.add_path(p.to_path_buf());
        }
        e
    }

    #[test]
    fn gitignore_of_the_repository_root_and_nested_ones_apply() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".gitignore"), "build/\n*.log\n!keep.log\n").unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "secret.txt\n").unwrap();
        let hooks = repo.join("hooks");
        std::fs::create_dir_all(hooks.join("build")).unwrap();
        std::fs::create_dir_all(hooks.join("gen")).unwrap();
        std::fs::write(hooks.join("gen/.gitignore"), "/*.json\n").unwrap();

        let mut f = Filter::new(std::slice::from_ref(&hooks)).unwrap();
        assert!(matches!(&f.roots[..], [Root::Dir(d)] if *d == hooks));
        assert_eq!(f.ignore_roots[0].1, repo);
        assert!(f.is_relevant(&hooks.join("sync.py")));
        assert!(!f.is_relevant(&hooks.join("build")));
        assert!(!f.is_relevant(&hooks.join("build/out/x.py")));
        assert!(!f.is_relevant(&hooks.join("debug.log")));
        assert!(f.is_relevant(&hooks.join("keep.log")));
        assert!(!f.is_relevant(&hooks.join("secret.txt")));
        assert!(!f.is_relevant(&hooks.join("gen/a.json")));
        assert!(f.is_relevant(&hooks.join("gen/sub/a.json")));
        assert!(!f.is_relevant(&hooks.join(".x.py.swp")));
        // Outside the watched directory.
        assert!(!f.is_relevant(&repo.join("other.py")));

        // Named on purpose, an ignored directory or file counts; the ignore files inside the
        // directory still apply.
        std::fs::write(hooks.join("build/.gitignore"), "*.o\n").unwrap();
        std::fs::write(hooks.join("secret.txt"), "").unwrap();
        let mut named = Filter::new(&[hooks.join("build"), hooks.join("secret.txt")]).unwrap();
        assert!(named.is_relevant(&hooks.join("build/main.py")));
        assert!(!named.is_relevant(&hooks.join("build/main.o")));
        assert!(named.is_relevant(&hooks.join("secret.txt")));
        assert!(!named.is_relevant(&hooks.join("other.py")));

        // A changed .gitignore is read again.
        std::fs::write(hooks.join("gen/.gitignore"), "").unwrap();
        let paths = f.relevant(&event(
            EventKind::Modify(ModifyKind::Any),
            &[&hooks.join("gen/.gitignore")],
        ));
        assert_eq!(paths, vec![hooks.join("gen/.gitignore")]);
        assert!(f.is_relevant(&hooks.join("gen/a.json")));
    }

    #[test]
    fn without_a_repository_the_watched_directory_is_the_ignore_root() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        if find_ignore_root(&dir) != dir {
            // The temporary directory is inside a git repository here: nothing to check.
            return;
        }
        std::fs::write(dir.join(".gitignore"), "out/\n").unwrap();
        let mut f = Filter::new(std::slice::from_ref(&dir)).unwrap();
        assert!(!f.is_relevant(&dir.join("out/a")));
        assert!(f.is_relevant(&dir.join("a")));
    }

    #[test]
    fn single_files_are_watched_through_their_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let file = dir.join("server.py");
        std::fs::write(&file, "").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        let mut f = Filter::new(std::slice::from_ref(&file)).unwrap();
        assert_eq!(
            f.watches(),
            vec![(dir.clone(), RecursiveMode::NonRecursive)]
        );
        // Rename over the file: only the file's own path counts.
        let tmp_file = dir.join("server.py.new");
        let paths = f.relevant(&event(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &[&tmp_file, &file],
        ));
        assert_eq!(paths, vec![file.clone()]);
        assert!(
            f.relevant(&event(EventKind::Access(AccessKind::Any), &[&file]))
                .is_empty()
        );
        assert!(
            f.relevant(&event(
                EventKind::Create(CreateKind::File),
                &[&dir.join("other.py")]
            ))
            .is_empty()
        );

        // A file inside a watched directory needs no watch of its own.
        let mut both = Filter::new(&[dir.join("sub"), dir.clone(), file.clone()]).unwrap();
        assert_eq!(
            both.watches(),
            vec![(dir.clone(), RecursiveMode::Recursive)]
        );
        assert!(both.is_relevant(&dir.join("other.py")));

        let overflow = notify::Event::new(EventKind::Other).set_flag(Flag::Rescan);
        assert_eq!(f.relevant(&overflow), vec![file]);
    }

    #[test]
    fn missing_paths_are_named() {
        let e = Filter::new(&[PathBuf::from("/nonexistent/kubectl-meta/hooks")])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(
                "cannot watch /nonexistent/kubectl-meta/hooks: no such file or directory"
            ),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn debounce_waits_for_quiet_after_the_last_event() {
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let (out_tx, mut out_rx) = mpsc::channel(1);
        let (started_tx, started_rx) = watch::channel(0);
        let task = tokio::spawn(debounce(
            raw_rx,
            out_tx,
            started_tx,
            Duration::from_millis(100),
        ));
        let start = tokio::time::Instant::now();
        for i in 0..5 {
            raw_tx
                .send(vec![PathBuf::from(format!("/f{}", i % 2))])
                .unwrap();
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        let batch = out_rx.recv().await.unwrap();
        // Last event at 240ms, quiet until 340ms.
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(340), "{waited:?}");
        assert!(waited < Duration::from_millis(400), "{waited:?}");
        assert_eq!(
            batch.paths,
            BTreeSet::from([PathBuf::from("/f0"), PathBuf::from("/f1")])
        );
        assert_eq!(*started_rx.borrow(), 1, "five changes, one batch started");

        // While the receiver does not take batches, changes merge into one.
        raw_tx.send(vec![PathBuf::from("/a")]).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        raw_tx.send(vec![PathBuf::from("/b")]).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        raw_tx.send(vec![PathBuf::from("/c")]).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            out_rx.recv().await.unwrap().paths,
            BTreeSet::from([PathBuf::from("/a")])
        );
        assert_eq!(
            out_rx.recv().await.unwrap().paths,
            BTreeSet::from([PathBuf::from("/b"), PathBuf::from("/c")])
        );
        assert_eq!(*started_rx.borrow(), 3, "batches /a and /b+/c started");
        drop(raw_tx);
        task.await.unwrap();
        assert!(out_rx.recv().await.is_none());
    }
}
