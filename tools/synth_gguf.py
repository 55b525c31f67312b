#!/usr/bin/env python3
# Writes tiny random-weight GGUF models, one per architecture, with a real borrowed tokenizer, to check an
# engine's forward pass against llama.cpp: the output is gibberish, but both must give the same gibberish.
"""
Every model has n_embd 128, 4 query heads of 32 (2 KV heads where the architecture allows), n_ff 256,
MoE with 8 experts of 128 (2 used), context 512, and the vocabulary of the tokenizer it borrows
(SmolLM2's by default, 49152 tokens). The same arguments always give the same file (the weights are
one numpy stream from the seed). A model takes ~2 s to write and runs in a fraction of a second.

The weights are scaled so that greedy decoding gives varied tokens, decided by the context (a wrong
rope base, window or routing changes them within a few tokens) and not by rounding: the logits have
a std of ~10 over the vocabulary, and every matrix has unit gain, so small numeric differences are
not amplified from layer to layer. Output rows of tokens that are not printable ASCII (control
tokens, bytes, newlines) are tiny, so those are never generated and the continuation compares as
plain text. The output head is untied (--tied writes none, where llama.cpp allows it; random tied
models fall into loops of one token more often).

Matrices are f16 by default. With q8_0 (and the other block types) llama.cpp quantizes the activations
of each matmul to 8 bits: a difference of 1e-4 between two engines then flips roundings and grows to
~1e-2, enough to part greedy runs of a random model. Use the quantized types to test the formats, f16
or f32 to test the architectures. K-quants (q4_k, q6_k) need rows of 256 values: matrices with shorter
rows fall back to q5_0 / q8_0, as llama-quantize does; --n-embd 256 puts every matrix in the K type.
"""
import argparse
import struct
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT, GGUFValueType as VT

# The project's test model (scripts/fetch-models.sh puts it in models/), found from the current folder.
DEFAULT_TOKENIZER = Path(__import__("os").environ.get("TESSERA_MODELS", "models")) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class Dims:
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32
    n_ff: int = 256
    n_ctx: int = 512
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 128

    @property
    def q_dim(self):
        return self.n_head * self.head_dim


# --------------------------------------------------------------------------------------------------
# Tensor types. gguf-py quantizes the legacy block types; the two K-quants are done here with a plain
# min/max fit per sub-block (not llama.cpp's search: only validity matters, as both engines
# dequantize the same bytes).
# --------------------------------------------------------------------------------------------------

TYPES = {
    "f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1,
    "q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q4_k": QT.Q4_K, "q6_k": QT.Q6_K,
}
K_FALLBACK = {QT.Q4_K: QT.Q5_0, QT.Q6_K: QT.Q8_0}
FILE_TYPE = {  # general.file_type (llama_ftype) of a file whose matrices are all of one type
    QT.F32: 0, QT.F16: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q8_0: 7, QT.Q5_0: 8, QT.Q5_1: 9,
    QT.Q4_K: 15, QT.Q6_K: 18, QT.BF16: 32,
}


def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(x):
    """[n, 256] float32 -> [n, 144] uint8, block_q4_K: d, dmin, scales[12], qs[128];
    value = d*sc*q - dmin*m with q in 0..15 and 6-bit sc, m per sub-block of 32."""
    sub = x.reshape(-1, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0.0)
    scale, mn = (sub.max(axis=2) - lo) / 15.0, -lo
    d, dmin = _f16(scale.max(axis=1) / 63.0), _f16(mn.max(axis=1) / 63.0)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.where(df > 0, np.rint(scale / df), 0).clip(0, 63).astype(np.uint8)
        lm = np.where(dminf > 0, np.rint(mn / dminf), 0).clip(0, 63).astype(np.uint8)
        step = (df * ls)[:, :, None]
        q = np.where(step > 0, np.rint((sub + (dminf * lm)[:, :, None]) / step), 0)
    q = q.clip(0, 15).astype(np.uint8)
    scales = np.zeros((len(x), 12), np.uint8)
    scales[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(len(x), 128)
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), scales, qs], axis=1)


def quantize_q6_k(x):
    """[n, 256] float32 -> [n, 210] uint8, block_q6_K: ql[128], qh[64], scales[16], d;
    value = d*sc*(q-32) with q in 0..63 and an 8-bit sc per sub-block of 16."""
    sub = x.reshape(-1, 16, 16)
    s = np.abs(sub).max(axis=2) / 31.0
    d = _f16(s.max(axis=1) / 127.0)
    df = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df > 0, np.rint(s / df), 0).clip(0, 127).astype(np.int8)
        step = (df * sc)[:, :, None]
        q = np.where(step > 0, np.rint(sub / step), 0)
    q = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)   # [block, half, quarter, l]
    ql = np.concatenate([q[:, :, 0] & 0xF | (q[:, :, 2] & 0xF) << 4,
                         q[:, :, 1] & 0xF | (q[:, :, 3] & 0xF) << 4], axis=2).reshape(len(x), 128)
    qh = (q[:, :, 0] >> 4 | (q[:, :, 1] >> 4) << 2 | (q[:, :, 2] >> 4) << 4 | (q[:, :, 3] >> 4) << 6).reshape(len(x), 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(-1, 2)], axis=1)


def encode(arr, qtype):
    """float32 array (rows last) -> (array for GGUFWriter.add_tensor, its raw_dtype or None)."""
    if qtype == QT.F32:
        return arr.astype(np.float32), None
    if qtype == QT.F16:
        return arr.astype(np.float16), None
    if qtype in (QT.Q4_K, QT.Q6_K):
        q = (quantize_q4_k if qtype == QT.Q4_K else quantize_q6_k)(arr.reshape(-1, 256).astype(np.float32))
        return q.reshape(*arr.shape[:-1], -1), qtype
    return gguf.quants.quantize(arr.astype(np.float32), qtype), qtype


# --------------------------------------------------------------------------------------------------
# The tokenizer: every tokenizer.* key of a real model, copied as is.
# --------------------------------------------------------------------------------------------------

_SCALAR = {VT.UINT8: "<B", VT.INT8: "<b", VT.UINT16: "<H", VT.INT16: "<h", VT.UINT32: "<I", VT.INT32: "<i",
           VT.FLOAT32: "<f", VT.BOOL: "<?", VT.UINT64: "<Q", VT.INT64: "<q", VT.FLOAT64: "<d"}


def read_kv(path, prefix):
    """The metadata of a GGUF file whose keys start with prefix: [(key, value, type, element type)].
    (gguf.GGUFReader parses every field and tensor, and takes seconds on a big vocabulary.)"""
    with open(path, "rb") as f:
        head = f.read(24)
        if head[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        n_kv = struct.unpack_from("<Q", head, 16)[0]
        buf = f.read(64 << 20)  # the metadata comes first; 64 MiB holds any tokenizer
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode("utf-8", errors="surrogateescape")
        pos += n
        return s

    out = []
    for _ in range(n_kv):
        key, t = string(), VT(take("<I"))
        if t == VT.ARRAY:
            et, n = VT(take("<I")), take("<Q")
            if et == VT.STRING:
                value = [string() for _ in range(n)]
            else:
                dt = np.dtype(_SCALAR[et])
                value = np.frombuffer(buf, dt, n, pos).tolist()
                pos += n * dt.itemsize
        else:
            et, value = None, string() if t == VT.STRING else take(_SCALAR[t])
        if key.startswith(prefix):
            out.append((key, value, t, et))
    return out


def _gpt2_byte_decoder():
    """The inverse of GPT-2's bytes_to_unicode: token characters -> bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Tokenizer:
    _BYTES = _gpt2_byte_decoder()

    def __init__(self, path):
        self.fields = read_kv(path, "tokenizer.")
        get = {k: v for k, v, _, _ in self.fields}
        self.tokens = get["tokenizer.ggml.tokens"]
        types = get.get("tokenizer.ggml.token_type", [1] * len(self.tokens))
        printable = self._gpt2_printable if get["tokenizer.ggml.model"] == "gpt2" else self._spm_printable
        self.printable = np.array([t == 1 and printable(s) for s, t in zip(self.tokens, types)])

    @classmethod
    def _gpt2_printable(cls, piece):
        return len(piece) > 0 and all(0x20 <= cls._BYTES.get(c, 0) < 0x7F for c in piece)

    @staticmethod
    def _spm_printable(piece):  # SentencePiece: "\u2581" is a space, <0xNN> are bytes
        return len(piece) > 0 and not piece.startswith("<0x") and all(0x20 <= ord(c) < 0x7F for c in piece.replace("\u2581", " "))

    def write(self, w):
        for key, value, vtype, sub_type in self.fields:
            w.add_key_value(key, value, vtype, sub_type=sub_type)


# --------------------------------------------------------------------------------------------------
# The model being written: keys, and tensors drawn in order from one seeded stream.
# --------------------------------------------------------------------------------------------------

class Synth:
    def __init__(self, arch, seed, qtype, tokenizer, dims, description, tied=False):
        self.arch, self.qtype, self.tok, self.d, self.tied = arch, qtype, tokenizer, dims, tied
        self.description = description
        self.rng = np.random.default_rng(seed)
        self.kv = {}
        self.tensors = []  # (name, data, raw_dtype)

    # -- metadata --
    def key(self, suffix, value):
        """key("block_count", 2) writes ARCH.block_count (bool, int -> uint32, float -> float32, str)."""
        self.kv[f"{self.arch}.{suffix}"] = value

    def common_keys(self, rope_base=10000.0, eps=1e-5, n_ff=None, head_dim_keys=False):
        d = self.d
        self.key("context_length", d.n_ctx)
        self.key("embedding_length", d.n_embd)
        self.key("block_count", d.n_layer)
        self.key("feed_forward_length", n_ff or d.n_ff)
        self.key("attention.head_count", d.n_head)
        self.key("attention.head_count_kv", d.n_head_kv)
        self.key("attention.layer_norm_rms_epsilon", eps)
        self.key("rope.freq_base", rope_base)
        self.key("rope.dimension_count", d.head_dim)
        self.key("vocab_size", len(self.tok.tokens))
        if head_dim_keys:
            self.key("attention.key_length", d.head_dim)
            self.key("attention.value_length", d.head_dim)

    def moe_keys(self):
        self.key("expert_count", self.d.n_expert)
        self.key("expert_used_count", self.d.n_expert_used)
        self.key("expert_feed_forward_length", self.d.n_ff_exp)

    # -- tensors --
    def normal(self, shape, std):
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def add(self, name, arr, matrix=True, qtype=None):
        """Matrices in the file's type or qtype (F16 if their rows do not fit its blocks); vectors
        in F32."""
        qtype = (qtype or self.qtype) if matrix and arr.ndim >= 2 else QT.F32
        if qtype in K_FALLBACK and arr.shape[-1] % 256:
            qtype = K_FALLBACK[qtype]
        if qtype not in (QT.F32, QT.F16, QT.BF16) and arr.shape[-1] % 32:
            qtype = QT.F16
        data, raw = encode(arr, qtype)
        self.tensors.append((name, data, raw))

    def matrix(self, name, n_out, n_in, lead=()):
        """A weight for y = W x: numpy shape (*lead, n_out, n_in), i.e. GGUF ne = [n_in, n_out, *lead]."""
        self.add(name, self.normal((*lead, n_out, n_in), 1 / np.sqrt(n_in)))

    def norm(self, name, n, scale=1.0):
        self.add(name, scale * (1.0 + self.normal((n,), 0.2)))

    def bias(self, name, shape, std=0.3):
        self.add(name, self.normal(shape, std), matrix=False)

    def f32(self, name, arr):
        self.add(name, np.asarray(arr, dtype=np.float32), matrix=False)

    # -- the usual blocks --
    def embeddings(self, can_tie=True, tied_std=0.05):
        """token_embd, output_norm and output (no output with --tied): logits of std ~10. Output rows
        of tokens that are not printable ASCII are scaled by 0.05, so that they never win the argmax.
        A tied embedding is small (std 0.05) so that the residual stream is mostly what the layers
        add, and the output norm large to keep the logits peaked."""
        if self.tied and not can_tie:
            raise SystemExit(f"--tied: llama.cpp's {self.arch} loader requires output.weight")
        n_vocab, n_embd = len(self.tok.tokens), self.d.n_embd
        mask = np.where(self.tok.printable, 1.0, 0.05).astype(np.float32)[:, None]
        if self.tied:
            self.add("token_embd.weight", self.normal((n_vocab, n_embd), tied_std) * mask)
            self.norm("output_norm.weight", n_embd, scale=10 / (tied_std * np.sqrt(n_embd)))
        else:
            self.add("token_embd.weight", self.normal((n_vocab, n_embd), 1.0))
            self.norm("output_norm.weight", n_embd)
            self.add("output.weight", self.normal((n_vocab, n_embd), 1.0) * mask)

    def attention(self, i, qkv_bias=False, qk_norm=False, fused_qkv=False, n_head_kv=None):
        d, p = self.d, f"blk.{i}."
        kv_dim = (n_head_kv or d.n_head_kv) * d.head_dim
        if fused_qkv:
            self.matrix(p + "attn_qkv.weight", d.q_dim + 2 * kv_dim, d.n_embd)  # rows: q, k, v
        else:
            self.matrix(p + "attn_q.weight", d.q_dim, d.n_embd)
            self.matrix(p + "attn_k.weight", kv_dim, d.n_embd)
            self.matrix(p + "attn_v.weight", kv_dim, d.n_embd)
        if qkv_bias:
            self.bias(p + "attn_q.bias", (d.q_dim,))
            self.bias(p + "attn_k.bias", (kv_dim,))
            self.bias(p + "attn_v.bias", (kv_dim,))
        if qk_norm:
            self.norm(p + "attn_q_norm.weight", d.head_dim)
            self.norm(p + "attn_k_norm.weight", d.head_dim)
        self.matrix(p + "attn_output.weight", d.n_embd, d.q_dim)

    def ffn(self, i, n_ff=None, suffix=""):
        """Gated FFN: ffn_gate, ffn_up, ffn_down (+ suffix, e.g. "_shexp" for a shared expert)."""
        n_ff, p = n_ff or self.d.n_ff, f"blk.{i}."
        self.matrix(p + f"ffn_gate{suffix}.weight", n_ff, self.d.n_embd)
        self.matrix(p + f"ffn_up{suffix}.weight", n_ff, self.d.n_embd)
        self.matrix(p + f"ffn_down{suffix}.weight", self.d.n_embd, n_ff)

    def experts(self, i, fused_gate_up=False, qtype=None):
        """Router ffn_gate_inp (F32, as converters leave it; logits of std ~4, so the top-k choice is
        clear) and the stacked experts. With fused_gate_up, the same gate and up values are written as
        one ffn_gate_up_exps [n_embd, 2*n_ff_exp, n_expert], gate rows first. qtype: the experts' type
        (the file's by default)."""
        d, p = self.d, f"blk.{i}."
        self.f32(p + "ffn_gate_inp.weight", self.normal((d.n_expert, d.n_embd), 4 / np.sqrt(d.n_embd)))
        gate = self.normal((d.n_expert, d.n_ff_exp, d.n_embd), 1 / np.sqrt(d.n_embd))
        up = self.normal((d.n_expert, d.n_ff_exp, d.n_embd), 1 / np.sqrt(d.n_embd))
        if fused_gate_up:
            self.add(p + "ffn_gate_up_exps.weight", np.concatenate([gate, up], axis=1), qtype=qtype)
        else:
            self.add(p + "ffn_gate_exps.weight", gate, qtype=qtype)
            self.add(p + "ffn_up_exps.weight", up, qtype=qtype)
        down = self.normal((d.n_expert, d.n_embd, d.n_ff_exp), 1 / np.sqrt(d.n_ff_exp))
        self.add(p + "ffn_down_exps.weight", down, qtype=qtype)

    def write(self, path):
        w = gguf.GGUFWriter(str(path), self.arch)
        # general.name must not name the architecture: llama.cpp's vocab loader changes token
        # attributes when it contains "phi3" (and then wants Phi-3's own special tokens)
        w.add_name("synthetic test model")
        w.add_description(self.description)
        w.add_file_type(FILE_TYPE[self.qtype])
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for k, v in self.kv.items():
            if isinstance(v, bool):
                w.add_bool(k, v)
            elif isinstance(v, int):
                w.add_uint32(k, v)
            elif isinstance(v, float):
                w.add_float32(k, v)
            else:
                w.add_string(k, v)
        self.tok.write(w)
        for name, data, raw in self.tensors:
            w.add_tensor(name, data, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def llama3_rope_factors(head_dim, base, factor=32.0, low=1.0, high=4.0, orig_ctx=64):
    """rope_freqs.weight as convert_hf_to_gguf.py computes it for rope_type "llama3". Llama 3.2 has
    factor 32 and original context 8192; here the original context is 64, so that the factors change
    the rotations within a few dozen positions."""
    out = []
    for f in 1.0 / base ** (np.arange(0, head_dim, 2) / head_dim):
        wavelen = 2 * np.pi / f
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


# --------------------------------------------------------------------------------------------------
# Architectures. Each follows llama.cpp's src/models/<arch>.cpp: the keys its load_arch_hparams reads,
# the tensors its load_arch_tensors requires. The first docstring line is the --help entry.
# --------------------------------------------------------------------------------------------------

def build_llama(s: Synth):
    """Llama 2 style: RMSNorm, rope NORM (adjacent pairs), GQA, SwiGLU."""
    s.common_keys()
    s.embeddings()
    for i in range(s.d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", s.d.n_embd)
        s.attention(i)
        s.norm(f"blk.{i}.ffn_norm.weight", s.d.n_embd)
        s.ffn(i)


def build_llama3(s: Synth):
    """Llama 3.1/3.2: llama with rope base 500000 and rope_freqs.weight (llama3 rope scaling).
    rope_freqs holds a divisor per rotary frequency: it is how GGUF stores rope_scaling
    {"rope_type": "llama3"}, converters write no rope.scaling keys for it."""
    s.common_keys(rope_base=500000.0, head_dim_keys=True)
    s.embeddings()
    s.f32("rope_freqs.weight", llama3_rope_factors(s.d.head_dim, 500000.0))
    for i in range(s.d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", s.d.n_embd)
        s.attention(i)
        s.norm(f"blk.{i}.ffn_norm.weight", s.d.n_embd)
        s.ffn(i)


def build_llama_yarn(s: Synth):
    """llama with YaRN rope scaling (factor 4, original context 64: a 256-token context uses it)."""
    build_llama(s)
    s.key("rope.scaling.type", "yarn")
    s.key("rope.scaling.factor", 4.0)
    s.key("rope.scaling.original_context_length", 64)


def build_qwen2(s: Synth):
    """Qwen2/2.5: q/k/v biases, rope NEOX (halves), base 1e6, eps 1e-6."""
    s.common_keys(rope_base=1000000.0, eps=1e-6)
    s.embeddings()
    for i in range(s.d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", s.d.n_embd)
        s.attention(i, qkv_bias=True)
        s.norm(f"blk.{i}.ffn_norm.weight", s.d.n_embd)
        s.ffn(i)


def build_qwen3(s: Synth):
    """Qwen3: RMSNorm of each q and k head before rope, rope NEOX, base 1e6."""
    s.common_keys(rope_base=1000000.0, eps=1e-6, head_dim_keys=True)
    s.embeddings()
    for i in range(s.d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", s.d.n_embd)
        s.attention(i, qk_norm=True)
        s.norm(f"blk.{i}.ffn_norm.weight", s.d.n_embd)
        s.ffn(i)


def _qwen3moe(s: Synth, fused):
    s.common_keys(rope_base=1000000.0, eps=1e-6, head_dim_keys=True)
    s.moe_keys()
    s.embeddings()
    for i in range(s.d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", s.d.n_embd)
        s.attention(i, qk_norm=True)
        s.norm(f"blk.{i}.ffn_norm.weight", s.d.n_embd)
        s.experts(i, fused_gate_up=fused)


def build_qwen3moe(s: Synth):
    """Qwen3-MoE: qwen3 attention; softmax router, top 2 of 8 experts, weights renormalised."""
    _qwen3moe(s, fused=False)


def build_qwen3moe_fused(s: Synth):
    """qwen3moe with fused ffn_gate_up_exps (llama.cpp runs only its unfused twin, same seed).
    The fused tensor is what convert_hf_to_gguf.py --fuse-gate-up-exps writes. llama.cpp's qwen3moe loader does not take it (its fused-tensor loading is only in cohere2moe,
    deepseek2, granite_swa, hy_v3, qwen35moe, qwen3next): the reference is llama.cpp on the qwen3moe
    model of the same seed, which has the very same weights in two tensors (LLAMA_CPP_TWIN)."""
    _qwen3moe(s, fused=True)


def build_hy_v3(s: Synth):
    """Hunyuan v3: fused ffn_gate_up_exps, sigmoid router with selection bias, shared expert.
    The simplest architecture whose llama.cpp loader takes ffn_gate_up_exps: qwen3 attention; MoE
    with a sigmoid router, an expert selection bias (exp_probs_b, used to choose, not to weigh), the k
    weights normalised then scaled, plus an always-on shared expert."""
    d = s.d
    s.common_keys(rope_base=1000000.0, eps=1e-6, head_dim_keys=True)
    s.moe_keys()
    s.key("expert_shared_feed_forward_length", d.n_ff_exp)
    s.key("expert_gating_func", 2)  # sigmoid
    s.key("expert_weights_norm", True)
    s.key("expert_weights_scale", 2.5)
    s.embeddings()
    for i in range(d.n_layer):
        s.norm(f"blk.{i}.attn_norm.weight", d.n_embd)
        s.attention(i, qk_norm=True)
        s.norm(f"blk.{i}.ffn_norm.weight", d.n_embd)
        s.experts(i, fused_gate_up=True)
        s.bias(f"blk.{i}.exp_probs_b", (d.n_expert,), std=0.5)
        s.ffn(i, n_ff=d.n_ff_exp, suffix="_shexp")


def build_phi3(s: Synth):
    """Phi-3: fused attn_qkv, fused ffn_up = [gate; up] of 2*n_ff rows, rope NEOX.
    Real files carry attention.sliding_window (2047); llama.cpp ignores it for phi3."""
    d = s.d
    s.common_keys()
    s.key("attention.sliding_window", 2047)
    s.embeddings()
    for i in range(d.n_layer):
        p = f"blk.{i}."
        s.norm(p + "attn_norm.weight", d.n_embd)
        s.attention(i, fused_qkv=True)
        s.norm(p + "ffn_norm.weight", d.n_embd)
        s.matrix(p + "ffn_up.weight", 2 * d.n_ff, d.n_embd)
        s.matrix(p + "ffn_down.weight", d.n_embd, d.n_ff)


def build_phi3_longrope(s: Synth):
    """Phi-3.5: phi3 with LongRoPE: rope_factors_short/long and rope.scaling.attn_factor.
    llama.cpp uses the long factors when the context exceeds rope.scaling.original_context_length
    (4096 in the real models, 64 here, so that a 256-token context takes the long ones) and
    multiplies rope's cosines and sines by the attention factor (1.19 in Phi-3.5-mini)."""
    build_phi3(s)
    half = s.d.head_dim // 2
    s.key("rope.scaling.attn_factor", 1.19)
    s.key("rope.scaling.original_context_length", 64)
    s.f32("rope_factors_short.weight", 1.0 + np.arange(half, dtype=np.float32) / half)
    s.f32("rope_factors_long.weight", 1.0 + 8.0 * (np.arange(half, dtype=np.float32) / half) ** 2)


def build_gemma2(s: Synth):
    """Gemma 2: soft-capped attention and final logits, sliding window on every other layer.
    Embeddings scaled by sqrt(n_embd) and tied (llama.cpp's gemma2 loader takes no output.weight),
    post-attention and post-FFN norms, GELU (tanh) gated FFN, rope NEOX. 4 layers: the even ones use a
    16-token sliding window (4096 in the real models); attention logits are capped at 4 (50 in the real
    models, whose scores are larger) so that the cap matters, final logits at 30 (as the real ones)."""
    d = s.d
    s.tied = True
    s.common_keys(eps=1e-6, head_dim_keys=True)
    s.key("attention.sliding_window", 16)
    s.key("attn_logit_softcapping", 4.0)
    s.key("final_logit_softcapping", 30.0)
    s.embeddings(tied_std=0.05 / np.sqrt(d.n_embd))  # gemma multiplies the embeddings by sqrt(n_embd)
    for i in range(d.n_layer):
        p = f"blk.{i}."
        s.norm(p + "attn_norm.weight", d.n_embd)
        s.attention(i)
        s.norm(p + "post_attention_norm.weight", d.n_embd)
        s.norm(p + "ffn_norm.weight", d.n_embd)
        s.ffn(i)
        s.norm(p + "post_ffw_norm.weight", d.n_embd)


def build_gemma3(s: Synth):
    """Gemma 3 (4B+): 5 sliding-window layers in 6, linear rope scaling x8 on the global ones.
    Embeddings scaled by sqrt(n_embd), q/k norms, post-attention and post-FFN norms, GELU (tanh) gated
    FFN, rope NEOX. 6 layers: the first 5 use a 16-token sliding window (1024 in the real models) and
    rope base 10000; the 6th attends globally with base 1e6 and linear rope scaling 8. Norm weights are
    stored with Gemma's +1 already added, as the converter writes them."""
    d = s.d
    s.common_keys(rope_base=1000000.0, eps=1e-6, head_dim_keys=True)
    s.key("rope.scaling.type", "linear")
    s.key("rope.scaling.factor", 8.0)
    s.key("attention.sliding_window", 16)
    s.embeddings(tied_std=0.05 / np.sqrt(d.n_embd))  # gemma multiplies the embeddings by sqrt(n_embd)
    for i in range(d.n_layer):
        p = f"blk.{i}."
        s.norm(p + "attn_norm.weight", d.n_embd)
        s.attention(i, qk_norm=True)
        s.norm(p + "post_attention_norm.weight", d.n_embd)
        s.norm(p + "ffn_norm.weight", d.n_embd)
        s.ffn(i)
        s.norm(p + "post_ffw_norm.weight", d.n_embd)


def build_dots1(s: Synth):
    """dots.llm1: sigmoid router with selection bias, weights normalised and scaled, shared expert.
    qwen3 attention without GQA (llama.cpp sizes k and v by n_head); MoE layers with a sigmoid router,
    an expert selection bias (exp_probs_b.bias), the k weights normalised then scaled by 2.5, plus one
    shared expert. The simplest such MoE in llama.cpp without MLA."""
    d = s.d
    s.common_keys(eps=1e-6, head_dim_keys=True)
    s.moe_keys()
    s.key("leading_dense_block_count", 1)
    s.key("expert_shared_count", 1)
    s.key("expert_gating_func", 2)  # sigmoid
    s.key("expert_weights_norm", True)
    s.key("expert_weights_scale", 2.5)
    s.embeddings(can_tie=False)
    for i in range(d.n_layer):
        p = f"blk.{i}."
        s.norm(p + "attn_norm.weight", d.n_embd)
        s.attention(i, qk_norm=True, n_head_kv=d.n_head)
        s.norm(p + "ffn_norm.weight", d.n_embd)
        if i < 1:
            s.ffn(i)
        else:
            s.experts(i)
            s.bias(p + "exp_probs_b.bias", (d.n_expert,), std=0.5)
            s.ffn(i, n_ff=d.n_ff_exp, suffix="_shexp")


def _gpt_oss(s: Synth, fused=False, expert_type=None):
    d = s.d
    s.common_keys(rope_base=150000.0, n_ff=d.n_ff_exp, head_dim_keys=True)
    s.moe_keys()
    s.key("attention.sliding_window", 16)
    s.key("rope.scaling.type", "yarn")
    s.key("rope.scaling.factor", 32.0)
    s.key("rope.scaling.original_context_length", 64)
    s.embeddings(can_tie=False)
    for i in range(d.n_layer):
        p = f"blk.{i}."
        s.norm(p + "attn_norm.weight", d.n_embd)
        s.attention(i, qkv_bias=True)
        s.bias(p + "attn_output.bias", (d.n_embd,))
        s.bias(p + "attn_sinks.weight", (d.n_head,), std=1.0)
        s.norm(p + "post_attention_norm.weight", d.n_embd)
        s.experts(i, fused_gate_up=fused, qtype=expert_type)
        s.bias(p + "ffn_gate_inp.bias", (d.n_expert,), std=1.0)
        gate_b, up_b = s.normal((d.n_expert, d.n_ff_exp), 0.3), s.normal((d.n_expert, d.n_ff_exp), 0.3)
        if fused:
            s.add(p + "ffn_gate_up_exps.bias", np.concatenate([gate_b, up_b], axis=1), matrix=False)
        else:
            s.add(p + "ffn_gate_exps.bias", gate_b, matrix=False)
            s.add(p + "ffn_up_exps.bias", up_b, matrix=False)
        s.bias(p + "ffn_down_exps.bias", (d.n_expert, d.n_embd))


def build_gpt_oss(s: Synth):
    """gpt-oss: attention sinks, sliding window, YaRN, delayed-softmax routing, swiglu_oai.
    Attention with q/k/v/o biases and a learned sink logit per head; even layers use a 16-token
    sliding window (128 in the real models), odd ones attend globally; YaRN rope (factor 32, the
    original context scaled down to 64 so that it matters); a biased router whose top-k is taken on
    the raw logits before a softmax over the k chosen; experts with biases and the clamped swiglu_oai
    activation (alpha 1.702, limit 7)."""
    _gpt_oss(s)


def build_gpt_oss_mxfp4(s: Synth):
    """gpt-oss with its experts in MXFP4, as the released files store them (the rest in --type)."""
    _gpt_oss(s, expert_type=QT.MXFP4)


def build_gpt_oss_fused(s: Synth):
    """gpt-oss with fused ffn_gate_up_exps and its fused bias (llama.cpp runs only its unfused twin).
    llama.cpp's gpt-oss loader takes only the separate tensors: the reference is llama.cpp on the
    gpt-oss model of the same seed, which has the very same weights and biases (LLAMA_CPP_TWIN)."""
    _gpt_oss(s, fused=True)


# name: (general.architecture, builder, changes to Dims)
ARCHS = {
    "llama":          ("llama",    build_llama,          {}),
    "llama3":         ("llama",    build_llama3,         {}),
    "llama-yarn":     ("llama",    build_llama_yarn,     {}),
    "qwen2":          ("qwen2",    build_qwen2,          {}),
    "qwen3":          ("qwen3",    build_qwen3,          {}),
    "qwen3moe":       ("qwen3moe", build_qwen3moe,       {}),
    "qwen3moe-fused": ("qwen3moe", build_qwen3moe_fused, {}),
    "hy_v3":          ("hy_v3",    build_hy_v3,          {}),
    "phi3":           ("phi3",     build_phi3,           {}),
    "phi3-longrope":  ("phi3",     build_phi3_longrope,  {}),
    "gemma2":         ("gemma2",   build_gemma2,         {"n_layer": 4}),
    "gemma3":         ("gemma3",   build_gemma3,         {"n_layer": 6}),
    "dots1":          ("dots1",    build_dots1,          {"n_layer": 3, "n_head_kv": 4}),
    "gpt-oss":        ("gpt-oss",  build_gpt_oss,        {}),
    "gpt-oss-mxfp4":  ("gpt-oss",  build_gpt_oss_mxfp4,  {}),
    "gpt-oss-fused":  ("gpt-oss",  build_gpt_oss_fused,  {}),
}

# Models this llama.cpp cannot load -> the model of the same seed with the same weights in a form it
# loads: llama.cpp's output on the second is the reference for the first.
LLAMA_CPP_TWIN = {"qwen3moe-fused": "qwen3moe", "gpt-oss-fused": "gpt-oss"}


def make(arch, seed, out, qtype=QT.F16, tokenizer=DEFAULT_TOKENIZER, n_embd=None, tied=False, n_layer=None,
         n_expert=None, n_expert_used=None):
    gguf_arch, build, changes = ARCHS[arch]
    dims = replace(Dims(), **changes)
    if n_embd:
        dims = replace(dims, n_embd=n_embd, head_dim=n_embd // dims.n_head, n_ff=2 * n_embd, n_ff_exp=n_embd)
    sizes = {"n_layer": n_layer, "n_expert": n_expert, "n_expert_used": n_expert_used}
    dims = replace(dims, **{k: v for k, v in sizes.items() if v})
    args = f"--arch {arch} --seed {seed} --type {qtype.name.lower()}" + (f" --n-embd {n_embd}" if n_embd else "") + (" --tied" if tied else "")
    args += "".join(f" --{k.replace('_', '-')} {v}" for k, v in sizes.items() if v)
    s = Synth(gguf_arch, seed, qtype, Tokenizer(tokenizer), dims, "synth_gguf.py " + args, tied)
    build(s)
    s.write(out)


def main():
    listing = "\n".join(f"  {name:15s} {build.__doc__.splitlines()[0]}" for name, (_, build, _) in ARCHS.items())
    ap = argparse.ArgumentParser(
        description="Write a tiny random-weight GGUF model of one architecture, to compare an engine's\n"
                    "greedy output with llama.cpp's.\n\n" + __doc__.strip().split("\n\n")[0],
        epilog=f"architectures:\n{listing}\n\nexample: synth_gguf.py --arch qwen3 --seed 1 --out /tmp/qwen3.gguf\n"
               "then:    llama-completion -m /tmp/qwen3.gguf -p 'Once upon a time' -n 24 --temp 0 -no-cnv",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=ARCHS, metavar="ARCH", help="architecture (list below)")
    ap.add_argument("--seed", type=int, required=True, help="weights seed: the same arguments give the same file")
    ap.add_argument("--out", required=True, help="the .gguf file to write")
    ap.add_argument("--type", default="f16", choices=TYPES, help="type of the matrices (default f16; see the file header)")
    ap.add_argument("--tied", action="store_true", help="no output.weight: the output head is token_embd")
    ap.add_argument("--n-embd", type=int, metavar="N", help="n_embd instead of 128 (head dim N/4, n_ff 2N, n_ff_exp N); 256 for K-quants throughout")
    ap.add_argument("--n-layer", type=int, metavar="N", help="blocks (default 2; some architectures more)")
    ap.add_argument("--n-expert", type=int, metavar="N", help="experts of a MoE architecture (default 8)")
    ap.add_argument("--n-expert-used", type=int, metavar="N", help="experts used per token (default 2)")
    ap.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER), help="GGUF to copy tokenizer.* from (default: SmolLM2-135M)")
    a = ap.parse_args()
    if not Path(a.tokenizer).is_file():
        sys.exit(f"tokenizer model not found: {a.tokenizer} (pass --tokenizer)")
    make(a.arch, a.seed, a.out, TYPES[a.type], a.tokenizer, a.n_embd, a.tied, a.n_layer, a.n_expert, a.n_expert_used)


if __name__ == "__main__":
    main()
