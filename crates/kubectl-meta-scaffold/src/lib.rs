//! kubectl-meta-scaffold: `kubectl meta init`'s generator: a new Metacontroller-style
//! controller project from a few choices (controller kind, hook language and form, parent,
//! children), as a library so the plugin, tests and benches call it directly. It knows nothing
//! of the command line; it reads the engine crate only for the wire vocabulary a generated hook
//! test case speaks (`hooks::record::Case`, the MapController key).
//!
//! - [`options`]: what was asked ([`Options`]) and what it resolves to ([`Plan`]), checked.
//! - [`naming`]: `KIND.GROUP`, plurals, the well-known resources a child may be.
//! - [`schema`]: a CRD schema inferred from an example object (`--from-example`).
//! - [`manifests`]: the language-neutral files (CRD, controller, sample, project file, the
//!   first hook test case) built from the plan.
//! - [`code`]: per-language code for the templates (object literals, the status counts).
//! - [`render`]: the embedded templates (`templates/<lang>/...`) filled in, the file list.
//!
//! [`generate`] computes every file before [`write`] touches the disk, so bad input writes
//! nothing.
//!
//! The public surface is this file; the crate's README lists it.
#![deny(missing_docs)]

pub mod code;
pub mod error;
pub mod manifests;
pub mod naming;
pub mod options;
pub mod render;
pub mod schema;

use std::path::Path;

pub use error::ScaffoldError;
pub use options::{ControllerKind, HookForm, Lang, Options, Plan};
pub use render::GeneratedFile;

/// Every file of the project `opts` asks for (nothing is written).
pub fn generate(opts: &Options) -> Result<(Plan, Vec<GeneratedFile>), ScaffoldError> {
    let plan = Plan::resolve(opts)?;
    let files = render::files(&plan)?;
    Ok((plan, files))
}

/// Checks that `dir` is absent or empty (unless `force`), without writing anything.
pub fn check_target(dir: &Path, force: bool) -> Result<(), ScaffoldError> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(ScaffoldError::NotADirectory(dir.to_path_buf()));
    }
    let entries: Vec<String> = std::fs::read_dir(dir)
        .map_err(|source| ScaffoldError::Write {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    match entries.iter().min() {
        Some(first) if !force => Err(ScaffoldError::NotEmpty {
            dir: dir.to_path_buf(),
            first: first.clone(),
            count: entries.len() - 1,
        }),
        _ => Ok(()),
    }
}

/// Write `files` under `dir` (created if needed), replacing files of the same names.
pub fn write(dir: &Path, files: &[GeneratedFile]) -> Result<(), ScaffoldError> {
    use std::os::unix::fs::PermissionsExt;
    for f in files {
        let path = dir.join(&f.path);
        let err = |source| ScaffoldError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        std::fs::write(&path, &f.text).map_err(err)?;
        if f.executable {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(err)?;
        }
    }
    Ok(())
}
