//! ccsweep-link: a user-space link emulator with Mahimahi's link model between two network
//! namespaces. See docs/emulator.md for the model, the order of loss, queue and delay, and the
//! output it writes.
//!
//! The binary is `main.rs`; the modules are public so that benches and integration tests can
//! drive the link model, the pacer and the parsers directly.

pub mod cli;
pub mod config;
pub mod delaytrace;
pub mod emulate;
pub mod ecn;
pub mod error;
pub mod inject;
pub mod jitter;
pub mod lateness;
pub mod link;
pub mod linklog;
pub mod loss;
pub mod netdev;
pub mod offload;
pub mod pacing;
pub mod policer;
pub mod queue;
pub mod sched;
pub mod slot;
pub mod sys;
pub mod trace;
pub mod units;
