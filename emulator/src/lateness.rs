//! The self-check: how late each packet left compared with its scheduled time, kept in a
//! histogram of 1-microsecond buckets (to 20 ms) so percentiles cost nothing per packet.

use serde_json::{json, Value};

const BUCKETS: usize = 20_000;

#[derive(Clone)]
pub struct Lateness {
    counts: Vec<u64>,
    total: u64,
    max_ns: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Self { counts: vec![0; BUCKETS + 1], total: 0, max_ns: 0 }
    }
}

impl Lateness {
    pub fn record(&mut self, late_ns: u64) {
        let bucket = ((late_ns / 1_000) as usize).min(BUCKETS);
        self.counts[bucket] += 1;
        self.total += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// The q-quantile in microseconds (upper edge of its bucket; the max for the overflow bucket).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return if bucket == BUCKETS { self.max_ns as f64 / 1e3 } else { (bucket + 1) as f64 };
            }
        }
        self.max_ns as f64 / 1e3
    }

    pub fn merge(&mut self, other: &Lateness) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// What was recorded after `earlier` (a snapshot of this histogram); the max is the upper
    /// edge of the highest bucket used in between.
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let counts: Vec<u64> = self.counts.iter().zip(&earlier.counts).map(|(now, then)| now - then).collect();
        let top = counts.iter().rposition(|c| *c > 0);
        let max_ns = match top {
            Some(BUCKETS) => self.max_ns,
            Some(bucket) => (bucket as u64 + 1) * 1_000,
            None => 0,
        };
        Lateness { total: self.total - earlier.total, counts, max_ns }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "p50": self.quantile_us(0.5),
            "p99": self.quantile_us(0.99),
            "max": self.max_ns as f64 / 1e3,
            "count": self.total,
        })
    }
}

/// How long a kind of system call took, call by call: the same histogram, and the sum. Kept so a
/// late packet can be told apart: a loop that woke late (timer overshoot) from one whose writes
/// (each runs the receiving host's stack in our context) or reads took long.
#[derive(Clone, Default)]
pub struct Durations {
    histogram: Lateness,
    total_ns: u64,
}

impl Durations {
    pub fn record(&mut self, ns: u64) {
        self.histogram.record(ns);
        self.total_ns += ns;
    }

    /// Runs `call` and records how long it took.
    pub fn time<T>(&mut self, call: impl FnOnce() -> T) -> T {
        let start = crate::sys::monotonic_ns();
        let result = call();
        self.record(crate::sys::monotonic_ns().saturating_sub(start));
        result
    }

    pub fn to_json(&self) -> Value {
        let mut value = self.histogram.to_json();
        value["total_s"] = json!(self.total_ns as f64 / 1e9);
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut h = Lateness::default();
        for us in 0..100u64 {
            h.record(us * 1_000 + 500);
        }
        assert_eq!(h.quantile_us(0.5), 50.0);
        assert_eq!(h.quantile_us(0.99), 99.0);
        h.record(50_000_000);
        assert_eq!(h.quantile_us(1.0), 50_000.0);
        assert_eq!(h.to_json()["count"], 101);
    }

    #[test]
    fn durations_keep_their_sum() {
        let mut d = Durations::default();
        d.record(2_500);
        d.record(1_500_000);
        let json = d.to_json();
        assert_eq!(json["count"], 2);
        assert_eq!(json["max"], 1_500.0);
        assert!((json["total_s"].as_f64().unwrap() - 0.0015025).abs() < 1e-12);
    }
}
