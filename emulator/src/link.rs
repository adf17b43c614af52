//! One direction of the emulated link: loss (Bernoulli or Gilbert-Elliott, `loss.rs`), an
//! optional policer (a token bucket that drops, `policer.rs`), the bottleneck queue and its server
//! (a constant rate or a Mahimahi trace), then a one-way delay, fixed or stepping over time as a
//! delay trace gives it (`delaytrace.rs`), and varied by a jitter (`jitter.rs`: drawn as netem
//! draws it, with order kept or packets reordered), and releases at once or in slots (`slot.rs`:
//! ACK aggregation, as netem's `slot`).
//!
//! Order (documented, recorded in every summary): with loss "after" (the default, as in
//! Mahimahi's `mm-delay D mm-loss uplink p mm-link ...` nesting) a packet is queued, served by
//! the bottleneck, then maybe lost, then delayed; lost packets used link capacity and appear as
//! departures in the link log. With loss "before", a packet is maybe lost before it is queued.
//! A policer, where given, sees each packet that reaches the queue just before it, and drops what
//! exceeds its bucket.
//!
//! Time is integer nanoseconds since the emulator started. Work is done lazily: `advance(now)`
//! plays every bottleneck event up to `now` at its exact scheduled time, so a late wake-up delays
//! packets on the wire but never changes the link's arithmetic.

use crate::delaytrace::DelayTrace;
use crate::ecn;
use crate::inject::Injector;
use crate::jitter::Jitter;
use crate::lateness::Lateness;
use crate::linklog::{opportunity_at, LinkLog};
use crate::loss::{Loss, LossModel};
use crate::policer::Policer;
use crate::queue::{DropCause, Packet, Queue};
use crate::slot::Slots;
use crate::offload::{self, Coalescer, VNET_HDR_LEN};
use crate::trace::{Trace, HEADER_BYTES, OPPORTUNITY_BYTES, OPPORTUNITY_IP_BITS};
use serde_json::{json, Value};
use std::collections::VecDeque;

/// Which way a direction carries packets: data from the sender (uplink) or back (downlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Uplink,
    Downlink,
}

impl Side {
    /// Its name in options (`--uplink-rate`), logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Side::Uplink => "uplink",
            Side::Downlink => "downlink",
        }
    }

    /// Mixed into the one `--seed`, so that each direction draws from streams of its own.
    pub fn salt(self) -> u64 {
        match self {
            Side::Uplink => 0x9e37_79b9_7f4a_7c15,
            Side::Downlink => 0xc2b2_ae3d_27d4_eb4f,
        }
    }
}

/// Where the loss stage sits relative to the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossPosition {
    Before,
    After,
}

impl LossPosition {
    pub fn order(self) -> &'static str {
        match self {
            LossPosition::After => "queue>bottleneck>loss>delay",
            LossPosition::Before => "loss>queue>bottleneck>delay",
        }
    }
}

/// The bottleneck's service: Mahimahi's trace of opportunities, or a constant rate that is the
/// smooth version of Mahimahi's constant-rate trace (see `Server::rate`).
pub enum Server {
    Rate { opportunity_ns: f64, link_free_ns: f64, in_service: Option<(Packet, u64)>, next_opportunity: u64 },
    Trace { trace: Trace, next_k: u64, in_transit: Option<(Packet, u64)> },
}

impl Server {
    /// A constant rate of `bps` as Mahimahi plays it: `bps / 12000` opportunities of 1504 bytes
    /// per second (ReBBR's constant-rate traces), here evenly spaced and with fluid byte
    /// accounting. Every packet costs its IP length plus the 4-byte TUN header, as under mm-link,
    /// so a 1500-byte packet takes exactly one opportunity and full-size packets leave at `bps`
    /// of IP bytes.
    pub fn rate(bps: f64) -> Self {
        let opportunity_ns = OPPORTUNITY_IP_BITS * 1e9 / bps;
        Server::Rate { opportunity_ns, link_free_ns: 0.0, in_service: None, next_opportunity: 0 }
    }

    pub fn trace(trace: Trace) -> Self {
        Server::Trace { trace, next_k: 0, in_transit: None }
    }
}

/// Running totals of one direction, reported in stats lines and the summary.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub in_packets: u64,
    pub in_bytes: u64,
    pub out_packets: u64,
    pub out_bytes: u64,
    pub bottleneck_packets: u64,
    pub bottleneck_bytes: u64,
    pub drops_loss: u64,
    pub drops_queue: u64,
    pub drops_aqm: u64,
    /// Packets a policer dropped (over its token bucket).
    pub drops_policer: u64,
    pub write_errors: u64,
    pub queue_bytes_max: u64,
    pub queue_packets_max: u64,
    /// Releases held back by `--inject-lateness`.
    pub injected_delays: u64,
    /// Write calls: fewer than `out_packets` when offloads join packets.
    pub writes: u64,
    /// TSO segments read and cut into packets, and GSO frames that could not be cut (passed whole).
    pub segments_split: u64,
    pub segments_unsplit: u64,
}

/// What one direction is made of, built from its validated configuration.
pub struct Stages {
    pub server: Server,
    pub queue: Queue,
    pub delay_ns: u64,
    /// The delay over time, if given: `delay_ns` applies before its first step.
    pub delay_trace: Option<DelayTrace>,
    pub loss: LossModel,
    pub loss_position: LossPosition,
    /// A token bucket between the loss "before" and the queue, if given.
    pub policer: Option<Policer>,
    /// Variation of the delay, if given.
    pub jitter: Option<Jitter>,
    /// Releases in slots (ACK aggregation), if given.
    pub slots: Option<Slots>,
    /// Frames carry a `virtio_net_hdr`, and packets that continue one another leave as one
    /// GSO write (`--offload tso`).
    pub offload: bool,
    /// Seed of the loss decisions.
    pub loss_seed: u64,
    /// Holds releases back on purpose (a debug option), if given.
    pub injector: Option<Injector>,
    pub log: Option<LinkLog>,
}

pub struct Direction {
    pub name: &'static str,
    loss: Loss,
    loss_position: LossPosition,
    policer: Option<Policer>,
    queue: Queue,
    server: Server,
    delay_ns: u64,
    delay_trace: Option<DelayTrace>,
    jitter: Option<Jitter>,
    /// Packets on their way, in due order.
    delay_line: VecDeque<(u64, Packet)>,
    slots: Option<Slots>,
    injector: Option<Injector>,
    /// When the head of the delay line may leave, once injection has decided it (it is then
    /// later than its due time, and every packet behind it waits too).
    head_hold_ns: Option<u64>,
    pub counters: Counters,
    pub lateness: Lateness,
    log: Option<LinkLog>,
    dropped: Vec<(Packet, DropCause)>,
    /// Due packets joined into one write, with offloads.
    joined: Option<Joined>,
    /// The packets of the frame being cut (kept to reuse its allocation).
    split: Vec<Vec<u8>>,
    /// Buffers of packets that left the link, for reuse by the reader.
    pub spare: Vec<Vec<u8>>,
}

/// Due packets waiting to leave as one GSO write, with what their accounting needs.
#[derive(Default)]
struct Joined {
    frames: Coalescer,
    due_ns: Vec<u64>,
    ip_bytes: u64,
}

impl Direction {
    pub fn new(name: &'static str, stages: Stages) -> Self {
        Self {
            name,
            loss: Loss::new(stages.loss, stages.loss_seed),
            loss_position: stages.loss_position,
            policer: stages.policer,
            queue: stages.queue,
            server: stages.server,
            delay_ns: stages.delay_ns,
            delay_trace: stages.delay_trace,
            jitter: stages.jitter,
            delay_line: VecDeque::new(),
            slots: stages.slots,
            injector: stages.injector,
            head_hold_ns: None,
            counters: Counters::default(),
            lateness: Lateness::default(),
            log: stages.log,
            dropped: Vec::new(),
            joined: stages.offload.then(Joined::default),
            split: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Whether frames carry a `virtio_net_hdr` (and may be TSO segments).
    pub fn offload(&self) -> bool {
        self.joined.is_some()
    }

    /// Bytes before the IP packet in each frame: the `virtio_net_hdr` with offloads, else none.
    fn frame_offset(&self) -> usize {
        if self.offload() { VNET_HDR_LEN } else { 0 }
    }

    /// A frame read with offloads at `now_ns`: a TSO segment arrives as the packets it stands
    /// for, each in a buffer from `pool`, all at the time of the read.
    pub fn arrive_frame(&mut self, now_ns: u64, frame: &[u8], pool: &mut Vec<Vec<u8>>) {
        let mut packets = std::mem::take(&mut self.split);
        let cut = offload::split(frame, || pool.pop().unwrap_or_default(), |packet| packets.push(packet));
        if !cut {
            self.counters.segments_unsplit += 1;
        } else if packets.len() > 1 {
            self.counters.segments_split += 1;
        }
        for packet in packets.drain(..) {
            self.arrive(now_ns, packet);
        }
        self.split = packets;
    }

    /// A packet read from this direction's input device at `now_ns`.
    pub fn arrive(&mut self, now_ns: u64, data: Vec<u8>) {
        self.advance(now_ns);
        let ip_bytes = data.len().saturating_sub(self.frame_offset()) as u32;
        self.counters.in_packets += 1;
        self.counters.in_bytes += u64::from(ip_bytes);
        if self.loss_position == LossPosition::Before && self.loss.lost() {
            self.counters.drops_loss += 1;
            self.spare.push(data);
            return;
        }
        if let Some(policer) = self.policer.as_mut() {
            if !policer.conforms(now_ns, u64::from(ip_bytes)) {
                self.counters.drops_policer += 1;
                self.spare.push(data);
                return;
            }
        }
        let ecn = ecn::codepoint(&data[self.frame_offset().min(data.len())..]);
        let packet = Packet { size: ip_bytes + HEADER_BYTES, data, arrival_ns: now_ns, ecn, mark_ce: false };
        self.log_capacity_until(now_ns);
        if let Some(log) = self.log.as_mut() {
            log.arrival(now_ns, packet.size);
        }
        self.queue.enqueue(packet, now_ns, &mut self.dropped);
        // The queue only grows here, so its size right after an enqueue is its running maximum.
        self.counters.queue_bytes_max = self.counters.queue_bytes_max.max(self.queue.bytes());
        self.counters.queue_packets_max = self.counters.queue_packets_max.max(self.queue.len() as u64);
        self.settle_drops(now_ns);
        self.advance(now_ns);
    }

    fn settle_drops(&mut self, t_ns: u64) {
        for (packet, cause) in self.dropped.drain(..) {
            match cause {
                DropCause::Queue => self.counters.drops_queue += 1,
                DropCause::Aqm => self.counters.drops_aqm += 1,
            }
            if let Some(log) = self.log.as_mut() {
                log.drop(t_ns, 1, packet.size as u64);
            }
            self.spare.push(packet.data);
        }
    }

    /// Plays every bottleneck event scheduled at or before `now_ns`.
    pub fn advance(&mut self, now_ns: u64) {
        loop {
            let progressed = match &mut self.server {
                Server::Rate { opportunity_ns, link_free_ns, in_service, .. } => {
                    if let Some((_, depart)) = in_service {
                        if *depart <= now_ns {
                            let (packet, depart) = in_service.take().expect("a packet in service");
                            self.depart(packet, depart);
                            true
                        } else {
                            false
                        }
                    } else if let Some(head_arrival) = self.queue.front_arrival_ns() {
                        let start = link_free_ns.max(head_arrival as f64);
                        let start_ns = start.ceil() as u64;
                        let next = self.queue.dequeue(start_ns, &mut self.dropped);
                        if let Some(packet) = next {
                            // CoDel may have dropped the head: serve the survivor from its own arrival.
                            let start = start.max(packet.arrival_ns as f64);
                            let finish = start + packet.size as f64 * *opportunity_ns / OPPORTUNITY_BYTES as f64;
                            *link_free_ns = finish;
                            *in_service = Some((packet, finish.ceil() as u64));
                        }
                        self.settle_drops(start_ns);
                        true
                    } else {
                        false
                    }
                }
                Server::Trace { .. } => self.use_next_opportunity(now_ns),
            };
            if !progressed {
                return;
            }
        }
    }

    /// Uses the next trace opportunity if it is due: up to 1504 bytes of queued packets, a
    /// packet possibly spanning several opportunities (Mahimahi's byte accounting).
    fn use_next_opportunity(&mut self, now_ns: u64) -> bool {
        let Server::Trace { trace, next_k, .. } = &mut self.server else { return false };
        let Some(t) = trace.opportunity_ns(*next_k).filter(|t| *t <= now_ns) else { return false };
        *next_k += 1;
        if let Some(log) = self.log.as_mut() {
            log.opportunity(t, OPPORTUNITY_BYTES);
        }
        let mut budget = OPPORTUNITY_BYTES;
        while budget > 0 {
            let Server::Trace { in_transit, .. } = &mut self.server else { unreachable!() };
            if in_transit.is_none() {
                match self.queue.dequeue(t, &mut self.dropped) {
                    Some(packet) => {
                        let size = packet.size as u64;
                        *in_transit = Some((packet, size));
                    }
                    None => {
                        self.settle_drops(t);
                        break;
                    }
                }
            }
            let (_, remaining) = in_transit.as_mut().expect("a packet in transit");
            let used = budget.min(*remaining);
            budget -= used;
            *remaining -= used;
            if *remaining == 0 {
                let (packet, _) = in_transit.take().expect("a packet in transit");
                self.depart(packet, t);
            }
            self.settle_drops(t);
        }
        true
    }

    fn depart(&mut self, mut packet: Packet, t_ns: u64) {
        if packet.mark_ce {
            let offset = self.frame_offset();
            if let Some(ip) = packet.data.get_mut(offset..) {
                ecn::set_ce(ip);
            }
        }
        self.counters.bottleneck_packets += 1;
        self.counters.bottleneck_bytes += packet.size as u64;
        self.log_capacity_until(t_ns);
        if let Some(log) = self.log.as_mut() {
            log.departure(t_ns, packet.size, packet.arrival_ns);
        }
        if self.loss_position == LossPosition::After && self.loss.lost() {
            self.counters.drops_loss += 1;
            self.spare.push(packet.data);
            return;
        }
        let delay_ns = self.delay_at(t_ns);
        match self.jitter.as_mut() {
            None => {
                // A FIFO: when a delay trace's delay falls, a packet waits for the one ahead of it,
                // and is due when that one leaves (its wait is the path's, not the loop's lateness).
                let ahead = self.delay_line.back().map_or(0, |(due, _)| *due);
                self.delay_line.push_back(((t_ns + delay_ns).max(ahead), packet));
            }
            Some(jitter) => {
                let due = jitter.due_ns(t_ns, delay_ns);
                // In due order: with order kept `due` is the latest yet, so the line's end.
                let at = if jitter.reorders() { self.delay_line.partition_point(|(d, _)| *d <= due) } else { self.delay_line.len() };
                self.delay_line.insert(at, (due, packet));
            }
        }
    }

    /// The one-way delay of a packet that leaves the bottleneck at `t_ns`, before any jitter.
    fn delay_at(&self, t_ns: u64) -> u64 {
        match &self.delay_trace {
            None => self.delay_ns,
            Some(trace) => trace.delay_ns(t_ns, self.delay_ns),
        }
    }

    /// Constant-rate links log their 1504-byte opportunities, so capacity reads the same in
    /// `mm-throughput-graph` as for the equivalent Mahimahi trace.
    fn log_capacity_until(&mut self, t_ns: u64) {
        let (Server::Rate { opportunity_ns, next_opportunity, .. }, Some(log)) = (&mut self.server, self.log.as_mut())
        else {
            return;
        };
        // The first opportunity after t_ns: a float estimate, then exact by the link's own rule.
        let mut end = ((t_ns as f64 / *opportunity_ns) as u64).max(*next_opportunity);
        while opportunity_at(end, *opportunity_ns) <= t_ns {
            end += 1;
        }
        while end > *next_opportunity && opportunity_at(end - 1, *opportunity_ns) > t_ns {
            end -= 1;
        }
        log.opportunities(*next_opportunity, end, *opportunity_ns, OPPORTUNITY_BYTES);
        *next_opportunity = end;
    }

    /// Hands every packet whose delay has elapsed to `write`, recording how late it left.
    /// `clock` is read just before each write: a write delivers its packets into the receiving
    /// stack in our context, so each one delays the packets after it. With offloads, due packets
    /// that continue one another wait for each other (a few microseconds of this loop) and leave
    /// in one write, each late by that write's time.
    pub fn release(&mut self, mut clock: impl FnMut() -> u64, mut write: impl FnMut(&[u8]) -> bool) {
        let offset = self.frame_offset();
        while let Some((due, bytes)) = self.delay_line.front().map(|(due, p)| (*due, (p.data.len() - offset) as u64)) {
            let now_ns = clock();
            // With slots, a packet leaves at its slot's opening, which is then its due time.
            let due = match self.slots.as_mut() {
                None => due,
                Some(slots) => match slots.slot_for(due, now_ns) {
                    Some(opening) => opening,
                    None => break,
                },
            };
            if due > now_ns || self.hold_head(due) > now_ns {
                break;
            }
            if let Some(slots) = self.slots.as_mut() {
                slots.take(bytes);
            }
            self.head_hold_ns = None;
            let (_, packet) = self.delay_line.pop_front().expect("a due packet");
            let ip_bytes = (packet.data.len() - self.frame_offset()) as u64;
            match self.joined.as_mut() {
                Some(joined) => {
                    if !joined.frames.add(&packet.data) {
                        self.write_joined(&mut clock, &mut write);
                        let joined = self.joined.as_mut().expect("offloads");
                        joined.frames.add(&packet.data);
                    }
                    let joined = self.joined.as_mut().expect("offloads");
                    joined.due_ns.push(due);
                    joined.ip_bytes += ip_bytes;
                }
                None => {
                    self.lateness.record(now_ns - due);
                    self.count_write(write(&packet.data), 1, ip_bytes);
                }
            }
            self.spare.push(packet.data);
        }
        self.write_joined(&mut clock, &mut write);
    }

    /// Writes the packets joined so far, if any, as one frame.
    fn write_joined(&mut self, clock: &mut impl FnMut() -> u64, write: &mut impl FnMut(&[u8]) -> bool) {
        let Some(joined) = self.joined.as_mut().filter(|joined| !joined.frames.is_empty()) else { return };
        let now_ns = clock();
        for due in joined.due_ns.drain(..) {
            self.lateness.record(now_ns - due);
        }
        let (packets, ip_bytes) = (joined.frames.len() as u64, std::mem::take(&mut joined.ip_bytes));
        let written = write(joined.frames.flush());
        self.count_write(written, packets, ip_bytes);
    }

    fn count_write(&mut self, written: bool, packets: u64, ip_bytes: u64) {
        self.counters.writes += 1;
        if written {
            self.counters.out_packets += packets;
            self.counters.out_bytes += ip_bytes;
        } else {
            self.counters.write_errors += packets;
        }
    }

    /// When the due head of the delay line may leave: decided once per packet, when it is first
    /// due, by the lateness injector (its due time when there is none).
    fn hold_head(&mut self, due_ns: u64) -> u64 {
        if let Some(hold) = self.head_hold_ns {
            return hold;
        }
        let extra_ns = self.injector.as_mut().map_or(0, Injector::draw_ns);
        if extra_ns > 0 {
            self.counters.injected_delays += 1;
        }
        self.head_hold_ns = Some(due_ns + extra_ns);
        due_ns + extra_ns
    }

    /// The next time a packet must leave this direction, if any is on its way. A bottleneck
    /// departure needs no wake-up of its own: `advance` plays it exactly whenever we next wake,
    /// and it only becomes visible `delay` later, so we wake for releases alone. Nothing leaves
    /// before a held head of the line.
    pub fn next_event_ns(&self) -> Option<u64> {
        let server = self.next_server_release_ns();
        // With slots, the head leaves at the first opening at or after its due time: not before
        // the next opening (a wake-up at it draws the following one if the head is not due yet).
        let slot = self.slots.as_ref().map_or(0, Slots::opening_ns);
        let delay = self.delay_line.front().map(|(due, _)| (*due).max(slot));
        let earliest = match (server, delay) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        earliest.map(|t| t.max(self.head_hold_ns.unwrap_or(0)))
    }

    /// The latest release known now that is due at or before `limit_ns`: the delay line (in due
    /// order) and the bottleneck's next departure plus the shortest delay it may get.
    pub fn last_release_until(&self, limit_ns: u64) -> Option<u64> {
        if self.head_hold_ns.is_some_and(|hold| hold > limit_ns) {
            return None;
        }
        let slot = self.slots.as_ref().map_or(0, Slots::opening_ns);
        let delayed =
            self.delay_line.iter().map(|(due, _)| (*due).max(slot)).take_while(|due| *due <= limit_ns).last();
        let from_server = self.next_server_release_ns().filter(|due| *due <= limit_ns);
        delayed.max(from_server)
    }

    /// When the bottleneck's next departure (or next trace opportunity with work) will be released.
    fn next_server_release_ns(&self) -> Option<u64> {
        let departure = match &self.server {
            Server::Rate { in_service, .. } => in_service.as_ref().map(|(_, depart)| *depart),
            Server::Trace { trace, next_k, in_transit } => {
                if in_transit.is_some() || !self.queue.is_empty() {
                    trace.opportunity_ns(*next_k)
                } else {
                    None
                }
            }
        };
        // The earliest it can be due: a jitter may shorten its delay by up to its reach, and a
        // delay trace may fall before it departs (a trace opportunity is the soonest it can).
        let advance = self.jitter.as_ref().map_or(0, Jitter::reach_ns);
        departure.map(|t| match &self.delay_trace {
            None => t + self.delay_ns.saturating_sub(advance),
            Some(trace) => trace.earliest_due_ns(t, self.delay_ns, advance),
        })
    }

    /// When a trace played `--once` runs out, the link ends (as mm-link's shell does).
    pub fn end_ns(&self) -> Option<u64> {
        match &self.server {
            Server::Trace { trace, .. } if trace.once => Some(trace.period_ns()),
            _ => None,
        }
    }

    /// Bytes the link could have carried in `elapsed_ns`.
    pub fn capacity_bytes(&self, elapsed_ns: u64) -> u64 {
        match &self.server {
            Server::Rate { opportunity_ns, .. } => (elapsed_ns as f64 / *opportunity_ns * OPPORTUNITY_BYTES as f64) as u64,
            Server::Trace { trace, .. } => {
                let n = trace.timestamps_ms.len() as u64;
                let period = trace.period_ns();
                let passes = if trace.once { 0 } else { elapsed_ns / period };
                let within = if trace.once { elapsed_ns.min(period) } else { elapsed_ns % period };
                let partial = trace.timestamps_ms.iter().take_while(|ms| **ms * 1_000_000 <= within).count() as u64;
                (passes * n + partial) * OPPORTUNITY_BYTES
            }
        }
    }

    /// Counters as JSON. Queue sizes count waiting packets only (not the one being served), the
    /// quantity queue limits apply to, as in mm-link.
    pub fn counters_json(&self, elapsed_ns: u64) -> Value {
        let c = &self.counters;
        json!({
            "in_packets": c.in_packets,
            "in_bytes": c.in_bytes,
            "out_packets": c.out_packets,
            "out_bytes": c.out_bytes,
            "bottleneck_packets": c.bottleneck_packets,
            "bottleneck_bytes": c.bottleneck_bytes,
            "capacity_bytes": self.capacity_bytes(elapsed_ns),
            "drops_loss": c.drops_loss,
            "drops_queue": c.drops_queue,
            "drops_aqm": c.drops_aqm,
            "drops_policer": c.drops_policer,
            "marks_aqm": self.queue.marks_aqm,
            "marks_step": self.queue.marks_step,
            "write_errors": c.write_errors,
            "queue_packets": self.queue.len(),
            "queue_bytes": self.queue.bytes(),
            "queue_bytes_max": c.queue_bytes_max,
            "queue_packets_max": c.queue_packets_max,
            "delay_line_packets": self.delay_line.len(),
            "injected_delays": c.injected_delays,
            "writes": c.writes,
            "segments_split": c.segments_split,
            "segments_unsplit": c.segments_unsplit,
        })
    }

    /// Completes the log up to `now_ns` and flushes it.
    pub fn finish(&mut self, now_ns: u64) -> std::io::Result<()> {
        self.advance(now_ns);
        self.log_capacity_until(now_ns);
        match self.log.as_mut() {
            Some(log) => log.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inject::InjectSpec;
    use crate::queue::QueueSpec;

    fn stages(server: Server, queue: &str, delay_ns: u64, loss: f64) -> Stages {
        let queue = Queue::new(QueueSpec::parse(queue).unwrap(), 1);
        Stages {
            server,
            queue,
            delay_ns,
            delay_trace: None,
            loss: LossModel::Bernoulli { p: loss },
            loss_position: LossPosition::After,
            policer: None,
            jitter: None,
            slots: None,
            offload: false,
            loss_seed: 42,
            injector: None,
            log: None,
        }
    }

    fn direction(server: Server, queue: &str, delay_ns: u64, loss: f64) -> Direction {
        Direction::new("uplink", stages(server, queue, delay_ns, loss))
    }

    /// Feeds `count` packets of `size` bytes at `gap_ns` and collects departure times.
    fn run(d: &mut Direction, count: u64, size: usize, gap_ns: u64, until_ns: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut t = 0;
        for _ in 0..count {
            d.arrive(t, vec![0; size]);
            t += gap_ns;
        }
        let mut now = 0;
        while now <= until_ns {
            d.advance(now);
            d.release(
                || now,
                |_| {
                    out.push(now);
                    true
                },
            );
            now += 1_000;
        }
        out
    }

    #[test]
    fn constant_rate_serialises_each_packet_exactly() {
        // 1500 B at 100 Mbit/s: 120 us each, back to back, plus 10 ms of delay.
        let mut d = direction(Server::rate(100e6), "infinite", 10_000_000, 0.0);
        let departures = run(&mut d, 100, 1500, 0, 50_000_000);
        assert_eq!(departures.len(), 100);
        assert_eq!(departures[0], 10_120_000);
        assert_eq!(departures[99], 10_000_000 + 100 * 120_000);
        // Each packet counts its 4-byte TUN header, as in mm-link.
        assert_eq!(d.counters.bottleneck_bytes, 100 * 1504);
    }

    fn uniform_jitter(spread: &str, order: &str) -> Jitter {
        let values: Vec<String> = [spread, "uniform", order].iter().map(|v| v.to_string()).collect();
        Jitter::new(crate::jitter::JitterSpec::parse(&values, None).unwrap(), 3)
    }

    /// Feeds `count` numbered 1500-byte packets at once and collects (release time, number),
    /// looking every 10 us until `until_ns`.
    fn numbered(d: &mut Direction, count: u16, until_ns: u64) -> Vec<(u64, u16)> {
        for i in 0..count {
            let mut data = vec![0; 1500];
            data[..2].copy_from_slice(&i.to_be_bytes());
            d.arrive(0, data);
        }
        let mut seen: Vec<(u64, u16)> = Vec::new();
        let mut now = 0;
        while now <= until_ns {
            d.advance(now);
            d.release(|| now, |data| {
                seen.push((now, u16::from_be_bytes([data[0], data[1]])));
                true
            });
            now += 10_000;
        }
        seen
    }

    #[test]
    fn jitter_reorders_only_when_asked_and_every_packet_arrives() {
        // 200 numbered packets, 120 us apart at the bottleneck, 10 ms +- 2 ms of uniform jitter.
        for (order, reorders) in [("keep", false), ("reorder", true)] {
            let mut stages = stages(Server::rate(100e6), "infinite", 10_000_000, 0.0);
            stages.jitter = Some(uniform_jitter("2ms", order));
            let mut d = Direction::new("uplink", stages);
            let seen = numbered(&mut d, 200, 50_000_000);
            let mut numbers: Vec<u16> = seen.iter().map(|(_, n)| *n).collect();
            assert_eq!(numbers.windows(2).any(|w| w[1] < w[0]), reorders, "{order}");
            // Never before its departure plus the shortest delay (8 ms), never after the longest.
            for (at, n) in &seen {
                let departure = 120_000 * (u64::from(*n) + 1);
                assert!(*at >= departure + 8_000_000, "{order}: packet {n} at {at}");
                if reorders {
                    assert!(*at <= departure + 12_000_000 + 10_000, "{order}: packet {n} at {at}");
                }
            }
            numbers.sort_unstable();
            assert_eq!(numbers, (0..200).collect::<Vec<_>>(), "{order}: each packet once");
        }
    }

    fn traced(server: Server, delay_ns: u64, trace: &str) -> Stages {
        let delay_trace = Some(DelayTrace::parse(trace, "d.trace").unwrap());
        Stages { delay_trace, ..stages(server, "infinite", delay_ns, 0.0) }
    }

    #[test]
    fn a_delay_trace_delays_each_packet_by_the_step_of_its_departure_and_keeps_order() {
        // At 12 Mbit/s a 1500-byte packet leaves every ms: packet i at i + 1 ms. 10 ms of delay,
        // 50 from 5 ms, 5 from 20 ms: the ones leaving at 1-4 ms are due 10 ms later, at 5-19 ms
        // 50 later (the last at 69 ms). From 20 ms on each would be due 5 ms later, but waits for
        // the one ahead: those leaving at 20-64 ms all leave at 69 ms, right after the last slow
        // one; once the line has drained (from 65 ms on) each leaves 5 ms after its departure.
        let mut d = Direction::new("uplink", traced(Server::rate(12e6), 10_000_000, "5 50\n20 5\n"));
        let released = run(&mut d, 100, 1500, 0, 200_000_000);
        let expected: Vec<u64> = (1..=100u64)
            .map(|ms| match ms {
                1..=4 => ms + 10,
                5..=19 => ms + 50,
                _ => (ms + 5).max(69),
            })
            .map(|ms| ms * 1_000_000)
            .collect();
        assert_eq!(released, expected);
        assert_eq!(released.iter().filter(|at| **at == 69_000_000).count(), 46, "the packets leaving at 19-64 ms leave together");
        // Held packets are due when the one ahead leaves: the hold is the path's, not lateness.
        assert_eq!(d.lateness.to_json()["max"], 0.0);
    }

    #[test]
    fn a_delay_trace_with_jitter_keeps_order_or_lets_packets_overtake_after_a_fall() {
        // 10 Mbit/s: packet n leaves the bottleneck at 1.2 (n + 1) ms; 10 ms of delay, 40 from
        // 20 ms, 5 from 50 ms, +- 2 ms of uniform jitter around each.
        let departure = |n: u16| 1_200_000 * (u64::from(n) + 1);
        let delay = |n: u16| match departure(n) {
            t if t < 20_000_000 => 10_000_000,
            t if t < 50_000_000 => 40_000_000,
            _ => 5_000_000,
        };
        let last_slow = (0..100).filter(|n| delay(*n) == 40_000_000).max().unwrap();
        for order in ["keep", "reorder"] {
            let mut stages = traced(Server::rate(10e6), 10_000_000, "20 40\n50 5\n");
            stages.jitter = Some(uniform_jitter("2ms", order));
            let mut d = Direction::new("uplink", stages);
            let seen = numbered(&mut d, 100, 300_000_000);
            let mut numbers: Vec<u16> = seen.iter().map(|(_, n)| *n).collect();
            for (at, n) in &seen {
                let due = departure(*n) + delay(*n);
                assert!(*at + 2_000_000 >= due, "{order}: packet {n} at {at}, before its delay minus the jitter");
                if order == "reorder" || departure(*n) >= 100_000_000 {
                    // Reordered, each by its own draw; kept, each once the slow ones are out.
                    assert!(*at <= due + 2_000_000 + 10_000, "{order}: packet {n} at {at}, due {due}");
                }
            }
            let when = |n: u16| seen.iter().find(|(_, m)| *m == n).unwrap().0;
            if order == "keep" {
                assert!(numbers.windows(2).all(|w| w[0] < w[1]), "kept in order");
                // The first fast packet waits for the last slow one, long after its own due time.
                assert!(when(last_slow + 1) >= when(last_slow));
                assert!(when(last_slow + 1) > departure(last_slow + 1) + 5_000_000 + 2_000_000 + 10_000);
            } else {
                assert!(when(last_slow + 1) < when(last_slow), "the fall lets the first fast packet overtake");
            }
            numbers.sort_unstable();
            assert_eq!(numbers, (0..100).collect::<Vec<_>>(), "{order}: each packet once");
        }
    }

    /// Serves `arrivals` (time, size) as the event loop does, waking only when `next_event_ns`
    /// (or an arrival) says: the release times, with the lateness in `d.lateness`.
    fn served_on_wake_ups(d: &mut Direction, arrivals: &[(u64, usize)]) -> Vec<u64> {
        let (mut now, mut next, mut released) = (0, 0, Vec::new());
        loop {
            while let Some((_, size)) = arrivals.get(next).filter(|(at, _)| *at <= now) {
                d.arrive(now, vec![0; *size]);
                next += 1;
            }
            d.advance(now);
            d.release(|| now, |_| {
                released.push(now);
                true
            });
            let wake = [d.next_event_ns(), arrivals.get(next).map(|(at, _)| *at)].into_iter().flatten().min();
            match wake {
                Some(at) => now = at.max(now + 1),
                None => return released,
            }
        }
    }

    #[test]
    fn the_loop_wakes_in_time_for_a_delay_that_falls_before_a_departure() {
        // A constant rate: a packet leaves at 1 ms on a 50 ms delay; the delay falls to 1 ms at
        // 55 ms, and a packet that arrives at 60 ms leaves at 61 and is due at 62 (not 111).
        let mut d = Direction::new("uplink", traced(Server::rate(12e6), 50_000_000, "55 1\n"));
        assert_eq!(served_on_wake_ups(&mut d, &[(0, 1500), (60_000_000, 1500)]), vec![51_000_000, 62_000_000]);
        assert_eq!(d.lateness.to_json()["max"], 0.0);
        // A trace: a 3000-byte packet needs the opportunities at 1 and 10 ms. At 0 its release is
        // bounded by the fall at 5 ms (100 ms to 1), not by the 100 ms delay at its first opportunity.
        let trace = Trace::parse("1\n10\n", "t", false).unwrap();
        let mut d = Direction::new("uplink", traced(Server::trace(trace), 100_000_000, "5 1\n"));
        assert_eq!(served_on_wake_ups(&mut d, &[(0, 3000)]), vec![11_000_000]);
        assert_eq!(d.lateness.to_json()["max"], 0.0);
    }

    #[test]
    fn slots_release_in_bursts_at_their_openings_only() {
        // 100 packets 120 us apart at the bottleneck, 10 ms of delay, a slot every 1 ms: each
        // leaves at the first whole millisecond at or after its due time, 8 or 9 at a time.
        let values: Vec<String> = ["1ms", "1ms", "0", "0"].iter().map(|v| v.to_string()).collect();
        let mut stages = stages(Server::rate(100e6), "infinite", 10_000_000, 0.0);
        stages.slots = Some(Slots::new(crate::slot::SlotSpec::parse(&values).unwrap(), 5));
        let mut d = Direction::new("uplink", stages);
        let departures = run(&mut d, 100, 1500, 0, 50_000_000);
        assert_eq!(departures.len(), 100);
        let mut bursts = std::collections::BTreeMap::<u64, u32>::new();
        for (i, at) in departures.iter().enumerate() {
            let due = 10_000_000 + 120_000 * (i as u64 + 1);
            assert_eq!(*at, due.div_ceil(1_000_000) * 1_000_000, "packet {i}");
            *bursts.entry(*at).or_default() += 1;
        }
        let sizes: Vec<u32> = bursts.values().copied().collect();
        assert!(sizes[1..sizes.len() - 1].iter().all(|n| (8..=9).contains(n)), "{sizes:?}");
    }

    #[test]
    fn constant_rate_charges_small_packets_the_tun_header() {
        // 12 Mbit/s is one 1504-byte opportunity per ms. Ten 100-byte packets cost 10 x 104 bytes:
        // the last leaves at 1040/1504 ms = 691.5 us (seen at the next 1 us step); without the
        // header it would be 1000/1504 ms = 664.9 us.
        let mut d = direction(Server::rate(12e6), "infinite", 0, 0.0);
        let departures = run(&mut d, 10, 100, 0, 1_000_000);
        assert_eq!(departures.len(), 10);
        assert_eq!(departures[9], 692_000);
    }

    #[test]
    fn constant_rate_log_and_byte_limits_count_1504_per_full_packet() {
        // At 12 Mbit/s (one opportunity per ms), five 1500-byte packets arrive at once into
        // `droptail bytes=4500`: one is served, two wait (2 x 1504 <= 4500 < 3 x 1504, where IP
        // bytes alone would let three wait), two are dropped. The log reads as mm-link's would.
        let path = std::env::temp_dir().join(format!("ccsweep-link-unit-{}.log", std::process::id()));
        let path_text = path.to_str().expect("a UTF-8 temp dir");
        let log = LinkLog::create(path_text, "uplink", "12 Mbit/s", "droptail bytes=4500", "unit test").unwrap();
        let mut d = Direction::new(
            "uplink",
            Stages { log: Some(log), ..stages(Server::rate(12e6), "droptail bytes=4500", 0, 0.0) },
        );
        (0..5).for_each(|_| d.arrive(0, vec![0; 1500]));
        [1, 2, 3].iter().for_each(|ms| d.advance(ms * 1_000_000));
        d.finish(3_500_000).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let body: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
        let expected = [
            "0 # 1504", "0 + 1504", "0 + 1504", "0 + 1504", "0 + 1504", "0 d 1 1504", "0 + 1504", "0 d 1 1504",
            "1 # 1504", "1 - 1504 1", "2 # 1504", "2 - 1504 2", "3 # 1504", "3 - 1504 3",
        ];
        assert_eq!(body, expected);
        assert_eq!((d.counters.queue_packets_max, d.counters.queue_bytes_max), (2, 3008));
    }

    #[test]
    fn trace_packets_span_opportunities_with_byte_accounting() {
        // One opportunity per ms; a 3100-byte packet (+4) needs 2 opportunities and 96 bytes of a
        // third, whose other 1408 bytes start the next packet (which then ends in the fifth).
        let trace = Trace::parse("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "t", false).unwrap();
        let mut d = direction(Server::trace(trace), "infinite", 0, 0.0);
        let departures = run(&mut d, 2, 3100, 0, 10_000_000);
        assert_eq!(departures, vec![3_000_000, 5_000_000]);
    }

    #[test]
    fn small_packets_share_an_opportunity() {
        let trace = Trace::parse("5\n", "t", true).unwrap();
        let mut d = direction(Server::trace(trace), "infinite", 0, 0.0);
        let departures = run(&mut d, 10, 100, 0, 6_000_000);
        assert_eq!(departures, vec![5_000_000; 10]);
    }

    #[test]
    fn loss_after_the_bottleneck_still_uses_it() {
        let mut d = direction(Server::rate(1e9), "infinite", 0, 0.5);
        let departures = run(&mut d, 10_000, 1000, 0, 200_000_000);
        assert_eq!(d.counters.bottleneck_packets, 10_000);
        assert_eq!(d.counters.drops_loss + departures.len() as u64, 10_000);
        // 99.9% binomial interval for n = 10000, p = 0.5: +-3.29 sigma = +-165.
        assert!((d.counters.drops_loss as i64 - 5000).abs() < 165, "{}", d.counters.drops_loss);
    }

    #[test]
    fn same_seed_same_losses() {
        let lost = |seed| {
            let lossy = stages(Server::rate(1e9), "infinite", 0, 0.1);
            let before = Stages { loss_position: LossPosition::Before, loss_seed: seed, ..lossy };
            let mut d = Direction::new("uplink", before);
            (0..1000).for_each(|i| d.arrive(i, vec![0; 100]));
            d.counters.drops_loss
        };
        assert_eq!(lost(7), lost(7));
        assert_ne!(lost(7), lost(8));
    }

    #[test]
    fn last_release_until_sees_the_delay_line_and_the_packet_on_the_wire() {
        // 1500 B at 100 Mbit/s: departures at 120, 240, 360 us, released 10 ms later.
        let mut d = direction(Server::rate(100e6), "infinite", 10_000_000, 0.0);
        (0..3).for_each(|_| d.arrive(0, vec![0; 1500]));
        d.advance(250_000);
        assert_eq!(d.next_event_ns(), Some(10_120_000));
        assert_eq!(d.last_release_until(10_200_000), Some(10_120_000));
        assert_eq!(d.last_release_until(10_300_000), Some(10_240_000));
        // The third is still on the wire; its release is known too.
        assert_eq!(d.last_release_until(10_400_000), Some(10_360_000));
        assert_eq!(d.last_release_until(10_000_000), None);
    }

    #[test]
    fn a_late_pass_releases_every_due_packet_and_none_early() {
        // One pass at 10.3 ms (a coalesced wake-up) writes the two packets due by then, each
        // recorded with its own lateness, and keeps the third for its own time.
        let mut d = direction(Server::rate(100e6), "infinite", 10_000_000, 0.0);
        (0..3).for_each(|_| d.arrive(0, vec![0; 1500]));
        d.advance(10_300_000);
        let mut written = 0;
        d.release(
            || 10_300_000,
            |_| {
                written += 1;
                true
            },
        );
        assert_eq!(written, 2);
        assert_eq!(d.lateness.to_json()["max"], 180.0);
        assert_eq!(d.next_event_ns(), Some(10_360_000));
    }

    #[test]
    fn an_injected_hold_delays_each_release_and_wakes_the_loop_for_it() {
        // Releases due at 10.12, 10.24 and 10.36 ms, each held 1 ms: nothing leaves before
        // 11.12 ms, and each packet's lateness, measured against its own due time, includes it.
        let injector = Injector::new(InjectSpec::parse("fixed:1ms").unwrap(), 1);
        let held = Stages { injector: Some(injector), ..stages(Server::rate(100e6), "infinite", 10_000_000, 0.0) };
        let mut d = Direction::new("uplink", held);
        (0..3).for_each(|_| d.arrive(0, vec![0; 1500]));
        d.advance(10_500_000);
        d.release(|| 10_500_000, |_| true);
        assert_eq!((d.counters.out_packets, d.counters.injected_delays), (0, 1));
        assert_eq!(d.next_event_ns(), Some(11_120_000));
        assert_eq!(d.last_release_until(11_000_000), None);
        d.release(|| 11_200_000, |_| true);
        assert_eq!((d.counters.out_packets, d.counters.injected_delays), (1, 2));
        assert_eq!(d.next_event_ns(), Some(11_240_000));
        d.release(|| 11_400_000, |_| true);
        assert_eq!((d.counters.out_packets, d.counters.injected_delays), (3, 3));
        assert_eq!(d.lateness.quantile_us(0.0), 1_041.0);
        assert_eq!(d.lateness.to_json()["max"], 1_160.0);
    }

    #[test]
    fn capacity_of_a_repeating_trace() {
        let trace = Trace::parse("1\n2\n4\n", "t", false).unwrap();
        let d = direction(Server::trace(trace), "infinite", 0, 0.0);
        assert_eq!(d.capacity_bytes(3_999_999), 2 * 1504);
        assert_eq!(d.capacity_bytes(8_000_000), 6 * 1504);
    }
}
