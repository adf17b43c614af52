//! Thin, checked wrappers over the Linux calls the event loop needs: the monotonic clock,
//! epoll with nanosecond timeouts, a signalfd for SIGTERM/SIGINT, non-blocking read/write, rusage.

use crate::error::Error;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int, call: &str) -> Result<libc::c_int, Error> {
    if ret < 0 {
        Err(Error::last_os(call))
    } else {
        Ok(ret)
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time this thread has used, in nanoseconds (a system call: for calibration, not per packet).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Asks the kernel not to coalesce our timer wake-ups (default slack is 50 us).
pub fn minimal_timer_slack() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> Result<Self, Error> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1")?;
        // SAFETY: a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn add(&self, fd: RawFd, token: u64) -> Result<(), Error> {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: registering a valid descriptor with an event we own.
        check(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) }, "epoll_ctl")?;
        Ok(())
    }

    /// Waits until a descriptor is ready or `timeout_ns` passes (None: forever), and returns the
    /// ready tokens. epoll_pwait2 takes a nanosecond timeout, which spares the timerfd re-arm per
    /// event that dominated the profile (timerfd_settime is costly under virtualisation).
    pub fn wait(&self, timeout_ns: Option<u64>, tokens: &mut Vec<u64>) -> Result<(), Error> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let timeout = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let timeout_ptr = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: the kernel writes at most events.len() entries into our array and reads our timespec.
        let n = unsafe {
            libc::epoll_pwait2(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout_ptr,
                std::ptr::null(),
            )
        };
        tokens.clear();
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(Error::System { call: "epoll_pwait2".into(), source: err }) };
        }
        tokens.extend(events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// SIGTERM and SIGINT delivered as readable events instead of asynchronous handlers.
pub struct Signals(OwnedFd);

impl Signals {
    pub fn new() -> Result<Self, Error> {
        // SAFETY: building and applying a signal mask we own; signalfd returns a new fd or -1.
        unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            libc::sigaddset(&mut mask, libc::SIGTERM);
            libc::sigaddset(&mut mask, libc::SIGINT);
            libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
            let fd = check(libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC), "signalfd")?;
            Ok(Self(OwnedFd::from_raw_fd(fd)))
        }
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Blocks every signal in the calling thread. For the threads the loop starts: a process-directed
/// signal (SIGTERM, SIGINT) then reaches only the loop's thread, which takes them from its signalfd
/// (`Signals`), instead of killing the process in a thread that never asked for it.
pub fn block_all_signals() {
    // SAFETY: building and applying a signal mask we own, to this thread only.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut mask);
        libc::pthread_sigmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
    }
}

/// Non-blocking read: Ok(None) when nothing is waiting.
pub fn read(fd: RawFd, buf: &mut [u8]) -> Result<Option<usize>, Error> {
    // SAFETY: read into a buffer we own, bounded by its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(Error::System { call: "read".into(), source: err }),
    }
}

/// Writes one packet; false if the device refused it (counted as a write error by the caller).
pub fn write(fd: RawFd, packet: &[u8]) -> bool {
    // SAFETY: write from a buffer we own, bounded by its length.
    unsafe { libc::write(fd, packet.as_ptr().cast(), packet.len()) == packet.len() as isize }
}

/// User and system CPU seconds this process has used.
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage writes the struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}
