.onLoad <- function(libname, pkgname) {
  rs_init()
}

# Calls an R function on behalf of the library (a custom op's or a meta device's split
# function): its value, or its error's message, or a mark that it was interrupted. The library
# calls it on R's thread, so that no R error or interrupt jumps over its Rust frames.
rs_call_r <- function(fun, args) {
  tryCatch(list(value = do.call(fun, args)),
           error = function(e) list(error = conditionMessage(e)),
           interrupt = function(e) list(interrupted = TRUE))
}
