# Custom ops with R functions: run on R's thread while a waiting call computes the graph.

test_that("ggml_map_custom1/2/3 give fun's values, in place or not", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, 1:6, c(3, 2))
  b <- f32_tensor(ctx, rep(10, 6), c(3, 2))
  c3 <- f32_tensor(ctx, c(2, 2, 2, 0.5, 0.5, 0.5), c(3, 2))
  seen <- NULL
  sq <- ggml_map_custom1(ctx, a, function(x) {
    seen <<- x
    x^2
  })
  expect_equal(run_f32(ctx, sq), (1:6)^2)
  expect_equal(seen, array(1:6, c(3, 2)))  # the operand as an array of its shape
  expect_identical(ggml_op_name(92L), ggml_op_desc(sq))
  expect_equal(run_f32(ctx, ggml_map_custom2(ctx, a, b, function(x, y) x + y)), 11:16)
  expect_equal(run_f32(ctx, ggml_map_custom3(ctx, a, b, c3, function(x, y, z) (x + y) * z)),
               c(22, 24, 26, 7, 7.5, 8))
  i1 <- ggml_map_custom1_inplace(ctx, a, function(x) -x)
  expect_equal(run_f32(ctx, i1), -(1:6))
  expect_equal(ggml_get_f32(a), -(1:6))  # written into a's memory
  i2 <- ggml_map_custom2_inplace(ctx, a, b, function(x, y) x * y)
  expect_equal(run_f32(ctx, i2), -10 * (1:6))
  i3 <- ggml_map_custom3_inplace(ctx, a, b, c3, function(x, y, z) x + y + z)
  expect_equal(run_f32(ctx, i3), -10 * (1:6) + 10 + c(2, 2, 2, 0.5, 0.5, 0.5))
  one <- f32_tensor(ctx, c(1, 2, 3))
  expect_equal(run_f32(ctx, ggml_map_custom1(ctx, one, function(x) {
    stopifnot(is.null(dim(x)))  # a 1-d operand is a plain vector
    rev(x)
  })), c(3, 2, 1))
})

test_that("ggml_custom_4d and ggml_custom_inplace take a list of operands", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, 1:6, c(3, 2))
  b <- f32_tensor(ctx, c(1, 1, 1), 3)
  m <- ggml_custom_4d(ctx, GGML_TYPE_F32, 2, 1, 1, 1, list(a, b),
                      function(x, w) colSums(x * w))
  expect_equal(run_f32(ctx, m), c(6, 15))
  expect_equal(ggml_tensor_shape(m), c(2, 1, 1, 1, 1))
  k <- ggml_custom_4d(ctx, GGML_TYPE_I32, 3, 1, 1, 1, NULL, function() c(7, 8, 9))
  expect_identical(run_i32(ctx, k), c(7L, 8L, 9L))
  ip <- ggml_custom_inplace(ctx, a, list(b), function(x, w) x + w[1])
  expect_equal(run_f32(ctx, ip), 2:7)
  expect_equal(ggml_get_f32(a), 2:7)
})

test_that("custom ops also run under a backend, a plan and the scheduler", {
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, c(1, -2, 3))
  out <- ggml_map_custom1(ctx, a, function(x) 2 * x, n_tasks = 4L)
  g <- ggml_build_forward_expand(ctx, out)
  expect_identical(ggml_backend_graph_compute(cpu, g), 0L)
  expect_equal(ggml_get_f32(out), c(2, -4, 6))
  ggml_set_f32(a, c(5, 6, 7))
  plan <- ggml_backend_graph_plan_create(cpu, g)
  expect_identical(ggml_backend_graph_plan_compute(cpu, plan), 0L)
  expect_equal(ggml_get_f32(out), c(10, 12, 14))
  sched <- ggml_backend_sched_new(list(cpu))
  ggml_set_f32(a, c(0, 1, 2))
  expect_identical(ggml_backend_sched_graph_compute(sched, g), 0L)
  expect_equal(ggml_get_f32(out), c(0, 2, 4))
})

test_that("bad custom ops are R errors naming the argument or the failure", {
  ctx <- ggml_init(16 * 1024 * 1024)
  cpu <- ggml_backend_cpu_init()
  a <- f32_tensor(ctx, 1:3)
  expect_error(ggml_map_custom1(ctx, a, 42), "argument `fun`: expected an R function")
  expect_error(ggml_map_custom1(ctx, a, identity, n_tasks = 0L), "argument `n_tasks`")
  expect_error(ggml_map_custom1(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_Q8_0, 32), identity),
               "argument `a`: has type q8_0")
  expect_error(ggml_map_custom2(ctx, a, "b", identity), "argument `b`")
  expect_error(ggml_custom_4d(ctx, GGML_TYPE_F32, 1, 1, 1, 1, list(a, 3), identity),
               "argument `args\\[\\[2\\]\\]`")
  boom <- ggml_map_custom1(ctx, a, function(x) stop("boom"))
  expect_error(ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, boom)),
               "ggml_graph_compute: the R function of ggml_map_custom1 failed: boom")
  expect_true(all(is.nan(ggml_get_f32(boom))))
  short <- ggml_map_custom1(ctx, a, function(x) 1)
  expect_error(ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, short)),
               "it returned 1 values; the result has 3")
  chr <- ggml_map_custom1(ctx, a, function(x) letters[1:3])
  expect_error(ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, chr)), "not numbers")
  # Handles may not be used inside: the computation is in progress.
  peek <- ggml_map_custom1(ctx, a, function(x) ggml_get_f32(a))
  expect_error(ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, peek)),
               "argument `tensor`: a ggml tensor cannot be used inside an R function")
  # The asynchronous calls do not wait on R's thread.
  g <- ggml_build_forward_expand(ctx, ggml_map_custom1(ctx, a, identity))
  expect_error(ggml_backend_graph_compute_async(cpu, g), "is a custom op \\(MAP_CUSTOM1\\)")
  expect_error(ggml_backend_sched_graph_compute_async(ggml_backend_sched_new(list(cpu)), g),
               "is a custom op")
  # Afterwards everything still works.
  expect_identical(ggml_backend_graph_compute(cpu, g), 0L)
  expect_equal(ggml_get_f32(ggml_graph_node(g, -1)), 1:3)
})

test_that("the R functions of custom ops are kept while their nodes live", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, 1:2)
  make <- function(k) ggml_map_custom1(ctx, a, function(x) x * k)
  out <- make(3)
  gc()
  expect_equal(run_f32(ctx, out), c(3, 6))
  for (i in 1:50) make(i)  # nodes dropped: their functions are released
  gc()
  expect_equal(run_f32(ctx, out), c(3, 6))
})

test_that("handles the garbage collector frees inside an R function are dropped safely", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, 1:3)
  local({
    cpu <- ggml_backend_cpu_init()
    t <- ggml_new_tensor_1d(ggml_init(1024), GGML_TYPE_F32, 4)
  })
  out <- ggml_map_custom1(ctx, a, function(x) {
    gc()  # runs the finalizers of the backend and tensor above, during the computation
    x * 3
  })
  expect_equal(run_f32(ctx, out), c(3, 6, 9))
  gc()
  expect_equal(run_f32(ctx, ggml_relu(ctx, a)), 1:3)
})
