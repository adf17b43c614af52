//! The event loop: read packets from both TUN devices, play the link's schedule, write packets
//! out when due, report stats and the self-check.
//!
//! `run` reads as the life of a link: open everything that can fail on user input before any
//! device exists, say `ready`, serve until a signal, the duration or the trace's end, then
//! print the summary.

use crate::config::Config;
use crate::error::Error;
use crate::lateness::{Durations, Lateness};
use crate::link::Direction;
use crate::netdev::Devices;
use crate::offload;
use crate::pacing::Pacer;
use crate::sched::LoopPriority;
use crate::sys;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{LineWriter, Write};
use std::os::fd::{AsRawFd, RawFd};

const TOKEN_SENDER: u64 = 0;
const TOKEN_RECEIVER: u64 = 1;
const TOKEN_SIGNAL: u64 = 2;
/// Packets read from one device before the schedule is played again: a read costs about a
/// microsecond, so a burst of arrivals delays due releases by tens of microseconds at most, and
/// the loop's own work stays small per packet at saturation (256 moved 4% more at 40 Gbit/s but
/// doubled the lateness p99 at 1 Gbit/s).
const READ_BATCH: usize = 64;
const SPARE_BUFFERS: usize = 4096;
/// The largest frame a device with TSO hands over: a 64 KB segment and its `virtio_net_hdr`.
const SEGMENT_BYTES: usize = 65_536 + offload::VNET_HDR_LEN;

/// The reader's buffers: emptied packet buffers for reuse, and one for a whole segment.
pub struct Buffers {
    pool: Vec<Vec<u8>>,
    segment: Vec<u8>,
    /// Size a packet buffer is read at without offloads: the MTU and some room.
    packet_len: usize,
}

impl Buffers {
    /// Buffers for devices of this MTU, with room for a whole TSO segment when `offload`.
    pub fn new(mtu: u32, offload: bool) -> Self {
        Self {
            pool: Vec::new(),
            segment: if offload { vec![0; SEGMENT_BYTES] } else { Vec::new() },
            packet_len: mtu as usize + 64,
        }
    }
}

/// Why the loop ended, as the summary's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    Duration,
    TraceEnd,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Signal => "signal",
            StopReason::Duration => "duration",
            StopReason::TraceEnd => "trace-end",
        }
    }
}

/// Runs the link described by `config` until it ends, printing `ready` and the summary.
pub fn run(config: &Config) -> Result<(), Error> {
    let mut link = Link::open(config)?;
    emit(&link.ready_json());
    let reason = link.serve()?;
    emit(&link.close(reason)?);
    // The devices, and the namespaces the link created, go after the summary is out.
    drop(link);
    Ok(())
}

fn emit(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The periodic `--stats` lines: counters so far, and the lateness of the last interval only.
struct StatsLines {
    sink: Box<dyn Write>,
    target: String,
    interval_ns: u64,
    next_ns: u64,
    previous: Lateness,
}

impl StatsLines {
    fn open(target: Option<&str>, interval_ns: u64) -> Result<Option<Self>, Error> {
        let sink: Box<dyn Write> = match target {
            None => return Ok(None),
            Some("-") => Box::new(LineWriter::new(std::io::stdout())),
            Some(path) => {
                let file = File::create(path)
                    .map_err(|source| Error::File { option: "stats".into(), path: path.into(), source })?;
                Box::new(LineWriter::new(file))
            }
        };
        let target = target.unwrap_or_default().to_string();
        Ok(Some(Self { sink, target, interval_ns, next_ns: interval_ns, previous: Lateness::default() }))
    }

    /// Writes a line if one is due at `now_ns`, with the CPU used since `cpu0` (read only then:
    /// getrusage is a system call, too dear for every pass).
    fn write_if_due(&mut self, now_ns: u64, up: &Direction, down: &Direction, cpu0: (f64, f64)) -> Result<(), Error> {
        if now_ns < self.next_ns {
            return Ok(());
        }
        let (user, system) = cpu_since(cpu0);
        let mut lateness = up.lateness.clone();
        lateness.merge(&down.lateness);
        let interval = lateness.since(&self.previous);
        self.previous = lateness;
        let line = json!({
            "event": "stats",
            "t": now_ns as f64 / 1e9,
            "uplink": up.counters_json(now_ns),
            "downlink": down.counters_json(now_ns),
            "lateness_us": interval.to_json(),
            "cpu_s": user + system,
        });
        writeln!(self.sink, "{line}")
            .map_err(|source| Error::File { option: "stats".into(), path: self.target.clone(), source })?;
        while self.next_ns <= now_ns {
            self.next_ns += self.interval_ns;
        }
        Ok(())
    }
}

/// CPU seconds (user, system) used since `since`.
fn cpu_since(since: (f64, f64)) -> (f64, f64) {
    let (user, system) = sys::cpu_seconds();
    (user - since.0, system - since.1)
}

/// Everything the loop owns while the link runs.
struct Link<'a> {
    config: &'a Config,
    uplink: Direction,
    downlink: Direction,
    stats: Option<StatsLines>,
    /// Held open while the loop runs: its descriptor, registered in `epoll`, reports SIGTERM/SIGINT.
    _signals: sys::Signals,
    epoll: sys::Epoll,
    devices: Devices,
    pacer: Pacer,
    priority: LoopPriority,
    /// When the link was ready (CLOCK_MONOTONIC ns; the time origin of stats and logs), and the
    /// CPU time used by then.
    t0: u64,
    cpu0: (f64, f64),
    buffers: Buffers,
    tokens: Vec<u64>,
    /// Time in each write to a device (it runs the receiving side's stack) and each read.
    writes: Durations,
    reads: Durations,
    /// The loop's work between two waits (reads, the pass with its writes, stats): a packet can
    /// be late with every sleep on time when the loop was busy at its due time.
    work: Durations,
    /// When the last wait returned.
    woke_ns: u64,
}

impl<'a> Link<'a> {
    /// Opens the link: what can fail on user input first, then the devices, the loop's
    /// priority (after every `ip` command, so no helper runs at it) and the pacer's calibration
    /// (at that priority, so it measures the wake-ups the loop will have).
    fn open(config: &'a Config) -> Result<Self, Error> {
        let uplink = config.uplink.build(config)?;
        let downlink = config.downlink.build(config)?;
        let stats = StatsLines::open(config.stats.as_deref(), config.stats_interval_ns)?;
        let signals = sys::Signals::new()?;
        let devices = Devices::open(&config.sender, &config.receiver, &config.dev, config.mtu, config.offload)?;
        let epoll = sys::Epoll::new()?;
        epoll.add(devices.sender.as_raw_fd(), TOKEN_SENDER)?;
        epoll.add(devices.receiver.as_raw_fd(), TOKEN_RECEIVER)?;
        epoll.add(signals.fd(), TOKEN_SIGNAL)?;
        sys::minimal_timer_slack();
        let priority = LoopPriority::raise(config.realtime_priority, config.deadline_runtime_ns);
        if let Some(warning) = priority.warning(config.realtime_priority) {
            eprintln!("ccsweep-link: warning: {warning}");
        }
        // Before "ready": the measurement sleeps must not delay any packet.
        let pacer = Pacer::calibrate(config.spin_ns)?;
        Ok(Self {
            config,
            uplink,
            downlink,
            stats,
            _signals: signals,
            epoll,
            devices,
            pacer,
            priority,
            t0: sys::monotonic_ns(),
            cpu0: sys::cpu_seconds(),
            buffers: Buffers::new(config.mtu, config.offload),
            tokens: Vec::new(),
            writes: Durations::default(),
            reads: Durations::default(),
            work: Durations::default(),
            woke_ns: 0,
        })
    }

    fn ready_json(&self) -> Value {
        let config = self.config;
        json!({
            "event": "ready",
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "dev": config.dev,
            "sender_netns": config.sender.netns,
            "receiver_netns": config.receiver.netns,
            "sender_addr": config.sender.local.to_string(),
            "receiver_addr": config.receiver.local.to_string(),
            "sched": self.priority.describe(),
        })
    }

    /// Nanoseconds since the loop started.
    fn clock(&self) -> u64 {
        sys::monotonic_ns() - self.t0
    }

    /// Serves packets until the link ends; returns why it did.
    fn serve(&mut self) -> Result<StopReason, Error> {
        let ends = [self.config.duration_ns, self.uplink.end_ns(), self.downlink.end_ns()];
        let end_ns = ends.into_iter().flatten().min();
        loop {
            self.pass();
            // The writes of the pass may have taken a while: plan the next wake-up from the present.
            let now = self.clock();
            if let Some(stats) = self.stats.as_mut() {
                stats.write_if_due(now, &self.uplink, &self.downlink, self.cpu0)?;
            }
            if let Some(end) = end_ns.filter(|end| now >= *end) {
                let by_duration = Some(end) == self.config.duration_ns;
                return Ok(if by_duration { StopReason::Duration } else { StopReason::TraceEnd });
            }
            if self.wait_and_read(now, end_ns)? {
                return Ok(StopReason::Signal);
            }
        }
    }

    /// Plays both bottlenecks up to now and writes every due packet (see `release_due`).
    fn pass(&mut self) {
        let fds = self.fds();
        release_due(&mut self.uplink, &mut self.downlink, fds, self.t0, &mut self.writes, &mut self.buffers);
    }

    fn fds(&self) -> (RawFd, RawFd) {
        (self.devices.sender.as_raw_fd(), self.devices.receiver.as_raw_fd())
    }

    /// Waits until the next pass (or a packet, or a signal) and reads what arrived; true when a
    /// signal asks the link to stop.
    fn wait_and_read(&mut self, now: u64, end_ns: Option<u64>) -> Result<bool, Error> {
        let releases = next_pass_ns([&self.uplink, &self.downlink], self.config.release_window_ns);
        let stats_ns = self.stats.as_ref().map(|stats| stats.next_ns);
        let target = [releases, stats_ns, end_ns].into_iter().flatten().min();
        self.work.record(self.clock().saturating_sub(self.woke_ns));
        self.epoll.wait(self.pacer.wait(now, target).timeout_ns(), &mut self.tokens)?;
        self.woke_ns = self.clock();
        if self.tokens.is_empty() {
            self.pacer.timed_out(self.clock());
        }
        let (sender_fd, receiver_fd) = self.fds();
        let Self { tokens, uplink, downlink, buffers, t0, reads, .. } = self;
        let mut stop = false;
        for token in tokens.iter() {
            match *token {
                TOKEN_SENDER => read_batch(sender_fd, uplink, buffers, *t0, reads)?,
                TOKEN_RECEIVER => read_batch(receiver_fd, downlink, buffers, *t0, reads)?,
                _ => stop = true,
            }
        }
        Ok(stop)
    }

    /// Ends the link: the loop's priority goes back to normal, the logs are completed and
    /// flushed, and the summary says what happened. The devices and namespaces go on drop.
    fn close(&mut self, reason: StopReason) -> Result<Value, Error> {
        self.priority.restore();
        let wall_ns = self.clock();
        self.uplink.finish(wall_ns).map_err(|source| self.config.uplink.log_error(source))?;
        self.downlink.finish(wall_ns).map_err(|source| self.config.downlink.log_error(source))?;
        let (user, system) = cpu_since(self.cpu0);
        let wall_s = wall_ns as f64 / 1e9;
        let mut lateness = self.uplink.lateness.clone();
        lateness.merge(&self.downlink.lateness);
        Ok(json!({
            "event": "summary",
            "version": env!("CARGO_PKG_VERSION"),
            "reason": reason.as_str(),
            "order": self.config.order(),
            "wall_s": wall_s,
            "cpu_user_s": user,
            "cpu_sys_s": system,
            "cpu_share": if wall_s > 0.0 { (user + system) / wall_s } else { 0.0 },
            "lateness_us": lateness.to_json(),
            "sched": self.priority.describe(),
            "uplink": self.uplink.counters_json(wall_ns),
            "downlink": self.downlink.counters_json(wall_ns),
            "config": self.config.to_json(),
            "wake": {
                "timed_sleeps": self.pacer.timed_sleeps,
                "sleep_cost_us": self.pacer.sleep_cost_ns() as f64 / 1e3,
                "latency_p90_us": self.pacer.latency.estimate_ns() as f64 / 1e3,
            },
            // What a late packet's lateness can come from inside this process: sleeps that
            // returned late, writes (the receiving stack runs in them) or reads that took long,
            // and the loop's work between two waits, which holds them all.
            "timing": {
                "overshoot_us": self.pacer.overshoot.to_json(),
                "write_us": self.writes.to_json(),
                "read_us": self.reads.to_json(),
                "work_us": self.work.to_json(),
            },
        }))
    }
}

/// Plays both bottlenecks of one link up to now and writes every due packet (uplink packets to the
/// receiver's device, `fds.1`; downlink ones to the sender's, `fds.0`), then keeps the buffers of
/// what left for the reader. Each write runs the receiving side's network stack in our context,
/// so the clock (ns since `t0`) is read afresh for every packet: lateness is measured at the
/// moment of its own write, and each write's duration goes to `writes`.
pub fn release_due(uplink: &mut Direction, downlink: &mut Direction, fds: (RawFd, RawFd), t0: u64,
                   writes: &mut Durations, buffers: &mut Buffers) {
    let clock = || sys::monotonic_ns() - t0;
    let (sender_fd, receiver_fd) = fds;
    let now = clock();
    uplink.advance(now);
    uplink.release(clock, |packet| writes.time(|| sys::write(receiver_fd, packet)));
    downlink.advance(now);
    downlink.release(clock, |packet| writes.time(|| sys::write(sender_fd, packet)));
    for direction in [uplink, downlink] {
        while buffers.pool.len() < SPARE_BUFFERS {
            match direction.spare.pop() {
                Some(buffer) => buffers.pool.push(buffer),
                None => break,
            }
        }
        direction.spare.clear();
    }
}

/// When the next pass should run to serve the earliest release of `directions`: late enough to
/// serve, in the same pass, every release due within `release_window_ns` after it. A pass only
/// writes packets already due. One link passes its two directions; a loop serving several links
/// passes all of theirs, so that one wake-up serves every link with a release in the window.
pub fn next_pass_ns<'a, D>(directions: D, release_window_ns: u64) -> Option<u64>
where
    D: IntoIterator<Item = &'a Direction>,
    D::IntoIter: Clone,
{
    let directions = directions.into_iter();
    let earliest = directions.clone().filter_map(Direction::next_event_ns).min()?;
    let window_end = earliest + release_window_ns;
    let last = directions.filter_map(|direction| direction.last_release_until(window_end)).max();
    Some(last.map_or(earliest, |last| last.max(earliest)))
}

/// Reads up to READ_BATCH frames from one device into its direction, stamping each on arrival and
/// timing each read in `reads`.
/// With offloads a frame may be a whole TSO segment: it is read into `segment` and cut there.
pub fn read_batch(fd: RawFd, direction: &mut Direction, buffers: &mut Buffers, t0: u64,
                  reads: &mut Durations) -> Result<(), Error> {
    let Buffers { pool, segment, packet_len } = buffers;
    if direction.offload() {
        for _ in 0..READ_BATCH {
            match reads.time(|| sys::read(fd, segment))? {
                Some(n) if n > 0 => direction.arrive_frame(sys::monotonic_ns() - t0, &segment[..n], pool),
                _ => return Ok(()),
            }
        }
        return Ok(());
    }
    let len = *packet_len;
    for _ in 0..READ_BATCH {
        let mut buffer = pool.pop().unwrap_or_default();
        buffer.resize(len, 0);
        match reads.time(|| sys::read(fd, &mut buffer))? {
            Some(n) if n > 0 => {
                buffer.truncate(n);
                direction.arrive(sys::monotonic_ns() - t0, buffer);
            }
            _ => {
                pool.push(buffer);
                return Ok(());
            }
        }
    }
    Ok(())
}
