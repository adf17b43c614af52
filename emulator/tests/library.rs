//! The crate used as a library, as a bench or another tool would: a command line becomes a
//! validated configuration, which builds a direction of the link model that runs on a clock of
//! our own (no devices, no root).

use ccsweep_link::cli::parse_args;
use ccsweep_link::config::Config;
use ccsweep_link::error::Error;

fn config(options: &[&str]) -> Result<Config, Error> {
    let base = ["ccsweep-link", "--sender-netns", "s", "--receiver-netns", "r", "--downlink-rate", "12mbit"];
    let argv = base.iter().chain(options).map(|s| s.to_string());
    Config::from_args(&parse_args(argv).expect("the command line parses"))
}

/// Writes every packet due by `now_ns`, and returns how many left.
fn release_at(direction: &mut ccsweep_link::link::Direction, now_ns: u64) -> u64 {
    direction.advance(now_ns);
    let before = direction.counters.out_packets;
    direction.release(|| now_ns, |_| true);
    direction.counters.out_packets - before
}

#[test]
fn a_configured_direction_serialises_delays_and_holds_as_told() {
    // With offloads each frame starts with a 10-byte virtio_net_hdr, which the link does not count.
    for (offload, frame_bytes) in [("none", 1500), ("tso", 1510)] {
        serialises_delays_and_holds(offload, frame_bytes);
    }
}

fn serialises_delays_and_holds(offload: &str, frame_bytes: usize) {
    // 12 Mbit/s: a 1500-byte packet takes 1 ms; 10 ms of delay; every release held 2 ms.
    let options = ["--uplink-rate", "12mbit", "--uplink-delay", "10ms", "--inject-lateness", "fixed:2ms", "--offload", offload];
    let config = config(&options).unwrap();
    let mut uplink = config.uplink.build(&config).unwrap();
    (0..3).for_each(|_| uplink.arrive(0, vec![0; frame_bytes]));
    assert_eq!(release_at(&mut uplink, 11_000_000), 0, "due at 11 ms, held to 13 ms");
    assert_eq!(uplink.next_event_ns(), Some(13_000_000));
    assert_eq!(release_at(&mut uplink, 13_000_000), 1);
    assert_eq!(release_at(&mut uplink, 15_000_000), 2, "due at 12 and 13 ms, each held 2 ms");
    assert_eq!(uplink.counters.injected_delays, 3);
    assert_eq!(uplink.lateness.to_json()["p50"], 2_001.0);
    assert_eq!(uplink.counters.out_bytes, 3 * 1500);
}

#[test]
fn a_bad_option_is_an_argument_error_naming_it() {
    let error = config(&["--uplink-rate", "12mbit", "--inject-lateness", "fixed:2ms,p=-1"]).err().unwrap();
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().starts_with("--inject-lateness: p: -1 is outside [0, 1]"), "{error}");
}

#[test]
fn one_pass_serves_every_link_with_a_release_in_the_window() {
    use ccsweep_link::emulate::next_pass_ns;
    // 12 Mbit/s and 10 ms: a packet in at 0 leaves at 11 ms; one in at 50 us on another link at 11.05 ms.
    let options = ["--uplink-rate", "12mbit", "--uplink-delay", "10ms", "--offload", "none"];
    let config = config(&options).unwrap();
    let (mut first, mut second) = (config.uplink.build(&config).unwrap(), config.uplink.build(&config).unwrap());
    first.arrive(0, vec![0; 1500]);
    first.advance(0);
    second.arrive(50_000, vec![0; 1500]);
    second.advance(50_000);
    assert_eq!(next_pass_ns([&first], 100_000), Some(11_000_000), "alone: its own release");
    assert_eq!(next_pass_ns([&first, &second], 100_000), Some(11_050_000), "together: one wake-up for both");
    assert_eq!(next_pass_ns([&first, &second], 10_000), Some(11_000_000), "the second is beyond a 10 us window");
    assert_eq!(next_pass_ns([&second, &first], 10_000), Some(11_000_000), "whichever comes first in the list");
    let idle = config.uplink.build(&config).unwrap();
    assert_eq!(next_pass_ns([&idle], 100_000), None, "nothing on its way: no timed wake-up");
}
