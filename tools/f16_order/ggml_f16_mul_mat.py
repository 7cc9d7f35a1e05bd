#!/usr/bin/env python3
"""Writes GGML's MUL_MAT results for F16 or BF16 weights, for the test
crates/ggml/tests/ggml_f16_order.rs, which holds ggml-rs's results to them bit for bit.

    ggml_f16_mul_mat.py --lib-dir DIR --out DIR [--type f16|bf16]

DIR of --lib-dir: GGML's libraries (tools/llama_cpp/build.sh builds them; -march=native).
Each case file holds m, k, n and the activations' type (four little-endian i64: GGML's type
number, 0 for F32), the weights (m rows of k F16 or BF16), the activations (n rows of k, F32
or the weights' type) and GGML's result (n rows of m F32), computed on 1 and 2 threads
(which must agree). The cases cover both of GGML's kernels for the weights: one column
(ggml_vec_dot_f16 or ggml_vec_dot_bf16) and 2+ columns with a multiple of 4 rows
(tinyBLAS), with every kind of tail of k, and 2+ columns with other row counts (the dot
product again). With --type bf16 there are also cases of BF16 activations (which tinyBLAS
takes as they are) and of values small enough for vdpbf16ps to flush subnormal products
(on an AVX-512 BF16 build; an AVX2 build computes them with f32 multiply-adds: the
results then hold GGML's AVX2 bits, which ggml-rs's AVX2 path follows).
F16 activations are not covered (GGML's CPU takes them only for F16 weights, where the
tinyBLAS call on F16 activations is the same as on F32 ones rounded). Only the Python
standard library is used.
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

F32, F16, BF16 = 0, 1, 30
# (m, k, n)
CASES = [(64, 100, 1), (8, 1000, 1), (6, 70, 1), (64, 3584, 1), (32, 77, 2), (16, 64, 3),
         (12, 33, 7), (48, 256, 32), (10, 40, 5), (256, 512, 13)]
# BF16 weights only: (m, k, n, activations' type, scale of the values): BF16 activations,
# and values of about 2^-64 whose products are subnormal in f32 (flushed by vdpbf16ps)
BF16_CASES = [(64, 100, 1, BF16, 1.0), (32, 77, 2, BF16, 1.0), (48, 256, 32, BF16, 1.0),
              (12, 33, 7, BF16, 1.0), (64, 300, 1, F32, 2.0 ** -63),
              (32, 300, 6, F32, 2.0 ** -63)]


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


def put(g, ty: int, values, t, rows: int, k: int) -> None:
    """`values` (rows × k f32) into tensor `t` of type `ty` (F32, F16 or BF16), rounded as
    GGML rounds (ggml_fp32_to_fp16_row; ggml_quantize_chunk's BF16 row conversion)."""
    dst = g["ggml_get_data"](t)
    if ty == F32:
        ctypes.memmove(dst, values, 4 * rows * k)
    elif ty == F16:
        g["ggml_fp32_to_fp16_row"](ctypes.addressof(values), dst, rows * k)
    else:
        g["ggml_quantize_chunk"](ty, ctypes.addressof(values), dst, 0, rows, k, None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--type", choices=("f16", "bf16"), default="f16",
                    help="the weights' type (default f16)")
    args = ap.parse_args()
    wty = F16 if args.type == "f16" else BF16
    cases = [(m, k, n, F32, 1.0) for m, k, n in CASES]
    if wty == BF16:
        cases += BF16_CASES
    g = gm.load(args.lib_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    for i, (m, k, n, bty, scale) in enumerate(cases):
        ctx = g["ggml_init"](gm.InitParams(64 << 20, None, False))
        a = g["ggml_new_tensor_2d"](ctx, wty, k, m)
        b = g["ggml_new_tensor_2d"](ctx, bty, k, n)
        av = (ctypes.c_float * (m * k))(*[rng.uniform(-2, 2) * scale for _ in range(m * k)])
        put(g, wty, av, a, m, k)
        bv = (ctypes.c_float * (n * k))(*[rng.uniform(-1, 1) * scale for _ in range(n * k)])
        put(g, bty, bv, b, n, k)
        b_size = (4 if bty == F32 else 2) * n * k
        c = g["ggml_mul_mat"](ctx, a, b)
        graph = g["ggml_new_graph"](ctx)
        g["ggml_build_forward_expand"](graph, c)
        one, two = (compute(g, ctx, graph, c, nt, 4 * m * n) for nt in (1, 2))
        if one != two:
            raise RuntimeError(f"case {i}: GGML's 1- and 2-thread results differ")
        with open(args.out / f"case{i}.bin", "wb") as f:
            f.write(struct.pack("<4q", m, k, n, bty))
            f.write(ctypes.string_at(g["ggml_get_data"](a), 2 * m * k))
            f.write(ctypes.string_at(g["ggml_get_data"](b), b_size))
            f.write(one)
        g["ggml_free"](ctx)
    print(f"wrote {len(cases)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
