//! Between [`WireTensor`] and this library's tensors: the checked layout of a tensor that
//! arrived, and the serialized form of one to send.

use ggml::ops::Meta;
use ggml::{Error, Result, Tensor, Type, MAX_DIMS};

use crate::proto::{WireTensor, WIRE_DIMS};

/// A received tensor's type, shape and strides (in 5 dimensions, the fifth 1), checked: a known
/// type, `ne[0]` a whole number of blocks, packed blocks for quantized types, and a byte span
/// that memory can address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub ty: Type,
    pub ne: [i64; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
    pub nbytes: usize,
}

fn bad(t: &WireTensor, why: String) -> Error {
    Error::invalid(format!("rpc tensor {:#x} {:?}: {why}", t.id, t.name_str()))
}

/// The checked layout of `t`.
pub(crate) fn layout(t: &WireTensor) -> Result<Layout> {
    let ty = Type::from_u32(t.ty).map_err(|_| bad(t, format!("type {} is unknown", t.ty)))?;
    let mut ne = [1i64; MAX_DIMS];
    let mut nb = [0usize; MAX_DIMS];
    for d in 0..WIRE_DIMS {
        ne[d] = i64::from(t.ne[d]);
        nb[d] = t.nb[d] as usize;
    }
    // The fifth dimension: one element, the stride a contiguous tensor would have.
    nb[WIRE_DIMS] = nb[WIRE_DIMS - 1]
        .checked_mul(ne[WIRE_DIMS - 1] as usize)
        .ok_or_else(|| bad(t, "strides overflow".into()))?;
    let blck = ty.blck_size() as i64;
    if ne[0] % blck != 0 {
        return Err(bad(
            t,
            format!("ne[0] = {} is not a multiple of {blck}", ne[0]),
        ));
    }
    if blck > 1 && nb[0] != ty.type_size() {
        return Err(bad(
            t,
            format!("nb[0] = {} for {ty}: blocks must be packed", nb[0]),
        ));
    }
    let nbytes = Meta { ty, ne, nb }
        .nbytes()
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| bad(t, format!("shape {ne:?} with strides {nb:?} overflows")))?;
    Ok(Layout { ty, ne, nb, nbytes })
}

/// `t` serialized with identity `id`, in server buffer `buffer` at address `data`; `Err` when
/// it has a fifth dimension or a dimension or stride past 32 bits (the wire's limits).
pub(crate) fn encode(t: &Tensor, buffer: u64, data: u64) -> Result<WireTensor> {
    let (ne, nb) = (t.ne(), t.nb());
    let too_big = |what: &str| {
        Error::unsupported(format!(
            "rpc: tensor {:?} has {what} (ne {ne:?}, nb {nb:?}) that the wire format cannot \
             carry (4 dimensions, 32-bit sizes and strides)",
            t.name()
        ))
    };
    if ne[WIRE_DIMS] != 1 {
        return Err(too_big("a fifth dimension"));
    }
    let mut w = WireTensor {
        id: t.id(),
        ty: t.ty() as u32,
        buffer,
        data,
        op: t.op() as u32,
        op_params: t.op_params(),
        flags: t.flags() as i32,
        ..WireTensor::default()
    };
    for d in 0..WIRE_DIMS {
        w.ne[d] = u32::try_from(ne[d]).map_err(|_| too_big("a dimension"))?;
        w.nb[d] = u32::try_from(nb[d]).map_err(|_| too_big("a stride"))?;
    }
    w.set_name(&t.name());
    Ok(w)
}

/// A plain byte range as a tensor: `len` bytes of I8 at `data` in buffer `buffer` (how the
/// client names memory for SET/GET/MEMSET/COPY, which take whole buffers' bytes).
pub(crate) fn bytes(buffer: u64, data: u64, len: u32) -> WireTensor {
    WireTensor {
        id: data,
        ty: Type::I8 as u32,
        buffer,
        data,
        ne: [len, 1, 1, 1],
        nb: [1, len, len, len],
        ..WireTensor::default()
    }
}
