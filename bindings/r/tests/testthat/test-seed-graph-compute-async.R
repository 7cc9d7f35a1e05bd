# The Examples section of ggmlR's ggml_backend_graph_compute_async page, verbatim, then the
# values it computed.
test_that("the ggml_backend_graph_compute_async example runs and computes relu", {
  set.seed(11)
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 100)
  b <- ggml_relu(ctx, a)
  graph <- ggml_build_forward_expand(ctx, b)
  ggml_set_f32(a, rnorm(100))
  status <- ggml_backend_graph_compute_async(cpu, graph)
  ggml_backend_synchronize(cpu)

  expect_identical(status, 0L)
  set.seed(11)
  x <- as.double(rnorm(100))
  # F32 storage: compare with the inputs rounded to single precision.
  expect_equal(ggml_get_f32(a), x, tolerance = 1e-7)
  expect_equal(ggml_get_f32(b), pmax(x, 0), tolerance = 1e-7)
  expect_true(all(ggml_get_f32(b)[x <= 0] == 0))
})
