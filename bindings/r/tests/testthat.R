library(testthat)
library(ggmlrs)

test_check("ggmlrs")
