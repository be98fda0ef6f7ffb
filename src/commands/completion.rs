//! Shell completion: `kubectl meta completion SHELL` (clap_complete's static scripts, for the
//! `kubectl-meta` binary), and the hidden `__complete` command behind `kubectl meta <TAB>`.
//!
//! kubectl (1.26+) completes a plugin's arguments by running `kubectl_complete-<plugin>` from
//! PATH with the words typed after the plugin name, the last one being the word under the cursor
//! (empty for a new word), and relaying what it prints in cobra's format: one candidate per line
//! (`value<TAB>description`), the last line `:<directive>` (cobra's ShellCompDirective bits).
//! Our helper script runs `kubectl-meta __complete -- WORDS...`, answered here by walking the
//! clap command tree, so the candidates are always this binary's real subcommands and flags.

use std::collections::HashSet;
use std::fmt::Write as _;

use clap::{Arg, ArgAction, CommandFactory, ValueHint};

use crate::cli::Cli;
use crate::cli::completion::{CompleteArgs, CompletionArgs};
use crate::cli::version::VERSION_LINE;

/// Cobra's ShellCompDirectiveDefault: the shell may fall back to completing file names.
pub const DIRECTIVE_DEFAULT: u32 = 0;
/// Cobra's ShellCompDirectiveNoFileComp: no file names, even when there is no candidate.
pub const DIRECTIVE_NO_FILE_COMP: u32 = 4;
/// Cobra's ShellCompDirectiveFilterDirs: complete directory names only.
pub const DIRECTIVE_FILTER_DIRS: u32 = 16;

/// One completion choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What replaces the word under the cursor.
    pub value: String,
    /// One line shown beside it by shells that show descriptions (zsh, fish).
    pub help: Option<String>,
}

/// The answer to one completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    /// Choices, already filtered by the word under the cursor.
    pub candidates: Vec<Candidate>,
    /// Cobra ShellCompDirective bits (`DIRECTIVE_*`).
    pub directive: u32,
}

impl Completions {
    /// Cobra's wire format: `value[\tdescription]` lines, then `:<directive>`.
    pub fn to_cobra(&self) -> String {
        let mut out = String::new();
        for c in &self.candidates {
            out.push_str(&c.value);
            if let Some(help) = &c.help {
                out.push('\t');
                out.push_str(help);
            }
            out.push('\n');
        }
        let _ = writeln!(out, ":{}", self.directive);
        out
    }
}

/// `kubectl meta completion SHELL`: the static script for `kubectl-meta ...`.
pub fn run(args: &CompletionArgs) -> anyhow::Result<()> {
    // clap_complete writes hidden subcommands too: leave `__complete` out of the copy it sees.
    let full = Cli::command();
    let mut cmd = clap::Command::new("kubectl-meta")
        .version(VERSION_LINE)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "kubectl-meta", &mut out);
    if args.shell == clap_complete::Shell::Bash {
        // clap_complete 4.6 names the root's bash case `kubectl__meta` ('-' -> "__") but the
        // subcommands' cases `kubectl__subcmd__meta__subcmd__dev` ('-' -> "__subcmd__"), so
        // nothing after a subcommand would complete; make them agree.
        let script =
            String::from_utf8_lossy(&out).replace("kubectl__subcmd__meta", "kubectl__meta");
        return super::write_stdout(script.as_bytes());
    }
    super::write_stdout(&out)
}

/// `kubectl-meta __complete -- WORDS...`: prints the completions in cobra's format.
pub fn run_complete(args: &CompleteArgs) -> anyhow::Result<()> {
    let mut root = Cli::command();
    root.build();
    super::write_stdout(complete(&root, &args.words).to_cobra().as_bytes())
}

/// Completes the last of `words` (the words after `kubectl meta`; the last one is the word
/// under the cursor) against `root`, a built clap command (`Command::build`, so global flags
/// are propagated to subcommands).
pub fn complete(root: &clap::Command, words: &[String]) -> Completions {
    let (cur, typed) = match words.split_last() {
        Some((cur, typed)) => (cur.as_str(), typed),
        None => ("", &[][..]),
    };
    let mut cmd = root;
    let mut pending: Option<&Arg> = None;
    let mut after_dashes = false;
    let mut positionals = 0usize;
    let mut seen: HashSet<&str> = HashSet::new();
    for word in typed {
        if pending.take().is_some() {
            continue; // the value of the flag before
        }
        if after_dashes {
            positionals += 1;
        } else if word == "--" {
            after_dashes = true;
        } else if let Some(long) = word.strip_prefix("--") {
            let (name, inline_value) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            if let Some(arg) = find_long(cmd, name) {
                seen.insert(arg.get_id().as_str());
                if !inline_value && needs_value(arg) {
                    pending = Some(arg);
                }
            }
        } else if word.len() > 1 && word.starts_with('-') {
            // A cluster of short flags (`-vv`), possibly ending in one that takes a value,
            // attached (`-nfoo`) or as the next word (`-n foo`).
            let shorts = &word[1..];
            for (i, c) in shorts.char_indices() {
                let Some(arg) = find_short(cmd, c) else { break };
                seen.insert(arg.get_id().as_str());
                if takes_value(arg) {
                    if i + c.len_utf8() == shorts.len() && needs_value(arg) {
                        pending = Some(arg);
                    }
                    break;
                }
            }
        } else if let Some(sub) = find_subcommand(cmd, word) {
            cmd = sub;
            positionals = 0;
            seen.clear();
        } else {
            positionals += 1;
        }
    }

    if let Some(arg) = pending {
        return values(arg, cur, "");
    }
    if !after_dashes {
        if let Some((name, value)) = cur.strip_prefix("--").and_then(|l| l.split_once('=')) {
            return match find_long(cmd, name) {
                Some(arg) if takes_value(arg) => values(arg, value, &format!("--{name}=")),
                _ => none(DIRECTIVE_NO_FILE_COMP),
            };
        }
        if cur.starts_with('-') {
            return flags(cmd, cur, &seen);
        }
        if cmd.has_subcommands() {
            let candidates = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .flat_map(|s| {
                    let help = first_line(s.get_about().map(|a| a.to_string()));
                    std::iter::once(s.get_name())
                        .chain(s.get_visible_aliases())
                        .map(move |name| Candidate {
                            value: name.to_string(),
                            help: help.clone(),
                        })
                })
                .filter(|c| c.value.starts_with(cur))
                .collect();
            return Completions {
                candidates,
                directive: DIRECTIVE_NO_FILE_COMP,
            };
        }
    }
    let positional_args: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    let positional = positional_args.get(positionals).copied().or_else(|| {
        positional_args
            .last()
            .copied()
            .filter(|a| matches!(a.get_action(), ArgAction::Append))
    });
    match positional {
        Some(arg) => values(arg, cur, ""),
        // No positional arguments (dev, sandbox): offer the flags on an empty word.
        None if cur.is_empty() && !after_dashes => flags(cmd, "--", &seen),
        None => none(DIRECTIVE_NO_FILE_COMP),
    }
}

fn none(directive: u32) -> Completions {
    Completions {
        candidates: Vec::new(),
        directive,
    }
}

fn find_long<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long() == Some(name)
            || a.get_all_aliases()
                .is_some_and(|aliases| aliases.contains(&name))
    })
}

fn find_short(cmd: &clap::Command, c: char) -> Option<&Arg> {
    cmd.get_arguments().find(|a| {
        a.get_short() == Some(c)
            || a.get_all_short_aliases()
                .is_some_and(|aliases| aliases.contains(&c))
    })
}

fn find_subcommand<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a clap::Command> {
    cmd.get_subcommands()
        .find(|s| s.get_name() == name || s.get_all_aliases().any(|a| a == name))
}

/// Whether the flag takes a value at all.
fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

/// Whether the flag needs a value, so the next word is that value (not for `--resync [PARENT]`).
fn needs_value(arg: &Arg) -> bool {
    takes_value(arg) && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
}

/// The first sentence of a help text: one short line beside a candidate.
fn first_line(text: Option<String>) -> Option<String> {
    let text = text?;
    let line = text.lines().next()?;
    let line = line.split_once(". ").map_or(line, |(first, _)| first);
    let line = line.trim().trim_end_matches('.');
    (!line.is_empty()).then(|| line.replace('\t', " "))
}

/// The flags of `cmd` that start with `prefix`, leaving out the ones already given (unless
/// repeatable).
fn flags(cmd: &clap::Command, prefix: &str, seen: &HashSet<&str>) -> Completions {
    let mut candidates = Vec::new();
    for arg in cmd.get_arguments() {
        if arg.is_positional() || arg.is_hide_set() {
            continue;
        }
        let repeatable = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count);
        if seen.contains(arg.get_id().as_str()) && !repeatable {
            continue;
        }
        let help = first_line(arg.get_help().map(|h| h.to_string()));
        let longs = arg
            .get_long()
            .into_iter()
            .chain(arg.get_visible_aliases().unwrap_or_default())
            .map(|l| format!("--{l}"));
        let shorts = arg.get_short().into_iter().map(|s| format!("-{s}"));
        for value in longs.chain(shorts) {
            if value.starts_with(prefix) {
                candidates.push(Candidate {
                    value,
                    help: help.clone(),
                });
            }
        }
    }
    Completions {
        candidates,
        directive: DIRECTIVE_NO_FILE_COMP,
    }
}

/// The values of `arg` that start with `cur`, each prefixed with `prefix` (`--output=`).
fn values(arg: &Arg, cur: &str, prefix: &str) -> Completions {
    let possible = arg.get_possible_values();
    if !possible.is_empty() {
        let candidates = possible
            .iter()
            .filter(|p| !p.is_hide_set() && p.get_name().starts_with(cur))
            .map(|p| Candidate {
                value: format!("{prefix}{}", p.get_name()),
                help: first_line(p.get_help().map(|h| h.to_string())),
            })
            .collect();
        return Completions {
            candidates,
            directive: DIRECTIVE_NO_FILE_COMP,
        };
    }
    let value_name = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map(|n| n.as_str().to_ascii_uppercase())
        .unwrap_or_default();
    // clap's derive gives every PathBuf the hint AnyPath; a value named DIR wants directories.
    let directive = match arg.get_value_hint() {
        ValueHint::DirPath => DIRECTIVE_FILTER_DIRS,
        _ if value_name == "DIR" => DIRECTIVE_FILTER_DIRS,
        ValueHint::AnyPath | ValueHint::FilePath | ValueHint::ExecutablePath => DIRECTIVE_DEFAULT,
        _ if value_name.contains("PATH") || value_name.contains("FILE") => DIRECTIVE_DEFAULT,
        _ => DIRECTIVE_NO_FILE_COMP,
    };
    none(directive)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> clap::Command {
        let mut cmd = Cli::command();
        cmd.build();
        cmd
    }

    fn ask(words: &[&str]) -> Completions {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        complete(&root(), &words)
    }

    fn values_of(c: &Completions) -> Vec<&str> {
        c.candidates.iter().map(|c| c.value.as_str()).collect()
    }

    #[test]
    fn subcommands_on_an_empty_word_without_the_hidden_one() {
        let c = ask(&[""]);
        let v = values_of(&c);
        for sub in ["dev", "sandbox", "version", "completion"] {
            assert!(v.contains(&sub), "{sub} missing from {v:?}");
        }
        assert!(!v.contains(&"__complete"), "{v:?}");
        assert_eq!(c.directive, DIRECTIVE_NO_FILE_COMP);
        let dev = c.candidates.iter().find(|c| c.value == "dev").unwrap();
        assert!(
            dev.help
                .as_deref()
                .unwrap()
                .starts_with("Run controller definitions")
        );
    }

    #[test]
    fn subcommands_filtered_by_prefix() {
        assert_eq!(values_of(&ask(&["s"])), vec!["sandbox"]);
        assert_eq!(values_of(&ask(&["ve"])), vec!["version"]);
    }

    #[test]
    fn flags_of_a_subcommand_include_the_global_ones() {
        let c = ask(&["dev", "--"]);
        let v = values_of(&c);
        for flag in [
            "--sandbox",
            "--once",
            "--hook-base-url",
            "--kubeconfig",
            "--context",
        ] {
            assert!(v.contains(&flag), "{flag} missing from {v:?}");
        }
        assert!(v.iter().all(|f| f.starts_with("--")), "{v:?}");
        assert_eq!(
            values_of(&ask(&["dev", "--hook-s"])),
            vec!["--hook-server", "--hook-server-ready"]
        );
    }

    #[test]
    fn a_flag_given_once_is_not_offered_again_a_repeatable_one_is() {
        let v = ask(&["dev", "--once", "-f", "a.yaml", "--"]).candidates;
        let v: Vec<&str> = v.iter().map(|c| c.value.as_str()).collect();
        assert!(!v.contains(&"--once"), "{v:?}");
        assert!(v.contains(&"--filename"), "{v:?}");
        assert!(v.contains(&"--sandbox"), "{v:?}");
    }

    #[test]
    fn enum_values_after_a_flag_and_inline() {
        let c = ask(&["dev", "-o", ""]);
        assert_eq!(values_of(&c), vec!["human", "json"]);
        assert_eq!(c.directive, DIRECTIVE_NO_FILE_COMP);
        assert_eq!(values_of(&ask(&["version", "--output", "j"])), vec!["json"]);
        assert_eq!(
            values_of(&ask(&["version", "--output=j"])),
            vec!["--output=json"]
        );
        let shells = ask(&["completion", ""]);
        for shell in ["bash", "zsh", "fish"] {
            assert!(values_of(&shells).contains(&shell), "{shell}");
        }
    }

    #[test]
    fn path_values_let_the_shell_complete_files_and_dirs() {
        assert_eq!(ask(&["dev", "-f", ""]).directive, DIRECTIVE_DEFAULT);
        assert_eq!(
            ask(&["dev", "--filename", "ex"]).directive,
            DIRECTIVE_DEFAULT
        );
        assert_eq!(
            ask(&["sandbox", "--state", ""]).directive,
            DIRECTIVE_FILTER_DIRS
        );
        let c = ask(&["dev", "--workers", ""]);
        assert!(c.candidates.is_empty());
        assert_eq!(c.directive, DIRECTIVE_NO_FILE_COMP);
    }

    #[test]
    fn values_already_given_do_not_confuse_the_walk() {
        // `-n default` is a global flag with its value before the subcommand.
        assert_eq!(values_of(&ask(&["-n", "default", "sa"])), vec!["sandbox"]);
        assert_eq!(
            values_of(&ask(&["-vv", "--context=kind", "de"])),
            vec!["dev", "deploy"]
        );
        // The value of -o is not taken for a subcommand or a positional.
        let v = ask(&["dev", "-o", "json", "--no-t"]);
        assert_eq!(values_of(&v), vec!["--no-tui"]);
    }

    #[test]
    fn a_command_without_positionals_offers_its_flags_on_an_empty_word() {
        let v = ask(&["sandbox", ""]);
        assert!(values_of(&v).contains(&"--ephemeral"), "{v:?}");
    }

    #[test]
    fn cobra_wire_format() {
        let c = Completions {
            candidates: vec![
                Candidate {
                    value: "dev".into(),
                    help: Some("Run it".into()),
                },
                Candidate {
                    value: "x".into(),
                    help: None,
                },
            ],
            directive: 4,
        };
        assert_eq!(c.to_cobra(), "dev\tRun it\nx\n:4\n");
        assert_eq!(none(0).to_cobra(), ":0\n");
    }
}
