//! Registries (`ggml_backend_reg_t`) and the process-wide list of registries and devices.
//! The crate's built-in registries (the CPU's) are registered on first use through
//! [`register`], the path every registry takes. A registry whose devices are all CPU devices is
//! a host fallback and stays after the others, as GGML orders the CPU last: a new registry goes
//! before the first such one, and its new devices before the first CPU device. Devices added
//! with [`device_register`] are appended.

use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::tensor::lock;

use super::traits::RegistryImpl;
use super::{Backend, Device, DeviceType};

handle!(
    /// A set of devices from one backend implementation. Cheap to clone; compares by identity.
    Registry: RegistryImpl
);

/// A registry that is a name and a fixed list of devices.
struct DeviceList {
    name: String,
    devices: Vec<Device>,
}

impl RegistryImpl for DeviceList {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn devices(&self) -> Vec<Device> {
        self.devices.clone()
    }
}

impl Registry {
    /// A registry named `name` over `devices`, with no features (what a backend whose devices
    /// are known when it starts needs: a remote server's, a test device's).
    pub fn from_devices(name: &str, devices: Vec<Device>) -> Registry {
        Registry::new(DeviceList {
            name: name.to_string(),
            devices,
        })
    }

    /// Name (`ggml_backend_reg_name`).
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// Number of devices (`ggml_backend_reg_dev_count`).
    pub fn dev_count(&self) -> usize {
        self.0.devices().len()
    }

    /// Device `i` (`ggml_backend_reg_dev_get`); `None` when out of range.
    pub fn dev_get(&self, i: usize) -> Option<Device> {
        self.0.devices().get(i).cloned()
    }

    /// All devices.
    pub fn devices(&self) -> Vec<Device> {
        self.0.devices()
    }

    /// `(name, value)` features (`ggml_backend_get_features`).
    pub fn features(&self) -> Vec<(String, String)> {
        self.0.features()
    }
}

#[derive(Default)]
struct Global {
    regs: Vec<Registry>,
    devs: Vec<Device>,
}

fn global() -> &'static Mutex<Global> {
    static G: OnceLock<Mutex<Global>> = OnceLock::new();
    G.get_or_init(|| {
        let mut g = Global::default();
        for reg in crate::builtin_registries() {
            g.add(reg);
        }
        Mutex::new(g)
    })
}

/// Whether `reg` is a host fallback: it has devices, and all are CPU devices.
fn is_host_fallback(reg: &Registry) -> bool {
    let devs = reg.devices();
    !devs.is_empty() && devs.iter().all(|d| d.dev_type() == DeviceType::Cpu)
}

impl Global {
    fn add(&mut self, reg: Registry) {
        if self.regs.contains(&reg) {
            return;
        }
        let at = if is_host_fallback(&reg) {
            self.regs.len()
        } else {
            (self.regs.iter())
                .position(is_host_fallback)
                .unwrap_or(self.regs.len())
        };
        self.regs.insert(at, reg.clone());
        // New devices go before the first CPU device, in the registry's order; devices already
        // known (shared with another registry, or registered alone) stay where they are.
        let mut at = (self.devs.iter())
            .position(|d| d.dev_type() == DeviceType::Cpu)
            .unwrap_or(self.devs.len());
        for d in reg.devices() {
            if !self.devs.contains(&d) {
                if d.dev_type() == DeviceType::Cpu {
                    self.devs.push(d);
                } else {
                    self.devs.insert(at, d);
                    at += 1;
                }
            }
        }
    }
}

/// Adds a registry and its devices (`ggml_backend_register`). Registering the same registry
/// twice is a no-op. New registries go before the host-fallback (CPU) registries, as GGML
/// orders them (see the module documentation).
pub fn register(reg: Registry) {
    lock(global()).add(reg);
}

/// Removes `reg` and its devices from the lists (for `unload`); `false` if it was not there.
pub(crate) fn deregister(reg: &Registry) -> bool {
    let mut g = lock(global());
    let Some(i) = g.regs.iter().position(|r| r == reg) else {
        return false;
    };
    g.regs.remove(i);
    let devs = reg.devices();
    g.devs.retain(|d| !devs.contains(d));
    true
}

/// Adds a device created outside a registry (`ggml_backend_device_register`); no-op if known.
pub fn device_register(dev: Device) {
    let mut g = lock(global());
    if !g.devs.contains(&dev) {
        g.devs.push(dev);
    }
}

/// Number of registries (`ggml_backend_reg_count`).
pub fn reg_count() -> usize {
    lock(global()).regs.len()
}

/// Registry `i` (`ggml_backend_reg_get`); `None` when out of range.
pub fn reg_get(i: usize) -> Option<Registry> {
    lock(global()).regs.get(i).cloned()
}

/// The registry named `name`, case-insensitive (`ggml_backend_reg_by_name`).
pub fn reg_by_name(name: &str) -> Option<Registry> {
    lock(global())
        .regs
        .iter()
        .find(|r| r.name().eq_ignore_ascii_case(name))
        .cloned()
}

/// Number of devices (`ggml_backend_dev_count`).
pub fn dev_count() -> usize {
    lock(global()).devs.len()
}

/// Device `i` (`ggml_backend_dev_get`); `None` when out of range.
pub fn dev_get(i: usize) -> Option<Device> {
    lock(global()).devs.get(i).cloned()
}

/// All devices in registration order.
pub fn devices() -> Vec<Device> {
    lock(global()).devs.clone()
}

/// The device named `name`, case-insensitive (`ggml_backend_dev_by_name`).
pub fn dev_by_name(name: &str) -> Option<Device> {
    lock(global())
        .devs
        .iter()
        .find(|d| d.name().eq_ignore_ascii_case(name))
        .cloned()
}

/// The first device of type `t` (`ggml_backend_dev_by_type`).
pub fn dev_by_type(t: DeviceType) -> Option<Device> {
    lock(global())
        .devs
        .iter()
        .find(|d| d.dev_type() == t)
        .cloned()
}

/// Starts a stream on the device named `name` (`ggml_backend_init_by_name`).
pub fn init_by_name(name: &str, params: Option<&str>) -> Result<Backend> {
    dev_by_name(name)
        .ok_or_else(|| Error::invalid(format!("init_by_name: no device named {name:?}")))?
        .init(params)
}

/// Starts a stream on the first device of type `t` (`ggml_backend_init_by_type`).
pub fn init_by_type(t: DeviceType, params: Option<&str>) -> Result<Backend> {
    dev_by_type(t)
        .ok_or_else(|| Error::invalid(format!("init_by_type: no device of type {t:?}")))?
        .init(params)
}

/// Starts a stream on the best device: the first GPU, else the first integrated GPU, else the
/// CPU (`ggml_backend_init_best`).
pub fn init_best() -> Result<Backend> {
    [DeviceType::Gpu, DeviceType::Igpu, DeviceType::Cpu]
        .into_iter()
        .find_map(dev_by_type)
        .ok_or_else(|| Error::unsupported("init_best: no device is registered"))?
        .init(None)
}
