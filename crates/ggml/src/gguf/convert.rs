//! Converting the bytes of a plain-typed tensor to f32 (ggmlR's `gguf_tensor_data` for the
//! types that need no dequantization tables).

use crate::error::{Error, Result};
use crate::types::{bf16_to_f32, f16_to_f32, Type};
use crate::{bf16, f16};

/// `data` (little-endian elements of `ty`) as f32. Quantized types are `Err(Unsupported)`.
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
        Type::F32 => each(data, f32::from_le_bytes),
        Type::F16 => each(data, |b| f16_to_f32(f16::from_bits(u16::from_le_bytes(b)))),
        Type::BF16 => each(data, |b| {
            bf16_to_f32(bf16::from_bits(u16::from_le_bytes(b)))
        }),
        Type::F64 => each(data, |b| f64::from_le_bytes(b) as f32),
        Type::I8 => data.iter().map(|&b| b as i8 as f32).collect(),
        Type::I16 => each(data, |b| i16::from_le_bytes(b) as f32),
        Type::I32 => each(data, |b| i32::from_le_bytes(b) as f32),
        Type::I64 => each(data, |b| i64::from_le_bytes(b) as f32),
        q => {
            return Err(Error::unsupported(format!(
                "converting {q} to f32 needs dequantization, which this reader does not do"
            )))
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
        assert!(to_f32(Type::Q4_0, &[0; 18]).is_err());
    }
}
