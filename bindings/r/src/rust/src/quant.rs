//! Quantization under ggmlR's names: the generic `ggml_quantize_chunk` and type queries, and
//! the per-type `quantize_<t>`, `quantize_row_<t>_ref` and `dequantize_row_<t>` functions,
//! generated from one table per form.

use crate::args::{self, bytes, ggml_type, lib};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::{quants, Type};

/// `n` values of `src` (an error naming `arg` when it has another length).
fn floats(src: &Robj, arg: &str, n: usize) -> Result<Vec<f32>> {
    let v = args::f32s(src, arg)?;
    if v.len() == n {
        Ok(v)
    } else {
        Err(args::bad(
            arg,
            format!("has {} values; expected {n}", v.len()),
        ))
    }
}

/// Quantizes `n_rows` rows of `n_per_row` values (with an optional importance matrix of
/// `n_per_row` weights) into a raw vector.
fn quantize(
    fname: &str,
    ty: Type,
    src: &Robj,
    n_rows: &Robj,
    n_per_row: &Robj,
    imatrix: &Robj,
) -> Result<Robj> {
    let rows = bytes(n_rows, "n_rows")?;
    let per_row = bytes(n_per_row, "n_per_row")?;
    let n = rows
        .checked_mul(per_row)
        .ok_or_else(|| args::bad("n_rows", "times n_per_row overflows"))?;
    let x = floats(src, "src", n)?;
    let im = if imatrix.is_null() {
        None
    } else {
        Some(floats(imatrix, "imatrix", per_row)?)
    };
    let row = lib(fname, ty.row_size(per_row as i64))?;
    // On a helper thread that owns its data, so that Ctrl-C can stop the wait.
    let out = crate::rthread::wait(fname, move || {
        let mut out = vec![0u8; row * rows];
        quants::quantize_chunk(ty, &x, &mut out, 0, rows, per_row, im.as_deref()).map(|n| {
            out.truncate(n);
            out
        })
    })?;
    Ok(Raw::from_bytes(&lib(fname, out)?).into())
}

/// Quantization
///
/// `ggml_quantize_chunk` quantizes `nrows` rows of `n_per_row` values of `src` to `type`
/// (GGML's `ggml_quantize_chunk`, reference or importance-weighted quantizer as GGML chooses)
/// and returns the blocks as a raw vector. `ggml_quantize_requires_imatrix` says whether a
/// type needs an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S). `ggml_quant_block_info`
/// lists a type's `type_name`, `type_size` (bytes per block), `block_size` (elements per
/// block) and `is_quantized`. Quantizing can be stopped with Ctrl-C (an R error).
/// `ggml_quantize_init` checks `type` and `ggml_quantize_free`
/// does nothing: this library builds its lookup tables on first use and keeps them, so there
/// is nothing to prepare or release (both exist so that ggmlR code runs).
/// @param type A `GGML_TYPE_*` code.
/// @param src Numeric values, `nrows * n_per_row` of them.
/// @param nrows Number of rows.
/// @param n_per_row Values per row (a multiple of the type's block size).
/// @return A raw vector, a logical, a list, or `NULL` invisibly.
/// @examples
/// q <- ggml_quantize_chunk(GGML_TYPE_Q8_0, sin(1:64), 2, 32)
/// length(q)  # 2 blocks of 34 bytes
/// ggml_quantize_requires_imatrix(GGML_TYPE_Q4_0)
/// str(ggml_quant_block_info(GGML_TYPE_Q4_K))
/// ggml_quantize_init(GGML_TYPE_Q4_0)
/// ggml_quantize_free()
/// @export
#[extendr]
fn ggml_quantize_chunk(r#type: Robj, src: Robj, nrows: Robj, n_per_row: Robj) -> Result<Robj> {
    let ty = ggml_type(&r#type, "type")?;
    let nothing: Robj = ().into();
    quantize(
        "ggml_quantize_chunk",
        ty,
        &src,
        &nrows,
        &n_per_row,
        &nothing,
    )
    .map_err(|e| extendr_api::Error::Other(e.to_string().replace("`n_rows`", "`nrows`")))
}

/// @rdname ggml_quantize_chunk
/// @export
#[extendr]
fn ggml_quantize_requires_imatrix(r#type: Robj) -> Result<bool> {
    Ok(ggml::quantize_requires_imatrix(ggml_type(&r#type, "type")?))
}

/// @rdname ggml_quantize_chunk
/// @export
#[extendr]
fn ggml_quant_block_info(r#type: Robj) -> Result<Robj> {
    let t = ggml_type(&r#type, "type")?;
    Ok(list!(
        type_name = t.name(),
        type_size = t.type_size() as f64,
        block_size = t.blck_size() as f64,
        is_quantized = t.is_quantized()
    )
    .into())
}

/// @rdname ggml_quantize_chunk
/// @export
#[extendr(invisible)]
fn ggml_quantize_init(r#type: Robj) -> Result<()> {
    ggml_type(&r#type, "type").map(drop)
}

/// @rdname ggml_quantize_chunk
/// @export
#[extendr(invisible)]
fn ggml_quantize_free() {}

extendr_module! {
    mod quant;
    use quantize_fns;
    use quantize_ref_fns;
    use dequantize_fns;
    fn ggml_quantize_chunk;
    fn ggml_quantize_requires_imatrix;
    fn ggml_quant_block_info;
    fn ggml_quantize_init;
    fn ggml_quantize_free;
}

/// `quantize_<t>(src_data, n_rows, n_per_row, imatrix = NULL)` for each type of the table.
macro_rules! quantize_fns {
    ($($name:ident $ty:ident;)*) => {
        pub mod quantize_fns {
            use super::*;
            $(
                #[doc = " @rdname quantize_q4_0"]
                #[doc = " @export"]
                #[allow(non_snake_case)]
                #[extendr]
                fn $name(src_data: Robj, n_rows: Robj, n_per_row: Robj, #[extendr(default = "NULL")] imatrix: Robj) -> Result<Robj> {
                    let src = src_data;
                    quantize(stringify!($name), Type::$ty, &src, &n_rows, &n_per_row, &imatrix)
                        .map_err(|e| extendr_api::Error::Other(e.to_string().replace("`src`", "`src_data`")))
                }
            )*
            extendr_module! {
                mod quantize_fns;
                $(fn $name;)*
            }
        }
    };
}

/// `quantize_row_<t>_ref(src_data, n_elements)` for each type of the table.
macro_rules! quantize_ref_fns {
    ($($name:ident $ty:ident;)*) => {
        pub mod quantize_ref_fns {
            use super::*;
            $(
                #[doc = " @rdname quantize_q4_0"]
                #[doc = " @export"]
                #[allow(non_snake_case)]
                #[extendr]
                fn $name(src_data: Robj, n_elements: Robj) -> Result<Robj> {
                    let n = bytes(&n_elements, "n_elements")?;
                    let x = floats(&src_data, "src_data", n)?;
                    let mut out = vec![0u8; lib(stringify!($name), Type::$ty.row_size(n as i64))?];
                    lib(stringify!($name), quants::quantize_row_ref(Type::$ty, &x, &mut out))?;
                    Ok(Raw::from_bytes(&out).into())
                }
            )*
            extendr_module! {
                mod quantize_ref_fns;
                $(fn $name;)*
            }
        }
    };
}

/// `dequantize_row_<t>(raw_data, n_elements)` for each type of the table.
macro_rules! dequantize_fns {
    ($($name:ident $ty:ident;)*) => {
        pub mod dequantize_fns {
            use super::*;
            $(
                #[doc = " @rdname quantize_q4_0"]
                #[doc = " @export"]
                #[allow(non_snake_case)]
                #[extendr]
                fn $name(raw_data: Robj, n_elements: Robj) -> Result<Vec<f64>> {
                    let src = args::raw(&raw_data, "raw_data")?;
                    let n = bytes(&n_elements, "n_elements")?;
                    let mut out = vec![0f32; n];
                    lib(stringify!($name), quants::dequantize_row(Type::$ty, &src, &mut out))?;
                    Ok(out.into_iter().map(f64::from).collect())
                }
            )*
            extendr_module! {
                mod dequantize_fns;
                $(fn $name;)*
            }
        }
    };
}

quantize_fns! {
    quantize_q4_0 Q4_0; quantize_q4_1 Q4_1; quantize_q5_0 Q5_0; quantize_q5_1 Q5_1;
    quantize_q8_0 Q8_0; quantize_q2_K Q2_K; quantize_q3_K Q3_K; quantize_q4_K Q4_K;
    quantize_q5_K Q5_K; quantize_q6_K Q6_K; quantize_iq2_xxs IQ2_XXS; quantize_iq2_xs IQ2_XS;
    quantize_iq3_xxs IQ3_XXS; quantize_iq1_s IQ1_S; quantize_iq4_nl IQ4_NL; quantize_iq3_s IQ3_S;
    quantize_iq2_s IQ2_S; quantize_iq4_xs IQ4_XS; quantize_iq1_m IQ1_M; quantize_tq1_0 TQ1_0;
    quantize_tq2_0 TQ2_0; quantize_mxfp4 MXFP4; quantize_nvfp4 NVFP4; quantize_q1_0 Q1_0;
}

quantize_ref_fns! {
    quantize_row_q4_0_ref Q4_0; quantize_row_q4_1_ref Q4_1; quantize_row_q5_0_ref Q5_0;
    quantize_row_q5_1_ref Q5_1; quantize_row_q8_0_ref Q8_0; quantize_row_q8_1_ref Q8_1;
    quantize_row_q2_K_ref Q2_K; quantize_row_q3_K_ref Q3_K; quantize_row_q4_K_ref Q4_K;
    quantize_row_q5_K_ref Q5_K; quantize_row_q6_K_ref Q6_K; quantize_row_q8_K_ref Q8_K;
    quantize_row_iq3_xxs_ref IQ3_XXS; quantize_row_iq4_nl_ref IQ4_NL;
    quantize_row_iq3_s_ref IQ3_S; quantize_row_iq2_s_ref IQ2_S; quantize_row_iq4_xs_ref IQ4_XS;
    quantize_row_tq1_0_ref TQ1_0; quantize_row_tq2_0_ref TQ2_0; quantize_row_mxfp4_ref MXFP4;
}

dequantize_fns! {
    dequantize_row_q4_0 Q4_0; dequantize_row_q4_1 Q4_1; dequantize_row_q5_0 Q5_0;
    dequantize_row_q5_1 Q5_1; dequantize_row_q8_0 Q8_0; dequantize_row_q2_K Q2_K;
    dequantize_row_q3_K Q3_K; dequantize_row_q4_K Q4_K; dequantize_row_q5_K Q5_K;
    dequantize_row_q6_K Q6_K; dequantize_row_q8_K Q8_K; dequantize_row_iq2_xxs IQ2_XXS;
    dequantize_row_iq2_xs IQ2_XS; dequantize_row_iq3_xxs IQ3_XXS; dequantize_row_iq1_s IQ1_S;
    dequantize_row_iq4_nl IQ4_NL; dequantize_row_iq3_s IQ3_S; dequantize_row_iq2_s IQ2_S;
    dequantize_row_iq4_xs IQ4_XS; dequantize_row_iq1_m IQ1_M; dequantize_row_tq1_0 TQ1_0;
    dequantize_row_tq2_0 TQ2_0; dequantize_row_mxfp4 MXFP4; dequantize_row_nvfp4 NVFP4;
    dequantize_row_q1_0 Q1_0;
}
