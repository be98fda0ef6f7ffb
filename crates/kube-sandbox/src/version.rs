//! The Kubernetes version the sandbox reports and serves, in one place: `/version`, the Node's
//! `kubeletVersion`, the OpenAPI documents. The fields it stores and the fidelity suite it is
//! checked against are those of kube-apiserver of this version.

/// The minor version as a literal, so that [`GIT_VERSION`] can be built at compile time.
macro_rules! minor {
    () => {
        36
    };
}

/// The major version (`/version`'s `major`).
pub const MAJOR: u32 = 1;

/// The minor version (`/version`'s `minor`).
pub const MINOR: u32 = minor!();

/// The oldest minor version this one stays compatible with (kube-apiserver reports n-1).
pub const MIN_COMPATIBILITY_MINOR: u32 = MINOR - 1;

/// The version as a git version (`v1.36.0`).
pub const GIT_VERSION: &str = concat!("v1.", minor!(), ".0");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_version_spells_the_numbers() {
        assert_eq!(GIT_VERSION, format!("v{MAJOR}.{MINOR}.0"));
    }
}
