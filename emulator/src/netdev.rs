//! The two TUN devices, one in each network namespace, opened from this one process.
//!
//! A TUN file descriptor stays bound to the device it created, whatever namespace the process
//! is in later: so we `setns` into the sender namespace, create its device, do the same in the
//! receiver namespace, and return to where we started. No NAT, no forwarding, no iptables.
//! Namespaces that did not exist are created here and removed again when `Devices` is dropped,
//! also after an error; the TUN devices vanish with their file descriptors.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Command;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Where a device lives and how it is addressed.
pub struct Endpoint {
    pub netns: String,
    pub local: String,
    pub peer: String,
}

pub struct Devices {
    pub sender: OwnedFd,
    pub receiver: OwnedFd,
    created_netns: Vec<String>,
}

impl Drop for Devices {
    fn drop(&mut self) {
        for name in &self.created_netns {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!("ip {}: {}", args.join(" "), stderr.trim()))
    }
}

fn open_netns(name: &str) -> Result<File, String> {
    File::open(format!("/run/netns/{name}")).map_err(|e| format!("network namespace {name}: {e}"))
}

fn setns(fd: RawFd, what: &str) -> Result<(), String> {
    // SAFETY: setns on an open namespace file descriptor; failure is reported, not assumed.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(format!("setns into {what}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Opens a TUN device named `dev` (IFF_TUN | IFF_NO_PI: plain IP packets, one per read, no
/// GSO super-packets since we ask for no offloads) in the current network namespace.
fn open_tun(dev: &str) -> Result<OwnedFd, String> {
    let path = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: plain open(2); the result is checked before use.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("/dev/net/tun: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor that we now own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut request = [0u8; 40];
    let name = dev.as_bytes();
    if name.is_empty() || name.len() >= 16 {
        return Err(format!("--dev {dev:?}: a device name has 1 to 15 characters"));
    }
    request[..name.len()].copy_from_slice(name);
    let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
    request[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads a struct ifreq (40 bytes) that we own for the call's duration.
    if unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETIFF, request.as_mut_ptr()) } < 0 {
        return Err(format!("TUNSETIFF {dev}: {}", std::io::Error::last_os_error()));
    }
    Ok(owned)
}

impl Devices {
    /// Creates and configures both devices; creates missing namespaces (removed on drop).
    pub fn open(sender: &Endpoint, receiver: &Endpoint, dev: &str, mtu: u32) -> Result<Self, String> {
        let mut devices_created = Vec::new();
        for endpoint in [sender, receiver] {
            let name = &endpoint.netns;
            if !Path::new(&format!("/run/netns/{name}")).exists() {
                ip(&["netns", "add", name])?;
                devices_created.push(name.clone());
            }
        }
        // From here on, Drop removes what we created whatever fails.
        let home = File::open("/proc/self/ns/net").map_err(|e| format!("/proc/self/ns/net: {e}"))?;
        let mut partial = PartialDevices { created_netns: devices_created, fds: Vec::new() };
        for endpoint in [sender, receiver] {
            let ns = open_netns(&endpoint.netns)?;
            setns(ns.as_raw_fd(), &endpoint.netns)?;
            let tun = open_tun(dev);
            setns(home.as_raw_fd(), "the original namespace")?;
            partial.fds.push(tun?);
            configure(endpoint, dev, mtu)?;
        }
        let receiver_fd = partial.fds.pop().expect("two devices");
        let sender_fd = partial.fds.pop().expect("two devices");
        Ok(Self { sender: sender_fd, receiver: receiver_fd, created_netns: std::mem::take(&mut partial.created_netns) })
    }
}

/// Holds what `Devices::open` made so far, so an error part-way removes it.
struct PartialDevices {
    created_netns: Vec<String>,
    fds: Vec<OwnedFd>,
}

impl Drop for PartialDevices {
    fn drop(&mut self) {
        self.fds.clear();
        for name in &self.created_netns {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn configure(endpoint: &Endpoint, dev: &str, mtu: u32) -> Result<(), String> {
    let ns = endpoint.netns.as_str();
    let mtu = mtu.to_string();
    ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
    ip(&["-n", ns, "link", "set", "dev", dev, "mtu", &mtu, "up"])?;
    let local = format!("{}/32", endpoint.local);
    let peer = format!("{}/32", endpoint.peer);
    ip(&["-n", ns, "addr", "add", &local, "peer", &peer, "dev", dev])
}
