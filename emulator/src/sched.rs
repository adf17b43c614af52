//! The packet loop's scheduling priority (`--realtime-priority N`).
//!
//! The emulator is the one timing-critical process of a cell: a packet written late is lateness
//! on the path, whereas the endpoints and the sampler only need their share of CPU. So, when
//! asked, the loop's thread (and nothing else) runs at SCHED_FIFO priority N, which takes the CPU
//! from every normal task the moment a release is due. That needs CAP_SYS_NICE (root, or the
//! capability in a pod) or an RLIMIT_RTPRIO of at least N, and, in a cgroup with real-time group
//! scheduling, a real-time budget. Where SCHED_FIFO is refused the loop asks for nice -10 instead
//! (allowed by CAP_SYS_NICE or RLIMIT_NICE), and where that is refused too it keeps normal
//! priority: the emulator never fails for want of priority, and says what it got.
//!
//! A SCHED_FIFO loop that never slept would own its core. This one sleeps in epoll between
//! releases and busy-waits only briefly (see `pacing`; `--spin` is capped while real-time), and
//! the kernel keeps a backstop: `/proc/sys/kernel/sched_rt_runtime_us` (950000 of every 1000000
//! us by default) bounds what real-time tasks may take. SCHED_RESET_ON_FORK keeps the priority
//! from reaching any child, and the loop returns to normal priority as soon as it ends.

use std::io;

/// The nice value asked for when SCHED_FIFO is refused.
pub const FALLBACK_NICE: i32 = -10;
/// Where the kernel says how much of each period real-time tasks may use (-1: no limit).
const RT_RUNTIME_PATH: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// A `--realtime-priority` value: a SCHED_FIFO priority.
pub fn parse_priority(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i32>() {
        Ok(priority) if (1..=99).contains(&priority) => Ok(priority),
        _ => Err(format!("{text:?} is not a SCHED_FIFO priority: give a whole number from 1 to 99")),
    }
}

/// What the loop's thread runs at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    Normal,
    Fifo(i32),
    Nice(i32),
}

/// The priority the packet loop got, held until `restore` (or drop) returns it to normal.
#[derive(Debug)]
pub struct LoopPriority {
    granted: Granted,
    /// Why SCHED_FIFO (and then the nice fallback) was refused, as errno names.
    refused: Vec<String>,
    restored: bool,
}

fn errno_name(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EBUSY) => "EBUSY".into(),
        Some(code) => format!("errno {code}"),
        None => error.to_string(),
    }
}

fn set_scheduler(policy: libc::c_int, priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pid 0 is the calling thread; the kernel reads the sched_param we own.
    if unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no arguments; on Linux a thread id with PRIO_PROCESS names one thread.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // SAFETY: setpriority with integer arguments.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl LoopPriority {
    /// Raises the calling thread to SCHED_FIFO `priority` (None: leaves it alone), falling back
    /// to nice FALLBACK_NICE, then to normal.
    pub fn raise(priority: Option<i32>) -> Self {
        let mut this = Self { granted: Granted::Normal, refused: Vec::new(), restored: false };
        let Some(priority) = priority else { return this };
        match set_scheduler(libc::SCHED_FIFO, priority) {
            Ok(()) => this.granted = Granted::Fifo(priority),
            Err(error) => {
                this.refused.push(format!("fifo: {}", errno_name(&error)));
                match set_nice(FALLBACK_NICE) {
                    Ok(()) => this.granted = Granted::Nice(FALLBACK_NICE),
                    Err(error) => this.refused.push(format!("nice: {}", errno_name(&error))),
                }
            }
        }
        this
    }

    pub fn granted(&self) -> &Granted {
        &self.granted
    }

    /// One word for the result record: `normal`, `fifo:10`, or `nice:-10 (fifo: EPERM)` and
    /// `normal (fifo: EPERM, nice: EPERM)` when the request was refused.
    pub fn describe(&self) -> String {
        let got = match self.granted {
            Granted::Normal => "normal".to_string(),
            Granted::Fifo(priority) => format!("fifo:{priority}"),
            Granted::Nice(nice) => format!("nice:{nice}"),
        };
        if self.refused.is_empty() {
            got
        } else {
            format!("{got} ({})", self.refused.join(", "))
        }
    }

    /// The one line stderr gets when the request was not granted in full, or granted without the
    /// kernel's real-time budget as a backstop; None when there is nothing to say.
    pub fn warning(&self, requested: Option<i32>) -> Option<String> {
        let requested = requested?;
        if !self.refused.is_empty() {
            return Some(format!(
                "--realtime-priority {requested}: not permitted, the packet loop runs at {} (needs CAP_SYS_NICE)",
                self.describe()
            ));
        }
        let runtime = std::fs::read_to_string(RT_RUNTIME_PATH).ok()?;
        (runtime.trim() == "-1").then(|| {
            format!("--realtime-priority {requested}: {RT_RUNTIME_PATH} is -1: the kernel does not cap real-time tasks")
        })
    }

    /// Returns the thread to normal priority (the nice value of a refused or released request).
    pub fn restore(&mut self) {
        if self.restored {
            return;
        }
        self.restored = true;
        match self.granted {
            Granted::Normal => {}
            Granted::Fifo(_) => {
                let _ = set_scheduler(libc::SCHED_OTHER, 0);
            }
            Granted::Nice(_) => {
                let _ = set_nice(0);
            }
        }
    }
}

impl Drop for LoopPriority {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_1_to_99() {
        assert_eq!(parse_priority("10"), Ok(10));
        assert_eq!(parse_priority("99"), Ok(99));
        for bad in ["0", "100", "-1", "ten", "1.5", ""] {
            let error = parse_priority(bad).unwrap_err();
            assert!(error.contains("from 1 to 99"), "{bad}: {error}");
        }
    }

    #[test]
    fn no_request_leaves_the_thread_alone() {
        let priority = LoopPriority::raise(None);
        assert_eq!(priority.describe(), "normal");
        assert_eq!(priority.warning(None), None);
    }

    #[test]
    fn a_refusal_is_described_with_what_was_got_instead() {
        let refused = LoopPriority {
            granted: Granted::Nice(FALLBACK_NICE),
            refused: vec!["fifo: EPERM".into()],
            restored: true,
        };
        assert_eq!(refused.describe(), "nice:-10 (fifo: EPERM)");
        let warning = refused.warning(Some(10)).unwrap();
        assert!(warning.starts_with("--realtime-priority 10: not permitted") && !warning.contains('\n'), "{warning}");
        let none = LoopPriority {
            granted: Granted::Normal,
            refused: vec!["fifo: EPERM".into(), "nice: EPERM".into()],
            restored: true,
        };
        assert_eq!(none.describe(), "normal (fifo: EPERM, nice: EPERM)");
    }

    #[test]
    fn the_calling_thread_gets_fifo_where_permitted_and_returns_to_normal() {
        // Run on a thread of its own, so the test harness's threads keep their priority.
        std::thread::spawn(|| {
            let mut priority = LoopPriority::raise(Some(5));
            // SAFETY: sched_getscheduler of the calling thread.
            let policy = || unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
            match priority.granted() {
                Granted::Fifo(5) => assert_eq!(policy(), libc::SCHED_FIFO),
                Granted::Nice(_) | Granted::Normal => assert_eq!(policy(), libc::SCHED_OTHER),
                other => panic!("{other:?}"),
            }
            priority.restore();
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
