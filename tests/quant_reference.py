#!/usr/bin/env python3
"""Reference data for Tessera's quant formats, made with the `gguf` package's `gguf.quants`.

Usage: quant_reference.py OUT_DIR

Writes OUT_DIR/manifest.json and one pair of binary files per case:
  - "dequantize": input = raw blocks, expected = little-endian f32 from gguf.quants.dequantize
  - "quantize":   input = little-endian f32, expected = blocks from gguf.quants.quantize
The Rust test crates/quant/tests/formats_python.rs runs this script and compares its own
output byte for byte. Everything is seeded, so the data is the same on every run.
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf import quants

SEED = 20240611
ROW = 256  # one K-quant super-block, eight 32-element blocks

# Types gguf.quants can quantize (of those Tessera supports); F16 goes through numpy's astype.
QUANTIZABLE = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4]
# Types gguf.quants can dequantize. Q8_1 and Q8_K are absent: gguf.quants has no Q8_1/Q8_K
# classes (and its GGML_QUANT_SIZES still gives Q8_1's old 40-byte float layout).
DEQUANTIZABLE = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                 T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4]

# Byte offsets of the f16 scale fields in each block (ggml-common.h layouts).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.MXFP4: [],  # its scale is one E8M0 byte: every value is a power of two
}


def edge_rows(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows of ROW f32 values that exercise the quantizers' corner cases."""
    f = np.float32
    rows: dict[str, np.ndarray] = {}
    rows["normal"] = rng.standard_normal(ROW).astype(f)
    rows["normal_small"] = (rng.standard_normal(ROW) * 1e-3).astype(f)
    rows["normal_large"] = (rng.standard_normal(ROW) * 300).astype(f)
    rows["uniform"] = rng.uniform(-1, 1, ROW).astype(f)
    rows["zeros"] = np.zeros(ROW, f)
    rows["constant_pos"] = np.full(ROW, 0.25, f)
    rows["constant_neg"] = np.full(ROW, -3.0, f)
    outlier = rng.standard_normal(ROW).astype(f)
    outlier[37] = 1e4
    outlier[200] = -7e4  # beyond f16's range: F16 gives -inf, Q4_1's f16 min too
    rows["outlier"] = outlier
    rows["tiny"] = (rng.standard_normal(ROW) * 1e-8).astype(f)  # f16 scales underflow
    rows["subnormal"] = (rng.standard_normal(ROW) * 1e-39).astype(f)  # f32 subnormals
    rows["negative_only"] = -np.abs(rng.standard_normal(ROW)).astype(f) - f(0.1)
    rows["positive_only"] = np.abs(rng.standard_normal(ROW)).astype(f) + f(2.0)
    # Opposite signs of equal magnitude: the first one decides the sign of the scale.
    ties = rng.uniform(-1, 1, ROW).astype(f)
    ties[0::32] = -2.0
    ties[5::32] = 2.0
    rows["absmax_sign_tie"] = ties
    # Exact .5 ties in each block: with amax 127 (Q8_0: d = 1), max -8 (Q4_0: d = 1),
    # min 0 / max 15 (Q4_1: d = 1), and values one ulp around them.
    half = (rng.integers(-120, 120, ROW) + 0.5).astype(f)
    half[0::32] = 127.0
    rows["half_ties_q8"] = half
    half4 = (rng.integers(-8, 7, ROW) + 0.5).astype(f)
    half4[0::32] = -8.0
    rows["half_ties_q4_0"] = half4
    half41 = (rng.integers(0, 15, ROW) + 0.5).astype(f)
    half41[0::32] = 0.0
    half41[1::32] = 15.0
    rows["half_ties_q4_1"] = half41
    nudged = half.copy()
    nudged[1::2] = np.nextafter(nudged[1::2], f(np.inf))
    nudged[2::2] = np.nextafter(nudged[2::2], f(-np.inf))
    nudged[0::32] = 127.0
    rows["half_ties_nudged"] = nudged
    rows["bf16_round_even"] = np.frombuffer(
        (rng.integers(0, 1 << 16, ROW, dtype=np.uint32) << 16 | 0x8000).astype(np.uint32).tobytes(),
        dtype=f)
    bf = rows["bf16_round_even"]
    rows["bf16_round_even"] = np.where(np.isfinite(bf), bf, f(1.0)).astype(f)
    # MXFP4's shared exponent is floor(log2f(amax)): block maxima at and one or two ulps below
    # powers of two (where log2f already rounds to the integer), and FP4 midpoints (ties
    # between neighbouring codes) in each block.
    k = np.arange(ROW // 32) * 5 - 20
    amax = np.float32(2.0) ** k.astype(f)
    below = rng.uniform(-1, 1, ROW).astype(f) * np.repeat(amax, 32) * f(0.5)
    below[0::32] = amax
    below[1::32] = amax * (f(1) - f(2.0**-24))
    below[2::32] = -np.nextafter(np.nextafter(amax, f(0)), f(0))
    rows["mxfp4_powers_of_two"] = below
    mids = np.tile(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, -5.0, 6.0], f), ROW)[:ROW]
    mids = mids * np.repeat(np.float32(2.0) ** (np.arange(ROW // 32) - 3).astype(f), 32)
    rows["mxfp4_midpoints"] = mids.astype(f)
    below2 = np.repeat(amax, 32) * f(0.1)
    below2[0::32] = np.nextafter(amax, f(0))
    rows["mxfp4_just_below_powers"] = below2.astype(f)
    return rows


def sane_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite f16 scales of varied magnitude and sign, with zeros and subnormals mixed in."""
    vals = (rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-16, 6, n)).astype(np.float16)
    specials = np.array([0.0, -0.0, 6e-8, -6e-8, 1e-5, 65504.0, 1.0, -1.0], np.float16)
    pick = rng.random(n) < 0.1
    vals[pick] = rng.choice(specials, int(pick.sum()))
    return vals


def random_blocks(rng: np.random.Generator, qtype: T, n_blocks: int) -> np.ndarray:
    """Random block bytes whose f16 scale fields hold sane (finite) values."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = sane_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw


def random_halves(rng: np.random.Generator, qtype: T, n: int) -> np.ndarray:
    """Random 16-bit patterns for F16 (NaNs replaced: their payloads are not ours to pin
    down) or BF16 (every pattern, NaNs included: the conversion is a shift)."""
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    if qtype == T.F16:
        nan = (bits & 0x7C00) == 0x7C00
        nan &= (bits & 0x03FF) != 0
        bits[nan] = 0x7C00  # +inf
    extra = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00], np.uint16)
    bits[: len(extra)] = extra
    return bits.view(np.uint8)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    warnings.simplefilter("ignore")  # f16 overflow in the outlier rows is intended
    np.seterr(all="ignore")
    cases = []

    def add(op: str, qtype: T, name: str, inp: np.ndarray, expected: np.ndarray, n: int) -> None:
        stem = f"{op}_{qtype.name}_{name}"
        (out / f"{stem}.in").write_bytes(np.ascontiguousarray(inp).tobytes())
        (out / f"{stem}.out").write_bytes(np.ascontiguousarray(expected).tobytes())
        cases.append({"op": op, "type": qtype.name, "name": name, "n": n,
                      "input": f"{stem}.in", "expected": f"{stem}.out"})

    rows = edge_rows(rng)
    for qtype in QUANTIZABLE:
        for name, row in rows.items():
            q = quants.quantize(row.reshape(1, -1), qtype).view(np.uint8)
            add("quantize", qtype, name, row.astype("<f4"), q, ROW)
            # The blocks python made must also dequantize identically.
            d = quants.dequantize(q, qtype).astype("<f4")
            add("dequantize", qtype, "from_" + name, q, d, ROW)

    for qtype in DEQUANTIZABLE:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        if qtype in (T.F16, T.BF16):
            raw = random_halves(rng, qtype, 4096)
        else:
            raw = random_blocks(rng, qtype, 256)
        n = raw.size // type_size * block_size
        d = quants.dequantize(raw.reshape(1, -1), qtype).astype("<f4")
        add("dequantize", qtype, "random", raw, d, n)

    (out / "manifest.json").write_text(json.dumps({"seed": SEED, "cases": cases}, indent=1))
    print(f"{len(cases)} cases written to {out}")


if __name__ == "__main__":
    main()
