x <- c(-2.5, -1, -0.25, 0, 0.5, 1.5, 3)
gelu_tanh <- function(v) 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v^3)))
unary_refs <- list(
  abs = abs, sgn = sign, neg = function(v) -v, step = function(v) as.numeric(v > 0),
  tanh = tanh, elu = function(v) ifelse(v > 0, v, expm1(v)), relu = function(v) pmax(v, 0),
  sigmoid = function(v) 1 / (1 + exp(-v)), gelu = through_f16(gelu_tanh),
  gelu_quick = through_f16(function(v) v / (1 + exp(-1.702 * v))),
  gelu_erf = function(v) v * pnorm(v),
  silu = function(v) v / (1 + exp(-v)),
  hardswish = function(v) v * pmin(pmax((v + 3) / 6, 0), 1),
  hardsigmoid = function(v) pmin(pmax((v + 3) / 6, 0), 1), exp = exp, expm1 = expm1,
  softplus = function(v) log1p(exp(v)), floor = floor, ceil = ceiling,
  round = function(v) sign(v) * floor(abs(v) + 0.5), trunc = trunc, sqr = function(v) v^2,
  sin = sin, cos = cos
)

test_that("every unary operator and its _inplace form compute GGML's function", {
  ctx <- ggml_init(16 * 1024 * 1024)
  for (op in names(unary_refs)) {
    a <- f32_tensor(ctx, x)
    out <- get(paste0("ggml_", op))(ctx, a)
    expect_equal(ggml_tensor_shape(out), ggml_tensor_shape(a))
    expect_equal(run_f32(ctx, out), unary_refs[[op]](x), tolerance = 1e-5, info = op)
    b <- f32_tensor(ctx, x)
    run_f32(ctx, get(paste0("ggml_", op, "_inplace"))(ctx, b))
    expect_equal(ggml_get_f32(b), unary_refs[[op]](x), tolerance = 1e-5, info = op)
  }
  p <- c(0.25, 1, 4, 9)
  for (op in c("sqrt", "log")) {
    ref <- get(op)
    expect_equal(run_f32(ctx, get(paste0("ggml_", op))(ctx, f32_tensor(ctx, p))), ref(p),
                 tolerance = 1e-6)
    b <- f32_tensor(ctx, p)
    run_f32(ctx, get(paste0("ggml_", op, "_inplace"))(ctx, b))
    expect_equal(ggml_get_f32(b), ref(p), tolerance = 1e-6)
  }
  expect_error(ggml_abs(ctx, "a"), "argument `a`")
  expect_error(ggml_relu(NULL, f32_tensor(ctx, x)), "argument `ctx`")
})

test_that("scalar-parameter operators follow their formulas", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, x)
  expect_equal(run_f32(ctx, ggml_scale(ctx, a, 2)), 2 * x)
  expect_equal(run_f32(ctx, ggml_scale_bias(ctx, a, 2, 1)), 2 * x + 1)
  expect_equal(run_f32(ctx, ggml_clamp(ctx, a, -1, 1)), pmin(pmax(x, -1), 1))
  expect_equal(run_f32(ctx, ggml_leaky_relu(ctx, a)), ifelse(x > 0, x, 0.01 * x),
               tolerance = 1e-6)
  expect_equal(run_f32(ctx, ggml_fill(ctx, a, 7)), rep(7, length(x)))
  sp <- function(v) log1p(exp(v))
  an <- 0.5 + sp(0.8); ap <- sp(0.8)
  want <- ifelse(x > 0, ap * x * x + 0.5 * x, (expm1(pmin(x, -1e-6)) - x) * an + 0.5 * x)
  expect_equal(run_f32(ctx, ggml_xielu(ctx, a, 0.8, 0.8, 0.5, -1e-6)), want, tolerance = 1e-5)
  for (case in list(list(ggml_scale_inplace, 3, 3 * x), list(ggml_fill_inplace, 2, rep(2, 7)))) {
    b <- f32_tensor(ctx, x)
    run_f32(ctx, case[[1]](ctx, b, case[[2]]))
    expect_equal(ggml_get_f32(b), case[[3]])
  }
  b <- f32_tensor(ctx, x)
  run_f32(ctx, ggml_scale_bias_inplace(ctx, b, -1, 1))
  expect_equal(ggml_get_f32(b), 1 - x)
  b <- f32_tensor(ctx, x)
  run_f32(ctx, ggml_clamp_inplace(ctx, b, 0, 1))
  expect_equal(ggml_get_f32(b), pmin(pmax(x, 0), 1))
  b <- f32_tensor(ctx, x)
  run_f32(ctx, ggml_leaky_relu(ctx, b, 0.5, TRUE))
  expect_equal(ggml_get_f32(b), ifelse(x > 0, x, 0.5 * x))
  expect_error(ggml_scale(ctx, a, c(1, 2)), "argument `s`")
  expect_error(ggml_leaky_relu(ctx, a, 0.1, NA), "argument `inplace`")
})

test_that("binary operators broadcast b over a, in place too", {
  ctx <- ggml_init(16 * 1024 * 1024)
  av <- as.double(1:6)
  a <- f32_tensor(ctx, av, c(3, 2))
  b <- f32_tensor(ctx, c(10, 20, 40))
  bb <- rep(c(10, 20, 40), 2)
  refs <- list(add = `+`, sub = `-`, mul = `*`, div = `/`)
  for (op in names(refs)) {
    expect_equal(run_f32(ctx, get(paste0("ggml_", op))(ctx, a, b)), refs[[op]](av, bb),
                 tolerance = 1e-6, info = op)
    c2 <- f32_tensor(ctx, av, c(3, 2))
    run_f32(ctx, get(paste0("ggml_", op, "_inplace"))(ctx, c2, b))
    expect_equal(ggml_get_f32(c2), refs[[op]](av, bb), tolerance = 1e-6, info = op)
    expect_error(get(paste0("ggml_", op))(ctx, b, a), paste0("ggml_", op))
  }
  one <- ggml_new_f32(ctx, 0.5)
  expect_equal(run_f32(ctx, ggml_add1(ctx, a, one)), av + 0.5)
  c2 <- f32_tensor(ctx, av, c(3, 2))
  run_f32(ctx, ggml_add1_inplace(ctx, c2, one))
  expect_equal(ggml_get_f32(c2), av + 0.5)
  # add_id: row (i1, i2) of a plus row ids[i1, i2] of b.
  a3 <- f32_tensor(ctx, av, c(3, 2, 1))
  bias <- f32_tensor(ctx, c(0, 0, 0, 100, 200, 300), c(3, 2))
  ids <- i32_tensor(ctx, c(1L, 0L), c(2, 1))
  expect_equal(run_f32(ctx, ggml_add_id(ctx, a3, bias, ids)), av + c(100, 200, 300, 0, 0, 0))
})
