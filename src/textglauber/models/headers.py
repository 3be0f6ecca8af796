"""Reading weight files' headers without their tensors: a GGUF file's architecture, a safetensors
file's tensor shapes, and those of a folder's (possibly sharded) safetensors weights."""
from __future__ import annotations

import json
import struct
from pathlib import Path


def gguf_architecture(path: Path) -> str | None:
    """``general.architecture`` from a GGUF file's header (the key-value section only)."""
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(f):
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")

    def skip(f, vtype):
        if vtype in fixed:
            f.seek(fixed[vtype], 1)
        elif vtype == 8:
            (n,) = struct.unpack("<Q", f.read(8))
            f.seek(n, 1)
        elif vtype == 9:
            itype, count = struct.unpack("<IQ", f.read(12))
            if itype in fixed:
                f.seek(fixed[itype] * count, 1)
            else:
                for _ in range(count):
                    skip(f, itype)
        else:
            raise ValueError(f"unknown GGUF value type {vtype}")

    try:
        with open(path, "rb") as f:
            magic, version = f.read(4), struct.unpack("<I", f.read(4))[0]
            if magic != b"GGUF" or version < 2:
                return None
            _, n_kv = struct.unpack("<QQ", f.read(16))
            for _ in range(min(n_kv, 256)):
                key = string(f)
                (vtype,) = struct.unpack("<I", f.read(4))
                if key == "general.architecture" and vtype == 8:
                    return string(f)
                skip(f, vtype)
    except (OSError, ValueError, struct.error):
        return None
    return None


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from a safetensors file's header (8-byte length, then JSON); no tensor data is
    read. Raises ValueError for a file that is not safetensors or is cut short."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path.name} is not a safetensors file (it has {size} bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, 100 * 2**20):
            raise ValueError(f"{path.name} is not a safetensors file (its header length is {n} bytes)")
        try:
            header = json.loads(f.read(n))
        except ValueError:
            raise ValueError(f"{path.name} is not a safetensors file (its header is not JSON)") from None
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    if 8 + n + end > size:
        raise ValueError(f"{path.name} is cut short: its header needs {8 + n + end} bytes, the file has {size}")
    return {k: tuple(int(d) for d in v["shape"]) for k, v in tensors.items()}


def weight_shapes(folder: Path) -> tuple[dict[str, tuple[int, ...]], str] | None:
    """All tensor shapes of a folder's safetensors weights and the file(s) they come from, or None
    where its weights are not safetensors. Raises ValueError for a broken file or a missing shard."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise ValueError(f"model.safetensors.index.json lists {len(missing)} shard(s) that are not there "
                             f"({', '.join(missing[:3])})")
        where = f"the {len(files)} shards of model.safetensors.index.json"
    elif (folder / "model.safetensors").is_file():
        files, where = ["model.safetensors"], "model.safetensors"
    else:
        return None
    shapes = {}
    for f in files:
        shapes.update(safetensors_shapes(folder / f))
    return shapes, where
