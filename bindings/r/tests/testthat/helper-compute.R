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
