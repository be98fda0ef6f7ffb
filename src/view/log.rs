//! The headless event log of `kubectl meta dev` (`--no-tui`, or stdout not a terminal).
//!
//! The words of each event come from [`crate::view::notice`] (shared with the TUI); this module owns
//! how they are laid out without the TUI:
//! - `-o human`: one scannable line per event that matters, `HH:MM:SS.mmm controller parent
//!   tag content`, columns aligned, optionally colored. Outside verbose mode a sync that changed
//!   nothing (sync started, successful hook calls, sync finished with no write and no error) is
//!   collapsed into one `sync no changes` line, so a periodic resync of many parents stays short
//!   while every trigger, write and error is still shown. The lines of one sync are printed
//!   together when it finishes (not interleaved with other parents' syncs), unless it runs
//!   longer than [`HOLD_LIMIT`]; the columns keep their width (a longer name overflows its own
//!   line only).
//! - `-o json`: one JSON object per line (NDJSON), the serialized event plus a `time` field.
//!
//! It drains the engine's broadcast
//! channel ([`run`]).

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::engine::events::{EngineEvent, EventSubject};
use crate::view::notice::{
    self, Notice, Repeat, Tone, clean, fmt_duration, hook_ok, non_empty, trigger_list,
};

/// How the event log is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// One readable line per event, aligned, colored when asked.
    Human,
    /// One JSON object per line (NDJSON), never colored.
    Json,
}

/// Controller column starts this wide, so common names align from the first line.
const MIN_CONTROLLER_WIDTH: usize = 12;
/// Parent column width, fixed so columns never shift mid-log (a longer key overflows its own
/// line only).
const PARENT_WIDTH: usize = 20;
/// Controller column width never grows past this (longer names overflow the column). It grows
/// only with the controllers' start lines, which come before any sync, so it is fixed by the
/// time parents are printed.
const MAX_CONTROLLER_WIDTH: usize = 24;
/// A sync's lines are held back until it finishes, so they stay together; one that runs
/// longer than this is shown as it goes instead (a slow hook is not hidden).
const HOLD_LIMIT: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);
/// Width of the tag column (`finalizer` is the longest tag).
const TAG_WIDTH: usize = 9;

/// ANSI SGR codes used by the human format.
mod sgr {
    /// Green: creates, successful hook calls.
    pub const GREEN: &str = "32";
    /// Yellow: updates, dropped events.
    pub const YELLOW: &str = "33";
    /// Red: deletes, releases, failed hook calls.
    pub const RED: &str = "31";
    /// Cyan: adoptions.
    pub const CYAN: &str = "36";
    /// Blue: parent status, finalizer and revision writes.
    pub const BLUE: &str = "34";
    /// Magenta: rollout steps.
    pub const MAGENTA: &str = "35";
    /// Bold red: errors.
    pub const BOLD_RED: &str = "1;31";
    /// Dim: timestamps.
    pub const DIM: &str = "2";

    /// The color of a [`Tone`] (`None`: not painted).
    pub fn of(tone: super::Tone) -> Option<&'static str> {
        use super::Tone;
        match tone {
            Tone::Plain => None,
            Tone::Dim => Some(DIM),
            Tone::Good => Some(GREEN),
            Tone::Warn => Some(YELLOW),
            Tone::Bad => Some(RED),
            Tone::Alert => Some(BOLD_RED),
            Tone::Note => Some(CYAN),
            Tone::Meta => Some(BLUE),
            Tone::Step => Some(MAGENTA),
        }
    }
}

/// A sync being held back (non-verbose human mode) until we know whether it changed anything.
struct PendingSync {
    controller: String,
    parent: String,
    /// `SyncStarted` and the successful `HookCalled`s of this sync, with their arrival time.
    events: Vec<(Timestamp, EngineEvent)>,
}

/// Prints engine events to `out` in one [`OutputFormat`].
pub struct Printer<W: Write> {
    out: W,
    format: OutputFormat,
    color: bool,
    verbose: bool,
    tz: TimeZone,
    controller_width: usize,
    pending: Vec<PendingSync>,
    /// Per (controller, parent): the error its last failed sync ended with, and how many
    /// syncs in a row ended with exactly that error (repeats are shown as one short line).
    failures: HashMap<(String, String), (String, u32)>,
    /// Per (controller, parent): the hook error printed during the sync in progress.
    hook_errors: HashMap<(String, String), String>,
    /// 429 answers already reported by an `api` line.
    throttled_shown: u64,
    /// (controller, child type) whose OnDelete-held change was said (once each).
    held_shown: HashSet<(String, String)>,
}

impl<W: Write> Printer<W> {
    /// A printer writing to `out`. `color` adds ANSI colors to the human format (never to JSON);
    /// `verbose` prints every event as it comes instead of collapsing no-op syncs.
    pub fn new(out: W, format: OutputFormat, color: bool, verbose: bool) -> Self {
        Printer {
            out,
            format,
            color: color && format == OutputFormat::Human,
            verbose,
            tz: TimeZone::system(),
            controller_width: MIN_CONTROLLER_WIDTH,
            pending: Vec::new(),
            failures: HashMap::new(),
            hook_errors: HashMap::new(),
            throttled_shown: 0,
            held_shown: HashSet::new(),
        }
    }

    /// Print one event, stamped with the current time. In non-verbose human mode the event may be
    /// held back until its sync finishes (see the module documentation).
    pub fn print(&mut self, event: &EngineEvent) -> io::Result<()> {
        self.print_at(event, Timestamp::now())
    }

    /// Print whatever is still held back (syncs that have not finished). Call before exiting.
    pub fn finish(&mut self) -> io::Result<()> {
        for p in std::mem::take(&mut self.pending) {
            self.flush_pending(p)?;
        }
        self.out.flush()
    }

    fn print_at(&mut self, event: &EngineEvent, now: Timestamp) -> io::Result<()> {
        match self.format {
            OutputFormat::Json => {
                let value = serde_json::to_value(event)?;
                self.json_line(now, value)
            }
            OutputFormat::Human => {
                // A change held by OnDelete: said once per controller and child type, before
                // the sync's own lines (which, writing nothing, may collapse to "no changes").
                for (type_key, n) in notice::held_by_on_delete(event) {
                    if self.held_shown.insert((n.controller.clone(), type_key)) {
                        self.notice(now, &n)?;
                    }
                }
                if self.verbose {
                    self.human(now, event)
                } else {
                    self.human_collapsing(now, event)
                }
            }
        }
    }

    /// Say that `n` events were lost because this printer fell behind the engine.
    fn dropped_at(&mut self, n: u64, now: Timestamp) -> io::Result<()> {
        match self.format {
            OutputFormat::Json => {
                let mut m = Map::new();
                m.insert("event".into(), "eventsDropped".into());
                m.insert("count".into(), n.into());
                self.json_line(now, Value::Object(m))
            }
            OutputFormat::Human => {
                // The syncs held back may have lost their end: show what we have.
                for p in std::mem::take(&mut self.pending) {
                    self.flush_pending(p)?;
                }
                let what = if n == 1 { "event" } else { "events" };
                let content = format!("{n} {what} not shown: the event log fell behind the engine");
                self.line(now, "", "", ("dropped", Some(sgr::YELLOW)), &content)
            }
        }
    }

    fn json_line(&mut self, now: Timestamp, value: Value) -> io::Result<()> {
        let mut obj = Map::new();
        obj.insert("time".into(), Value::String(format!("{now:.3}")));
        match value {
            Value::Object(m) => obj.extend(m),
            other => {
                obj.insert("value".into(), other);
            }
        }
        serde_json::to_writer(&mut self.out, &obj)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Non-verbose human mode: hold back syncs until they prove to be no-ops.
    fn human_collapsing(&mut self, now: Timestamp, event: &EngineEvent) -> io::Result<()> {
        let Some((controller, parent)) = sync_key(event) else {
            return self.human(now, event);
        };
        let held = self
            .pending
            .iter()
            .position(|p| p.controller == controller && p.parent == parent);
        match (event, held) {
            (EngineEvent::SyncStarted { .. }, held) => {
                if let Some(i) = held {
                    // The previous sync's end was lost (lag): show it as it was.
                    let old = self.pending.remove(i);
                    self.flush_pending(old)?;
                }
                self.pending.push(PendingSync {
                    controller: controller.to_string(),
                    parent: parent.to_string(),
                    events: vec![(now, event.clone())],
                });
                Ok(())
            }
            (
                EngineEvent::SyncFinished {
                    writes: 0,
                    error: None,
                    duration,
                    ..
                },
                Some(i),
            ) if self.pending[i].events.iter().all(|(_, e)| quiet(e)) => {
                let p = self.pending.remove(i);
                // A success ends any run of failures.
                self.failures
                    .remove(&(p.controller.clone(), p.parent.clone()));
                self.collapsed(now, p, *duration)
            }
            (EngineEvent::SyncFinished { .. }, Some(i)) => {
                let p = self.pending.remove(i);
                self.flush_pending(p)?;
                self.human(now, event)
            }
            (_, Some(i)) => {
                // Held until the sync finishes, so its lines stay together; a sync running
                // longer than HOLD_LIMIT is shown as it goes from here on.
                self.pending[i].events.push((now, event.clone()));
                let began = self.pending[i].events[0].0;
                if now.duration_since(began) > HOLD_LIMIT {
                    let p = self.pending.remove(i);
                    self.flush_pending(p)?;
                }
                Ok(())
            }
            (_, None) => self.human(now, event),
        }
    }

    fn flush_pending(&mut self, p: PendingSync) -> io::Result<()> {
        for (at, e) in &p.events {
            self.human(*at, e)?;
        }
        Ok(())
    }

    /// The pace of API requests: a line when the API server throttled (new 429 answers), every
    /// report with `-v`.
    fn api_rate(&mut self, now: Timestamp, event: &EngineEvent) -> io::Result<()> {
        let EngineEvent::ApiRate {
            requests_per_second,
            throttled,
            window,
            retry_after_seconds,
            qps_limit,
            ..
        } = event
        else {
            return Ok(());
        };
        let news = *throttled > self.throttled_shown;
        if !news && !self.verbose {
            return Ok(());
        }
        let mut content = format!("{requests_per_second} requests/s");
        if let Some(q) = qps_limit {
            content.push_str(&format!(" (--api-qps {q})"));
        }
        if news {
            let n = throttled - self.throttled_shown;
            let answers = if n == 1 { "answer" } else { "answers" };
            content.push_str(&format!(
                "; the API server is throttling: {n} more 429 {answers} ({throttled} in all)"
            ));
        }
        if let Some(w) = window {
            content.push_str(&format!(", at most {w} requests in flight"));
        }
        if let Some(s) = retry_after_seconds {
            content.push_str(&format!(", waiting {s}s (Retry-After)"));
        }
        self.throttled_shown = *throttled;
        let color = news.then_some(sgr::YELLOW);
        self.line(now, "", "", ("api", color), &content)
    }

    /// The one line of a sync that changed nothing.
    fn collapsed(&mut self, now: Timestamp, p: PendingSync, duration: Duration) -> io::Result<()> {
        let mut content = String::from("no changes");
        let mut hooks = Vec::new();
        for (_, e) in &p.events {
            match e {
                EngineEvent::SyncStarted { triggers, .. } if !triggers.is_empty() => {
                    content.push_str(&format!(" ({})", trigger_list(triggers)));
                }
                EngineEvent::HookCalled {
                    hook,
                    status,
                    latency,
                    error,
                    ..
                } => hooks.push(self.paint_line(&notice::hook_outcome(
                    hook,
                    *status,
                    *latency,
                    non_empty(error).is_some(),
                ))),
                _ => {}
            }
        }
        content.push_str(&format!(" in {}", fmt_duration(duration)));
        for h in hooks {
            content.push_str(", hook ");
            content.push_str(&h);
        }
        self.line(now, &p.controller, &p.parent, ("sync", None), &content)
    }

    /// One event as its own line, worded by [`notice::describe`]; hook calls and sync ends
    /// also depend on what this printer showed before (a failure that repeats).
    fn human(&mut self, now: Timestamp, event: &EngineEvent) -> io::Result<()> {
        match event {
            EngineEvent::HookCalled { .. } => self.hook_called(now, event),
            EngineEvent::SyncFinished { .. } => self.sync_finished(now, event),
            EngineEvent::ApiRate { .. } => self.api_rate(now, event),
            _ => match notice::describe(event, self.verbose) {
                Some(n) => self.notice(now, &n),
                None => Ok(()),
            },
        }
    }

    /// A hook call: outcome and latency, the error once per run of the same failure, and with
    /// -v a successful exec hook's stderr.
    fn hook_called(&mut self, now: Timestamp, event: &EngineEvent) -> io::Result<()> {
        let EngineEvent::HookCalled {
            controller,
            subject,
            error,
            ..
        } = event
        else {
            return Ok(());
        };
        let key = (controller.clone(), subject.to_string());
        if let Some(e) = non_empty(error) {
            // The same failure as last time: the sync's line says so, briefly.
            let repeated = self
                .failures
                .get(&key)
                .is_some_and(|(last, _)| last.contains(e));
            self.hook_errors.insert(key, e.to_string());
            if repeated {
                return Ok(());
            }
        }
        match notice::describe(event, self.verbose) {
            Some(n) => self.notice(now, &n),
            None => Ok(()),
        }
    }

    /// The end of a sync: `done in`, or the failure (briefly when it repeats or when the hook
    /// line above already shows it).
    fn sync_finished(&mut self, now: Timestamp, event: &EngineEvent) -> io::Result<()> {
        let EngineEvent::SyncFinished {
            controller,
            subject,
            error,
            ..
        } = event
        else {
            return Ok(());
        };
        let key = (controller.clone(), subject.to_string());
        let hook_error = self.hook_errors.remove(&key);
        let repeat = match non_empty(error) {
            None => {
                self.failures.remove(&key);
                Repeat::First
            }
            Some(e) => {
                let count = match self.failures.get_mut(&key) {
                    Some((last, n)) if last == e => {
                        *n += 1;
                        *n
                    }
                    _ => {
                        self.failures.insert(key, (e.to_string(), 1));
                        1
                    }
                };
                if count > 1 {
                    Repeat::Again(count)
                } else if hook_error.as_deref().is_some_and(|h| e.contains(h)) {
                    Repeat::HookShown
                } else {
                    Repeat::First
                }
            }
        };
        match notice::sync_finished(event, repeat) {
            Some(n) => self.notice(now, &n),
            None => Ok(()),
        }
    }

    /// One notice as an aligned line, its tones as colors.
    fn notice(&mut self, now: Timestamp, n: &Notice) -> io::Result<()> {
        let content = n
            .lines
            .iter()
            .map(|l| self.paint_line(l))
            .collect::<Vec<_>>()
            .join("\n");
        let tag = (n.tag, sgr::of(n.tag_tone));
        self.line(now, &n.controller, &n.parent, tag, &content)
    }

    /// The spans of `line`, each painted in its tone's color.
    fn paint_line(&self, line: &notice::Line) -> String {
        line.iter()
            .map(|s| match sgr::of(s.tone) {
                Some(code) => self.paint(&s.text, code),
                None => s.text.clone(),
            })
            .collect()
    }

    /// Write one aligned line; continuation lines of `content` are indented under it.
    fn line(
        &mut self,
        now: Timestamp,
        controller: &str,
        parent: &str,
        (tag, tag_code): (&str, Option<&str>),
        content: &str,
    ) -> io::Result<()> {
        let controller = clean(controller);
        let parent = clean(parent);
        let cw = controller.chars().count();
        let pw = parent.chars().count();
        if parent.is_empty() {
            // Controller-level lines (start, errors) come first and set the column once.
            self.controller_width = self.controller_width.max(cw.min(MAX_CONTROLLER_WIDTH));
        }
        let time = local_time(&self.tz, now);
        let cpad = self.controller_width.saturating_sub(cw);
        let ppad = PARENT_WIDTH.saturating_sub(pw);
        let tpad = TAG_WIDTH.saturating_sub(tag.chars().count());
        let indent =
            time.len() + 1 + cw + cpad + 2 + pw + ppad + 2 + tag.chars().count() + tpad + 1;
        let tag = match tag_code {
            Some(code) => self.paint(tag, code),
            None => tag.to_string(),
        };
        let mut text = format!(
            "{} {controller}{:cpad$}  {parent}{:ppad$}  {tag}{:tpad$} ",
            self.paint(&time, sgr::DIM),
            "",
            "",
            "",
        );
        for (i, l) in content.split('\n').enumerate() {
            if i > 0 {
                text.push('\n');
                text.push_str(&" ".repeat(indent));
            }
            text.push_str(l);
        }
        text.push('\n');
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    /// `s` wrapped in an SGR color when coloring (line by line, so each line resets).
    fn paint(&self, s: &str, code: &str) -> String {
        if !self.color {
            return s.to_string();
        }
        s.split('\n')
            .map(|l| {
                if l.is_empty() {
                    String::new()
                } else {
                    format!("\x1b[{code}m{l}\x1b[0m")
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Print every event from `rx` until the channel closes or `stop` completes (then print what
/// is already queued and what is still held back). When the printer falls behind, says how
/// many events were lost and goes on. Returns early only when writing fails (for example
/// stdout closed).
pub async fn run<W: Write>(
    mut rx: crate::engine::events::EventReceiver,
    mut printer: Printer<W>,
    stop: impl std::future::Future<Output = ()>,
) -> io::Result<()> {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            r = rx.recv() => match r {
                Ok(event) => printer.print(&event)?,
                Err(RecvError::Lagged(n)) => printer.dropped_at(n, Timestamp::now())?,
                Err(RecvError::Closed) => break,
            },
            () = &mut stop => {
                loop {
                    match rx.try_recv() {
                        Ok(event) => printer.print(&event)?,
                        Err(TryRecvError::Lagged(n)) => printer.dropped_at(n, Timestamp::now())?,
                        Err(_) => break,
                    }
                }
                break;
            }
        }
    }
    printer.finish()
}

/// The (controller, parent column) of events that belong to one sync.
fn sync_key(event: &EngineEvent) -> Option<(&str, String)> {
    match event {
        EngineEvent::SyncStarted {
            controller,
            subject,
            ..
        }
        | EngineEvent::SyncFinished {
            controller,
            subject,
            ..
        }
        | EngineEvent::PlanHeld {
            controller,
            subject,
            ..
        } => Some((controller, subject.to_string())),
        EngineEvent::HookCalled {
            controller,
            subject,
            ..
        }
        | EngineEvent::Action {
            controller,
            subject,
            ..
        } => Some((controller, subject.to_string())),
        EngineEvent::Detached {
            controller,
            parent,
            map_key,
            ..
        }
        | EngineEvent::Tombstone {
            controller,
            parent,
            map_key,
            ..
        } => Some((
            controller,
            EventSubject::map_key(parent.as_str(), map_key.as_str()).to_string(),
        )),
        EngineEvent::Rollout {
            controller, parent, ..
        } => Some((controller, parent.clone())),
        EngineEvent::Error {
            controller: Some(c),
            object: Some(o),
            ..
        } => Some((c, o.clone())),
        _ => None,
    }
}

/// Whether `event` is part of a sync that may still collapse into one `no changes` line: the
/// start, and hook calls that succeeded.
fn quiet(event: &EngineEvent) -> bool {
    match event {
        EngineEvent::SyncStarted { .. } => true,
        EngineEvent::HookCalled { status, error, .. } => hook_ok(*status, error),
        _ => false,
    }
}

/// `HH:MM:SS.mmm` in `tz`.
fn local_time(tz: &TimeZone, ts: Timestamp) -> String {
    let dt = tz.to_datetime(ts);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::{ActionVerb, EventParent, Trigger};
    use crate::engine::plan::child::ChildId;
    use std::sync::{Arc, Mutex};

    const T0: i64 = 1_700_000_000; // 2023-11-14T22:13:20Z

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(T0 * 1000 + ms).expect("valid timestamp")
    }

    fn printer(format: OutputFormat, color: bool, verbose: bool) -> Printer<Vec<u8>> {
        let mut p = Printer::new(Vec::new(), format, color, verbose);
        p.tz = TimeZone::UTC;
        p
    }

    /// Print `events` 1 ms apart, then `finish`, and return the output lines.
    fn render(p: &mut Printer<Vec<u8>>, events: &[EngineEvent]) -> Vec<String> {
        for (i, e) in events.iter().enumerate() {
            p.print_at(e, at(i as i64)).expect("print");
        }
        p.finish().expect("finish");
        String::from_utf8(p.out.clone())
            .expect("utf-8")
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn human(events: &[EngineEvent], verbose: bool) -> Vec<String> {
        render(&mut printer(OutputFormat::Human, false, verbose), events)
    }

    /// A `Planned` event of `parent` whose Deployment `name` differs from the hook's answer
    /// and is left alone by `strategy` (`reason` as the planner words it).
    fn planned_skip(
        parent: &str,
        name: &str,
        strategy: crate::spec::UpdateMethod,
        reason: &str,
    ) -> EngineEvent {
        use crate::engine::plan::apply::FieldChange;
        use crate::engine::plan::planner::{ObjectAction, ObjectPlan};
        let obj = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"}});
        EngineEvent::Planned {
            controller: "website".into(),
            subject: EventParent::parent(parent),
            objects: vec![ObjectPlan {
                id: ChildId::of("Deployment.apps/v1", &obj),
                kind: "Deployment".into(),
                action: ObjectAction::Skip,
                strategy: Some(strategy),
                reason: reason.into(),
                changes: vec![FieldChange {
                    path: "spec.replicas".into(),
                    old: Some(1.into()),
                    new: Some(2.into()),
                }],
                changes_omitted: 0,
                before: Some(Arc::new(obj)),
                after: None,
                rollout: None,
            }],
            detached: Vec::new(),
            status_change: false,
            finalizer: None,
            resync_after_seconds: None,
            writes: 0,
        }
    }

    #[test]
    fn a_change_held_by_on_delete_is_said_once_per_controller_and_type() {
        use crate::spec::UpdateMethod;
        let on_delete = "OnDelete: existing children are not updated";
        let lines = human(
            &[
                started("default/a", vec![]),
                planned_skip("default/a", "a", UpdateMethod::OnDelete, on_delete),
                finished("default/a", 0, None),
                started("default/b", vec![]),
                planned_skip("default/b", "b", UpdateMethod::OnDelete, on_delete),
                finished("default/b", 0, None),
                // Being deleted is not OnDelete's doing.
                planned_skip("default/c", "c", UpdateMethod::InPlace, "being deleted"),
            ],
            false,
        );
        let held: Vec<&String> = lines.iter().filter(|l| l.contains(" held ")).collect();
        assert_eq!(held.len(), 1, "{lines:#?}");
        assert!(
            held[0].contains(
                "Deployment.apps/v1 default/a: the hook's change (spec.replicas) is not applied"
            ) && held[0].contains("OnDelete"),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("set `updateStrategy: {method: InPlace}`")),
            "{lines:#?}"
        );
        // -o json carries the plan itself (action skip, strategy OnDelete), not this text.
        let json = render(
            &mut printer(OutputFormat::Json, false, false),
            &[planned_skip(
                "default/a",
                "a",
                UpdateMethod::OnDelete,
                on_delete,
            )],
        );
        assert_eq!(json.len(), 1);
        assert!(!json[0].contains("not applied"), "{json:?}");
    }

    fn started(parent: &str, triggers: Vec<Trigger>) -> EngineEvent {
        EngineEvent::SyncStarted {
            controller: "hello-world".into(),
            subject: EventSubject::parent(parent),
            triggers,
        }
    }

    fn hook(parent: &str, status: Option<u16>, error: Option<&str>) -> EngineEvent {
        EngineEvent::HookCalled {
            controller: "hello-world".into(),
            subject: EventParent::parent(parent),
            hook: "sync".into(),
            status,
            latency: Duration::from_micros(12_900),
            error: error.map(str::to_string),
            request: None,
            response: None,
            stderr: None,
        }
    }

    fn action(parent: &str, verb: ActionVerb, detail: Option<&str>) -> EngineEvent {
        EngineEvent::Action {
            controller: "hello-world".into(),
            subject: EventParent::parent(parent),
            verb,
            resource: "Pod.v1".into(),
            object: "default/world".into(),
            detail: detail.map(str::to_string),
            error: None,
        }
    }

    fn finished(parent: &str, writes: usize, error: Option<&str>) -> EngineEvent {
        EngineEvent::SyncFinished {
            controller: "hello-world".into(),
            subject: EventSubject::parent(parent),
            duration: Duration::from_millis(42),
            writes,
            error: error.map(str::to_string),
            error_layer: error.map(|_| crate::engine::error::Layer::Hook),
            retry_in: error.map(|_| 1.0),
        }
    }

    #[test]
    fn a_sync_with_writes_prints_every_step() {
        let lines = human(
            &[
                started("default/world", vec![Trigger::ParentAdded]),
                hook("default/world", Some(200), None),
                action("default/world", ActionVerb::Create, None),
                action(
                    "default/world",
                    ActionVerb::Update,
                    Some("spec.containers[name=c].image"),
                ),
                finished("default/world", 2, None),
            ],
            false,
        );
        assert_eq!(
            lines,
            [
                "22:13:20.000 hello-world   default/world         sync      started (parent added)",
                "22:13:20.001 hello-world   default/world         hook      sync 200 12.9ms",
                "22:13:20.002 hello-world   default/world         create    Pod.v1 default/world",
                "22:13:20.003 hello-world   default/world         update    Pod.v1 default/world  spec.containers[name=c].image",
                "22:13:20.004 hello-world   default/world         sync      done in 42.0ms, 2 writes",
            ]
        );
    }

    #[test]
    fn a_map_keys_events_show_parent_and_key_and_its_detached_outputs() {
        let keyed = |mut e: EngineEvent| {
            match &mut e {
                EngineEvent::SyncStarted { subject, .. }
                | EngineEvent::SyncFinished { subject, .. } => subject.map_key = Some("k".into()),
                EngineEvent::Action { subject, .. } => subject.map_key = Some("k".into()),
                _ => {}
            }
            e
        };
        let id = |n: &str| {
            ChildId::of(
                "Pod.v1",
                &serde_json::json!({"metadata": {"name": n, "namespace": "ns"}}),
            )
        };
        let detached = crate::engine::events::detached_events(
            "hello-world",
            "ns/p",
            "k",
            &[
                crate::engine::plan::planner::DetachedOutput {
                    id: id("a"),
                    kept: true,
                },
                crate::engine::plan::planner::DetachedOutput {
                    id: id("b"),
                    kept: false,
                },
            ],
        );
        let mut events = vec![keyed(started("ns/p", vec![Trigger::ResyncPeriod]))];
        events.extend(detached);
        events.push(keyed(action("ns/p", ActionVerb::Delete, None)));
        events.push(keyed(finished("ns/p", 1, None)));
        assert_eq!(
            human(&events, false),
            [
                "22:13:20.000 hello-world   ns/p k                sync      started (resync period)",
                "22:13:20.001 hello-world   ns/p k                detached  input gone: Pod.v1 ns/a, Pod.v1 ns/b",
                "22:13:20.002 hello-world   ns/p k                tombstone kept Pod.v1 ns/a; deleted Pod.v1 ns/b",
                "22:13:20.003 hello-world   ns/p k                delete    Pod.v1 default/world",
                "22:13:20.004 hello-world   ns/p k                sync      done in 42.0ms, 1 write",
            ]
        );
    }

    #[test]
    fn a_no_op_sync_is_one_line_unless_verbose() {
        let events = [
            started("default/world", vec![Trigger::ResyncPeriod]),
            hook("default/world", Some(200), None),
            finished("default/world", 0, None),
        ];
        assert_eq!(
            human(&events, false),
            [
                "22:13:20.002 hello-world   default/world         sync      no changes (resync period) in 42.0ms, hook sync 200 12.9ms"
            ]
        );
        assert_eq!(
            human(&events, true),
            [
                "22:13:20.000 hello-world   default/world         sync      started (resync period)",
                "22:13:20.001 hello-world   default/world         hook      sync 200 12.9ms",
                "22:13:20.002 hello-world   default/world         sync      done in 42.0ms, no changes",
            ]
        );
    }

    #[test]
    fn a_syncs_lines_stay_together_when_syncs_interleave() {
        let lines = human(
            &[
                started("ns/a", vec![Trigger::ResyncPeriod]),
                started("ns/b", vec![Trigger::ParentChanged]),
                hook("ns/a", Some(200), None),
                hook("ns/b", Some(200), None),
                action(
                    "ns/b",
                    ActionVerb::Delete,
                    Some("not in the desired children"),
                ),
                finished("ns/a", 0, None),
                finished("ns/b", 1, None),
            ],
            false,
        );
        assert_eq!(
            lines,
            [
                "22:13:20.005 hello-world   ns/a                  sync      no changes (resync period) in 42.0ms, hook sync 200 12.9ms",
                "22:13:20.001 hello-world   ns/b                  sync      started (parent changed)",
                "22:13:20.003 hello-world   ns/b                  hook      sync 200 12.9ms",
                "22:13:20.004 hello-world   ns/b                  delete    Pod.v1 default/world  not in the desired children",
                "22:13:20.006 hello-world   ns/b                  sync      done in 42.0ms, 1 write",
            ]
        );
    }

    #[test]
    fn a_sync_running_past_the_hold_limit_is_shown_as_it_goes_and_columns_stay_fixed() {
        let mut p = printer(OutputFormat::Human, false, false);
        let long = "a-namespace-with-a-long-name/parent";
        let events = [
            (0, started("ns/a", vec![Trigger::ParentChanged])),
            (1, started(long, vec![Trigger::ParentChanged])),
            (2, action("ns/a", ActionVerb::Create, None)),
            (3_000, hook(long, Some(200), None)),
            (3_001, finished("ns/a", 1, None)),
        ];
        for (ms, e) in &events {
            p.print_at(e, at(*ms)).expect("print");
        }
        let out = String::from_utf8(p.out.clone()).expect("utf8");
        let lines: Vec<&str> = out.lines().collect();
        // ns/a is still held (it started 3 s ago but got no event past the limit until it
        // finished); the long sync went past the limit and was shown at once.
        assert!(
            lines[0].contains(long) && lines[0].contains("started"),
            "{lines:#?}"
        );
        assert!(
            lines[1].contains(long) && lines[1].contains("hook"),
            "{lines:#?}"
        );
        assert!(
            lines[2].contains("ns/a") && lines[2].contains("started"),
            "{lines:#?}"
        );
        // The long parent overflows its own lines only: ns/a's columns did not move.
        let col = |l: &str| l.find("sync").or_else(|| l.find("create")).expect("tag");
        assert_eq!(col(lines[2]), col(lines[3]), "{lines:#?}");
        assert_eq!(col(lines[2]), 12 + 1 + 12 + 2 + 20 + 2, "{lines:#?}");
    }

    #[test]
    fn a_failed_sync_shows_its_start_hook_and_indented_multiline_error() {
        let lines = human(
            &[
                started("default/world", vec![Trigger::Retry]),
                hook(
                    "default/world",
                    Some(500),
                    Some("hook http://127.0.0.1:8080/sync returned 500"),
                ),
                finished(
                    "default/world",
                    0,
                    Some("hook returned 500:\nTraceback (most recent call last)\n  boom\n"),
                ),
            ],
            false,
        );
        assert_eq!(
            lines,
            [
                "22:13:20.000 hello-world   default/world         sync      started (retry)",
                "22:13:20.001 hello-world   default/world         hook      sync 500 12.9ms: hook http://127.0.0.1:8080/sync returned 500",
                "22:13:20.002 hello-world   default/world         error     sync failed after 42.0ms: hook returned 500:",
                "                                                           Traceback (most recent call last)",
                "                                                             boom; retry in 1.0s",
            ]
        );
    }

    #[test]
    fn every_action_verb_has_its_tag() {
        let verbs = [
            (ActionVerb::Create, "create    Pod.v1 default/world"),
            (ActionVerb::Update, "update    Pod.v1 default/world"),
            (ActionVerb::Delete, "delete    Pod.v1 default/world"),
            (ActionVerb::Adopt, "adopt     Pod.v1 default/world"),
            (ActionVerb::Release, "release   Pod.v1 default/world"),
            (ActionVerb::Status, "status    Pod.v1 default/world"),
            (
                ActionVerb::AddFinalizer,
                "finalizer add Pod.v1 default/world",
            ),
            (
                ActionVerb::RemoveFinalizer,
                "finalizer remove Pod.v1 default/world",
            ),
            (ActionVerb::Revision, "revision  Pod.v1 default/world"),
            (ActionVerb::ApplyDocument, "apply     Pod.v1 default/world"),
        ];
        for (verb, want) in verbs {
            let lines = human(&[action("p", verb, None)], false);
            assert_eq!(
                lines,
                [format!(
                    "22:13:20.000 hello-world   p                     {want}"
                )]
            );
        }
        let failed = EngineEvent::Action {
            controller: "hello-world".into(),
            subject: EventParent::parent("p"),
            verb: ActionVerb::Create,
            resource: "Pod.v1".into(),
            object: "default/world".into(),
            detail: Some("reason".into()),
            error: Some("pods \"world\" is forbidden".into()),
        };
        assert_eq!(
            human(&[failed], false),
            [
                "22:13:20.000 hello-world   p                     create    Pod.v1 default/world  reason  failed: pods \"world\" is forbidden"
            ]
        );
    }

    #[test]
    fn a_failure_that_repeats_is_shown_once_then_counted() {
        let tb = "exec hook python3 h.py failed with exit code 1\nTraceback\n  boom";
        let round = || {
            vec![
                started("default/world", vec![Trigger::Retry]),
                hook("default/world", None, Some(tb)),
                finished("default/world", 0, Some(&format!("sync hook failed: {tb}"))),
            ]
        };
        let mut events = round();
        events.extend(round());
        events.extend(round());
        events.push(started("default/world", vec![Trigger::Retry]));
        events.push(hook("default/world", None, None));
        events.push(finished("default/world", 0, None));
        events.extend(round());
        let lines = human(&events, false);
        let text = lines.join("\n");
        // The traceback: once for the first failure, once after the success in between.
        assert_eq!(text.matches("boom").count(), 2, "{text}");
        assert!(
            text.contains(
                "error     sync failed after 42.0ms: the hook failed (above); retry in 1.0s"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "sync failed after 42.0ms: same error again, 2 times in a row; retry in 1.0s"
            ),
            "{text}"
        );
        assert!(
            text.contains("same error again, 3 times in a row"),
            "{text}"
        );
    }

    #[test]
    fn an_exec_hooks_stderr_is_shown_with_v_and_in_json() {
        let call = EngineEvent::HookCalled {
            controller: "hello-world".into(),
            subject: EventParent::parent("default/world"),
            hook: "sync".into(),
            status: None,
            latency: Duration::from_millis(5),
            error: None,
            request: None,
            response: None,
            stderr: Some("debug: got 1 child\n".into()),
        };
        let lines = human(std::slice::from_ref(&call), true);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].trim() == "stderr:", "{lines:?}");
        assert!(lines[2].trim() == "debug: got 1 child", "{lines:?}");
        // Not without -v (the no-op sync line stays one line).
        let lines = human(
            &[
                started("default/world", vec![]),
                call.clone(),
                finished("default/world", 0, None),
            ],
            false,
        );
        assert!(!lines.join("\n").contains("debug"), "{lines:?}");
        let json = render(
            &mut printer(OutputFormat::Json, false, false),
            std::slice::from_ref(&call),
        );
        let v: Value = serde_json::from_str(&json[0]).expect("json");
        assert_eq!(v["stderr"], "debug: got 1 child\n");
    }

    #[test]
    fn a_decorator_controller_counts_targets() {
        let started = |kind: &str, n: usize| EngineEvent::ControllerStarted {
            controller_kind: kind.into(),
            controller: "d".into(),
            parent_resource: "StatefulSet.apps/v1".into(),
            parents: n,
        };
        let lines = human(
            &[
                started("DecoratorController", 1),
                started("DecoratorController", 2),
                started("CompositeController", 2),
            ],
            false,
        );
        assert!(lines[0].ends_with("(1 target)"), "{lines:?}");
        assert!(lines[1].ends_with("(2 targets)"), "{lines:?}");
        assert!(lines[2].ends_with("(2 parents)"), "{lines:?}");
    }

    #[test]
    fn other_events_and_empty_optional_fields() {
        let events = [
            EngineEvent::Info {
                controller: None,
                message: "context sandbox pinned".into(),
            },
            EngineEvent::ControllerStarted {
                controller_kind: "CompositeController".into(),
                controller: "hello-world".into(),
                parent_resource: "HelloWorld.example.com/v1".into(),
                parents: 1,
            },
            EngineEvent::Rollout {
                controller: "hello-world".into(),
                parent: "default/world".into(),
                reason: "RolloutWaiting".into(),
                message: "waiting for Pod default/world-0 to be Ready".into(),
            },
            EngineEvent::Error {
                controller: None,
                object: None,
                message: "discovery failed".into(),
            },
            EngineEvent::Error {
                controller: Some("hello-world".into()),
                object: Some("Thing.example.com/v1".into()),
                message: "resource not found; create its CRD".into(),
            },
            hook("default/world", None, None),
            hook("default/world", None, Some("exec hook timed out after 10s")),
            action("default/world", ActionVerb::Update, Some("")),
            EngineEvent::ControllerStopped {
                controller: "hello-world".into(),
            },
        ];
        let lines = human(&events, false);
        assert_eq!(
            lines,
            [
                "22:13:20.000                                     info      context sandbox pinned",
                "22:13:20.001 hello-world                         start     CompositeController watching HelloWorld.example.com/v1 (1 parent)",
                "22:13:20.002 hello-world   default/world         rollout   RolloutWaiting: waiting for Pod default/world-0 to be Ready",
                "22:13:20.003                                     error     discovery failed",
                "22:13:20.004 hello-world   Thing.example.com/v1  error     resource not found; create its CRD",
                "22:13:20.005 hello-world   default/world         hook      sync ok 12.9ms",
                "22:13:20.006 hello-world   default/world         hook      sync failed 12.9ms: exec hook timed out after 10s",
                "22:13:20.007 hello-world   default/world         update    Pod.v1 default/world",
                "22:13:20.008 hello-world                         stop      stopped",
            ]
        );
        for l in lines.iter().chain(&human(&events, true)) {
            for bad in ["None", "null", "Some(", "\"\""] {
                assert!(!l.contains(bad), "{bad} in {l:?}");
            }
        }
    }

    #[test]
    fn triggers_are_capped_at_three() {
        let triggers = vec![
            Trigger::ParentChanged,
            Trigger::Child {
                resource: "Pod.v1".into(),
                object: "default/world".into(),
                event: "deleted".into(),
            },
            Trigger::Related {
                resource: "ConfigMap.v1".into(),
                object: "default/cfg".into(),
            },
            Trigger::ResyncAfter,
            Trigger::Converge,
        ];
        let lines = human(&[started("p", triggers)], true);
        assert_eq!(
            lines,
            [
                "22:13:20.000 hello-world   p                     sync      started (parent changed, Pod.v1 default/world deleted, related ConfigMap.v1 default/cfg, +2 more)"
            ]
        );
    }

    #[test]
    fn unfinished_syncs_are_printed_on_finish() {
        let lines = human(
            &[
                started("p", vec![Trigger::ParentAdded]),
                hook("p", Some(200), None),
            ],
            false,
        );
        assert_eq!(
            lines,
            [
                "22:13:20.000 hello-world   p                     sync      started (parent added)",
                "22:13:20.001 hello-world   p                     hook      sync 200 12.9ms",
            ]
        );
    }

    #[test]
    fn control_characters_from_hooks_are_escaped() {
        let lines = human(
            &[EngineEvent::Info {
                controller: None,
                message: "evil\x1b[2Jhook\r\n".into(),
            }],
            false,
        );
        assert_eq!(
            lines,
            ["22:13:20.000                                     info      evil\\u{1b}[2Jhook"]
        );
    }

    #[test]
    fn colors_only_when_enabled() {
        let events = [
            started("p", vec![Trigger::ParentAdded]),
            hook("p", Some(200), None),
            hook("p", Some(500), Some("boom")),
            action("p", ActionVerb::Create, None),
            action("p", ActionVerb::Update, None),
            action("p", ActionVerb::Delete, None),
            action("p", ActionVerb::Adopt, None),
            action("p", ActionVerb::Status, None),
            finished("p", 4, Some("failed")),
        ];
        let plain = render(&mut printer(OutputFormat::Human, false, false), &events).join("\n");
        assert!(!plain.contains('\x1b'), "{plain}");
        let colored = render(&mut printer(OutputFormat::Human, true, false), &events);
        assert!(colored[0].starts_with("\x1b[2m22:13:20.000\x1b[0m "));
        assert!(colored[1].contains("sync \x1b[32m200\x1b[0m 12.9ms"));
        assert!(colored[2].contains("sync \x1b[31m500\x1b[0m 12.9ms: \x1b[1;31mboom\x1b[0m"));
        assert!(colored[3].contains("\x1b[32mcreate\x1b[0m    Pod.v1"));
        assert!(colored[4].contains("\x1b[33mupdate\x1b[0m"));
        assert!(colored[5].contains("\x1b[31mdelete\x1b[0m"));
        assert!(colored[6].contains("\x1b[36madopt\x1b[0m"));
        assert!(colored[7].contains("\x1b[34mstatus\x1b[0m"));
        assert!(colored[8].contains("\x1b[1;31merror\x1b[0m     \x1b[1;31msync failed"));
        let json = render(&mut printer(OutputFormat::Json, true, false), &events).join("\n");
        assert!(!json.contains('\x1b'), "{json}");
    }

    #[test]
    fn json_is_one_object_per_line_with_time() {
        let events = [
            started("default/world", vec![Trigger::ResyncPeriod]),
            hook("default/world", Some(200), None),
            finished("default/world", 0, None),
            EngineEvent::Error {
                controller: None,
                object: None,
                message: "line one\nline two".into(),
            },
        ];
        let mut p = printer(OutputFormat::Json, false, false);
        let lines = render(&mut p, &events);
        assert_eq!(
            lines.len(),
            events.len(),
            "no collapsing in JSON: {lines:?}"
        );
        for (i, (line, event)) in lines.iter().zip(&events).enumerate() {
            let v: Value = serde_json::from_str(line).expect("each line is JSON");
            let mut want = serde_json::to_value(event).expect("serializes");
            let time = v["time"].as_str().expect("time is a string");
            assert_eq!(time, format!("2023-11-14T22:13:20.00{i}Z"));
            assert_eq!(time.parse::<Timestamp>().expect("RFC 3339"), at(i as i64));
            want.as_object_mut()
                .expect("object")
                .insert("time".into(), time.into());
            assert_eq!(v, want);
        }
        let v: Value = serde_json::from_str(&lines[1]).expect("JSON");
        assert_eq!(v["event"], "hookCalled");
        assert_eq!(v["latencyMs"], 12.9);
        // Lost events are reported as JSON too.
        let mut p = printer(OutputFormat::Json, false, false);
        p.dropped_at(7, at(0)).expect("print");
        let v: Value = serde_json::from_slice(&p.out).expect("JSON");
        assert_eq!(v["event"], "eventsDropped");
        assert_eq!(v["count"], 7);
    }

    /// A writer the test can read while `run` owns the printer.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn lines(&self) -> Vec<String> {
            let buf = self.0.lock().expect("lock").clone();
            String::from_utf8(buf)
                .expect("utf-8")
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    #[tokio::test]
    async fn run_reports_lag_and_stops_when_the_channel_closes() {
        let tx = crate::engine::events::EventBus::with_capacity(2);
        let rx = tx.subscribe();
        // Five events into a channel of two: the first three are lost before `run` reads.
        for i in 0..5 {
            tx.publish(EngineEvent::Info {
                controller: None,
                message: format!("n{i}"),
            });
        }
        drop(tx);
        let out = Shared::default();
        let p = Printer::new(out.clone(), OutputFormat::Human, false, false);
        tokio::time::timeout(Duration::from_secs(30), run(rx, p, std::future::pending()))
            .await
            .expect("run returns when the channel closes")
            .expect("printing succeeds");
        let lines = out.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let tails: Vec<&str> = lines.iter().map(|l| &l[12..]).collect();
        assert_eq!(
            tails,
            [
                "                                     dropped   3 events not shown: the event log fell behind the engine",
                "                                     info      n3",
                "                                     info      n4",
            ]
        );
        for l in &lines {
            let t = &l.as_bytes()[..12];
            assert!(
                t[2] == b':' && t[5] == b':' && t[8] == b'.',
                "HH:MM:SS.mmm in {l:?}"
            );
        }
    }

    #[tokio::test]
    async fn run_stops_when_told_although_senders_live_and_prints_what_was_queued() {
        let tx = crate::engine::events::EventBus::with_capacity(16);
        let rx = tx.subscribe();
        for i in 0..2 {
            tx.publish(EngineEvent::Info {
                controller: None,
                message: format!("n{i}"),
            });
        }
        let out = Shared::default();
        let p = Printer::new(out.clone(), OutputFormat::Human, false, false);
        tokio::time::timeout(Duration::from_secs(30), run(rx, p, async {}))
            .await
            .expect("run returns when told to stop")
            .expect("printing succeeds");
        assert_eq!(out.lines().len(), 2, "{:?}", out.lines());
        drop(tx);
    }

    #[tokio::test]
    async fn run_flushes_held_back_syncs_at_close() {
        let tx = crate::engine::events::EventBus::with_capacity(16);
        let rx = tx.subscribe();
        tx.publish(started("p", vec![Trigger::Manual]));
        drop(tx);
        let out = Shared::default();
        let p = Printer::new(out.clone(), OutputFormat::Human, false, false);
        run(rx, p, std::future::pending())
            .await
            .expect("printing succeeds");
        let lines = out.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].ends_with("hello-world   p                     sync      started (manual)")
        );
    }
}
