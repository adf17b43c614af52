//! The command line: every option with its help text, and clap's errors as one line.

use clap::{CommandFactory, FromArgMatches, Parser};
use crate::link::Side;

/// Emulate a bottleneck link (rate or Mahimahi trace, one-way delay, Bernoulli or Gilbert-Elliott loss, queue)
/// between a sender and a receiver network namespace, with TUN devices in each.
#[derive(Parser, Debug)]
#[command(name = "ccsweep-link", version, about, long_about = None)]
pub struct Args {
    /// Network namespace of the sender (data flows uplink from it); created if missing.
    #[arg(long)]
    pub sender_netns: String,
    /// Network namespace of the receiver; created if missing.
    #[arg(long)]
    pub receiver_netns: String,
    /// Address of the sender's device.
    #[arg(long, default_value = "10.0.0.1")]
    pub sender_addr: String,
    /// Address of the receiver's device.
    #[arg(long, default_value = "10.0.0.2")]
    pub receiver_addr: String,
    /// Name of the TUN device in each namespace.
    #[arg(long, default_value = "ccl0")]
    pub dev: String,
    /// MTU of both devices (bytes, 576 to 9000).
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Constant uplink rate, e.g. 100mbit: as Mahimahi's constant-rate trace, each packet costs
    /// its IP length + 4 bytes, so 1500-byte packets leave at exactly this rate.
    #[arg(long)]
    pub uplink_rate: Option<String>,
    /// Mahimahi trace for the uplink (1504-byte opportunities at ms timestamps).
    #[arg(long)]
    pub uplink_trace: Option<String>,
    /// Constant downlink rate, e.g. 100mbit.
    #[arg(long)]
    pub downlink_rate: Option<String>,
    /// Mahimahi trace for the downlink.
    #[arg(long)]
    pub downlink_trace: Option<String>,
    /// TUN offloads: `tso` lets the sending host hand over whole TCP segments (up to 64 KB a
    /// read), which the link cuts into the packets the host would have sent, and writes the
    /// packets of one segment that leave in the same pass as one GSO write; `none` moves one
    /// packet per read and write. The link model sees the same packets either way.
    #[arg(long, default_value = "tso", value_parser = ["tso", "none"])]
    pub offload: String,
    /// Play traces once and end the link when one runs out (default: repeat).
    #[arg(long)]
    pub once: bool,
    /// One-way uplink delay, e.g. 50ms or 12.5ms (a bare number is ms).
    #[arg(long, default_value = "0")]
    pub uplink_delay: String,
    /// One-way downlink delay.
    #[arg(long, default_value = "0")]
    pub downlink_delay: String,
    /// Uplink delay trace: a text file of `T_MS DELAY_MS` lines, the one-way delay (ms, 0 to
    /// 10000) from T_MS (ms since the link started, non-decreasing, at most 10^7) on; --uplink-delay
    /// before the first, the last delay after it. Packets keep their order (`#` lines are comments).
    #[arg(long, value_name = "FILE")]
    pub uplink_delay_trace: Option<String>,
    /// Downlink delay trace (same format).
    #[arg(long, value_name = "FILE")]
    pub downlink_delay_trace: Option<String>,
    /// Uplink Bernoulli loss probability, a fraction in [0, 1].
    #[arg(long, default_value = "0")]
    pub uplink_loss: String,
    /// Downlink Bernoulli loss probability, a fraction in [0, 1].
    #[arg(long, default_value = "0")]
    pub downlink_loss: String,
    /// Uplink Gilbert-Elliott loss instead, with netem's gemodel parameters as four fractions in
    /// [0, 1]: P (Good to Bad), R (Bad to Good), 1-H (loss in Bad), 1-K (loss in Good).
    #[arg(long, num_args = 4, value_names = ["P", "R", "1-H", "1-K"], conflicts_with = "uplink_loss")]
    pub uplink_gilbert_elliott: Option<Vec<String>>,
    /// Downlink Gilbert-Elliott loss instead (same parameters).
    #[arg(long, num_args = 4, value_names = ["P", "R", "1-H", "1-K"], conflicts_with = "downlink_loss")]
    pub downlink_gilbert_elliott: Option<Vec<String>>,
    /// Uplink policer: a token bucket of BURST bytes (1500 to 1 GiB) filling at RATE (e.g.
    /// 10mbit), starting full, just before the queue; a packet it has no tokens for is dropped.
    #[arg(long, num_args = 2, value_names = ["RATE", "BURST"])]
    pub uplink_policer: Option<Vec<String>>,
    /// Downlink policer (same parameters).
    #[arg(long, num_args = 2, value_names = ["RATE", "BURST"])]
    pub downlink_policer: Option<Vec<String>>,
    /// Uplink jitter: each packet's delay varies around --uplink-delay by JITTER (1ns to 10s),
    /// drawn as netem draws it from DISTRIBUTION (uniform, normal, pareto, paretonormal), never
    /// below zero; ORDER keep (a packet never leaves before the one ahead) or reorder.
    #[arg(long, num_args = 3, value_names = ["JITTER", "DISTRIBUTION", "ORDER"])]
    pub uplink_jitter: Option<Vec<String>>,
    /// Downlink jitter (same parameters).
    #[arg(long, num_args = 3, value_names = ["JITTER", "DISTRIBUTION", "ORDER"])]
    pub downlink_jitter: Option<Vec<String>>,
    /// Uplink slots (ACK aggregation, as netem's `slot`): packets leave only when a slot opens,
    /// slots MIN to MAX apart (uniform; 1ns <= MIN <= MAX <= 1s), each taking at most PACKETS
    /// packets and, as netem counts, packets while fewer than BYTES bytes have left (0: no limit).
    #[arg(long, num_args = 4, value_names = ["MIN", "MAX", "PACKETS", "BYTES"])]
    pub uplink_slot: Option<Vec<String>>,
    /// Downlink slots (same parameters).
    #[arg(long, num_args = 4, value_names = ["MIN", "MAX", "PACKETS", "BYTES"])]
    pub downlink_slot: Option<Vec<String>>,
    /// Folder of netem's distribution tables (NAME.dist) for jitter (default: iproute2's, as tc
    /// finds it: $TC_LIB_DIR, /usr/lib/<arch>-linux-gnu/tc, /usr/lib/tc).
    #[arg(long, value_name = "DIR")]
    pub jitter_tables: Option<String>,
    /// Loss after the bottleneck (as Mahimahi's usual nesting) or before it.
    #[arg(long, default_value = "after", value_parser = ["after", "before"])]
    pub loss_position: String,
    /// Uplink queue: infinite, droptail|drophead packets=N,bytes=N, codel target=MS,interval=MS[,limits], pie qdelay_ref=MS,max_burst=MS[,limits];
    /// codel and pie take ecn=1 (mark ECN-capable packets CE instead of dropping them), every queue l4s_step_us=US (mark ECT(1) packets CE that waited US or more).
    #[arg(long, default_value = "infinite")]
    pub uplink_queue: String,
    /// Downlink queue (same syntax).
    #[arg(long, default_value = "infinite")]
    pub downlink_queue: String,
    /// Seed of the loss, PIE and --inject-lateness random generators: the same seed drops (and
    /// holds) the same packets.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a Mahimahi-format uplink log here.
    #[arg(long)]
    pub uplink_log: Option<String>,
    /// Write a Mahimahi-format downlink log here.
    #[arg(long)]
    pub downlink_log: Option<String>,
    /// Write a JSON stats line every --stats-interval to this file ('-' for stdout).
    #[arg(long)]
    pub stats: Option<String>,
    /// Interval of the stats lines.
    #[arg(long, default_value = "100ms")]
    pub stats_interval: String,
    /// Stop after this long (default: run until SIGTERM or SIGINT).
    #[arg(long)]
    pub duration: Option<String>,
    /// Always wake at least this early before a release and busy-wait the rest (trades CPU for
    /// lateness; the emulator already wakes early by the wake-up latency it observes, within 2%
    /// of the time it sleeps).
    #[arg(long, default_value = "0us")]
    pub spin: String,
    /// The release window: serve in one wake-up every release due within this of the earliest: a
    /// packet may wait up to this long for later ones, and fewer wake-ups (costly under
    /// virtualisation) save CPU. `--coalesce`, its former name, is still taken.
    #[arg(long = "release-window", alias = "coalesce", default_value = "100us")]
    pub release_window: String,
    /// Run the packet loop's thread at this SCHED_FIFO priority (1 to 99) where the process may
    /// (root, or CAP_SYS_NICE in a pod), else at nice -10, else as before: what it got is said
    /// once on stderr and as `sched` in the ready line and the summary. Caps --spin at 1ms.
    #[arg(long, value_name = "N")]
    pub realtime_priority: Option<String>,
    /// Where SCHED_FIFO is refused (a pod's cgroup without a real-time budget) and the loop gets
    /// SCHED_DEADLINE instead: the time it reserves in every 1 ms, 50us to 1ms. The kernel admits
    /// reservations while they sum to at most 95 % of the cores, so on a crowded node each cell
    /// asks for its own share of a core (the cell runner gives its pod's CPU request).
    #[arg(long, value_name = "DURATION", default_value = "300us")]
    pub deadline_runtime: String,
    /// Debug: hold releases back on purpose, to see the self-check flag a late link. KIND:ARGS
    /// with fixed:D, uniform:A-B or exp:MEAN (durations), then optionally ,p=P, the share of
    /// packets held (default 1); seeded by --seed. A held packet holds those behind it.
    #[arg(long, value_name = "DIST")]
    pub inject_lateness: Option<String>,
}

/// The options of one direction, as given.
pub struct DirectionArgs<'a> {
    pub side: Side,
    pub rate: Option<&'a str>,
    pub trace: Option<&'a str>,
    pub delay: &'a str,
    pub delay_trace: Option<&'a str>,
    pub loss: &'a str,
    pub gilbert_elliott: Option<&'a [String]>,
    pub policer: Option<&'a [String]>,
    pub jitter: Option<&'a [String]>,
    pub jitter_tables: Option<&'a str>,
    pub slot: Option<&'a [String]>,
    pub queue: &'a str,
    pub log: Option<&'a str>,
}

impl Args {
    pub fn direction(&self, side: Side) -> DirectionArgs<'_> {
        match side {
            Side::Uplink => DirectionArgs {
                side,
                rate: self.uplink_rate.as_deref(),
                trace: self.uplink_trace.as_deref(),
                delay: &self.uplink_delay,
                delay_trace: self.uplink_delay_trace.as_deref(),
                loss: &self.uplink_loss,
                gilbert_elliott: self.uplink_gilbert_elliott.as_deref(),
                policer: self.uplink_policer.as_deref(),
                jitter: self.uplink_jitter.as_deref(),
                slot: self.uplink_slot.as_deref(),
                jitter_tables: self.jitter_tables.as_deref(),
                queue: &self.uplink_queue,
                log: self.uplink_log.as_deref(),
            },
            Side::Downlink => DirectionArgs {
                side,
                rate: self.downlink_rate.as_deref(),
                trace: self.downlink_trace.as_deref(),
                delay: &self.downlink_delay,
                delay_trace: self.downlink_delay_trace.as_deref(),
                loss: &self.downlink_loss,
                gilbert_elliott: self.downlink_gilbert_elliott.as_deref(),
                policer: self.downlink_policer.as_deref(),
                jitter: self.downlink_jitter.as_deref(),
                slot: self.downlink_slot.as_deref(),
                jitter_tables: self.jitter_tables.as_deref(),
                queue: &self.downlink_queue,
                log: self.downlink_log.as_deref(),
            },
        }
    }
}

/// Parses the command line. Every option's value may start with a hyphen, so that
/// `--uplink-rate -3mbit` reaches our own parser, which names the option and the allowed range,
/// instead of being taken for an unknown option.
pub fn parse_args(argv: impl IntoIterator<Item = String>) -> Result<Args, clap::Error> {
    let command = Args::command().mut_args(|arg| {
        let takes_value = arg.get_action().takes_values();
        arg.allow_hyphen_values(takes_value)
    });
    Args::from_arg_matches(&command.try_get_matches_from(argv)?)
}

/// clap's message as one line: its first paragraph (the error and the options it names, e.g.
/// each missing required option on a line of its own), without the usage and help hints.
pub fn one_line(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect();
    let joined = message.join(" ");
    let joined = joined.trim_start_matches("error: ").trim();
    if joined.is_empty() { "bad arguments (see --help)".to_string() } else { joined.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        std::iter::once("ccsweep-link").chain(args.iter().copied()).map(String::from).collect()
    }

    #[test]
    fn a_missing_option_is_named_on_one_line() {
        let err = parse_args(argv(&["--sender-netns", "s"])).unwrap_err();
        let line = one_line(&err);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with("the following required arguments were not provided:"), "{line}");
        assert!(line.contains("--receiver-netns"), "{line}");
    }

    #[test]
    fn values_may_start_with_a_hyphen() {
        let args = parse_args(argv(&["--sender-netns", "s", "--receiver-netns", "r", "--uplink-rate", "-3mbit"])).unwrap();
        assert_eq!(args.uplink_rate.as_deref(), Some("-3mbit"));
        assert!(parse_args(argv(&["--sender-netns", "s", "--receiver-netns", "r", "--once", "-3"])).is_err());
    }

    #[test]
    fn the_release_window_keeps_its_former_name() {
        let named = parse_args(argv(&["--sender-netns", "s", "--receiver-netns", "r", "--release-window", "250us"]));
        let former = parse_args(argv(&["--sender-netns", "s", "--receiver-netns", "r", "--coalesce", "250us"]));
        assert_eq!(named.unwrap().release_window, "250us");
        assert_eq!(former.unwrap().release_window, "250us");
        let help = Args::command().render_long_help().to_string();
        assert!(help.contains("--release-window") && !help.contains("--coalesce <"), "{help}");
    }
}
