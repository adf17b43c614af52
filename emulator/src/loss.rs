//! The loss model of one direction: which packets the link drops at its loss stage (before or
//! after the bottleneck, `--loss-position`), drawn from a generator seeded per direction by
//! `--seed`, so the same seed drops the same packets.
//!
//! - Bernoulli (`--uplink-loss P`): each packet is lost with probability P, independently.
//! - Gilbert-Elliott (`--uplink-gilbert-elliott P R 1-H 1-K`), as netem's `gemodel` defines its
//!   four parameters: a Good and a Bad state, starting Good. For each packet, in order:
//!   1. it is lost with the probability of the state it finds: 1-K in Good, 1-H in Bad;
//!   2. the state moves: Good to Bad with probability P, Bad to Good with probability R.
//!
//!   With 1-H = 1 and 1-K = 0 (the simple Gilbert model) the Bad state is a burst of losses: the
//!   loss rate is P / (P + R) and a burst's length is geometric with mean 1 / R.

use rand::Rng;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde_json::{json, Value};

use crate::units::parse_probability;

/// A loss model as given on the command line, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    Bernoulli { p: f64 },
    GilbertElliott { p: f64, r: f64, one_minus_h: f64, one_minus_k: f64 },
}

impl LossModel {
    /// `--*-loss P`: a fraction in [0, 1].
    pub fn bernoulli(text: &str) -> Result<Self, String> {
        Ok(LossModel::Bernoulli { p: parse_probability(text)? })
    }

    /// `--*-gilbert-elliott P R 1-H 1-K`: four fractions in [0, 1], one argument each, with
    /// P + R > 0 (else the chain never moves and has no loss rate of its own).
    pub fn gilbert_elliott(values: &[String]) -> Result<Self, String> {
        let [p, r, one_minus_h, one_minus_k] = values else {
            return Err(format!("takes 4 values (P R 1-H 1-K), not {}", values.len()));
        };
        let parse = |name: &str, text: &str| parse_probability(text).map_err(|e| format!("{name}: {e}"));
        let model = LossModel::GilbertElliott {
            p: parse("P", p)?,
            r: parse("R", r)?,
            one_minus_h: parse("1-H", one_minus_h)?,
            one_minus_k: parse("1-K", one_minus_k)?,
        };
        if let LossModel::GilbertElliott { p: 0.0, r: 0.0, .. } = model {
            return Err("P and R are both 0: give P + R > 0".into());
        }
        Ok(model)
    }

    /// The long-run share of packets lost.
    pub fn mean_loss_rate(&self) -> f64 {
        match *self {
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott { p, r, one_minus_h, one_minus_k } => {
                (r * one_minus_k + p * one_minus_h) / (p + r)
            }
        }
    }

    /// The model as the summary's config records it: Bernoulli as its probability (as before
    /// there were other models), Gilbert-Elliott as its four parameters and its loss rate.
    pub fn to_json(&self) -> Value {
        match *self {
            LossModel::Bernoulli { p } => json!(p),
            LossModel::GilbertElliott { p, r, one_minus_h, one_minus_k } => json!({
                "model": "gilbert-elliott", "p": p, "r": r, "one_minus_h": one_minus_h,
                "one_minus_k": one_minus_k, "mean_loss_rate": self.mean_loss_rate(),
            }),
        }
    }
}

/// A running loss model: its generator and, for Gilbert-Elliott, its state.
pub struct Loss {
    model: LossModel,
    rng: Pcg64Mcg,
    bad: bool,
}

impl Loss {
    pub fn new(model: LossModel, seed: u64) -> Self {
        Self { model, rng: Pcg64Mcg::seed_from_u64(seed), bad: false }
    }

    /// Whether the next packet at the loss stage is lost (the module's order, one call per packet).
    pub fn lost(&mut self) -> bool {
        match self.model {
            // No draw at all without loss: the generator's stream is what it was before models.
            LossModel::Bernoulli { p } => p > 0.0 && self.rng.random::<f64>() < p,
            LossModel::GilbertElliott { p, r, one_minus_h, one_minus_k } => {
                let lost = self.rng.random::<f64>() < if self.bad { one_minus_h } else { one_minus_k };
                let moves = self.rng.random::<f64>() < if self.bad { r } else { p };
                self.bad ^= moves;
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ge(p: f64, r: f64, one_minus_h: f64, one_minus_k: f64) -> LossModel {
        LossModel::GilbertElliott { p, r, one_minus_h, one_minus_k }
    }

    fn draws(model: LossModel, n: usize, seed: u64) -> Vec<bool> {
        let mut loss = Loss::new(model, seed);
        (0..n).map(|_| loss.lost()).collect()
    }

    /// Lengths of the runs of `value` in `draws` (a run cut by either end is left out).
    fn runs(draws: &[bool], value: bool) -> Vec<usize> {
        let mut lengths = Vec::new();
        let mut current = 0;
        let mut started = false;
        for &d in draws {
            if d == value {
                current += 1;
            } else {
                if started && current > 0 {
                    lengths.push(current);
                }
                started = true;
                current = 0;
            }
        }
        lengths
    }

    #[test]
    fn bernoulli_draws_the_stream_it_always_drew() {
        // The expression the link used before loss had a module, on a generator seeded alike.
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let before: Vec<bool> = (0..10_000).map(|_| rng.random::<f64>() < 0.1).collect();
        assert_eq!(draws(LossModel::Bernoulli { p: 0.1 }, 10_000, 7), before);
        // And no draw without loss, so nothing else shares or shifts the stream.
        let mut silent = Loss::new(LossModel::Bernoulli { p: 0.0 }, 7);
        assert!((0..1000).all(|_| !silent.lost()));
        assert_eq!(silent.rng.random::<u64>(), Pcg64Mcg::seed_from_u64(7).random::<u64>());
    }

    /// Four standard errors of the loss share of `n` packets drawn from a Gilbert-Elliott chain.
    /// The losses are correlated through the state, so the variance of the share is not the
    /// binomial mu (1 - mu) / n: the state's autocorrelation at lag k is lambda^k with
    /// lambda = 1 - P - R, which adds 2 (h_bad - h_good)^2 pi_bad pi_good lambda / (1 - lambda).
    fn four_sigma_of_loss_share(model: LossModel, n: f64) -> f64 {
        let LossModel::GilbertElliott { p, r, one_minus_h, one_minus_k } = model else { unreachable!() };
        let (pi_bad, mu) = (p / (p + r), model.mean_loss_rate());
        let lambda = 1.0 - p - r;
        let correlated = 2.0 * (one_minus_h - one_minus_k).powi(2) * pi_bad * (1.0 - pi_bad) * lambda / (1.0 - lambda);
        4.0 * ((mu * (1.0 - mu) + correlated) / n).sqrt()
    }

    #[test]
    fn gilbert_elliott_loses_its_stationary_rate() {
        // pi_bad = p / (p + r); loss = pi_good (1-k) + pi_bad (1-h) = 0.0685 here. Over 2e6
        // packets four standard errors of the share are 2.2 % of it (bursts of ~4 packets are
        // correlated, so that is 2.7 times the binomial error).
        let model = ge(0.02, 0.25, 0.8, 0.01);
        let expected = (0.25 * 0.01 + 0.02 * 0.8) / 0.27;
        assert!((model.mean_loss_rate() - expected).abs() < 1e-12);
        let tolerance = four_sigma_of_loss_share(model, 2e6);
        assert!(tolerance < 0.025 * expected, "{tolerance}: too few draws to tell a wrong rate");
        for seed in [1, 2, 3] {
            let lost = draws(model, 2_000_000, seed).iter().filter(|&&l| l).count() as f64 / 2e6;
            assert!((lost - expected).abs() < tolerance, "seed {seed}: {lost} against {expected} +- {tolerance}");
        }
    }

    #[test]
    fn simple_gilbert_bursts_are_geometric_with_mean_one_over_r() {
        // 1-h = 1, 1-k = 0: losses are exactly the Bad state's packets, so a burst lasts a
        // geometric number of packets, P(n) = (1-r)^(n-1) r, mean 1/r = 4, standard deviation
        // sqrt(1-r) / r; the gaps between bursts likewise with mean 1/p. A Bernoulli loss of the
        // same rate would give bursts of mean 1 / (1 - 0.0385) = 1.04. Each tolerance is four
        // standard errors of what is measured, from the number of bursts or packets drawn.
        let (p, r) = (0.01, 0.25);
        let model = ge(p, r, 1.0, 0.0);
        let all = draws(model, 4_000_000, 11);
        let rate = all.iter().filter(|&&l| l).count() as f64 / all.len() as f64;
        let tolerance = four_sigma_of_loss_share(model, all.len() as f64);
        assert!((rate - p / (p + r)).abs() < tolerance, "{rate} +- {tolerance}");
        let bursts = runs(&all, true);
        let gaps = runs(&all, false);
        assert!(bursts.len() > 30_000, "{}", bursts.len());
        let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
        let four_se = |q: f64, count: usize| 4.0 * (1.0 - q).sqrt() / q / (count as f64).sqrt();
        assert!((mean(&bursts) - 1.0 / r).abs() < four_se(r, bursts.len()), "mean burst {}", mean(&bursts));
        assert!((mean(&gaps) - 1.0 / p).abs() < four_se(p, gaps.len()), "mean gap {}", mean(&gaps));
        // The distribution, length by length, against the geometric one (each within 4 standard
        // errors of a binomial share); the tail beyond 12 together.
        let n = bursts.len() as f64;
        let share_within = |seen: f64, expected: f64, what: &str| {
            let sigma = (expected * (1.0 - expected) / n).sqrt();
            assert!((seen - expected).abs() < 4.0 * sigma, "{what} = {seen}, geometric {expected}");
        };
        for length in 1..=12 {
            let seen = bursts.iter().filter(|&&b| b == length).count() as f64 / n;
            share_within(seen, (1.0 - r).powi(length as i32 - 1) * r, &format!("P(burst = {length})"));
        }
        share_within(bursts.iter().filter(|&&b| b > 12).count() as f64 / n, (1.0 - r).powi(12), "P(burst > 12)");
    }

    #[test]
    fn the_bad_state_loses_one_minus_h_and_the_good_one_minus_k() {
        // Never leaving a state isolates its loss probability: 1-k in Good (the start), 1-h in Bad.
        let in_good = draws(ge(0.0, 1.0, 1.0, 0.05), 200_000, 5);
        let good = in_good.iter().filter(|&&l| l).count() as f64 / 2e5;
        assert!((good - 0.05).abs() < 0.003, "{good}");
        let in_bad = draws(ge(1.0, 0.0, 0.7, 0.0), 200_000, 5);
        let bad = in_bad[1..].iter().filter(|&&l| l).count() as f64 / (2e5 - 1.0);
        assert!((bad - 0.7).abs() < 0.005, "{bad}");
        assert!(!in_bad[0], "the first packet finds the Good state, which loses nothing here");
    }

    #[test]
    fn the_same_seed_drops_the_same_packets() {
        let model = ge(0.05, 0.3, 1.0, 0.0);
        assert_eq!(draws(model, 10_000, 3), draws(model, 10_000, 3));
        assert_ne!(draws(model, 10_000, 3), draws(model, 10_000, 4));
    }

    #[test]
    fn bad_values_are_named_with_their_range() {
        let values = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let error = LossModel::gilbert_elliott(&values(&["0.1", "1.5", "1", "0"])).unwrap_err();
        assert!(error.starts_with("R: 1.5 is outside [0, 1]"), "{error}");
        let error = LossModel::gilbert_elliott(&values(&["0", "0", "1", "0"])).unwrap_err();
        assert_eq!(error, "P and R are both 0: give P + R > 0");
        let error = LossModel::gilbert_elliott(&values(&["0.1", "x", "1", "0"])).unwrap_err();
        assert!(error.starts_with("R: \"x\" is not a number"), "{error}");
    }
}
