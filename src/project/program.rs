//! Whether the program a hook's `build` or `server` command runs exists, checked before
//! anything starts: a typo (`pyhton3`) is reported with the file, the hook and the field
//! instead of surfacing later as a hook server that never becomes ready.
//!
//! The commands are `sh -c` lines; the program is their first word after `NAME=value`
//! assignments. Lines this cannot judge are not checked: shell syntax at the start (`(`, `{`,
//! `if`, a `$` expansion), and shell builtins (`cd dir && make`: `cd` exists, `make` is run
//! by the shell later).

use std::path::Path;

/// Words that are the shell's own (builtins and keywords): always there.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "alias", "break", "case", "cd", "command", "continue", "eval", "exec", "exit",
    "export", "for", "if", "read", "return", "set", "shift", "source", "test", "trap", "true",
    "false", "ulimit", "umask", "unset", "until", "wait", "while", "{", "(", "!",
];

/// The program `command` runs, when it can be told: its first word after `NAME=value`
/// assignments, unquoted; `None` for shell syntax or builtins.
pub fn program_of(command: &str) -> Option<String> {
    let word = command
        .split_whitespace()
        .find(|w| !is_assignment(w))?
        .trim_matches(|c| c == '"' || c == '\'');
    if word.is_empty()
        || SHELL_WORDS.contains(&word)
        || word.contains([
            '$', '`', '(', ')', '{', '}', ';', '&', '|', '<', '>', '*', '?',
        ])
    {
        return None;
    }
    Some(word.to_string())
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Why a program was not found, for the message (`None`: it exists).
pub fn missing(program: &str, dir: &Path, path_var: Option<&std::ffi::OsStr>) -> Option<String> {
    if program.contains('/') {
        let p = dir.join(program);
        return (!p.is_file()).then(|| {
            format!(
                "program {program:?} not found ({} does not exist; paths are relative to the project directory)",
                p.display()
            )
        });
    }
    let found = path_var
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .any(|d| is_executable(&d.join(program)));
    (!found).then(|| format!("program {program:?} not found on PATH"))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_first_word_after_assignments() {
        assert_eq!(
            program_of("python3 server.py --port 8081").as_deref(),
            Some("python3")
        );
        assert_eq!(
            program_of("GOFLAGS=-mod=mod go build -o bin/hook .").as_deref(),
            Some("go")
        );
        assert_eq!(
            program_of("'./bin/hook' --x").as_deref(),
            Some("./bin/hook")
        );
        assert_eq!(program_of("cd hook && cargo build"), None);
        assert_eq!(program_of("$HOME/bin/x"), None);
        assert_eq!(program_of("   "), None);
    }

    #[test]
    fn programs_are_looked_up_on_path_or_relative_to_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::env::var_os("PATH");
        assert_eq!(missing("sh", dir.path(), path.as_deref()), None);
        assert_eq!(
            missing("pyhton3", dir.path(), path.as_deref()).as_deref(),
            Some("program \"pyhton3\" not found on PATH")
        );
        let m = missing("./bin/hook", dir.path(), path.as_deref()).unwrap();
        assert!(m.contains("does not exist"), "{m}");
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/hook"), "").unwrap();
        assert_eq!(missing("./bin/hook", dir.path(), path.as_deref()), None);
    }
}
