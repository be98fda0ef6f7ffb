//! The dev loop around the engine: edit a hook, save, and see the new behaviour on every parent.
//!
//! [`DevLoop`] owns the [`Engine`], the managed hook server (optional) and the file watcher, and
//! reacts to two kinds of input:
//! - file changes ([`watch`]), classified by [`classify`]: a controller definition
//!   is re-read and validated (a bad edit is reported and the running definition kept), then its
//!   controller restarted; a managed server's file restarts the server (calls wait for it to be
//!   ready again; a new version that does not start leaves every child as it is); an exec hook's
//!   file needs no restart. After a hook change every parent is resynced at once; the last
//!   request of every parent (taken before the resync) is then replayed to the new hook and the
//!   answers compared ([`crate::engine::plan::replay`]), off the path to the new children;
//! - commands ([`control`]): resync one parent or all, pause/resume writes, replay, from the
//!   keyboard, signals, or `kubectl meta dev --resync/--pause/--resume` via a control socket.

pub mod control;
pub mod project;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use crate::devloop::watch::{ChangeBatch, FileWatcher, WatchConfig};
use crate::engine::Engine;
use crate::engine::HookGate;
use crate::engine::events::{EngineEvent, EventBus};
use crate::hooks::HookTarget;
use crate::hooks::endpoint;
use crate::hooks::server::{ManagedServer, ServerConfig, ServerLine, ServerState, Stream};
use crate::spec::{self, ControllerDef};
use control::{Command, Request};

/// How long a replay waits for the resync after a reload to finish before it runs anyway.
const REPLAY_WAIT: Duration = Duration::from_secs(60);

/// How the dev loop runs.
#[derive(Debug, Clone)]
pub struct DevLoopConfig {
    /// The `-f` paths (files or directories): definitions are reloaded from them.
    pub files: Vec<PathBuf>,
    /// `--watch` paths; empty means the defaults (the managed server's script directory or
    /// working directory, every exec hook's directory, and the `-f` paths).
    pub watch: Vec<PathBuf>,
    /// Quiet time after the last change before reacting.
    pub debounce: Duration,
    /// The managed hook server, if any.
    pub server: Option<ServerConfig>,
    /// Webhook URLs starting with this go to the managed server (calls wait for it).
    pub server_base_url: Option<String>,
    /// Watch files at all (`--once` does not).
    pub watch_files: bool,
    /// Directories among `files` are read recursively (`-R`).
    pub recursive: bool,
    /// `-l/--selector`: only definitions with matching labels run (also after a reload).
    pub selector: Option<spec::ControllerSelector>,
    /// Paths whose changes never reload, not even watched: the directories the loop writes
    /// itself (`--record`, `--dump-requests`: a case written next to a hook would reload it and
    /// resync, writing another) and a project's never-watched paths (see [`project`]).
    pub exclude: Vec<PathBuf>,
    /// A project's hook builds, run again on a change before the restart (see [`project`]).
    pub builds: Vec<crate::project::Build>,
}

/// Why the dev loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum DevLoopError {
    /// The file watcher could not be set up.
    #[error("cannot watch files: {0}")]
    Watch(String),
}

/// The managed server and the last reason it is not usable.
#[derive(Default)]
struct ServerSlot {
    server: RwLock<Option<ManagedServer>>,
    last_error: RwLock<String>,
    base_url: String,
}

impl ServerSlot {
    fn get(&self) -> Option<ManagedServer> {
        self.server.read().ok().and_then(|s| s.clone())
    }
}

/// Webhook calls to the managed server wait for it (see [`HookGate`]).
struct ServerGate(Arc<ServerSlot>);

impl HookGate for ServerGate {
    fn covers(&self, url: &str) -> bool {
        url.starts_with(&self.0.base_url)
    }

    fn wait_ready(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match self.0.get() {
                Some(s) => s.wait_ready(timeout).await.map_err(|e| e.to_string()),
                None => Err(self
                    .0
                    .last_error
                    .read()
                    .map(|e| e.clone())
                    .unwrap_or_default()),
            }
        })
    }
}

/// What a batch of changed files asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classified {
    /// Controller definition files that changed.
    pub definitions: BTreeSet<PathBuf>,
    /// Files of the managed server that changed.
    pub server: BTreeSet<PathBuf>,
    /// Controllers whose exec hooks' files changed, with the files.
    pub exec: BTreeMap<String, BTreeSet<PathBuf>>,
    /// Watched files that belong to none of the above (an external hook server's code): every
    /// controller is replayed and resynced.
    pub other: BTreeSet<PathBuf>,
}

/// Where each kind of change comes from (all paths absolute).
#[derive(Debug, Clone, Default)]
pub struct Roots {
    /// `-f` files, and `-f` directories (whose `*.yaml|*.yml|*.json` are definitions).
    pub definition_files: BTreeSet<PathBuf>,
    /// `-f` directories.
    pub definition_dirs: BTreeSet<PathBuf>,
    /// Directories (or files) of the managed server.
    pub server: Vec<PathBuf>,
    /// Per controller, the directories (or files) its exec hooks run from.
    pub exec: BTreeMap<String, Vec<PathBuf>>,
}

/// Sort changed paths by what they ask for. A definition file is only a definition change,
/// even when it sits in an exec hook's directory.
pub fn classify(roots: &Roots, batch: &ChangeBatch) -> Classified {
    let mut out = Classified::default();
    for p in &batch.paths {
        let is_def_ext = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        let in_def_dir = p
            .parent()
            .is_some_and(|d| roots.definition_dirs.contains(d));
        if roots.definition_files.contains(p) || (in_def_dir && is_def_ext) {
            out.definitions.insert(p.clone());
            continue;
        }
        let mut matched = false;
        if roots.server.iter().any(|r| p.starts_with(r)) {
            out.server.insert(p.clone());
            matched = true;
        }
        for (name, dirs) in &roots.exec {
            if dirs.iter().any(|r| p.starts_with(r)) {
                out.exec.entry(name.clone()).or_default().insert(p.clone());
                matched = true;
            }
        }
        if !matched {
            out.other.insert(p.clone());
        }
    }
    out
}

/// Directories a managed server's code is in: those of the existing files its command names
/// (`python3 hooks/server.py` -> `hooks/`), else its working directory.
pub fn server_roots(cfg: &ServerConfig) -> Vec<PathBuf> {
    let cwd = cfg
        .working_dir
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let mut roots: Vec<PathBuf> = cfg
        .command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .map(|w| cwd.join(w))
        .filter(|p| p.is_file())
        .filter_map(|p| p.parent().map(absolute))
        .collect();
    roots.dedup();
    if roots.is_empty() {
        roots.push(absolute(&cwd));
    }
    roots
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Directories an exec hook's code is in: its working directory, and those of absolute or
/// relative file arguments that exist.
fn exec_roots(target: &HookTarget) -> Vec<PathBuf> {
    let HookTarget::Exec {
        command,
        working_dir,
        ..
    } = target
    else {
        return Vec::new();
    };
    let cwd = working_dir
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let mut roots = vec![absolute(&cwd)];
    for arg in command.iter().skip(1) {
        let p = cwd.join(arg);
        if p.is_file()
            && let Some(parent) = p.parent()
        {
            roots.push(absolute(parent));
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

/// The engine plus everything that makes it a dev loop.
pub struct DevLoop {
    engine: Engine,
    bus: EventBus,
    cfg: DevLoopConfig,
    /// The running definitions, by name.
    defs: BTreeMap<String, ControllerDef>,
    slot: Option<Arc<ServerSlot>>,
    server_lines: Option<mpsc::UnboundedSender<ServerLine>>,
    watcher: Option<FileWatcher>,
    changes: Option<mpsc::Receiver<ChangeBatch>>,
    /// Goes up when the watcher sees the first change of a batch.
    batch_started: Option<tokio::sync::watch::Receiver<u64>>,
    /// Every controller's last exchanges, taken when the pending batch's first change was
    /// seen: what a replay compares against (a sync may run an edited exec hook before the
    /// debounced reload).
    replay_baseline: Option<ReplayJobs>,
    roots: Roots,
    /// With a project's build steps: the gate every hook call passes (see [`project`]).
    build_gate: Option<Arc<project::BuildGate>>,
    /// The flight recorder (the last events, within its bound), dumped on request.
    flight: Arc<crate::engine::flight::FlightRecorder>,
}

/// With build steps: wrap the context's gate (the managed server's, if any) in a
/// [`project::BuildGate`], which holds every hook call while a build runs.
fn project_build_gate(
    ctx: &crate::engine::EngineContext,
    cfg: &DevLoopConfig,
) -> Option<Arc<project::BuildGate>> {
    if cfg.builds.is_empty() {
        return None;
    }
    let gate = Arc::new(project::BuildGate::new(ctx.gate()));
    ctx.set_gate(Some(Arc::clone(&gate) as Arc<dyn HookGate>));
    Some(gate)
}

/// Exchanges to replay, per controller.
type ReplayJobs = Vec<crate::engine::ReplayJob>;

impl DevLoop {
    /// Start the managed server (a failure is reported, not fatal: the loop waits for a fixed
    /// version), the controllers, and the file watcher.
    pub async fn start(
        mut engine: Engine,
        defs: Vec<ControllerDef>,
        cfg: DevLoopConfig,
    ) -> Result<DevLoop, DevLoopError> {
        let ctx = Arc::clone(engine.context());
        let bus = ctx.bus.clone();
        let flight = Arc::new(crate::engine::flight::FlightRecorder::new(
            crate::engine::flight::DEFAULT_SIZE,
        ));
        flight.spawn(&bus);
        // The dumps carry the definitions (`kubectl meta replay` runs them again).
        engine.set_flight_recorder(Arc::clone(&flight));
        let mut slot = None;
        let mut server_lines = None;
        if let Some(server_cfg) = &cfg.server {
            let base_url = cfg.server_base_url.clone().unwrap_or_default();
            let s = Arc::new(ServerSlot {
                base_url,
                ..ServerSlot::default()
            });
            ctx.set_gate(Some(Arc::new(ServerGate(Arc::clone(&s)))));
            let (tx, rx) = mpsc::unbounded_channel();
            spawn_output_forwarder(rx, bus.clone());
            server_lines = Some(tx.clone());
            start_server(&s, server_cfg.clone(), tx, &bus).await;
            slot = Some(s);
        }
        let build_gate = project_build_gate(&ctx, &cfg);
        let mut map = BTreeMap::new();
        for d in defs {
            map.insert(d.name().to_string(), d.clone());
            engine.start(d);
        }
        let mut me = DevLoop {
            engine,
            bus,
            cfg,
            defs: map,
            slot,
            server_lines,
            watcher: None,
            changes: None,
            batch_started: None,
            replay_baseline: None,
            roots: Roots::default(),
            build_gate,
            flight,
        };
        if me.cfg.watch_files {
            me.start_watching()?;
        }
        Ok(me)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn start_watching(&mut self) -> Result<(), DevLoopError> {
        let mut roots = Roots::default();
        for f in &self.cfg.files {
            let abs = absolute(f);
            if abs.is_dir() {
                roots.definition_dirs.insert(abs);
            } else {
                roots.definition_files.insert(abs);
            }
        }
        if let Some(s) = &self.cfg.server {
            roots.server = server_roots(s);
        }
        for (name, def) in &self.defs {
            let dirs = self.exec_dirs_of(def);
            if !dirs.is_empty() {
                roots.exec.insert(name.clone(), dirs);
            }
        }
        let mut paths: Vec<PathBuf> = if self.cfg.watch.is_empty() {
            let mut v: Vec<PathBuf> = roots.server.clone();
            v.extend(roots.exec.values().flatten().cloned());
            v
        } else {
            self.cfg.watch.iter().map(|p| absolute(p)).collect()
        };
        paths.extend(roots.definition_files.iter().cloned());
        paths.extend(roots.definition_dirs.iter().cloned());
        paths.sort();
        paths.dedup();
        // A directory already covered by a watched parent needs no watch of its own.
        let covered: Vec<PathBuf> = paths
            .iter()
            .filter(|p| paths.iter().any(|q| q != *p && p.starts_with(q)))
            .cloned()
            .collect();
        paths.retain(|p| !covered.contains(p));
        let (watcher, rx) = FileWatcher::start(WatchConfig {
            paths: paths.clone(),
            debounce: self.cfg.debounce,
            exclude: self.cfg.exclude.clone(),
        })
        .map_err(|e| DevLoopError::Watch(e.to_string()))?;
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        self.bus.publish(EngineEvent::Info {
            controller: None,
            message: format!(
                "watching {} (debounce {}ms)",
                shown.join(", "),
                self.cfg.debounce.as_millis()
            ),
        });
        self.batch_started = Some(watcher.batch_started());
        self.watcher = Some(watcher);
        self.changes = Some(rx);
        self.roots = roots;
        Ok(())
    }

    /// Directories of a controller's exec hooks (from the definition, resolved as the engine
    /// resolves them).
    fn exec_dirs_of(&self, def: &ControllerDef) -> Vec<PathBuf> {
        let base_url = self.engine.context().options.hook_base_url.clone();
        let mut dirs = Vec::new();
        for (hook_name, hook) in def.hooks() {
            if let Ok(spec) = crate::engine::HookSpec::from_spec(
                hook_name,
                hook,
                base_url.as_deref(),
                def.base_dir(),
                false,
            ) {
                dirs.extend(exec_roots(&spec.target));
            }
        }
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Run until `shutdown` resolves: react to file changes and commands.
    pub async fn run_until(
        &mut self,
        mut commands: mpsc::Receiver<Request>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            let change = async {
                match self.changes.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let started = async {
                match self.batch_started.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                true = started => self.take_replay_baseline(),
                Some(batch) = change => self.on_change(batch).await,
                Some(req) = commands.recv() => {
                    let answer = self.on_command(req.command).await;
                    let _ = req.reply.send(answer);
                }
            }
        }
    }

    /// Carry out one command; the answer is a line for the person (or tool) who asked, an
    /// error when the command could not be done (no such parent).
    pub async fn on_command(&mut self, cmd: Command) -> Result<String, String> {
        Ok(match cmd {
            Command::Resync { parent } => {
                let n = self.engine.resync(None, parent.as_deref());
                match (&parent, n) {
                    (Some(p), 0) => {
                        return Err(format!(
                            "no parent named {p} (give namespace/name or name of a parent the running controllers watch)"
                        ));
                    }
                    (Some(p), n) => format!("resync of {p} queued ({n} controller(s))"),
                    (None, n) => format!("resync of all {n} parent(s) queued"),
                }
            }
            Command::Pause => {
                self.engine.set_paused(true);
                "writes paused".into()
            }
            Command::Resume => {
                self.engine.set_paused(false);
                "writes resumed".into()
            }
            Command::TogglePause => {
                let now = !self.engine.context().is_paused();
                self.engine.set_paused(now);
                if now {
                    "writes paused".into()
                } else {
                    "writes resumed".into()
                }
            }
            Command::Replay => {
                let names: Vec<String> = self.defs.keys().cloned().collect();
                let n = self.engine.replay(&names).await.len();
                format!("replayed the last request of {n} parent(s)")
            }
            Command::DumpFlight { path } => {
                let dump = self.flight.dump_json();
                std::fs::write(&path, &dump)
                    .map_err(|e| format!("cannot write the flight recording to {path}: {e}"))?;
                format!(
                    "flight recording ({} events, {} bytes) written to {path}",
                    self.flight.len(),
                    dump.len()
                )
            }
            Command::Step { .. } => {
                return Err(
                    "stepping is for a replayed timeline (kubectl meta replay): dev runs live"
                        .into(),
                );
            }
        })
    }

    /// A file changed: take every controller's last exchanges now, before a sync can run an
    /// edited exec hook, for the replay after the debounced reload (kept for the whole batch).
    fn take_replay_baseline(&mut self) {
        if self.replay_baseline.is_none() {
            let names: Vec<String> = self.defs.keys().cloned().collect();
            self.replay_baseline = Some(self.engine.replay_jobs(&names));
        }
    }

    /// React to one debounced batch of changed files.
    pub async fn on_change(&mut self, mut batch: ChangeBatch) {
        let baseline = self.replay_baseline.take();
        // Files that came and went within the debounce window (an editor's or sed's temporary
        // file) are noise; a definition file that is gone is still news.
        batch
            .paths
            .retain(|p| p.exists() || self.roots.definition_files.contains(p));
        if batch.paths.is_empty() {
            return;
        }
        if !self.project_before_reload(&mut batch).await {
            return;
        }
        let c = classify(&self.roots, &batch);
        if !c.definitions.is_empty() {
            self.reload_definitions(&c.definitions).await;
        }
        let mut reloaded: BTreeSet<String> = BTreeSet::new();
        if !c.server.is_empty() && self.restart_server(&c.server).await {
            reloaded.extend(self.controllers_using_server());
        }
        for (name, files) in &c.exec {
            if !self.defs.contains_key(name) {
                continue;
            }
            self.bus.publish(EngineEvent::Reload {
                what: "exec-hook".into(),
                paths: show(files),
                message: format!("{name}: the next calls run the new version"),
                error: None,
            });
            reloaded.insert(name.clone());
        }
        if !c.other.is_empty() && !self.cfg.watch.is_empty() {
            self.bus.publish(EngineEvent::Reload {
                what: "watched".into(),
                paths: show(&c.other),
                message: "replaying and resyncing every controller".into(),
                error: None,
            });
            reloaded.extend(self.defs.keys().cloned());
        }
        if reloaded.is_empty() {
            return;
        }
        // Take the last exchanges before the resync replaces them, resync at once (the replay
        // is for reading, not on the way to the new children), and replay alongside.
        let names: Vec<String> = reloaded.into_iter().collect();
        let jobs = match baseline {
            // Definitions reloaded: controllers were restarted, take their exchanges now.
            Some(jobs) if c.definitions.is_empty() => jobs
                .into_iter()
                .filter(|job| names.iter().any(|n| n == job.name()))
                .collect(),
            _ => self.engine.replay_jobs(&names),
        };
        self.engine.hook_reloaded(&names);
        tokio::spawn(async move {
            for job in jobs {
                // After the resync, so the replay does not compete with it for the hook.
                let deadline = tokio::time::Instant::now() + REPLAY_WAIT;
                while tokio::time::Instant::now() < deadline {
                    let q = job.controller.queue_stats();
                    if q.ready == 0 && q.in_flight == 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                job.run().await;
            }
        });
    }

    /// A project's part of a change (see [`project`]): drop the paths that never reload, then
    /// run the builds the rest calls for. False when nothing is left to do, or a build failed.
    async fn project_before_reload(&mut self, batch: &mut ChangeBatch) -> bool {
        if !self.cfg.exclude.is_empty() {
            let excluded: Vec<PathBuf> = self
                .cfg
                .exclude
                .iter()
                .map(|p| project::canonical(p))
                .collect();
            project::drop_excluded(batch, &excluded);
            if batch.paths.is_empty() {
                return false;
            }
        }
        match &self.build_gate {
            Some(gate) => project::rebuild(&self.cfg.builds, batch, gate, &self.bus).await,
            None => true,
        }
    }

    fn controllers_using_server(&self) -> Vec<String> {
        let Some(slot) = &self.slot else {
            return Vec::new();
        };
        self.engine
            .started(None)
            .iter()
            .filter(|c| {
                c.hook_specs().iter().any(|(_, h)| match &h.target {
                    HookTarget::Webhook { url, .. } => url.starts_with(&slot.base_url),
                    HookTarget::Exec { .. } => false,
                })
            })
            .map(|c| c.name().to_string())
            .collect()
    }

    /// Restart the managed server after its files changed; false when it did not come back.
    async fn restart_server(&mut self, files: &BTreeSet<PathBuf>) -> bool {
        let (Some(slot), Some(cfg), Some(lines)) =
            (&self.slot, &self.cfg.server, &self.server_lines)
        else {
            return false;
        };
        let result = match slot.get() {
            Some(server) => server.restart().await.map_err(|e| e.to_string()),
            None => {
                start_server(slot, cfg.clone(), lines.clone(), &self.bus).await;
                match slot.get() {
                    Some(_) => Ok(()),
                    None => Err(slot
                        .last_error
                        .read()
                        .map(|e| e.clone())
                        .unwrap_or_default()),
                }
            }
        };
        match result {
            Ok(()) => {
                self.bus.publish(EngineEvent::Reload {
                    what: "hook-server".into(),
                    paths: show(files),
                    message: "restarted and ready".into(),
                    error: None,
                });
                true
            }
            Err(e) => {
                if let Ok(mut le) = slot.last_error.write() {
                    le.clone_from(&e);
                }
                self.bus.publish(EngineEvent::Reload {
                    what: "hook-server".into(),
                    paths: show(files),
                    message: "the new version is not ready; syncs fail (nothing is deleted) until a fixed version starts".into(),
                    error: Some(e),
                });
                false
            }
        }
    }

    /// Re-read the definitions; a file with a mistake is reported and everything keeps running
    /// as it was. Changed controllers restart; removed ones stop. New controller names are
    /// refused (they would run without a lease).
    async fn reload_definitions(&mut self, files: &BTreeSet<PathBuf>) {
        let loaded = match spec::load_paths_with(&self.cfg.files, self.cfg.recursive) {
            Ok(l) => l,
            Err(e) => {
                self.bus.publish(EngineEvent::Reload {
                    what: "definition".into(),
                    paths: show(files),
                    message: "kept the running definitions".into(),
                    error: Some(e.to_string()),
                });
                return;
            }
        };
        let mut new: BTreeMap<String, ControllerDef> = BTreeMap::new();
        let mut unselected = BTreeSet::new();
        for d in loaded.controllers {
            if self.cfg.selector.as_ref().is_some_and(|s| !s.matches(&d)) {
                unselected.insert(d.name().to_string());
                continue;
            }
            new.insert(d.name().to_string(), d);
        }
        let added: Vec<&String> = new.keys().filter(|n| !self.defs.contains_key(*n)).collect();
        if !added.is_empty() {
            let names: Vec<&str> = added.iter().map(|s| s.as_str()).collect();
            self.bus.publish(EngineEvent::Reload {
                what: "definition".into(),
                paths: show(files),
                message: "kept the running definitions".into(),
                error: Some(format!(
                    "new controller(s) {}: restart kubectl meta dev to add controllers (each needs its lease)",
                    names.join(", ")
                )),
            });
            return;
        }
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let names: Vec<String> = self.defs.keys().cloned().collect();
        for name in names {
            match new.remove(&name) {
                None => {
                    self.engine.stop_controller(&name).await;
                    self.defs.remove(&name);
                    let why = match &self.cfg.selector {
                        Some(sel) if unselected.contains(&name) => {
                            format!("its labels no longer match -l {:?}", sel.as_str())
                        }
                        _ => "no longer defined".to_string(),
                    };
                    done.push(format!("stopped {name} ({why})"));
                }
                Some(d) => {
                    let old = self.defs.get(&name);
                    if old.is_some_and(|o| o == &d) {
                        continue;
                    }
                    // The webhooks' Secrets and ConfigMaps are read again (a changed
                    // reference, or a rotated certificate); a problem keeps the running one.
                    let ctx = Arc::clone(self.engine.context());
                    match endpoint::resolve_from_cluster(&ctx.client, std::slice::from_ref(&d))
                        .await
                    {
                        Ok(resolved) => resolved.iter().for_each(|r| ctx.hooks.set_endpoints(r)),
                        Err(e) => {
                            failed.push(format!("kept the running {name}: {e}"));
                            continue;
                        }
                    }
                    self.engine.stop_controller(&name).await;
                    self.engine.start(d.clone());
                    let dirs = self.exec_dirs_of(&d);
                    if dirs.is_empty() {
                        self.roots.exec.remove(&name);
                    } else {
                        self.roots.exec.insert(name.clone(), dirs);
                    }
                    self.defs.insert(name.clone(), d);
                    done.push(format!("restarted {name}"));
                }
            }
        }
        let message = if done.is_empty() {
            "no definition changed".to_string()
        } else {
            done.join("; ")
        };
        self.bus.publish(EngineEvent::Reload {
            what: "definition".into(),
            paths: show(files),
            message,
            error: (!failed.is_empty()).then(|| failed.join("\n")),
        });
    }

    /// Stop the file watcher, the engine and the managed server.
    pub async fn shutdown(self) {
        drop(self.watcher);
        self.engine.shutdown().await;
        if let Some(slot) = &self.slot
            && let Some(server) = slot.get()
        {
            server.stop().await;
        }
    }
}

fn show(files: &BTreeSet<PathBuf>) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

async fn start_server(
    slot: &Arc<ServerSlot>,
    cfg: ServerConfig,
    lines: mpsc::UnboundedSender<ServerLine>,
    bus: &EventBus,
) {
    bus.publish(EngineEvent::HookServer {
        state: "starting".into(),
        pid: None,
        message: format!("{} (ready when {})", cfg.command, cfg.readiness.describe()),
    });
    match ManagedServer::start(cfg, lines).await {
        Ok(server) => {
            spawn_state_forwarder(&server, bus.clone());
            // A crash (not a failed start after an edit) restarts it with backoff.
            server.supervise();
            bus.publish(EngineEvent::HookServer {
                state: "ready".into(),
                pid: server.pid(),
                message: String::new(),
            });
            if let Ok(mut s) = slot.server.write() {
                *s = Some(server);
            }
        }
        Err(e) => {
            let msg = e.to_string();
            bus.publish(EngineEvent::HookServer {
                state: "failed".into(),
                pid: None,
                message: format!("{msg}\nfix it and save: it is started again on the next change"),
            });
            if let Ok(mut le) = slot.last_error.write() {
                *le = msg;
            }
        }
    }
}

fn spawn_output_forwarder(mut rx: mpsc::UnboundedReceiver<ServerLine>, bus: EventBus) {
    tokio::spawn(async move {
        while let Some(l) = rx.recv().await {
            bus.publish(EngineEvent::HookServerOutput {
                stream: match l.stream {
                    Stream::Stdout => "stdout".into(),
                    Stream::Stderr => "stderr".into(),
                },
                line: l.line,
            });
        }
    });
}

/// Publish the server's state changes after the first start (restarts, crashes).
fn spawn_state_forwarder(server: &ManagedServer, bus: EventBus) {
    let mut rx = server.state();
    let s = server.clone();
    tokio::spawn(async move {
        rx.borrow_and_update();
        while rx.changed().await.is_ok() {
            let state = rx.borrow_and_update().clone();
            let (word, message) = match &state {
                ServerState::Starting => ("starting", String::new()),
                ServerState::Ready => ("ready", String::new()),
                ServerState::Restarting => ("restarting", String::new()),
                ServerState::Exited { status } => ("exited", status.clone()),
                ServerState::Failed { reason } => ("failed", reason.clone()),
                ServerState::Stopped => ("stopped", String::new()),
            };
            bus.publish(EngineEvent::HookServer {
                state: word.into(),
                pid: s.pid(),
                message,
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(paths: &[&str]) -> ChangeBatch {
        ChangeBatch {
            paths: paths.iter().map(PathBuf::from).collect(),
        }
    }

    fn roots() -> Roots {
        Roots {
            definition_files: ["/w/ctl.yaml".into()].into(),
            definition_dirs: ["/w/example".into()].into(),
            server: vec!["/w/server".into()],
            exec: [
                ("a".to_string(), vec![PathBuf::from("/w/example")]),
                ("b".to_string(), vec![PathBuf::from("/w/b")]),
            ]
            .into(),
        }
    }

    #[test]
    fn definitions_win_over_the_directory_they_share_with_an_exec_hook() {
        let c = classify(
            &roots(),
            &batch(&["/w/example/10-controller.yaml", "/w/example/hook.py"]),
        );
        assert_eq!(
            c.definitions,
            ["/w/example/10-controller.yaml".into()].into()
        );
        assert_eq!(c.exec.len(), 1);
        assert_eq!(c.exec["a"], ["/w/example/hook.py".into()].into());
        assert!(c.server.is_empty() && c.other.is_empty());
    }

    #[test]
    fn server_exec_and_other_files_are_told_apart() {
        let c = classify(
            &roots(),
            &batch(&[
                "/w/server/app.py",
                "/w/b/sync.sh",
                "/w/ctl.yaml",
                "/w/elsewhere/x.py",
                "/w/example/sub/data.yaml",
            ]),
        );
        assert_eq!(c.definitions, ["/w/ctl.yaml".into()].into());
        assert_eq!(c.server, ["/w/server/app.py".into()].into());
        assert_eq!(c.exec["b"], ["/w/b/sync.sh".into()].into());
        // A YAML file in a subdirectory of a -f directory is not a definition (-f DIR is not
        // recursive), but it is in exec hook a's directory.
        assert_eq!(c.exec["a"], ["/w/example/sub/data.yaml".into()].into());
        assert_eq!(c.other, ["/w/elsewhere/x.py".into()].into());
    }

    #[test]
    fn server_roots_are_the_directories_of_the_files_the_command_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("hooks")).unwrap();
        std::fs::write(dir.path().join("hooks/server.py"), "").unwrap();
        let mut cfg = ServerConfig::new(
            "python3 hooks/server.py --port 8081",
            crate::hooks::server::Readiness::Tcp("127.0.0.1:8081".into()),
        );
        cfg.working_dir = Some(dir.path().to_path_buf());
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(server_roots(&cfg), vec![base.join("hooks")]);
        cfg.command = "node app".into();
        assert_eq!(server_roots(&cfg), vec![base]);
    }
}
