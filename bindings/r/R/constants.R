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
