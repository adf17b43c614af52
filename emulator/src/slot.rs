//! Slotted releases (ACK aggregation), as netem's `slot MIN MAX packets N bytes B` releases: a
//! Wi-Fi or cellular hop that sends what has gathered when it gets the medium, not packet by packet.
//!
//! Slots open one after another, from the link's start: the first at once, each next one a
//! uniform draw in [MIN, MAX] after the one before. For each packet at the head of the delay line,
//! in order:
//! 1. it leaves at the first slot that opens at or after its due time (its departure plus the
//!    delay and any jitter) and still has room: each slot takes at most N packets and, as netem
//!    counts, goes on taking them while fewer than B bytes have left in it (0: no limit);
//! 2. a slot that opens with nothing due, or whose room is spent, passes: the next one is drawn.
//!
//! So packets leave in bursts of what gathered between two slots, and a flow's ACKs arrive in
//! clumps: the ACK aggregation that distorts BBR's delivery-rate samples. The draws come from a
//! stream of their own, so the same seed gives the same slots.

use rand::Rng;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde_json::{json, Value};

use crate::units::parse_duration_ns;

/// The longest gap between two slots, 1 s: beyond it the link is down, not aggregating.
pub const MAX_SLOT_NS: u64 = 1_000_000_000;

/// Slots as given on the command line, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlotSpec {
    pub min_ns: u64,
    pub max_ns: u64,
    /// Packets a slot takes at most (0: no limit).
    pub packets: u64,
    /// Bytes after which a slot takes no more (0: no limit).
    pub bytes: u64,
}

impl SlotSpec {
    /// `--*-slot MIN MAX PACKETS BYTES`, e.g. `1ms 4ms 32 0`.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        let [min, max, packets, bytes] = values else {
            return Err(format!("takes 4 values (MIN MAX PACKETS BYTES), not {}", values.len()));
        };
        let (min_ns, max_ns) = (parse_duration_ns(min)?, parse_duration_ns(max)?);
        if !(1..=MAX_SLOT_NS).contains(&min_ns) || !(min_ns..=MAX_SLOT_NS).contains(&max_ns) {
            return Err(format!("slot gaps {min:?} to {max:?}: give 1ns <= MIN <= MAX <= 1s"));
        }
        let count = |name: &str, text: &str| {
            text.trim().parse::<u64>().map_err(|_| format!("{name} {text:?} is not a whole number (0: no limit)"))
        };
        Ok(Self { min_ns, max_ns, packets: count("PACKETS", packets)?, bytes: count("BYTES", bytes)? })
    }

    pub fn to_json(&self) -> Value {
        json!({"min_us": self.min_ns as f64 / 1e3, "max_us": self.max_ns as f64 / 1e3,
               "packets": self.packets, "bytes": self.bytes})
    }
}

/// A direction's running slots: when the next one opens, and the room left in it.
pub struct Slots {
    spec: SlotSpec,
    rng: Pcg64Mcg,
    opening_ns: u64,
    packets_left: u64,
    bytes_left: u64,
}

impl Slots {
    pub fn new(spec: SlotSpec, seed: u64) -> Self {
        let mut slots = Self { spec, rng: Pcg64Mcg::seed_from_u64(seed), opening_ns: 0, packets_left: 0, bytes_left: 0 };
        slots.refill();
        slots
    }

    /// When the next slot opens (a packet due by then may leave in it).
    pub fn opening_ns(&self) -> u64 {
        self.opening_ns
    }

    /// The opening of the slot a head packet due at `due_ns` leaves in, if it has opened by
    /// `now_ns`: the first at or after its due time with room left (slots passed over are gone).
    /// None while no such slot has opened yet: the packet waits. `take` then spends its room.
    pub fn slot_for(&mut self, due_ns: u64, now_ns: u64) -> Option<u64> {
        while self.opening_ns <= now_ns {
            if due_ns <= self.opening_ns && self.packets_left > 0 && self.bytes_left > 0 {
                return Some(self.opening_ns);
            }
            self.next();
        }
        None
    }

    /// A packet of `bytes` left in the open slot: its room shrinks, and once spent the next is drawn.
    pub fn take(&mut self, bytes: u64) {
        self.packets_left -= 1;
        self.bytes_left = self.bytes_left.saturating_sub(bytes);
        if self.packets_left == 0 || self.bytes_left == 0 {
            self.next();
        }
    }

    fn next(&mut self) {
        self.opening_ns += self.rng.random_range(self.spec.min_ns..=self.spec.max_ns);
        self.refill();
    }

    fn refill(&mut self) {
        self.packets_left = if self.spec.packets == 0 { u64::MAX } else { self.spec.packets };
        self.bytes_left = if self.spec.bytes == 0 { u64::MAX } else { self.spec.bytes };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The opening a packet leaves in, as the link asks: the slot for it, then its room taken.
    fn admit(s: &mut Slots, due_ns: u64, bytes: u64, now_ns: u64) -> Option<u64> {
        let opening = s.slot_for(due_ns, now_ns)?;
        s.take(bytes);
        Some(opening)
    }

    fn slots(values: &[&str]) -> Slots {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        Slots::new(SlotSpec::parse(&values).unwrap(), 11)
    }

    #[test]
    fn gaps_between_slots_are_uniform_over_min_to_max() {
        // A packet due at every microsecond-step finds every slot: the openings are the slots.
        let mut s = slots(&["1ms", "3ms", "1", "0"]);
        let mut openings = Vec::new();
        let mut due = 0;
        while openings.len() < 100_001 {
            let opening = admit(&mut s, due, 1500, u64::MAX).unwrap();
            openings.push(opening);
            due = opening + 1;
        }
        let mut gaps: Vec<u64> = openings.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_unstable();
        assert!(gaps[0] >= 1_000_000 && *gaps.last().unwrap() <= 3_000_000);
        // Quantiles of U[1, 3] ms: q -> 1 + 2q ms, each within 0.5 % of the range with 100,000 gaps.
        for q in [0.1, 0.25, 0.5, 0.75, 0.9] {
            let measured = gaps[((gaps.len() - 1) as f64 * q) as usize] as f64;
            assert!((measured - (1e6 + 2e6 * q)).abs() < 0.005 * 2e6, "q{q}: {measured}");
        }
    }

    #[test]
    fn a_slot_releases_what_arrived_since_the_one_before() {
        // Packets due every 100 us, slots U[1, 3] ms apart with no limit: a slot releases the due
        // times in (previous opening, its opening], so its size is the gap over 100 us, rounded
        // either way, and the sizes' mean is E[gap] / 100 us = 20 within four standard errors
        // (gap's standard deviation 2 ms / sqrt(12), over 50,000 slots).
        let mut s = slots(&["1ms", "3ms", "0", "0"]);
        let mut released = std::collections::BTreeMap::<u64, u64>::new();
        for i in 0u64.. {
            let due = i * 100_000;
            let opening = admit(&mut s, due, 1500, u64::MAX).unwrap();
            *released.entry(opening).or_default() += 1;
            if released.len() > 50_000 {
                break;
            }
        }
        let openings: Vec<u64> = released.keys().copied().collect();
        let sizes: Vec<u64> = released.values().copied().collect();
        // The first slot (at 0) takes the first packet alone; the last may not be complete.
        for (k, w) in openings.windows(2).enumerate().take(openings.len() - 2) {
            let exact = (w[1] - w[0]) as f64 / 100_000.0;
            let size = sizes[k + 1] as f64;
            assert!((size - exact).abs() <= 1.0, "slot {k}: {size} packets for a gap of {exact} packet times");
        }
        let whole = &sizes[1..sizes.len() - 1];
        let mean = whole.iter().sum::<u64>() as f64 / whole.len() as f64;
        let four_se = 4.0 * (20.0 / 12f64.sqrt()) / (whole.len() as f64).sqrt();
        assert!((mean - 20.0).abs() < four_se + 1.0 / whole.len() as f64, "mean release {mean}, expected 20 +- {four_se}");
    }

    #[test]
    fn a_slot_takes_what_gathered_up_to_its_room_and_the_rest_waits() {
        // 10 packets due at once, slots of at most 4 packets (or 4,500 bytes: 3 full packets).
        for (limits, sizes) in [(["4", "0"], vec![4, 4, 2]), (["0", "4500"], vec![3, 3, 3, 1])] {
            let mut s = slots(&["2ms", "2ms", limits[0], limits[1]]);
            admit(&mut s, 0, 1500, 0).unwrap(); // the first slot opens at the start; the next at 2 ms
            let mut at = std::collections::BTreeMap::<u64, usize>::new();
            for _ in 0..10 {
                *at.entry(admit(&mut s, 1_000_000, 1500, u64::MAX).unwrap()).or_default() += 1;
            }
            assert_eq!(at.values().copied().collect::<Vec<_>>(), sizes, "{limits:?}");
            assert_eq!(at.keys().next(), Some(&2_000_000)); // due at 1 ms: the slot at 2 ms
        }
    }

    #[test]
    fn nothing_leaves_before_its_slot_opens() {
        let mut s = slots(&["5ms", "5ms", "0", "0"]);
        assert_eq!(admit(&mut s, 1_000_000, 1500, 4_999_999), None);
        assert_eq!(s.opening_ns(), 5_000_000);
        assert_eq!(admit(&mut s, 1_000_000, 1500, 5_000_000), Some(5_000_000));
    }

    #[test]
    fn bad_values_name_what_is_allowed() {
        let error = |values: &[&str]| SlotSpec::parse(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        assert!(error(&["3ms", "1ms", "0", "0"]).unwrap_err().contains("give 1ns <= MIN <= MAX <= 1s"));
        assert!(error(&["0ms", "1ms", "0", "0"]).unwrap_err().contains("give 1ns <= MIN <= MAX <= 1s"));
        assert!(error(&["1ms", "2s", "0", "0"]).unwrap_err().contains("give 1ns <= MIN <= MAX <= 1s"));
        assert!(error(&["1ms", "2ms", "-1", "0"]).unwrap_err().contains("PACKETS \"-1\" is not a whole number"));
        assert!(error(&["1ms", "2ms", "1"]).unwrap_err().contains("takes 4 values"));
    }
}
