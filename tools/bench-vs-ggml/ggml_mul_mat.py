#!/usr/bin/env python3
"""Times GGML's MUL_MAT on the CPU at a chosen thread count, as crates/ggml/benches/ops.rs
times ggml-rs's: the same shapes, the same fill pattern, one warm-up run, then repeated runs
for at least 0.4 s; prints the median's and the best run's rate.

    ggml_mul_mat.py --lib-dir DIR --threads 1,2 CASE...

CASE is TYPE:M:K:N (weights TYPE of M rows of K values, activations F32 of N rows), e.g.
q4_K:4096:14336:1. TYPE:M:K:N:MIB is crates/ggml/benches/cold.rs's case: as many distinct
weight matrices as make MIB MiB (the same values at their own addresses) times the same
activations, the products added, so that the weights come from DRAM; its rate is the weight
bytes per second (a `bw cold` line). The graph is computed with ggml_graph_plan / ggml_graph_compute on a
persistent ggml_threadpool of that many threads (test-backend-ops cannot choose its thread
count: it takes half the hardware threads). Weights live in a plain context buffer (no
repacking), as in test-backend-ops; with --repack, the weights of the types GGML repacks on
this CPU (ggml-cpu/repack.cpp: Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2, and Q2_K with AVX-512)
live in the CPU_REPACK buffer type instead, as llama.cpp places them by default (its
interleaved GEMM kernels), and the others stay in the plain buffer (GGML has nothing else for
them). Only the Python standard library is used; the GGML libraries come from
tools/llama_cpp/build.sh (or tools/bench-vs-ggml/build-ggml-avx2.sh). Timing only: nothing
asserted.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import statistics
import sys
import time
from pathlib import Path

TARGET_S = 0.4
MAX_THREADS = 512  # GGML_MAX_N_THREADS
TYPE_COUNT = 43  # GGML_TYPE_COUNT of this ggml (0.26.0); removed types have no name


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


class ThreadpoolParams(ctypes.Structure):
    _fields_ = [("cpumask", ctypes.c_bool * MAX_THREADS), ("n_threads", ctypes.c_int),
                ("prio", ctypes.c_int), ("poll", ctypes.c_uint32),
                ("strict_cpu", ctypes.c_bool), ("paused", ctypes.c_bool)]


class Cplan(ctypes.Structure):
    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", ctypes.c_void_p),
                ("n_threads", ctypes.c_int), ("threadpool", ctypes.c_void_p),
                ("abort_callback", ctypes.c_void_p), ("abort_callback_data", ctypes.c_void_p),
                ("use_ref", ctypes.c_bool)]


def load(lib_dir: Path):
    base = ctypes.CDLL(str(lib_dir / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(str(lib_dir / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    sig = {
        (base, "ggml_init"): (vp, [InitParams]),
        (base, "ggml_free"): (None, [vp]),
        (base, "ggml_type_name"): (ctypes.c_char_p, [ctypes.c_int]),
        (base, "ggml_new_tensor_2d"): (vp, [vp, ctypes.c_int, i64, i64]),
        (base, "ggml_get_data"): (vp, [vp]),
        (base, "ggml_nbytes"): (ctypes.c_size_t, [vp]),
        (base, "ggml_quantize_chunk"): (ctypes.c_size_t, [ctypes.c_int, vp, vp, i64, i64, i64, vp]),
        (base, "ggml_quantize_requires_imatrix"): (ctypes.c_bool, [ctypes.c_int]),
        (base, "ggml_fp32_to_fp16_row"): (None, [vp, vp, i64]),
        (base, "ggml_mul_mat"): (vp, [vp, vp, vp]),
        (base, "ggml_add"): (vp, [vp, vp, vp]),
        (base, "ggml_row_size"): (ctypes.c_size_t, [ctypes.c_int, i64]),
        (base, "ggml_new_graph"): (vp, [vp]),
        (base, "ggml_build_forward_expand"): (None, [vp, vp]),
        (base, "ggml_threadpool_params_default"): (ThreadpoolParams, [ctypes.c_int]),
        (cpu, "ggml_cpu_init"): (None, []),
        (cpu, "ggml_threadpool_new"): (vp, [ctypes.POINTER(ThreadpoolParams)]),
        (cpu, "ggml_threadpool_free"): (None, [vp]),
        (cpu, "ggml_graph_plan"): (Cplan, [vp, ctypes.c_int, vp]),
        (cpu, "ggml_graph_compute"): (ctypes.c_int, [vp, ctypes.POINTER(Cplan)]),
        (cpu, "ggml_cpu_has_avx512"): (ctypes.c_int, []),
        (cpu, "ggml_backend_cpu_reg"): (vp, []),
        (base, "ggml_backend_reg_dev_get"): (vp, [vp, ctypes.c_size_t]),
        (base, "ggml_backend_reg_get_proc_address"): (vp, [vp, ctypes.c_char_p]),
        (base, "ggml_backend_buft_name"): (ctypes.c_char_p, [vp]),
        (base, "ggml_backend_alloc_ctx_tensors_from_buft"): (vp, [vp, vp]),
        (base, "ggml_backend_tensor_set"): (None, [vp, vp, ctypes.c_size_t, ctypes.c_size_t]),
        (base, "ggml_tensor_overhead"): (ctypes.c_size_t, []),
    }
    fns = {}
    for (lib, name), (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
        fns[name] = f
    fns["ggml_cpu_init"]()
    return fns


def pattern(n: int) -> array.array:
    """ops.rs's fill: value i is (i·7919 mod 2003)/1001.5 − 1 (period 2003)."""
    period = array.array("f", [((i * 7919 % 2003) / 1001.5) - 1.0 for i in range(2003)])
    return (period * (n // 2003 + 1))[:n]


def quantize(g, type_id: int, src: int, dst: int, n_rows: int, n_per_row: int) -> None:
    """`n_rows` rows at address `src` quantized to `type_id` at `dst`, with an importance
    matrix of ones for the types GGML cannot quantize without one (as ops.rs does)."""
    ones = (ctypes.c_float * n_per_row)(*([1.0] * n_per_row))
    imatrix = ctypes.addressof(ones) if g["ggml_quantize_requires_imatrix"](type_id) else None
    g["ggml_quantize_chunk"](type_id, src, dst, 0, n_rows, n_per_row, imatrix)


def fill(g, t, type_id: int, n_per_row: int, n: int) -> None:
    src = pattern(n)
    addr, _ = src.buffer_info()
    dst = g["ggml_get_data"](t)
    name = g["ggml_type_name"](type_id).decode()
    if name == "f32":
        ctypes.memmove(dst, addr, 4 * n)
    elif name == "f16":
        g["ggml_fp32_to_fp16_row"](addr, dst, n)
    else:
        quantize(g, type_id, addr, dst, n // n_per_row, n_per_row)


def repack_buft(g):
    """The CPU backend's CPU_REPACK buffer type (among its extra buffer types)."""
    reg = g["ggml_backend_cpu_reg"]()
    dev = g["ggml_backend_reg_dev_get"](reg, 0)
    addr = g["ggml_backend_reg_get_proc_address"](reg, b"ggml_backend_dev_get_extra_bufts")
    extra = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(addr)(dev)
    i = 0
    while extra[i]:
        if g["ggml_backend_buft_name"](extra[i]) == b"CPU_REPACK":
            return extra[i]
        i += 1
    raise RuntimeError("this GGML has no CPU_REPACK buffer type")


def repacked_weights(g, buft, keep: list, type_id: int, k: int, m: int):
    """A [k, m] weight tensor of `type_id` in the CPU_REPACK buffer `buft`, filled as `fill`
    fills one (set through the buffer, which interleaves the rows); its context and buffer
    are appended to `keep` (they must outlive the graph)."""
    ctx = g["ggml_init"](InitParams(4 * g["ggml_tensor_overhead"](), None, True))
    a = g["ggml_new_tensor_2d"](ctx, type_id, k, m)
    buf = g["ggml_backend_alloc_ctx_tensors_from_buft"](ctx, buft)
    n = g["ggml_nbytes"](a)
    host = ctypes.create_string_buffer(n)
    src = pattern(m * k)
    quantize(g, type_id, src.buffer_info()[0], ctypes.addressof(host), m, k)
    g["ggml_backend_tensor_set"](a, host, 0, n)
    keep.extend([ctx, buf])
    return a


def time_graph(g, graph, nt: int, pool, case: str) -> tuple[float, float]:
    """Seconds per run of `graph` on `nt` threads of `pool`: (median, best) of repeated runs
    (enough to fill TARGET_S, 3 to 1000 of them) after one warm-up, as benches/common does."""
    plan = g["ggml_graph_plan"](graph, nt, pool)
    work = ctypes.create_string_buffer(max(plan.work_size, 1))
    plan.work_data = ctypes.cast(work, ctypes.c_void_p)

    def run() -> float:
        t0 = time.perf_counter()
        status = g["ggml_graph_compute"](graph, ctypes.byref(plan))
        if status != 0:
            raise RuntimeError(f"ggml_graph_compute returned {status} on {case}")
        return time.perf_counter() - t0

    run()
    once = max(run(), 1e-7)
    reps = min(max(int(TARGET_S / once), 3), 1000)
    times = sorted(run() for _ in range(reps))
    return statistics.median_low(times), times[0]


def time_cases(g, threads: list[int], cases, unit: str) -> None:
    """Times each case of `cases`, (label, work, mem, build), at every count in `threads`, on a
    persistent ggml_threadpool of that many threads: `build(ctx)` makes the case's result
    tensor in a fresh context of `mem` bytes. Prints the label, the thread count, the median
    run's milliseconds, and `work` per second (in units of 1e9 `unit`) of the median and of
    the best run, in the columns of crates/ggml/benches/ops.rs."""
    pools = {}
    for n in threads:
        p = g["ggml_threadpool_params_default"](n)
        pools[n] = g["ggml_threadpool_new"](ctypes.byref(p))
    try:
        for label, work, mem, build in cases:
            ctx = g["ggml_init"](InitParams(mem, None, False))
            out = build(ctx)
            graph = g["ggml_new_graph"](ctx)
            g["ggml_build_forward_expand"](graph, out)
            for nt in threads:
                med, best = time_graph(g, graph, nt, pools[nt], label)
                print(f"{label:<44} {nt:>8} {med * 1e3:>9.3f} ms {work / med / 1e9:>8.2f} {unit} "
                      f"{work / best / 1e9:>8.2f} {unit}", flush=True)
            g["ggml_free"](ctx)
    finally:
        for p in pools.values():
            g["ggml_threadpool_free"](p)


def cold_case(g, types: dict, tname: str, m: int, k: int, n: int, total: int):
    """The (label, work, mem, build) of a TYPE:M:K:N:MIB case (see the module doc), `total`
    the bytes of weights it asks for: the weights are filled once and copied to the other
    matrices, and the products are added."""
    ty, f32 = types[tname], types["f32"]
    weight_bytes = g["ggml_row_size"](ty, k) * m
    copies = -(-total // weight_bytes)

    def build(ctx):
        b = g["ggml_new_tensor_2d"](ctx, f32, k, n)
        fill(g, b, f32, k, n * k)
        first, out = None, None
        for _ in range(copies):
            a = g["ggml_new_tensor_2d"](ctx, ty, k, m)
            if first is None:
                fill(g, a, ty, k, m * k)
                first = a
            else:
                ctypes.memmove(g["ggml_get_data"](a), g["ggml_get_data"](first), weight_bytes)
            y = g["ggml_mul_mat"](ctx, a, b)
            out = y if out is None else g["ggml_add"](ctx, out, y)
        return out

    mem = weight_bytes * copies + (k * n + 2 * copies * m * n) * 4 + (64 << 20)
    label = f"GGML bw cold {tname} matvec x{copies} [{k}, {m}]"
    return label, float(weight_bytes * copies), mem, build


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", type=Path, required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repack", action="store_true",
                    help="weights of the types GGML repacks in its CPU_REPACK buffer type")
    ap.add_argument("cases", nargs="+")
    args = ap.parse_args()
    g = load(args.lib_dir)
    repacked = {"q4_0", "q4_K", "iq4_nl", "mxfp4"} | ({"q2_K"} if g["ggml_cpu_has_avx512"]() else set())
    buft = repack_buft(g) if args.repack else None
    keep: list = []  # the repacked weights' contexts and buffers (never freed: one process)
    names = ((i, g["ggml_type_name"](i)) for i in range(TYPE_COUNT))
    types = {nm.decode(): i for i, nm in names if nm}
    cases = []
    cold = []
    for case in args.cases:
        tname, m, k, n, *mib = case.split(":")
        m, k, n = int(m), int(k), int(n)
        if tname not in types:
            print(f"ggml_mul_mat.py: unknown type {tname!r}", file=sys.stderr)
            return 2
        if mib:
            cold.append(cold_case(g, types, tname, m, k, n, int(mib[0]) << 20))
            continue

        repack = args.repack and tname in repacked

        def build(ctx, ty=types[tname], m=m, k=k, n=n, repack=repack):
            if repack:
                a = repacked_weights(g, buft, keep, ty, k, m)
            else:
                a = g["ggml_new_tensor_2d"](ctx, ty, k, m)
                fill(g, a, ty, k, m * k)
            b = g["ggml_new_tensor_2d"](ctx, types["f32"], k, n)
            fill(g, b, types["f32"], k, n * k)
            return g["ggml_mul_mat"](ctx, a, b)

        mem = m * k * 4 + (k * n + m * n) * 4 + (16 << 20)
        label = f"GGML{' repack' if repack else ''} mul_mat {tname} weights  M={m} K={k} N={n}"
        cases.append((label, 2.0 * m * k * n, mem,
                      build))
    threads = [int(t) for t in args.threads.split(",")]
    time_cases(g, threads, cases, "GFLOP/s")
    time_cases(g, threads, cold, "GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
