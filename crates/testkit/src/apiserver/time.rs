//! Wall-clock timestamps in the RFC 3339 form Kubernetes writes (`2026-01-02T03:04:05Z`).

use std::time::{SystemTime, UNIX_EPOCH};

fn unix_now() -> i64 {
    // A clock before 1970 is treated as the epoch rather than failing a request.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// Formats seconds since the Unix epoch (UTC) as RFC 3339 with second precision.
pub(crate) fn format_unix(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Now, as a `metav1.Time`.
pub(crate) fn now() -> String {
    format_unix(unix_now())
}

/// `secs` seconds from now, as a `metav1.Time` (deletion timestamps).
pub(crate) fn after(secs: i64) -> String {
    format_unix(unix_now().saturating_add(secs))
}

/// Now, as a model time (milliseconds since the epoch), for the shared cluster roles.
pub(crate) fn now_model() -> caldera_model::Time {
    caldera_model::Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix(1_767_225_599), "2025-12-31T23:59:59Z");
    }
}
