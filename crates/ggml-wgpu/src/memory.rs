//! Device memory as `ggml_backend_dev_get_memory` reports it. wgpu's portable API has no memory
//! query; on Vulkan the device's hal gives the physical device's memory heaps: the total is
//! the size of its device-local heaps, and the free figure is their budget minus their usage
//! (VK_EXT_memory_budget, which wgpu enables where the driver has it: the whole process's use
//! and the other processes' as the driver sees them), else the total minus what this backend's
//! buffers hold. On the other backends (Metal, DX12) both figures are 0: unknown.

use std::sync::atomic::Ordering;

use crate::Gpu;

/// (free, total) bytes of `gpu`'s device memory and where the free figure comes from (see
/// the module's documentation).
pub(crate) fn query(gpu: &Gpu) -> (usize, usize, &'static str) {
    let held = gpu.allocated.load(Ordering::Relaxed);
    let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    match vulkan_heaps(&gpu.device) {
        Some(Heaps {
            total,
            free: Some(free),
        }) => (
            to_usize(free.min(total)),
            to_usize(total),
            "VK_EXT_memory_budget",
        ),
        Some(Heaps { total, free: None }) => (
            to_usize(total.saturating_sub(held)),
            to_usize(total),
            "device-local heaps less this backend's buffers",
        ),
        None => (0, 0, "unknown"),
    }
}

/// The device-local heaps of a Vulkan device: their size and, with VK_EXT_memory_budget,
/// their budget left (budget minus usage, summed).
#[cfg_attr(any(target_arch = "wasm32", target_vendor = "apple"), allow(dead_code))]
struct Heaps {
    total: u64,
    free: Option<u64>,
}

#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
fn vulkan_heaps(device: &wgpu::Device) -> Option<Heaps> {
    use ash::vk;
    // SAFETY: the hal device is only read (its physical device and instance), nothing is
    // created, destroyed or recorded through it, and the guard is dropped before returning.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance();
    let physical = hal.raw_physical_device();
    let with_budget = instance.instance_api_version() >= vk::API_VERSION_1_1
        && hal
            .enabled_device_extensions()
            .contains(&ash::ext::memory_budget::NAME);
    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let base = if with_budget {
        let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: `physical` is the device's physical device, of this instance (Vulkan 1.1:
        // the core entry point is loaded); `props` chains only `budget`, both live here.
        unsafe {
            instance
                .raw_instance()
                .get_physical_device_memory_properties2(physical, &mut props)
        };
        props.memory_properties
    } else {
        // SAFETY: `physical` is the device's physical device, of this instance.
        unsafe {
            instance
                .raw_instance()
                .get_physical_device_memory_properties(physical)
        }
    };
    let n = (base.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
    let local: Vec<usize> = (0..n)
        .filter(|&i| (base.memory_heaps[i].flags).contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .collect();
    let total = local.iter().map(|&i| base.memory_heaps[i].size).sum();
    let free = with_budget.then(|| {
        (local.iter())
            .map(|&i| budget.heap_budget[i].saturating_sub(budget.heap_usage[i]))
            .sum()
    });
    Some(Heaps { total, free })
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
fn vulkan_heaps(_device: &wgpu::Device) -> Option<Heaps> {
    None
}
