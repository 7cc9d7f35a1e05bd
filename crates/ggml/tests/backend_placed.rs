//! The interface open to device memory, seen from a host device: capabilities come from the
//! implementation; `graph_compute_at` computes nodes whose bytes are where the caller says
//! (another buffer than their own), and refuses places that are missing or do not fit.

mod common_backend;

use common_backend::{expect_err, input, TestDevice};
use ggml::backend::{self, alloc_ctx_tensors};
use ggml::{Context, DeviceCaps, Type};

#[test]
fn capabilities_are_the_implementations() {
    let caps = DeviceCaps {
        async_compute: false,
        host_buffer: false,
        buffer_from_host_ptr: false,
        events: false,
    };
    let dev = TestDevice::builder("CapsDev").caps(caps).build();
    assert_eq!(dev.get_props().caps, caps);
    let plain = TestDevice::builder("PlainDev").build();
    assert_eq!(plain.get_props().caps, DeviceCaps::default());
    assert!(DeviceCaps::default().async_compute && DeviceCaps::default().events);
}

#[test]
fn graph_compute_at_computes_on_memory_the_caller_places() {
    let cpu = backend::cpu_init().unwrap();
    // The graph's own memory, which must stay untouched.
    let ctx = Context::init(1 << 20, true).unwrap();
    let x = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    let y = ctx.scale(&ctx.relu(&x).unwrap(), 2.0).unwrap();
    let r = y.src(0).unwrap().clone();
    let g = ctx.build_forward_expand(&y).unwrap();
    let own = alloc_ctx_tensors(&ctx, &cpu).unwrap();
    x.set_f32(&[5.0; 16]).unwrap();
    y.set_f32(&[7.0; 16]).unwrap();

    // A mirror: another buffer holding x, relu(x) and y at offsets of our choosing.
    let mctx = Context::init(1 << 20, true).unwrap();
    let (mx, mr, my) = (
        mctx.new_tensor_1d(Type::F32, 16).unwrap(),
        mctx.new_tensor_1d(Type::F32, 16).unwrap(),
        mctx.new_tensor_1d(Type::F32, 16).unwrap(),
    );
    let mirror = alloc_ctx_tensors(&mctx, &cpu).unwrap();
    let xs = input(16, 3);
    mx.set_f32(&xs).unwrap();
    let at = |t: &ggml::Tensor| t.data_offset().unwrap();
    let (ox, or, oy) = (at(&mx), at(&mr), at(&my));
    cpu.graph_compute_at(&g.nodes(), |t| {
        let off = if *t == x {
            ox
        } else if *t == r {
            or
        } else if *t == y {
            oy
        } else {
            return None;
        };
        Some((mirror.clone(), off))
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|v| 2.0 * v.max(0.0)).collect();
    assert_eq!(my.get_f32().unwrap(), want);
    assert_eq!(y.get_f32().unwrap(), vec![7.0; 16], "own memory untouched");
    assert_eq!(x.get_f32().unwrap(), vec![5.0; 16]);

    // No place for a tensor; a place its bytes do not fit in.
    expect_err(
        cpu.graph_compute_at(&g.nodes(), |t| (*t != r).then(|| (mirror.clone(), 0))),
        &["graph_compute_at", "no place"],
    );
    let end = mirror.get_size() - 8;
    expect_err(
        cpu.graph_compute_at(&g.nodes(), |_| Some((mirror.clone(), end))),
        &["does not fit", "64 bytes at offset"],
    );
    // A device that cannot use the buffer type is refused before anything is queued.
    let dev = TestDevice::builder("PlacedDev").build().init(None).unwrap();
    expect_err(
        dev.graph_compute_at(&g.nodes(), |_| Some((own.clone(), 0))),
        &["cannot use tensors in buffer type CPU"],
    );
}
