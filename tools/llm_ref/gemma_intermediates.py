#!/usr/bin/env python3
"""Gemma 3's intermediates, ggml-llm against llama.cpp, layer by layer, to find where they part.

    GGML_LLM_DUMP_TENSORS=DIR cargo run --release -p ggml-cli -- run MODEL -p TEXT -n 1 -t 1
    python3 tools/llm_ref/gemma_intermediates.py DIR [--model PATH] [--text TEXT] [--fa off]

ggml-llm writes the tensors its Gemma graph names as llama.cpp's graph callback does
(`attn_norm-3`, `l_out-17`, ...; see ggml_llm's `arch::dump_dir`) to DIR as raw f32. This
script decodes the same text (BOS added) as one batch in llama.cpp (1 thread, repack off, flash
attention on unless `--fa off`), takes the tensors of the same names through the scheduler's
eval callback, and prints, in graph order, the NMSE of each of ours against llama.cpp's and the
largest absolute difference. The first tensor whose NMSE is well above its inputs' is where a
kernel computes differently. With `--save FILE` llama.cpp's tensors are also written (.npz).
"""

import argparse
import ctypes
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_ctypes as lc  # noqa: E402
from gemma_prompts import DEFAULT_MODEL  # noqa: E402

NAME = re.compile(r"^[A-Za-z_]+-\d+$")


def llama_tensors(model, text, flash_attn):
    got, order = {}, []

    def cb(t, ask, _user):
        t = t.contents
        name = t.name.decode()
        want = bool(NAME.match(name)) and t.type == 0  # GGML_TYPE_F32
        if ask or not want:
            return want or not ask
        ne, nb = list(t.ne), list(t.nb)
        n = int(np.prod(ne))
        # Logical order through the tensor's strides (its data is in CPU memory).
        span = sum((ne[i] - 1) * nb[i] for i in range(4)) + 4
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(t.data))
        a = np.lib.stride_tricks.as_strided(raw.view(np.float32), shape=ne[::-1],
                                            strides=nb[::-1])
        # A name llama.cpp gives more than one node (a result, then its reshapes) keeps the
        # last one's values, the tensor ggml-llm's name is on.
        got[name] = np.array(a, dtype=np.float32).reshape(n)
        if name not in order:
            order.append(name)
        return True

    callback = lc.EVAL_CALLBACK(cb)
    fa = lc.FLASH_ATTN_ON if flash_attn else lc.FLASH_ATTN_OFF
    m = lc.Llama(model, n_ctx=512, n_batch=512, n_threads=1, flash_attn=fa, repack=False,
                 cb_eval=callback)
    try:
        ids = m.tokenize(text)
        m.decode(ids)
    finally:
        m.close()
    return ids, got, order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump_dir")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--text", default="The capital of France is")
    ap.add_argument("--fa", default="on", choices=("on", "off"))
    ap.add_argument("--save")
    args = ap.parse_args()
    ids, ref, order = llama_tensors(args.model, args.text, args.fa == "on")
    print(f"{len(ids)} tokens; llama.cpp named {len(order)} tensors")
    if args.save:
        np.savez(args.save, **ref)
    for name in order:
        path = os.path.join(args.dump_dir, f"{name}.f32")
        if not os.path.exists(path):
            continue
        ours = np.fromfile(path, dtype=np.float32)
        r = ref[name]
        if ours.size != r.size:
            print(f"{name:>20}: {ours.size} values, llama.cpp {r.size}")
            continue
        e = float(np.sum((ours.astype(np.float64) - r) ** 2) / max(np.sum(r.astype(np.float64) ** 2), 1e-30))
        d = float(np.max(np.abs(ours - r)))
        same = int(np.sum(ours.view(np.uint32) == r.view(np.uint32)))
        print(f"{name:>20}: NMSE {e:.3e}  max |diff| {d:.3e}  bit-identical {same}/{r.size}")


if __name__ == "__main__":
    main()
