//! ccsweep-link: a user-space link emulator with Mahimahi's link model between two network
//! namespaces. See emulator/README.md for the model, the order of loss, queue and delay, and the
//! output it writes.

mod emulate;
mod lateness;
mod link;
mod linklog;
mod netdev;
mod queue;
mod sys;
mod trace;
mod units;

use clap::error::ErrorKind;
use clap::Parser;
use std::process::ExitCode;

/// Emulate a bottleneck link (rate or Mahimahi trace, one-way delay, Bernoulli loss, queue)
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
    /// Constant uplink rate (IP bytes), e.g. 100mbit.
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
    /// Play traces once and end the link when one runs out (default: repeat).
    #[arg(long)]
    pub once: bool,
    /// One-way uplink delay, e.g. 50ms or 12.5ms (a bare number is ms).
    #[arg(long, default_value = "0")]
    pub uplink_delay: String,
    /// One-way downlink delay.
    #[arg(long, default_value = "0")]
    pub downlink_delay: String,
    /// Uplink Bernoulli loss probability, a fraction in [0, 1].
    #[arg(long, default_value = "0")]
    pub uplink_loss: String,
    /// Downlink Bernoulli loss probability, a fraction in [0, 1].
    #[arg(long, default_value = "0")]
    pub downlink_loss: String,
    /// Loss after the bottleneck (as Mahimahi's usual nesting) or before it.
    #[arg(long, default_value = "after", value_parser = ["after", "before"])]
    pub loss_position: String,
    /// Uplink queue: infinite, droptail|drophead packets=N,bytes=N, codel target=MS,interval=MS[,limits], pie qdelay_ref=MS,max_burst=MS[,limits].
    #[arg(long, default_value = "infinite")]
    pub uplink_queue: String,
    /// Downlink queue (same syntax).
    #[arg(long, default_value = "infinite")]
    pub downlink_queue: String,
    /// Seed of the loss (and PIE) random generators: the same seed drops the same packets.
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
    /// Busy-wait this close to a departure instead of sleeping (trades CPU for lateness).
    #[arg(long, default_value = "0us")]
    pub spin: String,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(err) if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            let rendered = err.render().to_string();
            let first = rendered.lines().next().unwrap_or("bad arguments").trim_start_matches("error: ");
            eprintln!("ccsweep-link: error: {first}");
            return ExitCode::from(2);
        }
    };
    let config = match emulate::Config::from_args(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("ccsweep-link: error: {message}");
            return ExitCode::from(2);
        }
    };
    match emulate::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ccsweep-link: error: {message}");
            ExitCode::from(1)
        }
    }
}
