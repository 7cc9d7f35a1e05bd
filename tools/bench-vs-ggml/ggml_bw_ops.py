#!/usr/bin/env python3
"""Times GGML's bandwidth-bound CPU ops at chosen thread counts, as the `bw` lines of
crates/ggml/benches/ops.rs time ggml-rs's: the same ops, shapes, fill pattern, byte counts and
timing (ggml_mul_mat.py's `time_cases`); prints the median's and the best run's GB/s.

    ggml_bw_ops.py --lib-dir DIR --threads 1,2 [FILTER...]

A case runs when its name contains any FILTER (all run without one). Timing only: nothing
asserted. Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import sys
from pathlib import Path

import ggml_mul_mat as mm

NE0, NE1 = 4096, 512
N = NE0 * NE1
F32, F16, I32 = 0, 1, 26  # GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32
GELU, SILU = 8, 10  # GGML_UNARY_OP_GELU, GGML_UNARY_OP_SILU
ROPE_NEOX = 2


def bind(lib_dir: Path):
    """mm.load's functions plus the op builders the cases use."""
    g = mm.load(lib_dir)
    base = ctypes.CDLL(str(lib_dir / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    vp, i64, c_int, c_float = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    sig = {
        "ggml_new_tensor_1d": (vp, [vp, c_int, i64]),
        "ggml_new_tensor_3d": (vp, [vp, c_int, i64, i64, i64]),
        "ggml_add": (vp, [vp, vp, vp]),
        "ggml_mul": (vp, [vp, vp, vp]),
        "ggml_scale": (vp, [vp, vp, c_float]),
        "ggml_unary": (vp, [vp, vp, c_int]),
        "ggml_geglu": (vp, [vp, vp]),
        "ggml_swiglu": (vp, [vp, vp]),
        "ggml_soft_max_ext": (vp, [vp, vp, vp, c_float, c_float]),
        "ggml_rms_norm": (vp, [vp, vp, c_float]),
        "ggml_norm": (vp, [vp, vp, c_float]),
        "ggml_rope_ext": (vp, [vp, vp, vp, vp, c_int, c_int, c_int] + [c_float] * 6),
        "ggml_get_rows": (vp, [vp, vp, vp]),
        "ggml_cpy": (vp, [vp, vp, vp]),
    }
    for name, (res, args) in sig.items():
        f = getattr(base, name)
        f.restype, f.argtypes = res, args
        g[name] = f
    return g


def cases(g):
    """(name, bytes, build(ctx) -> result tensor) for every case, as ops.rs's `bw_lines`."""

    def t2(ctx, ty, ne0, ne1):
        t = g["ggml_new_tensor_2d"](ctx, ty, ne0, ne1)
        mm.fill(g, t, ty, ne0, ne0 * ne1)
        return t

    def ints(ctx, values):
        t = g["ggml_new_tensor_1d"](ctx, I32, len(values))
        src = array.array("i", values)
        ctypes.memmove(g["ggml_get_data"](t), src.buffer_info()[0], 4 * len(values))
        return t

    def f32x(c):
        return t2(c, F32, NE0, NE1)

    def rope(mode):
        def build(c):
            a = g["ggml_new_tensor_3d"](c, F32, 128, 32, 512)
            mm.fill(g, a, F32, 128, N)
            pos = ints(c, list(range(512)))
            return g["ggml_rope_ext"](c, a, pos, None, 128, mode, 4096,
                                      10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
        return build

    def cpy(src, dst):
        return lambda c: g["ggml_cpy"](c, t2(c, src, NE0, NE1),
                                       g["ggml_new_tensor_2d"](c, dst, NE0, NE1))

    v = []
    for op in ("add", "mul"):
        f = g[f"ggml_{op}"]
        v.append((f"{op} [4096, 512]", 12 * N, lambda c, f=f: f(c, f32x(c), f32x(c))))
        v.append((f"{op} [4096, 512] + row", 8 * N + 4 * NE0,
                  lambda c, f=f: f(c, f32x(c), t2(c, F32, NE0, 1))))
    v += [
        ("scale [4096, 512]", 8 * N, lambda c: g["ggml_scale"](c, f32x(c), 0.125)),
        ("silu [4096, 512]", 8 * N, lambda c: g["ggml_unary"](c, f32x(c), SILU)),
        ("gelu [4096, 512]", 8 * N, lambda c: g["ggml_unary"](c, f32x(c), GELU)),
        ("geglu [8192, 512]", 12 * N, lambda c: g["ggml_geglu"](c, t2(c, F32, 2 * NE0, NE1))),
        ("swiglu [8192, 512]", 12 * N,
         lambda c: g["ggml_swiglu"](c, t2(c, F32, 2 * NE0, NE1))),
        ("soft_max [4096, 512] F16 mask", 10 * N,
         lambda c: g["ggml_soft_max_ext"](c, f32x(c), t2(c, F16, NE0, NE1), 0.125, 0.0)),
        ("rms_norm [4096, 512]", 8 * N, lambda c: g["ggml_rms_norm"](c, f32x(c), 1e-6)),
        ("norm [4096, 512]", 8 * N, lambda c: g["ggml_norm"](c, f32x(c), 1e-6)),
        ("rope normal [128, 32, 512]", 8 * N + 4 * 512, rope(0)),
        ("rope neox [128, 32, 512]", 8 * N + 4 * 512, rope(ROPE_NEOX)),
        ("get_rows [4096, 1024] x 512", 8 * N + 4 * 512,
         lambda c: g["ggml_get_rows"](c, t2(c, F32, NE0, 2 * NE1),
                                      ints(c, [(i * 7) % 1024 for i in range(NE1)]))),
        ("cpy F32 -> F16 [4096, 512]", 6 * N, cpy(F32, F16)),
        ("cpy F16 -> F32 [4096, 512]", 6 * N, cpy(F16, F32)),
    ]
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", type=Path, required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("filters", nargs="*")
    args = ap.parse_args()
    g = bind(args.lib_dir)
    chosen = [(f"GGML bw {name}", nbytes, 4 * nbytes + (64 << 20), build)
              for name, nbytes, build in cases(g)
              if not args.filters or any(f in name for f in args.filters)]
    mm.time_cases(g, [int(t) for t in args.threads.split(",")], chosen, "GB/s")
    return 0

if __name__ == "__main__":
    sys.exit(main())
