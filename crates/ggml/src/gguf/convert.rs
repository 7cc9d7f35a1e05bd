//! Converting the bytes of a tensor to f32 (ggmlR's `gguf_tensor_data`): f64 and the integer
//! types element by element, every other type through [`crate::quants::dequantize_row`] (GGML's
//! `to_float`).

use crate::error::Result;
use crate::types::Type;

/// `data` (little-endian elements or blocks of `ty`) as f32.
pub(crate) fn to_f32(ty: Type, data: &[u8]) -> Result<Vec<f32>> {
    fn each<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f32) -> Vec<f32> {
        data.chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                f(a)
            })
            .collect()
    }
    Ok(match ty {
        Type::F64 => each(data, |b| f64::from_le_bytes(b) as f32),
        Type::I8 => data.iter().map(|&b| b as i8 as f32).collect(),
        Type::I16 => each(data, |b| i16::from_le_bytes(b) as f32),
        Type::I32 => each(data, |b| i32::from_le_bytes(b) as f32),
        Type::I64 => each(data, |b| i64::from_le_bytes(b) as f32),
        // F32, F16, BF16 and the block-quantized types.
        _ => {
            let mut out = vec![0f32; data.len() / ty.type_size() * ty.blck_size()];
            crate::quants::dequantize_row(ty, data, &mut out)?;
            out
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_types() {
        assert_eq!(to_f32(Type::F32, &1.5f32.to_le_bytes()).unwrap(), [1.5]);
        assert_eq!(to_f32(Type::F16, &[0x00, 0x3c]).unwrap(), [1.0]);
        assert_eq!(to_f32(Type::BF16, &[0x80, 0xbf]).unwrap(), [-1.0]);
        assert_eq!(to_f32(Type::I8, &[0xfe]).unwrap(), [-2.0]);
        assert_eq!(to_f32(Type::I64, &(-7i64).to_le_bytes()).unwrap(), [-7.0]);
        // One Q8_0 block: scale 0.5 (f16 0x3800), quants 0, 1, …, 31.
        let mut q8 = vec![0x00, 0x38];
        q8.extend(0u8..32);
        let want: Vec<f32> = (0..32).map(|i| i as f32 * 0.5).collect();
        assert_eq!(to_f32(Type::Q8_0, &q8).unwrap(), want);
    }
}
