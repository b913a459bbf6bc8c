//! Time as a plain value: milliseconds since the Unix epoch, with RFC 3339 conversion.
//!
//! The scheduling core never reads a clock; the caller passes `now` in.

use std::fmt;

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

impl Time {
    /// From whole seconds since the epoch.
    pub fn from_secs(secs: i64) -> Self {
        Time(secs.saturating_mul(1000))
    }

    /// Whole seconds since the epoch (rounded down).
    pub fn secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// `self + ms` milliseconds.
    pub fn plus_millis(self, ms: i64) -> Self {
        Time(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`.
    pub fn millis_since(self, earlier: Time) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
    pub fn parse_rfc3339(s: &str) -> Option<Time> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        let mut rest = &s[19..];
        let mut millis = 0i64;
        if let Some(frac) = rest.strip_prefix('.') {
            let end = frac
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(frac.len());
            let digits = &frac[..end];
            if digits.is_empty() {
                return None;
            }
            let ms: String = digits.chars().chain("000".chars()).take(3).collect();
            millis = ms.parse().ok()?;
            rest = &frac[end..];
        }
        let offset_secs = match rest {
            "Z" | "z" => 0,
            _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
                let oh: i64 = rest.get(1..3)?.parse().ok()?;
                let om: i64 = rest.get(4..6)?.parse().ok()?;
                let sign = if rest.starts_with('-') { -1 } else { 1 };
                sign * (oh * 3600 + om * 60)
            }
            _ => return None,
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_secs;
        Some(Time(secs * 1000 + millis))
    }

    /// Formats as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds, as Kubernetes' metav1.Time).
    pub fn to_rfc3339(self) -> String {
        let secs = self.secs();
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        )
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2026-11-29T14:03:22Z",
            "2000-02-29T23:59:59Z",
        ] {
            assert_eq!(Time::parse_rfc3339(s).unwrap().to_rfc3339(), s);
        }
        assert_eq!(
            Time::parse_rfc3339("1970-01-01T00:00:01.5Z"),
            Some(Time(1500))
        );
        assert_eq!(
            Time::parse_rfc3339("1970-01-01T01:00:00+01:00"),
            Some(Time(0))
        );
        assert_eq!(Time::parse_rfc3339("yesterday"), None);
    }
}
