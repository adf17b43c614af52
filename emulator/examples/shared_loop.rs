//! Prototype: several links served by one event loop, in one thread of one process.
//!
//! Each link is what one `ccsweep-link` would be: its own pair of TUN devices between its own two
//! namespaces, its own link model per direction, its own self-check. What the links share is the
//! loop: one epoll over every device, one pacer, one real-time thread, and so one timed wake-up
//! serves every link with a release due within the release window of the earliest (`next_pass_ns`
//! over every link's directions). A wake-up costs the machine about 22 us of CPU on a KVM guest
//! whatever it then does (examples/wake_floor.rs), so links that wake apart pay it each; together
//! they may share it. Whether that lowers the CPU of a cell, and what it does to lateness, is what
//! benchmarks/sharedloop/bench.py measures against one process per link.
//!
//! Usage: shared_loop FILE. FILE holds one link a line: that link's `ccsweep-link` options as a
//! JSON array of strings (blank lines and lines starting with `#` are skipped). The loop
//! uses the smallest `--release-window` of the links (no link waits longer than its own), the
//! highest `--realtime-priority`, the smallest `--spin`, and ends at SIGTERM or SIGINT or at the
//! shortest `--duration`. It prints a `ready` line, then at the end one `summary` line per link
//! (its lateness, counters and write and read times, as ccsweep-link's summary has them) and one
//! `summary-process` line (the process's CPU and wake-ups). Rate links only: a trace played
//! `--once` does not end the loop, and `--stats` is not written.

use ccsweep_link::cli::{one_line, parse_args};
use ccsweep_link::config::Config;
use ccsweep_link::emulate::{next_pass_ns, read_batch, release_due, Buffers};
use ccsweep_link::error::Error;
use ccsweep_link::lateness::{Durations, Lateness};
use ccsweep_link::link::Direction;
use ccsweep_link::netdev::Devices;
use ccsweep_link::pacing::Pacer;
use ccsweep_link::sched::{LoopPriority, DEFAULT_DEADLINE_RUNTIME_NS};
use ccsweep_link::sys;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

/// The most links one loop serves, and the largest FILE read (a line per link).
const MAX_LINKS: usize = 64;
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Device tokens are 2 * link (sender) and 2 * link + 1 (receiver); the signals' is apart.
const TOKEN_SIGNAL: u64 = u64::MAX;

/// One link as the shared loop holds it: what `ccsweep-link` holds for its one link, less the loop.
struct SharedLink {
    config: Config,
    uplink: Direction,
    downlink: Direction,
    devices: Devices,
    buffers: Buffers,
    writes: Durations,
    reads: Durations,
}

impl SharedLink {
    fn open(config: Config) -> Result<Self, Error> {
        let uplink = config.uplink.build(&config)?;
        let downlink = config.downlink.build(&config)?;
        let devices = Devices::open(&config.sender, &config.receiver, &config.dev, config.mtu, config.offload)?;
        let buffers = Buffers::new(config.mtu, config.offload);
        Ok(Self { config, uplink, downlink, devices, buffers, writes: Durations::default(), reads: Durations::default() })
    }

    fn pass(&mut self, t0: u64) {
        let fds = (self.devices.sender.as_raw_fd(), self.devices.receiver.as_raw_fd());
        release_due(&mut self.uplink, &mut self.downlink, fds, t0, &mut self.writes, &mut self.buffers);
    }

    /// Reads what arrived on the sender's device (uplink) or the receiver's (downlink).
    fn read(&mut self, from_sender: bool, t0: u64) -> Result<(), Error> {
        if from_sender {
            read_batch(self.devices.sender.as_raw_fd(), &mut self.uplink, &mut self.buffers, t0, &mut self.reads)
        } else {
            read_batch(self.devices.receiver.as_raw_fd(), &mut self.downlink, &mut self.buffers, t0, &mut self.reads)
        }
    }

    /// Completes the link's logs and says what happened to it, as ccsweep-link's summary does.
    fn close(&mut self, index: usize, wall_ns: u64) -> Result<Value, Error> {
        self.uplink.finish(wall_ns).map_err(|source| self.config.uplink.log_error(source))?;
        self.downlink.finish(wall_ns).map_err(|source| self.config.downlink.log_error(source))?;
        let mut lateness: Lateness = self.uplink.lateness.clone();
        lateness.merge(&self.downlink.lateness);
        Ok(json!({
            "event": "summary",
            "link": index,
            "sender_netns": self.config.sender.netns,
            "receiver_netns": self.config.receiver.netns,
            "lateness_us": lateness.to_json(),
            "uplink": self.uplink.counters_json(wall_ns),
            "downlink": self.downlink.counters_json(wall_ns),
            "config": self.config.to_json(),
            "timing": {"write_us": self.writes.to_json(), "read_us": self.reads.to_json()},
        }))
    }
}

/// The links of FILE, each validated as ccsweep-link validates its command line; an error names
/// the line.
fn read_links(path: &str) -> Result<Vec<Config>, String> {
    let size = std::fs::metadata(path).map_err(|error| format!("{path}: {error}"))?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{path}: {size} bytes, more than the {MAX_FILE_BYTES} a list of links may have"));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("{path}: {error}"))?;
    let mut configs = Vec::new();
    let mut namespaces = HashSet::new();
    for (number, line) in text.lines().enumerate().map(|(index, line)| (index + 1, line.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let options: Vec<String> = serde_json::from_str(line)
            .map_err(|error| format!("{path}:{number}: not a JSON array of strings: {error}"))?;
        let argv = std::iter::once("ccsweep-link".to_string()).chain(options);
        let args = parse_args(argv).map_err(|error| format!("{path}:{number}: {}", one_line(&error)))?;
        let config = Config::from_args(&args).map_err(|error| format!("{path}:{number}: {error}"))?;
        for netns in [&config.sender.netns, &config.receiver.netns] {
            if !namespaces.insert(netns.clone()) {
                return Err(format!("{path}:{number}: namespace {netns} is another link's too (one link per namespace)"));
            }
        }
        configs.push(config);
    }
    if !(1..=MAX_LINKS).contains(&configs.len()) {
        return Err(format!("{path}: {} links: give 1 to {MAX_LINKS}", configs.len()));
    }
    Ok(configs)
}

fn emit(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Opens every link, serves them all from this thread until a signal or the shortest duration,
/// and prints the summaries. The devices and the namespaces the links created go when `links` drops.
fn run(configs: Vec<Config>) -> Result<(), Error> {
    let window_ns = configs.iter().map(|config| config.release_window_ns).min().unwrap_or(0);
    let end_ns = configs.iter().filter_map(|config| config.duration_ns).min();
    let asked = configs.iter().filter_map(|config| config.realtime_priority).max();
    let spin_ns = configs.iter().map(|config| config.spin_ns).min().unwrap_or(0);
    // First: a SIGTERM while the links open must still remove their namespaces.
    let signals = sys::Signals::new()?;
    let mut links = Vec::with_capacity(configs.len());
    for config in configs {
        links.push(SharedLink::open(config)?);
    }
    let epoll = sys::Epoll::new()?;
    for (index, link) in links.iter().enumerate() {
        epoll.add(link.devices.sender.as_raw_fd(), 2 * index as u64)?;
        epoll.add(link.devices.receiver.as_raw_fd(), 2 * index as u64 + 1)?;
    }
    epoll.add(signals.fd(), TOKEN_SIGNAL)?;
    sys::minimal_timer_slack();
    let mut priority = LoopPriority::raise(asked, DEFAULT_DEADLINE_RUNTIME_NS);
    if let Some(warning) = priority.warning(asked) {
        eprintln!("shared_loop: warning: {warning}");
    }
    let mut pacer = Pacer::calibrate(spin_ns)?;
    let t0 = sys::monotonic_ns();
    let cpu0 = sys::cpu_seconds();
    emit(&json!({"event": "ready", "pid": std::process::id(), "links": links.len(), "sched": priority.describe(),
                 "release_window_us": window_ns as f64 / 1e3}));
    let mut tokens = Vec::new();
    let reason = loop {
        links.iter_mut().for_each(|link| link.pass(t0));
        let now = sys::monotonic_ns() - t0;
        if end_ns.is_some_and(|end| now >= end) {
            break "duration";
        }
        let releases = next_pass_ns(links.iter().flat_map(|link| [&link.uplink, &link.downlink]), window_ns);
        let target = [releases, end_ns].into_iter().flatten().min();
        epoll.wait(pacer.wait(now, target).timeout_ns(), &mut tokens)?;
        if tokens.is_empty() {
            pacer.timed_out(sys::monotonic_ns() - t0);
        }
        if tokens.contains(&TOKEN_SIGNAL) {
            break "signal";
        }
        for token in &tokens {
            links[(token / 2) as usize].read(token % 2 == 0, t0)?;
        }
    };
    priority.restore();
    let wall_ns = sys::monotonic_ns() - t0;
    let (user, system) = sys::cpu_seconds();
    let (user, system) = (user - cpu0.0, system - cpu0.1);
    for (index, link) in links.iter_mut().enumerate() {
        emit(&link.close(index, wall_ns)?);
    }
    let wall_s = wall_ns as f64 / 1e9;
    emit(&json!({
        "event": "summary-process",
        "reason": reason,
        "links": links.len(),
        "wall_s": wall_s,
        "cpu_user_s": user,
        "cpu_sys_s": system,
        "cpu_share": if wall_s > 0.0 { (user + system) / wall_s } else { 0.0 },
        "sched": priority.describe(),
        "release_window_us": window_ns as f64 / 1e3,
        "wake": {
            "timed_sleeps": pacer.timed_sleeps,
            "sleep_cost_us": pacer.sleep_cost_ns() as f64 / 1e3,
            "latency_p90_us": pacer.latency.estimate_ns() as f64 / 1e3,
        },
        "timing": {"overshoot_us": pacer.overshoot.to_json()},
    }));
    drop(links);
    Ok(())
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("shared_loop: give FILE, one link's ccsweep-link options a line");
        return ExitCode::from(2);
    };
    let configs = match read_links(&path) {
        Ok(configs) => configs,
        Err(message) => {
            eprintln!("shared_loop: error: {message}");
            return ExitCode::from(2);
        }
    };
    match run(configs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shared_loop: error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
