//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`), exactly.
//!
//! The API server parses every quantity field (`resources.limits.cpu`, PVC `storage`,
//! ResourceQuota `hard`, ...) and stores the string `Quantity.String()` produces, so `"0.5"`
//! comes back as `"500m"`, `"1024Mi"` as `"1Gi"` and the JSON number `1e9` as `"1G"`. A client
//! that compares what it sent with what it reads back must compare the way the server does; this
//! module is that comparison, with exact decimal arithmetic (no floating point):
//!
//! - [`parse`] follows Go's `ParseQuantity`: the same grammar (`<sign><digits>.<digits><suffix>`,
//!   decimal SI `n u m "" k M G T P E`, binary SI `Ki Mi Gi Ti Pi Ei`, exponents `e3`/`E-3`), the
//!   same quirks (`"1."`, `".5"`, and even a bare `"k"` parse), rounding of sub-nano values up
//!   (away from zero) to `1n`, and the silent 2^63-1 cap of binary quantities.
//! - [`Quantity`]'s `Display` is Go's `String()`: the canonical form (`CanonicalizeBytes`) in the
//!   format the input was written in (binary stays binary when the value is a whole number of at
//!   least 1024, exponent form stays exponent form), or the input verbatim when Go's parser keeps
//!   it (`"1e9"` and `"+1k"` are stored as written, `"1000M"` becomes `"1G"`).
//! - [`canonical`], [`canonical_value`] and [`semantic_eq`] are the helpers the engine and the
//!   sandbox use on JSON values.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Go's `splitREString`, quoted by its format error.
const SPLIT_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The largest magnitude a binary-SI quantity keeps (Go's `maxAllowed`, 2^63-1).
const MAX_ALLOWED: &[u8] = b"9223372036854775807";

/// Why a string is not a quantity; each variant names the input and prints Go's own reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string does not have the shape `<number><suffix>` (Go's `ErrFormatWrong`).
    #[error(
        "invalid quantity {input:?}: quantities must match the regular expression '{SPLIT_RE}'"
    )]
    FormatWrong {
        /// The rejected input.
        input: String,
    },
    /// The numeric part has no digits where Go needs some (Go's `ErrNumeric`).
    #[error("invalid quantity {input:?}: unable to parse numeric part of quantity")]
    Numeric {
        /// The rejected input.
        input: String,
    },
    /// The suffix is none of the known ones (Go's `ErrSuffix`).
    #[error(
        "invalid quantity {input:?}: unable to parse quantity's suffix (use one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3)"
    )]
    Suffix {
        /// The rejected input.
        input: String,
    },
}

impl QuantityError {
    /// The message kube-apiserver prints for this error, without the input (Go's error text).
    pub fn go_message(&self) -> String {
        match self {
            QuantityError::FormatWrong { .. } => {
                format!("quantities must match the regular expression '{SPLIT_RE}'")
            }
            QuantityError::Numeric { .. } => "unable to parse numeric part of quantity".into(),
            QuantityError::Suffix { .. } => "unable to parse quantity's suffix".into(),
        }
    }
}

/// How a quantity is written back (Go's `Format`): the kind of suffix it was parsed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`, `1E-3`.
    DecimalExponent,
    /// `12Mi` (powers of 1024).
    BinarySI,
    /// `12M`, `500m`, `7` (powers of 1000).
    DecimalSI,
}

/// A parsed quantity: an exact decimal value and the format it is written back in.
///
/// Equality and ordering are by value only (`"0.5" == "500m"`, `"1Gi" == "1024Mi"`), as
/// apimachinery's `Quantity.Cmp`; [`Quantity::format`] and the text are not compared.
#[derive(Debug, Clone)]
pub struct Quantity {
    negative: bool,
    /// Magnitude's decimal digits (ASCII), no leading or trailing zeros; empty for zero.
    digits: Vec<u8>,
    /// Value = digits × 10^exponent (0 for zero).
    exponent: i64,
    format: Format,
    /// The input, when Go's parser keeps it as the string form (its `Quantity.s`).
    verbatim: Option<String>,
}

impl Quantity {
    #[cfg(test)]
    /// The format the quantity is written back in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// True for any spelling of zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// True when the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative && !self.is_zero()
    }

    /// The canonical form computed from the value (Go's `CanonicalizeBytes`), ignoring a
    /// verbatim input Go would keep: `"1e9"` gives `"1e9"`, `"+1k"` gives `"1k"`.
    pub fn canonical_form(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let sign = if self.negative { "-" } else { "" };
        let mut format = self.format;
        if format == Format::BinarySI {
            let below_1024 = cmp_magnitude(&self.digits, self.exponent, b"1024", 0).is_lt();
            if below_1024 || self.exponent < 0 {
                format = Format::DecimalSI;
            } else if let Some(mut value) = self.magnitude_u64() {
                let mut power = 0usize;
                while value >= 1024 && value % 1024 == 0 {
                    value /= 1024;
                    power += 1;
                }
                const BINARY: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
                if let Some(suffix) = BINARY.get(power) {
                    return format!("{sign}{value}{suffix}");
                }
                format = Format::DecimalSI;
            } else {
                format = Format::DecimalSI;
            }
        }
        // Decimal: the exponent rounded down to a multiple of 3, the mantissa padded with zeros.
        let pad = self.exponent.rem_euclid(3);
        let exponent = self.exponent - pad;
        let mut number = String::with_capacity(self.digits.len() + 3);
        number.extend(self.digits.iter().map(|d| *d as char));
        number.extend(std::iter::repeat_n('0', pad as usize));
        let suffix = match (format, exponent) {
            (Format::DecimalExponent, 0) => String::new(),
            (Format::DecimalSI, -9) => "n".into(),
            (Format::DecimalSI, -6) => "u".into(),
            (Format::DecimalSI, -3) => "m".into(),
            (Format::DecimalSI, 0) => String::new(),
            (Format::DecimalSI, 3) => "k".into(),
            (Format::DecimalSI, 6) => "M".into(),
            (Format::DecimalSI, 9) => "G".into(),
            (Format::DecimalSI, 12) => "T".into(),
            (Format::DecimalSI, 15) => "P".into(),
            (Format::DecimalSI, 18) => "E".into(),
            // No SI suffix beyond E: Go falls back to exponent notation.
            (_, e) => format!("e{e}"),
        };
        format!("{sign}{number}{suffix}")
    }

    /// The magnitude as an integer when it is a whole number that fits in a u64.
    fn magnitude_u64(&self) -> Option<u64> {
        if self.exponent < 0 || self.digits.len() as i64 + self.exponent > 20 {
            return None;
        }
        let mut value: u64 = 0;
        for d in &self.digits {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        for _ in 0..self.exponent {
            value = value.checked_mul(10)?;
        }
        Some(value)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_negative(), other.is_negative()) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (negative, _) => {
                let magnitude =
                    cmp_magnitude(&self.digits, self.exponent, &other.digits, other.exponent);
                if negative {
                    magnitude.reverse()
                } else {
                    magnitude
                }
            }
        }
    }
}

impl fmt::Display for Quantity {
    /// Go's `Quantity.String()`: what the API server stores for this input.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.verbatim {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.canonical_form()),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

/// Compares two non-negative decimals `a × 10^ea` and `b × 10^eb` (digits without leading or
/// trailing zeros; empty is zero).
fn cmp_magnitude(a: &[u8], ea: i64, b: &[u8], eb: i64) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    // Position of the most significant digit decides first.
    let top_a = a.len() as i64 + ea;
    let top_b = b.len() as i64 + eb;
    if top_a != top_b {
        return top_a.cmp(&top_b);
    }
    // Same magnitude: compare digit by digit, the shorter one padded with zeros.
    let n = a.len().max(b.len());
    for i in 0..n {
        let da = a.get(i).copied().unwrap_or(b'0');
        let db = b.get(i).copied().unwrap_or(b'0');
        if da != db {
            return da.cmp(&db);
        }
    }
    Ordering::Equal
}

/// The pieces of a quantity string, as Go's `parseQuantityString` splits them.
struct Pieces<'a> {
    positive: bool,
    /// The numeric part as written, sign included (Go's `value`).
    value: &'a str,
    /// Integer digits without leading zeros, `"0"` when there are none.
    num: &'a str,
    /// Fraction digits as written.
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`, byte for byte.
fn split(s: &str) -> Result<Pieces<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    // Leading zeros; an input of only zeros (or only a sign) is zero.
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Pieces {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[start..pos];
    if pos >= end {
        return Ok(Pieces {
            positive,
            value: s,
            num,
            denom: "",
            suffix: "",
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[start..pos];
        if pos >= end {
            return Ok(Pieces {
                positive,
                value: s,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong { input: s.into() });
    }
    Ok(Pieces {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Go's suffix table: `(base, exponent, format)`.
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            // strconv.ParseInt: optional sign, then digits; the exponent is then an int32.
            let exponent: i64 = rest.parse().ok()?;
            i32::try_from(exponent).ok()?;
            Some((10, exponent, Format::DecimalExponent))
        }
    }
}

/// Parses `s` as Go's `resource.ParseQuantity` does (no surrounding whitespace allowed; see
/// [`canonical_value`] for the JSON form, which trims).
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong { input: s.into() });
    }
    if s == "0" {
        return Ok(Quantity {
            negative: false,
            digits: Vec::new(),
            exponent: 0,
            format: Format::DecimalSI,
            verbatim: Some("0".into()),
        });
    }
    let pieces = split(s)?;
    let (base, exponent, mut format) =
        interpret(pieces.suffix).ok_or_else(|| QuantityError::Suffix { input: s.into() })?;

    // Go's int64 fast path decides whether the input is kept verbatim, and the slow path is the
    // only one that insists on digits.
    let shifted = format!("{}{}", pieces.num, pieces.denom);
    let fast = match format {
        Format::DecimalSI | Format::DecimalExponent => {
            let scale = exponent - pieces.denom.len() as i64;
            (shifted.len() <= 18 && scale >= -9)
                .then(|| scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'))
        }
        Format::BinarySI => {
            let precision = 14 - pieces.num.len() as i64 - exponent * 3 / 10;
            let fits = pieces.denom.is_empty()
                && precision >= 0
                && pieces
                    .num
                    .parse::<i64>()
                    .ok()
                    .and_then(|v| v.checked_mul(1i64 << exponent).map(|_| v))
                    .is_some();
            fits.then(|| pieces.num.parse::<i64>().is_ok_and(|v| v & 7 != 0))
        }
    };
    if fast.is_none() && !pieces.value.bytes().any(|c| c.is_ascii_digit()) {
        return Err(QuantityError::Numeric { input: s.into() });
    }

    // The exact value: digits × 10^exp10, times 2^exponent for binary suffixes.
    let mut digits: Vec<u8> = shifted.bytes().collect();
    let mut exp10 = -(pieces.denom.len() as i64);
    if base == 10 {
        exp10 += exponent;
    } else {
        for _ in 0..exponent / 10 {
            multiply_small(&mut digits, 1024);
        }
    }
    normalize(&mut digits, &mut exp10);

    // Round a finer-than-nano magnitude up (away from zero) to the next nano.
    if !digits.is_empty() && exp10 < -9 {
        let keep = digits.len() as i64 + exp10 + 9;
        if keep <= 0 {
            digits = vec![b'1'];
        } else {
            digits.truncate(keep as usize);
            // Every cut digit was not all zeros (digits had no trailing zeros): round up.
            increment(&mut digits);
        }
        exp10 = -9;
        normalize(&mut digits, &mut exp10);
    }

    if format == Format::BinarySI {
        if cmp_magnitude(&digits, exp10, MAX_ALLOWED, 0).is_gt() {
            digits = MAX_ALLOWED.to_vec();
            exp10 = 0;
        }
        if !digits.is_empty() && cmp_magnitude(&digits, exp10, b"1", 0).is_lt() {
            format = Format::DecimalSI;
        }
    }

    Ok(Quantity {
        negative: !pieces.positive && !digits.is_empty(),
        digits,
        exponent: exp10,
        format,
        verbatim: (fast == Some(true)).then(|| s.to_string()),
    })
}

/// Strips leading zeros and moves trailing zeros into the exponent; zero becomes empty, 10^0.
fn normalize(digits: &mut Vec<u8>, exponent: &mut i64) {
    let lead = digits.iter().take_while(|d| **d == b'0').count();
    digits.drain(..lead);
    while digits.last() == Some(&b'0') {
        digits.pop();
        *exponent += 1;
    }
    if digits.is_empty() {
        *exponent = 0;
    }
}

/// `digits *= factor` in decimal.
fn multiply_small(digits: &mut Vec<u8>, factor: u64) {
    let mut carry = 0u64;
    for d in digits.iter_mut().rev() {
        let v = u64::from(*d - b'0') * factor + carry;
        *d = b'0' + (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, b'0' + (carry % 10) as u8);
        carry /= 10;
    }
}

/// `digits += 1` in decimal.
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

/// What the API server stores for the quantity `s` (Go's `ParseQuantity(s).String()`).
pub fn canonical(s: &str) -> Result<String, QuantityError> {
    parse(s).map(|q| q.to_string())
}

/// Parses a JSON value the way a quantity field decodes it (Go's `Quantity.UnmarshalJSON`): a
/// string (surrounding whitespace trimmed) or a number as the client serializes it.
pub fn parse_value(v: &serde_json::Value) -> Option<Quantity> {
    match v {
        serde_json::Value::String(s) => parse(s.trim()).ok(),
        serde_json::Value::Number(n) => parse(&n.to_string()).ok(),
        _ => None,
    }
}

#[cfg(test)]
/// The string the API server stores for a JSON quantity value, or `None` when `v` is not a
/// quantity (not a string or number, or not in the grammar).
pub fn canonical_value(v: &serde_json::Value) -> Option<String> {
    parse_value(v).map(|q| q.to_string())
}

/// True when `a` and `b` are the same JSON value, or both are quantities of the same value
/// (`"0.5"` and `"500m"`, `"1Gi"` and `1073741824`).
pub fn semantic_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    if a == b {
        return true;
    }
    match (parse_value(a), parse_value(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(s: &str) -> String {
        canonical(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Builds the expected value `m × 10^e` for comparisons.
    fn dec(m: i64, e: i64) -> Quantity {
        parse(&format!("{m}e{e}")).unwrap()
    }

    #[test]
    fn every_suffix_canonical() {
        for (input, want) in [
            ("0", "0"),
            ("1", "1"),
            ("5n", "5n"),
            ("4u", "4u"),
            ("3m", "3m"),
            ("9", "9"),
            ("8k", "8k"),
            ("7M", "7M"),
            ("6G", "6G"),
            ("5T", "5T"),
            ("2P", "2P"),
            ("1E", "1E"),
            ("1Ki", "1Ki"),
            ("8Ki", "8Ki"),
            ("7Mi", "7Mi"),
            ("6Gi", "6Gi"),
            ("5Ti", "5Ti"),
            ("4Pi", "4Pi"),
            ("3Ei", "3Ei"),
        ] {
            assert_eq!(c(input), want, "{input}");
        }
    }

    #[test]
    fn server_normalizations_from_the_issue() {
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("0.5Gi"), "512Mi");
        assert_eq!(c("1000M"), "1G");
        assert!(semantic_eq(&json!(1e9), &json!("1G")));
        assert_eq!(canonical_value(&json!(1e9)).as_deref(), Some("1G"));
        assert_eq!(canonical_value(&json!(0.5)).as_deref(), Some("500m"));
        assert_eq!(canonical_value(&json!(2)).as_deref(), Some("2"));
        // Kept verbatim by Go's parser (as the fidelity capture shows for "1e9").
        assert_eq!(c("1e9"), "1e9");
        assert_eq!(c("100m"), "100m");
    }

    /// Go's `TestQuantityParse` table: input, value, format.
    #[test]
    fn go_parse_table() {
        use Format::*;
        let table: &[(&str, Quantity, Format)] = &[
            ("0", dec(0, 0), DecimalSI),
            ("0n", dec(0, 0), DecimalSI),
            ("0u", dec(0, 0), DecimalSI),
            ("0m", dec(0, 0), DecimalSI),
            ("0Ki", dec(0, 0), BinarySI),
            ("0k", dec(0, 0), DecimalSI),
            ("0Mi", dec(0, 0), BinarySI),
            ("0M", dec(0, 0), DecimalSI),
            ("0Gi", dec(0, 0), BinarySI),
            ("0G", dec(0, 0), DecimalSI),
            ("0Ti", dec(0, 0), BinarySI),
            ("0T", dec(0, 0), DecimalSI),
            ("1", dec(1, 0), DecimalSI),
            ("1Ki", dec(1024, 0), BinarySI),
            ("8Ki", dec(8 * 1024, 0), BinarySI),
            ("7Mi", dec(7 << 20, 0), BinarySI),
            ("6Gi", dec(6 << 30, 0), BinarySI),
            ("5Ti", dec(5 << 40, 0), BinarySI),
            ("4Pi", dec(4 << 50, 0), BinarySI),
            ("3Ei", dec(3 << 60, 0), BinarySI),
            ("10Ti", dec(10 << 40, 0), BinarySI),
            ("100Ti", dec(100 << 40, 0), BinarySI),
            ("5n", dec(5, -9), DecimalSI),
            ("4u", dec(4, -6), DecimalSI),
            ("3m", dec(3, -3), DecimalSI),
            ("9", dec(9, 0), DecimalSI),
            ("8k", dec(8, 3), DecimalSI),
            ("50k", dec(5, 4), DecimalSI),
            ("7M", dec(7, 6), DecimalSI),
            ("6G", dec(6, 9), DecimalSI),
            ("5T", dec(5, 12), DecimalSI),
            ("40T", dec(4, 13), DecimalSI),
            ("300T", dec(3, 14), DecimalSI),
            ("2P", dec(2, 15), DecimalSI),
            ("1E", dec(1, 18), DecimalSI),
            ("1E-3", dec(1, -3), DecimalExponent),
            ("1e3", dec(1, 3), DecimalExponent),
            ("1E6", dec(1, 6), DecimalExponent),
            ("1e9", dec(1, 9), DecimalExponent),
            ("1E12", dec(1, 12), DecimalExponent),
            ("1e15", dec(1, 15), DecimalExponent),
            ("1E18", dec(1, 18), DecimalExponent),
            ("1e14", dec(1, 14), DecimalExponent),
            ("1e13", dec(1, 13), DecimalExponent),
            ("100.035k", dec(100035, 0), DecimalSI),
            ("0.001", dec(1, -3), DecimalSI),
            ("0.0005k", dec(5, -1), DecimalSI),
            ("0.005", dec(5, -3), DecimalSI),
            ("0.05", dec(5, -2), DecimalSI),
            ("0.5", dec(5, -1), DecimalSI),
            ("0.00050k", dec(5, -1), DecimalSI),
            ("0.00500", dec(5, -3), DecimalSI),
            ("0.05000", dec(5, -2), DecimalSI),
            ("0.50000", dec(5, -1), DecimalSI),
            ("0.5e0", dec(5, -1), DecimalExponent),
            ("0.5e-1", dec(5, -2), DecimalExponent),
            ("0.5e-2", dec(5, -3), DecimalExponent),
            ("10.035M", dec(10035, 3), DecimalSI),
            ("1.2e3", dec(12, 2), DecimalExponent),
            ("1.3E+6", dec(13, 5), DecimalExponent),
            ("1.40e9", dec(14, 8), DecimalExponent),
            ("1.53E12", dec(153, 10), DecimalExponent),
            ("1.6e15", dec(16, 14), DecimalExponent),
            ("1.7E18", dec(17, 17), DecimalExponent),
            ("9.01", dec(901, -2), DecimalSI),
            ("8.1k", dec(81, 2), DecimalSI),
            ("7.123456M", dec(7123456, 0), DecimalSI),
            ("6.987654321G", dec(6987654321, 0), DecimalSI),
            ("5.444T", dec(5444, 9), DecimalSI),
            ("40.1T", dec(401, 11), DecimalSI),
            ("300.2T", dec(3002, 11), DecimalSI),
            ("2.5P", dec(25, 14), DecimalSI),
            ("1.01E", dec(101, 16), DecimalSI),
            // Things that saturate or round.
            ("3.001n", dec(4, -9), DecimalSI),
            ("1.1E-9", dec(2, -9), DecimalExponent),
            ("0.0000000001", dec(1, -9), DecimalSI),
            ("0.0000000005", dec(1, -9), DecimalSI),
            ("0.00000000050", dec(1, -9), DecimalSI),
            ("0.5e-9", dec(1, -9), DecimalExponent),
            ("0.9n", dec(1, -9), DecimalSI),
            ("0.00000012345", dec(124, -9), DecimalSI),
            ("0.00000012354", dec(124, -9), DecimalSI),
            ("9Ei", dec(i64::MAX, 0), BinarySI),
            ("9223372036854775807Ki", dec(i64::MAX, 0), BinarySI),
            ("12E", dec(12, 18), DecimalSI),
            // Fractional binary.
            ("100.035Ki", dec(10243584, -2), BinarySI),
            ("0.5Mi", dec(512 * 1024, 0), BinarySI),
            ("0.05Gi", dec(536870912, -1), BinarySI),
            ("0.025Ti", dec(274877906944, -1), BinarySI),
            // "Things written by trolls".
            ("0.000000000001Ki", dec(2, -9), DecimalSI),
            (".001", dec(1, -3), DecimalSI),
            (".0001k", dec(100, -3), DecimalSI),
            ("1.", dec(1, 0), DecimalSI),
            ("1.G", dec(1, 9), DecimalSI),
        ];
        for (input, want, format) in table {
            let got = parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(&got, want, "{input}: value {got}");
            assert_eq!(got.format(), *format, "{input}: format");
            // Go also checks every entry negated and with an explicit plus.
            let neg = parse(&format!("-{input}")).unwrap();
            assert_eq!(neg.format(), *format, "-{input}: format");
            if !want.is_zero() {
                assert!(neg.is_negative(), "-{input}");
                assert_eq!(neg.cmp(want), Ordering::Less, "-{input}");
                assert_eq!(neg.canonical_form(), format!("-{}", got.canonical_form()));
            } else {
                assert_eq!(neg, *want, "-{input}");
            }
            let plus = parse(&format!("+{input}")).unwrap();
            assert_eq!(&plus, want, "+{input}");
            assert_eq!(plus.format(), *format, "+{input}: format");
        }
    }

    #[test]
    fn go_invalid_inputs() {
        for input in [
            "",
            "1.1.M",
            "1+1.0M",
            "0.1mi",
            "0.1am",
            "aoeu",
            ".5i",
            "1i",
            "-3.01i",
            "-3.01e-",
            " 1",
            "1 ",
            "1Kii",
            "1e",
            "1e+",
            "1ki",
            "1.5.5",
            "1e1.5",
            "Non-Numeric",
        ] {
            let err = parse(input).expect_err(input);
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
        assert!(matches!(parse("1i"), Err(QuantityError::Suffix { .. })));
        assert!(matches!(
            parse("aoeu"),
            Err(QuantityError::FormatWrong { .. })
        ));
        // Go's slow path needs digits: an exponent below nano with no number.
        assert!(matches!(parse("e-10"), Err(QuantityError::Numeric { .. })));
        assert_eq!(
            QuantityError::Suffix { input: "x".into() }.go_message(),
            "unable to parse quantity's suffix"
        );
    }

    /// Go's quirks kept: no digits at all still parse as zero on the fast path.
    #[test]
    fn go_quirks() {
        assert_eq!(c("."), "0");
        assert_eq!(c("-."), "0");
        assert_eq!(c("+"), "0");
        assert_eq!(c("k"), "0");
        assert_eq!(c("-0"), "0");
        assert_eq!(c("000"), "0");
        assert_eq!(c("0.0"), "0");
        assert_eq!(c("-0Ki"), "0");
        // Go keeps the input verbatim when its fast path finds it canonical, sign included.
        assert_eq!(c("+1k"), "+1k");
        assert_eq!(c("1E3"), "1E3");
        assert_eq!(c("+5Ki"), "+5Ki");
        assert_eq!(parse("+1k").unwrap().canonical_form(), "1k");
    }

    /// Go's `TestQuantityString`: canonical outputs and alternate spellings of them.
    #[test]
    fn go_string_table() {
        for (canon, alternate) in [
            ("1Gi", "1024Mi"),
            ("300Mi", "307200Ki"),
            ("6Ki", ""),
            ("1001Gi", "1025024Mi"),
            ("1Ti", "1024Gi"),
            ("1G", "1000M"),
            ("1G", "0.001T"),
            ("1m", "1000u"),
            ("80m", ""),
            ("1080m", "1.08"),
            ("1080m", "1080000000n"),
            ("300M", ""),
            ("1T", ""),
            ("1E", ""),
            ("1e21", "1000E"),
            ("5e21", "5000E"),
            ("1e24", "1000000E"),
            ("1234567M", ""),
            ("3k", ""),
            ("0", ""),
            ("1e9", ".001e12"),
            ("1e-3", "0.001e0"),
            ("1e-9", "1000e-12"),
            ("80e-3", ""),
            ("300e6", ""),
            ("1e12", ""),
            ("1e3", ""),
            ("3e3", ""),
            ("0", "00"),
            ("1n", ""),
            ("80n", ""),
            ("1080n", ""),
            ("1u", ""),
            ("80u", ""),
            ("1080u", ""),
        ] {
            // The canonical form parses back to itself, kept verbatim.
            let q = parse(canon).unwrap();
            assert_eq!(q.to_string(), canon);
            assert_eq!(q.canonical_form(), canon, "{canon}");
            if !alternate.is_empty() {
                assert_eq!(c(alternate), canon, "{alternate}");
                assert_eq!(parse(alternate).unwrap(), q);
            }
            if canon != "0" {
                assert_eq!(c(&format!("-{canon}")), format!("-{canon}"));
            }
        }
        // BinarySI values that are not whole, or below 1024, print as decimal.
        assert_eq!(c("1.5Ki"), "1536");
        assert_eq!(c("1.5Gi"), "1536Mi");
        assert_eq!(c("0.5Ki"), "512");
        assert_eq!(c("1025Ki"), "1025Ki");
        assert_eq!(c("1023.5Ki"), "1048064");
        assert_eq!(c("0.3Ki"), "307200m");
        assert_eq!(c("-1Ki"), "-1Ki");
    }

    /// Go's `TestQuantityParseEmit`, positive and negative.
    #[test]
    fn go_parse_emit() {
        for (input, want) in [
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
        ] {
            assert_eq!(c(input), want, "{input}");
            assert_eq!(c(&format!("-{input}")), format!("-{want}"), "-{input}");
        }
    }

    #[test]
    fn decimal_and_exponent_forms() {
        assert_eq!(c("1.5"), "1500m");
        assert_eq!(c("1500m"), "1500m");
        assert_eq!(c("1.5k"), "1500");
        assert_eq!(c("0.1"), "100m");
        assert_eq!(c("2.000"), "2");
        assert_eq!(c("10e3"), "10e3");
        assert_eq!(c("10000e3"), "10e6");
        assert_eq!(c("1.5e3"), "1500");
        assert_eq!(c("1.5e-3"), "1500e-6");
        assert_eq!(c("1e+3"), "1e+3");
        assert_eq!(c("0.1e+3"), "100");
        assert_eq!(c("1e-10"), "1e-9");
        assert_eq!(
            c("123456789012345678901234567890"),
            "123456789012345678901234567890"
        );
        assert_eq!(
            c("1234567890123456789012345678900"),
            "1234567890123456789012345678900"
        );
        assert_eq!(c("12345678901234567890000k"), "12345678901234567890M");
        assert_eq!(c("0.1234567891"), "123456790n");
        assert_eq!(c("-0.1234567891"), "-123456790n");
        assert_eq!(c("999999999.9999999999"), "1G");
        assert_eq!(c("1E-3"), "1E-3");
        // JSON numbers as serde_json writes them.
        assert_eq!(canonical_value(&json!(1.5)).as_deref(), Some("1500m"));
        assert_eq!(canonical_value(&json!(-3)).as_deref(), Some("-3"));
        assert_eq!(canonical_value(&json!(" 1 ")).as_deref(), Some("1"));
        assert_eq!(canonical_value(&json!(true)), None);
        assert_eq!(canonical_value(&json!("abc")), None);
        assert_eq!(canonical_value(&json!(null)), None);
    }

    #[test]
    fn binary_cap_and_round_trips() {
        assert_eq!(c("9Ei"), "9223372036854775807");
        assert_eq!(c("8Ei"), "9223372036854775807");
        assert_eq!(c("-9Ei"), "-9223372036854775807");
        assert_eq!(c("7Ei"), "7Ei");
        assert_eq!(c("1048576Ki"), "1Gi");
        // Every canonical output is a fixed point.
        for input in [
            "0.5",
            "1024Mi",
            "0.5Gi",
            "1e9",
            "1.5Gi",
            "100.035Ki",
            "3.001n",
            "1.7E18",
            "12E",
            "9Ei",
            "0.000000000001Ki",
            "-1.5",
            "-100.035Ki",
            "1000E",
            "7.123456M",
            "1e-10",
            "0.3Ki",
            "1023.5Ki",
            "+1.5k",
        ] {
            let once = c(input);
            assert_eq!(c(&once), once, "{input} -> {once}");
            assert_eq!(parse(&once).unwrap(), parse(input).unwrap(), "{input}");
        }
    }

    #[test]
    fn ordering_and_semantic_eq() {
        let q = |s: &str| parse(s).unwrap();
        assert!(q("100m") > q("50m"));
        assert!(q("10000T") > q("100Gi"));
        assert!(q("-1") < q("0"));
        assert!(q("-2") < q("-1"));
        assert!(q("1Ki") > q("1k"));
        assert_eq!(q("0"), q("-0m"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert!(semantic_eq(&json!("0.5"), &json!("500m")));
        assert!(semantic_eq(&json!("1024Mi"), &json!("1Gi")));
        assert!(semantic_eq(&json!(1), &json!("1")));
        assert!(!semantic_eq(&json!("1"), &json!("2")));
        assert!(!semantic_eq(&json!("x"), &json!("y")));
        assert!(semantic_eq(&json!("x"), &json!("x")));
        assert!(semantic_eq(&json!({"a": 1}), &json!({"a": 1})));
        assert!(!semantic_eq(&json!({"a": 1}), &json!("1")));
        assert_eq!("0.5".parse::<Quantity>().unwrap().to_string(), "500m");
    }
}
