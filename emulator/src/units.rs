//! Parsing of the command line's quantities (rates, durations, probabilities).
//!
//! Every parser returns a message that, prefixed with the option's name by the caller, is the
//! one line a user sees: it says what was given and what is allowed.

/// A rate such as `100mbit`, `1.5gbit`, `64kbit` or `1000000bit`, in bits per second.
/// A bare number is bits per second. Bytes-per-second units are refused on purpose: tc's
/// `mbps` means megabytes, which is a classic source of 8x mistakes.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = split_unit(&lower, &[("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0), ("", 1.0)])
        .ok_or_else(|| format!("{text:?} is not a rate: use a number with bit, kbit, mbit or gbit"))?;
    let value = number * scale;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("{text:?}: rate must be > 0"));
    }
    Ok(value)
}

/// A duration such as `50ms`, `12.5ms`, `200us`, `30s` or `0`, in nanoseconds.
/// A bare number is milliseconds, as in Mahimahi's `mm-delay`.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = split_unit(&lower, &[("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9), ("", 1e6)])
        .ok_or_else(|| format!("{text:?} is not a duration: use a number with ns, us, ms or s"))?;
    let ns = number * scale;
    if !(ns.is_finite() && ns >= 0.0) || ns > 1e15 {
        return Err(format!("{text:?}: duration must be between 0 and 1e6 s"));
    }
    Ok(ns.round() as u64)
}

/// A probability in [0, 1] (a fraction, not a percentage).
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number: give a fraction in [0, 1]"))?;
    if !(0.0..=1.0).contains(&value) {
        return Err(format!("{value} is outside [0, 1] (a fraction: 1% is 0.01)"));
    }
    Ok(value)
}

fn split_unit(text: &str, units: &[(&str, f64)]) -> Option<(f64, f64)> {
    for (unit, scale) in units {
        if let Some(number) = text.strip_suffix(unit) {
            if let Ok(value) = number.trim().parse::<f64>() {
                return Some((value, *scale));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100mbit").unwrap(), 100e6);
        assert_eq!(parse_rate("1.5Gbit").unwrap(), 1.5e9);
        assert_eq!(parse_rate("64kbit").unwrap(), 64e3);
        assert_eq!(parse_rate("12000").unwrap(), 12000.0);
        assert!(parse_rate("0mbit").unwrap_err().contains("> 0"));
        assert!(parse_rate("-3mbit").is_err());
        assert!(parse_rate("100mbps").unwrap_err().contains("not a rate"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("50ms").unwrap(), 50_000_000);
        assert_eq!(parse_duration_ns("12.5ms").unwrap(), 12_500_000);
        assert_eq!(parse_duration_ns("200us").unwrap(), 200_000);
        assert_eq!(parse_duration_ns("30s").unwrap(), 30_000_000_000);
        assert_eq!(parse_duration_ns("25").unwrap(), 25_000_000);
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
        assert!(parse_duration_ns("-1ms").is_err());
        assert!(parse_duration_ns("soon").is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("0.01").unwrap(), 0.01);
        assert_eq!(parse_probability("1").unwrap(), 1.0);
        assert!(parse_probability("1.5").unwrap_err().contains("[0, 1]"));
        assert!(parse_probability("-0.1").is_err());
        assert!(parse_probability("1%").is_err());
    }
}
