#!/usr/bin/env python3
"""Generate the quantization fixtures of crates/ggml/tests/fixtures/quants/ with the real GGML.

Regenerate everything (from the repository root):

    pip install libggml-python==0.20.2.post1 numpy==2.4.6
    python3 tools/quant_fixtures/gen.py

The file format is described in tools/quant_fixtures/README.md. Every type of the type table that
GGML can dequantize or quantize gets one file `<type name>.bin` (the block-quantized types plus the
f16 and bf16 rows). Inputs come from a fixed seed per type, so the output is reproducible.

Besides the ordinary distributions, three case families pin behaviour that random inputs rarely
reach: `zero-blocks` (whole blocks of 32 exact zeros, where GGML's IQ3_S does not advance its
write position), `ties` (five distinct values, so that the IQ1 quantizers' sorts must keep GGML's
order of equal values), and for each grid i-quant a `grid-sweep` (dequantize only: blocks whose
grid indices take every value of the type's grid once).

GGML is called through ctypes on the `libggml-base.so` that the libggml-python wheel ships:
`ggml_quantize_chunk` (kinds 0 and 1), the type traits' `from_float_ref` or the exported
`quantize_row_<t>_ref` (kind 2), and the traits' `to_float` or the exported `dequantize_row_<t>`
for every dequantization. q8_1 is the one type GGML cannot dequantize (no `to_float`, no
`dequantize_row_q8_1`): its dequantized floats are written as `f32(d) * q` by this script and are
not GGML's.
"""

import ctypes
import os
import struct
import sys

import numpy as np

LIBGGML_VERSION = "0.20.2.post1"
NUMPY_VERSION = "2.4.6"
SEED = 20240521

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "crates", "ggml", "tests", "fixtures", "quants")

KIND_CHUNK, KIND_CHUNK_IMATRIX, KIND_REF, KIND_RANDOM = 0, 1, 2, 3

GRID_IQUANTS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m")


def load_ggml():
    import libggml
    from libggml._version import __version__ as libggml_version

    if libggml_version != LIBGGML_VERSION:
        sys.exit(f"need libggml-python=={LIBGGML_VERSION}, found {libggml_version}")
    if np.__version__ != NUMPY_VERSION:
        sys.exit(f"need numpy=={NUMPY_VERSION}, found {np.__version__}")
    path = os.path.join(os.path.dirname(libggml.__file__), "lib64", "libggml-base.so")
    return ctypes.CDLL(path)


class TypeTraits(ctypes.Structure):
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


ROW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class Ggml:
    def __init__(self):
        self.lib = load_ggml()
        self.lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
        self.lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        self.lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
        self.lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
        self.lib.ggml_quantize_init.argtypes = [ctypes.c_int]
        self.lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.lib.ggml_quantize_chunk.argtypes = [
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
        ]

    def traits(self, type_id):
        return self.lib.ggml_get_type_traits(type_id).contents

    def symbol(self, name):
        try:
            return ROW_FN(ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value)
        except AttributeError:
            return None

    def to_float(self, type_id, name):
        t = self.traits(type_id)
        if t.to_float:
            return ROW_FN(t.to_float)
        return self.symbol(f"dequantize_row_{name}")

    def from_float_ref(self, type_id, name):
        t = self.traits(type_id)
        if t.from_float_ref:
            return ROW_FN(t.from_float_ref)
        return self.symbol(f"quantize_row_{name}_ref")

    def has_chunk(self, type_id, name):
        # ggml_quantize_chunk handles exactly the types that export quantize_<t>, plus f16/bf16.
        return name in ("f16", "bf16") or hasattr(self.lib, f"quantize_{name}")


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


# ---------------------------------------------------------------------------------------------
# Inputs


def make_input(rng, dist, n):
    if dist == "normal":
        return rng.standard_normal(n).astype(np.float32)
    if dist == "zeros":
        return np.zeros(n, dtype=np.float32)
    if dist == "outliers":
        x = rng.standard_normal(n).astype(np.float32)
        idx = rng.choice(n, size=max(2, n // 100), replace=False)
        x[idx] = np.where(rng.random(idx.size) < 0.5, -1000.0, 1000.0).astype(np.float32)
        return x
    if dist == "tiny":
        x = (rng.standard_normal(n) * 1e-30).astype(np.float32)
        idx = rng.choice(n, size=n // 4, replace=False)
        x[idx] = (rng.standard_normal(idx.size) * 1e-39).astype(np.float32)  # subnormal f32
        return x
    if dist == "uniform":
        return rng.uniform(-1.0, 1.0, n).astype(np.float32)
    if dist == "zero-blocks":
        # Whole blocks of 32 exact zeros (every third) and half blocks (every fifth) amid normal
        # values: the only input that shows GGML's IQ3_S not advancing its write position past
        # an all-zero block.
        x = rng.standard_normal(n).astype(np.float32).reshape(-1, 32)
        x[1::3] = 0.0
        x[2::5, :16] = 0.0
        return x.reshape(-1)
    if dist == "ties":
        # Only five distinct values (-1, -0.5, 0, 0.5, 1): the IQ1 quantizers sort each block,
        # and tied values must keep GGML's order (a reversed tie order changes IQ1_S and IQ1_M).
        return (rng.integers(-2, 3, n) * 0.5).astype(np.float32)
    if dist == "cauchy":
        return np.clip(rng.standard_cauchy(n), -1e4, 1e4).astype(np.float32)
    if dist == "sparse":
        x = rng.standard_normal(n).astype(np.float32)
        x[rng.random(n) < 0.9] = 0.0
        return x
    if dist == "positive":
        return np.abs(rng.standard_normal(n)).astype(np.float32) + 0.5
    if dist == "steps":
        # Few distinct values (ties in every search), varying per block of 32.
        return (rng.integers(-3, 4, n) * 10.0 ** rng.uniform(-2, 2, n // 32).repeat(32)).astype(
            np.float32
        )
    if dist == "nonfinite":
        x = rng.standard_normal(n).astype(np.float32)
        idx = rng.choice(n, size=3 * (n // 50), replace=False).reshape(3, -1)
        x[idx[0]], x[idx[1]], x[idx[2]] = np.nan, np.inf, -np.inf
        return x
    if dist == "huge":
        return (rng.standard_normal(n) * 1e37).astype(np.float32)
    if dist == "subnormal":
        return (rng.standard_normal(n) * 1e-40).astype(np.float32)
    if dist == "scales":
        # Each group of 16 has its own magnitude (exercises the sub-block scale searches), with a
        # positive offset on some groups (exercises the min searches).
        x = rng.standard_normal(n)
        mag = 10.0 ** rng.uniform(-3, 2, n // 16)
        off = np.where(rng.random(n // 16) < 0.3, 2.0, 0.0)
        return (x.reshape(-1, 16) * mag[:, None] + (off * mag)[:, None]).reshape(-1).astype(np.float32)
    raise ValueError(dist)


def make_imatrix(rng, n):
    w = np.exp(rng.standard_normal(n) * 1.5).astype(np.float32)
    w[rng.choice(n, size=n // 32, replace=False)] = 0.0  # some columns never activated
    return w


# ---------------------------------------------------------------------------------------------
# Random valid blocks (kind 3): random bytes with every float field set to a finite value.

# Byte offsets of the f16 fields in one block of each type.
F16_FIELDS = {
    "q1_0": [0], "q2_0": [0], "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2],
    "q8_0": [0], "q2_K": [80, 82], "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2],
    "q6_K": [208], "iq2_xxs": [0], "iq2_xs": [0], "iq3_xxs": [0], "iq1_s": [0], "iq4_nl": [0],
    "iq3_s": [0], "iq2_s": [0], "iq4_xs": [0], "tq1_0": [52], "tq2_0": [64], "f16": [0],
}


def random_f16(rng):
    v = np.float16(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-4, 1))
    return int(v.view(np.uint16))


def random_blocks(rng, name, type_size, n_blocks):
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for blk in raw:
        for off in F16_FIELDS.get(name, []):
            blk[off:off + 2] = np.frombuffer(struct.pack("<H", random_f16(rng)), dtype=np.uint8)
        if name == "mxfp4":
            blk[0] = rng.integers(100, 150)  # E8M0 exponent, 0xFF (NaN) excluded
        elif name == "q8_K":
            blk[0:4] = np.frombuffer(struct.pack("<f", rng.standard_normal() * 1e-2), np.uint8)
        elif name == "iq1_m":
            # The block's f16 scale lives in the top nibble of each of the four u16 scale words.
            s = random_f16(rng)
            sc = blk[48:56].view("<u2").copy()
            for k in range(4):
                sc[k] = (sc[k] & 0x0FFF) | (((s >> (4 * k)) & 0xF) << 12)
            blk[48:56] = sc.view(np.uint8)
        elif name == "bf16":
            blk[0:2] = np.frombuffer(struct.pack("<f", rng.standard_normal())[2:4], np.uint8)
    return raw.reshape(-1)


# Grid sweep (kind 3): random valid blocks of a grid i-quant whose grid indices, over the whole
# case, take every value of the grid exactly once, so that dequantization reads every grid point.
# Per type: (grid points, where the k-th grid index of a block is stored), the latter a list of
# bit fields (byte offset in the block of a little-endian u16, bit shift, bit count), low bits of
# the index first.


def _fields_per_index(n_index, *pieces):
    """For k in range(n_index): the fields of index k, each piece a function k -> field."""
    return [[piece(k) for piece in pieces] for k in range(n_index)]


GRID_INDEX_FIELDS = {
    # 4 index bytes, then 4 bytes of signs and scale, per 32 values
    "iq2_xxs": (256, _fields_per_index(32, lambda k: (2 + 8 * (k // 4) + k % 4, 0, 8))),
    # u16 per 8 values, index in bits 0..9
    "iq2_xs": (512, _fields_per_index(32, lambda k: (2 + 2 * k, 0, 9))),
    # low byte in qs, 2 high bits in qh (4 indices per byte)
    "iq2_s": (1024, _fields_per_index(32, lambda k: (2 + k, 0, 8), lambda k: (66 + k // 4, 2 * (k % 4), 2))),
    # one index byte per 4 values
    "iq3_xxs": (256, _fields_per_index(64, lambda k: (2 + k, 0, 8))),
    # low byte in qs, high bit in qh (8 indices per byte)
    "iq3_s": (512, _fields_per_index(64, lambda k: (2 + k, 0, 8), lambda k: (66 + k // 8, k % 8, 1))),
    # low byte in qs, 3 high bits in the u16 qh word of each 32 values (3 bits per index)
    "iq1_s": (
        2048,
        _fields_per_index(32, lambda k: (2 + k, 0, 8), lambda k: (34 + 2 * (k // 4), 3 * (k % 4), 3)),
    ),
    # low byte in qs, 3 high bits in a qh nibble (bit 3 is the shift's sign)
    "iq1_m": (2048, _fields_per_index(32, lambda k: (k, 0, 8), lambda k: (32 + k // 2, 4 * (k % 2), 3))),
}


def set_field(blk, byte, shift, nbits, value):
    """Store `value` in `nbits` bits of the little-endian u16 at `byte`, from bit `shift`."""
    word = int(blk[byte]) | (int(blk[byte + 1]) << 8 if byte + 1 < blk.size else 0)
    mask = ((1 << nbits) - 1) << shift
    word = (word & ~mask) | ((value << shift) & mask)
    blk[byte] = word & 0xFF
    if byte + 1 < blk.size:
        blk[byte + 1] = word >> 8


def grid_sweep_blocks(rng, name, type_size, n_blocks):
    n_grid, fields = GRID_INDEX_FIELDS[name]
    raw = random_blocks(rng, name, type_size, n_blocks).reshape(n_blocks, type_size)
    order = rng.permutation(n_grid)
    for b, blk in enumerate(raw):
        for k, index_fields in enumerate(fields):
            i = int(order[b * len(fields) + k])
            for byte, shift, nbits in index_fields:
                set_field(blk, byte, shift, nbits, i & ((1 << nbits) - 1))
                i >>= nbits
    return raw.reshape(-1)


# ---------------------------------------------------------------------------------------------
# Cases


def dequantize(g, type_id, name, q, n):
    y = np.zeros(n, dtype=np.float32)
    fn = g.to_float(type_id, name)
    if fn is not None:
        fn(ptr(q), ptr(y), n)
        return y
    if name == "q8_1":  # no GGML to_float: d * q, written by this script
        blocks = q.reshape(-1, 36)
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        qs = blocks[:, 4:].view(np.int8).astype(np.float32)
        return (d * qs).reshape(-1).astype(np.float32)
    raise RuntimeError(f"no dequantization for {name}")


def case_plan(g, type_id, name, stress):
    """(case name, kind, distribution, n_rows, n_per_row) for one type."""
    plan = []
    dists = ["normal", "zeros", "outliers", "tiny", "uniform", "scales", "zero-blocks", "ties"]
    shape = {"normal": (3, 512)}
    if stress:
        dists += ["cauchy", "sparse", "positive", "steps"]
        if name not in GRID_IQUANTS:
            # GGML's grid i-quant searches are not meant for these (and may assert).
            dists += ["nonfinite", "huge", "subnormal"]
        shape = {d: (16, 512) for d in dists}
    needs_imatrix = g.lib.ggml_quantize_requires_imatrix(type_id)
    if g.has_chunk(type_id, name):
        if not needs_imatrix:
            for d in dists:
                plan.append((d, KIND_CHUNK, d) + shape.get(d, (2, 256)))
        if name not in ("f16", "bf16"):
            imx = (
                dists
                if needs_imatrix or stress
                else ["normal", "outliers", "scales", "zero-blocks", "ties"]
            )
            for d in imx:
                plan.append((f"imatrix-{d}", KIND_CHUNK_IMATRIX, d) + shape.get(d, (2, 256)))
    if g.from_float_ref(type_id, name) is not None:
        ref_dists = ["normal", "zeros", "outliers", "tiny", "zero-blocks", "ties"]
        for d in ref_dists + (dists[8:] if stress else []):
            if name == "iq4_nl" and d in ("zeros", "tiny", "sparse", "nonfinite", "subnormal"):
                # quantize_row_iq4_nl_ref packs uninitialised stack memory (its L[]) into the
                # nibbles of an all-(near-)zero block: GGML's bytes are not reproducible there.
                continue
            plan.append((f"ref-{d}", KIND_REF, d) + (shape[d] if stress else (2, 256)))
    if g.to_float(type_id, name) is not None:
        plan.append(("random-blocks", KIND_RANDOM, None, 2, 512))
    if name in GRID_INDEX_FIELDS:
        n_blocks = GRID_INDEX_FIELDS[name][0] // len(GRID_INDEX_FIELDS[name][1])
        plan.append(("grid-sweep", KIND_RANDOM, "grid", n_blocks, 256))
    return plan


def run_case(g, rng, type_id, name, kind, dist, n_rows, n_per_row):
    t = g.traits(type_id)
    n = n_rows * n_per_row
    row_size = t.type_size * n_per_row // t.blck_size
    q = np.zeros(n_rows * row_size, dtype=np.uint8)
    imatrix = None
    if kind == KIND_RANDOM:
        x = np.zeros(n, dtype=np.float32)
        make_blocks = grid_sweep_blocks if dist == "grid" else random_blocks
        q = make_blocks(rng, name, t.type_size, n // t.blck_size)
    else:
        x = make_input(rng, dist, n)
        if kind == KIND_CHUNK_IMATRIX:
            imatrix = make_imatrix(rng, n_per_row)
        if kind == KIND_REF:
            g.lib.ggml_quantize_init(type_id)
            g.from_float_ref(type_id, name)(ptr(x), ptr(q), n)
        else:
            got = g.lib.ggml_quantize_chunk(
                type_id, ptr(x), ptr(q), 0, n_rows, n_per_row,
                ptr(imatrix) if imatrix is not None else None,
            )
            assert got == q.size, (name, got, q.size)
    y = dequantize(g, type_id, name, q, n)
    return x, imatrix, q, y


def encode_case(case_name, kind, n_rows, n_per_row, x, imatrix, q, y):
    out = bytearray()
    nb = case_name.encode("utf-8")
    out += struct.pack("<I", len(nb)) + nb
    out += struct.pack("<IIB", n_rows, n_per_row, kind)
    if kind == KIND_CHUNK_IMATRIX:
        out += imatrix.astype("<f4").tobytes()
    out += x.astype("<f4").tobytes()
    out += q.tobytes()
    out += y.astype("<f4").tobytes()
    return bytes(out)


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT_DIR, help="output directory (default: the fixtures)")
    ap.add_argument(
        "--stress",
        action="store_true",
        help="larger inputs and more distributions, for a local differential run (not committed)",
    )
    args = ap.parse_args()
    g = Ggml()
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for type_id in range(43):
        t = g.traits(type_id)
        if t.blck_size == 0:
            continue  # removed type
        name = t.type_name.decode()
        if not t.is_quantized and name not in ("f16", "bf16"):
            continue
        rng = np.random.default_rng([SEED + int(args.stress), type_id])
        cases = []
        for case_name, kind, dist, n_rows, n_per_row in case_plan(g, type_id, name, args.stress):
            x, imatrix, q, y = run_case(g, rng, type_id, name, kind, dist, n_rows, n_per_row)
            cases.append(encode_case(case_name, kind, n_rows, n_per_row, x, imatrix, q, y))
        blob = b"GQFX" + struct.pack("<III", 1, type_id, len(cases)) + b"".join(cases)
        with open(os.path.join(args.out, f"{name}.bin"), "wb") as f:
            f.write(blob)
        total += len(blob)
        print(f"{name:8} {len(cases):3} cases {len(blob):8} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
