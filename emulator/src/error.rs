//! What can go wrong, as one typed value per kind, each printed as the one line a user sees.
//!
//! Value parsers (rates, durations, queues, traces, names) return a plain description of what is
//! wrong with the text they were given; the configuration attributes it to its option with
//! [`Error::argument`], so every message names the option and what is allowed. The kind decides
//! the exit status: a bad command line is 2 (nothing was created yet), a failure at run time 1.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option's value is not allowed.
    #[error("--{option}: {reason}")]
    Argument { option: String, reason: String },
    /// Options that only fail together (one of two is required, two must differ).
    #[error("{0}")]
    Arguments(String),
    /// A file named on the command line cannot be created or written.
    #[error("--{option}: {path}: {source}")]
    File { option: String, path: String, source: io::Error },
    /// A system call failed; `call` names it and what it was applied to.
    #[error("{call}: {source}")]
    System { call: String, source: io::Error },
    /// An `ip` command failed; its own message says why.
    #[error("ip {args}: {stderr}")]
    Ip { args: String, stderr: String },
}

impl Error {
    /// A closure that attributes a parser's description to `option` (named without its `--`).
    pub fn argument(option: impl Into<String>) -> impl FnOnce(String) -> Error {
        let option = option.into();
        move |reason| Error::Argument { option, reason }
    }

    /// The last OS error of the system call `call`.
    pub fn last_os(call: impl Into<String>) -> Error {
        Error::System { call: call.into(), source: io::Error::last_os_error() }
    }

    /// 2 for a command line that was refused before anything existed, 1 for a run-time failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Argument { .. } | Error::Arguments(_) => 2,
            Error::File { .. } | Error::System { .. } | Error::Ip { .. } => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_name_their_option_and_exit_2() {
        let error = Error::argument("uplink-rate")("\"0mbit\": rate must be > 0".into());
        assert_eq!(error.to_string(), "--uplink-rate: \"0mbit\": rate must be > 0");
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn run_time_failures_exit_1() {
        let error = Error::Ip { args: "netns add x".into(), stderr: "File exists".into() };
        assert_eq!(error.to_string(), "ip netns add x: File exists");
        assert_eq!(error.exit_code(), 1);
        let error = Error::System { call: "setns into x".into(), source: io::Error::from_raw_os_error(libc::EPERM) };
        assert!(error.to_string().starts_with("setns into x: Operation not permitted"), "{error}");
    }
}
