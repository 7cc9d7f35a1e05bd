//! Tensor infos: name, shape, type, and where the bytes lie; plus the shape rules the reader and
//! the writer share.

use std::ops::Range;

use super::limits::MAX_FILE_DIMS;
use crate::types::Type;

/// Dimensions of a library tensor (`ggml::MAX_DIMS`); a GGUF file carries at most
/// [`MAX_FILE_DIMS`], the fifth is always 1.
pub const MAX_DIMS: usize = 5;

/// One tensor described by a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub(crate) name: String,
    pub(crate) n_dims: u32,
    pub(crate) ne: [i64; MAX_DIMS],
    pub(crate) ty: Type,
    pub(crate) offset: u64,
    pub(crate) size: usize,
    pub(crate) file_range: Range<usize>,
}

impl TensorInfo {
    /// The tensor's name (`gguf_get_tensor_name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Dimensions as stored in the file (0 to 4; GGML writes at least 1 and drops trailing 1s).
    pub fn n_dims(&self) -> u32 {
        self.n_dims
    }

    /// Elements per dimension, padded with 1s to [`MAX_DIMS`].
    pub fn ne(&self) -> [i64; MAX_DIMS] {
        self.ne
    }

    /// The first `n_dims` elements of [`TensorInfo::ne`] (what ggmlR's `gguf_tensor_info`
    /// reports as the shape).
    pub fn shape(&self) -> &[i64] {
        &self.ne[..self.n_dims as usize]
    }

    /// Total number of elements.
    pub fn n_elements(&self) -> i64 {
        // The reader and the writer checked that this product does not overflow.
        self.ne.iter().product()
    }

    /// The element type (`gguf_get_tensor_type`).
    pub fn ty(&self) -> Type {
        self.ty
    }

    /// Offset of the data from the start of the data section (`gguf_get_tensor_offset`).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Size of the data in bytes (`gguf_get_tensor_size`).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The data's absolute byte range in the file (the data section's offset plus
    /// [`TensorInfo::offset`]); always inside the file for a tensor from [`super::GgufFile`].
    pub fn file_range(&self) -> Range<usize> {
        self.file_range.clone()
    }
}

/// Checks a shape for `ty` and returns its size in bytes, or a message naming what is wrong:
/// dims must be non-negative, `ne[0]` a whole number of blocks, and the element count and the
/// byte size must be representable.
pub(crate) fn checked_nbytes(ty: Type, ne: &[i64; MAX_DIMS]) -> Result<usize, String> {
    if let Some((j, v)) = ne.iter().enumerate().find(|(_, v)| **v < 0) {
        return Err(format!("ne[{j}] = {v} is negative"));
    }
    let blck = ty.blck_size() as i64;
    if ne[0] % blck != 0 {
        return Err(format!(
            "ne[0] = {} is not a multiple of the {} block size {blck}",
            ne[0],
            ty.name()
        ));
    }
    let overflow = || format!("element count of shape {ne:?} overflows i64");
    let mut count: i64 = 1;
    for v in ne {
        count = count.checked_mul(*v).ok_or_else(overflow)?;
    }
    let blocks = (count / blck) as u64;
    blocks
        .checked_mul(ty.type_size() as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format!("byte size of shape {ne:?} of {} overflows usize", ty.name()))
}

/// Dimensions GGML writes for `ne` (`ggml_n_dims`): through the last one that is not 1, at least 1.
pub(crate) fn n_dims_of(ne: &[i64; MAX_DIMS]) -> u32 {
    ne.iter().rposition(|&v| v != 1).map_or(1, |i| i as u32 + 1)
}

/// Pads a shape of up to [`MAX_DIMS`] dims with 1s; `Err` when it has more, or a fifth dim that
/// is not 1 (files carry [`MAX_FILE_DIMS`]).
pub(crate) fn file_shape(ne: &[i64]) -> Result<[i64; MAX_DIMS], String> {
    if ne.len() > MAX_DIMS {
        return Err(format!(
            "shape {ne:?} has {} dims, more than {MAX_DIMS}",
            ne.len()
        ));
    }
    let mut out = [1i64; MAX_DIMS];
    out[..ne.len()].copy_from_slice(ne);
    if out[MAX_FILE_DIMS..].iter().any(|&v| v != 1) {
        return Err(format!(
            "shape {ne:?}: GGUF files carry {MAX_FILE_DIMS} dims, so dims past the 4th must be 1"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbytes_rules() {
        let s = |v: &[i64]| file_shape(v).unwrap();
        assert_eq!(checked_nbytes(Type::F32, &s(&[3, 2])), Ok(24));
        assert_eq!(checked_nbytes(Type::Q4_0, &s(&[64, 2])), Ok(72));
        assert_eq!(checked_nbytes(Type::Q4_K, &s(&[256, 0])), Ok(0));
        assert!(checked_nbytes(Type::Q4_0, &s(&[33]))
            .unwrap_err()
            .contains("ne[0] = 33"));
        assert!(checked_nbytes(Type::F32, &s(&[4, -5]))
            .unwrap_err()
            .contains("ne[1] = -5"));
        let big = s(&[i64::MAX / 2, 3]);
        assert!(checked_nbytes(Type::F32, &big)
            .unwrap_err()
            .contains("overflows i64"));
        let wide = s(&[1 << 40, 1 << 22]);
        assert!(checked_nbytes(Type::F64, &wide)
            .unwrap_err()
            .contains("overflows usize"));
    }

    #[test]
    fn dims() {
        assert_eq!(n_dims_of(&[1; 5]), 1);
        assert_eq!(n_dims_of(&[4, 1, 1, 1, 1]), 1);
        assert_eq!(n_dims_of(&[4, 1, 3, 1, 1]), 3);
        assert_eq!(file_shape(&[2, 3]).unwrap(), [2, 3, 1, 1, 1]);
        assert!(file_shape(&[1, 1, 1, 1, 2]).is_err());
        assert!(file_shape(&[1; 6]).is_err());
        assert!(file_shape(&[2, 3, 4, 5, 1]).is_ok());
    }
}
