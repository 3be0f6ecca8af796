"""Reading weight files' headers without their tensors: a GGUF file's architecture, a safetensors
file's tensor shapes, those of a folder's (possibly sharded) safetensors weights, and whether a
folder's weights can be read at all (:func:`weights_problem`)."""
from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

REFETCH = "Fix: download or copy the model again (a file cut short is most often a download or copy that stopped)"


def refetch(path: Path) -> str:
    """The fix for a damaged weights file at ``path``: a tiny model's cache folder is built from code,
    so it is deleted and built again on next use; any other model is downloaded or copied again."""
    from .tiny import cache_root          # torch and the corpus: only when a file is found damaged

    cache = cache_root() / "tiny"
    try:
        folder = cache / Path(path).resolve().relative_to(cache.resolve()).parts[0]
    except (ValueError, IndexError):
        return REFETCH
    return f"Fix: delete {folder} (a tiny model, built from code): the next run builds it again"


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
            raise ValueError(f"{path} is not a safetensors file (it has {size} bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, 100 * 2**20):
            raise ValueError(f"{path} is not a safetensors file (its header length is {n} bytes)")
        try:
            header = json.loads(f.read(n))
        except ValueError:
            raise ValueError(f"{path} is not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file (its header is not a JSON object)")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    if 8 + n + end > size:
        raise ValueError(f"{path} is cut short: its header needs {8 + n + end} bytes, the file has {size}")
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


def _lfs_pointer(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(24).startswith(b"version https://git-lfs")


def _safetensors_problem(path: Path) -> str | None:
    try:
        safetensors_shapes(path)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        return f"{exc}. {refetch(path)}"
    return None


def _bin_problem(path: Path) -> str | None:
    """A PyTorch checkpoint is a zip archive whose central directory sits at its very end: a file cut
    short has none, and :class:`zipfile.ZipFile` cannot open it. (A legacy pickle file, from before
    PyTorch 1.6, cannot be checked without reading it, and is let through.)"""
    with open(path, "rb") as f:
        head = f.read(4)
    if not head:
        return f"{path} is empty. {refetch(path)}"
    if head == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return f"{path} is cut short or damaged: its zip directory cannot be read ({exc}). {refetch(path)}"
        if not any(n.endswith("data.pkl") for n in names):
            return f"{path} is a zip archive but not a PyTorch checkpoint (it holds no data.pkl). {refetch(path)}"
        return None
    if head[:1] == b"\x80":
        return None
    return f"{path} is neither a PyTorch checkpoint (a zip archive) nor a pickle. {refetch(path)}"


def _index_problem(index: Path, check) -> str | None:
    """A sharded checkpoint: its index names the shards, each must be there and readable."""
    try:
        files = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
    except (OSError, ValueError, AttributeError) as exc:
        return f"{index} is not a readable index of shards ({exc}). {refetch(index)}"
    missing = [f for f in files if not (index.parent / f).is_file()]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return (f"{index} lists {len(missing)} shard(s) that are not in {index.parent} "
                f"({', '.join(missing[:3])}{more}). {refetch(index)}")
    for f in files:
        problem = _weights_file_problem(index.parent / f, check)
        if problem:
            return problem
    return None


def _weights_file_problem(path: Path, check) -> str | None:
    if _lfs_pointer(path):
        return (f"{path} is a Git LFS pointer, not the weights. Fix: run git lfs pull in {path.parent}, "
                "or download the model again")
    return check(path)


def weights_problem(folder: Path) -> str | None:
    """Why the weights that transformers would load from ``folder`` cannot be read, or None: a
    safetensors file whose header is not one or whose size falls short of its largest data offset,
    a PyTorch zip whose directory cannot be opened, a shard its index lists that is not there, a Git
    LFS pointer in place of the file. Headers and directories alone are read, never the tensors;
    the message names the file and the fix."""
    folder = Path(folder)
    for single, index, check in (("model.safetensors", "model.safetensors.index.json", _safetensors_problem),
                                 ("pytorch_model.bin", "pytorch_model.bin.index.json", _bin_problem)):
        if (folder / single).is_file():
            return _weights_file_problem(folder / single, check)
        if (folder / index).is_file():
            return _index_problem(folder / index, check)
    return None
