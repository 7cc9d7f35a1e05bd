# ggmlR's constants, with ggmlR's values (GGML's enum values).

#' GGML tensor types
#'
#' ggmlR's `GGML_TYPE_*` constants, GGML's `enum ggml_type` values. Any other type of GGML
#' can be passed as its bare integer code.
#' @format An integer.
#' @name GGML_TYPE
#' @aliases GGML_TYPE_F32 GGML_TYPE_F16 GGML_TYPE_Q4_0 GGML_TYPE_Q4_1 GGML_TYPE_Q8_0
#'   GGML_TYPE_Q2_K GGML_TYPE_Q3_K GGML_TYPE_Q4_K GGML_TYPE_Q5_K GGML_TYPE_Q6_K
#'   GGML_TYPE_I32 GGML_TYPE_BF16
#' @usage GGML_TYPE_F32
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 8)
#' ggml_tensor_type(t) == GGML_TYPE_F16
NULL

GGML_TYPE_F32 <- 0L
GGML_TYPE_F16 <- 1L
GGML_TYPE_Q4_0 <- 2L
GGML_TYPE_Q4_1 <- 3L
GGML_TYPE_Q8_0 <- 8L
GGML_TYPE_Q2_K <- 10L
GGML_TYPE_Q3_K <- 11L
GGML_TYPE_Q4_K <- 12L
GGML_TYPE_Q5_K <- 13L
GGML_TYPE_Q6_K <- 14L
GGML_TYPE_I32 <- 26L
GGML_TYPE_BF16 <- 30L

#' Operator constants
#'
#' ggmlR's constants for operator arguments, with GGML's values: GLU ops for `ggml_glu` and
#' `ggml_glu_split` (`GGML_GLU_OP_*`), pool ops for `ggml_pool_1d`/`_2d` (`GGML_OP_POOL_*`),
#' RoPE modes (`GGML_ROPE_TYPE_*`; `IMROPE` is GGML's, ggmlR lacks it), upscale modes
#' (`GGML_SCALE_MODE_*`), sort orders for `ggml_argsort` (`GGML_SORT_ORDER_*`) and the
#' triangles of `ggml_tri` (`GGML_TRI_TYPE_*`, GGML's); `GGML_GLU_OP_SWIGLU_CLAMP` (GGML's)
#' for `ggml_glu_split`, and `GGML_N_TASKS_MAX` (-1), the `n_tasks` of `ggml_map_custom1` and
#' its family meaning "every thread".
#' @format An integer.
#' @name GGML_GLU_OP
#' @aliases GGML_GLU_OP_REGLU GGML_GLU_OP_GEGLU GGML_GLU_OP_SWIGLU GGML_GLU_OP_SWIGLU_OAI
#'   GGML_GLU_OP_GEGLU_ERF GGML_GLU_OP_GEGLU_QUICK GGML_GLU_OP_SWIGLU_CLAMP GGML_OP_POOL_MAX
#'   GGML_OP_POOL_AVG GGML_N_TASKS_MAX
#'   GGML_ROPE_TYPE_NORM GGML_ROPE_TYPE_NEOX GGML_ROPE_TYPE_MROPE GGML_ROPE_TYPE_VISION
#'   GGML_ROPE_TYPE_IMROPE GGML_SCALE_MODE_NEAREST GGML_SCALE_MODE_BILINEAR
#'   GGML_SCALE_MODE_BICUBIC GGML_SORT_ORDER_ASC GGML_SORT_ORDER_DESC GGML_TRI_TYPE_UPPER_DIAG
#'   GGML_TRI_TYPE_UPPER GGML_TRI_TYPE_LOWER_DIAG GGML_TRI_TYPE_LOWER
#' @usage GGML_GLU_OP_SWIGLU
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#' ggml_set_f32(a, c(2, 3, 1))
#' out <- ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC)
#' ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
#' ggml_get_i32(out)  # 1 0 2
NULL

GGML_GLU_OP_REGLU <- 0L
GGML_GLU_OP_GEGLU <- 1L
GGML_GLU_OP_SWIGLU <- 2L
GGML_GLU_OP_SWIGLU_OAI <- 3L
GGML_GLU_OP_GEGLU_ERF <- 4L
GGML_GLU_OP_GEGLU_QUICK <- 5L
GGML_GLU_OP_SWIGLU_CLAMP <- 6L
GGML_OP_POOL_MAX <- 0L
GGML_OP_POOL_AVG <- 1L
GGML_N_TASKS_MAX <- -1L
GGML_ROPE_TYPE_NORM <- 0L
GGML_ROPE_TYPE_NEOX <- 2L
GGML_ROPE_TYPE_MROPE <- 8L
GGML_ROPE_TYPE_VISION <- 24L
GGML_ROPE_TYPE_IMROPE <- 40L
GGML_SCALE_MODE_NEAREST <- 0L
GGML_SCALE_MODE_BILINEAR <- 1L
GGML_SCALE_MODE_BICUBIC <- 2L
GGML_SORT_ORDER_ASC <- 0L
GGML_SORT_ORDER_DESC <- 1L
GGML_TRI_TYPE_UPPER_DIAG <- 0L
GGML_TRI_TYPE_UPPER <- 1L
GGML_TRI_TYPE_LOWER_DIAG <- 2L
GGML_TRI_TYPE_LOWER <- 3L
