//! Finding and reading the test cases of `kubectl meta test`, and binding each to the
//! definition and hook it tests.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::hooks::record::Case;
use crate::spec::ControllerDef;

/// A case read from its file.
#[derive(Debug, Clone)]
pub struct Found {
    /// The file.
    pub path: PathBuf,
    /// The name shown and matched by `-k`: the path below the directory given, without the
    /// extension (`hello/default_world/sync-1a2b3c4d`).
    pub name: String,
    /// The case.
    pub case: Case,
}

/// The case files of `dirs` (directories searched recursively, or files), in name order per
/// argument. A path that does not exist is an error; so is finding no case at all.
pub fn case_files(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    for dir in dirs {
        if dir.is_file() {
            let name = dir.with_extension("").display().to_string();
            out.push((dir.clone(), name));
            continue;
        }
        if !dir.is_dir() {
            bail!(
                "{}: no such directory (record cases with `kubectl meta dev --record {}`, or name the directory that holds them)",
                dir.display(),
                dir.display()
            );
        }
        let mut found = Vec::new();
        walk(dir, &mut found)?;
        found.sort();
        for path in found {
            let rel = path.strip_prefix(dir).unwrap_or(&path).with_extension("");
            out.push((path, rel.display().to_string()));
        }
    }
    Ok(out)
}

/// Every `*.yaml`, `*.yml` and `*.json` file below `dir` (hidden entries skipped).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: cannot read the directory: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Read every case; all the malformed ones are reported together (file and field each).
pub fn read_cases(files: Vec<(PathBuf, String)>, filter: Option<&str>) -> Result<Vec<Found>> {
    let mut cases = Vec::new();
    let mut problems = Vec::new();
    for (path, name) in files {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        match Case::read(&path) {
            Ok(case) => cases.push(Found { path, name, case }),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(cases)
}

/// The definition and hook a case tests; a case for a controller or a hook the definitions do
/// not have is an error naming both.
pub fn bind<'d>(found: &Found, defs: &'d [ControllerDef]) -> Result<&'d ControllerDef, String> {
    let case = &found.case;
    let file = found.path.display();
    let Some(def) = defs.iter().find(|d| d.name() == case.controller) else {
        let names: Vec<&str> = defs.iter().map(ControllerDef::name).collect();
        return Err(format!(
            "{file}: controller: {:?} is not among the definitions given ({}); pass its definition with -f, or fix the case",
            case.controller,
            names.join(", ")
        ));
    };
    if let Some(kind) = &case.controller_kind
        && kind != def.kind()
    {
        return Err(format!(
            "{file}: controllerKind: the case is for a {kind} {:?}, the definition is a {}",
            case.controller,
            def.kind()
        ));
    }
    if !def.hooks().iter().any(|(n, _)| *n == case.hook) {
        let hooks: Vec<&str> = def.hooks().iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "{file}: hook: {} {:?} has no {} hook (it has: {})",
            def.kind(),
            case.controller,
            case.hook,
            hooks.join(", ")
        ));
    }
    if matches!(case.hook.as_str(), "map" | "tombstone") && case.map_key.is_none() {
        return Err(format!(
            "{file}: mapKey: a {} case needs the map key it was called for",
            case.hook
        ));
    }
    Ok(def)
}
