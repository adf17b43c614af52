//! The validated configuration: every option parsed and checked, so that a bad value is an
//! argument error before any namespace or device exists, and the summary can echo what ran.

use crate::cli::{Args, DirectionArgs};
use crate::delaytrace::DelayTrace;
use crate::error::Error;
use crate::inject::{InjectSpec, Injector};
use crate::jitter::{Jitter, JitterSpec};
use crate::link::{Direction, LossPosition, Server, Side, Stages};
use crate::linklog::LinkLog;
use crate::loss::LossModel;
use crate::policer::{Policer, PolicerSpec};
use crate::netdev::{check_device_name, check_netns_name, parse_address, Endpoint};
use crate::queue::{Queue, QueueSpec};
use crate::sched::{parse_priority, DEADLINE_PERIOD_NS, MIN_DEADLINE_RUNTIME_NS};
use crate::slot::{SlotSpec, Slots};
use crate::trace::Trace;
use crate::units::{parse_duration_ns, parse_rate};
use serde_json::{json, Value};

/// The longest `--spin` a real-time loop may busy-wait: its core is not free while it spins.
const MAX_REALTIME_SPIN_NS: u64 = 1_000_000;

/// What one direction does, validated.
pub struct DirectionConfig {
    pub side: Side,
    pub server: ServerConfig,
    pub delay_ns: u64,
    pub delay_trace: Option<DelayTrace>,
    pub loss: LossModel,
    pub policer: Option<PolicerSpec>,
    pub jitter: Option<JitterSpec>,
    pub slot: Option<SlotSpec>,
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
    /// TSO reads and GSO writes on both devices (`--offload tso`).
    pub offload: bool,
    pub uplink: DirectionConfig,
    pub downlink: DirectionConfig,
    pub loss_position: LossPosition,
    pub seed: u64,
    pub stats: Option<String>,
    pub stats_interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub spin_ns: u64,
    pub release_window_ns: u64,
    pub realtime_priority: Option<i32>,
    pub deadline_runtime_ns: u64,
    pub inject_lateness: Option<InjectSpec>,
    pub command_line: String,
}

impl Config {
    /// The stages' order, as every summary records it: a policer (on either direction) sits
    /// right before the queue.
    pub fn order(&self) -> String {
        let order = self.loss_position.order();
        if self.uplink.policer.is_some() || self.downlink.policer.is_some() {
            order.replacen("queue>", "policer>queue>", 1)
        } else {
            order.to_string()
        }
    }
}

impl DirectionConfig {
    pub fn from_args(args: &DirectionArgs, once: bool) -> Result<Self, Error> {
        let name = args.side.name();
        let option = |suffix: &str| Error::argument(format!("{name}-{suffix}"));
        let server = match (args.rate, args.trace) {
            (Some(rate), None) => ServerConfig::Rate(parse_rate(rate).map_err(option("rate"))?),
            (None, Some(path)) => {
                ServerConfig::Trace(path.to_string(), Trace::load(path, once).map_err(option("trace"))?)
            }
            _ => return Err(Error::Arguments(format!("give exactly one of --{name}-rate and --{name}-trace"))),
        };
        Ok(Self {
            side: args.side,
            server,
            delay_ns: parse_duration_ns(args.delay).map_err(option("delay"))?,
            delay_trace: args.delay_trace.map(DelayTrace::load).transpose().map_err(option("delay-trace"))?,
            loss: match args.gilbert_elliott {
                Some(values) => LossModel::gilbert_elliott(values).map_err(option("gilbert-elliott"))?,
                None => LossModel::bernoulli(args.loss).map_err(option("loss"))?,
            },
            policer: args.policer.map(PolicerSpec::parse).transpose().map_err(option("policer"))?,
            jitter: args
                .jitter
                .map(|values| JitterSpec::parse(values, args.jitter_tables.map(std::path::Path::new)))
                .transpose()
                .map_err(option("jitter"))?,
            slot: args.slot.map(SlotSpec::parse).transpose().map_err(option("slot"))?,
            queue: QueueSpec::parse(args.queue).map_err(option("queue"))?,
            log: args.log.map(str::to_string),
        })
    }

    fn describe(&self) -> String {
        match &self.server {
            ServerConfig::Rate(bps) => format!("{} Mbit/s", bps / 1e6),
            ServerConfig::Trace(path, _) => path.clone(),
        }
    }

    pub fn to_json(&self) -> Value {
        let server = match &self.server {
            ServerConfig::Rate(bps) => json!({"rate_bps": bps}),
            ServerConfig::Trace(path, trace) => {
                json!({"trace": path, "trace_mean_bps": trace.mean_rate_bps(), "once": trace.once})
            }
        };
        let delay_us = self.delay_ns as f64 / 1e3;
        let mut out =
            json!({"server": server, "delay_us": delay_us, "loss": self.loss.to_json(), "queue": self.queue.describe()});
        if let Some(policer) = &self.policer {
            out["policer"] = policer.to_json();
        }
        if let Some(trace) = &self.delay_trace {
            out["delay_trace"] = trace.to_json();
        }
        if let Some(jitter) = &self.jitter {
            out["jitter"] = jitter.to_json();
        }
        if let Some(slot) = &self.slot {
            out["slot"] = slot.to_json();
        }
        out
    }

    /// The running direction: its log file is created here, its random streams (loss, queue,
    /// jitter, slots, injection) all derive from `config.seed`, independent per direction and per purpose.
    pub fn build(&self, config: &Config) -> Result<Direction, Error> {
        let name = self.side.name();
        let log = match &self.log {
            Some(path) => Some(
                LinkLog::create(path, name, &self.describe(), &self.queue.describe(), &config.command_line)
                    .map_err(|source| self.log_error(source))?,
            ),
            None => None,
        };
        let server = match &self.server {
            ServerConfig::Rate(bps) => Server::rate(*bps),
            ServerConfig::Trace(_, trace) => Server::trace(trace.clone()),
        };
        let salt = self.side.salt();
        let injector =
            config.inject_lateness.clone().map(|spec| Injector::new(spec, config.seed ^ salt.rotate_left(41)));
        Ok(Direction::new(
            name,
            Stages {
                server,
                queue: Queue::new(self.queue.clone(), config.seed ^ salt.rotate_left(17)),
                delay_ns: self.delay_ns,
                delay_trace: self.delay_trace.clone(),
                loss: self.loss,
                loss_position: config.loss_position,
                policer: self.policer.map(Policer::new),
                jitter: self.jitter.clone().map(|spec| Jitter::new(spec, config.seed ^ salt.rotate_left(29))),
                slots: self.slot.map(|spec| Slots::new(spec, config.seed ^ salt.rotate_left(53))),
                offload: config.offload,
                loss_seed: config.seed ^ salt,
                injector,
                log,
            },
        ))
    }

    /// A failure to write this direction's `--*-log` file.
    pub fn log_error(&self, source: std::io::Error) -> Error {
        let path = self.log.clone().unwrap_or_default();
        Error::File { option: format!("{}-log", self.side.name()), path, source }
    }
}

/// The two ends of the link, checked so that a bad name or address is an argument error before
/// any namespace exists.
fn endpoints(args: &Args) -> Result<(Endpoint, Endpoint), Error> {
    check_netns_name(&args.sender_netns).map_err(Error::argument("sender-netns"))?;
    check_netns_name(&args.receiver_netns).map_err(Error::argument("receiver-netns"))?;
    if args.sender_netns == args.receiver_netns {
        return Err(Error::argument("receiver-netns")("must differ from --sender-netns (one device in each)".into()));
    }
    let sender_addr = parse_address(&args.sender_addr).map_err(Error::argument("sender-addr"))?;
    let receiver_addr = parse_address(&args.receiver_addr).map_err(Error::argument("receiver-addr"))?;
    if sender_addr == receiver_addr {
        return Err(Error::argument("receiver-addr")(format!(
            "{receiver_addr} is also --sender-addr (the two ends need two addresses)"
        )));
    }
    let sender = Endpoint { netns: args.sender_netns.clone(), local: sender_addr, peer: receiver_addr };
    let receiver = Endpoint { netns: args.receiver_netns.clone(), local: receiver_addr, peer: sender_addr };
    Ok((sender, receiver))
}

/// The loop's timing options: `--spin`, `--release-window`, and the priority, whose busy-waiting is
/// bounded while it is real-time.
fn timing(args: &Args) -> Result<(u64, u64, Option<i32>), Error> {
    let spin_ns = parse_duration_ns(&args.spin).map_err(Error::argument("spin"))?;
    let release_window_ns =
        parse_duration_ns(&args.release_window).map_err(Error::argument("release-window"))?;
    let priority = match &args.realtime_priority {
        Some(text) => Some(parse_priority(text).map_err(Error::argument("realtime-priority"))?),
        None => None,
    };
    if priority.is_some() && spin_ns > MAX_REALTIME_SPIN_NS {
        return Err(Error::argument("spin")(format!(
            "{:?} is more than 1ms, the most a --realtime-priority loop may busy-wait",
            args.spin
        )));
    }
    Ok((spin_ns, release_window_ns, priority))
}

impl Config {
    pub fn from_args(args: &Args) -> Result<Self, Error> {
        let (sender, receiver) = endpoints(args)?;
        check_device_name(&args.dev).map_err(Error::argument("dev"))?;
        if !(576..=9000).contains(&args.mtu) {
            return Err(Error::argument("mtu")(format!("{} is outside 576 to 9000", args.mtu)));
        }
        let uplink = DirectionConfig::from_args(&args.direction(Side::Uplink), args.once)?;
        let downlink = DirectionConfig::from_args(&args.direction(Side::Downlink), args.once)?;
        let stats_interval_ns = parse_duration_ns(&args.stats_interval).map_err(Error::argument("stats-interval"))?;
        if stats_interval_ns < 1_000_000 {
            return Err(Error::argument("stats-interval")("must be at least 1ms".into()));
        }
        let duration_ns = match &args.duration {
            Some(text) => Some(parse_duration_ns(text).map_err(Error::argument("duration"))?),
            None => None,
        };
        let (spin_ns, release_window_ns, realtime_priority) = timing(args)?;
        let deadline_runtime_ns =
            parse_duration_ns(&args.deadline_runtime).map_err(Error::argument("deadline-runtime"))?;
        if !(MIN_DEADLINE_RUNTIME_NS..=DEADLINE_PERIOD_NS).contains(&deadline_runtime_ns) {
            return Err(Error::argument("deadline-runtime")(format!(
                "{:?} is outside 50us to 1ms (the reservation's period)",
                args.deadline_runtime
            )));
        }
        let inject_lateness = match &args.inject_lateness {
            Some(text) => Some(InjectSpec::parse(text).map_err(Error::argument("inject-lateness"))?),
            None => None,
        };
        Ok(Self {
            sender,
            receiver,
            dev: args.dev.clone(),
            mtu: args.mtu,
            offload: args.offload == "tso",
            uplink,
            downlink,
            loss_position: if args.loss_position == "before" { LossPosition::Before } else { LossPosition::After },
            seed: args.seed,
            stats: args.stats.clone(),
            stats_interval_ns,
            duration_ns,
            spin_ns,
            release_window_ns,
            realtime_priority,
            deadline_runtime_ns,
            inject_lateness,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        })
    }

    /// The configuration as the summary records it.
    pub fn to_json(&self) -> Value {
        json!({
            "uplink": self.uplink.to_json(),
            "downlink": self.downlink.to_json(),
            "loss_position": if self.loss_position == LossPosition::After { "after" } else { "before" },
            "seed": self.seed,
            "mtu": self.mtu,
            "offload": if self.offload { "tso" } else { "none" },
            "spin_us": self.spin_ns as f64 / 1e3,
            "release_window_us": self.release_window_ns as f64 / 1e3,
            "realtime_priority": self.realtime_priority,
            "deadline_runtime_us": self.deadline_runtime_ns as f64 / 1e3,
            "inject_lateness": self.inject_lateness.as_ref().map(|spec| spec.text.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args;

    /// The configuration of a 10 Mbit/s link with `extra` options (each replacing a default).
    fn config(extra: &[&str]) -> Result<Config, Error> {
        let defaults = [
            ("--sender-netns", "s"),
            ("--receiver-netns", "r"),
            ("--uplink-rate", "10mbit"),
            ("--downlink-rate", "10mbit"),
        ];
        let given: Vec<(&str, &str)> = extra.chunks(2).map(|pair| (pair[0], pair[1])).collect();
        let kept = defaults.into_iter().filter(|(key, _)| !given.iter().any(|(option, _)| option == key));
        let argv = std::iter::once("ccsweep-link").chain(kept.chain(given.iter().copied()).flat_map(|(k, v)| [k, v]));
        Config::from_args(&parse_args(argv.map(str::to_string)).unwrap())
    }

    fn error(extra: &[&str]) -> String {
        let error = config(extra).err().expect("an error");
        assert_eq!(error.exit_code(), 2, "{error}");
        error.to_string()
    }

    #[test]
    fn options_are_named_in_their_errors() {
        assert_eq!(error(&["--uplink-rate", "0mbit"]), "--uplink-rate: \"0mbit\": rate must be > 0");
        assert!(error(&["--downlink-loss", "1.5"]).starts_with("--downlink-loss: 1.5 is outside [0, 1]"));
        assert!(error(&["--receiver-netns", "s"]).starts_with("--receiver-netns: must differ"));
        assert!(error(&["--mtu", "100"]).starts_with("--mtu: 100 is outside 576 to 9000"));
        assert_eq!(error(&["--stats-interval", "10us"]), "--stats-interval: must be at least 1ms");
        assert!(error(&["--inject-lateness", "fixed:2s"]).starts_with("--inject-lateness: \"2s\" is longer"));
        assert!(error(&["--realtime-priority", "0"]).starts_with("--realtime-priority: \"0\" is not a SCHED_FIFO"));
    }

    /// The configuration of a 10 Mbit/s link given `extra` argv elements as they are.
    fn config_argv(extra: &[&str]) -> Result<Config, Error> {
        let base = ["ccsweep-link", "--sender-netns", "s", "--receiver-netns", "r", "--uplink-rate", "10mbit"];
        let argv = base.iter().chain(["--downlink-rate", "10mbit"].iter()).chain(extra.iter());
        let args = parse_args(argv.map(|s| s.to_string())).map_err(|e| Error::Arguments(crate::cli::one_line(&e)))?;
        Config::from_args(&args)
    }

    #[test]
    fn a_policer_is_echoed_and_ordered_before_the_queue() {
        let plain = config_argv(&[]).unwrap();
        assert_eq!(plain.order(), "queue>bottleneck>loss>delay");
        assert!(plain.to_json()["uplink"].get("policer").is_none(), "no policer: the summary as before");
        let config = config_argv(&["--uplink-policer", "10mbit", "30000"]).unwrap();
        assert_eq!(config.order(), "policer>queue>bottleneck>loss>delay");
        assert_eq!(config.to_json()["uplink"]["policer"]["burst_bytes"], 30000);
        let error = config_argv(&["--downlink-policer", "10mbit", "10"]).err().unwrap().to_string();
        assert!(error.starts_with("--downlink-policer: burst 10 is outside [1500, 1073741824]"), "{error}");
    }

    #[test]
    fn a_jitter_is_echoed_with_its_table_and_a_bad_one_names_its_option() {
        assert!(config_argv(&[]).unwrap().to_json()["uplink"].get("jitter").is_none(), "no jitter: as before");
        let config = config_argv(&["--downlink-jitter", "5ms", "normal", "keep"]).unwrap();
        let echoed = &config.to_json()["downlink"]["jitter"];
        assert_eq!((echoed["jitter_us"].as_f64(), echoed["order"].as_str()), (Some(5000.0), Some("keep")));
        assert!(echoed["table"]["path"].as_str().unwrap().ends_with("/normal.dist"));
        let error = config_argv(&["--uplink-jitter", "5ms", "normal", "keep", "--jitter-tables", "/nonexistent"])
            .err().unwrap().to_string();
        assert!(error.starts_with("--uplink-jitter: /nonexistent/normal.dist: "), "{error}");
    }

    #[test]
    fn a_delay_trace_is_echoed_and_a_bad_one_names_its_option_file_and_line() {
        assert!(config_argv(&[]).unwrap().to_json()["uplink"].get("delay_trace").is_none(), "none: as before");
        let path = std::env::temp_dir().join(format!("ccsweep-config-delay-{}", std::process::id()));
        let path_text = path.to_str().expect("a UTF-8 temp dir");
        std::fs::write(&path, "# up, then down
1000 30
2000 5.5
").unwrap();
        let echoed = config_argv(&["--downlink-delay-trace", path_text]).unwrap().to_json()["downlink"]["delay_trace"].clone();
        assert_eq!((echoed["path"].as_str(), echoed["steps"].as_u64()), (Some(path_text), Some(2)));
        assert_eq!((echoed["min_delay_us"].as_f64(), echoed["max_delay_us"].as_f64()), (Some(5_500.0), Some(30_000.0)));
        std::fs::write(&path, "1000 30
2000 12000
").unwrap();
        let error = config_argv(&["--uplink-delay-trace", path_text]).err().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(error.to_string(), format!("--uplink-delay-trace: {path_text}:2: delay 12000 ms is outside [0, 10000] ms"));
    }

    #[test]
    fn slots_are_echoed_and_a_bad_one_names_its_option() {
        assert!(config_argv(&[]).unwrap().to_json()["downlink"].get("slot").is_none(), "no slots: as before");
        let config = config_argv(&["--downlink-slot", "1ms", "4ms", "16", "0"]).unwrap();
        let echoed = &config.to_json()["downlink"]["slot"];
        assert_eq!((echoed["min_us"].as_f64(), echoed["max_us"].as_f64(), echoed["packets"].as_u64()),
                   (Some(1000.0), Some(4000.0), Some(16)));
        let error = config_argv(&["--uplink-slot", "4ms", "1ms", "0", "0"]).err().unwrap().to_string();
        assert!(error.starts_with("--uplink-slot: slot gaps \"4ms\" to \"1ms\": give 1ns <= MIN"), "{error}");
    }

    #[test]
    fn gilbert_elliott_takes_one_argument_per_value() {
        let config = config_argv(&["--downlink-gilbert-elliott", "0.01", "0.25", "1", "0"]).unwrap();
        let model = LossModel::GilbertElliott { p: 0.01, r: 0.25, one_minus_h: 1.0, one_minus_k: 0.0 };
        assert_eq!(config.downlink.loss, model);
        assert_eq!(config.uplink.loss, LossModel::Bernoulli { p: 0.0 });
        let json = config.to_json();
        assert_eq!(json["downlink"]["loss"]["model"], "gilbert-elliott");
        assert!((json["downlink"]["loss"]["mean_loss_rate"].as_f64().unwrap() - 0.01 / 0.26).abs() < 1e-12);
        assert_eq!(json["uplink"]["loss"], 0.0, "Bernoulli loss is echoed as before");
        let error = config_argv(&["--uplink-gilbert-elliott", "0.1", "0.3", "2", "0"]).err().unwrap().to_string();
        assert!(error.starts_with("--uplink-gilbert-elliott: 1-H: 2 is outside [0, 1]"), "{error}");
        // One string holding the four values is not four values.
        assert!(config_argv(&["--uplink-gilbert-elliott", "0.1 0.3 1 0"]).is_err());
        let both = config_argv(&["--uplink-loss", "0.01", "--uplink-gilbert-elliott", "0.1", "0.3", "1", "0"]);
        let error = both.err().unwrap().to_string();
        assert!(error.contains("--uplink-gilbert-elliott") && error.contains("--uplink-loss"), "{error}");
    }

    #[test]
    fn a_direction_needs_exactly_one_server() {
        let both = ["--uplink-rate", "10mbit", "--uplink-trace", "/dev/null"];
        assert_eq!(error(&both), "give exactly one of --uplink-rate and --uplink-trace");
    }

    #[test]
    fn the_deadline_reservation_is_50us_to_its_1ms_period() {
        assert_eq!(config(&[]).unwrap().deadline_runtime_ns, 300_000);
        assert_eq!(config(&["--deadline-runtime", "150us"]).unwrap().to_json()["deadline_runtime_us"], 150.0);
        assert_eq!(config(&["--deadline-runtime", "1ms"]).unwrap().deadline_runtime_ns, 1_000_000);
        for bad in ["49us", "2ms", "0us"] {
            let message = error(&["--deadline-runtime", bad]);
            assert!(message.starts_with("--deadline-runtime:") && message.contains("50us to 1ms"), "{message}");
        }
    }

    #[test]
    fn a_realtime_loop_spins_at_most_1ms() {
        assert!(config(&["--realtime-priority", "10", "--spin", "1ms"]).is_ok());
        assert!(config(&["--spin", "5ms"]).is_ok());
        assert!(error(&["--realtime-priority", "10", "--spin", "5ms"]).starts_with("--spin: \"5ms\" is more than 1ms"));
    }

    #[test]
    fn the_summary_echoes_priority_and_injection() {
        let json = config(&["--realtime-priority", "10", "--inject-lateness", "exp:500us,p=0.01"]).unwrap().to_json();
        assert_eq!(json["realtime_priority"], 10);
        assert_eq!(json["inject_lateness"], "exp:500us,p=0.01");
        let json = config(&[]).unwrap().to_json();
        assert!(json["realtime_priority"].is_null() && json["inject_lateness"].is_null());
    }
}
