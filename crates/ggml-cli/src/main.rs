//! The `ggml` command-line tool.
//!
//! ```text
//! ggml info                 registries, devices, properties, capabilities and features
//! ```

mod info;

use std::process::ExitCode;

const USAGE: &str = "usage: ggml <command> [args]

commands:
  info      list registries and devices with their properties, capabilities and features
  help      show this message";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("info") => info::run(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command {other:?}\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ggml: {e}");
            ExitCode::FAILURE
        }
    }
}
