#!/usr/bin/env python3
"""Fixtures for the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), made by
the real GGML, in the quant fixture format (see crates/ggml/tests/quants_iq.rs):

    b"GQFX" u32 version=1, u32 ggml type id, u32 n_cases; per case: u32 name_len, name,
    u32 n_rows, u32 n_per_row, u8 kind (0 no imatrix, 1 imatrix, 2 quantize_row_<t>_ref,
    3 dequantize only), [f32 imatrix[n_per_row] if kind 1], f32 input rows, quantized bytes,
    f32 GGML dequantization (type traits' to_float). All little-endian.

Regenerate everything (deterministic, fixed seeds):

    python3 -m venv /tmp/gqfx && /tmp/gqfx/bin/pip install libggml-python==0.20.2.post1 numpy==2.4.6
    /tmp/gqfx/bin/python tools/quant_fixtures/gen_iq.py crates/ggml/tests/fixtures/quants

Besides quantizer cases, each type gets a "grid-sweep" case: valid blocks (random scales and
signs) whose grid indices cover every point of the type's grid once, so that dequantization
checks the whole lookup table.
"""
import ctypes
import os
import struct
import sys

import libggml  # libggml-python==0.20.2.post1
import numpy as np  # numpy==2.4.6

LIB = ctypes.CDLL(os.path.join(os.path.dirname(libggml.__file__), "lib64", "libggml-base.so"))
LIB.ggml_quantize_chunk.restype = ctypes.c_size_t
LIB.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
LIB.ggml_quantize_init.argtypes = [ctypes.c_int]
LIB.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
LIB.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
LIB.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
LIB.ggml_row_size.restype = ctypes.c_size_t

# ggml type id: (name, bytes per block of 256, grid points, grid indices per block)
TYPES = {
    16: ("iq2_xxs", 66, 256, 32),
    17: ("iq2_xs", 74, 512, 32),
    18: ("iq3_xxs", 98, 256, 64),
    19: ("iq1_s", 50, 2048, 32),
    21: ("iq3_s", 110, 512, 64),
    22: ("iq2_s", 82, 1024, 32),
    29: ("iq1_m", 56, 2048, 32),
}
HAS_REF = {18, 21, 22}  # types that export quantize_row_<t>_ref
N_ROWS, N_PER_ROW = 2, 512


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def dequantize(t, q, n):
    f = getattr(LIB, "dequantize_row_" + TYPES[t][0])
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    out = np.zeros(n, dtype=np.float32)
    f(ptr(q), ptr(out), n)
    return out


def quantize(t, x, nrows, npr, imatrix):
    q = np.zeros(LIB.ggml_row_size(t, npr) * nrows, dtype=np.uint8)
    n = LIB.ggml_quantize_chunk(t, ptr(x), ptr(q), 0, nrows, npr,
                                ptr(imatrix) if imatrix is not None else None)
    assert n == q.size
    return q


def quantize_ref(t, x, nrows, npr):
    f = getattr(LIB, "quantize_row_%s_ref" % TYPES[t][0])
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    rs = LIB.ggml_row_size(t, npr)
    q = np.zeros(rs * nrows, dtype=np.uint8)
    for r in range(nrows):
        row = np.ascontiguousarray(x[r * npr:(r + 1) * npr])
        f(ptr(row), ctypes.c_void_p(q.ctypes.data + r * rs), npr)
    return q


def distributions(rng, n):
    out = {"normal": rng.standard_normal(n).astype(np.float32),
           "zeros": np.zeros(n, dtype=np.float32)}
    o = rng.standard_normal(n).astype(np.float32)
    idx = rng.choice(n, size=max(2, n // 128), replace=False)
    o[idx] = np.where(rng.random(idx.size) < 0.5, -1000.0, 1000.0).astype(np.float32)
    out["outliers"] = o
    tiny = (rng.standard_normal(n) * 1e-30).astype(np.float32)
    tiny[::7] = (rng.standard_normal(tiny[::7].size) * 1e-38).astype(np.float32)
    out["tiny"] = tiny
    out["uniform"] = rng.uniform(-1, 1, n).astype(np.float32)
    # whole blocks of 32 (and half blocks) of exact zeros amid normal values
    zb = rng.standard_normal(n).astype(np.float32).reshape(-1, 32)
    zb[1::3] = 0.0
    zb[2::5, :16] = 0.0
    out["zero-blocks"] = zb.reshape(-1)
    # many equal values (the IQ1 quantizers sort values; ties must keep GGML's order)
    out["ties"] = (np.round(rng.standard_normal(n) * 2) / 2).astype(np.float32)
    return out


def set_bits(q, byte, shift, nbits, value):
    q[byte] = (int(q[byte]) & ~(((1 << nbits) - 1) << shift) & 0xff) | (value << shift)


def grid_sweep(rng, t):
    """Valid random blocks whose grid indices run over the whole grid once."""
    _, size, ngrid, per_block = TYPES[t]
    nb = ngrid // per_block
    q = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    for b in range(nb):
        d = int(np.float16(rng.uniform(0.01, 1.0) * (1 if rng.random() < 0.8 else -1)).view(np.uint16))
        if t == 29:  # iq1_m: f16 scale in the top nibbles of the four u16 scale words
            for k in range(4):
                set_bits(q[b], 48 + 2 * k + 1, 4, 4, (d >> (4 * k)) & 0xf)
        else:
            q[b, 0], q[b, 1] = d & 0xff, d >> 8
        for g in range(per_block):
            i = b * per_block + g
            if t == 16:    # iq2_xxs: 4 index bytes then 4 bytes of signs/scale per 32 values
                q[b, 2 + 8 * (g // 4) + g % 4] = i
            elif t == 17:  # iq2_xs: u16 per 8 values, index in bits 0..9
                set_bits(q[b], 2 + 2 * g, 0, 8, i & 0xff)
                set_bits(q[b], 3 + 2 * g, 0, 1, i >> 8)
            elif t == 22:  # iq2_s: low byte in qs, 2 high bits in qh
                q[b, 2 + g] = i & 0xff
                set_bits(q[b], 66 + g // 4, 2 * (g % 4), 2, i >> 8)
            elif t == 18:  # iq3_xxs: one index byte per 4 values
                q[b, 2 + g] = i
            elif t == 21:  # iq3_s: low byte in qs, high bit in qh
                q[b, 2 + g] = i & 0xff
                set_bits(q[b], 66 + g // 8, g % 8, 1, i >> 8)
            elif t == 19:  # iq1_s: low byte in qs, 3 high bits in the u16 qh words
                q[b, 2 + g] = i & 0xff
                word = int(q[b, 34 + 2 * (g // 4)]) | int(q[b, 35 + 2 * (g // 4)]) << 8
                s = 3 * (g % 4)
                word = (word & ~(7 << s)) | ((i >> 8) << s)
                q[b, 34 + 2 * (g // 4)], q[b, 35 + 2 * (g // 4)] = word & 0xff, word >> 8
            elif t == 29:  # iq1_m: low byte in qs, 3 high bits in a qh nibble
                q[b, g] = i & 0xff
                set_bits(q[b], 32 + g // 2, 4 * (g % 2), 3, i >> 8)
    return nb, q.reshape(-1)


def write(path, t, cases):
    with open(path, "wb") as f:
        f.write(b"GQFX" + struct.pack("<III", 1, t, len(cases)))
        for name, nrows, npr, kind, imatrix, x, q, y in cases:
            nm = name.encode()
            f.write(struct.pack("<I", len(nm)) + nm + struct.pack("<IIB", nrows, npr, kind))
            if kind == 1:
                f.write(imatrix.astype("<f4").tobytes())
            f.write(x.astype("<f4").tobytes())
            f.write(q.tobytes())
            f.write(y.astype("<f4").tobytes())


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    for t, (name, _, _, _) in TYPES.items():
        LIB.ggml_quantize_init(t)
        rng = np.random.default_rng(1000 + t)
        n = N_ROWS * N_PER_ROW
        cases = []
        for dname, x in distributions(rng, n).items():
            imatrix = rng.uniform(0.05, 3.0, N_PER_ROW).astype(np.float32)
            if not LIB.ggml_quantize_requires_imatrix(t):
                q = quantize(t, x, N_ROWS, N_PER_ROW, None)
                cases.append((dname, N_ROWS, N_PER_ROW, 0, None, x, q, dequantize(t, q, n)))
            q = quantize(t, x, N_ROWS, N_PER_ROW, imatrix)
            cases.append(("imatrix-" + dname, N_ROWS, N_PER_ROW, 1, imatrix, x, q, dequantize(t, q, n)))
            if t in HAS_REF and dname == "normal":
                q = quantize_ref(t, x, N_ROWS, N_PER_ROW)
                cases.append(("ref-normal", N_ROWS, N_PER_ROW, 2, None, x, q, dequantize(t, q, n)))
        nb, q = grid_sweep(rng, t)
        zeros = np.zeros(nb * 256, dtype=np.float32)
        cases.append(("grid-sweep", nb, 256, 3, None, zeros, q, dequantize(t, q, nb * 256)))
        path = os.path.join(outdir, name + ".bin")
        write(path, t, cases)
        print("%s: %d cases, %d bytes" % (path, len(cases), os.path.getsize(path)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "crates/ggml/tests/fixtures/quants")
