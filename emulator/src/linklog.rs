//! Mahimahi-format link logs, so `mm-throughput-graph`, ReBBR's scripts and ccsweep's own
//! measurement read them alike: `t + bytes` (arrival), `t # bytes` (delivery opportunity),
//! `t - bytes delay_ms` (departure from the bottleneck), `t d npkts nbytes` (queue drop);
//! t in whole milliseconds since the base timestamp.
//!
//! The loop only records events; a thread of its own formats and writes them. Formatting and
//! writing used to run in the loop, and a constant-rate link logs every delivery opportunity (8,300
//! a second at 100 Mbit/s) whether or not a packet uses it: after seconds of idle, the first
//! packet's arrival caught up on them all at once, 225,000 lines after 27 s, and the packets
//! released around it left milliseconds late. A stretch of opportunities is therefore one event,
//! written out by the thread, and the loop's cost per event is a push onto a vector.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// Events handed to the writer at a time: a batch (40 kB) stays below the allocator's mmap
/// threshold, so handing one over costs no system call.
const BATCH_EVENTS: usize = 1024;
/// Batches the channel holds before the loop keeps events itself.
const CHANNEL_BATCHES: usize = 64;
/// Link time after which the loop hands its events over even when a batch is not full, so that a
/// link with few packets is written as it goes rather than all at its end.
const HAND_OVER_NS: u64 = 100_000_000;
/// Events the loop keeps while the writer is behind (a stalled disk); past this the loop waits for
/// the writer, which bounds the memory a stall can take (about 40 MB) and shows up as lateness.
const MAX_PENDING_EVENTS: usize = 1 << 20;

/// One line of the log, or a stretch of a constant-rate link's opportunities: the k-th of them,
/// for k in `first..end`, is at `k * opportunity_ns` (truncated to whole ns, as the link plays it).
#[derive(Clone, Copy, Debug)]
enum Event {
    Arrival { t_ns: u64, bytes: u32 },
    Opportunity { t_ns: u64, bytes: u64 },
    Opportunities { first: u64, end: u64, opportunity_ns: f64, bytes: u64 },
    Departure { t_ns: u64, bytes: u32, arrival_ns: u64 },
    Drop { t_ns: u64, packets: u32, bytes: u64 },
}

impl Event {
    /// Link time of the event (of the last opportunity, for a stretch).
    fn t_ns(&self) -> u64 {
        match *self {
            Event::Arrival { t_ns, .. } | Event::Opportunity { t_ns, .. } => t_ns,
            Event::Departure { t_ns, .. } | Event::Drop { t_ns, .. } => t_ns,
            Event::Opportunities { end, opportunity_ns, .. } => opportunity_at(end.saturating_sub(1), opportunity_ns),
        }
    }

    fn write_to(self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Event::Arrival { t_ns, bytes } => writeln!(out, "{} + {bytes}", t_ns / 1_000_000),
            Event::Opportunity { t_ns, bytes } => writeln!(out, "{} # {bytes}", t_ns / 1_000_000),
            Event::Opportunities { first, end, opportunity_ns, bytes } => (first..end).try_for_each(|k| {
                writeln!(out, "{} # {bytes}", opportunity_at(k, opportunity_ns) / 1_000_000)
            }),
            Event::Departure { t_ns, bytes, arrival_ns } => {
                let delay_ms = t_ns / 1_000_000 - arrival_ns / 1_000_000;
                writeln!(out, "{} - {bytes} {delay_ms}", t_ns / 1_000_000)
            }
            Event::Drop { t_ns, packets, bytes } => writeln!(out, "{} d {packets} {bytes}", t_ns / 1_000_000),
        }
    }
}

/// When a constant-rate link's k-th opportunity comes (ns since the link's start).
pub fn opportunity_at(k: u64, opportunity_ns: f64) -> u64 {
    (k as f64 * opportunity_ns) as u64
}

pub struct LinkLog {
    pending: Vec<Event>,
    /// Link time of the last hand-over.
    handed_over_ns: u64,
    batches: Option<SyncSender<Vec<Event>>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
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
        let (batches, received) = sync_channel::<Vec<Event>>(CHANNEL_BATCHES);
        let writer = std::thread::Builder::new().name(format!("log-{direction}")).spawn(move || {
            crate::sys::block_all_signals();
            // A full disk must not stall the link: write errors end the writing, not the link,
            // and the summary reports the link's own counters anyway. The first error is kept
            // for the flush at the end, which reports it as before.
            let mut result = Ok(());
            for batch in received {
                if result.is_ok() {
                    result = batch.into_iter().try_for_each(|event| event.write_to(&mut out));
                }
            }
            result.and_then(|()| out.flush())
        })?;
        Ok(Self { pending: Vec::with_capacity(BATCH_EVENTS), handed_over_ns: 0, batches: Some(batches), writer: Some(writer) })
    }

    fn push(&mut self, event: Event) {
        self.pending.push(event);
        let t_ns = event.t_ns();
        if self.pending.len().is_multiple_of(BATCH_EVENTS) || t_ns >= self.handed_over_ns + HAND_OVER_NS {
            self.handed_over_ns = t_ns;
            self.hand_over();
        }
    }

    /// Gives the pending events to the writer without waiting, unless it is so far behind that
    /// they reached MAX_PENDING_EVENTS.
    fn hand_over(&mut self) {
        let Some(batches) = self.batches.as_ref() else { return };
        match batches.try_send(std::mem::take(&mut self.pending)) {
            // Keep them, in order, and try again with the next batch: no new vector meanwhile.
            Err(TrySendError::Full(batch)) if batch.len() < MAX_PENDING_EVENTS => {
                self.pending = batch;
                return;
            }
            Err(TrySendError::Full(batch)) => {
                let _ = batches.send(batch);
            }
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
        }
        self.pending = Vec::with_capacity(BATCH_EVENTS);
    }

    pub fn arrival(&mut self, t_ns: u64, bytes: u32) {
        self.push(Event::Arrival { t_ns, bytes });
    }

    pub fn opportunity(&mut self, t_ns: u64, bytes: u64) {
        self.push(Event::Opportunity { t_ns, bytes });
    }

    /// A constant-rate link's opportunities `first..end` (see `opportunity_at`), as one event.
    pub fn opportunities(&mut self, first: u64, end: u64, opportunity_ns: f64, bytes: u64) {
        if first < end {
            self.push(Event::Opportunities { first, end, opportunity_ns, bytes });
        }
    }

    pub fn departure(&mut self, t_ns: u64, bytes: u32, arrival_ns: u64) {
        self.push(Event::Departure { t_ns, bytes, arrival_ns });
    }

    pub fn drop(&mut self, t_ns: u64, packets: u32, bytes: u64) {
        self.push(Event::Drop { t_ns, packets, bytes });
    }

    /// Writes out everything recorded, waits for the writer and reports its first error. The log
    /// records nothing after this.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(batches) = self.batches.take() {
            let batch = std::mem::take(&mut self.pending);
            if !batch.is_empty() {
                let _ = batches.send(batch);
            }
        }
        match self.writer.take() {
            Some(writer) => writer.join().unwrap_or_else(|_| Err(std::io::Error::other("the log writer panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for LinkLog {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(path: &std::path::Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines().filter(|line| !line.starts_with('#')).map(str::to_string).collect()
    }

    #[test]
    fn a_stretch_of_opportunities_is_one_event_and_reads_as_one_line_each() {
        let path = std::env::temp_dir().join(format!("ccsweep-linklog-unit-{}.log", std::process::id()));
        let mut log = LinkLog::create(path.to_str().unwrap(), "uplink", "100 Mbit/s", "infinite", "unit test").unwrap();
        // 100 Mbit/s: an opportunity every 120.32 us, so 90 ms of idle is 748 of them (and 27 s
        // some 224,000), each a line of the log.
        let opportunity_ns = 1504.0 * 8.0 / 100e6 * 1e9;
        let idle = (90e6 / opportunity_ns) as u64 + 1;
        log.opportunities(0, idle, opportunity_ns, 1504);
        assert_eq!(log.pending.len(), 1, "the loop keeps one event for the whole stretch");
        let end = (27e9 / opportunity_ns) as u64;
        log.opportunities(idle, end, opportunity_ns, 1504);
        log.arrival(27_000_000_000, 1504);
        log.flush().unwrap();
        let lines = body(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(lines.len() as u64, end + 1);
        assert_eq!(lines[0], "0 # 1504");
        assert_eq!(lines[1], "0 # 1504");
        assert_eq!(lines[9], "1 # 1504", "the 9th opportunity is at 1.08288 ms");
        assert_eq!(lines[end as usize], "27000 + 1504");
    }

    #[test]
    fn events_keep_their_order_across_batches() {
        let path = std::env::temp_dir().join(format!("ccsweep-linklog-order-{}.log", std::process::id()));
        let mut log = LinkLog::create(path.to_str().unwrap(), "downlink", "1 Mbit/s", "infinite", "unit test").unwrap();
        let count = 3 * BATCH_EVENTS as u64 + 5;
        (0..count).for_each(|ms| log.arrival(ms * 1_000_000, 52));
        log.flush().unwrap();
        let lines = body(&path);
        std::fs::remove_file(&path).unwrap();
        let expected: Vec<String> = (0..count).map(|ms| format!("{ms} + 52")).collect();
        assert_eq!(lines, expected);
    }
}
