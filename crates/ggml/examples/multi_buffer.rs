//! `ggml_backend_multi_buffer_alloc_buffer`: one buffer that owns several.
//!
//! Run with `cargo run --example multi_buffer`.

use ggml::{backend, BufferUsage, Context, Type};

fn main() -> ggml::Result<()> {
    let cpu = backend::cpu_init()?;
    let ctx1 = Context::init(1024, true)?;
    let ctx2 = Context::init(2048, true)?;
    let a = ctx1.new_tensor_1d(Type::F32, 10)?;
    let b = ctx2.new_tensor_1d(Type::F32, 20)?;
    let buf1 = backend::alloc_ctx_tensors(&ctx1, &cpu)?;
    let buf2 = backend::alloc_ctx_tensors(&ctx2, &cpu)?;
    println!(
        "buf1: {} bytes, buf2: {} bytes",
        buf1.get_size(),
        buf2.get_size()
    );

    let multi = backend::multi_buffer_alloc_buffer(vec![buf1, buf2])?;
    assert!(multi.is_multi_buffer());
    println!(
        "multi-buffer {:?}: {} bytes in {} parts, host memory: {}",
        multi.name(),
        multi.get_size(),
        multi.parts().len(),
        multi.is_host()
    );

    multi.set_usage(BufferUsage::Weights);
    let usages: Vec<_> = multi.parts().iter().map(|p| p.get_usage()).collect();
    println!("usage set on the multi-buffer reaches every part: {usages:?}");

    multi.clear(0)?;
    a.set_f32(&[1.5; 10])?;
    b.set_f32(&[2.5; 20])?;
    println!("a[0] = {}, b[19] = {}", a.get_f32()?[0], b.get_f32()?[19]);

    let parts = multi.parts().to_vec();
    multi.free();
    println!(
        "freed the multi-buffer; its parts are freed too: {:?}",
        parts.iter().map(|p| p.is_freed()).collect::<Vec<_>>()
    );
    match a.get_f32() {
        Err(e) => println!("reading a tensor of a freed buffer is an error: {e}"),
        Ok(_) => unreachable!("a freed buffer cannot be read"),
    }
    Ok(())
}
