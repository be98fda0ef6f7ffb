//! The string `format`s a CRD schema may name, checked as kube-openapi's `strfmt.Default`
//! registry checks them (`pkg/validation/strfmt/default.go`): `uuid`, `uuid3`, `uuid4`, `uuid5`,
//! `email`, `hostname`, `ipv4`, `ipv6`, `cidr`, `mac`, `date`, `date-time`/`datetime`, `byte`,
//! `duration`, `uri`, `hexcolor`, `rgbcolor`, `bsonobjectid`. Other formats (`password`, `int32`,
//! `isbn`, ...) accept any string, as for an unknown format on the real server.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use regex::Regex;

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn matches(cell: &'static OnceLock<Option<Regex>>, pattern: &str, s: &str) -> bool {
    re(cell, pattern).is_some_and(|r| r.is_match(s))
}

static UUID: OnceLock<Option<Regex>> = OnceLock::new();
static UUID3: OnceLock<Option<Regex>> = OnceLock::new();
static UUID4: OnceLock<Option<Regex>> = OnceLock::new();
static UUID5: OnceLock<Option<Regex>> = OnceLock::new();
static EMAIL: OnceLock<Option<Regex>> = OnceLock::new();
static HOSTNAME: OnceLock<Option<Regex>> = OnceLock::new();
static MAC: OnceLock<Option<Regex>> = OnceLock::new();
static HEXCOLOR: OnceLock<Option<Regex>> = OnceLock::new();
static RGBCOLOR: OnceLock<Option<Regex>> = OnceLock::new();
static BSON: OnceLock<Option<Regex>> = OnceLock::new();
static DURATION: OnceLock<Option<Regex>> = OnceLock::new();
static DATE_TIME: OnceLock<Option<Regex>> = OnceLock::new();
static DATE: OnceLock<Option<Regex>> = OnceLock::new();
static BYTE: OnceLock<Option<Regex>> = OnceLock::new();

/// Whether `s` is valid for `format`; `true` for formats that are not checked.
pub(crate) fn is_valid(format: &str, s: &str) -> bool {
    match format {
        "uuid" => matches(
            &UUID,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            s,
        ),
        "uuid3" => matches(
            &UUID3,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            s,
        ),
        "uuid4" => matches(
            &UUID4,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            s,
        ),
        "uuid5" => matches(
            &UUID5,
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            s,
        ),
        "email" => matches(&EMAIL, r"^[^@\s<>]+@[^@\s<>]+$", s),
        "hostname" => {
            s.len() <= 255
                && matches(
                    &HOSTNAME,
                    r"^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.?$",
                    s,
                )
        }
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => matches(
            &MAC,
            r"(?i)^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$|^([0-9a-f]{4}\.){2}[0-9a-f]{4}$",
            s,
        ),
        "hexcolor" => matches(&HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", s),
        "rgbcolor" => matches(
            &RGBCOLOR,
            r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
            s,
        ),
        "bsonobjectid" => matches(&BSON, r"^[0-9a-fA-F]{24}$", s),
        "duration" => matches(
            &DURATION,
            r"^[-+]?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d|w)\s*)+$|^[-+]?\d+\s*(nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?|ns|us|ms|s|m|h|d|w)$",
            s,
        ),
        "date-time" | "datetime" => matches(
            &DATE_TIME,
            r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$",
            s,
        ),
        "date" => matches(&DATE, r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$", s),
        "byte" => matches(
            &BYTE,
            r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
            s,
        ),
        "uri" => is_uri(s),
        _ => true,
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    if ip.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        ip.parse::<Ipv6Addr>().is_ok() && bits <= 128
    }
}

/// Go's `url.Parse` as strfmt's `IsURI` uses it: anything without spaces or control characters
/// whose scheme, if any, is well formed.
fn is_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    match s.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn formats_accept_and_reject() {
        for (f, ok, bad) in [
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "nope"),
            ("email", "a@b.c", "a.b"),
            ("hostname", "a.example", "-bad-"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "1::2::3"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:11:22:33:44:55", "00:11"),
            ("date", "2024-02-29", "2024-13-01"),
            ("date-time", "2024-01-01T00:00:00Z", "yesterday"),
            ("byte", "aGk=", "a"),
            ("duration", "1h30m", "soon"),
            ("uri", "https://x", "has space"),
        ] {
            assert!(is_valid(f, ok), "{f} {ok}");
            assert!(!is_valid(f, bad), "{f} {bad}");
        }
        assert!(is_valid("password", "anything"));
    }
}
