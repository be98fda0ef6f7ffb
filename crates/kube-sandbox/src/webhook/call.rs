//! The HTTPS call of one webhook: `POST` the AdmissionReview to `clientConfig.url` (with
//! `?timeout=Ns` as kube-apiserver adds it), trusting only `caBundle`, within
//! `timeoutSeconds` (10 by default). A `clientConfig.service` is called at
//! `https://NAME.NAMESPACE.svc:PORT/PATH` as kube-apiserver names it (the certificate must be for
//! `NAME.NAMESPACE.svc`), connecting to the address [`resolve_service`] finds: the sandbox has
//! no cluster network, so the Service's Endpoints (or EndpointSlices) must list an address this
//! machine can reach, typically `127.0.0.1` in a Service without selector. Blocking I/O: admission runs inside synchronous writes, so
//! on a multi-threaded runtime the call tells tokio it blocks (`block_in_place`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

/// POST `review` to the webhook; its decoded answer, or why the call failed (worded as Go's
/// HTTP client words it where kube-apiserver shows that).
///
/// `service_addr` is where a `clientConfig.service` webhook's Service resolved to.
pub fn post(
    webhook: &Value,
    review: &Value,
    service_addr: Option<std::net::SocketAddr>,
) -> Result<Value, String> {
    let blocking = || post_blocking(webhook, review, service_addr);
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(blocking)
        }
        _ => blocking(),
    }
}

fn post_blocking(
    webhook: &Value,
    review: &Value,
    service_addr: Option<std::net::SocketAddr>,
) -> Result<Value, String> {
    let cc = &webhook["clientConfig"];
    let timeout = webhook["timeoutSeconds"]
        .as_u64()
        .unwrap_or(10)
        .clamp(1, 30);
    let url = match cc["url"].as_str() {
        Some(url) => url.to_string(),
        None => service_url(&cc["service"]),
    };
    let target = Url::parse(&url).map_err(|e| format!("failed to call webhook: {e}"))?;
    let sep = if target.path.contains('?') { '&' } else { '?' };
    let path = format!("{}{sep}timeout={timeout}s", target.path);
    let shown = format!("https://{}{path}", target.authority);
    let post_err = |e: String| format!("failed to call webhook: Post {shown:?}: {e}");
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let roots = roots(cc["caBundle"].as_str()).map_err(post_err)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| post_err(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = ServerName::try_from(target.host.clone())
        .map_err(|e| post_err(format!("invalid host {}: {e}", target.host)))?;
    let addr = match service_addr {
        Some(a) => a,
        None => (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|e| post_err(format!("dial tcp: lookup {}: {e}", target.host)))?
            .next()
            .ok_or_else(|| post_err(format!("dial tcp: lookup {}: no such host", target.host)))?,
    };
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(timeout))
        .map_err(|e| post_err(format!("dial tcp {addr}: connect: {}", io_words(&e))))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = tcp.set_read_timeout(Some(left));
    let _ = tcp.set_write_timeout(Some(left));
    let conn = rustls::ClientConnection::new(Arc::new(cfg), server_name)
        .map_err(|e| post_err(e.to_string()))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let body = serde_json::to_vec(review).map_err(|e| post_err(e.to_string()))?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, */*\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: kube-apiserver-admission\r\n\r\n",
        target.authority,
        body.len()
    );
    let timed_out = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            post_err("context deadline exceeded".into())
        } else {
            post_err(io_words(&e))
        }
    };
    tls.write_all(head.as_bytes()).map_err(timed_out)?;
    tls.write_all(&body).map_err(timed_out)?;
    tls.flush().map_err(timed_out)?;
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // Servers that close without close_notify still sent a whole response.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(timed_out(e)),
    }
    let (code, body) = parse_response(&raw).map_err(post_err)?;
    if !(200..300).contains(&code) {
        return Err(format!(
            "failed to call webhook: the server responded with the status code {code} but did not return more information"
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("received invalid webhook response: {e}"))
}

/// The URL kube-apiserver calls a `clientConfig.service` at
/// (`https://NAME.NAMESPACE.svc:PORT/PATH`, port 443 unless given).
fn service_url(svc: &Value) -> String {
    let path = svc["path"].as_str().unwrap_or("/");
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    format!(
        "https://{}.{}.svc:{}{path}",
        svc["name"].as_str().unwrap_or_default(),
        svc["namespace"].as_str().unwrap_or_default(),
        svc["port"].as_u64().unwrap_or(443)
    )
}

/// Words like Go's for the usual socket and certificate errors.
fn io_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "i/o timeout".into(),
        _ if text.contains("UnknownIssuer") || text.contains("BadSignature") => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
        }
        _ if text.contains("NotValidForName") => {
            "tls: failed to verify certificate: x509: certificate is not valid for the webhook's host".into()
        }
        _ => text,
    }
}

/// The trusted roots: the certificates of `caBundle` (base64 PEM); none without one.
fn roots(bundle: Option<&str>) -> Result<rustls::RootCertStore, String> {
    let mut store = rustls::RootCertStore::empty();
    let Some(b) = bundle.filter(|b| !b.is_empty()) else {
        return Ok(store);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b)
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        store.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    Ok(store)
}

/// An `https://host[:port]/path` URL.
#[derive(Debug, PartialEq)]
struct Url {
    host: String,
    port: u16,
    authority: String,
    path: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, String> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("url {url:?}: only https webhooks are called"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("url {url:?}: unclosed IPv6 address"))?;
            (h.to_string(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse()
                .map_err(|_| format!("url {url:?}: invalid port {p:?}"))?,
            None => 443,
        };
        Ok(Url {
            host,
            port,
            authority: authority.to_string(),
            path: path.to_string(),
        })
    }
}

/// The status code and body of an HTTP/1.1 response (`Content-Length`, chunked or to EOF).
fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code: u16 = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("malformed HTTP status line {status:?}"))?;
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let body = &raw[end + 4..];
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        return dechunk(body).map(|b| (code, b));
    }
    match header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        Some(n) if n <= body.len() => Ok((code, body[..n].to_vec())),
        Some(_) => Err("unexpected EOF".into()),
        None => Ok((code, body.to_vec())),
    }
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("malformed chunked encoding")?;
        let size_text = String::from_utf8_lossy(&body[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "malformed chunk size")?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size + 2 {
            return Err("unexpected EOF".into());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_responses_parse() {
        let u = Url::parse("https://127.0.0.1:8443/validate?x=1").expect("url");
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8443, "/validate?x=1")
        );
        let u = Url::parse("https://[::1]/m").expect("v6");
        assert_eq!((u.host.as_str(), u.port), ("::1", 443));
        assert!(Url::parse("http://x/").is_err());
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw), Ok((200, b"abcde".to_vec())));
        let raw = b"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_response(raw), Ok((500, b"ok".to_vec())));
    }
}
