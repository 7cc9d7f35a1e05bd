//! The `ggml` command-line tool: `ggml <command> …`, one module per command.

mod args;
mod bench;
mod cmd_llm;
mod gguf_cmd;
mod imatrix;
mod info;
mod json;
mod progress;
mod quantize;
mod rope_types;
mod rpc_server;
mod test_ops;
mod tokenize;

use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "usage: ggml <command> [args]

commands:
  info [--rpc HOST:PORT,...]   registries and devices: properties, capabilities, features
  bench [-o OPS] [-p PATTERN] [-b BACKEND] [-t N] [--quick]
                               time ops as test-backend-ops perf does
  gguf inspect FILE [--json]   header, metadata and tensors of a GGUF file
  gguf quantize [OPTIONS] IN OUT TYPE
                               quantize a model as llama-quantize does (TYPE: Q4_K_M, IQ4_XS, …)
  tokenize MODEL.gguf -p TEXT  the token ids of TEXT [--pieces] [--no-bos] [--no-parse-special]
  run MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S] [-t N] [-c CTX]
       [--device DEV]          generate text (stdout), prompt and generation speed (stderr)
  embed MODEL.gguf -p TEXT [-p TEXT…] [--pooling mean|cls|last|none] [--normalize]
                               sentence embeddings as JSON (bert models)
  bench-model MODEL.gguf [-p 512] [-n 128] [-t 1,2] [-r REPS]
                               prompt and generation tokens/s, as llama-bench's table
  test-ops [-o OPS] [-d DEVICE] [-p PATTERN] [-v]   the op conformance suite on every device
       [--seed N] [--export FILE] [--fixtures FILE] [--list]
  rpc-server [-H HOST] [-p PORT] [-d DEV,...] [-t N] [-c DIR]   serve devices over GGML RPC

  GGML_RPC_SERVERS=HOST:PORT,... in the environment registers those RPC servers' devices
  (RPC0, ...) for every command, e.g. `ggml test-ops -d RPC0`.

  -V, --version                the version
  -h, --help                   this text; `ggml COMMAND --help` for a command's";

/// Whether `arg` asks for help (`-h` or `--help`); every command then prints its usage and
/// succeeds.
pub fn is_help(arg: &OsString) -> bool {
    matches!(arg.to_str(), Some("-h" | "--help"))
}

/// Opens and registers the wgpu devices (WGPU0, …) when `device` names one: they are opened
/// only when asked for by name.
pub fn register_wgpu_if_named(device: Option<&str>) -> Result<(), CliError> {
    if device.is_some_and(|d| d.to_ascii_uppercase().starts_with("WGPU")) {
        ggml_wgpu::register().map_err(|e| CliError::Failed(e.to_string()))?;
    }
    Ok(())
}

/// Writes a command's output to stdout; a closed pipe (`| head`) is not an error worth
/// reporting.
pub fn write_stdout(out: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Failed(format!("writing to stdout: {e}")))
        }
        _ => Ok(()),
    }
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
    // Remote devices named in the environment are registered before any command looks.
    let result = rpc_server::add_env_servers().and_then(|()| match command.as_deref() {
        Some("info") => info::run(&args[1..]),
        Some("gguf") => gguf_cmd::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("tokenize") => tokenize::run(&args[1..]),
        Some("run") => cmd_llm::run(&args[1..]),
        Some("embed") => cmd_llm::embed(&args[1..]),
        Some("bench-model") => cmd_llm::bench_model(&args[1..]),
        Some("test-ops") => test_ops::run(&args[1..]),
        Some("rpc-server") => rpc_server::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some("-V" | "--version" | "version") => {
            println!("ggml {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some(other) => Err(CliError::Usage(format!(
            "unknown command {other:?}\n\n{USAGE}"
        ))),
        None => Err(CliError::Usage(USAGE.to_string())),
    });
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
