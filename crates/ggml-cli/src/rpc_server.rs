//! `ggml rpc-server`: serves this machine's devices over GGML's RPC protocol 7.0.0.

use std::ffi::OsString;
use std::path::PathBuf;

use ggml::backend;

use crate::CliError;

const USAGE: &str =
    "usage: ggml rpc-server [-H HOST] [-p PORT] [-d DEV,...] [-t THREADS] [-c CACHE_DIR]

  Serves local devices to GGML RPC clients (llama.cpp --rpc, ggml_rpc::add_server).
  -H HOST       address to bind (default 127.0.0.1; any other is reachable from outside)
  -p PORT       port (default 50052; 0 picks a free one, printed on the first line)
  -d DEV,...    devices to serve, by name (default: the CPU)
  -t THREADS    threads per device that has a thread setting (default: available cores)
  -c CACHE_DIR  keep uploads over 10 MiB by hash, so clients need not send them again";

struct Opts {
    host: String,
    port: u16,
    devices: Vec<String>,
    threads: usize,
    cache: Option<PathBuf>,
}

fn parse(args: &[OsString]) -> Result<Option<Opts>, CliError> {
    let usage = |m: String| CliError::Usage(format!("rpc-server: {m}\n\n{USAGE}"));
    let mut o = Opts {
        host: "127.0.0.1".into(),
        port: 50052,
        devices: Vec::new(),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cache: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if crate::is_help(a) {
            return Ok(None);
        }
        let flag = a.to_string_lossy().into_owned();
        let mut value = || {
            it.next()
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "-H" | "--host" => o.host = value()?,
            "-p" | "--port" => {
                let v = value()?;
                o.port = v
                    .parse()
                    .map_err(|_| usage(format!("-p {v:?} is not a port")))?;
            }
            "-d" | "--device" => o.devices = value()?.split(',').map(str::to_string).collect(),
            "-t" | "--threads" => {
                let v = value()?;
                o.threads = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| usage(format!("-t {v:?} is not a positive count")))?;
            }
            "-c" | "--cache" => o.cache = Some(PathBuf::from(value()?)),
            _ => return Err(usage(format!("unknown option {flag:?}"))),
        }
    }
    Ok(Some(o))
}

/// Parses the options and serves until the process is stopped.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    let Some(o) = parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    let devices = if o.devices.is_empty() {
        vec![backend::dev_by_type(ggml::DeviceType::Cpu)
            .ok_or_else(|| CliError::Failed("rpc-server: no CPU device".into()))?]
    } else {
        o.devices
            .iter()
            .map(|n| {
                backend::dev_by_name(n)
                    .ok_or_else(|| CliError::Failed(format!("rpc-server: no device {n:?}")))
            })
            .collect::<Result<_, _>>()?
    };
    let endpoint = format!("{}:{}", o.host, o.port);
    ggml_rpc::start_server(&endpoint, o.cache.as_deref(), o.threads, &devices)
        .map_err(|e| CliError::Failed(format!("rpc-server: {e}")))
}

/// The environment variable naming RPC servers every command connects to before it runs
/// (`HOST:PORT[,HOST:PORT…]`), so that their devices (`RPC0`, …) are registered like local
/// ones: `GGML_RPC_SERVERS=127.0.0.1:50052 ggml test-ops -d RPC0`.
pub const SERVERS_ENV: &str = "GGML_RPC_SERVERS";

/// Connects to each endpoint of the comma-separated `list` (empty entries are ignored) and
/// registers its devices globally; `Err` names the endpoint that failed and why.
pub fn add_servers(list: &str, from: &str) -> Result<(), CliError> {
    for ep in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let reg = ggml_rpc::add_server(ep)
            .map_err(|e| CliError::Failed(format!("{from}: rpc server {ep:?}: {e}")))?;
        if backend::reg_by_name(&reg.name()).is_none() {
            backend::register(reg);
        }
    }
    Ok(())
}

/// Registers the servers of [`SERVERS_ENV`], when it is set.
pub fn add_env_servers() -> Result<(), CliError> {
    match std::env::var(SERVERS_ENV) {
        Ok(list) => add_servers(&list, SERVERS_ENV),
        Err(std::env::VarError::NotPresent) => Ok(()),
        Err(e) => Err(CliError::Failed(format!("{SERVERS_ENV}: {e}"))),
    }
}
