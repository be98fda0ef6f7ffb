//! TUI benchmark: `cargo bench --bench tui [-- --parents N --rounds R]`.
//!
//! - Frame: build and draw one whole frame (ratatui `TestBackend`, 120x40 and 200x60) with
//!   N parents (default 10,000) x 3 children each, the model fed with engine events shaped as
//!   the engine publishes them (sync started, hook call with request/response bodies, the
//!   per-object plan, three creates, sync finished). Prints the time to fold the events in,
//!   the first frame (which builds the row index) and the median of R later frames with the
//!   selection moving.
//! - Latency: the real run loop ([`event_loop::run`]) on a `TestBackend` over those N parents;
//!   a burst of 1,000 events is published on the engine's bus and the time from the last
//!   publish to the frame that shows all of them is measured (median and worst of R bursts).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent, EventBus, EventParent, EventSubject};
use kubectl_meta::engine::plan::planner::{ObjectAction, ObjectPlan};
use kubectl_meta::engine::plan::writes::{ChildId, ObjectKeyView};
use kubectl_meta::view::tui::model::App;
use kubectl_meta::view::tui::{event_loop, input, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};

mod common;
use common::arg;

fn pod(parent: &str, i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{parent}-{i}"), "namespace": "default",
            "labels": {"app": parent}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}})
}

/// The events of one sync of `parent` creating its 3 Pods.
fn sync_events(n: usize) -> Vec<EngineEvent> {
    let name = format!("p{n:05}");
    let parent = format!("default/{name}");
    let pods: Vec<Value> = (0..3).map(|i| pod(&name, i)).collect();
    let mut out = vec![
        EngineEvent::SyncStarted {
            controller: "bench".into(),
            subject: EventSubject::parent(parent.clone()),
            triggers: vec![],
        },
        EngineEvent::HookCalled {
            controller: "bench".into(),
            subject: EventParent::parent(parent.clone()),
            hook: "sync".into(),
            status: Some(200),
            latency: Duration::from_millis(3),
            error: None,
            request: Some(Arc::new(
                json!({"parent": {"apiVersion": "example.com/v1", "kind": "Thing",
                "metadata": {"name": name, "namespace": "default"}},
                "children": {"Pod.v1": {}}}),
            )),
            response: Some(Arc::new(json!({"children": pods}))),
            stderr: None,
        },
    ];
    // The per-object plan, as the engine publishes it before carrying it out.
    out.push(EngineEvent::Planned {
        controller: "bench".into(),
        subject: EventParent::parent(parent.clone()),
        objects: (0..3)
            .map(|i| ObjectPlan {
                id: ChildId {
                    type_key: "Pod.v1".into(),
                    key: ObjectKeyView {
                        namespace: Some("default".into()),
                        name: format!("{name}-{i}"),
                    },
                },
                kind: "Pod".into(),
                action: ObjectAction::Create,
                strategy: None,
                reason: "desired".into(),
                changes: Vec::new(),
                changes_omitted: 0,
                before: None,
                after: None,
                rollout: None,
            })
            .collect(),
        detached: Vec::new(),
        status_change: true,
        finalizer: None,
        resync_after_seconds: None,
        writes: 4,
    });
    for i in 0..3 {
        out.push(EngineEvent::Action {
            controller: "bench".into(),
            subject: EventParent::parent(parent.clone()),
            verb: ActionVerb::Create,
            resource: "Pod.v1".into(),
            object: format!("default/{name}-{i}"),
            detail: None,
            error: None,
        });
    }
    out.push(EngineEvent::SyncFinished {
        controller: "bench".into(),
        subject: EventSubject::parent(parent),
        duration: Duration::from_millis(9),
        writes: 3,
        error: None,
        error_layer: None,
        retry_in: None,
    });
    out
}

fn loaded(parents: usize) -> (App, Duration) {
    let mut app = App::new("bench · ns default", true);
    let now = Instant::now();
    app.apply(
        &EngineEvent::ControllerStarted {
            controller_kind: "CompositeController".into(),
            controller: "bench".into(),
            parent_resource: "Thing.example.com/v1".into(),
            parents,
        },
        now,
    );
    let events: Vec<EngineEvent> = (0..parents).flat_map(sync_events).collect();
    let t = Instant::now();
    for e in &events {
        app.apply(e, now);
    }
    (app, t.elapsed())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn frames(parents: usize, rounds: usize, w: u16, h: u16) {
    let (mut app, fold) = loaded(parents);
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    let t = Instant::now();
    term.draw(|f| ui::draw(f, &mut app, Instant::now()))
        .expect("draw");
    let first = t.elapsed();
    let mut times = Vec::new();
    for r in 0..rounds {
        // Move the selection (a different parent's tree and detail each frame).
        for _ in 0..(r % 7 + 1) * 97 {
            input::handle_key(&mut app, KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        }
        let t = Instant::now();
        term.draw(|f| ui::draw(f, &mut app, Instant::now()))
            .expect("draw");
        times.push(t.elapsed());
    }
    let worst = times.iter().max().copied().unwrap_or_default();
    println!(
        "frame {w}x{h}, {parents} parents x 3 children: fold {} events in {}; first frame {}; median frame {} (worst {}) over {rounds}",
        parents * sync_events(0).len(),
        ms(fold),
        ms(first),
        ms(median(times)),
        ms(worst)
    );
}

async fn latency(parents: usize, rounds: usize) {
    let (mut app, _) = loaded(parents);
    let bus = EventBus::new();
    let (frames_tx, mut frames_rx) = tokio::sync::watch::channel(0u64);
    let (cmd_tx, _cmd_rx) = tokio::sync::mpsc::channel(4);
    let wiring = event_loop::Wiring {
        input: futures::stream::pending().boxed(),
        events: bus.subscribe(),
        commands: cmd_tx,
        stop: tokio_util::sync::CancellationToken::new(),
        frames: Some(frames_tx),
        feeds: event_loop::Feeds::default(),
    };
    let base = app.applied;
    let ui_task = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
        event_loop::run(&mut term, &mut app, wiring)
            .await
            .expect("loop");
    });
    // A burst: 1,000 events spread over parents (syncs of 166 parents, 6 events each).
    let burst: Vec<EngineEvent> = (0..167).flat_map(sync_events).take(1000).collect();
    let mut after_last = Vec::new();
    let mut after_first = Vec::new();
    let mut shown = base;
    for _ in 0..rounds {
        let t0 = Instant::now();
        for e in &burst {
            bus.publish(e.clone());
        }
        let t1 = Instant::now();
        shown += burst.len() as u64;
        let want = shown;
        frames_rx
            .wait_for(|n| *n >= want)
            .await
            .expect("loop alive");
        after_last.push(t1.elapsed());
        after_first.push(t0.elapsed());
    }
    ui_task.abort();
    println!(
        "event-to-screen, burst of 1,000 events over {parents} parents: median {} from the last event to its frame (worst {}), {} from the first; over {rounds} bursts (frames at most every {} ms)",
        ms(median(after_last.clone())),
        ms(after_last.iter().max().copied().unwrap_or_default()),
        ms(median(after_first)),
        1000 / event_loop::FPS
    );
}

fn main() {
    let parents = arg("--parents", 10_000);
    let rounds = arg("--rounds", 30);
    frames(parents, rounds, 120, 40);
    frames(parents, rounds, 200, 60);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(latency(parents, rounds));
}
