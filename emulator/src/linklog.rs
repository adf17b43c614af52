//! Mahimahi-format link logs, so `mm-throughput-graph`, ReBBR's scripts and ccsweep's own
//! measurement read them alike: `t + bytes` (arrival), `t # bytes` (delivery opportunity),
//! `t - bytes delay_ms` (departure from the bottleneck), `t d npkts nbytes` (queue drop);
//! t in whole milliseconds since the base timestamp.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct LinkLog {
    out: BufWriter<File>,
}

impl LinkLog {
    pub fn create(path: &str, direction: &str, link: &str, queue: &str, command_line: &str) -> std::io::Result<Self> {
        let file = File::create(path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let init_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let header = format!(
            "# mahimahi mm-link ({direction}) [{link}] > {path}\n# command line: {command_line}\n\
             # queue: {queue}\n# init timestamp: {init_ms}\n# base timestamp: 0\n"
        );
        out.write_all(header.as_bytes())?;
        Ok(Self { out })
    }

    fn line(&mut self, args: std::fmt::Arguments) {
        // A full disk must not stall the link; the summary reports the link's own counters anyway.
        let _ = self.out.write_fmt(args);
    }

    pub fn arrival(&mut self, t_ns: u64, bytes: u32) {
        self.line(format_args!("{} + {bytes}\n", t_ns / 1_000_000));
    }

    pub fn opportunity(&mut self, t_ns: u64, bytes: u64) {
        self.line(format_args!("{} # {bytes}\n", t_ns / 1_000_000));
    }

    pub fn departure(&mut self, t_ns: u64, bytes: u32, arrival_ns: u64) {
        let delay_ms = t_ns / 1_000_000 - arrival_ns / 1_000_000;
        self.line(format_args!("{} - {bytes} {delay_ms}\n", t_ns / 1_000_000));
    }

    pub fn drop(&mut self, t_ns: u64, packets: u32, bytes: u64) {
        self.line(format_args!("{} d {packets} {bytes}\n", t_ns / 1_000_000));
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
