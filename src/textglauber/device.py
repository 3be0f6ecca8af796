"""The one place where device and dtype are decided.

Model weights may be bf16 on a GPU; every score the library computes is float32
(``SCORE_DTYPE``) or wider, and the conditionals that chains sample from are float64 in every
engine mode (``engine.sampling.cdf_of``, the jump and coupling tables, the exact kernels).
"""
from __future__ import annotations

import torch

SCORE_DTYPE = torch.float32

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16,
}


def pick_device(device: str | None = "auto") -> torch.device:
    """``auto`` means CUDA when present, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for but CUDA is not available here")
    return dev


def measurement_dtype(dtype: str | None) -> str:
    """Weights for the chapters that measure conditionals (incompatibility, bounds, ground truth):
    float32 on every device unless a dtype is named. bf16 weights move R by up to about 0.2 nats
    per rectangle (its noise floor, which the incompatibility chapter shows), so only long chains
    use them."""
    return "float32" if dtype in (None, "auto") else str(dtype)


def pick_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """``auto`` means bf16 weights on CUDA and float32 on CPU."""
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)} or 'auto'") from None
