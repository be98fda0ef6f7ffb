//! The TUI's reducer: one engine event -> the [`model`](super::model)'s update ([`App::apply`]),
//! and the engine's notices on the parent logs and the global log as [`notice`] words them.

use std::time::{Duration, Instant};

use crate::engine::events::{ActionVerb, EngineEvent, EventParent, EventSubject, HeldAction};
use crate::k8s::object;
use crate::view::notice::{self, Notice, Tone};

use super::model::{
    ActionRecord, ApiRateView, App, HookRecord, PlanRecord, PlannedObject, ReloadInfo,
    ReplayRecord, SERVER_LINES, ServerInfo, SyncState, error_heading,
};

/// A held write as the tree shows it (marked held, not written).
fn held_action(a: &HeldAction) -> ActionRecord {
    ActionRecord {
        verb: a.verb.to_string(),
        resource: a.resource.clone(),
        object: a.object.clone(),
        detail: a.detail.clone(),
        error: None,
        held: true,
    }
}

impl App {
    /// Fold one engine event into the model (at `now`).
    pub fn apply(&mut self, event: &EngineEvent, now: Instant) {
        self.applied += 1;
        self.dirty = true;
        match event {
            EngineEvent::ControllerStarted {
                controller_kind,
                controller,
                parent_resource,
                ..
            } => self.on_controller_started(controller, controller_kind, parent_resource),
            EngineEvent::ControllerStopped { controller } => {
                let c = self.controller_mut(controller);
                self.controllers[c].stopped = true;
            }
            EngineEvent::SyncStarted {
                controller,
                subject: EventSubject {
                    parent, map_key, ..
                },
                ..
            } => self.on_sync_started(controller, parent, map_key.as_deref()),
            EngineEvent::HookCalled { .. } => self.on_hook_called(event),
            EngineEvent::Action { .. } => self.on_action(event, now),
            EngineEvent::Planned { .. } => self.on_planned(event),
            EngineEvent::PlanHeld { .. } => self.on_plan_held(event),
            EngineEvent::SyncFinished { .. } => self.on_sync_finished(event, now),
            EngineEvent::Rollout {
                controller,
                parent,
                reason,
                message,
            } => {
                let i = self.parent_mut(controller, parent);
                self.parents[i].rollout = Some(format!("{reason}: {message}"));
                self.log_event(Some(i), event, None);
            }
            EngineEvent::Error {
                controller, object, ..
            } => self.on_error(controller.as_deref(), object.as_deref(), event),
            EngineEvent::Paused { paused } => {
                self.paused = *paused;
                self.log_event(None, event, None);
            }
            EngineEvent::HookServer {
                state,
                pid,
                message,
            } => {
                self.on_hook_server(state, *pid, message);
                self.log_event(None, event, None);
            }
            EngineEvent::HookServerOutput { stream, line } => {
                if self.server_output.len() == SERVER_LINES {
                    self.server_output.pop_front();
                }
                self.server_output.push_back(format!("{stream}: {line}"));
            }
            EngineEvent::Reload { .. } => self.on_reload(event, now),
            EngineEvent::Replay { .. } => self.on_replay(event),
            EngineEvent::HotLoop { .. }
            | EngineEvent::Detached { .. }
            | EngineEvent::Tombstone { .. } => self.on_parent_notice(event),
            EngineEvent::Info { .. } => self.log_event(None, event, None),
            EngineEvent::TakenOver {
                controller, from, ..
            } => {
                self.taken_over.insert(controller.clone(), from.clone());
                self.log_event(None, event, None);
            }
            EngineEvent::ApiRate {
                requests_per_second,
                throttled,
                window,
                retry_after_seconds,
                ..
            } => {
                self.api = Some((
                    now,
                    ApiRateView {
                        per_second: *requests_per_second,
                        throttled: *throttled,
                        window: *window,
                        retry_after_seconds: *retry_after_seconds,
                    },
                ));
            }
        }
    }

    /// A controller (re)started: its kind and parent type, no longer stopped.
    fn on_controller_started(&mut self, controller: &str, kind: &str, parent_resource: &str) {
        let c = self.controller_mut(controller);
        let entry = &mut self.controllers[c];
        kind.clone_into(&mut entry.kind);
        parent_resource.clone_into(&mut entry.parent_resource);
        entry.stopped = false;
    }

    /// A sync of a parent (or map key) began: syncing, its pending writes cleared.
    fn on_sync_started(&mut self, controller: &str, parent: &str, map_key: Option<&str>) {
        let before = self.class_of(controller, parent);
        let (i, unit) = self.unit_mut(controller, parent, map_key);
        unit.state = SyncState::Syncing;
        unit.pending.clear();
        self.restate(i, before);
    }

    /// A hook call: kept as the unit's last call of that hook; the parent's uid learned from
    /// its request.
    fn on_hook_called(&mut self, event: &EngineEvent) {
        let EngineEvent::HookCalled {
            controller,
            subject: EventParent { parent, map_key },
            hook,
            status,
            latency,
            error,
            request,
            response,
            stderr,
        } = event
        else {
            return;
        };
        let uid = request.as_ref().and_then(|r| {
            let obj = r.get("parent").or_else(|| r.get("object"))?;
            object::uid(obj).map(str::to_string)
        });
        let (i, _) = self.unit_mut(controller, parent, map_key.as_deref());
        if uid.is_some() && self.parents[i].uid != uid {
            self.parents[i].uid = uid;
        }
        let (_, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.calls.insert(
            hook.clone(),
            HookRecord {
                hook: hook.clone(),
                status: *status,
                latency: *latency,
                error: error.clone(),
                request: request.clone(),
                response: response.clone(),
                stderr: stderr.clone(),
            },
        );
    }

    /// A write: counted, pending on its unit until the sync finishes, and logged; a document
    /// applied outside any parent goes to the global log only.
    fn on_action(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::Action {
            controller,
            subject: EventParent { parent, map_key },
            verb,
            resource,
            object,
            detail,
            error,
        } = event
        else {
            return;
        };
        if *verb == ActionVerb::ApplyDocument || parent.is_empty() {
            self.log_event(None, event, None);
            return;
        }
        if error.is_none() {
            self.writes.push_back(now);
        }
        let (i, _) = self.unit_mut(controller, parent, None);
        // A MapController's writes belong to their map key; a write without one (the
        // status) to the map key whose last call listed the object, if any.
        let key = map_key
            .clone()
            .or_else(|| self.parents[i].key_listing(resource, object));
        let entry = &mut self.parents[i];
        let unit = match key {
            Some(k) => entry.keys.entry(k).or_default(),
            None => &mut entry.unit,
        };
        let record = ActionRecord {
            verb: verb.to_string(),
            resource: resource.clone(),
            object: object.clone(),
            detail: detail.clone(),
            error: error.clone(),
            held: false,
        };
        unit.pending.push(record);
        self.log_event(Some(i), event, None);
    }

    /// A sync's per-object plan: what the tree shows (each object with its marker and what
    /// the sync observed of it) and the detached outputs' fate.
    fn on_planned(&mut self, event: &EngineEvent) {
        let EngineEvent::Planned {
            controller,
            subject: EventParent { parent, map_key },
            objects,
            detached,
            ..
        } = event
        else {
            return;
        };
        let (_, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.plan = Some(PlanRecord {
            objects: objects
                .iter()
                .map(|o| {
                    (
                        (o.id.type_key.clone(), o.id.key.name.clone()),
                        PlannedObject {
                            marker: o.action.marker(),
                            reason: o.reason.clone(),
                            live: o.before.clone(),
                        },
                    )
                })
                .collect(),
            detached: detached
                .iter()
                .map(|d| ((d.id.type_key.clone(), d.id.key.name.clone()), d.kept))
                .collect(),
        });
    }

    /// Writes paused: the plan's writes are pending as held actions.
    fn on_plan_held(&mut self, event: &EngineEvent) {
        let EngineEvent::PlanHeld {
            controller,
            subject: EventSubject {
                parent, map_key, ..
            },
            actions,
            ..
        } = event
        else {
            return;
        };
        let (i, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.pending.extend(actions.iter().map(held_action));
        self.log_event(Some(i), event, None);
    }

    /// A sync ended: its writes become the unit's last, its state in sync, failed (with the
    /// retry time and the error's layer) or held.
    fn on_sync_finished(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::SyncFinished {
            controller,
            subject: EventSubject {
                parent, map_key, ..
            },
            duration,
            writes,
            error,
            error_layer,
            retry_in,
            ..
        } = event
        else {
            return;
        };
        let paused = self.paused;
        let before = self.class_of(controller, parent);
        let (i, unit) = self.unit_mut(controller, parent, map_key.as_deref());
        unit.actions = std::mem::take(&mut unit.pending);
        unit.last_sync = Some(now);
        unit.last_duration = Some(*duration);
        unit.writes = *writes;
        unit.error.clone_from(error);
        unit.error_layer = *error_layer;
        unit.state = if error.is_some() {
            SyncState::Failed {
                retry_at: retry_in.map(|s| now + Duration::from_secs_f64(s.max(0.0))),
            }
        } else if paused && unit.actions.iter().any(|a| a.held) {
            SyncState::Held
        } else {
            SyncState::InSync
        };
        self.restate(i, before);
        if error.is_some() {
            self.errors += 1;
            // The error's layer leads the line (the log printer has no room for it).
            let lead = notice::Span {
                text: format!("{}: ", error_heading(*error_layer)),
                tone: Tone::Alert,
            };
            if let Some(n) = notice::sync_finished(event, notice::Repeat::First) {
                self.log_notice(Some(i), &n, Some(lead));
            }
        }
    }

    /// An engine error: counted, logged on its parent when it names a known one, else
    /// globally.
    fn on_error(&mut self, controller: Option<&str>, object: Option<&str>, event: &EngineEvent) {
        self.errors += 1;
        let known = match (controller, object) {
            (Some(c), Some(o))
                if self
                    .parent_index
                    .contains_key(&(c.to_string(), o.to_string())) =>
            {
                Some(self.parent_mut(c, o))
            }
            _ => None,
        };
        self.log_event(known, event, None);
    }

    /// The managed hook server changed state (a restart is counted).
    fn on_hook_server(&mut self, state: &str, pid: Option<u32>, message: &str) {
        let s = self.server.get_or_insert_with(ServerInfo::default);
        if state == "restarting" {
            s.restarts += 1;
        }
        state.clone_into(&mut s.state);
        s.pid = pid;
        message.clone_into(&mut s.message);
    }

    /// A reload (or a refused one): the new last reload, its replay counts at zero.
    fn on_reload(&mut self, event: &EngineEvent, now: Instant) {
        let EngineEvent::Reload {
            what, paths, error, ..
        } = event
        else {
            return;
        };
        self.reload = Some(ReloadInfo {
            what: what.clone(),
            paths: paths.clone(),
            at: now,
            changed: 0,
            replayed: 0,
            error: error.clone(),
        });
        self.log_event(None, event, None);
    }

    /// A parent's request replayed against a reloaded hook: counted on the reload, kept as
    /// the parent's last replay.
    fn on_replay(&mut self, event: &EngineEvent) {
        let EngineEvent::Replay {
            controller,
            subject: EventParent { parent, .. },
            hook,
            changes,
            error,
            ..
        } = event
        else {
            return;
        };
        if let Some(r) = &mut self.reload {
            r.replayed += 1;
            r.changed += usize::from(!changes.is_empty() || error.is_some());
        }
        let i = self.parent_mut(controller, parent);
        self.parents[i].replay = Some(ReplayRecord {
            hook: hook.clone(),
            changes: changes.clone(),
            error: error.clone(),
        });
        self.log_event(Some(i), event, None);
    }

    /// A hot loop, a MapController's detached outputs or tombstone decision: a line of the
    /// parent's log.
    fn on_parent_notice(&mut self, event: &EngineEvent) {
        let (EngineEvent::HotLoop {
            controller,
            subject: EventParent { parent, .. },
            ..
        }
        | EngineEvent::Detached {
            controller, parent, ..
        }
        | EngineEvent::Tombstone {
            controller, parent, ..
        }) = event
        else {
            return;
        };
        let i = self.parent_mut(controller, parent);
        self.log_event(Some(i), event, None);
    }

    /// Puts `event`'s [`notice`] on a log: parent `i`'s, or the engine's (`None`).
    fn log_event(&mut self, i: Option<usize>, event: &EngineEvent, lead: Option<notice::Span>) {
        if let Some(n) = notice::describe(event, false) {
            self.log_notice(i, &n, lead);
        }
    }

    /// Puts notice `n` on parent `i`'s log (`tag content`, a map key or `(status)` first), or
    /// on the engine's log (controller and parent first); `lead` goes before everything.
    /// Continuation lines are indented.
    fn log_notice(&mut self, i: Option<usize>, n: &Notice, lead: Option<notice::Span>) {
        let span = |text: String, tone| notice::Span { text, tone };
        let mut head: notice::Line = lead.into_iter().collect();
        match i {
            Some(i) => {
                // The parent column without the parent itself: a map key, `(status)`.
                let rest = n
                    .parent
                    .strip_prefix(self.parents[i].key.as_str())
                    .unwrap_or(&n.parent)
                    .trim();
                if !rest.is_empty() {
                    head.push(span(format!("{rest}: "), Tone::Plain));
                }
            }
            None => {
                for who in [&n.controller, &n.parent] {
                    if !who.is_empty() {
                        head.push(span(format!("{who} "), Tone::Dim));
                    }
                }
            }
        }
        head.push(span(format!("{} ", n.tag), n.tag_tone));
        let mut lines = n.lines.iter();
        if let Some(first) = lines.next() {
            head.extend(first.iter().cloned());
        }
        let rest = lines.map(|l| {
            let mut line = vec![span("  ".to_string(), Tone::Plain)];
            line.extend(l.iter().cloned());
            line
        });
        for line in std::iter::once(head).chain(rest) {
            match i {
                Some(i) => self.parents[i].push_log(line),
                None => self.push_log(line),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tui::model::{Parent, Row};

    /// A parent's log lines without styling.
    fn log_text(p: &Parent) -> Vec<String> {
        p.log.iter().map(notice::line_text).collect()
    }

    fn started() -> EngineEvent {
        EngineEvent::ControllerStarted {
            controller_kind: "CompositeController".into(),
            controller: "c".into(),
            parent_resource: "Thing.example/v1".into(),
            parents: 1,
        }
    }

    #[test]
    fn map_work_items_fold_under_their_parent() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        for (k, status_only) in [(None, false), (Some("key-a"), false), (None, true)] {
            app.apply(
                &EngineEvent::SyncStarted {
                    controller: "c".into(),
                    subject: EventSubject {
                        parent: "ns/p".into(),
                        map_key: k.map(str::to_string),
                        status_only,
                    },
                    triggers: vec![],
                },
                now,
            );
        }
        assert_eq!(app.parents.len(), 1);
        assert_eq!(app.parents[0].keys.len(), 1);
        assert_eq!(*app.parents[0].state(), SyncState::Syncing);
        assert_eq!(app.syncing(), 1);
        app.apply(
            &EngineEvent::SyncFinished {
                controller: "c".into(),
                subject: EventSubject {
                    parent: "ns/p".into(),
                    map_key: Some("key-a".into()),
                    status_only: false,
                },
                duration: Duration::ZERO,
                writes: 0,
                error: Some("boom".into()),
                error_layer: Some(crate::engine::error::Layer::Hook),
                retry_in: Some(2.0),
            },
            now,
        );
        // The worst state of the parent and its keys wins: failed.
        assert_eq!((app.syncing(), app.failing()), (0, 1));
        app.ui.filter = "zzz".into();
        app.filter_changed();
        assert_eq!(app.rows(), &[Row::Controller(0)]);
    }

    #[test]
    fn detached_outputs_and_tombstone_decisions_are_parent_log_lines() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        let d = [crate::engine::plan::planner::DetachedOutput {
            id: crate::engine::plan::child::ChildId::of(
                "Snap.v1",
                &serde_json::json!({"metadata": {"name": "s-a", "namespace": "ns"}}),
            ),
            kept: false,
        }];
        for e in crate::engine::events::detached_events("c", "ns/p", "key-a", &d) {
            app.apply(&e, now);
        }
        assert_eq!(app.parents.len(), 1);
        let log = log_text(&app.parents[0]);
        assert_eq!(
            log,
            [
                "key-a: detached input gone: Snap.v1 ns/s-a",
                "key-a: tombstone deleted Snap.v1 ns/s-a"
            ]
        );
    }

    /// The TUI's parent log words events as the headless log does (one [`notice`] for both):
    /// a held plan lists each held write on its own line, a write failure says why.
    #[test]
    fn parent_log_lines_are_the_notices_of_the_headless_log() {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        app.apply(&started(), now);
        let held = EngineEvent::PlanHeld {
            controller: "c".into(),
            subject: EventSubject::parent("ns/p"),
            actions: vec![HeldAction {
                verb: ActionVerb::Update,
                resource: "Pod.v1".into(),
                object: "ns/x".into(),
                detail: Some("spec.containers".into()),
            }],
        };
        let failed = EngineEvent::Action {
            controller: "c".into(),
            subject: EventParent::parent("ns/p"),
            verb: ActionVerb::Delete,
            resource: "ConfigMap.v1".into(),
            object: "ns/y".into(),
            detail: None,
            error: Some("forbidden".into()),
        };
        app.apply(&held, now);
        app.apply(&failed, now);
        let log = log_text(&app.parents[0]);
        assert_eq!(
            log,
            [
                "held paused, not written:",
                "  update Pod.v1 ns/x (spec.containers)",
                "delete ConfigMap.v1 ns/y  failed: forbidden",
            ]
        );
        // The same words as the headless log's content column.
        let printed = notice::describe(&held, false).expect("a notice").text();
        assert_eq!(
            printed,
            "paused, not written:\nupdate Pod.v1 ns/x (spec.containers)"
        );
        let tones: Vec<Tone> = app.parents[0].log[2].iter().map(|s| s.tone).collect();
        assert_eq!(tones.first(), Some(&Tone::Bad), "the delete tag is red");
        assert_eq!(tones.last(), Some(&Tone::Alert), "the failure is an alert");
    }

    /// `dev --takeover`: the status bar's count and the engine log's line come from the typed
    /// event.
    #[test]
    fn a_takeover_is_kept_for_the_status_bar_and_logged() {
        let mut app = App::new("ctx", false);
        app.apply(
            &EngineEvent::TakenOver {
                controller: "c".into(),
                lease: "ops/compositecontroller-c".into(),
                from: "replica-a".into(),
            },
            Instant::now(),
        );
        assert_eq!(
            app.taken_over.get("c").map(String::as_str),
            Some("replica-a")
        );
        let line = notice::line_text(&app.log[0]);
        assert!(
            line.starts_with("c takeover took over lease ops/compositecontroller-c from replica-a"),
            "{line}"
        );
    }

    #[test]
    fn held_writes_are_shown_as_held_actions() {
        let a = held_action(&HeldAction {
            verb: ActionVerb::Update,
            resource: "Pod.v1".into(),
            object: "default/x".into(),
            detail: Some("spec.containers".into()),
        });
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.object.as_str()),
            ("update", "Pod.v1", "default/x")
        );
        assert_eq!(a.detail.as_deref(), Some("spec.containers"));
        assert!(a.held);
    }
}
