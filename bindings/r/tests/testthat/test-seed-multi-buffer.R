# ggmlR's ggml_backend_multi_buffer_alloc_buffer example (as the project's API.md gives it),
# then what it should leave behind.
test_that("the ggml_backend_multi_buffer_alloc_buffer example runs", {
  cpu <- ggml_backend_cpu_init()
  ctx1 <- ggml_init(1024, no_alloc = TRUE)
  ctx2 <- ggml_init(2048, no_alloc = TRUE)
  a <- ggml_new_tensor_1d(ctx1, GGML_TYPE_F32, 10)
  b <- ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 20)
  buf1 <- ggml_backend_alloc_ctx_tensors(ctx1, cpu)
  buf2 <- ggml_backend_alloc_ctx_tensors(ctx2, cpu)
  multi <- ggml_backend_multi_buffer_alloc_buffer(list(buf1, buf2))
  expect_true(ggml_backend_buffer_is_multi_buffer(multi))
  expect_gte(ggml_backend_buffer_get_size(multi), (10 + 20) * 4)
  # The parts belong to the multi-buffer now.
  expect_error(ggml_backend_buffer_get_size(buf1), "argument `buffer`: the ggml backend buffer was freed")
  ggml_set_f32(b, as.double(1:20))
  expect_equal(ggml_get_f32(b), as.double(1:20))
  ggml_backend_buffer_free(multi)
  expect_null(ggml_backend_buffer_free(multi))
  expect_error(ggml_get_f32(b), "ggml_get_f32")
})
