conv1d_ref <- function(x, k, s = 1, p = 0, d = 1) {
  xp <- c(rep(0, p), x, rep(0, p))
  K <- length(k); ow <- (length(xp) - d * (K - 1) - 1) %/% s + 1
  sapply(0:(ow - 1), function(o) sum(k * xp[o * s + (0:(K - 1)) * d + 1]))
}

conv2d_ref <- function(x, k) {  # x [W, H], k [KW, KH], stride 1, no padding
  X <- matrix(x, 3); Kk <- matrix(k, 2)
  out <- matrix(0, 2, 2)
  for (i in 1:2) for (j in 1:2) out[i, j] <- sum(X[i:(i + 1), j:(j + 1)] * Kk)
  as.double(out)
}

test_that("1-D, 2-D and 3-D convolutions match direct sums", {
  ctx <- ggml_init(64 * 1024 * 1024)
  x <- c(1, 2, 4, 8, 16)
  k <- c(1, -1, 0.5)
  k1 <- f32_tensor(ctx, k, c(3, 1, 1))
  x1 <- f32_tensor(ctx, x, c(5, 1, 1))
  expect_equal(run_f32(ctx, ggml_conv_1d(ctx, k1, x1)), conv1d_ref(x, k), tolerance = 1e-2)
  expect_equal(run_f32(ctx, ggml_conv_1d(ctx, k1, x1, 2, 1, 1)), conv1d_ref(x, k, 2, 1),
               tolerance = 1e-2)
  expect_equal(run_f32(ctx, ggml_conv_1d_ph(ctx, k1, x1, 1, 1)), conv1d_ref(x, k, 1, 1),
               tolerance = 1e-2)
  expect_equal(run_f32(ctx, ggml_conv_1d_dw(ctx, k1, x1)), conv1d_ref(x, k), tolerance = 1e-2)
  expect_equal(run_f32(ctx, ggml_conv_1d_dw_ph(ctx, k1, x1, 1, 1)), conv1d_ref(x, k, 1, 1),
               tolerance = 1e-2)
  # Transposed: every input element spreads the kernel: out[i + j] += x[i] k[j].
  ct <- rep(0, 7); for (i in 1:5) ct[i:(i + 2)] <- ct[i:(i + 2)] + x[i] * k
  expect_equal(run_f32(ctx, ggml_conv_transpose_1d(ctx, k1, x1)), ct, tolerance = 1e-5)
  xv <- as.double(1:9); kv <- c(1, 2, 0, -1)
  k2 <- f32_tensor(ctx, kv, c(2, 2, 1, 1))
  x2 <- f32_tensor(ctx, xv, c(3, 3, 1, 1))
  want <- conv2d_ref(xv, kv)
  for (f in list(ggml_conv_2d, ggml_conv_2d_direct, ggml_conv_2d_dw, ggml_conv_2d_dw_direct)) {
    expect_equal(run_f32(ctx, f(ctx, k2, x2)), want, tolerance = 1e-2)
  }
  x4 <- f32_tensor(ctx, as.double(1:16), c(4, 4, 1, 1))
  X4 <- matrix(1:16, 4)
  sk <- sapply(list(c(1, 1), c(3, 1), c(1, 3), c(3, 3)), function(o)
    sum(X4[o[1]:(o[1] + 1), o[2]:(o[2] + 1)] * matrix(kv, 2)))
  expect_equal(run_f32(ctx, ggml_conv_2d_sk_p0(ctx, k2, x4)), sk, tolerance = 1e-2)
  expect_equal(ggml_tensor_shape(ggml_conv_2d_s1_ph(ctx, f32_tensor(ctx, rep(1, 9), c(3, 3, 1, 1)), x2)),
               c(3, 3, 1, 1, 1))
  tr <- ggml_conv_transpose_2d_p0(ctx, k2, x2, 1)
  expect_equal(ggml_tensor_shape(tr), c(4, 4, 1, 1, 1))
  expect_equal(sum(run_f32(ctx, tr)), sum(xv) * sum(kv), tolerance = 1e-4)
  col <- ggml_im2col(ctx, k2, x2, 1, 1, 0, 0, 1, 1, TRUE, GGML_TYPE_F32)
  expect_equal(ggml_tensor_shape(col), c(4, 2, 2, 1, 1))
  expect_equal(run_f32(ctx, col)[1:4], c(1, 2, 4, 5))
  k3 <- f32_tensor(ctx, 2, c(1, 1, 1, 1))
  x3 <- f32_tensor(ctx, as.double(1:8), c(2, 2, 2, 1))
  expect_equal(run_f32(ctx, ggml_conv_3d(ctx, k3, x3, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1)), 2 * (1:8))
  expect_equal(run_f32(ctx, ggml_conv_3d_direct(ctx, k3, x3, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1)),
               2 * (1:8))
  expect_equal(ggml_tensor_shape(ggml_im2col_3d(ctx, k3, x3, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1,
                                                GGML_TYPE_F32)), c(1, 2, 2, 2, 1))
  # col2im_1d: columns [K * OC, T] summed where j * s0 + k = t + p0.
  cols <- f32_tensor(ctx, as.double(1:6), c(2, 3))
  expect_equal(run_f32(ctx, ggml_col2im_1d(ctx, cols, 1, 1, 0)), c(1, 2 + 3, 4 + 5, 6))
  expect_error(ggml_conv_2d(ctx, k2, f32_tensor(ctx, 1, c(1, 1, 1, 1))), "ggml_conv_2d")
  expect_error(ggml_conv_1d(ctx, k1, x1, "a"), "argument `s0`")
})

test_that("pooling, resizing, padding, rolling and windows", {
  ctx <- ggml_init(16 * 1024 * 1024)
  v <- as.double(1:8)
  a <- f32_tensor(ctx, v, c(4, 2))
  expect_equal(run_f32(ctx, ggml_pool_1d(ctx, a, GGML_OP_POOL_MAX, 2)), c(2, 4, 6, 8))
  expect_equal(run_f32(ctx, ggml_pool_1d(ctx, a, GGML_OP_POOL_AVG, 2)), c(1.5, 3.5, 5.5, 7.5))
  expect_equal(run_f32(ctx, ggml_pool_2d(ctx, a, GGML_OP_POOL_AVG, 2, 2)), c(3.5, 5.5))
  expect_equal(run_f32(ctx, ggml_pool_2d(ctx, a, GGML_OP_POOL_MAX, 2, 2)), c(6, 8))
  up <- ggml_upscale(ctx, a, 2)
  expect_equal(ggml_tensor_shape(up), c(8, 4, 1, 1, 1))
  expect_equal(run_f32(ctx, up)[1:8], rep(1:4, each = 2))
  ue <- ggml_upscale_ext(ctx, a, 8, 2, 1, 1)
  expect_equal(run_f32(ctx, ue), c(rep(1:4, each = 2), rep(5:8, each = 2)))
  ip <- ggml_interpolate(ctx, a, 2, 2, 1, 1, GGML_SCALE_MODE_NEAREST)
  expect_equal(run_f32(ctx, ip), c(1, 3, 5, 7))
  expect_equal(run_f32(ctx, ggml_pad(ctx, a, 1)), c(1:4, 0, 5:8, 0))
  expect_equal(run_f32(ctx, ggml_pad_circular(ctx, a, 1)), c(1:4, 1, 5:8, 5))
  expect_equal(run_f32(ctx, ggml_pad_ext(ctx, a, 1, 0, 0, 0, 0, 0, 0, 0)), c(0, 1:4, 0, 5:8))
  expect_equal(run_f32(ctx, ggml_pad_ext_circular(ctx, a, 1, 0, 0, 0, 0, 0, 0, 0)),
               c(4, 1:4, 8, 5:8))
  expect_equal(run_f32(ctx, ggml_pad_reflect_1d(ctx, a, 1, 1)), c(2, 1:4, 3, 6, 5:8, 7))
  expect_equal(run_f32(ctx, ggml_roll(ctx, a, 1)), c(4, 1, 2, 3, 8, 5, 6, 7))
  img <- f32_tensor(ctx, as.double(1:9), c(1, 3, 3))
  parts <- ggml_win_part(ctx, img, 2)
  expect_equal(ggml_tensor_shape(parts), c(1, 2, 2, 4, 1))
  expect_equal(run_f32(ctx, ggml_win_unpart(ctx, parts, 3, 3, 2)), as.double(1:9))
  tab <- ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 1, 3)
  ggml_set_f32(tab, c(1, 2, 3))
  # result[:, k, q] = a[:, (n - 1 - k) + q], n = 2.
  expect_equal(run_f32(ctx, ggml_get_rel_pos(ctx, tab, 2, 2)), c(2, 1, 3, 2))
  scores <- f32_tensor(ctx, rep(0, 16), c(4, 4, 1))
  pw <- f32_tensor(ctx, rep(1, 8), c(2, 2, 2, 1))
  ph <- f32_tensor(ctx, rep(10, 8), c(2, 2, 2, 1))
  expect_equal(run_f32(ctx, ggml_add_rel_pos(ctx, scores, pw, ph)), rep(11, 16))
  b <- f32_tensor(ctx, rep(0, 16), c(4, 4, 1))
  run_f32(ctx, ggml_add_rel_pos_inplace(ctx, b, pw, ph))
  expect_equal(ggml_get_f32(b), rep(11, 16))
  expect_error(ggml_pool_1d(ctx, a, 7L, 2), "argument `op`")
  expect_error(ggml_upscale(ctx, a, 2, 9L), "argument `mode`")
})

test_that("sequences and the recurrent operators compute their recurrences", {
  ctx <- ggml_init(16 * 1024 * 1024)
  expect_equal(run_f32(ctx, ggml_arange(ctx, 0, 5)), 0:4)
  expect_equal(run_f32(ctx, ggml_arange(ctx, 1, 2, 0.25)), c(1, 1.25, 1.5, 1.75))
  ts <- f32_tensor(ctx, c(0, 2))
  f <- exp(-log(10000) * (0:1) / 2)
  expect_equal(run_f32(ctx, ggml_timestep_embedding(ctx, ts, 4)),
               c(cos(0 * f), sin(0 * f), cos(2 * f), sin(2 * f)), tolerance = 1e-5)
  sx <- f32_tensor(ctx, c(1, 2, 3, 4), c(4, 1, 1))
  kern <- f32_tensor(ctx, c(1, 10), c(2, 1))
  expect_equal(run_f32(ctx, ggml_ssm_conv(ctx, sx, kern)), c(21, 32, 43))
  one <- function(v, ne) f32_tensor(ctx, v, ne)
  # Scalar (size-1) recurrences: one head of size 1, one token, one sequence.
  S0 <- 0.5; k <- 2; v <- 3; r <- 0.25; tf <- 1.5; td <- 0.9
  o6 <- run_f32(ctx, ggml_rwkv_wkv6(ctx, one(k, c(1, 1, 1)), one(v, c(1, 1, 1)), one(r, c(1, 1, 1)),
                                    one(tf, c(1, 1)), one(td, c(1, 1, 1)), one(S0, c(1, 1))))
  expect_equal(o6, c(r * (tf * k * v + S0), S0 * td + k * v), tolerance = 1e-6)
  w <- 0.8; aa <- -0.5; bb <- 0.25
  s7 <- S0 * w + v * k + (aa * S0) * bb
  o7 <- run_f32(ctx, ggml_rwkv_wkv7(ctx, one(r, c(1, 1, 1)), one(w, c(1, 1, 1)), one(k, c(1, 1, 1)),
                                    one(v, c(1, 1, 1)), one(aa, c(1, 1, 1)), one(bb, c(1, 1, 1)),
                                    one(S0, c(1, 1))))
  expect_equal(o7, c(s7 * r, s7), tolerance = 1e-6)
  g <- 0.7; q <- 1.25
  sg <- S0 * g + k * v
  og <- run_f32(ctx, ggml_gated_linear_attn(ctx, one(k, c(1, 1, 1)), one(v, c(1, 1, 1)),
                                            one(q, c(1, 1, 1)), one(g, c(1, 1, 1)),
                                            one(S0, c(1, 1)), 2))
  expect_equal(og, c(sg * q * 2, sg), tolerance = 1e-6)
  beta <- 0.5; gl <- -0.1
  M <- S0 * exp(gl); M <- M + k * (v - M * k) * beta
  od <- run_f32(ctx, ggml_gated_delta_net(ctx, one(q, c(1, 1, 1, 1)), one(k, c(1, 1, 1, 1)),
                                          one(v, c(1, 1, 1, 1)), one(gl, c(1, 1, 1, 1)),
                                          one(beta, c(1, 1, 1, 1)), one(S0, c(1, 1, 1, 1))))
  expect_equal(od, c(M * q, M), tolerance = 1e-5)
  x <- 2; dt <- 0.3; A <- -1; B <- 0.5; C <- 4
  delta <- log1p(exp(dt)); st <- S0 * exp(delta * A) + B * x * delta
  ids <- i32_tensor(ctx, 0L)
  os <- run_f32(ctx, ggml_ssm_scan(ctx, one(S0, c(1, 1, 1, 1)), one(x, c(1, 1, 1, 1)),
                                   one(dt, c(1, 1, 1)), one(A, c(1, 1)), one(B, c(1, 1, 1, 1)),
                                   one(C, c(1, 1, 1, 1)), ids))
  expect_equal(os, c(st * C, st), tolerance = 1e-5)
  expect_error(ggml_ssm_conv(ctx, sx, f32_tensor(ctx, 1:6, c(3, 2))), "ggml_ssm_conv")
})
