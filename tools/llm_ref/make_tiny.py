#!/usr/bin/env python3
"""Write deterministic random-weight tiny GGUF models, one per architecture.

Each model has llama.cpp's tensor names and metadata keys (the `gguf` package's names, which
llama.cpp's `src/llama-arch.cpp` reads) and a real vocabulary trimmed from one of llama.cpp's
test vocabularies (`~/.cache/ggml-rs/llama-vocab/ggml-vocab-*.gguf`, fetched by
`tools/tokenizer_check/fetch_vocabs.sh`), so that both llama.cpp and ggml-llm load their
tokenizers. The weights are drawn from numpy's PCG64 with a fixed seed per model, so running
this script again writes the same bytes.

    python3 tools/llm_ref/make_tiny.py [--out DIR] [--vocab-dir DIR]

writes `tiny-llama.gguf`, `tiny-qwen2.gguf`, `tiny-qwen3.gguf`, `tiny-qwen3-yarn.gguf`, `tiny-gemma3.gguf` and
`tiny-bert.gguf` to DIR (default `crates/ggml-llm/tests/fixtures/llm_ref/`). What each model
covers:

| file        | weights | vocab (trimmed)       | features                                          |
|-------------|---------|-----------------------|---------------------------------------------------|
| tiny-llama  | F32     | llama-bpe (BPE)       | GQA 4/2, rope NORM, separate output.weight         |
| tiny-qwen2  | F16     | qwen2 (BPE)           | q/k/v biases, rope NEOX, output tied to embeddings |
| tiny-qwen3  | F32     | qwen2 (BPE)           | q/k RMS norms, head_dim 32 ≠ n_embd/n_head         |
| tiny-qwen3-yarn | F32 | qwen2 (BPE)           | tiny-qwen3 with YaRN rope scaling (factor 4 of 64, attn_factor 0.9) |
| tiny-gemma3 | F16     | llama-spm (SPM)       | sliding window 8 on layers 0 and 2, global layer 1, |
|             |         |                       | per-kind rope base, post norms, GELU, tied output  |
| tiny-bert   | F16     | bert-bge (WordPiece)  | non-causal, absolute positions, token types, LN    |
"""

import argparse
import functools
import os

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "crates", "ggml-llm", "tests", "fixtures", "llm_ref")
DEFAULT_VOCABS = os.path.expanduser("~/.cache/ggml-rs/llama-vocab")

T = gguf.MODEL_TENSOR
TOKEN_NORMAL = 1
TOKEN_CONTROL = 3


def tensor_name(kind, bid=None, suffix="weight"):
    """llama.cpp's name of a tensor, e.g. `blk.0.attn_q.weight`."""
    base = gguf.TENSOR_NAMES[kind]
    if bid is not None:
        base = base.format(bid=bid)
    return f"{base}.{suffix}"


class Weights:
    """Random tensors written in a fixed order from one seeded generator."""

    def __init__(self, writer, seed, dtype):
        self.writer = writer
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.dtype = dtype

    def matrix(self, kind, bid, n_in, n_out, suffix="weight"):
        """A weight of ggml shape {n_in, n_out} (numpy (n_out, n_in)), entries ~ N(0, 1/n_in)."""
        w = self.rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)
        self.writer.add_tensor(tensor_name(kind, bid, suffix), w.astype(self.dtype))

    def embedding(self, kind, rows, n_embd, scale=1.0):
        """An embedding table {n_embd, rows} with entries ~ N(0, scale²)."""
        w = self.rng.standard_normal((rows, n_embd)) * scale
        self.writer.add_tensor(tensor_name(kind), w.astype(self.dtype))

    def vector(self, kind, bid, n, mean, std, suffix="weight"):
        """A 1-D tensor (norm weight or bias), always F32 as llama.cpp's converters keep them."""
        v = mean + std * self.rng.standard_normal(n)
        self.writer.add_tensor(tensor_name(kind, bid, suffix), v.astype(np.float32))


@functools.lru_cache(maxsize=None)
def read_vocab(path):
    """The tokenizer fields of a llama.cpp vocab file as plain Python values."""
    reader = gguf.GGUFReader(path)
    out = {}
    for name, field in reader.fields.items():
        if name.startswith("tokenizer."):
            out[name] = field.contents()
    return out


def trim_bpe(vocab, n_keep, specials):
    """The first `n_keep` byte-level BPE tokens, the merges among them, then `specials`.

    In GPT-2 style vocabularies ids 0..255 are the 256 byte characters and later ids follow merge
    order, so a prefix is a consistent smaller vocabulary once the merges whose parts or result
    fall outside it are dropped. `specials` (old ids) are appended as control tokens.
    """
    tokens = vocab["tokenizer.ggml.tokens"]
    kept = tokens[:n_keep]
    kept_set = set(kept)
    merges = []
    for m in vocab["tokenizer.ggml.merges"]:
        a, b = m.split(" ")
        if a in kept_set and b in kept_set and a + b in kept_set:
            merges.append(m)
    new_ids = {}
    for old in specials:
        new_ids[old] = len(kept)
        kept.append(tokens[old])
    types = [TOKEN_NORMAL] * n_keep + [TOKEN_CONTROL] * len(specials)
    return kept, types, merges, new_ids


def write_bpe_vocab(w, vocab, n_keep, pre):
    bos = vocab["tokenizer.ggml.bos_token_id"]
    eos = vocab["tokenizer.ggml.eos_token_id"]
    specials = sorted({bos, eos})
    tokens, types, merges, new_ids = trim_bpe(vocab, n_keep, specials)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(new_ids[bos])
    w.add_eos_token_id(new_ids[eos])
    return len(tokens)


def write_spm_vocab(w, vocab, n_keep):
    """The first `n_keep` SentencePiece pieces: <unk> <s> </s>, the 256 byte pieces, then the
    highest-scoring pieces (llama-spm orders them by score)."""
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(vocab["tokenizer.ggml.tokens"][:n_keep])
    w.add_token_scores([float(s) for s in vocab["tokenizer.ggml.scores"][:n_keep]])
    w.add_token_types(vocab["tokenizer.ggml.token_type"][:n_keep])
    w.add_bos_token_id(vocab["tokenizer.ggml.bos_token_id"])
    w.add_eos_token_id(vocab["tokenizer.ggml.eos_token_id"])
    w.add_unk_token_id(vocab["tokenizer.ggml.unknown_token_id"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    return n_keep


def write_wpm_vocab(w, vocab, n_keep):
    """The first `n_keep` WordPiece tokens ([PAD], [unused…], [UNK] [CLS] [SEP] [MASK], then
    single characters)."""
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre(vocab["tokenizer.ggml.pre"])
    w.add_token_list(vocab["tokenizer.ggml.tokens"][:n_keep])
    w.add_token_types(vocab["tokenizer.ggml.token_type"][:n_keep])
    w.add_token_type_count(2)
    w.add_unk_token_id(vocab["tokenizer.ggml.unknown_token_id"])
    w.add_sep_token_id(vocab["tokenizer.ggml.seperator_token_id"])
    w.add_pad_token_id(vocab["tokenizer.ggml.padding_token_id"])
    w.add_bos_token_id(vocab["tokenizer.ggml.cls_token_id"])  # [CLS]; llama.cpp reads BOS
    w.add_mask_token_id(vocab["tokenizer.ggml.mask_token_id"])
    return n_keep


def common_keys(w, name, n_ctx, n_embd, n_ff, n_layer, n_head, n_head_kv):
    w.add_name(name)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)


def decoder_layers(wt, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, qkv_bias, qk_norm,
                   post_norms):
    """Attention and gated FFN blocks of the llama/qwen/gemma family."""
    for i in range(n_layer):
        wt.vector(T.ATTN_NORM, i, n_embd, 1.0, 0.1)
        wt.matrix(T.ATTN_Q, i, n_embd, n_head * head_dim)
        wt.matrix(T.ATTN_K, i, n_embd, n_head_kv * head_dim)
        wt.matrix(T.ATTN_V, i, n_embd, n_head_kv * head_dim)
        if qkv_bias:
            wt.vector(T.ATTN_Q, i, n_head * head_dim, 0.0, 0.1, "bias")
            wt.vector(T.ATTN_K, i, n_head_kv * head_dim, 0.0, 0.1, "bias")
            wt.vector(T.ATTN_V, i, n_head_kv * head_dim, 0.0, 0.1, "bias")
        if qk_norm:
            wt.vector(T.ATTN_Q_NORM, i, head_dim, 1.0, 0.1)
            wt.vector(T.ATTN_K_NORM, i, head_dim, 1.0, 0.1)
        wt.matrix(T.ATTN_OUT, i, n_head * head_dim, n_embd)
        if post_norms:
            wt.vector(T.ATTN_POST_NORM, i, n_embd, 1.0, 0.1)
        wt.vector(T.FFN_NORM, i, n_embd, 1.0, 0.1)
        wt.matrix(T.FFN_GATE, i, n_embd, n_ff)
        wt.matrix(T.FFN_UP, i, n_embd, n_ff)
        wt.matrix(T.FFN_DOWN, i, n_ff, n_embd)
        if post_norms:
            wt.vector(T.FFN_POST_NORM, i, n_embd, 1.0, 0.1)


def make_llama(path, vocabs):
    w = gguf.GGUFWriter(path, "llama")
    n_embd, n_ff, n_layer, n_head, n_head_kv = 64, 128, 2, 4, 2
    head_dim = n_embd // n_head
    common_keys(w, "tiny-llama", 256, n_embd, n_ff, n_layer, n_head, n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    n_vocab = write_bpe_vocab(w, read_vocab(os.path.join(vocabs, "ggml-vocab-llama-bpe.gguf")),
                              510, "llama-bpe")
    w.add_vocab_size(n_vocab)
    wt = Weights(w, 1001, np.float32)
    wt.embedding(T.TOKEN_EMBD, n_vocab, n_embd)
    decoder_layers(wt, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, False, False, False)
    wt.vector(T.OUTPUT_NORM, None, n_embd, 1.0, 0.1)
    wt.matrix(T.OUTPUT, None, n_embd, n_vocab)
    return w


def make_qwen(path, vocabs, arch, yarn=False):
    w = gguf.GGUFWriter(path, arch)
    qwen3 = arch == "qwen3"
    n_embd, n_ff, n_layer, n_head, n_head_kv = 64, 128, 2, 4, 2
    head_dim = 32 if qwen3 else n_embd // n_head
    name = f"tiny-{arch}-yarn" if yarn else f"tiny-{arch}"
    common_keys(w, name, 256, n_embd, n_ff, n_layer, n_head, n_head_kv)
    if qwen3:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(1000000.0)
    if yarn:
        # YaRN as Qwen's long-context files have it: trained on 64 positions, stretched 4x to
        # the 256 of context_length; attn_factor (llama.cpp's rope_attn_factor) not 1 so that
        # it is checked too. The weights are tiny-qwen3's (same seed).
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(64)
        w.add_rope_scaling_attn_factors(0.9)
    w.add_layer_norm_rms_eps(1e-6)
    dtype = np.float32 if qwen3 else np.float16
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qwen3 else gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = write_bpe_vocab(w, read_vocab(os.path.join(vocabs, "ggml-vocab-qwen2.gguf")),
                              511, "qwen2")
    wt = Weights(w, 2002 if qwen3 else 2001, dtype)
    wt.embedding(T.TOKEN_EMBD, n_vocab, n_embd)
    decoder_layers(wt, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, not qwen3, qwen3, False)
    wt.vector(T.OUTPUT_NORM, None, n_embd, 1.0, 0.1)
    if qwen3:
        wt.matrix(T.OUTPUT, None, n_embd, n_vocab)
    return w


def make_gemma3(path, vocabs):
    w = gguf.GGUFWriter(path, "gemma3")
    n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim = 64, 128, 3, 4, 1, 32
    common_keys(w, "tiny-gemma3", 256, n_embd, n_ff, n_layer, n_head, n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_rope_freq_base_swa(10000.0)
    w.add_sliding_window(8)
    w.add_sliding_window_pattern([True, False, True])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = write_spm_vocab(w, read_vocab(os.path.join(vocabs, "ggml-vocab-llama-spm.gguf")),
                              512)
    wt = Weights(w, 3001, np.float16)
    # Gemma scales the input embeddings by sqrt(n_embd); keep them small so that the logits
    # through the tied output stay in a sensible range.
    wt.embedding(T.TOKEN_EMBD, n_vocab, n_embd, 0.25)
    decoder_layers(wt, n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, False, True, True)
    wt.vector(T.OUTPUT_NORM, None, n_embd, 1.0, 0.1)
    return w


def make_bert(path, vocabs):
    w = gguf.GGUFWriter(path, "bert")
    n_embd, n_ff, n_layer, n_head, n_ctx = 64, 128, 2, 4, 128
    common_keys(w, "tiny-bert", n_ctx, n_embd, n_ff, n_layer, n_head, n_head)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = write_wpm_vocab(w, read_vocab(os.path.join(vocabs, "ggml-vocab-bert-bge.gguf")),
                              1536)
    wt = Weights(w, 4001, np.float16)
    wt.embedding(T.TOKEN_EMBD, n_vocab, n_embd)
    # llama.cpp adds rows of these two to F32 activations directly, so they stay F32 (as
    # llama.cpp's converter keeps them).
    w.add_tensor(tensor_name(T.TOKEN_TYPES),
                 (wt.rng.standard_normal((2, n_embd)) * 0.5).astype(np.float32))
    w.add_tensor(tensor_name(T.POS_EMBD),
                 (wt.rng.standard_normal((n_ctx, n_embd)) * 0.5).astype(np.float32))
    wt.vector(T.TOKEN_EMBD_NORM, None, n_embd, 1.0, 0.1)
    wt.vector(T.TOKEN_EMBD_NORM, None, n_embd, 0.0, 0.1, "bias")
    for i in range(n_layer):
        for kind in (T.ATTN_Q, T.ATTN_K, T.ATTN_V, T.ATTN_OUT):
            wt.matrix(kind, i, n_embd, n_embd)
            wt.vector(kind, i, n_embd, 0.0, 0.1, "bias")
        wt.vector(T.ATTN_OUT_NORM, i, n_embd, 1.0, 0.1)
        wt.vector(T.ATTN_OUT_NORM, i, n_embd, 0.0, 0.1, "bias")
        wt.matrix(T.FFN_UP, i, n_embd, n_ff)
        wt.vector(T.FFN_UP, i, n_ff, 0.0, 0.1, "bias")
        wt.matrix(T.FFN_DOWN, i, n_ff, n_embd)
        wt.vector(T.FFN_DOWN, i, n_embd, 0.0, 0.1, "bias")
        wt.vector(T.LAYER_OUT_NORM, i, n_embd, 1.0, 0.1)
        wt.vector(T.LAYER_OUT_NORM, i, n_embd, 0.0, 0.1, "bias")
    return w


MAKERS = {
    "llama": make_llama,
    "qwen2": lambda p, v: make_qwen(p, v, "qwen2"),
    "qwen3": lambda p, v: make_qwen(p, v, "qwen3"),
    "qwen3-yarn": lambda p, v: make_qwen(p, v, "qwen3", yarn=True),
    "gemma3": make_gemma3,
    "bert": make_bert,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--vocab-dir", default=DEFAULT_VOCABS)
    ap.add_argument("--only", choices=sorted(MAKERS), action="append",
                    help="write only this architecture (repeatable)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for arch, make in MAKERS.items():
        if args.only and arch not in args.only:
            continue
        path = os.path.join(args.out, f"tiny-{arch}.gguf")
        w = make(path, args.vocab_dir)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
