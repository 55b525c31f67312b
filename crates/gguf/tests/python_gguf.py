"""Cross-checks with Python's `gguf` package (the reference GGUF implementation).

  python_gguf.py write OUT.gguf        write a small model with gguf.GGUFWriter
  python_gguf.py write-split OUT.gguf  the same model, split into shards of 2 tensors each
  python_gguf.py read IN.gguf          print a JSON summary read with gguf.GGUFReader
"""
import json
import sys

import numpy as np
import gguf


def build(writer):
    writer.add_string("general.name", "py ünïcödé")
    writer.add_uint8("t.u8", 250)
    writer.add_int8("t.i8", -7)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -12345)
    writer.add_uint32("t.u32", 4000000000)
    writer.add_int32("t.i32", -2000000000)
    writer.add_float32("t.f32", 0.15625)
    writer.add_uint64("t.u64", 2**63 + 5)
    writer.add_int64("t.i64", -(2**62))
    writer.add_float64("t.f64", 1e-300)
    writer.add_bool("t.bool", True)
    writer.add_array("t.strings", ["a", "", "ü", "<|im_start|>"])
    writer.add_array("t.ints", [1, 2, 3])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_token_list(["<s>", "</s>", "hello"])

    rng = np.random.default_rng(7)
    writer.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
    writer.add_tensor("f16", rng.standard_normal((2, 4, 6)).astype(np.float16))
    q8 = rng.integers(0, 256, size=(2, 34 * 2), dtype=np.uint8)  # 2 rows of 64 Q8_0 values
    writer.add_tensor("q8", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("i32", np.arange(7, dtype=np.int32))


def write(path, split):
    kwargs = {"split_max_tensors": 2} if split else {}
    writer = gguf.GGUFWriter(path, "llama", **kwargs)
    build(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def plain(v):
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8")
    if isinstance(v, np.generic):
        return v.item()
    return v


def read(path):
    r = gguf.GGUFReader(path)
    out = {"metadata": {}, "tensors": []}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue
        out["metadata"][name] = plain(field.contents())
    for t in r.tensors:
        out["tensors"].append({
            "name": t.name,
            "dims": [int(d) for d in t.shape],
            "type": int(t.tensor_type),
            "offset": int(t.data_offset),
            "size": int(t.n_bytes),
        })
    print(json.dumps(out))


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        write(path, split=False)
    elif mode == "write-split":
        write(path, split=True)
    elif mode == "read":
        read(path)
    else:
        sys.exit(f"unknown mode {mode}")
