//! What can go wrong with a project file: it cannot be read, it is not valid YAML or does not
//! match the schema (an unknown field, a wrong type), or a value is wrong (a missing path, a
//! hook program that does not exist). Every message starts with `FILE:LINE:COLUMN:` and names
//! the field, as compilers do, so an editor can jump there.

use std::path::PathBuf;

/// One problem with one field of the project file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the value (0 when unknown).
    pub line: u64,
    /// 1-based column of the value (0 when unknown).
    pub column: u64,
    /// The field, as a path: `hooks[0].server`, `target`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Problem {
    /// `FILE:LINE:COLUMN: FIELD: MESSAGE` (without the position when it is unknown).
    pub fn render(&self, file: &str) -> String {
        let at = match (self.line, self.column) {
            (0, _) => file.to_string(),
            (l, 0) => format!("{file}:{l}"),
            (l, c) => format!("{file}:{l}:{c}"),
        };
        format!("{at}: {}: {}", self.field, self.message)
    }
}

/// Why a project file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The file (or the current directory) could not be read.
    #[error("{shown}: cannot read it: {source}")]
    Io {
        /// The file as shown to the user.
        shown: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Not valid YAML, or not the schema (an unknown field, a wrong type, a missing field).
    #[error("{}", .problem.render(.shown))]
    Syntax {
        /// The file as shown to the user.
        shown: String,
        /// Where and what.
        problem: Problem,
    },
    /// Values that are wrong: each problem on a line of its own.
    #[error("{}", .problems.iter().map(|p| p.render(.shown)).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file as shown to the user.
        shown: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

/// Why a hook's `build` step failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `sh` could not be started.
    #[error("hook {hook}: build `{command}` could not start: {source}")]
    Start {
        /// The hook's name.
        hook: String,
        /// The build command.
        command: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The build exited unsuccessfully.
    #[error("hook {hook}: build `{command}` failed ({status}) in {}{}", dir.display(), if output.is_empty() { String::new() } else { format!(":\n{output}") })]
    Failed {
        /// The hook's name.
        hook: String,
        /// The build command.
        command: String,
        /// Where it ran.
        dir: PathBuf,
        /// How it ended (`exit status: 1`).
        status: String,
        /// The last lines of its output (stdout and stderr).
        output: String,
    },
}
