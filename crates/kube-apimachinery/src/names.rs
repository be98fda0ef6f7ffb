//! apimachinery's validators for names, label keys and values, and the Go-style quoting its
//! messages use. Shared by the selector parser and the sandbox's object validation so both
//! report exactly kube-apiserver's messages.

/// The DNS-1123 label regex, as printed in messages.
pub const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// "must be no more than N bytes": `MaxLenError` of apimachinery's `api/validate/content`
/// package (object names, label keys and values).
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// "must be no more than N characters": the older `MaxLenError` of apimachinery's
/// `util/validation` package, whose `IsDNS1035Label` and `IsDNS1123Subdomain` the
/// CustomResourceDefinition checks (`spec.names`, `spec.group`, versions) still call.
pub fn max_len_error_characters(n: usize) -> String {
    format!("must be no more than {n} characters")
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
    dns1123_subdomain(value, max_len_error)
}

/// `IsDNS1123Subdomain` of `util/validation`: as [`is_dns1123_subdomain`], with its length
/// error worded by [`max_len_error_characters`].
pub fn is_dns1123_subdomain_characters(value: &str) -> Vec<String> {
    dns1123_subdomain(value, max_len_error_characters)
}

fn dns1123_subdomain(value: &str, max_len: fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len(253));
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
    dns1035_label(value, max_len_error)
}

/// `IsDNS1035Label` of `util/validation`: as [`is_dns1035_label`], with its length error
/// worded by [`max_len_error_characters`].
pub fn is_dns1035_label_characters(value: &str) -> Vec<String> {
    dns1035_label(value, max_len_error_characters)
}

fn dns1035_label(value: &str, max_len: fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len(63));
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

/// Quotes a string like Go's `strconv.Quote` (`%q`), as apimachinery prints bad values.
///
/// `"` and `\\` are escaped with a backslash; printable runes (Go's `unicode.IsPrint`: letters,
/// marks, numbers, punctuation, symbols and the ASCII space) stay as they are; `\a \b \f \n \r
/// \t \v` are written so; other runes below U+0020 and U+007F as `\xNN`, and every other
/// rune (other controls, format characters, spaces but U+0020, private-use and unassigned
/// code points) as `\uNNNN`, or `\UNNNNNNNN` above U+FFFF.
pub fn go_quote(s: &str) -> String {
    go_quote_bytes(s.as_bytes())
}

/// [`go_quote`] of bytes that may not be UTF-8: each byte of an invalid sequence is written as
/// `\xNN`, as Go does.
pub fn go_quote_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_go_escaped(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
    out
}

/// One rune as Go's `strconv.Quote` writes it (`appendEscapedRune`).
fn push_go_escaped(out: &mut String, c: char) {
    use std::fmt::Write as _;
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        c if is_go_print(c) => out.push(c),
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
        c if u32::from(c) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\U{:08x}", u32::from(c));
        }
    }
}

/// Go's `unicode.IsPrint`: a letter, mark, number, punctuation or symbol (Unicode general
/// categories L, M, N, P, S), or the ASCII space.
fn is_go_print(c: char) -> bool {
    use std::sync::LazyLock;
    static PRINT: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"^[\p{L}\p{M}\p{N}\p{P}\p{S}]$").ok());
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    match PRINT.as_ref() {
        Some(re) => re.is_match(c.encode_utf8(&mut [0; 4])),
        // The pattern is a constant that compiles; were it not to, controls and spaces are
        // still escaped.
        None => !c.is_control() && !c.is_whitespace(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_escapes_quote_and_backslash() {
        assert_eq!(go_quote("plain"), r#""plain""#);
        assert_eq!(go_quote(""), r#""""#);
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(go_quote("it's"), r#""it's""#);
    }

    #[test]
    fn go_quote_named_escapes() {
        // strconv.Quote("\a\b\f\n\r\t\v") == `"\a\b\f\n\r\t\v"`
        assert_eq!(
            go_quote("\u{07}\u{08}\u{0c}\n\r\t\u{0b}"),
            r#""\a\b\f\n\r\t\v""#
        );
    }

    #[test]
    fn go_quote_other_controls_as_hex() {
        assert_eq!(
            go_quote("\0\u{01}\u{1b}\u{1f}\u{7f}"),
            r#""\x00\x01\x1b\x1f\x7f""#
        );
        // C1 controls are above U+007F: \u form.
        assert_eq!(go_quote("\u{80}\u{9f}"), r#""\u0080\u009f""#);
    }

    #[test]
    fn go_quote_keeps_printable_non_ascii() {
        assert_eq!(go_quote("日本語"), "\"日本語\"");
        assert_eq!(go_quote("é ñ ü Ω"), "\"é ñ ü Ω\"");
        // Symbols, marks and runes above the BMP are printable too.
        assert_eq!(go_quote("€ ☺ e\u{301} 😀 𝔸"), "\"€ ☺ e\u{301} 😀 𝔸\"");
        // U+FFFD itself is printable.
        assert_eq!(go_quote("\u{fffd}"), "\"\u{fffd}\"");
    }

    #[test]
    fn go_quote_escapes_non_printable_non_ascii() {
        // Spaces other than U+0020, line and paragraph separators.
        assert_eq!(
            go_quote("\u{a0}\u{2028}\u{2029}\u{3000}"),
            r#""\u00a0\u2028\u2029\u3000""#
        );
        // Format characters: soft hyphen, zero-width space, BOM.
        assert_eq!(
            go_quote("\u{ad}\u{200b}\u{feff}"),
            r#""\u00ad\u200b\ufeff""#
        );
        // Private use and unassigned code points; above U+FFFF the \U form.
        assert_eq!(go_quote("\u{e000}\u{f0000}"), r#""\ue000\U000f0000""#);
        assert_eq!(go_quote("\u{e0001}"), r#""\U000e0001""#);
    }

    #[test]
    fn dns_names_with_both_length_wordings() {
        assert!(is_dns1035_label_characters("v1beta1").is_empty());
        assert_eq!(
            is_dns1035_label_characters(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(
            is_dns1035_label(&"a".repeat(64)),
            vec!["must be no more than 63 bytes"]
        );
        assert_eq!(
            is_dns1035_label_characters("1v"),
            vec![
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        let long = format!("{}.com", "a".repeat(250));
        assert_eq!(
            is_dns1123_subdomain_characters(&long),
            vec!["must be no more than 253 characters"]
        );
        assert_eq!(
            is_dns1123_subdomain(&long),
            vec!["must be no more than 253 bytes"]
        );
        assert!(is_dns1123_subdomain_characters("1.example").is_empty());
    }

    #[test]
    fn go_quote_bytes_escapes_invalid_utf8_bytewise() {
        assert_eq!(go_quote_bytes(b"a\xffb"), r#""a\xffb""#);
        // A truncated sequence: each byte on its own, as Go's DecodeRune gives width 1.
        assert_eq!(go_quote_bytes(b"\xe6\x97x"), r#""\xe6\x97x""#);
        assert_eq!(go_quote_bytes(b"\xc0\xaf"), r#""\xc0\xaf""#);
        assert_eq!(go_quote_bytes("日".as_bytes()), "\"日\"");
    }
}
