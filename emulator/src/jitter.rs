//! Delay variation (jitter) of one direction, drawn as netem's `delay D J distribution NAME` draws it.
//!
//! For each packet that leaves the bottleneck (and survives a loss "after" it), in order:
//! 1. an offset is drawn around the direction's delay D: uniform in [-J, J) (netem's default), or
//!    J times a value picked uniformly from a netem distribution table (`normal`, `pareto`,
//!    `paretonormal`: iproute2's NAME.dist, 4096 values scaled by 8192, so one unit of J is one
//!    standard deviation of `normal`), rounded to the nanosecond as netem's `tabledist` rounds;
//! 2. the packet is due at departure + D + offset, but never before its departure (a delay is
//!    never negative);
//! 3. with order `keep`, never before the packet ahead of it either (a FIFO delay line, as a
//!    link that jitters but does not reorder); with `reorder`, packets leave by their own due
//!    times (netem's tfifo), so a packet may overtake the ones ahead of it.
//!
//! The tables are read from iproute2's own files (the ones `tc` loads into netem), so a
//! distribution here is netem's exactly; ccsweep ships no copy of them.

use std::path::{Path, PathBuf};

use rand::Rng;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde_json::{json, Value};

use crate::units::parse_duration_ns;

/// netem's NETEM_DIST_SCALE: a table value of 8192 is one J.
const DIST_SCALE: i64 = 8192;
/// The largest jitter, 10 s: beyond it a packet's delay is no longer a delay variation.
pub const MAX_JITTER_NS: u64 = 10_000_000_000;
/// The most values a table may hold (iproute2's have 4096; netem takes up to 2^16).
const MAX_TABLE_VALUES: usize = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Uniform,
    Normal,
    Pareto,
    ParetoNormal,
}

impl Distribution {
    fn parse(text: &str) -> Result<Self, String> {
        match text {
            "uniform" => Ok(Self::Uniform),
            "normal" => Ok(Self::Normal),
            "pareto" => Ok(Self::Pareto),
            "paretonormal" => Ok(Self::ParetoNormal),
            _ => Err(format!("distribution {text:?} is not one of uniform, normal, pareto, paretonormal")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Normal => "normal",
            Self::Pareto => "pareto",
            Self::ParetoNormal => "paretonormal",
        }
    }
}

/// Whether a packet may leave before the one ahead of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Keep,
    Reorder,
}

/// Jitter as given on the command line, validated, with its table (if it draws from one) loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct JitterSpec {
    pub jitter_ns: u64,
    pub distribution: Distribution,
    pub order: Order,
    /// The table's file and values, for every distribution but `uniform`.
    table: Option<(PathBuf, Vec<i64>)>,
}

impl JitterSpec {
    /// `--*-jitter JITTER DISTRIBUTION ORDER`, e.g. `5ms normal keep`; tables come from `tables`
    /// (`--jitter-tables`, else iproute2's folder: `tc_lib_dir`).
    pub fn parse(values: &[String], tables: Option<&Path>) -> Result<Self, String> {
        let [jitter, distribution, order] = values else {
            return Err(format!("takes 3 values (JITTER DISTRIBUTION ORDER), not {}", values.len()));
        };
        let jitter_ns = parse_duration_ns(jitter)?;
        if !(1..=MAX_JITTER_NS).contains(&jitter_ns) {
            return Err(format!("jitter {jitter:?} is outside [1ns, 10s]"));
        }
        let distribution = Distribution::parse(distribution)?;
        let order = match order.as_str() {
            "keep" => Order::Keep,
            "reorder" => Order::Reorder,
            _ => return Err(format!("order {order:?} is not keep or reorder")),
        };
        let table = match distribution {
            Distribution::Uniform => None,
            _ => {
                let folder = match tables {
                    Some(folder) => folder.to_path_buf(),
                    None => tc_lib_dir().ok_or("no iproute2 distribution tables found (install iproute2, or give --jitter-tables DIR)")?,
                };
                let path = folder.join(format!("{}.dist", distribution.name()));
                let values = read_table(&path)?;
                Some((path, values))
            }
        };
        Ok(Self { jitter_ns, distribution, order, table })
    }

    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "jitter_us": self.jitter_ns as f64 / 1e3,
            "distribution": self.distribution.name(),
            "order": match self.order { Order::Keep => "keep", Order::Reorder => "reorder" },
        });
        if let Some((path, values)) = &self.table {
            out["table"] = json!({"path": path.display().to_string(), "values": values.len()});
        }
        out
    }
}

/// iproute2's folder of netem tables, as `tc` finds it: $TC_LIB_DIR, else the multiarch library
/// folder Debian installs them in, else /usr/lib/tc.
fn tc_lib_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("TC_LIB_DIR").map(PathBuf::from),
        Some(PathBuf::from(format!("/usr/lib/{}-linux-gnu/tc", std::env::consts::ARCH))),
        Some(PathBuf::from("/usr/lib/tc")),
    ];
    candidates.into_iter().flatten().find(|dir| dir.join("normal.dist").is_file())
}

/// A netem distribution table: whitespace-separated integers, `#` starting a comment line.
fn read_table(path: &Path) -> Result<Vec<i64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let values: Vec<i64> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(str::split_whitespace)
        .map(|word| word.parse::<i16>().map(i64::from))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{}: not a netem distribution table (a value is not a 16-bit integer)", path.display()))?;
    if values.is_empty() || values.len() > MAX_TABLE_VALUES {
        return Err(format!("{}: {} values, outside [1, {MAX_TABLE_VALUES}]", path.display(), values.len()));
    }
    Ok(values)
}

/// A direction's running jitter: its own random stream, and the last due time when order is kept.
pub struct Jitter {
    spec: JitterSpec,
    rng: Pcg64Mcg,
    last_due_ns: u64,
}

impl Jitter {
    pub fn new(spec: JitterSpec, seed: u64) -> Self {
        Self { spec, rng: Pcg64Mcg::seed_from_u64(seed), last_due_ns: 0 }
    }

    /// The most a packet's delay may fall short of the direction's delay: a release is never
    /// earlier than departure + max(delay - this, 0).
    pub fn reach_ns(&self) -> u64 {
        match &self.spec.table {
            None => self.spec.jitter_ns,
            Some((_, values)) => {
                let lowest = values.iter().copied().min().unwrap_or(0).min(0);
                (lowest.unsigned_abs() * self.spec.jitter_ns).div_ceil(DIST_SCALE as u64)
            }
        }
    }

    /// When a packet that left the bottleneck at `departure_ns` is due, on a path of `delay_ns`.
    pub fn due_ns(&mut self, departure_ns: u64, delay_ns: u64) -> u64 {
        let offset = self.offset_ns();
        let due = departure_ns.saturating_add(delay_ns).saturating_add_signed(offset).max(departure_ns);
        match self.spec.order {
            Order::Keep => {
                self.last_due_ns = self.last_due_ns.max(due);
                self.last_due_ns
            }
            Order::Reorder => due,
        }
    }

    /// Whether packets leave by their own due times, overtaking those ahead.
    pub fn reorders(&self) -> bool {
        self.spec.order == Order::Reorder
    }

    /// One draw around the delay, as netem's `tabledist(mu = 0, sigma = J)`.
    fn offset_ns(&mut self) -> i64 {
        let sigma = self.spec.jitter_ns as i64;
        match &self.spec.table {
            None => self.rng.random_range(-sigma..sigma),
            Some((_, values)) => {
                let t = values[self.rng.random_range(0..values.len())];
                let scaled = (sigma % DIST_SCALE) * t;
                let rounded = if scaled >= 0 { scaled + DIST_SCALE / 2 } else { scaled - DIST_SCALE / 2 };
                rounded / DIST_SCALE + (sigma / DIST_SCALE) * t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn draws(spec: &[&str], n: usize) -> Vec<i64> {
        let mut jitter = Jitter::new(JitterSpec::parse(&strings(spec), None).unwrap(), 7);
        (0..n).map(|i| jitter.due_ns(i as u64 * 1_000, 100_000_000) as i64 - i as i64 * 1_000 - 100_000_000).collect()
    }

    /// Four standard errors of a share measured over `n` independent draws whose expectation is `q`.
    fn four_sigma(q: f64, n: usize) -> f64 {
        4.0 * (q * (1.0 - q) / n as f64).sqrt()
    }

    /// The share of `offsets` below `x`: the empirical distribution function, which for every x
    /// is a binomial share, so its tolerance follows from the number of draws alone.
    fn share_below(offsets: &[i64], x: f64) -> f64 {
        offsets.iter().filter(|&&o| (o as f64) < x).count() as f64 / offsets.len() as f64
    }

    #[test]
    fn uniform_offsets_fill_minus_j_to_j_evenly() {
        let offsets = draws(&["10ms", "uniform", "reorder"], 200_000);
        // U[-J, J): the share below J (2q - 1) is q, within four binomial standard errors
        // (at most 0.45 % of the draws at 200,000); so is the share between any two quantiles.
        for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
            let seen = share_below(&offsets, 10e6 * (2.0 * q - 1.0));
            assert!((seen - q).abs() < four_sigma(q, offsets.len()), "share below the q{q} quantile: {seen}");
        }
        assert!(offsets.iter().all(|&o| (-10_000_000..10_000_000).contains(&o)));
    }

    #[test]
    fn normal_offsets_have_the_normal_quantiles_in_units_of_j() {
        let offsets = draws(&["2ms", "normal", "reorder"], 200_000);
        let spec = JitterSpec::parse(&strings(&["2ms", "normal", "reorder"]), None).unwrap();
        let (_, table) = spec.table.as_ref().unwrap();
        // Two steps: the draws pick table values uniformly, so the share below z J is the table's
        // share below z (times 8192), within four binomial standard errors; and the table is the
        // standard normal's quantile function sampled at 4096 points, so its share below z is
        // Phi(z) to within a few of its 1/4096 steps.
        for (z, phi) in [(-2.0, 0.022_750_1), (-1.0, 0.158_655_3), (0.0, 0.5), (1.0, 0.841_344_7), (2.0, 0.977_249_9)] {
            let in_table = table.iter().filter(|&&t| (t as f64) < z * DIST_SCALE as f64).count() as f64 / table.len() as f64;
            assert!((in_table - phi).abs() < 3.0 / table.len() as f64, "table share below {z}: {in_table}, Phi {phi}");
            let seen = share_below(&offsets, z * 2e6);
            assert!((seen - in_table).abs() < four_sigma(in_table, offsets.len()), "share below {z} J: {seen}");
        }
    }

    #[test]
    fn reordering_overtakes_at_the_rate_the_jitter_implies() {
        // Packets depart every gap g and draw offsets X_i from U[-J, J), with D >= J so none is
        // held at its departure: packet i+1 overtakes packet i when X_(i+1) - X_i < -g. The
        // difference of two uniforms is triangular on [-2J, 2J], so that happens with
        // probability (2J - g)^2 / (8 J^2). The indicators of neighbouring pairs are negatively
        // correlated, so the binomial error bounds their share's.
        let jitter_ns = 5_000_000u64;
        for gap_ns in [1_000_000u64, 2_000_000, 6_000_000] {
            let mut jitter = Jitter::new(JitterSpec::parse(&strings(&["5ms", "uniform", "reorder"]), None).unwrap(), 3);
            let dues: Vec<u64> = (0..200_001u64).map(|i| jitter.due_ns(i * gap_ns, 20_000_000)).collect();
            let overtaken = dues.windows(2).filter(|w| w[1] < w[0]).count() as f64 / 200_000.0;
            let (j, g) = (jitter_ns as f64, gap_ns as f64);
            let expected = (2.0 * j - g).powi(2) / (8.0 * j * j);
            assert!((overtaken - expected).abs() < four_sigma(expected, 200_000), "gap {g}: {overtaken} against {expected}");
        }
    }

    #[test]
    fn a_delay_is_never_negative_and_kept_order_never_overtakes() {
        // J far above D, packets 0.1 ms apart: many draws would go negative, and neighbours cross.
        let spec = |order: &str| JitterSpec::parse(&strings(&["50ms", "uniform", order]), None).unwrap();
        let (mut keep, mut reorder) = (Jitter::new(spec("keep"), 1), Jitter::new(spec("reorder"), 1));
        let (mut last_kept, mut last_free, mut overtakes) = (0, 0, 0);
        for i in 0..10_000u64 {
            let departure = i * 100_000;
            let kept = keep.due_ns(departure, 10_000_000);
            assert!(kept >= departure && kept >= last_kept);
            last_kept = kept;
            let free = reorder.due_ns(departure, 10_000_000);
            assert!(free >= departure);
            overtakes += u32::from(free < last_free);
            last_free = free;
        }
        assert!(overtakes > 1_000, "{overtakes}");
        assert_eq!(reorder.reach_ns(), 50_000_000);
    }

    #[test]
    fn bad_values_name_what_is_allowed() {
        let error = |values: &[&str]| JitterSpec::parse(&strings(values), None).unwrap_err();
        assert!(error(&["0ms", "uniform", "keep"]).contains("outside [1ns, 10s]"));
        assert!(error(&["1ms", "gamma", "keep"]).contains("not one of uniform, normal, pareto, paretonormal"));
        assert!(error(&["1ms", "normal", "sideways"]).contains("not keep or reorder"));
        assert!(error(&["1ms", "normal"]).contains("takes 3 values"));
        let missing = JitterSpec::parse(&strings(&["1ms", "normal", "keep"]), Some(Path::new("/nonexistent")));
        assert!(missing.unwrap_err().starts_with("/nonexistent/normal.dist: "));
    }
}
