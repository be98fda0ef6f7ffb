//! ServiceAccount tokens, issued and checked as kube-apiserver does.
//!
//! - Bound tokens (TokenRequest, `kubectl create token`): issuer
//!   `https://kubernetes.default.svc.cluster.local`, audiences (the issuer by default), `exp`,
//!   `nbf`, `iat`, a `jti`, and `kubernetes.io` claims naming the ServiceAccount (and a bound
//!   Pod or Secret). Valid while unexpired (one minute of leeway), for one of the server's
//!   audiences, and while the ServiceAccount and bound object exist with the same uids.
//! - Legacy tokens (Secrets of type `kubernetes.io/service-account-token`, filled in by
//!   [`populate_secret`], as kube-controller-manager's tokens controller does): issuer
//!   `kubernetes/serviceaccount`, no expiry; valid while the Secret and ServiceAccount exist.
//!
//! A verified token's claims are cached (a signature check costs more than the rest of a
//! request); the expiry and the objects it depends on are checked on every request.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use base64::Engine;
use serde_json::{Value, json};

use super::UserInfo;
use super::jwt::{KeyError, Signer};
use crate::state::now_unix;
use crate::store::Store;

/// The issuer (and default audience) of bound tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer of legacy token Secrets.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The Secret type of legacy tokens.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// Leeway on `exp` and `nbf`, as `jwt.DefaultLeeway`.
const LEEWAY: i64 = 60;
/// Largest number of verified tokens remembered.
const CACHE_MAX: usize = 4096;

/// An object a token depends on: it must exist with this uid.
#[derive(Debug, Clone)]
struct Dependency {
    gr: &'static str,
    ns: String,
    name: String,
    uid: String,
}

#[derive(Debug, Clone)]
struct Verified {
    user: UserInfo,
    exp: Option<i64>,
    nbf: Option<i64>,
    depends: Vec<Dependency>,
}

/// Issues and checks ServiceAccount tokens.
#[derive(Debug)]
pub struct Tokens {
    signer: Signer,
    cache: Mutex<HashMap<String, Verified>>,
}

/// What a TokenRequest asks for.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    /// Audiences (empty: the server's).
    pub audiences: Vec<String>,
    /// Lifetime in seconds.
    pub expiration_seconds: i64,
    /// The object the token is bound to: kind, name, uid.
    pub bound: Option<(String, String, String)>,
}

impl Tokens {
    /// With a fresh key (ephemeral sandbox) or the one kept in `dir`.
    pub fn new(dir: Option<&Path>) -> Result<Tokens, KeyError> {
        let signer = match dir {
            Some(d) => Signer::load_or_generate(d)?,
            None => Signer::generate()?,
        };
        Ok(Tokens {
            signer,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The public signing key as a JWK set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        json!({"keys": [self.signer.jwk()]})
    }

    /// Issue a bound token for ServiceAccount `ns/name` (uid `sa_uid`); returns the token and
    /// its expiry (Unix seconds).
    pub fn issue(
        &self,
        ns: &str,
        name: &str,
        sa_uid: &str,
        spec: &TokenSpec,
    ) -> Result<(String, i64), String> {
        let now = now_unix();
        let exp = now + spec.expiration_seconds;
        let audiences = if spec.audiences.is_empty() {
            vec![ISSUER.to_string()]
        } else {
            spec.audiences.clone()
        };
        let mut k8s = json!({"namespace": ns, "serviceaccount": {"name": name, "uid": sa_uid}});
        if let Some((kind, bname, buid)) = &spec.bound {
            k8s[kind.to_ascii_lowercase()] = json!({"name": bname, "uid": buid});
        }
        let claims = json!({
            "aud": audiences, "exp": exp, "iat": now, "nbf": now, "iss": ISSUER,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": k8s,
            "sub": format!("system:serviceaccount:{ns}:{name}"),
        });
        Ok((self.signer.sign(&claims)?, exp))
    }

    /// A legacy token for Secret `ns/secret` of ServiceAccount `sa` (uid `sa_uid`).
    pub fn issue_legacy(
        &self,
        ns: &str,
        secret: &str,
        sa: &str,
        sa_uid: &str,
    ) -> Result<String, String> {
        self.signer.sign(&json!({
            "iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": ns,
            "kubernetes.io/serviceaccount/secret.name": secret,
            "kubernetes.io/serviceaccount/service-account.name": sa,
            "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
            "sub": format!("system:serviceaccount:{ns}:{sa}"),
        }))
    }

    /// The user a token authenticates, or None (a 401).
    pub fn authenticate(&self, store: &Store, token: &str) -> Option<UserInfo> {
        self.authenticate_for(store, token, &[ISSUER.to_string()])
            .map(|(u, _)| u)
    }

    /// Like [`authenticate`](Self::authenticate), for a TokenReview with its own audiences:
    /// the user and the audiences the token is valid for.
    pub fn authenticate_for(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        let cached = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.get(token).cloned()
        };
        let (verified, token_aud) = match cached {
            Some(v) => {
                let aud = v.user.extra.get(AUD_KEY).cloned().unwrap_or_default();
                (v, aud)
            }
            None => {
                let claims = self.signer.verify(token)?;
                let v = verify_claims(store, token, &claims)?;
                let aud = v.user.extra.get(AUD_KEY).cloned().unwrap_or_default();
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= CACHE_MAX {
                    cache.clear();
                }
                cache.insert(token.to_string(), v.clone());
                (v, aud)
            }
        };
        if !in_time(verified.exp, verified.nbf, now_unix()) {
            return None;
        }
        // Bound tokens must be meant for one of the audiences; legacy ones carry none.
        let matched: Vec<String> = if verified.exp.is_some() {
            let m: Vec<String> = audiences
                .iter()
                .filter(|a| token_aud.contains(a))
                .cloned()
                .collect();
            if m.is_empty() {
                return None;
            }
            m
        } else {
            audiences.to_vec()
        };
        for d in &verified.depends {
            match store.get(d.gr, &d.ns, &d.name) {
                Some(s) if s.uid == d.uid && !(d.gr == "/secrets" && s.deleting) => {}
                _ => return None,
            }
        }
        let mut user = verified.user;
        user.extra.remove(AUD_KEY);
        Some((user, matched))
    }
}

/// Is a token with these `exp` and `nbf` valid at `now` (with [`LEEWAY`] either side)?
fn in_time(exp: Option<i64>, nbf: Option<i64>, now: i64) -> bool {
    exp.is_none_or(|e| now <= e + LEEWAY) && nbf.is_none_or(|n| now + LEEWAY >= n)
}

/// Where the token's audiences ride along in the cache (removed before the user is used).
const AUD_KEY: &str = "\u{0}aud";

fn dependency(gr: &'static str, ns: &str, obj: &Value) -> Option<Dependency> {
    Some(Dependency {
        gr,
        ns: ns.to_string(),
        name: obj["name"].as_str()?.to_string(),
        uid: obj["uid"].as_str()?.to_string(),
    })
}

/// The user and checks of a bound (TokenRequest) token's claims.
fn verify_bound(c: &Value) -> Option<Verified> {
    let k = &c["kubernetes.io"];
    let ns = k["namespace"].as_str()?;
    let sa = &k["serviceaccount"];
    let mut user = UserInfo::service_account(ns, sa["name"].as_str()?, sa["uid"].as_str()?);
    let mut depends = vec![dependency("/serviceaccounts", ns, sa)?];
    if let Some(jti) = c["jti"].as_str() {
        user.extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={jti}")],
        );
    }
    if k["pod"].is_object() {
        depends.push(dependency("/pods", ns, &k["pod"])?);
        for (key, field) in [("pod-name", "name"), ("pod-uid", "uid")] {
            let v = k["pod"][field].as_str()?.to_string();
            user.extra
                .insert(format!("authentication.kubernetes.io/{key}"), vec![v]);
        }
    }
    if k["secret"].is_object() {
        depends.push(dependency("/secrets", ns, &k["secret"])?);
    }
    let aud: Vec<String> = match &c["aud"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    user.extra.insert(AUD_KEY.into(), aud);
    Some(Verified {
        user,
        exp: Some(c["exp"].as_i64()?),
        nbf: c["nbf"].as_i64(),
        depends,
    })
}

/// The user and checks of a token whose signature is good.
fn verify_claims(store: &Store, token: &str, c: &Value) -> Option<Verified> {
    match c["iss"].as_str()? {
        ISSUER => verify_bound(c),
        LEGACY_ISSUER => {
            let ns = c["kubernetes.io/serviceaccount/namespace"].as_str()?;
            let secret = c["kubernetes.io/serviceaccount/secret.name"].as_str()?;
            let sa = c["kubernetes.io/serviceaccount/service-account.name"].as_str()?;
            let uid = c["kubernetes.io/serviceaccount/service-account.uid"].as_str()?;
            // The Secret must still hold this very token (the tokens controller's check).
            let stored = store.get("/secrets", ns, secret)?;
            let data = stored.value().ok()?;
            let held = data["data"]["token"].as_str()?;
            let b64 = base64::engine::general_purpose::STANDARD.encode(token);
            if held != b64 {
                return None;
            }
            Some(Verified {
                user: UserInfo::service_account(ns, sa, uid),
                exp: None,
                nbf: None,
                depends: vec![
                    Dependency {
                        gr: "/serviceaccounts",
                        ns: ns.into(),
                        name: sa.into(),
                        uid: uid.into(),
                    },
                    Dependency {
                        gr: "/secrets",
                        ns: ns.into(),
                        name: secret.into(),
                        uid: stored.uid.clone(),
                    },
                ],
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_and_not_yet_valid_tokens_are_refused_after_the_leeway() {
        let now = 1_000_000;
        assert!(in_time(Some(now + 600), Some(now), now));
        assert!(in_time(Some(now - 30), None, now), "within the leeway");
        assert!(!in_time(Some(now - 61), None, now), "expired");
        assert!(
            !in_time(Some(now + 600), Some(now + 120), now),
            "not yet valid"
        );
        assert!(in_time(None, None, now), "legacy tokens never expire");
    }

    #[test]
    fn bound_token_claims_name_the_service_account_and_its_groups() {
        let claims = json!({"iss": ISSUER, "aud": [ISSUER], "exp": 2, "nbf": 1, "jti": "j1",
            "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "sa", "uid": "u1"}}});
        let v = verify_bound(&claims).expect("valid claims");
        assert_eq!(v.user.name, "system:serviceaccount:ns:sa");
        assert_eq!(
            v.user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(
            v.user.extra["authentication.kubernetes.io/credential-id"],
            vec!["JTI=j1"]
        );
        assert_eq!(v.exp, Some(2));
        let no_sa = json!({"iss": ISSUER, "exp": 2, "kubernetes.io": {"namespace": "ns"}});
        assert!(verify_bound(&no_sa).is_none());
    }
}
