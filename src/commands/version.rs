//! `kubectl meta version`: version, git commit and target of this build, readable or as JSON.

use crate::cli::version::{GIT_COMMIT, TARGET, VERSION, VersionArgs, VersionOutput};

/// The platform in krew's and Go's words (`linux/amd64`, `darwin/arm64`, `windows/amd64`).
pub fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}/{arch}")
}

/// Prints the build facts.
pub fn run(args: &VersionArgs) -> anyhow::Result<()> {
    let text = match args.output {
        VersionOutput::Human => format!(
            "kubectl-meta {VERSION}\ngit commit:  {GIT_COMMIT}\ntarget:      {TARGET} ({})\n",
            platform()
        ),
        VersionOutput::Json => {
            let doc = serde_json::json!({
                "version": VERSION,
                "gitCommit": GIT_COMMIT,
                "target": TARGET,
                "platform": platform(),
            });
            format!("{doc}\n")
        }
    };
    super::write_stdout(text.as_bytes())
}
