#!/usr/bin/env python3
"""Time GGML's own quantizers and dequantizers, for comparison with our Rust ones.

    pip install libggml-python==0.20.2.post1 numpy==2.4.6
    python3 tools/quant_fixtures/bench_ggml.py [TYPE ...]

Same matrix, data and table as `cargo bench -p ggml --bench quants` (64 rows x 16384 values,
MB/s of f32 data, best of runs repeated for at least 0.3 s): quantize = ggml_quantize_chunk
without an imatrix, q+imatrix = with one, dequantize = the type traits' to_float.
"""

import os
import sys
import time

import numpy as np

from gen import Ggml, ptr

N_ROWS = 64
N_PER_ROW = 16384
BUDGET = 0.3


def data(n, seed):
    """The Rust bench's generator: xorshift64, sum of four uniforms, centred, times 1.7 (cached
    in /tmp, since generating it in Python takes seconds)."""
    cache = f"/tmp/ggml_bench_data_{n}_{seed}.npy"
    if os.path.exists(cache):
        return np.load(cache)
    x = _generate(n, seed)
    np.save(cache, x)
    return x


def _generate(n, seed):
    s = seed | 1
    mask = (1 << 64) - 1
    u = np.empty(4 * n, dtype=np.uint64)
    for i in range(4 * n):
        s ^= (s << 13) & mask
        s ^= s >> 7
        s ^= (s << 17) & mask
        u[i] = s >> 11
    uniform = u.astype(np.float32) / np.float32(2.0**53)
    x = uniform.reshape(n, 4)
    total = ((x[:, 0] + x[:, 1]) + x[:, 2]) + x[:, 3]
    return ((total - np.float32(2.0)) * np.float32(1.7)).astype(np.float32)


def best_time(f):
    start = time.perf_counter()
    best = None
    while best is None or time.perf_counter() - start < BUDGET:
        t = time.perf_counter()
        f()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def main():
    wanted = [a.lower() for a in sys.argv[1:]]
    g = Ggml()
    n = N_ROWS * N_PER_ROW
    src = data(n, 0x5EED)
    imatrix = (data(N_PER_ROW, 7) ** 2 + np.float32(0.1)).astype(np.float32)
    mbs = lambda t: n * 4 / t / 1e6
    print(f"{N_ROWS} rows x {N_PER_ROW} values; MB/s of f32 data (best of repeated runs), GGML")
    print(f"{'type':8} {'quantize':>12} {'q+imatrix':>12} {'dequantize':>12}")
    for type_id in range(43):
        t = g.traits(type_id)
        if t.blck_size == 0:
            continue
        name = t.type_name.decode()
        if wanted and name.lower() not in wanted:
            continue
        if not g.has_chunk(type_id, name) or not t.to_float or name == "f32":
            continue
        q = np.zeros(t.type_size * n // t.blck_size, dtype=np.uint8)

        def quantize(w):
            g.lib.ggml_quantize_chunk(type_id, ptr(src), ptr(q), 0, N_ROWS, N_PER_ROW, w)

        # Build the grid i-quants' lookup tables before timing (ggml_quantize_chunk would do it
        # inside the first timed run).
        g.lib.ggml_quantize_init(type_id)
        plain = "-"
        if not g.lib.ggml_quantize_requires_imatrix(type_id):
            plain = f"{mbs(best_time(lambda: quantize(None))):.1f}"
        imat = mbs(best_time(lambda: quantize(ptr(imatrix))))
        y = np.zeros(n, dtype=np.float32)
        to_float = g.to_float(type_id, name)
        deq = mbs(best_time(lambda: to_float(ptr(q), ptr(y), n)))
        print(f"{name:8} {plain:>12} {imat:>12.1f} {deq:>12.1f}")


if __name__ == "__main__":
    main()
