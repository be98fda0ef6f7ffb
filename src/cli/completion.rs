//! `kubectl meta completion` arguments, and the hidden `__complete` protocol command that the
//! `kubectl_complete-meta` helper calls for kubectl's plugin completion.

use clap::Args;
use clap_complete::Shell;

/// Arguments of `kubectl meta completion`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    source <(kubectl meta completion bash)        completes `kubectl-meta ...` in bash\n  \
    kubectl meta completion zsh > \"${fpath[1]}/_kubectl-meta\"\n  \
    kubectl meta completion fish > ~/.config/fish/completions/kubectl-meta.fish\n\n\
`kubectl meta <TAB>` (through kubectl's own completion, kubectl 1.26+) instead needs the\n\
kubectl_complete-meta helper on your PATH: install.sh puts it beside the binary, and the\n\
release archive ships it (docs/guide/install.md).")]
pub struct CompletionArgs {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of the hidden `__complete` command: the words after `kubectl meta`, the last one
/// being the word under the cursor (empty for a new word). Answers in cobra's format, which
/// kubectl relays: one candidate per line (`value<TAB>description`), then `:<directive>`.
#[derive(Debug, Clone, Args)]
pub struct CompleteArgs {
    /// The words typed so far (pass them after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub words: Vec<String>,
}
