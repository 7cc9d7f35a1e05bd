//! `register` of a registry some of whose devices are already known: the known ones stay where
//! they are, the new ones go just before the CPU devices (this used to compute the insertion
//! index from the registry's device index and could panic or put a device after the CPU).
//!
//! The registry is process-wide, so this runs in a binary of its own.

mod common_backend;

use common_backend::{test_registry, TestDevice};
use ggml::backend;
use ggml::DeviceType;

#[test]
fn registering_a_registry_with_known_devices_keeps_the_order() {
    let dev = |name: &str| TestDevice::builder(name).dev_type(DeviceType::Gpu).build();
    let (x1, x2, x3) = (dev("SharedX1"), dev("SharedX2"), dev("SharedX3"));
    backend::register(test_registry("RegA", vec![x1.clone(), x2.clone()]));
    let n_devs = backend::dev_count();
    // x1 and x2 are known already: only x3 is added.
    backend::register(test_registry(
        "RegB",
        vec![x1.clone(), x2.clone(), x3.clone()],
    ));
    assert_eq!(backend::dev_count(), n_devs + 1);

    let devs = backend::devices();
    let pos = |d| devs.iter().position(|e| e == d).unwrap();
    let first_cpu = (devs.iter())
        .position(|d| d.dev_type() == DeviceType::Cpu)
        .unwrap();
    assert_eq!((pos(&x1), pos(&x2), pos(&x3)), (0, 1, 2));
    assert_eq!(first_cpu, 3, "the new device goes just before the CPU");
    assert_eq!(
        backend::reg_get(backend::reg_count() - 1).unwrap().name(),
        "CPU"
    );
}
