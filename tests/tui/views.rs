//! Whole-frame snapshots of every TUI view, drawn with ratatui's `TestBackend` from the REAL
//! event stream of an engine run against an in-process sandbox with real hooks (HTTP on
//! 127.0.0.1): a CompositeController (children, a plan held while paused, a replay), a
//! DecoratorController (target, attachments, merged labels) and a MapController (keys, inputs,
//! outputs). Volatile values (uids, resourceVersions, timestamps, the hook port) are scrubbed
//! from the bodies and the model renders ages, durations and pids as `-`.
//!
//! Snapshots live in tests/snapshots/tui/. A changed view fails with both texts shown; run with
//! `UPDATE_SNAPSHOTS=1` to accept the new frames (then review the diff).
//! Also: the run loop itself (keys in, commands out, answers and redraws) on a `TestBackend`.

use crate::common;

use std::path::PathBuf;
use std::time::Instant;

use crate::common::engine::*;
use crate::common::{TIMEOUT, wait_for};
use futures::StreamExt;
use kubectl_meta::devloop::control::Command;
use kubectl_meta::engine::QueueStats;
use kubectl_meta::engine::error::WritesHeld;
use kubectl_meta::engine::events::{EngineEvent, EventBus, EventParent, EventSubject};
use kubectl_meta::view::tui::model::{App, Focus, Overlay, Tab};
use kubectl_meta::view::tui::{event_loop, input, kube_events, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};

/// Replace values that differ from run to run.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match k.as_str() {
                    "uid" | "resourceVersion" | "creationTimestamp" | "time" | "url"
                    | "controller-uid" => *val = json!("<masked>"),
                    _ => scrub(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// A map key's hash suffix (`configmap-in-a-41d9cc99...`) as `<hash>`: it derives from uids.
fn unhash(s: &str) -> String {
    match s.rfind('-') {
        Some(i) if s.len() - i > 12 && s[i + 1..].chars().all(|c| c.is_ascii_hexdigit()) => {
            format!("{}-<hash>", &s[..i])
        }
        _ => s.to_string(),
    }
}

fn scrubbed(events: Vec<EngineEvent>) -> Vec<EngineEvent> {
    events
        .into_iter()
        .map(|mut e| {
            // The objects of a plan, as the tree shows them (YAML of what the sync observed).
            if let EngineEvent::Planned { objects, .. } = &mut e {
                for o in objects {
                    o.before
                        .iter_mut()
                        .for_each(|b| scrub(std::sync::Arc::make_mut(b)));
                    o.after.iter_mut().for_each(scrub);
                }
            }
            match &mut e {
                EngineEvent::HookCalled {
                    request,
                    response,
                    subject: EventParent { parent, map_key },
                    ..
                } => {
                    if let Some(k) = map_key {
                        *k = unhash(k);
                    }
                    for body in request.iter_mut().chain(response.iter_mut()) {
                        scrub(std::sync::Arc::make_mut(body));
                    }
                    if let Some(Value::String(k)) = request
                        .as_mut()
                        .and_then(|r| std::sync::Arc::make_mut(r).get_mut("mapKey"))
                    {
                        *k = unhash(k);
                    }
                    *parent = unhash(parent);
                }
                EngineEvent::SyncStarted {
                    subject:
                        EventSubject {
                            parent, map_key, ..
                        },
                    ..
                }
                | EngineEvent::SyncFinished {
                    subject:
                        EventSubject {
                            parent, map_key, ..
                        },
                    ..
                }
                | EngineEvent::PlanHeld {
                    subject:
                        EventSubject {
                            parent, map_key, ..
                        },
                    ..
                }
                | EngineEvent::Action {
                    subject: EventParent { parent, map_key },
                    ..
                }
                | EngineEvent::Planned {
                    subject: EventParent { parent, map_key },
                    ..
                } => {
                    *parent = unhash(parent);
                    if let Some(k) = map_key {
                        *k = unhash(k);
                    }
                }
                _ => {}
            }
            e
        })
        .collect()
}

/// A model fed with `events`, rendering volatile values as `-`, without colors.
fn model(events: &[EngineEvent]) -> App {
    let mut app = App::new("sandbox · ns default", false);
    app.mask_volatile = true;
    let now = Instant::now();
    for e in events {
        app.apply(e, now);
    }
    app
}

/// The frame as text, one line per row.
fn frame(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| ui::draw(f, app, Instant::now())).expect("draw");
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// How many cells of a 120x36 frame have a foreground or background color.
fn colored_cells(app: &mut App) -> usize {
    use ratatui::style::Color;
    let mut t = Terminal::new(TestBackend::new(120, 36)).expect("terminal");
    t.draw(|f| ui::draw(f, app, Instant::now())).expect("draw");
    t.backend()
        .buffer()
        .content()
        .iter()
        .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
        .count()
}

/// Compare `text` with tests/snapshots/tui/NAME.txt (write it with `UPDATE_SNAPSHOTS=1`).
fn snapshot(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots/tui")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(&path, text).expect("write snapshot");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "snapshot {} missing ({e}); run with UPDATE_SNAPSHOTS=1 to create it. Frame:\n{text}",
            path.display()
        )
    });
    assert!(
        want == text,
        "frame {name} differs from {}\n--- expected\n{want}\n--- got\n{text}",
        path.display()
    );
}

fn press(app: &mut App, code: KeyCode) {
    input::handle_key(app, KeyEvent::new(code, KeyModifiers::NONE));
}

fn cm_ar() -> kube::discovery::ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// ConfigMaps `<parent>-<i>` for i in 0..spec.count with data from spec.value.
fn counted(req: &Value) -> Value {
    let kids = counted_children(req);
    json!({"status": {"wanted": kids.len()}, "children": kids})
}

/// Converge, then resync everything and converge again: the last sync of every parent is then
/// a no-op, whatever the timing of the first ones (deterministic frames).
async fn settle(run: &Running) {
    run.converge().await;
    run.engine.resync(None, None);
    run.converge().await;
}

/// Wait until the engine published an event `pick` accepts.
async fn wait_event(run: &Running, what: &str, pick: impl Fn(&EngineEvent) -> bool) {
    wait_for(what, TIMEOUT, || {
        let hit = run.events().iter().any(&pick).then_some(());
        async move { hit }
    })
    .await;
}

/// A sandbox with the `counted` CompositeController running (ConfigMap children updated with
/// `method`) and `parents` (name, count of children; value `a`).
async fn counted_world(method: &str, parents: &[(&str, u64)]) -> (World, Running) {
    let w = World::new("Parent", sync_fn(counted)).await;
    let d = def(composite(
        "counted",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": method}}]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ));
    let run = Running::start(w.client(), vec![d]).await;
    for (name, count) in parents {
        w.create(
            &parent_ar("Parent"),
            json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}, "count": count, "value": "a"}}),
        )
        .await;
    }
    (w, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_views_from_a_real_run() {
    let (w, run) = counted_world("InPlace", &[("p", 2), ("q", 0)]).await;
    let par = parent_ar("Parent");
    w.wait_names(&cm_ar(), &["p-0", "p-1"]).await;
    settle(&run).await;

    // Converged: the main frame, every tab, help, YAML, a filter, and the smallest terminal.
    let mut app = model(&scrubbed(run.events()));
    assert!(app.select_parent_named("default/p"));
    snapshot("composite_request", &frame(&mut app, 120, 36));
    let text = frame(&mut app, 120, 36);
    assert!(text.contains("= p-0") && text.contains("= p-1"), "{text}");
    assert!(text.contains("APPLY"), "{text}");
    app.ui.tab = Tab::Response;
    snapshot("composite_response", &frame(&mut app, 120, 36));
    app.ui.tab = Tab::Events;
    let events_tab = frame(&mut app, 120, 36);
    assert!(
        events_tab.contains("create ConfigMap.v1 default/p-0"),
        "{events_tab}"
    );
    snapshot("composite_events", &events_tab);
    app.ui.tab = Tab::Output;
    snapshot("composite_output", &frame(&mut app, 120, 36));
    press(&mut app, KeyCode::Char('?'));
    snapshot("help", &frame(&mut app, 120, 36));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.ui.focus, Focus::Tree);
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char('y'));
    assert!(matches!(&app.ui.overlay, Some(Overlay::Yaml(t, _)) if t == "p-0"));
    snapshot("yaml", &frame(&mut app, 120, 36));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('/'));
    press(&mut app, KeyCode::Char('q'));
    press(&mut app, KeyCode::Enter);
    let filtered = frame(&mut app, 120, 36);
    assert!(
        !filtered.contains("default/p ") && filtered.contains("default/q"),
        "{filtered}"
    );
    snapshot("filtered", &filtered);
    press(&mut app, KeyCode::Esc);
    assert!(app.select_parent_named("default/p"));
    snapshot("small_80x24", &frame(&mut app, 80, 24));
    // An API server outage and a queue backlog in the status bar (80 columns: short labels).
    app.set_held(
        Some(WritesHeld::ApiUnreachable {
            since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            error: "connection refused".into(),
        }),
        Instant::now(),
    );
    app.set_queue(QueueStats {
        ready: 3,
        in_flight: 1,
        scheduled: 2,
        next_due: None,
    });
    let outage = frame(&mut app, 80, 24);
    assert!(outage.contains("API: unreachable -"), "{outage}");
    assert!(outage.contains("q 3 +2 later"), "{outage}");
    snapshot("outage_80x24", &outage);
    // Smaller than the smallest usable size: it says so (the full frame returns after).
    let tiny = frame(&mut app, 50, 14);
    assert!(tiny.contains("terminal too small: 50x14"), "{tiny}");
    snapshot("too_small_50x14", &tiny);
    // Reconnected: the field is gone.
    app.set_held(None, Instant::now());
    let back = frame(&mut app, 80, 24);
    assert!(!back.contains("API:") && back.contains("q 3"), "{back}");
    app.set_queue(QueueStats::default());
    // NO_COLOR (color off): no cell has a color; with colors some do.
    assert!(colored_cells(&mut app) == 0);
    app.color = true;
    assert!(colored_cells(&mut app) > 0);
    app.color = false;

    // Paused: the next plan is held and shown as such, the status bar says PAUSED.
    run.clear_events();
    run.engine.set_paused(true);
    w.patch(&par, "p", json!({"spec": {"count": 1, "value": "b"}}))
        .await;
    wait_event(
        &run,
        "a held plan for p",
        |e| matches!(e, EngineEvent::PlanHeld { subject, .. } if subject.parent == "default/p"),
    )
    .await;
    wait_event(
        &run,
        "the held sync to finish",
        |e| matches!(e, EngineEvent::SyncFinished { subject, .. } if subject.parent == "default/p"),
    )
    .await;
    for e in scrubbed(run.events()) {
        app.apply(&e, Instant::now());
    }
    app.ui.focus = Focus::Tree;
    app.ui.tree_row = 0;
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char('d'));
    assert_eq!(app.ui.tab, Tab::Diff);
    let paused = frame(&mut app, 120, 36);
    assert!(paused.contains("PAUSED"), "{paused}");
    assert!(paused.contains("~ p-0  held (paused)"), "{paused}");
    assert!(paused.contains("- p-1  held (paused)"), "{paused}");
    assert!(
        paused.contains("-  value: a") && paused.contains("+  value: b"),
        "{paused}"
    );
    snapshot("composite_paused_diff", &paused);

    // Replay against a changed hook: the Diff tab shows how the answer changed.
    w.hook.set(sync_fn(|req| {
        let mut r = counted(req);
        r["status"]["wanted"] = json!(99);
        r
    }));
    // The replay's events, as it published them.
    let replayed = run.engine.replay(&["counted".to_string()]).await;
    for e in scrubbed(replayed) {
        app.apply(&e, Instant::now());
    }
    let replayed = frame(&mut app, 120, 36);
    assert!(replayed.contains("status.wanted: 1 → 99"), "{replayed}");
    snapshot("composite_replay", &replayed);
    run.engine.set_paused(false);
}

/// A DecoratorController definition over labelled `Parent` targets, ConfigMap attachments.
fn decorator(url: &str) -> kubectl_meta::spec::ControllerDef {
    def(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
        "metadata": {"name": "labeller"},
        "spec": {
            "resources": [{"apiVersion": format!("{GROUP}/v1"), "resource": "parents",
                "labelSelector": {"matchLabels": {"decorate": "yes"}}}],
            "attachments": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": url}}},
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decorator_tree_from_a_real_run() {
    let w = World::new(
        "Parent",
        sync_fn(|req| {
            let name = req["object"]["metadata"]["name"].as_str().unwrap_or("");
            json!({
                "labels": {"decorated": "yes"},
                "annotations": {"note": "hi"},
                "attachments": [configmap(&format!("{name}-att"), json!({"k": "v"}))],
            })
        }),
    )
    .await;
    let run = Running::start(w.client(), vec![decorator(&w.hook.url("sync"))]).await;
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "t", "labels": {"decorate": "yes"}}, "spec": {}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["t-att"]).await;
    settle(&run).await;
    let mut app = model(&scrubbed(run.events()));
    assert!(app.select_parent_named("default/t"));
    let text = frame(&mut app, 120, 30);
    assert!(text.contains("target Parent default/t"), "{text}");
    assert!(text.contains("= t-att"), "{text}");
    assert!(text.contains("labels: decorated=yes"), "{text}");
    snapshot("decorator_tree", &text);
}

fn sched_ar() -> kube::discovery::ApiResource {
    parent_ar("Sched")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_tree_from_a_real_run() {
    let w = World::new(
        "Sched",
        sync_fn(|req| {
            let parent = req["parent"]["metadata"]["name"].as_str().unwrap_or("");
            let input = req["input"]["metadata"]["name"].as_str().unwrap_or("");
            json!({"outputs": [{
                "apiVersion": format!("{GROUP}/v1"), "kind": "Snap",
                "metadata": {"name": format!("{parent}-{input}")},
                "spec": {"from": input},
            }]})
        }),
    )
    .await;
    install_crd(w.client(), "Snap", true).await;
    for n in ["in-a", "in-b"] {
        w.create(
            &cm_ar(),
            json!({"metadata": {"name": n, "labels": {"app": "yes"}}, "data": {"v": "1"}}),
        )
        .await;
    }
    w.create(
        &sched_ar(),
        json!({"metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"app": "yes"}}}}),
    )
    .await;
    let d = def(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "MapController",
        "metadata": {"name": "snapper"},
        "spec": {
            "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "scheds"},
            "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "outputResources": [{"apiVersion": format!("{GROUP}/v1"), "resource": "snaps",
                "updateStrategy": {"method": "InPlace"}}],
            "hooks": {"map": {"webhook": {"url": w.hook.url("map")}}},
        }
    }));
    let run = Running::start(w.client(), vec![d]).await;
    settle(&run).await;
    let mut app = model(&scrubbed(run.events()));
    assert!(app.select_parent_named("default/s"));
    let text = frame(&mut app, 120, 30);
    assert!(text.contains("input ConfigMap default/in-a"), "{text}");
    assert!(text.contains("= s-in-b"), "{text}");
    snapshot("map_tree", &text);
}

/// The run loop on a TestBackend: events from a real bus are drawn, `p` becomes a TogglePause
/// command whose answer shows, `R` resyncs all, `q` ends the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_loop_draws_events_and_sends_commands() {
    let bus = EventBus::new();
    let (keys_tx, keys_rx) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let (cmd_tx, mut cmd_rx) = tokio::sync::mpsc::channel(4);
    let (frames_tx, mut frames_rx) = tokio::sync::watch::channel(0u64);
    let (held_tx, held_rx) = tokio::sync::watch::channel(None::<WritesHeld>);
    fn seven() -> QueueStats {
        QueueStats {
            ready: 7,
            ..QueueStats::default()
        }
    }
    let wiring = event_loop::Wiring {
        input: keys_rx.boxed(),
        events: bus.subscribe(),
        commands: cmd_tx,
        stop: tokio_util::sync::CancellationToken::new(),
        frames: Some(frames_tx),
        feeds: event_loop::Feeds {
            held: Some(held_rx),
            kube_events: None,
            queue: Some(seven),
            replay: None,
        },
    };
    let ui_task = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
        let mut app = App::new("sandbox · ns default", false);
        let r = event_loop::run(&mut term, &mut app, wiring).await;
        (r.is_ok(), format!("{}", term.backend()))
    });
    bus.publish(EngineEvent::ControllerStarted {
        controller_kind: "CompositeController".into(),
        controller: "demo".into(),
        parent_resource: "Parent.v1".into(),
        parents: 1,
    });
    bus.publish(EngineEvent::SyncStarted {
        controller: "demo".into(),
        subject: EventSubject::parent("default/x"),
        triggers: vec![],
    });
    tokio::time::timeout(TIMEOUT, frames_rx.wait_for(|n| *n >= 2))
        .await
        .expect("a frame showing both events")
        .expect("loop alive");
    let key = |c: char| {
        Ok(Event::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )))
    };
    keys_tx.unbounded_send(key('p')).expect("send key");
    let req = tokio::time::timeout(TIMEOUT, cmd_rx.recv())
        .await
        .expect("a command")
        .expect("open");
    assert_eq!(req.command, Command::TogglePause);
    req.reply.send(Ok("writes paused".into())).expect("reply");
    keys_tx.unbounded_send(key('R')).expect("send key");
    let req = tokio::time::timeout(TIMEOUT, cmd_rx.recv())
        .await
        .expect("a command")
        .expect("open");
    assert_eq!(req.command, Command::Resync { parent: None });
    drop(req);
    // The engine holds writes (API server unreachable): the status bar says so.
    held_tx.send_replace(Some(WritesHeld::ApiUnreachable {
        since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        error: "connection refused".into(),
    }));
    bus.publish(EngineEvent::Paused { paused: true });
    tokio::time::timeout(TIMEOUT, frames_rx.wait_for(|n| *n >= 3))
        .await
        .expect("a frame showing the pause")
        .expect("loop alive");
    keys_tx.unbounded_send(key('q')).expect("send key");
    let (ok, screen) = tokio::time::timeout(TIMEOUT, ui_task)
        .await
        .expect("the loop ends on q")
        .expect("joins");
    assert!(ok);
    assert!(screen.contains("PAUSED"), "{screen}");
    assert!(screen.contains("default/x"), "{screen}");
    assert!(screen.contains("API: unreachable"), "{screen}");
    assert!(
        screen.contains("queue 7") || screen.contains("q 7"),
        "{screen}"
    );
}

/// The Events tab shows the selected parent's Kubernetes Events, from a real watch of the
/// sandbox's core/v1 Events (the engine records a SyncError Warning on a failing parent),
/// routed by the parent's uid: the other parent's tab does not show them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_events_of_the_selected_parent_from_a_real_watch() {
    let w = World::new(
        "Parent",
        std::sync::Arc::new(|_: &str, req: &Value| {
            if req["parent"]["metadata"]["name"] == "bad" {
                Reply::status(500, "boom: this hook refuses bad")
            } else {
                Reply::json(counted(req))
            }
        }),
    )
    .await;
    let (mut watched, _task) = kube_events::watch(w.client().clone(), None);
    let d = def(composite(
        "counted",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ));
    let run = Running::start(w.client(), vec![d]).await;
    let par = parent_ar("Parent");
    w.create(&par, json!({"metadata": {"name": "good"}, "spec": {"selector": {"matchLabels": {"app": "good"}}, "count": 1}}))
        .await;
    w.create(&par, json!({"metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"app": "bad"}}, "count": 1}}))
        .await;
    run.wait_sync_error("default/bad", "boom").await;
    let mut app = model(&run.events());
    // Fold in what the watch delivers until the SyncError Event is among it.
    tokio::time::timeout(TIMEOUT, async {
        while let Some(ev) = watched.recv().await {
            let done = ev.reason == "SyncError";
            app.apply_kube_event(ev);
            if done {
                break;
            }
        }
    })
    .await
    .expect("a SyncError Event from the watch");
    assert!(app.select_parent_named("default/bad"));
    app.ui.tab = Tab::Events;
    let bad = frame(&mut app, 120, 36);
    assert!(bad.contains("Warning SyncError"), "{bad}");
    // Wrapped in the pane: compare without the line breaks and borders.
    let squashed: String = bad
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '│')
        .collect();
    assert!(squashed.contains("thishookrefusesbad"), "{bad}");
    // The tree says which layer failed: the hook (to fix), not the API server (to wait for).
    assert!(bad.contains("hook error: "), "{bad}");
    assert!(app.select_parent_named("default/good"));
    let good = frame(&mut app, 120, 36);
    assert!(
        good.contains("Kubernetes events:") && !good.contains("SyncError"),
        "{good}"
    );
    run.stop().await;
}

/// A real API server outage (the sandbox stopped for longer than the controller Lease) shows as
/// `API: unreachable` in the status bar, from the engine's own signal (writes held), and the
/// field is gone once the server is back and the Lease confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_outage_shows_in_the_status_bar_until_reconnect() {
    let mut f = common::faults::Fixture::with_one_parent().await;
    let mut held = f.engine.engine.context().writes_watch();
    let mut app = model(&f.engine.events());
    app.set_held(held.borrow_and_update().clone(), Instant::now());
    assert!(!frame(&mut app, 120, 36).contains("API:"));
    f.rs.stop().await;
    let reason = tokio::time::timeout(TIMEOUT, held.wait_for(Option::is_some))
        .await
        .expect("writes held during the outage")
        .expect("engine alive")
        .clone();
    app.set_held(reason, Instant::now());
    let down = frame(&mut app, 120, 36);
    assert!(down.contains("API: unreachable -"), "{down}");
    f.rs.start_again().await;
    tokio::time::timeout(TIMEOUT, held.wait_for(Option::is_none))
        .await
        .expect("writes allowed after reconnect")
        .expect("engine alive");
    app.set_held(None, Instant::now());
    let up = frame(&mut app, 120, 36);
    assert!(!up.contains("API:") && !up.contains("unreachable"), "{up}");
}

/// The tree's markers come from the engine's per-object plan (`EngineEvent::Planned`): a child
/// that differs from the hook's answer under the OnDelete strategy is marked `s` (left alone,
/// with the reason), where live-vs-desired alone would say `=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_come_from_the_per_object_plan() {
    let (w, run) = counted_world("OnDelete", &[("p", 1)]).await;
    let par = parent_ar("Parent");
    w.wait_names(&cm_ar(), &["p-0"]).await;
    settle(&run).await;
    run.clear_events();
    w.patch(&par, "p", json!({"spec": {"value": "b"}})).await;
    wait_event(&run, "a plan leaving p-0 alone", |e| {
        matches!(e, EngineEvent::Planned { subject, objects, .. }
            if subject.parent == "default/p" && objects.iter().any(|o| o.id.key.name == "p-0" && o.action.marker() == 's'))
    })
    .await;
    let mut app = model(&scrubbed(run.events()));
    assert!(app.select_parent_named("default/p"));
    let text = frame(&mut app, 120, 30);
    assert!(text.contains("s p-0"), "{text}");
    assert!(!text.contains("= p-0"), "{text}");
    run.stop().await;
}

/// The API server throttling (real 429 answers with `Retry-After` from the sandbox) shows in the
/// status bar from the engine's `apiRate` reports: the request rate and, in the throttled
/// colour, the 429 answers so far and the narrowed window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_throttling_shows_in_the_status_bar() {
    let f = common::faults::Fixture::start().await;
    f.engine.engine.context().follow_api_pace(f.rs.pace.clone());
    let refused = f.faults().inject(
        kube_sandbox::faults::Fault::on("POST", "/api/v1/namespaces/default/configmaps")
            .too_many_requests(1)
            .times(2),
    );
    common::faults::create_parents(f.client(), &["p0"], 1).await;
    common::faults::wait_children(f.client(), &["p0-0"]).await;
    assert_eq!(refused.fired(), 2);
    wait_event(
        &f.engine,
        "an apiRate report of the 429s",
        |e| matches!(e, EngineEvent::ApiRate { throttled, .. } if *throttled >= 2),
    )
    .await;
    let mut app = model(&f.engine.events());
    let text = frame(&mut app, 160, 36);
    let bar = text.lines().next().unwrap_or_default();
    assert!(bar.contains("API req/s -"), "{bar}");
    assert!(bar.contains("429×2 win "), "{bar}");
    f.stop().await;
}

/// A stepped replay of a made-up recording (tests/common/replay.rs) on an in-process sandbox:
/// the events published up to `steps` steps (drained as published, so deterministic).
async fn replayed(steps: usize) -> (Vec<EngineEvent>, usize, usize) {
    use kubectl_meta::engine::flight::replay::Window;
    use kubectl_meta::engine::replayer::{Outcome, ReplayOptions, Replayer};
    let rec = common::replay::recording(&["hello"], &["first", "second", "third"]);
    let window = Window::parse(rec.as_bytes()).expect("the recording parses");
    let defs = window
        .controllers
        .iter()
        .map(|raw| {
            kubectl_meta::spec::parse_controller(
                raw,
                kubectl_meta::spec::Source::file("r", 1, None),
            )
            .expect("definition")
        })
        .collect();
    let replayer = Replayer::new(
        window,
        defs,
        ReplayOptions {
            stepped: true,
            ..ReplayOptions::default()
        },
    );
    let sandbox = kube_sandbox::Sandbox::start(kube_sandbox::SandboxConfig::ephemeral())
        .await
        .expect("sandbox");
    let bus = EventBus::new();
    let mut rx = bus.subscribe();
    let mut session = replayer
        .start(&sandbox.in_process_client(), &bus)
        .await
        .expect("the replay starts");
    assert_eq!(
        session.advance(0, TIMEOUT).await.expect("drives"),
        Outcome::Waiting
    );
    for _ in 0..steps {
        assert_eq!(
            session.advance(1, TIMEOUT).await.expect("drives"),
            Outcome::Waiting
        );
    }
    let at = session.position();
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    session.shutdown().await;
    sandbox.shutdown().await;
    (events, at, replayer.steps())
}

fn at_step(app: &mut App, step: usize, total: usize) {
    app.replay = Some(kubectl_meta::view::tui::model::ReplayPosition {
        step,
        total,
        state: "waiting".into(),
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_view_shows_the_step_and_what_the_step_answered() {
    let (events, at, total) = replayed(2).await;
    assert_eq!((at, total), (2, 3));
    let mut app = model(&scrubbed(events));
    at_step(&mut app, at, total);
    assert!(app.select_parent_named("default/hello"));
    app.ui.tab = Tab::Response;
    let text = frame(&mut app, 120, 36);
    assert!(
        text.contains("kubectl-meta replay") && text.contains("step 2/3 waiting"),
        "{text}"
    );
    // The second recorded answer, not the third (held until the next step).
    assert!(
        text.contains(r#""value": "second""#) && !text.contains("third"),
        "{text}"
    );
    assert!(text.contains("n:step") && text.contains("b:back"), "{text}");
    snapshot("replay_step", &text);
    press(&mut app, KeyCode::Char('?'));
    let help = frame(&mut app, 120, 36);
    assert!(
        help.contains("step forward") && !help.contains("resync"),
        "{help}"
    );
    snapshot("replay_help", &help);
    press(&mut app, KeyCode::Esc);

    // A step back: the model forgets and reads the rebuilt timeline (one step).
    let (events, at, _) = replayed(1).await;
    app.restart();
    assert!(app.parents.is_empty() && app.replay.is_some());
    let now = Instant::now();
    for e in scrubbed(events) {
        app.apply(&e, now);
    }
    at_step(&mut app, at, total);
    let back = frame(&mut app, 120, 36);
    assert!(
        back.contains("step 1/3")
            && back.contains(r#""value": "first""#)
            && !back.contains("second"),
        "{back}"
    );
}
