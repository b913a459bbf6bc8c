//! Kubernetes quantities (`500m`, `1.5`, `2Gi`, `1e3`, `1k`) parsed exactly and formatted back.

use std::fmt;

/// A quantity string that Kubernetes would reject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    /// The text that failed to parse.
    pub text: String,
    /// Why it failed.
    pub reason: &'static str,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid quantity {:?}: {}", self.text, self.reason)
    }
}

impl std::error::Error for QuantityError {}

/// Scale to parse a quantity into: base units or thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Whole units (bytes, GPUs, pods), rounded up like `Quantity.Value()`.
    Units,
    /// Thousandths (CPU millicores), rounded up like `Quantity.MilliValue()`.
    Milli,
}

/// Parses `text` the way Kubernetes' `resource.ParseQuantity` does, and returns its value at
/// `scale`, rounded up. Values beyond `i64` are an error rather than a silent clamp.
pub fn parse_quantity(text: &str, scale: Scale) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        text: text.to_string(),
        reason,
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    // Split number from suffix.
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    if number.is_empty() || number == "." {
        return Err(err("no digits"));
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => {
            if f.contains('.') {
                return Err(err("more than one decimal point"));
            }
            (i, f)
        }
        None => (number, ""),
    };
    // (base, exponent): value = mantissa * base^exponent
    let (binary_shift, decimal_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        other => {
            let rest = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or_else(|| err("unknown suffix"))?;
            let exp: i32 = rest.parse().map_err(|_| err("bad exponent"))?;
            if !(-30..=30).contains(&exp) {
                return Err(err("exponent out of range"));
            }
            (0, exp)
        }
    };
    if frac_part.len() > 30 || int_part.len() > 30 {
        return Err(err("too many digits"));
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = digits.parse().map_err(|_| err("no digits"))?;
    // value = mantissa * 2^shift * 10^(decimal_exp - frac_len) * scale
    let scale_exp = match scale {
        Scale::Units => 0,
        Scale::Milli => 3,
    };
    let exp10 = decimal_exp - frac_part.len() as i32 + scale_exp;
    let too_big = || err("value too large");
    let mut value = mantissa.checked_shl(binary_shift).ok_or_else(too_big)?;
    if binary_shift > 0 && value >> binary_shift != mantissa {
        return Err(too_big());
    }
    if exp10 >= 0 {
        let mul = 10u128.checked_pow(exp10 as u32).ok_or_else(too_big)?;
        value = value.checked_mul(mul).ok_or_else(too_big)?;
    } else {
        let div = 10u128.checked_pow((-exp10) as u32).ok_or_else(too_big)?;
        value = value.div_ceil(div);
    }
    let value = i64::try_from(value).map_err(|_| too_big())?;
    Ok(if negative { -value } else { value })
}

/// Formats CPU millicores the way Kubernetes prints them: `2`, `500m`.
pub fn format_milli(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Formats a byte count with the largest exact binary suffix, else the largest exact decimal one.
pub fn format_bytes(bytes: i64) -> String {
    if bytes == 0 {
        return "0".to_string();
    }
    const BIN: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    for (suffix, shift) in BIN {
        let unit = 1i64 << shift;
        if bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    const DEC: [(&str, i64); 6] = [
        ("E", 1_000_000_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("T", 1_000_000_000_000),
        ("G", 1_000_000_000),
        ("M", 1_000_000),
        ("k", 1_000),
    ];
    for (suffix, unit) in DEC {
        if bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> i64 {
        parse_quantity(s, Scale::Units).unwrap()
    }
    fn milli(s: &str) -> i64 {
        parse_quantity(s, Scale::Milli).unwrap()
    }

    #[test]
    fn parses_like_kubernetes() {
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli("0.1"), 100);
        assert_eq!(milli("1e3"), 1_000_000);
        assert_eq!(units("2Gi"), 2 << 30);
        assert_eq!(units("512Gi"), 512 << 30);
        assert_eq!(units("1k"), 1000);
        assert_eq!(units("1e3"), 1000);
        assert_eq!(units("1E3"), 1000);
        assert_eq!(units("1.5"), 2, "Value() rounds up");
        assert_eq!(units("100m"), 1, "Value() rounds up");
        assert_eq!(units("1.5Gi"), 3 << 29);
        assert_eq!(milli("1n"), 1, "MilliValue() rounds up");
        assert_eq!(units("8"), 8);
        assert_eq!(units("-1"), -1);
        assert_eq!(units("+7"), 7);
        assert_eq!(units("0"), 0);
        assert_eq!(units(".5"), 1);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "abc",
            "1x",
            "1.2.3",
            "Gi",
            "1e",
            "1ee3",
            "1Gii",
            "99999999999999999999Ei",
        ] {
            assert!(
                parse_quantity(bad, Scale::Units).is_err(),
                "{bad:?} should fail"
            );
        }
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(64000), "64");
        assert_eq!(format_bytes(512 << 30), "512Gi");
        assert_eq!(format_bytes(1_000_000_000), "1G");
        assert_eq!(format_bytes(1001), "1001");
        for s in ["512Gi", "1G", "3Mi", "1001"] {
            assert_eq!(format_bytes(units(s)), s);
        }
    }
}
