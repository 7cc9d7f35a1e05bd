//! `ggml rpc-server`, `ggml info --rpc` and `GGML_RPC_SERVERS`, through the binary.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};

fn ggml() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ggml"))
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ggml rpc-server`, killed when dropped, with the address it listens on.
struct Served(Child, String);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server on a port it picks itself (`-p 0`) and reads the address it announces:
/// choosing a free port here and handing it over would race with the other tests.
fn serve() -> Served {
    let mut child = ggml()
        .args(["rpc-server", "-p", "0", "-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let endpoint = first
        .trim()
        .rsplit(' ')
        .next()
        .filter(|_| first.contains(" listening on "))
        .unwrap_or_else(|| panic!("no address announced: {first:?}"))
        .to_string();
    // The rest of its output is drained, so that its later lines never meet a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Served(child, endpoint)
}

#[test]
fn info_lists_the_devices_of_rpc_servers() {
    let s = serve();
    let out = ggml().args(["info", "--rpc", &s.1]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!(": RPC[{}] (1 device(s))", s.1)),
        "{stdout}"
    );
    let dev = stdout
        .split("\ndevice ")
        .find(|d| d.contains(": RPC0\n"))
        .unwrap_or_else(|| panic!("no RPC0 in {stdout}"));
    assert!(dev.contains(&format!("description: {}", s.1)), "{dev}");
    assert!(dev.contains("type: Gpu"), "{dev}");
    assert!(
        dev.contains(&format!("buffer type: RPC0[{}] (alignment 32", s.1)),
        "{dev}"
    );
    assert!(dev.contains("host false"), "{dev}");

    // The same from the environment, for any command.
    let out = ggml()
        .args(["info"])
        .env("GGML_RPC_SERVERS", format!("{},", s.1))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains(": RPC0\n"), "{stdout}");
}

#[test]
fn test_ops_runs_on_a_device_named_by_the_environment() {
    let s = serve();
    let out = ggml()
        .args(["test-ops", "-d", "RPC0", "-o", "ADD,SOFT_MAX"])
        .env("GGML_RPC_SERVERS", &s.1)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("device RPC0: {}", s.1)),
        "{stdout}"
    );
    let summary = stdout.lines().last().unwrap();
    let passed: usize = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(passed > 20 && summary.contains(" 0 failed"), "{summary}");
}

#[test]
fn unreachable_or_missing_endpoints_are_errors() {
    let port = free_port();
    let ep = format!("127.0.0.1:{port}");
    let out = ggml().args(["info", "--rpc", &ep]).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("info --rpc: rpc server {ep:?}")) && stderr.contains("connect"),
        "{stderr}"
    );
    let out = ggml()
        .args(["info"])
        .env("GGML_RPC_SERVERS", &ep)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("GGML_RPC_SERVERS: rpc server {ep:?}")),
        "{stderr}"
    );
    let out = ggml().args(["info", "--rpc"]).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--rpc needs HOST:PORT"), "{stderr}");
}
