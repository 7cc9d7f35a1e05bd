//! The main demo: the devices this machine has, then a small MLP's forward pass computed
//! asynchronously on the default backend.
//!
//! Run with `cargo run --release --example quickstart`.

use ggml::{backend, BufferUsage, Context, ContextSize, Gallocr, Type};

/// A tiny deterministic generator for the demo's weights.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

fn main() -> ggml::Result<()> {
    println!("devices:");
    for i in 0..backend::dev_count() {
        let dev = backend::dev_get(i).expect("index below dev_count");
        let props = dev.get_props();
        println!(
            "  {}: {} ({:?}), {:.1} of {:.1} GiB free, async {}, events {}",
            props.name,
            props.description,
            props.dev_type,
            props.memory_free as f64 / (1u64 << 30) as f64,
            props.memory_total as f64 / (1u64 << 30) as f64,
            props.caps.async_compute,
            props.caps.events
        );
    }
    let be = backend::init_best()?;
    println!("computing on: {}", be.name());

    // Weights: a 2-layer MLP, 16 → 32 → 4, in a backend buffer tagged as weights.
    let (n_in, n_hidden, n_out, batch) = (16i64, 32i64, 4i64, 3i64);
    let weights = Context::for_metadata(4, 0)?;
    let w1 = weights.new_tensor_2d(Type::F32, n_in, n_hidden)?;
    let b1 = weights.new_tensor_1d(Type::F32, n_hidden)?;
    let w2 = weights.new_tensor_2d(Type::F16, n_hidden, n_out)?;
    let b2 = weights.new_tensor_1d(Type::F32, n_out)?;
    let weight_buf = backend::alloc_ctx_tensors(&weights, &be)?;
    weight_buf.set_usage(BufferUsage::Weights);
    w1.set_f32(&values((n_in * n_hidden) as usize, 1))?;
    b1.set_f32(&values(n_hidden as usize, 2))?;
    w2.set_f32(&values((n_hidden * n_out) as usize, 3))?;
    b2.set_f32(&values(n_out as usize, 4))?;

    // The forward pass, softmax(W2 · relu(W1 · x + b1) + b2), built in a metadata-only
    // context; the graph allocator places the input and intermediates in one compute buffer,
    // reusing memory.
    let ctx = ContextSize::new().tensors(16).graph().init(true)?;
    let x = ctx.new_tensor_2d(Type::F32, n_in, batch)?;
    x.set_input();
    let h = ctx.relu(&ctx.add(&ctx.mul_mat(&w1, &x)?, &b1)?)?;
    let logits = ctx.add(&ctx.mul_mat(&w2, &h)?, &b2)?;
    let probs = ctx.soft_max(&logits)?;
    probs.set_output();
    let graph = ctx.build_forward_expand(&probs)?;
    let galloc = Gallocr::new(&be.get_device().buffer_type())?;
    galloc.alloc_graph(&graph)?;
    println!(
        "graph: {} nodes, {} leafs; compute buffer of {} bytes",
        graph.n_nodes(),
        graph.n_leafs(),
        galloc.get_buffer_size(0)
    );

    x.set_f32(&values((n_in * batch) as usize, 5))?;
    be.graph_compute_async(&graph)?;
    println!(
        "graph_compute_async returned; {} job(s) still queued",
        be.n_pending()
    );
    be.synchronize()?;

    let out = probs.get_f32()?;
    for (i, row) in out.chunks(n_out as usize).enumerate() {
        let sum: f32 = row.iter().sum();
        println!("sample {i}: probabilities {row:.4?} (sum {sum:.4})");
    }
    Ok(())
}
