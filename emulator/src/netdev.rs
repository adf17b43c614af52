//! The two TUN devices, one in each network namespace, opened from this one process.
//!
//! A TUN file descriptor stays bound to the device it created, whatever namespace the process
//! is in later: so we `setns` into the sender namespace, create its device, do the same in the
//! receiver namespace, and return to where we started. No NAT, no forwarding, no iptables.
//! Namespaces that did not exist are created here and removed again when `Devices` is dropped,
//! and also when opening fails part-way; the TUN devices vanish with their file descriptors.

use crate::error::Error;
use std::ffi::CString;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Command;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// _IOW('T', 208, unsigned int): the offloads the device may hand us.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// Frames start with a `struct virtio_net_hdr` (10 bytes by default).
const IFF_VNET_HDR: libc::c_int = 0x4000;
/// Checksums left partial, and TCP segments over IPv4 up to 64 KB.
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
/// The kernel's IFNAMSIZ: a device name has at most 15 bytes plus the terminating NUL.
const IFNAMSIZ: usize = 16;
/// NAME_MAX: `ip netns` keeps each namespace as a file under /run/netns.
const NETNS_NAME_MAX: usize = 255;

/// Where a device lives and how it is addressed.
pub struct Endpoint {
    pub netns: String,
    pub local: Ipv4Addr,
    pub peer: Ipv4Addr,
}

/// Checks a device name against the kernel's rules (dev_valid_name), so a bad `--dev` is an
/// argument error before any namespace exists rather than a failed ioctl afterwards.
pub fn check_device_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() < IFNAMSIZ
        && name != "."
        && name != ".."
        && !name.contains(|c: char| c == '/' || c == ':' || c.is_whitespace());
    if valid {
        Ok(())
    } else {
        Err(format!("{name:?} is not a device name (1 to 15 bytes, no '/', ':' or spaces, not . or ..)"))
    }
}

/// Checks a namespace name as `ip netns` does (it becomes a file name under /run/netns).
pub fn check_netns_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty() && name.len() <= NETNS_NAME_MAX && name != "." && name != ".." && !name.contains('/');
    if valid {
        Ok(())
    } else {
        Err(format!("{name:?} is not a namespace name (1 to 255 bytes, no '/', not . or ..)"))
    }
}

/// Checks an address for one end of the point-to-point pair: a unicast IPv4 address.
pub fn parse_address(text: &str) -> Result<Ipv4Addr, String> {
    let address: Ipv4Addr = text.trim().parse().map_err(|_| format!("{text:?} is not an IPv4 address"))?;
    if address.is_unspecified() || address.is_broadcast() || address.is_multicast() || address.is_loopback() {
        return Err(format!("{address} is not a unicast address for a device"));
    }
    Ok(address)
}

pub struct Devices {
    pub sender: OwnedFd,
    pub receiver: OwnedFd,
    /// Declared after the descriptors, so the devices close before their namespaces go.
    _namespaces: CreatedNamespaces,
}

/// Namespaces this process created; each is removed when this is dropped, so every exit path
/// (success, an error part-way through `Devices::open`, or a later error) cleans them up.
struct CreatedNamespaces(Vec<String>);

impl CreatedNamespaces {
    /// Creates `name` unless it exists, and owns it from the moment `ip netns add` succeeds.
    fn ensure(&mut self, name: &str) -> Result<(), Error> {
        if Path::new(&format!("/run/netns/{name}")).exists() {
            return Ok(());
        }
        ip(&["netns", "add", name])?;
        self.0.push(name.to_string());
        Ok(())
    }
}

impl Drop for CreatedNamespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), Error> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| Error::System { call: "run ip".into(), source })?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        Err(Error::Ip { args: args.join(" "), stderr })
    }
}

fn open_netns(name: &str) -> Result<File, Error> {
    File::open(format!("/run/netns/{name}"))
        .map_err(|source| Error::System { call: format!("open network namespace {name}"), source })
}

fn setns(fd: RawFd, what: &str) -> Result<(), Error> {
    // SAFETY: setns on an open namespace file descriptor; failure is reported, not assumed.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(Error::last_os(format!("setns into {what}")));
    }
    Ok(())
}

/// Opens a TUN device named `dev` (IFF_TUN | IFF_NO_PI: IP packets, one per read) in the current
/// network namespace. With `offload`, each frame starts with a `virtio_net_hdr` and the device
/// is granted checksum offload and IPv4 TSO, so the host hands over whole TCP segments (see
/// `offload`); without it, plain packets of at most the MTU.
/// `dev` has passed `check_device_name`; `netns` names the current namespace for messages.
fn open_tun(dev: &str, netns: &str, offload: bool) -> Result<OwnedFd, Error> {
    let path = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: plain open(2); the result is checked before use.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Error::last_os(format!("open /dev/net/tun in namespace {netns}")));
    }
    // SAFETY: fd is a fresh, valid descriptor that we now own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut request = [0u8; 40];
    request[..dev.len()].copy_from_slice(dev.as_bytes());
    let vnet = if offload { IFF_VNET_HDR } else { 0 };
    let flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet) as u16;
    request[IFNAMSIZ..IFNAMSIZ + 2].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads a struct ifreq (40 bytes) that we own for the call's duration.
    if unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETIFF, request.as_mut_ptr()) } < 0 {
        return Err(Error::last_os(format!("TUNSETIFF {dev} in namespace {netns}")));
    }
    // SAFETY: TUNSETOFFLOAD takes its flags by value.
    if offload && unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4) } < 0 {
        return Err(Error::last_os(format!("TUNSETOFFLOAD {dev} in namespace {netns}")));
    }
    Ok(owned)
}

/// Creates the device of `endpoint` inside its namespace, returns to `home`, and configures it.
fn open_device(endpoint: &Endpoint, home: &File, dev: &str, mtu: u32, offload: bool) -> Result<OwnedFd, Error> {
    let ns = open_netns(&endpoint.netns)?;
    setns(ns.as_raw_fd(), &endpoint.netns)?;
    let tun = open_tun(dev, &endpoint.netns, offload);
    setns(home.as_raw_fd(), "the original namespace")?;
    let tun = tun?;
    configure(endpoint, dev, mtu)?;
    Ok(tun)
}

impl Devices {
    /// Creates and configures both devices, with offloads or without; creates missing namespaces
    /// (removed on drop, and on any error here).
    pub fn open(sender: &Endpoint, receiver: &Endpoint, dev: &str, mtu: u32, offload: bool) -> Result<Self, Error> {
        let mut namespaces = CreatedNamespaces(Vec::new());
        namespaces.ensure(&sender.netns)?;
        namespaces.ensure(&receiver.netns)?;
        let home = File::open("/proc/self/ns/net")
            .map_err(|source| Error::System { call: "open /proc/self/ns/net".into(), source })?;
        let sender_fd = open_device(sender, &home, dev, mtu, offload)?;
        let receiver_fd = open_device(receiver, &home, dev, mtu, offload)?;
        Ok(Self { sender: sender_fd, receiver: receiver_fd, _namespaces: namespaces })
    }
}

fn configure(endpoint: &Endpoint, dev: &str, mtu: u32) -> Result<(), Error> {
    let ns = endpoint.netns.as_str();
    let mtu = mtu.to_string();
    ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
    ip(&["-n", ns, "link", "set", "dev", dev, "mtu", &mtu, "up"])?;
    let local = format!("{}/32", endpoint.local);
    let peer = format!("{}/32", endpoint.peer);
    ip(&["-n", ns, "addr", "add", &local, "peer", &peer, "dev", dev])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_follow_the_kernel() {
        assert!(check_device_name("ccl0").is_ok());
        assert!(check_device_name("fifteen-bytes-x").is_ok());
        assert!(check_device_name("sixteen-bytes-xx").is_err());
        for bad in ["", ".", "..", "a/b", "a:b", "a b"] {
            assert!(check_device_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn namespace_names_follow_ip_netns() {
        assert!(check_netns_name("cell-42s").is_ok());
        assert!(check_netns_name(&"n".repeat(255)).is_ok());
        for bad in [String::new(), ".".into(), "..".into(), "a/b".into(), "n".repeat(256)] {
            assert!(check_netns_name(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn addresses_are_unicast_ipv4() {
        assert_eq!(parse_address("10.0.0.1").unwrap(), Ipv4Addr::new(10, 0, 0, 1));
        for bad in ["10.0.0", "fe80::1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.1"] {
            assert!(parse_address(bad).is_err(), "{bad:?}");
        }
    }
}
