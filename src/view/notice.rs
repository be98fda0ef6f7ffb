//! What a person sees of an engine event: the one place that words every [`EngineEvent`].
//!
//! The headless log of `kubectl meta dev` ([`crate::view::log`]) and the TUI's logs
//! ([`crate::view::tui`]) both show engine events as text. Both take it from here, so a write, a held
//! plan, a hook failure or a replay reads the same in either. A [`Notice`] is front-end neutral:
//! who it is about (controller, parent column), a short tag (`create`, `hook`, `held`, ...) and
//! lines of [`Span`]s carrying a [`Tone`]; the log printer turns tones into SGR colors, the TUI
//! into its theme's styles, and either may drop them (`NO_COLOR`, `--color never`).
//!
//! What stays with each front end is what depends on its state, not on the event: the printer
//! collapses no-op syncs and shortens a failure that repeats (it asks [`sync_finished`] for the
//! wording), the TUI folds events into its model.

use std::time::Duration;

use crate::engine::events::{ActionVerb, EngineEvent, EventSubject, Trigger};
use crate::engine::plan::apply::FieldChange;
use crate::engine::plan::child::ChildId;
use crate::engine::plan::planner::ObjectAction;
use crate::spec::UpdateMethod;

/// Triggers listed on a sync line before `+N more`.
const MAX_TRIGGERS: usize = 3;

/// How a piece of text is emphasised. Each front end maps tones to its own styling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// No emphasis.
    Plain,
    /// Secondary text (hook output, timestamps).
    Dim,
    /// Success, creates, added fields.
    Good,
    /// Updates, things held or paused, throttling.
    Warn,
    /// Deletes, releases, failed calls, removed fields.
    Bad,
    /// Errors a person must read.
    Alert,
    /// Adoptions, reloads, replays, map-key decisions.
    Note,
    /// Writes to the parent itself: status, finalizers, revisions.
    Meta,
    /// Rollout steps.
    Step,
}

/// A run of text in one [`Tone`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The text (one line, already safe for a terminal).
    pub text: String,
    /// Its emphasis.
    pub tone: Tone,
}

/// One line of a notice.
pub type Line = Vec<Span>;

/// An engine event as a person sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The controller it is about (empty: the whole run).
    pub controller: String,
    /// The parent column: `ns/name`, `ns/name KEY`, `ns/name (status)`, or empty.
    pub parent: String,
    /// A short word saying what happened (`create`, `hook`, `sync`, `held`, `reload`, ...).
    pub tag: &'static str,
    /// The tag's tone.
    pub tag_tone: Tone,
    /// The content: the first line, then continuation lines.
    pub lines: Vec<Line>,
}

impl Notice {
    fn new(controller: &str, parent: String, (tag, tag_tone): (&'static str, Tone)) -> Self {
        Notice {
            controller: clean(controller),
            parent: clean(&parent),
            tag,
            tag_tone,
            lines: vec![Vec::new()],
        }
    }

    /// Appends `text` in `tone`; newlines in it start new lines (in the same tone).
    fn push(mut self, text: &str, tone: Tone) -> Self {
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.lines.push(Vec::new());
            }
            if !part.is_empty()
                && let Some(line) = self.lines.last_mut()
            {
                line.push(Span {
                    text: part.to_string(),
                    tone,
                });
            }
        }
        self
    }

    /// Appends `text` without emphasis.
    fn plain(self, text: &str) -> Self {
        self.push(text, Tone::Plain)
    }

    /// Appends the spans of `line` to the last line.
    fn extend(mut self, line: Line) -> Self {
        if let Some(last) = self.lines.last_mut() {
            last.extend(line);
        }
        self
    }

    /// Starts a new line.
    fn newline(mut self) -> Self {
        self.lines.push(Vec::new());
        self
    }

    /// The content without styling, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.lines
            .iter()
            .map(line_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One line without styling.
pub fn line_text(line: &Line) -> String {
    line.iter().map(|s| s.text.as_str()).collect()
}

/// Per child type, the first child a plan leaves unlike the hook's answer because its type's
/// update strategy is OnDelete (Metacontroller's default when a child resource names none):
/// `(type, notice)`. A sync that holds such a change writes nothing, so the log would say
/// only "no changes" (also after a hook edit); the front ends show this once per controller
/// and child type.
pub fn held_by_on_delete(event: &EngineEvent) -> Vec<(String, Notice)> {
    let EngineEvent::Planned {
        controller,
        subject,
        objects,
        ..
    } = event
    else {
        return Vec::new();
    };
    let mut out: Vec<(String, Notice)> = Vec::new();
    let held = objects.iter().filter(|o| {
        o.action == ObjectAction::Skip
            && o.strategy == Some(UpdateMethod::OnDelete)
            && o.reason.starts_with("OnDelete")
    });
    for o in held {
        if out.iter().any(|(t, _)| *t == o.id.type_key) {
            continue;
        }
        let name = match &o.id.key.namespace {
            Some(ns) => format!("{ns}/{}", o.id.key.name),
            None => o.id.key.name.clone(),
        };
        let mut fields: Vec<&str> = o.changes.iter().map(|c| c.path.as_str()).take(3).collect();
        if o.changes.len() > 3 {
            fields.push("...");
        }
        let content = format!(
            "{} {name}: the hook's change ({}) is not applied: its updateStrategy is OnDelete \
             (Metacontroller's default when the child resource names none), which never updates \
             an existing {}\nto apply changes, set `updateStrategy: {{method: InPlace}}` (or \
             Recreate, RollingUpdate, RollingRecreate) on that child resource of {controller}; \
             or delete the object to have it created anew (said once per child type)",
            o.id.type_key,
            fields.join(", "),
            o.kind
        );
        out.push((
            o.id.type_key.clone(),
            Notice::new(controller, subject.parent.clone(), ("held", Tone::Warn))
                .push(&content, Tone::Warn),
        ));
    }
    out
}

/// The notice of `event`, or `None` for events that are not shown as text (per-object plans,
/// the API rate, which front ends show as figures). `verbose` adds what only `-v` shows (a
/// successful exec hook's stderr).
///
/// Sync failures are worded without history here; a front end that knows the failure repeats
/// words it with [`sync_finished`].
pub fn describe(event: &EngineEvent, verbose: bool) -> Option<Notice> {
    let notice = match event {
        EngineEvent::Planned { .. } | EngineEvent::ApiRate { .. } => return None,
        EngineEvent::ControllerStarted {
            controller_kind,
            controller,
            parent_resource,
            parents,
        } => {
            // A DecoratorController's objects are targets, MapController's parents.
            let noun = if controller_kind == "DecoratorController" {
                "target"
            } else {
                "parent"
            };
            let what = if *parents == 1 {
                noun.to_string()
            } else {
                format!("{noun}s")
            };
            Notice::new(controller, String::new(), ("start", Tone::Plain)).plain(&format!(
                "{} watching {} ({parents} {what})",
                clean(controller_kind),
                clean(parent_resource)
            ))
        }
        EngineEvent::ControllerStopped { controller } => {
            Notice::new(controller, String::new(), ("stop", Tone::Plain)).plain("stopped")
        }
        EngineEvent::SyncStarted {
            controller,
            subject,
            triggers,
        } => {
            let content = if triggers.is_empty() {
                "started".to_string()
            } else {
                format!("started ({})", trigger_list(triggers))
            };
            Notice::new(
                controller,
                subject.to_string(),
                ("sync", Tone::Plain),
            )
            .plain(&content)
        }
        EngineEvent::HookCalled {
            controller,
            subject,
            hook,
            status,
            latency,
            error,
            stderr,
            ..
        } => {
            let error = non_empty(error);
            let mut n = Notice::new(
                controller,
                subject.to_string(),
                ("hook", Tone::Plain),
            )
            .extend(hook_outcome(hook, *status, *latency, error.is_some()));
            if let Some(e) = error {
                n = n.plain(": ").push(&clean(e), Tone::Alert);
            }
            // What a successful exec hook wrote to stderr is its author's debug output:
            // shown with -v (a failed call's error already carries its tail).
            if verbose
                && error.is_none()
                && let Some(text) = non_empty(stderr)
            {
                n = n
                    .newline()
                    .plain("stderr:")
                    .newline()
                    .push(&clean(text.trim_end()), Tone::Dim);
            }
            n
        }
        EngineEvent::Action {
            controller,
            subject,
            verb,
            resource,
            object,
            detail,
            error,
        } => {
            let (tag, tone, prefix) = verb_style(*verb);
            let mut n = Notice::new(controller, subject.to_string(), (tag, tone))
                .plain(&format!("{prefix}{} {}", clean(resource), clean(object)));
            if let Some(d) = non_empty(detail) {
                n = n.plain(&format!("  {}", clean(d)));
            }
            if let Some(e) = non_empty(error) {
                n = n
                    .plain("  ")
                    .push(&format!("failed: {}", clean(e)), Tone::Alert);
            }
            n
        }
        EngineEvent::SyncFinished { .. } => return sync_finished(event, Repeat::First),
        EngineEvent::Rollout {
            controller,
            parent,
            reason,
            message,
        } => {
            let content = if message.trim().is_empty() {
                clean(reason)
            } else {
                format!("{}: {}", clean(reason), clean(message))
            };
            Notice::new(controller, parent.clone(), ("rollout", Tone::Step)).plain(&content)
        }
        EngineEvent::Error {
            controller,
            object,
            message,
        } => Notice::new(
            controller.as_deref().unwrap_or(""),
            object.clone().unwrap_or_default(),
            ("error", Tone::Alert),
        )
        .push(&clean(message), Tone::Alert),
        EngineEvent::HotLoop {
            controller,
            subject,
            message,
            ..
        } => Notice::new(
            controller,
            subject.to_string(),
            ("hot-loop", Tone::Alert),
        )
        .push(&clean(message), Tone::Alert),
        EngineEvent::TakenOver {
            controller,
            lease,
            from,
        } => Notice::new(controller, String::new(), ("takeover", Tone::Note)).plain(&format!(
            "took over lease {} from {} (kubectl meta run); it takes the controller back when this dev loop exits or its lease lapses",
            clean(lease),
            clean(from)
        )),
        EngineEvent::Info {
            controller,
            message,
        } => Notice::new(
            controller.as_deref().unwrap_or(""),
            String::new(),
            ("info", Tone::Plain),
        )
        .plain(&clean(message)),
        EngineEvent::PlanHeld {
            controller,
            subject,
            actions,
        } => {
            let content = if actions.is_empty() {
                "paused: nothing to write".to_string()
            } else {
                let list: Vec<String> = actions.iter().map(|a| clean(&a.to_string())).collect();
                format!("paused, not written:\n{}", list.join("\n"))
            };
            Notice::new(
                controller,
                subject.to_string(),
                ("held", Tone::Warn),
            )
            .push(&content, Tone::Warn)
        }
        EngineEvent::Detached {
            controller,
            parent,
            map_key,
            outputs,
        } => Notice::new(
            controller,
            EventSubject::map_key(parent.as_str(), map_key.as_str()).to_string(),
            ("detached", Tone::Note),
        )
        .plain(&format!("input gone: {}", id_list(outputs))),
        EngineEvent::Tombstone {
            controller,
            parent,
            map_key,
            kept,
            deleted,
        } => {
            let mut parts = Vec::new();
            if !kept.is_empty() {
                parts.push(format!("kept {}", id_list(kept)));
            }
            if !deleted.is_empty() {
                parts.push(format!("deleted {}", id_list(deleted)));
            }
            Notice::new(
                controller,
                EventSubject::map_key(parent.as_str(), map_key.as_str()).to_string(),
                ("tombstone", Tone::Note),
            )
            .plain(&parts.join("; "))
        }
        EngineEvent::Paused { paused } => {
            let content = if *paused {
                "writes paused: hooks are still called and plans shown, nothing is written (resume: p, SIGUSR2 or kubectl meta dev --resume)"
            } else {
                "writes resumed"
            };
            Notice::new("", String::new(), ("pause", Tone::Warn)).plain(content)
        }
        EngineEvent::HookServer {
            state,
            pid,
            message,
        } => {
            let mut content = clean(state);
            if let Some(pid) = pid {
                content.push_str(&format!(" (pid {pid})"));
            }
            if !message.trim().is_empty() {
                content.push_str(": ");
                content.push_str(&clean(message));
            }
            let tone = match state.as_str() {
                "failed" | "exited" => Tone::Alert,
                "ready" => Tone::Good,
                _ => Tone::Plain,
            };
            Notice::new("", String::new(), ("server", tone)).push(&content, tone)
        }
        EngineEvent::HookServerOutput { stream, line } => {
            let tag = if stream == "stderr" {
                "server!"
            } else {
                "server>"
            };
            Notice::new("", String::new(), (tag, Tone::Plain)).push(&clean(line), Tone::Dim)
        }
        EngineEvent::Reload {
            what,
            paths,
            message,
            error,
        } => {
            let files: Vec<String> = paths.iter().map(|p| clean(p)).collect();
            let mut content = format!("{} ({})", clean(what), files.join(", "));
            if !message.trim().is_empty() {
                content.push_str(": ");
                content.push_str(&clean(message));
            }
            match non_empty(error) {
                Some(e) => Notice::new("", String::new(), ("reload", Tone::Alert))
                    .plain(&format!("{content}: "))
                    .push(&clean(e), Tone::Alert),
                None => Notice::new("", String::new(), ("reload", Tone::Note)).plain(&content),
            }
        }
        EngineEvent::Replay {
            controller,
            subject,
            hook,
            changes,
            error,
        } => {
            let n = Notice::new(
                controller,
                subject.to_string(),
                ("replay", Tone::Note),
            );
            match (non_empty(error), changes.is_empty()) {
                (Some(e), _) => n.push(
                    &format!(
                        "{} hook failed on the last request: {}",
                        clean(hook),
                        clean(e)
                    ),
                    Tone::Alert,
                ),
                (None, true) => n.plain(&format!(
                    "{} answers the last request as before",
                    clean(hook)
                )),
                (None, false) => {
                    let mut n = n.plain(&format!(
                        "{} answers the last request differently ({} change{}):",
                        clean(hook),
                        changes.len(),
                        if changes.len() == 1 { "" } else { "s" }
                    ));
                    for c in changes {
                        n = n.newline().extend(change_line(c));
                    }
                    n
                }
            }
        }
    };
    Some(notice)
}

/// How a failed sync relates to the ones before it, as the front end that words it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Shown in full.
    First,
    /// The hook's own failure, already shown in full on its `hook` line.
    HookShown,
    /// The same error as the last `n` syncs of this parent (`n` counts this one).
    Again(u32),
}

/// The end of a sync: `done in`, or the failure, worded for `repeat`. `None` for other events.
pub fn sync_finished(event: &EngineEvent, repeat: Repeat) -> Option<Notice> {
    let EngineEvent::SyncFinished {
        controller,
        subject,
        duration,
        writes,
        error,
        retry_in,
        ..
    } = event
    else {
        return None;
    };
    let parent = subject.to_string();
    let took = fmt_duration(*duration);
    let wrote = match writes {
        0 => "no changes".to_string(),
        1 => "1 write".to_string(),
        n => format!("{n} writes"),
    };
    let Some(e) = non_empty(error) else {
        return Some(
            Notice::new(controller, parent, ("sync", Tone::Plain))
                .plain(&format!("done in {took}, {wrote}")),
        );
    };
    let retry = retry_in
        .map(|r| format!("; retry in {}", fmt_seconds(r)))
        .unwrap_or_default();
    let mut text = format!("sync failed after {took}");
    if *writes > 0 {
        text.push_str(&format!(" ({wrote})"));
    }
    match repeat {
        Repeat::Again(count) if count > 1 => text.push_str(&format!(
            ": same error again, {count} times in a row{retry}"
        )),
        Repeat::HookShown => text.push_str(&format!(": the hook failed (above){retry}")),
        _ => {
            text.push_str(": ");
            text.push_str(&clean(e));
            text.push_str(&retry);
        }
    }
    Some(Notice::new(controller, parent, ("error", Tone::Alert)).push(&text, Tone::Alert))
}

/// `sync 200 3.1ms`, `sync 500 3.1ms`, `sync failed 3.1ms`, `sync ok 3.1ms` (exec hook): a hook
/// call's outcome without its error (`failed`: `error` is some).
pub fn hook_outcome(hook: &str, status: Option<u16>, latency: Duration, failed: bool) -> Line {
    let (outcome, tone) = match status {
        Some(s) if (200..300).contains(&s) => (s.to_string(), Tone::Good),
        Some(s) => (s.to_string(), Tone::Bad),
        None if failed => ("failed".to_string(), Tone::Bad),
        None => ("ok".to_string(), Tone::Good),
    };
    vec![
        Span {
            text: format!("{} ", clean(hook)),
            tone: Tone::Plain,
        },
        Span {
            text: outcome,
            tone,
        },
        Span {
            text: format!(" {}", fmt_duration(latency)),
            tone: Tone::Plain,
        },
    ]
}

/// Whether a hook call succeeded (no error, a 2xx status or an exec hook's success).
pub fn hook_ok(status: Option<u16>, error: &Option<String>) -> bool {
    error.is_none() && status.is_none_or(|s| (200..300).contains(&s))
}

/// `path: old -> new` with the removed side in [`Tone::Bad`] and the added side in
/// [`Tone::Good`].
pub fn change_line(c: &FieldChange) -> Line {
    let show = |v: &Option<serde_json::Value>| match v {
        Some(v) => clean(&v.to_string()),
        None => "(none)".to_string(),
    };
    let span = |text: String, tone| Span { text, tone };
    match (&c.old, &c.new) {
        (None, Some(_)) => vec![
            span(format!("+ {}:", clean(&c.path)), Tone::Good),
            span(format!(" {}", show(&c.new)), Tone::Plain),
        ],
        (Some(_), None) => vec![
            span(format!("- {}:", clean(&c.path)), Tone::Bad),
            span(format!(" {}", show(&c.old)), Tone::Plain),
        ],
        _ => vec![
            span(format!("~ {}: ", clean(&c.path)), Tone::Plain),
            span(show(&c.old), Tone::Bad),
            span(" -> ".to_string(), Tone::Plain),
            span(show(&c.new), Tone::Good),
        ],
    }
}

/// Tag, tone and content prefix of a write.
fn verb_style(verb: ActionVerb) -> (&'static str, Tone, &'static str) {
    match verb {
        ActionVerb::Create => ("create", Tone::Good, ""),
        ActionVerb::Update => ("update", Tone::Warn, ""),
        ActionVerb::Delete => ("delete", Tone::Bad, ""),
        ActionVerb::Adopt => ("adopt", Tone::Note, ""),
        ActionVerb::Release => ("release", Tone::Bad, ""),
        ActionVerb::Status => ("status", Tone::Meta, ""),
        ActionVerb::AddFinalizer => ("finalizer", Tone::Meta, "add "),
        ActionVerb::RemoveFinalizer => ("finalizer", Tone::Meta, "remove "),
        ActionVerb::Revision => ("revision", Tone::Meta, ""),
        ActionVerb::ApplyDocument => ("apply", Tone::Good, ""),
        ActionVerb::NoOp => ("no-op", Tone::Dim, ""),
    }
}

/// `ConfigMap.v1 ns/a, Secret.v1 ns/b`.
fn id_list(ids: &[ChildId]) -> String {
    ids.iter()
        .map(|i| format!("{} {}", clean(&i.type_key), clean(&i.object())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `parent added, parent changed, retry, +2 more`.
pub fn trigger_list(triggers: &[Trigger]) -> String {
    let mut parts: Vec<String> = triggers
        .iter()
        .take(MAX_TRIGGERS)
        .map(|t| clean(&t.to_string()))
        .collect();
    if triggers.len() > MAX_TRIGGERS {
        parts.push(format!("+{} more", triggers.len() - MAX_TRIGGERS));
    }
    parts.join(", ")
}

/// `Some(s)` when `s` has more than blanks.
pub fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.trim().is_empty())
}

/// Text from the engine or a hook, made safe for a terminal: no trailing blank, no carriage
/// returns, other control characters (escape sequences) shown escaped, newlines kept.
pub fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.trim_end().chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            '\r' => {}
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// `0.4ms`, `12.9ms`, `420ms`, `1.3s`, `2m05s`.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 99.95 {
        format!("{ms:.1}ms")
    } else if ms < 999.5 {
        format!("{ms:.0}ms")
    } else {
        fmt_seconds(d.as_secs_f64())
    }
}

/// `1.0s`, `2m05s` (seconds as the engine reports `retry_in`).
pub fn fmt_seconds(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return format!("{s}s");
    }
    if s < 59.95 {
        format!("{s:.1}s")
    } else {
        let total = s.round() as u64;
        format!("{}m{:02}s", total / 60, total % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short_and_readable() {
        assert_eq!(fmt_duration(Duration::from_micros(400)), "0.4ms");
        assert_eq!(fmt_duration(Duration::from_micros(12_940)), "12.9ms");
        assert_eq!(fmt_duration(Duration::from_millis(420)), "420ms");
        assert_eq!(fmt_duration(Duration::from_millis(1_250)), "1.2s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(fmt_seconds(1.0), "1.0s");
        assert_eq!(fmt_seconds(f64::NAN), "NaNs");
    }
}
