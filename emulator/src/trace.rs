//! Mahimahi packet-delivery traces: one millisecond timestamp per 1504-byte delivery opportunity.

use std::fs;

/// Bytes one delivery opportunity carries: a 1500-byte IP packet plus Mahimahi's 4-byte TUN header.
pub const OPPORTUNITY_BYTES: u64 = 1504;
/// Bytes the link counts for each packet beyond its IP length: Mahimahi's TUN header.
pub const HEADER_BYTES: u32 = 4;
/// IP bits of the full-size packet one opportunity carries: Mahimahi's R bit/s trace has
/// R / 12000 opportunities per second (100 Mbit/s: 8.33 per ms, as ReBBR generated them).
pub const OPPORTUNITY_IP_BITS: f64 = 12_000.0;

/// A validated trace. Timestamps are non-decreasing milliseconds; the trace repeats with a period
/// equal to its last timestamp, unless played `once`.
#[derive(Debug, Clone)]
pub struct Trace {
    pub timestamps_ms: Vec<u64>,
    pub once: bool,
}

impl Trace {
    /// Reads and validates a trace file; errors name the file and line.
    pub fn load(path: &str, once: bool) -> Result<Self, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Self::parse(&text, path, once)
    }

    pub fn parse(text: &str, origin: &str, once: bool) -> Result<Self, String> {
        let mut timestamps_ms = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let lineno = index + 1;
            let value: u64 = line
                .parse()
                .map_err(|_| format!("{origin}:{lineno}: {line:?} is not a whole number of milliseconds"))?;
            if let Some(&previous) = timestamps_ms.last() {
                if value < previous {
                    return Err(format!("{origin}:{lineno}: {value} is less than the previous timestamp {previous}"));
                }
            }
            timestamps_ms.push(value);
        }
        match timestamps_ms.last() {
            None => Err(format!("{origin}: the trace is empty")),
            Some(0) => Err(format!("{origin}: the trace must end at a timestamp > 0 (it ends at 0)")),
            Some(_) => Ok(Self { timestamps_ms, once }),
        }
    }

    /// Length of one pass over the trace, in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.timestamps_ms.last().copied().unwrap_or(0) * 1_000_000
    }

    /// Time of opportunity number `k` (counting across repetitions), or None after the end of a
    /// trace played once.
    pub fn opportunity_ns(&self, k: u64) -> Option<u64> {
        let n = self.timestamps_ms.len() as u64;
        let (pass, index) = (k / n, (k % n) as usize);
        if self.once && pass > 0 {
            return None;
        }
        Some(pass * self.period_ns() + self.timestamps_ms[index] * 1_000_000)
    }

    /// Mean capacity of one pass in bits per second (1504 bytes per opportunity).
    pub fn mean_rate_bps(&self) -> f64 {
        (self.timestamps_ms.len() as u64 * OPPORTUNITY_BYTES * 8) as f64 / (self.period_ns() as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_repeats() {
        let trace = Trace::parse("0\n1\n1\n\n4\n", "t", false).unwrap();
        assert_eq!(trace.timestamps_ms, vec![0, 1, 1, 4]);
        assert_eq!(trace.opportunity_ns(0), Some(0));
        assert_eq!(trace.opportunity_ns(3), Some(4_000_000));
        assert_eq!(trace.opportunity_ns(4), Some(4_000_000));
        assert_eq!(trace.opportunity_ns(5), Some(5_000_000));
        assert_eq!(trace.opportunity_ns(7), Some(8_000_000));
    }

    #[test]
    fn once_ends() {
        let trace = Trace::parse("1\n2\n", "t", true).unwrap();
        assert_eq!(trace.opportunity_ns(1), Some(2_000_000));
        assert_eq!(trace.opportunity_ns(2), None);
    }

    #[test]
    fn rejects_bad_traces_with_file_and_line() {
        assert_eq!(Trace::parse("", "up", false).unwrap_err(), "up: the trace is empty");
        assert!(Trace::parse("1\nx\n", "up", false).unwrap_err().starts_with("up:2: \"x\""));
        assert!(Trace::parse("1\n3\n2\n", "up", false).unwrap_err().starts_with("up:3: 2 is less"));
        assert!(Trace::parse("0\n0\n", "up", false).unwrap_err().contains("ends at 0"));
        assert!(Trace::parse("1.5\n", "up", false).unwrap_err().starts_with("up:1:"));
    }

    #[test]
    fn mean_rate_of_twelve_mbit() {
        // One opportunity per ms is 1504 B/ms = 12.032 Mbit/s.
        let trace = Trace::parse("1\n2\n3\n4\n", "t", false).unwrap();
        assert!((trace.mean_rate_bps() - 12.032e6).abs() < 1.0);
    }
}
