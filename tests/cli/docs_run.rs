//! The documentation's shell sessions run: docs/tutorial.md and the marked blocks of
//! docs/guide/*.md, so the guide cannot rot.
//!
//! A block runs when the line before its fence is `<!-- doc-test -->` and the fence is
//! ```console. In it, `$ ` starts a command (lines starting
//! `> ` continue it, as a shell's PS2 shows them: heredocs); the lines up to the next command are
//! output the command must print (stdout and stderr as a terminal shows them, interleaved; in
//! that order, each line found in a line of the output with runs of spaces collapsed; `...`
//! lines are skipped). A command must exit 0,
//! unless it ends with the comment `# exit N`. Commands run with bash in one temp dir per
//! document (a `cd` carries over to the next command), with the built binary on PATH as
//! `kubectl-meta` (so `kubectl meta ...` goes through real kubectl's plugin mechanism), a
//! private HOME and no KUBECONFIG. The guide's temp dir holds a copy of `examples/`, as the
//! repository root does; the tutorial's starts empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{BIN, repo};

/// Most time one documented command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// One documented command.
#[derive(Debug)]
struct Step {
    /// 1-based line of its `$ ` in the document.
    line: usize,
    /// The command (continuation lines joined with newlines).
    command: String,
    /// The exit code it must end with.
    exit: i32,
    /// Output lines it must print, in order.
    expect: Vec<String>,
}

/// One runnable block.
#[derive(Debug)]
struct Block {
    /// 1-based line of its fence.
    line: usize,
    /// Its commands.
    steps: Vec<Step>,
}

/// The runnable blocks of `doc`.
fn blocks(doc: &str) -> Vec<Block> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let marker = lines[i].trim();
        if marker != "<!-- doc-test -->" {
            i += 1;
            continue;
        }
        assert_eq!(
            lines.get(i + 1).map(|l| l.trim()),
            Some("```console"),
            "line {}: a doc-test marker must be followed by a ```console block",
            i + 1
        );
        let fence = i + 2;
        let mut steps: Vec<Step> = Vec::new();
        let mut j = i + 2;
        while j < lines.len() && lines[j].trim() != "```" {
            let l = lines[j];
            if let Some(cmd) = l.strip_prefix("$ ") {
                let start = j + 1;
                let mut command = cmd.to_string();
                // Continuation lines: `> text`, or a bare `>` (an empty heredoc line).
                while let Some(next) = lines.get(j + 1) {
                    let more = match next.strip_prefix("> ") {
                        Some(m) => m,
                        None if next.trim_end() == ">" => "",
                        None => break,
                    };
                    command.push('\n');
                    command.push_str(more);
                    j += 1;
                }
                let exit = command
                    .lines()
                    .next()
                    .and_then(|first| first.rsplit_once("# exit "))
                    .and_then(|(_, n)| n.trim().parse().ok())
                    .unwrap_or(0);
                steps.push(Step {
                    line: start,
                    command,
                    exit,
                    expect: Vec::new(),
                });
            } else if !l.trim().is_empty() && l.trim() != "..." {
                steps
                    .last_mut()
                    .unwrap_or_else(|| panic!("line {}: output before any `$ ` command", j + 1))
                    .expect
                    .push(l.trim().to_string());
            }
            j += 1;
        }
        assert!(
            j < lines.len(),
            "line {fence}: unterminated ```console block"
        );
        assert!(
            !steps.is_empty(),
            "line {fence}: a doc-test block without commands"
        );
        out.push(Block { line: fence, steps });
        i = j + 1;
    }
    out
}

/// Runs of whitespace as one space.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first expected line not found, in order, in `output`.
fn missing_line<'a>(expect: &'a [String], output: &str) -> Option<&'a str> {
    let lines: Vec<String> = output.lines().map(squeeze).collect();
    let mut at = 0;
    for want in expect {
        let want_sq = squeeze(want);
        match lines[at..].iter().position(|l| l.contains(&want_sq)) {
            Some(k) => at += k + 1,
            None => return Some(want),
        }
    }
    None
}

/// A private environment: `kubectl-meta` and the system's tools on PATH, HOME in `home`.
struct Env {
    /// Where `kubectl-meta` is linked.
    bin: PathBuf,
    /// The private HOME.
    home: PathBuf,
}

impl Env {
    fn new(root: &Path) -> Env {
        let bin = root.join("bin");
        let home = root.join("home");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("kubectl-meta")).unwrap();
        Env { bin, home }
    }

    /// `script` in bash in `cwd`; (exit code, its output (stderr into stdout), stderr (empty
    /// unless bash itself fails), the directory it ended in).
    fn run(&self, cwd: &Path, script: &str) -> (i32, String, String, PathBuf) {
        let cwd_file = self.home.join(".doc-test-cwd");
        let full = format!(
            "exec 2>&1\n{script}\n__doc_test_rc=$?\npwd > '{}'\nexit $__doc_test_rc\n",
            cwd_file.display()
        );
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(full)
            .current_dir(cwd)
            .env_clear()
            // The built binary first; then the machine's tools (kubectl, python3) wherever CI
            // put them.
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.bin.display(),
                    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
                ),
            )
            .env("HOME", &self.home)
            .env("NO_COLOR", "1")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash runs");
        let out_pipe = child.stdout.take().expect("stdout");
        let err_pipe = child.stderr.take().expect("stderr");
        let read = |mut p: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = p.read_to_string(&mut s);
                s
            })
        };
        let (out_t, err_t) = (read(Box::new(out_pipe)), read(Box::new(err_pipe)));
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                break child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let code = status.code().unwrap_or(-1);
        let ended_in = std::fs::read_to_string(&cwd_file)
            .map(|s| PathBuf::from(s.trim()))
            .unwrap_or_else(|_| cwd.to_path_buf());
        (
            code,
            out_t.join().unwrap_or_default(),
            err_t.join().unwrap_or_default(),
            ended_in,
        )
    }
}

/// Run every block of the document `rel` (relative to the repository) in `dir`.
fn run_doc(rel: &str, env: &Env, dir: &Path) -> usize {
    let doc = std::fs::read_to_string(repo().join(rel)).unwrap();
    let mut cwd = dir.to_path_buf();
    let mut ran = 0;
    for block in blocks(&doc) {
        for step in &block.steps {
            let (code, stdout, stderr, ended_in) = env.run(&cwd, &step.command);
            let shown = format!(
                "{rel}:{}: `{}`\nexit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                step.line, step.command
            );
            assert_eq!(
                code, step.exit,
                "{rel}:{}: the command exited {code}, the document says {}\n{shown}",
                step.line, step.exit
            );
            let both = format!("{stdout}\n{stderr}");
            if let Some(line) = missing_line(&step.expect, &both) {
                panic!(
                    "{rel}:{}: the output lacks the documented line {line:?} (or not in the documented order)\n{shown}",
                    step.line
                );
            }
            cwd = ended_in;
            ran += 1;
        }
    }
    ran
}

/// The `*.md` files of `dir`, sorted.
fn md_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    out
}

/// Copy the directory `from` to `to` (files and directories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

#[test]
fn doc_blocks_are_parsed_with_their_lines_and_expectations() {
    let doc = "text\n<!-- doc-test -->\n```console\n$ echo a   b\na b\n...\n$ false # exit 1\n```\n\
               <!-- doc-test -->\n```console\n$ cat <<'EOF'\n> x\n>\n> EOF\nx\n```\n";
    let b = blocks(doc);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].line, 3);
    assert_eq!(b[0].steps[0].line, 4);
    assert_eq!(b[0].steps[0].expect, vec!["a b"]);
    assert_eq!(b[0].steps[1].exit, 1);
    assert_eq!(b[0].steps[1].line, 7);
    assert_eq!(b[1].steps[0].command, "cat <<'EOF'\nx\n\nEOF");
    assert_eq!(b[1].steps[0].line, 11);
    assert_eq!(missing_line(&["a  b".into()], "x\na b c\n"), None);
    assert_eq!(
        missing_line(&["b".into(), "a".into()], "a\nb\n"),
        Some("a"),
        "order counts"
    );
}

#[test]
fn guide_blocks_run() {
    let root = tempfile::tempdir().unwrap();
    let env = Env::new(root.path());
    let dir = root.path().join("repo");
    copy_dir(&repo().join("examples"), &dir.join("examples"));
    let mut ran = 0;
    for p in md_files(&repo().join("docs/guide")) {
        let rel = format!(
            "docs/guide/{}",
            p.file_name().unwrap_or_default().to_string_lossy()
        );
        ran += run_doc(&rel, &env, &dir);
    }
    assert!(ran >= 2, "the guide has runnable commands ({ran} ran)");
}

#[test]
fn tutorial_runs() {
    let root = tempfile::tempdir().unwrap();
    let env = Env::new(root.path());
    let dir = root.path().join("work");
    std::fs::create_dir_all(&dir).unwrap();
    run_doc("docs/tutorial.md", &env, &dir);
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The `](target)` links of a Markdown text, with their 1-based lines (code blocks skipped).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn doc_links_resolve() {
    let root = repo();
    let mut pages: Vec<PathBuf> = [
        "README.md",
        "examples/README.md",
        "crates/kube-sandbox/README.md",
        "plugin-manifest/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    for dir in ["docs", "docs/guide"] {
        pages.extend(md_files(&root.join(dir)));
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let rel = page
            .strip_prefix(&root)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(&root).join(path)
            };
            if !file.exists() {
                broken.push(format!("{rel}:{line}: {target}: no such file"));
                continue;
            }
            if !frag.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let body = std::fs::read_to_string(&file).unwrap();
                let found = body
                    .lines()
                    .filter_map(|l| {
                        l.trim_start_matches('#')
                            .strip_prefix(' ')
                            .filter(|_| l.starts_with('#'))
                    })
                    .any(|h| anchor(h) == frag);
                if !found {
                    broken.push(format!("{rel}:{line}: {target}: no heading #{frag}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert_eq!(anchor("Exit codes"), "exit-codes");
    assert_eq!(anchor("`kubectl meta dev`"), "kubectl-meta-dev");
}
