//! Client certificates, as kube-apiserver's x509 authenticator (`--client-ca-file`) reads them:
//! a certificate the sandbox CA signed, presented during the TLS handshake, names the user in
//! its subject's CommonName and the groups in its Organizations. The sandbox can issue such
//! certificates ([`Ca::issue`]) for tests and for `kubectl config set-credentials
//! --client-certificate`.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use super::{AUTHENTICATED, UserInfo};

/// The CA's parameters. Fixed (rcgen's default validity, no random fields), so the same key
/// always gives the same CA subject, and a CA rebuilt from a stored key signs certificates that
/// the stored CA certificate verifies.
pub(crate) fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kubectl-meta sandbox CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

/// Most groups a certificate from [`Ca::issue`] carries.
pub const MAX_GROUPS: usize = 2;

/// The OID of the Organization (O) attribute.
const ORGANIZATION_OID: [u64; 4] = [2, 5, 4, 10];

/// Errors issuing a client certificate.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// More groups than a certificate can carry here.
    #[error(
        "a sandbox client certificate carries at most {MAX_GROUPS} groups, got {0}; bind the user instead of adding groups"
    )]
    TooManyGroups(usize),
    /// Signing failed.
    #[error("issuing a client certificate: {0}")]
    Cert(#[from] rcgen::Error),
}

/// The sandbox CA's key (PEM); the CA certificate is rebuilt from it ([`ca_params`]).
pub struct Ca {
    key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca")
    }
}

/// A client certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct ClientCredentials {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl Ca {
    /// The CA from its PEM key.
    pub fn new(key_pem: String) -> Self {
        Ca { key_pem }
    }

    /// Issue a client certificate for `user` in `groups` (CN and O), valid as rcgen's default.
    /// At most [`MAX_GROUPS`] groups: rcgen keeps one value per attribute type, so the second
    /// Organization is written under its OID as a custom attribute (the same on the wire).
    pub fn issue(&self, user: &str, groups: &[&str]) -> Result<ClientCredentials, CertError> {
        if groups.len() > MAX_GROUPS {
            return Err(CertError::TooManyGroups(groups.len()));
        }
        let ca_key = KeyPair::from_pem(&self.key_pem)?;
        let issuer = Issuer::new(ca_params()?, ca_key);
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        for (i, g) in groups.iter().enumerate() {
            let t = if i == 0 {
                DnType::OrganizationName
            } else {
                DnType::CustomDnType(ORGANIZATION_OID.to_vec())
            };
            dn.push(t, *g);
        }
        dn.push(DnType::CommonName, user);
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(ClientCredentials {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The user a (verified) client certificate names, or None if it names no user.
pub fn user_of(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    Some(UserInfo {
        name,
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_name_their_user_and_groups() {
        let ca_key = KeyPair::generate().expect("key");
        let ca_cert = ca_params()
            .expect("params")
            .self_signed(&ca_key)
            .expect("ca");
        let _ = ca_cert;
        let ca = Ca::new(ca_key.serialize_pem());
        let creds = ca.issue("jane", &["devs", "ops"]).expect("issue");
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(creds.cert_pem.as_bytes())
            .map(|c: rustls::pki_types::CertificateDer<'static>| c.to_vec())
            .expect("pem");
        let u = user_of(&der).expect("user");
        assert_eq!(u.name, "jane");
        assert_eq!(u.groups, vec!["devs", "ops", "system:authenticated"]);
    }
}
