//! The validated configuration and the event loop: read packets from both TUN devices, play the
//! link's schedule, write packets out when due, report stats and the self-check.

use crate::lateness::Lateness;
use crate::link::{Direction, LossPosition, Server};
use crate::linklog::LinkLog;
use crate::netdev::{check_device_name, check_netns_name, parse_address, Devices, Endpoint};
use crate::pacing::Pacer;
use crate::queue::{Queue, QueueSpec};
use crate::sys;
use crate::trace::Trace;
use crate::units::{parse_duration_ns, parse_probability, parse_rate};
use crate::Args;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{LineWriter, Write};
use std::os::fd::AsRawFd;

const TOKEN_SENDER: u64 = 0;
const TOKEN_RECEIVER: u64 = 1;
const TOKEN_SIGNAL: u64 = 2;
/// Packets read from one device before the schedule is played again: a read costs about a
/// microsecond, so a burst of arrivals delays due releases by tens of microseconds at most, and
/// the loop's own work stays small per packet at saturation (256 moved 4% more at 40 Gbit/s but
/// doubled the lateness p99 at 1 Gbit/s).
const READ_BATCH: usize = 64;
const SPARE_BUFFERS: usize = 4096;

/// What one direction does, validated.
pub struct DirectionConfig {
    pub server: ServerConfig,
    pub delay_ns: u64,
    pub loss: f64,
    pub queue: QueueSpec,
    pub log: Option<String>,
}

pub enum ServerConfig {
    Rate(f64),
    Trace(String, Trace),
}

pub struct Config {
    pub sender: Endpoint,
    pub receiver: Endpoint,
    pub dev: String,
    pub mtu: u32,
    pub uplink: DirectionConfig,
    pub downlink: DirectionConfig,
    pub loss_position: LossPosition,
    pub seed: u64,
    pub stats: Option<String>,
    pub stats_interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub spin_ns: u64,
    pub coalesce_ns: u64,
    pub command_line: String,
}

fn option<T>(name: &str, result: Result<T, String>) -> Result<T, String> {
    result.map_err(|message| format!("--{name}: {message}"))
}

#[allow(clippy::too_many_arguments)]
fn direction_config(
    name: &str,
    rate: &Option<String>,
    trace: &Option<String>,
    once: bool,
    delay: &str,
    loss: &str,
    queue: &str,
    log: &Option<String>,
) -> Result<DirectionConfig, String> {
    let server = match (rate, trace) {
        (Some(rate), None) => ServerConfig::Rate(option(&format!("{name}-rate"), parse_rate(rate))?),
        (None, Some(path)) => {
            ServerConfig::Trace(path.clone(), option(&format!("{name}-trace"), Trace::load(path, once))?)
        }
        _ => return Err(format!("give exactly one of --{name}-rate and --{name}-trace")),
    };
    Ok(DirectionConfig {
        server,
        delay_ns: option(&format!("{name}-delay"), parse_duration_ns(delay))?,
        loss: option(&format!("{name}-loss"), parse_probability(loss))?,
        queue: option(&format!("{name}-queue"), QueueSpec::parse(queue))?,
        log: log.clone(),
    })
}

/// The two ends of the link, checked so that a bad name or address is an argument error before
/// any namespace exists.
fn endpoints(args: &Args) -> Result<(Endpoint, Endpoint), String> {
    option("sender-netns", check_netns_name(&args.sender_netns))?;
    option("receiver-netns", check_netns_name(&args.receiver_netns))?;
    if args.sender_netns == args.receiver_netns {
        return Err("--receiver-netns: must differ from --sender-netns (one device in each)".into());
    }
    let sender_addr = option("sender-addr", parse_address(&args.sender_addr))?;
    let receiver_addr = option("receiver-addr", parse_address(&args.receiver_addr))?;
    if sender_addr == receiver_addr {
        return Err(format!("--receiver-addr: {receiver_addr} is also --sender-addr (the two ends need two addresses)"));
    }
    let sender = Endpoint { netns: args.sender_netns.clone(), local: sender_addr, peer: receiver_addr };
    let receiver = Endpoint { netns: args.receiver_netns.clone(), local: receiver_addr, peer: sender_addr };
    Ok((sender, receiver))
}

impl Config {
    pub fn from_args(args: &Args) -> Result<Self, String> {
        let (sender, receiver) = endpoints(args)?;
        option("dev", check_device_name(&args.dev))?;
        if !(576..=9000).contains(&args.mtu) {
            return Err(format!("--mtu: {} is outside 576 to 9000", args.mtu));
        }
        let uplink = direction_config(
            "uplink",
            &args.uplink_rate,
            &args.uplink_trace,
            args.once,
            &args.uplink_delay,
            &args.uplink_loss,
            &args.uplink_queue,
            &args.uplink_log,
        )?;
        let downlink = direction_config(
            "downlink",
            &args.downlink_rate,
            &args.downlink_trace,
            args.once,
            &args.downlink_delay,
            &args.downlink_loss,
            &args.downlink_queue,
            &args.downlink_log,
        )?;
        let stats_interval_ns = option("stats-interval", parse_duration_ns(&args.stats_interval))?;
        if stats_interval_ns < 1_000_000 {
            return Err("--stats-interval: must be at least 1ms".into());
        }
        let duration_ns = match &args.duration {
            Some(text) => Some(option("duration", parse_duration_ns(text))?),
            None => None,
        };
        Ok(Self {
            sender,
            receiver,
            dev: args.dev.clone(),
            mtu: args.mtu,
            uplink,
            downlink,
            loss_position: if args.loss_position == "before" { LossPosition::Before } else { LossPosition::After },
            seed: args.seed,
            stats: args.stats.clone(),
            stats_interval_ns,
            duration_ns,
            spin_ns: option("spin", parse_duration_ns(&args.spin))?,
            coalesce_ns: option("coalesce", parse_duration_ns(&args.coalesce))?,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        })
    }
}

impl DirectionConfig {
    fn describe(&self) -> String {
        match &self.server {
            ServerConfig::Rate(bps) => format!("{} Mbit/s", bps / 1e6),
            ServerConfig::Trace(path, _) => path.clone(),
        }
    }

    fn to_json(&self) -> Value {
        let server = match &self.server {
            ServerConfig::Rate(bps) => json!({"rate_bps": bps}),
            ServerConfig::Trace(path, trace) => {
                json!({"trace": path, "trace_mean_bps": trace.mean_rate_bps(), "once": trace.once})
            }
        };
        json!({"server": server, "delay_us": self.delay_ns as f64 / 1e3, "loss": self.loss, "queue": self.queue.describe()})
    }

    fn build(&self, name: &'static str, position: LossPosition, seed: u64, command_line: &str) -> Result<Direction, String> {
        let log = match &self.log {
            Some(path) => Some(
                LinkLog::create(path, name, &self.describe(), &self.queue.describe(), command_line)
                    .map_err(|e| format!("--{name}-log: {e}"))?,
            ),
            None => None,
        };
        let server = match &self.server {
            ServerConfig::Rate(bps) => Server::rate(*bps),
            ServerConfig::Trace(_, trace) => Server::trace(trace.clone()),
        };
        // Independent streams per direction and per purpose, all derived from the one seed.
        let salt: u64 = if name == "uplink" { 0x9e37_79b9_7f4a_7c15 } else { 0xc2b2_ae3d_27d4_eb4f };
        let queue = Queue::new(self.queue.clone(), seed ^ salt.rotate_left(17));
        Ok(Direction::new(name, server, queue, self.delay_ns, self.loss, position, seed ^ salt, log))
    }
}

/// Where stats lines go.
fn stats_sink(target: &Option<String>) -> Result<Option<Box<dyn Write>>, String> {
    match target.as_deref() {
        None => Ok(None),
        Some("-") => Ok(Some(Box::new(LineWriter::new(std::io::stdout())))),
        Some(path) => {
            let file = File::create(path).map_err(|e| format!("--stats {path}: {e}"))?;
            Ok(Some(Box::new(LineWriter::new(file))))
        }
    }
}

fn emit(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub fn run(config: Config) -> Result<(), String> {
    // Everything that can fail on user input is checked before any device exists.
    let mut uplink = config.uplink.build("uplink", config.loss_position, config.seed, &config.command_line)?;
    let mut downlink = config.downlink.build("downlink", config.loss_position, config.seed, &config.command_line)?;
    let mut stats = stats_sink(&config.stats)?;
    let signals = sys::Signals::new()?;
    let devices = Devices::open(&config.sender, &config.receiver, &config.dev, config.mtu)?;
    let (sender_fd, receiver_fd) = (devices.sender.as_raw_fd(), devices.receiver.as_raw_fd());
    let epoll = sys::Epoll::new()?;
    epoll.add(sender_fd, TOKEN_SENDER)?;
    epoll.add(receiver_fd, TOKEN_RECEIVER)?;
    epoll.add(signals.fd(), TOKEN_SIGNAL)?;
    sys::minimal_timer_slack();
    // Before "ready": the measurement sleeps must not delay any packet.
    let mut pacer = Pacer::calibrate(config.spin_ns)?;

    emit(&json!({
        "event": "ready",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "dev": config.dev,
        "sender_netns": config.sender.netns,
        "receiver_netns": config.receiver.netns,
        "sender_addr": config.sender.local.to_string(),
        "receiver_addr": config.receiver.local.to_string(),
    }));

    let t0 = sys::monotonic_ns();
    let (cpu_user0, cpu_sys0) = sys::cpu_seconds();
    let end_ns = [config.duration_ns, uplink.end_ns(), downlink.end_ns()].into_iter().flatten().min();
    let buffer_len = config.mtu as usize + 64;
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut tokens = Vec::new();
    let mut next_stats_ns = config.stats_interval_ns;
    let mut previous_lateness = Lateness::default();
    let mut reason = "signal";

    // Each write runs the receiving side's network stack in our context, so the clock is read
    // afresh for every packet: lateness is measured at the moment of its own write.
    let clock = || sys::monotonic_ns() - t0;
    loop {
        let now = clock();
        uplink.advance(now);
        uplink.release(clock, |packet| sys::write(receiver_fd, packet));
        downlink.advance(now);
        downlink.release(clock, |packet| sys::write(sender_fd, packet));
        for direction in [&mut uplink, &mut downlink] {
            while pool.len() < SPARE_BUFFERS {
                match direction.spare.pop() {
                    Some(buffer) => pool.push(buffer),
                    None => break,
                }
            }
            direction.spare.clear();
        }
        // The writes above may have taken a while: plan the next wake-up from the present.
        let now = clock();
        if let Some(sink) = stats.as_mut() {
            if now >= next_stats_ns {
                let mut lateness = uplink.lateness.clone();
                lateness.merge(&downlink.lateness);
                let interval = lateness.since(&previous_lateness);
                previous_lateness = lateness;
                let (user, system) = sys::cpu_seconds();
                let line = json!({
                    "event": "stats",
                    "t": now as f64 / 1e9,
                    "uplink": uplink.counters_json(now),
                    "downlink": downlink.counters_json(now),
                    "lateness_us": interval.to_json(),
                    "cpu_s": user + system - cpu_user0 - cpu_sys0,
                });
                writeln!(sink, "{line}").map_err(|e| format!("--stats: {e}"))?;
                while next_stats_ns <= now {
                    next_stats_ns += config.stats_interval_ns;
                }
            }
        }
        if let Some(end) = end_ns.filter(|end| now >= *end) {
            reason = if Some(end) == config.duration_ns { "duration" } else { "trace-end" };
            break;
        }

        let releases = next_pass_ns(&uplink, &downlink, config.coalesce_ns);
        let target = [releases, stats.as_ref().map(|_| next_stats_ns), end_ns].into_iter().flatten().min();
        epoll.wait(pacer.wait(now, target).timeout_ns(), &mut tokens)?;
        if tokens.is_empty() {
            pacer.timed_out(clock());
        }
        let mut stop = false;
        for token in &tokens {
            match *token {
                TOKEN_SENDER => read_batch(sender_fd, &mut uplink, &mut pool, buffer_len, t0)?,
                TOKEN_RECEIVER => read_batch(receiver_fd, &mut downlink, &mut pool, buffer_len, t0)?,
                _ => stop = true,
            }
        }
        if stop {
            break;
        }
    }

    let wall_ns = sys::monotonic_ns() - t0;
    uplink.finish(wall_ns)?;
    downlink.finish(wall_ns)?;
    let (user, system) = sys::cpu_seconds();
    let (user, system) = (user - cpu_user0, system - cpu_sys0);
    let wall_s = wall_ns as f64 / 1e9;
    let mut lateness = uplink.lateness.clone();
    lateness.merge(&downlink.lateness);
    emit(&json!({
        "event": "summary",
        "version": env!("CARGO_PKG_VERSION"),
        "reason": reason,
        "order": config.loss_position.order(),
        "wall_s": wall_s,
        "cpu_user_s": user,
        "cpu_sys_s": system,
        "cpu_share": if wall_s > 0.0 { (user + system) / wall_s } else { 0.0 },
        "lateness_us": lateness.to_json(),
        "uplink": uplink.counters_json(wall_ns),
        "downlink": downlink.counters_json(wall_ns),
        "config": {
            "uplink": config.uplink.to_json(),
            "downlink": config.downlink.to_json(),
            "loss_position": if config.loss_position == LossPosition::After { "after" } else { "before" },
            "seed": config.seed,
            "mtu": config.mtu,
            "spin_us": config.spin_ns as f64 / 1e3,
            "coalesce_us": config.coalesce_ns as f64 / 1e3,
        },
        "wake": {
            "timed_sleeps": pacer.timed_sleeps,
            "sleep_cost_us": pacer.sleep_cost_ns() as f64 / 1e3,
            "latency_p90_us": pacer.latency.estimate_ns() as f64 / 1e3,
        },
    }));
    drop(devices);
    Ok(())
}

/// When the next pass should run to serve the earliest release: late enough to serve, in the same
/// pass, every release due within `coalesce_ns` after it. A pass only writes packets already due.
fn next_pass_ns(uplink: &Direction, downlink: &Direction, coalesce_ns: u64) -> Option<u64> {
    let earliest = [uplink.next_event_ns(), downlink.next_event_ns()].into_iter().flatten().min()?;
    let window_end = earliest + coalesce_ns;
    [Some(earliest), uplink.last_release_until(window_end), downlink.last_release_until(window_end)]
        .into_iter()
        .flatten()
        .max()
}

/// Reads up to READ_BATCH packets from one device into its direction, stamping each on arrival.
fn read_batch(fd: i32, direction: &mut Direction, pool: &mut Vec<Vec<u8>>, len: usize, t0: u64) -> Result<(), String> {
    for _ in 0..READ_BATCH {
        let mut buffer = pool.pop().unwrap_or_default();
        buffer.resize(len, 0);
        match sys::read(fd, &mut buffer)? {
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
