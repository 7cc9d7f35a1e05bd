# Rd pages of the operator families generated in src/rust/src/ops.rs (each function there
# documents on its family's page with @rdname). Every builder returns a new tensor that a
# graph computes (ggml_build_forward_expand, then ggml_graph_compute or a backend); a bad
# argument or a shape the op refuses is an R error naming it.

#' Element-wise unary operators
#'
#' `ggml_abs`, `_sgn`, `_neg`, `_step` (1 where positive), `_tanh`, `_elu`, `_relu`,
#' `_sigmoid`, `_gelu` (tanh approximation), `_gelu_quick`, `_gelu_erf` (exact), `_silu`,
#' `_hardswish`, `_hardsigmoid`, `_exp`, `_expm1`, `_softplus`, `_floor`, `_ceil`, `_round`
#' (half away from zero), `_trunc`, `_sqr`, `_sqrt`, `_log`, `_sin`, `_cos` apply the function
#' to every element of `a`; the result has `a`'s shape and type. The `_inplace` forms write
#' into `a`'s memory.
#' @param ctx A context.
#' @param a A tensor.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' ggml_set_f32(a, c(-1.5, -0.25, 0.5, 2))
#' ops <- c("abs", "sgn", "neg", "step", "tanh", "elu", "relu", "sigmoid", "gelu",
#'          "gelu_quick", "gelu_erf", "silu", "hardswish", "hardsigmoid", "exp", "expm1",
#'          "softplus", "floor", "ceil", "round", "trunc", "sqr", "sin", "cos")
#' for (op in ops) {
#'   out <- get(paste0("ggml_", op))(ctx, a)
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   cat(op, ggml_get_f32(out), "\n")
#' }
#' p <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
#' ggml_set_f32(p, c(1, 4))
#' for (op in c("sqrt", "log")) {
#'   out <- get(paste0("ggml_", op))(ctx, p)
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   cat(op, ggml_get_f32(out), "\n")
#' }
#' for (op in c(ops, "sqrt", "log")) {
#'   b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
#'   ggml_set_f32(b, c(1, 4))
#'   out <- get(paste0("ggml_", op, "_inplace"))(ctx, b)
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   cat(op, "in place:", ggml_get_f32(b), "\n")
#' }
#' @name ggml_unary
NULL

#' Operators with scalar parameters
#'
#' `ggml_scale` is `a * s`, `ggml_scale_bias` `a * s + b`; `ggml_clamp` limits `a` to
#' `[min_val, max_val]`; `ggml_leaky_relu` is `a` where positive and `negative_slope * a`
#' elsewhere (in place with `inplace = TRUE`); `ggml_fill` sets every element to `value`;
#' `ggml_xielu` is GGML's xIELU activation with parameters `alpha_n`, `alpha_p`, `beta`,
#' `eps`. The `_inplace` forms write into `a`.
#' @param ctx A context.
#' @param a A tensor.
#' @param s The scale.
#' @param b The bias (`ggml_scale_bias`).
#' @param min_val,max_val The limits.
#' @param negative_slope The slope below 0.
#' @param inplace Write into `a`.
#' @param value The fill value.
#' @param alpha_n,alpha_p,beta,eps xIELU's parameters.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' ggml_set_f32(a, c(-2, 0.5, 3))
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' run(ggml_scale(ctx, a, 2))
#' run(ggml_scale_bias(ctx, a, 2, 1))
#' run(ggml_clamp(ctx, a, -1, 1))
#' run(ggml_leaky_relu(ctx, a, 0.1))
#' run(ggml_fill(ctx, a, 7))
#' run(ggml_xielu(ctx, a, 0.8, 0.8, 0.5, -1e-6))
#' for (f in list(ggml_scale_inplace, ggml_fill_inplace)) run(f(ctx, ggml_dup(ctx, a), 2))
#' run(ggml_scale_bias_inplace(ctx, ggml_dup(ctx, a), 2, 1))
#' run(ggml_clamp_inplace(ctx, ggml_dup(ctx, a), -1, 1))
#' @name ggml_scalar_ops
NULL

#' Element-wise binary operators
#'
#' `ggml_add`, `ggml_sub`, `ggml_mul` and `ggml_div` combine `a` and `b` element by element,
#' `b` broadcast (tiled) over `a` (every dimension of `a` a multiple of `b`'s); the result has
#' `a`'s shape. `ggml_add1` adds the one-element `b` to every element. `ggml_add_id` adds row
#' `ids[i1, i2]` of `b` to row `(i1, i2)` of `a` (a bias per selected expert). The `_inplace`
#' forms write into `a`.
#' @param ctx A context.
#' @param a,b Tensors.
#' @param ids An I32 tensor of row indices of `b` (`ggml_add_id`).
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' ggml_set_f32(a, 1:6)
#' ggml_set_f32(b, c(10, 20, 30))
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' for (f in list(ggml_add, ggml_sub, ggml_mul, ggml_div)) print(run(f(ctx, a, b)))
#' for (f in list(ggml_add_inplace, ggml_sub_inplace, ggml_mul_inplace, ggml_div_inplace))
#'   print(run(f(ctx, ggml_dup(ctx, a), b)))
#' one <- ggml_new_f32(ctx, 100)
#' run(ggml_add1(ctx, a, one))
#' run(ggml_add1_inplace(ctx, ggml_dup(ctx, a), one))
#' bias <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_f32(bias, c(0, 0, 0, 1, 1, 1))
#' ids <- ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 1)
#' ggml_set_i32(ids, c(1L, 0L))
#' run(ggml_add_id(ctx, ggml_reshape_3d(ctx, a, 3, 2, 1), bias, ids))
#' @name ggml_binary
NULL

#' Matrix operators
#'
#' `ggml_mul_mat(ctx, a, b)` multiplies over dimension 0 of both: `a` `[K, M]` and `b`
#' `[K, N]` give `[M, N]`, i.e. `t(a) %*% b` in R's column-major terms (batched over
#' dimensions 2 and 3, `a` broadcast). `ggml_mul_mat_id` multiplies with the expert matrices
#' of `as` `[K, M, n_expert]` chosen by `ids` `[n_used, n_tokens]`. `ggml_out_prod` is the
#' outer product `a %*% t(b)` over dimension 1. `ggml_diag` puts a row on a diagonal.
#' `ggml_solve_tri` solves the triangular system `a x = b` (GGML supports `left = TRUE`,
#' `lower = TRUE`, `uni = FALSE`), and `ggml_tri` keeps a triangle (`GGML_TRI_TYPE_*`).
#' @param ctx A context.
#' @param a,b Tensors.
#' @param as The expert matrices.
#' @param ids An I32 tensor of expert indices.
#' @param left,lower,uni The triangular system's form.
#' @param type A `GGML_TRI_TYPE_*` value.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
#' ggml_set_f32(a, c(2, 1, 0, 1))
#' b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
#' ggml_set_f32(b, c(1, 2, 3, 4))
#' run(ggml_mul_mat(ctx, a, b))
#' run(ggml_out_prod(ctx, a, b))
#' run(ggml_diag(ctx, ggml_view_1d(ctx, b, 2)))
#' run(ggml_tri(ctx, b, GGML_TRI_TYPE_LOWER_DIAG))
#' run(ggml_solve_tri(ctx, ggml_transpose(ctx, ggml_cont(ctx, ggml_transpose(ctx, a))), b,
#'                    TRUE, TRUE, FALSE))
#' experts <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 2, 2)
#' ggml_set_f32(experts, c(1, 0, 0, 1, 2, 0, 0, 2))
#' ids <- ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 1, 1)
#' ggml_set_i32(ids, 1L)
#' run(ggml_mul_mat_id(ctx, experts, ggml_reshape_3d(ctx, ggml_view_1d(ctx, b, 2), 2, 1, 1), ids))
#' @name ggml_matrix_ops
NULL

#' Reductions
#'
#' `ggml_sum` sums every element into one, `ggml_sum_rows` each row, `ggml_mean` averages
#' each row, `ggml_argmax` gives each row's largest element's index (I32), `ggml_cumsum` the
#' running sums along rows, `ggml_count_equal` the number of equal elements of two I32 tensors
#' (one I64 element, read with `ggml_backend_tensor_get_and_sync`), and
#' `ggml_cross_entropy_loss` the cross entropy of logits `a` against probabilities `b`.
#' @param ctx A context.
#' @param a,b Tensors.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   out
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_f32(a, c(1, 5, 3, 4, 2, 6))
#' ggml_get_f32(run(ggml_sum(ctx, a)))
#' ggml_get_f32(run(ggml_sum_rows(ctx, a)))
#' ggml_get_f32(run(ggml_mean(ctx, a)))
#' ggml_get_i32(run(ggml_argmax(ctx, a)))
#' ggml_get_f32(run(ggml_cumsum(ctx, a)))
#' ggml_get_f32(run(ggml_cross_entropy_loss(ctx, a, ggml_soft_max(ctx, a))))
#' i <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
#' ggml_set_i32(i, 1:3)
#' n <- run(ggml_count_equal(ctx, i, i))
#' ggml_backend_tensor_get_and_sync(NULL, n, 0, 8)
#' @name ggml_reduce
NULL

#' Gated linear units
#'
#' `ggml_glu(ctx, a, op, swapped)` splits each row of `a` into halves `x` and `g` (swapped:
#' `g` first) and gives `act(x) * g` with the `GGML_GLU_OP_*` activation `op` (ReLU, GELU,
#' SiLU, ...); `ggml_glu_split(ctx, a, b, op)` takes `x = a` and `g = b`. `ggml_reglu`,
#' `ggml_geglu`, `ggml_swiglu`, `ggml_geglu_erf` and `ggml_geglu_quick` are `ggml_glu` with
#' one op, their `_swapped` forms with `swapped = TRUE` and their `_split` forms
#' `ggml_glu_split`. `ggml_swiglu_oai` is GPT-OSS's clamped SwiGLU (`b = NULL`: fused).
#' `ggml_swiglu_clamp(ctx, a, b, limit)` (GGML's `GGML_GLU_OP_SWIGLU_CLAMP`, split form: `a`
#' and `b` of the same type and shape) is `silu(min(a, limit)) * clamp(b, -limit, limit)`.
#' @param ctx A context.
#' @param a,b Tensors.
#' @param op A `GGML_GLU_OP_*` value.
#' @param swapped Take the gate from the first half.
#' @param alpha,limit `ggml_swiglu_oai`'s constants; `limit` is also `ggml_swiglu_clamp`'s.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
#' ggml_set_f32(a, c(-1, 2, 3, 0.5))
#' x <- ggml_view_1d(ctx, a, 2)
#' g <- ggml_view_1d(ctx, a, 2, 8)
#' run(ggml_glu(ctx, a, GGML_GLU_OP_REGLU))
#' run(ggml_glu_split(ctx, x, g, GGML_GLU_OP_SWIGLU))
#' for (op in c("reglu", "geglu", "swiglu", "geglu_erf", "geglu_quick")) {
#'   cat(op, run(get(paste0("ggml_", op))(ctx, a)),
#'       run(get(paste0("ggml_", op, "_swapped"))(ctx, a)),
#'       run(get(paste0("ggml_", op, "_split"))(ctx, x, g)), "\n")
#' }
#' run(ggml_swiglu_oai(ctx, a, NULL, 1.702, 7))
#' run(ggml_swiglu_clamp(ctx, x, g, 1.5))  # silu(min(x, 1.5)) * clamp(g, -1.5, 1.5)
#' @name ggml_glu
NULL

#' Normalization
#'
#' Along each row: `ggml_norm` subtracts the mean and divides by the standard deviation,
#' `ggml_rms_norm` divides by the root mean square, `ggml_l2_norm` by the Euclidean norm
#' (each with `eps` added inside the root). `ggml_group_norm` normalizes `n_groups` groups of
#' dimension 2 together. The `_inplace` forms write into `a`.
#' @param ctx A context.
#' @param a A tensor.
#' @param eps Added to the variance.
#' @param n_groups Number of groups.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 1, 2)
#' ggml_set_f32(a, c(1, 2, 3, 4, 2, 2, 4, 4))
#' for (f in list(ggml_norm, ggml_rms_norm, ggml_l2_norm, ggml_norm_inplace,
#'                ggml_rms_norm_inplace, ggml_l2_norm_inplace))
#'   print(run(f(ctx, ggml_dup(ctx, a))))
#' run(ggml_group_norm(ctx, a, 2))
#' run(ggml_group_norm_inplace(ctx, ggml_dup(ctx, a), 1))
#' @name ggml_norm
NULL

#' Softmax and causal masks
#'
#' `ggml_soft_max` normalizes each row to probabilities; `ggml_soft_max_ext` first scales by
#' `scale` and adds `mask` (F16 or F32, broadcast; with `max_bias > 0`, ALiBi slopes per
#' head). `ggml_soft_max_add_sinks` adds an attention-sink logit per head to a softmax node.
#' `ggml_diag_mask_inf` and `ggml_diag_mask_zero` set the elements above the diagonal shifted
#' by `n_past` to `-Inf` or 0. The `_inplace` forms write into `a`.
#' @param ctx A context.
#' @param a A tensor (for `ggml_soft_max_add_sinks`, a softmax node).
#' @param mask `NULL` or a mask tensor.
#' @param scale The factor applied first.
#' @param max_bias ALiBi's maximum bias (0: none).
#' @param sinks `NULL` or an F32 tensor of one logit per head.
#' @param n_past Columns visible beyond the diagonal.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 3)
#' ggml_set_f32(a, 1:9)
#' run(ggml_soft_max(ctx, a))
#' run(ggml_soft_max_inplace(ctx, ggml_dup(ctx, a)))
#' s <- ggml_soft_max_ext(ctx, a, NULL, 0.5, 0)
#' run(s)
#' run(ggml_soft_max_ext_inplace(ctx, ggml_dup(ctx, a), NULL, 0.5))
#' sinks <- ggml_new_f32(ctx, 0)
#' run(ggml_soft_max_add_sinks(ctx, s, sinks))
#' run(ggml_diag_mask_inf(ctx, a, 0))
#' run(ggml_diag_mask_zero(ctx, a, 1))
#' run(ggml_diag_mask_inf_inplace(ctx, ggml_dup(ctx, a), 0))
#' run(ggml_diag_mask_zero_inplace(ctx, ggml_dup(ctx, a), 0))
#' @name ggml_soft_max
NULL

#' Flash attention
#'
#' `ggml_flash_attn_ext` computes `softmax(scale * k^T q + mask) v` per head in one pass:
#' `q` `[D, n_q, n_head, n_seq]`, `k` `[D, n_kv, n_head_kv, n_seq]`, `v` `[DV, n_kv,
#' n_head_kv, n_seq]`, an optional F16 `mask` `[n_kv, n_q, ...]`; with `logit_softcap > 0` the
#' scores are soft-capped, with `max_bias > 0` ALiBi slopes apply. The result is F32
#' `[DV, n_head, n_q, n_seq]`. `ggml_flash_attn_ext_add_sinks` adds per-head sink logits.
#' @param ctx A context.
#' @param q,k,v Queries, keys and values.
#' @param mask `NULL` or an F16 mask.
#' @param scale The score scale, usually `1 / sqrt(D)`.
#' @param max_bias ALiBi's maximum bias.
#' @param logit_softcap The soft cap (0: none).
#' @param a A flash attention node.
#' @param sinks `NULL` or an F32 tensor of one logit per head.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' q <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 1, 1, 1)
#' k <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 2, 1, 1)
#' v <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 2, 1, 1)
#' ggml_set_f32(q, c(1, 0, 0, 0))
#' ggml_set_f32(k, c(1, 0, 0, 0, 0, 1, 0, 0))
#' ggml_set_f32(v, c(1, 1, 1, 1, 3, 3, 3, 3))
#' out <- ggml_flash_attn_ext(ctx, q, k, v, NULL, 1)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#' ggml_get_f32(out)
#' sunk <- ggml_flash_attn_ext_add_sinks(ctx, out, ggml_new_f32(ctx, 0))
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, sunk))
#' ggml_get_f32(sunk)
#' @name ggml_flash_attn_ext
NULL

#' Rotary position embedding
#'
#' `ggml_rope(ctx, a, b, n_dims, mode)` rotates pairs of the first `n_dims` elements of each
#' row of `a` `[head_dim, n_head, n_tokens]` by the angle `position * freq_base^(-2i/n_dims)`,
#' the positions being the I32 tensor `b` `[n_tokens]`; `mode` is a `GGML_ROPE_TYPE_*`
#' (NORM pairs neighbours, NEOX the halves). `ggml_rope_ext` adds YaRN's context extension
#' (`n_ctx_orig`, `freq_scale`, `ext_factor`, `attn_factor`, `beta_fast`, `beta_slow`) and
#' optional frequency factors `c`; `ggml_rope_multi` is M-RoPE with `sections` (4 integers)
#' and positions `4 * n_tokens`. The `_inplace` forms write into `a`.
#' @param ctx A context.
#' @param a The tensor to rotate.
#' @param b I32 positions.
#' @param c `NULL` or F32 frequency factors.
#' @param n_dims Elements of each row rotated.
#' @param mode A `GGML_ROPE_TYPE_*` value.
#' @param n_ctx_orig The training context length (YaRN).
#' @param freq_base,freq_scale The base and scale of the frequencies.
#' @param ext_factor,attn_factor,beta_fast,beta_slow YaRN's parameters.
#' @param sections M-RoPE's 4 section sizes.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 1, 2)
#' ggml_set_f32(a, c(1, 0, 1, 0))
#' pos <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
#' ggml_set_i32(pos, c(0L, 1L))
#' run(ggml_rope(ctx, a, pos, 2))  # (1, 0) and (cos 1, sin 1)
#' run(ggml_rope_inplace(ctx, ggml_dup(ctx, a), pos, 2))
#' run(ggml_rope_ext(ctx, a, pos, NULL, 2, GGML_ROPE_TYPE_NEOX))
#' run(ggml_rope_ext_inplace(ctx, ggml_dup(ctx, a), pos, NULL, 2))
#' m <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 8)
#' ggml_set_i32(m, c(0L, 1L, 0L, 1L, 0L, 1L, 0L, 1L))
#' run(ggml_rope_multi(ctx, a, m, NULL, 2, c(1L, 0L, 0L, 0L), GGML_ROPE_TYPE_MROPE))
#' run(ggml_rope_multi_inplace(ctx, ggml_dup(ctx, a), m, NULL, 2, c(1L, 0L, 0L, 0L),
#'                             GGML_ROPE_TYPE_MROPE))
#' @name ggml_rope
NULL

#' Views, reshapes and copies
#'
#' `ggml_view_1d` to `_4d` view `a`'s memory from byte `offset` with the given sizes and row
#' strides `nb1`, `nb2`, `nb3` (bytes); `ggml_view_tensor` views all of `src`. `ggml_reshape`
#' (to `b`'s shape) and `ggml_reshape_1d` to `_4d` view a contiguous `a` with another shape.
#' `ggml_permute` moves dimension `i` to position `axis_i`, `ggml_transpose` swaps dimensions 0
#' and 1; `ggml_cont` (and `ggml_cont_1d` to `_4d`, with a new shape) makes a contiguous copy.
#' `ggml_cpy` copies `a` into `b` (converting the type), `ggml_cast` converts to `type`,
#' `ggml_dup` copies, `ggml_dup_inplace` is a view computed in place, and `ggml_dup_tensor`
#' is a new tensor of `tensor`'s type and shape (not a graph node).
#' @param ctx A context.
#' @param a,b Tensors.
#' @param ne0,ne1,ne2,ne3 Sizes.
#' @param nb1,nb2,nb3 Strides in bytes.
#' @param offset Bytes into `a`.
#' @param axis0,axis1,axis2,axis3 Where dimensions 0 to 3 go.
#' @param type A `GGML_TYPE_*` constant.
#' @param tensor,src Tensors.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_f32(a, 1:6)
#' run(ggml_view_1d(ctx, a, 2, 4))
#' run(ggml_cont(ctx, ggml_view_2d(ctx, a, 2, 2, 12, 4)))
#' run(ggml_view_3d(ctx, a, 3, 1, 2, 12, 12))
#' run(ggml_view_4d(ctx, a, 3, 2, 1, 1, 12, 24, 24))
#' ggml_tensor_shape(ggml_view_tensor(ctx, a))
#' ggml_tensor_shape(ggml_reshape(ctx, a, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6)))
#' ggml_tensor_shape(ggml_reshape_1d(ctx, a, 6))
#' ggml_tensor_shape(ggml_reshape_2d(ctx, a, 2, 3))
#' ggml_tensor_shape(ggml_reshape_3d(ctx, a, 1, 2, 3))
#' ggml_tensor_shape(ggml_reshape_4d(ctx, a, 1, 1, 2, 3))
#' run(ggml_cont(ctx, ggml_transpose(ctx, a)))
#' run(ggml_cont(ctx, ggml_permute(ctx, a, 1, 0, 2, 3)))
#' run(ggml_cont_1d(ctx, ggml_transpose(ctx, a), 6))
#' ggml_tensor_shape(ggml_cont_2d(ctx, a, 2, 3))
#' ggml_tensor_shape(ggml_cont_3d(ctx, a, 2, 3, 1))
#' ggml_tensor_shape(ggml_cont_4d(ctx, a, 2, 3, 1, 1))
#' run(ggml_cpy(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 3, 2)))
#' run(ggml_cast(ctx, a, GGML_TYPE_F16))
#' run(ggml_dup(ctx, a))
#' run(ggml_dup_inplace(ctx, a))
#' ggml_tensor_shape(ggml_dup_tensor(ctx, a))
#' @name ggml_layout
NULL

#' Rows, concatenation, sorting and partial writes
#'
#' `ggml_get_rows(ctx, a, b)` gathers the rows of `a` whose indices are the I32 `b`;
#' `ggml_set_rows(ctx, a, b, c)` writes the rows of `b` into the rows `c` of `a` (a view of
#' `a`). `ggml_repeat` tiles `a` to `b`'s shape, `ggml_repeat_back` sums it back.
#' `ggml_concat` joins along dimension `dim` (0-based). `ggml_argsort` gives each row's sort
#' order (I32 indices, `GGML_SORT_ORDER_*`), `ggml_top_k` the indices of each row's `k`
#' largest. `ggml_set` (and `_1d`, `_2d`) write `b` into a view of `a` (strides and offset in
#' bytes) and return all of `a`; `ggml_acc` adds instead. `_inplace` forms write into `a`.
#' @param ctx A context.
#' @param a,b,c Tensors.
#' @param dim The dimension to join along.
#' @param order A `GGML_SORT_ORDER_*` value.
#' @param k How many.
#' @param nb1,nb2,nb3 Strides of the view, in bytes.
#' @param offset Bytes into `a`.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   out
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3)
#' ggml_set_f32(a, c(1, 2, 3, 4, 5, 6))
#' idx <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
#' ggml_set_i32(idx, c(2L, 0L))
#' ggml_get_f32(run(ggml_get_rows(ctx, a, idx)))
#' r <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2)
#' ggml_set_f32(r, c(-1, -1, -2, -2))
#' ggml_get_f32(run(ggml_set_rows(ctx, ggml_dup(ctx, a), r, idx)))
#' big <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 6)
#' ggml_get_f32(run(ggml_repeat(ctx, a, big)))
#' ggml_get_f32(run(ggml_repeat_back(ctx, big, a)))
#' ggml_tensor_shape(ggml_concat(ctx, a, a, 1))
#' ggml_get_i32(run(ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC)))
#' ggml_get_i32(run(ggml_top_k(ctx, a, 1)))
#' one <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
#' ggml_set_f32(one, c(9, 9))
#' ggml_get_f32(run(ggml_set_1d(ctx, a, one, 8)))
#' ggml_get_f32(run(ggml_set_2d(ctx, a, one, 8, 0)))
#' ggml_get_f32(run(ggml_set(ctx, a, one, 8, 24, 24, 0)))
#' ggml_get_f32(run(ggml_acc(ctx, a, one, 8, 24, 24, 0)))
#' ggml_get_f32(run(ggml_set_1d_inplace(ctx, ggml_dup(ctx, a), one, 0)))
#' ggml_get_f32(run(ggml_set_2d_inplace(ctx, ggml_dup(ctx, a), one, 8, 0)))
#' ggml_get_f32(run(ggml_set_inplace(ctx, ggml_dup(ctx, a), one, 8, 24, 24, 0)))
#' ggml_get_f32(run(ggml_acc_inplace(ctx, ggml_dup(ctx, a), one, 8, 24, 24, 0)))
#' @name ggml_rows
NULL

#' Convolutions and im2col
#'
#' GGML's convolutions, kernel `a` first, input `b` second: `ggml_conv_1d` (`a` `[K, IC,
#' OC]`, `b` `[W, IC, N]`), `ggml_conv_1d_dw` (depthwise), `ggml_conv_transpose_1d`,
#' `ggml_conv_2d` (`a` `[KW, KH, IC, OC]`, `b` `[W, H, IC, N]`) and its direct form,
#' `ggml_conv_2d_dw` (depthwise) and its direct form, `ggml_conv_transpose_2d_p0`,
#' `ggml_conv_3d` and `_3d_direct` (channels and batch folded into dimension 3), the
#' shorthand `_ph` (half padding), `_sk_p0` (stride = kernel, no padding) and `_s1_ph` forms,
#' `ggml_im2col` and `ggml_im2col_3d` (the patches as rows, `dst_type` F16 or F32) and
#' `ggml_col2im_1d` (its 1-D inverse). `s*` are strides, `p*` paddings, `d*` dilations.
#' @param ctx A context.
#' @param a The kernel.
#' @param b The input.
#' @param s0,s1,s2,s,stride Strides.
#' @param p0,p1,p2 Paddings.
#' @param d0,d1,d2,d Dilations.
#' @param ic Input channels (3-D forms).
#' @param n_channels,n_batch,n_out Channels, batch size and output channels
#'   (`ggml_conv_3d_direct`).
#' @param is_2D 2-D (`TRUE`) or 1-D patches.
#' @param dst_type `GGML_TYPE_F16` or `GGML_TYPE_F32`.
#' @param oc Output channels (`ggml_col2im_1d`).
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(64 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' k1 <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 1, 1)
#' ggml_set_f32(k1, c(1, -1))
#' x1 <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 1, 1)
#' ggml_set_f32(x1, c(1, 2, 4, 8))
#' run(ggml_conv_1d(ctx, k1, x1))
#' run(ggml_conv_1d_ph(ctx, k1, x1, 1, 1))
#' run(ggml_conv_1d_dw(ctx, k1, x1))
#' run(ggml_conv_1d_dw_ph(ctx, k1, x1, 1, 1))
#' run(ggml_conv_transpose_1d(ctx, k1, x1))
#' k2 <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 1, 1)
#' ggml_set_f32(k2, c(1, 0, 0, 1))
#' x2 <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 1, 1)
#' ggml_set_f32(x2, 1:9)
#' run(ggml_conv_2d(ctx, k2, x2))
#' run(ggml_conv_2d_direct(ctx, k2, x2))
#' run(ggml_conv_2d_dw(ctx, k2, x2))
#' run(ggml_conv_2d_dw_direct(ctx, k2, x2))
#' run(ggml_conv_2d_sk_p0(ctx, k2, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 4, 1, 1)))
#' ggml_tensor_shape(ggml_conv_2d_s1_ph(ctx, k2, x2))
#' run(ggml_conv_transpose_2d_p0(ctx, k2, x2, 1))
#' ggml_tensor_shape(ggml_im2col(ctx, k2, x2, 1, 1, 0, 0, 1, 1, TRUE, GGML_TYPE_F32))
#' k3 <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, 1, 1, 1)
#' ggml_set_f32(k3, 2)
#' x3 <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 1)
#' ggml_set_f32(x3, 1:8)
#' run(ggml_conv_3d(ctx, k3, x3, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1))
#' run(ggml_conv_3d_direct(ctx, k3, x3, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1))
#' ggml_tensor_shape(ggml_im2col_3d(ctx, k3, x3, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, GGML_TYPE_F32))
#' cols <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 3)
#' ggml_set_f32(cols, 1:6)
#' run(ggml_col2im_1d(ctx, cols, 1, 1, 0))
#' @name ggml_conv
NULL

#' Pooling, resizing, padding and windows
#'
#' `ggml_pool_1d` and `ggml_pool_2d` pool windows of `k0` (by `k1`) with the
#' `GGML_OP_POOL_*` op `op`. `ggml_upscale` enlarges dimensions 0 and 1 `scale_factor` times,
#' `ggml_upscale_ext` resizes to `ne0..ne3`, `ggml_interpolate` likewise with GGML's mode
#' flags (`GGML_SCALE_MODE_*`). `ggml_pad` adds zeros after each dimension,
#' `ggml_pad_ext` before (`lp*`) and after (`rp*`), the `_circular` forms wrap around,
#' `ggml_pad_reflect_1d` mirrors dimension 0. `ggml_roll` rotates each dimension by its
#' shift. `ggml_win_part` cuts `[C, W, H]` into `w` by `w` windows and `ggml_win_unpart` joins
#' them back to `w0` by `h0`; `ggml_get_rel_pos` expands a relative-position table and
#' `ggml_add_rel_pos` (and `_inplace`) adds decomposed relative positions `pw`, `ph` to
#' attention scores.
#' @param ctx A context.
#' @param a A tensor.
#' @param op A `GGML_OP_POOL_*` value.
#' @param k0,k1 Window sizes.
#' @param s0,s1 Strides (default: the window).
#' @param p0,p1,p2,p3 Paddings.
#' @param scale_factor The upscale factor.
#' @param mode A `GGML_SCALE_MODE_*` value (with flags for `ggml_interpolate`).
#' @param ne0,ne1,ne2,ne3 The new shape.
#' @param lp0,rp0,lp1,rp1,lp2,rp2,lp3,rp3 Padding before and after each dimension.
#' @param shift0,shift1,shift2,shift3 Shifts.
#' @param w Window size.
#' @param w0,h0 The image's width and height.
#' @param qh,kh Query and key lengths.
#' @param pw,ph Relative positions along width and height.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2)
#' ggml_set_f32(a, 1:8)
#' run(ggml_pool_1d(ctx, a, GGML_OP_POOL_MAX, 2))
#' run(ggml_pool_2d(ctx, a, GGML_OP_POOL_AVG, 2, 2))
#' ggml_tensor_shape(ggml_upscale(ctx, a, 2))
#' ggml_tensor_shape(ggml_upscale_ext(ctx, a, 8, 4, 1, 1))
#' ggml_tensor_shape(ggml_interpolate(ctx, a, 2, 1, 1, 1, GGML_SCALE_MODE_BILINEAR))
#' run(ggml_pad(ctx, a, 1))
#' run(ggml_pad_circular(ctx, a, 1))
#' run(ggml_pad_ext(ctx, a, 1, 0, 0, 0, 0, 0, 0, 0))
#' run(ggml_pad_ext_circular(ctx, a, 1, 0, 0, 0, 0, 0, 0, 0))
#' run(ggml_pad_reflect_1d(ctx, a, 1, 1))
#' run(ggml_roll(ctx, a, 1))
#' img <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1, 3, 3)
#' ggml_set_f32(img, 1:9)
#' parts <- ggml_win_part(ctx, img, 2)
#' ggml_tensor_shape(parts)
#' run(ggml_win_unpart(ctx, parts, 3, 3, 2))
#' tab <- ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 1, 3)
#' ggml_set_f32(tab, c(1, 2, 3))
#' run(ggml_get_rel_pos(ctx, tab, 2, 2))
#' scores <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 4, 1)
#' ggml_set_f32(scores, rep(0, 16))
#' pw <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 1)
#' ggml_set_f32(pw, rep(1, 8))
#' run(ggml_add_rel_pos(ctx, scores, pw, pw))
#' run(ggml_add_rel_pos_inplace(ctx, ggml_dup(ctx, scores), pw, pw))
#' @name ggml_pool
NULL

#' Sequences and recurrent state-space operators
#'
#' `ggml_arange` is `start, start + step, ...` below `stop` (F32); `ggml_timestep_embedding`
#' gives sinusoidal embeddings of `dim` values per timestep. The recurrent operators of GGML
#' (C names; ggmlR lacks them): `ggml_ssm_conv` (Mamba's causal convolution),
#' `ggml_ssm_scan` (Mamba's selective scan, `K` state snapshots), `ggml_rwkv_wkv6`,
#' `ggml_rwkv_wkv7`, `ggml_gated_linear_attn` and `ggml_gated_delta_net` (`K` state
#' snapshots). Each returns the outputs followed by the final states.
#' @param ctx A context.
#' @param start,stop,step The range.
#' @param timesteps An F32 vector of timesteps.
#' @param dim Embedding size.
#' @param max_period The longest period.
#' @param sx,c Convolution input (with its `d_conv - 1` previous steps) and kernel.
#' @param s,x,dt,A,B,C,ids Selective scan's states, inputs, time steps, matrices and state
#'   indices.
#' @param K Number of state snapshots kept.
#' @param k,v,r,tf,td,state,w,a,b,q,g,beta Keys, values, receptance, time-first,
#'   time-decay, state, decay, in-context rates, queries, gates and betas of the RWKV,
#'   gated linear attention and delta rule operators.
#' @param scale Output scale of gated linear attention.
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(16 * 1024 * 1024)
#' run <- function(out) {
#'   ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#'   ggml_get_f32(out)
#' }
#' run(ggml_arange(ctx, 0, 5))
#' ts <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
#' ggml_set_f32(ts, c(0, 1))
#' run(ggml_timestep_embedding(ctx, ts, 4))
#' sx <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 1, 1)
#' ggml_set_f32(sx, c(1, 2, 3))
#' kern <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 1)
#' ggml_set_f32(kern, c(1, 1))
#' run(ggml_ssm_conv(ctx, sx, kern))
#' f <- function(...) { t <- ggml_new_tensor(ctx, GGML_TYPE_F32, length(c(...)), c(...))
#'   ggml_set_f32(t, rep(0.5, prod(c(...)))); t }
#' ids <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1)
#' ggml_set_i32(ids, 0L)
#' run(ggml_ssm_scan(ctx, f(2, 1, 1, 1), f(1, 1, 1, 1), f(1, 1, 1), f(2, 1), f(2, 1, 1, 1),
#'                   f(2, 1, 1, 1), ids))
#' run(ggml_rwkv_wkv6(ctx, f(2, 1, 1), f(2, 1, 1), f(2, 1, 1), f(2, 1), f(2, 1, 1), f(4, 1)))
#' run(ggml_rwkv_wkv7(ctx, f(2, 1, 1), f(2, 1, 1), f(2, 1, 1), f(2, 1, 1), f(2, 1, 1),
#'                    f(2, 1, 1), f(4, 1)))
#' run(ggml_gated_linear_attn(ctx, f(2, 1, 1), f(2, 1, 1), f(2, 1, 1), f(2, 1, 1), f(4, 1), 1))
#' run(ggml_gated_delta_net(ctx, f(2, 1, 1, 1), f(2, 1, 1, 1), f(2, 1, 1, 1), f(2, 1, 1, 1),
#'                          f(1, 1, 1, 1), f(2, 2, 1, 1)))
#' @name ggml_sequence
NULL

#' Per-type quantization
#'
#' For each quantized type `<t>` that ggmlR names: `quantize_<t>(src_data, n_rows,
#' n_per_row, imatrix)` quantizes `n_rows` rows of `n_per_row` values (an optional importance
#' matrix of `n_per_row` weights) into a raw vector; `quantize_row_<t>_ref` runs the reference
#' quantizer over `n_elements` values; `dequantize_row_<t>(raw_data, n_elements)` decodes
#' `n_elements` values. `n_per_row` and `n_elements` must be multiples of the type's block
#' size (`ggml_blck_size`). IQ2_XXS, IQ2_XS and IQ1_S need an importance matrix (IQ1_M
#' works best with one).
#' @param src_data Numeric values.
#' @param n_rows,n_per_row Rows and values per row.
#' @param imatrix `NULL` or `n_per_row` importance weights.
#' @param n_elements Number of values.
#' @param raw_data Quantized blocks (a raw vector).
#' @return A raw vector, or the decoded values.
#' @examples
#' x <- sin(seq_len(256) / 10)
#' q <- quantize_q8_0(x, 1, 256)
#' max(abs(dequantize_row_q8_0(q, 256) - x))
#' identical(quantize_row_q8_0_ref(x, 256), q)
#' for (t in c("q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
#'             "iq4_nl", "iq4_xs", "iq3_s", "iq3_xxs", "iq2_s", "tq1_0", "tq2_0", "mxfp4",
#'             "nvfp4", "q1_0")) {
#'   q <- get(paste0("quantize_", t))(x, 1, 256)
#'   cat(t, length(q), max(abs(get(paste0("dequantize_row_", t))(q, 256) - x)), "\n")
#' }
#' for (t in c("iq2_xxs", "iq2_xs", "iq1_s", "iq1_m")) {
#'   q <- get(paste0("quantize_", t))(x, 1, 256, imatrix = rep(1, 256))
#'   cat(t, length(q), max(abs(get(paste0("dequantize_row_", t))(q, 256) - x)), "\n")
#' }
#' for (t in c("q4_0", "q4_1", "q5_0", "q5_1", "q8_1", "q2_K", "q3_K", "q4_K", "q5_K",
#'             "q6_K", "q8_K", "iq3_xxs", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "tq1_0",
#'             "tq2_0", "mxfp4"))
#'   cat(t, length(get(paste0("quantize_row_", t, "_ref"))(x, 256)), "\n")
#' length(dequantize_row_q8_K(quantize_row_q8_K_ref(x, 256), 256))
#' @name quantize_q4_0
NULL

#' Custom operators with R functions
#'
#' GGML's custom ops (ggmlR has none): `ggml_map_custom1(ctx, a, fun)` is a tensor of `a`'s
#' type and shape whose values are `fun(a)`, `ggml_map_custom2` and `_3` give `fun(a, b)` and
#' `fun(a, b, c)`, and the `_inplace` forms write the result into `a`'s memory.
#' `ggml_custom_4d(ctx, type, ne0, ne1, ne2, ne3, args, fun)` is a new tensor of that type and
#' shape computed as `fun(args[[1]], args[[2]], ...)` (at most 9 tensors), and
#' `ggml_custom_inplace(ctx, a, args, fun)` is `fun(a, args[[1]], ...)` written into `a`.
#'
#' `fun` gets each operand's values as doubles (dimension 0 fastest, as `ggml_get_f32` gives
#' them; an array with `dim` set to the shape when it has more than one dimension) and returns
#' the result's values, as many as it has elements. Tensors must be F32, F16, BF16 or I32.
#'
#' R runs only on its own thread, so the function is called there, while
#' `ggml_backend_graph_compute`, `ggml_graph_compute`, `ggml_backend_sched_graph_compute`,
#' `ggml_backend_graph_plan_compute` or a synchronizing call waits for the graph; the
#' asynchronous `ggml_backend_graph_compute_async` and `ggml_backend_sched_graph_compute_async`
#' refuse graphs with custom ops. The op runs as one task whatever `n_tasks` says
#' (`GGML_N_TASKS_MAX` or a positive count, as GGML checks). An error in `fun`, or a result of
#' the wrong length, is an R error of the computing call (the node's values are then NaN).
#' Inside `fun` no ggml handle may be used (an R error): the computation is in progress.
#' After Ctrl-C stopped the waiting call, the R functions of the rest of that computation are
#' not called and their nodes are NaN.
#' @param ctx A context.
#' @param a,b,c Tensors: the operands.
#' @param fun An R function of the operands' values, returning the result's values.
#' @param n_tasks `GGML_N_TASKS_MAX` (-1) or a positive number of tasks.
#' @param type A `GGML_TYPE_*` constant: the result's type.
#' @param ne0,ne1,ne2,ne3 The result's shape.
#' @param args A list of tensors (or `NULL`).
#' @return A tensor.
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_f32(a, 1:6)
#' b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
#' ggml_set_f32(b, rep(10, 6))
#' sq <- ggml_map_custom1(ctx, a, function(x) x^2)
#' s <- ggml_map_custom2(ctx, a, b, function(x, y) x + y)
#' m <- ggml_custom_4d(ctx, GGML_TYPE_F32, 2, 1, 1, 1, list(a),
#'                     function(x) colSums(x))  # x is a 3 x 2 array
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, sq))
#' ggml_get_f32(sq)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, s))
#' ggml_get_f32(s)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, m))
#' ggml_get_f32(m)  # 6 15
#' @name ggml_map_custom
NULL
