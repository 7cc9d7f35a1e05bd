# Ctrl-C in long calls: rs_inject_interrupt() makes the next look for an interrupt see one.
inject <- function() ggmlrs:::rs_inject_interrupt()

big_graph <- function(ctx, n = 256, depth = 8) {
  a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n)
  ggml_set_f32(a, rep(1 / n, n * n))
  x <- a
  for (i in seq_len(depth)) x <- ggml_mul_mat(ctx, a, x)
  list(graph = ggml_build_forward_expand(ctx, x), out = x)
}

test_that("an interrupted compute returns at once and leaves the backend usable", {
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(64 * 1024 * 1024)
  b <- big_graph(ctx)
  inject()
  expect_error(ggml_backend_graph_compute(cpu, b$graph),
               "ggml_backend_graph_compute: interrupted; the work already queued goes on")
  expect_null(ggml_backend_synchronize(cpu))  # the work finished in the background
  expect_equal(ggml_get_f32(b$out), rep(1 / 256, 256 * 256), tolerance = 1e-6)
  expect_identical(ggml_backend_graph_compute(cpu, b$graph), 0L)
  expect_equal(ggml_get_f32(b$out), rep(1 / 256, 256 * 256), tolerance = 1e-6)
})

test_that("every waiting call stops on an interrupt", {
  cpu <- ggml_backend_cpu_init()
  ctx <- ggml_init(64 * 1024 * 1024)
  b <- big_graph(ctx)
  inject()
  expect_error(ggml_graph_compute(ctx, b$graph), "ggml_graph_compute: interrupted")
  expect_equal(ggml_get_f32(b$out)[1:3], rep(1 / 256, 3), tolerance = 1e-6)
  expect_identical(ggml_backend_graph_compute_async(cpu, b$graph), 0L)
  inject()
  expect_error(ggml_backend_synchronize(cpu), "ggml_backend_synchronize: interrupted")
  expect_null(ggml_backend_synchronize(cpu))
  plan <- ggml_backend_graph_plan_create(cpu, b$graph)
  inject()
  expect_error(ggml_backend_graph_plan_compute(cpu, plan), "plan_compute: interrupted")
  sched <- ggml_backend_sched_new(list(cpu))
  inject()
  expect_error(ggml_backend_sched_graph_compute(sched, b$graph), "sched_graph_compute: interrupted")
  expect_null(ggml_backend_sched_synchronize(sched))
  ev <- ggml_backend_event_new(ggml_backend_get_device(cpu))
  ggml_backend_event_record(ev, cpu)
  inject()
  expect_error(ggml_backend_event_synchronize(ev), "event_synchronize: interrupted")
  inject()
  expect_error(ggml_quantize_chunk(GGML_TYPE_Q8_0, sin(1:64), 2, 32),
               "ggml_quantize_chunk: interrupted")
  expect_length(ggml_quantize_chunk(GGML_TYPE_Q8_0, sin(1:64), 2, 32), 68)
  expect_identical(ggml_backend_graph_compute(cpu, b$graph), 0L)
})

test_that("after an interrupt the rest of a computation calls no R function", {
  ctx <- ggml_init(16 * 1024 * 1024)
  a <- f32_tensor(ctx, 1:4)
  calls <- c(first = 0, second = 0)
  first <- ggml_map_custom1(ctx, a, function(x) {
    calls[["first"]] <<- calls[["first"]] + 1
    inject()  # Ctrl-C while the first R function runs
    x + 1
  })
  second <- ggml_map_custom1(ctx, first, function(x) {
    calls[["second"]] <<- calls[["second"]] + 1
    x * 2
  })
  cpu <- ggml_backend_cpu_init()
  g <- ggml_build_forward_expand(ctx, second)
  expect_error(ggml_backend_graph_compute(cpu, g), "interrupted")
  # Reading waits for the rest of the work, which found no R thread to call.
  expect_true(all(is.nan(ggml_get_f32(second))))
  expect_equal(ggml_get_f32(first), 2:5)
  expect_identical(calls, c(first = 1, second = 0))
  # The next computation runs both.
  ggml_set_f32(a, 1:4)
  g2 <- ggml_build_forward_expand(ctx, ggml_map_custom1(ctx, a, function(x) x * 10))
  expect_identical(ggml_backend_graph_compute(cpu, g2), 0L)
  expect_equal(ggml_get_f32(ggml_graph_node(g2, -1)), c(10, 20, 30, 40))
})

# A real SIGINT (what Ctrl-C sends), from another process half a second later.
send_sigint_soon <- function() {
  # In parentheses: R runs the command as `command &`, and only the group goes to the
  # background.
  system(sprintf("(sleep 0.5; kill -INT %d)", Sys.getpid()), wait = FALSE)
}

test_that("a real SIGINT stops a waiting call (the wait's own look for Ctrl-C)", {
  skip_on_os("windows")
  skip_if(Sys.which("mkfifo") == "")
  fifo <- tempfile()
  system2("mkfifo", fifo)
  on.exit(unlink(fifo))
  send_sigint_soon()
  # Opening a FIFO blocks until a writer comes: the call waits until the interrupt.
  expect_error(gguf_load(fifo), "gguf_load: interrupted")
  con <- file(fifo, "wb", raw = TRUE)  # the writer: the helper thread's open returns, and it ends
  close(con)
  expect_true(file.exists(fifo))
})

test_that("an interrupt inside a custom op's R function stops the compute", {
  ctx <- ggml_init(1024 * 1024)
  a <- f32_tensor(ctx, 1:3)
  # What R signals on Ctrl-C while R code runs: an "interrupt" condition.
  out <- ggml_map_custom1(ctx, a, function(x) {
    signalCondition(structure(list(), class = c("interrupt", "condition")))
    x
  })
  expect_error(ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out)),
               "ggml_graph_compute: interrupted")
  expect_equal(run_f32(ctx, ggml_map_custom1(ctx, a, function(x) x + 1)), 2:4)
})

test_that("a real SIGINT inside a custom op's R function stops the compute", {
  skip_on_os("windows")
  ctx <- ggml_init(1024 * 1024)
  a <- f32_tensor(ctx, 1:3)
  out <- ggml_map_custom1(ctx, a, function(x) {
    Sys.sleep(10)  # interrupted after half a second
    x
  })
  send_sigint_soon()
  t0 <- Sys.time()
  expect_error(ggml_graph_compute(ctx, ggml_build_forward_expand(ctx, out)),
               "ggml_graph_compute: interrupted")
  expect_lt(as.numeric(difftime(Sys.time(), t0, units = "secs")), 5)
  expect_equal(run_f32(ctx, ggml_map_custom1(ctx, a, function(x) x + 1)), 2:4)
})
