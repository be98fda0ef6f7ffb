//! CA certificates in PEM, as a definition carries them (`caBundle`, `clientConfig.caBundle`):
//! parsed once here for both [`crate::spec::validate`] (is the bundle usable?) and the hook
//! callers (the roots a webhook's server certificate is checked against).

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Parse PEM CA certificate(s); an error says why, without quoting the input.
pub fn parse_ca_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("is not valid PEM ({e})"))?;
    if certs.is_empty() {
        return Err(
            "holds no PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
                .into(),
        );
    }
    let mut roots = rustls::RootCertStore::empty();
    let (_, bad) = roots.add_parsable_certificates(certs.iter().cloned());
    if bad > 0 {
        return Err(format!(
            "holds {bad} PEM block(s) that are not X.509 CA certificates"
        ));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_pem_must_hold_certificates() {
        assert!(
            parse_ca_pem(b"")
                .unwrap_err()
                .contains("no PEM certificate")
        );
        let ca = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        assert_eq!(parse_ca_pem(ca.cert.pem().as_bytes()).unwrap().len(), 1);
    }
}
