//! The CPU registry, device and backend as the global registry shows them, read only (tests
//! that register devices live in `backend_registry.rs`, a process of their own).

mod common_backend;

use common_backend::{expect_err, test_buft};
use ggml::backend;
use ggml::{Context, DeviceType, Event, Type};

/// The processor's model name as /proc/cpuinfo gives it, where it does.
fn cpuinfo_model_name() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

#[test]
fn the_cpu_registry_and_device_are_present() {
    let n_regs = backend::reg_count();
    assert!(n_regs >= 1);
    let cpu_reg = backend::reg_get(n_regs - 1).expect("the CPU registry is last");
    assert_eq!(cpu_reg.name(), "CPU");
    assert!(backend::reg_get(n_regs).is_none());
    assert!(backend::reg_get(usize::MAX).is_none());
    for name in ["CPU", "cpu", "Cpu"] {
        assert_eq!(backend::reg_by_name(name), Some(cpu_reg.clone()), "{name}");
    }
    assert!(backend::reg_by_name("CUDA").is_none());
    assert!(backend::reg_by_name("").is_none());
    assert_eq!(cpu_reg.dev_count(), 1);
    let dev = cpu_reg.dev_get(0).unwrap();
    assert!(cpu_reg.dev_get(1).is_none());
    assert_eq!(cpu_reg.devices(), vec![dev.clone()]);

    let n_devs = backend::dev_count();
    assert!(n_devs >= 1);
    assert!(backend::dev_get(n_devs).is_none());
    assert!(backend::dev_get(usize::MAX).is_none());
    assert_eq!(backend::devices().len(), n_devs);
    assert!(backend::devices().contains(&dev));
    for name in ["CPU", "cpu", "cPu"] {
        assert_eq!(backend::dev_by_name(name), Some(dev.clone()), "{name}");
    }
    assert!(backend::dev_by_name("CPU0").is_none());
    assert!(backend::dev_by_name(" cpu").is_none());
    assert_eq!(backend::dev_by_type(DeviceType::Cpu), Some(dev.clone()));
    for t in [
        DeviceType::Gpu,
        DeviceType::Igpu,
        DeviceType::Accel,
        DeviceType::Meta,
    ] {
        assert!(backend::dev_by_type(t).is_none(), "{t:?}");
    }
    let values = [
        DeviceType::Cpu as u32,
        DeviceType::Gpu as u32,
        DeviceType::Igpu as u32,
        DeviceType::Accel as u32,
        DeviceType::Meta as u32,
    ];
    assert_eq!(values, [0, 1, 2, 3, 4]);
}

#[test]
fn init_by_name_type_and_best_start_cpu_streams() {
    let dev = backend::dev_by_type(DeviceType::Cpu).unwrap();
    for b in [
        backend::cpu_init().unwrap(),
        backend::init_by_name("cpu", None).unwrap(),
        backend::init_by_type(DeviceType::Cpu, None).unwrap(),
        backend::init_best().unwrap(),
        dev.init(None).unwrap(),
    ] {
        assert_eq!(b.name(), "CPU");
        assert_eq!(b.get_device(), dev);
        // each is a working stream of its own
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_1d(Type::F32, 3).unwrap();
        let s = ctx.sqr(&a).unwrap();
        a.set_f32(&[1.5, -2.0, 3.0]).unwrap();
        b.graph_compute(&ctx.build_forward_expand(&s).unwrap())
            .unwrap();
        assert_eq!(s.get_f32().unwrap(), vec![2.25, 4.0, 9.0]);
        b.free();
    }
    expect_err(
        backend::init_by_name("NoSuchDevice", None),
        &["init_by_name", "\"NoSuchDevice\""],
    );
    expect_err(
        backend::init_by_type(DeviceType::Gpu, None),
        &["init_by_type", "Gpu"],
    );
}

#[test]
fn cpu_device_properties() {
    let dev = backend::cpu_init().unwrap().get_device();
    let props = dev.get_props();
    assert_eq!(props.name, "CPU");
    assert_eq!(dev.name(), "CPU");
    assert_eq!(props.dev_type, DeviceType::Cpu);
    assert_eq!(dev.dev_type(), DeviceType::Cpu);
    assert_eq!(props.description, dev.description());
    match cpuinfo_model_name() {
        Some(model) => assert_eq!(props.description, model),
        None => assert!(!props.description.is_empty()),
    }
    let (free, total) = dev.memory();
    assert!(total > 0, "total memory known");
    assert!(free <= total, "free {free} <= total {total}");
    assert_eq!(props.memory_total, total);
    assert!(props.memory_free <= props.memory_total);
    assert_eq!(props.device_id, None);
    assert!(props.caps.async_compute);
    assert!(props.caps.events);
    assert!(props.caps.buffer_from_host_ptr);
    assert!(!props.caps.host_buffer);
    assert!(dev.host_buffer_type().is_none());

    let buft = dev.buffer_type();
    assert_eq!(buft, backend::cpu_buffer_type());
    assert!(dev.supports_buft(&buft));
    let (device_mem, _) = test_buft("DeviceOnly", usize::MAX, false);
    let (host_mem, _) = test_buft("OtherHost", usize::MAX, true);
    assert!(!dev.supports_buft(&device_mem), "not host memory");
    assert!(dev.supports_buft(&host_mem), "any host buffer type");

    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    for op in [
        ctx.add(&a, &b).unwrap(),
        ctx.mul(&a, &b).unwrap(),
        ctx.relu(&a).unwrap(),
        ctx.soft_max(&a).unwrap(),
        ctx.mul_mat(&a, &b).unwrap(),
        ctx.transpose(&a).unwrap(),
        a.clone(),
    ] {
        assert!(dev.supports_op(&op), "{op:?}");
        assert!(!dev.offload_op(&op), "the CPU offloads nothing");
    }
    let _ = Event::new(&dev).unwrap();
}

#[test]
fn cpu_features_are_the_detected_ones() {
    let dev = backend::dev_by_name("CPU").unwrap();
    let reg = backend::reg_by_name("CPU").unwrap();
    let features = dev.features();
    assert_eq!(reg.features(), features);
    // the SIMD features with value "1", then the last-level cache's size where it is known
    let (simd, llc): (Vec<_>, Vec<_>) = features.iter().partition(|(n, _)| n != "LLC_BYTES");
    assert!(simd.iter().all(|(_, v)| v == "1"), "{simd:?}");
    assert!(llc.len() <= 1, "{llc:?}");
    for (_, bytes) in &llc {
        assert!(
            bytes.parse::<u64>().is_ok_and(|b| b > 0),
            "LLC_BYTES {bytes}"
        );
    }
    #[cfg(target_arch = "x86_64")]
    {
        assert!(
            !features.is_empty(),
            "x86-64 has at least SSE3 on any current processor"
        );
        let detected: Vec<&str> = [
            ("SSE3", std::arch::is_x86_feature_detected!("sse3")),
            ("SSSE3", std::arch::is_x86_feature_detected!("ssse3")),
            ("AVX", std::arch::is_x86_feature_detected!("avx")),
            ("AVX2", std::arch::is_x86_feature_detected!("avx2")),
            ("F16C", std::arch::is_x86_feature_detected!("f16c")),
            ("FMA", std::arch::is_x86_feature_detected!("fma")),
            ("AVX512", std::arch::is_x86_feature_detected!("avx512f")),
        ]
        .into_iter()
        .filter_map(|(n, on)| on.then_some(n))
        .collect();
        for name in &detected {
            assert!(
                features.iter().any(|(n, _)| n == name),
                "{name} is detected but not listed in {features:?}"
            );
        }
        for (name, _) in &simd {
            let known = [
                "SSE3",
                "SSSE3",
                "AVX",
                "AVX_VNNI",
                "AVX2",
                "F16C",
                "FMA",
                "BMI2",
                "AVX512",
                "AVX512_VBMI",
                "AVX512_VNNI",
                "AVX512_BF16",
                "AMX_INT8",
            ];
            assert!(known.contains(&name.as_str()), "unexpected feature {name}");
        }
        // AMX_INT8 (listed only where Linux also granted the tile state) only on a CPU with it
        if features.iter().any(|(n, _)| n == "AMX_INT8") {
            let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            let flags: Vec<&str> = info
                .lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.split_whitespace().collect())
                .unwrap_or_default();
            assert!(
                flags.contains(&"amx_tile") && flags.contains(&"amx_int8"),
                "AMX_INT8 listed on a CPU without amx_tile/amx_int8: {flags:?}"
            );
        }
    }
}

#[test]
fn the_test_device_reports_what_it_implements() {
    // a device made outside the crate, not registered: its handle says what its traits say
    let (buft, _) = test_buft("Accel", usize::MAX, false);
    let dev = common_backend::TestDevice::builder("Accel")
        .dev_type(DeviceType::Accel)
        .buft(buft.clone())
        .build();
    let props = dev.get_props();
    assert_eq!(props.name, "Accel");
    assert_eq!(props.dev_type, DeviceType::Accel);
    assert_eq!((props.memory_free, props.memory_total), (1 << 20, 2 << 20));
    assert_eq!(props.device_id.as_deref(), Some("0000:00:00.0"));
    assert!(props.caps.async_compute && props.caps.events);
    assert!(!props.caps.buffer_from_host_ptr && !props.caps.host_buffer);
    assert_eq!(dev.buffer_type(), buft);
    assert_eq!(dev.features(), vec![("LOOPS".to_string(), "1".to_string())]);
    assert!(!dev.supports_buft(&backend::cpu_buffer_type()));
    expect_err(dev.init(Some("fast")), &["Accel", "\"fast\""]);
    let stream = dev.init(None).unwrap();
    assert_eq!(stream.name(), "Accel");
    assert_eq!(stream.get_device(), dev);
    assert!(backend::dev_by_name("Accel").is_none(), "not registered");
}

#[test]
fn backend_forwards_to_its_device_and_buffer_type() {
    let cpu = backend::cpu_init().unwrap();
    assert_eq!(cpu.get_default_buffer_type(), backend::cpu_buffer_type());
    assert_eq!(cpu.get_alignment(), 32);
    assert_eq!(cpu.get_max_size(), usize::MAX);
    let buf = cpu.alloc_buffer(100).unwrap();
    assert_eq!((buf.name(), buf.get_size()), ("CPU".to_string(), 100));
    assert!(cpu.supports_buft(&backend::cpu_buffer_type()));

    let (small, _) = test_buft("Small", 4096, false);
    let dev = common_backend::TestDevice::builder("Fwd")
        .buft(small.clone())
        .build();
    let stream = dev.init(None).unwrap();
    assert_eq!(stream.get_default_buffer_type(), small);
    assert_eq!(stream.get_alignment(), common_backend::TEST_ALIGN);
    assert_eq!(stream.get_max_size(), 4096);
    assert_eq!(stream.alloc_buffer(64).unwrap().name(), "Small");
    assert!(stream.supports_buft(&small));
    assert!(!stream.supports_buft(&backend::cpu_buffer_type()));
    assert!(!cpu.supports_buft(&small));

    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let add = ctx.add(&a, &a).unwrap();
    let mul = ctx.mul(&a, &a).unwrap();
    let relu = ctx.relu(&a).unwrap();
    assert!(stream.supports_op(&add) && stream.supports_op(&mul));
    assert!(!stream.supports_op(&relu));
    assert!(cpu.supports_op(&relu));
    assert!(stream.offload_op(&mul) && !stream.offload_op(&add));
    assert!(!cpu.offload_op(&mul));
}
