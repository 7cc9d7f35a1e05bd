compute <- function(ctx, out) {
  cpu <- ggml_backend_cpu_init()
  graph <- ggml_build_forward_expand(ctx, out)
  expect_identical(ggml_backend_graph_compute(cpu, graph), 0L)
  ggml_get_f32(out)
}

test_that("ggml_add and ggml_mul compute and broadcast b over a", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
  b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
  ggml_set_f32(a, c(1, 2, 3, 4, 5, 6))
  ggml_set_f32(b, c(10, 20, 30))
  expect_equal(compute(ctx, ggml_add(ctx, a, b)), c(11, 22, 33, 14, 25, 36))
  expect_equal(compute(ctx, ggml_mul(ctx, a, b)), c(10, 40, 90, 40, 100, 180))
  expect_error(ggml_add(ctx, b, a), "ggml_add")
  expect_error(ggml_mul(ctx, a, 3), "argument `b`")
})

test_that("ggml_relu zeroes negatives", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  ggml_set_f32(a, c(-1, 0, 2, -0.5))
  expect_equal(compute(ctx, ggml_relu(ctx, a)), c(0, 0, 2, 0))
})

test_that("ggml_mul_mat is t(a) %*% b in column-major R terms", {
  ctx <- ggml_init(16 * 1024 * 1024)
  # a: K = 3, M = 2; b: K = 3, N = 4; result ne = (M, N) = (2, 4).
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
  b <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4)
  av <- c(1, 2, 3, 4, 5, 6)
  bv <- as.double(1:12)
  ggml_set_f32(a, av)
  ggml_set_f32(b, bv)
  out <- ggml_mul_mat(ctx, a, b)
  expect_equal(ggml_tensor_shape(out), c(2, 4, 1, 1, 1))
  want <- t(matrix(av, 3, 2)) %*% matrix(bv, 3, 4)
  expect_equal(compute(ctx, out), as.double(want))
  c5 <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4)
  expect_error(ggml_mul_mat(ctx, a, c5), "ggml_mul_mat")
})

test_that("async compute returns 0, synchronize waits, and backend errors are R errors", {
  ctx <- ggml_init(16 * 1024 * 1024)
  cpu <- ggml_backend_cpu_init()
  expect_identical(ggml_backend_name(cpu), "CPU")
  a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1e5)
  ggml_set_f32(a, rep(-1, 1e5))
  b <- ggml_relu(ctx, ggml_add(ctx, a, a))
  g <- ggml_build_forward_expand(ctx, b)
  expect_identical(ggml_backend_graph_compute_async(cpu, g), 0L)
  expect_null(ggml_backend_synchronize(cpu))
  expect_true(all(ggml_get_f32(b) == 0))
  expect_error(ggml_backend_graph_compute(cpu, a), "argument `graph`")
  expect_error(ggml_backend_graph_compute(g, g), "argument `backend`")
  # A no_alloc context's tensors have no memory: an R error, not a crash.
  nctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
  x <- ggml_new_tensor_1d(nctx, GGML_TYPE_F32, 4)
  expect_error(ggml_set_f32(x, 1:4), "ggml_set_f32")
  expect_error(ggml_backend_graph_compute(cpu, ggml_build_forward_expand(nctx, ggml_relu(nctx, x))),
               "ggml_backend_graph_compute")
  expect_null(ggml_backend_free(cpu))
  expect_null(ggml_backend_free(cpu))
  expect_error(ggml_backend_synchronize(cpu), "argument `backend`: the ggml backend was freed")
})
