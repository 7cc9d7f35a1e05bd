#!/usr/bin/env python3
"""Prints the Markdown table of a tools/bench-vs-ggml/run.sh log: per case and thread count,
ggml-rs's and GGML's rate (the median over the repetitions of each repetition's best run,
with the lowest and highest in brackets) and the ratio of ggml-rs's median to GGML's (the
best of GGML's plain and repacked weights and candle's, where the log has them); a `base`
build of ggml-rs (run.sh's BASE=) gets a column of its own. For a MODE=bw log
also each case's ggml-rs rate as a fraction of the STREAM-like line of as many arrays
(`stream triad` for the ops of two operands, `stream scale` for the rest; for MODE=cold's
`bw cold` lines, `stream read` of benches/cold.rs, a plain read of DRAM).

    summarize.py LOG
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^(GGML (?:repack )?|base |candle )?mul_mat (\S+) weights\s+M=(\d+) K=(\d+) N=(\d+)\s+(\d+)\s+"
                  r"[\d.]+ ms\s+([\d.]+) GFLOP/s\s+([\d.]+) GFLOP/s")
BW = re.compile(r"^(GGML )?((?:bw|stream) .+?)\s+(\d+)\s+[\d.]+ ms\s+([\d.]+) GB/s\s+([\d.]+) GB/s")
# The bw cases that stream three arrays (two operands and the result), as the triad does.
THREE = ("bw add", "bw mul", "bw geglu", "bw swiglu", "bw soft_max")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rates: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    order: list[tuple] = []
    bw: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    bw_order: list[tuple] = []
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            b = BW.match(line.strip())
            if b:
                key = (b.group(2), int(b.group(3)))
                if key not in bw_order:
                    bw_order.append(key)
                bw[key]["ggml" if b.group(1) else "ours"].append(float(b.group(5)))
                continue
            m = LINE.match(line.strip())
            if not m:
                continue
            who = {None: "ours", "GGML ": "ggml", "GGML repack ": "repack", "base ": "base",
                   "candle ": "candle"}[m.group(1)]
            key = (m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)))
            if key not in order:
                order.append(key)
            rates[key][who].append(float(m.group(8)))

    def cell(v: list[float]) -> str:
        if not v:
            return "–"
        return f"{statistics.median(v):.1f} [{min(v):.1f}–{max(v):.1f}]"

    if bw_order:
        print_bw(bw, bw_order, cell)
        return 0
    # the optional columns: a base build of ggml-rs (BASE=), GGML's repacked weights, candle
    extra = [w for w in ("base", "repack", "candle") if any(rates[k][w] for k in order)]
    names = {"base": "ggml-rs base GFLOP/s", "repack": "GGML repack GFLOP/s",
             "candle": "candle GFLOP/s"}
    head = ["weights", "m × k × n", "threads", "ggml-rs GFLOP/s"]
    head += [names[w] for w in extra if w == "base"] + ["GGML GFLOP/s"]
    head += [names[w] for w in extra if w in ("repack", "candle")] + ["ratio"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in order:
        ty, m, k, n, th = key
        ours = rates[key]["ours"]
        # the ratio is ours over the best of the others (GGML plain or repacked, candle)
        best = max((statistics.median(rates[key][w]) for w in ("ggml", "repack", "candle")
                    if rates[key][w]), default=None)
        ratio = f"{statistics.median(ours) / best:.2f}" if ours and best else "–"
        cells = [ty, f"{m}×{k}×{n}", str(th), cell(ours)]
        cells += [cell(rates[key]["base"]) for w in extra if w == "base"]
        cells += [cell(rates[key]["ggml"])]
        cells += [cell(rates[key][w]) for w in extra if w in ("repack", "candle")] + [ratio]
        print("| " + " | ".join(cells) + " |")
    return 0


def print_bw(bw, order, cell) -> None:
    """The MODE=bw table (see the module's description)."""
    def med(key, who):
        v = bw.get(key, {}).get(who)
        return statistics.median(v) if v else None

    print("| case | threads | ggml-rs GB/s | GGML GB/s | ours / GGML | ours / stream |")
    print("|---|---|---|---|---|---|")
    for key in order:
        name, th = key
        ours, ggml = med(key, "ours"), med(key, "ggml")
        if name.startswith("bw cold"):
            kind, size = "read", "1 GiB"
        else:
            kind, size = ("triad" if name.startswith(THREE) else "scale"), "4096, 512"
        stream = med((f"stream {kind} [{size}]", th), "ours")
        ratio = f"{ours / ggml:.2f}" if ours and ggml else "–"
        frac = (f"{ours / stream:.2f} ({kind})"
                if ours and stream and not name.startswith("stream") else "–")
        print(f"| {name} | {th} | {cell(bw[key]['ours'])} | {cell(bw[key]['ggml'])} | {ratio} "
              f"| {frac} |")


if __name__ == "__main__":
    sys.exit(main())
