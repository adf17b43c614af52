//! When the event loop sleeps, for how long, and when it busy-waits instead.
//!
//! Under virtualisation a sleep is expensive: arming the timer and coming back from it cost
//! VM exits, measured at about 20 us of CPU per sleep on a KVM guest, and the timer fires tens
//! to hundreds of microseconds late. So the loop (1) spins instead of sleeping when the wait is
//! shorter than what a sleep costs, (2) lets one wake-up serve every release due within a short
//! window (`--release-window`), and (3) wakes early by the wake-up latency it observes and spins the
//! rest, but never spins longer than a small share of the time it slept, so the CPU this costs
//! stays bounded. A packet is still only written once its due time has passed.

use crate::error::Error;
use crate::lateness::Lateness;
use crate::sys;

/// Timer overshoots kept to estimate how late a sleep ends.
const LATENCY_SAMPLES: usize = 32;
/// The overshoot the loop plans for: the 29th of 32 sorted samples, about the 90th percentile.
const LATENCY_RANK: usize = 28;
/// Busy-waiting after a sleep is at most 1/50 of the sleep: at most 2% of a core.
const SPIN_SHARE_DIVISOR: u64 = 50;
/// A sleep measured as costlier than this is taken as this: spinning instead stays cheap even
/// if the start-up measurement was disturbed.
const MAX_SLEEP_COST_NS: u64 = 50_000;
/// Length of each start-up sleep, about what the loop sleeps between releases at low rates.
const CALIBRATION_SLEEP_NS: u64 = 500_000;

/// How late the timer wakes us, from the most recent sleeps that ended by timing out.
pub struct WakeLatency {
    recent_ns: [u64; LATENCY_SAMPLES],
    recorded: usize,
    estimate_ns: u64,
}

impl WakeLatency {
    fn new() -> Self {
        Self { recent_ns: [0; LATENCY_SAMPLES], recorded: 0, estimate_ns: 0 }
    }

    /// Records how late one sleep ended; the estimate is renewed every LATENCY_SAMPLES sleeps
    /// from those sleeps alone, so it follows the machine's current load.
    pub fn record(&mut self, overshoot_ns: u64) {
        self.recent_ns[self.recorded % LATENCY_SAMPLES] = overshoot_ns;
        self.recorded += 1;
        if self.recorded.is_multiple_of(LATENCY_SAMPLES) {
            let mut sorted = self.recent_ns;
            sorted.sort_unstable();
            self.estimate_ns = sorted[LATENCY_RANK];
        }
    }

    pub fn estimate_ns(&self) -> u64 {
        self.estimate_ns
    }
}

/// What the loop does until its next pass.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait {
    /// Poll the devices without sleeping: the next pass is too close for a sleep to pay.
    Spin,
    /// Sleep this long (or until a device is readable), then spin the rest.
    Sleep(u64),
    /// Nothing is planned: sleep until a device is readable.
    Idle,
}

impl Wait {
    /// The epoll timeout: zero to poll, none to wait for a device.
    pub fn timeout_ns(&self) -> Option<u64> {
        match self {
            Wait::Spin => Some(0),
            Wait::Sleep(ns) => Some(*ns),
            Wait::Idle => None,
        }
    }
}

/// A planned sleep: when it should end and the pass it ends early for.
struct Sleep {
    ends_ns: u64,
    target_ns: u64,
}

pub struct Pacer {
    /// `--spin`: always wake at least this early and spin the rest.
    fixed_spin_ns: u64,
    /// CPU one sleep costs, measured at start-up: shorter waits are spun.
    sleep_cost_ns: u64,
    pub latency: WakeLatency,
    /// The sleep in progress, if the last wait was one.
    sleep: Option<Sleep>,
    /// After a sleep that ended early on purpose: spin until this pass instead of sleeping again.
    spin_until_ns: Option<u64>,
    /// Sleeps that ended by timing out (not by a readable device).
    pub timed_sleeps: u64,
    /// How long after its planned end each of those sleeps returned: every one, for the summary
    /// (`latency` keeps only the last few, to plan with).
    pub overshoot: Lateness,
}

impl Pacer {
    pub fn new(fixed_spin_ns: u64, sleep_cost_ns: u64) -> Self {
        Self {
            fixed_spin_ns,
            sleep_cost_ns: sleep_cost_ns.min(MAX_SLEEP_COST_NS),
            latency: WakeLatency::new(),
            sleep: None,
            spin_until_ns: None,
            timed_sleeps: 0,
            overshoot: Lateness::default(),
        }
    }

    /// Measures, before any traffic, what a sleep costs in CPU and how late it ends, with the
    /// same call the loop sleeps in (an epoll with nothing registered, so only the timer ends it).
    pub fn calibrate(fixed_spin_ns: u64) -> Result<Self, Error> {
        let idle = sys::Epoll::new()?;
        let mut tokens = Vec::new();
        let mut costs_ns = [0u64; LATENCY_SAMPLES];
        let mut overshoots_ns = [0u64; LATENCY_SAMPLES];
        for (cost, overshoot) in costs_ns.iter_mut().zip(overshoots_ns.iter_mut()) {
            let cpu_before = sys::thread_cpu_ns();
            let due = sys::monotonic_ns() + CALIBRATION_SLEEP_NS;
            idle.wait(Some(CALIBRATION_SLEEP_NS), &mut tokens)?;
            *overshoot = sys::monotonic_ns().saturating_sub(due);
            *cost = sys::thread_cpu_ns() - cpu_before;
        }
        costs_ns.sort_unstable();
        let mut pacer = Self::new(fixed_spin_ns, costs_ns[LATENCY_SAMPLES / 2]);
        overshoots_ns.iter().for_each(|ns| pacer.latency.record(*ns));
        Ok(pacer)
    }

    pub fn sleep_cost_ns(&self) -> u64 {
        self.sleep_cost_ns
    }

    /// How much earlier than `target` a sleep of about `sleep_ns` should end: the observed
    /// wake-up latency, bounded by the spin budget, and at least `--spin`.
    fn early_ns(&self, sleep_ns: u64) -> u64 {
        let budget_ns = sleep_ns / SPIN_SHARE_DIVISOR;
        self.latency.estimate_ns().min(budget_ns).max(self.fixed_spin_ns)
    }

    /// What to do from `now_ns` until the next pass, if one is planned.
    pub fn wait(&mut self, now_ns: u64, target_ns: Option<u64>) -> Wait {
        self.sleep = None;
        let Some(target_ns) = target_ns else { return Wait::Idle };
        if self.spin_until_ns.is_some_and(|until| now_ns < until && target_ns <= until) {
            return Wait::Spin;
        }
        self.spin_until_ns = None;
        let until_target_ns = target_ns.saturating_sub(now_ns);
        let early_ns = self.early_ns(until_target_ns);
        if until_target_ns <= self.sleep_cost_ns || until_target_ns <= early_ns {
            return Wait::Spin;
        }
        let sleep_ns = until_target_ns - early_ns;
        self.sleep = Some(Sleep { ends_ns: now_ns + sleep_ns, target_ns });
        Wait::Sleep(sleep_ns)
    }

    /// The sleep just planned ended at `now_ns` without a readable device: learns the timer's
    /// lateness, and spins from here to the pass it woke early for. (A sleep ended by a device,
    /// or by a signal before its time, teaches nothing and the next wait plans afresh.)
    pub fn timed_out(&mut self, now_ns: u64) {
        let Some(sleep) = self.sleep.take().filter(|sleep| now_ns >= sleep.ends_ns) else { return };
        self.timed_sleeps += 1;
        let overshoot_ns = now_ns.saturating_sub(sleep.ends_ns);
        self.latency.record(overshoot_ns);
        self.overshoot.record(overshoot_ns);
        self.spin_until_ns = Some(sleep.target_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer_with_latency(latency_ns: u64, sleep_cost_ns: u64, fixed_spin_ns: u64) -> Pacer {
        let mut pacer = Pacer::new(fixed_spin_ns, sleep_cost_ns);
        (0..LATENCY_SAMPLES).for_each(|_| pacer.latency.record(latency_ns));
        pacer
    }

    #[test]
    fn latency_estimate_is_the_90th_percentile_of_the_last_32_sleeps() {
        let mut latency = WakeLatency::new();
        (1..=32).for_each(|us| latency.record(us * 1_000));
        assert_eq!(latency.estimate_ns(), 29_000);
        // Renewed from the next 32 alone: an old spike does not linger.
        (0..32).for_each(|_| latency.record(5_000));
        assert_eq!(latency.estimate_ns(), 5_000);
    }

    #[test]
    fn a_wait_shorter_than_a_sleep_costs_is_spun() {
        let mut pacer = pacer_with_latency(0, 20_000, 0);
        assert_eq!(pacer.wait(1_000_000, Some(1_019_000)), Wait::Spin);
        assert_eq!(pacer.wait(1_000_000, Some(1_021_000)), Wait::Sleep(21_000));
        // Already due: spin (the pass runs at once). Nothing planned: wait for a packet.
        assert_eq!(pacer.wait(1_000_000, Some(900_000)), Wait::Spin);
        assert_eq!(pacer.wait(1_000_000, None), Wait::Idle);
    }

    #[test]
    fn waking_early_covers_the_latency_within_the_spin_budget() {
        let mut pacer = pacer_with_latency(100_000, 0, 0);
        // A 12.5 ms sleep may spin up to 250 us: the whole 100 us latency is covered.
        assert_eq!(pacer.wait(0, Some(12_500_000)), Wait::Sleep(12_400_000));
        // A 1 ms sleep may spin only 20 us.
        assert_eq!(pacer.wait(0, Some(1_000_000)), Wait::Sleep(980_000));
    }

    #[test]
    fn after_waking_early_it_spins_to_the_pass_instead_of_sleeping_again() {
        let mut pacer = pacer_with_latency(100_000, 20_000, 0);
        assert_eq!(pacer.wait(0, Some(12_500_000)), Wait::Sleep(12_400_000));
        pacer.timed_out(12_430_000);
        assert_eq!(pacer.latency.recorded, LATENCY_SAMPLES + 1);
        // 70 us before the pass: more than a sleep costs, yet a sleep would end too late.
        assert_eq!(pacer.wait(12_430_000, Some(12_500_000)), Wait::Spin);
        // Once past it, the next release is planned afresh.
        assert_eq!(pacer.wait(12_501_000, Some(25_000_000)), Wait::Sleep(12_399_000));
    }

    #[test]
    fn a_sleep_ended_by_a_packet_plans_afresh() {
        let mut pacer = pacer_with_latency(100_000, 20_000, 0);
        assert_eq!(pacer.wait(0, Some(12_500_000)), Wait::Sleep(12_400_000));
        // A packet woke us 5 ms in: no spinning for 7.5 ms.
        assert_eq!(pacer.wait(5_000_000, Some(12_500_000)), Wait::Sleep(7_400_000));
        pacer.timed_out(7_400_000 + 5_000_000);
        assert_eq!(pacer.latency.recorded, LATENCY_SAMPLES + 1);
        // A sleep cut short by a signal is no measurement.
        assert_eq!(pacer.wait(12_400_000, Some(25_000_000)), Wait::Sleep(12_500_000));
        pacer.timed_out(13_000_000);
        assert_eq!(pacer.latency.recorded, LATENCY_SAMPLES + 1);
    }

    #[test]
    fn fixed_spin_is_a_lower_bound_of_the_early_margin() {
        let mut pacer = pacer_with_latency(0, 0, 30_000);
        assert_eq!(pacer.wait(0, Some(1_000_000)), Wait::Sleep(970_000));
        assert_eq!(pacer.wait(0, Some(30_000)), Wait::Spin);
    }

    #[test]
    fn a_disturbed_calibration_cannot_make_it_spin_long() {
        let mut pacer = pacer_with_latency(0, 10_000_000, 0);
        assert_eq!(pacer.wait(0, Some(100_000)), Wait::Sleep(100_000));
    }
}
