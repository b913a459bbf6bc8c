//! Go-style durations (`"1s"`, `"500ms"`, `"1m30s"`), as Volcano and Kubernetes write them.

use std::time::Duration;

/// A duration string that is not a valid Go-style duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct ParseDurationError {
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Units Go's `time.ParseDuration` accepts, with their length in nanoseconds. `ms` comes before
/// `m` only for readability: units are matched whole, never by prefix.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3_600 * 1_000_000_000),
];

/// Parses a duration the way Go's `time.ParseDuration` does: one or more `<number><unit>`
/// pairs such as `"1h30m"` or `"1.5s"`, units `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`; a bare
/// `"0"` is zero. Negative durations are rejected, since no Caldera setting can use one.
///
/// ```
/// use std::time::Duration;
/// use caldera_config::parse_duration;
///
/// assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
/// assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
/// assert!(parse_duration("5").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Duration, ParseDurationError> {
    let fail = |reason: &str| ParseDurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let mut rest = input.strip_prefix('+').unwrap_or(input);
    if rest.starts_with('-') {
        return Err(fail("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(fail("empty duration"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after_number) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(fail("expected a number before each unit"));
        }
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if unit.is_empty() {
            return Err(fail("missing unit (use ns, us, ms, s, m or h)"));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(fail(&format!(
                "unknown unit {unit:?} (use ns, us, ms, s, m or h)"
            )));
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| fail("number too large"))?
        };
        // Like Go, digits beyond nanosecond precision are dropped rather than rounded.
        let mut fraction_nanos: u128 = 0;
        let mut divisor: u128 = 1;
        for digit in fraction.bytes().take(30) {
            fraction_nanos = fraction_nanos * 10 + u128::from(digit - b'0');
            divisor *= 10;
        }
        let part = whole
            .checked_mul(scale)
            .and_then(|nanos| nanos.checked_add(fraction_nanos * scale / divisor))
            .ok_or_else(|| fail("duration too large"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| fail("duration too large"))?;
        rest = after_unit;
    }
    let nanos = u64::try_from(total).map_err(|_| fail("duration too large"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(input: &str) -> Duration {
        parse_duration(input).unwrap()
    }

    fn reason(input: &str) -> String {
        parse_duration(input).unwrap_err().reason
    }

    #[test]
    fn accepts_go_durations() {
        assert_eq!(ok("1s"), Duration::from_secs(1));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok(".5m"), Duration::from_secs(30));
        assert_eq!(ok("2us"), Duration::from_micros(2));
        assert_eq!(ok("2µs"), Duration::from_micros(2));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("+3s"), Duration::from_secs(3));
        assert_eq!(ok("1.0000000019s"), Duration::from_nanos(1_000_000_001));
    }

    #[test]
    fn rejects_malformed_durations() {
        assert_eq!(reason("5"), "missing unit (use ns, us, ms, s, m or h)");
        assert_eq!(reason(""), "empty duration");
        assert_eq!(reason("-1s"), "negative durations are not allowed");
        assert_eq!(
            reason("5sec"),
            "unknown unit \"sec\" (use ns, us, ms, s, m or h)"
        );
        assert_eq!(reason("s"), "expected a number before each unit");
        assert_eq!(reason("1.2.3s"), "expected a number before each unit");
        assert_eq!(
            reason("1 s"),
            "unknown unit \" s\" (use ns, us, ms, s, m or h)"
        );
        assert_eq!(reason("9999999999999h"), "duration too large");
    }

    #[test]
    fn error_names_the_input() {
        assert_eq!(
            parse_duration("ten").unwrap_err().to_string(),
            "invalid duration \"ten\": expected a number before each unit"
        );
    }
}
