//! Tensor parallelism over two devices with the meta device: a two-layer MLP whose first
//! weight is split by rows and second by columns, computed on two CPU streams of one thread
//! each and checked against one CPU stream. The same code as the README's "Tensor parallelism"
//! section; `cargo run --release --example meta_device`.

use ggml::backend::{self, SplitState};
use ggml::{Context, DeviceType, Tensor, Type};

fn main() -> ggml::Result<()> {
    let cpu = backend::dev_by_type(DeviceType::Cpu).expect("the CPU device");
    // Any devices will do (GPUs, remote devices); here the CPU twice: two streams.
    let meta = backend::meta_device(&[cpu.clone(), cpu], |info, _n_devices| {
        match info.name.as_str() {
            "w1" => SplitState::axis(1), // rows: each device computes half the hidden units
            "b1" => SplitState::axis(0), // … and adds its half of the bias
            "w2" => SplitState::axis(0), // columns: each device sums over its hidden units
            _ => SplitState::mirrored(), // everything else on every device
        }
    })?;
    let two = meta.init(None)?;
    two.set_n_threads(1)?; // each member stream computes with one thread

    let (d, f, t) = (256, 1024, 8);
    let ctx = Context::init(1 << 20, true)?;
    let new = |name: &str, ne: &[i64]| -> ggml::Result<Tensor> {
        let x = ctx.new_tensor(Type::F32, ne)?;
        x.set_name(name);
        Ok(x)
    };
    let (w1, b1) = (new("w1", &[d, f])?, new("b1", &[f])?);
    let (w2, b2) = (new("w2", &[f, d])?, new("b2", &[d])?);
    let x = new("x", &[d, t])?;
    let h = ctx.gelu(&ctx.add(&ctx.mul_mat(&w1, &x)?, &b1)?)?;
    let y = ctx.add(&ctx.mul_mat(&w2, &h)?, &b2)?; // the partial sums are all-reduced here
    let graph = ctx.build_forward_expand(&y)?;

    let _buffer = backend::alloc_ctx_tensors(&ctx, &two)?; // one slice per device
    for (i, w) in [&w1, &b1, &w2, &b2, &x].into_iter().enumerate() {
        let n = w.nelements() as usize;
        w.set_f32(
            &(0..n)
                .map(|k| ((k * 31 + i * 7) % 17) as f32 / 17.0 - 0.5)
                .collect::<Vec<_>>(),
        )?;
    }
    two.graph_compute(&graph)?;
    let split = y.get_f32()?; // gathered from the devices

    // The same graph on one CPU stream.
    let one = backend::cpu_init()?;
    one.set_n_threads(1)?;
    let ctx1 = Context::init(1 << 20, true)?;
    let ws: Vec<Tensor> = [&w1, &b1, &w2, &b2, &x]
        .iter()
        .map(|w| ctx1.new_tensor(Type::F32, &Tensor::ne(w)))
        .collect::<ggml::Result<_>>()?;
    let h1 = ctx1.gelu(&ctx1.add(&ctx1.mul_mat(&ws[0], &ws[4])?, &ws[1])?)?;
    let y1 = ctx1.add(&ctx1.mul_mat(&ws[2], &h1)?, &ws[3])?;
    let g1 = ctx1.build_forward_expand(&y1)?;
    let _b1 = backend::alloc_ctx_tensors(&ctx1, &one)?;
    for (dst, src) in ws.iter().zip([&w1, &b1, &w2, &b2, &x]) {
        dst.set_f32(&src.get_f32()?)?;
    }
    one.graph_compute(&g1)?;
    let whole = y1.get_f32()?;

    let max_diff = split
        .iter()
        .zip(&whole)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    println!("{}: y[0..4] = {:?}", meta.name(), &split[..4]);
    println!("one CPU:       y[0..4] = {:?}", &whole[..4]);
    let scale = whole.iter().fold(0f32, |m, v| m.max(v.abs()));
    let rel = max_diff / scale;
    println!(
        "largest difference {rel:e} of the largest value (the second layer's sums are reordered)"
    );
    assert!(rel < 1e-5);
    Ok(())
}
