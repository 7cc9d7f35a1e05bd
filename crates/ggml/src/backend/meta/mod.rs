//! The meta device (`ggml_backend_meta_device`): one device over up to 16 others, for tensor
//! parallelism. A split function gives every weight its [`SplitState`] — a slice per member
//! along an axis (with segments for fused weights), mirrored, or partial sums — and the states
//! of computed tensors are inferred op by op. A buffer of the meta device holds one buffer per
//! member; writing a tensor scatters it over the members' slices and reading gathers it (partial
//! sums are added up). A graph on a meta backend runs as one graph per member, in parallel on
//! the members' streams; where partial sums must be combined the members all-reduce them (the
//! first member's device may do it itself, [`super::DeviceImpl::all_reduce`]; otherwise a
//! butterfly of copies and adds over the members' streams).
//!
//! Differences from GGML, on purpose: the split function is asked only for leaves (tensors no
//! op computes); every computed tensor's state is inferred, whatever buffer it lives in.
//! Partial sums are carried through linear ops and combined only where an op needs whole
//! values (GGML combines after every product that makes them, then delays some); a partial
//! result nothing needs whole stays partial and a read sums it. Every member must get a
//! non-empty slice. A split tensor is read and written in whole slices of the dimensions above
//! its split axis (GGML asserts the same). Bytes reached without their tensor (a copy between
//! buffers, an asynchronous transfer, a tensor the scheduler gave another's memory) belong to
//! the tensor placed over them last, so a meta backend works under the scheduler.

mod backend;
mod device;
mod infer;
mod plan;
mod state;

pub use state::{SplitAxis, SplitState};

use std::sync::{Mutex, Weak};

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{lock, Tensor, MAX_DIMS};
use crate::types::Type;

use super::{Device, DeviceImpl, DeviceType};

/// The most devices a meta device spans (`GGML_BACKEND_META_MAX_DEVICES`).
pub const META_MAX_DEVICES: usize = 16;

/// What a meta device's split function sees of a tensor (ggmlR's `tensor_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name.
    pub name: String,
    /// Its element type.
    pub ty: Type,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// The op that computes it ([`Op::None`] for the leaves the function is asked about).
    pub op: Op,
    /// Its flag bits ([`crate::tensor::flags`]).
    pub flags: u32,
}

impl TensorInfo {
    fn of(t: &Tensor) -> TensorInfo {
        TensorInfo {
            name: t.name(),
            ty: t.ty(),
            ne: t.ne(),
            op: t.op(),
            flags: t.flags(),
        }
    }
}

/// A split function: the state of a leaf, given the number of members.
pub(crate) type SplitFn = Box<dyn Fn(&TensorInfo, usize) -> SplitState + Send + Sync>;

/// Meta devices made in this process that are still alive (for listings such as `ggml info`).
static LIVE: Mutex<Vec<Weak<dyn DeviceImpl>>> = Mutex::new(Vec::new());

/// A meta device over `devices` (`ggml_backend_meta_device`): tensors placed in its buffers are
/// split over the devices as `split_fn(&info, n_devices)` says for each leaf (a weight or an
/// input), and a backend of it ([`Device::init`]) computes graphs on all of them at once. The
/// same device may appear more than once (two streams of the CPU, say).
///
/// `Err` for an empty list, more than [`META_MAX_DEVICES`] devices, or a member that is itself
/// a meta device.
///
/// ```
/// use ggml::backend::{self, SplitState};
/// let cpu = backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
/// let meta = backend::meta_device(&[cpu.clone(), cpu], |info, _n| {
///     if info.name.starts_with("w") { SplitState::axis(1) } else { SplitState::mirrored() }
/// })
/// .unwrap();
/// assert_eq!(meta.name(), "Meta(CPU,CPU)");
/// assert_eq!(meta.dev_type(), ggml::DeviceType::Meta);
/// ```
pub fn meta_device(
    devices: &[Device],
    split_fn: impl Fn(&TensorInfo, usize) -> SplitState + Send + Sync + 'static,
) -> Result<Device> {
    if devices.is_empty() {
        return Err(Error::invalid(
            "meta_device: devices is empty; a meta device needs at least one device",
        ));
    }
    if devices.len() > META_MAX_DEVICES {
        return Err(Error::invalid(format!(
            "meta_device: {} devices given; a meta device spans at most {META_MAX_DEVICES}",
            devices.len()
        )));
    }
    if let Some(d) = devices.iter().find(|d| d.dev_type() == DeviceType::Meta) {
        return Err(Error::invalid(format!(
            "meta_device: device {} is itself a meta device; give its members instead",
            d.name()
        )));
    }
    let shared = device::Shared::new(devices.to_vec(), Box::new(split_fn));
    let dev = Device::from_arc(std::sync::Arc::new(device::MetaDevice::new(shared)));
    let mut live = lock(&LIVE);
    live.retain(|w| w.strong_count() > 0);
    live.push(dev.downgrade());
    Ok(dev)
}

/// The meta devices made by [`meta_device`] in this process that are still alive, oldest
/// first. Meta devices are not registered, so [`super::dev_count`] does not count them.
pub fn meta_devices() -> Vec<Device> {
    lock(&LIVE)
        .iter()
        .filter_map(|w| w.upgrade().map(Device::from_arc))
        .collect()
}
