//! A delay trace: one direction's one-way delay as a step function of time, read from a file.
//!
//! The file is text, one step a line: `T_MS DELAY_MS`, two numbers (floats allowed): the time in
//! milliseconds since the link started (non-decreasing from line to line) and the one-way delay in
//! milliseconds from then on. Blank lines and lines starting with `#` are skipped. Before the
//! first step the direction's fixed delay (`--*-delay`) applies; from each step's time on, its
//! delay; after the last step its delay holds (the trace does not repeat). Of several steps at
//! one time the last one counts.
//!
//! A packet that leaves the bottleneck at t is due at t + D(t) (plus a jitter's draw, where one
//! is given): `link.rs` keeps the delay line a FIFO, so a packet never leaves before the one ahead
//! of it when the delay falls (with jitter `reorder`, packets overtake as jitter lets them).
//!
//! Bounds, each refused naming the file, the line and the range: at most `MAX_STEPS` steps in a
//! file of at most `MAX_FILE_BYTES` (read no further), delays in [0, 10 s], times in [0, 10^7 ms].

use std::fs::File;
use std::io::Read;

use serde_json::{json, Value};

/// The most steps a trace may have.
pub const MAX_STEPS: usize = 1_000_000;
/// The largest file read (64 MiB): a million steps of two long floats fit many times over.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The longest delay a step may give: 10 s, as the longest jitter.
pub const MAX_DELAY_MS: f64 = 10_000.0;
/// The latest time a step may start at: 10^7 ms (2.8 hours), beyond any link's life.
pub const MAX_TIME_MS: f64 = 10_000_000.0;

/// From `at_ns` (since the link started) on, the one-way delay is `delay_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    at_ns: u64,
    delay_ns: u64,
}

/// A validated delay trace, with what the wake-ups need precomputed.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayTrace {
    path: String,
    steps: Vec<Step>,
    /// `soonest_ns[i]`: the earliest due time of a packet leaving at step i's time or later,
    /// min over j >= i of `at_ns + delay_ns` of step j (each step's own delay grows no packet's
    /// due time less than its start does).
    soonest_ns: Vec<u64>,
}

impl DelayTrace {
    /// Reads and validates the file at `path`, reading no more than `MAX_FILE_BYTES` of it.
    pub fn load(path: &str) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("{path}: {e}"))?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("{path}: {e}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("{path}: larger than 64 MiB (a delay trace has at most {MAX_FILE_BYTES} bytes)"));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|b| **b == b'\n').count();
            format!("{path}:{line}: not UTF-8 text (a line is `T_MS DELAY_MS`)")
        })?;
        Self::parse(&text, path)
    }

    /// Validates the text of a trace; `origin` names it in errors, which name the line too.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut steps: Vec<Step> = Vec::new();
        let mut last_ms = 0.0;
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |what: String| format!("{origin}:{}: {what}", index + 1);
            if steps.len() == MAX_STEPS {
                return Err(at(format!("more than {MAX_STEPS} steps (a delay trace has at most {MAX_STEPS})")));
            }
            let numbers: Vec<Option<f64>> = line.split_whitespace().map(|word| word.parse().ok()).collect();
            let [Some(t_ms), Some(delay_ms)] = numbers[..] else {
                return Err(at("not `T_MS DELAY_MS` (two numbers: ms since the link started, the delay in ms)".into()));
            };
            if !(0.0..=MAX_TIME_MS).contains(&t_ms) {
                return Err(at(format!("time {t_ms} ms is outside [0, {MAX_TIME_MS}] ms")));
            }
            if t_ms < last_ms {
                return Err(at(format!("time {t_ms} ms is before the previous step's {last_ms} ms (times never decrease)")));
            }
            if !(0.0..=MAX_DELAY_MS).contains(&delay_ms) {
                return Err(at(format!("delay {delay_ms} ms is outside [0, {MAX_DELAY_MS}] ms")));
            }
            last_ms = t_ms;
            steps.push(Step { at_ns: ms_to_ns(t_ms), delay_ns: ms_to_ns(delay_ms) });
        }
        if steps.is_empty() {
            return Err(format!("{origin}: no steps (a delay trace has at least one line `T_MS DELAY_MS`)"));
        }
        let mut soonest_ns = vec![u64::MAX; steps.len()];
        let mut soonest = u64::MAX;
        for (i, step) in steps.iter().enumerate().rev() {
            soonest = soonest.min(step.at_ns + step.delay_ns);
            soonest_ns[i] = soonest;
        }
        Ok(Self { path: origin.to_string(), steps, soonest_ns })
    }

    /// The trace as the summary's configuration echoes it.
    pub fn to_json(&self) -> Value {
        let delays = self.steps.iter().map(|step| step.delay_ns);
        let (min, max) = (delays.clone().min().unwrap_or(0), delays.max().unwrap_or(0));
        json!({"path": self.path, "steps": self.steps.len(), "min_delay_us": min as f64 / 1e3,
               "max_delay_us": max as f64 / 1e3})
    }

    /// How many steps start at or before `t_ns`.
    fn started(&self, t_ns: u64) -> usize {
        self.steps.partition_point(|step| step.at_ns <= t_ns)
    }

    /// The one-way delay at `t_ns`: `fixed_ns` (the direction's `--*-delay`) before the first step,
    /// else the delay of the last step started.
    pub fn delay_ns(&self, t_ns: u64, fixed_ns: u64) -> u64 {
        match self.started(t_ns) {
            0 => fixed_ns,
            i => self.steps[i - 1].delay_ns,
        }
    }

    /// The earliest a packet that leaves the bottleneck at `t_ns` or later can be due, when a
    /// packet's delay may fall short of D by up to `advance_ns` (a jitter's reach), never below
    /// zero: a lower bound of t' + max(D(t') - advance, 0) over every t' >= t. Within one step
    /// that grows with t', so its least is at t or at a later step's start: with no advance it
    /// is exact; with one, each later step counts no sooner than its start.
    pub fn earliest_due_ns(&self, t_ns: u64, fixed_ns: u64, advance_ns: u64) -> u64 {
        let i = self.started(t_ns);
        let now = t_ns + self.delay_ns(t_ns, fixed_ns).saturating_sub(advance_ns);
        match self.soonest_ns.get(i) {
            Some(later) => now.min(later.saturating_sub(advance_ns).max(self.steps[i].at_ns)),
            None => now,
        }
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn trace(text: &str) -> DelayTrace {
        DelayTrace::parse(text, "d.trace").unwrap()
    }

    fn error(text: &str) -> String {
        DelayTrace::parse(text, "d.trace").unwrap_err()
    }

    #[test]
    fn steps_parse_with_comments_blank_lines_and_fractions() {
        let parsed = trace("# rises, then falls\n\n1000 60\n  2500.5\t10.25  \n2500.5 12\n");
        let at: Vec<(u64, u64)> = parsed.steps.iter().map(|s| (s.at_ns, s.delay_ns)).collect();
        assert_eq!(at, vec![(1000 * MS, 60 * MS), (2_500_500_000, 10_250_000), (2_500_500_000, 12 * MS)]);
        let echoed = parsed.to_json();
        assert_eq!((echoed["path"].as_str(), echoed["steps"].as_u64()), (Some("d.trace"), Some(3)));
        assert_eq!((echoed["min_delay_us"].as_f64(), echoed["max_delay_us"].as_f64()), (Some(10_250.0), Some(60_000.0)));
    }

    #[test]
    fn the_delay_is_fixed_before_the_first_step_each_steps_from_its_time_and_the_last_holds() {
        let d = trace("10 50\n20 5\n20 7\n30 0\n");
        let fixed = 20 * MS;
        let at = |ms: f64| d.delay_ns((ms * 1e6) as u64, fixed) as f64 / 1e6;
        assert_eq!([at(0.0), at(9.999999)], [20.0, 20.0], "before the first step: the fixed delay");
        assert_eq!([at(10.0), at(15.0), at(19.999999)], [50.0, 50.0, 50.0], "from a step's time on: its delay");
        assert_eq!(at(20.0), 7.0, "of two steps at one time the last counts");
        assert_eq!([at(30.0), at(1e6)], [0.0, 0.0], "after the last step its delay holds, no repeat");
        assert_eq!(trace("0 3\n").delay_ns(0, fixed), 3 * MS, "a step at 0 replaces the fixed delay at once");
    }

    /// t' + max(D(t') - advance, 0), minimised over t' from `t_ns` to past the last step in 1 us steps.
    fn scanned(d: &DelayTrace, t_ns: u64, fixed_ns: u64, advance_ns: u64) -> u64 {
        (t_ns..=(d.steps.last().unwrap().at_ns + MS).max(t_ns))
            .step_by(1_000)
            .map(|t| t + d.delay_ns(t, fixed_ns).saturating_sub(advance_ns))
            .min()
            .unwrap()
    }

    #[test]
    fn the_earliest_due_time_is_exact_without_jitter_and_never_late_with_it() {
        let d = trace("5 50\n8 100\n12 1\n15 40\n18 2\n");
        for fixed_ms in [0, 30] {
            for t_us in (0..20_000).step_by(250) {
                let t = t_us * 1_000;
                assert_eq!(d.earliest_due_ns(t, fixed_ms * MS, 0), scanned(&d, t, fixed_ms * MS, 0), "t {t_us} us");
                for advance in [MS / 2, 3 * MS, 200 * MS] {
                    let bound = d.earliest_due_ns(t, fixed_ms * MS, advance);
                    assert!(bound <= scanned(&d, t, fixed_ms * MS, advance), "t {t_us} us, advance {advance}");
                    assert!(bound >= t, "never before the departure");
                }
            }
        }
        // Before the fall at 12 ms a packet leaving at 4 ms is due at 34 ms on the fixed 30 ms, but
        // one leaving at 12 ms is due at 13 ms: the wake-up must be planned for that one.
        assert_eq!(d.earliest_due_ns(4 * MS, 30 * MS, 0), 13 * MS);
        assert_eq!(d.earliest_due_ns(19 * MS, 30 * MS, 0), 21 * MS);
    }

    #[test]
    fn bad_lines_name_the_file_the_line_and_what_is_allowed() {
        assert_eq!(error("0 10\n10 20000\n"), "d.trace:2: delay 20000 ms is outside [0, 10000] ms");
        assert_eq!(error("# c\n0 -1\n"), "d.trace:2: delay -1 ms is outside [0, 10000] ms");
        assert_eq!(error("0 NaN\n"), "d.trace:1: delay NaN ms is outside [0, 10000] ms");
        assert_eq!(error("20000000 5\n"), "d.trace:1: time 20000000 ms is outside [0, 10000000] ms");
        assert_eq!(error("-1 5\n"), "d.trace:1: time -1 ms is outside [0, 10000000] ms");
        assert_eq!(error("10 5\n\n9.5 5\n"),
                   "d.trace:3: time 9.5 ms is before the previous step's 10 ms (times never decrease)");
        let shape = "not `T_MS DELAY_MS` (two numbers: ms since the link started, the delay in ms)";
        for bad in ["10\n", "10 5 3\n", "10 5ms\n", "10 5 # a note\n"] {
            assert_eq!(error(bad), format!("d.trace:1: {shape}"), "{bad:?}");
        }
        assert_eq!(error("# nothing\n\n"), "d.trace: no steps (a delay trace has at least one line `T_MS DELAY_MS`)");
    }

    #[test]
    fn a_million_steps_pass_and_one_more_does_not() {
        let mut text: String = (0..MAX_STEPS).map(|i| format!("{i} 1\n")).collect();
        assert_eq!(trace(&text).steps.len(), MAX_STEPS);
        text.push_str("# the next line is one too many\n2000000 1\n");
        assert_eq!(error(&text), format!("d.trace:{}: more than 1000000 steps (a delay trace has at most 1000000)",
                                         MAX_STEPS + 2));
    }

    #[test]
    fn a_file_is_read_only_up_to_its_bound() {
        let dir = std::env::temp_dir();
        let (small, large) = (dir.join(format!("ccsweep-dt-{}-s", std::process::id())),
                              dir.join(format!("ccsweep-dt-{}-l", std::process::id())));
        std::fs::write(&small, "0 10\n1000 60\n").unwrap();
        let loaded = DelayTrace::load(small.to_str().unwrap()).unwrap();
        assert_eq!(loaded.to_json()["path"].as_str(), small.to_str());
        // One byte over 64 MiB: refused by its size, before any line is parsed.
        let file = std::fs::File::create(&large).unwrap();
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        let refused = DelayTrace::load(large.to_str().unwrap()).unwrap_err();
        for path in [&small, &large] {
            std::fs::remove_file(path).unwrap();
        }
        assert!(refused.ends_with(": larger than 64 MiB (a delay trace has at most 67108864 bytes)"), "{refused}");
        assert!(DelayTrace::load("/nonexistent/d").unwrap_err().starts_with("/nonexistent/d: "));
        std::fs::write(&small, b"0 10\n\xff 1\n").unwrap();
        let not_text = DelayTrace::load(small.to_str().unwrap()).unwrap_err();
        std::fs::remove_file(&small).unwrap();
        assert!(not_text.ends_with(":2: not UTF-8 text (a line is `T_MS DELAY_MS`)"), "{not_text}");
    }
}
