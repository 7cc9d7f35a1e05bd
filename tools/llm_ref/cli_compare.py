#!/usr/bin/env python3
"""The `ggml` CLI beside llama.cpp (called by compare.sh, one subcommand at a time).

    cli_compare.py greedy GGML GEMMA          ggml run --temp 0 on gemma_greedy.txt's prompts
    cli_compare.py embed GGML MINILM          ggml embed --pooling mean --normalize on the
                                              MiniLM texts, against sentence-transformers
    cli_compare.py bench GGML MODEL [-p 512] [-n 128] [-t 1,2] [-r 3]
                                              ggml bench-model and llama.cpp, interleaved

`greedy` compares the text `ggml run` prints with the text of llama.cpp's committed greedy
tokens (llama_token_to_piece of each, as `ggml run` streams them). `bench` runs, for every
round, `ggml bench-model -r 1`, `llama-bench -r 1` (with `--repack 0` when the default crashes
on this CPU, see bench_llama.py) and bench_llama.py (CPU_REPACK) one after another, so that
all of them see the same machine load, and prints a table with the mean of each and the ratio
ggml / llama.cpp. Each subcommand prints its summary; compare.sh stores it under results/.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_ctypes as lc  # noqa: E402
from logits import DEFAULT_DIR, read_fixture  # noqa: E402

N_GEN = 48


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def greedy(ggml, gemma):
    lines = [ln.rstrip("\n").split("\t") for ln in open(os.path.join(HERE, "gemma_greedy.txt"),
                                                         encoding="utf-8")
             if ln.strip() and not ln.startswith("#")]
    same = 0
    out = []
    with lc.Llama(gemma, n_ctx=64, n_batch=64) as m:
        for prompt, _ids, greedy_ids, _gap in lines:
            want = b"".join(m.piece(int(t)) for t in greedy_ids.split()).decode("utf-8", "replace")
            r = run([ggml, "run", gemma, "-p", prompt, "-n", str(N_GEN), "--temp", "0", "-t", "2"])
            got = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout
            ok = r.returncode == 0 and got == want
            same += ok
            out.append(f"  [{'same' if ok else 'DIFF'}] {prompt!r}"
                       + ("" if ok else f"\n      llama.cpp: {want!r}\n      ggml:      {got!r}"
                          + (f" (exit {r.returncode}: {r.stderr.strip()[-200:]})" if r.returncode else "")))
    print(f"greedy (ggml run --temp 0 vs llama.cpp, {N_GEN} tokens): {same}/{len(lines)} prompts "
          f"give the same text")
    print("\n".join(out))
    return same == len(lines)


def embed(ggml, minilm):
    ref = read_fixture(os.path.join(DEFAULT_DIR, "minilm.embeddings.bin"))[1]
    texts = [ln.rstrip("\n").split("\t")[0]
             for ln in open(os.path.join(DEFAULT_DIR, "minilm.tokens.tsv"), encoding="utf-8")]
    cmd = [ggml, "embed", minilm, "--pooling", "mean", "--normalize"]
    for t in texts:
        cmd += ["-p", t]
    r = run(cmd, check=True)
    data = json.loads(r.stdout)["data"]
    ours = np.array([d["embedding"] for d in data], dtype=np.float64)
    cos = np.sum(ours * ref, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    ok = bool(cos.min() >= 0.9999)
    print(f"embed (ggml embed vs sentence-transformers, all-MiniLM-L6-v2): {len(texts)} texts, "
          f"cosine min {cos.min():.7f}, mean {cos.mean():.7f} (≥ 0.9999): {'PASS' if ok else 'FAIL'}")
    return ok


ROW = re.compile(r"\|\s*(pp\d+|tg\d+)\s*\|\s*([\d.]+)\s*±")


def table_tps(text, threads_col):
    """{(threads, test): t/s} from a llama-bench style markdown table."""
    out = {}
    for line in text.splitlines():
        m = ROW.search(line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[(int(cells[threads_col]), m.group(1))] = float(m.group(2))
    return out


def llama_bench(model, p, n, t, repack):
    exe = os.path.join(lc.BIN_DIR, "llama-bench")
    r = run([exe, "-m", model, "-p", str(p), "-n", str(n), "-t", t, "-r", "1", "-o", "json",
             "--repack", "1" if repack else "0"])
    if r.returncode != 0:
        return None
    return {(int(x["n_threads"]), f"pp{x['n_prompt']}" if x["n_prompt"] else f"tg{x['n_gen']}"):
            float(x["avg_ts"]) for x in json.loads(r.stdout)}


def bench(ggml, model, p, n, t, rounds):
    cols = {"ggml bench-model": [], "llama-bench": [], "llama.cpp CPU_REPACK (bench_llama.py)": []}
    repack_ok = True
    for k in range(rounds):
        r = run([ggml, "bench-model", model, "-p", str(p), "-n", str(n), "-t", t, "-r", "1"])
        if r.returncode != 0:
            sys.exit(f"ggml bench-model failed: {r.stderr.strip()[-300:]}")
        cols["ggml bench-model"].append(table_tps(r.stdout, 4))
        lb = llama_bench(model, p, n, t, repack_ok) if repack_ok else None
        if lb is None:
            repack_ok = False
            lb = llama_bench(model, p, n, t, False)
        cols["llama-bench"].append(lb or {})
        r = run([sys.executable, os.path.join(HERE, "bench_llama.py"), model, "-p", str(p), "-n",
                 str(n), "-t", t, "-r", "1"])
        cols["llama.cpp CPU_REPACK (bench_llama.py)"].append(table_tps(r.stdout, 2))
        print(f"round {k + 1}/{rounds} done", file=sys.stderr, flush=True)
    if not repack_ok:
        cols["llama-bench --repack 0"] = cols.pop("llama-bench")
    keys = sorted({key for runs in cols.values() for d in runs for key in d},
                  key=lambda kt: (kt[0], kt[1][:2] != "pp"))
    names = list(cols)
    print(f"bench: {os.path.basename(model)}, {rounds} interleaved rounds (mean ± sd of t/s)")
    print("| threads | test | " + " | ".join(names) + " | ggml / best llama.cpp |")
    print("|---:|---:|" + "---:|" * len(names) + "---:|")
    for key in keys:
        cells, means = [], {}
        for name in names:
            v = [d[key] for d in cols[name] if key in d]
            if v:
                means[name] = statistics.mean(v)
                sd = statistics.stdev(v) if len(v) > 1 else 0.0
                cells.append(f"{means[name]:.2f} ± {sd:.2f}")
            else:
                cells.append("—")
        theirs = [v for k, v in means.items() if k != "ggml bench-model"]
        ratio = (f"{means['ggml bench-model'] / max(theirs):.2f}×"
                 if theirs and "ggml bench-model" in means else "—")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("greedy")
    g.add_argument("ggml")
    g.add_argument("gemma")
    e = sub.add_parser("embed")
    e.add_argument("ggml")
    e.add_argument("minilm")
    b = sub.add_parser("bench")
    b.add_argument("ggml")
    b.add_argument("model")
    b.add_argument("-p", type=int, default=512)
    b.add_argument("-n", type=int, default=128)
    b.add_argument("-t", default="1,2")
    b.add_argument("-r", type=int, default=3)
    a = ap.parse_args()
    if a.cmd == "greedy":
        sys.exit(0 if greedy(a.ggml, a.gemma) else 1)
    if a.cmd == "embed":
        sys.exit(0 if embed(a.ggml, a.minilm) else 1)
    bench(a.ggml, a.model, a.p, a.n, a.t, a.r)


if __name__ == "__main__":
    main()
