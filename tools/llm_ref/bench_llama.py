#!/usr/bin/env python3
"""llama-bench's measurement through ctypes, with the weights repacked as on AVX2/AVX-512 CPUs.

    python3 tools/llm_ref/bench_llama.py MODEL [-p 512] [-n 128] [-t 1,2] [-r 5] [--no-repack]

Prints llama-bench's markdown table (model, size, params, backend, threads, test, t/s). It
exists because `llama-bench`'s default (`--repack 1`) also selects the AMX buffer type on CPUs
that report AMX, and on virtual machines that report AMX without enabling it the tile
instructions fault (SIGILL); `llama-bench --repack 0` then runs, but without the repacked Q4_K
kernels llama.cpp uses on other x86 CPUs. This script places exactly those weights in
CPU_REPACK (see llama_ctypes.Llama) and times like llama-bench: one warm-up run, then `-r`
runs from an empty KV cache, each `pp` test one batched decode of `-p` random tokens and each
`tg` test `-n` single-token decodes, the mean and sample standard deviation of tokens/s.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ctypes as lc  # noqa: E402


def run_once(m, rng, n_prompt, n_gen):
    m.reset()
    t0 = time.perf_counter()
    if n_prompt:
        m.decode(rng.integers(0, m.n_vocab, n_prompt).tolist(), all_outputs=False)
    for _ in range(n_gen):
        m.decode([int(rng.integers(0, m.n_vocab))], all_outputs=False)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", default="1,2")
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--no-repack", action="store_true")
    args = ap.parse_args()
    size = os.path.getsize(args.model) / 2**20
    print(f"| {'model':<30} | {'size':>10} | {'threads':>7} | {'backend':<14} | {'test':>8} | "
          f"{'t/s':>20} |")
    print(f"| {'-' * 30} | {'-' * 9}: | {'-' * 6}: | {'-' * 14} | {'-' * 7}: | {'-' * 19}: |")
    backend = "CPU" if args.no_repack else "CPU+CPU_REPACK"
    for threads in [int(t) for t in args.t.split(",")]:
        for n_prompt, n_gen in [(args.p, 0), (0, args.n)]:
            if n_prompt + n_gen == 0:
                continue
            with lc.Llama(args.model, n_ctx=max(n_prompt + n_gen, 16), n_batch=max(n_prompt, 1),
                          n_threads=threads, flash_attn=lc.FLASH_ATTN_AUTO,
                          repack=not args.no_repack) as m:
                rng = np.random.Generator(np.random.PCG64(42))
                tps = []
                for r in range(args.r + 1):
                    secs = run_once(m, rng, n_prompt, n_gen)
                    if r > 0:  # run 0 warms up
                        tps.append((n_prompt + n_gen) / secs)
            mean = statistics.mean(tps)
            sd = statistics.stdev(tps) if len(tps) > 1 else 0.0
            test = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
            name = os.path.basename(args.model)[:30]
            print(f"| {name:<30} | {size:6.2f} MiB | {threads:>7} | {backend:<14} | {test:>8} | "
                  f"{f'{mean:.2f} ± {sd:.2f}':>20} |", flush=True)


if __name__ == "__main__":
    main()
