test_that("constants have ggmlR's values", {
  expect_identical(
    c(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q8_0,
      GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
      GGML_TYPE_I32, GGML_TYPE_BF16),
    c(0L, 1L, 2L, 3L, 8L, 10L, 11L, 12L, 13L, 14L, 26L, 30L))
})

test_that("shape queries of 1d to 4d tensors", {
  ctx <- ggml_init(1024 * 1024)
  t1 <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7)
  t2 <- ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 3, 4)
  t3 <- ggml_new_tensor_3d(ctx, GGML_TYPE_I32, 2, 3, 4)
  t4 <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 3, 4, 5)
  expect_equal(ggml_tensor_shape(t1), c(7, 1, 1, 1, 1))
  expect_equal(ggml_tensor_shape(t4), c(2, 3, 4, 5, 1))
  expect_equal(c(ggml_n_dims(t1), ggml_n_dims(t2), ggml_n_dims(t3), ggml_n_dims(t4)),
               c(1L, 2L, 3L, 4L))
  expect_equal(ggml_nelements(t4), 120)
  expect_equal(ggml_nrows(t4), 60)
  expect_equal(ggml_nrows(t1), 1)
  expect_equal(ggml_nbytes(t2), 3 * 4 * 2)
  expect_equal(ggml_nbytes(t3), 24 * 4)
  expect_identical(ggml_tensor_type(t2), GGML_TYPE_F16)
  expect_identical(ggml_tensor_type(t3), GGML_TYPE_I32)
})

test_that("set/get f32 and i32 round-trip and convert", {
  ctx <- ggml_init(1024 * 1024)
  f <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  ggml_set_f32(f, c(1.5, -2, 0.25, 1e6))
  expect_equal(ggml_get_f32(f), c(1.5, -2, 0.25, 1e6))
  expect_identical(ggml_get_i32(f), c(1L, -2L, 0L, 1000000L))
  i <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
  ggml_set_i32(i, c(-7L, 0L, 2147483647L))
  expect_identical(ggml_get_i32(i), c(-7L, 0L, 2147483647L))
  ggml_set_i32(i, c(1, 2, 3))
  expect_identical(ggml_get_i32(i), 1:3)
  h <- ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 2)
  ggml_set_f32(h, c(0.1, 2))
  expect_equal(ggml_get_f32(h), c(0.0999755859375, 2))
})

test_that("wrong lengths, types and NA are R errors naming the argument", {
  ctx <- ggml_init(1024 * 1024)
  f <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
  i <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2)
  expect_error(ggml_set_f32(f, 1:3), "3 values given .* 4 elements")
  expect_error(ggml_set_f32(f, "a"), "argument `data`: expected a numeric vector")
  expect_error(ggml_set_f32(ctx, 1:4), "argument `tensor`")
  expect_error(ggml_set_i32(i, c(1L, NA)), "argument `data`: element 2")
  expect_error(ggml_set_i32(i, c(1, 2.5)), "argument `data`: element 2")
  expect_error(ggml_get_f32("x"), "argument `tensor`")
  q <- ggml_new_tensor_1d(ctx, GGML_TYPE_Q4_0, 32)
  expect_error(ggml_get_f32(q), "ggml_get_f32")
})
