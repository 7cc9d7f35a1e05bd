//! Every operator builder of the library, under ggmlR's names, argument order and defaults
//! (GGML's C names and order for the builders ggmlR lacks). The wrappers come from one table
//! per family: each line names the R function, its arguments with the kind each is read as
//! and ggmlR's default, and the library call. Each family is a module with its own
//! `extendr_module!` and one Rd page (`R/docs-ops.R` holds the title, arguments and example).

use crate::args::{bad, bytes, dim, f32_arg, flag, ggml_type, i32_arg, i64_arg, lib, Slot};
use crate::{ctx_arg, opt_tensor, tensor_arg};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::ops::{GluOp, PoolOp, ScaleMode, SortOrder, TriType};

/// The name an argument has in R (`r#as` is R's `as`).
fn r_name(rust: &'static str) -> &'static str {
    rust.trim_start_matches("r#")
}

/// Reads one operator argument by its kind: `T` a tensor, `OT` a tensor or `NULL`, `F` a C
/// `float`, `I` an `int`, `L` an `int64_t`, `D` a size (an `int64_t` ≥ 0), `U` a byte count or offset, `B` a logical, `Ty` a
/// `GGML_TYPE_*` code, `I4` four `int`s; `Sort`, `Pool`, `Glu`, `Tri` and `Mode` GGML's enums
/// (sort order, pool op, GLU op, triangle type, scale mode) by their codes.
macro_rules! arg {
    (T, $v:expr, $n:expr) => {
        tensor_arg($v, $n)?
    };
    (OT, $v:expr, $n:expr) => {
        opt_tensor($v, $n)?
    };
    (F, $v:expr, $n:expr) => {
        f32_arg($v, $n)?
    };
    (I, $v:expr, $n:expr) => {
        i32_arg($v, $n)?
    };
    (L, $v:expr, $n:expr) => {
        i64_arg($v, $n)?
    };
    (D, $v:expr, $n:expr) => {
        dim($v, $n)?
    };
    (U, $v:expr, $n:expr) => {
        bytes($v, $n)?
    };
    (B, $v:expr, $n:expr) => {
        flag($v, $n)?
    };
    (Ty, $v:expr, $n:expr) => {
        ggml_type($v, $n)?
    };
    (I4, $v:expr, $n:expr) => {
        four_ints($v, $n)?
    };
    (Sort, $v:expr, $n:expr) => {
        code($v, $n, "GGML_SORT_ORDER_* value", SortOrder::from_i32)?
    };
    (Pool, $v:expr, $n:expr) => {
        code($v, $n, "GGML_OP_POOL_* value", PoolOp::from_i32)?
    };
    (Glu, $v:expr, $n:expr) => {
        code($v, $n, "GGML_GLU_OP_* value", GluOp::from_i32)?
    };
    (Tri, $v:expr, $n:expr) => {
        code($v, $n, "GGML_TRI_TYPE_* value", TriType::from_i32)?
    };
    (Mode, $v:expr, $n:expr) => {
        code($v, $n, "GGML_SCALE_MODE_* value", scale_mode)?
    };
}

/// One family of builders: a module `$m` whose functions all document on the Rd page `$rd`.
/// Each returns the new tensor; a library error is an R error prefixed with the R name.
macro_rules! ops {
    (mod $m:ident, $rd:tt; $(fn $name:ident($c:ident $(, $arg:ident: $kind:ident $(= $def:tt)?)*) $body:expr;)*) => {
        pub mod $m {
            use super::*;
            $(
                #[doc = $rd]
                // R's argument list is GGML's: names (`is_2D`, `K`) and counts as in C.
                #[allow(non_snake_case, clippy::too_many_arguments)]
                #[extendr]
                fn $name(ctx: Robj $(, $(#[extendr(default = $def)])? $arg: Robj)*) -> Result<Robj> {
                    let $c = ctx_arg(&ctx)?;
                    $(let $arg = arg!($kind, &$arg, r_name(stringify!($arg)));)*
                    Ok(Slot::wrap(lib(stringify!($name), $body)?))
                }
            )*
            extendr_module! {
                mod $m;
                $(fn $name;)*
            }
        }
    };
}

/// A GGML enum argument: `from` maps the code to the library's enum.
fn code<T>(obj: &Robj, arg: &str, what: &str, from: fn(i32) -> Option<T>) -> Result<T> {
    let v = i32_arg(obj, arg)?;
    from(v).ok_or_else(|| bad(arg, format!("{v} is not a {what}")))
}

fn scale_mode(v: i32) -> Option<ScaleMode> {
    match v {
        0 => Some(ScaleMode::Nearest),
        1 => Some(ScaleMode::Bilinear),
        2 => Some(ScaleMode::Bicubic),
        _ => None,
    }
}

/// Four C `int`s (rope_multi's `sections`).
fn four_ints(obj: &Robj, arg: &str) -> Result<[i32; 4]> {
    let v = crate::args::i32s(obj, arg)?;
    v.try_into()
        .map_err(|v: Vec<i32>| bad(arg, format!("expected 4 integers, got {}", v.len())))
}

ops! { mod unary, " @rdname ggml_unary";
    fn ggml_abs(cx, a: T) cx.abs(&a);
    fn ggml_abs_inplace(cx, a: T) cx.abs_inplace(&a);
    fn ggml_sgn(cx, a: T) cx.sgn(&a);
    fn ggml_sgn_inplace(cx, a: T) cx.sgn_inplace(&a);
    fn ggml_neg(cx, a: T) cx.neg(&a);
    fn ggml_neg_inplace(cx, a: T) cx.neg_inplace(&a);
    fn ggml_step(cx, a: T) cx.step(&a);
    fn ggml_step_inplace(cx, a: T) cx.step_inplace(&a);
    fn ggml_tanh(cx, a: T) cx.tanh(&a);
    fn ggml_tanh_inplace(cx, a: T) cx.tanh_inplace(&a);
    fn ggml_elu(cx, a: T) cx.elu(&a);
    fn ggml_elu_inplace(cx, a: T) cx.elu_inplace(&a);
    fn ggml_relu(cx, a: T) cx.relu(&a);
    fn ggml_relu_inplace(cx, a: T) cx.relu_inplace(&a);
    fn ggml_sigmoid(cx, a: T) cx.sigmoid(&a);
    fn ggml_sigmoid_inplace(cx, a: T) cx.sigmoid_inplace(&a);
    fn ggml_gelu(cx, a: T) cx.gelu(&a);
    fn ggml_gelu_inplace(cx, a: T) cx.gelu_inplace(&a);
    fn ggml_gelu_quick(cx, a: T) cx.gelu_quick(&a);
    fn ggml_gelu_quick_inplace(cx, a: T) cx.gelu_quick_inplace(&a);
    fn ggml_gelu_erf(cx, a: T) cx.gelu_erf(&a);
    fn ggml_gelu_erf_inplace(cx, a: T) cx.gelu_erf_inplace(&a);
    fn ggml_silu(cx, a: T) cx.silu(&a);
    fn ggml_silu_inplace(cx, a: T) cx.silu_inplace(&a);
    fn ggml_hardswish(cx, a: T) cx.hardswish(&a);
    fn ggml_hardswish_inplace(cx, a: T) cx.hardswish_inplace(&a);
    fn ggml_hardsigmoid(cx, a: T) cx.hardsigmoid(&a);
    fn ggml_hardsigmoid_inplace(cx, a: T) cx.hardsigmoid_inplace(&a);
    fn ggml_exp(cx, a: T) cx.exp(&a);
    fn ggml_exp_inplace(cx, a: T) cx.exp_inplace(&a);
    fn ggml_expm1(cx, a: T) cx.expm1(&a);
    fn ggml_expm1_inplace(cx, a: T) cx.expm1_inplace(&a);
    fn ggml_softplus(cx, a: T) cx.softplus(&a);
    fn ggml_softplus_inplace(cx, a: T) cx.softplus_inplace(&a);
    fn ggml_floor(cx, a: T) cx.floor(&a);
    fn ggml_floor_inplace(cx, a: T) cx.floor_inplace(&a);
    fn ggml_ceil(cx, a: T) cx.ceil(&a);
    fn ggml_ceil_inplace(cx, a: T) cx.ceil_inplace(&a);
    fn ggml_round(cx, a: T) cx.round(&a);
    fn ggml_round_inplace(cx, a: T) cx.round_inplace(&a);
    fn ggml_trunc(cx, a: T) cx.trunc(&a);
    fn ggml_trunc_inplace(cx, a: T) cx.trunc_inplace(&a);
    fn ggml_sqr(cx, a: T) cx.sqr(&a);
    fn ggml_sqr_inplace(cx, a: T) cx.sqr_inplace(&a);
    fn ggml_sqrt(cx, a: T) cx.sqrt(&a);
    fn ggml_sqrt_inplace(cx, a: T) cx.sqrt_inplace(&a);
    fn ggml_log(cx, a: T) cx.log(&a);
    fn ggml_log_inplace(cx, a: T) cx.log_inplace(&a);
    fn ggml_sin(cx, a: T) cx.sin(&a);
    fn ggml_sin_inplace(cx, a: T) cx.sin_inplace(&a);
    fn ggml_cos(cx, a: T) cx.cos(&a);
    fn ggml_cos_inplace(cx, a: T) cx.cos_inplace(&a);
}

ops! { mod scalar_ops, " @rdname ggml_scalar_ops";
    fn ggml_scale(cx, a: T, s: F) cx.scale(&a, s);
    fn ggml_scale_inplace(cx, a: T, s: F) cx.scale_inplace(&a, s);
    fn ggml_scale_bias(cx, a: T, s: F, b: F) cx.scale_bias(&a, s, b);
    fn ggml_scale_bias_inplace(cx, a: T, s: F, b: F) cx.scale_bias_inplace(&a, s, b);
    fn ggml_clamp(cx, a: T, min_val: F, max_val: F) cx.clamp(&a, min_val, max_val);
    fn ggml_clamp_inplace(cx, a: T, min_val: F, max_val: F) cx.clamp_inplace(&a, min_val, max_val);
    fn ggml_leaky_relu(cx, a: T, negative_slope: F = "0.01", inplace: B = "FALSE")
        cx.leaky_relu(&a, negative_slope, inplace);
    fn ggml_fill(cx, a: T, value: F) cx.fill(&a, value);
    fn ggml_fill_inplace(cx, a: T, value: F) cx.fill_inplace(&a, value);
    fn ggml_xielu(cx, a: T, alpha_n: F, alpha_p: F, beta: F, eps: F)
        cx.xielu(&a, alpha_n, alpha_p, beta, eps);
}

ops! { mod binary, " @rdname ggml_binary";
    fn ggml_add(cx, a: T, b: T) cx.add(&a, &b);
    fn ggml_add_inplace(cx, a: T, b: T) cx.add_inplace(&a, &b);
    fn ggml_sub(cx, a: T, b: T) cx.sub(&a, &b);
    fn ggml_sub_inplace(cx, a: T, b: T) cx.sub_inplace(&a, &b);
    fn ggml_mul(cx, a: T, b: T) cx.mul(&a, &b);
    fn ggml_mul_inplace(cx, a: T, b: T) cx.mul_inplace(&a, &b);
    fn ggml_div(cx, a: T, b: T) cx.div(&a, &b);
    fn ggml_div_inplace(cx, a: T, b: T) cx.div_inplace(&a, &b);
    fn ggml_add1(cx, a: T, b: T) cx.add1(&a, &b);
    fn ggml_add1_inplace(cx, a: T, b: T) cx.add1_inplace(&a, &b);
    fn ggml_add_id(cx, a: T, b: T, ids: T) cx.add_id(&a, &b, &ids);
}

ops! { mod matrix, " @rdname ggml_matrix_ops";
    fn ggml_mul_mat(cx, a: T, b: T) cx.mul_mat(&a, &b);
    fn ggml_mul_mat_id(cx, r#as: T, b: T, ids: T) cx.mul_mat_id(&r#as, &b, &ids);
    fn ggml_out_prod(cx, a: T, b: T) cx.out_prod(&a, &b);
    fn ggml_diag(cx, a: T) cx.diag(&a);
    fn ggml_solve_tri(cx, a: T, b: T, left: B, lower: B, uni: B) cx.solve_tri(&a, &b, left, lower, uni);
    fn ggml_tri(cx, a: T, r#type: Tri) cx.tri(&a, r#type);
}

ops! { mod reduce, " @rdname ggml_reduce";
    fn ggml_sum(cx, a: T) cx.sum(&a);
    fn ggml_sum_rows(cx, a: T) cx.sum_rows(&a);
    fn ggml_mean(cx, a: T) cx.mean(&a);
    fn ggml_argmax(cx, a: T) cx.argmax(&a);
    fn ggml_count_equal(cx, a: T, b: T) cx.count_equal(&a, &b);
    fn ggml_cumsum(cx, a: T) cx.cumsum(&a);
    fn ggml_cross_entropy_loss(cx, a: T, b: T) cx.cross_entropy_loss(&a, &b);
}

ops! { mod glu, " @rdname ggml_glu";
    fn ggml_glu(cx, a: T, op: Glu, swapped: B = "FALSE") cx.glu(&a, op, swapped);
    fn ggml_glu_split(cx, a: T, b: T, op: Glu) cx.glu_split(&a, &b, op);
    fn ggml_reglu(cx, a: T) cx.reglu(&a);
    fn ggml_reglu_swapped(cx, a: T) cx.reglu_swapped(&a);
    fn ggml_reglu_split(cx, a: T, b: T) cx.reglu_split(&a, &b);
    fn ggml_geglu(cx, a: T) cx.geglu(&a);
    fn ggml_geglu_swapped(cx, a: T) cx.geglu_swapped(&a);
    fn ggml_geglu_split(cx, a: T, b: T) cx.geglu_split(&a, &b);
    fn ggml_swiglu(cx, a: T) cx.swiglu(&a);
    fn ggml_swiglu_swapped(cx, a: T) cx.swiglu_swapped(&a);
    fn ggml_swiglu_split(cx, a: T, b: T) cx.swiglu_split(&a, &b);
    fn ggml_geglu_erf(cx, a: T) cx.geglu_erf(&a);
    fn ggml_geglu_erf_swapped(cx, a: T) cx.geglu_erf_swapped(&a);
    fn ggml_geglu_erf_split(cx, a: T, b: T) cx.geglu_erf_split(&a, &b);
    fn ggml_geglu_quick(cx, a: T) cx.geglu_quick(&a);
    fn ggml_geglu_quick_swapped(cx, a: T) cx.geglu_quick_swapped(&a);
    fn ggml_geglu_quick_split(cx, a: T, b: T) cx.geglu_quick_split(&a, &b);
    fn ggml_swiglu_oai(cx, a: T, b: OT, alpha: F, limit: F) cx.swiglu_oai(&a, b.as_ref(), alpha, limit);
    fn ggml_swiglu_clamp(cx, a: T, b: T, limit: F) cx.swiglu_clamp(&a, &b, limit);
}

ops! { mod norm, " @rdname ggml_norm";
    fn ggml_norm(cx, a: T, eps: F = "1e-05") cx.norm(&a, eps);
    fn ggml_norm_inplace(cx, a: T, eps: F = "1e-05") cx.norm_inplace(&a, eps);
    fn ggml_rms_norm(cx, a: T, eps: F = "1e-05") cx.rms_norm(&a, eps);
    fn ggml_rms_norm_inplace(cx, a: T, eps: F = "1e-05") cx.rms_norm_inplace(&a, eps);
    fn ggml_l2_norm(cx, a: T, eps: F = "1e-05") cx.l2_norm(&a, eps);
    fn ggml_l2_norm_inplace(cx, a: T, eps: F = "1e-05") cx.l2_norm_inplace(&a, eps);
    fn ggml_group_norm(cx, a: T, n_groups: I, eps: F = "1e-05") cx.group_norm(&a, n_groups, eps);
    fn ggml_group_norm_inplace(cx, a: T, n_groups: I, eps: F = "1e-05")
        cx.group_norm_inplace(&a, n_groups, eps);
}

ops! { mod softmax, " @rdname ggml_soft_max";
    fn ggml_soft_max(cx, a: T) cx.soft_max(&a);
    fn ggml_soft_max_inplace(cx, a: T) cx.soft_max_inplace(&a);
    fn ggml_soft_max_ext(cx, a: T, mask: OT = "NULL", scale: F = "1", max_bias: F = "0")
        cx.soft_max_ext(&a, mask.as_ref(), scale, max_bias);
    fn ggml_soft_max_ext_inplace(cx, a: T, mask: OT = "NULL", scale: F = "1", max_bias: F = "0")
        cx.soft_max_ext_inplace(&a, mask.as_ref(), scale, max_bias);
    fn ggml_soft_max_add_sinks(cx, a: T, sinks: OT) cx.soft_max_add_sinks(&a, sinks.as_ref());
    fn ggml_diag_mask_inf(cx, a: T, n_past: I) cx.diag_mask_inf(&a, n_past);
    fn ggml_diag_mask_inf_inplace(cx, a: T, n_past: I) cx.diag_mask_inf_inplace(&a, n_past);
    fn ggml_diag_mask_zero(cx, a: T, n_past: I) cx.diag_mask_zero(&a, n_past);
    fn ggml_diag_mask_zero_inplace(cx, a: T, n_past: I) cx.diag_mask_zero_inplace(&a, n_past);
}

ops! { mod attention, " @rdname ggml_flash_attn_ext";
    fn ggml_flash_attn_ext(cx, q: T, k: T, v: T, mask: OT = "NULL", scale: F, max_bias: F = "0",
        logit_softcap: F = "0")
        cx.flash_attn_ext(&q, &k, &v, mask.as_ref(), scale, max_bias, logit_softcap);
    fn ggml_flash_attn_ext_add_sinks(cx, a: T, sinks: OT) cx.flash_attn_ext_add_sinks(&a, sinks.as_ref());
}

ops! { mod rope, " @rdname ggml_rope";
    fn ggml_rope(cx, a: T, b: T, n_dims: I, mode: I = "0L") cx.rope(&a, &b, n_dims, mode);
    fn ggml_rope_inplace(cx, a: T, b: T, n_dims: I, mode: I = "0L") cx.rope_inplace(&a, &b, n_dims, mode);
    fn ggml_rope_ext(cx, a: T, b: T, c: OT = "NULL", n_dims: I, mode: I = "0L", n_ctx_orig: I = "0L",
        freq_base: F = "10000", freq_scale: F = "1", ext_factor: F = "0", attn_factor: F = "1",
        beta_fast: F = "32", beta_slow: F = "1")
        cx.rope_ext(&a, &b, c.as_ref(), n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
            attn_factor, beta_fast, beta_slow);
    fn ggml_rope_ext_inplace(cx, a: T, b: T, c: OT = "NULL", n_dims: I, mode: I = "0L",
        n_ctx_orig: I = "0L", freq_base: F = "10000", freq_scale: F = "1", ext_factor: F = "0",
        attn_factor: F = "1", beta_fast: F = "32", beta_slow: F = "1")
        cx.rope_ext_inplace(&a, &b, c.as_ref(), n_dims, mode, n_ctx_orig, freq_base, freq_scale,
            ext_factor, attn_factor, beta_fast, beta_slow);
    fn ggml_rope_multi(cx, a: T, b: T, c: OT = "NULL", n_dims: I, sections: I4 = "c(0L, 0L, 0L, 0L)",
        mode: I = "0L", n_ctx_orig: I = "0L", freq_base: F = "10000", freq_scale: F = "1",
        ext_factor: F = "0", attn_factor: F = "1", beta_fast: F = "32", beta_slow: F = "1")
        cx.rope_multi(&a, &b, c.as_ref(), n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale,
            ext_factor, attn_factor, beta_fast, beta_slow);
    fn ggml_rope_multi_inplace(cx, a: T, b: T, c: OT = "NULL", n_dims: I,
        sections: I4 = "c(0L, 0L, 0L, 0L)", mode: I = "0L", n_ctx_orig: I = "0L",
        freq_base: F = "10000", freq_scale: F = "1", ext_factor: F = "0", attn_factor: F = "1",
        beta_fast: F = "32", beta_slow: F = "1")
        cx.rope_multi_inplace(&a, &b, c.as_ref(), n_dims, sections, mode, n_ctx_orig, freq_base,
            freq_scale, ext_factor, attn_factor, beta_fast, beta_slow);
}

ops! { mod layout, " @rdname ggml_layout";
    fn ggml_view_1d(cx, a: T, ne0: D, offset: U = "0") cx.view_1d(&a, ne0, offset);
    fn ggml_view_2d(cx, a: T, ne0: D, ne1: D, nb1: U, offset: U = "0") cx.view_2d(&a, ne0, ne1, nb1, offset);
    fn ggml_view_3d(cx, a: T, ne0: D, ne1: D, ne2: D, nb1: U, nb2: U, offset: U = "0")
        cx.view_3d(&a, ne0, ne1, ne2, nb1, nb2, offset);
    fn ggml_view_4d(cx, a: T, ne0: D, ne1: D, ne2: D, ne3: D, nb1: U, nb2: U, nb3: U, offset: U = "0")
        cx.view_4d(&a, [ne0, ne1, ne2, ne3], nb1, nb2, nb3, offset);
    fn ggml_reshape(cx, a: T, b: T) cx.reshape(&a, &b);
    fn ggml_reshape_1d(cx, a: T, ne0: D) cx.reshape_1d(&a, ne0);
    fn ggml_reshape_2d(cx, a: T, ne0: D, ne1: D) cx.reshape_2d(&a, ne0, ne1);
    fn ggml_reshape_3d(cx, a: T, ne0: D, ne1: D, ne2: D) cx.reshape_3d(&a, ne0, ne1, ne2);
    fn ggml_reshape_4d(cx, a: T, ne0: D, ne1: D, ne2: D, ne3: D) cx.reshape_4d(&a, ne0, ne1, ne2, ne3);
    fn ggml_permute(cx, a: T, axis0: U, axis1: U, axis2: U, axis3: U) cx.permute(&a, axis0, axis1, axis2, axis3);
    fn ggml_transpose(cx, a: T) cx.transpose(&a);
    fn ggml_cont(cx, a: T) cx.cont(&a);
    fn ggml_cont_1d(cx, a: T, ne0: D) cx.cont_1d(&a, ne0);
    fn ggml_cont_2d(cx, a: T, ne0: D, ne1: D) cx.cont_2d(&a, ne0, ne1);
    fn ggml_cont_3d(cx, a: T, ne0: D, ne1: D, ne2: D) cx.cont_3d(&a, ne0, ne1, ne2);
    fn ggml_cont_4d(cx, a: T, ne0: D, ne1: D, ne2: D, ne3: D) cx.cont_4d(&a, ne0, ne1, ne2, ne3);
    fn ggml_cpy(cx, a: T, b: T) cx.cpy(&a, &b);
    fn ggml_cast(cx, a: T, r#type: Ty) cx.cast(&a, r#type);
    fn ggml_dup(cx, a: T) cx.dup(&a);
    fn ggml_dup_inplace(cx, a: T) cx.dup_inplace(&a);
    fn ggml_dup_tensor(cx, tensor: T) cx.dup_tensor(&tensor);
    fn ggml_view_tensor(cx, src: T) cx.view_tensor(&src);
}

ops! { mod rows, " @rdname ggml_rows";
    fn ggml_get_rows(cx, a: T, b: T) cx.get_rows(&a, &b);
    fn ggml_set_rows(cx, a: T, b: T, c: T) cx.set_rows(&a, &b, &c);
    fn ggml_repeat(cx, a: T, b: T) cx.repeat(&a, &b);
    fn ggml_repeat_back(cx, a: T, b: T) cx.repeat_back(&a, &b);
    fn ggml_concat(cx, a: T, b: T, dim: U = "0") cx.concat(&a, &b, dim);
    fn ggml_argsort(cx, a: T, order: Sort = "GGML_SORT_ORDER_ASC") cx.argsort(&a, order);
    fn ggml_top_k(cx, a: T, k: I) cx.top_k(&a, k);
    fn ggml_set(cx, a: T, b: T, nb1: U, nb2: U, nb3: U, offset: U) cx.set(&a, &b, nb1, nb2, nb3, offset);
    fn ggml_set_inplace(cx, a: T, b: T, nb1: U, nb2: U, nb3: U, offset: U)
        cx.set_inplace(&a, &b, nb1, nb2, nb3, offset);
    fn ggml_set_1d(cx, a: T, b: T, offset: U) cx.set_1d(&a, &b, offset);
    fn ggml_set_1d_inplace(cx, a: T, b: T, offset: U) cx.set_1d_inplace(&a, &b, offset);
    fn ggml_set_2d(cx, a: T, b: T, nb1: U, offset: U) cx.set_2d(&a, &b, nb1, offset);
    fn ggml_set_2d_inplace(cx, a: T, b: T, nb1: U, offset: U) cx.set_2d_inplace(&a, &b, nb1, offset);
    fn ggml_acc(cx, a: T, b: T, nb1: U, nb2: U, nb3: U, offset: U) cx.acc(&a, &b, nb1, nb2, nb3, offset);
    fn ggml_acc_inplace(cx, a: T, b: T, nb1: U, nb2: U, nb3: U, offset: U)
        cx.acc_inplace(&a, &b, nb1, nb2, nb3, offset);
}

ops! { mod conv, " @rdname ggml_conv";
    fn ggml_conv_1d(cx, a: T, b: T, s0: I = "1L", p0: I = "0L", d0: I = "1L") cx.conv_1d(&a, &b, s0, p0, d0);
    fn ggml_conv_1d_ph(cx, a: T, b: T, s: I, d: I) cx.conv_1d_ph(&a, &b, s, d);
    fn ggml_conv_1d_dw(cx, a: T, b: T, s0: I = "1L", p0: I = "0L", d0: I = "1L")
        cx.conv_1d_dw(&a, &b, s0, p0, d0);
    fn ggml_conv_1d_dw_ph(cx, a: T, b: T, s0: I, d0: I) cx.conv_1d_dw_ph(&a, &b, s0, d0);
    fn ggml_conv_transpose_1d(cx, a: T, b: T, s0: I = "1L", p0: I = "0L", d0: I = "1L")
        cx.conv_transpose_1d(&a, &b, s0, p0, d0);
    fn ggml_conv_2d(cx, a: T, b: T, s0: I = "1L", s1: I = "1L", p0: I = "0L", p1: I = "0L",
        d0: I = "1L", d1: I = "1L")
        cx.conv_2d(&a, &b, s0, s1, p0, p1, d0, d1);
    fn ggml_conv_2d_sk_p0(cx, a: T, b: T) cx.conv_2d_sk_p0(&a, &b);
    fn ggml_conv_2d_s1_ph(cx, a: T, b: T) cx.conv_2d_s1_ph(&a, &b);
    fn ggml_conv_2d_direct(cx, a: T, b: T, s0: I = "1L", s1: I = "1L", p0: I = "0L", p1: I = "0L",
        d0: I = "1L", d1: I = "1L")
        cx.conv_2d_direct(&a, &b, s0, s1, p0, p1, d0, d1);
    fn ggml_conv_2d_dw(cx, a: T, b: T, s0: I = "1L", s1: I = "1L", p0: I = "0L", p1: I = "0L",
        d0: I = "1L", d1: I = "1L")
        cx.conv_2d_dw(&a, &b, s0, s1, p0, p1, d0, d1);
    fn ggml_conv_2d_dw_direct(cx, a: T, b: T, s0: I = "1L", s1: I = "1L", p0: I = "0L",
        p1: I = "0L", d0: I = "1L", d1: I = "1L")
        cx.conv_2d_dw_direct(&a, &b, s0, s1, p0, p1, d0, d1);
    fn ggml_conv_transpose_2d_p0(cx, a: T, b: T, stride: I = "1L") cx.conv_transpose_2d_p0(&a, &b, stride);
    fn ggml_conv_3d(cx, a: T, b: T, ic: L, s0: I, s1: I, s2: I, p0: I, p1: I, p2: I, d0: I, d1: I, d2: I)
        cx.conv_3d(&a, &b, ic, s0, s1, s2, p0, p1, p2, d0, d1, d2);
    fn ggml_conv_3d_direct(cx, a: T, b: T, s0: I, s1: I, s2: I, p0: I, p1: I, p2: I, d0: I, d1: I,
        d2: I, n_channels: I, n_batch: I, n_out: I)
        cx.conv_3d_direct(&a, &b, s0, s1, s2, p0, p1, p2, d0, d1, d2, n_channels, n_batch, n_out);
    fn ggml_im2col(cx, a: T, b: T, s0: I, s1: I, p0: I, p1: I, d0: I, d1: I, is_2D: B = "TRUE",
        dst_type: Ty = "GGML_TYPE_F16")
        cx.im2col(&a, &b, s0, s1, p0, p1, d0, d1, is_2D, dst_type);
    fn ggml_im2col_3d(cx, a: T, b: T, ic: L, s0: I, s1: I, s2: I, p0: I, p1: I, p2: I, d0: I, d1: I,
        d2: I, dst_type: Ty = "GGML_TYPE_F16")
        cx.im2col_3d(&a, &b, ic, s0, s1, s2, p0, p1, p2, d0, d1, d2, dst_type);
    fn ggml_col2im_1d(cx, a: T, s0: I, oc: I, p0: I) cx.col2im_1d(&a, s0, oc, p0);
}

ops! { mod pool, " @rdname ggml_pool";
    fn ggml_pool_1d(cx, a: T, op: Pool, k0: I, s0: I = "k0", p0: I = "0L") cx.pool_1d(&a, op, k0, s0, p0);
    fn ggml_pool_2d(cx, a: T, op: Pool, k0: I, k1: I, s0: I = "k0", s1: I = "k1", p0: F = "0",
        p1: F = "0")
        cx.pool_2d(&a, op, k0, k1, s0, s1, p0, p1);
    fn ggml_upscale(cx, a: T, scale_factor: I, mode: Mode = "0L") cx.upscale(&a, scale_factor, mode);
    fn ggml_upscale_ext(cx, a: T, ne0: I, ne1: I, ne2: I, ne3: I, mode: Mode = "0L")
        cx.upscale_ext(&a, ne0, ne1, ne2, ne3, mode);
    fn ggml_interpolate(cx, a: T, ne0: L, ne1: L, ne2: L, ne3: L, mode: I = "0L")
        cx.interpolate(&a, ne0, ne1, ne2, ne3, mode as u32);
    fn ggml_pad(cx, a: T, p0: I = "0L", p1: I = "0L", p2: I = "0L", p3: I = "0L") cx.pad(&a, p0, p1, p2, p3);
    fn ggml_pad_circular(cx, a: T, p0: I = "0L", p1: I = "0L", p2: I = "0L", p3: I = "0L")
        cx.pad_circular(&a, p0, p1, p2, p3);
    fn ggml_pad_ext(cx, a: T, lp0: I, rp0: I, lp1: I, rp1: I, lp2: I, rp2: I, lp3: I, rp3: I)
        cx.pad_ext(&a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3);
    fn ggml_pad_ext_circular(cx, a: T, lp0: I, rp0: I, lp1: I, rp1: I, lp2: I, rp2: I, lp3: I, rp3: I)
        cx.pad_ext_circular(&a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3);
    fn ggml_pad_reflect_1d(cx, a: T, p0: I, p1: I) cx.pad_reflect_1d(&a, p0, p1);
    fn ggml_roll(cx, a: T, shift0: I = "0L", shift1: I = "0L", shift2: I = "0L", shift3: I = "0L")
        cx.roll(&a, shift0, shift1, shift2, shift3);
    fn ggml_win_part(cx, a: T, w: I) cx.win_part(&a, w);
    fn ggml_win_unpart(cx, a: T, w0: L, h0: L, w: I) cx.win_unpart(&a, w0, h0, w);
    fn ggml_get_rel_pos(cx, a: T, qh: L, kh: L) cx.get_rel_pos(&a, qh, kh);
    fn ggml_add_rel_pos(cx, a: T, pw: T, ph: T) cx.add_rel_pos(&a, &pw, &ph);
    fn ggml_add_rel_pos_inplace(cx, a: T, pw: T, ph: T) cx.add_rel_pos_inplace(&a, &pw, &ph);
}

ops! { mod sequence, " @rdname ggml_sequence";
    fn ggml_arange(cx, start: F, stop: F, step: F = "1") cx.arange(start, stop, step);
    fn ggml_timestep_embedding(cx, timesteps: T, dim: I, max_period: I = "10000L")
        cx.timestep_embedding(&timesteps, dim, max_period);
    fn ggml_ssm_conv(cx, sx: T, c: T) cx.ssm_conv(&sx, &c);
    fn ggml_ssm_scan(cx, s: T, x: T, dt: T, A: T, B: T, C: T, ids: T, K: L = "1")
        cx.ssm_scan(&s, &x, &dt, &A, &B, &C, &ids, K);
    fn ggml_rwkv_wkv6(cx, k: T, v: T, r: T, tf: T, td: T, state: T) cx.rwkv_wkv6(&k, &v, &r, &tf, &td, &state);
    fn ggml_rwkv_wkv7(cx, r: T, w: T, k: T, v: T, a: T, b: T, state: T)
        cx.rwkv_wkv7(&r, &w, &k, &v, &a, &b, &state);
    fn ggml_gated_linear_attn(cx, k: T, v: T, q: T, g: T, state: T, scale: F)
        cx.gated_linear_attn(&k, &v, &q, &g, &state, scale);
    fn ggml_gated_delta_net(cx, q: T, k: T, v: T, g: T, beta: T, state: T, K: L = "1")
        cx.gated_delta_net(&q, &k, &v, &g, &beta, &state, K);
}
