//! The `ggml` command-line tool: `ggml <command> …`, one module per command.

mod bench;
mod gguf_cmd;
mod imatrix;
mod info;
mod json;
mod quantize;
mod rpc_server;

use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "usage: ggml <command> [args]

commands:
  info                         registries and devices: properties, capabilities, features
  bench [-o OPS] [-b BACKEND] [-t N] [--quick]   time ops as test-backend-ops perf does
  gguf inspect FILE [--json]   header, metadata and tensors of a GGUF file
  gguf quantize IN OUT TYPE    a copy of a GGUF file with its weights quantized to TYPE
       [--imatrix FILE] [--threads N]
  rpc-server [-H HOST] [-p PORT] [-d DEV,...] [-t N] [-c DIR]   serve devices over GGML RPC";

/// Whether `arg` asks for help (`-h` or `--help`); every command then prints its usage and
/// succeeds.
pub fn is_help(arg: &OsString) -> bool {
    matches!(arg.to_str(), Some("-h" | "--help"))
}

/// Why a command failed; decides the exit status.
pub enum CliError {
    /// Bad command line (exit status 2); the message includes the usage.
    Usage(String),
    /// The command ran and failed (exit status 1).
    Failed(String),
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let command = args.first().map(|a| a.to_string_lossy().into_owned());
    let result = match command.as_deref() {
        Some("info") => info::run(&args[1..]),
        Some("gguf") => gguf_cmd::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("rpc-server") => rpc_server::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(CliError::Usage(format!(
            "unknown command {other:?}\n\n{USAGE}"
        ))),
        None => Err(CliError::Usage(USAGE.to_string())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(m)) => {
            eprintln!("ggml: {m}");
            ExitCode::from(2)
        }
        Err(CliError::Failed(m)) => {
            eprintln!("ggml: {m}");
            ExitCode::from(1)
        }
    }
}
