.onLoad <- function(libname, pkgname) {
  rs_quiet_panics()
}
