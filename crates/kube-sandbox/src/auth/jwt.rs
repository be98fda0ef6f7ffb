//! Signed JSON Web Tokens (JWS compact form, ES256) for ServiceAccount tokens: the sandbox's
//! signing key (ECDSA P-256; kube-apiserver accepts RSA or ECDSA service-account keys), signing
//! claims and verifying a token's signature. The key id is what kube-apiserver uses: the
//! unpadded base64url SHA-256 of the public key's PKIX (SubjectPublicKeyInfo) DER.

use std::path::Path;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

/// Errors loading or creating the signing key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The stored key could not be read, parsed or written.
    #[error("{path}: {message} (delete it to get a new service-account signing key)")]
    Stored {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Key generation failed.
    #[error("generating the service-account signing key: {0}")]
    Generate(String),
}

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The service-account signing key.
pub struct Signer {
    key: EcdsaKeyPair,
    public: Vec<u8>,
    /// The key id (`kid` header).
    pub kid: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer(kid={})", self.kid)
    }
}

impl Signer {
    fn from_pkcs8(der: &[u8]) -> Result<Signer, String> {
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der)
            .map_err(|e| e.to_string())?;
        let public = key.public_key().as_ref().to_vec();
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&public);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &spki);
        Ok(Signer {
            key,
            public,
            kid: URL_SAFE_NO_PAD.encode(digest.as_ref()),
        })
    }

    fn generate_pkcs8() -> Result<Vec<u8>, KeyError> {
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map(|d| d.as_ref().to_vec())
            .map_err(|e| KeyError::Generate(e.to_string()))
    }

    /// A new key.
    pub fn generate() -> Result<Signer, KeyError> {
        Signer::from_pkcs8(&Self::generate_pkcs8()?).map_err(KeyError::Generate)
    }

    /// The key kept in `dir` (`sa.key`, base64 PKCS#8, mode 0600), created there if missing.
    pub fn load_or_generate(dir: &Path) -> Result<Signer, KeyError> {
        let path = dir.join("sa.key");
        let stored = |message: String| KeyError::Stored {
            path: path.clone(),
            message,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let der = STANDARD
                    .decode(text.trim())
                    .map_err(|e| stored(format!("not base64: {e}")))?;
                Signer::from_pkcs8(&der).map_err(|e| stored(format!("not a P-256 key: {e}")))
            }
            Err(_) => {
                let der = Self::generate_pkcs8()?;
                crate::kubeconfig::write_private(&path, &STANDARD.encode(&der))
                    .map_err(|e| stored(e.to_string()))?;
                Signer::from_pkcs8(&der).map_err(KeyError::Generate)
            }
        }
    }

    /// Sign `claims` into a compact JWS.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .key
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(sig.as_ref())
        ))
    }

    /// The claims of `token` if it is a JWS this key signed; None for anything else.
    pub fn verify(&self, token: &str) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
        if header["alg"] != "ES256" {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(s).ok()?;
        let signing_input = &token[..h.len() + 1 + c.len()];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &self.public)
            .verify(signing_input.as_bytes(), &sig)
            .ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(c).ok()?).ok()
    }

    /// The public key as a JWK (for `/openid/v1/jwks`).
    pub fn jwk(&self) -> Value {
        // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        let (x, y) = self.public[1..].split_at(32);
        json!({"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_tokens_verify_and_tampered_or_foreign_ones_do_not() {
        let a = Signer::generate().expect("key");
        let b = Signer::generate().expect("key");
        let t = a.sign(&json!({"sub": "x"})).expect("sign");
        assert_eq!(a.verify(&t), Some(json!({"sub": "x"})));
        assert_eq!(b.verify(&t), None, "another key's token");
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"sub": "admin"}).to_string());
        parts[1] = &forged;
        assert_eq!(a.verify(&parts.join(".")), None, "changed claims");
        assert_eq!(a.verify("not.a.jwt"), None);
        assert_eq!(a.kid.len(), 43);
    }
}
