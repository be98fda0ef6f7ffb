//! What `dev` checks and takes on the cluster before the engine starts: the write guard, an
//! in-cluster Metacontroller running the same controller, one Lease per controller, and the
//! `--apply` manifests.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result};

use super::config::DevConfig;
use super::{LEASE_DURATION, STOP_GRACE};
use crate::commands::definitions;
use crate::commands::exit::{Class, Classify, fail, tag};
use crate::engine::events::EngineEvent;
use crate::k8s::client::Connection;
use crate::k8s::discovery::Discovery;
use crate::k8s::{client, lease, manifests};
use crate::spec;

/// Step 3: refuse to write to a context the write guard protects, unless the user confirms on
/// a terminal (never with `--once`).
pub(super) fn check_write_guard(cfg: &DevConfig, conn: &Connection) -> Result<()> {
    let ctxinfo = &conn.context;
    if let Err(e) = client::write_guard(ctxinfo, &cfg.args.allow_context) {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !cfg.args.once {
            eprintln!("{e}");
            eprint!("Write to context {} anyway? [y/N] ", ctxinfo.name);
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer).ok();
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                return Err(fail(
                    Class::Refused,
                    format!("not writing to context {}", ctxinfo.name),
                ));
            }
        } else {
            return Err(e).class(Class::Refused);
        }
    }
    Ok(())
}

/// Step 4: refuse (unless `--force`) to run a controller whose definition exists on the
/// cluster, where an in-cluster Metacontroller may be running it.
pub(super) async fn refuse_in_cluster_controllers(
    cfg: &DevConfig,
    conn: &Connection,
    discovery: &Discovery,
    loaded: &spec::Loaded,
    from_cluster: &[String],
) -> Result<()> {
    for def in &loaded.controllers {
        if definitions::in_cluster_controller_exists(&conn.client, discovery, def).await {
            let msg = format!(
                "{} {} exists on context {}: an in-cluster Metacontroller may be running it, and two engines driving the same parents fight over the children",
                def.kind(),
                def.name(),
                conn.context.name
            );
            if !cfg.args.force {
                let hint = if from_cluster.iter().any(|n| n == def.name()) {
                    " You read it with --from-cluster: that is expected, but make sure Metacontroller does not run it at the same time."
                } else {
                    ""
                };
                return Err(fail(
                    Class::Refused,
                    format!(
                        "{msg}.\nScale the in-cluster Metacontroller down (or rename your local definition), then re-run; or pass --force if you are sure nothing runs it.{hint}"
                    ),
                ));
            }
            eprintln!("warning: {msg} (continuing because of --force)");
        }
    }
    Ok(())
}

/// How long `dev --takeover` waits for a `run` replica to yield a controller: its next
/// renewal (a retry period), its in-flight sync (at most 5 s), its release.
const TAKEOVER_WAIT: Duration = Duration::from_secs(30);

/// Step 5: a Lease per controller (with `--takeover`, asked of the `run` replica holding it).
/// Also returns what was taken over, as `(controller, message)` for the event log.
pub(super) async fn take_leases(
    cfg: &DevConfig,
    conn: &Connection,
    loaded: &spec::Loaded,
) -> Result<(Vec<lease::LeaseGuard>, Vec<EngineEvent>)> {
    let holder = lease::default_holder();
    let mut leases = Vec::new();
    let mut handovers = Vec::new();
    for def in &loaded.controllers {
        let name = lease::lease_name(def.kind(), def.name());
        let asked_of = std::sync::Mutex::new(None::<String>);
        let asked = |replica: &str| {
            eprintln!(
                "controller {}: asked {replica} (kubectl meta run) to yield lease {}/{name} (--takeover); waiting for its in-flight sync",
                def.name(),
                cfg.args.lease_namespace
            );
            if let Ok(mut a) = asked_of.lock() {
                *a = Some(replica.to_string());
            }
        };
        let takeover = cfg.args.takeover.then_some(lease::Takeover {
            wait: TAKEOVER_WAIT,
            asked: &asked,
        });
        let guard = lease::acquire_with(
            conn.client.clone(),
            &cfg.args.lease_namespace,
            &name,
            &holder,
            LEASE_DURATION,
            takeover,
        )
        .await
        .map_err(|e| {
            let class = match e {
                lease::LeaseError::Api { .. } => Class::Cluster,
                _ => Class::Refused,
            };
            tag(e.into(), class)
        })
        .with_context(|| format!("controller {}", def.name()))?;
        if let Some(replica) = asked_of.lock().ok().and_then(|mut a| a.take()) {
            let event = EngineEvent::TakenOver {
                controller: def.name().to_string(),
                lease: format!("{}/{name}", cfg.args.lease_namespace),
                from: replica,
            };
            if let Some(n) = crate::view::notice::describe(&event, false) {
                eprintln!("controller {}: {}", def.name(), n.text());
            }
            handovers.push(event);
        }
        leases.push(guard);
    }
    Ok((leases, handovers))
}

/// Release the Leases taken before a start that did not complete, within [`STOP_GRACE`] (they
/// expire on their own after that).
pub(super) async fn release_leases(leases: Vec<lease::LeaseGuard>) {
    let release = async {
        for l in leases {
            l.release().await;
        }
    };
    let _ = tokio::time::timeout(STOP_GRACE, release).await;
}

/// Step 6: apply the non-controller documents (what is missing, or all with `--overwrite`)
/// and say what was applied and what was kept.
pub(super) async fn apply_manifests(
    cfg: &DevConfig,
    conn: &Connection,
    discovery: &Discovery,
    loaded: &spec::Loaded,
) -> Result<()> {
    let docs: Vec<(String, serde_json::Value)> = loaded
        .others
        .iter()
        .map(|d| (d.source.to_string(), d.value.clone()))
        .collect();
    let outcomes = manifests::apply_documents(
        &conn.client,
        discovery,
        &conn.context.namespace,
        &docs,
        Duration::from_secs(30),
        &manifests::ApplyMode {
            overwrite: cfg.args.overwrite,
            field_manager: crate::k8s::FIELD_MANAGER,
            dry_run: false,
        },
    )
    .await
    .class(Class::Cluster)?;
    let mut kept = 0;
    for (object, outcome) in outcomes {
        match outcome {
            manifests::Outcome::Applied => eprintln!("applied {object}"),
            manifests::Outcome::Kept => {
                kept += 1;
                eprintln!("exists  {object} (kept as it is)");
            }
        }
    }
    if kept > 0 {
        eprintln!(
            "note: --apply created only what was missing; {kept} object(s) that exist were left as they are (pass --overwrite to re-apply them)"
        );
    }
    Ok(())
}
