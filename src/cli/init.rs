//! `kubectl meta init` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// `--kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitKind {
    /// CompositeController: a new parent kind owning children.
    Composite,
    /// DecoratorController: labels and attachments on objects of an existing (or new) kind.
    Decorator,
    /// MapController: outputs per input object.
    Map,
}

/// `--lang`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitLang {
    /// Python 3, standard library only.
    Python,
    /// JavaScript on Node.js, standard library only.
    Javascript,
    /// Go, standard library only (a go.mod without requirements).
    Go,
    /// Rust with serde and serde_json.
    Rust,
}

/// `--hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitHook {
    /// A program run once per call: nothing to start, no port.
    Exec,
    /// An HTTP server `kubectl meta dev` starts.
    Webhook,
}

/// Arguments of `kubectl meta init`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta init my-site                       (Python, a MySite.example.com owning a ConfigMap)\n  \
    kubectl meta init website --lang go --parent Website.demo.example.com --child configmaps --child deployments.apps\n  \
    kubectl meta init labeler --kind decorator --target deployments.apps\n  \
    kubectl meta init website --from-example website.yaml   (the CRD schema inferred from an example)\n\n\
Then, in the project: kubectl meta dev (live), kubectl meta dev --once (until converged),\n\
kubectl meta test (the hook tests). Exit codes: 0 written, 2 bad input (nothing written).")]
pub struct InitArgs {
    /// The project directory (created; must be empty unless --force).
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Controller kind.
    #[arg(long, value_enum, default_value = "composite")]
    pub kind: InitKind,
    /// Hook language.
    #[arg(long, value_enum, default_value = "python")]
    pub lang: InitLang,
    /// Hook form.
    #[arg(long, value_enum, default_value = "exec")]
    pub hook: InitHook,
    /// The parent's KIND.GROUP (e.g. Website.demo.example.com) [default: from DIR's name,
    /// my-site -> MySite.example.com].
    #[arg(long, value_name = "KIND.GROUP")]
    pub parent: Option<String>,
    /// The parent's API version [default: v1alpha1].
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
    /// A child resource (composite), attachment (decorator) or output (map), e.g. configmaps,
    /// deployments.apps; repeatable [default: configmaps].
    #[arg(long = "child", value_name = "RESOURCE[.GROUP]")]
    pub children: Vec<String>,
    /// Decorator: the existing resource to decorate (e.g. deployments.apps) [default: a new
    /// kind, --parent].
    #[arg(long, value_name = "RESOURCE[.GROUP]")]
    pub target: Option<String>,
    /// Map: the input resource [default: configmaps].
    #[arg(long, value_name = "RESOURCE[.GROUP]")]
    pub input: Option<String>,
    /// Infer the parent's CRD schema from this example object (YAML or JSON); its apiVersion
    /// and kind name the parent, and it becomes the sample.
    #[arg(long, value_name = "FILE")]
    pub from_example: Option<PathBuf>,
    /// Write into a directory that is not empty (files of the same names are replaced).
    #[arg(long)]
    pub force: bool,
}
