x <- sin(seq_len(256) / 7) * 2

test_that("ggml_quantize_chunk quantizes rows into GGML's blocks", {
  q <- ggml_quantize_chunk(GGML_TYPE_Q8_0, x, 2, 128)
  expect_type(q, "raw")
  expect_identical(length(q), 8L * 34L)
  expect_identical(q, quantize_q8_0(x, 2, 128))
  expect_lt(max(abs(dequantize_row_q8_0(q, 256) - x)), 0.02)
  expect_error(ggml_quantize_chunk(GGML_TYPE_Q8_0, x, 3, 128), "argument `src`")
  expect_error(ggml_quantize_chunk(GGML_TYPE_Q8_0, x[1:30], 1, 30), "ggml_quantize_chunk")
  expect_error(ggml_quantize_chunk(99L, x, 2, 128), "argument `type`")
})

test_that("type queries: importance matrices and block info", {
  for (t in c(16L, 17L, 19L)) expect_true(ggml_quantize_requires_imatrix(t))
  expect_false(ggml_quantize_requires_imatrix(29L))
  expect_false(ggml_quantize_requires_imatrix(GGML_TYPE_Q4_K))
  info <- ggml_quant_block_info(GGML_TYPE_Q4_K)
  expect_identical(info$type_name, "q4_K")
  expect_equal(info$type_size, 144)
  expect_equal(info$block_size, 256)
  expect_true(info$is_quantized)
  expect_false(ggml_quant_block_info(GGML_TYPE_F32)$is_quantized)
  expect_null(ggml_quantize_init(GGML_TYPE_Q4_0))
  expect_error(ggml_quantize_init(4L), "argument `type`")
  expect_null(ggml_quantize_free())
})

# Bytes per 256 values and the largest round-trip error on x allowed, per type.
per_type <- list(
  q4_0 = c(144, 0.3), q4_1 = c(160, 0.2), q5_0 = c(176, 0.15), q5_1 = c(192, 0.1),
  q8_0 = c(272, 0.02), q2_K = c(84, 0.9), q3_K = c(110, 0.5), q4_K = c(144, 0.2),
  q5_K = c(176, 0.1), q6_K = c(210, 0.05), iq4_nl = c(144, 0.2), iq4_xs = c(136, 0.25),
  iq3_s = c(110, 0.5), iq3_xxs = c(98, 0.6), iq2_s = c(82, 0.9), tq1_0 = c(54, 2.1),
  tq2_0 = c(66, 2.1), mxfp4 = c(136, 0.6), nvfp4 = c(144, 0.6), q1_0 = c(36, 2.1)
)
needs_im <- list(iq2_xxs = c(66, 1.5), iq2_xs = c(74, 1), iq1_s = c(50, 1.5), iq1_m = c(56, 1.5))

test_that("quantize_<t> and dequantize_row_<t> round-trip every type", {
  for (t in names(per_type)) {
    q <- get(paste0("quantize_", t))(x, 1, 256)
    expect_identical(length(q), as.integer(per_type[[t]][1]), info = t)
    back <- get(paste0("dequantize_row_", t))(q, 256)
    expect_length(back, 256)
    expect_lt(max(abs(back - x)), per_type[[t]][2])
  }
  for (t in names(needs_im)) {
    q <- get(paste0("quantize_", t))(x, 1, 256, imatrix = rep(1, 256))
    expect_identical(length(q), as.integer(needs_im[[t]][1]), info = t)
    expect_lt(max(abs(get(paste0("dequantize_row_", t))(q, 256) - x)), needs_im[[t]][2])
  }
  w <- quantize_q4_K(x, 1, 256, imatrix = seq(0.1, 2, length.out = 256))
  expect_identical(length(w), 144L)
  expect_error(quantize_q4_0(x, 1, 256, imatrix = 1:3), "argument `imatrix`")
  expect_error(quantize_q4_0(x, 2, 256), "argument `src_data`")
  expect_error(dequantize_row_q4_0(1:10, 32), "argument `raw_data`")
  expect_error(dequantize_row_q4_0(as.raw(1:10), 32), "dequantize_row_q4_0")
})

test_that("the reference quantizers give the same blocks sizes and decode", {
  for (t in c("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
              "iq3_xxs", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "tq1_0", "tq2_0", "mxfp4")) {
    r <- get(paste0("quantize_row_", t, "_ref"))(x, 256)
    expect_identical(length(r), length(get(paste0("quantize_", t))(x, 1, 256)), info = t)
    back <- get(paste0("dequantize_row_", t))(r, 256)
    expect_lt(max(abs(back - x)), 2.1)
  }
  expect_identical(quantize_row_q8_0_ref(x, 256), quantize_q8_0(x, 1, 256))
  q81 <- quantize_row_q8_1_ref(x, 256)
  expect_identical(length(q81), 8L * 36L)
  q8k <- quantize_row_q8_K_ref(x, 256)
  expect_lt(max(abs(dequantize_row_q8_K(q8k, 256) - x)), 0.02)
  expect_error(quantize_row_q4_0_ref(x, 100), "argument `src_data`")
})
