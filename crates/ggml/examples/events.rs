//! Two streams on one device, ordered by an event: the first computes, the second copies the
//! result out after it, and the host waits only at the end.
//!
//! Run with `cargo run --release --example events`.

use ggml::{backend, Context, DeviceType, Event, Type};

fn main() -> ggml::Result<()> {
    let dev = backend::dev_by_type(DeviceType::Cpu).expect("the CPU device is registered");
    let compute = dev.init(None)?;
    let copier = dev.init(None)?;

    // x, y = x² (computed on `compute`), and a copy of y (filled by `copier`).
    let ctx = Context::for_metadata(3, 8)?;
    let x = ctx.new_tensor_1d(Type::F32, 1 << 16)?;
    let y = ctx.sqr(&x)?;
    let copy = ctx.new_tensor_1d(Type::F32, 1 << 16)?;
    let _buffer = backend::alloc_ctx_tensors(&ctx, &compute)?;
    let graph = ctx.new_graph_custom(8, false)?;
    graph.build_forward_expand(&y)?;

    let input: Vec<f32> = (0..1 << 16).map(|i| (i % 100) as f32 / 10.0).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    compute.tensor_set_async(&x, bytes, 0)?;
    compute.graph_compute_async(&graph)?;

    // The event marks "y is computed" in `compute`'s queue; `copier` waits for it without
    // blocking the host.
    let done = Event::new(&dev)?;
    done.record(&compute)?;
    copier.event_wait(&done)?;
    backend::tensor_copy_async(&copier, &copier, &y, &copy)?;
    println!(
        "queued: {} job(s) on the compute stream, {} on the copier",
        compute.n_pending(),
        copier.n_pending()
    );

    copier.synchronize()?;
    let out = copy.get_f32()?;
    assert!(out.iter().zip(&input).all(|(o, i)| *o == i * i));
    println!(
        "copy[99] = {} (9.9² = {}); event signalled: {}",
        out[99],
        9.9f32 * 9.9,
        done.is_signalled()
    );
    Ok(())
}
