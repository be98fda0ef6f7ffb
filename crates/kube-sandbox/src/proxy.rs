//! `pods/NAME/proxy[/PATH]`: the pod proxy subresource, as kube-apiserver serves it
//! (pkg/registry/core/pod/rest/subresources.go `ProxyREST`, `pod.ResourceLocation`).
//!
//! The name may be `POD`, `POD:PORT` or `SCHEME:POD:PORT` (`http` or `https`); without a port,
//! the first declared port of the first container that declares one, else the scheme's
//! default. The request (any of `GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `OPTIONS`,
//! its body and headers, the path after `/proxy` and the query string) goes to the pod's first
//! `status.podIPs` address; the answer comes back as the pod gave it. `https` does not verify
//! the pod's certificate (as kube-apiserver's proxy transport). The caller's credentials
//! (`Authorization`, `Impersonate-*`) are not passed on.
//!
//! Errors as kube-apiserver gives them: 400 `invalid pod request "ID"` for a bad name form,
//! 404 NotFound for a missing pod, 400 `address not allowed` when the pod has no usable IP, and
//! 503 ServiceUnavailable `error trying to reach service: ...` when the connection fails.
//!
//! One deviation: kube-apiserver refuses loopback pod IPs (only global unicast addresses); the
//! sandbox has no pod network, so it also accepts `127.0.0.0/8` and `::1`, where a test's
//! process standing in for a pod listens.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, Method, Request, Response, Uri};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::state::State;
use super::status::{ApiError, ApiResult};

/// How long connecting to a pod may take (kube-apiserver's proxy dialer: 30 s).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers not passed on either way: hop-by-hop ones, and the caller's credentials.
const DROPPED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "authorization",
];

/// Where a pod proxy request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Location {
    https: bool,
    addr: SocketAddr,
}

/// `SCHEME:NAME:PORT`, `NAME:PORT` or `NAME` (apimachinery's `SplitSchemeNamePort`): scheme,
/// name and port, or None for any other form.
fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// Go's `IP.IsGlobalUnicast`, which kube-apiserver requires of a pod IP, plus loopback (the
/// sandbox's deviation, see the module header).
fn address_allowed(ip: IpAddr) -> bool {
    if ip.is_loopback() {
        return true;
    }
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified() || v4.is_multicast() || v4.is_link_local() || v4.is_broadcast())
        }
        IpAddr::V6(v6) => !(v6.is_unspecified() || v6.is_multicast() || v6.is_unicast_link_local()),
    }
}

/// Where `id` (the name in the path) of a pod in `ns` is reached (`pod.ResourceLocation`).
fn locate(state: &State, ns: &str, id: &str) -> ApiResult<Location> {
    let (scheme, name, port) = split_scheme_name_port(id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid pod request {id:?}")))?;
    let pod = state
        .core_object("pods", ns, name)?
        .value()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let https = scheme == "https";
    let port: u16 = if port.is_empty() {
        first_container_port(&pod).unwrap_or(if https { 443 } else { 80 })
    } else {
        // kube-apiserver puts the port in the URL as given; a bad one fails the dial.
        port.parse().map_err(|_| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("error trying to reach service: dial tcp: address {port}: invalid port"),
            )
        })?
    };
    let ip = pod["status"]["podIPs"][0]["ip"]
        .as_str()
        .and_then(|s| s.parse::<IpAddr>().ok())
        .filter(|ip| address_allowed(*ip))
        .ok_or_else(|| ApiError::bad_request("address not allowed"))?;
    Ok(Location {
        https,
        addr: SocketAddr::new(ip, port),
    })
}

fn first_container_port(pod: &Value) -> Option<u16> {
    pod["spec"]["containers"]
        .as_array()?
        .iter()
        .find_map(|c| c["ports"][0]["containerPort"].as_u64())
        .and_then(|p| u16::try_from(p).ok())
}

/// The path after `/proxy` in the raw request path (`/` when there is none), kept as sent
/// (a trailing slash stays).
fn path_after_proxy(raw: &str, id: &str) -> String {
    let marker = format!("/pods/{id}/proxy");
    match raw.find(&marker) {
        Some(i) => {
            let rest = &raw[i + marker.len()..];
            if rest.starts_with('/') {
                rest.to_string()
            } else {
                format!("/{rest}")
            }
        }
        None => "/".to_string(),
    }
}

fn unreachable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!("error trying to reach service: {e}"),
    )
}

/// Serve `pods/ID/proxy[/PATH]` in `ns`: pass `req` on to the pod and return its answer.
pub async fn serve(
    state: &Arc<State>,
    ns: &str,
    id: &str,
    req: Request<Body>,
) -> ApiResult<Response<Body>> {
    if !matches!(
        *req.method(),
        Method::GET
            | Method::HEAD
            | Method::POST
            | Method::PUT
            | Method::PATCH
            | Method::DELETE
            | Method::OPTIONS
    ) {
        return Err(ApiError::no_method());
    }
    let loc = locate(state, ns, id)?;
    let (mut parts, body) = req.into_parts();
    let path = path_after_proxy(parts.uri.path(), id);
    let path_and_query = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let host = loc.addr.to_string();
    parts.uri = Uri::builder()
        .path_and_query(path_and_query)
        .build()
        .map_err(|e| ApiError::bad_request(format!("invalid proxy path: {e}")))?;
    strip(&mut parts.headers);
    if let Ok(h) = host.parse() {
        parts.headers.insert("host", h);
    }
    parts.version = axum::http::Version::HTTP_11;
    let out = Request::from_parts(parts, body);
    let tcp = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(loc.addr))
        .await
        .map_err(|_| unreachable(format!("dial tcp {host}: i/o timeout")))?
        .map_err(|e| unreachable(format!("dial tcp {host}: connect: {}", dial_words(&e))))?;
    let resp = if loc.https {
        let tls = tls_connect(tcp, loc.addr.ip()).await?;
        send(tls, out).await?
    } else {
        send(tcp, out).await?
    };
    let (mut parts, body) = resp.into_parts();
    strip(&mut parts.headers);
    Ok(Response::from_parts(parts, Body::new(body)))
}

fn strip(headers: &mut HeaderMap) {
    for h in DROPPED {
        headers.remove(h);
    }
    let impersonate: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("impersonate-"))
        .cloned()
        .collect();
    for k in impersonate {
        headers.remove(k);
    }
}

fn dial_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        _ => e.to_string(),
    }
}

/// Send `req` on a fresh HTTP/1.1 connection over `io`; the answer's head, its body streamed.
async fn send<T>(io: T, req: Request<Body>) -> ApiResult<Response<hyper::body::Incoming>>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(unreachable)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(unreachable)
}

async fn tls_connect(
    tcp: tokio::net::TcpStream,
    ip: IpAddr,
) -> ApiResult<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ApiError::internal(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::IpAddress(ip.into()), tcp)
        .await
        .map_err(|e| unreachable(format!("tls: {e}")))
}

/// Accepts any server certificate (kube-apiserver's proxy transport to pods does not verify
/// them), still checking the handshake's signatures.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_forms_as_split_scheme_name_port() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(
            split_scheme_name_port("web:8080"),
            Some(("", "web", "8080"))
        );
        assert_eq!(
            split_scheme_name_port("https:web:8443"),
            Some(("https", "web", "8443"))
        );
        assert_eq!(split_scheme_name_port("ftp:web:21"), None);
        assert_eq!(split_scheme_name_port(":8080"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn the_path_after_proxy_is_kept_as_sent() {
        let p = |raw| path_after_proxy(raw, "web:8080");
        assert_eq!(p("/api/v1/namespaces/n/pods/web:8080/proxy"), "/");
        assert_eq!(p("/api/v1/namespaces/n/pods/web:8080/proxy/"), "/");
        assert_eq!(
            p("/api/v1/namespaces/n/pods/web:8080/proxy/debug/flight"),
            "/debug/flight"
        );
        assert_eq!(p("/api/v1/namespaces/n/pods/web:8080/proxy/a/b/"), "/a/b/");
    }

    #[test]
    fn global_unicast_and_loopback_addresses_only() {
        let ok = |s: &str| address_allowed(s.parse().expect("ip"));
        assert!(ok("10.244.1.2") && ok("127.0.0.1") && ok("::1") && ok("2001:db8::1"));
        assert!(!ok("0.0.0.0") && !ok("169.254.1.1") && !ok("224.0.0.1") && !ok("fe80::1"));
        assert!(!ok("255.255.255.255"));
    }
}
