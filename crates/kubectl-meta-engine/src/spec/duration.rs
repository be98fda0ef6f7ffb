//! Go duration strings (`10s`, `1m30s`, `1.5h`, `500ms`) as used by Metacontroller's
//! `webhook.timeout`, parsed like Go's `time.ParseDuration` except that negative durations are
//! rejected (a timeout cannot be negative).

use std::time::Duration;

/// Why a duration string was rejected; each message shows the input and valid examples.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string is empty.
    #[error("empty duration; write a number with a unit, e.g. 10s, 500ms or 1m30s")]
    Empty,
    /// The string starts with `-`.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
    /// A number is not followed by a unit (`10`).
    #[error(
        "invalid duration {0:?}: missing unit; valid units are ns, us (or µs), ms, s, m, h (e.g. 10s)"
    )]
    MissingUnit(String),
    /// A unit is not one of Go's.
    #[error(
        "invalid duration {input:?}: unknown unit {unit:?}; valid units are ns, us (or µs), ms, s, m, h"
    )]
    UnknownUnit {
        /// The whole string.
        input: String,
        /// The unit found.
        unit: String,
    },
    /// Something other than `<number><unit>` sequences (`ten seconds`, `1.2.3s`).
    #[error(
        "invalid duration {0:?}: expected a sequence of numbers with units, e.g. 10s, 1.5h or 1m30s"
    )]
    Invalid(String),
    /// Longer than Go's maximum (about 292 years).
    #[error("invalid duration {0:?}: too long")]
    Overflow(String),
}

/// Go's maximum duration in nanoseconds (`math.MaxInt64`).
const MAX_NANOS: u128 = i64::MAX as u128;

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parse a Go duration: an optional `+`, then one or more `<number><unit>` pairs where the
/// number may have a fraction (`1.5h`, `.5s`) and the unit is `ns`, `us`/`µs`, `ms`, `s`, `m`
/// or `h`. A lone `0` is zero. Fractions below a nanosecond are truncated, as in Go.
pub fn parse_go_duration(s: &str) -> Result<Duration, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let invalid = || DurationError::Invalid(s.to_string());
    if s.starts_with('-') {
        return Err(DurationError::Negative(s.to_string()));
    }
    let rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_digits, after_int) = rest.split_at(int_len);
        let (frac_digits, after_num) = match after_int.strip_prefix('.') {
            Some(f) => {
                let len = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
                f.split_at(len)
            }
            None => ("", after_int),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(invalid());
        }
        let unit_len = after_num
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after_num.len());
        let (unit, next) = after_num.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(s.to_string()));
        }
        let Some(scale) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                input: s.to_string(),
                unit: unit.to_string(),
            });
        };
        let overflow = || DurationError::Overflow(s.to_string());
        let int: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| overflow())?
        };
        let mut nanos = int.checked_mul(scale).ok_or_else(overflow)?;
        // Fraction: only the digits that can still matter at nanosecond precision.
        let mut frac_scale = scale;
        for d in frac_digits.bytes() {
            frac_scale /= 10;
            if frac_scale == 0 {
                break;
            }
            nanos += u128::from(d - b'0') * frac_scale;
        }
        total = total.checked_add(nanos).ok_or_else(overflow)?;
        if total > MAX_NANOS {
            return Err(overflow());
        }
        rest = next;
    }
    let secs =
        u64::try_from(total / 1_000_000_000).map_err(|_| DurationError::Overflow(s.to_string()))?;
    // The remainder of a division by 1e9 always fits in u32.
    let sub = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Duration {
        parse_go_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_units_fractions_and_sequences() {
        assert_eq!(ok("10s"), Duration::from_secs(10));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("250us"), Duration::from_micros(250));
        assert_eq!(ok("250µs"), Duration::from_micros(250));
        assert_eq!(ok("250μs"), Duration::from_micros(250));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1h2m3s4ms"), Duration::from_millis(3_723_004));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("1.000000001s"), Duration::new(1, 1));
        // Sub-nanosecond digits are truncated, as in Go.
        assert_eq!(ok("1.0000000019s"), Duration::new(1, 1));
        assert_eq!(ok("+3s"), Duration::from_secs(3));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("2562047h"), Duration::from_secs(2_562_047 * 3600));
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative("-5s".into()))
        );
        assert_eq!(
            parse_go_duration("10"),
            Err(DurationError::MissingUnit("10".into()))
        );
        assert_eq!(
            parse_go_duration("1m30"),
            Err(DurationError::MissingUnit("1m30".into()))
        );
        assert_eq!(
            parse_go_duration("10sec"),
            Err(DurationError::UnknownUnit {
                input: "10sec".into(),
                unit: "sec".into()
            })
        );
        assert_eq!(
            parse_go_duration("10 s"),
            Err(DurationError::UnknownUnit {
                input: "10 s".into(),
                unit: " s".into()
            })
        );
        for bad in ["s", ".s", "+", "ten", "1.2.3s", ".", "+-1s"] {
            assert!(
                matches!(
                    parse_go_duration(bad),
                    Err(DurationError::Invalid(_) | DurationError::MissingUnit(_))
                ),
                "{bad}: {:?}",
                parse_go_duration(bad)
            );
        }
        assert_eq!(
            parse_go_duration("2562048h"),
            Err(DurationError::Overflow("2562048h".into()))
        );
        assert_eq!(
            parse_go_duration("99999999999999999999999999999999999999999s"),
            Err(DurationError::Overflow(
                "99999999999999999999999999999999999999999s".into()
            ))
        );
    }

    #[test]
    fn messages_show_input_and_examples() {
        let e = parse_go_duration("10").unwrap_err().to_string();
        assert!(
            e.contains("\"10\"") && e.contains("missing unit") && e.contains("10s"),
            "{e}"
        );
        let e = parse_go_duration("3 days").unwrap_err().to_string();
        assert!(e.contains("unknown unit \" days\""), "{e}");
    }
}
