# ggml_backend_meta_device: an R split function, called on R's thread at allocation.

cpu_dev <- function() ggml_backend_dev_get(0)

meta_setup <- function(split_fn, devs = list(cpu_dev(), cpu_dev())) {
  meta <- ggml_backend_meta_device(devs, split_fn)
  backend <- ggml_backend_dev_init(meta)
  ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
  w <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), "w")
  x <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), "x")
  y <- ggml_mul_mat(ctx, w, x)
  list(meta = meta, backend = backend, ctx = ctx, w = w, x = x, y = y,
       buf = ggml_backend_alloc_ctx_tensors(ctx, backend))
}

expected_y <- function() {
  wm <- matrix(1:12, nrow = 3)  # columns are w's rows
  as.vector(t(wm) %*% c(1, 0, 1))
}

compute_y <- function(m) {
  ggml_backend_tensor_set_data(m$w, 1:12)
  ggml_backend_tensor_set_data(m$x, c(1, 0, 1))
  expect_identical(ggml_backend_graph_compute(m$backend, ggml_build_forward_expand(m$ctx, m$y)), 0L)
  ggml_backend_tensor_get_data(m$y)
}

test_that("the split function sees each weight and splits it", {
  infos <- list()
  m <- meta_setup(function(info, n_devs) {
    infos[[info$name]] <<- list(info = info, n_devs = n_devs)
    if (info$name == "w") list(axis = 1L) else list(axis = 10L)
  })
  expect_identical(ggml_backend_dev_type(m$meta), 4L)
  expect_identical(ggml_backend_dev_name(m$meta), "Meta(CPU,CPU)")
  expect_setequal(names(infos), c("w", "x"))  # only leaves are asked
  wi <- infos$w$info
  expect_identical(infos$w$n_devs, 2L)
  expect_identical(wi$type, GGML_TYPE_F32)
  expect_equal(wi$ne, c(3, 4, 1, 1, 1))
  expect_identical(wi$op, 0L)
  expect_true(is.integer(wi$flags))
  expect_equal(compute_y(m), expected_y())
  ggml_backend_tensor_set_data(m$w, 1:12)
  expect_equal(ggml_backend_tensor_get_data(m$w), 1:12)  # gathered from the slices
})

test_that("explicit lengths, mirrored, partial and NULL states round-trip", {
  m <- meta_setup(function(info, n_devs) {
    if (info$name == "w") list(axis = 1L, ne = c(1, 3), n_segments = 1L) else NULL
  })
  expect_equal(compute_y(m), expected_y())
  single <- meta_setup(function(info, n_devs) if (info$name == "w") list(axis = 1L),
                       devs = list(cpu_dev()))
  expect_equal(compute_y(single), expected_y())
  p <- meta_setup(function(info, n_devs) if (info$name == "x") list(axis = 11L) else list())
  ggml_backend_tensor_set_data(p$x, c(1, 0, 1))
  expect_equal(ggml_backend_tensor_get_data(p$x), c(1, 0, 1))  # partial sums add up
})

test_that("an error in split_fn warns and mirrors every later tensor", {
  calls <- 0
  # The warning is given in R's top-level context; with warn = 1 it is printed at once.
  old <- options(warn = 1)
  on.exit(options(old))
  msg <- capture.output(type = "message", m <- meta_setup(function(info, n_devs) {
    calls <<- calls + 1
    stop("no split for you")
  }))
  expect_match(paste(msg, collapse = " "), paste(
    "split_fn failed for tensor \"w\": no split for you; this and every later tensor",
    "are mirrored"))
  expect_identical(calls, 1)  # sticky: never called again
  expect_equal(compute_y(m), expected_y())
  msg <- capture.output(type = "message",
                        m7 <- meta_setup(function(info, n_devs) list(axis = 7L)))
  expect_match(paste(msg, collapse = " "), "it returned axis 7")
})

test_that("lengths that do not fit and bad arguments are R errors", {
  meta <- ggml_backend_meta_device(list(cpu_dev(), cpu_dev()),
                                   function(info, n_devs) list(axis = 1L, ne = c(1, 1)))
  ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
  w <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), "w")
  expect_error(ggml_backend_alloc_ctx_tensors(ctx, ggml_backend_dev_init(meta)),
               "the lengths along axis 1 sum to 2, the tensor has 4")
  f <- function(info, n_devs) NULL
  expect_error(ggml_backend_meta_device(list(), f), "argument `devs`")
  expect_error(ggml_backend_meta_device(cpu_dev(), f), "argument `devs`")
  expect_error(ggml_backend_meta_device(list(cpu_dev(), 1), f), "argument `devs\\[\\[2\\]\\]`")
  expect_error(ggml_backend_meta_device(list(cpu_dev()), "f"), "argument `split_fn`")
  expect_error(ggml_backend_meta_device(list(cpu_dev()), f, env = 1), "argument `env`")
  expect_error(ggml_backend_meta_device(rep(list(cpu_dev()), 17), f), "at most 16")
  meta1 <- ggml_backend_meta_device(list(cpu_dev()), f)
  expect_error(ggml_backend_meta_device(list(meta1), f), "is itself a meta device")
})
