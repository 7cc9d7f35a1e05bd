//! Our client against our server on 127.0.0.1: devices, remote buffers, set/get/fill/copy,
//! graphs equal to the CPU's, GRAPH_RECOMPUTE, several clients at once, connection loss.

mod common;

use common::{assert_close, cpu_reference, Mixed};
use ggml::{backend, Context, DeviceType, Type};
use ggml_rpc::Server;

fn cpu() -> ggml::Device {
    backend::dev_by_type(DeviceType::Cpu).unwrap()
}

#[test]
fn devices_and_buffers() {
    let server = Server::start("127.0.0.1:0", None, 1, &[cpu(), cpu()]).unwrap();
    let reg = ggml_rpc::add_server(&server.endpoint()).unwrap();
    assert_eq!(reg.name(), format!("RPC[{}]", server.endpoint()));
    assert_eq!(reg.dev_count(), 2);
    let dev = reg.dev_get(1).unwrap();
    assert!(dev.name().starts_with("RPC"));
    assert_eq!(dev.description(), server.endpoint());
    assert_eq!(dev.dev_type(), DeviceType::Gpu);
    assert_eq!(dev.memory(), cpu().memory());
    let buft = dev.buffer_type();
    assert_eq!(buft.name(), format!("RPC1[{}]", server.endpoint()));
    assert_eq!(buft.get_alignment(), cpu().buffer_type().get_alignment());
    assert!(!buft.is_host());

    let ctx = Context::init(1 << 16, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let buf = backend::alloc_ctx_tensors(&ctx, &dev.init(None).unwrap()).unwrap();
    assert!(buf.get_base().is_none());
    let vals: Vec<f32> = (0..64).map(|i| i as f32 * 0.5 - 3.0).collect();
    a.set_f32(&vals).unwrap();
    assert_eq!(a.get_f32().unwrap(), vals);
    backend::tensor_memset(&a, 0, 8, 8).unwrap();
    let mut want = vals.clone();
    want[2] = 0.0;
    want[3] = 0.0;
    assert_eq!(a.get_f32().unwrap(), want);
    backend::tensor_copy(&a, &b).unwrap();
    assert_eq!(b.get_f32().unwrap(), want);
    buf.clear(0).unwrap();
    assert_eq!(b.get_f32().unwrap(), vec![0.0; 64]);
}

#[test]
fn graphs_match_the_cpu_and_recompute() {
    let server = Server::start("127.0.0.1:0", None, 2, &[cpu()]).unwrap();
    let reg = ggml_rpc::add_server(&server.endpoint()).unwrap();
    let stream = reg.dev_get(0).unwrap().init(None).unwrap();
    for seed in [1, 2] {
        assert_close(&Mixed::run_on(&stream, seed), &cpu_reference(seed), 1e-5);
    }
    // The same allocated graph again with new inputs: sent as GRAPH_RECOMPUTE.
    let m = common::mixed();
    let _buf = backend::alloc_ctx_tensors(&m.ctx, &stream).unwrap();
    for seed in [3, 4, 5] {
        m.fill(seed);
        stream.graph_compute(&m.graph).unwrap();
        assert_close(&m.out.get_f32().unwrap(), &cpu_reference(seed), 1e-5);
    }
    // Asynchronous uploads and reads.
    m.fill(6);
    let bytes = m.x.to_bytes().unwrap();
    stream.tensor_set_async(&m.x, bytes.clone(), 0).unwrap();
    stream.graph_compute_async(&m.graph).unwrap();
    let out = stream
        .tensor_get_async(&m.out, 0, m.out.nbytes())
        .unwrap()
        .wait()
        .unwrap();
    let out: Vec<f32> = out
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_close(&out, &cpu_reference(6), 1e-5);
}

#[test]
fn several_clients_are_isolated() {
    let server = Server::start("127.0.0.1:0", None, 1, &[cpu()]).unwrap();
    let ep = server.endpoint();
    let threads: Vec<_> = (0..3)
        .map(|k| {
            let ep = ep.clone();
            std::thread::spawn(move || {
                // A connection of its own (add_server would share one per endpoint).
                let reg = ggml_rpc::add_server(&ep).unwrap();
                let stream = reg.dev_get(0).unwrap().init(None).unwrap();
                let got = Mixed::run_on(&stream, 10 + k);
                assert_close(&got, &cpu_reference(10 + k), 1e-5);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn connection_loss_is_an_error() {
    let server = Server::start("127.0.0.1:0", None, 1, &[cpu()]).unwrap();
    let reg = ggml_rpc::add_server(&server.endpoint()).unwrap();
    let dev = reg.dev_get(0).unwrap();
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 16, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    a.set_f32(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    server.stop();
    let e = a.get_f32().unwrap_err();
    assert!(e.to_string().contains("rpc"), "{e}");
    assert!(a.set_f32(&[0.0; 4]).is_err());
    assert_eq!(dev.memory(), (0, 0));
}

#[test]
fn bad_endpoints_are_errors() {
    assert!(ggml_rpc::add_server("no-port").is_err());
    let port = common::free_port();
    let e = ggml_rpc::add_server(&format!("127.0.0.1:{port}")).unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
}
