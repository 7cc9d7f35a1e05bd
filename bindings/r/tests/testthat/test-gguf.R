# A GGUF v3 file with two keys and two tensors, written byte by byte.
write_gguf <- function(path) {
  con <- file(path, "wb")
  on.exit(close(con))
  u32 <- function(v) writeBin(as.integer(v), con, size = 4)
  u64 <- function(v) writeBin(c(as.integer(v), 0L), con, size = 4)
  str <- function(s) { u64(nchar(s)); writeBin(charToRaw(s), con) }
  writeBin(charToRaw("GGUF"), con); u32(3); u64(2); u64(3)
  str("general.name"); u32(8); str("toy")
  str("toy.size"); u32(4); u32(42)
  str("toy.list"); u32(9); u32(5); u64(3); u32(c(1, -2, 3))
  str("w"); u32(2); u64(2); u64(3); u32(0); u64(0)      # F32 [2, 3] at 0
  str("h"); u32(1); u64(4); u32(1); u64(32)             # F16 [4] at 32
  pad <- (32 - seek(con) %% 32) %% 32
  writeBin(as.raw(rep(0, pad)), con)
  writeBin(c(1, 2, 3, 4, 5, 6), con, size = 4)
  writeBin(as.raw(rep(0, 8)), con)                      # to offset 32
  writeBin(as.raw(c(0x00, 0x3c, 0x00, 0x40, 0x00, 0xbc, 0x00, 0x38)), con)  # 1, 2, -1, 0.5
}

test_that("gguf_load reads the header, metadata and tensors", {
  path <- tempfile(fileext = ".gguf")
  write_gguf(path)
  g <- gguf_load(path)
  expect_s3_class(g, "gguf")
  expect_identical(g$path, normalizePath(path))
  expect_equal(g$version, 3)
  expect_equal(g$n_tensors, 2)
  expect_equal(g$n_kv, 3)
  expect_false(g$meta_only)
  md <- gguf_metadata(g)
  expect_identical(md$general.name, "toy")
  expect_equal(md$toy.size, 42)
  expect_equal(md$toy.list, c(1, -2, 3))
  expect_identical(gguf_tensor_names(g), c("w", "h"))
  info <- gguf_tensor_info(g, "w")
  expect_identical(info$name, "w")
  expect_equal(info$shape, c(2, 3))
  expect_identical(info$type, "f32")
  expect_equal(info$size_bytes, 24)
  w <- gguf_tensor_data(g, "w")
  expect_equal(dim(w), c(2L, 3L))
  expect_equal(as.double(w), c(1, 2, 3, 4, 5, 6))
  expect_equal(as.double(gguf_tensor_data(g, "h")), c(1, 2, -1, 0.5))
  expect_error(gguf_tensor_info(g, "nope"), "gguf_tensor_info")
  expect_null(gguf_free(g))
  expect_null(gguf_free(g))
  expect_error(gguf_metadata(g), "argument `x`: the gguf file was freed")
  m <- gguf_load(path, meta_only = TRUE)
  expect_true(m$meta_only)
  expect_identical(gguf_tensor_names(m), c("w", "h"))
  expect_error(gguf_tensor_data(m, "w"), "meta_only = TRUE")
})

test_that("bad files and arguments are R errors", {
  bad <- tempfile(fileext = ".gguf")
  writeBin(c(charToRaw("GGUF"), as.raw(c(3, 0))), bad)
  expect_error(gguf_load(bad), "gguf_load")
  expect_error(gguf_load(file.path(tempdir(), "missing.gguf")), "gguf_load")
  expect_error(gguf_load(1), "argument `path`")
  expect_error(gguf_metadata(list(ptr = 1)), "argument `x`: expected a gguf object")
  expect_error(gguf_tensor_names("x"), "argument `x`")
})
