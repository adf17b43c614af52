//! What a timed wake-up costs on this machine when nothing else is done: the floor under
//! ccsweep-link's CPU.
//!
//! The loop sleeps exactly as the emulator's packet loop does between passes (an epoll_pwait2 with
//! a nanosecond timeout, timer slack 1 ns, at the loop's priority) until the next deadline of a
//! fixed grid, and does nothing else. Its CPU per wake-up is what the machine charges for the
//! sleep and the wake-up alone (on a virtual machine, the exits to arm the timer and to deliver
//! it): the emulator's cost at a given wake-up rate can fall no lower. One JSON line on stdout.
//!
//! Usage: cargo run --release --example wake_floor -- [PERIOD_US [SECONDS [REALTIME_PRIORITY]]]
//! (defaults 250, 10, 10; priority 0 keeps normal priority).

use ccsweep_link::sched::{LoopPriority, DEFAULT_DEADLINE_RUNTIME_NS};
use ccsweep_link::sys;

fn arg(position: usize, default: u64) -> u64 {
    std::env::args().nth(position).map_or(default, |text| {
        text.parse().unwrap_or_else(|_| {
            eprintln!("wake_floor: argument {position} must be a whole number, got {text:?}");
            std::process::exit(2)
        })
    })
}

fn main() -> Result<(), ccsweep_link::error::Error> {
    let period_ns = arg(1, 250).clamp(10, 1_000_000) * 1_000;
    let seconds = arg(2, 10).clamp(1, 600);
    let priority = arg(3, 10).min(99) as i32;
    sys::minimal_timer_slack();
    let mut granted = LoopPriority::raise((priority > 0).then_some(priority), DEFAULT_DEADLINE_RUNTIME_NS);
    let idle = sys::Epoll::new()?;
    let mut tokens = Vec::new();
    let (user_before, system_before) = sys::cpu_seconds();
    let start_ns = sys::monotonic_ns();
    let end_ns = start_ns + seconds * 1_000_000_000;
    let mut deadline_ns = start_ns;
    let mut wakeups: u64 = 0;
    let mut late_ns_total: u64 = 0;
    while deadline_ns < end_ns {
        deadline_ns += period_ns;
        let now_ns = sys::monotonic_ns();
        if now_ns < deadline_ns {
            idle.wait(Some(deadline_ns - now_ns), &mut tokens)?;
            wakeups += 1;
            late_ns_total += sys::monotonic_ns().saturating_sub(deadline_ns);
        }
    }
    let elapsed_s = (sys::monotonic_ns() - start_ns) as f64 / 1e9;
    let (user_after, system_after) = sys::cpu_seconds();
    let cpu_s = (user_after - user_before) + (system_after - system_before);
    granted.restore();
    println!(
        "{}",
        serde_json::json!({
            "period_us": period_ns / 1_000,
            "seconds": elapsed_s,
            "priority": granted.describe(),
            "wakeups": wakeups,
            "wakeups_per_s": wakeups as f64 / elapsed_s,
            "cpu_s": cpu_s,
            "cores": cpu_s / elapsed_s,
            "cpu_us_per_wakeup": cpu_s * 1e6 / wakeups.max(1) as f64,
            "mean_late_us": late_ns_total as f64 / 1e3 / wakeups.max(1) as f64,
        })
    );
    Ok(())
}
