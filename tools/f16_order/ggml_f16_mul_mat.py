#!/usr/bin/env python3
"""Writes GGML's MUL_MAT results for F16 weights (F32 activations), for the test
crates/ggml/tests/ggml_f16_order.rs, which holds ggml-rs's results to them bit for bit.

    ggml_f16_mul_mat.py --lib-dir DIR --out DIR

DIR of --lib-dir: GGML's libraries (tools/llama_cpp/build.sh builds them; -march=native).
Each case file holds m, k, n (three little-endian i64), the weights (m rows of k F16), the
activations (n rows of k F32) and GGML's result (n rows of m F32), computed on 1 and 2
threads (which must agree). The cases cover both of GGML's kernels for F16 weights: one
column (ggml_vec_dot_f16) and 2+ columns with a multiple of 4 rows (tinyBLAS), with every
kind of tail of k, and 2+ columns with other row counts (ggml_vec_dot_f16 again). Only the
Python standard library is used.
"""

from __future__ import annotations

import argparse
import ctypes
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench-vs-ggml"))
import ggml_mul_mat as gm  # noqa: E402

F32, F16 = 0, 1
# (m, k, n)
CASES = [(64, 100, 1), (8, 1000, 1), (6, 70, 1), (64, 3584, 1), (32, 77, 2), (16, 64, 3),
         (12, 33, 7), (48, 256, 32), (10, 40, 5), (256, 512, 13)]


def compute(g, ctx, graph, c, nt: int, size: int) -> bytes:
    p = g["ggml_threadpool_params_default"](nt)
    pool = g["ggml_threadpool_new"](ctypes.byref(p))
    try:
        plan = g["ggml_graph_plan"](graph, nt, pool)
        work = ctypes.create_string_buffer(max(plan.work_size, 1))
        plan.work_data = ctypes.cast(work, ctypes.c_void_p)
        if g["ggml_graph_compute"](graph, ctypes.byref(plan)) != 0:
            raise RuntimeError("ggml_graph_compute failed")
        return ctypes.string_at(g["ggml_get_data"](c), size)
    finally:
        g["ggml_threadpool_free"](pool)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    g = gm.load(args.lib_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    for i, (m, k, n) in enumerate(CASES):
        ctx = g["ggml_init"](gm.InitParams(64 << 20, None, False))
        a = g["ggml_new_tensor_2d"](ctx, F16, k, m)
        b = g["ggml_new_tensor_2d"](ctx, F32, k, n)
        av = (ctypes.c_float * (m * k))(*[rng.uniform(-2, 2) for _ in range(m * k)])
        g["ggml_fp32_to_fp16_row"](ctypes.addressof(av), g["ggml_get_data"](a), m * k)
        bv = (ctypes.c_float * (n * k))(*[rng.uniform(-1, 1) for _ in range(n * k)])
        ctypes.memmove(g["ggml_get_data"](b), bv, 4 * n * k)
        c = g["ggml_mul_mat"](ctx, a, b)
        graph = g["ggml_new_graph"](ctx)
        g["ggml_build_forward_expand"](graph, c)
        one, two = (compute(g, ctx, graph, c, nt, 4 * m * n) for nt in (1, 2))
        if one != two:
            raise RuntimeError(f"case {i}: GGML's 1- and 2-thread results differ")
        with open(args.out / f"case{i}.bin", "wb") as f:
            f.write(struct.pack("<3q", m, k, n))
            f.write(ctypes.string_at(g["ggml_get_data"](a), 2 * m * k))
            f.write(ctypes.string_at(g["ggml_get_data"](b), 4 * n * k))
            f.write(one)
        g["ggml_free"](ctx)
    print(f"wrote {len(CASES)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
