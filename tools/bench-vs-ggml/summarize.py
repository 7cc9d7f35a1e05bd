#!/usr/bin/env python3
"""Prints the Markdown table of a tools/bench-vs-ggml/run.sh log: per case and thread count,
ggml-rs's and GGML's rate (the median over the repetitions of each repetition's best run,
with the lowest and highest in brackets) and the ratio of the two medians.

    summarize.py LOG
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^(GGML )?mul_mat (\S+) weights\s+M=(\d+) K=(\d+) N=(\d+)\s+(\d+)\s+"
                  r"[\d.]+ ms\s+([\d.]+) GFLOP/s\s+([\d.]+) GFLOP/s")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rates: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    order: list[tuple] = []
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            who = "ggml" if m.group(1) else "ours"
            key = (m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)))
            if key not in order:
                order.append(key)
            rates[key][who].append(float(m.group(8)))

    def cell(v: list[float]) -> str:
        if not v:
            return "–"
        return f"{statistics.median(v):.1f} [{min(v):.1f}–{max(v):.1f}]"

    print("| weights | m × k × n | threads | ggml-rs GFLOP/s | GGML GFLOP/s | ratio |")
    print("|---|---|---|---|---|---|")
    for key in order:
        ty, m, k, n, th = key
        ours, ggml = rates[key]["ours"], rates[key]["ggml"]
        ratio = (f"{statistics.median(ours) / statistics.median(ggml):.2f}"
                 if ours and ggml else "–")
        print(f"| {ty} | {m}×{k}×{n} | {th} | {cell(ours)} | {cell(ggml)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
