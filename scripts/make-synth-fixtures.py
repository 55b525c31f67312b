#!/usr/bin/env python3
"""Writes tests/fixtures/synth.jsonl: llama.cpp's greedy tokens and top-10 logits on the small
random-weight models tools/synth_gguf.py makes, one per architecture, for the architecture tests.

The reference is llama.cpp as the llama-cpp-python 0.3.36 sdist vendors it, built from source
(see tests/fixtures/README.md) and driven through its Python binding: the prompt is decoded in one
batch, then one token at a time, always taking the top logit (greedy, not stopped at
end-of-generation). Flash attention and the f16 KV cache are llama.cpp's defaults.

    python3 scripts/make-synth-fixtures.py            # every architecture in ARCHS
    python3 scripts/make-synth-fixtures.py qwen2      # only these (the others' lines are kept)

The models are written to a temporary folder and never committed: the tests rebuild them with the
same arguments (the same arguments always give the same file).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/fixtures/synth.jsonl"
# (synth_gguf.py architecture, seed, type): the models the tests check.
ARCHS = [
    ("llama", 1, "f16"),
    ("llama3", 1, "f16"),
    ("llama-yarn", 1, "f16"),
    ("qwen2", 1, "f16"),
    ("qwen3", 1, "f16"),
    ("phi3", 1, "f16"),
    ("phi3-longrope", 1, "f16"),
    ("qwen3moe", 1, "f16"),
    ("qwen3moe-fused", 1, "f16"),
    ("dots1", 1, "f16"),
    ("gemma2", 1, "f16"),
    ("gemma3", 1, "f16"),
    ("gpt-oss", 1, "f16"),
    ("gpt-oss-mxfp4", 1, "f16"),
    ("gpt-oss-fused", 1, "f16"),
]
PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):\n"]
N_GEN = 32


# Models this llama.cpp cannot load -> the model of the same seed with the same weights in a form
# it loads (tools/synth_gguf.py's LLAMA_CPP_TWIN): llama.cpp's output on the twin is the reference.
TWIN = {"qwen3moe-fused": "qwen3moe", "gpt-oss-fused": "gpt-oss"}


def synth(arch, seed, qtype, out):
    subprocess.run([sys.executable, str(ROOT / "tools/synth_gguf.py"), "--arch", arch, "--seed",
                    str(seed), "--type", qtype, "--out", str(out)], check=True, cwd=ROOT)


def last_logits(llm):
    """The logits of the last decoded position (the binding keeps none of its own)."""
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)


def reference(path, arch, seed, qtype):
    from llama_cpp import Llama

    # flash_attn=True: the binding defaults to off, llama.cpp's own tools to on (auto) on the CPU.
    llm = Llama(model_path=str(path), n_ctx=256, n_batch=256, n_threads=2, flash_attn=True,
                verbose=False)
    lines = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(ids)
        logits = last_logits(llm)
        top = np.argsort(-logits, kind="stable")[:10]
        lse = float(np.log(np.exp(logits - logits.max()).sum()) + logits.max())
        gen = []
        for _ in range(N_GEN):
            tok = int(np.argmax(last_logits(llm)))
            gen.append(tok)
            llm.eval([tok])
        lines.append({
            "arch": arch, "seed": seed, "type": qtype, "prompt": prompt, "prompt_ids": ids,
            "gen_ids": gen, "n_vocab": len(logits), "logsumexp": round(lse, 6),
            "top10": [{"id": int(i), "logit": round(float(logits[i]), 6),
                       "logprob": round(float(logits[i] - lse), 6)} for i in top],
        })
    return lines


def main():
    only = set(sys.argv[1:])
    unknown = only - {a for a, _, _ in ARCHS}
    if unknown:
        sys.exit(f"unknown: {sorted(unknown)} (ARCHS has {[a for a, _, _ in ARCHS]})")
    kept = []
    if only and OUT.exists():
        kept = [json.loads(l) for l in OUT.read_text().splitlines() if json.loads(l)["arch"] not in only]
    lines = list(kept)
    with tempfile.TemporaryDirectory() as tmp:
        for arch, seed, qtype in ARCHS:
            if only and arch not in only:
                continue
            path = Path(tmp) / f"{arch}-{seed}-{qtype}.gguf"
            synth(TWIN.get(arch, arch), seed, qtype, path)
            lines += reference(path, arch, seed, qtype)
            print(f"{arch}: {len(PROMPTS)} prompts", file=sys.stderr)
    order = {a: i for i, (a, _, _) in enumerate(ARCHS)}
    lines.sort(key=lambda l: (order.get(l["arch"], len(order)), PROMPTS.index(l["prompt"])))
    OUT.write_text("".join(json.dumps(l) + "\n" for l in lines))


if __name__ == "__main__":
    main()
