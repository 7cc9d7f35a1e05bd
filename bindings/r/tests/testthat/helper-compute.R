# Shared by the tests: compute a tensor on the CPU and read it back.
run_f32 <- function(ctx, out) {
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
  ggml_get_f32(out)
}

run_i32 <- function(ctx, out) {
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out))
  ggml_get_i32(out)
}

f32_tensor <- function(ctx, values, ne = length(values)) {
  t <- ggml_new_tensor(ctx, GGML_TYPE_F32, length(ne), ne)
  ggml_set_f32(t, values)
  t
}

i32_tensor <- function(ctx, values, ne = length(values)) {
  t <- ggml_new_tensor(ctx, GGML_TYPE_I32, length(ne), ne)
  ggml_set_i32(t, values)
  t
}

# `v` rounded to the nearest F16 value (ties to even; |v| within F16's range). GGML's CPU
# computes F32 GELU, GELU_QUICK and their GLUs through tables of F16 values: x rounded to F16,
# the function, the result rounded to F16.
f16_round <- function(v) {
  ulp <- 2^(pmax(floor(log2(abs(v))), -14) - 10)
  ifelse(v == 0, v, round(v / ulp) * ulp)
}

# `f` as GGML's F16 tables give it.
through_f16 <- function(f) function(v) f16_round(f(f16_round(v)))
