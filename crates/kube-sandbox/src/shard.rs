//! KEP-5866 `shardSelector` (Kubernetes 1.36 alpha, feature gate `ShardedListAndWatch`): the
//! parser, the hash and the match, as kube-apiserver's `k8s.io/apiserver/pkg/sharding` and
//! `k8s.io/apimachinery/pkg/sharding` do them.
//!
//! The wire format is a CEL expression of `shardRange(FIELD, 'START', 'END')` calls joined by
//! `||`. FIELD is `object.metadata.uid` or `object.metadata.namespace` (the same in every call);
//! START (inclusive) and END (exclusive) are single- or double-quoted string literals,
//! `0x` and exactly 16 lower-case hex digits, or `0x10000000000000000` (2^64) for END. An
//! object matches when the FNV-1a 64-bit hash of the field's value falls in one of the ranges.
//! kube-apiserver parses the expression with cel-go and walks the tree; this is a hand parser of
//! the same subset (calls, member calls, selections, identifiers, literals, parentheses, `||`,
//! `&&`, `!`, `-`) that gives the same errors for every tree the walk refuses. A text cel-go
//! cannot parse at all is refused too, with this parser's own "Syntax error" wording (cel-go's
//! ANTLR messages are not reproduced).

use std::fmt::Write as _;

/// The fields a shard range may hash.
const FIELDS: [&str; 2] = ["object.metadata.uid", "object.metadata.namespace"];

/// A parsed `shardSelector`: ranges over one field, any of which selects an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    /// `object.metadata.uid` or `object.metadata.namespace`.
    key: &'static str,
    /// `[start, end)` over the 64-bit hash space (end up to 2^64), with the literals as given.
    ranges: Vec<Range>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    start: u128,
    end: u128,
    start_text: String,
    end_text: String,
}

/// Which value of an object a selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKey {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace`.
    Namespace,
}

impl ShardSelector {
    /// Parse a `shardSelector` value; the error is kube-apiserver's text after
    /// `invalid shard selector: `.
    pub fn parse(text: &str) -> Result<ShardSelector, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            );
        }
        let expr = Parser::new(text)
            .and_then(|mut p| p.parse())
            .map_err(|e| format!("CEL parse error: Syntax error: {e}"))?;
        let mut reqs = Vec::new();
        walk(&expr, &mut reqs)?;
        if let Some(first) = reqs.first()
            && let Some(other) = reqs.iter().find(|r| r.0 != first.0)
        {
            return Err(format!(
                "all shard ranges must use the same field, got {} and {}",
                go_quote(first.0),
                go_quote(other.0)
            ));
        }
        let key = reqs.first().map(|r| r.0).unwrap_or(FIELDS[0]);
        Ok(ShardSelector {
            key,
            ranges: reqs.into_iter().map(|r| r.1).collect(),
        })
    }

    /// The field this selector hashes.
    pub fn key(&self) -> ShardKey {
        if self.key == FIELDS[0] {
            ShardKey::Uid
        } else {
            ShardKey::Namespace
        }
    }

    /// Does an object with this uid and namespace ("" for cluster-scoped) match?
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        let value = match self.key() {
            ShardKey::Uid => uid,
            ShardKey::Namespace => namespace,
        };
        let h = u128::from(fnv1a64(value.as_bytes()));
        self.ranges.iter().any(|r| r.start <= h && h < r.end)
    }

    /// The selector as kube-apiserver echoes it in `metadata.shardInfo.selector`:
    /// `shardRange(KEY, 'START', 'END')` joined by ` || `.
    pub fn canonical(&self) -> String {
        let mut s = String::new();
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                s.push_str(" || ");
            }
            let _ = write!(
                s,
                "shardRange({}, '{}', '{}')",
                self.key, r.start_text, r.end_text
            );
        }
        s
    }
}

/// FNV-1a, 64 bits (Go's `hash/fnv.New64a`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Go's `%q` of a string, for the ASCII and UTF-8 texts error messages quote.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A literal's value, as far as the walk tells them apart (Go's `%T` of its value).
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Str(String),
    Bytes,
    Int,
    Uint,
    Double,
    Bool,
    Null,
}

impl Lit {
    fn go_type(&self) -> &'static str {
        match self {
            Lit::Str(_) => "string",
            Lit::Bytes => "[]uint8",
            Lit::Int => "int64",
            Lit::Uint => "uint64",
            Lit::Double => "float64",
            Lit::Bool => "bool",
            Lit::Null => "structpb.NullValue",
        }
    }
}

/// The expression tree of the CEL subset (cel-go's `ast.Expr` kinds).
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    /// A call: `_||_`, `_&&_`, `!_`, `-_` or a named function (member calls keep their
    /// arguments without the target, as cel-go's `CallExpr.Args`).
    Call(String, Vec<Expr>),
    Ident(String),
    Select(Box<Expr>, String),
    Literal(Lit),
    List,
    Map,
}

impl Expr {
    /// cel-go's `ast.ExprKind` number, which the walk prints with `%v`.
    fn kind(&self) -> u8 {
        match self {
            Expr::Call(..) => 1,
            Expr::Ident(_) => 3,
            Expr::List => 4,
            Expr::Literal(_) => 5,
            Expr::Map => 6,
            Expr::Select(..) => 7,
        }
    }
}

fn walk(e: &Expr, out: &mut Vec<(&'static str, Range)>) -> Result<(), String> {
    match e {
        Expr::Call(f, args) if f == "_||_" => {
            for a in args {
                walk(a, out)?;
            }
            Ok(())
        }
        Expr::Call(f, args) if f == "shardRange" => {
            out.push(shard_range(args)?);
            Ok(())
        }
        Expr::Call(f, _) => Err(format!(
            "unsupported function {}; only shardRange() and || are allowed",
            go_quote(f)
        )),
        other => Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            other.kind()
        )),
    }
}

fn shard_range(args: &[Expr]) -> Result<(&'static str, Range), String> {
    if args.len() != 3 {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    }
    let path = field_path(&args[0]).map_err(|e| format!("shardRange() first argument: {e}"))?;
    let Some(key) = FIELDS.iter().find(|f| **f == path) else {
        return Err(format!(
            "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
            go_quote(&path)
        ));
    };
    let start_text = hex_literal(&args[1], "hexStart")?;
    let end_text = hex_literal(&args[2], "hexEnd")?;
    let (start, end) = (hex_value(&start_text), hex_value(&end_text));
    if start >= end {
        return Err(format!(
            "shard range start {start_text} must be less than end {end_text}"
        ));
    }
    Ok((
        key,
        Range {
            start,
            end,
            start_text,
            end_text,
        },
    ))
}

fn hex_value(s: &str) -> u128 {
    u128::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(u128::MAX)
}

fn field_path(e: &Expr) -> Result<String, String> {
    match e {
        Expr::Ident(i) => Ok(i.clone()),
        Expr::Select(operand, field) => Ok(format!("{}.{field}", field_path(operand)?)),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

fn hex_literal(e: &Expr, name: &str) -> Result<String, String> {
    let Expr::Literal(lit) = e else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            e.kind()
        ));
    };
    let Lit::Str(s) = lit else {
        return Err(format!(
            "{name} must be a string literal, got {}",
            lit.go_type()
        ));
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {}", go_quote(s)));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    // Go's len() counts bytes.
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {}",
            hex.len(),
            go_quote(hex)
        ));
    }
    if let Some(c) = hex
        .chars()
        .find(|c| !c.is_ascii_digit() && !('a'..='f').contains(c))
    {
        return Err(format!(
            "{name}: invalid hex character {} in {}",
            go_quote(&c.to_string()),
            go_quote(s)
        ));
    }
    if hex.len() == 17 {
        if s != "0x10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}",
                go_quote(s)
            ));
        }
    } else if hex.len() != 16 {
        let padded = format!("0x{}{hex}", "0".repeat(16 - hex.len()));
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
            go_quote(s),
            go_quote(&padded)
        ));
    }
    Ok(s.clone())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Lit(Lit),
    Dot,
    Comma,
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    OpenBrace,
    CloseBrace,
    Colon,
    Or,
    And,
    Not,
    Minus,
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "'<EOF>'".into(),
        Some(Tok::Ident(i)) => format!("'{i}'"),
        Some(Tok::Lit(_)) => "a literal".into(),
        Some(t) => format!(
            "'{}'",
            match t {
                Tok::Dot => ".",
                Tok::Comma => ",",
                Tok::Open => "(",
                Tok::Close => ")",
                Tok::OpenBracket => "[",
                Tok::CloseBracket => "]",
                Tok::OpenBrace => "{",
                Tok::CloseBrace => "}",
                Tok::Colon => ":",
                Tok::Or => "||",
                Tok::And => "&&",
                Tok::Not => "!",
                _ => "-",
            }
        ),
    }
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            '.' if !next.is_some_and(|n| n.is_ascii_digit()) => {
                toks.push(Tok::Dot);
                i += 1;
            }
            ',' | '(' | ')' | '[' | ']' | '{' | '}' | ':' | '-' => {
                toks.push(match c {
                    ',' => Tok::Comma,
                    '(' => Tok::Open,
                    ')' => Tok::Close,
                    '[' => Tok::OpenBracket,
                    ']' => Tok::CloseBracket,
                    '{' => Tok::OpenBrace,
                    '}' => Tok::CloseBrace,
                    ':' => Tok::Colon,
                    _ => Tok::Minus,
                });
                i += 1;
            }
            '|' if next == Some('|') => {
                toks.push(Tok::Or);
                i += 2;
            }
            '&' if next == Some('&') => {
                toks.push(Tok::And);
                i += 2;
            }
            '!' if next != Some('=') => {
                toks.push(Tok::Not);
                i += 1;
            }
            '\'' | '"' => {
                let (s, n) = string_literal(&chars[i..], false)?;
                toks.push(Tok::Lit(Lit::Str(s)));
                i += n;
            }
            'r' | 'R' | 'b' | 'B' if matches!(next, Some('\'' | '"')) => {
                let raw = matches!(c, 'r' | 'R');
                let (s, n) = string_literal(&chars[i + 1..], raw)?;
                toks.push(Tok::Lit(if raw { Lit::Str(s) } else { Lit::Bytes }));
                i += n + 1;
            }
            c if c.is_ascii_digit() || c == '.' => {
                let start = i;
                let hex = c == '0' && matches!(next, Some('x' | 'X'));
                if hex {
                    i += 2;
                }
                let mut double = false;
                while let Some(&d) = chars.get(i) {
                    if d.is_ascii_hexdigit() && hex || d.is_ascii_digit() {
                        i += 1;
                    } else if !hex && (d == '.' || d == 'e' || d == 'E') {
                        double = true;
                        i += 1;
                    } else {
                        break;
                    }
                }
                let lit = if double {
                    Lit::Double
                } else if matches!(chars.get(i), Some('u' | 'U')) {
                    i += 1;
                    Lit::Uint
                } else {
                    Lit::Int
                };
                if i == start {
                    return Err(format!("token recognition error at: '{c}'"));
                }
                toks.push(Tok::Lit(lit));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '_')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                toks.push(match word.as_str() {
                    "true" | "false" => Tok::Lit(Lit::Bool),
                    "null" => Tok::Lit(Lit::Null),
                    _ => Tok::Ident(word),
                });
            }
            c => return Err(format!("token recognition error at: '{c}'")),
        }
    }
    Ok(toks)
}

/// A quoted literal at the start of `chars` (which begins with its quote): its value and how
/// many chars it spans. Escapes are decoded as CEL does for the common ones.
fn string_literal(chars: &[char], raw: bool) -> Result<(String, usize), String> {
    let q = chars[0];
    let triple = chars.len() >= 3 && chars[1] == q && chars[2] == q;
    let open = if triple { 3 } else { 1 };
    let mut i = open;
    let mut s = String::new();
    loop {
        let Some(&c) = chars.get(i) else {
            return Err("token recognition error at: unterminated string".into());
        };
        if triple {
            if c == q && chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                return Ok((s, i + 3));
            }
        } else if c == q {
            return Ok((s, i + 1));
        } else if c == '\n' {
            return Err("token recognition error at: newline in string".into());
        }
        if c == '\\' && !raw {
            let e = chars.get(i + 1).copied().unwrap_or_default();
            s.push(match e {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '\\' | '\'' | '"' | '`' | '?' => e,
                _ => return Err(format!("token recognition error at: '\\{e}'")),
            });
            i += 2;
            continue;
        }
        s.push(c);
        i += 1;
    }
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn new(text: &str) -> Result<Parser, String> {
        Ok(Parser {
            toks: lex(text)?,
            at: 0,
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &Tok) -> Result<(), String> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(format!(
                "mismatched input {} expecting {}",
                describe(self.peek()),
                describe(Some(t))
            ))
        }
    }

    fn parse(&mut self) -> Result<Expr, String> {
        let e = self.or()?;
        match self.peek() {
            None => Ok(e),
            t => Err(format!("extraneous input {}", describe(t))),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.chain(&Tok::Or, "_||_", Self::and)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.chain(&Tok::And, "_&&_", Self::unary)
    }

    /// `next (op next)*`, left-associative, as cel-go builds `_||_` and `_&&_` calls.
    fn chain(
        &mut self,
        op: &Tok,
        call: &str,
        next: fn(&mut Self) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut e = next(self)?;
        while self.eat(op) {
            let r = next(self)?;
            e = Expr::Call(call.into(), vec![e, r]);
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&Tok::Not) {
            return Ok(Expr::Call("!_".into(), vec![self.unary()?]));
        }
        if self.eat(&Tok::Minus) {
            let e = self.unary()?;
            // cel-go folds a negated number into the literal.
            return Ok(match e {
                Expr::Literal(l @ (Lit::Int | Lit::Double)) => Expr::Literal(l),
                e => Expr::Call("-_".into(), vec![e]),
            });
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        while self.eat(&Tok::Dot) {
            let Some(Tok::Ident(field)) = self.peek().cloned() else {
                return Err(format!(
                    "no viable alternative at input '.{}'",
                    describe(self.peek()).trim_matches('\'')
                ));
            };
            self.at += 1;
            if self.eat(&Tok::Open) {
                e = Expr::Call(field, self.args(&Tok::Close)?);
            } else {
                e = Expr::Select(Box::new(e), field);
            }
        }
        Ok(e)
    }

    fn args(&mut self, close: &Tok) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.or()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(&Tok::Comma)?;
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.peek().cloned() {
            Some(Tok::Ident(name)) => {
                self.at += 1;
                if self.eat(&Tok::Open) {
                    Ok(Expr::Call(name, self.args(&Tok::Close)?))
                } else {
                    Ok(Expr::Ident(name))
                }
            }
            Some(Tok::Lit(l)) => {
                self.at += 1;
                Ok(Expr::Literal(l))
            }
            Some(Tok::Open) => {
                self.at += 1;
                let e = self.or()?;
                self.expect(&Tok::Close)?;
                Ok(e)
            }
            Some(Tok::OpenBracket) => {
                self.at += 1;
                self.args(&Tok::CloseBracket)?;
                Ok(Expr::List)
            }
            Some(Tok::OpenBrace) => {
                self.at += 1;
                while !self.eat(&Tok::CloseBrace) {
                    self.or()?;
                    self.expect(&Tok::Colon)?;
                    self.or()?;
                    if !self.eat(&Tok::Comma) {
                        self.expect(&Tok::CloseBrace)?;
                        break;
                    }
                }
                Ok(Expr::Map)
            }
            t => Err(format!(
                "mismatched input {} expecting an expression",
                describe(t.as_ref())
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

    #[test]
    fn fnv1a64_matches_go() {
        // Go: fnv.New64a() of "" and of "a".
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn ranges_are_half_open_and_echoed_canonically() {
        let s = ShardSelector::parse(&format!(
            "({HALF})||shardRange(object.metadata.uid,\"0xc000000000000000\",'0x10000000000000000')"
        ))
        .expect("valid");
        assert_eq!(
            s.canonical(),
            format!(
                "{HALF} || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
            )
        );
        // fnv1a64("a") = 0xaf63..: in neither [0, 2^63) nor [0xc0.., 2^64).
        assert!(!s.matches("a", ""));
        // fnv1a64("") = 0xcbf2..: in the second range.
        assert!(s.matches("", ""));
    }

    #[test]
    fn errors_name_the_problem_as_kube_apiserver_does() {
        let err = |t: &str| ShardSelector::parse(t).expect_err(t);
        assert_eq!(
            err("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"),
            "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)"
        );
        assert_eq!(
            err("shardRange(object.metadata.name, '0x0', '0x8')"),
            "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace"
        );
        assert_eq!(
            err(&format!("{HALF} && {HALF}")),
            "unsupported function \"_&&_\"; only shardRange() and || are allowed"
        );
        assert_eq!(
            err("object"),
            "unexpected expression kind 3; expected shardRange() call or || operator"
        );
        assert!(err("shardRange(").starts_with("CEL parse error: "));
    }
}
