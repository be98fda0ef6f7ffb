//! `dev --once`: wait until every parent converged, say what it still waits for, and choose
//! the exit code from the typed errors of what never converged.

use std::time::Duration;

use anyhow::Result;

use super::ONCE_REPORT_EVERY;
use crate::commands::exit::{Class, fail};
use crate::engine::error::{Layer, SyncError, WritesHeld};
use crate::engine::events::{EngineEvent, EventBus};
use crate::engine::{Engine, OnceReport};
use crate::k8s::lease;

/// `--once`: wait until every parent converged, while the engine retries failed syncs with
/// its backoff, until `deadline` (`timeout` after the start: the whole run's `--timeout`). What is still awaited is published (an `info` event) when it
/// changes and every [`ONCE_REPORT_EVERY`]; at the deadline the error names what never
/// converged. A controller that could not start at all ends the wait at once.
pub(super) async fn wait_once(
    engine: &Engine,
    bus: &EventBus,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<()> {
    let mut said: Option<(Vec<String>, tokio::time::Instant)> = None;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let rep = engine
            .wait_converged(left.min(Duration::from_secs(1)))
            .await;
        if rep.converged && rep.pending.is_empty() && rep.failed.is_empty() {
            // Converged to failure is converged: say which children failed (kstatus Failed).
            if !rep.children_failed.is_empty() {
                let lines: Vec<String> = rep
                    .children_failed
                    .iter()
                    .map(|(c, parent, children)| format!("  {c} {parent}: {children}"))
                    .collect();
                eprintln!(
                    "warning: --once: converged with {} parent(s) whose children failed:\n{}",
                    lines.len(),
                    lines.join("\n")
                );
            }
            return Ok(());
        }
        let broken: Vec<String> = rep
            .failed
            .iter()
            .filter(|(_, parent, _)| parent.is_empty())
            .map(|(c, _, m)| format!("  {c}: {m}"))
            .collect();
        if !broken.is_empty() {
            return Err(fail(
                Class::NotConverged,
                format!(
                    "{} controller(s) could not start:\n{}",
                    broken.len(),
                    broken.join("\n")
                ),
            ));
        }
        if !rep.hot_loops.is_empty() {
            // Retrying cannot end a hot loop (the guard holds the field): say so now.
            let lines: Vec<String> = rep
                .hot_loops
                .iter()
                .map(|(c, parent, m)| format!("  {c} {parent}: {m}"))
                .collect();
            return Err(fail(
                Class::NotConverged,
                format!(
                    "{} parent(s) in a hot loop, which retrying cannot end (change the hook or see the cause):\n{}",
                    lines.len(),
                    lines.join("\n")
                ),
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(fail(
                once_class(&rep),
                format!(
                    "not converged after {}s (--timeout); never converged:\n{}",
                    timeout.as_secs(),
                    awaited(&rep, true).join("\n")
                ),
            ));
        }
        let waiting = awaited(&rep, false);
        let repeat = !waiting.is_empty()
            && said
                .as_ref()
                .is_none_or(|(before, at)| *before != waiting || at.elapsed() >= ONCE_REPORT_EVERY);
        if repeat {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            bus.publish(EngineEvent::Info {
                controller: None,
                message: format!(
                    "--once: waiting for {} thing(s), {}s left (--timeout):\n{}",
                    waiting.len(),
                    left.as_secs(),
                    waiting.join("\n")
                ),
            });
            said = Some((waiting, tokio::time::Instant::now()));
        }
    }
}

/// The exit class of a `--once` that did not converge by its deadline, decided on the typed
/// errors (docs/guide/dev.md, "Exit codes"): an engine bug is [`Class::Internal`]; the API server away
/// (writes held for it) or refusing the syncs' requests for reasons of its own (unreachable,
/// credentials, conflicts, missing objects: [`Layer::Api`]) is [`Class::Cluster`]; failing
/// hooks, unusable answers, objects the server rejects as invalid ([`Layer::Hook`]), bad
/// parents, and work still pending are [`Class::NotConverged`].
pub(super) fn once_class(rep: &OnceReport) -> Class {
    let layers: Vec<Layer> = rep.errors.iter().map(SyncError::layer).collect();
    if layers.contains(&Layer::Internal) {
        Class::Internal
    } else if matches!(rep.held, Some(WritesHeld::ApiUnreachable { .. }))
        || layers.contains(&Layer::Api)
    {
        Class::Cluster
    } else {
        Class::NotConverged
    }
}

/// One line per thing `--once` still waits for; with `full`, a failed sync's whole error
/// (indented) instead of its first line.
pub(super) fn awaited(rep: &OnceReport, full: bool) -> Vec<String> {
    let failed = rep.failed.iter().map(|(c, parent, m)| {
        let message = if full {
            m.lines().collect::<Vec<_>>().join("\n      ")
        } else {
            m.lines().next().unwrap_or_default().to_string()
        };
        format!("  {c} {parent}: last sync failed, retrying with backoff: {message}")
    });
    let pending = rep.pending.iter().map(|(c, what)| format!("  {c}: {what}"));
    failed.chain(pending).collect()
}

/// Who took which Lease over (`lease default/kubectl-meta-... held by bob@desk pid 7 since 10:42:05`).
pub(super) fn lost_reason(leases: &[lease::LeaseGuard]) -> String {
    let reasons: Vec<String> = leases
        .iter()
        .filter_map(lease::LeaseGuard::lost_reason)
        .collect();
    if reasons.is_empty() {
        "another dev loop took over".to_string()
    } else {
        format!("another dev loop took over ({})", reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::HookError;
    use crate::k8s::error::{ApiError, ApiErrorClass};

    fn report(errors: Vec<SyncError>, held: Option<WritesHeld>) -> OnceReport {
        OnceReport {
            converged: false,
            failed: Vec::new(),
            pending: Vec::new(),
            hot_loops: Vec::new(),
            errors,
            held,
            children_failed: Vec::new(),
            idle_since: None,
        }
    }

    fn write(class: ApiErrorClass) -> SyncError {
        SyncError::Write(vec![ApiError::new(class, "m")])
    }

    #[test]
    fn once_exit_class_comes_from_the_typed_errors() {
        let hook = SyncError::hook(
            "sync",
            HookError::Request {
                target: "http://h".into(),
                message: "reset".into(),
            },
        );
        let unreachable = WritesHeld::ApiUnreachable {
            since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            error: "connection refused".into(),
        };
        let cases = [
            (report(vec![], None), Class::NotConverged),
            (report(vec![hook.clone()], None), Class::NotConverged),
            (
                report(vec![SyncError::answer("sync", "bad")], None),
                Class::NotConverged,
            ),
            (
                report(vec![SyncError::Parent("bad selector".into())], None),
                Class::NotConverged,
            ),
            // The server rejects what the hook asked for: fix the hook.
            (
                report(vec![write(ApiErrorClass::Invalid)], None),
                Class::NotConverged,
            ),
            (
                report(vec![hook.clone(), write(ApiErrorClass::Forbidden)], None),
                Class::Cluster,
            ),
            (
                report(vec![write(ApiErrorClass::Unreachable)], None),
                Class::Cluster,
            ),
            (
                report(vec![write(ApiErrorClass::Conflict)], None),
                Class::Cluster,
            ),
            (
                report(vec![SyncError::Read("list failed".into())], None),
                Class::Cluster,
            ),
            (
                report(vec![hook.clone()], Some(unreachable)),
                Class::Cluster,
            ),
            (
                report(
                    vec![],
                    Some(WritesHeld::LeaseLost {
                        holder: "held by bob".into(),
                    }),
                ),
                Class::NotConverged,
            ),
            (
                report(
                    vec![
                        write(ApiErrorClass::Unreachable),
                        SyncError::Internal("bug".into()),
                    ],
                    None,
                ),
                Class::Internal,
            ),
        ];
        for (rep, class) in cases {
            assert_eq!(once_class(&rep), class, "{rep:?}");
        }
    }
}
