//! Two devices under the scheduler: weights on the best device found (a GPU or a loaded
//! backend library if there is one, else a second CPU stream), the graph spread over it and the
//! CPU. The same code as the README's "Several devices" section.

use ggml::{backend, BufferUsage, Context, Type};

fn main() -> ggml::Result<()> {
    backend::load_all(); // libggml-<name>.so next to the executable or in the working directory
    let best = backend::init_best()?;
    let sched = backend::sched_new(std::slice::from_ref(&best), 256, false)?; // CPU appended

    // Weights in a buffer of the best device, tagged as weights: their ops run there.
    let wctx = Context::init(1 << 20, true)?;
    let w = wctx.new_tensor_2d(Type::F32, 64, 32)?;
    let weights = backend::alloc_ctx_tensors(&wctx, &best)?;
    weights.set_usage(BufferUsage::Weights);
    w.set_f32(
        &(0..64 * 32)
            .map(|i| (i % 7) as f32 * 0.1)
            .collect::<Vec<_>>(),
    )?;

    // The graph in a context without memory: the scheduler places it.
    let ctx = Context::init(1 << 20, true)?;
    let x = ctx.new_tensor_2d(Type::F32, 64, 4)?;
    x.set_input();
    let y = ctx.soft_max(&ctx.mul_mat(&w, &x)?)?;
    let graph = ctx.build_forward_expand(&y)?;

    sched.alloc_graph(&graph)?;
    x.set_f32(&vec![0.5; 64 * 4])?;
    sched.graph_compute(&graph)?;
    let mm = graph.node(0)?;
    println!(
        "{} backends, {} splits; mul_mat on {:?}; first row: {:?}",
        sched.get_n_backends(),
        sched.get_n_splits(),
        sched.get_tensor_backend(&mm).map(|b| b.name()),
        &y.get_f32()?[..4]
    );
    Ok(())
}
