//! TLS for the sandbox: a certificate authority and a serving certificate, and the accept loop
//! that serves the router over HTTPS (HTTP/1.1 and HTTP/2).
//!
//! An ephemeral sandbox gets a fresh CA per start. With a state directory the CA (certificate
//! `ca.crt` and key `ca.key`, mode 0600) is kept there and reused, and only the serving
//! certificate is new per start: a sandbox restarted on the same address and state is reachable
//! with the kubeconfig of the earlier start, as a restarted cluster is for its users.
//!
//! kubectl (client-go) only sends credentials to TLS servers, so the sandbox always speaks
//! HTTPS; clients trust it through the CA written into the kubeconfig. The server asks for an
//! optional client certificate: one the CA signed authenticates its connection's requests
//! (see [`auth::certs`](crate::auth::certs)).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::auth::certs;

/// Errors creating TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("generating the sandbox certificate: {0}")]
    Cert(rcgen::Error),
    /// rustls rejected the configuration.
    #[error("configuring TLS: {0}")]
    Rustls(rustls::Error),
    /// The CA could not be used to verify client certificates.
    #[error("configuring client certificates: {0}")]
    ClientCa(String),
    /// The CA kept in the state directory could not be read or written.
    #[error("{path}: {message} (delete ca.crt and ca.key there to get a new CA)")]
    Stored {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl From<rcgen::Error> for TlsError {
    fn from(e: rcgen::Error) -> Self {
        TlsError::Cert(e)
    }
}

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> Self {
        TlsError::Rustls(e)
    }
}

/// A CA (for the kubeconfig) and a server configuration using a certificate it signed.
pub struct TlsMaterial {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The CA's key, PEM (to issue client certificates).
    pub ca_key_pem: String,
    /// The server side.
    pub acceptor: TlsAcceptor,
}

/// Generate a CA and a serving certificate valid for localhost, 127.0.0.1, ::1 and `extra_ip`.
pub fn generate(extra_ip: IpAddr) -> Result<TlsMaterial, TlsError> {
    let ca_key = KeyPair::generate()?;
    let ca_cert = certs::ca_params()?.self_signed(&ca_key)?;
    serving(ca_cert.pem(), ca_key, extra_ip)
}

/// Like [`generate`], but the CA is kept in `dir` (`ca.crt`, `ca.key`, mode 0600): loaded when
/// both files are there, created and stored otherwise.
pub fn load_or_generate(dir: &Path, extra_ip: IpAddr) -> Result<TlsMaterial, TlsError> {
    let (crt_path, key_path) = (dir.join("ca.crt"), dir.join("ca.key"));
    let stored = |path: &Path, message: String| TlsError::Stored {
        path: path.to_path_buf(),
        message,
    };
    match (
        std::fs::read_to_string(&crt_path),
        std::fs::read_to_string(&key_path),
    ) {
        (Ok(crt), Ok(key)) => {
            let ca_key = KeyPair::from_pem(&key)
                .map_err(|e| stored(&key_path, format!("not a key: {e}")))?;
            serving(crt, ca_key, extra_ip)
        }
        _ => {
            let ca_key = KeyPair::generate()?;
            let ca_cert = certs::ca_params()?.self_signed(&ca_key)?;
            super::kubeconfig::write_private(&key_path, &ca_key.serialize_pem())
                .map_err(|e| stored(&key_path, e.to_string()))?;
            super::kubeconfig::write_private(&crt_path, &ca_cert.pem())
                .map_err(|e| stored(&crt_path, e.to_string()))?;
            serving(ca_cert.pem(), ca_key, extra_ip)
        }
    }
}

/// A serving certificate signed by the CA (`ca_pem`, `ca_key`).
fn serving(ca_pem: String, ca_key: KeyPair, extra_ip: IpAddr) -> Result<TlsMaterial, TlsError> {
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(certs::ca_params()?, ca_key);

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !extra_ip.is_unspecified() && !names.contains(&extra_ip.to_string()) {
        names.push(extra_ip.to_string());
    }
    let mut server = CertificateParams::new(names)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "kubectl-meta-sandbox");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate()?;
    let server_cert = server.signed_by(&server_key, &issuer)?;

    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    // Client certificates signed by the CA authenticate their user; clients without one
    // (bearer tokens) are still accepted.
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
        .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    roots.add(ca_der).map_err(TlsError::Rustls)?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(server_cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        )?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem,
        ca_key_pem,
        acceptor: TlsAcceptor::from(Arc::new(cfg)),
    })
}

/// Serve `app` over TLS on `listener` until `shutdown` is cancelled; then stop accepting and
/// give open connections a few seconds to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let builder = Builder::new(TokioExecutor::new());
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (tcp, _) = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let builder = builder.clone();
        let shutdown = shutdown.clone();
        conns.spawn(async move {
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
            // A verified client certificate names the user of every request on this connection.
            let cert_user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| crate::auth::certs::user_of(c));
            let app = match cert_user {
                Some(u) => app.layer(axum::Extension(crate::auth::ClientCert(u))),
                None => app,
            };
            let svc = TowerToHyperService::new(app);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn.as_mut()).await;
                }
            }
        });
    }
    let _ = tokio::time::timeout(Duration::from_secs(6), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}
