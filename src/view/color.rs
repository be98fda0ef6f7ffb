//! Whether to color: one decision for every command, from its `--color` flag, the terminal and
//! the environment (`NO_COLOR` wins, then `CLICOLOR_FORCE` / `FORCE_COLOR`, then the terminal).

use crate::cli::ColorArg;

impl ColorArg {
    /// Whether to color output going to a stream that is a terminal (`is_tty`) or not:
    /// `always` and `never` decide alone; `auto` asks the environment, then the terminal.
    pub fn resolve(self, is_tty: bool) -> bool {
        match self {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => color_enabled(is_tty),
        }
    }
}

/// Whether the human output should be colored: `NO_COLOR` (non-empty) disables, then
/// `CLICOLOR_FORCE` or `FORCE_COLOR` (non-empty, not `0`) enables, else color on a terminal.
pub fn color_enabled(stdout_is_tty: bool) -> bool {
    color_from_env(|k| std::env::var_os(k), stdout_is_tty)
}

fn color_from_env(get: impl Fn(&str) -> Option<std::ffi::OsString>, tty: bool) -> bool {
    let set = |k: &str| get(k).is_some_and(|v| !v.is_empty());
    let forced = |k: &str| get(k).is_some_and(|v| !v.is_empty() && v != "0");
    if set("NO_COLOR") {
        return false;
    }
    if forced("CLICOLOR_FORCE") || forced("FORCE_COLOR") {
        return true;
    }
    tty
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_follows_environment_then_terminal() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert!(color_from_env(env(&[]), true));
        assert!(!color_from_env(env(&[]), false));
        assert!(!color_from_env(env(&[("NO_COLOR", "1")]), true));
        assert!(color_from_env(env(&[("NO_COLOR", "")]), true));
        assert!(!color_from_env(
            env(&[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]),
            true
        ));
        assert!(color_from_env(env(&[("CLICOLOR_FORCE", "1")]), false));
        assert!(color_from_env(env(&[("FORCE_COLOR", "true")]), false));
        assert!(!color_from_env(env(&[("FORCE_COLOR", "0")]), false));
    }

    #[test]
    fn the_flag_decides_before_the_environment() {
        assert!(ColorArg::Always.resolve(false));
        assert!(!ColorArg::Never.resolve(true));
    }
}
