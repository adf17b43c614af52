//! A policer: a token bucket that drops what exceeds it instead of queueing it, as an ISP's
//! traffic policer does (transperf's policers; Rattan's token bucket).
//!
//! The bucket holds at most `burst` bytes of tokens and fills at `rate` bits per second; it
//! starts full. For each packet that reaches it, in order (after a loss "before" the queue, before
//! the queue):
//! 1. the bucket fills for the time since the last packet, up to `burst`;
//! 2. if it holds at least the packet's IP bytes, they are taken and the packet goes on to the
//!    queue; otherwise the packet is dropped and the bucket keeps its tokens.
//!
//! So over any interval of length T, the bytes let through are at most `burst + rate * T / 8`:
//! a flow sending faster than `rate` sees its excess dropped, with no queueing delay added.

use serde_json::{json, Value};

use crate::units::parse_rate;

/// The smallest bucket: one full-sized packet (1500 bytes) must fit, or nothing ever passes.
pub const MIN_BURST_BYTES: u64 = 1500;
/// The largest bucket, 1 GiB: beyond it a policer polices nothing a cell can send.
pub const MAX_BURST_BYTES: u64 = 1 << 30;

/// A policer as given on the command line, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicerSpec {
    pub rate_bps: f64,
    pub burst_bytes: u64,
}

impl PolicerSpec {
    /// `--*-policer RATE BURST`: a rate (`10mbit`) and the bucket's size in bytes.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        let [rate, burst] = values else {
            return Err(format!("takes 2 values (RATE BURST_BYTES), not {}", values.len()));
        };
        let rate_bps = parse_rate(rate)?;
        let burst_bytes: u64 = burst
            .trim()
            .parse()
            .map_err(|_| format!("{burst:?} is not a whole number of bytes"))?;
        if !(MIN_BURST_BYTES..=MAX_BURST_BYTES).contains(&burst_bytes) {
            return Err(format!("burst {burst_bytes} is outside [{MIN_BURST_BYTES}, {MAX_BURST_BYTES}] bytes"));
        }
        Ok(Self { rate_bps, burst_bytes })
    }

    pub fn to_json(&self) -> Value {
        json!({"rate_bps": self.rate_bps, "burst_bytes": self.burst_bytes})
    }
}

/// A running token bucket. Tokens are kept in bits times nanoseconds per second (`rate` bits per
/// second over `ns` nanoseconds adds `rate * ns` of them), so filling is exact integer arithmetic.
pub struct Policer {
    rate_bps: u128,
    capacity: u128,
    tokens: u128,
    last_ns: u64,
}

/// Tokens per byte: 8 bits, in bit-nanoseconds per second.
const PER_BYTE: u128 = 8 * 1_000_000_000;

impl Policer {
    pub fn new(spec: PolicerSpec) -> Self {
        let capacity = u128::from(spec.burst_bytes) * PER_BYTE;
        Self { rate_bps: spec.rate_bps.round().max(1.0) as u128, capacity, tokens: capacity, last_ns: 0 }
    }

    /// Whether a packet of `bytes` IP bytes arriving at `now_ns` conforms; if so its tokens are taken.
    pub fn conforms(&mut self, now_ns: u64, bytes: u64) -> bool {
        let elapsed = u128::from(now_ns.saturating_sub(self.last_ns));
        self.last_ns = self.last_ns.max(now_ns);
        self.tokens = self.capacity.min(self.tokens + self.rate_bps * elapsed);
        let cost = u128::from(bytes) * PER_BYTE;
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: &str, burst: &str) -> Result<PolicerSpec, String> {
        PolicerSpec::parse(&[rate.to_string(), burst.to_string()])
    }

    #[test]
    fn parses_and_refuses_in_one_line() {
        assert_eq!(spec("10mbit", "30000").unwrap(), PolicerSpec { rate_bps: 10e6, burst_bytes: 30000 });
        assert!(spec("10mbps", "30000").unwrap_err().contains("not a rate"));
        assert!(spec("10mbit", "100").unwrap_err().contains("outside [1500, 1073741824]"));
        assert!(spec("10mbit", "1.5e3").unwrap_err().contains("not a whole number"));
        assert!(PolicerSpec::parse(&["10mbit".into()]).unwrap_err().contains("takes 2 values"));
    }

    /// Offered at twice its rate for 10 s in 1500-byte packets, a 10 Mbit/s, 15 kB bucket lets
    /// through rate x T plus its burst, to within one packet, and drops the rest.
    #[test]
    fn conformance_is_rate_times_time_plus_burst() {
        let mut policer = Policer::new(spec("10mbit", "15000").unwrap());
        let gap_ns = 600_000; // 1500 B every 0.6 ms: 20 Mbit/s
        let (mut passed, mut offered) = (0u64, 0u64);
        for i in 0..(10_000_000_000 / gap_ns) {
            offered += 1500;
            if policer.conforms(i * gap_ns, 1500) {
                passed += 1500;
            }
        }
        let bound = 15_000 + 10_000_000 / 8 * 10;
        assert!(passed <= bound && passed + 1500 > bound - 1500, "{passed} against {bound}");
        assert!(offered > 2 * bound - 40_000);
    }

    /// Conformance as a token bucket defines it, under traffic no test picked by hand: random
    /// sizes (64 to 1500 bytes) at exponential gaps, offered at twice the rate in 50 ms bursts
    /// 50 ms apart, so that each burst finds the bucket full again. Over every window between two
    /// packets, what passed is at most BURST + RATE x T / 8; and each burst, which empties the
    /// bucket and leaves at most a packet's worth of tokens, passes nearly that much.
    #[test]
    fn no_window_passes_more_than_burst_plus_rate_times_time() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        let mut policer = Policer::new(spec("10mbit", "15000").unwrap());
        let mut passed = Vec::new();
        let mut tight = 0.0;
        for burst in 0..20u64 {
            let (start, mut now_ns) = (burst * 100_000_000, burst * 100_000_000);
            let mut first_and_last = None;
            while now_ns < start + 50_000_000 {
                let bytes = rng.random_range(64..=1500u64);
                if policer.conforms(now_ns, bytes) {
                    passed.push((now_ns, bytes));
                    first_and_last = Some((first_and_last.map_or(now_ns, |(first, _)| first), now_ns));
                }
                // Mean size 782 bytes at 20 Mbit/s: a mean gap of 313 us, drawn exponential.
                now_ns += (-(1.0 - rng.random::<f64>()).ln() * 312_800.0) as u64;
            }
            let (first, last) = first_and_last.unwrap();
            tight += 15_000.0 + 10e6 * (last - first) as f64 / 8e9 - 1500.0;
        }
        let mut cumulative = vec![0u64];
        cumulative.extend(passed.iter().scan(0, |sum, (_, b)| { *sum += b; Some(*sum) }));
        for i in 0..passed.len() {
            for j in i..passed.len() {
                let bytes = cumulative[j + 1] - cumulative[i];
                let bound = 15_000.0 + 10e6 * (passed[j].0 - passed[i].0) as f64 / 8e9;
                assert!(bytes as f64 <= bound, "{bytes} B passed from packet {i} to {j}, bound {bound}");
            }
        }
        let total = cumulative[passed.len()] as f64;
        assert!(total >= 0.99 * tight, "{total} B passed, each burst's bucket and fill less a packet: {tight}");
    }

    /// Below its rate nothing is dropped, and a burst up to the bucket passes whole.
    #[test]
    fn conforming_traffic_passes_whole() {
        let mut policer = Policer::new(spec("10mbit", "15000").unwrap());
        assert!((0..10).all(|_| policer.conforms(0, 1500)), "a full bucket passes its burst at once");
        assert!(!policer.conforms(0, 1500), "the eleventh packet finds it empty");
        let mut slow = Policer::new(spec("10mbit", "1500").unwrap());
        assert!((0..10_000u64).all(|i| slow.conforms(i * 1_300_000, 1500)), "9.2 Mbit/s under 10 passes");
    }

    /// A dropped packet takes no tokens: the next one that fits still passes.
    #[test]
    fn a_drop_keeps_the_tokens() {
        let mut policer = Policer::new(spec("8kbit", "1500").unwrap()); // 1000 B/s
        assert!(policer.conforms(0, 1500));
        assert!(!policer.conforms(500_000_000, 1500)); // 500 B of tokens
        assert!(policer.conforms(500_000_000, 400));
        assert!(policer.conforms(1_600_000_000, 1000)); // 100 + 1100 B
    }
}
