//! The type table: every value of GGML's `enum ggml_type`, with its name, block size and
//! bytes per block, plus the f16/bf16 scalar conversions.
//!
//! Numbers, names and sizes are GGML's (ggml 0.21). The removed ids (4, 5, 31–33, 36–38) have no
//! variant, so they cannot be constructed: [`Type::from_u32`] answers `Err` for them.

use crate::error::{Error, Result};

pub use half::{bf16, f16};

/// Elements in one super-block of the k-quants and i-quants (GGML's `QK_K`).
pub const QK_K: usize = 256;

/// A tensor element type, with GGML's numeric value (`Type::Q4_K as u32 == 12`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Type {
    /// 32-bit IEEE float.
    F32 = 0,
    /// 16-bit IEEE half float.
    F16 = 1,
    /// 4-bit, blocks of 32 with an f16 scale.
    Q4_0 = 2,
    /// 4-bit, blocks of 32 with an f16 scale and minimum.
    Q4_1 = 3,
    /// 5-bit, blocks of 32 with an f16 scale.
    Q5_0 = 6,
    /// 5-bit, blocks of 32 with an f16 scale and minimum.
    Q5_1 = 7,
    /// 8-bit, blocks of 32 with an f16 scale.
    Q8_0 = 8,
    /// 8-bit, blocks of 32 with an f16 scale and the scaled sum (activations only).
    Q8_1 = 9,
    /// 2-bit k-quant (super-blocks of 256).
    Q2_K = 10,
    /// 3-bit k-quant.
    Q3_K = 11,
    /// 4-bit k-quant.
    Q4_K = 12,
    /// 5-bit k-quant.
    Q5_K = 13,
    /// 6-bit k-quant.
    Q6_K = 14,
    /// 8-bit k-quant (activations only).
    Q8_K = 15,
    /// 2.06 bits per weight i-quant.
    IQ2_XXS = 16,
    /// 2.31 bits per weight i-quant.
    IQ2_XS = 17,
    /// 3.06 bits per weight i-quant.
    IQ3_XXS = 18,
    /// 1.56 bits per weight i-quant.
    IQ1_S = 19,
    /// 4-bit non-linear, blocks of 32.
    IQ4_NL = 20,
    /// 3.44 bits per weight i-quant.
    IQ3_S = 21,
    /// 2.5 bits per weight i-quant.
    IQ2_S = 22,
    /// 4.25 bits per weight non-linear i-quant.
    IQ4_XS = 23,
    /// 8-bit signed integer.
    I8 = 24,
    /// 16-bit signed integer.
    I16 = 25,
    /// 32-bit signed integer.
    I32 = 26,
    /// 64-bit signed integer.
    I64 = 27,
    /// 64-bit IEEE float.
    F64 = 28,
    /// 1.75 bits per weight i-quant.
    IQ1_M = 29,
    /// bfloat16.
    BF16 = 30,
    /// Ternary, 1.69 bits per weight.
    TQ1_0 = 34,
    /// Ternary, 2.06 bits per weight.
    TQ2_0 = 35,
    /// MX FP4 (E2M1 values, E8M0 shared scale), blocks of 32.
    MXFP4 = 39,
    /// NVIDIA FP4 (E2M1 values, four UE4M3 sub-block scales), blocks of 64.
    NVFP4 = 40,
    /// 1-bit, blocks of 128 with an f16 scale.
    Q1_0 = 41,
    /// 2-bit, blocks of 64 with an f16 scale.
    Q2_0 = 42,
}

/// One past the largest type id (GGML's `GGML_TYPE_COUNT`).
pub const TYPE_COUNT: u32 = 43;

struct Traits {
    name: &'static str,
    blck: usize,
    size: usize,
    quantized: bool,
}

const fn t(name: &'static str, blck: usize, size: usize, quantized: bool) -> Traits {
    Traits {
        name,
        blck,
        size,
        quantized,
    }
}

impl Type {
    /// Every type, in id order.
    pub const ALL: [Type; 35] = [
        Type::F32,
        Type::F16,
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q8_0,
        Type::Q8_1,
        Type::Q2_K,
        Type::Q3_K,
        Type::Q4_K,
        Type::Q5_K,
        Type::Q6_K,
        Type::Q8_K,
        Type::IQ2_XXS,
        Type::IQ2_XS,
        Type::IQ3_XXS,
        Type::IQ1_S,
        Type::IQ4_NL,
        Type::IQ3_S,
        Type::IQ2_S,
        Type::IQ4_XS,
        Type::I8,
        Type::I16,
        Type::I32,
        Type::I64,
        Type::F64,
        Type::IQ1_M,
        Type::BF16,
        Type::TQ1_0,
        Type::TQ2_0,
        Type::MXFP4,
        Type::NVFP4,
        Type::Q1_0,
        Type::Q2_0,
    ];

    fn traits(self) -> Traits {
        use Type::*;
        match self {
            F32 => t("f32", 1, 4, false),
            F16 => t("f16", 1, 2, false),
            Q4_0 => t("q4_0", 32, 18, true),
            Q4_1 => t("q4_1", 32, 20, true),
            Q5_0 => t("q5_0", 32, 22, true),
            Q5_1 => t("q5_1", 32, 24, true),
            Q8_0 => t("q8_0", 32, 34, true),
            Q8_1 => t("q8_1", 32, 36, true),
            Q2_K => t("q2_K", 256, 84, true),
            Q3_K => t("q3_K", 256, 110, true),
            Q4_K => t("q4_K", 256, 144, true),
            Q5_K => t("q5_K", 256, 176, true),
            Q6_K => t("q6_K", 256, 210, true),
            Q8_K => t("q8_K", 256, 292, true),
            IQ2_XXS => t("iq2_xxs", 256, 66, true),
            IQ2_XS => t("iq2_xs", 256, 74, true),
            IQ3_XXS => t("iq3_xxs", 256, 98, true),
            IQ1_S => t("iq1_s", 256, 50, true),
            IQ4_NL => t("iq4_nl", 32, 18, true),
            IQ3_S => t("iq3_s", 256, 110, true),
            IQ2_S => t("iq2_s", 256, 82, true),
            IQ4_XS => t("iq4_xs", 256, 136, true),
            I8 => t("i8", 1, 1, false),
            I16 => t("i16", 1, 2, false),
            I32 => t("i32", 1, 4, false),
            I64 => t("i64", 1, 8, false),
            F64 => t("f64", 1, 8, false),
            IQ1_M => t("iq1_m", 256, 56, true),
            BF16 => t("bf16", 1, 2, false),
            TQ1_0 => t("tq1_0", 256, 54, true),
            TQ2_0 => t("tq2_0", 256, 66, true),
            MXFP4 => t("mxfp4", 32, 17, true),
            NVFP4 => t("nvfp4", 64, 36, true),
            Q1_0 => t("q1_0", 128, 18, true),
            Q2_0 => t("q2_0", 64, 18, true),
        }
    }

    /// The type with GGML id `id`; `Err` for ids that do not exist or were removed.
    pub fn from_u32(id: u32) -> Result<Type> {
        Type::ALL
            .iter()
            .copied()
            .find(|t| *t as u32 == id)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "type id {id} is not a GGML type (removed, or >= {TYPE_COUNT})"
                ))
            })
    }

    /// The type whose GGML name is `name` (`"q4_K"`, `"f16"`; case-insensitive).
    pub fn from_name(name: &str) -> Result<Type> {
        Type::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::invalid(format!("type name {name:?} is not a GGML type")))
    }

    /// GGML's name for the type (`ggml_type_name`), e.g. `"q4_K"`.
    pub fn name(self) -> &'static str {
        self.traits().name
    }

    /// Elements per block (`ggml_blck_size`): 1 for plain types.
    pub fn blck_size(self) -> usize {
        self.traits().blck
    }

    /// Bytes per block (`ggml_type_size`).
    pub fn type_size(self) -> usize {
        self.traits().size
    }

    /// Whether the type is a block-quantized format (`ggml_is_quantized`).
    pub fn is_quantized(self) -> bool {
        self.traits().quantized
    }

    /// Whether the type is a float type computed on directly (F32, F16, BF16, F64).
    pub fn is_float(self) -> bool {
        matches!(self, Type::F32 | Type::F16 | Type::BF16 | Type::F64)
    }

    /// Bytes taken by `ne` elements (`ggml_row_size`); `Err` when `ne` is not a whole number of
    /// blocks, or when the byte count does not fit in `usize`.
    pub fn row_size(self, ne: i64) -> Result<usize> {
        let blck = self.blck_size() as i64;
        if ne < 0 || ne % blck != 0 {
            return Err(Error::invalid(format!(
                "row of {ne} elements is not a whole number of {} blocks of {blck}",
                self.name()
            )));
        }
        usize::try_from(ne / blck)
            .ok()
            .and_then(|blocks| blocks.checked_mul(self.type_size()))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "row of {ne} {} elements is more bytes than usize can count",
                    self.name()
                ))
            })
    }
}

impl std::fmt::Display for Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// f32 → f16 with round-to-nearest-even (`ggml_fp32_to_fp16`).
#[inline]
pub fn f32_to_f16(x: f32) -> f16 {
    f16::from_f32(x)
}

/// f16 → f32, exact (`ggml_fp16_to_fp32`).
#[inline]
pub fn f16_to_f32(x: f16) -> f32 {
    x.to_f32()
}

/// f32 → bf16 as GGML does (`ggml_fp32_to_bf16`): round to nearest even, NaN kept quiet.
#[inline]
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        // NaN: force the quiet bit so truncation cannot turn it into infinity.
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    bf16::from_bits(((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16)
}

/// bf16 → f32, exact.
#[inline]
pub fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_ggml() {
        let ids: Vec<u32> = Type::ALL.iter().map(|t| *t as u32).collect();
        assert_eq!(ids.len(), 35);
        assert_eq!(Type::Q4_K as u32, 12);
        assert_eq!(Type::from_u32(12).unwrap(), Type::Q4_K);
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, 1000] {
            let e = Type::from_u32(removed).unwrap_err().to_string();
            assert!(e.contains(&removed.to_string()), "{e}");
        }
        assert_eq!(Type::NVFP4.blck_size(), 64);
        assert_eq!(Type::NVFP4.type_size(), 36);
        assert_eq!(Type::Q6_K.type_size(), 210);
        assert!(Type::IQ1_M.is_quantized());
        assert!(!Type::BF16.is_quantized());
        assert_eq!(Type::from_name("Q4_k").unwrap(), Type::Q4_K);
        assert_eq!(Type::Q4_0.row_size(64).unwrap(), 36);
        assert!(Type::Q4_0.row_size(33).is_err());
        // 4 * i64::MAX bytes overflow usize: an error, not a panic or a wrapped size.
        let e = Type::F32.row_size(i64::MAX).unwrap_err().to_string();
        assert!(e.contains(&i64::MAX.to_string()), "{e}");
        assert_eq!(Type::I8.row_size(i64::MAX).unwrap(), i64::MAX as usize);
    }

    #[test]
    fn bf16_rounding() {
        assert_eq!(f32_to_bf16(1.0).to_bits(), 0x3f80);
        // 1 + 2^-8 is a tie between 1 and 1+2^-7: rounds to even (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0).to_bits(), 0x3f80);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(bf16_to_f32(f32_to_bf16(-2.5)), -2.5);
        assert_eq!(
            f16_to_f32(f32_to_f16(0.333)),
            half::f16::from_f32(0.333).to_f32()
        );
    }
}
