//! `kubectl meta init`: generate a controller project ([`crate::scaffold`]), then say what to
//! run next. Bad input is exit 2 with nothing written.

use anyhow::Result;

use super::exit::{self, Class};
use crate::cli::init::{InitArgs, InitHook, InitKind, InitLang};
use crate::scaffold::{self, ControllerKind, HookForm, Lang, Options};

/// Generate the project `args` describe.
pub fn run(args: &InitArgs) -> Result<()> {
    let opts = Options {
        dir: args.dir.clone(),
        kind: match args.kind {
            InitKind::Composite => ControllerKind::Composite,
            InitKind::Decorator => ControllerKind::Decorator,
            InitKind::Map => ControllerKind::Map,
        },
        lang: match args.lang {
            InitLang::Python => Lang::Python,
            InitLang::Javascript => Lang::Javascript,
            InitLang::Go => Lang::Go,
            InitLang::Rust => Lang::Rust,
        },
        hook: match args.hook {
            InitHook::Exec => HookForm::Exec,
            InitHook::Webhook => HookForm::Webhook,
        },
        parent: args.parent.clone(),
        version: args.version.clone(),
        children: args.children.clone(),
        target: args.target.clone(),
        input: args.input.clone(),
        from_example: args.from_example.clone(),
        force: args.force,
    };
    let classify = |e: scaffold::ScaffoldError| {
        let class = if e.is_usage() {
            Class::Usage
        } else {
            Class::Internal
        };
        exit::tag(anyhow::Error::new(e), class)
    };
    scaffold::check_target(&opts.dir, opts.force).map_err(classify)?;
    let (plan, files) = scaffold::generate(&opts).map_err(classify)?;
    scaffold::write(&opts.dir, &files).map_err(classify)?;
    let dir = opts.dir.display();
    eprintln!(
        "created {} {} project {:?} in {dir} ({} files): {} {} with a {} {} hook",
        plan.lang.name(),
        plan.kind.name(),
        plan.project,
        files.len(),
        plan.kind.definition_kind(),
        plan.controller,
        plan.lang.name(),
        match plan.hook {
            HookForm::Exec => "exec",
            HookForm::Webhook => "webhook",
        },
    );
    eprintln!(
        "next:\n  cd {dir}\n  kubectl meta dev --once     # sandbox, CRD, sample, controller, until converged\n  kubectl meta test           # the hook tests in hook-tests/\n  kubectl meta dev            # live: edit the hook, watch it converge"
    );
    Ok(())
}
