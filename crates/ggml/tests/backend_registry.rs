//! The global registry with devices implemented in this file's helpers (through the public
//! traits): `register` of a second registry, `device_register`, lookups and `init_*` afterwards,
//! a graph computed on the new GPU-typed device, what it refuses, and copies between it and the
//! CPU in stream order.
//!
//! The registry is process-wide, so everything that changes it runs in one test, in order, in
//! this binary of its own.

mod common_backend;

use common_backend::{
    assert_close, bytes_f32, expect_err, f32_bytes, input, test_registry, Hold, TestDevice,
};
use ggml::backend::{self, alloc_ctx_tensors};
use ggml::{Context, DeviceType, Error, Type};

#[test]
fn registering_a_test_registry_and_device_and_computing_on_them() {
    // ---- before: only the CPU
    let (n_regs, n_devs) = (backend::reg_count(), backend::dev_count());
    assert_eq!(backend::init_best().unwrap().name(), "CPU");
    assert!(backend::dev_by_type(DeviceType::Gpu).is_none());
    let cpu_dev = backend::dev_by_type(DeviceType::Cpu).unwrap();

    // ---- register a registry holding a GPU-typed device
    let accel = TestDevice::builder("TestAccel")
        .dev_type(DeviceType::Gpu)
        .build();
    let reg = test_registry("TestReg", vec![accel.clone()]);
    backend::register(reg.clone());
    assert_eq!(backend::reg_count(), n_regs + 1);
    assert_eq!(backend::dev_count(), n_devs + 1);
    assert_eq!(backend::reg_by_name("testreg"), Some(reg.clone()));
    assert_eq!(backend::reg_by_name("TESTREG").unwrap().name(), "TestReg");
    assert_eq!(
        backend::reg_get(backend::reg_count() - 1).unwrap().name(),
        "CPU",
        "the CPU registry stays last"
    );
    assert_eq!(reg.dev_count(), 1);
    assert_eq!(reg.dev_get(0), Some(accel.clone()));
    assert!(reg.dev_get(1).is_none());
    assert_eq!(reg.features(), vec![("TEST".to_string(), "1".to_string())]);
    assert_eq!(
        backend::dev_get(0),
        Some(accel.clone()),
        "GPUs before the CPU"
    );
    assert_eq!(backend::dev_by_name("testaccel"), Some(accel.clone()));
    assert_eq!(backend::dev_by_name("TESTACCEL"), Some(accel.clone()));
    assert_eq!(backend::dev_by_type(DeviceType::Gpu), Some(accel.clone()));
    assert_eq!(backend::dev_by_type(DeviceType::Cpu), Some(cpu_dev.clone()));
    // registering again changes nothing
    backend::register(reg.clone());
    backend::device_register(accel.clone());
    assert_eq!(
        (backend::reg_count(), backend::dev_count()),
        (n_regs + 1, n_devs + 1)
    );

    // ---- a device registered on its own
    let igpu = TestDevice::builder("TestIgpu")
        .dev_type(DeviceType::Igpu)
        .build();
    backend::device_register(igpu.clone());
    backend::device_register(igpu.clone());
    assert_eq!(backend::dev_count(), n_devs + 2);
    assert_eq!(backend::reg_count(), n_regs + 1, "no registry added");
    assert_eq!(backend::dev_by_name("testIGPU"), Some(igpu.clone()));
    assert_eq!(backend::dev_by_type(DeviceType::Igpu), Some(igpu.clone()));
    assert!(backend::devices().contains(&igpu));

    // ---- init_* now find them: the GPU is best
    let stream = backend::init_best().unwrap();
    assert_eq!(stream.name(), "TestAccel");
    assert_eq!(stream.get_device(), accel);
    assert_eq!(
        backend::init_by_type(DeviceType::Igpu, None)
            .unwrap()
            .get_device(),
        igpu
    );
    assert_eq!(
        backend::init_by_name("testaccel", None).unwrap().name(),
        "TestAccel"
    );
    assert_eq!(
        backend::init_by_type(DeviceType::Cpu, None).unwrap().name(),
        "CPU"
    );
    expect_err(
        backend::init_by_name("TestAccel", Some("turbo")),
        &["TestAccel", "\"turbo\""],
    );

    // ---- a graph on the new device, computed by its own loops
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 1).unwrap(); // tiled over a's rows
    let s = ctx.add(&a, &b).unwrap();
    let m = ctx.mul(&s, &a).unwrap();
    let buf = alloc_ctx_tensors(&ctx, &stream).unwrap();
    assert_eq!(buf.name(), "TestAccel");
    assert!(!buf.is_host());
    let (av, bv) = (input(32, 1), input(8, 2));
    a.set_f32(&av).unwrap();
    b.set_f32(&bv).unwrap();
    let g = ctx.build_forward_expand(&m).unwrap();
    stream.graph_compute(&g).unwrap();
    let reference = |av: &[f32]| -> Vec<f64> {
        (0..32)
            .map(|i| (av[i] as f64 + bv[i % 8] as f64) * av[i] as f64)
            .collect()
    };
    assert_close(&m.get_f32().unwrap(), &reference(&av), 1e-6);
    let sum: Vec<f64> = (0..32).map(|i| av[i] as f64 + bv[i % 8] as f64).collect();
    assert_close(&s.get_f32().unwrap(), &sum, 1e-6);

    // ---- what it cannot do
    assert!(accel.supports_op(&s) && accel.supports_op(&m));
    assert!(accel.offload_op(&m) && !accel.offload_op(&s));
    let r = ctx.relu(&a).unwrap();
    let mm = ctx.mul_mat(&a, &a).unwrap();
    let sm = ctx.soft_max(&a).unwrap();
    for op in [&r, &mm, &sm] {
        assert!(!accel.supports_op(op), "{op:?}");
        assert!(cpu_dev.supports_op(op), "{op:?}");
    }
    let ctx_r = Context::init(1 << 20, true).unwrap();
    let r2 = ctx_r.relu(&m).unwrap();
    r2.set_name("r2");
    alloc_ctx_tensors(&ctx_r, &stream).unwrap();
    let e = expect_err(
        stream.graph_compute(&ctx_r.build_forward_expand(&r2).unwrap()),
        &["TestAccel", "\"r2\"", "UNARY", "not supported"],
    );
    assert!(matches!(e, Error::Unsupported(_)));

    // ---- copies between the CPU and the device, in stream order
    let cpu = backend::cpu_init().unwrap();
    let host = Context::init(1 << 20, false).unwrap();
    let x = host.new_tensor_2d(Type::F32, 8, 4).unwrap();
    let back = host.dup_tensor(&m).unwrap();
    let neg = host.neg(&back).unwrap();
    let gneg = host.build_forward_expand(&neg).unwrap();
    x.set_f32(&[0.0; 32]).unwrap();
    let xv = input(32, 3);

    let hold = Hold::new(&cpu);
    cpu.tensor_set_async(&x, f32_bytes(&xv), 0).unwrap(); // queued on the held CPU stream
    backend::tensor_copy_async(&cpu, &stream, &x, &a).unwrap(); // after it: CPU -> device
    stream.graph_compute_async(&g).unwrap(); // after the copy
    backend::tensor_copy_async(&stream, &cpu, &m, &back).unwrap(); // device -> CPU
    cpu.graph_compute_async(&gneg).unwrap(); // after the copy back
    let got = cpu.tensor_get_async(&neg, 0, 32 * 4).unwrap();
    assert!(!got.is_ready());
    hold.release();
    let want: Vec<f64> = reference(&xv).iter().map(|v| -v).collect();
    assert_close(&bytes_f32(&got.wait().unwrap()), &want, 1e-6);
    stream.synchronize().unwrap();
    cpu.synchronize().unwrap();
    assert_eq!(a.get_f32().unwrap(), xv);

    // ---- events between the device's stream and the CPU's
    let ev = ggml::Event::new(&accel).unwrap();
    let hold = Hold::new(&stream);
    a.set_f32(&av).unwrap(); // nothing queued on a's buffer yet: at once
    stream.graph_compute_async(&g).unwrap();
    ev.record(&stream).unwrap();
    cpu.event_wait(&ev).unwrap();
    backend::tensor_copy_async(&cpu, &cpu, &m, &back).unwrap();
    let got = cpu.tensor_get_async(&back, 0, 32 * 4).unwrap();
    assert!(!got.is_ready() && !ev.is_signalled());
    hold.release();
    ev.synchronize().unwrap();
    assert_close(&bytes_f32(&got.wait().unwrap()), &reference(&av), 1e-6);
    cpu.synchronize().unwrap();
}
