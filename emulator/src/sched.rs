//! The packet loop's scheduling priority (`--realtime-priority N`).
//!
//! The emulator is the one timing-critical process of a cell: a packet written late is lateness
//! on the path, whereas the endpoints and the sampler only need their share of CPU. So, when
//! asked, the loop's thread (and nothing else) runs at SCHED_FIFO priority N, which takes the CPU
//! from every normal task the moment a release is due. That needs CAP_SYS_NICE (root, or the
//! capability in a pod) or an RLIMIT_RTPRIO of at least N, and, in a cgroup with real-time group
//! scheduling, a real-time budget. Where SCHED_FIFO is refused the loop asks for SCHED_DEADLINE
//! (a reservation of `--deadline-runtime` in every DEADLINE_PERIOD_NS, reclaiming idle time
//! beyond it), then nice -10, and where all are refused it keeps normal priority: the emulator
//! never fails for want of priority, and says what it got.
//!
//! Why SCHED_DEADLINE second: a container in a cgroup-v1 `cpu` hierarchy with real-time group
//! scheduling (CONFIG_RT_GROUP_SCHED) has `cpu.rt_runtime_us = 0` unless someone gives it a
//! budget, and the kubelet does not, so SCHED_FIFO is EPERM in every pod there. SCHED_DEADLINE is
//! not tied to the cgroup's real-time budget (the kernel admits it against the root domain's
//! bandwidth), needs only CAP_SYS_NICE, and a waking deadline task runs before every normal and
//! real-time task, which is what the loop needs. Measured on such a node: nice -10 left the loop
//! milliseconds late whenever another task held its core (benchmarks/results/*-full-sweep.md).
//!
//! A SCHED_FIFO loop that never slept would own its core. This one sleeps in epoll between
//! releases and busy-waits only briefly (see `pacing`; `--spin` is capped while real-time), and
//! the kernel keeps a backstop: `/proc/sys/kernel/sched_rt_runtime_us` (950000 of every 1000000
//! us by default) bounds what real-time tasks may take. SCHED_RESET_ON_FORK keeps the priority
//! from reaching any child, and the loop returns to normal priority as soon as it ends.

use std::io;

/// The nice value asked for when SCHED_FIFO and SCHED_DEADLINE are refused.
pub const FALLBACK_NICE: i32 = -10;
/// The SCHED_DEADLINE reservation by default: 300 us of every 1 ms (30 % of a core, twice what
/// the loop uses at 100 Mbit/s with 250 us windows) is guaranteed, and SCHED_FLAG_RECLAIM lets the
/// loop run on into idle time beyond it. The period bounds how long an overrun can be throttled.
/// The kernel admits reservations while they sum to at most 95 % of the cores
/// (sched_rt_runtime_us), so a node of 2 cores takes 6 loops at 300 us: a cell on a crowded node
/// asks for less (`--deadline-runtime`, its pod's share of a core), and the node's reservations
/// then stay within what its pods requested.
pub const DEFAULT_DEADLINE_RUNTIME_NS: u64 = 300_000;
pub const DEADLINE_PERIOD_NS: u64 = 1_000_000;
/// The smallest reservation `--deadline-runtime` takes: below it a loop at any rate overruns it.
pub const MIN_DEADLINE_RUNTIME_NS: u64 = 50_000;
/// `struct sched_attr` of sched_setattr(2), version 0 (48 bytes); libc does not declare it.
#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}
const SCHED_DEADLINE: u32 = 6;
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
const SCHED_FLAG_RECLAIM: u64 = 0x02;
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
    /// SCHED_DEADLINE with this runtime and period, in nanoseconds.
    Deadline { runtime_ns: u64, period_ns: u64 },
    Nice(i32),
}

/// The priority the packet loop got, held until `restore` (or drop) returns it to normal.
#[derive(Debug)]
pub struct LoopPriority {
    granted: Granted,
    /// Why SCHED_FIFO (and then each fallback) was refused, as errno names.
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

fn set_deadline(runtime_ns: u64, period_ns: u64, reclaim: bool) -> io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: SCHED_DEADLINE,
        sched_flags: SCHED_FLAG_RESET_ON_FORK | if reclaim { SCHED_FLAG_RECLAIM } else { 0 },
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: runtime_ns,
        sched_deadline: period_ns,
        sched_period: period_ns,
    };
    // SAFETY: pid 0 is the calling thread; the kernel reads `size` bytes of the attr we own.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } != 0 {
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
    /// to SCHED_DEADLINE with `deadline_runtime_ns` of every DEADLINE_PERIOD_NS, then nice
    /// FALLBACK_NICE, then normal.
    pub fn raise(priority: Option<i32>, deadline_runtime_ns: u64) -> Self {
        let mut this = Self { granted: Granted::Normal, refused: Vec::new(), restored: false };
        let Some(priority) = priority else { return this };
        match set_scheduler(libc::SCHED_FIFO, priority) {
            Ok(()) => this.granted = Granted::Fifo(priority),
            Err(error) => {
                this.refused.push(format!("fifo: {}", errno_name(&error)));
                this.raise_deadline_or_nice(deadline_runtime_ns);
            }
        }
        this
    }

    fn raise_deadline_or_nice(&mut self, runtime_ns: u64) {
        let period_ns = DEADLINE_PERIOD_NS;
        // SCHED_FLAG_RECLAIM is Linux 4.13+; an older kernel refuses the flag with EINVAL.
        let granted = set_deadline(runtime_ns, period_ns, true).or_else(|error| match error.raw_os_error() {
            Some(libc::EINVAL) => set_deadline(runtime_ns, period_ns, false),
            _ => Err(error),
        });
        match granted {
            Ok(()) => self.granted = Granted::Deadline { runtime_ns, period_ns },
            Err(error) => {
                // EBUSY: the root domain's deadline bandwidth is taken (by other cells' loops).
                self.refused.push(format!("deadline: {}", errno_name(&error)));
                match set_nice(FALLBACK_NICE) {
                    Ok(()) => self.granted = Granted::Nice(FALLBACK_NICE),
                    Err(error) => self.refused.push(format!("nice: {}", errno_name(&error))),
                }
            }
        }
    }

    pub fn granted(&self) -> &Granted {
        &self.granted
    }

    /// One word for the result record: `normal`, `fifo:10`, or, when the request was refused,
    /// `deadline:300/1000us (fifo: EPERM)`, `nice:-10 (fifo: EPERM, deadline: EBUSY)` and
    /// `normal (fifo: EPERM, deadline: EPERM, nice: EPERM)`.
    pub fn describe(&self) -> String {
        let got = match self.granted {
            Granted::Normal => "normal".to_string(),
            Granted::Fifo(priority) => format!("fifo:{priority}"),
            Granted::Deadline { runtime_ns, period_ns } => {
                format!("deadline:{}/{}us", runtime_ns / 1000, period_ns / 1000)
            }
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
        if let Granted::Deadline { .. } = self.granted {
            return Some(format!(
                "--realtime-priority {requested}: SCHED_FIFO refused (no real-time budget in this cgroup?), the packet loop runs at {}",
                self.describe()
            ));
        }
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
            Granted::Fifo(_) | Granted::Deadline { .. } => {
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
        let priority = LoopPriority::raise(None, DEFAULT_DEADLINE_RUNTIME_NS);
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
            let mut priority = LoopPriority::raise(Some(5), DEFAULT_DEADLINE_RUNTIME_NS);
            // SAFETY: sched_getscheduler of the calling thread.
            let policy = || unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
            match priority.granted() {
                Granted::Fifo(5) => assert_eq!(policy(), libc::SCHED_FIFO),
                Granted::Deadline { .. } => assert_eq!(policy(), SCHED_DEADLINE as i32),
                Granted::Nice(_) | Granted::Normal => assert_eq!(policy(), libc::SCHED_OTHER),
                other => panic!("{other:?}"),
            }
            priority.restore();
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    /// The kernel admits deadline reservations while they sum to at most sched_rt_runtime_us of
    /// every period on each core (95 %): on this machine's cores, loops at the default 300 us
    /// stop being admitted (EBUSY, then nice) where loops at a smaller share still are. As root
    /// only (SCHED_DEADLINE needs CAP_SYS_NICE), and with no other deadline task on the machine.
    #[test]
    fn deadline_reservations_are_admitted_while_they_fit_the_cores() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: SCHED_DEADLINE needs root here");
            return;
        }
        let runtime_us: u64 = std::fs::read_to_string(RT_RUNTIME_PATH).unwrap().trim().parse().unwrap_or(950_000);
        // SAFETY: sysconf with a constant argument.
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as u64;
        let admitted = |runtime_ns: u64, threads: u64| -> u64 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads as usize));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        let mut this = LoopPriority { granted: Granted::Normal, refused: Vec::new(), restored: false };
                        this.raise_deadline_or_nice(runtime_ns);
                        let got = matches!(this.granted, Granted::Deadline { .. });
                        barrier.wait(); // every thread asks while the others hold what they got
                        this.restore();
                        got
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap() as u64).sum()
        };
        // Capacity in reservations: cores x runtime share / the reservation's share of a period.
        let fits = |runtime_ns: u64| cores * runtime_us * 1000 / (DEADLINE_PERIOD_NS / 1000) / runtime_ns;
        let crowd = fits(DEFAULT_DEADLINE_RUNTIME_NS) * 2;
        assert_eq!(admitted(DEFAULT_DEADLINE_RUNTIME_NS, crowd), fits(DEFAULT_DEADLINE_RUNTIME_NS));
        assert_eq!(admitted(DEFAULT_DEADLINE_RUNTIME_NS / 2, crowd), crowd.min(fits(DEFAULT_DEADLINE_RUNTIME_NS / 2)));
    }

    /// A cgroup-v1 `cpu` group with real-time group scheduling and no budget, as a pod's cgroup
    /// on such a node: SCHED_FIFO is refused there and the loop gets SCHED_DEADLINE. Runs where
    /// the kernel has RT group scheduling and the test may make cgroups (root); says so otherwise.
    #[test]
    fn a_cgroup_without_real_time_budget_gets_deadline() {
        let root = std::path::Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.rt_runtime_us").exists() || unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: no cgroup-v1 real-time group scheduling here, or not root");
            return;
        }
        let group = root.join(format!("ccsweep-sched-test-{}", std::process::id()));
        if let Err(error) = std::fs::create_dir(&group) {
            eprintln!("skipped: cannot make a cpu cgroup here ({error})");
            return;
        }
        assert_eq!(std::fs::read_to_string(group.join("cpu.rt_runtime_us")).unwrap().trim(), "0");
        let described = std::thread::spawn({
            let tasks = group.join("tasks");
            move || {
                // SAFETY: gettid has no arguments.
                std::fs::write(&tasks, unsafe { libc::gettid() }.to_string()).unwrap();
                let mut priority = LoopPriority::raise(Some(10), DEFAULT_DEADLINE_RUNTIME_NS);
                // SAFETY: sched_getscheduler of the calling thread.
                let policy = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
                let described = (priority.describe(), policy, priority.warning(Some(10)));
                priority.restore();
                // SAFETY: as above.
                assert_eq!(unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
                std::fs::write(std::path::Path::new("/sys/fs/cgroup/cpu/tasks"), unsafe { libc::gettid() }.to_string())
                    .unwrap();
                described
            }
        })
        .join();
        std::fs::remove_dir(&group).unwrap();
        let (described, policy, warning) = described.unwrap();
        assert_eq!(described, "deadline:300/1000us (fifo: EPERM)");
        assert_eq!(policy, SCHED_DEADLINE as i32);
        assert!(warning.unwrap().contains("SCHED_FIFO refused"));
    }
}
