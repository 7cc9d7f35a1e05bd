//! Split states (`struct ggml_backend_meta_split_state`): how one tensor of a meta device is
//! laid out over the member devices, and the byte maps that scatter a whole tensor into the
//! members' slices and gather it back.

use crate::error::{Error, Result};
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// The highest axis a tensor may be split along (GGML's `GGML_MAX_DIMS` is 4).
const MAX_SPLIT_AXIS: usize = 3;

/// How a tensor is spread over a meta device's members
/// (`enum ggml_backend_meta_split_axis`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SplitAxis {
    /// Each member holds a slice along this dimension (0 to 3).
    Axis(usize),
    /// Every member holds all values.
    Mirrored,
    /// Every member holds a tensor of the full shape; the values are the sum of them.
    Partial,
}

/// The split state of a tensor (`struct ggml_backend_meta_split_state`), what a meta device's
/// split function returns for each weight; computed tensors' states are inferred op by op.
///
/// Along an axis the dimension is cut into segments (one for most tensors; several for fused
/// weights such as a QKV matrix, so that each member gets its slice of Q, of K and of V), and
/// each segment is cut over the members. `ne` holds one length per segment and member,
/// segment-major (`[seg0_dev0, seg0_dev1, …, seg1_dev0, …]`), and segment `s` repeats `nr[s]`
/// times, in GGML's order: `[seg0_dev0_r0, seg0_dev1_r0, seg0_dev0_r1, …, seg1_dev0_r0, …]`.
///
/// ```
/// use ggml::backend::{SplitAxis, SplitState};
/// // A fused QKV weight [512, 3 * 512]: three segments of 512 rows, each halved.
/// let s = SplitState::segments_even(1, &[512, 512, 512]);
/// assert_eq!(s.split_axis(), SplitAxis::Axis(1));
/// assert_eq!(SplitState::mirrored().split_axis(), SplitAxis::Mirrored);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitState {
    axis: SplitAxis,
    /// Lengths per segment and member (segment-major); empty until resolved when the caller
    /// asked for even splits of `even`.
    ne: Vec<i64>,
    nr: Vec<u32>,
    /// Segment lengths each to be split evenly over the members (when `ne` is empty); empty
    /// for one segment of the whole dimension.
    even: Vec<i64>,
}

impl SplitState {
    /// Every member holds all values (`GGML_BACKEND_SPLIT_AXIS_MIRRORED`).
    pub fn mirrored() -> SplitState {
        SplitState::whole(SplitAxis::Mirrored)
    }

    /// Every member holds a partial sum (`GGML_BACKEND_SPLIT_AXIS_PARTIAL`); F32 only. Writing
    /// the tensor gives each member the values divided by the number of members, reading it
    /// sums the members' values.
    pub fn partial() -> SplitState {
        SplitState::whole(SplitAxis::Partial)
    }

    fn whole(axis: SplitAxis) -> SplitState {
        SplitState {
            axis,
            ne: Vec::new(),
            nr: Vec::new(),
            even: Vec::new(),
        }
    }

    /// Split along dimension `axis` as evenly as the members allow (in whole blocks along
    /// axis 0), the first members taking one more where it does not divide.
    pub fn axis(axis: usize) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(axis),
            ..SplitState::mirrored()
        }
    }

    /// Split along `axis` with `sizes[j]` elements on member `j`.
    pub fn axis_sizes(axis: usize, sizes: &[i64]) -> SplitState {
        SplitState::segments(axis, sizes, &[1])
    }

    /// Split along `axis` into segments of the given lengths (in order, summing to the
    /// dimension), each split evenly over the members: a fused weight.
    pub fn segments_even(axis: usize, lengths: &[i64]) -> SplitState {
        SplitState {
            even: lengths.to_vec(),
            ..SplitState::axis(axis)
        }
    }

    /// Split along `axis` exactly as GGML describes it: `ne` has one length per segment and
    /// member (segment-major), `nr[s]` is how often segment `s` repeats.
    pub fn segments(axis: usize, ne: &[i64], nr: &[u32]) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(axis),
            ne: ne.to_vec(),
            nr: nr.to_vec(),
            even: Vec::new(),
        }
    }

    /// The kind of split.
    pub fn split_axis(&self) -> SplitAxis {
        self.axis
    }

    /// Lengths per segment and member, segment-major (empty for mirrored and partial states,
    /// and for even splits not yet applied to a tensor).
    pub fn ne(&self) -> &[i64] {
        &self.ne
    }

    /// Repeats per segment.
    pub fn nr(&self) -> &[u32] {
        &self.nr
    }

    /// Number of segments (1 for mirrored and partial states).
    pub fn n_segments(&self) -> usize {
        self.nr.len().max(1)
    }

    /// The dimension split along, if any.
    pub(crate) fn dim(&self) -> Option<usize> {
        match self.axis {
            SplitAxis::Axis(a) => Some(a),
            _ => None,
        }
    }

    /// Whether every member holds the full shape (mirrored or partial).
    pub(crate) fn is_whole(&self) -> bool {
        self.dim().is_none()
    }

    /// A resolved state along `axis` with per-repeat lengths `ne` (one segment repeating `nr`
    /// times).
    pub(crate) fn resolved_axis(axis: usize, ne: Vec<i64>, nr: u32) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(axis),
            ne,
            nr: vec![nr],
            even: Vec::new(),
        }
    }

    /// Elements along the split axis that member `j` holds (all repeats of all segments).
    pub(crate) fn device_len(&self, j: usize) -> i64 {
        let n = self.ne.len() / self.nr.len().max(1);
        self.nr
            .iter()
            .enumerate()
            .map(|(s, &r)| self.ne[s * n + j] * r as i64)
            .sum()
    }

    /// Whether two resolved states put the same number of elements on every member along the
    /// same axis (GGML's `split_states_equal`); whole states are equal to whole states.
    pub(crate) fn same_split(&self, other: &SplitState, n_devs: usize) -> bool {
        match (self.dim(), other.dim()) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a == b && (0..n_devs).all(|j| self.device_len(j) == other.device_len(j))
            }
            _ => false,
        }
    }

    /// The state the split function gave for `t`, checked and with even splits applied.
    /// `Err` naming the tensor for an axis past 3, lengths that do not sum to the dimension,
    /// a member with nothing, lengths not in whole blocks, or a partial tensor that is not F32.
    pub(crate) fn resolve(&self, t: &Tensor, n_devs: usize) -> Result<SplitState> {
        let bad = |why: String| {
            Error::invalid(format!(
                "meta_device split_fn: tensor {:?} ({} {:?}): {why}",
                t.name(),
                t.ty(),
                t.ne()
            ))
        };
        let a = match self.axis {
            SplitAxis::Mirrored => return Ok(SplitState::mirrored()),
            SplitAxis::Partial if t.ty() == Type::F32 => return Ok(SplitState::partial()),
            SplitAxis::Partial => {
                return Err(bad("a partial (summed) tensor must be F32".into()));
            }
            SplitAxis::Axis(a) if a > MAX_SPLIT_AXIS => {
                return Err(bad(format!(
                    "axis {a}; a tensor can be split along axes 0 to {MAX_SPLIT_AXIS}"
                )));
            }
            SplitAxis::Axis(a) => a,
        };
        let dim = t.ne()[a];
        let unit = if a == 0 { t.ty().blck_size() as i64 } else { 1 };
        let (ne, nr) = if !self.ne.is_empty() || !self.nr.is_empty() {
            (self.ne.clone(), self.nr.clone())
        } else {
            let lengths = if self.even.is_empty() {
                vec![dim]
            } else {
                self.even.clone()
            };
            let mut ne = Vec::with_capacity(lengths.len() * n_devs);
            for &len in &lengths {
                if len < 0 || len % unit != 0 {
                    return Err(bad(format!(
                        "segment length {len} is not a whole number of blocks of {unit}"
                    )));
                }
                let units = len / unit;
                let (base, rem) = (units / n_devs as i64, units % n_devs as i64);
                ne.extend((0..n_devs as i64).map(|j| (base + i64::from(j < rem)) * unit));
            }
            (ne, vec![1; lengths.len()])
        };
        if nr.is_empty() || ne.len() != nr.len() * n_devs {
            return Err(bad(format!(
                "{} lengths for {} segments of {n_devs} members; give one per segment and member",
                ne.len(),
                nr.len()
            )));
        }
        if let Some(&x) = ne.iter().find(|&&x| x < 0 || x % unit != 0) {
            return Err(bad(format!(
                "length {x} along axis {a} is negative or not a whole number of blocks of {unit}"
            )));
        }
        if nr.contains(&0) {
            return Err(bad("a segment repeats 0 times".into()));
        }
        let r = SplitState::segments(a, &ne, &nr);
        let total: i64 = (0..n_devs).map(|j| r.device_len(j)).sum();
        if total != dim {
            return Err(bad(format!(
                "the lengths along axis {a} sum to {total}, the tensor has {dim}"
            )));
        }
        if let Some(j) = (0..n_devs).find(|&j| r.device_len(j) == 0) {
            return Err(bad(format!(
                "member {j} gets no elements along axis {a}; every member must hold a part"
            )));
        }
        Ok(r)
    }

    /// Member `j`'s slice of a tensor of shape `ne` and strides `nb`: the split dimension
    /// shortened, and every stride above it scaled in proportion (as GGML lays slices out).
    pub(crate) fn slice_shape(
        &self,
        ne: [i64; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        j: usize,
    ) -> Option<([i64; MAX_DIMS], [usize; MAX_DIMS])> {
        let Some(a) = self.dim() else {
            return Some((ne, nb));
        };
        let (mut ne_j, mut nb_j) = (ne, nb);
        let len = self.device_len(j);
        ne_j[a] = len;
        for i in 0..MAX_DIMS {
            if nb[i] > nb[a] {
                let scaled = nb[i] as u128 * len as u128;
                if scaled % ne[a] as u128 != 0 {
                    return None;
                }
                nb_j[i] = (scaled / ne[a] as u128) as usize;
            }
        }
        Some((ne_j, nb_j))
    }

    /// Bytes of `len` elements along the split axis `a` of `t` (a slice of one index of every
    /// dimension above it).
    fn bytes_along(t: &Tensor, a: usize, len: i64) -> usize {
        let ty = t.ty();
        if a == 0 {
            len as usize / ty.blck_size() * ty.type_size()
        } else {
            len as usize * t.nb()[a]
        }
    }

    /// Each member's byte range (start, length) in its slice for bytes `offset..offset + size`
    /// of contiguous tensor `t`. `Err` unless a split tensor's range covers whole slices of
    /// the dimensions above the split axis.
    pub(crate) fn ranges(
        &self,
        t: &Tensor,
        n_devs: usize,
        offset: usize,
        size: usize,
    ) -> Result<Vec<(usize, usize)>> {
        let Some(a) = self.dim() else {
            return Ok(vec![(offset, size); n_devs]);
        };
        let outer = SplitState::bytes_along(t, a, t.ne()[a]);
        if outer == 0 || offset % outer != 0 || size % outer != 0 {
            return Err(Error::invalid(format!(
                "tensor {:?} is split along axis {a} over a meta device: bytes {offset}..{} \
                 must cover whole slices of {outer} bytes",
                t.name(),
                offset + size
            )));
        }
        let (o0, n_outer) = (offset / outer, size / outer);
        Ok((0..n_devs)
            .map(|j| {
                let d = SplitState::bytes_along(t, a, self.device_len(j));
                (o0 * d, n_outer * d)
            })
            .collect())
    }

    /// Walks the byte pieces of bytes `offset..offset + size` of contiguous tensor `t` split
    /// along an axis (checked by [`SplitState::ranges`] first): `f(j, at, dev_at, len)` for
    /// each piece, `at` relative to `offset` in the whole tensor, `dev_at` relative to the
    /// start of member `j`'s range.
    pub(crate) fn walk(
        &self,
        t: &Tensor,
        n_devs: usize,
        size: usize,
        mut f: impl FnMut(usize, usize, usize, usize),
    ) {
        let Some(a) = self.dim() else {
            (0..n_devs).for_each(|j| f(j, 0, 0, size));
            return;
        };
        let outer = SplitState::bytes_along(t, a, t.ne()[a]);
        let n = n_devs;
        let mut cursor = vec![0usize; n];
        let mut at = 0;
        for _ in 0..size / outer.max(1) {
            for (s, &r) in self.nr.iter().enumerate() {
                for _ in 0..r {
                    for (j, c) in cursor.iter_mut().enumerate() {
                        let len = SplitState::bytes_along(t, a, self.ne[s * n + j]);
                        f(j, at, *c, len);
                        at += len;
                        *c += len;
                    }
                }
            }
        }
    }
}
