//! ECN in the IP header (RFC 3168): reading a packet's codepoint and setting Congestion Experienced.
//!
//! The two low bits of IPv4's TOS byte, or of IPv6's traffic class: 00 Not-ECT, 01 ECT(1),
//! 10 ECT(0), 11 CE. Setting CE on IPv4 updates the header checksum incrementally (RFC 1624),
//! as the kernel's `IP_ECN_set_ce` does; IPv6 has no header checksum. TCP's checksum does not
//! cover these bits.

/// A packet's ECN codepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codepoint {
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Codepoint {
    /// Whether a queue may mark the packet instead of dropping it: ECT(0), ECT(1), or already CE
    /// (marked further up the path: counted as marked, left as it is, as the kernel does).
    pub fn capable(self) -> bool {
        self != Codepoint::NotEct
    }
}

/// The codepoint of an IP packet (IPv4 or IPv6); Not-ECT for anything too short to hold one.
pub fn codepoint(ip: &[u8]) -> Codepoint {
    let bits = match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => ip[1] & 0b11,
        Some(6) if ip.len() >= 40 => (ip[1] >> 4) & 0b11,
        _ => return Codepoint::NotEct,
    };
    match bits {
        0b01 => Codepoint::Ect1,
        0b10 => Codepoint::Ect0,
        0b11 => Codepoint::Ce,
        _ => Codepoint::NotEct,
    }
}

/// Sets CE on an ECN-capable IP packet; returns false (and leaves it) when it is Not-ECT.
pub fn set_ce(ip: &mut [u8]) -> bool {
    match codepoint(ip) {
        Codepoint::NotEct => false,
        Codepoint::Ce => true,
        _ if ip[0] >> 4 == 6 => {
            ip[1] |= 0b11 << 4;
            true
        }
        _ => {
            let old_word = u16::from_be_bytes([ip[0], ip[1]]);
            ip[1] |= 0b11;
            let new_word = u16::from_be_bytes([ip[0], ip[1]]);
            // RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), in one's complement arithmetic.
            let checksum = u16::from_be_bytes([ip[10], ip[11]]);
            let mut sum = u32::from(!checksum) + u32::from(!old_word) + u32::from(new_word);
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header checksum computed from scratch.
    fn checksum(header: &[u8]) -> u16 {
        let mut sum: u32 = header.chunks(2).enumerate().filter(|(i, _)| *i != 5).map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    fn ipv4(tos: u8) -> Vec<u8> {
        let mut header = vec![0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let sum = checksum(&header);
        header[10..12].copy_from_slice(&sum.to_be_bytes());
        header.extend_from_slice(&[0; 20]);
        header
    }

    #[test]
    fn reads_each_codepoint_of_ipv4_and_ipv6() {
        assert_eq!(codepoint(&ipv4(0x00)), Codepoint::NotEct);
        assert_eq!(codepoint(&ipv4(0x01)), Codepoint::Ect1);
        assert_eq!(codepoint(&ipv4(0xb8 | 0x02)), Codepoint::Ect0);
        assert_eq!(codepoint(&ipv4(0x03)), Codepoint::Ce);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x10; // traffic class 0x01: ECT(1)
        assert_eq!(codepoint(&v6), Codepoint::Ect1);
        assert_eq!(codepoint(&[0x45, 0x02]), Codepoint::NotEct, "too short to be a header");
    }

    #[test]
    fn setting_ce_keeps_the_ipv4_checksum_right_for_every_tos() {
        for tos in 0..=255u8 {
            let mut packet = ipv4(tos);
            let marked = set_ce(&mut packet);
            assert_eq!(marked, tos & 0b11 != 0, "tos {tos:#x}");
            let expected = if marked { tos | 0b11 } else { tos };
            assert_eq!(packet[1], expected);
            assert_eq!(u16::from_be_bytes([packet[10], packet[11]]), checksum(&packet[..20]), "tos {tos:#x}");
        }
    }

    #[test]
    fn setting_ce_on_ipv6_changes_only_the_ecn_bits() {
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x6a; // traffic class 0xa2: DSCP 0x28, ECT(0)
        v6[1] = 0x2f;
        assert!(set_ce(&mut v6));
        assert_eq!((v6[0], v6[1]), (0x6a, 0x3f));
        assert_eq!(codepoint(&v6), Codepoint::Ce);
    }
}
