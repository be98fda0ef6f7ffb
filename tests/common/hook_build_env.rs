//! The environment a generated project's hook builds need when `kubectl meta` runs them under a
//! test's private HOME (tests/cli/init.rs and benches/init.rs, which includes this file by path).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set on `cmd` what the project's `hooks[].build` steps need: Go and Rust caches under `cache`
/// (shared across runs, so serde and Go's standard library compile once), and cargo and rustup
/// keeping the real HOME's toolchain and registry. The build steps inherit it from `kubectl meta
/// dev` / `test`, which run them.
pub fn hook_build_env(cmd: &mut Command, cache: &Path) {
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let env_or = |var: &str, default: PathBuf| std::env::var_os(var).map_or(default, PathBuf::from);
    cmd.env("GOCACHE", cache.join("go-build"))
        .env("GOPATH", cache.join("gopath"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("CARGO_TARGET_DIR", cache.join("cargo-target"))
        .env("CARGO_HOME", env_or("CARGO_HOME", real_home.join(".cargo")))
        .env(
            "RUSTUP_HOME",
            env_or("RUSTUP_HOME", real_home.join(".rustup")),
        )
        .env("CARGO_NET_OFFLINE", "true");
}
