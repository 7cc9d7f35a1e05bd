//! Buffers, buffer types, multi-buffers and placing tensors: every property read back, bytes
//! checked after clear/set, ownership of multi-buffer parts, and the errors of each call.

mod common_backend;

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use common_backend::{expect_err, test_buft, TestDevice, TEST_ALIGN};
use ggml::backend::{
    self, alloc_ctx_tensors, alloc_ctx_tensors_from_buft, tensor_alloc, view_init,
};
use ggml::{Buffer, BufferUsage, Context, Status, Tensor, Type};

/// A `no_alloc` context for metadata only.
fn meta_ctx() -> Context {
    Context::init(1 << 20, true).unwrap()
}

/// The bytes of `t`, asserting they all equal `value`.
#[track_caller]
fn assert_all_bytes(t: &Tensor, value: u8) {
    let bytes = t.to_bytes().unwrap();
    assert!(!bytes.is_empty());
    assert!(
        bytes.iter().all(|&b| b == value),
        "tensor {:?}: expected every byte {value:#x}, got {:?}",
        t.name(),
        &bytes[..bytes.len().min(16)]
    );
}

#[test]
fn cpu_buffer_type_and_buffer_properties() {
    let buft = backend::cpu_buffer_type();
    assert_eq!(buft.name(), "CPU");
    assert_eq!(buft.get_alignment(), 32);
    assert_eq!(buft.get_max_size(), usize::MAX);
    assert!(buft.is_host());
    assert_eq!(buft, backend::cpu_buffer_type(), "one CPU buffer type");

    let buf = buft.alloc_buffer(1000).unwrap();
    assert_eq!(buf.name(), "CPU");
    assert_eq!(buf.get_size(), 1000);
    assert_eq!(buf.get_type(), buft);
    assert_eq!(buf.get_alignment(), 32);
    assert_eq!(buf.get_max_size(), usize::MAX);
    assert!(buf.is_host());
    assert!(!buf.is_multi_buffer());
    assert!(buf.parts().is_empty());
    assert!(!buf.is_freed());
    let base = buf.get_base().expect("a CPU buffer has a host base");
    assert_eq!(base.as_ptr() as usize % 32, 0, "base aligned to 32");

    // usage is a plain tag
    assert_eq!(buf.get_usage(), BufferUsage::Any);
    buf.set_usage(BufferUsage::Weights);
    assert_eq!(buf.get_usage(), BufferUsage::Weights);
    buf.set_usage(BufferUsage::Compute);
    assert_eq!(buf.get_usage(), BufferUsage::Compute);
    assert_eq!(BufferUsage::Any as u8, 0);
    assert_eq!(BufferUsage::Weights as u8, 1);
    assert_eq!(BufferUsage::Compute as u8, 2);

    // clear really sets every byte: read them back through a tensor spanning the buffer
    let ctx = meta_ctx();
    let all = ctx.new_tensor_1d(Type::I8, 1000).unwrap();
    assert_eq!(buf.get_alloc_size(&all), 1000);
    assert_eq!(buft.get_alloc_size(&all), 1000);
    all.set_name("all");
    tensor_alloc(&buf, &all, 0).unwrap();
    for value in [0xAB, 0x00, 0x5C] {
        buf.clear(value).unwrap();
        assert_all_bytes(&all, value);
    }
    buf.reset().unwrap();
    assert_all_bytes(&all, 0x5C); // reset drops per-tensor state, not data

    // an empty buffer
    let empty = buft.alloc_buffer(0).unwrap();
    assert_eq!(empty.get_size(), 0);
    assert!(empty.get_base().is_none(), "an empty buffer has no base");
    empty.clear(1).unwrap();
    empty.reset().unwrap();

    // free: the flag, and every later use is an Err naming the buffer
    buf.clone().free();
    assert!(buf.is_freed());
    assert!(buf.get_base().is_none());
    expect_err(buf.clear(0), &["clear", "CPU", "1000 bytes", "freed"]);
    expect_err(buf.reset(), &["reset", "CPU", "freed"]);
    expect_err(all.to_bytes(), &["tensor_get", "freed"]);
    expect_err(all.set_bytes(&[1, 2, 3], 0), &["tensor_set", "freed"]);
    expect_err(
        backend::tensor_memset(&all, 0, 0, 10),
        &["tensor_memset", "freed"],
    );
    let late = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let e = expect_err(tensor_alloc(&buf, &late, 0), &["tensor_alloc", "freed"]);
    assert!(matches!(e, ggml::Error::Freed(_)));
}

#[test]
fn tensor_memset_and_sync_set_get() {
    let ctx = Context::init(1 << 16, false).unwrap();
    let t = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    t.set_name("t");
    let v: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    backend::tensor_set(&t, &common_backend::f32_bytes(&v), 0).unwrap();
    let mut out = vec![0u8; 32];
    backend::tensor_get(&t, &mut out, 0).unwrap();
    assert_eq!(common_backend::bytes_f32(&out), v);

    // partial set/get at an offset
    backend::tensor_set(&t, &common_backend::f32_bytes(&[-1.0, -2.0]), 8).unwrap();
    let mut part = vec![0u8; 12];
    backend::tensor_get(&t, &mut part, 4).unwrap();
    assert_eq!(common_backend::bytes_f32(&part), vec![1.5, -1.0, -2.0]);

    // memset of a middle range
    backend::tensor_memset(&t, 0, 4, 8).unwrap();
    let got = t.get_f32().unwrap();
    assert_eq!(got, vec![0.5, 0.0, 0.0, -2.0, 4.5, 5.5, 6.5, 7.5]);

    // out of range, each naming the offset, size and tensor size
    expect_err(
        backend::tensor_set(&t, &[0u8; 8], 28),
        &["tensor_set", "offset 28", "size 8", "\"t\"", "32 bytes"],
    );
    expect_err(
        backend::tensor_get(&t, &mut [0u8; 33], 0),
        &["tensor_get", "size 33", "32 bytes"],
    );
    expect_err(
        backend::tensor_memset(&t, 0, 30, 4),
        &["tensor_memset", "offset 30", "size 4"],
    );
    expect_err(
        backend::tensor_set(&t, &[0u8; 1], usize::MAX),
        &["tensor_set", "past the end"],
    );
    // the failed calls changed nothing
    assert_eq!(t.get_f32().unwrap()[0], 0.5);
}

#[test]
fn alloc_ctx_tensors_gives_one_buffer_with_views_initialised() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = meta_ctx();
    let a = ctx.new_tensor_1d(Type::F32, 10).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 4, 5).unwrap();
    let v = ctx.view_1d(&b, 3, 8).unwrap(); // elements 2..5 of b
    assert!(!a.is_allocated() && !b.is_allocated() && !v.is_allocated());

    let buf = alloc_ctx_tensors(&ctx, &cpu).unwrap();
    assert!(!buf.is_multi_buffer());
    assert_eq!(buf.name(), "CPU");
    // 40 bytes padded to 64, then 80 padded to 96
    assert_eq!(buf.get_size(), 64 + 96);
    assert_eq!(a.buffer(), Some(buf.clone()));
    assert_eq!(b.buffer(), Some(buf.clone()));
    assert_eq!(v.buffer(), Some(buf.clone()));
    assert_eq!(a.data_offset(), Some(0));
    assert_eq!(b.data_offset(), Some(64));
    assert_eq!(v.data_offset(), Some(64 + 8));

    let bv: Vec<f32> = (0..20).map(|i| i as f32 * 1.25).collect();
    b.set_f32(&bv).unwrap();
    a.set_f32(&[3.0; 10]).unwrap();
    assert_eq!(v.get_f32().unwrap(), bv[2..5].to_vec());
    assert_eq!(a.get_f32().unwrap(), vec![3.0; 10]);

    // all allocated now: nothing left to allocate is an Err
    expect_err(
        alloc_ctx_tensors(&ctx, &cpu),
        &["alloc_ctx_tensors", "no tensor"],
    );
    // a context that owns its data
    let owning = Context::init(1 << 16, false).unwrap();
    owning.new_tensor_1d(Type::F32, 4).unwrap();
    expect_err(
        alloc_ctx_tensors(&owning, &cpu),
        &["alloc_ctx_tensors", "no_alloc = false"],
    );
}

#[test]
fn alloc_ctx_tensors_past_max_size_gives_a_multi_buffer_of_whole_tensors() {
    let (buft, probe) = test_buft("Small", 256, true);
    let ctx = meta_ctx();
    let a = ctx.new_tensor_1d(Type::F32, 10).unwrap(); // 40 -> 64
    let b = ctx.new_tensor_1d(Type::F32, 30).unwrap(); // 120 -> 128
    let c = ctx.new_tensor_1d(Type::F32, 20).unwrap(); // 80 -> 96
    let big = ctx.new_tensor_1d(Type::F32, 100).unwrap(); // 400 -> 416, alone and oversize
    let s = ctx.add(&a, &a).unwrap(); // 40 -> 64
    let tensors = [&a, &b, &c, &big, &s];

    let multi = alloc_ctx_tensors_from_buft(&ctx, &buft).unwrap();
    assert!(multi.is_multi_buffer());
    assert_eq!(multi.name(), "Small");
    assert_eq!(multi.get_type(), buft);
    assert!(multi.is_host());
    assert!(multi.get_base().is_none(), "a multi-buffer has no base");
    assert_eq!(probe.allocs(), vec![192, 96, 416, 64]);
    assert_eq!(multi.get_size(), 192 + 96 + 416 + 64);
    let parts = multi.parts().to_vec();
    assert_eq!(parts.len(), 4);
    let part_of = |t: &Tensor| {
        let buf = t.buffer().unwrap();
        parts
            .iter()
            .position(|p| *p == buf)
            .expect("tensor in a part")
    };
    assert_eq!(
        tensors.iter().map(|t| part_of(t)).collect::<Vec<_>>(),
        vec![0, 0, 1, 2, 3]
    );
    assert_eq!(
        tensors
            .iter()
            .map(|t| t.data_offset().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 64, 0, 0, 0]
    );
    for t in tensors {
        // whole tensors: every byte within its part, offsets aligned
        let part = &parts[part_of(t)];
        let off = t.data_offset().unwrap();
        assert_eq!(off % TEST_ALIGN, 0);
        assert!(off + t.nbytes() <= part.get_size());
        assert!(part.get_size() <= 256 || part.get_size() == 416);
    }

    // distinct data in every tensor survives the neighbours' writes
    let want: Vec<Vec<f32>> = tensors
        .iter()
        .enumerate()
        .map(|(k, t)| common_backend::input(t.nelements() as usize, k as u32))
        .collect();
    for (t, w) in tensors.iter().zip(&want) {
        t.set_f32(w).unwrap();
    }
    for (t, w) in tensors.iter().zip(&want) {
        assert_eq!(&t.get_f32().unwrap(), w);
    }

    // the CPU computes across parts (it supports host buffer types)
    let cpu = backend::cpu_init().unwrap();
    let g = ctx.build_forward_expand(&s).unwrap();
    cpu.graph_compute(&g).unwrap();
    let want_s: Vec<f32> = want[0].iter().map(|x| x + x).collect();
    assert_eq!(s.get_f32().unwrap(), want_s);

    // usage, clear and free reach every part
    multi.set_usage(BufferUsage::Weights);
    assert!(parts.iter().all(|p| p.get_usage() == BufferUsage::Weights));
    multi.multi_buffer_set_usage(BufferUsage::Compute).unwrap();
    assert_eq!(multi.get_usage(), BufferUsage::Compute);
    assert!(parts.iter().all(|p| p.get_usage() == BufferUsage::Compute));
    multi.clear(0x3C).unwrap();
    for t in tensors {
        assert_all_bytes(t, 0x3C);
    }
    multi.reset().unwrap();
    assert_eq!(
        probe.resets.load(Ordering::SeqCst),
        4,
        "reset reaches every part"
    );
    multi.clone().free();
    assert!(multi.is_freed());
    assert!(parts.iter().all(Buffer::is_freed));
    for t in tensors {
        expect_err(t.get_f32(), &["freed"]);
    }
    expect_err(multi.clear(0), &["freed"]);
}

#[test]
fn alloc_ctx_tensors_from_a_backend_with_a_small_buffer_type() {
    let (buft, probe) = test_buft("SmallDev", 128, false);
    let dev = TestDevice::builder("SmallDev").buft(buft.clone()).build();
    let stream = dev.init(None).unwrap();
    let ctx = meta_ctx();
    let x = ctx.new_tensor_1d(Type::F32, 24).unwrap(); // 96
    let y = ctx.new_tensor_1d(Type::F32, 24).unwrap(); // 96
    let z = ctx.add(&x, &y).unwrap(); // 96
    let buf = alloc_ctx_tensors(&ctx, &stream).unwrap();
    assert!(buf.is_multi_buffer());
    assert!(!buf.is_host());
    assert_eq!(probe.allocs(), vec![96, 96, 96]);
    let xv = common_backend::input(24, 1);
    let yv = common_backend::input(24, 2);
    x.set_f32(&xv).unwrap();
    y.set_f32(&yv).unwrap();
    stream
        .graph_compute(&ctx.build_forward_expand(&z).unwrap())
        .unwrap();
    let want: Vec<f32> = xv.iter().zip(&yv).map(|(a, b)| a + b).collect();
    assert_eq!(z.get_f32().unwrap(), want);
}

#[test]
fn alloc_ctx_tensors_failure_frees_and_unbinds_everything() {
    let (buft, probe) = test_buft("Refusing", 64, true);
    let ctx = meta_ctx();
    let a = ctx.new_tensor_1d(Type::F32, 16).unwrap(); // 64: a buffer of its own
    let b = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    b.set_name("refuse"); // init_tensor fails for it
    let c = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    expect_err(
        alloc_ctx_tensors_from_buft(&ctx, &buft),
        &["init_tensor", "refuse"],
    );
    assert!(!a.is_allocated() && !b.is_allocated() && !c.is_allocated());
    assert_eq!(probe.allocs(), vec![64, 64]);
    expect_err(a.get_f32(), &["tensor_get", "has no memory"]);
}

#[test]
fn multi_buffer_alloc_buffer_owns_its_parts() {
    // the seed example
    let cpu = backend::cpu_init().unwrap();
    let ctx1 = Context::init(1024, true).unwrap();
    let ctx2 = Context::init(2048, true).unwrap();
    let a = ctx1.new_tensor_1d(Type::F32, 10).unwrap();
    let b = ctx2.new_tensor_1d(Type::F32, 20).unwrap();
    let buf1 = alloc_ctx_tensors(&ctx1, &cpu).unwrap();
    let buf2 = alloc_ctx_tensors(&ctx2, &cpu).unwrap();
    let multi = backend::multi_buffer_alloc_buffer(vec![buf1.clone(), buf2.clone()]).unwrap();
    assert!(multi.is_multi_buffer());
    assert!(!buf1.is_multi_buffer());
    assert_eq!(multi.get_size(), buf1.get_size() + buf2.get_size());
    assert_eq!(multi.get_size(), 64 + 96);
    assert_eq!(multi.parts(), &[buf1.clone(), buf2.clone()]);
    assert_eq!(multi.name(), "CPU");
    assert!(multi.is_host());
    assert_eq!(multi.get_usage(), BufferUsage::Any);

    // tensors stay in their parts
    assert_eq!(a.buffer(), Some(buf1.clone()));
    a.set_f32(&[1.5; 10]).unwrap();
    b.set_f32(&[2.5; 20]).unwrap();
    assert_eq!(a.get_f32().unwrap(), vec![1.5; 10]);

    multi.clear(0xEE).unwrap();
    assert_all_bytes(&a, 0xEE);
    assert_all_bytes(&b, 0xEE);
    multi.set_usage(BufferUsage::Weights);
    assert_eq!(
        (buf1.get_usage(), buf2.get_usage()),
        (BufferUsage::Weights, BufferUsage::Weights)
    );
    multi.multi_buffer_set_usage(BufferUsage::Compute).unwrap();
    assert_eq!(
        (buf1.get_usage(), buf2.get_usage()),
        (BufferUsage::Compute, BufferUsage::Compute)
    );
    // a part's own usage can still be changed alone
    buf2.set_usage(BufferUsage::Any);
    assert_eq!(buf1.get_usage(), BufferUsage::Compute);

    multi.free();
    assert!(
        buf1.is_freed() && buf2.is_freed(),
        "freeing the multi frees the parts"
    );
    expect_err(a.get_f32(), &["freed"]);
    expect_err(b.set_f32(&[0.0; 20]), &["freed"]);
}

#[test]
fn multi_buffer_errors() {
    let buft = backend::cpu_buffer_type();
    let e = expect_err(
        backend::multi_buffer_alloc_buffer(Vec::new()),
        &["multi_buffer_alloc_buffer", "empty"],
    );
    assert_eq!(e.status(), Status::Failed);

    let b1 = buft.alloc_buffer(64).unwrap();
    let b2 = buft.alloc_buffer(32).unwrap();
    expect_err(
        backend::multi_buffer_alloc_buffer(vec![b1.clone(), b2.clone(), b1.clone()]),
        &["buffers[2]", "buffers[0]", "same buffer"],
    );
    let freed = buft.alloc_buffer(16).unwrap();
    freed.clone().free();
    expect_err(
        backend::multi_buffer_alloc_buffer(vec![b1.clone(), freed]),
        &["buffers[1]", "freed"],
    );
    let m = backend::multi_buffer_alloc_buffer(vec![b1.clone(), b2.clone()]).unwrap();
    let b3 = buft.alloc_buffer(16).unwrap();
    expect_err(
        backend::multi_buffer_alloc_buffer(vec![b3, m.clone()]),
        &["buffers[1]", "multi-buffer"],
    );
    // the failed calls did not take ownership of anything
    assert!(!b1.is_freed() && !b2.is_freed());

    let plain = buft.alloc_buffer(48).unwrap();
    expect_err(
        plain.multi_buffer_set_usage(BufferUsage::Weights),
        &[
            "multi_buffer_set_usage",
            "CPU",
            "48 bytes",
            "not a multi-buffer",
        ],
    );
    assert_eq!(plain.get_usage(), BufferUsage::Any);
    m.multi_buffer_set_usage(BufferUsage::Weights).unwrap();
}

#[test]
fn tensor_alloc_and_view_init() {
    let (buft, probe) = test_buft("Probe", usize::MAX, true);
    let buf = buft.alloc_buffer(256).unwrap();
    assert_eq!(buf.get_alignment(), TEST_ALIGN);
    let ctx = meta_ctx();
    let t = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    t.set_name("t");
    tensor_alloc(&buf, &t, 64).unwrap();
    assert_eq!(t.buffer(), Some(buf.clone()));
    assert_eq!(t.data_offset(), Some(64));
    assert_eq!(probe.inits(), vec![("t".to_string(), 64)]);

    let v = ctx.view_1d(&t, 4, 8).unwrap();
    v.set_name("v");
    assert!(v.is_allocated(), "a view's bytes are its source's");
    view_init(&v).unwrap();
    assert_eq!(probe.inits()[1], ("v".to_string(), 72));
    let tv: Vec<f32> = (0..8).map(|i| 10.0 + i as f32).collect();
    t.set_f32(&tv).unwrap();
    assert_eq!(v.get_f32().unwrap(), tv[2..6].to_vec());
    v.set_f32(&[0.0; 4]).unwrap();
    assert_eq!(t.get_f32().unwrap()[1..7], [11.0, 0.0, 0.0, 0.0, 0.0, 16.0]);

    buf.reset().unwrap();
    assert_eq!(probe.resets.load(Ordering::SeqCst), 1);

    // errors
    expect_err(
        tensor_alloc(&buf, &t, 0),
        &["tensor_alloc", "\"t\"", "already allocated"],
    );
    let big = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    big.set_name("big");
    let e = expect_err(
        tensor_alloc(&buf, &big, 32),
        &[
            "tensor_alloc",
            "\"big\"",
            "256 bytes at offset 32",
            "256 bytes",
        ],
    );
    assert_eq!(e.status(), Status::AllocFailed);
    assert!(!big.is_allocated());
    expect_err(
        tensor_alloc(&buf, &v, 0),
        &["tensor_alloc", "\"v\"", "view"],
    );
    expect_err(view_init(&t), &["view_init", "\"t\"", "not a view"]);
    let loose = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    loose.set_name("loose");
    let lv = ctx.view_1d(&loose, 2, 0).unwrap();
    expect_err(view_init(&lv), &["view_init", "\"loose\"", "not allocated"]);

    let refused = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    refused.set_name("refuse");
    expect_err(tensor_alloc(&buf, &refused, 128), &["refuse", "offset 128"]);
    assert!(
        !refused.is_allocated(),
        "a failed tensor_alloc leaves the tensor unallocated"
    );

    let cpu = backend::cpu_buffer_type();
    let m = backend::multi_buffer_alloc_buffer(vec![cpu.alloc_buffer(64).unwrap()]).unwrap();
    let other = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    expect_err(
        tensor_alloc(&m, &other, 0),
        &["tensor_alloc", "multi-buffer"],
    );
}

#[test]
fn buffer_from_host_ptr_wraps_memory_the_test_owns() {
    let cpu = backend::cpu_init().unwrap();
    let dev = cpu.get_device();
    assert!(dev.get_props().caps.buffer_from_host_ptr);
    let mut host: Vec<f32> = (0..64).map(|i| i as f32 - 20.5).collect();
    let original = host.clone();
    let ptr = NonNull::new(host.as_mut_ptr() as *mut u8).unwrap();
    // SAFETY: `host` outlives the buffer and every tensor placed in it (all are dropped or
    // freed below before `host` is read again), and nothing else touches `host` meanwhile.
    let buf = unsafe { dev.buffer_from_host_ptr(ptr, 256, 256) }.unwrap();
    assert_eq!(buf.name(), "CPU_Mapped");
    assert_eq!(buf.get_size(), 256);
    assert!(buf.is_host());
    assert_eq!(
        buf.get_base(),
        Some(ptr),
        "no copy: the base is the caller's memory"
    );
    {
        let ctx = meta_ctx();
        let x = ctx.new_tensor_1d(Type::F32, 32).unwrap();
        let y = ctx.relu(&x).unwrap();
        tensor_alloc(&buf, &x, 0).unwrap();
        tensor_alloc(&buf, &y, 128).unwrap();
        assert_eq!(x.get_f32().unwrap(), original[..32].to_vec());
        cpu.graph_compute(&ctx.build_forward_expand(&y).unwrap())
            .unwrap();
        let relu: Vec<f32> = original[..32].iter().map(|v| v.max(0.0)).collect();
        assert_eq!(y.get_f32().unwrap(), relu);
        x.set_f32(&[7.0; 32]).unwrap();
    }
    buf.free();
    let relu: Vec<f32> = original[..32].iter().map(|v| v.max(0.0)).collect();
    assert_eq!(&host[..32], &[7.0; 32], "writes reach the caller's memory");
    assert_eq!(&host[32..], &relu[..], "results are computed in place");

    // a device without the capability refuses
    let other = TestDevice::builder("NoHostPtr").build();
    let mut mem = vec![0u8; 64];
    let p = NonNull::new(mem.as_mut_ptr()).unwrap();
    // SAFETY: `mem` outlives the call, which fails without creating a buffer.
    let r = unsafe { other.buffer_from_host_ptr(p, 64, 64) };
    expect_err(
        r,
        &[
            "buffer_from_host_ptr",
            "NoHostPtr",
            "cannot wrap host memory",
        ],
    );
}
