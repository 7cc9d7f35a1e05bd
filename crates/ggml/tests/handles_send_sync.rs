//! Every public handle can be shared across threads (API.md: handles are `Send + Sync`).

fn send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_sync() {
    send_sync::<ggml::Context>();
    send_sync::<ggml::Tensor>();
    send_sync::<ggml::Graph>();
    send_sync::<ggml::Backend>();
    send_sync::<ggml::Buffer>();
    send_sync::<ggml::BufferType>();
    send_sync::<ggml::Device>();
    send_sync::<ggml::Registry>();
    send_sync::<ggml::Event>();
    send_sync::<ggml::GraphPlan>();
    send_sync::<ggml::Gallocr>();
    send_sync::<ggml::Pending<Vec<u8>>>();
    send_sync::<ggml::gguf::GgufFile>();
    send_sync::<ggml::gguf::LoadedTensors>();
    send_sync::<ggml::Error>();
    send_sync::<ggml::backend::Place<'static>>();
    send_sync::<ggml::backend::PlacedGraph<'static>>();
    send_sync::<ggml::DeviceCaps>();
    send_sync::<ggml::backend::SplitState>();
    send_sync::<ggml::backend::TensorInfo>();
}

#[test]
fn a_graph_built_on_one_thread_computes_on_another() {
    let ctx = ggml::Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(ggml::Type::F32, 4).unwrap();
    let b = ctx.neg(&a).unwrap();
    let g = ctx.build_forward_expand(&b).unwrap();
    a.set_f32(&[1.0, -2.0, 3.0, -4.0]).unwrap();
    let out = std::thread::spawn(move || {
        let cpu = ggml::backend::cpu_init().unwrap();
        cpu.graph_compute(&g).unwrap();
        b.get_f32().unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(out, vec![-1.0, 2.0, -3.0, 4.0]);
}
