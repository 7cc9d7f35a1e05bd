//! Block quantization formats.
//!
//! TEMPORARY (branch `iquants`): only the grid-based i-quants live here, behind a minimal
//! public surface, until the `quants` branch (which owns this file and the public API) is
//! merged; take this file from that branch at merge.

mod iq1;
mod iq2;
mod iq3;
mod iq_common;
mod iq_grids;
mod iq_search;

use crate::{Error, Result, Type, QK_K};

type Dequantize = fn(&[u8], &mut [f32]);
type Quantize = fn(&[f32], &mut [u8], usize, usize, Option<&[f32]>) -> usize;

fn dequantizer(t: Type) -> Result<Dequantize> {
    Ok(match t {
        Type::IQ2_XXS => iq2::dequantize_row_iq2_xxs,
        Type::IQ2_XS => iq2::dequantize_row_iq2_xs,
        Type::IQ2_S => iq2::dequantize_row_iq2_s,
        Type::IQ3_XXS => iq3::dequantize_row_iq3_xxs,
        Type::IQ3_S => iq3::dequantize_row_iq3_s,
        Type::IQ1_S => iq1::dequantize_row_iq1_s,
        Type::IQ1_M => iq1::dequantize_row_iq1_m,
        _ => return Err(Error::unsupported(format!("dequantization of type {t}"))),
    })
}

fn quantizer(t: Type) -> Result<Quantize> {
    Ok(match t {
        Type::IQ2_XXS => iq2::quantize_iq2_xxs,
        Type::IQ2_XS => iq2::quantize_iq2_xs,
        Type::IQ2_S => iq2::quantize_iq2_s,
        Type::IQ3_XXS => iq3::quantize_iq3_xxs,
        Type::IQ3_S => iq3::quantize_iq3_s,
        Type::IQ1_S => iq1::quantize_iq1_s,
        Type::IQ1_M => iq1::quantize_iq1_m,
        _ => return Err(Error::unsupported(format!("quantization to type {t}"))),
    })
}

/// Whether quantizing to `t` needs an importance matrix (`ggml_quantize_requires_imatrix`).
pub fn requires_imatrix(t: Type) -> bool {
    matches!(t, Type::IQ2_XXS | Type::IQ2_XS | Type::IQ1_S)
}

/// Quantizes `n_rows` rows of `n_per_row` values (`ggml_quantize_chunk` from row 0).
pub fn quantize(
    t: Type,
    src: &[f32],
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> Result<Vec<u8>> {
    let quantize = quantizer(t)?;
    if n_per_row % QK_K != 0 {
        return Err(Error::invalid(format!(
            "n_per_row {n_per_row} is not a multiple of {QK_K}"
        )));
    }
    if n_rows.checked_mul(n_per_row) != Some(src.len()) {
        return Err(Error::invalid(format!(
            "src has {} values, not n_rows {n_rows} × n_per_row {n_per_row}",
            src.len()
        )));
    }
    if let Some(w) = imatrix {
        if w.len() != n_per_row {
            return Err(Error::invalid(format!(
                "imatrix has {} values, not {n_per_row}",
                w.len()
            )));
        }
    } else if requires_imatrix(t) {
        return Err(Error::invalid(format!(
            "imatrix is None, but {t} requires one"
        )));
    }
    let mut dst = vec![0u8; n_rows * n_per_row / QK_K * t.type_size()];
    let written = quantize(src, &mut dst, n_rows, n_per_row, imatrix);
    debug_assert_eq!(written, dst.len());
    Ok(dst)
}

/// Dequantizes whole blocks of `t` (`to_float`).
pub fn dequantize(t: Type, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let dequantize = dequantizer(t)?;
    if dst.len() % QK_K != 0 || src.len() != dst.len() / QK_K * t.type_size() {
        return Err(Error::invalid(format!(
            "src of {} bytes does not hold dst's {} values of {t}",
            src.len(),
            dst.len()
        )));
    }
    dequantize(src, dst);
    Ok(())
}
