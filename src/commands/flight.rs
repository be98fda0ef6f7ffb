//! `kubectl meta flight dump POD`: fetch the flight recording of a `kubectl meta run` pod
//! through the API server's pod proxy (`GET /api/v1/namespaces/NS/pods/POD:PORT/proxy/debug/flight`),
//! with the user's kubeconfig, check that it is a recording this build reads
//! (docs/flight-recorder.md), and write it to stdout (data only) or `-o FILE`.
//!
//! The port: `--port`, else the pod's container port named as `deploy` names run's
//! ([`crate::deploy::HTTP_PORT_NAME`]). `deploy/NAME` (or `deployment/NAME`) picks a Running
//! pod of that Deployment. Each failure is one line with its class ([`super::exit`]): 2 for a
//! pod or Deployment that does not exist, a pod without that port, an answer that is not a
//! recording or a file that cannot be written; 3 for a pod not running, the proxy refused or
//! failing, the recorder turned off, or the API server refusing.

use std::path::Path;

use anyhow::Result;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::exit::{self, Class, Classify};
use crate::cli::ClusterArgs;
use crate::cli::flight::{FlightArgs, FlightCommand, FlightDumpArgs};
use crate::deploy::HTTP_PORT_NAME;
use crate::engine::flight::{API_VERSION, KIND};

/// Run `kubectl meta flight ...`; cluster flags given before `flight` fill those not given after.
pub async fn run(args: FlightArgs, outer: ClusterArgs) -> Result<()> {
    match args.command {
        FlightCommand::Dump(mut d) => {
            d.cluster = d.cluster.or(outer);
            dump(d).await
        }
    }
}

async fn dump(args: FlightDumpArgs) -> Result<()> {
    let conn = super::engine_start::connect_kubeconfig(&args.cluster, Default::default())
        .await
        .class(Class::Usage)?;
    let ns = conn.context.namespace.clone();
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), &ns);
    let pod = match deployment_name(&args.pod) {
        Some(name) => pod_of_deployment(&conn.client, &pods, &ns, name).await?,
        None => pods
            .get_opt(&args.pod)
            .await
            .map_err(|e| api_error(e, &format!("get pod {}", args.pod), &ns))?
            .ok_or_else(|| {
                exit::fail(
                    Class::Usage,
                    format!(
                        "pod {} not found in namespace {ns} (kubectl get pods -n {ns}; -n NAMESPACE to look elsewhere)",
                        args.pod
                    ),
                )
            })?,
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let port = match args.port {
        Some(p) => p,
        None => http_port(&pod).ok_or_else(|| {
            exit::fail(
                Class::Usage,
                format!(
                    "pod {name} declares no container port named {HTTP_PORT_NAME:?} (the port `kubectl meta deploy` gives run's --http-addr): give it with --port N"
                ),
            )
        })?,
    };
    check_running(&pod, &name, &ns)?;
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/debug/flight");
    let request = http::Request::get(&path)
        .header("accept", "application/json")
        .body(Vec::new())
        .class(Class::Internal)?;
    let body = conn
        .client
        .request_text(request)
        .await
        .map_err(|e| proxy_error(e, &name, port, &ns))?;
    let summary = validate(&body, &name, port)?;
    match &args.output {
        None => super::write_stdout(body.as_bytes())?,
        Some(file) => {
            write_file(file, body.as_bytes())?;
            eprintln!(
                "wrote the flight recording of pod {name} ({summary}) to {}",
                file.display()
            );
        }
    }
    Ok(())
}

/// `deploy/NAME`, `deployment/NAME`, `deployments/NAME` (with an optional `.apps`): NAME.
fn deployment_name(arg: &str) -> Option<&str> {
    let (kind, name) = arg.split_once('/')?;
    let kind = kind.strip_suffix(".apps").unwrap_or(kind);
    matches!(kind, "deploy" | "deployment" | "deployments").then_some(name)
}

/// A Running pod (with an IP) of Deployment `name`, the first by name; the others are named
/// on stderr.
async fn pod_of_deployment(
    client: &kube::Client,
    pods: &Api<Pod>,
    ns: &str,
    name: &str,
) -> Result<Pod> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let d = deployments
        .get_opt(name)
        .await
        .map_err(|e| api_error(e, &format!("get deployment {name}"), ns))?
        .ok_or_else(|| {
            exit::fail(
                Class::Usage,
                format!("deployment {name} not found in namespace {ns} (kubectl get deployments -n {ns})"),
            )
        })?;
    let selector = d
        .spec
        .and_then(|s| s.selector.match_labels)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .ok_or_else(|| {
            exit::fail(
                Class::Usage,
                format!(
                    "deployment {name} selects its pods without matchLabels: name a pod instead"
                ),
            )
        })?;
    let mut running: Vec<Pod> = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| api_error(e, &format!("list the pods of deployment {name}"), ns))?
        .items
        .into_iter()
        .filter(|p| pod_ip(p).is_some() && phase(p) == "Running")
        .collect();
    running.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut it = running.into_iter();
    let first = it.next().ok_or_else(|| {
        exit::fail(
            Class::Cluster,
            format!("deployment {name} has no Running pod in namespace {ns} (kubectl get pods -n {ns} -l {selector})"),
        )
    })?;
    let others: Vec<String> = it.filter_map(|p| p.metadata.name).collect();
    if !others.is_empty() {
        eprintln!(
            "note: deployment {name} has {} Running pods; reading {} (each replica records what it ran; the others: {})",
            others.len() + 1,
            first.metadata.name.as_deref().unwrap_or_default(),
            others.join(", ")
        );
    }
    Ok(first)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Unknown")
}

fn pod_ip(pod: &Pod) -> Option<&str> {
    let s = pod.status.as_ref()?;
    s.pod_ips
        .as_ref()
        .and_then(|ips| ips.first())
        .map(|ip| ip.ip.as_str())
        .or(s.pod_ip.as_deref())
        .filter(|ip| !ip.is_empty())
}

/// The container port named [`HTTP_PORT_NAME`].
fn http_port(pod: &Pod) -> Option<u16> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(HTTP_PORT_NAME))
        .and_then(|p| u16::try_from(p.container_port).ok())
}

fn check_running(pod: &Pod, name: &str, ns: &str) -> Result<()> {
    let phase = phase(pod);
    if phase != "Running" {
        return Err(exit::fail(
            Class::Cluster,
            format!(
                "pod {name} is {phase}, not Running: it has no recorder to read (kubectl get pod {name} -n {ns} -w)"
            ),
        ));
    }
    if pod_ip(pod).is_none() {
        return Err(exit::fail(
            Class::Cluster,
            format!(
                "pod {name} has no IP yet: the API server cannot proxy to it; try again once it has one"
            ),
        ));
    }
    Ok(())
}

/// An API error on a request that is not the proxy's: forbidden or failing.
fn api_error(e: kube::Error, what: &str, ns: &str) -> anyhow::Error {
    let msg = match &e {
        kube::Error::Api(s) if s.code == 403 => {
            format!("{what} in namespace {ns}: forbidden: {}", s.message)
        }
        _ => format!("{what} in namespace {ns}: {e}"),
    };
    exit::fail(Class::Cluster, msg)
}

/// What a failed proxy request means: the API server's own answers (Status objects) and the
/// pod's (run's plain-text 404 when the recorder is off).
fn proxy_error(e: kube::Error, name: &str, port: u16, ns: &str) -> anyhow::Error {
    let kube::Error::Api(s) = &e else {
        return exit::fail(
            Class::Cluster,
            format!("cannot reach the API server to proxy to pod {name}: {e}"),
        );
    };
    let msg = s.message.trim();
    let (class, text) = match s.code {
        403 => (
            Class::Cluster,
            format!(
                "forbidden: you may not get pods/proxy in namespace {ns} (flight dump needs `get` on pods/proxy): {msg}"
            ),
        ),
        404 if msg.contains("flight recorder is off") => (
            Class::Cluster,
            format!(
                "pod {name} runs with its flight recorder off (--flight-recorder-size 0): there is no recording to fetch"
            ),
        ),
        404 if s.reason == "NotFound" && msg.contains("pods") => (
            Class::Usage,
            format!("pod {name} not found in namespace {ns}: {msg}"),
        ),
        404 => (
            Class::Usage,
            format!(
                "pod {name} port {port} has no /debug/flight (404): is {port} the port of run's --http-addr? (--port N)"
            ),
        ),
        503 => (
            Class::Cluster,
            format!(
                "the API server could not reach pod {name} on port {port} (proxy refused): {msg}"
            ),
        ),
        400 if msg.contains("address not allowed") => (
            Class::Cluster,
            format!(
                "the API server refuses to proxy to pod {name}: {msg} (the pod has no usable IP)"
            ),
        ),
        code => (
            Class::Cluster,
            format!("proxy to pod {name} port {port} failed ({code}): {msg}"),
        ),
    };
    exit::fail(class, text)
}

/// Check `body` is a recording of the version this build reads; a one-line summary of it.
fn validate(body: &str, name: &str, port: u16) -> Result<String> {
    let not_one = |why: String| {
        exit::fail(
            Class::Usage,
            format!(
                "pod {name} port {port} did not answer with a flight recording ({why}): is {port} the port of run's --http-addr? (--port N)"
            ),
        )
    };
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| not_one(format!("not JSON: {e}")))?;
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    if kind != KIND {
        return Err(not_one(format!("kind {kind:?}, expected {KIND:?}")));
    }
    if api_version != API_VERSION {
        return Err(exit::fail(
            Class::Usage,
            format!(
                "pod {name} serves a recording of apiVersion {api_version:?}; this kubectl meta reads {API_VERSION:?}: use the kubectl meta of the pod's version"
            ),
        ));
    }
    let events = v["events"]
        .as_array()
        .ok_or_else(|| not_one("no events array".into()))?;
    Ok(format!(
        "{} events, {} of {} bytes, {} evicted, {} lost",
        events.len(),
        v["bytes"],
        v["limitBytes"],
        v["evicted"],
        v["lost"]
    ))
}

/// Write `bytes` to `file` whole: a temporary file next to it, renamed over it.
fn write_file(file: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| {
        exit::fail(
            Class::Usage,
            format!("cannot write {}: {e}", file.display()),
        )
    };
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_names_as_kubectl_spells_them() {
        assert_eq!(deployment_name("deploy/x"), Some("x"));
        assert_eq!(deployment_name("deployments.apps/x"), Some("x"));
        assert_eq!(deployment_name("deployment/x"), Some("x"));
        assert_eq!(deployment_name("x"), None);
        assert_eq!(deployment_name("pod/x"), None);
    }

    #[test]
    fn only_a_recording_of_this_version_is_accepted() {
        let ok = format!(
            r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","limitBytes":10,"bytes":0,"evicted":0,"lost":0,"events":[]}}"#
        );
        assert!(validate(&ok, "p", 1).is_ok());
        let e = validate("# HELP metrics", "p", 1).unwrap_err();
        assert_eq!(exit::class_of(&e), Class::Usage);
        assert!(e.to_string().contains("not JSON"), "{e}");
        let other = ok.replace("/v1", "/v9");
        let e = validate(&other, "p", 1).unwrap_err();
        assert!(e.to_string().contains("flight.kubectl-meta.io/v9"), "{e}");
        let e = validate(r#"{"kind":"Status"}"#, "p", 1).unwrap_err();
        assert!(e.to_string().contains("kind \"Status\""), "{e}");
    }
}
