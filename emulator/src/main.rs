//! The `ccsweep-link` binary: parse the command line, run the link, and turn every failure into
//! one line on stderr and an exit status (2 for a refused command line, 1 at run time).

use ccsweep_link::cli::{one_line, parse_args};
use ccsweep_link::config::Config;
use ccsweep_link::emulate;
use ccsweep_link::error::Error;
use clap::error::ErrorKind;
use std::process::ExitCode;

fn fail(error: &Error) -> ExitCode {
    eprintln!("ccsweep-link: error: {error}");
    ExitCode::from(error.exit_code())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args()) {
        Ok(args) => args,
        Err(err) if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("ccsweep-link: error: {}", one_line(&err));
            return ExitCode::from(2);
        }
    };
    let result = Config::from_args(&args).and_then(|config| emulate::run(&config));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}
