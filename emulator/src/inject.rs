//! Lateness on purpose (`--inject-lateness`): a debug option that holds a chosen share of
//! releases back by a chosen delay, so that a late cell can be produced at will and the
//! self-check, which measures every packet against its scheduled time, is seen to flag it.
//!
//! Grammar: `KIND:ARGS[,p=P]`, with `fixed:D`, `uniform:A-B` or `exp:MEAN` (each a duration as
//! elsewhere, a bare number being milliseconds) and `p` the probability that a packet's release
//! is held (default 1). A held packet holds the packets behind it too, as a stalled emulator does.

use crate::units::{parse_duration_ns, parse_probability};
use rand::Rng;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// The longest delay a distribution may name: beyond it a "late" cell would be a hung one.
const MAX_DELAY_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    Fixed(u64),
    Uniform { low_ns: u64, high_ns: u64 },
    Exponential { mean_ns: u64 },
}

/// A validated `--inject-lateness` value.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectSpec {
    pub distribution: Distribution,
    pub probability: f64,
    /// The text it was parsed from, echoed in the summary.
    pub text: String,
}

fn delay(text: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(text)?;
    if ns > MAX_DELAY_NS {
        return Err(format!("{text:?} is longer than 1s"));
    }
    Ok(ns)
}

impl InjectSpec {
    pub fn parse(text: &str) -> Result<Self, String> {
        let usage = "use fixed:D, uniform:A-B or exp:MEAN, optionally followed by ,p=P";
        let (body, probability) = match text.trim().split_once(',') {
            None => (text.trim(), 1.0),
            Some((body, rest)) => {
                let value = rest
                    .trim()
                    .strip_prefix("p=")
                    .ok_or_else(|| format!("{rest:?} is not p=P (the probability that a release is held)"))?;
                (body, parse_probability(value).map_err(|e| format!("p: {e}"))?)
            }
        };
        let (kind, args) = body.split_once(':').ok_or_else(|| format!("{text:?} is not a distribution: {usage}"))?;
        let distribution = match kind.trim() {
            "fixed" => Distribution::Fixed(delay(args)?),
            "uniform" => {
                let (low, high) =
                    args.split_once('-').ok_or_else(|| format!("uniform needs two bounds A-B, got {args:?}"))?;
                let (low_ns, high_ns) = (delay(low)?, delay(high)?);
                if low_ns > high_ns {
                    return Err(format!("uniform bounds {low:?} and {high:?}: the first must not exceed the second"));
                }
                Distribution::Uniform { low_ns, high_ns }
            }
            "exp" => Distribution::Exponential { mean_ns: delay(args)? },
            other => return Err(format!("unknown distribution {other:?}: {usage}")),
        };
        Ok(Self { distribution, probability, text: text.trim().to_string() })
    }
}

/// Draws, packet by packet, how long each release is held (0: not held).
pub struct Injector {
    spec: InjectSpec,
    rng: Pcg64Mcg,
}

impl Injector {
    pub fn new(spec: InjectSpec, seed: u64) -> Self {
        Self { spec, rng: Pcg64Mcg::seed_from_u64(seed) }
    }

    pub fn draw_ns(&mut self) -> u64 {
        if self.spec.probability < 1.0 && self.rng.random::<f64>() >= self.spec.probability {
            return 0;
        }
        match self.spec.distribution {
            Distribution::Fixed(ns) => ns,
            Distribution::Uniform { low_ns, high_ns } => self.rng.random_range(low_ns..=high_ns),
            Distribution::Exponential { mean_ns } => {
                let u: f64 = self.rng.random();
                (-(1.0 - u).ln() * mean_ns as f64).round() as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_distributions_and_a_probability() {
        assert_eq!(InjectSpec::parse("fixed:2ms").unwrap().distribution, Distribution::Fixed(2_000_000));
        let spec = InjectSpec::parse("uniform:500us-5ms,p=0.01").unwrap();
        assert_eq!(spec.distribution, Distribution::Uniform { low_ns: 500_000, high_ns: 5_000_000 });
        assert_eq!(spec.probability, 0.01);
        assert_eq!(spec.text, "uniform:500us-5ms,p=0.01");
        let exp = InjectSpec::parse(" exp:500us ").unwrap();
        assert_eq!(exp.distribution, Distribution::Exponential { mean_ns: 500_000 });
        // A bare bound is milliseconds, as every duration of the command line.
        assert_eq!(
            InjectSpec::parse("uniform:0-5ms").unwrap().distribution,
            Distribution::Uniform { low_ns: 0, high_ns: 5_000_000 }
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_with_one_line() {
        for (text, says) in [
            ("2ms", "is not a distribution: use fixed:D"),
            ("normal:2ms", "unknown distribution \"normal\""),
            ("fixed:soon", "is not a duration"),
            ("fixed:2s", "longer than 1s"),
            ("uniform:5ms", "two bounds"),
            ("uniform:5ms-1ms", "must not exceed"),
            ("fixed:2ms,q=0.1", "is not p=P"),
            ("fixed:2ms,p=2", "p: 2 is outside [0, 1]"),
        ] {
            let error = InjectSpec::parse(text).unwrap_err();
            assert!(error.contains(says) && !error.contains('\n'), "{text}: {error}");
        }
    }

    #[test]
    fn draws_follow_the_distribution_and_the_seed() {
        let draws = |text: &str, seed: u64| -> Vec<u64> {
            let mut injector = Injector::new(InjectSpec::parse(text).unwrap(), seed);
            (0..20_000).map(|_| injector.draw_ns()).collect()
        };
        assert!(draws("fixed:2ms", 1).iter().all(|ns| *ns == 2_000_000));
        let held = draws("fixed:2ms,p=0.1", 1).iter().filter(|ns| **ns > 0).count();
        // 99.9% binomial interval around 2,000 of 20,000.
        assert!((1_860..=2_140).contains(&held), "{held}");
        assert_eq!(draws("uniform:1ms-3ms,p=0.5", 7), draws("uniform:1ms-3ms,p=0.5", 7));
        assert!(draws("uniform:1ms-3ms", 2).iter().all(|ns| (1_000_000..=3_000_000).contains(ns)));
        let exp = draws("exp:500us", 3);
        let mean = exp.iter().sum::<u64>() as f64 / exp.len() as f64;
        assert!((mean - 500_000.0).abs() < 25_000.0, "{mean}");
    }
}
