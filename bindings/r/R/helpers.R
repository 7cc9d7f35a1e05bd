# ggmlR's helpers written in R over the package's functions.

#' A context sized for the tensors named
#'
#' `ggml_init_auto` makes a context big enough for one tensor of `type` per shape given in
#' `...` (each a vector of 1 to 4 sizes), plus `extra_mb` megabytes.
#' @param ... Shapes, one vector of sizes per tensor.
#' @param extra_mb Megabytes to add.
#' @param type A `GGML_TYPE_*` constant.
#' @param no_alloc Create tensors without data.
#' @return A context.
#' @examples
#' ctx <- ggml_init_auto(a = c(100, 10), b = 50, extra_mb = 1)
#' ggml_get_mem_size(ctx)
#' @export
ggml_init_auto <- function(..., extra_mb = 10, type = GGML_TYPE_F32, no_alloc = FALSE) {
  shapes <- list(...)
  bytes <- 0
  for (i in seq_along(shapes)) {
    ne <- shapes[[i]]
    if (!is.numeric(ne) || length(ne) < 1 || length(ne) > 4) {
      stop(sprintf("argument `...`: element %d is not a vector of 1 to 4 sizes", i), call. = FALSE)
    }
    ne <- c(ne, rep(1, 4 - length(ne)))
    bytes <- bytes + ggml_estimate_memory(type, ne[1], ne[2], ne[3], ne[4])
  }
  if (!is.numeric(extra_mb) || length(extra_mb) != 1 || is.na(extra_mb) || extra_mb < 0) {
    stop("argument `extra_mb`: expected one non-negative number", call. = FALSE)
  }
  ggml_init(ceiling(bytes + extra_mb * 1024 * 1024), no_alloc)
}

#' Evaluate an expression with a temporary context
#'
#' `ggml_with_temp_ctx` makes a context of `mem_size` bytes, evaluates `expr` with it bound to
#' `ctx`, frees the context (even on error) and returns the value of `expr`.
#' @param mem_size Bytes of the context.
#' @param expr An expression using `ctx`.
#' @return The value of `expr`.
#' @examples
#' ggml_with_temp_ctx(1024 * 1024, {
#'   t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
#'   ggml_set_f32(t, c(1, 2, 3))
#'   sum(ggml_get_f32(t))
#' })
#' @export
ggml_with_temp_ctx <- function(mem_size, expr) {
  ctx <- ggml_init(mem_size)
  on.exit(ggml_free(ctx), add = TRUE)
  eval(substitute(expr), envir = list(ctx = ctx), enclos = parent.frame())
}

#' Print a context's memory and tensors
#'
#' `ggml_print_mem_status` prints the context's budget, used and free bytes and returns them
#' invisibly as `list(total, used, free)`; `ggml_print_objects` prints each tensor's name, type
#' and shape and returns the number of tensors invisibly.
#' @param ctx A context.
#' @return See the description.
#' @examples
#' ctx <- ggml_init(1024 * 1024)
#' t <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2), "x")
#' ggml_print_mem_status(ctx)
#' ggml_print_objects(ctx)
#' @export
ggml_print_mem_status <- function(ctx) {
  total <- ggml_get_mem_size(ctx)
  used <- ggml_used_mem(ctx)
  free <- total - used
  mb <- 1024 * 1024
  cat("GGML context memory:\n")
  cat(sprintf("  total %10.2f MB\n  used  %10.2f MB (%.1f%%)\n  free  %10.2f MB\n",
              total / mb, used / mb, if (total > 0) 100 * used / total else 0, free / mb))
  invisible(list(total = total, used = used, free = free))
}

#' @rdname ggml_print_mem_status
#' @export
ggml_print_objects <- function(ctx) {
  n <- 0L
  t <- ggml_get_first_tensor(ctx)
  while (!is.null(t)) {
    n <- n + 1L
    cat(sprintf("  %3d: %-24s %-6s [%s]\n", n, ggml_get_name(t), ggml_type_name(ggml_tensor_type(t)),
                paste(ggml_tensor_shape(t)[seq_len(max(1L, ggml_n_dims(t)))], collapse = ", ")))
    t <- ggml_get_next_tensor(ctx, t)
  }
  invisible(n)
}
