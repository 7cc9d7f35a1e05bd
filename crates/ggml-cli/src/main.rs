//! The `ggml` command-line tool.
fn main() {
    println!("ggml");
}
