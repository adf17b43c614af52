//! TUN offloads: whole TCP segments in, packets that leave together out as one.
//!
//! With `IFF_VNET_HDR` and TSO granted to the device, the sending host hands the emulator a TCP
//! segment of up to 64 KB in one read, instead of the MSS-sized packets its software GSO would
//! cut it into one by one. The link model must still see every packet (loss, queueing and
//! serialisation are per packet, as on a wire), so `split` cuts the segment into exactly the
//! packets the host would have sent: same sizes, sequence numbers, IP ids and flags. On the way
//! out, `Coalescer` joins packets that leave in the same pass and continue one another (the
//! survivors of one segment) into one GSO write, so the receiving host's stack runs once for
//! them, as it would for a segment its NIC had merged (GRO).
//!
//! Every frame carries the 10-byte `virtio_net_hdr` first. Checksums are left to the kernel as
//! the sending host left them: a packet marked `NEEDS_CSUM` holds only the pseudo-header sum,
//! which a locally delivered packet is not checked against; the IP header checksum, which every
//! receiver checks, is recomputed for each packet made here.

/// Size of `struct virtio_net_hdr`, the TUN device's default with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const PROTO_TCP: u8 = 6;
/// Offset of the TCP checksum within its header.
const TCP_CHECK_OFFSET: u16 = 16;
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_URG: u8 = 0x20;
const TCP_CWR: u8 = 0x80;
/// The largest IPv4 packet, and so the largest GSO write.
const MAX_IP_LEN: usize = 65_535;

/// The fields of a `virtio_net_hdr` (host byte order, as the TUN device uses by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct VnetHdr {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHdr {
    fn parse(frame: &[u8]) -> Option<Self> {
        let field = |at: usize| u16::from_ne_bytes([frame[at], frame[at + 1]]);
        (frame.len() >= VNET_HDR_LEN).then(|| Self {
            flags: frame[0],
            gso_type: frame[1],
            hdr_len: field(2),
            gso_size: field(4),
            csum_start: field(6),
            csum_offset: field(8),
        })
    }

    /// A header for one TCP packet (`gso_size` 0) or a GSO write of several, whose TCP checksum
    /// holds the pseudo-header sum.
    fn tcp(headers: &TcpHeaders, gso_size: u16) -> Self {
        Self {
            flags: F_NEEDS_CSUM,
            gso_type: if gso_size > 0 { GSO_TCPV4 } else { GSO_NONE },
            hdr_len: headers.len as u16,
            gso_size,
            csum_start: headers.ip_len as u16,
            csum_offset: TCP_CHECK_OFFSET,
        }
    }

    fn to_bytes(self) -> [u8; VNET_HDR_LEN] {
        let mut bytes = [0; VNET_HDR_LEN];
        bytes[0] = self.flags;
        bytes[1] = self.gso_type;
        for (i, field) in [self.hdr_len, self.gso_size, self.csum_start, self.csum_offset].into_iter().enumerate() {
            bytes[2 + 2 * i..4 + 2 * i].copy_from_slice(&field.to_ne_bytes());
        }
        bytes
    }
}

/// Where the headers of an IPv4 TCP packet end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TcpHeaders {
    /// IP header length.
    ip_len: usize,
    /// IP and TCP header length: where the payload starts.
    len: usize,
}

impl TcpHeaders {
    /// The headers of `ip`, if it is a whole IPv4 TCP packet that is not a fragment.
    fn parse(ip: &[u8]) -> Option<Self> {
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != PROTO_TCP {
            return None;
        }
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
        let ip_len = usize::from(ip[0] & 0x0f) * 4;
        if fragment != 0 || ip_len < 20 || ip.len() < ip_len + 20 {
            return None;
        }
        let len = ip_len + usize::from(ip[ip_len + 12] >> 4) * 4;
        (len >= ip_len + 20 && len <= ip.len()).then_some(Self { ip_len, len })
    }
}

/// The IP packet of a frame (after its `virtio_net_hdr`).
pub fn ip_packet(frame: &[u8]) -> &[u8] {
    &frame[VNET_HDR_LEN.min(frame.len())..]
}

/// Cuts a frame read from a TUN device into the packets it stands for, each a frame of its own
/// in a buffer from `take`: a TSO segment into MSS-sized packets, anything else unchanged. Returns
/// false, and hands the frame over whole, if it is a GSO frame this cannot cut (not IPv4 TCP):
/// the device is only granted TSO for IPv4, so the kernel does not send one.
pub fn split(frame: &[u8], mut take: impl FnMut() -> Vec<u8>, mut emit: impl FnMut(Vec<u8>)) -> bool {
    let vnet = VnetHdr::parse(frame);
    let ip = ip_packet(frame);
    let segment = vnet.filter(|v| v.gso_type == GSO_TCPV4 && v.gso_size > 0);
    let Some((vnet, headers)) = segment.zip(TcpHeaders::parse(ip).filter(|h| ip.len() > h.len)) else {
        let mut buffer = take();
        buffer.clear();
        buffer.extend_from_slice(frame);
        emit(buffer);
        return vnet.is_none_or(|v| v.gso_type == GSO_NONE);
    };
    let mss = usize::from(vnet.gso_size);
    let payload = &ip[headers.len..];
    let seq0 = be32(ip, headers.ip_len + 4);
    let id0 = be16(ip, 4);
    let flags0 = ip[headers.ip_len + 13];
    let count = payload.len().div_ceil(mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let mut buffer = take();
        buffer.clear();
        buffer.extend_from_slice(&VnetHdr::tcp(&headers, 0).to_bytes());
        buffer.extend_from_slice(&ip[..headers.len]);
        buffer.extend_from_slice(chunk);
        let packet = &mut buffer[VNET_HDR_LEN..];
        let mut flags = flags0;
        if i + 1 < count {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            flags &= !TCP_CWR;
        }
        packet[headers.ip_len + 13] = flags;
        put_be16(packet, 4, id0.wrapping_add(i as u16));
        put_be32(packet, headers.ip_len + 4, seq0.wrapping_add((i * mss) as u32));
        finish_headers(packet, &headers);
        emit(buffer);
    }
    true
}

/// Joins frames that continue one another into one GSO write: the packets one segment was cut
/// into, as long as none was lost or left in another pass. Frames are offered in the order they
/// leave; `flush` gives back what to write.
#[derive(Default)]
pub struct Coalescer {
    frame: Vec<u8>,
    /// Packets in `frame` (0: empty).
    count: usize,
    headers: Option<TcpHeaders>,
    /// Payload size of the first packet, which every one but the last must match.
    mss: usize,
    /// Sequence number the next packet must start at.
    next_seq: u32,
    /// The last packet added ended the run (PSH, FIN or a short payload).
    closed: bool,
}

impl Coalescer {
    /// Adds `frame` if it continues the run; false if it does not (flush first, then add it).
    pub fn add(&mut self, frame: &[u8]) -> bool {
        if self.count == 0 {
            self.start(frame);
            return true;
        }
        let ip = ip_packet(frame);
        let Some(headers) = self.headers.filter(|h| !self.closed && TcpHeaders::parse(ip) == Some(*h)) else {
            return false;
        };
        let payload = ip.len() - headers.len;
        let mine = &self.frame[VNET_HDR_LEN..];
        let flags = ip[headers.ip_len + 13];
        let continues = payload > 0
            && payload <= self.mss
            && self.frame.len() + payload <= VNET_HDR_LEN + MAX_IP_LEN
            && be32(ip, headers.ip_len + 4) == self.next_seq
            && flags & !(TCP_PSH | TCP_FIN) == mine[headers.ip_len + 13]
            && same_except_lengths_and_sums(mine, ip, &headers)
            && VnetHdr::parse(frame).is_some_and(|v| v.gso_type == GSO_NONE);
        if !continues {
            return false;
        }
        self.frame.extend_from_slice(&ip[headers.len..]);
        self.frame[VNET_HDR_LEN + headers.ip_len + 13] |= flags & (TCP_PSH | TCP_FIN);
        self.count += 1;
        self.next_seq = self.next_seq.wrapping_add(payload as u32);
        self.closed = payload < self.mss || flags & (TCP_PSH | TCP_FIN) != 0;
        true
    }

    fn start(&mut self, frame: &[u8]) {
        self.frame.clear();
        self.frame.extend_from_slice(frame);
        self.count = 1;
        let ip = ip_packet(frame);
        let vnet_plain = VnetHdr::parse(frame).is_some_and(|v| v.gso_type == GSO_NONE);
        self.headers = TcpHeaders::parse(ip).filter(|h| vnet_plain && ip.len() > h.len);
        let Some(headers) = self.headers else { return };
        let flags = ip[headers.ip_len + 13];
        // Only plain data packets start a run: nothing the receiver treats one by one.
        if flags & (TCP_SYN | TCP_RST | TCP_URG | TCP_FIN | TCP_PSH) != 0 {
            self.headers = None;
            return;
        }
        self.mss = ip.len() - headers.len;
        self.next_seq = be32(ip, headers.ip_len + 4).wrapping_add(self.mss as u32);
        self.closed = false;
    }

    /// Packets waiting to be written.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The frame to write for what was added (one packet unchanged, or one GSO frame), and empties.
    pub fn flush(&mut self) -> &[u8] {
        let count = std::mem::take(&mut self.count);
        if count > 1 {
            let headers = self.headers.expect("a run has headers");
            self.frame[..VNET_HDR_LEN].copy_from_slice(&VnetHdr::tcp(&headers, self.mss as u16).to_bytes());
            finish_headers(&mut self.frame[VNET_HDR_LEN..], &headers);
        }
        &self.frame
    }
}

/// True when two packets' IP and TCP headers are equal but for the fields each packet of a
/// segment has its own of: IP length, id and checksum; TCP sequence number, flags and checksum.
fn same_except_lengths_and_sums(a: &[u8], b: &[u8], headers: &TcpHeaders) -> bool {
    let tcp = headers.ip_len; // the TCP header starts where the IP header ends
    let ranges = [(0, 2), (6, 10), (12, tcp), (tcp, tcp + 4), (tcp + 8, tcp + 13), (tcp + 14, tcp + 16)];
    ranges.iter().all(|&(from, to)| a[from..to] == b[from..to]) && a[tcp + 18..headers.len] == b[tcp + 18..headers.len]
}

/// Sets the IP total length and header checksum, and the TCP pseudo-header sum, of `packet`.
fn finish_headers(packet: &mut [u8], headers: &TcpHeaders) {
    let ip_len = headers.ip_len;
    put_be16(packet, 2, packet.len() as u16);
    put_be16(packet, 10, 0);
    let ip_sum = !fold(sum16(&packet[..ip_len], 0));
    put_be16(packet, 10, ip_sum);
    let tcp_len = (packet.len() - ip_len) as u32;
    let pseudo = sum16(&packet[12..20], u32::from(PROTO_TCP) + tcp_len);
    put_be16(packet, ip_len + usize::from(TCP_CHECK_OFFSET), fold(pseudo));
}

/// The one's-complement sum of `bytes` as 16-bit big-endian words, added to `start`, unfolded.
fn sum16(bytes: &[u8], start: u32) -> u32 {
    bytes.chunks(2).fold(start, |sum, word| sum + u32::from(u16::from_be_bytes([word[0], *word.get(1).unwrap_or(&0)])))
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn put_be16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

fn put_be32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1448;

    /// A frame as the kernel hands it over: IPv4, TCP with 12 bytes of options, `payload` bytes.
    fn frame(gso_size: u16, seq: u32, flags: u8, payload: usize) -> Vec<u8> {
        let headers = TcpHeaders { ip_len: 20, len: 52 };
        let mut out = Vec::new();
        out.extend_from_slice(&VnetHdr::tcp(&headers, gso_size).to_bytes());
        let mut ip = vec![0u8; 52];
        ip[0] = 0x45;
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = PROTO_TCP;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        put_be16(&mut ip, 4, 7);
        put_be16(&mut ip, 20, 5001);
        put_be16(&mut ip, 22, 40000);
        put_be32(&mut ip, 24, seq);
        put_be32(&mut ip, 28, 99);
        ip[32] = 8 << 4;
        ip[33] = flags;
        ip[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        ip.extend((0..payload).map(|i| (i % 251) as u8));
        finish_headers(&mut ip, &headers);
        out.extend_from_slice(&ip);
        out
    }

    fn split_all(frame: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        assert!(split(frame, Vec::new, |p| out.push(p)));
        out
    }

    fn ip_checksum_ok(packet: &[u8]) -> bool {
        fold(sum16(&packet[..20], 0)) == 0xffff
    }

    #[test]
    fn a_segment_becomes_the_packets_the_host_would_have_sent() {
        let segment = frame(MSS as u16, 1000, 0x10 | TCP_PSH | TCP_CWR, 3 * MSS + 100);
        let packets = split_all(&segment);
        assert_eq!(packets.len(), 4);
        let ip0 = ip_packet(&segment);
        for (i, frame) in packets.iter().enumerate() {
            let ip = ip_packet(frame);
            let size = if i < 3 { MSS } else { 100 };
            assert_eq!(ip.len(), 52 + size);
            assert_eq!(be16(ip, 2) as usize, 52 + size);
            assert_eq!(be16(ip, 4), 7 + i as u16);
            assert_eq!(be32(ip, 24), 1000 + (i * MSS) as u32);
            assert!(ip_checksum_ok(ip));
            let flags = ip[33];
            assert_eq!(flags & TCP_PSH != 0, i == 3, "PSH only on the last");
            assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR only on the first");
            assert_eq!(&ip[52..], &ip0[52 + i * MSS..52 + i * MSS + size]);
            let vnet = VnetHdr::parse(frame).unwrap();
            assert_eq!((vnet.gso_type, vnet.flags, vnet.csum_start, vnet.csum_offset), (GSO_NONE, F_NEEDS_CSUM, 20, 16));
            let pseudo = fold(sum16(&ip[12..20], 6 + (32 + size) as u32));
            assert_eq!(be16(ip, 36), pseudo);
        }
    }

    #[test]
    fn a_plain_packet_passes_unchanged() {
        let ack = frame(0, 5, 0x10, 0);
        assert_eq!(split_all(&ack), vec![ack]);
    }

    #[test]
    fn a_gso_frame_it_cannot_cut_goes_whole_and_says_so() {
        let mut udp = frame(MSS as u16, 0, 0x10, 2 * MSS);
        udp[VNET_HDR_LEN + 9] = 17;
        let mut out = Vec::new();
        assert!(!split(&udp, Vec::new, |p| out.push(p)));
        assert_eq!(out, vec![udp]);
    }

    #[test]
    fn the_survivors_of_a_segment_join_again_and_a_gap_ends_the_run() {
        let segment = frame(MSS as u16, 1000, 0x10 | TCP_PSH, 4 * MSS);
        let packets = split_all(&segment);
        let mut joined = Coalescer::default();
        assert!(joined.add(&packets[0]));
        assert!(joined.add(&packets[1]));
        assert!(!joined.add(&packets[3]), "packet 2 was lost: 3 does not continue 1");
        assert_eq!(joined.len(), 2);
        let out = joined.flush().to_vec();
        let ip = ip_packet(&out);
        assert!(same_except_lengths_and_sums(ip, ip_packet(&segment), &TcpHeaders { ip_len: 20, len: 52 }));
        assert_eq!(be16(ip, 2) as usize, 52 + 2 * MSS);
        assert!(ip_checksum_ok(ip));
        assert_eq!(ip[33] & TCP_PSH, 0);
        let vnet = VnetHdr::parse(&out).unwrap();
        assert_eq!((vnet.gso_type, vnet.gso_size, vnet.hdr_len), (GSO_TCPV4, MSS as u16, 52));
        assert_eq!(&ip[52..], &ip_packet(&segment)[52..52 + 2 * MSS]);
    }

    #[test]
    fn a_whole_segment_joins_back_into_itself() {
        let segment = frame(MSS as u16, 1000, 0x10 | TCP_PSH, 3 * MSS + 7);
        let mut joined = Coalescer::default();
        for packet in split_all(&segment) {
            assert!(joined.add(&packet));
        }
        let out = joined.flush().to_vec();
        let (mine, theirs) = (ip_packet(&out), ip_packet(&segment));
        assert_eq!(mine.len(), theirs.len());
        assert_eq!(mine[33], theirs[33], "the last packet's PSH is kept");
        assert_eq!(&mine[52..], &theirs[52..]);
        assert_eq!(be32(mine, 24), 1000);
    }

    #[test]
    fn a_single_packet_is_written_as_it_came() {
        let ack = frame(0, 5, 0x10, 0);
        let mut joined = Coalescer::default();
        assert!(joined.add(&ack));
        assert!(!joined.add(&ack), "an ACK without payload starts no run");
        assert_eq!(joined.flush(), &ack[..]);
        assert!(joined.is_empty());
    }

    #[test]
    fn packets_of_another_flow_or_ack_do_not_join() {
        let packets = split_all(&frame(MSS as u16, 1000, 0x10, 2 * MSS));
        let mut other = packets[1].clone();
        other[VNET_HDR_LEN + 31] ^= 1; // another ack_seq
        let mut joined = Coalescer::default();
        assert!(joined.add(&packets[0]));
        assert!(!joined.add(&other));
    }
}
