#!/usr/bin/env python3
"""GGUF interoperability fixtures between ggml-rs and the `gguf` Python package (gguf-py).

(a) Writes files with gguf-py covering every metadata value type (nested arrays and a
    non-UTF-8 string included) and every tensor type gguf-py knows, and dumps what gguf-py
    reads back to JSON next to each file (py_*.gguf, py_*.json).
(b) Dumps what gguf-py reads from the files ggml-rs's writer produced (ours_*.gguf, written by
    the Rust test `gguf_interop`) to ours_*.json.

The Rust test crates/ggml/tests/gguf_interop.rs compares both directions.

Regenerate everything (from the repository root):

    pip install -r tools/gguf_interop/requirements.txt
    GGML_GGUF_REGEN=1 cargo test -p ggml --test gguf_interop
    python3 tools/gguf_interop/gguf_interop.py crates/ggml/tests/fixtures/gguf
    cargo test -p ggml --test gguf_interop

JSON schema (shared with the Rust test):
    {"version", "alignment", "data_offset",
     "kv": [{"key", "type", "value"}],
     "tensors": [{"name", "type_id", "ne", "offset", "n_bytes", "data_hex"}]}
A value is an int, a bool, a float (or "nan"/"inf"/"-inf"), a string ({"hex": ...} when the
bytes are not UTF-8), or for arrays {"elem": type, "items": [values]}. Type names are GGML's
("u8", "i8", ..., "str", "arr").
"""

import importlib.metadata
import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

if importlib.metadata.version("gguf") != "0.19.0":
    sys.exit("needs gguf==0.19.0: pip install -r tools/gguf_interop/requirements.txt")

TYPE_NAMES = {
    V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
    V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "str", V.ARRAY: "arr",
    V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64",
}


# ---------------------------------------------------------------------------------------------
# (a) files written by gguf-py

def add_every_value_type(w: gguf.GGUFWriter) -> None:
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.15625)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo wörld")
    w.add_key_value("t.str_bytes", b"\xff\xfex", V.STRING)
    w.add_uint64("t.u64", 2**64 - 6)
    w.add_int64("t.i64", -(2**63) + 7)
    w.add_float64("t.f64", -1.0e300)
    w.add_key_value("a.u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("a.i8", [-1, 0, 127], V.ARRAY, sub_type=V.INT8)
    w.add_key_value("a.u16", [0, 65535], V.ARRAY, sub_type=V.UINT16)
    w.add_key_value("a.i16", [-32768, 5], V.ARRAY, sub_type=V.INT16)
    w.add_key_value("a.u32", list(range(50)), V.ARRAY, sub_type=V.UINT32)
    w.add_key_value("a.i32", [-(2**31), -1, 2**31 - 1], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("a.f32", [0.5, -3.25, 1e-7, 3.4e38], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("a.bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_array("a.str", ["a", "b", "ünï"])
    w.add_key_value("a.u64", [2**64 - 1, 0], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("a.i64", [-(2**63), 3], V.ARRAY, sub_type=V.INT64)
    w.add_key_value("a.f64", [0.1, -2.5e-300], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("a.nested_i32", [[1, 2], [3]])
    w.add_array("a.nested_str", [["x"], ["y", "z"]])


# gguf-py 0.19.0 gives Q8_1 40-byte blocks (two f32 scales); GGML's block_q8_1 has two f16
# scales, 36 bytes. Q8_1 is an activation-only type that never appears in model files, so the
# fixtures leave it out rather than encode the disagreement.
SKIPPED_TYPES = {Q.Q8_1}


def add_every_tensor_type(w: gguf.GGUFWriter, rng: random.Random) -> None:
    """One tensor per type gguf-py knows (but SKIPPED_TYPES), with varied shapes, as raw bytes."""
    shapes = [(2,), (1,), (2, 1, 2), (3, 2)]  # rows (outer dims), numpy order
    for i, qt in enumerate(t for t in sorted(Q, key=int) if t not in SKIPPED_TYPES):
        blck, size = gguf.GGML_QUANT_SIZES[qt]
        outer = shapes[i % len(shapes)]
        k = 1 + (i % 2)  # blocks per row
        data = np.frombuffer(rng.randbytes(int(np.prod(outer)) * k * size), dtype=np.uint8)
        w.add_tensor(f"blk.{i}.{qt.name.lower()}", data.reshape(*outer, k * size), raw_dtype=qt)


def write_py_fixtures(out: Path) -> list[Path]:
    rng = random.Random(20240601)
    paths = []

    p = out / "py_every_type.gguf"
    w = gguf.GGUFWriter(p, "test")
    add_every_value_type(w)
    add_every_tensor_type(w, rng)
    finish(w)
    paths.append(p)

    p = out / "py_aligned.gguf"
    w = gguf.GGUFWriter(p, "aligned")
    w.add_custom_alignment(64)
    w.add_string("general.name", "alignment 64")
    for i, (qt, outer, ne0) in enumerate([(Q.F32, (3,), 5), (Q.Q8_0, (2, 1), 64), (Q.I16, (1, 1, 1), 7)]):
        blck, size = gguf.GGML_QUANT_SIZES[qt]
        row = ne0 // blck * size
        data = np.frombuffer(rng.randbytes(int(np.prod(outer)) * row), dtype=np.uint8)
        w.add_tensor(f"t{i}", data.reshape(*outer, row), raw_dtype=qt)
    finish(w)
    paths.append(p)
    return paths


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------------------------
# dumping what gguf-py reads

def scalar(vtype, part):
    x = part.tolist()[0]
    if vtype == V.BOOL:
        return bool(x)
    if vtype in (V.FLOAT32, V.FLOAT64):
        x = float(x)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def string(raw: bytes):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


def decode(parts, i, vtype):
    """Rebuilds a value from gguf-py's parsed parts (which flatten nested arrays)."""
    if vtype == V.STRING:
        return string(parts[i + 1].tobytes()), i + 2
    if vtype == V.ARRAY:
        elem = V(int(parts[i][0]))
        n = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(n):
            v, i = decode(parts, i, elem)
            items.append(v)
        return {"elem": TYPE_NAMES[elem], "items": items}, i
    return scalar(vtype, parts[i]), i + 1


def dump(path: Path) -> dict:
    r = gguf.GGUFReader(path)
    kv = []
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue  # gguf-py's pseudo-fields for the header
        vtype = V(int(field.parts[2][0]))
        value, end = decode(field.parts, 3, vtype)
        assert end == len(field.parts), name
        kv.append({"key": name, "type": TYPE_NAMES[vtype], "value": value})
    tensors = []
    for t in r.tensors:
        parts = t.field.parts  # name len, name, n_dims, ne, type, offset
        raw = bytes(r.data[t.data_offset:t.data_offset + t.n_bytes])
        tensors.append({
            "name": t.name,
            "type_id": int(t.tensor_type),
            "ne": [int(x) for x in parts[3].tolist()],
            "offset": int(parts[5][0]),
            "n_bytes": int(t.n_bytes),
            "data_hex": raw.hex(),
        })
    return {
        "version": int(r.fields["GGUF.version"].parts[0][0]),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "kv": kv,
        "tensors": tensors,
    }


def write_dump(path: Path) -> None:
    out = path.with_suffix(".json")
    out.write_text(json.dumps(dump(path), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} FIXTURE_DIR")
    out = Path(sys.argv[1])
    for p in write_py_fixtures(out):
        print(f"wrote {p}")
        write_dump(p)
    ours = sorted(out.glob("ours_*.gguf"))
    if not ours:
        sys.exit("no ours_*.gguf: run `GGML_GGUF_REGEN=1 cargo test -p ggml --test gguf_interop` first")
    for p in ours:
        write_dump(p)


if __name__ == "__main__":
    main()
