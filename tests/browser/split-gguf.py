#!/usr/bin/env python3
"""Writes a GGUF model as a split set (llama.cpp's gguf-split layout, shards named
<stem>-00001-of-0000N.gguf) for the browser tests of split loading.
Usage: split-gguf.py MODEL.gguf OUT_DIR SHARDS"""
import sys
from pathlib import Path

import gguf
from gguf.scripts.gguf_new_metadata import copy_with_new_metadata

src, out_dir, shards = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
reader = gguf.GGUFReader(src)
arch = reader.fields["general.architecture"].contents()
per_shard = -(-len(reader.tensors) // shards)  # ceil: exactly `shards` shards
writer = gguf.GGUFWriter(out_dir / src.name, arch=arch, split_max_tensors=per_shard)
copy_with_new_metadata(reader, writer, {}, [])
