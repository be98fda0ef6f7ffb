//! Kubernetes label selectors and field selectors.
//!
//! Owns the `?labelSelector=` and `?fieldSelector=` string syntaxes, the
//! `metav1.LabelSelector` object form (`matchLabels` / `matchExpressions`), and matching
//! both against labels and objects. Parsing mirrors apimachinery's `labels.Parse`,
//! `metav1.LabelSelectorAsSelector` and `fields.ParseSelector`, including their error
//! messages, so clients see what a real kube-apiserver would tell them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::names::{go_quote, is_label_value, is_qualified_name};

/// Why a label or field selector was rejected; the messages are kube-apiserver's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement of a label selector string is malformed or invalid.
    #[error("unable to parse requirement: {0}")]
    Requirement(Box<SelectorError>),
    /// A label selector string has an unexpected token, e.g. `found ',', expected: identifier`.
    #[error("{0}")]
    Syntax(String),
    /// A requirement's key or values failed validation (apimachinery field errors,
    /// several joined as `[err1, err2]`).
    #[error("{0}")]
    Invalid(String),
    /// A `matchExpressions` entry names an operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{} is not a valid label selector operator", go_quote(.0))]
    UnknownOperator(String),
    /// A `metav1.LabelSelector` value does not have the expected JSON shape.
    #[error("invalid label selector: {0}")]
    Malformed(String),
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole field selector as given.
        selector: String,
        /// The offending comma-separated term.
        term: String,
    },
    /// A field selector value has a backslash escape other than `\\`, `\,` or `\=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value has an unescaped `,` or `=` (shown as its code point, like Go's `%v` of a rune).
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    UnescapedChar(char),
}

/// How a label selector requirement relates its key to its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    /// `k=v`, `k==v`
    Equals,
    /// `k!=v`
    NotEquals,
    /// `k in (a,b)`
    In,
    /// `k notin (a,b)`
    NotIn,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>5`
    GreaterThan,
    /// `k<5`
    LessThan,
}

/// One requirement of a label selector: key, operator and a sorted, de-duplicated value set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Whether the requirement holds given the label's value (`None` when absent).
    fn matches(&self, actual: Option<&str>) -> bool {
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            Operator::Equals | Operator::In => actual.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !actual.is_some_and(listed),
            Operator::Exists => actual.is_some(),
            Operator::DoesNotExist => actual.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [wanted]) = (actual, self.values.as_slice()) else {
                    return false;
                };
                match (actual.parse::<i64>(), wanted.parse::<i64>()) {
                    (Ok(a), Ok(w)) if self.op == Operator::GreaterThan => a > w,
                    (Ok(a), Ok(w)) => a < w,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.join(",");
        match self.op {
            Operator::Equals => write!(f, "{}={values}", self.key),
            Operator::NotEquals => write!(f, "{}!={values}", self.key),
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{values}", self.key),
            Operator::LessThan => write!(f, "{}<{values}", self.key),
        }
    }
}

/// A parsed label selector: a conjunction of requirements, sorted by key.
/// The default (no requirements) matches everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the string syntax of `?labelSelector=`: comma-separated `a=b`, `a==b`, `a!=b`,
    /// `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`; whitespace tolerant. Keys must be
    /// qualified names and values valid label values, as in kube-apiserver.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            items: lex(s),
            pos: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON value
    /// (`{matchLabels, matchExpressions: [{key, operator, values}]}`), like
    /// `LabelSelectorAsSelector`. An empty `{}` matches everything; a null selector is the
    /// caller's business (it is rejected here as malformed).
    pub fn from_label_selector(v: &Value) -> Result<Self, SelectorError> {
        let obj = v
            .as_object()
            .ok_or_else(|| SelectorError::Malformed("expected an object".to_string()))?;
        let match_labels = match obj.get("matchLabels") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(malformed("matchLabels must be an object")),
        };
        let expressions = match obj.get("matchExpressions") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(_) => return Err(malformed("matchExpressions must be an array")),
        };
        let mut requirements = Vec::new();
        for (key, value) in match_labels.into_iter().flatten() {
            let value = value
                .as_str()
                .ok_or_else(|| malformed(&format!("matchLabels[{key}] must be a string")))?;
            requirements.push(new_requirement(
                key,
                Operator::Equals,
                vec![value.to_string()],
            )?);
        }
        for (i, expr) in expressions.iter().enumerate() {
            let expr = expr
                .as_object()
                .ok_or_else(|| malformed(&format!("matchExpressions[{i}] must be an object")))?;
            let key = optional_str(expr.get("key"))
                .ok_or_else(|| malformed(&format!("matchExpressions[{i}].key must be a string")))?;
            let operator = optional_str(expr.get("operator")).ok_or_else(|| {
                malformed(&format!("matchExpressions[{i}].operator must be a string"))
            })?;
            let values = match expr.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        malformed(&format!("matchExpressions[{i}].values must be strings"))
                    })?,
                Some(_) => {
                    return Err(malformed(&format!(
                        "matchExpressions[{i}].values must be an array"
                    )));
                }
            };
            let op = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(SelectorError::UnknownOperator(other.to_string())),
            };
            requirements.push(new_requirement(key, op, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether every requirement holds for these labels.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Like [`LabelSelector::matches`], with labels as a JSON object (`metadata.labels`);
    /// missing or null means no labels. Non-string label values are ignored.
    pub fn matches_json(&self, labels: Option<&Value>) -> bool {
        let map = labels.and_then(Value::as_object);
        self.matches_with(|k| map.and_then(|m| m.get(k)).and_then(Value::as_str))
    }

    /// Like [`LabelSelector::matches`], with labels looked up through `get` (any label storage).
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(get(&r.key)))
    }

    /// Whether the selector has no requirements (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The `(key, value)` pairs the selector pins to exactly one value (`k=v`, `k==v`,
    /// `k in (v)`), for index lookups.
    pub fn exact_pairs(&self) -> Vec<(&str, &str)> {
        self.requirements
            .iter()
            .filter(|r| matches!(r.op, Operator::Equals | Operator::In))
            .filter_map(|r| match r.values.as_slice() {
                [v] => Some((r.key.as_str(), v.as_str())),
                _ => None,
            })
            .collect()
    }
}

/// The canonical string form (requirements sorted by key, values sorted), which
/// [`LabelSelector::parse`] accepts again.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

fn malformed(msg: &str) -> SelectorError {
    SelectorError::Malformed(msg.to_string())
}

/// A string field that may be absent or null (both read as ""); `None` if it has another type.
fn optional_str(v: Option<&Value>) -> Option<&str> {
    match v {
        None | Some(Value::Null) => Some(""),
        Some(Value::String(s)) => Some(s),
        Some(_) => None,
    }
}

/// Validates a requirement like apimachinery's `labels.NewRequirement` (with an empty field
/// path) and stores its values sorted and de-duplicated.
fn new_requirement(
    key: &str,
    op: Operator,
    values: Vec<String>,
) -> Result<Requirement, SelectorError> {
    let mut errs = Vec::new();
    let key_errs = is_qualified_name(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {}: {}",
            go_quote(key),
            key_errs.join("; ")
        ));
    }
    let values_json = || {
        if values.is_empty() {
            "null".to_string()
        } else {
            Value::from(values.clone()).to_string()
        }
    };
    match op {
        Operator::In | Operator::NotIn if values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            values_json()
        )),
        Operator::Equals | Operator::NotEquals if values.len() != 1 => errs.push(format!(
            "values: Invalid value: {}: exact-match compatibility requires one single value",
            values_json()
        )),
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            values_json()
        )),
        Operator::GreaterThan | Operator::LessThan => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    values_json()
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        go_quote(v)
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = is_label_value(v);
        if !value_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                value_errs.join("; ")
            ));
        }
    }
    if !errs.is_empty() {
        return Err(SelectorError::Invalid(aggregate(errs)));
    }
    let values: BTreeSet<String> = values.into_iter().collect();
    Ok(Requirement {
        key: key.to_string(),
        op,
        values: values.into_iter().collect(),
    })
}

/// Joins error messages like apimachinery's aggregate: duplicates dropped, one message
/// as is, several as `[a, b]`.
fn aggregate(msgs: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::with_capacity(msgs.len());
    for m in msgs {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    match unique.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", unique.join(", ")),
    }
}

/// Lexer tokens of the label selector syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    End,
    OpenPar,
    ClosedPar,
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Ident,
}

#[derive(Clone, Copy, Debug)]
struct Item<'a> {
    tok: Tok,
    lit: &'a str,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a label selector into tokens; the last item is always [`Tok::End`].
/// Every split point is an ASCII byte, so slicing stays on char boundaries.
fn lex(s: &str) -> Vec<Item<'_>> {
    let bytes = s.as_bytes();
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        while bytes.get(i).copied().is_some_and(is_whitespace) {
            i += 1;
        }
        let Some(&c) = bytes.get(i) else {
            items.push(Item {
                tok: Tok::End,
                lit: "",
            });
            return items;
        };
        let start = i;
        let tok = if is_special(c) {
            let two = bytes.get(i + 1) == Some(&b'=') && matches!(c, b'!' | b'=');
            i += if two { 2 } else { 1 };
            match (c, two) {
                (b'!', true) => Tok::NotEquals,
                (b'=', true) => Tok::DoubleEquals,
                (b'!', false) => Tok::Not,
                (b'=', false) => Tok::Equals,
                (b'(', _) => Tok::OpenPar,
                (b')', _) => Tok::ClosedPar,
                (b',', _) => Tok::Comma,
                (b'>', _) => Tok::GreaterThan,
                _ => Tok::LessThan,
            }
        } else {
            while bytes
                .get(i)
                .is_some_and(|&b| !is_special(b) && !is_whitespace(b))
            {
                i += 1;
            }
            match &s[start..i] {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident,
            }
        };
        items.push(Item {
            tok,
            lit: &s[start..i],
        });
    }
}

/// Whether `in`/`notin` are operators (after a key) or plain identifiers (everywhere else).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// Recursive-descent parser over the token list, a port of apimachinery's label parser.
struct Parser<'a> {
    items: Vec<Item<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn lookahead(&self, ctx: Context) -> (Tok, &'a str) {
        let item = self.items.get(self.pos).copied().unwrap_or(Item {
            tok: Tok::End,
            lit: "",
        });
        let tok = match item.tok {
            Tok::In | Tok::NotIn if ctx == Context::Values => Tok::Ident,
            t => t,
        };
        (tok, item.lit)
    }

    fn consume(&mut self, ctx: Context) -> (Tok, &'a str) {
        let item = self.lookahead(ctx);
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Tok::Ident | Tok::Not => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| SelectorError::Requirement(Box::new(e)))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Tok::End => return Ok(requirements),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Tok::Ident && t2 != Tok::Not {
                                return Err(syntax(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(syntax(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Tok::End => return Ok(requirements),
                _ => {
                    return Err(syntax(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(op) = inferred {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    /// Reads `[!]key`; returns the operator when it is implied (`!key`, or a bare `key`
    /// followed by `,` or the end).
    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(&'a str, Option<Operator>), SelectorError> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Tok::Not {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Ident {
            return Err(syntax(format!("found '{lit}', expected: identifier")));
        }
        let errs = is_qualified_name(lit);
        if !errs.is_empty() {
            // apimachinery validates the key here with a nil field path, printed as "<nil>".
            return Err(SelectorError::Invalid(format!(
                "<nil>: Invalid value: {}: {}",
                go_quote(lit),
                errs.join("; ")
            )));
        }
        let (next, _) = self.lookahead(Context::Values);
        if op.is_none() && matches!(next, Tok::End | Tok::Comma) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        match tok {
            Tok::In => Ok(Operator::In),
            Tok::NotIn => Ok(Operator::NotIn),
            Tok::Equals | Tok::DoubleEquals => Ok(Operator::Equals),
            Tok::NotEquals => Ok(Operator::NotEquals),
            Tok::GreaterThan => Ok(Operator::GreaterThan),
            Tok::LessThan => Ok(Operator::LessThan),
            _ => Err(syntax(format!(
                "found '{lit}', expected: '=', '!=', '==', 'in', notin'"
            ))),
        }
    }

    /// Parses `(a,b,...)`; empty entries (`()`, `(,a)`, `(a,,b)`) stand for the empty value.
    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            return Err(syntax(format!("found '{lit}' expected: '('")));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Tok::Ident | Tok::Comma => self.parse_identifiers_list(),
            Tok::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(syntax(format!(
                "found '{lit}', expected: ',', ')' or identifier"
            ))),
        }
    }

    /// Parses the inside of `( ... )` and consumes the closing parenthesis.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Tok::Ident => {
                    set.insert(lit.to_string());
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Tok::Comma => {}
                        Tok::ClosedPar => break,
                        _ => {
                            return Err(syntax(format!("found '{lit2}', expected: ',' or ')'")));
                        }
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Tok::ClosedPar {
                        set.insert(String::new());
                        break;
                    }
                    if tok2 == Tok::Comma {
                        self.consume(Context::Values);
                        set.insert(String::new());
                    }
                }
                _ => {
                    return Err(syntax(format!(
                        "found '{lit}', expected: ',', or identifier"
                    )));
                }
            }
        }
        self.consume(Context::Values);
        Ok(set.into_iter().collect())
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Tok::Ident {
            Ok(vec![lit.to_string()])
        } else {
            Err(syntax(format!("found '{lit}', expected: identifier")))
        }
    }
}

fn syntax(msg: String) -> SelectorError {
    SelectorError::Syntax(msg)
}

/// One `key=value` / `key!=value` term of a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldTerm {
    key: String,
    equals: bool,
    value: String,
}

/// A parsed `?fieldSelector=`: a conjunction of `k=v`, `k==v` and `k!=v` terms on dotted
/// paths such as `metadata.name` or `status.phase`. The default matches everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses a field selector like `fields.ParseSelector`: comma-separated terms (a `\,` does
    /// not split), each split at its first `!=`, `==` or `=`; values may escape `\,` `\=` `\\`.
    /// Keys are taken verbatim (no whitespace trimming), as kube-apiserver does.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let (key, equals, raw) = split_term(part).ok_or_else(|| SelectorError::FieldTerm {
                selector: s.to_string(),
                term: part.to_string(),
            })?;
            terms.push(FieldTerm {
                key: key.to_string(),
                equals,
                value: unescape_value(raw)?,
            });
        }
        Ok(Self { terms })
    }

    /// Whether the selector has no terms (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The keys the selector uses, in term order (the server checks them against the
    /// fields each resource type supports).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.key.as_str())
    }

    /// Whether every term holds for `obj`: each key is resolved as a dotted path into the
    /// object (missing, null, objects and arrays read as ""; booleans and numbers as their
    /// string form) and compared with the term's value.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms
            .iter()
            .all(|t| (field_string(obj, &t.key) == t.value) == t.equals)
    }
}

/// Splits at commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator; returns `(key, is_equality, raw value)`.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, equals) in [("!=", false), ("==", true), ("=", true)] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], equals, value));
            }
        }
    }
    None
}

/// Undoes field selector value escaping (`\\`, `\,`, `\=`), rejecting bare `,` and `=`.
fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::UnescapedChar(c)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::InvalidEscape("\\".to_string()));
    }
    Ok(out)
}

/// The string form of the value at a dotted path, "" when absent or not a scalar.
fn field_string(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for segment in path.split('.') {
        match cur.get(segment) {
            Some(next) => cur = next,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apimachinery's qualified-name message, spelled out so the shared validators are checked against it.
    const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse_err(s: &str) -> String {
        LabelSelector::parse(s)
            .expect_err("selector should be rejected")
            .to_string()
    }

    fn roundtrip(s: &str) -> String {
        let sel = LabelSelector::parse(s).expect("valid selector");
        let shown = sel.to_string();
        assert_eq!(
            LabelSelector::parse(&shown).expect("canonical form reparses"),
            sel
        );
        shown
    }

    #[test]
    fn empty_and_blank_selectors_match_everything() {
        for s in ["", "   ", "\t\n"] {
            let sel = LabelSelector::parse(s).expect("valid");
            assert!(sel.is_empty());
            assert!(sel.matches(&labels(&[])));
            assert!(sel.matches(&labels(&[("a", "b")])));
            assert_eq!(sel, LabelSelector::default());
        }
    }

    #[test]
    fn equality_operators() {
        let sel = LabelSelector::parse("app=web").expect("valid");
        assert!(sel.matches(&labels(&[("app", "web"), ("x", "y")])));
        assert!(!sel.matches(&labels(&[("app", "db")])));
        assert!(!sel.matches(&labels(&[])));
        assert_eq!(LabelSelector::parse("app==web").expect("valid"), sel);

        let ne = LabelSelector::parse("app!=web").expect("valid");
        assert!(!ne.matches(&labels(&[("app", "web")])));
        assert!(ne.matches(&labels(&[("app", "db")])));
        assert!(ne.matches(&labels(&[])), "missing key satisfies !=");
    }

    #[test]
    fn empty_value_equality() {
        let sel = LabelSelector::parse("a=,b").expect("valid");
        assert!(sel.matches(&labels(&[("a", ""), ("b", "x")])));
        assert!(!sel.matches(&labels(&[("a", "x"), ("b", "x")])));
        assert!(!sel.matches(&labels(&[("b", "x")])));
        assert_eq!(roundtrip("a=,b"), "a=,b");
    }

    #[test]
    fn set_based_operators() {
        let sel = LabelSelector::parse("env in (prod, staging)").expect("valid");
        assert!(sel.matches(&labels(&[("env", "prod")])));
        assert!(sel.matches(&labels(&[("env", "staging")])));
        assert!(!sel.matches(&labels(&[("env", "dev")])));
        assert!(!sel.matches(&labels(&[])));

        let not_in = LabelSelector::parse("env notin (prod)").expect("valid");
        assert!(!not_in.matches(&labels(&[("env", "prod")])));
        assert!(not_in.matches(&labels(&[("env", "dev")])));
        assert!(not_in.matches(&labels(&[])), "missing key satisfies notin");
    }

    #[test]
    fn set_values_with_empty_entries() {
        let sel = LabelSelector::parse("x in (foo,,baz)").expect("valid");
        assert!(sel.matches(&labels(&[("x", "")])));
        assert!(sel.matches(&labels(&[("x", "baz")])));
        assert_eq!(sel.to_string(), "x in (,baz,foo)");
        assert_eq!(roundtrip("x in ()"), "x in ()");
        assert!(
            LabelSelector::parse("x in ()")
                .expect("valid")
                .matches(&labels(&[("x", "")]))
        );
        assert_eq!(roundtrip("x in (,a)"), "x in (,a)");
        assert_eq!(roundtrip("x in (a,)"), "x in (,a)");
    }

    #[test]
    fn existence_operators() {
        let sel = LabelSelector::parse("app,!canary").expect("valid");
        assert!(sel.matches(&labels(&[("app", "x")])));
        assert!(!sel.matches(&labels(&[("app", "x"), ("canary", "")])));
        assert!(!sel.matches(&labels(&[])));
        assert_eq!(sel.to_string(), "app,!canary");
    }

    #[test]
    fn greater_and_less_than() {
        let sel = LabelSelector::parse("replicas>2,replicas<5").expect("valid");
        assert!(sel.matches(&labels(&[("replicas", "3")])));
        assert!(!sel.matches(&labels(&[("replicas", "5")])));
        assert!(!sel.matches(&labels(&[("replicas", "2")])));
        assert!(!sel.matches(&labels(&[("replicas", "three")])));
        assert!(!sel.matches(&labels(&[])));
        assert_eq!(roundtrip("a>1"), "a>1");
        assert_eq!(
            parse_err("a>b"),
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
    }

    #[test]
    fn keywords_and_whitespace() {
        let sel = LabelSelector::parse("  in in ( in , notin ) ,\tnotin\n").expect("valid");
        assert!(sel.matches(&labels(&[("in", "notin"), ("notin", "")])));
        assert_eq!(sel.to_string(), "in in (in,notin),notin");
        let sel = LabelSelector::parse("a = b , c != d").expect("valid");
        assert_eq!(sel.to_string(), "a=b,c!=d");
    }

    #[test]
    fn canonical_form_sorts_by_key_and_reparses() {
        assert_eq!(
            roundtrip("z=1,a in (y,x),!m,b==2,c notin (q)"),
            "a in (x,y),b=2,c notin (q),!m,z=1"
        );
        assert_eq!(
            roundtrip("example.com/app=web,app.kubernetes.io/name=x"),
            "app.kubernetes.io/name=x,example.com/app=web"
        );
    }

    #[test]
    fn prefixed_and_long_keys() {
        assert!(LabelSelector::parse("example.com/a_b-c.d=V_1").is_ok());
        let key63 = "k".repeat(63);
        assert!(LabelSelector::parse(&key63).is_ok());
        let err = parse_err(&"k".repeat(64));
        assert!(
            err.starts_with("unable to parse requirement: <nil>: Invalid value: \"kkkk"),
            "{err}"
        );
        assert!(
            err.ends_with(": name part must be no more than 63 bytes"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_name_the_offending_text() {
        assert_eq!(
            parse_err("a=b,"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            parse_err(",a"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("a=b c"),
            "found 'c', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("(a)"),
            "found '(', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(
            parse_err("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("a in (b c)"),
            "unable to parse requirement: found 'c', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("a in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("a in (b,=)"),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            parse_err("a b"),
            "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"
        );
        assert!(
            LabelSelector::parse("a==").is_ok(),
            "a missing value means \"\""
        );
        assert_eq!(
            parse_err("a=!"),
            "unable to parse requirement: found '!', expected: identifier"
        );
        assert_eq!(
            parse_err("a=(b)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            parse_err("!=a"),
            "found '!=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("! =a"),
            "unable to parse requirement: found '=', expected: identifier"
        );
        assert_eq!(
            parse_err("!a=b"),
            "found '=', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn invalid_keys_and_values_are_rejected() {
        // Upper case and underscores are fine in keys (unlike object names).
        assert!(LabelSelector::parse("Bad_Key!=x").is_ok());
        assert_eq!(
            parse_err("-a=b"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part {QUALIFIED_NAME_ERR}"
            )
        );
        assert_eq!(
            parse_err("a/b/c"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key {QUALIFIED_NAME_ERR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )
        );
        assert_eq!(
            parse_err("/a"),
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty"
        );
        assert!(parse_err("Example.com/a").contains("prefix part a lowercase RFC 1123 subdomain"));
        let err = parse_err("a/");
        assert!(
            err.contains("name part must be non-empty; name part must consist of"),
            "{err}"
        );
        let err = parse_err("app=bad value");
        assert_eq!(err, "found 'value', expected: ',' or 'end of string'");
        let err = parse_err("app=-bad");
        assert!(
            err.starts_with(
                "unable to parse requirement: values[0][app]: Invalid value: \"-bad\": a valid label must be an empty string"
            ),
            "{err}"
        );
        let err = parse_err(&format!("app in (ok,{})", "v".repeat(64)));
        assert!(
            err.contains("values[1][app]: Invalid value: \"vvv"),
            "{err}"
        );
        assert!(err.contains(": must be no more than 63 bytes"), "{err}");
        let err = parse_err("a\"b");
        assert!(
            err.starts_with("unable to parse requirement: <nil>: Invalid value: \"a\\\"b\": "),
            "{err}"
        );
    }

    #[test]
    fn non_ascii_input_never_panics() {
        for s in ["é", "a=é", "ü in (ö)", "a in (é,", "!é", "a=b,é", "\u{0}"] {
            assert!(LabelSelector::parse(s).is_err(), "{s}");
        }
        assert!(parse_err("é").contains("\"é\""));
    }

    #[test]
    fn from_label_selector_builds_requirements() {
        let sel = LabelSelector::from_label_selector(&json!({
            "matchLabels": {"app": "web", "tier": "front"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "track", "operator": "NotIn", "values": ["beta"]},
                {"key": "team", "operator": "Exists", "values": null}
            ]
        }))
        .expect("valid");
        assert_eq!(
            sel.to_string(),
            "app=web,!canary,env in (prod,staging),team,tier=front,track notin (beta)"
        );
        let good = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("env", "prod"),
            ("team", "a"),
        ]);
        assert!(sel.matches(&good));
        let mut canary = good.clone();
        canary.insert("canary".into(), "true".into());
        assert!(!sel.matches(&canary));
        let mut beta = good.clone();
        beta.insert("track".into(), "beta".into());
        assert!(!sel.matches(&beta));
    }

    #[test]
    fn from_label_selector_empty_matches_everything() {
        for v in [
            json!({}),
            json!({"matchLabels": {}, "matchExpressions": []}),
            json!({"matchLabels": null}),
        ] {
            let sel = LabelSelector::from_label_selector(&v).expect("valid");
            assert!(sel.is_empty());
            assert!(sel.matches(&labels(&[("any", "thing")])));
        }
    }

    #[test]
    fn from_label_selector_rejects_bad_requirements() {
        let err = |v: Value| {
            LabelSelector::from_label_selector(&v)
                .expect_err("should be rejected")
                .to_string()
        };
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]})),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            "values: Invalid value: [\"x\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})),
            "\"Gt\" is not a valid label selector operator"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a"}]})),
            "\"\" is not a valid label selector operator"
        );
        let both = err(
            json!({"matchExpressions": [{"key": "Bad Key", "operator": "DoesNotExist", "values": ["a b"]}]}),
        );
        assert!(
            both.starts_with("[key: Invalid value: \"Bad Key\": name part must consist of"),
            "{both}"
        );
        assert!(
            both.contains(", values: Invalid value: [\"a b\"]: values set must be empty"),
            "{both}"
        );
        assert!(
            both.contains(", values[0][Bad Key]: Invalid value: \"a b\": a valid label must be"),
            "{both}"
        );
        assert!(both.ends_with(']'), "{both}");
        assert!(
            err(json!({"matchLabels": {"app": "bad value"}}))
                .starts_with("values[0][app]: Invalid value: \"bad value\": a valid label must be")
        );
    }

    #[test]
    fn from_label_selector_rejects_bad_shapes() {
        for (v, msg) in [
            (json!(null), "invalid label selector: expected an object"),
            (
                json!("app=web"),
                "invalid label selector: expected an object",
            ),
            (
                json!({"matchLabels": []}),
                "invalid label selector: matchLabels must be an object",
            ),
            (
                json!({"matchLabels": {"a": 1}}),
                "invalid label selector: matchLabels[a] must be a string",
            ),
            (
                json!({"matchExpressions": {}}),
                "invalid label selector: matchExpressions must be an array",
            ),
            (
                json!({"matchExpressions": [1]}),
                "invalid label selector: matchExpressions[0] must be an object",
            ),
            (
                json!({"matchExpressions": [{"key": 1, "operator": "In"}]}),
                "invalid label selector: matchExpressions[0].key must be a string",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": true}]}),
                "invalid label selector: matchExpressions[0].operator must be a string",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
                "invalid label selector: matchExpressions[0].values must be strings",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}),
                "invalid label selector: matchExpressions[0].values must be an array",
            ),
        ] {
            let err = LabelSelector::from_label_selector(&v).expect_err("rejected");
            assert_eq!(err.to_string(), msg);
        }
    }

    #[test]
    fn matches_json_reads_metadata_labels() {
        let sel = LabelSelector::parse("app=web,!gone").expect("valid");
        assert!(sel.matches_json(Some(&json!({"app": "web"}))));
        assert!(!sel.matches_json(Some(&json!({"app": "web", "gone": ""}))));
        assert!(!sel.matches_json(None));
        assert!(!sel.matches_json(Some(&json!(null))));
        assert!(
            !sel.matches_json(Some(&json!({"app": 1}))),
            "non-string values are ignored"
        );
        let neg = LabelSelector::parse("!app").expect("valid");
        assert!(neg.matches_json(None));
        assert!(LabelSelector::default().matches_json(None));
    }

    #[test]
    fn exact_pairs_for_index_lookups() {
        let sel = LabelSelector::parse("b=2,a in (1),c in (1,2),d!=x,e,f==3").expect("valid");
        assert_eq!(sel.exact_pairs(), vec![("a", "1"), ("b", "2"), ("f", "3")]);
        assert!(LabelSelector::default().exact_pairs().is_empty());
    }

    #[test]
    fn field_selector_basic_terms() {
        let sel = FieldSelector::parse("metadata.name=foo,status.phase!=Failed").expect("valid");
        assert_eq!(
            sel.keys().collect::<Vec<_>>(),
            vec!["metadata.name", "status.phase"]
        );
        let pod = json!({"metadata": {"name": "foo"}, "status": {"phase": "Running"}});
        assert!(sel.matches(&pod));
        let failed = json!({"metadata": {"name": "foo"}, "status": {"phase": "Failed"}});
        assert!(!sel.matches(&failed));
        let other = json!({"metadata": {"name": "bar"}});
        assert!(!sel.matches(&other));
        assert_eq!(
            FieldSelector::parse("metadata.name==foo").expect("valid"),
            FieldSelector::parse("metadata.name=foo").expect("valid")
        );
    }

    #[test]
    fn field_selector_missing_fields_read_as_empty() {
        let obj = json!({"metadata": {"name": "x"}});
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("spec.nodeName!=")
                .expect("valid")
                .matches(&json!({"spec": {"nodeName": "n1"}}))
        );
        assert!(
            !FieldSelector::parse("spec.nodeName=n1")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("spec.nodeName!=n1")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata=")
                .expect("valid")
                .matches(&obj),
            "objects read as empty"
        );
    }

    #[test]
    fn field_selector_stringifies_scalars() {
        let obj = json!({"spec": {"unschedulable": true, "replicas": 3}, "involvedObject": {"uid": "u-1"}});
        assert!(
            FieldSelector::parse("spec.unschedulable=true")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("spec.replicas=3")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("involvedObject.uid=u-1")
                .expect("valid")
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("spec.unschedulable=false")
                .expect("valid")
                .matches(&obj)
        );
    }

    #[test]
    fn field_selector_empty_matches_everything() {
        for s in ["", ",", ",,"] {
            let sel = FieldSelector::parse(s).expect("valid");
            assert!(sel.is_empty());
            assert!(sel.matches(&json!({})));
            assert_eq!(sel.keys().count(), 0);
        }
    }

    #[test]
    fn field_selector_escaping() {
        let sel = FieldSelector::parse(r"metadata.name=a\,b\=c\\d,spec.x=y").expect("valid");
        assert!(sel.matches(&json!({"metadata": {"name": r"a,b=c\d"}, "spec": {"x": "y"}})));
        assert!(!sel.matches(&json!({"metadata": {"name": r"a\,b"}, "spec": {"x": "y"}})));
        assert_eq!(sel.keys().count(), 2);
        // The first `=` splits, so a key cannot contain one; `==` is the operator, not part of the value.
        let sel = FieldSelector::parse("a==b").expect("valid");
        assert!(sel.matches(&json!({"a": "b"})));
    }

    #[test]
    fn field_selector_errors() {
        let err = |s: &str| FieldSelector::parse(s).expect_err("rejected").to_string();
        assert_eq!(
            err("metadata.name"),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            err("a=b,oops"),
            "invalid selector: 'a=b,oops'; can't understand 'oops'"
        );
        assert_eq!(
            err(r"a=b\n"),
            r"invalid field selector: invalid escape sequence: \n"
        );
        assert_eq!(
            err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            err("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err("a!=é\\é"),
            "invalid field selector: invalid escape sequence: \\é"
        );
    }

    #[test]
    fn field_selector_keys_are_verbatim() {
        let sel = FieldSelector::parse("metadata.name = x").expect("valid");
        assert_eq!(sel.keys().collect::<Vec<_>>(), vec!["metadata.name "]);
        assert!(!sel.matches(&json!({"metadata": {"name": " x"}})));
    }

    #[test]
    fn random_inputs_never_panic_and_accepted_ones_roundtrip() {
        const ALPHABET: [&str; 16] = [
            "a", "B", "1", "-", ".", "/", "_", "=", "!", "(", ")", ",", " ", "in", "é", "\\",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut input = String::new();
            for _ in 0..(state % 12) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                input.push_str(ALPHABET[(state % 16) as usize]);
            }
            if let Ok(sel) = LabelSelector::parse(&input) {
                accepted += 1;
                let shown = sel.to_string();
                assert_eq!(
                    LabelSelector::parse(&shown).as_ref(),
                    Ok(&sel),
                    "{input:?} -> {shown:?}"
                );
            }
            let _ = FieldSelector::parse(&input);
        }
        assert!(accepted > 1_000, "only {accepted} inputs were accepted");
    }

    #[test]
    fn go_quote_escapes_like_go() {
        assert_eq!(go_quote("plain"), "\"plain\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("\n\t\u{1}\u{7f}"), "\"\\n\\t\\x01\\x7f\"");
        assert_eq!(go_quote("é\u{a0}"), "\"é\\u00a0\"");
    }
}
