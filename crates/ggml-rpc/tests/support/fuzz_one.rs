//! One fuzz input through a server session: a connection that has said HELLO and holds a
//! 1024-byte buffer (handle 1, base address 1 << 40), then the input's bytes as frames
//! (buffers of at most 1 MiB).
//! Shared by the `rpc_decode` fuzz target and the corpus replay test.

use std::sync::OnceLock;

use ggml::{backend, Device, DeviceType};
use ggml_rpc::proto::Request;
use ggml_rpc::Session;

fn cpu() -> &'static Device {
    static CPU: OnceLock<Device> = OnceLock::new();
    CPU.get_or_init(|| backend::dev_by_type(DeviceType::Cpu).expect("a CPU device"))
}

/// The frames a session starts from (also the corpus seeds' prefix-free start).
pub fn preamble() -> Vec<u8> {
    let mut v = Vec::new();
    for req in [
        Request::Hello { caps: [0; 24] },
        Request::AllocBuffer {
            device: 0,
            size: 1024,
        },
    ] {
        let p = req.encode_payload();
        v.push(req.cmd() as u8);
        v.extend_from_slice(&(p.len() as u64).to_le_bytes());
        v.extend_from_slice(&p);
    }
    v
}

/// Serves `data` after the preamble; the result (Ok or the Err that closes the connection)
/// and the response bytes. Must never panic.
pub fn run(data: &[u8]) -> (bool, usize) {
    let mut s = Session::detached(std::slice::from_ref(cpu()), None, 1 << 20).expect("a session");
    let mut out = Vec::new();
    s.serve_stream(&preamble()[..], &mut out, "fuzz")
        .expect("the preamble is served");
    let ok = s.serve_stream(data, &mut out, "fuzz").is_ok();
    (ok, out.len())
}
