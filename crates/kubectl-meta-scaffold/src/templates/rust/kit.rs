//! The hook kit: the request and answer types, the children-map key helper, and the plumbing
//! that runs a hook once per call (exec) or serves it over HTTP (webhook). serde only.
//!
//!     bin/hook                       exec: one call; the request JSON on stdin, the hook's name
//!                                    in KUBECTL_META_HOOK, the answer on stdout
//!     bin/hook --serve [HOST:]PORT   webhook: POST /<hook>, GET /healthz (127.0.0.1 by default)
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Observed objects by type, then by name: `{"ConfigMap.v1": {"sample": {...}}}`. Every
/// declared type is present, even with nothing observed. Look a type up with [`child_key`],
/// never by hand.
pub type ObjectMap = BTreeMap<String, BTreeMap<String, Value>>;

/// CompositeController sync: the parent and its children as observed.
#[derive(Debug, Deserialize)]
pub struct SyncRequest {
    pub controller: Value,
    pub parent: Value,
    #[serde(default)]
    pub children: ObjectMap,
    #[serde(default)]
    pub related: ObjectMap,
    #[serde(default)]
    pub finalizing: bool,
}

/// Its answer: the parent's status and every child it should have.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncResponse {
    pub status: Value,
    pub children: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
}

/// DecoratorController sync: the target object and its attachments as observed.
#[derive(Debug, Deserialize)]
pub struct DecoratorRequest {
    pub controller: Value,
    pub object: Value,
    #[serde(default)]
    pub attachments: ObjectMap,
    #[serde(default)]
    pub related: ObjectMap,
    #[serde(default)]
    pub finalizing: bool,
}

/// Its answer: labels and annotations merged into the target (`None` removes a key), its
/// status (`null`: leave it alone), every attachment it should have.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecoratorResponse {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, Option<String>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, Option<String>>,
    pub status: Value,
    pub attachments: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
}

/// MapController map call: one input object and the outputs already made from it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MapRequest {
    pub controller: Value,
    pub parent: Value,
    pub map_key: String,
    pub input: Value,
    #[serde(default)]
    pub outputs: ObjectMap,
}

/// Its answer: every output this input should have.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MapResponse {
    pub outputs: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<f64>,
}

/// The key of a type in a request's object maps: `Kind.version` for the core group
/// (`ConfigMap.v1`), `Kind.group/version` otherwise (`Deployment.apps/v1`).
pub fn child_key(kind: &str, api_version: &str) -> String {
    format!("{kind}.{api_version}")
}

/// An object's `metadata.name`.
pub fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// An object's `spec` (`null` when it has none).
pub fn spec_of(object: &Value) -> &Value {
    &object["spec"]
}

/// The string-valued fields of a spec (e.g. as a ConfigMap's data).
pub fn string_fields(spec: &Value) -> Value {
    let fields: Map<String, Value> = spec
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.is_string())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(fields)
}

/// A hook: request body in, answer JSON out.
pub type Handler = Box<dyn Fn(&[u8]) -> Result<Vec<u8>, String>>;

/// Adapts a typed hook function to a [`Handler`].
pub fn hook<Req: DeserializeOwned + 'static, Resp: Serialize + 'static>(
    f: fn(Req) -> Resp,
) -> Handler {
    Box::new(move |body| {
        let request: Req = serde_json::from_slice(body)
            .map_err(|e| format!("the request is not valid JSON for this hook: {e}"))?;
        serde_json::to_vec(&f(request)).map_err(|e| e.to_string())
    })
}

/// Serve the hooks (`--serve [HOST:]PORT`) or answer one exec call.
pub fn main(hooks: Vec<(&str, Handler)>) {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--serve" {
        serve(&hooks, &args[2]);
        return;
    }
    let name = std::env::var("KUBECTL_META_HOOK").unwrap_or_default();
    let Some((_, handler)) = hooks.iter().find(|(n, _)| *n == name) else {
        fail(&format!(
            "KUBECTL_META_HOOK={name:?} is not one of: {}",
            names(&hooks)
        ));
    };
    let mut body = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut body) {
        fail(&e.to_string());
    }
    match handler(&body) {
        Ok(answer) => {
            let mut out = std::io::stdout();
            let _ = out.write_all(&answer).and_then(|()| out.write_all(b"\n"));
        }
        Err(e) => fail(&e),
    }
}

/// Report on stderr and exit 1: the sync fails and nothing is changed.
fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1)
}

fn names(hooks: &[(&str, Handler)]) -> String {
    hooks.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// A small HTTP/1.1 server: POST /<hook>, GET /healthz, one request per connection.
fn serve(hooks: &[(&str, Handler)], address: &str) {
    let address = if address.contains(':') {
        address.to_string()
    } else {
        format!("127.0.0.1:{address}")
    };
    let listener = TcpListener::bind(&address)
        .unwrap_or_else(|e| fail(&format!("cannot listen on {address}: {e}")));
    eprintln!(
        "hooks listening on http://{address} (POST /{}, GET /healthz)",
        names(hooks)
    );
    for stream in listener.incoming().flatten() {
        if let Err(e) = answer(hooks, stream) {
            eprintln!("connection: {e}");
        }
    }
}

fn answer(hooks: &[(&str, Handler)], stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let name = path.trim_matches('/');
    let (status, content_type, out) = match (method, hooks.iter().find(|(n, _)| *n == name)) {
        ("GET", _) if path == "/healthz" => ("200 OK", "text/plain", b"ok\n".to_vec()),
        ("POST", Some((_, handler))) => match handler(&body) {
            Ok(json) => ("200 OK", "application/json", json),
            Err(e) => ("400 Bad Request", "text/plain", e.into_bytes()),
        },
        _ => (
            "404 Not Found",
            "text/plain",
            format!("no hook at {method} {path}\n").into_bytes(),
        ),
    };
    eprintln!("{method} {path} {status}");
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        out.len()
    )?;
    stream.write_all(&out)
}
