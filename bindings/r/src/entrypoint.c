/* R looks for R_init_ggmlrs when it loads the package; the Rust crate registers the .Call
 * entry points (the extendr convention: this is the package's only C, no logic). */
void R_init_ggmlrs_extendr(void *dll);

void R_init_ggmlrs(void *dll) {
    R_init_ggmlrs_extendr(dll);
}
