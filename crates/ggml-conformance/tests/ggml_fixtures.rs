//! Our results against the real GGML's, for every case of the committed fixture.
