test_that("matrix operators match R's matrix algebra", {
  ctx <- ggml_init(16 * 1024 * 1024)
  av <- c(1, 2, 3, 4, 5, 6)
  bv <- c(1, -1, 2, 0, 3, 1)
  a <- f32_tensor(ctx, av, c(3, 2))  # K = 3, M = 2
  b <- f32_tensor(ctx, bv, c(3, 2))  # K = 3, N = 2
  expect_equal(run_f32(ctx, ggml_mul_mat(ctx, a, b)),
               as.double(t(matrix(av, 3)) %*% matrix(bv, 3)))
  # out_prod: a [n, k], b [m, k] -> [n, m] = A %*% t(B).
  expect_equal(run_f32(ctx, ggml_out_prod(ctx, a, b)),
               as.double(matrix(av, 3) %*% t(matrix(bv, 3))))
  expect_equal(run_f32(ctx, ggml_diag(ctx, f32_tensor(ctx, c(1, 2)))), c(1, 0, 0, 2))
  m <- f32_tensor(ctx, 1:9, c(3, 3))
  # Element (column i, row r) is kept for i <= r with LOWER_DIAG.
  keep <- outer(0:2, 0:2, function(i, r) i <= r)
  expect_equal(run_f32(ctx, ggml_tri(ctx, m, GGML_TRI_TYPE_LOWER_DIAG)), as.double(ifelse(keep, 1:9, 0)))
  # solve_tri: row i of a holds equation i; b [k, n]; lower triangular forward substitution.
  A <- matrix(c(2, 0, 1, 4), 2, byrow = TRUE)  # equations: 2 x0 = b0; x0 + 4 x1 = b1
  at <- f32_tensor(ctx, as.double(t(A)), c(2, 2))
  rhs <- f32_tensor(ctx, c(2, 9), c(1, 2))
  expect_equal(run_f32(ctx, ggml_solve_tri(ctx, at, rhs, TRUE, TRUE, FALSE)), c(1, 2))
  # mul_mat_id: expert ids[e, t] of as [K, M, n_expert] times b[, e, t].
  experts <- f32_tensor(ctx, c(1, 0, 0, 1, 2, 0, 0, 3), c(2, 2, 2))
  x <- f32_tensor(ctx, c(5, 7), c(2, 1, 1))
  ids <- i32_tensor(ctx, 1L, c(1, 1))
  expect_equal(run_f32(ctx, ggml_mul_mat_id(ctx, experts, x, ids)), c(10, 21))
  expect_error(ggml_mul_mat(ctx, a, f32_tensor(ctx, 1:4, c(4, 1))), "ggml_mul_mat")
  expect_error(ggml_tri(ctx, m, 9L), "argument `type`")
})

test_that("reductions sum, average, find and count", {
  ctx <- ggml_init(16 * 1024 * 1024)
  v <- c(1, 5, 3, 4, 2, 6)
  a <- f32_tensor(ctx, v, c(3, 2))
  expect_equal(run_f32(ctx, ggml_sum(ctx, a)), 21)
  expect_equal(run_f32(ctx, ggml_sum_rows(ctx, a)), c(9, 12))
  expect_equal(run_f32(ctx, ggml_mean(ctx, a)), c(3, 4))
  expect_equal(run_i32(ctx, ggml_argmax(ctx, a)), c(1L, 2L))
  expect_equal(run_f32(ctx, ggml_cumsum(ctx, a)), c(1, 6, 9, 4, 6, 12))
  i1 <- i32_tensor(ctx, c(1L, 2L, 3L, 4L))
  i2 <- i32_tensor(ctx, c(1L, 0L, 3L, 0L))
  n <- ggml_count_equal(ctx, i1, i2)
  ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, n))
  expect_equal(ggml_tensor_type(n), 27L)  # I64
  expect_equal(readBin(ggml_backend_tensor_get_and_sync(NULL, n, 0, 8), "integer", 2), c(2L, 0L))
  p <- f32_tensor(ctx, c(0, 1, 0, 1, 0, 0), c(3, 2))
  lsm <- function(r) r - max(r) - log(sum(exp(r - max(r))))
  m <- matrix(v, 3); pm <- matrix(c(0, 1, 0, 1, 0, 0), 3)
  want <- -sum(sapply(1:2, function(j) sum(lsm(m[, j]) * pm[, j]))) / 2
  expect_equal(run_f32(ctx, ggml_cross_entropy_loss(ctx, a, p)), want, tolerance = 1e-6)
})

test_that("GLU variants gate the activation of one half by the other", {
  ctx <- ggml_init(16 * 1024 * 1024)
  xv <- c(-1, 0.5, 2); gv <- c(3, -2, 0.5)
  a <- f32_tensor(ctx, c(xv, gv))
  x <- f32_tensor(ctx, xv); g <- f32_tensor(ctx, gv)
  gelu_tanh <- function(v) 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v^3)))
  # GEGLU and GEGLU_QUICK through GGML's F16 tables (helper-compute.R)
  acts <- list(reglu = function(v) pmax(v, 0), geglu = through_f16(gelu_tanh),
               swiglu = function(v) v / (1 + exp(-v)), geglu_erf = function(v) v * pnorm(v),
               geglu_quick = through_f16(function(v) v / (1 + exp(-1.702 * v))))
  codes <- c(reglu = GGML_GLU_OP_REGLU, geglu = GGML_GLU_OP_GEGLU, swiglu = GGML_GLU_OP_SWIGLU,
             geglu_erf = GGML_GLU_OP_GEGLU_ERF, geglu_quick = GGML_GLU_OP_GEGLU_QUICK)
  for (op in names(acts)) {
    f <- acts[[op]]
    expect_equal(run_f32(ctx, get(paste0("ggml_", op))(ctx, a)), f(xv) * gv,
                 tolerance = 1e-5, info = op)
    expect_equal(run_f32(ctx, get(paste0("ggml_", op, "_swapped"))(ctx, a)), f(gv) * xv,
                 tolerance = 1e-5, info = op)
    expect_equal(run_f32(ctx, get(paste0("ggml_", op, "_split"))(ctx, x, g)), f(xv) * gv,
                 tolerance = 1e-5, info = op)
    expect_equal(run_f32(ctx, ggml_glu(ctx, a, codes[[op]])), f(xv) * gv, tolerance = 1e-5)
    expect_equal(run_f32(ctx, ggml_glu(ctx, a, codes[[op]], TRUE)), f(gv) * xv, tolerance = 1e-5)
    expect_equal(run_f32(ctx, ggml_glu_split(ctx, x, g, codes[[op]])), f(xv) * gv,
                 tolerance = 1e-5)
  }
  xs <- pmin(xv, 1); gs <- pmin(pmax(gv, -1), 1)
  expect_equal(run_f32(ctx, ggml_swiglu_oai(ctx, x, g, 1.702, 1)),
               xs / (1 + exp(-1.702 * xs)) * (gs + 1), tolerance = 1e-5)
  expect_error(ggml_glu(ctx, a, 42L), "argument `op`")
})

test_that("norms normalise each row", {
  ctx <- ggml_init(16 * 1024 * 1024)
  v <- c(1, 2, 3, 6)
  a <- f32_tensor(ctx, v)
  nrm <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5)
  rms <- v / sqrt(mean(v^2) + 1e-5)
  expect_equal(run_f32(ctx, ggml_norm(ctx, a)), nrm, tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_rms_norm(ctx, a)), rms, tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_l2_norm(ctx, a)), v / sqrt(sum(v^2)), tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_norm(ctx, a, eps = 1)),
               (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1), tolerance = 1e-5)
  for (case in list(list(ggml_norm_inplace, nrm), list(ggml_rms_norm_inplace, rms),
                    list(ggml_l2_norm_inplace, v / sqrt(sum(v^2))))) {
    b <- f32_tensor(ctx, v)
    run_f32(ctx, case[[1]](ctx, b))
    expect_equal(ggml_get_f32(b), case[[2]], tolerance = 1e-5)
  }
  # group_norm: 2 groups of dimension 2 (channels), each normalised over all its elements.
  gv <- c(1, 3, 10, 30)
  g <- f32_tensor(ctx, gv, c(2, 1, 2))
  z <- function(u) (u - mean(u)) / sqrt(mean((u - mean(u))^2) + 1e-5)
  expect_equal(run_f32(ctx, ggml_group_norm(ctx, g, 2)), c(z(gv[1:2]), z(gv[3:4])),
               tolerance = 1e-4)
  b <- f32_tensor(ctx, gv, c(2, 1, 2))
  run_f32(ctx, ggml_group_norm_inplace(ctx, b, 1))
  expect_equal(ggml_get_f32(b), z(gv), tolerance = 1e-4)
})

test_that("softmax, its mask and scale, sinks and causal masks", {
  ctx <- ggml_init(16 * 1024 * 1024)
  v <- c(1, 2, 3, 1, 1, 1)
  a <- f32_tensor(ctx, v, c(3, 2))
  sm <- function(r) exp(r - max(r)) / sum(exp(r - max(r)))
  expect_equal(run_f32(ctx, ggml_soft_max(ctx, a)), c(sm(v[1:3]), sm(v[4:6])), tolerance = 1e-6)
  b <- f32_tensor(ctx, v, c(3, 2))
  run_f32(ctx, ggml_soft_max_inplace(ctx, b))
  expect_equal(ggml_get_f32(b), c(sm(v[1:3]), sm(v[4:6])), tolerance = 1e-6)
  mask <- f32_tensor(ctx, c(0, -Inf, 0, 0, 0, -Inf), c(3, 2))
  want <- c(sm(0.5 * v[1:3] + c(0, -Inf, 0)), sm(0.5 * v[4:6] + c(0, 0, -Inf)))
  expect_equal(run_f32(ctx, ggml_soft_max_ext(ctx, a, mask, 0.5, 0)), want, tolerance = 1e-6)
  b <- f32_tensor(ctx, v, c(3, 2))
  run_f32(ctx, ggml_soft_max_ext_inplace(ctx, b, NULL, 2))
  expect_equal(ggml_get_f32(b), c(sm(2 * v[1:3]), sm(2 * v[4:6])), tolerance = 1e-6)
  s <- ggml_soft_max_ext(ctx, a)
  sunk <- ggml_soft_max_add_sinks(ctx, s, ggml_new_f32(ctx, 0))
  r1 <- v[1:3]; m1 <- max(r1, 0)
  expect_equal(run_f32(ctx, sunk)[1:3], exp(r1 - m1) / (sum(exp(r1 - m1)) + exp(-m1)),
               tolerance = 1e-6)
  m <- f32_tensor(ctx, rep(1, 9), c(3, 3))
  upper <- outer(0:2, 0:2, function(i, r) i > r)
  expect_equal(run_f32(ctx, ggml_diag_mask_inf(ctx, m, 0)), as.double(ifelse(upper, -Inf, 1)))
  expect_equal(run_f32(ctx, ggml_diag_mask_zero(ctx, m, 0)), as.double(ifelse(upper, 0, 1)))
  expect_equal(run_f32(ctx, ggml_diag_mask_zero(ctx, m, 1)),
               as.double(ifelse(outer(0:2, 0:2, function(i, r) i > r + 1), 0, 1)))
  for (case in list(list(ggml_diag_mask_inf_inplace, -Inf), list(ggml_diag_mask_zero_inplace, 0))) {
    b <- f32_tensor(ctx, rep(1, 9), c(3, 3))
    run_f32(ctx, case[[1]](ctx, b, 0))
    expect_equal(ggml_get_f32(b), as.double(ifelse(upper, case[[2]], 1)))
  }
  expect_error(ggml_soft_max_ext(ctx, a, "mask"), "argument `mask`")
})

test_that("flash attention is softmax(scale k'q) v per head", {
  ctx <- ggml_init(16 * 1024 * 1024)
  D <- 4; nkv <- 3
  qv <- c(1, 0.5, -1, 2); kv <- c(1, 0, 0, 1, 0, 1, 1, 0, -1, 2, 0, 0.5)
  vv <- c(1, 2, 3, 4, -1, 0, 1, 0, 2, 2, 2, 2)
  q <- f32_tensor(ctx, qv, c(D, 1, 1, 1))
  k <- f32_tensor(ctx, kv, c(D, nkv, 1, 1))
  v <- f32_tensor(ctx, vv, c(D, nkv, 1, 1))
  scores <- 0.5 * as.double(t(matrix(kv, D)) %*% qv)
  w <- exp(scores - max(scores)); w <- w / sum(w)
  out <- ggml_flash_attn_ext(ctx, q, k, v, NULL, 0.5)
  expect_equal(ggml_tensor_shape(out), c(D, 1, 1, 1, 1))
  expect_equal(run_f32(ctx, out), as.double(matrix(vv, D) %*% w), tolerance = 1e-5)
  sunk <- ggml_flash_attn_ext_add_sinks(ctx, out, ggml_new_f32(ctx, 0))
  m <- max(scores, 0); ws <- exp(scores - m) / (sum(exp(scores - m)) + exp(-m))
  expect_equal(run_f32(ctx, sunk), as.double(matrix(vv, D) %*% ws), tolerance = 1e-5)
  expect_error(ggml_flash_attn_ext(ctx, q, k, v, NULL, "s"), "argument `scale`")
})

test_that("rope rotates pairs by position times frequency", {
  ctx <- ggml_init(16 * 1024 * 1024)
  # head_dim 4, 1 head, 2 tokens at positions 0 and 3.
  av <- c(1, 2, 3, 4, 1, 2, 3, 4)
  a <- f32_tensor(ctx, av, c(4, 1, 2))
  pos <- i32_tensor(ctx, c(0L, 3L))
  rot <- function(x0, x1, th) c(x0 * cos(th) - x1 * sin(th), x0 * sin(th) + x1 * cos(th))
  th <- function(p, i, base = 10000) p * base^(-2 * i / 4)
  norm_ref <- function(p) { r1 <- rot(1, 2, th(p, 0)); r2 <- rot(3, 4, th(p, 1))
    c(r1, r2) }
  neox_ref <- function(p) { r1 <- rot(1, 3, th(p, 0)); r2 <- rot(2, 4, th(p, 1))
    c(r1[1], r2[1], r1[2], r2[2]) }
  want <- c(norm_ref(0), norm_ref(3))
  expect_equal(run_f32(ctx, ggml_rope(ctx, a, pos, 4)), want, tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_rope_ext(ctx, a, pos, NULL, 4)), want, tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_rope_ext(ctx, a, pos, NULL, 4, GGML_ROPE_TYPE_NEOX)),
               c(neox_ref(0), neox_ref(3)), tolerance = 1e-5)
  expect_equal(run_f32(ctx, ggml_rope_ext(ctx, a, pos, NULL, 4, freq_base = 100)),
               c(norm_ref(0), c(rot(1, 2, 3), rot(3, 4, th(3, 1, 100)))), tolerance = 1e-5)
  for (f in list(function(b) ggml_rope_inplace(ctx, b, pos, 4),
                 function(b) ggml_rope_ext_inplace(ctx, b, pos, NULL, 4))) {
    b <- f32_tensor(ctx, av, c(4, 1, 2))
    run_f32(ctx, f(b))
    expect_equal(ggml_get_f32(b), want, tolerance = 1e-5)
  }
  # M-RoPE with every pair in section 0 uses the first position stream.
  mp <- i32_tensor(ctx, c(0L, 3L, 9L, 9L, 9L, 9L, 9L, 9L))
  sec <- c(2L, 0L, 0L, 0L)
  expect_equal(run_f32(ctx, ggml_rope_multi(ctx, a, mp, NULL, 4, sec, GGML_ROPE_TYPE_MROPE)),
               c(neox_ref(0), neox_ref(3)), tolerance = 1e-5)
  b <- f32_tensor(ctx, av, c(4, 1, 2))
  run_f32(ctx, ggml_rope_multi_inplace(ctx, b, mp, NULL, 4, sec, GGML_ROPE_TYPE_MROPE))
  expect_equal(ggml_get_f32(b), c(neox_ref(0), neox_ref(3)), tolerance = 1e-5)
  expect_error(ggml_rope_multi(ctx, a, mp, NULL, 4, 1:3), "argument `sections`")
  expect_error(ggml_rope(ctx, a, f32_tensor(ctx, c(0, 1)), 4), "ggml_rope")
})
