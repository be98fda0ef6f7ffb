//! `GET pods/NAME/log`: the simulated log of a container (no container runs in the sandbox).
//!
//! When the container's command is echo-style (`echo ...`, or `sh -c` / `bash -c` scripts made
//! only of `echo`, `printf`-free `echo -n`, `sleep` and `true` joined by `&&` or `;`), what it
//! prints is knowable: the log is exactly that, with `$VAR` / `${VAR}` taken from the
//! container's `env` (`value`, or `valueFrom.fieldRef` of the Pod's name, namespace, labels and
//! annotations). For any other command the log is one line saying that it is simulated and what
//! command would run. With `follow=true` the stream stays open while the container runs and
//! ends when it stops. Errors as kube-apiserver's: a container name is required when there are
//! several, and a container that has not started has no log yet.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::state::State;
use super::status::{ApiError, ApiResult};

/// The log text for container `container` (or the only one) of Pod `ns/name`, and the name of
/// that container.
pub fn pod_log(
    state: &Arc<State>,
    ns: &str,
    name: &str,
    container: Option<&str>,
    tail_lines: Option<usize>,
) -> ApiResult<(String, String)> {
    let pod = state
        .core_object("pods", ns, name)?
        .value()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let containers: Vec<&Value> = pod["spec"]["containers"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let c = match container {
        Some(want) => pod["spec"]["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(containers.iter().copied())
            .find(|c| c["name"] == want)
            .ok_or_else(|| {
                ApiError::bad_request(format!("container {want} is not valid for pod {name}"))
            })?,
        None if containers.len() == 1 => containers[0],
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let cname = c["name"].as_str().unwrap_or_default();
    if matches!(pod["status"]["phase"].as_str(), None | Some("Pending")) {
        return Err(ApiError::bad_request(format!(
            "container \"{cname}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    }
    let argv: Vec<String> = ["command", "args"]
        .iter()
        .flat_map(|k| c[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    let env = env_of(&pod, c);
    let mut text = match echo_output(&argv, &env) {
        Some(t) => t,
        None => format!(
            "[kubectl-meta sandbox] simulated log of container {cname} (image {}): no container runs in the sandbox, so what {} would print is unknown\n",
            c["image"].as_str().unwrap_or("?"),
            if argv.is_empty() {
                "the image's entrypoint".to_string()
            } else {
                format!("{argv:?}")
            }
        ),
    };
    if let Some(n) = tail_lines {
        let lines: Vec<&str> = text.lines().collect();
        let keep = &lines[lines.len().saturating_sub(n)..];
        text = keep.iter().map(|l| format!("{l}\n")).collect();
    }
    Ok((text, cname.to_string()))
}

/// `follow=true`: the log `text`, then the stream stays open while container `container` of
/// Pod `ns/name` runs and ends when it stops (or the pod goes, or the sandbox shuts down), as
/// the kubelet's log stream does.
pub fn follow(
    state: Arc<State>,
    ns: String,
    name: String,
    container: String,
    text: String,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::convert::Infallible>> + Send {
    // Subscribed before looking, so a stop between the look and the wait is not missed.
    let mut rx = state.store.subscribe();
    let first = futures::stream::once(futures::future::ready(Ok(bytes::Bytes::from(text))));
    let until_stopped = async move {
        let running = |state: &State| {
            state
                .store
                .get("/pods", &ns, &name)
                .and_then(|p| p.value().ok())
                .is_some_and(|p| container_running(&p, &container))
        };
        while running(&state) {
            tokio::select! {
                _ = state.shutdown.cancelled() => break,
                r = rx.recv() => {
                    if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                        break;
                    }
                }
            }
        }
    };
    futures::StreamExt::chain(
        first,
        futures::StreamExt::filter_map(futures::stream::once(until_stopped), |()| {
            futures::future::ready(None)
        }),
    )
}

/// Does container `container` of `pod` run (its status has a `running` state)?
fn container_running(pod: &Value, container: &str) -> bool {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().cloned().unwrap_or_default())
        .any(|c| c["name"] == container && !c["state"]["running"].is_null())
}

/// The container's environment as far as it is knowable.
fn env_of(pod: &Value, c: &Value) -> HashMap<String, String> {
    let mut env = HashMap::new();
    for e in c["env"].as_array().into_iter().flatten() {
        let Some(k) = e["name"].as_str() else {
            continue;
        };
        let v = match (&e["value"], &e["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(s), _) => Some(s.clone()),
            (_, Value::String(path)) => field_ref(pod, path),
            _ => None,
        };
        if let Some(v) = v {
            env.insert(k.to_string(), v);
        }
    }
    env
}

fn field_ref(pod: &Value, path: &str) -> Option<String> {
    let m = &pod["metadata"];
    let keyed = |prefix: &str, field: &str| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        m[field][key].as_str().map(String::from)
    };
    match path {
        "metadata.name" => m["name"].as_str().map(String::from),
        "metadata.namespace" => m["namespace"].as_str().map(String::from),
        "metadata.uid" => m["uid"].as_str().map(String::from),
        "spec.nodeName" => pod["spec"]["nodeName"].as_str().map(String::from),
        _ => keyed("metadata.labels['", "labels")
            .or_else(|| keyed("metadata.annotations['", "annotations")),
    }
}

/// What an echo-style command prints, or None when it is not one.
fn echo_output(argv: &[String], env: &HashMap<String, String>) -> Option<String> {
    match argv.first().map(|a| a.rsplit('/').next().unwrap_or(a)) {
        Some("echo") => Some(echo(&argv[1..])),
        Some("sh" | "bash" | "ash" | "dash") if argv.get(1).is_some_and(|a| a == "-c") => {
            script_output(argv.get(2)?, env)
        }
        _ => None,
    }
}

fn echo(words: &[String]) -> String {
    match words.first().map(String::as_str) {
        Some("-n") => words[1..].join(" "),
        _ => format!("{}\n", words.join(" ")),
    }
}

fn script_output(script: &str, env: &HashMap<String, String>) -> Option<String> {
    let mut out = String::new();
    for stmt in script.split("&&").flat_map(|s| s.split([';', '\n'])) {
        let words = shell_words(stmt.trim(), env)?;
        match words.first().map(String::as_str) {
            None | Some("true" | ":") => {}
            Some("sleep") if words.len() == 2 => {}
            Some("echo") => out.push_str(&echo(&words[1..])),
            Some(_) => return None,
        }
    }
    Some(out)
}

/// Split like a POSIX shell (quotes, backslashes, `$VAR` and `${VAR}`); None on anything else
/// (pipes, redirections, substitutions), which makes the command not echo-style.
fn shell_words(s: &str, env: &HashMap<String, String>) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    let var = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Option<String> {
        let mut name = String::new();
        if chars.peek() == Some(&'{') {
            chars.next();
            for c in chars.by_ref() {
                if c == '}' {
                    return Some(env.get(&name).cloned().unwrap_or_default());
                }
                name.push(c);
            }
            return None;
        }
        while let Some(&c) = chars.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                name.push(c);
                chars.next();
            } else {
                break;
            }
        }
        if name.is_empty() {
            return None;
        }
        Some(env.get(&name).cloned().unwrap_or_default())
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        '$' => cur.push_str(&var(&mut chars)?),
                        '`' => return None,
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next()?);
            }
            '$' => {
                in_word = true;
                cur.push_str(&var(&mut chars)?);
            }
            '|' | '>' | '<' | '`' | '(' | ')' | '&' | '*' | '?' => return None,
            x => {
                in_word = true;
                cur.push(x);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn echo_style_commands_print_what_they_would() {
        let env: HashMap<String, String> = [("JOB_INDEX".to_string(), "9".to_string())].into();
        assert_eq!(
            echo_output(&argv(&["echo", "hello", "world"]), &env).as_deref(),
            Some("hello world\n")
        );
        assert_eq!(
            echo_output(&argv(&["sh", "-c", "echo ${JOB_INDEX}"]), &env).as_deref(),
            Some("9\n")
        );
        assert_eq!(
            echo_output(&argv(&["sh", "-c", "echo 'Hello world' && sleep 30"]), &env).as_deref(),
            Some("Hello world\n")
        );
        assert_eq!(
            echo_output(
                &argv(&["/bin/sh", "-c", "echo \"i=$JOB_INDEX\"; echo -n x"]),
                &env
            )
            .as_deref(),
            Some("i=9\nx")
        );
        assert_eq!(
            echo_output(&argv(&["sh", "-c", "echo hi | tee f"]), &env),
            None
        );
        assert_eq!(echo_output(&argv(&["nginx"]), &env), None);
    }

    #[test]
    fn field_refs_resolve_from_the_pod() {
        let pod = serde_json::json!({"metadata": {"name": "p", "labels": {"batch.kubernetes.io/job-completion-index": "3"}}});
        assert_eq!(
            field_ref(
                &pod,
                "metadata.labels['batch.kubernetes.io/job-completion-index']"
            )
            .as_deref(),
            Some("3")
        );
        assert_eq!(field_ref(&pod, "metadata.name").as_deref(), Some("p"));
    }
}
