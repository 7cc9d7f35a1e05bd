//! The speed paths, seen on the wire: a proxy between our client and our server counts the
//! bytes the client sends. Weights over `HASH_THRESHOLD` reach a server that has them in its
//! cache directory as a hash (SET_TENSOR_HASH), and a graph computed again is a
//! GRAPH_RECOMPUTE of a few bytes, not the graph.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_close, cpu_reference};
use ggml::{backend, Context, DeviceType, Type};
use ggml_rpc::Server;

/// Forwards every connection to `target`, counting the bytes sent towards it.
fn counting_proxy(target: String) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let server = TcpStream::connect(&target).unwrap();
            let (mut from_client, mut to_server) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n @ 1..) = from_client.read(&mut buf) {
                    counter.fetch_add(n as u64, Ordering::SeqCst);
                    if to_server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_server.shutdown(Shutdown::Both);
            });
            let (mut from_server, mut to_client) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(Shutdown::Both);
            });
        }
    });
    (endpoint, sent)
}

#[test]
fn weights_are_sent_once_and_graphs_recomputed() {
    let cache = std::env::temp_dir().join(format!("ggml-rpc-speed-{}", std::process::id()));
    let cpu = backend::dev_by_type(DeviceType::Cpu).unwrap();
    let server = Server::start("127.0.0.1:0", Some(&cache), 2, &[cpu]).unwrap();
    let (endpoint, sent) = counting_proxy(server.endpoint());
    let reg = ggml_rpc::add_server(&endpoint).unwrap();
    let stream = reg.dev_get(0).unwrap().init(None).unwrap();
    let sent_by = |f: &mut dyn FnMut()| {
        let before = sent.load(Ordering::SeqCst);
        f();
        sent.load(Ordering::SeqCst) - before
    };

    // 12 MiB of weights, uploaded into two buffers: the second upload is a hash.
    let n = 3 << 20;
    let weights = common::input(n, 7);
    let ctx = Context::init(1 << 16, true).unwrap();
    let w1 = ctx.new_tensor_1d(Type::F32, n as i64).unwrap();
    let w2 = ctx.new_tensor_1d(Type::F32, n as i64).unwrap();
    let _b1 = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    let first = sent_by(&mut || w1.set_f32(&weights).unwrap());
    assert!(first > 4 * n as u64, "the first upload sent {first} bytes");
    let again = sent_by(&mut || w2.set_f32(&weights).unwrap());
    assert!(again < 4096, "the cached upload sent {again} bytes");
    assert_eq!(w2.get_f32().unwrap(), weights);
    let files = std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(files, 1, "one cache file in {}", cache.display());

    // The same graph twice: the second time only its device index travels.
    let m = common::mixed();
    let _b2 = backend::alloc_ctx_tensors(&m.ctx, &stream).unwrap();
    m.fill(1);
    let whole = sent_by(&mut || stream.graph_compute(&m.graph).unwrap());
    assert_close(&m.out.get_f32().unwrap(), &cpu_reference(1), 1e-5);
    m.fill(2);
    let recompute = sent_by(&mut || stream.graph_compute(&m.graph).unwrap());
    assert_close(&m.out.get_f32().unwrap(), &cpu_reference(2), 1e-5);
    assert!(
        recompute < 64 && whole > 10 * recompute,
        "graph sent {whole} bytes, recompute {recompute}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}
