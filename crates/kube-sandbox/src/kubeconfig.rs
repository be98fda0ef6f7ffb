//! The kubeconfig a sandbox writes for its clients (context `sandbox`, bearer token), created 0600.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;

/// Render a kubeconfig for `server` (trusting `ca_pem`) with `token`, namespace `default`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: sandbox
  user:
    token: {token}
contexts:
- name: sandbox
  context:
    cluster: sandbox
    user: sandbox
    namespace: default
current-context: sandbox
preferences: {{}}
"
    )
}

/// Write `contents` to `path` with mode 0600 (replacing any existing file, creating parent dirs).
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
