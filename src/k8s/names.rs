//! apimachinery's validators for names, label keys and values, and the Go-style quoting its
//! messages use. Shared by the selector parser and the sandbox's object validation so both
//! report exactly kube-apiserver's messages.

/// The DNS-1123 label regex, as printed in messages.
pub const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// "must be no more than N bytes".
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// apimachinery's `RegexError`: message, examples, and the regex.
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    if examples.is_empty() {
        format!("{msg} (regex used for validation is '{re}')")
    } else {
        format!("{msg} (e.g. {examples}regex used for validation is '{re}')")
    }
}

/// `[a-z0-9]`.
pub fn is_lower_alnum(c: &u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
pub fn is_label_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(is_lower_alnum)
        && b.last().is_some_and(is_lower_alnum)
        && b.iter().all(|c| is_lower_alnum(c) || *c == b'-')
}

/// Dot-separated DNS-1123 labels.
pub fn is_subdomain_token(s: &str) -> bool {
    s.split('.').all(is_label_token)
}

/// apimachinery's `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !is_subdomain_token(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            &format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
            &["example.com"],
        ));
    }
    errs
}

/// apimachinery's `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_label_token(value) {
        if is_subdomain_token(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// apimachinery's `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !(value.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_label_token(value)) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// apimachinery's `IsPathSegmentName` / `IsPathSegmentPrefix`.
pub fn is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// The qualified-name regex, as printed in messages.
pub const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// The qualified-name rule, as printed in messages.
pub const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
pub fn is_qualified_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// apimachinery's `IsQualifiedName` (label keys, annotation keys, finalizers): `[prefix/]name`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_token(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// apimachinery's `IsValidLabelValue`: empty, or ≤63 bytes of a qualified-name token.
pub fn is_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !is_qualified_token(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Quotes a string like Go's `%q`, as apimachinery prints bad values.
pub fn go_quote(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
