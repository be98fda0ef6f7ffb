//! Static bearer tokens from a CSV file, as kube-apiserver's `--token-auth-file` reads it
//! (`k8s.io/apiserver/pkg/authentication/token/tokenfile`): one record per line,
//! `token,user,uid` and optionally a fourth column of groups, quoted when it holds several
//! (`token,user,uid,"group1,group2"`). Fields follow Go's `encoding/csv` (double quotes around a
//! field, `""` for a quote inside one, no quote inside an unquoted field; blank lines skipped).
//! A record with fewer than 3 columns makes the whole file an error (the server does not start);
//! a record with an empty token is skipped; of two records with the same token the last wins,
//! as upstream (which logs a warning for each).

use std::path::{Path, PathBuf};

use super::UserInfo;

/// A `--token-auth-file` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The file is not CSV as Go's `encoding/csv` reads it.
    #[error("token file {}: parse error on line {line}, column {column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A record has fewer than 3 columns (kube-apiserver's wording).
    #[error(
        "token file '{}' must have at least 3 columns (token, user name, user uid), found {found} (line {line})",
        path.display()
    )]
    TooFewColumns {
        /// The file.
        path: PathBuf,
        /// 1-based line where the record starts.
        line: usize,
        /// How many columns it has.
        found: usize,
    },
}

/// The tokens of a token file, each with the user it authenticates.
#[derive(Debug, Clone, Default)]
pub struct StaticTokens {
    tokens: Vec<(String, UserInfo)>,
}

impl StaticTokens {
    /// Read and parse a token file.
    pub fn from_file(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|cause| TokenFileError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::parse(&text, path)
    }

    /// Parse the text of a token file (`path` is only for errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, TokenFileError> {
        let records = read_csv(text).map_err(|(line, column, message)| TokenFileError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message,
        })?;
        let mut out = StaticTokens::default();
        for (line, record) in records {
            if record.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    path: path.to_path_buf(),
                    line,
                    found: record.len(),
                });
            }
            if record[0].is_empty() {
                continue;
            }
            let user = UserInfo {
                name: record[1].clone(),
                uid: record[2].clone(),
                groups: record
                    .get(3)
                    .map(|g| g.split(',').map(String::from).collect())
                    .unwrap_or_default(),
                ..Default::default()
            };
            out.tokens.retain(|(t, _)| t != &record[0]);
            out.tokens.push((record[0].clone(), user));
        }
        Ok(out)
    }

    /// The user `token` authenticates (compared in constant time against every token, as
    /// upstream does), with `system:authenticated` added as kube-apiserver's group adder does.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let mut found = None;
        for (t, user) in &self.tokens {
            if super::constant_time_eq(t, token) {
                found = Some(user);
            }
        }
        found.map(|u| super::with_authenticated_group(u.clone()))
    }
}

/// A parse error: line, column, message.
type CsvError = (usize, usize, String);

/// Go's `encoding/csv` with `FieldsPerRecord = -1`: records (with the line each starts on).
fn read_csv(text: &str) -> Result<Vec<(usize, Vec<String>)>, CsvError> {
    let mut records = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let mut column;
    loop {
        // Skip blank lines.
        while matches!(chars.peek(), Some('\n') | Some('\r')) {
            if chars.next() == Some('\n') {
                line += 1;
            }
        }
        if chars.peek().is_none() {
            return Ok(records);
        }
        let start = line;
        column = 1;
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                column += 1;
                loop {
                    match chars.next() {
                        None => {
                            return Err((
                                line,
                                column,
                                "extraneous or missing \" in quoted-field".into(),
                            ));
                        }
                        Some('"') => {
                            column += 1;
                            if chars.peek() == Some(&'"') {
                                chars.next();
                                column += 1;
                                field.push('"');
                            } else {
                                break;
                            }
                        }
                        Some('\n') => {
                            line += 1;
                            column = 1;
                            field.push('\n');
                        }
                        Some(c) => {
                            column += 1;
                            field.push(c);
                        }
                    }
                }
                match chars.peek() {
                    None | Some(',') | Some('\n') | Some('\r') => {}
                    Some(_) => {
                        return Err((
                            line,
                            column,
                            "extraneous or missing \" in quoted-field".into(),
                        ));
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if matches!(c, ',' | '\n' | '\r') {
                        break;
                    }
                    if c == '"' {
                        return Err((line, column, "bare \" in non-quoted-field".into()));
                    }
                    chars.next();
                    column += 1;
                    field.push(c);
                }
            }
            record.push(field);
            match chars.next() {
                Some(',') => column += 1,
                Some('\r') => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    line += 1;
                    break;
                }
                Some('\n') => {
                    line += 1;
                    break;
                }
                _ => break,
            }
        }
        records.push((start, record));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StaticTokens, TokenFileError> {
        StaticTokens::parse(text, Path::new("tokens.csv"))
    }

    #[test]
    fn records_are_read_as_kube_apiserver_reads_them() {
        let t = parse("tok1,alice,uid-1,\"devs,ops\"\n\ntok2,bob,uid-2\r\n,skipped,x\ntok1,carol,uid-3,admins\n")
            .expect("parses");
        assert!(t.authenticate("").is_none(), "the empty token is skipped");
        let carol = t.authenticate("tok1").expect("tok1");
        assert_eq!(carol.name, "carol");
        assert_eq!(carol.groups, vec!["admins", "system:authenticated"]);
        let bob = t.authenticate("tok2").expect("tok2");
        assert_eq!((bob.name.as_str(), bob.uid.as_str()), ("bob", "uid-2"));
        assert_eq!(bob.groups, vec!["system:authenticated"]);
        assert!(t.authenticate("tok3").is_none());
        assert!(t.authenticate("").is_none());
        let q = parse("\"a\"\"b\",\"x, y\",u\n").expect("quotes");
        assert_eq!(q.authenticate("a\"b").expect("quoted token").name, "x, y");
    }

    #[test]
    fn bad_files_are_refused_with_where_and_why() {
        let e = parse("tok1,alice,uid-1\ntok2,bob\n").expect_err("2 columns");
        assert_eq!(
            e.to_string(),
            "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 2 (line 2)"
        );
        let e = parse("to\"k,alice,uid\n").expect_err("bare quote");
        assert_eq!(
            e.to_string(),
            "token file tokens.csv: parse error on line 1, column 3: bare \" in non-quoted-field"
        );
        let e = parse("tok,\"alice,uid\n").expect_err("unterminated quote");
        assert!(
            e.to_string()
                .contains("extraneous or missing \" in quoted-field"),
            "{e}"
        );
    }
}
