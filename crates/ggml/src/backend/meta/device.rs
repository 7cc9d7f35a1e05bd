//! The meta device, its buffer type and its buffers. A buffer holds one buffer per member of
//! the same size; each tensor placed in it gets one slice tensor per member, at the same
//! offset in the member's buffer, shaped by the tensor's split state. Host reads and writes of
//! a tensor scatter and gather its bytes over the slices.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{lock, Tensor, TensorInner, MAX_DIMS};

use super::backend::MetaBackend;
use super::infer::infer;
use super::state::{SplitAxis, SplitState};
use super::{SplitFn, TensorInfo};
use crate::backend::traits::{BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl};
use crate::backend::Device;
use crate::backend::{Buffer, BufferType, DeviceCaps, DeviceType};

/// One tensor of the meta device: its split state and its slice on every member.
pub(crate) struct Entry {
    tensor: Weak<TensorInner>,
    pub(crate) state: SplitState,
    pub(crate) subs: Vec<Tensor>,
    /// Whether the members hold partial sums of a whole tensor now (a partial weight, or a
    /// result whose all-reduce a graph left for later).
    pub(crate) partial: AtomicBool,
}

impl Entry {
    /// The tensor, while it lives.
    fn tensor(&self) -> Option<Tensor> {
        self.tensor.upgrade().map(Tensor)
    }

    pub(crate) fn is_partial(&self) -> bool {
        self.partial.load(Ordering::Acquire)
    }

    pub(crate) fn set_partial(&self, p: bool) {
        self.partial.store(p, Ordering::Release);
    }
}

#[derive(Default)]
struct Table {
    map: HashMap<u64, Arc<Entry>>,
    /// Size after the last sweep of dead tensors.
    swept: usize,
}

/// What the device, its buffer type, buffers and backends share.
pub(crate) struct Shared {
    pub(crate) members: Vec<Device>,
    split_fn: SplitFn,
    table: Mutex<Table>,
    pub(crate) name: String,
    description: String,
}

impl Shared {
    pub(crate) fn new(members: Vec<Device>, split_fn: SplitFn) -> Shared {
        let list = |f: fn(&Device) -> String| {
            let v: Vec<String> = members.iter().map(f).collect();
            format!("Meta({})", v.join(","))
        };
        Shared {
            name: list(Device::name),
            description: list(Device::description),
            members,
            split_fn,
            table: Mutex::new(Table::default()),
        }
    }

    pub(crate) fn n(&self) -> usize {
        self.members.len()
    }

    /// The entry of `t`: made when it was placed in a buffer of this device; a view not yet
    /// initialised gets its entry now (its source's slices exist).
    pub(crate) fn entry(&self, t: &Tensor) -> Result<Arc<Entry>> {
        if let Some(e) = lock(&self.table).map.get(&t.id()) {
            return Ok(e.clone());
        }
        if t.view_src().is_some() {
            return self.build(t, None, 0);
        }
        Err(Error::invalid(format!(
            "meta device {}: tensor {:?} is not in a buffer of this device (allocate it with \
             the meta device's buffer type)",
            self.name,
            t.name()
        )))
    }

    /// Makes `t`'s entry: its state (the split function's for a leaf, inferred for a computed
    /// tensor) and one slice per member, placed at `offset` of the member buffers `parts`
    /// (views follow their source's slices instead).
    fn build(&self, t: &Tensor, parts: Option<&[Buffer]>, offset: usize) -> Result<Arc<Entry>> {
        let n = self.n();
        let srcs: Vec<Option<Arc<Entry>>> = (0..t.n_src_slots())
            .map(|i| t.src(i).map(|s| self.entry(s)).transpose())
            .collect::<Result<_>>()?;
        let root = t
            .view_src()
            .map(|v| self.entry(v).map(|e| (v, e)))
            .transpose()?;
        let state = match (&root, t.op()) {
            (Some((_, e)), Op::None) if e.state.split_axis() == SplitAxis::Partial => {
                SplitState::partial()
            }
            (Some((v, e)), Op::None) => infer(t, &[], Some((v, &e.state)), n)?,
            (None, Op::None) => (self.split_fn)(&TensorInfo::of(t), n).resolve(t, n)?,
            _ => {
                let states: Vec<Option<SplitState>> = srcs
                    .iter()
                    .map(|e| e.as_ref().map(|e| e.state.clone()))
                    .collect();
                infer(t, &states, None, n)?
            }
        };
        let mut subs = Vec::with_capacity(n);
        for j in 0..n {
            let (ne, nb) = state.slice_shape(t.ne(), t.nb(), j).ok_or_else(|| {
                Error::unsupported(format!(
                    "meta device {}: the strides {:?} of tensor {:?} do not scale to member \
                     {j}'s slice",
                    self.name,
                    t.nb(),
                    t.name()
                ))
            })?;
            let src_j = srcs
                .iter()
                .map(|e| e.as_ref().map(|e| e.subs[j].clone()))
                .collect();
            let view = match &root {
                Some((v, e)) => Some((e.subs[j].clone(), view_offset(t, &state, v, &e.state, j)?)),
                None => None,
            };
            let sub = t.twin_shaped(ne, nb, src_j, view)?;
            match (&root, parts) {
                (Some((_, e)), _) => {
                    let end = sub.view_offs().checked_add(sub.nbytes());
                    if end.is_none_or(|end| end > e.subs[j].nbytes()) {
                        return Err(Error::unsupported(format!(
                            "meta device {}: member {j}'s slice of view {:?} falls outside its \
                             source's slice",
                            self.name,
                            t.name()
                        )));
                    }
                    crate::alloc::view_init(&sub)?;
                }
                (None, Some(parts)) => crate::alloc::tensor_alloc(&parts[j], &sub, offset)?,
                (None, None) => {
                    return Err(Error::invalid(format!(
                        "meta device {}: tensor {:?} has no memory",
                        self.name,
                        t.name()
                    )));
                }
            }
            subs.push(sub);
        }
        let partial = state.split_axis() == SplitAxis::Partial;
        let e = Arc::new(Entry {
            tensor: t.downgrade(),
            state,
            subs,
            partial: AtomicBool::new(partial),
        });
        let mut table = lock(&self.table);
        table.map.insert(t.id(), e.clone());
        if table.map.len() > 2 * table.swept + 64 {
            table.map.retain(|_, e| e.tensor.strong_count() > 0);
            table.swept = table.map.len();
        }
        Ok(e)
    }

    /// The whole tensor's state as host access sees it: partial while the members hold
    /// partial sums.
    fn host_state(e: &Entry) -> SplitAxis {
        match e.state.split_axis() {
            SplitAxis::Axis(a) => SplitAxis::Axis(a),
            _ if e.is_partial() => SplitAxis::Partial,
            _ => SplitAxis::Mirrored,
        }
    }

    fn check_contiguous(&self, t: &Tensor, what: &str) -> Result<()> {
        if t.is_contiguous() {
            return Ok(());
        }
        Err(Error::unsupported(format!(
            "{what}: tensor {:?} of meta device {} is split and not contiguous; copy it into a \
             contiguous tensor first",
            t.name(),
            self.name
        )))
    }

    /// Host write of `data` into `t` from byte `offset`: scattered over the slices.
    fn set(&self, t: &Tensor, e: &Entry, offset: usize, data: &[u8]) -> Result<()> {
        let n = self.n();
        match Shared::host_state(e) {
            SplitAxis::Mirrored => e.subs.iter().try_for_each(|s| s.set_bytes(data, offset)),
            SplitAxis::Partial => {
                let values = f32_values(t, offset, data)?;
                let share: Vec<u8> = values
                    .iter()
                    .flat_map(|v| (v / n as f32).to_le_bytes())
                    .collect();
                e.subs.iter().try_for_each(|s| s.set_bytes(&share, offset))
            }
            SplitAxis::Axis(_) => {
                self.check_contiguous(t, "tensor_set")?;
                let ranges = e.state.ranges(t, n, offset, data.len())?;
                let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1]).collect();
                e.state.walk(t, n, data.len(), |j, at, dev_at, len| {
                    bufs[j][dev_at..dev_at + len].copy_from_slice(&data[at..at + len]);
                });
                (0..n).try_for_each(|j| e.subs[j].set_bytes(&bufs[j], ranges[j].0))
            }
        }
    }

    /// Host read of `t`'s bytes from `offset` into `out`: gathered from the slices; partial
    /// sums are added up.
    fn get(&self, t: &Tensor, e: &Entry, offset: usize, out: &mut [u8]) -> Result<()> {
        let n = self.n();
        match Shared::host_state(e) {
            SplitAxis::Mirrored => e.subs[0].get_bytes(out, offset),
            SplitAxis::Partial => {
                f32_values(t, offset, out)?;
                let mut sum = vec![0f32; out.len() / 4];
                let mut part = vec![0u8; out.len()];
                for s in &e.subs {
                    s.get_bytes(&mut part, offset)?;
                    for (acc, c) in sum.iter_mut().zip(part.chunks_exact(4)) {
                        *acc += f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    }
                }
                for (o, v) in out.chunks_exact_mut(4).zip(sum) {
                    o.copy_from_slice(&v.to_le_bytes());
                }
                Ok(())
            }
            SplitAxis::Axis(_) => {
                self.check_contiguous(t, "tensor_get")?;
                let ranges = e.state.ranges(t, n, offset, out.len())?;
                let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1]).collect();
                for j in 0..n {
                    e.subs[j].get_bytes(&mut bufs[j], ranges[j].0)?;
                }
                e.state.walk(t, n, out.len(), |j, at, dev_at, len| {
                    out[at..at + len].copy_from_slice(&bufs[j][dev_at..dev_at + len]);
                });
                Ok(())
            }
        }
    }

    /// Sets `size` bytes of `t` from `offset` to `value` on every slice.
    fn memset(&self, t: &Tensor, e: &Entry, offset: usize, size: usize, value: u8) -> Result<()> {
        if Shared::host_state(e) == SplitAxis::Partial && value != 0 {
            return Err(Error::invalid(format!(
                "tensor_memset: tensor {:?} holds partial sums over meta device {}; only 0 \
                 can be set (asked for {value})",
                t.name(),
                self.name
            )));
        }
        if e.state.dim().is_some() {
            self.check_contiguous(t, "tensor_memset")?;
        }
        let ranges = e.state.ranges(t, self.n(), offset, size)?;
        e.subs
            .iter()
            .zip(ranges)
            .try_for_each(|(s, (at, len))| crate::backend::tensor_memset(s, value, at, len))
    }
}

/// `data` as F32 values of `t` (a partial tensor), or `Err` when `t` is not F32 or the range
/// is not whole values.
fn f32_values(t: &Tensor, offset: usize, data: &[u8]) -> Result<Vec<f32>> {
    if t.ty() != crate::Type::F32 || offset % 4 != 0 || data.len() % 4 != 0 {
        return Err(Error::invalid(format!(
            "tensor {:?} holds partial sums over a meta device: it must be F32 and accessed in \
             whole values (type {}, bytes {offset}..{})",
            t.name(),
            t.ty(),
            offset + data.len()
        )));
    }
    Ok(data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Member `j`'s byte offset of view `t` into its source `root`'s slice: an offset inside one
/// slice of the split dimension stays, a larger one shrinks in proportion (GGML's rule).
fn view_offset(
    t: &Tensor,
    state: &SplitState,
    root: &Tensor,
    root_state: &SplitState,
    j: usize,
) -> Result<usize> {
    let offs = t.view_offs();
    let (Some(a), Some(ra)) = (state.dim(), root_state.dim()) else {
        return Ok(offs);
    };
    if offs == 0 {
        return Ok(0);
    }
    let (ne, nb) = (t.ne(), t.nb());
    let internal = offs <= root.nb()[ra]
        || (0..MAX_DIMS).any(|i| {
            let dim = ne[i] as usize * nb[i];
            offs <= dim && dim < nb[a]
        });
    if internal {
        return Ok(offs);
    }
    let scaled = offs as u128 * state.device_len(j) as u128;
    if scaled % ne[a] as u128 != 0 {
        return Err(Error::unsupported(format!(
            "meta device: view {:?} starts {offs} bytes into its source, which does not scale \
             to member {j}'s slice",
            t.name()
        )));
    }
    Ok((scaled / ne[a] as u128) as usize)
}

/// A buffer of the meta device: one buffer per member, each of the same size.
pub(crate) struct MetaBuffer {
    pub(crate) shared: Arc<Shared>,
    parts: Vec<Buffer>,
    size: usize,
    /// The tensors placed here, in the order they were: (offset, bytes, entry).
    placed: Mutex<Placed>,
}

#[derive(Default)]
struct Placed {
    list: Vec<(usize, usize, Weak<Entry>)>,
    swept: usize,
}

/// A tensor of a meta buffer found by where its bytes are, and the offset into it.
struct Found {
    t: Tensor,
    e: Arc<Entry>,
    offset: usize,
}

impl MetaBuffer {
    /// The tensor whose bytes `at..at + len` are: `t` itself when it has an entry, else the
    /// tensor placed last over those bytes (a raw access, a copy between buffers, or a tensor
    /// given the memory of another, as the scheduler does).
    fn find(&self, t: Option<&Tensor>, at: usize, len: usize, what: &str) -> Result<Found> {
        if let Some(t) = t {
            if let Ok(e) = self.shared.entry(t) {
                let offset = at - t.data_offset().unwrap_or(at);
                return Ok(Found {
                    t: t.clone(),
                    e,
                    offset,
                });
            }
        }
        let placed = lock(&self.placed);
        let hit = placed.list.iter().rev().find_map(|(o, n, e)| {
            if *o > at || at + len > o + n {
                return None;
            }
            let e = e.upgrade()?;
            let t = e.tensor()?;
            Some(Found {
                t,
                e,
                offset: at - o,
            })
        });
        hit.ok_or_else(|| {
            Error::invalid(format!(
                "{what}: no tensor of meta device {} holds bytes {at}..{} of this buffer",
                self.shared.name,
                at + len
            ))
        })
    }

    fn place(&self, offset: usize, e: &Arc<Entry>, nbytes: usize) {
        let mut p = lock(&self.placed);
        p.list.push((offset, nbytes, Arc::downgrade(e)));
        if p.list.len() > 2 * p.swept + 64 {
            p.list.retain(|(_, _, e)| e.strong_count() > 0);
            p.swept = p.list.len();
        }
    }
}

impl Drop for MetaBuffer {
    fn drop(&mut self) {
        // The slices hold the member buffers too: free the memory now, as the meta buffer's
        // owner asked.
        self.parts.iter().for_each(Buffer::release);
    }
}

// SAFETY: the buffer has no host memory (`host_ptr` is `None`); every access goes through the
// member buffers' own handles, which order and bound it.
unsafe impl BufferImpl for MetaBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let f = self.find(None, offset, data.len(), "write")?;
        self.shared.set(&f.t, &f.e, f.offset, data)
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let f = self.find(None, offset, out.len(), "read")?;
        self.shared.get(&f.t, &f.e, f.offset, out)
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        if offset == 0 && size == self.size {
            return self.parts.iter().try_for_each(|p| p.clear(value));
        }
        let f = self.find(None, offset, size, "fill")?;
        self.shared.memset(&f.t, &f.e, f.offset, size, value)
    }
    fn init_tensor(&self, t: &Tensor, offset: usize) -> Result<()> {
        let e = self.shared.build(t, Some(&self.parts), offset)?;
        if t.view_src().is_none() {
            self.place(offset, &e, t.nbytes());
        }
        Ok(())
    }
    fn reset(&self) {
        for p in &self.parts {
            // A freed part has nothing to reset.
            let _ = p.reset();
        }
    }
    unsafe fn set_tensor(&self, t: &Tensor, at: usize, offset: usize, data: &[u8]) -> Result<()> {
        let f = self.find(Some(t), at + offset, data.len(), "tensor_set")?;
        self.shared.set(&f.t, &f.e, f.offset, data)
    }
    unsafe fn get_tensor(
        &self,
        t: &Tensor,
        at: usize,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        let f = self.find(Some(t), at + offset, out.len(), "tensor_get")?;
        self.shared.get(&f.t, &f.e, f.offset, out)
    }
    unsafe fn memset_tensor(
        &self,
        t: &Tensor,
        at: usize,
        offset: usize,
        size: usize,
        value: u8,
    ) -> Result<()> {
        let f = self.find(Some(t), at + offset, size, "tensor_memset")?;
        self.shared.memset(&f.t, &f.e, f.offset, size, value)
    }
}

/// The meta device's buffer type: a buffer of each member's type per allocation.
struct MetaBufferType {
    shared: Arc<Shared>,
}

impl BufferTypeImpl for MetaBufferType {
    fn name(&self) -> String {
        let v: Vec<String> = self
            .shared
            .members
            .iter()
            .map(|d| d.buffer_type().name())
            .collect();
        format!("Meta({})", v.join(","))
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        let parts = self
            .shared
            .members
            .iter()
            .map(|d| d.buffer_type().alloc_buffer(size))
            .collect::<Result<Vec<Buffer>>>()?;
        Ok(Box::new(MetaBuffer {
            shared: self.shared.clone(),
            parts,
            size,
            placed: Mutex::new(Placed::default()),
        }))
    }
    fn alignment(&self) -> usize {
        let m = self.shared.members.iter();
        m.map(|d| d.buffer_type().get_alignment())
            .max()
            .unwrap_or(1)
    }
    fn max_size(&self) -> usize {
        let m = self.shared.members.iter();
        m.map(|d| d.buffer_type().get_max_size())
            .min()
            .unwrap_or(usize::MAX)
    }
    fn alloc_size(&self, t: &Tensor) -> usize {
        let m = self.shared.members.iter();
        m.map(|d| d.buffer_type().get_alloc_size(t))
            .max()
            .unwrap_or(t.nbytes())
    }
}

/// The meta device (`ggml_backend_meta_device`).
pub(crate) struct MetaDevice {
    pub(crate) shared: Arc<Shared>,
    buft: BufferType,
}

impl MetaDevice {
    pub(crate) fn new(shared: Shared) -> MetaDevice {
        let shared = Arc::new(shared);
        let buft = BufferType::new(MetaBufferType {
            shared: shared.clone(),
        });
        MetaDevice { shared, buft }
    }
}

impl DeviceImpl for MetaDevice {
    fn name(&self) -> String {
        self.shared.name.clone()
    }
    fn description(&self) -> String {
        self.shared.description.clone()
    }
    fn memory(&self) -> (usize, usize) {
        self.shared.members.iter().fold((0, 0), |(f, t), d| {
            let (df, dt) = d.memory();
            (f.saturating_add(df), t.saturating_add(dt))
        })
    }
    fn dev_type(&self) -> DeviceType {
        DeviceType::Meta
    }
    fn caps(&self) -> DeviceCaps {
        let all =
            |f: fn(&DeviceCaps) -> bool| self.shared.members.iter().all(|d| f(&d.get_props().caps));
        DeviceCaps {
            async_compute: all(|c| c.async_compute),
            ..DeviceCaps::default()
        }
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        Ok(Box::new(MetaBackend::new(self.shared.clone(), params)?))
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    /// The members' host buffer type when they all have the same one (as GGML).
    fn host_buffer_type(&self) -> Option<BufferType> {
        let mut types = self.shared.members.iter().map(Device::host_buffer_type);
        let first = types.next()??;
        types.all(|t| t.as_ref() == Some(&first)).then_some(first)
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        self.shared.members.iter().all(|d| d.supports_op(op))
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
}
